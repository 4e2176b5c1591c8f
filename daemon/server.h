/*
 * server.h - the daemon's state (struct qgd_server: its settings, loop,
 * roster of sessions, pool and counters) and the calls that set up and run its
 * loop (server.c).  The daemon's clock is src/ipc/stamp.h's (qg_stamp_ns,
 * qg_stamp_ms).
 */
#ifndef QGD_SERVER_H
#define QGD_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "conf.h"
#include "log.h"
#include "roster.h"
#include "stamp.h"
#include "stats.h"

struct qg_hugepool;
struct qg_loop;
struct qg_watch;
struct qgd_account;
struct qgd_exec;
struct qgd_model;
struct qgd_session;
struct qgd_weights_store;

struct qgd_server {
	struct qgd_config cfg;
	struct qg_loop *loop;
	int listen_fd, lock_fd;
	int activated;			/* listen_fd came from the service manager (LISTEN_FDS): never unlinked (qgd_server_activated) */
	int published;			/* listen_fd listens, at the socket path (qgd_server_open) */
	int signal_fd;
	struct qg_watch *listen_watch, *signal_watch;
	int reserve_fd;			/* /dev/null, given up to take a connection when descriptors run out */
	uint64_t accept_paused_ms;	/* when accepting stopped for want of descriptors (0: it did not) */
	struct qgd_ratelimit fd_rl;	/* the log line about it */
	struct qgd_roster roster;	/* the sessions (roster.c's) */
	/* reply.c's own: answers in a row to BESIDE_SESSION's client, on the loop's CPU */
	unsigned beside;
	const struct qgd_session *beside_session;
	/* loopcpu.c's own (read through qgd_loopcpu_current): the CPU the loop last found itself on; a move was asked; when the loop last moved */
	int loop_cpu;
	bool move_asked;
	uint64_t moved_ms;
	uint64_t next_session_id;
	int stopping;			/* server.c's own: others ask qgd_server_stopping */
	uint64_t stop_deadline_ms;
	struct qgd_stats stats;		/* counted for stats.h's report alone */
	struct qg_hugepool *pool;	/* weights and intermediates (memory.c) */
	struct qgd_weights_store *weights_store;	/* the stored matrices (weights.c's, opaque) */
	struct qgd_model *models;	/* models held, and being loaded (models.c) */
	struct qgd_account *accounts;	/* one per user with a session or a model (accounts.c) */
	struct qgd_exec *exec;
	char cpu_features[256];
	/* SIGHUP: read the configuration again and apply what may change at run time (set by main) */
	void (*reload)(struct qgd_server *srv);
};

/*
 * Bind the socket, without listening, at its staging name (qg_sock_bind),
 * before the privileges are dropped: the path is ours, but no client finds
 * a socket there until qgd_server_open, rather than one that refuses it
 * while the pool is locked (seconds for a large pool).  0 or -errno
 * (logged): -EADDRINUSE when another daemon serves the socket.
 */
int qgd_server_bind(struct qgd_server *srv);
/*
 * Listen, and move the socket to its path: called once the memory is
 * ready, still privileged and before the socket's directory is handed to
 * the daemon's user (root works on no path in a directory that user could
 * change), moments before the loop starts: a client that finds the socket
 * waits in the backlog for its welcome at most that long.  0 or -errno
 * (logged).
 */
int qgd_server_open(struct qgd_server *srv);
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
/* Watch the socket (qgd_server_open's, or the one passed) and the signals in the loop.  0 or -errno (logged). */
int qgd_server_start(struct qgd_server *srv);
/* Close the socket (unlinked unless the service manager passed it) and give up the socket's lock. */
void qgd_server_close(struct qgd_server *srv);
/* Whether the socket served came from the service manager (qgd_server_adopt). */
bool qgd_server_activated(const struct qgd_server *srv);
/*
 * Whether a signal asked the daemon to stop: it then takes no new session
 * or request and answers what was queued.  Inline because every request
 * asks; only server.c writes the flag.
 */
static inline bool qgd_server_stopping(const struct qgd_server *srv)
{
	return srv->stopping != 0;
}
/* Serve until a signal stops the daemon and what was queued is answered (or cancelled).  0. */
int qgd_server_run(struct qgd_server *srv);


#endif /* QGD_SERVER_H */
