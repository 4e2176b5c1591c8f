/*
 * backend-cpu.c - the CPU backend (see backend-cpu.h): the worker pool,
 * runs and batches of runs, the interface.  Plans and their steps are
 * backend-cpu-plan.c's; a thread's share of a run and the barrier
 * between the phases of a step, backend-cpu-share.c's.
 *
 * A run on the pool is one dispatch: the caller publishes the plan and
 * bumps JOB; every thread walks the plan's steps, computes its share of
 * each phase of every node in the step (qg_op_compute with its ITH and
 * the node's NTH) and meets the others at the barrier after the phase.
 * A step is a run of nodes none of which touches bytes another one
 * writes (qg_cpu_plan_schedule): Q, K and V read one input and write
 * three results, so they share a step, and a MUL_MAT that reads the activation
 * another one of its step quantizes in phase 0 reads that one's scratch
 * instead of quantizing it again.  A MUL_MAT of a small activation (a
 * decode step's) has each of its threads quantize all of it for itself
 * and go on to its share of the product: no barrier between its phases.
 * A node that reads, by rows, only rows the same thread has just written
 * joins that node's step.  Neither needs a barrier on any memory model:
 * a thread reads there only what it wrote itself, ordered by its program
 * order; what crosses threads still crosses a barrier.
 *
 * The last thread to arrive at a barrier is, for a moment, the only one
 * running: it decides whether the run stops there (a node's error, the
 * cancel flag, the deadline) and writes STOP before it releases the
 * others, so that every thread leaves at the same barrier.  Each worker
 * then bumps DONE, and the caller returns once all have.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-cpu-impl.h"
#include "cpulist.h"
#include "futex.h"
#include "stamp.h"
#include "ops.h"

struct worker_arg {
	struct cpu_backend *cb;
	int ith;
};

static struct cpu_backend *cpu_of(const struct qg_backend *b)
{
	return (struct cpu_backend *)b->ctx;
}

/* --- plans --------------------------------------------------------------- */

static int cpu_plan_create(struct qg_backend *b, struct qg_graph *g, struct qg_plan **out)
{
	struct cpu_backend *cb = cpu_of(b);
	struct cpu_plan *p;

	pthread_mutex_lock(&cb->lock);
	int r = qg_cpu_plan_make(g, cb->nth, &p);
	cb->plans_made += r == 0;
	pthread_mutex_unlock(&cb->lock);
	*out = r ? NULL : &p->base;
	return r;
}

static int cpu_plan_update(struct qg_backend *b, struct qg_plan *base, struct qg_graph *g)
{
	struct cpu_plan *p = (struct cpu_plan *)base;

	(void)b;
	if (!qg_cpu_plan_matches(p, g))
		return -EINVAL;
	qg_cpu_plan_rebind(p, g);
	return 0;
}

static void cpu_plan_free(struct qg_backend *b, struct qg_plan *base)
{
	(void)b;
	qg_cpu_plan_free((struct cpu_plan *)base);
}

/* --- workers ------------------------------------------------------------- */

/* Wait for a job other than SEEN (spin, then sleep).  Its number. */
static uint32_t wait_job(struct cpu_backend *cb, uint32_t seen)
{
	uint64_t start = 0;
	uint32_t j;

	for (unsigned spins = 0; (j = atomic_load_explicit(&cb->job, memory_order_acquire)) == seen; spins++) {
		if (spins % 64 != 63) {
			qg_cpu_relax();
			continue;
		}
		uint64_t now = qg_stamp_ns();
		if (!start)
			start = now;
		if (now - start < cb->spin_ns) {
			qg_cpu_relax();
			continue;
		}
		/* the full-fence pattern of barrier(): the caller bumps JOB, fences, reads JOB_SLEEPERS */
		atomic_fetch_add_explicit(&cb->sleeping, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&cb->job_sleepers, 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&cb->job, memory_order_relaxed) == seen)
			qg_futex_wait(&cb->job, seen, 0, false);
		atomic_fetch_sub_explicit(&cb->job_sleepers, 1, memory_order_relaxed);
		atomic_fetch_sub_explicit(&cb->sleeping, 1, memory_order_relaxed);
		start = 0;	/* woken: spin again a while before the next sleep */
	}
	return j;
}

