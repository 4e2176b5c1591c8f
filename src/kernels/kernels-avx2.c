/*
 * kernels-avx2.c - GEMV/GEMM for the interleaved Q4_0 layouts with AVX2
 * (vpmaddubsw), and the activation quantizers with AVX2, FMA and F16C: the
 * x86-64 kernels for CPUs without AVX-512 VNNI.
 *
 * A weight tile is 8 weight rows (one 8-row group, or two 4-row groups),
 * turned per block into eight ymm registers of unsigned nibble codes
 * (0..15), and an activation row's values, broadcast, meet them in
 * vpmaddubsw, which leaves per 32-bit lane two 16-bit sums of two products
 * of one weight row.  4x4 keeps the AVX-512 VNNI kernels' shape: register
 * q holds quad q (k = 4q .. 4q+3) of the 8 rows, one row per 32-bit lane,
 * against the activation quad broadcast (its 4-byte activation chunks make
 * that the natural load).  4x8 and 8x8 take the stored bytes as they are:
 * a register holds 8 consecutive codes of 4 rows, one row per 64-bit lane,
 * against 8 activations broadcast, so one load serves two vpmaddubsw and
 * the weights need no shuffle; a vphaddd per block then joins each row's
 * two lanes.
 *
 * No saturation.  vpmaddubsw saturates u0*a0 + u1*a1 to int16, and the
 * block's products are gathered with vpaddw, which wraps.  Neither
 * happens: with codes u in 0..15 and activations a in -128..127 a product
 * lies in [-1920, 1905], a pair in [-3840, 3810], and no 16-bit slot
 * gathers more than 16 products (4x4: one pair from each of the 8 quads;
 * 4x8, 8x8: 8 products), so at most [-30720, 30480], inside int16.
 * vpmaddwd by ones then adds slots into the block's exact sum(u*a) in
 * int32, and adding the precomputed -8*sum(a) makes it the exact dot
 * product of the signed weights (u - 8).
 *
 * The float side is the AVX-512 VNNI kernels' operation for operation
 * (kernels-x86.h): convert, weight scales times the activation scale, one
 * fused multiply-add per block into the accumulator, and a chunk of K
 * continued from the outputs stored after the previous one.  So both x86
 * families give the same bits (tests/kernels-test.c checks it), and both
 * have the tolerance against the portable kernel kernels-x86.h states:
 * the portable kernel rounds per chunk of a block and does not fuse.
 *
 * Lane order.  For 4x8 and 8x8 the rows come out as 0 1 4 5 2 3 6 7; the
 * weight scales are loaded in that order too, and the accumulators are put
 * back (vpermq 0xd8, its own inverse) only where they meet memory.  For
 * 4x4 a vperm2i128 per quad gives the rows in order.
 *
 * GEMM: the eight weight registers of a block serve up to 16 activation
 * rows, whose float accumulators the compiler keeps on the stack (the
 * registers hold the weights; the accumulator is the fused multiply-add's
 * memory operand).  Per activation row and block of 8 weight rows that is
 * 8 vpmaddubsw, 6-7 vpaddw, one or two vpmaddwd (and a vphaddd), vpaddd,
 * vcvtdq2ps, vmulps, vfmadd: 20-22 vector operations for 256 MACs, where
 * vpdpbusd zmm needs 8 for 512.  GEMV streams the weights, one tile after
 * the other, with software prefetch ahead of each stream.
 */
#include "config.h"

#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "kernels-x86.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Whether the layout's registers hold rows 0 1 4 5 2 3 6 7 (else 0..7). */
static ALWAYS_INLINE int lay_permuted(enum qg_x86_lay l)
{
	return l != QG_X86_LAY_4X4;
}

