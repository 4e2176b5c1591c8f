/*
 * requests.c - what a session may ask for, one handler per request kind:
 * weights uploads, freeing them, graphs submitted or run again, cancel,
 * stats (report.c) and models (models.c).  Every handler answers with
 * exactly one completion.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "graphs.h"
#include "hotpath.h"
#include "kernels.h"
#include "models.h"
#include "reply.h"
#include "report.h"
#include "requests.h"
#include "server.h"
#include "session.h"
#include "upload.h"
#include "weights.h"

/* qg_wire_weights_fn for this session's graphs. */
static int weights_lookup(void *ctx, uint64_t handle, struct qg_wire_weights *out)
{
	struct qgd_weights *w = qgd_weights_find(ctx, handle);

	if (!w)
		return -ENOENT;
	*out = (struct qg_wire_weights){ .type = w->type, .rows = w->rows, .cols = w->cols, .data = w->data };
	return 0;
}

static void serve_upload(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	const Qgraph__UploadWeights *u = r->upload;
	struct qgd_upload_done done;
	char msg[512];
	int e;

	if (s->upload.chunk_taken) {
		/* a chunk taken in slices: its request, served again (its upload is open and it was checked) */
	} else if (u->upload_id == 0) {	/* a new upload */
		int src = qg_wire_type(u->src_type), dst = qg_wire_type(u->target_type);
		if (s->upload.id)
			qgd_upload_reset(s);	/* an abandoned upload gives way */
		if (src < 0 || (src != QG_TYPE_F32 && src != QG_TYPE_F16 && src != QG_TYPE_Q8_0 && src != QG_TYPE_Q4_0 &&
				src != QG_TYPE_Q4_K && src != QG_TYPE_Q6_K && qg_layout_of((enum qg_type)src) < 0)) {
			qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
					 "weights arrive as f32, f16, q8_0, q4_0, an interleaved q4_0 layout, q4_K or q6_K");
			return;
		}
		if (dst < 0 || !qg_type_is_weight((enum qg_type)dst)) {
			qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "target type %d is not a weight type",
					 (int)u->target_type);
			return;
		}
		if ((e = qgd_upload_begin(s, (enum qg_type)src, (enum qg_type)dst, u->rows, u->cols, u->name, u->model,
					  msg, sizeof msg))) {
			qgd_reply_refuse(s, rid, e, "%s", msg);
			return;
		}
	} else if (u->upload_id != s->upload.id) {
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND, "no upload %llu in progress",
				 (unsigned long long)u->upload_id);
		return;
	}

	const Qgraph__Span *d = u->data;
	e = qgd_upload_chunk(s, u->chunk_offset, d ? d->offset : 0, d ? d->bytes : 0, u->last, &done, msg, sizeof msg);
	if (e < 0) {
		qgd_reply_refuse(s, rid, e, "%s", msg);
		return;
	}
	if (e == 2) {
		s->req_again = true;	/* the rest of the chunk at this session's next turn, after the others' */
		return;
	}
	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	c.request_id = rid;
	if (e == 0) {	/* more chunks to come */
		c.handle = s->upload.id;
		qgd_reply_complete(s, &c);
		return;
	}
	c.handle = done.handle;
	c.stored_type = (Qgraph__Type)qg_wire_type_of(done.type);	/* stored weights always have a wire type */
	c.rows = done.rows;
	c.cols = done.cols;
	qgd_reply_complete(s, &c);
}

/*
 * A new handle of S to the weights NAME means for S's user, looked up in
 * this order: the user's own uploads, its own models, the public models,
 * then what its share groups uploaded and loaded.  A user's own names come
 * first so that nobody else's model or upload can stand in for them.
 * 0, -EINVAL (no name), -ENOENT or -ENOMEM.
 */
static int open_by_name(struct qgd_session *s, const char *name, struct qgd_weights **out)
{
	int e;

	if (!name || !*name)
		return -EINVAL;
	if ((e = qgd_weights_open(s, name, false, out)) != -ENOENT ||
	    (e = qgd_model_open(s, name, QGD_MODEL_OWN, out)) != -ENOENT ||
	    (e = qgd_model_open(s, name, QGD_MODEL_PUBLIC, out)) != -ENOENT ||
	    (e = qgd_model_open(s, name, QGD_MODEL_GROUP, out)) != -ENOENT)
		return e;
	return qgd_weights_open(s, name, true, out);
}

