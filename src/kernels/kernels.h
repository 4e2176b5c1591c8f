/*
 * kernels.h - GEMV/GEMM kernels for the interleaved Q4_0 layouts, and the
 * run-time choice between kernel families.
 *
 * A kernel knows nothing of graphs, buffers or threads: it reads weights and
 * quantized activations from memory its caller owns and writes floats.
 *
 * Weight layout (ggml's): a matrix of NC rows (output features) and K columns
 * in layout Q4_0_RxB is NC/R row groups, each K/32 consecutive blocks of
 * block_q4_0x4 (R = 4) or block_q4_0x8 (R = 8).  A kernel is handed the first
 * row group it computes and how many rows (NC, a multiple of R) to compute.
 *
 * Arithmetic (the portable kernels, and every SIMD kernel whose results are
 * compared exactly): per block and weight row, an exact int32 dot product of
 * the 4-bit weights with the int8 activations, multiplied by the weight's
 * and the activation's fp16 scales and accumulated in float.
 */
#ifndef QG_KERNELS_H
#define QG_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"

/*
 * GEMV: one activation row.
 *   K    values per row (multiple of 32)
 *   S    NC outputs
 *   W    first weight row group (layout of the kernel)
 *   A    K/32 block_q8_0 of the activation row
 *   NC   weight rows to compute (multiple of the layout's row group)
 */
typedef void (*qg_gemv_fn)(int k, float *restrict s, const void *restrict w,
			   const void *restrict a, int nc);

/*
 * GEMM: NR activation rows (a multiple of 4).
 *   S    output; row r of the activations writes S[r*LDS + 0 .. NC-1]
 *   A    NR/4 groups of K/32 block_q8_0x4 each, interleaved as the kernel's
 *        act_ileave says
 */
typedef void (*qg_gemm_fn)(int k, float *restrict s, size_t lds, const void *restrict w,
			   const void *restrict a, int nr, int nc);

/*
 * What a GEMM reads of each block of a group of four activation rows
 * besides its codes (the x86 kernels: -8 * each row's sum and the four
 * scales as floats), made once per product by mul_mat's quantize phase
 * rather than by the GEMM once per weight tile.  Optional, in pairs:
 *   act_facts   NB blocks of one group at A into F, act_facts_size bytes
 *               a block
 *   gemm_facts  qg_gemm_fn's product with F holding those of A's NR/4
 *               groups, NB blocks each, in order: the same bits as gemm
 */
typedef void (*qg_act_facts_fn)(const struct qg_block_q8_0x4 *a, int64_t nb, int ileave, void *f);
typedef void (*qg_gemm_facts_fn)(int k, float *restrict s, size_t lds, const void *restrict w,
				 const void *restrict a, const void *restrict f, int nr, int nc);

/*
 * GEMV of NR activation rows (2 or 3, fewer than a GEMM group), each row
 * the bits qg_gemv_fn gives it, the weight tile unpacked once for all.
 *   S    output; row r writes S[r*LDS + 0 .. NC-1]
 *   A    NR rows of K/32 block_q8_0 each, one after another
 */
typedef void (*qg_gemv_rows_fn)(int k, float *restrict s, size_t lds, const void *restrict w,
				const void *restrict a, int nr, int nc);

/* Activation quantizers: one row to block_q8_0; four rows to block_q8_0x4. */
typedef void (*qg_quant_row_fn)(const float *x, struct qg_block_q8_0 *y, int64_t k);
typedef void (*qg_quant_x4_fn)(const float *x, size_t ldx, struct qg_block_q8_0x4 *y,
			       int64_t k, int ileave);

/* Kernel families, best last within an architecture. */
enum qg_kfamily {
	QG_KF_PORTABLE = 0,
	QG_KF_NEON,		/* aarch64 baseline: no dotprod */
	QG_KF_DOTPROD,		/* sdot */
	QG_KF_I8MM,		/* smmla */
	QG_KF_SVE256,		/* SVE at 256-bit vectors */
	QG_KF_AVX2,
	QG_KF_AVX512VNNI,
	QG_KF_COUNT
};

/* The weight layouts the kernels serve. */
enum qg_layout {
	QG_LAYOUT_4X4 = 0,
	QG_LAYOUT_4X8,
	QG_LAYOUT_8X8,
	QG_LAYOUT_COUNT
};

