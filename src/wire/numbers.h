/*
 * numbers.h - the public API's numbering of element types and ops, as the
 * wire layer knows it: the same values as enum qgraph_type and enum
 * qgraph_op in client/lib/qgraph.h, written here so that src/ includes
 * nothing above it.  client/lib/qgraph.c binds the two with static
 * asserts; wire.c's tables map these to the engine's and the wire's.
 */
#ifndef QG_WIRE_NUMBERS_H
#define QG_WIRE_NUMBERS_H

enum qg_public_type {
	QG_PUBLIC_TYPE_F32 = 0,
	QG_PUBLIC_TYPE_F16 = 1,
	QG_PUBLIC_TYPE_Q8_0 = 2,
	QG_PUBLIC_TYPE_Q4_0 = 3,
	QG_PUBLIC_TYPE_Q4_0_4X4 = 4,
	QG_PUBLIC_TYPE_Q4_0_4X8 = 5,
	QG_PUBLIC_TYPE_Q4_0_8X8 = 6,
	QG_PUBLIC_TYPE_Q8_0_4X4 = 7,
	QG_PUBLIC_TYPE_Q8_0_4X8 = 8,
	QG_PUBLIC_TYPE_Q4_K = 9,
	QG_PUBLIC_TYPE_Q6_K = 10,
	QG_PUBLIC_TYPE_Q8_K = 11,
	QG_PUBLIC_TYPE_COUNT,
	QG_PUBLIC_TYPE_I32 = 32,	/* int32 indices and positions, in graphs only */
	QG_PUBLIC_TYPE_I64 = 33,	/* int64 SET_ROWS indices, in graphs only */
};

enum qg_public_op {
	QG_PUBLIC_OP_MUL_MAT = 1,
	QG_PUBLIC_OP_ADD = 2,
	QG_PUBLIC_OP_MUL = 3,
	QG_PUBLIC_OP_SCALE = 4,
	QG_PUBLIC_OP_SILU = 5,
	QG_PUBLIC_OP_GELU = 6,
	QG_PUBLIC_OP_RMS_NORM = 7,
	QG_PUBLIC_OP_SOFT_MAX = 8,
	QG_PUBLIC_OP_CPY = 9,
	QG_PUBLIC_OP_GET_ROWS = 10,
	QG_PUBLIC_OP_RESHAPE = 11,
	QG_PUBLIC_OP_VIEW = 12,
	QG_PUBLIC_OP_TRANSPOSE = 13,
	QG_PUBLIC_OP_PERMUTE = 14,
	QG_PUBLIC_OP_ROPE = 15,
	QG_PUBLIC_OP_GLU = 16,
	QG_PUBLIC_OP_SET_ROWS = 17,
	QG_PUBLIC_OP_FLASH_ATTN_EXT = 18,
	QG_PUBLIC_OP_NORM = 19,
};

#endif /* QG_WIRE_NUMBERS_H */
