/*
 * wire.c - decoding records, turning submitted graphs into checked engine
 * graphs and engine graphs into records to submit (see wire.h).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "hotpath.h"
#include "numbers.h"
#include "wire.h"

int qg_wire_arena_init(struct qg_wire_arena *a, size_t cap)
{
	a->buf = malloc(cap);
	a->cap = a->buf ? cap : 0;
	a->used = 0;
	return a->buf ? 0 : -ENOMEM;
}

void qg_wire_arena_free(struct qg_wire_arena *a)
{
	free(a->buf);
	a->buf = NULL;
	a->cap = a->used = 0;
}

static void *arena_alloc(void *ctx, size_t size)
{
	struct qg_wire_arena *a = ctx;
	size_t at = (a->used + 15) & ~(size_t)15;

	if (at < a->used || size > a->cap || at > a->cap - size)
		return NULL;	/* protobuf-c then fails the decode cleanly */
	a->used = at + size;
	return a->buf + at;
}

static void arena_release(void *ctx, void *p)
{
	(void)ctx;
	(void)p;	/* everything goes at the next reset */
}

Qgraph__Request *qg_wire_decode_request(struct qg_wire_arena *a, const void *buf, size_t len)
{
	ProtobufCAllocator alloc = { .alloc = arena_alloc, .free = arena_release, .allocator_data = a };

	if (!a->buf || (!buf && len))
		return NULL;
	a->used = 0;
	/* a run of a registered graph, in canonical form, by hand; everything else, or any doubt, by protobuf-c */
	Qgraph__Request *r = qg_hot_unpack_request(&alloc, buf, len);
	if (r)
		return r;
	a->used = 0;
	return qgraph__request__unpack(&alloc, len, buf);
}

/*
 * The one numbering table for element types and ops: the engine's, the
 * public API's (qgraph.h's, as numbers.h repeats them) and the wire's
 * number of each.  Nothing else converts one numbering into another.  A row whose wire number is NO_WIRE
 * never crosses the wire (the daemon's own activation layouts).
 */
#define NO_WIRE (-1)

static const struct {
	enum qg_type engine;
	int public;
	int wire;
} type_table[] = {
	{ QG_TYPE_F32, QG_PUBLIC_TYPE_F32, QGRAPH__TYPE__TYPE_F32 },
	{ QG_TYPE_F16, QG_PUBLIC_TYPE_F16, QGRAPH__TYPE__TYPE_F16 },
	{ QG_TYPE_Q8_0, QG_PUBLIC_TYPE_Q8_0, QGRAPH__TYPE__TYPE_Q8_0 },
	{ QG_TYPE_Q4_0, QG_PUBLIC_TYPE_Q4_0, QGRAPH__TYPE__TYPE_Q4_0 },
	{ QG_TYPE_Q4_0_4X4, QG_PUBLIC_TYPE_Q4_0_4X4, QGRAPH__TYPE__TYPE_Q4_0_4X4 },
	{ QG_TYPE_Q4_0_4X8, QG_PUBLIC_TYPE_Q4_0_4X8, QGRAPH__TYPE__TYPE_Q4_0_4X8 },
	{ QG_TYPE_Q4_0_8X8, QG_PUBLIC_TYPE_Q4_0_8X8, QGRAPH__TYPE__TYPE_Q4_0_8X8 },
	{ QG_TYPE_Q8_0_4X4, QG_PUBLIC_TYPE_Q8_0_4X4, QGRAPH__TYPE__TYPE_Q8_0_4X4 },
	{ QG_TYPE_Q8_0_4X8, QG_PUBLIC_TYPE_Q8_0_4X8, NO_WIRE },
	{ QG_TYPE_Q4_K, QG_PUBLIC_TYPE_Q4_K, QGRAPH__TYPE__TYPE_Q4_K },
	{ QG_TYPE_Q6_K, QG_PUBLIC_TYPE_Q6_K, QGRAPH__TYPE__TYPE_Q6_K },
	{ QG_TYPE_Q8_K, QG_PUBLIC_TYPE_Q8_K, NO_WIRE },
	{ QG_TYPE_I32, QG_PUBLIC_TYPE_I32, QGRAPH__TYPE__TYPE_I32 },
	{ QG_TYPE_I64, QG_PUBLIC_TYPE_I64, QGRAPH__TYPE__TYPE_I64 },
};
_Static_assert(sizeof type_table / sizeof type_table[0] == QG_TYPE_COUNT + 2, "a row for every engine type, i32 and i64");

