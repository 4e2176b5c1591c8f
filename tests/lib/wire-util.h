/*
 * wire-util.h - what the wire tests share: a bump allocator over a fixed
 * buffer for protobuf-c, as the daemon decodes with (everything released at
 * once by resetting USED), and a comparison of EventRef lists.
 */
#ifndef QG_TESTS_WIRE_UTIL_H
#define QG_TESTS_WIRE_UTIL_H

#include <stddef.h>

#include "qgraph.pb-c.h"

struct bump {
	unsigned char buf[1 << 16];
	size_t used, failures;
};

static inline void *bump_alloc(void *ctx, size_t size)
{
	struct bump *b = ctx;
	size_t at = (b->used + 15) & ~(size_t)15;

	if (size > sizeof b->buf || at > sizeof b->buf - size) {
		b->failures++;
		return NULL;
	}
	b->used = at + size;
	return b->buf + at;
}

static inline void bump_free(void *ctx, void *p)
{
	(void)ctx;
	(void)p;	/* released all at once by resetting USED */
}

/* Whether the lists A (NA entries) and B (NB) hold the same events, in order. */
static inline int events_equal(Qgraph__EventRef *const *a, size_t na, Qgraph__EventRef *const *b, size_t nb)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++)
		if (a[i]->index != b[i]->index || a[i]->value != b[i]->value)
			return 0;
	return 1;
}

#endif /* QG_TESTS_WIRE_UTIL_H */
