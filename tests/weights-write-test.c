/*
 * weights-write-test.c - weights are read-only to graphs.  Two users share
 * weights through a share group: root uploads f32, f16, q8_0 and q4_0
 * weights and names them, another user (nobody) opens them and sends, by
 * hand in the wire form, every graph that would write into them: CPY into
 * each weights leaf, into a VIEW, RESHAPE, TRANSPOSE and PERMUTE of them
 * and a view of a view, and ops the allocator could run in place on views
 * of them.  Each write is refused with an error that says so, the in-place
 * candidates run without writing, read-only views of weights read the
 * right values, and root's results (MUL_MAT and GET_ROWS of every matrix)
 * are exactly what they were before.  Runs as root (to be two users), its
 * own daemon.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon-util.h"
#include "wire.h"
#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "tap.h"
#include "upload-opts.h"

enum { M = 64, K = 64, NX = 4, N_W = 4 };

static const char *const names[N_W] = { "ww-f32", "ww-f16", "ww-q8_0", "ww-q4_0" };
static const enum qgraph_type targets[N_W] = { QGRAPH_TYPE_F32, QGRAPH_TYPE_F16, QGRAPH_TYPE_Q8_0,
					       QGRAPH_TYPE_Q4_0 };
enum { F32, F16, Q8, Q4 };

static float w[M * K];

/* --- the owner's results ------------------------------------------------ */

#define OWNER_OUT 4096
#define OWNER_SLOT (K * M * 4)

/*
 * Root's graph over the weights H (stored as TYPES): MUL_MAT of each by
 * NX fixed rows, and GET_ROWS of every row of each plain one, into OUT
 * (N_W * 2 slots).  0, or -errno.
 */
static int owner_results(struct qgraph_session *s, const uint64_t *h, const enum qgraph_type *types, unsigned char *out)
{
	unsigned char *arena = qgraph_arena(s, NULL);
	float *x = (float *)arena;
	int32_t *idx = (int32_t *)(arena + 2048);
	struct qgraph_graph *g = qgraph_graph_new();
	int64_t xne[2] = { K, NX }, ine[1] = { M };
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	uint64_t id;

	for (int i = 0; i < K * NX; i++)
		x[i] = (float)((i * 7) % 13) * 0.125f - 0.75f;
	for (int i = 0; i < M; i++)
		idx[i] = M - 1 - i;
	int xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, 0);
	int ii = qgraph_graph_input(g, QGRAPH_TYPE_I32, 1, ine, 2048);
	for (int k = 0; k < N_W; k++) {
		int wi = qgraph_graph_weights(g, h[k], types[k], M, K);
		qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, xi, 0), OWNER_OUT + 2 * k * OWNER_SLOT);
		if (types[k] <= QGRAPH_TYPE_Q4_0)
			qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_GET_ROWS, wi, ii, 0),
					    OWNER_OUT + (2 * k + 1) * OWNER_SLOT);
	}
	memset(arena + OWNER_OUT, 0xff, 2 * N_W * OWNER_SLOT);
	int r = qgraph_submit(s, g, QGRAPH_SUBMIT_BLOCK, &id);
	if (!r)
		r = qgraph_wait(s, id, 10000, &res);
	if (!r)
		r = res.status;
	if (r)
		tap_diag("owner's graph: %d %s", r, qgraph_session_error(s));
	memcpy(out, arena + OWNER_OUT, 2 * N_W * OWNER_SLOT);
	qgraph_graph_free(g);
	return r;
}

/* --- graphs in the wire form, by hand ----------------------------------- */

#define MAXT 16
#define X_AT 0			/* the attacker's x: f32 K x M */
#define IDX_AT 16384		/* rows 0..3 */
#define IDX2_AT (16384 + 64)	/* rows 8..11 */
#define OUT1_AT 32768
#define OUT2_AT 65536

struct wg {
	size_t n;
	Qgraph__Tensor t[MAXT], *tp[MAXT];
	int64_t ne[MAXT][4];
	uint64_t nb[MAXT][4];
	uint32_t src[MAXT][2];
	int32_t ax[MAXT][4];
	float fp[MAXT];
	Qgraph__Span sp[MAXT];
};

