/*
 * ggml-qgraph.c - libggml-qgraph.so, a ggml backend that runs Q4_0 matrix
 * products in qgraphd, with the weights held there once for every process.
 *
 * ggml's loader picks it up from GGML_BACKEND_PATH (ggml_backend_load_all
 * and its callers); it exports ggml_backend_init and ggml_backend_score and
 * nothing else.  It offers one device, QGRAPH0, of type ACCEL: llama.cpp
 * then tries its buffer type first for the weights it would keep in host
 * memory, and keeps it for the tensors whose op the device supports.
 * ggml's scheduler sends those MUL_MATs here and runs the rest on its CPU
 * backend.
 *
 * One buffer type plays two roles, and learns which only after its buffer
 * exists (ggml sets a buffer's usage after alloc_buffer):
 *   - weights: a Q4_0 tensor set into a WEIGHTS or ANY buffer is uploaded
 *     to the daemon, which stores it in its best interleaved layout; the
 *     process keeps no copy.  Reading it back asks the daemon to unpack it
 *     (a CPY into plain Q4_0), so the bytes come back exactly.
 *   - compute: every other tensor (activations, results) lives in the
 *     session's arena, mapped at the buffer's addresses, which the daemon
 *     reads and writes in place: the scheduler's copy is the only copy.
 * A buffer is address space only (PROT_NONE) until a tensor of the second
 * kind needs bytes: a stray CPU access to weights faults.
 *
 * Each graph_compute is translated to one qgraph graph, registered with
 * the daemon the first time and run by its handle after that: llama.cpp
 * sends the same few graphs (per layer: Q; K, V; O; gate, up; down) every
 * token.
 *
 * Without a daemon the backend registers no device and says why once on
 * stderr: the program goes on on its other backends.  Once weights are in
 * the daemon there is nothing to fall back to: an error marks the buffer,
 * and graph_compute then fails with GGML_STATUS_FAILED and the reason.
 *
 * Threads: ggml calls a backend from one thread at a time per backend; a
 * mutex guards the state all backends and buffers share.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-backend-impl.h"

#include "qgraph.h"

#define QGG_EXPORT __attribute__((visibility("default")))
#define QGG_ALIGN 64			/* tensor alignment: the arena's */
#define QGG_ARENA_DEFAULT (512ull << 20)	/* arena asked for unless QGRAPH_GGML_ARENA says otherwise */
#define QGG_CACHE_MAX 256		/* registered graphs kept per process */

/* ---------------------------------------------------------------- state */

/*
 * A Q4_0 tensor held by the daemon: one weights handle for the whole, or
 * (a stack of matrices whose row count is not a whole number of the
 * layout's row groups) one per 2-D slice.
 */
struct qgg_weights {
	const void *data;		/* the tensor's address in its buffer: the key */
	size_t nbytes;
	int64_t ne[4];
	size_t nb[4];
	uint64_t *handles;		/* N_HANDLES of them, 0 until uploaded */
	size_t n_handles;
	enum qgraph_type stored;	/* the layout the daemon chose (the same for every slice) */
	unsigned char *staged;		/* a tensor set in pieces: its bytes until all arrived */
	size_t staged_bytes;
};

struct qgg_buffer {
	unsigned char *base;		/* the reservation: SIZE bytes rounded to pages */
	size_t size, mapped_size;
	int64_t arena_raw;		/* qgraph_arena_alloc's offset, -1 until bound */
	int64_t arena_off;		/* where BASE's bytes are in the arena once bound */
	struct qgg_weights *w;		/* sorted by data */
	size_t n_w, cap_w;
	char error[256];		/* the first error: the next graph_compute fails with it */
};

/* A registered graph: the key its translation produced and the daemon's handle. */
struct qgg_graph {
	uint64_t hash;
	uint64_t *key;
	size_t key_len;
	uint64_t handle;
};