static ALWAYS_INLINE __m256i loadu256(const void *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

/*
 * Block OFF (bytes into each row group) of the tile whose row groups start
 * at P0 and P1 (P1 unused for 8x8): W gets the codes of the eight rows
 * (arranged as the layout's block_dot() reads them), DW the eight weight
 * scales in the layout's lane order.  The stored nibbles are the codes XOR
 * 8, so one XOR by 0x88 gives the codes of both nibbles; the low ones are
 * then masked, the high ones shifted down first.  Byte j of a Q4_0 row
 * holds k = j (low nibble) and k = j + 16 (high).
 */
static ALWAYS_INLINE void load_tile(enum qg_x86_lay l, const uint8_t *p0, const uint8_t *p1, size_t off,
				    __m256i w[8], __m256 *dw)
{
	const __m256i m0f = _mm256_set1_epi8(0x0f), m88 = _mm256_set1_epi8((char)0x88);
	__m256i x[4];
	__m128i d;

	if (l == QG_X86_LAY_4X4) {
		/*
		 * 128-bit lane c of a block_q4_0x4 holds bytes 4c .. 4c+3 of
		 * rows 0..3: lane c of both groups side by side is X[c], whose
		 * low nibbles are quad c and high ones quad c + 4.
		 */
		const struct qg_block_q4_0x4 *b0 = (const void *)(p0 + off);
		const struct qg_block_q4_0x4 *b1 = (const void *)(p1 + off);
		__m256i a0 = loadu256(b0->qs), a1 = loadu256(b0->qs + 32);
		__m256i c0 = loadu256(b1->qs), c1 = loadu256(b1->qs + 32);

		x[0] = _mm256_permute2x128_si256(a0, c0, 0x20);
		x[1] = _mm256_permute2x128_si256(a0, c0, 0x31);
		x[2] = _mm256_permute2x128_si256(a1, c1, 0x20);
		x[3] = _mm256_permute2x128_si256(a1, c1, 0x31);
		d = _mm_unpacklo_epi64(_mm_loadl_epi64((const void *)b0->d),
				       _mm_loadl_epi64((const void *)b1->d));
	} else {
		/*
		 * 8x8: qs[0..31] holds rows 0..3, bytes 0..7 each; qs[32..63]
		 * rows 4..7; qs[64..127] the same for bytes 8..15.  A 4x8
		 * block holds the same for its four rows (qs[0..31] bytes
		 * 0..7, qs[32..63] bytes 8..15), so two groups side by side
		 * make the 8x8 picture.  X[0] rows 0..3 and X[1] rows 4..7 of
		 * bytes 0..7, X[2] and X[3] of bytes 8..15, as stored.
		 */
		if (l == QG_X86_LAY_8X8) {
			const struct qg_block_q4_0x8 *b = (const void *)(p0 + off);
#pragma GCC unroll 4
			for (int i = 0; i < 4; i++)
				x[i] = loadu256(b->qs + 32 * i);
			d = _mm_loadu_si128((const void *)b->d);
		} else {
			const struct qg_block_q4_0x4 *b0 = (const void *)(p0 + off);
			const struct qg_block_q4_0x4 *b1 = (const void *)(p1 + off);
			x[0] = loadu256(b0->qs);
			x[1] = loadu256(b1->qs);
			x[2] = loadu256(b0->qs + 32);
			x[3] = loadu256(b1->qs + 32);
			d = _mm_unpacklo_epi64(_mm_loadl_epi64((const void *)b0->d),
					       _mm_loadl_epi64((const void *)b1->d));
		}
		/* scale pairs (0 1) (2 3) (4 5) (6 7) as rows 0 1 4 5 2 3 6 7 */
		d = _mm_shuffle_epi32(d, 0xd8);
	}
	*dw = _mm256_cvtph_ps(d);
#pragma GCC unroll 4
	for (int m = 0; m < 4; m++) {
		__m256i y = _mm256_xor_si256(x[m], m88);
		w[m] = _mm256_and_si256(y, m0f);
		w[m + 4] = _mm256_and_si256(_mm256_srli_epi16(y, 4), m0f);
	}
}

static ALWAYS_INLINE __m256i bcast32(const int8_t *p)
{
	int32_t v;

	memcpy(&v, p, sizeof v);	/* unaligned, alias-safe; one broadcast load */
	return _mm256_set1_epi32(v);
}

static ALWAYS_INLINE __m256i bcast64(const int8_t *p)
{
	int64_t v;

	memcpy(&v, p, sizeof v);
	return _mm256_set1_epi64x(v);
}

/*
 * sum(u*a) over one block of the eight weight rows W (from load_tile) and
 * activation row J at QA, in int32 per lane, rows in the layout's lane
 * order.  IL: the activations' interleave (4 or 8), or 1 for a plain
 * block_q8_0 (GEMV).  See the top of the file for why the 16-bit sums
 * cannot overflow.
 */
static ALWAYS_INLINE __m256i block_dot(enum qg_x86_lay l, const __m256i w[8], const int8_t *qa,
				       const int il, const int j)
{
	const __m256i ones = _mm256_set1_epi16(1);

	if (l == QG_X86_LAY_4X4) {
		/*
		 * W[q] holds quad q of rows 0..7, one row per 32-bit lane:
		 * the activation quad broadcast to every lane.  Two chains
		 * of vpaddw, so that a GEMV's single row does not wait on
		 * one chain of seven.
		 */
#define QUAD(q) (il == 1 ? 4 * (q) : qg_x86_act_off(il, j, (q)))
		__m256i t0 = _mm256_maddubs_epi16(w[0], bcast32(qa + QUAD(0)));
		__m256i t1 = _mm256_maddubs_epi16(w[4], bcast32(qa + QUAD(4)));
#pragma GCC unroll 3
		for (int q = 1; q < 4; q++) {
			t0 = _mm256_add_epi16(t0, _mm256_maddubs_epi16(w[q], bcast32(qa + QUAD(q))));
			t1 = _mm256_add_epi16(t1, _mm256_maddubs_epi16(w[q + 4], bcast32(qa + QUAD(q + 4))));
		}
#undef QUAD
		return _mm256_madd_epi16(_mm256_add_epi16(t0, t1), ones);
	}
	/*
	 * W[2c] holds the codes k = 8c .. 8c+7 of rows 0..3, W[2c+1] of
	 * rows 4..7 (X[0..3] low nibbles for c = 0, 1, high for c = 2, 3),
	 * one row per 64-bit lane: the eight activations k = 8c .. 8c+7,
	 * broadcast, meet both, so one load serves two vpmaddubsw.  Each
	 * 16-bit slot gathers 8 products.  vphaddd then adds each row's two
	 * 32-bit lanes: rows 0 1 4 5 | 2 3 6 7.
	 */
#define PAIR(c) (il == 1 ? 8 * (c) : ((c) * 4 + j) * 8)
	__m256i a = bcast64(qa + PAIR(0));
	__m256i t0 = _mm256_maddubs_epi16(w[0], a), t1 = _mm256_maddubs_epi16(w[1], a);
#pragma GCC unroll 3
	for (int c = 1; c < 4; c++) {
		a = bcast64(qa + PAIR(c));
		t0 = _mm256_add_epi16(t0, _mm256_maddubs_epi16(w[2 * c], a));
		t1 = _mm256_add_epi16(t1, _mm256_maddubs_epi16(w[2 * c + 1], a));
	}
#undef PAIR
	return _mm256_hadd_epi32(_mm256_madd_epi16(t0, ones), _mm256_madd_epi16(t1, ones));
}

/*
 * The row groups of the 8-row tile at weight row C0 (for 4x4 and 4x8 two
 * groups; where only one remains, P1 repeats it and its lanes are computed
 * and not stored), each group RGB bytes long.
 */
static ALWAYS_INLINE void tile_ptrs(enum qg_x86_lay l, const uint8_t *w, size_t rgb, int c0, int nc,
				    const uint8_t **p0, const uint8_t **p1)
{
	const int rows = qg_x86_lay_rows(l);

	*p0 = w + (size_t)(c0 / rows) * rgb;
	*p1 = rows == 4 && nc - c0 >= 8 ? *p0 + rgb : *p0;
}

/* Lanes of the 8 or 4 rows that exist, for vmaskmovps. */
static ALWAYS_INLINE __m256i tile_mask(int c0, int nc)
{
	return nc - c0 >= 8 ? _mm256_set1_epi32(-1) : _mm256_setr_epi32(-1, -1, -1, -1, 0, 0, 0, 0);
}

/* Eight (or the first four) outputs at S into the layout's lane order, and back. */
static ALWAYS_INLINE __m256 acc_load(enum qg_x86_lay l, const float *s, __m256i mask)
{
	__m256 v = _mm256_maskload_ps(s, mask);

	return lay_permuted(l) ? _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xd8)) : v;
}

