/*
 * kquant.c - the K-quant super-blocks: quantization, dequantization and the
 * reference dot products.
 *
 * The quantizers follow ggml's reference ones operation for operation: its
 * searches (a weighted least-squares fit of scale and min over a sweep of
 * trial scales for Q4_K, a sweep of trial scales scored by weighted
 * correlation for Q6_K), its accumulation order and its rounding (half to
 * even, through the float adder, with the same wrap for values far out of
 * range).  Reordering any of it would change bytes, so the code keeps the
 * reference's shape even where a clearer one offers itself.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "fp16.h"
#include "kquant.h"

_Static_assert(sizeof(struct qg_block_q4_K) == 144, "block_q4_K is 144 bytes");
_Static_assert(sizeof(struct qg_block_q6_K) == 210, "block_q6_K is 210 bytes");
_Static_assert(sizeof(struct qg_block_q8_K) == 292, "block_q8_K is 292 bytes");

/* Below this largest magnitude a group counts as all zero (ggml's threshold). */
#define KQ_ZERO_EPS 1e-15f

/*
 * V rounded to the nearest integer, ties to even, for |V| < 2^22: adding
 * 1.5 * 2^23 leaves the integer in the low mantissa bits, offset by 2^22.
 * Out of that range (or for NaN) the result wraps as ggml's does, and the
 * callers' clamps then give ggml's codes.
 */
static inline int kq_nearest(float v)
{
	uint32_t u = qg_fp32_to_bits(v + 12582912.0f);

	return (int)(u & 0x007fffffu) - 0x00400000;
}

