/*
 * qgraph-submit - run work through qgraphd from the command line.
 *
 *   qgraph-submit [--socket PATH] COMMAND [OPTIONS]
 *
 * Commands: gemm, mlp, run, bench, stats, info, inspect, load, unload
 * (each has --help); mlp --mpi and bench --mpi under mpirun (submit-mpi.c).
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

#include "graph-file.h"
#include "mulmat.h"
#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "submit.h"
#include "wire.h"

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

/* qgraph_progress_fn for an upload: its MiB on the progress bar. */
static void upload_progress(void *ctx, size_t tensors_done, size_t tensors_total, uint64_t bytes_done,
			    uint64_t bytes_total)
{
	(void)tensors_done;
	(void)tensors_total;
	progress(ctx, (long)(bytes_done >> 20), (long)(bytes_total >> 20));
}

/*
 * Register G, then run it REPS times, each time to its completion.  Returns
 * the median run time in seconds, or a negative value (with the reason on
 * stderr, prefixed by WHAT) when a step failed.
 */
static double register_and_time(struct qgraph_session *s, struct qgraph_graph *g, long reps, const char *what)
{
	uint64_t id, handle;
	struct qgraph_result res = QGRAPH_RESULT_INIT;
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
		{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c, json = 0;

	while ((c = getopt_long(argc, argv, "m:n:k:t:r:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 's': save = optarg; break;
		case 'm': m = atol(optarg); break;
		case 'n': n = atol(optarg); break;
		case 'k': k = atol(optarg); break;
		case 't': tname = optarg; break;
		case 'r': reps = atol(optarg); break;
		case 'h':
			printf("Usage: qgraph-submit gemm [-m M] [-n N] [-k K] [--type TYPE] [--repeat R] [--save FILE] [--json]\n"
			       "Multiply random M x K weights (quantized to TYPE by the daemon: q4_0 lets\n"
			       "it pick its fastest layout; q4_K and q6_K need K a multiple of 256)\n"
			       "by N x K activations through qgraphd, check\n"
			       "the result against the portable kernel in this process, and print the\n"
			       "time (median of R runs) and GFLOP/s.  Defaults: 4096 32 4096 q4_0 5.\n"
			       "--save FILE also writes the graph, its weights and inputs to FILE, for\n"
			       "'qgraph-submit run FILE'.  --json prints the result as one JSON object.\n");
			return 0;
		default: return EXIT_USAGE;
		}
	}
	int type = qgraph_type_from_name(tname);
	int bv = type < 0 ? 32 : qgraph_type_block_values((enum qgraph_type)type);
	if (bv < 32)
		bv = 32;
	if (type < 0 || type == QGRAPH_TYPE_Q8_0_4X4 || type == QGRAPH_TYPE_Q8_0_4X8 || type == QGRAPH_TYPE_Q8_K ||
	    m < 1 || n < 1 || k < bv || k % bv || reps < 1) {
		fprintf(stderr, "qgraph-submit gemm: bad shape or type (k a multiple of 32, of 256 for q4_K and "
				"q6_K; type one of f32 f16 q8_0 q4_0 q4_0_4x4 q4_0_4x8 q4_0_8x8 q4_K q6_K)\n");
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
	struct qgraph_upload_opts uo = { .size = sizeof uo, .src_type = QGRAPH_TYPE_F32, .target = (enum qgraph_type)type,
					 .rows = m, .cols = k, .data = w, .progress = upload_progress,
					 .progress_ctx = "upload MiB" };
	int r = qgraph_weights_upload(s, &uo, &wh, &stored);
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
	if (mm.wtype == QG_TYPE_Q4_K || mm.wtype == QG_TYPE_Q6_K)
		mm.kq_kernel = qg_kq_kernel_get(QG_KF_PORTABLE);
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
	if (json)
		printf("{\"command\": \"gemm\", \"m\": %ld, \"n\": %ld, \"k\": %ld, \"type\": \"%s\", \"stored\": \"%s\", "
		       "\"repeat\": %ld, \"median_ms\": %.6f, \"gflops\": %.3f, \"upload_ms\": %.3f, \"max_error\": %.3e, "
		       "\"ok\": %s}\n",
		       m, n, k, qgraph_type_name((enum qgraph_type)type), qgraph_type_name(stored), reps, med * 1e3,
		       flops / med * 1e-9, t_up * 1e3, err, err < 1e-3 ? "true" : "false");
	else
		printf("gemm m=%ld n=%ld k=%ld type=%s stored=%s: median %.3f ms (%.1f GFLOP/s), upload %.1f ms, "
		       "max error vs portable %.2e: %s\n",
		       m, n, k, tname, qgraph_type_name(stored), med * 1e3, flops / med * 1e-9, t_up * 1e3, err,
		       err < 1e-3 ? "ok" : "WRONG");
	free(scratch);
	free(wq);
	free(w);
	free(ref);
	qgraph_graph_free(g);
	qgraph_session_close(s);
	return err < 1e-3 ? 0 : EXIT_WRONG;
}


/* ---------------------------------------------------------------- mlp */

static int cmd_mlp(int argc, char **argv)
{
	long d = 1024, h = 2816, n = 8, layers = 2, reps = 3;
	const char *save = NULL;
	static const struct option opts[] = {
		{ "dim", required_argument, NULL, 'd' }, { "hidden", required_argument, NULL, 'H' },
		{ "tokens", required_argument, NULL, 'n' }, { "layers", required_argument, NULL, 'l' },
		{ "repeat", required_argument, NULL, 'r' }, { "save", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c, json = 0;

	while ((c = getopt_long(argc, argv, "d:H:n:l:r:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 's': save = optarg; break;
		case 'd': d = atol(optarg); break;
		case 'H': h = atol(optarg); break;
		case 'n': n = atol(optarg); break;
		case 'l': layers = atol(optarg); break;
		case 'r': reps = atol(optarg); break;
		case 'h':
			printf("Usage: qgraph-submit mlp [--dim D] [--hidden H] [--tokens N] [--layers L] [--repeat R]\n"
			       "                         [--save FILE] [--json]\n"
			       "Run L transformer feed-forward blocks (rms_norm, Q4_0 up and gate projections,\n"
			       "silu gate, Q4_0 down projection, residual add) on N tokens through qgraphd as\n"
			       "one registered graph, check it against the same computation in this process,\n"
			       "and print the median time.  Defaults: 1024 2816 8 2 3.  --save FILE also writes\n"
			       "the graph, its weights and inputs to FILE, for 'qgraph-submit run FILE'.\n"
			       "--json prints the result as one JSON object.\n");
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
			struct qgraph_upload_opts uo = { .size = sizeof uo, .src_type = QGRAPH_TYPE_F32,
							 .target = QGRAPH_TYPE_Q4_0, .rows = rows[i], .cols = cols[i],
							 .data = w };
			if (qgraph_weights_upload(s, &uo, &handle, &wt[l][i])) {
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
	if (json)
		printf("{\"command\": \"mlp\", \"dim\": %ld, \"hidden\": %ld, \"tokens\": %ld, \"layers\": %ld, "
		       "\"stored\": \"%s\", \"repeat\": %ld, \"median_ms\": %.6f, \"gflops\": %.3f, \"max_error\": %.3e, "
		       "\"ok\": %s}\n",
		       d, h, n, layers, qgraph_type_name(wt[0][0]), reps, med * 1e3, flops / med * 1e-9, err,
		       err < 1e-3 ? "true" : "false");
	else
		printf("mlp dim=%ld hidden=%ld tokens=%ld layers=%ld (%s): median %.3f ms (%.1f GFLOP/s), "
		       "max error vs in-process %.2e: %s\n",
		       d, h, n, layers, qgraph_type_name(wt[0][0]), med * 1e3, flops / med * 1e-9, err,
		       err < 1e-3 ? "ok" : "WRONG");
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
		{ "print", required_argument, NULL, 'p' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "r:p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': o.json = 1; break;
		case 'r': o.repeat = atol(optarg); break;
		case 'C': o.check = 0; break;
		case 'p': o.print = atoi(optarg); break;
		case 'h':
			printf("Usage: qgraph-submit run [--repeat R] [--print N] [--no-check] [--json] FILE\n"
			       "Run the graph saved in FILE (gemm and mlp --save write one) through qgraphd:\n"
			       "upload its weights, copy its inputs into the arena, register it, run it R\n"
			       "times (default 3) and print the median time.  Each output is checked against\n"
			       "the same graph computed in this process unless --no-check; --print N shows\n"
			       "its first N values.  --json prints the result as one JSON object.\n");
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
	struct qgraph_result res = QGRAPH_RESULT_INIT;
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

/* ---------------------------------------------------------------- info */

/* The session's facts (qgraph_session_info's lines) as one JSON object. */
static void info_json(const char *info)
{
	printf("{\"tool_version\": \"%s\"", PACKAGE_VERSION);
	int kernels = 0;
	for (const char *p = info; *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		const char *sp = memchr(p, ' ', len);
		size_t klen = sp ? (size_t)(sp - p) : len;
		const char *v = sp ? sp + 1 : p + len;
		size_t vlen = len - klen - (sp != NULL);
		if (klen == 6 && strncmp(p, "kernel", 6) == 0) {
			/* "kernel LAYOUT NAME (REASON)" */
			const char *name = memchr(v, ' ', vlen), *why = name ? strstr(name, " (") : NULL;
			if (why && why > v + vlen)
				why = NULL;
			printf(kernels++ ? ", " : ", \"kernels\": [");
			printf("{\"layout\": ");
			json_string(stdout, v, name ? (size_t)(name - v) : vlen);
			printf(", \"kernel\": ");
			if (name)
				json_string(stdout, name + 1, (size_t)((why ? why : v + vlen) - name - 1));
			else
				printf("\"\"");
			printf(", \"reason\": ");
			if (why)
				json_string(stdout, why + 2, (size_t)(v + vlen - why - 2 - (v[vlen - 1] == ')')));
			else
				printf("\"\"");
			printf("}");
		} else if (klen) {
			if (kernels) {
				printf("]");
				kernels = 0;
			}
			printf(", ");
			json_string(stdout, p, klen);
			printf(": ");
			char *end;
			unsigned long long n = strtoull(v, &end, 10);
			if (vlen && end == v + vlen)
				printf("%llu", n);
			else
				json_string(stdout, v, vlen);
		}
		p += len + (eol != NULL);
	}
	printf("%s}\n", kernels ? "]" : "");
}

static int cmd_info(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c, json = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 'h':
			printf("Usage: qgraph-submit info [--json]\nPrint what the daemon runs on: CPU features, kernels, "
			       "layout\n(--json: as one JSON object).\n");
			return 0;
		default: return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "qgraph-submit info: unexpected argument '%s'\n", argv[optind]);
		return EXIT_USAGE;
	}
	struct qgraph_session *s = connect_or_die("qgraph-submit info", 1 << 20);
	if (json)
		info_json(qgraph_session_info(s));
	else
		fputs(qgraph_session_info(s), stdout);
	qgraph_session_close(s);
	return 0;
}

/* Is --mpi among a command's options? */
static int mpi_asked(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--mpi") == 0)
			return 1;
	return 0;
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
		   "  mlp     feed-forward blocks with real ops, check, time (--mpi: tensor-parallel)\n"
		   "  run     a graph saved in a file (gemm and mlp --save FILE)\n"
		   "  bench   latency and throughput of small graphs (--mpi: a sharded FFN)\n"
		   "  stats   the daemon's sessions, memory, plans, kernels (--json, --prometheus)\n"
		   "  info    what the daemon runs on\n"
		   "  inspect a GGUF file's metadata and tensors\n"
		   "  load    a GGUF model into the daemon, for every client\n"
		   "  unload  a model the daemon holds\n\n"
		   "COMMAND --help tells more.  Exit status: 0 ok, 1 failed or wrong, 2 usage,\n"
		   "3 no daemon.  See qgraph-submit(1).\n"
		   "Report bugs to: " PACKAGE_BUGREPORT "\n");
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

	check_stdout_at_exit();
	/* "+": the global options end at the command, whose own options follow it */
	while ((c = getopt_long(argc, argv, "+s:qhV", opts, NULL)) != -1) {
		switch (c) {
		case 's': socket_path = optarg; break;
		case 'q': quiet = 1; break;
		case 'h': return usage(stdout), 0;
		case 'V': return printf("qgraph-submit (qgraph) %s\n", PACKAGE_VERSION), 0;
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
	if ((strcmp(cmd, "mlp") == 0 || strcmp(cmd, "bench") == 0) && mpi_asked(argc, argv))
#ifdef HAVE_MPI
		return cmd_mpi(cmd, argc, argv);
#else
		return fprintf(stderr, "qgraph-submit %s --mpi: built without MPI (configure found none)\n", cmd), EXIT_USAGE;
#endif
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
