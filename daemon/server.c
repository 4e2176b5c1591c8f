/*
 * server.c - the daemon's loop: the listening socket, admission (the
 * handshake itself is handshake.c's), signals, and the fair scan over
 * sessions that serves their rings.
 *
 * One thread owns every session and both rings of each (so each ring has a
 * single producer and a single consumer).  Wake-ups cost nothing while work
 * flows: after activity the loop keeps polling the rings for poll_us; only
 * then does it announce that it sleeps (DAEMON_SLEEPING in each header),
 * issue a full fence, look at the rings once more, and block in the event
 * loop, where a client's doorbell (an eventfd it writes only when it saw the
 * flag) wakes it.  The fence pairs with the client's fence between
 * publishing a record and reading the flag: either the client sees the
 * flag and rings, or the daemon sees the record, so no wake-up is lost.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <stddef.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "doorbell.h"
#include "exec.h"
#include "futex.h"
#include "handshake.h"
#include "hints.h"
#include "loop.h"
#include "loopcpu.h"
#include "priv.h"
#include "reply.h"
#include "requests.h"
#include "server.h"
#include "session.h"
#include "sock.h"
#include "stamp.h"
#include "weights.h"

static void on_client_sock(struct qg_watch *w, int fd, uint32_t events, void *arg);
static void on_accept(struct qg_watch *w, int fd, uint32_t events, void *arg);

static void on_client_sock(struct qg_watch *w, int fd, uint32_t events, void *arg)
{
	struct qgd_session *s = arg;

	(void)w;
	(void)fd;
	if (s->refused) {
		/* its Hello, or its hang-up: the end.  What it sent is read first: unread, the close would reset the
		 * connection, and the client would never read the reason. */
		uint8_t b[64];
		for (int i = 0; i < 4 && qg_sock_recv(s->sock, b, sizeof b, NULL, 0, NULL) != -EAGAIN; i++)
			;
		qgd_reply_drop(s, s->refused);
		return;
	}
	if (s->state == QGD_HANDSHAKE && (events & POLLIN)) {
		qgd_handshake(s);
		return;
	}
	if (events & (POLLHUP | POLLERR)) {
		qgd_reply_hung_up(s, "the client hung up");
		return;
	}
	if (events & POLLIN) {
		uint8_t b[64];
		int fds[QG_SOCK_MAX_FDS], nfds;
		ssize_t n = qg_sock_recv(s->sock, b, sizeof b, fds, QG_SOCK_MAX_FDS, &nfds);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);	/* any fd a client sends is closed */
		if (n == -EAGAIN)
			return;
		if (n == 0)
			qgd_reply_hung_up(s, "the client hung up");
		else
			qgd_reply_drop(s, "a message on the socket after the handshake");
	}
}