static ALWAYS_INLINE void acc_store(enum qg_x86_lay l, float *s, __m256i mask, __m256 v)
{
	if (lay_permuted(l))
		v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xd8));
	_mm256_maskstore_ps(s, mask, v);
}

/* --- GEMM --------------------------------------------------------------- */

/*
 * Facts of KC blocks of one group of four activation rows: -8 * the sum of
 * each row's 32 values and the four scales as floats.  vpmaddubsw against
 * bytes of 1 and vpmaddwd against ones give per 32-bit word the sum of
 * four values of one row: row w % 4 of word w for interleave 4, row
 * (w / 2) % 4 for interleave 8.
 */
static void pre_gemm(const struct qg_block_q8_0x4 *a, int kc, int il, struct qg_x86_pre4 *pre)
{
	const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);

	for (int b = 0; b < kc; b++) {
		__m256i s = _mm256_setzero_si256();
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++)
			s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8,
					     loadu256(a[b].qs + 32 * i)), ones16));
		__m128i r;
		if (il == 4) {
			r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
		} else {
			/* words 2r and 2r+1 hold row r: add pairs (rows 0 1 0 1 | 2 3 2 3) */
			s = _mm256_hadd_epi32(s, s);
			r = _mm_unpacklo_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
		}
		r = _mm_sub_epi32(_mm_setzero_si128(), _mm_slli_epi32(r, 3));
		_mm_storeu_si128((void *)pre[b].ns, r);
		_mm_storeu_ps(pre[b].d, _mm_cvtph_ps(_mm_loadl_epi64((const void *)a[b].d)));
	}
}

