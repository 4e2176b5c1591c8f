/*
 * reply.c - the daemon's side of the completion protocol, under everything
 * else in daemon/ that answers a client: completions posted to a session's
 * ring and the futex wake that goes with them, refusals, event records, and
 * the end of a session.  It calls nothing above it.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "doorbell.h"
#include "hints.h"
#include "hotpath.h"
#include "loop.h"
#include "loopcpu.h"
#include "reply.h"
#include "server.h"
#include "session.h"

const char *const qgd_quota_names[QGD_QUOTA_COUNT] = {
	"max-arena", "max-sessions", "max-sessions-per-user", "total-arena", "max-handshakes",
	"handshakes-per-user", "max-message", "max-nodes", "max-graphs", "client-weights",
	"client-memory", "pool-size", "user-models", "user-graph-metadata", "user-weights", "other",
};

/* Powers of ten and their halves and quarters, 10 us to 10 s: Prometheus' habit, in ns. */
const uint64_t qgd_latency_le_ns[QGD_LATENCY_BOUNDS] = {
	10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
	25000000, 50000000, 100000000, 250000000, 500000000, 1000000000, 2500000000u, 5000000000u, 10000000000u,
};

void qgd_count_quota(struct qgd_server *srv, const char *msg)
{
	size_t k;

	if (strncmp(msg, "quota ", 6) == 0)
		msg += 6;
	size_t len = strcspn(msg, ":");
	for (k = 0; k < QGD_QUOTA_COUNT - 1; k++)
		if (strlen(qgd_quota_names[k]) == len && strncmp(msg, qgd_quota_names[k], len) == 0)
			break;
	srv->stats.quota[k]++;
}

/* Count completion C (its status, and a graph's total time) in the daemon's stats. */
static void count_completion(struct qgd_stats *n, const Qgraph__Completion *c)
{
	size_t st = (size_t)c->status;

	n->by_status[st < sizeof n->by_status / sizeof n->by_status[0] ? st : QGRAPH__STATUS__STATUS_INTERNAL]++;
	if (!c->timings)
		return;
	uint64_t t = c->timings->total_ns;
	size_t b = 0;
	while (b < QGD_LATENCY_BOUNDS && t > qgd_latency_le_ns[b])
		b++;
	n->latency[b]++;
	n->latency_sum_ns += t;
}

/*
 * The loop has just answered S's client, which spins on the loop's CPU
 * (and yields to the loop there): after 16 such answers in a row to the
 * same client, ask the server to move the loop to another CPU.  Yielding
 * back to the client after each answer would keep the two together for
 * good, at a context switch a round trip.
 */
static void beside_client(struct qgd_server *srv, const struct qgd_session *s)
{
	/* one client, answered again and again: with many, moving helps none of them */
	if (s != srv->beside_session) {
		srv->beside_session = s;
		srv->beside = 0;
	}
	if (++srv->beside < 16)
		return;
	srv->beside = 0;
	qgd_loopcpu_ask_move(srv);
}

void qgd_reply_complete(struct qgd_session *s, Qgraph__Completion *c)
{
	uint8_t buf[QGD_MAX_COMPLETION];

	if (s->state != QGD_READY)
		return;
	/* by hand unless it carries stats (the same bytes: hotpath.h) */
	size_t len = qg_hot_pack_completion(c, buf, sizeof buf);
	if (!len) {
		len = qgraph__completion__get_packed_size(c);
		if (len > sizeof buf) {
			/* only stats can grow; cut them rather than post what cannot fit */
			c->stats = NULL;
			len = qgraph__completion__get_packed_size(c);
		}
		qgraph__completion__pack(c, buf);
	}
	if (c->status == QGRAPH__STATUS__STATUS_OK)
		s->completed++;
	else
		s->failed++;
	count_completion(&s->srv->stats, c);
	/* room was checked before the request was taken (qgd_session_step) */
	int err = qg_ring_push(&s->rg.complete, buf, (uint32_t)len);
	if (err) {
		qgd_reply_drop(s, err == -EPROTO ? "completion ring corrupt" : "completion ring full");
		return;
	}
	/* the count, and the client woken if it sleeps on it (doorbell.h says why no wake-up is lost) */
	if (qg_completion_notify(s->rg.hdr))
		return;	/* it slept: it spun nowhere */
	/* a client spinning for it on this CPU: the loop may have to move (the server does, after its scan) */
	if (qg_hint_waiter_on(s->rg.hdr, qgd_loopcpu_current(s->srv)))
		beside_client(s->srv, s);
	else
		s->srv->beside = 0;
}

