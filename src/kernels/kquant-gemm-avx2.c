/*
 * kquant-gemm-avx2.c - Q4_K, Q6_K and Q8_0 weight rows against many
 * activation rows (a prompt's) with AVX2, for x86 CPUs without AVX-512.
 *
 * The shape is the AVX-512 VNNI GEMM's (kquant-gemm-avx512vnni.c): weight
 * rows are turned, a few super-blocks at a time, into a tile where each
 * quad of k values is one vector whose 32-bit lane r holds row r's four
 * codes as unsigned bytes, with each sub-block's scales as a vector over
 * the rows; every activation row then meets the tile with its quads
 * broadcast, and lane r is weight row r's to the end, so nothing is
 * reduced across lanes.  A tile holds 8 rows, one ymm per quad.
 *
 * Without VNNI a quad is vpmaddubsw (unsigned codes by signed
 * activations, neighbouring products added into int16), and int16 lanes
 * are added up before the one vpmaddwd by the scale that widens them:
 *
 *   Q4_K: codes 0..15, so an int16 lane of vpmaddubsw is at most
 *         2 * 15 * 128 = 3840 in magnitude, and the eight quads of a
 *         32-value sub-block add up to at most 30720: one vpmaddwd per
 *         sub-block.
 *   Q6_K: codes 0..63 (stored with their +32), a lane at most
 *         2 * 63 * 128 = 16128, two quads 32256: one vpmaddwd per
 *         pair of quads, two per 16-value sub-block.
 *
 * No lane saturates or wraps, vpmaddwd by the scale (both int16 halves
 * of a lane holding it) then gives scale * x exactly in int32, and every
 * other sum is the one the VNNI GEMM forms (it bounds them): the block
 * sums by vpmaddwd of int16 pairs (Q4_K's mins, Q6_K's -32 * scale)
 * against Q8_K's int16 sums.  So isum and msum are the reference's
 * whatever the order, and the float part takes qg_kq_accum's steps lane
 * by lane, each product and sum rounded alone (this file is built
 * without contraction): every output is the one-row kernel's bit for
 * bit.  Q8_0 weights, at the end of the file, take the same tiles with
 * their codes split into nibbles.
 */
#include "config.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "kquant-x86.h"
#include "kquant.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/*
 * Super-blocks per tile chunk, activation rows per pass over a tile, and
 * 8 weight rows a tile (one ymm per quad): measured against 16-row tiles
 * (two ymm per quad, 2 or 3 rows a pass), 5 and 6 rows a pass, and 2 or 8
 * super-blocks a chunk, all alike or slower.  Four rows a pass keep the
 * quad loop in registers (four int16 sums, four int32 sums, the tile
 * vector, one broadcast), and the Q8_0 one too (two int16 sums a row,
 * the tile's two vectors and a broadcast: 15 ymm of 16).
 */
#define KC 4
#define GM 4

/* One super-block of 8 weight rows, as the GEMM reads it. */
struct tile {
	uint8_t q[64][32];	/* quad i (k = 4i .. 4i + 3): row r's four codes in bytes 4r .. 4r + 3 */
	int32_t sc[16][8];	/* sub-block j's scale per row, in both int16 halves (Q4_K: j < 8) */
	int32_t pr[8][8];	/* int16 pairs met by block sums 2p and 2p + 1 (above) */
	float d[8], dmin[8];
};

/*
 * Bytes OFF .. OFF + 31 of the 8 rows at ROW[r] as eight vectors, V[m]
 * holding bytes 4m .. 4m + 3 of row r in 32-bit lane r: an 8x8 transpose
 * of 32-bit words, as two 4x4 ones per 128-bit lane (rows 0-3 and 4-7;
 * words q and q + 4) whose halves the last step's lane moves join.
 */
static ALWAYS_INLINE void transpose8x8(const uint8_t *const row[8], size_t off, __m256i v[8])
{
	__m256i x[8], t[8], u[8];

	/*
	 * Unrolled, so that the arrays are registers: GCC -O2 otherwise
	 * keeps them on the stack, every step a store and a load.
	 */
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++)
		x[i] = _mm256_loadu_si256((const void *)(row[i] + off));
#pragma GCC unroll 2
	for (int h = 0; h < 8; h += 4) {
		t[h] = _mm256_unpacklo_epi32(x[h], x[h + 1]);
		t[h + 1] = _mm256_unpackhi_epi32(x[h], x[h + 1]);
		t[h + 2] = _mm256_unpacklo_epi32(x[h + 2], x[h + 3]);
		t[h + 3] = _mm256_unpackhi_epi32(x[h + 2], x[h + 3]);
		/* 128-bit lane L of u[h + q]: word q (L = 0) or q + 4 (L = 1) of rows h .. h + 3 */
		u[h] = _mm256_unpacklo_epi64(t[h], t[h + 2]);
		u[h + 1] = _mm256_unpackhi_epi64(t[h], t[h + 2]);
		u[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]);
		u[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]);
	}
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++) {
		v[q] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x20);
		v[q + 4] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x31);
	}
}

