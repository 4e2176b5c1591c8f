/*
 * kernels-avx512vnni.c - GEMM for the interleaved Q4_0 layouts with
 * AVX-512 VNNI (vpdpbusd), and the activation quantizers with AVX-512.
 * The family's GEMVs are the AVX2 ones (kernels-x86.h says why).
 *
 * One shape serves all three layouts: a weight tile is 16 weight rows (two
 * 8-row groups, or four 4-row groups), turned per block into eight zmm
 * registers, one per quad of k values (k = 4q .. 4q+3), holding in each
 * 32-bit lane the four unsigned nibble codes of one weight row (8x8: in
 * the order tile_to_rows undoes, lane r row r otherwise).  Then one vpdpbusd
 * whose other operand is the quad of an activation row broadcast from
 * memory ({1to16}) does 64 useful multiply-accumulates, and eight of them
 * make the row's 16 block dot products with every lane in use.  Only the
 * weights need shuffling, and a tile's shuffles are shared by all the
 * activation rows it meets (up to 16 in the GEMM), so they cost little.
 *
 * Per block and activation row the float side is a convert, a multiply of
 * the weight scales by the broadcast activation scale and a fused
 * multiply-add; the -8*sum(a) of the unsigned trick starts the int32
 * accumulator, broadcast from a small table of per-block facts built on
 * the stack for a chunk of K (see kernels-x86.h for the arithmetic and the
 * tolerance against the portable kernel).
 */
#include "config.h"

#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "kernels-x86.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE int32_t load32(const void *p)
{
	int32_t v;

	memcpy(&v, p, sizeof v);	/* unaligned, alias-safe; one broadcast load */
	return v;
}

/* An int32 read through any pointer, for an asm memory operand. */
typedef int32_t qg_i32_any __attribute__((may_alias, aligned(1)));

/*
 * vpdpbusd T += W x (the four bytes at A, broadcast): with the broadcast
 * in the instruction's {1to16} memory operand, which GCC 12 does not fold
 * from the intrinsics (it loads each into a register of its own first).
 */
static ALWAYS_INLINE __m512i dpbusd_bcast(__m512i t, __m512i w, const int8_t *a)
{
	__asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(t) : "v"(w), "m"(*(const qg_i32_any *)a));
	return t;
}

/* vpternlogd truth table for (A & B) ^ C. */
#define TL_AND_XOR 0x6a

/*
 * Block OFF (bytes into each row group) of the tile whose row groups start
 * at P[0..]: W[q] gets the unsigned codes of quad q for the 16 rows, DW the
 * 16 weight scales.  The stored nibbles are XOR 8 of the codes (the 0x88
 * flip), so (x & 0x0f) ^ 0x08 in one vpternlogd gives the low-nibble codes,
 * and the same after a shift the high ones.  Byte j of a Q4_0 row holds
 * k = j (low nibble) and k = j + 16 (high), so X below, holding bytes
 * 4m .. 4m+3 of each row, gives quad m low and quad m + 4 high.
 */