static struct {
	pthread_mutex_t lock;
	struct qgraph_session *s;
	size_t arena_bytes;
	char desc[160];
	struct qgg_graph cache[QGG_CACHE_MAX];
	size_t n_cache, next_evict;
	uint64_t n_graphs, n_cached_runs;
	bool trace;				/* QGRAPH_GGML_TRACE: a line per graph on stderr */
} qgg = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct ggml_backend_reg qgg_reg;
static struct ggml_backend_device qgg_dev;
static struct ggml_backend_buffer_type qgg_buft;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("qgraph: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Record the first error of buffer B (and say it); later calls on B then fail. */
static void buffer_fail(struct qgg_buffer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buffer_fail(struct qgg_buffer *b, const char *fmt, ...)
{
	char msg[sizeof b->error];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	say("%s", msg);
	if (!b->error[0])
		snprintf(b->error, sizeof b->error, "%s", msg);
}

static size_t page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);

	return p > 0 ? (size_t)p : 4096;
}

static size_t round_up(size_t v, size_t to)
{
	return (v + to - 1) / to * to;
}

/* ------------------------------------------------------- graph cache */

static uint64_t hash_words(const uint64_t *w, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= w[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

/* Forget every registered graph (their weights are about to go).  Caller holds the lock. */
static void cache_flush(void)
{
	for (size_t i = 0; i < qgg.n_cache; i++) {
		qgraph_graph_unregister(qgg.s, qgg.cache[i].handle);
		free(qgg.cache[i].key);
	}
	qgg.n_cache = 0;
	qgg.next_evict = 0;
}

static struct qgg_graph *cache_find(const uint64_t *key, size_t len, uint64_t h)
{
	for (size_t i = 0; i < qgg.n_cache; i++) {
		struct qgg_graph *e = &qgg.cache[i];
		if (e->hash == h && e->key_len == len && memcmp(e->key, key, len * sizeof *key) == 0)
			return e;
	}
	return NULL;
}

/* Keep HANDLE under KEY (copied); the oldest entry makes room when the cache is full. */
static void cache_add(const uint64_t *key, size_t len, uint64_t h, uint64_t handle)
{
	uint64_t *k = malloc(len * sizeof *k);

	if (!k) {
		qgraph_graph_unregister(qgg.s, handle);
		return;
	}
	memcpy(k, key, len * sizeof *k);
	struct qgg_graph *e;
	if (qgg.n_cache < QGG_CACHE_MAX) {
		e = &qgg.cache[qgg.n_cache++];
	} else {
		e = &qgg.cache[qgg.next_evict];
		qgg.next_evict = (qgg.next_evict + 1) % QGG_CACHE_MAX;
		qgraph_graph_unregister(qgg.s, e->handle);
		free(e->key);
	}
	*e = (struct qgg_graph){ .hash = h, .key = k, .key_len = len, .handle = handle };
}

/* ------------------------------------------------------------ weights */

static struct qgg_weights *weights_find(struct qgg_buffer *b, const void *data)
{
	size_t lo = 0, hi = b->n_w;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if ((uintptr_t)b->w[mid].data < (uintptr_t)data)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < b->n_w && b->w[lo].data == data ? &b->w[lo] : NULL;
}

/* The entry for tensor T of B, made if new (NULL when out of memory). */
static struct qgg_weights *weights_entry(struct qgg_buffer *b, const struct ggml_tensor *t)
{
	struct qgg_weights *w = weights_find(b, t->data);

	if (w)
		return w;
	if (b->n_w == b->cap_w) {
		size_t cap = b->cap_w ? 2 * b->cap_w : 16;
		void *p = realloc(b->w, cap * sizeof *b->w);
		if (!p)
			return NULL;
		b->w = p;
		b->cap_w = cap;
	}
	size_t slices = (size_t)(t->ne[2] * t->ne[3]);
	uint64_t *handles = calloc(slices, sizeof *handles);
	if (!handles)
		return NULL;
	size_t at = 0;
	while (at < b->n_w && (uintptr_t)b->w[at].data < (uintptr_t)t->data)
		at++;
	memmove(&b->w[at + 1], &b->w[at], (b->n_w - at) * sizeof *b->w);
	w = &b->w[at];
	*w = (struct qgg_weights){ .data = t->data, .nbytes = ggml_nbytes(t), .handles = handles };
	memcpy(w->ne, t->ne, sizeof w->ne);
	memcpy(w->nb, t->nb, sizeof w->nb);
	b->n_w++;
	return w;
}

/* Let the daemon go of W.  Caller holds the lock. */
static void weights_release(struct qgg_weights *w)
{
	size_t slices = (size_t)(w->ne[2] * w->ne[3]);
	bool any = false;

	for (size_t i = 0; i < slices; i++)
		any |= w->handles[i] != 0;
	if (any)
		cache_flush();	/* registered graphs hold their weights */
	w->n_handles = 0;
	for (size_t i = 0; i < slices; i++) {
		if (w->handles[i])
			qgraph_weights_free(qgg.s, w->handles[i]);
		w->handles[i] = 0;
	}
}

/* Upload ROWS x ne[0] Q4_0 values at DATA as W's handle I.  0 or -errno (B says why). */
static int upload_one(struct qgg_buffer *b, struct qgg_weights *w, size_t i, const unsigned char *data, int64_t rows)
{
	int err = qgraph_weights_upload(qgg.s, QGRAPH_TYPE_Q4_0, QGRAPH_TYPE_Q4_0, rows, w->ne[0], data, &w->handles[i],
					&w->stored);
	if (err) {
		w->handles[i] = 0;
		buffer_fail(b, "uploading a q4_0 tensor of %" PRId64 " x %" PRId64 " to qgraphd: %s", rows, w->ne[0],
			    qgraph_session_error(qgg.s));
	}
	return err;
}

/*
 * Send W's whole tensor at DATA (contiguous) to the daemon: as one matrix
 * of all its rows, unless the daemon's layout then has row groups across
 * two slices of a stack; then a matrix per slice.  0 or -errno.
 */
static int weights_upload(struct qgg_buffer *b, struct qgg_weights *w, const unsigned char *data)
{
	size_t slices = (size_t)(w->ne[2] * w->ne[3]);
	int err;

	weights_release(w);
	if ((err = upload_one(b, w, 0, data, w->ne[1] * (int64_t)slices)))
		return err;
	w->n_handles = 1;
	if (slices == 1 || w->ne[1] % qgraph_type_row_group(w->stored) == 0)
		return 0;
	weights_release(w);
	for (size_t i = 0; i < slices && !err; i++)
		err = upload_one(b, w, i, data + i * w->nb[2], w->ne[1]);
	if (err) {
		weights_release(w);
		return err;
	}
	w->n_handles = slices;
	return 0;
}

/*
 * Read W's handle I back from the daemon in ggml's Q4_0 layout into OUT:
 * the daemon unpacks its layout into the arena (a cast to Q4_0).
 */
static int weights_read_slice(struct qgg_buffer *b, struct qgg_weights *w, size_t i, unsigned char *out)
{
	int64_t rows = w->n_handles == 1 ? w->ne[1] * w->ne[2] * w->ne[3] : w->ne[1];
	size_t bytes = (size_t)rows * w->nb[1];
	int64_t off = qgraph_arena_alloc(qgg.s, bytes);

	if (off < 0) {
		buffer_fail(b, "reading weights back: %zu bytes do not fit the session arena (QGRAPH_GGML_ARENA)", bytes);
		return (int)off;
	}
	int err = -ENOMEM;
	struct qgraph_graph *g = qgraph_graph_new();
	if (g) {
		int src = qgraph_graph_weights(g, w->handles[i], w->stored, rows, w->ne[0]);
		uint64_t id;
		struct qgraph_result res = QGRAPH_RESULT_INIT;
		err = qgraph_graph_output(g, qgraph_graph_cast(g, src, QGRAPH_TYPE_Q4_0), off);
		if (err >= 0)
			err = qgraph_submit(qgg.s, g, QGRAPH_SUBMIT_BLOCK, &id);
		if (err >= 0)
			err = qgraph_wait(qgg.s, id, -1, &res);
		if (err >= 0)
			err = res.status;
		qgraph_graph_free(g);
	}
	if (err >= 0) {
		size_t arena_bytes;
		memcpy(out, (unsigned char *)qgraph_arena(qgg.s, &arena_bytes) + off, bytes);
	} else {
		buffer_fail(b, "reading weights back from qgraphd: %s", qgraph_session_error(qgg.s));
	}
	qgraph_arena_free(qgg.s, off);
	return err < 0 ? err : 0;
}

/* ------------------------------------------------------------ buffers */

/* Map the arena under B's addresses, once: the bytes of every tensor that is not weights. */
static int buffer_bind(struct qgg_buffer *b)
{
	size_t page = page_size();

	if (b->arena_raw >= 0)
		return 0;
	int64_t raw = qgraph_arena_alloc(qgg.s, b->mapped_size + page);
	if (raw < 0) {
		size_t arena;
		qgraph_arena(qgg.s, &arena);
		buffer_fail(b,
			    "a buffer of %zu MiB does not fit what is free of the session arena (%zu MiB in all): "
			    "set QGRAPH_GGML_ARENA to a larger size (at most the daemon's max-arena)",
			    b->size >> 20, arena >> 20);
		return (int)raw;
	}
	int64_t off = (int64_t)round_up((size_t)raw, page);
	int err = qgraph_arena_map_at(qgg.s, off, b->mapped_size, b->base);
	if (err) {
		qgraph_arena_free(qgg.s, raw);
		buffer_fail(b, "cannot map the session arena: %s", strerror(-err));
		return err;
	}
	b->arena_raw = raw;
	b->arena_off = off;
	return 0;
}

/* Whether T, set into B, is weights for the daemon rather than bytes of the arena. */
static bool is_weights(ggml_backend_buffer_t buffer, const struct ggml_tensor *t)
{
	return t->type == GGML_TYPE_Q4_0 && t->view_src == NULL &&
	       ggml_backend_buffer_get_usage(buffer) != GGML_BACKEND_BUFFER_USAGE_COMPUTE;
}

static void buffer_free(ggml_backend_buffer_t buffer)
{
	struct qgg_buffer *b = buffer->context;

	pthread_mutex_lock(&qgg.lock);
	for (size_t i = 0; i < b->n_w; i++) {
		weights_release(&b->w[i]);
		free(b->w[i].handles);
		free(b->w[i].staged);
	}
	if (b->arena_raw >= 0) {
		cache_flush();	/* registered graphs name offsets in this buffer */
		qgraph_arena_free(qgg.s, b->arena_raw);
	}
	pthread_mutex_unlock(&qgg.lock);
	munmap(b->base, b->mapped_size);
	free(b->w);
	free(b);
}

static void *buffer_get_base(ggml_backend_buffer_t buffer)
{
	return ((struct qgg_buffer *)buffer->context)->base;
}

static void buffer_set_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor *t, const void *data, size_t offset,
			      size_t size)
{
	struct qgg_buffer *b = buffer->context;

	pthread_mutex_lock(&qgg.lock);
	if (!is_weights(buffer, t)) {
		if (buffer_bind(b) == 0)
			memcpy((char *)t->data + offset, data, size);
		goto out;
	}
	struct qgg_weights *w = weights_entry(b, t);
	if (!w) {
		buffer_fail(b, "out of memory");
		goto out;
	}
	if (offset == 0 && size == w->nbytes) {
		weights_upload(b, w, data);
		goto out;
	}
	/* a tensor set in pieces: kept until every byte has come (ggml's loaders set it whole) */
	if (!w->staged && !(w->staged = calloc(1, w->nbytes))) {
		buffer_fail(b, "out of memory");
		goto out;
	}
	memcpy(w->staged + offset, data, size);
	w->staged_bytes += size;
	if (w->staged_bytes >= w->nbytes) {
		weights_upload(b, w, w->staged);
		free(w->staged);
		w->staged = NULL;
		w->staged_bytes = 0;
	}
out:
	pthread_mutex_unlock(&qgg.lock);
}

static void buffer_get_tensor(ggml_backend_buffer_t buffer, const struct ggml_tensor *t, void *data, size_t offset,
			      size_t size)
{
	struct qgg_buffer *b = buffer->context;
	struct qgg_weights *w;

	pthread_mutex_lock(&qgg.lock);
	if (!is_weights(buffer, t) || !(w = weights_find(b, t->data))) {
		if (buffer_bind(b) == 0)
			memcpy(data, (const char *)t->data + offset, size);
		else
			memset(data, 0, size);
		goto out;
	}
	if (w->staged) {
		memcpy(data, w->staged + offset, size);
		goto out;
	}
	bool whole = offset == 0 && size == w->nbytes;
	unsigned char *all = whole ? data : malloc(w->nbytes);
	if (!all) {
		buffer_fail(b, "out of memory");
		goto out;
	}
	int err = w->n_handles ? 0 : -ENOENT;
	for (size_t i = 0; i < w->n_handles && !err; i++)
		err = weights_read_slice(b, w, i, all + i * w->nb[2]);
	if (!whole) {
		memcpy(data, all + offset, size);
		free(all);
	}
	if (err == -ENOENT)
		buffer_fail(b, "reading weights that were never uploaded");
out:
	pthread_mutex_unlock(&qgg.lock);
}

static void buffer_memset_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor *t, uint8_t value, size_t offset,
				 size_t size)
{
	if (!is_weights(buffer, t)) {
		struct qgg_buffer *b = buffer->context;
		pthread_mutex_lock(&qgg.lock);
		if (buffer_bind(b) == 0)
			memset((char *)t->data + offset, value, size);
		pthread_mutex_unlock(&qgg.lock);
		return;
	}
	unsigned char *tmp = malloc(size);
	if (!tmp)
		return;
	memset(tmp, value, size);
	buffer_set_tensor(buffer, t, tmp, offset, size);
	free(tmp);
}

