/* kernels.c - placeholder */
#include "config.h"
#include "kernels.h"
