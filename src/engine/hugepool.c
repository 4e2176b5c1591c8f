/*
 * hugepool.c - the hugepage pool: mapping the region, and the books of its
 * pieces and their owners (see hugepool.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "buffer.h"
#include "dalloc.h"
#include "hugepool.h"

#define HUGE_2M ((size_t)2 << 20)

/* from <linux/memfd.h> and <linux/mman.h>: the page size, log2, in bits 26.. */
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21U << 26)
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26)
#endif

/* A piece handed out: [off, off + size) belongs to owner. */
struct piece {
	size_t off, size;
	uint64_t owner;
};

/*
 * One range of the owner map: from START to the next range's start (or
 * the end of the region) the bytes last belonged to OWNER
 * (QG_HUGEPOOL_NO_OWNER: never handed out, still zero).
 */
struct orange {
	size_t start;
	uint64_t owner;
};

struct account {
	uint64_t owner;
	size_t bytes;
};

struct qg_hugepool {
	struct qg_hugepool_info info;
	unsigned char *base;
	size_t bytes, align;
	struct qg_dalloc *da;
	struct piece *pieces;		/* sorted by offset */
	size_t n_pieces, cap_pieces;
	struct orange *ranges;		/* sorted by start; ranges[0].start == 0 */
	size_t n_ranges, cap_ranges;
	struct account *accounts;	/* owners holding at least one piece */
	size_t n_accounts, cap_accounts;
	size_t in_use;
	uint64_t scrubbed;
};