static inline int kq_clamp(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* --- Q4_K ---------------------------------------------------------------- */

/*
 * Codes L (0..15) for the 32 values X with weights W, a scale and a min
 * (value ~ scale * L - *NEG_MIN), chosen to minimise the weighted squared
 * error: start from the full range split in 15 steps, then for NSTEP + 1
 * trial steps (15 + RMIN + RDELTA * i) take the least-squares scale and
 * min of the codes each gives, and keep the best.  Returns the scale.
 * ggml's reference searches 21 steps from 14 by 0.1; with an importance
 * matrix, 37 steps from 14.1 by 0.05.
 */
static float q4k_fit(const float *x, const float *w, uint8_t *L, float *neg_min, float rmin, float rdelta,
		     int nstep)
{
	enum { N = 32, NMAX = 15 };
	uint8_t trial[N];
	float lo = x[0], hi = x[0];
	float sum_w = w[0], sum_x = sum_w * x[0];

	for (int i = 1; i < N; i++) {
		if (x[i] < lo)
			lo = x[i];
		if (x[i] > hi)
			hi = x[i];
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	if (lo > 0)
		lo = 0;
	if (!(hi > lo)) {
		memset(L, 0, N);
		*neg_min = -lo;
		return 0.0f;
	}

	float iscale = NMAX / (hi - lo);
	float scale = 1 / iscale;
	float best = 0;
	for (int i = 0; i < N; i++) {
		L[i] = (uint8_t)kq_clamp(kq_nearest(iscale * (x[i] - lo)), 0, NMAX);
		float diff = scale * L[i] + lo - x[i];
		best += w[i] * (diff * diff);
	}

	for (int is = 0; is <= nstep; is++) {
		iscale = (rmin + rdelta * is + NMAX) / (hi - lo);
		float sum_l = 0, sum_l2 = 0, sum_xl = 0;
		for (int i = 0; i < N; i++) {
			int l = kq_clamp(kq_nearest(iscale * (x[i] - lo)), 0, NMAX);
			trial[i] = (uint8_t)l;
			sum_l += w[i] * l;
			sum_l2 += w[i] * l * l;
			sum_xl += w[i] * l * x[i];
		}
		float det = sum_w * sum_l2 - sum_l * sum_l;
		if (!(det > 0))
			continue;
		float s = (sum_w * sum_xl - sum_x * sum_l) / det;
		float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
		if (m > 0) {
			/* a positive offset would not be a min: fit the scale alone */
			m = 0;
			s = sum_xl / sum_l2;
		}
		float err = 0;
		for (int i = 0; i < N; i++) {
			float diff = s * trial[i] + m - x[i];
			err += w[i] * (diff * diff);
		}
		if (err < best) {
			memcpy(L, trial, N);
			best = err;
			scale = s;
			lo = m;
		}
	}
	*neg_min = -lo;
	return scale;
}

/* Store sub-block J's 6-bit scale SC and min M (the layout qg_q4_K_scale_min reads). */
static void q4k_put_scale_min(uint8_t *s, int j, uint8_t sc, uint8_t m)
{
	if (j < 4) {
		s[j] = sc;
		s[j + 4] = m;
	} else {
		s[j + 4] = (uint8_t)((sc & 0x0f) | (m & 0x0f) << 4);
		s[j - 4] |= (uint8_t)((sc >> 4) << 6);
		s[j] |= (uint8_t)((m >> 4) << 6);
	}
}

/*
 * The codes of super-block X against its scales and mins as stored in Y
 * (a sub-block whose scale is 0 keeps the fit's codes in L), packed: 64
 * values per 32 bytes, low nibbles the first 32 and high the next.
 */
static void q4k_codes(const float *x, uint8_t *L, struct qg_block_q4_K *y)
{
	for (int j = 0; j < 8; j++) {
		uint8_t sc, m;
		qg_q4_K_scale_min(j, y->scales, &sc, &m);
		const float d = qg_fp16_to_fp32(y->d) * sc;
		if (!d)
			continue;
		const float dm = qg_fp16_to_fp32(y->dmin) * m;
		for (int l = 0; l < 32; l++)
			L[32 * j + l] = (uint8_t)kq_clamp(kq_nearest((x[32 * j + l] + dm) / d), 0, 15);
	}
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++)
			y->qs[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
}

/*
 * 6-bit codes L (0..63) and one scale for the eight non-negative values X
 * with weights W (ggml's make_qp_quants): the largest maps to 63, eight
 * trial scales around it are scored by weighted squared error, then codes
 * are moved one at a time while that raises the weighted correlation, for
 * at most five passes.  Returns the least-squares scale of the codes.
 */
static float kq_fit_positive(const float *x, uint8_t *L, const float *w)
{
	enum { N = 8, NMAX = 63 };
	float max = 0;

	for (int i = 0; i < N; i++)
		max = max > x[i] ? max : x[i];
	if (max < KQ_ZERO_EPS) {
		memset(L, 0, N);
		return 0.f;
	}
	float iscale = NMAX / max;
	for (int i = 0; i < N; i++)
		L[i] = (uint8_t)kq_nearest(iscale * x[i]);
	float scale = 1 / iscale;
	float best = 0;
	for (int i = 0; i < N; i++) {
		float diff = x[i] - scale * L[i];
		best += w[i] * diff * diff;
	}
	for (int is = -4; is <= 4; is++) {
		if (is == 0)
			continue;
		float iscale_is = (0.1f * is + NMAX) / max;
		float scale_is = 1 / iscale_is;
		float mse = 0;
		for (int i = 0; i < N; i++) {
			int l = kq_nearest(iscale_is * x[i]);
			l = l < NMAX ? l : NMAX;
			float diff = x[i] - scale_is * l;
			mse += w[i] * diff * diff;
		}
		if (mse < best) {
			best = mse;
			iscale = iscale_is;
		}
	}
	float sumlx = 0, suml2 = 0;
	for (int i = 0; i < N; i++) {
		int l = kq_nearest(iscale * x[i]);
		l = l < NMAX ? l : NMAX;
		L[i] = (uint8_t)l;
		sumlx += w[i] * x[i] * l;
		suml2 += w[i] * l * l;
	}
	for (int itry = 0; itry < 5; itry++) {
		int changed = 0;
		for (int i = 0; i < N; i++) {
			float slx = sumlx - w[i] * x[i] * L[i];
			float sl2 = suml2 - w[i] * L[i] * L[i];
			if (slx > 0 && sl2 > 0) {
				int nl = kq_nearest(x[i] * sl2 / slx);
				nl = nl < NMAX ? nl : NMAX;
				if (nl != L[i]) {
					slx += w[i] * x[i] * nl;
					sl2 += w[i] * nl * nl;
					if (slx * slx * suml2 > sumlx * sumlx * sl2) {
						L[i] = (uint8_t)nl;
						sumlx = slx;
						suml2 = sl2;
						changed++;
					}
				}
			}
		}
		if (!changed)
			break;
	}
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

void qg_quantize_row_q4_K(const float *x, struct qg_block_q4_K *y, int64_t k)
{
	uint8_t L[QG_QK_K];
	float w[32], scales[8], mins[8];

	for (int64_t b = 0; b < k / QG_QK_K; b++, x += QG_QK_K) {
		float max_scale = 0, max_min = 0;

		for (int j = 0; j < 8; j++) {
			const float *xs = x + 32 * j;
			float sum_x2 = 0;
			for (int l = 0; l < 32; l++)
				sum_x2 += xs[l] * xs[l];
			/* weight a value by the group's rms plus its own size */
			float av_x = sqrtf(sum_x2 / 32);
			for (int l = 0; l < 32; l++)
				w[l] = av_x + fabsf(xs[l]);
			scales[j] = q4k_fit(xs, w, L + 32 * j, &mins[j], -1.0f, 0.1f, 20);
			if (scales[j] > max_scale)
				max_scale = scales[j];
			if (mins[j] > max_min)
				max_min = mins[j];
		}

		/* the eight scales and mins in 6 bits each, against the largest */
		float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
		float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
		for (int j = 0; j < 8; j++) {
			uint8_t ls = (uint8_t)kq_nearest(inv_scale * scales[j]);
			uint8_t lm = (uint8_t)kq_nearest(inv_min * mins[j]);
			q4k_put_scale_min(y[b].scales, j, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
		}
		y[b].d = qg_fp32_to_fp16(max_scale / 63.f);
		y[b].dmin = qg_fp32_to_fp16(max_min / 63.f);
		q4k_codes(x, L, &y[b]);
	}
}

/*
 * With an importance matrix (ggml's quantize_row_q4_K_impl): each value
 * weighted by its importance times sqrt(2 * mean square of the super-block
 * + its square), a finer search per 32 values, and the eight scales and
 * eight mins each given their 6-bit codes and super-block scale by a
 * search of their own, weighted by the groups' total weights.
 */
static void quantize_row_q4_K_weighted(const float *x, struct qg_block_q4_K *y, int64_t k, const float *qw);

void qg_quantize_row_q4_K_imatrix(const float *x, struct qg_block_q4_K *y, int64_t k, const float *qw)
{
	if (!qw) {
		qg_quantize_row_q4_K(x, y, k);
		return;
	}
	quantize_row_q4_K_weighted(x, y, k, qw);
}

static void quantize_row_q4_K_weighted(const float *x, struct qg_block_q4_K *y, int64_t k, const float *qw)
{
	uint8_t L[QG_QK_K], Ls[8], Lm[8];
	float w[32], sw[8], scales[8], mins[8];

	for (int64_t b = 0; b < k / QG_QK_K; b++, x += QG_QK_K, qw += QG_QK_K) {
		float sum_x2 = 0;
		for (int l = 0; l < QG_QK_K; l++)
			sum_x2 += x[l] * x[l];
		float sigma2 = 2 * sum_x2 / QG_QK_K;

		for (int j = 0; j < 8; j++) {
			const float *xs = x + 32 * j;
			for (int l = 0; l < 32; l++)
				w[l] = qw[32 * j + l] * sqrtf(sigma2 + xs[l] * xs[l]);
			float sumw = 0;
			for (int l = 0; l < 32; l++)
				sumw += w[l];
			sw[j] = sumw;
			scales[j] = q4k_fit(xs, w, L + 32 * j, &mins[j], -0.9f, 0.05f, 36);
		}
		float d_block = kq_fit_positive(scales, Ls, sw);
		float m_block = kq_fit_positive(mins, Lm, sw);
		for (int j = 0; j < 8; j++)
			q4k_put_scale_min(y[b].scales, j, Ls[j], Lm[j]);
		y[b].d = qg_fp32_to_fp16(d_block);
		y[b].dmin = qg_fp32_to_fp16(m_block);
		q4k_codes(x, L, &y[b]);
	}
}

void qg_dequantize_row_q4_K(const struct qg_block_q4_K *x, float *y, int64_t k)
{
	for (int64_t b = 0; b < k / QG_QK_K; b++) {
		const float d = qg_fp16_to_fp32(x[b].d), dmin = qg_fp16_to_fp32(x[b].dmin);
		for (int c = 0; c < 4; c++) {
			const uint8_t *q = x[b].qs + 32 * c;
			uint8_t sc, m;
			qg_q4_K_scale_min(2 * c, x[b].scales, &sc, &m);
			const float d1 = d * sc, m1 = dmin * m;
			qg_q4_K_scale_min(2 * c + 1, x[b].scales, &sc, &m);
			const float d2 = d * sc, m2 = dmin * m;
			for (int l = 0; l < 32; l++)
				*y++ = d1 * (q[l] & 0x0f) - m1;
			for (int l = 0; l < 32; l++)
				*y++ = d2 * (q[l] >> 4) - m2;
		}
	}
}

/* --- Q6_K ---------------------------------------------------------------- */

/*
 * A scale for the 16 values X as 6-bit signed codes (L = code + 32 in
 * 0..63), weighting each value by QW (its importance), or by its square
 * when QW is NULL: the value of largest
 * magnitude maps to -32, then 18 trial scales around that are scored by
 * (sum w x l)^2 / sum w l^2 and the best one's least-squares scale kept.
 */
static float q6k_fit(const float *x, int8_t *L, const float *qw)
{
	enum { N = 16, NMAX = 32 };
	float max = 0, amax = 0;

	for (int i = 0; i < N; i++) {
		float ax = fabsf(x[i]);
		if (ax > amax) {
			amax = ax;
			max = x[i];
		}
	}
	if (amax < KQ_ZERO_EPS) {
		memset(L, 0, N);
		return 0.f;
	}

	float iscale = -NMAX / max;
	float sumlx = 0, suml2 = 0;
	for (int i = 0; i < N; i++) {
		int l = kq_clamp(kq_nearest(iscale * x[i]), -NMAX, NMAX - 1);
		L[i] = (int8_t)(l + NMAX);
		float w = qw ? qw[i] : x[i] * x[i];
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	float scale = suml2 ? sumlx / suml2 : 0.0f;
	float best = scale * sumlx;
	for (int is = -9; is <= 9; is++) {
		if (is == 0)
			continue;
		iscale = -(NMAX + 0.1f * is) / max;
		sumlx = suml2 = 0;
		for (int i = 0; i < N; i++) {
			int l = kq_clamp(kq_nearest(iscale * x[i]), -NMAX, NMAX - 1);
			float w = qw ? qw[i] : x[i] * x[i];
			sumlx += w * x[i] * l;
			suml2 += w * l * l;
		}
		if (suml2 > 0 && sumlx * sumlx > best * suml2) {
			for (int i = 0; i < N; i++)
				L[i] = (int8_t)(NMAX + kq_clamp(kq_nearest(iscale * x[i]), -NMAX, NMAX - 1));
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

void qg_quantize_row_q6_K(const float *x, struct qg_block_q6_K *y, int64_t k)
{
	qg_quantize_row_q6_K_imatrix(x, y, k, NULL);
}

void qg_quantize_row_q6_K_imatrix(const float *x, struct qg_block_q6_K *y, int64_t k, const float *qw)
{
	int8_t L[QG_QK_K];
	float scales[16];

	for (int64_t b = 0; b < k / QG_QK_K; b++, x += QG_QK_K) {
		float max_scale = 0, max_abs_scale = 0;

		for (int j = 0; j < 16; j++) {
			scales[j] = q6k_fit(x + 16 * j, L + 16 * j, qw ? qw + b * QG_QK_K + 16 * j : NULL);
			if (fabsf(scales[j]) > max_abs_scale) {
				max_abs_scale = fabsf(scales[j]);
				max_scale = scales[j];
			}
		}
		if (max_abs_scale < KQ_ZERO_EPS) {
			memset(&y[b], 0, sizeof y[b]);
			continue;
		}

		/* the scale of largest magnitude maps to -128 */
		float iscale = -128.f / max_scale;
		y[b].d = qg_fp32_to_fp16(1 / iscale);
		for (int j = 0; j < 16; j++) {
			int s = kq_nearest(iscale * scales[j]);
			y[b].scales[j] = (int8_t)(s < 127 ? s : 127);
		}

		for (int j = 0; j < 16; j++) {
			float d = qg_fp16_to_fp32(y[b].d) * y[b].scales[j];
			if (!d)
				continue;	/* keep the fit's codes */
			for (int l = 0; l < 16; l++)
				L[16 * j + l] = (int8_t)(kq_clamp(kq_nearest(x[16 * j + l] / d), -32, 31) + 32);
		}

		/*
		 * Per 128 values: value l + 32q (q = 0..3, l = 0..31) keeps its low
		 * nibble in ql[l + 32(q & 1)] (low half for q < 2, high for q >= 2)
		 * and its top two bits in qh[l] at bit 2q.
		 */
		for (int h = 0; h < 2; h++) {
			const int8_t *Lh = L + 128 * h;
			uint8_t *ql = y[b].ql + 64 * h, *qh = y[b].qh + 32 * h;
			for (int l = 0; l < 32; l++) {
				uint8_t c0 = (uint8_t)Lh[l], c1 = (uint8_t)Lh[l + 32];
				uint8_t c2 = (uint8_t)Lh[l + 64], c3 = (uint8_t)Lh[l + 96];
				ql[l] = (uint8_t)((c0 & 0x0f) | (c2 & 0x0f) << 4);
				ql[l + 32] = (uint8_t)((c1 & 0x0f) | (c3 & 0x0f) << 4);
				qh[l] = (uint8_t)((c0 >> 4) | (c1 >> 4) << 2 | (c2 >> 4) << 4 | (c3 >> 4) << 6);
			}
		}
	}
}

/* The 256 signed codes (-32..31) of a Q6_K super-block, in value order. */
static void q6k_codes(const struct qg_block_q6_K *x, int8_t *q)
{
	for (int h = 0; h < 2; h++) {
		const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
		int8_t *o = q + 128 * h;
		for (int l = 0; l < 32; l++) {
			o[l] = (int8_t)(((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32);
			o[l + 32] = (int8_t)(((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32);
			o[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
			o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
		}
	}
}

void qg_dequantize_row_q6_K(const struct qg_block_q6_K *x, float *y, int64_t k)
{
	int8_t q[QG_QK_K];

	for (int64_t b = 0; b < k / QG_QK_K; b++, y += QG_QK_K) {
		const float d = qg_fp16_to_fp32(x[b].d);
		q6k_codes(&x[b], q);
		for (int i = 0; i < QG_QK_K; i++)
			y[i] = d * x[b].scales[i / 16] * q[i];
	}
}

/* --- Q8_K ---------------------------------------------------------------- */

void qg_quantize_row_q8_K(const float *x, struct qg_block_q8_K *y, int64_t k)
{
	for (int64_t b = 0; b < k / QG_QK_K; b++, x += QG_QK_K) {
		float max = 0, amax = 0;
		for (int j = 0; j < QG_QK_K; j++) {
			float ax = fabsf(x[j]);
			if (ax > amax) {
				amax = ax;
				max = x[j];
			}
		}
		if (!amax) {
			/* ggml leaves the sums unwritten here; they are 0 */
			memset(&y[b], 0, sizeof y[b]);
			continue;
		}
		/* the value of largest magnitude maps to -127 (so +127 is reachable too) */
		const float iscale = -127.f / max;
		for (int j = 0; j < QG_QK_K; j++) {
			int v = kq_nearest(iscale * x[j]);
			y[b].qs[j] = (int8_t)(v < 127 ? v : 127);
		}
		for (int j = 0; j < 16; j++) {
			int sum = 0;
			for (int l = 0; l < 16; l++)
				sum += y[b].qs[16 * j + l];
			y[b].bsums[j] = (int16_t)sum;
		}
		y[b].d = 1 / iscale;
	}
}

void qg_dequantize_row_q8_K(const struct qg_block_q8_K *x, float *y, int64_t k)
{
	for (int64_t b = 0; b < k / QG_QK_K; b++)
		for (int j = 0; j < QG_QK_K; j++)
			*y++ = x[b].d * x[b].qs[j];
}

/* --- reference dot products ------------------------------------------ */

float qg_vec_dot_q4_K_q8_K(int64_t k, const struct qg_block_q4_K *x, const struct qg_block_q8_K *y)
{
	float acc = 0.0f;

	for (int64_t b = 0; b < k / QG_QK_K; b++) {
		int32_t isum = 0, msum = 0;
		for (int j = 0; j < 8; j++) {
			uint8_t sc, m;
			qg_q4_K_scale_min(j, x[b].scales, &sc, &m);
			const uint8_t *q = x[b].qs + 32 * (j / 2);
			const int8_t *a = y[b].qs + 32 * j;
			const int shift = 4 * (j & 1);
			int32_t s = 0;
			for (int l = 0; l < 32; l++)
				s += ((q[l] >> shift) & 0x0f) * a[l];
			isum += sc * s;
			msum += m * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
		}
		acc = qg_kq_accum(acc, qg_fp16_to_fp32(x[b].d) * y[b].d, qg_fp16_to_fp32(x[b].dmin) * y[b].d,
				  isum, msum);
	}
	return acc;
}

float qg_vec_dot_q6_K_q8_K(int64_t k, const struct qg_block_q6_K *x, const struct qg_block_q8_K *y)
{
	float acc = 0.0f;
	int8_t q[QG_QK_K];

	for (int64_t b = 0; b < k / QG_QK_K; b++) {
		int32_t isum = 0;
		q6k_codes(&x[b], q);
		for (int j = 0; j < 16; j++) {
			int32_t s = 0;
			for (int l = 0; l < 16; l++)
				s += q[16 * j + l] * y[b].qs[16 * j + l];
			isum += x[b].scales[j] * s;
		}
		acc = qg_kq_accum(acc, qg_fp16_to_fp32(x[b].d) * y[b].d, 0.0f, isum, 0);
	}
	return acc;
}
