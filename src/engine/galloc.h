/*
 * galloc.h - the graph allocator: plan where every intermediate tensor of a
 * graph lives, size one buffer per buffer type from the plan, and place the
 * tensors.
 *
 * The graph is walked once in execution order.  A tensor is born when its
 * node runs (leafs and inputs before the first node) and dies when its last
 * child has run and its last view is done; outputs (and weights) never die.
 * A node whose op allows it (qg_op_can_inplace) takes over the memory of its
 * first source when that source has this node as its only child, no views,
 * the same layout, is not an output, input, weight or leaf, and lives in the
 * same buffer.  Tensors that already have data (the caller's) or that are
 * views are not planned: a view gets its source's bytes when it is placed.
 *
 * Each born tensor (or in-place chain) is an object with a lifetime; two
 * placements put objects at offsets in their buffer:
 *   greedy   in execution order, best fit over the free blocks of a dynamic
 *            allocator (dalloc.h): the seed's placement;
 *   by size  knowing every lifetime ahead, the largest object first, each at
 *            the best-fitting gap among the objects whose lifetimes overlap
 *            its own.
 * The default keeps, per buffer, whichever gives the smaller buffer.
 *
 * Several buffer types may serve one graph (an id per node and leaf); an id
 * that names the same buffer type as an earlier id shares its planner and
 * its buffer (allocated once, freed once, counted once).
 *
 * Nothing here aborts: a full free-block table, no room under a buffer
 * type's max_size, a failed malloc or buffer allocation is returned as
 * -errno, and the plan is then dropped.
 *
 * A tensor placed by the allocator points into its buffers: such a graph
 * must be allocated again with this allocator (or not used) once another
 * graph's reserve has grown the buffers, and qg_galloc_unplace() takes the
 * pointers back before the allocator is freed.
 */
#ifndef QG_GALLOC_H
#define QG_GALLOC_H

#include <stdbool.h>
#include <stddef.h>

#include "buffer.h"
#include "graph.h"

struct qg_galloc;

enum qg_galloc_placement {
	QG_GALLOC_BEST = 0,	/* both below, the smaller buffer kept per buffer */
	QG_GALLOC_GREEDY,	/* the seed's: best fit in execution order */
	QG_GALLOC_BY_SIZE,	/* lifetimes known ahead, largest first */
};

struct qg_galloc_options {
	enum qg_galloc_placement placement;
	/* free blocks the greedy planner may track per buffer (0: 256) */
	size_t max_free_blocks;
};

/*
 * Test-only faults: deliberately broken plans, so that a test can show
 * that it catches a broken allocator.  Never set outside tests.
 */
enum qg_galloc_fault {
	QG_GALLOC_FAULT_NONE = 0,
	QG_GALLOC_FAULT_EARLY_FREE,	/* a tensor dies one step early: before its last child runs */
	QG_GALLOC_FAULT_IGNORE_VIEWS,	/* a tensor dies when its children are done, views or not */
};

/* What one buffer's plan came to (see qg_galloc_stats). */
struct qg_galloc_stats {
	size_t planned;		/* bytes the buffer must hold for the plan in use */
	size_t greedy;		/* the greedy placement's peak (SIZE_MAX: not run or failed) */
	size_t by_size;		/* the by-size placement's peak (SIZE_MAX: not run) */
	size_t live_peak;	/* the largest sum of live objects at any step: no placement does better */
	size_t buffer;		/* the buffer's size now (0: none) */
	size_t objects;		/* objects planned in this buffer */
	size_t inplace;		/* nodes that took over their source's memory */
};

/*
 * An allocator for N_BUFTS (>= 1) buffer types BUFTS (copied; the same
 * pointer may appear more than once) in *OUT.  OPT may be NULL (the
 * defaults).  0, or -EINVAL / -ENOMEM.
 */
int qg_galloc_new(struct qg_buft *const *bufts, int n_bufts, const struct qg_galloc_options *opt,
		  struct qg_galloc **out);
/* Free GA and its buffers (each once).  NULL is fine. */
void qg_galloc_free(struct qg_galloc *ga);

/*
 * Plan G: NODE_IDS[i] is the buffer id of G->nodes[i], LEAF_IDS[i] that of
 * G->leafs[i] (NULL: all 0).  Tensors placed by GA before lose their data
 * first.  Buffers too small for the plan are allocated anew (never shrunk).
 * 0, or -EINVAL (a bad id, a source outside G), -ENOSPC (no room under a
 * buffer type's max_size, or the greedy planner's free-block table full),
 * -EOVERFLOW, -ENOMEM or a buffer type's error.
 */
int qg_galloc_reserve(struct qg_galloc *ga, struct qg_graph *g, const int *node_ids, const int *leaf_ids);

/*
 * Place G's tensors from the plan: planned tensors at their offsets, views
 * onto their sources.  If G no longer fits the plan (qg_galloc_needs_realloc)
 * it is planned again first: with the previous ids when only sizes changed,
 * with all ids 0 when GA has a single buffer type id, and otherwise 0 is
 * not possible and -EAGAIN says to call qg_galloc_reserve with G's ids.
 * 0, or -EAGAIN, or an error of qg_galloc_reserve / qg_buffer_place.
 */
int qg_galloc_alloc_graph(struct qg_galloc *ga, struct qg_graph *g);

/*
 * True if G cannot be placed from the current plan: no plan, other nodes or
 * leafs (or sources, views, flags, ops), a planned tensor larger than it
 * was, or an unplanned one that lost its data.
 */
bool qg_galloc_needs_realloc(const struct qg_galloc *ga, const struct qg_graph *g);

/*
 * The size of buffer id ID's buffer, or 0 (no buffer yet, ID out of range,
 * or ID shares the buffer of an earlier id: summed over ids, every buffer
 * counts once).
 */
size_t qg_galloc_buffer_size(const struct qg_galloc *ga, int id);
/* The buffer id ID places tensors in (shared between ids of one buffer type), or NULL. */
struct qg_buffer *qg_galloc_buffer(const struct qg_galloc *ga, int id);
/* The last plan's figures for buffer id ID (shared ids see the same ones): 0 or -EINVAL. */
int qg_galloc_stats(const struct qg_galloc *ga, int id, struct qg_galloc_stats *st);

/*
 * Take back the data GA gave G's tensors (and their views): before GA is
 * freed, or before G goes to another allocator, so that no tensor keeps a
 * pointer into a buffer that is gone.
 */
void qg_galloc_unplace(const struct qg_galloc *ga, struct qg_graph *g);

/* Test-only: make the following plans wrong in the way FAULT says. */
void qg_galloc_set_fault(struct qg_galloc *ga, enum qg_galloc_fault fault);

#endif /* QG_GALLOC_H */
