/*
 * loop.c - fd readiness on io_uring (one-shot POLL_ADD, re-armed after each
 * event) or on epoll (see loop.h).
 *
 * Watches are never freed while a backend may still hand them back: an
 * unwatched io_uring watch stays allocated until the completion of its
 * poll (or of the poll's removal) has been reaped, and an epoll watch is
 * freed only after the batch of events that may name it is done.
 */
#include "config.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "loop.h"

#define LOOP_BATCH 64

struct qg_watch {
	int fd;
	uint32_t events;
	qg_loop_fn fn;
	void *arg;
	int dead;		/* unwatched: no more callbacks */
	int armed;		/* io_uring: a poll is in flight */
	struct qg_watch *next;	/* all watches, or the graveyard */
};

struct qg_loop {
	enum qg_loop_kind kind;
	struct io_uring ring;
	int epfd;
	struct qg_watch *watches;	/* live ones */
	struct qg_watch *graveyard;	/* unwatched, waiting to be freed */
	int in_dispatch;
	int restricted;			/* io_uring: limited to ring_ops */
	const char *restrict_note;	/* what ring_ops are, or why there is no limit */
};

/* user_data of a POLL_REMOVE completion: nothing to dispatch. */
#define LOOP_REMOVE_TAG 1ULL

static int ring_arm(struct qg_loop *l, struct qg_watch *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);

	if (!sqe) {
		io_uring_submit(&l->ring);
		sqe = io_uring_get_sqe(&l->ring);
		if (!sqe)
			return -EBUSY;
	}
	io_uring_prep_poll_add(sqe, w->fd, w->events);
	io_uring_sqe_set_data(sqe, w);
	w->armed = 1;
	return 0;
}

/*
 * io_uring_register(2) itself: liburing 2.3 as Debian 12 ships it declares
 * io_uring_register_restrictions() and io_uring_enable_rings() but does not
 * export them.  0 or -errno.
 */
static int ring_register(struct qg_loop *l, unsigned op, const void *arg, unsigned nr)
{
	return syscall(__NR_io_uring_register, l->ring.ring_fd, op, arg, nr) < 0 ? -errno : 0;
}

/*
 * The only operations the loop submits.  The ring is limited to them
 * (IORING_REGISTER_RESTRICTIONS) because io_uring does not pass through
 * seccomp: a daemon taken over could otherwise read, write, open and
 * connect through its ring.  Without IORING_FEAT_EXT_ARG (before Linux
 * 5.11) liburing waits with a TIMEOUT request, so that one is allowed too.
 */
static int ring_restrict(struct qg_loop *l, unsigned features)
{
	static const uint8_t ops[] = { IORING_OP_POLL_ADD, IORING_OP_POLL_REMOVE, IORING_OP_TIMEOUT };
	struct io_uring_restriction res[sizeof ops];
	unsigned n = features & IORING_FEAT_EXT_ARG ? 2 : 3;

	memset(res, 0, sizeof res);
	for (unsigned i = 0; i < n; i++) {
		res[i].opcode = IORING_RESTRICTION_SQE_OP;
		res[i].sqe_op = ops[i];
	}
	/* no IORING_RESTRICTION_REGISTER_OP: once enabled, no register call at all;
	 * no SQE_FLAGS_ALLOWED: no sqe flag either (the loop sets none) */
	return ring_register(l, IORING_REGISTER_RESTRICTIONS, res, n);
}

