/*
 * galloc-test.c - the graph allocator, property-tested on thousands of
 * random graphs and then on the cases that bit ggml.
 *
 * A random graph mixes every op of ops.h with valid shapes, views of every
 * kind (some of them outputs), in-place chains, weights with data of their
 * own, inputs and constants the allocator places, and a buffer id per
 * tensor over three ids of which two name the same buffer type.  After
 * alloc, an interval checker written here (lifetimes from the graph alone:
 * born when its node runs, alive through its last reader, direct or
 * through a view; outputs for ever) finds any two tensors alive at the
 * same step that share a byte, in-place reuse excepted; the graph is run,
 * and its outputs must equal, bit for bit, a run where every tensor has
 * memory of its own.  The same graphs with the allocator's test-only
 * faults must be caught.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "galloc.h"
#include "graph-run.h"
#include "ops.h"
#include "tap.h"

/* ------------------------------------------------- a buffer type for tests */

/* Host memory with its own alignment and max size, counting buffers made and freed. */
struct tbuft {
	struct qg_buft buft;
	const char *name;
	size_t align, max;
	int fail;		/* alloc_buffer fails with -ENOMEM */
	int n_alloc, n_free;
};

static const char *tb_name(const struct qg_buft *b)
{
	return ((const struct tbuft *)b->ctx)->name;
}

static size_t tb_alignment(const struct qg_buft *b)
{
	return ((const struct tbuft *)b->ctx)->align;
}

static size_t tb_max_size(const struct qg_buft *b)
{
	return ((const struct tbuft *)b->ctx)->max;
}

static void tb_free_buffer(struct qg_buffer *buf)
{
	((struct tbuft *)buf->buft->ctx)->n_free++;
	free(buf->ctx);
	free(buf);
}

static void *tb_base(struct qg_buffer *buf)
{
	return buf->ctx;
}

static const struct qg_buffer_i tb_buffer_i = {
	.free_buffer = tb_free_buffer,
	.base = tb_base,
};

static int tb_alloc_buffer(struct qg_buft *b, size_t size, struct qg_buffer **out)
{
	struct tbuft *tb = b->ctx;
	struct qg_buffer *buf;
	void *mem = NULL;

	if (tb->fail)
		return -ENOMEM;
	buf = calloc(1, sizeof(*buf));
	if (!buf || posix_memalign(&mem, tb->align < sizeof(void *) ? sizeof(void *) : tb->align, size)) {
		free(buf);
		return -ENOMEM;
	}
	buf->iface = &tb_buffer_i;
	buf->ctx = mem;
	buf->size = size;
	tb->n_alloc++;
	*out = buf;
	return 0;
}

static const struct qg_buft_i tb_i = {
	.name = tb_name,
	.alloc_buffer = tb_alloc_buffer,
	.alignment = tb_alignment,
	.max_size = tb_max_size,
};

static void tb_init(struct tbuft *tb, const char *name, size_t align, size_t max)
{
	memset(tb, 0, sizeof(*tb));
	tb->buft.iface = &tb_i;
	tb->buft.ctx = tb;
	tb->name = name;
	tb->align = align;
	tb->max = max;
}

/* ------------------------------------------------------- random graphs */

#define MAX_VALS 256
#define MAX_OUTS 8

struct rg {
	struct tap_rng *rng;
	struct qg_ctx *ctx;
	struct qg_graph *g;
	struct gr_mem mem;	/* the caller's data: weights and masks */
	struct qg_tensor *vals[MAX_VALS];
	int n_vals;
	struct qg_tensor *outs[MAX_OUTS];
	int n_outs;
};

static unsigned rnd(struct rg *r, unsigned n)
{
	return (unsigned)(tap_rand(r->rng) % n);
}

/* Fill T's bytes (contiguous F32, or I32 indices below T->op_params[0]) from SEED. */
static void fill_values(struct qg_tensor *t, unsigned long long seed)
{
	struct tap_rng r = { seed * 0x9e3779b97f4a7c15ull + 1 };
	int64_t n = qg_tensor_nelements(t);

	if (t->type == QG_TYPE_I32) {
		for (int64_t i = 0; i < n; i++)
			((int32_t *)t->data)[i] = (int32_t)(tap_rand(&r) % (unsigned)t->op_params[0]);
	} else if (t->type == QG_TYPE_F32) {
		for (int64_t i = 0; i < n; i++)
			((float *)t->data)[i] = tap_randf(&r, -1.0f, 1.0f);
	} else {
		unsigned char *p = t->data;
		for (size_t i = 0; i < qg_tensor_nbytes(t); i++)
			p[i] = (unsigned char)(tap_rand(&r) >> 56);
		if (t->type == QG_TYPE_F16)
			for (size_t i = 1; i < qg_tensor_nbytes(t); i += 2)
				p[i] &= 0x3b;	/* small finite halves */
	}
}

/* A leaf of TYPE and shape NE: weights with data of their own, or (no data) an input or a constant. */
static struct qg_tensor *rg_leaf(struct rg *r, enum qg_type type, const int64_t *ne, int flags)
{
	struct qg_tensor *t = qg_tensor_new(r->ctx, type, 4, ne);

	if (!t)
		return NULL;
	t->flags = flags;
	if (flags & QG_TENSOR_WEIGHTS) {
		t->data = gr_alloc(&r->mem, qg_tensor_nbytes(t));
		if (!t->data)
			return NULL;
		fill_values(t, (unsigned long long)(uintptr_t)t);
	}
	return t;
}

static struct qg_tensor *rg_pick(struct rg *r)
{
	/* half the time the newest value: chains, where in-place reuse happens */
	return r->vals[rnd(r, 2) ? (unsigned)r->n_vals - 1 : rnd(r, (unsigned)r->n_vals)];
}

static bool repeats(const struct qg_tensor *b, const struct qg_tensor *a)
{
	for (int i = 0; i < QG_MAX_DIMS; i++)
		if (a->ne[i] % b->ne[i])
			return false;
	return true;
}