/* qg_act_facts_fn: pre_gemm over all NB blocks of a group, once per product. */
static void act_facts(const struct qg_block_q8_0x4 *a, int64_t nb, int il, void *f)
{
	pre_gemm(a, (int)nb, il, f);
}

/*
 * G groups of activation rows (4G rows) times one 8-row weight tile, over
 * KC blocks from byte OFF0 of each row group.  A points at group 0's first
 * block of the chunk, groups NB blocks apart; PRE holds the facts,
 * groups PST blocks apart.  FIRST starts from zero, otherwise from what S
 * holds (the previous chunk).
 */
static ALWAYS_INLINE void gemm_tile(enum qg_x86_lay l, const int G, const int il,
				    float *s, size_t lds, const uint8_t *p0, const uint8_t *p1, size_t off0,
				    int kc, const struct qg_block_q8_0x4 *a, size_t nb,
				    const struct qg_x86_pre4 *pre, size_t pst, int first, __m256i mask)
{
	__m256 acc[16];

#pragma GCC unroll 16
	for (int r = 0; r < 4 * G; r++)
		acc[r] = first ? _mm256_setzero_ps() : acc_load(l, s + (size_t)r * lds, mask);

	for (int b = 0; b < kc; b++) {
		__m256i w[8];
		__m256 dw;

		load_tile(l, p0, p1, off0 + (size_t)b * qg_x86_lay_bytes(l), w, &dw);
#pragma GCC unroll 4
		for (int g = 0; g < G; g++) {
			const int8_t *qa = a[g * nb + b].qs;
			const struct qg_x86_pre4 *f = &pre[g * pst + b];
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++) {
				__m256i t = _mm256_add_epi32(block_dot(l, w, qa, il, j), _mm256_set1_epi32(f->ns[j]));
				__m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(f->d[j]));
				acc[g * 4 + j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), sc, acc[g * 4 + j]);
			}
		}
	}

#pragma GCC unroll 16
	for (int r = 0; r < 4 * G; r++)
		acc_store(l, s + (size_t)r * lds, mask, acc[r]);
}

/*
 * The whole GEMM: activation tiles of up to four groups (16 rows), chunks
 * of K, and for each the weight tiles of all NC rows.  Each weight block is
 * unpacked once per activation tile; each activation byte is read from L1
 * once per weight tile.
 */