static void buffer_clear(ggml_backend_buffer_t buffer, uint8_t value)
{
	struct qgg_buffer *b = buffer->context;

	/* weights have their own bytes in the daemon; the arena part is cleared if it has any */
	pthread_mutex_lock(&qgg.lock);
	if (b->arena_raw >= 0)
		memset(b->base, value, b->size);
	pthread_mutex_unlock(&qgg.lock);
}

static const struct ggml_backend_buffer_i qgg_buffer_i = {
	.free_buffer = buffer_free,
	.get_base = buffer_get_base,
	.memset_tensor = buffer_memset_tensor,
	.set_tensor = buffer_set_tensor,
	.get_tensor = buffer_get_tensor,
	.clear = buffer_clear,
};

/* ------------------------------------------------------- buffer type */

static const char *buft_get_name(ggml_backend_buffer_type_t buft)
{
	(void)buft;
	return "QGRAPH";
}

/* The daemon's pool in bytes (*TOTAL) and what is free of it; 0 or -errno. */
static int pool_memory(size_t *free_bytes, size_t *total)
{
	char buf[8192];
	unsigned long long bytes = 0, used = 0;
	ssize_t n = qgraph_stats(qgg.s, buf, sizeof buf - 1);

	if (n < 0)
		return (int)n;
	buf[n] = 0;
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		sscanf(line, "pool_bytes %llu", &bytes);
		sscanf(line, "pool_used %llu", &used);
	}
	*total = bytes;
	*free_bytes = bytes > used ? bytes - used : 0;
	return 0;
}

