/*
 * kquant-gemm-i8mm.c - Q4_K, Q6_K and Q8_0 weight rows against many
 * activation rows with the aarch64 int8 matrix multiply (smmla):
 * Graviton3/4, Grace, any armv8.6 core.  Q8_0 has a section of its own
 * at the end; what follows is the K-quants'.
 *
 * smmla multiplies a 2x8 block of int8 by the transpose of another, 32
 * multiply-adds into a 2x2 int32 tile: twice sdot's 16.  Its natural
 * operand is a pair of rows with eight k values each, so the tile here
 * (built as in kquant-gemm-dotprod.c, 16 weight rows and a few
 * super-blocks at a time) holds, per octet of k values and weight row
 * pair p, rows 2p's and 2p + 1's eight codes in one vector: 128 bytes
 * per octet, two ld1 of four registers.  Its rows are two 16-byte loads
 * and a 64-bit zip, with no transpose.  A pair of activation rows gets
 * the same shape from two 16-byte loads and a zip1/zip2 per two octets.
 *
 * Why one activation pair against eight weight pairs: each 2x2 tile holds
 * a running sum and a product register through a super-block (as in the
 * dotprod GEMM: the sums run on, the tile holds the differences of the
 * scales, one mla per sub-block), so eight tiles take 16 registers, the
 * weights four (loaded twice per octet) and the activations four; the
 * zips that pair the activation rows are then shared by 16 smmla.  Two
 * activation pairs against four weight pairs take as many registers but
 * zip twice as often.  Per 256 multiply-adds the loop takes 2 ld1, 8
 * smmla and 2 of the loads and zips, 12 instructions against the dotprod
 * GEMM's 19 (2 ld1, 16 sdot, 1 ldr).
 *
 * Q4_K's msum = sum_j min_j * bsum pair_j is a matrix product over the
 * eight sub-blocks too: the int16 pair sums (at most 4096 in magnitude)
 * split as 128 * hi + lo (hi in -32..32, lo in 0..127, both int8), two
 * smmla against the pair's mins (0..63) per 2x2 tile.  Every sum is the
 * reference's exact int32 (wrapping mla, as in the dotprod GEMM), and
 * the float part takes qg_kq_accum's steps lane by lane without
 * contraction, so every output is the one-row kernel's bit for bit.
 *
 * The family's one- and four-row entries are kquant-arm.h's with sdot,
 * and its GEMVs (one activation row) kquant-gemv-dotprod.c's, as the
 * dotprod family's: smmla's second operand is a pair of activation rows,
 * and with one row half its products would be wasted, leaving it
 * sdot's 16 useful multiply-adds.  This file holds its table.
 */
#include "config.h"

#include <arm_neon.h>
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "kquant-arm.h"
#include "kquant.h"

#define INLINE inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

/* Super-blocks per tile chunk: a chunk's tiles are KC * 6.5 KB. */
#define KC 4

/* One super-block of 16 weight rows (8 pairs), as the GEMM reads it. */
struct tile {
	int8_t q[32][8][16];	/* octet o, pair p: row 2p's codes 8o .. 8o + 7, then row 2p + 1's */
	int32_t sc[16][8][4];	/* sub-block j, pair p: scale_j - scale_j+1 of rows 2p, 2p + 1, 2p, 2p + 1 */
	int8_t mn[8][16];	/* Q4_K, pair p: row 2p's eight mins, then row 2p + 1's */
	float d[8][4], dmin[8][4];	/* pair p: rows 2p, 2p + 1, 2p, 2p + 1 */
};

/* Lanes 0, 1 of V twice (the pair 2p's rows) or lanes 2, 3 twice (H = 1). */
#define PAIR_S32(v, h) vreinterpretq_s32_u64(vdupq_laneq_u64(vreinterpretq_u64_s32(v), h))
#define PAIR_F32(v, h) vreinterpretq_f32_u64(vdupq_laneq_u64(vreinterpretq_u64_f32(v), h))

