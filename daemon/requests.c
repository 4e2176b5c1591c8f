/*
 * requests.c - what a session may ask for, one handler per request kind:
 * weights uploads, freeing them, graphs submitted or run again, cancel,
 * stats (report.c) and models (models.c).  Every handler answers with
 * exactly one completion.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "graphs.h"
#include "hugepool.h"
#include "kernels.h"
#include "loop.h"
#include "models.h"
#include "reply.h"
#include "report.h"
#include "requests.h"
#include "server.h"
#include "session.h"
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

/* f32 values an upload copies out of the arena at a time: a bound on its bounce buffer, a multiple of a block. */
#define UPLOAD_BOUNCE_VALUES 16384u

static void upload_reset(struct qgd_session *s)
{
	struct qgd_upload *up = &s->upload;

	if (up->dst)
		qgd_weights_discard(s->srv, up->dst, up->dst_bytes);
	free(up->stage);
	free(up->bounce);
	memset(up, 0, sizeof *up);
}

/* The plain type whose rows make up TYPE's row groups (TYPE itself when it is plain). */
static enum qg_type plain_of(enum qg_type type)
{
	return qg_type_is_interleaved(type) ? QG_TYPE_Q4_0 : type;
}

/*
 * Set UP (its types and shape filled in) up for converting as chunks
 * arrive: a copy needs nothing; a repack stages one unit of rows that both
 * layouts group whole; f32 values are quantized from a bounce buffer, a
 * row group at a time into STAGE where the target interleaves rows.
 * STAGE is at most one row group of the stored matrix.  0 or -ENOMEM.
 */
static int upload_prepare(struct qgd_upload *up)
{
	size_t row = (size_t)qg_row_size(up->target_type, up->cols);	/* an interleaved row: its plain row's size */
	int gs = qg_type_row_group(up->src_type), gt = qg_type_row_group(up->target_type);

	if (up->src_type == up->target_type)
		return 0;
	if (up->src_type != QG_TYPE_F32) {
		up->stage_bytes = (size_t)(gs > gt ? gs : gt) * row;
	} else {
		up->bounce = malloc(UPLOAD_BOUNCE_VALUES * sizeof(float));
		if (!up->bounce)
			return -ENOMEM;
		up->stage_bytes = gt > 1 ? (size_t)gt * row : 0;
	}
	if (up->stage_bytes && !(up->stage = malloc(up->stage_bytes)))
		return -ENOMEM;
	return 0;
}

/*
 * Quantize N f32 values X of row ROW from column COL on (N and COL whole
 * blocks) to UP's target: in place in DST for a plain target, else into
 * the row group's stage, which is repacked into DST once its last row is
 * complete.  0 or the conversion's -errno (-EDOM, -ERANGE).
 */
static int upload_convert(struct qgd_upload *up, int64_t row, int64_t col, const float *x, int64_t n)
{
	enum qg_type plain = plain_of(up->target_type);
	int64_t per_block = qg_type_block_values(plain);
	int64_t group = qg_type_row_group(up->target_type);
	size_t row_bytes = (size_t)qg_row_size(up->target_type, up->cols);
	size_t at = (size_t)(col / per_block) * (size_t)qg_row_size(plain, per_block);
	unsigned char *dst = up->dst;
	unsigned char *p = group == 1 ? dst + (size_t)row * row_bytes + at : up->stage + (size_t)(row % group) * row_bytes + at;
	ssize_t r = qg_quantize(plain, x, p, (size_t)qg_row_size(plain, n), 1, n, NULL);

	if (r >= 0 && group > 1 && col + n == up->cols && row % group == group - 1)
		r = qg_repack(up->target_type, dst + (size_t)(row - group + 1) * row_bytes, up->stage_bytes, plain,
			      up->stage, group, up->cols);
	return r < 0 ? (int)r : 0;
}

/*
 * Take LEN bytes of UP's source at byte AT of it (copied out of the arena
 * a piece at a time, never read there twice) and convert what they
 * complete into UP->DST.  0 or the conversion's -errno.
 */
