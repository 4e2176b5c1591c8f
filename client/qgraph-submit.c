/*
 * qgraph-submit - run work through qgraphd from the command line.
 *
 *   qgraph-submit [--socket PATH] COMMAND [OPTIONS]
 *
 * Commands: gemm, mlp, run, bench, stats, info, inspect, load, unload
 * (each has --help).
 * Exit status: 0 success, 1 the work failed or its result was wrong,
 * 2 bad usage, 3 no daemon to talk to.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"
#include "graph-file.h"
#include "mulmat.h"
#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "wire.h"

#define EXIT_WRONG 1
#define EXIT_USAGE 2
#define EXIT_NODAEMON 3

static const char *socket_path;
static int quiet;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fill_random(float *x, size_t n, unsigned long long seed, float scale)
{
	unsigned long long s = seed * 2654435761ULL + 1;

	for (size_t i = 0; i < n; i++) {
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		x[i] = ((float)((s * 2685821657736338717ULL) >> 40) / 16777216.0f - 0.5f) * 2 * scale;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static struct qgraph_session *connect_or_die(const char *name, uint64_t arena)
{
	struct qgraph_connect_opts o = { .socket = socket_path, .name = name, .arena_bytes = arena };
	struct qgraph_session *s;
	char err[512];
	int r = qgraph_connect(&o, &s, err, sizeof err);

	if (r) {
		fprintf(stderr, "qgraph-submit: %s\n", err);
		exit(r == -ENOENT || r == -ECONNREFUSED ? EXIT_NODAEMON : EXIT_WRONG);
	}
	return s;
}

/* Progress on stderr for long runs (when it is a terminal). */
static void progress(const char *what, long done, long total)
{
	if (quiet || !isatty(STDERR_FILENO) || total < 20)
		return;
	int w = 40, filled = (int)(w * done / total);
	fprintf(stderr, "\r%s [%.*s%*s] %ld/%ld", what, filled, "========================================",
		w - filled, "", done, total);
	if (done == total)
		fputc('\n', stderr);
}

/* Largest |a - b| relative to the largest |b|. */
static double rel_err(const float *a, const float *b, size_t n)
{
	double maxd = 0, maxb = 1e-30;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		if (!(d <= maxd))
			maxd = d;
		if (fabs(b[i]) > maxb)
			maxb = fabs(b[i]);
	}
	return maxd / maxb;
}

/*
 * Register G, then run it REPS times, each time to its completion.  Returns
 * the median run time in seconds, or a negative value (with the reason on
 * stderr, prefixed by WHAT) when a step failed.
 */
static double register_and_time(struct qgraph_session *s, struct qgraph_graph *g, long reps, const char *what)
{
	uint64_t id, handle;
	struct qgraph_result res;
	int r;

	if ((r = qgraph_submit(s, g, QGRAPH_SUBMIT_KEEP | QGRAPH_SUBMIT_BLOCK, &id)) ||
	    (r = qgraph_wait(s, id, -1, &res)) || (r = res.status)) {
		fprintf(stderr, "qgraph-submit %s: %s\n", what, qgraph_session_error(s));
		return -1;
	}
	handle = res.handle;
	double *times = calloc((size_t)reps, sizeof *times);
	if (!times)
		return -1;
	for (long i = 0; i < reps; i++) {
		double a = now_s();
		if ((r = qgraph_run(s, handle, NULL, QGRAPH_SUBMIT_BLOCK, &id)) || (r = qgraph_wait(s, id, -1, &res)) ||
		    (r = res.status)) {
			fprintf(stderr, "qgraph-submit %s: run: %s\n", what, qgraph_session_error(s));
			free(times);
			return -1;
		}
		times[i] = now_s() - a;
		progress(what, i + 1, reps);
	}
	qsort(times, (size_t)reps, sizeof *times, cmp_double);
	double med = times[reps / 2];
	free(times);
	return med;
}

/* ---------------------------------------------------------------- gemm */

