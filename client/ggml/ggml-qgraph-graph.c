/*
 * ggml-qgraph-graph.c - libggml-qgraph's graph_compute: the MUL_MATs of a
 * ggml graph translated to one qgraph graph over the session arena (the
 * ops around them move no bytes), run by the handle it was registered
 * under (ggml-qgraph-cache.c), or registered now.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-qgraph-impl.h"

/* A graph under translation: the qgraph graph and the key that names it in the cache. */
struct xlate {
	struct qgraph_graph *g;
	uint64_t *key;
	size_t n_key, cap_key;
	const struct ggml_tensor **done;	/* ggml tensors computed by this graph ... */
	int *done_id;				/* ... and their qgraph tensor */
	size_t n_done;
	struct qgg_span {			/* arena bytes the graph reads and writes */
		int64_t lo, hi;
		bool output;
	} *spans;
	size_t n_spans;
	int n_mm;				/* its MUL_MATs */
	char error[256];
	long long t0;				/* when graph_compute began (QGRAPH_GGML_TRACE) */
};

static int xlate_fail(struct xlate *x, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int xlate_fail(struct xlate *x, int err, const char *fmt, ...)
{
	va_list ap;

	if (!x->error[0]) {
		va_start(ap, fmt);
		vsnprintf(x->error, sizeof x->error, fmt, ap);
		va_end(ap);
	}
	return err < 0 ? err : -EINVAL;
}

/*
 * A graph's key: its records in order, each opened by a tag word (so that
 * no two graphs of different structure give the same words): a MUL_MAT
 * (with its weights' handle count) and its result's offset; its activations
 * as an input (offset, then ne and nb) or as an earlier node's result (its
 * index); its weights' handles.
 */
#define KEY_MUL_MAT (1ull << 60)
#define KEY_INPUT (2ull << 60)
#define KEY_EARLIER (3ull << 60)

static void key_push(struct xlate *x, uint64_t v)
{
	if (x->n_key == x->cap_key) {
		size_t cap = x->cap_key ? 2 * x->cap_key : 64;
		void *p = realloc(x->key, cap * sizeof *x->key);
		if (!p) {
			x->n_key = SIZE_MAX;	/* poisoned: compared with nothing */
			return;
		}
		x->key = p;
		x->cap_key = cap;
	}
	if (x->n_key != SIZE_MAX)
		x->key[x->n_key++] = v;
}

/* Where T's bytes are in the session arena, or -1 if its buffer is not one of ours or has none. */
static int64_t arena_offset(const struct ggml_tensor *t)
{
	ggml_backend_buffer_t buffer = t->view_src ? t->view_src->buffer : t->buffer;

	if (!buffer || ggml_backend_buffer_get_type(buffer) != &qgg_buft)
		return -1;
	struct qgg_buffer *b = buffer->context;
	if (qgg_buffer_bind(b))
		return -1;
	return b->arena_off + ((const unsigned char *)t->data - b->base);
}

/*
 * The qgraph tensor for F32 activations T (source of a MUL_MAT): the one
 * an earlier node made, an input over its bytes if they are contiguous
 * and aligned, or else a view of an input that covers them.
 */
static int activations(struct xlate *x, const struct ggml_tensor *t)
{
	for (size_t i = x->n_done; i-- > 0;) {
		if (x->done[i] == t) {
			key_push(x, KEY_EARLIER | i);
			return x->done_id[i];
		}
	}
	int64_t off = arena_offset(t);
	if (off < 0)
		return xlate_fail(x, -EINVAL, "activations %s are not in a qgraph buffer", t->name);
	key_push(x, KEY_INPUT);
	key_push(x, (uint64_t)off);
	for (int d = 0; d < 4; d++) {
		key_push(x, (uint64_t)t->ne[d]);
		key_push(x, (uint64_t)t->nb[d]);
	}
	if (ggml_is_contiguous(t) && off % QGG_ALIGN == 0)
		return qgraph_graph_input(x->g, QGRAPH_TYPE_F32, 4, t->ne, off);
	/* a strided or unaligned view: an input over the bytes it spans, viewed */
	int64_t start = off / QGG_ALIGN * QGG_ALIGN, span = 4;
	for (int d = 0; d < 4; d++)
		span += (t->ne[d] - 1) * (int64_t)t->nb[d];
	int64_t ne = (off - start + span + 3) / 4;
	int in = qgraph_graph_input(x->g, QGRAPH_TYPE_F32, 1, &ne, start);
	const uint64_t nb[3] = { t->nb[1], t->nb[2], t->nb[3] };
	return qgraph_graph_view(x->g, in, 4, t->ne, nb, (uint64_t)(off - start));
}

/* The arena bytes [*LO, *HI) that T's elements lie in; false if T is not in one of our buffers. */
static bool tensor_span(const struct ggml_tensor *t, int64_t *lo, int64_t *hi)
{
	int64_t off = arena_offset(t), end = (int64_t)ggml_element_size(t);

	if (off < 0)
		return false;
	for (int d = 0; d < 4; d++)
		end += (t->ne[d] - 1) * (int64_t)t->nb[d];
	*lo = off / QGG_ALIGN * QGG_ALIGN;	/* an input starts aligned (activations) */
	*hi = off + end;
	return true;
}

/*
 * Whether a span [LO, HI) (an OUTPUT, or read) would share bytes with one
 * of the graph so far where either is an output: the daemon refuses that
 * (a graph's inputs and outputs are disjoint), so the graph so far runs
 * first.  ggml's allocator reuses a buffer's bytes within one split, and a
 * node may be listed twice (test-backend-ops perf).
 */
static bool span_conflicts(const struct xlate *x, int64_t lo, int64_t hi, bool output)
{
	for (size_t i = 0; i < x->n_spans; i++)
		if ((output || x->spans[i].output) && lo < x->spans[i].hi && x->spans[i].lo < hi)
			return true;
	return false;
}

static int span_add(struct xlate *x, int64_t lo, int64_t hi, bool output)
{
	void *p = realloc(x->spans, (x->n_spans + 1) * sizeof *x->spans);

	if (!p)
		return -ENOMEM;
	x->spans = p;
	x->spans[x->n_spans++] = (struct qgg_span){ lo, hi, output };
	return 0;
}

/* Remember that ggml tensor T is qgraph tensor ID of this graph. */
static int note_done(struct xlate *x, const struct ggml_tensor *t, int id)
{
	void *p = realloc(x->done, (x->n_done + 1) * sizeof *x->done);
	if (!p)
		return -ENOMEM;
	x->done = p;
	p = realloc(x->done_id, (x->n_done + 1) * sizeof *x->done_id);
	if (!p)
		return -ENOMEM;
	x->done_id = p;
	x->done[x->n_done] = t;
	x->done_id[x->n_done++] = id;
	return 0;
}

/*
 * Translate MUL_MAT node T: one MUL_MAT over every batch of the
 * activations (the daemon broadcasts stacked weights as ggml does), its
 * result written where ggml allocated T.  Weights held as a matrix per
 * slice: one MUL_MAT per batch, each written to its place in T.
 */
static int mul_mat(struct xlate *x, const struct ggml_tensor *t)
{
	const struct ggml_tensor *w0 = t->src[0], *act = t->src[1];
	struct qgg_buffer *wb = w0->buffer ? w0->buffer->context : NULL;
	struct qgg_weights *w = wb ? qgg_weights_find(wb, w0->data) : NULL;

	if (!w || !w->n_handles)
		return xlate_fail(x, -ENOENT, "weights %s are not in qgraphd (%s)", w0->name,
				  wb && wb->error[0] ? wb->error : "never set");
	if (wb->error[0])
		return xlate_fail(x, -EIO, "%s", wb->error);
	int64_t off = arena_offset(t);
	if (off < 0 || off % QGG_ALIGN)
		return xlate_fail(x, -EINVAL, "the result %s is not in a qgraph buffer", t->name);
	key_push(x, KEY_MUL_MAT | w->n_handles);
	key_push(x, (uint64_t)off);
	int a = activations(x, act);
	if (a < 0)
		return a;
	for (size_t i = 0; i < w->n_handles; i++)
		key_push(x, w->handles[i]);
	int r;
	if (w->n_handles == 1) {
		int wt = qgraph_graph_weights_nd(x->g, w->handles[0], w->stored, 4, w->ne);
		r = qgraph_graph_op(x->g, QGRAPH_OP_MUL_MAT, wt, a, 0);
		if (r >= 0 && (r = qgraph_graph_output(x->g, r, off)) >= 0)
			r = note_done(x, t, r) ? -ENOMEM : r;
		return r;
	}
	/* a matrix per slice: a product per batch, each written to its place in T (supports_op saw to alignment) */
	int64_t r2 = act->ne[2] / w->ne[2], r3 = act->ne[3] / w->ne[3];
	r = 0;
	for (int64_t i3 = 0; i3 < t->ne[3] && r >= 0; i3++) {
		for (int64_t i2 = 0; i2 < t->ne[2] && r >= 0; i2++) {
			size_t slice = (size_t)(i2 / r2 + i3 / r3 * w->ne[2]);
			const int64_t ane[2] = { act->ne[0], act->ne[1] };
			const uint64_t anb[1] = { act->nb[1] };
			int wi = qgraph_graph_weights(x->g, w->handles[slice], w->stored, w->ne[1], w->ne[0]);
			int av = qgraph_graph_view(x->g, a, 2, ane, anb, (uint64_t)(i2 * act->nb[2] + i3 * act->nb[3]));
			r = qgraph_graph_output(x->g, qgraph_graph_op(x->g, QGRAPH_OP_MUL_MAT, wi, av, 0),
						off + (int64_t)(i2 * t->nb[2] + i3 * t->nb[3]));
		}
	}
	return r;
}

/* Run the translated graph: by the handle it was registered under, or register it now. */
static int run(struct xlate *x)
{
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	uint64_t id, handle, h = qgg_key_hash(x->key, x->n_key);
	bool cached = x->n_key != SIZE_MAX && qgg_cache_find(x->key, x->n_key, h, &handle) == 0;
	int err;

	if (cached) {
		qgg.n_cached_runs++;
		err = qgraph_run(qgg.s, handle, NULL, QGRAPH_SUBMIT_BLOCK, &id);
	} else {
		err = qgraph_submit(qgg.s, x->g, QGRAPH_SUBMIT_BLOCK | QGRAPH_SUBMIT_KEEP, &id);
	}
	if (err == 0)
		err = qgraph_wait(qgg.s, id, -1, &res);
	if (err == 0)
		err = res.status;
	if (qgg.trace) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		say("graph %s (%zu key words): %d, daemon total %.1f us, compute %.1f us, here %.1f us",
		    cached ? "run by handle" : "registered", x->n_key, err, res.total_ns / 1e3, res.compute_ns / 1e3,
		    (double)(ts.tv_sec * 1000000000ll + ts.tv_nsec - x->t0) / 1e3);
	}
	if (err)
		return xlate_fail(x, err, "qgraphd: %s", qgraph_session_error(qgg.s));
	qgg.n_graphs++;
	if (!cached && x->n_key != SIZE_MAX)
		qgg_cache_add(x->key, x->n_key, h, res.handle);
	return 0;
}

