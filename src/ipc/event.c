/*
 * event.c - events (see event.h): publishing a record to the trusted word
 * and the mirror, and waiting with a spin, then a shared futex.
 */
#include "config.h"

#include <errno.h>

#include "event.h"
#include "futex.h"
#include "stamp.h"

/* How long a waiter spins before it sleeps: a record this soon is common when the work is short. */
#define EVENT_SPIN_NS 20000u

void qg_event_init(struct qg_event *ev, uint32_t seq, struct qg_event_slot *mirror)
{
	atomic_init(&ev->word.seq, seq);
	atomic_init(&ev->word.status, 0);
	atomic_init(&ev->word.waiters, 0);
	ev->word.reserved = 0;
	ev->mirror = mirror;
	if (mirror) {
		atomic_store_explicit(&mirror->status, 0, memory_order_relaxed);
		atomic_store_explicit(&mirror->seq, seq, memory_order_release);
	}
}

uint32_t qg_event_seq(const struct qg_event *ev)
{
	return atomic_load_explicit(&ev->word.seq, memory_order_acquire);
}

/*
 * Publish (SEQ, STATUS) in S and wake its sleepers.
 *
 * Status first, then the sequence number with release: a waiter that
 * reads the new number with acquire sees the status, and everything the
 * recorder wrote before (the work's results).
 *
 * The wake is skipped when nobody sleeps, which needs a full fence on
 * both sides.  The recorder does: store SEQ; fence; load WAITERS.  A
 * waiter does: add to WAITERS; fence; load SEQ, and sleeps only if SEQ is
 * still old.  With the two seq_cst fences, the two loads cannot both miss
 * the other side's store (the store-buffering pattern): either the
 * recorder sees the waiter and wakes it, or the waiter sees the new
 * number and does not sleep.  A waiter that loaded the old number just
 * before the store is safe too: the kernel compares the word with the
 * value it expects under the futex bucket's lock, so it either sees the
 * new number and returns at once, or queues the waiter before our wake
 * looks for it.  Release/acquire alone would allow both loads to read
 * the old values (a lost wake-up); on ARM the fence is a dmb ish.
 *
 * In a mirror WAITERS is client-written: a wrong value costs a needless
 * syscall or the client's own missed wake-up (its wait has a time-out),
 * nothing else.
 */
static void publish(struct qg_event_slot *s, uint32_t seq, int status)
{
	atomic_store_explicit(&s->status, status, memory_order_relaxed);
	atomic_store_explicit(&s->seq, seq, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&s->waiters, memory_order_relaxed))
		qg_futex_wake(&s->seq, true);
}

void qg_event_record_seq(struct qg_event *ev, uint32_t seq, int status)
{
	publish(&ev->word, seq, status);
	if (ev->mirror)
		publish(ev->mirror, seq, status);	/* from our own value, never read back */
}

uint32_t qg_event_record(struct qg_event *ev, int status)
{
	/* relaxed: only the recorder writes the trusted word */
	uint32_t seq = atomic_load_explicit(&ev->word.seq, memory_order_relaxed) + 1;

	qg_event_record_seq(ev, seq, status);
	return seq;
}

int qg_event_query(const struct qg_event *ev, uint32_t seq, int *status)
{
	uint32_t cur;

	return qg_event_slot_reached(&ev->word, seq, &cur, status);
}

int qg_event_slot_sleep(struct qg_event_slot *s, uint32_t cur, uint64_t deadline_ns)
{
	int r = 0;

	/* announce, fence, look again: the fence pairs with publish()'s (see there) */
	atomic_fetch_add_explicit(&s->waiters, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&s->seq, memory_order_relaxed) == cur)
		r = qg_futex_wait(&s->seq, cur, deadline_ns, true);
	atomic_fetch_sub_explicit(&s->waiters, 1, memory_order_relaxed);
	return r;
}

int qg_event_slot_wait(struct qg_event_slot *s, uint32_t seq, int64_t timeout_ns)
{
	const uint64_t start = qg_stamp_ns();
	const uint64_t deadline = timeout_ns < 0 ? 0 : start + (uint64_t)timeout_ns;
	uint32_t cur;
	int status;

	for (unsigned spins = 0;; spins++) {
		if (qg_event_slot_reached(s, seq, &cur, &status))
			return status;
		/* the clock is read every 64 trips: a trip is a pause, tens of ns */
		if (spins % 64)
			goto relax;
		uint64_t now = qg_stamp_ns();
		if (timeout_ns >= 0 && now >= deadline)
			return -ETIMEDOUT;
		if (now - start < EVENT_SPIN_NS)
			goto relax;
		qg_event_slot_sleep(s, cur, deadline);
		continue;
relax:
		qg_cpu_relax();
	}
}

int qg_event_wait(struct qg_event *ev, uint32_t seq, int64_t timeout_ns)
{
	return qg_event_slot_wait(&ev->word, seq, timeout_ns);
}
