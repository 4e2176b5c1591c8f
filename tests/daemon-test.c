/*
 * daemon-test.c - qgraphd end to end through libqgraph: every op against a
 * naive reference, every weight type against the in-process engine,
 * registered graphs, events, many clients at once, clients and daemons
 * that die, and shutdown.  Runs its own daemon on a temporary socket.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon-util.h"
#include "fp16.h"
#include "mulmat.h"
#include "qgraph.h"
#include "tap.h"
#include "upload-opts.h"
#include "wire.h"

static struct test_daemon d;

static void fill(float *x, size_t n, struct tap_rng *r)
{
	for (size_t i = 0; i < n; i++)
		x[i] = tap_randf(r, -1.0f, 1.0f);
}

static double max_rel(const float *a, const float *b, size_t n)
{
	double md = 0, mb = 1e-20;

	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - b[i]);
		if (!(e <= md))
			md = e;
		if (fabs(b[i]) > mb)
			mb = fabs(b[i]);
	}
	return md / mb;
}

static struct qgraph_session *connect_one(const char *name)
{
	struct qgraph_connect_opts o = { .name = name, .arena_bytes = 8 << 20 };
	struct qgraph_session *s = NULL;
	char err[256];

	if (qgraph_connect(&o, &s, err, sizeof err))
		tap_diag("connect: %s", err);
	return s;
}

/* Submit G, wait, return the status (and the registered handle). */
static int submit_wait(struct qgraph_session *s, struct qgraph_graph *g, int flags, uint64_t *handle)
{
	uint64_t id;
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	int r = qgraph_submit(s, g, flags | QGRAPH_SUBMIT_BLOCK, &id);

	if (!r)
		r = qgraph_wait(s, id, 10000, &res);
	if (!r)
		r = res.status;
	if (!r && handle)
		*handle = res.handle;
	return r;
}

enum { C = 64, R = 4 };

/* One element-wise/row op through the daemon against REF computed here. */
static void test_ops(struct qgraph_session *s)
{
	struct tap_rng rng = { 11 };
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t ao = qgraph_arena_alloc(s, C * R * 4), bo = qgraph_arena_alloc(s, C * 4);
	int64_t yo = qgraph_arena_alloc(s, C * R * 4);
	float *a = (float *)(arena + ao), *b = (float *)(arena + bo), *y = (float *)(arena + yo);
	float ref[C * R];
	int64_t ane[2] = { C, R }, bne[2] = { C, 1 };
	static const struct {
		enum qgraph_op op;
		const char *name;
		int binary;
		float param;
	} ops[] = {
		{ QGRAPH_OP_ADD, "add (row broadcast)", 1, 0 }, { QGRAPH_OP_MUL, "mul (row broadcast)", 1, 0 },
		{ QGRAPH_OP_SCALE, "scale", 0, 0.5f }, { QGRAPH_OP_SILU, "silu", 0, 0 },
		{ QGRAPH_OP_GELU, "gelu", 0, 0 }, { QGRAPH_OP_RMS_NORM, "rms_norm", 0, 1e-5f },
		{ QGRAPH_OP_SOFT_MAX, "soft_max (scaled)", 0, 0.25f },
	};

	fill(a, C * R, &rng);
	fill(b, C, &rng);
	for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
		for (int r = 0; r < R; r++) {
			const float *ar = a + r * C;
			float *rr = ref + r * C;
			double ss = 0, mx = -INFINITY, sum = 0;
			for (int j = 0; j < C; j++) {
				ss += (double)ar[j] * ar[j];
				mx = fmax(mx, ar[j] * ops[o].param);
			}
			for (int j = 0; j < C; j++) {
				double v = ar[j];
				switch (ops[o].op) {
				case QGRAPH_OP_ADD: rr[j] = ar[j] + b[j]; break;
				case QGRAPH_OP_MUL: rr[j] = ar[j] * b[j]; break;
				case QGRAPH_OP_SCALE: rr[j] = ar[j] * ops[o].param; break;
				case QGRAPH_OP_SILU: rr[j] = (float)(v / (1 + exp(-v))); break;
				case QGRAPH_OP_GELU:
					rr[j] = (float)(0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
					break;
				case QGRAPH_OP_RMS_NORM: rr[j] = (float)(v / sqrt(ss / C + ops[o].param)); break;
				case QGRAPH_OP_SOFT_MAX: rr[j] = (float)exp(v * ops[o].param - mx); sum += rr[j]; break;
				default: break;
				}
			}
			if (ops[o].op == QGRAPH_OP_SOFT_MAX)
				for (int j = 0; j < C; j++)
					rr[j] = (float)(rr[j] / sum);
		}
		struct qgraph_graph *g = qgraph_graph_new();
		int ai = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, ane, ao);
		int bi = ops[o].binary ? qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, bne, bo) : -1;
		qgraph_graph_output(g, qgraph_graph_op(g, ops[o].op, ai, bi, ops[o].param), yo);
		memset(y, 0, C * R * 4);
		int r = submit_wait(s, g, 0, NULL);
		double e = max_rel(y, ref, C * R);
		tap_ok(r == 0 && e < 2e-5, "%s through the daemon equals the reference (err %.1e)%s%s", ops[o].name, e,
		       r ? ": " : "", r ? qgraph_session_error(s) : "");
		qgraph_graph_free(g);
	}

	/* GET_ROWS: rows picked by index; an index out of range is an error, not a crash */
	int64_t io = qgraph_arena_alloc(s, 64);
	int32_t *idx = (int32_t *)(arena + io);
	int64_t ine[1] = { 3 };
	idx[0] = 2;
	idx[1] = 0;
	idx[2] = 3;
	struct qgraph_graph *g = qgraph_graph_new();
	int ti = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, ane, ao);
	int ii = qgraph_graph_input(g, QGRAPH_TYPE_I32, 1, ine, io);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_GET_ROWS, ti, ii, 0), yo);
	int r = submit_wait(s, g, 0, NULL);
	tap_ok(r == 0 && memcmp(y, a + 2 * C, C * 4) == 0 && memcmp(y + C, a, C * 4) == 0 &&
	       memcmp(y + 2 * C, a + 3 * C, C * 4) == 0, "get_rows picks rows 2, 0, 3");
	idx[1] = 4;
	r = submit_wait(s, g, 0, NULL);
	tap_ok(r != 0 && strstr(qgraph_session_error(s), "range"), "an index out of range fails the graph: %s",
	       qgraph_session_error(s));
	qgraph_graph_free(g);
	qgraph_arena_free(s, io);
	qgraph_arena_free(s, ao);
	qgraph_arena_free(s, bo);
	qgraph_arena_free(s, yo);
}

/*
 * ggml's ops through the daemon in one graph, as a decode step uses them:
 * ROPE (NeoX) of a head, a fused SwiGLU, a KV-cache write (SET_ROWS of F32
 * rows into an F16 cache at I64 indices, read back by a cast) and
 * FLASH_ATTN_EXT over that cache with a mask; each output against a
 * reference computed here; then an index out of range fails the run.
 */
