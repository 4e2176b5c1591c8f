/*
 * requests.c - libqgraph's requests to qgraphd and their completions (see
 * qgraph.h, section 3): packing and publishing a request, ringing the
 * doorbell, reading completions, waiting on them and on events, and the
 * calls built on them (stats, graphs unregistered); weights.c's calls
 * come through qg_client_call and qg_client_send_request.
 *
 * Memory ordering against the daemon (which may run on another core of a
 * weakly ordered CPU) is the IPC layer's, written once for both sides:
 * records are published by the ring's release store and read after its
 * acquire load (ring.c); the doorbell and the sleep on completions are in
 * doorbell.h, the events' wait in event.c, the CPU hints in hints.h.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "doorbell.h"
#include "event.h"
#include "grow.h"
#include "hints.h"
#include "hotpath.h"
#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "region.h"
#include "ring.h"
#include "stamp.h"

#include "session-impl.h"
#include "wire.h"

#define SPIN_NS 20000u		/* spin this long before sleeping */
#define SPIN_YIELD_NS 2000u	/* and after this long, yield the CPU between looks */
#define ALIVE_CHECK_NS 100000000u	/* how often a sleeper checks the daemon is there */

/* ------------------------------------------------------------ requests */

/* Is the daemon still there?  A hang-up (or EOF) on the socket says not. */
static int daemon_alive(struct qgraph_session *s)
{
	struct pollfd p = { .fd = s->sock, .events = POLLIN };

	if (s->dead)
		return 0;
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLIN)))
		s->dead = 1;	/* the daemon sends nothing after the welcome: any event is its end */
	s->alive_at = qg_stamp_coarse_ns();
	return !s->dead;
}

/*
 * The same, for the submit path: the socket is asked at most once per
 * ALIVE_SUBMIT_NS, since a poll() costs more than the rest of a submit,
 * and the time is the coarse stamp's (qg_stamp_coarse_ns: a precise
 * reading is not free on a guest without a TSC clock source).  A
 * request sent in that window to a daemon that has just died is answered
 * by its wait, which asks the socket before it sleeps.
 */
#define ALIVE_SUBMIT_NS 1000000u
static int daemon_alive_lately(struct qgraph_session *s)
{
	if (s->dead)
		return 0;
	return qg_stamp_coarse_ns() - s->alive_at < ALIVE_SUBMIT_NS || daemon_alive(s);
}

/*
 * When a sleep that began at NOW ends: after ALIVE_CHECK_NS, to ask
 * whether the daemon is still there, or at the caller's deadline
 * (TIMEOUT_MS after START; negative: none) if that comes first.
 */
static uint64_t sleep_until(uint64_t now, uint64_t start, int timeout_ms)
{
	uint64_t until = now + ALIVE_CHECK_NS;

	if (timeout_ms >= 0 && start + (uint64_t)timeout_ms * 1000000u < until)
		until = start + (uint64_t)timeout_ms * 1000000u;
	return until;
}

/* Publish a packed request (lock held).  0, -EAGAIN, -EMSGSIZE, -ENOTCONN. */
static int push_locked(struct qgraph_session *s, const uint8_t *buf, size_t len)
{
	if (len > s->max_record)
		return qg_client_fail(s, -EMSGSIZE, "a %zu-byte request: the ring takes %u", len, s->max_record);
	int r = qg_ring_push(&s->rg.submit, buf, (uint32_t)len);
	if (r == -EPROTO) {
		s->dead = 1;
		return qg_client_fail(s, -ENOTCONN, "the submit ring is corrupt");
	}
	if (r)
		return r;
	qg_doorbell_ring_if_asleep(s->rg.hdr, s->bell);
	return 0;
}

