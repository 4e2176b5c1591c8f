/*
 * ggml-qgraph-xlate.c - the pieces graph_compute translates a ggml graph
 * with (ggml-qgraph-xlate.h): the qgraph graph's builders, each keeping
 * its call in the graph's key; where a tensor's bytes are in the arena;
 * and a node's sources, found in the graph so far or made inputs over the
 * arena (over a copy where a later node writes those bytes).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-qgraph-impl.h"
#include "ggml-qgraph-xlate.h"

int qgg_fail(struct xlate *x, int err, const char *fmt, ...)
{
	va_list ap;

	if (!x->error[0]) {
		va_start(ap, fmt);
		vsnprintf(x->error, sizeof x->error, fmt, ap);
		va_end(ap);
	}
	return err < 0 ? err : -EINVAL;
}

/* ------------------------------------------------------------ the key */

/*
 * A graph's key: every call that built its qgraph graph, in order, each
 * opened by a tag word and followed by all its arguments, so two keys are
 * equal exactly when the calls built the same graph.
 */
enum key_tag {
	KEY_INPUT = 1,
	KEY_WEIGHTS,
	KEY_WEIGHTS_ND,
	KEY_OP,
	KEY_VIEW,
	KEY_RESHAPE,
	KEY_CAST,
	KEY_OUTPUT,
	KEY_OP_EX,
	KEY_EFFECT,
};

static void key_push(struct xlate *x, uint64_t v)
{
	if (x->n_key == SIZE_MAX)
		return;		/* poisoned: compared with nothing */
	if (x->n_key == x->cap_key) {
		size_t cap = x->cap_key ? 2 * x->cap_key : 64;
		void *p = realloc(x->key, cap * sizeof *x->key);
		if (!p) {
			x->n_key = SIZE_MAX;
			return;
		}
		x->key = p;
		x->cap_key = cap;
	}
	x->key[x->n_key++] = v;
}

static void key_ne(struct xlate *x, const int64_t *ne, int n)
{
	for (int d = 0; d < n; d++)
		key_push(x, (uint64_t)ne[d]);
}

/* The graph builders, each keeping its call in the key. */
int qgg_input(struct xlate *x, enum qgraph_type type, const int64_t ne[4], int64_t off)
{
	key_push(x, (uint64_t)KEY_INPUT << 56 | (uint64_t)type);
	key_ne(x, ne, 4);
	key_push(x, (uint64_t)off);
	return qgraph_graph_input(x->g, type, 4, ne, off);
}

int qgg_view(struct xlate *x, int a, const int64_t ne[4], const uint64_t nb[3], uint64_t off)
{
	key_push(x, (uint64_t)KEY_VIEW << 56 | (uint32_t)a);
	key_ne(x, ne, 4);
	key_ne(x, (const int64_t *)nb, 3);
	key_push(x, off);
	return qgraph_graph_view(x->g, a, 4, ne, nb, off);
}

int qgg_reshape(struct xlate *x, int a, const int64_t ne[4])
{
	key_push(x, (uint64_t)KEY_RESHAPE << 56 | (uint32_t)a);
	key_ne(x, ne, 4);
	return qgraph_graph_reshape(x->g, a, 4, ne);
}

int qgg_op(struct xlate *x, enum qgraph_op op, int a, int b, float param)
{
	uint32_t bits;

	memcpy(&bits, &param, sizeof bits);
	key_push(x, (uint64_t)KEY_OP << 56 | (uint64_t)op << 32 | bits);
	key_push(x, (uint64_t)(uint32_t)a << 32 | (uint32_t)b);
	return qgraph_graph_op(x->g, op, a, b, param);
}

/* OP on the N_SRC tensors SRC with the first N_PARAMS words of ggml node T's op_params. */
int qgg_op_ex(struct xlate *x, enum qgraph_op op, int n_src, const int *src, const struct ggml_tensor *t,
	      int n_params)
{
	key_push(x, (uint64_t)KEY_OP_EX << 56 | (uint64_t)op << 32 | (uint64_t)n_src << 16 | (uint64_t)n_params);
	for (int i = 0; i < n_src; i++)
		key_push(x, (uint64_t)(uint32_t)src[i]);
	for (int i = 0; i < n_params; i++)
		key_push(x, (uint64_t)(uint32_t)t->op_params[i]);
	for (int i = 0; i < n_src; i++)
		if (src[i] < 0)
			return src[i];
	return qgraph_graph_op_ex(x->g, op, n_src, src, n_params, t->op_params);
}

