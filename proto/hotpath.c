/*
 * hotpath.c - hand-written codecs for the messages of a round trip (see
 * hotpath.h).  Field numbers and wire types are those of qgraph.proto; the
 * tests hold the two together.
 */
#include "config.h"

#include <string.h>

#include "hotpath.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

#define TAG(field, wt) ((uint8_t)((field) << 3 | (wt)))

/* ------------------------------------------------------------ writing */

/* Bytes of V as a varint: seven bits a byte. */
static inline size_t varint_size(uint64_t v)
{
	return (size_t)(64 - __builtin_clzll(v | 1) + 6) / 7;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	if (v < 0x80) {	/* most of what a round trip sends: ids, small counts */
		*p = (uint8_t)v;
		return p + 1;
	}
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/*
 * A varint field as protobuf-c writes a proto3 scalar: left out when zero.
 * Signed 32-bit values (enums) are sign-extended to 64 bits, as the
 * protobuf encoding of int32 says: a negative one takes ten bytes.
 */
static inline size_t field_size(uint64_t v)
{
	return v ? 1 + varint_size(v) : 0;
}

static inline uint8_t *put_field(uint8_t *p, unsigned field, uint64_t v)
{
	if (!v)
		return p;
	*p++ = TAG(field, WT_VARINT);
	return put_varint(p, v);
}

static inline uint64_t enum_bits(int32_t v)
{
	return (uint64_t)(int64_t)v;
}

static inline size_t event_size(const Qgraph__EventRef *e)
{
	return field_size(e->index) + field_size(e->value);
}

static inline size_t events_size(Qgraph__EventRef *const *ev, size_t n, int *ok)
{
	size_t sz = 0;

	for (size_t i = 0; i < n; i++) {
		if (!ev[i]) {
			*ok = 0;
			return 0;
		}
		size_t e = event_size(ev[i]);
		sz += 1 + varint_size(e) + e;
	}
	return sz;
}

static inline uint8_t *put_events(uint8_t *p, unsigned field, Qgraph__EventRef *const *ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		*p++ = TAG(field, WT_LEN);
		p = put_varint(p, event_size(ev[i]));
		p = put_field(p, 1, ev[i]->index);
		p = put_field(p, 2, ev[i]->value);
	}
	return p;
}

size_t qg_hot_pack_request(const Qgraph__Request *r, uint8_t *buf, size_t cap)
{
	int ok = 1;

	if (!r || r->body_case != QGRAPH__REQUEST__BODY_RUN || !r->run)
		return 0;
	const Qgraph__RunGraph *g = r->run;
	size_t body = field_size(g->graph) + events_size(g->wait, g->n_wait, &ok) +
		      events_size(g->record, g->n_record, &ok) + field_size(g->timeout_ms);
	size_t total = field_size(r->request_id) + 1 + varint_size(body) + body;
	if (!ok || total > cap)
		return 0;
	uint8_t *p = put_field(buf, 1, r->request_id);
	*p++ = TAG(5, WT_LEN);
	p = put_varint(p, body);
	p = put_field(p, 1, g->graph);
	p = put_events(p, 2, g->wait, g->n_wait);
	p = put_events(p, 3, g->record, g->n_record);
	p = put_field(p, 4, g->timeout_ms);
	return (size_t)(p - buf);
}

static inline size_t timings_size(const Qgraph__Timings *t)
{
	return field_size(t->queued_ns) + field_size(t->decode_ns) + field_size(t->alloc_ns) +
	       field_size(t->compute_ns) + field_size(t->total_ns);
}

size_t qg_hot_pack_completion(const Qgraph__Completion *c, uint8_t *buf, size_t cap)
{
	if (!c || c->stats)
		return 0;
	size_t elen = c->error ? strlen(c->error) : 0;	/* protobuf-c leaves out NULL and "" alike */
	size_t tlen = c->timings ? timings_size(c->timings) : 0;
	size_t total = field_size(c->request_id) + field_size(enum_bits(c->status)) +
		       (elen ? 1 + varint_size(elen) + elen : 0) + (c->timings ? 1 + varint_size(tlen) + tlen : 0) +
		       field_size(c->handle) + field_size(enum_bits(c->stored_type)) + field_size((uint64_t)c->rows) +
		       field_size((uint64_t)c->cols);
	if (total > cap)
		return 0;
	uint8_t *p = put_field(buf, 1, c->request_id);
	p = put_field(p, 2, enum_bits(c->status));
	if (elen) {
		*p++ = TAG(3, WT_LEN);
		p = put_varint(p, elen);
		memcpy(p, c->error, elen);
		p += elen;
	}
	if (c->timings) {
		const Qgraph__Timings *t = c->timings;
		*p++ = TAG(4, WT_LEN);
		p = put_varint(p, tlen);
		p = put_field(p, 1, t->queued_ns);
		p = put_field(p, 2, t->decode_ns);
		p = put_field(p, 3, t->alloc_ns);
		p = put_field(p, 4, t->compute_ns);
		p = put_field(p, 5, t->total_ns);
	}
	p = put_field(p, 5, c->handle);
	p = put_field(p, 7, enum_bits(c->stored_type));
	p = put_field(p, 8, (uint64_t)c->rows);
	p = put_field(p, 9, (uint64_t)c->cols);
	return (size_t)(p - buf);
}

