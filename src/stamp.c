/*
 * stamp.c - CLOCK_MONOTONIC nanoseconds from the CPU's counter (see stamp.h).
 *
 * A thread's state: an anchor (NS0 read from the clock at counter value T0)
 * and the clock's rate in nanoseconds per tick as a 32.32 fixed-point
 * MULT, measured between the last two anchors.  A stamp is
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

#define ANCHOR_NS 10000000u	/* a new anchor this often: the error of a rate measured over it stays small */
#define FIRST_NS 1000000u	/* the first rate is measured over this, with plain clock reads meanwhile */
#define PAIR_TRIES 3		/* an anchor is the tightest of a few (counter, clock, counter) readings */

enum { SOURCE_UNKNOWN = -1, SOURCE_NONE, SOURCE_TSC, SOURCE_CNTVCT };

static _Atomic int source = SOURCE_UNKNOWN;

static uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t counter(void)
{
#if defined(__x86_64__)
	return __rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
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
#elif defined(__aarch64__)
	return SOURCE_CNTVCT;	/* architected, and what the vDSO itself reads */
#else
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
	case SOURCE_CNTVCT: return "cntvct";
	default: return "none";
	}
}

struct stamp_state {
	uint64_t ns0, t0;	/* the anchor; T0 == 0: none yet */
	uint64_t mult;		/* ns per tick, 32.32; 0 while the first rate is measured */
	uint64_t span;		/* ticks from T0 to the next anchor */
	uint64_t last;		/* the last value given: none smaller follows */
};

static _Thread_local struct stamp_state st;

/* A (clock, counter) pair read as close together as a few tries allow. */
static void read_pair(uint64_t *ns, uint64_t *t)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < PAIR_TRIES; i++) {
		uint64_t a = counter(), n = clock_ns(), b = counter();
		if (b >= a && b - a < best) {
			best = b - a;
			*ns = n;
			*t = a + (b - a) / 2;
		}
	}
	if (best == UINT64_MAX) {	/* the counter went back every time: anchor on the clock alone */
		*ns = clock_ns();
		*t = counter();
	}
}

static uint64_t give(uint64_t ns)
{
	if (ns < st.last)
		ns = st.last;
	st.last = ns;
	return ns;
}

/* A new anchor (and, from the time since the last, a new rate). */
static uint64_t anchor(void)
{
	uint64_t ns, t;

	read_pair(&ns, &t);
	if (st.t0 && t > st.t0 && ns > st.ns0) {
		uint64_t dns = ns - st.ns0, dt = t - st.t0;
		if (st.mult == 0 && dns < FIRST_NS)
			return give(ns);	/* still measuring the first rate: keep the first anchor */
		unsigned __int128 m = ((unsigned __int128)dns << 32) / dt;
		st.mult = m > UINT64_MAX ? 0 : (uint64_t)m;
	}
	st.ns0 = ns;
	st.t0 = t;
	st.span = st.mult ? (uint64_t)(((unsigned __int128)ANCHOR_NS << 32) / st.mult) : 0;
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