/* The N (2 or 4) bytes at OFF of each of the 8 rows, zero-extended: lane r is row r's. */
static ALWAYS_INLINE __m256i words(const uint8_t *const row[8], size_t off, size_t n)
{
	int32_t v[8] = { 0 };

	for (int r = 0; r < 8; r++)
		memcpy(&v[r], row[r] + off, n);
	return _mm256_setr_epi32(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
}

/* The fp16 values in the low (HIGH = 0) or high halves of the 32-bit lanes of W, as floats. */
static ALWAYS_INLINE __m256 halves(__m256i w, int high)
{
	w = high ? _mm256_srli_epi32(w, 16) : _mm256_and_si256(w, _mm256_set1_epi32(0xffff));
	return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
}

/* Int32 lanes V (inside int16) in both int16 halves of each lane. */
static ALWAYS_INLINE __m256i pair(__m256i v)
{
	return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(v, 16));
}

/* The Q4_K super-block at byte OFF of each of the 8 rows into T. */
static void tile_q4_K(const uint8_t *const row[8], size_t off, struct tile *t)
{
	const __m256i low4 = _mm256_set1_epi8(0x0f);
	const uint8_t *sb[8];
	__m256i q[8];

	for (int r = 0; r < 8; r++)
		sb[r] = row[r] + off;
	/* bytes 32c .. 32c + 31: sub-block 2c in the low nibbles, 2c + 1 in the high */
	for (int c = 0; c < 4; c++) {
		transpose8x8(sb, offsetof(struct qg_block_q4_K, qs) + 32 * (size_t)c, q);
		for (int m = 0; m < 8; m++) {
			_mm256_store_si256((__m256i *)t->q[16 * c + m], _mm256_and_si256(q[m], low4));
			_mm256_store_si256((__m256i *)t->q[16 * c + 8 + m],
					   _mm256_and_si256(_mm256_srli_epi16(q[m], 4), low4));
		}
	}
	/*
	 * The scales and mins of every row at once (qg_q4_K_scale_min, lane
	 * by lane): words 0, 1 and 2 of the 12 bytes hold scales 0-3, mins
	 * 0-3 and the low nibbles of scales and mins 4-7; the top two bits
	 * of those sit in bits 6-7 of each byte of words 0 and 1.
	 */
	const size_t so = offsetof(struct qg_block_q4_K, scales);
	const __m256i u0 = words(sb, so, 4), u1 = words(sb, so + 4, 4), u2 = words(sb, so + 8, 4);
	const __m256i m63 = _mm256_set1_epi32(0x3f), m15 = _mm256_set1_epi32(0x0f), m48 = _mm256_set1_epi32(0x30);
	for (int j = 0; j < 4; j++) {
		const __m128i sh = _mm_cvtsi32_si128(8 * j), sh2 = _mm_cvtsi32_si128(8 * j + 2);
		const __m128i sh4 = _mm_cvtsi32_si128(8 * j + 4);
		const __m256i sc = _mm256_and_si256(_mm256_srl_epi32(u0, sh), m63);
		const __m256i mn = _mm256_and_si256(_mm256_srl_epi32(u1, sh), m63);
		const __m256i sc4 = _mm256_or_si256(_mm256_and_si256(_mm256_srl_epi32(u2, sh), m15),
						    _mm256_and_si256(_mm256_srl_epi32(u0, sh2), m48));
		const __m256i mn4 = _mm256_or_si256(_mm256_and_si256(_mm256_srl_epi32(u2, sh4), m15),
						    _mm256_and_si256(_mm256_srl_epi32(u1, sh2), m48));
		_mm256_store_si256((__m256i *)t->sc[j], pair(sc));
		_mm256_store_si256((__m256i *)t->sc[j + 4], pair(sc4));
		_mm256_store_si256((__m256i *)t->pr[j], pair(mn));
		_mm256_store_si256((__m256i *)t->pr[j + 4], pair(mn4));
	}
	const __m256i dd = words(sb, offsetof(struct qg_block_q4_K, d), 4);	/* d, then dmin */
	_mm256_store_ps(t->d, halves(dd, 0));
	_mm256_store_ps(t->dmin, halves(dd, 1));
}

