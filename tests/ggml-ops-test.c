/*
 * ggml-ops-test.c - the ops of ggml's general form (ROPE, GLU, SET_ROWS,
 * FLASH_ATTN_EXT, NORM) built with qg_op_ex from ggml's op_params, each against
 * a plain reference written here in double precision from ggml's
 * definitions, on 1 to 3 pretend threads; and the builder refusing what
 * the ops cannot do (bad modes, shapes, types, parameters it does not
 * read), and indices out of range found when the op runs.
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
#include "tap.h"

static struct tap_rng rng = { 0x2545f4914f6cdd1dull };
static struct gr_mem mem;

static float *f32_at(const struct qg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
	return (float *)((char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

static qg_fp16 *f16_at(const struct qg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
	return (qg_fp16 *)((char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

/* T (F32 or F16) filled with random values in [LO, HI), with memory of its own (its root's, for a view). */
static void fill(struct qg_tensor *t, float lo, float hi)
{
	gr_own(&mem, t);
	for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
		for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
			for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
				for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
					float v = tap_randf(&rng, lo, hi);
					if (t->type == QG_TYPE_F16)
						*f16_at(t, i0, i1, i2, i3) = qg_fp32_to_fp16(v);
					else
						*f32_at(t, i0, i1, i2, i3) = v;
				}
}

/* Normalized mean squared error of F32 T against REF (T's shape, packed). */
static double nmse(const struct qg_tensor *t, const double *ref)
{
	double err = 0, sum = 0;
	int64_t n = 0;

	for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
		for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
			for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
				for (int64_t i0 = 0; i0 < t->ne[0]; i0++, n++) {
					double d = *f32_at(t, i0, i1, i2, i3) - ref[n];
					if (isnan(d))
						return INFINITY;
					err += d * d;
					sum += ref[n] * ref[n];
				}
	return sum > 0 ? err / sum : err;
}

static void set_f(int32_t *p, int i, float v)
{
	memcpy(&p[i], &v, sizeof v);
}

/* Run T (every source with data) on NTH pretend threads. */
static int run(struct qg_tensor *t, int nth)
{
	struct qg_graph *g = qg_graph_new(64);
	int r = qg_graph_build(g, t);

	if (r == 0) {
		gr_own_graph(&mem, g);
		gr_fix_views(g);
		r = gr_run(g, nth);
	}
	qg_graph_free(g);
	return r;
}

/* --- ROPE ---------------------------------------------------------------- */

struct rope_case {
	const char *what;
	int n_dims, mode, n_offs, n_ctx_orig;
	float base, scale, ext, attn, beta_fast, beta_slow;
	bool ff, strided;
};

/* The angle's cosine and sine for pair J at position P, by YaRN's definition, in double. */
static void rope_ref_angle(const struct rope_case *c, double p, int j, double ff, double *co, double *si)
{
	const double extrap = p * pow(c->base, -2.0 * j / c->n_dims) / ff, interp = c->scale * extrap;
	double theta = interp, m = c->attn;

	if (c->ext != 0.0f) {
		/* the dimensions where the blend turns: where a rotation takes BETA turns over n_ctx_orig */
		double lo = floor(c->n_dims * log(c->n_ctx_orig / (c->beta_fast * 2 * M_PI)) / (2 * log(c->base)));
		double hi = ceil(c->n_dims * log(c->n_ctx_orig / (c->beta_slow * 2 * M_PI)) / (2 * log(c->base)));
		lo = fmax(0, lo);
		hi = fmin(c->n_dims - 1, hi);
		double y = (j - lo) / fmax(0.001, hi - lo);
		double mix = (1 - fmin(1, fmax(0, y))) * c->ext;
		theta = interp * (1 - mix) + extrap * mix;
		m *= 1 + 0.1 * log(1 / c->scale);
	}
	*co = cos(theta) * m;
	*si = sin(theta) * m;
}

