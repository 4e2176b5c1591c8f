/*
 * batchrun-test.c - plans of several graphs run as one batch
 * (qg_backend_graph_plan_compute_batch): the matrix products whose
 * weights they share computed once for all, each graph's results the bits
 * it gets alone.
 *
 * Each member is a decode step of a small transformer layer: its own
 * token embedding, norms and gains, and one matrix of its own, and eight
 * matrices it shares with the others (the same bytes, as sessions of one
 * model share the daemon's weights).  For every weight type the daemon
 * serves, on one thread (no workers) and on pools of 2 and 3 threads:
 * each member alone, then in batches of 2 to 8 at every position, with
 * fresh inputs each round and every node's bytes poisoned before the
 * batch, compared bit for bit.
 * Then what must not spread: a member whose row index is out of range, a
 * member cancelled before or during the batch, one past its deadline, the
 * same plan twice, a graph of another shape, and weights of its own.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-cpu.h"
#include "graph-run.h"
#include "ops.h"
#include "quant.h"
#include "tap.h"

enum { D = 256, FF = 512, VOCAB = 16, OUTV = 64, MAXB = 8 };

static struct tap_rng rng = { 0x2545f4914f6cdd1dull };

/* --- the shared weights ------------------------------------------------- */

enum { WQ, WK, WV, WO, WUP, WGATE, WDOWN, WOUT, NW };

static const int64_t wshape[NW][2] = {
	[WQ] = { D, D }, [WK] = { D, D }, [WV] = { D, D }, [WO] = { D, D },
	[WUP] = { D, FF }, [WGATE] = { D, FF }, [WDOWN] = { FF, D }, [WOUT] = { D, OUTV },
};

struct model {
	enum qg_type wt;
	void *w[NW];
};

static int model_make(struct model *m, enum qg_type wt)
{
	memset(m, 0, sizeof *m);
	m->wt = wt;
	for (int i = 0; i < NW; i++) {
		const int64_t cols = wshape[i][0], rows = wshape[i][1];
		const size_t bytes = (size_t)qg_row_size(wt, cols) * (size_t)rows;
		float *f = malloc((size_t)(rows * cols) * sizeof *f);
		if (!f || posix_memalign(&m->w[i], 64, bytes)) {
			free(f);
			return -1;
		}
		for (int64_t j = 0; j < rows * cols; j++)
			f[j] = tap_randf(&rng, -0.1f, 0.1f);
		ssize_t r = qg_quantize(wt, f, m->w[i], bytes, rows, cols, NULL);
		free(f);
		if (r < 0)
			return -1;
	}
	return 0;
}

static void model_free(struct model *m)
{
	for (int i = 0; i < NW; i++)
		free(m->w[i]);
	memset(m, 0, sizeof *m);
}

/* --- a member: one session's graph ---------------------------------------- */

struct member {
	struct qg_ctx *ctx;
	struct qg_graph *g;
	struct gr_mem mem;
	struct qg_tensor *emb, *idx, *gamma, *gamma2, *own;
	struct qg_tensor *get_rows;
	struct qg_plan *p;
	int ntok;
	unsigned char **ref;	/* every node's bytes, run alone */
};

static void fill_f32(struct qg_tensor *t, float lo, float hi)
{
	float *v = t->data;

	for (int64_t i = 0; i < qg_tensor_nelements(t); i++)
		v[i] = tap_randf(&rng, lo, hi);
}

/*
 * GET_ROWS -> RMS_NORM * gamma -> Q, K, V (one activation) -> Q+K+V -> O
 * -> + residual -> RMS_NORM * gamma2 -> up, gate -> SILU(gate) * up ->
 * down -> + residual; a product of its own matrix, and one of two
 * activations (attention scores); the logits.  M's weights, or, with
 * OWN_WEIGHTS, a copy of them of its own.
 */