static ALWAYS_INLINE void load_tile(enum qg_x86_lay l, const uint8_t *const p[4], size_t off,
				    __m512i w[8], __m512 *dw)
{
	const __m512i m0f = _mm512_set1_epi8(0x0f), m08 = _mm512_set1_epi8(0x08);
	__m512i x[4];

	if (l == QG_X86_LAY_8X8) {
		/*
		 * qs[0..63] of a block_q4_0x8: rows 0..7, bytes 0..7 each, so
		 * 32-bit lane 2r + e holds bytes 4e .. 4e+3 of row r.  The
		 * even lanes of both groups give quad 0 of 16 rows, the odd
		 * lanes quad 1; qs[64..127] the same for bytes 8..15.  An
		 * in-lane shuffle picks them, so the lanes hold the rows in
		 * the order tile_to_rows undoes, not 0..15: the scales follow.
		 */
		const struct qg_block_q4_0x8 *b0 = (const void *)(p[0] + off);
		const struct qg_block_q4_0x8 *b1 = (const void *)(p[1] + off);
		__m512 a0 = _mm512_castsi512_ps(_mm512_loadu_si512(b0->qs));
		__m512 a1 = _mm512_castsi512_ps(_mm512_loadu_si512(b0->qs + 64));
		__m512 c0 = _mm512_castsi512_ps(_mm512_loadu_si512(b1->qs));
		__m512 c1 = _mm512_castsi512_ps(_mm512_loadu_si512(b1->qs + 64));

		x[0] = _mm512_castps_si512(_mm512_shuffle_ps(a0, c0, 0x88));
		x[1] = _mm512_castps_si512(_mm512_shuffle_ps(a0, c0, 0xdd));
		x[2] = _mm512_castps_si512(_mm512_shuffle_ps(a1, c1, 0x88));
		x[3] = _mm512_castps_si512(_mm512_shuffle_ps(a1, c1, 0xdd));
		/* scale pairs of the two groups alternate, as the rows do */
		__m128i d0 = _mm_loadu_si128((const void *)b0->d), d1 = _mm_loadu_si128((const void *)b1->d);
		__m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi32(d0, d1)),
						    _mm_unpackhi_epi32(d0, d1), 1);
		*dw = _mm512_cvtph_ps(h);
	} else {
		const struct qg_block_q4_0x4 *b[4];
		__m512i r[4];

		/* unrolled, or GCC passes R through memory */
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) {
			b[i] = (const void *)(p[i] + off);
			r[i] = _mm512_loadu_si512(b[i]->qs);
		}
		if (l == QG_X86_LAY_4X8) {
			/*
			 * 64-bit lane 4c + r holds bytes 8c .. 8c+7 of row r.
			 * Putting chunk c of two groups side by side makes the
			 * 8x8 picture (8 rows of 8 bytes), handled as above.
			 */
			const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
			const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
			__m512i t0 = _mm512_shuffle_i64x2(r[0], r[1], 0x44);
			__m512i t1 = _mm512_shuffle_i64x2(r[2], r[3], 0x44);
			__m512i u0 = _mm512_shuffle_i64x2(r[0], r[1], 0xee);
			__m512i u1 = _mm512_shuffle_i64x2(r[2], r[3], 0xee);

			x[0] = _mm512_permutex2var_epi32(t0, ev, t1);
			x[1] = _mm512_permutex2var_epi32(t0, od, t1);
			x[2] = _mm512_permutex2var_epi32(u0, ev, u1);
			x[3] = _mm512_permutex2var_epi32(u0, od, u1);
		} else {
			/*
			 * 128-bit lane c holds bytes 4c .. 4c+3 of rows 0..3:
			 * a 4x4 transpose of 128-bit lanes over the four
			 * groups gives quad c of all 16 rows.
			 */
			__m512i t0 = _mm512_shuffle_i64x2(r[0], r[1], 0x44);
			__m512i t1 = _mm512_shuffle_i64x2(r[2], r[3], 0x44);
			__m512i u0 = _mm512_shuffle_i64x2(r[0], r[1], 0xee);
			__m512i u1 = _mm512_shuffle_i64x2(r[2], r[3], 0xee);

			x[0] = _mm512_shuffle_i64x2(t0, t1, 0x88);
			x[1] = _mm512_shuffle_i64x2(t0, t1, 0xdd);
			x[2] = _mm512_shuffle_i64x2(u0, u1, 0x88);
			x[3] = _mm512_shuffle_i64x2(u0, u1, 0xdd);
		}
		/* four groups' four fp16 scales into 16 halves, in row order */
		__m128i d01 = _mm_unpacklo_epi64(_mm_loadl_epi64((const void *)b[0]->d),
						 _mm_loadl_epi64((const void *)b[1]->d));
		__m128i d23 = _mm_unpacklo_epi64(_mm_loadl_epi64((const void *)b[2]->d),
						 _mm_loadl_epi64((const void *)b[3]->d));
		*dw = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(d01), d23, 1));
	}
	/* unrolled, or GCC keeps x and w in memory, stored and reloaded per block */
#pragma GCC unroll 4
	for (int m = 0; m < 4; m++) {
		w[m] = _mm512_ternarylogic_epi32(x[m], m0f, m08, TL_AND_XOR);
		w[m + 4] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(x[m], 4), m0f, m08, TL_AND_XOR);
	}
}

/*
 * The row groups of the 16-row tile at weight row C0, NC rows in all, each
 * group RGB bytes long: groups past the end repeat the last one (their
 * lanes are computed and not stored), so nothing is read out of bounds.
 */
