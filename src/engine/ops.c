/*
 * ops.c - op builders, the shape checks that guard the compute functions,
 * and the facts the allocator and the backends need about each op.  The
 * computations themselves, and the checks that need data, are in ops-cpu.c
 * (libqgraph builds graphs with this file alone).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

float qg_op_param_f32(const struct qg_tensor *t, int i)
{
	float v;

	memcpy(&v, &t->op_params[i], sizeof v);
	return v;
}

void qg_op_set_param_f32(struct qg_tensor *t, int i, float v)
{
	memcpy(&t->op_params[i], &v, sizeof v);
}

/* True if every dimension of B divides A's. */
static bool can_repeat(const struct qg_tensor *b, const struct qg_tensor *a)
{
	for (int i = 0; i < QG_MAX_DIMS; i++)
		if (b->ne[i] < 1 || a->ne[i] % b->ne[i])
			return false;
	return true;
}

/*
 * T's shape and strides are sane: a known type, dimensions >= 1, a row that
 * suits a block type, a first stride that matches a block type's block (and
 * is at least the element for plain types), and a byte extent that does not
 * overflow.
 */
static bool tensor_sane(const struct qg_tensor *t)
{
	size_t n, step;

	if (!t || (unsigned)t->type > QG_TYPE_I64)
		return false;
	for (int i = 0; i < QG_MAX_DIMS; i++)
		if (t->ne[i] < 1 || t->ne[i] > INT32_MAX * (int64_t)64)
			return false;
	if (qg_type_row_bytes(t->type, t->ne[0]) < 0)
		return false;
	if (qg_type_elem_size(t->type)) {
		if (t->nb[0] < qg_type_elem_size(t->type) || t->nb[0] % qg_type_elem_size(t->type))
			return false;
		n = qg_type_elem_size(t->type);
	} else {
		int bv = qg_type_block_values(t->type);
		if ((int64_t)t->nb[0] != qg_type_row_bytes(t->type, bv))
			return false;
		n = (size_t)(t->ne[0] / bv) * t->nb[0];
	}
	for (int i = qg_type_elem_size(t->type) ? 0 : 1; i < QG_MAX_DIMS; i++) {
		if (__builtin_mul_overflow((size_t)(t->ne[i] - 1), t->nb[i], &step) ||
		    __builtin_add_overflow(n, step, &n))
			return false;
	}
	return n < (size_t)INT64_MAX;
}

/* X is F32 with packed elements along its rows and float-aligned row strides. */
static bool f32_rows(const struct qg_tensor *x)
{
	return x->type == QG_TYPE_F32 && x->nb[0] == 4 && x->nb[1] % 4 == 0 && x->nb[2] % 4 == 0 &&
	       x->nb[3] % 4 == 0;
}

static bool cpy_type(enum qg_type t)
{
	return t == QG_TYPE_F32 || t == QG_TYPE_F16 || t == QG_TYPE_Q8_0;
}

/*
 * A CPY of a Q4_0 matrix in any of its layouts into plain Q4_0 of the same
 * shape, of Q8_0 weights in their 4x4 layout into plain Q8_0, or of a Q4_K
 * or Q6_K matrix into its own type (their one layout):
 * how a client reads weights back in ggml's layout (every scale and code
 * carried over, see qg_repack).  Both are 2-D and contiguous.
 */
bool qg_op_cpy_is_unpack(const struct qg_tensor *t)
{
	const struct qg_tensor *a = t->src[0];

	if (t->op != QG_OP_CPY || !a || a->ne[2] != 1 || a->ne[3] != 1 || !qg_tensor_is_contiguous(a) ||
	    !qg_tensor_is_contiguous(t))
		return false;
	if (t->type == QG_TYPE_Q4_K || t->type == QG_TYPE_Q6_K)
		return a->type == t->type;
	if (t->type == QG_TYPE_Q4_0)	/* from any of its layouts */
		return qg_type_plain(a->type) == QG_TYPE_Q4_0;
	return t->type == QG_TYPE_Q8_0 && a->type == QG_TYPE_Q8_0_4X4;
}

