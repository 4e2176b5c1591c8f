/*
 * hostile-test.c - a client that speaks the protocol by hand and breaks
 * every rule: each bad record is answered with an error completion (or,
 * where the ring itself is corrupt, the session is dropped), and another
 * client keeps working throughout.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon-util.h"
#include "doorbell.h"
#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "region.h"
#include "ring.h"
#include "shm.h"
#include "sock.h"
#include "raw-client.h"
#include "tap.h"
#include "wire.h"

static struct test_daemon d;

/* Connect by hand; HELLO_BYTES (if not NULL) replaces the Hello.  0 or -errno. */
static int hostile_connect(struct raw *r, int protocol, const void *hello_bytes, size_t hello_len)
{
	return raw_connect_hello(r, d.sock, protocol, "hostile", 1 << 20, hello_bytes, hello_len);
}

/* The daemon's answer to the next record: its status (and error text), or -errno. */
static int raw_answer(struct raw *r, char *err, size_t errlen)
{
	struct raw_reply rep;
	int e = raw_reply(r, 5000, &rep);

	if (errlen) {	/* cut to ERRLEN */
		size_t n = strnlen(rep.error, errlen - 1);
		memcpy(err, rep.error, n);
		err[n] = '\0';
	}
	return e ? e : rep.status;
}

static size_t pack_submit(Qgraph__Tensor **t, size_t n, uint8_t *buf)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__SubmitGraph sg = QGRAPH__SUBMIT_GRAPH__INIT;

	sg.n_tensors = n;
	sg.tensors = t;
	req.request_id = 77;
	req.body_case = QGRAPH__REQUEST__BODY_SUBMIT;
	req.submit = &sg;
	return qgraph__request__pack(&req, buf);
}

/*
 * Views sent by hand: a reshape of an arena input (a graph with nothing
 * for the allocator) and of an intermediate (placed by it), a strided
 * VIEW, each feeding an ADD whose result is checked; and VIEWs a client
 * should not be able to send: strides whose reach overflows, a row whose
 * elements are spaced unlike its source's, a view past its source.
 */
static int good_works(void);

/* Make T node OP of shape NE on sources SRC (N_SRC of them), an output to OUT if OUT is set. */
static void set_node(Qgraph__Tensor *t, int64_t *ne, Qgraph__Op op, uint32_t *src, size_t n_src, Qgraph__Span *out)
{
	t->ne = ne;
	t->op = op;
	t->src = src;
	t->n_src = n_src;
	t->flags = out ? 2 : 0;
	t->arena = out;
}