static int cmd_gemm(int argc, char **argv)
{
	long m = 4096, n = 32, k = 4096, reps = 5;
	const char *tname = "q4_0", *save = NULL;
	static const struct option opts[] = {
		{ "m", required_argument, NULL, 'm' }, { "n", required_argument, NULL, 'n' },
		{ "k", required_argument, NULL, 'k' }, { "type", required_argument, NULL, 't' },
		{ "repeat", required_argument, NULL, 'r' }, { "save", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "m:n:k:t:r:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': save = optarg; break;
		case 'm': m = atol(optarg); break;
		case 'n': n = atol(optarg); break;
		case 'k': k = atol(optarg); break;
		case 't': tname = optarg; break;
		case 'r': reps = atol(optarg); break;
		case 'h':
			printf("Usage: qgraph-submit gemm [-m M] [-n N] [-k K] [--type TYPE] [--repeat R] [--save FILE]\n"
			       "Multiply random M x K weights (quantized to TYPE by the daemon; q4_0 lets\n"
			       "it pick its fastest layout) by N x K activations through qgraphd, check\n"
			       "the result against the portable kernel in this process, and print the\n"
			       "time (median of R runs) and GFLOP/s.  Defaults: 4096 32 4096 q4_0 5.\n"
			       "--save FILE also writes the graph, its weights and inputs to FILE, for\n"
			       "'qgraph-submit run FILE'.\n");
			return 0;
		default: return EXIT_USAGE;
		}
	}
	int type = qgraph_type_from_name(tname);
	if (type < 0 || m < 1 || n < 1 || k < 32 || k % 32 || reps < 1) {
		fprintf(stderr, "qgraph-submit gemm: bad shape or type (k a multiple of 32, type one of "
				"f32 f16 q8_0 q4_0 q4_0_4x4 q4_0_4x8 q4_0_8x8)\n");
		return EXIT_USAGE;
	}
	size_t xbytes = (size_t)n * k * 4, ybytes = (size_t)n * m * 4;
	struct qgraph_session *s = connect_or_die("qgraph-submit gemm", ((xbytes + ybytes) * 2 + (64u << 20)));
	float *w = malloc((size_t)m * k * 4), *ref = malloc(ybytes);
	if (!w || !ref)
		return EXIT_WRONG;
	fill_random(w, (size_t)m * k, 1, 1.0f);
	uint64_t wh;
	enum qgraph_type stored;
	double t0 = now_s();
	int r = qgraph_weights_upload(s, QGRAPH_TYPE_F32, (enum qgraph_type)type, m, k, w, &wh, &stored);
	if (r) {
		fprintf(stderr, "qgraph-submit gemm: upload: %s\n", qgraph_session_error(s));
		return EXIT_WRONG;
	}
	double t_up = now_s() - t0;
	int64_t xo = qgraph_arena_alloc(s, xbytes), yo = qgraph_arena_alloc(s, ybytes);
	unsigned char *arena = qgraph_arena(s, NULL);
	fill_random((float *)(arena + xo), (size_t)n * k, 2, 1.0f);

	struct qgraph_graph *g = qgraph_graph_new();
	int64_t xne[2] = { k, n };
	int wi = qgraph_graph_weights(g, wh, stored, m, k);
	int xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
	if (qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, xi, 0), yo) < 0) {
		fprintf(stderr, "qgraph-submit gemm: cannot build the graph\n");
		return EXIT_WRONG;
	}
	double med = register_and_time(s, g, reps, "gemm");
	if (med < 0)
		return EXIT_WRONG;

	/* the reference: the portable kernel in this process, on the same quantized bytes */
	ssize_t wb = qgraph_matrix_size(stored, m, k);
	void *wq = malloc((size_t)wb);
	qgraph_quantize(stored, w, wq, (size_t)wb, m, k, NULL);
	struct qg_mm mm = { .wtype = (enum qg_type)qg_wire_engine_type_of_public(stored), .w = wq, .m = m, .k = k,
			    .x = (const float *)(arena + xo), .ldx = (size_t)k, .n = n, .y = ref, .ldy = (size_t)m };
	if (qg_layout_of(mm.wtype) >= 0)
		mm.kernel = qg_kernel_get(QG_KF_PORTABLE, (enum qg_layout)qg_layout_of(mm.wtype));
	void *scratch = aligned_alloc(64, (qg_mul_mat_scratch_size(&mm) + 63) & ~(size_t)63);
	qg_mul_mat(&mm, scratch);
	double err = rel_err((const float *)(arena + yo), ref, (size_t)n * m);
	double flops = 2.0 * m * n * k;
	if (save) {
		struct gf_weights gw = { .handle = wh, .type = stored, .rows = m, .cols = k, .data = wq };
		char desc[128], why[512];
		snprintf(desc, sizeof desc, "qgraph-submit gemm -m %ld -n %ld -k %ld --type %s", m, n, k, tname);
		if (gf_save(save, g, &gw, 1, arena, (size_t)(xo > yo ? xo + (int64_t)xbytes : yo + (int64_t)ybytes),
			    desc, why, sizeof why)) {
			fprintf(stderr, "qgraph-submit gemm: --save: %s\n", why);
			return EXIT_WRONG;
		}
	}
	printf("gemm m=%ld n=%ld k=%ld type=%s stored=%s: median %.3f ms (%.1f GFLOP/s), upload %.1f ms, "
	       "max error vs portable %.2e: %s\n",
	       m, n, k, tname, qgraph_type_name(stored), med * 1e3, flops / med * 1e-9,
	       t_up * 1e3, err, err < 1e-3 ? "ok" : "WRONG");
	free(scratch);
	free(wq);
	free(w);
	free(ref);
	qgraph_graph_free(g);
	qgraph_session_close(s);
	return err < 1e-3 ? 0 : EXIT_WRONG;
}


/* ---------------------------------------------------------------- mlp */

/* The in-process reference of one layer: x += W2 (silu(W3 n) * (W1 n)), n = rms_norm(x). */
static void mlp_ref_layer(float *x, long d, long h, long n, void *const wq[3], enum qgraph_type t[3])
{
	float *nrm = malloc((size_t)n * d * 4), *up = malloc((size_t)n * h * 4), *gate = malloc((size_t)n * h * 4);
	float *down = malloc((size_t)n * d * 4);

	for (long r = 0; r < n; r++) {
		double ss = 0;
		for (long j = 0; j < d; j++)
			ss += (double)x[r * d + j] * x[r * d + j];
		float sc = (float)(1.0 / sqrt(ss / d + 1e-5));
		for (long j = 0; j < d; j++)
			nrm[r * d + j] = x[r * d + j] * sc;
	}
	float *outs[3] = { up, gate, down };
	const float *ins[3] = { nrm, nrm, up };
	long ms[3] = { h, h, d }, ks[3] = { d, d, h };
	for (int i = 0; i < 3; i++) {
		if (i == 2)
			for (long j = 0; j < n * h; j++)
				up[j] = gate[j] / (1.0f + expf(-gate[j])) * up[j];
		struct qg_mm mm = { .wtype = (enum qg_type)qg_wire_engine_type_of_public(t[i]), .w = wq[i], .m = ms[i], .k = ks[i], .x = ins[i],
				    .ldx = (size_t)ks[i], .n = n, .y = outs[i], .ldy = (size_t)ms[i] };
		void *scratch = aligned_alloc(64, (qg_mul_mat_scratch_size(&mm) + 63) & ~(size_t)63);
		qg_mul_mat(&mm, scratch);
		free(scratch);
	}
	for (long j = 0; j < n * d; j++)
		x[j] += down[j];
	free(nrm);
	free(up);
	free(gate);
	free(down);
}