/*
 * Q6_K super-block into T.  Value 128h + 32q + l (q = 0..3) has its low
 * four bits in ql[64h + 32(q & 1) + l] (low nibble for q < 2, high for
 * q >= 2) and its top two in qh[32h + l] at bit 2q; its quad is
 * 32h + 8q + l / 4.
 */
static void tile_q6_K(const uint8_t *const row[8], size_t off, struct tile *t)
{
	const __m256i low4 = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30);
	const uint8_t *sb[8];
	__m256i l0[8], l1[8], hb[8];

	for (int r = 0; r < 8; r++)
		sb[r] = row[r] + off;
	for (int h = 0; h < 2; h++) {
		transpose8x8(sb, offsetof(struct qg_block_q6_K, ql) + 64 * (size_t)h, l0);
		transpose8x8(sb, offsetof(struct qg_block_q6_K, ql) + 64 * (size_t)h + 32, l1);
		transpose8x8(sb, offsetof(struct qg_block_q6_K, qh) + 32 * (size_t)h, hb);
		for (int m = 0; m < 8; m++) {
			/* a 16-bit shift then a byte mask: the bits that cross bytes are masked off */
			const __m256i h0 = _mm256_and_si256(_mm256_slli_epi16(hb[m], 4), top);
			const __m256i h1 = _mm256_and_si256(_mm256_slli_epi16(hb[m], 2), top);
			const __m256i h2 = _mm256_and_si256(hb[m], top);
			const __m256i h3 = _mm256_and_si256(_mm256_srli_epi16(hb[m], 2), top);
			_mm256_store_si256((__m256i *)t->q[32 * h + m],
					   _mm256_or_si256(_mm256_and_si256(l0[m], low4), h0));
			_mm256_store_si256((__m256i *)t->q[32 * h + 8 + m],
					   _mm256_or_si256(_mm256_and_si256(l1[m], low4), h1));
			_mm256_store_si256((__m256i *)t->q[32 * h + 16 + m],
					   _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0[m], 4), low4), h2));
			_mm256_store_si256((__m256i *)t->q[32 * h + 24 + m],
					   _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1[m], 4), low4), h3));
		}
	}
	/* the sixteen int8 scales of every row, four words of four; -32 times them in int16 pairs */
	for (int c = 0; c < 4; c++) {
		const __m256i w = words(sb, offsetof(struct qg_block_q6_K, scales) + 4 * (size_t)c, 4);
		__m256i sc[4];
		for (int e = 0; e < 4; e++) {
			/* byte e to the top, then down with its sign */
			sc[e] = _mm256_srai_epi32(_mm256_sll_epi32(w, _mm_cvtsi32_si128(24 - 8 * e)), 24);
			_mm256_store_si256((__m256i *)t->sc[4 * c + e], pair(sc[e]));
		}
		for (int e = 0; e < 4; e += 2) {
			const __m256i lo = _mm256_and_si256(_mm256_slli_epi32(sc[e], 5), _mm256_set1_epi32(0xffff));
			const __m256i hi = _mm256_slli_epi32(sc[e + 1], 21);
			/* -32 * s = -(32 * s): negated as int16 pairs, each half alone */
			_mm256_store_si256((__m256i *)t->pr[2 * c + e / 2],
					   _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_or_si256(lo, hi)));
		}
	}
	const __m256i dd = words(sb, offsetof(struct qg_block_q6_K, d), 2);
	_mm256_store_ps(t->d, halves(dd, 0));
}