/* Pack and push REQ, blocking for room if asked.  Sets REQ's id. */
static int send_request(struct qgraph_session *s, Qgraph__Request *req, int block, uint64_t *id)
{
	/* a run is packed by hand (hotpath.h), and is never too large for the ring */
	int hot = req->body_case == QGRAPH__REQUEST__BODY_RUN;
	size_t len = hot ? 0 : qgraph__request__get_packed_size(req);
	int r;

	s->error[0] = 0;	/* the session error is this call's: cleared as it starts, set if it fails */
	if (len > s->max_record)
		return qg_client_fail(s, -EMSGSIZE, "a %zu-byte request: the ring takes %u", len, s->max_record);
	for (;;) {
		pthread_mutex_lock(&s->lock);
		if (!daemon_alive_lately(s)) {
			pthread_mutex_unlock(&s->lock);
			return qg_client_fail(s, -ENOTCONN, "qgraphd went away");
		}
		req->request_id = s->next_id;
		len = hot ? qg_hot_pack_request(req, s->rec, s->max_record) : 0;
		if (!len) {
			len = qgraph__request__get_packed_size(req);	/* the id is part of it */
			if (len > s->max_record) {
				pthread_mutex_unlock(&s->lock);
				return qg_client_fail(s, -EMSGSIZE, "a %zu-byte request: the ring takes %u", len, s->max_record);
			}
			qgraph__request__pack(req, s->rec);
		}
		r = push_locked(s, s->rec, len);
		if (r == 0 && id)
			*id = s->next_id;
		if (r == 0)
			s->next_id++;
		pthread_mutex_unlock(&s->lock);
		if (r == -EAGAIN && !block)
			return qg_client_fail(s, r, "the submit ring is full: the daemon has not taken the requests before "
					      "(QGRAPH_SUBMIT_BLOCK waits for room)");
		if (r != -EAGAIN)
			return r;
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);	/* the daemon drains the ring as fast as it serves */
	}
}

int qg_client_send_request(struct qgraph_session *s, void *req, int block, uint64_t *id)
{
	return send_request(s, req, block, id);
}

static int status_errno(Qgraph__Status st)
{
	switch (st) {
	case QGRAPH__STATUS__STATUS_OK: return 0;
	case QGRAPH__STATUS__STATUS_NO_MEMORY: return -ENOMEM;
	case QGRAPH__STATUS__STATUS_QUOTA: return -EDQUOT;
	case QGRAPH__STATUS__STATUS_CANCELLED: return -ECANCELED;
	case QGRAPH__STATUS__STATUS_TIMED_OUT: return -ETIMEDOUT;
	case QGRAPH__STATUS__STATUS_NOT_FOUND: return -ENOENT;
	case QGRAPH__STATUS__STATUS_UNSUPPORTED: return -ENOTSUP;
	case QGRAPH__STATUS__STATUS_SHUTTING_DOWN: return -ESHUTDOWN;
	case QGRAPH__STATUS__STATUS_DENIED: return -EPERM;
	default: return -EINVAL;
	}
}

/* Status names in stats, by Qgraph__Status ("ok", "invalid", ...). */
static const char *const status_names[] = {
	"ok", "invalid", "no_memory", "quota", "cancelled", "timed_out", "not_found", "unsupported", "internal",
	"shutting_down", "denied",
};

/*
 * STATS as "key value" lines, malloc'd (NULL without memory): the
 * daemon-wide lines, then its sessions and models from byte *LISTS on
 * (a later page adds these alone).
 */
