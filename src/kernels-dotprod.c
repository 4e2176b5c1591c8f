/* kernels-dotprod.c - placeholder until the dotprod kernels land: no layout served. */
#include "config.h"
#include "kernels.h"

const struct qg_kernel qg_kernels_dotprod[QG_LAYOUT_COUNT];
