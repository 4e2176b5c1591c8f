/*
 * bench-decode.c - one token's decode step of a Llama-3.2-1B-shaped model
 * on the CPU backend, against the read-bandwidth limit measured in the
 * same run.
 *
 *   bench-decode [--json] [--quick] [--threads 1,2] [--layers L] [--ctx C] [--cpus LIST]
 *
 * The graph: L layers (16) of RMS_NORM, MUL, the Q (2048 -> 2048), K and
 * V (2048 -> 512) MUL_MATs, ROPE of Q and K, SET_ROWS of K and V into F16
 * caches of C rows (256), FLASH_ATTN_EXT over the caches (32 heads over 8
 * KV heads of 64), the output MUL_MAT, ADD, RMS_NORM, MUL, gate and up
 * (2048 -> 8192), SwiGLU, down (8192 -> 2048), ADD; weights in the Q4_0
 * layout this CPU runs fastest (qg_best_weight_type).
 *
 * Each round times one qg_backend_graph_plan_compute of the graph on two
 * CPU backends of THREADS threads: "steps" (the executor as it is: nodes
 * that touch nothing another writes run between the same barriers, one
 * quantized activation shared) and "nodes" (qg_cpu_opts.node_steps: a
 * barrier after every phase of every node, as before steps), the two
 * interleaved round by round so that a busy machine slows both alike.
 * The limit is the time to read the weights at the read bandwidth
 * measured over a buffer larger than the caches with as many threads, the
 * fastest of the rounds' measures (tests/bench/bench.h, bench_min); the
 * ratio is that time over the step's.
 *
 * --batch B: B sessions' decode steps on one set of weights (each its own
 * caches and activations), the daemon's cross-session batching: per
 * round, the B plans run one after another ("alone") and as one batch
 * (qg_backend_graph_plan_compute_batch, "batch"), interleaved; tokens/s
 * of the B together, the limit being one read of the weights for all B
 * tokens.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-cpu.h"
#include "bench-limits.h"
#include "bench.h"
#include "buffer.h"
#include "fp16.h"
#include "graph.h"
#include "kernels.h"
#include "ops.h"
#include "quant.h"

#define D_MODEL 2048
#define D_FF 8192
#define N_HEAD 32
#define N_HEAD_KV 8
#define D_HEAD 64
#define D_KV (N_HEAD_KV * D_HEAD)

struct opts {
	int json, quick;
	int threads[8], nthreads;
	int layers, ctx, batch;
	const char *cpus;
};

struct model {
	struct qg_ctx *ctx;
	struct qg_graph *g;
	struct qg_buffer **bufs;
	size_t nbufs, cap;
	size_t weight_bytes;
	struct qg_tensor *w[64 * 7];	/* the weights, in the order made */
	size_t nw;
	const struct model *from;	/* another model whose weights this one reads, or NULL */
};

static void die(const char *what, int r)
{
	fprintf(stderr, "bench-decode: %s: %s\n", what, r ? strerror(-r) : "failed");
	exit(1);
}

/* T in a host buffer of its own (views are placed by their sources). */
static void place(struct model *m, struct qg_tensor *t)
{
	struct qg_buffer *b;

	if (t->data || t->view_src)
		return;
	if (m->nbufs == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 256;
		m->bufs = realloc(m->bufs, m->cap * sizeof *m->bufs);
		if (!m->bufs)
			die("memory", -ENOMEM);
	}
	int r = qg_buft_alloc_buffer(qg_buft_host(), qg_buft_alloc_size(qg_buft_host(), t), &b);
	if (r || (r = qg_buffer_place(b, t, 0)))
		die("no memory for a tensor", r);
	qg_buffer_clear(b, 0);
	m->bufs[m->nbufs++] = b;
}

/* Random Q4_0 weights repacked into W's layout. */
static struct qg_tensor *weights(struct model *m, enum qg_type wt, int64_t k, int64_t rows, uint64_t seed)
{
	struct qg_tensor *w = qg_tensor_new_2d(m->ctx, wt, k, rows);
	const int64_t nb = rows * k / QG_QK;

