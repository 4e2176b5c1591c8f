/*
 * hotpath-test.c - the hand-written codecs of the round trip against
 * protobuf-c: the packers write protobuf-c's bytes, the unpackers read
 * them back, and on mutated bytes whatever the fast unpackers accept,
 * protobuf-c decodes to the same values (what they refuse is left to it).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hotpath.h"
#include "wire-util.h"
#include "tap.h"

static struct tap_rng rng = { 20261203 };

/* Values that stress varints: zero, one byte, the edges of 32 and 64 bits. */
static uint64_t rand_u64(void)
{
	static const uint64_t edge[] = { 0, 1, 127, 128, 16383, 16384, UINT32_MAX, (uint64_t)UINT32_MAX + 1,
					 INT64_MAX, UINT64_MAX };
	unsigned long long r = tap_rand(&rng);

	switch (r % 4) {
	case 0: return edge[(r >> 8) % (sizeof edge / sizeof *edge)];
	case 1: return (r >> 8) & 0xff;
	case 2: return (r >> 8) & 0xffffffu;
	default: return tap_rand(&rng);
	}
}

/* ------------------------------------------------------------ requests */

struct run_sample {
	Qgraph__Request req;
	Qgraph__RunGraph run;
	Qgraph__EventRef ev[2][20], *evp[2][20];
};

static void run_random(struct run_sample *s)
{
	qgraph__request__init(&s->req);
	qgraph__run_graph__init(&s->run);
	s->req.request_id = rand_u64();
	s->req.body_case = QGRAPH__REQUEST__BODY_RUN;
	s->req.run = &s->run;
	s->run.graph = rand_u64();
	s->run.timeout_ms = (uint32_t)rand_u64();
	for (int k = 0; k < 2; k++) {
		size_t n = tap_rand(&rng) % 4 == 0 ? tap_rand(&rng) % 21 : tap_rand(&rng) % 3;
		for (size_t i = 0; i < n; i++) {
			qgraph__event_ref__init(&s->ev[k][i]);
			s->ev[k][i].index = (uint32_t)rand_u64();
			s->ev[k][i].value = rand_u64();
			s->evp[k][i] = &s->ev[k][i];
		}
		if (k == 0) {
			s->run.n_wait = n;
			s->run.wait = s->evp[0];
		} else {
			s->run.n_record = n;
			s->run.record = s->evp[1];
		}
	}
}

static int requests_equal(const Qgraph__Request *a, const Qgraph__Request *b)
{
	if (a->request_id != b->request_id || a->body_case != b->body_case || a->body_case != QGRAPH__REQUEST__BODY_RUN)
		return 0;
	const Qgraph__RunGraph *x = a->run, *y = b->run;
	return x->graph == y->graph && x->timeout_ms == y->timeout_ms &&
	       events_equal(x->wait, x->n_wait, y->wait, y->n_wait) &&
	       events_equal(x->record, x->n_record, y->record, y->n_record);
}

/* one bump allocator per decoder, to compare their results */
static struct bump bump_hot, bump_pbc;
static ProtobufCAllocator alloc_hot = { .alloc = bump_alloc, .free = bump_free, .allocator_data = &bump_hot };
static ProtobufCAllocator alloc_pbc = { .alloc = bump_alloc, .free = bump_free, .allocator_data = &bump_pbc };