/* X's elements are packed along its rows (NB[0] its element): ggml's "contiguous rows". */
static bool packed_rows(const struct qg_tensor *x)
{
	return x->nb[0] == qg_type_elem_size(x->type);
}

/* The op parameters from word N on are all 0: what an op does not read, it does not accept either. */
static bool params_zero_from(const struct qg_tensor *t, int n)
{
	for (int i = n; i < QG_MAX_OP_PARAMS; i++)
		if (t->op_params[i])
			return false;
	return true;
}

/* No source from N on: an op takes what it reads and nothing more. */
static bool no_src_from(const struct qg_tensor *t, int n)
{
	for (int i = n; i < QG_MAX_SRC; i++)
		if (t->src[i])
			return false;
	return true;
}

/*
 * ROPE(a, pos[, freq]) with ggml's op_params: [1] n_dims, [2] mode (0
 * normal, 2 NeoX), [4] n_ctx_orig, [5..10] freq_base, freq_scale,
 * ext_factor, attn_factor, beta_fast, beta_slow (floats), [15] n_offs;
 * [0], [3] and the sections [11..14] are 0.
 */
static int check_rope(const struct qg_tensor *t)
{
	const struct qg_tensor *a = t->src[0], *pos = t->src[1], *ff = t->src[2];
	const int32_t *p = t->op_params;
	const int n_dims = p[1], mode = p[2], n_offs = p[15];

	if (!a || !pos || !no_src_from(t, 3) || a->type != QG_TYPE_F32 || t->type != QG_TYPE_F32 ||
	    !qg_tensor_same_shape(t, a) || !packed_rows(a) || !packed_rows(t))
		return -EINVAL;
	if (pos->type != QG_TYPE_I32 || pos->ne[0] != a->ne[2] || pos->ne[1] != 1 || pos->ne[2] != 1 ||
	    pos->ne[3] != 1)
		return -EINVAL;
	if (ff && (ff->type != QG_TYPE_F32 || ff->ne[0] < n_dims / 2))
		return -EINVAL;
	if (mode != 0 && mode != 2)
		return -EINVAL;
	if (p[0] || p[3] || p[11] || p[12] || p[13] || p[14])
		return -EINVAL;
	if (n_dims < 2 || n_dims % 2 || n_offs < 0 || n_offs % 2 || n_dims > a->ne[0] - n_offs)
		return -EINVAL;
	for (int i = 5; i <= 10; i++) {
		float v;
		memcpy(&v, &p[i], sizeof v);
		if (!isfinite(v))
			return -EINVAL;
	}
	/* the frequencies: a base > 0 (its log divides), a scale > 0 (its log scales attention) */
	if (!(qg_op_param_f32(t, 5) > 0.0f) || !(qg_op_param_f32(t, 6) > 0.0f))
		return -EINVAL;
	return 0;
}

/*
 * GLU(a[, b]) with ggml's op_params: [0] the gate (0 ReGLU, 1 GeGLU, 2
 * SwiGLU, as enum ggml_glu_op), [1] swapped (0 or 1; read only with one
 * source, as ggml does).
 */
static int check_glu(const struct qg_tensor *t)
{
	const struct qg_tensor *a = t->src[0], *b = t->src[1];
	const int32_t *p = t->op_params;

	if (!a || !no_src_from(t, 2) || a->type != QG_TYPE_F32 || t->type != QG_TYPE_F32 || !packed_rows(a) ||
	    !packed_rows(t))
		return -EINVAL;
	if (p[0] < QG_GLU_REGLU || p[0] > QG_GLU_SWIGLU || (p[1] != 0 && p[1] != 1) || !params_zero_from(t, 2))
		return -EINVAL;
	if (b && (b->type != QG_TYPE_F32 || !packed_rows(b) || !qg_tensor_same_shape(a, b)))
		return -EINVAL;
	if (!b && a->ne[0] % 2)
		return -EINVAL;
	if (t->ne[0] != (b ? a->ne[0] : a->ne[0] / 2) || t->ne[1] != a->ne[1] || t->ne[2] != a->ne[2] ||
	    t->ne[3] != a->ne[3])
		return -EINVAL;
	return 0;
}