static ALWAYS_INLINE void tile_ptrs(enum qg_x86_lay l, const uint8_t *w, size_t rgb, int c0, int nc,
				    const uint8_t *p[4])
{
	const int rows = qg_x86_lay_rows(l), ngroups = 16 / rows;
	int valid = (nc - c0 < 16 ? nc - c0 : 16) / rows;

	for (int i = 0; i < ngroups; i++)
		p[i] = w + (size_t)(c0 / rows + (i < valid ? i : valid - 1)) * rgb;
	for (int i = ngroups; i < 4; i++)
		p[i] = p[0];
}

static ALWAYS_INLINE __mmask16 tile_mask(int c0, int nc)
{
	return nc - c0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nc - c0)) - 1);
}

/* --- GEMM --------------------------------------------------------------- */

/*
 * Where load_tile puts the tile's rows: 4x4 and 4x8 in order, 8x8 with
 * lane 4i + 2g + t holding row 8g + 2i + t (load_tile says why).  The
 * accumulators keep that order; tile_to_rows and tile_from_rows convert
 * at the edges of the tile, where the results are stored and loaded.
 */
static ALWAYS_INLINE int tile_ordered(enum qg_x86_lay l)
{
	return l != QG_X86_LAY_8X8;
}

static ALWAYS_INLINE __m512 tile_to_rows(enum qg_x86_lay l, __m512 v)
{
	const __m512i idx = _mm512_set_epi32(15, 14, 11, 10, 7, 6, 3, 2, 13, 12, 9, 8, 5, 4, 1, 0);

	return tile_ordered(l) ? v : _mm512_permutexvar_ps(idx, v);
}

static ALWAYS_INLINE __m512 tile_from_rows(enum qg_x86_lay l, __m512 v)
{
	const __m512i idx = _mm512_set_epi32(15, 14, 7, 6, 13, 12, 5, 4, 11, 10, 3, 2, 9, 8, 1, 0);

	return tile_ordered(l) ? v : _mm512_permutexvar_ps(idx, v);
}

/*
 * Bytes ahead of the weight streams the GEMM asks for: with few activation
 * rows (a batch of decode steps) the tile's arithmetic no longer hides the
 * memory latency, and each of its row groups is a stream of its own.
 */
#define GEMM_PREFETCH 1024

static ALWAYS_INLINE void prefetch_tile(enum qg_x86_lay l, const uint8_t *const p[4], size_t off)
{
	const int ngroups = 16 / qg_x86_lay_rows(l), bytes = qg_x86_lay_bytes(l);

#pragma GCC unroll 4
	for (int i = 0; i < ngroups; i++)
#pragma GCC unroll 4
		for (int c = 0; c < bytes; c += 64)
			_mm_prefetch((const char *)p[i] + off + GEMM_PREFETCH + c, _MM_HINT_T0);
}

/*
 * Facts of KC blocks of one group of four activation rows: -8 * the sum of
 * each row's 32 values and the four scales as floats.  The sums come from
 * vpdpbusd against bytes of 1; each 32-bit lane then holds four values of
 * one row (row l % 4 for interleave 4, (l / 2) % 4 for interleave 8).
 */
