/*
 * rowops-avx2.c - the row kernels of rowops.h with AVX2, FMA and F16C,
 * eight floats a step, the rest as the portable ones do it.
 *
 * exp(x) for SILU and attention's softmax: x = n ln2 + r with n an integer and |r| <= ln2/2 (ln2
 * in two parts, so that r keeps its bits), exp(r) by its Taylor series to
 * r^6 (the first term left out is below 2^-23 of the sum there), times
 * 2^n made in the exponent field.  X is clamped first to where 2^n is a
 * normal float: beyond, silu is x or 0 to within a float's precision.
 */
#include "config.h"

#include <immintrin.h>
#include <math.h>

#include "rowops.h"

/* The loops over a pass's queries and columns, unrolled: their arrays then live in registers. */
#define UNROLL _Pragma("GCC unroll 8")

#define EXP_LO (-87.0f)
#define EXP_HI 88.0f

static inline __m256 exp8(__m256 x)
{
	x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(EXP_LO)), _mm256_set1_ps(EXP_HI));
	const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
					 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
	__m256 p = _mm256_set1_ps(1.0f / 720.0f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline __m256 silu8(__m256 x)
{
	const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
	return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static inline float hsum8(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static float sumsq_avx2(const float *x, int64_t n)
{
	/* two accumulators: the FMA's latency, not its throughput, bounds one */
	__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
	int64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
		a0 = _mm256_fmadd_ps(v0, v0, a0);
		a1 = _mm256_fmadd_ps(v1, v1, a1);
	}
	for (; i + 8 <= n; i += 8) {
		const __m256 v = _mm256_loadu_ps(x + i);
		a0 = _mm256_fmadd_ps(v, v, a0);
	}
	float sum = hsum8(_mm256_add_ps(a0, a1));
	for (; i < n; i++)
		sum += x[i] * x[i];
	return sum;
}

static void scale_avx2(float *y, const float *x, float s, int64_t n)
{
	const __m256 vs = _mm256_set1_ps(s);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
	for (; i < n; i++)
		y[i] = x[i] * s;
}

static void silu_avx2(float *y, const float *x, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
	for (; i < n; i++)
		y[i] = x[i] / (1.0f + expf(-x[i]));
}

static void swiglu_avx2(float *y, const float *x, const float *g, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(x + i)), _mm256_loadu_ps(g + i)));
	for (; i < n; i++)
		y[i] = x[i] / (1.0f + expf(-x[i])) * g[i];
}

static void rope_avx2(float *y, const float *x, const float *cs, int64_t half, bool neox)
{
	const float *sn = cs + half;
	int64_t j = 0;

	if (neox) {
		for (; j + 8 <= half; j += 8) {
			const __m256 x0 = _mm256_loadu_ps(x + j), x1 = _mm256_loadu_ps(x + j + half);
			const __m256 c = _mm256_loadu_ps(cs + j), s = _mm256_loadu_ps(sn + j);
			_mm256_storeu_ps(y + j, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
			_mm256_storeu_ps(y + j + half, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
		}
	} else {
		/* four pairs a step: each cosine and sine twice, the pairs' halves swapped for the cross terms */
		const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
		for (; j + 4 <= half; j += 4) {
			const __m256 v = _mm256_loadu_ps(x + 2 * j);
			const __m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cs + j)), dup);
			const __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sn + j)), dup);
			const __m256 w = _mm256_permute_ps(v, 0xb1);	/* (x1, x0) in each pair */
			/* even lanes x0 c - x1 s, odd lanes x1 c + x0 s */
			_mm256_storeu_ps(y + 2 * j, _mm256_fmaddsub_ps(v, c, _mm256_mul_ps(w, s)));
		}
	}
	for (; j < half; j++) {
		const int64_t u = neox ? j : 2 * j, v = u + (neox ? half : 1);
		const float x0 = x[u], x1 = x[v], c = cs[j], s = sn[j];
		y[u] = x0 * c - x1 * s;
		y[v] = x0 * s + x1 * c;
	}
}

/* The largest of N scores and MX. */
static float max_avx2(const float *s, int64_t n, float mx)
{
	__m256 v = _mm256_set1_ps(mx);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		v = _mm256_max_ps(v, _mm256_loadu_ps(s + i));
	__m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	h = _mm_max_ss(h, _mm_movehdup_ps(h));
	mx = _mm_cvtss_f32(h);
	for (; i < n; i++)
		mx = s[i] > mx ? s[i] : mx;
	return mx;
}

