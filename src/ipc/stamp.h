/*
 * stamp.h - CLOCK_MONOTONIC nanoseconds, cheaply, for the timestamps of a
 * hot path.
 *
 * clock_gettime is a noticeable share of a tiny graph's round trip through
 * qgraphd, which reads it twice (tests/bench/bench-service measures it).
 * The CPU's own counter costs a few nanoseconds: x86-64's TSC, used only
 * when the kernel's clocksource is the TSC, so that it is known to be
 * stable and the same on every CPU.  (aarch64's CNTVCT_EL0 is left alone:
 * see find_source.)
 *
 * qg_stamp_ns() extrapolates from an anchor, a clock_gettime reading taken
 * between two counter readings, at a rate measured from an earlier anchor;
 * each thread keeps its own (no sharing, no locks), takes a new anchor
 * every 10 ms (sooner while its baseline is young) and refuses readings
 * in which it lost the CPU, so a stamp is off by about the width of one
 * reading (well under a microsecond) whatever NTP does to the clock's
 * rate.  A thread's first millisecond of stamps are plain clock reads,
 * while it measures the rate.  Values never go back within a thread.
 * Without a usable counter it is clock_gettime.
 */
#ifndef QG_STAMP_H
#define QG_STAMP_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds, to within a microsecond or so. */
uint64_t qg_stamp_ns(void);

/* The same clock in milliseconds. */
static inline uint64_t qg_stamp_ms(void)
{
	return qg_stamp_ns() / 1000000u;
}

/*
 * The same clock at the kernel's tick (CLOCK_MONOTONIC_COARSE: up to a few
 * milliseconds behind), for decisions on a hot path that need no more,
 * such as "was the socket asked in the last millisecond": it costs a few
 * nanoseconds wherever qg_stamp_ns has no counter to read.
 */
uint64_t qg_stamp_coarse_ns(void);

/* The counter qg_stamp_ns extrapolates from: "tsc", or "none" (clock_gettime alone). */
const char *qg_stamp_source(void);

#endif
