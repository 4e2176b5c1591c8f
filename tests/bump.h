/*
 * bump.h - a bump allocator over a fixed buffer for protobuf-c, as the
 * daemon decodes with: everything is released at once by resetting USED.
 * For the wire tests.
 */
#ifndef QG_TESTS_BUMP_H
#define QG_TESTS_BUMP_H

#include <stddef.h>

struct bump {
	unsigned char buf[1 << 16];
	size_t used, failures;
};

static void *bump_alloc(void *ctx, size_t size)
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

static void bump_free(void *ctx, void *p)
{
	(void)ctx;
	(void)p;	/* released all at once by resetting USED */
}

#endif /* QG_TESTS_BUMP_H */