static void serve_open_weights(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	const Qgraph__OpenWeights *ow = r->open_weights;
	const char *name = ow->name;
	struct qgd_weights *w;
	int e;

	if (ow->digest.len) {
		int type = qg_wire_type(ow->digest_type);
		if (ow->digest.len != 32 || type < 0 || ow->rows < 1 || ow->cols < 1) {
			qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
						"open weights by digest: a SHA-256 (32 bytes), a type and a shape");
			return;
		}
		e = qgd_weights_open_digest(s, (enum qg_type)type, ow->rows, ow->cols, ow->digest.data, &w);
		if (e == -ENOENT) {
			/* a question, not a refusal: a client asks before it uploads anything new (no log line) */
			Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
			s->srv->stats.digest_misses++;
			c.request_id = rid;
			c.status = QGRAPH__STATUS__STATUS_NOT_FOUND;
			c.error = "no weights with that digest, type and shape that this client may use";
			qgd_reply_complete(s, &c);
			return;
		}
		name = "";
	} else {
		e = open_by_name(s, name, &w);
	}

	if (e == -EINVAL) {
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "open weights: no name given");
		return;
	}
	if (e == -ENOENT) {
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND,
					"no weights named \"%.64s\" that this client may use", name);
		return;
	}
	if (e) {
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
		return;
	}
	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	c.request_id = rid;
	c.handle = w->handle;
	c.stored_type = (Qgraph__Type)qg_wire_type_of(w->type);	/* stored weights always have a wire type */
	c.rows = w->rows;
	c.cols = w->cols;
	qgd_reply_complete(s, &c);
}

static void serve_free_weights(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	uint64_t handle = r->free_weights->handle;

	for (size_t i = 0; i < s->n_weights; i++) {
		if (s->weights[i].handle != handle)
			continue;
		if (qgd_graphs_use_weights(s, s->weights[i].data)) {
			qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
						"weights %llu are used by a registered graph: free the graph first",
						(unsigned long long)handle);
			return;
		}
		qgd_weights_release(s, &s->weights[i]);
		Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
		c.request_id = rid;
		qgd_reply_complete(s, &c);
		return;
	}
	qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND, "no weights %llu", (unsigned long long)handle);
}

/* At most this many events a run records are handed to the executor from the stack; more from the heap. */
#define EVENTS_ON_STACK 8

/*
 * Run G for request RID of S (exec.c), its events to record REC (N of
 * them) handed over as plain references; consumes G unless REGISTERED.
 */
static void run_graph(struct qgd_session *s, uint64_t rid, struct qgd_graph *g, bool registered, uint64_t t_decoded,
		      uint64_t t_placed, uint32_t timeout_ms, Qgraph__EventRef **rec, size_t n)
{
	struct qgd_event_ref buf[EVENTS_ON_STACK], *ev = buf;

	if (n > EVENTS_ON_STACK && !(ev = malloc(n * sizeof *ev))) {
		if (!registered)
			qgd_graph_free(g);
		for (size_t i = 0; i < n; i++) {
			struct qgd_event_ref one = { .index = rec[i]->index, .value = rec[i]->value };
			qgd_reply_record_events(s, &one, 1, -ENOMEM);
		}
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
		return;
	}
	for (size_t i = 0; i < n; i++)
		ev[i] = (struct qgd_event_ref){ .index = rec[i]->index, .value = rec[i]->value };
	qgd_exec_run(s, rid, g, registered, t_decoded, t_placed, timeout_ms, n ? ev : NULL, n);
	if (ev != buf)
		free(ev);
}