static void test_rope(const struct rope_case *c, int nth)
{
	struct qg_ctx *ctx = qg_ctx_new(16);
	const int64_t ne0 = 32, heads = 3, tokens = 5;
	struct qg_tensor *a, *pos = qg_tensor_new_1d(ctx, QG_TYPE_I32, tokens), *ff = NULL;

	if (c->strided) {	/* a view of every other head of a wider tensor, as Q out of a fused QKV */
		struct qg_tensor *big = qg_tensor_new_3d(ctx, QG_TYPE_F32, ne0, 2 * heads, tokens);
		fill(big, -1, 1);
		a = qg_tensor_view(ctx, big, 3, (const int64_t[]){ ne0, heads, tokens },
				   (const size_t[]){ 2 * ne0 * 4, 2 * heads * ne0 * 4 }, ne0 * 4);
	} else {
		a = qg_tensor_new_3d(ctx, QG_TYPE_F32, ne0, heads, tokens);
		fill(a, -1, 1);
	}
	gr_own(&mem, pos);
	for (int i = 0; i < tokens; i++)
		((int32_t *)pos->data)[i] = (int32_t)(tap_rand(&rng) % 500);
	if (c->ff) {
		ff = qg_tensor_new_1d(ctx, QG_TYPE_F32, c->n_dims / 2);
		fill(ff, 1, 4);
	}
	int32_t p[QG_MAX_OP_PARAMS] = { 0, c->n_dims, c->mode, 0, c->n_ctx_orig };
	set_f(p, 5, c->base);
	set_f(p, 6, c->scale);
	set_f(p, 7, c->ext);
	set_f(p, 8, c->attn);
	set_f(p, 9, c->beta_fast);
	set_f(p, 10, c->beta_slow);
	p[15] = c->n_offs;
	struct qg_tensor *src[3] = { a, pos, ff };
	struct qg_tensor *y = qg_op_ex(ctx, QG_OP_ROPE, src, ff ? 3 : 2, p, QG_MAX_OP_PARAMS);
	if (!y) {
		tap_ok(0, "rope %s built: %s", c->what, qg_ctx_error_text(ctx));
		qg_ctx_free(ctx);
		return;
	}

	double *ref = malloc(sizeof(double) * ne0 * heads * tokens);
	for (int64_t t = 0; t < tokens; t++)
		for (int64_t h = 0; h < heads; h++) {
			double *r = ref + (t * heads + h) * ne0;
			for (int64_t i = 0; i < ne0; i++)
				r[i] = *f32_at(a, i, h, t, 0);
			for (int j = 0; j < c->n_dims / 2; j++) {
				double co, si, f = ff ? ((float *)ff->data)[j] : 1.0;
				rope_ref_angle(c, ((int32_t *)pos->data)[t], j, f, &co, &si);
				int64_t u = c->n_offs + (c->mode == 2 ? j : 2 * j), v = u + (c->mode == 2 ? c->n_dims / 2 : 1);
				double x0 = *f32_at(a, u, h, t, 0), x1 = *f32_at(a, v, h, t, 0);
				r[u] = x0 * co - x1 * si;
				r[v] = x0 * si + x1 * co;
			}
		}
	int rr = run(y, nth);
	double e = nmse(y, ref);
	tap_ok(rr == 0 && e < 1e-9, "rope %s on %d threads: nmse %.3g", c->what, nth, e);
	free(ref);
	qg_ctx_free(ctx);
}

static const struct rope_case rope_cases[] = {
	{ "normal", 32, 0, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, false, false },
	{ "neox", 32, 2, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, false, false },
	{ "neox, 16 of 32 dims from 8 on", 16, 2, 8, 0, 500000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, false, false },
	{ "normal, 24 of 32 dims, strided view", 24, 0, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, false, true },
	{ "neox, yarn (ext 1, scale 1/4, attn 0.9)", 32, 2, 0, 4096, 10000.0f, 0.25f, 1.0f, 0.9f, 32.0f, 1.0f, false,
	  false },
	{ "normal, frequency factors", 32, 0, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, true, false },
};

/* --- GLU ----------------------------------------------------------------- */

