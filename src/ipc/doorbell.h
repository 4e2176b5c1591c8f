/*
 * doorbell.h - the two wake-up protocols of the session region (region.h),
 * each written once here and used by both sides:
 *
 *   the doorbell      client -> daemon: a record was submitted to a loop
 *                     that announced it sleeps (DAEMON_SLEEPING; an eventfd)
 *   the completion    daemon -> client: a completion was posted to a client
 *   wait              that sleeps for one (CLIENT_WAITING; a futex on the
 *                     COMPLETIONS count)
 *
 * Both sides poll while work flows, and make a syscall only when the other
 * has said it sleeps.  Each protocol is the store-buffering pattern:
 *
 *   sleeper:  store "I sleep";   fence (seq_cst);  load "is there work?"
 *   producer: store the work;    fence (seq_cst);  load "does it sleep?"
 *
 * With the two seq_cst fences the two loads cannot both miss the other
 * side's store: either the producer sees the sleeper and wakes it, or the
 * sleeper sees the work and does not sleep.  Release and acquire alone do
 * not give this: each store may still sit in its CPU's store buffer while
 * the same CPU's later load is served (ARM's weak model allows it, and so
 * does x86-64's TSO), and then both loads read the old values: work in the
 * ring and nobody awake to take it.  On ARM each fence is a dmb ish; on
 * x86-64 an mfence (or a locked instruction).
 *
 * The doorbell's pairs: qg_doorbell_ring_if_asleep's fence (client, after
 * qg_ring_push's release store of the submit tail) with
 * qg_doorbell_fence (daemon, after qg_doorbell_announce in every session,
 * before its last look at the submit rings).
 *
 * The completion wait's pairs: qg_completion_notify's fence (daemon, after
 * qg_ring_push's release store of the completion tail and the count) with
 * the fence in qg_completion_sleep (client, after adding itself to
 * CLIENT_WAITING, before its last look at the ring and the count).  A
 * client that looked just before the count moved is safe as well: the
 * kernel compares the futex word with the count the client read under the
 * futex bucket's lock, so it either sees the new count and returns, or
 * queues the client before the daemon's wake looks for it.
 *
 * What the client writes here (CLIENT_WAITING) only decides whether the
 * daemon makes a futex wake: a scribbled value costs a needless syscall
 * or the client's own missed wake-up (its sleep has a time-out), nothing
 * else.  The daemon never sleeps on a word the client can write.
 */
#ifndef QG_DOORBELL_H
#define QG_DOORBELL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "futex.h"
#include "region.h"
#include "ring.h"

/* ------------------------------------------------------------ the doorbell */

/* Daemon: a new doorbell, a non-blocking eventfd: the descriptor, or -errno. */
int qg_doorbell_open(void);

/* Daemon: empty doorbell BELL after it woke the loop (it only wakes: the rings say what came). */
void qg_doorbell_clear(int bell);

/* Client: ring doorbell BELL (one eventfd write; a full counter is as good as a ring). */
static inline void qg_doorbell_ring(int bell)
{
	uint64_t one = 1;

	(void)!write(bell, &one, sizeof one);
}

/*
 * Client, just after publishing a record (qg_ring_push): ring BELL if H's
 * daemon has announced that it sleeps.  The fence pairs with
 * qg_doorbell_fence (see above).
 */
static inline void qg_doorbell_ring_if_asleep(struct qg_region_header *h, int bell)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&h->daemon_sleeping, memory_order_relaxed))
		qg_doorbell_ring(bell);
}

/*
 * Daemon: announce in H (ASLEEP) that the loop is about to block, or
 * withdraw it once awake.  Relaxed: qg_doorbell_fence orders the
 * announcement before the last look; a withdrawal late to be seen costs
 * the client one needless ring.
 */
static inline void qg_doorbell_announce(struct qg_region_header *h, bool asleep)
{
	atomic_store_explicit(&h->daemon_sleeping, asleep ? 1u : 0u, memory_order_relaxed);
}

/*
 * Daemon: between announcing sleep in every session's header and the last
 * look at their submit rings (one fence for them all).  Pairs with the
 * fence in qg_doorbell_ring_if_asleep.
 */
static inline void qg_doorbell_fence(void)
{
	atomic_thread_fence(memory_order_seq_cst);
}

/* ------------------------------------------------------ the completion wait */

/*
 * Daemon, just after posting a completion to H's ring (qg_ring_push): bump
 * the count and wake the client if it sleeps on it.  The release orders
 * the record before the count for a client that reads the count with
 * acquire; the fence pairs with the one in qg_completion_sleep.  Returns
 * true if it made the wake (the client said it sleeps), false if not.
 */
static inline bool qg_completion_notify(struct qg_region_header *h)
{
	atomic_fetch_add_explicit(&h->completions, 1, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&h->client_waiting, memory_order_relaxed))
		return false;
	qg_futex_wake(&h->completions, true);	/* shared: the sleeper is another process */
	return true;
}

/*
 * Client: sleep until the daemon posts a completion to COMPLETE (H's
 * completion ring, whose records up to now were read), or the
 * CLOCK_MONOTONIC time DEADLINE_NS (0: none).  It may return early
 * (a signal, a spurious wake, another thread's completion): the caller
 * looks at the ring, and calls again.  Returns 0, -ETIMEDOUT or -EINTR
 * (from qg_futex_wait), or -EPROTO if the ring is corrupt.
 */
int qg_completion_sleep(struct qg_region_header *h, struct qg_ring *complete, uint64_t deadline_ns);

#endif /* QG_DOORBELL_H */
