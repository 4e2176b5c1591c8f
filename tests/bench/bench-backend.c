/*
 * bench-backend.c - the CPU backend's overhead on a feed-forward block,
 * against the sum of the block's kernels run alone.
 *
 *   bench-backend [--json] [--quick] [--threads 1,2] [--n N] [--cpus LIST]
 *
 * The block: x [4096, n] -> up and gate MUL_MATs (4096 -> 14336, Q4_0 in
 * the layout this CPU runs fastest, qg_best_weight_type), SILU of the
 * gate, MUL with up, down MUL_MAT (14336 -> 4096): five nodes, 99 MB of
 * weights, at n = 1 (GEMV, bound by memory) and n = 32 (GEMM, bound by
 * int8 throughput).
 *
 * "Backend" is one qg_backend_graph_plan_compute of the block's plan on a
 * CPU backend of THREADS threads (the plan made once).  The limit,
 * "kernels alone", is the sum over the five nodes of the median time of
 * that node's qg_op_compute phases run on a spinning pool of the same
 * thread count (tests/bench/bench.h), nothing else in the loop.  Both are
 * medians over repetitions, interleaved so that a busy machine slows both
 * alike.  Overhead = backend / kernels - 1, in percent; the JSON ratio is
 * kernels / backend (1.0: no overhead).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-cpu.h"
#include "bench.h"
#include "buffer.h"
#include "fp16.h"
#include "graph.h"
#include "kernels.h"
#include "ops.h"
#include "quant.h"

#define D_MODEL 4096
#define D_FF 14336

struct opts {
	int json, quick;
	int threads[8], nthreads;
	int n;			/* 0: 1 and 32 */
	const char *cpus;
};

/* Random Q4_0 weights, repacked into W's type, written over W's data. */
static void fill_weights(struct qg_tensor *w, uint64_t seed)
{
	const int64_t rows = w->ne[1], cols = w->ne[0], nb = rows * cols / QG_QK;
	struct qg_block_q4_0 *q = bench_q4_0_blocks(nb, seed);

	if (w->type == QG_TYPE_Q4_0) {
		memcpy(w->data, q, (size_t)nb * sizeof *q);
	} else if (qg_repack(w->type, w->data, qg_tensor_nbytes(w), QG_TYPE_Q4_0, q, rows, cols) < 0) {
		fprintf(stderr, "bench-backend: repack to %s failed\n", qg_type_name(w->type));
		exit(1);
	}
	free(q);
}

struct ffn {
	struct qg_ctx *ctx;
	struct qg_graph *g;
	struct qg_buffer *bufs[16];
	int nbufs;
	struct qg_tensor *x;
};

static void place(struct ffn *f, struct qg_tensor *t)
{
	struct qg_buffer *b;

	if (t->data || t->view_src)
		return;
	if (qg_buft_alloc_buffer(qg_buft_host(), qg_buft_alloc_size(qg_buft_host(), t), &b) ||
	    qg_buffer_place(b, t, 0)) {
		fprintf(stderr, "bench-backend: no memory for %s\n", t->name);
		exit(1);
	}
	f->bufs[f->nbufs++] = b;
}

static void ffn_build(struct ffn *f, struct qg_tensor *const w[3], int64_t n)
{
	memset(f, 0, sizeof *f);
	f->ctx = qg_ctx_new(16);
	f->x = qg_tensor_new_2d(f->ctx, QG_TYPE_F32, D_MODEL, n);
	struct qg_tensor *up = qg_op_mul_mat(f->ctx, w[0], f->x);
	struct qg_tensor *gate = qg_op_mul_mat(f->ctx, w[1], f->x);
	struct qg_tensor *y = qg_op_mul_mat(f->ctx, w[2], qg_op_mul(f->ctx, qg_op_silu(f->ctx, gate), up));
	f->g = qg_graph_new(16);
	if (!y || qg_graph_build(f->g, y)) {
		fprintf(stderr, "bench-backend: %s\n", qg_ctx_error_text(f->ctx));
		exit(1);
	}
	place(f, f->x);
	for (size_t i = 0; i < f->g->n_nodes; i++)
		place(f, f->g->nodes[i]);
	bench_fill_x((float *)f->x->data, n * D_MODEL);
}

static void ffn_free(struct ffn *f)
{
	for (int i = 0; i < f->nbufs; i++)
		qg_buffer_free(f->bufs[i]);
	qg_graph_free(f->g);
	qg_ctx_free(f->ctx);
}

/* One node's phases on the bench pool, with its barrier between them. */
struct node_job {
	const struct qg_tensor *t;
	void *scratch;
};

static void node_fn(struct bench_pool *p, void *arg, int ith, int nth)
{
	const struct node_job *j = arg;
	int ph = qg_op_n_phases(j->t);

	for (int i = 0; i < ph; i++) {
		qg_op_compute(j->t, i, ith, nth, j->scratch);
		if (i + 1 < ph)
			bench_barrier(p);
	}
}

static void report(const struct opts *o, int64_t n, int nth, const char *layout, const char *kernel,
		   double be_ms, double k_ms)
{
	struct bench_result r = {
		.bench = "backend-ffn", .m = D_FF, .n = n, .k = D_MODEL, .threads = nth, .layout = layout,
		.kernel = kernel, .value = be_ms, .unit = "ms", .limit_name = "kernels alone ms",
		.limit_value = k_ms, .ratio = k_ms / be_ms,
	};
	if (o->json) {
		bench_json(stdout, &r);
		return;
	}
	printf("%4lld %3d %-10s %-20s %10.3f %10.3f %+9.2f%%\n", (long long)n, nth, layout, kernel, be_ms, k_ms,
	       100.0 * (be_ms / k_ms - 1.0));
	fflush(stdout);
}

