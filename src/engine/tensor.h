/*
 * tensor.h - tensors, views and the context that owns their metadata.
 *
 * A tensor has up to four dimensions.  NE[0] is the innermost (a row), and
 * NB[i] is the byte stride of dimension i; for a quantized type NB[0] is the
 * bytes of one block and NB[1] the bytes of a row.  A tensor is either a leaf
 * (op NONE: weights, inputs, constants) or the result of an op on its
 * sources.  A view (reshape, transpose, permute, view) shares the bytes of
 * its VIEW_SRC (always the root, never another view) at VIEW_OFFS.
 *
 * A context holds a fixed arena of tensor structs, sized when it is made.
 * Nothing here allocates tensor data: DATA is set by the caller (weights
 * held elsewhere) or by the graph allocator.  Builders never abort: on a bad
 * argument or a full arena they return NULL and the context remembers the
 * first error (qg_ctx_error), and a NULL source makes a NULL result, so a
 * whole graph can be built and checked once at the end.
 */
#ifndef QG_TENSOR_H
#define QG_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant.h"

/* Indices (GET_ROWS, SET_ROWS) and positions (ROPE): one integer per element (not quant.h formats). */
#define QG_TYPE_I32 ((enum qg_type)QG_TYPE_COUNT)
#define QG_TYPE_I64 ((enum qg_type)(QG_TYPE_COUNT + 1))

#define QG_MAX_DIMS 4
#define QG_MAX_SRC 6		/* as ggml's GGML_MAX_SRC: a node of a ggml graph fits */
#define QG_MAX_OP_PARAMS 16	/* int32 words, floats by their bits: ggml's op_params */
#define QG_MAX_NAME 32

enum qg_op {
	QG_OP_NONE = 0,
	QG_OP_MUL_MAT,
	QG_OP_ADD,
	QG_OP_MUL,
	QG_OP_SCALE,
	QG_OP_SILU,
	QG_OP_GELU,
	QG_OP_RMS_NORM,
	QG_OP_SOFT_MAX,
	QG_OP_CPY,
	QG_OP_GET_ROWS,
	/* views: no computation, the result shares its source's bytes */
	QG_OP_RESHAPE,
	QG_OP_VIEW,
	QG_OP_PERMUTE,
	QG_OP_TRANSPOSE,
	/* ggml's ops of the same names, with ggml's op_params (ops.h) */
	QG_OP_ROPE,
	QG_OP_GLU,
	QG_OP_SET_ROWS,
	QG_OP_FLASH_ATTN_EXT,
	QG_OP_NORM,
	QG_OP_COUNT
};

enum qg_tensor_flag {
	QG_TENSOR_INPUT = 1 << 0,	/* written by the caller before a run */
	QG_TENSOR_OUTPUT = 1 << 1,	/* read after a run: never reused */
	QG_TENSOR_WEIGHTS = 1 << 2,	/* long-lived parameters: read-only to graphs */
	/*
	 * Made by an op builder (ops.h), which checked it with qg_op_check:
	 * a backend does not check it again.  Whoever changes a built node's
	 * type, shape, strides, op or sources clears it.
	 */
	QG_TENSOR_CHECKED = 1 << 3,
};

struct qg_buffer;

struct qg_tensor {
	enum qg_type type;
	int64_t ne[QG_MAX_DIMS];
	size_t nb[QG_MAX_DIMS];
	enum qg_op op;
	int32_t op_params[QG_MAX_OP_PARAMS];
	int flags;
	struct qg_tensor *src[QG_MAX_SRC];
	struct qg_tensor *view_src;	/* root tensor whose bytes this one shares */
	size_t view_offs;
	void *data;
	struct qg_buffer *buffer;
	char name[QG_MAX_NAME];
};

struct qg_ctx;

