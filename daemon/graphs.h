/*
 * graphs.h - a session's graphs (graphs.c): the engine graph the wire
 * built, placed in the pool and planned on a backend, registered for
 * reuse, freed.  Plain C structures: no protobuf.
 */
#ifndef QGD_GRAPHS_H
#define QGD_GRAPHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"	/* struct qg_wire_graph, the engine graph the wire built */

struct qg_backend;
struct qgd_server;
struct qgd_session;

/* Graphs with less work than this run on the loop's thread: handing them over costs more. */
#define QGD_INLINE_WORK (UINT64_C(1) << 20)

struct qgd_graph {
	uint64_t handle;
	struct qg_wire_graph wg;
	struct qg_galloc *ga;		/* places the intermediates */
	size_t buf_bytes;
	struct qg_backend *be;		/* runs it: the pool, or the loop's thread alone */
	struct qg_plan *plan;
	uint64_t work;			/* multiply-accumulates and elements, to choose where it runs */
	uint32_t mm_interleaved;	/* its MUL_MATs on weights in an interleaved layout (stats) */
	uint64_t runs;
	uint64_t last_compute_ns;	/* its last whole run on the executor: what the next is expected to take */
	size_t meta_bytes;		/* the heap it holds (graph_meta_bytes), counted in client-memory and user-graph-metadata */
};

/* True if G is small (QGD_INLINE_WORK): it runs on the loop's thread, where handing it over would cost more. */
static inline bool qgd_graph_small(const struct qgd_graph *g)
{
	return g->work < QGD_INLINE_WORK;
}

/* A new, empty graph for the wire to build into G->wg, or NULL. */
struct qgd_graph *qgd_graph_new(void);
/* Free G: its plan, its placement and its engine graph.  NULL is fine. */
void qgd_graph_free(struct qgd_graph *g);
/*
 * Make G, built, ready to run for S: max-graphs checked first if it is to
 * be kept (KEEP), its intermediates placed in S's pieces of the pool, its
 * plan made on SMALL or LARGE by its work, and client-memory and
 * user-graph-metadata (its user's sessions together) checked.
 * 0, or -EDQUOT (a quota) or -ENOMEM with the refusal, naming its quota,
 * in MSG (LEN bytes).  G stays the caller's either way.
 */
int qgd_graph_place(struct qgd_session *s, struct qgd_graph *g, bool keep, struct qg_backend *small,
		    struct qg_backend *large, char *msg, size_t len);
/* Register G, placed, with S under a new handle: S holds it from now.  0 or -ENOMEM (G still the caller's). */
int qgd_graph_register(struct qgd_session *s, struct qgd_graph *g);
/* S's registered graph HANDLE, or NULL. */
struct qgd_graph *qgd_graph_find(const struct qgd_session *s, uint64_t handle);
/*
 * Ask for the first lines of registered graph HANDLE's tensors (if S has
 * it, and it is small), so that they travel from the client's cache while
 * its request is checked: a hint, nothing more.
 */
void qgd_graph_prefetch(const struct qgd_session *s, uint64_t handle);
/* Free S's registered graph HANDLE.  0 or -ENOENT. */
int qgd_graph_forget(struct qgd_session *s, uint64_t handle);
/* True if a registered graph of S reads the weights at DATA. */
bool qgd_graphs_use_weights(const struct qgd_session *s, const void *data);
/* Free every graph S registered and give S's pieces of the pool back. */
void qgd_graphs_release(struct qgd_session *s);
/* Graphs registered by every session of SRV (stats). */
uint32_t qgd_graphs_count(const struct qgd_server *srv);

#endif /* QGD_GRAPHS_H */
