/*
 * ops-cpu.c - the computations of the ops, one function per op (MUL_MAT's
 * in ops-mulmat.c), each taking the rows of its result that thread ITH of
 * NTH owns.  Every function is handed a node that qg_op_check_data()
 * accepted.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "fp16.h"
#include "kernels.h"
#include "ops.h"
#include "ops-cpu-impl.h"
#include "rowops.h"


/* The address of row (I1, I2, I3) of T. */
static inline char *row_at(const struct qg_tensor *t, int64_t i1, int64_t i2, int64_t i3)
{
	return (char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/*
 * The rows of T that thread ITH of NTH owns, walked in order: R counts
 * them up to END, and (I1, I2, I3) are row R's indices.  The divisions
 * that find the first row's indices are done once, not once a row.
 */
struct rows {
	int64_t r, end, i1, i2, i3;
};

static inline struct rows rows_of(const struct qg_tensor *t, int ith, int nth)
{
	struct rows it;

	qg_op_split(qg_tensor_nrows(t), ith, nth, &it.r, &it.end);
	it.i1 = it.i2 = it.i3 = 0;
	if (it.r < it.end) {	/* an empty share may belong to an empty tensor */
		it.i1 = it.r % t->ne[1];
		it.i2 = it.r / t->ne[1] % t->ne[2];
		it.i3 = it.r / (t->ne[1] * t->ne[2]);
	}
	return it;
}

static inline void rows_step(struct rows *it, const struct qg_tensor *t)
{
	it->r++;
	if (++it->i1 < t->ne[1])
		return;
	it->i1 = 0;
	if (++it->i2 < t->ne[2])
		return;
	it->i2 = 0;
	it->i3++;
}

/* Index I of a dimension broadcast from N to a multiple of N. */
static inline int64_t bcast(int64_t i, int64_t n)
{
	return n == 1 ? 0 : i < n ? i : i % n;
}

#define F32_AT(row, t, i0) (*(float *)((row) + (i0) * (t)->nb[0]))

/* --- elementwise and row ops -------------------------------------------- */

/*
 * Y = X + Z (or X * Z) over N packed floats, eight at a time through a
 * block on the stack: a fixed count with nothing aliased, which compilers
 * turn into vector code at -O2, and an output that is one of the inputs
 * (in place) comes out right, each block read whole before it is written.
 */
static void binary_row(float *y, const float *x, const float *z, int64_t n, bool add)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		float b[8];
		if (add)
			for (int k = 0; k < 8; k++)
				b[k] = x[i + k] + z[i + k];
		else
			for (int k = 0; k < 8; k++)
				b[k] = x[i + k] * z[i + k];
		memcpy(y + i, b, sizeof b);
	}
	for (; i < n; i++)
		y[i] = add ? x[i] + z[i] : x[i] * z[i];
}

static int compute_binary(const struct qg_tensor *t, int ith, int nth)
{
	const struct qg_tensor *a = t->src[0], *b = t->src[1];
	const bool add = t->op == QG_OP_ADD;
	const int64_t ne0 = t->ne[0];
	/* rows of packed floats, B's as long as T's: binary_row's vector code */
	const bool packed = t->nb[0] == sizeof(float) && a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float) &&
			    b->ne[0] == ne0;

	for (struct rows it = rows_of(t, ith, nth); it.r < it.end; rows_step(&it, t)) {
		char *y = row_at(t, it.i1, it.i2, it.i3);
		const char *x = row_at(a, it.i1, it.i2, it.i3);
		const char *z = row_at(b, bcast(it.i1, b->ne[1]), bcast(it.i2, b->ne[2]), bcast(it.i3, b->ne[3]));
		if (packed) {
			binary_row((float *)y, (const float *)x, (const float *)z, ne0, add);
			continue;
		}
		for (int64_t i0 = 0, j = 0; i0 < ne0; i0++) {
			float u = F32_AT(x, a, i0), v = F32_AT(z, b, j);
			F32_AT(y, t, i0) = add ? u + v : u * v;
			if (++j == b->ne[0])
				j = 0;
		}
	}
	return 0;
}

