/*
 * gguf-names-test.c - the GGUF writer's check that a tensor name is new
 * costs about the same whatever the number of tensors: the writer's
 * source is compiled here with its strcmp counted, and each of 100,000
 * tensors, added and then added again (refused), may cost only a few
 * comparisons.  A check that walked every name would pass the bound by
 * the 30th tensor, so the test fails at once rather than after minutes.
 * The file written reads back with every name in it.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static unsigned long long compares;

static int counted_strcmp(const char *a, const char *b)
{
	compares++;
	return strcmp(a, b);
}

#define strcmp counted_strcmp
#include "gguf-write.c"
#undef strcmp

/* Comparisons allowed for the I-th name: a few probes each, with room for the first few. */
#define BOUND(i) (8ull * (unsigned long long)(i) + 64)

int main(void)
{
	const char *scale = getenv("QGRAPH_TEST_SCALE");
	size_t n = scale && atoi(scale) == 0 ? 20000 : 100000, i;
	struct qg_gguf_writer *w = qg_gguf_writer_new(0);
	int64_t ne[1] = { 1 };
	float one = 1.0f;
	char name[32];
	int r = 0;

	if (!w) {
		tap_ok(0, "a writer");
		return tap_done();
	}
	for (i = 0; i < n && !r && compares <= BOUND(i); i++) {
		snprintf(name, sizeof name, "blk.%zu.weight", i);
		r = qg_gguf_writer_tensor(w, name, 0 /* f32 */, 1, ne, &one);
	}
	tap_ok(i == n && !r && compares <= BOUND(n), "%zu tensors of distinct names added (%d), %llu comparisons", i,
	       r, compares);

	compares = 0;
	for (i = 0, r = -EEXIST; i < n && r == -EEXIST && compares <= BOUND(i); i++) {
		snprintf(name, sizeof name, "blk.%zu.weight", i);
		r = qg_gguf_writer_tensor(w, name, 0, 1, ne, &one);
	}
	tap_ok(i == n && r == -EEXIST && compares <= BOUND(n),
	       "each of them added again: refused, -EEXIST (%d at %zu), %llu comparisons", r, i, compares);
	tap_ok(qg_gguf_writer_tensor(w, "blk.weight", 0, 1, ne, &one) == 0 && w->n_t == n + 1,
	       "a name that only shares their letters is new");

	void *buf = NULL;
	size_t len = 0;
	struct qg_gguf *g = NULL;
	char err[256] = "";
	r = qg_gguf_writer_finish(w, &buf, &len);
	tap_ok(r == 0 && qg_gguf_open(buf, len, &g, err, sizeof err) == 0 && qg_gguf_tensor_count(g) == n + 1,
	       "the file reads back with %zu tensors (%d%s%s)", n + 1, r, *err ? ": " : "", err);
	size_t missing = 0;
	for (i = 0; g && i < n; i++) {
		snprintf(name, sizeof name, "blk.%zu.weight", i);
		missing += qg_gguf_tensor_find(g, name) == NULL;
	}
	tap_ok(g && missing == 0, "every name is in it (%zu missing)", missing);
	qg_gguf_free(g);
	free(buf);
	qg_gguf_writer_free(w);
	return tap_done();
}
