/*
 * exec.c - graphs of sessions: build from the wire, register, place the
 * intermediates, compute, answer (see exec.h).
 *
 * Graphs run on the loop's thread, one request at a time, in the fair order
 * the loop's scan gives; a graph past its time limit is cancelled at the
 * next node boundary.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "ops.h"

struct qgd_graph {
	uint64_t handle;
	struct qg_wire_graph wg;
	unsigned char *buf;		/* intermediates */
	size_t buf_bytes;
	unsigned char *scratch;
	size_t scratch_bytes;
	uint64_t runs;
};

int qgd_exec_init(struct qgd_server *srv)
{
	(void)srv;
	return 0;
}

void qgd_exec_fini(struct qgd_server *srv)
{
	(void)srv;
}

uint32_t qgd_exec_plans(const struct qgd_server *srv)
{
	uint32_t n = 0;

	for (const struct qgd_session *s = srv->sessions; s; s = s->next)
		n += (uint32_t)s->n_graphs;
	return n;
}

const char *qgd_exec_pool_kind(const struct qgd_server *srv)
{
	(void)srv;
	return "host memory";
}

int qgd_exec_threads(const struct qgd_server *srv)
{
	(void)srv;
	return 1;
}

static size_t align_up(size_t n, size_t a)
{
	return (n + a - 1) & ~(a - 1);
}

/*
 * Place every tensor that has no data yet: intermediates get room of their
 * own in G's buffer, views point into their sources.  Scratch is sized for
 * the largest node.  0 or -ENOMEM / -EOVERFLOW.
 */
static int place(struct qgd_graph *g)
{
	struct qg_graph *gr = g->wg.graph;
	size_t total = 0, scratch = 0;

	for (size_t i = 0; i < gr->n_nodes; i++) {
		struct qg_tensor *t = gr->nodes[i];
		if (!t->data && !t->view_src) {
			size_t n = align_up(qg_tensor_nbytes(t), 64);
			if (n < qg_tensor_nbytes(t) || total > SIZE_MAX - n)
				return -EOVERFLOW;
			total += n;
		}
		size_t sc = qg_op_scratch_size(t, 1);
		if (sc > scratch)
			scratch = sc;
	}
	g->buf = total ? aligned_alloc(64, total) : NULL;
	g->scratch = scratch ? aligned_alloc(64, align_up(scratch, 64)) : NULL;
	if ((total && !g->buf) || (scratch && !g->scratch))
		return -ENOMEM;
	g->buf_bytes = total;
	g->scratch_bytes = scratch;
	size_t at = 0;
	for (size_t i = 0; i < gr->n_nodes; i++) {
		struct qg_tensor *t = gr->nodes[i];
		if (!t->data && !t->view_src) {
			t->data = g->buf + at;
			at += align_up(qg_tensor_nbytes(t), 64);
		}
		if (!t->data && t->view_src && t->view_src->data)
			t->data = (unsigned char *)t->view_src->data + t->view_offs;
	}
	return 0;
}

static void graph_free(struct qgd_graph *g)
{
	if (!g)
		return;
	qg_wire_graph_free(&g->wg);
	free(g->buf);
	free(g->scratch);
	free(g);
}

/* Compute G; 0, or -ETIMEDOUT at a node boundary past DEADLINE, or a node's error. */
static int compute(struct qgd_graph *g, uint64_t deadline_ns, size_t *failed_node)
{
	struct qg_graph *gr = g->wg.graph;

	for (size_t i = 0; i < gr->n_nodes; i++) {
		struct qg_tensor *t = gr->nodes[i];
		if (qgd_now_ns() > deadline_ns)
			return -ETIMEDOUT;
		int phases = qg_op_n_phases(t);
		for (int p = 0; p < phases; p++) {
			int err = qg_op_compute(t, p, 0, 1, g->scratch);
			if (err) {
				*failed_node = i;
				return err;
			}
		}
	}
	return 0;
}

