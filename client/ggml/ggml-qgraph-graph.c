/*
 * ggml-qgraph-graph.c - libggml-qgraph's graph_compute: the nodes of a
 * ggml graph (the ops dev_supports_op claims) translated to one qgraph
 * graph over the session arena, run by the handle it was registered under
 * (ggml-qgraph-cache.c), or registered now.
 *
 * A node's sources are the qgraph tensors of earlier nodes of the same
 * graph (or views of them), or inputs over the arena bytes ggml put them
 * in.  A node's result becomes an output at the arena bytes ggml gave it
 * only if no later node of the graph writes over them: ggml's allocator
 * reuses a tensor's bytes only once nothing reads it any more, so a result
 * overwritten within the graph is needed by no one outside it, and stays
 * inside the daemon.  The daemon takes no graph whose outputs share bytes
 * with another of its arena spans: a source whose bytes a node from this
 * one on writes is read from a copy, and where a node reads bytes an
 * earlier one wrote through another tensor, the graph so far runs first
 * and a new one begins.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-qgraph-impl.h"
#include "ggml-qgraph-xlate.h"

/* ------------------------------------------------------------ the ops */

/* The tensor whose bytes MUL_MAT weights W0 are: W0, or the whole it is a permuted view of. */
static const struct ggml_tensor *weights_base(const struct ggml_tensor *w0)
{
	return w0->view_src ? w0->view_src : w0;
}

/* Whether MUL_MAT weights W0 are read from the arena: Q8_0 not held by the daemon (is_weights). */
static bool weights_in_arena(const struct ggml_tensor *w0)
{
	const struct ggml_tensor *base = weights_base(w0);
	struct qgg_buffer *wb = base->buffer ? base->buffer->context : NULL;

	return base->type == GGML_TYPE_Q8_0 && (!wb || !qgg_weights_find(wb, base->data));
}

/*
 * Weights W0 that view WHOLE (the qgraph tensor of all ROWS rows of the
 * tensor W0 views) with whole rows in another order (a permuted stack):
 * the rows of W0, slice after slice, gathered by GET_ROWS into F32 by
 * indices written to arena room of X's own, in W0's shape.  The indices
 * are written anew each time the graph runs (its key names their room,
 * not their values).  The qgraph tensor, or -errno.
 */
static int gathered_weights(struct xlate *x, const struct ggml_tensor *w0, int whole, int64_t rows)
{
	const size_t rb = ggml_row_size(w0->type, w0->ne[0]);
	const int64_t n = w0->ne[1] * w0->ne[2] * w0->ne[3];
	const size_t off = (size_t)((const char *)w0->data - (const char *)w0->view_src->data);
	unsigned char *arena = qgraph_arena(qgg.s, NULL);

	if (whole < 0)
		return whole;
	void *p = realloc(x->staged, (x->n_staged + 1) * sizeof *x->staged);
	if (!p || !arena)
		return qgg_fail(x, -ENOMEM, "out of memory");
	x->staged = p;
	int64_t room = qgraph_arena_alloc(qgg.s, (size_t)n * sizeof(int32_t));
	if (room < 0)
		return qgg_fail(x, (int)room, "no arena room for the row indices of %s: raise QGRAPH_GGML_ARENA",
				w0->name);
	x->staged[x->n_staged++] = room;
	int32_t *idx = (int32_t *)(void *)(arena + room);
	for (int64_t i3 = 0; i3 < w0->ne[3]; i3++)
		for (int64_t i2 = 0; i2 < w0->ne[2]; i2++)
			for (int64_t i1 = 0; i1 < w0->ne[1]; i1++) {
				size_t at = off + (size_t)i1 * w0->nb[1] + (size_t)i2 * w0->nb[2] + (size_t)i3 * w0->nb[3];
				if (at % rb || at / rb >= (size_t)rows)
					return qgg_fail(x, -EINVAL, "%s does not view whole rows", w0->name);
				*idx++ = (int32_t)(at / rb);
			}
	const int64_t ine[4] = { n, 1, 1, 1 };
	int in = qgg_input(x, QGRAPH_TYPE_I32, ine, room);
	int got = in < 0 ? in : qgg_op(x, QGRAPH_OP_GET_ROWS, whole, in, 0);
	return got < 0 ? got : qgg_reshape(x, got, w0->ne);
}