static void *worker_main(void *v)
{
	struct worker_arg a = *(struct worker_arg *)v;
	struct cpu_backend *cb = a.cb;
	uint32_t seen = 0;

	free(v);
	for (;;) {
		seen = wait_job(cb, seen);
		if (atomic_load_explicit(&cb->quit, memory_order_acquire))
			break;
		if (cb->job_batch)
			qg_cpu_run_batch_share(cb, cb->job_batch, a.ith);
		else
			qg_cpu_run_share(cb, cb->job_plan, cb->job_run, a.ith);
		/* release: the caller's acquire of DONE orders our last reads of the job before its next writes */
		atomic_fetch_add_explicit(&cb->done, 1, memory_order_release);
	}
	return NULL;
}

/* Bump JOB (release: the job's fields are written) and wake sleeping workers. */
static void post_job(struct cpu_backend *cb)
{
	atomic_fetch_add_explicit(&cb->job, 1, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&cb->job_sleepers, memory_order_relaxed)) {
		qg_futex_wake(&cb->job, false);
		cb->wakes++;
	}
}

/* --- runs ---------------------------------------------------------------- */

/* P on the calling thread alone.  The run's status. */
static int run_caller(struct cpu_plan *p, struct qg_run *run)
{
	for (size_t i = 0; i < p->n; i++) {
		const struct cpu_node *nd = &p->nodes[i];
		if (i > 0) {
			if (atomic_load_explicit(&run->cancel, memory_order_acquire))
				return -ECANCELED;
			if (run->deadline_ns && qg_stamp_ns() > run->deadline_ns)
				return -ETIMEDOUT;
		}
		for (int ph = 0; ph < nd->phases; ph++) {
			int e = qg_op_compute(nd->t, ph, 0, 1, p->scratch);
			if (e) {
				run->failed_node = (long)nd->index;
				return e;
			}
		}
		run->nodes_done = nd->index + 1;
	}
	run->nodes_done = p->n_graph_nodes;
	return 0;
}

/* Wait until every worker is done with the job (acquire: what they wrote is seen). */
static void wait_done(struct cpu_backend *cb)
{
	for (unsigned spins = 0; atomic_load_explicit(&cb->done, memory_order_acquire) != cb->n_started; spins++) {
		if (spins < 4096)
			qg_cpu_relax();
		else
			sched_yield();	/* a worker between the last barrier and DONE lost its core */
	}
}

/* P on the pool, the caller being thread 0.  The run's status. */
static int run_pool(struct cpu_backend *cb, struct cpu_plan *p, struct qg_run *run)
{
	cb->job_plan = p;
	cb->job_run = run;
	cb->job_batch = NULL;
	atomic_store_explicit(&cb->stop, 0, memory_order_relaxed);
	atomic_store_explicit(&cb->err, 0, memory_order_relaxed);
	atomic_store_explicit(&cb->err_node, -1, memory_order_relaxed);
	atomic_store_explicit(&cb->nodes_done, 0, memory_order_relaxed);
	atomic_store_explicit(&cb->done, 0, memory_order_relaxed);
	post_job(cb);
	qg_cpu_run_share(cb, p, run, 0);
	wait_done(cb);
	int st = atomic_load_explicit(&cb->stop, memory_order_relaxed);
	long bad = atomic_load_explicit(&cb->err_node, memory_order_relaxed);
	if (!st) {
		run->nodes_done = p->n_graph_nodes;
	} else if (atomic_load_explicit(&cb->err, memory_order_relaxed)) {
		/* the run stopped at the end of BAD's step: the nodes before it are done unless a later step has one */
		size_t upto = atomic_load_explicit(&cb->nodes_done, memory_order_relaxed);
		run->failed_node = bad;
		run->nodes_done = (size_t)bad < upto ? (size_t)bad : upto;
	} else {
		run->nodes_done = atomic_load_explicit(&cb->nodes_done, memory_order_relaxed);
	}
	return st;
}

