/*
 * kquant-avx512vnni.c - Q4_K x Q8_K, Q6_K x Q8_K and Q8_0 x Q8_0 dot
 * products with AVX-512 VNNI (vpdpbusd, vpdpwssd).
 *
 * Per super-block the integer part is exact and so equals the reference's
 * whatever the order of its additions; the float part takes qg_kq_accum's
 * steps in the reference's order, and this file is built without
 * contraction, so the result is the portable kernel's bit for bit.
 *
 * One zmm holds 64 codes, two Q4_K sub-blocks or four Q6_K ones, laid out
 * as the 64 activations they meet lie in a block_q8_K, so the activations
 * are loaded as they are and only the weights (decoded once for every row
 * met) are moved.  vpdpbusd multiplies the unsigned codes by the signed
 * activations and adds each four products into an int32 lane: at most
 * 4 * 15 * 128 = 7680 in magnitude for Q4_K, 4 * 63 * 128 = 32256 for
 * Q6_K's codes taken unsigned (0..63), so every lane fits int16.  Two such
 * vectors are therefore packed into one of int16 (vpackssdw, which never
 * saturates here) and one vpdpwssd multiplies every lane by its
 * sub-block's scale (Q4_K at most 63, Q6_K at most 128 in magnitude) and
 * adds the pairs into int32: 2 * 32256 * 128 per lane and step, and a
 * super-block's sum stays below 2^31 (256 * 63 * 128 * 128).
 *
 * Q6_K stores code + 32: sum((u - 32) * a) = sum(u * a) - 32 * sum(a),
 * and Q8_K's block sums are the sums of a over each 16 values, so the
 * offset is one vpmaddwd of the sums by -32 times the scales, which
 * starts the row's accumulator.
 *
 * The one-row kernels reduce and accumulate as kquant-x86.h does.  The
 * four-row ones meet the weight row with four activation rows, four
 * super-blocks at a time: each vpackssdw packs one chunk of two rows, so
 * that the pair sums of vpmaddwd and vpdpwssd already sort the lanes by
 * row, the sixteen (row, super-block) sums are reduced together by
 * shuffles of 128-bit lanes (vphaddd and a reduction per row cost more),
 * and the float part runs over the four rows side by side, each lane
 * taking the reference's steps in its order.  The Q4_K GEMV (one
 * activation row against many weight rows, at the end of the file) does
 * the same with four weight rows against one activation row.
 */
#include "config.h"

#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "kquant-x86.h"
#include "kquant.h"

/* vpternlogd truth table for (A & C) | B. */
#define TL_AND_OR 0xec

/*
 * A vector of 32 int16 counts: LO in the low 256 bits, HI in the high, so
 * one vpsrlvw / vpsllvw moves the two halves of a zmm by different amounts.
 */
static KQ_X86_INLINE __m512i shift_lo_hi(short lo, short hi)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(lo)), _mm256_set1_epi16(hi), 1);
}

/*
 * vpermw controls that spread scales over a packed pair of vpdpbusd
 * results.  vpackssdw puts, in 128-bit lane k, the four int32 lanes 4k ..
 * 4k + 3 of its first operand (int16 0-3 of the lane) beside those of its
 * second (4-7), so element 8k + i needs the scale of the sub-block that
 * lane 4k + i (i < 4) of the first operand, or 4k + i - 4 of the second,
 * belongs to.  PACK4(f, s) is one 128-bit lane of that: f four times, s
 * four times.
 */
#define PACK4(f, s) f, f, f, f, s, s, s, s

/*
 * Q4_K, chunks 2p and 2p + 1 (the scales 0..7 as int16): lanes 0-7 of
 * chunk c are sub-block 2c and lanes 8-15 sub-block 2c + 1.
 */
static const _Alignas(64) short q4k_scale_idx[2][32] = {
	{ PACK4(0, 2), PACK4(0, 2), PACK4(1, 3), PACK4(1, 3) },
	{ PACK4(4, 6), PACK4(4, 6), PACK4(5, 7), PACK4(5, 7) },
};

/*
 * Q6_K, the two chunks of half h (the scales 0..15 as int16): lanes
 * 4k .. 4k + 3 of the first are sub-block 8h + k, of the second 8h + 4 + k.
 */
static const _Alignas(64) short q6k_scale_idx[2][32] = {
	{ PACK4(0, 4), PACK4(1, 5), PACK4(2, 6), PACK4(3, 7) },
	{ PACK4(8, 12), PACK4(9, 13), PACK4(10, 14), PACK4(11, 15) },
};

/*
 * The four-row kernels pack one chunk's results of two rows instead (the
 * first row's in int16 0-3 of each 128-bit lane, the second's in 4-7), so
 * both halves of a lane take the same scale.  Q4_K chunk c: lanes 0-7
 * are sub-block 2c, lanes 8-15 sub-block 2c + 1.
 */
static const _Alignas(64) short q4k_chunk_idx[4][32] = {
	{ PACK4(0, 0), PACK4(0, 0), PACK4(1, 1), PACK4(1, 1) },
	{ PACK4(2, 2), PACK4(2, 2), PACK4(3, 3), PACK4(3, 3) },
	{ PACK4(4, 4), PACK4(4, 4), PACK4(5, 5), PACK4(5, 5) },
	{ PACK4(6, 6), PACK4(6, 6), PACK4(7, 7), PACK4(7, 7) },
};