	if (!w || m->nw == sizeof m->w / sizeof m->w[0])
		die(qg_ctx_error_text(m->ctx), 0);
	m->w[m->nw++] = w;
	if (m->from) {
		w->data = m->from->w[m->nw - 1]->data;	/* the same bytes: shared, as the daemon stores them */
		return w;
	}
	place(m, w);
	struct qg_block_q4_0 *q = bench_q4_0_blocks(nb, seed);
	if (wt == QG_TYPE_Q4_0)
		memcpy(w->data, q, (size_t)nb * sizeof *q);
	else if (qg_repack(wt, w->data, qg_tensor_nbytes(w), QG_TYPE_Q4_0, q, rows, k) < 0)
		die("repack", 0);
	free(q);
	m->weight_bytes += qg_tensor_nbytes(w);
	return w;
}

static struct qg_tensor *f32_filled(struct model *m, int64_t n, float lo, float hi, uint64_t seed)
{
	struct qg_tensor *t = qg_tensor_new_1d(m->ctx, QG_TYPE_F32, n);
	uint64_t s = seed;

	place(m, t);
	for (int64_t i = 0; i < n; i++) {
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		((float *)t->data)[i] = lo + (hi - lo) * (float)(s >> 40) / (float)(1 << 24);
	}
	return t;
}

static struct qg_tensor *f16_cache(struct model *m, int ctx, uint64_t seed)
{
	struct qg_tensor *t = qg_tensor_new_2d(m->ctx, QG_TYPE_F16, D_KV, ctx);
	uint64_t s = seed;

	place(m, t);
	for (int64_t i = 0; i < (int64_t)D_KV * ctx; i++) {
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		((qg_fp16 *)t->data)[i] = qg_fp32_to_fp16(-1.0f + 2.0f * (float)(s >> 40) / (float)(1 << 24));
	}
	return t;
}

static struct qg_tensor *rope(struct qg_ctx *c, struct qg_tensor *a, struct qg_tensor *pos)
{
	int32_t p[QG_MAX_OP_PARAMS] = { 0 };
	const float base = 500000.0f, one = 1.0f, zero = 0.0f, fast = 32.0f, slow = 1.0f;

	p[1] = D_HEAD;
	p[2] = 2;	/* NeoX, as llama.cpp runs Llama 3 */
	p[4] = 131072;
	memcpy(&p[5], &base, 4);
	memcpy(&p[6], &one, 4);
	memcpy(&p[7], &zero, 4);
	memcpy(&p[8], &one, 4);
	memcpy(&p[9], &fast, 4);
	memcpy(&p[10], &slow, 4);
	return qg_op_ex(c, QG_OP_ROPE, (struct qg_tensor *[]){ a, pos }, 2, p, QG_MAX_OP_PARAMS);
}