static void test_views(struct raw *r)
{
	Qgraph__Tensor t[4], *tp[4] = { &t[0], &t[1], &t[2], &t[3] };
	Qgraph__Span in = QGRAPH__SPAN__INIT, out = QGRAPH__SPAN__INIT;
	int64_t flat[2] = { 64, 1 }, square[2] = { 8, 8 };
	uint32_t s1[2] = { 0, 0 }, s2[2] = { 1, 1 }, s3[2] = { 2, 2 };
	float *arena = (float *)(void *)(r->base + r->l.arena_offset);
	uint8_t buf[4096];
	char err[256];

	for (int i = 0; i < 4; i++) {
		qgraph__tensor__init(&t[i]);
		t[i].n_ne = 2;
	}
	in.bytes = out.bytes = 256;
	out.offset = 4096;
	for (int i = 0; i < 64; i++)
		arena[i] = (float)i;

	/* x (64) -> reshape 8 x 8 -> y = that + that, in the arena */
	t[0].ne = flat;
	t[0].flags = 1;
	t[0].arena = &in;
	set_node(&t[1], square, QGRAPH__OP__OP_RESHAPE, s1, 1, NULL);
	set_node(&t[2], square, QGRAPH__OP__OP_ADD, s2, 2, &out);
	memset(arena + 1024, 0, 256);
	raw_push(r, buf, pack_submit(tp, 3, buf));
	int st = raw_answer(r, err, sizeof err), ok = st == 0;
	for (int i = 0; i < 64; i++)
		ok &= arena[1024 + i] == 2.0f * (float)i;
	tap_ok(ok, "a reshape of an arena input through the wire: right (%d %s)", st, err);

	/* x -> x + x (an intermediate) -> reshape 8 x 8 -> y = that + that */
	set_node(&t[1], flat, QGRAPH__OP__OP_ADD, s1, 2, NULL);
	set_node(&t[2], square, QGRAPH__OP__OP_RESHAPE, s2, 1, NULL);
	set_node(&t[3], square, QGRAPH__OP__OP_ADD, s3, 2, &out);
	memset(arena + 1024, 0, 256);
	raw_push(r, buf, pack_submit(tp, 4, buf));
	st = raw_answer(r, err, sizeof err);
	ok = st == 0;
	for (int i = 0; i < 64; i++)
		ok &= arena[1024 + i] == 4.0f * (float)i;
	tap_ok(ok, "a reshape of an intermediate through the wire: right (%d %s)", st, err);

	/* x (64) -> a VIEW of 4 rows of 8, 16 floats apart -> y = that + that (8 x 4) */
	int64_t four[2] = { 8, 4 };
	uint64_t nb[2] = { 4, 64 };
	Qgraph__Span out4 = QGRAPH__SPAN__INIT;
	out4.offset = 4096;
	out4.bytes = 128;
	set_node(&t[1], four, QGRAPH__OP__OP_VIEW, s1, 1, NULL);
	t[1].n_nb = 2;
	t[1].nb = nb;
	set_node(&t[2], four, QGRAPH__OP__OP_ADD, s2, 2, &out4);
	memset(arena + 1024, 0, 256);
	raw_push(r, buf, pack_submit(tp, 3, buf));
	st = raw_answer(r, err, sizeof err);
	ok = st == 0;
	for (int row = 0; row < 4; row++)
		for (int c = 0; c < 8; c++)
			ok &= arena[1024 + row * 8 + c] == 2.0f * (float)(row * 16 + c);
	tap_ok(ok, "a strided VIEW through the wire: right (%d %s)", st, err);

	static const struct {
		const char *what;
		uint64_t nb0, nb1, offset;
	} bad[] = {
		{ "a VIEW whose strides reach past 2^64", 4, UINT64_C(1) << 63, 0 },
		{ "a VIEW whose reach wraps around 2^64 to 34 bytes", 4, UINT64_C(0x5555555555555556), 0 },
		{ "a VIEW whose row elements are spaced unlike its source's", 8, 64, 0 },
		{ "a VIEW past the end of its source", 4, 64, 64 },
		{ "a VIEW starting past the end of its source", 4, 64, UINT64_MAX - 8 },
	};
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		nb[0] = bad[k].nb0;
		nb[1] = bad[k].nb1;
		t[1].view_offset = bad[k].offset;
		raw_push(r, buf, pack_submit(tp, 3, buf));
		st = raw_answer(r, err, sizeof err);
		tap_ok(st > 0 && strstr(err, "view") && good_works(), "%s: refused as a view (%s), others unaffected",
		       bad[k].what, err);
	}
	t[1].view_offset = 0;

	/* views whose values would be read off their alignment: refused, naming the element */
	static const struct {
		const char *what;
		uint64_t nb1, offset;
	} skew[] = {
		{ "a VIEW at an offset that is not a multiple of its 4-byte element", 64, 2 },
		{ "a VIEW at an odd offset", 64, 1 },
		{ "a VIEW whose row stride is not a multiple of its 4-byte element", 66, 0 },
	};
	nb[0] = 4;
	for (size_t k = 0; k < sizeof skew / sizeof skew[0]; k++) {
		nb[1] = skew[k].nb1;
		t[1].view_offset = skew[k].offset;
		raw_push(r, buf, pack_submit(tp, 3, buf));
		st = raw_answer(r, err, sizeof err);
		tap_ok(st > 0 && strstr(err, "view") && strstr(err, "not a multiple of the 4-byte element") && good_works(),
		       "%s: refused (%s), the daemon still serving", skew[k].what, err);
	}
	t[1].view_offset = 0;

	/* a 3-D view whose outer stride is off, and a view of f16 fed to MUL_MAT (its f16 path) at an odd offset */
	int64_t cube[3] = { 8, 2, 2 }, half[1] = { 64 }, wv[2] = { 8, 4 }, xv[2] = { 8, 1 }, yv[2] = { 4, 1 };
	uint64_t nb3[3] = { 4, 32, 66 }, nbh[2] = { 2, 16 };
	Qgraph__Span hsp = QGRAPH__SPAN__INIT, xsp = QGRAPH__SPAN__INIT, ysp = QGRAPH__SPAN__INIT;
	set_node(&t[1], cube, QGRAPH__OP__OP_VIEW, s1, 1, NULL);
	t[1].n_ne = t[1].n_nb = 3;
	t[1].nb = nb3;
	set_node(&t[2], cube, QGRAPH__OP__OP_ADD, s2, 2, &out4);
	t[2].n_ne = 3;
	raw_push(r, buf, pack_submit(tp, 3, buf));
	st = raw_answer(r, err, sizeof err);
	tap_ok(st > 0 && strstr(err, "stride 2 (66 bytes) is not a multiple") && good_works(),
	       "a 3-D VIEW whose outer stride is not a multiple of its element: refused (%s)", err);
	t[1].n_ne = t[2].n_ne = 2;
	hsp.bytes = 128;
	xsp.offset = 256;
	xsp.bytes = 32;
	ysp.offset = 4096;
	ysp.bytes = 16;
	t[0].type = QGRAPH__TYPE__TYPE_F16;
	t[0].ne = half;
	t[0].n_ne = 1;
	t[0].arena = &hsp;
	set_node(&t[1], wv, QGRAPH__OP__OP_VIEW, s1, 1, NULL);
	t[1].type = QGRAPH__TYPE__TYPE_F16;
	t[1].n_nb = 2;
	t[1].nb = nbh;
	t[1].view_offset = 1;
	qgraph__tensor__init(&t[2]);
	t[2].n_ne = 2;
	t[2].ne = xv;
	t[2].flags = 1;
	t[2].arena = &xsp;
	set_node(&t[3], yv, QGRAPH__OP__OP_MUL_MAT, (uint32_t[]){ 1, 2 }, 2, &ysp);
	t[3].n_ne = 2;
	raw_push(r, buf, pack_submit(tp, 4, buf));
	st = raw_answer(r, err, sizeof err);
	tap_ok(st > 0 && strstr(err, "not a multiple of the 2-byte element of f16") && good_works(),
	       "a VIEW of f16 at an odd offset, as MUL_MAT's weights: refused (%s)", err);
	t[1].view_offset = 2;
	raw_push(r, buf, pack_submit(tp, 4, buf));
	st = raw_answer(r, err, sizeof err);
	tap_ok(st == 0, "and at an even offset it runs (%d %s)", st, err);
	for (int i = 0; i < 4; i++)
		qgraph__tensor__init(&t[i]);
}

