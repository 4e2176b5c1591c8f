/* kernels-avx512vnni.c - placeholder until the avx512vnni kernels land: no layout served. */
#include "config.h"
#include "kernels.h"

const struct qg_kernel qg_kernels_avx512vnni[QG_LAYOUT_COUNT];