static int parse_threads(struct opts *o, const char *arg)
{
	const char *s = arg;
	char *end;

	o->nthreads = 0;
	while (*s && o->nthreads < 8) {
		long v = strtol(s, &end, 10);
		if (end == s || v < 1 || v > 64 || (*end && *end != ','))
			return -1;
		o->threads[o->nthreads++] = (int)v;
		s = *end ? end + 1 : end;
	}
	return o->nthreads ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct opts o = { .threads = { 1, 2 }, .nthreads = 2 };
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },	  { "quick", no_argument, NULL, 'q' },
		{ "threads", required_argument, NULL, 't' }, { "n", required_argument, NULL, 'n' },
		{ "cpus", required_argument, NULL, 'c' },  { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'j': o.json = 1; break;
		case 'q': o.quick = 1; break;
		case 'c': o.cpus = optarg; break;
		case 'n':
			o.n = atoi(optarg);
			if (o.n < 1 || o.n > 512) {
				fprintf(stderr, "bench-backend: --n wants 1..512\n");
				return 2;
			}
			break;
		case 't':
			if (parse_threads(&o, optarg)) {
				fprintf(stderr, "bench-backend: --threads wants a list like 1,2\n");
				return 2;
			}
			break;
		case 'h':
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: bench-backend [--json] [--quick] [--threads 1,2] [--n N] [--cpus LIST]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	const enum qg_type wt = qg_best_weight_type();
	const int layout = qg_layout_of(wt);
	const char *kernel = layout >= 0 ? qg_kernel_for((enum qg_layout)layout)->name : "none";
	const int reps = o.quick ? 3 : 9;

	/* the weights, shared by the graphs of every n */
	struct qg_ctx *wctx = qg_ctx_new(4);
	struct qg_tensor *w[3] = {
		qg_tensor_new_2d(wctx, wt, D_MODEL, D_FF),
		qg_tensor_new_2d(wctx, wt, D_MODEL, D_FF),
		qg_tensor_new_2d(wctx, wt, D_FF, D_MODEL),
	};
	struct ffn wf = { 0 };
	for (int i = 0; i < 3; i++) {
		if (!w[i]) {
			fprintf(stderr, "bench-backend: %s\n", qg_ctx_error_text(wctx));
			return 1;
		}
		place(&wf, w[i]);
		fill_weights(w[i], 0x243f6a8885a308d3ULL + (uint64_t)i);
	}
	if (!o.json) {
		printf("feed-forward block %d -> %d -> %d, %s weights (%.1f MB), kernel %s; median of %d runs\n",
		       D_MODEL, D_FF, D_MODEL, qg_type_name(wt),
		       3.0 * (double)qg_tensor_nbytes(w[0]) / 1e6, kernel, reps);
		printf("%4s %3s %-10s %-20s %10s %10s %10s\n", "n", "thr", "weights", "kernel", "backend ms",
		       "kernels ms", "overhead");
	}
	static const int ns[] = { 1, 32 };
	for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
		if (o.n && o.n != ns[ni])
			continue;
		int64_t n = o.n ? o.n : ns[ni];
		struct ffn f;
		ffn_build(&f, w, n);
		for (int t = 0; t < o.nthreads; t++) {
			const int nth = o.threads[t];
			struct qg_cpu_opts co = { .cpus = o.cpus, .threads = nth };
			struct qg_backend *be;
			struct qg_plan *plan;
			int r = qg_backend_cpu_new(&co, &be);
			if (r || (r = qg_backend_graph_plan_create(be, f.g, &plan))) {
				fprintf(stderr, "bench-backend: backend of %d threads: %s\n", nth, strerror(-r));
				return 1;
			}
			size_t ss = 0;
			for (size_t i = 0; i < f.g->n_nodes; i++) {
				size_t s = qg_op_scratch_size(f.g->nodes[i], nth);
				ss = s > ss ? s : ss;
			}
			void *scratch = bench_alloc(ss);
			double *be_t = calloc((size_t)reps, sizeof *be_t);
			double *node_t = calloc((size_t)reps * f.g->n_nodes, sizeof *node_t);
			/* one warm-up of each, then interleaved repetitions */
			for (int rep = -1; rep < reps; rep++) {
				double t0 = bench_now();
				if ((r = qg_backend_graph_plan_compute(be, plan, NULL))) {
					fprintf(stderr, "bench-backend: run failed: %s\n", strerror(-r));
					return 1;
				}
				if (rep >= 0)
					be_t[rep] = bench_now() - t0;
				/*
				 * The bench pool's idle workers spin without end: it lives only
				 * while the kernels run alone, not beside the backend's.
				 */
				struct bench_pool pool;
				bench_pool_start(&pool, nth);
				for (size_t i = 0; i < f.g->n_nodes; i++) {
					struct node_job j = { f.g->nodes[i], scratch };
					t0 = bench_now();
					bench_pool_run(&pool, node_fn, &j);
					if (rep >= 0)
						node_t[i * (size_t)reps + (size_t)rep] = bench_now() - t0;
				}
				bench_pool_stop(&pool);
			}
			double k_sum = 0;
			for (size_t i = 0; i < f.g->n_nodes; i++)
				k_sum += bench_median(node_t + i * (size_t)reps, reps);
			report(&o, n, nth, qg_type_name(wt), kernel, 1e3 * bench_median(be_t, reps), 1e3 * k_sum);
			free(be_t);
			free(node_t);
			free(scratch);
			qg_backend_graph_plan_free(be, plan);
			qg_backend_free(be);
		}
		ffn_free(&f);
	}
	for (int i = 0; i < wf.nbufs; i++)
		qg_buffer_free(wf.bufs[i]);
	qg_ctx_free(wctx);
	return 0;
}
