/*
 * ops-test.c - every op against a naive reference written here, on 1 to 5
 * pretend threads, for F32 and every quantized weight type; the builders'
 * shape checks; GET_ROWS' index check.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp16.h"
#include "graph-run.h"
#include "ops.h"
#include "quant.h"
#include "tap.h"

static struct tap_rng rng = { 0x9e3779b97f4a7c15ull };
static struct gr_mem mem;

/* A tensor of random floats in [-1, 1) with memory of its own. */
static void fill(struct qg_tensor *t, float lo, float hi)
{
	gr_own(&mem, t);
	for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
		for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
			for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
				for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
					*(float *)((char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
						   i3 * t->nb[3]) = tap_randf(&rng, lo, hi);
}

static float at(const struct qg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
	return *(const float *)((const char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
				i3 * t->nb[3]);
}

/* Normalized mean squared error of T against REF (contiguous, T's shape). */
static double nmse(const struct qg_tensor *t, const double *ref)
{
	double err = 0, sum = 0;
	int64_t n = 0;

	for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
		for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
			for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
				for (int64_t i0 = 0; i0 < t->ne[0]; i0++, n++) {
					double d = at(t, i0, i1, i2, i3) - ref[n];
					if (isnan(d))
						return INFINITY;
					err += d * d;
					sum += ref[n] * ref[n];
				}
	return sum > 0 ? err / sum : err;
}

/* Build OUT's graph, give it memory, run it on NTH threads.  The run's status. */
static int run(struct qg_tensor *out, int nth)
{
	struct qg_graph *g = qg_graph_new(64);
	int r;

	qg_graph_build(g, out);
	gr_own_graph(&mem, g);
	r = gr_run(g, nth);
	qg_graph_free(g);
	return r;
}

/* --- MUL_MAT -------------------------------------------------------------- */

static const enum qg_type wtypes[] = {
	QG_TYPE_F32, QG_TYPE_F16, QG_TYPE_Q8_0, QG_TYPE_Q4_0,
	QG_TYPE_Q4_0_4X4, QG_TYPE_Q4_0_4X8, QG_TYPE_Q4_0_8X8,
};

/* X as the kernels see it: through Q8_0 for the quantized weight types. */
static float x_seen(enum qg_type wt, const float *row, int64_t k, int64_t i)
{
	struct qg_block_q8_0 b;

	if (wt == QG_TYPE_F32 || wt == QG_TYPE_F16)
		return row[i];
	qg_quantize_row_q8_0(row + i / QG_QK * QG_QK, &b, QG_QK);
	return b.qs[i % QG_QK] * qg_fp16_to_fp32(b.d);
}

static void test_mul_mat(struct qg_ctx *ctx, enum qg_type wt, int64_t k, int64_t m, int64_t n, int64_t w2,
			 int64_t x2, int nth)
{
	float *wf = malloc((size_t)(k * m * w2) * sizeof *wf);
	float *wd = malloc((size_t)(k * m * w2) * sizeof *wd);
	struct qg_tensor *w = qg_tensor_new_3d(ctx, wt, k, m, w2);
	struct qg_tensor *x = qg_tensor_new_3d(ctx, QG_TYPE_F32, k, n, x2);
	struct qg_tensor *y = qg_op_mul_mat(ctx, w, x);
	double *ref;
	int r;

	if (!y) {
		tap_ok(0, "mul_mat %s: built (%s)", qg_type_name(wt), qg_ctx_error_text(ctx));
		free(wf);
		free(wd);
		return;
	}
	for (int64_t i = 0; i < k * m * w2; i++)
		wf[i] = tap_randf(&rng, -1, 1);
	gr_own(&mem, w);
	qg_quantize(wt, wf, w->data, qg_tensor_nbytes(w), m * w2, k, NULL);
	qg_dequantize(wt, w->data, wd, (size_t)(k * m * w2) * sizeof *wd, m * w2, k);
	fill(x, -1, 1);
	ref = calloc((size_t)(m * n * x2), sizeof *ref);
	for (int64_t b = 0; b < x2; b++)
		for (int64_t j = 0; j < n; j++) {
			const float *xr = (const float *)x->data + (b * n + j) * k;
			for (int64_t i = 0; i < m; i++) {
				double s = 0;
				const float *wr = wd + ((b / (x2 / w2)) * m + i) * k;
				for (int64_t c = 0; c < k; c++)
					s += (double)wr[c] * x_seen(wt, xr, k, c);
				ref[(b * n + j) * m + i] = s;
			}
		}
	r = run(y, nth);
	double e = nmse(y, ref);
	tap_ok(r == 0 && e < (wt == QG_TYPE_F16 ? 1e-9 : 1e-10),
	       "mul_mat %s k=%lld m=%lld n=%lld batch %lld/%lld on %d threads: nmse %.3g", qg_type_name(wt),
	       (long long)k, (long long)m, (long long)n, (long long)w2, (long long)x2, nth, e);
	free(ref);
	free(wf);
	free(wd);
}

/* --- elementwise and rows ----------------------------------------------- */

static void test_binary(struct qg_ctx *ctx, enum qg_op op, int nth)
{
	struct qg_tensor *a = qg_tensor_new_3d(ctx, QG_TYPE_F32, 12, 5, 3);
	struct qg_tensor *b = qg_tensor_new_3d(ctx, QG_TYPE_F32, 12, 1, 3);	/* row broadcast */
	struct qg_tensor *c = qg_tensor_new_1d(ctx, QG_TYPE_F32, 4);		/* repeats along rows too */
	struct qg_tensor *at_ = qg_tensor_transpose(ctx, qg_tensor_new_2d(ctx, QG_TYPE_F32, 5, 12));
	struct qg_tensor *y1, *y2, *y3;
	double ref1[180], ref2[180], ref3[60];
	int64_t n = 0;

	fill(a, -2, 2);
	fill(b, -2, 2);
	fill(c, -2, 2);
	fill(at_->view_src, -2, 2);
	gr_own(&mem, at_);
	y1 = op == QG_OP_ADD ? qg_op_add(ctx, a, b) : qg_op_mul(ctx, a, b);
	y2 = op == QG_OP_ADD ? qg_op_add(ctx, a, c) : qg_op_mul(ctx, a, c);
	y3 = op == QG_OP_ADD ? qg_op_add(ctx, at_, c) : qg_op_mul(ctx, at_, c);
	for (int64_t i2 = 0; i2 < 3; i2++)
		for (int64_t i1 = 0; i1 < 5; i1++)
			for (int64_t i0 = 0; i0 < 12; i0++, n++) {
				double u = at(a, i0, i1, i2, 0), v = at(b, i0, 0, i2, 0), w = at(c, i0 % 4, 0, 0, 0);
				ref1[n] = (float)(op == QG_OP_ADD ? u + v : u * v);
				ref2[n] = (float)(op == QG_OP_ADD ? u + w : u * w);
				if (i2 == 0) {
					double s = at(at_, i0, i1, 0, 0);
					ref3[i1 * 12 + i0] = (float)(op == QG_OP_ADD ? s + w : s * w);
				}
			}
	tap_ok(y1 && y2 && y3 && run(y1, nth) == 0 && nmse(y1, ref1) == 0 && run(y2, nth) == 0 &&
	       nmse(y2, ref2) == 0 && run(y3, nth) == 0 && nmse(y3, ref3) == 0,
	       "%s: row broadcast, repeat, strided source, %d threads", qg_op_name(op), nth);
}

static double gelu_ref(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void test_unary(struct qg_ctx *ctx, int nth)
{
	struct qg_tensor *a = qg_tensor_new_2d(ctx, QG_TYPE_F32, 37, 6);
	double ref[4][222];

	fill(a, -4, 4);
	struct qg_tensor *y[4] = {
		qg_op_scale(ctx, a, -0.75f),
		qg_op_silu(ctx, a),
		qg_op_gelu(ctx, a),
		qg_op_rms_norm(ctx, a, 1e-5f),
	};
	for (int64_t r = 0; r < 6; r++) {
		double ss = 0;
		for (int64_t i = 0; i < 37; i++)
			ss += (double)at(a, i, r, 0, 0) * at(a, i, r, 0, 0);
		for (int64_t i = 0; i < 37; i++) {
			double x = at(a, i, r, 0, 0);
			ref[0][r * 37 + i] = x * -0.75;
			ref[1][r * 37 + i] = x / (1 + exp(-x));
			ref[2][r * 37 + i] = gelu_ref(x);
			ref[3][r * 37 + i] = x / sqrt(ss / 37 + 1e-5);
		}
	}
	for (int i = 0; i < 4; i++) {
		double e = y[i] && run(y[i], nth) == 0 ? nmse(y[i], ref[i]) : INFINITY;
		tap_ok(e < 1e-12, "%s on %d threads: nmse %.3g", y[i] ? qg_op_name(y[i]->op) : "?", nth, e);
	}

	/* in place: the result over its source, as the allocator may place it */
	struct qg_tensor *s = qg_op_rms_norm(ctx, a, 1e-5f);
	gr_own(&mem, s);
	memcpy(s->data, a->data, qg_tensor_nbytes(a));
	struct qg_tensor *src = qg_tensor_dup(ctx, a);
	src->data = s->data;
	s->src[0] = src;
	double e = gr_run_node(s, nth) == 0 ? nmse(s, ref[3]) : INFINITY;
	tap_ok(e < 1e-12, "rms_norm in place on %d threads: nmse %.3g", nth, e);
}

static void test_soft_max(struct qg_ctx *ctx, int nth, bool with_mask, bool inplace)
{
	const int64_t n0 = 19, n1 = 4, n2 = 3;
	struct qg_tensor *a = qg_tensor_new_3d(ctx, QG_TYPE_F32, n0, n1, n2);
	struct qg_tensor *mask = with_mask ? qg_tensor_new_2d(ctx, QG_TYPE_F32, n0, n1) : NULL;
	double ref[19 * 4 * 3];

	fill(a, -5, 5);
	if (mask) {
		gr_own(&mem, mask);
		/* causal-style: -inf above a diagonal, a whole row of -inf in row 0 for k >= 0 */
		for (int64_t r = 0; r < n1; r++)
			for (int64_t i = 0; i < n0; i++)
				((float *)mask->data)[r * n0 + i] = r == 0 ? -INFINITY :
								    i > 12 + r ? -INFINITY : tap_randf(&rng, -1, 1);
	}
	struct qg_tensor *y = qg_op_soft_max(ctx, a, mask, 0.5f);
	for (int64_t i2 = 0; i2 < n2; i2++)
		for (int64_t r = 0; r < n1; r++) {
			double v[19], max = -INFINITY, sum = 0;
			for (int64_t i = 0; i < n0; i++) {
				v[i] = at(a, i, r, i2, 0) * 0.5 + (mask ? ((float *)mask->data)[r * n0 + i] : 0);
				max = v[i] > max ? v[i] : max;
			}
			for (int64_t i = 0; i < n0; i++)
				sum += max == -INFINITY ? 0 : exp(v[i] - max);
			for (int64_t i = 0; i < n0; i++)
				ref[(i2 * n1 + r) * n0 + i] = max == -INFINITY ? 0 : exp(v[i] - max) / sum;
		}
	int r = -1;
	if (y && inplace) {
		y->data = a->data;	/* over its own source */
		r = gr_run_node(y, nth);
	} else if (y) {
		r = run(y, nth);
	}
	double e = r == 0 ? nmse(y, ref) : INFINITY;
	tap_ok(e < 1e-12, "soft_max%s%s on %d threads: nmse %.3g", mask ? " with mask" : "",
	       inplace ? " in place" : "", nth, e);
}

/* --- CPY and GET_ROWS --------------------------------------------------- */

static void test_cpy(struct qg_ctx *ctx, int nth)
{
	const int64_t k = 64, rows = 5;
	struct qg_tensor *a = qg_tensor_new_2d(ctx, QG_TYPE_F32, k, rows);
	struct qg_tensor *h = qg_tensor_new_2d(ctx, QG_TYPE_F16, k, rows);
	struct qg_tensor *q = qg_tensor_new_2d(ctx, QG_TYPE_Q8_0, k, rows);
	struct qg_block_q8_0 qb[2 * 5];
	double ref[64 * 5];
	bool ok;

	fill(a, -3, 3);
	/* F32 -> F16: round to nearest even */
	struct qg_tensor *c1 = qg_op_cpy(ctx, a, h);
	ok = c1 && run(c1, nth) == 0 && c1->data == h->data;
	for (int64_t i = 0; ok && i < k * rows; i++)
		ok = ((qg_fp16 *)h->data)[i] == qg_fp32_to_fp16(((float *)a->data)[i]);
	tap_ok(ok, "cpy f32 -> f16 writes its destination, rounded (%d threads)", nth);

	/* F16 -> F32 */
	struct qg_tensor *c2 = qg_op_cast(ctx, h, QG_TYPE_F32);
	for (int64_t i = 0; i < k * rows; i++)
		ref[i] = qg_fp16_to_fp32(((qg_fp16 *)h->data)[i]);
	tap_ok(c2 && run(c2, nth) == 0 && nmse(c2, ref) == 0, "cast f16 -> f32 exact (%d threads)", nth);

	/* F32 -> Q8_0: ggml's bytes */
	struct qg_tensor *c3 = qg_op_cpy(ctx, a, q);
	qg_quantize_row_q8_0(a->data, qb, k * rows);
	tap_ok(c3 && run(c3, nth) == 0 && memcmp(q->data, qb, sizeof qb) == 0,
	       "cpy f32 -> q8_0 equals ggml's quantization (%d threads)", nth);

	/* Q8_0 -> F32 and Q8_0 -> F16 */
	struct qg_tensor *c4 = qg_op_cast(ctx, q, QG_TYPE_F32);
	struct qg_tensor *c5 = qg_op_cast(ctx, q, QG_TYPE_F16);
	for (int64_t i = 0; i < k * rows; i++)
		ref[i] = qb[i / QG_QK].qs[i % QG_QK] * qg_fp16_to_fp32(qb[i / QG_QK].d);
	ok = c4 && c5 && run(c4, nth) == 0 && nmse(c4, ref) == 0 && run(c5, nth) == 0;
	for (int64_t i = 0; ok && i < k * rows; i++)
		ok = ((qg_fp16 *)c5->data)[i] == qg_fp32_to_fp16((float)ref[i]);
	tap_ok(ok, "cast q8_0 -> f32 and -> f16 (%d threads)", nth);

	/* F16 -> Q8_0, and a transposed (strided) F32 source made contiguous */
	struct qg_tensor *c6 = qg_op_cast(ctx, h, QG_TYPE_Q8_0);
	float hf[64 * 5];
	for (int64_t i = 0; i < k * rows; i++)
		hf[i] = qg_fp16_to_fp32(((qg_fp16 *)h->data)[i]);
	qg_quantize_row_q8_0(hf, qb, k * rows);
	tap_ok(c6 && run(c6, nth) == 0 && memcmp(c6->data, qb, sizeof qb) == 0, "cast f16 -> q8_0 (%d threads)",
	       nth);
	struct qg_tensor *tr = qg_tensor_transpose(ctx, a);
	struct qg_tensor *c7 = qg_op_cast(ctx, tr, QG_TYPE_F32);
	for (int64_t i1 = 0; i1 < k; i1++)
		for (int64_t i0 = 0; i0 < rows; i0++)
			ref[i1 * rows + i0] = ((float *)a->data)[i0 * k + i1];
	tap_ok(c7 && run(c7, nth) == 0 && qg_tensor_is_contiguous(c7) && nmse(c7, ref) == 0,
	       "cast of a transposed f32 is its contiguous copy (%d threads)", nth);
}

/* A Q4_K or Q6_K matrix cast to its own type (weights read back): its bytes, and nothing else taken. */
static void test_kquant_copy(struct qg_ctx *ctx, enum qg_type tt, int nth)
{
	const int64_t k = 512, rows = 7;
	struct qg_tensor *w = qg_tensor_new_2d(ctx, tt, k, rows);
	struct qg_tensor *c = w ? qg_op_cast(ctx, w, tt) : NULL;

	if (c && gr_own(&mem, w) == 0) {
		for (size_t i = 0; i < qg_tensor_nbytes(w); i++)
			((unsigned char *)w->data)[i] = (unsigned char)tap_rand(&rng);
	}
	tap_ok(c && run(c, nth) == 0 && memcmp(c->data, w->data, qg_tensor_nbytes(w)) == 0,
	       "cast %s -> %s copies its bytes (%d threads)", qg_type_name(tt), qg_type_name(tt), nth);

	struct qg_ctx *bad = qg_ctx_new(32);
	enum qg_type other = tt == QG_TYPE_Q4_K ? QG_TYPE_Q6_K : QG_TYPE_Q4_K;
	struct qg_tensor *w3 = qg_tensor_new_3d(bad, tt, k, rows, 2), *w2 = qg_tensor_new_2d(bad, tt, k, rows);
	tap_ok(qg_op_cast(bad, w2, other) == NULL && qg_op_cast(bad, w3, tt) == NULL &&
	       qg_op_cast(bad, w2, QG_TYPE_Q4_0) == NULL,
	       "cast %s to another K-quant, of a 3-D stack, to q4_0: refused", qg_type_name(tt));
	qg_ctx_free(bad);
}

static void test_get_rows(struct qg_ctx *ctx, enum qg_type tt, int nth)
{
	/* a row is one block or more: 256 values for the K-quants */
	const int64_t k = qg_type_block_values(tt) > 64 ? qg_type_block_values(tt) : 64, R = 7, n = 5;
	static float src[256 * 7 * 2], deq[256 * 7 * 2];
	static double ref[256 * 5 * 2];
	struct qg_tensor *t = qg_tensor_new_3d(ctx, tt, k, R, 2);
	struct qg_tensor *idx = qg_tensor_new_2d(ctx, QG_TYPE_I32, n, 2);
	struct qg_tensor *y = qg_op_get_rows(ctx, t, idx);

	if (!y) {
		tap_ok(0, "get_rows %s built", qg_type_name(tt));
		return;
	}
	for (int64_t i = 0; i < k * R * 2; i++)
		src[i] = tap_randf(&rng, -2, 2);
	gr_own(&mem, t);
	qg_quantize(tt, src, t->data, qg_tensor_nbytes(t), R * 2, k, NULL);
	qg_dequantize(tt, t->data, deq, sizeof deq, R * 2, k);
	gr_own(&mem, idx);
	for (int64_t b = 0; b < 2; b++)
		for (int64_t j = 0; j < n; j++) {
			int32_t r = (int32_t)(tap_rand(&rng) % R);
			((int32_t *)idx->data)[b * n + j] = r;
			for (int64_t i = 0; i < k; i++)
				ref[(b * n + j) * k + i] = deq[(b * R + r) * k + i];
		}
	tap_ok(run(y, nth) == 0 && nmse(y, ref) == 0, "get_rows %s on %d threads", qg_type_name(tt), nth);

	/* an index out of range: that row zeroed, the others right, -ERANGE */
	((int32_t *)idx->data)[3] = (int32_t)R;
	((int32_t *)idx->data)[n + 1] = -1;
	for (int64_t i = 0; i < k; i++)
		ref[3 * k + i] = ref[(n + 1) * k + i] = 0;
	int r = gr_run_node(y, nth);
	tap_ok(r == -ERANGE && nmse(y, ref) == 0, "get_rows %s: index out of range -> -ERANGE, row zeroed (%d)",
	       qg_type_name(tt), r);
}

/* --- the builders refuse what the ops cannot do ------------------------- */

static void test_builders(void)
{
	struct qg_ctx *ctx = qg_ctx_new(32);
	struct qg_tensor *a = qg_tensor_new_2d(ctx, QG_TYPE_F32, 64, 4);
	struct qg_tensor *b = qg_tensor_new_2d(ctx, QG_TYPE_F32, 32, 4);
	struct qg_tensor *q = qg_tensor_new_2d(ctx, QG_TYPE_Q4_0, 64, 4);

	tap_ok(qg_op_mul_mat(ctx, q, b) == NULL && qg_ctx_error(ctx) == -EINVAL, "mul_mat: K mismatch refused: %s",
	       qg_ctx_error_text(ctx));
	qg_ctx_free(ctx);
	ctx = qg_ctx_new(32);
	a = qg_tensor_new_2d(ctx, QG_TYPE_F32, 64, 4);
	b = qg_tensor_new_2d(ctx, QG_TYPE_F32, 64, 3);
	q = qg_tensor_new_2d(ctx, QG_TYPE_Q4_0, 64, 4);
	tap_ok(qg_op_add(ctx, a, b) == NULL && qg_ctx_error(ctx) == -EINVAL, "add: 3 rows do not repeat into 4");
	tap_ok(qg_op_silu(ctx, qg_op_add(ctx, a, b)) == NULL, "a NULL source gives a NULL result");
	qg_ctx_free(ctx);
	ctx = qg_ctx_new(32);
	a = qg_tensor_new_2d(ctx, QG_TYPE_F32, 64, 4);
	q = qg_tensor_new_2d(ctx, QG_TYPE_Q4_0, 64, 4);
	tap_ok(qg_op_silu(ctx, q) == NULL && qg_op_cast(ctx, a, QG_TYPE_Q4_0) == NULL &&
	       qg_op_get_rows(ctx, a, a) == NULL && qg_op_rms_norm(ctx, a, -1.0f) == NULL,
	       "silu on q4_0, cast to q4_0, float indices, negative eps: refused");
	tap_ok(qg_tensor_new_2d(ctx, QG_TYPE_Q4_0_4X4, 64, 6) == NULL, "interleaved rows not a multiple of 4 refused");
	tap_ok(qg_op_mul_mat(ctx, q, a) != NULL, "the same context still builds after errors");
	qg_ctx_free(ctx);
}

int main(void)
{
	const int threads[] = { 1, 2, 3, 5 };
	const int scale = tap_scale();
	struct qg_ctx *ctx = qg_ctx_new(4096);

	test_builders();
	for (size_t i = 0; i < sizeof wtypes / sizeof *wtypes; i++) {
		test_mul_mat(ctx, wtypes[i], 64, 8, 1, 1, 1, 1);
		test_mul_mat(ctx, wtypes[i], 128, 16, 5, 1, 2, 3);
		test_mul_mat(ctx, wtypes[i], 96, 24, 9, 2, 2, 2);
		for (int j = 0; j < scale; j++) {
			int64_t k = 32 * (1 + (int64_t)(tap_rand(&rng) % 6));
			int64_t m = 8 * (1 + (int64_t)(tap_rand(&rng) % 4));
			int64_t n = 1 + (int64_t)(tap_rand(&rng) % 13);
			test_mul_mat(ctx, wtypes[i], k, m, n, 1, 1 + (int64_t)(tap_rand(&rng) % 3),
				     1 + (int)(tap_rand(&rng) % 4));
		}
	}
	for (size_t i = 0; i < sizeof threads / sizeof *threads; i++) {
		int nth = threads[i];
		test_binary(ctx, QG_OP_ADD, nth);
		test_binary(ctx, QG_OP_MUL, nth);
		test_unary(ctx, nth);
		test_soft_max(ctx, nth, false, false);
		test_soft_max(ctx, nth, true, false);
		test_soft_max(ctx, nth, true, true);
		test_cpy(ctx, nth);
		test_kquant_copy(ctx, QG_TYPE_Q4_K, nth);
		test_kquant_copy(ctx, QG_TYPE_Q6_K, nth);
		test_get_rows(ctx, QG_TYPE_F32, nth);
		test_get_rows(ctx, QG_TYPE_F16, nth);
		test_get_rows(ctx, QG_TYPE_Q8_0, nth);
		test_get_rows(ctx, QG_TYPE_Q4_0, nth);
		test_get_rows(ctx, QG_TYPE_Q4_K, nth);
		test_get_rows(ctx, QG_TYPE_Q6_K, nth);
	}
	tap_ok(qg_ctx_error(ctx) == 0, "no builder failed: %s", qg_ctx_error_text(ctx));
	qg_ctx_free(ctx);
	gr_free_all(&mem);
	return tap_done();
}
