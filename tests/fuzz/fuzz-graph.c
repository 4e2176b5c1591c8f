/*
 * fuzz-graph.c - a submitted graph all the way through, as qgraphd runs
 * it: decode, build (qg_wire_graph_build) against an arena and weights of
 * every type, place the intermediates with the graph allocator on host
 * memory, plan and compute on the CPU backend with one thread, free.
 *
 * The arena (floats in [-2, 2), now and then NaN, an infinity or a value
 * near FLT_MAX) and each weight matrix are allocated at their exact size, so
 * ASan sees a byte read or written past any of them; the weights are
 * compared with a pristine copy after every input, so a graph that writes
 * into them (weights are read-only to graphs) aborts.  Outputs land in
 * the arena, intermediates in the allocator's buffer: a tensor placed
 * anywhere else aborts too.
 *
 * Built two ways: with --enable-fuzzing as a libFuzzer target
 * (tests/fuzz/fuzz-graph), and always as tests/fuzz-graph-test, whose
 * main() runs a short deterministic mutation of valid graphs (MUL_MAT
 * with q4_0 weights plain and interleaved, ADD with a broadcast, views of
 * inputs, intermediates and weights, CPY and GET_ROWS): byte-level
 * mutation of the records and field-level mutation of the graphs, for a
 * number of rounds that QGRAPH_TEST_SCALE sets.  Inputs that once broke
 * something are replayed first (regressions()).  QG_FUZZ_CORPUS=DIR
 * writes the seed records there, to start the libFuzzer target's corpus.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/wire-util.h"
#include "backend-cpu.h"
#include "backend.h"
#include "buffer.h"
#include "galloc.h"
#include "quant.h"
#include "wire.h"

#define ARENA_BYTES 32768
#define W_ROWS 8
#define W_COLS 64
#define N_WEIGHTS 7
#define MAX_WORK (1u << 22)		/* values computed (MACs for MUL_MAT): a graph over it is not run */
#define MAX_BYTES (4u << 20)		/* intermediates' bytes: a graph over it is not placed */
#define IDX_AT 6144			/* where the seeds keep GET_ROWS's indices */

static const enum qg_type w_types[N_WEIGHTS] = { QG_TYPE_F32, QG_TYPE_F16, QG_TYPE_Q8_0, QG_TYPE_Q4_0,
						QG_TYPE_Q4_0_4X4, QG_TYPE_Q4_0_4X8, QG_TYPE_Q4_0_8X8 };

static struct {
	unsigned char *arena, *arena0;		/* the arena, and what it holds before every input */
	unsigned char *w[N_WEIGHTS], *w0[N_WEIGHTS];
	size_t w_bytes[N_WEIGHTS];
	struct qg_backend *be;
	struct qg_wire_arena dec;
	long decoded, built, placed, computed;
} fz;

/* Handle H (1..N_WEIGHTS) is weights of type w_types[H - 1], W_ROWS x W_COLS. */
static int lookup(void *ctx, uint64_t h, struct qg_wire_weights *out)
{
	(void)ctx;
	if (h < 1 || h > N_WEIGHTS)
		return -2;
	*out = (struct qg_wire_weights){ .type = w_types[h - 1], .rows = W_ROWS, .cols = W_COLS, .data = fz.w[h - 1] };
	return 0;
}

/* Values in [-2, 2) from a fixed sequence. */
static float value(unsigned i)
{
	return (float)((i * 2654435761u) >> 20 & 4095) / 1024.0f - 2.0f;
}