/*
 * Make P ready to run (LOCK held): its data checked and its steps made
 * when the data is new, and the run not cancelled or late already.  0 or
 * the run's status.
 */
static int plan_ready(struct cpu_backend *cb, struct cpu_plan *p, struct qg_run *run)
{
	if (!p->data_ok) {
		for (size_t i = 0; i < p->n_graph_nodes; i++) {
			int e = qg_op_check_data(p->g->nodes[i]);
			if (e) {
				run->failed_node = (long)i;
				return e;
			}
		}
		/* the steps follow from where the data is */
		int e = qg_cpu_plan_schedule(p, cb->node_steps);
		if (e)
			return e;
		cb->plan_nodes = p->n;
		cb->plan_steps = p->n_steps;
		cb->plan_shared = cb->plan_barriers = 0;
		for (size_t i = 0; i < p->n; i++)
			cb->plan_shared += p->nodes[i].share >= 0;
		for (size_t l = 0; l < p->n_steps; l++)
			cb->plan_barriers += (size_t)p->steps[l].phases;
		p->data_ok = true;
	}
	if (atomic_load_explicit(&run->cancel, memory_order_acquire))
		return -ECANCELED;
	if (run->deadline_ns && (run->start_ns ? run->start_ns : qg_stamp_ns()) > run->deadline_ns)
		return -ETIMEDOUT;
	return 0;
}

/* Run P (LOCK held). */
static int run_plan(struct cpu_backend *cb, struct cpu_plan *p, struct qg_run *run)
{
	int e = plan_ready(cb, p, run);

	if (e)
		return e;
	if (cb->n_started == 0 || p->n == 0 || p->work < cb->small_work) {
		cb->runs_caller++;
		return run_caller(p, run);
	}
	cb->runs_pool++;
	run->pooled = true;
	return run_pool(cb, p, run);
}

/* --- batch runs ---------------------------------------------------------- */

/*
 * Run BT on the pool (LOCK held), the caller being thread 0: each member's
 * outcome in its run.
 */
static void run_batch(struct cpu_backend *cb, struct cpu_batch *bt)
{
	bt->live = bt->n >= 32 ? UINT32_MAX : (UINT32_C(1) << bt->n) - 1;
	for (size_t b = 0; b < bt->n; b++) {
		atomic_store_explicit(&bt->err[b], 0, memory_order_relaxed);
		atomic_store_explicit(&bt->err_node[b], -1, memory_order_relaxed);
		bt->run[b]->pooled = cb->n_started > 0;
	}
	bt->done_after = 0;
	cb->job_plan = bt->p[0];
	cb->job_run = NULL;
	cb->job_batch = bt;
	atomic_store_explicit(&cb->stop, 0, memory_order_relaxed);
	atomic_store_explicit(&cb->done, 0, memory_order_relaxed);
	post_job(cb);
	qg_cpu_run_batch_share(cb, bt, 0);
	wait_done(cb);
	for (size_t b = 0; b < bt->n; b++) {
		if (!(bt->live >> b & 1))
			continue;	/* stopped, its outcome set then */
		bt->run[b]->status = 0;
		bt->run[b]->nodes_done = bt->p[b]->n_graph_nodes;
	}
	cb->job_batch = NULL;
	if (cb->n_started > 0)
		cb->runs_pool++;
	else
		cb->runs_caller++;
	cb->runs_batched++;
	cb->batched_plans += bt->n;
}

