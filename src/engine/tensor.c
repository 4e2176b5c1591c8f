/*
 * tensor.c - tensors, views and the context that owns their metadata.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"

struct qg_ctx {
	size_t n_used, capacity;
	int err;
	char err_text[256];
	struct qg_tensor tensors[];
};

struct qg_ctx *qg_ctx_new(size_t max_tensors)
{
	struct qg_ctx *ctx;

	if (max_tensors < 1 || max_tensors > (SIZE_MAX - sizeof *ctx) / sizeof(struct qg_tensor))
		return NULL;
	ctx = calloc(1, sizeof *ctx + max_tensors * sizeof(struct qg_tensor));
	if (!ctx)
		return NULL;
	ctx->capacity = max_tensors;
	return ctx;
}

size_t qg_ctx_bytes(const struct qg_ctx *ctx)
{
	return ctx ? sizeof *ctx + ctx->capacity * sizeof(struct qg_tensor) : 0;
}

void qg_ctx_free(struct qg_ctx *ctx)
{
	free(ctx);
}

int qg_ctx_error(const struct qg_ctx *ctx)
{
	return ctx ? ctx->err : -EINVAL;
}

const char *qg_ctx_error_text(const struct qg_ctx *ctx)
{
	return ctx ? ctx->err_text : "no context";
}

void *qg_ctx_fail(struct qg_ctx *ctx, int err, const char *fmt, ...)
{
	va_list ap;

	if (!ctx || ctx->err)
		return NULL;
	ctx->err = err;
	va_start(ap, fmt);
	vsnprintf(ctx->err_text, sizeof ctx->err_text, fmt, ap);
	va_end(ap);
	return NULL;
}

size_t qg_ctx_used(const struct qg_ctx *ctx)
{
	return ctx->n_used;
}

size_t qg_ctx_capacity(const struct qg_ctx *ctx)
{
	return ctx->capacity;
}

size_t qg_type_elem_size(enum qg_type type)
{
	switch ((int)type) {
	case QG_TYPE_F32:
		return 4;
	case QG_TYPE_F16:
		return 2;
	case QG_TYPE_I32:
		return 4;
	case QG_TYPE_I64:
		return 8;
	default:
		return 0;
	}
}

int64_t qg_type_row_bytes(enum qg_type type, int64_t cols)
{
	if (type == QG_TYPE_I32 || type == QG_TYPE_I64) {
		int64_t size = (int64_t)qg_type_elem_size(type);
		if (cols <= 0)
			return -EINVAL;
		if (cols > INT64_MAX / size)
			return -EOVERFLOW;
		return cols * size;
	}
	return qg_row_size(type, cols);
}

/* Bytes of one block (or element) of TYPE: NB[0] of a tensor. */
static size_t type_block_bytes(enum qg_type type)
{
	if (type == QG_TYPE_I32 || type == QG_TYPE_I64)
		return qg_type_elem_size(type);
	int bv = qg_type_block_values(type);
	return bv > 0 ? (size_t)qg_row_size(type, bv) : 0;
}

const char *qg_type_name_any(enum qg_type type)
{
	if (type == QG_TYPE_I32 || type == QG_TYPE_I64)
		return type == QG_TYPE_I32 ? "i32" : "i64";
	return qg_type_name(type) ? qg_type_name(type) : "?";
}

static const char *type_name(enum qg_type type)
{
	return qg_type_name_any(type);
}

/* A fresh tensor struct from the arena, zeroed, or NULL (and the error) when full. */
static struct qg_tensor *ctx_take(struct qg_ctx *ctx)
{
	if (!ctx)
		return NULL;
	if (ctx->n_used >= ctx->capacity)
		return qg_ctx_fail(ctx, -ENOSPC, "tensor arena full (%zu tensors)", ctx->capacity);
	struct qg_tensor *t = &ctx->tensors[ctx->n_used++];
	memset(t, 0, sizeof *t);
	return t;
}

/* Contiguous strides for TYPE x NE into T; 0 or -errno (bad shape, overflow). */
static int set_contiguous(struct qg_tensor *t, enum qg_type type, const int64_t *ne)
{
	int64_t row = qg_type_row_bytes(type, ne[0]);
	size_t total;

	if (row < 0)
		return (int)row;
	for (int i = 1; i < QG_MAX_DIMS; i++)
		if (ne[i] < 1)
			return -EINVAL;
	if (qg_type_row_group(type) > 1 && ne[1] % qg_type_row_group(type))
		return -EINVAL;
	t->type = type;
	memcpy(t->ne, ne, sizeof t->ne);
	t->nb[0] = type_block_bytes(type);
	total = (size_t)row;
	for (int i = 1; i < QG_MAX_DIMS; i++) {
		t->nb[i] = total;
		if (__builtin_mul_overflow(total, (size_t)ne[i], &total))
			return -EOVERFLOW;
	}
	if (total > (size_t)INT64_MAX)
		return -EOVERFLOW;
	return 0;
}