/* Four rows' scales (lanes = rows) as the tile keeps them: differences, pairs 2P4 and 2P4 + 1. */
static INLINE void store_scales(struct tile *t, int p4, const int32x4_t sc[], const int n)
{
	UNROLL
	for (int j = 0; j < n; j++) {
		const int32x4_t x = j + 1 < n ? vsubq_s32(sc[j], sc[j + 1]) : sc[j];
		vst1q_s32(t->sc[j][2 * p4], PAIR_S32(x, 0));
		vst1q_s32(t->sc[j][2 * p4 + 1], PAIR_S32(x, 1));
	}
}

/* Codes A and B of two rows, eight values each for two octets, into octets O and O + 1 of pair P. */
static INLINE void store_pair(struct tile *t, int o, int p, uint8x16_t a, uint8x16_t b)
{
	const uint64x2_t x = vreinterpretq_u64_u8(a), y = vreinterpretq_u64_u8(b);

	vst1q_u8((uint8_t *)t->q[o][p], vreinterpretq_u8_u64(vzip1q_u64(x, y)));
	vst1q_u8((uint8_t *)t->q[o + 1][p], vreinterpretq_u8_u64(vzip2q_u64(x, y)));
}

/* The Q4_K super-block at byte OFF of each of the 16 rows into T. */
static void tile_q4_K(const uint8_t *const row[16], size_t off, struct tile *t)
{
	const uint8x16_t low4 = vdupq_n_u8(0x0f);
	const size_t qs = off + offsetof(struct qg_block_q4_K, qs);

	for (int p = 0; p < 8; p++) {
		/* bytes 32c + 16h ..: sub-block 2c's octets 8c + 2h, + 1 in the low nibbles, 2c + 1's (+ 4) in the high */
		for (int c = 0; c < 4; c++) {
			UNROLL
			for (int h = 0; h < 2; h++) {
				const size_t o = qs + 32 * (size_t)c + 16 * (size_t)h;
				const uint8x16_t x = vld1q_u8(row[2 * p] + o), y = vld1q_u8(row[2 * p + 1] + o);
				store_pair(t, 8 * c + 2 * h, p, vandq_u8(x, low4), vandq_u8(y, low4));
				store_pair(t, 8 * c + 4 + 2 * h, p, vshrq_n_u8(x, 4), vshrq_n_u8(y, 4));
			}
		}
	}
	for (int p4 = 0; p4 < 4; p4++) {
		struct kq_arm_q4_K_head hd;
		kq_arm_q4_K_head(row + 4 * p4, off, &hd);
		store_scales(t, p4, hd.sc, 8);
		/* row r's mins 0-3 and 4-7 are word r of MN[0] and MN[1] */
		const uint32x4_t m0 = vreinterpretq_u32_u8(hd.mn[0]), m1 = vreinterpretq_u32_u8(hd.mn[1]);
		vst1q_u8((uint8_t *)t->mn[2 * p4], vreinterpretq_u8_u32(vzip1q_u32(m0, m1)));
		vst1q_u8((uint8_t *)t->mn[2 * p4 + 1], vreinterpretq_u8_u32(vzip2q_u32(m0, m1)));
		vst1q_f32(t->d[2 * p4], PAIR_F32(hd.d, 0));
		vst1q_f32(t->d[2 * p4 + 1], PAIR_F32(hd.d, 1));
		vst1q_f32(t->dmin[2 * p4], PAIR_F32(hd.dmin, 0));
		vst1q_f32(t->dmin[2 * p4 + 1], PAIR_F32(hd.dmin, 1));
	}
}

/*
 * Q6_K super-block into T: values 16s .. 16s + 15 of quarter q of half h
 * (kq_arm_q6_K_codes) are octets 16h + 4q + 2s and the next.
 */