/* A second operand for ADD/MUL: a value that repeats into A, or a new leaf row. */
static struct qg_tensor *rg_operand(struct rg *r, const struct qg_tensor *a)
{
	for (int tries = 0; tries < 4; tries++) {
		struct qg_tensor *b = r->vals[rnd(r, (unsigned)r->n_vals)];
		if (b != a && repeats(b, a))
			return b;
	}
	int64_t ne[4] = { a->ne[0], rnd(r, 2) ? a->ne[1] : 1, 1, 1 };
	return rg_leaf(r, QG_TYPE_F32, ne, rnd(r, 2) ? QG_TENSOR_WEIGHTS : 0);
}

/* A view of A: reshape, transpose, permute, or a range of its rows. */
static struct qg_tensor *rg_view(struct rg *r, struct qg_tensor *a)
{
	switch (rnd(r, 4)) {
	case 0:
		if (qg_tensor_is_contiguous(a)) {
			if (rnd(r, 2))
				return qg_tensor_reshape(r->ctx, a, 2, (const int64_t[]){ a->ne[0] * a->ne[1], a->ne[2] * a->ne[3] });
			return qg_tensor_reshape(r->ctx, a, 3, (const int64_t[]){ a->ne[0], a->ne[1] * a->ne[2], a->ne[3] });
		}
		/* fall through */
	case 1:
		return qg_tensor_transpose(r->ctx, a);
	case 2:
		return qg_tensor_permute(r->ctx, a, 0, 2, 1, 3);
	default: {
		int64_t first = rnd(r, (unsigned)a->ne[1]), n = 1 + rnd(r, (unsigned)(a->ne[1] - first));
		return qg_tensor_view(r->ctx, a, 2, (const int64_t[]){ a->ne[0], n }, (const size_t[]){ a->nb[1] },
				      (size_t)first * a->nb[1]);
	}
	}
}

/* One random op over the values so far; its result (F32) becomes a value. */
static struct qg_tensor *rg_step(struct rg *r)
{
	struct qg_tensor *a = rg_pick(r), *t = NULL;
	unsigned k = rnd(r, 100);
	struct qg_ctx *c = r->ctx;

	if (k < 30) {
		switch (rnd(r, 5)) {
		case 0: t = qg_op_scale(c, a, 0.5f + (float)rnd(r, 4) * 0.25f); break;
		case 1: t = qg_op_silu(c, a); break;
		case 2: t = qg_op_gelu(c, a); break;
		case 3: t = qg_op_rms_norm(c, a, 1e-5f); break;
		default: t = qg_op_soft_max(c, a, NULL, 1.0f); break;
		}
	} else if (k < 45) {
		struct qg_tensor *b = rg_operand(r, a);
		t = rnd(r, 2) ? qg_op_add(c, a, b) : qg_op_mul(c, a, b);
	} else if (k < 50) {
		int64_t ne[4] = { a->ne[0], rnd(r, 2) ? a->ne[1] : 1, 1, 1 };
		t = qg_op_soft_max(c, a, rg_leaf(r, QG_TYPE_F32, ne, QG_TENSOR_WEIGHTS), 0.5f);
	} else if (k < 60) {
		struct qg_tensor *x = a;
		if (x->nb[0] != 4 || x->nb[1] < 4 * (size_t)x->ne[0])
			x = qg_op_cast(c, x, QG_TYPE_F32);	/* packed, disjoint rows for the matrix product */
		static const enum qg_type wt[] = { QG_TYPE_F32, QG_TYPE_F16, QG_TYPE_Q4_0, QG_TYPE_Q8_0 };
		enum qg_type type = x->ne[0] % QG_QK ? wt[rnd(r, 2)] : wt[rnd(r, 4)];
		int64_t ne[4] = { x->ne[0], 32 * (1 + rnd(r, 2)), 1, 1 };
		t = qg_op_mul_mat(c, rg_leaf(r, type, ne, QG_TENSOR_WEIGHTS), x);
	} else if (k < 68) {
		if (rnd(r, 2) && a->ne[0] % QG_QK == 0) {
			t = qg_op_cast(c, qg_op_cast(c, a, rnd(r, 2) ? QG_TYPE_F16 : QG_TYPE_Q8_0), QG_TYPE_F32);
		} else {
			struct qg_tensor *b = rg_leaf(r, QG_TYPE_F32, a->ne, 0);
			t = qg_op_cpy(c, a, b);
		}
	} else if (k < 75) {
		int64_t ne[4] = { 1 + rnd(r, 4), a->ne[2], a->ne[3], 1 };
		struct qg_tensor *idx = rg_leaf(r, QG_TYPE_I32, ne, QG_TENSOR_INPUT);
		if (idx)
			idx->op_params[0] = (int32_t)a->ne[1];
		t = qg_op_get_rows(c, a, idx);
	} else {
		t = rg_view(r, a);
	}
	return t;
}

/* A random graph of 1 to MAX_OPS ops in R; 0, or -1 if building failed. */
static int rg_build(struct rg *r, int max_ops)
{
	int n_in = 1 + (int)rnd(r, 2), n_ops = 1 + (int)rnd(r, (unsigned)max_ops);

	memset(r->vals, 0, sizeof(r->vals));
	r->n_vals = r->n_outs = 0;
	r->ctx = qg_ctx_new(16 * (size_t)max_ops + 64);
	r->g = qg_graph_new(16 * (size_t)max_ops + 64);
	if (!r->ctx || !r->g)
		return -1;
	for (int i = 0; i < n_in; i++) {
		int64_t ne[4] = { 32 * (1 + rnd(r, 2)), 1 + rnd(r, 4), 1 + rnd(r, 2), 1 };
		r->vals[r->n_vals++] = rg_leaf(r, QG_TYPE_F32, ne, rnd(r, 3) ? QG_TENSOR_INPUT : 0);
	}
	for (int i = 0; i < n_ops && r->n_vals < MAX_VALS; i++) {
		struct qg_tensor *t = rg_step(r);
		if (!t)
			return -1;
		r->vals[r->n_vals++] = t;
	}
	/* the newest value is an output, and now and then another one (a view, maybe) */
	r->outs[r->n_outs++] = r->vals[r->n_vals - 1];
	for (int i = 0; i < 2; i++)
		if (rnd(r, 3) == 0)
			r->outs[r->n_outs++] = r->vals[n_in + rnd(r, (unsigned)(r->n_vals - n_in))];
	for (int i = 0; i < r->n_outs; i++) {
		r->outs[i]->flags |= QG_TENSOR_OUTPUT;
		if (qg_graph_build(r->g, r->outs[i]) < 0)
			return -1;
	}
	return qg_ctx_error(r->ctx) ? -1 : 0;
}

