/*
 * graph-test.c - tensors, views, the context's arena and its errors,
 * graphs built from their outputs (order, leafs, tiny graphs, cycles, a
 * full graph), and the visited set's sizing.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "graph.h"
#include "ops.h"
#include "tap.h"

static void test_tensors(void)
{
	struct qg_ctx *ctx = qg_ctx_new(16);
	struct qg_tensor *a = qg_tensor_new_3d(ctx, QG_TYPE_F32, 8, 6, 2);
	struct qg_tensor *q = qg_tensor_new_2d(ctx, QG_TYPE_Q4_0, 64, 3);
	float buf[96];

	tap_ok(a && a->nb[0] == 4 && a->nb[1] == 32 && a->nb[2] == 192 && qg_tensor_nbytes(a) == 384 &&
	       qg_tensor_is_contiguous(a), "f32 [8 6 2]: strides 4/32/192, 384 bytes, contiguous");
	tap_ok(q && q->nb[0] == 18 && q->nb[1] == 36 && qg_tensor_nbytes(q) == 108, "q4_0 [64 3]: 18-byte blocks, 36-byte rows");
	tap_ok(qg_tensor_new_2d(ctx, QG_TYPE_Q4_0, 48, 1) == NULL && qg_ctx_error(ctx) == -EINVAL,
	       "q4_0 row of 48 refused: %s", qg_ctx_error_text(ctx));

	qg_ctx_free(ctx);
	ctx = qg_ctx_new(16);
	a = qg_tensor_new_3d(ctx, QG_TYPE_F32, 8, 6, 2);
	a->data = buf;
	struct qg_tensor *t = qg_tensor_transpose(ctx, a);
	struct qg_tensor *r = qg_tensor_reshape(ctx, a, 2, (const int64_t[]){ 16, 6 });
	struct qg_tensor *p = qg_tensor_permute(ctx, a, 2, 0, 1, 3);
	struct qg_tensor *v = qg_tensor_view(ctx, t, 2, (const int64_t[]){ 3, 4 }, (const size_t[]){ 4 }, 8);
	tap_ok(t && t->ne[0] == 6 && t->ne[1] == 8 && t->nb[0] == 32 && t->nb[1] == 4 && !qg_tensor_is_contiguous(t) &&
	       t->view_src == a && t->data == buf && t->op == QG_OP_TRANSPOSE, "transpose is a view with swapped strides");
	tap_ok(r && r->ne[0] == 16 && r->ne[1] == 6 && r->view_src == a && qg_tensor_is_contiguous(r),
	       "reshape of a contiguous tensor is a view");
	tap_ok(p && p->ne[0] == 6 && p->ne[1] == 2 && p->ne[2] == 8 && p->nb[2] == 4 && p->nb[0] == 32,
	       "permute 2,0,1,3 moves axis i to axes[i]");
	tap_ok(v && v->view_src == a && v->view_offs == 8 && v->data == (char *)buf + 8 && v->src[0] == t,
	       "a view of a view shares the root, offsets add up");
	tap_ok(qg_tensor_reshape(ctx, t, 1, (const int64_t[]){ 96 }) == NULL, "reshape of a transposed view refused");
	tap_ok(qg_tensor_view(ctx, a, 1, (const int64_t[]){ 90 }, NULL, 32) == NULL &&
	       qg_tensor_view(ctx, a, 1, (const int64_t[]){ 88 }, NULL, 32) != NULL, "a view past its source's end refused");
	tap_ok(qg_tensor_permute(ctx, a, 0, 0, 1, 2) == NULL, "permute with a repeated axis refused");
	qg_ctx_free(ctx);

	/* the arena is fixed: the tensor after the last one fails, nothing aborts */
	ctx = qg_ctx_new(3);
	a = qg_tensor_new_1d(ctx, QG_TYPE_F32, 4);
	struct qg_tensor *b = qg_op_silu(ctx, a);
	struct qg_tensor *c = qg_op_silu(ctx, b);
	struct qg_tensor *d = qg_op_silu(ctx, c);
	tap_ok(a && b && c && !d && qg_ctx_error(ctx) == -ENOSPC && qg_ctx_used(ctx) == 3,
	       "a 3-tensor arena: the 4th fails -ENOSPC (%s)", qg_ctx_error_text(ctx));
	tap_ok(qg_ctx_new(0) == NULL, "an arena of 0 tensors refused");
	qg_ctx_free(ctx);
}

/* True if every node of G comes after its sources (and view source) among the nodes. */
static bool topological(const struct qg_graph *g)
{
	for (size_t i = 0; i < g->n_nodes; i++) {
		const struct qg_tensor *t = g->nodes[i];
		for (int s = 0; s <= QG_MAX_SRC; s++) {
			const struct qg_tensor *d = s < QG_MAX_SRC ? t->src[s] : t->view_src;
			if (d && d->op != QG_OP_NONE && qg_graph_node_index(g, d) >= (long)i)
				return false;
			if (d && d->op != QG_OP_NONE && qg_graph_node_index(g, d) < 0)
				return false;
		}
	}
	return true;
}

