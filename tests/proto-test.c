/*
 * proto-test.c - the wire schema compiles, round-trips, and its decoder
 * survives hostile bytes (bit flips, truncation, garbage) with a bounded
 * allocator: every unpack returns NULL or a message, and never more memory
 * than the bound.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qgraph.pb-c.h"
#include "wire-util.h"
#include "tap.h"


static size_t pack_sample(uint8_t **out)
{
	Qgraph__Tensor t[3], *tp[3];
	Qgraph__Span spans[3];
	int64_t ne[2] = { 4096, 8 };
	uint32_t src[2] = { 0, 1 };
	Qgraph__SubmitGraph submit = QGRAPH__SUBMIT_GRAPH__INIT;
	Qgraph__Request req = QGRAPH__REQUEST__INIT;

	for (int i = 0; i < 3; i++) {
		qgraph__tensor__init(&t[i]);
		qgraph__span__init(&spans[i]);
		tp[i] = &t[i];
		t[i].n_ne = 2;
		t[i].ne = ne;
	}
	t[0].type = QGRAPH__TYPE__TYPE_Q4_0_8X8;
	t[0].weights = 7;
	t[1].flags = 1;
	spans[1].offset = 4096;
	spans[1].bytes = 4096 * 8 * 4;
	t[1].arena = &spans[1];
	t[2].op = QGRAPH__OP__OP_MUL_MAT;
	t[2].n_src = 2;
	t[2].src = src;
	t[2].flags = 2;
	spans[2].offset = 1 << 20;
	t[2].arena = &spans[2];
	submit.n_tensors = 3;
	submit.tensors = tp;
	submit.keep = 1;
	req.request_id = 42;
	req.body_case = QGRAPH__REQUEST__BODY_SUBMIT;
	req.submit = &submit;

	size_t len = qgraph__request__get_packed_size(&req);
	*out = malloc(len);
	if (*out)
		qgraph__request__pack(&req, *out);
	return len;
}

int main(void)
{
	struct bump *b = calloc(1, sizeof *b);
	ProtobufCAllocator alloc = { .alloc = bump_alloc, .free = bump_free, .allocator_data = b };
	struct tap_rng rng = { 0x9e3779b97f4a7c15ULL };
	uint8_t *packed = NULL;
	size_t len = pack_sample(&packed);

	if (!b || !packed)
		return 99;

	/* round trip */
	Qgraph__Request *r = qgraph__request__unpack(&alloc, len, packed);
	tap_ok(r != NULL, "a packed request unpacks (%zu bytes)", len);
	if (r) {
		tap_ok(r->request_id == 42 && r->body_case == QGRAPH__REQUEST__BODY_SUBMIT,
		       "request id and body survive");
		tap_ok(r->submit->n_tensors == 3 && r->submit->tensors[2]->op == QGRAPH__OP__OP_MUL_MAT &&
		       r->submit->tensors[2]->n_src == 2 && r->submit->tensors[2]->src[1] == 1,
		       "tensors, ops and sources survive");
		tap_ok(r->submit->tensors[0]->type == QGRAPH__TYPE__TYPE_Q4_0_8X8 &&
		       r->submit->tensors[0]->weights == 7 && r->submit->tensors[1]->arena &&
		       r->submit->tensors[1]->arena->offset == 4096, "types, handles and spans survive");
	}
	b->used = 0;

	/* truncation at every length: NULL or a message, never a crash */
	int trunc_ok = 1;
	for (size_t cut = 0; cut < len; cut++) {
		Qgraph__Request *t = qgraph__request__unpack(&alloc, cut, packed);
		if (t && t->body_case == QGRAPH__REQUEST__BODY_SUBMIT && t->submit->n_tensors > 3)
			trunc_ok = 0;
		b->used = 0;
	}
	tap_ok(trunc_ok, "every truncation of the request decodes safely");

	/* bit flips and garbage, with the allocator's bound respected */
	long n = 2000 + 20000L * tap_scale();
	long decoded = 0, refused = 0;
	uint8_t *m = malloc(len + 64);
	for (long i = 0; i < n && m; i++) {
		size_t mlen = len;
		memcpy(m, packed, len);
		if (i % 4 == 3) {	/* pure garbage */
			mlen = tap_rand(&rng) % (len + 64);
			for (size_t j = 0; j < mlen; j++)
				m[j] = (uint8_t)tap_rand(&rng);
		} else {
			int flips = 1 + (int)(tap_rand(&rng) % 8);
			for (int f = 0; f < flips; f++)
				m[tap_rand(&rng) % len] ^= (uint8_t)(1u << (tap_rand(&rng) % 8));
		}
		Qgraph__Request *t = qgraph__request__unpack(&alloc, mlen, m);
		if (t)
			decoded++;
		else
			refused++;
		if (b->used > sizeof b->buf)
			break;
		b->used = 0;
	}
	tap_ok(decoded + refused == n, "%ld mutated records decoded (%ld) or refused (%ld)",
	       n, decoded, refused);

	/* the bound holds: a message needing more than the arena is refused */
	b->used = sizeof b->buf - 8;
	tap_ok(qgraph__request__unpack(&alloc, len, packed) == NULL && b->failures > 0,
	       "a decode that would pass the allocator's bound is refused");

	free(m);
	free(packed);
	free(b);
	return tap_done();
}
