/*
 * fuzz-wire.c - a record from a client, all the way to a checked graph:
 * decode with the bounded allocator, then qg_wire_graph_build against an
 * arena and one weight handle.  Whatever the bytes, this must return (an
 * error or a graph) without touching memory it does not own.  And the
 * decoder's hand-written path (hotpath.h) must agree with protobuf-c: a
 * record it takes, protobuf-c decodes to the same run.
 *
 * Built two ways: with --enable-fuzzing as a libFuzzer target
 * (tests/fuzz/fuzz-wire), and always as tests/fuzz-wire-test, whose main()
 * mutates valid records (bit flips, truncation, splices, random bytes) for
 * a number of rounds that QGRAPH_TEST_SCALE sets; the sanitizer suite runs it
 * under ASan and UBSan.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../wire-util.h"
#include "hotpath.h"
#include "quant.h"
#include "wire.h"

static unsigned char arena[1 << 16] __attribute__((aligned(64)));
static unsigned char weights[64 * 64] __attribute__((aligned(64)));

static int lookup(void *ctx, uint64_t handle, struct qg_wire_weights *out)
{
	(void)ctx;
	if (handle != 1)
		return -2;
	*out = (struct qg_wire_weights){ .type = QG_TYPE_Q4_0_4X4, .rows = 64, .cols = 64, .data = weights };
	return 0;
}

static long n_decoded, n_built, n_hot;

/* What the hand-written decoder takes, protobuf-c must read the same. */
static void check_hot(const uint8_t *data, size_t size)
{
	static struct bump ha, pa;
	ProtobufCAllocator hal = { .alloc = bump_alloc, .free = bump_free, .allocator_data = &ha };
	ProtobufCAllocator pal = { .alloc = bump_alloc, .free = bump_free, .allocator_data = &pa };
	ha.used = pa.used = 0;
	Qgraph__Request *h = qg_hot_unpack_request(&hal, data, size);
	if (!h)
		return;
	n_hot++;
	Qgraph__Request *p = qgraph__request__unpack(&pal, size, data);
	if (!p || p->request_id != h->request_id || p->body_case != QGRAPH__REQUEST__BODY_RUN ||
	    p->run->graph != h->run->graph || p->run->timeout_ms != h->run->timeout_ms ||
	    !events_equal(p->run->wait, p->run->n_wait, h->run->wait, h->run->n_wait) ||
	    !events_equal(p->run->record, p->run->n_record, h->run->record, h->run->n_record))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct qg_wire_arena a;
	struct qg_wire_env env = { .arena = arena, .arena_bytes = sizeof arena, .max_tensors = 64,
				   .weights = lookup };
	struct qg_wire_graph g;
	char err[256];

	if (!a.buf && qg_wire_arena_init(&a, 1 << 20))
		return 0;
	check_hot(data, size);
	Qgraph__Request *r = qg_wire_decode_request(&a, data, size);
	n_decoded += r != NULL;
	if (r && r->body_case == QGRAPH__REQUEST__BODY_SUBMIT &&
	    qg_wire_graph_build(r->submit, &env, &g, err, sizeof err) == 0) {
		n_built++;
		/* a graph that passed: every tensor's bytes lie inside what it may touch */
		for (size_t i = 0; i < g.graph->n_leafs; i++) {
			struct qg_tensor *t = g.graph->leafs[i];
			unsigned char *p = t->data;
			if (p && (p < arena || p + qg_tensor_nbytes(t) > arena + sizeof arena) &&
			    (p < weights || p + qg_tensor_nbytes(t) > weights + sizeof weights))
				abort();
		}
		qg_wire_graph_free(&g);
	}
	return 0;
}

#ifndef QG_LIBFUZZER
#include "../tap.h"

/* A valid record: weights (handle 1) x input -> mul_mat, + input2 (broadcast), silu, output. */
static size_t seed(uint8_t *buf, int variant)
{
	Qgraph__Tensor t[6], *tp[6];
	int64_t ne[6][2] = { { 64, 64 }, { 64, 3 }, { 64, 1 }, { 64, 3 }, { 64, 3 }, { 64, 3 } };
	uint32_t src[6][2] = { { 0 }, { 0 }, { 0 }, { 0, 1 }, { 3, 2 }, { 4 } };
	Qgraph__Span sp[6];
	Qgraph__Op ops[6] = { 0, 0, 0, QGRAPH__OP__OP_MUL_MAT, QGRAPH__OP__OP_ADD, QGRAPH__OP__OP_SILU };

	for (int i = 0; i < 6; i++) {
		qgraph__tensor__init(&t[i]);
		qgraph__span__init(&sp[i]);
		tp[i] = &t[i];
		t[i].n_ne = 2;
		t[i].ne = ne[i];
		t[i].op = ops[i];
		if (ops[i]) {
			t[i].n_src = i == 5 ? 1 : 2;
			t[i].src = src[i];
		}
	}
	t[0].type = QGRAPH__TYPE__TYPE_Q4_0_4X4;
	t[0].weights = 1;
	sp[1].offset = 0;
	sp[1].bytes = 64 * 3 * 4;
	t[1].arena = &sp[1];
	sp[2].offset = 1024;
	sp[2].bytes = 256;
	t[2].arena = &sp[2];
	sp[5].offset = 4096;
	sp[5].bytes = 64 * 3 * 4;
	t[5].arena = &sp[5];
	t[5].flags = 2;
	if (variant & 1) {	/* a view-ish variant: transpose the broadcast input */
		t[4].op = QGRAPH__OP__OP_MUL;
	}
	Qgraph__SubmitGraph sg = QGRAPH__SUBMIT_GRAPH__INIT;
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	sg.n_tensors = 6;
	sg.tensors = tp;
	req.request_id = 1;
	req.body_case = QGRAPH__REQUEST__BODY_SUBMIT;
	req.submit = &sg;
	return qgraph__request__pack(&req, buf);
}

