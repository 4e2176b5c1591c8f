/*
 * mpi-ffn.c - run by tests/mpi-test.sh under mpirun, one qgraphd per rank
 * (socket pattern argv[1], "%d" the rank).  Through libqgraph-mpi's public
 * interface alone:
 *
 *   mpi-ffn SOCK ffn DIM HIDDEN N MICRO FLAGS   the sharded feed-forward block
 *   mpi-ffn SOCK rows|cols ROWS COLS N          a column- or row-parallel MUL_MAT
 *   mpi-ffn SOCK suite                          the cases mpi-test.sh checks, in one job
 *   mpi-ffn SOCK loop SECONDS                   an FFN again and again (the kill tests)
 *
 * The first two compare every output with one daemon's (rank 0 uploads the
 * whole matrices to its own daemon and runs the same block unsharded), and
 * print one line "CASE: max |diff| D, bound B: ok" on rank 0; exit 1 if
 * any output is past its bound.
 *
 * The bound.  The shards compute the same Q4_0 x Q8_0 block products as
 * the whole matrix (splits fall on 32-column blocks, and the FFN's hidden
 * split on 32 rows, so gate, up and SILU(gate) * up are bit for bit the
 * whole matrix's; micro-batches are whole GEMM groups of 4 tokens), and add
 * them in another order: each rank its own blocks, then MPI adds the ranks'
 * partial sums (and the residual) in an order of its choosing.  A sum of
 * B exact block products in any order is within (B - 1) u S of the exact
 * sum, S = the sum of their magnitudes, u = 2^-24; the P - 1 additions of
 * the reduction add (P - 1) u S; kernels of other layouts (an uneven row
 * split's last shard) may round each product once more (2 u S).  So for
 * each output, |sharded - single| <= (2 B + P + 4) u S, with S bounded from
 * above by |x_i| (the residual) + sum over blocks b of amax_b(a) times
 * sum_{j in b} |W_ij| (a the last product's activations, W dequantized;
 * Q8_0 codes times their scale are at most amax_b (1 + 2^-10)).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "qgraph-mpi.h"

static int rank, size;

static void fill(float *x, size_t n, unsigned seed, float scale)
{
	unsigned long long s = seed * 2654435761ULL + 1;

	for (size_t i = 0; i < n; i++) {
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		x[i] = ((float)((s * 2685821657736338717ULL) >> 40) / 16777216.0f - 0.5f) * 2 * scale;
	}
}

__attribute__((noreturn)) static void bail(const char *what, int r, const char *why)
{
	fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, what, why, strerror(r < 0 ? -r : r));
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

static struct qgraph_mpi *conn;

/* A set-up call failed, on every rank alike (libqgraph-mpi agrees on it): say so, and end this rank cleanly. */
__attribute__((noreturn)) static void refused(const char *what, int r)
{
	printf("rank %d: %s refused (%s): %s\n", rank, what, strerror(-r), qgraph_mpi_error(conn));
	fflush(stdout);
	qgraph_mpi_close(conn);
	MPI_Finalize();
	exit(4);
}

/* W (ROWS x COLS f32) as the daemon holds it in Q4_0: quantized, then back to f32. */
static float *dequantized(const float *w, int64_t rows, int64_t cols)
{
	size_t qb = (size_t)qgraph_matrix_size(QGRAPH_TYPE_Q4_0, rows, cols);
	void *q = malloc(qb);
	float *d = malloc((size_t)rows * cols * 4);

	if (!q || !d || qgraph_quantize(QGRAPH_TYPE_Q4_0, w, q, qb, rows, cols, NULL) < 0 ||
	    qgraph_dequantize(QGRAPH_TYPE_Q4_0, q, d, (size_t)rows * cols * 4, rows, cols) < 0)
		bail("dequantize", -ENOMEM, "");
	free(q);
	return d;
}

/*
 * Rank 0: compare Y (N x M, sharded) with REF (one daemon's), each output
 * against the bound above: A (N x K) the last product's activations, WD its
 * weights dequantized (M x K), RES the residual (or NULL).  Prints the
 * line and returns 0 if all are within.
 */
