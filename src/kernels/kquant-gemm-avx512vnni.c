/*
 * kquant-gemm-avx512vnni.c - Q4_K, Q6_K and Q8_0 weight rows against many
 * activation rows (a prompt's) with AVX-512 VNNI.
 *
 * The one- and four-row kernels (kquant-avx512vnni.c) meet one weight row
 * at a time and spend most of their time around the multiplies: spreading
 * scales over lanes, reducing every (row, super-block) sum across lanes.
 * Here 16 weight rows are turned, a few super-blocks at a time, into a
 * tile of the shape the Q4_0 GEMM reads (kernels-avx512vnni.c): per quad
 * of k values one zmm whose 32-bit lane r holds weight row r's four codes
 * as unsigned bytes, and each sub-block's scales as a vector over the 16
 * rows.  Then every activation row runs against the tile: a vpdpbusd with
 * the activation quad broadcast from memory ({1to16}) does 64 useful
 * multiply-adds, and lane r of every accumulator is weight row r's to the
 * end, so nothing is reduced across lanes.  A tile is built once per
 * chunk of K and read by every activation row.
 *
 * Per super-block, activation row and weight row (one lane), exactly:
 *
 *   x_j   = sum of code * a over sub-block j (vpdpbusd; Q4_K: 32 values,
 *           at most 32 * 15 * 128 in magnitude; Q6_K: 16 values of codes
 *           0..63 stored with their +32, at most 16 * 63 * 128)
 *   isum  = sum_j scale_j * x_j (vpmulld)
 *   Q4_K: msum = sum_j min_j * (bsum_2j + bsum_2j+1)
 *   Q6_K: isum += sum_j (-32 * scale_j) * bsum_j, the +32 taken back
 *
 * the block sums met in pairs by vpdpwssd (int16 mins or -32 * scales,
 * at most 4096 in magnitude, against Q8_K's int16 sums).  Every sum is an
 * exact int32 (kquant-avx512vnni.c bounds the same ones), so it is the
 * reference's whatever the order; the float part then takes qg_kq_accum's
 * steps lane by lane, each product and sum rounded alone (this file is
 * built without contraction), so every output is the one-row kernel's
 * bit for bit, whichever rows share its tile or its batch.
 */
#include "config.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "kquant-x86.h"
#include "kquant.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Super-blocks per tile chunk: a chunk's tiles are KC * 5.8 KB (measured 1 to 16; 4 to 16 alike). */
#define KC 4
/* Activation rows per pass over a tile (more spill: measured 4 against 6 and 8). */
#define GM 4

/* One super-block of 16 weight rows, as the GEMM reads it. */
struct tile {
	uint8_t q[64][64];	/* quad i (k = 4i .. 4i + 3): row r's four codes in bytes 4r .. 4r + 3 */
	int32_t sc[16][16];	/* sub-block j's scale per row (Q4_K: j < 8) */
	int32_t pr[8][16];	/* int16 pairs met by block sums 2p and 2p + 1 (above) */
	float d[16], dmin[16];
};

/*
 * Bytes OFF .. OFF + 31 of the 16 rows at ROW[r] as eight vectors, V[m]
 * holding bytes 4m .. 4m + 3 of row r in 32-bit lane r: an 8x8 transpose
 * of 32-bit words in each 256-bit half.  Input i < 4 holds rows i and
 * i + 4, input 4 + i rows 8 + i and 12 + i, so that the last step's
 * 128-bit lane moves leave the rows in order.
 */
static ALWAYS_INLINE void transpose16x8(const uint8_t *const row[16], size_t off, __m512i v[8])
{
	__m512i x[8], t[8], u[8];

	for (int i = 0; i < 4; i++) {
		x[i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const void *)(row[i] + off))),
					  _mm256_loadu_si256((const void *)(row[i + 4] + off)), 1);
		x[4 + i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const void *)(row[8 + i] + off))),
					      _mm256_loadu_si256((const void *)(row[12 + i] + off)), 1);
	}
	for (int h = 0; h < 8; h += 4) {
		t[h] = _mm512_unpacklo_epi32(x[h], x[h + 1]);
		t[h + 1] = _mm512_unpackhi_epi32(x[h], x[h + 1]);
		t[h + 2] = _mm512_unpacklo_epi32(x[h + 2], x[h + 3]);
		t[h + 3] = _mm512_unpackhi_epi32(x[h + 2], x[h + 3]);
		/* 128-bit lane L of u[h + q]: word q (L even) or q + 4 (L odd) of four rows */
		u[h] = _mm512_unpacklo_epi64(t[h], t[h + 2]);
		u[h + 1] = _mm512_unpackhi_epi64(t[h], t[h + 2]);
		u[h + 2] = _mm512_unpacklo_epi64(t[h + 1], t[h + 3]);
		u[h + 3] = _mm512_unpackhi_epi64(t[h + 1], t[h + 3]);
	}
	for (int q = 0; q < 4; q++) {
		v[q] = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x88);
		v[q + 4] = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xdd);
	}
}

