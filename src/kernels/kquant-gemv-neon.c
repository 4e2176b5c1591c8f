/*
 * kquant-gemv-neon.c - one activation row against many Q4_K, Q6_K or
 * Q8_0 weight rows with the base aarch64 NEON set (Cortex-A72, Graviton1),
 * the weights in ggml's plain blocks.
 *
 * Without sdot there is no by-element byte product to keep a weight row
 * per lane while multiplying, so each row's products are formed as in
 * the one-row kernels, but cheaper, and everything after them is done for
 * four rows at once:
 *
 * - Products go into int16 lanes (smull, smlal2) while they fit: a Q4_K
 *   code (0..15) times an activation (|a| <= 128) is at most 1920, four
 *   of them 7680; a Q6_K code taken as 0..63 (the bias comes off later)
 *   at most 8064, two 16128; a Q8_0 weight times an activation in
 *   -127..127 at most 16256, two 32512.  The K-quants' int16 sums are
 *   then multiplied by their sub-block's scale as they are widened
 *   (smlal by lane, against the row's scales as int16), one step where the
 *   one-row kernels take three (widen, add, multiply).
 * - Four rows' int32 sums are joined by three addp, lane r row r's, and
 *   the mins (Q4_K), the bias (Q6_K), the scales and the float steps are
 *   vector steps over the rows, as in kquant-gemv-dotprod.c.
 *
 * Exactness: every integer sum is the reference's exact int32 (Q6_K's
 * sum_j sc_j * (c - 32) . a taken as sum_j sc_j * c . a - 32 * sum_j sc_j
 * * bsum_j), and the float part takes the reference's steps lane by lane,
 * each rounded alone (built without contraction), so every output is the
 * one-row kernel's bit for bit.  Rows past NC repeat the last row,
 * computed and not stored.
 */
#include "config.h"

#include <arm_neon.h>
#include <stddef.h>

#include "kernels.h"
#include "kquant-arm.h"
#include "kquant.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

/* Four rows' partial sums X[r] joined: lane r is the sum of X[r]'s lanes. */
INLINE int32x4_t join4(const int32x4_t x[4])
{
	return vpaddq_s32(vpaddq_s32(x[0], x[1]), vpaddq_s32(x[2], x[3]));
}

/* Q4_K's msum = sum_j min_j * (bsum_2j + bsum_2j+1) of four rows, the mins as the head keeps them. */
INLINE int32x4_t q4_K_msum(const struct kq_arm_q4_K_head *hd, const int16_t *bsums)
{
	const int16x8_t pairs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
	const int32x4_t p0 = vmovl_s16(vget_low_s16(pairs)), p1 = vmovl_high_s16(pairs);
	int32x4_t msum = vmulq_laneq_s32(kq_arm_byte_lanes(hd->mn[0], 0), p0, 0);

	msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd->mn[0], 1), p0, 1);
	msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd->mn[0], 2), p0, 2);
	msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd->mn[0], 3), p0, 3);
	msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd->mn[1], 0), p1, 0);
	msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd->mn[1], 1), p1, 1);
	msum = vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd->mn[1], 2), p1, 2);
	return vmlaq_laneq_s32(msum, kq_arm_byte_lanes(hd->mn[1], 3), p1, 3);
}

/*
 * Q4_K chunk C (qs bytes 32c .. 32c + 31 of each row: sub-block 2c in the
 * low nibbles, 2c + 1 in the high) of row R: its two sums in int16, each
 * widened times its scale (lanes 2c, 2c + 1 of the row's SCR) into IV[R].
 */