static inline float gelu(float x)
{
	const float c = 0.79788456080286535588f;	/* sqrt(2/pi) */

	return 0.5f * x * (1.0f + tanhf(c * x * (1.0f + 0.044715f * x * x)));
}

static int compute_unary(const struct qg_tensor *t, int ith, int nth)
{
	const struct qg_tensor *a = t->src[0];
	const float p = qg_op_param_f32(t, 0);
	/* packed rows: the row kernels of this CPU */
	const struct qg_rowops *ro = t->nb[0] == sizeof(float) && a->nb[0] == sizeof(float) ? qg_rowops_for() : NULL;
	const int64_t ne0 = t->ne[0];

	for (struct rows it = rows_of(t, ith, nth); it.r < it.end; rows_step(&it, t)) {
		char *y = row_at(t, it.i1, it.i2, it.i3);
		const char *x = row_at(a, it.i1, it.i2, it.i3);
		if (ro && t->op == QG_OP_RMS_NORM) {
			/* the row is read whole before it is written: in place is right */
			const float sum = ro->sumsq((const float *)x, ne0);
			ro->scale((float *)y, (const float *)x, 1.0f / sqrtf(sum / (float)ne0 + p), ne0);
			continue;
		}
		if (ro && t->op == QG_OP_SCALE) {
			ro->scale((float *)y, (const float *)x, p, ne0);
			continue;
		}
		if (ro && t->op == QG_OP_SILU) {
			ro->silu((float *)y, (const float *)x, ne0);
			continue;
		}
		switch (t->op) {
		case QG_OP_SCALE:
			for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
				F32_AT(y, t, i0) = F32_AT(x, a, i0) * p;
			break;
		case QG_OP_SILU:
			for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
				float v = F32_AT(x, a, i0);
				F32_AT(y, t, i0) = v / (1.0f + expf(-v));
			}
			break;
		case QG_OP_GELU:
			for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
				F32_AT(y, t, i0) = gelu(F32_AT(x, a, i0));
			break;
		default: {	/* RMS_NORM: the row is read whole before it is written */
			double sum = 0.0;
			for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
				float v = F32_AT(x, a, i0);
				sum += (double)v * v;
			}
			const float scale = 1.0f / sqrtf((float)(sum / (double)t->ne[0]) + p);
			for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
				F32_AT(y, t, i0) = F32_AT(x, a, i0) * scale;
			break;
		}
		}
	}
	return 0;
}

static int compute_soft_max(const struct qg_tensor *t, int ith, int nth)
{
	const struct qg_tensor *a = t->src[0], *m = t->src[1];
	const float scale = qg_op_param_f32(t, 0);

	for (struct rows it = rows_of(t, ith, nth); it.r < it.end; rows_step(&it, t)) {
		char *y = row_at(t, it.i1, it.i2, it.i3);
		const char *x = row_at(a, it.i1, it.i2, it.i3);
		const char *mk =
			m ? row_at(m, bcast(it.i1, m->ne[1]), bcast(it.i2, m->ne[2]), bcast(it.i3, m->ne[3])) : NULL;
		float max = -INFINITY;
		for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
			float v = F32_AT(x, a, i0) * scale + (mk ? F32_AT(mk, m, i0) : 0.0f);
			if (v > max)
				max = v;
		}
		if (max == -INFINITY) {
			for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
				F32_AT(y, t, i0) = 0.0f;
			continue;
		}
		double sum = 0.0;
		for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
			float v = F32_AT(x, a, i0) * scale + (mk ? F32_AT(mk, m, i0) : 0.0f);
			float e = expf(v - max);
			F32_AT(y, t, i0) = e;
			sum += e;
		}
		const float inv = (float)(1.0 / sum);
		for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
			F32_AT(y, t, i0) *= inv;
	}
	return 0;
}