/* The fp16 values in the low (HIGH = 0) or high halves of the 32-bit lanes of W, as floats. */
static ALWAYS_INLINE __m512 halves(__m512i w, int high)
{
	if (high)
		w = _mm512_srli_epi32(w, 16);
	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w));
}

/* The N (2 or 4) bytes at OFF of each row, zero-extended: lane r is row r's. */
static ALWAYS_INLINE __m512i words(const uint8_t *const row[16], size_t off, size_t n)
{
	uint32_t v[16] = { 0 };

	for (int r = 0; r < 16; r++)
		memcpy(&v[r], row[r] + off, n);
	return _mm512_loadu_si512(v);
}

/* The Q4_K super-block at byte OFF of each of the 16 rows into T. */
static void tile_q4_K(const uint8_t *const row[16], size_t off, struct tile *t)
{
	const __m512i low4 = _mm512_set1_epi8(0x0f);
	const uint8_t *sb[16];
	__m512i v[8];

	for (int r = 0; r < 16; r++)
		sb[r] = row[r] + off;
	/* bytes 32c .. 32c + 31: sub-block 2c in the low nibbles, 2c + 1 in the high */
	for (int c = 0; c < 4; c++) {
		transpose16x8(sb, offsetof(struct qg_block_q4_K, qs) + 32 * (size_t)c, v);
		for (int m = 0; m < 8; m++) {
			_mm512_store_si512(t->q[16 * c + m], _mm512_and_si512(v[m], low4));
			_mm512_store_si512(t->q[16 * c + 8 + m], _mm512_and_si512(_mm512_srli_epi16(v[m], 4), low4));
		}
	}
	/*
	 * The scales and mins of every row at once (qg_q4_K_scale_min, lane
	 * by lane): words 0, 1 and 2 of the 12 bytes hold scales 0-3, mins
	 * 0-3 and the low nibbles of scales and mins 4-7; the top two bits
	 * of those sit in bits 6-7 of each byte of words 0 and 1.
	 */
	const size_t so = offsetof(struct qg_block_q4_K, scales);
	const __m512i u0 = words(sb, so, 4), u1 = words(sb, so + 4, 4), u2 = words(sb, so + 8, 4);
	const __m512i m63 = _mm512_set1_epi32(0x3f), m15 = _mm512_set1_epi32(0x0f), m48 = _mm512_set1_epi32(0x30);
	for (int j = 0; j < 4; j++) {
		const __m128i sh = _mm_cvtsi32_si128(8 * j), sh2 = _mm_cvtsi32_si128(8 * j + 2);
		const __m128i sh4 = _mm_cvtsi32_si128(8 * j + 4);
		const __m512i sc = _mm512_and_si512(_mm512_srl_epi32(u0, sh), m63);
		const __m512i mn = _mm512_and_si512(_mm512_srl_epi32(u1, sh), m63);
		const __m512i sc4 = _mm512_or_si512(_mm512_and_si512(_mm512_srl_epi32(u2, sh), m15),
						    _mm512_and_si512(_mm512_srl_epi32(u0, sh2), m48));
		const __m512i mn4 = _mm512_or_si512(_mm512_and_si512(_mm512_srl_epi32(u2, sh4), m15),
						    _mm512_and_si512(_mm512_srl_epi32(u1, sh2), m48));
		_mm512_store_si512(t->sc[j], sc);
		_mm512_store_si512(t->sc[j + 4], sc4);
		_mm512_store_si512(t->pr[j], _mm512_or_si512(mn, _mm512_slli_epi32(mn, 16)));
		_mm512_store_si512(t->pr[j + 4], _mm512_or_si512(mn4, _mm512_slli_epi32(mn4, 16)));
	}
	const __m512i dd = words(sb, offsetof(struct qg_block_q4_K, d), 4);	/* d, then dmin */
	_mm512_store_ps(t->d, halves(dd, 0));
	_mm512_store_ps(t->dmin, halves(dd, 1));
}

/*
 * Q6_K super-block into T.  Value 128h + 32q + l (q = 0..3) has its low
 * four bits in ql[64h + 32(q & 1) + l] (low nibble for q < 2, high for
 * q >= 2) and its top two in qh[32h + l] at bit 2q; its quad is
 * 32h + 8q + l / 4.
 */