/* The four bytes at P (an activation quad, two block sums) in every 32-bit lane. */
static ALWAYS_INLINE __m256i bcast(const void *p)
{
	int32_t v;

	memcpy(&v, p, sizeof v);
	return _mm256_set1_epi32(v);
}

/*
 * G activation rows (row g's super-block b at A[g * NBA + b]) against the
 * KC tiles T: S[g * LDS + r] for the tile's first NS rows, starting from 0
 * (FIRST) or from what S holds (the chunks before).
 */
static ALWAYS_INLINE void run_tiles(const int G, const int q6, const struct tile *T, int kc,
				    const struct qg_block_q8_K *a, size_t nba, float *s, size_t lds, int first,
				    int ns)
{
	/* quads per int16 sum (a Q4_K sub-block, half a Q6_K one), and such sums per super-block */
	const int qpx = q6 ? 2 : 8, nx = q6 ? 32 : 8;
	const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(ns), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	__m256 acc[GM];

#pragma GCC unroll 8
	for (int g = 0; g < G; g++)
		acc[g] = first ? _mm256_setzero_ps() : _mm256_maskload_ps(s + (size_t)g * lds, mask);

	for (int b = 0; b < kc; b++) {
		const struct tile *t = &T[b];
		__m256i is[GM];

#pragma GCC unroll 8
		for (int g = 0; g < G; g++)
			is[g] = _mm256_setzero_si256();
		for (int j = 0; j < nx; j++) {
			__m256i x[GM];
#pragma GCC unroll 8
			for (int g = 0; g < G; g++)
				x[g] = _mm256_setzero_si256();
#pragma GCC unroll 8
			for (int i = 0; i < qpx; i++) {
				const int qi = j * qpx + i;
				const __m256i w = _mm256_load_si256((const __m256i *)t->q[qi]);
#pragma GCC unroll 8
				for (int g = 0; g < G; g++) {
					x[g] = _mm256_add_epi16(x[g],
						_mm256_maddubs_epi16(w, bcast(a[g * nba + b].qs + 4 * qi)));
					/*
					 * Opaque to GCC, so that it keeps each sum a chain: it
					 * otherwise reassociates them into trees, forms all the
					 * sub-block's products first and spills them (a quad
					 * loop unrolled twice, kept in registers, ran 4% slower).
					 */
					__asm__("" : "+x"(x[g]));
				}
			}
			const __m256i sc = _mm256_load_si256((const __m256i *)t->sc[q6 ? j / 2 : j]);
#pragma GCC unroll 8
			for (int g = 0; g < G; g++)
				is[g] = _mm256_add_epi32(is[g], _mm256_madd_epi16(x[g], sc));
		}
		const __m256 d = _mm256_load_ps(t->d), dmin = _mm256_load_ps(t->dmin);
#pragma GCC unroll 8
		for (int g = 0; g < G; g++) {
			const struct qg_block_q8_K *ab = &a[g * nba + b];
			__m256i m = q6 ? is[g] : _mm256_setzero_si256();
#pragma GCC unroll 8
			for (int p = 0; p < 8; p++)
				m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_load_si256((const __m256i *)t->pr[p]),
									  bcast(&ab->bsums[2 * p])));
			const __m256 ad = _mm256_set1_ps(ab->d);
			if (q6) {
				acc[g] = _mm256_add_ps(acc[g], _mm256_mul_ps(_mm256_mul_ps(d, ad), _mm256_cvtepi32_ps(m)));
			} else {
				acc[g] = _mm256_add_ps(acc[g], _mm256_mul_ps(_mm256_mul_ps(d, ad), _mm256_cvtepi32_ps(is[g])));
				acc[g] = _mm256_sub_ps(acc[g], _mm256_mul_ps(_mm256_mul_ps(dmin, ad), _mm256_cvtepi32_ps(m)));
			}
		}
	}
