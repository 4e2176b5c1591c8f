/*
 * ggml-qgraph-buffer.c - libggml-qgraph's two buffer types and their
 * buffers (see ggml-qgraph.c for the roles they play): QGRAPH, host
 * memory that is the session arena mapped under a buffer's addresses (the
 * KV cache, activations and results, the weights the daemon does not
 * hold), and QGRAPH_WEIGHTS, quantized weights (Q4_0, Q4_K, Q6_K, Q8_0)
 * uploaded to the daemon, read back through it and let go.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ggml-qgraph-impl.h"

struct ggml_backend_buffer_type qgg_buft, qgg_wbuft;

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

/* ------------------------------------------------------------ weights */

int qgg_weights_qtype(enum ggml_type t)
{
	switch (t) {
	case GGML_TYPE_Q4_0: return QGRAPH_TYPE_Q4_0;
	case GGML_TYPE_Q4_K: return QGRAPH_TYPE_Q4_K;
	case GGML_TYPE_Q6_K: return QGRAPH_TYPE_Q6_K;
	case GGML_TYPE_Q8_0: return QGRAPH_TYPE_Q8_0;
	default: return -1;
	}
}

struct qgg_weights *qgg_weights_find(struct qgg_buffer *b, const void *data)
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
	struct qgg_weights *w = qgg_weights_find(b, t->data);

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
	*w = (struct qgg_weights){ .data = t->data, .nbytes = ggml_nbytes(t), .handles = handles,
				   .type = (enum qgraph_type)qgg_weights_qtype(t->type) };
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
		qgg_cache_flush();	/* registered graphs hold their weights */
	w->n_handles = 0;
	for (size_t i = 0; i < slices; i++) {
		if (w->handles[i])
			qgraph_weights_free(qgg.s, w->handles[i]);
		w->handles[i] = 0;
	}
}

/*
 * Upload ROWS x ne[0] values of W's type at DATA as W's handle I, as that
 * same type (for Q4_0 the daemon picks its layout).  0 or -errno (B says why).
 */
static int upload_one(struct qgg_buffer *b, struct qgg_weights *w, size_t i, const unsigned char *data, int64_t rows)
{
	struct qgraph_upload_opts uo = { .size = sizeof uo, .src_type = w->type, .target = w->type,
					 .rows = rows, .cols = w->ne[0], .data = data };
	int err = qgraph_weights_upload(qgg.s, &uo, &w->handles[i], &w->stored);
	if (err) {
		w->handles[i] = 0;
		buffer_fail(b, "uploading a %s tensor of %" PRId64 " x %" PRId64 " to qgraphd: %s",
			    qgraph_type_name(w->type), rows, w->ne[0], qgraph_session_error(qgg.s));
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
 * Read W's handle I back from the daemon in ggml's layout of its type into
 * OUT: the daemon copies it into the arena (a cast to that type, which
 * unpacks an interleaved Q4_0 layout).
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
		err = qgraph_graph_output(g, qgraph_graph_cast(g, src, w->type), off);
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
		const char *why = qgraph_session_error(qgg.s);
		buffer_fail(b, "reading %s weights back from qgraphd: %s", qgraph_type_name(w->type),
			    why && why[0] ? why : strerror(-err));
	}
	qgraph_arena_free(qgg.s, off);
	return err < 0 ? err : 0;
}

/* ------------------------------------------------------------ buffers */

/* Map the arena under B's addresses, once: the bytes of every tensor that is not weights. */
int qgg_buffer_bind(struct qgg_buffer *b)
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
	qgg.arena_held += b->mapped_size + page;
	return 0;
}

/*
 * Whether T, set into B, is weights for the daemon.  In a QGRAPH_WEIGHTS
 * buffer they have no other bytes; in a QGRAPH one (a program that puts
 * its weights in the device's default type, as test-backend-ops does)
 * they are uploaded and their bytes kept in the arena too, where the CPU
 * may read them.  Q8_0 only in a buffer of model weights: elsewhere it may
 * be a KV cache or the source of a GET_ROWS or CPY, which read it in the
 * arena.
 */
static bool is_weights(ggml_backend_buffer_t buffer, const struct ggml_tensor *t)
{
	enum ggml_backend_buffer_usage usage = ggml_backend_buffer_get_usage(buffer);

	if (t->view_src != NULL || usage == GGML_BACKEND_BUFFER_USAGE_COMPUTE || qgg_weights_qtype(t->type) < 0)
		return false;
	return t->type != GGML_TYPE_Q8_0 || usage == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
}