/* True if a message waits on FD: a connection whose Hello came is not silent. */
static bool has_input(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/* Who holds the daemon's places: sessions served, and connections still in their handshake (all, and UID's). */
struct census {
	uint32_t served, shaking, shaking_uid;
	struct qgd_session *oldest, *oldest_uid;	/* the longest in their handshake */
};

static void take_census(struct qgd_server *srv, const struct qgd_session *except, uid_t uid, struct census *c)
{
	*c = (struct census){ 0 };
	qgd_roster_each(srv, t) {
		if (t == except || t->state == QGD_DEAD)
			continue;
		if (t->state == QGD_READY) {
			c->served++;
			continue;
		}
		c->shaking++;
		if (!c->oldest || t->started_ms <= c->oldest->started_ms)	/* the list runs newest first */
			c->oldest = t;
		if (t->uid != uid)
			continue;
		c->shaking_uid++;
		if (!c->oldest_uid || t->started_ms <= c->oldest_uid->started_ms)
			c->oldest_uid = t;
	}
}

/*
 * A connection was accepted on FD.  Its credentials are read at once: a
 * client the access policy excludes, or one past max-sessions, is refused
 * before it costs anything more.  Connections that have not sent their
 * Hello are bounded apart from the sessions (so that silent ones never
 * take a session's place): per uid by handshakes-per-user, and in all by
 * max-handshakes; past either bound, the longest silent of that uid, or
 * of all, is dropped to make room, so a flood of them only ever pushes out
 * its own.  Then its Hello is read if it came with the connection, as an
 * honest client's does.
 */
static void admit(struct qgd_server *srv, int fd)
{
	const struct qgd_config *cfg = &srv->cfg;
	struct qgd_session *s = qgd_session_new(srv, fd);
	struct census c;
	char why[256];

	if (!s) {
		qgd_refuse_fd(fd, -EIO, "cannot read the connection's credentials, or out of memory");
		close(fd);
		return;
	}
	qgd_roster_add(srv, s);
	qgd_log_uid(s->uid, QGD_LOG_DEBUG, "session %llu: accepted (pid %d, uid %u)", (unsigned long long)s->id,
		    (int)s->pid, (unsigned)s->uid);
	/*
	 * The longest silent connection is dropped for room only if it is
	 * silent: one whose Hello has come (an honest client's, not read yet
	 * while the loop accepted others) is served instead.
	 */
	for (int k = 0; k < 8; k++) {
		take_census(srv, s, s->uid, &c);
		struct qgd_session *v = c.shaking_uid >= cfg->handshakes_per_user ? c.oldest_uid :
					c.shaking >= cfg->max_handshakes ? c.oldest : NULL;
		if (!v || v->refused || !has_input(v->sock))
			break;
		qgd_handshake(v);
	}
	if (c.shaking_uid >= cfg->handshakes_per_user)
		qgd_refuse(c.oldest_uid, -EDQUOT,
		       "handshakes-per-user: uid %u has %u connections that have not sent a Hello; "
		       "the oldest is dropped", (unsigned)s->uid, c.shaking_uid + 1);
	else if (c.shaking >= cfg->max_handshakes)
		qgd_refuse(c.oldest, -EDQUOT,
		       "max-handshakes: %u connections have not sent a Hello; the oldest is dropped",
		       c.shaking + 1);
	if (qg_loop_watch(srv->loop, fd, POLLIN, on_client_sock, s, &s->sock_watch)) {
		qgd_reply_drop(s, "cannot watch its socket");
		return;
	}
	if (qgd_priv_check_peer(&cfg->priv, s->sock, s->pid, s->uid, s->gid, why, sizeof why)) {
		qgd_refuse_early(s, -EACCES,
				    "refused: not among the users and groups served (allow-users, allow-groups)", why);
		return;
	}
	if (qgd_session_room(srv, c.served, why, sizeof why)) {
		qgd_refuse_early(s, -EDQUOT, "refused: max-sessions", why);
		return;
	}
	qgd_handshake(s);
}

/*
 * accept() found no descriptor free, and the connection it left pending
 * keeps the socket readable: the loop would spin on it.  Give up the
 * reserve descriptor to take the connection, tell its client why and
 * close it (a clear refusal, not a hang), and take the reserve back.  Where
 * even that fails, stop accepting for a while (resume_accept).  Logged
 * once, then rate limited.
 */
static void shed(struct qgd_server *srv, int err)
{
	int c = -EBADF;

	if (srv->reserve_fd >= 0) {
		close(srv->reserve_fd);
		c = qg_sock_accept(srv->listen_fd);
		if (c >= 0) {
			qgd_refuse_fd(c, -ENOMEM, "the daemon is out of file descriptors (RLIMIT_NOFILE): try again later");
			close(c);
		}
		srv->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	qgd_log_limited(&srv->fd_rl, QGD_LOG_WARN,
			"out of file descriptors (%s): new clients are refused until sessions end; "
			"raise RLIMIT_NOFILE (LimitNOFILE) for max-sessions %u", strerror(-err), srv->cfg.max_sessions);
	if ((c < 0 && c != -EAGAIN) || srv->reserve_fd < 0) {
		qg_loop_unwatch(srv->loop, srv->listen_watch);
		srv->listen_watch = NULL;
		srv->accept_paused_ms = qg_stamp_ms();
	}
}

/* Accepting stopped for want of descriptors (shed): start again after a while. */
static void resume_accept(struct qgd_server *srv)
{
	if (qg_stamp_ms() - srv->accept_paused_ms < 100 || srv->stopping)
		return;
	if (srv->reserve_fd < 0)
		srv->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (qg_loop_watch(srv->loop, srv->listen_fd, POLLIN, on_accept, srv, &srv->listen_watch) == 0)
		srv->accept_paused_ms = 0;
}

static void on_accept(struct qg_watch *w, int fd, uint32_t events, void *arg)
{
	struct qgd_server *srv = arg;

	(void)w;
	(void)events;
	for (int i = 0; i < 16; i++) {
		int c = qg_sock_accept(fd);
		if (c == -EMFILE || c == -ENFILE) {
			shed(srv, c);
			return;
		}
		if (c < 0)
			return;
		admit(srv, c);
	}
}

static void on_signal(struct qg_watch *w, int fd, uint32_t events, void *arg)
{
	struct qgd_server *srv = arg;
	struct signalfd_siginfo si;

	(void)w;
	(void)events;
	while (read(fd, &si, sizeof si) == sizeof si) {
		if (si.ssi_signo == SIGHUP) {
			qgd_info("SIGHUP: reading the configuration again");
			if (srv->reload)
				srv->reload(srv);
			continue;
		}
		if (si.ssi_signo == SIGUSR1 || si.ssi_signo == SIGUSR2) {
			qgd_info("%s: %u connections, %llu graphs run, %llu bytes pinned%s", strsignal((int)si.ssi_signo),
				 qgd_roster_count(srv), (unsigned long long)srv->stats.graphs_run,
				 (unsigned long long)qgd_weights_pinned_bytes(srv), srv->stopping ? ", stopping" : "");
			continue;
		}
		if (!srv->stopping) {
			qgd_info("%s: finishing what is queued, then exiting", strsignal((int)si.ssi_signo));
			srv->stopping = 1;
			srv->stop_deadline_ms = qg_stamp_ms() + 5000;
			if (srv->listen_watch)
				qg_loop_unwatch(srv->loop, srv->listen_watch);
			srv->listen_watch = NULL;
			sd_notify(0, "STOPPING=1");
			close(srv->listen_fd);
			srv->listen_fd = -1;
			if (!srv->activated)	/* the service manager's socket stays for the next start */
				unlink(srv->cfg.socket_path);
		}
	}
}

void qgd_server_recheck(struct qgd_server *srv)
{
	char why[256];

	qgd_roster_each(srv, s) {
		if (s->state == QGD_DEAD || s->refused ||
		    !qgd_priv_check_peer(&srv->cfg.priv, s->sock, s->pid, s->uid, s->gid, why, sizeof why))
			continue;
		if (s->state == QGD_READY)
			qgd_reply_drop(s, "dropped at a reload: no longer among the users and groups served "
				      "(allow-users, allow-groups)");
		else
			qgd_refuse(s, -EACCES, "%s", why);
	}
}

/* Free dropped sessions and those whose handshake took too long. */
static void reap(struct qgd_server *srv)
{
	uint64_t now = 0;

	for (struct qgd_session *s = qgd_roster_first(srv), *after; s; s = after) {
		after = qgd_roster_next(s);
		if (s->state == QGD_HANDSHAKE && !now)
			now = qg_stamp_ms();	/* the clock only when someone is shaking hands */
		if (s->state == QGD_HANDSHAKE && now - s->started_ms > srv->cfg.handshake_ms)
			qgd_reply_drop(s, s->refused ? s->refused : "the handshake took too long");
		if (s->state != QGD_DEAD)
			continue;
		if (s->job) {
			/* its graph reads the session's memory: stop it, free the session after */
			qgd_exec_cancel(s, 0, NULL);
			continue;
		}
		qgd_roster_remove(srv, s);
		qgd_session_free(s);
	}
}

/*
 * One fair pass: every session may serve one request.  Returns work done.
 * A request waiting for events is passed over until they are recorded or
 * its time is up: it is no work, and the loop sleeps while it waits.
 */
static int scan(struct qgd_server *srv)
{
	int did = 0;

	qgd_roster_each(srv, s)
		if (!qgd_request_waiting(s))
			did |= qgd_session_step(s);
	return did;
}

/* Announce (V = 1) or withdraw that the loop is about to block: to the clients, and to the executor. */
static void set_sleeping(struct qgd_server *srv, uint32_t v)
{
	qgd_exec_loop_asleep(srv, v != 0);
	qgd_roster_each(srv, s)
		if (s->state == QGD_READY)
			qg_doorbell_announce(s->rg.hdr, v != 0);
}

static bool any_pending(struct qgd_server *srv)
{
	qgd_roster_each(srv, s)
		if (qgd_session_pending(s) && !qgd_request_waiting(s))
			return true;
	return false;
}

int qgd_server_bind(struct qgd_server *srv)
{
	const char *path = srv->cfg.socket_path;

	srv->listen_fd = qg_sock_bind(path, srv->cfg.priv.socket_mode, &srv->lock_fd);
	if (srv->listen_fd == -EADDRINUSE) {
		qgd_error("another qgraphd is serving %s", path);
		return -EADDRINUSE;
	}
	if (srv->listen_fd < 0) {
		qgd_error("cannot bind %s: %s", path, strerror(-srv->listen_fd));
		return srv->listen_fd;
	}
	return 0;
}

int qgd_server_open(struct qgd_server *srv)
{
	const char *path = srv->cfg.socket_path;
	int r = qg_sock_open(srv->listen_fd, path);

	if (r) {
		qgd_error("cannot listen on %s: %s", path, strerror(-r));
		return r;
	}
	srv->published = 1;
	return 0;
}

int qgd_server_adopt(struct qgd_server *srv, int fd)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof sa;
	struct qgd_config *cfg = &srv->cfg;

	if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) <= 0) {
		qgd_error("the socket passed by the service manager (fd %d) is not a listening Unix "
			  "SOCK_SEQPACKET socket (ListenSequentialPacket= in qgraphd.socket)", fd);
		return -ENOTSOCK;
	}
	memset(&sa, 0, sizeof sa);
	if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0 || len <= offsetof(struct sockaddr_un, sun_path) ||
	    sa.sun_path[0] == 0) {
		qgd_error("the socket passed by the service manager (fd %d) has no path", fd);
		return -EINVAL;
	}
	size_t n = strnlen(sa.sun_path, len - offsetof(struct sockaddr_un, sun_path));
	if (n >= sizeof cfg->socket_store) {
		qgd_error("the passed socket's path is too long");
		return -ENAMETOOLONG;
	}
	if (cfg->socket_path && strcmp(cfg->socket_path, sa.sun_path) != 0)
		qgd_info("socket %s not bound: serving %.*s, the socket the service manager passed", cfg->socket_path,
			 (int)n, sa.sun_path);
	memcpy(cfg->socket_store, sa.sun_path, n);
	cfg->socket_store[n] = 0;
	cfg->socket_path = cfg->socket_store;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		int r = -errno;
		qgd_error("cannot make the passed socket non-blocking: %s", strerror(-r));
		return r;
	}
	srv->listen_fd = fd;
	srv->lock_fd = -1;	/* the service manager runs one of us per socket */
	srv->activated = 1;
	return 0;
}