static void test_requests(void)
{
	uint8_t a[1024], b[1024];
	int same = 1, back = 1, id = 1, n = 3000;

	for (int i = 0; i < n; i++) {
		struct run_sample s;
		run_random(&s);
		size_t la = qg_hot_pack_request(&s.req, a, sizeof a);
		size_t lb = qgraph__request__pack(&s.req, b);
		same &= la == lb && memcmp(a, b, la) == 0;
		bump_hot.used = 0;
		Qgraph__Request *r = qg_hot_unpack_request(&alloc_hot, a, la);
		back &= r && requests_equal(r, &s.req);
		id &= qg_hot_request_id(b, lb) == s.req.request_id;
	}
	tap_ok(same, "%d random runs: the hand-packed bytes are protobuf-c's", n);
	tap_ok(back, "and the hand unpacker reads them back");
	tap_ok(id, "qg_hot_request_id finds each one's request id without decoding it");

	/* the short cases: nothing at all set, and a buffer one byte short */
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__RunGraph run = QGRAPH__RUN_GRAPH__INIT;
	req.body_case = QGRAPH__REQUEST__BODY_RUN;
	req.run = &run;
	size_t la = qg_hot_pack_request(&req, a, sizeof a), lb = qgraph__request__pack(&req, b);
	tap_ok(la == lb && la == 2 && memcmp(a, b, la) == 0, "an empty run: %zu bytes, as protobuf-c's", la);
	req.request_id = 300;
	run.graph = 5;
	lb = qgraph__request__pack(&req, b);
	tap_ok(qg_hot_pack_request(&req, a, lb - 1) == 0 && qg_hot_pack_request(&req, a, lb) == lb,
	       "a buffer a byte short: nothing packed");
	Qgraph__FreeGraph fg = QGRAPH__FREE_GRAPH__INIT;
	Qgraph__Request other = QGRAPH__REQUEST__INIT;
	other.body_case = QGRAPH__REQUEST__BODY_FREE_GRAPH;
	other.free_graph = &fg;
	tap_ok(qg_hot_pack_request(&other, a, sizeof a) == 0, "another request: left to protobuf-c");

	/* what protobuf-c reads but the hand unpacker leaves to it */
	static const struct {
		const char *what;
		uint8_t bytes[16];
		size_t len;
	} leave[] = {
		{ "the run's fields out of order", { 0x08, 0x01, 0x2a, 0x04, 0x20, 0x05, 0x08, 0x07 }, 8 },
		{ "the request id after the body", { 0x2a, 0x02, 0x08, 0x07, 0x08, 0x01 }, 6 },
		{ "an unknown field", { 0x08, 0x01, 0x2a, 0x04, 0x08, 0x07, 0x38, 0x01 }, 8 },
		{ "a field given twice", { 0x08, 0x01, 0x2a, 0x04, 0x08, 0x07, 0x08, 0x09 }, 8 },
		{ "record before wait", { 0x2a, 0x08, 0x1a, 0x02, 0x08, 0x01, 0x12, 0x02, 0x08, 0x02 }, 10 },
		{ "a request without a body", { 0x08, 0x01 }, 2 },
	};
	/* the request id read past other fields, or not at all where the bytes cannot tell */
	static const struct {
		const char *what;
		uint8_t bytes[16];
		size_t len;
		uint64_t id;
	} ids[] = {
		{ "after the body", { 0x2a, 0x02, 0x08, 0x07, 0x08, 0x01 }, 6, 1 },
		{ "after a 64-bit field", { 0x11, 1, 2, 3, 4, 5, 6, 7, 8, 0x08, 0x05 }, 11, 5 },
		{ "after a 32-bit field", { 0x15, 1, 2, 3, 4, 0x08, 0xac, 0x02 }, 8, 300 },
		{ "none: a length past the end", { 0x2a, 0x10, 0x08, 0x07, 0x08, 0x01 }, 6, 0 },
		{ "none: a group's wire type", { 0x0b, 0x08, 0x01 }, 3, 0 },
		{ "none: a varint cut short", { 0x08, 0x80 }, 2, 0 },
		{ "none: no bytes", { 0 }, 0, 0 },
	};
	for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
		uint64_t got = qg_hot_request_id(ids[i].bytes, ids[i].len);
		tap_ok(got == ids[i].id, "request id %s: %llu", ids[i].what, (unsigned long long)got);
	}

	for (size_t i = 0; i < sizeof leave / sizeof *leave; i++) {
		bump_hot.used = bump_pbc.used = 0;
		Qgraph__Request *h = qg_hot_unpack_request(&alloc_hot, leave[i].bytes, leave[i].len);
		Qgraph__Request *p = qgraph__request__unpack(&alloc_pbc, leave[i].len, leave[i].bytes);
		tap_ok(!h && p, "%s: protobuf-c reads it, the hand unpacker leaves it", leave[i].what);
	}
}