/* Tensor OP of wire TYPE, shape NE (ND dimensions), on sources A and B (-1: none); its index. */
static int wg_add(struct wg *g, int type, int op, int nd, const int64_t *ne, int a, int b)
{
	size_t i = g->n++;
	Qgraph__Tensor *t = &g->t[i];

	qgraph__tensor__init(t);
	qgraph__span__init(&g->sp[i]);
	g->tp[i] = t;
	t->type = type;
	t->op = op;
	memcpy(g->ne[i], ne, (size_t)nd * sizeof *ne);
	t->n_ne = (size_t)nd;
	t->ne = g->ne[i];
	g->src[i][0] = (uint32_t)a;
	g->src[i][1] = (uint32_t)b;
	t->n_src = a < 0 ? 0 : b < 0 ? 1 : 2;
	t->src = g->src[i];
	return (int)i;
}

static int wg_2d(struct wg *g, int type, int op, int64_t ne0, int64_t ne1, int a, int b)
{
	return wg_add(g, type, op, 2, (const int64_t[]){ ne0, ne1 }, a, b);
}

static int wg_weights(struct wg *g, uint64_t handle, int type)
{
	int i = wg_2d(g, type, QGRAPH__OP__OP_NONE, K, M, -1, -1);

	g->t[i].weights = handle;
	return i;
}

/* An arena input of TYPE, NE0 x NE1 of ELEM-byte values, at AT. */
static int wg_input(struct wg *g, int type, int64_t ne0, int64_t ne1, size_t elem, uint64_t at)
{
	int i = wg_2d(g, type, QGRAPH__OP__OP_NONE, ne0, ne1, -1, -1);

	g->t[i].flags = 1;
	g->sp[i].offset = at;
	g->sp[i].bytes = (uint64_t)(ne0 * ne1) * elem;
	g->t[i].arena = &g->sp[i];
	return i;
}

/* Make tensor I (f32) an output at AT. */
static int wg_output(struct wg *g, int i, uint64_t at)
{
	uint64_t n = 4;

	for (size_t d = 0; d < g->t[i].n_ne; d++)
		n *= (uint64_t)g->ne[i][d];
	g->t[i].flags |= 2;
	g->sp[i].offset = at;
	g->sp[i].bytes = n;
	g->t[i].arena = &g->sp[i];
	return i;
}

/* A 2-D VIEW of A (of TYPE): NE0 x NE1, elements NB0 apart, rows NB1, from byte OFFSET. */
static int wg_view(struct wg *g, int type, int a, int64_t ne0, int64_t ne1, uint64_t nb0, uint64_t nb1,
		   uint64_t offset)
{
	int i = wg_2d(g, type, QGRAPH__OP__OP_VIEW, ne0, ne1, a, -1);

	g->nb[i][0] = nb0;
	g->nb[i][1] = nb1;
	g->t[i].n_nb = 2;
	g->t[i].nb = g->nb[i];
	g->t[i].view_offset = offset;
	return i;
}

static int wg_scale(struct wg *g, int a, float f)
{
	int i = wg_add(g, QGRAPH__TYPE__TYPE_F32, QGRAPH__OP__OP_SCALE, (int)g->t[a].n_ne, g->ne[a], a, -1);

	g->fp[i] = f;
	g->t[i].n_fparams = 1;
	g->t[i].fparams = &g->fp[i];
	return i;
}

static int wg_permute(struct wg *g, int a, int op, const int32_t *axes, int nd, const int64_t *ne)
{
	int i = wg_add(g, g->t[a].type, op, nd, ne, a, -1);

	if (op == QGRAPH__OP__OP_PERMUTE) {
		memcpy(g->ax[i], axes, sizeof g->ax[i]);
		g->t[i].n_iparams = 4;
		g->t[i].iparams = g->ax[i];
	}
	return i;
}