static void tile_q6_K(const uint8_t *const row[16], size_t off, struct tile *t)
{
	const __m512i low4 = _mm512_set1_epi8(0x0f), top = _mm512_set1_epi8(0x30);
	const uint8_t *sb[16];
	__m512i l0[8], l1[8], hb[8];

	for (int r = 0; r < 16; r++)
		sb[r] = row[r] + off;
	for (int h = 0; h < 2; h++) {
		transpose16x8(sb, offsetof(struct qg_block_q6_K, ql) + 64 * (size_t)h, l0);
		transpose16x8(sb, offsetof(struct qg_block_q6_K, ql) + 64 * (size_t)h + 32, l1);
		transpose16x8(sb, offsetof(struct qg_block_q6_K, qh) + 32 * (size_t)h, hb);
		for (int m = 0; m < 8; m++) {
			/* a 16-bit shift then a byte mask: the bits that cross bytes are masked off */
			const __m512i h0 = _mm512_and_si512(_mm512_slli_epi16(hb[m], 4), top);
			const __m512i h1 = _mm512_and_si512(_mm512_slli_epi16(hb[m], 2), top);
			const __m512i h2 = _mm512_and_si512(hb[m], top);
			const __m512i h3 = _mm512_and_si512(_mm512_srli_epi16(hb[m], 2), top);
			_mm512_store_si512(t->q[32 * h + m], _mm512_or_si512(_mm512_and_si512(l0[m], low4), h0));
			_mm512_store_si512(t->q[32 * h + 8 + m], _mm512_or_si512(_mm512_and_si512(l1[m], low4), h1));
			_mm512_store_si512(t->q[32 * h + 16 + m],
					   _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0[m], 4), low4), h2));
			_mm512_store_si512(t->q[32 * h + 24 + m],
					   _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1[m], 4), low4), h3));
		}
	}
	/* the sixteen int8 scales of every row, four words of four; -32 times them in int16 pairs */
	const __m512i lo16 = _mm512_set1_epi32(0xffff);
	for (int c = 0; c < 4; c++) {
		const __m512i v = words(sb, offsetof(struct qg_block_q6_K, scales) + 4 * (size_t)c, 4);
		__m512i sc[4];
		for (int e = 0; e < 4; e++) {
			/* byte e to the top, then down with its sign */
			sc[e] = _mm512_srai_epi32(_mm512_sll_epi32(v, _mm_cvtsi32_si128(24 - 8 * e)), 24);
			_mm512_store_si512(t->sc[4 * c + e], sc[e]);
		}
		for (int e = 0; e < 4; e += 2)
			_mm512_store_si512(t->pr[2 * c + e / 2],
					   _mm512_or_si512(_mm512_and_si512(_mm512_mullo_epi32(sc[e], _mm512_set1_epi32(-32)), lo16),
							   _mm512_slli_epi32(_mm512_mullo_epi32(sc[e + 1], _mm512_set1_epi32(-32)), 16)));
	}
	_mm512_store_ps(t->d, halves(words(sb, offsetof(struct qg_block_q6_K, d), 2), 0));
}

static ALWAYS_INLINE int32_t load32(const void *p)
{
	int32_t v;

	memcpy(&v, p, sizeof v);
	return v;
}

/* The first NCOL (1 .. 16) lanes. */
static ALWAYS_INLINE __mmask16 cols(int ncol)
{
	return ncol >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << ncol) - 1);
}

/*
 * G activation rows (row g's super-block b at A[g * NBA + b]) against the
 * KC tiles T: S[g * LDS + r] for the tile's first NCOL rows, starting
 * from 0 (FIRST) or from what S holds (the chunks before).
 */
static ALWAYS_INLINE void run_tiles(const int G, const int q6, const struct tile *T, int kc,
				    const struct qg_block_q8_K *a, size_t nba, float *s, size_t lds, int first,
				    int ncol)
{
	const int nsub = q6 ? 16 : 8, qps = q6 ? 4 : 8;
	const __mmask16 mask = cols(ncol);
	__m512 acc[GM];

#pragma GCC unroll 8
	for (int g = 0; g < G; g++)
		acc[g] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, s + (size_t)g * lds);

	for (int b = 0; b < kc; b++) {
		const struct tile *t = &T[b];
		__m512i is[GM];

#pragma GCC unroll 8
		for (int g = 0; g < G; g++)
			is[g] = _mm512_setzero_si512();
		for (int j = 0; j < nsub; j++) {
			__m512i x[GM];
#pragma GCC unroll 8
			for (int g = 0; g < G; g++)
				x[g] = _mm512_setzero_si512();
#pragma GCC unroll 8
			for (int i = 0; i < qps; i++) {
				const __m512i w = _mm512_load_si512(t->q[j * qps + i]);
#pragma GCC unroll 8
				for (int g = 0; g < G; g++)
					x[g] = _mm512_dpbusd_epi32(x[g], w,
						_mm512_set1_epi32(load32(a[g * nba + b].qs + 4 * (j * qps + i))));
			}
			const __m512i sc = _mm512_load_si512(t->sc[j]);
#pragma GCC unroll 8
			for (int g = 0; g < G; g++)
				is[g] = _mm512_add_epi32(is[g], _mm512_mullo_epi32(x[g], sc));
		}
		const __m512 d = _mm512_load_ps(t->d), dmin = _mm512_load_ps(t->dmin);
#pragma GCC unroll 8
		for (int g = 0; g < G; g++) {
			const struct qg_block_q8_K *ab = &a[g * nba + b];
			__m512i m = q6 ? is[g] : _mm512_setzero_si512();
#pragma GCC unroll 8
			for (int p = 0; p < 8; p++)
				m = _mm512_dpwssd_epi32(m, _mm512_load_si512(t->pr[p]),
							_mm512_set1_epi32(load32(&ab->bsums[2 * p])));
			const __m512 ad = _mm512_set1_ps(ab->d);
			if (q6) {
				acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_mul_ps(d, ad), _mm512_cvtepi32_ps(m)));
			} else {
				acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_mul_ps(d, ad), _mm512_cvtepi32_ps(is[g])));
				acc[g] = _mm512_sub_ps(acc[g], _mm512_mul_ps(_mm512_mul_ps(dmin, ad), _mm512_cvtepi32_ps(m)));
			}
		}
	}