static ggml_backend_buffer_t buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size)
{
	size_t mapped = round_up(size ? size : 1, page_size()), pool = 0, pool_free = 0;

	pthread_mutex_lock(&qgg.lock);
	int err = pool_memory(&pool_free, &pool);
	pthread_mutex_unlock(&qgg.lock);
	if (err == 0 && size > pool) {
		say("a buffer of %zu MiB can never fit qgraphd's pool of %zu MiB: raise pool-size in qgraphd.conf "
		    "(or keep these weights on the CPU: unset GGML_BACKEND_PATH)",
		    size >> 20, pool >> 20);
		return NULL;
	}
	struct qgg_buffer *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->base = mmap(NULL, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (b->base == MAP_FAILED) {
		free(b);
		return NULL;
	}
	b->size = size;
	b->mapped_size = mapped;
	b->arena_raw = -1;
	return ggml_backend_buffer_init(buft, qgg_buffer_i, b, size);
}

static size_t buft_get_alignment(ggml_backend_buffer_type_t buft)
{
	(void)buft;
	return QGG_ALIGN;
}

static bool buft_is_host(ggml_backend_buffer_type_t buft)
{
	(void)buft;
	return false;	/* tensor->data of weights is no place to read them */
}

/* ------------------------------------------------------ graph compute */

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
	if (buffer_bind(b))
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
	struct qgg_weights *w = wb ? weights_find(wb, w0->data) : NULL;

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
	uint64_t id, h = hash_words(x->key, x->n_key);
	struct qgg_graph *e = x->n_key == SIZE_MAX ? NULL : cache_find(x->key, x->n_key, h);
	int err;

	if (e) {
		qgg.n_cached_runs++;
		err = qgraph_run(qgg.s, e->handle, NULL, QGRAPH_SUBMIT_BLOCK, &id);
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
		    e ? "run by handle" : "registered", x->n_key, err, res.total_ns / 1e3, res.compute_ns / 1e3,
		    (double)(ts.tv_sec * 1000000000ll + ts.tv_nsec - x->t0) / 1e3);
	}
	if (err)
		return xlate_fail(x, err, "qgraphd: %s", qgraph_session_error(qgg.s));
	qgg.n_graphs++;
	if (!e && x->n_key != SIZE_MAX)
		cache_add(x->key, x->n_key, h, res.handle);
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