static int compare(const char *name, const float *y, const float *ref, const float *a, const float *wd,
		   const float *res, int64_t n, int64_t m, int64_t k)
{
	double worst = 0, worst_bound = 0, ratio = 0;
	int64_t blocks = k / 32;

	for (int64_t t = 0; t < n; t++)
		for (int64_t i = 0; i < m; i++) {
			double s = res ? fabs(res[t * m + i]) : 0;
			for (int64_t b = 0; b < blocks; b++) {
				double amax = 0, wsum = 0;
				for (int64_t j = b * 32; j < b * 32 + 32; j++) {
					amax = fmax(amax, fabs(a[t * k + j]));
					wsum += fabs(wd[i * k + j]);
				}
				s += amax * (1 + 1.0 / 1024) * wsum;
			}
			double bound = (2.0 * (double)blocks + size + 4) * ldexp(1, -24) * s;
			double d = fabs((double)y[t * m + i] - ref[t * m + i]);
			if (!(d <= bound * 1.0) || !isfinite(y[t * m + i]))
				ratio = INFINITY;
			else if (bound > 0 && d / bound > ratio)
				ratio = d / bound;
			if (d >= worst || !isfinite(d)) {
				worst = d;
				worst_bound = bound;
			}
		}
	int good = ratio <= 1.0;
	printf("%s on %d ranks: max |diff| %.3g (its bound %.3g), worst diff/bound %.3f: %s\n", name, size, worst,
	       worst_bound, ratio, good ? "ok" : "WRONG");
	return good ? 0 : 1;
}

/* Rank 0's own session: run G once, registered or not; bail on failure. */
static void run_once(struct qgraph_session *s, struct qgraph_graph *g)
{
	uint64_t id;
	struct qgraph_result res;
	int r = qgraph_submit(s, g, QGRAPH_SUBMIT_BLOCK, &id);

	if (r || (r = qgraph_wait(s, id, 60000, &res)) || (r = res.status))
		bail("reference graph", r, qgraph_session_error(s));
}

static uint64_t upload(struct qgraph_session *s, const float *w, int64_t rows, int64_t cols, enum qgraph_type *st)
{
	uint64_t h;
	struct qgraph_upload_opts uo = { .size = sizeof uo, .src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0,
					 .rows = rows, .cols = cols, .data = w };
	int r = qgraph_weights_upload(s, &uo, &h, st);

	if (r)
		bail("reference upload", r, qgraph_session_error(s));
	return h;
}

static int64_t take(struct qgraph_session *s, int64_t bytes)
{
	int64_t o = qgraph_arena_alloc(s, (size_t)bytes);

	if (o < 0)
		bail("arena", (int)o, "no room");
	return o;
}