/*
 * Q6_K chunk c: the first 64 values of half h = c / 2 (lanes 4k .. 4k + 3
 * sub-block 8h + k), then the next 64 (sub-block 8h + 4 + k).
 */
static const _Alignas(64) short q6k_chunk_idx[4][32] = {
	{ PACK4(0, 0), PACK4(1, 1), PACK4(2, 2), PACK4(3, 3) },
	{ PACK4(4, 4), PACK4(5, 5), PACK4(6, 6), PACK4(7, 7) },
	{ PACK4(8, 8), PACK4(9, 9), PACK4(10, 10), PACK4(11, 11) },
	{ PACK4(12, 12), PACK4(13, 13), PACK4(14, 14), PACK4(15, 15) },
};

/*
 * The Q4_K GEMV packs one chunk's results of two weight rows A and B (rows
 * 0 and 1 of four), and spreads their scales from S, in which int16 8r + j
 * is row r's scale j: chunk c = 2h + e (the low nibbles of qs bytes 64h ..
 * 64h + 63 for e = 0, the high for e = 1) has sub-block 4h + e in lanes
 * 0-7 and 4h + 2 + e in 8-15, row A's in int16 0-3 of each 128-bit lane
 * and B's in 4-7.  Rows 2 and 3 take the same control plus 16.
 */
static const _Alignas(64) short gemv_scale_idx[4][32] = {
	{ PACK4(0, 8), PACK4(0, 8), PACK4(2, 10), PACK4(2, 10) },
	{ PACK4(1, 9), PACK4(1, 9), PACK4(3, 11), PACK4(3, 11) },
	{ PACK4(4, 12), PACK4(4, 12), PACK4(6, 14), PACK4(6, 14) },
	{ PACK4(5, 13), PACK4(5, 13), PACK4(7, 15), PACK4(7, 15) },
};

#undef PACK4

/*
 * Sixteen int16 of each of two rows in the pair layout: 128-bit lane k
 * holds int16 4k .. 4k + 3 of X (first) then of Y, so that vpmaddwd
 * leaves X's sums in int32 lanes 0-1 of each 128-bit lane and Y's in 2-3.
 */
static KQ_X86_INLINE __m512i pair16(const void *x, const void *y)
{
	const __m512i idx = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);

	return _mm512_permutex2var_epi64(_mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)x)), idx,
					 _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)y)));
}

/*
 * Two vectors of int32 pair sums (each 128-bit lane: the first row's in
 * lanes 0-1, the second's in 2-3; rows 0, 1 and rows 2, 3) to one: in
 * 128-bit lane k, int32 lane r, a partial sum of row r, each of the
 * row's lanes counted once over the four 128-bit lanes.
 */
static KQ_X86_INLINE __m512i join_pairs(__m512i p01, __m512i p23)
{
	const __m512 a = _mm512_castsi512_ps(p01), b = _mm512_castsi512_ps(p23);

	return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(a, b, 0x88)),
				_mm512_castps_si512(_mm512_shuffle_ps(a, b, 0xdd)));
}

/*
 * The integer sums of Q4_K super-block W against R activation rows (row
 * r's block at A[r * NBA]): the sixteen int32 lanes of I[r] add up to
 * its isum and the eight of M[r] to its msum (kquant.h).
 *
 * Bytes 32c .. 32c + 31 of qs hold sub-block 2c in their low nibbles and
 * 2c + 1 in their high ones, and the activations of the two lie at
 * 64c .. 64c + 63: the 32 bytes broadcast to both halves of a zmm, the
 * high half shifted down by four, give the 64 codes in that order.  The
 * vpdpbusd result of chunk c has sub-block 2c in lanes 0-7 and 2c + 1 in
 * 8-15; chunks 2p and 2p + 1 are packed together.
 */
static KQ_X86_INLINE void raw_q4_K(const struct qg_block_q4_K *w, const struct qg_block_q8_K *a, int64_t nba,
				   int R, __m512i *I, __m256i *M)
{
	const __m512i low4 = _mm512_set1_epi8(0x0f), hi4 = shift_lo_hi(0, 4);
	__m128i sc, m16;
	__m512i u[4], s[2];

	kq_x86_q4k_unpack(w->scales, &sc, &m16);
	#pragma GCC unroll 2
	for (int p = 0; p < 2; p++)
		s[p] = _mm512_permutexvar_epi16(_mm512_load_si512(q4k_scale_idx[p]), _mm512_castsi128_si512(sc));
	#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qs + 32 * c)));
		u[c] = _mm512_and_si512(_mm512_srlv_epi16(q, hi4), low4);
	}
	/* min_j twice, against the two block sums of sub-block j */
	const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++) {
		const int8_t *aq = a[r * nba].qs;
		__m512i x[4];
		#pragma GCC unroll 4
		for (int c = 0; c < 4; c++)
			x[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], _mm512_loadu_si512(aq + 64 * c));
		I[r] = _mm512_dpwssd_epi32(_mm512_madd_epi16(_mm512_packs_epi32(x[0], x[1]), s[0]),
					   _mm512_packs_epi32(x[2], x[3]), s[1]);
		M[r] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[r * nba].bsums), mins);
	}
}

