/*
 * ops-impl.h - what ops.c and ops-cpu.c share (not for other modules).
 */
#ifndef QG_OPS_IMPL_H
#define QG_OPS_IMPL_H

#include "mulmat.h"
#include "tensor.h"

/* The qg_mm of MUL_MAT node T for batch (I2, I3) of its result. */
void qg_ops_mm_for(const struct qg_tensor *t, int64_t i2, int64_t i3, struct qg_mm *mm);

#endif /* QG_OPS_IMPL_H */