/* Submit G through S and wait: its status, and the error text in ERR. */
static int wg_run(struct qgraph_session *s, struct wg *g, char *err, size_t errlen)
{
	Qgraph__SubmitGraph sg = QGRAPH__SUBMIT_GRAPH__INIT;
	static uint8_t buf[8192];
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	uint64_t id;

	sg.n_tensors = g->n;
	sg.tensors = g->tp;
	size_t len = qgraph__submit_graph__pack(&sg, buf);
	int r = qgraph_submit_encoded(s, buf, len, QGRAPH_SUBMIT_BLOCK, &id);
	if (!r)
		r = qgraph_wait(s, id, 10000, &res);
	if (!r)
		r = res.status;
	snprintf(err, errlen, "%s", r ? qgraph_session_error(s) : "");
	return r;
}

/* --- the other user's attempts ------------------------------------------ */

enum expect { REFUSED, RUNS, SAME_OUTPUTS };

struct attempt {
	const char *what;
	enum expect expect;
	int status, right;
	char err[200];
};

static const int64_t big[1] = { K * M };

/*
 * Graph number K of the attempts on the weights H (wire types WT) into G:
 * its description and what must happen; NULL past the last.
 */
static const char *attempt_graph(int k, const uint64_t *h, const int *wt, struct wg *g, enum expect *expect)
{
	const int f32 = QGRAPH__TYPE__TYPE_F32;
	int x, idx, idx2, v, v2, xs, c;

	memset(g, 0, sizeof *g);
	x = wg_input(g, f32, K, M, 4, X_AT);
	idx = wg_input(g, QGRAPH__TYPE__TYPE_I32, NX, 1, 4, IDX_AT);
	idx2 = wg_input(g, QGRAPH__TYPE__TYPE_I32, NX, 1, 4, IDX2_AT);
	*expect = REFUSED;
	switch (k) {
	case 0:
		c = wg_2d(g, f32, QGRAPH__OP__OP_CPY, K, M, x, wg_weights(g, h[F32], wt[F32]));
		wg_output(g, wg_scale(g, c, 1.0f), OUT1_AT);
		return "CPY into f32 weights";
	case 1:
	case 2: {
		int which = k == 1 ? F16 : Q8;
		c = wg_2d(g, wt[which], QGRAPH__OP__OP_CPY, K, M, x, wg_weights(g, h[which], wt[which]));
		wg_output(g, wg_2d(g, f32, QGRAPH__OP__OP_GET_ROWS, K, NX, c, idx), OUT1_AT);
		return k == 1 ? "CPY into f16 weights" : "CPY into q8_0 weights";
	}
	case 3:
		v = wg_view(g, f32, wg_weights(g, h[F32], wt[F32]), K, 8, 4, 4 * K, 4 * K * 8);
		xs = wg_view(g, f32, x, K, 8, 4, 4 * K, 4 * K * 8);
		wg_output(g, wg_scale(g, wg_2d(g, f32, QGRAPH__OP__OP_CPY, K, 8, xs, v), 1.0f), OUT1_AT);
		return "CPY into a VIEW of f32 weights";
	case 4:
		v = wg_add(g, f32, QGRAPH__OP__OP_RESHAPE, 1, big, wg_weights(g, h[F32], wt[F32]), -1);
		xs = wg_add(g, f32, QGRAPH__OP__OP_RESHAPE, 1, big, x, -1);
		wg_output(g, wg_scale(g, wg_add(g, f32, QGRAPH__OP__OP_CPY, 1, big, xs, v), 1.0f), OUT1_AT);
		return "CPY into a RESHAPE of f32 weights";
	case 5: {
		const int64_t tne[2] = { M, K };
		v = wg_permute(g, wg_weights(g, h[F32], wt[F32]), QGRAPH__OP__OP_TRANSPOSE, NULL, 2, tne);
		xs = wg_permute(g, x, QGRAPH__OP__OP_TRANSPOSE, NULL, 2, tne);
		wg_output(g, wg_scale(g, wg_add(g, f32, QGRAPH__OP__OP_CPY, 2, tne, xs, v), 1.0f), OUT1_AT);
		return "CPY into a TRANSPOSE of f32 weights";
	}
	case 6: {
		const int32_t axes[4] = { 0, 2, 1, 3 };
		const int64_t pne[3] = { K, 1, M };
		v = wg_permute(g, wg_weights(g, h[F32], wt[F32]), QGRAPH__OP__OP_PERMUTE, axes, 3, pne);
		xs = wg_permute(g, x, QGRAPH__OP__OP_PERMUTE, axes, 3, pne);
		wg_output(g, wg_scale(g, wg_add(g, f32, QGRAPH__OP__OP_CPY, 3, pne, xs, v), 1.0f), OUT1_AT);
		return "CPY into a PERMUTE of f32 weights";
	}
	case 7:
		v = wg_view(g, wt[F16], wg_weights(g, h[F16], wt[F16]), K, 8, 2, 2 * K, 2 * K * 8);
		xs = wg_view(g, f32, x, K, 8, 4, 4 * K, 4 * K * 8);
		c = wg_2d(g, wt[F16], QGRAPH__OP__OP_CPY, K, 8, xs, v);
		wg_output(g, wg_2d(g, f32, QGRAPH__OP__OP_GET_ROWS, K, NX, c, idx), OUT1_AT);
		return "CPY into a VIEW of f16 weights";
	case 8:
		v = wg_view(g, wt[Q8], wg_weights(g, h[Q8], wt[Q8]), K, 8, 34, 68, 68 * 8);
		xs = wg_view(g, f32, x, K, 8, 4, 4 * K, 4 * K * 8);
		c = wg_2d(g, wt[Q8], QGRAPH__OP__OP_CPY, K, 8, xs, v);
		wg_output(g, wg_2d(g, f32, QGRAPH__OP__OP_GET_ROWS, K, NX, c, idx), OUT1_AT);
		return "CPY into a VIEW of q8_0 weights";
	case 9:
		v = wg_view(g, f32, wg_weights(g, h[F32], wt[F32]), K, 16, 4, 4 * K, 0);
		v2 = wg_view(g, f32, v, K, 8, 4, 4 * K, 4 * K * 4);
		xs = wg_view(g, f32, x, K, 8, 4, 4 * K, 0);
		wg_output(g, wg_scale(g, wg_2d(g, f32, QGRAPH__OP__OP_CPY, K, 8, xs, v2), 1.0f), OUT1_AT);
		return "CPY into a VIEW of a VIEW of f32 weights";
	case 10:
		v = wg_weights(g, h[F32], wt[F32]);
		wg_output(g, wg_scale(g, wg_2d(g, f32, QGRAPH__OP__OP_CPY, K, M, v, v), 1.0f), OUT1_AT);
		return "CPY of f32 weights into themselves";
	case 11:
		/* the ADDs could take their first source's bytes in place: a view of weights, and weights */
		*expect = SAME_OUTPUTS;
		v = wg_weights(g, h[F32], wt[F32]);
		xs = wg_view(g, f32, v, K, M, 4, 4 * K, 0);
		wg_output(g, wg_scale(g, wg_2d(g, f32, QGRAPH__OP__OP_ADD, K, M, xs, x), 1.0f), OUT1_AT);
		wg_output(g, wg_scale(g, wg_2d(g, f32, QGRAPH__OP__OP_ADD, K, M, v, x), 1.0f), OUT2_AT);
		return "ADD on a VIEW of f32 weights (an in-place candidate) runs, and writes nothing into them";
	case 12:
		*expect = RUNS;
		v = wg_add(g, f32, QGRAPH__OP__OP_RESHAPE, 1, big, wg_weights(g, h[F32], wt[F32]), -1);
		c = wg_add(g, f32, QGRAPH__OP__OP_SILU, 1, big, wg_scale(g, wg_scale(g, v, 2.0f), 0.5f), -1);
		wg_output(g, c, OUT1_AT);
		return "SCALE, SCALE, SILU on a RESHAPE of f32 weights (in-place candidates) run";
	case 13:
	case 14:
	case 15: {
		/* read-only views: rows 8..23 through a view, against rows 8..11 of the weights themselves */
		int which = k - 13;
		static const uint64_t nb0[3] = { 4, 2, 34 }, row[3] = { 4 * K, 2 * K, 68 };
		*expect = SAME_OUTPUTS;
		v = wg_weights(g, h[which], wt[which]);
		xs = wg_view(g, wt[which], v, K, 16, nb0[which], row[which], 8 * row[which]);
		wg_output(g, wg_2d(g, f32, QGRAPH__OP__OP_GET_ROWS, K, NX, xs, idx), OUT1_AT);
		wg_output(g, wg_2d(g, f32, QGRAPH__OP__OP_GET_ROWS, K, NX, v, idx2), OUT2_AT);
		return which == 0 ? "GET_ROWS through a VIEW of f32 weights reads the right rows"
		       : which == 1 ? "GET_ROWS through a VIEW of f16 weights reads the right rows"
				    : "GET_ROWS through a VIEW of q8_0 weights reads the right rows";
	}
	case 16:
		/* the q4_0 weights as stored (interleaved, perhaps): rows 16..31 through a view, and all of them */
		*expect = SAME_OUTPUTS;
		v = wg_weights(g, h[Q4], wt[Q4]);
		xs = wg_view(g, f32, x, K, NX, 4, 4 * K, 0);
		c = wg_view(g, wt[Q4], v, K, 16, 18, 36, 16 * 36);
		wg_output(g, wg_2d(g, f32, QGRAPH__OP__OP_MUL_MAT, 16, NX, c, xs), OUT1_AT);
		wg_output(g, wg_2d(g, f32, QGRAPH__OP__OP_MUL_MAT, M, NX, v, xs), OUT2_AT);
		return "MUL_MAT through a VIEW of q4_0 weights reads the right rows";
	default:
		(void)idx2;
		return NULL;
	}
}