/* Whether B is of type QGRAPH: host memory, the arena mapped at its addresses from the start. */
static bool is_host(const struct qgg_buffer *b)
{
	return b->host;
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
		qgg_cache_flush();	/* registered graphs name offsets in this buffer */
		qgraph_arena_free(qgg.s, b->arena_raw);
		qgg.arena_held -= b->mapped_size + page_size();
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

/*
 * SIZE bytes at OFFSET of view T were just written into B's arena (DATA,
 * or NULL for a memset already done there): if T views weights of B, the
 * daemon's copy must follow, or the device would compute with the old
 * bytes while the CPU reads the new ones.  test-backend-ops does this: it
 * fills the permuted view of its weights, not the weights.  Weights
 * being set in pieces take the bytes into their staging copy; in a
 * QGRAPH buffer the arena holds the whole tensor, now current, and is
 * uploaded again; a QGRAPH_WEIGHTS buffer has no other copy to complete
 * the write from, so it is refused.  Caller holds the lock.
 */
static void view_written(struct qgg_buffer *b, const struct ggml_tensor *t, const void *data, size_t offset,
			 size_t size)
{
	struct qgg_weights *w = t->view_src ? qgg_weights_find(b, t->view_src->data) : NULL;

	if (!w)
		return;
	size_t at = (size_t)((const char *)t->data - (const char *)w->data) + offset;
	if (at > w->nbytes || size > w->nbytes - at) {
		buffer_fail(b, "%s writes past the weights %s it views", t->name, t->view_src->name);
		return;
	}
	if (w->staged) {
		if (data)
			memcpy(w->staged + at, data, size);
		else
			memcpy(w->staged + at, (const char *)t->data + offset, size);
		return;
	}
	if (!w->n_handles)
		return;
	if (is_host(b))
		weights_upload(b, w, w->data);
	else
		buffer_fail(b, "%s writes weights %s through a view: weights are set whole", t->name,
			    t->view_src->name);
}

static void buffer_set_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor *t, const void *data, size_t offset,
			      size_t size)
{
	struct qgg_buffer *b = buffer->context;

	pthread_mutex_lock(&qgg.lock);
	if (!is_weights(buffer, t) || is_host(b)) {
		if (qgg_buffer_bind(b) == 0)
			memcpy((char *)t->data + offset, data, size);
		if (!is_weights(buffer, t)) {
			view_written(b, t, data, offset, size);
			goto out;
		}
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
	if (!is_weights(buffer, t) || is_host(b) || !(w = qgg_weights_find(b, t->data))) {
		if (qgg_buffer_bind(b) == 0)
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
		if (qgg_buffer_bind(b) == 0) {
			memset((char *)t->data + offset, value, size);
			view_written(b, t, NULL, offset, size);
		}
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
	return buft == &qgg_wbuft ? "QGRAPH_WEIGHTS" : "QGRAPH";
}

/*
 * The daemon's pool in bytes (*TOTAL) and what is free of it; 0 or -errno.
 * With SHARED, the weights other sessions already hold count as free: a
 * process on the same model sends none of them again (the daemon knows
 * them by digest), and fit must not give it fewer layers than the first.
 */
int qgg_pool_memory(size_t *free_bytes, size_t *total, bool shared)
{
	char buf[8192];
	unsigned long long bytes = 0, used = 0, referenced = 0;
	ssize_t n = qgraph_stats(qgg.s, buf, sizeof buf - 1);

	if (n < 0)
		return (int)n;
	buf[n] = 0;
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		sscanf(line, "pool_bytes %llu", &bytes);
		sscanf(line, "pool_used %llu", &used);
		sscanf(line, "weights_referenced_bytes %llu", &referenced);
	}
	if (shared)	/* referenced counts a shared matrix once per holder: at most what is used */
		used -= referenced < used ? referenced : used;
	*total = bytes;
	*free_bytes = bytes > used ? bytes - used : 0;
	return 0;
}

/*
 * A buffer of SIZE bytes of BUFT: address space; for QGRAPH the arena
 * mapped there at once (the CPU backend reads and writes it directly, the
 * KV cache among it), NULL with the reason on stderr where the session
 * arena has no room.
 */
static ggml_backend_buffer_t buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size)
{
	size_t mapped = round_up(size ? size : 1, page_size()), pool = 0, pool_free = 0;

	pthread_mutex_lock(&qgg.lock);
	int err = qgg_pool_memory(&pool_free, &pool, false);
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
	b->host = buft == &qgg_buft;
	if (b->host) {
		pthread_mutex_lock(&qgg.lock);
		err = qgg_buffer_bind(b);
		pthread_mutex_unlock(&qgg.lock);
		if (err) {
			munmap(b->base, b->mapped_size);
			free(b);
			return NULL;
		}
	}
	return ggml_backend_buffer_init(buft, qgg_buffer_i, b, size);
}

static size_t buft_get_alignment(ggml_backend_buffer_type_t buft)
{
	(void)buft;
	return QGG_ALIGN;
}

/*
 * QGRAPH is host memory: the CPU backend runs the ops the device does not
 * claim on its tensors in place (no copies), and llama.cpp writes its
 * inputs there.  QGRAPH_WEIGHTS is not: tensor->data of weights is no
 * place to read them.
 */
static bool buft_is_host(ggml_backend_buffer_type_t buft)
{
	return buft == &qgg_buft;
}

const struct ggml_backend_buffer_type_i qgg_buft_i = {
	.get_name = buft_get_name,
	.alloc_buffer = buft_alloc_buffer,
	.get_alignment = buft_get_alignment,
	.is_host = buft_is_host,
};