static void test_ggml_ops(struct qgraph_session *s)
{
	enum { D = 16, H = 2, T = 3, KV = 8 };
	struct tap_rng rng = { 29 };
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t xo = qgraph_arena_alloc(s, D * H * T * 4), po = qgraph_arena_alloc(s, 64);
	int64_t go = qgraph_arena_alloc(s, 2 * D * T * 4), ko = qgraph_arena_alloc(s, D * KV * 2);
	int64_t io = qgraph_arena_alloc(s, 64), mo = qgraph_arena_alloc(s, KV * 2);
	int64_t yr = qgraph_arena_alloc(s, D * H * T * 4), yg = qgraph_arena_alloc(s, D * T * 4);
	int64_t yk = qgraph_arena_alloc(s, D * KV * 4), yf = qgraph_arena_alloc(s, D * H * 4);
	float *x = (float *)(arena + xo), *gin = (float *)(arena + go);
	int32_t *pos = (int32_t *)(arena + po);
	int64_t *idx = (int64_t *)(arena + io);
	qg_fp16 *kc = (qg_fp16 *)(arena + ko), *mask = (qg_fp16 *)(arena + mo);
	float *ry = (float *)(arena + yr), *gy = (float *)(arena + yg), *ky = (float *)(arena + yk);
	float *fy = (float *)(arena + yf);

	fill(x, D * H * T, &rng);
	fill(gin, 2 * D * T, &rng);
	memset(kc, 0, D * KV * 2);
	pos[0] = 7, pos[1] = 8, pos[2] = 9;
	idx[0] = 5, idx[1] = 1, idx[2] = 6;
	for (int c = 0; c < KV; c++)	/* the cache rows written, 1, 5 and 6, are seen; the rest masked */
		mask[c] = qg_fp32_to_fp16(c == 1 || c == 5 || c == 6 ? 0.0f : -INFINITY);

	struct qgraph_graph *g = qgraph_graph_new();
	int xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 3, (const int64_t[]){ D, H, T }, xo);
	int pi = qgraph_graph_input(g, QGRAPH_TYPE_I32, 1, (const int64_t[]){ T }, po);
	int gi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, (const int64_t[]){ 2 * D, T }, go);
	int ki = qgraph_graph_input(g, QGRAPH_TYPE_F16, 2, (const int64_t[]){ D, KV }, ko);
	int ii = qgraph_graph_input(g, QGRAPH_TYPE_I64, 1, (const int64_t[]){ T }, io);
	int mi = qgraph_graph_input(g, QGRAPH_TYPE_F16, 2, (const int64_t[]){ KV, 1 }, mo);
	int32_t rp[16] = { 0, D, 2 }, gp[2] = { 2, 0 }, fp[1];
	float base = 10000.0f, one = 1.0f, scale = 0.25f;
	memcpy(&rp[5], &base, 4);
	memcpy(&rp[6], &one, 4);
	memcpy(&rp[8], &one, 4);
	memcpy(&fp[0], &scale, 4);
	int ropei = qgraph_graph_op_ex(g, QGRAPH_OP_ROPE, 2, (const int[]){ xi, pi }, 16, rp);
	qgraph_graph_output(g, ropei, yr);
	qgraph_graph_output(g, qgraph_graph_op_ex(g, QGRAPH_OP_GLU, 1, (const int[]){ gi }, 2, gp), yg);
	/* the cache write: the first head of each token's rotated row, as K */
	int kv = qgraph_graph_view(g, ropei, 2, (const int64_t[]){ D, T }, (const uint64_t[]){ D * H * 4 }, 0);
	int seti = qgraph_graph_op_ex(g, QGRAPH_OP_SET_ROWS, 3, (const int[]){ kv, ii, ki }, 0, NULL);
	qgraph_graph_output(g, qgraph_graph_cast(g, seti, QGRAPH_TYPE_F32), yk);
	/* one query of H heads over the cache just written, as K and V both */
	int qi = qgraph_graph_view(g, xi, 3, (const int64_t[]){ D, 1, H }, (const uint64_t[]){ D * 4, D * 4 }, 0);
	qgraph_graph_output(g, qgraph_graph_op_ex(g, QGRAPH_OP_FLASH_ATTN_EXT, 4, (const int[]){ qi, seti, seti, mi },
						  1, fp), yf);
	int r = submit_wait(s, g, 0, NULL);
	tap_ok(r == 0, "rope, glu, set_rows and flash_attn_ext in one graph through the daemon%s%s", r ? ": " : "",
	       r ? qgraph_session_error(s) : "");

	float rref[D * H * T], gref[D * T], kref[D * KV] = { 0 }, fref[D * H];
	for (int t = 0; t < T; t++)
		for (int h = 0; h < H; h++) {
			const float *xr = x + (t * H + h) * D;
			float *yr2 = rref + (t * H + h) * D;
			for (int j = 0; j < D / 2; j++) {
				double th = pos[t] * pow(10000.0, -2.0 * j / D);
				yr2[j] = (float)(xr[j] * cos(th) - xr[j + D / 2] * sin(th));
				yr2[j + D / 2] = (float)(xr[j] * sin(th) + xr[j + D / 2] * cos(th));
			}
		}
	for (int t = 0; t < T; t++)
		for (int j = 0; j < D; j++) {
			double v = gin[t * 2 * D + j];
			gref[t * D + j] = (float)(v / (1 + exp(-v)) * gin[t * 2 * D + D + j]);
			kref[idx[t] * D + j] = qg_fp16_to_fp32(qg_fp32_to_fp16(ry[t * H * D + j]));
		}
	for (int h = 0; h < H; h++) {
		double sc[T], mx = -INFINITY, sum = 0;
		for (int t = 0; t < T; t++) {
			double dot = 0;
			for (int j = 0; j < D; j++)
				dot += (double)qg_fp16_to_fp32(qg_fp32_to_fp16(x[h * D + j])) * kref[idx[t] * D + j];
			sc[t] = dot * scale;
			mx = fmax(mx, sc[t]);
		}
		for (int t = 0; t < T; t++)
			sum += sc[t] = exp(sc[t] - mx);
		for (int j = 0; j < D; j++) {
			double acc = 0;
			for (int t = 0; t < T; t++)
				acc += sc[t] / sum * kref[idx[t] * D + j];
			fref[h * D + j] = (float)acc;
		}
	}
	double er = max_rel(ry, rref, D * H * T), eg = max_rel(gy, gref, D * T), ef = max_rel(fy, fref, D * H);
	tap_ok(r == 0 && er < 1e-5 && eg < 1e-5, "rope (neox) and swiglu equal the reference (err %.1e, %.1e)", er, eg);
	tap_ok(r == 0 && memcmp(ky, kref, sizeof kref) == 0, "set_rows wrote rows 5, 1, 6 of the f16 cache, no other");
	tap_ok(r == 0 && ef < 1e-4, "flash_attn_ext over the cache equals the reference (err %.1e)", ef);

	idx[1] = KV;
	r = submit_wait(s, g, 0, NULL);
	tap_ok(r != 0 && strstr(qgraph_session_error(s), "range"), "a set_rows index out of range fails the graph: %s",
	       qgraph_session_error(s));
	qgraph_graph_free(g);

	/*
	 * As llama.cpp does it: the cache write is run for its effect, and
	 * attention reads the cache through a view of it, not through the
	 * write's result.  Made after the write, it sees the rows written.
	 */
	idx[1] = 1;
	memset(kc, 0, D * KV * 2);
	memset(fy, 0, D * H * 4);
	g = qgraph_graph_new();
	xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 3, (const int64_t[]){ D, H, T }, xo);
	pi = qgraph_graph_input(g, QGRAPH_TYPE_I32, 1, (const int64_t[]){ T }, po);
	ki = qgraph_graph_input(g, QGRAPH_TYPE_F16, 2, (const int64_t[]){ D, KV }, ko);
	ii = qgraph_graph_input(g, QGRAPH_TYPE_I64, 1, (const int64_t[]){ T }, io);
	mi = qgraph_graph_input(g, QGRAPH_TYPE_F16, 2, (const int64_t[]){ KV, 1 }, mo);
	int cache = qgraph_graph_view(g, ki, 2, (const int64_t[]){ D, KV }, (const uint64_t[]){ D * 2 }, 0);
	rp[2] = 2;
	ropei = qgraph_graph_op_ex(g, QGRAPH_OP_ROPE, 2, (const int[]){ xi, pi }, 16, rp);
	kv = qgraph_graph_view(g, ropei, 2, (const int64_t[]){ D, T }, (const uint64_t[]){ D * H * 4 }, 0);
	seti = qgraph_graph_effect(g, qgraph_graph_op_ex(g, QGRAPH_OP_SET_ROWS, 3, (const int[]){ kv, ii, ki }, 0, NULL));
	qi = qgraph_graph_view(g, xi, 3, (const int64_t[]){ D, 1, H }, (const uint64_t[]){ D * 4, D * 4 }, 0);
	int fa = qgraph_graph_op_ex(g, QGRAPH_OP_FLASH_ATTN_EXT, 4, (const int[]){ qi, cache, cache, mi }, 1, fp);
	qgraph_graph_output(g, fa, yf);
	r = submit_wait(s, g, 0, NULL);
	ef = max_rel(fy, fref, D * H);
	int written = 1;
	for (int c = 0; c < KV; c++)
		for (int j = 0; j < D; j++)
			written &= qg_fp16_to_fp32(kc[c * D + j]) == kref[c * D + j];
	tap_ok(r == 0 && written && ef < 1e-4,
	       "set_rows run for its effect writes the cache; attention through a view of it sees it (err %.1e)%s%s",
	       ef, r ? ": " : "", r ? qgraph_session_error(s) : "");
	/* the write's result is the cache's bytes: no output; and a rope writes into nothing */
	tap_ok(qgraph_graph_output(g, seti, yk) == -EINVAL && qgraph_graph_effect(g, ropei) == -EINVAL,
	       "a write's result is no output, and a rope runs for no effect");
	qgraph_graph_free(g);

	/* what the builder refuses is refused before anything is sent */
	g = qgraph_graph_new();
	xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 3, (const int64_t[]){ D, H, T }, xo);
	pi = qgraph_graph_input(g, QGRAPH_TYPE_I32, 1, (const int64_t[]){ T }, po);
	rp[2] = 1;
	int bad = qgraph_graph_op_ex(g, QGRAPH_OP_ROPE, 2, (const int[]){ xi, pi }, 16, rp);
	int bad2 = qgraph_graph_op_ex(g, QGRAPH_OP_ROPE, 2, (const int[]){ xi, pi }, 17, rp);
	int bad3 = qgraph_graph_op_ex(g, QGRAPH_OP_VIEW, 1, (const int[]){ xi }, 0, NULL);
	uint64_t id;
	tap_ok(bad == -EINVAL && bad2 == -EINVAL && bad3 == -EINVAL && qgraph_submit(s, g, 0, &id) == -EINVAL &&
	       strstr(qgraph_session_error(s), "rope"), "rope mode 1, 17 words, a view: refused by the builder (%s)",
	       qgraph_session_error(s));
	qgraph_graph_free(g);
	int64_t offs[] = { xo, po, go, ko, io, mo, yr, yg, yk, yf };
	for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++)
		qgraph_arena_free(s, offs[i]);
}

