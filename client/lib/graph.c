/*
 * graph.c - libqgraph's graph builder and submission (see qgraph.h,
 * section 3).  A graph is built here with the engine's tensors and ops, so
 * its shapes are worked out and checked by the rules the daemon applies,
 * and sent as one SubmitGraph record made by src/wire's encoder; the
 * daemon checks it all again.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "ops.h"
#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "session-impl.h"
#include "wire.h"

/*
 * A graph's tensors are the engine's (src/engine: the shapes, strides and
 * checks of every op are the ones the daemon applies), held in contexts
 * that are added as the graph grows; what the wire says of each beyond
 * that (its dimensions, weights handle, arena place, flags) is beside it.
 */
struct qgraph_graph {
	struct qg_ctx **ctx;
	size_t n_ctx, cap_ctx;
	struct qg_tensor **t;
	struct qg_wire_tensor *info;
	size_t n, cap;
	struct qg_wire_event wait[QG_WIRE_MAX_EVENTS], record[QG_WIRE_MAX_EVENTS];
	size_t n_wait, n_record;
	int err;		/* the first builder error */
	size_t err_at;		/* the tensor being built when it came */
	char why[192];		/* and what the engine said of it ("" if nothing) */
};

QGRAPH_API struct qgraph_graph *qgraph_graph_new(void)
{
	return calloc(1, sizeof(struct qgraph_graph));
}

QGRAPH_API void qgraph_graph_free(struct qgraph_graph *g)
{
	if (g) {
		for (size_t i = 0; i < g->n_ctx; i++)
			qg_ctx_free(g->ctx[i]);
		free(g->ctx);
		free(g->t);
		free(g->info);
		free(g);
	}
}

static int graph_fail(struct qgraph_graph *g, int err)
{
	if (g && !g->err) {
		g->err = err;
		g->err_at = g->n;
	}
	return err;
}

/* As graph_fail, when CTX refused a tensor: the engine's words (the shapes) kept for the session error. */
static int graph_refused(struct qgraph_graph *g, struct qg_ctx *ctx)
{
	if (!g->err)
		snprintf(g->why, sizeof g->why, "%s", qg_ctx_error_text(ctx));
	return graph_fail(g, qg_ctx_error(ctx) == -ENOMEM ? -ENOMEM : -EINVAL);
}

/*
 * A context with room for one more tensor: the last, or a new one twice
 * its size (tensors point at each other, so a context never moves).  NULL
 * (and the graph's error) when there is no memory.
 */
static struct qg_ctx *room(struct qgraph_graph *g)
{
	struct qg_ctx *last = g->n_ctx ? g->ctx[g->n_ctx - 1] : NULL;

	if (last && qg_ctx_used(last) < qg_ctx_capacity(last) && !qg_ctx_error(last))
		return last;
	size_t cap = last ? 2 * qg_ctx_capacity(last) : 16;
	void *p = qg_grow(g->ctx, &g->cap_ctx, g->n_ctx, sizeof *g->ctx, 4);
	struct qg_ctx *ctx = p && cap <= 4096 ? qg_ctx_new(cap) : p ? qg_ctx_new(4096) : NULL;
	if (p)
		g->ctx = p;
	if (!ctx) {
		graph_fail(g, -ENOMEM);
		return NULL;
	}
	g->ctx[g->n_ctx++] = ctx;
	return ctx;
}

/*
 * Add T (just made in CTX; NULL when the engine refused it) with INFO: its
 * index, or -EINVAL (the engine's rules refuse the shape) / -ENOMEM.  A
 * context that refused a tensor keeps that error and takes no more.
 */
static int add(struct qgraph_graph *g, struct qg_ctx *ctx, struct qg_tensor *t, struct qg_wire_tensor info)
{
	if (!t)
		return graph_refused(g, ctx);
	size_t cap = g->cap;
	void *p = qg_grow(g->t, &cap, g->n, sizeof *g->t, 16);
	if (!p)
		return graph_fail(g, -ENOMEM);
	g->t = p;
	if (cap != g->cap) {
		void *q = realloc(g->info, cap * sizeof *g->info);
		if (!q) {
			g->t = realloc(g->t, g->cap * sizeof *g->t) ?: g->t;
			return graph_fail(g, -ENOMEM);
		}
		g->info = q;
		g->cap = cap;
	}
	g->t[g->n] = t;
	g->info[g->n] = info;
	return (int)g->n++;
}