static void tile_q6_K(const uint8_t *const row[16], size_t off, struct tile *t)
{
	const size_t ql = off + offsetof(struct qg_block_q6_K, ql), qh = off + offsetof(struct qg_block_q6_K, qh);

	for (int p = 0; p < 8; p++) {
		const uint8_t *r0 = row[2 * p], *r1 = row[2 * p + 1];
		for (int h = 0; h < 2; h++) {
			UNROLL
			for (int s = 0; s < 2; s++) {
				const size_t o0 = ql + 64 * (size_t)h + 16 * (size_t)s, oh = qh + 32 * (size_t)h + 16 * (size_t)s;
				uint8x16_t c0[4], c1[4];
				kq_arm_q6_K_codes(vld1q_u8(r0 + o0), vld1q_u8(r0 + o0 + 32), vld1q_u8(r0 + oh), c0);
				kq_arm_q6_K_codes(vld1q_u8(r1 + o0), vld1q_u8(r1 + o0 + 32), vld1q_u8(r1 + oh), c1);
				UNROLL
				for (int q = 0; q < 4; q++)
					store_pair(t, 16 * h + 4 * q + 2 * s, p, c0[q], c1[q]);
			}
		}
	}
	for (int p4 = 0; p4 < 4; p4++) {
		int32x4_t sc[16];
		float32x4_t d;
		kq_arm_q6_K_head(row + 4 * p4, off, sc, &d);
		store_scales(t, p4, sc, 16);
		vst1q_f32(t->d[2 * p4], PAIR_F32(d, 0));
		vst1q_f32(t->d[2 * p4 + 1], PAIR_F32(d, 1));
	}
}

/*
 * A super-block's integer steps, one asm loop for the reasons
 * kquant-gemm-dotprod.c gives.  The weights stream through v0-v3, the
 * activation rows' 16 bytes (two octets) come to v4 and v5 and are paired
 * in v6 (first octet) and v7; pair p's 2x2 running sums sit in v16 + p,
 * its products in v24 + p, stored once at the end.
 *
 * OCT(A): one octet, activation pair vA against the eight weight pairs;
 * OCTS: two octets; SCALE: the sub-block's scale differences into the
 * products.
 */
#define KQ_MM(x, w, a) "smmla v" x ".4s, v" a ".16b, v" w ".16b\n\t"
#define KQ_OCT(a)                                                      \
	"ld1 {v0.16b-v3.16b}, [%[wq]], #64\n\t"                        \
	KQ_MM("16", "0", a) KQ_MM("17", "1", a) KQ_MM("18", "2", a) KQ_MM("19", "3", a) \
	"ld1 {v0.16b-v3.16b}, [%[wq]], #64\n\t"                        \
	KQ_MM("20", "0", a) KQ_MM("21", "1", a) KQ_MM("22", "2", a) KQ_MM("23", "3", a)
#define KQ_OCTS                                                        \
	"ldr q4, [%[a0]], #16\n\t"                                      \
	"ldr q5, [%[a1]], #16\n\t"                                      \
	"zip1 v6.2d, v4.2d, v5.2d\n\t"                                  \
	"zip2 v7.2d, v4.2d, v5.2d\n\t" KQ_OCT("6") KQ_OCT("7")
#define KQ_MLA(i, x, s) "mla v" i ".4s, v" x ".4s, v" s ".4s\n\t"
#define KQ_SCALE                                                       \
	"ld1 {v0.4s-v3.4s}, [%[sp]], #64\n\t"                          \
	KQ_MLA("24", "16", "0") KQ_MLA("25", "17", "1") KQ_MLA("26", "18", "2") KQ_MLA("27", "19", "3") \
	"ld1 {v0.4s-v3.4s}, [%[sp]], #64\n\t"                          \
	KQ_MLA("28", "20", "0") KQ_MLA("29", "21", "1") KQ_MLA("30", "22", "2") KQ_MLA("31", "23", "3")
#define KQ_ZERO4(r0, r1, r2, r3) "movi v" r0 ".4s, #0\n\tmovi v" r1 ".4s, #0\n\tmovi v" r2 ".4s, #0\n\tmovi v" r3 ".4s, #0\n\t"
#define KQ_ZERO                                                        \
	KQ_ZERO4("16", "17", "18", "19") KQ_ZERO4("20", "21", "22", "23") \
	KQ_ZERO4("24", "25", "26", "27") KQ_ZERO4("28", "29", "30", "31")
#define KQ_LOOP(body) "1:\n\t" body "subs %w[n], %w[n], #1\n\tb.ne 1b\n\t"
#define KQ_STORE "st1 {v24.4s-v27.4s}, [%[out]], #64\n\tst1 {v28.4s-v31.4s}, [%[out]]\n\t"
#define KQ_CLOBBER                                                     \
	"v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", \
	"v25", "v26", "v27", "v28", "v29", "v30", "v31", "cc", "memory"