/*
 * The builder's views through the daemon: x is 6 x 4 floats, x[r][c] = 6r + c.
 * Each view feeds an op whose result is checked element by element against
 * where the view says its values come from; then what the builder refuses.
 */
static void test_views(struct qgraph_session *s)
{
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t xo = qgraph_arena_alloc(s, 24 * 4), zo = qgraph_arena_alloc(s, 64), yo = qgraph_arena_alloc(s, 24 * 4);
	float *x = (float *)(arena + xo), *z = (float *)(arena + zo), *y = (float *)(arena + yo);
	int64_t xne[2] = { 6, 4 }, zne[1] = { 4 };

	for (int i = 0; i < 24; i++)
		x[i] = (float)i;
	memset(z, 0, 64);

	/* reshape to 4 x 6, added to itself: the same order, doubled */
	struct qgraph_graph *g = qgraph_graph_new();
	int64_t rne[2] = { 4, 6 };
	int xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
	int ri = qgraph_graph_reshape(g, xi, 2, rne);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_ADD, ri, ri, 0), yo);
	memset(y, 0, 24 * 4);
	int r = submit_wait(s, g, 0, NULL), ok = r == 0;
	for (int i = 0; i < 24; i++)
		ok &= y[i] == 2.0f * (float)i;
	tap_ok(ok, "reshape 6 x 4 -> 4 x 6 through the daemon%s%s", r ? ": " : "", r ? qgraph_session_error(s) : "");
	qgraph_graph_free(g);

	/* transpose, plus a row of zeros broadcast: y is x's transpose, packed (4 x 6: y[j][i] = x[i][j]) */
	g = qgraph_graph_new();
	xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
	int zi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, zne, zo);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_ADD, qgraph_graph_transpose(g, xi), zi, 0), yo);
	memset(y, 0, 24 * 4);
	r = submit_wait(s, g, 0, NULL);
	ok = r == 0;
	for (int j = 0; j < 6; j++)
		for (int i = 0; i < 4; i++)
			ok &= y[j * 4 + i] == x[i * 6 + j];
	tap_ok(ok, "transpose through the daemon%s%s", r ? ": " : "", r ? qgraph_session_error(s) : "");
	qgraph_graph_free(g);

	/*
	 * x as 2 x 3 x 4, permuted (1, 2, 0, 3): dimension 0 to 1, 1 to 2, 2 to 0, giving 4 x 2 x 3;
	 * y[c][b][a] (a fastest) is x3[a][c][b] (b fastest), x3 at (b, c, a) = b + 2c + 6a
	 */
	g = qgraph_graph_new();
	int64_t x3ne[3] = { 2, 3, 4 };
	static const int axes[4] = { 1, 2, 0, 3 };
	xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
	int pi = qgraph_graph_permute(g, qgraph_graph_reshape(g, xi, 3, x3ne), axes);
	zi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, zne, zo);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_ADD, pi, zi, 0), yo);
	memset(y, 0, 24 * 4);
	r = submit_wait(s, g, 0, NULL);
	ok = r == 0;
	for (int i2 = 0; i2 < 3; i2++)
		for (int i1 = 0; i1 < 2; i1++)
			for (int i0 = 0; i0 < 4; i0++)
				ok &= y[i0 + 4 * (i1 + 2 * i2)] == x[i1 + 2 * i2 + 6 * i0];
	tap_ok(ok, "reshape then permute through the daemon%s%s", r ? ": " : "", r ? qgraph_session_error(s) : "");
	qgraph_graph_free(g);

	/* a view of rows 1 and 3 (every other row from the second), scaled by 3 */
	g = qgraph_graph_new();
	int64_t vne[2] = { 6, 2 };
	uint64_t vnb[1] = { 2 * 6 * 4 };
	xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
	int vi = qgraph_graph_view(g, xi, 2, vne, vnb, 6 * 4);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_SCALE, vi, -1, 3.0f), yo);
	memset(y, 0, 24 * 4);
	r = submit_wait(s, g, 0, NULL);
	ok = r == 0;
	for (int row = 0; row < 2; row++)
		for (int c = 0; c < 6; c++)
			ok &= y[row * 6 + c] == 3.0f * x[(1 + 2 * row) * 6 + c];
	tap_ok(ok, "a strided view through the daemon%s%s", r ? ": " : "", r ? qgraph_session_error(s) : "");

	/*
	 * and one reaching past x: the library builds with the engine's rules,
	 * so it is refused as it is built and the graph is never sent (the
	 * daemon's own refusal of one sent raw is hostile-test's)
	 */
	int far = qgraph_graph_view(g, xi, 2, vne, vnb, 12 * 4);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_SCALE, far, -1, 1.0f), yo + 64);
	uint64_t far_id = 0;
	tap_ok(far == -EINVAL && qgraph_submit(s, g, 0, &far_id) == -EINVAL && far_id == 0,
	       "a view past its source is refused as it is built, and its graph is not sent");
	qgraph_graph_free(g);

	/* what the builder refuses at once */
	g = qgraph_graph_new();
	xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
	int ti = qgraph_graph_transpose(g, xi);
	static const int twice[4] = { 0, 0, 2, 3 };
	int64_t seven[1] = { 7 };
	tap_ok(qgraph_graph_reshape(g, ti, 2, rne) == -EINVAL, "reshape of a transposed (strided) tensor: -EINVAL");
	tap_ok(qgraph_graph_reshape(g, xi, 1, seven) == -EINVAL, "reshape to another number of elements: -EINVAL");
	tap_ok(qgraph_graph_permute(g, xi, twice) == -EINVAL, "permute with an axis twice: -EINVAL");
	tap_ok(qgraph_graph_output(g, ti, yo) == -EINVAL, "a view as an output: -EINVAL");
	int wi = qgraph_graph_weights(g, 1, QGRAPH_TYPE_Q4_0, 32, 32);
	tap_ok(qgraph_graph_transpose(g, wi) == -EINVAL, "a view of weights: -EINVAL");
	qgraph_graph_free(g);
	qgraph_arena_free(s, xo);
	qgraph_arena_free(s, zo);
	qgraph_arena_free(s, yo);
}

