/*
 * encode-test.c - the wire's encoder is the inverse of its graph builder:
 * a graph of engine tensors (every op, every view, weights, a mask, events)
 * encoded with qg_wire_graph_encode and built again with
 * qg_wire_graph_build gives tensors of the same type, op, shape, strides,
 * view offset and parameters, whose encoding is the same bytes; and what
 * has no wire form (a source that is not an earlier tensor, a type without
 * a wire number, too many events) is refused.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "wire.h"
#include "tap.h"

enum { MAXT = 32 };

struct list {
	struct qg_tensor *t[MAXT];
	struct qg_wire_tensor info[MAXT];
	size_t n;
};

static struct qg_tensor *put(struct list *l, struct qg_tensor *t, int n_dims, uint64_t weights, int64_t offset,
			     unsigned flags)
{
	if (t && l->n < MAXT) {
		l->t[l->n] = t;
		l->info[l->n++] = (struct qg_wire_tensor){ .n_dims = n_dims, .weights = weights, .offset = offset,
							   .flags = flags };
	}
	return t;
}

static float wdata[64 * 16];

/* Handle 7: Q8_0 weights of 64 x 16 (cols x rows). */
static int weights_fn(void *ctx, uint64_t handle, struct qg_wire_weights *out)
{
	(void)ctx;
	if (handle != 7)
		return -ENOENT;
	*out = (struct qg_wire_weights){ .type = QG_TYPE_Q8_0, .rows = 16, .cols = 64, .data = wdata };
	return 0;
}

/* Bytes of R packed, in *OUT (malloc'd); their count. */
static size_t packed(const struct qg_wire_record *r, unsigned char **out)
{
	size_t n = qgraph__submit_graph__get_packed_size(&r->sg);
	*out = malloc(n ? n : 1);
	if (*out)
		qgraph__submit_graph__pack(&r->sg, *out);
	return n;
}

static int same_tensor(const struct qg_tensor *a, const struct qg_tensor *b)
{
	return a->type == b->type && a->op == b->op && memcmp(a->ne, b->ne, sizeof a->ne) == 0 &&
	       memcmp(a->nb, b->nb, sizeof a->nb) == 0 && a->view_offs == b->view_offs &&
	       memcmp(a->op_params, b->op_params, sizeof a->op_params) == 0;
}

