/*
 * hugepool-test.c - the hugepage pool: the fallback mapping (always), the
 * hugetlb mapping (when 2 MiB pages can be reserved for the test), locking
 * and its failure, pieces with owners, zeroing exactly where a piece last
 * belonged to another owner (checked against a model of every page on
 * random sequences), accounting, the errors, and the buffer type.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buffer.h"
#include "hugepool.h"
#include "tap.h"
#include "tensor.h"

#define MIB ((size_t)1 << 20)
#define NR_HUGEPAGES "/proc/sys/vm/nr_hugepages"

static struct qg_hugepool *pool_new(size_t bytes, enum qg_hugepool_lock lock, bool no_hugetlb)
{
	struct qg_hugepool_opts o = { .bytes = bytes, .lock = lock, .no_hugetlb = no_hugetlb };
	struct qg_hugepool *pool = NULL;
	char err[256];
	int r = qg_hugepool_new(&o, &pool, err, sizeof err);

	if (r)
		tap_diag("pool of %zu bytes: %d (%s)", bytes, r, err);
	return pool;
}

static bool all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* The process's locked memory (VmLck in /proc/self/status), kB; -1 if unknown. */
static long locked_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static void test_fallback(void)
{
	struct qg_hugepool *pool = pool_new(5 * MIB, QG_HUGEPOOL_LOCK_TRY, true);

	tap_ok(pool != NULL, "a pool without hugetlb maps");
	if (!pool)
		return;
	const struct qg_hugepool_info *in = qg_hugepool_info(pool);
	tap_diag("%s", in->text);
	tap_ok(in->kind == QG_HUGEPOOL_THP || in->kind == QG_HUGEPOOL_PLAIN, "it is thp or plain (%d)", in->kind);
	tap_ok(in->bytes == 6 * MIB, "its size is rounded up to 2 MiB (%zu)", in->bytes);
	tap_ok(in->kind == QG_HUGEPOOL_PLAIN || in->page_size == 2 * MIB, "thp reports 2 MiB pages (%zu)",
	       in->page_size);
	tap_ok(((uintptr_t)qg_hugepool_base(pool) & (2 * MIB - 1)) == 0, "the region is 2 MiB aligned");
	tap_ok(in->locked == (in->lock_err == 0), "locked, or the lock's error is kept (%d)", in->lock_err);
	tap_ok(strstr(in->text, in->kind == QG_HUGEPOOL_THP ? "thp" : "plain") &&
		       strstr(in->text, in->locked ? "locked" : "not locked"),
	       "the log line names the kind and the lock");
	if (in->locked)
		tap_ok(locked_kb() >= (long)(in->bytes >> 10), "locked means locked: VmLck %ld kB", locked_kb());
	else
		tap_skip("the pool could not be locked here");
	unsigned char *b = qg_hugepool_base(pool);
	tap_ok(all_bytes(b, in->bytes, 0), "fresh memory is zero");
	memset(b, 0x5a, in->bytes);
	qg_hugepool_free(pool);

	/* the default order tries hugetlb first and says why it fell back */
	pool = pool_new(2 * MIB, QG_HUGEPOOL_LOCK_NO, false);
	tap_ok(pool != NULL, "a pool with the default order maps");
	if (!pool)
		return;
	in = qg_hugepool_info(pool);
	tap_diag("%s", in->text);
	tap_ok(in->kind == QG_HUGEPOOL_HUGETLB ? in->hugetlb_err == 0 && in->page_size == 2 * MIB
					       : in->hugetlb_err < 0 && strstr(in->text, "hugetlb unavailable"),
	       "it is hugetlb, or it says why not (%d)", in->hugetlb_err);
	tap_ok(!in->locked && in->lock_err == 0 && strstr(in->text, "not asked"), "not locked when not asked");
	qg_hugepool_free(pool);
}

