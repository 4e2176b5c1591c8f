/*
 * buffer-test.c - buffer types and buffers: the host buffer type, the
 * checked wrappers' defaults, placing tensors and views inside a buffer's
 * bounds, and set/get/memset refusing ranges outside a tensor (offsets
 * that overflow included).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "buffer.h"
#include "tap.h"

/* A buffer type with a small max size, on the host type's memory. */
static size_t small_max(const struct qg_buft *b)
{
	(void)b;
	return 4096;
}

static const char *small_name(const struct qg_buft *b)
{
	(void)b;
	return "small";
}

static int small_alloc(struct qg_buft *b, size_t size, struct qg_buffer **out)
{
	(void)b;
	return qg_buft_host()->iface->alloc_buffer(qg_buft_host(), size, out);
}

static size_t small_alignment(const struct qg_buft *b)
{
	(void)b;
	return 256;
}

static const struct qg_buft_i small_i = {
	.name = small_name,
	.alloc_buffer = small_alloc,
	.alignment = small_alignment,
	.max_size = small_max,
};

static void test_host(void)
{
	struct qg_buft *host = qg_buft_host();
	struct qg_buffer *buf = NULL;

	tap_ok(strcmp(qg_buft_name(host), "host") == 0 && qg_buft_alignment(host) == 64 &&
	       qg_buft_max_size(host) == SIZE_MAX && qg_buft_is_host(host), "host: name, 64-byte alignment, no max, host");
	tap_ok(qg_buft_alloc_buffer(host, 1000, &buf) == 0 && buf && qg_buffer_size(buf) == 1000 &&
	       (uintptr_t)qg_buffer_base(buf) % 64 == 0 && buf->buft == host, "a buffer of 1000 bytes, aligned");
	qg_buffer_set_usage(buf, QG_BUFFER_USAGE_COMPUTE);
	tap_ok(qg_buffer_usage(buf) == QG_BUFFER_USAGE_COMPUTE, "usage kept");
	qg_buffer_clear(buf, 0xa5);
	const unsigned char *p = qg_buffer_base(buf);
	tap_ok(p[0] == 0xa5 && p[999] == 0xa5, "clear fills the whole buffer");
	qg_buffer_free(buf);
	buf = (struct qg_buffer *)1;
	tap_ok(qg_buft_alloc_buffer(host, 0, &buf) == 0 && buf && qg_buffer_size(buf) == 1, "size 0 taken as 1");
	qg_buffer_free(buf);
	buf = (struct qg_buffer *)1;
	tap_ok(qg_buft_alloc_buffer(host, SIZE_MAX - 10, &buf) < 0 && buf == NULL, "an impossible size fails, *out NULL");
	qg_buffer_free(NULL);

	struct qg_buft small = { .iface = &small_i };
	tap_ok(qg_buft_alloc_buffer(&small, 4097, &buf) == -E2BIG && !buf, "over max_size: -E2BIG");
	tap_ok(qg_buft_alloc_buffer(&small, 4096, &buf) == 0 && buf->buft == &small, "at max_size: fine");
	qg_buffer_free(buf);
}

static void test_place(void)
{
	struct qg_ctx *ctx = qg_ctx_new(16);
	struct qg_buffer *buf = NULL;
	struct qg_tensor *a = qg_tensor_new_2d(ctx, QG_TYPE_F32, 16, 4);	/* 256 bytes */
	struct qg_tensor *b = qg_tensor_new_2d(ctx, QG_TYPE_F32, 16, 4);

	if (!a || !b || qg_buft_alloc_buffer(qg_buft_host(), 512, &buf) < 0) {
		tap_ok(0, "setup");
		return;
	}
	tap_ok(qg_buffer_place(buf, a, 32) == -EINVAL && !a->data, "a misaligned offset: -EINVAL");
	tap_ok(qg_buffer_place(buf, a, 320) == -EINVAL && qg_buffer_place(buf, a, 1024) == -EINVAL &&
	       qg_buffer_place(buf, a, SIZE_MAX - 63) == -EINVAL && !a->data, "past the end, or an overflowing offset: -EINVAL");
	tap_ok(qg_buffer_place(buf, a, 256) == 0 && a->data == (char *)qg_buffer_base(buf) + 256 && a->buffer == buf,
	       "exactly at the end: placed");
	tap_ok(qg_buffer_place(buf, a, 0) == -EINVAL, "a tensor with data is not placed again");

	struct qg_tensor *v = qg_tensor_view(ctx, b, 1, (const int64_t[]){ 16 }, NULL, 64);
	tap_ok(v && qg_buffer_init_view(v) == -EINVAL && !v->data, "a view of a source without data: -EINVAL");
	tap_ok(qg_buffer_place(buf, v, 0) == -EINVAL, "a view is never placed");
	tap_ok(qg_buffer_place(buf, b, 0) == 0 && qg_buffer_init_view(v) == 0 && v->data == (char *)b->data + 64 &&
	       v->buffer == buf, "a view of a placed source: its bytes, its buffer");
	v->data = NULL;
	v->view_offs = 200;	/* 64 bytes from 200 reach past b's 256 */
	tap_ok(qg_buffer_init_view(v) == -EINVAL && !v->data, "a view reaching past its source: -EINVAL");
	v->view_offs = SIZE_MAX - 8;
	tap_ok(qg_buffer_init_view(v) == -EINVAL, "a view at an overflowing offset: -EINVAL");

	float in[64], out[64];
	for (int i = 0; i < 64; i++)
		in[i] = (float)i;
	tap_ok(qg_tensor_set(a, in, 0, 256) == 0 && qg_tensor_get(a, out, 0, 256) == 0 && !memcmp(in, out, 256),
	       "set then get the whole tensor");
	tap_ok(qg_tensor_set(a, in, 252, 4) == 0 && qg_tensor_set(a, in, 256, 0) == 0, "the last float, and nothing at the end");
	tap_ok(qg_tensor_set(a, in, 253, 4) == -EINVAL && qg_tensor_get(a, out, 0, 257) == -EINVAL &&
	       qg_tensor_memset(a, 0, 257, 0) == -EINVAL, "a byte past the end: -EINVAL");
	tap_ok(qg_tensor_set(a, in, SIZE_MAX, 2) == -EINVAL && qg_tensor_get(a, out, 8, SIZE_MAX - 4) == -EINVAL &&
	       qg_tensor_memset(a, 0, SIZE_MAX - 1, 4) == -EINVAL, "overflowing offset + size: -EINVAL");
	tap_ok(qg_tensor_memset(a, 0, 4, 8) == 0 && qg_tensor_get(a, out, 0, 16) == 0 && out[0] == 0.0f &&
	       out[1] == 0.0f && out[2] == 0.0f && out[3] == 3.0f, "memset a range");
	struct qg_tensor *c = qg_tensor_new_1d(ctx, QG_TYPE_F32, 4);
	tap_ok(qg_tensor_set(c, in, 0, 4) == -EINVAL && qg_tensor_get(c, out, 0, 0) == -EINVAL,
	       "a tensor not placed in a buffer: -EINVAL");

	qg_buffer_free(buf);
	qg_ctx_free(ctx);
}

int main(void)
{
	test_host();
	test_place();
	return tap_done();
}
