/*
 * rowops-neon.c - the row kernels of rowops.h with aarch64's baseline
 * Advanced SIMD: four floats a step, halves widened by FCVTL.
 *
 * exp(x) for SILU and attention's softmax as rowops-avx2.c computes it: x = n ln2 + r, exp(r) by
 * its Taylor series to r^6, 2^n made in the exponent field, x clamped to
 * where 2^n is a normal float.
 */
#include "config.h"

#include <arm_neon.h>
#include <math.h>

#include "fp16.h"
#include "rowops.h"

/* The loops over a pass's queries and columns, unrolled: their arrays then live in registers. */
#define UNROLL _Pragma("GCC unroll 8")

#define EXP_LO (-87.0f)
#define EXP_HI 88.0f

static inline float32x4_t exp4(float32x4_t x)
{
	x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(EXP_LO)), vdupq_n_f32(EXP_HI));
	const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
	float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693145751953125f));
	r = vfmsq_f32(r, n, vdupq_n_f32(1.428606765330187045e-06f));
	float32x4_t p = vdupq_n_f32(1.0f / 720.0f);
	p = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
	p = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
	p = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
	p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
	p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
	p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
	const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
	return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

static inline float32x4_t silu4(float32x4_t x)
{
	return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), exp4(vnegq_f32(x))));
}

static float sumsq_neon(const float *x, int64_t n)
{
	/* two accumulators: the FMA's latency, not its throughput, bounds one */
	float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		const float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4);
		a0 = vfmaq_f32(a0, v0, v0);
		a1 = vfmaq_f32(a1, v1, v1);
	}
	for (; i + 4 <= n; i += 4) {
		const float32x4_t v = vld1q_f32(x + i);
		a0 = vfmaq_f32(a0, v, v);
	}
	float sum = vaddvq_f32(vaddq_f32(a0, a1));
	for (; i < n; i++)
		sum += x[i] * x[i];
	return sum;
}

static void scale_neon(float *y, const float *x, float s, int64_t n)
{
	int64_t i = 0;

	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(x + i), s));
	for (; i < n; i++)
		y[i] = x[i] * s;
}

static void silu_neon(float *y, const float *x, int64_t n)
{
	int64_t i = 0;

	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, silu4(vld1q_f32(x + i)));
	for (; i < n; i++)
		y[i] = x[i] / (1.0f + expf(-x[i]));
}

static void swiglu_neon(float *y, const float *x, const float *g, int64_t n)
{
	int64_t i = 0;

	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, vmulq_f32(silu4(vld1q_f32(x + i)), vld1q_f32(g + i)));
	for (; i < n; i++)
		y[i] = x[i] / (1.0f + expf(-x[i])) * g[i];
}

static void rope_neon(float *y, const float *x, const float *cs, int64_t half, bool neox)
{
	const float *sn = cs + half;
	int64_t j = 0;

	if (neox) {
		for (; j + 4 <= half; j += 4) {
			const float32x4_t x0 = vld1q_f32(x + j), x1 = vld1q_f32(x + j + half);
			const float32x4_t c = vld1q_f32(cs + j), s = vld1q_f32(sn + j);
			vst1q_f32(y + j, vfmsq_f32(vmulq_f32(x0, c), x1, s));
			vst1q_f32(y + j + half, vfmaq_f32(vmulq_f32(x0, s), x1, c));
		}
	} else {
		/* four pairs a step, split into their first and second values by the structured load */
		for (; j + 4 <= half; j += 4) {
			const float32x4x2_t v = vld2q_f32(x + 2 * j);
			const float32x4_t c = vld1q_f32(cs + j), s = vld1q_f32(sn + j);
			float32x4x2_t w;
			w.val[0] = vfmsq_f32(vmulq_f32(v.val[0], c), v.val[1], s);
			w.val[1] = vfmaq_f32(vmulq_f32(v.val[0], s), v.val[1], c);
			vst2q_f32(y + 2 * j, w);
		}
	}
	for (; j < half; j++) {
		const int64_t u = neox ? j : 2 * j, v = u + (neox ? half : 1);
		const float x0 = x[u], x1 = x[v], c = cs[j], s = sn[j];
		y[u] = x0 * c - x1 * s;
		y[v] = x0 * s + x1 * c;
	}
}

static float softmax_block_neon(float *s, int64_t n, float *m, float *rescale)
{
	float32x4_t v = vdupq_n_f32(*m);
	float mx, sum;
	int64_t i = 0;

	for (; i + 4 <= n; i += 4)
		v = vmaxq_f32(v, vld1q_f32(s + i));
	mx = vmaxvq_f32(v);
	for (; i < n; i++)
		mx = s[i] > mx ? s[i] : mx;
	if (mx == -INFINITY) {
		for (i = 0; i < n; i++)
			s[i] = 0.0f;
		*rescale = 1.0f;
		return 0.0f;
	}
	const float32x4_t vmx = vdupq_n_f32(mx), ninf = vdupq_n_f32(-INFINITY);
	float32x4_t acc = vdupq_n_f32(0.0f);
	for (i = 0; i + 4 <= n; i += 4) {
		const float32x4_t x = vld1q_f32(s + i);
		/* masked scores give 0, not the clamp's exp(-87) */
		const float32x4_t e = vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(exp4(vsubq_f32(x, vmx))),
								     vceqq_f32(x, ninf)));
		vst1q_f32(s + i, e);
		acc = vaddq_f32(acc, e);
	}
	sum = vaddvq_f32(acc);
	for (; i < n; i++) {
		s[i] = s[i] == -INFINITY ? 0.0f : expf(s[i] - mx);
		sum += s[i];
	}
	*rescale = *m == -INFINITY ? 0.0f : expf(*m - mx);
	*m = mx;
	return sum;
}