/* Write V to PATH.  0 or -errno. */
static int write_long(const char *path, long v)
{
	FILE *f = fopen(path, "we");
	int r = 0;

	if (!f)
		return -errno;
	if (fprintf(f, "%ld\n", v) < 0)
		r = -EIO;
	if (fclose(f) && !r)
		r = -errno;
	return r;
}

static long saved_nr_hugepages = -1;

static void restore_nr_hugepages(void)
{
	if (saved_nr_hugepages >= 0 && write_long(NR_HUGEPAGES, saved_nr_hugepages) == 0)
		saved_nr_hugepages = -1;
}

static void test_require_hugetlb(void)
{
	long total, free_pages;
	char err[256] = "";
	struct qg_hugepool *pool = NULL;

	if (qg_hugepages_count(2048, &total, &free_pages)) {
		tap_skip("no 2048 kB hugepage counts in /sys");
		return;
	}
	/* more pages than are free: the pool must fail and say how many */
	size_t want = (size_t)(free_pages + 3) * 2 * MIB;
	struct qg_hugepool_opts o = { .bytes = want, .require_hugetlb = true };
	int r = qg_hugepool_new(&o, &pool, err, sizeof err);
	tap_diag("%s", err);
	char asked[64];
	snprintf(asked, sizeof asked, "%ld pages of 2048 kB asked for", free_pages + 3);
	tap_ok(r < 0 && pool == NULL && strstr(err, asked) && strstr(err, "vm.nr_hugepages is"),
	       "require_hugetlb fails naming the pages asked for and those that exist (%d)", r);
	o.no_hugetlb = true;
	tap_ok(qg_hugepool_new(&o, &pool, err, sizeof err) == -EINVAL, "require_hugetlb with no_hugetlb is refused");
}

/* The hugetlb mapping, with 4 pages reserved for the test and the old count put back. */
static void test_hugetlb(void)
{
	long old, total, free_pages;

	if (getenv("QG_TEST_NO_HUGETLB")) {
		tap_skip("QG_TEST_NO_HUGETLB is set");
		return;
	}
	/*
	 * Hold a lock on the file while the count is raised: two runs of this
	 * test at once (two build trees) would otherwise each take the other's
	 * raised count for the old one and leave pages reserved.
	 */
	FILE *f = fopen(NR_HUGEPAGES, "re");
	if (!f || flock(fileno(f), LOCK_EX) || fscanf(f, "%ld", &old) != 1) {
		if (f)
			fclose(f);
		tap_skip("cannot read " NR_HUGEPAGES);
		return;
	}
	saved_nr_hugepages = old;
	atexit(restore_nr_hugepages);
	if (write_long(NR_HUGEPAGES, old + 4) || qg_hugepages_count(2048, &total, &free_pages) || free_pages < 4) {
		restore_nr_hugepages();
		fclose(f);
		tap_skip("cannot reserve 4 hugepages of 2 MiB (not root, or no memory): hugetlb path not tested");
		return;
	}
	struct qg_hugepool_opts o = { .bytes = 8 * MIB, .require_hugetlb = true, .lock = QG_HUGEPOOL_LOCK_TRY };
	struct qg_hugepool *pool = NULL;
	char err[256];
	int r = qg_hugepool_new(&o, &pool, err, sizeof err);
	if (r == -EINVAL) {
		restore_nr_hugepages();
		fclose(f);
		tap_skip("pages reserved, but hugetlb mappings are refused here (EINVAL: qemu user emulation?)");
		return;
	}
	tap_ok(r == 0 && pool, "with 4 pages reserved, a pool of 8 MiB is hugetlb (%d: %s)", r, r ? err : "ok");
	if (pool) {
		const struct qg_hugepool_info *in = qg_hugepool_info(pool);
		tap_diag("%s", in->text);
		tap_ok(in->kind == QG_HUGEPOOL_HUGETLB && in->page_size == 2 * MIB && in->bytes == 8 * MIB,
		       "it reports hugetlb, 2 MiB pages, 8 MiB");
		size_t off;
		tap_ok(qg_hugepool_alloc(pool, 1, 3 * MIB, &off) == 0, "a piece of it");
		unsigned char *p = (unsigned char *)qg_hugepool_base(pool) + off;
		memset(p, 0x77, 3 * MIB);
		long t2, f2;
		qg_hugepages_count(2048, &t2, &f2);
		tap_ok(f2 <= free_pages - 2, "its pages come from the reserve (%ld of %ld free)", f2, t2);
		qg_hugepool_free(pool);
	}
	restore_nr_hugepages();
	fclose(f);
	tap_ok(saved_nr_hugepages < 0, "vm.nr_hugepages is put back to %ld", old);
}

