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

/* Four rows' scores at once: four chains of FMAs, one reduction of the four. */
static void dot_rows_avx2(float *y, const float *a, int64_t rows, int64_t n, const float *x)
{
	int64_t j = 0;

	for (; j + 4 <= rows && n >= 8; j += 4) {
		const float *r = a + j * n;
		__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
		int64_t i = 0;
		for (; i + 8 <= n; i += 8) {
			const __m256 v = _mm256_loadu_ps(x + i);
			s0 = _mm256_fmadd_ps(_mm256_loadu_ps(r + i), v, s0);
			s1 = _mm256_fmadd_ps(_mm256_loadu_ps(r + n + i), v, s1);
			s2 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 2 * n + i), v, s2);
			s3 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 3 * n + i), v, s3);
		}
		/* lane k of each 128-bit half: a part of row k's sum */
		const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(s0, s1), _mm256_hadd_ps(s2, s3));
		__m128 sum = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
		for (; i < n; i++)
			sum = _mm_add_ps(sum, _mm_mul_ps(_mm_set_ps(r[3 * n + i], r[2 * n + i], r[n + i], r[i]),
							 _mm_set1_ps(x[i])));
		_mm_storeu_ps(y + j, sum);
	}
	for (; j < rows; j++) {
		const float *r = a + j * n;
		__m256 s0 = _mm256_setzero_ps();
		int64_t i = 0;
		for (; i + 8 <= n; i += 8)
			s0 = _mm256_fmadd_ps(_mm256_loadu_ps(r + i), _mm256_loadu_ps(x + i), s0);
		float sum = hsum8(s0);
		for (; i < n; i++)
			sum += r[i] * x[i];
		y[j] = sum;
	}
}

/* Y kept in registers 32 floats at a time while the rows go by. */
static void mad_rows_avx2(float *y, const float *a, const float *p, int64_t rows, int64_t n)
{
	int64_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);
		__m256 y2 = _mm256_loadu_ps(y + i + 16), y3 = _mm256_loadu_ps(y + i + 24);
		for (int64_t j = 0; j < rows; j++) {
			if (p[j] == 0.0f)
				continue;
			const __m256 s = _mm256_set1_ps(p[j]);
			const float *r = a + j * n + i;
			y0 = _mm256_fmadd_ps(_mm256_loadu_ps(r), s, y0);
			y1 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 8), s, y1);
			y2 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 16), s, y2);
			y3 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 24), s, y3);
		}
		_mm256_storeu_ps(y + i, y0);
		_mm256_storeu_ps(y + i + 8, y1);
		_mm256_storeu_ps(y + i + 16, y2);
		_mm256_storeu_ps(y + i + 24, y3);
	}
	for (; i + 8 <= n; i += 8) {
		__m256 y0 = _mm256_loadu_ps(y + i);
		for (int64_t j = 0; j < rows; j++)
			if (p[j] != 0.0f)
				y0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j * n + i), _mm256_set1_ps(p[j]), y0);
		_mm256_storeu_ps(y + i, y0);
	}
	for (; i < n; i++)
		for (int64_t j = 0; j < rows; j++)
			if (p[j] != 0.0f)
				y[i] += p[j] * a[j * n + i];
}

static void from_f16_avx2(float *y, const uint16_t *x, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
	for (; i < n; i++)
		y[i] = _cvtsh_ss(x[i]);
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
	.dot_rows = dot_rows_avx2,
	.mad_rows = mad_rows_avx2,
	.from_f16 = from_f16_avx2,
};