static double gate_ref(int gate, double x)
{
	switch (gate) {
	case QG_GLU_REGLU:
		return x > 0 ? x : 0;
	case QG_GLU_GEGLU:
		return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * x * (1 + 0.044715 * x * x)));
	default:
		return x / (1 + exp(-x));
	}
}

static void test_glu(int gate, bool split, bool swapped, int nth)
{
	static const char *names[] = { "reglu", "geglu", "swiglu" };
	struct qg_ctx *ctx = qg_ctx_new(8);
	const int64_t nc = 24, rows = 3, n2 = 2;
	struct qg_tensor *a = qg_tensor_new_3d(ctx, QG_TYPE_F32, split ? nc : 2 * nc, rows, n2);
	struct qg_tensor *b = split ? qg_tensor_new_3d(ctx, QG_TYPE_F32, nc, rows, n2) : NULL;
	const int32_t p[2] = { gate, swapped };
	struct qg_tensor *src[2] = { a, b };
	double ref[24 * 3 * 2];

	fill(a, -4, 4);
	if (b)
		fill(b, -2, 2);
	struct qg_tensor *y = qg_op_ex(ctx, QG_OP_GLU, src, split ? 2 : 1, p, 2);
	for (int64_t r = 0; r < rows * n2; r++)
		for (int64_t i = 0; i < nc; i++) {
			const float *ar = (const float *)a->data + r * a->ne[0];
			double x, g;
			if (split) {	/* ggml reads the swapped flag only when one source holds both halves */
				x = ar[i];
				g = ((const float *)b->data)[r * nc + i];
			} else {
				x = ar[swapped ? nc + i : i];
				g = ar[swapped ? i : nc + i];
			}
			ref[r * nc + i] = gate_ref(gate, x) * g;
		}
	int rr = y ? run(y, nth) : -1;
	double e = y ? nmse(y, ref) : INFINITY;
	tap_ok(y && y->ne[0] == nc && rr == 0 && e < 1e-12, "glu %s %s%s on %d threads: nmse %.3g", names[gate],
	       split ? "split" : "fused", swapped ? ", swapped" : "", nth, e);
	qg_ctx_free(ctx);
}

/* --- SET_ROWS ------------------------------------------------------------ */

/* Index J of slice (I2, I3) of IDX (I32 or I64). */
static int64_t index_at(const struct qg_tensor *idx, int64_t j, int64_t i2, int64_t i3)
{
	const char *p = (const char *)idx->data + j * idx->nb[0] + i2 * idx->nb[1] + i3 * idx->nb[2];
	if (idx->type == QG_TYPE_I64)
		return *(const int64_t *)p;
	return *(const int32_t *)p;
}

