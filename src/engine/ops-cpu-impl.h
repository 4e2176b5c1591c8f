/*
 * ops-cpu-impl.h - what ops-cpu.c and ops-mulmat.c share, and nothing else
 * includes: the scratch alignment, and MUL_MAT's calls for the op
 * dispatch.
 */
#ifndef QG_OPS_CPU_IMPL_H
#define QG_OPS_CPU_IMPL_H

#include <stddef.h>

#include "tensor.h"

#define SCRATCH_ALIGN 64

static inline size_t align_up(size_t n)
{
	return (n + SCRATCH_ALIGN - 1) & ~(size_t)(SCRATCH_ALIGN - 1);
}

/* qg_op_check_data's look at MUL_MAT node T's operands, whose data is there: 0 or -EINVAL. */
int qg_op_mul_mat_check_data(const struct qg_tensor *t);
/* Bytes of scratch one batch (i2, i3) of MUL_MAT node T needs: the same for every batch. */
size_t qg_op_mul_mat_slot(const struct qg_tensor *t);
/* Phase PHASE (0: quantize the activations, 1: the product) of MUL_MAT node T, thread ITH of NTH.  0. */
int qg_op_mul_mat_compute(const struct qg_tensor *t, int phase, int ith, int nth, void *scratch);

#endif /* QG_OPS_CPU_IMPL_H */
