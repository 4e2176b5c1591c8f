/*
 * kquant-gemv-dotprod.c - one activation row (a decoding token's) against
 * many Q4_K, Q6_K or Q8_0 weight rows with the aarch64 dot-product
 * instructions (sdot), the weights in ggml's plain blocks, or in
 * Q8_0_4X4's interleaved ones (the last section).
 *
 * The one-row kernels (kquant-arm.h) meet one weight row at a time: every
 * sdot leaves four partial sums of one row, to be reduced across lanes
 * and multiplied per sub-block, and the float steps run one row at a
 * time.  ggml's repacked GEMVs store the weights interleaved, lane =
 * weight row, and need none of that; here the interleaving is done in
 * the registers, as the GEMMs (kquant-gemm-dotprod.c) do in memory but
 * with no tile, since each weight byte is used once:
 *
 * - Q4_K and Q6_K, four weight rows at a time: "ld4 {v0.s-v3.s}[r]" puts
 *   row r's 16 bytes, word m, in lane r of vm (four loads transpose four
 *   rows, with no permutes), and "sdot vX.4s, vm.16b, vA.4b[m]" meets the
 *   activation quad m with the four rows.  Lane r of every sum is row r's
 *   to the end: the sub-block sums are multiplied by the scales as vectors
 *   over the rows (kq_arm_q4_K_head, kq_arm_q6_K_head, as the GEMMs build
 *   them), and the float steps are vector steps over the rows.  Q6_K's
 *   codes enter as 0..63 and the bias of 32 comes off once per
 *   super-block from the activation's block sums, which spares a
 *   subtraction per 16 codes.
 *
 * - Q8_0 blocks are small (32 values, one fp16 scale), so the per-block
 *   costs weigh more: a 16-byte lane load per row and 16 bytes would make
 *   the loads as many as the sdot.  "ld4 {v0.d-v3.d}[r]" loads a whole
 *   block's 32 codes of row r, 8 bytes into each of four registers; two
 *   rows fill them, lanes 2r and 2r + 1 of vm holding row r's words 2m and
 *   2m + 1, and a plain sdot against the activation's bytes 8m .. 8m + 7
 *   twice over (a copy of the activation made once per call) sums them.
 *   The two lanes of each row are joined by one addp for four rows.  The
 *   sums run on over the blocks without a zeroing, and a block's sum is
 *   the difference of two running sums.  Per block of eight rows that is
 *   48 instructions for 256 multiply-adds: 16 sdot, 8 ld4, 8 loads of the
 *   rows' scales (the one thing ggml's interleaved blocks give for free:
 *   their four or eight scales are one load), 10 float steps, the rest
 *   the activation's loads, joins and loop.
 *
 * Exactness: codes enter sdot as signed bytes (Q4_K's 0..15, Q6_K's
 * 0..63, Q8_0's as stored); every integer sum is the reference's exact
 * int32 (a sum that wraps on the way, as a running sum or an mla may,
 * still gives the exact value mod 2^32, and the value fits), and the
 * float part takes the reference's steps (qg_kq_accum; Q8_0's
 * sum += sumi * (dw * da)) lane by lane, each rounded alone (this file is
 * built without contraction), so every output is the one-row kernel's
 * bit for bit.
 *
 * Rows past NC (the last group's) repeat the last row: computed, not
 * stored, so nothing is read out of bounds.
 */
#include "config.h"

#include <arm_neon.h>
#include <stddef.h>

#include "kernels.h"
#include "kquant-arm.h"
#include "kquant.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

/*
 * The integer loops are asm, as in the GEMM and for its reasons: GCC,
 * given the lane loads as intrinsics, builds each four-register
 * structure in other registers and copies it (or spills it) per load,
 * and computes every address apart; here the rows' pointers are
 * post-indexed and the registers fixed.
 *
 * Q4_K, one chunk (32 bytes of each row: sub-blocks 2c and 2c + 1): the
 * rows' bytes 0-15 into v0-v3, 16-31 into v4-v7 (lane r row r's); the
 * activation's 64 codes in v18-v21 (values 0-15 and 16-31 of sub-block
 * 2c, then of 2c + 1); the low nibbles (v16) meet them into v23, the high
 * ones (shifted in place) into v24; the scales of the two sub-blocks
 * (v26, v27, lanes = rows) multiply the sums into v25.
 */
#define GV_Q4_LOAD(first, last)                                                                          \
	"ld4 {v" first ".s-v" last ".s}[0], [%[q0]], #16\n\t"                                           \
	"ld4 {v" first ".s-v" last ".s}[1], [%[q1]], #16\n\t"                                           \
	"ld4 {v" first ".s-v" last ".s}[2], [%[q2]], #16\n\t"                                           \
	"ld4 {v" first ".s-v" last ".s}[3], [%[q3]], #16\n\t"
