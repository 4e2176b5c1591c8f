/*
 * dalloc-test.c - the dynamic allocator against a reference model: a map of
 * every byte of the range (free or not) and the list of live pieces.
 *
 * Random sequences of allocations, releases, bad releases and resets, over
 * several alignments, range sizes (aligned or not) and free-block table
 * sizes.  After every step the allocator's free blocks must be exactly the
 * maximal free runs of the model (so every possible merge happened), an
 * allocation must take the block best fit predicts (the smallest that
 * fits, the untouched end only as a last resort), -ENOSPC must come exactly
 * when no run is large enough or when a release would need one more table
 * slot than there is, and the high-water mark and bytes in use must match.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dalloc.h"
#include "tap.h"

#define MAX_RANGE 2048
#define MAX_LIVE 512

struct piece {
	size_t offset, size, rounded;
};

struct model {
	size_t align, range, max_free;
	unsigned char used[MAX_RANGE];
	struct piece live[MAX_LIVE];
	size_t n_live, high_water, in_use;
};

struct run {
	size_t offset, size;
};

/* The maximal free runs of M, in offset order, into RUNS; their number. */
static size_t model_runs(const struct model *m, struct run *runs)
{
	size_t n = 0;

	for (size_t i = 0; i < m->range;) {
		if (m->used[i]) {
			i++;
			continue;
		}
		size_t j = i;
		while (j < m->range && !m->used[j])
			j++;
		runs[n].offset = i;
		runs[n].size = j - i;
		n++;
		i = j;
	}
	return n;
}

static size_t round_up(size_t size, size_t align)
{
	if (size == 0)
		size = 1;
	return (size + align - 1) / align * align;
}

/* True if DA's free blocks, mark and bytes in use are M's; says what differs. */
static int same_state(const struct qg_dalloc *da, const struct model *m, const char **why)
{
	static struct run runs[MAX_RANGE / 2 + 1];
	size_t n = model_runs(m, runs);

	if (qg_dalloc_n_free_blocks(da) != n) {
		*why = "free block count";
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		size_t off, size;
		if (qg_dalloc_free_block(da, i, &off, &size) || off != runs[i].offset || size != runs[i].size) {
			*why = "free block";
			return 0;
		}
	}
	if (qg_dalloc_free_block(da, n, &(size_t){ 0 }, &(size_t){ 0 }) != -ENOENT) {
		*why = "block past the last";
		return 0;
	}
	if (qg_dalloc_high_water(da) != m->high_water) {
		*why = "high-water mark";
		return 0;
	}
	if (qg_dalloc_in_use(da) != m->in_use) {
		*why = "bytes in use";
		return 0;
	}
	return 1;
}

/* The offset best fit should pick for ROUNDED bytes in M, or SIZE_MAX if nothing fits. */
static size_t model_pick(const struct model *m, size_t rounded)
{
	static struct run runs[MAX_RANGE / 2 + 1];
	size_t n = model_runs(m, runs), best = SIZE_MAX, tail = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		if (runs[i].size < rounded)
			continue;
		if (runs[i].offset + runs[i].size > m->high_water) {
			tail = i;
			continue;
		}
		if (best == SIZE_MAX || runs[i].size < runs[best].size)
			best = i;
	}
	if (best == SIZE_MAX)
		best = tail;
	return best == SIZE_MAX ? SIZE_MAX : runs[best].offset;
}

/* The number of free runs M would have if [OFF, OFF + LEN) were free too. */
static size_t runs_after_release(struct model *m, size_t off, size_t len)
{
	static struct run runs[MAX_RANGE / 2 + 1];
	size_t n;

	memset(m->used + off, 0, len);
	n = model_runs(m, runs);
	memset(m->used + off, 1, len);
	return n;
}

static void model_reset(struct model *m)
{
	memset(m->used, 0, sizeof(m->used));
	m->n_live = 0;
	m->high_water = 0;
	m->in_use = 0;
}