static size_t cpu_plan_compute_batch(struct qg_backend *b, struct qg_plan *const *plans, struct qg_run *const *runs,
				     size_t n)
{
	struct cpu_backend *cb = cpu_of(b);
	struct cpu_batch bt = { 0 };
	struct span *w[QG_CPU_BATCH_MAX] = { 0 };
	long nw[QG_CPU_BATCH_MAX];
	size_t pick[QG_CPU_BATCH_MAX];
	bool *joined = calloc(n, sizeof *joined);

	pthread_mutex_lock(&cb->lock);
	/* the batch: the first ready plan and those like it, clear of each other's bytes */
	for (size_t i = 0; i < n && joined && bt.n < QG_CPU_BATCH_MAX; i++) {
		struct cpu_plan *p = (struct cpu_plan *)plans[i];
		int e = plan_ready(cb, p, runs[i]);
		if (e) {
			runs[i]->status = e;
			joined[i] = true;	/* done with */
			continue;
		}
		if (p->n == 0 ||
		    (bt.n && (p->key != bt.p[0]->key || !qg_cpu_plans_align(bt.p[0], p) ||
			     !qg_cpu_plans_share_weights(bt.p[0], p))))
			continue;
		if ((nw[bt.n] = qg_cpu_plan_writes(p, &w[bt.n])) < 0) {
			free(w[bt.n]);
			w[bt.n] = NULL;
			continue;
		}
		bool clear = true;
		for (size_t m = 0; m < bt.n && clear; m++)
			clear = qg_cpu_plan_clear_of(p, w[m], (size_t)nw[m]) &&
				qg_cpu_plan_clear_of(bt.p[m], w[bt.n], (size_t)nw[bt.n]);
		if (!clear) {
			free(w[bt.n]);
			w[bt.n] = NULL;
			continue;
		}
		pick[bt.n] = i;
		bt.run[bt.n] = runs[i];
		bt.p[bt.n++] = p;
	}
	size_t together = 1;
	if (bt.n >= 2 && (bt.group = calloc(bt.p[0]->n, sizeof *bt.group)) &&
	    (bt.claimed = malloc(bt.p[0]->n * sizeof *bt.claimed))) {
		for (size_t j = 0; j < bt.p[0]->n; j++)
			atomic_init(&bt.claimed[j], 0);
		size_t need = qg_cpu_batch_groups(&bt);
		if (need > cb->bscratch_size) {
			free(cb->bscratch);
			cb->bscratch_size = 0;
			if ((cb->bscratch = aligned_alloc(64, (need + 63) & ~(size_t)63)))
				cb->bscratch_size = need;
		}
		if (need && need <= cb->bscratch_size) {
			bt.scratch = cb->bscratch;
			run_batch(cb, &bt);
			for (size_t m = 0; m < bt.n; m++)
				joined[pick[m]] = true;
			together = bt.n;
		}
	}
	/* the rest alone, in order */
	for (size_t i = 0; i < n; i++)
		if (!joined || !joined[i])
			runs[i]->status = run_plan(cb, (struct cpu_plan *)plans[i], runs[i]);
	pthread_mutex_unlock(&cb->lock);
	for (size_t m = 0; m < bt.n; m++)
		free(w[m]);
	free(bt.group);
	free((void *)bt.claimed);
	free(joined);
	return together;
}

static uint64_t cpu_plan_batch_key(const struct qg_backend *b, const struct qg_plan *base)
{
	const struct cpu_plan *p = (const struct cpu_plan *)base;

	(void)b;
	return p->key;
}

