/*
 * graph-run.h - helpers the engine tests share: give every tensor of a
 * graph its own memory (no reuse at all), and run a graph on the calling
 * thread, playing NTH threads one after another (each phase of a node
 * runs thread 0..NTH-1 in turn, which is what a barrier between phases
 * allows).
 */
#ifndef QG_TEST_GRAPH_RUN_H
#define QG_TEST_GRAPH_RUN_H

#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "ops.h"

/* Memory handed out by gr_own(), freed by gr_free_all(). */
struct gr_mem {
	void **p;
	size_t n, cap;
};

__attribute__((unused))
static void *gr_alloc(struct gr_mem *m, size_t size)
{
	void *p = NULL;

	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 64;
		void **np = realloc(m->p, cap * sizeof *np);
		if (!np)
			return NULL;
		m->p = np;
		m->cap = cap;
	}
	if (posix_memalign(&p, 64, size ? size : 1))
		return NULL;
	memset(p, 0, size ? size : 1);
	m->p[m->n++] = p;
	return p;
}

__attribute__((unused))
static void gr_free_all(struct gr_mem *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->p[i]);
	free(m->p);
	memset(m, 0, sizeof *m);
}

/* Give T (and its view source first) memory of its own if it has none. */
__attribute__((unused))
static int gr_own(struct gr_mem *m, struct qg_tensor *t)
{
	if (t->data)
		return 0;
	if (t->view_src) {
		if (gr_own(m, t->view_src) < 0)
			return -1;
		t->data = (char *)t->view_src->data + t->view_offs;
		return 0;
	}
	t->data = gr_alloc(m, qg_tensor_nbytes(t));
	return t->data ? 0 : -1;
}

/* Every leaf and node of G gets memory of its own. */
__attribute__((unused))
static int gr_own_graph(struct gr_mem *m, struct qg_graph *g)
{
	for (size_t i = 0; i < g->n_leafs; i++)
		if (gr_own(m, g->leafs[i]) < 0)
			return -1;
	for (size_t i = 0; i < g->n_nodes; i++)
		if (gr_own(m, g->nodes[i]) < 0)
			return -1;
	return 0;
}

/* Views made before their source had data point into it now. */
__attribute__((unused))
static void gr_fix_views(struct qg_graph *g)
{
	for (size_t i = 0; i < g->n_nodes; i++) {
		struct qg_tensor *t = g->nodes[i];
		if (t->view_src && t->view_src->data)
			t->data = (char *)t->view_src->data + t->view_offs;
	}
}

/* Run node T on NTH pretend threads.  0, or the first error an op returned. */
__attribute__((unused))
static int gr_run_node(struct qg_tensor *t, int nth)
{
	size_t ss = qg_op_scratch_size(t, nth);
	void *scratch = NULL;
	int err = 0;

	if (ss && posix_memalign(&scratch, 64, ss))
		return -12;
	for (int ph = 0; ph < qg_op_n_phases(t); ph++)
		for (int ith = 0; ith < nth; ith++) {
			int r = qg_op_compute(t, ph, ith, nth, scratch);
			if (r && !err)
				err = r;
		}
	free(scratch);
	return err;
}

/* Run every node of G in order; 0 or the first error. */
__attribute__((unused))
static int gr_run(struct qg_graph *g, int nth)
{
	int err = 0;

	for (size_t i = 0; i < g->n_nodes; i++) {
		int r = qg_op_check(g->nodes[i]) ?: qg_op_check_data(g->nodes[i]);
		if (!r)
			r = gr_run_node(g->nodes[i], nth);
		if (r && !err)
			err = r;
	}
	return err;
}

#endif /* QG_TEST_GRAPH_RUN_H */