static ALWAYS_INLINE void gemm_any(enum qg_x86_lay l, const int il, int k, float *restrict s, size_t lds,
				   const void *restrict w, const void *restrict a, const struct qg_x86_pre4 *facts,
				   int nr, int nc)
{
	const size_t nb = (size_t)(k / QG_QK);
	const size_t rgb = nb * (size_t)qg_x86_lay_bytes(l);
	const struct qg_block_q8_0x4 *act = a;
	struct qg_x86_pre4 pre[4 * QG_X86_KC_GEMM];
	const int ngroups = nr / 4;

	for (int g0 = 0; g0 < ngroups; g0 += 4) {
		const int G = ngroups - g0 < 4 ? ngroups - g0 : 4;
		float *sg = s + (size_t)g0 * 4 * lds;
		for (size_t b0 = 0; b0 < nb; b0 += QG_X86_KC_GEMM) {
			const int kc = nb - b0 < QG_X86_KC_GEMM ? (int)(nb - b0) : QG_X86_KC_GEMM;
			const struct qg_block_q8_0x4 *ag = act + (size_t)g0 * nb + b0;
			const size_t off = b0 * (size_t)qg_x86_lay_bytes(l);

			/* the facts of the chunk: made by mul_mat once, or here for each call */
			const struct qg_x86_pre4 *ab = facts ? facts + (size_t)g0 * nb + b0 : pre;
			const size_t pst = facts ? nb : QG_X86_KC_GEMM;
			for (int g = 0; !facts && g < G; g++)
				pre_gemm(ag + g * nb, kc, il, pre + g * QG_X86_KC_GEMM);
			for (int c0 = 0; c0 < nc; c0 += 8) {
				const uint8_t *p0, *p1;
				const __m256i m = tile_mask(c0, nc);

				tile_ptrs(l, w, rgb, c0, nc, &p0, &p1);
				switch (G) {
				case 4:
					gemm_tile(l, 4, il, sg + c0, lds, p0, p1, off, kc, ag, nb, ab, pst, b0 == 0, m);
					break;
				case 3:
					gemm_tile(l, 3, il, sg + c0, lds, p0, p1, off, kc, ag, nb, ab, pst, b0 == 0, m);
					break;
				case 2:
					gemm_tile(l, 2, il, sg + c0, lds, p0, p1, off, kc, ag, nb, ab, pst, b0 == 0, m);
					break;
				default:
					gemm_tile(l, 1, il, sg + c0, lds, p0, p1, off, kc, ag, nb, ab, pst, b0 == 0, m);
					break;
				}
			}
		}
	}
}

/* --- GEMV --------------------------------------------------------------- */

/* Facts of KC blocks of one activation row (see pre_gemm). */
static void pre_gemv(const struct qg_block_q8_0 *a, int kc, struct qg_x86_pre1 *pre)
{
	for (int b = 0; b < kc; b++) {
		__m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), loadu256(a[b].qs)),
					      _mm256_set1_epi16(1));
		__m128i r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
		r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
		r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
		pre[b].ns = -8 * _mm_cvtsi128_si32(r);
		pre[b].d = _cvtsh_ss(a[b].d);
	}
}

/*
 * Bytes ahead of the weight streams that the GEMV asks for: far enough to
 * cover the memory latency at full bandwidth.  A block is 144 bytes of an
 * 8-row group, or 72 of each of two 4-row groups: prefetches 48 bytes
 * apart (three per 8x8 block) leave no cache line out.
 */
#define GEMV_PREFETCH 1024

/* The GEMV's prefetches for the tile block at OFF of the row groups at P0 and P1. */
static ALWAYS_INLINE void gemv_prefetch(enum qg_x86_lay l, const uint8_t *p0, const uint8_t *p1, size_t off)
{
	if (l == QG_X86_LAY_8X8) {
		_mm_prefetch((const char *)p0 + off + GEMV_PREFETCH, _MM_HINT_T0);
		_mm_prefetch((const char *)p0 + off + GEMV_PREFETCH + 48, _MM_HINT_T0);
		_mm_prefetch((const char *)p0 + off + GEMV_PREFETCH + 96, _MM_HINT_T0);
	} else {
		_mm_prefetch((const char *)p0 + off + GEMV_PREFETCH, _MM_HINT_T0);
		_mm_prefetch((const char *)p0 + off + GEMV_PREFETCH + 48, _MM_HINT_T0);
		_mm_prefetch((const char *)p1 + off + GEMV_PREFETCH, _MM_HINT_T0);
		_mm_prefetch((const char *)p1 + off + GEMV_PREFETCH + 48, _MM_HINT_T0);
	}
}

