/*
 * event-test.c - events: record and wait across threads (spinning and
 * sleeping waiters), the time-out, sequence numbers around UINT32_MAX, the
 * error status, the mirror slot (published to, never trusted) and a wait
 * from another process on a shared mapping.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "event.h"
#include "futex.h"
#include "stamp.h"
#include "tap.h"

static void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void test_basics(void)
{
	struct qg_event ev;
	int st = 1;

	qg_event_init(&ev, 0, NULL);
	tap_ok(qg_event_query(&ev, 0, &st) == 1 && st == 0, "a new event has reached its first number, status 0");
	tap_ok(qg_event_query(&ev, 1, NULL) == 0, "and not the next");
	tap_ok(qg_event_wait(&ev, 1, 0) == -ETIMEDOUT, "a zero time-out only looks");
	uint64_t t0 = qg_stamp_ns();
	int r = qg_event_wait(&ev, 1, 30 * 1000000ll);
	double ms = (double)(qg_stamp_ns() - t0) / 1e6;
	tap_ok(r == -ETIMEDOUT && ms >= 29.9 && ms < 2000, "a wait times out after its time-out (%.1f ms for 30)", ms);
	tap_ok(atomic_load(&ev.word.waiters) == 0, "a waiter that timed out has left the waiters count");
	tap_ok(qg_event_record(&ev, 0) == 1 && qg_event_wait(&ev, 1, 0) == 0, "record bumps the number to 1");
	tap_ok(qg_event_record(&ev, -ECANCELED) == 2 && qg_event_wait(&ev, 2, -1) == -ECANCELED,
	       "a record's error status is what the waiter gets");
	tap_ok(qg_event_wait(&ev, 1, 0) == -ECANCELED, "an older number is reached too, with the latest status");
	qg_event_record_seq(&ev, 40, -ERANGE);
	tap_ok(qg_event_seq(&ev) == 40 && qg_event_wait(&ev, 39, 0) == -ERANGE,
	       "record_seq publishes the number asked for");
}

static void test_wrap(void)
{
	struct qg_event ev;
	int ok = 1;

	tap_ok(qg_seq_reached(0, UINT32_MAX) && qg_seq_reached(5, UINT32_MAX - 5) && !qg_seq_reached(UINT32_MAX, 0) &&
		       !qg_seq_reached(UINT32_MAX - 5, 5) && qg_seq_reached(UINT32_MAX, UINT32_MAX),
	       "sequence numbers compare across the wrap");
	tap_ok(qg_seq_reached(0x80000000u - 1, 0) && !qg_seq_reached(0x80000000u, 0),
	       "a number up to 2^31 - 1 ahead counts as reached, 2^31 not");
	qg_event_init(&ev, UINT32_MAX - 2, NULL);
	for (int i = 0; i < 6; i++) {
		uint32_t target = UINT32_MAX - 2 + (uint32_t)i + 1;
		ok &= qg_event_wait(&ev, target, 0) == -ETIMEDOUT;
		ok &= qg_event_record(&ev, 0) == target;
		ok &= qg_event_wait(&ev, target, 0) == 0 && qg_event_wait(&ev, target - 3, 0) == 0;
	}
	tap_ok(ok && qg_event_seq(&ev) == 3, "an event recorded across UINT32_MAX: waits before and after the wrap");
}

/* --- across threads ----------------------------------------------------- */

struct pingpong {
	struct qg_event a, b;
	long n;
	unsigned long long data;	/* plain: ordered by the events alone */
	int bad;
};

static void *pong(void *v)
{
	struct pingpong *p = v;

	for (long i = 1; i <= p->n; i++) {
		if (qg_event_wait(&p->a, (uint32_t)i, 5 * 1000000000ll) != 0) {
			p->bad++;
			return NULL;
		}
		if (p->data != (unsigned long long)i * 3)
			p->bad++;
		p->data = (unsigned long long)i * 3 + 1;
		qg_event_record(&p->b, 0);
	}
	return NULL;
}

static void test_pingpong(void)
{
	struct pingpong p = { .n = 2000L * (tap_scale() ? tap_scale() : 1) };
	pthread_t t;
	int bad = 0;

	qg_event_init(&p.a, 0, NULL);
	qg_event_init(&p.b, 0, NULL);
	pthread_create(&t, NULL, pong, &p);
	for (long i = 1; i <= p.n; i++) {
		p.data = (unsigned long long)i * 3;
		qg_event_record(&p.a, 0);
		if (qg_event_wait(&p.b, (uint32_t)i, 5 * 1000000000ll) != 0) {
			bad++;
			break;
		}
		if (p.data != (unsigned long long)i * 3 + 1)
			bad++;
	}
	pthread_join(t, NULL);
	tap_ok(!bad && !p.bad, "%ld round trips between two threads: each saw the other's data", p.n);
}