static void round_trip(void)
{
	static unsigned char arena[1 << 16] __attribute__((aligned(64)));
	struct qg_ctx *ctx = qg_ctx_new(MAXT);
	struct list l = { .n = 0 };
	const struct qg_wire_event wait[2] = { { 1, 5 }, { 3, 9 } }, rec[1] = { { 2, 6 } };

	struct qg_tensor *w = put(&l, qg_tensor_new_2d(ctx, QG_TYPE_Q8_0, 64, 16), 2, 7, -1, 0);
	w->flags |= QG_TENSOR_WEIGHTS;
	struct qg_tensor *x = put(&l, qg_tensor_new_3d(ctx, QG_TYPE_F32, 64, 4, 2), 3, 0, 0, QG_WIRE_INPUT);
	struct qg_tensor *idx = put(&l, qg_tensor_new_2d(ctx, QG_TYPE_I32, 3, 2), 2, 0, 4096, QG_WIRE_INPUT);
	struct qg_tensor *mask = put(&l, qg_tensor_new_1d(ctx, QG_TYPE_F32, 16), 1, 0, 4160, QG_WIRE_INPUT);
	struct qg_tensor *mm = put(&l, qg_op_mul_mat(ctx, w, x), 3, 0, -1, 0);
	struct qg_tensor *sc = put(&l, qg_op_scale(ctx, mm, 0.25f), 3, 0, -1, 0);
	struct qg_tensor *sm = put(&l, qg_op_soft_max(ctx, sc, mask, 2.0f), 3, 0, -1, 0);
	struct qg_tensor *rn = put(&l, qg_op_rms_norm(ctx, sm, 1e-5f), 3, 0, -1, 0);
	struct qg_tensor *ad = put(&l, qg_op_add(ctx, rn, mask), 3, 0, -1, 0);
	struct qg_tensor *mu = put(&l, qg_op_mul(ctx, ad, ad), 3, 0, -1, 0);
	struct qg_tensor *si = put(&l, qg_op_silu(ctx, mu), 3, 0, -1, 0);
	struct qg_tensor *ge = put(&l, qg_op_gelu(ctx, si), 3, 0, 8192, QG_WIRE_OUTPUT);
	struct qg_tensor *rs = put(&l, qg_tensor_reshape(ctx, ge, 2, (const int64_t[]){ 32, 4 }), 2, 0, -1, 0);
	struct qg_tensor *tr = put(&l, qg_tensor_transpose(ctx, rs), 4, 0, -1, 0);
	struct qg_tensor *pe = put(&l, qg_tensor_permute(ctx, x, 0, 2, 1, 3), 4, 0, -1, 0);
	struct qg_tensor *vw = put(&l, qg_tensor_view(ctx, pe, 2, (const int64_t[]){ 64, 2 }, (const size_t[]){ 512 }, 256),
				   2, 0, -1, 0);
	put(&l, qg_op_scale(ctx, tr, 1.0f), 4, 0, 12288, QG_WIRE_OUTPUT);
	put(&l, qg_op_scale(ctx, vw, 3.0f), 2, 0, 16384, QG_WIRE_OUTPUT);
	struct qg_tensor *gr = put(&l, qg_op_get_rows(ctx, x, idx), 3, 0, 20480, QG_WIRE_OUTPUT);
	struct qg_tensor *dst = put(&l, qg_tensor_new_3d(ctx, QG_TYPE_F16, 64, 3, 2), 3, 0, 24576, QG_WIRE_INPUT);
	put(&l, qg_op_cpy(ctx, gr, dst), 3, 0, -1, 0);
	tap_ok(l.n == 21 && qg_ctx_error(ctx) == 0, "a graph of every op and view (%zu tensors) %s", l.n,
	       qg_ctx_error_text(ctx));

	struct qg_wire_record r1, r2;
	int e = qg_wire_graph_encode(l.t, l.info, l.n, wait, 2, rec, 1, &r1);
	tap_ok(e == 0 && r1.sg.n_tensors == l.n && r1.sg.n_wait == 2 && r1.sg.n_record == 1 &&
	       r1.sg.record[0]->value == 6 && r1.tp[4]->n_src == 2 && r1.tp[4]->src[1] == 1 &&
	       r1.tp[14]->n_iparams == 4 && r1.tp[14]->iparams[1] == 2 && r1.tp[15]->view_offset == 256 &&
	       r1.tp[1]->arena && r1.tp[1]->arena->bytes == 64 * 4 * 2 * 4 && r1.tp[0]->weights == 7,
	       "encoded: sources by index, permute's axes, a view's offset from its source, spans, weights (%d)", e);

	struct qg_wire_env env = { .arena = arena, .arena_bytes = sizeof arena, .max_tensors = MAXT,
				   .weights = weights_fn };
	struct qg_wire_graph g;
	char err[200];
	e = e ? e : qg_wire_graph_build(&r1.sg, &env, &g, err, sizeof err);
	tap_ok(e == 0, "the daemon's builder accepts it%s%s", e ? ": " : "", e ? err : "");
	int same = e == 0;
	for (size_t i = 0; same && i < l.n; i++)
		if (!same_tensor(l.t[i], g.tensors[i])) {
			tap_diag("tensor %zu (%s) differs", i, qg_op_name(l.t[i]->op));
			same = 0;
		}
	tap_ok(same, "and builds the same tensors: types, ops, shapes, strides, view offsets, parameters");

	struct qg_wire_tensor info2[MAXT];
	memcpy(info2, l.info, sizeof info2);
	e = same ? qg_wire_graph_encode(g.tensors, info2, l.n, wait, 2, rec, 1, &r2) : -1;
	unsigned char *b1 = NULL, *b2 = NULL;
	size_t n1 = packed(&r1, &b1), n2 = e == 0 ? packed(&r2, &b2) : 0;
	tap_ok(e == 0 && b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0,
	       "whose encoding is the same %zu bytes", n1);
	free(b1);
	free(b2);
	if (e == 0)
		qg_wire_record_free(&r2);
	if (same)
		qg_wire_graph_free(&g);
	qg_wire_record_free(&r1);

	/* what has no wire form */
	struct qg_tensor *swap[2] = { mm, w };
	tap_ok(qg_wire_graph_encode(swap, l.info, 2, NULL, 0, NULL, 0, &r1) == -EINVAL && r1.t == NULL,
	       "a source after its user: -EINVAL");
	struct qg_tensor *twice[2] = { x, x };
	tap_ok(qg_wire_graph_encode(twice, l.info, 2, NULL, 0, NULL, 0, &r1) == -EINVAL, "a tensor listed twice: -EINVAL");
	struct qg_tensor *act[1] = { qg_tensor_new_2d(ctx, QG_TYPE_Q8_0_4X8, 32, 4) };
	tap_ok(act[0] && qg_wire_graph_encode(act, l.info, 1, NULL, 0, NULL, 0, &r1) == -EINVAL,
	       "a type with no wire number: -EINVAL");
	struct qg_wire_event many[QG_WIRE_MAX_EVENTS + 1] = { { 0, 0 } };
	tap_ok(qg_wire_graph_encode(l.t, l.info, 1, many, QG_WIRE_MAX_EVENTS + 1, NULL, 0, &r1) == -EINVAL,
	       "more than %d events: -EINVAL", QG_WIRE_MAX_EVENTS);
	qg_ctx_free(ctx);
}

/*
 * ggml's ops round trip: up to four sources each, op_params sent without
 * their trailing zeros and put back, I64 indices, a SET_ROWS into an F16
 * input read on by FLASH_ATTN_EXT; the daemon's builder makes the same
 * tensors, which encode to the same bytes.
 */