/* One super-block's ISUM (pair p's 2x2 tile at ISUM[p]) for activation rows A0, A1, from tile T. */
static INLINE void sums(const int q6, const struct tile *t, const int8_t *a0, const int8_t *a1, int32_t isum[8][4])
{
	const int8_t *wq = t->q[0][0];
	const int32_t *sp = t->sc[0][0];
	int32_t *out = isum[0];
	int n = q6 ? 16 : 8;

	if (q6)
		__asm__ volatile(KQ_ZERO KQ_LOOP(KQ_OCTS KQ_SCALE) KQ_STORE
				 : [wq] "+r"(wq), [a0] "+r"(a0), [a1] "+r"(a1), [sp] "+r"(sp), [n] "+r"(n),
				   [out] "+r"(out)
				 : : KQ_CLOBBER);
	else
		__asm__ volatile(KQ_ZERO KQ_LOOP(KQ_OCTS KQ_OCTS KQ_SCALE) KQ_STORE
				 : [wq] "+r"(wq), [a0] "+r"(a0), [a1] "+r"(a1), [sp] "+r"(sp), [n] "+r"(n),
				   [out] "+r"(out)
				 : : KQ_CLOBBER);
}

/*
 * Activation rows A0 and A1 (super-block b at A0[b], A1[b]; the same row
 * twice for one) against the KC tiles T: S0[c] and S1[c] for the tile's
 * 16 rows (S1 written only if TWO), starting from 0 (FIRST) or from what
 * S holds (the chunks before).  Pair p's tile is [a0 w0, a0 w1, a1 w0,
 * a1 w1]: its halves are S0[2p ..] and S1[2p ..].
 */
static INLINE void run_tiles(const int q6, const struct tile *T, int kc, const struct qg_block_q8_K *a0,
			     const struct qg_block_q8_K *a1, float *s0, float *s1, int two, int first)
{
	float32x4_t acc[8];

	UNROLL
	for (int p = 0; p < 8; p++)
		acc[p] = first ? vdupq_n_f32(0.0f) : vcombine_f32(vld1_f32(s0 + 2 * p), vld1_f32(s1 + 2 * p));
	for (int b = 0; b < kc; b++) {
		const struct tile *t = &T[b];
		_Alignas(16) int32_t isum[8][4];

		sums(q6, t, a0[b].qs, a1[b].qs, isum);
		const float32x4_t ad = vcombine_f32(vdup_n_f32(a0[b].d), vdup_n_f32(a1[b].d));
		int8x16_t hi = vdupq_n_s8(0), lo = vdupq_n_s8(0);
		if (!q6) {
			const int16x8_t p0 = vpaddq_s16(vld1q_s16(a0[b].bsums), vld1q_s16(a0[b].bsums + 8));
			const int16x8_t p1 = vpaddq_s16(vld1q_s16(a1[b].bsums), vld1q_s16(a1[b].bsums + 8));
			const int16x8_t m127 = vdupq_n_s16(127);
			hi = vcombine_s8(vmovn_s16(vshrq_n_s16(p0, 7)), vmovn_s16(vshrq_n_s16(p1, 7)));
			lo = vcombine_s8(vmovn_s16(vandq_s16(p0, m127)), vmovn_s16(vandq_s16(p1, m127)));
		}
		UNROLL
		for (int p = 0; p < 8; p++) {
			const float32x4_t dw = vmulq_f32(vld1q_f32(t->d[p]), ad);
			acc[p] = vaddq_f32(acc[p], vmulq_f32(dw, vcvtq_f32_s32(vld1q_s32(isum[p]))));
			if (!q6) {
				const int8x16_t m = vld1q_s8(t->mn[p]);
				const int32x4_t ms = vmmlaq_s32(vshlq_n_s32(vmmlaq_s32(vdupq_n_s32(0), hi, m), 7), lo, m);
				const float32x4_t dm = vmulq_f32(vld1q_f32(t->dmin[p]), ad);
				acc[p] = vsubq_f32(acc[p], vmulq_f32(dm, vcvtq_f32_s32(ms)));
			}
		}
	}
	UNROLL
	for (int p = 0; p < 8; p++) {
		vst1_f32(s0 + 2 * p, vget_low_f32(acc[p]));
		if (two)
			vst1_f32(s1 + 2 * p, vget_high_f32(acc[p]));
	}
}

