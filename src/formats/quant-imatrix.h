/*
 * quant-imatrix.h - Q4_0 quantization weighted by an importance matrix
 * (quant-imatrix.c), for qg_quantize (quant.c) alone.
 */
#ifndef QG_QUANT_IMATRIX_H
#define QG_QUANT_IMATRIX_H

#include <stdint.h>

#include "fp16.h"
#include "quant.h"

/*
 * Quantize the QG_QK values X of one block to Q4_0 with the importance
 * weights W, starting from PLAIN, plain rounding's block of X
 * (qg_quantize_row_q4_0), which the result is never worse than: its scale
 * into *D, its codes (two a byte, low nibble for column j, high for
 * j + 16) into QS.  With all weights zero the block is PLAIN.
 */
void qg_q4_0_block_weighted(const float *x, const float *w, const struct qg_block_q4_0 *plain, qg_fp16 *d,
			    uint8_t qs[QG_QK / 2]);

#endif /* QG_QUANT_IMATRIX_H */
