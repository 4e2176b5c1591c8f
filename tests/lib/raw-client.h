/*
 * raw-client.h - a client that speaks qgraphd's protocol by hand, for tests
 * that need what libqgraph does not do: an upload held open between its
 * chunks, a request with its own time-out, a record pushed without waiting
 * for its answer, a Hello of the test's own bytes.  The one raw client of
 * the tests (hostile-test, door-test, quota and upload tests use it).
 */
#ifndef QG_TESTS_RAW_CLIENT_H
#define QG_TESTS_RAW_CLIENT_H

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "doorbell.h"
#include "qgraph.pb-c.h"
#include "region.h"
#include "ring.h"
#include "shm.h"
#include "sock.h"
#include "wire.h"

struct raw {
	int sock, bell;
	struct qg_region_layout l;
	unsigned char *base, *arena;
	struct qg_ring submit, complete;
	char error[512];
};

/* What the daemon answered a record with. */
struct raw_reply {
	int status;		/* Qgraph__Status, or -errno when no answer came */
	uint64_t request_id, handle;
	int stored_type;
	int sessions_listed;	/* stats: the sessions listed (-1: no stats) */
	unsigned sessions_hidden;
	char error[512];
};

/*
 * Connect to the daemon at SOCK saying Hello: protocol PROTOCOL, client
 * NAME, an arena of ARENA bytes; or, if HELLO_BYTES is not NULL, those
 * HELLO_LEN bytes instead of a Hello.  0, or -errno (R->error says why
 * when the daemon did).
 */
__attribute__((unused))
static int raw_connect_hello(struct raw *r, const char *sock, int protocol, const char *name, uint64_t arena,
			     const void *hello_bytes, size_t hello_len)
{
	uint8_t buf[8192];
	int fds[2], nfds;

	memset(r, 0, sizeof *r);
	r->bell = -1;
	r->sock = qg_sock_connect(sock);
	if (r->sock < 0)
		return r->sock;
	Qgraph__Hello h = QGRAPH__HELLO__INIT;
	h.protocol = protocol;
	h.client_name = (char *)name;
	h.arena_bytes = arena;
	size_t len = hello_bytes ? hello_len : qgraph__hello__pack(&h, buf);
	qg_sock_send(r->sock, hello_bytes ? hello_bytes : buf, len, NULL, 0);
	struct pollfd p = { .fd = r->sock, .events = POLLIN };
	if (poll(&p, 1, 5000) != 1)
		return -ETIMEDOUT;
	ssize_t n = qg_sock_recv(r->sock, buf, sizeof buf, fds, 2, &nfds);
	if (n <= 0)
		return n == 0 ? -ECONNRESET : (int)n;
	Qgraph__Welcome *w = qgraph__welcome__unpack(NULL, (size_t)n, buf);
	if (!w)
		return -EPROTO;
	if ((w->error && *w->error) || !w->region || nfds != 2) {
		snprintf(r->error, sizeof r->error, "%s", w->error ? w->error : "no region");
		qgraph__welcome__free_unpacked(w, NULL);
		return -EPROTO;
	}
	struct qg_region_layout l;
	struct qg_region rg;
	qg_wire_layout_unpack(w->region, &l);
	qgraph__welcome__free_unpacked(w, NULL);
	if (qg_region_attach(fds[0], &l, &rg))
		return -EPROTO;
	close(fds[0]);
	r->bell = fds[1];
	r->l = rg.layout;
	r->base = rg.base;
	r->arena = rg.arena;
	r->submit = rg.submit;
	r->complete = rg.complete;
	return 0;
}

/* Connect to the daemon at SOCK with an arena of ARENA bytes.  0, or -errno (R->error says why). */
__attribute__((unused))
static int raw_connect(struct raw *r, const char *sock, uint64_t arena)
{
	return raw_connect_hello(r, sock, QGRAPH__PROTOCOL__PROTOCOL_V1, "raw", arena, NULL, 0);
}

__attribute__((unused))
static void raw_close(struct raw *r)
{
	if (r->base)
		qg_shm_unmap(r->base, r->l.region_bytes);
	if (r->sock >= 0)
		close(r->sock);
	if (r->bell >= 0)
		close(r->bell);
	r->base = NULL;
	r->sock = r->bell = -1;
}

