/*
 * dalloc.h - the dynamic allocator: offsets inside one range of bytes.
 *
 * It hands out aligned [offset, offset + size) pieces of a range of at
 * most MAX_SIZE bytes and takes them back.  Free space is kept as a table
 * of free blocks sorted by offset; an allocation takes the best-fitting
 * block (the smallest that is large enough), and a freed piece is merged
 * with the free blocks on either side.  The end of the range that was never
 * handed out is one free block too, and the high-water mark (the largest
 * end ever handed out) is what a buffer for the plan must hold.
 *
 * It never touches memory: the graph allocator plans offsets with it
 * before any buffer exists, and the hugepage pool carves its region with
 * it.  It never aborts: a full block table or no room is an error.
 */
#ifndef QG_DALLOC_H
#define QG_DALLOC_H

#include <stddef.h>

struct qg_dalloc;

/*
 * An allocator for a range of MAX_SIZE bytes (SIZE_MAX: unbounded, for
 * planning), handing out offsets aligned to ALIGN (a power of two), with
 * room for MAX_FREE_BLOCKS free blocks.  NULL on bad arguments or no memory.
 */
struct qg_dalloc *qg_dalloc_new(size_t align, size_t max_size, size_t max_free_blocks);
void qg_dalloc_free(struct qg_dalloc *da);
/* Forget every allocation: the whole range is one free block again; the high-water mark is reset. */
void qg_dalloc_reset(struct qg_dalloc *da);

/*
 * Allocate SIZE bytes (rounded up to the alignment; 0 counts as one unit):
 * 0 and the offset in *OFFSET, or -ENOSPC (no free block is large enough)
 * / -EOVERFLOW (SIZE too large to round).
 */
int qg_dalloc_alloc(struct qg_dalloc *da, size_t size, size_t *offset);

/*
 * Give back the SIZE bytes at OFFSET that qg_dalloc_alloc() handed out
 * (SIZE as passed to it).  0, or -ENOSPC when the free-block table is full
 * (the piece stays allocated: the caller may retry after other frees), or
 * -EINVAL when the piece overlaps free space or lies outside the range.
 */
int qg_dalloc_release(struct qg_dalloc *da, size_t offset, size_t size);

/* The high-water mark: the largest end of any piece handed out since the last reset. */
size_t qg_dalloc_high_water(const struct qg_dalloc *da);
/* Bytes handed out now (rounded sizes). */
size_t qg_dalloc_in_use(const struct qg_dalloc *da);
size_t qg_dalloc_alignment(const struct qg_dalloc *da);
/* The number of free blocks in the table now (the untouched end of the range counts as one). */
size_t qg_dalloc_n_free_blocks(const struct qg_dalloc *da);
/* Free block I (in offset order): 0 and its OFFSET and SIZE, or -ENOENT past the last. */
int qg_dalloc_free_block(const struct qg_dalloc *da, size_t i, size_t *offset, size_t *size);

#endif /* QG_DALLOC_H */