/* Make room for NEED elements of ELEM bytes in *ARR (capacity *CAP). 0 or -ENOMEM. */
static int reserve(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 16;
	while (n < need)
		n *= 2;
	void *p = reallocarray(*arr, n, elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

__attribute__((format(printf, 3, 4)))
static void say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* --- mapping the region --- */

/* Read one decimal number from PATH.  0 or -errno. */
static int read_long(const char *path, long *v)
{
	FILE *f = fopen(path, "re");
	int r = 0;

	if (!f)
		return -errno;
	if (fscanf(f, "%ld", v) != 1)
		r = -EIO;
	fclose(f);
	return r;
}

int qg_hugepages_count(unsigned page_kb, long *total, long *free_pages)
{
	char path[96];
	int r;

	snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/hugepages-%ukB/nr_hugepages", page_kb);
	if ((r = read_long(path, total)))
		return r;
	snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/hugepages-%ukB/free_hugepages", page_kb);
	return read_long(path, free_pages);
}

/* BYTES of hugetlb memory at *P: memfd first, then an anonymous mapping.  0 or -errno. */
static int map_hugetlb(size_t bytes, void **p)
{
	int err, fd = memfd_create("qgraph-pool", MFD_CLOEXEC | MFD_HUGETLB | MFD_HUGE_2MB);

	if (fd >= 0) {
		if (ftruncate(fd, (off_t)bytes) == 0) {
			*p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			err = *p == MAP_FAILED ? -errno : 0;
		} else {
			err = -errno;
		}
		close(fd);	/* the mapping keeps the file */
		if (!err)
			return 0;
	}
	*p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB,
		  -1, 0);
	return *p == MAP_FAILED ? -errno : 0;
}

/* True unless transparent hugepages are switched off ("[never]") or absent. */
static bool thp_enabled(void)
{
	char line[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");

	if (!f)
		return false;
	if (!fgets(line, sizeof line, f))
		line[0] = 0;
	fclose(f);
	return line[0] && !strstr(line, "[never]");
}

/*
 * BYTES (a multiple of 2 MiB) of anonymous memory at *P, aligned to 2 MiB
 * so that every page of it can be a transparent hugepage; *THP says whether
 * the kernel took the advice.  0 or -errno.
 */
static int map_anon(size_t bytes, void **p, bool *thp)
{
	size_t span = bytes + HUGE_2M;
	unsigned char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return -errno;
	unsigned char *a = (unsigned char *)(((uintptr_t)m + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
	if (a > m)
		munmap(m, (size_t)(a - m));
	if (a + bytes < m + span)
		munmap(a + bytes, (size_t)(m + span - (a + bytes)));
	*thp = madvise(a, bytes, MADV_HUGEPAGE) == 0 && thp_enabled();
	*p = a;
	return 0;
}

static const char *kind_name(enum qg_hugepool_kind k)
{
	return k == QG_HUGEPOOL_HUGETLB ? "hugetlb" : k == QG_HUGEPOOL_THP ? "thp" : "plain";
}

/* The log line of INFO. */
static void describe(struct qg_hugepool_info *in)
{
	char why[80] = "", lock[80];

	if (in->kind != QG_HUGEPOOL_HUGETLB)
		snprintf(why, sizeof why, "; hugetlb %s%s", in->hugetlb_err ? "unavailable: " : "not tried",
			 in->hugetlb_err ? strerror(-in->hugetlb_err) : "");
	if (in->locked)
		snprintf(lock, sizeof lock, "locked");
	else if (in->lock_err)
		snprintf(lock, sizeof lock, "not locked (mlock: %s)", strerror(-in->lock_err));
	else
		snprintf(lock, sizeof lock, "not locked (not asked)");
	char numa[64] = "";
	if (in->interleaved)
		snprintf(numa, sizeof numa, ", on %d NUMA node%s", in->interleaved, in->interleaved > 1 ? "s" : "");
	else if (in->interleave_err)
		snprintf(numa, sizeof numa, ", not interleaved (mbind: %s)", strerror(-in->interleave_err));
	snprintf(in->text, sizeof in->text, "hugepool: %zu MiB %s, %zu kB pages%s, %s%s", in->bytes >> 20,
		 kind_name(in->kind), in->page_size >> 10, why, lock, numa);
}

/* The error of a pool that had to be hugetlb and is not. */
static void say_no_hugetlb(char *err, size_t errlen, size_t bytes, int why)
{
	long sys = -1, total = -1, free_pages = -1;

	read_long("/proc/sys/vm/nr_hugepages", &sys);
	qg_hugepages_count(2048, &total, &free_pages);
	say(err, errlen,
	    "hugetlb required: %zu pages of 2048 kB asked for; vm.nr_hugepages is %ld, of 2048 kB pages %ld "
	    "exist and %ld are free (%s)",
	    bytes / HUGE_2M, sys, total, free_pages, strerror(-why));
}

/* Map POOL's region as O says, and fill in its info.  0 or -errno (with ERR said). */
static int pool_map(struct qg_hugepool *pool, const struct qg_hugepool_opts *o, char *err, size_t errlen)
{
	struct qg_hugepool_info *in = &pool->info;
	size_t bytes = (o->bytes + HUGE_2M - 1) & ~(HUGE_2M - 1);
	void *p = NULL;
	bool thp = false;
	int r = 0;

	if (!o->no_hugetlb)
		r = map_hugetlb(bytes, &p);
	if (!o->no_hugetlb && r == 0) {
		in->kind = QG_HUGEPOOL_HUGETLB;
		in->page_size = HUGE_2M;
	} else if (o->require_hugetlb) {
		say_no_hugetlb(err, errlen, bytes, r);
		return r;
	} else {
		in->hugetlb_err = r;
		if ((r = map_anon(bytes, &p, &thp))) {
			say(err, errlen, "cannot map a pool of %zu bytes: %s", bytes, strerror(-r));
			return r;
		}
		in->kind = thp ? QG_HUGEPOOL_THP : QG_HUGEPOOL_PLAIN;
		in->page_size = thp ? HUGE_2M : (size_t)sysconf(_SC_PAGESIZE);
	}
	pool->base = p;
	pool->bytes = in->bytes = bytes;
	if (o->interleave_nodes) {
		/*
		 * Before the first touch (the lock below faults every page in):
		 * pages go round-robin over the nodes, as the daemon reserved
		 * hugepages on each of them.
		 */
		unsigned long mask = (unsigned long)o->interleave_nodes;
		if (syscall(SYS_mbind, p, bytes, 3 /* MPOL_INTERLEAVE */, &mask, 65, 0) == 0)
			in->interleaved = __builtin_popcountll(o->interleave_nodes);
		else
			in->interleave_err = -errno;
	}
	if (o->lock != QG_HUGEPOOL_LOCK_NO) {
		/* the system call itself: sanitizers replace mlock() with one that locks nothing */
		if (syscall(SYS_mlock, p, bytes) == 0) {
			in->locked = true;
		} else {
			in->lock_err = -errno;
			if (o->lock == QG_HUGEPOOL_LOCK_MUST) {
				struct rlimit rl = { 0, 0 };
				getrlimit(RLIMIT_MEMLOCK, &rl);
				say(err, errlen, "cannot lock the pool's %zu bytes: %s (RLIMIT_MEMLOCK %llu bytes)", bytes,
				    strerror(-in->lock_err), (unsigned long long)rl.rlim_cur);
				return in->lock_err;
			}
		}
	}
	describe(in);
	return 0;
}

int qg_hugepool_new(const struct qg_hugepool_opts *o, struct qg_hugepool **out, char *err, size_t errlen)
{
	struct qg_hugepool *pool = NULL;
	int r;

	say(err, errlen, "no error");
	if (!out)
		return -EINVAL;
	*out = NULL;
	size_t align = o && o->align ? o->align : 4096;
	size_t blocks = o && o->max_free_blocks ? o->max_free_blocks : 4096;
	if (!o || o->bytes == 0 || o->bytes > SIZE_MAX / 2 || align < 64 || (align & (align - 1)) ||
	    o->lock > QG_HUGEPOOL_LOCK_MUST || (o->require_hugetlb && o->no_hugetlb)) {
		say(err, errlen, "bad pool options");
		return -EINVAL;
	}
	if (!(pool = calloc(1, sizeof *pool)))
		goto nomem;
	if ((r = pool_map(pool, o, err, errlen)))
		goto fail;
	pool->align = align;
	pool->da = qg_dalloc_new(align, pool->bytes, blocks);
	pool->ranges = malloc(16 * sizeof *pool->ranges);
	if (!pool->da || !pool->ranges)
		goto nomem;
	pool->cap_ranges = 16;
	pool->ranges[0] = (struct orange){ 0, QG_HUGEPOOL_NO_OWNER };
	pool->n_ranges = 1;
	*out = pool;
	return 0;
nomem:
	r = -ENOMEM;
	say(err, errlen, "out of memory for the pool's books");
fail:
	qg_hugepool_free(pool);
	return r;
}

void qg_hugepool_free(struct qg_hugepool *pool)
{
	if (!pool)
		return;
	if (pool->base)
		munmap(pool->base, pool->bytes);
	qg_dalloc_free(pool->da);
	free(pool->pieces);
	free(pool->ranges);
	free(pool->accounts);
	free(pool);
}

const struct qg_hugepool_info *qg_hugepool_info(const struct qg_hugepool *pool)
{
	return &pool->info;
}

void *qg_hugepool_base(const struct qg_hugepool *pool)
{
	return pool->base;
}

size_t qg_hugepool_alignment(const struct qg_hugepool *pool)
{
	return pool->align;
}

/* --- the owner map --- */

/* The index of the owner range that holds byte POS (< the region's size). */
static size_t range_at(const struct qg_hugepool *pool, size_t pos)
{
	size_t lo = 0, hi = pool->n_ranges;	/* ranges[lo].start <= pos < ranges[hi].start */

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (pool->ranges[mid].start <= pos)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static size_t range_end(const struct qg_hugepool *pool, size_t i)
{
	return i + 1 < pool->n_ranges ? pool->ranges[i + 1].start : pool->bytes;
}

/* Make POS the start of a range (room for one more was reserved); its index. */
static size_t range_split(struct qg_hugepool *pool, size_t pos)
{
	if (pos == pool->bytes)
		return pool->n_ranges;
	size_t i = range_at(pool, pos);
	if (pool->ranges[i].start == pos)
		return i;
	memmove(&pool->ranges[i + 2], &pool->ranges[i + 1], (pool->n_ranges - i - 1) * sizeof *pool->ranges);
	pool->ranges[i + 1] = (struct orange){ pos, pool->ranges[i].owner };
	pool->n_ranges++;
	return i + 1;
}

/*
 * Hand [OFF, END) to OWNER: zero the parts that last belonged to another
 * owner, then make it one range of OWNER, merged with equal neighbours.
 * Room for two more ranges was reserved.
 */
static void range_take(struct qg_hugepool *pool, size_t off, size_t end, uint64_t owner)
{
	size_t i = range_split(pool, off), j = range_split(pool, end);

	for (size_t k = i; k < j; k++) {
		uint64_t was = pool->ranges[k].owner;
		if (was != owner && was != QG_HUGEPOOL_NO_OWNER) {
			size_t a = pool->ranges[k].start, b = range_end(pool, k);
			memset(pool->base + a, 0, b - a);
			pool->scrubbed += b - a;
		}
	}
	/* ranges i .. j-1 become range i; then fold it into equal neighbours */
	pool->ranges[i].owner = owner;
	size_t last = j, first = i + 1;
	if (j < pool->n_ranges && pool->ranges[j].owner == owner)
		last = j + 1;
	if (i > 0 && pool->ranges[i - 1].owner == owner)
		first = i;
	memmove(&pool->ranges[first], &pool->ranges[last], (pool->n_ranges - last) * sizeof *pool->ranges);
	pool->n_ranges -= last - first;
}

/* --- pieces and accounts --- */

/* The index of the first piece at or after OFF. */
static size_t piece_at(const struct qg_hugepool *pool, size_t off)
{
	size_t lo = 0, hi = pool->n_pieces;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (pool->pieces[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct account *account_of(const struct qg_hugepool *pool, uint64_t owner)
{
	for (size_t i = 0; i < pool->n_accounts; i++)
		if (pool->accounts[i].owner == owner)
			return &pool->accounts[i];
	return NULL;
}

/* Add BYTES to (ADD) or take them from OWNER's account and the total; drop an empty account. */
static void account_add(struct qg_hugepool *pool, uint64_t owner, size_t bytes, bool add)
{
	struct account *a = account_of(pool, owner);

	if (!a) {	/* room was reserved by the caller */
		a = &pool->accounts[pool->n_accounts++];
		*a = (struct account){ owner, 0 };
	}
	a->bytes = add ? a->bytes + bytes : a->bytes - bytes;
	pool->in_use = add ? pool->in_use + bytes : pool->in_use - bytes;
	if (a->bytes == 0)
		*a = pool->accounts[--pool->n_accounts];
}

int qg_hugepool_alloc(struct qg_hugepool *pool, uint64_t owner, size_t size, size_t *offset)
{
	size_t off;
	int r;

	if (!pool || !offset || size == 0 || owner == QG_HUGEPOOL_NO_OWNER)
		return -EINVAL;
	if (size > pool->bytes)
		return -ENOSPC;
	size_t rounded = (size + pool->align - 1) & ~(pool->align - 1);
	/* room in every table first, so that nothing below can fail half-way */
	if (reserve((void **)&pool->pieces, &pool->cap_pieces, pool->n_pieces + 1, sizeof *pool->pieces) ||
	    reserve((void **)&pool->ranges, &pool->cap_ranges, pool->n_ranges + 2, sizeof *pool->ranges) ||
	    reserve((void **)&pool->accounts, &pool->cap_accounts, pool->n_accounts + 1, sizeof *pool->accounts))
		return -ENOMEM;
	if ((r = qg_dalloc_alloc(pool->da, rounded, &off)))
		return r == -EOVERFLOW ? -ENOSPC : r;
	range_take(pool, off, off + rounded, owner);
	size_t i = piece_at(pool, off);
	memmove(&pool->pieces[i + 1], &pool->pieces[i], (pool->n_pieces - i) * sizeof *pool->pieces);
	pool->pieces[i] = (struct piece){ off, rounded, owner };
	pool->n_pieces++;
	account_add(pool, owner, rounded, true);
	*offset = off;
	return 0;
}

/* Give back piece I. 0 or the allocator's error (the piece stays). */
static int piece_release(struct qg_hugepool *pool, size_t i)
{
	struct piece p = pool->pieces[i];
	int r = qg_dalloc_release(pool->da, p.off, p.size);

	if (r)
		return r;
	memmove(&pool->pieces[i], &pool->pieces[i + 1], (pool->n_pieces - i - 1) * sizeof *pool->pieces);
	pool->n_pieces--;
	account_add(pool, p.owner, p.size, false);
	return 0;
}

int qg_hugepool_release(struct qg_hugepool *pool, size_t offset)
{
	if (!pool)
		return -EINVAL;
	size_t i = piece_at(pool, offset);
	if (i == pool->n_pieces || pool->pieces[i].off != offset)
		return -EINVAL;
	return piece_release(pool, i);
}

size_t qg_hugepool_release_owner(struct qg_hugepool *pool, uint64_t owner)
{
	size_t freed = 0;

	if (!pool)
		return 0;
	for (size_t i = pool->n_pieces; i-- > 0;) {
		size_t size = pool->pieces[i].size;
		if (pool->pieces[i].owner == owner && piece_release(pool, i) == 0)
			freed += size;
	}
	return freed;
}

size_t qg_hugepool_piece_size(const struct qg_hugepool *pool, size_t offset)
{
	size_t i = piece_at(pool, offset);

	return i < pool->n_pieces && pool->pieces[i].off == offset ? pool->pieces[i].size : 0;
}

size_t qg_hugepool_in_use(const struct qg_hugepool *pool, uint64_t owner)
{
	const struct account *a = account_of(pool, owner);

	return a ? a->bytes : 0;
}

size_t qg_hugepool_in_use_total(const struct qg_hugepool *pool)
{
	return pool->in_use;
}

uint64_t qg_hugepool_bytes_scrubbed(const struct qg_hugepool *pool)
{
	return pool->scrubbed;
}

/* --- the buffer type --- */

struct hp_buft {
	struct qg_buft buft;
	struct qg_hugepool *pool;
	uint64_t owner;
};

static const char *hp_name(const struct qg_buft *buft)
{
	(void)buft;
	return "hugepool";
}

static size_t hp_alignment(const struct qg_buft *buft)
{
	const struct hp_buft *h = buft->ctx;
	return h->pool->align;
}

static size_t hp_max_size(const struct qg_buft *buft)
{
	const struct hp_buft *h = buft->ctx;
	return h->pool->bytes;
}

static void hp_free_buffer(struct qg_buffer *buf)
{
	struct hp_buft *h = buf->buft->ctx;

	qg_hugepool_release(h->pool, (size_t)((unsigned char *)buf->ctx - h->pool->base));
	free(buf);
}

static void *hp_base(struct qg_buffer *buf)
{
	return buf->ctx;
}

static const struct qg_buffer_i hp_buffer_i = {
	.free_buffer = hp_free_buffer,
	.base = hp_base,
};

static int hp_alloc_buffer(struct qg_buft *buft, size_t size, struct qg_buffer **out)
{
	struct hp_buft *h = buft->ctx;
	struct qg_buffer *buf = calloc(1, sizeof *buf);
	size_t off;
	int r;

	if (!buf)
		return -ENOMEM;
	if ((r = qg_hugepool_alloc(h->pool, h->owner, size, &off))) {
		free(buf);
		return r == -ENOSPC ? -ENOMEM : r;
	}
	buf->iface = &hp_buffer_i;
	buf->buft = buft;
	buf->ctx = h->pool->base + off;
	buf->size = size;
	*out = buf;
	return 0;
}

static const struct qg_buft_i hp_buft_i = {
	.name = hp_name,
	.alloc_buffer = hp_alloc_buffer,
	.alignment = hp_alignment,
	.max_size = hp_max_size,
};

int qg_buft_hugepool_new(struct qg_hugepool *pool, uint64_t owner, struct qg_buft **out)
{
	struct hp_buft *h;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!pool || owner == QG_HUGEPOOL_NO_OWNER)
		return -EINVAL;
	if (!(h = calloc(1, sizeof *h)))
		return -ENOMEM;
	h->buft = (struct qg_buft){ .iface = &hp_buft_i, .ctx = h };
	h->pool = pool;
	h->owner = owner;
	*out = &h->buft;
	return 0;
}

void qg_buft_hugepool_free(struct qg_buft *buft)
{
	if (buft)
		free(buft->ctx);
}
