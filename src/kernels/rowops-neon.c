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

/* Four rows' scores at once: four chains of FMAs, one pairwise reduction of the four. */
static void dot_rows_neon(float *y, const float *a, int64_t rows, int64_t n, const float *x)
{
	int64_t j = 0;

	for (; j + 4 <= rows && n >= 4; j += 4) {
		const float *r = a + j * n;
		float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
		int64_t i = 0;
		for (; i + 4 <= n; i += 4) {
			const float32x4_t v = vld1q_f32(x + i);
			s0 = vfmaq_f32(s0, vld1q_f32(r + i), v);
			s1 = vfmaq_f32(s1, vld1q_f32(r + n + i), v);
			s2 = vfmaq_f32(s2, vld1q_f32(r + 2 * n + i), v);
			s3 = vfmaq_f32(s3, vld1q_f32(r + 3 * n + i), v);
		}
		float32x4_t sum = vpaddq_f32(vpaddq_f32(s0, s1), vpaddq_f32(s2, s3));
		for (; i < n; i++) {
			const float t[4] = { r[i], r[n + i], r[2 * n + i], r[3 * n + i] };
			sum = vfmaq_n_f32(sum, vld1q_f32(t), x[i]);
		}
		vst1q_f32(y + j, sum);
	}
	for (; j < rows; j++) {
		const float *r = a + j * n;
		float32x4_t s0 = vdupq_n_f32(0.0f);
		int64_t i = 0;
		for (; i + 4 <= n; i += 4)
			s0 = vfmaq_f32(s0, vld1q_f32(r + i), vld1q_f32(x + i));
		float sum = vaddvq_f32(s0);
		for (; i < n; i++)
			sum += r[i] * x[i];
		y[j] = sum;
	}
}

/* Y kept in registers 32 floats at a time while the rows go by. */
static void mad_rows_neon(float *y, const float *a, const float *p, int64_t rows, int64_t n)
{
	int64_t i = 0;

	for (; i + 32 <= n; i += 32) {
		float32x4_t v[8];
		for (int k = 0; k < 8; k++)
			v[k] = vld1q_f32(y + i + 4 * k);
		for (int64_t j = 0; j < rows; j++) {
			if (p[j] == 0.0f)
				continue;
			const float *r = a + j * n + i;
			for (int k = 0; k < 8; k++)
				v[k] = vfmaq_n_f32(v[k], vld1q_f32(r + 4 * k), p[j]);
		}
		for (int k = 0; k < 8; k++)
			vst1q_f32(y + i + 4 * k, v[k]);
	}
	for (; i + 4 <= n; i += 4) {
		float32x4_t v = vld1q_f32(y + i);
		for (int64_t j = 0; j < rows; j++)
			if (p[j] != 0.0f)
				v = vfmaq_n_f32(v, vld1q_f32(a + j * n + i), p[j]);
		vst1q_f32(y + i, v);
	}
	for (; i < n; i++)
		for (int64_t j = 0; j < rows; j++)
			if (p[j] != 0.0f)
				y[i] += p[j] * a[j * n + i];
}

static void from_f16_neon(float *y, const uint16_t *x, int64_t n)
{
	int64_t i = 0;

	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, load_f16x4(x + i));
	for (; i < n; i++)
		y[i] = qg_fp16_to_fp32(x[i]);
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
	.dot_rows = dot_rows_neon,
	.mad_rows = mad_rows_neon,
	.from_f16 = from_f16_neon,
};