static const struct {
	enum qg_op engine;
	int public;
	int wire;
} op_table[] = {
	{ QG_OP_NONE, NO_WIRE, QGRAPH__OP__OP_NONE },	/* a leaf: the public API makes no op of it */
	{ QG_OP_MUL_MAT, QG_PUBLIC_OP_MUL_MAT, QGRAPH__OP__OP_MUL_MAT },
	{ QG_OP_ADD, QG_PUBLIC_OP_ADD, QGRAPH__OP__OP_ADD },
	{ QG_OP_MUL, QG_PUBLIC_OP_MUL, QGRAPH__OP__OP_MUL },
	{ QG_OP_SCALE, QG_PUBLIC_OP_SCALE, QGRAPH__OP__OP_SCALE },
	{ QG_OP_SILU, QG_PUBLIC_OP_SILU, QGRAPH__OP__OP_SILU },
	{ QG_OP_GELU, QG_PUBLIC_OP_GELU, QGRAPH__OP__OP_GELU },
	{ QG_OP_RMS_NORM, QG_PUBLIC_OP_RMS_NORM, QGRAPH__OP__OP_RMS_NORM },
	{ QG_OP_SOFT_MAX, QG_PUBLIC_OP_SOFT_MAX, QGRAPH__OP__OP_SOFT_MAX },
	{ QG_OP_CPY, QG_PUBLIC_OP_CPY, QGRAPH__OP__OP_CPY },
	{ QG_OP_GET_ROWS, QG_PUBLIC_OP_GET_ROWS, QGRAPH__OP__OP_GET_ROWS },
	{ QG_OP_RESHAPE, QG_PUBLIC_OP_RESHAPE, QGRAPH__OP__OP_RESHAPE },
	{ QG_OP_VIEW, QG_PUBLIC_OP_VIEW, QGRAPH__OP__OP_VIEW },
	{ QG_OP_PERMUTE, QG_PUBLIC_OP_PERMUTE, QGRAPH__OP__OP_PERMUTE },
	{ QG_OP_TRANSPOSE, QG_PUBLIC_OP_TRANSPOSE, QGRAPH__OP__OP_TRANSPOSE },
	{ QG_OP_ROPE, QG_PUBLIC_OP_ROPE, QGRAPH__OP__OP_ROPE },
	{ QG_OP_GLU, QG_PUBLIC_OP_GLU, QGRAPH__OP__OP_GLU },
	{ QG_OP_SET_ROWS, QG_PUBLIC_OP_SET_ROWS, QGRAPH__OP__OP_SET_ROWS },
	{ QG_OP_FLASH_ATTN_EXT, QG_PUBLIC_OP_FLASH_ATTN_EXT, QGRAPH__OP__OP_FLASH_ATTN_EXT },
	{ QG_OP_NORM, QG_PUBLIC_OP_NORM, QGRAPH__OP__OP_NORM },
};
_Static_assert(sizeof op_table / sizeof op_table[0] == QG_OP_COUNT, "a row for every engine op");

#define N_ROWS(t) (sizeof(t) / sizeof((t)[0]))
/* The COL_OUT of TABLE's row whose COL_IN is V, or -EINVAL. */
#define LOOK_UP(table, col_in, v, col_out)                                                   \
	do {                                                                                 \
		for (size_t i_ = 0; i_ < N_ROWS(table); i_++)                                \
			if ((v) != NO_WIRE && (int)table[i_].col_in == (v) &&                \
			    (int)table[i_].col_out != NO_WIRE)                               \
				return (int)table[i_].col_out;                               \
		return -EINVAL;                                                              \
	} while (0)

int qg_wire_type(int wire_type) { LOOK_UP(type_table, wire, wire_type, engine); }
int qg_wire_type_of(enum qg_type type) { LOOK_UP(type_table, engine, (int)type, wire); }
int qg_wire_type_of_public(int public_type) { LOOK_UP(type_table, public, public_type, wire); }
int qg_wire_public_type(int wire_type) { LOOK_UP(type_table, wire, wire_type, public); }
int qg_wire_engine_type_of_public(int public_type) { LOOK_UP(type_table, public, public_type, engine); }
int qg_wire_op(int wire_op) { LOOK_UP(op_table, wire, wire_op, engine); }
int qg_wire_op_of(enum qg_op op) { LOOK_UP(op_table, engine, (int)op, wire); }
int qg_wire_op_of_public(int public_op) { LOOK_UP(op_table, public, public_op, wire); }

/* A span of the arena a tensor occupies, for the overlap check. */
struct span {
	uint64_t off, end;
	size_t tensor;
	int output;
};

struct build {
	const Qgraph__SubmitGraph *sg;
	const struct qg_wire_env *env;
	struct qg_wire_graph *g;
	struct span *spans;
	size_t n_spans;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 4, 5)))