static int cmd_mlp(int argc, char **argv)
{
	long d = 1024, h = 2816, n = 8, layers = 2, reps = 3;
	const char *save = NULL;
	static const struct option opts[] = {
		{ "dim", required_argument, NULL, 'd' }, { "hidden", required_argument, NULL, 'H' },
		{ "tokens", required_argument, NULL, 'n' }, { "layers", required_argument, NULL, 'l' },
		{ "repeat", required_argument, NULL, 'r' }, { "save", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "d:H:n:l:r:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': save = optarg; break;
		case 'd': d = atol(optarg); break;
		case 'H': h = atol(optarg); break;
		case 'n': n = atol(optarg); break;
		case 'l': layers = atol(optarg); break;
		case 'r': reps = atol(optarg); break;
		case 'h':
			printf("Usage: qgraph-submit mlp [--dim D] [--hidden H] [--tokens N] [--layers L] [--repeat R]\n"
			       "                         [--save FILE]\n"
			       "Run L transformer feed-forward blocks (rms_norm, Q4_0 up and gate projections,\n"
			       "silu gate, Q4_0 down projection, residual add) on N tokens through qgraphd as\n"
			       "one registered graph, check it against the same computation in this process,\n"
			       "and print the median time.  Defaults: 1024 2816 8 2 3.  --save FILE also writes\n"
			       "the graph, its weights and inputs to FILE, for 'qgraph-submit run FILE'.\n");
			return 0;
		default: return EXIT_USAGE;
		}
	}
	if (d < 32 || d % 32 || h < 32 || h % 32 || n < 1 || layers < 1 || layers > 64 || reps < 1) {
		fprintf(stderr, "qgraph-submit mlp: --dim and --hidden are multiples of 32; 1 to 64 layers\n");
		return EXIT_USAGE;
	}
	struct qgraph_session *s = connect_or_die("qgraph-submit mlp", (uint64_t)(n * (d + h) * 4 * 2 + (32 << 20)));
	float *w = malloc((size_t)h * d * 4), *x0 = malloc((size_t)n * d * 4);
	void *(*wq)[3] = calloc((size_t)layers, sizeof *wq);
	enum qgraph_type (*wt)[3] = calloc((size_t)layers, sizeof *wt);
	struct gf_weights *gw = calloc((size_t)layers * 3, sizeof *gw);
	struct qgraph_graph *g = qgraph_graph_new();
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t xo = qgraph_arena_alloc(s, (size_t)n * d * 4), yo = qgraph_arena_alloc(s, (size_t)n * d * 4);
	int64_t xne[2] = { d, n };
	int x = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);

	fill_random(x0, (size_t)n * d, 7, 1.0f);
	memcpy(arena + xo, x0, (size_t)n * d * 4);
	for (long l = 0; l < layers; l++) {
		int wi[3];
		long rows[3] = { h, h, d }, cols[3] = { d, d, h };
		for (int i = 0; i < 3; i++) {
			uint64_t handle;
			fill_random(w, (size_t)rows[i] * cols[i], (unsigned long long)(100 + 3 * l + i), 0.05f);
			if (qgraph_weights_upload(s, QGRAPH_TYPE_F32, QGRAPH_TYPE_Q4_0, rows[i], cols[i], w, &handle,
						  &wt[l][i])) {
				fprintf(stderr, "qgraph-submit mlp: upload: %s\n", qgraph_session_error(s));
				return EXIT_WRONG;
			}
			ssize_t wb = qgraph_matrix_size(wt[l][i], rows[i], cols[i]);
			wq[l][i] = malloc((size_t)wb);
			qgraph_quantize(wt[l][i], w, wq[l][i], (size_t)wb, rows[i], cols[i], NULL);
			wi[i] = qgraph_graph_weights(g, handle, wt[l][i], rows[i], cols[i]);
			gw[l * 3 + i] = (struct gf_weights){ .handle = handle, .type = wt[l][i], .rows = rows[i],
							     .cols = cols[i], .data = wq[l][i] };
			progress("upload", l * 3 + i + 1, layers * 3);
		}
		int nrm = qgraph_graph_op(g, QGRAPH_OP_RMS_NORM, x, -1, 1e-5f);
		int up = qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi[0], nrm, 0);
		int gate = qgraph_graph_op(g, QGRAPH_OP_SILU, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi[1], nrm, 0), -1, 0);
		int down = qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi[2], qgraph_graph_op(g, QGRAPH_OP_MUL, gate, up, 0), 0);
		x = qgraph_graph_op(g, QGRAPH_OP_ADD, x, down, 0);
	}
	if (qgraph_graph_output(g, x, yo) < 0) {
		fprintf(stderr, "qgraph-submit mlp: cannot build the graph\n");
		return EXIT_WRONG;
	}
	double med = register_and_time(s, g, reps, "mlp");
	if (med < 0)
		return EXIT_WRONG;
	if (save) {
		char desc[160], why[512];
		memcpy(arena + xo, x0, (size_t)n * d * 4);	/* the input as the first run found it */
		snprintf(desc, sizeof desc, "qgraph-submit mlp --dim %ld --hidden %ld --tokens %ld --layers %ld", d, h,
			 n, layers);
		if (gf_save(save, g, gw, (size_t)layers * 3, arena, (size_t)(yo + n * d * 4), desc, why, sizeof why)) {
			fprintf(stderr, "qgraph-submit mlp: --save: %s\n", why);
			return EXIT_WRONG;
		}
	}
	for (long l = 0; l < layers; l++)
		mlp_ref_layer(x0, d, h, n, wq[l], wt[l]);
	double err = rel_err((const float *)(arena + yo), x0, (size_t)n * d);
	double flops = 2.0 * 3 * d * h * n * layers;
	printf("mlp dim=%ld hidden=%ld tokens=%ld layers=%ld (%s): median %.3f ms (%.1f GFLOP/s), "
	       "max error vs in-process %.2e: %s\n",
	       d, h, n, layers, qgraph_type_name(wt[0][0]), med * 1e3, flops / med * 1e-9,
	       err, err < 1e-3 ? "ok" : "WRONG");
	for (long l = 0; l < layers; l++)
		for (int i = 0; i < 3; i++)
			free(wq[l][i]);
	free(wq);
	free(wt);
	free(gw);
	free(w);
	free(x0);
	qgraph_graph_free(g);
	qgraph_session_close(s);
	return err < 1e-3 ? 0 : EXIT_WRONG;
}

