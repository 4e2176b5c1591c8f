/*
 * kquant-avx2.c - Q4_K x Q8_K, Q6_K x Q8_K and Q8_0 x Q8_0 dot products
 * with AVX2.
 *
 * Per super-block the integer part is exact and so equals the reference's
 * whatever the order of its additions; the float part is qg_kq_accum, the
 * reference's own step, and this file is built without contraction, so the
 * result is the portable kernel's bit for bit.
 *
 * vpmaddubsw multiplies unsigned codes by signed activations and adds
 * pairs into int16; it saturates, but never here: Q4_K codes are at most
 * 15 and Q6_K's (taken unsigned, 0..63) at most 63, so a pair is at most
 * 2 * 63 * 128 = 16128 in magnitude.  vpmaddwd by the sub-block's scale
 * (at most 127 in magnitude) then adds pairs of those into int32, and a
 * super-block's sum stays below 2^31 by far (256 * 63 * 128 * 128).
 *
 * Q6_K stores code + 32: sum((u - 32) * a) = sum(u * a) - 32 * sum(a), and
 * Q8_K's block sums are the sums of a over each 16 values, so the offset
 * costs one vpmaddwd of the sums by the scales per super-block.
 *
 * The one-row kernels and Q8_0's take their reductions and float part
 * from kquant-x86.h, which the AVX-512 VNNI family shares.  Many
 * activation rows against many weight rows go to the GEMM
 * (kquant-gemm-avx2.c) instead.
 */
#include "config.h"

#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "kquant-x86.h"
#include "kquant.h"

/* vpshufb controls: int16 element J of each 128-bit lane, everywhere in it */
static inline __m256i pick16(int j)
{
	return _mm256_set1_epi16((short)(0x0100 + 0x0202 * j));
}

/* int16 element J of the low lane, and J1 of the high lane, each across its lane */
static inline __m256i pick16_2(int j, int j1)
{
	return _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * j1)),
				_mm_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

/*
 * The exact integer sums of super-block W against R activation rows (row
 * r's block at A[r * NBA]): H[r] = hadd(isum, msum), as kq_x86_rows_q4_K
 * takes it.
 */
static inline __attribute__((always_inline)) void sums_q4_K(const struct qg_block_q4_K *w,
							    const struct qg_block_q8_K *a, int64_t nba, int R,
							    __m256i *h)
{
	const __m256i low4 = _mm256_set1_epi8(0x0f);
	__m128i sc, m16;
	__m256i isum[4];

	kq_x86_q4k_unpack(w->scales, &sc, &m16);
	/* the eight scales as int16 in both lanes; vpshufb spreads one at a time */
	const __m256i s16 = _mm256_broadcastsi128_si256(sc);
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
		isum[r] = _mm256_setzero_si256();
	#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		const __m256i q = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * c));
		const __m256i lo = _mm256_and_si256(q, low4);
		const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
		const __m256i s0 = _mm256_shuffle_epi8(s16, pick16(2 * c));
		const __m256i s1 = _mm256_shuffle_epi8(s16, pick16(2 * c + 1));
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			const struct qg_block_q8_K *ab = &a[r * nba];
			const __m256i a0 = _mm256_loadu_si256((const __m256i *)(ab->qs + 64 * c));
			const __m256i a1 = _mm256_loadu_si256((const __m256i *)(ab->qs + 64 * c + 32));
			const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a0), s0);
			const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a1), s1);
			isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(p0, p1));
		}
	}
	/* sum of min_j times the two block sums of sub-block j: each min twice, against 16 sums */
	const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++) {
		const __m256i msum = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[r * nba].bsums), mins);
		h[r] = _mm256_hadd_epi32(isum[r], msum);
	}
}

/*
 * Super-block W against four activation rows (row r's block at
 * A[r * NBA]), rows paired so that one vpmaddwd by the scale serves two:
 * vphaddw first adds neighbouring int16 products of each row (a lane of
 * vpmaddubsw is at most 2 * 15 * 128 = 3840 in magnitude, two of them
 * 7680: no wrap), leaving rows 2p and 2p + 1 side by side.  Y[p] gets
 * the exact isum(2p), isum(2p + 1), msum(2p), msum(2p + 1).
 */