/*
 * NR (1 to 3) activation rows, LDS apart in S, against NC weight rows: each
 * tile block is loaded and unpacked once, then each row takes its steps in
 * the same order as alone, so that a row's sums are the same bits however
 * many rows run beside it.
 */
static ALWAYS_INLINE void gemv_any(enum qg_x86_lay l, const int NR, int k, float *restrict s, size_t lds,
					const void *restrict w, const void *restrict a, int nc)
{
	const size_t nb = (size_t)(k / QG_QK);
	const size_t rgb = nb * (size_t)qg_x86_lay_bytes(l);
	const struct qg_block_q8_0 *act = a;
	struct qg_x86_pre1 pre[3][QG_X86_KC_GEMV];

	for (size_t b0 = 0; b0 < nb; b0 += QG_X86_KC_GEMV) {
		const int kc = nb - b0 < QG_X86_KC_GEMV ? (int)(nb - b0) : QG_X86_KC_GEMV;

		for (int r = 0; r < NR; r++)
			pre_gemv(act + (size_t)r * nb + b0, kc, pre[r]);
		for (int c0 = 0; c0 < nc; c0 += 8) {
			const uint8_t *p0, *p1;
			const __m256i m = tile_mask(c0, nc);
			size_t off = b0 * (size_t)qg_x86_lay_bytes(l);
			__m256 acc[3];

#pragma GCC unroll 3
			for (int r = 0; r < NR; r++)
				acc[r] = b0 == 0 ? _mm256_setzero_ps() : acc_load(l, s + (size_t)r * lds + c0, m);
			tile_ptrs(l, w, rgb, c0, nc, &p0, &p1);
			for (int b = 0; b < kc; b++, off += (size_t)qg_x86_lay_bytes(l)) {
				__m256i wq[8];
				__m256 dw;

				gemv_prefetch(l, p0, p1, off);
				load_tile(l, p0, p1, off, wq, &dw);
#pragma GCC unroll 3
				for (int r = 0; r < NR; r++) {
					__m256i t = _mm256_add_epi32(block_dot(l, wq, act[(size_t)r * nb + b0 + b].qs, 1, 0),
								     _mm256_set1_epi32(pre[r][b].ns));
					acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t),
								 _mm256_mul_ps(dw, _mm256_set1_ps(pre[r][b].d)), acc[r]);
				}
			}
#pragma GCC unroll 3
			for (int r = 0; r < NR; r++)
				acc_store(l, s + (size_t)r * lds + c0, m, acc[r]);
		}
	}
}

/* NR rows of LAY: two or three at once, else one by one. */
static ALWAYS_INLINE void gemv_rows_lay(enum qg_x86_lay l, int k, float *restrict s, size_t lds, const void *restrict w,
					const void *restrict a, int nr, int nc)
{
	const struct qg_block_q8_0 *act = a;

	if (nr == 2) {
		gemv_any(l, 2, k, s, lds, w, a, nc);
	} else if (nr == 3) {
		gemv_any(l, 3, k, s, lds, w, a, nc);
	} else {
		for (int r = 0; r < nr; r++)
			gemv_any(l, 1, k, s + (size_t)r * lds, 0, w, act + (size_t)r * (size_t)(k / QG_QK), nc);
	}
}

void qg_avx2_gemv_rows_4x4(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			   int nr, int nc)
{
	gemv_rows_lay(QG_X86_LAY_4X4, k, s, lds, w, a, nr, nc);
}

void qg_avx2_gemv_rows_4x8(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			   int nr, int nc)
{
	gemv_rows_lay(QG_X86_LAY_4X8, k, s, lds, w, a, nr, nc);
}