/*
 * MUL_MAT node T: one MUL_MAT over every batch of the activations (the
 * daemon broadcasts stacked weights as ggml does).  Weights held as a
 * matrix per slice: one MUL_MAT per batch, each written to its place in T
 * at once (*FIXED set).  Q8_0 weights in the arena are an input.
 */
static int mul_mat(struct xlate *x, const struct ggml_tensor *t, int64_t off, bool *fixed)
{
	const struct ggml_tensor *w0 = t->src[0], *act = t->src[1], *base = weights_base(w0);
	struct qgg_buffer *wb = base->buffer ? base->buffer->context : NULL;
	struct qgg_weights *w = wb ? qgg_weights_find(wb, base->data) : NULL;
	const int64_t rows = base->ne[1] * base->ne[2] * base->ne[3];
	int wi, a;

	if (w0->type == GGML_TYPE_F16) {
		/* attention's F16 keys or values (a view of the cache), no weights: rows made packed first */
		a = qgg_source(x, w0);
		if (a >= 0 && w0->ne[1] > 1 && w0->nb[1] != ggml_row_size(w0->type, w0->ne[0]))
			a = qgg_cast(x, a, QGRAPH_TYPE_F16);
		return qgg_op(x, QGRAPH_OP_MUL_MAT, a, qgg_source(x, act), 0);
	}
	if (weights_in_arena(w0)) {
		if (w0->view_src) {	/* the whole as rows, then the view's rows gathered */
			const int64_t ne[4] = { base->ne[0], rows, 1, 1 };
			wi = qgg_source(x, base);
			wi = gathered_weights(x, w0, wi < 0 ? wi : qgg_reshape(x, wi, ne), rows);
		} else {
			wi = qgg_source(x, w0);
		}
		a = wi < 0 ? wi : qgg_source(x, act);
		return a < 0 ? a : qgg_op(x, QGRAPH_OP_MUL_MAT, wi, a, 0);
	}
	if (!w || !w->n_handles)
		return qgg_fail(x, -ENOENT, "weights %s are not in qgraphd (%s)", w0->name,
				wb && wb->error[0] ? wb->error : "never set");
	if (wb->error[0])
		return qgg_fail(x, -EIO, "%s", wb->error);
	if (w0->view_src) {	/* supports_op saw a type held whole, as one matrix */
		if (w->n_handles != 1)
			return qgg_fail(x, -EINVAL, "weights %s are held by slice", base->name);
		wi = gathered_weights(x, w0, qgg_leaf_weights(x, w->handles[0], w->stored, rows, base->ne[0]), rows);
		a = wi < 0 ? wi : qgg_source(x, act);
		return a < 0 ? a : qgg_op(x, QGRAPH_OP_MUL_MAT, wi, a, 0);
	}
	a = qgg_source(x, act);
	if (a < 0)
		return a;
	if (w->n_handles == 1)
		return qgg_op(x, QGRAPH_OP_MUL_MAT, qgg_leaf_weights_nd(x, w->handles[0], w->stored, w->ne), a, 0);
	/* a matrix per slice: a product per batch, each written to its place in T (supports_op saw to alignment) */
	int64_t r2 = act->ne[2] / w->ne[2], r3 = act->ne[3] / w->ne[3];
	int r = 0;
	*fixed = true;
	for (int64_t i3 = 0; i3 < t->ne[3] && r >= 0; i3++) {
		for (int64_t i2 = 0; i2 < t->ne[2] && r >= 0; i2++) {
			size_t slice = (size_t)(i2 / r2 + i3 / r3 * w->ne[2]);
			const int64_t ane[4] = { act->ne[0], act->ne[1], 1, 1 };
			const uint64_t anb[3] = { act->nb[1], act->nb[1] * act->ne[1], act->nb[1] * act->ne[1] };
			int ws = qgg_leaf_weights(x, w->handles[slice], w->stored, w->ne[1], w->ne[0]);
			int av = qgg_view(x, a, ane, anb, (uint64_t)(i2 * act->nb[2] + i3 * act->nb[3]));
			r = qgg_output(x, qgg_op(x, QGRAPH_OP_MUL_MAT, ws, av, 0),
				       off + (int64_t)(i2 * t->nb[2] + i3 * t->nb[3]));
		}
	}
	return r;
}