#define Q4_CHUNK(c, r)                                                                                    \
	do {                                                                                              \
		const uint8_t *q = row[r] + qs + 32 * (c);                                                \
		const uint8x16_t q0 = vld1q_u8(q), q1 = vld1q_u8(q + 16);                                 \
		const int8x16_t l0 = vreinterpretq_s8_u8(vandq_u8(q0, low4));                             \
		const int8x16_t l1 = vreinterpretq_s8_u8(vandq_u8(q1, low4));                             \
		const int8x16_t h0 = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4));                              \
		const int8x16_t h1 = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));                              \
		int16x8_t pl = vmlal_high_s8(vmull_s8(vget_low_s8(l0), vget_low_s8(al0)), l0, al0);       \
		int16x8_t ph = vmlal_high_s8(vmull_s8(vget_low_s8(h0), vget_low_s8(ah0)), h0, ah0);       \
		pl = vmlal_high_s8(vmlal_s8(pl, vget_low_s8(l1), vget_low_s8(al1)), l1, al1);             \
		ph = vmlal_high_s8(vmlal_s8(ph, vget_low_s8(h1), vget_low_s8(ah1)), h1, ah1);             \
		iv[r] = vmlal_laneq_s16(iv[r], vget_low_s16(pl), scr[r], 2 * (c));                        \
		iv[r] = vmlal_high_laneq_s16(iv[r], pl, scr[r], 2 * (c));                                 \
		iv[r] = vmlal_laneq_s16(iv[r], vget_low_s16(ph), scr[r], 2 * (c) + 1);                    \
		iv[r] = vmlal_high_laneq_s16(iv[r], ph, scr[r], 2 * (c) + 1);                             \
	} while (0)
#define Q4_CHUNK4(c)                                                                                      \
	do {                                                                                              \
		const int8x16_t al0 = vld1q_s8(a[b].qs + 64 * (c)), al1 = vld1q_s8(a[b].qs + 64 * (c) + 16); \
		const int8x16_t ah0 = vld1q_s8(a[b].qs + 64 * (c) + 32);                                  \
		const int8x16_t ah1 = vld1q_s8(a[b].qs + 64 * (c) + 48);                                  \
		Q4_CHUNK(c, 0);                                                                           \
		Q4_CHUNK(c, 1);                                                                           \
		Q4_CHUNK(c, 2);                                                                           \
		Q4_CHUNK(c, 3);                                                                           \
	} while (0)

/* Four Q4_K rows against the activation row A of NSB super-blocks: lane r is row r's result. */
static float32x4_t gemv4_q4_K(const uint8_t *const row[4], const struct qg_block_q8_K *a, int64_t nsb)
{
	const uint8x16_t low4 = vdupq_n_u8(0x0f);
	float32x4_t acc = vdupq_n_f32(0.0f);

	for (int64_t b = 0; b < nsb; b++) {
		const size_t off = (size_t)b * sizeof(struct qg_block_q4_K);
		const size_t qs = off + offsetof(struct qg_block_q4_K, qs);
		struct kq_arm_q4_K_head hd;
		kq_arm_q4_K_head(row, off, &hd);
		/* row r's eight scales as int16: words r of the scale bytes 0-3 and 4-7, side by side */
		const uint8x16_t z0 = vreinterpretq_u8_u32(vzip1q_u32(vreinterpretq_u32_u8(hd.sb[0]),
								       vreinterpretq_u32_u8(hd.sb[1])));
		const uint8x16_t z1 = vreinterpretq_u8_u32(vzip2q_u32(vreinterpretq_u32_u8(hd.sb[0]),
								       vreinterpretq_u32_u8(hd.sb[1])));
		const int16x8_t scr[4] = { vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(z0))),
					   vreinterpretq_s16_u16(vmovl_high_u8(z0)),
					   vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(z1))),
					   vreinterpretq_s16_u16(vmovl_high_u8(z1)) };
		int32x4_t iv[4] = { vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0) };
		Q4_CHUNK4(0);
		Q4_CHUNK4(1);
		Q4_CHUNK4(2);
		Q4_CHUNK4(3);
		const int32x4_t isum = join4(iv), msum = q4_K_msum(&hd, a[b].bsums);
		/* qg_kq_accum lane by lane */
		const float32x4_t dw = vmulq_n_f32(hd.d, a[b].d), dm = vmulq_n_f32(hd.dmin, a[b].d);
		acc = vaddq_f32(acc, vmulq_f32(dw, vcvtq_f32_s32(isum)));
		acc = vsubq_f32(acc, vmulq_f32(dm, vcvtq_f32_s32(msum)));
	}
	return acc;
}