static enum ggml_status backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph *cgraph)
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

/* ------------------------------------------------------------ backend */

static const char *backend_get_name(ggml_backend_t backend)
{
	(void)backend;
	return "QGRAPH";
}

static void backend_free(ggml_backend_t backend)
{
	free(backend);
}

static const struct ggml_backend_i qgg_backend_i = {
	.get_name = backend_get_name,
	.free = backend_free,
	.graph_compute = backend_graph_compute,
};

static ggml_guid_t backend_guid(void)
{
	static ggml_guid guid = { 0x71, 0x67, 0x72, 0x61, 0x70, 0x68, 0x64, 0x2d,
				  0x67, 0x67, 0x6d, 0x6c, 0x2d, 0x30, 0x30, 0x31 };
	return &guid;
}

/* ------------------------------------------------------------- device */

static const char *dev_get_name(ggml_backend_dev_t dev)
{
	(void)dev;
	return "QGRAPH0";
}

static const char *dev_get_description(ggml_backend_dev_t dev)
{
	(void)dev;
	return qgg.desc;
}

static void dev_get_memory(ggml_backend_dev_t dev, size_t *free_bytes, size_t *total)
{
	(void)dev;
	pthread_mutex_lock(&qgg.lock);
	if (pool_memory(free_bytes, total))
		*free_bytes = *total = 0;
	pthread_mutex_unlock(&qgg.lock);
}

