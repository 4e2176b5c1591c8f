/*
 * loop-restrict-test.c - the io_uring ring of the event loop can do what
 * the loop does and nothing else: polls are served, while a NOP, a READ,
 * an sqe flag and any io_uring_register call are refused with EACCES.  It
 * includes daemon/loop.c to reach the ring.  Skipped where io_uring cannot be
 * had (qemu, kernel.io_uring_disabled) or the kernel has no restrictions.
 */
#include "../daemon/loop.c"

#include <poll.h>

#include "tap.h"

static int hits;

static void on_read(struct qg_watch *w, int fd, uint32_t events, void *arg)
{
	char b[8];

	(void)w;
	(void)arg;
	if (events & POLLIN)
		(void)!read(fd, b, sizeof b);
	hits++;
}

/* Submit SQE (prepared by the caller) and return its completion's result. */
static int one_result(struct qg_loop *l)
{
	struct io_uring_cqe *cqe;
	int r = io_uring_submit(&l->ring);

	if (r < 0)
		return r;
	if ((r = io_uring_wait_cqe(&l->ring, &cqe)) < 0)
		return r;
	r = cqe->res;
	io_uring_cqe_seen(&l->ring, cqe);
	return r;
}

int main(void)
{
	struct qg_loop *l;
	const char *why, *what;
	int p[2];
	char buf[8];

	if (qg_loop_new(QG_LOOP_IO_URING, &l, &why)) {
		printf("1..0 # SKIP no io_uring here: %s\n", why ? why : "?");
		return 77;
	}
	int restricted = qg_loop_restricted(l, &what);
	if (restricted != 1) {
		printf("1..0 # SKIP the ring is not restricted: %s\n", what ? what : "?");
		qg_loop_free(l);
		return 77;
	}
	tap_ok(strncmp(what, "poll_add, poll_remove", 21) == 0, "restricted to %s", what);
	tap_ok(!(l->ring.flags & IORING_SETUP_SQPOLL), "no SQPOLL thread");

	/* what the loop does still works: a poll, then its removal */
	struct qg_watch *w;
	tap_ok(pipe(p) == 0 && qg_loop_watch(l, p[0], POLLIN, on_read, NULL, &w) == 0, "a watch on a pipe");
	(void)!write(p[1], "x", 1);
	for (int i = 0; i < 100 && !hits; i++)
		qg_loop_run_once(l, 10);
	tap_ok(hits == 1, "the poll fired");
	qg_loop_unwatch(l, w);
	for (int i = 0; i < 10; i++)
		qg_loop_run_once(l, 10);
	tap_ok(l->graveyard == NULL, "the poll was removed (POLL_REMOVE allowed)");

	/* what it does not do is refused */
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
	io_uring_prep_nop(sqe);
	int r = one_result(l);
	tap_ok(r == -EACCES, "a NOP is refused (%d)", r);
	(void)!write(p[1], "y", 1);
	sqe = io_uring_get_sqe(&l->ring);
	io_uring_prep_read(sqe, p[0], buf, sizeof buf, 0);
	r = one_result(l);
	tap_ok(r == -EACCES, "a READ is refused (%d)", r);
	sqe = io_uring_get_sqe(&l->ring);
	io_uring_prep_poll_add(sqe, p[0], POLLIN);
	io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
	r = one_result(l);
	tap_ok(r == -EACCES, "a poll with an sqe flag is refused (%d)", r);
	unsigned char probe[4096] = { 0 };
	r = ring_register(l, IORING_REGISTER_PROBE, probe, 256);
	tap_ok(r == -EACCES, "io_uring_register is refused (%d)", r);
	r = ring_register(l, IORING_REGISTER_RESTRICTIONS, probe, 1);
	tap_ok(r != 0, "and so is a second set of restrictions (%d)", r);

	close(p[0]);
	close(p[1]);
	qg_loop_free(l);

	tap_ok(qg_loop_new(QG_LOOP_EPOLL, &l, &why) == 0 && qg_loop_restricted(l, &what) == -1 && !what,
	       "epoll has no ring to restrict");
	qg_loop_free(l);
	return tap_done();
}
