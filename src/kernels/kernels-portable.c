/*
 * kernels-portable.c - GEMV and GEMM for the interleaved Q4_0 layouts and
 * for Q8_0_4X4 weights in portable C: the reference every SIMD kernel is
 * checked against.
 *
 * The arithmetic is ggml's generic code, operation for operation, so the
 * results are the ones ggml's scalar path gives:
 *
 *   for each weight block (one per 32 values of K) and each of its
 *   32/(2B) chunks of B interleaved bytes (B = 4 for 4x4, 8 for 4x8/8x8),
 *   and each output row j of the group:
 *	sumi = sum over i < B of (lo16(q) * a[c*B + i] + hi16(q) * a[c*B + i + 16]) >> 4
 *	sumf[j] += ((float)sumi * fp16(w.d[j])) * fp16(a.d)
 *
 * lo16 and hi16 are 16 times the nibbles as signed 4-bit values (the
 * weights are stored XOR 0x88, so a nibble n with bias 8 reads back as
 * n - 8): ggml's (int8)(q << 4) and (int8)(q & 0xF0).  Both products are
 * multiples of 16, so the shift is an exact division.  The float part is
 * rounded as written: no contraction into fused multiply-adds (see the
 * pragma below), so x86-64 and aarch64 builds give the same bits.  The
 * loops keep ggml's order too, which is also what GCC vectorizes best
 * (at -O3, set below for this file: the 8x8 kernels then cost what ggml's
 * scalar 8x8 path costs, about 1250 instructions per 1000 MACs on aarch64).
 *
 * Weight row group g of a matrix with K/32 blocks per row starts at block
 * g*K/32; a block_q4_0x4 (R = 4) or block_q4_0x8 (R = 8) holds R scales
 * and then the chunks: chunk c of row j at qs[(c*R + j)*B .. +B-1].
 * Activations: block_q8_0 for GEMV; for GEMM block_q8_0x4, whose chunk c of
 * row r (ILEAVE bytes, ILEAVE = B here) sits at qs[(c*4 + r)*ILEAVE], the
 * upper 16 values of each row 64 bytes further on.
 */
#include "config.h"

/*
 * Keep a*b + c as two roundings: GCC contracts across statements by
 * default in GNU C mode (and would emit fmadd on aarch64 but not on a
 * baseline x86-64), which would make the reference depend on the target.
 * O3 lets GCC vectorize the integer loops; it never reorders float sums.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("O3,fp-contract=off")
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fp16.h"
#include "kernels.h"
#include "kquant.h"

/*
 * An fp16 scale as a float.  aarch64 converts in one instruction (exact,
 * as the portable conversion is); elsewhere the portable conversion runs.
 */
static inline float scale_f32(uint16_t h)
{
#if defined(__aarch64__)
	__fp16 v;

	memcpy(&v, &h, sizeof v);
	return (float)v;
#else
	return qg_fp16_to_fp32(h);
#endif
}

/* Scale J of an interleaved block that starts at BLK (R scales first). */
static inline float blk_scale(const uint8_t *blk, int j)
{
	uint16_t h;

	memcpy(&h, blk + 2 * j, sizeof h);
	return scale_f32(h);
}

/*
 * Sixteen times the signed value of the low / high nibble of a 0x88-flipped
 * byte: ggml's (int8_t)(q << 4) and (int8_t)(q & 0xF0).  The conversions
 * wrap modulo 256 on every two's-complement compiler (GCC and Clang
 * document it), and so does >> of a negative int (arithmetic).
 */
static inline int lo16(uint8_t q)
{
	return (int8_t)(uint8_t)(q << 4);
}

static inline int hi16(uint8_t q)
{
	return (int8_t)(q & 0xf0);
}

/*
 * One row group of R rows against one activation row, B bytes per chunk.
 * W: the group's first block; A: K/32 block_q8_0; S: R outputs.
 */
static inline void gemv_group(int nb, float *restrict s, const uint8_t *restrict w,
			      const struct qg_block_q8_0 *restrict a, const int R, const int B)
{
	const size_t blk_bytes = (size_t)R * (2 + QG_QK / 2);
	float sumf[8] = { 0 };

	for (int l = 0; l < nb; l++, w += blk_bytes) {
		const uint8_t *qs = w + 2 * R;
		const float da = scale_f32(a[l].d);

		for (int c = 0; c < QG_QK / (2 * B); c++) {
			const int8_t *a_lo = a[l].qs + c * B;
			const int8_t *a_hi = a_lo + QG_QK / 2;
			for (int j = 0; j < R; j++) {
				const uint8_t *q = qs + (c * R + j) * B;
				int sumi = 0;
				for (int i = 0; i < B; i++)
					sumi += (lo16(q[i]) * a_lo[i] + hi16(q[i]) * a_hi[i]) >> 4;
				sumf[j] += (float)sumi * blk_scale(w, j) * da;
			}
		}
	}
	for (int j = 0; j < R; j++)
		s[j] = sumf[j];
}