/* ------------------------------------------------------------ completions */

struct completion_sample {
	Qgraph__Completion c;
	Qgraph__Timings t;
	char error[80];
};

static void completion_random(struct completion_sample *s)
{
	static const int32_t statuses[] = { 0, 1, 2, 3, 7, 9, -1, INT32_MAX, INT32_MIN };

	qgraph__completion__init(&s->c);
	qgraph__timings__init(&s->t);
	s->c.request_id = rand_u64();
	s->c.status = (Qgraph__Status)statuses[tap_rand(&rng) % (sizeof statuses / sizeof *statuses)];
	switch (tap_rand(&rng) % 3) {
	case 0: s->c.error = NULL; break;
	case 1: s->c.error = ""; break;
	default: {
		size_t n = tap_rand(&rng) % (sizeof s->error - 1);
		for (size_t i = 0; i < n; i++)
			s->error[i] = (char)(' ' + tap_rand(&rng) % 95);
		s->error[n] = 0;
		s->c.error = s->error;
	}
	}
	if (tap_rand(&rng) % 3) {
		s->t.queued_ns = rand_u64();
		s->t.decode_ns = rand_u64();
		s->t.alloc_ns = rand_u64();
		s->t.compute_ns = rand_u64();
		s->t.total_ns = rand_u64();
		s->c.timings = &s->t;
	}
	s->c.handle = rand_u64();
	s->c.stored_type = (Qgraph__Type)(tap_rand(&rng) % 4 ? (int32_t)(tap_rand(&rng) % 9) : -2);
	s->c.rows = (int64_t)rand_u64();
	s->c.cols = (int64_t)rand_u64();
}

/* OUT (the hand unpacker's) against C (protobuf-c's, or the original). */
static int completion_matches(const struct qg_hot_completion *h, const Qgraph__Completion *c)
{
	size_t elen = c->error ? strlen(c->error) : 0;
	size_t hlen = h->error ? strnlen(h->error, h->error_len) : 0;
	const Qgraph__Timings *t = c->timings;

	return h->request_id == c->request_id && h->status == (int32_t)c->status && hlen == elen &&
	       (elen == 0 || memcmp(h->error, c->error, elen) == 0) && h->has_timings == (t != NULL) &&
	       (!t || (h->queued_ns == t->queued_ns && h->decode_ns == t->decode_ns && h->alloc_ns == t->alloc_ns &&
		       h->compute_ns == t->compute_ns && h->total_ns == t->total_ns)) &&
	       h->handle == c->handle && h->stored_type == (int32_t)c->stored_type && h->rows == c->rows &&
	       h->cols == c->cols;
}