/* raw_q4_K's sums as kq_x86_rows_q4_K takes them: H[r] = hadd(isum, msum). */
static KQ_X86_INLINE void sums_q4_K(const struct qg_block_q4_K *w, const struct qg_block_q8_K *a, int64_t nba,
				    int R, __m256i *h)
{
	__m512i I[4];
	__m256i M[4];

	raw_q4_K(w, a, nba, R, I, M);
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
		h[r] = _mm256_hadd_epi32(_mm256_add_epi32(_mm512_castsi512_si256(I[r]), _mm512_extracti64x4_epi64(I[r], 1)),
					 M[r]);
}

/*
 * Super-block W against four activation rows (row r's block at
 * A[r * NBA]), rows paired in the packs: X gets, in 128-bit lane k and
 * int32 lane r, a partial sum of row r's isum, and MX the same of its
 * msum (the mins spread as the block sums lie in the pair layout).
 */
static KQ_X86_INLINE void raw4_q4_K(const struct qg_block_q4_K *w, const struct qg_block_q8_K *a, int64_t nba,
				    __m512i *X, __m512i *MX)
{
	const __m512i low4 = _mm512_set1_epi8(0x0f), hi4 = shift_lo_hi(0, 4);
	__m128i sc, m16;
	__m512i u[4], s[4], ip[2], mp[2];

	kq_x86_q4k_unpack(w->scales, &sc, &m16);
	#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		s[c] = _mm512_permutexvar_epi16(_mm512_load_si512(q4k_chunk_idx[c]), _mm512_castsi128_si512(sc));
		const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qs + 32 * c)));
		u[c] = _mm512_and_si512(_mm512_srlv_epi16(q, hi4), low4);
	}
	/* block sum 2j + e meets min j: in the pair layout, 128-bit lane k holds sums 4k .. 4k + 3 */
	const __m128i m2 = _mm_unpacklo_epi16(m16, m16), m3 = _mm_unpackhi_epi16(m16, m16);
	const __m512i mins = _mm512_permutex2var_epi64(_mm512_castsi128_si512(m2), _mm512_set_epi64(9, 9, 8, 8, 1, 1, 0, 0),
						       _mm512_castsi128_si512(m3));
	#pragma GCC unroll 2
	for (int p = 0; p < 2; p++) {
		const struct qg_block_q8_K *a0 = &a[2 * p * nba], *a1 = &a[(2 * p + 1) * nba];
		__m512i i = _mm512_setzero_si512();
		#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			const __m512i x0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], _mm512_loadu_si512(a0->qs + 64 * c));
			const __m512i x1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], _mm512_loadu_si512(a1->qs + 64 * c));
			i = c ? _mm512_dpwssd_epi32(i, _mm512_packs_epi32(x0, x1), s[c])
			      : _mm512_madd_epi16(_mm512_packs_epi32(x0, x1), s[c]);
		}
		ip[p] = i;
		mp[p] = _mm512_madd_epi16(pair16(a0->bsums, a1->bsums), mins);
	}
	*X = join_pairs(ip[0], ip[1]);
	*MX = join_pairs(mp[0], mp[1]);
}

/* _MM_SHUFFLE(2, 0, 2, 0) and (3, 1, 3, 1): the even and the odd 128-bit lanes of two vectors */
#define EVEN128 0x88
#define ODD128 0xdd

/*
 * finish4 of four join_pairs results X[0..3] (128-bit lane k, int32 lane
 * r: a partial sum of row r, each of its lanes counted once over the
 * four 128-bit lanes) gives in lane 4j + r the whole sum of row r of
 * X[j]: the sixteen (row, super-block) sums of a group reduced at once,
 * with neither vphaddd nor a reduction per row.
 */
static KQ_X86_INLINE __m512i finish4(const __m512i *x)
{
	const __m512i y01 = _mm512_add_epi32(_mm512_shuffle_i64x2(x[0], x[1], EVEN128),
					     _mm512_shuffle_i64x2(x[0], x[1], ODD128));
	const __m512i y23 = _mm512_add_epi32(_mm512_shuffle_i64x2(x[2], x[3], EVEN128),
					     _mm512_shuffle_i64x2(x[2], x[3], ODD128));

	return _mm512_add_epi32(_mm512_shuffle_i64x2(y01, y23, EVEN128), _mm512_shuffle_i64x2(y01, y23, ODD128));
}

/* Super-blocks per group of the four-row kernels; lane 4j + r of their vectors is super-block j, row r. */
#define G4 4

/*
 * The activation scales of a group of super-blocks b .. b + 3 (A at
 * super-block b): lane 4j + r is A[r * NBA + j].d.  Loaded one by one
 * and put in place: a gather of sixteen costs more here.
 */
static KQ_X86_INLINE __m512 ad4x4(const struct qg_block_q8_K *a, int64_t nba)
{
	__m128 v[4];

	#pragma GCC unroll 4
	for (int j = 0; j < 4; j++)
		v[j] = _mm_set_ps(a[3 * nba + j].d, a[2 * nba + j].d, a[nba + j].d, a[j].d);
	return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set_m128(v[1], v[0])), _mm256_set_m128(v[3], v[2]), 1);
}

/*
 * Four activation rows against one Q4_K weight row, four super-blocks at
 * a time: their sixteen isums and msums (row r of super-block j in lane
 * 4j + r) reduced together, their products dw * isum and dm * msum formed
 * in one vector multiply each (IEEE products, the scalar ones' bits), and
 * added to the rows' sums, four rows side by side, one super-block after
 * the other in the reference's order.  OUT[r] is the one-row result bit
 * for bit; the super-blocks past the last group go one at a time.
 */
