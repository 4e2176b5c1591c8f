/*
 * reply.h - what every file of the daemon may do to a session's client
 * (reply.c): post a completion and wake the client, refuse a request,
 * record events, end the session.  reply.c calls nothing above it.
 */
#ifndef QGD_REPLY_H
#define QGD_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "hotpath.h"
#include "qgraph.pb-c.h"
#include "server.h"

struct qgd_session;

#define QGD_MAX_COMPLETION QG_MAX_COMPLETION	/* room kept free in the completion ring per request */

/* The names a quota refusal's message starts with, by counter (the last: "other"). */
extern const char *const qgd_quota_names[QGD_QUOTA_COUNT];
/* The latency histogram's upper bounds, in ns. */
extern const uint64_t qgd_latency_le_ns[QGD_LATENCY_BOUNDS];

/* End S (logged with WHY, once; counted as dropped if it was served); the server frees it at its next reap. */
void qgd_reply_drop(struct qgd_session *s, const char *why);
/* As qgd_reply_drop, for a session its client ended (hung up): not counted as dropped. */
void qgd_reply_hung_up(struct qgd_session *s, const char *why);
/* Count a refusal whose message MSG names its quota ("quota KEY: ..." or "KEY: ..."). */
void qgd_count_quota(struct qgd_server *srv, const char *msg);
/* Post completion C to S's ring and wake its client if it sleeps; a broken ring drops S. */
void qgd_reply_complete(struct qgd_session *s, Qgraph__Completion *c);
/* Answer request REQUEST_ID of S with status ST and the message FMT (logged, rate limited). */
void qgd_reply_fail(struct qgd_session *s, uint64_t request_id, Qgraph__Status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/*
 * The status that stands for -errno ERR, from the daemon's one table
 * (-EDQUOT a quota, -ENOMEM no memory, -ENOENT not found, -EINVAL
 * invalid, -EACCES denied, -ETIMEDOUT timed out, -ECANCELED cancelled),
 * or OTHERWISE for an ERR the table does not hold.
 */
Qgraph__Status qgd_reply_status(int err, Qgraph__Status otherwise);
/*
 * Answer request REQUEST_ID of S with the status for ERR
 * (qgd_reply_status, else internal) and the message FMT, as
 * qgd_reply_fail: for callers that speak no protobuf.
 */
void qgd_reply_refuse(struct qgd_session *s, uint64_t request_id, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* An event a request records: slot INDEX of the session's table reaches VALUE. */
struct qgd_event_ref {
	uint32_t index;
	uint64_t value;
};
/* Record each of the N events EV on S's event table, with STATUS. */
void qgd_reply_record_events(struct qgd_session *s, const struct qgd_event_ref *ev, size_t n, int32_t status);

/* A graph's run, as its answer tells it (qgd_reply_answer_run). */
struct qgd_run_answer {
	uint64_t rid;
	uint64_t handle;	/* the graph's, if registered (else 0) */
	int err;		/* 0, -ETIMEDOUT (its time limit), -ECANCELED, or the run's -errno */
	const char *error;	/* what went wrong, or NULL */
	uint64_t decode_ns, alloc_ns, compute_ns, total_ns;
};
/* Post the answer to S's graph run A (its status from A->err, with its timings), as qgd_reply_complete. */
void qgd_reply_answer_run(struct qgd_session *s, const struct qgd_run_answer *a);

#endif /* QGD_REPLY_H */
