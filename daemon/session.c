/*
 * session.c - one client of the daemon: its region, rings, events and the
 * record being served.
 *
 * Everything the client can write is read here with suspicion: ring
 * positions are checked by ring.c, records are copied out of shared memory
 * before they are decoded, event indices are bounded where they are used,
 * and the daemon's own copy of every event value is what waits compare
 * against.  A corrupt ring drops the session; a bad request only gets an
 * error completion.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accounts.h"
#include "graphs.h"
#include "hotpath.h"
#include "reply.h"
#include "requests.h"
#include "server.h"
#include "session.h"
#include "sock.h"

struct qgd_session *qgd_session_new(struct qgd_server *srv, int fd)
{
	struct qgd_session *s = calloc(1, sizeof *s);

	if (!s)
		return NULL;
	s->srv = srv;
	s->sock = fd;
	s->memfd = -1;
	s->bell = -1;
	s->id = ++srv->next_session_id;
	s->started_ms = qg_stamp_ms();
	s->next_handle = 1;
	if (qg_sock_peercred(fd, &s->pid, &s->uid, &s->gid) < 0 || !(s->acct = qgd_account_hold(srv, s->uid))) {
		free(s);
		return NULL;
	}
	/* without them (an old kernel) the client counts as a member of its primary group only */
	(void)qg_sock_peergroups(fd, &s->groups, &s->n_groups);
	snprintf(s->name, sizeof s->name, "pid %d", (int)s->pid);
	return s;
}

/* Completion-ring room a new request needs: its own answer, and a running graph's still to come. */
static uint32_t room_needed(const struct qgd_session *s)
{
	return s->job ? 2 * QGD_MAX_COMPLETION : QGD_MAX_COMPLETION;
}

bool qgd_session_pending(struct qgd_session *s)
{
	if (s->state != QGD_READY)
		return false;
	if (s->req)
		return !s->job;
	return qg_ring_pending(&s->rg.submit) > 0 && qg_ring_can_push(&s->rg.complete, room_needed(s)) != 0;
}

/*
 * Serve the session's next record, if it has one and may take it now.
 * Returns 1 if it did something, 0 if there was nothing to do.
 */
int qgd_session_step(struct qgd_session *s)
{
	if (s->state != QGD_READY || (s->job && s->req))
		return 0;	/* one request at a time, in the order submitted */
	if (!s->req) {
		/* the submit tail first: an idle poll reads nothing else of the session (the record's line is only asked for) */
		qg_ring_warm(&s->rg.submit);
		int pending = qg_ring_pending(&s->rg.submit);
		if (pending < 0) {
			qgd_reply_drop(s, "submit ring corrupt");
			return 1;
		}
		if (pending == 0)
			return 0;
		/* never take a request whose completion could not be posted */
		int room = qg_ring_can_push(&s->rg.complete, room_needed(s));
		if (room < 0) {
			qgd_reply_drop(s, "completion ring corrupt");
			return 1;
		}
		if (room == 0)
			return 0;	/* the client must read its completions first */
		if (s->last_run)	/* its inputs travel from the client while the record is read */
			qgd_graph_prefetch(s, s->last_run);
		ssize_t n = qg_ring_pop(&s->rg.submit, s->rec, qg_ring_max_record(&s->rg.submit));
		if (n == -EAGAIN)
			return 0;
		if (n == -EPROTO) {
			qgd_reply_drop(s, "submit ring corrupt");
			return 1;
		}
		if (n == -EMSGSIZE) {
			qgd_reply_refuse(s, 0, -EINVAL, "record too long");
			return 1;
		}
		if (!qgd_request_take(s, (size_t)n))
			return 1;	/* refused: answered */
	}
	qgd_request_serve(s);	/* while a graph of this session runs, only a Cancel goes past it */
	return 1;
}

void qgd_session_free(struct qgd_session *s)
{
	if (!s)
		return;
	qgd_request_release_all(s);
	qgd_account_drop(s->srv, s->acct);	/* after its weights and graphs let go of it */
	if (s->ev) {
		/* waiters on this session's events see an error, not a hang: half the number space on, every wait is reached */
		for (uint32_t i = 0; i < s->rg.layout.event_count; i++)
			qg_event_record_seq(&s->ev[i], qg_event_seq(&s->ev[i]) + 0x80000000u, -ECONNRESET);
	}
	qg_region_unmap(&s->rg);
	if (s->memfd >= 0)
		close(s->memfd);
	if (s->bell >= 0)
		close(s->bell);
	if (s->sock >= 0)
		close(s->sock);
	qg_wire_arena_free(&s->decode);
	free(s->rec);
	free(s->ev);
	free(s->groups);
	free(s);
}

int qgd_session_room(const struct qgd_server *srv, uint32_t served, char *why, size_t len)
{
	if (served < srv->cfg.max_sessions)
		return 0;
	snprintf(why, len, "max-sessions: %u sessions is the limit", srv->cfg.max_sessions);
	return -EDQUOT;
}