static void dot4_q4_K(int64_t k, const void *restrict vw, const void *restrict va, int64_t nba, float *restrict out)
{
	const struct qg_block_q4_K *w = vw;
	const struct qg_block_q8_K *a = va;
	const int64_t nsb = k / QG_QK_K;

	/* d_j and dmin_j of the group's super-blocks, each over the four rows' lanes */
	const __m512i dsel = _mm512_set_epi32(6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0);
	const __m512i msel = _mm512_add_epi32(dsel, _mm512_set1_epi32(1));
	__m128 acc = _mm_setzero_ps();
	int64_t b = 0;

	for (; b + G4 <= nsb; b += G4) {
		__m512i x[G4], mx[G4];
		#pragma GCC unroll 4
		for (int j = 0; j < G4; j++)
			raw4_q4_K(&w[b + j], &a[b + j], nba, &x[j], &mx[j]);
		const __m512 isum = _mm512_cvtepi32_ps(finish4(x)), msum = _mm512_cvtepi32_ps(finish4(mx));
		const __m512 wdm = _mm512_castps256_ps512(_mm256_cvtph_ps(kq_x86_gather4_u32(&w[b].d, sizeof *w)));
		const __m512 ad = ad4x4(&a[b], nba);
		const __m512 pi = _mm512_mul_ps(_mm512_mul_ps(_mm512_permutexvar_ps(dsel, wdm), ad), isum);
		const __m512 pm = _mm512_mul_ps(_mm512_mul_ps(_mm512_permutexvar_ps(msel, wdm), ad), msum);
		acc = _mm_sub_ps(_mm_add_ps(acc, _mm512_castps512_ps128(pi)), _mm512_castps512_ps128(pm));
		acc = _mm_sub_ps(_mm_add_ps(acc, _mm512_extractf32x4_ps(pi, 1)), _mm512_extractf32x4_ps(pm, 1));
		acc = _mm_sub_ps(_mm_add_ps(acc, _mm512_extractf32x4_ps(pi, 2)), _mm512_extractf32x4_ps(pm, 2));
		acc = _mm_sub_ps(_mm_add_ps(acc, _mm512_extractf32x4_ps(pi, 3)), _mm512_extractf32x4_ps(pm, 3));
	}
	float s[4];
	_mm_storeu_ps(s, acc);
	for (; b < nsb; b++) {
		__m256i h[4];
		sums_q4_K(&w[b], &a[b], nba, 4, h);
		const float wd = kq_x86_h2f(w[b].d), wm = kq_x86_h2f(w[b].dmin);
		for (int r = 0; r < 4; r++) {
			const float ad = a[r * nba + b].d;
			__m128i t = _mm_add_epi32(_mm256_castsi256_si128(h[r]), _mm256_extracti128_si256(h[r], 1));
			t = _mm_hadd_epi32(t, t);
			s[r] = qg_kq_accum(s[r], wd * ad, wm * ad, _mm_cvtsi128_si32(t), _mm_extract_epi32(t, 1));
		}
	}
	memcpy(out, s, sizeof s);
}

/*
 * The exact integer sums of Q6_K super-block W against R activation rows:
 * the sixteen int32 lanes of I[r] add up to sum_j scale_j * sum((u - 32)
 * * a) over the sixteen sub-blocks, the -32 entered as one more vpdpwssd
 * of Q8_K's block sums by -32 * scale_j (at most 4096 in magnitude).
 *
 * Value 128h + 32q + l (q = 0..3, l = 0..31) has its low four bits in
 * ql[64h + 32(q & 1) + l] (the low nibble for q < 2, the high for
 * q >= 2) and its top two in qh[32h + l] at bit 2q.  So the 64 bytes of
 * ql at 64h give values 128h .. 128h + 63 in their low nibbles and the
 * next 64 in their high ones, in order, and the 32 bytes of qh at 32h,
 * broadcast to both halves of a zmm, give the top bits of each once
 * shifted into bits 4-5: up by 4 and 2 (the two halves of the first 64),
 * down by 0 and 2 (of the next 64).  Lanes 4k .. 4k + 3 of a chunk's
 * vpdpbusd result are sub-block 8h + k (first 64 values) or 8h + 4 + k
 * (next 64); the two chunks of a half are packed together.
 */
static KQ_X86_INLINE void raw_q6_K(const struct qg_block_q6_K *w, const struct qg_block_q8_K *a, int64_t nba,
				   int R, __m512i *I)
{
	const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
	const __m512i up42 = shift_lo_hi(4, 2), down02 = shift_lo_hi(0, 2);
	/* the sixteen scales as int16, and -32 times them against the block sums */
	const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
	const __m512i off = _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s16, 5)));
	__m512i u[2][2], s[2];

	#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		s[h] = _mm512_permutexvar_epi16(_mm512_load_si512(q6k_scale_idx[h]), _mm512_castsi256_si512(s16));
		const __m512i ql = _mm512_loadu_si512(w->ql + 64 * h);
		const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qh + 32 * h)));
		const __m512i h0 = _mm512_and_si512(_mm512_sllv_epi16(qh, up42), bits45);
		const __m512i h1 = _mm512_and_si512(_mm512_srlv_epi16(qh, down02), bits45);
		u[h][0] = _mm512_ternarylogic_epi32(ql, h0, low4, TL_AND_OR);
		u[h][1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), h1, low4, TL_AND_OR);
	}
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++) {
		const int8_t *aq = a[r * nba].qs;
		__m512i i = _mm512_madd_epi16(_mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)a[r * nba].bsums)),
					      off);
		#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			const __m512i x0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[h][0],
							       _mm512_loadu_si512(aq + 128 * h));
			const __m512i x1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[h][1],
							       _mm512_loadu_si512(aq + 128 * h + 64));
			i = _mm512_dpwssd_epi32(i, _mm512_packs_epi32(x0, x1), s[h]);
		}
		I[r] = i;
	}
}