static int member_build(struct member *b, const struct model *m, int ntok, bool own_weights)
{
	struct qg_ctx *c = b->ctx = qg_ctx_new(128);
	struct qg_tensor *w[NW];

	b->ntok = ntok;
	for (int i = 0; i < NW; i++) {
		w[i] = qg_tensor_new_2d(c, m->wt, wshape[i][0], wshape[i][1]);
		if (w[i] && !own_weights)
			w[i]->data = m->w[i];
	}
	b->emb = qg_tensor_new_2d(c, QG_TYPE_F32, D, VOCAB);
	b->idx = qg_tensor_new_1d(c, QG_TYPE_I32, ntok);
	b->gamma = qg_tensor_new_1d(c, QG_TYPE_F32, D);
	b->gamma2 = qg_tensor_new_1d(c, QG_TYPE_F32, D);
	b->own = qg_tensor_new_2d(c, QG_TYPE_F32, D, D);
	struct qg_tensor *x = b->get_rows = qg_op_get_rows(c, b->emb, b->idx);
	struct qg_tensor *h = qg_op_mul(c, qg_op_rms_norm(c, x, 1e-5f), b->gamma);
	struct qg_tensor *q = qg_op_mul_mat(c, w[WQ], h);
	struct qg_tensor *k = qg_op_mul_mat(c, w[WK], h);
	struct qg_tensor *v = qg_op_mul_mat(c, w[WV], h);
	struct qg_tensor *o = qg_op_mul_mat(c, w[WO], qg_op_add(c, qg_op_add(c, q, k), v));
	struct qg_tensor *r = qg_op_add(c, o, x);
	struct qg_tensor *h2 = qg_op_mul(c, qg_op_rms_norm(c, r, 1e-5f), b->gamma2);
	struct qg_tensor *up = qg_op_mul_mat(c, w[WUP], h2);
	struct qg_tensor *gate = qg_op_mul_mat(c, w[WGATE], h2);
	struct qg_tensor *down = qg_op_mul_mat(c, w[WDOWN], qg_op_mul(c, qg_op_silu(c, gate), up));
	struct qg_tensor *r2 = qg_op_add(c, down, r);
	struct qg_tensor *mine = qg_op_mul_mat(c, b->own, r2);
	struct qg_tensor *scores = qg_op_mul_mat(c, k, q);
	struct qg_tensor *logits = qg_op_mul_mat(c, w[WOUT], qg_op_add(c, r2, mine));

	if (!logits || !scores) {
		tap_diag("member: %s", qg_ctx_error_text(c));
		return -1;
	}
	logits->flags |= QG_TENSOR_OUTPUT;
	scores->flags |= QG_TENSOR_OUTPUT;
	b->g = qg_graph_new(128);
	if (qg_graph_build(b->g, logits) || qg_graph_build(b->g, scores) || gr_own_graph(&b->mem, b->g))
		return -1;
	if (own_weights)
		for (int i = 0; i < NW; i++)
			memcpy(w[i]->data, m->w[i], qg_tensor_nbytes(w[i]));
	fill_f32(b->emb, -1.0f, 1.0f);
	fill_f32(b->gamma, 0.5f, 1.5f);
	fill_f32(b->gamma2, 0.5f, 1.5f);
	fill_f32(b->own, -0.05f, 0.05f);
	return 0;
}

/* New token ids (BAD: one out of range). */
static void member_inputs(struct member *b, bool bad)
{
	int32_t *id = b->idx->data;

	for (int i = 0; i < b->ntok; i++)
		id[i] = (int32_t)(tap_rand(&rng) % VOCAB);
	if (bad)
		id[b->ntok - 1] = VOCAB + 3;
}

static void ref_free(struct member *b)
{
	if (!b->ref)
		return;
	for (size_t i = 0; i < b->g->n_nodes; i++)
		free(b->ref[i]);
	free(b->ref);
	b->ref = NULL;
}

static void member_free(struct qg_backend *be, struct member *b)
{
	ref_free(b);
	qg_backend_graph_plan_free(be, b->p);
	gr_free_all(&b->mem);
	qg_graph_free(b->g);
	qg_ctx_free(b->ctx);
	memset(b, 0, sizeof *b);
}

/* Run B's plan alone and keep every node's bytes.  0 or the run's status. */
static int run_alone(struct qg_backend *be, struct member *b)
{
	struct qg_run run;

	qg_run_init(&run);
	int r = qg_backend_graph_plan_compute(be, b->p, &run);
	if (r)
		return r;
	ref_free(b);
	b->ref = calloc(b->g->n_nodes, sizeof *b->ref);
	for (size_t i = 0; i < b->g->n_nodes; i++) {
		size_t n = qg_tensor_nbytes(b->g->nodes[i]);
		b->ref[i] = malloc(n);
		memcpy(b->ref[i], b->g->nodes[i]->data, n);
	}
	return 0;
}

