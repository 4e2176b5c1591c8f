/*
 * arena.h - a shared arena: a sealed memfd that two processes map, and a
 * buffer type over it so that tensors can live in it at offsets.
 *
 * The side that owns the arena creates it (qg_arena_create: a memfd sized
 * and sealed against growing, shrinking and further sealing, see shm.h) and
 * passes its fd; the other side maps it only after checking the seals and
 * the size (qg_arena_map).  Neither side can then shrink the file under the
 * other (SIGBUS) or grow it.
 *
 * The tensors go in a window of the file: the whole file by default, or a
 * part of it (qg_arena_window), as in the session region, whose tensor
 * arena follows its header, rings and events in the same memfd.  The rest
 * of the mapping is the caller's (qg_arena_map_base).
 *
 * Buffers over the window come in two kinds, for the two sides of an arena:
 *   - qg_buft_alloc_buffer(qg_arena_buft(a), ...): a piece that this side
 *     allocates (dalloc.h) and gives back when the buffer is freed: for the
 *     side that decides where things go in the window;
 *   - qg_arena_buffer_at(a, offset, size, ...): a buffer over a range the
 *     other side named, checked to lie inside the window; freeing it frees
 *     only the buffer, never the range.
 * One window is allocated by one side: mixing the two on the same bytes is
 * the caller's mistake, not something the arena can see.
 *
 * Not thread-safe.
 */
#ifndef QG_ARENA_H
#define QG_ARENA_H

#include <stddef.h>

struct qg_arena;
struct qg_buft;
struct qg_buffer;

/* Offsets of tensors and buffers in the window are multiples of this. */
#define QG_ARENA_ALIGN 64

/*
 * The owner's side: a new sealed memfd of BYTES (> 0) named NAME, mapped.
 * 0 and the arena in *OUT, or -errno.  The arena keeps the fd (qg_arena_fd).
 */
int qg_arena_create(const char *name, size_t bytes, struct qg_arena **out);

/*
 * The receiving side: map FD after checking that it is sealed against
 * growing, shrinking and sealing, and is exactly BYTES.  0 and the arena
 * in *OUT; -EPERM seals missing, -EINVAL size differs, or another -errno.
 * FD stays the caller's (close it when it is no longer needed).
 */
int qg_arena_map(int fd, size_t bytes, struct qg_arena **out);

/* Unmap A (and close its fd if it created it).  Every buffer over it must be freed first.  NULL is fine. */
void qg_arena_free(struct qg_arena *a);

/*
 * Put the tensor window at [OFFSET, OFFSET + BYTES) of the file: OFFSET a
 * multiple of QG_ARENA_ALIGN, the window inside the file, no buffer over
 * the arena alive.  0 or -EINVAL / -EBUSY.
 */
int qg_arena_window(struct qg_arena *a, size_t offset, size_t bytes);

/* The fd of an arena this side created (-1 for one it mapped): still the arena's. */
int qg_arena_fd(const struct qg_arena *a);
/* The whole mapping (the file's first byte). */
void *qg_arena_map_base(const struct qg_arena *a);
/* The window: where offset 0 of its buffers is, and its size. */
void *qg_arena_base(const struct qg_arena *a);
size_t qg_arena_bytes(const struct qg_arena *a);

/* The buffer type over A's window (lives as long as A). */
struct qg_buft *qg_arena_buft(struct qg_arena *a);

/*
 * A buffer over [OFFSET, OFFSET + SIZE) of A's window, a range the other
 * side named: OFFSET aligned, SIZE > 0, the range inside the window
 * (overflow-safe).  0 and the buffer in *OUT, or -EINVAL / -ENOMEM.
 */
int qg_arena_buffer_at(struct qg_arena *a, size_t offset, size_t size, struct qg_buffer **out);

#endif /* QG_ARENA_H */
