/*
 * kernels-x86.h - what the AVX2 and AVX-512 VNNI kernels share: the
 * geometry of the weight and activation layouts, the per-block activation
 * facts they precompute, and the arithmetic they promise.
 *
 * Plain C only: this header is included by files built with different -m
 * flags, so nothing here may depend on one of them.
 *
 * Arithmetic.  Weights are read as unsigned nibble codes u = w + 8 (0..15),
 * so one unsigned x signed byte product (vpdpbusd, or vpmaddubsw on AVX2)
 * multiplies them with the int8 activations; the block's exact int32 dot
 * product is then sum(u*a) - 8*sum(a), with -8*sum(a) precomputed per
 * activation row and block.  The int32 dot is exact, as in the portable
 * kernel.  It is converted to float (exactly: |dot| < 2^24), multiplied by
 * the product of the two fp16 scales (rounded once) with one fused
 * multiply-add into the float accumulator, block after block.
 *
 * Tolerance against the portable kernel: each block's term may round
 * differently (one rounding for dw*da and none for the fused add here, the
 * portable kernel's own product order there), by at most 2 ulp of the term,
 * and the sums then drift apart by at most one rounding per block.  So for
 * an output sum over NB blocks, |simd - portable| <= (NB + 2) * 2^-23 *
 * sum_b |dot_b * dw_b * da_b|; in practice far less.  Quantizers are exact:
 * they write the bytes qg_quantize_row_q8_0 / qg_quantize_rows_q8_0x4 write.
 */
#ifndef QG_KERNELS_X86_H
#define QG_KERNELS_X86_H

#include <stdint.h>

#include "quant.h"

/*
 * Blocks of K the kernels precompute activation facts for at a time (on the
 * stack).  A GEMM chunk's activations (up to 4 groups of 136 bytes per
 * block) and facts stay in L1 while every weight row group streams past.
 */
#define QG_X86_KC_GEMM 48
#define QG_X86_KC_GEMV 256

/* Facts of one block of four activation rows: -8*sum(a) and the scale. */
struct qg_x86_pre4 {
	int32_t ns[4];
	float d[4];
};

/* The same for one activation row (GEMV). */
struct qg_x86_pre1 {
	int32_t ns;
	float d;
};

/* The interleaved Q4_0 layouts the x86 GEMMs read. */
enum qg_x86_lay { QG_X86_LAY_4X4, QG_X86_LAY_4X8, QG_X86_LAY_8X8 };

/* Rows per row group and bytes per row group block of each layout. */
static inline __attribute__((always_inline)) int qg_x86_lay_rows(enum qg_x86_lay l)
{
	return l == QG_X86_LAY_8X8 ? 8 : 4;
}

static inline __attribute__((always_inline)) int qg_x86_lay_bytes(enum qg_x86_lay l)
{
	return l == QG_X86_LAY_8X8 ? (int)sizeof(struct qg_block_q4_0x8) : (int)sizeof(struct qg_block_q4_0x4);
}

/*
 * Byte offset in block_q8_0x4.qs of the four activations k = 4*Q .. 4*Q+3
 * of row J, for interleave IL (4 or 8): chunk c of IL values of row r sits
 * at qs[(c*4 + r)*IL].
 */
static inline int qg_x86_act_off(int il, int j, int q)
{
	if (il == 4)
		return (q * 4 + j) * 4;
	return ((q >> 1) * 4 + j) * 8 + (q & 1) * 4;
}

/*
 * 0.5 - 2^-25, the largest float below one half.  trunc(v + copysign(H, v))
 * is roundf(v) (half away from zero) for every float v: adding 0.5 itself
 * would round 0.49999997 up to 1, and H keeps every exact half at least
 * half an ulp above the integer below it.
 */
#define QG_X86_HALF_BELOW 0x1.fffffep-2f

/*
 * The AVX2 GEMVs, which the AVX-512 VNNI family uses too: a GEMV streams
 * weights, one activation row, and where zmm integer work is split into
 * two ymm halves (AMD Zen 4) a zmm GEMV only adds shuffles to that stream;
 * the ymm ones are faster there (bench-mulmat at n = 1 tells), and the
 * two agree bit for bit.
 */
void qg_avx2_gemv_4x4(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc);
void qg_avx2_gemv_4x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc);
void qg_avx2_gemv_8x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc);
/* The same for 2 or 3 rows at once (qg_gemv_rows_fn). */
void qg_avx2_gemv_rows_4x4(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			   int nr, int nc);
void qg_avx2_gemv_rows_4x8(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			   int nr, int nc);
void qg_avx2_gemv_rows_8x8(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			   int nr, int nc);

/*
 * A family's GEMMs of layout LAYOUT (activations of interleave IL):
 * gemm_NAME (qg_gemm_fn) and gemm_facts_NAME (qg_gemm_facts_fn), over the
 * family's own gemm_any(layout, il, k, s, lds, w, a, facts, nr, nc).
 */
#define QG_X86_GEMM_ENTRIES(name, layout, il)                                                           \
	static void gemm_##name(int k, float *restrict s, size_t lds, const void *restrict w,           \
			       const void *restrict a, int nr, int nc)                                  \
	{                                                                                               \
		gemm_any(layout, il, k, s, lds, w, a, NULL, nr, nc);                                    \
	}                                                                                               \
	static void gemm_facts_##name(int k, float *restrict s, size_t lds, const void *restrict w,     \
				     const void *restrict a, const void *restrict f, int nr, int nc)    \
	{                                                                                               \
		gemm_any(layout, il, k, s, lds, w, a, f, nr, nc);                                       \
	}

#endif /* QG_KERNELS_X86_H */