#define GV_Q4_WORD(w, al, ah, m)                                                                         \
	"and v16.16b, v" w ".16b, v22.16b\n\t"                                                          \
	"ushr v" w ".16b, v" w ".16b, #4\n\t"                                                           \
	"sdot v23.4s, v16.16b, v" al ".4b[" m "]\n\t"                                                   \
	"sdot v24.4s, v" w ".16b, v" ah ".4b[" m "]\n\t"
#define GV_Q4_CHUNK                                                                                      \
	GV_Q4_LOAD("0", "3") GV_Q4_LOAD("4", "7")                                                         \
	"ldp q18, q19, [%[a]], #32\n\t"                                                                   \
	"ldp q20, q21, [%[a]], #32\n\t"                                                                   \
	"ld1 {v26.4s, v27.4s}, [%[sc]], #32\n\t"                                                          \
	"movi v23.4s, #0\n\t"                                                                             \
	"movi v24.4s, #0\n\t"                                                                             \
	GV_Q4_WORD("0", "18", "20", "0") GV_Q4_WORD("1", "18", "20", "1")                                 \
	GV_Q4_WORD("2", "18", "20", "2") GV_Q4_WORD("3", "18", "20", "3")                                 \
	GV_Q4_WORD("4", "19", "21", "0") GV_Q4_WORD("5", "19", "21", "1")                                 \
	GV_Q4_WORD("6", "19", "21", "2") GV_Q4_WORD("7", "19", "21", "3")                                 \
	"mla v25.4s, v23.4s, v26.4s\n\t"                                                                  \
	"mla v25.4s, v24.4s, v27.4s\n\t"

/* ISUM of one Q4_K super-block: rows' qs at Q[r], the activation's codes at A, SC[j][r] sub-block j's scales. */
INLINE int32x4_t sums_q4_K(const uint8_t *const q[4], const int8_t *a, const int32_t *sc)
{
	const uint8_t *q0 = q[0], *q1 = q[1], *q2 = q[2], *q3 = q[3];
	_Alignas(16) int32_t out[4];

	__asm__ volatile("movi v22.16b, #0x0f\n\t"
			 "movi v25.4s, #0\n\t"
			 GV_Q4_CHUNK GV_Q4_CHUNK GV_Q4_CHUNK GV_Q4_CHUNK
			 "st1 {v25.4s}, [%[out]]\n\t"
			 : [q0] "+r"(q0), [q1] "+r"(q1), [q2] "+r"(q2), [q3] "+r"(q3), [a] "+r"(a), [sc] "+r"(sc)
			 : [out] "r"(out)
			 : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v16", "v18", "v19", "v20", "v21", "v22",
			   "v23", "v24", "v25", "v26", "v27", "memory");
	return vld1q_s32(out);
}

/* Four Q4_K rows against the activation row A of NSB super-blocks: lane r is row r's result. */
static float32x4_t gemv4_q4_K(const uint8_t *const row[4], const struct qg_block_q8_K *a, int64_t nsb)
{
	float32x4_t acc = vdupq_n_f32(0.0f);

	for (int64_t b = 0; b < nsb; b++) {
		const size_t off = (size_t)b * sizeof(struct qg_block_q4_K);
		const size_t qs = off + offsetof(struct qg_block_q4_K, qs);
		const uint8_t *const q[4] = { row[0] + qs, row[1] + qs, row[2] + qs, row[3] + qs };
		struct kq_arm_q4_K_head hd;
		kq_arm_q4_K_head(row, off, &hd);
		const int32x4_t isum = sums_q4_K(q, a[b].qs, (const int32_t *)hd.sc);
		/* msum = sum_j min_j * (bsum_2j + bsum_2j+1): the pair sums (|x| <= 4096) as int32 lanes */
		const int16x8_t pairs = vpaddq_s16(vld1q_s16(a[b].bsums), vld1q_s16(a[b].bsums + 8));
		const int32x4_t p0 = vmovl_s16(vget_low_s16(pairs)), p1 = vmovl_high_s16(pairs);
		int32x4_t msum = vmulq_laneq_s32(kq_arm_byte_lanes(hd.mn[0], 0), p0, 0);
		msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd.mn[0], 1), p0, 1);
		msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd.mn[0], 2), p0, 2);
		msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd.mn[0], 3), p0, 3);
		msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd.mn[1], 0), p1, 0);
		msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd.mn[1], 1), p1, 1);
		msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd.mn[1], 2), p1, 2);
		msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd.mn[1], 3), p1, 3);
		/* qg_kq_accum lane by lane */
		const float32x4_t dw = vmulq_n_f32(hd.d, a[b].d), dm = vmulq_n_f32(hd.dmin, a[b].d);
		acc = vaddq_f32(acc, vmulq_f32(dw, vcvtq_f32_s32(isum)));
		acc = vsubq_f32(acc, vmulq_f32(dm, vcvtq_f32_s32(msum)));
	}
	return acc;
}