/*
 * Q6_K group (h, s) of row R: values l = 16s .. 16s + 15 of each quarter
 * q of half h (sub-block 8h + 2q + s: lane 2q + s of the row's SCR[r][h]),
 * their codes 0..63 joined from ql and qh as in kquant-gemv-dotprod.c.
 */
#define Q6_QUARTER(r, h, s, q, c)                                                                         \
	do {                                                                                              \
		const int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(c), vget_low_s8(av[q])), c, av[q]); \
		iv[r] = vmlal_laneq_s16(iv[r], vget_low_s16(p), scr[r][h], 2 * (q) + (s));                \
		iv[r] = vmlal_high_laneq_s16(iv[r], p, scr[r][h], 2 * (q) + (s));                         \
	} while (0)
#define Q6_GROUP(r, h, s)                                                                                 \
	do {                                                                                              \
		const uint8x16_t l0 = vld1q_u8(row[r] + ql + 64 * (h) + 16 * (s));                        \
		const uint8x16_t l1 = vld1q_u8(row[r] + ql + 64 * (h) + 32 + 16 * (s));                    \
		const uint8x16_t hb = vld1q_u8(row[r] + qh + 32 * (h) + 16 * (s));                         \
		const uint8x16_t hm = vandq_u8(hb, m33), h2 = vandq_u8(vshrq_n_u8(hb, 2), m33);           \
		Q6_QUARTER(r, h, s, 0, vreinterpretq_s8_u8(vsliq_n_u8(l0, hm, 4)));                       \
		Q6_QUARTER(r, h, s, 1, vreinterpretq_s8_u8(vsliq_n_u8(l1, h2, 4)));                       \
		Q6_QUARTER(r, h, s, 2, vreinterpretq_s8_u8(vsriq_n_u8(hm, l0, 4)));                       \
		Q6_QUARTER(r, h, s, 3, vreinterpretq_s8_u8(vsriq_n_u8(h2, l1, 4)));                       \
	} while (0)
#define Q6_GROUP4(h, s)                                                                                   \
	do {                                                                                              \
		int8x16_t av[4];                                                                          \
		UNROLL                                                                                    \
		for (int q = 0; q < 4; q++)                                                               \
			av[q] = vld1q_s8(a[b].qs + 128 * (h) + 32 * q + 16 * (s));                         \
		Q6_GROUP(0, h, s);                                                                        \
		Q6_GROUP(1, h, s);                                                                        \
		Q6_GROUP(2, h, s);                                                                        \
		Q6_GROUP(3, h, s);                                                                        \
	} while (0)