static void rg_free(struct rg *r)
{
	qg_graph_free(r->g);
	qg_ctx_free(r->ctx);
	gr_free_all(&r->mem);
	r->g = NULL;
	r->ctx = NULL;
}

/* ---------------------------------------------------------------- checks */

static bool in_ga(const struct qg_galloc *ga, int n_ids, const struct qg_buffer *buf)
{
	for (int i = 0; i < n_ids; i++)
		if (buf && qg_galloc_buffer(ga, i) == buf)
			return true;
	return false;
}

struct live {
	const struct qg_tensor *t;
	uintptr_t lo, hi;
	long birth, death;
};

/* True if B legitimately took over A's bytes in place at the step A died. */
static bool inplace_ok(const struct live *a, const struct live *b)
{
	const struct qg_tensor *s = b->t->src[0];

	return qg_op_can_inplace(b->t->op) && s && (s == a->t || s->view_src == a->t) && b->t->data == a->t->data &&
	       qg_tensor_same_layout(b->t, s) && a->death == b->birth;
}

/*
 * The interval checker: every tensor in GA's buffers lies inside its
 * buffer, and no two that are alive at one step share a byte, unless one
 * is the other's in-place successor.  Lifetimes come from G alone.  The
 * number of violations.
 */
static int check_intervals(const struct qg_galloc *ga, int n_ids, const struct qg_graph *g)
{
	size_t n = g->n_nodes + g->n_leafs, m = 0;
	struct live *lv = calloc(n ? n : 1, sizeof(*lv));
	long end = (long)g->n_nodes + 1;
	int bad = 0;

	if (!lv)
		return 1;
	for (size_t i = 0; i < n; i++) {
		const struct qg_tensor *t = i < g->n_leafs ? g->leafs[i] : g->nodes[i - g->n_leafs];
		if (t->view_src || !in_ga(ga, n_ids, t->buffer))
			continue;
		struct live *l = &lv[m++];
		uintptr_t base = (uintptr_t)qg_buffer_base(t->buffer);
		l->t = t;
		l->lo = (uintptr_t)t->data;
		l->hi = l->lo + qg_tensor_nbytes(t);
		if (l->lo < base || l->hi > base + qg_buffer_size(t->buffer)) {
			tap_diag("%s lies outside its buffer", qg_op_name(t->op));
			bad++;
		}
		l->birth = i < g->n_leafs || (t->flags & QG_TENSOR_INPUT) ? 0 : (long)(i - g->n_leafs) + 1;
		l->death = t->flags & (QG_TENSOR_OUTPUT | QG_TENSOR_WEIGHTS) ? end : l->birth;
		for (size_t k = 0; k < g->n_nodes; k++) {
			const struct qg_tensor *nd = g->nodes[k];
			if (nd->view_src == t && (nd->flags & QG_TENSOR_OUTPUT))
				l->death = end;
			for (int j = 0; j < QG_MAX_SRC; j++)
				if (nd->src[j] && (nd->src[j] == t || nd->src[j]->view_src == t) && (long)k + 1 > l->death)
					l->death = (long)k + 1;
		}
	}
	for (size_t i = 0; i < m; i++)
		for (size_t j = i + 1; j < m; j++) {
			const struct live *a = &lv[i], *b = &lv[j];
			if (a->lo >= b->hi || b->lo >= a->hi || a->birth > b->death || b->birth > a->death)
				continue;
			if (inplace_ok(a, b) || inplace_ok(b, a))
				continue;
			bad++;
		}
	free(lv);
	return bad;
}

/* Gather output T's floats (any strides) into OUT[nelements]. */
static void gather(const struct qg_tensor *t, float *out)
{
	size_t n = 0;

	for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
		for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
			for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
				for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
					memcpy(&out[n++], (const char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] +
						   i2 * t->nb[2] + i3 * t->nb[3], sizeof(float));
}

/* Fill every leaf without data of its own (inputs, constants, indices): the same values each run. */
static void fill_leaves(struct qg_graph *g)
{
	for (size_t i = 0; i < g->n_leafs; i++)
		if (!(g->leafs[i]->flags & QG_TENSOR_WEIGHTS))
			fill_values(g->leafs[i], 1000 + i);
}

/* Run G and copy its outputs into fresh arrays *OUT (one per output).  The run's status. */
static int run_and_gather(struct rg *r, int nth, float **out)
{
	int st;

	fill_leaves(r->g);
	st = gr_run(r->g, nth);
	for (int i = 0; i < r->n_outs; i++) {
		out[i] = malloc((size_t)qg_tensor_nelements(r->outs[i]) * sizeof(float));
		if (out[i])
			gather(r->outs[i], out[i]);
	}
	return st;
}

/* Take away the data the allocator gave G's tensors (views first). */
static void strip(const struct qg_galloc *ga, int n_ids, struct qg_graph *g)
{
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < g->n_leafs + g->n_nodes; i++) {
			struct qg_tensor *t = i < g->n_leafs ? g->leafs[i] : g->nodes[i - g->n_leafs];
			if ((pass == 0) != (t->view_src != NULL))
				continue;
			if (in_ga(ga, n_ids, t->buffer) || (t->view_src && in_ga(ga, n_ids, t->view_src->buffer))) {
				t->data = NULL;
				t->buffer = NULL;
			}
		}
}

enum {
	BAD_ALLOC = 1,		/* reserve or alloc_graph failed */
	BAD_OVERLAP = 2,	/* the interval checker found shared bytes */
	BAD_RESULT = 4,		/* outputs differ from the run without reuse */
	BAD_REPLACE = 8,	/* needs_realloc after alloc, or a second alloc moved tensors */
	BAD_STATS = 16,		/* the figures do not add up */
	BAD_RUN = 32,		/* the run without reuse failed: a graph the generator should not make */
};