static char *stats_text(const Qgraph__Stats *st, size_t *lists)
{
	size_t len = 2048 + 256 * (st->n_kernels + st->n_session + st->n_model + st->n_completions +
				   st->n_quota_refusals + st->n_latency_count + st->n_batch_size_count),
	       at = 0;
	char *buf = malloc(len);

	if (!buf)
		return NULL;
	buf[0] = 0;
#define PUT(...)                                                                   \
	do {                                                                       \
		int k_ = snprintf(buf + at, at < len ? len - at : 0, __VA_ARGS__); \
		if (k_ > 0)                                                        \
			at += (size_t)k_;                                          \
	} while (0)
	uint64_t by[sizeof status_names / sizeof status_names[0]] = { 0 }, errors = 0;
	for (size_t k = 0; k < st->n_completions; k++) {
		size_t i = (size_t)st->completions[k]->status;
		if (i < sizeof by / sizeof by[0])
			by[i] = st->completions[k]->count;
		if (i)
			errors += st->completions[k]->count;
	}
	/* a digest lookup that finds nothing is the question before an upload, not an error */
	errors -= st->digest_misses < errors ? st->digest_misses : errors;
	PUT("version %s\nuptime_ms %llu\n", st->version, (unsigned long long)st->uptime_ms);
	PUT("sessions %u\nhandshaking %u\npinned_bytes %llu\npool_bytes %llu\npool_used %llu\nplans %u\n"
	    "graphs_run %llu\nweights_uploaded %llu\nmul_mat_interleaved %llu\npool %s\nloop %s\nthreads %u\n"
	    "weights_stored %u\nweights_referenced_bytes %llu\nsessions_hidden %u\n",
	    st->sessions, st->handshaking, (unsigned long long)st->pinned_bytes, (unsigned long long)st->pool_bytes,
	    (unsigned long long)st->pool_used, st->plans, (unsigned long long)st->graphs_run,
	    (unsigned long long)st->weights_uploaded, (unsigned long long)st->mul_mat_interleaved, st->pool_kind,
	    st->loop, st->threads, st->weights_stored, (unsigned long long)st->weights_referenced_bytes,
	    st->sessions_hidden);
	PUT("account_model_bytes %llu\naccount_weight_bytes %llu\naccount_graph_metadata_bytes %llu\n",
	    (unsigned long long)st->account_model_bytes, (unsigned long long)st->account_weight_bytes,
	    (unsigned long long)st->account_graph_bytes);
	PUT("requests %llu\nerrors %llu\ndigest_misses %llu\ntimeouts %llu\ncancels %llu\nsessions_dropped %llu\n",
	    (unsigned long long)st->requests, (unsigned long long)errors, (unsigned long long)st->digest_misses,
	    (unsigned long long)by[QGRAPH__STATUS__STATUS_TIMED_OUT],
	    (unsigned long long)by[QGRAPH__STATUS__STATUS_CANCELLED], (unsigned long long)st->sessions_dropped);
	for (size_t k = 0; k < sizeof by / sizeof by[0]; k++)
		PUT("status %s %llu\n", status_names[k], (unsigned long long)by[k]);
	for (size_t k = 0; k < st->n_quota_refusals; k++)
		PUT("quota %s %llu\n", st->quota_refusals[k]->quota, (unsigned long long)st->quota_refusals[k]->count);
	/* cumulative, as a Prometheus histogram's buckets are */
	uint64_t sum = 0;
	for (size_t k = 0; k < st->n_latency_count; k++) {
		sum += st->latency_count[k];
		if (k < st->n_latency_le_ns)
			PUT("latency_le_ns %llu %llu\n", (unsigned long long)st->latency_le_ns[k],
			    (unsigned long long)sum);
	}
	PUT("latency_count %llu\nlatency_sum_ns %llu\n", (unsigned long long)sum,
	    (unsigned long long)st->latency_sum_ns);
	/* batches: runs of two graphs or more as one, the graphs in them, and each size that occurred */
	uint64_t batches = 0, batched = 0;
	for (size_t k = 1; k < st->n_batch_size_count; k++) {
		batches += st->batch_size_count[k];
		batched += (k + 1) * st->batch_size_count[k];
	}
	PUT("batches %llu\nbatched_graphs %llu\nbatch_wait_ns %llu\n", (unsigned long long)batches,
	    (unsigned long long)batched, (unsigned long long)st->batch_wait_ns);
	PUT("batch_max %u\nbatch_window_us %u\n", st->batch_max, st->batch_window_us);
	for (size_t k = 0; k < st->n_batch_size_count; k++)
		if (st->batch_size_count[k])
			PUT("batch_size %zu %llu\n", k + 1, (unsigned long long)st->batch_size_count[k]);
	for (size_t k = 0; k < st->n_kernels; k++)
		PUT("kernel %s %s\n", st->kernels[k]->layout, st->kernels[k]->kernel);
	*lists = at < len ? at : len - 1;
	for (size_t k = 0; k < st->n_session; k++)
		PUT("session %llu pid %u uid %u name \"%s\" arena %llu weights %llu graphs %u completed %llu memory %llu\n",
		    (unsigned long long)st->session[k]->session_id, st->session[k]->pid, st->session[k]->uid,
		    st->session[k]->client_name, (unsigned long long)st->session[k]->arena_bytes,
		    (unsigned long long)st->session[k]->weight_bytes, st->session[k]->graphs,
		    (unsigned long long)st->session[k]->completed,
		    (unsigned long long)st->session[k]->memory_bytes);
	for (size_t k = 0; k < st->n_model; k++)
		PUT("model \"%s\" tensors %u bytes %llu uid %u\n", st->model[k]->name, st->model[k]->tensors,
		    (unsigned long long)st->model[k]->bytes, st->model[k]->uid);
#undef PUT
	return buf;
}

