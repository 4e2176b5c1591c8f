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
 *
 * Names reach the daemon's lookups, logs and models as C strings: every
 * name a record decodes to (a model request's, an upload's, an open's)
 * must end inside what was decoded.  The seeds hold model requests (begin,
 * commit, unload), a model's tensor upload and opens by "MODEL/tensor".
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/wire-util.h"
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

static long n_decoded, n_built, n_hot, n_named;

/* NAME, a string a record of SIZE bytes decoded to, ends inside it: it cannot be longer than the record. */
static void check_name(const char *name, size_t size)
{
	if (!name)
		return;
	if (strnlen(name, size + 1) > size)
		abort();
	n_named++;
}

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
	if (r && r->body_case == QGRAPH__REQUEST__BODY_MODEL)
		check_name(r->model->name, size);
	else if (r && r->body_case == QGRAPH__REQUEST__BODY_UPLOAD)
		check_name(r->upload->name, size);
	else if (r && r->body_case == QGRAPH__REQUEST__BODY_OPEN_WEIGHTS)
		check_name(r->open_weights->name, size);
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
#include "../lib/tap.h"

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

/* Model requests: begin, commit and unload of "tiny", and an unload of a path-like name. */
static size_t seed_model(uint8_t *buf, Qgraph__ModelRequest__Op op, const char *name)
{
	Qgraph__ModelRequest m = QGRAPH__MODEL_REQUEST__INIT;
	Qgraph__Request req = QGRAPH__REQUEST__INIT;

	m.op = op;
	m.name = (char *)name;
	req.request_id = 9;
	req.body_case = QGRAPH__REQUEST__BODY_MODEL;
	req.model = &m;
	return qgraph__request__pack(&req, buf);
}

/* The first (and last) chunk of a model's tensor "tiny/blk.0.weight": 4 x 64 f32 to q4_0. */
static size_t seed_model_upload(uint8_t *buf)
{
	Qgraph__UploadWeights u = QGRAPH__UPLOAD_WEIGHTS__INIT;
	Qgraph__Span sp = QGRAPH__SPAN__INIT;
	Qgraph__Request req = QGRAPH__REQUEST__INIT;

	sp.offset = 4096;
	sp.bytes = 4 * 64 * 4;
	u.src_type = QGRAPH__TYPE__TYPE_F32;
	u.target_type = QGRAPH__TYPE__TYPE_Q4_0;
	u.rows = 4;
	u.cols = 64;
	u.data = &sp;
	u.last = 1;
	u.name = "tiny/blk.0.weight";
	u.model = 1;
	req.request_id = 10;
	req.body_case = QGRAPH__REQUEST__BODY_UPLOAD;
	req.upload = &u;
	return qgraph__request__pack(&req, buf);
}

/* An open of a model's tensor by its "MODEL/tensor" name. */
static size_t seed_open(uint8_t *buf)
{
	Qgraph__OpenWeights ow = QGRAPH__OPEN_WEIGHTS__INIT;
	Qgraph__Request req = QGRAPH__REQUEST__INIT;

	ow.name = "tiny/blk.0.weight";
	req.request_id = 11;
	req.body_case = QGRAPH__REQUEST__BODY_OPEN_WEIGHTS;
	req.open_weights = &ow;
	return qgraph__request__pack(&req, buf);
}

enum { N_SEEDS = 8, SEED_BYTES = 1024 };

/* Seed V mutated into BUF (2 x SEED_BYTES): bit flips, bytes, a truncation or seed O's tail spliced in.  Its length. */
static size_t mutate(uint8_t *buf, uint8_t base[][SEED_BYTES], const size_t *blen, int v, int o, struct tap_rng *rng)
{
	size_t len = blen[v];

	memcpy(buf, base[v], len);
	switch (tap_rand(rng) % 4) {
	case 0:	/* bit flips */
		for (int f = 0, n = 1 + (int)(tap_rand(rng) % 6); f < n; f++)
			buf[tap_rand(rng) % len] ^= (uint8_t)(1u << (tap_rand(rng) % 8));
		break;
	case 1:	/* byte values at random places */
		for (int f = 0, n = 1 + (int)(tap_rand(rng) % 4); f < n; f++)
			buf[tap_rand(rng) % len] = (uint8_t)tap_rand(rng);
		break;
	case 2:	/* truncation */
		len = tap_rand(rng) % len;
		break;
	default: {	/* splice the other seed's tail in */
		size_t cut = tap_rand(rng) % len, from = tap_rand(rng) % blen[o];
		size_t n = blen[o] - from;
		memcpy(buf + cut, base[o] + from, n);
		len = cut + n;
	}
	}
	return len;
}

int main(void)
{
	uint8_t base[N_SEEDS][SEED_BYTES], buf[2 * SEED_BYTES];
	size_t blen[N_SEEDS] = {
		seed(base[0], 0),
		seed(base[1], 1),
		seed_run(base[2]),
		seed_model(base[3], QGRAPH__MODEL_REQUEST__OP__MODEL_BEGIN, "tiny"),
		seed_model(base[4], QGRAPH__MODEL_REQUEST__OP__MODEL_COMMIT, "tiny"),
		seed_model(base[5], QGRAPH__MODEL_REQUEST__OP__MODEL_UNLOAD, "../tiny/x"),
		seed_model_upload(base[6]),
		seed_open(base[7]),
	};
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
	tap_ok(ok, "the seed records decode and build");
	ok = 1;
	for (int v = 3; v < N_SEEDS; v++) {
		Qgraph__Request *r = qg_wire_decode_request(&a, base[v], blen[v]);
		ok &= r && (r->body_case == QGRAPH__REQUEST__BODY_MODEL || r->body_case == QGRAPH__REQUEST__BODY_UPLOAD ||
			    r->body_case == QGRAPH__REQUEST__BODY_OPEN_WEIGHTS);
	}
	qg_wire_arena_free(&a);
	tap_ok(ok, "the model request seeds (begin, commit, unload, a tensor's upload, an open by name) decode");

	/* the graph and run seeds as ever, then as many rounds from the model seeds, spliced with any */
	for (long i = 0; i < rounds; i++) {
		int v = (int)(tap_rand(&rng) % 3), o = (v + 1 + (int)(tap_rand(&rng) % 2)) % 3;
		LLVMFuzzerTestOneInput(buf, mutate(buf, base, blen, v, o, &rng));
	}
	tap_ok(n_built > 0 && n_decoded > n_built, "%ld mutated records went through decode (%ld) and build (%ld) without a fault",
	       rounds, n_decoded, n_built);
	tap_ok(n_hot > rounds / 100, "%ld of them taken by the hand-written decoder, each as protobuf-c reads it", n_hot);
	long decoded = n_decoded;
	for (long i = 0; i < rounds; i++) {
		int v = 3 + (int)(tap_rand(&rng) % (N_SEEDS - 3)), o = (v + 1 + (int)(tap_rand(&rng) % (N_SEEDS - 1))) % N_SEEDS;
		LLVMFuzzerTestOneInput(buf, mutate(buf, base, blen, v, o, &rng));
	}
	tap_ok(n_named > rounds / 10 && n_decoded > decoded,
	       "%ld mutated model records decoded (%ld); %ld names, each ending inside its record", rounds,
	       n_decoded - decoded, n_named);
	return tap_done();
}
#endif