/*
 * Q6_K, one group (h, s): 16 values l = 16s .. 16s + 15 of each quarter
 * q of half h (value 128h + 32q + l, sub-block 8h + 2q + s).  The rows'
 * ql bytes at 64h + l into v0-v3, at 64h + 32 + l into v4-v7, qh bytes at
 * 32h + l into v16-v19; per word m the four codes are joined from them
 * (as kq_arm_q6_K_codes, but with the high bits masked before the
 * shift-inserts: v13 = 0x33, so no mask after) as 0..63, without the
 * bias, and meet the activation's quad m of quarter q (v20-v23) into
 * v8-v11; each sum times its sub-block's scales into v12.  The rows'
 * pointers step by 16 in qh, and in ql by 16 or (from s = 1 to the next
 * half) 48.
 */
#define GV_Q6_LOAD(first, last, p, step)                                                                  \
	"ld4 {v" first ".s-v" last ".s}[0], [%[" p "0]], " step "\n\t"                                  \
	"ld4 {v" first ".s-v" last ".s}[1], [%[" p "1]], " step "\n\t"                                  \
	"ld4 {v" first ".s-v" last ".s}[2], [%[" p "2]], " step "\n\t"                                  \
	"ld4 {v" first ".s-v" last ".s}[3], [%[" p "3]], " step "\n\t"
#define GV_Q6_WORD(l0, l1, hb, m)                                                                         \
	"and v14.16b, v" hb ".16b, v13.16b\n\t"                                                         \
	"ushr v15.16b, v" hb ".16b, #2\n\t"                                                             \
	"and v15.16b, v15.16b, v13.16b\n\t"                                                             \
	"mov v28.16b, v" l0 ".16b\n\t"                                                                  \
	"sli v28.16b, v14.16b, #4\n\t"                                                                  \
	"sri v14.16b, v" l0 ".16b, #4\n\t"                                                              \
	"mov v29.16b, v" l1 ".16b\n\t"                                                                  \
	"sli v29.16b, v15.16b, #4\n\t"                                                                  \
	"sri v15.16b, v" l1 ".16b, #4\n\t"                                                              \
	"sdot v8.4s, v28.16b, v20.4b[" m "]\n\t"                                                        \
	"sdot v9.4s, v29.16b, v21.4b[" m "]\n\t"                                                        \
	"sdot v10.4s, v14.16b, v22.4b[" m "]\n\t"                                                       \
	"sdot v11.4s, v15.16b, v23.4b[" m "]\n\t"
#define GV_Q6_MLA(x, o) "ldr q30, [%[sc], #" o "]\n\tmla v12.4s, v" x ".4s, v30.4s\n\t"
/* O0: byte offset of quarter 0's activation codes and of its sub-block's scales; STEP: ql's */
#define GV_Q6_GROUP(o0, o1, o2, o3, step)                                                                 \
	GV_Q6_LOAD("0", "3", "l", step) GV_Q6_LOAD("4", "7", "m", step) GV_Q6_LOAD("16", "19", "h", "#16") \
	"ldr q20, [%[a], #" o0 "]\n\t"                                                                   \
	"ldr q21, [%[a], #" o1 "]\n\t"                                                                   \
	"ldr q22, [%[a], #" o2 "]\n\t"                                                                   \
	"ldr q23, [%[a], #" o3 "]\n\t"                                                                   \
	"movi v8.4s, #0\n\tmovi v9.4s, #0\n\tmovi v10.4s, #0\n\tmovi v11.4s, #0\n\t"                    \
	GV_Q6_WORD("0", "4", "16", "0") GV_Q6_WORD("1", "5", "17", "1")                                   \
	GV_Q6_WORD("2", "6", "18", "2") GV_Q6_WORD("3", "7", "19", "3")                                   \
	GV_Q6_MLA("8", o0) GV_Q6_MLA("9", o1) GV_Q6_MLA("10", o2) GV_Q6_MLA("11", o3)