static inline __attribute__((always_inline)) void sums4_q4_K(const struct qg_block_q4_K *w,
							     const struct qg_block_q8_K *a, int64_t nba, __m128i *y)
{
	const __m256i low4 = _mm256_set1_epi8(0x0f);
	__m128i sc, m16;

	kq_x86_q4k_unpack(w->scales, &sc, &m16);
	const __m256i s16 = _mm256_broadcastsi128_si256(sc);
	__m256i isum[2] = { _mm256_setzero_si256(), _mm256_setzero_si256() };
	#pragma GCC unroll 8
	for (int j = 0; j < 8; j++) {
		/* sub-block j: the low nibbles of bytes 32 (j / 2) .. + 31 for even j, the high for odd */
		const __m256i q = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * (j / 2)));
		const __m256i u = _mm256_and_si256(j & 1 ? _mm256_srli_epi16(q, 4) : q, low4);
		const __m256i sj = _mm256_shuffle_epi8(s16, pick16(j));
		#pragma GCC unroll 2
		for (int p = 0; p < 2; p++) {
			const __m256i a0 = _mm256_loadu_si256((const __m256i *)(a[2 * p * nba].qs + 32 * j));
			const __m256i a1 = _mm256_loadu_si256((const __m256i *)(a[(2 * p + 1) * nba].qs + 32 * j));
			const __m256i pp = _mm256_hadd_epi16(_mm256_maddubs_epi16(u, a0), _mm256_maddubs_epi16(u, a1));
			isum[p] = _mm256_add_epi32(isum[p], _mm256_madd_epi16(pp, sj));
		}
	}
	/* mins 0-3 twice in the low lane, 4-7 twice in the high: against both rows' pair sums */
	const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi64(m16, m16), _mm_unpacklo_epi64(m16, m16));
	#pragma GCC unroll 2
	for (int p = 0; p < 2; p++) {
		const __m256i b0 = _mm256_loadu_si256((const __m256i *)a[2 * p * nba].bsums);
		const __m256i b1 = _mm256_loadu_si256((const __m256i *)a[(2 * p + 1) * nba].bsums);
		const __m256i msum = _mm256_madd_epi16(_mm256_hadd_epi16(b0, b1), mins);
		const __m256i h = _mm256_hadd_epi32(isum[p], msum);
		y[p] = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
	}
}

/*
 * Four activation rows against one Q4_K weight row with sums4_q4_K, four
 * super-blocks at a time: their products dw * isum and dm * msum for a
 * pair of rows in two vector multiplies, then added to each row's sum in
 * the reference's order, so OUT[r] is the one-row kernel's bit for bit.
 */
static void dot4_q4_K(int64_t k, const void *restrict vw, const void *restrict va, int64_t nba, float *restrict out)
{
	const struct qg_block_q4_K *w = vw;
	const struct qg_block_q8_K *a = va;
	const int64_t nsb = k / QG_QK_K;
	float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	int64_t b = 0;

	for (; b + KQ_X86_GROUP4 <= nsb; b += KQ_X86_GROUP4) {
		__m128i y[KQ_X86_GROUP4][2];
		#pragma GCC unroll 4
		for (int j = 0; j < KQ_X86_GROUP4; j++)
			sums4_q4_K(&w[b + j], &a[b + j], nba, y[j]);
		/* d0 dmin0 d1 dmin1 ...; spread to d_j d_j dmin_j dmin_j, as the sums lie */
		const __m256 wdm = _mm256_cvtph_ps(kq_x86_gather4_u32(&w[b].d, sizeof *w));
		const __m256 f01 = _mm256_permutevar8x32_ps(wdm, _mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0));
		const __m256 f23 = _mm256_permutevar8x32_ps(wdm, _mm256_set_epi32(7, 7, 6, 6, 5, 5, 4, 4));
		#pragma GCC unroll 2
		for (int p = 0; p < 2; p++) {
			const struct qg_block_q8_K *a0 = &a[2 * p * nba + b], *a1 = &a[(2 * p + 1) * nba + b];
			const __m256 ad01 = _mm256_set_ps(a1[1].d, a0[1].d, a1[1].d, a0[1].d, a1[0].d, a0[0].d, a1[0].d,
							  a0[0].d);
			const __m256 ad23 = _mm256_set_ps(a1[3].d, a0[3].d, a1[3].d, a0[3].d, a1[2].d, a0[2].d, a1[2].d,
							  a0[2].d);
			float q[16];
			_mm256_storeu_ps(q, _mm256_mul_ps(_mm256_mul_ps(f01, ad01),
							  _mm256_cvtepi32_ps(_mm256_set_m128i(y[1][p], y[0][p]))));
			_mm256_storeu_ps(q + 8, _mm256_mul_ps(_mm256_mul_ps(f23, ad23),
							      _mm256_cvtepi32_ps(_mm256_set_m128i(y[3][p], y[2][p]))));
			#pragma GCC unroll 2
			for (int r = 0; r < 2; r++) {
				float s = acc[2 * p + r];
				for (int j = 0; j < KQ_X86_GROUP4; j++) {
					s += q[4 * j + r];
					s -= q[4 * j + 2 + r];
				}
				acc[2 * p + r] = s;
			}
		}
	}
	for (; b < nsb; b++) {
		__m128i y[2];
		sums4_q4_K(&w[b], &a[b], nba, y);
		const float wd = kq_x86_h2f(w[b].d), wm = kq_x86_h2f(w[b].dmin);
		int32_t v[2][4];
		memcpy(v, y, sizeof v);
		for (int r = 0; r < 4; r++) {
			const float ad = a[r * nba + b].d;
			acc[r] = qg_kq_accum(acc[r], wd * ad, wm * ad, v[r / 2][r % 2], v[r / 2][2 + r % 2]);
		}
	}
	for (int r = 0; r < 4; r++)
		out[r] = acc[r];
}