/* A run of registered graph 3, waiting on two events and recording one: the decoder's hand-written path. */
static size_t seed_run(uint8_t *buf)
{
	Qgraph__EventRef ev[3], *w[2] = { &ev[0], &ev[1] }, *rec[1] = { &ev[2] };
	Qgraph__RunGraph run = QGRAPH__RUN_GRAPH__INIT;
	Qgraph__Request req = QGRAPH__REQUEST__INIT;

	for (int i = 0; i < 3; i++) {
		qgraph__event_ref__init(&ev[i]);
		ev[i].index = (uint32_t)i;
		ev[i].value = 1000u * (uint64_t)(i + 1);
	}
	run.graph = 3;
	run.n_wait = 2;
	run.wait = w;
	run.n_record = 1;
	run.record = rec;
	run.timeout_ms = 500;
	req.request_id = 77;
	req.body_case = QGRAPH__REQUEST__BODY_RUN;
	req.run = &run;
	return qgraph__request__pack(&req, buf);
}

int main(void)
{
	uint8_t base[3][1024], buf[2048];
	size_t blen[3] = { seed(base[0], 0), seed(base[1], 1), seed_run(base[2]) };
	struct tap_rng rng = { 0x5eed };
	long rounds = 20000 + 200000L * tap_scale();

	/* the seeds themselves must build: the harness exercises the full path */
	struct qg_wire_arena a;
	qg_wire_arena_init(&a, 1 << 20);
	struct qg_wire_env env = { .arena = arena, .arena_bytes = sizeof arena, .max_tensors = 64, .weights = lookup };
	struct qg_wire_graph g;
	char err[256];
	int ok = 1;
	for (int v = 0; v < 2; v++) {
		Qgraph__Request *r = qg_wire_decode_request(&a, base[v], blen[v]);
		int e = r ? qg_wire_graph_build(r->submit, &env, &g, err, sizeof err) : -1;
		if (e)
			tap_diag("seed %d: %s", v, err);
		ok &= e == 0;
		if (!e)
			qg_wire_graph_free(&g);
	}
	qg_wire_arena_free(&a);
	tap_ok(ok, "the seed records decode and build");

	for (long i = 0; i < rounds; i++) {
		int v = (int)(tap_rand(&rng) % 3), o = (v + 1 + (int)(tap_rand(&rng) % 2)) % 3;
		size_t len = blen[v];
		memcpy(buf, base[v], len);
		switch (tap_rand(&rng) % 4) {
		case 0:	/* bit flips */
			for (int f = 0, n = 1 + (int)(tap_rand(&rng) % 6); f < n; f++)
				buf[tap_rand(&rng) % len] ^= (uint8_t)(1u << (tap_rand(&rng) % 8));
			break;
		case 1:	/* byte values at random places */
			for (int f = 0, n = 1 + (int)(tap_rand(&rng) % 4); f < n; f++)
				buf[tap_rand(&rng) % len] = (uint8_t)tap_rand(&rng);
			break;
		case 2:	/* truncation */
			len = tap_rand(&rng) % len;
			break;
		default: {	/* splice the other seed's tail in */
			size_t cut = tap_rand(&rng) % len, from = tap_rand(&rng) % blen[o];
			size_t n = blen[o] - from;
			memcpy(buf + cut, base[o] + from, n);
			len = cut + n;
		}
		}
		LLVMFuzzerTestOneInput(buf, len);
	}
	tap_ok(n_built > 0 && n_decoded > n_built, "%ld mutated records went through decode (%ld) and build (%ld) without a fault",
	       rounds, n_decoded, n_built);
	tap_ok(n_hot > rounds / 100, "%ld of them taken by the hand-written decoder, each as protobuf-c reads it", n_hot);
	return tap_done();
}
#endif
