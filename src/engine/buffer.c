/*
 * buffer.c - the checked wrappers around buffer types and buffers, and the
 * host buffer type (see buffer.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"

#define HOST_ALIGN 64

/* --- buffer types --- */

const char *qg_buft_name(const struct qg_buft *buft)
{
	return buft->iface->name(buft);
}

int qg_buft_alloc_buffer(struct qg_buft *buft, size_t size, struct qg_buffer **out)
{
	*out = NULL;
	if (size == 0)
		size = 1;
	if (size > qg_buft_max_size(buft))
		return -E2BIG;
	int r = buft->iface->alloc_buffer(buft, size, out);
	if (r == 0 && *out)
		(*out)->buft = buft;
	return r;
}

size_t qg_buft_alignment(const struct qg_buft *buft)
{
	return buft->iface->alignment(buft);
}

size_t qg_buft_max_size(const struct qg_buft *buft)
{
	return buft->iface->max_size ? buft->iface->max_size(buft) : SIZE_MAX;
}

size_t qg_buft_alloc_size(const struct qg_buft *buft, const struct qg_tensor *t)
{
	return buft->iface->alloc_size ? buft->iface->alloc_size(buft, t) : qg_tensor_nbytes(t);
}

bool qg_buft_is_host(const struct qg_buft *buft)
{
	return buft->iface->is_host ? buft->iface->is_host(buft) : true;
}

/* --- host memory --- */

static const char *host_name(const struct qg_buft *buft)
{
	(void)buft;
	return "host";
}

static size_t host_alignment(const struct qg_buft *buft)
{
	(void)buft;
	return HOST_ALIGN;
}

static void host_free_buffer(struct qg_buffer *buf)
{
	free(buf->ctx);
	free(buf);
}

static void *host_base(struct qg_buffer *buf)
{
	return buf->ctx;
}

static const struct qg_buffer_i host_buffer_i = {
	.free_buffer = host_free_buffer,
	.base = host_base,
};

static int host_alloc_buffer(struct qg_buft *buft, size_t size, struct qg_buffer **out)
{
	(void)buft;
	if (size > SIZE_MAX - HOST_ALIGN)
		return -E2BIG;
	size_t rounded = (size + HOST_ALIGN - 1) & ~(size_t)(HOST_ALIGN - 1);
	struct qg_buffer *buf = calloc(1, sizeof(*buf));
	void *mem = aligned_alloc(HOST_ALIGN, rounded);
	if (!buf || !mem) {
		free(buf);
		free(mem);
		return -ENOMEM;
	}
	buf->iface = &host_buffer_i;
	buf->ctx = mem;
	buf->size = size;
	*out = buf;
	return 0;
}

static const struct qg_buft_i host_buft_i = {
	.name = host_name,
	.alloc_buffer = host_alloc_buffer,
	.alignment = host_alignment,
};

static struct qg_buft host_buft = { .iface = &host_buft_i };

struct qg_buft *qg_buft_host(void)
{
	return &host_buft;
}

/* --- buffers --- */

void qg_buffer_free(struct qg_buffer *buf)
{
	if (!buf)
		return;
	if (buf->iface->free_buffer)
		buf->iface->free_buffer(buf);
}

void *qg_buffer_base(struct qg_buffer *buf)
{
	return buf->iface->base(buf);
}

size_t qg_buffer_size(const struct qg_buffer *buf)
{
	return buf->size;
}

void qg_buffer_set_usage(struct qg_buffer *buf, enum qg_buffer_usage usage)
{
	buf->usage = usage;
}

enum qg_buffer_usage qg_buffer_usage(const struct qg_buffer *buf)
{
	return buf->usage;
}

void qg_buffer_clear(struct qg_buffer *buf, uint8_t value)
{
	if (buf->iface->clear)
		buf->iface->clear(buf, value);
	else
		memset(qg_buffer_base(buf), value, buf->size);
}

int qg_buffer_place(struct qg_buffer *buf, struct qg_tensor *t, size_t offset)
{
	size_t need = qg_buft_alloc_size(buf->buft, t);
	size_t align = qg_buft_alignment(buf->buft);

	if (t->data || t->view_src || offset % align || offset > buf->size || need > buf->size - offset)
		return -EINVAL;
	t->data = (unsigned char *)qg_buffer_base(buf) + offset;
	t->buffer = buf;
	if (buf->iface->init_tensor) {
		int r = buf->iface->init_tensor(buf, t);
		if (r < 0) {
			t->data = NULL;
			t->buffer = NULL;
			return r;
		}
	}
	return 0;
}

int qg_buffer_init_view(struct qg_tensor *t)
{
	const struct qg_tensor *src = t->view_src;

	if (!src || !src->data)
		return -EINVAL;
	size_t span = qg_tensor_nbytes(src), need = qg_tensor_nbytes(t);
	if (t->view_offs > span || need > span - t->view_offs)
		return -EINVAL;
	t->data = (unsigned char *)src->data + t->view_offs;
	t->buffer = src->buffer;
	if (t->buffer && t->buffer->iface->init_tensor)
		return t->buffer->iface->init_tensor(t->buffer, t);
	return 0;
}

/* True if [OFFSET, OFFSET + SIZE) lies inside T's bytes and T is placed. */
static bool tensor_range_ok(const struct qg_tensor *t, size_t offset, size_t size)
{
	size_t n = qg_tensor_nbytes(t);
	return t->data && t->buffer && offset <= n && size <= n - offset;
}

int qg_tensor_set(struct qg_tensor *t, const void *data, size_t offset, size_t size)
{
	if (!tensor_range_ok(t, offset, size))
		return -EINVAL;
	if (t->buffer->iface->set_tensor)
		t->buffer->iface->set_tensor(t->buffer, t, data, offset, size);
	else if (size)
		memcpy((unsigned char *)t->data + offset, data, size);
	return 0;
}

int qg_tensor_get(const struct qg_tensor *t, void *data, size_t offset, size_t size)
{
	if (!tensor_range_ok(t, offset, size))
		return -EINVAL;
	if (t->buffer->iface->get_tensor)
		t->buffer->iface->get_tensor(t->buffer, t, data, offset, size);
	else if (size)
		memcpy(data, (const unsigned char *)t->data + offset, size);
	return 0;
}

int qg_tensor_memset(struct qg_tensor *t, uint8_t value, size_t offset, size_t size)
{
	if (!tensor_range_ok(t, offset, size))
		return -EINVAL;
	if (t->buffer->iface->memset_tensor)
		t->buffer->iface->memset_tensor(t->buffer, t, value, offset, size);
	else if (size)
		memset((unsigned char *)t->data + offset, value, size);
	return 0;
}