/* Pieces, owners, zeroing and accounting on a fixed script. */
static void test_owners(void)
{
	struct qg_hugepool *pool = pool_new(8 * MIB, QG_HUGEPOOL_LOCK_NO, true);
	size_t a, b, c;

	if (!pool) {
		tap_ok(0, "a pool for the owner tests");
		return;
	}
	unsigned char *base = qg_hugepool_base(pool);
	tap_ok(qg_hugepool_alignment(pool) == 4096, "pieces are page-aligned by default");
	tap_ok(qg_hugepool_alloc(pool, 1, 10000, &a) == 0 && a == 0, "owner 1 gets a piece at 0");
	tap_ok(qg_hugepool_piece_size(pool, a) == 12288 && qg_hugepool_in_use(pool, 1) == 12288 &&
		       qg_hugepool_in_use_total(pool) == 12288,
	       "its size is rounded to the alignment, and counted");
	memset(base + a, 0xaa, 12288);
	tap_ok(qg_hugepool_release(pool, a) == 0 && qg_hugepool_in_use(pool, 1) == 0 &&
		       qg_hugepool_in_use_total(pool) == 0,
	       "released, it is no longer counted");
	tap_ok(qg_hugepool_release(pool, a) == -EINVAL, "a double free is detected");
	tap_ok(qg_hugepool_alloc(pool, 1, 10000, &a) == 0 && a == 0 && all_bytes(base, 12288, 0xaa) &&
		       qg_hugepool_bytes_scrubbed(pool) == 0,
	       "the same owner takes it back unzeroed");
	tap_ok(qg_hugepool_release(pool, a) == 0, "released again");
	tap_ok(qg_hugepool_alloc(pool, 2, 4096, &b) == 0 && b == 0 && all_bytes(base, 4096, 0) &&
		       qg_hugepool_bytes_scrubbed(pool) == 4096,
	       "another owner gets its first page zeroed, and only that page");
	tap_ok(all_bytes(base + 4096, 8192, 0xaa), "the rest of the old piece is untouched");
	tap_ok(qg_hugepool_alloc(pool, 1, 3 * 4096, &c) == 0 && c == 4096 && all_bytes(base + 4096, 8192, 0xaa) &&
		       all_bytes(base + 12288, 4096, 0) && qg_hugepool_bytes_scrubbed(pool) == 4096,
	       "owner 1 next to it: its own old pages unzeroed, a fresh page zero, nothing scrubbed");
	tap_ok(qg_hugepool_in_use(pool, 1) == 12288 && qg_hugepool_in_use(pool, 2) == 4096 &&
		       qg_hugepool_in_use_total(pool) == 16384 && qg_hugepool_in_use(pool, 3) == 0,
	       "bytes in use per owner and in total");
	memset(base + b, 0xbb, 4096);
	tap_ok(qg_hugepool_release_owner(pool, 1) == 12288 && qg_hugepool_in_use(pool, 1) == 0 &&
		       qg_hugepool_in_use_total(pool) == 4096 && qg_hugepool_release(pool, c) == -EINVAL,
	       "release_owner gives back every piece of owner 1 and nothing else");
	tap_ok(qg_hugepool_release(pool, b) == 0, "owner 2's piece is released");
	uint64_t before = qg_hugepool_bytes_scrubbed(pool);
	tap_ok(qg_hugepool_alloc(pool, 3, 5 * 4096, &a) == 0 && a == 0 && all_bytes(base, 5 * 4096, 0) &&
		       qg_hugepool_bytes_scrubbed(pool) - before == 4 * 4096,
	       "owner 3 over pages of owners 1 and 2 and a fresh one: four pages zeroed");
	tap_ok(qg_hugepool_release(pool, a) == 0, "and released");

	/* errors */
	tap_ok(qg_hugepool_alloc(pool, 1, 9 * MIB, &a) == -ENOSPC, "a piece larger than the pool: -ENOSPC");
	tap_ok(qg_hugepool_alloc(pool, 1, 0, &a) == -EINVAL && qg_hugepool_alloc(pool, QG_HUGEPOOL_NO_OWNER, 1, &a) ==
										-EINVAL,
	       "size 0 and the reserved owner are refused");
	tap_ok(qg_hugepool_release(pool, 12345) == -EINVAL, "an offset never handed out is refused");
	size_t n = 0, off;
	while (qg_hugepool_alloc(pool, 4, MIB, &off) == 0)
		n++;
	tap_ok(n == 8 && qg_hugepool_in_use_total(pool) == 8 * MIB, "the pool holds 8 pieces of 1 MiB (%zu)", n);
	tap_ok(qg_hugepool_alloc(pool, 5, 1, &off) == -ENOSPC, "exhausted: -ENOSPC");
	memset(base + 3 * MIB, 0x44, MIB);
	tap_ok(qg_hugepool_release(pool, 3 * MIB) == 0 && qg_hugepool_alloc(pool, 5, MIB, &off) == 0 &&
		       off == 3 * MIB && all_bytes(base + off, MIB, 0),
	       "a freed piece fits exactly again, zeroed for its new owner");
	qg_hugepool_free(pool);

	/* options */
	struct qg_hugepool_opts o = { .bytes = MIB, .align = 100 };
	char err[128];
	tap_ok(qg_hugepool_new(&o, &pool, err, sizeof err) == -EINVAL && !pool && strstr(err, "bad"),
	       "an alignment that is not a power of two is refused");
	o = (struct qg_hugepool_opts){ .bytes = 0 };
	tap_ok(qg_hugepool_new(&o, &pool, NULL, 0) == -EINVAL, "an empty pool is refused");
}