/* The arena, the weights (quantized from the same values), the backend: once. */
static int setup(void)
{
	float f[W_ROWS * W_COLS];

	if (fz.be)
		return 0;
	for (unsigned i = 0; i < W_ROWS * W_COLS; i++)
		f[i] = value(i + 7);
	fz.arena = aligned_alloc(64, ARENA_BYTES);
	fz.arena0 = malloc(ARENA_BYTES);
	if (!fz.arena || !fz.arena0)
		return -1;
	for (unsigned i = 0; i < ARENA_BYTES / 4; i++) {
		/* now and then a value a client may well send: NaN, infinity, one near FLT_MAX */
		float v = i % 61 == 3 ? __builtin_nanf("") : i % 67 == 5 ? 3e38f : i % 71 == 7 ? -__builtin_inff() : value(i);
		memcpy(fz.arena0 + 4 * i, &v, 4);
	}
	memcpy(fz.arena0 + IDX_AT, (const int32_t[]){ 1, 3 }, 8);	/* the seeds' row indices */
	for (int k = 0; k < N_WEIGHTS; k++) {
		ssize_t n = qg_matrix_size(w_types[k], W_ROWS, W_COLS);
		void *p = NULL;
		/* exactly N bytes: posix_memalign takes any size, and ASan bounds it there */
		if (n <= 0 || posix_memalign(&p, 64, (size_t)n) || !(fz.w0[k] = malloc((size_t)n)))
			return -1;
		fz.w[k] = p;
		fz.w_bytes[k] = (size_t)n;
		if (w_types[k] == QG_TYPE_F16 || w_types[k] == QG_TYPE_F32 || w_types[k] == QG_TYPE_Q8_0 ||
		    w_types[k] == QG_TYPE_Q4_0) {
			if (qg_quantize(w_types[k], f, fz.w[k], (size_t)n, W_ROWS, W_COLS, NULL) != n)
				return -1;
		} else if (qg_repack(w_types[k], fz.w[k], (size_t)n, QG_TYPE_Q4_0, fz.w[3], W_ROWS, W_COLS) != n) {
			return -1;
		}
		memcpy(fz.w0[k], fz.w[k], (size_t)n);
	}
	if (qg_wire_arena_init(&fz.dec, 1 << 20))
		return -1;
	return qg_backend_cpu_new(&(struct qg_cpu_opts){ .threads = 1 }, &fz.be);
}

/* True if [P, P + N) lies inside [BASE, BASE + SIZE). */
static int inside(const void *p, size_t n, const void *base, size_t size)
{
	const unsigned char *a = p, *b = base;

	return a >= b && n <= size && (size_t)(a - b) <= size - n;
}

/* True if T's bytes are where they may be: the arena, the weights, the allocator's buffer. */
static int placed_right(const struct qg_tensor *t, const struct qg_galloc *ga)
{
	size_t n = qg_tensor_nbytes(t);
	struct qg_buffer *buf = ga ? qg_galloc_buffer(ga, 0) : NULL;

	if (!t->data)
		return 0;
	if (inside(t->data, n, fz.arena, ARENA_BYTES))
		return 1;
	for (int k = 0; k < N_WEIGHTS; k++)
		if (inside(t->data, n, fz.w[k], fz.w_bytes[k]))
			return 1;
	return buf && inside(t->data, n, qg_buffer_base(buf), qg_buffer_size(buf));
}