/*
 * The exact integer sum of super-block W against R activation rows, per
 * lane: TOT[r]'s lanes add up to sum_j scale_j * sum((u - 32) * a) over
 * the sixteen sub-blocks, the -32 taken through Q8_K's block sums.
 */
static inline __attribute__((always_inline)) void sums_q6_K(const struct qg_block_q6_K *w,
							    const struct qg_block_q8_K *a, int64_t nba, int R,
							    __m256i *tot)
{
	const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
	__m256i isum[4];

	#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
		isum[r] = _mm256_setzero_si256();
	/* the sixteen scales as int16: 0-7 in the low lane, 8-15 in the high */
	const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
	#pragma GCC unroll 4
	for (int h = 0; h < 2; h++) {
		/* scales 8h .. 8h + 7 in both lanes */
		const __m256i sh = h ? _mm256_permute4x64_epi64(s16, 0xee) : _mm256_permute4x64_epi64(s16, 0x44);
		const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(w->ql + 64 * h));
		const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(w->ql + 64 * h + 32));
		const __m256i qh = _mm256_loadu_si256((const __m256i *)(w->qh + 32 * h));
		#pragma GCC unroll 4
		for (int q = 0; q < 4; q++) {
			/* codes of values 32q .. 32q + 31 of this half, unsigned (code + 32), made where used */
			const __m256i lq = q & 1 ? ql1 : ql0;
			const __m256i lo = q < 2 ? _mm256_and_si256(lq, low4) : _mm256_and_si256(_mm256_srli_epi16(lq, 4), low4);
			const __m256i hq = q == 0 ? _mm256_slli_epi16(qh, 4) : q == 1 ? _mm256_slli_epi16(qh, 2)
					 : q == 2 ? qh : _mm256_srli_epi16(qh, 2);
			const __m256i u = _mm256_or_si256(lo, _mm256_and_si256(hq, bits45));
			const int j = 8 * h + 2 * q;	/* sub-blocks j (low lane) and j + 1 (high lane) */
			const __m256i s = _mm256_shuffle_epi8(sh, pick16_2(j - 8 * h, j + 1 - 8 * h));
			#pragma GCC unroll 4
			for (int r = 0; r < R; r++) {
				const __m256i av = _mm256_loadu_si256((const __m256i *)(a[r * nba].qs + 128 * h + 32 * q));
				isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(u, av), s));
			}
		}
	}
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++) {
		/* minus 32 * sum_j scale_j * bsum_j, lane by lane */
		const __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[r * nba].bsums), s16);
		tot[r] = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(off, 5));
	}
}