struct totals {
	int graphs, nodes, inplace, views, out_views;
	size_t planned, live, greedy, by_size;
};

/* Plan, check, run and compare R's graph with GA (N_IDS ids); a mask of BAD_* found. */
static int check_graph(struct rg *r, struct qg_galloc *ga, int n_ids, enum qg_galloc_placement mode, int nth,
		       struct totals *tot)
{
	struct qg_graph *g = r->g;
	int *nid = malloc((g->n_nodes + 1) * sizeof(int)), *lid = malloc((g->n_leafs + 1) * sizeof(int));
	void **where = malloc((g->n_nodes + g->n_leafs + 1) * sizeof(void *));
	float *got[MAX_OUTS] = { 0 }, *want[MAX_OUTS] = { 0 };
	struct gr_mem own = { 0 };
	int bad = 0, st1, st2;
	bool no_ids = rnd(r, 4) == 0;

	if (!nid || !lid || !where) {
		bad = BAD_ALLOC;
		goto out;
	}
	for (size_t i = 0; i < g->n_nodes; i++)
		nid[i] = (int)rnd(r, (unsigned)n_ids);
	for (size_t i = 0; i < g->n_leafs; i++)
		lid[i] = (int)rnd(r, (unsigned)n_ids);
	if (qg_galloc_reserve(ga, g, no_ids ? NULL : nid, no_ids ? NULL : lid) < 0 ||
	    qg_galloc_alloc_graph(ga, g) < 0) {
		bad = BAD_ALLOC;
		goto out;
	}
	if (qg_galloc_needs_realloc(ga, g))
		bad |= BAD_REPLACE;
	if (check_intervals(ga, n_ids, g))
		bad |= BAD_OVERLAP;
	for (int id = 0; id < n_ids; id++) {
		struct qg_galloc_stats s;
		if (qg_galloc_stats(ga, id, &s) < 0 || s.live_peak > s.planned || s.planned > s.buffer + !s.planned ||
		    (mode == QG_GALLOC_BEST && s.planned != (s.greedy < s.by_size ? s.greedy : s.by_size)))
			bad |= BAD_STATS;
		if (tot && qg_galloc_buffer_size(ga, id)) {
			tot->planned += s.planned;
			tot->live += s.live_peak;
			tot->inplace += (int)s.inplace;
			if (mode == QG_GALLOC_BEST) {
				tot->greedy += s.greedy;
				tot->by_size += s.by_size;
			}
		}
	}
	st1 = run_and_gather(r, nth, got);

	/* a second alloc of the same graph keeps every tensor where it was */
	for (size_t i = 0; i < g->n_nodes + g->n_leafs; i++)
		where[i] = i < g->n_nodes ? g->nodes[i]->data : g->leafs[i - g->n_nodes]->data;
	if (qg_galloc_alloc_graph(ga, g) < 0)
		bad |= BAD_REPLACE;
	for (size_t i = 0; i < g->n_nodes + g->n_leafs; i++)
		if (where[i] != (i < g->n_nodes ? g->nodes[i]->data : g->leafs[i - g->n_nodes]->data))
			bad |= BAD_REPLACE;

	/* the reference: every tensor with memory of its own, taken back afterwards */
	strip(ga, n_ids, g);
	for (size_t i = 0; i < g->n_nodes + g->n_leafs; i++) {
		struct qg_tensor *t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
		where[i] = t->data ? NULL : t;
	}
	if (gr_own_graph(&own, g) < 0) {
		bad |= BAD_ALLOC;
		goto out;
	}
	st2 = run_and_gather(r, nth, want);
	for (size_t i = 0; i < g->n_nodes + g->n_leafs; i++)
		if (where[i])
			((struct qg_tensor *)where[i])->data = NULL;
	if (st1 != st2)
		bad |= BAD_RESULT;
	if (st2 != 0)
		bad |= BAD_RUN;
	for (int i = 0; i < r->n_outs; i++)
		if (!got[i] || !want[i] ||
		    memcmp(got[i], want[i], (size_t)qg_tensor_nelements(r->outs[i]) * sizeof(float)))
			bad |= BAD_RESULT;
	if (tot) {
		tot->graphs++;
		tot->nodes += (int)g->n_nodes;
		for (size_t i = 0; i < g->n_nodes; i++)
			tot->views += g->nodes[i]->view_src != NULL;
		for (int i = 0; i < r->n_outs; i++)
			tot->out_views += r->outs[i]->view_src != NULL;
	}
out:
	for (int i = 0; i < MAX_OUTS; i++) {
		free(got[i]);
		free(want[i]);
	}
	gr_free_all(&own);
	free(nid);
	free(lid);
	free(where);
	return bad;
}

/* Print G's leafs and nodes, for a failure's diagnosis. */
static void dump(const struct rg *r)
{
	const struct qg_graph *g = r->g;

	for (size_t i = 0; i < g->n_leafs; i++) {
		const struct qg_tensor *t = g->leafs[i];
		tap_diag("leaf %zu %p: type %d [%lld %lld %lld] flags %d", i, (const void *)t, (int)t->type,
			 (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], t->flags);
	}
	for (size_t i = 0; i < g->n_nodes; i++) {
		const struct qg_tensor *t = g->nodes[i];
		tap_diag("node %zu %p: %s [%lld %lld %lld] nb %zu %zu %zu flags %d src %p %p view of %p+%zu", i,
			 (const void *)t, qg_op_name(t->op), (long long)t->ne[0], (long long)t->ne[1],
			 (long long)t->ne[2], t->nb[0], t->nb[1], t->nb[2], t->flags, (const void *)t->src[0],
			 (const void *)t->src[1], (const void *)t->view_src, t->view_offs);
	}
}

/* ------------------------------------------------------- the property */