void qg_avx2_gemv_rows_8x8(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			   int nr, int nc)
{
	gemv_rows_lay(QG_X86_LAY_8X8, k, s, lds, w, a, nr, nc);
}

void qg_avx2_gemv_4x4(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv_any(QG_X86_LAY_4X4, 1, k, s, 0, w, a, nc);
}

void qg_avx2_gemv_4x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv_any(QG_X86_LAY_4X8, 1, k, s, 0, w, a, nc);
}

void qg_avx2_gemv_8x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv_any(QG_X86_LAY_8X8, 1, k, s, 0, w, a, nc);
}

QG_X86_GEMM_ENTRIES(4x4, QG_X86_LAY_4X4, 4)
QG_X86_GEMM_ENTRIES(4x8, QG_X86_LAY_4X8, 8)
QG_X86_GEMM_ENTRIES(8x8, QG_X86_LAY_8X8, 8)

/* --- activation quantizers ---------------------------------------------- */

/*
 * Codes of 8 values X times the inverse scale ID, exactly as q8_code() in
 * quant.c: roundf (half away from zero, see QG_X86_HALF_BELOW), and 0
 * where |v| > 127.5 or v is NaN (a zero or infinite scale's products).
 * In int32, each in -128..128.
 */
static ALWAYS_INLINE __m256i q8_codes(__m256 x, __m256 id)
{
	const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(QG_X86_HALF_BELOW);
	__m256 v = _mm256_mul_ps(x, id);
	__m256 h = _mm256_or_ps(_mm256_and_ps(v, sign), half);
	__m256i i = _mm256_cvttps_epi32(_mm256_add_ps(v, h));
	__m256 ok = _mm256_cmp_ps(_mm256_andnot_ps(sign, v), _mm256_set1_ps(127.5f), _CMP_LE_OQ);

	return _mm256_and_si256(i, _mm256_castps_si256(ok));
}

/*
 * The 32 codes of one block (X: its 32 values) in order, each the low byte
 * of its int32 code as quant.c's (int8_t) conversion takes it: the packs
 * are exact (|code| <= 128 fits int16) and the last one packs bytes
 * already masked to 0..255, so nothing saturates.
 */
static ALWAYS_INLINE __m256i q8_block(const __m256 x[4], __m256 id)
{
	const __m256i lo8 = _mm256_set1_epi16(0xff);
	__m256i p0 = _mm256_packs_epi32(q8_codes(x[0], id), q8_codes(x[1], id));
	__m256i p1 = _mm256_packs_epi32(q8_codes(x[2], id), q8_codes(x[3], id));
	__m256i b = _mm256_packus_epi16(_mm256_and_si256(p0, lo8), _mm256_and_si256(p1, lo8));

	/* 32-bit words hold x0[0..3] x1[0..3] x2[0..3] x3[0..3] | x0[4..7] ... */
	return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/*
 * The scale of one block (X: its 32 values), as quant.c computes it, or -1
 * if the block holds a NaN (whose payload quant.c carries into the scale:
 * such blocks are left to it).
 */
static ALWAYS_INLINE int block_scale(const float *p, __m256 x[4], float *d, float *id)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 amax = _mm256_setzero_ps(), nan = _mm256_setzero_ps();

	for (int i = 0; i < 4; i++) {
		x[i] = _mm256_loadu_ps(p + 8 * i);
		nan = _mm256_or_ps(nan, _mm256_cmp_ps(x[i], x[i], _CMP_UNORD_Q));
		amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, x[i]));
	}
	if (_mm256_movemask_ps(nan))
		return -1;
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	*d = _mm_cvtss_f32(m) / 127.0f;
	*id = *d != 0.0f ? 1.0f / *d : 0.0f;
	return 0;
}

static void quant_row(const float *x, struct qg_block_q8_0 *y, int64_t k)
{
	for (int64_t b = 0; b < k / QG_QK; b++, x += QG_QK) {
		__m256 v[4];
		float d, id;

		if (block_scale(x, v, &d, &id) < 0) {
			qg_quantize_row_q8_0(x, &y[b], QG_QK);
			continue;
		}
		y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
		_mm256_storeu_si256((__m256i *)y[b].qs, q8_block(v, _mm256_set1_ps(id)));
	}
}