/*
 * SET_ROWS(rows, idx, dst): rows F32 or F16 [n0, n, n2, n3]; idx I32 or
 * I64 [n, i2, i3] with i2 dividing n2 and i3 dividing n3; dst F32 or F16
 * [n0, R, n2, n3].  The result is a view of dst.
 */
static int check_set_rows(const struct qg_tensor *t)
{
	const struct qg_tensor *a = t->src[0], *idx = t->src[1], *d = t->src[2];

	if (!a || !idx || !d || !no_src_from(t, 3) || !params_zero_from(t, 0))
		return -EINVAL;
	if ((a->type != QG_TYPE_F32 && a->type != QG_TYPE_F16) || (d->type != QG_TYPE_F32 && d->type != QG_TYPE_F16))
		return -EINVAL;
	if (idx->type != QG_TYPE_I32 && idx->type != QG_TYPE_I64)
		return -EINVAL;
	if (t->view_src != (d->view_src ? d->view_src : d) || !qg_tensor_same_layout(t, d) || t->view_offs != (d->view_src ? d->view_offs : 0))
		return -EINVAL;
	if (!packed_rows(a) || !packed_rows(d))
		return -EINVAL;
	if (a->ne[0] != d->ne[0] || a->ne[2] != d->ne[2] || a->ne[3] != d->ne[3])
		return -EINVAL;
	if (idx->ne[0] != a->ne[1] || a->ne[2] % idx->ne[1] || a->ne[3] % idx->ne[2] || idx->ne[3] != 1)
		return -EINVAL;
	return 0;
}

/*
 * FLASH_ATTN_EXT(q, k, v[, mask]) with ggml's op_params [0] scale, [1]
 * max_bias (0), [2] logit_softcap (0), [3] precision (0 or 10: the sums
 * are F32 either way).  q F32 [dk, n, h, b]; k F16 [dk, n_kv, hk, b]; v
 * F16 [dv, n_kv, hv, b], hk and hv dividing h; mask F16 [>= n_kv, >= n,
 * m2, m3] with m2 dividing h and m3 dividing b.  Result F32 [dv, h, n, b].
 */
static int check_flash_attn(const struct qg_tensor *t)
{
	const struct qg_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
	const int32_t *p = t->op_params;

	if (!q || !k || !v || !no_src_from(t, 4) || t->type != QG_TYPE_F32 || q->type != QG_TYPE_F32 ||
	    k->type != QG_TYPE_F16 || v->type != QG_TYPE_F16)
		return -EINVAL;
	if (!packed_rows(q) || !packed_rows(k) || !packed_rows(v) || !qg_tensor_is_contiguous(t))
		return -EINVAL;
	if (!isfinite(qg_op_param_f32(t, 0)) || p[1] || p[2] || (p[3] != 0 && p[3] != 10) || !params_zero_from(t, 4))
		return -EINVAL;
	if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || q->ne[2] % k->ne[2] || q->ne[2] % v->ne[2] ||
	    k->ne[3] != q->ne[3] || v->ne[3] != q->ne[3])
		return -EINVAL;
	if (m && (m->type != QG_TYPE_F16 || !packed_rows(m) || m->ne[0] < k->ne[1] || m->ne[1] < q->ne[1] ||
		  q->ne[2] % m->ne[2] || q->ne[3] % m->ne[3]))
		return -EINVAL;
	if (t->ne[0] != v->ne[0] || t->ne[1] != q->ne[2] || t->ne[2] != q->ne[1] || t->ne[3] != q->ne[3])
		return -EINVAL;
	return 0;
}

