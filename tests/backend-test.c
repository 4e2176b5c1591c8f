/*
 * backend-test.c - the CPU backend on 1, 2 and 5 threads (more than this
 * machine's cores), against the single-thread graph run of graph-run.h:
 * a graph with every op and every weight type, run through plans reused
 * across runs and updated when only the data changed; graph_compute's
 * cached plan; cancellation from another thread; deadlines; an op's error
 * and a node without data reported with their node; small graphs on the
 * caller; steps of nodes that run between two barriers; idle workers asleep; hostile options; events recorded by runs
 * however they end; two threads sharing one backend.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend-cpu.h"
#include "buffer.h"
#include "cpulist.h"
#include "futex.h"
#include "stamp.h"
#include "graph-run.h"
#include "ops.h"
#include "quant.h"
#include "tap.h"

static struct tap_rng rng = { 0x9e3779b97f4a7c15ull };

static void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* --- placing tensors: one host buffer per tensor ---------------------- */

struct placed {
	struct qg_buffer **bufs;
	size_t n, cap;
};

static int place_one(struct placed *pl, struct qg_tensor *t)
{
	struct qg_buffer *buf;

	if (t->data || t->view_src)
		return 0;
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? 2 * pl->cap : 64;
		void *p = realloc(pl->bufs, cap * sizeof *pl->bufs);
		if (!p)
			return -ENOMEM;
		pl->bufs = p;
		pl->cap = cap;
	}
	int r = qg_buft_alloc_buffer(qg_buft_host(), qg_buft_alloc_size(qg_buft_host(), t), &buf);
	if (r)
		return r;
	pl->bufs[pl->n++] = buf;
	qg_buffer_clear(buf, 0);
	return qg_buffer_place(buf, t, 0);
}

/* Every tensor of G in a buffer of its own, views pointed into their sources. */
static int place_graph(struct placed *pl, struct qg_graph *g)
{
	int r = 0;

	for (size_t i = 0; i < g->n_leafs && !r; i++)
		r = place_one(pl, g->leafs[i]);
	for (size_t i = 0; i < g->n_nodes && !r; i++)
		r = place_one(pl, g->nodes[i]);
	for (size_t i = 0; i < g->n_leafs && !r; i++)
		if (g->leafs[i]->view_src && !g->leafs[i]->data)
			r = qg_buffer_init_view(g->leafs[i]);
	for (size_t i = 0; i < g->n_nodes && !r; i++)
		if (g->nodes[i]->view_src && !g->nodes[i]->data)
			r = qg_buffer_init_view(g->nodes[i]);
	return r;
}

static void placed_free(struct placed *pl)
{
	for (size_t i = 0; i < pl->n; i++)
		qg_buffer_free(pl->bufs[i]);
	free(pl->bufs);
	memset(pl, 0, sizeof *pl);
}

static void fill_f32(struct qg_tensor *t, float lo, float hi)
{
	int64_t n = qg_tensor_nelements(t);
	float *v = malloc((size_t)n * sizeof *v);

	for (int64_t i = 0; i < n; i++)
		v[i] = tap_randf(&rng, lo, hi);
	qg_tensor_set(t, v, 0, (size_t)n * sizeof *v);
	free(v);
}

static void fill_weights(struct qg_tensor *w)
{
	int64_t rows = qg_tensor_nrows(w), cols = w->ne[0];
	float *f = malloc((size_t)(rows * cols) * sizeof *f);

	for (int64_t i = 0; i < rows * cols; i++)
		f[i] = tap_randf(&rng, -0.2f, 0.2f);
	qg_quantize(w->type, f, w->data, qg_tensor_nbytes(w), rows, cols, NULL);
	free(f);
}

/* --- a graph with every op -------------------------------------------- */

enum { D = 64, FF = 128, VOCAB = 11 };

struct block {
	struct qg_ctx *ctx;
	struct qg_graph *g;
	struct placed pl;
	struct qg_tensor *emb, *idx, *gamma, *mask, *w_up, *w_gate, *w_down;
	struct qg_tensor *rows;	/* the GET_ROWS node */
	int ntok;
	struct tap_rng rng;	/* for its inputs: each caller thread has its own */
};

/*
 * GET_ROWS -> RMS_NORM -> MUL (broadcast) -> up and gate MUL_MATs in WT ->
 * SILU, MUL -> down MUL_MAT -> ADD (residual) -> SCALE -> GELU; attention
 * scores as a MUL_MAT of two activations, SOFT_MAX with scale and mask, a
 * transpose cast to F16 and back; a CPY to Q8_0 and back; a reshape and a
 * permute on the way.
 */
