/*
 * kquant-x86.h - what the AVX2 and AVX-512 VNNI K-quant kernels share:
 * unpacking a Q4_K super-block's scales and mins, the reductions, and the
 * float part of R activation rows against one Q4_K, Q6_K or Q8_0 weight
 * row, written once around a family's integer sums.
 *
 * Included by files built with different -m flags (AVX2, or AVX2 plus
 * AVX-512 F/BW/VL/DQ/VNNI), so only AVX2, FMA and F16C may be used here,
 * and by files built without contraction (-ffp-contract=off): the float
 * part is qg_kq_accum's steps, each product and sum rounded alone.
 *
 * A family supplies, per super-block W and R activation rows (row r's
 * block at A[r * NBA]), the exact integer sums in one of two shapes:
 *
 *   kq_x86_sums_q4_K_fn: H[r] = hadd(isum, msum), two int32 vectors of
 *     eight lanes each whose lanes add up to the super-block's isum and
 *     msum (kquant.h), as _mm256_hadd_epi32 leaves them;
 *   kq_x86_sums_q6_K_fn: TOT[r], eight int32 lanes adding up to the
 *     super-block's isum (the -32 of the codes included);
 *   kq_x86_sums_q8_0_fn: S[r], eight int32 lanes adding up to the Q8_0
 *     block's dot product (W and A each one block_q8_0 here).
 *
 * Every integer sum here is exact whatever the order of its additions, so
 * the driver's reductions give the reference's isum and msum.
 */
#ifndef QG_KQUANT_X86_H
#define QG_KQUANT_X86_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "kquant.h"

#define KQ_X86_INLINE inline __attribute__((always_inline))

/* kquant-gemm-avx512vnni.c: the family's GEMMs */
void qg_kq_gemm_q4_K_avx512vnni(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride,
				int nc, const void *restrict a, int nr);
void qg_kq_gemm_q6_K_avx512vnni(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride,
				int nc, const void *restrict a, int nr);
void qg_kq_gemm_q8_0_avx512vnni(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride,
				int nc, const void *restrict a, const struct qg_q8_0_aux *restrict aux, int nr);

/* kquant-gemm-avx2.c: the AVX2 family's */
void qg_kq_gemm_q4_K_avx2(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride, int nc,
			  const void *restrict a, int nr);
void qg_kq_gemm_q6_K_avx2(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride, int nc,
			  const void *restrict a, int nr);
void qg_kq_gemm_q8_0_avx2(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride, int nc,
			  const void *restrict a, const struct qg_q8_0_aux *restrict aux, int nr);

static KQ_X86_INLINE int32_t kq_x86_hsum_epi32(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));

	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtsi128_si32(s);
}

/*
 * The eight 6-bit scales (SC) and mins (M) of a Q4_K super-block as int16,
 * a word at a time: bytes 0-3 and 4-7 hold scales and mins 0-3 in their
 * low six bits and the top two bits of 4-7 in their high two; bytes 8-11
 * hold the low nibbles of scales 4-7 and, above them, of mins 4-7.
 */
static KQ_X86_INLINE void kq_x86_q4k_unpack(const uint8_t *s, __m128i *sc, __m128i *m)
{
	uint32_t u0, u1, u2;

	memcpy(&u0, s, 4);
	memcpy(&u1, s + 4, 4);
	memcpy(&u2, s + 8, 4);
	/* kept in registers: bytes stored and loaded back wider would stall the load */
	const uint64_t sc8 = (u0 & 0x3f3f3f3fu) | (uint64_t)((u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4) << 32;
	const uint64_t m8 = (u1 & 0x3f3f3f3fu) |
			    (uint64_t)(((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4) << 32;
	*sc = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc8));
	*m = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m8));
}

/* Bytes of a block_q4_K before qs, its head: d, dmin and the 12 bytes of scales and mins. */
#define KQ_X86_Q4K_HEAD 16

/*
 * The scales and mins of two Q4_K super-blocks from their heads, one to a
 * 128-bit lane: each lane gets s_0 .. s_7 then m_0 .. m_7 as bytes, the
 * values kq_x86_q4k_unpack gives.  Scale bytes v0-3 (head bytes 4-7)
 * hold s_0-3 and the top bits of s_4-7, v4-7 hold m_0-3 and the top bits
 * of m_4-7, v8-11 the low nibbles of s_4-7 and, above them, of m_4-7.
 * With x = v0-3, v8-11, v4-7, v8-11 the low bits are x masked, the high
 * nibbles of the last four x shifted down by 4, and the top bits of v0-3
 * and v4-7 x shifted up by 30 in each 64-bit half (bits 6-7 of byte i to
 * bits 4-5 of byte i + 4).  The GEMVs unpack several rows' heads at once
 * this way.
 */