static float softmax_block_avx2(float *s, int64_t n, float *m, float *rescale)
{
	const float mx = max_avx2(s, n, *m);
	const __m256 vmx = _mm256_set1_ps(mx), ninf = _mm256_set1_ps(-INFINITY);
	__m256 acc = _mm256_setzero_ps();
	float sum = 0.0f;
	int64_t i = 0;

	if (mx == -INFINITY) {
		for (; i < n; i++)
			s[i] = 0.0f;
		*rescale = 1.0f;
		return 0.0f;
	}
	for (; i + 8 <= n; i += 8) {
		const __m256 x = _mm256_loadu_ps(s + i);
		/* masked scores give 0, not the clamp's exp(-87) */
		const __m256 e = _mm256_andnot_ps(_mm256_cmp_ps(x, ninf, _CMP_EQ_OQ), exp8(_mm256_sub_ps(x, vmx)));
		_mm256_storeu_ps(s + i, e);
		acc = _mm256_add_ps(acc, e);
	}
	sum = hsum8(acc);
	for (; i < n; i++) {
		s[i] = s[i] == -INFINITY ? 0.0f : expf(s[i] - mx);
		sum += s[i];
	}
	*rescale = *m == -INFINITY ? 0.0f : expf(*m - mx);
	*m = mx;
	return sum;
}

/* Eight halves at P as floats. */
static inline __m256 load_h8(const uint16_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/*
 * Lane g of the result (g < 4): the sum of the eight lanes of A[g], and
 * lane 4 + g a part of it; the caller adds the two halves.
 */
static inline __m128 hsum4x8(const __m256 a[4])
{
	const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));

	return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/*
 * S[J] = S[J] * SCALE + M[J] over N scores, -INFINITY exactly where M is
 * (whatever S held); M NULL: S[J] * SCALE.
 */
static void finish_scores(float *s, int64_t n, float scale, const float *m)
{
	const __m256 vs = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
	int64_t j = 0;

	for (; j + 8 <= n; j += 8) {
		__m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + j), vs);
		if (m) {
			const __m256 mv = _mm256_loadu_ps(m + j);
			x = _mm256_blendv_ps(_mm256_add_ps(x, mv), ninf, _mm256_cmp_ps(mv, ninf, _CMP_EQ_OQ));
		}
		_mm256_storeu_ps(s + j, x);
	}
	for (; j < n; j++) {
		const float mv = m ? m[j] : 0.0f;
		s[j] = mv == -INFINITY ? -INFINITY : s[j] * scale + mv;
	}
}

/*
 * G queries (at most four) against keys two at a time: each key's eight
 * halves are turned once and met by all G queries, eight lanes of
 * partial sums per (query, key), reduced four at a time by one hadd tree
 * and stored as pairs of keys per query.  Then each query's row is
 * scaled and masked in one vector pass.  A masked key is computed like
 * the others (its bytes are only read) and its score then replaced.
 */
static inline __attribute__((always_inline)) void scores_g(const int G, float *s, size_t lds, const float *q,
							   const uint16_t *k, size_t kstride, int64_t nk, int64_t dk,
							   float scale, const float *m, size_t ldm, int64_t mdiv, int64_t i0)
{
	const int64_t d8 = dk & ~(int64_t)7;

	for (int64_t j = 0; j < nk; j += 2) {
		const int two = j + 1 < nk;
		const uint16_t *k0 = (const uint16_t *)((const char *)k + (size_t)j * kstride);
		const uint16_t *k1 = two ? (const uint16_t *)((const char *)k0 + kstride) : k0;
		__m256 a0[4], a1[4];

		qg_rowops_prefetch(k0, kstride, (size_t)dk * 2);
		qg_rowops_prefetch(k1, kstride, (size_t)dk * 2);
		UNROLL
		for (int g = 0; g < 4; g++)
			a0[g] = a1[g] = _mm256_setzero_ps();
		for (int64_t t = 0; t < d8; t += 8) {
			const __m256 x0 = load_h8(k0 + t), x1 = load_h8(k1 + t);
			UNROLL
			for (int g = 0; g < G; g++) {
				const __m256 qv = _mm256_loadu_ps(q + g * dk + t);
				a0[g] = _mm256_fmadd_ps(x0, qv, a0[g]);
				a1[g] = _mm256_fmadd_ps(x1, qv, a1[g]);
			}
		}
		/* lane g: query g's score of key j (R0) and of key j + 1 (R1) */
		__m128 r0 = hsum4x8(a0), r1 = hsum4x8(a1);
		if (d8 < dk) {
			float t0[4], t1[4];
			_mm_storeu_ps(t0, r0);
			_mm_storeu_ps(t1, r1);
			for (int g = 0; g < G; g++) {
				for (int64_t t = d8; t < dk; t++) {
					t0[g] += q[g * dk + t] * _cvtsh_ss(k0[t]);
					t1[g] += q[g * dk + t] * _cvtsh_ss(k1[t]);
				}
			}
			r0 = _mm_loadu_ps(t0);
			r1 = _mm_loadu_ps(t1);
		}
		if (two) {
			const __m128 lo = _mm_unpacklo_ps(r0, r1), hi = _mm_unpackhi_ps(r0, r1);
			_mm_storel_pi((__m64 *)(s + j), lo);
			if (G > 1)
				_mm_storeh_pi((__m64 *)(s + lds + j), lo);
			if (G > 2)
				_mm_storel_pi((__m64 *)(s + 2 * lds + j), hi);
			if (G > 3)
				_mm_storeh_pi((__m64 *)(s + 3 * lds + j), hi);
		} else {
			float t0[4];
			_mm_storeu_ps(t0, r0);
			for (int g = 0; g < G; g++)
				s[(size_t)g * lds + j] = t0[g];
		}
	}
	UNROLL
	for (int g = 0; g < G; g++)
		finish_scores(s + (size_t)g * lds, nk, scale, m ? m + (size_t)((i0 + g) / mdiv) * ldm : NULL);
}