/* The decode graph of O's shape, its weights, caches and inputs placed and filled. */
static void model_build(struct model *m, const struct opts *o, enum qg_type wt, const struct model *from)
{
	memset(m, 0, sizeof *m);
	m->from = from;
	m->ctx = qg_ctx_new((size_t)o->layers * 64 + 16);
	m->g = qg_graph_new((size_t)o->layers * 64 + 16);
	struct qg_ctx *c = m->ctx;
	struct qg_tensor *x = qg_tensor_new_2d(c, QG_TYPE_F32, D_MODEL, 1);
	struct qg_tensor *pos = qg_tensor_new_1d(c, QG_TYPE_I32, 1);
	struct qg_tensor *slot = qg_tensor_new_1d(c, QG_TYPE_I64, 1);
	struct qg_tensor *mask = qg_tensor_new_2d(c, QG_TYPE_F16, o->ctx, 1);
	if (!x || !pos || !slot || !mask || !m->g)
		die(qg_ctx_error_text(c), 0);
	place(m, x);
	place(m, pos);
	place(m, slot);
	place(m, mask);
	bench_fill_x((float *)x->data, D_MODEL);
	*(int32_t *)pos->data = o->ctx - 1;
	*(int64_t *)slot->data = o->ctx - 1;	/* the token's cache row: every row is attended */

	const float scale = 1.0f / sqrtf((float)D_HEAD);
	int32_t fp[4] = { 0 };
	memcpy(&fp[0], &scale, 4);
	for (int l = 0; l < o->layers; l++) {
		const uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(l + 1);
		struct qg_tensor *wq = weights(m, wt, D_MODEL, D_MODEL, seed + 1);
		struct qg_tensor *wk = weights(m, wt, D_MODEL, D_KV, seed + 2);
		struct qg_tensor *wv = weights(m, wt, D_MODEL, D_KV, seed + 3);
		struct qg_tensor *wo = weights(m, wt, D_MODEL, D_MODEL, seed + 4);
		struct qg_tensor *wg = weights(m, wt, D_MODEL, D_FF, seed + 5);
		struct qg_tensor *wu = weights(m, wt, D_MODEL, D_FF, seed + 6);
		struct qg_tensor *wd = weights(m, wt, D_FF, D_MODEL, seed + 7);
		struct qg_tensor *g1 = f32_filled(m, D_MODEL, 0.5f, 1.5f, seed + 8);
		struct qg_tensor *g2 = f32_filled(m, D_MODEL, 0.5f, 1.5f, seed + 9);
		struct qg_tensor *kc = f16_cache(m, o->ctx, seed + 10), *vc = f16_cache(m, o->ctx, seed + 11);

		struct qg_tensor *h = qg_op_mul(c, qg_op_rms_norm(c, x, 1e-5f), g1);
		struct qg_tensor *q = qg_op_mul_mat(c, wq, h);
		struct qg_tensor *k = qg_op_mul_mat(c, wk, h);
		struct qg_tensor *v = qg_op_mul_mat(c, wv, h);
		q = rope(c, qg_tensor_reshape(c, q, 3, (const int64_t[]){ D_HEAD, N_HEAD, 1 }), pos);
		k = rope(c, qg_tensor_reshape(c, k, 3, (const int64_t[]){ D_HEAD, N_HEAD_KV, 1 }), pos);
		struct qg_tensor *ks = qg_op_ex(c, QG_OP_SET_ROWS,
						(struct qg_tensor *[]){ qg_tensor_reshape(c, k, 2, (const int64_t[]){ D_KV, 1 }),
									slot, kc }, 3, NULL, 0);
		struct qg_tensor *vs = qg_op_ex(c, QG_OP_SET_ROWS, (struct qg_tensor *[]){ v, slot, vc }, 3, NULL, 0);
		/* the caches as [64, ctx, 8 heads], read through views of the SET_ROWS results (their bytes) */
		const size_t nb[2] = { D_KV * sizeof(qg_fp16), D_HEAD * sizeof(qg_fp16) };
		struct qg_tensor *kv = qg_tensor_view(c, ks, 3, (const int64_t[]){ D_HEAD, o->ctx, N_HEAD_KV }, nb, 0);
		struct qg_tensor *vv = qg_tensor_view(c, vs, 3, (const int64_t[]){ D_HEAD, o->ctx, N_HEAD_KV }, nb, 0);
		struct qg_tensor *qp = qg_tensor_permute(c, q, 0, 2, 1, 3);
		struct qg_tensor *att = qg_op_ex(c, QG_OP_FLASH_ATTN_EXT, (struct qg_tensor *[]){ qp, kv, vv, mask }, 4,
						 fp, 4);
		att = qg_tensor_reshape(c, att, 2, (const int64_t[]){ D_MODEL, 1 });
		x = qg_op_add(c, qg_op_mul_mat(c, wo, att), x);
		h = qg_op_mul(c, qg_op_rms_norm(c, x, 1e-5f), g2);
		int32_t gp[2] = { QG_GLU_SWIGLU, 0 };
		struct qg_tensor *a = qg_op_ex(c, QG_OP_GLU,
					       (struct qg_tensor *[]){ qg_op_mul_mat(c, wg, h), qg_op_mul_mat(c, wu, h) },
					       2, gp, 2);
		x = qg_op_add(c, qg_op_mul_mat(c, wd, a), x);
		if (!x)
			die(qg_ctx_error_text(c), 0);
	}
	x->flags |= QG_TENSOR_OUTPUT;
	int r = qg_graph_build(m->g, x);
	if (r)
		die("graph", r);
	for (size_t i = 0; i < m->g->n_nodes; i++)
		place(m, m->g->nodes[i]);
	for (size_t i = 0; i < m->g->n_nodes; i++)
		if (m->g->nodes[i]->view_src && !m->g->nodes[i]->data && (r = qg_buffer_init_view(m->g->nodes[i])))
			die("view", r);
}

