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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "exec.h"
#include "graphs.h"
#include "hotpath.h"
#include "reply.h"
#include "requests.h"
#include "server.h"
#include "session.h"
#include "shm.h"
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
	s->started_ms = qgd_now_ms();
	s->next_handle = 1;
	if (qg_sock_peercred(fd, &s->pid, &s->uid, &s->gid) < 0) {
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

int qgd_session_pending(struct qgd_session *s)
{
	if (s->state != QGD_READY)
		return 0;
	if (s->req)
		return !s->job;
	return qg_ring_pending(&s->submit) > 0 && qg_ring_can_push(&s->complete, room_needed(s)) != 0;
}

/* Read a varint at *AT of P (LEN bytes) into *OUT, moving *AT past it.  1, or 0 when it runs off the end or past 64 bits. */
static int read_varint(const uint8_t *p, size_t len, size_t *at, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64 && *at < len; shift += 7) {
		uint8_t b = p[(*at)++];
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return 1;
		}
	}
	return 0;
}

/*
 * The request_id (field 1, a varint) of the request record REC (LEN bytes,
 * our own copy), read without decoding the rest: the top-level fields are
 * stepped over by their wire type until it turns up (first, as a request
 * is packed).  0 when the record has none, or is not well formed enough
 * to tell.
 */
static uint64_t record_request_id(const uint8_t *rec, size_t len)
{
	size_t at = 0;
	uint64_t key, v;

	while (at < len) {
		if (!read_varint(rec, len, &at, &key))
			return 0;
		switch (key & 7) {
		case 0:	/* varint */
			if (!read_varint(rec, len, &at, &v))
				return 0;
			if (key >> 3 == 1)
				return v;
			break;
		case 1:	/* 64 bits */
			if (len - at < 8)
				return 0;
			at += 8;
			break;
		case 2:	/* length-delimited */
			if (!read_varint(rec, len, &at, &v) || v > len - at)
				return 0;
			at += (size_t)v;
			break;
		case 5:	/* 32 bits */
			if (len - at < 4)
				return 0;
			at += 4;
			break;
		default:
			return 0;
		}
	}
	return 0;
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
		qg_ring_warm(&s->submit);
		int pending = qg_ring_pending(&s->submit);
		if (pending < 0) {
			qgd_session_drop(s, "submit ring corrupt");
			return 1;
		}
		if (pending == 0)
			return 0;
		/* never take a request whose completion could not be posted */
		int room = qg_ring_can_push(&s->complete, room_needed(s));
		if (room < 0) {
			qgd_session_drop(s, "completion ring corrupt");
			return 1;
		}
		if (room == 0)
			return 0;	/* the client must read its completions first */
		if (s->last_run)	/* its inputs travel from the client while the record is read */
			qgd_graph_prefetch(s, s->last_run);
		ssize_t n = qg_ring_pop(&s->submit, s->rec, qg_ring_max_record(&s->submit));
		if (n == -EAGAIN)
			return 0;
		if (n == -EPROTO) {
			qgd_session_drop(s, "submit ring corrupt");
			return 1;
		}
		if (n == -EMSGSIZE) {
			qgd_session_fail(s, 0, QGRAPH__STATUS__STATUS_INVALID, "record too long");
			return 1;
		}
		if ((uint64_t)n > s->srv->cfg.max_message) {
			/* refused before it is decoded: max-message bounds the decoder's work and memory */
			qgd_session_fail(s, record_request_id(s->rec, (size_t)n), QGRAPH__STATUS__STATUS_QUOTA,
					 "quota max-message: a %zd-byte request, at most %llu (not decoded)", n,
					 (unsigned long long)s->srv->cfg.max_message);
			return 1;
		}
		s->req = qg_wire_decode_request(&s->decode, s->rec, (size_t)n);
		if (!s->req) {
			qgd_session_fail(s, 0, QGRAPH__STATUS__STATUS_INVALID,
					 "a %zd-byte record that is not a request (or too large to decode)", n);
			return 1;
		}
		if (s->req->body_case == QGRAPH__REQUEST__BODY_RUN && s->req->run->graph != s->last_run) {
			s->last_run = s->req->run->graph;
			qgd_graph_prefetch(s, s->last_run);
		}
		s->req_started_ns = qgd_now_ns();
	}
	if (s->job) {
		/* a graph of this session runs: only a Cancel goes past it */
		if (s->req->body_case == QGRAPH__REQUEST__BODY_CANCEL)
			qgd_request_serve(s);
		return 1;
	}
	qgd_request_serve(s);
	return 1;
}

void qgd_session_free(struct qgd_session *s)
{
	if (!s)
		return;
	qgd_session_release_all(s);
	if (s->ev) {
		/* waiters on this session's events see an error, not a hang: half the number space on, every wait is reached */
		for (uint32_t i = 0; i < s->layout.event_count; i++)
			qg_event_record_seq(&s->ev[i], qg_event_seq(&s->ev[i]) + 0x80000000u, -ECONNRESET);
	}
	if (s->base)
		munmap(s->base, s->layout.region_bytes);
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