/* --- conversions -------------------------------------------------------- */

/* The NE values of a row of TYPE at SRC (element stride NB0) into F32 TMP. */
static void load_row(enum qg_type type, const char *src, size_t nb0, int64_t ne, float *tmp)
{
	switch (type) {
	case QG_TYPE_F32:
		for (int64_t i = 0; i < ne; i++)
			tmp[i] = *(const float *)(src + i * nb0);
		break;
	case QG_TYPE_F16:
		for (int64_t i = 0; i < ne; i++) {
			qg_fp16 h;
			memcpy(&h, src + i * nb0, sizeof h);
			tmp[i] = qg_fp16_to_fp32(h);
		}
		break;
	default:	/* a block type: its row is packed */
		qg_dequantize(type, src, tmp, (size_t)ne * sizeof(float), 1, ne);
		break;
	}
}

/* The NE values in TMP into a row of TYPE at DST (element stride NB0). */
static void store_row(enum qg_type type, char *dst, size_t nb0, int64_t ne, const float *tmp)
{
	switch (type) {
	case QG_TYPE_F32:
		for (int64_t i = 0; i < ne; i++)
			*(float *)(dst + i * nb0) = tmp[i];
		break;
	case QG_TYPE_F16:
		for (int64_t i = 0; i < ne; i++) {
			qg_fp16 h = qg_fp32_to_fp16(tmp[i]);
			memcpy(dst + i * nb0, &h, sizeof h);
		}
		break;
	default:	/* Q8_0 */
		qg_quantize_row_q8_0(tmp, (struct qg_block_q8_0 *)dst, ne);
		break;
	}
}

/* This thread's row of NE floats in the shared scratch. */
static float *thread_tmp(void *scratch, int64_t ne, int ith)
{
	return (float *)((char *)scratch + (size_t)ith * align_up((size_t)ne * sizeof(float)));
}

/* A weights matrix into ggml's layout (qg_op_cpy_is_unpack): each thread takes whole row groups. */
static int compute_unpack(const struct qg_tensor *t, int ith, int nth)
{
	const struct qg_tensor *a = t->src[0];
	const int64_t group = qg_type_row_group(a->type), groups = a->ne[1] / group;
	const int64_t g0 = groups * ith / nth, g1 = groups * (ith + 1) / nth;

	if (g0 == g1)
		return 0;
	ssize_t r = qg_repack(t->type, (char *)t->data + g0 * group * t->nb[1],
			      (size_t)((g1 - g0) * group * t->nb[1]), a->type,
			      (const char *)a->data + g0 * group * a->nb[1], (g1 - g0) * group, a->ne[0]);
	return r < 0 ? (int)r : 0;
}

static int compute_cpy(const struct qg_tensor *t, int ith, int nth, void *scratch)
{
	const struct qg_tensor *a = t->src[0];
	const int64_t ne0 = t->ne[0];
	float *tmp = thread_tmp(scratch, ne0, ith);

	if (qg_op_cpy_is_unpack(t))
		return compute_unpack(t, ith, nth);

	for (struct rows it = rows_of(t, ith, nth); it.r < it.end; rows_step(&it, t)) {
		char *y = row_at(t, it.i1, it.i2, it.i3);
		const char *x = row_at(a, it.i1, it.i2, it.i3);
		if (a->type == t->type && a->nb[0] == t->nb[0] &&
		    (a->type == QG_TYPE_Q8_0 || a->nb[0] == qg_type_elem_size(a->type))) {
			memmove(y, x, (size_t)qg_type_row_bytes(t->type, ne0));
			continue;
		}
		load_row(a->type, x, a->nb[0], ne0, tmp);
		store_row(t->type, y, t->nb[0], ne0, tmp);
	}
	return 0;
}