/*
 * Every activation row, two at a time, against one chunk's tiles.  A
 * tile of fewer than 16 rows (NCOL) runs on a copy of its outputs, so
 * that nothing past NC is read or written.
 */
static INLINE void run_rows(const int q6, const struct tile *T, int kc, const struct qg_block_q8_K *a, size_t nba,
			    int nr, float *s, size_t lds, int first, int ncol)
{
	for (int g0 = 0; g0 < nr; g0 += 2) {
		const int two = nr - g0 >= 2;
		const struct qg_block_q8_K *a0 = a + (size_t)g0 * nba, *a1 = two ? a0 + nba : a0;
		float *s0 = s + (size_t)g0 * lds, *s1 = two ? s0 + lds : s0;
		if (ncol < 16) {
			float part[2][16];
			if (!first) {
				memcpy(part[0], s0, (size_t)ncol * sizeof(float));
				memcpy(part[1], s1, (size_t)ncol * sizeof(float));
			}
			run_tiles(q6, T, kc, a0, a1, part[0], part[1], two, first);
			memcpy(s0, part[0], (size_t)ncol * sizeof(float));
			if (two)
				memcpy(s1, part[1], (size_t)ncol * sizeof(float));
		} else {
			run_tiles(q6, T, kc, a0, a1, s0, s1, two, first);
		}
	}
}

#define KQ_GEMM_FAMILY i8mm
#define KQ_TILE_ROWS 16
#define KQ_TILE_ALIGN 64
#include "kquant-gemm.h"

/* --- Q8_0 weights --------------------------------------------------------- */

/*
 * A Q8_0 tile is one block of 16 rows: per weight pair its four octets
 * as above (64 bytes, one ld1, and no zip to build: a 32-byte load of
 * each row and four zip of their halves), and the pairs' scales as
 * floats laid out as the 2x2 tiles' lanes.  One activation pair meets
 * it with 32 smmla into sums that start from zero at every block; a
 * lane's sum is at most 32 * 128 * 128, an exact int32 and float.  The
 * float part is the reference's lane by lane, each step rounded alone:
 * sum += (float)sumi * (dw * da), blocks in order, so every output is
 * qg_vec_dot_q8_0_q8_0's bits.  Per block and pair that part is 40
 * instructions against 32 smmla, the same for any grouping of rows, so
 * the shape only has to keep the loads few: one pair of activation rows
 * (zipped once per block, for 32 smmla) against the eight weight pairs.
 */

/* Blocks per chunk: a chunk's tiles are KC8 * 640 bytes, 20 KB. */
#define KC8 32

/* One block of 16 weight rows; KC8 of them follow one another, as the asm reads them. */
struct tile8 {
	int8_t q[8][4][16];	/* pair p, octet o: row 2p's codes 8o .. 8o + 7, then row 2p + 1's */
	float d[8][4];		/* pair p: rows 2p, 2p + 1, 2p, 2p + 1 */
};

_Static_assert(sizeof(struct qg_block_q8_0) == 34 && offsetof(struct qg_block_q8_0, qs) == 2,
	       "the asm walks Q8_0 blocks as 2 bytes of scale and 32 of codes");
_Static_assert(sizeof(struct tile8) == 640 && offsetof(struct tile8, d) == 512, "the asm's tile steps");
_Static_assert(sizeof(struct qg_q8_0_aux) == 8 && offsetof(struct qg_q8_0_aux, d) == 0,
	       "the asm reads aux's scales 8 bytes apart");

/* Row R's scale into lane R of v16; rows R0 and R1 (a pair) as four octets, stored. */
#define Q8_SCALE(r) "ld1 {v16.h}[" r "], [%[r" r "]], #2\n\t"
#define Q8_PAIR(r0, r1)                                                \
	"ld1 {v0.16b, v1.16b}, [%[r" r0 "]], #32\n\t"                  \
	"ld1 {v2.16b, v3.16b}, [%[r" r1 "]], #32\n\t"                  \
	"zip1 v4.2d, v0.2d, v2.2d\n\tzip2 v5.2d, v0.2d, v2.2d\n\t"      \
	"zip1 v6.2d, v1.2d, v3.2d\n\tzip2 v7.2d, v1.2d, v3.2d\n\t"      \
	"st1 {v4.16b-v7.16b}, [%[t]], #64\n\t"