/*
 * Random allocations and releases by five owners, against a model of every
 * page: who last owned it.  On every allocation the piece must read zero
 * where another owner (or nobody) had it last and the owner's own pattern
 * where it had it, the bytes scrubbed must be exactly the former, and live
 * pieces must never overlap.
 */
static void test_random(void)
{
	enum { PAGE = 4096, PAGES = 512, OWNERS = 5, SLOTS = 64 };
	struct qg_hugepool_opts o = { .bytes = PAGES * PAGE, .no_hugetlb = true, .align = PAGE };
	struct qg_hugepool *pool = NULL;
	struct { size_t off, pages; int owner; } live[SLOTS] = { 0 };
	unsigned char last[PAGES] = { 0 }, used[PAGES] = { 0 };
	struct tap_rng rng = { 0x5eed };
	int steps = 2000 * (tap_scale() + 1), bad = 0, enospc = 0;

	if (qg_hugepool_new(&o, &pool, NULL, 0)) {
		tap_ok(0, "a pool for the random test");
		return;
	}
	unsigned char *base = qg_hugepool_base(pool);
	for (int s = 0; s < steps && !bad; s++) {
		int k = (int)(tap_rand(&rng) % SLOTS);
		if (live[k].owner) {
			if (qg_hugepool_release(pool, live[k].off))
				bad = 1;
			for (size_t p = 0; p < live[k].pages; p++)
				used[live[k].off / PAGE + p] = 0;
			live[k].owner = 0;
			continue;
		}
		int owner = 1 + (int)(tap_rand(&rng) % OWNERS);
		size_t pages = 1 + tap_rand(&rng) % 24, off;
		/* a size that is not a whole number of pages still takes whole pages */
		size_t size = pages * PAGE - (tap_rand(&rng) % PAGE);
		uint64_t before = qg_hugepool_bytes_scrubbed(pool), expect = 0;
		int r = qg_hugepool_alloc(pool, (uint64_t)owner, size, &off);
		if (r == -ENOSPC) {
			enospc++;
			continue;
		}
		if (r || off % PAGE || off + pages * PAGE > PAGES * PAGE) {
			bad = 2;
			break;
		}
		for (size_t p = off / PAGE; p < off / PAGE + pages; p++) {
			if (used[p]) {
				bad = 3;
				break;
			}
			unsigned char want = last[p] == owner ? (unsigned char)owner : 0;
			if (last[p] && last[p] != owner)
				expect += PAGE;
			if (!all_bytes(base + p * PAGE, PAGE, want)) {
				bad = 4;
				break;
			}
			used[p] = 1;
			last[p] = (unsigned char)owner;
		}
		if (!bad && qg_hugepool_bytes_scrubbed(pool) - before != expect)
			bad = 5;
		memset(base + off, owner, pages * PAGE);
		live[k].off = off;
		live[k].pages = pages;
		live[k].owner = owner;
		size_t per[OWNERS + 1] = { 0 }, total = 0;
		for (int i = 0; i < SLOTS; i++)
			if (live[i].owner) {
				per[live[i].owner] += live[i].pages * PAGE;
				total += live[i].pages * PAGE;
			}
		for (int w = 1; w <= OWNERS; w++)
			if (qg_hugepool_in_use(pool, (uint64_t)w) != per[w])
				bad = 6;
		if (qg_hugepool_in_use_total(pool) != total)
			bad = 7;
	}
	tap_ok(!bad, "%d random steps: zeroing, scrubbed bytes, no overlap, accounting (fault %d; %d times full)",
	       steps, bad, enospc);
	tap_diag("scrubbed %llu bytes in all", (unsigned long long)qg_hugepool_bytes_scrubbed(pool));
	qg_hugepool_free(pool);
}