/*
 * The sum of sc_j * (codes 0..63 . activations) of one Q6_K super-block:
 * ROW[r] + OFF its blocks, A the activation's codes, SC[j][r] sub-block
 * j's scales.
 */
INLINE int32x4_t sums_q6_K(const uint8_t *const row[4], size_t off, const int8_t *a, const int32_t *sc)
{
	const size_t ql = off + offsetof(struct qg_block_q6_K, ql), qh = off + offsetof(struct qg_block_q6_K, qh);
	const uint8_t *l0 = row[0] + ql, *l1 = row[1] + ql, *l2 = row[2] + ql, *l3 = row[3] + ql;
	const uint8_t *m0 = l0 + 32, *m1 = l1 + 32, *m2 = l2 + 32, *m3 = l3 + 32;
	const uint8_t *h0 = row[0] + qh, *h1 = row[1] + qh, *h2 = row[2] + qh, *h3 = row[3] + qh;
	const size_t s16 = 16, s48 = 48;
	_Alignas(16) int32_t out[4];

	__asm__ volatile("movi v13.16b, #0x33\n\t"
			 "movi v12.4s, #0\n\t"
			 GV_Q6_GROUP("0", "32", "64", "96", "%[s16]")
			 GV_Q6_GROUP("16", "48", "80", "112", "%[s48]")
			 GV_Q6_GROUP("128", "160", "192", "224", "%[s16]")
			 GV_Q6_GROUP("144", "176", "208", "240", "%[s16]")
			 "st1 {v12.4s}, [%[out]]\n\t"
			 : [l0] "+r"(l0), [l1] "+r"(l1), [l2] "+r"(l2), [l3] "+r"(l3), [m0] "+r"(m0), [m1] "+r"(m1),
			   [m2] "+r"(m2), [m3] "+r"(m3), [h0] "+r"(h0), [h1] "+r"(h1), [h2] "+r"(h2),
			   [h3] "+r"(h3)
			 : [a] "r"(a), [sc] "r"(sc), [s16] "r"(s16), [s48] "r"(s48), [out] "r"(out)
			 : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13",
			   "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v28", "v29", "v30",
			   "memory");
	return vld1q_s32(out);
}

/*
 * Four Q6_K rows, as gemv4_q4_K.  The codes enter the sums as 0..63, and
 * the bias comes off once per super-block: sum_j sc_j * (c - 32) . a =
 * sum_j sc_j * c . a - 32 * sum_j sc_j * bsum_j, exact in int32 (the
 * terms are at most 2^28 and 2^23).
 */
static float32x4_t gemv4_q6_K(const uint8_t *const row[4], const struct qg_block_q8_K *a, int64_t nsb)
{
	float32x4_t acc = vdupq_n_f32(0.0f);

	for (int64_t b = 0; b < nsb; b++) {
		const size_t off = (size_t)b * sizeof(struct qg_block_q6_K);
		_Alignas(16) int32_t sc[16][4];
		int32x4_t scv[16];
		float32x4_t d;
		kq_arm_q6_K_head(row, off, scv, &d);
		UNROLL
		for (int j = 0; j < 16; j++)
			vst1q_s32(sc[j], scv[j]);
		const int32x4_t raw = sums_q6_K(row, off, a[b].qs, sc[0]);
		const int16x8_t b0 = vld1q_s16(a[b].bsums), b1 = vld1q_s16(a[b].bsums + 8);
		const int32x4_t bs[4] = { vmovl_s16(vget_low_s16(b0)), vmovl_high_s16(b0), vmovl_s16(vget_low_s16(b1)),
					  vmovl_high_s16(b1) };
		int32x4_t bias = vmulq_laneq_s32(scv[0], bs[0], 0);
		UNROLL
		for (int j = 1; j < 16; j++) {
			switch (j % 4) {
			case 0: bias = vmlaq_laneq_s32(bias, scv[j], bs[j / 4], 0); break;
			case 1: bias = vmlaq_laneq_s32(bias, scv[j], bs[j / 4], 1); break;
			case 2: bias = vmlaq_laneq_s32(bias, scv[j], bs[j / 4], 2); break;
			default: bias = vmlaq_laneq_s32(bias, scv[j], bs[j / 4], 3); break;
			}
		}
		const int32x4_t isum = vsubq_s32(raw, vshlq_n_s32(bias, 5));
		/* qg_kq_accum with no min term: acc - 0 * 0 is acc */
		acc = vaddq_f32(acc, vmulq_f32(vmulq_n_f32(d, a[b].d), vcvtq_f32_s32(isum)));
	}
	return acc;
}

