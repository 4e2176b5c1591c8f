/* kernels-avx2.c - placeholder until the avx2 kernels land: no layout served. */
#include "config.h"
#include "kernels.h"

const struct qg_kernel qg_kernels_avx2[QG_LAYOUT_COUNT];