static void *unpack_alloc(void *ctx, size_t size)
{
	struct qgraph_session *s = ctx;
	size_t at = (s->unpack_used + 15) & ~(size_t)15;

	if (size > sizeof s->unpack || at > sizeof s->unpack - size)
		return NULL;	/* the decode fails, and is done again with malloc */
	s->unpack_used = at + size;
	return s->unpack + at;
}

static void unpack_free(void *ctx, void *p)
{
	(void)ctx;
	(void)p;	/* all at once, by the next decode */
}

/* A new entry at the end of S->done, for done_fill to fill; NULL without memory. */
static struct done *done_new(struct qgraph_session *s)
{
	void *p = qg_grow(s->done, &s->cap_done, s->n_done, sizeof *s->done, 16);
	if (!p)
		return NULL;
	s->done = p;
	return &s->done[s->n_done++];
}

/* Every field of D from H (the error text is most of D: it is written only when there is one). */
static void done_fill(struct done *d, const struct qg_hot_completion *h)
{
	d->id = h->request_id;
	d->stats = NULL;
	d->stats_more = 0;
	d->error[0] = 0;
	d->res.status = status_errno((Qgraph__Status)h->status);
	d->res.handle = h->handle;
	d->res.stored_type = qg_wire_public_type(h->stored_type);	/* -EINVAL: a type this library does not know */
	d->res.rows = h->rows;
	d->res.cols = h->cols;
	d->res.decode_ns = h->decode_ns;
	d->res.alloc_ns = h->alloc_ns;
	d->res.compute_ns = h->compute_ns;
	d->res.total_ns = h->total_ns;
	/* up to its first NUL, as the C string protobuf-c would have made of it */
	size_t n = h->error ? strnlen(h->error, h->error_len) : 0;
	if (n)
		snprintf(d->error, sizeof d->error, "%.*s", (int)(n < sizeof d->error ? n : sizeof d->error - 1),
			 h->error);
}

/* Read every completion in the ring into S->done (lock held). */
static int drain_locked(struct qgraph_session *s, uint8_t *buf, size_t cap)
{
	ProtobufCAllocator bump = { .alloc = unpack_alloc, .free = unpack_free, .allocator_data = s };

	for (;;) {
		ssize_t n = qg_ring_pop(&s->rg.complete, buf, cap);
		if (n == -EAGAIN)
			return 0;
		if (n < 0) {
			s->dead = 1;
			return qg_client_fail(s, -ENOTCONN, "the completion ring is corrupt");
		}
		struct qg_hot_completion h;
		if (qg_hot_unpack_completion(buf, (size_t)n, &h) == 0) {
			struct done *d = done_new(s);
			if (!d)
				return -ENOMEM;
			done_fill(d, &h);
			continue;
		}
		/* stats, or a form the hand-written reader leaves to protobuf-c */
		s->unpack_used = 0;
		ProtobufCAllocator *al = &bump;
		Qgraph__Completion *c = qgraph__completion__unpack(al, (size_t)n, buf);
		if (!c)	/* a large answer (stats of many sessions) */
			c = qgraph__completion__unpack(al = NULL, (size_t)n, buf);
		if (!c)
			continue;
		struct done *d = done_new(s);
		if (!d) {
			qgraph__completion__free_unpacked(c, al);
			return -ENOMEM;
		}
		h = (struct qg_hot_completion){ .request_id = c->request_id, .status = (int32_t)c->status,
						 .error = c->error, .error_len = c->error ? strlen(c->error) : 0,
						 .handle = c->handle, .stored_type = (int32_t)c->stored_type,
						 .rows = c->rows, .cols = c->cols };
		if (c->timings) {
			h.has_timings = 1;
			h.decode_ns = c->timings->decode_ns;
			h.alloc_ns = c->timings->alloc_ns;
			h.compute_ns = c->timings->compute_ns;
			h.total_ns = c->timings->total_ns;
		}
		done_fill(d, &h);
		if (c->stats) {
			d->stats = stats_text(c->stats, &d->stats_lists);
			d->stats_more = c->stats->more;
			d->next_session = c->stats->next_session;
			d->next_model = c->stats->next_model;
		}
		qgraph__completion__free_unpacked(c, al);
	}
}

/*
 * Take request ID's completion out of S->done (lock held): 1 found, 0 not.
 * The whole entry goes to *PAGE if asked for (a stats answer with it),
 * else its stats text is freed.
 */