/* A float op parameter of T. */
static float fparam(const struct ggml_tensor *t, int i)
{
	float v;

	memcpy(&v, (const char *)t->op_params + i * sizeof v, sizeof v);
	return v;
}

/* The qgraph op of ggml's general-form op OP (ROPE, GLU, NORM, FLASH_ATTN_EXT, SET_ROWS). */
static enum qgraph_op ex_op(enum ggml_op op)
{
	switch (op) {
	case GGML_OP_ROPE: return QGRAPH_OP_ROPE;
	case GGML_OP_GLU: return QGRAPH_OP_GLU;
	case GGML_OP_NORM: return QGRAPH_OP_NORM;
	case GGML_OP_FLASH_ATTN_EXT: return QGRAPH_OP_FLASH_ATTN_EXT;
	default: return QGRAPH_OP_SET_ROWS;
	}
}

/* The op_params words OP reads (dev_supports_op saw the rest are 0). */
static int ex_words(enum ggml_op op)
{
	switch (op) {
	case GGML_OP_ROPE: return 16;
	case GGML_OP_GLU: return 2;
	case GGML_OP_NORM: return 1;
	case GGML_OP_FLASH_ATTN_EXT: return 4;
	default: return 0;
	}
}

/* The qgraph tensor computing node T (not yet an output), or -errno; *FIXED if it made its outputs itself. */
static int node(struct xlate *x, const struct ggml_tensor *t, int64_t off, bool *fixed)
{
	int a, b;

	switch (t->op) {
	case GGML_OP_MUL_MAT:
		return mul_mat(x, t, off, fixed);
	case GGML_OP_ADD:
	case GGML_OP_MUL:
		a = qgg_source(x, t->src[0]);
		b = qgg_source(x, t->src[1]);
		return qgg_op(x, t->op == GGML_OP_ADD ? QGRAPH_OP_ADD : QGRAPH_OP_MUL, a, b, 0);
	case GGML_OP_SCALE:
		return qgg_op(x, QGRAPH_OP_SCALE, qgg_source(x, t->src[0]), -1, fparam(t, 0));
	case GGML_OP_RMS_NORM:
		return qgg_op(x, QGRAPH_OP_RMS_NORM, qgg_source(x, t->src[0]), -1, fparam(t, 0));
	case GGML_OP_UNARY:
		a = qgg_source(x, t->src[0]);
		return qgg_op(x, ggml_get_unary_op(t) == GGML_UNARY_OP_SILU ? QGRAPH_OP_SILU : QGRAPH_OP_GELU, a, -1, 0);
	case GGML_OP_SOFT_MAX: {
		const struct ggml_tensor *m = t->src[1];
		a = qgg_source(x, t->src[0]);
		b = m ? qgg_source(x, m) : -1;
		if (m && m->ne[1] != t->ne[1] && b >= 0) {	/* ggml reads the mask's first rows only */
			const int64_t ne[4] = { m->ne[0], t->ne[1], m->ne[2], m->ne[3] };
			const uint64_t nb[3] = { m->nb[1], m->nb[2], m->nb[3] };
			b = qgg_view(x, b, ne, nb, 0);
		}
		return qgg_op(x, QGRAPH_OP_SOFT_MAX, a, b, fparam(t, 0));
	}
	case GGML_OP_GET_ROWS:
		a = qgg_source(x, t->src[0]);
		b = qgg_source(x, t->src[1]);
		return qgg_op(x, QGRAPH_OP_GET_ROWS, a, b, 0);
	case GGML_OP_CPY:
	case GGML_OP_CONT: {
		const struct ggml_tensor *s = t->src[0];
		a = qgg_source(x, s);
		if (a >= 0 && !ggml_are_same_shape(s, t))	/* supports_op saw S contiguous */
			a = qgg_reshape(x, a, t->ne);
		return qgg_cast(x, a, (enum qgraph_type)qgg_qtype(t->type));
	}
	case GGML_OP_ROPE:	/* a, positions[, frequency factors]; ggml's sixteen words */
	case GGML_OP_GLU:	/* a[, b]: the gate and whether swapped */
	case GGML_OP_NORM:	/* eps */
	case GGML_OP_FLASH_ATTN_EXT: {	/* q, k, v[, mask]: scale, max_bias, softcap, precision */
		int src[4], n = 0;
		for (; n < 4 && t->src[n]; n++)
			src[n] = qgg_source(x, t->src[n]);
		return qgg_op_ex(x, ex_op(t->op), n, src, t, ex_words(t->op));
	}
	default:
		return qgg_fail(x, -EINVAL, "op %s is not supported here", ggml_op_desc(t));
	}
}

