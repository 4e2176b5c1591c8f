/* mulmat.c - placeholder */
#include "config.h"
#include "mulmat.h"