#pragma GCC unroll 8
	for (int g = 0; g < G; g++)
		_mm256_maskstore_ps(s + (size_t)g * lds, mask, acc[g]);
}

/* --- Q8_0 weights --------------------------------------------------------- */

/*
 * Q8_0 blocks carry one fp16 scale per 32 signed codes, so a tile is a
 * chunk of KC8 blocks of 8 rows, each eight quads and the rows' scales.
 * vpmaddubsw wants one side unsigned, and a full int8 by int8 pair
 * (2 * 128 * 128) does not fit its int16 lanes.  So each code w, stored
 * XOR 0x80 as u = w + 128 in 0..255, is split into its nibbles, u =
 * 16 h + l, and each nibble meets the activation quad alone.  For any
 * int8 activations (-128 included), a vpmaddubsw lane is at most
 * 2 * 15 * 128 = 3840 in magnitude, and the eight quads of a block add
 * up to at most 30720 in each int16 lane: neither the multiply
 * saturates nor the vpaddw wraps.  Per block, activation row and
 * weight row (one lane), exactly in int32:
 *
 *   sumi = nsum + 16 * sum(h * a) + sum(l * a)
 *        = sum((u - 128) * a) = sum(w * a)
 *
 * the int16 sums widened by vpmaddwd with 16 and with 1, nsum being
 * qg_q8_0_aux's -128 * sum(a) (each term at most 2^20 in magnitude).
 * Nothing is negated, so a weight of -128 from a hostile file (u = 0)
 * is no special case, and neither is an activation of -128, which our
 * quantizer never makes.  The float part is the reference's, lane by
 * lane, block after block: sum += (float)sumi * (dw * da), each step
 * rounded alone, so every output is qg_vec_dot_q8_0_q8_0's bit for bit.
 *
 * The |w| and sign(a, w) of the one-row kernel (kquant-avx2.c) cost as
 * much here: its int16 pairs reach 2 * 128 * 127 and must be widened by
 * a vpmaddwd every quad, two multiplies a quad as the nibbles take, and
 * it holds only for activations in -127..127.
 */
#define KC8 16		/* blocks per chunk: a chunk's tiles are KC8 * 544 bytes */

/* One block of 8 weight rows, as the GEMM reads it. */
struct tile8 {
	uint8_t l[8][32];	/* quad i: the low nibbles of row r's four codes + 128, in bytes 4r .. 4r + 3 */
	uint8_t h[8][32];	/* the high nibbles, likewise */
	float d[8];
};

/*
 * The fp16 at OFF of each of the 8 rows, as floats (lane r row r's):
 * inserted one by one into a register, where words() would build them in
 * memory and load the vector, which waits on the narrow stores.
 */
static ALWAYS_INLINE __m256 scales8(const uint8_t *const row[8], size_t off)
{
	__m128i h = _mm_setzero_si128();

#pragma GCC unroll 8
	for (int r = 0; r < 8; r++) {
		uint16_t v;
		memcpy(&v, row[r] + off, sizeof v);
		h = _mm_insert_epi16(h, v, r);
	}
	return _mm256_cvtph_ps(h);
}