/*
 * One row group of R rows against four interleaved activation rows
 * (ILEAVE = B).  Row r's outputs go to S[r*LDS + 0 .. R-1].
 */
static inline void gemm_group(int nb, float *restrict s, size_t lds, const uint8_t *restrict w,
			      const struct qg_block_q8_0x4 *restrict a, const int R, const int B)
{
	const size_t blk_bytes = (size_t)R * (2 + QG_QK / 2);
	float sumf[4][8] = { { 0 } };

	for (int l = 0; l < nb; l++, w += blk_bytes) {
		const uint8_t *qs = w + 2 * R;

		for (int c = 0; c < QG_QK / (2 * B); c++) {
			for (int r = 0; r < 4; r++) {
				const int8_t *a_lo = a[l].qs + (c * 4 + r) * B;
				const int8_t *a_hi = a_lo + QG_QK * 2;
				const float da = scale_f32(a[l].d[r]);
				for (int j = 0; j < R; j++) {
					const uint8_t *q = qs + (c * R + j) * B;
					int sumi = 0;
					for (int i = 0; i < B; i++)
						sumi += (lo16(q[i]) * a_lo[i] + hi16(q[i]) * a_hi[i]) >> 4;
					sumf[r][j] += (float)sumi * blk_scale(w, j) * da;
				}
			}
		}
	}
	for (int r = 0; r < 4; r++)
		for (int j = 0; j < R; j++)
			s[r * lds + j] = sumf[r][j];
}

static inline void gemv_layout(int k, float *restrict s, const void *restrict w,
			       const void *restrict a, int nc, const int R, const int B)
{
	const int nb = k / QG_QK;
	const size_t group_bytes = (size_t)nb * R * (2 + QG_QK / 2);
	const uint8_t *wg = w;

	for (int g = 0; g < nc / R; g++, wg += group_bytes)
		gemv_group(nb, s + (size_t)g * R, wg, a, R, B);
}

static inline void gemm_layout(int k, float *restrict s, size_t lds, const void *restrict w,
			       const void *restrict a, int nr, int nc, const int R, const int B)
{
	const int nb = k / QG_QK;
	const size_t group_bytes = (size_t)nb * R * (2 + QG_QK / 2);
	const struct qg_block_q8_0x4 *ag = a;

	for (int y = 0; y < nr / 4; y++, ag += nb) {
		const uint8_t *wg = w;
		for (int g = 0; g < nc / R; g++, wg += group_bytes)
			gemm_group(nb, s + (size_t)y * 4 * lds + (size_t)g * R, lds, wg, ag, R, B);
	}
}

static void gemv_4x4(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv_layout(k, s, w, a, nc, 4, 4);
}

static void gemv_4x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv_layout(k, s, w, a, nc, 4, 8);
}

static void gemv_8x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv_layout(k, s, w, a, nc, 8, 8);
}

static void gemm_4x4(int k, float *restrict s, size_t lds, const void *restrict w,
		     const void *restrict a, int nr, int nc)
{
	gemm_layout(k, s, lds, w, a, nr, nc, 4, 4);
}

static void gemm_4x8(int k, float *restrict s, size_t lds, const void *restrict w,
		     const void *restrict a, int nr, int nc)
{
	gemm_layout(k, s, lds, w, a, nr, nc, 4, 8);
}

static void gemm_8x8(int k, float *restrict s, size_t lds, const void *restrict w,
		     const void *restrict a, int nr, int nc)
{
	gemm_layout(k, s, lds, w, a, nr, nc, 8, 8);
}

/*
 * Q8_0_4X4 weights (block_q8_0x4: four rows' scales, then their codes
 * four at a time, row j's codes 4c .. 4c + 3 at qs[16c + 4j]) in the
 * layout's float order (kernels.h, struct qg_kq_kernel): per block the
 * exact int32 sum, then acc = fmaf((float)isum, dw * da, acc), the fused
 * step written out, since this file is built without contraction.
 */

