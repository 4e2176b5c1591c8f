/*
 * doorbell-test.c - the session region's protocols as both sides use them:
 * the region created by one side and attached by the other (region.c),
 * the doorbell and the completion wait (doorbell.h), the CPU hints
 * (hints.h).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "doorbell.h"
#include "hints.h"
#include "region.h"
#include "ring.h"
#include "shm.h"
#include "stamp.h"
#include "tap.h"

/* A client thread that sleeps for a completion, as libqgraph's wait does. */
struct sleeper {
	struct qg_region *rg;
	int r;
};

static void *sleep_once(void *arg)
{
	struct sleeper *z = arg;

	z->r = qg_completion_sleep(z->rg->hdr, &z->rg->complete, 0);
	return NULL;
}

static void test_create_attach(struct qg_region *d, struct qg_region *c, int *fd)
{
	struct qg_region_layout l, bad;
	unsigned char rec[64];

	qg_region_layout_make(1 << 20, 1 << 12, 16, &l);
	tap_ok(qg_region_create(&l, d, fd) == 0 && *fd >= 0, "the daemon creates a region");
	tap_ok(d->hdr->magic == QG_REGION_MAGIC && d->hdr->layout_version == l.layout_version &&
	       atomic_load(&d->hdr->daemon_sleeping) == 0 && atomic_load(&d->hdr->completions) == 0,
	       "its header is written");
	tap_ok(qg_region_attach(*fd, &l, c) == 0 && c->base != d->base, "the client attaches its own mapping");
	tap_ok(c->events == (void *)(c->base + l.events_offset) && c->arena == c->base + l.arena_offset &&
	       d->events == (void *)(d->base + l.events_offset) && d->arena == d->base + l.arena_offset,
	       "both find the parts where the layout says");
	memcpy(rec, "request", 8);
	int pushed = qg_ring_push(&c->submit, rec, 8);
	memset(rec, 0, sizeof rec);
	tap_ok(pushed == 0 && qg_ring_pop(&d->submit, rec, sizeof rec) == 8 && strcmp((char *)rec, "request") == 0,
	       "a request pushed by the client is popped by the daemon");
	memcpy(rec, "answer", 7);
	pushed = qg_ring_push(&d->complete, rec, 7);
	memset(rec, 0, sizeof rec);
	tap_ok(pushed == 0 && qg_ring_pop(&c->complete, rec, sizeof rec) == 7 && strcmp((char *)rec, "answer") == 0,
	       "a completion pushed by the daemon is popped by the client");

	struct qg_region no;
	bad = l;
	bad.layout_version++;
	tap_ok(qg_region_attach(*fd, &bad, &no) == -EPROTO && no.base == NULL, "a layout of another version: -EPROTO");
	qg_region_layout_make(2 << 20, 1 << 12, 16, &bad);
	tap_ok(qg_region_attach(*fd, &bad, &no) == -EINVAL && no.base == NULL,
	       "a layout of another size than the memfd: refused before it is mapped");
	int plain = memfd_create("unsealed", MFD_CLOEXEC);
	tap_ok(plain >= 0 && ftruncate(plain, (off_t)l.region_bytes) == 0 &&
	       qg_region_attach(plain, &l, &no) == -EPERM && no.base == NULL,
	       "an unsealed memfd: refused before it is mapped");
	close(plain);
}

static void test_doorbell(struct qg_region *d, struct qg_region *c)
{
	uint64_t v = 0;
	int bell = qg_doorbell_open();

	tap_ok(bell >= 0, "a doorbell opens");
	qg_doorbell_ring_if_asleep(c->hdr, bell);
	tap_ok(read(bell, &v, sizeof v) < 0 && errno == EAGAIN, "a daemon awake is not rung");
	qg_doorbell_announce(d->hdr, true);
	qg_doorbell_fence();
	qg_doorbell_ring_if_asleep(c->hdr, bell);
	tap_ok(read(bell, &v, sizeof v) == sizeof v && v == 1, "a daemon that announced sleep is rung");
	qg_doorbell_ring_if_asleep(c->hdr, bell);
	qg_doorbell_clear(bell);
	tap_ok(read(bell, &v, sizeof v) < 0 && errno == EAGAIN, "clearing empties the doorbell");
	qg_doorbell_announce(d->hdr, false);
	qg_doorbell_ring_if_asleep(c->hdr, bell);
	tap_ok(read(bell, &v, sizeof v) < 0 && errno == EAGAIN, "nor rung once it withdrew");
	close(bell);
}