/* The Q8_0 block at byte OFF of each of the 8 rows into T. */
static void tile_q8_0(const uint8_t *const row[8], size_t off, struct tile8 *t)
{
	const __m256i low4 = _mm256_set1_epi8(0x0f), flip = _mm256_set1_epi8((char)0x80);
	const uint8_t *sb[8];
	__m256i q[8];

	for (int r = 0; r < 8; r++)
		sb[r] = row[r] + off;
	transpose8x8(sb, offsetof(struct qg_block_q8_0, qs), q);
#pragma GCC unroll 8
	for (int m = 0; m < 8; m++) {
		const __m256i u = _mm256_xor_si256(q[m], flip);
		_mm256_store_si256((__m256i *)t->l[m], _mm256_and_si256(u, low4));
		_mm256_store_si256((__m256i *)t->h[m], _mm256_and_si256(_mm256_srli_epi16(u, 4), low4));
	}
	_mm256_store_ps(t->d, scales8(sb, offsetof(struct qg_block_q8_0, d)));
}

/*
 * G activation rows (row g's block b at A[g * NBA + b], its aux at
 * AUX[g * NBA + b]) against the KC tiles T: S[g * LDS + r] for the
 * tile's first NS rows, starting from 0 (FIRST) or from what S holds.
 */
static ALWAYS_INLINE void run_tiles8(const int G, const struct tile8 *T, int kc, const struct qg_block_q8_0 *a,
				     const struct qg_q8_0_aux *aux, size_t nba, float *s, size_t lds, int first,
				     int ns)
{
	const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(ns), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	__m256 acc[GM];

#pragma GCC unroll 8
	for (int g = 0; g < G; g++)
		acc[g] = first ? _mm256_setzero_ps() : _mm256_maskload_ps(s + (size_t)g * lds, mask);
	for (int b = 0; b < kc; b++) {
		const struct tile8 *t = &T[b];
		__m256i xl[GM], xh[GM];

#pragma GCC unroll 8
		for (int g = 0; g < G; g++)
			xl[g] = xh[g] = _mm256_setzero_si256();
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			const __m256i l = _mm256_load_si256((const __m256i *)t->l[i]);
			const __m256i h = _mm256_load_si256((const __m256i *)t->h[i]);
#pragma GCC unroll 8
			for (int g = 0; g < G; g++) {
				const __m256i av = bcast(a[g * nba + b].qs + 4 * i);
				xl[g] = _mm256_add_epi16(xl[g], _mm256_maddubs_epi16(l, av));
				xh[g] = _mm256_add_epi16(xh[g], _mm256_maddubs_epi16(h, av));
				/* each sum a chain, as in run_tiles: without this the loop ran a quarter slower */
				__asm__("" : "+x"(xl[g]), "+x"(xh[g]));
			}
		}
		const __m256 d = _mm256_load_ps(t->d);
#pragma GCC unroll 8
		for (int g = 0; g < G; g++) {
			const struct qg_q8_0_aux *x = &aux[g * nba + b];
			const __m256i hi = _mm256_madd_epi16(xh[g], _mm256_set1_epi16(16));
			const __m256i sumi = _mm256_add_epi32(_mm256_add_epi32(_mm256_set1_epi32(x->nsum), hi),
							      _mm256_madd_epi16(xl[g], _mm256_set1_epi16(1)));
			acc[g] = _mm256_add_ps(acc[g], _mm256_mul_ps(_mm256_cvtepi32_ps(sumi),
								     _mm256_mul_ps(d, _mm256_set1_ps(x->d))));
		}
	}
#pragma GCC unroll 8
	for (int g = 0; g < G; g++)
		_mm256_maskstore_ps(s + (size_t)g * lds, mask, acc[g]);
}

#define KQ_GEMM_FAMILY avx2
#define KQ_TILE_ROWS 8
#define KQ_TILE_ALIGN 32
#define KQ_GEMM_Q8_0
/* measured for Q8_0 only: 5% at m = k = 4096, n = 32, in the 48-row calls mul_mat makes */
#define KQ_GEMM_PREFETCH(kind) ((kind) == KQ_Q8_0)
#include "kquant-gemm.h"