static int cpu_plan_compute(struct qg_backend *b, struct qg_plan *base, struct qg_run *run)
{
	struct cpu_backend *cb = cpu_of(b);

	pthread_mutex_lock(&cb->lock);
	int r = run_plan(cb, (struct cpu_plan *)base, run);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

static int cpu_graph_compute(struct qg_backend *b, struct qg_graph *g, struct qg_run *run)
{
	struct cpu_backend *cb = cpu_of(b);
	int r = 0;

	pthread_mutex_lock(&cb->lock);
	if (cb->cached && cb->cached->g == g && qg_cpu_plan_matches(cb->cached, g)) {
		qg_cpu_plan_rebind(cb->cached, g);	/* the data may have moved: checked again */
	} else {
		qg_cpu_plan_free(cb->cached);
		cb->cached = NULL;
		r = qg_cpu_plan_make(g, cb->nth, &cb->cached);
		cb->plans_made += r == 0;
		if (r == 0)
			cb->cached->base.backend = b;
	}
	if (r == 0)
		r = run_plan(cb, cb->cached, run);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

/* --- the rest of the interface ------------------------------------------ */

static const char *cpu_name(const struct qg_backend *b)
{
	(void)b;
	return "cpu";
}

static bool cpu_supports_op(const struct qg_backend *b, const struct qg_tensor *t)
{
	(void)b;
	return qg_op_check(t) == 0;
}

static bool cpu_supports_buft(const struct qg_backend *b, const struct qg_buft *buft)
{
	(void)b;
	return qg_buft_is_host(buft);
}

/* Stop and join the workers, free everything. */
static void cpu_free(struct qg_backend *b)
{
	struct cpu_backend *cb = cpu_of(b);

	atomic_store_explicit(&cb->quit, 1, memory_order_release);
	post_job(cb);
	for (int i = 0; i < cb->n_started; i++)
		pthread_join(cb->tid[i], NULL);
	qg_cpu_plan_free(cb->cached);
	free(cb->bscratch);
	pthread_mutex_destroy(&cb->lock);
	free(cb->tid);
	free(cb->cpus);
	free(cb);
}

static const struct qg_backend_i cpu_backend_i = {
	.name = cpu_name,
	.free = cpu_free,
	.graph_plan_create = cpu_plan_create,
	.graph_plan_update = cpu_plan_update,
	.graph_plan_compute = cpu_plan_compute,
	.graph_plan_free = cpu_plan_free,
	.graph_plan_compute_batch = cpu_plan_compute_batch,
	.graph_plan_batch_key = cpu_plan_batch_key,
	.graph_compute = cpu_graph_compute,
	.supports_op = cpu_supports_op,
	.supports_buft = cpu_supports_buft,
};

/* The CPUs of OPTS (or every usable one) into CB.  0 or -errno. */
static int pick_cpus(struct cpu_backend *cb, const struct qg_cpu_opts *o)
{
	cpu_set_t allowed;
	int r;

	CPU_ZERO(&allowed);
	if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
		return -errno;
	cb->cpus = calloc(QG_CPU_MAX, sizeof *cb->cpus);
	if (!cb->cpus)
		return -ENOMEM;
	if (o->cpus) {
		if ((r = qg_cpulist_parse(o->cpus, cb->cpus, QG_CPU_MAX, &cb->ncpus)))
			return r;
		for (int i = 0; i < cb->ncpus; i++)
			if (!CPU_ISSET(cb->cpus[i], &allowed))
				return -EINVAL;
		cb->pinned = true;
	} else {
		for (int c = 0; c < QG_CPU_MAX && c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &allowed))
				cb->cpus[cb->ncpus++] = c;
		if (cb->ncpus == 0)
			cb->cpus[cb->ncpus++] = 0;
	}
	return 0;
}

/* Start worker ITH, pinned to its CPU if CB pins.  0 or -errno. */
static int start_worker(struct cpu_backend *cb, int ith)
{
	struct worker_arg *a = malloc(sizeof *a);
	pthread_attr_t attr;
	int r;

	if (!a)
		return -ENOMEM;
	a->cb = cb;
	a->ith = ith;
	if ((r = pthread_attr_init(&attr))) {
		free(a);
		return -r;
	}
	if (cb->pinned) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cb->cpus[ith % cb->ncpus], &set);
		r = pthread_attr_setaffinity_np(&attr, sizeof set, &set);
	}
	if (!r)
		r = pthread_create(&cb->tid[ith - 1], &attr, worker_main, a);
	pthread_attr_destroy(&attr);
	if (r) {
		free(a);
		return -r;
	}
	/*
	 * Named here, not by the worker: the name (for top -H, gdb and tests)
	 * then holds when the pool is returned.  Thread 0 is the caller's.
	 */
	char name[16];	/* the kernel's limit; ith < QG_CPU_MAX_THREADS, so 16 bits say it */
	snprintf(name, sizeof name, "qg-cpu%hu", (unsigned short)ith);
	pthread_setname_np(cb->tid[ith - 1], name);
	return 0;
}