static void model_free(struct model *m)
{
	for (size_t i = 0; i < m->nbufs; i++)
		qg_buffer_free(m->bufs[i]);
	free(m->bufs);
	qg_graph_free(m->g);
	qg_ctx_free(m->ctx);
}

/* --- --batch: B sessions' steps alone and as one batch ---------------------- */

static void report_batch(const struct opts *o, const char *mode, int nth, const char *layout, double ms,
			 double lim_ms)
{
	struct bench_result r = {
		.bench = mode, .m = o->layers, .n = o->batch, .k = o->ctx, .threads = nth, .layout = layout,
		.kernel = qg_kernel_for((enum qg_layout)qg_layout_of(qg_best_weight_type()))->name,
		.value = 1e3 * o->batch / ms, .unit = "tokens/s", .limit_name = "B tokens per weights read, tokens/s",
		.limit_value = 1e3 * o->batch / lim_ms, .ratio = lim_ms / ms,
	};
	if (o->json) {
		bench_json(stdout, &r);
		return;
	}
	printf("%-13s %3d %3d %10.3f %10.1f %12.1f %8.1f%%\n", mode, nth, o->batch, ms, 1e3 * o->batch / ms,
	       1e3 * o->batch / lim_ms, 100.0 * lim_ms / ms);
	fflush(stdout);
}

static void run_batches(const struct opts *o, const struct model *m0, enum qg_type wt, const uint8_t *bw,
			size_t bw_len, int rounds)
{
	const int B = o->batch;
	struct model *mb = calloc((size_t)B, sizeof *mb);
	struct qg_plan **plan = calloc((size_t)B, sizeof *plan);
	struct qg_run *runs = calloc((size_t)B, sizeof *runs), **rp = calloc((size_t)B, sizeof *rp);

	if (!mb || !plan || !runs || !rp)
		die("memory", -ENOMEM);
	for (int i = 1; i < B; i++)
		model_build(&mb[i], o, wt, m0);
	if (!o->json) {
		printf("decode steps of %d sessions on one set of weights: %d layers of a Llama-3.2-1B shape, cache of "
		       "%d, %s (%.1f MB); median of %d interleaved rounds\n",
		       B, o->layers, o->ctx, qg_type_name(wt), (double)m0->weight_bytes / 1e6, rounds);
		printf("%-13s %3s %3s %10s %10s %12s %9s\n", "run", "thr", "B", "ms", "tokens/s", "limit tok/s",
		       "of limit");
	}
	for (int t = 0; t < o->nthreads; t++) {
		const int nth = o->threads[t];
		struct qg_backend *be;
		struct qg_cpu_opts co = { .cpus = o->cpus, .threads = nth };
		int r = qg_backend_cpu_new(&co, &be);
		if (r)
			die("a backend", r);
		for (int i = 0; i < B; i++) {
			const struct model *m = i ? &mb[i] : m0;
			if ((r = qg_backend_graph_plan_create(be, m->g, &plan[i])) ||
			    (r = qg_backend_graph_plan_compute(be, plan[i], NULL)))
				die("a plan", r);
			rp[i] = &runs[i];
		}
		double *tm[3];
		for (int e = 0; e < 3; e++)
			tm[e] = calloc((size_t)rounds, sizeof *tm[e]);
		size_t together = 0;
		for (int rd = 0; rd < rounds; rd++) {
			for (int e = 0; e < 2; e++) {
				int which = (e + rd) % 2;	/* alternate which runs first */
				double t0 = bench_now();
				if (which == 0) {
					for (int i = 0; i < B; i++)
						if ((r = qg_backend_graph_plan_compute(be, plan[i], NULL)))
							die("a run", r);
				} else {
					for (int i = 0; i < B; i++)
						qg_run_init(&runs[i]);
					together = qg_backend_graph_plan_compute_batch(be, plan, rp, (size_t)B);
					for (int i = 0; i < B; i++)
						if (runs[i].status)
							die("a batch run", runs[i].status);
				}
				tm[which][rd] = bench_now() - t0;
			}
			struct bench_pool pool;
			bench_pool_start(&pool, nth);
			tm[2][rd] = bench_read_once(&pool, bw, bw_len);
			bench_pool_stop(&pool);
		}
		if (together != (size_t)B)
			fprintf(stderr, "bench-decode: only %zu of %d ran as one batch\n", together, B);
		const double bw_max = bench_max(tm[2], rounds);
		const double lim_ms = 1e3 * (double)m0->weight_bytes / bw_max;
		const double alone = 1e3 * bench_median(tm[0], rounds), batch = 1e3 * bench_median(tm[1], rounds);
		if (!o->json)
			printf("read bandwidth, %d thread%s: %.1f GB/s\n", nth, nth > 1 ? "s" : "", bw_max / 1e9);
		report_batch(o, "batch-alone", nth, qg_type_name(wt), alone, lim_ms);
		report_batch(o, "batch-joined", nth, qg_type_name(wt), batch, lim_ms);
		if (!o->json)
			printf("joined over alone: %.2fx the tokens/s\n", alone / batch);
		for (int i = 0; i < B; i++)
			qg_backend_graph_plan_free(be, plan[i]);
		qg_backend_free(be);
		for (int e = 0; e < 3; e++)
			free(tm[e]);
	}
	for (int i = 1; i < B; i++)
		model_free(&mb[i]);
	free(mb);
	free(plan);
	free(runs);
	free(rp);
}