/* Build SG for request RID of S from the wire, place it and run it (registered first if SG->keep). */
static void serve_submit(struct qgd_session *s, uint64_t rid, const Qgraph__Request *req)
{
	const Qgraph__SubmitGraph *sg = req->submit;
	struct qg_wire_env env = { .arena = s->rg.arena, .arena_bytes = s->rg.layout.arena_bytes,
				   .max_tensors = s->srv->cfg.max_nodes, .weights = weights_lookup, .weights_ctx = s };
	struct qg_backend *small, *large;
	struct qgd_graph *g = qgd_graph_new();
	char err[512];
	int r;

	if (!g) {
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
		return;
	}
	r = qg_wire_graph_build(sg, &env, &g->wg, err, sizeof err);
	if (r) {
		qgd_graph_free(g);
		/* too many tensors is the max-nodes quota; anything else not known is the graph's fault */
		qgd_reply_fail(s, rid, qgd_reply_status(r == -E2BIG ? -EDQUOT : r, QGRAPH__STATUS__STATUS_INVALID),
			       "%s%s", r == -E2BIG ? "quota max-nodes: " : "", err);
		return;
	}
	uint64_t t_decoded = qg_stamp_ns();
	qgd_exec_backends(s->srv, &small, &large);
	if ((r = qgd_graph_place(s, g, sg->keep, small, large, err, sizeof err))) {
		qgd_graph_free(g);
		qgd_reply_fail(s, rid, qgd_reply_status(r, QGRAPH__STATUS__STATUS_NO_MEMORY), "%s", err);
		return;
	}
	uint64_t t_placed = qg_stamp_ns();
	if (sg->keep && qgd_graph_register(s, g)) {
		qgd_graph_free(g);
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
		return;
	}
	run_graph(s, rid, g, sg->keep, t_decoded, t_placed, sg->timeout_ms, sg->record, sg->n_record);
}

/* Run S's registered graph R->run->graph again with the inputs now in the arena. */
static void serve_run(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	const Qgraph__RunGraph *run = r->run;
	struct qgd_graph *g = qgd_graph_find(s, run->graph);

	if (!g) {
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND, "no registered graph %llu",
				 (unsigned long long)run->graph);
		return;
	}
	/* decoded just now, and nothing to place: the plan was checked when the graph was registered */
	uint64_t t = s->req_started_ns;
	run_graph(s, rid, g, true, t, t, run->timeout_ms, run->record, run->n_record);
}

/* Forget S's registered graph R->free_graph->graph. */
static void serve_free_graph(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	uint64_t handle = r->free_graph->graph;

	if (qgd_graph_forget(s, handle)) {
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND, "no registered graph %llu",
				 (unsigned long long)handle);
		return;
	}
	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	c.request_id = rid;
	qgd_reply_complete(s, &c);
}

/* Event references must name slots of this session's table. */
static bool events_ok(struct qgd_session *s, uint64_t rid, Qgraph__EventRef **ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (ev[i]->index >= s->rg.layout.event_count) {
			qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "event %u: the table has %u",
					 ev[i]->index, s->rg.layout.event_count);
			return false;
		}
	}
	return true;
}

/* True when every event the request waits for has reached its value (wrap-around compare). */
static bool events_reached(struct qgd_session *s, Qgraph__EventRef **ev, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!qg_seq_reached(qg_event_seq(&s->ev[ev[i]->index]), (uint32_t)ev[i]->value))
			return false;
	return true;
}

/* The events a request waits for and records, and its time limit. */
struct request_events {
	Qgraph__EventRef **wait, **record;
	size_t n_wait, n_record;
	uint32_t timeout_ms;
};

/* The events of request R in *E (none for a kind that names none: not REQ_EVENTS). */
static void request_events(const Qgraph__Request *r, struct request_events *e)
{
	*e = (struct request_events){ 0 };
	if (r->body_case == QGRAPH__REQUEST__BODY_SUBMIT)
		*e = (struct request_events){ .wait = r->submit->wait, .n_wait = r->submit->n_wait,
					      .record = r->submit->record, .n_record = r->submit->n_record,
					      .timeout_ms = r->submit->timeout_ms };
	else if (r->body_case == QGRAPH__REQUEST__BODY_RUN)
		*e = (struct request_events){ .wait = r->run->wait, .n_wait = r->run->n_wait, .record = r->run->record,
					      .n_record = r->run->n_record, .timeout_ms = r->run->timeout_ms };
}