/* Four Q6_K rows, as gemv4_q4_K; the bias comes off per super-block (exact in int32). */
static float32x4_t gemv4_q6_K(const uint8_t *const row[4], const struct qg_block_q8_K *a, int64_t nsb)
{
	const uint8x16_t m33 = vdupq_n_u8(0x33);
	float32x4_t acc = vdupq_n_f32(0.0f);

	for (int64_t b = 0; b < nsb; b++) {
		const size_t off = (size_t)b * sizeof(struct qg_block_q6_K);
		const size_t ql = off + offsetof(struct qg_block_q6_K, ql);
		const size_t qh = off + offsetof(struct qg_block_q6_K, qh);
		int32x4_t sc[16];
		float32x4_t d;
		kq_arm_q6_K_head(row, off, sc, &d);
		int16x8_t scr[4][2];
		UNROLL
		for (int r = 0; r < 4; r++) {
			const size_t so = off + offsetof(struct qg_block_q6_K, scales);
			const int8x16_t x = vld1q_s8((const int8_t *)(row[r] + so));
			scr[r][0] = vmovl_s8(vget_low_s8(x));
			scr[r][1] = vmovl_high_s8(x);
		}
		int32x4_t iv[4] = { vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0) };
		Q6_GROUP4(0, 0);
		Q6_GROUP4(0, 1);
		Q6_GROUP4(1, 0);
		Q6_GROUP4(1, 1);
		const int16x8_t b0 = vld1q_s16(a[b].bsums), b1 = vld1q_s16(a[b].bsums + 8);
		const int32x4_t bs[4] = { vmovl_s16(vget_low_s16(b0)), vmovl_high_s16(b0), vmovl_s16(vget_low_s16(b1)),
					  vmovl_high_s16(b1) };
		int32x4_t bias = vmulq_laneq_s32(sc[0], bs[0], 0);
		bias = vmlaq_laneq_s32(bias, sc[1], bs[0], 1);
		bias = vmlaq_laneq_s32(bias, sc[2], bs[0], 2);
		bias = vmlaq_laneq_s32(bias, sc[3], bs[0], 3);
		bias = vmlaq_laneq_s32(bias, sc[4], bs[1], 0);
		bias = vmlaq_laneq_s32(bias, sc[5], bs[1], 1);
		bias = vmlaq_laneq_s32(bias, sc[6], bs[1], 2);
		bias = vmlaq_laneq_s32(bias, sc[7], bs[1], 3);
		bias = vmlaq_laneq_s32(bias, sc[8], bs[2], 0);
		bias = vmlaq_laneq_s32(bias, sc[9], bs[2], 1);
		bias = vmlaq_laneq_s32(bias, sc[10], bs[2], 2);
		bias = vmlaq_laneq_s32(bias, sc[11], bs[2], 3);
		bias = vmlaq_laneq_s32(bias, sc[12], bs[3], 0);
		bias = vmlaq_laneq_s32(bias, sc[13], bs[3], 1);
		bias = vmlaq_laneq_s32(bias, sc[14], bs[3], 2);
		bias = vmlaq_laneq_s32(bias, sc[15], bs[3], 3);
		const int32x4_t isum = vsubq_s32(join4(iv), vshlq_n_s32(bias, 5));
		/* qg_kq_accum with no min term: acc - 0 * 0 is acc */
		acc = vaddq_f32(acc, vmulq_f32(vmulq_n_f32(d, a[b].d), vcvtq_f32_s32(isum)));
	}
	return acc;
}

KQ_ARM_GEMV_ENTRIES(neon)

/*
 * Four Q8_0 rows: per block each row's 32 products (kq_arm_mull32), the
 * four rows joined, and sum += sumi * (dw * da) lane by lane, the scales
 * converted by the hardware (exactly, as qg_fp16_to_fp32).
 */
static float32x4_t gemv4_q8_0(const uint8_t *const row[4], const struct qg_block_q8_0 *a, int64_t nb)
{
	float32x4_t acc = vdupq_n_f32(0.0f);

	for (int64_t b = 0; b < nb; b++) {
		const size_t off = (size_t)b * sizeof(struct qg_block_q8_0);
		const int8x16_t a0 = vld1q_s8(a[b].qs), a1 = vld1q_s8(a[b].qs + 16);
		int32x4_t x[4];
		UNROLL
		for (int r = 0; r < 4; r++) {
			const int8_t *q = (const int8_t *)(row[r] + off + offsetof(struct qg_block_q8_0, qs));
			x[r] = kq_arm_mull32(vld1q_s8(q), vld1q_s8(q + 16), a0, a1);
		}
		uint16x4_t h = vld1_dup_u16((const uint16_t *)(const void *)(row[0] + off));
		h = vld1_lane_u16((const uint16_t *)(const void *)(row[1] + off), h, 1);
		h = vld1_lane_u16((const uint16_t *)(const void *)(row[2] + off), h, 2);
		h = vld1_lane_u16((const uint16_t *)(const void *)(row[3] + off), h, 3);
		const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(h));
		const float32x4_t da = vcvt_f32_f16(vreinterpret_f16_u16(vld1_dup_u16(&a[b].d)));
		acc = vaddq_f32(acc, vmulq_f32(vcvtq_f32_s32(join4(x)), vmulq_f32(dw, da)));
	}
	return acc;
}

void qg_kq_gemv_q8_0_neon(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
			  const void *restrict a)
{
	for (int c0 = 0; c0 < nc; c0 += 4) {
		const uint8_t *row[4];
		kq_arm_group_rows(w, wstride, c0, nc, 4, row);
		kq_arm_store_lanes(s + c0, gemv4_q8_0(row, a, k / QG_QK), nc - c0);
	}
}
