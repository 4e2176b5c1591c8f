/* kernels-neon.c - placeholder until the neon kernels land: no layout served. */
#include "config.h"
#include "kernels.h"

const struct qg_kernel qg_kernels_neon[QG_LAYOUT_COUNT];