static int case_ffn(struct qgraph_mpi *m, int64_t dim, int64_t hid, int64_t n, int64_t micro, int flags, int loop_s)
{
	struct qgraph_session *s = qgraph_mpi_session(m);
	unsigned char *arena = qgraph_arena(s, NULL);
	float *wg = NULL, *wu = NULL, *wd = NULL;
	struct qgraph_mpi_weights *g, *u, *d;
	int r;

	if (rank == 0) {
		wg = malloc((size_t)hid * dim * 4);
		wu = malloc((size_t)hid * dim * 4);
		wd = malloc((size_t)hid * dim * 4);
		fill(wg, (size_t)hid * dim, 11, 0.1f);
		fill(wu, (size_t)hid * dim, 12, 0.1f);
		fill(wd, (size_t)hid * dim, 13, 0.1f);
	}
	if ((r = qgraph_mpi_weights_scatter(m, 0, QGRAPH_MPI_SPLIT_ROWS, 32, QGRAPH_TYPE_F32, QGRAPH_TYPE_Q4_0, hid, dim,
					    wg, &g)) ||
	    (r = qgraph_mpi_weights_scatter(m, 0, QGRAPH_MPI_SPLIT_ROWS, 32, QGRAPH_TYPE_F32, QGRAPH_TYPE_Q4_0, hid, dim,
					    wu, &u)) ||
	    (r = qgraph_mpi_weights_scatter(m, 0, QGRAPH_MPI_SPLIT_COLS, 32, QGRAPH_TYPE_F32, QGRAPH_TYPE_Q4_0, dim, hid,
					    wd, &d)))
		refused("scatter", r);
	int64_t xo = take(s, n * dim * 4), yo = take(s, n * dim * 4);
	fill((float *)(arena + xo), (size_t)(n * dim), 14, 1.0f);	/* the same on every rank */
	struct qgraph_mpi_ffn_opts o = { .n = n, .x_off = xo, .y_off = yo, .micro = micro, .flags = flags,
					 .norm_eps = 1e-5f };
	struct qgraph_mpi_op *op;
	if ((r = qgraph_mpi_ffn_new(m, g, u, d, &o, &op)))
		refused("ffn", r);
	if (loop_s) {
		time_t end = time(NULL) + loop_s;
		qgraph_mpi_op_run(op, NULL);
		printf("rank %d pid %d running\n", rank, (int)getpid());
		fflush(stdout);
		while (time(NULL) < end)
			qgraph_mpi_op_run(op, NULL);
		return 0;
	}
	qgraph_mpi_op_run(op, NULL);
	qgraph_mpi_op_run(op, NULL);	/* twice: a registered op runs again on what the arena holds */
	int bad = 0;
	if (rank == 0) {
		/* one daemon's block: the same graph, unsharded, with SILU(gate) * up as an output too */
		enum qgraph_type tg, tu, td;
		uint64_t hg = upload(s, wg, hid, dim, &tg), hu = upload(s, wu, hid, dim, &tu), hd = upload(s, wd, dim, hid, &td);
		int64_t ro = take(s, n * dim * 4), ho = take(s, n * hid * 4);
		struct qgraph_graph *gr = qgraph_graph_new();
		int64_t xne[2] = { dim, n };
		int x = qgraph_graph_input(gr, QGRAPH_TYPE_F32, 2, xne, xo);
		int a = flags & QGRAPH_MPI_FFN_NORM ? qgraph_graph_op(gr, QGRAPH_OP_RMS_NORM, x, -1, 1e-5f) : x;
		int gt = qgraph_graph_op(gr, QGRAPH_OP_SILU,
					 qgraph_graph_op(gr, QGRAPH_OP_MUL_MAT, qgraph_graph_weights(gr, hg, tg, hid, dim), a, 0),
					 -1, 0);
		int h = qgraph_graph_op(gr, QGRAPH_OP_MUL, gt,
					qgraph_graph_op(gr, QGRAPH_OP_MUL_MAT, qgraph_graph_weights(gr, hu, tu, hid, dim), a, 0), 0);
		int y = qgraph_graph_op(gr, QGRAPH_OP_MUL_MAT, qgraph_graph_weights(gr, hd, td, dim, hid), h, 0);
		if (flags & QGRAPH_MPI_FFN_RESIDUAL)
			y = qgraph_graph_op(gr, QGRAPH_OP_ADD, x, y, 0);
		qgraph_graph_output(gr, h, ho);
		if (qgraph_graph_output(gr, y, ro) < 0)
			bail("reference graph", -EINVAL, "does not build");
		run_once(s, gr);
		qgraph_graph_free(gr);
		float *wdd = dequantized(wd, dim, hid);
		char name[128];
		snprintf(name, sizeof name, "ffn dim %lld hidden %lld n %lld micro %lld flags %d", (long long)dim,
			 (long long)hid, (long long)n, (long long)micro, flags);
		bad = compare(name, (float *)(arena + yo), (float *)(arena + ro), (float *)(arena + ho), wdd,
			      flags & QGRAPH_MPI_FFN_RESIDUAL ? (float *)(arena + xo) : NULL, n, dim, hid);
		qgraph_weights_free(s, hg);
		qgraph_weights_free(s, hu);
		qgraph_weights_free(s, hd);
		free(wdd);
	}
	/* every rank holds the same Y: compare each with rank 0's, bit for bit */
	float *y0 = malloc((size_t)(n * dim * 4));
	memcpy(y0, arena + yo, (size_t)(n * dim * 4));
	MPI_Bcast(y0, (int)(n * dim), MPI_FLOAT, 0, MPI_COMM_WORLD);
	int differs = memcmp(y0, arena + yo, (size_t)(n * dim * 4)) != 0, any = 0;
	MPI_Allreduce(&differs, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0 && any)
		printf("ffn: the ranks' results differ: WRONG\n");
	free(y0);
	qgraph_mpi_op_free(op);
	qgraph_mpi_weights_free(m, g);
	qgraph_mpi_weights_free(m, u);
	qgraph_mpi_weights_free(m, d);
	free(wg);
	free(wu);
	free(wd);
	return bad || any;
}