/* The checks on shapes and types, without data: 0 or -EINVAL. */
static int check_shapes(const struct qg_tensor *t)
{
	const struct qg_tensor *a = t->src[0], *b = t->src[1];

	if (!tensor_sane(t))
		return -EINVAL;
	for (int i = 0; i < QG_MAX_SRC; i++)
		if (t->src[i] && !tensor_sane(t->src[i]))
			return -EINVAL;
	switch (t->op) {
	case QG_OP_NONE:
		return 0;
	case QG_OP_MUL_MAT:
		if (!a || !b || !qg_type_is_weight(a->type) || !f32_rows(b) || !f32_rows(t))
			return -EINVAL;
		if (a->ne[0] != b->ne[0] || b->ne[2] % a->ne[2] || b->ne[3] % a->ne[3])
			return -EINVAL;
		if (a->ne[1] > 1 && (int64_t)a->nb[1] != qg_type_row_bytes(a->type, a->ne[0]))
			return -EINVAL;
		if (qg_type_is_interleaved(a->type) && a->ne[1] % qg_type_row_group(a->type))
			return -EINVAL;
		if (t->ne[0] != a->ne[1] || t->ne[1] != b->ne[1] || t->ne[2] != b->ne[2] || t->ne[3] != b->ne[3])
			return -EINVAL;
		return 0;
	case QG_OP_ADD:
	case QG_OP_MUL:
		if (!a || !b || a->type != QG_TYPE_F32 || b->type != QG_TYPE_F32 || t->type != QG_TYPE_F32)
			return -EINVAL;
		return qg_tensor_same_shape(t, a) && can_repeat(b, a) ? 0 : -EINVAL;
	case QG_OP_SCALE:
	case QG_OP_SILU:
	case QG_OP_GELU:
	case QG_OP_RMS_NORM:
		if (!a || a->type != QG_TYPE_F32 || t->type != QG_TYPE_F32 || !qg_tensor_same_shape(t, a))
			return -EINVAL;
		if (t->op == QG_OP_RMS_NORM && !(qg_op_param_f32(t, 0) >= 0.0f))
			return -EINVAL;
		return 0;
	case QG_OP_SOFT_MAX:
		if (!a || a->type != QG_TYPE_F32 || t->type != QG_TYPE_F32 || !qg_tensor_same_shape(t, a))
			return -EINVAL;
		if (b && (b->type != QG_TYPE_F32 || b->ne[0] != a->ne[0] || !can_repeat(b, a)))
			return -EINVAL;
		return 0;
	case QG_OP_CPY:
		if (a && qg_tensor_same_shape(t, a) && qg_op_cpy_is_unpack(t))
			return a->ne[1] % qg_type_row_group(a->type) ? -EINVAL : 0;
		if (!a || !cpy_type(a->type) || !cpy_type(t->type) || !qg_tensor_same_shape(t, a))
			return -EINVAL;
		/* block rows are read and written whole */
		if ((a->type == QG_TYPE_Q8_0 || t->type == QG_TYPE_Q8_0) && t->ne[0] % QG_QK)
			return -EINVAL;
		return 0;
	case QG_OP_GET_ROWS:
		if (!a || !b || b->type != QG_TYPE_I32 || t->type != QG_TYPE_F32)
			return -EINVAL;
		if (!qg_type_is_weight(a->type))
			return -EINVAL;
		/* an interleaved layout's rows are found in their groups: its slices packed matrices */
		if (qg_type_is_interleaved(a->type) &&
		    (a->ne[1] % qg_type_row_group(a->type) || a->nb[1] != (size_t)qg_type_row_bytes(a->type, a->ne[0])))
			return -EINVAL;
		if (b->ne[1] != a->ne[2] || b->ne[2] != a->ne[3] || b->ne[3] != 1)
			return -EINVAL;
		if (t->ne[0] != a->ne[0] || t->ne[1] != b->ne[0] || t->ne[2] != a->ne[2] || t->ne[3] != a->ne[3])
			return -EINVAL;
		return 0;
	case QG_OP_RESHAPE:
	case QG_OP_VIEW:
	case QG_OP_PERMUTE:
	case QG_OP_TRANSPOSE:
		if (!t->view_src || t->view_src->view_src || t->type != t->view_src->type)
			return -EINVAL;
		if (t->view_offs + qg_tensor_nbytes(t) < t->view_offs ||
		    t->view_offs + qg_tensor_nbytes(t) > qg_tensor_nbytes(t->view_src))
			return -EINVAL;
		return 0;
	case QG_OP_ROPE:
		return check_rope(t);
	case QG_OP_GLU:
		return check_glu(t);
	case QG_OP_SET_ROWS:
		return check_set_rows(t);
	case QG_OP_FLASH_ATTN_EXT:
		return check_flash_attn(t);
	case QG_OP_NORM:	/* [0] eps >= 0, as RMS_NORM's */
		if (!a || !no_src_from(t, 1) || a->type != QG_TYPE_F32 || t->type != QG_TYPE_F32 ||
		    !qg_tensor_same_shape(t, a) || !(qg_op_param_f32(t, 0) >= 0.0f) || !params_zero_from(t, 1))
			return -EINVAL;
		return 0;
	default:
		return -EINVAL;
	}
}