/* ----------------------------------------------------------- running */

/* Make every result no later node wrote over an output, and run the graph: by its handle, or register it now. */
static int run(struct xlate *x)
{
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	uint64_t id, handle, h;
	bool cached;
	int err = 0;

	for (size_t i = 0; i < x->n_done && err >= 0; i++)
		if (!x->done[i].input && !x->done[i].dead)
			err = qgg_output(x, x->done[i].id, x->done[i].off);
	if (err < 0)
		return qgg_fail(x, err, "cannot make the results outputs: %s", strerror(-err));
	h = qgg_key_hash(x->key, x->n_key);
	cached = x->n_key != SIZE_MAX && qgg_cache_find(x->key, x->n_key, h, &handle) == 0;
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
		say("graph %s (%d nodes, %zu key words): %d, daemon total %.1f us, compute %.1f us, here %.1f us",
		    cached ? "run by handle" : "registered", x->n_nodes, x->n_key, err, res.total_ns / 1e3,
		    res.compute_ns / 1e3, (double)(ts.tv_sec * 1000000000ll + ts.tv_nsec - x->t0) / 1e3);
	}
	if (err)
		return qgg_fail(x, err, "qgraphd: %s", qgraph_session_error(qgg.s));
	qgg.n_graphs++;
	if (!cached && x->n_key != SIZE_MAX)
		qgg_cache_add(x->key, x->n_key, h, res.handle);
	return 0;
}

/* Start X over with an empty graph (what it held has run). */
static int xlate_reset(struct xlate *x)
{
	qgraph_graph_free(x->g);
	x->n_key = x->n_fixed = 0;
	qgg_done_clear(x);
	x->n_nodes = 0;
	x->g = qgraph_graph_new();
	return x->g ? 0 : qgg_fail(x, -ENOMEM, "out of memory");
}

/*
 * Whether node T, writing [LO, HI), cannot join the graph so far: it
 * writes bytes the graph reads from the arena or made an output of at
 * once, or a source it reads from the arena lies in bytes the graph
 * writes (a result not yet written over).
 */
/* The first entry of X's DONE named by LIST[0..N) (its inputs, or its live results) that [LO, HI) overlaps, or NULL. */
static const struct qgg_done *overlapping(const struct xlate *x, const size_t *list, size_t n, int64_t lo, int64_t hi)
{
	for (size_t k = 0; k < n; k++) {
		const struct qgg_done *d = &x->done[list[k]];
		if (qgg_overlap(lo, hi, d->lo, d->hi))
			return d;
	}
	return NULL;
}

static bool conflicts(struct xlate *x, const struct ggml_tensor *t, int64_t lo, int64_t hi)
{
	const struct qgg_done *d = overlapping(x, x->inputs, x->n_inputs, lo, hi);

	if (d) {
		if (qgg.trace)
			say("%s writes over %s, which the graph reads: the graph so far runs first", t->name, d->t->name);
		return true;
	}
	for (size_t i = 0; i < x->n_fixed; i++)
		if (qgg_overlap(lo, hi, x->fixed[i].lo, x->fixed[i].hi))
			return true;
	for (int k = 0; k < GGML_MAX_SRC && t->src[k]; k++) {
		int64_t slo, shi;
		if (t->op == GGML_OP_MUL_MAT && k == 0 && !weights_in_arena(t->src[0]))
			continue;	/* the weights are in the daemon */
		if (!qgg_reads_arena(x, t->src[k]) || !qgg_tensor_span(t->src[k], &slo, &shi))
			continue;
		if ((d = overlapping(x, x->live, x->n_live, slo, shi))) {
			if (qgg.trace)
				say("%s reads %s from bytes %s writes: the graph so far runs first", t->name,
				    t->src[k]->name, d->t->name);
			return true;
		}
		for (size_t i = 0; i < x->n_fixed; i++)
			if (qgg_overlap(slo, shi, x->fixed[i].lo, x->fixed[i].hi))
				return true;
	}
	return false;
}

