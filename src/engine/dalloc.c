/*
 * dalloc.c - the dynamic allocator: aligned offsets in one range of bytes,
 * best fit over a bounded table of free blocks sorted by offset (see
 * dalloc.h).
 *
 * The table is an array kept in offset order: a release finds its place by
 * binary search and merges with the blocks on either side, so that no two
 * free blocks ever touch.  An allocation scans the table for the smallest
 * block that fits, but takes the block holding the high-water mark (the
 * untouched end of the range) only when nothing below it fits: growing the
 * mark is what makes a planned buffer larger.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dalloc.h"

struct dalloc_block {
	size_t offset, size;
};

struct qg_dalloc {
	size_t align, max_size;
	size_t n_free, max_free;
	struct dalloc_block *free;
	size_t high_water, in_use;
};

struct qg_dalloc *qg_dalloc_new(size_t align, size_t max_size, size_t max_free_blocks)
{
	struct qg_dalloc *da;

	if (align == 0 || (align & (align - 1)) || max_size == 0 || max_free_blocks == 0 ||
	    max_free_blocks > SIZE_MAX / sizeof(struct dalloc_block))
		return NULL;
	da = calloc(1, sizeof(*da));
	if (!da)
		return NULL;
	da->free = calloc(max_free_blocks, sizeof(*da->free));
	if (!da->free) {
		free(da);
		return NULL;
	}
	da->align = align;
	da->max_size = max_size;
	da->max_free = max_free_blocks;
	qg_dalloc_reset(da);
	return da;
}

void qg_dalloc_free(struct qg_dalloc *da)
{
	if (!da)
		return;
	free(da->free);
	free(da);
}

void qg_dalloc_reset(struct qg_dalloc *da)
{
	da->free[0].offset = 0;
	da->free[0].size = da->max_size;
	da->n_free = 1;
	da->high_water = 0;
	da->in_use = 0;
}

/* SIZE rounded up to the alignment (0 taken as one unit) in *OUT; -EOVERFLOW if it does not fit. */
static int dalloc_round(const struct qg_dalloc *da, size_t size, size_t *out)
{
	if (size == 0)
		size = 1;
	if (size > SIZE_MAX - (da->align - 1))
		return -EOVERFLOW;
	*out = (size + da->align - 1) & ~(da->align - 1);
	return 0;
}

int qg_dalloc_alloc(struct qg_dalloc *da, size_t size, size_t *offset)
{
	size_t need, best = SIZE_MAX, tail = SIZE_MAX;
	int r = dalloc_round(da, size, &need);

	if (r < 0)
		return r;
	for (size_t i = 0; i < da->n_free; i++) {
		const struct dalloc_block *b = &da->free[i];
		if (b->size < need)
			continue;
		/* only the last block can reach past the mark; keep it as the last resort */
		if (b->offset + b->size > da->high_water) {
			tail = i;
			continue;
		}
		if (best == SIZE_MAX || b->size < da->free[best].size)
			best = i;
	}
	if (best == SIZE_MAX)
		best = tail;
	if (best == SIZE_MAX)
		return -ENOSPC;

	struct dalloc_block *b = &da->free[best];
	*offset = b->offset;
	b->offset += need;
	b->size -= need;
	if (b->size == 0) {
		memmove(b, b + 1, (da->n_free - best - 1) * sizeof(*b));
		da->n_free--;
	}
	if (*offset + need > da->high_water)
		da->high_water = *offset + need;
	da->in_use += need;
	return 0;
}

int qg_dalloc_release(struct qg_dalloc *da, size_t offset, size_t size)
{
	size_t need, lo = 0, hi = da->n_free;
	int r = dalloc_round(da, size, &need);

	if (r < 0 || offset % da->align || offset > da->max_size || need > da->max_size - offset)
		return -EINVAL;
	size_t end = offset + need;

	/* I: the first free block that starts after OFFSET */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (da->free[mid].offset <= offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t i = lo;
	struct dalloc_block *prev = i > 0 ? &da->free[i - 1] : NULL;
	struct dalloc_block *next = i < da->n_free ? &da->free[i] : NULL;

	if ((prev && prev->offset + prev->size > offset) || (next && next->offset < end))
		return -EINVAL;
	if (need > da->in_use)
		return -EINVAL;

	if (prev && prev->offset + prev->size == offset) {
		prev->size += need;
		if (next && next->offset == end) {
			prev->size += next->size;
			memmove(next, next + 1, (da->n_free - i - 1) * sizeof(*next));
			da->n_free--;
		}
	} else if (next && next->offset == end) {
		next->offset = offset;
		next->size += need;
	} else {
		if (da->n_free == da->max_free)
			return -ENOSPC;
		memmove(&da->free[i + 1], &da->free[i], (da->n_free - i) * sizeof(*da->free));
		da->free[i].offset = offset;
		da->free[i].size = need;
		da->n_free++;
	}
	da->in_use -= need;
	return 0;
}

size_t qg_dalloc_high_water(const struct qg_dalloc *da)
{
	return da->high_water;
}

size_t qg_dalloc_in_use(const struct qg_dalloc *da)
{
	return da->in_use;
}

size_t qg_dalloc_alignment(const struct qg_dalloc *da)
{
	return da->align;
}

size_t qg_dalloc_n_free_blocks(const struct qg_dalloc *da)
{
	return da->n_free;
}

int qg_dalloc_free_block(const struct qg_dalloc *da, size_t i, size_t *offset, size_t *size)
{
	if (i >= da->n_free)
		return -ENOENT;
	*offset = da->free[i].offset;
	*size = da->free[i].size;
	return 0;
}