/*
 * Descriptors the daemon needs with every place taken: a session holds its
 * socket and doorbell, and its region's memfd while it shakes hands; a
 * connection in its handshake, its socket; and 64 for the daemon's own
 * (standard streams, socket and lock, loop, signals, the reserve, log).
 */
static uint64_t fds_needed(const struct qgd_config *cfg)
{
	return 64 + 3 * (uint64_t)cfg->max_sessions + cfg->max_handshakes;
}

/* Raise the soft RLIMIT_NOFILE to what max-sessions needs, as far as the hard limit lets; say when it falls short. */
static void fit_nofile(const struct qgd_config *cfg)
{
	uint64_t need = fds_needed(cfg);
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
		struct rlimit want = rl;
		want.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			rl = want;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
		qgd_warn("RLIMIT_NOFILE is %llu: max-sessions %u and max-handshakes %u need %llu descriptors "
			 "(raise LimitNOFILE, or lower max-sessions)", (unsigned long long)rl.rlim_cur,
			 cfg->max_sessions, cfg->max_handshakes, (unsigned long long)need);
}

int qgd_server_start(struct qgd_server *srv)
{
	fit_nofile(&srv->cfg);
	/* the descriptor given up to refuse a client when the others run out (shed) */
	srv->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (srv->reserve_fd < 0) {
		int r = -errno;
		qgd_error("cannot open /dev/null: %s", strerror(-r));
		return r;
	}
	srv->fd_rl = (struct qgd_ratelimit){ .interval_ms = 10000, .burst = 1 };
	srv->stats.started_ns = qg_stamp_ns();	/* uptime: since the daemon began to serve */
	int r;
	if ((r = qg_loop_watch(srv->loop, srv->listen_fd, POLLIN, on_accept, srv, &srv->listen_watch)) ||
	    (r = qg_loop_watch(srv->loop, srv->signal_fd, POLLIN, on_signal, srv, &srv->signal_watch))) {
		qgd_error("cannot watch the socket");
		return r;
	}
	qgd_info("listening on %s%s", srv->cfg.socket_path, srv->activated ? " (passed by the service manager)" : "");
	return 0;
}

