/*
 * buffer.h - buffer types and buffers: where tensor data lives.
 *
 * A buffer type (struct qg_buft) is a kind of memory: host memory, the
 * daemon's hugepage pool, a shared arena.  It makes buffers, says how they
 * must be aligned and how large one may be, and how many bytes a tensor
 * needs in it.  A buffer (struct qg_buffer) is one piece of such memory,
 * with a base address and a size; the graph allocator carves tensors out of
 * it at offsets it planned.
 *
 * Both are an interface table plus a context, as in ggml's backend
 * interface: each implementation is one static const table, and an entry
 * marked optional may be NULL (the wrappers below supply the default).
 * Callers use the wrappers, never the tables, so that every access is
 * checked in one place.
 *
 * Every buffer type here is host memory (the CPU backend reads it
 * directly); is_host is part of the interface so that a device buffer type
 * can be told apart when one exists.
 */
#ifndef QG_BUFFER_H
#define QG_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

enum qg_buffer_usage {
	QG_BUFFER_USAGE_ANY = 0,
	QG_BUFFER_USAGE_WEIGHTS,	/* long-lived: weights, never reused by the allocator */
	QG_BUFFER_USAGE_COMPUTE,	/* a graph's intermediates */
};

struct qg_buft;
struct qg_buffer;

struct qg_buft_i {
	const char *(*name)(const struct qg_buft *buft);
	/* A new buffer of SIZE (> 0) bytes in *OUT: 0, or -ENOMEM / -EINVAL / -E2BIG. */
	int (*alloc_buffer)(struct qg_buft *buft, size_t size, struct qg_buffer **out);
	/* The alignment every tensor in a buffer of this type gets (a power of two). */
	size_t (*alignment)(const struct qg_buft *buft);
	/* optional: the largest buffer this type makes (default SIZE_MAX) */
	size_t (*max_size)(const struct qg_buft *buft);
	/* optional: bytes tensor T needs in such a buffer (default qg_tensor_nbytes) */
	size_t (*alloc_size)(const struct qg_buft *buft, const struct qg_tensor *t);
	/* optional: true if the CPU can read and write its buffers (default true) */
	bool (*is_host)(const struct qg_buft *buft);
};

struct qg_buft {
	const struct qg_buft_i *iface;
	void *ctx;
};

struct qg_buffer_i {
	/* optional: release the memory and BUF itself */
	void (*free_buffer)(struct qg_buffer *buf);
	void *(*base)(struct qg_buffer *buf);
	/* optional: prepare T, just placed in BUF (default: nothing) */
	int (*init_tensor)(struct qg_buffer *buf, struct qg_tensor *t);
	/* optional for host buffers (default memcpy / memset at T's data) */
	void (*set_tensor)(struct qg_buffer *buf, struct qg_tensor *t, const void *data, size_t offset,
			   size_t size);
	void (*get_tensor)(struct qg_buffer *buf, const struct qg_tensor *t, void *data, size_t offset,
			   size_t size);
	void (*memset_tensor)(struct qg_buffer *buf, struct qg_tensor *t, uint8_t value, size_t offset,
			      size_t size);
	/* optional: fill the whole buffer with VALUE (default memset of base, size) */
	void (*clear)(struct qg_buffer *buf, uint8_t value);
};

struct qg_buffer {
	const struct qg_buffer_i *iface;
	struct qg_buft *buft;
	void *ctx;
	size_t size;
	enum qg_buffer_usage usage;
};

/* --- buffer types --- */
const char *qg_buft_name(const struct qg_buft *buft);
/* A buffer of SIZE bytes (0 is taken as 1) in *OUT.  0 or -errno; -E2BIG over max_size. */
int qg_buft_alloc_buffer(struct qg_buft *buft, size_t size, struct qg_buffer **out);
size_t qg_buft_alignment(const struct qg_buft *buft);
size_t qg_buft_max_size(const struct qg_buft *buft);
size_t qg_buft_alloc_size(const struct qg_buft *buft, const struct qg_tensor *t);
bool qg_buft_is_host(const struct qg_buft *buft);

/*
 * Host memory: buffers from the C heap, aligned to 64 bytes (a cache line,
 * and what every kernel needs).  One shared, stateless instance.
 */
struct qg_buft *qg_buft_host(void);

/* --- buffers --- */
/* Free BUF and its memory.  NULL is fine. */
void qg_buffer_free(struct qg_buffer *buf);
void *qg_buffer_base(struct qg_buffer *buf);
size_t qg_buffer_size(const struct qg_buffer *buf);
void qg_buffer_set_usage(struct qg_buffer *buf, enum qg_buffer_usage usage);
enum qg_buffer_usage qg_buffer_usage(const struct qg_buffer *buf);
void qg_buffer_clear(struct qg_buffer *buf, uint8_t value);

/*
 * Place tensor T (no data, no view source) at byte OFFSET of BUF: sets
 * T->data and T->buffer and calls init_tensor.  0, or -EINVAL if T does
 * not fit inside BUF at OFFSET or OFFSET breaks the type's alignment.
 */
int qg_buffer_place(struct qg_buffer *buf, struct qg_tensor *t, size_t offset);

/*
 * Give view T (view_src set, view_src placed) its data: view_src->data +
 * view_offs, and view_src's buffer.  0, or -EINVAL if the source has no
 * data or the view would reach past it.
 */
int qg_buffer_init_view(struct qg_tensor *t);

/*
 * Copy SIZE bytes into / out of / over tensor T's data from byte OFFSET.
 * -EINVAL (nothing done) unless T is placed in a buffer and OFFSET + SIZE
 * lies inside qg_tensor_nbytes(T), with overflow-safe arithmetic.
 */
int qg_tensor_set(struct qg_tensor *t, const void *data, size_t offset, size_t size);
int qg_tensor_get(const struct qg_tensor *t, void *data, size_t offset, size_t size);
int qg_tensor_memset(struct qg_tensor *t, uint8_t value, size_t offset, size_t size);

#endif /* QG_BUFFER_H */