/* One layout's kernels as a family implements them. */
struct qg_kernel {
	const char *name;	/* "dotprod 4x4", shown in --info and benchmarks */
	enum qg_kfamily family;
	qg_gemv_fn gemv;
	qg_gemv_rows_fn gemv_rows;	/* optional: NULL runs GEMV row by row */
	qg_gemm_fn gemm;
	int act_ileave;		/* interleave of the GEMM activations: 4 or 8 */
	qg_quant_row_fn quant_row;
	qg_quant_x4_fn quant_x4;
	qg_act_facts_fn act_facts;	/* optional, with gemm_facts */
	qg_gemm_facts_fn gemm_facts;
	size_t act_facts_size;
};

/* CPU features the dispatcher saw. */
struct qg_cpu {
	unsigned neon : 1, dotprod : 1, i8mm : 1, sve : 1;
	unsigned avx2 : 1, f16c : 1, fma : 1, avx512 : 1, avx512vnni : 1;
	int sve_bytes;		/* svcntb(): SVE vector length in bytes, 0 without SVE */
};

/* Layout of a weight type, or -EINVAL if it is not an interleaved Q4_0 type. */
int qg_layout_of(enum qg_type type);
enum qg_type qg_layout_type(enum qg_layout layout);

const char *qg_kfamily_name(enum qg_kfamily f);
/* The family named NAME ("avx2", "portable", ...), or -EINVAL. */
int qg_kfamily_from_name(const char *name);

/* What this CPU has (probed once: cpuid/XCR0 or HWCAP/HWCAP2/svcntb). */
const struct qg_cpu *qg_cpu_features(void);

/*
 * The kernel that runs LAYOUT on this CPU.  The choice is made once, from the
 * CPU's features, unless forced: by qg_kernels_force() or by the environment
 * variable QGRAPH_KERNELS=FAMILY.  Never NULL: the portable kernel serves
 * where nothing better exists.
 */
const struct qg_kernel *qg_kernel_for(enum qg_layout layout);
/* Why qg_kernel_for(LAYOUT) chose what it chose, one line. */
const char *qg_kernel_reason(enum qg_layout layout);

/*
 * Force every layout FAMILY implements to FAMILY's kernel (QG_KF_COUNT:
 * back to automatic); a layout it has no kernel for keeps the automatic
 * choice, and its reason says so.  Returns 0, or -ENOTSUP if this CPU or
 * build cannot run FAMILY at all (nothing is changed then).
 */
int qg_kernels_force(enum qg_kfamily family);

/* The kernel FAMILY offers for LAYOUT in this build and on this CPU, or NULL. */
const struct qg_kernel *qg_kernel_get(enum qg_kfamily family, enum qg_layout layout);

/* The weight layout that runs fastest on this CPU (used when repacking). */
enum qg_type qg_best_weight_type(void);
/*
 * The layout to store Q8_0 weights in on this CPU: QG_TYPE_Q8_0_4X4 when
 * qg_kq_kernel_for() is a SIMD family with Q8_0_4X4 kernels (dotprod),
 * else QG_TYPE_Q8_0.
 */
enum qg_type qg_best_q8_0_type(void);
/* The same for the K-quant kernels KQ (qg_best_q8_0_type() is KQ = qg_kq_kernel_for()'s). */
struct qg_kq_kernel;
enum qg_type qg_kq_q8_0_type(const struct qg_kq_kernel *kq);

/* --- K-quant dot products ------------------------------------------------ */

/*
 * One Q4_K or Q6_K weight row of K values (a multiple of 256) against one
 * row of K/256 block_q8_K: kquant.h's reference arithmetic, so every
 * family's result equals qg_vec_dot_q4_K_q8_K / _q6_K_q8_K bit for bit.
 */
typedef float (*qg_kq_dot_fn)(int64_t k, const void *restrict w, const void *restrict a);

/*
 * Four activation rows against one weight row: OUT[r] is the one-row
 * kernel's result for row r (at A + r * NBA block_q8_K) bit for bit, the
 * weights decoded once for the four.
 */
