/*
 * loop-test.c - the event loop, once on io_uring (skipped where it cannot be
 * had, as under qemu) and once on epoll: readiness, re-arming, hang-ups,
 * unwatching from callbacks, a doorbell rung by another process, time-outs.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loop.h"
#include "tap.h"

struct hits {
	int n;
	uint32_t last;
	struct qg_loop *loop;
	struct qg_watch *victim;	/* to unwatch from the callback */
	int self_unwatch;
};

static void on_event(struct qg_watch *w, int fd, uint32_t events, void *arg)
{
	struct hits *h = arg;
	char buf[64];

	h->n++;
	h->last = events;
	if (events & POLLIN)
		(void)!read(fd, buf, sizeof buf);
	if (h->victim) {
		qg_loop_unwatch(h->loop, h->victim);
		h->victim = NULL;
	}
	if (h->self_unwatch)
		qg_loop_unwatch(h->loop, w);
}

/* Run the loop until it has run at least one callback or a second passed. */
static int spin(struct qg_loop *l)
{
	for (int i = 0; i < 100; i++) {
		int n = qg_loop_run_once(l, 10);
		if (n)
			return n;
	}
	return 0;
}

static void run(enum qg_loop_kind kind, const char *name)
{
	struct qg_loop *l;
	const char *why;
	int err = qg_loop_new(kind, &l, &why);

	if (err == -ENOTSUP) {
		for (int i = 0; i < 9; i++)
			tap_skip(why);
		return;
	}
	tap_ok(err == 0 && strcmp(qg_loop_kind_name(l), name) == 0, "%s: a loop (%s)", name,
	       err ? strerror(-err) : qg_loop_kind_name(l));
	if (err)
		return;

	int p[2];
	struct hits h = { .loop = l };
	struct qg_watch *w;
	pipe(p);
	tap_ok(qg_loop_watch(l, p[0], POLLIN, on_event, &h, &w) == 0, "%s: watch a pipe", name);
	tap_ok(qg_loop_run_once(l, 0) == 0 && h.n == 0, "%s: nothing fires before a write", name);
	write(p[1], "a", 1);
	spin(l);
	write(p[1], "b", 1);
	spin(l);
	tap_ok(h.n == 2 && (h.last & POLLIN), "%s: each write fires once, re-armed (%d)", name, h.n);

	/* a second watch unwatched from the first one's callback, in one batch */
	int q[2];
	struct hits h2 = { .loop = l };
	struct qg_watch *w2;
	pipe(q);
	qg_loop_watch(l, q[0], POLLIN, on_event, &h2, &w2);
	h.victim = w2;
	h2.victim = w;
	write(p[1], "c", 1);
	write(q[1], "d", 1);
	spin(l);
	tap_ok(h.n + h2.n == 3, "%s: a watch unwatched by another callback of its batch is not called", name);
	/* whichever ran first unwatched the other; unwatch the survivor from its own callback */
	struct hits *alive = h.n == 3 ? &h : &h2;
	int alive_w = h.n == 3 ? p[1] : q[1];
	alive->self_unwatch = 1;
	write(alive_w, "e", 1);
	spin(l);
	int before = alive->n;
	write(alive_w, "f", 1);
	qg_loop_run_once(l, 50);
	tap_ok(alive->n == before, "%s: a watch that unwatched itself is not called again", name);

	/* hang-up: the writer goes away */
	struct hits h3 = { .loop = l };
	struct qg_watch *w3;
	int r[2];
	pipe(r);
	qg_loop_watch(l, r[0], POLLIN, on_event, &h3, &w3);
	close(r[1]);
	spin(l);
	tap_ok(h3.n >= 1 && (h3.last & POLLHUP), "%s: a hang-up is reported (events %#x)", name, h3.last);
	qg_loop_unwatch(l, w3);

	/* a doorbell rung by another process */
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct hits h4 = { .loop = l };
	struct qg_watch *w4;
	qg_loop_watch(l, efd, POLLIN, on_event, &h4, &w4);
	pid_t pid = tap_fork();
	if (pid == 0) {
		uint64_t one = 1;
		usleep(20000);
		_exit(write(efd, &one, sizeof one) == sizeof one ? 0 : 1);
	}
	spin(l);
	waitpid(pid, NULL, 0);
	tap_ok(h4.n == 1, "%s: an eventfd written by another process wakes the loop", name);

	/* many watches at once */
	enum { MANY = 100 };
	int fds[MANY][2], ok = 1;
	struct hits hm = { .loop = l };
	for (int i = 0; i < MANY; i++) {
		pipe(fds[i]);
		ok &= qg_loop_watch(l, fds[i][0], POLLIN, on_event, &hm, &w) == 0;
		write(fds[i][1], "m", 1);
	}
	for (int i = 0; i < 50 && hm.n < MANY; i++)
		qg_loop_run_once(l, 10);
	tap_ok(ok && hm.n == MANY, "%s: %d watches each fire once (%d)", name, MANY, hm.n);

	/* qg_loop_free releases the watches still in it; ASan checks */
	qg_loop_free(l);
	for (int i = 0; i < MANY; i++) {
		close(fds[i][0]);
		close(fds[i][1]);
	}
	close(p[0]);
	close(p[1]);
	close(q[0]);
	close(q[1]);
	close(r[0]);
	close(efd);
}

int main(void)
{
	run(QG_LOOP_IO_URING, "io_uring");
	run(QG_LOOP_EPOLL, "epoll");

	struct qg_loop *l = NULL;
	const char *why = NULL;
	/* made before the report: the order in which a call's arguments are evaluated is unspecified */
	int made = qg_loop_new(QG_LOOP_AUTO, &l, &why);
	tap_ok(made == 0, "auto picks %s%s%s", l ? qg_loop_kind_name(l) : "?", why ? ": " : "", why ? why : "");
	qg_loop_free(l);
	tap_ok(qg_loop_new(QG_LOOP_AUTO, NULL, NULL) == -EINVAL, "a NULL out-pointer is refused");
	return tap_done();
}
