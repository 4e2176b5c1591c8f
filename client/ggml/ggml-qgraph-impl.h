/*
 * ggml-qgraph-impl.h - what the files of libggml-qgraph.so share (see
 * ggml-qgraph.c for the backend as a whole): the state every backend and
 * buffer shares, a buffer and the weights it holds in the daemon, and each
 * file's entry points.  Private: nothing here leaves the library.
 *
 *   ggml-qgraph.c          the device, the backend and the registry; the exports
 *   ggml-qgraph-buffer.c   the buffer type, buffers, weights in the daemon
 *   ggml-qgraph-graph.c    graph_compute: a ggml graph translated to a qgraph one
 *   ggml-qgraph-xlate.c    its pieces: the graph builders and the key, sources
 *   ggml-qgraph-cache.c    the graphs registered with the daemon, by key
 *
 * Calls go down that list only (the cache calls none of the others).
 */
#ifndef QG_GGML_QGRAPH_IMPL_H
#define QG_GGML_QGRAPH_IMPL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-backend-impl.h"

#include "qgraph.h"

#define QGG_ALIGN 64			/* tensor alignment: the arena's */

/* ---------------------------------------------------------------- state */

/*
 * A quantized tensor held by the daemon: one weights handle for the whole, or
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
	enum qgraph_type type;		/* the tensor's type (qgg_weights_qtype) */
	enum qgraph_type stored;	/* the layout the daemon chose (the same for every slice) */
	unsigned char *staged;		/* a tensor set in pieces: its bytes until all arrived */
	size_t staged_bytes;
};

/* One buffer of the buffer type: address space, the arena under it once bound, the weights set into it. */
struct qgg_buffer {
	unsigned char *base;		/* the reservation: SIZE bytes rounded to pages */
	size_t size, mapped_size;
	int64_t arena_raw;		/* qgraph_arena_alloc's offset, -1 until bound */
	int64_t arena_off;		/* where BASE's bytes are in the arena once bound */
	struct qgg_weights *w;		/* sorted by data */
	size_t n_w, cap_w;
	char error[256];		/* the first error: the next graph_compute fails with it */
	bool host;			/* of type QGRAPH: bound from the start, every byte in the arena */
};

/* The state all backends and buffers share; LOCK guards it (and each file's own). */
struct qgg_state {
	pthread_mutex_t lock;
	struct qgraph_session *s;
	size_t arena_bytes;
	size_t arena_held;		/* arena bytes the buffers hold (mapped), of ARENA_BYTES */
	char desc[160];
	uint64_t n_graphs, n_cached_runs;
	bool trace;				/* QGRAPH_GGML_TRACE: a line per graph on stderr */
};
extern struct qgg_state qgg;		/* ggml-qgraph.c */

/* A line on stderr, prefixed "qgraph: ". */
static inline void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("qgraph: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/*
 * ggml-qgraph-buffer.c: the buffer types (their device is set at
 * registration) and their functions: QGG_BUFT (QGRAPH, the device's
 * default: host memory over the arena) and QGG_WBUFT (QGRAPH_WEIGHTS, the
 * device's extra type: weights held in the daemon, no bytes here).
 */
extern struct ggml_backend_buffer_type qgg_buft, qgg_wbuft;
extern const struct ggml_backend_buffer_type_i qgg_buft_i;
/* The qgraph type the daemon holds weights of ggml type T as (Q4_0, Q4_K, Q6_K, Q8_0), or -1. */
int qgg_weights_qtype(enum ggml_type t);
/* The weights entry of B for the tensor at DATA, or NULL if B holds none there. */
struct qgg_weights *qgg_weights_find(struct qgg_buffer *b, const void *data);
/* Map the arena under B's addresses, once; 0 or -errno (B says why).  Caller holds the lock. */
int qgg_buffer_bind(struct qgg_buffer *b);
/*
 * The daemon's pool in bytes (*TOTAL) and what is free of it, counting the
 * weights other sessions hold as free if SHARED; 0 or -errno.  Caller
 * holds the lock.
 */
int qgg_pool_memory(size_t *free_bytes, size_t *total, bool shared);

/* ggml-qgraph-graph.c: the backend's graph_compute: CGRAPH's MUL_MATs run in the daemon. */
enum ggml_status qgg_graph_compute(ggml_backend_t backend, struct ggml_cgraph *cgraph);

/*
 * ggml-qgraph-cache.c: the graphs registered with the daemon, each under
 * the key its translation produced.  Callers hold the lock.
 */
/* A hash of the key W[0..N). */
uint64_t qgg_key_hash(const uint64_t *w, size_t n);
/* The handle of the graph registered under KEY[0..LEN) (hash H) in *HANDLE; 0, or -ENOENT if none is. */
int qgg_cache_find(const uint64_t *key, size_t len, uint64_t h, uint64_t *handle);
/* Keep HANDLE under KEY (copied); the oldest entry makes room when the cache is full (unregistered). */
void qgg_cache_add(const uint64_t *key, size_t len, uint64_t h, uint64_t handle);
/* Unregister and forget every graph (their weights or arena bytes are about to go). */
void qgg_cache_flush(void);

#endif /* QG_GGML_QGRAPH_IMPL_H */