typedef void (*qg_kq_dot4_fn)(int64_t k, const void *restrict w, const void *restrict a, int64_t nba,
			      float *restrict out);

/*
 * Many activation rows against many weight rows: NC Q4_K or Q6_K weight
 * rows (WSTRIDE bytes apart) against NR rows of K/256 block_q8_K (one
 * after another); S[r * LDS + c] gets activation row r against weight
 * row c, the one-row kernel's result bit for bit.
 */
typedef void (*qg_kq_gemm_fn)(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride,
			      int nc, const void *restrict a, int nr);

/*
 * One activation row against many weight rows (a decoding token's GEMV):
 * NC Q4_K or Q6_K weight rows (WSTRIDE bytes apart) against one row of
 * K/256 block_q8_K, or NC Q8_0 rows against K/32 block_q8_0; S[c] gets
 * weight row c's one-row kernel result bit for bit.
 */
typedef void (*qg_kq_gemv_fn)(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
			      const void *restrict a);

/*
 * Beside every Q8_0 activation block mul_mat keeps, for the Q8_0 GEMMs,
 * its scale as a float and -128 times the sum of its codes.
 */
struct qg_q8_0_aux {
	float d;
	int32_t nsum;
};

/*
 * The same for Q8_0 weights: NR rows of K/32 block_q8_0, AUX their
 * blocks' qg_q8_0_aux in the same order; S as above, each output
 * qg_vec_dot_q8_0_q8_0's bits.
 */
typedef void (*qg_q8_0_gemm_fn)(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride,
				int nc, const void *restrict a, const struct qg_q8_0_aux *restrict aux, int nr);

/*
 * Four activation rows' Q8_0 blocks as the Q8_0_4X4 GEMMs read them: the
 * rows' scales as floats (qg_fp16_to_fp32 of the block_q8_0 scales, so
 * exact), then their codes 4-byte interleaved as block_q8_0x4 keeps
 * them: row r's codes 4c .. 4c + 3 at qs[16c + 4r].  144 bytes, so every
 * record of an array starts 16-byte aligned if the first does.
 */
struct qg_q8_0x4_act {
	float d[4];
	int8_t qs[QG_QK * 4];
};

/*
 * NB blocks of four Q8_0 activation rows (row r's at A + r * NBA) into Y
 * as the Q8_0_4X4 GEMMs read them: codes and scales carried over, so a
 * row a GEMM meets this way is the row a GEMV meets.
 */
void qg_q8_0x4_act_pack(struct qg_q8_0x4_act *y, const struct qg_block_q8_0 *a, size_t nba, int64_t nb);

/*
 * Q8_0_4X4 weights (groups of four rows, each K/32 block_q8_0x4 with the
 * 4-byte interleave) against NR activation rows (a multiple of 4), as
 * NR/4 groups of K/32 qg_q8_0x4_act (group g's at A + g * K/32):
 *   S    output; activation row r against weight row c at S[r*LDS + c]
 *   W    the first group of four weight rows, WSTRIDE bytes to the next
 *   NC   weight rows, a multiple of 4
 * Each output the layout's float order bits (struct qg_kq_kernel).
 */
typedef void (*qg_q8_0_4x4_gemm_fn)(int64_t k, float *restrict s, size_t lds, const void *restrict w,
				    size_t wstride, int nc, const struct qg_q8_0x4_act *restrict a, int nr);

/*
 * The plain (not interleaved) block types that mul_mat meets one weight
 * row at a time: the K-quants against Q8_K, and Q8_0 against Q8_0 (K a
 * multiple of 32, NBA counted in block_q8_0; its one-row kernels equal
 * qg_vec_dot_q8_0_q8_0 bit for bit, for activations in -127..127 as
 * qg_quantize_row_q8_0 makes them).
 */