/* MUL_MAT for each weight type against the in-process engine on the same bytes. */
static void test_mul_mat(struct qgraph_session *s)
{
	enum { M = 64, K = 128, N = 5 };
	static const enum qgraph_type types[] = { QGRAPH_TYPE_F32,      QGRAPH_TYPE_F16,      QGRAPH_TYPE_Q8_0,
						  QGRAPH_TYPE_Q8_0_4X4, QGRAPH_TYPE_Q4_0,     QGRAPH_TYPE_Q4_0_4X4,
						  QGRAPH_TYPE_Q4_0_4X8, QGRAPH_TYPE_Q4_0_8X8 };
	struct tap_rng rng = { 5 };
	static float w[M * K], ref[N * M];
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t xo = qgraph_arena_alloc(s, N * K * 4), yo = qgraph_arena_alloc(s, N * M * 4);
	float *x = (float *)(arena + xo), *y = (float *)(arena + yo);

	fill(w, M * K, &rng);
	fill(x, N * K, &rng);
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		uint64_t h;
		enum qgraph_type stored;
		int r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = types[t],
				.rows = M, .cols = K, .data = w), &h, &stored);
		if (!tap_ok(r == 0, "upload %s weights (stored as %s)", qgraph_type_name(types[t]),
			    r ? "-" : qgraph_type_name(stored))) {
			tap_diag("%s", qgraph_session_error(s));
			continue;
		}
		struct qgraph_graph *g = qgraph_graph_new();
		int64_t xne[2] = { K, N };
		int wi = qgraph_graph_weights(g, h, stored, M, K);
		int xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
		qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, xi, 0), yo);
		r = submit_wait(s, g, 0, NULL);

		ssize_t wb = qgraph_matrix_size(stored, M, K);
		void *wq = malloc((size_t)wb);
		qgraph_quantize(stored, w, wq, (size_t)wb, M, K, NULL);
		struct qg_mm mm = { .wtype = (enum qg_type)qg_wire_engine_type_of_public(stored), .w = wq, .m = M, .k = K, .x = x, .ldx = K,
				    .n = N, .y = ref, .ldy = M };
		void *scratch = aligned_alloc(64, (qg_mul_mat_scratch_size(&mm) + 63) & ~(size_t)63);
		qg_mul_mat(&mm, scratch);
		/* same kernels on the same bytes; SIMD float order may differ in the last bits */
		double e = max_rel(y, ref, N * M);
		tap_ok(r == 0 && e < 1e-5, "mul_mat %s through the daemon equals the engine (err %.1e)",
		       qgraph_type_name(stored), e);
		tap_ok(qgraph_weights_free(s, h) == 0 && qgraph_weights_free(s, h) == -ENOENT,
		       "free %s weights, once", qgraph_type_name(stored));
		free(scratch);
		free(wq);
		qgraph_graph_free(g);
	}
	/* weights the layout cannot hold: q4_0_8x8 needs rows in eights */
	uint64_t h;
	tap_ok(qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0_8X8,
			.rows = 12, .cols = K, .data = w), &h, NULL) == -EINVAL &&
	       strstr(qgraph_session_error(s), "multiple"), "12 rows into q4_0_8x8 is refused: %s",
	       qgraph_session_error(s));
	enum qgraph_type st = QGRAPH_TYPE_F32;
	int up = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0,
			.rows = 12, .cols = K, .data = w), &h, &st);
	tap_ok(up == 0 && qgraph_type_row_group(st) <= 4, "12 rows as q4_0: the daemon picks a layout that holds them (%s)",
	       qgraph_type_name(st));
	qgraph_weights_free(s, h);
	qgraph_arena_free(s, xo);
	qgraph_arena_free(s, yo);
}

/*
 * Q8_0 weights in the 4x4 layout (what a dotprod CPU stores them as; asked
 * for by name here): sent as ggml's bytes, found again by the digest of
 * those bytes, read back as them, their rows gathered as plain Q8_0's,
 * multiplied within rounding of plain Q8_0 (the layout's own float order);
 * what the layout cannot hold is refused.
 */
static void test_q8_0_layout(struct qgraph_session *s)
{
	enum { M = 24, K = 96, N = 3, G = 4 };
	struct tap_rng rng = { 41 };
	static float w[M * K], deq[M * K], ref[N * M];
	static unsigned char q8[M * K / 32 * 34];
	static const int32_t pick[G] = { 5, 0, 23, 10 };
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t xo = qgraph_arena_alloc(s, N * K * 4), yo = qgraph_arena_alloc(s, N * M * 4);
	int64_t bo = qgraph_arena_alloc(s, sizeof q8), io = qgraph_arena_alloc(s, sizeof pick);
	int64_t ro = qgraph_arena_alloc(s, G * K * 4);
	float *x = (float *)(arena + xo), *y = (float *)(arena + yo), *rows = (float *)(arena + ro);
	uint64_t h = 0, hp = 0, hd = 0;
	enum qgraph_type st = QGRAPH_TYPE_F32, sd = QGRAPH_TYPE_F32;
	unsigned char dg[32];

	fill(w, M * K, &rng);
	fill(x, N * K, &rng);
	qgraph_quantize(QGRAPH_TYPE_Q8_0, w, q8, sizeof q8, M, K, NULL);
	qgraph_dequantize(QGRAPH_TYPE_Q8_0, q8, deq, sizeof deq, M, K);
	memcpy(arena + io, pick, sizeof pick);
	int r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q8_0, .target = QGRAPH_TYPE_Q8_0_4X4,
			.rows = M, .cols = K, .data = q8, .flags = QGRAPH_UPLOAD_SEND), &h, &st);
	if (!tap_ok(r == 0 && st == QGRAPH_TYPE_Q8_0_4X4, "q8_0 bytes stored as q8_0_4x4 (%s)",
		    r ? qgraph_session_error(s) : qgraph_type_name(st)))
		goto out;
	tap_ok(qgraph_weights_digest(QGRAPH_TYPE_Q8_0, M, K, q8, dg) == 0 &&
	       qgraph_weights_open_digest(s, QGRAPH_TYPE_Q8_0, M, K, dg, &hd, &sd) == 0 && sd == QGRAPH_TYPE_Q8_0_4X4,
	       "the digest of ggml's q8_0 bytes finds them in their layout");
	if (hd)
		qgraph_weights_free(s, hd);

	/* read back, rows gathered, and multiplied, in one graph */
	struct qgraph_graph *g = qgraph_graph_new();
	int wi = qgraph_graph_weights(g, h, st, M, K);
	int ii = qgraph_graph_input(g, QGRAPH_TYPE_I32, 1, (const int64_t[]){ G }, io);
	int xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, (const int64_t[]){ K, N }, xo);
	qgraph_graph_output(g, qgraph_graph_cast(g, wi, QGRAPH_TYPE_Q8_0), bo);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_GET_ROWS, wi, ii, 0), ro);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, xi, 0), yo);
	r = submit_wait(s, g, 0, NULL);
	qgraph_graph_free(g);
	if (!tap_ok(r == 0, "cast, get_rows and mul_mat of q8_0_4x4 weights in one graph%s%s", r ? ": " : "",
		    r ? qgraph_session_error(s) : ""))
		goto out;
	tap_ok(memcmp(arena + bo, q8, sizeof q8) == 0, "read back as q8_0: ggml's bytes, every scale and code");
	int same = 1;
	for (int i = 0; i < G; i++)
		same &= memcmp(rows + i * K, deq + pick[i] * K, K * sizeof(float)) == 0;
	tap_ok(same, "get_rows gathers rows 5, 0, 23, 10 as plain q8_0 dequantizes them");

	/* plain q8_0 of the same bytes: the same sums, rounded in another order */
	r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q8_0, .target = QGRAPH_TYPE_Q8_0,
			.rows = M, .cols = K, .data = q8, .flags = QGRAPH_UPLOAD_SEND), &hp, &sd);
	if (r == 0 && sd == QGRAPH_TYPE_Q8_0) {
		memcpy(ref, y, sizeof ref);
		g = qgraph_graph_new();
		wi = qgraph_graph_weights(g, hp, sd, M, K);
		xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, (const int64_t[]){ K, N }, xo);
		qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, xi, 0), yo);
		r = submit_wait(s, g, 0, NULL);
		qgraph_graph_free(g);
		double e = max_rel(y, ref, N * M);
		tap_ok(r == 0 && e < 1e-5, "mul_mat of q8_0_4x4 within rounding of plain q8_0 (err %.1e)", e);
	} else {
		/* a daemon on a dotprod CPU stores q8_0 in the layout itself */
		tap_ok(r == 0 && sd == QGRAPH_TYPE_Q8_0_4X4, "q8_0 stored as this CPU's layout (%s)",
		       r ? qgraph_session_error(s) : qgraph_type_name(sd));
	}

	r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q8_0, .target = QGRAPH_TYPE_Q8_0_4X4,
			.rows = 6, .cols = K, .data = q8, .flags = QGRAPH_UPLOAD_SEND), &hd, NULL);
	tap_ok(r == -EINVAL && strstr(qgraph_session_error(s), "multiple"), "6 rows into q8_0_4x4 are refused: %s",
	       qgraph_session_error(s));
	r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q8_0, .target = QGRAPH_TYPE_Q4_0,
			.rows = M, .cols = K, .data = q8), &hd, NULL);
	tap_ok(r == -EINVAL, "q8_0 into q4_0 is refused: %s", qgraph_session_error(s));
	qgraph_quantize(QGRAPH_TYPE_Q4_0, w, q8, sizeof q8, M, K, NULL);
	r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0, .target = QGRAPH_TYPE_Q8_0_4X4,
			.rows = M, .cols = K, .data = q8), &hd, NULL);
	tap_ok(r == -EINVAL, "q4_0 into q8_0_4x4 is refused: %s", qgraph_session_error(s));