/* Nobody's side: open the shared weights, try every graph, report on FD.  Exit 0 if it could try. */
static int attacker(const struct test_daemon *d, gid_t gid, int fd)
{
	if (setgid(gid) || setgroups(0, NULL) || setuid(65534))
		return 3;
	struct qgraph_session *s = daemon_connect(d, "attacker", 1 << 20);
	uint64_t h[N_W];
	int wt[N_W];
	struct attempt a;
	struct wg g;

	if (!s)
		return 4;
	for (int k = 0; k < N_W; k++) {
		enum qgraph_type type;
		int64_t rows, cols;
		if (qgraph_weights_open(s, names[k], &h[k], &type, &rows, &cols) || rows != M || cols != K)
			return 5;
		wt[k] = qg_wire_type_of_public(type);	/* the wire's number of the stored type */
	}
	unsigned char *arena = qgraph_arena(s, NULL);
	float *x = (float *)(arena + X_AT);
	int32_t *idx = (int32_t *)(arena + IDX_AT), *idx2 = (int32_t *)(arena + IDX2_AT);
	for (int i = 0; i < K * M; i++)
		x[i] = 7.0f;
	for (int i = 0; i < NX; i++) {
		idx[i] = i;
		idx2[i] = 8 + i;
	}
	for (int k = 0;; k++) {
		memset(&a, 0, sizeof a);
		a.what = attempt_graph(k, h, wt, &g, &a.expect);
		if (!a.what)
			break;
		memset(arena + OUT1_AT, 0xa5, 2 * (OUT2_AT - OUT1_AT));
		a.status = wg_run(s, &g, a.err, sizeof a.err);
		const float *o1 = (const float *)(arena + OUT1_AT), *o2 = (const float *)(arena + OUT2_AT);
		a.right = 1;
		if (a.expect == SAME_OUTPUTS && k == 16) {	/* rows 16..31 of each x row's products */
			for (int j = 0; j < NX; j++)
				a.right &= memcmp(o1 + j * 16, o2 + j * M + 16, 16 * sizeof *o1) == 0;
		} else if (a.expect == SAME_OUTPUTS) {	/* the whole of both outputs */
			a.right = memcmp(o1, o2, (size_t)K * (k == 11 ? M : NX) * sizeof *o1) == 0;
		}
		(void)!write(fd, &a, sizeof a);
	}
	qgraph_session_close(s);
	return 0;
}