static void test_set_rows(enum qg_type rt, enum qg_type dt, enum qg_type it, int nth)
{
	struct qg_ctx *ctx = qg_ctx_new(8);
	const int64_t n0 = 16, n = 3, R = 10, n2 = 4, i2n = 2;
	struct qg_tensor *rows = qg_tensor_new_3d(ctx, rt, n0, n, n2);
	struct qg_tensor *idx = qg_tensor_new_2d(ctx, it, n, i2n);
	struct qg_tensor *dst = qg_tensor_new_3d(ctx, dt, n0, R, n2);
	struct qg_tensor *src[3] = { rows, idx, dst };
	char what[96];

	snprintf(what, sizeof what, "set_rows %s -> %s at %s", qg_type_name_any(rt), qg_type_name_any(dt),
		 qg_type_name_any(it));
	fill(rows, -3, 3);
	fill(dst, -3, 3);
	gr_own(&mem, idx);
	/* each slice takes distinct rows: which thread writes a row twice is not defined */
	for (int64_t s = 0; s < i2n; s++)
		for (int64_t j = 0; j < n; j++) {
			int64_t k = (s * 5 + j * 3) % R;
			if (it == QG_TYPE_I64)
				((int64_t *)idx->data)[s * n + j] = k;
			else
				((int32_t *)idx->data)[s * n + j] = (int32_t)k;
		}
	size_t bytes = qg_tensor_nbytes(dst);
	unsigned char *want = malloc(bytes);
	memcpy(want, dst->data, bytes);
	for (int64_t i2 = 0; i2 < n2; i2++)
		for (int64_t j = 0; j < n; j++) {
			int64_t k = index_at(idx, j, i2 % i2n, 0);
			for (int64_t i0 = 0; i0 < n0; i0++) {
				float v = rt == QG_TYPE_F16 ? qg_fp16_to_fp32(*f16_at(rows, i0, j, i2, 0))
							    : *f32_at(rows, i0, j, i2, 0);
				char *d = (char *)want + i0 * dst->nb[0] + k * dst->nb[1] + i2 * dst->nb[2];
				if (dt == QG_TYPE_F16) {
					qg_fp16 h = qg_fp32_to_fp16(v);
					memcpy(d, &h, sizeof h);
				} else {
					memcpy(d, &v, sizeof v);
				}
			}
		}
	struct qg_tensor *y = qg_op_ex(ctx, QG_OP_SET_ROWS, src, 3, NULL, 0);
	int rr = y ? gr_run_node(y, nth) : -1;
	tap_ok(y && y->view_src == dst && rr == 0 && memcmp(dst->data, want, bytes) == 0, "%s on %d threads (%d)", what,
	       nth, rr);

	/* an index out of range: that row is not written, the others are, and the run says -ERANGE */
	if (y) {
		fill(rows, -3, 3);
		memcpy(want, dst->data, bytes);
		if (it == QG_TYPE_I64)
			((int64_t *)idx->data)[1] = R;
		else
			((int32_t *)idx->data)[1] = -1;
		rr = gr_run_node(y, nth);
		int others = 1;
		for (int64_t i2 = 0; i2 < n2; i2++)
			for (int64_t j = 0; j < n; j++) {
				int64_t k = index_at(idx, j, i2 % i2n, 0);
				if (k < 0 || k >= R)
					continue;
				float v = rt == QG_TYPE_F16 ? qg_fp16_to_fp32(*f16_at(rows, 0, j, i2, 0))
							    : *f32_at(rows, 0, j, i2, 0);
				float got = dt == QG_TYPE_F16 ? qg_fp16_to_fp32(*f16_at(dst, 0, k, i2, 0))
							      : *f32_at(dst, 0, k, i2, 0);
				float exp = dt == QG_TYPE_F16 ? qg_fp16_to_fp32(qg_fp32_to_fp16(v)) : v;
				others &= got == exp;
			}
		/* the rows of slices 0 and 2 that index 1 would have written are as they were */
		tap_ok(rr == -ERANGE && others, "%s: an index out of range -> -ERANGE, the other rows written (%d)",
		       what, rr);
	}
	free(want);
	qg_ctx_free(ctx);
}

/* --- FLASH_ATTN_EXT ------------------------------------------------------ */

