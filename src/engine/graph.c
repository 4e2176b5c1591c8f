/*
 * graph.c - computation graphs and the hash set of visited tensors.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

/* --- hash set ----------------------------------------------------------- */

size_t qg_hash_size_for(size_t n)
{
	size_t s = n + n / 4;

	return s < n + 1 ? n + 1 : s;
}

int qg_hash_init(struct qg_hash *h, size_t n)
{
	size_t size;

	if (n > SIZE_MAX / 2 / sizeof *h->keys)
		return -EOVERFLOW;
	size = qg_hash_size_for(n);
	h->keys = calloc(size, sizeof *h->keys);
	if (!h->keys) {
		h->size = 0;
		return -ENOMEM;
	}
	h->size = size;
	return 0;
}

void qg_hash_free(struct qg_hash *h)
{
	free(h->keys);
	h->keys = NULL;
	h->size = 0;
}

void qg_hash_reset(struct qg_hash *h)
{
	if (h->keys)
		memset(h->keys, 0, h->size * sizeof *h->keys);
}

/* The home slot of T: its address, with the low (alignment) bits mixed in. */
static size_t hash_home(const struct qg_hash *h, const struct qg_tensor *t)
{
	uintptr_t p = (uintptr_t)t;

	p ^= p >> 17;
	p *= (uintptr_t)0x9e3779b97f4a7c15ull;
	return (size_t)(p >> 7) % h->size;
}

size_t qg_hash_find(const struct qg_hash *h, const struct qg_tensor *t)
{
	if (h->size == 0)
		return QG_HASH_NONE;
	size_t i = hash_home(h, t);
	for (size_t n = 0; n < h->size; n++) {
		if (h->keys[i] == t)
			return i;
		if (h->keys[i] == NULL)
			return QG_HASH_NONE;
		if (++i == h->size)
			i = 0;
	}
	return QG_HASH_NONE;
}

size_t qg_hash_insert(struct qg_hash *h, const struct qg_tensor *t, int *added)
{
	if (added)
		*added = 0;
	if (h->size == 0)
		return QG_HASH_NONE;
	size_t i = hash_home(h, t);
	for (size_t n = 0; n < h->size; n++) {
		if (h->keys[i] == t)
			return i;
		if (h->keys[i] == NULL) {
			h->keys[i] = t;
			if (added)
				*added = 1;
			return i;
		}
		if (++i == h->size)
			i = 0;
	}
	return QG_HASH_NONE;
}

/* --- graphs ------------------------------------------------------------- */

enum { ST_NEW = 0, ST_OPEN, ST_DONE };

struct qg_graph *qg_graph_new(size_t capacity)
{
	struct qg_graph *g;

	if (capacity < 1 || capacity > SIZE_MAX / 4 / sizeof(void *))
		return NULL;
	g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	g->capacity = capacity;
	g->nodes = calloc(capacity, sizeof *g->nodes);
	g->leafs = calloc(capacity, sizeof *g->leafs);
	g->stack = calloc(capacity, sizeof *g->stack);
	g->stack_src = calloc(capacity, sizeof *g->stack_src);
	if (!g->nodes || !g->leafs || !g->stack || !g->stack_src || qg_hash_init(&g->visited, capacity) < 0) {
		qg_graph_free(g);
		return NULL;
	}
	g->state = calloc(g->visited.size, 1);
	if (!g->state) {
		qg_graph_free(g);
		return NULL;
	}
	return g;
}

size_t qg_graph_bytes(const struct qg_graph *g)
{
	if (!g)
		return 0;
	/* each part was allocated, so no sum overflows */
	size_t per = sizeof *g->nodes + sizeof *g->leafs + sizeof *g->stack + sizeof *g->stack_src;
	return sizeof *g + g->capacity * per + g->visited.size * (sizeof *g->visited.keys + 1);
}

void qg_graph_free(struct qg_graph *g)
{
	if (!g)
		return;
	free(g->nodes);
	free(g->leafs);
	free(g->stack);
	free(g->stack_src);
	free(g->state);
	qg_hash_free(&g->visited);
	free(g);
}

/* The next tensor T depends on, from position *POS on: src[] then view_src. */
static struct qg_tensor *next_dep(struct qg_tensor *t, int *pos)
{
	while (*pos < QG_MAX_SRC + 1) {
		int p = (*pos)++;
		struct qg_tensor *d = p < QG_MAX_SRC ? t->src[p] : t->view_src;
		if (d)
			return d;
	}
	return NULL;
}

/*
 * Undo a failed build: keep the first N_NODES nodes and N_LEAFS leafs and
 * rebuild the visited set from them alone (it has room: it is larger than
 * the graph's capacity).
 */
static void build_undo(struct qg_graph *g, size_t n_nodes, size_t n_leafs)
{
	g->n_nodes = n_nodes;
	g->n_leafs = n_leafs;
	qg_hash_reset(&g->visited);
	memset(g->state, 0, g->visited.size);
	for (size_t i = 0; i < n_nodes + n_leafs; i++) {
		struct qg_tensor *t = i < n_nodes ? g->nodes[i] : g->leafs[i - n_nodes];
		g->state[qg_hash_insert(&g->visited, t, NULL)] = ST_DONE;
	}
}

int qg_graph_build(struct qg_graph *g, struct qg_tensor *out)
{
	size_t n_nodes0, n_leafs0, depth = 0;
	int added, err = 0;

	if (!g || !out)
		return -EINVAL;
	n_nodes0 = g->n_nodes;
	n_leafs0 = g->n_leafs;

	/*
	 * Iterative depth-first walk: a tensor is OPEN while its sources are
	 * walked and DONE once it is placed, so each comes after its sources
	 * and a cycle shows up as an OPEN tensor met again.
	 */
	size_t s = qg_hash_insert(&g->visited, out, &added);
	if (s == QG_HASH_NONE)
		return -ENOSPC;
	if (g->state[s] == ST_DONE)
		return 0;
	if (g->n_nodes + g->n_leafs >= g->capacity) {
		build_undo(g, n_nodes0, n_leafs0);
		return -ENOSPC;
	}
	g->state[s] = ST_OPEN;
	g->stack[depth] = out;
	g->stack_src[depth] = 0;
	depth++;
	while (depth > 0) {
		struct qg_tensor *t = g->stack[depth - 1];
		struct qg_tensor *d = next_dep(t, &g->stack_src[depth - 1]);
		if (d) {
			s = qg_hash_insert(&g->visited, d, &added);
			if (s == QG_HASH_NONE || g->n_nodes + g->n_leafs + depth >= g->capacity) {
				err = -ENOSPC;
				break;
			}
			if (g->state[s] == ST_DONE)
				continue;
			if (g->state[s] == ST_OPEN) {
				err = -ELOOP;
				break;
			}
			g->state[s] = ST_OPEN;
			g->stack[depth] = d;
			g->stack_src[depth] = 0;
			depth++;
			continue;
		}
		/* every source placed: place T */
		s = qg_hash_find(&g->visited, t);
		g->state[s] = ST_DONE;
		if (t->op == QG_OP_NONE)
			g->leafs[g->n_leafs++] = t;
		else
			g->nodes[g->n_nodes++] = t;
		depth--;
	}
	if (err)
		build_undo(g, n_nodes0, n_leafs0);
	return err;
}

long qg_graph_node_index(const struct qg_graph *g, const struct qg_tensor *t)
{
	for (size_t i = 0; i < g->n_nodes; i++)
		if (g->nodes[i] == t)
			return (long)i;
	return -1;
}