static void pre_gemm(const struct qg_block_q8_0x4 *a, int kc, int il, struct qg_x86_pre4 *pre)
{
	const __m512i ones = _mm512_set1_epi8(1);

	for (int b = 0; b < kc; b++) {
		__m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(a[b].qs));
		s = _mm512_dpbusd_epi32(s, ones, _mm512_loadu_si512(a[b].qs + 64));
		__m256i h = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
		__m128i r;
		if (il == 4) {
			r = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
		} else {
			/* lanes 2r and 2r+1 hold row r: add pairs, keep the low halves */
			h = _mm256_add_epi32(h, _mm256_srli_epi64(h, 32));
			r = _mm256_cvtepi64_epi32(h);
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
 * G groups of activation rows (4G rows) times T (1 or 2) adjacent 16-row
 * weight tiles, tile i at P[i] writing S + 16i under MASK[i], over KC
 * blocks starting at block B0.  A points at group 0's block B0, groups NB
 * blocks apart; PRE holds the facts, groups PST blocks apart.  FIRST
 * starts from zero, otherwise from what S holds (the previous chunk).
 *
 * With one or two groups a tile's 4G vpdpbusd chains per block are too
 * few to keep the multipliers busy through the unpacking; a second tile
 * (where tile_pairs says it pays) doubles the independent chains and
 * shares each activation broadcast.  Three or four groups have chains
 * enough, and no registers for a second tile's accumulators.
 */
static ALWAYS_INLINE void gemm_tile(enum qg_x86_lay l, const int G, const int T, const int il,
				    float *s, size_t lds, const uint8_t *const p[2][4], size_t off0,
				    int kc, const struct qg_block_q8_0x4 *a, size_t nb,
				    const struct qg_x86_pre4 *pre, size_t pst, int first, const __mmask16 mask[2])
{
	__m512 acc[2][4][4];

#pragma GCC unroll 2
	for (int i = 0; i < T; i++)
#pragma GCC unroll 4
		for (int g = 0; g < G; g++)
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++) {
				float *si = s + 16 * i + (size_t)(g * 4 + j) * lds;
				acc[i][g][j] = first ? _mm512_setzero_ps()
						     : tile_from_rows(l, _mm512_maskz_loadu_ps(mask[i], si));
			}

	for (int b = 0; b < kc; b++) {
		__m512i w[2][8];
		__m512 dw[2];
		const size_t off = off0 + (size_t)b * qg_x86_lay_bytes(l);

#pragma GCC unroll 2
		for (int i = 0; i < T; i++) {
			prefetch_tile(l, p[i], off);
			load_tile(l, p[i], off, w[i], &dw[i]);
		}
#pragma GCC unroll 4
		for (int g = 0; g < G; g++) {
			const int8_t *qa = a[g * nb + b].qs;
			const struct qg_x86_pre4 *f = &pre[g * pst + b];
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++) {
				__m512i t[2];
#pragma GCC unroll 2
				for (int i = 0; i < T; i++)
					t[i] = _mm512_set1_epi32(f->ns[j]);
#pragma GCC unroll 8
				for (int q = 0; q < 8; q++) {
					const int8_t *aj = qa + qg_x86_act_off(il, j, q);

					if (T == 1) {
						t[0] = dpbusd_bcast(t[0], w[0][q], aj);
						continue;
					}
					__m512i aq = _mm512_set1_epi32(load32(aj));
#pragma GCC unroll 2
					for (int i = 0; i < T; i++)
						t[i] = _mm512_dpbusd_epi32(t[i], w[i][q], aq);
				}
#pragma GCC unroll 2
				for (int i = 0; i < T; i++) {
					__m512 sc = _mm512_mul_ps(dw[i], _mm512_set1_ps(f->d[j]));
					acc[i][g][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[i]), sc, acc[i][g][j]);
				}
			}
		}
	}

#pragma GCC unroll 2
	for (int i = 0; i < T; i++)
#pragma GCC unroll 4
		for (int g = 0; g < G; g++)
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++)
				_mm512_mask_storeu_ps(s + 16 * i + (size_t)(g * 4 + j) * lds, mask[i],
						      tile_to_rows(l, acc[i][g][j]));
}

/*
 * Whether gemm_tile takes weight tiles two at a time for G groups: where
 * the doubled state of the unpacking and the accumulators spills little
 * enough to gain.  The 8x8 unpack needs the fewest registers; the 4x8
 * one spills and loses, the 4x4 one gains nothing measurable.
 */
static ALWAYS_INLINE int tile_pairs(enum qg_x86_lay l, int G)
{
	return l == QG_X86_LAY_8X8 && G <= 2;
}