static void test_completions(void)
{
	uint8_t a[512], b[512];
	int same = 1, back = 1, n = 3000;

	for (int i = 0; i < n; i++) {
		struct completion_sample s;
		completion_random(&s);
		size_t la = qg_hot_pack_completion(&s.c, a, sizeof a);
		size_t lb = qgraph__completion__pack(&s.c, b);
		same &= la == lb && memcmp(a, b, la) == 0;
		struct qg_hot_completion h;
		back &= qg_hot_unpack_completion(a, la, &h) == 0 && completion_matches(&h, &s.c);
	}
	tap_ok(same, "%d random completions: the hand-packed bytes are protobuf-c's", n);
	tap_ok(back, "and the hand unpacker reads them back");

	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	Qgraph__Stats st = QGRAPH__STATS__INIT;
	c.request_id = 9;
	c.stats = &st;
	size_t lb = qgraph__completion__pack(&c, b);
	struct qg_hot_completion h;
	tap_ok(qg_hot_pack_completion(&c, a, sizeof a) == 0 && qg_hot_unpack_completion(b, lb, &h) == -1,
	       "a completion with stats: left to protobuf-c both ways");
	c.stats = NULL;
	c.error = "a clear message";
	lb = qgraph__completion__pack(&c, b);
	tap_ok(qg_hot_pack_completion(&c, a, lb - 1) == 0, "a buffer a byte short: nothing packed");
	static const uint8_t swapped[] = { 0x10, 0x01, 0x08, 0x05 };	/* status before the id */
	Qgraph__Completion *p = qgraph__completion__unpack(NULL, sizeof swapped, swapped);
	tap_ok(qg_hot_unpack_completion(swapped, sizeof swapped, &h) == -1 && p && p->request_id == 5,
	       "fields out of order: left to protobuf-c");
	if (p)
		qgraph__completion__free_unpacked(p, NULL);
}

/* ------------------------------------------------------------ mutations */

/* Flip, overwrite, drop or insert a few bytes of BUF (LEN, room for CAP). */
static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
	int edits = 1 + (int)(tap_rand(&rng) % 3);

	for (int e = 0; e < edits; e++) {
		size_t at = len ? tap_rand(&rng) % len : 0;
		switch (tap_rand(&rng) % 5) {
		case 0:
			if (len)
				buf[at] ^= (uint8_t)(1u << (tap_rand(&rng) % 8));
			break;
		case 1:
			if (len)
				buf[at] = (uint8_t)tap_rand(&rng);
			break;
		case 2:
			len = at;	/* truncate */
			break;
		case 3:
			if (len) {
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
			}
			break;
		default:
			if (len < cap) {
				memmove(buf + at + 1, buf + at, len - at);
				buf[at] = (uint8_t)tap_rand(&rng);
				len++;
			}
			break;
		}
	}
	return len;
}

static void test_mutations(void)
{
	long rounds = 20000L * tap_scale();
	long req_hot = 0, req_bad = 0, comp_hot = 0, comp_bad = 0;
	uint8_t buf[1100];

	for (long i = 0; i < rounds; i++) {
		struct run_sample s;
		run_random(&s);
		size_t len = mutate(buf, qgraph__request__pack(&s.req, buf), sizeof buf);
		bump_hot.used = bump_pbc.used = 0;
		Qgraph__Request *h = qg_hot_unpack_request(&alloc_hot, buf, len);
		if (!h)
			continue;
		req_hot++;
		Qgraph__Request *p = qgraph__request__unpack(&alloc_pbc, len, buf);
		req_bad += !p || !requests_equal(h, p);
	}
	tap_ok(req_hot > rounds / 20 && req_bad == 0,
	       "%ld mutated runs: %ld taken by the hand unpacker, every one as protobuf-c reads it (%ld not)", rounds,
	       req_hot, req_bad);

	for (long i = 0; i < rounds; i++) {
		struct completion_sample s;
		completion_random(&s);
		size_t len = mutate(buf, qgraph__completion__pack(&s.c, buf), sizeof buf);
		struct qg_hot_completion h;
		if (qg_hot_unpack_completion(buf, len, &h))
			continue;
		comp_hot++;
		Qgraph__Completion *p = qgraph__completion__unpack(NULL, len, buf);
		comp_bad += !p || !completion_matches(&h, p);
		if (p)
			qgraph__completion__free_unpacked(p, NULL);
	}
	tap_ok(comp_hot > rounds / 20 && comp_bad == 0,
	       "%ld mutated completions: %ld taken by the hand unpacker, every one as protobuf-c reads it (%ld not)",
	       rounds, comp_hot, comp_bad);
}

int main(void)
{
	test_requests();
	test_completions();
	test_mutations();
	return tap_done();
}