void qgd_reply_fail(struct qgd_session *s, uint64_t request_id, Qgraph__Status st, const char *fmt, ...)
{
	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	c.request_id = request_id;
	c.status = st;
	c.error = msg;
	if (st == QGRAPH__STATUS__STATUS_QUOTA)
		qgd_count_quota(s->srv, msg);
	qgd_log_limited(&s->rl, QGD_LOG_INFO, "session %llu (%s): request %llu refused: %s",
			(unsigned long long)s->id, s->name, (unsigned long long)request_id, msg);
	qgd_reply_complete(s, &c);
}

/* The status each -errno a refusal or a run may end with stands for: the one table of the daemon. */
static const struct {
	int err;
	Qgraph__Status status;
} err_status[] = {
	{ -EDQUOT, QGRAPH__STATUS__STATUS_QUOTA },
	{ -ENOMEM, QGRAPH__STATUS__STATUS_NO_MEMORY },
	{ -ENOENT, QGRAPH__STATUS__STATUS_NOT_FOUND },
	{ -EINVAL, QGRAPH__STATUS__STATUS_INVALID },
	{ -EACCES, QGRAPH__STATUS__STATUS_DENIED },
	{ -ETIMEDOUT, QGRAPH__STATUS__STATUS_TIMED_OUT },
	{ -ECANCELED, QGRAPH__STATUS__STATUS_CANCELLED },
};

Qgraph__Status qgd_reply_status(int err, Qgraph__Status otherwise)
{
	for (size_t i = 0; i < sizeof err_status / sizeof err_status[0]; i++)
		if (err_status[i].err == err)
			return err_status[i].status;
	return otherwise;
}

void qgd_reply_refuse(struct qgd_session *s, uint64_t request_id, int err, const char *fmt, ...)
{
	Qgraph__Status st = qgd_reply_status(err, QGRAPH__STATUS__STATUS_INTERNAL);
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	qgd_reply_fail(s, request_id, st, "%s", msg);
}

void qgd_reply_record_events(struct qgd_session *s, const struct qgd_event_ref *ev, size_t n, int32_t status)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t idx = ev[i].index;
		if (idx >= s->rg.layout.event_count)	/* checked before the run too */
			continue;
		/* the trusted word, published to the client's slot (event.c says how, and why it is safe) */
		qg_event_record_seq(&s->ev[idx], (uint32_t)ev[i].value, status);
	}
}

void qgd_reply_answer_run(struct qgd_session *s, const struct qgd_run_answer *a)
{
	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	Qgraph__Timings tm = QGRAPH__TIMINGS__INIT;

	tm.decode_ns = a->decode_ns;
	tm.alloc_ns = a->alloc_ns;
	tm.compute_ns = a->compute_ns;
	tm.total_ns = a->total_ns;
	c.request_id = a->rid;
	c.timings = &tm;
	c.handle = a->handle;
	if (a->err == -ETIMEDOUT || a->err == -ECANCELED)
		c.status = qgd_reply_status(a->err, QGRAPH__STATUS__STATUS_INTERNAL);
	else if (a->err)	/* whatever else stops a run is its graph's fault */
		c.status = QGRAPH__STATUS__STATUS_INVALID;
	if (a->error)
		c.error = (char *)a->error;
	qgd_reply_complete(s, &c);
}

/* End S, logged with WHY; DROPPED: the daemon ends it (counted when S was served). */
static void session_end(struct qgd_session *s, const char *why, bool dropped)
{
	if (s->state == QGD_DEAD)
		return;
	if (dropped && s->state == QGD_READY)
		s->srv->stats.sessions_dropped++;
	/*
	 * The last word of a session whose start was logged is never dropped
	 * (its refusals' rate limit is not this one's); one that never got that
	 * far speaks through its uid's bucket, like its connection did.
	 */
	if (s->announced)
		qgd_info("session %llu (%s, uid %u): closed: %s", (unsigned long long)s->id, s->name,
			 (unsigned)s->uid, why);
	else
		qgd_log_uid(s->uid, QGD_LOG_INFO, "session %llu (%s, uid %u): closed: %s", (unsigned long long)s->id,
			    s->name, (unsigned)s->uid, why);
	s->state = QGD_DEAD;
	if (s->sock_watch)
		qg_loop_unwatch(s->srv->loop, s->sock_watch);
	if (s->bell_watch)
		qg_loop_unwatch(s->srv->loop, s->bell_watch);
	s->sock_watch = s->bell_watch = NULL;
}

void qgd_reply_drop(struct qgd_session *s, const char *why)
{
	session_end(s, why, true);
}

void qgd_reply_hung_up(struct qgd_session *s, const char *why)
{
	session_end(s, why, false);
}