static void scores_avx2(float *s, size_t lds, const float *q, int64_t nq, const uint16_t *k, size_t kstride,
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
 * The keys among J0 .. J0 + NJ - 1 (NJ <= 64) that some of G queries
 * weigh, as offsets from J0 into LIVE; their count.
 */
static inline __attribute__((always_inline)) int live_keys(const int G, const float *p, size_t ldp, int64_t j0,
							   int nj, uint8_t live[64])
{
	const __m256 zero = _mm256_setzero_ps();
	int n = 0, j = 0;

	for (; j + 8 <= nj; j += 8) {
		__m256 any = _mm256_cmp_ps(_mm256_loadu_ps(p + j0 + j), zero, _CMP_NEQ_UQ);
		UNROLL
		for (int g = 1; g < G; g++)
			any = _mm256_or_ps(any, _mm256_cmp_ps(_mm256_loadu_ps(p + (size_t)g * ldp + j0 + j), zero,
							     _CMP_NEQ_UQ));
		for (unsigned bits = (unsigned)_mm256_movemask_ps(any); bits; bits &= bits - 1)
			live[n++] = (uint8_t)(j + __builtin_ctz(bits));
	}
	for (; j < nj; j++) {
		int any = 0;
		for (int g = 0; g < G; g++)
			any |= p[(size_t)g * ldp + j0 + j] != 0.0f;
		if (any)
			live[n++] = (uint8_t)j;
	}
	return n;
}

/*
 * G queries (at most four) times the values sixteen columns at a time:
 * the G x 16 accumulators stay in registers over the keys, and each
 * key's sixteen halves are turned once for all G.  Keys go 64 at a time,
 * those no query weighs left out first.
 */
static inline __attribute__((always_inline)) void mix_g(const int G, float *acc, const float *p, size_t ldp,
							const uint16_t *v, size_t vstride, int64_t nk, int64_t dv)
{
	uint8_t live[64];

	for (int64_t j0 = 0; j0 < nk; j0 += 64) {
		const int nl = live_keys(G, p, ldp, j0, nk - j0 < 64 ? (int)(nk - j0) : 64, live);
		const uint16_t *v0 = (const uint16_t *)((const char *)v + (size_t)j0 * vstride);
		const float *p0 = p + j0;
		int64_t t = 0;

		for (; t + 16 <= dv; t += 16) {
			__m256 y[4][2];
			UNROLL
			for (int g = 0; g < G; g++) {
				y[g][0] = _mm256_loadu_ps(acc + g * dv + t);
				y[g][1] = _mm256_loadu_ps(acc + g * dv + t + 8);
			}
			for (int l = 0; l < nl; l++) {
				const int j = live[l];
				const uint16_t *vj = (const uint16_t *)((const char *)v0 + (size_t)j * vstride) + t;
				if (t == 0)
					qg_rowops_prefetch(vj, vstride, (size_t)dv * 2);
				const __m256 x0 = load_h8(vj), x1 = load_h8(vj + 8);
				UNROLL
				for (int g = 0; g < G; g++) {
					const __m256 w = _mm256_broadcast_ss(p0 + (size_t)g * ldp + j);
					y[g][0] = _mm256_fmadd_ps(x0, w, y[g][0]);
					y[g][1] = _mm256_fmadd_ps(x1, w, y[g][1]);
				}
			}
			UNROLL
			for (int g = 0; g < G; g++) {
				_mm256_storeu_ps(acc + g * dv + t, y[g][0]);
				_mm256_storeu_ps(acc + g * dv + t + 8, y[g][1]);
			}
		}
		for (; t < dv; t++) {
			for (int l = 0; l < nl; l++) {
				const uint16_t *vj = (const uint16_t *)((const char *)v0 + (size_t)live[l] * vstride);
				for (int g = 0; g < G; g++)
					acc[g * dv + t] += p0[(size_t)g * ldp + live[l]] * _cvtsh_ss(vj[t]);
			}
		}
	}
}

static void mix_avx2(float *acc, const float *p, size_t ldp, int64_t nq, const uint16_t *v, size_t vstride,
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

static void from_f16_avx2(float *y, const uint16_t *x, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
	for (; i < n; i++)
		y[i] = _cvtsh_ss(x[i]);
}

static void round_f16_avx2(float *y, const float *x, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
	for (; i < n; i++)
		y[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

const struct qg_rowops qg_rowops_avx2 = {
	.name = "avx2",
	.family = QG_KF_AVX2,
	.sumsq = sumsq_avx2,
	.scale = scale_avx2,
	.silu = silu_avx2,
	.swiglu = swiglu_avx2,
	.rope = rope_avx2,
	.softmax_block = softmax_block_avx2,
	.scores = scores_avx2,
	.mix = mix_avx2,
	.from_f16 = from_f16_avx2,
	.round_f16 = round_f16_avx2,
};
