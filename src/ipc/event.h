/*
 * event.h - events: a sequence number that recording bumps and waiters
 * wait on, with the status of the work it stands for.
 *
 * An event lives in memory its owner provides (struct qg_event is plain
 * data: embed it, put it in an array, map it).  Its trusted word is the
 * one the recorder writes and the backend waits on; it must be memory
 * that only trusted code can write (the daemon's own).  An event may also
 * have a mirror: a struct qg_event_slot in memory shared with a client
 * (the session region's event table), to which every record is published
 * as well.  The mirror is written and never read back, except its WAITERS
 * count, which only decides whether a futex wake is worth a syscall: a
 * client that scribbles on its slot can confuse only itself, and nobody
 * trusted ever sleeps on a word another party can write.
 *
 * Sequence numbers are 32-bit and compare with wrap-around: SEQ has been
 * reached when (int32_t)(current - SEQ) >= 0, so a waiter must wait for a
 * number less than 2^31 ahead of the current one.
 *
 * Each event has one recorder at a time (the thread that finished the
 * work); any number of threads or processes may wait.  Waiting spins
 * briefly, then sleeps on a shared futex with a time-out.
 */
#ifndef QG_EVENT_H
#define QG_EVENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * An event slot.  SEQ is the event's sequence number, published (release)
 * after the work it stands for is done; STATUS is 0 or the error of that
 * work, written before SEQ; WAITERS counts threads sleeping on SEQ (futex,
 * shared).  Part of the session region's ABI (region.h): 16 bytes.
 */
struct qg_event_slot {
	_Atomic uint32_t seq;
	_Atomic int32_t status;
	_Atomic uint32_t waiters;
	uint32_t reserved;
};

_Static_assert(sizeof(struct qg_event_slot) == 16, "event slot is 16 bytes");

struct qg_event {
	struct qg_event_slot word;	/* trusted: written by the recorder only */
	struct qg_event_slot *mirror;	/* NULL, or a copy others may read (never read back) */
};

/* True if sequence number CUR has reached TARGET (wrap-around comparison). */
static inline bool qg_seq_reached(uint32_t cur, uint32_t target)
{
	return (int32_t)(cur - target) >= 0;
}

/* Make EV an event at sequence number SEQ with status 0, publishing to MIRROR (may be NULL). */
void qg_event_init(struct qg_event *ev, uint32_t seq, struct qg_event_slot *mirror);

/* EV's current sequence number (acquire: the work it stands for is visible). */
uint32_t qg_event_seq(const struct qg_event *ev);

/*
 * Record EV: the work before it is done, with STATUS (0 or -errno), which
 * waiters see.  Bumps the sequence number by one and returns the new one.
 */
uint32_t qg_event_record(struct qg_event *ev, int status);

/* Record EV at sequence number SEQ (one the caller chose, e.g. a client's) with STATUS. */
void qg_event_record_seq(struct qg_event *ev, uint32_t seq, int status);

/*
 * 1 if EV has reached SEQ (and *STATUS, if not NULL, holds the status of
 * the latest record), 0 if not.
 */
int qg_event_query(const struct qg_event *ev, uint32_t seq, int *status);

/*
 * Wait until EV reaches SEQ, at most TIMEOUT_NS nanoseconds (negative: no
 * limit, 0: just look).  Returns the status of the latest record (0 or the
 * -errno the work ended with), or -ETIMEDOUT.
 */
int qg_event_wait(struct qg_event *ev, uint32_t seq, int64_t timeout_ns);

/*
 * The same on a bare slot: what a client does on its mirror in shared
 * memory.  Never call this in trusted code on a slot another party can
 * write (see above).
 */
int qg_event_slot_wait(struct qg_event_slot *slot, uint32_t seq, int64_t timeout_ns);

/*
 * The two steps qg_event_slot_wait is made of, for a waiter with its own
 * spinning (libqgraph yields to the daemon instead of pausing, and asks
 * whether the daemon is there between sleeps): look, then sleep.
 *
 * One look at SLOT: true if it has reached SEQ, with the status of the
 * latest record in *STATUS (if not NULL); false if not, with the number
 * it holds in *CUR (for qg_event_slot_sleep).  The acquire pairs with the
 * recorder's release (publish, event.c): the status and the work the
 * event stands for are visible once the number is.
 */
static inline bool qg_event_slot_reached(const struct qg_event_slot *slot, uint32_t seq, uint32_t *cur, int *status)
{
	uint32_t now = atomic_load_explicit(&slot->seq, memory_order_acquire);

	if (!qg_seq_reached(now, seq)) {
		*cur = now;
		return false;
	}
	if (status)
		*status = atomic_load_explicit(&slot->status, memory_order_relaxed);
	return true;
}

/*
 * Sleep on SLOT while it still holds CUR (what qg_event_slot_reached last
 * saw), until a record wakes it or the CLOCK_MONOTONIC time DEADLINE_NS
 * (0: none): the waiter's half of the protocol publish() (event.c)
 * explains.  It may return early; the caller looks again.  0, -ETIMEDOUT
 * or -EINTR.
 */
int qg_event_slot_sleep(struct qg_event_slot *slot, uint32_t cur, uint64_t deadline_ns);

#endif /* QG_EVENT_H */