out:
	if (hp)
		qgraph_weights_free(s, hp);
	if (h)
		qgraph_weights_free(s, h);
	qgraph_arena_free(s, ro);
	qgraph_arena_free(s, io);
	qgraph_arena_free(s, bo);
	qgraph_arena_free(s, yo);
	qgraph_arena_free(s, xo);
}

/*
 * Q4_K and Q6_K weights: quantized by the daemon from f32 or sent as ggml's
 * bytes, stored as they are, found again by their digest, multiplied as the
 * in-process engine does; what they cannot hold is refused.
 */
static void test_kquant(struct qgraph_session *s)
{
	enum { M = 48, K = 512, N = 5 };
	static const enum qgraph_type types[] = { QGRAPH_TYPE_Q4_K, QGRAPH_TYPE_Q6_K };
	struct tap_rng rng = { 7 };
	static float w[M * K], ref[N * M];
	static unsigned char wq[M * K / 256 * 210];
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t xo = qgraph_arena_alloc(s, N * K * 4), yo = qgraph_arena_alloc(s, N * M * 4);
	float *x = (float *)(arena + xo), *y = (float *)(arena + yo);

	fill(w, M * K, &rng);
	fill(x, N * K, &rng);
	for (size_t t = 0; t < 2; t++) {
		const char *tn = qgraph_type_name(types[t]);
		uint64_t h, h2;
		enum qgraph_type stored = QGRAPH_TYPE_F32, stored2 = QGRAPH_TYPE_F32;
		int r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = types[t],
				.rows = M, .cols = K, .data = w), &h, &stored);
		if (!tap_ok(r == 0 && stored == types[t], "upload f32 as %s weights (stored as %s)", tn,
			    r ? "-" : qgraph_type_name(stored))) {
			tap_diag("%s", qgraph_session_error(s));
			continue;
		}
		/* ggml's bytes of the same values: the digest finds what the daemon quantized */
		qgraph_quantize(types[t], w, wq, sizeof wq, M, K, NULL);
		unsigned char dg[32];
		uint64_t hd = 0;
		tap_ok(qgraph_weights_digest(types[t], M, K, wq, dg) == 0 &&
		       qgraph_weights_open_digest(s, types[t], M, K, dg, &hd, &stored2) == 0 && stored2 == types[t],
		       "%s: the digest of ggml's bytes finds the weights the daemon quantized", tn);
		if (hd)
			qgraph_weights_free(s, hd);
		r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = types[t], .target = types[t], .rows = M,
				.cols = K, .data = wq), &h2, &stored2);
		tap_ok(r == 0 && stored2 == types[t], "upload %s bytes as they are", tn);

		/* a graph that names them with another width: not whole super-blocks, or not theirs */
		int refused = 0;
		for (int64_t c = K / 2 + 32; c >= K / 2; c -= 32) {
			struct qgraph_graph *gb = qgraph_graph_new();
			int64_t bne[2] = { c, N };
			int bw = qgraph_graph_weights(gb, h2, stored2, M, c);
			int bx = qgraph_graph_input(gb, QGRAPH_TYPE_F32, 2, bne, xo);
			int bo = bw < 0 || bx < 0 ? -1 : qgraph_graph_op(gb, QGRAPH_OP_MUL_MAT, bw, bx, 0);
			refused += bo < 0 || qgraph_graph_output(gb, bo, yo) < 0 || submit_wait(s, gb, 0, NULL) != 0;
			qgraph_graph_free(gb);
		}
		tap_ok(refused == 2, "%s: a graph naming the weights %d or %d columns wide is refused", tn, K / 2 + 32,
		       K / 2);
		struct qgraph_graph *g = qgraph_graph_new();
		int64_t xne[2] = { K, N };
		int wi = qgraph_graph_weights(g, h2, stored2, M, K);
		int xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
		qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, xi, 0), yo);
		r = submit_wait(s, g, 0, NULL);
		struct qg_mm mm = { .wtype = (enum qg_type)qg_wire_engine_type_of_public(types[t]), .w = wq, .m = M,
				    .k = K, .x = x, .ldx = K, .n = N, .y = ref, .ldy = M };
		void *scratch = aligned_alloc(64, (qg_mul_mat_scratch_size(&mm) + 63) & ~(size_t)63);
		qg_mul_mat(&mm, scratch);
		/* the same kernels on the same bytes: every K-quant kernel gives the reference's bits */
		tap_ok(r == 0 && memcmp(y, ref, sizeof ref) == 0, "mul_mat %s through the daemon equals the engine bit for bit",
		       tn);
		free(scratch);
		qgraph_graph_free(g);
		tap_ok(qgraph_weights_free(s, h2) == 0 && qgraph_weights_free(s, h) == 0, "free %s weights", tn);
	}
	uint64_t h;
	tap_ok(qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_K,
			.rows = M, .cols = 128, .data = w), &h, NULL) == -EINVAL &&
	       strstr(qgraph_session_error(s), "256"), "128 columns into q4_K is refused: %s", qgraph_session_error(s));
	qgraph_quantize(QGRAPH_TYPE_Q4_0, w, wq, sizeof wq, M, K, NULL);
	tap_ok(qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0, .target = QGRAPH_TYPE_Q4_K,
			.rows = M, .cols = K, .data = wq), &h, NULL) == -EINVAL,
	       "q4_0 into q4_K is refused: %s", qgraph_session_error(s));
	qgraph_quantize(QGRAPH_TYPE_Q6_K, w, wq, sizeof wq, M, K, NULL);
	tap_ok(qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q6_K, .target = QGRAPH_TYPE_Q4_0,
			.rows = M, .cols = K, .data = wq), &h, NULL) == -EINVAL,
	       "q6_K stored as anything but q6_K is refused: %s", qgraph_session_error(s));
	qgraph_arena_free(s, xo);
	qgraph_arena_free(s, yo);
}