/* ---------------------------------------------------------------- run */

static int cmd_run(int argc, char **argv)
{
	struct gf_run_opts o = { .repeat = 3, .check = 1, .quiet = quiet };
	static const struct option opts[] = {
		{ "repeat", required_argument, NULL, 'r' }, { "no-check", no_argument, NULL, 'C' },
		{ "print", required_argument, NULL, 'p' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "r:p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'r': o.repeat = atol(optarg); break;
		case 'C': o.check = 0; break;
		case 'p': o.print = atoi(optarg); break;
		case 'h':
			printf("Usage: qgraph-submit run [--repeat R] [--print N] [--no-check] FILE\n"
			       "Run the graph saved in FILE (gemm and mlp --save write one) through qgraphd:\n"
			       "upload its weights, copy its inputs into the arena, register it, run it R\n"
			       "times (default 3) and print the median time.  Each output is checked against\n"
			       "the same graph computed in this process unless --no-check; --print N shows\n"
			       "its first N values.\n");
			return 0;
		default: return EXIT_USAGE;
		}
	}
	if (optind + 1 != argc || o.repeat < 1 || o.repeat > 1000000 || o.print < 0) {
		fprintf(stderr, "qgraph-submit run: one FILE, --repeat 1 to 1000000, --print >= 0\n");
		return EXIT_USAGE;
	}
	return gf_run(argv[optind], socket_path, &o);
}

/* ---------------------------------------------------------------- bench */

static double pct(double *v, long n, double p)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	long i = (long)(p * (double)(n - 1) + 0.5);
	return v[i];
}

static int cmd_bench(int argc, char **argv)
{
	long iters = 20000;
	int json = 0;
	static const struct option opts[] = {
		{ "iterations", required_argument, NULL, 'i' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "i:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'i': iters = atol(optarg); break;
		case 'j': json = 1; break;
		case 'h':
			printf("Usage: qgraph-submit bench [--iterations N] [--json]\n"
			       "Latency of a one-node graph (16 floats added) through qgraphd: registered once and\n"
			       "run with new inputs, and sent anew each time; and the throughput of pipelined runs.\n");
			return 0;
		default: return EXIT_USAGE;
		}
	}
	if (iters < 10)
		return EXIT_USAGE;
	struct qgraph_session *s = connect_or_die("qgraph-submit bench", 1 << 20);
	unsigned char *arena = qgraph_arena(s, NULL);
	float *a = (float *)arena, *y = (float *)(arena + 4096);
	int64_t ne[1] = { 16 };
	struct qgraph_graph *g = qgraph_graph_new();
	int ai = qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, 0);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_ADD, ai, ai, 0), 4096);
	uint64_t id, handle;
	struct qgraph_result res;
	if (qgraph_submit(s, g, QGRAPH_SUBMIT_KEEP | QGRAPH_SUBMIT_BLOCK, &id) || qgraph_wait(s, id, -1, &res) || res.status) {
		fprintf(stderr, "qgraph-submit bench: %s\n", qgraph_session_error(s));
		return EXIT_WRONG;
	}
	handle = res.handle;
	double *lat = calloc((size_t)iters, sizeof *lat);
	const char *names[2] = { "registered", "new graph" };
	for (int mode = 0; mode < 2; mode++) {
		long n = mode ? iters / 4 : iters;
		for (long i = 0; i < n; i++) {
			a[0] = (float)i;
			double t = now_s();
			int r = mode ? qgraph_submit(s, g, QGRAPH_SUBMIT_BLOCK, &id) : qgraph_run(s, handle, NULL, QGRAPH_SUBMIT_BLOCK, &id);
			if (r || qgraph_wait(s, id, -1, &res) || res.status || y[0] != 2.0f * (float)i) {
				fprintf(stderr, "qgraph-submit bench: wrong or failed: %s\n", qgraph_session_error(s));
				return EXIT_WRONG;
			}
			lat[i] = now_s() - t;
		}
		double med = pct(lat, n, 0.5), p99 = pct(lat, n, 0.99);
		if (json)
			printf("{\"bench\":\"round_trip\",\"mode\":\"%s\",\"n\":%ld,\"value\":%.3f,\"unit\":\"us\",\"p99\":%.3f}\n",
			       names[mode], n, med * 1e6, p99 * 1e6);
		else
			printf("round trip, %-10s: median %7.2f us, p99 %7.2f us (%ld runs)\n", names[mode], med * 1e6,
			       p99 * 1e6, n);
	}
	/* pipelined: keep the ring full, then collect */
	double t = now_s();
	long done = 0;
	uint64_t first = 0, last = 0;
	while (done < iters) {
		long batch = 0;
		while (batch < 64 && done + batch < iters && qgraph_run(s, handle, NULL, 0, &id) == 0) {
			if (!first)
				first = id;
			last = id;
			batch++;
		}
		for (uint64_t k = last - (uint64_t)batch + 1; k <= last && batch; k++)
			if (qgraph_wait(s, k, -1, &res) || res.status)
				return EXIT_WRONG;
		done += batch;
	}
	double rate = (double)iters / (now_s() - t);
	if (json)
		printf("{\"bench\":\"pipelined\",\"clients\":1,\"value\":%.0f,\"unit\":\"graphs/s\"}\n", rate);
	else
		printf("pipelined runs, one client: %.0f graphs/s\n", rate);
	free(lat);
	qgraph_graph_free(g);
	qgraph_session_close(s);
	return 0;
}

