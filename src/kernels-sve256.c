/* kernels-sve256.c - placeholder until the sve256 kernels land: no layout served. */
#include "config.h"
#include "kernels.h"

const struct qg_kernel qg_kernels_sve256[QG_LAYOUT_COUNT];