struct qg_tensor *qg_tensor_new(struct qg_ctx *ctx, enum qg_type type, int n_dims, const int64_t *ne)
{
	int64_t full[QG_MAX_DIMS] = { 1, 1, 1, 1 };
	struct qg_tensor *t;
	int r;

	if (!ctx)
		return NULL;
	if (n_dims < 1 || n_dims > QG_MAX_DIMS || !ne || (unsigned)type > QG_TYPE_I64)
		return qg_ctx_fail(ctx, -EINVAL, "tensor: bad type or dimensions");
	memcpy(full, ne, (size_t)n_dims * sizeof *ne);
	t = ctx_take(ctx);
	if (!t)
		return NULL;
	r = set_contiguous(t, type, full);
	if (r < 0) {
		ctx->n_used--;
		return qg_ctx_fail(ctx, r, "tensor: bad shape [%lld %lld %lld %lld] for %s",
				   (long long)full[0], (long long)full[1], (long long)full[2],
				   (long long)full[3], qg_type_name_any(type));
	}
	return t;
}

struct qg_tensor *qg_tensor_new_1d(struct qg_ctx *ctx, enum qg_type type, int64_t ne0)
{
	return qg_tensor_new(ctx, type, 1, (const int64_t[]){ ne0 });
}

struct qg_tensor *qg_tensor_new_2d(struct qg_ctx *ctx, enum qg_type type, int64_t ne0, int64_t ne1)
{
	return qg_tensor_new(ctx, type, 2, (const int64_t[]){ ne0, ne1 });
}

struct qg_tensor *qg_tensor_new_3d(struct qg_ctx *ctx, enum qg_type type, int64_t ne0, int64_t ne1,
				   int64_t ne2)
{
	return qg_tensor_new(ctx, type, 3, (const int64_t[]){ ne0, ne1, ne2 });
}

struct qg_tensor *qg_tensor_dup(struct qg_ctx *ctx, const struct qg_tensor *a)
{
	if (!a)
		return NULL;
	return qg_tensor_new(ctx, a->type, QG_MAX_DIMS, a->ne);
}

struct qg_tensor *qg_tensor_new_op(struct qg_ctx *ctx, enum qg_op op, enum qg_type type, const int64_t *ne,
				   struct qg_tensor *src0, struct qg_tensor *src1)
{
	struct qg_tensor *t = qg_tensor_new(ctx, type, QG_MAX_DIMS, ne);

	if (!t)
		return NULL;
	t->op = op;
	t->src[0] = src0;
	t->src[1] = src1;
	return t;
}

