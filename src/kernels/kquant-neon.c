/*
 * kquant-neon.c - Q4_K x Q8_K and Q6_K x Q8_K dot products with the base
 * aarch64 NEON set (Cortex-A72, Graviton1): a 16-byte dot step is two
 * widening multiplies (smull, smull2) and two pairwise accumulates
 * (sadalp).  A product of a code (at most 63 in magnitude) and an
 * activation (at most 128) fits int16.  The body is kquant-arm.h's; a
 * Q8_0 block's products go by pairs in int16 (kq_arm_mull32).  One
 * activation row goes to the GEMV (kquant-gemv-neon.c), which does the
 * rest of the work four weight rows at a time.
 */
#include "config.h"

#include "kquant-arm.h"

static inline int32x4_t dot16(int32x4_t acc, int8x16_t x, int8x16_t y)
{
	acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
	return vpadalq_s16(acc, vmull_high_s8(x, y));
}

KQ_ARM_ENTRIES(dot16)
KQ_ARM_Q8_0_ENTRIES(kq_arm_mull32)

const struct qg_kq_kernel qg_kq_neon = {
	.name = "neon k-quants", .family = QG_KF_NEON,
	.q4_K = dot_q4_K, .q6_K = dot_q6_K,
	.q4_K_x4 = dot4_q4_K, .q6_K_x4 = dot4_q6_K,
	.q8_0 = dot_q8_0, .q8_0_x4 = dot4_q8_0,
	.q4_K_gemv = qg_kq_gemv_q4_K_neon, .q6_K_gemv = qg_kq_gemv_q6_K_neon,
	.q8_0_gemv = qg_kq_gemv_q8_0_neon,
};