/* Every node's bytes (not views: their sources) set to a pattern no run writes. */
static void poison(struct member *b)
{
	for (size_t i = 0; i < b->g->n_nodes; i++)
		if (!b->g->nodes[i]->view_src)
			memset(b->g->nodes[i]->data, 0x7f, qg_tensor_nbytes(b->g->nodes[i]));
}

/* The first node whose bytes differ from B's run alone, or -1. */
static long differs(const struct member *b)
{
	for (size_t i = 0; i < b->g->n_nodes; i++)
		if (memcmp(b->ref[i], b->g->nodes[i]->data, qg_tensor_nbytes(b->g->nodes[i])) != 0)
			return (long)i;
	return -1;
}

static struct qg_backend *pool_new(int threads)
{
	struct qg_cpu_opts o = { .threads = threads, .small_work = 1 };
	struct qg_backend *be = NULL;
	int r = qg_backend_cpu_new(&o, &be);

	if (r)
		tap_diag("qg_backend_cpu_new(%d): %d", threads, r);
	return be;
}

static uint64_t batched_runs(const struct qg_backend *be)
{
	struct qg_cpu_stats st;

	return qg_backend_cpu_stats(be, &st) == 0 ? st.runs_batched : 0;
}

/* Run the members MB[0..N) as a batch (RUNS prepared by the caller): how many ran together. */
static size_t run_batch(struct qg_backend *be, struct member *const *mb, struct qg_run *runs, size_t n)
{
	struct qg_plan *plans[MAXB];
	struct qg_run *rp[MAXB];

	for (size_t i = 0; i < n; i++) {
		plans[i] = mb[i]->p;
		rp[i] = &runs[i];
	}
	return qg_backend_graph_plan_compute_batch(be, plans, rp, n);
}

/* --- the tests ------------------------------------------------------------ */

/* Fresh inputs for MB[0..N), each run alone for its reference, then poisoned. */
static int fresh_round(struct qg_backend *be, struct member *const *mb, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		member_inputs(mb[i], false);
		if (run_alone(be, mb[i]))
			return -1;
		poison(mb[i]);
	}
	return 0;
}

/* Batches of 2..MAXB at every position of a member of M, each compared with its run alone. */
static void test_sizes(struct qg_backend *be, struct member *m, const char *what)
{
	int bad_sizes = 0, bad_bits = 0, bad_status = 0;
	uint64_t before = batched_runs(be), expect = 0;
	uint64_t key = qg_backend_graph_plan_batch_key(be, m[0].p);
	bool same_key = key != 0;

	for (int i = 1; i < MAXB; i++)
		same_key = same_key && qg_backend_graph_plan_batch_key(be, m[i].p) == key;
	tap_ok(same_key, "%s: the members' plans have one nonzero batch key", what);
	for (size_t n = 2; n <= MAXB; n++) {
		for (size_t first = 0; first < MAXB; first += n == MAXB ? MAXB : 3) {
			struct member *mb[MAXB];
			struct qg_run runs[MAXB];
			for (size_t i = 0; i < n; i++) {
				mb[i] = &m[(first + i) % MAXB];
				qg_run_init(&runs[i]);
			}
			if (fresh_round(be, mb, n)) {
				bad_status++;
				continue;
			}
			size_t together = run_batch(be, mb, runs, n);
			expect++;
			bad_sizes += together != n;
			for (size_t i = 0; i < n; i++) {
				if (runs[i].status || runs[i].nodes_done != mb[i]->g->n_nodes) {
					if (!bad_status++)
						tap_diag("batch of %zu, member %zu: status %d, %zu nodes done", n, i,
							 runs[i].status, runs[i].nodes_done);
					continue;
				}
				long d = differs(mb[i]);
				if (d >= 0 && !bad_bits++)
					tap_diag("batch of %zu at %zu, member %zu: node %ld (%s) differs from its run alone",
						 n, first, i, d, qg_op_name(mb[i]->g->nodes[d]->op));
			}
		}
	}
	tap_ok(bad_status == 0, "%s: every member of every batch ran whole", what);
	tap_ok(bad_sizes == 0, "%s: every batch of 2 to %d ran together", what, MAXB);
	tap_ok(bad_bits == 0, "%s: each member's every node is the bits of its run alone", what);
	tap_ok(batched_runs(be) - before == expect, "%s: the backend counts %llu batches", what,
	       (unsigned long long)expect);
}