/*
 * KC blocks of eight rows (ROW[r] at their first block), four pairs,
 * into the tiles: codes from T, scales from TD (pair 0's or pair 4's
 * place in the first tile).  As many operands as an asm takes, so 16
 * rows are two calls.
 */
static void tiles8_q8_0(const uint8_t *const row[8], int kc, uint8_t *t, uint8_t *td)
{
	const uint8_t *r0 = row[0], *r1 = row[1], *r2 = row[2], *r3 = row[3];
	const uint8_t *r4 = row[4], *r5 = row[5], *r6 = row[6], *r7 = row[7];

	__asm__ volatile("1:\n\t"
			 Q8_SCALE("0") Q8_SCALE("1") Q8_SCALE("2") Q8_SCALE("3")
			 Q8_SCALE("4") Q8_SCALE("5") Q8_SCALE("6") Q8_SCALE("7")
			 Q8_PAIR("0", "1") Q8_PAIR("2", "3") Q8_PAIR("4", "5") Q8_PAIR("6", "7")
			 "fcvtl v18.4s, v16.4h\n\t"
			 "fcvtl2 v19.4s, v16.8h\n\t"
			 "zip1 v20.2d, v18.2d, v18.2d\n\t"
			 "zip2 v21.2d, v18.2d, v18.2d\n\t"
			 "zip1 v22.2d, v19.2d, v19.2d\n\t"
			 "zip2 v23.2d, v19.2d, v19.2d\n\t"
			 "st1 {v20.4s-v23.4s}, [%[td]]\n\t"
			 "add %[t], %[t], #384\n\t"
			 "add %[td], %[td], #640\n\t"
			 "subs %w[n], %w[n], #1\n\t"
			 "b.ne 1b\n\t"
			 : [r0] "+r"(r0), [r1] "+r"(r1), [r2] "+r"(r2), [r3] "+r"(r3), [r4] "+r"(r4), [r5] "+r"(r5),
			   [r6] "+r"(r6), [r7] "+r"(r7), [t] "+r"(t), [td] "+r"(td), [n] "+r"(kc)
			 :
			 : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v16", "v18", "v19", "v20", "v21", "v22",
			   "v23", "cc", "memory");
}

/*
 * A block's integer and float steps in one asm loop: the activation
 * rows' 32 codes come to v0-v3 and are paired into v4-v7 (octets 0-3),
 * the tile then streams through v0-v3, pair p's sums sit in v16 + p and
 * its outputs in v24 + p, loaded and stored once per chunk.  MM(p): one
 * ld1 of the tile (pair p's four octets) and four smmla; FLOAT: a 2x2
 * tile's float step, v4 the activations' scales [a0 a0 a1 a1], v5 the
 * scales' product.
 */
#define Q8_MM(p)                                                       \
	"ld1 {v0.16b-v3.16b}, [%[t]], #64\n\t"                         \
	KQ_MM(p, "0", "4") KQ_MM(p, "1", "5") KQ_MM(p, "2", "6") KQ_MM(p, "3", "7")
#define Q8_FLOAT(x, acc, w)                                            \
	"fmul v5.4s, v" w ".4s, v4.4s\n\t"                             \
	"scvtf v" x ".4s, v" x ".4s\n\t"                               \
	"fmul v" x ".4s, v" x ".4s, v5.4s\n\t"                         \
	"fadd v" acc ".4s, v" acc ".4s, v" x ".4s\n\t"
