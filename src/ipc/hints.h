/*
 * hints.h - the CPU hints in the session region's header (region.h:
 * LOOP_CPU and WAITER_CPU), so that a client thread and the daemon's loop
 * that share a CPU yield to each other instead of spinning against each
 * other.  Both sides use these and nothing else to touch the two words.
 *
 *   daemon: qg_hint_loop_cpu   where its loop runs (after it looks again)
 *           qg_hint_waiter_on  whether a client spins on the loop's CPU
 *   client: qg_hint_spin_here  where this thread spins, and whether the
 *                              loop runs there too (then: yield, not spin)
 *           qg_hint_spin_done  no one spins for a completion any more
 *
 * Each word holds a CPU number plus one (0: not known).  Every access is
 * relaxed, on ARM as on x86-64 a plain aligned 32-bit load or store (each
 * is single-copy atomic): a hint orders nothing and guards nothing.  A
 * stale or scribbled value costs one needless yield, one spin beside the
 * loop, or one needless move of the loop; the daemon trusts what it reads
 * for no other choice than these.
 */
#ifndef QG_HINTS_H
#define QG_HINTS_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "region.h"

/* CPU as a hint word: its number plus one, 0 when not known (negative). */
static inline uint32_t qg_hint_word(int cpu)
{
	return cpu < 0 ? 0 : (uint32_t)cpu + 1;
}

/* Daemon: tell H's client that the loop runs on CPU (negative: not known). */
static inline void qg_hint_loop_cpu(struct qg_region_header *h, int cpu)
{
	atomic_store_explicit(&h->loop_cpu, qg_hint_word(cpu), memory_order_relaxed);
}

/* Daemon: true if H's client says a thread of its spins for a completion on CPU (never for CPU < 0). */
static inline bool qg_hint_waiter_on(struct qg_region_header *h, int cpu)
{
	return cpu >= 0 && atomic_load_explicit(&h->waiter_cpu, memory_order_relaxed) == qg_hint_word(cpu);
}

/*
 * Client, as a thread starts (or goes on) spinning for the daemon: say
 * where it runs, and return true if the daemon's loop runs there too
 * (spinning would only keep the loop from posting what it waits for).
 * False when the CPU is not known.
 */
static inline bool qg_hint_spin_here(struct qg_region_header *h)
{
	int c = sched_getcpu();

	if (c < 0)
		return false;
	atomic_store_explicit(&h->waiter_cpu, qg_hint_word(c), memory_order_relaxed);
	return atomic_load_explicit(&h->loop_cpu, memory_order_relaxed) == qg_hint_word(c);
}

/* Client: no thread spins for a completion now (its wait ended). */
static inline void qg_hint_spin_done(struct qg_region_header *h)
{
	atomic_store_explicit(&h->waiter_cpu, 0, memory_order_relaxed);
}

#endif /* QG_HINTS_H */