/*
 * Super-block W against four activation rows, paired as sums4_q4_K pairs
 * them: a lane of vpmaddubsw is at most 2 * 63 * 128 = 16128 here, two
 * of them 32256, still inside int16.  Y[p] gets the exact total (the -32
 * included) of row 2p, of row 2p + 1, each split over two lanes.
 */
static inline __attribute__((always_inline)) void sums4_q6_K(const struct qg_block_q6_K *w,
							     const struct qg_block_q8_K *a, int64_t nba, __m128i *y)
{
	const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
	__m256i isum[2] = { _mm256_setzero_si256(), _mm256_setzero_si256() };
	const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));

	#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		const __m256i sh = h ? _mm256_permute4x64_epi64(s16, 0xee) : _mm256_permute4x64_epi64(s16, 0x44);
		const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(w->ql + 64 * h));
		const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(w->ql + 64 * h + 32));
		const __m256i qh = _mm256_loadu_si256((const __m256i *)(w->qh + 32 * h));
		#pragma GCC unroll 4
		for (int q = 0; q < 4; q++) {
			const __m256i lq = q & 1 ? ql1 : ql0;
			const __m256i lo = q < 2 ? _mm256_and_si256(lq, low4) : _mm256_and_si256(_mm256_srli_epi16(lq, 4), low4);
			const __m256i hq = q == 0 ? _mm256_slli_epi16(qh, 4) : q == 1 ? _mm256_slli_epi16(qh, 2)
					 : q == 2 ? qh : _mm256_srli_epi16(qh, 2);
			const __m256i u = _mm256_or_si256(lo, _mm256_and_si256(hq, bits45));
			const int j = 2 * q;	/* sub-blocks 8h + j (low lane) and 8h + j + 1 (high lane) */
			const __m256i s = _mm256_shuffle_epi8(sh, pick16_2(j, j + 1));
			#pragma GCC unroll 2
			for (int p = 0; p < 2; p++) {
				const __m256i a0 = _mm256_loadu_si256((const __m256i *)(a[2 * p * nba].qs + 128 * h + 32 * q));
				const __m256i a1 =
					_mm256_loadu_si256((const __m256i *)(a[(2 * p + 1) * nba].qs + 128 * h + 32 * q));
				const __m256i pp = _mm256_hadd_epi16(_mm256_maddubs_epi16(u, a0), _mm256_maddubs_epi16(u, a1));
				isum[p] = _mm256_add_epi32(isum[p], _mm256_madd_epi16(pp, s));
			}
		}
	}
	#pragma GCC unroll 2
	for (int p = 0; p < 2; p++) {
		/* minus 32 * sum_j scale_j * bsum_j, laid out as the pair's sums are */
		const __m256i o0 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[2 * p * nba].bsums), s16);
		const __m256i o1 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[(2 * p + 1) * nba].bsums), s16);
		const __m256i t = _mm256_sub_epi32(isum[p], _mm256_slli_epi32(_mm256_hadd_epi32(o0, o1), 5));
		y[p] = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
	}
}