/* ---------------------------------------------------------------- stats, info */

/* S as a JSON string (quotes and backslashes escaped, control characters as \u00XX). */
static void json_string(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* S as a Prometheus label value (backslash, quote and newline escaped). */
static void prom_label(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i]; i++) {
		if (s[i] == '"' || s[i] == '\\')
			fputc('\\', f);
		fputc(s[i] == '\n' ? ' ' : s[i], f);
	}
}

/* The daemon-wide counters and gauges of the stats text: its key, the metric, its type and help. */
static const struct stat_metric {
	const char *key, *metric, *type, *help;
} stat_metrics[] = {
	{ "sessions", "qgraph_sessions", "gauge", "Sessions serving requests." },
	{ "handshaking", "qgraph_handshaking", "gauge", "Connections that have not finished their handshake." },
	{ "sessions_hidden", "qgraph_sessions_hidden", "gauge", "Sessions of other users this client may not see." },
	{ "pinned_bytes", "qgraph_pinned_bytes", "gauge", "Bytes of weights in pinned memory." },
	{ "pool_bytes", "qgraph_pool_bytes", "gauge", "Bytes of the daemon's memory pool." },
	{ "pool_used", "qgraph_pool_used_bytes", "gauge", "Bytes of the pool in use." },
	{ "plans", "qgraph_plans", "gauge", "Graph plans kept by the backend." },
	{ "graphs_run", "qgraph_graphs_run_total", "counter", "Graphs run since the daemon started." },
	{ "threads", "qgraph_threads", "gauge", "Compute threads." },
	{ "weights_stored", "qgraph_weights_stored", "gauge", "Weight matrices stored." },
	{ "weights_referenced_bytes", "qgraph_weights_referenced_bytes", "gauge",
	  "Bytes of every handle of every session to stored weights." },
};

/* The per-session fields of a "session ID pid P uid U name "N" ..." line: the word, the metric, its help. */
static const struct stat_metric session_metrics[] = {
	{ "arena", "qgraph_session_arena_bytes", "gauge", "Bytes of a session's arena." },
	{ "weights", "qgraph_session_weight_bytes", "gauge", "Bytes of weights a session holds." },
	{ "graphs", "qgraph_session_graphs", "gauge", "Graphs a session has registered." },
	{ "completed", "qgraph_session_completed_total", "counter", "Requests a session has had completed." },
	{ "memory", "qgraph_session_memory_bytes", "gauge", "Pool bytes a session's graphs hold." },
};

/* One parsed "session ..." line of the stats text. */
struct stat_session {
	unsigned long long id, pid, uid, v[sizeof session_metrics / sizeof session_metrics[0]];
	const char *name;
	size_t name_len;
};

/* Parse a session line (after "session "); 0 or -1. */
static int parse_session(const char *p, struct stat_session *ss)
{
	int used = 0;

	memset(ss, 0, sizeof *ss);
	if (sscanf(p, "%llu pid %llu uid %llu name \"%n", &ss->id, &ss->pid, &ss->uid, &used) != 3 || !used)
		return -1;
	ss->name = p + used;
	const char *q = strstr(ss->name, "\" arena ");
	if (!q)
		return -1;
	ss->name_len = (size_t)(q - ss->name);
	p = q + 2;
	for (size_t k = 0; k < sizeof session_metrics / sizeof session_metrics[0]; k++) {
		char word[32];
		if (sscanf(p, "%31s %llu%n", word, &ss->v[k], &used) != 2 || strcmp(word, session_metrics[k].key))
			return -1;
		p += used;
		p += strspn(p, " ");
	}
	return 0;
}

enum { STATS_TEXT, STATS_JSON, STATS_PROMETHEUS };