/*
 * S's request RID waits for events not yet recorded, for TIMEOUT_MS (0:
 * graph-timeout), at most max-wait-ms from its arrival.  True while it may
 * wait on (it stays at the head of the session's queue, and the loop
 * looks at it again only at its deadline: qgd_request_waiting); false
 * once it has been answered: its time is up, or the daemon is stopping.
 */
static bool wait_for_events(struct qgd_session *s, uint64_t rid, uint32_t timeout_ms)
{
	const struct qgd_config *cfg = &s->srv->cfg;
	uint64_t ms = timeout_ms ? timeout_ms : cfg->graph_timeout_ms;
	int capped = ms > cfg->max_wait_ms;

	if (capped)
		ms = cfg->max_wait_ms;
	if (qgd_server_stopping(s->srv)) {
		s->wait_until_ns = 0;
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_SHUTTING_DOWN,
				 "the daemon is stopping: the events this request waits for were not recorded");
		return false;
	}
	if (!s->wait_until_ns)
		s->wait_until_ns = s->req_started_ns + ms * 1000000u;
	if (qg_stamp_ns() < s->wait_until_ns)
		return true;
	s->wait_until_ns = 0;
	qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_TIMED_OUT,
			 "the events this request waits for were not recorded within %llu ms%s", (unsigned long long)ms,
			 capped ? " (max-wait-ms: the longest a request may wait)" : "");
	return false;
}

bool qgd_request_take(struct qgd_session *s, size_t n)
{
	if ((uint64_t)n > s->srv->cfg.max_message) {
		/* refused before it is decoded: max-message bounds the decoder's work and memory */
		qgd_reply_fail(s, qg_hot_request_id(s->rec, n), QGRAPH__STATUS__STATUS_QUOTA,
				 "quota max-message: a %zu-byte request, at most %llu (not decoded)", n,
				 (unsigned long long)s->srv->cfg.max_message);
		return false;
	}
	s->req = qg_wire_decode_request(&s->decode, s->rec, n);
	if (!s->req) {
		qgd_reply_fail(s, 0, QGRAPH__STATUS__STATUS_INVALID,
				 "a %zu-byte record that is not a request (or too large to decode)", n);
		return false;
	}
	if (s->req->body_case == QGRAPH__REQUEST__BODY_RUN && s->req->run->graph != s->last_run) {
		s->last_run = s->req->run->graph;
		qgd_graph_prefetch(s, s->last_run);
	}
	s->req_started_ns = qg_stamp_ns();
	return true;
}

/*
 * Whether S's request R (RID), of a kind that names events, may be served
 * now: 1 when the events it names are in the table and those it waits for
 * have been recorded; 0 while it waits on (it stays at the head of the
 * session's queue); -1 once it has been answered (an event outside the
 * table, its time up, the daemon stopping).
 */
static int events_ready(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	struct request_events e;

	request_events(r, &e);
	if (!events_ok(s, rid, e.wait, e.n_wait) || !events_ok(s, rid, e.record, e.n_record))
		return -1;
	if (!events_reached(s, e.wait, e.n_wait))
		return wait_for_events(s, rid, e.timeout_ms) ? 0 : -1;
	s->wait_until_ns = 0;
	return 1;
}

bool qgd_request_waiting(struct qgd_session *s)
{
	struct request_events e;

	if (!s->wait_until_ns || !s->req || s->state != QGD_READY || qgd_server_stopping(s->srv))
		return false;
	request_events(s->req, &e);
	if (events_reached(s, e.wait, e.n_wait))
		return false;
	return qg_stamp_ns() < s->wait_until_ns;
}

/*
 * Requests run in order, so the only one a Cancel can still reach is a
 * graph running now; anything else it names has been answered.  The
 * graph's own completion says it was cancelled; this one says whether
 * the Cancel found it.
 */
