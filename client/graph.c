/*
 * graph.c - libqgraph's graph builder and submission (see qgraph.h,
 * section 3).  A graph is described here, shapes worked out as the daemon
 * will, and sent as one SubmitGraph record; the daemon checks it all again.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "session-impl.h"
#include "wire.h"

struct gtensor {
	enum qgraph_type type;
	int ndims;
	int64_t ne[4];
	uint64_t nb[4];		/* byte strides, as the daemon will have them (views need them) */
	int op;			/* 0: a leaf */
	int src[2];
	float param;
	int has_param;
	int32_t axes[4];	/* PERMUTE's */
	uint64_t view_offset;	/* VIEW's, in bytes from its source's first */
	int64_t offset;		/* arena offset, or -1 */
	uint64_t weights;
	unsigned flags;		/* 1 input, 2 output */
};

static int is_view(int op)
{
	return op >= QGRAPH_OP_RESHAPE && op <= QGRAPH_OP_PERMUTE;
}

static int is_block_type(enum qgraph_type type)
{
	return type != QGRAPH_TYPE_F32 && type != QGRAPH_TYPE_F16 && type != QGRAPH_TYPE_I32;
}

/* Bytes of one element (of one block, for a block type) of TYPE. */
static int64_t elem_bytes(enum qgraph_type type)
{
	switch ((int)type) {
	case QGRAPH_TYPE_F32:
	case (int)QGRAPH_TYPE_I32: return 4;
	case QGRAPH_TYPE_F16: return 2;
	default: return qgraph_row_size(type, 32);	/* the block types hold 32 values a block */
	}
}

/* Bytes of a row of T, or -errno. */
static int64_t row_bytes(const struct gtensor *t)
{
	return t->type == QGRAPH_TYPE_I32 ? 4 * t->ne[0] : qgraph_row_size(t->type, t->ne[0]);
}

/* T's strides for its shape, packed: rows one after another. */
static void set_contiguous(struct gtensor *t)
{
	int64_t row = row_bytes(t), eb = elem_bytes(t->type);

	t->nb[0] = eb > 0 ? (uint64_t)eb : 0;
	t->nb[1] = row > 0 ? (uint64_t)row : 0;
	for (int d = 2; d < 4; d++)
		t->nb[d] = t->nb[d - 1] * (uint64_t)t->ne[d - 1];
}

/* Whether T's strides are the packed ones (a dimension of one has no stride that matters). */
static int is_contiguous(const struct gtensor *t)
{
	struct gtensor packed = *t;

	set_contiguous(&packed);
	if (t->nb[0] != packed.nb[0])
		return 0;
	for (int d = 1; d < 4; d++)
		if (t->ne[d] != 1 && t->nb[d] != packed.nb[d])
			return 0;
	return 1;
}

struct evref {
	unsigned index;
	uint32_t value;
};

struct qgraph_graph {
	struct gtensor *t;
	size_t n, cap;
	struct evref wait[16], record[16];
	size_t n_wait, n_record;
	int err;		/* the first builder error */
	size_t err_at;		/* the tensor being built when it came */
	char why[192];		/* and what it was, where the builder said ("" otherwise) */
};

QGRAPH_API struct qgraph_graph *qgraph_graph_new(void)
{
	return calloc(1, sizeof(struct qgraph_graph));
}