static void round_trip_ggml(void)
{
	static unsigned char arena[1 << 16] __attribute__((aligned(64)));
	struct qg_ctx *ctx = qg_ctx_new(MAXT);
	struct list l = { .n = 0 };
	int32_t rp[QG_MAX_OP_PARAMS] = { 0, 16, 2, 0, 4096 }, gp[2] = { QG_GLU_SWIGLU, 1 }, fp[1];
	float f = 10000.0f, one = 1.0f, sc = 0.25f;

	memcpy(&rp[5], &f, 4);
	memcpy(&rp[6], &one, 4);
	memcpy(&rp[8], &one, 4);
	memcpy(&fp[0], &sc, 4);
	struct qg_tensor *x = put(&l, qg_tensor_new_3d(ctx, QG_TYPE_F32, 16, 2, 3), 3, 0, 0, QG_WIRE_INPUT);
	struct qg_tensor *pos = put(&l, qg_tensor_new_1d(ctx, QG_TYPE_I32, 3), 1, 0, 1024, QG_WIRE_INPUT);
	struct qg_tensor *idx = put(&l, qg_tensor_new_1d(ctx, QG_TYPE_I64, 3), 1, 0, 1088, QG_WIRE_INPUT);
	struct qg_tensor *kc = put(&l, qg_tensor_new_3d(ctx, QG_TYPE_F16, 16, 8, 2), 3, 0, 2048, QG_WIRE_INPUT);
	struct qg_tensor *m = put(&l, qg_tensor_new_2d(ctx, QG_TYPE_F16, 8, 3), 2, 0, 3072, QG_WIRE_INPUT);
	struct qg_tensor *ro = put(&l, qg_op_ex(ctx, QG_OP_ROPE, (struct qg_tensor *[]){ x, pos }, 2, rp, 16), 3, 0,
				   4096, QG_WIRE_OUTPUT);
	struct qg_tensor *gl = put(&l, qg_op_ex(ctx, QG_OP_GLU, (struct qg_tensor *[]){ ro }, 1, gp, 2), 3, 0, 8192,
				   QG_WIRE_OUTPUT);
	struct qg_tensor *rows = put(&l, qg_tensor_permute(ctx, ro, 0, 2, 1, 3), 4, 0, -1, 0);
	struct qg_tensor *st = put(&l, qg_op_ex(ctx, QG_OP_SET_ROWS, (struct qg_tensor *[]){ rows, idx, kc }, 3, NULL,
						0), 3, 0, -1, 0);
	struct qg_tensor *q = put(&l, qg_tensor_permute(ctx, x, 0, 2, 1, 3), 4, 0, -1, 0);
	put(&l, qg_op_ex(ctx, QG_OP_FLASH_ATTN_EXT, (struct qg_tensor *[]){ q, st, st, m }, 4, fp, 1), 4, 0, 12288,
	    QG_WIRE_OUTPUT);
	(void)gl;
	tap_ok(l.n == 11 && qg_ctx_error(ctx) == 0, "a graph of rope, glu, set_rows and flash_attn_ext (%zu tensors) %s",
	       l.n, qg_ctx_error_text(ctx));

	struct qg_wire_record r1, r2;
	int e = qg_wire_graph_encode(l.t, l.info, l.n, NULL, 0, NULL, 0, &r1);
	tap_ok(e == 0 && r1.tp[5]->n_iparams == 9 && r1.tp[5]->iparams[4] == 4096 && r1.tp[6]->n_iparams == 2 &&
	       r1.tp[8]->n_src == 3 && r1.tp[8]->n_iparams == 0 && r1.tp[10]->n_src == 4 && r1.tp[10]->src[3] == 4 &&
	       r1.tp[2]->type == QGRAPH__TYPE__TYPE_I64,
	       "encoded: four sources, op_params without trailing zeros, i64 (%d)", e);
	struct qg_wire_env env = { .arena = arena, .arena_bytes = sizeof arena, .max_tensors = MAXT };
	struct qg_wire_graph g;
	char err[200];
	e = e ? e : qg_wire_graph_build(&r1.sg, &env, &g, err, sizeof err);
	tap_ok(e == 0, "the daemon's builder accepts it%s%s", e ? ": " : "", e ? err : "");
	int same = e == 0;
	for (size_t i = 0; same && i < l.n; i++)
		if (!same_tensor(l.t[i], g.tensors[i])) {
			tap_diag("tensor %zu (%s) differs", i, qg_op_name(l.t[i]->op));
			same = 0;
		}
	tap_ok(same, "and builds the same tensors, op_params whole");
	struct qg_wire_tensor info2[MAXT];
	memcpy(info2, l.info, sizeof info2);
	e = same ? qg_wire_graph_encode(g.tensors, info2, l.n, NULL, 0, NULL, 0, &r2) : -1;
	unsigned char *b1 = NULL, *b2 = NULL;
	size_t n1 = packed(&r1, &b1), n2 = e == 0 ? packed(&r2, &b2) : 0;
	tap_ok(e == 0 && b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0, "whose encoding is the same %zu bytes", n1);
	free(b1);
	free(b2);
	if (e == 0)
		qg_wire_record_free(&r2);
	if (same)
		qg_wire_graph_free(&g);
	qg_wire_record_free(&r1);
	qg_ctx_free(ctx);
}

int main(void)
{
	round_trip();
	round_trip_ggml();
	return tap_done();
}