static void test_completion(struct qg_region *d, struct qg_region *c)
{
	unsigned char rec[64];

	tap_ok(!qg_completion_notify(d->hdr) && atomic_load(&c->hdr->completions) == 1,
	       "a completion with no one asleep is counted, with no wake");
	tap_ok(qg_completion_sleep(c->hdr, &c->complete, qg_stamp_ns() + 2000000) == -ETIMEDOUT &&
	       atomic_load(&c->hdr->client_waiting) == 0,
	       "a sleep with nothing posted ends at its deadline, and withdraws");
	qg_ring_push(&d->complete, "x", 1);
	uint64_t t0 = qg_stamp_ns();
	int r = qg_completion_sleep(c->hdr, &c->complete, t0 + 1000000000u);
	tap_ok(r == 0 && qg_stamp_ns() - t0 < 500000000u, "a completion already in the ring: no sleep");
	qg_ring_pop(&c->complete, rec, sizeof rec);

	struct sleeper z = { .rg = c, .r = 1 };
	pthread_t t;
	pthread_create(&t, NULL, sleep_once, &z);
	while (!atomic_load(&d->hdr->client_waiting))
		sched_yield();
	struct timespec ms = { 0, 2000000 };
	nanosleep(&ms, NULL);	/* most likely asleep in the kernel by now; either way it must end */
	qg_ring_push(&d->complete, "y", 1);
	bool woke = qg_completion_notify(d->hdr);
	pthread_join(t, NULL);
	tap_ok(woke && z.r == 0, "a sleeping client is woken by the completion");
	tap_ok(atomic_load(&c->hdr->client_waiting) == 0, "and withdraws");
	qg_ring_pop(&c->complete, rec, sizeof rec);
}

static void test_hints(struct qg_region *d, struct qg_region *c)
{
	cpu_set_t one;
	int cpu = sched_getcpu();

	CPU_ZERO(&one);
	CPU_SET(cpu < 0 ? 0 : cpu, &one);
	if (cpu < 0 || sched_setaffinity(0, sizeof one, &one)) {
		tap_skip("cannot keep this thread on one CPU");
		return;
	}
	tap_ok(!qg_hint_waiter_on(d->hdr, cpu), "no waiter said where it spins");
	qg_hint_loop_cpu(d->hdr, cpu + 1);
	tap_ok(!qg_hint_spin_here(c->hdr) && qg_hint_waiter_on(d->hdr, cpu) && !qg_hint_waiter_on(d->hdr, cpu + 1),
	       "a client on another CPU than the loop spins, and says where");
	qg_hint_loop_cpu(d->hdr, cpu);
	tap_ok(qg_hint_spin_here(c->hdr), "a client on the loop's CPU yields");
	qg_hint_spin_done(c->hdr);
	tap_ok(!qg_hint_waiter_on(d->hdr, cpu) && atomic_load(&d->hdr->waiter_cpu) == 0, "a wait that ended says so");
	qg_hint_loop_cpu(d->hdr, -1);
	tap_ok(atomic_load(&c->hdr->loop_cpu) == 0 && !qg_hint_spin_here(c->hdr), "a loop CPU not known is 0");
	atomic_store(&d->hdr->waiter_cpu, 0);
	tap_ok(!qg_hint_waiter_on(d->hdr, -1) && !qg_hint_waiter_on(d->hdr, -2), "and no waiter is on an unknown CPU");
}

int main(void)
{
	struct qg_region d, c;
	int fd = -1;

	test_create_attach(&d, &c, &fd);
	if (!d.base || !c.base)
		return tap_done();
	test_doorbell(&d, &c);
	test_completion(&d, &c);
	test_hints(&d, &c);
	qg_region_unmap(&c);
	qg_region_unmap(&d);
	close(fd);
	tap_ok(c.base == NULL && d.base == NULL, "both sides unmap");
	return tap_done();
}