static int fail(struct build *b, int code, size_t i, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (b->err && b->errlen) {
		if (i != SIZE_MAX)
			n = snprintf(b->err, b->errlen, "tensor %zu: ", i);
		if (n >= 0 && (size_t)n < b->errlen) {
			va_start(ap, fmt);
			vsnprintf(b->err + n, b->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return code;
}

/* Source J of wire tensor I, which must be an earlier tensor (no cycles). */
static int source(struct build *b, size_t i, const Qgraph__Tensor *wt, size_t j, struct qg_tensor **out)
{
	if (j >= wt->n_src) {
		int op = qg_wire_op(wt->op);
		return fail(b, -EINVAL, i, "%s needs %zu sources, has %zu", op < 0 ? "its op" : qg_op_name((enum qg_op)op),
			    j + 1, wt->n_src);
	}
	uint32_t s = wt->src[j];
	if (s >= i)
		return fail(b, -EINVAL, i, "source %u is not an earlier tensor", s);
	*out = b->g->tensors[s];
	return 0;
}

/* Check that span SP of tensor I lies in the arena, aligned, with BYTES. */
static int arena_span(struct build *b, size_t i, const Qgraph__Span *sp, size_t bytes, int output)
{
	const struct qg_wire_env *env = b->env;

	if (sp->offset % QG_WIRE_ALIGN)
		return fail(b, -EINVAL, i, "arena offset %llu is not a multiple of %d",
			    (unsigned long long)sp->offset, QG_WIRE_ALIGN);
	if (sp->bytes != bytes)
		return fail(b, -EINVAL, i, "arena span of %llu bytes for a tensor of %zu",
			    (unsigned long long)sp->bytes, bytes);
	if (sp->offset > env->arena_bytes || sp->bytes > env->arena_bytes - sp->offset)
		return fail(b, -EINVAL, i, "arena span [%llu, +%llu) is outside the %llu-byte arena",
			    (unsigned long long)sp->offset, (unsigned long long)sp->bytes,
			    (unsigned long long)env->arena_bytes);
	b->spans[b->n_spans++] = (struct span){ .off = sp->offset, .end = sp->offset + sp->bytes,
						.tensor = i, .output = output };
	return 0;
}

static int leaf(struct build *b, size_t i, const Qgraph__Tensor *wt, enum qg_type type, struct qg_tensor **out)
{
	struct qg_tensor *t = qg_tensor_new(b->g->ctx, type, (int)wt->n_ne, wt->ne);

	if (!t)
		return fail(b, -EINVAL, i, "%s", qg_ctx_error_text(b->g->ctx));
	if (wt->n_nb)
		return fail(b, -EINVAL, i, "a leaf is contiguous: strides are not accepted");
	if (wt->weights && wt->arena)
		return fail(b, -EINVAL, i, "a leaf is either weights or arena data, not both");
	if (wt->weights) {
		struct qg_wire_weights w;
		if (!b->env->weights || b->env->weights(b->env->weights_ctx, wt->weights, &w))
			return fail(b, -ENOENT, i, "unknown weight handle %llu", (unsigned long long)wt->weights);
		/* a matrix, or a stack of ne[2] x ne[3] matrices of ne[1] rows each, whole row groups apiece */
		if (w.type != type || w.cols != t->ne[0] || w.rows != t->ne[1] * t->ne[2] * t->ne[3])
			return fail(b, -EINVAL, i, "weights %llu are %s %lld x %lld, not the %s %lld x %lld declared",
				    (unsigned long long)wt->weights, qg_type_name(w.type), (long long)w.rows,
				    (long long)w.cols, qg_type_name(type) ? qg_type_name(type) : "i32",
				    (long long)(t->ne[1] * t->ne[2] * t->ne[3]), (long long)t->ne[0]);
		if (t->ne[1] != w.rows && t->ne[1] % qg_type_row_group(type))
			return fail(b, -EINVAL, i, "a stack of %s matrices of %lld rows: each must be whole groups of %d",
				    qg_type_name(type), (long long)t->ne[1], qg_type_row_group(type));
		t->data = w.data;
		t->flags |= QG_TENSOR_WEIGHTS;
	} else if (wt->arena) {
		int err = arena_span(b, i, wt->arena, qg_tensor_nbytes(t), (wt->flags & 2) != 0);
		if (err)
			return err;
		t->data = b->env->arena + wt->arena->offset;
		t->flags |= QG_TENSOR_INPUT;
	} else {
		return fail(b, -EINVAL, i, "a leaf needs weights or an arena span");
	}
	*out = t;
	return 0;
}

static float fparam(const Qgraph__Tensor *wt, size_t j, float dflt)
{
	return j < wt->n_fparams ? wt->fparams[j] : dflt;
}

/* The wire index of T's bytes' owner (T itself, or the root it views) among the first I tensors. */
static size_t owner_index(const struct build *b, size_t i, const struct qg_tensor *t)
{
	const struct qg_tensor *root = t->view_src ? t->view_src : t;

	for (size_t k = 0; k < i; k++)
		if (b->g->tensors[k] == root)
			return k;
	return i;	/* not reached: every root is a wire tensor */
}

/*
 * Build wire tensor I of an op of the general form (ggml's): up to
 * QG_MAX_SRC sources, up to QG_MAX_OP_PARAMS words of op_params (the rest
 * 0), and the engine's builder for every check of types, shapes and values.
 */
static int general_node(struct build *b, size_t i, const Qgraph__Tensor *wt, struct qg_tensor **out)
{
	struct qg_tensor *src[QG_MAX_SRC];
	int op = qg_wire_op(wt->op), err;

	if (op < 0)
		return fail(b, -EINVAL, i, "unknown op %d", (int)wt->op);
	if (wt->n_src > QG_MAX_SRC)
		return fail(b, -EINVAL, i, "%zu sources: %s takes at most %d", wt->n_src, qg_op_name((enum qg_op)op),
			    QG_MAX_SRC);
	if (wt->n_iparams > QG_MAX_OP_PARAMS || wt->n_fparams || wt->n_nb || wt->view_offset)
		return fail(b, -EINVAL, i, "%s takes up to %d op_params words and nothing else (%zu words, %zu floats)",
			    qg_op_name((enum qg_op)op), QG_MAX_OP_PARAMS, wt->n_iparams, wt->n_fparams);
	for (size_t j = 0; j < wt->n_src; j++)
		if ((err = source(b, i, wt, j, &src[j])))
			return err;
	if (op == QG_OP_SET_ROWS && wt->n_src > 2 && qg_tensor_is_weights(src[2]))
		return fail(b, -EINVAL, i, "set_rows would write into weights %zu (weights are read-only to graphs)",
			    owner_index(b, i, src[2]));
	*out = qg_op_ex(b->g->ctx, (enum qg_op)op, src, (int)wt->n_src, wt->iparams, (int)wt->n_iparams);
	if (!*out)
		return fail(b, -EINVAL, i, "%s", qg_ctx_error_text(b->g->ctx));
	return 0;
}

/* Build the op of wire tensor I from its (already built) sources. */
static int node(struct build *b, size_t i, const Qgraph__Tensor *wt, struct qg_tensor **out)
{
	struct qg_ctx *ctx = b->g->ctx;
	struct qg_tensor *a = NULL, *c = NULL, *t = NULL;
	int err;

	if ((err = source(b, i, wt, 0, &a)))
		return err;
	if (wt->op >= QGRAPH__OP__OP_ROPE)
		return general_node(b, i, wt, out);
	switch (wt->op) {
	case QGRAPH__OP__OP_MUL_MAT:
	case QGRAPH__OP__OP_ADD:
	case QGRAPH__OP__OP_MUL:
	case QGRAPH__OP__OP_GET_ROWS:
		if ((err = source(b, i, wt, 1, &c)))
			return err;
		break;
	case QGRAPH__OP__OP_CPY:	/* into a second source, or (one source) a new tensor of the declared type */
	case QGRAPH__OP__OP_SOFT_MAX:
		if (wt->n_src > 1 && (err = source(b, i, wt, 1, &c)))
			return err;
		break;
	default:
		break;
	}
	if (wt->n_src > 2)
		return fail(b, -EINVAL, i, "%zu sources: no op takes more than 2", wt->n_src);
	/*
	 * Weights are read-only to graphs: other sessions (of other users, too)
	 * may share the very bytes.  CPY is the one op that writes into a
	 * source (its result is a view of its destination); the allocator's
	 * in-place reuse never takes weights' bytes (galloc.c, ga_reusable).
	 */
	if (wt->op == QGRAPH__OP__OP_CPY && qg_tensor_is_weights(c))
		return fail(b, -EINVAL, i, "cpy would write into weights %zu (weights are read-only to graphs)",
			    owner_index(b, i, c));

	switch (wt->op) {
	case QGRAPH__OP__OP_MUL_MAT: t = qg_op_mul_mat(ctx, a, c); break;
	case QGRAPH__OP__OP_ADD: t = qg_op_add(ctx, a, c); break;
	case QGRAPH__OP__OP_MUL: t = qg_op_mul(ctx, a, c); break;
	case QGRAPH__OP__OP_SCALE: t = qg_op_scale(ctx, a, fparam(wt, 0, 1.0f)); break;
	case QGRAPH__OP__OP_SILU: t = qg_op_silu(ctx, a); break;
	case QGRAPH__OP__OP_GELU: t = qg_op_gelu(ctx, a); break;
	case QGRAPH__OP__OP_RMS_NORM: t = qg_op_rms_norm(ctx, a, fparam(wt, 0, 1e-6f)); break;
	case QGRAPH__OP__OP_SOFT_MAX: t = qg_op_soft_max(ctx, a, c, fparam(wt, 0, 1.0f)); break;
	case QGRAPH__OP__OP_CPY: {
		int type = qg_wire_type(wt->type);	/* the caller checked it is a type */
		t = c ? qg_op_cpy(ctx, a, c) : qg_op_cast(ctx, a, (enum qg_type)type);
		break;
	}
	case QGRAPH__OP__OP_GET_ROWS: t = qg_op_get_rows(ctx, a, c); break;
	case QGRAPH__OP__OP_RESHAPE: t = qg_tensor_reshape(ctx, a, (int)wt->n_ne, wt->ne); break;
	case QGRAPH__OP__OP_TRANSPOSE: t = qg_tensor_transpose(ctx, a); break;
	case QGRAPH__OP__OP_PERMUTE:
		if (wt->n_iparams != 4)
			return fail(b, -EINVAL, i, "permute needs 4 axes, has %zu", wt->n_iparams);
		t = qg_tensor_permute(ctx, a, wt->iparams[0], wt->iparams[1], wt->iparams[2], wt->iparams[3]);
		break;
	case QGRAPH__OP__OP_VIEW: {
		/* one stride a dimension: NB[0] between a row's elements (its source's), NB[d] between its rows of dim d */
		size_t nb[QG_MAX_DIMS] = { 0 };
		if (wt->n_nb != wt->n_ne)
			return fail(b, -EINVAL, i, "a view needs one stride per dimension");
		if (wt->nb[0] != a->nb[0])
			return fail(b, -EINVAL, i, "a view's elements are %llu bytes apart, as its source's, not %llu",
				    (unsigned long long)a->nb[0], (unsigned long long)wt->nb[0]);
		for (size_t d = 1; d < wt->n_nb; d++)
			nb[d - 1] = (size_t)wt->nb[d];	/* make_view bounds what they reach */
		t = qg_tensor_view(ctx, a, (int)wt->n_ne, wt->ne, nb, (size_t)wt->view_offset);
		break;
	}
	default:
		return fail(b, -EINVAL, i, "unknown op %d", (int)wt->op);
	}
	if (!t)	/* the builders check every op's types and shapes, and every view's bounds */
		return fail(b, -EINVAL, i, "%s", qg_ctx_error_text(ctx));
	*out = t;
	return 0;
}

static int span_cmp(const void *x, const void *y)
{
	const struct span *a = x, *b = y;

	return a->off < b->off ? -1 : a->off > b->off;
}

int qg_wire_graph_build(const Qgraph__SubmitGraph *sg, const struct qg_wire_env *env,
			struct qg_wire_graph *out, char *err, size_t errlen)
{
	struct build b = { .sg = sg, .env = env, .g = out, .err = err, .errlen = errlen };
	size_t n_effects = 0;
	int r = 0;

	if (err && errlen)
		err[0] = 0;
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof *out);
	if (!sg || !env)
		return fail(&b, -EINVAL, SIZE_MAX, "no graph");
	if (sg->n_tensors == 0)
		return fail(&b, -EINVAL, SIZE_MAX, "a graph without tensors");
	if (sg->n_tensors > env->max_tensors)
		return fail(&b, -E2BIG, SIZE_MAX, "%zu tensors: the limit is %u", sg->n_tensors, env->max_tensors);

	/* views and casts may add tensors of their own: room for two per wire tensor */
	out->ctx = qg_ctx_new(2 * sg->n_tensors);
	out->graph = qg_graph_new(2 * sg->n_tensors);
	out->tensors = calloc(sg->n_tensors, sizeof *out->tensors);
	b.spans = calloc(sg->n_tensors, sizeof *b.spans);
	if (!out->ctx || !out->graph || !out->tensors || !b.spans) {
		r = fail(&b, -ENOMEM, SIZE_MAX, "out of memory");
		goto out;
	}
	out->n_tensors = sg->n_tensors;

	for (size_t i = 0; i < sg->n_tensors; i++) {
		const Qgraph__Tensor *wt = sg->tensors[i];
		struct qg_tensor *t = NULL;
		int type = qg_wire_type(wt->type);

		if (type < 0) {
			r = fail(&b, -EINVAL, i, "unknown type %d", (int)wt->type);
			goto out;
		}
		if (wt->n_ne < 1 || wt->n_ne > QG_MAX_DIMS) {
			r = fail(&b, -EINVAL, i, "%zu dimensions (1 to %d)", wt->n_ne, QG_MAX_DIMS);
			goto out;
		}
		for (size_t d = 0; d < wt->n_ne; d++) {
			if (wt->ne[d] < 1 || wt->ne[d] > QG_WIRE_MAX_DIM) {
				r = fail(&b, -EINVAL, i, "dimension %zu is %lld", d, (long long)wt->ne[d]);
				goto out;
			}
		}
		if (wt->flags & ~(QG_WIRE_INPUT | QG_WIRE_OUTPUT | QG_WIRE_EFFECT)) {
			r = fail(&b, -EINVAL, i, "unknown flags %#x", wt->flags);
			goto out;
		}
		r = wt->op == QGRAPH__OP__OP_NONE ? leaf(&b, i, wt, (enum qg_type)type, &t) : node(&b, i, wt, &t);
		if (r)
			goto out;
		if (wt->op != QGRAPH__OP__OP_NONE && wt->op != QGRAPH__OP__OP_RESHAPE &&
		    wt->op != QGRAPH__OP__OP_VIEW) {
			/* the declared shape must be what the op gives */
			for (int d = 0; d < QG_MAX_DIMS; d++) {
				int64_t want = (size_t)d < wt->n_ne ? wt->ne[d] : 1;
				if (t->ne[d] != want) {
					r = fail(&b, -EINVAL, i, "%s gives dimension %d = %lld, declared %lld",
						 qg_op_name(t->op), d, (long long)t->ne[d], (long long)want);
					goto out;
				}
			}
			if ((int)t->type != type) {
				r = fail(&b, -EINVAL, i, "%s gives %s, declared %s", qg_op_name(t->op),
					 qg_type_name(t->type), qg_type_name((enum qg_type)type));
				goto out;
			}
		}
		if (wt->flags & 2) {	/* an output: computed, contiguous, in the arena */
			if (wt->op == QGRAPH__OP__OP_NONE || t->view_src) {	/* views, and ops writing into a source */
				r = fail(&b, -EINVAL, i, "an output must be a computed tensor");
				goto out;
			}
			if (!wt->arena) {
				r = fail(&b, -EINVAL, i, "an output needs an arena span");
				goto out;
			}
			if ((r = arena_span(&b, i, wt->arena, qg_tensor_nbytes(t), 1)))
				goto out;
			t->data = env->arena + wt->arena->offset;
			t->flags |= QG_TENSOR_OUTPUT;
			out->n_outputs++;
		} else if (wt->op != QGRAPH__OP__OP_NONE && wt->arena) {
			r = fail(&b, -EINVAL, i, "only leafs and outputs live in the arena");
			goto out;
		}
		if (wt->flags & QG_WIRE_EFFECT) {
			/* what nothing reads runs only for what it writes: an op writing into a source, no view */
			if (wt->op == QGRAPH__OP__OP_NONE || qg_op_is_view(t->op) || !t->view_src ||
			    (wt->flags & QG_WIRE_OUTPUT)) {
				r = fail(&b, -EINVAL, i, "only a node that writes into a source (cpy, set_rows) runs for its effect");
				goto out;
			}
			n_effects++;
		}
		out->tensors[i] = t;
	}
	if (out->n_outputs == 0 && n_effects == 0) {
		r = fail(&b, -EINVAL, SIZE_MAX, "a graph without outputs");
		goto out;
	}

	/*
	 * No output may share a byte with any other span (input or output).  In
	 * order of offset, a span overlaps an earlier one exactly when it starts
	 * before that one's end: so keep the farthest-reaching span so far, and
	 * the farthest-reaching output, whichever spans lie between.
	 */
	qsort(b.spans, b.n_spans, sizeof *b.spans, span_cmp);
	const struct span *far = NULL, *far_out = NULL;
	for (size_t k = 0; k < b.n_spans; k++) {
		const struct span *q = &b.spans[k];
		const struct span *p = far_out && q->off < far_out->end ? far_out
				       : q->output && far && q->off < far->end ? far : NULL;
		if (p) {
			r = fail(&b, -EINVAL, q->tensor, "its arena span overlaps tensor %zu's, and one is an output",
				 p->tensor);
			goto out;
		}
		if (!far || q->end > far->end)
			far = q;
		if (q->output && (!far_out || q->end > far_out->end))
			far_out = q;
	}
	/* in the order of the list: a node run for its effect comes before the later nodes that read its bytes */
	for (size_t i = 0; i < sg->n_tensors; i++) {
		if (!(sg->tensors[i]->flags & (QG_WIRE_OUTPUT | QG_WIRE_EFFECT)))
			continue;
		if ((r = qg_graph_build(out->graph, out->tensors[i]))) {
			r = fail(&b, r, i, "cannot be added to the graph (%s)", strerror(-r));
			goto out;
		}
	}
out:
	free(b.spans);
	if (r)
		qg_wire_graph_free(out);
	return r;
}

void qg_wire_graph_free(struct qg_wire_graph *g)
{
	if (!g)
		return;
	qg_graph_free(g->graph);
	qg_ctx_free(g->ctx);
	free(g->tensors);
	memset(g, 0, sizeof *g);
}

size_t qg_wire_events(const struct qg_wire_event *src, size_t n, Qgraph__EventRef *ev, Qgraph__EventRef **ptrs)
{
	for (size_t i = 0; i < n; i++) {
		qgraph__event_ref__init(&ev[i]);
		ev[i].index = src[i].index;
		ev[i].value = src[i].value;
		ptrs[i] = &ev[i];
	}
	return n;
}

void qg_wire_record_free(struct qg_wire_record *r)
{
	if (!r)
		return;
	free(r->t);
	free(r->tp);
	free(r->spans);
	free(r->srcs);
	free(r->nes);
	free(r->nbs);
	free(r->fparams);
	free(r->iparams);
	memset(r, 0, sizeof *r);
}

/* The dimensions of T the wire declares: N_DIMS, or up to its last that is not 1. */
static int declared_dims(const struct qg_tensor *t, int n_dims)
{
	if (n_dims >= 1 && n_dims <= QG_MAX_DIMS)
		return n_dims;
	n_dims = QG_MAX_DIMS;
	while (n_dims > 1 && t->ne[n_dims - 1] == 1)
		n_dims--;
	return n_dims;
}

/* Wire tensor I from T and INFO, its sources' indices from H and SLOT_INDEX. */
static int encode_tensor(struct qg_wire_record *r, size_t i, const struct qg_tensor *t, const struct qg_wire_tensor *info,
			 const struct qg_hash *h, const size_t *slot_index)
{
	Qgraph__Tensor *wt = &r->t[i];
	int type = qg_wire_type_of(t->type), op = qg_wire_op_of(t->op);

	if (type < 0 || op < 0)
		return -EINVAL;
	qgraph__tensor__init(wt);
	r->tp[i] = wt;
	wt->type = (Qgraph__Type)type;
	wt->op = (Qgraph__Op)op;
	wt->n_ne = (size_t)declared_dims(t, info->n_dims);
	wt->ne = &r->nes[QG_MAX_DIMS * i];
	memcpy(wt->ne, t->ne, sizeof t->ne);
	wt->weights = info->weights;
	wt->flags = info->flags & (t->op == QG_OP_NONE ? QG_WIRE_INPUT : QG_WIRE_OUTPUT | QG_WIRE_EFFECT);
	/* the first ops take two sources at most; ggml's, up to QG_MAX_SRC, none missing before the last */
	const size_t max_src = t->op >= QG_OP_ROPE ? QG_MAX_SRC : 2;
	size_t n_src = 0;
	for (size_t j = 0; j < QG_MAX_SRC && t->op != QG_OP_NONE; j++)
		if (t->src[j])
			n_src = j + 1;
	if (n_src > max_src)
		return -EINVAL;
	for (size_t j = 0; j < n_src; j++) {
		size_t slot = t->src[j] ? qg_hash_find(h, t->src[j]) : QG_HASH_NONE;
		if (slot == QG_HASH_NONE || slot_index[slot] >= i)
			return -EINVAL;	/* a source the list does not hold before it (or a gap) */
		r->srcs[QG_MAX_SRC * i + j] = (uint32_t)slot_index[slot];
		wt->src = &r->srcs[QG_MAX_SRC * i];
		wt->n_src = j + 1;
	}
	if (t->op >= QG_OP_ROPE) {
		/* ggml's op_params, without the trailing zeros the daemon puts back */
		size_t n = QG_MAX_OP_PARAMS;
		while (n > 0 && t->op_params[n - 1] == 0)
			n--;
		memcpy(&r->iparams[QG_MAX_OP_PARAMS * i], t->op_params, n * sizeof *r->iparams);
		wt->n_iparams = n;
		wt->iparams = &r->iparams[QG_MAX_OP_PARAMS * i];
	}
	switch (t->op) {
	case QG_OP_SCALE:
	case QG_OP_RMS_NORM:
	case QG_OP_SOFT_MAX:
		r->fparams[i] = qg_op_param_f32(t, 0);
		wt->n_fparams = 1;
		wt->fparams = &r->fparams[i];
		break;
	case QG_OP_PERMUTE:
		memcpy(&r->iparams[QG_MAX_OP_PARAMS * i], t->op_params, QG_MAX_DIMS * sizeof *r->iparams);
		wt->n_iparams = QG_MAX_DIMS;
		wt->iparams = &r->iparams[QG_MAX_OP_PARAMS * i];
		break;
	case QG_OP_VIEW: {
		/* one stride a dimension, the row's first; the offset from its source's first byte */
		const struct qg_tensor *a = t->src[0];
		size_t base = a->view_src ? a->view_offs : 0;
		wt->n_nb = wt->n_ne;
		wt->nb = &r->nbs[QG_MAX_DIMS * i];
		for (size_t d = 0; d < wt->n_nb; d++)
			wt->nb[d] = t->nb[d];
		wt->view_offset = t->view_offs - base;
		break;
	}
	default:
		break;
	}
	if (info->offset >= 0) {
		size_t bytes = qg_tensor_nbytes(t);
		qgraph__span__init(&r->spans[i]);
		r->spans[i].offset = (uint64_t)info->offset;
		r->spans[i].bytes = bytes == SIZE_MAX ? 0 : bytes;
		wt->arena = &r->spans[i];
	}
	return 0;
}

int qg_wire_graph_encode(struct qg_tensor *const *t, const struct qg_wire_tensor *info, size_t n,
			 const struct qg_wire_event *wait, size_t n_wait, const struct qg_wire_event *record,
			 size_t n_record, struct qg_wire_record *out)
{
	struct qg_hash h = { 0 };
	size_t *slot_index = NULL;
	int r = -ENOMEM;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof *out);
	if (!t || !info || n == 0 || n_wait > QG_WIRE_MAX_EVENTS || n_record > QG_WIRE_MAX_EVENTS ||
	    (n_wait && !wait) || (n_record && !record) || n > SIZE_MAX / (QG_MAX_OP_PARAMS * sizeof(uint64_t)))
		return -EINVAL;
	out->t = calloc(n, sizeof *out->t);
	out->tp = calloc(n, sizeof *out->tp);
	out->spans = calloc(n, sizeof *out->spans);
	out->srcs = calloc(QG_MAX_SRC * n, sizeof *out->srcs);
	out->nes = calloc(QG_MAX_DIMS * n, sizeof *out->nes);
	out->nbs = calloc(QG_MAX_DIMS * n, sizeof *out->nbs);
	out->fparams = calloc(n, sizeof *out->fparams);
	out->iparams = calloc(QG_MAX_OP_PARAMS * n, sizeof *out->iparams);
	if (!out->t || !out->tp || !out->spans || !out->srcs || !out->nes || !out->nbs || !out->fparams ||
	    !out->iparams || qg_hash_init(&h, n) || !(slot_index = calloc(h.size, sizeof *slot_index)))
		goto out;
	for (size_t i = 0; i < n; i++) {
		int added = 0;
		size_t slot = t[i] ? qg_hash_insert(&h, t[i], &added) : QG_HASH_NONE;
		r = -EINVAL;
		if (slot == QG_HASH_NONE || !added)
			goto out;	/* no tensor, or one listed twice */
		slot_index[slot] = i;
		if ((r = encode_tensor(out, i, t[i], &info[i], &h, slot_index)))
			goto out;
	}
	qgraph__submit_graph__init(&out->sg);
	out->sg.n_tensors = n;
	out->sg.tensors = out->tp;
	out->sg.n_wait = qg_wire_events(wait, n_wait, out->ev, out->evp);
	out->sg.wait = out->evp;
	out->sg.n_record = qg_wire_events(record, n_record, out->ev + QG_WIRE_MAX_EVENTS, out->evp + QG_WIRE_MAX_EVENTS);
	out->sg.record = out->evp + QG_WIRE_MAX_EVENTS;
	r = 0;
out:
	free(slot_index);
	qg_hash_free(&h);
	if (r)
		qg_wire_record_free(out);
	return r;
}

void qg_wire_layout_pack(const struct qg_region_layout *l, Qgraph__RegionLayout *out)
{
	qgraph__region_layout__init(out);
	out->layout_version = l->layout_version;
	out->region_bytes = l->region_bytes;
	out->submit_offset = l->submit_offset;
	out->submit_bytes = l->submit_bytes;
	out->complete_offset = l->complete_offset;
	out->complete_bytes = l->complete_bytes;
	out->events_offset = l->events_offset;
	out->event_count = l->event_count;
	out->arena_offset = l->arena_offset;
	out->arena_bytes = l->arena_bytes;
}

void qg_wire_layout_unpack(const Qgraph__RegionLayout *rl, struct qg_region_layout *out)
{
	*out = (struct qg_region_layout){
		.layout_version = rl->layout_version, .region_bytes = rl->region_bytes,
		.submit_offset = rl->submit_offset, .submit_bytes = rl->submit_bytes,
		.complete_offset = rl->complete_offset, .complete_bytes = rl->complete_bytes,
		.events_offset = rl->events_offset, .event_count = rl->event_count,
		.arena_offset = rl->arena_offset, .arena_bytes = rl->arena_bytes,
	};
}