void qgd_server_close(struct qgd_server *srv)
{
	if (srv->listen_fd >= 0) {
		close(srv->listen_fd);
		srv->listen_fd = -1;
		char staged[PATH_MAX];
		/* the service manager's socket stays for the next start */
		if (srv->published)
			unlink(srv->cfg.socket_path);
		else if (!srv->activated && qg_sock_staging_path(srv->cfg.socket_path, staged, sizeof staged) == 0)
			unlink(staged);
	}
	if (srv->lock_fd >= 0)
		close(srv->lock_fd);
	srv->lock_fd = -1;
}

bool qgd_server_activated(const struct qgd_server *srv)
{
	return srv->activated != 0;
}

int qgd_server_run(struct qgd_server *srv)
{
	qgd_loopcpu_start(srv);
	qgd_loopcpu_note(srv);
	uint64_t idle_since = qg_stamp_ns();
	unsigned polls = 0;
	bool awaiting_exec = false;	/* polling for the end of a graph on the executor */

	for (;;) {
		int did = qgd_exec_reap(srv);
		did |= scan(srv);
		qgd_loopcpu_move_if_asked(srv);
		reap(srv);
		if (srv->accept_paused_ms)
			resume_accept(srv);
		if (srv->stopping && (!did || qg_stamp_ms() > srv->stop_deadline_ms)) {
			if (!qgd_exec_in_flight(srv))
				break;
			/* graphs still run: past the deadline they are cancelled; wait for their answers */
			if (qg_stamp_ms() > srv->stop_deadline_ms)
				qgd_roster_each(srv, s)
					qgd_exec_cancel(s, 0, NULL);
		}
		if (did) {
			polls = 0;
			awaiting_exec = false;
			qg_loop_run_once(srv->loop, 0);
			continue;
		}
		/*
		 * Waiting for the executor, the poll leaves most of its core to the
		 * compute threads (its CPU may be a hyperthread of theirs): a graph
		 * lasts milliseconds, and a few hundred nanoseconds more to notice
		 * its end or a request cost it nothing.
		 */
		if (awaiting_exec)
			for (int k = 0; k < 16; k++)
				qg_cpu_relax();
		/*
		 * Let a client that shares this CPU run now and then: it yields to
		 * us while it waits, and without our yield it waits for the
		 * scheduler to take the CPU from a loop that does not sleep while
		 * it polls, which on a CPU shared with a client is a whole time
		 * slice.  Every 64 polls: a few microseconds at most.
		 */
		if (polls % 64 == 63) {
			sched_yield();
			qgd_loopcpu_note(srv);	/* a yield is where the scheduler may have moved us */
		}
		/* poll on; read the clock only now and then, it is not free in a VM */
		if (polls++ == 0)
			idle_since = qg_stamp_ns();
		if (polls % 32 || qg_stamp_ns() - idle_since < (uint64_t)srv->cfg.poll_us * 1000u) {
			qg_loop_run_once(srv->loop, 0);
			continue;
		}
		polls = 0;
		/* a graph on the executor about to end: poll on for it rather than sleep past its end */
		int sleep_ms = qgd_exec_sleep_ms(srv, 100);
		awaiting_exec = sleep_ms == 0;
		if (sleep_ms == 0) {
			qg_loop_run_once(srv->loop, 0);
			continue;
		}
		/* going to sleep: the log's rate limits say what they held back, if the flood is over */
		qgd_log_uid_flush();
		/* announce it, fence, and look once more (doorbell.h) */
		set_sleeping(srv, 1);
		qg_doorbell_fence();
		if (!any_pending(srv) && !qgd_exec_reap(srv))
			qg_loop_run_once(srv->loop, sleep_ms);	/* wakes for timers (handshakes) too */
		set_sleeping(srv, 0);
		qgd_loopcpu_note(srv);
	}
	/* tell every client: their sockets close, their waits end with an error */
	qgd_roster_each(srv, s)
		qgd_reply_hung_up(s, "the daemon is exiting");	/* not counted: no one reads the count now */
	reap(srv);
	return 0;
}