/*
 * ggml's ops sent by hand: a ROPE whose positions and op_params are right
 * runs; bent, each is refused with the reason (a mode it does not take,
 * more words or sources than a node holds, floats where words go, a
 * source that is not earlier, positions of the wrong count), and a
 * SET_ROWS result, a view of its destination, is no output.
 */
static void rope_graph(Qgraph__Tensor *t, int64_t *ne, uint32_t *src, int32_t *params, Qgraph__Span *sp)
{
	for (int i = 0; i < 3; i++) {
		qgraph__tensor__init(&t[i]);
		qgraph__span__init(&sp[i]);
		t[i].n_ne = 3;
		t[i].ne = &ne[3 * i];
	}
	ne[0] = 8, ne[1] = 2, ne[2] = 3;	/* x [8, 2 heads, 3 tokens] at 0 */
	ne[3] = 3, ne[4] = 1, ne[5] = 1;	/* positions [3] at 4096 */
	ne[6] = 8, ne[7] = 2, ne[8] = 3;	/* rope at 8192 */
	t[0].flags = 1;
	sp[0].bytes = 8 * 2 * 3 * 4;
	t[0].arena = &sp[0];
	t[1].type = QGRAPH__TYPE__TYPE_I32;
	t[1].n_ne = 1;
	t[1].flags = 1;
	sp[1].offset = 4096;
	sp[1].bytes = 12;
	t[1].arena = &sp[1];
	memset(params, 0, 16 * sizeof *params);
	params[1] = 8;	/* n_dims */
	params[2] = 2;	/* NeoX */
	float base = 10000.0f, one = 1.0f;
	memcpy(&params[5], &base, 4);
	memcpy(&params[6], &one, 4);
	memcpy(&params[8], &one, 4);
	src[0] = 0, src[1] = 1;
	t[2].op = QGRAPH__OP__OP_ROPE;
	t[2].src = src;
	t[2].n_src = 2;
	t[2].iparams = params;
	t[2].n_iparams = 9;
	t[2].flags = 2;
	sp[2].offset = 8192;
	sp[2].bytes = 8 * 2 * 3 * 4;
	t[2].arena = &sp[2];
}