KQ_ARM_GEMV_ENTRIES(dotprod)

/* --- Q8_0 ---------------------------------------------------------------- */

/* Q8_0 rows per group: four pairs, so that an activation vector serves four sdot. */
#define Q8_ROWS 8
/* Blocks per chunk of K: the activation's prepared copy is QB * 68 bytes (8.5 KB). */
#define QB 128

/*
 * Q8_0, in asm for the reasons above, over a chunk of NB blocks of eight
 * rows.  The activation comes prepared (gemv_q8_0): per block its codes
 * 8m .. 8m + 7 twice over in 16 bytes (v20 + m, one ld1), its scale as a
 * float, in lane 0 or 1 of v26 (the scales lie side by side, so one load
 * serves a turn's two blocks).  Per row its scale into lane r of v27 and
 * its 32 codes by one ld4 into lane r & 1 of v0-v3 (rows 2p, 2p + 1), met
 * by four sdot into the pair's running sum v16 + p; the pairs joined
 * (addp) give the running sums of rows 0-3 and 4-7, and their difference
 * from the last block's (v8, v9 and v28, v29 by turns, two blocks a turn
 * of the loop) the block's sums.  Then the float steps into v24 and v25.  Every row's
 * pointer steps by 34 (2 + 32, both post-indexed).
 */
#define GV_Q8_ROW(h, lane, r)                                                                             \
	"ld1 {v27.h}[" h "], [%[r" r "]], #2\n\t"                                                       \
	"ld4 {v0.d-v3.d}[" lane "], [%[r" r "]], #32\n\t"
#define GV_Q8_PAIR(x)                                                                                     \
	"sdot v" x ".4s, v0.16b, v20.16b\n\t"                                                           \
	"sdot v" x ".4s, v1.16b, v21.16b\n\t"                                                           \
	"sdot v" x ".4s, v2.16b, v22.16b\n\t"                                                           \
	"sdot v" x ".4s, v3.16b, v23.16b\n\t"
/* One block (its activation's scale in lane DL of v26); its running sums into R0, R1, the last block's in L0, L1. */
#define GV_Q8_BLOCK(r0, r1, l0, l1, dl)                                                                   \
	"ld1 {v20.16b-v23.16b}, [%[a]], #64\n\t"                                                         \
	GV_Q8_ROW("0", "0", "0") GV_Q8_ROW("1", "1", "1") GV_Q8_PAIR("16")                               \
	GV_Q8_ROW("2", "0", "2") GV_Q8_ROW("3", "1", "3") GV_Q8_PAIR("17")                               \
	GV_Q8_ROW("4", "0", "4") GV_Q8_ROW("5", "1", "5") GV_Q8_PAIR("18")                               \
	GV_Q8_ROW("6", "0", "6") GV_Q8_ROW("7", "1", "7") GV_Q8_PAIR("19")                               \
	"addp v" r0 ".4s, v16.4s, v17.4s\n\t"                                                            \
	"addp v" r1 ".4s, v18.4s, v19.4s\n\t"                                                            \
	"sub v30.4s, v" r0 ".4s, v" l0 ".4s\n\t"                                                        \
	"sub v31.4s, v" r1 ".4s, v" l1 ".4s\n\t"                                                        \
	/* sum += sumi * (dw * da), lane by lane */                                                      \
	"fcvtl v12.4s, v27.4h\n\t"                                                                       \
	"fcvtl2 v27.4s, v27.8h\n\t"                                                                      \
	"fmul v12.4s, v12.4s, v26.s[" dl "]\n\t"                                                         \
	"fmul v27.4s, v27.4s, v26.s[" dl "]\n\t"                                                         \
	"scvtf v30.4s, v30.4s\n\t"                                                                       \
	"scvtf v31.4s, v31.4s\n\t"                                                                       \
	"fmul v30.4s, v30.4s, v12.4s\n\t"                                                                \
	"fmul v31.4s, v31.4s, v27.4s\n\t"                                                                \
	"fadd v24.4s, v24.4s, v30.4s\n\t"                                                                \
	"fadd v25.4s, v25.4s, v31.4s\n\t"

/*
 * Rows R0, R0 + WSTRIDE, ... (the eight of a group, at their chunk's
 * first block) against the prepared chunk of NB blocks (AQ, DA): ACC[r]
 * (zero if FIRST) plus row r's blocks, in order.
 */