int main(void)
{
	struct tap_rng rng = { 12 };
	struct test_daemon d = { 0 };
	char arg[64];

	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0) {
		printf("1..0 # SKIP not root: cannot run a second user's client\n");
		return 77;
	}
	struct group *ng = getgrnam("nogroup");
	gid_t gid = ng ? ng->gr_gid : 65534;
	snprintf(arg, sizeof arg, "--share-groups %u", (unsigned)gid);
	int r = daemon_start(&d, arg);
	chmod(d.dir, 0755);
	chmod(d.sock, 0666);
	/* root joins the group as qemu's user emulation lets it (see share-test.c) */
	const char *exec = getenv("QG_EXEC");
	int emulated = exec && *exec;
	if (emulated ? setegid(gid) : setgroups(1, &gid))
		tap_diag("cannot join group %u: %s", (unsigned)gid, strerror(errno));
	struct qgraph_session *s = r == 0 ? daemon_connect(&d, "owner", 1 << 20) : NULL;
	if (!tap_ok(s != NULL, "start a daemon sharing weights within group %u, and connect (%d)", (unsigned)gid, r)) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return tap_done();
	}

	for (int i = 0; i < M * K; i++)
		w[i] = tap_randf(&rng, -1.0f, 1.0f);
	uint64_t h[N_W];
	enum qgraph_type types[N_W];
	int up = 1;
	for (int k = 0; k < N_W; k++)
		up &= qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = targets[k],
				.rows = M, .cols = K, .data = w, .name = names[k]), &h[k], &types[k]) == 0;
	tap_ok(up, "root uploads and names f32, f16, q8_0 and q4_0 weights (q4_0 stored as %s)",
	       up ? qgraph_type_name(types[Q4]) : "?");

	static unsigned char before[2 * N_W * OWNER_SLOT], after[2 * N_W * OWNER_SLOT];
	int ok = owner_results(s, h, types, before) == 0;
	const float *rows = (const float *)(before + OWNER_SLOT);	/* GET_ROWS of the f32 weights, rows reversed */
	for (int i = 0; ok && i < M; i++)
		ok &= memcmp(rows + i * K, w + (M - 1 - i) * K, K * sizeof *w) == 0;
	tap_ok(ok, "root's MUL_MAT and GET_ROWS of every matrix run, the f32 rows exactly as uploaded");

	int p[2];
	if (pipe(p))
		return tap_ok(0, "pipe"), tap_done();
	pid_t kid = tap_fork();
	if (kid == 0) {
		close(p[0]);
		_exit(attacker(&d, gid, p[1]));
	}
	close(p[1]);
	struct attempt a;
	int n = 0;
	while (read(p[0], &a, sizeof a) == (ssize_t)sizeof a) {
		n++;
		if (a.expect == REFUSED)
			tap_ok(a.status == -EINVAL && strstr(a.err, "would write into weights") && strstr(a.err, "read-only"),
			       "nobody: %s: refused (%d: %s)", a.what, a.status, a.err);
		else
			tap_ok(a.status == 0 && a.right, "nobody: %s (%d%s%s)", a.what, a.status, a.err[0] ? ": " : "",
			       a.err);
	}
	close(p[0]);
	int st = 0;
	waitpid(kid, &st, 0);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && n == 17, "nobody opened root's weights and tried %d graphs (%d)",
	       n, WIFEXITED(st) ? WEXITSTATUS(st) : -1);

	ok = owner_results(s, h, types, after) == 0;
	for (int k = 0; k < N_W; k++) {
		int same_mm = memcmp(before + 2 * k * OWNER_SLOT, after + 2 * k * OWNER_SLOT, M * NX * 4) == 0;
		int same_rows = memcmp(before + (2 * k + 1) * OWNER_SLOT, after + (2 * k + 1) * OWNER_SLOT, OWNER_SLOT) == 0;
		tap_ok(ok && same_mm && same_rows, "root's results on its %s weights are exactly what they were (%s%s)",
		       qgraph_type_name(types[k]), same_mm ? "" : "MUL_MAT differs ", same_rows ? "" : "GET_ROWS differs");
	}

	if (emulated ? setegid(0) : setgroups(0, NULL))
		tap_diag("cannot leave group %u", (unsigned)gid);
	qgraph_session_close(s);
	st = daemon_stop(&d, SIGTERM);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the daemon served throughout: SIGTERM, exit 0");
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_cleanup(&d);
	return tap_done();
}
