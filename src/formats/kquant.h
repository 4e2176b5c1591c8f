/*
 * kquant.h - ggml's K-quant super-blocks: Q4_K and Q6_K weights, and the
 * Q8_K activations they are multiplied with.
 *
 * A super-block holds 256 values of one row, byte for byte as ggml lays it
 * out (scales little-endian):
 *
 *   block_q4_K (144 bytes): fp16 d, fp16 dmin, 12 bytes holding eight 6-bit
 *     scales and eight 6-bit mins (one pair per 32 values), then 128 bytes
 *     of 4-bit codes.  Value = d * scale * code - dmin * min.
 *   block_q6_K (210 bytes): 128 bytes of low nibbles, 64 bytes of high
 *     2-bit pairs, sixteen int8 scales (one per 16 values), fp16 d.
 *     Value = d * scale * (code - 32), code in 0..63.
 *   block_q8_K (292 bytes): float d, 256 int8 codes, sixteen int16 sums of
 *     16 codes each (the Q4_K mins meet them).
 *
 * The row functions take K, a multiple of 256, and check nothing: qg_quantize
 * and qg_dequantize (quant.h) are the checked entry points.
 */
#ifndef QG_KQUANT_H
#define QG_KQUANT_H

#include <stdint.h>

#include "fp16.h"
#include "quant.h"

#define QG_QK_K 256		/* values per super-block */

struct qg_block_q4_K {
	qg_fp16 d;
	qg_fp16 dmin;
	uint8_t scales[12];
	uint8_t qs[QG_QK_K / 2];
};

struct qg_block_q6_K {
	uint8_t ql[QG_QK_K / 2];
	uint8_t qh[QG_QK_K / 4];
	int8_t scales[QG_QK_K / 16];
	qg_fp16 d;
};

struct qg_block_q8_K {
	float d;
	int8_t qs[QG_QK_K];
	int16_t bsums[QG_QK_K / 16];
};

/*
 * Sub-block J's (0..7) 6-bit scale and min from a Q4_K scales array: the
 * first four pairs sit in the low six bits of bytes 0..3 and 4..7, the last
 * four in the nibbles of bytes 8..11 with their top two bits in the spare
 * top bits of bytes 0..7.
 */
static inline void qg_q4_K_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = s[j] & 0x3f;
		*m = s[j + 4] & 0x3f;
	} else {
		*sc = (uint8_t)((s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4);
		*m = (uint8_t)((s[j + 4] >> 4) | (s[j] >> 6) << 4);
	}
}

/*
 * ggml's quantize_row_q4_K_ref, quantize_row_q6_K_ref and
 * quantize_row_q8_K_ref, value for value: the same searches, the same float
 * operations in the same order (this file's library is built without
 * contracting them into fused multiply-adds, as ggml's reference is on
 * x86-64), so the bytes are ggml's.
 */
void qg_quantize_row_q4_K(const float *x, struct qg_block_q4_K *y, int64_t k);
void qg_quantize_row_q6_K(const float *x, struct qg_block_q6_K *y, int64_t k);
void qg_quantize_row_q8_K(const float *x, struct qg_block_q8_K *y, int64_t k);
/*
 * One row of K values with an importance matrix QW (K values, one per
 * column; NULL: the functions above): ggml's quantize_q4_K / quantize_q6_K
 * with quant_weights, value for value.
 */
void qg_quantize_row_q4_K_imatrix(const float *x, struct qg_block_q4_K *y, int64_t k, const float *qw);
void qg_quantize_row_q6_K_imatrix(const float *x, struct qg_block_q6_K *y, int64_t k, const float *qw);

/* Code times scale (minus min), as ggml's dequantize_row_* compute it. */
void qg_dequantize_row_q4_K(const struct qg_block_q4_K *x, float *y, int64_t k);
void qg_dequantize_row_q6_K(const struct qg_block_q6_K *x, float *y, int64_t k);
void qg_dequantize_row_q8_K(const struct qg_block_q8_K *x, float *y, int64_t k);

/*
 * The dot product of one Q4_K or Q6_K row with one Q8_K row of K values:
 * the reference every kernel equals bit for bit.  Per super-block the
 * integer part is exact (int32: sum over sub-blocks of scale * sum(code *
 * activation), and for Q4_K sum(min * bsum)); the float part is, in this
 * order, dw = fp16(d) * a.d, then acc += dw * isum, and for Q4_K
 * dm = fp16(dmin) * a.d, acc -= dm * msum, with acc starting at 0 and
 * nothing fused.  Q6_K's codes enter as code - 32.
 */
float qg_vec_dot_q4_K_q8_K(int64_t k, const struct qg_block_q4_K *x, const struct qg_block_q8_K *y);
float qg_vec_dot_q6_K_q8_K(int64_t k, const struct qg_block_q6_K *x, const struct qg_block_q8_K *y);

/*
 * The float part of one super-block, shared by every kernel so that all
 * round alike: DW = fp16(d) * a.d, DM = fp16(dmin) * a.d (0 for Q6_K).
 * Every file that calls it is built with -ffp-contract=off.
 */
static inline float qg_kq_accum(float acc, float dw, float dm, int32_t isum, int32_t msum)
{
	acc += dw * (float)isum;
	acc -= dm * (float)msum;
	return acc;
}

#endif /* QG_KQUANT_H */