/* Run G and answer request RID of S, recording events with the outcome. */
static void run_and_answer(struct qgd_session *s, uint64_t rid, struct qgd_graph *g, uint64_t t_decoded,
			   uint64_t t_placed, uint32_t timeout_ms, Qgraph__EventRef **rec, size_t n_rec)
{
	uint64_t limit = timeout_ms ? timeout_ms : s->srv->cfg.graph_timeout_ms;
	size_t bad = 0;
	int err = compute(g, t_placed + limit * 1000000u, &bad);
	uint64_t t_done = qgd_now_ns();
	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	Qgraph__Timings tm = QGRAPH__TIMINGS__INIT;
	char msg[160];

	s->srv->graphs_run++;
	g->runs++;
	qgd_session_record_events(s, rec, n_rec, err);
	tm.decode_ns = t_decoded - s->req_started_ns;
	tm.alloc_ns = t_placed - t_decoded;
	tm.compute_ns = t_done - t_placed;
	tm.total_ns = t_done - s->req_started_ns;
	c.request_id = rid;
	c.timings = &tm;
	c.handle = g->handle;
	if (err == -ETIMEDOUT) {
		c.status = QGRAPH__STATUS__STATUS_TIMED_OUT;
		snprintf(msg, sizeof msg, "cancelled after %llu ms, the graph's time limit",
			 (unsigned long long)limit);
		c.error = msg;
	} else if (err) {
		c.status = QGRAPH__STATUS__STATUS_INVALID;
		snprintf(msg, sizeof msg, "node %zu (%s) failed: %s", bad, qg_op_name(g->wg.graph->nodes[bad]->op),
			 err == -ERANGE ? "a row index out of range" : strerror(-err));
		c.error = msg;
	}
	qgd_session_complete(s, &c);
}

void qgd_exec_submit(struct qgd_session *s, uint64_t rid, const Qgraph__SubmitGraph *sg,
		     const struct qg_wire_env *env)
{
	char err[256];
	struct qgd_graph *g = calloc(1, sizeof *g);
	int r;

	s->req = NULL;
	if (!g)
		return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
	r = qg_wire_graph_build(sg, env, &g->wg, err, sizeof err);
	if (r) {
		graph_free(g);
		return qgd_session_fail(s, rid,
					r == -ENOENT ? QGRAPH__STATUS__STATUS_NOT_FOUND
					: r == -E2BIG ? QGRAPH__STATUS__STATUS_QUOTA
					: r == -ENOMEM ? QGRAPH__STATUS__STATUS_NO_MEMORY
						       : QGRAPH__STATUS__STATUS_INVALID,
					"%s%s", r == -E2BIG ? "quota max_nodes: " : "", err);
	}
	uint64_t t_decoded = qgd_now_ns();
	if ((r = place(g))) {
		graph_free(g);
		return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory for the intermediates");
	}
	uint64_t t_placed = qgd_now_ns();
	if (sg->keep) {
		void *p = realloc(s->graphs, (s->n_graphs + 1) * sizeof *s->graphs);
		if (!p) {
			graph_free(g);
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
		}
		s->graphs = p;
		g->handle = s->next_handle++;
		s->graphs[s->n_graphs++] = g;
	}
	run_and_answer(s, rid, g, t_decoded, t_placed, sg->timeout_ms, sg->record, sg->n_record);
	if (!sg->keep)
		graph_free(g);
}

void qgd_exec_run_registered(struct qgd_session *s, uint64_t rid, const Qgraph__RunGraph *run)
{
	s->req = NULL;
	for (size_t i = 0; i < s->n_graphs; i++) {
		struct qgd_graph *g = s->graphs[i];
		if (g->handle != run->graph)
			continue;
		uint64_t t = qgd_now_ns();
		/* the plan was checked when the graph was registered, and nothing in it has changed */
		run_and_answer(s, rid, g, t, t, run->timeout_ms, run->record, run->n_record);
		return;
	}
	qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND, "no registered graph %llu",
			 (unsigned long long)run->graph);
}

void qgd_exec_free_graph(struct qgd_session *s, uint64_t rid, uint64_t handle)
{
	for (size_t i = 0; i < s->n_graphs; i++) {
		if (s->graphs[i]->handle != handle)
			continue;
		graph_free(s->graphs[i]);
		s->graphs[i] = s->graphs[--s->n_graphs];
		Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
		c.request_id = rid;
		return qgd_session_complete(s, &c);
	}
	qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND, "no registered graph %llu",
			 (unsigned long long)handle);
}

int qgd_exec_weights_in_use(struct qgd_session *s, const void *data)
{
	for (size_t i = 0; i < s->n_graphs; i++) {
		struct qg_graph *gr = s->graphs[i]->wg.graph;
		for (size_t j = 0; j < gr->n_leafs; j++)
			if (gr->leafs[j]->data == data)
				return 1;
	}
	return 0;
}

int qgd_exec_waited_too_long(struct qgd_session *s, uint32_t timeout_ms)
{
	uint64_t limit = timeout_ms ? timeout_ms : s->srv->cfg.graph_timeout_ms;

	return qgd_now_ns() - s->req_started_ns > limit * 1000000u;
}

void qgd_exec_release_session(struct qgd_session *s)
{
	for (size_t i = 0; i < s->n_graphs; i++)
		graph_free(s->graphs[i]);
	free(s->graphs);
	s->graphs = NULL;
	s->n_graphs = 0;
}