INLINE void gemv8_q8_0(const uint8_t *const row[Q8_ROWS], const int8_t *aq, const float *da, int nb, int first,
		       float *acc)
{
	const uint8_t *r0 = row[0], *r1 = row[1], *r2 = row[2], *r3 = row[3];
	const uint8_t *r4 = row[4], *r5 = row[5], *r6 = row[6], *r7 = row[7];
	int64_t pairs = nb / 2, odd = nb % 2;

	__asm__ volatile("movi v24.4s, #0\n\tmovi v25.4s, #0\n\t"
			 "cbnz %[first], 0f\n\t"
			 "ld1 {v24.4s, v25.4s}, [%[acc]]\n\t"
			 "0:\n\t"
			 "movi v16.4s, #0\n\tmovi v17.4s, #0\n\tmovi v18.4s, #0\n\tmovi v19.4s, #0\n\t"
			 "movi v8.4s, #0\n\tmovi v9.4s, #0\n\t"
			 "cbz %[pairs], 2f\n\t"
			 "1:\n\t"
			 "ldr d26, [%[da]], #8\n\t"
			 GV_Q8_BLOCK("28", "29", "8", "9", "0")
			 GV_Q8_BLOCK("8", "9", "28", "29", "1")
			 "subs %[pairs], %[pairs], #1\n\t"
			 "b.ne 1b\n\t"
			 "2:\n\t"
			 "cbz %[odd], 3f\n\t"
			 "ldr s26, [%[da]], #4\n\t"
			 GV_Q8_BLOCK("28", "29", "8", "9", "0")
			 "3:\n\t"
			 "st1 {v24.4s, v25.4s}, [%[acc]]\n\t"
			 : [r0] "+r"(r0), [r1] "+r"(r1), [r2] "+r"(r2), [r3] "+r"(r3), [r4] "+r"(r4), [r5] "+r"(r5),
			   [r6] "+r"(r6), [r7] "+r"(r7), [a] "+r"(aq), [da] "+r"(da), [pairs] "+r"(pairs)
			 : [acc] "r"(acc), [odd] "r"(odd), [first] "r"(first)
			 : "v0", "v1", "v2", "v3", "v8", "v9", "v12", "v16", "v17", "v18", "v19", "v20", "v21", "v22",
			   "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31", "cc", "memory");
}

/*
 * By chunks of QB blocks: the chunk's activation prepared once (codes
 * 8m .. 8m + 7 doubled, the scale as a float) and met by every group of
 * eight rows, whose float sums go on from S.  A group's outputs are S
 * itself, or for the last group when it is short a copy of them.
 */
void qg_kq_gemv_q8_0_dotprod(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
			     const void *restrict va)
{
	const struct qg_block_q8_0 *a = va;
	const int64_t nb = k / QG_QK;
	_Alignas(16) int8_t aq[QB][64];
	_Alignas(16) float da[QB];

	for (int c = 0; nb == 0 && c < nc; c++)
		s[c] = 0.0f;	/* K = 0: the empty sum */
	for (int64_t b0 = 0; b0 < nb; b0 += QB) {
		const int n = nb - b0 < QB ? (int)(nb - b0) : QB;
		const uint8_t *wb = (const uint8_t *)w + (size_t)b0 * sizeof(struct qg_block_q8_0);
		for (int b = 0; b < n; b++) {
			UNROLL
			for (int m = 0; m < 4; m++)
				vst1q_s64((int64_t *)(void *)aq[b] + 2 * m,
					  vld1q_dup_s64((const int64_t *)(const void *)(a[b0 + b].qs + 8 * m)));
			da[b] = qg_fp16_to_fp32(a[b0 + b].d);
		}
		int c0 = 0;
		for (; c0 + Q8_ROWS <= nc; c0 += Q8_ROWS) {
			const uint8_t *r0 = wb + (size_t)c0 * wstride;
			const uint8_t *const row[Q8_ROWS] = { r0, r0 + wstride, r0 + 2 * wstride, r0 + 3 * wstride,
							      r0 + 4 * wstride, r0 + 5 * wstride, r0 + 6 * wstride,
							      r0 + 7 * wstride };
			gemv8_q8_0(row, aq[0], da, n, b0 == 0, s + c0);
		}
		if (c0 < nc) {
			const uint8_t *row[Q8_ROWS];
			_Alignas(16) float part[Q8_ROWS];
			kq_arm_group_rows(wb, wstride, c0, nc, Q8_ROWS, row);
			for (int r = 0; r < nc - c0; r++)
				part[r] = s[c0 + r];
			gemv8_q8_0(row, aq[0], da, n, b0 == 0, part);
			for (int r = 0; r < nc - c0; r++)
				s[c0 + r] = part[r];
		}
	}
}

/* --- Q8_0_4X4 ------------------------------------------------------------ */