/* The work and the bytes of G's intermediates, saturating: what bounds a run. */
static void cost(const struct qg_graph *g, uint64_t *work, uint64_t *bytes)
{
	*work = *bytes = 0;
	for (size_t i = 0; i < g->n_nodes; i++) {
		const struct qg_tensor *t = g->nodes[i];
		uint64_t w = (uint64_t)qg_tensor_nelements(t), b = t->data || t->view_src ? 0 : qg_tensor_nbytes(t);
		if (t->op == QG_OP_MUL_MAT && __builtin_mul_overflow(w, (uint64_t)t->src[0]->ne[0], &w))
			w = UINT64_MAX;
		*work = *work + w < *work ? UINT64_MAX : *work + w;
		*bytes = *bytes + b < *bytes ? UINT64_MAX : *bytes + b;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct qg_wire_env env = { .arena = NULL, .arena_bytes = ARENA_BYTES, .max_tensors = 64, .weights = lookup };
	struct qg_buft *host = qg_buft_host();
	struct qg_galloc *ga = NULL;
	struct qg_plan *plan = NULL;
	struct qg_wire_graph g;
	uint64_t work, bytes;
	char err[256];

	if (setup())
		abort();
	env.arena = fz.arena;
	memcpy(fz.arena, fz.arena0, ARENA_BYTES);
	Qgraph__Request *r = qg_wire_decode_request(&fz.dec, data, size);
	if (!r || r->body_case != QGRAPH__REQUEST__BODY_SUBMIT)
		return 0;
	fz.decoded++;
	if (qg_wire_graph_build(r->submit, &env, &g, err, sizeof err))
		return 0;
	fz.built++;
	cost(g.graph, &work, &bytes);
	if (work > MAX_WORK || bytes > MAX_BYTES)
		goto out;
	/* as qgraphd places a graph (exec.c): the allocator for what has no bytes yet, then a plan */
	bool fresh = false;
	for (size_t i = 0; i < g.graph->n_nodes + g.graph->n_leafs; i++) {
		struct qg_tensor *t = i < g.graph->n_nodes ? g.graph->nodes[i] : g.graph->leafs[i - g.graph->n_nodes];
		fresh |= !t->data;
	}
	if (fresh && (qg_galloc_new(&host, 1, NULL, &ga) || qg_galloc_reserve(ga, g.graph, NULL, NULL) ||
		      qg_galloc_alloc_graph(ga, g.graph)))
		goto out;
	fz.placed++;
	for (size_t i = 0; i < g.graph->n_nodes + g.graph->n_leafs; i++) {
		struct qg_tensor *t = i < g.graph->n_nodes ? g.graph->nodes[i] : g.graph->leafs[i - g.graph->n_nodes];
		if (!placed_right(t, ga))
			abort();
		if ((t->flags & QG_TENSOR_OUTPUT) && !inside(t->data, qg_tensor_nbytes(t), fz.arena, ARENA_BYTES))
			abort();
	}
	if (qg_backend_graph_plan_create(fz.be, g.graph, &plan))
		goto out;
	(void)qg_backend_graph_plan_compute(fz.be, plan, NULL);	/* GET_ROWS may say -ERANGE: a result like any */
	fz.computed++;
out:
	qg_backend_graph_plan_free(fz.be, plan);
	if (ga) {
		qg_galloc_unplace(ga, g.graph);
		qg_galloc_free(ga);
	}
	qg_wire_graph_free(&g);
	for (int k = 0; k < N_WEIGHTS; k++)
		if (memcmp(fz.w[k], fz.w0[k], fz.w_bytes[k]))
			abort();	/* a graph wrote into weights */
	return 0;
}

#ifndef QG_LIBFUZZER
#include "../lib/tap.h"

/* A graph under construction, in its wire form. */
#define MAXT 16
struct wg {
	size_t n;
	Qgraph__Tensor t[MAXT], *tp[MAXT];
	int64_t ne[MAXT][4];
	uint64_t nb[MAXT][4];
	uint32_t src[MAXT][2];
	int32_t ax[MAXT][4];
	float fp[MAXT];
	Qgraph__Span sp[MAXT];
};

/* Tensor OP of wire TYPE, shape NE0 x NE1, on sources A and B (-1: none); its index. */
static int add(struct wg *g, int type, int op, int64_t ne0, int64_t ne1, int a, int b)
{
	size_t i = g->n++;
	Qgraph__Tensor *t = &g->t[i];

	qgraph__tensor__init(t);
	qgraph__span__init(&g->sp[i]);
	g->tp[i] = t;
	t->type = type;
	t->op = op;
	g->ne[i][0] = ne0;
	g->ne[i][1] = ne1;
	t->n_ne = 2;
	t->ne = g->ne[i];
	g->src[i][0] = (uint32_t)a;
	g->src[i][1] = (uint32_t)b;
	t->n_src = a < 0 ? 0 : b < 0 ? 1 : 2;
	t->src = g->src[i];
	return (int)i;
}

static int input(struct wg *g, int type, int64_t ne0, int64_t ne1, uint64_t bytes, uint64_t at)
{
	int i = add(g, type, QGRAPH__OP__OP_NONE, ne0, ne1, -1, -1);

	g->t[i].flags = 1;
	g->sp[i].offset = at;
	g->sp[i].bytes = bytes;
	g->t[i].arena = &g->sp[i];
	return i;
}

static int weights(struct wg *g, int handle)
{
	static const int wire[N_WEIGHTS] = { QGRAPH__TYPE__TYPE_F32, QGRAPH__TYPE__TYPE_F16, QGRAPH__TYPE__TYPE_Q8_0,
					     QGRAPH__TYPE__TYPE_Q4_0, QGRAPH__TYPE__TYPE_Q4_0_4X4,
					     QGRAPH__TYPE__TYPE_Q4_0_4X8, QGRAPH__TYPE__TYPE_Q4_0_8X8 };
	int i = add(g, wire[handle - 1], QGRAPH__OP__OP_NONE, W_COLS, W_ROWS, -1, -1);

	g->t[i].weights = (uint64_t)handle;
	return i;
}

/* Make f32 tensor I an output at AT. */
static int output(struct wg *g, int i, uint64_t at)
{
	uint64_t n = 4;

	for (size_t d = 0; d < g->t[i].n_ne; d++)
		n *= (uint64_t)g->ne[i][d];
	g->t[i].flags |= 2;
	g->sp[i].offset = at;
	g->sp[i].bytes = n;
	g->t[i].arena = &g->sp[i];
	return i;
}

static int view(struct wg *g, int type, int a, int64_t ne0, int64_t ne1, uint64_t nb0, uint64_t nb1, uint64_t offset)
{
	int i = add(g, type, QGRAPH__OP__OP_VIEW, ne0, ne1, a, -1);

	g->nb[i][0] = nb0;
	g->nb[i][1] = nb1;
	g->t[i].n_nb = 2;
	g->t[i].nb = g->nb[i];
	g->t[i].view_offset = offset;
	return i;
}

static int param(struct wg *g, int i, float p)
{
	g->fp[i] = p;
	g->t[i].n_fparams = 1;
	g->t[i].fparams = &g->fp[i];
	return i;
}

enum { F32 = QGRAPH__TYPE__TYPE_F32, F16 = QGRAPH__TYPE__TYPE_F16, Q8 = QGRAPH__TYPE__TYPE_Q8_0,
       I32 = QGRAPH__TYPE__TYPE_I32 };

/* Valid graph number V into G (0 past the last). */
static int seed_graph(int v, struct wg *g)
{
	int x, y, m, a, b, c, w;

	memset(g, 0, sizeof *g);
	x = input(g, F32, W_COLS, 4, W_COLS * 4 * 4, 0);	/* 4 rows of 64 floats */
	switch (v) {
	case 0:	/* MUL_MAT with q4_0 weights, plus a broadcast row, SILU */
	case 1:	/* the same with interleaved q4_0 */
	case 2:
		w = weights(g, v == 0 ? 4 : v == 1 ? 5 : 7);
		m = add(g, F32, QGRAPH__OP__OP_MUL_MAT, W_ROWS, 4, w, x);
		b = input(g, F32, W_ROWS, 1, W_ROWS * 4, 2048);
		a = add(g, F32, QGRAPH__OP__OP_ADD, W_ROWS, 4, m, b);
		output(g, add(g, F32, QGRAPH__OP__OP_SILU, W_ROWS, 4, a, -1), 8192);
		return 1;
	case 3:	/* views of an input and of an intermediate: VIEW, TRANSPOSE, RESHAPE, PERMUTE */
		a = view(g, F32, x, W_COLS, 2, 4, W_COLS * 8, W_COLS * 4);
		b = add(g, F32, QGRAPH__OP__OP_ADD, W_COLS, 2, a, a);
		c = add(g, F32, QGRAPH__OP__OP_TRANSPOSE, 2, W_COLS, b, -1);
		output(g, param(g, add(g, F32, QGRAPH__OP__OP_SCALE, 2, W_COLS, c, -1), 0.5f), 8192);
		y = add(g, F32, QGRAPH__OP__OP_RESHAPE, W_COLS * 4, 1, x, -1);
		g->t[y].n_ne = 1;
		output(g, add(g, F32, QGRAPH__OP__OP_GELU, W_COLS * 4, 1, y, -1), 12288);
		g->t[g->n - 1].n_ne = 1;
		c = add(g, F32, QGRAPH__OP__OP_PERMUTE, W_COLS, 1, x, -1);
		g->ne[c][2] = 4;
		g->t[c].n_ne = 3;
		memcpy(g->ax[c], (const int32_t[]){ 0, 2, 1, 3 }, sizeof g->ax[c]);
		g->t[c].n_iparams = 4;
		g->t[c].iparams = g->ax[c];
		a = param(g, add(g, F32, QGRAPH__OP__OP_RMS_NORM, W_COLS, 1, c, -1), 1e-6f);
		g->ne[a][2] = 4;
		g->t[a].n_ne = 3;
		output(g, a, 16384);
		return 1;
	case 4:	/* CPY into an f16 and a q8_0 input, read back with GET_ROWS */
		a = input(g, F16, W_COLS, 4, W_COLS * 4 * 2, 2048);
		b = input(g, Q8, W_COLS, 4, 4 * 68, 4096);
		y = input(g, I32, 2, 1, 8, IDX_AT);
		c = add(g, F16, QGRAPH__OP__OP_CPY, W_COLS, 4, x, a);
		output(g, add(g, F32, QGRAPH__OP__OP_GET_ROWS, W_COLS, 2, c, y), 8192);
		c = add(g, Q8, QGRAPH__OP__OP_CPY, W_COLS, 4, x, b);
		output(g, add(g, F32, QGRAPH__OP__OP_GET_ROWS, W_COLS, 2, c, y), 12288);
		return 1;
	case 5:	/* weights read through views: GET_ROWS of f16 and q8_0 rows, MUL_MAT of f32 rows, SOFT_MAX with a mask */
		y = input(g, I32, 2, 1, 8, IDX_AT);
		w = weights(g, 2);
		a = view(g, F16, w, W_COLS, 4, 2, W_COLS * 2, W_COLS * 2 * 2);
		output(g, add(g, F32, QGRAPH__OP__OP_GET_ROWS, W_COLS, 2, a, y), 8192);
		w = weights(g, 3);
		a = view(g, Q8, w, W_COLS, 4, 34, 68, 68 * 4);
		output(g, add(g, F32, QGRAPH__OP__OP_GET_ROWS, W_COLS, 2, a, y), 12288);
		w = weights(g, 1);
		a = view(g, F32, w, W_COLS, 4, 4, W_COLS * 4, 0);
		m = add(g, F32, QGRAPH__OP__OP_MUL_MAT, 4, 4, a, x);
		b = input(g, F32, 4, 1, 16, 7168);
		output(g, param(g, add(g, F32, QGRAPH__OP__OP_SOFT_MAX, 4, 4, m, b), 0.7f), 16384);
		return 1;
	case 6:	/* MUL_MAT with f16 and q8_0 weights, their results multiplied */
		m = add(g, F32, QGRAPH__OP__OP_MUL_MAT, W_ROWS, 4, weights(g, 2), x);
		a = add(g, F32, QGRAPH__OP__OP_MUL_MAT, W_ROWS, 4, weights(g, 3), x);
		output(g, add(g, F32, QGRAPH__OP__OP_MUL, W_ROWS, 4, m, a), 8192);
		return 1;
	case 7:	/* refused: a CPY into weights (a mutation may make it anything) */
		w = weights(g, 1);
		a = view(g, F32, x, W_COLS, W_ROWS / 2, 4, W_COLS * 4, 0);
		b = view(g, F32, w, W_COLS, W_ROWS / 2, 4, W_COLS * 4, 0);
		c = add(g, F32, QGRAPH__OP__OP_CPY, W_COLS, W_ROWS / 2, a, b);
		output(g, param(g, add(g, F32, QGRAPH__OP__OP_SCALE, W_COLS, W_ROWS / 2, c, -1), 2.0f), 8192);
		return 1;
	default:
		return 0;
	}
}

static size_t pack(struct wg *g, uint8_t *buf)
{
	Qgraph__SubmitGraph sg = QGRAPH__SUBMIT_GRAPH__INIT;
	Qgraph__Request req = QGRAPH__REQUEST__INIT;

	sg.n_tensors = g->n;
	sg.tensors = g->tp;
	req.request_id = 1;
	req.body_case = QGRAPH__REQUEST__BODY_SUBMIT;
	req.submit = &sg;
	return qgraph__request__pack(&req, buf);
}

/* A value a field is likely to be wrong with. */
static int64_t edgy(struct tap_rng *rng)
{
	static const int64_t v[] = { 0, 1, 2, 3, 4, 5, 7, 8, 16, 31, 32, 33, 34, 63, 64, 65, 68, 128, 255, 256,
				     4096, 8192, 32768, -1, -4, INT32_MAX, (int64_t)1 << 40, INT64_MAX };
	int64_t x = v[tap_rand(rng) % (sizeof v / sizeof v[0])];

	return tap_rand(rng) % 4 ? x : (int64_t)((uint64_t)x + tap_rand(rng) % 9 - 4);	/* wraps at the ends */
}

/* Change one field of one tensor of G to something near its edges. */
static void mutate_field(struct wg *g, struct tap_rng *rng)
{
	size_t i = tap_rand(rng) % g->n;
	Qgraph__Tensor *t = &g->t[i];
	int64_t v = edgy(rng);

	switch (tap_rand(rng) % 12) {
	case 0: g->ne[i][tap_rand(rng) % 2] = v; break;
	case 1: t->n_ne = 1 + tap_rand(rng) % 4; break;
	case 2: g->src[i][tap_rand(rng) % 2] = (uint32_t)(tap_rand(rng) % (g->n + 1)); break;
	case 3: t->n_src = tap_rand(rng) % 3; break;
	case 4: t->op = (Qgraph__Op)(tap_rand(rng) % 15); break;
	case 5: t->type = (Qgraph__Type)(tap_rand(rng) % 8); break;
	case 6: t->view_offset = (uint64_t)v; break;
	case 7:
		g->nb[i][tap_rand(rng) % 4] = (uint64_t)v;
		t->nb = g->nb[i];
		t->n_nb = t->n_nb ? t->n_nb : 2;
		break;
	case 8: g->sp[i].offset = (uint64_t)v & ~(uint64_t)63; break;
	case 9: g->sp[i].bytes = (uint64_t)v; break;
	case 10: t->weights = 1 + tap_rand(rng) % N_WEIGHTS; break;
	default: g->ax[i][tap_rand(rng) % 4] = (int32_t)(tap_rand(rng) % 5); break;
	}
}

/*
 * Inputs that once broke something, replayed before the mutation run:
 * each is a seed graph with one field changed, and each is now refused
 * when it is built.  The number of them refused.
 */
static int regressions(void)
{
	static uint8_t buf[4096];
	long built = fz.built, decoded = fz.decoded;
	struct wg g;

	/* a CPY whose destination is a VIEW of f32 weights: it wrote into them */
	seed_graph(7, &g);
	LLVMFuzzerTestOneInput(buf, pack(&g, buf));
	/* a VIEW of f16 weights at an odd offset read by GET_ROWS: halves loaded misaligned */
	seed_graph(5, &g);
	g.t[3].view_offset = 1;
	LLVMFuzzerTestOneInput(buf, pack(&g, buf));
	/* a VIEW whose row stride is 66 bytes, added to itself: floats loaded misaligned */
	seed_graph(3, &g);
	g.nb[1][1] = 66;
	LLVMFuzzerTestOneInput(buf, pack(&g, buf));
	return fz.built == built ? (int)(fz.decoded - decoded) : 0;
}

int main(void)
{
	static uint8_t base[16][4096], buf[8192];
	size_t blen[16], nseed = 0;
	struct tap_rng rng = { 0x9a9f };
	long rounds = 10000 + 80000L * tap_scale();
	struct wg g;

	if (setup())
		return tap_ok(0, "set up the arena, the weights and the backend"), tap_done();
	long built0 = 0, computed0 = 0, placed0 = 0;
	int ok = 1;
	for (int v = 0; seed_graph(v, &g); v++, nseed++) {
		blen[nseed] = pack(&g, base[nseed]);
		long b = fz.built, c = fz.computed;
		LLVMFuzzerTestOneInput(base[nseed], blen[nseed]);
		/* every seed but the last (a CPY into weights, refused) builds and runs */
		if ((fz.built > b && fz.computed > c) != (v != 7)) {
			tap_diag("seed %d: built %ld, computed %ld", v, fz.built - b, fz.computed - c);
			ok = 0;
		}
	}
	built0 = fz.built;
	computed0 = fz.computed;
	placed0 = fz.placed;
	tap_ok(ok && nseed == 8, "the %zu seed graphs build and run, and the CPY into weights is refused", nseed);
	/* QG_FUZZ_CORPUS=DIR: the seeds as files there, to start tests/fuzz/fuzz-graph's corpus */
	const char *dir = getenv("QG_FUZZ_CORPUS");
	for (size_t v = 0; dir && v < nseed; v++) {
		char path[512];
		snprintf(path, sizeof path, "%s/seed-%zu", dir, v);
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(base[v], 1, blen[v], f) != blen[v])
			tap_diag("cannot write %s", path);
		if (f)
			fclose(f);
	}
	int refused = regressions();
	tap_ok(refused == 3, "the inputs that once wrote into weights or loaded values misaligned are refused (%d of 3)",
	       refused);

	for (long i = 0; i < rounds; i++) {
		size_t v = tap_rand(&rng) % nseed, len = blen[v];
		if (tap_rand(&rng) % 2) {	/* a field or a few of a seed graph */
			seed_graph((int)v, &g);
			for (int f = 0, n = 1 + (int)(tap_rand(&rng) % 3); f < n; f++)
				mutate_field(&g, &rng);
			len = pack(&g, buf);
		} else {
			memcpy(buf, base[v], len);
			switch (tap_rand(&rng) % 3) {
			case 0:	/* bit flips */
				for (int f = 0, n = 1 + (int)(tap_rand(&rng) % 4); f < n; f++)
					buf[tap_rand(&rng) % len] ^= (uint8_t)(1u << (tap_rand(&rng) % 8));
				break;
			case 1:	/* byte values at random places */
				for (int f = 0, n = 1 + (int)(tap_rand(&rng) % 3); f < n; f++)
					buf[tap_rand(&rng) % len] = (uint8_t)tap_rand(&rng);
				break;
			default: {	/* splice another seed's tail in */
				size_t o = tap_rand(&rng) % nseed, cut = tap_rand(&rng) % len, from = tap_rand(&rng) % blen[o];
				memcpy(buf + cut, base[o] + from, blen[o] - from);
				len = cut + blen[o] - from;
			}
			}
		}
		LLVMFuzzerTestOneInput(buf, len);
	}
	tap_ok(fz.computed > computed0 && fz.built > built0,
	       "%ld mutated graphs: %ld decoded, %ld built, %ld placed, %ld computed, the weights untouched", rounds,
	       fz.decoded, fz.built - built0, fz.placed - placed0, fz.computed - computed0);
	qg_backend_free(fz.be);
	qg_wire_arena_free(&fz.dec);
	free(fz.arena);
	free(fz.arena0);
	for (int k = 0; k < N_WEIGHTS; k++) {
		free(fz.w[k]);
		free(fz.w0[k]);
	}
	return tap_done();
}
#endif