static const char *ring_try(struct qg_loop *l)
{
	/* no SQPOLL: a polling thread would keep the credentials of its creator */
	struct io_uring_params p = { .flags = IORING_SETUP_R_DISABLED };
	int err = io_uring_queue_init_params(256, &l->ring, &p);

	if (err == -EINVAL) {
		/* before Linux 5.10: no disabled start, so no restrictions */
		err = io_uring_queue_init(256, &l->ring, 0);
		l->restrict_note = "the kernel has no IORING_SETUP_R_DISABLED";
	} else if (err == 0) {
		int r = ring_restrict(l, p.features);
		l->restricted = r == 0;
		l->restrict_note = r ? "the kernel refused IORING_REGISTER_RESTRICTIONS"
				     : p.features & IORING_FEAT_EXT_ARG ? "poll_add, poll_remove"
									 : "poll_add, poll_remove, timeout";
		if ((err = ring_register(l, IORING_REGISTER_ENABLE_RINGS, NULL, 0)) < 0) {
			io_uring_queue_exit(&l->ring);
			return "the io_uring ring could not be enabled";
		}
	}
	if (err == -ENOSYS)
		return "io_uring_setup is not available (ENOSYS: old kernel or emulation)";
	if (err == -EPERM)
		return "io_uring is disabled (EPERM: kernel.io_uring_disabled or seccomp)";
	if (err < 0)
		return "io_uring_setup failed";
	return NULL;
}

int qg_loop_new(enum qg_loop_kind kind, struct qg_loop **out, const char **why)
{
	struct qg_loop *l;
	const char *reason = NULL;

	if (why)
		*why = NULL;
	if (!out)
		return -EINVAL;
	*out = NULL;
	l = calloc(1, sizeof *l);
	if (!l)
		return -ENOMEM;
	l->epfd = -1;
	if (kind != QG_LOOP_EPOLL) {
		reason = ring_try(l);
		if (!reason) {
			l->kind = QG_LOOP_IO_URING;
			*out = l;
			return 0;
		}
		if (kind == QG_LOOP_IO_URING) {
			free(l);
			if (why)
				*why = reason;
			return -ENOTSUP;
		}
	}
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int err = -errno;
		free(l);
		return err;
	}
	l->kind = QG_LOOP_EPOLL;
	if (why)
		*why = kind == QG_LOOP_EPOLL ? "epoll was asked for" : reason;
	*out = l;
	return 0;
}

int qg_loop_restricted(const struct qg_loop *l, const char **what)
{
	if (what)
		*what = NULL;
	if (!l || l->kind != QG_LOOP_IO_URING)
		return -1;
	if (what)
		*what = l->restrict_note;
	return l->restricted;
}

const char *qg_loop_kind_name(const struct qg_loop *l)
{
	return l->kind == QG_LOOP_IO_URING ? "io_uring" : "epoll";
}

int qg_loop_watch(struct qg_loop *l, int fd, uint32_t events, qg_loop_fn fn, void *arg,
		  struct qg_watch **out)
{
	struct qg_watch *w;
	int err;

	if (!l || fd < 0 || !fn || !out)
		return -EINVAL;
	w = calloc(1, sizeof *w);
	if (!w)
		return -ENOMEM;
	*w = (struct qg_watch){ .fd = fd, .events = events & (POLLIN | POLLOUT), .fn = fn, .arg = arg };
	if (l->kind == QG_LOOP_IO_URING) {
		err = ring_arm(l, w);
	} else {
		struct epoll_event ev = { .events = 0, .data.ptr = w };
		if (w->events & POLLIN)
			ev.events |= EPOLLIN;
		if (w->events & POLLOUT)
			ev.events |= EPOLLOUT;
		err = epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
	}
	if (err) {
		free(w);
		return err;
	}
	w->next = l->watches;
	l->watches = w;
	*out = w;
	return 0;
}

static void list_remove(struct qg_watch **head, struct qg_watch *w)
{
	for (struct qg_watch **p = head; *p; p = &(*p)->next) {
		if (*p == w) {
			*p = w->next;
			return;
		}
	}
}

void qg_loop_unwatch(struct qg_loop *l, struct qg_watch *w)
{
	if (!l || !w || w->dead)
		return;
	w->dead = 1;
	list_remove(&l->watches, w);
	if (l->kind == QG_LOOP_EPOLL) {
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	} else if (w->armed) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
		if (!sqe) {
			io_uring_submit(&l->ring);
			sqe = io_uring_get_sqe(&l->ring);
		}
		if (sqe) {
			io_uring_prep_poll_remove(sqe, (__u64)(uintptr_t)w);
			io_uring_sqe_set_data64(sqe, LOOP_REMOVE_TAG);
		}
	}
	/* freed once no backend can name it any more (see loop_reap) */
	w->next = l->graveyard;
	l->graveyard = w;
}