/* Four activation rows against one Q6_K weight row, as dot4_q4_K does for Q4_K, eight super-blocks at a time. */
static void dot4_q6_K(int64_t k, const void *restrict vw, const void *restrict va, int64_t nba, float *restrict out)
{
	const struct qg_block_q6_K *w = vw;
	const struct qg_block_q8_K *a = va;
	const int64_t nsb = k / QG_QK_K;
	float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	int64_t b = 0;

	for (; b + KQ_X86_GROUP6 <= nsb; b += KQ_X86_GROUP6) {
		__m128i y[KQ_X86_GROUP6][2];
		#pragma GCC unroll 8
		for (int j = 0; j < KQ_X86_GROUP6; j++)
			sums4_q6_K(&w[b + j], &a[b + j], nba, y[j]);
		const __m256 wd = _mm256_cvtph_ps(kq_x86_gather8_u16(&w[b].d, sizeof *w));
		/* d_j twice, as hadd leaves each block's two rows side by side */
		const __m256 f0 = _mm256_permutevar8x32_ps(wd, _mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0));
		const __m256 f1 = _mm256_permutevar8x32_ps(wd, _mm256_set_epi32(7, 7, 6, 6, 5, 5, 4, 4));
		#pragma GCC unroll 2
		for (int p = 0; p < 2; p++) {
			const struct qg_block_q8_K *a0 = &a[2 * p * nba + b], *a1 = &a[(2 * p + 1) * nba + b];
			/* block j's two rows, blocks 0-3 and 4-7 */
			const __m256i t0 = _mm256_set_m128i(_mm_hadd_epi32(y[2][p], y[3][p]), _mm_hadd_epi32(y[0][p], y[1][p]));
			const __m256i t1 = _mm256_set_m128i(_mm_hadd_epi32(y[6][p], y[7][p]), _mm_hadd_epi32(y[4][p], y[5][p]));
			const __m256 ad0 = _mm256_set_ps(a1[3].d, a0[3].d, a1[2].d, a0[2].d, a1[1].d, a0[1].d, a1[0].d,
							 a0[0].d);
			const __m256 ad1 = _mm256_set_ps(a1[7].d, a0[7].d, a1[6].d, a0[6].d, a1[5].d, a0[5].d, a1[4].d,
							 a0[4].d);
			float q[16];
			_mm256_storeu_ps(q, _mm256_mul_ps(_mm256_mul_ps(f0, ad0), _mm256_cvtepi32_ps(t0)));
			_mm256_storeu_ps(q + 8, _mm256_mul_ps(_mm256_mul_ps(f1, ad1), _mm256_cvtepi32_ps(t1)));
			#pragma GCC unroll 2
			for (int r = 0; r < 2; r++) {
				float s = acc[2 * p + r];
				for (int j = 0; j < KQ_X86_GROUP6; j++)
					s += q[2 * j + r];
				acc[2 * p + r] = s;
			}
		}
	}
	for (; b < nsb; b++) {
		__m128i y[2];
		sums4_q6_K(&w[b], &a[b], nba, y);
		const float wd = kq_x86_h2f(w[b].d);
		int32_t v[2][4];
		memcpy(v, y, sizeof v);
		for (int r = 0; r < 4; r++)
			acc[r] = qg_kq_accum(acc[r], wd * a[r * nba + b].d, 0.0f,
					     v[r / 2][2 * (r % 2)] + v[r / 2][2 * (r % 2) + 1], 0);
	}
	for (int r = 0; r < 4; r++)
		out[r] = acc[r];
}

/* --- Q8_0 x Q8_0 ------------------------------------------------------- */

/*
 * The exact int32 dot product of block W with R activation blocks (row
 * r's at A[r * NBA]), as eight int32 lanes each.  vpmaddubsw wants one
 * unsigned side: |w| (a code of -128 gives 128, still right unsigned)
 * against a with w's sign moved onto it.  An activation of -128 would
 * not survive the move, which is why the activations must be in
 * -127..127; a pair is then at most 2 * 128 * 127 in magnitude, inside
 * int16.
 */
static inline __attribute__((always_inline)) void sums_q8_0(const struct qg_block_q8_0 *w,
							    const struct qg_block_q8_0 *a, int64_t nba, int R,
							    __m256i *s)
{
	const __m256i wq = _mm256_loadu_si256((const __m256i *)w->qs);
	const __m256i wabs = _mm256_sign_epi8(wq, wq);

	#pragma GCC unroll 4
	for (int r = 0; r < R; r++) {
		const __m256i aq = _mm256_loadu_si256((const __m256i *)a[r * nba].qs);
		s[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(aq, wq)), _mm256_set1_epi16(1));
	}
}

KQ_X86_ENTRIES()

/* --- the Q4_K GEMV ------------------------------------------------------ */

/*
 * One activation row against many Q4_K weight rows, four weight rows at a
 * time: the activations and their block sums are loaded once for the
 * four, the four rows' scales and mins are unpacked two rows to a vector
 * (kq_x86_q4k_unpack2), and their integer sums are reduced and scaled
 * together, two
 * super-blocks at a time, the float part running over the four rows side
 * by side (lane r: row r) in the reference's order.
 *
 * A row's msum is sum_j min_j * P_j, P_j the sum of block sums 2j and
 * 2j + 1: one vpmaddwd of two rows' mins against P in both 128-bit lanes.
 */

/*
 * Super-block W (row r's at W + r * WS) of four weight rows against
 * activation block A: I[r]'s eight int32 lanes add up to row r's isum;
 * MX[p]'s 128-bit lane e holds four partial sums of row 2p + e's msum;
 * HEAD[p] rows 2p and 2p + 1's heads, one to a 128-bit lane.
 */
