/*
 * graphs.c - a session's graphs: the engine graph the wire built, placed
 * in the session's pieces of the pool and planned on a backend, checked
 * against the session's quotas, and registered for reuse (see graphs.h).
 * The request edge (requests.c) builds them from the wire; the executor
 * (exec.c) runs them.  No protobuf here.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accounts.h"
#include "backend.h"
#include "galloc.h"
#include "graphs.h"
#include "hugepool.h"
#include "ops.h"
#include "server.h"
#include "session.h"

/*
 * Whether some tensor of GR has no bytes yet.  The wire gives arena and
 * weight tensors theirs as it builds the graph, and a view of one of them
 * its root's; what is left (intermediates, views of them) is the graph
 * allocator's to place.
 */
static bool has_intermediates(const struct qg_graph *gr)
{
	for (size_t i = 0; i < gr->n_nodes; i++)
		if (!gr->nodes[i]->data)
			return true;
	for (size_t i = 0; i < gr->n_leafs; i++)
		if (!gr->leafs[i]->data)
			return true;
	return false;
}

/*
 * What the graph allocator keeps for a graph (galloc.c holds it private):
 * per tensor a slot (the tensor, its sources and what the plan was made
 * for) and an object (its lifetime and offsets), a hash entry and its
 * index; and per buffer a table of free blocks.  Counted from above.
 */
#define GALLOC_TENSOR_BYTES 192u
#define GALLOC_FIXED_BYTES 8192u

/*
 * The heap G holds beside its pool buffer: its engine graph, tensor
 * structs and tensor list, the allocator's tables and the plan (its
 * tables and scratch).  What client-memory counts for a graph's
 * metadata.  No sum overflows: each part was allocated.
 */
static size_t graph_meta_bytes(const struct qgd_graph *g)
{
	const struct qg_graph *gr = g->wg.graph;
	size_t b = sizeof *g + qg_ctx_bytes(g->wg.ctx) + qg_graph_bytes(gr) + g->wg.n_tensors * sizeof *g->wg.tensors +
		   qg_backend_graph_plan_bytes(g->plan);

	if (g->ga)
		b += GALLOC_FIXED_BYTES + (gr->n_nodes + gr->n_leafs) * GALLOC_TENSOR_BYTES;
	return b;
}

/*
 * Place every tensor that has no data yet with the graph allocator:
 * intermediates share one buffer wherever their lifetimes allow, views
 * point into their sources.  Scratch is sized for the largest node.  The
 * plan is made on SMALL or LARGE by the graph's work.  0 or -errno from
 * the allocator (-ENOMEM, -ENOSPC, -EOVERFLOW).
 */
static int place(struct qgd_session *s, struct qgd_graph *g, struct qg_backend *small, struct qg_backend *large)
{
	struct qgd_server *srv = s->srv;
	struct qg_graph *gr = g->wg.graph;
	int r;

	for (size_t i = 0; i < gr->n_nodes; i++) {
		struct qg_tensor *t = gr->nodes[i];
		uint64_t w = qg_op_work(t);
		if (t->op == QG_OP_MUL_MAT)
			g->mm_interleaved += qg_type_is_interleaved(t->src[0]->type) != 0;
		g->work = g->work + w < g->work ? UINT64_MAX : g->work + w;
	}
	/* the session's own pieces of the pool: zeroed where another session had them */
	if (!s->buft && (r = qg_buft_hugepool_new(srv->pool, s->id, &s->buft)))
		return r;
	/* a graph whose every tensor already has its bytes needs no allocator, nor its time */
	if (has_intermediates(gr) &&
	    ((r = qg_galloc_new(&s->buft, 1, NULL, &g->ga)) || (r = qg_galloc_reserve(g->ga, gr, NULL, NULL)) ||
	     (r = qg_galloc_alloc_graph(g->ga, gr))))
		return r;
	g->buf_bytes = g->ga ? qg_galloc_buffer_size(g->ga, 0) : 0;
	g->be = qgd_graph_small(g) ? small : large;
	if ((r = qg_backend_graph_plan_create(g->be, gr, &g->plan)))
		return r;
	g->meta_bytes = graph_meta_bytes(g);
	return 0;
}

void qgd_graph_free(struct qgd_graph *g)
{
	if (!g)
		return;
	if (g->plan)
		qg_backend_graph_plan_free(g->be, g->plan);
	if (g->ga) {
		qg_galloc_unplace(g->ga, g->wg.graph);
		qg_galloc_free(g->ga);
	}
	qg_wire_graph_free(&g->wg);
	free(g);
}

struct qgd_graph *qgd_graph_new(void)
{
	return calloc(1, sizeof(struct qgd_graph));
}

int qgd_graph_place(struct qgd_session *s, struct qgd_graph *g, bool keep, struct qg_backend *small,
		    struct qg_backend *large, char *msg, size_t len)
{
	const struct qgd_config *cfg = &s->srv->cfg;
	int r;

