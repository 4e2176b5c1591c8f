/*
 * kquant-gemm-dotprod.c - Q4_K and Q6_K weight rows against many
 * activation rows (a prompt's) with the aarch64 dot-product instructions.
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

#define INLINE static inline __attribute__((always_inline))
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
INLINE void store_scales(struct tile *t, int v, const int32x4_t sc[], const int n)
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
INLINE void sums(const int q6, const int G, const struct tile *t, const int8_t *a0, const int8_t *a1,
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
INLINE void run_tiles(const int G, const int q6, const struct tile *T, int kc, const struct qg_block_q8_K *a,
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
INLINE void run_rows(const int q6, const struct tile *T, int kc, const struct qg_block_q8_K *a, size_t nba,
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