static inline __attribute__((always_inline)) void rows4_sb_q4_K(const uint8_t *w, size_t ws,
								 const struct qg_block_q8_K *a, __m256i *I,
								 __m256i *MX, __m256i *head)
{
	const __m256i low4 = _mm256_set1_epi8(0x0f);
	/* P_0-7 as int16 in both 128-bit lanes */
	const __m256i p32 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), _mm256_set1_epi16(1));
	const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(p32, p32), 0x88);

	#pragma GCC unroll 2
	for (int pr = 0; pr < 2; pr++) {
		const uint8_t *w0 = w + (size_t)(2 * pr) * ws;
		head[pr] = _mm256_loadu2_m128i((const __m128i *)(w0 + ws), (const __m128i *)w0);
		/* 128-bit lane e: row 2pr + e's scales (S) and mins as int16 */
		const __m256i u = kq_x86_q4k_unpack2(head[pr]);
		const __m256i S = _mm256_unpacklo_epi8(u, _mm256_setzero_si256());
		MX[pr] = _mm256_madd_epi16(_mm256_unpackhi_epi8(u, _mm256_setzero_si256()), p);
		#pragma GCC unroll 2
		for (int e = 0; e < 2; e++) {
			const uint8_t *qs = w0 + (size_t)e * ws + KQ_X86_Q4K_HEAD;
			/* the row's eight scales in both 128-bit lanes; vpshufb spreads one at a time */
			const __m256i s16 = _mm256_permute4x64_epi64(S, e ? 0xee : 0x44);
			__m256i acc = _mm256_setzero_si256();
			#pragma GCC unroll 4
			for (int c = 0; c < 4; c++) {
				const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
				const __m256i a0 = _mm256_loadu_si256((const __m256i *)(a->qs + 64 * c));
				const __m256i a1 = _mm256_loadu_si256((const __m256i *)(a->qs + 64 * c + 32));
				const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(q, low4), a0),
								     _mm256_shuffle_epi8(s16, pick16(2 * c)));
				const __m256i p1 = _mm256_madd_epi16(
					_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), a1),
					_mm256_shuffle_epi8(s16, pick16(2 * c + 1)));
				acc = _mm256_add_epi32(acc, _mm256_add_epi32(p0, p1));
			}
			I[2 * pr + e] = acc;
		}
	}
}

/* Four rows' eight int32 lanes each (I) to four partial sums a row: lane r of each 128-bit lane, row r's. */
static inline __attribute__((always_inline)) __m256i join4(const __m256i *I)
{
	const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(I[0], I[1]), _mm256_unpackhi_epi32(I[0], I[1]));
	const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(I[2], I[3]), _mm256_unpackhi_epi32(I[2], I[3]));

	return _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
}

/*
 * rows4_sb_q4_K's MX (128-bit lane e of MX[p]: four partial sums of row
 * 2p + e) to the four rows' whole msums, lane r row r's.
 */
static inline __attribute__((always_inline)) __m128i msum4(const __m256i *MX)
{
	__m256i t = _mm256_add_epi32(_mm256_unpacklo_epi32(MX[0], MX[1]), _mm256_unpackhi_epi32(MX[0], MX[1]));

	/* low lane: rows 0 and 2 twice over, high lane: rows 1 and 3 */
	t = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, 0x4e));
	return _mm_unpacklo_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