/* Free the unwatched watches no backend can still hand back. */
static void loop_reap(struct qg_loop *l)
{
	for (struct qg_watch **p = &l->graveyard; *p;) {
		struct qg_watch *w = *p;
		if (l->kind == QG_LOOP_IO_URING && w->armed) {
			p = &w->next;
			continue;
		}
		*p = w->next;
		free(w);
	}
}

static int ring_run(struct qg_loop *l, int timeout_ms)
{
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts;
	int n = 0, err = 0;

	if (timeout_ms == 0) {
		/* just look: no wait, and no syscall unless there is something to submit */
		if (io_uring_sq_ready(&l->ring) && (err = io_uring_submit(&l->ring)) < 0 && err != -EBUSY)
			return err;
		if (io_uring_cq_ready(&l->ring) == 0)
			return 0;
	} else if (timeout_ms > 0) {
		ts.tv_sec = timeout_ms / 1000;
		ts.tv_nsec = (long long)(timeout_ms % 1000) * 1000000;
		err = io_uring_submit_and_wait_timeout(&l->ring, &cqe, 1, &ts, NULL);
	} else {
		err = io_uring_submit_and_wait_timeout(&l->ring, &cqe, 1, NULL, NULL);
	}
	if (err == -ETIME || err == -EINTR)
		return 0;
	if (err < 0)
		return err;
	unsigned head, seen = 0;
	io_uring_for_each_cqe(&l->ring, head, cqe) {
		seen++;
		uint64_t tag = io_uring_cqe_get_data64(cqe);
		if (tag == LOOP_REMOVE_TAG || tag == 0)
			continue;
		struct qg_watch *w = (struct qg_watch *)(uintptr_t)tag;
		w->armed = 0;
		if (w->dead)
			continue;
		int res = cqe->res;
		uint32_t ev = res < 0 ? POLLERR : (uint32_t)res;
		w->fn(w, w->fd, ev, w->arg);
		n++;
		if (!w->dead && ring_arm(l, w) < 0) {
			/* no submission slot even after a submit: report it as an error */
			w->fn(w, w->fd, POLLERR, w->arg);
		}
	}
	io_uring_cq_advance(&l->ring, seen);
	return n;
}

static int epoll_run(struct qg_loop *l, int timeout_ms)
{
	struct epoll_event evs[LOOP_BATCH];
	int got = epoll_wait(l->epfd, evs, LOOP_BATCH, timeout_ms), n = 0;

	if (got < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < got; i++) {
		struct qg_watch *w = evs[i].data.ptr;
		if (w->dead)
			continue;	/* unwatched by an earlier callback of this batch */
		uint32_t ev = 0;
		if (evs[i].events & EPOLLIN)
			ev |= POLLIN;
		if (evs[i].events & EPOLLOUT)
			ev |= POLLOUT;
		if (evs[i].events & EPOLLHUP)
			ev |= POLLHUP;
		if (evs[i].events & EPOLLERR)
			ev |= POLLERR;
		w->fn(w, w->fd, ev, w->arg);
		n++;
	}
	return n;
}

int qg_loop_run_once(struct qg_loop *l, int timeout_ms)
{
	int n;

	if (!l)
		return -EINVAL;
	n = l->kind == QG_LOOP_IO_URING ? ring_run(l, timeout_ms) : epoll_run(l, timeout_ms);
	loop_reap(l);
	return n;
}

void qg_loop_free(struct qg_loop *l)
{
	if (!l)
		return;
	if (l->kind == QG_LOOP_IO_URING)
		io_uring_queue_exit(&l->ring);	/* the kernel lets go of every poll */
	else
		close(l->epfd);
	for (struct qg_watch *w = l->watches, *next; w; w = next) {
		next = w->next;
		free(w);
	}
	for (struct qg_watch *w = l->graveyard, *next; w; w = next) {
		next = w->next;
		free(w);
	}
	free(l);
}
