/*
 * qgraph-submit - run work through qgraphd from the command line.
 *
 *   qgraph-submit [--socket PATH] COMMAND [OPTIONS]
 *
 * Commands: gemm, mlp, run, bench, stats, info (each has --help).
 * Exit status: 0 success, 1 the work failed or its result was wrong,
 * 2 bad usage, 3 no daemon to talk to.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mulmat.h"
#include "qgraph.h"
#include "qgraph.pb-c.h"

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

/* ---------------------------------------------------------------- gemm */

static int cmd_gemm(int argc, char **argv)
{
	long m = 4096, n = 32, k = 4096, reps = 5;
	const char *tname = "q4_0";
	static const struct option opts[] = {
		{ "m", required_argument, NULL, 'm' }, { "n", required_argument, NULL, 'n' },
		{ "k", required_argument, NULL, 'k' }, { "type", required_argument, NULL, 't' },
		{ "repeat", required_argument, NULL, 'r' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "m:n:k:t:r:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': m = atol(optarg); break;
		case 'n': n = atol(optarg); break;
		case 'k': k = atol(optarg); break;
		case 't': tname = optarg; break;
		case 'r': reps = atol(optarg); break;
		case 'h':
			printf("Usage: qgraph-submit gemm [-m M] [-n N] [-k K] [--type TYPE] [--repeat R]\n"
			       "Multiply random M x K weights (quantized to TYPE by the daemon; q4_0 lets\n"
			       "it pick its fastest layout) by N x K activations through qgraphd, check\n"
			       "the result against the portable kernel in this process, and print the\n"
			       "time (median of R runs) and GFLOP/s.  Defaults: 4096 32 4096 q4_0 5.\n");
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
	int yi = qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, xi, 0), yo);
	uint64_t id, handle;
	struct qgraph_result res;
	if (yi < 0 || (r = qgraph_submit(s, g, QGRAPH_SUBMIT_KEEP | QGRAPH_SUBMIT_BLOCK, &id)) ||
	    (r = qgraph_wait(s, id, -1, &res)) || (r = res.status)) {
		fprintf(stderr, "qgraph-submit gemm: %s\n", r ? qgraph_session_error(s) : "cannot build the graph");
		return EXIT_WRONG;
	}
	handle = res.handle;
	double *times = calloc((size_t)reps, sizeof *times);
	for (long i = 0; i < reps; i++) {
		double a = now_s();
		if ((r = qgraph_run(s, handle, NULL, QGRAPH_SUBMIT_BLOCK, &id)) || (r = qgraph_wait(s, id, -1, &res)) ||
		    (r = res.status)) {
			fprintf(stderr, "qgraph-submit gemm: run: %s\n", qgraph_session_error(s));
			return EXIT_WRONG;
		}
		times[i] = now_s() - a;
		progress("gemm", i + 1, reps);
	}
	qsort(times, (size_t)reps, sizeof *times, cmp_double);

	/* the reference: the portable kernel in this process, on the same quantized bytes */
	ssize_t wb = qgraph_matrix_size(stored, m, k);
	void *wq = malloc((size_t)wb);
	qgraph_quantize(stored, w, wq, (size_t)wb, m, k, NULL);
	struct qg_mm mm = { .wtype = (enum qg_type)stored, .w = wq, .m = m, .k = k,
			    .x = (const float *)(arena + xo), .ldx = (size_t)k, .n = n, .y = ref, .ldy = (size_t)m };
	if (qg_layout_of(mm.wtype) >= 0)
		mm.kernel = qg_kernel_get(QG_KF_PORTABLE, (enum qg_layout)qg_layout_of(mm.wtype));
	void *scratch = aligned_alloc(64, (qg_mul_mat_scratch_size(&mm) + 63) & ~(size_t)63);
	qg_mul_mat(&mm, scratch);
	double err = rel_err((const float *)(arena + yo), ref, (size_t)n * m);
	double flops = 2.0 * m * n * k;
	printf("gemm m=%ld n=%ld k=%ld type=%s stored=%s: median %.3f ms (%.1f GFLOP/s), upload %.1f ms, "
	       "max error vs portable %.2e: %s\n",
	       m, n, k, tname, qgraph_type_name(stored), times[reps / 2] * 1e3, flops / times[reps / 2] * 1e-9,
	       t_up * 1e3, err, err < 1e-3 ? "ok" : "WRONG");
	free(scratch);
	free(wq);
	free(times);
	free(w);
	free(ref);
	qgraph_graph_free(g);
	qgraph_session_close(s);
	return err < 1e-3 ? 0 : EXIT_WRONG;
}

/* ---------------------------------------------------------------- stats, info */

static int cmd_stats(int argc, char **argv)
{
	char buf[16384];

	if (argc > 1 && strcmp(argv[1], "--help") == 0) {
		printf("Usage: qgraph-submit stats\nPrint the daemon's sessions, memory, plans and kernels.\n");
		return 0;
	}
	struct qgraph_session *s = connect_or_die("qgraph-submit stats", 1 << 20);
	ssize_t n = qgraph_stats(s, buf, sizeof buf);
	if (n < 0) {
		fprintf(stderr, "qgraph-submit stats: %s\n", qgraph_session_error(s));
		return EXIT_WRONG;
	}
	fputs(buf, stdout);
	qgraph_session_close(s);
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

static void usage(FILE *f)
{
	fprintf(f, "Usage: qgraph-submit [--socket PATH] [--quiet] COMMAND [OPTIONS]\n"
		   "Run work through qgraphd.\n\n"
		   "  gemm    multiply random weights by activations, check, time\n"
		   "  stats   the daemon's sessions, memory, plans, kernels\n"
		   "  info    what the daemon runs on\n\n"
		   "COMMAND --help tells more.  Exit status: 0 ok, 1 failed or wrong, 2 usage,\n"
		   "3 no daemon.  The socket: --socket, else $QGRAPH_SOCKET, else qgraphd's default.\n");
}

int main(int argc, char **argv)
{
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc)
			socket_path = argv[++i];
		else if (strncmp(argv[i], "--socket=", 9) == 0)
			socket_path = argv[i] + 9;
		else if (strcmp(argv[i], "--quiet") == 0)
			quiet = 1;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return usage(stdout), 0;
		else if (strcmp(argv[i], "--version") == 0)
			return printf("qgraph-submit %s\n", PACKAGE_VERSION), 0;
		else
			return usage(stderr), EXIT_USAGE;
	}
	if (i >= argc)
		return usage(stderr), EXIT_USAGE;
	const char *cmd = argv[i];
	argc -= i;
	argv += i;
	optind = 1;
	if (strcmp(cmd, "gemm") == 0)
		return cmd_gemm(argc, argv);
	if (strcmp(cmd, "stats") == 0)
		return cmd_stats(argc, argv);
	if (strcmp(cmd, "info") == 0)
		return cmd_info(argc, argv);
	fprintf(stderr, "qgraph-submit: unknown command '%s'\n", cmd);
	usage(stderr);
	return EXIT_USAGE;
}