/* The stats text BUF as FORMAT on stdout.  0, or -1 for a line that does not parse. */
static int print_stats(char *buf, int format)
{
	char *save = NULL;
	int first = 1, bad = 0;
	size_t n_kernels = 0, n_sessions = 0;
	const char *pool = "", *loop = "";
	size_t pool_len = 0, loop_len = 0;

	if (format == STATS_TEXT)
		return fputs(buf, stdout) < 0 ? -1 : 0;
	/* the scalar lines first (JSON members, metrics), then kernels and sessions in arrays and labelled series */
	if (format == STATS_JSON)
		printf("{\"version\": \"%s\"", PACKAGE_VERSION);
	else
		printf("# HELP qgraph_info The daemon's memory pool, event loop and this tool's version.\n"
		       "# TYPE qgraph_info gauge\n");
	char *copy = strdup(buf);
	if (!copy)
		return -1;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');
		if (!sp) {
			bad = 1;
			continue;
		}
		*sp = 0;
		const char *val = sp + 1;
		if (strcmp(line, "pool") == 0) {
			pool = buf + (val - copy);
			pool_len = strlen(val);
		} else if (strcmp(line, "loop") == 0) {
			loop = buf + (val - copy);
			loop_len = strlen(val);
		} else if (strcmp(line, "kernel") == 0) {
			n_kernels++;
		} else if (strcmp(line, "session") == 0) {
			n_sessions++;
		} else {
			size_t k;
			for (k = 0; k < sizeof stat_metrics / sizeof stat_metrics[0]; k++)
				if (strcmp(line, stat_metrics[k].key) == 0)
					break;
			char *end;
			unsigned long long v = strtoull(val, &end, 10);
			if (*end || k == sizeof stat_metrics / sizeof stat_metrics[0]) {
				bad |= *end != 0;
				continue;	/* a key this tool does not know yet: left out */
			}
			if (format == STATS_JSON)
				printf(", \"%s\": %llu", line, v);
			else
				printf("# HELP %s %s\n# TYPE %s %s\n%s %llu\n", stat_metrics[k].metric, stat_metrics[k].help,
				       stat_metrics[k].metric, stat_metrics[k].type, stat_metrics[k].metric, v);
		}
	}
	if (format == STATS_JSON) {
		printf(", \"pool\": ");
		json_string(stdout, pool, pool_len);
		printf(", \"loop\": ");
		json_string(stdout, loop, loop_len);
	} else {
		printf("qgraph_info{version=\"%s\",pool=\"", PACKAGE_VERSION);
		prom_label(stdout, pool, pool_len);
		printf("\",loop=\"");
		prom_label(stdout, loop, loop_len);
		printf("\"} 1\n");
	}
	/* kernels */
	if (format == STATS_JSON)
		printf(", \"kernels\": [");
	else if (n_kernels)
		printf("# HELP qgraph_kernel_info The kernel chosen for each weight layout.\n# TYPE qgraph_kernel_info gauge\n");
	for (char *p = buf; (p = strstr(p, "kernel ")); p += 7) {
		if (p != buf && p[-1] != '\n')
			continue;	/* inside another line (a session's name) */
		char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		const char *layout = p + 7, *kernel = memchr(layout, ' ', len - 7);
		if (kernel) {
			size_t llen = (size_t)(kernel - layout), klen = len - 7 - llen - 1;
			kernel++;
			if (format == STATS_JSON) {
				printf("%s{\"layout\": ", first ? "" : ", ");
				json_string(stdout, layout, llen);
				printf(", \"kernel\": ");
				json_string(stdout, kernel, klen);
				printf("}");
			} else {
				printf("qgraph_kernel_info{layout=\"");
				prom_label(stdout, layout, llen);
				printf("\",kernel=\"");
				prom_label(stdout, kernel, klen);
				printf("\"} 1\n");
			}
			first = 0;
		}
	}
	/* sessions: each metric's series together, as the exposition format wants */
	size_t rounds = format == STATS_JSON ? 1 : sizeof session_metrics / sizeof session_metrics[0];
	if (format == STATS_JSON)
		printf("], \"session\": [");
	for (size_t m = 0; m < rounds && n_sessions; m++) {
		if (format == STATS_PROMETHEUS)
			printf("# HELP %s %s\n# TYPE %s %s\n", session_metrics[m].metric, session_metrics[m].help,
			       session_metrics[m].metric, session_metrics[m].type);
		first = 1;
		for (char *p = buf; (p = strstr(p, "session ")); p += 8) {
			struct stat_session ss;
			if (p != buf && p[-1] != '\n')
				continue;
			if (parse_session(p + 8, &ss)) {
				bad = 1;
				continue;
			}
			if (format == STATS_JSON) {
				printf("%s{\"session_id\": %llu, \"pid\": %llu, \"uid\": %llu, \"name\": ", first ? "" : ", ",
				       ss.id, ss.pid, ss.uid);
				json_string(stdout, ss.name, ss.name_len);
				for (size_t k = 0; k < sizeof session_metrics / sizeof session_metrics[0]; k++)
					printf(", \"%s\": %llu", session_metrics[k].key, ss.v[k]);
				printf("}");
			} else {
				printf("%s{session=\"%llu\",pid=\"%llu\",uid=\"%llu\",name=\"", session_metrics[m].metric, ss.id,
				       ss.pid, ss.uid);
				prom_label(stdout, ss.name, ss.name_len);
				printf("\"} %llu\n", ss.v[m]);
			}
			first = 0;
		}
	}
	if (format == STATS_JSON)
		printf("]}\n");
	free(copy);
	return bad ? -1 : 0;
}

static int cmd_stats(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char buf[65536];
	int format = STATS_TEXT, c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': format = STATS_JSON; break;
		case 'p': format = STATS_PROMETHEUS; break;
		case 'h':
			printf("Usage: qgraph-submit stats [--json | --prometheus]\n"
			       "Print the daemon's sessions, memory, plans and kernels: as \"key value\" lines,\n"
			       "one JSON object (--json), or the Prometheus text format, metrics qgraph_*\n"
			       "(--prometheus, e.g. for node_exporter's textfile collector).\n");
			return 0;
		default: return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "qgraph-submit stats: unexpected argument '%s'\n", argv[optind]);
		return EXIT_USAGE;
	}
	struct qgraph_session *s = connect_or_die("qgraph-submit stats", 1 << 20);
	ssize_t n = qgraph_stats(s, buf, sizeof buf);
	if (n < 0) {
		fprintf(stderr, "qgraph-submit stats: %s\n", qgraph_session_error(s));
		return EXIT_WRONG;
	}
	qgraph_session_close(s);
	if (print_stats(buf, format)) {
		fprintf(stderr, "qgraph-submit stats: the daemon's stats have a line this tool cannot read\n");
		return EXIT_WRONG;
	}
	return 0;
}