static void test_flash_attn(int nth, bool masked, int64_t hk, float prec)
{
	struct qg_ctx *ctx = qg_ctx_new(8);
	/* n_kv: two whole blocks of keys of the op's 64 and a tail */
	const int64_t dk = 64, dv = 48, n = 3, h = 4, n_kv = 150;
	struct qg_tensor *q = qg_tensor_new_3d(ctx, QG_TYPE_F32, dk, n, h);
	struct qg_tensor *k = qg_tensor_new_3d(ctx, QG_TYPE_F16, dk, n_kv, hk);
	struct qg_tensor *v = qg_tensor_new_3d(ctx, QG_TYPE_F16, dv, n_kv, hk);
	/* a mask padded past n_kv and n, as llama.cpp's, with -inf (the causal part) in it */
	struct qg_tensor *m = masked ? qg_tensor_new_2d(ctx, QG_TYPE_F16, n_kv + 3, n + 1) : NULL;
	const float scale = 0.125f;
	int32_t p[4] = { 0, 0, 0, (int32_t)prec };
	struct qg_tensor *src[4] = { q, k, v, m };

	set_f(p, 0, scale);
	fill(q, -1, 1);
	fill(k, -1, 1);
	fill(v, -1, 1);
	if (m) {
		fill(m, -1, 1);
		for (int64_t i1 = 0; i1 < n; i1++)
			for (int64_t c = n_kv - 3 + i1; c < n_kv; c++)
				*f16_at(m, c, i1, 0, 0) = 0xfc00;	/* -inf */
		for (int64_t c = 0; c < n_kv + 3; c++)	/* a row masked whole gives zeros */
			*f16_at(m, c, 1, 0, 0) = 0xfc00;
		for (int64_t c = 0; c < 64; c++)	/* row 2: a first block masked whole, the others not */
			*f16_at(m, c, 2, 0, 0) = 0xfc00;
		for (int64_t i1 = 0; i1 < n; i1++)	/* every row: the second block's first keys */
			for (int64_t c = 64; c < 70; c++)
				*f16_at(m, c, i1, 0, 0) = 0xfc00;
	}
	struct qg_tensor *y = qg_op_ex(ctx, QG_OP_FLASH_ATTN_EXT, src, m ? 4 : 3, p, 4);
	double *ref = calloc((size_t)(dv * h * n), sizeof *ref), *s = calloc((size_t)n_kv, sizeof *s);
	for (int64_t i1 = 0; i1 < n; i1++)
		for (int64_t hh = 0; hh < h; hh++) {
			double mx = -INFINITY, sum = 0;
			int64_t kh = hh / (h / hk);
			for (int64_t c = 0; c < n_kv; c++) {
				double dot = 0, mv = m ? qg_fp16_to_fp32(*f16_at(m, c, i1, 0, 0)) : 0;
				for (int64_t d = 0; d < dk; d++)
					dot += (double)qg_fp16_to_fp32(qg_fp32_to_fp16(*f32_at(q, d, i1, hh, 0))) *
					       qg_fp16_to_fp32(*f16_at(k, d, c, kh, 0));
				s[c] = dot * scale + mv;
				mx = fmax(mx, s[c]);
			}
			double *r = ref + (i1 * h + hh) * dv;	/* result [dv, h, n] */
			if (mx == -INFINITY)
				continue;
			for (int64_t c = 0; c < n_kv; c++) {
				s[c] = exp(s[c] - mx);
				sum += s[c];
			}
			for (int64_t c = 0; c < n_kv; c++)
				for (int64_t d = 0; d < dv; d++)
					r[d] += s[c] / sum * qg_fp16_to_fp32(*f16_at(v, d, c, kh, 0));
		}
	int rr = y ? run(y, nth) : -1;
	double e = y ? nmse(y, ref) : INFINITY;
	int zeros = 1;
	for (int64_t hh = 0; y && masked && hh < h; hh++)
		for (int64_t d = 0; d < dv; d++)
			zeros &= *f32_at(y, d, hh, 1, 0) == 0.0f;
	tap_ok(y && y->ne[0] == dv && y->ne[1] == h && y->ne[2] == n && rr == 0 && e < 1e-10 && zeros,
	       "flash_attn_ext %lld heads over %lld kv heads%s, precision %d, on %d threads: nmse %.3g%s",
	       (long long)h, (long long)hk, masked ? ", masked" : "", (int)prec, nth, e,
	       y ? "" : qg_ctx_error_text(ctx));
	free(ref);
	free(s);
	qg_ctx_free(ctx);
}

/* --- NORM ---------------------------------------------------------------- */

static void test_norm(int nth)
{
	struct qg_ctx *ctx = qg_ctx_new(8);
	const int64_t n0 = 40, rows = 3, n2 = 2;
	struct qg_tensor *a = qg_tensor_new_3d(ctx, QG_TYPE_F32, n0, rows, n2);
	int32_t p[1];
	double ref[40 * 3 * 2];

	set_f(p, 0, 1e-5f);
	fill(a, -3, 5);	/* a mean away from 0, so that subtracting it matters */
	for (int64_t r = 0; r < rows * n2; r++) {
		const float *x = (const float *)a->data + r * n0;
		double mean = 0, var = 0;
		for (int64_t i = 0; i < n0; i++)
			mean += x[i] / (double)n0;
		for (int64_t i = 0; i < n0; i++)
			var += (x[i] - mean) * (x[i] - mean) / (double)n0;
		for (int64_t i = 0; i < n0; i++)
			ref[r * n0 + i] = (x[i] - mean) / sqrt(var + 1e-5);
	}
	struct qg_tensor *y = qg_op_ex(ctx, QG_OP_NORM, (struct qg_tensor *[]){ a }, 1, p, 1);
	int rr = y ? run(y, nth) : -1;
	double e = y ? nmse(y, ref) : INFINITY;
	tap_ok(rr == 0 && e < 1e-12, "norm on %d threads: nmse %.3g", nth, e);
	qg_ctx_free(ctx);
}