int qg_op_check(const struct qg_tensor *t)
{
	return t ? check_shapes(t) : -EINVAL;
}

bool qg_op_can_inplace(enum qg_op op)
{
	switch (op) {
	case QG_OP_ADD:
	case QG_OP_MUL:
	case QG_OP_SCALE:
	case QG_OP_SILU:
	case QG_OP_GELU:
	case QG_OP_RMS_NORM:
	case QG_OP_SOFT_MAX:
	case QG_OP_ROPE:	/* each pair is read before it is written */
	case QG_OP_NORM:	/* the row is read whole before it is written */
		return true;
	default:
		return false;
	}
}

uint64_t qg_op_work(const struct qg_tensor *t)
{
	uint64_t n = (uint64_t)qg_tensor_nelements(t), k = t->op == QG_OP_MUL_MAT ? (uint64_t)t->src[0]->ne[0] : 1;

	/* attention: each result row reads every key and value once, a dot product and a sum each */
	if (t->op == QG_OP_FLASH_ATTN_EXT) {
		n = (uint64_t)qg_tensor_nrows(t);
		k = (uint64_t)t->src[1]->ne[1] * (uint64_t)(t->src[0]->ne[0] + t->src[2]->ne[0]);
	}

	return k && n > UINT64_MAX / k ? UINT64_MAX : n * k;
}

int qg_op_n_phases(const struct qg_tensor *t)
{
	if (t->op == QG_OP_NONE || qg_op_is_view(t->op))
		return 0;
	return t->op == QG_OP_MUL_MAT ? 2 : 1;
}

