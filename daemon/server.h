/*
 * server.h - the daemon's state (struct qgd_server: its settings, loop,
 * sessions, pool and counters) and the calls that set up and run its
 * loop (server.c), and the daemon's clock.
 */
#ifndef QGD_SERVER_H
#define QGD_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "conf.h"
#include "log.h"
#include "stamp.h"

struct qg_hugepool;
struct qg_loop;
struct qg_watch;
struct qgd_account;
struct qgd_exec;
struct qgd_model;
struct qgd_session;
struct qgd_stored;
struct qgd_weights_index;

/* The quotas and limits a refusal may name (reply.c's qgd_quota_names), and "other". */
#define QGD_QUOTA_COUNT 16
/* The bounds of the latency histogram (reply.c's qgd_latency_le_ns); one more bucket counts what passes them. */
#define QGD_LATENCY_BOUNDS 19

/* What the daemon counts for its stats since it started (reply.c and server.c count; the loop's thread alone). */
struct qgd_counters {
	uint64_t started_ns;
	uint64_t by_status[16];		/* completions by Qgraph__Status */
	uint64_t quota[QGD_QUOTA_COUNT];	/* refusals by the quota they name */
	uint64_t sessions_dropped;	/* served sessions the daemon ended (qgd_session_drop) */
	uint64_t latency[QGD_LATENCY_BOUNDS + 1];	/* graphs by total time */
	uint64_t latency_sum_ns;
};

struct qgd_server {
	struct qgd_config cfg;
	struct qg_loop *loop;
	int listen_fd, lock_fd;
	int activated;			/* listen_fd came from the service manager (LISTEN_FDS): never unlinked */
	int signal_fd, timer_fd;
	struct qg_watch *listen_watch, *signal_watch, *timer_watch;
	int reserve_fd;			/* /dev/null, given up to take a connection when descriptors run out */
	uint64_t accept_paused_ms;	/* when accepting stopped for want of descriptors (0: it did not) */
	struct qgd_ratelimit fd_rl;	/* the log line about it */
	struct qgd_session *sessions;
	struct qgd_session *rr;		/* where the fair scan starts next */
	uint32_t n_sessions;
	int loop_cpu;			/* the CPU the loop last found itself on (-1: not known); told to every session */
	/* reply.c's own: answers in a row to BESIDE_SESSION's client, on the loop's CPU */
	unsigned beside;
	const struct qgd_session *beside_session;
	/* server.c's own: qgd_server_ask_move was called; when the loop last moved */
	bool move_asked;
	uint64_t moved_ms;
	uint64_t next_session_id;
	int stopping;
	uint64_t stop_deadline_ms;
	uint64_t graphs_run;
	struct qgd_counters counters;
	uint64_t mul_mat_interleaved;	/* MUL_MAT nodes run on interleaved weights, since start */
	uint64_t weights_uploaded;	/* uploads completed, since start (shared ones too) */
	uint64_t pinned_bytes;
	struct qg_hugepool *pool;	/* weights and intermediates (memory.c) */
	struct qgd_stored *stored;	/* every matrix in pinned memory */
	struct qgd_weights_index *weights_index;	/* them by hash, their names by name (weights.c) */
	struct qgd_model *models;	/* models held, and being loaded (models.c) */
	struct qgd_account *accounts;	/* one per user with a session or a model (accounts.c) */
	uint32_t n_stored;
	uint64_t weights_referenced;	/* bytes of every handle of every session */
	struct qgd_exec *exec;
	char cpu_features[256];
	/* SIGHUP: read the configuration again and apply what may change at run time (set by main) */
	void (*reload)(struct qgd_server *srv);
};

/*
 * Bind the socket, without listening (before the privileges are dropped):
 * until qgd_server_start a client's connect() is refused at once rather
 * than left waiting for a daemon that cannot serve yet.  0 or -errno
 * (logged): -EADDRINUSE when another daemon serves the socket.
 */
int qgd_server_bind(struct qgd_server *srv);
/*
 * Serve on FD, a listening socket the service manager passed (socket
 * activation): it must be a Unix SOCK_SEQPACKET socket that listens; the
 * socket path becomes its address.  0 or -errno (logged).
 */
int qgd_server_adopt(struct qgd_server *srv, int fd);
/*
 * After a reload: refuse or drop every connection the access policy no
 * longer allows (a served session is dropped, with the reason logged).
 */
void qgd_server_recheck(struct qgd_server *srv);
/* Listen (unless the socket was passed) and watch the socket and the signals in the loop.  0 or -errno (logged). */
int qgd_server_start(struct qgd_server *srv);
/* Serve until a signal stops the daemon and what was queued is answered (or cancelled).  0. */
int qgd_server_run(struct qgd_server *srv);
/*
 * Ask the loop to leave the CPU it shares with a client that spins there
 * for its answers: done after the current scan, at most ten times a
 * second (server.c's move_loop).
 */
void qgd_server_ask_move(struct qgd_server *srv);

/* The daemon's clock: CLOCK_MONOTONIC, from the CPU's counter where it can be (stamp.h). */
static inline uint64_t qgd_now_ns(void)
{
	return qg_stamp_ns();
}

/* The same clock in milliseconds. */
static inline uint64_t qgd_now_ms(void)
{
	return qg_stamp_ns() / 1000000u;
}

#endif /* QGD_SERVER_H */