/* Tensor I of G, or NULL (and the graph's error: I itself when it is an error) when there is none. */
static struct qg_tensor *tensor_at(struct qgraph_graph *g, int i)
{
	if (i < 0) {
		graph_fail(g, i);
		return NULL;
	}
	if ((size_t)i >= g->n) {
		graph_fail(g, -EINVAL);
		return NULL;
	}
	return g->t[i];
}

QGRAPH_API int64_t qgraph_graph_tensor_bytes(const struct qgraph_graph *g, int i)
{
	if (!g || i < 0 || (size_t)i >= g->n)
		return -EINVAL;
	const struct qg_tensor *t = g->t[i];
	int64_t n = qg_type_row_bytes(t->type, t->ne[0]);
	if (n < 0)
		return n;
	for (int d = 1; d < QG_MAX_DIMS; d++)
		if (__builtin_mul_overflow(n, t->ne[d], &n))
			return -EOVERFLOW;
	return n;
}

QGRAPH_API int qgraph_graph_input(struct qgraph_graph *g, enum qgraph_type type, int ndims, const int64_t *ne,
				  int64_t offset)
{
	if (!g)
		return -EINVAL;
	if (qg_wire_type_of_public(type) < 0)	/* the daemon's activation layouts are not inputs */
		return graph_fail(g, -EINVAL);
	if (ndims < 1 || ndims > 4 || !ne || offset < 0 || offset % 64)
		return graph_fail(g, -EINVAL);
	struct qg_ctx *ctx = room(g);
	if (!ctx)
		return -ENOMEM;
	struct qg_tensor *t = qg_tensor_new(ctx, (enum qg_type)qg_wire_engine_type_of_public(type), ndims, ne);
	if (t)
		t->flags |= QG_TENSOR_INPUT;
	return add(g, ctx, t, (struct qg_wire_tensor){ .n_dims = ndims, .offset = offset, .flags = QG_WIRE_INPUT });
}

QGRAPH_API int qgraph_graph_weights(struct qgraph_graph *g, uint64_t handle, enum qgraph_type type, int64_t rows,
				    int64_t cols)
{
	if (!g)
		return -EINVAL;
	if (!handle || rows < 1 || cols < 1 || qg_wire_type_of_public(type) < 0)
		return graph_fail(g, -EINVAL);
	struct qg_ctx *ctx = room(g);
	if (!ctx)
		return -ENOMEM;
	struct qg_tensor *t = qg_tensor_new_2d(ctx, (enum qg_type)qg_wire_engine_type_of_public(type), cols, rows);
	if (t)
		t->flags |= QG_TENSOR_WEIGHTS;	/* read-only to the graph, as the daemon's are */
	return add(g, ctx, t, (struct qg_wire_tensor){ .n_dims = 2, .weights = handle, .offset = -1 });
}

QGRAPH_API int qgraph_graph_op(struct qgraph_graph *g, enum qgraph_op op, int a, int b, float param)
{
	if (!g)
		return -EINVAL;
	struct qg_tensor *A = tensor_at(g, a), *B = b >= 0 ? tensor_at(g, b) : NULL;
	if (!A || (b >= 0 && !B))
		return g->err;
	int na = g->info[a].n_dims, nb = B ? g->info[b].n_dims : 0;
	struct qg_ctx *ctx = room(g);
	if (!ctx)
		return -ENOMEM;
	struct qg_tensor *t;
	int ndims = na;
	switch (op) {
	case QGRAPH_OP_MUL_MAT:
		t = B ? qg_op_mul_mat(ctx, A, B) : NULL;
		ndims = nb > 2 ? nb : 2;
		break;
	case QGRAPH_OP_ADD: t = B ? qg_op_add(ctx, A, B) : NULL; break;
	case QGRAPH_OP_MUL: t = B ? qg_op_mul(ctx, A, B) : NULL; break;
	case QGRAPH_OP_GET_ROWS:
		t = B ? qg_op_get_rows(ctx, A, B) : NULL;
		ndims = nb + 1 > 4 ? 4 : nb + 1;
		break;
	case QGRAPH_OP_CPY: t = B ? qg_op_cpy(ctx, A, B) : NULL; break;
	case QGRAPH_OP_SOFT_MAX: t = qg_op_soft_max(ctx, A, B, param); break;
	case QGRAPH_OP_SCALE: t = B ? NULL : qg_op_scale(ctx, A, param); break;
	case QGRAPH_OP_RMS_NORM: t = B ? NULL : qg_op_rms_norm(ctx, A, param); break;
	case QGRAPH_OP_SILU: t = B ? NULL : qg_op_silu(ctx, A); break;
	case QGRAPH_OP_GELU: t = B ? NULL : qg_op_gelu(ctx, A); break;
	default:
		return graph_fail(g, -EINVAL);	/* views have builders of their own */
	}
	if (!t)
		return graph_refused(g, ctx);
	return add(g, ctx, t, (struct qg_wire_tensor){ .n_dims = ndims, .offset = -1 });
}