/*
 * Super-block W against four activation rows, rows paired in the packs
 * as raw4_q4_K pairs them: the result holds, in 128-bit lane k and int32
 * lane r, a partial sum of row r's isum, the -32 included.
 */
static KQ_X86_INLINE __m512i raw4_q6_K(const struct qg_block_q6_K *w, const struct qg_block_q8_K *a, int64_t nba)
{
	const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
	const __m512i up42 = shift_lo_hi(4, 2), down02 = shift_lo_hi(0, 2);
	const __m512i pairs = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
	const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
	/* -32 times the scales, in the pair layout of the block sums */
	const __m512i o16 = _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s16, 5)));
	const __m512i off = _mm512_permutex2var_epi64(o16, pairs, o16);
	__m512i u[4], s[4], ip[2];

	#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		const __m512i ql = _mm512_loadu_si512(w->ql + 64 * h);
		const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qh + 32 * h)));
		const __m512i h0 = _mm512_and_si512(_mm512_sllv_epi16(qh, up42), bits45);
		const __m512i h1 = _mm512_and_si512(_mm512_srlv_epi16(qh, down02), bits45);
		u[2 * h] = _mm512_ternarylogic_epi32(ql, h0, low4, TL_AND_OR);
		u[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), h1, low4, TL_AND_OR);
	}
	#pragma GCC unroll 4
	for (int c = 0; c < 4; c++)
		s[c] = _mm512_permutexvar_epi16(_mm512_load_si512(q6k_chunk_idx[c]), _mm512_castsi256_si512(s16));
	#pragma GCC unroll 2
	for (int p = 0; p < 2; p++) {
		const struct qg_block_q8_K *a0 = &a[2 * p * nba], *a1 = &a[(2 * p + 1) * nba];
		__m512i i = _mm512_madd_epi16(pair16(a0->bsums, a1->bsums), off);
		#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			const __m512i x0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], _mm512_loadu_si512(a0->qs + 64 * c));
			const __m512i x1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], _mm512_loadu_si512(a1->qs + 64 * c));
			i = _mm512_dpwssd_epi32(i, _mm512_packs_epi32(x0, x1), s[c]);
		}
		ip[p] = i;
	}
	return join_pairs(ip[0], ip[1]);
}

/* raw_q6_K's sums as kq_x86_rows_q6_K takes them: eight lanes per row. */
static KQ_X86_INLINE void sums_q6_K(const struct qg_block_q6_K *w, const struct qg_block_q8_K *a, int64_t nba,
				    int R, __m256i *tot)
{
	__m512i I[4];

	raw_q6_K(w, a, nba, R, I);
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
		tot[r] = _mm256_add_epi32(_mm512_castsi512_si256(I[r]), _mm512_extracti64x4_epi64(I[r], 1));
}

/*
 * Four activation rows against one Q6_K weight row, as dot4_q4_K: the
 * sixteen isums of four super-blocks reduced together and dw * isum
 * added to the rows' sums in order.  The reference's second step
 * subtracts 0 * 0, which leaves any sum as it is.
 */
static void dot4_q6_K(int64_t k, const void *restrict vw, const void *restrict va, int64_t nba, float *restrict out)
{
	const struct qg_block_q6_K *w = vw;
	const struct qg_block_q8_K *a = va;
	const int64_t nsb = k / QG_QK_K;

	const __m512i dsel = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
	__m128 acc = _mm_setzero_ps();
	int64_t b = 0;

	for (; b + G4 <= nsb; b += G4) {
		__m512i x[G4];
		#pragma GCC unroll 4
		for (int j = 0; j < G4; j++)
			x[j] = raw4_q6_K(&w[b + j], &a[b + j], nba);
		const __m512 isum = _mm512_cvtepi32_ps(finish4(x));
		uint16_t d[G4];
		for (int j = 0; j < G4; j++)
			memcpy(&d[j], &w[b + j].d, 2);
		const __m512 wd = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, (short)d[3], (short)d[2],
									      (short)d[1], (short)d[0])));
		const __m512 ad = ad4x4(&a[b], nba);
		const __m512 pi = _mm512_mul_ps(_mm512_mul_ps(_mm512_permutexvar_ps(dsel, wd), ad), isum);
		acc = _mm_add_ps(acc, _mm512_castps512_ps128(pi));
		acc = _mm_add_ps(acc, _mm512_extractf32x4_ps(pi, 1));
		acc = _mm_add_ps(acc, _mm512_extractf32x4_ps(pi, 2));
		acc = _mm_add_ps(acc, _mm512_extractf32x4_ps(pi, 3));
	}
	float s[4];
	_mm_storeu_ps(s, acc);
	for (; b < nsb; b++) {
		__m256i t[4];
		sums_q6_K(&w[b], &a[b], nba, 4, t);
		const float wd = kq_x86_h2f(w[b].d);
		for (int r = 0; r < 4; r++)
			s[r] = qg_kq_accum(s[r], wd * a[r * nba + b].d, 0.0f, kq_x86_hsum_epi32(t[r]), 0);
	}
	memcpy(out, s, sizeof s);
}