static int upload_take(struct qgd_upload *up, size_t at, const unsigned char *p, size_t len)
{
	unsigned char *dst = up->dst;

	if (up->src_type == up->target_type) {
		memcpy(dst + at, p, len);
		return 0;
	}
	if (up->src_type != QG_TYPE_F32) {
		/* a repack: whole units of rows, which sit at the same offset in both layouts */
		while (len) {
			size_t n = len < up->stage_bytes - up->staged ? len : up->stage_bytes - up->staged;
			memcpy(up->stage + up->staged, p, n);
			up->staged += n;
			at += n;
			p += n;
			len -= n;
			if (up->staged < up->stage_bytes)
				break;
			int64_t rows = (int64_t)(up->stage_bytes / (size_t)qg_row_size(up->src_type, up->cols));
			ssize_t r = qg_repack(up->target_type, dst + at - up->stage_bytes, up->stage_bytes, up->src_type,
					      up->stage, rows, up->cols);
			if (r < 0)
				return (int)r;
			up->staged = 0;
		}
		return 0;
	}
	/* f32: whole blocks of values, a row's run at a time; a part of a block waits for the next chunk */
	const int64_t per_block = qg_type_block_values(plain_of(up->target_type));
	const size_t cap = UPLOAD_BOUNCE_VALUES * sizeof(float);
	while (len) {
		size_t n = len < cap - up->bounced ? len : cap - up->bounced;
		memcpy(up->bounce + up->bounced, p, n);
		up->bounced += n;
		p += n;
		len -= n;
		const float *x = (const float *)(void *)up->bounce;
		int64_t avail = (int64_t)(up->bounced / sizeof(float)) / per_block * per_block;
		size_t used = (size_t)avail * sizeof(float);
		while (avail) {
			int64_t row = (int64_t)(up->values_done / (uint64_t)up->cols);
			int64_t col = (int64_t)(up->values_done % (uint64_t)up->cols);
			int64_t run = avail < up->cols - col ? avail : up->cols - col;
			int r = upload_convert(up, row, col, x, run);
			if (r)
				return r;
			x += run;
			avail -= run;
			up->values_done += (uint64_t)run;
		}
		memmove(up->bounce, up->bounce + used, up->bounced - used);
		up->bounced -= used;
	}
	return 0;
}