#define Q8_BLOCK                                                       \
	KQ_ZERO4("16", "17", "18", "19") KQ_ZERO4("20", "21", "22", "23") \
	"ld1 {v0.16b, v1.16b}, [%[a0]], %[ab]\n\t"                      \
	"ld1 {v2.16b, v3.16b}, [%[a1]], %[ab]\n\t"                      \
	"zip1 v4.2d, v0.2d, v2.2d\n\tzip2 v5.2d, v0.2d, v2.2d\n\t"      \
	"zip1 v6.2d, v1.2d, v3.2d\n\tzip2 v7.2d, v1.2d, v3.2d\n\t"      \
	Q8_MM("16") Q8_MM("17") Q8_MM("18") Q8_MM("19")    \
	Q8_MM("20") Q8_MM("21") Q8_MM("22") Q8_MM("23")    \
	"ld1r {v4.2s}, [%[x0]], %[xs]\n\t"                              \
	"ld1r {v5.2s}, [%[x1]], %[xs]\n\t"                              \
	"zip1 v4.2d, v4.2d, v5.2d\n\t"                                  \
	"ld1 {v0.4s-v3.4s}, [%[t]], #64\n\t"                           \
	Q8_FLOAT("16", "24", "0") Q8_FLOAT("17", "25", "1") Q8_FLOAT("18", "26", "2") Q8_FLOAT("19", "27", "3") \
	"ld1 {v0.4s-v3.4s}, [%[t]], #64\n\t"                           \
	Q8_FLOAT("20", "28", "0") Q8_FLOAT("21", "29", "1") Q8_FLOAT("22", "30", "2") Q8_FLOAT("23", "31", "3")
/* The outputs: S0[0 .. 15] and S1[0 .. 15] as the eight 2x2 tiles, or zero (FIRST). */
#define Q8_OPEN                                                        \
	"cbnz %w[first], 2f\n\t"                                       \
	"ld1 {v0.4s-v3.4s}, [%[s0]]\n\t"                               \
	"ld1 {v4.4s-v7.4s}, [%[s1]]\n\t"                               \
	"zip1 v24.2d, v0.2d, v4.2d\n\tzip2 v25.2d, v0.2d, v4.2d\n\t"    \
	"zip1 v26.2d, v1.2d, v5.2d\n\tzip2 v27.2d, v1.2d, v5.2d\n\t"    \
	"zip1 v28.2d, v2.2d, v6.2d\n\tzip2 v29.2d, v2.2d, v6.2d\n\t"    \
	"zip1 v30.2d, v3.2d, v7.2d\n\tzip2 v31.2d, v3.2d, v7.2d\n\t"    \
	"b 3f\n\t"                                                     \
	"2:\n\t" KQ_ZERO4("24", "25", "26", "27") KQ_ZERO4("28", "29", "30", "31") "3:\n\t"
#define Q8_CLOSE                                                       \
	"uzp1 v0.2d, v24.2d, v25.2d\n\tuzp2 v4.2d, v24.2d, v25.2d\n\t"  \
	"uzp1 v1.2d, v26.2d, v27.2d\n\tuzp2 v5.2d, v26.2d, v27.2d\n\t"  \
	"uzp1 v2.2d, v28.2d, v29.2d\n\tuzp2 v6.2d, v28.2d, v29.2d\n\t"  \
	"uzp1 v3.2d, v30.2d, v31.2d\n\tuzp2 v7.2d, v30.2d, v31.2d\n\t"  \
	"st1 {v0.4s-v3.4s}, [%[s0]]\n\t"                               \
	"st1 {v4.4s-v7.4s}, [%[s1]]\n\t"

/*
 * Activation rows A0 and A1 (the codes of their first blocks; aux X0
 * and X1; blocks 34 and 8 bytes apart) against the KC tiles T: S0[c]
 * and S1[c] for the 16 rows, added to unless FIRST.  One row goes as A1
 * = A0, X1 = X0, S1 = S0: its second half of every tile is then the
 * first's, bit for bit, and storing it again changes nothing.
 */
static void run_tiles8(const struct tile8 *T, int kc, const int8_t *a0, const int8_t *a1,
		       const struct qg_q8_0_aux *x0, const struct qg_q8_0_aux *x1, float *s0, float *s1, int first)
{
	const struct tile8 *t = T;
	const size_t ab = sizeof(struct qg_block_q8_0), xs = sizeof(struct qg_q8_0_aux);

	__asm__ volatile(Q8_OPEN KQ_LOOP(Q8_BLOCK) Q8_CLOSE
			 : [t] "+r"(t), [a0] "+r"(a0), [a1] "+r"(a1), [x0] "+r"(x0), [x1] "+r"(x1), [n] "+r"(kc)
			 : [ab] "r"(ab), [xs] "r"(xs), [s0] "r"(s0), [s1] "r"(s1), [first] "r"(first)
			 : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v16", "v17", "v18", "v19", "v20", "v21",
			   "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31", "cc", "memory");
}