static int compute_get_rows(const struct qg_tensor *t, int ith, int nth, void *scratch)
{
	const struct qg_tensor *a = t->src[0], *idx = t->src[1];
	const int64_t ne0 = t->ne[0];
	float *tmp = thread_tmp(scratch, ne0, ith);
	int err = 0;

	for (struct rows it = rows_of(t, ith, nth); it.r < it.end; rows_step(&it, t)) {
		const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
		int32_t k;
		memcpy(&k, (const char *)idx->data + i1 * idx->nb[0] + i2 * idx->nb[1] + i3 * idx->nb[2], sizeof k);
		if (k < 0 || k >= a->ne[1]) {
			memset(tmp, 0, (size_t)ne0 * sizeof *tmp);
			err = -ERANGE;
		} else if (qg_type_is_interleaved(a->type)) {
			/* its group's share (ops.c checked the slice is a packed matrix) */
			qg_dequantize_row(a->type, row_at(a, 0, i2, i3), a->ne[1], ne0, k, tmp,
					  (size_t)ne0 * sizeof *tmp);
		} else {
			load_row(a->type, row_at(a, k, i2, i3), a->nb[0], ne0, tmp);
		}
		store_row(QG_TYPE_F32, row_at(t, i1, i2, i3), t->nb[0], ne0, tmp);
	}
	return err;
}

/* --- ROPE ---------------------------------------------------------------- */

/* The dimension (of N_DIMS) at which the YaRN ramp turns for rotations of N_ROT per N_CTX_ORIG positions. */
static float yarn_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
	return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

/* What one ROPE node reads of its parameters, worked out once a thread. */
struct rope {
	int n_dims, n_offs;
	bool neox;
	float freq_scale, ext_factor, attn_factor, theta_scale, lo, hi;
	const struct qg_tensor *ff;
};

static struct rope rope_of(const struct qg_tensor *t)
{
	struct rope r = {
		.n_dims = t->op_params[1], .n_offs = t->op_params[15], .neox = t->op_params[2] == 2,
		.freq_scale = qg_op_param_f32(t, 6), .ext_factor = qg_op_param_f32(t, 7),
		.attn_factor = qg_op_param_f32(t, 8), .ff = t->src[2],
	};
	const int n_ctx_orig = t->op_params[4];
	const float base = qg_op_param_f32(t, 5);

	r.theta_scale = powf(base, -2.0f / (float)r.n_dims);
	/* the band of dimensions where YaRN blends interpolation into extrapolation */
	r.lo = floorf(yarn_dim(r.n_dims, n_ctx_orig, qg_op_param_f32(t, 9), base));
	r.hi = ceilf(yarn_dim(r.n_dims, n_ctx_orig, qg_op_param_f32(t, 10), base));
	r.lo = r.lo > 0.0f ? r.lo : 0.0f;
	r.hi = r.hi < (float)(r.n_dims - 1) ? r.hi : (float)(r.n_dims - 1);
	return r;
}

/* cos and sin (times the magnitude scale) of each pair's angle at position POS: the cosines in CS[0..n_dims/2), the sines after them. */
static void rope_angles(const struct rope *r, float pos, float *cs)
{
	const int half = r->n_dims / 2;

	float theta = pos;

	for (int i0 = 0; i0 < r->n_dims; i0 += 2) {
		float ff = 1.0f;
		if (r->ff)
			ff = *(const float *)((const char *)r->ff->data + (size_t)(i0 / 2) * r->ff->nb[0]);
		const float extrap = theta / ff, interp = r->freq_scale * extrap;
		float angle = interp, mscale = r->attn_factor;
		if (r->ext_factor != 0.0f) {
			float span = r->hi - r->lo > 0.001f ? r->hi - r->lo : 0.001f;
			float y = ((float)(i0 / 2) - r->lo) / span;
			float mix = (1.0f - (y < 0.0f ? 0.0f : y > 1.0f ? 1.0f : y)) * r->ext_factor;
			angle = interp * (1.0f - mix) + extrap * mix;
			mscale *= 1.0f + 0.1f * logf(1.0f / r->freq_scale);
		}
		cs[i0 / 2] = cosf(angle) * mscale;
		cs[half + i0 / 2] = sinf(angle) * mscale;
		theta *= r->theta_scale;
	}
}

