/*
 * memory.c - the daemon's memory: one hugepage pool, sized by pool-size,
 * that holds every weight matrix and every graph's intermediates.
 *
 * It is set up before the privilege drop: as root, with reserve-hugepages,
 * the daemon first raises the hugepage count until the pool fits: the
 * global one on a machine of one memory node; on several, each node's
 * count by its share, over the nodes of the CPUs it runs graphs on (every
 * node when it has no CPU list), and the pool's pages are then interleaved
 * over those nodes (or bound to the one) (it never
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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cap-ng.h>

#include "cpulist.h"
#include "hugepool.h"
#include "memory.h"
#include "server.h"

#define HUGE_KB 2048

static int read_long_at(const char *path, long *v)
{
	FILE *f = fopen(path, "r");
	char line[64], *end;
	int r = -1;

	if (f && fgets(line, sizeof line, f)) {
		errno = 0;
		long x = strtol(line, &end, 10);
		if (!errno && end != line && (*end == '\n' || *end == 0) && x >= 0) {
			*v = x;
			r = 0;
		}
	}
	if (f)
		fclose(f);
	return r;
}

static int write_long_at(const char *path, long v)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	int bad = fprintf(f, "%ld\n", v) < 0;
	return fclose(f) != 0 || bad ? -1 : 0;
}

/* The CPU-list file at PATH as a bit mask of its first 64 entries (nodes), 0 if unreadable. */
static uint64_t read_mask(const char *path)
{
	static int ids[QG_CPU_MAX];
	FILE *f = fopen(path, "r");
	char line[4096];
	uint64_t m = 0;
	int n;

	if (f && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (qg_cpulist_parse(line, ids, QG_CPU_MAX, &n) == 0)
			for (int i = 0; i < n; i++)
				if (ids[i] < 64)
					m |= 1ull << ids[i];
	}
	if (f)
		fclose(f);
	return m;
}

/*
 * Raise the count in DIR (a hugepages-2048kB directory) so that PAGES are
 * free there; never lower it.  WHERE names it in the log.
 */
static void reserve_in(const char *dir, long pages, const char *where)
{
	char nr_path[512], free_path[512];
	long total, free_pages, after;

	snprintf(nr_path, sizeof nr_path, "%s/nr_hugepages", dir);
	snprintf(free_path, sizeof free_path, "%s/free_hugepages", dir);
	if (read_long_at(nr_path, &total) || read_long_at(free_path, &free_pages)) {
		qgd_warn("hugepages: cannot read the counts in %s: not reserving %s", dir, where);
		return;
	}
	if (free_pages >= pages) {
		qgd_info("hugepages: %s: %ld free of %ld, %ld needed: none to add", where, free_pages, total, pages);
		return;
	}
	long want = total + (pages - free_pages);
	if (write_long_at(nr_path, want)) {
		qgd_warn("hugepages: %s: cannot raise the count from %ld to %ld: %s", where, total, want, strerror(errno));
		return;
	}
	if (read_long_at(nr_path, &after))
		after = -1;
	qgd_info("hugepages: %s: added %ld (%ld -> %ld, asked for %ld); qgraphd never lowers the count", where,
		 after - total, total, after, want);
	if (after < want)
		qgd_warn("hugepages: %s: the kernel gave %ld of the %ld asked for (memory too fragmented?)", where, after,
			 want);
}

uint64_t qgd_hugepages_nodes(const char *sysfs, const char *cpus)
{
	char path[512];

	snprintf(path, sizeof path, "%s/devices/system/node/has_memory", sysfs);
	uint64_t mem = read_mask(path), use = 0;
	if (!(mem & (mem - 1)))
		return 0;	/* one node (or no NUMA information): nothing to spread */
	if (cpus) {
		static int ids[QG_CPU_MAX];
		int n;
		if (qg_cpulist_parse(cpus, ids, QG_CPU_MAX, &n) == 0) {
			for (int node = 0; node < 64; node++) {
				if (!(mem >> node & 1))
					continue;
				snprintf(path, sizeof path, "%s/devices/system/node/node%d/cpulist", sysfs, node);
				static int ncpu[QG_CPU_MAX];
				int nn;
				FILE *f = fopen(path, "r");
				char line[4096];
				if (!f)
					continue;
				if (fgets(line, sizeof line, f)) {
					line[strcspn(line, "\n")] = 0;
					if (qg_cpulist_parse(line, ncpu, QG_CPU_MAX, &nn) == 0)
						for (int i = 0; i < n; i++)
							for (int j = 0; j < nn; j++)
								if (ids[i] == ncpu[j])
									use |= 1ull << node;
				}
				fclose(f);
			}
		}
	}
	if (!use)
		use = mem;	/* no CPU list, or its CPUs on no memory node: every node */
	return use;
}

void qgd_hugepages_reserve(const char *sysfs, long pages, uint64_t nodes)
{
	char dir[512], where[32];

	if (!nodes) {
		snprintf(dir, sizeof dir, "%s/kernel/mm/hugepages/hugepages-%dkB", sysfs, HUGE_KB);
		reserve_in(dir, pages, "vm.nr_hugepages");
		return;
	}
	/* the pool's pages go round-robin over NODES: each needs its share */
	long share = (pages + __builtin_popcountll(nodes) - 1) / __builtin_popcountll(nodes);
	for (int node = 0; node < 64; node++) {
		if (!(nodes >> node & 1))
			continue;
		snprintf(dir, sizeof dir, "%s/devices/system/node/node%d/hugepages/hugepages-%dkB", sysfs, node, HUGE_KB);
		snprintf(where, sizeof where, "node %d", node);
		reserve_in(dir, share, where);
	}
}

/* True if this process may lock memory past RLIMIT_MEMLOCK. */
static bool may_lock(void)
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

	uint64_t nodes = qgd_hugepages_nodes("/sys", cfg->cpus);
	if (cfg->reserve_hugepages) {
		if (geteuid() == 0)
			qgd_hugepages_reserve("/sys", pages, nodes);
		else
			qgd_warn("hugepages: reserve-hugepages needs root; the pool takes what is reserved already");
	}
	struct qg_hugepool_opts o = {
		.bytes = cfg->pool_bytes,
		.lock = privileged ? QG_HUGEPOOL_LOCK_MUST : QG_HUGEPOOL_LOCK_TRY,
		.require_hugetlb = cfg->require_hugepages,
		.interleave_nodes = nodes,
	};
	/* a large pool takes seconds to fault in and lock: say so, for whoever waits on the socket */
	qgd_info("memory: reserving %s a pool of %llu MiB", o.lock == QG_HUGEPOOL_LOCK_MUST ? "and locking" :
		 "(locking if allowed)", (unsigned long long)(cfg->pool_bytes >> 20));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int r = qg_hugepool_new(&o, &srv->pool, err, sizeof err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (r) {
		qgd_error("memory pool of %llu bytes: %s", (unsigned long long)cfg->pool_bytes, err);
		return r;
	}
	qgd_info("memory: pool of %llu MiB reserved in %.2f s", (unsigned long long)(cfg->pool_bytes >> 20),
		 (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
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