static void test_graphs(void)
{
	struct qg_ctx *ctx = qg_ctx_new(64);
	struct qg_tensor *x = qg_tensor_new_2d(ctx, QG_TYPE_F32, 64, 2);
	struct qg_tensor *w = qg_tensor_new_2d(ctx, QG_TYPE_Q4_0, 64, 32);
	struct qg_tensor *h = qg_op_mul_mat(ctx, w, x);
	struct qg_tensor *g1 = qg_op_silu(ctx, h);
	struct qg_tensor *m = qg_op_mul(ctx, g1, h);
	struct qg_tensor *r = qg_op_rms_norm(ctx, qg_tensor_transpose(ctx, m), 1e-6f);
	struct qg_graph *g;

	/* tiny graphs: one leaf, one node, and a node of two leafs */
	for (size_t cap = 1; cap <= 3; cap++) {
		g = qg_graph_new(cap);
		int e = qg_graph_build(g, cap == 1 ? x : cap == 2 ? qg_op_silu(ctx, x) : h);
		tap_ok(e == 0 && g->n_nodes + g->n_leafs == cap && g->visited.size > cap,
		       "a graph of %zu tensor(s) builds, its set has %zu slots", cap, g->visited.size);
		qg_graph_free(g);
	}
	g = qg_graph_new(16);
	tap_ok(qg_graph_build(g, r) == 0 && g->n_nodes == 5 && g->n_leafs == 2 && topological(g) &&
	       g->nodes[g->n_nodes - 1] == r, "feed-forward-ish graph: 5 nodes, 2 leafs, topological, output last");
	tap_ok(qg_graph_build(g, r) == 0 && g->n_nodes == 5, "building the same output again adds nothing");
	struct qg_tensor *extra = qg_op_add(ctx, m, h);
	tap_ok(qg_graph_build(g, extra) == 0 && g->n_nodes == 6 && topological(g), "a second output adds its own node");
	qg_graph_free(g);

	/* a graph too small: -ENOSPC and nothing changed */
	g = qg_graph_new(5);
	qg_graph_build(g, h);
	size_t n0 = g->n_nodes, l0 = g->n_leafs;
	tap_ok(qg_graph_build(g, r) == -ENOSPC && g->n_nodes == n0 && g->n_leafs == l0 &&
	       qg_hash_find(&g->visited, g1) == QG_HASH_NONE && qg_hash_find(&g->visited, h) != QG_HASH_NONE,
	       "a full graph: -ENOSPC, left as it was");
	tap_ok(qg_graph_build(g, g1) == 0 && g->n_nodes == n0 + 1, "and it still takes what fits");
	qg_graph_free(g);

	/* a cycle made by hand is found, not followed forever */
	struct qg_tensor *c1 = qg_op_silu(ctx, x), *c2 = qg_op_silu(ctx, c1);
	c1->src[0] = c2;
	g = qg_graph_new(16);
	tap_ok(qg_graph_build(g, c2) == -ELOOP && g->n_nodes == 0, "a cycle: -ELOOP");
	qg_graph_free(g);
	qg_ctx_free(ctx);

	/* a long chain: no recursion, so no stack to run out of */
	ctx = qg_ctx_new(20001);
	struct qg_tensor *t = qg_tensor_new_1d(ctx, QG_TYPE_F32, 4);
	for (int i = 0; i < 20000; i++)
		t = qg_op_scale(ctx, t, 1.0f);
	g = qg_graph_new(20001);
	tap_ok(t && qg_graph_build(g, t) == 0 && g->n_nodes == 20000 && topological(g), "a chain of 20000 nodes");
	qg_graph_free(g);
	qg_ctx_free(ctx);
}

static void test_hash(void)
{
	struct qg_hash h;
	struct qg_tensor ts[100];

	tap_ok(qg_hash_size_for(0) == 1 && qg_hash_size_for(1) == 2 && qg_hash_size_for(3) == 4 &&
	       qg_hash_size_for(100) == 125, "set sizes: n + n/4, at least n + 1");
	qg_hash_init(&h, 100);
	bool ok = true;
	for (int i = 0; i < 100; i++) {
		int added;
		size_t s = qg_hash_insert(&h, &ts[i], &added);
		ok = ok && s != QG_HASH_NONE && added && qg_hash_insert(&h, &ts[i], &added) == s && !added;
	}
	for (int i = 0; i < 100; i++)
		ok = ok && qg_hash_find(&h, &ts[i]) != QG_HASH_NONE;
	tap_ok(ok, "100 tensors in a set sized for 100: all found, none twice");
	qg_hash_reset(&h);
	tap_ok(qg_hash_find(&h, &ts[0]) == QG_HASH_NONE, "reset empties the set");
	qg_hash_free(&h);
}

int main(void)
{
	test_tensors();
	test_graphs();
	test_hash();
	return tap_done();
}