/*
 * SET_ROWS node T (a KV-cache write): rows of its first source written
 * into its destination's bytes in place, run for that effect and never an
 * output.  The destination is an input over its own bytes, never a copy;
 * a graph that already reads or writes those bytes runs first, so that
 * every node of this graph that reads them comes after the write (the
 * daemon runs an effect before the nodes made after it).
 */
static int add_set_rows(struct xlate *x, const struct ggml_tensor *t)
{
	const struct ggml_tensor *dst = t->src[2];
	int64_t off = qgg_arena_offset(dst), lo, hi;
	int src[3], id, err;
	bool busy = false;

	if (off < 0 || !qgg_tensor_span(dst, &lo, &hi))
		return qgg_fail(x, -EINVAL, "%s is not in a qgraph buffer", dst->name);
	busy = overlapping(x, x->inputs, x->n_inputs, lo, hi) || overlapping(x, x->live, x->n_live, lo, hi);
	for (size_t i = 0; i < x->n_fixed && !busy; i++)
		busy = qgg_overlap(lo, hi, x->fixed[i].lo, x->fixed[i].hi);
	if (busy) {
		if (qgg.trace)
			say("%s writes bytes the graph so far uses: that graph runs first", t->name);
		if ((err = run(x)) || (err = xlate_reset(x)))
			return err;
	}
	src[0] = qgg_source(x, t->src[0]);
	src[1] = qgg_source(x, t->src[1]);
	src[2] = src[0] < 0 || src[1] < 0 ? -EINVAL : qgg_input_at(x, dst, off, lo, hi);
	id = qgg_effect(x, qgg_op_ex(x, QGRAPH_OP_SET_ROWS, 3, src, t, 0));
	if (id < 0)
		return qgg_fail(x, id, "cannot express %s = %s(%s, %s, %s) in a qgraph graph: %s", t->name,
				ggml_op_desc(t), t->src[0]->name, t->src[1]->name, dst->name, strerror(-id));
	x->n_nodes++;
	/* dead: no output; a later reader of T reads the destination's bytes after the write */
	err = qgg_done_add(x, (struct qgg_done){ .t = t, .id = id, .off = off, .lo = lo, .hi = hi, .dead = true });
	return err ? qgg_fail(x, err, "out of memory") : 0;
}

/* Add node T to X, running what X holds first where the two cannot share a graph.  0 or -errno. */
static int add_node(struct xlate *x, const struct ggml_tensor *t)
{
	int64_t off = qgg_arena_offset(t), lo, hi;
	bool fixed = false;
	int err, id;

	if (t->op == GGML_OP_SET_ROWS)
		return add_set_rows(x, t);
	if (off < 0 || !qgg_tensor_span(t, &lo, &hi))
		return qgg_fail(x, -EINVAL, "%s is not in a qgraph buffer", t->name);
	if (off % QGG_ALIGN || !ggml_is_contiguous(t))
		return qgg_fail(x, -EINVAL, "%s (%s) is not contiguous at an aligned offset (%" PRId64 ")", t->name,
				ggml_op_desc(t), off);
	lo = off;
	if (x->n_nodes && conflicts(x, t, lo, hi)) {
		if ((err = run(x)) || (err = xlate_reset(x)))
			return err;
	}
	/* results this one writes over are dead: nothing reads them after this graph */
	for (size_t k = 0; k < x->n_live;) {
		struct qgg_done *d = &x->done[x->live[k]];
		if (qgg_overlap(lo, hi, d->lo, d->hi)) {
			d->dead = true;
			x->live[k] = x->live[--x->n_live];	/* the order of LIVE does not matter */
		} else {
			k++;
		}
	}
	id = node(x, t, off, &fixed);
	if (id < 0)
		return qgg_fail(x, id,
				"cannot express %s = %s(%s%s%s) in a qgraph graph (result [%" PRId64 ", %" PRId64
				  ", %" PRId64 ", %" PRId64 "]): %s",
				  t->name, ggml_op_desc(t), t->src[0] ? t->src[0]->name : "",
				  t->src[1] ? ", " : "", t->src[1] ? t->src[1]->name : "", t->ne[0], t->ne[1], t->ne[2],
				  t->ne[3], strerror(-id));
	/* a source read from the arena under the result (not staged above): the daemon cannot write what it reads */
	const struct qgg_done *src = overlapping(x, x->inputs, x->n_inputs, lo, hi);
	if (src)
		return qgg_fail(x, -EINVAL, "%s (%s) writes over its own source %s", t->name, ggml_op_desc(t),
				src->t->name);
	x->n_nodes++;
	if (fixed) {
		void *p = realloc(x->fixed, (x->n_fixed + 1) * sizeof *x->fixed);
		if (!p)
			return qgg_fail(x, -ENOMEM, "out of memory");
		x->fixed = p;
		x->fixed[x->n_fixed++] = (struct qgg_fixed){ lo, hi };
		return 0;
	}
	err = qgg_done_add(x, (struct qgg_done){ .t = t, .id = id, .off = off, .lo = lo, .hi = hi });
	return err ? qgg_fail(x, err, "out of memory") : 0;
}