int qg_op_max_threads(const struct qg_tensor *t)
{
	int64_t n;

	if (t->op == QG_OP_MUL_MAT) {
		/* the larger of the two splits: X's rows and W's row groups */
		int64_t groups = t->src[0]->ne[1] / qg_type_row_group(t->src[0]->type);
		n = t->src[1]->ne[1] > groups ? t->src[1]->ne[1] : groups;
	} else if (qg_op_n_phases(t) == 0) {
		n = 1;
	} else if (t->op == QG_OP_SET_ROWS) {
		n = t->src[0]->ne[1];	/* each thread takes source rows of every slice */
	} else {
		n = qg_tensor_nrows(t);
	}
	return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

void qg_op_split(int64_t nrows, int ith, int nth, int64_t *r0, int64_t *r1)
{
	*r0 = nrows * ith / nth;
	*r1 = nrows * (ith + 1) / nth;
}

/* --- builders ----------------------------------------------------------- */

/* Room for shape_text's words: a type name and four dimensions. */
#define SHAPE_TEXT 96

/* T's type and shape as "f32 [4096 32]" (innermost first, trailing 1s past the second left out) into BUF. */
static const char *shape_text(char buf[SHAPE_TEXT], const struct qg_tensor *t)
{
	int n = QG_MAX_DIMS, at;

	while (n > 2 && t->ne[n - 1] == 1)
		n--;
	at = snprintf(buf, SHAPE_TEXT, "%s [", qg_type_name_any(t->type));
	for (int d = 0; d < n && at > 0 && at < SHAPE_TEXT; d++)
		at += snprintf(buf + at, (size_t)(SHAPE_TEXT - at), d ? " %lld" : "%lld", (long long)t->ne[d]);
	if (at > 0 && at < SHAPE_TEXT)
		snprintf(buf + at, (size_t)(SHAPE_TEXT - at), "]");
	return buf;
}

/* T if it passes the shape checks, else NULL and CTX's error naming WHAT and the shapes of T's sources. */
static struct qg_tensor *checked(struct qg_ctx *ctx, struct qg_tensor *t, const char *what)
{
	char a[SHAPE_TEXT], b[SHAPE_TEXT];

	if (!t)
		return NULL;
	if (check_shapes(t) < 0) {
		const bool general = t->op >= QG_OP_ROPE;
		t->op = QG_OP_NONE;	/* a dead struct: never reached from a graph */
		return qg_ctx_fail(ctx, -EINVAL, "%s: sources of the wrong type or shape%s: %s%s%s", what,
				   general ? ", or op_params out of range" : "",
				   t->src[0] ? shape_text(a, t->src[0]) : "none", t->src[1] ? " and " : "",
				   t->src[1] ? shape_text(b, t->src[1]) : "");
	}
	t->flags |= QG_TENSOR_CHECKED;	/* the one shape check of a node on its way to a plan */
	return t;
}

struct qg_tensor *qg_op_mul_mat(struct qg_ctx *ctx, struct qg_tensor *w, struct qg_tensor *x)
{
	if (!ctx || !w || !x)
		return NULL;
	if (w->ne[0] != x->ne[0] || x->ne[2] % w->ne[2] || x->ne[3] % w->ne[3]) {
		char ws[SHAPE_TEXT], xs[SHAPE_TEXT];
		return qg_ctx_fail(ctx, -EINVAL,
				   "mul_mat: w %s and x %s do not match (rows as long, x's dims 2 and 3 multiples of w's)",
				   shape_text(ws, w), shape_text(xs, x));
	}
	const int64_t ne[QG_MAX_DIMS] = { w->ne[1], x->ne[1], x->ne[2], x->ne[3] };
	return checked(ctx, qg_tensor_new_op(ctx, QG_OP_MUL_MAT, QG_TYPE_F32, ne, w, x), "mul_mat");
}

/* A binary elementwise op on A and B, result shaped as A. */
static struct qg_tensor *binary(struct qg_ctx *ctx, enum qg_op op, struct qg_tensor *a, struct qg_tensor *b)
{
	if (!ctx || !a || !b)
		return NULL;
	return checked(ctx, qg_tensor_new_op(ctx, op, QG_TYPE_F32, a->ne, a, b), qg_op_name(op));
}

struct qg_tensor *qg_op_add(struct qg_ctx *ctx, struct qg_tensor *a, struct qg_tensor *b)
{
	return binary(ctx, QG_OP_ADD, a, b);
}

struct qg_tensor *qg_op_mul(struct qg_ctx *ctx, struct qg_tensor *a, struct qg_tensor *b)
{
	return binary(ctx, QG_OP_MUL, a, b);
}

/* A unary op on A with float parameter P. */
static struct qg_tensor *unary(struct qg_ctx *ctx, enum qg_op op, struct qg_tensor *a, float p)
{
	struct qg_tensor *t;

	if (!ctx || !a)
		return NULL;
	t = qg_tensor_new_op(ctx, op, QG_TYPE_F32, a->ne, a, NULL);
	if (t)
		qg_op_set_param_f32(t, 0, p);
	return checked(ctx, t, qg_op_name(op));
}

struct qg_tensor *qg_op_scale(struct qg_ctx *ctx, struct qg_tensor *a, float s)
{
	return unary(ctx, QG_OP_SCALE, a, s);
}

struct qg_tensor *qg_op_silu(struct qg_ctx *ctx, struct qg_tensor *a)
{
	return unary(ctx, QG_OP_SILU, a, 0.0f);
}

struct qg_tensor *qg_op_gelu(struct qg_ctx *ctx, struct qg_tensor *a)
{
	return unary(ctx, QG_OP_GELU, a, 0.0f);
}

struct qg_tensor *qg_op_rms_norm(struct qg_ctx *ctx, struct qg_tensor *a, float eps)
{
	return unary(ctx, QG_OP_RMS_NORM, a, eps);
}

struct qg_tensor *qg_op_soft_max(struct qg_ctx *ctx, struct qg_tensor *a, struct qg_tensor *mask, float scale)
{
	struct qg_tensor *t;

	if (!ctx || !a)
		return NULL;
	t = qg_tensor_new_op(ctx, QG_OP_SOFT_MAX, QG_TYPE_F32, a->ne, a, mask);
	if (t)
		qg_op_set_param_f32(t, 0, scale);
	return checked(ctx, t, "soft_max");
}

struct qg_tensor *qg_op_cpy(struct qg_ctx *ctx, struct qg_tensor *a, struct qg_tensor *b)
{
	struct qg_tensor *t;

	if (!ctx || !a || !b)
		return NULL;
	if (!qg_tensor_same_shape(a, b)) {
		char as[SHAPE_TEXT], bs[SHAPE_TEXT];
		return qg_ctx_fail(ctx, -EINVAL, "cpy: shapes differ: %s into %s", shape_text(as, a), shape_text(bs, b));
	}
	if (qg_tensor_is_weights(b))
		return qg_ctx_fail(ctx, -EROFS, "cpy: the destination is weights (weights are read-only to graphs)");
	/* the result is a view of B carrying the op: B's bytes are written */
	t = qg_tensor_view(ctx, b, QG_MAX_DIMS, b->ne, b->nb + 1, 0);
	if (!t)
		return NULL;
	t->op = QG_OP_CPY;
	t->src[0] = a;
	t->src[1] = b;
	return checked(ctx, t, "cpy");
}

struct qg_tensor *qg_op_cast(struct qg_ctx *ctx, struct qg_tensor *a, enum qg_type type)
{
	if (!ctx || !a)
		return NULL;
	return checked(ctx, qg_tensor_new_op(ctx, QG_OP_CPY, type, a->ne, a, NULL), "cast");
}

struct qg_tensor *qg_op_get_rows(struct qg_ctx *ctx, struct qg_tensor *t, struct qg_tensor *idx)
{
	if (!ctx || !t || !idx)
		return NULL;
	const int64_t ne[QG_MAX_DIMS] = { t->ne[0], idx->ne[0], t->ne[2], t->ne[3] };
	return checked(ctx, qg_tensor_new_op(ctx, QG_OP_GET_ROWS, QG_TYPE_F32, ne, t, idx), "get_rows");
}

/* NULL, and CTX's error saying why OP refused its sources or parameters. */
static struct qg_tensor *refuse_ex(struct qg_ctx *ctx, enum qg_op op, const char *why)
{
	return qg_ctx_fail(ctx, -EINVAL, "%s: %s", qg_op_name(op), why);
}

/*
 * A new node for one of ggml's ops: its result's type and shape from the
 * sources and parameters, then the one shape check (checked()).
 */
static struct qg_tensor *new_ggml_op(struct qg_ctx *ctx, enum qg_op op, struct qg_tensor *const *src, int n_src,
				     const int32_t *params, int n_params)
{
	struct qg_tensor *a = src[0], *t;
	int64_t ne[QG_MAX_DIMS];

	memcpy(ne, a->ne, sizeof ne);
	switch (op) {
	case QG_OP_ROPE:
	case QG_OP_NORM:
		t = qg_tensor_new_op(ctx, op, QG_TYPE_F32, ne, a, n_src > 1 ? src[1] : NULL);
		break;
	case QG_OP_GLU:
		if (n_src == 1)
			ne[0] = a->ne[0] / 2;
		t = qg_tensor_new_op(ctx, op, QG_TYPE_F32, ne, a, n_src > 1 ? src[1] : NULL);
		break;
	case QG_OP_SET_ROWS: {
		struct qg_tensor *d = n_src > 2 ? src[2] : NULL;
		if (!d)
			return refuse_ex(ctx, op, "needs the rows, their indices and the destination");
		if (qg_tensor_is_weights(d))
			return qg_ctx_fail(ctx, -EROFS,
					   "set_rows: the destination is weights (weights are read-only to graphs)");
		/* the result is a view of the destination carrying the op: its bytes are written */
		t = qg_tensor_view(ctx, d, QG_MAX_DIMS, d->ne, d->nb + 1, 0);
		if (!t)
			return NULL;
		t->op = op;
		t->src[0] = a;
		t->src[1] = n_src > 1 ? src[1] : NULL;
		break;
	}
	case QG_OP_FLASH_ATTN_EXT: {
		struct qg_tensor *v = n_src > 2 ? src[2] : NULL;
		if (!v)
			return refuse_ex(ctx, op, "needs q, k and v");
		const int64_t fne[QG_MAX_DIMS] = { v->ne[0], a->ne[2], a->ne[1], a->ne[3] };
		t = qg_tensor_new_op(ctx, op, QG_TYPE_F32, fne, a, n_src > 1 ? src[1] : NULL);
		break;
	}
	default:
		return refuse_ex(ctx, op, "not an op of the general form");
	}
	if (!t)
		return NULL;
	for (int i = 2; i < n_src; i++)
		t->src[i] = src[i];
	if (n_params)	/* PARAMS may be NULL when there are none */
		memcpy(t->op_params, params, (size_t)n_params * sizeof *params);
	return checked(ctx, t, qg_op_name(op));
}

struct qg_tensor *qg_op_ex(struct qg_ctx *ctx, enum qg_op op, struct qg_tensor *const *src, int n_src,
			   const int32_t *params, int n_params)
{
	float f0 = 0.0f;

	if (!ctx)
		return NULL;
	if (n_src < 1 || n_src > QG_MAX_SRC || !src || n_params < 0 || n_params > QG_MAX_OP_PARAMS ||
	    (n_params && !params))
		return qg_ctx_fail(ctx, -EINVAL, "%s: %d sources and %d parameters (1 to %d, 0 to %d)",
				   qg_op_name(op), n_src, n_params, QG_MAX_SRC, QG_MAX_OP_PARAMS);
	for (int i = 0; i < n_src; i++)
		if (!src[i])
			return NULL;	/* a NULL source makes a NULL result */
	if (n_params)
		memcpy(&f0, &params[0], sizeof f0);
	/* the ops of the first form read at most their first parameter, as a float: the rest must be 0 */
	for (int i = 1; i < n_params && op < QG_OP_ROPE; i++)
		if (params[i])
			return refuse_ex(ctx, op, "a parameter it does not read is not 0");
	switch (op) {
	case QG_OP_MUL_MAT:
	case QG_OP_ADD:
	case QG_OP_MUL:
	case QG_OP_GET_ROWS:
	case QG_OP_CPY:
		if (n_src != 2 || n_params > 0)
			return refuse_ex(ctx, op, "takes two sources and no parameter");
		return op == QG_OP_MUL_MAT ? qg_op_mul_mat(ctx, src[0], src[1])
		       : op == QG_OP_ADD   ? qg_op_add(ctx, src[0], src[1])
		       : op == QG_OP_MUL   ? qg_op_mul(ctx, src[0], src[1])
		       : op == QG_OP_CPY   ? qg_op_cpy(ctx, src[0], src[1])
					   : qg_op_get_rows(ctx, src[0], src[1]);
	case QG_OP_SILU:
	case QG_OP_GELU:
		if (n_src != 1 || n_params > 0)
			return refuse_ex(ctx, op, "takes one source and no parameter");
		return op == QG_OP_SILU ? qg_op_silu(ctx, src[0]) : qg_op_gelu(ctx, src[0]);
	case QG_OP_SCALE:
	case QG_OP_RMS_NORM:
		if (n_src != 1)
			return refuse_ex(ctx, op, "takes one source");
		return op == QG_OP_SCALE ? qg_op_scale(ctx, src[0], n_params ? f0 : 1.0f)
					 : qg_op_rms_norm(ctx, src[0], f0);
	case QG_OP_SOFT_MAX:
		if (n_src > 2)
			return refuse_ex(ctx, op, "takes one source and a mask");
		return qg_op_soft_max(ctx, src[0], n_src > 1 ? src[1] : NULL, n_params ? f0 : 1.0f);
	case QG_OP_ROPE:
	case QG_OP_GLU:
	case QG_OP_SET_ROWS:
	case QG_OP_FLASH_ATTN_EXT:
	case QG_OP_NORM:
		return new_ggml_op(ctx, op, src, n_src, params, n_params);
	default:
		return refuse_ex(ctx, op, "not an op of the general form (views have builders of their own)");
	}
}