/* ------------------------------------------------------------ reading */

/* A cursor over bytes that are read once, front to back. */
struct rd {
	const uint8_t *p, *end;
};

/*
 * A varint of at most MAX bytes, read as protobuf-c reads it (the bits past
 * 64 dropped; a 32-bit field keeps the low 32 of them).  0, or -1 when it
 * runs past the end or past MAX bytes.
 */
static inline int get_varint(struct rd *r, unsigned max, uint64_t *v)
{
	uint64_t x = 0;

	/* one and two bytes first: ids, lengths and most timings */
	if (r->p < r->end && r->p[0] < 0x80) {
		*v = *r->p++;
		return 0;
	}
	if (max >= 2 && r->end - r->p >= 2 && r->p[1] < 0x80) {
		*v = (uint64_t)(r->p[0] & 0x7f) | (uint64_t)r->p[1] << 7;
		r->p += 2;
		return 0;
	}

	for (unsigned i = 0; i < max && r->p + i < r->end; i++) {
		uint8_t b = r->p[i];
		x |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			r->p += i + 1;
			*v = x;
			return 0;
		}
	}
	return -1;
}

/* The next field's tag (one byte: field numbers here are below 16), without taking it; 0 at the end. */
static inline unsigned peek_tag(const struct rd *r)
{
	return r->p < r->end ? r->p[0] : 0;
}

/* Take a varint field FIELD if it comes next: 1 taken, 0 not there, -1 malformed. */
static inline int take_varint(struct rd *r, unsigned field, uint64_t *v)
{
	if (peek_tag(r) != TAG(field, WT_VARINT))
		return 0;
	r->p++;
	return get_varint(r, 10, v) ? -1 : 1;
}

/* Take a length-delimited field FIELD if it comes next, as a sub-cursor. */
static inline int take_len(struct rd *r, unsigned field, struct rd *sub)
{
	uint64_t n;

	if (peek_tag(r) != TAG(field, WT_LEN))
		return 0;
	r->p++;
	if (get_varint(r, 5, &n) || n > (uint64_t)(r->end - r->p))
		return -1;	/* protobuf-c reads a length in at most five bytes, too */
	sub->p = r->p;
	sub->end = r->p + n;
	r->p += n;
	return 1;
}

/* The fields of an EventRef, in order; 0, or -1 for anything else. */
static inline int get_event(struct rd *r, uint32_t *index, uint64_t *value)
{
	uint64_t v = 0;

	if (take_varint(r, 1, &v) < 0)
		return -1;
	*index = (uint32_t)v;
	v = 0;
	if (take_varint(r, 2, &v) < 0)
		return -1;
	*value = v;
	return r->p == r->end ? 0 : -1;
}

/* How many FIELD entries come next, each a well-formed EventRef: R moves past them.  -1 if one is not. */
static inline long count_events(struct rd *r, unsigned field)
{
	long n = 0;
	struct rd e = { NULL, NULL };
	int k;
	uint32_t i;
	uint64_t v;

	while ((k = take_len(r, field, &e)) == 1) {
		if (get_event(&e, &i, &v))
			return -1;
		n++;
	}
	return k < 0 ? -1 : n;
}

uint64_t qg_hot_request_id(const uint8_t *buf, size_t len)
{
	struct rd r = { buf, buf + len };
	uint64_t key, v;

	while (r.p < r.end) {
		if (get_varint(&r, 10, &key))
			return 0;
		switch (key & 7) {
		case WT_VARINT:
			if (get_varint(&r, 10, &v))
				return 0;
			if (key >> 3 == 1)
				return v;
			break;
		case WT_I64:
			if (r.end - r.p < 8)
				return 0;
			r.p += 8;
			break;
		case WT_LEN:
			if (get_varint(&r, 10, &v) || v > (uint64_t)(r.end - r.p))
				return 0;
			r.p += v;
			break;
		case WT_I32:
			if (r.end - r.p < 4)
				return 0;
			r.p += 4;
			break;
		default:
			return 0;
		}
	}
	return 0;
}

