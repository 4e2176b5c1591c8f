/*
 * graph.h - computation graphs and the hash set of visited tensors.
 *
 * A graph is built from its outputs back: every tensor reachable through
 * src[] (and view_src) is visited once; tensors with an op become NODES in
 * an order where each node comes after all of its sources (topological, and
 * the order the backend runs them), tensors without one become LEAFS.
 *
 * The hash set is open addressing with linear probing on the tensor's
 * address.  It is sized from the number of tensors it must hold plus a 25%
 * margin, and never below that number plus one, so that a probe always ends
 * on an empty slot (graphs of one to three tensors included).
 */
#ifndef QG_GRAPH_H
#define QG_GRAPH_H

#include <stddef.h>

#include "tensor.h"

#define QG_HASH_NONE SIZE_MAX

struct qg_hash {
	size_t size;
	const struct qg_tensor **keys;
};

/* The slot count for at least N entries: N + N/4, and at least N + 1. */
size_t qg_hash_size_for(size_t n);
/* Make H hold N entries (see qg_hash_size_for).  0 or -ENOMEM/-EOVERFLOW. */
int qg_hash_init(struct qg_hash *h, size_t n);
void qg_hash_free(struct qg_hash *h);
/* Empty H, keeping its slots. */
void qg_hash_reset(struct qg_hash *h);
/* The slot holding T, or QG_HASH_NONE. */
size_t qg_hash_find(const struct qg_hash *h, const struct qg_tensor *t);
/*
 * The slot of T, inserting it if absent (*ADDED says which, if not NULL);
 * QG_HASH_NONE when H is full.
 */
size_t qg_hash_insert(struct qg_hash *h, const struct qg_tensor *t, int *added);

struct qg_graph {
	size_t capacity;	/* nodes + leafs it can hold */
	size_t n_nodes, n_leafs;
	struct qg_tensor **nodes;
	struct qg_tensor **leafs;
	struct qg_hash visited;
	unsigned char *state;	/* per hash slot, while building */
	struct qg_tensor **stack;
	int *stack_src;
};

/* A graph for up to CAPACITY tensors (nodes plus leafs), or NULL. */
struct qg_graph *qg_graph_new(size_t capacity);
void qg_graph_free(struct qg_graph *g);
/* Bytes G holds: itself, its node, leaf and building arrays and its hash set (0 for NULL). */
size_t qg_graph_bytes(const struct qg_graph *g);
/*
 * Add OUT and everything it depends on that G does not hold yet.  0, or
 * -ENOSPC when the graph is full, -ELOOP on a cycle, -EINVAL on a NULL
 * tensor; G is unchanged on error.
 */
int qg_graph_build(struct qg_graph *g, struct qg_tensor *out);
/* The position of T among G's nodes, or -1. */
long qg_graph_node_index(const struct qg_graph *g, const struct qg_tensor *t);

#endif /* QG_GRAPH_H */
