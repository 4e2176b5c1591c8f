/*
 * stamp-test.c - qg_stamp_ns against clock_gettime: every stamp lies
 * between a clock reading just before it and one just after (give or take
 * the few microseconds stamp.h promises), across anchors and on several
 * threads at once, and no stamp is smaller than the one before it.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "stamp.h"
#include "tap.h"

#define SLACK_NS 5000u		/* stamp.h's "a microsecond or so", with room for a noisy machine */
#define RUN_NS 60000000u	/* six anchors' worth */

static uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct result {
	uint64_t n, outside, backwards, worst;	/* stamps taken, out of their bracket, smaller than the last; ns */
};

/* Bracket stamps with clock readings for RUN_NS. */
static void *bracket(void *arg)
{
	struct result *r = arg;
	uint64_t end = clock_ns() + RUN_NS, last = 0;

	for (uint64_t before = clock_ns(); before < end; before = clock_ns()) {
		uint64_t s = qg_stamp_ns(), after = clock_ns();
		uint64_t off = s + SLACK_NS < before ? before - s : s > after + SLACK_NS ? s - after : 0;
		if (off) {
			r->outside++;
			if (off > r->worst)
				r->worst = off;
		}
		r->backwards += s < last;
		last = s;
		r->n++;
	}
	return NULL;
}

int main(void)
{
	struct result one = { 0 };

	tap_diag("counter: %s", qg_stamp_source());
	bracket(&one);
	tap_ok(one.n > 1000 && one.outside == 0,
	       "%llu stamps over %u ms, each within %u ns of the clock around it (%llu outside, worst %llu ns off)",
	       (unsigned long long)one.n, RUN_NS / 1000000u, SLACK_NS, (unsigned long long)one.outside,
	       (unsigned long long)one.worst);
	tap_ok(one.backwards == 0, "none smaller than the one before (%llu were)", (unsigned long long)one.backwards);

	/* threads keep state of their own: three at once, each checked as the one above */
	enum { THREADS = 3 };
	pthread_t th[THREADS];
	struct result r[THREADS] = { { 0 } };
	int started = 0;
	for (int i = 0; i < THREADS; i++)
		started += pthread_create(&th[i], NULL, bracket, &r[i]) == 0;
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	uint64_t outside = 0, backwards = 0, n = 0;
	for (int i = 0; i < started; i++) {
		outside += r[i].outside;
		backwards += r[i].backwards;
		n += r[i].n;
	}
	tap_ok(started == THREADS && outside == 0 && backwards == 0,
	       "%d threads at once: %llu stamps, %llu outside their bracket, %llu backwards", started,
	       (unsigned long long)n, (unsigned long long)outside, (unsigned long long)backwards);

	/* what it is for: cheaper than the clock (a diagnostic; speed is for the benchmarks) */
	uint64_t t0 = clock_ns();
	volatile uint64_t sink = 0;
	for (int i = 0; i < 1000000; i++)
		sink += qg_stamp_ns();
	uint64_t t1 = clock_ns();
	for (int i = 0; i < 1000000; i++)
		sink += clock_ns();
	uint64_t t2 = clock_ns();
	tap_diag("a stamp %.1f ns, a clock read %.1f ns", (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6);
	return tap_done();
}