static void test_random(void)
{
	static const char *const mode_name[] = { "best", "greedy", "by-size" };
	struct tap_rng rng = { 0x6a110c0001ull };
	struct rg r = { .rng = &rng };
	struct tbuft tb;
	struct qg_galloc *ga[3] = { 0 };
	int scale = tap_scale(), n_graphs = 3000 + 9000 * scale;
	int fails[3] = { 0 }, build_fail = 0, masks = 0;
	struct totals tot[3] = { 0 };

	tb_init(&tb, "aligned128", 128, SIZE_MAX);
	struct qg_buft *bufts[3] = { qg_buft_host(), &tb.buft, qg_buft_host() };
	for (int m = 0; m < 3; m++) {
		struct qg_galloc_options opt = { .placement = (enum qg_galloc_placement)m };
		if (qg_galloc_new(bufts, 3, &opt, &ga[m]) < 0) {
			tap_ok(0, "qg_galloc_new");
			return;
		}
	}
	for (int i = 0; i < n_graphs; i++) {
		int m = i % 3;
		if (rg_build(&r, 1 + (int)rnd(&r, 4) * 16) < 0) {
			build_fail++;
		} else {
			int bad = check_graph(&r, ga[m], 3, (enum qg_galloc_placement)m, 1 + (int)rnd(&r, 2), &tot[m]);
			if (bad) {
				if (fails[m] == 0)
					dump(&r);
				if (fails[m] < 3)
					tap_diag("graph %d (%s, %zu nodes): failure mask %d", i, mode_name[m], r.g->n_nodes, bad);
				fails[m]++;
				masks |= bad;
			}
		}
		rg_free(&r);
	}
	tap_ok(build_fail == 0, "%d random graphs built (%d failed to build)", n_graphs, build_fail);
	for (int m = 0; m < 3; m++)
		tap_ok(fails[m] == 0 && tot[m].graphs > 0,
		       "%s: %d graphs (%d nodes, %d views, %d view outputs, %d in place): no shared live bytes, "
		       "results equal a run without reuse", mode_name[m], tot[m].graphs, tot[m].nodes, tot[m].views,
		       tot[m].out_views, tot[m].inplace);
	tap_ok(tot[0].inplace > 0 && tot[0].views > 0 && tot[0].out_views > 0,
	       "the graphs had in-place chains, views and view outputs");
	tap_diag("best: planned %zu bytes over the graphs, live peak %zu (%.3fx); greedy %zu, by size %zu",
		 tot[0].planned, tot[0].live, tot[0].live ? (double)tot[0].planned / (double)tot[0].live : 0.0,
		 tot[0].greedy, tot[0].by_size);
	tap_ok(tot[0].planned <= tot[0].greedy && tot[0].planned <= tot[0].by_size,
	       "best is never worse than either placement");
	tap_ok(tb.n_alloc >= 1 && tb.n_alloc - tb.n_free <= 3, "the second buffer type was used (%d buffers)",
	       tb.n_alloc);
	for (int m = 0; m < 3; m++)
		qg_galloc_free(ga[m]);
	tap_ok(tb.n_free == tb.n_alloc, "every buffer freed once (%d made, %d freed)", tb.n_alloc, tb.n_free);
}

/* The test-only faults must be caught by the checks above. */
static void test_faults(void)
{
	static const struct {
		enum qg_galloc_fault fault;
		const char *name;
	} faults[] = {
		{ QG_GALLOC_FAULT_EARLY_FREE, "a tensor freed one step early" },
		{ QG_GALLOC_FAULT_IGNORE_VIEWS, "a source freed while its views live" },
	};
	int n_graphs = 150 + 450 * tap_scale();

	for (size_t f = 0; f < sizeof(faults) / sizeof(*faults); f++) {
		struct tap_rng rng = { 0xfa017ull + f };
		struct rg r = { .rng = &rng };
		struct qg_galloc *ga;
		int caught = 0, ran = 0, overlap = 0, result = 0;
		struct qg_buft *host = qg_buft_host();

		for (int m = 0; m < 3; m++) {
			struct qg_galloc_options opt = { .placement = (enum qg_galloc_placement)m };
			if (qg_galloc_new(&host, 1, &opt, &ga) < 0)
				continue;
			qg_galloc_set_fault(ga, faults[f].fault);
			for (int i = 0; i < n_graphs / 3; i++) {
				if (rg_build(&r, 24) == 0) {
					int bad = check_graph(&r, ga, 1, (enum qg_galloc_placement)m, 1, NULL);
					ran++;
					caught += (bad & (BAD_OVERLAP | BAD_RESULT)) != 0;
					overlap += (bad & BAD_OVERLAP) != 0;
					result += (bad & BAD_RESULT) != 0;
				}
				rg_free(&r);
			}
			qg_galloc_free(ga);
		}
		tap_ok(caught > ran / 4, "fault \"%s\" caught in %d of %d graphs (%d by the interval checker, %d by results)",
		       faults[f].name, caught, ran, overlap, result);
	}
}

/* ------------------------------------------------- the cases that bit ggml */

/* A graph of OUT in fresh R->g; for the fixed cases. */
static int fixed_graph(struct rg *r, struct qg_tensor **outs, int n)
{
	r->n_outs = 0;
	for (int i = 0; i < n; i++) {
		outs[i]->flags |= QG_TENSOR_OUTPUT;
		r->outs[r->n_outs++] = outs[i];
		if (qg_graph_build(r->g, outs[i]) < 0)
			return -1;
	}
	return 0;
}

static void fixed_begin(struct rg *r, struct tap_rng *rng)
{
	memset(r, 0, sizeof(*r));
	r->rng = rng;
	r->ctx = qg_ctx_new(64);
	r->g = qg_graph_new(64);
}

static void test_tiny(void)
{
	struct tap_rng rng = { 77 };
	struct qg_buft *host = qg_buft_host();

	for (int n = 1; n <= 3; n++) {
		struct rg r;
		struct qg_galloc *ga = NULL;
		struct qg_galloc_stats st = { 0 };
		fixed_begin(&r, &rng);
		struct qg_tensor *x = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 3, 1, 1 }, QG_TENSOR_INPUT);
		struct qg_tensor *t = qg_op_scale(r.ctx, x, 2.0f);
		if (n >= 2)
			t = qg_op_silu(r.ctx, t);
		if (n >= 3)
			t = qg_op_gelu(r.ctx, t);
		int bad = fixed_graph(&r, &t, 1) < 0 || qg_galloc_new(&host, 1, NULL, &ga) < 0 ? BAD_ALLOC
											  : check_graph(&r, ga, 1, QG_GALLOC_BEST, 1, NULL);
		if (ga)
			qg_galloc_stats(ga, 0, &st);
		/* the input, and one object for the chain: later nodes run in place */
		tap_ok(bad == 0 && r.g->n_nodes == (size_t)n && st.objects == 2 && st.inplace == (size_t)n - 1 &&
		       st.planned == 2 * 768, "a graph of %d node%s: placed and correct, %zu in place, %zu bytes", n,
		       n > 1 ? "s" : "", st.inplace, st.planned);
		qg_galloc_free(ga);
		rg_free(&r);
	}
}