static void serve_upload(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	const Qgraph__UploadWeights *u = r->upload;
	struct qgd_upload *up = &s->upload;
	const struct qgd_config *cfg = &s->srv->cfg;

	if (u->upload_id == 0) {	/* a new upload */
		int src = qg_wire_type(u->src_type), dst = qg_wire_type(u->target_type);
		if (up->id)
			upload_reset(s);	/* an abandoned upload gives way */
		if (src < 0 || (src != QG_TYPE_F32 && src != QG_TYPE_F16 && src != QG_TYPE_Q8_0 && src != QG_TYPE_Q4_0 &&
				qg_layout_of((enum qg_type)src) < 0))
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
						"weights arrive as f32, f16, q8_0, q4_0 or an interleaved q4_0 layout");
		if (dst < 0 || !qg_type_is_weight((enum qg_type)dst))
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "target type %d is not a weight type",
						(int)u->target_type);
		if ((src == QG_TYPE_F16 || src == QG_TYPE_Q8_0) && dst != src)
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
						"%s weights are stored as they are: the target must be %s",
						qg_type_name((enum qg_type)src), qg_type_name((enum qg_type)src));
		if (u->model) {
			const char *why;
			if (qgd_model_may_upload(s, u->name, &why))
				return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "model weights \"%.64s\": %s",
							u->name ? u->name : "", why);
		}
		if (src != QG_TYPE_F32 && src != QG_TYPE_F16 && src != QG_TYPE_Q8_0 &&
		    (dst == QG_TYPE_F32 || dst == QG_TYPE_F16 || dst == QG_TYPE_Q8_0))
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
						"q4_0 weights can only be stored as q4_0 layouts");
		if (dst == QG_TYPE_Q4_0)	/* "q4_0": the best layout this CPU and shape allow */
			dst = qgd_weights_best_layout(u->rows);
		ssize_t in = qg_matrix_size((enum qg_type)src, u->rows, u->cols);
		ssize_t out = qg_matrix_size((enum qg_type)dst, u->rows, u->cols);
		if (in < 0 || out < 0)
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
						"%lld x %lld does not fit %s -> %s (columns a multiple of 32; rows a "
						"multiple of the layout's 4 or 8)",
						(long long)u->rows, (long long)u->cols, qg_type_name((enum qg_type)src),
						qg_type_name((enum qg_type)dst));
		if (u->name && strlen(u->name) >= sizeof up->name)
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "a weights name is at most %zu bytes",
						sizeof up->name - 1);
		uint64_t limit = cfg->client_weights ? cfg->client_weights : cfg->pool_bytes;
		if (s->weight_bytes + (uint64_t)out > limit)
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_QUOTA,
						"quota client-weights: this session holds %llu bytes of weights, %lld more "
						"would pass %llu", (unsigned long long)s->weight_bytes, (long long)out,
						(unsigned long long)limit);
		/* the stored matrix's pinned memory now: the pool counts it while the chunks arrive */
		up->dst = qgd_weights_alloc(s->srv, (size_t)out);
		if (!up->dst)
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_QUOTA,
						"quota pool-size: the pool has no room for %zd more bytes (%llu of %llu in use)",
						out, (unsigned long long)qg_hugepool_in_use_total(s->srv->pool),
						(unsigned long long)qg_hugepool_info(s->srv->pool)->bytes);
		up->dst_bytes = (size_t)out;
		up->src_type = (enum qg_type)src;
		up->target_type = (enum qg_type)dst;
		up->rows = u->rows;
		up->cols = u->cols;
		up->bytes = (size_t)in;
		up->received = 0;
		if (upload_prepare(up)) {
			upload_reset(s);
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory to convert weights");
		}
		up->id = s->next_handle++;
		snprintf(up->name, sizeof up->name, "%s", u->name ? u->name : "");
		up->model = u->model;
	} else if (u->upload_id != up->id) {
		return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND, "no upload %llu in progress",
					(unsigned long long)u->upload_id);
	}

	/* the chunk: in order, inside the arena and inside the matrix */
	const Qgraph__Span *d = u->data;
	uint64_t off = d ? d->offset : 0, len = d ? d->bytes : 0;
	if (u->chunk_offset != up->received) {
		size_t want = up->received;
		upload_reset(s);
		return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
					"chunk at byte %llu where %zu was expected: upload abandoned",
					(unsigned long long)u->chunk_offset, want);
	}
	if (off > s->layout.arena_bytes || len > s->layout.arena_bytes - off || len > up->bytes - up->received) {
		upload_reset(s);
		return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
					"chunk [%llu, +%llu) is outside the arena or past the matrix: upload abandoned",
					(unsigned long long)off, (unsigned long long)len);
	}
	int e = upload_take(up, up->received, s->arena + off, (size_t)len);
	if (e) {
		upload_reset(s);
		return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "conversion failed: %s: upload abandoned",
					e == -EDOM ? "the matrix holds NaN or infinity"
					: e == -ERANGE ? "a block's scale does not fit in fp16"
						       : strerror(-e));
	}
	up->received += (size_t)len;

	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	c.request_id = rid;
	if (!u->last) {
		c.handle = up->id;
		return qgd_session_complete(s, &c);
	}
	if (up->received != up->bytes) {
		size_t got = up->received;
		upload_reset(s);
		return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
					"last chunk after %zu of %zu bytes: upload abandoned", got, up->bytes);
	}

	/* every byte has arrived, so every row group is converted: store it */
	struct qgd_weights *w;
	const char *why;
	size_t out = up->dst_bytes;
	void *mem = up->dst;
	up->dst = NULL;	/* qgd_weights_add consumes it */
	/* a model's tensor: stored unnamed (its name is the model's label for it) and handed to the model */
	e = qgd_weights_add(s, up->target_type, up->rows, up->cols, mem, out, up->model ? NULL : up->name, &w, &why);
	if (e) {
		char name[QGD_WEIGHTS_NAME_MAX];
		snprintf(name, sizeof name, "%s", up->name);
		upload_reset(s);
		if (e == -EEXIST)
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "weights name \"%s\": %s", name,
						why);
		return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
	}
	s->srv->weights_uploaded++;
	qgd_debug("session %llu: weights %llu: %s %lld x %lld (%zu bytes, %u users)", (unsigned long long)s->id,
		  (unsigned long long)w->handle, qg_type_name(w->type), (long long)w->rows, (long long)w->cols, out,
		  w->stored->refs);
	c.handle = w->handle;
	c.stored_type = (Qgraph__Type)qg_wire_type_of(w->type);	/* stored weights always have a wire type */
	c.rows = w->rows;
	c.cols = w->cols;
	if (up->model) {
		c.handle = 0;	/* the model holds them, not the session */
		e = qgd_model_adopt(s, up->name, w);
		if (e) {
			upload_reset(s);
			if (e == -ENOENT)
				return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND,
							"its model is no longer being loaded: upload dropped");
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
		}
	}
	upload_reset(s);
	qgd_session_complete(s, &c);
}