/* Start X over with an empty graph (what it held has run). */
static int xlate_reset(struct xlate *x)
{
	qgraph_graph_free(x->g);
	x->n_key = x->n_done = x->n_spans = 0;
	x->n_mm = 0;
	x->g = qgraph_graph_new();
	return x->g ? 0 : xlate_fail(x, -ENOMEM, "out of memory");
}

/* Add MUL_MAT node T to X, running what X holds first where the two would overlap.  0 or -errno. */
static int add_mul_mat(struct xlate *x, const struct ggml_tensor *t)
{
	const struct ggml_tensor *act = t->src[1];
	int64_t olo, ohi, ilo = 0, ihi = 0;
	bool repeated = false, fresh_input = true;
	int err;

	for (size_t i = 0; i < x->n_done; i++) {
		repeated |= x->done[i] == t;
		fresh_input &= x->done[i] != act;
	}
	if (!tensor_span(t, &olo, &ohi) || (fresh_input && !tensor_span(act, &ilo, &ihi)))
		return xlate_fail(x, -EINVAL, "%s or its activations are not in a qgraph buffer", t->name);
	if (x->n_mm && (repeated || span_conflicts(x, olo, ohi, true) ||
			(fresh_input && span_conflicts(x, ilo, ihi, false)))) {
		if ((err = run(x)) || (err = xlate_reset(x)))
			return err;
		fresh_input = true;
		if (!tensor_span(act, &ilo, &ihi))
			return xlate_fail(x, -EINVAL, "the activations of %s are not in a qgraph buffer", t->name);
	}
	err = mul_mat(x, t);
	if (err < 0)
		return xlate_fail(x, err,
				  "cannot express %s = %s x %s in a qgraph graph (result [%" PRId64 ", %" PRId64 ", %" PRId64
				  ", %" PRId64 "], activations' strides %zu %zu %zu): %s",
				  t->name, t->src[0]->name, act->name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], act->nb[1],
				  act->nb[2], act->nb[3], strerror(-err));
	x->n_mm++;
	if ((fresh_input && (err = span_add(x, ilo, ihi, false))) || (err = span_add(x, olo, ohi, true)))
		return xlate_fail(x, err, "out of memory");
	return 0;
}