/* --- Q8_0 x Q8_0 ------------------------------------------------------- */

/*
 * The exact int32 dot product of block W with R activation blocks (row
 * r's at A[r * NBA]), as eight int32 lanes each, one vpdpbusd (256-bit)
 * per row: |w| unsigned (a code of -128 gives 128, still right) against
 * a with w's sign moved onto it, which needs the activations in
 * -127..127 (as kquant-avx2.c's); a lane is at most 4 * 128 * 127.
 */
static KQ_X86_INLINE void sums_q8_0(const struct qg_block_q8_0 *w, const struct qg_block_q8_0 *a, int64_t nba,
				    int R, __m256i *s)
{
	const __m256i wq = _mm256_loadu_si256((const __m256i *)w->qs);
	const __m256i wabs = _mm256_abs_epi8(wq);

	#pragma GCC unroll 4
	for (int r = 0; r < R; r++) {
		const __m256i aq = _mm256_loadu_si256((const __m256i *)a[r * nba].qs);
		s[r] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), wabs, _mm256_sign_epi8(aq, wq));
	}
}

KQ_X86_ENTRIES()

/* --- the Q4_K GEMV ------------------------------------------------------ */

/*
 * One activation row against many Q4_K weight rows, four weight rows at a
 * time: the activations and the float part are shared by the four, and
 * each super-block's eight (row, sum) integer sums come out in the lanes
 * that dot4_q4_K's float part takes, so no sum is reduced alone.
 *
 * The activations are laid out once per call (struct gemv_act) as the
 * weights lie, so that the weights are loaded as they are, 64 bytes at a
 * time, and need no shuffle: a 32-byte broadcast from memory, as the
 * one-row kernel loads them, takes a shuffle unit (Zen 4), which the
 * packs and the scales keep busy already.  Rows are paired in the packs as
 * raw4_q4_K pairs activation rows: one vpackssdw takes a chunk's
 * vpdpbusd results of rows A and B, and one vpdpwssd scales both.  The
 * scales and mins of four rows are unpacked together from their 16-byte
 * heads (d, dmin, the 12 scale bytes), a head to a 128-bit lane.  A row's
 * msum is sum_j min_j * P_j, P_j the sum of block sums 2j and 2j + 1: one
 * vpmaddwd for the four rows.
 */

/*
 * One activation super-block as the GEMV reads it.  q[2h + e] meets qs
 * bytes 64h .. 64h + 63, their low nibbles (e = 0) or high (e = 1): those
 * are values 128h + 32e .. + 31, then 128h + 64 + 32e .. + 31.  p holds
 * P_2k and P_2k+1 four times over in 128-bit lane k, one pair per row.
 */
struct gemv_act {
	_Alignas(64) int8_t q[4][64];
	int16_t p[32];
};

/* Super-blocks of activations laid out per pass: 20 KB of stack, K up to 16384 in one. */
#define GEMV_CHUNK 64

/* NSB super-blocks of A as the GEMV reads them, into G. */
static void gemv_act_prepare(const struct qg_block_q8_K *a, int64_t nsb, struct gemv_act *g)
{
	/* P_0-3 twice, then P_4-7 twice, as int16: pair k (P_2k, P_2k+1) is dword 0, 1, 4 or 5 */
	const __m512i spread = _mm512_set_epi32(5, 5, 5, 5, 4, 4, 4, 4, 1, 1, 1, 1, 0, 0, 0, 0);

	for (int64_t b = 0; b < nsb; b++) {
		for (int c = 0; c < 4; c++) {
			const int8_t *src = a[b].qs + 128 * (c / 2) + 32 * (c % 2);
			memcpy(g[b].q[c], src, 32);
			memcpy(g[b].q[c] + 32, src + 64, 32);
		}
		const __m256i bs = _mm256_loadu_si256((const __m256i *)a[b].bsums);
		const __m256i p = _mm256_madd_epi16(bs, _mm256_set1_epi16(1));
		const __m512i p2 = _mm512_castsi256_si512(_mm256_packs_epi32(p, p));
		_mm512_store_si512(g[b].p, _mm512_permutexvar_epi32(spread, p2));
	}
}

/*
 * kq_x86_q4k_unpack2 on four heads, one to a 128-bit lane, the masks and
 * merges of its steps in two vpternlogd.
 */
static KQ_X86_INLINE __m512i unpack4_q4_K(__m512i head)
{
	const __m512i pick =
		_mm512_broadcast_i32x4(_mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
	const __m512i low = _mm512_broadcast_i32x4(_mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0));
	const __m512i nib = _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0, 0, 0x0f0f0f0f));
	const __m512i top = _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
	const __m512i x = _mm512_shuffle_epi8(head, pick);
	const __m512i t = _mm512_ternarylogic_epi32(_mm512_srli_epi16(x, 4), _mm512_and_si512(x, low), nib, TL_AND_OR);

	return _mm512_ternarylogic_epi32(_mm512_slli_epi64(x, 30), t, top, TL_AND_OR);
}

