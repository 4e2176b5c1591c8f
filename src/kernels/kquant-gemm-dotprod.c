/*
 * kquant-gemm-dotprod.c - Q4_K, Q6_K and Q8_0 weight rows against many
 * activation rows (a prompt's) with the aarch64 dot-product instructions.
 * Q8_0 and Q8_0_4X4 have sections of their own at the end; what follows
 * is the K-quants'.
 *
 * The one- and four-row kernels (kquant-arm.h) meet one weight row at a
 * time: every 16-byte sdot leaves four partial sums of one row that must
 * be multiplied by a scale and reduced across lanes.  Here, as in
 * kquant-gemm-avx512vnni.c, 16 weight rows are turned, a few super-blocks
 * at a time, into a tile: per quad of k values 64 bytes, four vectors
 * whose 32-bit lane r holds weight row 4v + r's four codes (one ld1 of
 * four registers), and each sub-block's scales as int32 over the rows.
 * Then every activation row runs against the tile: 16 of its bytes are
 * four quads, and "sdot vX.4s, vW.16b, vA.4b[l]" meets quad l with four
 * weight rows without a broadcast, 16 useful multiply-adds per
 * instruction; lane r of every accumulator is its weight row's to the
 * end, and nothing is reduced across lanes.
 *
 * Why this shape: a sub-block's sums need a register of their own until
 * they are multiplied by its scale, and the products another, so each
 * four outputs hold two integer registers through a super-block.  Two
 * activation rows against 16 weight rows (16 of them, with 4 weight, 2
 * activation and the float sums in the rest) load each tile vector once
 * per 8 sdot and each activation vector once per 16; a third row would
 * not fit in 32 registers.  Turning the roles round (activations
 * interleaved by rows as the by-element operand, kernels-dotprod.c's Q4_0
 * GEMM) gives the same sdot count and needs no transpose of the weights,
 * but a copy of every activation row in that order and a transpose of the
 * outputs; the transpose here is paid once per 16 rows and chunk and
 * shared by every activation row.
 *
 * Codes enter sdot as signed bytes: Q4_K's 0..15 as they are, Q6_K's
 * code - 32, so Q6_K needs no block-sum term.  To spare a zeroing per
 * sub-block the dot sums X run on over the whole super-block, and the
 * tile holds the differences of the scales (Abel summation):
 *
 *   isum = sum_j scale_j * x_j = sum_j X_j * (scale_j - scale_j+1),
 *
 * X_j the running sum after sub-block j, scale_n = 0: one mla per
 * sub-block and four outputs.  Q4_K's msum = sum_j min_j * (bsum_2j +
 * bsum_2j+1) is eight smlal by lane of int16 mins (0..63) against the
 * pair sums (at most 4096 in magnitude).  The terms can leave int32 on
 * the way (mla wraps), but isum and msum are the reference's exact int32
 * sums, so the wrapped arithmetic gives them exactly; the float part then
 * takes qg_kq_accum's steps lane by lane, each product and sum rounded
 * alone (this file is built without contraction), so every output is the
 * one-row kernel's bit for bit.
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

/* Super-blocks per tile chunk: a chunk's tiles are KC * 5.4 KB. */
#define KC 4
/* Activation rows per pass over a tile: two keep 16 sums in registers. */
#define GM 2

/* One super-block of 16 weight rows, as the GEMM reads it. */
struct tile {
	int8_t q[64][64];	/* quad i (k = 4i .. 4i + 3): row r's four codes in bytes 4r .. 4r + 3 */
	int32_t sc[16][16];	/* sub-block j, row r: scale_j - scale_j+1 (Q4_K: j < 8) */
	int16_t mn[4][8][4];	/* Q4_K: min of sub-block j of row 4v + r at [v][j][r] */
	float d[16], dmin[16];
};

/* Scales (int32, lanes = rows 4v .. 4v + 3) of the N sub-blocks as the tile keeps them: differences. */
static INLINE void store_scales(struct tile *t, int v, const int32x4_t sc[], const int n)
{
	UNROLL
	for (int j = 0; j < n; j++)
		vst1q_s32(t->sc[j] + 4 * v, j + 1 < n ? vsubq_s32(sc[j], sc[j + 1]) : sc[j]);
}

/* The Q4_K super-block at byte OFF of each of the 16 rows into T. */
static void tile_q4_K(const uint8_t *const row[16], size_t off, struct tile *t)
{
	const uint8x16_t low4 = vdupq_n_u8(0x0f);
	const size_t qs = off + offsetof(struct qg_block_q4_K, qs);

	for (int v = 0; v < 4; v++) {
		const uint8_t *const *r4 = row + 4 * v;
		/* bytes 32c + 16h ..: sub-block 2c's values 16h .. in the low nibbles, 2c + 1's in the high */
		for (int c = 0; c < 4; c++) {
			UNROLL
			for (int h = 0; h < 2; h++) {
				uint8x16_t y[4];
				kq_arm_transpose4(r4, qs + 32 * (size_t)c + 16 * (size_t)h, y);
				UNROLL
				for (int m = 0; m < 4; m++) {
					vst1q_u8((uint8_t *)t->q[16 * c + 4 * h + m] + 16 * v, vandq_u8(y[m], low4));
					vst1q_u8((uint8_t *)t->q[16 * c + 8 + 4 * h + m] + 16 * v, vshrq_n_u8(y[m], 4));
				}
			}
		}
		struct kq_arm_q4_K_head hd;
		kq_arm_q4_K_head(r4, off, &hd);
		vst1q_f32(t->d + 4 * v, hd.d);
		vst1q_f32(t->dmin + 4 * v, hd.dmin);
		UNROLL
		for (int j = 0; j < 4; j++) {
			vst1_s16(t->mn[v][j], vmovn_s32(kq_arm_byte_lanes(hd.mn[0], j)));
			vst1_s16(t->mn[v][4 + j], vmovn_s32(kq_arm_byte_lanes(hd.mn[1], j)));
		}
		store_scales(t, v, hd.sc, 8);
	}
}