int qgg_effect(struct xlate *x, int t)
{
	key_push(x, (uint64_t)KEY_EFFECT << 56 | (uint32_t)t);
	return qgraph_graph_effect(x->g, t);
}

int qgg_cast(struct xlate *x, int a, enum qgraph_type type)
{
	key_push(x, (uint64_t)KEY_CAST << 56 | (uint64_t)type << 32 | (uint32_t)a);
	return qgraph_graph_cast(x->g, a, type);
}

int qgg_leaf_weights(struct xlate *x, uint64_t handle, enum qgraph_type type, int64_t rows, int64_t cols)
{
	key_push(x, (uint64_t)KEY_WEIGHTS << 56 | (uint64_t)type);
	key_push(x, handle);
	key_push(x, (uint64_t)rows);
	key_push(x, (uint64_t)cols);
	return qgraph_graph_weights(x->g, handle, type, rows, cols);
}

int qgg_leaf_weights_nd(struct xlate *x, uint64_t handle, enum qgraph_type type, const int64_t ne[4])
{
	key_push(x, (uint64_t)KEY_WEIGHTS_ND << 56 | (uint64_t)type);
	key_push(x, handle);
	key_ne(x, ne, 4);
	return qgraph_graph_weights_nd(x->g, handle, type, 4, ne);
}

int qgg_output(struct xlate *x, int t, int64_t off)
{
	key_push(x, (uint64_t)KEY_OUTPUT << 56 | (uint32_t)t);
	key_push(x, (uint64_t)off);
	return qgraph_graph_output(x->g, t, off);
}

/* ----------------------------------------------------- where bytes are */

/* Where T's bytes are in the session arena, or -1 if its buffer is not one of ours or has none. */
int64_t qgg_arena_offset(const struct ggml_tensor *t)
{
	ggml_backend_buffer_t buffer = t->view_src ? t->view_src->buffer : t->buffer;

	if (!buffer || !buffer->context ||	/* a zero-size buffer has no context */
	    (ggml_backend_buffer_get_type(buffer) != &qgg_buft && ggml_backend_buffer_get_type(buffer) != &qgg_wbuft))
		return -1;
	struct qgg_buffer *b = buffer->context;
	if (qgg_buffer_bind(b))
		return -1;
	return b->arena_off + ((const unsigned char *)t->data - b->base);
}

/* The arena bytes [*LO, *HI) that T's elements lie in (from an aligned start); false if not in our buffers. */
bool qgg_tensor_span(const struct ggml_tensor *t, int64_t *lo, int64_t *hi)
{
	int64_t off = qgg_arena_offset(t), end = (int64_t)ggml_row_size(t->type, t->ne[0]);

	if (off < 0)
		return false;
	for (int d = 1; d < 4; d++)
		end += (t->ne[d] - 1) * (int64_t)t->nb[d];
	*lo = off / QGG_ALIGN * QGG_ALIGN;	/* an input starts aligned */
	*hi = off + end;
	return true;
}

bool qgg_overlap(int64_t lo, int64_t hi, int64_t lo2, int64_t hi2)
{
	return lo < hi2 && lo2 < hi;
}

/* The qgraph type of ggml type T, or -1 for one no claimed op takes outside MUL_MAT's weights. */
int qgg_qtype(enum ggml_type t)
{
	switch (t) {
	case GGML_TYPE_F32: return QGRAPH_TYPE_F32;
	case GGML_TYPE_F16: return QGRAPH_TYPE_F16;
	case GGML_TYPE_Q8_0: return QGRAPH_TYPE_Q8_0;
	case GGML_TYPE_I32: return (int)QGRAPH_TYPE_I32;
	case GGML_TYPE_I64: return (int)QGRAPH_TYPE_I64;
	default: return -1;
	}
}

/* --------------------------------------------------------- bookkeeping */

/* T's first slot to look at in a table of CAP (a power of two) slots. */
static size_t slot_of(const struct ggml_tensor *t, size_t cap)
{
	uint64_t h = (uint64_t)(uintptr_t)t * UINT64_C(0x9e3779b97f4a7c15);

	return (size_t)(h >> 32) & (cap - 1);
}