static int block_build(struct block *b, enum qg_type wt, int ntok)
{
	struct qg_ctx *c = b->ctx = qg_ctx_new(128);

	b->ntok = ntok;
	b->rng.s = tap_rand(&rng);
	b->emb = qg_tensor_new_2d(c, QG_TYPE_Q4_0, D, VOCAB);
	b->idx = qg_tensor_new_1d(c, QG_TYPE_I32, ntok);
	b->gamma = qg_tensor_new_1d(c, QG_TYPE_F32, D);
	b->mask = qg_tensor_new_2d(c, QG_TYPE_F32, ntok, ntok);
	b->w_up = qg_tensor_new_2d(c, wt, D, FF);
	b->w_gate = qg_tensor_new_2d(c, wt, D, FF);
	b->w_down = qg_tensor_new_2d(c, wt, FF, D);
	struct qg_tensor *x = b->rows = qg_op_get_rows(c, b->emb, b->idx);
	struct qg_tensor *h = qg_op_mul(c, qg_op_rms_norm(c, x, 1e-5f), b->gamma);
	struct qg_tensor *up = qg_op_mul_mat(c, b->w_up, h);
	struct qg_tensor *gate = qg_op_mul_mat(c, b->w_gate, h);
	struct qg_tensor *a = qg_op_mul(c, qg_op_silu(c, gate), up);
	struct qg_tensor *down = qg_op_mul_mat(c, b->w_down, a);
	struct qg_tensor *r = qg_op_add(c, down, x);
	struct qg_tensor *s = qg_op_gelu(c, qg_op_scale(c, r, 0.5f));
	struct qg_tensor *scores = qg_op_mul_mat(c, r, s);
	struct qg_tensor *sm = qg_op_soft_max(c, scores, b->mask, 0.125f);
	struct qg_tensor *t16 = qg_op_cast(c, qg_tensor_transpose(c, sm), QG_TYPE_F16);
	struct qg_tensor *out1 = qg_op_cast(c, t16, QG_TYPE_F32);
	const int64_t ne3[3] = { D / 2, 2, ntok };
	struct qg_tensor *q8 = qg_tensor_new_3d(c, QG_TYPE_Q8_0, D / 2, 2, ntok);
	struct qg_tensor *cp = qg_op_cpy(c, qg_tensor_reshape(c, s, 3, ne3), q8);
	struct qg_tensor *out2 = qg_op_cast(c, qg_tensor_permute(c, cp, 0, 2, 1, 3), QG_TYPE_F32);

	if (!out1 || !out2) {
		tap_diag("block: %s", qg_ctx_error_text(c));
		return -1;
	}
	out1->flags |= QG_TENSOR_OUTPUT;
	out2->flags |= QG_TENSOR_OUTPUT;
	b->g = qg_graph_new(128);
	if (qg_graph_build(b->g, out1) || qg_graph_build(b->g, out2) || place_graph(&b->pl, b->g))
		return -1;
	fill_weights(b->emb);
	fill_weights(b->w_up);
	fill_weights(b->w_gate);
	fill_weights(b->w_down);
	fill_f32(b->gamma, 0.5f, 1.5f);
	float m[64 * 64];
	for (int i = 0; i < ntok * ntok; i++)
		m[i] = i % ntok > i / ntok ? -INFINITY : 0.0f;	/* causal */
	qg_tensor_set(b->mask, m, 0, (size_t)(ntok * ntok) * sizeof *m);
	return 0;
}

/* New token ids: the inputs of the next run. */
static void block_inputs(struct block *b)
{
	int32_t id[64];

	for (int i = 0; i < b->ntok; i++)
		id[i] = (int32_t)(tap_rand(&b->rng) % VOCAB);
	qg_tensor_set(b->idx, id, 0, (size_t)b->ntok * sizeof *id);
}

static void block_free(struct block *b)
{
	placed_free(&b->pl);
	qg_graph_free(b->g);
	qg_ctx_free(b->ctx);
	memset(b, 0, sizeof *b);
}

/* Every node's bytes, copied out. */
static unsigned char **snapshot(struct qg_graph *g)
{
	unsigned char **s = calloc(g->n_nodes, sizeof *s);

	for (size_t i = 0; i < g->n_nodes; i++) {
		size_t n = qg_tensor_nbytes(g->nodes[i]);
		s[i] = malloc(n);
		memcpy(s[i], g->nodes[i]->data, n);
	}
	return s;
}

/* The first node whose bytes differ from snapshot S (freed), or -1. */
static long compare_free(struct qg_graph *g, unsigned char **s)
{
	long bad = -1;

	for (size_t i = 0; i < g->n_nodes; i++) {
		if (bad < 0 && memcmp(s[i], g->nodes[i]->data, qg_tensor_nbytes(g->nodes[i])) != 0)
			bad = (long)i;
		free(s[i]);
	}
	free(s);
	return bad;
}

/* Run plan P of B on G, then the reference on NTH pretend threads: -1 if every node agrees, else the first that does not (-2: the run failed). */
static long run_and_compare(struct qg_backend *be, struct qg_plan *p, struct qg_graph *g, int nth, bool *pooled)
{
	struct qg_run run;

	qg_run_init(&run);
	int r = qg_backend_graph_plan_compute(be, p, &run);
	if (r || run.status || run.nodes_done != g->n_nodes) {
		tap_diag("run: %d, node %ld, %zu of %zu done", r, run.failed_node, run.nodes_done, g->n_nodes);
		return -2;
	}
	*pooled = run.pooled;
	unsigned char **s = snapshot(g);
	if (gr_run(g, nth))
		return -2;
	return compare_free(g, s);
}

static const enum qg_type wtypes[] = {
	QG_TYPE_F32, QG_TYPE_F16, QG_TYPE_Q8_0, QG_TYPE_Q4_0, QG_TYPE_Q4_0_4X4, QG_TYPE_Q4_0_4X8, QG_TYPE_Q4_0_8X8,
};

/* This process's CPUs as a list ("0-1"). */
static char cpus_allowed[256];

static void find_cpus(void)
{
	cpu_set_t set;
	int list[QG_CPU_MAX], n = 0;

	sched_getaffinity(0, sizeof set, &set);
	for (int c = 0; c < QG_CPU_MAX; c++)
		if (CPU_ISSET(c, &set))
			list[n++] = c;
	qg_cpulist_format(list, n, cpus_allowed, sizeof cpus_allowed);
}