static int take_locked(struct qgraph_session *s, uint64_t id, struct qgraph_result *res, struct done *page)
{
	for (size_t i = 0; i < s->n_done; i++) {
		if (s->done[i].id != id)
			continue;
		if (res) {
			*res = s->done[i].res;
			res->size = sizeof *res;	/* filled */
		}
		/* the daemon's reason when it failed, "" when it did not (no snprintf on the round trip) */
		if (s->done[i].error[0] || s->error[0])
			snprintf(s->error, sizeof s->error, "%s", s->done[i].error);
		if (page)
			*page = s->done[i];
		else
			free(s->done[i].stats);
		if (i != --s->n_done)
			s->done[i] = s->done[s->n_done];
		return 1;
	}
	return 0;
}

static int wait_spin(struct qgraph_session *s, uint64_t id, int timeout_ms, struct qgraph_result *res,
		     struct done *page)
{
	uint8_t buf[QG_MAX_COMPLETION];
	uint64_t start = qg_stamp_ns();
	unsigned moved = 0;	/* times the ring moved without bringing ours */
	bool beside = qg_hint_spin_here(s->rg.hdr);	/* again with the clock: the scheduler may have moved us */

	for (;;) {
		pthread_mutex_lock(&s->lock);
		int r = drain_locked(s, buf, sizeof buf);
		int found = r == 0 && take_locked(s, id, res, page);
		uint64_t next_id = s->next_id;	/* ids run from 1 up: one never given out would never complete */
		uint32_t read_to = s->rg.complete.pos;	/* drained up to here */
		pthread_mutex_unlock(&s->lock);
		if (r)
			return r;
		if (found)
			return 0;
		if (id == 0 || id >= next_id)
			return qg_client_fail(s, -EINVAL, "request %llu was never submitted on this session (the last was %llu)",
					      (unsigned long long)id, (unsigned long long)(next_id - 1));
		/*
		 * Watch the ring's tail alone, without the lock or the clock, until
		 * it passes what was drained (or a while has passed: another thread
		 * may have read our completion for us).  Only a hint: what is
		 * there is read under the lock.
		 */
		if (beside)
			sched_yield();	/* the loop runs on this CPU: let it, then look */
		if (qg_ring_await(&s->rg.complete, read_to, 64) && ++moved % 32)
			continue;	/* something came: read it first, the clock only every 32nd time */
		uint64_t waited = qg_stamp_ns() - start;
		if (timeout_ms >= 0 && waited >= (uint64_t)timeout_ms * 1000000u)
			return qg_client_fail(s, -ETIMEDOUT, "request %llu: no completion in %d ms", (unsigned long long)id,
				    timeout_ms);
		beside = qg_hint_spin_here(s->rg.hdr);
		if (waited < SPIN_NS) {
			/*
			 * Spinning reads the ring alone: the count's line stays with
			 * the daemon.  Past the first microseconds, let whatever else
			 * waits for this CPU run between looks: with more spinning
			 * clients than CPUs, that is the daemon itself.
			 */
			if (waited > SPIN_YIELD_NS)
				sched_yield();
			continue;
		}
		if (!daemon_alive(s))
			return qg_client_fail(s, -ENOTCONN, "qgraphd went away");
		/* a completion posted since the drain above is found there; a corrupt ring, by the next drain */
		qg_completion_sleep(s->rg.hdr, &s->rg.complete, sleep_until(start + waited, start, timeout_ms));
	}
}

static int wait_for(struct qgraph_session *s, uint64_t id, int timeout_ms, struct qgraph_result *res,
		    struct done *page)
{
	if (!s)
		return -EINVAL;
	int r = wait_spin(s, id, timeout_ms, res, page);
	qg_hint_spin_done(s->rg.hdr);
	return r;
}

QGRAPH_API int qgraph_wait(struct qgraph_session *s, uint64_t id, int timeout_ms, struct qgraph_result *res)
{
	struct qgraph_result full = { .size = 0 };
	int r = wait_for(s, id, timeout_ms, res ? &full : NULL, NULL);

	if (res && full.size) {	/* the completion came (else *RES is left as it was) */
		/* the caller's struct may be older (smaller) than ours: fill no byte past its size */
		size_t n = res->size && res->size < sizeof full ? res->size : sizeof full;
		memcpy((unsigned char *)res + sizeof res->size, (unsigned char *)&full + sizeof full.size,
		       n > sizeof full.size ? n - sizeof full.size : 0);
		res->size = n;
	}
	return r;
}

