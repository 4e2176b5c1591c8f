/*
 * quant.h - tensor element types and the quantized formats.
 *
 * Every format is byte-compatible with ggml's: block_q4_0 (18 bytes per 32
 * values), block_q8_0 (34), block_q4_0x4 (72), block_q4_0x8 (144) and
 * block_q8_0x4 (136).  Scales are IEEE binary16, little-endian.  The
 * interleaved Q4_0 layouts store their nibbles XOR 0x88, so a byte read as
 * int8 and shifted gives the signed 4-bit value times 16.
 *
 * All functions return bytes written (or a size) on success and -errno on a
 * bad argument; none aborts.
 */
#ifndef QG_QUANT_H
#define QG_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum qg_type {
	QG_TYPE_F32 = 0,
	QG_TYPE_F16,
	QG_TYPE_Q8_0,
	QG_TYPE_Q4_0,
	QG_TYPE_Q4_0_4X4,	/* block_q4_0x4, 4-byte interleave */
	QG_TYPE_Q4_0_4X8,	/* block_q4_0x4, 8-byte interleave */
	QG_TYPE_Q4_0_8X8,	/* block_q4_0x8, 8-byte interleave */
	QG_TYPE_Q8_0_4X4,	/* block_q8_0x4, 4-byte interleave (weights on dotprod CPUs; activations) */
	QG_TYPE_Q8_0_4X8,	/* block_q8_0x4, 8-byte interleave (activations) */
	QG_TYPE_Q4_K,		/* block_q4_K: 256 values in 144 bytes (kquant.h) */
	QG_TYPE_Q6_K,		/* block_q6_K: 256 values in 210 bytes */
	QG_TYPE_Q8_K,		/* block_q8_K: 256 values in 292 bytes (activations) */
	QG_TYPE_COUNT
};

#define QG_QK 32		/* values per Q4_0 / Q8_0 block */

typedef uint16_t qg_fp16;

/* ggml's block layouts, for the kernels (sizes checked in quant.c). */
struct qg_block_q4_0 {
	qg_fp16 d;
	uint8_t qs[QG_QK / 2];
};
struct qg_block_q8_0 {
	qg_fp16 d;
	int8_t qs[QG_QK];
};
struct qg_block_q4_0x4 {
	qg_fp16 d[4];
	uint8_t qs[QG_QK * 2];
};
struct qg_block_q4_0x8 {
	qg_fp16 d[8];
	uint8_t qs[QG_QK * 4];
};
struct qg_block_q8_0x4 {
	qg_fp16 d[4];
	int8_t qs[QG_QK * 4];
};

/* The name ggml spells for TYPE ("q4_0_4x8"), or NULL if out of range. */
const char *qg_type_name(enum qg_type type);
/* The type named NAME (case-insensitive; "q4_0_4_4" style accepted), or -EINVAL. */
int qg_type_from_name(const char *name);
/* True for the types mul_mat accepts as weights. */
int qg_type_is_weight(enum qg_type type);
/* True for Q4_0_4X4, Q4_0_4X8, Q4_0_8X8 (and the Q8_0 interleaved layouts). */
int qg_type_is_interleaved(enum qg_type type);
/*
 * The plain type whose rows make up TYPE's row groups: Q4_0 for its
 * interleaved layouts, Q8_0 for its, TYPE itself for a plain type.
 */
enum qg_type qg_type_plain(enum qg_type type);
/* Rows that are interleaved together: 4 or 8, 1 for plain types. */
int qg_type_row_group(enum qg_type type);
/* Values per block along a row: 32 for Q4_0/Q8_0 types, 256 for K-quants, 1 for F32/F16. */
int qg_type_block_values(enum qg_type type);

/*
 * Bytes one row of COLS values takes (for interleaved types, a row's share
 * of its group, which equals Q4_0's or Q8_0's).  -EINVAL when COLS does not
 * suit the type (not a positive multiple of its block_values),
 * -EOVERFLOW when the size does not fit.
 */
ssize_t qg_row_size(enum qg_type type, int64_t cols);
/* Bytes of a ROWS x COLS matrix; -EINVAL also when ROWS is not a multiple of the row group. */
ssize_t qg_matrix_size(enum qg_type type, int64_t rows, int64_t cols);