/* Make T's slot say entry I (its latest).  X's table has room. */
static void tab_put(struct xlate *x, const struct ggml_tensor *t, size_t i)
{
	size_t k = slot_of(t, x->tab_cap);

	while (x->tab[k].t && x->tab[k].t != t)
		k = (k + 1) & (x->tab_cap - 1);
	if (!x->tab[k].t)
		x->tab_n++;
	x->tab[k] = (struct qgg_slot){ t, i };
}

/* Room in X's table for one more tensor: doubled (and filled again) past half full.  0 or -ENOMEM. */
static int tab_room(struct xlate *x)
{
	if (2 * (x->tab_n + 1) <= x->tab_cap)
		return 0;
	size_t cap = x->tab_cap ? 2 * x->tab_cap : 256;
	struct qgg_slot *old = x->tab, *p = calloc(cap, sizeof *p);
	size_t old_cap = x->tab_cap;
	if (!p)
		return -ENOMEM;
	x->tab = p;
	x->tab_cap = cap;
	x->tab_n = 0;
	for (size_t k = 0; k < old_cap; k++)
		if (old[k].t)
			tab_put(x, old[k].t, old[k].i);
	free(old);
	return 0;
}

static struct qgg_done *done_find(struct xlate *x, const struct ggml_tensor *t)
{
	if (!x->tab_cap)
		return NULL;
	for (size_t k = slot_of(t, x->tab_cap); x->tab[k].t; k = (k + 1) & (x->tab_cap - 1))
		if (x->tab[k].t == t)
			return &x->done[x->tab[k].i];
	return NULL;
}

void qgg_done_clear(struct xlate *x)
{
	x->n_done = x->n_inputs = x->n_live = 0;
	if (x->tab_n)
		memset(x->tab, 0, x->tab_cap * sizeof *x->tab);
	x->tab_n = 0;
}

/* Append V to the array *A of *N entries and capacity *CAP.  0 or -ENOMEM. */
static int push_index(size_t **a, size_t *n, size_t *cap, size_t v)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 32;
		void *p = realloc(*a, c * sizeof **a);
		if (!p)
			return -ENOMEM;
		*a = p;
		*cap = c;
	}
	(*a)[(*n)++] = v;
	return 0;
}

int qgg_done_add(struct xlate *x, struct qgg_done d)
{
	if (x->n_done == x->cap_done) {
		size_t cap = x->cap_done ? 2 * x->cap_done : 32;
		void *p = realloc(x->done, cap * sizeof *x->done);
		if (!p)
			return -ENOMEM;
		x->done = p;
		x->cap_done = cap;
	}
	/* room first, then listed: a failure leaves DONE as it was */
	int err = tab_room(x);
	if (!err)
		err = d.input ? push_index(&x->inputs, &x->n_inputs, &x->cap_inputs, x->n_done)
		      : !d.dead ? push_index(&x->live, &x->n_live, &x->cap_live, x->n_done) : 0;
	if (err)
		return err;
	tab_put(x, d.t, x->n_done);
	x->done[x->n_done++] = d;
	return 0;
}

/*
 * The qgraph tensor already standing for S in this graph, or a view of
 * one (S a view of an earlier result), or -ENOENT.
 */
static int source_here(struct xlate *x, const struct ggml_tensor *s)
{
	struct qgg_done *d = done_find(x, s);

	if (d)
		return d->id;
	const struct ggml_tensor *base = s->view_src;
	if (!base || !(d = done_find(x, base)) || d->input || base->type != s->type ||
	    s->nb[0] != ggml_type_size(s->type) || ggml_blck_size(s->type) != 1)
		return -ENOENT;
	int64_t off = (const char *)s->data - (const char *)base->data;
	if (off == 0 && ggml_is_contiguous(s) && ggml_is_contiguous(base) && ggml_nelements(s) == ggml_nelements(base))
		return qgg_reshape(x, d->id, s->ne);
	const uint64_t nb[3] = { s->nb[1], s->nb[2], s->nb[3] };
	return qgg_view(x, d->id, s->ne, nb, (uint64_t)off);
}

/* Whether S will be read from the arena (nothing in this graph stands for it yet). */
bool qgg_reads_arena(struct xlate *x, const struct ggml_tensor *s)
{
	if (done_find(x, s))
		return false;
	const struct qgg_done *d = s->view_src ? done_find(x, s->view_src) : NULL;
	return !(d && !d->input && s->view_src->type == s->type && ggml_blck_size(s->type) == 1 &&
		 s->nb[0] == ggml_type_size(s->type));
}