/* A member with a row index out of range fails alone, with its node; the rest are exact. */
static void test_bad_member(struct qg_backend *be, struct member *m, const char *what)
{
	struct member *mb[4] = { &m[0], &m[1], &m[2], &m[3] };
	struct qg_run runs[4];
	bool others_ok = true;

	if (fresh_round(be, mb, 4)) {
		tap_ok(0, "%s: inputs for the bad member's batch", what);
		return;
	}
	member_inputs(mb[1], true);
	for (int i = 0; i < 4; i++)
		qg_run_init(&runs[i]);
	size_t together = run_batch(be, mb, runs, 4);
	long rows_at = -1;
	for (size_t i = 0; i < mb[1]->g->n_nodes; i++)
		if (mb[1]->g->nodes[i] == mb[1]->get_rows)
			rows_at = (long)i;
	for (int i = 0; i < 4; i++)
		if (i != 1)
			others_ok = others_ok && runs[i].status == 0 && differs(mb[i]) < 0;
	tap_ok(together == 4 && runs[1].status == -ERANGE && runs[1].failed_node == rows_at &&
		       runs[1].nodes_done <= (size_t)rows_at,
	       "%s: a row index out of range fails its member alone (%d at node %ld of %ld, %zu done)", what,
	       runs[1].status, runs[1].failed_node, rows_at, runs[1].nodes_done);
	tap_ok(others_ok, "%s: the other three members of its batch are exact", what);
}

struct canceller {
	struct qg_run *run;
	_Atomic int go;
};

static void *cancel_main(void *v)
{
	struct canceller *c = v;

	while (!atomic_load(&c->go))
		;
	qg_run_cancel(c->run);
	return NULL;
}

/*
 * Cancels and deadlines: one cancelled before the batch and one past its
 * deadline do not join and end so; one cancelled while the batch runs
 * ends cancelled or exact; the others are exact.
 */
static void test_cancel(struct qg_backend *be, struct member *m, const char *what)
{
	struct member *mb[5] = { &m[0], &m[1], &m[2], &m[3], &m[4] };
	struct qg_run runs[5];
	struct canceller c = { .run = &runs[3] };
	pthread_t t;

	if (fresh_round(be, mb, 5)) {
		tap_ok(0, "%s: inputs for the cancel batch", what);
		return;
	}
	for (int i = 0; i < 5; i++)
		qg_run_init(&runs[i]);
	qg_run_cancel(&runs[1]);
	runs[2].deadline_ns = 1;
	pthread_create(&t, NULL, cancel_main, &c);
	atomic_store(&c.go, 1);
	size_t together = run_batch(be, mb, runs, 5);
	pthread_join(t, NULL);
	bool late_ok = runs[3].status == -ECANCELED || (runs[3].status == 0 && differs(mb[3]) < 0);
	/* the one cancelled by the other thread joins, or was cancelled before the batch formed */
	bool size_ok = together == 3 || (together == 2 && runs[3].status == -ECANCELED && runs[3].nodes_done == 0);
	tap_ok(size_ok && runs[1].status == -ECANCELED && runs[1].nodes_done == 0 &&
		       runs[2].status == -ETIMEDOUT && runs[2].nodes_done == 0,
	       "%s: cancelled and late members do not join (%zu together; %d, %d)", what, together,
	       runs[1].status, runs[2].status);
	tap_ok(late_ok && runs[0].status == 0 && differs(mb[0]) < 0 && runs[4].status == 0 && differs(mb[4]) < 0,
	       "%s: one cancelled mid-batch stops or is exact (%d), the others are exact", what, runs[3].status);
}

/* The same plan twice: never together (it writes its own bytes); both run, exact. */
static void test_same_plan(struct qg_backend *be, struct member *m, const char *what)
{
	struct member *mb[2] = { &m[0], &m[0] };
	struct qg_run runs[2];

	if (fresh_round(be, mb, 1)) {
		tap_ok(0, "%s: inputs for the same plan twice", what);
		return;
	}
	qg_run_init(&runs[0]);
	qg_run_init(&runs[1]);
	size_t together = run_batch(be, mb, runs, 2);
	tap_ok(together == 1 && runs[0].status == 0 && runs[1].status == 0 && differs(mb[0]) < 0,
	       "%s: the same plan twice runs twice, alone (%zu together)", what, together);
}