/* --- the builder refuses ------------------------------------------------ */

static void test_refusals(void)
{
	struct qg_ctx *ctx = qg_ctx_new(64);
	struct qg_tensor *a = qg_tensor_new_3d(ctx, QG_TYPE_F32, 32, 2, 4);
	struct qg_tensor *pos = qg_tensor_new_1d(ctx, QG_TYPE_I32, 4);
	struct qg_tensor *posf = qg_tensor_new_1d(ctx, QG_TYPE_F32, 4);
	struct qg_tensor *pos3 = qg_tensor_new_1d(ctx, QG_TYPE_I32, 3);
	struct qg_tensor *odd = qg_tensor_new_2d(ctx, QG_TYPE_F32, 31, 2);
	struct qg_tensor *rows = qg_tensor_new_2d(ctx, QG_TYPE_F32, 32, 3);
	struct qg_tensor *idx = qg_tensor_new_1d(ctx, QG_TYPE_I64, 3);
	struct qg_tensor *idxf = qg_tensor_new_1d(ctx, QG_TYPE_F32, 3);
	struct qg_tensor *kv = qg_tensor_new_2d(ctx, QG_TYPE_F16, 32, 8);
	struct qg_tensor *kv16 = qg_tensor_new_2d(ctx, QG_TYPE_F16, 16, 8);
	struct qg_tensor *w = qg_tensor_new_2d(ctx, QG_TYPE_F16, 32, 8);
	struct qg_tensor *q = qg_tensor_new_3d(ctx, QG_TYPE_F32, 32, 2, 2);
	struct qg_tensor *kf = qg_tensor_new_2d(ctx, QG_TYPE_F32, 32, 8);
	struct qg_tensor *mshort = qg_tensor_new_2d(ctx, QG_TYPE_F16, 7, 2);
	int32_t rp[QG_MAX_OP_PARAMS] = { 0, 32, 2 }, gp[2] = { QG_GLU_SWIGLU, 0 }, fp[4] = { 0 };
	int bad = 0;

	w->flags |= QG_TENSOR_WEIGHTS;
	set_f(rp, 5, 10000.0f);
	set_f(rp, 6, 1.0f);
	set_f(rp, 8, 1.0f);
	set_f(fp, 0, 1.0f);
#define REFUSED(op, n_src, params, n_params, why, ...)                                                      \
	do {                                                                                                \
		struct qg_tensor *s_[] = { __VA_ARGS__ };                                                   \
		if (qg_op_ex(ctx, op, s_, n_src, params, n_params)) {                                      \
			tap_diag("not refused: %s", why);                                                  \
			bad++;                                                                              \
		}                                                                                           \
	} while (0)
	/* the good forms first: the refusals below each change one thing */
	struct qg_tensor *ok_rope = qg_op_ex(ctx, QG_OP_ROPE, (struct qg_tensor *[]){ a, pos }, 2, rp, 16);
	struct qg_tensor *ok_glu = qg_op_ex(ctx, QG_OP_GLU, (struct qg_tensor *[]){ a }, 1, gp, 2);
	struct qg_tensor *ok_set = qg_op_ex(ctx, QG_OP_SET_ROWS, (struct qg_tensor *[]){ rows, idx, kv }, 3, NULL, 0);
	struct qg_tensor *ok_fa = qg_op_ex(ctx, QG_OP_FLASH_ATTN_EXT, (struct qg_tensor *[]){ q, kv, kv }, 3, fp, 4);
	tap_ok(ok_rope && ok_glu && ok_glu->ne[0] == 16 && ok_set && ok_fa && ok_fa->ne[1] == 2,
	       "the good forms build: rope, fused glu (half as wide), set_rows, flash_attn_ext %s", qg_ctx_error_text(ctx));

	int32_t p1[QG_MAX_OP_PARAMS];
	memcpy(p1, rp, sizeof p1);
	p1[2] = 1;
	REFUSED(QG_OP_ROPE, 2, p1, 16, "rope mode 1", a, pos);
	p1[2] = 8;
	REFUSED(QG_OP_ROPE, 2, p1, 16, "rope mode 8 (mrope)", a, pos);
	memcpy(p1, rp, sizeof p1);
	p1[1] = 31;
	REFUSED(QG_OP_ROPE, 2, p1, 16, "rope n_dims odd", a, pos);
	p1[1] = 34;
	REFUSED(QG_OP_ROPE, 2, p1, 16, "rope n_dims past the row", a, pos);
	p1[1] = 32;
	p1[15] = 2;
	REFUSED(QG_OP_ROPE, 2, p1, 16, "rope n_offs + n_dims past the row", a, pos);
	memcpy(p1, rp, sizeof p1);
	set_f(p1, 5, 0.0f);
	REFUSED(QG_OP_ROPE, 2, p1, 16, "rope freq_base 0", a, pos);
	set_f(p1, 5, NAN);
	REFUSED(QG_OP_ROPE, 2, p1, 16, "rope freq_base nan", a, pos);
	memcpy(p1, rp, sizeof p1);
	p1[12] = 4;
	REFUSED(QG_OP_ROPE, 2, p1, 16, "rope sections without mrope", a, pos);
	REFUSED(QG_OP_ROPE, 2, rp, 16, "rope positions f32", a, posf);
	REFUSED(QG_OP_ROPE, 2, rp, 16, "rope 3 positions for 4 tokens", a, pos3);
	REFUSED(QG_OP_ROPE, 1, rp, 16, "rope without positions", a);
	REFUSED(QG_OP_ROPE, 4, rp, 16, "rope with a fourth source", a, pos, a, a);
	REFUSED(QG_OP_ROPE, 2, rp, 16, "rope of f16", kv, pos);
	REFUSED(QG_OP_ROPE, 2, rp, 16, "rope of a transposed view", qg_tensor_transpose(ctx, a), pos);

	gp[0] = 3;
	REFUSED(QG_OP_GLU, 1, gp, 2, "glu gate 3", a);
	gp[0] = QG_GLU_GEGLU;
	gp[1] = 2;
	REFUSED(QG_OP_GLU, 1, gp, 2, "glu swapped 2", a);
	gp[1] = 0;
	REFUSED(QG_OP_GLU, 1, gp, 2, "glu fused on an odd row", odd);
	REFUSED(QG_OP_GLU, 2, gp, 2, "glu split of two shapes", a, q);
	int32_t gp3[3] = { QG_GLU_SWIGLU, 0, 1 };
	REFUSED(QG_OP_GLU, 1, gp3, 3, "glu with a word it does not read", a);

	REFUSED(QG_OP_SET_ROWS, 3, NULL, 0, "set_rows into weights", rows, idx, w);
	REFUSED(QG_OP_SET_ROWS, 3, NULL, 0, "set_rows at f32 indices", rows, idxf, kv);
	REFUSED(QG_OP_SET_ROWS, 3, NULL, 0, "set_rows of rows of another width", rows, idx, kv16);
	REFUSED(QG_OP_SET_ROWS, 3, NULL, 0, "set_rows with 3 indices for 2 rows", odd, idx, kv);
	REFUSED(QG_OP_SET_ROWS, 2, NULL, 0, "set_rows without a destination", rows, idx);
	REFUSED(QG_OP_SET_ROWS, 3, rp + 1, 1, "set_rows with a parameter", rows, idx, kv);

	REFUSED(QG_OP_FLASH_ATTN_EXT, 3, fp, 4, "flash_attn_ext with f32 k", q, kf, kv);
	REFUSED(QG_OP_FLASH_ATTN_EXT, 3, fp, 4, "flash_attn_ext with f32 q as k", kv, kv, kv);
	REFUSED(QG_OP_FLASH_ATTN_EXT, 4, fp, 4, "flash_attn_ext with a mask shorter than n_kv", q, kv, kv, mshort);
	REFUSED(QG_OP_FLASH_ATTN_EXT, 3, fp, 4, "flash_attn_ext with k of another head size", q, kv16, kv);
	int32_t fp2[4];
	memcpy(fp2, fp, sizeof fp2);
	set_f(fp2, 1, 8.0f);
	REFUSED(QG_OP_FLASH_ATTN_EXT, 3, fp2, 4, "flash_attn_ext with max_bias", q, kv, kv);
	memcpy(fp2, fp, sizeof fp2);
	set_f(fp2, 2, 30.0f);
	REFUSED(QG_OP_FLASH_ATTN_EXT, 3, fp2, 4, "flash_attn_ext with logit_softcap", q, kv, kv);
	memcpy(fp2, fp, sizeof fp2);
	fp2[3] = 3;
	REFUSED(QG_OP_FLASH_ATTN_EXT, 3, fp2, 4, "flash_attn_ext with precision 3", q, kv, kv);

	int32_t sp[2] = { 0, 0 };
	set_f(sp, 0, 2.0f);
	set_f(sp, 1, 0.5f);
	REFUSED(QG_OP_SCALE, 1, sp, 2, "scale with a bias (ggml's second word)", a);
	REFUSED(QG_OP_ADD, 1, NULL, 0, "add of one source", a);
	int32_t np[2] = { 0, 0 };
	set_f(np, 0, -1.0f);
	REFUSED(QG_OP_NORM, 1, np, 1, "norm with eps < 0", a);
	set_f(np, 0, 1e-5f);
	np[1] = 1;
	REFUSED(QG_OP_NORM, 1, np, 2, "norm with a second word", a);
	REFUSED(QG_OP_NORM, 1, np, 1, "norm of f16", kv);
	REFUSED(QG_OP_VIEW, 1, NULL, 0, "a view through the general form", a);
	REFUSED(QG_OP_ROPE, 7, rp, 16, "seven sources", a, pos, a, a, a, a, a);
	REFUSED(QG_OP_ROPE, 2, rp, 17, "seventeen words", a, pos);
	tap_ok(bad == 0, "bad modes, shapes, types and parameters are refused (%d not)", bad);
	struct qg_tensor *sc = qg_op_ex(ctx, QG_OP_SCALE, (struct qg_tensor *[]){ a }, 1, sp, 1);
	tap_ok(sc && qg_op_param_f32(sc, 0) == 2.0f, "the first ops through the general form: scale by word 0");
	qg_ctx_free(ctx);
}

int main(void)
{
	static const int threads[] = { 1, 2, 3 };

	for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
		int nth = threads[t];
		for (size_t i = 0; i < sizeof rope_cases / sizeof rope_cases[0]; i++)
			test_rope(&rope_cases[i], nth);
		for (int gate = QG_GLU_REGLU; gate <= QG_GLU_SWIGLU; gate++) {
			test_glu(gate, false, false, nth);
			test_glu(gate, false, true, nth);
			test_glu(gate, true, false, nth);
		}
		test_set_rows(QG_TYPE_F32, QG_TYPE_F16, QG_TYPE_I64, nth);
		test_set_rows(QG_TYPE_F32, QG_TYPE_F32, QG_TYPE_I32, nth);
		test_set_rows(QG_TYPE_F16, QG_TYPE_F16, QG_TYPE_I32, nth);
		test_flash_attn(nth, true, 2, 0);
		test_flash_attn(nth, false, 4, 10);
		test_flash_attn(nth, true, 1, 10);
		test_norm(nth);
	}
	test_refusals();
	gr_free_all(&mem);
	return tap_done();
}