static void quant_x4(const float *x, size_t ldx, struct qg_block_q8_0x4 *y, int64_t k, int ileave)
{
	for (int64_t b = 0; b < k / QG_QK; b++) {
		__m256i r[4], o[4];
		int nan = 0;

		for (int i = 0; i < 4; i++) {
			__m256 v[4];
			float d, id;

			if (block_scale(x + i * ldx + b * QG_QK, v, &d, &id) < 0) {
				nan = 1;
				break;
			}
			y[b].d[i] = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
			r[i] = q8_block(v, _mm256_set1_ps(id));
		}
		if (nan) {
			qg_quantize_rows_q8_0x4(x + b * QG_QK, ldx, &y[b], QG_QK, ileave);
			continue;
		}
		/* chunk c of ILEAVE bytes of row i goes to qs[(c*4 + i)*ILEAVE] */
		if (ileave == 4) {
			__m256i u01 = _mm256_unpacklo_epi32(r[0], r[1]), v01 = _mm256_unpackhi_epi32(r[0], r[1]);
			__m256i u23 = _mm256_unpacklo_epi32(r[2], r[3]), v23 = _mm256_unpackhi_epi32(r[2], r[3]);
			__m256i c04 = _mm256_unpacklo_epi64(u01, u23), c15 = _mm256_unpackhi_epi64(u01, u23);
			__m256i c26 = _mm256_unpacklo_epi64(v01, v23), c37 = _mm256_unpackhi_epi64(v01, v23);

			o[0] = _mm256_permute2x128_si256(c04, c15, 0x20);
			o[1] = _mm256_permute2x128_si256(c26, c37, 0x20);
			o[2] = _mm256_permute2x128_si256(c04, c15, 0x31);
			o[3] = _mm256_permute2x128_si256(c26, c37, 0x31);
		} else {
			__m256i u01 = _mm256_unpacklo_epi64(r[0], r[1]), v01 = _mm256_unpackhi_epi64(r[0], r[1]);
			__m256i u23 = _mm256_unpacklo_epi64(r[2], r[3]), v23 = _mm256_unpackhi_epi64(r[2], r[3]);

			o[0] = _mm256_permute2x128_si256(u01, u23, 0x20);
			o[1] = _mm256_permute2x128_si256(v01, v23, 0x20);
			o[2] = _mm256_permute2x128_si256(u01, u23, 0x31);
			o[3] = _mm256_permute2x128_si256(v01, v23, 0x31);
		}
		for (int i = 0; i < 4; i++)
			_mm256_storeu_si256((__m256i *)(y[b].qs + 32 * i), o[i]);
	}
}

const struct qg_kernel qg_kernels_avx2[QG_LAYOUT_COUNT] = {
	[QG_LAYOUT_4X4] = {
		.name = "avx2 4x4", .family = QG_KF_AVX2,
		.gemv = qg_avx2_gemv_4x4, .gemv_rows = qg_avx2_gemv_rows_4x4, .gemm = gemm_4x4, .act_ileave = 4,
		.act_facts = act_facts, .gemm_facts = gemm_facts_4x4, .act_facts_size = sizeof(struct qg_x86_pre4),
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
	[QG_LAYOUT_4X8] = {
		.name = "avx2 4x8", .family = QG_KF_AVX2,
		.gemv = qg_avx2_gemv_4x8, .gemv_rows = qg_avx2_gemv_rows_4x8, .gemm = gemm_4x8, .act_ileave = 8,
		.act_facts = act_facts, .gemm_facts = gemm_facts_4x8, .act_facts_size = sizeof(struct qg_x86_pre4),
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
	[QG_LAYOUT_8X8] = {
		.name = "avx2 8x8", .family = QG_KF_AVX2,
		.gemv = qg_avx2_gemv_8x8, .gemv_rows = qg_avx2_gemv_rows_8x8, .gemm = gemm_8x8, .act_ileave = 8,
		.act_facts = act_facts, .gemm_facts = gemm_facts_8x8, .act_facts_size = sizeof(struct qg_x86_pre4),
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
};