static void test_ggml_ops(struct raw *r)
{
	Qgraph__Tensor t[4], *tp[4] = { &t[0], &t[1], &t[2], &t[3] };
	Qgraph__Span sp[4];
	int64_t ne[12];
	uint32_t src[8];
	int32_t params[20];
	float fparams[1] = { 1.0f };
	uint8_t buf[8192];
	char err[512];
	float *x = (float *)(void *)(r->base + r->l.arena_offset), *y = x + 8192 / 4;
	int32_t *pos = (int32_t *)(void *)(x + 4096 / 4);

	for (int i = 0; i < 48; i++)
		x[i] = (float)i;
	pos[0] = pos[1] = pos[2] = 0;	/* at position 0 a rotation is the identity */
	rope_graph(t, ne, src, params, sp);
	raw_push(r, buf, pack_submit(tp, 3, buf));
	int st = raw_answer(r, err, sizeof err);
	tap_ok(st == 0 && memcmp(x, y, 48 * 4) == 0, "a rope sent by hand runs, identity at position 0 (%d %s)", st, err);

	static const struct {
		const char *what, *says;
	} bends[] = {
		{ "rope mode 1", "op_params" }, { "17 words of op_params", "up to 16" },
		{ "seven sources", "at most 6" }, { "floats where ggml's words go", "nothing else" },
		{ "a source that is not earlier", "not an earlier" }, { "a position source of f32", "rope" },
		{ "a set_rows result as an output", "computed tensor" },
		{ "a rope flagged to run for its effect", "for its effect" },
		{ "an input flagged to run for its effect", "for its effect" },
	};
	for (size_t b = 0; b < sizeof bends / sizeof bends[0]; b++) {
		size_t n = 3;
		rope_graph(t, ne, src, params, sp);
		switch (b) {
		case 0: params[2] = 1; break;
		case 1: t[2].n_iparams = 17; break;
		case 2: for (int i = 0; i < 7; i++) src[i] = i % 2; t[2].n_src = 7; break;
		case 3: t[2].fparams = fparams; t[2].n_fparams = 1; break;
		case 4: src[1] = 2; break;
		case 5: t[1].type = QGRAPH__TYPE__TYPE_F32; break;
		case 6:	/* rows x[8, 6] into itself... at I32 indices: a view of its destination, so no output */
			ne[0] = 8, ne[1] = 6, ne[2] = 1;
			ne[3] = 6;
			sp[1].bytes = 24;
			ne[6] = 8, ne[7] = 6, ne[8] = 1;
			qgraph__tensor__init(&t[3]);
			qgraph__span__init(&sp[3]);
			t[3].n_ne = 3;
			t[3].ne = &ne[9];
			ne[9] = 8, ne[10] = 6, ne[11] = 1;
			t[3].flags = 1;
			sp[3].offset = 12288;
			sp[3].bytes = 8 * 6 * 4;
			t[3].arena = &sp[3];
			/* tensors: 0 rows, 1 indices, 3 the destination, then set_rows as tensor 2 needs it earlier */
			tp[2] = &t[3];
			tp[3] = &t[2];
			src[0] = 0, src[1] = 1, src[2] = 2;
			t[2].op = QGRAPH__OP__OP_SET_ROWS;
			t[2].n_src = 3;
			t[2].n_iparams = 0;
			sp[2].bytes = 8 * 6 * 4;
			n = 4;
			break;
		case 7: t[2].flags = 4 | 2; break;
		case 8: t[0].flags = 4 | 1; break;
		}
		raw_push(r, buf, pack_submit(tp, n, buf));
		st = raw_answer(r, err, sizeof err);
		tap_ok(st > 0 && strstr(err, bends[b].says) && good_works(), "%s: refused (%s), others unaffected",
		       bends[b].what, err);
		tp[2] = &t[2];
		tp[3] = &t[3];
	}
	for (int i = 0; i < 4; i++)
		qgraph__tensor__init(&t[i]);
}

