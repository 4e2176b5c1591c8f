/*
 * memory.h - the pool that holds weights and intermediates, mapped and
 * locked before the privileges are dropped (memory.c), and the hugepage
 * reservation under it.
 */
#ifndef QGD_MEMORY_H
#define QGD_MEMORY_H

#include <stdint.h>

struct qgd_server;

/*
 * Map the pool of pool-size bytes (on hugetlb pages where it can, locked
 * where the limits allow) into SRV->pool.  0 or -errno (logged).
 */
int qgd_memory_init(struct qgd_server *srv);
/*
 * The NUMA nodes (bit i: node i) under SYSFS that the pool should spread
 * over: those with memory that hold a CPU of CPUS (every memory node when
 * CPUS is NULL or names none of them); 0 on a machine of one node (or
 * when sysfs does not say).
 */
uint64_t qgd_hugepages_nodes(const char *sysfs, const char *cpus);
/*
 * Reserve hugepages under SYSFS so that PAGES 2 MiB pages are free: in the
 * global count when NODES is 0, else each node of NODES its share.  Never
 * lowers a count; logs what it added.
 */
void qgd_hugepages_reserve(const char *sysfs, long pages, uint64_t nodes);
/* Unmap the pool. */
void qgd_memory_fini(struct qgd_server *srv);

#endif /* QGD_MEMORY_H */