/* One random sequence of STEPS operations; returns the number of failures (reported once each kind). */
static int run_sequence(struct tap_rng *rng, size_t align, size_t range, size_t max_free, int steps,
			int *n_nospc, int *n_full_table, int *n_merges)
{
	static struct model m;
	struct qg_dalloc *da = qg_dalloc_new(align, range, max_free);
	const char *why = NULL;
	int fails = 0;

	if (!da)
		return 1;
	m.align = align;
	m.range = range;
	m.max_free = max_free;
	model_reset(&m);

	for (int s = 0; s < steps && !fails; s++) {
		unsigned op = (unsigned)(tap_rand(rng) % 100);
		if (op < 50 && m.n_live < MAX_LIVE) {
			/* sizes from 0 to about a sixth of the range, often not aligned */
			size_t size = (size_t)(tap_rand(rng) % (range / 6 + 2));
			size_t rounded = round_up(size, align), off = SIZE_MAX;
			size_t want = model_pick(&m, rounded);
			int r = qg_dalloc_alloc(da, size, &off);
			if (want == SIZE_MAX) {
				if (r != -ENOSPC) {
					tap_diag("alloc %zu: got %d at %zu, the model has no room", size, r, off);
					fails++;
				}
				(*n_nospc)++;
			} else if (r != 0 || off != want) {
				tap_diag("alloc %zu: got %d at %zu, best fit is %zu", size, r, off, want);
				fails++;
			} else {
				for (size_t i = off; i < off + rounded; i++)
					if (m.used[i]) {
						tap_diag("alloc %zu at %zu overlaps a live piece", size, off);
						fails++;
						break;
					}
				memset(m.used + off, 1, rounded);
				m.live[m.n_live++] = (struct piece){ off, size, rounded };
				if (off + rounded > m.high_water)
					m.high_water = off + rounded;
				m.in_use += rounded;
			}
		} else if (op < 90 && m.n_live > 0) {
			size_t k = (size_t)(tap_rand(rng) % m.n_live);
			struct piece p = m.live[k];
			size_t before = runs_after_release(&m, p.offset, 0);
			size_t after = runs_after_release(&m, p.offset, p.rounded);
			int r = qg_dalloc_release(da, p.offset, p.size);
			if (after > max_free) {
				if (r != -ENOSPC) {
					tap_diag("release %zu@%zu: got %d, the table is full", p.size, p.offset, r);
					fails++;
				}
				(*n_full_table)++;
			} else if (r != 0) {
				tap_diag("release %zu@%zu: got %d", p.size, p.offset, r);
				fails++;
			} else {
				if (after <= before)
					(*n_merges)++;
				memset(m.used + p.offset, 0, p.rounded);
				m.live[k] = m.live[--m.n_live];
				m.in_use -= p.rounded;
			}
		} else if (op < 98) {
			/* a bad release: over free space, outside the range, or misaligned */
			size_t off, size;
			switch (tap_rand(rng) % 3) {
			case 0: {
				size_t i = (size_t)(tap_rand(rng) % range);
				if (m.used[i])
					continue;
				off = i / align * align;
				size = 1;
				break;
			}
			case 1:
				off = (range + align - 1) / align * align + align * (size_t)(tap_rand(rng) % 4);
				size = (tap_rand(rng) & 1) ? 1 : SIZE_MAX - align;
				if (tap_rand(rng) & 1) {
					off = 0;
					size = range + 1;
				}
				break;
			default:
				if (align == 1 || m.n_live == 0)
					continue;
				off = m.live[0].offset + 1;
				size = 1;
				break;
			}
			int r = qg_dalloc_release(da, off, size);
			if (r != -EINVAL) {
				tap_diag("bad release %zu@%zu: got %d", size, off, r);
				fails++;
			}
		} else {
			qg_dalloc_reset(da);
			model_reset(&m);
		}
		if (!fails && !same_state(da, &m, &why)) {
			tap_diag("step %d (align %zu range %zu table %zu): %s differs", s, align, range, max_free, why);
			fails++;
		}
	}
	qg_dalloc_free(da);
	return fails;
}

static void test_random(void)
{
	static const size_t aligns[] = { 1, 8, 16, 64 };
	static const size_t ranges[] = { 64, 1000, 2048 };
	static const size_t tables[] = { 1, 2, 4, 16, 1024 };
	struct tap_rng rng = { 0x5eed0001ull };
	int scale = tap_scale(), seqs = 0, fails = 0, nospc = 0, full = 0, merges = 0;
	int steps = 1000 + 2000 * scale;

	for (size_t a = 0; a < sizeof(aligns) / sizeof(*aligns); a++)
		for (size_t r = 0; r < sizeof(ranges) / sizeof(*ranges); r++)
			for (size_t t = 0; t < sizeof(tables) / sizeof(*tables); t++) {
				fails += run_sequence(&rng, aligns[a], ranges[r], tables[t], steps, &nospc, &full,
						      &merges);
				seqs++;
			}
	tap_ok(fails == 0, "%d random sequences of %d steps match the model (best fit, merges, mark, in use)", seqs,
	       steps);
	tap_ok(nospc > 0, "-ENOSPC exactly when nothing fits (%d times)", nospc);
	tap_ok(full > 0, "-ENOSPC exactly when the free-block table is full (%d times)", full);
	tap_ok(merges > 0, "releases merged with neighbours (%d times)", merges);
}

