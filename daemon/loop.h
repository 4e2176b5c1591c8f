/*
 * loop.h - the daemon's event loop: readiness of file descriptors (the
 * listening socket, clients' sockets, doorbell eventfds, a signalfd, a
 * timerfd) dispatched to callbacks, on io_uring or, where io_uring cannot
 * be had (kernel.io_uring_disabled, a seccomp profile, qemu user
 * emulation), on epoll: the same loop either way, chosen at creation.
 *
 * Single-threaded: every function is called from the loop's own thread.
 */
#ifndef QG_LOOP_H
#define QG_LOOP_H

#include <stdint.h>

struct qg_loop;
struct qg_watch;

/* Called with the poll(2) events that fired (POLLIN, POLLHUP, POLLERR, ...). */
typedef void (*qg_loop_fn)(struct qg_watch *w, int fd, uint32_t events, void *arg);

enum qg_loop_kind {
	QG_LOOP_AUTO = 0,	/* io_uring, else epoll */
	QG_LOOP_IO_URING,
	QG_LOOP_EPOLL,
};

/*
 * A new loop of KIND.  With QG_LOOP_AUTO, *WHY (if not NULL) gets the
 * reason io_uring was not used, or NULL.  Returns 0 and the loop in *OUT,
 * or -errno (QG_LOOP_IO_URING asked for where it cannot be had).
 */
int qg_loop_new(enum qg_loop_kind kind, struct qg_loop **out, const char **why);

/*
 * Is L's io_uring ring limited (IORING_REGISTER_RESTRICTIONS) to the
 * operations the loop submits?  1, with their names in *WHAT; 0, with
 * why not (the kernel refused) in *WHAT; -1 on epoll.  The ring never
 * uses SQPOLL.
 */
int qg_loop_restricted(const struct qg_loop *l, const char **what);

/* "io_uring" or "epoll". */
const char *qg_loop_kind_name(const struct qg_loop *l);

/*
 * Watch FD for EVENTS (POLLIN and/or POLLOUT; errors and hang-ups always
 * fire) until qg_loop_unwatch().  Returns 0 and the watch in *OUT, or -errno.
 */
int qg_loop_watch(struct qg_loop *l, int fd, uint32_t events, qg_loop_fn fn, void *arg,
		  struct qg_watch **out);

/*
 * Stop watching.  Safe from inside any callback, including W's own: W's
 * callback is not called again, and its memory is released when the
 * backend has let go of it.  The fd is the caller's to close.
 */
void qg_loop_unwatch(struct qg_loop *l, struct qg_watch *w);

/*
 * Wait up to TIMEOUT_MS (-1: forever, 0: just look) for events and dispatch
 * them.  Returns the number of callbacks run, or -errno (-EINTR is not an
 * error: it returns 0).
 */
int qg_loop_run_once(struct qg_loop *l, int timeout_ms);

/* Free the loop and every watch still in it (fds are not closed). */
void qg_loop_free(struct qg_loop *l);

#endif /* QG_LOOP_H */