QGRAPH_API int qgraph_event_query(struct qgraph_session *s, unsigned event, uint32_t value)
{
	uint32_t cur;

	if (!s || event >= s->rg.layout.event_count)
		return -EINVAL;
	return qg_event_slot_reached(&s->rg.events[event], value, &cur, NULL);
}

/*
 * Wait for slot E to reach VALUE: qg_event_slot_wait's look and sleep
 * (event.h), with the spinning of wait_spin (yield to the loop beside us,
 * and after SPIN_YIELD_NS) and the daemon asked after between sleeps.
 */
static int event_spin(struct qgraph_session *s, struct qg_event_slot *e, uint32_t value, int timeout_ms)
{
	uint64_t start = qg_stamp_ns();
	bool beside = qg_hint_spin_here(s->rg.hdr);
	uint32_t cur;
	int st;

	for (;;) {
		if (qg_event_slot_reached(e, value, &cur, &st))
			return st < 0 ? st : 0;
		uint64_t now = qg_stamp_ns(), waited = now - start;
		if (timeout_ms >= 0 && waited >= (uint64_t)timeout_ms * 1000000u)
			return -ETIMEDOUT;
		if (waited < SPIN_NS) {
			if (beside || waited > SPIN_YIELD_NS)
				sched_yield();	/* as in wait_for */
			continue;
		}
		if (!daemon_alive(s))
			return qg_client_fail(s, -ENOTCONN, "qgraphd went away");
		qg_event_slot_sleep(e, cur, sleep_until(now, start, timeout_ms));
	}
}

QGRAPH_API int qgraph_event_sync(struct qgraph_session *s, unsigned event, uint32_t value, int timeout_ms)
{
	if (!s || event >= s->rg.layout.event_count)
		return -EINVAL;
	int r = event_spin(s, &s->rg.events[event], value, timeout_ms);
	qg_hint_spin_done(s->rg.hdr);
	return r;
}

/* Send REQ and wait for its completion. */
static int call(struct qgraph_session *s, Qgraph__Request *req, struct qgraph_result *res)
{
	uint64_t id;
	struct qgraph_result local;
	int r = send_request(s, req, 1, &id);

	if (r)
		return r;
	if (!res)
		res = &local;
	r = wait_for(s, id, -1, res, NULL);
	return r ? r : res->status;
}

int qg_client_call(struct qgraph_session *s, void *req, struct qgraph_result *res)
{
	return call(s, req, res);
}

QGRAPH_API int qgraph_graph_unregister(struct qgraph_session *s, uint64_t handle)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__FreeGraph fg = QGRAPH__FREE_GRAPH__INIT;

	if (!s)
		return -EINVAL;
	fg.graph = handle;
	req.body_case = QGRAPH__REQUEST__BODY_FREE_GRAPH;
	req.free_graph = &fg;
	return call(s, &req, NULL);
}

QGRAPH_API ssize_t qgraph_stats(struct qgraph_session *s, char *buf, size_t len)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__StatsRequest sr = QGRAPH__STATS_REQUEST__INIT;
	struct qgraph_result res;
	size_t at = 0;
	uint64_t id;
	int r;

	if (!s || !buf || !len)
		return -EINVAL;
	buf[0] = 0;
	sr.all_sessions = 1;
	req.body_case = QGRAPH__REQUEST__BODY_STATS;
	req.stats = &sr;
	/* page after page: the daemon-wide lines of the first, the sessions and models of each */
	for (int first = 1;; first = 0) {
		struct done page = { 0 };
		if ((r = send_request(s, &req, 1, &id)) || (r = wait_for(s, id, -1, &res, &page)))
			return r;
		if (!page.stats)
			return res.status ? res.status : qg_client_fail(s, -ENOMEM, "no memory for the stats");
		const char *text = page.stats + (first ? 0 : page.stats_lists);
		size_t n = strlen(text);
		if (n >= len - at)
			n = len - at - 1;
		memcpy(buf + at, text, n);
		at += n;
		buf[at] = 0;
		free(page.stats);
		if (!page.stats_more || at + 1 >= len)
			break;
		if (page.next_session < sr.first_session ||
		    (page.next_session == sr.first_session && page.next_model <= sr.first_model))
			return qg_client_fail(s, -EPROTO, "the daemon's stats pages do not move on");
		sr.first_session = page.next_session;
		sr.first_model = page.next_model;
	}
	return (ssize_t)at;
}
