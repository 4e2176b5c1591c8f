/*
 * mulmat.h - Y = X * W^T for a quantized (or float) weight matrix W.
 *
 * W has M rows (output features) of K values; X has N rows of K floats;
 * Y gets N rows of M floats.  X is quantized to Q8_0 once (interleaved in
 * groups of four rows where the layout's GEMM wants it; Q8_K for Q4_K and
 * Q6_K weights), then GEMM runs on each group of four rows and GEMV on the
 * rest (one dot product per output for the plain block types).
 *
 * The work is split in two phases so that a caller with threads can run
 * both on every thread with a barrier between them; nothing here creates a
 * thread or allocates memory:
 *
 *	qg_mul_mat_quantize(mm, scratch, ith, nth);	   every thread
 *	barrier();
 *	qg_mul_mat_compute(mm, scratch, ith, nth);	   every thread
 *
 * Thread ITH of NTH quantizes its share of X's rows, and computes its share
 * of W's row groups (an even split with 64-bit arithmetic: any core count
 * works, and shares differ by at most one row group).
 */
#ifndef QG_MULMAT_H
#define QG_MULMAT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "quant.h"

struct qg_mm {
	enum qg_type wtype;	/* F32, F16, Q8_0, Q8_0_4X4, Q4_0, an interleaved Q4_0 layout, Q4_K or Q6_K */
	const void *w;		/* M x K in WTYPE, rows contiguous */
	int64_t m, k;
	const float *x;		/* N x K */
	size_t ldx;		/* floats between rows of X (>= K) */
	int64_t n;
	float *y;		/* N x M */
	size_t ldy;		/* floats between rows of Y (>= M) */
	/* The kernel to use for an interleaved WTYPE; NULL: qg_kernel_for(). */
	const struct qg_kernel *kernel;
	/* The kernels to use for Q4_K, Q6_K, Q8_0 or Q8_0_4X4 (NULL for any other WTYPE); NULL: qg_kq_kernel_for(). */
	const struct qg_kq_kernel *kq_kernel;
};

/*
 * 0 if MM describes a product this code can compute, else -EINVAL (bad
 * shape, type, stride or pointer) or -EOVERFLOW.
 */
int qg_mul_mat_check(const struct qg_mm *mm);

/* Bytes of scratch the two phases need (aligned to 64 by the caller). */
size_t qg_mul_mat_scratch_size(const struct qg_mm *mm);

/* Phase 1: quantize thread ITH's share of X into SCRATCH. */
void qg_mul_mat_quantize(const struct qg_mm *mm, void *scratch, int ith, int nth);

/* Phase 2: compute thread ITH's share of Y from SCRATCH. */
void qg_mul_mat_compute(const struct qg_mm *mm, const void *scratch, int ith, int nth);

/*
 * The rows of Y (the weights' rows, [*ROW0, *ROW1)) that thread ITH of NTH
 * computes in qg_mul_mat_compute: every column of those rows is its own.
 * An empty range for a thread with no share or a bad ITH/NTH.
 */
void qg_mul_mat_rows(const struct qg_mm *mm, int ith, int nth, int64_t *row0, int64_t *row1);

/* Both phases on the calling thread.  Returns 0 or -errno from qg_mul_mat_check(). */
int qg_mul_mat(const struct qg_mm *mm, void *scratch);

/*
 * The form phase 1 leaves X in for MM, as a number: two products of one K
 * and N with the same nonzero form read the same scratch from the same X,
 * so the second may skip phase 1 and read the first one's.  0 when MM
 * reads X unquantized (F32, F16) or is not a product this code computes.
 */
uintptr_t qg_mul_mat_act_form(const struct qg_mm *mm);

/* The kernel that runs MM (for reports), or NULL when WTYPE has no GEMV/GEMM kernel. */
const struct qg_kernel *qg_mul_mat_kernel(const struct qg_mm *mm);

#endif /* QG_MULMAT_H */