static void test_fixed(void)
{
	struct qg_dalloc *da;
	size_t a, b, c, d, off;

	tap_ok(!qg_dalloc_new(0, 64, 4) && !qg_dalloc_new(24, 64, 4) && !qg_dalloc_new(8, 0, 4) &&
	       !qg_dalloc_new(8, 64, 0) && !qg_dalloc_new(8, 64, SIZE_MAX), "bad arguments refused");

	da = qg_dalloc_new(64, SIZE_MAX, 8);
	tap_ok(da && qg_dalloc_alignment(da) == 64, "unbounded planning allocator");
	if (!da)
		return;
	tap_ok(qg_dalloc_alloc(da, SIZE_MAX, &off) == -EOVERFLOW &&
	       qg_dalloc_alloc(da, SIZE_MAX - 62, &off) == -EOVERFLOW, "sizes that cannot be rounded: -EOVERFLOW");
	tap_ok(qg_dalloc_alloc(da, 0, &a) == 0 && a == 0 && qg_dalloc_in_use(da) == 64, "size 0 takes one unit");
	tap_ok(qg_dalloc_alloc(da, 100, &b) == 0 && b == 64 && qg_dalloc_alloc(da, 64, &c) == 0 && c == 192 &&
	       qg_dalloc_alloc(da, 1, &d) == 0 && d == 256 && qg_dalloc_high_water(da) == 320,
	       "pieces follow each other, the mark at 320");
	tap_ok(qg_dalloc_release(da, b, 100) == 0 && qg_dalloc_release(da, d, 1) == 0 &&
	       qg_dalloc_n_free_blocks(da) == 2, "release the second and the last: a hole and the tail (merged)");
	tap_ok(qg_dalloc_alloc(da, 64, &off) == 0 && off == 64 && qg_dalloc_high_water(da) == 320,
	       "a small piece goes into the hole, not the tail");
	tap_ok(qg_dalloc_release(da, off, 64) == 0 && qg_dalloc_alloc(da, 200, &off) == 0 && off == 256 &&
	       qg_dalloc_high_water(da) == 512, "a piece too large for the hole goes to the tail and lifts the mark");
	tap_ok(qg_dalloc_release(da, 64, 64) == -EINVAL && qg_dalloc_release(da, 32, 64) == -EINVAL &&
	       qg_dalloc_release(da, SIZE_MAX - 63, 64) == -EINVAL && qg_dalloc_release(da, 1024, 64) == -EINVAL,
	       "releasing free, misaligned or outside pieces: -EINVAL");
	tap_ok(qg_dalloc_release(da, a, 0) == 0 && qg_dalloc_release(da, c, 64) == 0 &&
	       qg_dalloc_release(da, off, 200) == 0 && qg_dalloc_n_free_blocks(da) == 1 && qg_dalloc_in_use(da) == 0 &&
	       qg_dalloc_high_water(da) == 512, "everything released merges back into one block; the mark stays");
	qg_dalloc_reset(da);
	tap_ok(qg_dalloc_high_water(da) == 0 && qg_dalloc_alloc(da, 8, &off) == 0 && off == 0, "reset forgets the mark");
	qg_dalloc_free(da);
	qg_dalloc_free(NULL);

	/* a full range, then a table of one free block */
	da = qg_dalloc_new(16, 64, 1);
	tap_ok(da && qg_dalloc_alloc(da, 16, &a) == 0 && qg_dalloc_alloc(da, 16, &b) == 0 &&
	       qg_dalloc_alloc(da, 32, &c) == 0 && qg_dalloc_n_free_blocks(da) == 0 &&
	       qg_dalloc_alloc(da, 1, &off) == -ENOSPC, "a full range: -ENOSPC");
	tap_ok(da && qg_dalloc_release(da, a, 16) == 0 && qg_dalloc_release(da, c, 32) == -ENOSPC &&
	       qg_dalloc_release(da, b, 16) == 0 && qg_dalloc_release(da, c, 32) == 0 &&
	       qg_dalloc_n_free_blocks(da) == 1, "a table of one: a second hole is -ENOSPC, and fine after a merge");
	qg_dalloc_free(da);
}

int main(void)
{
	test_fixed();
	test_random();
	return tap_done();
}