/* Publish the record REC of LEN bytes, whatever it holds, and ring the doorbell if the daemon sleeps.  0 or -errno. */
__attribute__((unused))
static int raw_push(struct raw *r, const void *rec, size_t len)
{
	int err = qg_ring_push(&r->submit, rec, (uint32_t)len);

	qg_doorbell_ring_if_asleep((struct qg_region_header *)r->base, r->bell);
	return err;
}

/* Publish request REQ and ring the doorbell if the daemon sleeps, as libqgraph does.  0 or -errno. */
__attribute__((unused))
static int raw_send(struct raw *r, const Qgraph__Request *req)
{
	static uint8_t buf[1 << 16];
	size_t len = qgraph__request__get_packed_size(req);

	if (len > sizeof buf)
		return -EMSGSIZE;
	qgraph__request__pack(req, buf);
	return raw_push(r, buf, len);
}

/*
 * Send a RunGraph of graph 4242 (never registered) gated on event 7
 * reaching 1 (never recorded), for TIMEOUT_MS: a request that waits until
 * its time-out.  0 or -errno.
 */
__attribute__((unused))
static int raw_send_waiting(struct raw *r, uint64_t rid, uint32_t timeout_ms)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__RunGraph run = QGRAPH__RUN_GRAPH__INIT;
	Qgraph__EventRef ev = QGRAPH__EVENT_REF__INIT, *evp = &ev;

	ev.index = 7;
	ev.value = 1;
	run.graph = 4242;
	run.n_wait = 1;
	run.wait = &evp;
	run.timeout_ms = timeout_ms;
	req.request_id = rid;
	req.body_case = QGRAPH__REQUEST__BODY_RUN;
	req.run = &run;
	return raw_send(r, &req);
}

/* The next completion, waiting at most TIMEOUT_MS: 0 and *OUT, or -ETIMEDOUT / -EPROTO. */
__attribute__((unused))
static int raw_reply(struct raw *r, int timeout_ms, struct raw_reply *out)
{
	uint8_t buf[8192];

	memset(out, 0, sizeof *out);
	out->status = -ETIMEDOUT;
	for (int i = 0; i < timeout_ms; i++) {
		ssize_t n = qg_ring_pop(&r->complete, buf, sizeof buf);
		if (n == -EAGAIN) {
			usleep(1000);
			continue;
		}
		if (n < 0)
			return out->status = (int)n;
		Qgraph__Completion *c = qgraph__completion__unpack(NULL, (size_t)n, buf);
		if (!c)
			return out->status = -EPROTO;
		out->status = c->status;
		out->request_id = c->request_id;
		out->handle = c->handle;
		out->stored_type = c->stored_type;
		out->sessions_listed = c->stats ? (int)c->stats->n_session : -1;
		out->sessions_hidden = c->stats ? c->stats->sessions_hidden : 0;
		snprintf(out->error, sizeof out->error, "%s", c->error ? c->error : "");
		qgraph__completion__free_unpacked(c, NULL);
		return 0;
	}
	return -ETIMEDOUT;
}

/*
 * One chunk of a weights upload: LEN bytes at arena offset OFF, which are
 * bytes [AT, AT + LEN) of a ROWS x COLS matrix of SRC to be stored as
 * TARGET; UPLOAD 0 opens it.  The daemon's answer in *OUT; 0 or -errno.
 */
__attribute__((unused))
static int raw_upload_chunk(struct raw *r, uint64_t upload, int src, int target, int64_t rows, int64_t cols,
			    uint64_t off, uint64_t len, uint64_t at, int last, struct raw_reply *out)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__UploadWeights up = QGRAPH__UPLOAD_WEIGHTS__INIT;
	Qgraph__Span span = QGRAPH__SPAN__INIT;

	span.offset = off;
	span.bytes = len;
	up.upload_id = upload;
	up.src_type = (Qgraph__Type)src;
	up.target_type = (Qgraph__Type)target;
	up.rows = rows;
	up.cols = cols;
	up.chunk_offset = at;
	up.data = &span;
	up.last = last;
	req.request_id = at + 1;
	req.body_case = QGRAPH__REQUEST__BODY_UPLOAD;
	req.upload = &up;
	int e = raw_send(r, &req);
	return e ? e : raw_reply(r, 30000, out);
}

#endif /* QG_TESTS_RAW_CLIENT_H */
