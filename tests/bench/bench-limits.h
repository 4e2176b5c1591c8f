/*
 * bench-limits.h - the read bandwidth and the int8 MAC peak of this
 * machine, measured with a pool's threads; each the fastest of its
 * repetitions (bench_min says why).
 */
#ifndef QG_BENCH_LIMITS_H
#define QG_BENCH_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"
#include "kernels.h"

/* Read bandwidth in bytes/s over LEN bytes at BUF: the fastest of 15 reads (5 if QUICK). */
double bench_read_bw(struct bench_pool *pool, const uint8_t *buf, size_t len, int quick);
/* One read of LEN bytes at BUF after one to warm up, in bytes/s (a round's measure). */
double bench_read_once(struct bench_pool *pool, const uint8_t *buf, size_t len);
/* int8 MACs/s of FAMILY's MAC loop (bench_macs); 0 when none runs here. */
double bench_int8_peak(struct bench_pool *pool, int quick, enum qg_kfamily family);

#endif
