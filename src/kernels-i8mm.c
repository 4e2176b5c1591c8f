/* kernels-i8mm.c - placeholder until the i8mm kernels land: no layout served. */
#include "config.h"
#include "kernels.h"

const struct qg_kernel qg_kernels_i8mm[QG_LAYOUT_COUNT];
