/*
 * cpulist.h - CPU lists as the kernel writes them ("0-3,8,10-11"): the
 * cores the CPU backend's workers are pinned to, and what qgraphd's
 * --cpus will take.
 *
 * Grammar: ITEM (',' ITEM)*, ITEM = N | N '-' M with N <= M, numbers in
 * decimal digits only (no sign, no space), each below QG_CPU_MAX.  A CPU
 * named twice is refused (a typo more often than a wish), and so is an
 * empty list or an empty item.
 */
#ifndef QG_CPULIST_H
#define QG_CPULIST_H

#include <stddef.h>

#define QG_CPU_MAX 1024	/* CPU numbers are below this (glibc's CPU_SETSIZE) */

/*
 * Parse S into CPUS (room for MAX), in the order written; *N gets the
 * count.  0, or -EINVAL (syntax, reversed range, duplicate, NULL),
 * -ERANGE (a number >= QG_CPU_MAX), -E2BIG (more than MAX CPUs).  *N is
 * 0 on error.
 */
int qg_cpulist_parse(const char *s, int *cpus, int max, int *n);

/*
 * Write the N CPUS as a list into BUF (SIZE bytes, NUL-terminated), runs
 * of consecutive numbers as ranges.  The length written, or -ENOSPC
 * (BUF then holds a truncated, still terminated list) / -EINVAL.
 */
int qg_cpulist_format(const int *cpus, int n, char *buf, size_t size);

#endif /* QG_CPULIST_H */