static int compute_rope(const struct qg_tensor *t, int ith, int nth, void *scratch)
{
	const struct qg_tensor *a = t->src[0], *pos = t->src[1];
	const struct rope r = rope_of(t);
	const int64_t ne0 = t->ne[0], half = r.n_dims / 2;
	const struct qg_rowops *ro = qg_rowops_for();
	float *cs = thread_tmp(scratch, ne0, ith);
	int64_t cached = -1;	/* the token whose angles CS holds */

	for (struct rows it = rows_of(t, ith, nth); it.r < it.end; rows_step(&it, t)) {
		const float *x = (const float *)row_at(a, it.i1, it.i2, it.i3);
		float *y = (float *)row_at(t, it.i1, it.i2, it.i3);
		if (cached != it.i2 + it.i3 * t->ne[2]) {
			int32_t p;
			memcpy(&p, (const char *)pos->data + it.i2 * pos->nb[0], sizeof p);
			rope_angles(&r, (float)p, cs);
			cached = it.i2 + it.i3 * t->ne[2];
		}
		for (int64_t i0 = 0; i0 < ne0; i0++)	/* what is not turned is copied */
			if (i0 < r.n_offs || i0 >= r.n_offs + r.n_dims)
				y[i0] = x[i0];
		/* normal: pairs of neighbours; NeoX: a value and the one half the rotated span on */
		ro->rope(y + r.n_offs, x + r.n_offs, cs, half, r.neox);
	}
	return 0;
}

/* --- NORM ---------------------------------------------------------------- */

static int compute_norm(const struct qg_tensor *t, int ith, int nth)
{
	const struct qg_tensor *a = t->src[0];
	const float eps = qg_op_param_f32(t, 0);
	const int64_t n = t->ne[0];

	for (struct rows it = rows_of(t, ith, nth); it.r < it.end; rows_step(&it, t)) {
		char *y = row_at(t, it.i1, it.i2, it.i3);
		const char *x = row_at(a, it.i1, it.i2, it.i3);
		double sum = 0.0, var = 0.0;
		for (int64_t i0 = 0; i0 < n; i0++)
			sum += F32_AT(x, a, i0);
		const float mean = (float)(sum / (double)n);
		/* the row is read whole (twice) before it is written: in place is right */
		for (int64_t i0 = 0; i0 < n; i0++) {
			const float v = F32_AT(x, a, i0) - mean;
			var += (double)v * v;
		}
		const float scale = 1.0f / sqrtf((float)(var / (double)n) + eps);
		for (int64_t i0 = 0; i0 < n; i0++)
			F32_AT(y, t, i0) = (F32_AT(x, a, i0) - mean) * scale;
	}
	return 0;
}

/* --- GLU ----------------------------------------------------------------- */

static int compute_glu(const struct qg_tensor *t, int ith, int nth)
{
	const struct qg_tensor *a = t->src[0], *b = t->src[1];
	const int gate = t->op_params[0];
	const bool swapped = !b && t->op_params[1];
	const int64_t nc = t->ne[0];
	const struct qg_rowops *ro = qg_rowops_for();

	for (struct rows it = rows_of(t, ith, nth); it.r < it.end; rows_step(&it, t)) {
		const float *x = (const float *)row_at(a, it.i1, it.i2, it.i3);
		const float *g = b ? (const float *)row_at(b, it.i1, it.i2, it.i3) : x + (swapped ? 0 : nc);
		float *y = (float *)row_at(t, it.i1, it.i2, it.i3);
		if (swapped)
			x += nc;
		if (gate == QG_GLU_SWIGLU) {
			ro->swiglu(y, x, g, nc);
			continue;
		}
		for (int64_t i = 0; i < nc; i++) {
			const float v = x[i];
			const float h = gate == QG_GLU_SWIGLU ? v / (1.0f + expf(-v))
					: gate == QG_GLU_GEGLU ? gelu(v)
							       : (v > 0.0f ? v : 0.0f);
			y[i] = h * g[i];
		}
	}
	return 0;
}