/* Members of another shape, and with weights of their own: exact, whether they join or not. */
static void test_strangers(struct qg_backend *be, const struct model *md, struct member *m, const char *what)
{
	struct member wide = { 0 }, mine = { 0 };
	bool built = member_build(&wide, md, 3, false) == 0 && member_build(&mine, md, 1, true) == 0 &&
		     qg_backend_graph_plan_create(be, wide.g, &wide.p) == 0 &&
		     qg_backend_graph_plan_create(be, mine.g, &mine.p) == 0;

	if (!built) {
		tap_ok(0, "%s: strangers built", what);
	} else {
		struct member *mb[4] = { &m[0], &wide, &m[1], &mine };
		struct qg_run runs[4];
		bool ok = true;
		if (fresh_round(be, mb, 4))
			ok = false;
		for (int i = 0; i < 4; i++)
			qg_run_init(&runs[i]);
		size_t together = ok ? run_batch(be, mb, runs, 4) : 0;
		for (int i = 0; i < 4 && ok; i++)
			ok = runs[i].status == 0 && differs(mb[i]) < 0;
		tap_ok(ok && together >= 2 && together <= 3,
		       "%s: with a member of three tokens and one of its own weights: %zu together, all exact",
		       what, together);
		struct member *pair[2] = { &m[2], &mine };
		ok = fresh_round(be, pair, 2) == 0;
		qg_run_init(&runs[0]);
		qg_run_init(&runs[1]);
		together = ok ? run_batch(be, pair, runs, 2) : 0;
		tap_ok(together == 1 && runs[0].status == 0 && runs[1].status == 0 && differs(pair[0]) < 0 &&
			       differs(pair[1]) < 0,
		       "%s: a member with weights of its own does not join one with the shared weights (%zu)",
		       what, together);
	}
	member_free(be, &wide);
	member_free(be, &mine);
}

static void test_type(enum qg_type wt, int threads)
{
	struct model md;
	struct member m[MAXB];
	char what[64];
	struct qg_backend *be = pool_new(threads);
	bool ok = be && model_make(&md, wt) == 0;

	snprintf(what, sizeof what, "%s, %d threads", qg_type_name(wt), threads);
	memset(m, 0, sizeof m);
	for (int i = 0; i < MAXB && ok; i++)
		ok = member_build(&m[i], &md, 1, false) == 0 && qg_backend_graph_plan_create(be, m[i].g, &m[i].p) == 0;
	for (int i = 0; i < MAXB && ok; i++)
		ok = run_alone(be, &m[i]) == 0;	/* a plan has a batch key once it ran */
	tap_ok(ok, "%s: weights, %d members and their plans, each run once", what, MAXB);
	if (ok) {
		test_sizes(be, m, what);
		test_bad_member(be, m, what);
		test_cancel(be, m, what);
		test_same_plan(be, m, what);
		test_strangers(be, &md, m, what);
	}
	for (int i = 0; i < MAXB; i++)
		member_free(be, &m[i]);
	model_free(&md);
	qg_backend_free(be);
}

/* Bad arguments: every run failed with -EINVAL, nothing run. */
static void test_arguments(void)
{
	struct qg_backend *be = pool_new(2);
	struct qg_run run;
	struct qg_run *rp[1] = { &run };
	struct qg_plan *pp[1] = { NULL };

	qg_run_init(&run);
	tap_ok(qg_backend_graph_plan_compute_batch(be, pp, rp, 1) == 0 && run.status == -EINVAL,
	       "a NULL plan: nothing runs, its run fails with -EINVAL (%d)", run.status);
	tap_ok(qg_backend_graph_plan_compute_batch(be, pp, rp, 0) == 0, "no plans: nothing runs");
	tap_ok(qg_backend_graph_plan_batch_key(be, NULL) == 0, "a NULL plan has no batch key");
	qg_backend_free(be);
}

int main(void)
{
	static const enum qg_type types[] = {
		QG_TYPE_Q4_0, QG_TYPE_Q4_0_4X4, QG_TYPE_Q4_0_4X8, QG_TYPE_Q4_0_8X8,
		QG_TYPE_Q8_0, QG_TYPE_Q4_K, QG_TYPE_Q6_K, QG_TYPE_F16,
	};

	test_arguments();
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		for (int threads = 1; threads <= 3; threads++)
			test_type(types[i], threads);
	return tap_done();
}
