/*
 * memory-test.c - the daemon's hugepage reservation against a fake sysfs
 * tree (these machines have one NUMA node): one node uses the global
 * count, several split the pool over the nodes of the CPUs it runs on,
 * counts are raised by what is missing and never lowered, and files that
 * say nothing sensible are left alone.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memory.h"
#include "tap.h"

static char root[64];

static void put(const char *rel, const char *text)
{
	char path[512], dir[512];

	snprintf(path, sizeof path, "%s/%s", root, rel);
	/* make every directory on the way */
	for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		snprintf(dir, sizeof dir, "%.*s", (int)(p - path), path);
		mkdir(dir, 0755);
	}
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static long get(const char *rel)
{
	char path[512];
	long v = -1;

	snprintf(path, sizeof path, "%s/%s", root, rel);
	FILE *f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

#define NODE(n, f) "devices/system/node/node" #n "/hugepages/hugepages-2048kB/" f
#define GLOBAL(f) "kernel/mm/hugepages/hugepages-2048kB/" f

static void two_nodes(void)
{
	put("devices/system/node/has_memory", "0-1\n");
	put("devices/system/node/node0/cpulist", "0-1\n");
	put("devices/system/node/node1/cpulist", "2-3\n");
	put(NODE(0, "nr_hugepages"), "2\n");
	put(NODE(0, "free_hugepages"), "1\n");
	put(NODE(1, "nr_hugepages"), "2\n");
	put(NODE(1, "free_hugepages"), "1\n");
	put(GLOBAL("nr_hugepages"), "4\n");
	put(GLOBAL("free_hugepages"), "2\n");
}

int main(void)
{
	snprintf(root, sizeof root, "/tmp/qg-sysfs-XXXXXX");
	if (!mkdtemp(root))
		return 99;

	/* one node: the global count, raised by what is missing */
	put("devices/system/node/has_memory", "0\n");
	put(GLOBAL("nr_hugepages"), "4\n");
	put(GLOBAL("free_hugepages"), "2\n");
	uint64_t nodes = qgd_hugepages_nodes(root, NULL);
	qgd_hugepages_reserve(root, 10, nodes);
	tap_ok(nodes == 0 && get(GLOBAL("nr_hugepages")) == 12, "one node: the global count goes 4 -> %ld for 10 pages",
	       get(GLOBAL("nr_hugepages")));
	put(GLOBAL("free_hugepages"), "10\n");
	qgd_hugepages_reserve(root, 3, 0);
	tap_ok(get(GLOBAL("nr_hugepages")) == 12, "enough free: nothing added, nothing lowered");

	/* two nodes, no CPU list: both, half the pool each */
	two_nodes();
	nodes = qgd_hugepages_nodes(root, NULL);
	qgd_hugepages_reserve(root, 10, nodes);
	tap_ok(nodes == 3 && get(NODE(0, "nr_hugepages")) == 6 && get(NODE(1, "nr_hugepages")) == 6 &&
		       get(GLOBAL("nr_hugepages")) == 4,
	       "two nodes: 5 pages each, per node (%ld, %ld), the global count untouched", get(NODE(0, "nr_hugepages")),
	       get(NODE(1, "nr_hugepages")));

	/* CPUs of one node only: that node holds the whole pool */
	two_nodes();
	nodes = qgd_hugepages_nodes(root, "2-3");
	qgd_hugepages_reserve(root, 10, nodes);
	tap_ok(nodes == 2 && get(NODE(0, "nr_hugepages")) == 2 && get(NODE(1, "nr_hugepages")) == 11,
	       "CPUs 2-3 are on node 1: all 10 pages there (%ld), none on node 0 (%ld)", get(NODE(1, "nr_hugepages")),
	       get(NODE(0, "nr_hugepages")));

	/* CPUs on both nodes */
	two_nodes();
	nodes = qgd_hugepages_nodes(root, "1,2");
	qgd_hugepages_reserve(root, 7, nodes);
	tap_ok(nodes == 3 && get(NODE(0, "nr_hugepages")) == 5 && get(NODE(1, "nr_hugepages")) == 5,
	       "CPUs 1 and 2: both nodes, 4 pages each for 7 (%ld, %ld)", get(NODE(0, "nr_hugepages")),
	       get(NODE(1, "nr_hugepages")));

	/* CPUs on no memory node: every memory node */
	two_nodes();
	tap_ok(qgd_hugepages_nodes(root, "40-41") == 3, "CPUs on no listed node: every memory node");

	/* files that make no sense are left alone */
	two_nodes();
	put(NODE(1, "free_hugepages"), "lots\n");
	qgd_hugepages_reserve(root, 10, 3);
	tap_ok(get(NODE(0, "nr_hugepages")) == 6 && get(NODE(1, "nr_hugepages")) == 2,
	       "an unreadable count: that node is left alone, the other reserved");
	put("devices/system/node/has_memory", "garbage\n");
	tap_ok(qgd_hugepages_nodes(root, NULL) == 0, "an unreadable node list: treated as one node");

	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	(void)!system(cmd);
	return tap_done();
}