static void test_buft_twice(void)
{
	struct tap_rng rng = { 78 };
	struct tbuft tb;
	struct rg r;
	struct qg_galloc *ga = NULL;

	tb_init(&tb, "twice", 64, SIZE_MAX);
	struct qg_buft *bufts[2] = { &tb.buft, &tb.buft };
	fixed_begin(&r, &rng);
	struct qg_tensor *x = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 4, 1, 1 }, QG_TENSOR_INPUT);
	struct qg_tensor *w = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 64, 1, 1 }, QG_TENSOR_WEIGHTS);
	struct qg_tensor *y = qg_op_silu(r.ctx, qg_op_mul_mat(r.ctx, w, qg_op_rms_norm(r.ctx, x, 1e-6f)));
	int bad = fixed_graph(&r, &y, 1) < 0 || qg_galloc_new(bufts, 2, NULL, &ga) < 0 ? BAD_ALLOC
										 : check_graph(&r, ga, 2, QG_GALLOC_BEST, 1, NULL);
	tap_ok(bad == 0, "a buffer type named twice: placed and correct");
	tap_ok(ga && qg_galloc_buffer(ga, 0) && qg_galloc_buffer(ga, 0) == qg_galloc_buffer(ga, 1) && tb.n_alloc == 1,
	       "one buffer, allocated once, for both ids");
	tap_ok(ga && qg_galloc_buffer_size(ga, 0) > 0 && qg_galloc_buffer_size(ga, 1) == 0,
	       "its size counted once (%zu, then %zu)", ga ? qg_galloc_buffer_size(ga, 0) : 0,
	       ga ? qg_galloc_buffer_size(ga, 1) : 0);
	qg_galloc_free(ga);
	tap_ok(tb.n_free == 1, "and freed once");
	rg_free(&r);
}

static void test_view_outputs(void)
{
	struct tap_rng rng = { 79 };
	struct qg_buft *host = qg_buft_host();
	struct rg r;
	struct qg_galloc *ga = NULL;

	/* A view of a is an output; everything after a would like a's bytes */
	fixed_begin(&r, &rng);
	struct qg_tensor *x = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 4, 1, 1 }, QG_TENSOR_INPUT);
	struct qg_tensor *a = qg_op_scale(r.ctx, x, 3.0f);
	struct qg_tensor *v = qg_tensor_transpose(r.ctx, a);
	struct qg_tensor *b = qg_op_silu(r.ctx, qg_op_cast(r.ctx, v, QG_TYPE_F32));
	struct qg_tensor *c = qg_op_gelu(r.ctx, qg_op_scale(r.ctx, b, 0.5f));
	struct qg_tensor *outs[2] = { v, c };
	int bad = fixed_graph(&r, outs, 2) < 0 || qg_galloc_new(&host, 1, NULL, &ga) < 0
			  ? BAD_ALLOC : check_graph(&r, ga, 1, QG_GALLOC_BEST, 1, NULL);
	tap_ok(bad == 0, "a view output keeps its source's bytes to the end");
	qg_galloc_free(ga);
	rg_free(&r);
}

/* True if the bytes of A and B overlap. */
static bool overlaps(const struct qg_tensor *a, const struct qg_tensor *b)
{
	const char *pa = a->data, *pb = b->data;

	return pa && pb && pa < pb + qg_tensor_nbytes(b) && pb < pa + qg_tensor_nbytes(a);
}

/*
 * Weights' bytes are never taken in place, however a node reaches them: a
 * weights leaf the plan places itself (no data of its own) read through a
 * view, a computed tensor flagged weights, a CPY's result whose
 * destination is flagged weights after the op was built.  Each parent has
 * one reader of its layout, so only being weights keeps it; a plain chain
 * beside them shows the reuse happens where it may.
 */
static void test_weights_not_inplace(void)
{
	struct tap_rng rng = { 81 };
	struct qg_buft *host = qg_buft_host();
	struct qg_galloc *ga = NULL;
	struct qg_galloc_stats st = { 0 };
	struct rg r;
	const int64_t ne[4] = { 64, 4, 1, 1 };

	fixed_begin(&r, &rng);
	struct qg_tensor *x = rg_leaf(&r, QG_TYPE_F32, ne, QG_TENSOR_INPUT);
	struct qg_tensor *w = qg_tensor_new(r.ctx, QG_TYPE_F32, 4, ne);
	w->flags = QG_TENSOR_WEIGHTS;
	struct qg_tensor *wv = qg_tensor_view(r.ctx, w, 2, ne, (const size_t[]){ w->nb[1] }, 0);
	struct qg_tensor *a = qg_op_scale(r.ctx, wv, 2.0f);
	struct qg_tensor *c = qg_op_scale(r.ctx, x, 3.0f);
	c->flags |= QG_TENSOR_WEIGHTS;
	struct qg_tensor *d = qg_op_silu(r.ctx, c);
	struct qg_tensor *b = rg_leaf(&r, QG_TYPE_F32, ne, 0);
	struct qg_tensor *e = qg_op_cpy(r.ctx, x, b);
	b->flags |= QG_TENSOR_WEIGHTS;
	struct qg_tensor *f = qg_op_gelu(r.ctx, e);
	struct qg_tensor *plain = qg_op_silu(r.ctx, qg_op_scale(r.ctx, x, 4.0f));
	struct qg_tensor *outs[4] = { a, d, f, plain };
	int bad = !a || !d || !f || !plain || fixed_graph(&r, outs, 4) < 0 || qg_galloc_new(&host, 1, NULL, &ga) < 0 ||
		  qg_galloc_reserve(ga, r.g, NULL, NULL) < 0 || qg_galloc_alloc_graph(ga, r.g) < 0 ||
		  qg_galloc_stats(ga, 0, &st) < 0;
	tap_ok(!bad && st.inplace == 1 && plain->data == plain->src[0]->data,
	       "a plain chain is computed in place (%zu in place)", st.inplace);
	tap_ok(!bad && !overlaps(a, w) && !overlaps(d, c) && !overlaps(f, b),
	       "weights, a view of weights, a computed tensor flagged weights and a CPY into weights are never taken in place");
	qg_galloc_free(ga);
	rg_free(&r);
}