struct sleeper {
	struct qg_event *ev;
	struct qg_event_slot *slot;
	uint32_t seq;
	int result;
	uint64_t woke_ns;
};

static void *sleeper_main(void *v)
{
	struct sleeper *s = v;

	s->result = s->slot ? qg_event_slot_wait(s->slot, s->seq, 5 * 1000000000ll)
			    : qg_event_wait(s->ev, s->seq, 5 * 1000000000ll);
	s->woke_ns = qg_stamp_ns();
	return NULL;
}

/* Wait until somebody sleeps on W (the futex path), at most a second. */
static int wait_sleeping(_Atomic uint32_t *w)
{
	for (int i = 0; i < 1000; i++) {
		if (atomic_load(w))
			return 1;
		sleep_ms(1);
	}
	return 0;
}

static void test_sleepers(void)
{
	struct qg_event ev;
	struct sleeper s[3];
	pthread_t t[3];

	qg_event_init(&ev, 7, NULL);
	for (int i = 0; i < 3; i++) {
		s[i] = (struct sleeper){ .ev = &ev, .seq = 8 };
		pthread_create(&t[i], NULL, sleeper_main, &s[i]);
	}
	int slept = wait_sleeping(&ev.word.waiters);
	sleep_ms(20);	/* let all three reach the futex */
	uint64_t t0 = qg_stamp_ns();
	qg_event_record(&ev, -EIO);
	int ok = 1;
	double worst = 0;
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		ok &= s[i].result == -EIO;
		double ms = (double)(s[i].woke_ns - t0) / 1e6;
		worst = ms > worst ? ms : worst;
	}
	tap_ok(slept && ok && worst < 1000, "three sleeping waiters woken by one record, with its status (%.2f ms)",
	       worst);
	tap_ok(atomic_load(&ev.word.waiters) == 0, "the waiters count is back to 0");
}

/* --- the mirror ---------------------------------------------------------- */

static void test_mirror(void)
{
	struct qg_event_slot slot;
	struct qg_event ev;
	struct sleeper s = { .slot = &slot, .seq = 2 };
	pthread_t t;

	memset(&slot, 0xa5, sizeof slot);
	qg_event_init(&ev, 0, &slot);
	tap_ok(atomic_load(&slot.seq) == 0 && atomic_load(&slot.status) == 0, "init publishes to the mirror");
	qg_event_record(&ev, 0);
	tap_ok(atomic_load(&slot.seq) == 1, "a record is published to the mirror");
	atomic_store(&slot.waiters, 0);
	pthread_create(&t, NULL, sleeper_main, &s);
	int slept = wait_sleeping(&slot.waiters);
	sleep_ms(10);
	qg_event_record(&ev, -ETIMEDOUT);
	pthread_join(t, NULL);
	tap_ok(slept && s.result == -ETIMEDOUT, "a client sleeping on its mirror is woken, and sees the status");

	/* a hostile client writes its slot: the trusted side neither sleeps on it nor believes it */
	atomic_store(&slot.seq, 1000);
	atomic_store(&slot.status, -EPERM);
	atomic_store(&slot.waiters, 0xdeadbeef);
	tap_ok(qg_event_wait(&ev, 3, 0) == -ETIMEDOUT && qg_event_seq(&ev) == 2,
	       "a mirror scribbled on changes nothing in the trusted event");
	qg_event_record(&ev, 0);
	tap_ok(atomic_load(&slot.seq) == 3 && atomic_load(&slot.status) == 0,
	       "the next record overwrites the scribble with the trusted number");
}

/* A waiter in another process, on a shared mapping: the futex must be shared. */
static void test_processes(void)
{
	struct qg_event_slot *slot = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct qg_event ev;

	if (slot == MAP_FAILED) {
		tap_skip("no shared mapping");
		return;
	}
	qg_event_init(&ev, 10, slot);
	pid_t pid = tap_fork();
	if (pid == 0) {
		int r = qg_event_slot_wait(slot, 11, 5 * 1000000000ll);
		_exit(r == -ENOTCONN ? 0 : r == 0 ? 10 : 20);
	}
	int slept = wait_sleeping(&slot->waiters);
	sleep_ms(10);
	qg_event_record(&ev, -ENOTCONN);
	int status = -1;
	waitpid(pid, &status, 0);
	tap_ok(slept && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "a waiter in another process sleeps on the shared slot and is woken (exit %d)",
	       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	munmap(slot, 4096);
}

int main(void)
{
	test_basics();
	test_wrap();
	test_pingpong();
	test_sleepers();
	test_mirror();
	test_processes();
	return tap_done();
}
