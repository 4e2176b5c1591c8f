/*
 * rowops.c - the portable row kernels (the reference of rowops.h) and the
 * choice among the families.
 */
#include "config.h"

#include <math.h>

#include "fp16.h"
#include "rowops.h"

static float sumsq_portable(const float *x, int64_t n)
{
	double sum = 0.0;	/* a double: the reference does not lose the small terms of a long row */

	for (int64_t i = 0; i < n; i++)
		sum += (double)x[i] * x[i];
	return (float)sum;
}

static void scale_portable(float *y, const float *x, float s, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] * s;
}

static void silu_portable(float *y, const float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] / (1.0f + expf(-x[i]));
}

static void swiglu_portable(float *y, const float *x, const float *g, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] / (1.0f + expf(-x[i])) * g[i];
}

static void rope_portable(float *y, const float *x, const float *cs, int64_t half, bool neox)
{
	for (int64_t j = 0; j < half; j++) {
		const int64_t u = neox ? j : 2 * j, v = u + (neox ? half : 1);
		const float x0 = x[u], x1 = x[v], c = cs[j], s = cs[half + j];
		y[u] = x0 * c - x1 * s;
		y[v] = x0 * s + x1 * c;
	}
}

static float softmax_block_portable(float *s, int64_t n, float *m, float *rescale)
{
	float mx = *m, sum = 0.0f;

	for (int64_t i = 0; i < n; i++)
		mx = s[i] > mx ? s[i] : mx;
	if (mx == -INFINITY) {
		for (int64_t i = 0; i < n; i++)
			s[i] = 0.0f;
		*rescale = 1.0f;
		return 0.0f;
	}
	for (int64_t i = 0; i < n; i++) {
		s[i] = s[i] == -INFINITY ? 0.0f : expf(s[i] - mx);
		sum += s[i];
	}
	*rescale = *m == -INFINITY ? 0.0f : expf(*m - mx);
	*m = mx;
	return sum;
}

static void scores_portable(float *s, size_t lds, const float *q, int64_t nq, const uint16_t *k, size_t kstride,
			    int64_t nk, int64_t dk, float scale, const float *m, size_t ldm, int64_t mdiv)
{
	for (int64_t i = 0; i < nq; i++) {
		const float *mi = m ? m + (size_t)(i / mdiv) * ldm : NULL;
		for (int64_t j = 0; j < nk; j++) {
			const uint16_t *kj = (const uint16_t *)((const char *)k + (size_t)j * kstride);
			float sum = 0.0f;
			if (mi && mi[j] == -INFINITY) {
				s[(size_t)i * lds + j] = -INFINITY;
				continue;
			}
			for (int64_t t = 0; t < dk; t++)
				sum += q[i * dk + t] * qg_fp16_to_fp32(kj[t]);
			s[(size_t)i * lds + j] = sum * scale + (mi ? mi[j] : 0.0f);
		}
	}
}

static void mix_portable(float *acc, const float *p, size_t ldp, int64_t nq, const uint16_t *v, size_t vstride,
			 int64_t nk, int64_t dv)
{
	for (int64_t j = 0; j < nk; j++) {
		const uint16_t *vj = (const uint16_t *)((const char *)v + (size_t)j * vstride);
		for (int64_t i = 0; i < nq; i++) {
			const float w = p[(size_t)i * ldp + j];
			for (int64_t t = 0; w != 0.0f && t < dv; t++)
				acc[i * dv + t] += w * qg_fp16_to_fp32(vj[t]);
		}
	}
}

static void from_f16_portable(float *y, const uint16_t *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = qg_fp16_to_fp32(x[i]);
}

static void round_f16_portable(float *y, const float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = qg_fp16_to_fp32(qg_fp32_to_fp16(x[i]));
}

static const struct qg_rowops rowops_portable = {
	.name = "portable",
	.family = QG_KF_PORTABLE,
	.sumsq = sumsq_portable,
	.scale = scale_portable,
	.silu = silu_portable,
	.swiglu = swiglu_portable,
	.rope = rope_portable,
	.softmax_block = softmax_block_portable,
	.scores = scores_portable,
	.mix = mix_portable,
	.from_f16 = from_f16_portable,
	.round_f16 = round_f16_portable,
};

const struct qg_rowops *qg_rowops_get(enum qg_kfamily family)
{
	switch (family) {
	case QG_KF_PORTABLE:
		return &rowops_portable;
#if defined(__x86_64__) && defined(HAVE_AVX2)
	case QG_KF_AVX2: {
		const struct qg_cpu *c = qg_cpu_features();
		return c->avx2 && c->fma && c->f16c ? &qg_rowops_avx2 : NULL;
	}
#endif
#if defined(__aarch64__) && defined(HAVE_NEON)
	case QG_KF_NEON:
		return &qg_rowops_neon;	/* aarch64's baseline */
#endif
	default:
		return NULL;
	}
}

const struct qg_rowops *qg_rowops_for(void)
{
	/* the K-quant choice follows a forced family, and is portable only where nothing better runs or when forced */
	if (qg_kq_kernel_for()->family == QG_KF_PORTABLE)
		return &rowops_portable;
	static const enum qg_kfamily order[] = { QG_KF_AVX2, QG_KF_NEON };
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		const struct qg_rowops *r = qg_rowops_get(order[i]);
		if (r)
			return r;
	}
	return &rowops_portable;
}