/* The four rows' d and dmin (int32 lane r: row r's, d in the low half) from their heads, two to a vector. */
static inline __attribute__((always_inline)) __m128i heads_dd(const __m256i *head)
{
	const __m256i t = _mm256_unpacklo_epi32(head[0], head[1]);	/* rows 0, 2 low; 1, 3 high */

	return _mm_unpacklo_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

/*
 * Four Q4_K weight rows (row r at W + r * WS) against activation row A of
 * NSB super-blocks: S[r] gets the one-row kernel's result bit for bit.
 * Two super-blocks at a time: their eight (super-block, row) isums and
 * msums side by side, dw * isum and dm * msum formed in one vector
 * multiply each (IEEE products, the scalar ones' bits) and added to the
 * four rows' sums, the first super-block's then the second's; the last
 * super-block of an odd count alone, the same steps in four lanes.  NEXT:
 * the next four rows (NULL: none), asked for ahead.
 */
static void rows4_q4_K(int64_t nsb, const uint8_t *w, size_t ws, const struct qg_block_q8_K *a, float *s,
		       const uint8_t *next)
{
	const __m128i lo16 = _mm_set1_epi32(0xffff);
	__m128 acc = _mm_setzero_ps();
	int64_t b = 0;

	for (; b < nsb; b += 2) {
		const int two = b + 1 < nsb;
		__m256i I[2][4], MX[2][2], head[2][2];
		__m128i isum[2], msum[2], dd[2];
		#pragma GCC unroll 2
		for (int j = 0; j < 2; j++) {
			if (j && !two)
				break;
			const size_t off = (size_t)(b + j) * sizeof(struct qg_block_q4_K);
			kq_x86_q4k_prefetch4(next ? next + off : NULL, ws);
			rows4_sb_q4_K(w + off, ws, &a[b + j], I[j], MX[j], head[j]);
			const __m256i u = join4(I[j]);
			isum[j] = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
			msum[j] = msum4(MX[j]);
			dd[j] = heads_dd(head[j]);
		}
		if (!two)
			isum[1] = msum[1] = dd[1] = _mm_setzero_si128();
		/* lanes 0-3: super-block b's rows, 4-7: b + 1's */
		const __m256 ad = _mm256_set_m128(_mm_set1_ps(two ? a[b + 1].d : 0.0f), _mm_set1_ps(a[b].d));
		const __m256 dw = _mm256_cvtph_ps(_mm_packus_epi32(_mm_and_si128(dd[0], lo16), _mm_and_si128(dd[1], lo16)));
		const __m256 dm = _mm256_cvtph_ps(_mm_packus_epi32(_mm_srli_epi32(dd[0], 16), _mm_srli_epi32(dd[1], 16)));
		const __m256 pi = _mm256_mul_ps(_mm256_mul_ps(dw, ad), _mm256_cvtepi32_ps(_mm256_set_m128i(isum[1], isum[0])));
		const __m256 pm = _mm256_mul_ps(_mm256_mul_ps(dm, ad), _mm256_cvtepi32_ps(_mm256_set_m128i(msum[1], msum[0])));
		acc = _mm_sub_ps(_mm_add_ps(acc, _mm256_castps256_ps128(pi)), _mm256_castps256_ps128(pm));
		if (two)
			acc = _mm_sub_ps(_mm_add_ps(acc, _mm256_extractf128_ps(pi, 1)), _mm256_extractf128_ps(pm, 1));
	}
	_mm_storeu_ps(s, acc);
}

/* qg_kq_gemv_fn for Q4_K: rows4_q4_K on each four weight rows, dot_q4_K on the last NC % 4. */
static void gemv_q4_K(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
		      const void *restrict a)
{
	const uint8_t *wb = w;
	int c = 0;

	for (; c + 4 <= nc; c += 4) {
		const uint8_t *wc = wb + (size_t)c * wstride;
		rows4_q4_K(k / QG_QK_K, wc, wstride, a, s + c, c + 8 <= nc ? wc + 4 * wstride : NULL);
	}
	for (; c < nc; c++)
		s[c] = dot_q4_K(k, wb + (size_t)c * wstride, a);
}

const struct qg_kq_kernel qg_kq_avx2 = {
	.name = "avx2 k-quants", .family = QG_KF_AVX2,
	.q4_K = dot_q4_K, .q6_K = dot_q6_K,
	.q4_K_x4 = dot4_q4_K, .q6_K_x4 = dot4_q6_K,
	.q4_K_gemv = gemv_q4_K, .x4_before_gemv = 1,
	.q8_0 = dot_q8_0, .q8_0_x4 = dot4_q8_0,
	.q4_K_gemm = qg_kq_gemm_q4_K_avx2, .q6_K_gemm = qg_kq_gemm_q6_K_avx2,
	.q8_0_gemm = qg_kq_gemm_q8_0_avx2,
	.gemm_rows = 8,	/* bench-mulmat at n = 8: 1.18x (Q4_K) and 1.14x (Q6_K) the four-row kernel, Q8_0 even */
};