/*
 * The whole GEMM: activation tiles of up to four groups (16 rows), chunks
 * of K, and for each the weight tiles of all NC rows, two at a time where
 * tile_pairs says so.  Each weight block is unpacked once per activation
 * tile; each activation byte is read from L1 once per weight tile (or
 * pair).
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
			/* the facts of the chunk: made by mul_mat once, or here for each call */
			const struct qg_x86_pre4 *ab = facts ? facts + (size_t)g0 * nb + b0 : pre;
			const size_t pst = facts ? nb : QG_X86_KC_GEMM;
			const struct qg_block_q8_0x4 *ag = act + (size_t)g0 * nb + b0;
			const size_t off = b0 * (size_t)qg_x86_lay_bytes(l);

			for (int g = 0; !facts && g < G; g++)
				pre_gemm(ag + g * nb, kc, il, pre + g * QG_X86_KC_GEMM);
			for (int c0 = 0, T; c0 < nc; c0 += 16 * T) {
				const uint8_t *p[2][4];
				__mmask16 m[2];

				T = tile_pairs(l, G) && c0 + 16 < nc ? 2 : 1;
				for (int i = 0; i < T; i++) {
					tile_ptrs(l, w, rgb, c0 + 16 * i, nc, p[i]);
					m[i] = tile_mask(c0 + 16 * i, nc);
				}
				if (T == 2 && G == 2)
					gemm_tile(l, 2, 2, il, sg + c0, lds, p, off, kc, ag, nb, ab, pst, b0 == 0, m);
				else if (T == 2)
					gemm_tile(l, 1, 2, il, sg + c0, lds, p, off, kc, ag, nb, ab, pst, b0 == 0, m);
				else if (G == 4)
					gemm_tile(l, 4, 1, il, sg + c0, lds, p, off, kc, ag, nb, ab, pst, b0 == 0, m);
				else if (G == 3)
					gemm_tile(l, 3, 1, il, sg + c0, lds, p, off, kc, ag, nb, ab, pst, b0 == 0, m);
				else if (G == 2)
					gemm_tile(l, 2, 1, il, sg + c0, lds, p, off, kc, ag, nb, ab, pst, b0 == 0, m);
				else
					gemm_tile(l, 1, 1, il, sg + c0, lds, p, off, kc, ag, nb, ab, pst, b0 == 0, m);
			}
		}
	}
}

/*
 * GEMV: the family takes the AVX2 GEMVs (kernels-x86.h says why).  A zmm
 * GEMV over 16-row tiles was here, slower than they are; git history has
 * it.
 */

QG_X86_GEMM_ENTRIES(4x4, QG_X86_LAY_4X4, 4)
QG_X86_GEMM_ENTRIES(4x8, QG_X86_LAY_4X8, 8)
QG_X86_GEMM_ENTRIES(8x8, QG_X86_LAY_8X8, 8)

/* --- activation quantizers ---------------------------------------------- */

/*
 * Codes of 16 values X times the inverse scale ID, exactly as q8_code()
 * in quant.c: roundf (half away from zero, see QG_X86_HALF_BELOW), and 0
 * where |v| > 127.5 or v is NaN (a zero or infinite scale's products).
 */
static inline __m128i q8_codes(__m512 x, __m512 id)
{
	const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
	const __m512i half = _mm512_castps_si512(_mm512_set1_ps(QG_X86_HALF_BELOW));
	__m512 v = _mm512_mul_ps(x, id);
	/* copysign(half, v) = (v & sign) | half: vpternlogd table 0xea */
	__m512 h = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(v), sign, half, 0xea));
	__m512i i = _mm512_cvttps_epi32(_mm512_add_ps(v, h));
	__mmask16 ok = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(127.5f), _CMP_LE_OQ);

	return _mm512_cvtepi32_epi8(_mm512_maskz_mov_epi32(ok, i));
}

/*
 * The scale of one block (X0, X1: its 32 values), as quant.c computes it,
 * or -1 if the block holds a NaN (whose payload quant.c carries into the
 * scale: such blocks are left to it).
 */
static inline int block_scale(__m512 x0, __m512 x1, float *d, float *id)
{
	if (_mm512_cmp_ps_mask(x0, x1, _CMP_UNORD_Q))
		return -1;
	float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
	*d = amax / 127.0f;
	*id = *d != 0.0f ? 1.0f / *d : 0.0f;
	return 0;
}

static void quant_row(const float *x, struct qg_block_q8_0 *y, int64_t k)
{
	for (int64_t b = 0; b < k / QG_QK; b++, x += QG_QK) {
		__m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
		float d, id;

		if (block_scale(x0, x1, &d, &id) < 0) {
			qg_quantize_row_q8_0(x, &y[b], QG_QK);
			continue;
		}
		y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
		__m512 vid = _mm512_set1_ps(id);
		_mm_storeu_si128((void *)y[b].qs, q8_codes(x0, vid));
		_mm_storeu_si128((void *)(y[b].qs + 16), q8_codes(x1, vid));
	}
}