/* --- SET_ROWS ------------------------------------------------------------ */

static int compute_set_rows(const struct qg_tensor *t, int ith, int nth, void *scratch)
{
	const struct qg_tensor *a = t->src[0], *idx = t->src[1];
	const int64_t ne0 = t->ne[0];
	float *tmp = thread_tmp(scratch, ne0, ith);
	int64_t j0, j1;
	int err = 0;

	qg_op_split(a->ne[1], ith, nth, &j0, &j1);
	for (int64_t i3 = 0; i3 < a->ne[3]; i3++) {
		for (int64_t i2 = 0; i2 < a->ne[2]; i2++) {
			const char *ix = (const char *)idx->data + bcast(i2, idx->ne[1]) * idx->nb[1] +
					 bcast(i3, idx->ne[2]) * idx->nb[2];
			for (int64_t j = j0; j < j1; j++) {
				int64_t k;
				if (idx->type == QG_TYPE_I64) {
					memcpy(&k, ix + j * idx->nb[0], sizeof k);
				} else {
					int32_t k32;
					memcpy(&k32, ix + j * idx->nb[0], sizeof k32);
					k = k32;
				}
				if (k < 0 || k >= t->ne[1]) {
					err = -ERANGE;
					continue;
				}
				load_row(a->type, row_at(a, j, i2, i3), a->nb[0], ne0, tmp);
				store_row(t->type, row_at(t, k, i2, i3), t->nb[0], ne0, tmp);
			}
		}
	}
	return err;
}

/* --- FLASH_ATTN_EXT ------------------------------------------------------ */

/*
 * FLASH_ATTN_EXT in units of queries that read the same keys and values:
 * up to FA_QUERIES of them, the heads of a group sharing a K/V head
 * (grouped-query attention) times a run of tokens.  A unit meets the
 * keys FA_KEYS at a time: rowops scores makes every query's scaled and
 * masked scores of the block straight from the cache's halves (each key
 * turned once for four queries), softmax_block softmaxes each query's
 * (one vector exp over the block, one rescale of its accumulator per
 * block), and rowops mix adds the block's values with the weights, four
 * queries a pass again.  Only the keys between the first and the last
 * that some query of the unit has not masked are met: a decode step
 * near the start of its context, or the causal mask's tail, skips the
 * rest of the block.  Q is rounded to F16 first, as ggml's CPU backend
 * does, so each product of a score is an exact product of two halves.
 */
#define FA_KEYS 64
#define FA_QUERIES 32

/* A unit's queries: G heads (GRP of them in Q's third dimension) of TB tokens. */
struct fa_units {
	int64_t g, tb, ngrp, ntb;
};

static struct fa_units fa_units(const struct qg_tensor *t)
{
	const struct qg_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2];
	struct fa_units u;

	/* the heads of a group share their K head and their V head */
	u.g = k->ne[2] == v->ne[2] && q->ne[2] / k->ne[2] <= FA_QUERIES ? q->ne[2] / k->ne[2] : 1;
	u.tb = FA_QUERIES / u.g;
	u.ngrp = q->ne[2] / u.g;
	u.ntb = (q->ne[1] + u.tb - 1) / u.tb;
	return u;
}

/* Floats of one thread's FLASH_ATTN_EXT scratch, each part aligned. */
static size_t fa_slot(const struct qg_tensor *t)
{
	const size_t dk = (size_t)t->src[0]->ne[0], dv = (size_t)t->ne[0];

	return align_up(FA_QUERIES * dk * sizeof(float)) +	/* the queries */
	       align_up(FA_QUERIES * dv * sizeof(float)) +	/* the accumulators */
	       2 * align_up(FA_QUERIES * FA_KEYS * sizeof(float)) +	/* scores, mask */
	       2 * align_up(FA_QUERIES * sizeof(float));	/* maxima, sums */
}