/*
 * Q8_0_4X4 weights need none of the above's gathering: a block_q8_0x4's
 * 16 bytes at qs[16c] are its four rows' codes 4c .. 4c + 3, lane r row
 * r's, so "sdot vX.4s, vW.16b, vA.4b[c % 4]" against the activation's
 * quad c gives the four rows' sums in the four lanes of vX, and its four
 * fp16 scales are one 8-byte load.  Per group of four rows and block:
 * three loads, a zeroing, 8 sdot, and the layout's float step lane by
 * lane (kernels.h): the scales widened, times da (one rounding), the sum
 * converted (exact: |isum| <= 2^19) and fused into the running sum by
 * one fmla, so every output is the portable kernel's bits.  Eight groups
 * (32 rows) go per pass, so that one load of the activation's codes
 * serves 64 sdot; fewer at the end, one group at a time.
 */

/* Groups of four rows per pass. */
#define Q44_GROUPS 8

_Static_assert(sizeof(struct qg_block_q8_0x4) == 136 && offsetof(struct qg_block_q8_0x4, qs) == 8,
	       "the asm walks Q8_0_4X4 blocks as 8 bytes of scales and 128 of codes");

/*
 * Group G (its pointer operand PG; sums in v20 + G int, v24 + G float)
 * over one block whose activation codes are in v16, v17 and scale in
 * lane DL of v18: the weights stream through v0-v7, the scales v19.
 */
#define GV_Q44_SDOT(x, w, a, l) "sdot v" x ".4s, v" w ".16b, v" a ".4b[" l "]\n\t"
#define GV_Q44_GROUP(pg, i, f, dl)                                                                        \
	"ldr d19, [%[" pg "]], #8\n\t"                                                                  \
	"ld1 {v0.16b-v3.16b}, [%[" pg "]], #64\n\t"                                                     \
	"ld1 {v4.16b-v7.16b}, [%[" pg "]], #64\n\t"                                                     \
	"movi v" i ".4s, #0\n\t"                                                                        \
	GV_Q44_SDOT(i, "0", "16", "0") GV_Q44_SDOT(i, "1", "16", "1")                                     \
	GV_Q44_SDOT(i, "2", "16", "2") GV_Q44_SDOT(i, "3", "16", "3")                                     \
	GV_Q44_SDOT(i, "4", "17", "0") GV_Q44_SDOT(i, "5", "17", "1")                                     \
	GV_Q44_SDOT(i, "6", "17", "2") GV_Q44_SDOT(i, "7", "17", "3")                                     \
	"fcvtl v19.4s, v19.4h\n\t"                                                                       \
	"fmul v19.4s, v19.4s, v18.s[" dl "]\n\t"                                                         \
	"scvtf v" i ".4s, v" i ".4s\n\t"                                                                 \
	"fmla v" f ".4s, v" i ".4s, v19.4s\n\t"
#define GV_Q44_BLOCK8(dl)                                                                                 \
	"ldp q16, q17, [%[a]], #32\n\t"                                                                  \
	GV_Q44_GROUP("p0", "20", "24", dl) GV_Q44_GROUP("p1", "21", "25", dl)                             \
	GV_Q44_GROUP("p2", "22", "26", dl) GV_Q44_GROUP("p3", "23", "27", dl)                             \
	GV_Q44_GROUP("p4", "8", "28", dl) GV_Q44_GROUP("p5", "9", "29", dl)                               \
	GV_Q44_GROUP("p6", "10", "30", dl) GV_Q44_GROUP("p7", "11", "31", dl)
#define GV_Q44_BLOCK1(dl) "ldp q16, q17, [%[a]], #32\n\t" GV_Q44_GROUP("p0", "20", "24", dl)
/* The blocks two a turn (one load brings both activation scales), then an odd last one. */
#define GV_Q44_LOOP(block)                                                                                \
	"cbz %[pairs], 2f\n\t"                                                                           \
	"1:\n\t"                                                                                          \
	"ldr d18, [%[da]], #8\n\t" block("0") block("1")                                                \
	"subs %[pairs], %[pairs], #1\n\t"                                                                \
	"b.ne 1b\n\t"                                                                                     \
	"2:\n\t"                                                                                          \
	"cbz %[odd], 3f\n\t"                                                                             \
	"ldr s18, [%[da]], #4\n\t" block("0")                                                           \
	"3:\n\t"

/*
 * The G (8 or 1) groups at P[g] (each at its chunk's first block)
 * against the prepared chunk of NB blocks (AQ, DA): S[4g + r] (zero if
 * FIRST) carried on over the chunk's blocks, in order.
 */