QGRAPH_API void qgraph_graph_free(struct qgraph_graph *g)
{
	if (g) {
		free(g->t);
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

/* As graph_fail, with what went wrong in words (shown by qgraph_submit's session error). */
__attribute__((format(printf, 3, 4)))
static int graph_failf(struct qgraph_graph *g, int err, const char *fmt, ...)
{
	va_list ap;

	if (g && !g->err) {
		va_start(ap, fmt);
		vsnprintf(g->why, sizeof g->why, fmt, ap);
		va_end(ap);
	}
	return graph_fail(g, err);
}

static int add(struct qgraph_graph *g, const struct gtensor *t)
{
	void *p = qg_grow(g->t, &g->cap, g->n, sizeof *g->t, 16);
	if (!p)
		return graph_fail(g, -ENOMEM);
	g->t = p;
	g->t[g->n] = *t;
	return (int)g->n++;
}

QGRAPH_API int64_t qgraph_graph_tensor_bytes(const struct qgraph_graph *g, int i)
{
	if (!g || i < 0 || (size_t)i >= g->n)
		return -EINVAL;
	const struct gtensor *t = &g->t[i];
	int64_t row = row_bytes(t);
	if (row < 0)
		return row;
	int64_t n = row;
	for (int d = 1; d < 4; d++)
		if (__builtin_mul_overflow(n, t->ne[d], &n))
			return -EOVERFLOW;
	return n;
}

QGRAPH_API int qgraph_graph_input(struct qgraph_graph *g, enum qgraph_type type, int ndims, const int64_t *ne,
				  int64_t offset)
{
	struct gtensor t = { .type = type, .ndims = ndims, .ne = { 1, 1, 1, 1 }, .offset = offset, .flags = 1 };

	if (!g)
		return -EINVAL;
	if (qg_wire_type_of_public(type) < 0)	/* the daemon's activation layouts are not inputs */
		return graph_fail(g, -EINVAL);
	if (ndims < 1 || ndims > 4 || !ne || offset < 0 || offset % 64)
		return graph_fail(g, -EINVAL);
	for (int d = 0; d < ndims; d++) {
		if (ne[d] < 1)
			return graph_fail(g, -EINVAL);
		t.ne[d] = ne[d];
	}
	set_contiguous(&t);
	return add(g, &t);
}

QGRAPH_API int qgraph_graph_weights(struct qgraph_graph *g, uint64_t handle, enum qgraph_type type, int64_t rows,
				    int64_t cols)
{
	struct gtensor t = { .type = type, .ndims = 2, .ne = { cols, rows, 1, 1 }, .offset = -1, .weights = handle };

	if (!g)
		return -EINVAL;
	if (!handle || rows < 1 || cols < 1 || qg_wire_type_of_public(type) < 0)
		return graph_fail(g, -EINVAL);
	return add(g, &t);
}

QGRAPH_API int qgraph_graph_weights_nd(struct qgraph_graph *g, uint64_t handle, enum qgraph_type type, int ndims,
				       const int64_t *ne)
{
	struct gtensor t = { .type = type, .ndims = ndims, .ne = { 1, 1, 1, 1 }, .offset = -1, .weights = handle };

	if (!g)
		return -EINVAL;
	if (!handle || !ne || ndims < 2 || ndims > 4 || qg_wire_type_of_public(type) < 0)
		return graph_fail(g, -EINVAL);
	for (int d = 0; d < ndims; d++) {
		if (ne[d] < 1)
			return graph_fail(g, -EINVAL);
		t.ne[d] = ne[d];
	}
	return add(g, &t);
}

QGRAPH_API int qgraph_graph_op(struct qgraph_graph *g, enum qgraph_op op, int a, int b, float param)
{
	struct gtensor t = { .type = QGRAPH_TYPE_F32, .op = op, .src = { a, b }, .param = param, .offset = -1 };

	if (!g)
		return -EINVAL;
	if (a < 0)
		return graph_fail(g, a);
	if ((size_t)a >= g->n || (b >= 0 && (size_t)b >= g->n))
		return graph_fail(g, -EINVAL);
	const struct gtensor *A = &g->t[a], *B = b >= 0 ? &g->t[b] : NULL;
	memcpy(t.ne, A->ne, sizeof t.ne);
	t.ndims = A->ndims;
	switch (op) {
	case QGRAPH_OP_MUL_MAT:
		if (!B)
			return graph_fail(g, -EINVAL);
		t.ne[0] = A->ne[1];
		t.ne[1] = B->ne[1];
		t.ne[2] = B->ne[2];
		t.ne[3] = B->ne[3];
		t.ndims = B->ndims > 2 ? B->ndims : 2;
		break;
	case QGRAPH_OP_ADD:
	case QGRAPH_OP_MUL:
		if (!B)
			return graph_fail(g, -EINVAL);
		break;
	case QGRAPH_OP_GET_ROWS:
		if (!B)
			return graph_fail(g, -EINVAL);
		t.ne[1] = B->ne[0];
		t.ne[2] = B->ne[1];
		t.ne[3] = B->ne[2];
		t.ndims = B->ndims + 1 > 4 ? 4 : B->ndims + 1;
		break;
	case QGRAPH_OP_CPY:
		if (!B)
			return graph_fail(g, -EINVAL);	/* a conversion is qgraph_graph_cast's */
		t.type = B->type;
		break;
	case QGRAPH_OP_SCALE:
	case QGRAPH_OP_RMS_NORM:
	case QGRAPH_OP_SOFT_MAX:
		t.has_param = 1;
		/* fall through */
	case QGRAPH_OP_SILU:
	case QGRAPH_OP_GELU:
		if (B && op != QGRAPH_OP_SOFT_MAX)
			return graph_fail(g, -EINVAL);
		break;
	default:
		return graph_fail(g, -EINVAL);	/* views have builders of their own */
	}
	set_contiguous(&t);
	return add(g, &t);
}

QGRAPH_API int qgraph_graph_cast(struct qgraph_graph *g, int a, enum qgraph_type type)
{
	struct gtensor t = { .type = type, .op = QGRAPH_OP_CPY, .src = { a, -1 }, .offset = -1 };

	if (!g)
		return -EINVAL;
	if (a < 0)
		return graph_fail(g, a);
	if ((size_t)a >= g->n || qg_wire_type_of_public(type) < 0)
		return graph_fail(g, -EINVAL);
	memcpy(t.ne, g->t[a].ne, sizeof t.ne);
	t.ndims = g->t[a].ndims;
	set_contiguous(&t);
	return add(g, &t);
}

/* Source A of a view: *SRC, or -errno (weights are not viewed). */
static int view_source(struct qgraph_graph *g, int a, const struct gtensor **src)
{
	if (!g)
		return -EINVAL;
	if (a < 0)
		return graph_fail(g, a);
	if ((size_t)a >= g->n || g->t[a].weights)
		return graph_fail(g, -EINVAL);
	*src = &g->t[a];
	return 0;
}

/* A view T of A: its type, source and place are A's. */
static struct gtensor view_base(const struct gtensor *A, int a, int op)
{
	struct gtensor t = *A;

	t.op = op;
	t.src[0] = a;
	t.src[1] = -1;
	t.has_param = 0;
	t.offset = -1;
	t.flags = 0;
	t.view_offset = 0;
	return t;
}

QGRAPH_API int qgraph_graph_reshape(struct qgraph_graph *g, int a, int ndims, const int64_t *ne)
{
	const struct gtensor *A;
	int r = view_source(g, a, &A);

	if (r)
		return r;
	if (ndims < 1 || ndims > 4 || !ne || !is_contiguous(A))
		return graph_fail(g, -EINVAL);
	struct gtensor t = view_base(A, a, QGRAPH_OP_RESHAPE);
	int64_t n = 1, m = 1;
	for (int d = 0; d < 4; d++) {
		t.ne[d] = d < ndims ? ne[d] : 1;
		if (t.ne[d] < 1 || __builtin_mul_overflow(n, t.ne[d], &n) || __builtin_mul_overflow(m, A->ne[d], &m))
			return graph_fail(g, -EINVAL);
	}
	if (n != m)	/* the same elements, or it is no reshape */
		return graph_failf(g, -EINVAL, "reshape of tensor %d: [%lld %lld %lld %lld] (%lld elements) is not "
				   "[%lld %lld %lld %lld] (%lld)", a, (long long)A->ne[0], (long long)A->ne[1],
				   (long long)A->ne[2], (long long)A->ne[3], (long long)m, (long long)t.ne[0],
				   (long long)t.ne[1], (long long)t.ne[2], (long long)t.ne[3], (long long)n);
	t.ndims = ndims;
	set_contiguous(&t);
	return add(g, &t);
}

QGRAPH_API int qgraph_graph_permute(struct qgraph_graph *g, int a, const int axes[4])
{
	const struct gtensor *A;
	int r = view_source(g, a, &A), seen = 0;

	if (r)
		return r;
	if (!axes)
		return graph_fail(g, -EINVAL);
	struct gtensor t = view_base(A, a, QGRAPH_OP_PERMUTE);
	for (int d = 0; d < 4; d++) {
		if (axes[d] < 0 || axes[d] > 3 || (seen & (1 << axes[d])))
			return graph_fail(g, -EINVAL);
		seen |= 1 << axes[d];
		t.ne[axes[d]] = A->ne[d];
		t.nb[axes[d]] = A->nb[d];
		t.axes[d] = axes[d];
	}
	if (is_block_type(A->type) && axes[0] != 0)
		return graph_fail(g, -EINVAL);	/* a block type's rows hold blocks: they cannot move */
	t.ndims = 4;
	return add(g, &t);
}

QGRAPH_API int qgraph_graph_transpose(struct qgraph_graph *g, int a)
{
	static const int swap[4] = { 1, 0, 2, 3 };
	int t = qgraph_graph_permute(g, a, swap);

	if (t >= 0)
		g->t[t].op = QGRAPH_OP_TRANSPOSE;
	return t;
}

QGRAPH_API int qgraph_graph_view(struct qgraph_graph *g, int a, int ndims, const int64_t *ne, const uint64_t *nb,
				 uint64_t offset)
{
	const struct gtensor *A;
	int r = view_source(g, a, &A);

	if (r)
		return r;
	if (ndims < 1 || ndims > 4 || !ne || (ndims > 1 && !nb))
		return graph_fail(g, -EINVAL);
	struct gtensor t = view_base(A, a, QGRAPH_OP_VIEW);
	for (int d = 0; d < 4; d++) {
		t.ne[d] = d < ndims ? ne[d] : 1;
		if (t.ne[d] < 1)
			return graph_fail(g, -EINVAL);
	}
	/* the row as A's; the dimensions given their strides, those past them packed after them */
	t.nb[0] = A->nb[0];
	int64_t row = row_bytes(&t);
	for (int d = 1; d < 4; d++)
		t.nb[d] = d < ndims ? nb[d - 1] : d == 1 ? (uint64_t)(row > 0 ? row : 0) : t.nb[d - 1] * (uint64_t)t.ne[d - 1];
	t.ndims = ndims;
	t.view_offset = offset;
	return add(g, &t);
}

QGRAPH_API int qgraph_graph_output(struct qgraph_graph *g, int i, int64_t offset)
{
	if (!g)
		return -EINVAL;
	if (i < 0)
		return graph_fail(g, i);
	if ((size_t)i >= g->n || !g->t[i].op || is_view(g->t[i].op) || offset < 0 || offset % 64)
		return graph_fail(g, -EINVAL);
	g->t[i].offset = offset;
	g->t[i].flags |= 2;
	return i;
}

static int add_event(struct qgraph_graph *g, struct evref *list, size_t *n, unsigned event, uint32_t value)
{
	if (!g)
		return -EINVAL;
	if (*n >= 16)
		return graph_fail(g, -E2BIG);
	list[(*n)++] = (struct evref){ event, value };
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

/* Wire structures for G's events, in EV (room for 16) and PTRS. */
static size_t wire_events(const struct evref *src, size_t n, Qgraph__EventRef *ev, Qgraph__EventRef **ptrs)
{
	for (size_t i = 0; i < n; i++) {
		qgraph__event_ref__init(&ev[i]);
		ev[i].index = src[i].index;
		ev[i].value = src[i].value;
		ptrs[i] = &ev[i];
	}
	return n;
}


/*
 * The wire form of G: fills SG (and the arrays it points into, freed by
 * wire_free) from G's tensors and events.  0, or -EINVAL / -ENOMEM.
 */
struct wire_graph {
	Qgraph__SubmitGraph sg;
	Qgraph__Tensor *t, **tp;
	Qgraph__Span *spans;
	uint32_t *srcs;
	int64_t *nes;
	Qgraph__EventRef wev[16], rev[16], *wp[16], *rp[16];
};

static void wire_free(struct wire_graph *w)
{
	free(w->t);
	free(w->tp);
	free(w->spans);
	free(w->srcs);
	free(w->nes);
}

static int wire_make(const struct qgraph_graph *g, int flags, struct wire_graph *w)
{
	memset(w, 0, sizeof *w);
	if (!g)
		return -EINVAL;
	if (g->err)
		return g->err;
	if (g->n == 0)
		return -EINVAL;
	w->t = calloc(g->n, sizeof *w->t);
	w->tp = calloc(g->n, sizeof *w->tp);
	w->spans = calloc(g->n, sizeof *w->spans);
	w->srcs = calloc(2 * g->n, sizeof *w->srcs);
	w->nes = calloc(4 * g->n, sizeof *w->nes);
	if (!w->t || !w->tp || !w->spans || !w->srcs || !w->nes) {
		wire_free(w);
		return -ENOMEM;
	}
	for (size_t i = 0; i < g->n; i++) {
		const struct gtensor *x = &g->t[i];
		Qgraph__Tensor *t = &w->t[i];
		qgraph__tensor__init(t);
		w->tp[i] = t;
		t->type = (Qgraph__Type)qg_wire_type_of_public(x->type);	/* checked when X was added */
		memcpy(&w->nes[4 * i], x->ne, sizeof x->ne);
		t->n_ne = (size_t)x->ndims;
		t->ne = &w->nes[4 * i];
		t->op = x->op ? (Qgraph__Op)qg_wire_op_of_public(x->op) : QGRAPH__OP__OP_NONE;	/* checked when added */
		t->weights = x->weights;
		t->flags = x->flags & (x->op ? 2u : 1u);
		if (x->op) {
			w->srcs[2 * i] = (uint32_t)x->src[0];
			w->srcs[2 * i + 1] = (uint32_t)x->src[1];
			t->n_src = x->src[1] >= 0 ? 2 : 1;
			t->src = &w->srcs[2 * i];
		}
		if (x->has_param) {
			t->n_fparams = 1;
			t->fparams = (float *)&x->param;
		}
		if (x->op == QGRAPH_OP_PERMUTE) {
			t->n_iparams = 4;
			t->iparams = (int32_t *)x->axes;
		}
		if (x->op == QGRAPH_OP_VIEW) {
			t->n_nb = (size_t)x->ndims;	/* one stride a dimension, the row's first */
			t->nb = (uint64_t *)x->nb;
			t->view_offset = x->view_offset;
		}
		if (x->offset >= 0) {
			int64_t bytes = qgraph_graph_tensor_bytes(g, (int)i);
			qgraph__span__init(&w->spans[i]);
			w->spans[i].offset = (uint64_t)x->offset;
			w->spans[i].bytes = bytes < 0 ? 0 : (uint64_t)bytes;
			t->arena = &w->spans[i];
		}
	}
	qgraph__submit_graph__init(&w->sg);
	w->sg.n_tensors = g->n;
	w->sg.tensors = w->tp;
	w->sg.keep = (flags & QGRAPH_SUBMIT_KEEP) != 0;
	w->sg.n_wait = wire_events(g->wait, g->n_wait, w->wev, w->wp);
	w->sg.wait = w->wp;
	w->sg.n_record = wire_events(g->record, g->n_record, w->rev, w->rp);
	w->sg.record = w->rp;
	return 0;
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
	struct wire_graph w;

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
	wire_free(&w);
	return r;
}

QGRAPH_API ssize_t qgraph_graph_encode(const struct qgraph_graph *g, void *buf, size_t len)
{
	struct wire_graph w;
	int r = wire_make(g, 0, &w);

	if (r)
		return r;
	size_t need = qgraph__submit_graph__get_packed_size(&w.sg);
	if (need > (size_t)SSIZE_MAX) {
		wire_free(&w);
		return -EOVERFLOW;
	}
	if (buf && len >= need)
		qgraph__submit_graph__pack(&w.sg, buf);
	wire_free(&w);
	return (ssize_t)need;
}

QGRAPH_API int qgraph_submit_encoded(struct qgraph_session *s, const void *buf, size_t len, int flags,
				     uint64_t *id)
{
	if (!s)
		return -EINVAL;
	if (!buf || !id || len == 0 || len > QGRAPH_ENCODED_MAX)
		return qg_client_fail(s, -EINVAL, "submit: %zu bytes of encoded graph (1 to %u)", buf ? len : 0,
				      QGRAPH_ENCODED_MAX);
	Qgraph__SubmitGraph *sg = qgraph__submit_graph__unpack(NULL, len, buf);
	if (!sg)
		return qg_client_fail(s, -EBADMSG, "submit: %zu bytes that are not a SubmitGraph", len);
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
	Qgraph__EventRef wev[16], rev[16], *wp[16], *rp[16];

	if (!s)
		return -EINVAL;
	if (!id || !handle)
		return qg_client_fail(s, -EINVAL, "run: %s", !handle ? "graph handle 0" : "the id's place is NULL");
	run.graph = handle;
	if (g) {
		run.n_wait = wire_events(g->wait, g->n_wait, wev, wp);
		run.wait = wp;
		run.n_record = wire_events(g->record, g->n_record, rev, rp);
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

	if (!s)
		return -EINVAL;
	if (!id || !target)
		return qg_client_fail(s, -EINVAL, "cancel: %s", !target ? "request 0" : "the id's place is NULL");
	c.request_id = target;
	req.body_case = QGRAPH__REQUEST__BODY_CANCEL;
	req.cancel = &c;
	return qg_client_send_request(s, &req, 1, id);
}