/* A registered graph runs again on new inputs; events record its runs. */
static void test_registered(struct qgraph_session *s)
{
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t ao = qgraph_arena_alloc(s, 256), yo = qgraph_arena_alloc(s, 256);
	float *a = (float *)(arena + ao), *y = (float *)(arena + yo);
	int64_t ne[1] = { 16 };
	struct qgraph_graph *g = qgraph_graph_new();
	uint64_t handle = 0, id;
	struct qgraph_result res = QGRAPH_RESULT_INIT;

	for (int i = 0; i < 16; i++)
		a[i] = (float)i;
	int ai = qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, ao);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_ADD, ai, ai, 0), yo);
	qgraph_graph_record(g, 3, 1);
	int r = submit_wait(s, g, QGRAPH_SUBMIT_KEEP, &handle);
	tap_ok(r == 0 && handle && y[5] == 10.0f, "register a graph: it runs and returns a handle");
	tap_ok(qgraph_event_sync(s, 3, 1, 1000) == 0 && qgraph_event_query(s, 3, 1) == 1 &&
	       qgraph_event_query(s, 3, 2) == 0, "its event was recorded");
	int ok = 1;
	for (int k = 0; k < 50 && ok; k++) {
		a[1] = (float)k;
		struct qgraph_graph *ev = qgraph_graph_new();
		qgraph_graph_record(ev, 3, (uint32_t)k + 2);
		ok = qgraph_run(s, handle, ev, QGRAPH_SUBMIT_BLOCK, &id) == 0 && qgraph_event_sync(s, 3, (uint32_t)k + 2, 2000) == 0 &&
		     qgraph_wait(s, id, 2000, &res) == 0 && res.status == 0 && y[1] == 2.0f * (float)k;
		qgraph_graph_free(ev);
	}
	tap_ok(ok, "run it 50 times with new inputs, waiting on its event each time");
	tap_ok(qgraph_run(s, handle + 1000, NULL, QGRAPH_SUBMIT_BLOCK, &id) == 0 && qgraph_wait(s, id, 2000, &res) == 0 &&
	       res.status == -ENOENT, "an unknown graph handle is refused");
	tap_ok(qgraph_graph_unregister(s, handle) == 0 && qgraph_graph_unregister(s, handle) == -ENOENT,
	       "unregister it, once");
	qgraph_graph_free(g);
	qgraph_arena_free(s, ao);
	qgraph_arena_free(s, yo);
}

/*
 * A registered graph large enough for the executor, run again and again
 * on new inputs: each result checked against the engine in this process.
 * Its runs after the first have an expected end, which the loop polls for
 * when the pool leaves it a CPU (daemon-epoll.sh runs one compute thread).
 */
static void test_registered_large(struct qgraph_session *s)
{
	enum { M = 256, K = 256, N = 32, RUNS = 6 };	/* 2 M multiply-accumulates: past the inline limit */
	struct tap_rng rng = { 23 };
	static float w[M * K], ref[N * M];
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t xo = qgraph_arena_alloc(s, N * K * 4), yo = qgraph_arena_alloc(s, N * M * 4);
	float *x = (float *)(arena + xo), *y = (float *)(arena + yo);
	uint64_t h, handle = 0, id;
	struct qgraph_result res = QGRAPH_RESULT_INIT;

	fill(w, M * K, &rng);
	if (!tap_ok(qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
			.rows = M, .cols = K, .data = w), &h, NULL) == 0,
		    "upload weights for a large registered graph"))
		return;
	struct qgraph_graph *g = qgraph_graph_new();
	int64_t xne[2] = { K, N };
	int wi = qgraph_graph_weights(g, h, QGRAPH_TYPE_F32, M, K);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo), 0),
			    yo);
	fill(x, N * K, &rng);
	int ok = submit_wait(s, g, QGRAPH_SUBMIT_KEEP, &handle) == 0 && handle;
	struct qg_mm mm = { .wtype = QG_TYPE_F32, .w = w, .m = M, .k = K, .x = x, .ldx = K, .n = N, .y = ref, .ldy = M };
	void *scratch = aligned_alloc(64, (qg_mul_mat_scratch_size(&mm) + 63) & ~(size_t)63);
	double worst = 0;
	for (int k = 0; k < RUNS && ok; k++) {
		fill(x, N * K, &rng);
		ok = qgraph_run(s, handle, NULL, QGRAPH_SUBMIT_BLOCK, &id) == 0 && qgraph_wait(s, id, 60000, &res) == 0 &&
		     res.status == 0;
		qg_mul_mat(&mm, scratch);
		double e = max_rel(y, ref, N * M);
		worst = e > worst ? e : worst;
		ok &= e < 1e-5;
	}
	tap_ok(ok, "a registered %dx%dx%d mul_mat run %d times on new inputs: each equals the engine (err %.1e)", M, K,
	       N, RUNS, worst);
	qgraph_graph_unregister(s, handle);
	qgraph_weights_free(s, h);
	free(scratch);
	qgraph_graph_free(g);
	qgraph_arena_free(s, xo);
	qgraph_arena_free(s, yo);
}

/* One client process: N graphs of its own, every result checked.  Exit 0 if all were right. */
static int client_proc(int who, int n)
{
	struct qgraph_session *s = connect_one("daemon-test worker");
	if (!s)
		return 10;
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t ao = qgraph_arena_alloc(s, 4096), yo = qgraph_arena_alloc(s, 4096);
	float *a = (float *)(arena + ao), *y = (float *)(arena + yo);
	int64_t ne[1] = { 256 };
	uint64_t h, id;
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	struct qgraph_graph *g = qgraph_graph_new();
	int ai = qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, ao);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_SCALE, ai, -1, 3.0f), yo);
	if (submit_wait(s, g, QGRAPH_SUBMIT_KEEP, &h))
		return 11;
	for (int i = 0; i < n; i++) {
		float v = (float)(who * 100000 + i);
		a[0] = v;
		a[255] = -v;
		if (qgraph_run(s, h, NULL, QGRAPH_SUBMIT_BLOCK, &id) || qgraph_wait(s, id, 10000, &res) || res.status)
			return 12;
		if (y[0] != 3 * v || y[255] != -3 * v)
			return 13;	/* lost, duplicated or mixed up with another client */
	}
	qgraph_graph_free(g);
	qgraph_session_close(s);
	return 0;
}

static void test_many_clients(struct qgraph_session *s)
{
	int n = 50 + 150 * tap_scale(), bad = 0;
	pid_t kids[8];

	for (int i = 0; i < 8; i++)
		if ((kids[i] = tap_fork()) == 0)
			_exit(client_proc(i + 1, n));
	for (int i = 0; i < 8; i++) {
		int st;
		waitpid(kids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			tap_diag("client %d: status %#x", i, st);
			bad++;
		}
	}
	tap_ok(bad == 0, "8 client processes, %d graphs each, every result right", n);
	/* the daemon notices each hang-up on its next pass */
	long long sessions = -1;
	for (int i = 0; i < 50 && sessions != 1; i++) {
		usleep(20000);
		sessions = daemon_stat(s, "sessions");
	}
	tap_ok(sessions == 1, "their sessions are gone when they are (%lld left)", sessions);
}

static void test_killed_client(struct qgraph_session *s)
{
	long long pinned0 = daemon_stat(s, "pinned_bytes");
	int p[2];

	pipe(p);
	pid_t kid = tap_fork();
	if (kid == 0) {
		struct qgraph_session *c = connect_one("doomed");
		static float w[256 * 256];
		uint64_t h;
		if (c)
			qgraph_weights_upload(c, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0,
					.rows = 256, .cols = 256, .data = w), &h, NULL);
		(void)!write(p[1], "u", 1);
		client_proc(9, 1 << 30);	/* busy until killed */
		_exit(0);
	}
	char ch;
	(void)!read(p[0], &ch, 1);
	usleep(50000);
	tap_ok(daemon_stat(s, "sessions") >= 2 && daemon_stat(s, "pinned_bytes") > pinned0,
	       "a client holds weights and is busy with graphs");
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	long long sessions = -1, pinned = -1;
	for (int i = 0; i < 100 && (sessions != 1 || pinned != pinned0); i++) {
		usleep(20000);
		sessions = daemon_stat(s, "sessions");
		pinned = daemon_stat(s, "pinned_bytes");
	}
	tap_ok(sessions == 1 && pinned == pinned0, "SIGKILLed, its session and weights are freed (%lld, %lld)",
	       sessions, pinned);
	close(p[0]);
	close(p[1]);
}