/* The dimensions T declares on the wire: up to its last that is not 1, and at least MIN. */
static int dims_of(const struct qg_tensor *t, int min)
{
	int n = QG_MAX_DIMS;

	while (n > min && n > 1 && t->ne[n - 1] == 1)
		n--;
	return n;
}

QGRAPH_API int qgraph_graph_op_ex(struct qgraph_graph *g, enum qgraph_op op, int n_src, const int *src, int n_params,
				  const int32_t *params)
{
	struct qg_tensor *s[QG_MAX_SRC];

	if (!g)
		return -EINVAL;
	if (n_src < 1 || n_src > QG_MAX_SRC || !src || n_params < 0 || n_params > QG_MAX_OP_PARAMS ||
	    (n_params && !params))
		return graph_fail(g, -EINVAL);
	for (int i = 0; i < n_src; i++)
		if (!(s[i] = tensor_at(g, src[i])))
			return g->err;
	int wop = qg_wire_op_of_public(op), eop = wop < 0 ? -1 : qg_wire_op(wop);
	if (eop < 0 || qg_op_is_view((enum qg_op)eop))
		return graph_fail(g, -EINVAL);	/* views have builders of their own */
	struct qg_ctx *ctx = room(g);
	if (!ctx)
		return -ENOMEM;
	struct qg_tensor *t = qg_op_ex(ctx, (enum qg_op)eop, s, n_src, params, n_params);
	if (!t)
		return graph_refused(g, ctx);
	/* as many dimensions as its first source declares, or the result's own if it has more */
	int n = dims_of(t, g->info[src[0]].n_dims < 1 ? 1 : g->info[src[0]].n_dims);
	if (op == QGRAPH_OP_SET_ROWS)
		n = g->info[src[2]].n_dims;
	return add(g, ctx, t, (struct qg_wire_tensor){ .n_dims = n, .offset = -1 });
}

QGRAPH_API int qgraph_graph_weights_nd(struct qgraph_graph *g, uint64_t handle, enum qgraph_type type, int ndims,
				       const int64_t *ne)
{
	if (!g)
		return -EINVAL;
	if (!handle || !ne || ndims < 2 || ndims > 4 || qg_wire_type_of_public(type) < 0)
		return graph_fail(g, -EINVAL);
	for (int d = 0; d < ndims; d++)
		if (ne[d] < 1)
			return graph_fail(g, -EINVAL);
	struct qg_ctx *ctx = room(g);
	if (!ctx)
		return -ENOMEM;
	struct qg_tensor *t = qg_tensor_new(ctx, (enum qg_type)qg_wire_engine_type_of_public(type), ndims, ne);
	if (t)
		t->flags |= QG_TENSOR_WEIGHTS;
	return add(g, ctx, t, (struct qg_wire_tensor){ .n_dims = ndims, .weights = handle, .offset = -1 });
}

QGRAPH_API int qgraph_graph_cast(struct qgraph_graph *g, int a, enum qgraph_type type)
{
	if (!g)
		return -EINVAL;
	struct qg_tensor *A = tensor_at(g, a);
	if (!A)
		return g->err;
	int et = qg_wire_engine_type_of_public(type);
	if (et < 0 || qg_wire_type_of_public(type) < 0)
		return graph_fail(g, -EINVAL);
	struct qg_ctx *ctx = room(g);
	if (!ctx)
		return -ENOMEM;
	return add(g, ctx, qg_op_cast(ctx, A, (enum qg_type)et), (struct qg_wire_tensor){ .n_dims = g->info[a].n_dims, .offset = -1 });
}

/* Source A of a view: its tensor, or NULL and the graph's error (weights are not viewed). */
static struct qg_tensor *view_source(struct qgraph_graph *g, int a)
{
	struct qg_tensor *A = tensor_at(g, a);

	if (A && g->info[a].weights) {
		graph_fail(g, -EINVAL);
		return NULL;
	}
	return A;
}

QGRAPH_API int qgraph_graph_reshape(struct qgraph_graph *g, int a, int ndims, const int64_t *ne)
{
	if (!g)
		return -EINVAL;
	struct qg_tensor *A = view_source(g, a);
	if (!A)
		return g->err;
	if (ndims < 1 || ndims > 4 || !ne)
		return graph_fail(g, -EINVAL);
	struct qg_ctx *ctx = room(g);
	if (!ctx)
		return -ENOMEM;
	return add(g, ctx, qg_tensor_reshape(ctx, A, ndims, ne), (struct qg_wire_tensor){ .n_dims = ndims, .offset = -1 });
}