/* Make T (contiguous F32) NE1 rows tall, strides and all. */
static void set_rows(struct qg_tensor *t, int64_t ne1)
{
	t->ne[1] = ne1;
	t->nb[2] = t->nb[1] * (size_t)ne1;
	t->nb[3] = t->nb[2] * (size_t)t->ne[2];
}

static void test_grow(void)
{
	struct tap_rng rng = { 80 };
	struct tbuft tb;
	struct rg r;
	struct qg_galloc *ga = NULL, *ga2 = NULL;
	struct qg_galloc_stats st;

	tb_init(&tb, "grow", 64, SIZE_MAX);
	struct qg_buft *one = &tb.buft, *two[2] = { &tb.buft, qg_buft_host() };
	fixed_begin(&r, &rng);
	struct qg_tensor *x = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 2, 1, 1 }, QG_TENSOR_INPUT);
	struct qg_tensor *a = qg_op_rms_norm(r.ctx, x, 1e-5f);
	struct qg_tensor *b = qg_op_silu(r.ctx, a);
	struct qg_tensor *c = qg_op_mul(r.ctx, b, a);
	int bad = fixed_graph(&r, &c, 1) < 0 || qg_galloc_new(&one, 1, NULL, &ga) < 0
			  ? BAD_ALLOC : check_graph(&r, ga, 1, QG_GALLOC_BEST, 1, NULL);
	size_t before = ga ? qg_galloc_buffer_size(ga, 0) : 0;
	tap_ok(bad == 0 && before > 0 && ga && !qg_galloc_needs_realloc(ga, r.g), "a graph placed: %zu bytes", before);

	/* the batch grows from 2 rows to 16: the plan no longer fits */
	struct qg_tensor *ts[4] = { x, a, b, c };
	for (int i = 0; i < 4; i++)
		set_rows(ts[i], 16);
	tap_ok(ga && qg_galloc_needs_realloc(ga, r.g), "a tensor grew: needs_realloc");
	bad = ga ? check_graph(&r, ga, 1, QG_GALLOC_BEST, 1, NULL) : BAD_ALLOC;
	tap_ok(bad == 0 && qg_galloc_buffer_size(ga, 0) >= 8 * before, "re-planned and placed: %zu bytes, correct",
	       ga ? qg_galloc_buffer_size(ga, 0) : 0);
	for (int i = 0; i < 4; i++)
		set_rows(ts[i], 32);
	tap_ok(ga && qg_galloc_alloc_graph(ga, r.g) == 0 && !qg_galloc_needs_realloc(ga, r.g) &&
	       qg_galloc_stats(ga, 0, &st) == 0 && st.planned >= 2 * 32 * 256,
	       "alloc_graph alone re-plans a grown graph (one buffer id)");

	/* two ids: same structure re-plans with the ids it had; another graph is -EAGAIN */
	strip(ga, 1, r.g);
	if (qg_galloc_new(two, 2, NULL, &ga2) == 0) {
		int nid[3] = { 0, 1, 1 }, lid[1] = { 1 };
		int r0 = qg_galloc_reserve(ga2, r.g, nid, lid);
		for (int i = 0; i < 4; i++)
			set_rows(ts[i], 40);
		int r1 = qg_galloc_alloc_graph(ga2, r.g);
		tap_ok(r0 == 0 && r1 == 0 && a->buffer == qg_galloc_buffer(ga2, 0) && x->buffer == qg_galloc_buffer(ga2, 1),
		       "two ids: a grown graph is re-planned with its ids");
		struct rg r2;
		fixed_begin(&r2, &rng);
		struct qg_tensor *y = qg_op_silu(r2.ctx, rg_leaf(&r2, QG_TYPE_F32, (const int64_t[]){ 32, 1, 1, 1 }, 0));
		tap_ok(fixed_graph(&r2, &y, 1) == 0 && qg_galloc_alloc_graph(ga2, r2.g) == -EAGAIN,
		       "two ids: another graph without reserve is -EAGAIN");
		rg_free(&r2);
		qg_galloc_free(ga2);
	}
	qg_galloc_free(ga);
	rg_free(&r);
}