/* A context with room for MAX_TENSORS tensor structs, or NULL (no memory, MAX_TENSORS < 1). */
struct qg_ctx *qg_ctx_new(size_t max_tensors);
/* Free CTX and every tensor struct in it (not their data).  NULL is fine. */
void qg_ctx_free(struct qg_ctx *ctx);
/* The first error a builder met (-errno), or 0. */
int qg_ctx_error(const struct qg_ctx *ctx);
/* A line describing that error ("" when there is none). */
const char *qg_ctx_error_text(const struct qg_ctx *ctx);
/* Record ERR (-errno) with a printf-style reason, unless an error is already kept.  Returns NULL. */
void *qg_ctx_fail(struct qg_ctx *ctx, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Bytes CTX holds: itself and room for its capacity of tensor structs (0 for NULL). */
size_t qg_ctx_bytes(const struct qg_ctx *ctx);
/* Tensor structs in use, and the arena's capacity. */
size_t qg_ctx_used(const struct qg_ctx *ctx);
size_t qg_ctx_capacity(const struct qg_ctx *ctx);

/* Bytes per element of a plain type (F32 4, F16 2, I32 4, I64 8), 0 for block types. */
size_t qg_type_elem_size(enum qg_type type);
/* Bytes of one row of COLS values of TYPE (I32 and I64 included), or -errno as qg_row_size(). */
int64_t qg_type_row_bytes(enum qg_type type, int64_t cols);
/* TYPE's name, I32 and I64 included ("?" for none). */
const char *qg_type_name_any(enum qg_type type);

/*
 * A new contiguous tensor of TYPE with N_DIMS (1..4) dimensions NE (the rest
 * are 1), op NONE, no data.  NULL on a bad shape (a dimension < 1, a row that
 * does not suit a block type, a size that overflows) or a full arena.
 */
struct qg_tensor *qg_tensor_new(struct qg_ctx *ctx, enum qg_type type, int n_dims, const int64_t *ne);
struct qg_tensor *qg_tensor_new_1d(struct qg_ctx *ctx, enum qg_type type, int64_t ne0);
struct qg_tensor *qg_tensor_new_2d(struct qg_ctx *ctx, enum qg_type type, int64_t ne0, int64_t ne1);
struct qg_tensor *qg_tensor_new_3d(struct qg_ctx *ctx, enum qg_type type, int64_t ne0, int64_t ne1,
				   int64_t ne2);
/* A new tensor with A's type and shape (contiguous, op NONE). */
struct qg_tensor *qg_tensor_dup(struct qg_ctx *ctx, const struct qg_tensor *a);

/* Elements, rows (ne1*ne2*ne3) and bytes spanned (highest byte touched + 1; SIZE_MAX past what a size_t holds). */
int64_t qg_tensor_nelements(const struct qg_tensor *t);
int64_t qg_tensor_nrows(const struct qg_tensor *t);
size_t qg_tensor_nbytes(const struct qg_tensor *t);
/* True if T's rows are packed and its dimensions follow each other in order. */
bool qg_tensor_is_contiguous(const struct qg_tensor *t);
/* True if A and B have the same type, shape and strides. */
bool qg_tensor_same_layout(const struct qg_tensor *a, const struct qg_tensor *b);
/* True if A and B have the same shape. */
bool qg_tensor_same_shape(const struct qg_tensor *a, const struct qg_tensor *b);
/*
 * True if T's bytes are weights: T is flagged QG_TENSOR_WEIGHTS, or T is a
 * view (or a CPY's result, a view of its destination) of a tensor that is.
 * Weights may be shared with other sessions: no op may write into them.
 */
bool qg_tensor_is_weights(const struct qg_tensor *t);
/* True for the view ops. */
bool qg_op_is_view(enum qg_op op);
/* The op's name ("mul_mat"), or "?" out of range. */
const char *qg_op_name(enum qg_op op);

/*
 * Views.  The result shares A's bytes (or those of A's own view source) and
 * has data as soon as the source has.
 *   reshape:   A contiguous, same number of elements, new contiguous shape
 *   view:      any shape NE (N_DIMS) with row strides NB1..NB3 (NB[0] is the
 *              type's), starting OFFSET bytes into A; must lie inside A,
 *              and OFFSET and every stride must be multiples of A's NB[0]
 *              (its element, or its block), so no value is read misaligned
 *   permute:   axis i of A becomes axis AXES[i] of the result (kept in
 *              its OP_PARAMS[0..3])
 *   transpose: swaps axes 0 and 1
 */
struct qg_tensor *qg_tensor_reshape(struct qg_ctx *ctx, struct qg_tensor *a, int n_dims, const int64_t *ne);
struct qg_tensor *qg_tensor_view(struct qg_ctx *ctx, struct qg_tensor *a, int n_dims, const int64_t *ne,
				 const size_t *nb, size_t offset);
struct qg_tensor *qg_tensor_permute(struct qg_ctx *ctx, struct qg_tensor *a, int ax0, int ax1, int ax2,
				    int ax3);
struct qg_tensor *qg_tensor_transpose(struct qg_ctx *ctx, struct qg_tensor *a);

/*
 * Internal to the builders: a new tensor for OP with sources and a
 * contiguous TYPE x NE shape, in CTX.  NULL (and the context's error) on
 * failure.
 */
struct qg_tensor *qg_tensor_new_op(struct qg_ctx *ctx, enum qg_op op, enum qg_type type, const int64_t *ne,
				   struct qg_tensor *src0, struct qg_tensor *src1);

#endif /* QG_TENSOR_H */