QGRAPH_API int qgraph_graph_permute(struct qgraph_graph *g, int a, const int axes[4])
{
	if (!g)
		return -EINVAL;
	struct qg_tensor *A = view_source(g, a);
	if (!A)
		return g->err;
	if (!axes)
		return graph_fail(g, -EINVAL);
	struct qg_ctx *ctx = room(g);
	if (!ctx)
		return -ENOMEM;
	return add(g, ctx, qg_tensor_permute(ctx, A, axes[0], axes[1], axes[2], axes[3]),
		   (struct qg_wire_tensor){ .n_dims = 4, .offset = -1 });
}

QGRAPH_API int qgraph_graph_transpose(struct qgraph_graph *g, int a)
{
	if (!g)
		return -EINVAL;
	struct qg_tensor *A = view_source(g, a);
	if (!A)
		return g->err;
	struct qg_ctx *ctx = room(g);
	if (!ctx)
		return -ENOMEM;
	return add(g, ctx, qg_tensor_transpose(ctx, A), (struct qg_wire_tensor){ .n_dims = 4, .offset = -1 });
}

QGRAPH_API int qgraph_graph_view(struct qgraph_graph *g, int a, int ndims, const int64_t *ne, const uint64_t *nb,
				 uint64_t offset)
{
	size_t strides[QG_MAX_DIMS] = { 0 };

	if (!g)
		return -EINVAL;
	struct qg_tensor *A = view_source(g, a);
	if (!A)
		return g->err;
	if (ndims < 1 || ndims > 4 || !ne || (ndims > 1 && !nb) || offset > SIZE_MAX)
		return graph_fail(g, -EINVAL);
	for (int d = 1; d < ndims; d++) {
		if (nb[d - 1] > SIZE_MAX)
			return graph_fail(g, -EINVAL);
		strides[d - 1] = (size_t)nb[d - 1];
	}
	struct qg_ctx *ctx = room(g);
	if (!ctx)
		return -ENOMEM;
	return add(g, ctx, qg_tensor_view(ctx, A, ndims, ne, strides, (size_t)offset),
		   (struct qg_wire_tensor){ .n_dims = ndims, .offset = -1 });
}

QGRAPH_API int qgraph_graph_output(struct qgraph_graph *g, int i, int64_t offset)
{
	if (!g)
		return -EINVAL;
	if (i < 0)
		return graph_fail(g, i);
	/* views, and ops whose result is the bytes of a source they write (CPY into a tensor, SET_ROWS), are no outputs */
	if ((size_t)i >= g->n || g->t[i]->op == QG_OP_NONE || g->t[i]->view_src || offset < 0 || offset % 64 ||
	    (g->info[i].flags & QG_WIRE_EFFECT))
		return graph_fail(g, -EINVAL);
	g->info[i].offset = offset;
	g->info[i].flags |= QG_WIRE_OUTPUT;
	g->t[i]->flags |= QG_TENSOR_OUTPUT;
	return i;
}

QGRAPH_API int qgraph_graph_effect(struct qgraph_graph *g, int i)
{
	if (!g)
		return -EINVAL;
	if (i < 0)
		return graph_fail(g, i);
	if ((size_t)i >= g->n || g->t[i]->op == QG_OP_NONE || qg_op_is_view(g->t[i]->op) || !g->t[i]->view_src)
		return graph_fail(g, -EINVAL);
	g->info[i].flags |= QG_WIRE_EFFECT;
	return i;
}

static int add_event(struct qgraph_graph *g, struct qg_wire_event *list, size_t *n, unsigned event, uint32_t value)
{
	if (!g)
		return -EINVAL;
	if (*n >= QG_WIRE_MAX_EVENTS)
		return graph_fail(g, -E2BIG);
	list[(*n)++] = (struct qg_wire_event){ event, value };
	return 0;
}

QGRAPH_API int qgraph_graph_wait(struct qgraph_graph *g, unsigned event, uint32_t value)
{
	return add_event(g, g ? g->wait : NULL, g ? &g->n_wait : NULL, event, value);
}

QGRAPH_API int qgraph_graph_record(struct qgraph_graph *g, unsigned event, uint32_t value)
{
	return add_event(g, g ? g->record : NULL, g ? &g->n_record : NULL, event, value);
}