INLINE void gemv_q8_0_4x4_groups(const int G, const uint8_t *const p[Q44_GROUPS], const int8_t *aq,
				 const float *da, int nb, int first, float *s)
{
	int64_t pairs = nb / 2, odd = nb % 2;

	if (G == Q44_GROUPS) {
		const uint8_t *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
		const uint8_t *p4 = p[4], *p5 = p[5], *p6 = p[6], *p7 = p[7];
		__asm__ volatile("cbnz %w[first], 0f\n\t"
				 "ld1 {v24.4s-v27.4s}, [%[s0]]\n\t"
				 "ld1 {v28.4s-v31.4s}, [%[s1]]\n\t"
				 "b 4f\n\t"
				 "0:\n\t"
				 "movi v24.4s, #0\n\tmovi v25.4s, #0\n\tmovi v26.4s, #0\n\tmovi v27.4s, #0\n\t"
				 "movi v28.4s, #0\n\tmovi v29.4s, #0\n\tmovi v30.4s, #0\n\tmovi v31.4s, #0\n\t"
				 "4:\n\t"
				 GV_Q44_LOOP(GV_Q44_BLOCK8)
				 "st1 {v24.4s-v27.4s}, [%[s0]]\n\t"
				 "st1 {v28.4s-v31.4s}, [%[s1]]\n\t"
				 : [p0] "+r"(p0), [p1] "+r"(p1), [p2] "+r"(p2), [p3] "+r"(p3), [p4] "+r"(p4),
				   [p5] "+r"(p5), [p6] "+r"(p6), [p7] "+r"(p7), [a] "+r"(aq), [da] "+r"(da),
				   [pairs] "+r"(pairs)
				 : [s0] "r"(s), [s1] "r"(s + 16), [odd] "r"(odd), [first] "r"(first)
				 : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v16",
				   "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28",
				   "v29", "v30", "v31", "cc", "memory");
	} else {
		const uint8_t *p0 = p[0];
		__asm__ volatile("movi v24.4s, #0\n\t"
				 "cbnz %w[first], 4f\n\t"
				 "ldr q24, [%[s0]]\n\t"
				 "4:\n\t"
				 GV_Q44_LOOP(GV_Q44_BLOCK1)
				 "str q24, [%[s0]]\n\t"
				 : [p0] "+r"(p0), [a] "+r"(aq), [da] "+r"(da), [pairs] "+r"(pairs)
				 : [s0] "r"(s), [odd] "r"(odd), [first] "r"(first)
				 : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v16", "v17", "v18", "v19", "v20",
				   "v24", "cc", "memory");
	}
}

/*
 * By chunks of QB blocks, as the plain Q8_0 GEMV: the chunk's activation
 * codes and scales (as floats) copied once, aligned, and met by every
 * pass of eight groups, then by the groups left one at a time.
 */
void qg_kq_gemv_q8_0_4x4_dotprod(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
				 const void *restrict va)
{
	const struct qg_block_q8_0 *a = va;
	const int64_t nb = k / QG_QK;
	_Alignas(16) int8_t aq[QB][QG_QK];
	_Alignas(16) float da[QB];

	for (int c = 0; nb == 0 && c < nc; c++)
		s[c] = 0.0f;	/* K = 0: the empty sum */
	for (int64_t b0 = 0; b0 < nb; b0 += QB) {
		const int n = nb - b0 < QB ? (int)(nb - b0) : QB;
		const uint8_t *wb = (const uint8_t *)w + (size_t)b0 * sizeof(struct qg_block_q8_0x4);
		for (int b = 0; b < n; b++) {
			vst1q_s8(aq[b], vld1q_s8(a[b0 + b].qs));
			vst1q_s8(aq[b] + 16, vld1q_s8(a[b0 + b].qs + 16));
			da[b] = kq_arm_h2f(&a[b0 + b].d);
		}
		int g = 0;
		for (; g + Q44_GROUPS <= nc / 4; g += Q44_GROUPS) {
			const uint8_t *p[Q44_GROUPS];
			for (int i = 0; i < Q44_GROUPS; i++)
				p[i] = wb + (size_t)(g + i) * wstride;
			gemv_q8_0_4x4_groups(Q44_GROUPS, p, aq[0], da, n, b0 == 0, s + 4 * g);
		}
		for (; g < nc / 4; g++) {
			const uint8_t *p[Q44_GROUPS] = { wb + (size_t)g * wstride };
			gemv_q8_0_4x4_groups(1, p, aq[0], da, n, b0 == 0, s + 4 * g);
		}
	}
}