/* In a child without the right to lock: LOCK_MUST fails, LOCK_TRY reports. */
static void test_lock_failure(void)
{
	int fds[2];
	char msg[512] = "";

	if (pipe(fds)) {
		tap_ok(0, "pipe");
		return;
	}
	pid_t pid = tap_fork();
	if (pid == 0) {
		struct rlimit rl = { 64 << 10, 64 << 10 };
		int r1, r2;
		char err[256] = "";
		close(fds[0]);
		setrlimit(RLIMIT_MEMLOCK, &rl);
		if (geteuid() == 0 && (setgroups(0, NULL) || setgid(65534) || setuid(65534)))
			_exit(77);
		struct qg_hugepool_opts o = { .bytes = 4 * MIB, .lock = QG_HUGEPOOL_LOCK_MUST, .no_hugetlb = true };
		struct qg_hugepool *pool = NULL;
		r1 = qg_hugepool_new(&o, &pool, err, sizeof err);
		o.lock = QG_HUGEPOOL_LOCK_TRY;
		r2 = qg_hugepool_new(&o, &pool, NULL, 0);
		const struct qg_hugepool_info *in = pool ? qg_hugepool_info(pool) : NULL;
		dprintf(fds[1], "%d %d %d %d|%s|%s", r1, r2, in ? in->locked : -1, in ? in->lock_err : 0, err,
			in ? in->text : "");
		_exit(0);
	}
	close(fds[1]);
	ssize_t n = read(fds[0], msg, sizeof msg - 1);
	close(fds[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		tap_skip("cannot drop root to test a failing mlock");
		return;
	}
	int r1 = 0, r2 = -1, locked = -1, lock_err = 0;
	msg[n > 0 ? n : 0] = 0;
	sscanf(msg, "%d %d %d %d", &r1, &r2, &locked, &lock_err);
	const char *err = strchr(msg, '|') ? strchr(msg, '|') + 1 : "";
	tap_diag("child: %s", msg);
	tap_ok(r1 < 0 && strstr(err, "cannot lock"), "LOCK_MUST without the right to lock fails, saying so (%d)",
	       r1);
	tap_ok(r2 == 0 && locked == 0 && lock_err < 0 && strstr(err, "not locked (mlock:"),
	       "LOCK_TRY maps, unlocked, and the log line says why");
}

static void test_buft(void)
{
	struct qg_hugepool *pool = pool_new(4 * MIB, QG_HUGEPOOL_LOCK_NO, true);
	struct qg_buft *bt = NULL, *other = NULL;
	struct qg_buffer *buf = NULL, *buf2 = NULL;

	if (!pool || qg_buft_hugepool_new(pool, 7, &bt) || qg_buft_hugepool_new(pool, 8, &other)) {
		tap_ok(0, "a pool and its buffer types");
		qg_hugepool_free(pool);
		return;
	}
	unsigned char *base = qg_hugepool_base(pool);
	tap_ok(!strcmp(qg_buft_name(bt), "hugepool") && qg_buft_alignment(bt) == 4096 &&
		       qg_buft_max_size(bt) == 4 * MIB && qg_buft_is_host(bt),
	       "the buffer type: name, alignment, max size, host");
	tap_ok(qg_buft_alloc_buffer(bt, MIB + 1, &buf) == 0 && buf && qg_buffer_size(buf) == MIB + 1,
	       "a buffer from the pool");
	unsigned char *p = qg_buffer_base(buf);
	tap_ok(p >= base && p + MIB + 1 <= base + 4 * MIB && qg_hugepool_in_use(pool, 7) == MIB + 4096,
	       "it is a piece of the pool owned by the type's owner");
	qg_buffer_set_usage(buf, QG_BUFFER_USAGE_WEIGHTS);
	tap_ok(qg_buffer_usage(buf) == QG_BUFFER_USAGE_WEIGHTS, "it carries its usage");

	struct qg_ctx *ctx = qg_ctx_new(4);
	struct qg_tensor *t = qg_tensor_new_1d(ctx, QG_TYPE_F32, 256);
	float in[256], out[256];
	for (int i = 0; i < 256; i++)
		in[i] = (float)i * 0.5f;
	tap_ok(qg_buffer_place(buf, t, 4096) == 0 && qg_tensor_set(t, in, 0, sizeof in) == 0 &&
		       qg_tensor_get(t, out, 0, sizeof out) == 0 && !memcmp(in, out, sizeof in) &&
		       (unsigned char *)t->data == p + 4096,
	       "a tensor placed in it is written and read");
	qg_ctx_free(ctx);
	qg_buffer_free(buf);
	tap_ok(qg_hugepool_in_use(pool, 7) == 0 && qg_hugepool_in_use_total(pool) == 0,
	       "freeing the buffer gives the piece back");
	tap_ok(qg_buft_alloc_buffer(other, 8192, &buf2) == 0 && qg_buffer_base(buf2) == p &&
		       all_bytes(p, 8192, 0),
	       "another owner's buffer over the same bytes reads zero");
	qg_buffer_free(buf2);
	tap_ok(qg_buft_alloc_buffer(bt, 4 * MIB + 1, &buf) == -E2BIG && !buf, "a buffer over the max size: -E2BIG");
	tap_ok(qg_buft_alloc_buffer(bt, 4 * MIB, &buf) == 0 && qg_buft_alloc_buffer(other, 1, &buf2) == -ENOMEM,
	       "a full pool: -ENOMEM");
	qg_buffer_free(buf);
	qg_buft_hugepool_free(other);
	tap_ok(qg_buft_hugepool_new(pool, QG_HUGEPOOL_NO_OWNER, &other) == -EINVAL && !other,
	       "the reserved owner is refused");
	qg_buft_hugepool_free(bt);
	qg_hugepool_free(pool);
}

int main(void)
{
	test_fallback();
	test_require_hugetlb();
	test_hugetlb();
	test_owners();
	test_random();
	test_lock_failure();
	test_buft();
	return tap_done();
}