/* The wire form of G, by src/wire's encoder: 0 and *W (free it with qg_wire_record_free), or -errno. */
static int wire_make(const struct qgraph_graph *g, int flags, struct qg_wire_record *w)
{
	memset(w, 0, sizeof *w);
	if (!g)
		return -EINVAL;
	if (g->err)
		return g->err;
	if (g->n == 0)
		return -EINVAL;
	int r = qg_wire_graph_encode(g->t, g->info, g->n, g->wait, g->n_wait, g->record, g->n_record, w);
	if (r == 0)
		w->sg.keep = (flags & QGRAPH_SUBMIT_KEEP) != 0;
	return r;
}

static int submit_wire(struct qgraph_session *s, Qgraph__SubmitGraph *sg, int flags, uint64_t *id)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;

	req.body_case = QGRAPH__REQUEST__BODY_SUBMIT;
	req.submit = sg;
	return qg_client_send_request(s, &req, (flags & QGRAPH_SUBMIT_BLOCK) != 0, id);
}

QGRAPH_API int qgraph_submit(struct qgraph_session *s, struct qgraph_graph *g, int flags, uint64_t *id)
{
	struct qg_wire_record w;

	if (!s)
		return -EINVAL;
	if (!g || !id)
		return qg_client_fail(s, -EINVAL, "submit: %s is NULL", !g ? "the graph" : "the id's place");
	int r = wire_make(g, flags, &w);
	if (r == 0)
		r = submit_wire(s, &w.sg, flags, id);
	else if (g->err)	/* nothing was sent: say which builder call failed, and why where it knows */
		qg_client_fail(s, r, "the graph was not built: tensor %zu: %s", g->err_at,
			       g->why[0] ? g->why : strerror(-r));
	else
		qg_client_fail(s, r, "the graph cannot be sent: %s", strerror(-r));
	qg_wire_record_free(&w);
	return r;
}

QGRAPH_API ssize_t qgraph_graph_encode(const struct qgraph_graph *g, void *buf, size_t len)
{
	struct qg_wire_record w;
	int r = wire_make(g, 0, &w);

	if (r)
		return r;
	size_t need = qgraph__submit_graph__get_packed_size(&w.sg);
	if (need > (size_t)SSIZE_MAX) {
		qg_wire_record_free(&w);
		return -EOVERFLOW;
	}
	if (buf && len >= need)
		qgraph__submit_graph__pack(&w.sg, buf);
	qg_wire_record_free(&w);
	return (ssize_t)need;
}

QGRAPH_API int qgraph_submit_encoded(struct qgraph_session *s, const void *buf, size_t len, int flags,
				     uint64_t *id)
{
	if (!s || !buf || !id || len == 0 || len > QGRAPH_ENCODED_MAX)
		return -EINVAL;
	Qgraph__SubmitGraph *sg = qgraph__submit_graph__unpack(NULL, len, buf);
	if (!sg)
		return -EBADMSG;
	sg->keep = (flags & QGRAPH_SUBMIT_KEEP) != 0;
	int r = submit_wire(s, sg, flags, id);
	qgraph__submit_graph__free_unpacked(sg, NULL);
	return r;
}

QGRAPH_API int qgraph_run(struct qgraph_session *s, uint64_t handle, struct qgraph_graph *g, int flags,
			  uint64_t *id)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__RunGraph run = QGRAPH__RUN_GRAPH__INIT;
	Qgraph__EventRef wev[QG_WIRE_MAX_EVENTS], rev[QG_WIRE_MAX_EVENTS];
	Qgraph__EventRef *wp[QG_WIRE_MAX_EVENTS], *rp[QG_WIRE_MAX_EVENTS];

	if (!s || !id || !handle)
		return -EINVAL;
	run.graph = handle;
	if (g) {
		run.n_wait = qg_wire_events(g->wait, g->n_wait, wev, wp);
		run.wait = wp;
		run.n_record = qg_wire_events(g->record, g->n_record, rev, rp);
		run.record = rp;
	}
	req.body_case = QGRAPH__REQUEST__BODY_RUN;
	req.run = &run;
	return qg_client_send_request(s, &req, (flags & QGRAPH_SUBMIT_BLOCK) != 0, id);
}

QGRAPH_API int qgraph_cancel(struct qgraph_session *s, uint64_t target, uint64_t *id)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__Cancel c = QGRAPH__CANCEL__INIT;

	if (!s || !id || !target)
		return -EINVAL;
	c.request_id = target;
	req.body_case = QGRAPH__REQUEST__BODY_CANCEL;
	req.cancel = &c;
	return qg_client_send_request(s, &req, 1, id);
}