static int cmd_info(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--help") == 0) {
		printf("Usage: qgraph-submit info\nPrint what the daemon runs on: CPU features, kernels, layout.\n");
		return 0;
	}
	struct qgraph_session *s = connect_or_die("qgraph-submit info", 1 << 20);
	fputs(qgraph_session_info(s), stdout);
	qgraph_session_close(s);
	return 0;
}

/* ---------------------------------------------------------------- GGUF models */

/* Print the string S of LEN bytes quoted, control bytes escaped, at most MAX bytes of it. */
static void print_quoted(const char *s, uint64_t len, uint64_t max)
{
	putchar('"');
	for (uint64_t i = 0; i < len && i < max; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			printf("\\x%02x", ch);
		else
			putchar(ch);
	}
	putchar('"');
	if (len > max)
		printf("... (%llu bytes)", (unsigned long long)len);
}

/* Print one metadata value: scalars as they are, strings quoted, arrays as "[type x N]". */
static void print_kv(const struct qg_gguf_kv *kv)
{
	switch (kv->type) {
	case QG_GGUF_STRING:
		print_quoted(kv->str, kv->str_len, 120);
		break;
	case QG_GGUF_ARRAY:
		printf("[%s x %llu]", qg_gguf_vtype_name(kv->array_type), (unsigned long long)kv->array_n);
		break;
	case QG_GGUF_F32:
	case QG_GGUF_F64:
		printf("%.9g", kv->v.f);
		break;
	case QG_GGUF_BOOL:
		fputs(kv->v.u ? "true" : "false", stdout);
		break;
	case QG_GGUF_I8:
	case QG_GGUF_I16:
	case QG_GGUF_I32:
	case QG_GGUF_I64:
		printf("%lld", (long long)kv->v.i);
		break;
	default:
		printf("%llu", (unsigned long long)kv->v.u);
	}
}

static int cmd_inspect(int argc, char **argv)
{
	if (argc != 2 || strcmp(argv[1], "--help") == 0) {
		fprintf(argc == 2 ? stdout : stderr,
			"Usage: qgraph-submit inspect FILE.gguf\n"
			"Print a GGUF file's architecture, metadata and tensors (name, type, shape,\n"
			"bytes), and the totals per type.  Needs no daemon.\n");
		return argc == 2 ? 0 : EXIT_USAGE;
	}
	const char *path = argv[1];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "qgraph-submit inspect: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return EXIT_WRONG;
	}
	size_t len = (size_t)st.st_size;
	void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (map == MAP_FAILED) {
		fprintf(stderr, "qgraph-submit inspect: %s: %s\n", path, strerror(errno));
		return EXIT_WRONG;
	}
	struct qg_gguf *g;
	char err[512];
	if (qg_gguf_open(map, len, &g, err, sizeof err)) {
		fprintf(stderr, "qgraph-submit inspect: %s: %s\n", path, err);
		if (map)
			munmap(map, len);
		return EXIT_WRONG;
	}
	const char *arch = qg_gguf_kv_string(g, "general.architecture");
	printf("file: %s\nformat: GGUF version %u, %zu bytes, alignment %u, data at offset %zu\n", path,
	       qg_gguf_version(g), len, qg_gguf_alignment(g), qg_gguf_data_offset(g));
	printf("architecture: %s\n", arch ? arch : "(none)");
	printf("metadata: %zu keys\n", qg_gguf_kv_count(g));
	for (size_t i = 0; i < qg_gguf_kv_count(g); i++) {
		const struct qg_gguf_kv *kv = qg_gguf_kv_at(g, i);
		printf("  %-40s %-6s ", kv->key, qg_gguf_vtype_name(kv->type));
		print_kv(kv);
		putchar('\n');
	}
	size_t nt = qg_gguf_tensor_count(g);
	uint64_t count[QG_GGML_TYPE_LIMIT] = { 0 }, bytes[QG_GGML_TYPE_LIMIT] = { 0 }, total = 0;
	printf("tensors: %zu\n", nt);
	printf("  %-40s %-8s %-24s %14s\n", "name", "type", "shape", "bytes");
	for (size_t i = 0; i < nt; i++) {
		const struct qg_gguf_tensor *t = qg_gguf_tensor_at(g, i);
		char shape[96];
		int n = 0;
		for (uint32_t d = 0; d < t->n_dims && n >= 0 && (size_t)n < sizeof shape; d++)
			n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%lld", d ? " x " : "", (long long)t->ne[d]);
		printf("  %-40s %-8s %-24s %14llu\n", t->name, qg_ggml_type_name(t->type), shape,
		       (unsigned long long)t->bytes);
		count[t->type]++;
		bytes[t->type] += t->bytes;
		total += t->bytes;
	}
	printf("totals:\n");
	for (uint32_t ty = 0; ty < QG_GGML_TYPE_LIMIT; ty++)
		if (count[ty])
			printf("  %-8s %6llu tensors %14llu bytes (%.1f MiB)\n", qg_ggml_type_name(ty),
			       (unsigned long long)count[ty], (unsigned long long)bytes[ty], bytes[ty] / 1048576.0);
	printf("  %-8s %6zu tensors %14llu bytes (%.1f MiB)\n", "all", nt, (unsigned long long)total,
	       total / 1048576.0);
	qg_gguf_free(g);
	if (map)
		munmap(map, len);
	return 0;
}

