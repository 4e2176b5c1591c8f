/*
 * stamp.c - CLOCK_MONOTONIC nanoseconds from the CPU's counter (see stamp.h).
 *
 * A thread's state: an anchor (NS0 read from the clock at counter value T0)
 * and the clock's rate in nanoseconds per tick as a 32.32 fixed-point
 * MULT, measured from a baseline anchor up to the last.  A stamp is
 * NS0 + (T - T0) * MULT, or a new anchor when the last is SPAN old.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "stamp.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define ANCHOR_NS 10000000u	/* a new anchor at least this often */
#define FIRST_NS 1000000u	/* the first rate is measured over this, with plain clock reads meanwhile */
#define BASELINE_NS 10000000000u	/* the rate is measured over at most this (and at least a tenth of it) */
#define PAIR_TRIES 3		/* tries at a narrow (counter, clock, counter) reading */
#define PAIR_SLACK 16		/* ticks a reading may be wider than twice the narrowest: a counter's resolution */

enum { SOURCE_UNKNOWN = -1, SOURCE_NONE, SOURCE_TSC };

static _Atomic int source = SOURCE_UNKNOWN;

static uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t qg_stamp_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t counter(void)
{
#if defined(__x86_64__)
	return __rdtsc();
#else
	return 0;	/* never read: no source (find_source) */
#endif
}

static int find_source(void)
{
#if defined(__x86_64__)
	/* the TSC only where the kernel keeps time with it: then it is stable and the same on every CPU */
	char buf[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
	if (f) {
		if (!fgets(buf, sizeof buf, f))
			buf[0] = 0;
		fclose(f);
	}
	return strcmp(buf, "tsc\n") == 0 ? SOURCE_TSC : SOURCE_NONE;
#else
	/*
	 * aarch64's CNTVCT_EL0 is what the vDSO reads too, but some cores need
	 * workarounds to read it right (errata the kernel knows of, and we
	 * would not), and under qemu-user it follows the host's realtime clock
	 * in microsecond steps: clock_gettime is the safe choice there.
	 */
	return SOURCE_NONE;
#endif
}

static int the_source(void)
{
	int s = atomic_load_explicit(&source, memory_order_relaxed);

	if (s == SOURCE_UNKNOWN) {
		s = find_source();
		atomic_store_explicit(&source, s, memory_order_relaxed);	/* every thread finds the same */
	}
	return s;
}

const char *qg_stamp_source(void)
{
	switch (the_source()) {
	case SOURCE_TSC: return "tsc";
	default: return "none";
	}
}

struct stamp_state {
	uint64_t ns0, t0;	/* the anchor stamps extrapolate from; T0 == 0: none yet */
	uint64_t nsb, tb;	/* the baseline the rate is measured from: an earlier anchor */
	uint64_t mult;		/* ns per tick, 32.32; 0 until the baseline is FIRST_NS old */
	uint64_t span;		/* ticks from T0 to the next anchor */
	uint64_t pair_min;	/* the narrowest (counter, clock, counter) reading seen, in ticks */
	bool have_pair;		/* PAIR_MIN is set */
	uint64_t last;		/* the last value given: none smaller follows */
};

static _Thread_local struct stamp_state st;

/*
 * A (clock, counter) pair: the clock read between two counter readings,
 * taken at their midpoint.  A reading much wider than the narrowest seen
 * (the thread lost its CPU between them) is no anchor: false if none of a
 * few tries was narrow, and *NS is a plain clock reading then.
 */
static bool read_pair(uint64_t *ns, uint64_t *t)
{
	for (int i = 0; i < PAIR_TRIES; i++) {
		uint64_t a = counter(), n = clock_ns(), b = counter();
		*ns = n;
		if (b < a)
			continue;
		uint64_t w = b - a;
		if (!st.have_pair || w < st.pair_min) {
			st.pair_min = w;
			st.have_pair = true;
		}
		if (w <= 2 * st.pair_min + PAIR_SLACK) {
			*t = a + w / 2;
			return true;
		}
	}
	return false;
}

static uint64_t give(uint64_t ns)
{
	if (ns < st.last)
		ns = st.last;
	st.last = ns;
	return ns;
}

/*
 * A new anchor, and the rate from the baseline to it.  The error of the
 * rate is a pair's width over the baseline's age, and an anchor is used
 * for no longer than that age (the span doubles from FIRST_NS up to
 * ANCHOR_NS as the baseline ages): what a stamp is off by stays about
 * one pair's width.  The baseline moves on every BASELINE_NS, so the rate
 * follows what NTP does to the clock's.
 */
static uint64_t anchor(void)
{
	uint64_t ns, t;

	if (!read_pair(&ns, &t))
		return give(ns);	/* no good pair now: the clock itself, and try again next time */
	if (!st.tb || t <= st.tb || ns <= st.nsb) {
		/* the first anchor, or the counter went back (another CPU's, a restore): start over */
		st = (struct stamp_state){ .nsb = ns, .tb = t, .pair_min = st.pair_min, .have_pair = st.have_pair,
					   .last = st.last };
		return give(ns);
	}
	uint64_t age = ns - st.nsb;
	if (age < FIRST_NS)
		return give(ns);	/* too young a baseline for a rate: plain clock reads meanwhile */
	unsigned __int128 m = ((unsigned __int128)age << 32) / (t - st.tb);
	if (m == 0 || m > UINT64_MAX) {
		st.mult = 0;
		return give(ns);
	}
	st.mult = (uint64_t)m;
	st.ns0 = ns;
	st.t0 = t;
	uint64_t span_ns = age < ANCHOR_NS ? age : ANCHOR_NS;
	st.span = (uint64_t)(((unsigned __int128)span_ns << 32) / st.mult);
	if (age > BASELINE_NS) {
		st.nsb = ns;
		st.tb = t;
	}
	return give(ns);
}

uint64_t qg_stamp_ns(void)
{
	if (the_source() == SOURCE_NONE)
		return clock_ns();
	uint64_t t = counter();
	if (!st.mult || t < st.t0 || t - st.t0 >= st.span)
		return anchor();
	return give(st.ns0 + (uint64_t)(((unsigned __int128)(t - st.t0) * st.mult) >> 32));
}