/* The good client: a small graph, result checked. */
static struct qgraph_session *good;
static int good_works(void)
{
	unsigned char *arena = qgraph_arena(good, NULL);
	float *a = (float *)arena, *y = (float *)(arena + 4096);
	int64_t ne[1] = { 64 };
	uint64_t id;
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	struct qgraph_graph *g = qgraph_graph_new();
	static int round;

	for (int i = 0; i < 64; i++)
		a[i] = (float)(i + round);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_SCALE, qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, 0), -1, 2.0f),
			    4096);
	int ok = qgraph_submit(good, g, QGRAPH_SUBMIT_BLOCK, &id) == 0 && qgraph_wait(good, id, 5000, &res) == 0 &&
		 res.status == 0 && y[63] == 2.0f * (float)(63 + round);
	round++;
	qgraph_graph_free(g);
	return ok;
}

struct bad_case {
	const char *what;
	void (*make)(Qgraph__Tensor *t, int64_t *ne, uint32_t *src, Qgraph__Span *sp);
	size_t n;
};

/* A valid 3-tensor graph: y = x + x, x at arena 0, y at 4096; each case bends it. */
static void base_graph(Qgraph__Tensor *t, int64_t *ne, uint32_t *src, Qgraph__Span *sp)
{
	for (int i = 0; i < 3; i++) {
		qgraph__tensor__init(&t[i]);
		qgraph__span__init(&sp[i]);
		ne[2 * i] = 64;
		ne[2 * i + 1] = 1;
		t[i].n_ne = 2;
		t[i].ne = &ne[2 * i];
	}
	t[0].flags = 1;
	sp[0].offset = 0;
	sp[0].bytes = 256;
	t[0].arena = &sp[0];
	t[1].op = QGRAPH__OP__OP_ADD;
	src[0] = 0;
	src[1] = 0;
	t[1].n_src = 2;
	t[1].src = src;
	t[1].flags = 2;
	sp[1].offset = 4096;
	sp[1].bytes = 256;
	t[1].arena = &sp[1];
}

