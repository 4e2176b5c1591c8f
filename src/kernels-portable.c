/* kernels-portable.c - placeholder */
#include "config.h"
#include "kernels.h"
const struct qg_kernel qg_kernels_portable[QG_LAYOUT_COUNT];
