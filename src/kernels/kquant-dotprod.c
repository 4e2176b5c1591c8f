/*
 * kquant-dotprod.c - Q4_K x Q8_K, Q6_K x Q8_K and Q8_0 x Q8_0 dot
 * products with the aarch64 dot-product instructions (sdot); the body is
 * kquant-arm.h's.  Two or more activation rows go to the GEMM
 * (kquant-gemm-dotprod.c), which there counts a fraction of the four-
 * and one-row kernels' instructions (bench-mulmat --kernel-only under
 * qemu); one row goes to the GEMV (kquant-gemv-dotprod.c), which keeps
 * four or eight weight rows in the lanes of its vectors, streams each
 * weight row once and writes no tile.  Q8_0 weights are stored as
 * Q8_0_4X4 for this family (qg_kq_q8_0_type), whose kernels are at the
 * end of the GEMV's and the GEMM's files.
 */
#include "config.h"

#include "kquant-arm.h"

KQ_ARM_ENTRIES(kq_arm_sdot16)
KQ_ARM_Q8_0_ENTRIES(kq_arm_sdot32)

const struct qg_kq_kernel qg_kq_dotprod = {
	.name = "dotprod k-quants", .family = QG_KF_DOTPROD,
	.q4_K = dot_q4_K, .q6_K = dot_q6_K,
	.q4_K_x4 = dot4_q4_K, .q6_K_x4 = dot4_q6_K,
	.q8_0 = dot_q8_0, .q8_0_x4 = dot4_q8_0,
	.q4_K_gemv = qg_kq_gemv_q4_K_dotprod, .q6_K_gemv = qg_kq_gemv_q6_K_dotprod,
	.q8_0_gemv = qg_kq_gemv_q8_0_dotprod,
	.q4_K_gemm = qg_kq_gemm_q4_K_dotprod, .q6_K_gemm = qg_kq_gemm_q6_K_dotprod,
	.q8_0_gemm = qg_kq_gemm_q8_0_dotprod,
	.q8_0_4x4_gemv = qg_kq_gemv_q8_0_4x4_dotprod, .q8_0_4x4_gemm = qg_kq_gemm_q8_0_4x4_dotprod,
	/* Q8_0's too: one row goes to the GEMV, 192 instructions per 1000 MACs to the GEMM's 289 */
	.gemm_rows = 2,
};