/* --- main ----------------------------------------------------------------- */

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

static void report(const struct opts *o, const char *mode, int nth, const char *layout, double ms, double lim_ms,
		   const struct qg_cpu_stats *st)
{
	struct bench_result r = {
		.bench = mode, .m = o->layers, .n = 1, .k = o->ctx, .threads = nth, .layout = layout,
		.kernel = qg_kernel_for((enum qg_layout)qg_layout_of(qg_best_weight_type()))->name, .value = ms,
		.unit = "ms/token", .limit_name = "weights at read bandwidth ms", .limit_value = lim_ms,
		.ratio = lim_ms / ms,
	};
	if (o->json) {
		bench_json(stdout, &r);
		return;
	}
	printf("%-13s %3d %6zu %6zu %8zu %10.3f %10.3f %8.1f%%\n", mode, nth, st->plan_nodes, st->plan_steps,
	       st->plan_barriers, ms, lim_ms, 100.0 * lim_ms / ms);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct opts o = { .threads = { 1, 2 }, .nthreads = 2, .layers = 16, .ctx = 256 };
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },	  { "quick", no_argument, NULL, 'q' },
		{ "threads", required_argument, NULL, 't' }, { "layers", required_argument, NULL, 'l' },
		{ "ctx", required_argument, NULL, 'x' },	  { "cpus", required_argument, NULL, 'c' },
		{ "batch", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },	  { NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'j': o.json = 1; break;
		case 'q': o.quick = 1; break;
		case 'b':
			o.batch = atoi(optarg);
			if (o.batch < 2 || o.batch > QG_CPU_BATCH_MAX) {
				fprintf(stderr, "bench-decode: --batch wants 2..%d\n", QG_CPU_BATCH_MAX);
				return 2;
			}
			break;
		case 'c': o.cpus = optarg; break;
		case 'l':
			o.layers = atoi(optarg);
			if (o.layers < 1 || o.layers > 64) {
				fprintf(stderr, "bench-decode: --layers wants 1..64\n");
				return 2;
			}
			break;
		case 'x':
			o.ctx = atoi(optarg);
			if (o.ctx < 1 || o.ctx > 65536) {
				fprintf(stderr, "bench-decode: --ctx wants 1..65536\n");
				return 2;
			}
			break;
		case 't':
			if (parse_threads(&o, optarg)) {
				fprintf(stderr, "bench-decode: --threads wants a list like 1,2\n");
				return 2;
			}
			break;
		case 'h':
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: bench-decode [--json] [--quick] [--threads 1,2] [--layers L] [--ctx C] [--cpus LIST]\n"
				"                    [--batch B]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	const enum qg_type wt = qg_best_weight_type();
	const int rounds = o.quick ? 5 : 21;
	struct model m;

	model_build(&m, &o, wt, NULL);
	/* four times the largest last-level cache of the machines it runs on: read from memory */
	const size_t bw_len = (size_t)256 << 20;
	uint8_t *buf = bench_alloc(bw_len);
	memset(buf, 1, bw_len);
	if (o.batch) {
		run_batches(&o, &m, wt, buf, bw_len, rounds);
		free(buf);
		model_free(&m);
		return 0;
	}
	if (!o.json) {
		printf("decode step: %d layers of a Llama-3.2-1B shape, cache of %d, %s weights (%.1f MB); "
		       "median of %d interleaved rounds\n",
		       o.layers, o.ctx, qg_type_name(wt), (double)m.weight_bytes / 1e6, rounds);
		printf("%-13s %3s %6s %6s %8s %10s %10s %9s\n", "executor", "thr", "nodes", "steps", "barriers",
		       "ms/token", "limit ms", "of limit");
	}
	for (int t = 0; t < o.nthreads; t++) {
		const int nth = o.threads[t];
		struct qg_backend *be[2];
		struct qg_plan *plan[2];
		struct qg_cpu_stats st[2];
		double *tm[3];
		for (int e = 0; e < 2; e++) {
			struct qg_cpu_opts co = { .cpus = o.cpus, .threads = nth, .node_steps = e == 1 };
			int r = qg_backend_cpu_new(&co, &be[e]);
			if (r || (r = qg_backend_graph_plan_create(be[e], m.g, &plan[e])))
				die("a backend", r);
			/* the first run schedules the plan; warm up with it */
			if ((r = qg_backend_graph_plan_compute(be[e], plan[e], NULL)))
				die("a run", r);
			qg_backend_cpu_stats(be[e], &st[e]);
		}
		for (int e = 0; e < 3; e++)
			tm[e] = calloc((size_t)rounds, sizeof *tm[e]);
		for (int rd = 0; rd < rounds; rd++) {
			for (int e = 0; e < 2; e++) {
				int first = (e + rd) % 2;	/* alternate which one runs first */
				double t0 = bench_now();
				int r = qg_backend_graph_plan_compute(be[first], plan[first], NULL);
				if (r)
					die("a run", r);
				tm[first][rd] = bench_now() - t0;
			}
			/* the bench pool spins while it lives: started for its measurement alone */
			struct bench_pool pool;
			bench_pool_start(&pool, nth);
			tm[2][rd] = bench_read_once(&pool, buf, bw_len);
			bench_pool_stop(&pool);
		}
		const double bw_max = bench_max(tm[2], rounds);
		const double lim_ms = 1e3 * (double)m.weight_bytes / bw_max;
		if (!o.json)
			printf("read bandwidth, %d thread%s: %.1f GB/s\n", nth, nth > 1 ? "s" : "", bw_max / 1e9);
		report(&o, "decode-steps", nth, qg_type_name(wt), 1e3 * bench_median(tm[0], rounds), lim_ms, &st[0]);
		report(&o, "decode-nodes", nth, qg_type_name(wt), 1e3 * bench_median(tm[1], rounds), lim_ms, &st[1]);
		for (int e = 0; e < 2; e++) {
			qg_backend_graph_plan_free(be[e], plan[e]);
			qg_backend_free(be[e]);
		}
		for (int e = 0; e < 3; e++)
			free(tm[e]);
	}
	free(buf);
	model_free(&m);
	return 0;
}