static KQ_X86_INLINE __m256i kq_x86_q4k_unpack2(__m256i head)
{
	const __m256i pick = _mm256_broadcastsi128_si256(_mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13,
								      14, 15));
	const __m256i low = _mm256_broadcastsi128_si256(_mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0));
	const __m256i nib = _mm256_broadcastsi128_si256(_mm_setr_epi32(0, 0, 0, 0x0f0f0f0f));
	const __m256i top = _mm256_broadcastsi128_si256(_mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
	const __m256i x = _mm256_shuffle_epi8(head, pick);
	const __m256i t = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), nib), _mm256_and_si256(x, low));

	return _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi64(x, 30), top), t);
}

/*
 * The GEMVs read four weight rows side by side, four streams WS apart
 * that the hardware prefetchers follow badly (from memory at half the
 * rate of one row at a time), so they ask for the same super-block of
 * the next four rows ahead: NEXT, its 144 bytes in each row, into the
 * second-level cache.  NULL: no next rows.
 */
static KQ_X86_INLINE void kq_x86_q4k_prefetch4(const uint8_t *next, size_t ws)
{
	if (!next)
		return;
	#pragma GCC unroll 4
	for (int r = 0; r < 4; r++)
		#pragma GCC unroll 3
		for (int l = 0; l < 3; l++)
			_mm_prefetch((const char *)(next + (size_t)r * ws + 64 * l), _MM_HINT_T1);
}

/* An fp16 scale in float: exact either way, so F16C gives the portable code's value. */
static KQ_X86_INLINE float kq_x86_h2f(qg_fp16 h)
{
	return _cvtsh_ss(h);
}

/*
 * Scales gathered into a vector from registers: stored one by one and
 * loaded back whole, they would wait for the stores to retire (no store
 * forwarding across several stores).
 */
static KQ_X86_INLINE __m128i kq_x86_gather4_u32(const void *p, size_t stride)
{
	const uint8_t *b = p;
	uint32_t v[4];

	for (int j = 0; j < 4; j++)
		memcpy(&v[j], b + stride * (size_t)j, 4);
	return _mm_set_epi32((int)v[3], (int)v[2], (int)v[1], (int)v[0]);
}

static KQ_X86_INLINE __m128i kq_x86_gather8_u16(const void *p, size_t stride)
{
	const uint8_t *b = p;
	uint16_t v[8];

	for (int j = 0; j < 8; j++)
		memcpy(&v[j], b + stride * (size_t)j, 2);
	return _mm_set_epi16((short)v[7], (short)v[6], (short)v[5], (short)v[4], (short)v[3], (short)v[2],
			     (short)v[1], (short)v[0]);
}

/*
 * Four super-blocks' sums, reduced together: H[j] is hadd(isum, msum) of
 * super-block j (its partial sums in int32 lanes), and the result holds
 * isum0, msum0, isum1, msum1, ... isum3, msum3 in order.  One reduction
 * for four super-blocks instead of one each.
 */