	if (keep && s->n_graphs >= cfg->max_graphs) {
		snprintf(msg, len, "quota max-graphs: this session has %zu registered graphs", s->n_graphs);
		return -EDQUOT;
	}
	if ((r = place(s, g, small, large))) {
		if (r == -ENOSPC) {
			snprintf(msg, len, "quota pool-size: the pool has no room for this graph's intermediates");
			return -EDQUOT;
		}
		snprintf(msg, len, "no memory for the intermediates: %s", strerror(-r));
		return -ENOMEM;
	}
	/* its intermediates are in the pool already, its metadata on the heap: both count, whether it is kept or not */
	uint64_t pool = qg_hugepool_in_use(s->srv->pool, s->id), meta = s->graph_bytes + g->meta_bytes;
	uint64_t budget = cfg->client_memory ? cfg->client_memory : cfg->pool_bytes;
	if (pool + meta > budget) {
		snprintf(msg, len,
			 "quota client-memory: this graph would make this session hold %llu bytes "
			 "(%llu pool bytes of intermediates, %llu of graph metadata), at most %llu",
			 (unsigned long long)(pool + meta), (unsigned long long)pool, (unsigned long long)meta,
			 (unsigned long long)budget);
		return -EDQUOT;
	}
	/* and the metadata of all its user's sessions together */
	return qgd_account_check_graphs(s->srv, s->acct, g->meta_bytes, msg, len);
}

int qgd_graph_register(struct qgd_session *s, struct qgd_graph *g)
{
	void *p = realloc(s->graphs, (s->n_graphs + 1) * sizeof *s->graphs);

	if (!p)
		return -ENOMEM;
	s->graphs = p;
	g->handle = s->next_handle++;
	s->graphs[s->n_graphs++] = g;
	s->graph_bytes += g->meta_bytes;
	s->acct->graph_bytes += g->meta_bytes;
	return 0;
}

struct qgd_graph *qgd_graph_find(const struct qgd_session *s, uint64_t handle)
{
	for (size_t i = 0; i < s->n_graphs; i++)
		if (s->graphs[i]->handle == handle)
			return s->graphs[i];
	return NULL;
}

/* Lines of a graph's leafs and nodes asked for ahead of a run: enough for a small graph's every tensor. */
#define PREFETCH_TENSORS 8

void qgd_graph_prefetch(const struct qgd_session *s, uint64_t handle)
{
	const struct qgd_graph *g = qgd_graph_find(s, handle);

	if (!g || !qgd_graph_small(g))
		return;	/* a large graph's first lines are nothing beside its run */
	const struct qg_graph *gr = g->wg.graph;
	for (size_t i = 0; i < gr->n_leafs && i < PREFETCH_TENSORS; i++)
		if (gr->leafs[i]->data)
			__builtin_prefetch(gr->leafs[i]->data, 0);
	for (size_t i = 0; i < gr->n_nodes && i < PREFETCH_TENSORS; i++)
		if (gr->nodes[i]->data)
			__builtin_prefetch(gr->nodes[i]->data, 1);
}

int qgd_graph_forget(struct qgd_session *s, uint64_t handle)
{
	for (size_t i = 0; i < s->n_graphs; i++) {
		if (s->graphs[i]->handle != handle)
			continue;
		s->graph_bytes -= s->graphs[i]->meta_bytes;
		s->acct->graph_bytes -= s->graphs[i]->meta_bytes;
		qgd_graph_free(s->graphs[i]);
		s->graphs[i] = s->graphs[--s->n_graphs];
		return 0;
	}
	return -ENOENT;
}

bool qgd_graphs_use_weights(const struct qgd_session *s, const void *data)
{
	for (size_t i = 0; i < s->n_graphs; i++) {
		struct qg_graph *gr = s->graphs[i]->wg.graph;
		for (size_t j = 0; j < gr->n_leafs; j++)
			if (gr->leafs[j]->data == data)
				return true;
	}
	return false;
}

void qgd_graphs_release(struct qgd_session *s)
{
	for (size_t i = 0; i < s->n_graphs; i++)
		qgd_graph_free(s->graphs[i]);
	free(s->graphs);
	s->graphs = NULL;
	s->n_graphs = 0;
	s->acct->graph_bytes -= s->graph_bytes;
	s->graph_bytes = 0;
	if (s->buft) {
		qg_buft_hugepool_free(s->buft);
		s->buft = NULL;
	}
	/* nothing should be left; if a buffer leaked, the pool still gets it back */
	size_t left = qg_hugepool_release_owner(s->srv->pool, s->id);
	if (left)
		qgd_warn("session %llu: %zu bytes of the pool were still held at its end", (unsigned long long)s->id, left);
}

uint32_t qgd_graphs_count(const struct qgd_server *srv)
{
	uint32_t n = 0;

	qgd_roster_each(srv, s)
		n += (uint32_t)s->n_graphs;
	return n;
}