/*
 * vpermw control over M, in which int16 8r + j is row r's min j: 128-bit
 * lane k holds mins 2k and 2k + 1 of rows 0, 1, 2, 3 in turn, against
 * gemv_act's p, so that vpmaddwd leaves row r's partial msum in int32
 * lane r of each 128-bit lane.
 */
#define MINS8(k) 2 * (k), 2 * (k) + 1, 8 + 2 * (k), 9 + 2 * (k), 16 + 2 * (k), 17 + 2 * (k), \
		 24 + 2 * (k), 25 + 2 * (k)
static const _Alignas(64) short gemv_min_idx[32] = { MINS8(0), MINS8(1), MINS8(2), MINS8(3) };
#undef MINS8

/*
 * Super-block W (row r's at W + r * WS) of four weight rows against
 * activation block G: X gets, in 128-bit lane k and int32 lane r, a
 * partial sum of row r's isum, MX the same of its msum, and HEAD the
 * four rows' heads, one to a 128-bit lane.
 */
static KQ_X86_INLINE void rows4_sb_q4_K(const uint8_t *w, size_t ws, const struct gemv_act *g, __m512i *X,
					__m512i *MX, __m512i *head)
{
	const __m512i low4 = _mm512_set1_epi8(0x0f);
	__m512i h = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)w));

	#pragma GCC unroll 3
	for (int r = 1; r < 4; r++)
		h = _mm512_inserti32x4(h, _mm_loadu_si128((const __m128i *)(w + r * ws)), r);
	*head = h;
	/* int16 8r + j: row r's scale j (S) and min j (M) */
	const __m512i u = unpack4_q4_K(h);
	const __m512i S = _mm512_unpacklo_epi8(u, _mm512_setzero_si512());
	const __m512i M = _mm512_unpackhi_epi8(u, _mm512_setzero_si512());
	*MX = _mm512_madd_epi16(_mm512_permutexvar_epi16(_mm512_load_si512(gemv_min_idx), M), _mm512_load_si512(g->p));

	__m512i i[2];
	#pragma GCC unroll 2
	for (int hh = 0; hh < 2; hh++) {
		__m512i q[4];
		#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			q[r] = _mm512_loadu_si512(w + (size_t)r * ws + KQ_X86_Q4K_HEAD + 64 * hh);
		#pragma GCC unroll 2
		for (int e = 0; e < 2; e++) {
			const int c = 2 * hh + e;
			const __m512i act = _mm512_load_si512(g->q[c]);
			const __m512i idx0 = _mm512_load_si512(gemv_scale_idx[c]);
			const __m512i idx[2] = { idx0, _mm512_add_epi16(idx0, _mm512_set1_epi16(16)) };
			#pragma GCC unroll 2
			for (int pr = 0; pr < 2; pr++) {
				__m512i x[2];
				#pragma GCC unroll 2
				for (int o = 0; o < 2; o++) {
					const __m512i v = q[2 * pr + o];
					const __m512i cd = _mm512_and_si512(e ? _mm512_srli_epi16(v, 4) : v, low4);
					x[o] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), cd, act);
				}
				const __m512i pk = _mm512_packs_epi32(x[0], x[1]);
				const __m512i sc = _mm512_permutexvar_epi16(idx[pr], S);
				i[pr] = c ? _mm512_dpwssd_epi32(i[pr], pk, sc) : _mm512_madd_epi16(pk, sc);
			}
		}
	}
	*X = join_pairs(i[0], i[1]);
}

/* The d and dmin of the heads of HEAD0 then HEAD1 (one to a 128-bit lane) in int32 lanes 0-7. */
static KQ_X86_INLINE __m512i head_dd(__m512i head0, __m512i head1)
{
	const __m512i idx = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 28, 24, 20, 16, 12, 8, 4, 0);

	return _mm512_permutex2var_epi32(head0, idx, head1);
}

/*
 * Four Q4_K weight rows (row r at W + r * WS, at the chunk's first
 * super-block) against NSB super-blocks of activations G (their scales
 * from A): S[r] is the row's sum so far (0 before the first chunk) and
 * gets the sum after these, as the one-row kernel forms it, bit for bit.
 * NEXT: the next four rows (NULL: none), asked for ahead.
 * Four super-blocks at a time, as dot4_q4_K: the sixteen (super-block,
 * row) isums and msums reduced together, dw * isum and dm * msum formed in
 * one vector multiply each, added to the four rows' sums side by side in
 * the reference's order; the super-blocks past the last group one at a
 * time, the same steps in four lanes.
 */