/*
 * Q6_K super-block into T.  Value 128h + 32q + l (q = 0..3) has its low
 * four bits in ql[64h + 32(q & 1) + l] (low nibble for q < 2, high for
 * q >= 2) and its top two in qh[32h + l] at bit 2q; its quad is
 * 32h + 8q + l / 4.
 */
static void tile_q6_K(const uint8_t *const row[16], size_t off, struct tile *t)
{
	const size_t ql = off + offsetof(struct qg_block_q6_K, ql), qh = off + offsetof(struct qg_block_q6_K, qh);

	for (int v = 0; v < 4; v++) {
		const uint8_t *const *r4 = row + 4 * v;
		for (int h = 0; h < 2; h++) {
			UNROLL
			for (int s = 0; s < 2; s++) {
				uint8x16_t l0[4], l1[4], hb[4];
				kq_arm_transpose4(r4, ql + 64 * (size_t)h + 16 * (size_t)s, l0);
				kq_arm_transpose4(r4, ql + 64 * (size_t)h + 32 + 16 * (size_t)s, l1);
				kq_arm_transpose4(r4, qh + 32 * (size_t)h + 16 * (size_t)s, hb);
				UNROLL
				for (int m = 0; m < 4; m++) {
					uint8x16_t c[4];
					kq_arm_q6_K_codes(l0[m], l1[m], hb[m], c);
					UNROLL
					for (int q = 0; q < 4; q++)
						vst1q_u8((uint8_t *)t->q[32 * h + 8 * q + 4 * s + m] + 16 * v, c[q]);
				}
			}
		}
		int32x4_t sc[16];
		float32x4_t d;
		kq_arm_q6_K_head(r4, off, sc, &d);
		vst1q_f32(t->d + 4 * v, d);
		store_scales(t, v, sc, 16);
	}
}

/*
 * A super-block's integer steps are one asm loop: GCC, given them as
 * intrinsics, sinks the multiplies by the scales past the next sub-block's
 * sdot and copies the running sums to keep them, computes every ld1
 * address apart, and moves the 16 sums between registers at every turn of
 * a loop over the sub-blocks.  Here the weights stream through v0-v3 with
 * post-indexed loads, activation row g's 16 bytes (four quads) sit in
 * v4 + g, row g's running sums X in v16 + 4g .. v19 + 4g and its products
 * in v24 + 4g .. v27 + 4g, stored once at the end.
 *
 * QUADS(G): four quads, each one ld1 of the tile and 4 * G sdot; SCALE(G):
 * the sub-block's scale differences into the products, 4 * G mla.
 */
#define KQ_SDOT(x, w, a, l) "sdot v" x ".4s, v" w ".16b, v" a ".4b[" l "]\n\t"
#define KQ_QUAD1(l)                                                    \
	"ld1 {v0.16b-v3.16b}, [%[wq]], #64\n\t"                        \
	KQ_SDOT("16", "0", "4", l) KQ_SDOT("17", "1", "4", l) KQ_SDOT("18", "2", "4", l) KQ_SDOT("19", "3", "4", l)
#define KQ_QUAD2(l)                                                    \
	KQ_QUAD1(l)                                                    \
	KQ_SDOT("20", "0", "5", l) KQ_SDOT("21", "1", "5", l) KQ_SDOT("22", "2", "5", l) KQ_SDOT("23", "3", "5", l)
#define KQ_QUADS1 "ldr q4, [%[a0]], #16\n\t" KQ_QUAD1("0") KQ_QUAD1("1") KQ_QUAD1("2") KQ_QUAD1("3")
#define KQ_QUADS2                                                      \
	"ldr q4, [%[a0]], #16\n\t"                                      \
	"ldr q5, [%[a1]], #16\n\t" KQ_QUAD2("0") KQ_QUAD2("1") KQ_QUAD2("2") KQ_QUAD2("3")
#define KQ_MLA(i, x, s) "mla v" i ".4s, v" x ".4s, v" s ".4s\n\t"
#define KQ_SCALE1                                                      \
	"ld1 {v0.4s-v3.4s}, [%[sp]], #64\n\t"                          \
	KQ_MLA("24", "16", "0") KQ_MLA("25", "17", "1") KQ_MLA("26", "18", "2") KQ_MLA("27", "19", "3")
#define KQ_SCALE2 KQ_SCALE1 KQ_MLA("28", "20", "0") KQ_MLA("29", "21", "1") KQ_MLA("30", "22", "2") KQ_MLA("31", "23", "3")
#define KQ_ZERO4(r0, r1, r2, r3) "movi v" r0 ".4s, #0\n\tmovi v" r1 ".4s, #0\n\tmovi v" r2 ".4s, #0\n\tmovi v" r3 ".4s, #0\n\t"
#define KQ_ZERO1 KQ_ZERO4("16", "17", "18", "19") KQ_ZERO4("24", "25", "26", "27")
#define KQ_ZERO2 KQ_ZERO1 KQ_ZERO4("20", "21", "22", "23") KQ_ZERO4("28", "29", "30", "31")
#define KQ_LOOP(body) "1:\n\t" body "subs %w[n], %w[n], #1\n\tb.ne 1b\n\t"
#define KQ_STORE1 "st1 {v24.4s-v27.4s}, [%[out]]\n\t"
#define KQ_STORE2 KQ_STORE1 "add %[out], %[out], #64\n\tst1 {v28.4s-v31.4s}, [%[out]]\n\t"
#define KQ_CLOBBER                                                     \
	"v0", "v1", "v2", "v3", "v4", "v5", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", \
	"v26", "v27", "v28", "v29", "v30", "v31", "cc", "memory"

/*
 * One super-block's ISUM (lanes = rows 4v .. 4v + 3 at ISUM[g][v]) for
 * one activation row (A1 NULL) or two, from tile T.
 */