static struct qg_backend *cpu_new(int threads, uint64_t small_work, const char *cpus)
{
	struct qg_cpu_opts o = { .cpus = cpus, .threads = threads, .small_work = small_work };
	struct qg_backend *b = NULL;
	int r = qg_backend_cpu_new(&o, &b);

	if (r)
		tap_diag("qg_backend_cpu_new(%d threads, %s): %d", threads, cpus ? cpus : "any", r);
	return b;
}

static void test_every_op(int nth)
{
	struct qg_backend *be = cpu_new(nth, 1, cpus_allowed);

	if (!be) {
		tap_ok(0, "a CPU backend with %d threads", nth);
		return;
	}
	for (size_t w = 0; w < sizeof wtypes / sizeof wtypes[0]; w++) {
		struct block b;
		struct qg_plan *p = NULL;
		long bad[3] = { -3, -3, -3 };
		bool pooled[3] = { false, false, false };

		memset(&b, 0, sizeof b);
		if (block_build(&b, wtypes[w], 7) || qg_backend_graph_plan_create(be, b.g, &p)) {
			tap_ok(0, "%d threads, %s: graph built and planned", nth, qg_type_name(wtypes[w]));
			block_free(&b);
			continue;
		}
		for (int run = 0; run < 3; run++) {
			block_inputs(&b);
			bad[run] = run_and_compare(be, p, b.g, nth, &pooled[run]);
		}
		tap_ok(bad[0] == -1 && bad[1] == -1 && bad[2] == -1 && pooled[0] == (nth > 1),
		       "%d threads, %s: %zu nodes equal the graph run, over 3 runs of one plan with new inputs (%ld %ld %ld)",
		       nth, qg_type_name(wtypes[w]), b.g->n_nodes, bad[0], bad[1], bad[2]);
		qg_backend_graph_plan_free(be, p);
		block_free(&b);
	}
	struct qg_cpu_stats st;
	qg_backend_cpu_stats(be, &st);
	tap_ok(st.threads == nth && st.plans_made == sizeof wtypes / sizeof wtypes[0] &&
		       st.runs_pool == (nth > 1 ? 3 * st.plans_made : 0) && st.pinned,
	       "%d threads on CPUs %s: %llu plans, %llu pooled runs, %llu on the caller", nth, cpus_allowed,
	       (unsigned long long)st.plans_made, (unsigned long long)st.runs_pool,
	       (unsigned long long)st.runs_caller);
	qg_backend_free(be);
}

static void test_plan_update(void)
{
	struct qg_backend *be = cpu_new(2, 1, NULL);
	struct block a, b, c;
	struct qg_plan *p = NULL;
	bool pooled;

	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	memset(&c, 0, sizeof c);
	block_build(&a, QG_TYPE_Q4_0_8X8, 7);
	block_build(&b, QG_TYPE_Q4_0_8X8, 7);
	block_build(&c, QG_TYPE_Q4_0_8X8, 9);
	block_inputs(&a);
	block_inputs(&b);
	block_inputs(&c);
	qg_backend_graph_plan_create(be, a.g, &p);
	long r0 = run_and_compare(be, p, a.g, 2, &pooled);
	int u = qg_backend_graph_plan_update(be, p, b.g);
	long r1 = run_and_compare(be, p, b.g, 2, &pooled);
	tap_ok(r0 == -1 && u == 0 && r1 == -1, "a plan updated to a graph of the same structure, other data: equal");
	tap_ok(qg_backend_graph_plan_update(be, p, c.g) == -EINVAL, "update to another structure: -EINVAL");
	tap_ok(run_and_compare(be, p, b.g, 2, &pooled) == -1, "and the plan still runs the graph it had");

	/* graph_compute keeps the plan of the graph it ran last */
	struct qg_cpu_stats s0, s1;
	qg_backend_cpu_stats(be, &s0);
	int ok = 1;
	for (int i = 0; i < 3; i++) {
		block_inputs(&a);
		ok &= qg_backend_graph_compute(be, a.g, NULL) == 0;
		unsigned char **s = snapshot(a.g);
		gr_run(a.g, 2);
		ok &= compare_free(a.g, s) == -1;
	}
	qg_backend_cpu_stats(be, &s1);
	tap_ok(ok && s1.plans_made == s0.plans_made + 1, "graph_compute three times: one plan made, results equal");
	qg_backend_graph_compute(be, c.g, NULL);
	qg_backend_graph_compute(be, a.g, NULL);
	qg_backend_cpu_stats(be, &s0);
	tap_ok(s0.plans_made == s1.plans_made + 2, "another graph in between: planned again");

	/* a plan of another backend is refused */
	struct qg_backend *other = cpu_new(1, 0, NULL);
	tap_ok(qg_backend_graph_plan_compute(other, p, NULL) == -EINVAL &&
		       qg_backend_graph_plan_update(other, p, a.g) == -EINVAL,
	       "a plan given to another backend: -EINVAL");
	qg_backend_free(other);
	qg_backend_graph_plan_free(be, p);
	block_free(&a);
	block_free(&b);
	block_free(&c);
	qg_backend_free(be);
}

/* --- long graphs: cancellation and deadlines ---------------------------- */

struct chain {
	struct qg_ctx *ctx;
	struct qg_graph *g;
	struct placed pl;
};