static KQ_X86_INLINE __m256i kq_x86_reduce4(const __m256i *h)
{
	const __m256i a = _mm256_hadd_epi32(h[0], h[1]), b = _mm256_hadd_epi32(h[2], h[3]);

	return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

/* Super-blocks met per reduction: Q4_K (kq_x86_reduce4), Q6_K (four pairs); Q8_0 blocks. */
#define KQ_X86_GROUP4 4
#define KQ_X86_GROUP6 8
#define KQ_X86_GROUP8 8

typedef void (*kq_x86_sums_q4_K_fn)(const struct qg_block_q4_K *w, const struct qg_block_q8_K *a, int64_t nba,
				    int R, __m256i *h);
typedef void (*kq_x86_sums_q6_K_fn)(const struct qg_block_q6_K *w, const struct qg_block_q8_K *a, int64_t nba,
				    int R, __m256i *tot);
typedef void (*kq_x86_sums_q8_0_fn)(const struct qg_block_q8_0 *w, const struct qg_block_q8_0 *a, int64_t nba,
				    int R, __m256i *s);

/*
 * R activation rows (1 to 4; row r at A + r * NBA super-blocks) against
 * one Q4_K weight row of K values, SUMS giving each super-block's integer
 * sums for all R rows at once, so the weights are decoded once for them.
 * Each super-block's float step is qg_kq_accum's, taken in the same
 * order: the products dw * isum and dm * msum of four super-blocks are
 * formed in one vector multiply (IEEE products, the same bits as the
 * scalar ones) and added to the row's sum one by one, so OUT[r] is the
 * portable kernel's result bit for bit.
 */
static KQ_X86_INLINE void kq_x86_rows_q4_K(int64_t k, const struct qg_block_q4_K *w, const struct qg_block_q8_K *a,
					   int64_t nba, int R, float *out, kq_x86_sums_q4_K_fn sums)
{
	const int64_t nsb = k / QG_QK_K;
	float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	int64_t b = 0;

	for (; b + KQ_X86_GROUP4 <= nsb; b += KQ_X86_GROUP4) {
		__m256i h[4][KQ_X86_GROUP4];
		#pragma GCC unroll 4
		for (int j = 0; j < KQ_X86_GROUP4; j++) {
			__m256i hj[4];
			sums(&w[b + j], &a[b + j], nba, R, hj);
			#pragma GCC unroll 4
			for (int r = 0; r < R; r++)
				h[r][j] = hj[r];
		}
		/* d and dmin of the four super-blocks, in the order kq_x86_reduce4 leaves the sums */
		const __m256 wdm = _mm256_cvtph_ps(kq_x86_gather4_u32(&w[b].d, sizeof *w));
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			const struct qg_block_q8_K *ab = &a[r * nba + b];
			const __m256 ad = _mm256_set_ps(ab[3].d, ab[3].d, ab[2].d, ab[2].d, ab[1].d, ab[1].d, ab[0].d,
							ab[0].d);
			float p[8];
			_mm256_storeu_ps(p, _mm256_mul_ps(_mm256_mul_ps(wdm, ad),
							  _mm256_cvtepi32_ps(kq_x86_reduce4(h[r]))));
			float s = acc[r];
			#pragma GCC unroll 4
			for (int j = 0; j < KQ_X86_GROUP4; j++) {
				s += p[2 * j];
				s -= p[2 * j + 1];
			}
			acc[r] = s;
		}
	}
	for (; b < nsb; b++) {
		__m256i h[4];
		sums(&w[b], &a[b], nba, R, h);
		const float wd = kq_x86_h2f(w[b].d), wm = kq_x86_h2f(w[b].dmin);
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			const struct qg_block_q8_K *ab = &a[r * nba + b];
			__m128i t = _mm_add_epi32(_mm256_castsi256_si128(h[r]), _mm256_extracti128_si256(h[r], 1));
			t = _mm_hadd_epi32(t, t);
			acc[r] = qg_kq_accum(acc[r], wd * ab->d, wm * ab->d, _mm_cvtsi128_si32(t), _mm_extract_epi32(t, 1));
		}
	}
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
		out[r] = acc[r];
}

/*
 * R activation rows against one Q6_K weight row, as kq_x86_rows_q4_K does
 * for Q4_K: eight super-blocks' sums reduced at once, their dw * isum
 * formed in one vector multiply and added to the row's sum in order.  The
 * reference's second step subtracts 0 * 0, which leaves any sum as it is.
 */
static KQ_X86_INLINE void kq_x86_rows_q6_K(int64_t k, const struct qg_block_q6_K *w, const struct qg_block_q8_K *a,
					   int64_t nba, int R, float *out, kq_x86_sums_q6_K_fn sums)
{
	const int64_t nsb = k / QG_QK_K;
	float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	int64_t b = 0;

	for (; b + KQ_X86_GROUP6 <= nsb; b += KQ_X86_GROUP6) {
		__m256i h[4][KQ_X86_GROUP6 / 2];
		#pragma GCC unroll 4
		for (int j = 0; j < KQ_X86_GROUP6 / 2; j++) {
			__m256i t0[4], t1[4];
			sums(&w[b + 2 * j], &a[b + 2 * j], nba, R, t0);
			sums(&w[b + 2 * j + 1], &a[b + 2 * j + 1], nba, R, t1);
			#pragma GCC unroll 4
			for (int r = 0; r < R; r++)
				h[r][j] = _mm256_hadd_epi32(t0[r], t1[r]);
		}
		const __m256 wd = _mm256_cvtph_ps(kq_x86_gather8_u16(&w[b].d, sizeof *w));
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			const struct qg_block_q8_K *ab = &a[r * nba + b];
			const __m256 ad = _mm256_set_ps(ab[7].d, ab[6].d, ab[5].d, ab[4].d, ab[3].d, ab[2].d, ab[1].d,
							ab[0].d);
			float p[KQ_X86_GROUP6];
			_mm256_storeu_ps(p, _mm256_mul_ps(_mm256_mul_ps(wd, ad), _mm256_cvtepi32_ps(kq_x86_reduce4(h[r]))));
			float s = acc[r];
			for (int j = 0; j < KQ_X86_GROUP6; j++)
				s += p[j];
			acc[r] = s;
		}
	}
	for (; b < nsb; b++) {
		__m256i t[4];
		sums(&w[b], &a[b], nba, R, t);
		const float wd = kq_x86_h2f(w[b].d);
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
			acc[r] = qg_kq_accum(acc[r], wd * a[r * nba + b].d, 0.0f, kq_x86_hsum_epi32(t[r]), 0);
	}
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
		out[r] = acc[r];
}