static INLINE void sums(const int q6, const int G, const struct tile *t, const int8_t *a0, const int8_t *a1,
			int32_t isum[GM][4][4])
{
	const int8_t *wq = t->q[0];
	const int32_t *sp = t->sc[0];
	int32_t *out = isum[0][0];
	int n = q6 ? 16 : 8;

	if (G == 1 && q6)
		__asm__ volatile(KQ_ZERO1 KQ_LOOP(KQ_QUADS1 KQ_SCALE1) KQ_STORE1
				 : [wq] "+r"(wq), [a0] "+r"(a0), [sp] "+r"(sp), [n] "+r"(n), [out] "+r"(out)
				 : : KQ_CLOBBER);
	else if (G == 1)
		__asm__ volatile(KQ_ZERO1 KQ_LOOP(KQ_QUADS1 KQ_QUADS1 KQ_SCALE1) KQ_STORE1
				 : [wq] "+r"(wq), [a0] "+r"(a0), [sp] "+r"(sp), [n] "+r"(n), [out] "+r"(out)
				 : : KQ_CLOBBER);
	else if (q6)
		__asm__ volatile(KQ_ZERO2 KQ_LOOP(KQ_QUADS2 KQ_SCALE2) KQ_STORE2
				 : [wq] "+r"(wq), [a0] "+r"(a0), [a1] "+r"(a1), [sp] "+r"(sp), [n] "+r"(n),
				   [out] "+r"(out)
				 : : KQ_CLOBBER);
	else
		__asm__ volatile(KQ_ZERO2 KQ_LOOP(KQ_QUADS2 KQ_QUADS2 KQ_SCALE2) KQ_STORE2
				 : [wq] "+r"(wq), [a0] "+r"(a0), [a1] "+r"(a1), [sp] "+r"(sp), [n] "+r"(n),
				   [out] "+r"(out)
				 : : KQ_CLOBBER);
}

/*
 * G activation rows (row g's super-block b at A[g * NBA + b]) against the
 * KC tiles T: S[g * LDS + r] for the tile's 16 rows, starting from 0
 * (FIRST) or from what S holds (the chunks before).
 */
static INLINE void run_tiles(const int G, const int q6, const struct tile *T, int kc, const struct qg_block_q8_K *a,
			     size_t nba, float *s, size_t lds, int first)
{
	float32x4_t acc[GM][4];

	UNROLL
	for (int g = 0; g < G; g++) {
		UNROLL
		for (int v = 0; v < 4; v++)
			acc[g][v] = first ? vdupq_n_f32(0.0f) : vld1q_f32(s + (size_t)g * lds + 4 * v);
	}
	for (int b = 0; b < kc; b++) {
		const struct tile *t = &T[b];
		_Alignas(16) int32_t isum[GM][4][4];

		sums(q6, G, t, a[b].qs, G == 2 ? a[nba + b].qs : NULL, isum);
		UNROLL
		for (int g = 0; g < G; g++) {
			const struct qg_block_q8_K *ab = &a[g * nba + b];
			const int16x8_t bp = vpaddq_s16(vld1q_s16(ab->bsums), vld1q_s16(ab->bsums + 8));
			UNROLL
			for (int v = 0; v < 4; v++) {
				const float32x4_t dw = vmulq_n_f32(vld1q_f32(t->d + 4 * v), ab->d);
				acc[g][v] = vaddq_f32(acc[g][v], vmulq_f32(dw, vcvtq_f32_s32(vld1q_s32(isum[g][v]))));
				if (!q6) {
					const int16x8x4_t m = vld1q_s16_x4(t->mn[v][0]);
					int32x4_t ms = vmull_laneq_s16(vget_low_s16(m.val[0]), bp, 0);
					ms = vmlal_high_laneq_s16(ms, m.val[0], bp, 1);
					ms = vmlal_laneq_s16(ms, vget_low_s16(m.val[1]), bp, 2);
					ms = vmlal_high_laneq_s16(ms, m.val[1], bp, 3);
					ms = vmlal_laneq_s16(ms, vget_low_s16(m.val[2]), bp, 4);
					ms = vmlal_high_laneq_s16(ms, m.val[2], bp, 5);
					ms = vmlal_laneq_s16(ms, vget_low_s16(m.val[3]), bp, 6);
					ms = vmlal_high_laneq_s16(ms, m.val[3], bp, 7);
					const float32x4_t dm = vmulq_n_f32(vld1q_f32(t->dmin + 4 * v), ab->d);
					acc[g][v] = vsubq_f32(acc[g][v], vmulq_f32(dm, vcvtq_f32_s32(ms)));
				}
			}
		}
	}
	UNROLL
	for (int g = 0; g < G; g++) {
		UNROLL
		for (int v = 0; v < 4; v++)
			vst1q_f32(s + (size_t)g * lds + 4 * v, acc[g][v]);
	}
}

/*
 * Every activation row, GM at a time, against one chunk's tiles.  A tile
 * of fewer than 16 rows (NCOL) runs on a copy of its outputs, so that
 * nothing past NC is read or written.
 */
static INLINE void run_rows(const int q6, const struct tile *T, int kc, const struct qg_block_q8_K *a, size_t nba,
			    int nr, float *s, size_t lds, int first, int ncol)
{
	for (int g0 = 0; g0 < nr; g0 += GM) {
		const int G = nr - g0 < GM ? nr - g0 : GM;
		const struct qg_block_q8_K *ag = a + (size_t)g0 * nba;
		float *sg = s + (size_t)g0 * lds;
		float part[GM][16];
		if (ncol < 16) {
			for (int g = 0; g < G && !first; g++)
				memcpy(part[g], sg + (size_t)g * lds, (size_t)ncol * sizeof(float));
			_Static_assert(GM == 2, "one tail case below");
			if (G == GM)
				run_tiles(GM, q6, T, kc, ag, nba, part[0], 16, first);
			else
				run_tiles(1, q6, T, kc, ag, nba, part[0], 16, first);
			for (int g = 0; g < G; g++)
				memcpy(sg + (size_t)g * lds, part[g], (size_t)ncol * sizeof(float));
		} else if (G == GM) {
			run_tiles(GM, q6, T, kc, ag, nba, sg, lds, first);
		} else {
			run_tiles(1, q6, T, kc, ag, nba, sg, lds, first);
		}
	}
}

#define KQ_GEMM_FAMILY dotprod
#define KQ_TILE_ROWS 16
#define KQ_TILE_ALIGN 64
#include "kquant-gemm.h"