static void serve_open_weights(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	const Qgraph__OpenWeights *ow = r->open_weights;
	const char *name = ow->name;
	struct qgd_weights *w;
	int e;

	if (ow->digest.len) {
		int type = qg_wire_type(ow->digest_type);
		if (ow->digest.len != 32 || type < 0 || ow->rows < 1 || ow->cols < 1)
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
						"open weights by digest: a SHA-256 (32 bytes), a type and a shape");
		e = qgd_weights_open_digest(s, (enum qg_type)type, ow->rows, ow->cols, ow->digest.data, &w);
		if (e == -ENOENT) {
			/* a question, not a refusal: a client asks before it uploads anything new (no log line) */
			Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
			c.request_id = rid;
			c.status = QGRAPH__STATUS__STATUS_NOT_FOUND;
			c.error = "no weights with that digest, type and shape that this client may use";
			return qgd_session_complete(s, &c);
		}
		name = "";
	} else {
		e = name && *name ? qgd_model_open(s, name, &w) : -EINVAL;
		if (e == -ENOENT)	/* not a model's: weights a session uploaded under that name */
			e = qgd_weights_open(s, name, &w);
	}

	if (e == -EINVAL)
		return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "open weights: no name given");
	if (e == -ENOENT)
		return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND,
					"no weights named \"%.64s\" that this client may use", name);
	if (e)
		return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	c.request_id = rid;
	c.handle = w->handle;
	c.stored_type = (Qgraph__Type)qg_wire_type_of(w->type);	/* stored weights always have a wire type */
	c.rows = w->rows;
	c.cols = w->cols;
	qgd_session_complete(s, &c);
}

static void serve_free_weights(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	uint64_t handle = r->free_weights->handle;

	for (size_t i = 0; i < s->n_weights; i++) {
		if (s->weights[i].handle != handle)
			continue;
		if (qgd_graphs_use_weights(s, s->weights[i].data))
			return qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID,
						"weights %llu are used by a registered graph: free the graph first",
						(unsigned long long)handle);
		qgd_weights_release(s, &s->weights[i]);
		Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
		c.request_id = rid;
		return qgd_session_complete(s, &c);
	}
	qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND, "no weights %llu", (unsigned long long)handle);
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
			qgd_session_record_events(s, &one, 1, -ENOMEM);
		}
		qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
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
	struct qg_wire_env env = { .arena = s->arena, .arena_bytes = s->layout.arena_bytes,
				   .max_tensors = s->srv->cfg.max_nodes, .weights = weights_lookup, .weights_ctx = s };
	struct qg_backend *small, *large;
	struct qgd_graph *g = qgd_graph_new();
	char err[512];
	int r;

	if (!g) {
		qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
		return;
	}
	r = qg_wire_graph_build(sg, &env, &g->wg, err, sizeof err);
	if (r) {
		qgd_graph_free(g);
		qgd_session_fail(s, rid,
				 r == -ENOENT ? QGRAPH__STATUS__STATUS_NOT_FOUND
				 : r == -E2BIG ? QGRAPH__STATUS__STATUS_QUOTA
				 : r == -ENOMEM ? QGRAPH__STATUS__STATUS_NO_MEMORY
						: QGRAPH__STATUS__STATUS_INVALID,
				 "%s%s", r == -E2BIG ? "quota max-nodes: " : "", err);
		return;
	}
	uint64_t t_decoded = qgd_now_ns();
	qgd_exec_backends(s->srv, &small, &large);
	if ((r = qgd_graph_place(s, g, sg->keep, small, large, err, sizeof err))) {
		qgd_graph_free(g);
		qgd_session_fail(s, rid, r == -EDQUOT ? QGRAPH__STATUS__STATUS_QUOTA : QGRAPH__STATUS__STATUS_NO_MEMORY,
				 "%s", err);
		return;
	}
	uint64_t t_placed = qgd_now_ns();
	if (sg->keep && qgd_graph_register(s, g)) {
		qgd_graph_free(g);
		qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NO_MEMORY, "no memory");
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
		qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND, "no registered graph %llu",
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
		qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_NOT_FOUND, "no registered graph %llu",
				 (unsigned long long)handle);
		return;
	}
	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	c.request_id = rid;
	qgd_session_complete(s, &c);
}