void qg_kq_gemm_q8_0_i8mm(int64_t k, float *restrict s, size_t lds, const void *restrict vw, size_t wstride, int nc,
			  const void *restrict va, const struct qg_q8_0_aux *restrict aux, int nr)
{
	const uint8_t *w = vw;
	const struct qg_block_q8_0 *a = va;
	const int64_t nb = k / QG_QK;
	_Alignas(64) struct tile8 T[KC8];

#if defined(HAVE_DOTPROD)
	/* one row would fill half of every 2x2 tile with a copy; sdot's one-row pass (this core has it) wastes none */
	if (nr == 1) {
		qg_kq_gemm_q8_0_dotprod(k, s, lds, vw, wstride, nc, va, aux, nr);
		return;
	}
#endif
	for (int64_t b0 = 0; b0 < nb; b0 += KC8) {
		const int kc = nb - b0 < KC8 ? (int)(nb - b0) : KC8;
		const int first = b0 == 0;
		for (int c0 = 0; c0 < nc; c0 += 16) {
			const uint8_t *row[16];
			for (int r = 0; r < 16; r++)
				row[r] = w + (size_t)(c0 + r < nc ? c0 + r : nc - 1) * wstride +
					 (size_t)b0 * sizeof(struct qg_block_q8_0);
			tiles8_q8_0(row, kc, (uint8_t *)T[0].q[0], (uint8_t *)T[0].d[0]);
			tiles8_q8_0(row + 8, kc, (uint8_t *)T[0].q[4], (uint8_t *)T[0].d[4]);
			/* a tile of fewer than 16 rows runs on a copy of its outputs: nothing past NC is touched */
			const int ncol = nc - c0 < 16 ? nc - c0 : 16;
			for (int g0 = 0; g0 < nr; g0 += 2) {
				const int two = nr - g0 >= 2;
				const size_t i0 = (size_t)g0 * (size_t)nb + (size_t)b0, i1 = two ? i0 + (size_t)nb : i0;
				float *s0 = s + (size_t)g0 * lds + c0, *s1 = two ? s0 + lds : s0;
				float part[2][16];
				float *p0 = ncol < 16 ? part[0] : s0, *p1 = ncol < 16 ? (two ? part[1] : part[0]) : s1;
				if (ncol < 16 && !first) {
					memcpy(part[0], s0, (size_t)ncol * sizeof(float));
					if (two)
						memcpy(part[1], s1, (size_t)ncol * sizeof(float));
				}
				run_tiles8(T, kc, a[i0].qs, a[i1].qs, &aux[i0], &aux[i1], p0, p1, first);
				if (ncol < 16) {
					memcpy(s0, part[0], (size_t)ncol * sizeof(float));
					if (two)
						memcpy(s1, part[1], (size_t)ncol * sizeof(float));
				}
			}
		}
	}
}

KQ_ARM_ENTRIES(kq_arm_sdot16)
KQ_ARM_Q8_0_ENTRIES(kq_arm_sdot32)

const struct qg_kq_kernel qg_kq_i8mm = {
	.name = "i8mm k-quants", .family = QG_KF_I8MM,
	.q4_K = dot_q4_K, .q6_K = dot_q6_K,
	.q4_K_x4 = dot4_q4_K, .q6_K_x4 = dot4_q6_K,
	.q8_0 = dot_q8_0, .q8_0_x4 = dot4_q8_0,
	.q4_K_gemv = qg_kq_gemv_q4_K_dotprod, .q6_K_gemv = qg_kq_gemv_q6_K_dotprod,
	.q8_0_gemv = qg_kq_gemv_q8_0_dotprod,
	.q4_K_gemm = qg_kq_gemm_q4_K_i8mm, .q6_K_gemm = qg_kq_gemm_q6_K_i8mm,
	.q8_0_gemm = qg_kq_gemm_q8_0_i8mm,
	/* Q8_0's too: one row goes to the GEMV, 192 instructions per 1000 MACs to the GEMM's 289 */
	.gemm_rows = 2,
};