/* --- Q8_0 weights --------------------------------------------------------- */

/*
 * Q8_0 blocks carry one scale per 32 values, so a tile is one block of 16
 * rows: its eight quads laid out as the K-quant tiles' (lane r of vector
 * v is row 4v + r's four codes) and the rows' scales as floats, KC8
 * blocks to a chunk.  Two activation rows meet a tile as above, 64 sdot
 * by lane into sums that start from zero at every block; a lane's sum is
 * at most 32 * 128 * 128, an exact int32 and an exact float.  The float
 * part is the reference's, lane by lane and each step rounded alone: sum
 * += (float)sumi * (dw * da), blocks in order, so every output is
 * qg_vec_dot_q8_0_q8_0's bits.  That part (zero, convert, two multiplies
 * and an add per four outputs and block) costs more than half as many
 * instructions as the sdot, and no grouping of rows shares it; what the
 * shape can still save is loads, which is why two activation rows go per
 * pass, as for the K-quants.
 *
 * The tiles are built by an asm loop: a 16-byte ld4 by lane puts one
 * row's four quads in lane r of four vectors, so four of them are a
 * transpose of four rows without a permute, and every row's pointer
 * walks its blocks with post-indexed loads, scale (ld1 by lane, 2 bytes)
 * then codes (two ld4, 16 bytes each).
 */

/* Blocks per chunk: a chunk's tiles are KC8 * 576 bytes, 18 KB, inside every dotprod core's L1. */
#define KC8 32

/* One block of 16 weight rows; KC8 of them follow one another, as the asm reads them. */
struct tile8 {
	int8_t q[8][64];	/* quad i: row r's codes 4i .. 4i + 3 at 4r */
	float d[16];
};

_Static_assert(sizeof(struct qg_block_q8_0) == 34 && offsetof(struct qg_block_q8_0, qs) == 2,
	       "the asm walks Q8_0 blocks as 2 bytes of scale and 32 of codes");
_Static_assert(sizeof(struct tile8) == 576, "the asm steps 512 bytes of codes, then 64 of scales");
_Static_assert(sizeof(struct qg_q8_0_aux) == 8 && offsetof(struct qg_q8_0_aux, d) == 0,
	       "the asm reads aux's scales 8 bytes apart");

/* Row R's scale into lane L of v16; its codes into lane L of vQ .. vQ + 3 (Q a register number). */
#define Q8_SCALE(r, l) "ld1 {v16.h}[" l "], [%[r" r "]], #2\n\t"
#define Q8_LD4(r, q0, q1, q2, q3, l) "ld4 {v" q0 ".s, v" q1 ".s, v" q2 ".s, v" q3 ".s}[" l "], [%[r" r "]], #16\n\t"
/* 16 bytes of the eight rows, rows 0-3 to v0-v3, rows 4-7 to v4-v7, stored as quads 4h .. 4h + 3 (at byte O) */
#define Q8_HALF(o0, o1, o2, o3)                                        \
	Q8_LD4("0", "0", "1", "2", "3", "0") Q8_LD4("1", "0", "1", "2", "3", "1") \
	Q8_LD4("2", "0", "1", "2", "3", "2") Q8_LD4("3", "0", "1", "2", "3", "3") \
	Q8_LD4("4", "4", "5", "6", "7", "0") Q8_LD4("5", "4", "5", "6", "7", "1") \
	Q8_LD4("6", "4", "5", "6", "7", "2") Q8_LD4("7", "4", "5", "6", "7", "3") \
	"stp q0, q4, [%[t], #" o0 "]\n\tstp q1, q5, [%[t], #" o1 "]\n\t"     \
	"stp q2, q6, [%[t], #" o2 "]\n\tstp q3, q7, [%[t], #" o3 "]\n\t"

/*
 * KC blocks of eight rows (ROW[r] at their first block) into the tiles
 * from T, which points at row 0's place in the first (T[0].q[0] or its
 * byte 32): as many operands as an asm takes, so 16 rows are two calls.
 */