/*
 * Quantize a row-major ROWS x COLS f32 matrix into TYPE: any weight type,
 * or a Q8_0 interleaved layout.  Without IMATRIX the bytes equal ggml's
 * reference quantization (quantize_row_q4_0_ref / q8_0_ref, then
 * make_block_q4_0x4 / _0x8 for the interleaved layouts).
 *
 * IMATRIX, if not NULL, holds COLS finite non-negative importance weights,
 * one per column.  Q4_0 and its interleaved layouts then choose, block by
 * block, the fp16 scale and codes that minimise sum w_j (x_j - d q_j)^2,
 * never worse than plain rounding (a block whose weights are all zero gets
 * plain rounding's bytes); an interleaved layout gets exactly the bytes of
 * Q4_0 followed by qg_repack().  F32, F16, Q8_0 and the Q8_0 layouts check
 * IMATRIX but do not use it (Q8_0 is ggml's quantize_q8_0, which ignores it;
 * so does Q8_K).  Q4_K and Q6_K give ggml's bytes either way: its reference
 * quantization (quantize_row_q4_K_ref, _q6_K_ref) without IMATRIX, and
 * quantize_q4_K / quantize_q6_K with it as quant_weights.
 *
 * F32 and F16 are conversions: NaN and infinities are kept, and F16 rounds
 * values beyond +-65504 to infinity.  The block types reject a NaN or an
 * infinity anywhere in SRC with -EDOM, and a block whose scale would not
 * fit in fp16 (Q4_0: largest magnitude >= 524160; Q8_0: >= 127 * 65520;
 * Q4_K and Q6_K: any value of magnitude >= 2^20, a bound below where their
 * scales could overflow) with -ERANGE; on either nothing is written.
 *
 * Returns bytes written, or -EINVAL (bad type, NULL pointer, shape that
 * does not suit TYPE, bad IMATRIX, SRC or IMATRIX overlapping DST),
 * -ENOBUFS (DST_SIZE too small), -EDOM, -ERANGE, -EOVERFLOW.
 */
ssize_t qg_quantize(enum qg_type type, const float *src, void *dst, size_t dst_size,
		    int64_t rows, int64_t cols, const float *imatrix);

/*
 * Turn ROWS x COLS values of TYPE (any type) back into row-major f32:
 * code times scale, as ggml's dequantize_row_* do.  Returns bytes written
 * (ROWS * COLS * 4) or -EINVAL, -ENOBUFS, -EOVERFLOW as qg_quantize().
 */
ssize_t qg_dequantize(enum qg_type type, const void *src, float *dst, size_t dst_size,
		      int64_t rows, int64_t cols);

/*
 * Row ROW of the ROWS x COLS matrix SRC of TYPE (any type; in an
 * interleaved layout, the row's share of its group) into COLS floats at
 * DST, as qg_dequantize() gives it.  Returns bytes written or -EINVAL
 * (ROW out of range, and as qg_dequantize()), -ENOBUFS, -EOVERFLOW.
 */
ssize_t qg_dequantize_row(enum qg_type type, const void *src, int64_t rows, int64_t cols, int64_t row, float *dst,
			  size_t dst_size);

/*
 * Repack between Q4_0 and an interleaved Q4_0 layout (either direction, or
 * between two interleaved layouts), or between Q8_0 and its interleaved
 * layouts, without re-quantizing: every scale and quant is carried over,
 * so repacking there and back gives the original bytes.  FROM == TO copies.
 * ROWS must suit both types.  Returns bytes written or -EINVAL (types of
 * different families, bad shape, NULL, overlap), -ENOBUFS, -EOVERFLOW.
 */
ssize_t qg_repack(enum qg_type to, void *dst, size_t dst_size,
		  enum qg_type from, const void *src, int64_t rows, int64_t cols);
/*
 * The same, byte by byte through an index table: the reference.  qg_repack
 * moves whole words between plain Q4_0 and its interleaved layouts (the
 * upload path) and must give these bytes (quant-test compares them).
 */
ssize_t qg_repack_ref(enum qg_type to, void *dst, size_t dst_size,
		      enum qg_type from, const void *src, int64_t rows, int64_t cols);

/* --- row primitives the kernels and the dispatcher use (no checks) --- */

/* ggml's quantize_row_q4_0_ref / q8_0_ref: K a multiple of 32. */
void qg_quantize_row_q4_0(const float *x, struct qg_block_q4_0 *y, int64_t k);
void qg_quantize_row_q8_0(const float *x, struct qg_block_q8_0 *y, int64_t k);
/*
 * Four rows of K values (row r at X + r*LDX) into K/32 block_q8_0x4 with
 * ILEAVE-byte interleave (4 or 8): ggml's quantize_q8_0_4x4 / _4x8.
 */
void qg_quantize_rows_q8_0x4(const float *x, size_t ldx, struct qg_block_q8_0x4 *y,
			     int64_t k, int ileave);

/* One Q4_0 block's dot product with one Q8_0 block, as ggml's vec_dot does. */
float qg_vec_dot_q4_0_q8_0(int64_t k, const struct qg_block_q4_0 *x, const struct qg_block_q8_0 *y);
float qg_vec_dot_q8_0_q8_0(int64_t k, const struct qg_block_q8_0 *x, const struct qg_block_q8_0 *y);

#endif /* QG_QUANT_H */