/* L MUL_MATs in a chain, each 128 x 128 (F32) times 32 rows, with RMS_NORMs between. */
static int chain_build(struct chain *c, int len)
{
	c->ctx = qg_ctx_new((size_t)(2 * len + 8));
	struct qg_tensor *w = qg_tensor_new_2d(c->ctx, QG_TYPE_F32, 128, 128);
	struct qg_tensor *y = qg_tensor_new_2d(c->ctx, QG_TYPE_F32, 128, 32);
	struct qg_tensor *x = y;

	for (int i = 0; i < len; i++)
		y = qg_op_rms_norm(c->ctx, qg_op_mul_mat(c->ctx, w, y), 1e-6f);
	c->g = qg_graph_new((size_t)(2 * len + 8));
	if (!y || qg_graph_build(c->g, y) || place_graph(&c->pl, c->g))
		return -1;
	fill_f32(w, -0.1f, 0.1f);
	fill_f32(x, -1, 1);
	return 0;
}

static void chain_free(struct chain *c)
{
	placed_free(&c->pl);
	qg_graph_free(c->g);
	qg_ctx_free(c->ctx);
}

struct canceller {
	struct qg_run *run;
	int delay_us;
};

static void *cancel_main(void *v)
{
	struct canceller *c = v;
	struct timespec ts = { .tv_sec = c->delay_us / 1000000, .tv_nsec = (long)(c->delay_us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
	qg_run_cancel(c->run);
	return NULL;
}

static void test_cancel(int nth)
{
	struct qg_backend *be = cpu_new(nth, 1, NULL);
	struct chain c;
	struct qg_plan *p = NULL;
	struct qg_run run;
	struct qg_event ev;
	struct qg_event *evs[1] = { &ev };

	memset(&c, 0, sizeof c);
	if (chain_build(&c, 300) || qg_backend_graph_plan_create(be, c.g, &p)) {
		tap_ok(0, "a long chain built");
		return;
	}
	/*
	 * The cancel and the deadline below land a tenth of the way into a run, timed from the fastest of
	 * three whole runs after a warm-up: the first run on a cold, shared machine can be ten times slower
	 * than the rest, and a time taken from it lands after the end.
	 */
	int r = 0;
	uint64_t t0;
	double full_ms = 1e30;
	bool whole = true;
	for (int i = 0; i < 4; i++) {
		qg_run_init(&run);
		t0 = qg_stamp_ns();
		r = qg_backend_graph_plan_compute(be, p, &run);
		double ms = (double)(qg_stamp_ns() - t0) / 1e6;
		whole = whole && r == 0 && run.nodes_done == c.g->n_nodes;
		if (i > 0 && ms < full_ms)
			full_ms = ms;
	}
	tap_ok(whole, "%d threads: a chain of %zu nodes runs in %.1f ms (fastest of 3)", nth, c.g->n_nodes,
	       full_ms);

	/*
	 * Cancelled from another thread a tenth of the way in, and then a
	 * deadline a tenth of the way in.  A shared machine can slow a run
	 * down or speed it up tenfold between the timing above and the try:
	 * a try whose cancel (or deadline) lands after the end is made again
	 * with it sooner, one that lands before the first node with it later,
	 * up to TRIES times.  What is checked is the outcome of a try that
	 * landed inside the run.
	 */
	enum { TRIES = 8 };
	double ms = 0;
	int delay_us = (int)(full_ms * 100), tries = 0;
	for (tries = 1; tries <= TRIES; tries++) {
		qg_event_init(&ev, 0, NULL);
		qg_run_init(&run);
		run.record = evs;
		run.n_record = 1;
		struct canceller cc = { &run, delay_us };
		pthread_t t;
		pthread_create(&t, NULL, cancel_main, &cc);
		t0 = qg_stamp_ns();
		r = qg_backend_graph_plan_compute(be, p, &run);
		ms = (double)(qg_stamp_ns() - t0) / 1e6;
		pthread_join(t, NULL);
		if (r == 0 || run.nodes_done == c.g->n_nodes)
			delay_us = delay_us / 4 + 1;	/* landed after the end */
		else if (r == -ECANCELED && run.nodes_done == 0)
			delay_us *= 2;			/* before the first node */
		else
			break;
	}
	tap_ok(r == -ECANCELED && run.status == -ECANCELED && run.nodes_done > 0 && run.nodes_done < c.g->n_nodes &&
		       run.failed_node == -1,
	       "%d threads: cancelled from another thread: -ECANCELED after %zu of %zu nodes (%.1f ms, try %d)", nth,
	       run.nodes_done, c.g->n_nodes, ms, tries);
	tap_ok(qg_event_wait(&ev, 1, 0) == -ECANCELED, "its event is recorded, with -ECANCELED");

	uint64_t limit_ns = (uint64_t)(full_ms * 1e5);
	for (tries = 1; tries <= TRIES; tries++) {
		qg_event_init(&ev, 0, NULL);
		qg_run_init(&run);
		run.record = evs;
		run.n_record = 1;
		t0 = qg_stamp_ns();
		run.deadline_ns = t0 + limit_ns;
		r = qg_backend_graph_plan_compute(be, p, &run);
		ms = (double)(qg_stamp_ns() - t0) / 1e6;
		if (r == 0 || run.nodes_done == c.g->n_nodes)
			limit_ns = limit_ns / 4 + 1;
		else if (r == -ETIMEDOUT && run.nodes_done == 0)
			limit_ns *= 2;
		else
			break;
	}
	tap_ok(r == -ETIMEDOUT && run.nodes_done > 0 && run.nodes_done < c.g->n_nodes,
	       "%d threads: past the deadline: -ETIMEDOUT after %zu of %zu nodes (%.1f ms, limit %.1f, try %d)", nth,
	       run.nodes_done, c.g->n_nodes, ms, (double)limit_ns / 1e6, tries);
	tap_ok(qg_event_wait(&ev, 1, 0) == -ETIMEDOUT, "its event is recorded, with -ETIMEDOUT");

	qg_run_init(&run);
	run.deadline_ns = qg_stamp_ns() - 1;
	r = qg_backend_graph_plan_compute(be, p, &run);
	tap_ok(r == -ETIMEDOUT && run.nodes_done == 0, "a deadline already past: no node runs");
	qg_run_init(&run);
	run.deadline_ns = qg_stamp_ns() + 60000000000u;
	run.start_ns = run.deadline_ns + 1;	/* the caller's clock, read "just now", is what counts */
	r = qg_backend_graph_plan_compute(be, p, &run);
	tap_ok(r == -ETIMEDOUT && run.nodes_done == 0, "handed over past its deadline (the caller's clock): no node runs");
	qg_run_init(&run);
	run.deadline_ns = qg_stamp_ns() - 1;
	run.start_ns = run.deadline_ns - 1;
	r = qg_backend_graph_plan_compute(be, p, &run);
	tap_ok(r == -ETIMEDOUT && run.nodes_done > 0, "handed over in time: it runs, and stops at the next node boundary");
	qg_run_init(&run);
	qg_run_cancel(&run);
	r = qg_backend_graph_plan_compute(be, p, &run);
	tap_ok(r == -ECANCELED && run.nodes_done == 0, "cancelled before the start: no node runs");
	qg_run_init(&run);
	tap_ok(qg_backend_graph_plan_compute(be, p, &run) == 0, "the next run of the plan is whole again");
	qg_backend_graph_plan_free(be, p);
	chain_free(&c);
	qg_backend_free(be);
}

/* --- errors -------------------------------------------------------------- */

static void test_errors(int nth)
{
	struct qg_backend *be = cpu_new(nth, 1, NULL);
	struct block b;
	struct qg_plan *p = NULL;
	struct qg_run run;
	struct qg_event ev[2];
	struct qg_event *evs[2] = { &ev[0], &ev[1] };
	const uint32_t seqs[2] = { 77, 0xffffffffu };

	memset(&b, 0, sizeof b);
	block_build(&b, QG_TYPE_Q4_0_4X8, 7);
	block_inputs(&b);
	int32_t bad = VOCAB;
	qg_tensor_set(b.idx, &bad, 3 * sizeof bad, sizeof bad);
	qg_backend_graph_plan_create(be, b.g, &p);
	qg_event_init(&ev[0], 0, NULL);
	qg_event_init(&ev[1], 0, NULL);
	qg_run_init(&run);
	run.record = evs;
	run.record_seq = seqs;
	run.n_record = 2;
	int r = qg_backend_graph_plan_compute(be, p, &run);
	long want = qg_graph_node_index(b.g, b.rows);
	tap_ok(r == -ERANGE && run.failed_node == want && run.nodes_done == (size_t)want,
	       "%d threads: an index out of range: -ERANGE at node %ld (want %ld), %zu nodes done", nth, run.failed_node,
	       want, run.nodes_done);
	tap_ok(qg_event_wait(&ev[0], 77, 0) == -ERANGE && qg_event_seq(&ev[1]) == 0xffffffffu &&
		       qg_event_wait(&ev[1], 0xffffffffu, 0) == -ERANGE,
	       "its events are recorded at the numbers asked for, with -ERANGE");

	/* the backend's own event calls: the status of the last run */
	struct qg_event *e = NULL;
	uint32_t seq = 0;
	tap_ok(qg_backend_event_new(be, &e) == 0 && qg_backend_event_record(be, e, &seq) == 0 && seq == 1 &&
		       qg_backend_event_synchronize(be, e, 1, 0) == -ERANGE &&
		       qg_backend_event_wait(be, e, 2, 1000000) == -ETIMEDOUT,
	       "event_record after a failed run carries its status; waits time out");
	bad = 0;
	qg_tensor_set(b.idx, &bad, 3 * sizeof bad, sizeof bad);
	r = qg_backend_graph_plan_compute(be, p, NULL);
	tap_ok(r == 0 && qg_backend_event_record(be, e, &seq) == 0 && seq == 2 &&
		       qg_backend_event_synchronize(be, e, 2, -1) == 0,
	       "after a good run: status 0");
	qg_backend_event_free(be, e);

	/* a node without its data */
	struct qg_tensor *victim = b.g->nodes[want + 2];
	void *data = victim->data;
	victim->data = NULL;
	qg_backend_graph_plan_update(be, p, b.g);
	qg_run_init(&run);
	r = qg_backend_graph_plan_compute(be, p, &run);
	tap_ok(r == -EINVAL && run.failed_node == want + 2 && run.nodes_done == 0,
	       "%d threads: a node without data: -EINVAL at node %ld, nothing run", nth, run.failed_node);
	victim->data = data;
	qg_backend_graph_plan_update(be, p, b.g);
	tap_ok(qg_backend_graph_plan_compute(be, p, NULL) == 0, "given its data back (update): runs");
	qg_backend_graph_plan_free(be, p);
	block_free(&b);
	qg_backend_free(be);
}

/* --- small graphs, idle workers, options --------------------------------- */

/*
 * Steps: nodes that touch no bytes another one writes share a step, and a
 * MUL_MAT reads the activation another one of its step quantized.  Three
 * graphs, each run on NTH threads and checked against the graph run, with
 * the step counts the stats report:
 *  - a decode layer's head: RMS_NORM, then Q, K and V of its result (one
 *    step, K and V reading Q's quantized activation; on the pool each
 *    thread quantizes the small activation itself, so the step has one
 *    phase), then K + V and Q / 2;
 *  - a MUL_MAT of an input, then a CPY over that input: no edge between
 *    them, but the CPY must wait for the MUL_MAT to have read it;
 *  - RMS_NORM, MUL and ADD by rows: one step, each thread on its own rows;
 *    a MUL by one row of the RMS_NORM (every thread reads it): two;
 *  - a chain: a step per node.
 */
static int steps_run(struct qg_backend *be, struct qg_graph *g, int nth, struct qg_cpu_stats *st, long *bad)
{
	struct qg_plan *p = NULL;
	bool pooled = false;

	*bad = -3;
	if (qg_backend_graph_plan_create(be, g, &p))
		return -1;
	*bad = run_and_compare(be, p, g, nth, &pooled);
	qg_backend_graph_plan_free(be, p);
	qg_backend_cpu_stats(be, st);
	return 0;
}

static void test_steps(int nth)
{
	struct qg_backend *be = cpu_new(nth, 1, NULL);
	struct qg_cpu_stats st;
	struct placed pl = { 0 };
	long bad = -3;

	if (!be) {
		tap_ok(0, "a CPU backend with %d threads", nth);
		return;
	}
	for (size_t w = 0; w < sizeof wtypes / sizeof wtypes[0]; w++) {
		struct qg_ctx *c = qg_ctx_new(64);
		struct qg_graph *g = qg_graph_new(64);
		struct qg_tensor *x = qg_tensor_new_2d(c, QG_TYPE_F32, D, 3);
		/* as many rows as K and V: as many threads, which a solo MUL_MAT needs to share */
		struct qg_tensor *wq = qg_tensor_new_2d(c, wtypes[w], D, D / 2);
		struct qg_tensor *wk = qg_tensor_new_2d(c, wtypes[w], D, D / 2);
		struct qg_tensor *wv = qg_tensor_new_2d(c, wtypes[w], D, D / 2);
		struct qg_tensor *h = qg_op_rms_norm(c, x, 1e-5f);
		struct qg_tensor *kv = qg_op_add(c, qg_op_mul_mat(c, wk, h), qg_op_mul_mat(c, wv, h));
		struct qg_tensor *q = qg_op_scale(c, qg_op_mul_mat(c, wq, h), 0.5f);
		int r = !kv || !q || qg_graph_build(g, kv) || qg_graph_build(g, q) || place_graph(&pl, g);
		if (!r) {
			fill_f32(x, -1.0f, 1.0f);
			fill_weights(wq);
			fill_weights(wk);
			fill_weights(wv);
			r = steps_run(be, g, nth, &st, &bad);
		}
		/* on the pool each thread quantizes the 3 x 64 activation itself: no barrier inside Q K V's step */
		tap_ok(!r && bad == -1 && st.plan_nodes == 6 && st.plan_steps == 3 &&
			       st.plan_barriers == (nth > 1 ? 3u : 4u) &&
			       st.plan_shared == (wtypes[w] == QG_TYPE_F32 || wtypes[w] == QG_TYPE_F16 ? 0u : 2u),
		       "%d threads, %s: norm, Q K V, K+V and Q/2: %zu nodes in %zu steps, %zu barriers, "
		       "%zu activations shared, equal to the graph run (%ld)",
		       nth, qg_type_name(wtypes[w]), st.plan_nodes, st.plan_steps, st.plan_barriers, st.plan_shared,
		       bad);
		placed_free(&pl);
		qg_graph_free(g);
		qg_ctx_free(c);
	}

	struct qg_ctx *c = qg_ctx_new(64);
	struct qg_graph *g = qg_graph_new(64);
	struct qg_tensor *x = qg_tensor_new_2d(c, QG_TYPE_F32, D, 5);	/* reused below */
	struct qg_tensor *z = qg_tensor_new_2d(c, QG_TYPE_F32, D, 5);
	struct qg_tensor *w = qg_tensor_new_2d(c, QG_TYPE_Q4_0_8X8, D, D);
	struct qg_tensor *y = qg_op_mul_mat(c, w, x);
	struct qg_tensor *over = qg_op_cpy(c, z, x);
	int r = !y || !over || qg_graph_build(g, y) || qg_graph_build(g, over) || place_graph(&pl, g);
	if (!r) {
		fill_f32(x, -1.0f, 1.0f);
		fill_f32(z, -1.0f, 1.0f);
		fill_weights(w);
		/* the reference must read X as the run did, before CPY: X is given back between them */
		float xv[D * 5];
		struct qg_plan *p = NULL;
		struct qg_run run;
		qg_tensor_get(x, xv, 0, sizeof xv);
		qg_run_init(&run);
		r = qg_backend_graph_plan_create(be, g, &p) || qg_backend_graph_plan_compute(be, p, &run);
		qg_backend_graph_plan_free(be, p);
		qg_backend_cpu_stats(be, &st);
		if (!r) {
			unsigned char **s = snapshot(g);
			qg_tensor_set(x, xv, 0, sizeof xv);
			r = gr_run(g, nth);
			bad = compare_free(g, s);
		}
	}
	tap_ok(!r && bad == -1 && st.plan_nodes == 2 && st.plan_steps == 2 && st.plan_barriers == (nth > 1 ? 2u : 3u),
	       "%d threads: a CPY over a MUL_MAT's input waits a step for it: %zu nodes in %zu steps (%ld)", nth,
	       st.plan_nodes, st.plan_steps, bad);
	placed_free(&pl);
	qg_graph_free(g);
	qg_ctx_free(c);

	/* by rows: RMS_NORM, MUL by a row of weights, the residual ADD in one step; a broadcast of one row waits */
	for (int bc = 0; bc < 2; bc++) {
		c = qg_ctx_new(64);
		g = qg_graph_new(64);
		x = qg_tensor_new_2d(c, QG_TYPE_F32, D, 7);
		struct qg_tensor *gamma = qg_tensor_new_1d(c, QG_TYPE_F32, D);
		struct qg_tensor *h = qg_op_rms_norm(c, x, 1e-5f);
		struct qg_tensor *out = bc ? qg_op_mul(c, x, qg_tensor_view(c, h, 2, (const int64_t[]){ D, 1 },
									    (const size_t[]){ h ? h->nb[1] : 0 }, 0))
					   : qg_op_add(c, qg_op_mul(c, h, gamma), x);
		r = !out || qg_graph_build(g, out) || place_graph(&pl, g);
		if (!r) {
			fill_f32(x, -1.0f, 1.0f);
			fill_f32(gamma, 0.5f, 1.5f);
			r = steps_run(be, g, nth, &st, &bad);
		}
		tap_ok(!r && bad == -1 && st.plan_steps == (bc ? 2u : 1u),
		       "%d threads: %s: %zu nodes in %zu steps (%ld)", nth,
		       bc ? "a MUL by one row of an RMS_NORM waits for it" : "RMS_NORM, MUL, ADD by rows share a step",
		       st.plan_nodes, st.plan_steps, bad);
		placed_free(&pl);
		qg_graph_free(g);
		qg_ctx_free(c);
	}

	struct chain ch;
	memset(&ch, 0, sizeof ch);
	if (chain_build(&ch, 40) == 0) {
		r = steps_run(be, ch.g, nth, &st, &bad);
		tap_ok(!r && bad == -1 && st.plan_steps == st.plan_nodes && st.plan_nodes == ch.g->n_nodes &&
			       st.plan_barriers == st.plan_nodes + (nth > 1 ? 0 : st.plan_nodes / 2),
		       "%d threads: a chain of %zu nodes runs in %zu steps, %zu barriers (%ld)", nth, ch.g->n_nodes,
		       st.plan_steps, st.plan_barriers, bad);
		chain_free(&ch);
	} else {
		tap_ok(0, "a chain built");
	}
	qg_backend_free(be);
}

static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void test_small_and_idle(void)
{
	struct qg_backend *be = cpu_new(2, 0, NULL);
	struct qg_ctx *ctx = qg_ctx_new(8);
	struct qg_tensor *a = qg_tensor_new_1d(ctx, QG_TYPE_F32, 8), *s = qg_op_scale(ctx, a, 2.0f);
	struct qg_graph *g = qg_graph_new(8);
	struct placed pl = { 0 };
	struct qg_cpu_stats s0, s1;
	struct qg_run run;
	struct chain c;

	qg_graph_build(g, s);
	place_graph(&pl, g);
	fill_f32(a, -1, 1);
	qg_backend_cpu_stats(be, &s0);
	qg_run_init(&run);
	int r = qg_backend_graph_compute(be, g, &run);
	qg_backend_cpu_stats(be, &s1);
	float in[8], out[8];
	qg_tensor_get(a, in, 0, sizeof in);
	qg_tensor_get(s, out, 0, sizeof out);
	tap_ok(r == 0 && !run.pooled && s1.runs_caller == s0.runs_caller + 1 && s1.runs_pool == s0.runs_pool &&
		       s1.wakes == s0.wakes && out[5] == 2 * in[5],
	       "a graph of 8 elements runs on the caller: the pool is not woken");
	memset(&c, 0, sizeof c);
	chain_build(&c, 4);
	qg_run_init(&run);
	r = qg_backend_graph_compute(be, c.g, &run);
	tap_ok(r == 0 && run.pooled, "a graph of %d MACs (over %u) uses the pool", 4 * 128 * 128 * 32,
	       QG_CPU_SMALL_WORK);

	/* idle: the worker spins a while, then sleeps, and uses no CPU */
	int asleep = 0;
	for (int i = 0; i < 1000 && !asleep; i++) {
		qg_backend_cpu_stats(be, &s1);
		asleep = s1.sleeping == 1;
		if (!asleep)
			sleep_ms(1);
	}
	double c0 = cpu_ms();
	sleep_ms(200);
	double used = cpu_ms() - c0;
	tap_ok(asleep && used < 20, "idle: the worker sleeps (%d asleep), %.2f ms of CPU in 200 ms", s1.sleeping, used);
	qg_backend_cpu_stats(be, &s0);
	qg_run_init(&run);
	r = qg_backend_graph_compute(be, c.g, &run);
	qg_backend_cpu_stats(be, &s1);
	tap_ok(r == 0 && run.pooled && s1.wakes == s0.wakes + 1, "the next run wakes it (one futex wake)");
	chain_free(&c);
	placed_free(&pl);
	qg_graph_free(g);
	qg_ctx_free(ctx);
	qg_backend_free(be);
}

static void test_options(void)
{
	struct qg_backend *b = (struct qg_backend *)1;
	struct qg_cpu_opts o = { 0 };
	static const struct {
		const char *cpus;
		int threads;
		int err;
	} bad[] = {
		{ NULL, -1, -EINVAL },	     { NULL, QG_CPU_MAX_THREADS + 1, -EINVAL }, { "", 0, -EINVAL },
		{ "0-", 0, -EINVAL },	     { "5000", 0, -ERANGE },			 { "0,0", 0, -EINVAL },
		{ "1023", 0, -EINVAL },	     /* not a CPU this process may use (unless it is) */
	};
	cpu_set_t set;
	sched_getaffinity(0, sizeof set, &set);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (bad[i].cpus && strcmp(bad[i].cpus, "1023") == 0 && CPU_ISSET(1023, &set)) {
			tap_skip("CPU 1023 is usable here");
			continue;
		}
		o.cpus = bad[i].cpus;
		o.threads = bad[i].threads;
		b = (struct qg_backend *)1;
		int r = qg_backend_cpu_new(&o, &b);
		tap_ok(r == bad[i].err && b == NULL, "cpus \"%s\", %d threads: refused with %d", bad[i].cpus ? bad[i].cpus : "(any)",
		       bad[i].threads, r);
	}
	tap_ok(qg_backend_cpu_new(NULL, NULL) == -EINVAL, "no out-pointer: -EINVAL");
	b = cpu_new(0, 0, NULL);
	struct qg_cpu_stats st;
	qg_backend_cpu_stats(b, &st);
	tap_ok(b && st.threads == st.ncpus && st.threads == CPU_COUNT(&set) && !st.pinned,
	       "defaults: one thread per usable CPU (%d), not pinned", st.threads);
	tap_ok(qg_backend_is_cpu(b) && strcmp(qg_backend_name(b), "cpu") == 0, "its name is cpu");
	tap_ok(qg_backend_supports_buft(b, qg_buft_host()), "it supports host buffers");
	struct qg_ctx *ctx = qg_ctx_new(8);
	struct qg_tensor *w = qg_tensor_new_2d(ctx, QG_TYPE_Q4_0, 64, 8), *x = qg_tensor_new_2d(ctx, QG_TYPE_F32, 64, 3);
	struct qg_tensor *y = qg_op_mul_mat(ctx, w, x);
	tap_ok(qg_backend_supports_op(b, y) && !qg_backend_supports_op(b, NULL) && !qg_backend_offload_op(b, y),
	       "supports_op on a MUL_MAT; offload_op false");
	y->src[1] = w;	/* a node made wrong after the fact: no longer the one its builder checked */
	y->flags &= ~QG_TENSOR_CHECKED;
	struct qg_graph *g = qg_graph_new(8);
	qg_graph_build(g, y);
	struct qg_plan *p = (struct qg_plan *)1;
	tap_ok(!qg_backend_supports_op(b, y) && qg_backend_graph_plan_create(b, g, &p) == -EINVAL && p == NULL,
	       "a bad node: not supported, and no plan for its graph");
	qg_graph_free(g);
	qg_ctx_free(ctx);
	qg_backend_free(b);
	qg_backend_free(NULL);
}

/* --- two callers share one backend --------------------------------------- */

struct caller {
	struct qg_backend *be;
	struct block b;
	int ok;
};

static void *caller_main(void *v)
{
	struct caller *c = v;

	for (int i = 0; i < 10; i++) {
		block_inputs(&c->b);
		if (qg_backend_graph_compute(c->be, c->b.g, NULL) != 0)
			return NULL;
		unsigned char **s = snapshot(c->b.g);
		gr_run(c->b.g, 2);
		if (compare_free(c->b.g, s) != -1)
			return NULL;
	}
	c->ok = 1;
	return NULL;
}

static void test_two_callers(void)
{
	struct caller c[2];
	pthread_t t[2];
	struct qg_backend *be = cpu_new(2, 1, NULL);

	for (int i = 0; i < 2; i++) {
		memset(&c[i], 0, sizeof c[i]);
		c[i].be = be;
		block_build(&c[i].b, i ? QG_TYPE_Q8_0 : QG_TYPE_Q4_0_4X4, 7);
	}
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, caller_main, &c[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	tap_ok(c[0].ok && c[1].ok, "two threads run their graphs through one backend, 10 times each: all equal");
	for (int i = 0; i < 2; i++)
		block_free(&c[i].b);
	qg_backend_free(be);
}

int main(void)
{
	find_cpus();
	tap_diag("CPUs here: %s", cpus_allowed);
	static const int nths[] = { 1, 2, 5 };
	for (int i = 0; i < 3; i++)
		test_every_op(nths[i]);
	test_plan_update();
	for (int i = 0; i < 3; i++)
		test_cancel(nths[i]);
	for (int i = 0; i < 3; i++)
		test_errors(nths[i]);
	for (int i = 0; i < 3; i++)
		test_steps(nths[i]);
	test_small_and_idle();
	test_options();
	test_two_callers();
	return tap_done();
}
