/*
 * qgraph.c - libqgraph: the public API over the engine.
 *
 * The formats' functions are the engine's (src/formats/quant.c) behind public
 * names; this file checks that the two enums agree, and converts a type
 * through src/wire's table as every other file does.
 */
#include "config.h"

#include <errno.h>

#include "qgraph.h"
#include "numbers.h"
#include "quant.h"
#include "wire.h"

/* qgraph.h's numbering is the one src/wire knows (numbers.h), value for value. */
#define SAME_PUBLIC(kind, KIND, name) \
	_Static_assert((int)QGRAPH_##KIND##_##name == (int)QG_PUBLIC_##KIND##_##name, \
		       "qgraph_" #kind " " #name " matches qg_public_" #kind)
SAME_PUBLIC(type, TYPE, F32);
SAME_PUBLIC(type, TYPE, F16);
SAME_PUBLIC(type, TYPE, Q8_0);
SAME_PUBLIC(type, TYPE, Q4_0);
SAME_PUBLIC(type, TYPE, Q4_0_4X4);
SAME_PUBLIC(type, TYPE, Q4_0_4X8);
SAME_PUBLIC(type, TYPE, Q4_0_8X8);
SAME_PUBLIC(type, TYPE, Q8_0_4X4);
SAME_PUBLIC(type, TYPE, Q8_0_4X8);
SAME_PUBLIC(type, TYPE, Q4_K);
SAME_PUBLIC(type, TYPE, Q6_K);
SAME_PUBLIC(type, TYPE, Q8_K);
SAME_PUBLIC(type, TYPE, COUNT);
SAME_PUBLIC(type, TYPE, I32);
SAME_PUBLIC(type, TYPE, I64);
SAME_PUBLIC(op, OP, MUL_MAT);
SAME_PUBLIC(op, OP, ADD);
SAME_PUBLIC(op, OP, MUL);
SAME_PUBLIC(op, OP, SCALE);
SAME_PUBLIC(op, OP, SILU);
SAME_PUBLIC(op, OP, GELU);
SAME_PUBLIC(op, OP, RMS_NORM);
SAME_PUBLIC(op, OP, SOFT_MAX);
SAME_PUBLIC(op, OP, CPY);
SAME_PUBLIC(op, OP, GET_ROWS);
SAME_PUBLIC(op, OP, RESHAPE);
SAME_PUBLIC(op, OP, VIEW);
SAME_PUBLIC(op, OP, TRANSPOSE);
SAME_PUBLIC(op, OP, PERMUTE);
SAME_PUBLIC(op, OP, ROPE);
SAME_PUBLIC(op, OP, GLU);
SAME_PUBLIC(op, OP, SET_ROWS);
SAME_PUBLIC(op, OP, FLASH_ATTN_EXT);
SAME_PUBLIC(op, OP, NORM);

#define SAME_TYPE(pub, eng) \
	_Static_assert((int)QGRAPH_TYPE_##pub == (int)QG_TYPE_##eng, "qgraph_type " #pub " matches qg_type")
SAME_TYPE(F32, F32);
SAME_TYPE(F16, F16);
SAME_TYPE(Q8_0, Q8_0);
SAME_TYPE(Q4_0, Q4_0);
SAME_TYPE(Q4_0_4X4, Q4_0_4X4);
SAME_TYPE(Q4_0_4X8, Q4_0_4X8);
SAME_TYPE(Q4_0_8X8, Q4_0_8X8);
SAME_TYPE(Q8_0_4X4, Q8_0_4X4);
SAME_TYPE(Q8_0_4X8, Q8_0_4X8);
SAME_TYPE(Q4_K, Q4_K);
SAME_TYPE(Q6_K, Q6_K);
SAME_TYPE(Q8_K, Q8_K);
SAME_TYPE(COUNT, COUNT);

/* The engine's type for TYPE (src/wire's table); one without an engine type becomes -EINVAL, out of range. */
static enum qg_type eng_type(enum qgraph_type type)
{
	return (enum qg_type)qg_wire_engine_type_of_public(type);
}

static int type_valid(enum qgraph_type type)
{
	return (unsigned)type < QGRAPH_TYPE_COUNT;
}

const char *qgraph_version(void)
{
	return PACKAGE_VERSION;
}

const char *qgraph_type_name(enum qgraph_type type)
{
	return qg_type_name(eng_type(type));
}

int qgraph_type_from_name(const char *name)
{
	return qg_type_from_name(name);
}

int qgraph_type_row_group(enum qgraph_type type)
{
	return type_valid(type) ? qg_type_row_group(eng_type(type)) : -EINVAL;
}

int qgraph_type_block_values(enum qgraph_type type)
{
	return type_valid(type) ? qg_type_block_values(eng_type(type)) : -EINVAL;
}

ssize_t qgraph_row_size(enum qgraph_type type, int64_t cols)
{
	return qg_row_size(eng_type(type), cols);
}

ssize_t qgraph_matrix_size(enum qgraph_type type, int64_t rows, int64_t cols)
{
	return qg_matrix_size(eng_type(type), rows, cols);
}

ssize_t qgraph_quantize(enum qgraph_type type, const float *src, void *dst, size_t dst_size,
			int64_t rows, int64_t cols, const float *imatrix)
{
	return qg_quantize(eng_type(type), src, dst, dst_size, rows, cols, imatrix);
}

ssize_t qgraph_dequantize(enum qgraph_type type, const void *src, float *dst, size_t dst_size,
			  int64_t rows, int64_t cols)
{
	return qg_dequantize(eng_type(type), src, dst, dst_size, rows, cols);
}

ssize_t qgraph_repack(enum qgraph_type to, void *dst, size_t dst_size,
		      enum qgraph_type from, const void *src, int64_t rows, int64_t cols)
{
	return qg_repack(eng_type(to), dst, dst_size, eng_type(from), src, rows, cols);
}