static void test_out_of_space(void)
{
	struct tap_rng rng = { 81 };
	struct tbuft small, failing;
	struct rg r;

	tb_init(&small, "small", 64, 1024);
	tb_init(&failing, "failing", 64, SIZE_MAX);
	failing.fail = 1;
	fixed_begin(&r, &rng);
	struct qg_tensor *x = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 8, 1, 1 }, QG_TENSOR_INPUT);
	struct qg_tensor *w = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 64, 1, 1 }, QG_TENSOR_WEIGHTS);
	struct qg_tensor *y = qg_op_mul_mat(r.ctx, w, qg_op_silu(r.ctx, x));
	if (fixed_graph(&r, &y, 1) < 0) {
		tap_ok(0, "out-of-space graph");
		return;
	}
	for (int m = 0; m < 3; m++) {
		struct qg_buft *b = &small.buft;
		struct qg_galloc_options opt = { .placement = (enum qg_galloc_placement)m };
		struct qg_galloc *ga;
		int rr = qg_galloc_new(&b, 1, &opt, &ga) == 0 ? qg_galloc_reserve(ga, r.g, NULL, NULL) : 1;
		int ra = rr <= 0 ? qg_galloc_alloc_graph(ga, r.g) : 1;
		tap_ok(rr == -ENOSPC && ra == -ENOSPC && small.n_alloc == 0 && !y->data,
		       "placement %d, max_size 1024 for a 6 KiB plan: -ENOSPC from reserve and alloc_graph", m);
		qg_galloc_free(ga);
	}
	struct qg_buft *fb = &failing.buft;
	struct qg_galloc *ga;
	if (qg_galloc_new(&fb, 1, NULL, &ga) == 0) {
		tap_ok(qg_galloc_reserve(ga, r.g, NULL, NULL) == -ENOMEM && qg_galloc_needs_realloc(ga, r.g),
		       "a buffer type that cannot make the buffer: its error, and no plan");
		failing.fail = 0;
		tap_ok(qg_galloc_alloc_graph(ga, r.g) == 0 && y->data, "and it works once the memory is there");
		qg_galloc_free(ga);
	}
	int bad_ids[2] = { 0, 5 };
	struct qg_buft *host = qg_buft_host();
	if (qg_galloc_new(&host, 1, NULL, &ga) == 0) {
		tap_ok(qg_galloc_reserve(ga, r.g, bad_ids, NULL) == -EINVAL, "a buffer id out of range: -EINVAL");
		qg_galloc_free(ga);
	}
	tap_ok(qg_galloc_new(&host, 0, NULL, &ga) == -EINVAL && qg_galloc_new(NULL, 1, NULL, &ga) == -EINVAL,
	       "qg_galloc_new checks its arguments");
	rg_free(&r);
}

static void test_free_blocks(void)
{
	struct tap_rng rng = { 82 };
	struct qg_buft *host = qg_buft_host();
	struct rg r;

	/* x dies after b, while a and b live: a hole below them and the tail */
	fixed_begin(&r, &rng);
	struct qg_tensor *x = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 2, 1, 1 }, QG_TENSOR_INPUT);
	struct qg_tensor *w = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 32, 1, 1 }, QG_TENSOR_WEIGHTS);
	struct qg_tensor *a = qg_op_mul_mat(r.ctx, w, x), *b = qg_op_mul_mat(r.ctx, w, x);
	struct qg_tensor *y = qg_op_add(r.ctx, a, b);
	if (fixed_graph(&r, &y, 1) < 0) {
		tap_ok(0, "free-block graph");
		return;
	}
	struct qg_galloc_options greedy = { .placement = QG_GALLOC_GREEDY, .max_free_blocks = 1 };
	struct qg_galloc_options best = { .placement = QG_GALLOC_BEST, .max_free_blocks = 1 };
	struct qg_galloc *ga;
	if (qg_galloc_new(&host, 1, &greedy, &ga) == 0) {
		tap_ok(qg_galloc_reserve(ga, r.g, NULL, NULL) == -ENOSPC && qg_galloc_alloc_graph(ga, r.g) == -ENOSPC,
		       "greedy with a free-block table of one: -ENOSPC, no abort");
		qg_galloc_free(ga);
	}
	if (qg_galloc_new(&host, 1, &best, &ga) == 0) {
		struct qg_galloc_stats st = { 0 };
		int bad = check_graph(&r, ga, 1, QG_GALLOC_BEST, 1, NULL);
		qg_galloc_stats(ga, 0, &st);
		tap_ok(bad == 0 && st.greedy == SIZE_MAX && st.planned == st.by_size,
		       "best with the same table: greedy gives up, by size places it");
		qg_galloc_free(ga);
	}
	rg_free(&r);
}

/* By size beats greedy where greedy fragments: placement matters, and both are measured. */
static void test_placements(void)
{
	struct tap_rng rng = { 83 };
	struct qg_buft *host = qg_buft_host();
	struct rg r;
	struct qg_galloc *ga;
	size_t peak[3] = { 0 }, live = 0;

	fixed_begin(&r, &rng);
	/* small s1 then large l1; s1 dies, then a large l2 cannot use s1's hole */
	struct qg_tensor *x = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 1, 1, 1 }, QG_TENSOR_INPUT);
	struct qg_tensor *w1 = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 64, 1, 1 }, QG_TENSOR_WEIGHTS);
	struct qg_tensor *w2 = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 64, 256, 1, 1 }, QG_TENSOR_WEIGHTS);
	struct qg_tensor *w3 = rg_leaf(&r, QG_TYPE_F32, (const int64_t[]){ 256, 64, 1, 1 }, QG_TENSOR_WEIGHTS);
	struct qg_tensor *s1 = qg_op_mul_mat(r.ctx, w1, x);
	struct qg_tensor *l1 = qg_op_mul_mat(r.ctx, w2, s1);
	struct qg_tensor *s2 = qg_op_mul_mat(r.ctx, w3, l1);
	struct qg_tensor *l2 = qg_op_mul_mat(r.ctx, w2, s2);
	struct qg_tensor *y = qg_op_mul_mat(r.ctx, w3, l2);
	if (fixed_graph(&r, &y, 1) < 0)
		return;
	for (int m = 0; m < 3; m++) {
		struct qg_galloc_options opt = { .placement = (enum qg_galloc_placement)m };
		struct qg_galloc_stats st = { 0 };
		if (qg_galloc_new(&host, 1, &opt, &ga) < 0)
			continue;
		int bad = check_graph(&r, ga, 1, (enum qg_galloc_placement)m, 1, NULL);
		qg_galloc_stats(ga, 0, &st);
		peak[m] = bad ? 0 : st.planned;
		live = st.live_peak;
		qg_galloc_free(ga);
	}
	tap_diag("chain of small and large: live peak %zu, greedy %zu, by size %zu, best %zu", live, peak[1], peak[2],
		 peak[0]);
	tap_ok(peak[0] && peak[1] && peak[2] && peak[2] <= peak[1] && peak[0] == peak[2] && live <= peak[2],
	       "every placement correct; by size no worse than greedy; best takes the smaller");
	rg_free(&r);
}

int main(void)
{
	test_tiny();
	test_buft_twice();
	test_view_outputs();
	test_weights_not_inplace();
	test_grow();
	test_out_of_space();
	test_free_blocks();
	test_placements();
	test_random();
	test_faults();
	return tap_done();
}