/*
 * R activation rows against one Q8_0 weight row, SUMS giving each
 * block's exact int32 dot product for all R rows: eight blocks' integer
 * sums reduced at once, their products with (dw * da) formed in one
 * vector multiply, and added to the row's sum one by one in the
 * reference's order, so OUT[r] is qg_vec_dot_q8_0_q8_0's bit for bit.
 */
static KQ_X86_INLINE void kq_x86_rows_q8_0(int64_t k, const struct qg_block_q8_0 *w, const struct qg_block_q8_0 *a,
					   int64_t nba, int R, float *out, kq_x86_sums_q8_0_fn sums)
{
	const int64_t nb = k / QG_QK;
	float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	int64_t b = 0;

	for (; b + KQ_X86_GROUP8 <= nb; b += KQ_X86_GROUP8) {
		/* the reduction tree built as the blocks come, so that few sums are live at once */
		__m256i u[2][4];
		#pragma GCC unroll 2
		for (int hq = 0; hq < 2; hq++) {
			__m256i t[2][4];
			#pragma GCC unroll 2
			for (int pr = 0; pr < 2; pr++) {
				const int j = 4 * hq + 2 * pr;
				__m256i s0[4], s1[4];
				sums(&w[b + j], &a[b + j], nba, R, s0);
				sums(&w[b + j + 1], &a[b + j + 1], nba, R, s1);
				#pragma GCC unroll 4
				for (int r = 0; r < R; r++)
					t[pr][r] = _mm256_hadd_epi32(s0[r], s1[r]);
			}
			#pragma GCC unroll 4
			for (int r = 0; r < R; r++)
				u[hq][r] = _mm256_hadd_epi32(t[0][r], t[1][r]);
		}
		const __m256 dw = _mm256_cvtph_ps(kq_x86_gather8_u16(&w[b].d, sizeof *w));
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			const __m256 d = _mm256_mul_ps(dw, _mm256_cvtph_ps(kq_x86_gather8_u16(&a[r * nba + b].d, sizeof *a)));
			float p[KQ_X86_GROUP8];
			const __m256i tot = _mm256_add_epi32(_mm256_permute2x128_si256(u[0][r], u[1][r], 0x20),
							     _mm256_permute2x128_si256(u[0][r], u[1][r], 0x31));
			_mm256_storeu_ps(p, _mm256_mul_ps(_mm256_cvtepi32_ps(tot), d));
			float sum = acc[r];
			for (int j = 0; j < KQ_X86_GROUP8; j++)
				sum += p[j];
			acc[r] = sum;
		}
	}
	for (; b < nb; b++) {
		__m256i sj[4];
		sums(&w[b], &a[b], nba, R, sj);
		const float dw = kq_x86_h2f(w[b].d);
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
			acc[r] += (float)kq_x86_hsum_epi32(sj[r]) * (dw * kq_x86_h2f(a[r * nba + b].d));
	}
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
		out[r] = acc[r];
}

/* One-row kernel dot_TYPE (qg_kq_dot_fn): kq_x86_rows_TYPE around the family's sums_TYPE. */
#define KQ_X86_DOT(type)                                                                                 \
	static float dot_##type(int64_t k, const void *restrict w, const void *restrict a)               \
	{                                                                                                 \
		float out;                                                                                \
		kq_x86_rows_##type(k, w, a, 0, 1, &out, sums_##type);                                     \
		return out;                                                                               \
	}

/*
 * A family's one-row kernels (dot_q4_K, dot_q6_K, dot_q8_0) and its
 * four-row Q8_0 kernel (dot4_q8_0), the drivers above around its
 * sums_q4_K, sums_q6_K and sums_q8_0.
 */
#define KQ_X86_ENTRIES()                                                                                 \
	KQ_X86_DOT(q4_K)                                                                                  \
	KQ_X86_DOT(q6_K)                                                                                  \
	KQ_X86_DOT(q8_0)                                                                                  \
	static void dot4_q8_0(int64_t k, const void *restrict w, const void *restrict a, int64_t nba,    \
			      float *restrict out)                                                        \
	{                                                                                                 \
		kq_x86_rows_q8_0(k, w, a, nba, 4, out, sums_q8_0);                                        \
	}

#endif /* QG_KQUANT_X86_H */
