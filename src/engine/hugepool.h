/*
 * hugepool.h - the hugepage pool: one region of memory mapped at start-up
 * and carved into pieces that belong to owners (the daemon's sessions).
 *
 * The daemon keeps weights and graph intermediates in one region so that
 * the hot path neither faults nor misses the TLB: the region is backed by
 * 2 MiB pages where the kernel gives them, and locked where the process
 * may lock.  In order it tries:
 *
 *   hugetlb  memfd_create(MFD_HUGETLB), then mmap(MAP_HUGETLB): needs pages
 *            reserved in vm.nr_hugepages (another part of the daemon does
 *            that; this module only reads the counts);
 *   thp      an anonymous mapping aligned to 2 MiB with madvise(MADV_HUGEPAGE),
 *            when hugetlb fails with ENOMEM (none reserved) or EINVAL (no
 *            hugetlb at all, as under qemu user emulation);
 *   plain    the same mapping where transparent hugepages are off.
 *
 * and reports what it got (qg_hugepool_info) in a struct and in one line
 * the daemon can log.
 *
 * Pieces are handed out by the dynamic allocator (dalloc.h) and each has an
 * owner id.  Memory handed to an owner never shows it another owner's
 * bytes: the pool remembers, for every byte of the region, who owned it
 * last, and zeroes a piece at allocation for exactly the parts that last
 * belonged to someone else.  Releasing costs nothing, an owner that takes
 * back its own memory pays nothing, and memory never handed out is known
 * to be zero (fresh pages).  The price is a map of owner ranges beside the
 * free blocks (a sorted array; it splits at most two ranges per allocation
 * and merges neighbours with the same owner), instead of a memset of every
 * piece on release, which would also put the cost of a session's teardown
 * on the daemon's loop whether or not the memory is ever used again.
 *
 * Not thread-safe: the daemon's loop owns the pool (the caller serializes).
 */
#ifndef QG_HUGEPOOL_H
#define QG_HUGEPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct qg_hugepool;
struct qg_buft;

enum qg_hugepool_kind {
	QG_HUGEPOOL_HUGETLB = 1,	/* hugetlbfs pages, reserved in vm.nr_hugepages */
	QG_HUGEPOOL_THP,		/* anonymous memory with MADV_HUGEPAGE */
	QG_HUGEPOOL_PLAIN,		/* anonymous memory in base pages */
};

enum qg_hugepool_lock {
	QG_HUGEPOOL_LOCK_NO = 0,	/* do not try mlock */
	QG_HUGEPOOL_LOCK_TRY,		/* try; a failure is reported, not fatal */
	QG_HUGEPOOL_LOCK_MUST,		/* lock or fail */
};

/* Owner ids are the caller's (session ids); this one is reserved. */
#define QG_HUGEPOOL_NO_OWNER UINT64_MAX

struct qg_hugepool_opts {
	size_t bytes;			/* the region (> 0; rounded up to its page size) */
	enum qg_hugepool_lock lock;
	bool require_hugetlb;		/* fail rather than fall back to thp / plain */
	bool no_hugetlb;		/* skip hugetlb (tests, or a daemon told so) */
	size_t align;			/* of every piece: a power of two >= 64; 0: 4096 */
	size_t max_free_blocks;		/* the allocator's free-block table; 0: 4096 */
	/*
	 * NUMA nodes to place the region's pages on, round-robin (bit i: node
	 * i), before any page is touched; 0: the kernel's default placement.
	 * A failure is reported in the info, not fatal.
	 */
	uint64_t interleave_nodes;
};

struct qg_hugepool_info {
	enum qg_hugepool_kind kind;
	size_t page_size;		/* the page the region is (meant to be) backed by */
	size_t bytes;			/* the region's size, rounded to PAGE_SIZE */
	bool locked;
	int lock_err;			/* 0, or the -errno mlock failed with */
	int hugetlb_err;		/* 0, or why hugetlb was not used (-errno) */
	int interleave_err;		/* 0, or why the pages could not be spread over the nodes asked */
	int interleaved;		/* nodes the pages are spread over (0: default placement) */
	char text[200];			/* one line for the log, no newline */
};

/*
 * Map a pool as O says.  0 and the pool in *OUT, or -errno with a sentence
 * in ERR (ERRLEN bytes, may be NULL): -EINVAL bad options; -ENOMEM no
 * memory (with require_hugetlb: the pages asked for, reserved and free);
 * -EPERM / -ENOMEM / -EAGAIN the lock failed under LOCK_MUST.
 */
int qg_hugepool_new(const struct qg_hugepool_opts *o, struct qg_hugepool **out, char *err,
		    size_t errlen);
/* Unmap the pool.  Every piece is gone with it.  NULL is fine. */
void qg_hugepool_free(struct qg_hugepool *pool);
/* What the pool got; valid as long as the pool is. */
const struct qg_hugepool_info *qg_hugepool_info(const struct qg_hugepool *pool);
void *qg_hugepool_base(const struct qg_hugepool *pool);
size_t qg_hugepool_alignment(const struct qg_hugepool *pool);

/*
 * A piece of SIZE bytes (> 0) for OWNER: 0 and its offset from the base in
 * *OFFSET, its bytes zero where they last belonged to another owner;
 * -ENOSPC no room, -ENOMEM no memory for the books, -EINVAL bad arguments.
 */
int qg_hugepool_alloc(struct qg_hugepool *pool, uint64_t owner, size_t size, size_t *offset);
/*
 * Give back the piece at OFFSET.  0, or -EINVAL if no piece starts there
 * (a double free, or an offset never handed out), or -ENOSPC if the
 * allocator's free-block table is full (the piece stays allocated).
 */
int qg_hugepool_release(struct qg_hugepool *pool, size_t offset);
/* Give back every piece OWNER holds (a session that ended); the bytes released. */
size_t qg_hugepool_release_owner(struct qg_hugepool *pool, uint64_t owner);
/* The bytes of the piece at OFFSET (rounded to the alignment), 0 if none starts there. */
size_t qg_hugepool_piece_size(const struct qg_hugepool *pool, size_t offset);

/* Bytes in use by OWNER (rounded sizes of its pieces), and by everyone. */
size_t qg_hugepool_in_use(const struct qg_hugepool *pool, uint64_t owner);
size_t qg_hugepool_in_use_total(const struct qg_hugepool *pool);
/* Bytes zeroed so far because a piece changed owner (for stats and tests). */
uint64_t qg_hugepool_bytes_scrubbed(const struct qg_hugepool *pool);

/*
 * A buffer type whose buffers are pieces of POOL owned by OWNER, given back
 * when the buffer is freed.  0 and the type in *OUT, or -ENOMEM / -EINVAL.
 * The type must be freed (qg_buft_hugepool_free) after its buffers and
 * before the pool.
 */
int qg_buft_hugepool_new(struct qg_hugepool *pool, uint64_t owner, struct qg_buft **out);
void qg_buft_hugepool_free(struct qg_buft *buft);

/*
 * The hugepage counts for PAGE_KB (2048): vm.nr_hugepages-style totals and
 * free pages from /sys/kernel/mm/hugepages.  0, or -errno if unreadable.
 */
int qg_hugepages_count(unsigned page_kb, long *total, long *free_pages);

#endif /* QG_HUGEPOOL_H */