static enum ggml_backend_dev_type dev_get_type(ggml_backend_dev_t dev)
{
	(void)dev;
	return GGML_BACKEND_DEVICE_TYPE_ACCEL;
}

static void dev_get_props(ggml_backend_dev_t dev, struct ggml_backend_dev_props *props)
{
	memset(props, 0, sizeof *props);
	props->name = dev_get_name(dev);
	props->description = dev_get_description(dev);
	props->type = GGML_BACKEND_DEVICE_TYPE_ACCEL;
	dev_get_memory(dev, &props->memory_free, &props->memory_total);
	/* async, host buffer, buffer_from_host_ptr, events: none */
}

static ggml_backend_t dev_init_backend(ggml_backend_dev_t dev, const char *params)
{
	ggml_backend_t b = calloc(1, sizeof *b);

	(void)params;
	if (!b)
		return NULL;
	*b = (struct ggml_backend){ .guid = backend_guid(), .iface = qgg_backend_i, .device = dev };
	return b;
}

static ggml_backend_buffer_type_t dev_get_buffer_type(ggml_backend_dev_t dev)
{
	(void)dev;
	return &qgg_buft;
}

/*
 * What runs here: MUL_MAT of contiguous Q4_0 weights held in this buffer
 * type (or not placed yet: test-backend-ops asks before it allocates) by
 * F32 activations, and the view ops around it (they compute nothing).  The
 * weights' buffer is only compared, never looked into: llama.cpp asks with
 * a zero-size dummy buffer.
 */
static bool dev_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor *op)
{
	(void)dev;
	switch (op->op) {
	case GGML_OP_NONE:
	case GGML_OP_RESHAPE:
	case GGML_OP_VIEW:
	case GGML_OP_PERMUTE:
	case GGML_OP_TRANSPOSE:
		return true;
	case GGML_OP_MUL_MAT: {
		const struct ggml_tensor *w = op->src[0], *a = op->src[1];
		return w->type == GGML_TYPE_Q4_0 && a->type == GGML_TYPE_F32 && op->type == GGML_TYPE_F32 &&
		       (!w->buffer || ggml_backend_buffer_get_type(w->buffer) == &qgg_buft) && w->view_src == NULL &&
		       ggml_is_contiguous(w) && a->nb[0] == sizeof(float) && ggml_is_contiguous(op) &&
		       /* stacked weights of odd row counts write a result per batch: at offsets the arena takes */
		       (w->ne[2] * w->ne[3] == 1 || w->ne[1] % 8 == 0 ||
			(op->nb[2] % QGG_ALIGN == 0 && op->nb[3] % QGG_ALIGN == 0));
	}
	default:
		return false;
	}
}