static void tiles8_q8_0(const uint8_t *const row[8], int kc, uint8_t *t)
{
	const uint8_t *r0 = row[0], *r1 = row[1], *r2 = row[2], *r3 = row[3];
	const uint8_t *r4 = row[4], *r5 = row[5], *r6 = row[6], *r7 = row[7];

	__asm__ volatile("1:\n\t"
			 Q8_SCALE("0", "0") Q8_SCALE("1", "1") Q8_SCALE("2", "2") Q8_SCALE("3", "3")
			 Q8_SCALE("4", "4") Q8_SCALE("5", "5") Q8_SCALE("6", "6") Q8_SCALE("7", "7")
			 Q8_HALF("0", "64", "128", "192")
			 Q8_HALF("256", "320", "384", "448")
			 "fcvtl v18.4s, v16.4h\n\t"
			 "fcvtl2 v19.4s, v16.8h\n\t"
			 "stp q18, q19, [%[t], #512]\n\t"
			 "add %[t], %[t], #576\n\t"
			 "subs %w[n], %w[n], #1\n\t"
			 "b.ne 1b\n\t"
			 : [r0] "+r"(r0), [r1] "+r"(r1), [r2] "+r"(r2), [r3] "+r"(r3), [r4] "+r"(r4), [r5] "+r"(r5),
			   [r6] "+r"(r6), [r7] "+r"(r7), [t] "+r"(t), [n] "+r"(kc)
			 :
			 : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v16", "v18", "v19", "cc", "memory");
}

/*
 * A block's integer and float steps, one asm loop as the K-quant sums
 * are: the tile streams through v0-v3, activation row g's 32 codes sit
 * in v4 + 2g and v5 + 2g (quad i in lane i % 4 of the first or second),
 * its sums in v16 + 4g .. v19 + 4g and its outputs in v24 + 4g .. v27 +
 * 4g, loaded and stored once per chunk.  QUAD(a, l): one ld1 of the
 * tile and 4 * G sdot against quad l of vA; FLOAT: four outputs' float
 * step, v5 the scales' product (the codes there are spent by then), row
 * g's activation scale in v8 + g, where it outlives a block.
 */
#define Q8_QUAD1(a, l)                                                 \
	"ld1 {v0.16b-v3.16b}, [%[t]], #64\n\t"                         \
	KQ_SDOT("16", "0", a, l) KQ_SDOT("17", "1", a, l) KQ_SDOT("18", "2", a, l) KQ_SDOT("19", "3", a, l)
#define Q8_QUAD2(a, b, l)                                              \
	Q8_QUAD1(a, l)                                                 \
	KQ_SDOT("20", "0", b, l) KQ_SDOT("21", "1", b, l) KQ_SDOT("22", "2", b, l) KQ_SDOT("23", "3", b, l)
#define Q8_QUADS1                                                      \
	Q8_QUAD1("4", "0") Q8_QUAD1("4", "1") Q8_QUAD1("4", "2") Q8_QUAD1("4", "3") \
	Q8_QUAD1("5", "0") Q8_QUAD1("5", "1") Q8_QUAD1("5", "2") Q8_QUAD1("5", "3")
#define Q8_QUADS2                                                      \
	Q8_QUAD2("4", "6", "0") Q8_QUAD2("4", "6", "1") Q8_QUAD2("4", "6", "2") Q8_QUAD2("4", "6", "3") \
	Q8_QUAD2("5", "7", "0") Q8_QUAD2("5", "7", "1") Q8_QUAD2("5", "7", "2") Q8_QUAD2("5", "7", "3")
#define Q8_FLOAT(x, acc, w, a, l)                                      \
	"fmul v5.4s, v" w ".4s, v" a ".s[" l "]\n\t"                   \
	"scvtf v" x ".4s, v" x ".4s\n\t"                               \
	"fmul v" x ".4s, v" x ".4s, v5.4s\n\t"                         \
	"fadd v" acc ".4s, v" acc ".4s, v" x ".4s\n\t"
#define Q8_FLOATS1(l)                                                  \
	"ld1 {v0.4s-v3.4s}, [%[t]], #64\n\t"                           \
	Q8_FLOAT("16", "24", "0", "8", l) Q8_FLOAT("17", "25", "1", "8", l) Q8_FLOAT("18", "26", "2", "8", l) \
	Q8_FLOAT("19", "27", "3", "8", l)
#define Q8_FLOATS2(l)                                                  \
	Q8_FLOATS1(l)                                                  \
	Q8_FLOAT("20", "28", "0", "9", l) Q8_FLOAT("21", "29", "1", "9", l) Q8_FLOAT("22", "30", "2", "9", l) \
	Q8_FLOAT("23", "31", "3", "9", l)
/* One block, row g's activation scale in lane L of v8 + g. */
#define Q8_BLOCK1(l)                                                   \
	KQ_ZERO4("16", "17", "18", "19")                               \
	"ld1 {v4.16b, v5.16b}, [%[a0]], %[ab]\n\t" Q8_QUADS1 Q8_FLOATS1(l)
#define Q8_BLOCK2(l)                                                   \
	KQ_ZERO4("16", "17", "18", "19") KQ_ZERO4("20", "21", "22", "23") \
	"ld1 {v4.16b, v5.16b}, [%[a0]], %[ab]\n\t"                      \
	"ld1 {v6.16b, v7.16b}, [%[a1]], %[ab]\n\t" Q8_QUADS2 Q8_FLOATS2(l)
/*
 * The blocks two a turn, so that one load brings a row's two aux
 * entries (its scales in lanes 0 and 2), then an odd last block.
 */
#define Q8_BLOCKS(G, aux2, aux1)                                       \
	"cbz %[pairs], 4f\n\t"                                         \
	"1:\n\t" aux2 Q8_BLOCK##G("0") Q8_BLOCK##G("2")                \
	"subs %[pairs], %[pairs], #1\n\t"                               \
	"b.ne 1b\n\t"                                                   \
	"4:\n\t"                                                        \
	"cbz %[odd], 5f\n\t" aux1 Q8_BLOCK##G("0") "5:\n\t"
#define Q8_LOOP1 Q8_BLOCKS(1, "ldr q8, [%[x0]], #16\n\t", "ldr s8, [%[x0]], #8\n\t")
#define Q8_LOOP2                                                       \
	Q8_BLOCKS(2, "ldr q8, [%[x0]], #16\n\tldr q9, [%[x1]], #16\n\t", \
		  "ldr s8, [%[x0]], #8\n\tldr s9, [%[x1]], #8\n\t")
/* The outputs: from S (FIRST zero: the chunks before) or zero, and back to S. */
#define Q8_OPEN(load, zero) "cbnz %w[first], 2f\n\t" load "b 3f\n\t2:\n\t" zero "3:\n\t"
#define Q8_OPEN1 Q8_OPEN("ld1 {v24.4s-v27.4s}, [%[s0]]\n\t", KQ_ZERO4("24", "25", "26", "27"))
#define Q8_OPEN2                                                       \
	Q8_OPEN("ld1 {v24.4s-v27.4s}, [%[s0]]\n\tld1 {v28.4s-v31.4s}, [%[s1]]\n\t", \
		KQ_ZERO4("24", "25", "26", "27") KQ_ZERO4("28", "29", "30", "31"))
#define Q8_CLOSE1 "st1 {v24.4s-v27.4s}, [%[s0]]\n\t"
#define Q8_CLOSE2 Q8_CLOSE1 "st1 {v28.4s-v31.4s}, [%[s1]]\n\t"
#define Q8_CLOBBER                                                     \
	"v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v16", "v17", "v18", "v19", "v20", "v21", "v22", \
	"v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31", "cc", "memory"

/*
 * G activation rows (the codes of row g's first block at AG, its aux at
 * XG, blocks 34 and 8 bytes apart) against the KC tiles T: S0[c] and
 * S1[c] (G = 2) for the 16 rows, added to unless FIRST.
 */
static INLINE void run_tiles8(const int G, const struct tile8 *T, int kc, const int8_t *a0, const int8_t *a1,
			      const struct qg_q8_0_aux *x0, const struct qg_q8_0_aux *x1, float *s0, float *s1, int first)
{
	const struct tile8 *t = T;
	const size_t ab = sizeof(struct qg_block_q8_0);
	int64_t pairs = kc / 2, odd = kc % 2;

	if (G == 1)
		__asm__ volatile(Q8_OPEN1 Q8_LOOP1 Q8_CLOSE1
				 : [t] "+r"(t), [a0] "+r"(a0), [x0] "+r"(x0), [pairs] "+r"(pairs)
				 : [ab] "r"(ab), [s0] "r"(s0), [first] "r"(first), [odd] "r"(odd)
				 : Q8_CLOBBER);
	else
		__asm__ volatile(Q8_OPEN2 Q8_LOOP2 Q8_CLOSE2
				 : [t] "+r"(t), [a0] "+r"(a0), [a1] "+r"(a1), [x0] "+r"(x0), [x1] "+r"(x1),
				   [pairs] "+r"(pairs)
				 : [ab] "r"(ab), [s0] "r"(s0), [s1] "r"(s1), [first] "r"(first), [odd] "r"(odd)
				 : Q8_CLOBBER);
}

void qg_kq_gemm_q8_0_dotprod(int64_t k, float *restrict s, size_t lds, const void *restrict vw, size_t wstride,
			     int nc, const void *restrict va, const struct qg_q8_0_aux *restrict aux, int nr)
{
	const uint8_t *w = vw;
	const struct qg_block_q8_0 *a = va;
	const int64_t nb = k / QG_QK;
	_Alignas(64) struct tile8 T[KC8];

	for (int64_t b0 = 0; b0 < nb; b0 += KC8) {
		const int kc = nb - b0 < KC8 ? (int)(nb - b0) : KC8;
		const int first = b0 == 0;
		for (int c0 = 0; c0 < nc; c0 += 16) {
			const uint8_t *row[16];
			for (int r = 0; r < 16; r++)
				row[r] = w + (size_t)(c0 + r < nc ? c0 + r : nc - 1) * wstride +
					 (size_t)b0 * sizeof(struct qg_block_q8_0);
			tiles8_q8_0(row, kc, (uint8_t *)T[0].q[0]);
			tiles8_q8_0(row + 8, kc, (uint8_t *)T[0].q[0] + 32);
			/* a tile of fewer than 16 rows runs on a copy of its outputs: nothing past NC is touched */
			const int ncol = nc - c0 < 16 ? nc - c0 : 16;
			for (int g0 = 0; g0 < nr; g0 += 2) {
				const int two = nr - g0 >= 2;
				const size_t i0 = (size_t)g0 * (size_t)nb + (size_t)b0, i1 = i0 + (size_t)nb;
				float *s0 = s + (size_t)g0 * lds + c0, *s1 = s0 + lds;
				float part[2][16];
				float *p0 = ncol < 16 ? part[0] : s0, *p1 = ncol < 16 ? part[1] : s1;
				if (ncol < 16 && !first) {
					memcpy(part[0], s0, (size_t)ncol * sizeof(float));
					if (two)
						memcpy(part[1], s1, (size_t)ncol * sizeof(float));
				}
				if (two)
					run_tiles8(2, T, kc, a[i0].qs, a[i1].qs, &aux[i0], &aux[i1], p0, p1, first);
				else
					run_tiles8(1, T, kc, a[i0].qs, NULL, &aux[i0], NULL, p0, NULL, first);
				if (ncol < 16) {
					memcpy(s0, part[0], (size_t)ncol * sizeof(float));
					if (two)
						memcpy(s1, part[1], (size_t)ncol * sizeof(float));
				}
			}
		}
	}
}

/* --- Q8_0_4X4 weights ----------------------------------------------------- */

/*
 * Q8_0_4X4 weights are a tile as they are stored: a block_q8_0x4's 16
 * bytes at qs[16c] are its four rows' codes 4c .. 4c + 3, lane j row
 * j's, and the activations come interleaved the same way
 * (qg_q8_0x4_act, made once per product by mul_mat), so "sdot vX.4s,
 * vW.16b, vA.4b[r]" meets activation row r's quad c with four weight
 * rows and nothing is built per tile but the weights' scales as floats.
 *
 * Two groups of weight rows (8) against four activation rows per pass:
 * per block, 64 sdot into 8 sums that start from zero, then the
 * layout's float step lane by lane (kernels.h): dw * da rounded once (8
 * fmul), the sum converted (exact: |isum| <= 2^19) and fused into the
 * output's running sum (8 fmla).  That is 12 instructions per four
 * outputs and block, the floor for this order; the loads (the eight
 * rows' 256 bytes of codes in four, the activation's 144 bytes in
 * three, the weights' scales in one) add 8 per 32 outputs and block,
 * the loop (four blocks a turn) half an instruction.
 * 16 sums and 16 outputs fill the registers, so no larger tile fits.
 *
 * K goes in chunks of KC4 blocks, so that a chunk's activations (KC4 *
 * 144 bytes per group of four rows) stay in L1 while the pairs of
 * weight groups pass; a pair's scales are widened once per chunk.
 */

/* Blocks per chunk: 4.5 KB of activations per group of four rows, 8.5 KB of a pair's weights. */
#define KC4 32

_Static_assert(sizeof(struct qg_block_q8_0x4) == 136 && offsetof(struct qg_block_q8_0x4, qs) == 8,
	       "the asm skips a Q8_0_4X4 block's 8 bytes of scales between its codes");
_Static_assert(sizeof(struct qg_q8_0x4_act) == 144 && offsetof(struct qg_q8_0x4_act, qs) == 16,
	       "the asm reads an activation record as 16 bytes of scales and 128 of codes");

/*
 * Quads 4h .. 4h + 3 of a block: the activation's into v8-v11, weight
 * group 0's into v0-v3 and group 1's (G = 2) into v4-v7, the weights'
 * pointers stepping by STEP, then 16 sdot per group: group g's sums
 * against activation row r in v16 + 4g + r (Q44_SDOTS0, Q44_SDOTS1).
 */
#define Q44_SDOT4(x0, x1, x2, x3, w, a)                                                                   \
	KQ_SDOT(x0, w, a, "0") KQ_SDOT(x1, w, a, "1") KQ_SDOT(x2, w, a, "2") KQ_SDOT(x3, w, a, "3")
#define Q44_SDOTS0(w, a) Q44_SDOT4("16", "17", "18", "19", w, a)
#define Q44_SDOTS1(w, a) Q44_SDOT4("20", "21", "22", "23", w, a)
#define Q44_HALF1(step)                                                                                   \
	"ld1 {v8.16b-v11.16b}, [%[pa]], #64\n\t"                                                       \
	"ld1 {v0.16b-v3.16b}, [%[p0]], " step "\n\t"                                                  \
	Q44_SDOTS0("0", "8") Q44_SDOTS0("1", "9") Q44_SDOTS0("2", "10") Q44_SDOTS0("3", "11")
#define Q44_HALF2(step)                                                                                   \
	"ld1 {v8.16b-v11.16b}, [%[pa]], #64\n\t"                                                       \
	"ld1 {v0.16b-v3.16b}, [%[p0]], " step "\n\t"                                                  \
	"ld1 {v4.16b-v7.16b}, [%[p1]], " step "\n\t"                                                  \
	Q44_SDOTS0("0", "8") Q44_SDOTS0("1", "9") Q44_SDOTS0("2", "10") Q44_SDOTS0("3", "11")             \
	Q44_SDOTS1("4", "8") Q44_SDOTS1("5", "9") Q44_SDOTS1("6", "10") Q44_SDOTS1("7", "11")
/* Group g's float step for activation row r: v(4g + r) = dw * da (v13 + g: dw, v12: da), then the fused add. */
#define Q44_FLOAT(t, dw, r, x, acc)                                                                       \
	"fmul v" t ".4s, v" dw ".4s, v12.s[" r "]\n\t"                                                 \
	"scvtf v" x ".4s, v" x ".4s\n\t"                                                               \
	"fmla v" acc ".4s, v" x ".4s, v" t ".4s\n\t"
#define Q44_FLOATS1                                                                                       \
	Q44_FLOAT("0", "13", "0", "16", "24") Q44_FLOAT("1", "13", "1", "17", "25")                       \
	Q44_FLOAT("2", "13", "2", "18", "26") Q44_FLOAT("3", "13", "3", "19", "27")
#define Q44_FLOATS2                                                                                       \
	Q44_FLOATS1                                                                                       \
	Q44_FLOAT("4", "14", "0", "20", "28") Q44_FLOAT("5", "14", "1", "21", "29")                       \
	Q44_FLOAT("6", "14", "2", "22", "30") Q44_FLOAT("7", "14", "3", "23", "31")
/* One block: the activation's scales (v12), the sums zeroed, both halves, the weights' scales (v13, v14) */
#define Q44_BLOCK1                                                                                        \
	"ldr q12, [%[pa]], #16\n\t"                                                                    \
	KQ_ZERO4("16", "17", "18", "19")                                                                \
	Q44_HALF1("#64") Q44_HALF1("%[skip]")                                                           \
	"ldr q13, [%[pd]], #32\n\t" Q44_FLOATS1
#define Q44_BLOCK2                                                                                        \
	"ldr q12, [%[pa]], #16\n\t"                                                                    \
	KQ_ZERO4("16", "17", "18", "19") KQ_ZERO4("20", "21", "22", "23")                              \
	Q44_HALF2("#64") Q44_HALF2("%[skip]")                                                           \
	"ldp q13, q14, [%[pd]], #32\n\t" Q44_FLOATS2
/* Four blocks a turn, then the rest one at a time. */
#define Q44_LOOP(block)                                                                                   \
	"cbz %[quads], 2f\n\t"                                                                           \
	"1:\n\t" block block block block                                                                 \
	"subs %[quads], %[quads], #1\n\t"                                                                \
	"b.ne 1b\n\t"                                                                                     \
	"2:\n\t"                                                                                          \
	"cbz %[rest], 3f\n\t"                                                                            \
	"5:\n\t" block                                                                                   \
	"subs %[rest], %[rest], #1\n\t"                                                                  \
	"b.ne 5b\n\t"                                                                                     \
	"3:\n\t"

/*
 * A pass of G weight groups over NG (>= 1) groups of four activation
 * rows, one after another in the asm, so that a group costs a few moves
 * and adds rather than a call's set-up.  Per activation group: the
 * weights' pointers (their chunk's first block's codes) and the scales'
 * back to their starts, its outputs loaded (or zeroed if FIRST), its N
 * blocks, its outputs stored, the pointers on to the next group's.
 */
#define Q44_GROUPS(G, load, zero, store)                                                                  \
	"6:\n\t"                                                                                          \
	"mov %[p0], %[w0]\n\t" G2(G, "mov %[p1], %[w1]\n\t")                                           \
	"mov %[pd], %[dw]\n\t"                                                                          \
	"mov %[quads], %[quads0]\n\t"                                                                   \
	"mov %[rest], %[rest0]\n\t"                                                                     \
	"cbnz %w[first], 7f\n\t" load "b 8f\n\t"                                                        \
	"7:\n\t" zero                                                                                    \
	"8:\n\t" Q44_LOOP(Q44_BLOCK##G) store                                                           \
	"add %[pa], %[pa], %[astep]\n\t"                                                                \
	"add %[s0], %[s0], %[sstep]\n\t"                                                                \
	"add %[s1], %[s1], %[sstep]\n\t"                                                                \
	"add %[s2], %[s2], %[sstep]\n\t"                                                                \
	"add %[s3], %[s3], %[sstep]\n\t"                                                                \
	"subs %w[ng], %w[ng], #1\n\t"                                                                   \
	"b.ne 6b\n\t"
#define G2(G, x) G2_##G(x)
#define G2_1(x)
#define G2_2(x) x

/*
 * G weight groups (W0, W1: the codes of their chunk's first block; DW
 * their scales as floats, eight a block) against NG groups of four
 * activation rows (A, the first group's record of the chunk; the next
 * group's NB records on) over N blocks: activation row r of group g's
 * outputs (4 G) at S + (4g + r) * LDS, carried on from there unless
 * FIRST.
 */
static INLINE void run_q8_0_4x4(const int G, const uint8_t *w0, const uint8_t *w1, const float *dw,
				const struct qg_q8_0x4_act *a, int64_t nb, int ng, int n, float *s, size_t lds,
				int first)
{
	const size_t skip = 64 + offsetof(struct qg_block_q8_0x4, qs);	/* to the next block's codes */
	const size_t astep = (size_t)(nb - n) * sizeof *a, sstep = 4 * lds * sizeof *s;
	const int64_t quads0 = n / 4, rest0 = n % 4;
	float *s0 = s, *s1 = s + lds, *s2 = s + 2 * lds, *s3 = s + 3 * lds;
	const uint8_t *p0, *p1;
	const float *pd;
	int64_t quads, rest;

	if (G == 2)
		__asm__ volatile(Q44_GROUPS(2,
					    "ldp q24, q28, [%[s0]]\n\tldp q25, q29, [%[s1]]\n\t"
					    "ldp q26, q30, [%[s2]]\n\tldp q27, q31, [%[s3]]\n\t",
					    KQ_ZERO4("24", "25", "26", "27") KQ_ZERO4("28", "29", "30", "31"),
					    "stp q24, q28, [%[s0]]\n\tstp q25, q29, [%[s1]]\n\t"
					    "stp q26, q30, [%[s2]]\n\tstp q27, q31, [%[s3]]\n\t")
				 : [p0] "=&r"(p0), [p1] "=&r"(p1), [pd] "=&r"(pd), [quads] "=&r"(quads),
				   [rest] "=&r"(rest), [pa] "+r"(a), [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2),
				   [s3] "+r"(s3), [ng] "+r"(ng)
				 : [w0] "r"(w0), [w1] "r"(w1), [dw] "r"(dw), [quads0] "r"(quads0), [rest0] "r"(rest0),
				   [astep] "r"(astep), [sstep] "r"(sstep), [skip] "r"(skip), [first] "r"(first)
				 : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13",
				   "v14", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26",
				   "v27", "v28", "v29", "v30", "v31", "cc", "memory");
	else
		__asm__ volatile(Q44_GROUPS(1,
					    "ldr q24, [%[s0]]\n\tldr q25, [%[s1]]\n\t"
					    "ldr q26, [%[s2]]\n\tldr q27, [%[s3]]\n\t",
					    KQ_ZERO4("24", "25", "26", "27"),
					    "str q24, [%[s0]]\n\tstr q25, [%[s1]]\n\t"
					    "str q26, [%[s2]]\n\tstr q27, [%[s3]]\n\t")
				 : [p0] "=&r"(p0), [pd] "=&r"(pd), [quads] "=&r"(quads), [rest] "=&r"(rest),
				   [pa] "+r"(a), [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3),
				   [ng] "+r"(ng)
				 : [w0] "r"(w0), [dw] "r"(dw), [quads0] "r"(quads0), [rest0] "r"(rest0),
				   [astep] "r"(astep), [sstep] "r"(sstep), [skip] "r"(skip), [first] "r"(first)
				 : "v0", "v1", "v2", "v3", "v8", "v9", "v10", "v11", "v12", "v13", "v16", "v17", "v18",
				   "v19", "v24", "v25", "v26", "v27", "cc", "memory");
}

/*
 * The scales of N (>= 1) blocks of groups G0 and G1 as floats into DW,
 * eight a block: seven instructions a block, where GCC's loop took ten.
 */
static void widen_scales(const uint8_t *g0, const uint8_t *g1, int n, float *dw)
{
	const size_t step = sizeof(struct qg_block_q8_0x4);

	_Static_assert(sizeof(struct qg_block_q8_0x4) == 136, "the post-index below steps 136 bytes");
	__asm__ volatile("1:\n\t"
			 "ldr d0, [%[g0]], #136\n\t"
			 "ld1 {v0.d}[1], [%[g1]], %[step]\n\t"
			 "fcvtl v1.4s, v0.4h\n\t"
			 "fcvtl2 v2.4s, v0.8h\n\t"
			 "stp q1, q2, [%[dw]], #32\n\t"
			 "subs %w[n], %w[n], #1\n\t"
			 "b.ne 1b\n\t"
			 : [g0] "+r"(g0), [g1] "+r"(g1), [dw] "+r"(dw), [n] "+r"(n)
			 : [step] "r"(step)
			 : "v0", "v1", "v2", "cc", "memory");
}

void qg_kq_gemm_q8_0_4x4_dotprod(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride,
				 int nc, const struct qg_q8_0x4_act *restrict a, int nr)
{
	const int64_t nb = k / QG_QK;
	_Alignas(16) float dw[KC4][8];

	for (int r = 0; nb == 0 && r < nr; r++)
		for (int c = 0; c < nc; c++)
			s[(size_t)r * lds + (size_t)c] = 0.0f;	/* K = 0: the empty sum */
	for (int64_t b0 = 0; b0 < nb && nr >= 4; b0 += KC4) {
		const int n = nb - b0 < KC4 ? (int)(nb - b0) : KC4;
		for (int c0 = 0; c0 < nc; c0 += 8) {
			const int G = nc - c0 >= 8 ? 2 : 1;
			const uint8_t *g0 = (const uint8_t *)w + (size_t)(c0 / 4) * wstride +
					    (size_t)b0 * sizeof(struct qg_block_q8_0x4);
			const uint8_t *g1 = G == 2 ? g0 + wstride : g0;
			const size_t qs = offsetof(struct qg_block_q8_0x4, qs);
			widen_scales(g0, g1, n, dw[0]);
			if (G == 2)
				run_q8_0_4x4(2, g0 + qs, g1 + qs, dw[0], a + b0, nb, nr / 4, n, s + c0, lds, b0 == 0);
			else
				run_q8_0_4x4(1, g0 + qs, NULL, dw[0], a + b0, nb, nr / 4, n, s + c0, lds, b0 == 0);
		}
	}
}