static void serve_cancel(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;

	c.request_id = rid;
	if (qgd_exec_cancel(s, r->cancel->request_id, &rid) < 0) {
		c.status = QGRAPH__STATUS__STATUS_NOT_FOUND;
		c.error = "nothing to cancel: the request has completed";
	}
	qgd_reply_complete(s, &c);
}

static void serve_stats(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	qgd_report_stats(s, rid, r->stats);
}

/* A model's begin, commit or unload (models.c). */
static void serve_model(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	const Qgraph__ModelRequest *mr = r->model;
	const char *name = mr->name ? mr->name : "";
	char msg[512];
	int e;

	switch (mr->op) {
	case QGRAPH__MODEL_REQUEST__OP__MODEL_BEGIN:
		e = qgd_model_begin(s, name, msg, sizeof msg);
		break;
	case QGRAPH__MODEL_REQUEST__OP__MODEL_COMMIT:
		e = qgd_model_commit(s, name, msg, sizeof msg);
		break;
	case QGRAPH__MODEL_REQUEST__OP__MODEL_UNLOAD:
		e = qgd_model_unload(s, name, msg, sizeof msg);
		break;
	default:
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "model request %d is not known", (int)mr->op);
		return;
	}
	if (e) {
		qgd_reply_refuse(s, rid, e, "%s", msg);
		return;
	}
	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	c.request_id = rid;
	qgd_reply_complete(s, &c);
}

/* What a request kind may do beyond being served in its turn. */
enum {
	REQ_EVENTS = 1,		/* names events: checked, and those it waits for awaited, before it is served */
	REQ_WHILE_BUSY = 2,	/* served while the session's graph runs (a Cancel alone) */
};

/*
 * What a client may ask for: one entry per request kind, its handler and
 * its flags (OpenSSH's monitor table is the model).  A handler answers
 * with exactly one completion, now or (a graph on the executor) later.
 */
static const struct request_kind {
	unsigned flags;
	void (*serve)(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r);
} request_kinds[] = {
	[QGRAPH__REQUEST__BODY_UPLOAD] = { 0, serve_upload },
	[QGRAPH__REQUEST__BODY_FREE_WEIGHTS] = { 0, serve_free_weights },
	[QGRAPH__REQUEST__BODY_SUBMIT] = { REQ_EVENTS, serve_submit },
	[QGRAPH__REQUEST__BODY_RUN] = { REQ_EVENTS, serve_run },
	[QGRAPH__REQUEST__BODY_FREE_GRAPH] = { 0, serve_free_graph },
	[QGRAPH__REQUEST__BODY_CANCEL] = { REQ_WHILE_BUSY, serve_cancel },
	[QGRAPH__REQUEST__BODY_STATS] = { 0, serve_stats },
	[QGRAPH__REQUEST__BODY_OPEN_WEIGHTS] = { 0, serve_open_weights },
	[QGRAPH__REQUEST__BODY_MODEL] = { 0, serve_model },
};

void qgd_request_serve(struct qgd_session *s)
{
	const Qgraph__Request *r = s->req;
	uint64_t rid = r->request_id;
	size_t body = (size_t)r->body_case;
	const struct request_kind *k = body < sizeof request_kinds / sizeof request_kinds[0] && request_kinds[body].serve
					       ? &request_kinds[body]
					       : NULL;

	if (s->job && !(k && (k->flags & REQ_WHILE_BUSY)))
		return;	/* a graph of this session runs: only a Cancel goes past it */
	if (!k) {
		qgd_reply_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "a request without a body");
	} else if (k->flags & REQ_EVENTS) {
		int ready = events_ready(s, rid, r);
		if (ready == 0)
			return;	/* stays at the head of this session's queue */
		if (ready > 0)
			k->serve(s, rid, r);
	} else {
		k->serve(s, rid, r);
		if (s->req_again) {
			s->req_again = false;
			return;	/* served in part: stays at the head of this session's queue */
		}
	}
	s->req = NULL;	/* answered, or handed to the executor, which answers it */
}

void qgd_request_release_all(struct qgd_session *s)
{
	qgd_graphs_release(s);
	qgd_weights_release_all(s);
	qgd_upload_reset(s);
	qgd_models_session_gone(s);
}