/* Four halves at P as floats. */
static inline float32x4_t load_f16x4(const uint16_t *p)
{
	return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

/*
 * S[J] = S[J] * SCALE + M[J] over N scores, -INFINITY exactly where M is
 * (whatever S held); M NULL: S[J] * SCALE.
 */
static void finish_scores(float *s, int64_t n, float scale, const float *m)
{
	const float32x4_t ninf = vdupq_n_f32(-INFINITY);
	int64_t j = 0;

	for (; j + 4 <= n; j += 4) {
		float32x4_t x = vmulq_n_f32(vld1q_f32(s + j), scale);
		if (m) {
			const float32x4_t mv = vld1q_f32(m + j);
			x = vbslq_f32(vceqq_f32(mv, ninf), ninf, vaddq_f32(x, mv));
		}
		vst1q_f32(s + j, x);
	}
	for (; j < n; j++) {
		const float mv = m ? m[j] : 0.0f;
		s[j] = mv == -INFINITY ? -INFINITY : s[j] * scale + mv;
	}
}

/*
 * G queries (at most four) against keys two at a time, as rowops-avx2.c
 * does: each key's halves turned once for all G, four lanes of partial
 * sums per (query, key), reduced pairwise to one vector over the queries
 * per key; then each query's row is scaled and masked in one pass.
 */
static inline __attribute__((always_inline)) void scores_g(const int G, float *s, size_t lds, const float *q,
							   const uint16_t *k, size_t kstride, int64_t nk, int64_t dk,
							   float scale, const float *m, size_t ldm, int64_t mdiv, int64_t i0)
{
	const int64_t d4 = dk & ~(int64_t)3;

	for (int64_t j = 0; j < nk; j += 2) {
		const int two = j + 1 < nk;
		const uint16_t *k0 = (const uint16_t *)((const char *)k + (size_t)j * kstride);
		const uint16_t *k1 = two ? (const uint16_t *)((const char *)k0 + kstride) : k0;
		float32x4_t a0[4], a1[4];
		float r[2][4];

		qg_rowops_prefetch(k0, kstride, (size_t)dk * 2);
		qg_rowops_prefetch(k1, kstride, (size_t)dk * 2);
		UNROLL
		for (int g = 0; g < 4; g++)
			a0[g] = a1[g] = vdupq_n_f32(0.0f);
		for (int64_t t = 0; t < d4; t += 4) {
			const float32x4_t x0 = load_f16x4(k0 + t), x1 = load_f16x4(k1 + t);
			UNROLL
			for (int g = 0; g < G; g++) {
				const float32x4_t qv = vld1q_f32(q + g * dk + t);
				a0[g] = vfmaq_f32(a0[g], x0, qv);
				a1[g] = vfmaq_f32(a1[g], x1, qv);
			}
		}
		/* lane g: query g's score of key j (r[0]) and of key j + 1 (r[1]) */
		vst1q_f32(r[0], vpaddq_f32(vpaddq_f32(a0[0], a0[1]), vpaddq_f32(a0[2], a0[3])));
		vst1q_f32(r[1], vpaddq_f32(vpaddq_f32(a1[0], a1[1]), vpaddq_f32(a1[2], a1[3])));
		UNROLL
		for (int g = 0; g < G; g++) {
			for (int64_t t = d4; t < dk; t++) {
				r[0][g] += q[g * dk + t] * qg_fp16_to_fp32(k0[t]);
				r[1][g] += q[g * dk + t] * qg_fp16_to_fp32(k1[t]);
			}
			s[(size_t)g * lds + j] = r[0][g];
			if (two)
				s[(size_t)g * lds + j + 1] = r[1][g];
		}
	}
	UNROLL
	for (int g = 0; g < G; g++)
		finish_scores(s + (size_t)g * lds, nk, scale, m ? m + (size_t)((i0 + g) / mdiv) * ldm : NULL);
}

static void scores_neon(float *s, size_t lds, const float *q, int64_t nq, const uint16_t *k, size_t kstride,
			int64_t nk, int64_t dk, float scale, const float *m, size_t ldm, int64_t mdiv)
{
	int64_t i = 0;

	for (; i + 4 <= nq; i += 4)
		scores_g(4, s + (size_t)i * lds, lds, q + i * dk, k, kstride, nk, dk, scale, m, ldm, mdiv, i);
	switch (nq - i) {
	case 3: scores_g(3, s + (size_t)i * lds, lds, q + i * dk, k, kstride, nk, dk, scale, m, ldm, mdiv, i); break;
	case 2: scores_g(2, s + (size_t)i * lds, lds, q + i * dk, k, kstride, nk, dk, scale, m, ldm, mdiv, i); break;
	case 1: scores_g(1, s + (size_t)i * lds, lds, q + i * dk, k, kstride, nk, dk, scale, m, ldm, mdiv, i); break;
	default: break;
	}
}

/*
 * G queries (at most four) times the values sixteen columns at a time:
 * G x 4 accumulators of four lanes stay in registers over the keys.
 * Keys go 64 at a time, those no query weighs left out first.
 */
static inline __attribute__((always_inline)) void mix_g(const int G, float *acc, const float *p, size_t ldp,
							const uint16_t *v, size_t vstride, int64_t nk, int64_t dv)
{
	uint8_t live[64];

	for (int64_t j0 = 0; j0 < nk; j0 += 64) {
		const int nj = nk - j0 < 64 ? (int)(nk - j0) : 64;
		const uint16_t *v0 = (const uint16_t *)((const char *)v + (size_t)j0 * vstride);
		const float *p0 = p + j0;
		int nl = 0;
		int64_t t = 0;

		for (int j = 0; j < nj; j++) {
			int any = 0;
			UNROLL
			for (int g = 0; g < G; g++)
				any |= p0[(size_t)g * ldp + j] != 0.0f;
			if (any)
				live[nl++] = (uint8_t)j;
		}
		for (; t + 16 <= dv; t += 16) {
			float32x4_t y[4][4];
			UNROLL
			for (int g = 0; g < G; g++)
				UNROLL
				for (int c = 0; c < 4; c++)
					y[g][c] = vld1q_f32(acc + g * dv + t + 4 * c);
			for (int l = 0; l < nl; l++) {
				const int j = live[l];
				const uint16_t *vj = (const uint16_t *)((const char *)v0 + (size_t)j * vstride) + t;
				float32x4_t x[4];
				if (t == 0)
					qg_rowops_prefetch(vj, vstride, (size_t)dv * 2);
				UNROLL
				for (int c = 0; c < 4; c++)
					x[c] = load_f16x4(vj + 4 * c);
				UNROLL
				for (int g = 0; g < G; g++) {
					const float w = p0[(size_t)g * ldp + j];
					UNROLL
					for (int c = 0; c < 4; c++)
						y[g][c] = vfmaq_n_f32(y[g][c], x[c], w);
				}
			}
			UNROLL
			for (int g = 0; g < G; g++)
				UNROLL
				for (int c = 0; c < 4; c++)
					vst1q_f32(acc + g * dv + t + 4 * c, y[g][c]);
		}
		for (; t < dv; t++) {
			for (int l = 0; l < nl; l++) {
				const uint16_t *vj = (const uint16_t *)((const char *)v0 + (size_t)live[l] * vstride);
				for (int g = 0; g < G; g++)
					acc[g * dv + t] += p0[(size_t)g * ldp + live[l]] * qg_fp16_to_fp32(vj[t]);
			}
		}
	}
}

static void mix_neon(float *acc, const float *p, size_t ldp, int64_t nq, const uint16_t *v, size_t vstride,
		     int64_t nk, int64_t dv)
{
	int64_t i = 0;

	for (; i + 4 <= nq; i += 4)
		mix_g(4, acc + i * dv, p + (size_t)i * ldp, ldp, v, vstride, nk, dv);
	switch (nq - i) {
	case 3: mix_g(3, acc + i * dv, p + (size_t)i * ldp, ldp, v, vstride, nk, dv); break;
	case 2: mix_g(2, acc + i * dv, p + (size_t)i * ldp, ldp, v, vstride, nk, dv); break;
	case 1: mix_g(1, acc + i * dv, p + (size_t)i * ldp, ldp, v, vstride, nk, dv); break;
	default: break;
	}
}

static void from_f16_neon(float *y, const uint16_t *x, int64_t n)
{
	int64_t i = 0;

	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, load_f16x4(x + i));
	for (; i < n; i++)
		y[i] = qg_fp16_to_fp32(x[i]);
}

static void round_f16_neon(float *y, const float *x, int64_t n)
{
	int64_t i = 0;

	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, vcvt_f32_f16(vcvt_f16_f32(vld1q_f32(x + i))));
	for (; i < n; i++)
		y[i] = qg_fp16_to_fp32(qg_fp32_to_fp16(x[i]));
}

const struct qg_rowops qg_rowops_neon = {
	.name = "neon",
	.family = QG_KF_NEON,
	.sumsq = sumsq_neon,
	.scale = scale_neon,
	.silu = silu_neon,
	.swiglu = swiglu_neon,
	.rope = rope_neon,
	.softmax_block = softmax_block_neon,
	.scores = scores_neon,
	.mix = mix_neon,
	.from_f16 = from_f16_neon,
	.round_f16 = round_f16_neon,
};