static void quant_x4(const float *x, size_t ldx, struct qg_block_q8_0x4 *y, int64_t k, int ileave)
{
	/* where each 32-bit (interleave 4) or 64-bit (8) piece of out comes from,
	 * for rows 0/1 in the first source and 2/3 in the second */
	const __m512i i4lo = _mm512_set_epi32(27, 19, 11, 3, 26, 18, 10, 2, 25, 17, 9, 1, 24, 16, 8, 0);
	const __m512i i4hi = _mm512_set_epi32(31, 23, 15, 7, 30, 22, 14, 6, 29, 21, 13, 5, 28, 20, 12, 4);
	const __m512i i8lo = _mm512_set_epi64(13, 9, 5, 1, 12, 8, 4, 0);
	const __m512i i8hi = _mm512_set_epi64(15, 11, 7, 3, 14, 10, 6, 2);

	for (int64_t b = 0; b < k / QG_QK; b++) {
		__m256i row[4];
		int nan = 0;

		for (int r = 0; r < 4 && !nan; r++) {
			const float *xr = x + r * ldx + b * QG_QK;
			__m512 x0 = _mm512_loadu_ps(xr), x1 = _mm512_loadu_ps(xr + 16);
			float d, id;

			if (block_scale(x0, x1, &d, &id) < 0) {
				nan = 1;
				break;
			}
			y[b].d[r] = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
			__m512 vid = _mm512_set1_ps(id);
			row[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(q8_codes(x0, vid)),
							 q8_codes(x1, vid), 1);
		}
		if (nan) {
			qg_quantize_rows_q8_0x4(x + b * QG_QK, ldx, &y[b], QG_QK, ileave);
			continue;
		}
		__m512i r01 = _mm512_inserti64x4(_mm512_castsi256_si512(row[0]), row[1], 1);
		__m512i r23 = _mm512_inserti64x4(_mm512_castsi256_si512(row[2]), row[3], 1);
		__m512i lo, hi;
		if (ileave == 4) {
			lo = _mm512_permutex2var_epi32(r01, i4lo, r23);
			hi = _mm512_permutex2var_epi32(r01, i4hi, r23);
		} else {
			lo = _mm512_permutex2var_epi64(r01, i8lo, r23);
			hi = _mm512_permutex2var_epi64(r01, i8hi, r23);
		}
		_mm512_storeu_si512(y[b].qs, lo);
		_mm512_storeu_si512(y[b].qs + 64, hi);
	}
}

const struct qg_kernel qg_kernels_avx512vnni[QG_LAYOUT_COUNT] = {
	[QG_LAYOUT_4X4] = {
		.name = "avx512vnni 4x4, avx2 gemv", .family = QG_KF_AVX512VNNI,
		.gemv = qg_avx2_gemv_4x4, .gemv_rows = qg_avx2_gemv_rows_4x4, .gemm = gemm_4x4, .act_ileave = 4,
		.act_facts = act_facts, .gemm_facts = gemm_facts_4x4, .act_facts_size = sizeof(struct qg_x86_pre4),
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
	[QG_LAYOUT_4X8] = {
		.name = "avx512vnni 4x8, avx2 gemv", .family = QG_KF_AVX512VNNI,
		.gemv = qg_avx2_gemv_4x8, .gemv_rows = qg_avx2_gemv_rows_4x8, .gemm = gemm_4x8, .act_ileave = 8,
		.act_facts = act_facts, .gemm_facts = gemm_facts_4x8, .act_facts_size = sizeof(struct qg_x86_pre4),
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
	[QG_LAYOUT_8X8] = {
		.name = "avx512vnni 8x8, avx2 gemv", .family = QG_KF_AVX512VNNI,
		.gemv = qg_avx2_gemv_8x8, .gemv_rows = qg_avx2_gemv_rows_8x8, .gemm = gemm_8x8, .act_ileave = 8,
		.act_facts = act_facts, .gemm_facts = gemm_facts_8x8, .act_facts_size = sizeof(struct qg_x86_pre4),
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
};