enum ggml_status qgg_graph_compute(ggml_backend_t backend, struct ggml_cgraph *cgraph)
{
	struct xlate x = { 0 };
	int err = 0;

	(void)backend;
	if (qgg.trace) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		x.t0 = ts.tv_sec * 1000000000ll + ts.tv_nsec;
	}
	pthread_mutex_lock(&qgg.lock);
	if (!(x.g = qgraph_graph_new()))
		err = xlate_fail(&x, -ENOMEM, "out of memory");
	for (int i = 0; i < ggml_graph_n_nodes(cgraph) && !err; i++) {
		const struct ggml_tensor *t = ggml_graph_node(cgraph, i);
		switch (t->op) {
		case GGML_OP_NONE:
		case GGML_OP_RESHAPE:
		case GGML_OP_VIEW:
		case GGML_OP_PERMUTE:
		case GGML_OP_TRANSPOSE:
			break;	/* no bytes move: their sources' addresses are read through them */
		case GGML_OP_MUL_MAT:
			if (ggml_nelements(t) > 0)	/* ggml's empty products (no rows wanted) compute nothing */
				err = add_mul_mat(&x, t);
			break;
		default:
			err = xlate_fail(&x, -EINVAL, "op %s is not supported here", ggml_op_name(t->op));
			break;
		}
	}
	if (!err && x.n_mm)
		err = run(&x);
	pthread_mutex_unlock(&qgg.lock);
	if (err)
		say("graph_compute failed: %s", x.error[0] ? x.error : strerror(-err));
	qgraph_graph_free(x.g);
	free(x.key);
	free(x.done);
	free(x.done_id);
	free(x.spans);
	return err ? GGML_STATUS_FAILED : GGML_STATUS_SUCCESS;
}