/*
 * A long graph is cancelled while it runs; meanwhile the daemon serves
 * another session; the graph's completion and its event carry -ECANCELED,
 * and the session works on afterwards.
 */
static void test_cancel(struct qgraph_session *s)
{
	enum { D = 512, N = 64, NODES = 1000 };
	static float w[D * D];
	struct tap_rng rng = { 11 };
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t xo = qgraph_arena_alloc(s, D * N * 4), yo = qgraph_arena_alloc(s, D * N * 4);
	uint64_t h, id, cid;
	struct qgraph_result res = { 0 }, cres = { 0 };

	for (size_t i = 0; i < D * D; i++)
		w[i] = tap_randf(&rng, -1.0f, 1.0f) / D;
	fill((float *)(arena + xo), D * N, &rng);
	if (!tap_ok(qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
			.rows = D, .cols = D, .data = w), &h, NULL) == 0,
		    "cancel: upload f32 weights"))
		return;
	struct qgraph_graph *g = qgraph_graph_new();
	int64_t xne[2] = { D, N };
	int wi = qgraph_graph_weights(g, h, QGRAPH_TYPE_F32, D, D);
	int x = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
	for (int i = 0; i < NODES; i++)
		x = qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, x, 0);
	qgraph_graph_output(g, x, yo);
	qgraph_graph_record(g, 5, 77);
	int r = qgraph_submit(s, g, QGRAPH_SUBMIT_BLOCK, &id);
	usleep(100000);

	/* another client is served while the long graph runs */
	struct qgraph_session *o = connect_one("bystander");
	struct qgraph_graph *t = qgraph_graph_new();
	int64_t ne[1] = { 16 };
	unsigned char *oa = o ? qgraph_arena(o, NULL) : NULL;
	if (oa)
		for (int i = 0; i < 16; i++)
			((float *)oa)[i] = (float)i;
	qgraph_graph_output(t, qgraph_graph_op(t, QGRAPH_OP_ADD, qgraph_graph_input(t, QGRAPH_TYPE_F32, 1, ne, 0),
					       qgraph_graph_input(t, QGRAPH_TYPE_F32, 1, ne, 0), 0), 4096);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int ro = o ? submit_wait(o, t, 0, NULL) : -1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	int still = qgraph_event_query(s, 5, 77) == 0;
	tap_ok(ro == 0 && oa && ((float *)(oa + 4096))[15] == 30.0f && still,
	       "another session's graph runs (%.1f ms) while the long one is still running", secs * 1e3);

	int rc = r ? r : qgraph_cancel(s, id, &cid);
	if (!rc)
		rc = qgraph_wait(s, cid, 10000, &cres);
	if (!rc)
		rc = qgraph_wait(s, id, 10000, &res);
	tap_ok(r == 0 && rc == 0 && cres.status == 0 && res.status == -ECANCELED,
	       "the running graph is cancelled (cancel %d, graph %d: %s)", cres.status, res.status,
	       qgraph_session_error(s));
	tap_ok(qgraph_event_sync(s, 5, 77, 1000) == -ECANCELED, "its event records -ECANCELED");
	cres.status = 1;
	rc = qgraph_cancel(s, id, &cid);
	if (!rc)
		rc = qgraph_wait(s, cid, 10000, &cres);
	tap_ok(rc == 0 && cres.status == -ENOENT, "cancelling it again: nothing to cancel (%d)", cres.status);
	tap_ok(submit_wait(s, t, 0, NULL) == 0, "the session works on after the cancel");
	qgraph_graph_free(t);
	qgraph_graph_free(g);
	qgraph_session_close(o);
	qgraph_weights_free(s, h);
	qgraph_arena_free(s, xo);
	qgraph_arena_free(s, yo);
}

/*
 * A client SIGKILLed while its long graph runs on the executor: the graph
 * is stopped, the session freed, and the daemon's accounting (sessions,
 * pinned bytes, pool in use, plans) returns to where it was.
 */
static void test_killed_mid_graph(struct qgraph_session *s)
{
	long long sessions0 = daemon_stat(s, "sessions"), pinned0 = daemon_stat(s, "pinned_bytes");
	long long used0 = daemon_stat(s, "pool_used"), plans0 = daemon_stat(s, "plans");
	int p[2];

	if (pipe(p))
		return (void)tap_ok(0, "pipe");
	pid_t kid = tap_fork();
	if (kid == 0) {
		enum { D = 512, N = 64 };
		static float w[D * D];
		struct qgraph_session *c = connect_one("killed mid-graph");
		uint64_t h, ka, id;
		for (size_t i = 0; i < D * D; i++)
			w[i] = 1.0f / D;
		if (!c || qgraph_weights_upload(c, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
				.rows = D, .cols = D, .data = w), &h, NULL))
			_exit(1);
		int64_t xo = qgraph_arena_alloc(c, D * N * 4), yo = qgraph_arena_alloc(c, D * N * 4);
		struct qgraph_graph *g = qgraph_graph_new();
		int64_t xne[2] = { D, N };
		int wi = qgraph_graph_weights(g, h, QGRAPH_TYPE_F32, D, D);
		int x = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
		for (int i = 0; i < 2000; i++)
			x = qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, x, 0);
		qgraph_graph_output(g, x, yo);
		/* start it and die in the middle (it would run for minutes, under qemu for hours) */
		(void)ka;
		if (qgraph_submit(c, g, QGRAPH_SUBMIT_BLOCK, &id))
			_exit(3);
		(void)!write(p[1], "r", 1);
		pause();
		_exit(0);
	}
	char ch = 0;
	(void)!read(p[0], &ch, 1);
	usleep(100000);
	long long running = daemon_stat(s, "sessions");
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	long long sessions = -1, pinned = -1, used = -1, plans = -1;
	for (int i = 0; i < 250 && (sessions != sessions0 || pinned != pinned0 || used != used0 || plans != plans0); i++) {
		usleep(20000);
		sessions = daemon_stat(s, "sessions");
		pinned = daemon_stat(s, "pinned_bytes");
		used = daemon_stat(s, "pool_used");
		plans = daemon_stat(s, "plans");
	}
	tap_ok(ch == 'r' && running == sessions0 + 1 && sessions == sessions0 && pinned == pinned0 && used == used0 &&
		       plans == plans0,
	       "killed while its graph ran: sessions %lld, pinned %lld, pool used %lld, plans %lld are back "
	       "(%lld %lld %lld %lld)", sessions, pinned, used, plans, sessions0, pinned0, used0, plans0);
	close(p[0]);
	close(p[1]);
}

/*
 * Without --cpus the compute threads (the executor and its workers) are
 * pinned one to a CPU the daemon may use: left unpinned, a woken worker
 * was placed on its waker's CPU and the two shared it for a scheduler
 * slice (a 0.25 ms GEMV took 2.5 ms in a fresh daemon).  They are told by
 * their names, qgd-exec and qg-cpuN: the event loop's thread is on one CPU
 * for a moment too, whenever it moves off a compute thread's.
 */