static void rows4_q4_K(int64_t nsb, const uint8_t *w, size_t ws, const struct gemv_act *g,
		       const struct qg_block_q8_K *a, float *s, const uint8_t *next)
{
	const __m512i sbsel = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
	__m128 acc = _mm_loadu_ps(s);
	int64_t b = 0;

	for (; b + G4 <= nsb; b += G4) {
		__m512i x[G4], mx[G4], head[G4];
		#pragma GCC unroll 4
		for (int j = 0; j < G4; j++) {
			const size_t off = (size_t)(b + j) * sizeof(struct qg_block_q4_K);
			kq_x86_q4k_prefetch4(next ? next + off : NULL, ws);
			rows4_sb_q4_K(w + off, ws, &g[b + j], &x[j], &mx[j], &head[j]);
		}
		const __m512 isum = _mm512_cvtepi32_ps(finish4(x)), msum = _mm512_cvtepi32_ps(finish4(mx));
		/* lane 4j + r: row r's d and dmin of super-block j, and the activations' d */
		const __m512i dd = _mm512_shuffle_i64x2(head_dd(head[0], head[1]), head_dd(head[2], head[3]), 0x44);
		const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
		const __m512 dm = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
		const __m512 ad = _mm512_permutexvar_ps(sbsel, _mm512_castps128_ps512(_mm_setr_ps(a[b].d, a[b + 1].d,
											 a[b + 2].d, a[b + 3].d)));
		const __m512 pi = _mm512_mul_ps(_mm512_mul_ps(dw, ad), isum);
		const __m512 pm = _mm512_mul_ps(_mm512_mul_ps(dm, ad), msum);
		acc = _mm_sub_ps(_mm_add_ps(acc, _mm512_castps512_ps128(pi)), _mm512_castps512_ps128(pm));
		acc = _mm_sub_ps(_mm_add_ps(acc, _mm512_extractf32x4_ps(pi, 1)), _mm512_extractf32x4_ps(pm, 1));
		acc = _mm_sub_ps(_mm_add_ps(acc, _mm512_extractf32x4_ps(pi, 2)), _mm512_extractf32x4_ps(pm, 2));
		acc = _mm_sub_ps(_mm_add_ps(acc, _mm512_extractf32x4_ps(pi, 3)), _mm512_extractf32x4_ps(pm, 3));
	}
	for (; b < nsb; b++) {
		__m512i x, mx, head;
		rows4_sb_q4_K(w + (size_t)b * sizeof(struct qg_block_q4_K), ws, &g[b], &x, &mx, &head);
		const __m256i x8 = _mm256_add_epi32(_mm512_castsi512_si256(x), _mm512_extracti64x4_epi64(x, 1));
		const __m256i m8 = _mm256_add_epi32(_mm512_castsi512_si256(mx), _mm512_extracti64x4_epi64(mx, 1));
		const __m128i isum = _mm_add_epi32(_mm256_castsi256_si128(x8), _mm256_extracti128_si256(x8, 1));
		const __m128i msum = _mm_add_epi32(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
		const __m128i dd = _mm512_castsi512_si128(head_dd(head, head));
		const __m128 ad = _mm_set1_ps(a[b].d);
		const __m128 dw = _mm_cvtph_ps(_mm_cvtepi32_epi16(dd));
		const __m128 dm = _mm_cvtph_ps(_mm_cvtepi32_epi16(_mm_srli_epi32(dd, 16)));
		acc = _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(dw, ad), _mm_cvtepi32_ps(isum)));
		acc = _mm_sub_ps(acc, _mm_mul_ps(_mm_mul_ps(dm, ad), _mm_cvtepi32_ps(msum)));
	}
	_mm_storeu_ps(s, acc);
}

/*
 * qg_kq_gemv_fn for Q4_K: rows4_q4_K on each four weight rows, a chunk of
 * GEMV_CHUNK super-blocks of K at a time (each row's sum carried in S
 * from one chunk to the next, so the float steps keep their order), and
 * dot_q4_K on the last NC % 4 rows.
 */
static void gemv_q4_K(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
		      const void *restrict va)
{
	const struct qg_block_q8_K *a = va;
	const uint8_t *wb = w;
	const int64_t nsb = k / QG_QK_K;
	const int n4 = nc - nc % 4;
	struct gemv_act g[GEMV_CHUNK];

	memset(s, 0, (size_t)n4 * sizeof *s);
	for (int64_t b0 = 0; b0 < nsb; b0 += GEMV_CHUNK) {
		const int64_t nb = nsb - b0 < GEMV_CHUNK ? nsb - b0 : GEMV_CHUNK;
		gemv_act_prepare(a + b0, nb, g);
		for (int c = 0; c < n4; c += 4) {
			const uint8_t *wc = wb + (size_t)c * wstride + (size_t)b0 * sizeof(struct qg_block_q4_K);
			rows4_q4_K(nb, wc, wstride, g, a + b0, s + c, c + 8 <= n4 ? wc + 4 * wstride : NULL);
		}
	}
	for (int c = n4; c < nc; c++)
		s[c] = dot_q4_K(k, wb + (size_t)c * wstride, a);
}

const struct qg_kq_kernel qg_kq_avx512vnni = {
	.name = "avx512vnni k-quants", .family = QG_KF_AVX512VNNI,
	.q4_K = dot_q4_K, .q6_K = dot_q6_K,
	.q4_K_x4 = dot4_q4_K, .q6_K_x4 = dot4_q6_K,
	.q4_K_gemv = gemv_q4_K, .x4_before_gemv = 1,
	.q8_0 = dot_q8_0, .q8_0_x4 = dot4_q8_0,
	.q4_K_gemm = qg_kq_gemm_q4_K_avx512vnni, .q6_K_gemm = qg_kq_gemm_q6_K_avx512vnni,
	.q8_0_gemm = qg_kq_gemm_q8_0_avx512vnni,
	.gemm_rows = 16,
};