int qg_backend_cpu_new(const struct qg_cpu_opts *opts, struct qg_backend **out)
{
	const struct qg_cpu_opts none = { 0 };
	const struct qg_cpu_opts *o = opts ? opts : &none;
	struct cpu_backend *cb;
	int r;

	if (out)
		*out = NULL;
	if (!out || o->threads < 0 || o->threads > QG_CPU_MAX_THREADS)
		return -EINVAL;
	if (!(cb = calloc(1, sizeof *cb)))
		return -ENOMEM;
	if ((r = pick_cpus(cb, o))) {
		free(cb->cpus);
		free(cb);
		return r;
	}
	cb->base.iface = &cpu_backend_i;
	cb->base.ctx = cb;
	cb->nth = o->threads ? o->threads : cb->ncpus;
	cb->small_work = o->small_work ? o->small_work : QG_CPU_SMALL_WORK;
	cb->node_steps = o->node_steps;
	cb->spin_ns = (uint64_t)(o->spin_us ? o->spin_us : QG_CPU_SPIN_US) * 1000u;
	cb->bar_spin_ns = cb->nth > cb->ncpus ? BARRIER_SPIN_OVER_NS : BARRIER_SPIN_NS;
	pthread_mutex_init(&cb->lock, NULL);
	cb->tid = calloc((size_t)cb->nth, sizeof *cb->tid);
	if (!cb->tid) {
		cpu_free(&cb->base);
		return -ENOMEM;
	}
	for (int i = 1; i < cb->nth; i++) {
		if ((r = start_worker(cb, i))) {
			cpu_free(&cb->base);
			return r == -EAGAIN || r == -ENOMEM ? r : -EINVAL;
		}
		cb->n_started++;
	}
	*out = &cb->base;
	return 0;
}

int qg_backend_cpu_pin_thread(const struct qg_backend *b, pthread_t thread)
{
	if (!qg_backend_is_cpu(b))
		return -EINVAL;
	const struct cpu_backend *cb = b->ctx;
	if (!cb->pinned)
		return 0;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cb->cpus[0], &set);
	return -pthread_setaffinity_np(thread, sizeof set, &set);
}

bool qg_backend_is_cpu(const struct qg_backend *b)
{
	return b && b->iface == &cpu_backend_i;
}

int qg_backend_cpu_stats(const struct qg_backend *b, struct qg_cpu_stats *st)
{
	if (!qg_backend_is_cpu(b) || !st)
		return -EINVAL;
	struct cpu_backend *cb = cpu_of(b);
	pthread_mutex_lock(&cb->lock);
	*st = (struct qg_cpu_stats){
		.threads = cb->nth,
		.ncpus = cb->ncpus,
		.pinned = cb->pinned,
		.runs_caller = cb->runs_caller,
		.runs_pool = cb->runs_pool,
		.wakes = cb->wakes,
		.plans_made = cb->plans_made,
		.sleeping = atomic_load_explicit(&cb->sleeping, memory_order_relaxed),
		.plan_nodes = cb->plan_nodes,
		.plan_steps = cb->plan_steps,
		.plan_shared = cb->plan_shared,
		.plan_barriers = cb->plan_barriers,
		.runs_batched = cb->runs_batched,
		.batched_plans = cb->batched_plans,
	};
	pthread_mutex_unlock(&cb->lock);
	return 0;
}
