/*
 * ggml-qgraph-cache.c - the graphs libggml-qgraph registered with the
 * daemon, by the key their translation produced (see ggml-qgraph-xlate.c):
 * llama.cpp sends the same few graphs every token, and each runs by its
 * handle after the first time.  The oldest makes room for a new one.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-qgraph-impl.h"

#define QGG_CACHE_MAX 256		/* registered graphs kept per process */

/* A registered graph: the key its translation produced and the daemon's handle. */
struct qgg_graph {
	uint64_t hash;
	uint64_t *key;
	size_t key_len;
	uint64_t handle;
};

/* Guarded by qgg.lock. */
static struct {
	struct qgg_graph e[QGG_CACHE_MAX];
	size_t n, next_evict;
} cache;

uint64_t qgg_key_hash(const uint64_t *w, size_t n)
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
void qgg_cache_flush(void)
{
	for (size_t i = 0; i < cache.n; i++) {
		qgraph_graph_unregister(qgg.s, cache.e[i].handle);
		free(cache.e[i].key);
	}
	cache.n = 0;
	cache.next_evict = 0;
}

int qgg_cache_find(const uint64_t *key, size_t len, uint64_t h, uint64_t *handle)
{
	for (size_t i = 0; i < cache.n; i++) {
		const struct qgg_graph *e = &cache.e[i];
		if (e->hash == h && e->key_len == len && memcmp(e->key, key, len * sizeof *key) == 0) {
			*handle = e->handle;
			return 0;
		}
	}
	return -ENOENT;
}

/* Keep HANDLE under KEY (copied); the oldest entry makes room when the cache is full. */
void qgg_cache_add(const uint64_t *key, size_t len, uint64_t h, uint64_t handle)
{
	uint64_t *k = malloc(len * sizeof *k);

	if (!k) {
		qgraph_graph_unregister(qgg.s, handle);
		return;
	}
	memcpy(k, key, len * sizeof *k);
	struct qgg_graph *e;
	if (cache.n < QGG_CACHE_MAX) {
		e = &cache.e[cache.n++];
	} else {
		e = &cache.e[cache.next_evict];
		cache.next_evict = (cache.next_evict + 1) % QGG_CACHE_MAX;
		qgraph_graph_unregister(qgg.s, e->handle);
		free(e->key);
	}
	*e = (struct qgg_graph){ .hash = h, .key = k, .key_len = len, .handle = handle };
}