#pragma GCC unroll 8
	for (int g = 0; g < G; g++)
		_mm512_mask_storeu_ps(s + (size_t)g * lds, mask, acc[g]);
}

/* --- Q8_0 weights --------------------------------------------------------- */

/*
 * Q8_0 blocks carry one scale per 32 values, so a tile is a chunk of KC8
 * blocks of 16 rows, each eight quads and the rows' scales.  The codes
 * are signed: stored XOR 0x80 they are code + 128 as unsigned bytes for
 * vpdpbusd, and sum((w + 128) * a) - 128 * sum(a) = sum(w * a) exactly,
 * the second term (qg_q8_0_aux.nsum, made with the activations) starting
 * the accumulator.  A lane's sum is at most 32 * 255 * 128.  The float
 * part is the reference's: sum += (float)sumi * (dw * da).
 */
#define KC8 16

struct tile8 {
	uint8_t q[8][64];	/* quad i: row r's four codes + 128 in bytes 4r .. 4r + 3 */
	float d[16];
};

static void tile_q8_0(const uint8_t *const row[16], size_t off, struct tile8 *t)
{
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	const uint8_t *sb[16];
	__m512i v[8];

	for (int r = 0; r < 16; r++)
		sb[r] = row[r] + off;
	transpose16x8(sb, offsetof(struct qg_block_q8_0, qs), v);
	for (int m = 0; m < 8; m++)
		_mm512_store_si512(t->q[m], _mm512_xor_si512(v[m], flip));
	_mm512_store_ps(t->d, halves(words(sb, offsetof(struct qg_block_q8_0, d), 2), 0));
}

/* As run_tiles, for Q8_0 tiles (AUX: the activation blocks' facts, as A). */
static ALWAYS_INLINE void run_tiles8(const int G, const struct tile8 *T, int kc, const struct qg_block_q8_0 *a,
				     const struct qg_q8_0_aux *aux, size_t nba, float *s, size_t lds, int first,
				     int ncol)
{
	const __mmask16 mask = cols(ncol);
	__m512 acc[GM];

#pragma GCC unroll 8
	for (int g = 0; g < G; g++)
		acc[g] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, s + (size_t)g * lds);
	for (int b = 0; b < kc; b++) {
		const struct tile8 *t = &T[b];
		__m512i x[GM];

#pragma GCC unroll 8
		for (int g = 0; g < G; g++)
			x[g] = _mm512_set1_epi32(aux[g * nba + b].nsum);
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			const __m512i w = _mm512_load_si512(t->q[i]);
#pragma GCC unroll 8
			for (int g = 0; g < G; g++)
				x[g] = _mm512_dpbusd_epi32(x[g], w, _mm512_set1_epi32(load32(a[g * nba + b].qs + 4 * i)));
		}
		const __m512 d = _mm512_load_ps(t->d);
#pragma GCC unroll 8
		for (int g = 0; g < G; g++)
			acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_cvtepi32_ps(x[g]),
								     _mm512_mul_ps(d, _mm512_set1_ps(aux[g * nba + b].d))));
	}
#pragma GCC unroll 8
	for (int g = 0; g < G; g++)
		_mm512_mask_storeu_ps(s + (size_t)g * lds, mask, acc[g]);
}

#define KQ_GEMM_FAMILY avx512vnni
#define KQ_TILE_ROWS 16
#define KQ_TILE_ALIGN 64
#define KQ_GEMM_Q8_0
#include "kquant-gemm.h"