/* Row J of weight block W against 32 activation codes, codes 4c .. 4c + 3 at A + c * ASTEP: exact. */
static inline int32_t q8_0x4_isum(const struct qg_block_q8_0x4 *w, int j, const int8_t *a, int astep)
{
	int32_t sum = 0;

	for (int c = 0; c < QG_QK / 4; c++)
		for (int i = 0; i < 4; i++)
			sum += w->qs[16 * c + 4 * j + i] * a[c * astep + i];
	return sum;
}

static void kq_gemv_q8_0_4x4(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
			     const void *restrict va)
{
	const struct qg_block_q8_0 *a = va;

	for (int c0 = 0; c0 < nc; c0 += 4) {
		const struct qg_block_q8_0x4 *wg = (const void *)((const uint8_t *)w + (size_t)(c0 / 4) * wstride);
		for (int j = 0; j < 4; j++) {
			float acc = 0.0f;
			for (int64_t b = 0; b < k / QG_QK; b++)
				acc = fmaf((float)q8_0x4_isum(&wg[b], j, a[b].qs, 4),
					   scale_f32(wg[b].d[j]) * scale_f32(a[b].d), acc);
			s[c0 + j] = acc;
		}
	}
}

static void kq_gemm_q8_0_4x4(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride,
			     int nc, const struct qg_q8_0x4_act *restrict a, int nr)
{
	const int64_t nb = k / QG_QK;

	for (int g = 0; g < nr / 4; g++) {
		const struct qg_q8_0x4_act *ag = a + (size_t)g * (size_t)nb;
		for (int c0 = 0; c0 < nc; c0 += 4) {
			const struct qg_block_q8_0x4 *wg = (const void *)((const uint8_t *)w + (size_t)(c0 / 4) * wstride);
			for (int r = 0; r < 4; r++) {
				for (int j = 0; j < 4; j++) {
					float acc = 0.0f;
					for (int64_t b = 0; b < nb; b++)
						acc = fmaf((float)q8_0x4_isum(&wg[b], j, ag[b].qs + 4 * r, 16),
							   scale_f32(wg[b].d[j]) * ag[b].d[r], acc);
					s[(size_t)(4 * g + r) * lds + (size_t)(c0 + j)] = acc;
				}
			}
		}
	}
}

void qg_q8_0x4_act_pack(struct qg_q8_0x4_act *y, const struct qg_block_q8_0 *a, size_t nba, int64_t nb)
{
	for (int64_t b = 0; b < nb; b++) {
		for (int r = 0; r < 4; r++) {
			const struct qg_block_q8_0 *blk = &a[(size_t)r * nba + (size_t)b];
			y[b].d[r] = qg_fp16_to_fp32(blk->d);
			for (int c = 0; c < QG_QK / 4; c++)
				memcpy(&y[b].qs[16 * c + 4 * r], &blk->qs[4 * c], 4);
		}
	}
}

static float kq_dot_q4_K(int64_t k, const void *restrict w, const void *restrict a)
{
	return qg_vec_dot_q4_K_q8_K(k, w, a);
}

static float kq_dot_q6_K(int64_t k, const void *restrict w, const void *restrict a)
{
	return qg_vec_dot_q6_K_q8_K(k, w, a);
}

const struct qg_kq_kernel qg_kq_portable = {
	.name = "portable k-quants", .family = QG_KF_PORTABLE,
	.q4_K = kq_dot_q4_K, .q6_K = kq_dot_q6_K,
	.q8_0_4x4_gemv = kq_gemv_q8_0_4x4, .q8_0_4x4_gemm = kq_gemm_q8_0_4x4,
};

const struct qg_kernel qg_kernels_portable[QG_LAYOUT_COUNT] = {
	[QG_LAYOUT_4X4] = {
		.name = "portable 4x4", .family = QG_KF_PORTABLE,
		.gemv = gemv_4x4, .gemm = gemm_4x4, .act_ileave = 4,
		.quant_row = qg_quantize_row_q8_0, .quant_x4 = qg_quantize_rows_q8_0x4,
	},
	[QG_LAYOUT_4X8] = {
		.name = "portable 4x8", .family = QG_KF_PORTABLE,
		.gemv = gemv_4x8, .gemm = gemm_4x8, .act_ileave = 8,
		.quant_row = qg_quantize_row_q8_0, .quant_x4 = qg_quantize_rows_q8_0x4,
	},
	[QG_LAYOUT_8X8] = {
		.name = "portable 8x8", .family = QG_KF_PORTABLE,
		.gemv = gemv_8x8, .gemm = gemm_8x8, .act_ileave = 8,
		.quant_row = qg_quantize_row_q8_0, .quant_x4 = qg_quantize_rows_q8_0x4,
	},
};