static inline void *alloc_of(ProtobufCAllocator *a, size_t n)
{
	return a->alloc(a->allocator_data, n);
}

/* Read the next N entries of FIELD into *OUT, allocated from A.  0 or -1. */
static inline int read_events(struct rd *r, unsigned field, long n, ProtobufCAllocator *a, Qgraph__EventRef ***out)
{
	if (n == 0)
		return 0;
	Qgraph__EventRef **ptrs = alloc_of(a, (size_t)n * sizeof *ptrs);
	Qgraph__EventRef *ev = alloc_of(a, (size_t)n * sizeof *ev);
	if (!ptrs || !ev)
		return -1;
	for (long k = 0; k < n; k++) {
		struct rd e = { NULL, NULL };
		qgraph__event_ref__init(&ev[k]);
		take_len(r, field, &e);	/* counted and checked above */
		get_event(&e, &ev[k].index, &ev[k].value);
		ptrs[k] = &ev[k];
	}
	*out = ptrs;
	return 0;
}

Qgraph__Request *qg_hot_unpack_request(ProtobufCAllocator *alloc, const uint8_t *buf, size_t len)
{
	struct rd r = { buf, buf + len }, g;
	uint64_t id = 0, graph = 0, timeout = 0;

	if (!alloc || !buf || take_varint(&r, 1, &id) < 0 || take_len(&r, 5, &g) != 1 || r.p != r.end)
		return NULL;
	if (take_varint(&g, 1, &graph) < 0)
		return NULL;
	/* counted and checked first, read once the structures are allocated */
	struct rd waits = g, records;
	long n_wait = count_events(&g, 2);
	records = g;
	long n_record = n_wait < 0 ? -1 : count_events(&g, 3);
	if (n_record < 0 || take_varint(&g, 4, &timeout) < 0 || g.p != g.end)
		return NULL;	/* something protobuf-c must judge */

	Qgraph__Request *req = alloc_of(alloc, sizeof *req);
	Qgraph__RunGraph *run = alloc_of(alloc, sizeof *run);
	if (!req || !run)
		return NULL;
	qgraph__request__init(req);
	qgraph__run_graph__init(run);
	req->request_id = id;
	req->body_case = QGRAPH__REQUEST__BODY_RUN;
	req->run = run;
	run->graph = graph;
	run->timeout_ms = (uint32_t)timeout;
	if (read_events(&waits, 2, n_wait, alloc, &run->wait) || read_events(&records, 3, n_record, alloc, &run->record))
		return NULL;
	run->n_wait = (size_t)n_wait;
	run->n_record = (size_t)n_record;
	return req;
}

int qg_hot_unpack_completion(const uint8_t *buf, size_t len, struct qg_hot_completion *out)
{
	struct rd r = { buf, buf + len }, sub;
	uint64_t v;
	int k;

	if (!buf || !out)
		return -1;
	memset(out, 0, sizeof *out);
	if (take_varint(&r, 1, &out->request_id) < 0)
		return -1;
	v = 0;
	if (take_varint(&r, 2, &v) < 0)
		return -1;
	out->status = (int32_t)(uint32_t)v;
	if ((k = take_len(&r, 3, &sub)) < 0)
		return -1;
	if (k) {
		out->error = (const char *)sub.p;
		out->error_len = (size_t)(sub.end - sub.p);
	}
	if ((k = take_len(&r, 4, &sub)) < 0)
		return -1;
	if (k) {
		out->has_timings = 1;
		if (take_varint(&sub, 1, &out->queued_ns) < 0 || take_varint(&sub, 2, &out->decode_ns) < 0 ||
		    take_varint(&sub, 3, &out->alloc_ns) < 0 || take_varint(&sub, 4, &out->compute_ns) < 0 ||
		    take_varint(&sub, 5, &out->total_ns) < 0 || sub.p != sub.end)
			return -1;
	}
	if (take_varint(&r, 5, &out->handle) < 0)
		return -1;
	v = 0;
	if (take_varint(&r, 7, &v) < 0)
		return -1;
	out->stored_type = (int32_t)(uint32_t)v;
	v = 0;
	if (take_varint(&r, 8, &v) < 0)
		return -1;
	out->rows = (int64_t)v;
	v = 0;
	if (take_varint(&r, 9, &v) < 0)
		return -1;
	out->cols = (int64_t)v;
	return r.p == r.end ? 0 : -1;	/* stats, or anything else: protobuf-c's to read */
}