/*
 * An input for S whose bytes, spanning [LO, HI) from an aligned LO, are at
 * arena offset OFF: S itself if contiguous and aligned, else a view of an
 * input covering the bytes it spans.  Remembered as S's tensor.
 */
int qgg_input_at(struct xlate *x, const struct ggml_tensor *s, int64_t off, int64_t lo, int64_t hi)
{
	int id, type = qgg_qtype(s->type);

	if (type < 0)
		return qgg_fail(x, -EINVAL, "%s is of type %s", s->name, ggml_type_name(s->type));
	if (ggml_is_contiguous(s) && off % QGG_ALIGN == 0) {
		id = qgg_input(x, type, s->ne, off);
	} else if (ggml_blck_size(s->type) == 1 && s->nb[0] == ggml_type_size(s->type)) {
		size_t es = ggml_type_size(s->type);
		const int64_t ne[4] = { (hi - lo + (int64_t)es - 1) / (int64_t)es, 1, 1, 1 };
		const uint64_t nb[3] = { s->nb[1], s->nb[2], s->nb[3] };
		int in = qgg_input(x, type, ne, lo);
		id = qgg_view(x, in, s->ne, nb, (uint64_t)(off - lo));
	} else {
		return qgg_fail(x, -EINVAL, "%s (%s) is neither contiguous and aligned nor of packed elements",
				s->name, ggml_type_name(s->type));
	}
	if (id < 0)
		return id;
	int err = qgg_done_add(x, (struct qgg_done){ .t = s, .id = id, .off = off, .lo = lo, .hi = hi, .input = true });
	return err ? qgg_fail(x, err, "out of memory") : id;
}

static int stage(struct xlate *x, const struct ggml_tensor *s);

/*
 * Whether this node or a later one of the ggml graph writes into [LO, HI):
 * ggml's allocator gives a tensor's bytes to another once nothing reads
 * them, so a source's bytes may be a later result's.  The daemon takes no
 * graph whose output shares bytes with an input, and a graph cut there
 * costs a round trip; a copy of the source costs less.
 */
static bool written_from_here(const struct xlate *x, int64_t lo, int64_t hi)
{
	for (int i = x->cur; i < x->n_writes; i++)
		if (qgg_overlap(lo, hi, x->writes[i].lo, x->writes[i].hi))
			return true;
	return false;
}

/*
 * The qgraph tensor for source S of a node: what this graph has for it
 * (source_here), or an input over its bytes, or over a copy of them where
 * a node from this one on writes there.
 */
int qgg_source(struct xlate *x, const struct ggml_tensor *s)
{
	int id = source_here(x, s);
	int64_t off, lo, hi;

	if (id != -ENOENT)
		return id;
	if ((off = qgg_arena_offset(s)) < 0 || !qgg_tensor_span(s, &lo, &hi))
		return qgg_fail(x, -EINVAL, "%s is not in a qgraph buffer", s->name);
	if (written_from_here(x, lo, hi))
		return stage(x, s);
	return qgg_input_at(x, s, off, lo, hi);
}

/*
 * Source S, whose bytes a node from this one on writes (an in-place op,
 * or ggml's allocator handing S's bytes on): S's bytes are copied to arena
 * room of their own (X keeps it until the graphs have run) and the input
 * is made there.  They hold S's values now: a node of the graph so far
 * that wrote them would have been found (source_here), or made the graph
 * run first (conflicts).
 */
static int stage(struct xlate *x, const struct ggml_tensor *s)
{
	int64_t off = qgg_arena_offset(s), lo, hi;
	size_t arena_bytes;
	unsigned char *arena = qgraph_arena(qgg.s, &arena_bytes);

	if (off < 0 || !qgg_tensor_span(s, &lo, &hi) || !arena)
		return qgg_fail(x, -EINVAL, "%s is not in a qgraph buffer", s->name);
	void *p = realloc(x->staged, (x->n_staged + 1) * sizeof *x->staged);
	if (!p)
		return qgg_fail(x, -ENOMEM, "out of memory");
	x->staged = p;
	int64_t room = qgraph_arena_alloc(qgg.s, (size_t)(hi - lo));
	if (room < 0)
		return qgg_fail(x, (int)room, "no arena room for a copy of %s (%" PRId64 " bytes): raise QGRAPH_GGML_ARENA",
				s->name, hi - lo);
	x->staged[x->n_staged++] = room;
	memcpy(arena + room, arena + lo, (size_t)(hi - lo));
	return qgg_input_at(x, s, room + (off - lo), room, room + (hi - lo));
}

