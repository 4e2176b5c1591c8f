/*
 * kquant-arm.h - the aarch64 K-quant dot products, written once for a
 * 16-byte signed dot step that each family supplies: sdot where the CPU
 * has it (kquant-dotprod.c), widening multiplies and pairwise adds where
 * it has only the base NEON set (kquant-neon.c).
 *
 * Codes enter the step as signed bytes: Q4_K's 0..15 as they are, Q6_K's
 * code - 32 in -32..31.  Each sub-block's sum is exact in int32 and is
 * multiplied by its scale in integers, so the super-block's integer part
 * equals the reference's; the float part is qg_kq_accum, and the files
 * that include this are built without contraction, so the result is the
 * portable kernel's bit for bit.
 */
#ifndef QG_KQUANT_ARM_H
#define QG_KQUANT_ARM_H

#include <arm_neon.h>

#include "kernels.h"
#include "kquant.h"

/* ACC plus, in some order over its four lanes, the sum of the 16 products X[i] * Y[i]. */
typedef int32x4_t (*kq_arm_dot16)(int32x4_t acc, int8x16_t x, int8x16_t y);

static inline __attribute__((always_inline)) float kq_arm_q4_K(int64_t k, const void *restrict vw,
							      const void *restrict va, kq_arm_dot16 dot)
{
	const struct qg_block_q4_K *w = vw;
	const struct qg_block_q8_K *a = va;
	const uint8x16_t low4 = vdupq_n_u8(0x0f);
	float acc = 0.0f;

	for (int64_t b = 0; b < k / QG_QK_K; b++) {
		int32_t isum = 0, msum = 0;
		for (int c = 0; c < 4; c++) {
			uint8_t sc0, m0, sc1, m1;
			qg_q4_K_scale_min(2 * c, w[b].scales, &sc0, &m0);
			qg_q4_K_scale_min(2 * c + 1, w[b].scales, &sc1, &m1);
			const uint8x16_t q0 = vld1q_u8(w[b].qs + 32 * c), q1 = vld1q_u8(w[b].qs + 32 * c + 16);
			const int8_t *ap = a[b].qs + 64 * c;
			int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
			lo = dot(lo, vreinterpretq_s8_u8(vandq_u8(q0, low4)), vld1q_s8(ap));
			lo = dot(lo, vreinterpretq_s8_u8(vandq_u8(q1, low4)), vld1q_s8(ap + 16));
			hi = dot(hi, vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), vld1q_s8(ap + 32));
			hi = dot(hi, vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), vld1q_s8(ap + 48));
			isum += sc0 * vaddvq_s32(lo) + sc1 * vaddvq_s32(hi);
			msum += m0 * (a[b].bsums[4 * c] + a[b].bsums[4 * c + 1]) +
				m1 * (a[b].bsums[4 * c + 2] + a[b].bsums[4 * c + 3]);
		}
		acc = qg_kq_accum(acc, qg_fp16_to_fp32(w[b].d) * a[b].d, qg_fp16_to_fp32(w[b].dmin) * a[b].d,
				  isum, msum);
	}
	return acc;
}

static inline __attribute__((always_inline)) float kq_arm_q6_K(int64_t k, const void *restrict vw,
							      const void *restrict va, kq_arm_dot16 dot)
{
	const struct qg_block_q6_K *w = vw;
	const struct qg_block_q8_K *a = va;
	const uint8x16_t low4 = vdupq_n_u8(0x0f), bits45 = vdupq_n_u8(0x30);
	const int8x16_t off = vdupq_n_s8(32);
	float acc = 0.0f;

	for (int64_t b = 0; b < k / QG_QK_K; b++) {
		const int8_t *sc = w[b].scales;
		int32_t isum = 0;
		for (int h = 0; h < 2; h++) {
			for (int half = 0; half < 2; half++) {
				/* values l = 16 * half .. 16 * half + 15 of each quarter q */
				const int o = 16 * half;
				const uint8x16_t ql0 = vld1q_u8(w[b].ql + 64 * h + o);
				const uint8x16_t ql1 = vld1q_u8(w[b].ql + 64 * h + 32 + o);
				const uint8x16_t qh = vld1q_u8(w[b].qh + 32 * h + o);
				uint8x16_t u[4];
				u[0] = vorrq_u8(vandq_u8(ql0, low4), vandq_u8(vshlq_n_u8(qh, 4), bits45));
				u[1] = vorrq_u8(vandq_u8(ql1, low4), vandq_u8(vshlq_n_u8(qh, 2), bits45));
				u[2] = vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, bits45));
				u[3] = vorrq_u8(vshrq_n_u8(ql1, 4), vandq_u8(vshrq_n_u8(qh, 2), bits45));
				for (int q = 0; q < 4; q++) {
					const int8x16_t codes = vsubq_s8(vreinterpretq_s8_u8(u[q]), off);
					const int8x16_t av = vld1q_s8(a[b].qs + 128 * h + 32 * q + o);
					const int32x4_t s = dot(vdupq_n_s32(0), codes, av);
					isum += sc[8 * h + 2 * q + half] * vaddvq_s32(s);
				}
			}
		}
		acc = qg_kq_accum(acc, qg_fp16_to_fp32(w[b].d) * a[b].d, 0.0f, isum, 0);
	}
	return acc;
}

#endif /* QG_KQUANT_ARM_H */