struct qg_kq_kernel {
	const char *name;	/* "avx2 k-quants", shown in --info */
	enum qg_kfamily family;
	qg_kq_dot_fn q4_K;	/* Q4_K x Q8_K */
	qg_kq_dot_fn q6_K;	/* Q6_K x Q8_K */
	qg_kq_dot4_fn q4_K_x4;	/* optional (NULL: four calls of q4_K) */
	qg_kq_dot4_fn q6_K_x4;	/* optional */
	qg_kq_dot_fn q8_0;	/* optional (NULL: qg_vec_dot_q8_0_q8_0) */
	qg_kq_dot4_fn q8_0_x4;	/* optional */
	qg_kq_gemv_fn q4_K_gemv;	/* optional (NULL: the one-row kernel per weight row) */
	qg_kq_gemv_fn q6_K_gemv;	/* optional */
	qg_kq_gemv_fn q8_0_gemv;	/* optional */
	qg_kq_gemm_fn q4_K_gemm;	/* optional (NULL: the four-row kernel) */
	qg_kq_gemm_fn q6_K_gemm;	/* optional */
	qg_q8_0_gemm_fn q8_0_gemm;	/* optional */
	/*
	 * Q8_0_4X4 weights, optional (NULL: qg_kq_portable's), both or
	 * neither: W points at the first group of four weight rows (K/32
	 * block_q8_0x4), WSTRIDE is the bytes from one group of four rows
	 * to the next, NC a multiple of 4; the GEMV's activation is one row
	 * of K/32 block_q8_0, the GEMM's qg_q8_0_4x4_gemm_fn's.  The layout
	 * has its own float order, not qg_vec_dot_q8_0_q8_0's: per output
	 * (weight row c, activation row r), from acc = 0, for each block b
	 * in order, acc = fmaf((float)isum, dw * da, acc), where isum is the
	 * block's exact int32 dot product and dw * da the product of the
	 * blocks' scales as floats, rounded once.  Every kernel gives these
	 * bits, so the GEMV and the GEMM agree bit for bit and a row's
	 * result does not depend on the rows batched with it.
	 */
	qg_kq_gemv_fn q8_0_4x4_gemv;
	qg_q8_0_4x4_gemm_fn q8_0_4x4_gemm;
	int gemm_rows;		/* the fewest activation rows the GEMMs are used for */
	int q8_0_gemm_rows;	/* the same for q8_0_gemm, if not gemm_rows (0) */
	/*
	 * Nonzero: the four-row kernels take each group of four activation
	 * rows and the GEMVs only the rest (x86: the GEMV shares one row's
	 * activations among weight rows, the four-row kernel the weights
	 * among four rows, which pays more); 0: the GEMVs take every row.
	 */
	int x4_before_gemv;
};

/* FAMILY's K-quant kernels if this build has them and this CPU runs them, else NULL. */
const struct qg_kq_kernel *qg_kq_kernel_get(enum qg_kfamily family);
/*
 * The K-quant kernels that run on this CPU: the best family that has them,
 * or the one forced (qg_kernels_force, QGRAPH_KERNELS) if it has them.
 * Never NULL.
 */
const struct qg_kq_kernel *qg_kq_kernel_for(void);
/* Why qg_kq_kernel_for() chose what it chose, one line. */
const char *qg_kq_kernel_reason(void);

/* --- per-family tables (each defined in its own file, NULL where absent) --- */
extern const struct qg_kq_kernel qg_kq_portable;
#if defined(__x86_64__)
extern const struct qg_kq_kernel qg_kq_avx2;
extern const struct qg_kq_kernel qg_kq_avx512vnni;
#endif
#if defined(__aarch64__)
extern const struct qg_kq_kernel qg_kq_neon;
extern const struct qg_kq_kernel qg_kq_dotprod;
extern const struct qg_kq_kernel qg_kq_i8mm;
#endif
extern const struct qg_kernel qg_kernels_portable[QG_LAYOUT_COUNT];
#if defined(__x86_64__)
extern const struct qg_kernel qg_kernels_avx2[QG_LAYOUT_COUNT];
extern const struct qg_kernel qg_kernels_avx512vnni[QG_LAYOUT_COUNT];
#endif
#if defined(__aarch64__)
extern const struct qg_kernel qg_kernels_neon[QG_LAYOUT_COUNT];
extern const struct qg_kernel qg_kernels_dotprod[QG_LAYOUT_COUNT];
extern const struct qg_kernel qg_kernels_i8mm[QG_LAYOUT_COUNT];
extern const struct qg_kernel qg_kernels_sve256[QG_LAYOUT_COUNT];
#endif

#endif /* QG_KERNELS_H */