/* qgraph_progress_fn for load: tensors done / total and MiB/s on a terminal. */
static void load_progress(void *ctx, size_t done, size_t total, uint64_t bytes_done, uint64_t bytes_total)
{
	double t = now_s() - *(double *)ctx;

	if (quiet || !isatty(STDERR_FILENO))
		return;
	fprintf(stderr, "\rloading: %zu/%zu tensors, %.1f/%.1f MiB, %.1f MiB/s", done, total, bytes_done / 1048576.0,
		bytes_total / 1048576.0, t > 0 ? bytes_done / 1048576.0 / t : 0.0);
	if (done == total)
		fputc('\n', stderr);
}

static int cmd_load(int argc, char **argv)
{
	const char *path = NULL, *name = NULL;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			printf("Usage: qgraph-submit load FILE.gguf [--name MODEL]\n"
			       "Load a GGUF model into the daemon, held there for every client until\n"
			       "'qgraph-submit unload MODEL'.  MODEL defaults to the file's name without\n"
			       ".gguf; its tensors are opened as \"MODEL/tensor.name\".\n");
			return 0;
		}
		if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
			name = argv[++i];
		else if (strncmp(argv[i], "--name=", 7) == 0)
			name = argv[i] + 7;
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else {
			fprintf(stderr, "Usage: qgraph-submit load FILE.gguf [--name MODEL]\n");
			return EXIT_USAGE;
		}
	}
	if (!path) {
		fprintf(stderr, "Usage: qgraph-submit load FILE.gguf [--name MODEL]\n");
		return EXIT_USAGE;
	}
	struct qgraph_session *s = connect_or_die("qgraph-submit load", 16u << 20);
	double t0 = now_s();
	int r = qgraph_model_load(s, path, name, load_progress, &t0);
	if (r) {
		fprintf(stderr, "\nqgraph-submit load: %s\n", qgraph_session_error(s));
		qgraph_session_close(s);
		return EXIT_WRONG;
	}
	if (!quiet)
		printf("loaded %s in %.2f s\n", path, now_s() - t0);
	qgraph_session_close(s);
	return 0;
}

static int cmd_unload(int argc, char **argv)
{
	if (argc != 2 || strcmp(argv[1], "--help") == 0) {
		fprintf(argc == 2 ? stdout : stderr, "Usage: qgraph-submit unload MODEL\n"
						     "Let the daemon go of a model loaded with 'load' or preload.\n");
		return argc == 2 ? 0 : EXIT_USAGE;
	}
	struct qgraph_session *s = connect_or_die("qgraph-submit unload", 1 << 20);
	int r = qgraph_model_unload(s, argv[1]);
	if (r)
		fprintf(stderr, "qgraph-submit unload: %s\n", qgraph_session_error(s));
	qgraph_session_close(s);
	return r ? EXIT_WRONG : 0;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: qgraph-submit [-s PATH] [-q] COMMAND [OPTIONS]\n"
		   "Run work through qgraphd.\n\n"
		   "  -s, --socket PATH  the daemon's socket (default: $QGRAPH_SOCKET, else your own\n"
		   "                     daemon's, else the system daemon's /run/qgraph/qgraphd.sock)\n"
		   "  -q, --quiet        print less\n"
		   "  -h, --help         show this help\n"
		   "  -V, --version      show the version\n\n"
		   "  gemm    multiply random weights by activations, check, time\n"
		   "  mlp     feed-forward blocks with real ops, check, time\n"
		   "  run     a graph saved in a file (gemm and mlp --save FILE)\n"
		   "  bench   latency and throughput of small graphs\n"
		   "  stats   the daemon's sessions, memory, plans, kernels (--json, --prometheus)\n"
		   "  info    what the daemon runs on\n"
		   "  inspect a GGUF file's metadata and tensors\n"
		   "  load    a GGUF model into the daemon, for every client\n"
		   "  unload  a model the daemon holds\n\n"
		   "COMMAND --help tells more.  Exit status: 0 ok, 1 failed or wrong, 2 usage,\n"
		   "3 no daemon.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int c;

	/* "+": the global options end at the command, whose own options follow it */
	while ((c = getopt_long(argc, argv, "+s:qhV", opts, NULL)) != -1) {
		switch (c) {
		case 's': socket_path = optarg; break;
		case 'q': quiet = 1; break;
		case 'h': return usage(stdout), 0;
		case 'V': return printf("qgraph-submit %s\n", PACKAGE_VERSION), 0;
		default: return usage(stderr), EXIT_USAGE;	/* getopt named the option */
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "qgraph-submit: no command\n");
		return usage(stderr), EXIT_USAGE;
	}
	const char *cmd = argv[optind];
	argc -= optind;
	argv += optind;
	optind = 0;	/* each command parses its own options from scratch (GNU getopt: 0 resets it) */
	if (strcmp(cmd, "gemm") == 0)
		return cmd_gemm(argc, argv);
	if (strcmp(cmd, "mlp") == 0)
		return cmd_mlp(argc, argv);
	if (strcmp(cmd, "run") == 0)
		return cmd_run(argc, argv);
	if (strcmp(cmd, "bench") == 0)
		return cmd_bench(argc, argv);
	if (strcmp(cmd, "stats") == 0)
		return cmd_stats(argc, argv);
	if (strcmp(cmd, "info") == 0)
		return cmd_info(argc, argv);
	if (strcmp(cmd, "inspect") == 0)
		return cmd_inspect(argc, argv);
	if (strcmp(cmd, "load") == 0)
		return cmd_load(argc, argv);
	if (strcmp(cmd, "unload") == 0)
		return cmd_unload(argc, argv);
	fprintf(stderr, "qgraph-submit: unknown command '%s'\n", cmd);
	usage(stderr);
	return EXIT_USAGE;
}