static int case_linear(struct qgraph_mpi *m, enum qgraph_mpi_split split, int64_t rows, int64_t cols, int64_t n)
{
	struct qgraph_session *s = qgraph_mpi_session(m);
	unsigned char *arena = qgraph_arena(s, NULL);
	float *w = NULL;
	struct qgraph_mpi_weights *sw;
	struct qgraph_mpi_op *op;
	int r;

	if (rank == 0) {
		w = malloc((size_t)rows * cols * 4);
		fill(w, (size_t)rows * cols, 21, 0.1f);
	}
	if ((r = qgraph_mpi_weights_scatter(m, 0, split, 0, QGRAPH_TYPE_F32, QGRAPH_TYPE_Q4_0, rows, cols, w, &sw)))
		refused("scatter", r);
	int64_t xo = take(s, n * cols * 4), yo = take(s, n * rows * 4);
	fill((float *)(arena + xo), (size_t)(n * cols), 22, 1.0f);
	if ((r = qgraph_mpi_linear_new(m, sw, n, xo, yo, &op)))
		refused("linear", r);
	qgraph_mpi_op_run(op, NULL);
	int bad = 0;
	if (rank == 0) {
		enum qgraph_type t;
		uint64_t h = upload(s, w, rows, cols, &t);
		int64_t ro = take(s, n * rows * 4);
		struct qgraph_graph *gr = qgraph_graph_new();
		int64_t xne[2] = { cols, n };
		int x = qgraph_graph_input(gr, QGRAPH_TYPE_F32, 2, xne, xo);
		if (qgraph_graph_output(gr, qgraph_graph_op(gr, QGRAPH_OP_MUL_MAT, qgraph_graph_weights(gr, h, t, rows, cols),
							    x, 0), ro) < 0)
			bail("reference graph", -EINVAL, "does not build");
		run_once(s, gr);
		qgraph_graph_free(gr);
		float *wdd = dequantized(w, rows, cols);
		char name[128];
		snprintf(name, sizeof name, "%s-parallel %lld x %lld, n %lld",
			 split == QGRAPH_MPI_SPLIT_ROWS ? "column" : "row", (long long)rows, (long long)cols, (long long)n);
		bad = compare(name, (float *)(arena + yo), (float *)(arena + ro), (float *)(arena + xo), wdd, NULL, n,
			      rows, cols);
		qgraph_weights_free(s, h);
		free(wdd);
	}
	qgraph_mpi_op_free(op);
	qgraph_mpi_weights_free(m, sw);
	free(w);
	return bad;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 3) {
		fprintf(stderr, "usage: mpi-ffn SOCKET-PATTERN ffn|rows|cols|loop ...\n");
		MPI_Finalize();
		return 2;
	}
	struct qgraph_mpi_opts o = { .socket = argv[1], .arena_bytes = 16u << 20, .timeout_ms = 20000 };
	struct qgraph_mpi *m;
	char err[512];
	int r = qgraph_mpi_connect(&o, &m, err, sizeof err), bad = 0;
	if (r) {
		fprintf(stderr, "rank %d: %s\n", rank, err);
		MPI_Finalize();
		return 3;
	}
	conn = m;
	const char *c = argv[2];
	if (strcmp(c, "ffn") == 0 && argc == 8)
		bad = case_ffn(m, atol(argv[3]), atol(argv[4]), atol(argv[5]), atol(argv[6]), atoi(argv[7]), 0);
	else if ((strcmp(c, "rows") == 0 || strcmp(c, "cols") == 0) && argc == 6)
		bad = case_linear(m, c[0] == 'r' ? QGRAPH_MPI_SPLIT_ROWS : QGRAPH_MPI_SPLIT_COLS, atol(argv[3]),
				  atol(argv[4]), atol(argv[5]));
	else if (strcmp(c, "suite") == 0 && argc == 3) {
		/*
		 * Shapes that do not split evenly: hidden 160 is 5 units of 32 (3 + 2,
		 * or 2 + 1 + 1 + 1), 7 tokens make micro-batches of 4 + 3; 100 rows are
		 * 13 units of 8, the last of 4 (a last shard in another layout).
		 */
		bad |= case_ffn(m, 96, 160, 7, 4, QGRAPH_MPI_FFN_NORM | QGRAPH_MPI_FFN_RESIDUAL, 0);
		bad |= case_ffn(m, 64, 192, 1, 0, 0, 0);
		bad |= case_linear(m, QGRAPH_MPI_SPLIT_ROWS, 100, 96, 1);
		bad |= case_linear(m, QGRAPH_MPI_SPLIT_ROWS, 100, 96, 5);
		bad |= case_linear(m, QGRAPH_MPI_SPLIT_COLS, 40, 160, 3);
	} else if (strcmp(c, "loop") == 0 && argc == 4)
		bad = case_ffn(m, 256, 1024, 8, 0, 0, atoi(argv[3]));
	else
		bail("usage", EINVAL, "unknown case");
	qgraph_mpi_close(m);
	MPI_Finalize();
	return bad;
}
