/*
 * arena.c - the shared arena and its buffer type (see arena.h).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "arena.h"
#include "buffer.h"
#include "dalloc.h"
#include "shm.h"

/* The free-block table of the pieces this side allocates in the window. */
#define ARENA_FREE_BLOCKS 1024

struct qg_arena {
	struct qg_buft buft;
	int fd;				/* the memfd, if this side created it; else -1 */
	unsigned char *map;
	size_t map_bytes;
	size_t win_off, win_bytes;	/* the tensor window in the mapping */
	struct qg_dalloc *da;		/* pieces of the window, made on first use */
	size_t n_buffers;		/* buffers over the window not yet freed */
};

/* --- buffers: CTX is the buffer's first byte --- */

static void *arena_base(struct qg_buffer *buf)
{
	return buf->ctx;
}

/* A buffer over a range the other side named: only the buffer is freed. */
static void named_free_buffer(struct qg_buffer *buf)
{
	struct qg_arena *a = buf->buft->ctx;

	a->n_buffers--;
	free(buf);
}

static const struct qg_buffer_i named_buffer_i = {
	.free_buffer = named_free_buffer,
	.base = arena_base,
};

/* A piece this side allocated: given back to the window's allocator. */
static void piece_free_buffer(struct qg_buffer *buf)
{
	struct qg_arena *a = buf->buft->ctx;
	size_t off = (size_t)((unsigned char *)buf->ctx - (a->map + a->win_off));

	/* a full block table would keep the piece: it is lost, never reused wrongly */
	qg_dalloc_release(a->da, off, buf->size);
	a->n_buffers--;
	free(buf);
}

static const struct qg_buffer_i piece_buffer_i = {
	.free_buffer = piece_free_buffer,
	.base = arena_base,
};

/* A new buffer struct over [OFF, OFF + SIZE) of A's window. */
static struct qg_buffer *buffer_new(struct qg_arena *a, const struct qg_buffer_i *iface, size_t off,
				    size_t size)
{
	struct qg_buffer *buf = calloc(1, sizeof *buf);

	if (!buf)
		return NULL;
	buf->iface = iface;
	buf->buft = &a->buft;
	buf->ctx = a->map + a->win_off + off;
	buf->size = size;
	a->n_buffers++;
	return buf;
}

int qg_arena_buffer_at(struct qg_arena *a, size_t offset, size_t size, struct qg_buffer **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!a || size == 0 || offset % QG_ARENA_ALIGN || offset > a->win_bytes || size > a->win_bytes - offset)
		return -EINVAL;
	*out = buffer_new(a, &named_buffer_i, offset, size);
	return *out ? 0 : -ENOMEM;
}

static const char *arena_name(const struct qg_buft *buft)
{
	(void)buft;
	return "arena";
}

static size_t arena_alignment(const struct qg_buft *buft)
{
	(void)buft;
	return QG_ARENA_ALIGN;
}

static size_t arena_max_size(const struct qg_buft *buft)
{
	const struct qg_arena *a = buft->ctx;
	return a->win_bytes;
}

static int arena_alloc_buffer(struct qg_buft *buft, size_t size, struct qg_buffer **out)
{
	struct qg_arena *a = buft->ctx;
	size_t off;
	int r;

	if (!a->da && !(a->da = qg_dalloc_new(QG_ARENA_ALIGN, a->win_bytes, ARENA_FREE_BLOCKS)))
		return -ENOMEM;
	if ((r = qg_dalloc_alloc(a->da, size, &off)))
		return -ENOMEM;
	if (!(*out = buffer_new(a, &piece_buffer_i, off, size))) {
		qg_dalloc_release(a->da, off, size);
		return -ENOMEM;
	}
	return 0;
}

static const struct qg_buft_i arena_buft_i = {
	.name = arena_name,
	.alloc_buffer = arena_alloc_buffer,
	.alignment = arena_alignment,
	.max_size = arena_max_size,
};

/* A new arena over the checked mapping of FD (BYTES); OWN_FD says whether the arena closes it. */
static int arena_open(int fd, size_t bytes, int own_fd, struct qg_arena **out)
{
	struct qg_arena *a;
	void *p;
	int r;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if ((r = qg_shm_map_checked(fd, bytes, &p)))
		return r;
	if (!(a = calloc(1, sizeof *a))) {
		qg_shm_unmap(p, bytes);
		return -ENOMEM;
	}
	a->fd = own_fd ? fd : -1;
	a->map = p;
	a->map_bytes = a->win_bytes = bytes;
	a->buft.ctx = a;
	a->buft.iface = &arena_buft_i;
	*out = a;
	return 0;
}

int qg_arena_create(const char *name, size_t bytes, struct qg_arena **out)
{
	int fd, r;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if ((fd = qg_shm_create(name, bytes)) < 0)
		return fd;
	/* the owner maps through the same checks: one path, and its own seals proved */
	if ((r = arena_open(fd, bytes, 1, out)))
		close(fd);
	return r;
}

int qg_arena_map(int fd, size_t bytes, struct qg_arena **out)
{
	return arena_open(fd, bytes, 0, out);
}

void qg_arena_free(struct qg_arena *a)
{
	if (!a)
		return;
	qg_shm_unmap(a->map, a->map_bytes);
	if (a->fd >= 0)
		close(a->fd);
	qg_dalloc_free(a->da);
	free(a);
}

int qg_arena_window(struct qg_arena *a, size_t offset, size_t bytes)
{
	if (!a || offset % QG_ARENA_ALIGN || bytes == 0 || offset > a->map_bytes || bytes > a->map_bytes - offset)
		return -EINVAL;
	if (a->n_buffers)
		return -EBUSY;
	/* no piece is out: the allocator of the old window can go */
	qg_dalloc_free(a->da);
	a->da = NULL;
	a->win_off = offset;
	a->win_bytes = bytes;
	return 0;
}

int qg_arena_fd(const struct qg_arena *a)
{
	return a->fd;
}

void *qg_arena_map_base(const struct qg_arena *a)
{
	return a->map;
}

void *qg_arena_base(const struct qg_arena *a)
{
	return a->map + a->win_off;
}

size_t qg_arena_bytes(const struct qg_arena *a)
{
	return a->win_bytes;
}

struct qg_buft *qg_arena_buft(struct qg_arena *a)
{
	return &a->buft;
}