int64_t qg_tensor_nelements(const struct qg_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int64_t qg_tensor_nrows(const struct qg_tensor *t)
{
	return t->ne[1] * t->ne[2] * t->ne[3];
}

size_t qg_tensor_nbytes(const struct qg_tensor *t)
{
	int bv = t->type == QG_TYPE_I32 || t->type == QG_TYPE_I64 ? 1 : qg_type_block_values(t->type);
	size_t n;

	size_t step;

	if (bv <= 0)
		return 0;
	/* one element (or a row's blocks), then every dimension's strides beyond it; SIZE_MAX if that overflows */
	if (bv == 1)
		n = qg_type_elem_size(t->type);
	else if (__builtin_mul_overflow((size_t)(t->ne[0] / bv), t->nb[0], &n))
		return SIZE_MAX;
	for (int i = bv == 1 ? 0 : 1; i < QG_MAX_DIMS; i++)
		if (__builtin_mul_overflow((size_t)(t->ne[i] - 1), t->nb[i], &step) || __builtin_add_overflow(n, step, &n))
			return SIZE_MAX;
	return n;
}

bool qg_tensor_is_contiguous(const struct qg_tensor *t)
{
	int64_t row = qg_type_row_bytes(t->type, t->ne[0]);
	size_t next;

	if (row < 0 || t->nb[0] != type_block_bytes(t->type))
		return false;
	next = (size_t)row;
	for (int i = 1; i < QG_MAX_DIMS; i++) {
		/* a dimension of one element has no stride that matters */
		if (t->ne[i] != 1 && t->nb[i] != next)
			return false;
		next *= (size_t)t->ne[i];
	}
	return true;
}

bool qg_tensor_same_shape(const struct qg_tensor *a, const struct qg_tensor *b)
{
	return memcmp(a->ne, b->ne, sizeof a->ne) == 0;
}

bool qg_tensor_same_layout(const struct qg_tensor *a, const struct qg_tensor *b)
{
	return a->type == b->type && qg_tensor_same_shape(a, b) && memcmp(a->nb, b->nb, sizeof a->nb) == 0;
}

bool qg_tensor_is_weights(const struct qg_tensor *t)
{
	return t && ((t->flags & QG_TENSOR_WEIGHTS) || (t->view_src && (t->view_src->flags & QG_TENSOR_WEIGHTS)));
}

bool qg_op_is_view(enum qg_op op)
{
	return op == QG_OP_RESHAPE || op == QG_OP_VIEW || op == QG_OP_PERMUTE || op == QG_OP_TRANSPOSE;
}

static const char *const op_names[QG_OP_COUNT] = {
	[QG_OP_NONE] = "none",
	[QG_OP_MUL_MAT] = "mul_mat",
	[QG_OP_ADD] = "add",
	[QG_OP_MUL] = "mul",
	[QG_OP_SCALE] = "scale",
	[QG_OP_SILU] = "silu",
	[QG_OP_GELU] = "gelu",
	[QG_OP_RMS_NORM] = "rms_norm",
	[QG_OP_SOFT_MAX] = "soft_max",
	[QG_OP_CPY] = "cpy",
	[QG_OP_GET_ROWS] = "get_rows",
	[QG_OP_RESHAPE] = "reshape",
	[QG_OP_VIEW] = "view",
	[QG_OP_PERMUTE] = "permute",
	[QG_OP_TRANSPOSE] = "transpose",
	[QG_OP_ROPE] = "rope",
	[QG_OP_GLU] = "glu",
	[QG_OP_SET_ROWS] = "set_rows",
	[QG_OP_FLASH_ATTN_EXT] = "flash_attn_ext",
	[QG_OP_NORM] = "norm",
};

const char *qg_op_name(enum qg_op op)
{
	return (unsigned)op < QG_OP_COUNT ? op_names[op] : "?";
}

/* --- views -------------------------------------------------------------- */

/*
 * A view of A for OP with shape NE and strides NB, OFFS bytes into A: its
 * offset and strides must be multiples of A's element (or block), and its
 * extent must lie inside A's root.  NULL (and the error) otherwise.
 */
static struct qg_tensor *make_view(struct qg_ctx *ctx, enum qg_op op, struct qg_tensor *a, const int64_t *ne,
				   const size_t *nb, size_t offs)
{
	struct qg_tensor *root = a->view_src ? a->view_src : a;
	size_t base = a->view_src ? a->view_offs : 0;
	struct qg_tensor *t;
	size_t extent;

	for (int i = 0; i < QG_MAX_DIMS; i++)
		if (ne[i] < 1)
			return qg_ctx_fail(ctx, -EINVAL, "%s: dimension %d < 1", qg_op_name(op), i);
	/* every value on a boundary of its own size: the kernels load floats and blocks through typed pointers */
	const size_t unit = type_block_bytes(a->type);
	const char *what = qg_type_block_values(a->type) > 1 ? "block" : "element";
	if (unit == 0 || offs % unit || base % unit)
		return qg_ctx_fail(ctx, -EINVAL, "%s: offset %zu is not a multiple of the %zu-byte %s of %s",
				   qg_op_name(op), offs, unit, what, type_name(a->type));
	for (int i = 0; i < QG_MAX_DIMS; i++)
		if (nb[i] % unit)
			return qg_ctx_fail(ctx, -EINVAL,
					   "%s: stride %d (%zu bytes) is not a multiple of the %zu-byte %s of %s",
					   qg_op_name(op), i, nb[i], unit, what, type_name(a->type));
	t = ctx_take(ctx);
	if (!t)
		return NULL;
	t->type = a->type;
	memcpy(t->ne, ne, sizeof t->ne);
	memcpy(t->nb, nb, sizeof t->nb);
	t->op = op;
	t->src[0] = a;
	t->view_src = root;
	t->view_offs = base + offs;
	extent = qg_tensor_nbytes(t);
	if (offs > SIZE_MAX - base || extent > SIZE_MAX - t->view_offs ||
	    t->view_offs + extent > qg_tensor_nbytes(root) ||
	    (qg_type_block_values(a->type) > 1 && ne[0] % qg_type_block_values(a->type))) {
		ctx->n_used--;
		return qg_ctx_fail(ctx, -ERANGE, "%s: view outside its source", qg_op_name(op));
	}
	if (root->data)
		t->data = (char *)root->data + t->view_offs;
	t->buffer = root->buffer;
	return t;
}

struct qg_tensor *qg_tensor_reshape(struct qg_ctx *ctx, struct qg_tensor *a, int n_dims, const int64_t *ne)
{
	int64_t full[QG_MAX_DIMS] = { 1, 1, 1, 1 };
	struct qg_tensor tmp;

	if (!a || !ctx)
		return NULL;
	if (n_dims < 1 || n_dims > QG_MAX_DIMS || !ne)
		return qg_ctx_fail(ctx, -EINVAL, "reshape: bad dimensions");
	memcpy(full, ne, (size_t)n_dims * sizeof *ne);
	if (!qg_tensor_is_contiguous(a))
		return qg_ctx_fail(ctx, -EINVAL, "reshape: source not contiguous");
	memset(&tmp, 0, sizeof tmp);
	if (set_contiguous(&tmp, a->type, full) < 0 || qg_tensor_nelements(&tmp) != qg_tensor_nelements(a))
		return qg_ctx_fail(ctx, -EINVAL, "reshape: [%lld %lld %lld %lld] (%lld elements) is not [%lld %lld %lld %lld]",
				   (long long)a->ne[0], (long long)a->ne[1], (long long)a->ne[2], (long long)a->ne[3],
				   (long long)qg_tensor_nelements(a), (long long)full[0], (long long)full[1],
				   (long long)full[2], (long long)full[3]);
	return make_view(ctx, QG_OP_RESHAPE, a, tmp.ne, tmp.nb, 0);
}

struct qg_tensor *qg_tensor_view(struct qg_ctx *ctx, struct qg_tensor *a, int n_dims, const int64_t *ne,
				 const size_t *nb, size_t offset)
{
	int64_t full[QG_MAX_DIMS] = { 1, 1, 1, 1 };
	size_t strides[QG_MAX_DIMS];

	if (!a || !ctx)
		return NULL;
	if (n_dims < 1 || n_dims > QG_MAX_DIMS || !ne || (n_dims > 1 && !nb))
		return qg_ctx_fail(ctx, -EINVAL, "view: bad dimensions");
	memcpy(full, ne, (size_t)n_dims * sizeof *ne);
	strides[0] = a->nb[0];
	for (int i = 1; i < QG_MAX_DIMS; i++) {
		if (i < n_dims) {
			strides[i] = nb[i - 1];
		} else {
			int64_t row = i == 1 ? qg_type_row_bytes(a->type, full[0]) : 0;
			if (i == 1 && row < 0)
				return qg_ctx_fail(ctx, -EINVAL, "view: bad row");
			strides[i] = i == 1 ? (size_t)row : strides[i - 1] * (size_t)full[i - 1];
		}
	}
	return make_view(ctx, QG_OP_VIEW, a, full, strides, offset);
}

struct qg_tensor *qg_tensor_permute(struct qg_ctx *ctx, struct qg_tensor *a, int ax0, int ax1, int ax2,
				    int ax3)
{
	const int ax[QG_MAX_DIMS] = { ax0, ax1, ax2, ax3 };
	int64_t ne[QG_MAX_DIMS];
	size_t nb[QG_MAX_DIMS];
	int seen = 0;

	if (!a || !ctx)
		return NULL;
	for (int i = 0; i < QG_MAX_DIMS; i++) {
		if (ax[i] < 0 || ax[i] >= QG_MAX_DIMS || (seen & (1 << ax[i])))
			return qg_ctx_fail(ctx, -EINVAL, "permute: axes are not a permutation");
		seen |= 1 << ax[i];
		ne[ax[i]] = a->ne[i];
		nb[ax[i]] = a->nb[i];
	}
	if (qg_type_block_values(a->type) > 1 && ax0 != 0)
		return qg_ctx_fail(ctx, -EINVAL, "permute: rows of a block type cannot move");
	struct qg_tensor *t = make_view(ctx, QG_OP_PERMUTE, a, ne, nb, 0);
	if (t)
		memcpy(t->op_params, ax, sizeof ax);	/* the wire's encoder sends them */
	return t;
}

struct qg_tensor *qg_tensor_transpose(struct qg_ctx *ctx, struct qg_tensor *a)
{
	struct qg_tensor *t = qg_tensor_permute(ctx, a, 1, 0, 2, 3);

	if (t)
		t->op = QG_OP_TRANSPOSE;
	return t;
}