static void test_pinned_pool(struct qgraph_session *s)
{
	const char *exec = getenv("QG_EXEC");
	char path[320], line[256], comm[32];
	cpu_set_t usable;
	int named = 0, pinned = 0, distinct = 0, seen[CPU_SETSIZE] = { 0 };

	if ((exec && *exec) || sched_getaffinity(0, sizeof usable, &usable)) {
		tap_skip("the daemon's threads are an emulator's");
		return;
	}
	long threads = daemon_stat(s, "threads");
	snprintf(path, sizeof path, "/proc/%d/task", (int)d.pid);
	DIR *dir = opendir(path);
	for (struct dirent *e; dir && (e = readdir(dir));) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/%d/task/%s/comm", (int)d.pid, e->d_name);
		FILE *f = fopen(path, "r");
		int compute = f && fgets(comm, sizeof comm, f) &&
			      (strcmp(comm, "qgd-exec\n") == 0 || strncmp(comm, "qg-cpu", 6) == 0);
		if (f)
			fclose(f);
		if (!compute)
			continue;
		named++;
		snprintf(path, sizeof path, "/proc/%d/task/%s/status", (int)d.pid, e->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof line, f)) {
			int cpu;
			char rest;
			if (sscanf(line, "Cpus_allowed_list: %d%c", &cpu, &rest) == 2 && rest == '\n' && cpu >= 0 &&
			    cpu < CPU_SETSIZE) {
				pinned++;
				distinct += seen[cpu]++ == 0;
			}
		}
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	long want = threads < CPU_COUNT(&usable) ? threads : CPU_COUNT(&usable);
	tap_ok(threads > 0 && named == threads && pinned == named && distinct == want,
	       "the %ld compute threads are pinned, one to each of %d CPUs (%d named, %d pinned, on %d CPUs)", threads,
	       CPU_COUNT(&usable), named, pinned, distinct);
}

/*
 * The structs that will grow carry their size: options of an older (smaller)
 * struct take the defaults for the rest, a newer one's unknown fields are
 * refused unless zero; a result is filled no further than its caller's size.
 */
static void test_sizes(void)
{
	struct {
		struct qgraph_connect_opts o;
		uint64_t later;		/* a field of a version to come */
	} big = { .o = { .size = sizeof big, .name = "sizes" }, .later = 1 };
	struct qgraph_session *s = NULL;
	char err[256];

	tap_ok(qgraph_connect(&big.o, &s, err, sizeof err) == -E2BIG && s == NULL,
	       "connect options with a set field this library does not know: -E2BIG");
	big.later = 0;
	int r = qgraph_connect(&big.o, &s, err, sizeof err);
	tap_ok(r == 0 && s, "a larger struct whose unknown fields are zero connects (%s)", r ? err : "ok");
	qgraph_session_close(s);
	s = NULL;
	struct qgraph_connect_opts old = { .size = offsetof(struct qgraph_connect_opts, arena_bytes), .name = "sizes",
					   .arena_bytes = 1 };	/* past its size: not read */
	r = qgraph_connect(&old, &s, err, sizeof err);
	tap_ok(r == 0 && s, "an older struct (no arena_bytes) connects with the default arena (%s)", r ? err : "ok");
	struct qgraph_connect_opts tiny = { .size = 1 };
	struct qgraph_session *t = NULL;
	tap_ok(qgraph_connect(&tiny, &t, err, sizeof err) == -EINVAL && t == NULL, "a size that cannot hold itself: -EINVAL");

	struct qgraph_graph *g = qgraph_graph_new();
	int64_t ne[1] = { 16 };
	int64_t xo = s ? qgraph_arena_alloc(s, 64) : -1, yo = s ? qgraph_arena_alloc(s, 64) : -1;
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_SILU, qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, xo), -1, 0),
			    yo);
	struct qgraph_result res;
	memset(&res, 0xa5, sizeof res);
	res.size = offsetof(struct qgraph_result, handle);	/* a caller that knows status alone */
	uint64_t id, untouched;
	memset(&untouched, 0xa5, sizeof untouched);
	r = s && xo >= 0 && yo >= 0 ? qgraph_submit(s, g, QGRAPH_SUBMIT_KEEP, &id) : -1;
	if (r == 0)
		r = qgraph_wait(s, id, 10000, &res);
	tap_ok(r == 0 && res.status == 0 && res.size == offsetof(struct qgraph_result, handle) &&
	       res.handle == untouched, "a result is filled up to its caller's size and no further");
	qgraph_graph_free(g);
	qgraph_session_close(s);
}

/*
 * Names a client sends are quoted in the daemon's refusals: one holding a
 * newline and a log line's prefix, or a journal's "<0>", must stay inside
 * the line that quotes it (the refusal is logged before it is answered).
 */
static void test_forged_names(void)
{
	static const char forged[] = "x\n2099-01-01T00:00:00.000Z qgraphd error: forged by a name";
	static const char journal[] = "y\n<0>qgraphd: forged by a model name\x1b[2J";
	struct qgraph_session *s = connect_one("forger");
	uint64_t h;

	if (!s) {
		tap_skip("no session");
		return;
	}
	int r = qgraph_weights_open(s, forged, &h, NULL, NULL, NULL);
	int u = qgraph_model_unload(s, journal);
	qgraph_session_close(s);
	tap_ok(r == -ENOENT && u == -ENOENT, "weights and a model named with a newline: not found (%d, %d)", r, u);
	tap_ok(daemon_log_has(&d, "no weights named \"x\\n2099-01-01T00:00:00.000Z qgraphd error: forged by a name\""),
	       "the refusal quotes the weights name, its newline escaped");
	tap_ok(daemon_log_has(&d, "no model \"y\\n<0>qgraphd: forged by a model name\\x1b[2J\""),
	       "the refusal quotes the model name, newline and escape byte escaped");

	/* no line of the log starts with what a name said, nor holds a control byte */
	char line[2048];
	int forged_lines = 0, control = 0;
	FILE *f = fopen(d.log, "r");
	while (f && fgets(line, sizeof line, f)) {
		forged_lines += strncmp(line, "2099-", 5) == 0 || strncmp(line, "<0>", 3) == 0;
		for (char *c = line; *c; c++)
			control += ((unsigned char)*c < 0x20 && *c != '\n') || *c == 0x7f;
	}
	if (f)
		fclose(f);
	tap_ok(f && forged_lines == 0 && control == 0, "no forged line in the log (%d), no control byte (%d)",
	       forged_lines, control);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	int r = daemon_start(&d, NULL);
	if (!tap_ok(r == 0, "start qgraphd on %s (%d)", d.sock, r)) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return tap_done();
	}
	struct qgraph_session *s = connect_one("daemon-test");
	if (!tap_ok(s != NULL, "connect")) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return tap_done();
	}
	tap_ok(strstr(qgraph_session_info(s), "kernel q4_0_8x8") != NULL, "the welcome names the kernels");
	test_pinned_pool(s);
	test_ops(s);
	test_ggml_ops(s);
	test_views(s);
	test_mul_mat(s);
	test_q8_0_layout(s);
	test_kquant(s);
	test_registered(s);
	test_registered_large(s);
	test_cancel(s);
	test_many_clients(s);
	test_killed_client(s);
	test_killed_mid_graph(s);
	test_sizes();
	test_forged_names();

	/* one daemon per socket */
	struct test_daemon d2 = { 0 };
	memcpy(d2.dir, d.dir, sizeof d.dir);
	r = daemon_start(&d2, NULL);
	tap_ok(r != 0 && d2.pid == 0, "a second daemon on the same socket refuses to start");

	/* the daemon dies: a waiting client learns within a second */
	int st = daemon_stop(&d, SIGKILL);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t id;
	struct qgraph_graph *g = qgraph_graph_new();
	int64_t ne[1] = { 16 };
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_SILU, qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, 0), -1, 0),
			    4096);
	r = qgraph_submit(s, g, 0, &id);
	if (r == 0)
		r = qgraph_wait(s, id, 10000, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	tap_ok(WIFSIGNALED(st) && r == -ENOTCONN && secs < 1.0, "daemon SIGKILLed: the client gets -ENOTCONN in %.2f s",
	       secs);
	qgraph_graph_free(g);
	qgraph_session_close(s);

	/* a daemon started over the stale socket works; SIGTERM ends it with 0 */
	r = daemon_start(&d, NULL);
	s = r == 0 ? connect_one("after") : NULL;
	tap_ok(r == 0 && s != NULL, "a new daemon replaces the stale socket");
	qgraph_session_close(s);
	st = daemon_stop(&d, SIGTERM);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGTERM: it exits 0");
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_cleanup(&d);
	return tap_done();
}