/*
 * Whether node T moves no bytes: a view op (its sources' addresses are
 * read through it), or an empty node (ggml's products of no rows, a
 * cache write of no rows).
 */
static bool moves_nothing(const struct ggml_tensor *t)
{
	switch (t->op) {
	case GGML_OP_NONE:
	case GGML_OP_RESHAPE:
	case GGML_OP_VIEW:
	case GGML_OP_PERMUTE:
	case GGML_OP_TRANSPOSE:
		return true;
	case GGML_OP_SET_ROWS:
		return ggml_nelements(t->src[0]) == 0;
	default:
		return ggml_nelements(t) == 0;
	}
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
	if (!(x.g = qgraph_graph_new()) ||
	    !(x.writes = calloc((size_t)ggml_graph_n_nodes(cgraph) + 1, sizeof *x.writes)))
		err = qgg_fail(&x, -ENOMEM, "out of memory");
	for (int i = 0; i < ggml_graph_n_nodes(cgraph) && !err; i++) {
		const struct ggml_tensor *t = ggml_graph_node(cgraph, i);
		struct qgg_write *w = &x.writes[x.n_writes++];
		if (moves_nothing(t) || !qgg_tensor_span(t, &w->lo, &w->hi))
			w->lo = w->hi = 0;
		else
			w->lo = qgg_arena_offset(t);	/* a result starts where it is, not aligned down */
	}
	for (int i = 0; i < ggml_graph_n_nodes(cgraph) && !err; i++) {
		const struct ggml_tensor *t = ggml_graph_node(cgraph, i);
		x.cur = i;
		if (!moves_nothing(t))
			err = add_node(&x, t);
	}
	if (!err && x.n_nodes)
		err = run(&x);
	for (size_t i = 0; i < x.n_staged; i++)
		qgraph_arena_free(qgg.s, x.staged[i]);
	pthread_mutex_unlock(&qgg.lock);
	if (err)
		say("graph_compute failed: %s", x.error[0] ? x.error : strerror(-err));
	/*
	 * The daemon gone (or going) took this process's weights with it:
	 * no later graph can run, and a server that only failed this request
	 * would answer every next one with an error for good.  End the
	 * process, as ggml does when it cannot go on; its supervisor restarts
	 * it on the next daemon.
	 */
	if (err == -ENOTCONN || err == -ESHUTDOWN)
		GGML_ABORT("qgraph: qgraphd went away with this process's weights (%s); it cannot go on",
			   x.error[0] ? x.error : strerror(-err));
	qgraph_graph_free(x.g);
	free(x.key);
	free(x.done);
	free(x.inputs);
	free(x.live);
	free(x.tab);
	free(x.fixed);
	free(x.staged);
	free(x.writes);
	return err ? GGML_STATUS_FAILED : GGML_STATUS_SUCCESS;
}