static int compute_flash_attn(const struct qg_tensor *t, int ith, int nth, void *scratch)
{
	const struct qg_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
	const int64_t dk = q->ne[0], dv = v->ne[0], n_kv = k->ne[1];
	const int64_t rk2 = q->ne[2] / k->ne[2], rv2 = q->ne[2] / v->ne[2];
	const float scale = qg_op_param_f32(t, 0);
	const struct qg_rowops *ro = qg_rowops_for();
	const struct fa_units u = fa_units(t);
	const int mshared = m && m->ne[2] == 1;
	char *p = (char *)scratch + (size_t)ith * fa_slot(t);
	float *qf = (float *)p;
	float *acc = (float *)(p += align_up(FA_QUERIES * (size_t)dk * sizeof(float)));
	float *sc = (float *)(p += align_up(FA_QUERIES * (size_t)dv * sizeof(float)));
	float *mv = (float *)(p += align_up(FA_QUERIES * FA_KEYS * sizeof(float)));
	float *mx = (float *)(p += align_up(FA_QUERIES * FA_KEYS * sizeof(float)));
	float *sum = (float *)(p += align_up(FA_QUERIES * sizeof(float)));
	int64_t u0, u1;

	qg_op_split(u.ngrp * u.ntb * q->ne[3], ith, nth, &u0, &u1);
	for (int64_t un = u0; un < u1; un++) {
		const int64_t i3 = un / (u.ngrp * u.ntb), grp = un / u.ntb % u.ngrp, t0 = un % u.ntb * u.tb;
		const int64_t nt = q->ne[1] - t0 < u.tb ? q->ne[1] - t0 : u.tb, nq = nt * u.g;
		/* query qi: token t0 + qi / g, head grp * g + qi % g; all read K head kh and V head vh */
		const int64_t kh = grp * u.g / rk2, vh = grp * u.g / rv2;

		for (int64_t qi = 0; qi < nq; qi++) {
			ro->round_f16(qf + qi * dk, (const float *)row_at(q, t0 + qi / u.g, grp * u.g + qi % u.g, i3), dk);
			memset(acc + qi * dv, 0, (size_t)dv * sizeof *acc);
			mx[qi] = -INFINITY;
			sum[qi] = 0.0f;
		}
		for (int64_t c0 = 0; c0 < n_kv; c0 += FA_KEYS) {
			const int64_t nk = n_kv - c0 < FA_KEYS ? n_kv - c0 : FA_KEYS;
			/* the mask's rows as floats: one per token when every head reads the same */
			/* keys [lo, hi) of the block are the ones some query of the unit has not masked */
			int64_t lo = m ? nk : 0, hi = m ? 0 : nk;
			for (int64_t mi = 0; m && mi < (mshared ? nt : nq); mi++) {
				const int64_t tok = t0 + (mshared ? mi : mi / u.g), h = grp * u.g + (mshared ? 0 : mi % u.g);
				const char *mr = row_at(m, tok, bcast(h, m->ne[2]), bcast(i3, m->ne[3])) + c0 * m->nb[0];
				float *mq = mv + mi * FA_KEYS;
				if (m->nb[0] == sizeof(qg_fp16)) {
					ro->from_f16(mq, (const uint16_t *)mr, nk);
				} else {
					for (int64_t j = 0; j < nk; j++) {
						qg_fp16 hv;
						memcpy(&hv, mr + j * m->nb[0], sizeof hv);
						mq[j] = qg_fp16_to_fp32(hv);
					}
				}
				/* widen [lo, hi) by this row's unmasked keys: only the keys outside it are looked at */
				for (int64_t j = 0; j < lo; j++)
					if (mq[j] != -INFINITY)
						lo = j;
				for (int64_t j = nk; j > hi; j--)
					if (mq[j - 1] != -INFINITY)
						hi = j;
			}
			if (lo >= hi)
				continue;
			const int64_t nl = hi - lo;
			ro->scores(sc, FA_KEYS, qf, nq, (const uint16_t *)row_at(k, c0 + lo, kh, i3), k->nb[1], nl, dk,
				   scale, m ? mv + lo : NULL, FA_KEYS, mshared ? u.g : 1);
			for (int64_t qi = 0; qi < nq; qi++) {
				float rescale;
				const float bsum = ro->softmax_block(sc + qi * FA_KEYS, nl, &mx[qi], &rescale);
				if (rescale != 1.0f)
					ro->scale(acc + qi * dv, acc + qi * dv, rescale, dv);
				sum[qi] = sum[qi] * rescale + bsum;
			}
			ro->mix(acc, sc, FA_KEYS, nq, (const uint16_t *)row_at(v, c0 + lo, vh, i3), v->nb[1], nl, dv);
		}
		for (int64_t qi = 0; qi < nq; qi++) {
			float *y = (float *)row_at(t, grp * u.g + qi % u.g, t0 + qi / u.g, i3);
			ro->scale(y, acc + qi * dv, sum[qi] == 0.0f ? 0.0f : 1.0f / sum[qi], dv);
		}
	}
	return 0;
}