static void c_outside(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); sp[0].offset = 1 << 20; }
static void c_wrap(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); sp[1].offset = UINT64_MAX - 127; }
static void c_misaligned(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); sp[0].offset = 4; }
static void c_overlap(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); sp[1].offset = 128; }
/* an output inside a large input, with a small input between them in the order of offsets */
static void c_overlap_far(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp)
{
	base_graph(t, ne, s, sp);
	sp[0].offset = 64;
	ne[4] = 2048;
	t[2].flags = 1;
	sp[2].offset = 0;
	sp[2].bytes = 8192;
	t[2].arena = &sp[2];
}
static void c_cycle(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); s[1] = 1; }
static void c_far_src(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); s[0] = 0xffffffffu; }
static void c_op(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); t[1].op = 99; }
static void c_type(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); t[0].type = 42; }
static void c_huge(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); ne[0] = ne[1] = INT64_C(1) << 40; }
static void c_neg(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); ne[0] = -64; }
static void c_dims(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); t[0].n_ne = 0; }
static void c_handle(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); t[0].arena = NULL; t[0].weights = 12345; }
static void c_shape(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); ne[2] = 32; }
static void c_nout(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); t[1].flags = 0; t[1].arena = NULL; }
static void c_leafout(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); t[0].flags = 2; }
static void c_size(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); sp[1].bytes = 8; }
static void c_mulmat(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); t[1].op = QGRAPH__OP__OP_MUL_MAT; }
static void c_flags(Qgraph__Tensor *t, int64_t *ne, uint32_t *s, Qgraph__Span *sp) { base_graph(t, ne, s, sp); t[0].flags = 0x80; }

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (!tap_ok(daemon_start(&d, NULL) == 0, "start qgraphd")) {
		daemon_dump_log(&d);
		return tap_done();
	}
	struct qgraph_connect_opts o = { .name = "good" };
	char err[512];
	qgraph_connect(&o, &good, err, sizeof err);
	tap_ok(good && good_works(), "a good client works");

	struct raw r;
	tap_ok(hostile_connect(&r, 7, NULL, 0) == -EPROTO && strstr(r.error, "7") && strstr(r.error, "1"),
	       "an unknown protocol version is refused, naming both: %s", r.error);
	raw_close(&r);
	tap_ok(hostile_connect(&r, 1, "\xff\xff\xff\xff garbage", 12) != 0, "a garbage Hello is refused");
	raw_close(&r);

	int c = hostile_connect(&r, 1, NULL, 0);
	tap_ok(c == 0, "a hand-made session (%d)", c);
	uint8_t buf[8192];
	Qgraph__Tensor t[3], *tp[3] = { &t[0], &t[1], &t[2] };
	int64_t ne[6];
	uint32_t src[2];
	Qgraph__Span sp[3];

	/* the unbent graph works, so what follows fails for its own reason */
	base_graph(t, ne, src, sp);
	size_t len = pack_submit(tp, 2, buf);
	raw_push(&r, buf, len);
	int st = raw_answer(&r, err, sizeof err);
	tap_ok(st == 0, "the unbent hand-made graph runs (%d %s)", st, err);
	/* the daemon tells a ready session where its loop runs (region.h), and a client's word for its own CPU is a hint */
	struct qg_region_header *rh = (struct qg_region_header *)r.base;
	uint32_t lc = atomic_load(&rh->loop_cpu);
	tap_ok(lc >= 1 && lc <= CPU_SETSIZE, "the header names the loop's CPU (%u, plus one)", lc);
	atomic_store(&rh->waiter_cpu, lc);	/* "I spin beside you": the loop yields after answering, nothing more */
	raw_push(&r, buf, len);
	st = raw_answer(&r, err, sizeof err);
	atomic_store(&rh->waiter_cpu, 0xffffffffu);	/* and a word that names no CPU changes nothing */
	raw_push(&r, buf, len);
	int st2 = raw_answer(&r, err, sizeof err);
	tap_ok(st == 0 && st2 == 0 && good_works(), "a client's CPU word, true or false, only ever makes the loop yield");
	atomic_store(&rh->waiter_cpu, 0);
	test_views(&r);
	test_ggml_ops(&r);

	const struct bad_case cases[] = {
		{ "an input outside the arena", c_outside, 2 }, { "an output span that wraps", c_wrap, 2 },
		{ "a misaligned offset", c_misaligned, 2 }, { "an output overlapping an input", c_overlap, 2 },
		{ "an output inside an input that a smaller input starts within", c_overlap_far, 3 },
		{ "a source that is not earlier (cycle)", c_cycle, 2 }, { "a source index far out", c_far_src, 2 },
		{ "an unknown op", c_op, 2 }, { "an unknown type", c_type, 2 },
		{ "a shape whose size overflows", c_huge, 2 }, { "a negative dimension", c_neg, 2 },
		{ "no dimensions", c_dims, 2 }, { "an unknown weight handle", c_handle, 2 },
		{ "a declared shape the op does not give", c_shape, 2 }, { "no output", c_nout, 2 },
		{ "a leaf as output", c_leafout, 2 }, { "a span of the wrong size", c_size, 2 },
		{ "mul_mat of F32 by itself with bad shapes", c_mulmat, 2 }, { "unknown flags", c_flags, 2 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cases[i].make(t, ne, src, sp);
		len = pack_submit(tp, cases[i].n, buf);
		raw_push(&r, buf, len);
		st = raw_answer(&r, err, sizeof err);
		tap_ok(st > 0 && err[0] && good_works(), "%s: refused (%s), others unaffected", cases[i].what, err);
	}

	/* requests that are not graphs */
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	req.request_id = 5;
	len = qgraph__request__pack(&req, buf);
	raw_push(&r, buf, len);
	tap_ok(raw_answer(&r, err, sizeof err) > 0, "a request without a body: %s", err);
	Qgraph__RunGraph run = QGRAPH__RUN_GRAPH__INIT;
	run.graph = 999;
	req.body_case = QGRAPH__REQUEST__BODY_RUN;
	req.run = &run;
	raw_push(&r, buf, qgraph__request__pack(&req, buf));
	tap_ok(raw_answer(&r, err, sizeof err) == QGRAPH__STATUS__STATUS_NOT_FOUND, "an unknown graph handle: %s", err);
	Qgraph__EventRef ev = QGRAPH__EVENT_REF__INIT, *evp = &ev;
	ev.index = 1u << 30;
	run.n_record = 1;
	run.record = &evp;
	raw_push(&r, buf, qgraph__request__pack(&req, buf));
	tap_ok(raw_answer(&r, err, sizeof err) > 0 && strstr(err, "event"), "an event index out of range: %s", err);
	Qgraph__UploadWeights up = QGRAPH__UPLOAD_WEIGHTS__INIT;
	Qgraph__Span usp = QGRAPH__SPAN__INIT;
	up.rows = 64;
	up.cols = 64;
	up.target_type = QGRAPH__TYPE__TYPE_Q4_0;
	usp.offset = r.l.arena_bytes - 100;
	usp.bytes = 4096;
	up.data = &usp;
	req.body_case = QGRAPH__REQUEST__BODY_UPLOAD;
	req.upload = &up;
	raw_push(&r, buf, qgraph__request__pack(&req, buf));
	tap_ok(raw_answer(&r, err, sizeof err) > 0 && strstr(err, "arena"), "an upload chunk outside the arena: %s", err);
	up.rows = INT64_C(1) << 50;
	usp.offset = 0;
	raw_push(&r, buf, qgraph__request__pack(&req, buf));
	tap_ok(raw_answer(&r, err, sizeof err) > 0, "an upload whose size overflows: %s", err);
	up.rows = up.cols = 64;	/* 64 x 64 f32: 16384 bytes, of which a "last" chunk brings 4096 */
	up.src_type = QGRAPH__TYPE__TYPE_F32;
	usp.bytes = 4096;
	up.last = 1;
	raw_push(&r, buf, qgraph__request__pack(&req, buf));
	tap_ok(raw_answer(&r, err, sizeof err) > 0 && strstr(err, "after 4096 of 16384 bytes"),
	       "a last chunk too soon is refused with the size it fell short of: %s", err);
	up.last = 0;

	/* the K-quants and Q8_0 sent as they are: their block widths, sizes and targets checked */
	static const struct {
		Qgraph__Type src, dst;
		int64_t rows, cols;
		const char *want;	/* in the refusal */
	} bad_up[] = {
		{ QGRAPH__TYPE__TYPE_Q4_K, QGRAPH__TYPE__TYPE_Q4_K, 64, 128, "256" },
		{ QGRAPH__TYPE__TYPE_Q6_K, QGRAPH__TYPE__TYPE_Q6_K, 64, 300, "256" },
		{ QGRAPH__TYPE__TYPE_Q8_0, QGRAPH__TYPE__TYPE_Q8_0, 64, 48, "32" },
		{ QGRAPH__TYPE__TYPE_Q4_K, QGRAPH__TYPE__TYPE_Q4_K, INT64_C(1) << 50, 256, "" },
		{ QGRAPH__TYPE__TYPE_Q6_K, QGRAPH__TYPE__TYPE_Q6_K, 64, INT64_C(1) << 52, "" },
		{ QGRAPH__TYPE__TYPE_Q4_K, QGRAPH__TYPE__TYPE_Q4_K, -64, 256, "" },
		{ QGRAPH__TYPE__TYPE_Q4_K, QGRAPH__TYPE__TYPE_Q6_K, 64, 256, "stored as they are" },
		{ QGRAPH__TYPE__TYPE_Q8_0, QGRAPH__TYPE__TYPE_Q4_K, 64, 256, "stored as they are" },
		{ QGRAPH__TYPE__TYPE_Q6_K, QGRAPH__TYPE__TYPE_Q4_0, 64, 256, "stored as they are" },
	};
	for (size_t i = 0; i < sizeof bad_up / sizeof *bad_up; i++) {
		up.src_type = bad_up[i].src;
		up.target_type = bad_up[i].dst;
		up.rows = bad_up[i].rows;
		up.cols = bad_up[i].cols;
		usp.offset = 0;
		usp.bytes = 4096;
		raw_push(&r, buf, qgraph__request__pack(&req, buf));
		st = raw_answer(&r, err, sizeof err);
		tap_ok(st > 0 && strstr(err, bad_up[i].want), "an upload of %lld x %lld, type %d as %d, is refused: %s",
		       (long long)up.rows, (long long)up.cols, (int)up.src_type, (int)up.target_type, err);
	}
	/* 3 x 256 q6_K: 630 bytes, of which a "last" chunk brings 420 */
	up.src_type = up.target_type = QGRAPH__TYPE__TYPE_Q6_K;
	up.rows = 3;
	up.cols = 256;
	usp.bytes = 420;
	up.last = 1;
	raw_push(&r, buf, qgraph__request__pack(&req, buf));
	tap_ok(raw_answer(&r, err, sizeof err) > 0 && strstr(err, "after 420 of 630 bytes"),
	       "a q6_K last chunk too soon is refused with its size: %s", err);
	up.last = 0;
	up.src_type = QGRAPH__TYPE__TYPE_F32;
	up.target_type = QGRAPH__TYPE__TYPE_Q4_0;
	up.rows = up.cols = 64;
	usp.bytes = 4096;

	/* garbage and truncated records */
	struct tap_rng rng = { 99 };
	int fine = 1;
	for (int i = 0; i < 30 + 100 * tap_scale(); i++) {
		size_t n = 1 + tap_rand(&rng) % 200;
		for (size_t j = 0; j < n; j++)
			buf[j] = (uint8_t)tap_rand(&rng);
		raw_push(&r, buf, n);
		st = raw_answer(&r, err, sizeof err);
		fine &= st != -ETIMEDOUT && st != -EPROTO;
	}
	tap_ok(fine && good_works(), "random records: each answered, others unaffected");
	base_graph(t, ne, src, sp);
	len = pack_submit(tp, 2, buf);
	fine = 1;
	for (size_t cut = 1; cut < len; cut++) {
		raw_push(&r, buf, cut);
		fine &= raw_answer(&r, err, sizeof err) != -ETIMEDOUT;
	}
	tap_ok(fine && good_works(), "every truncation of a graph record is answered");

	/* records rewritten while the daemon may be reading them */
	fine = 1;
	for (int i = 0; i < 200; i++) {
		raw_push(&r, buf, len);
		unsigned char *data = r.submit.ctl->data;
		for (int j = 0; j < 8; j++)
			data[tap_rand(&rng) % r.submit.size] ^= (uint8_t)tap_rand(&rng);
		st = raw_answer(&r, err, sizeof err);
		if (st == -EPROTO || st == -ETIMEDOUT)
			break;	/* the length word was hit: the session may be dropped */
	}
	tap_ok(good_works(), "records scribbled while in flight: the daemon carries on");
	raw_close(&r);

	/* ring positions scribbled: the session is dropped, nobody else notices */
	hostile_connect(&r, 1, NULL, 0);
	atomic_store(&r.submit.ctl->tail, 12345);
	uint64_t one = 1;
	(void)!write(r.bell, &one, sizeof one);
	struct pollfd p = { .fd = r.sock, .events = POLLIN };
	int dropped = poll(&p, 1, 3000) == 1 && recv(r.sock, buf, 1, 0) == 0;
	tap_ok(dropped && good_works(), "a scribbled tail drops that session only");
	raw_close(&r);
	hostile_connect(&r, 1, NULL, 0);
	atomic_store(&r.complete.ctl->head, 0x7fff0000u);
	base_graph(t, ne, src, sp);
	raw_push(&r, buf, pack_submit(tp, 2, buf));
	dropped = poll(&p, 1, 3000) == 1 && recv(r.sock, buf, 1, 0) == 0;
	p.fd = r.sock;
	tap_ok(good_works(), "a scribbled completion head: the daemon carries on");
	raw_close(&r);

	/* descriptors sent after the handshake are closed, and the session dropped */
	hostile_connect(&r, 1, NULL, 0);
	int pfd[2];
	pipe(pfd);
	qg_sock_send(r.sock, "x", 1, pfd, 2);
	p.fd = r.sock;
	dropped = poll(&p, 1, 3000) == 1 && recv(r.sock, buf, 1, 0) == 0;
	tap_ok(dropped && good_works(), "a message with descriptors after the handshake drops the session");
	close(pfd[0]);
	close(pfd[1]);
	raw_close(&r);

	/* a handshake abandoned half-way is dropped in time, and counted apart from the sessions meanwhile */
	long long serving = daemon_stat(good, "sessions");
	int s = qg_sock_connect(d.sock);
	long long shaking = -1;
	for (int k = 0; k < 100 && shaking < 1; k++, usleep(1000))
		shaking = daemon_stat(good, "handshaking");
	tap_ok(shaking == 1 && daemon_stat(good, "sessions") == serving,
	       "a connection in its handshake counts as handshaking (%lld), not as a session (%lld)", shaking,
	       daemon_stat(good, "sessions"));
	p.fd = s;
	dropped = poll(&p, 1, 5000) == 1 && recv(s, buf, 1, 0) == 0;
	tap_ok(dropped && good_works(), "a client that never says hello is dropped");
	tap_ok(daemon_stat(good, "handshaking") == 0, "and is no longer counted");
	close(s);

	qgraph_session_close(good);
	int status = daemon_stop(&d, SIGTERM);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the daemon is still well: SIGTERM, exit 0");
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_cleanup(&d);
	return tap_done();
}