static bool dev_supports_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft)
{
	(void)dev;
	return buft == &qgg_buft;
}

static const struct ggml_backend_device_i qgg_dev_i = {
	.get_name = dev_get_name,
	.get_description = dev_get_description,
	.get_memory = dev_get_memory,
	.get_type = dev_get_type,
	.get_props = dev_get_props,
	.init_backend = dev_init_backend,
	.get_buffer_type = dev_get_buffer_type,
	.supports_op = dev_supports_op,
	.supports_buft = dev_supports_buft,
	/* offload_op stays NULL: a yes would copy host weights here every batch */
};

/* ---------------------------------------------------------- registry */

static const char *reg_get_name(ggml_backend_reg_t reg)
{
	(void)reg;
	return "QGRAPH";
}

static size_t reg_get_device_count(ggml_backend_reg_t reg)
{
	(void)reg;
	return qgg.s ? 1 : 0;
}

static ggml_backend_dev_t reg_get_device(ggml_backend_reg_t reg, size_t index)
{
	(void)reg;
	return qgg.s && index == 0 ? &qgg_dev : NULL;
}

static const struct ggml_backend_reg_i qgg_reg_i = {
	.get_name = reg_get_name,
	.get_device_count = reg_get_device_count,
	.get_device = reg_get_device,
};

/* Connect to qgraphd; without one the backend has no device, and says so once. */
static void connect_daemon(void)
{
	struct qgraph_connect_opts o = { .name = "ggml" };
	const char *env = getenv("QGRAPH_GGML_ARENA");
	char err[512];

	qgg.arena_bytes = QGG_ARENA_DEFAULT;
	qgg.trace = getenv("QGRAPH_GGML_TRACE") && *getenv("QGRAPH_GGML_TRACE") == '1';
	if (env && *env) {
		char *end;
		unsigned long long v = strtoull(env, &end, 10);
		switch (*end) {
		case 'G': case 'g': v <<= 30; break;
		case 'M': case 'm': v <<= 20; break;
		case 'K': case 'k': v <<= 10; break;
		case 0: break;
		default: v = 0; break;
		}
		if (v)
			qgg.arena_bytes = v;
		else
			say("QGRAPH_GGML_ARENA=%s is not a size (like 512M or 2G): using %llu MiB", env,
			    QGG_ARENA_DEFAULT >> 20);
	}
	o.arena_bytes = qgg.arena_bytes;
	int r = qgraph_connect(&o, &qgg.s, err, sizeof err);
	if (r) {
		say("no device: %s; this program goes on without qgraph", err);
		qgg.s = NULL;
		return;
	}
	snprintf(qgg.desc, sizeof qgg.desc, "qgraphd: Q4_0 matrix products, weights held once (libqgraph %s)",
		 qgraph_version());
}

static ggml_backend_reg_t qgg_reg_get(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	static bool refused;

	if (strncmp(ggml_commit(), QG_GGML_COMMIT, strlen(ggml_commit())) != 0 || !*ggml_commit()) {
		if (!refused)
			say("not registering: built for ggml commit %.12s, this process runs ggml %s "
			    "(rebuild qgraph with ./configure --with-ggml=DIR for this ggml)",
			    QG_GGML_COMMIT, ggml_commit());
		refused = true;
		return NULL;
	}
	pthread_once(&once, connect_daemon);
	qgg_buft = (struct ggml_backend_buffer_type){
		.iface = { .get_name = buft_get_name, .alloc_buffer = buft_alloc_buffer,
			   .get_alignment = buft_get_alignment, .is_host = buft_is_host },
		.device = &qgg_dev,
	};
	qgg_dev = (struct ggml_backend_device){ .iface = qgg_dev_i, .reg = &qgg_reg };
	qgg_reg = (struct ggml_backend_reg){ .api_version = GGML_BACKEND_API_VERSION, .iface = qgg_reg_i };
	return &qgg_reg;
}

/* The two symbols ggml's loader looks up (GGML_BACKEND_API_VERSION 2). */
QGG_EXPORT ggml_backend_reg_t ggml_backend_init(void);
QGG_EXPORT int ggml_backend_score(void);

ggml_backend_reg_t ggml_backend_init(void)
{
	return qgg_reg_get();
}

int ggml_backend_score(void)
{
	return 1;	/* one build, for every CPU it was compiled for */
}