/* --- dispatch ----------------------------------------------------------- */

int qg_op_check_data(const struct qg_tensor *t)
{
	if (!t || !t->data)
		return -EINVAL;
	for (int i = 0; i < QG_MAX_SRC; i++)
		if (t->src[i] && !t->src[i]->data)
			return -EINVAL;
	return t->op == QG_OP_MUL_MAT ? qg_op_mul_mat_check_data(t) : 0;
}

size_t qg_op_scratch_size(const struct qg_tensor *t, int nth)
{
	if (nth < 1)
		nth = 1;
	switch (t->op) {
	case QG_OP_MUL_MAT:
		return qg_op_mul_mat_slot(t) * (size_t)(t->ne[2] * t->ne[3]);
	case QG_OP_CPY:
	case QG_OP_GET_ROWS:
	case QG_OP_ROPE:
	case QG_OP_SET_ROWS:
		return (size_t)nth * align_up((size_t)t->ne[0] * sizeof(float));
	case QG_OP_FLASH_ATTN_EXT:
		return (size_t)nth * fa_slot(t);
	default:
		return 0;
	}
}

int qg_op_compute(const struct qg_tensor *t, int phase, int ith, int nth, void *scratch)
{
	if (nth < 1 || ith < 0 || ith >= nth || phase < 0 || phase >= qg_op_n_phases(t))
		return qg_op_is_view(t->op) || t->op == QG_OP_NONE ? 0 : -EINVAL;
	switch (t->op) {
	case QG_OP_MUL_MAT:
		return qg_op_mul_mat_compute(t, phase, ith, nth, scratch);
	case QG_OP_ADD:
	case QG_OP_MUL:
		return compute_binary(t, ith, nth);
	case QG_OP_SCALE:
	case QG_OP_SILU:
	case QG_OP_GELU:
	case QG_OP_RMS_NORM:
		return compute_unary(t, ith, nth);
	case QG_OP_SOFT_MAX:
		return compute_soft_max(t, ith, nth);
	case QG_OP_CPY:
		return compute_cpy(t, ith, nth, scratch);
	case QG_OP_GET_ROWS:
		return compute_get_rows(t, ith, nth, scratch);
	case QG_OP_ROPE:
		return compute_rope(t, ith, nth, scratch);
	case QG_OP_GLU:
		return compute_glu(t, ith, nth);
	case QG_OP_NORM:
		return compute_norm(t, ith, nth);
	case QG_OP_SET_ROWS:
		return compute_set_rows(t, ith, nth, scratch);
	case QG_OP_FLASH_ATTN_EXT:
		return compute_flash_attn(t, ith, nth, scratch);
	default:
		return -EINVAL;
	}
}
