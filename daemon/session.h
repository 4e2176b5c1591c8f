/*
 * session.h - one client of the daemon (struct qgd_session: its
 * credentials, region, rings, events, handles and graphs) and the calls
 * that make, step and free it (session.c).
 */
#ifndef QGD_SESSION_H
#define QGD_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "log.h"
#include "region.h"
#include "ring.h"
#include "upload.h"
#include "weights.h"
#include "wire.h"

struct qg_buft;
struct qg_event;
struct qg_event_slot;
struct qg_watch;
struct qgd_account;
struct qgd_graph;
struct qgd_job;
struct qgd_server;

enum qgd_session_state {
	QGD_HANDSHAKE = 0,
	QGD_READY,
	QGD_DEAD,
};

struct qgd_session {
	uint64_t id;
	enum qgd_session_state state;
	int sock;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	struct qgd_account *acct;	/* its user's, held while the session is (accounts.c) */
	gid_t *groups;			/* supplementary groups, where the kernel told them */
	size_t n_groups;
	char name[64];
	uint64_t started_ms;
	struct qgd_server *srv;
	struct qg_watch *sock_watch, *bell_watch;
	int memfd, bell;
	struct qg_region rg;		/* mapped (region.c), with our own copy of its layout, never read back */
	struct qg_event *ev;		/* the trusted events, each mirrored to its slot in RG.events */
	unsigned char *rec;		/* the record being served, copied out */
	struct qg_wire_arena decode;
	Qgraph__Request *req;		/* decoded from REC, not yet answered */
	uint64_t req_started_ns;
	uint64_t wait_until_ns;		/* REQ waits for events until then (0: it does not wait) */
	bool req_again;			/* REQ was served in part: served again at the session's next turn */
	uint64_t last_run;		/* the registered graph its last Run named: likely the next one's too */
	struct qgd_job *job;		/* in the executor, at most one */
	struct qgd_weights *weights;
	size_t n_weights, cap_weights;
	struct qgd_graph **graphs;
	size_t n_graphs;
	uint64_t graph_bytes;		/* heap its registered graphs hold (graphs.c), counted in client-memory */
	struct qgd_upload upload;
	uint64_t next_handle;
	uint64_t completed, failed;
	uint64_t weight_bytes;		/* pool pieces its weight handles reach (client-weights) */
	struct qgd_ratelimit rl;	/* for its refusals */
	int announced;			/* its start was logged: its end will be too */
	const char *refused;		/* refused when it connected, and told: why, for the log (handshake.c) */
	struct qg_buft *buft;		/* this session's pieces of the pool, for intermediates */
	struct qgd_session *roster_prev, *roster_next;	/* roster.c's own */
};

/* A session for the client connected on FD (its credentials read), or NULL. */
struct qgd_session *qgd_session_new(struct qgd_server *srv, int fd);
/* Free S and everything it holds; its event waiters see an error.  NULL is fine. */
void qgd_session_free(struct qgd_session *s);
/* Take and serve S's next request if there is one and room for its answer: 1 if it did, 0 if not. */
int qgd_session_step(struct qgd_session *s);
/* True if S has a request waiting in its ring (or taken, and not held up by a running graph). */
bool qgd_session_pending(struct qgd_session *s);
/*
 * The max-sessions rule, for the door (server.c, as a connection comes)
 * and the handshake (handshake.c, as its Hello comes: others may have
 * become ready meanwhile): with SERVED sessions served, is there room for
 * one more?  0, or -EDQUOT with the reason, naming the key, in WHY.
 */
int qgd_session_room(const struct qgd_server *srv, uint32_t served, char *why, size_t len);

#endif /* QGD_SESSION_H */
