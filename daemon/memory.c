/*
 * memory.c - the daemon's memory: one hugepage pool, sized by pool-size,
 * that holds every weight matrix and every graph's intermediates.
 *
 * It is set up before the privilege drop: as root, with reserve-hugepages,
 * the daemon first raises vm.nr_hugepages until the pool fits (it never
 * lowers the count: pages another program reserved are not its to take,
 * and after the drop it could not write the file anyway; it logs how many
 * it added, and they stay reserved after it exits).  Then the pool is
 * mapped (hugetlb pages where there are enough, else transparent
 * hugepages; require-hugepages makes the fallback an error) and locked.  A
 * daemon that may lock (root, or CAP_IPC_LOCK) must lock the whole pool or
 * fails at start, so that no client finds out later that memory was
 * short; one that may not runs unlocked and says so once.
 *
 * Everything in the pool is inside the daemon's own budget: weights and
 * intermediates of all clients together never pass pool-size, whatever
 * RLIMIT_MEMLOCK says (CAP_IPC_LOCK lifts it).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cap-ng.h>

#include "hugepool.h"
#include "qgraphd.h"

#define HUGE_KB 2048

/* Raise vm.nr_hugepages by what PAGES more than the free ones need.  Logs what it did. */
static void reserve_hugepages(long pages)
{
	long total, free_pages, after, after_free;

	if (qg_hugepages_count(HUGE_KB, &total, &free_pages) < 0) {
		qgd_warn("hugepages: cannot read the counts of %d kB pages: not reserving", HUGE_KB);
		return;
	}
	if (free_pages >= pages) {
		qgd_info("hugepages: %ld free of %ld, the pool needs %ld: none to add", free_pages, total, pages);
		return;
	}
	long want = total + (pages - free_pages);
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "w");
	if (!f || fprintf(f, "%ld\n", want) < 0 || fclose(f) != 0) {
		qgd_warn("hugepages: cannot raise vm.nr_hugepages from %ld to %ld: %s", total, want, strerror(errno));
		return;
	}
	if (qg_hugepages_count(HUGE_KB, &after, &after_free) < 0)
		after = after_free = -1;
	qgd_info("hugepages: added %ld (vm.nr_hugepages %ld -> %ld, %ld free; asked for %ld); qgraphd never lowers "
		 "the count", after - total, total, after, after_free, want);
	if (after_free < pages)
		qgd_warn("hugepages: the kernel gave %ld free pages of the %ld the pool needs (memory too fragmented?)",
			 after_free, pages);
}

/* True if this process may lock memory past RLIMIT_MEMLOCK. */
static int may_lock(void)
{
	capng_get_caps_process();
	return capng_have_capability(CAPNG_EFFECTIVE, CAP_IPC_LOCK) == 1;
}

int qgd_memory_init(struct qgd_server *srv)
{
	const struct qgd_config *cfg = &srv->cfg;
	long pages = (long)((cfg->pool_bytes + (HUGE_KB << 10) - 1) / (HUGE_KB << 10));
	int privileged = may_lock();
	char err[512];

	if (cfg->reserve_hugepages) {
		if (geteuid() == 0)
			reserve_hugepages(pages);
		else
			qgd_warn("hugepages: reserve-hugepages needs root; the pool takes what is reserved already");
	}
	struct qg_hugepool_opts o = {
		.bytes = cfg->pool_bytes,
		.lock = privileged ? QG_HUGEPOOL_LOCK_MUST : QG_HUGEPOOL_LOCK_TRY,
		.require_hugetlb = cfg->require_hugepages,
	};
	int r = qg_hugepool_new(&o, &srv->pool, err, sizeof err);
	if (r) {
		qgd_error("memory pool of %llu bytes: %s", (unsigned long long)cfg->pool_bytes, err);
		return r;
	}
	const struct qg_hugepool_info *in = qg_hugepool_info(srv->pool);
	if (in->locked || privileged) {
		qgd_info("memory: %s", in->text);
	} else {
		struct rlimit rl = { 0, 0 };
		getrlimit(RLIMIT_MEMLOCK, &rl);
		qgd_warn("memory: %s (RLIMIT_MEMLOCK is %llu bytes: run as root or with CAP_IPC_LOCK to lock it)",
			 in->text, (unsigned long long)rl.rlim_cur);
	}
	return 0;
}

void qgd_memory_fini(struct qgd_server *srv)
{
	qg_hugepool_free(srv->pool);
	srv->pool = NULL;
}