/* Event references must name slots of this session's table. */
static int events_ok(struct qgd_session *s, uint64_t rid, Qgraph__EventRef **ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (ev[i]->index >= s->layout.event_count) {
			qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "event %u: the table has %u",
					 ev[i]->index, s->layout.event_count);
			return 0;
		}
	}
	return 1;
}

/* True when every event the request waits for has reached its value (wrap-around compare). */
static int events_reached(struct qgd_session *s, Qgraph__EventRef **ev, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!qg_seq_reached(qg_event_seq(&s->ev[ev[i]->index]), (uint32_t)ev[i]->value))
			return 0;
	return 1;
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
 * graph-timeout), at most max-wait-ms from its arrival.  1 while it may
 * wait on (it stays at the head of the session's queue, and the loop
 * looks at it again only at its deadline: qgd_request_waiting); 0 once it
 * has been answered: its time is up, or the daemon is stopping.
 */
static int wait_for_events(struct qgd_session *s, uint64_t rid, uint32_t timeout_ms)
{
	const struct qgd_config *cfg = &s->srv->cfg;
	uint64_t ms = timeout_ms ? timeout_ms : cfg->graph_timeout_ms;
	int capped = ms > cfg->max_wait_ms;

	if (capped)
		ms = cfg->max_wait_ms;
	if (s->srv->stopping) {
		s->wait_until_ns = 0;
		qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_SHUTTING_DOWN,
				 "the daemon is stopping: the events this request waits for were not recorded");
		return 0;
	}
	if (!s->wait_until_ns)
		s->wait_until_ns = s->req_started_ns + ms * 1000000u;
	if (qgd_now_ns() < s->wait_until_ns)
		return 1;
	s->wait_until_ns = 0;
	qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_TIMED_OUT,
			 "the events this request waits for were not recorded within %llu ms%s", (unsigned long long)ms,
			 capped ? " (max-wait-ms: the longest a request may wait)" : "");
	return 0;
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

bool qgd_request_take(struct qgd_session *s, size_t n)
{
	if ((uint64_t)n > s->srv->cfg.max_message) {
		/* refused before it is decoded: max-message bounds the decoder's work and memory */
		qgd_session_fail(s, record_request_id(s->rec, n), QGRAPH__STATUS__STATUS_QUOTA,
				 "quota max-message: a %zu-byte request, at most %llu (not decoded)", n,
				 (unsigned long long)s->srv->cfg.max_message);
		return false;
	}
	s->req = qg_wire_decode_request(&s->decode, s->rec, n);
	if (!s->req) {
		qgd_session_fail(s, 0, QGRAPH__STATUS__STATUS_INVALID,
				 "a %zu-byte record that is not a request (or too large to decode)", n);
		return false;
	}
	if (s->req->body_case == QGRAPH__REQUEST__BODY_RUN && s->req->run->graph != s->last_run) {
		s->last_run = s->req->run->graph;
		qgd_graph_prefetch(s, s->last_run);
	}
	s->req_started_ns = qgd_now_ns();
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

	if (!s->wait_until_ns || !s->req || s->state != QGD_READY || s->srv->stopping)
		return false;
	request_events(s->req, &e);
	if (events_reached(s, e.wait, e.n_wait))
		return false;
	return qgd_now_ns() < s->wait_until_ns;
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
	qgd_session_complete(s, &c);
}

static void serve_stats(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	qgd_report_stats(s, rid, r->stats);
}

static void serve_model(struct qgd_session *s, uint64_t rid, const Qgraph__Request *r)
{
	qgd_model_serve(s, rid, r->model);
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
		qgd_session_fail(s, rid, QGRAPH__STATUS__STATUS_INVALID, "a request without a body");
	} else if (k->flags & REQ_EVENTS) {
		int ready = events_ready(s, rid, r);
		if (ready == 0)
			return;	/* stays at the head of this session's queue */
		if (ready > 0)
			k->serve(s, rid, r);
	} else {
		k->serve(s, rid, r);
	}
	s->req = NULL;	/* answered, or handed to the executor, which answers it */
}

void qgd_session_release_all(struct qgd_session *s)
{
	qgd_graphs_release(s);
	qgd_weights_release_all(s);
	upload_reset(s);
	qgd_models_session_gone(s);
}
