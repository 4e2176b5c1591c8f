/*
 * backend-cpu.c - the CPU backend (see backend-cpu.h): plans, the worker
 * pool, the barrier between the phases of a step.
 *
 * A run on the pool is one dispatch: the caller publishes the plan and
 * bumps JOB; every thread walks the plan's steps, computes its share of
 * each phase of every node in the step (qg_op_compute with its ITH and
 * the node's NTH) and meets the others at the barrier after the phase.
 * A step is a run of nodes none of which touches bytes another one
 * writes (schedule()): Q, K and V read one input and write three
 * results, so they share a step, and a MUL_MAT that reads the activation
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

#include "backend-cpu.h"
#include "backend-impl.h"
#include "cpulist.h"
#include "futex.h"
#include "stamp.h"
#include "ops.h"

/* A barrier waiter spins this long before it sleeps (when every thread has a core of its own). */
#define BARRIER_SPIN_NS 1000000u
/* ... and this long when threads outnumber cores: the one it waits for may need this core. */
#define BARRIER_SPIN_OVER_NS 2000u

/* What a plan's structure is made of, per node: compared by plan_update. */
struct node_sig {
	int op;
	int type[1 + QG_MAX_SRC];
	int64_t ne[1 + QG_MAX_SRC][QG_MAX_DIMS];
	size_t nb[1 + QG_MAX_SRC][QG_MAX_DIMS];
	int32_t params[QG_MAX_OP_PARAMS];
};

/* A node that computes (views and leafs have nothing to do). */
struct cpu_node {
	struct qg_tensor *t;
	size_t index;		/* in the graph's nodes */
	int nth;		/* threads its work is split over, <= the pool's */
	int phases;
	/* set by schedule(): */
	size_t step;
	size_t scratch_off;	/* its scratch in the plan's, in a pooled run */
	long share;		/* a node of its step whose phase-0 scratch it reads (in P's nodes), or -1 */
	/*
	 * A MUL_MAT of a small activation: each of its threads quantizes the
	 * whole activation into scratch of its own (SLOT bytes a thread, at
	 * SCRATCH_OFF + ITH * SLOT) and computes its share at once, the
	 * barrier between the phases saved for a little work done twice.
	 */
	bool solo;
	size_t slot;
};

/* Nodes that run between two barriers: P's ORDER[first, first + n). */
struct cpu_step {
	size_t first, n;
	int phases;		/* the most of its nodes' */
	size_t done_after;	/* the graph's nodes done once it is: the first index of a later step's node */
};

struct cpu_plan {
	struct qg_plan base;
	struct qg_graph *g;
	size_t n_graph_nodes;
	struct node_sig *sig;	/* per graph node */
	struct cpu_node *nodes;
	size_t n;
	size_t *order;		/* P's nodes by step, in graph order within one */
	struct cpu_step *steps;
	size_t n_steps;
	void *scratch;		/* 64-byte aligned, SCRATCH_SIZE bytes, shared by the threads */
	size_t scratch_size;
	uint64_t work;		/* multiply-accumulates (or elements) over the graph */
	bool data_ok;		/* every node passed qg_op_check_data */
	uint64_t key;		/* its batch key (plan_key), set with the steps */
};

struct cpu_batch;

struct cpu_backend {
	struct qg_backend base;
	pthread_mutex_t lock;	/* one run at a time: the pool serves one graph */
	int nth;
	int ncpus;
	int *cpus;
	bool pinned;
	bool node_steps;	/* a step per node (qg_cpu_opts) */
	uint64_t small_work;
	uint64_t spin_ns;	/* idle workers */
	uint64_t bar_spin_ns;
	pthread_t *tid;
	int n_started;		/* workers running */
	struct cpu_plan *cached;	/* graph_compute's last plan */

	/* the job: written by the caller before JOB is bumped (release), read by workers after (acquire) */
	struct cpu_plan *job_plan;
	struct qg_run *job_run;
	struct cpu_batch *job_batch;	/* a batch, run instead of JOB_PLAN; else NULL */
	void *bscratch;			/* the groups' scratch of a batch (under LOCK), 64-byte aligned */
	size_t bscratch_size;
	_Alignas(64) _Atomic uint32_t job;
	_Atomic uint32_t job_sleepers;
	_Atomic int quit;
	_Alignas(64) _Atomic int done;	/* workers finished with the current job */

	/* the barrier */
	_Alignas(64) _Atomic uint32_t bar_count;
	_Alignas(64) _Atomic uint32_t bar_gen;
	_Atomic uint32_t bar_sleepers;
	/* the outcome, decided at a barrier: 0 to go on, else the run's status */
	_Alignas(64) _Atomic int stop;
	_Atomic int err;	/* first node error */
	_Atomic long err_node;
	_Atomic size_t nodes_done;

	/* counters (written under LOCK, except SLEEPING) */
	uint64_t runs_caller, runs_pool, wakes, plans_made, runs_batched, batched_plans, groups_run;
	size_t plan_nodes, plan_steps, plan_shared, plan_barriers;
	_Atomic int sleeping;
};

struct worker_arg {
	struct cpu_backend *cb;
	int ith;
};

static struct cpu_backend *cpu_of(const struct qg_backend *b)
{
	return (struct cpu_backend *)b->ctx;
}

/* --- plans --------------------------------------------------------------- */

static void sig_of(const struct qg_tensor *t, struct node_sig *s)
{
	memset(s, 0, sizeof *s);
	s->op = t->op;
	memcpy(s->params, t->op_params, sizeof s->params);
	for (int i = 0; i <= QG_MAX_SRC; i++) {
		const struct qg_tensor *x = i ? t->src[i - 1] : t;
		if (!x) {
			s->type[i] = -1;
			continue;
		}
		s->type[i] = x->type;
		memcpy(s->ne[i], x->ne, sizeof x->ne);
		memcpy(s->nb[i], x->nb, sizeof x->nb);
	}
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}



static void plan_free(struct cpu_plan *p)
{
	if (!p)
		return;
	free(p->sig);
	free(p->nodes);
	free(p->order);
	free(p->steps);
	free(p->scratch);
	free(p);
}

/*
 * P's batch key, made with P: each node's op, shape and threads, and the
 * type and shape of the matrix each MUL_MAT reads (FNV-1a over them), not
 * where it lies: a graph's own operands (a KV cache) differ from session
 * to session, and the batch finds the products it can join.  Plans that
 * may run as one batch (plans_align) have equal keys.
 */
static uint64_t plan_key(const struct cpu_plan *p)
{
	uint64_t h = UINT64_C(14695981039346656037);
	const uint64_t prime = UINT64_C(1099511628211);

#define MIX(v) (h = (h ^ (uint64_t)(v)) * prime)
	MIX(p->n_graph_nodes);
	MIX(p->n);
	for (size_t j = 0; j < p->n; j++) {
		const struct cpu_node *nd = &p->nodes[j];
		MIX(nd->index);
		MIX(nd->t->op);
		MIX(nd->nth);
		for (int d = 0; d < 4; d++)
			MIX(nd->t->ne[d]);
		if (nd->t->op == QG_OP_MUL_MAT) {
			MIX(nd->t->src[0]->type);
			MIX(nd->t->src[0]->ne[0]);
			MIX(nd->t->src[0]->ne[1]);
		}
	}
#undef MIX
	return h ? h : 1;
}

/* Check, split and size G's nodes into a new plan in *OUT.  0, -EINVAL, -ENOMEM. */
static int plan_make(struct cpu_backend *cb, struct qg_graph *g, struct cpu_plan **out)
{
	struct cpu_plan *p = calloc(1, sizeof *p);
	size_t scratch = 0;
	int r = -ENOMEM;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->g = g;
	p->n_graph_nodes = g->n_nodes;
	p->sig = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->sig);
	p->nodes = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->nodes);
	p->order = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->order);
	p->steps = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->steps);
	if (!p->sig || !p->nodes || !p->order || !p->steps)
		goto fail;
	for (size_t i = 0; i < g->n_nodes; i++) {
		struct qg_tensor *t = g->nodes[i];
		/* a node an op builder made was checked there; a view, or one made by hand, is checked here */
		r = t->flags & QG_TENSOR_CHECKED ? 0 : qg_op_check(t);
		if (r)
			goto fail;
		sig_of(t, &p->sig[i]);
		int phases = qg_op_n_phases(t);
		if (phases == 0)
			continue;
		int nth = qg_op_max_threads(t);
		if (nth > cb->nth)
			nth = cb->nth;
		size_t s1 = qg_op_scratch_size(t, 1), sn = qg_op_scratch_size(t, nth);
		if (s1 > scratch)
			scratch = s1;
		if (sn > scratch)
			scratch = sn;
		p->nodes[p->n++] = (struct cpu_node){ .t = t, .index = i, .nth = nth, .phases = phases, .share = -1 };
		p->work = add_sat(p->work, qg_op_work(t));
	}
	p->key = plan_key(p);
	r = -ENOMEM;
	if (scratch > SIZE_MAX - 63)
		goto fail;
	p->scratch_size = (scratch + 63) & ~(size_t)63;
	if (p->scratch_size && !(p->scratch = aligned_alloc(64, p->scratch_size)))
		goto fail;
	size_t per_node = sizeof *p->sig + sizeof *p->nodes + sizeof *p->order + sizeof *p->steps;
	size_t nodes = g->n_nodes ? g->n_nodes : 1;
	p->base.bytes = sizeof *p + nodes * per_node + p->scratch_size;	/* no overflow: each part is allocated */
	cb->plans_made++;
	*out = p;
	return 0;
fail:
	plan_free(p);
	return r;
}

/* True if G has the structure P was made for. */
static bool plan_matches(const struct cpu_plan *p, const struct qg_graph *g)
{
	struct node_sig s;

	if (g->n_nodes != p->n_graph_nodes)
		return false;
	for (size_t i = 0; i < g->n_nodes; i++) {
		sig_of(g->nodes[i], &s);
		if (memcmp(&s, &p->sig[i], sizeof s) != 0)
			return false;
	}
	return true;
}

/* Point P at G (same structure): its nodes, data to be checked again. */
static void plan_rebind(struct cpu_plan *p, struct qg_graph *g)
{
	p->g = g;
	for (size_t i = 0; i < p->n; i++)
		p->nodes[i].t = g->nodes[p->nodes[i].index];
	p->data_ok = false;
}

/* --- steps --------------------------------------------------------------- */

/* A node is put in a step with at most this many of the nodes computed before it in view. */
#define STEP_WINDOW 32
/* A MUL_MAT of at most this many activation values quantizes it on each of its threads (cpu_node.solo). */
#define SOLO_QUANT_MAX 8192
/* A step's nodes hold at most this much scratch together (or one node's, if more). */
#define STEP_SCRATCH_MAX ((size_t)4 << 20)

/* Bytes [lo, hi) a tensor's data spans. */
struct span {
	uintptr_t lo, hi;
};

static struct span span_of(const struct qg_tensor *t)
{
	const uintptr_t lo = (uintptr_t)t->data;
	const size_t n = qg_tensor_nbytes(t);

	/* an extent that does not fit is taken as everything from LO on: it touches what any node does */
	return (struct span){ lo, n > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + n };
}

static bool spans_meet(struct span a, struct span b)
{
	return a.lo < b.hi && b.lo < a.hi;
}

/* What a node writes (W) and reads (R[0..n)), worked out once a schedule. */
struct touch {
	struct span w, r[QG_MAX_SRC];
	int n;
};

static void touch_of(const struct qg_tensor *t, struct touch *tc)
{
	tc->w = span_of(t);
	tc->n = 0;
	for (int i = 0; i < QG_MAX_SRC; i++)
		if (t->src[i])
			tc->r[tc->n++] = span_of(t->src[i]);
}

/* True if node A writes bytes node B reads or writes, or B writes bytes A reads. */
static bool nodes_touch(const struct touch *a, const struct touch *b)
{
	if (spans_meet(a->w, b->w))
		return true;
	for (int i = 0; i < b->n; i++)
		if (spans_meet(a->w, b->r[i]))
			return true;
	for (int i = 0; i < a->n; i++)
		if (spans_meet(b->w, a->r[i]))
			return true;
	return false;
}

/*
 * OP's threads each take the rows of its result that qg_op_split gives
 * them (rows_of in ops-cpu.c), and read only those rows of a source
 * shaped like the result.
 */
static bool by_rows(enum qg_op op)
{
	switch (op) {
	case QG_OP_ADD:
	case QG_OP_MUL:
	case QG_OP_SCALE:
	case QG_OP_SILU:
	case QG_OP_GELU:
	case QG_OP_RMS_NORM:
	case QG_OP_NORM:
	case QG_OP_SOFT_MAX:
	case QG_OP_GLU:
		return true;
	default:
		return false;
	}
}

/* X has T's rows at T's places: the same bytes, row count and row strides (its rows may be longer). */
static bool same_rows(const struct qg_tensor *x, const struct qg_tensor *t)
{
	for (int i = 1; i < QG_MAX_DIMS; i++)
		if (x->ne[i] != t->ne[i] || x->nb[i] != t->nb[i])
			return false;
	return x->data == t->data;
}

/*
 * True if node B, computed after node A on the same thread with no barrier
 * between, is right: both work by rows (by_rows) split over the same
 * threads, so that each thread's rows of B are its own rows of A; every
 * source of B that touches A's result is A's rows; B writes nothing A
 * reads, and over A's result only A's rows.  Then B may share A's step
 * (the decode step's RMS_NORM and MUL by the norm's weights; a residual
 * ADD and the next RMS_NORM).
 */
static bool row_local(const struct cpu_node *a, const struct touch *ta, const struct cpu_node *b,
		      const struct touch *tb)
{
	const struct qg_tensor *ta_t = a->t, *tb_t = b->t;

	if (!by_rows(ta_t->op) || !by_rows(tb_t->op) || a->nth != b->nth || a->phases != 1 || b->phases != 1)
		return false;
	for (int i = 1; i < QG_MAX_DIMS; i++)
		if (ta_t->ne[i] != tb_t->ne[i])
			return false;
	for (int i = 0; i < QG_MAX_SRC; i++) {
		const struct qg_tensor *x = tb_t->src[i];
		if (x && spans_meet(ta->w, span_of(x)) && !same_rows(x, ta_t))
			return false;
	}
	for (int i = 0; i < ta->n; i++)
		if (spans_meet(tb->w, ta->r[i]))
			return false;
	return !spans_meet(tb->w, ta->w) || same_rows(tb_t, ta_t);
}

/* True if MUL_MATs A and B read one activation tensor (the same bytes, shape and strides) in one form. */
static bool same_activation(const struct qg_tensor *a, uintptr_t fa, const struct qg_tensor *b, uintptr_t fb)
{
	const struct qg_tensor *x = a->src[1], *y = b->src[1];

	return fa && fa == fb && x->data == y->data && x->type == y->type &&
	       memcmp(x->ne, y->ne, sizeof x->ne) == 0 && memcmp(x->nb, y->nb, sizeof x->nb) == 0;
}


/*
 * Put P's nodes in steps (its data in place: the steps follow from which
 * bytes each node reads and writes).  A node goes into the earliest step
 * after every step holding a node of its window that it touches
 * (nodes_touch) -- or into the step of one it follows by rows
 * (row_local) -- and after every step of a node that has left the window;
 * so a node never shares a step with one it depends on, or with one that
 * reads what it overwrites, and its dependencies run in earlier steps.  A
 * MUL_MAT that finds one of its activation in a step at or after that one
 * joins it and reads its scratch.  A MUL_MAT of a small activation on
 * more than one thread is solo (cpu_node.solo); it shares only with a
 * solo one of at least its threads.  Scratch: each node of a step has its
 * own (the scratch is reused from step to step), grown to fit.
 * NODE_STEPS: a step per node, nothing shared.  0 or -ENOMEM.
 */
static int schedule(struct cpu_plan *p, bool node_steps)
{
	const size_t n = p->n;
	size_t *level = calloc(n ? n : 1, sizeof *level);
	size_t *used = calloc(n ? n : 1, sizeof *used);	/* scratch per step */
	uintptr_t *form = calloc(n ? n : 1, sizeof *form);
	struct touch *tc = calloc(n ? n : 1, sizeof *tc);
	size_t n_steps = 0, floor = 0, need = p->scratch_size;
	int r = -ENOMEM;

	if (!level || !used || !form || !tc)
		goto out;
	for (size_t j = 0; j < n; j++)
		touch_of(p->nodes[j].t, &tc[j]);
	for (size_t j = 0; j < n; j++) {
		struct cpu_node *nd = &p->nodes[j];
		const size_t w0 = j > STEP_WINDOW ? j - STEP_WINDOW : 0;

		form[j] = nd->phases > 1 ? qg_op_act_form(nd->t) : 0;
		nd->share = -1;
		nd->solo = !node_steps && nd->t->op == QG_OP_MUL_MAT && nd->phases == 2 && nd->nth > 1 &&
			   qg_tensor_nelements(nd->t->src[1]) <= SOLO_QUANT_MAX;
		if (w0 > 0 && level[w0 - 1] + 1 > floor)
			floor = level[w0 - 1] + 1;	/* that one has left the window */
		size_t lv = node_steps ? j : floor;
		for (size_t i = w0; i < j && !node_steps; i++) {
			if (level[i] + 1 <= lv || !nodes_touch(&tc[i], &tc[j]))
				continue;
			/* after I on the same thread, by rows: in I's step (after it: graph order within a step) */
			lv = row_local(&p->nodes[i], &tc[i], nd, &tc[j]) ? (level[i] > lv ? level[i] : lv) : level[i] + 1;
		}
		for (size_t i = w0; i < j && form[j] && !node_steps; i++) {
			const struct cpu_node *o = &p->nodes[i];
			/* a solo node reads the activation its own thread quantized: the other has that thread too */
			if (level[i] >= lv && o->share < 0 && o->solo == nd->solo && (!nd->solo || o->nth >= nd->nth) &&
			    same_activation(o->t, form[i], nd->t, form[j])) {
				nd->share = (long)i;
				lv = level[i];
				break;
			}
		}
		size_t mine = 0;
		if (nd->share < 0) {
			nd->slot = nd->solo ? (qg_op_scratch_size(nd->t, 1) + 63) & ~(size_t)63 : 0;
			mine = nd->solo ? nd->slot * (size_t)nd->nth
					: (qg_op_scratch_size(nd->t, nd->nth) + 63) & ~(size_t)63;
			while (used[lv] && used[lv] + mine > STEP_SCRATCH_MAX)
				lv++;
			nd->scratch_off = used[lv];
			used[lv] += mine;
			if (used[lv] > need)
				need = used[lv];
		}
		level[j] = lv;
		if (lv + 1 > n_steps)
			n_steps = lv + 1;
	}
	/* the order: by step, by graph order within one (a counting sort) */
	for (size_t l = 0; l < n_steps; l++)
		p->steps[l] = (struct cpu_step){ .done_after = p->n_graph_nodes };
	for (size_t j = 0; j < n; j++) {
		struct cpu_step *st = &p->steps[level[j]];
		const int phases = p->nodes[j].solo ? 1 : p->nodes[j].phases;
		st->n++;
		if (phases > st->phases)
			st->phases = phases;
	}
	for (size_t l = 0, at = 0; l < n_steps; l++) {
		p->steps[l].first = at;
		at += p->steps[l].n;
		p->steps[l].n = 0;
	}
	for (size_t j = 0; j < n; j++) {
		struct cpu_step *st = &p->steps[level[j]];
		p->order[st->first + st->n++] = j;
		p->nodes[j].step = level[j];
	}
	/* done after step L: every graph node before the first one of a later step */
	for (size_t l = n_steps, first = p->n_graph_nodes; l-- > 0;) {
		p->steps[l].done_after = first;
		const struct cpu_step *st = &p->steps[l];
		for (size_t k = st->first; k < st->first + st->n; k++)
			if (p->nodes[p->order[k]].index < first)
				first = p->nodes[p->order[k]].index;
	}
	if (need > p->scratch_size) {
		void *s = aligned_alloc(64, need);
		if (!s)
			goto out;
		free(p->scratch);
		p->base.bytes += need - p->scratch_size;
		p->scratch = s;
		p->scratch_size = need;
	}
	p->n_steps = n_steps;
	r = 0;
out:
	free(level);
	free(used);
	free(form);
	free(tc);
	return r;
}

static int cpu_plan_create(struct qg_backend *b, struct qg_graph *g, struct qg_plan **out)
{
	struct cpu_backend *cb = cpu_of(b);
	struct cpu_plan *p;

	pthread_mutex_lock(&cb->lock);
	int r = plan_make(cb, g, &p);
	pthread_mutex_unlock(&cb->lock);
	*out = r ? NULL : &p->base;
	return r;
}

static int cpu_plan_update(struct qg_backend *b, struct qg_plan *base, struct qg_graph *g)
{
	struct cpu_plan *p = (struct cpu_plan *)base;

	(void)b;
	if (!plan_matches(p, g))
		return -EINVAL;
	plan_rebind(p, g);
	return 0;
}

static void cpu_plan_free(struct qg_backend *b, struct qg_plan *base)
{
	(void)b;
	plan_free((struct cpu_plan *)base);
}

/* --- batches ------------------------------------------------------------- */

/*
 * A batch: plans of one structure (plans_align) run in lockstep, step by
 * step, as one run on the pool.  Their nodes touch disjoint bytes except
 * weights that none of them writes (batch_make checks), so a step of the
 * batch holds the step's nodes of every member.  A MUL_MAT that every
 * member has as a solo one on the same weights is a group: one product
 * over all the members' activation rows (qg_op_mul_mat_group), which
 * reads the weights once.  Each member keeps its own outcome: an error,
 * a cancel or a deadline stops that member at the end of a step (the
 * last thread at the barrier takes it out of LIVE), and the others go on.
 */

/* A group's activations hold at most this many values in all: each of its threads gathers and quantizes them. */
#define GROUP_QUANT_MAX 65536

struct cpu_group {
	bool on;
	long share;		/* the group (a node index of the plans) whose quantized rows it reads, or -1 */
	size_t slot;		/* a thread's gathered and quantized rows: at SLOT_OFF + ITH * SLOT of the scratch */
	size_t slot_off;
	size_t y_off, y_bytes;	/* the product, shared by the threads */
};

struct cpu_batch {
	size_t n;
	struct cpu_plan *p[QG_CPU_BATCH_MAX];
	struct qg_run *run[QG_CPU_BATCH_MAX];
	struct cpu_group *group;	/* per node (the members number theirs alike) */
	char *scratch;			/* the groups' (cpu_backend.bscratch) */
	/*
	 * The members still running, a bit each: written only by the last
	 * thread at a barrier, before it releases the others (bar_gen's
	 * release and acquire order it), read by every thread after.
	 */
	uint32_t live;
	_Atomic int err[QG_CPU_BATCH_MAX];	/* each member's first node error */
	_Atomic long err_node[QG_CPU_BATCH_MAX];
	size_t done_after;		/* the graph nodes done at the end of this step (thread 0, before its barrier) */
};

/* Keep member B's first node error. */
static void note_member_error(struct cpu_batch *bt, size_t b, int e, size_t node)
{
	int zero = 0;

	if (atomic_compare_exchange_strong_explicit(&bt->err[b], &zero, e, memory_order_relaxed,
						    memory_order_relaxed))
		atomic_store_explicit(&bt->err_node[b], (long)node, memory_order_relaxed);
}

/*
 * decide() for a batch, member by member: one with a node error stops
 * with it at the end of its step, and after a step that another follows,
 * one cancelled or past its deadline stops too.  A member that stops gets
 * its outcome now.  Nonzero once no member runs on.
 */
static int decide_batch(struct cpu_batch *bt, bool end, bool more)
{
	if (!end)
		return 0;
	for (size_t b = 0; b < bt->n; b++) {
		if (!(bt->live >> b & 1))
			continue;
		struct qg_run *run = bt->run[b];
		int st = atomic_load_explicit(&bt->err[b], memory_order_relaxed);
		if (!st && more && atomic_load_explicit(&run->cancel, memory_order_acquire))
			st = -ECANCELED;
		if (!st && more && run->deadline_ns && qg_stamp_ns() > run->deadline_ns)
			st = -ETIMEDOUT;
		if (!st)
			continue;
		bt->live &= ~(UINT32_C(1) << b);
		run->status = st;
		run->nodes_done = bt->done_after;
		long bad = atomic_load_explicit(&bt->err_node[b], memory_order_relaxed);
		if (atomic_load_explicit(&bt->err[b], memory_order_relaxed)) {
			run->failed_node = bad;
			if ((size_t)bad < run->nodes_done)
				run->nodes_done = (size_t)bad;
		}
	}
	return bt->live == 0;
}

/* --- the barrier --------------------------------------------------------- */

/*
 * The decision the last thread at a barrier takes: the run's status if it
 * stops here, 0 to go on.  A run stops only where a step ends (END): a
 * node's error lets the other phases of its step finish, so that every
 * node of the step is done (the failed one with its error) when the run
 * stops.  MORE: another step follows, and cancel and the deadline are
 * looked at.
 */
static int decide(struct cpu_backend *cb, const struct qg_run *run, bool end, bool more)
{
	if (!end)
		return 0;
	int e = atomic_load_explicit(&cb->err, memory_order_relaxed);
	if (e)
		return e;
	if (!more)
		return 0;
	/* acquire: pairs with qg_run_cancel's release */
	if (atomic_load_explicit(&run->cancel, memory_order_acquire))
		return -ECANCELED;
	if (run->deadline_ns && qg_stamp_ns() > run->deadline_ns)
		return -ETIMEDOUT;
	return 0;
}

/*
 * Wait until all NTH threads have arrived; returns the stop decision
 * (0: go on).  A sense-counting barrier on two words:
 *
 * - Each thread reads GEN before it arrives (the relaxed load cannot move
 *   after the arrival: that is an acq_rel RMW, whose release half keeps
 *   earlier accesses before it).  GEN cannot move on before this thread
 *   arrives, so the value read is this barrier's.
 * - Arriving is a fetch_add on COUNT with acq_rel.  The RMWs on COUNT form
 *   a release sequence, so the last arriver's acquire sees everything
 *   every thread wrote before arriving: their shares of the results and
 *   their errors in ERR.
 * - The last arriver resets COUNT, writes STOP and bumps GEN with release;
 *   the others' acquire load of GEN then sees all of that, and through
 *   the last arriver, everything every thread wrote before the barrier.
 *   That is what the next phase needs on ARM's weak memory model, where
 *   plain stores from another core may otherwise be seen late or out of
 *   order.  COUNT's reset is seen before anyone arrives at the next
 *   barrier, since arriving there needs the new GEN first.
 * - A waiter that spun long enough sleeps on GEN.  The same full-fence
 *   pattern as an event's (event.c, publish): the waiter adds itself to
 *   BAR_SLEEPERS, fences, and re-reads GEN before sleeping; the last
 *   arriver bumps GEN, fences and reads BAR_SLEEPERS before deciding to
 *   wake.  One of the two sees the other.
 *
 * STOP is read after the barrier and written only by the last arriver of
 * a later one, which waits for every thread to arrive first: every
 * thread reads the value written at this barrier.
 */
static int barrier(struct cpu_backend *cb, const struct qg_run *run, bool end, bool more)
{
	const uint32_t gen = atomic_load_explicit(&cb->bar_gen, memory_order_relaxed);

	if (atomic_fetch_add_explicit(&cb->bar_count, 1, memory_order_acq_rel) == (uint32_t)cb->nth - 1) {
		atomic_store_explicit(&cb->bar_count, 0, memory_order_relaxed);
		int stop = cb->job_batch ? decide_batch(cb->job_batch, end, more) : decide(cb, run, end, more);
		atomic_store_explicit(&cb->stop, stop, memory_order_relaxed);
		atomic_store_explicit(&cb->bar_gen, gen + 1, memory_order_release);
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&cb->bar_sleepers, memory_order_relaxed))
			qg_futex_wake(&cb->bar_gen, false);
	} else {
		uint64_t start = 0;
		for (unsigned spins = 0; atomic_load_explicit(&cb->bar_gen, memory_order_acquire) == gen; spins++) {
			if (spins % 64 != 63) {
				qg_cpu_relax();
				continue;
			}
			uint64_t now = qg_stamp_ns();
			if (!start)
				start = now;
			if (now - start < cb->bar_spin_ns) {
				/*
				 * Past a short spin the one it waits for may have lost its
				 * core to another process: offer this one (a yield with
				 * nothing else to run costs a system call, no sleep).
				 */
				if (now - start < BARRIER_SPIN_OVER_NS)
					qg_cpu_relax();
				else
					sched_yield();
				continue;
			}
			atomic_fetch_add_explicit(&cb->bar_sleepers, 1, memory_order_relaxed);
			atomic_thread_fence(memory_order_seq_cst);
			if (atomic_load_explicit(&cb->bar_gen, memory_order_relaxed) == gen)
				qg_futex_wait(&cb->bar_gen, gen, 0, false);
			atomic_fetch_sub_explicit(&cb->bar_sleepers, 1, memory_order_relaxed);
		}
	}
	return atomic_load_explicit(&cb->stop, memory_order_relaxed);
}

/* Keep the first node error (ERR) and its node. */
static void note_error(struct cpu_backend *cb, int e, size_t node)
{
	int zero = 0;

	if (atomic_compare_exchange_strong_explicit(&cb->err, &zero, e, memory_order_relaxed, memory_order_relaxed))
		atomic_store_explicit(&cb->err_node, (long)node, memory_order_relaxed);
}

/*
 * Thread ITH's part of phase PH of node ND of P: its error, or 0.  A node
 * with fewer phases sits out the last ones; one that shares another's
 * activation sits out phase 0 and reads the other's scratch in phase 1; a
 * solo one does all its work in phase 0.
 */
static int node_phase(const struct cpu_plan *p, const struct cpu_node *nd, int ph, int ith)
{
	const struct cpu_node *q = nd->share >= 0 ? &p->nodes[nd->share] : nd;
	char *scratch = p->scratch;

	if (ith >= nd->nth)
		return 0;
	if (nd->solo) {
		/* this thread's own activation, then its share of the product */
		char *mine = scratch + q->scratch_off + (size_t)ith * q->slot;
		int e = 0;
		if (ph > 0)
			return 0;
		if (nd->share < 0)
			e = qg_op_compute(nd->t, 0, 0, 1, mine);
		return e ? e : qg_op_compute(nd->t, 1, ith, nd->nth, mine);
	}
	if (ph >= nd->phases || (ph == 0 && nd->share >= 0))
		return 0;
	return qg_op_compute(nd->t, ph, ith, nd->nth, scratch + q->scratch_off);
}

/*
 * Thread ITH's part of a pooled run of P: each step's phases, every node
 * of the step in each (a node with fewer phases sits out the last ones;
 * a node that shares another's activation sits out phase 0 and reads the
 * other's scratch in phase 1, after the barrier that ends phase 0).
 * Everything it needs from P is read before the barrier that ends it: the
 * caller may free P as soon as the last thread has bumped DONE.
 */
static void run_share(struct cpu_backend *cb, struct cpu_plan *p, const struct qg_run *run, int ith)
{
	const size_t n_steps = p->n_steps;

	for (size_t l = 0; l < n_steps; l++) {
		const struct cpu_step st = p->steps[l];
		for (int ph = 0; ph < st.phases; ph++) {
			for (size_t k = st.first; k < st.first + st.n; k++) {
				const struct cpu_node *nd = &p->nodes[p->order[k]];
				int e = node_phase(p, nd, ph, ith);
				if (e)
					note_error(cb, e, nd->index);
			}
			bool last = ph == st.phases - 1;
			if (last && ith == 0)
				atomic_store_explicit(&cb->nodes_done, st.done_after, memory_order_relaxed);
			if (barrier(cb, run, last, l + 1 < n_steps))
				return;
		}
	}
}

/* Thread ITH's rows of group J of batch BT over its LIVE members. */
static void group_phase(struct cpu_batch *bt, size_t j, uint32_t live, int ith)
{
	const struct cpu_group *g = &bt->group[j];
	const struct qg_tensor *t[QG_CPU_BATCH_MAX];
	const char *quant = NULL;
	size_t n = 0;

	for (size_t b = 0; b < bt->n; b++)
		if (live >> b & 1)
			t[n++] = bt->p[b]->nodes[j].t;
	if (g->share >= 0) {
		const struct cpu_group *q = &bt->group[g->share];
		quant = bt->scratch + q->slot_off + (size_t)ith * q->slot;
	}
	int e = qg_op_mul_mat_group(t, n, ith, bt->p[0]->nodes[j].nth, bt->scratch + g->slot_off + (size_t)ith * g->slot,
				    quant, (float *)(bt->scratch + g->y_off));
	for (size_t b = 0; e && b < bt->n; b++)
		if (live >> b & 1)
			note_member_error(bt, b, e, bt->p[b]->nodes[j].index);
}

/*
 * Thread ITH's part of a batch: run_share over every live member at once,
 * a group's product once for all.  The members' plans are alike, so
 * P[0]'s steps and order are every member's.
 */
static void run_batch_share(struct cpu_backend *cb, struct cpu_batch *bt, int ith)
{
	const struct cpu_plan *p0 = bt->p[0];
	const size_t n_steps = p0->n_steps;

	for (size_t l = 0; l < n_steps; l++) {
		const struct cpu_step st = p0->steps[l];
		for (int ph = 0; ph < st.phases; ph++) {
			const uint32_t live = bt->live;
			for (size_t k = st.first; k < st.first + st.n; k++) {
				const size_t j = p0->order[k];
				if (bt->group[j].on) {
					if (ph == 0 && ith < p0->nodes[j].nth)
						group_phase(bt, j, live, ith);
					continue;
				}
				for (size_t b = 0; b < bt->n; b++) {
					if (!(live >> b & 1))
						continue;
					const struct cpu_node *nd = &bt->p[b]->nodes[j];
					int e = node_phase(bt->p[b], nd, ph, ith);
					if (e)
						note_member_error(bt, b, e, nd->index);
				}
			}
			bool last = ph == st.phases - 1;
			if (last && ith == 0)
				bt->done_after = st.done_after;
			if (barrier(cb, NULL, last, l + 1 < n_steps))
				return;
		}
	}
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
			run_batch_share(cb, cb->job_batch, a.ith);
		else
			run_share(cb, cb->job_plan, cb->job_run, a.ith);
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
	run_share(cb, p, run, 0);
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
		int e = schedule(p, cb->node_steps);
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

/* True if plans A and B run in lockstep: the same nodes, steps and order, each node split and shared alike. */
static bool plans_align(const struct cpu_plan *a, const struct cpu_plan *b)
{
	if (a->n != b->n || a->n_steps != b->n_steps || a->n_graph_nodes != b->n_graph_nodes ||
	    memcmp(a->order, b->order, a->n * sizeof *a->order) != 0)
		return false;
	for (size_t l = 0; l < a->n_steps; l++) {
		const struct cpu_step *x = &a->steps[l], *y = &b->steps[l];
		if (x->first != y->first || x->n != y->n || x->phases != y->phases || x->done_after != y->done_after)
			return false;
	}
	for (size_t j = 0; j < a->n; j++) {
		const struct cpu_node *x = &a->nodes[j], *y = &b->nodes[j];
		if (x->index != y->index || x->t->op != y->t->op || x->nth != y->nth || x->phases != y->phases ||
		    x->solo != y->solo || x->share != y->share)
			return false;
	}
	return true;
}

/* True if aligned plans A and B have a matrix product that may be computed as one (the same weights). */
static bool shares_weights(const struct cpu_plan *a, const struct cpu_plan *b)
{
	for (size_t j = 0; j < a->n; j++)
		if (a->nodes[j].t->op == QG_OP_MUL_MAT && a->nodes[j].phases == 2 &&
		    qg_op_mul_mat_joins(a->nodes[j].t, b->nodes[j].t))
			return true;
	return false;
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The bytes P's nodes write, sorted and merged into disjoint spans, in *OUT (freed by the caller).  Their count, or -ENOMEM. */
static long plan_writes(const struct cpu_plan *p, struct span **out)
{
	struct span *w = malloc((p->n ? p->n : 1) * sizeof *w);
	size_t m = 0;

	*out = w;
	if (!w)
		return -ENOMEM;
	for (size_t j = 0; j < p->n; j++)
		w[j] = span_of(p->nodes[j].t);
	qsort(w, p->n, sizeof *w, span_cmp);
	for (size_t j = 0; j < p->n; j++) {
		if (m && w[j].lo <= w[m - 1].hi)
			w[m - 1].hi = w[j].hi > w[m - 1].hi ? w[j].hi : w[m - 1].hi;
		else
			w[m++] = w[j];
	}
	return (long)m;
}

/* True if S meets one of the N sorted disjoint spans W: only the last that starts before S ends can. */
static bool meets_any(const struct span *w, size_t n, struct span s)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w[mid].lo < s.hi)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && w[lo - 1].hi > s.lo;
}

/* True if no node of P reads or writes bytes among the N spans W (another plan's writes). */
static bool clear_of(const struct cpu_plan *p, const struct span *w, size_t n)
{
	struct touch tc;

	for (size_t j = 0; j < p->n; j++) {
		touch_of(p->nodes[j].t, &tc);
		if (meets_any(w, n, tc.w))
			return false;
		for (int i = 0; i < tc.n; i++)
			if (meets_any(w, n, tc.r[i]))
				return false;
	}
	return true;
}

/*
 * Which nodes of BT's members are groups, and where each group's scratch
 * lies (in each step, a slot per thread and the product's rows).  A
 * MUL_MAT is a group when every member's reads the same weights with a
 * small activation; one that reads another's quantized activation is a
 * group exactly when that one is (if that one is a group and this one
 * cannot be, neither is: the member's own scratch must then hold it).
 * The bytes of scratch in all, or 0 when there is no group.
 */
static size_t batch_groups(struct cpu_batch *bt)
{
	const struct cpu_plan *p0 = bt->p[0];
	size_t need = 0;

	for (size_t j = 0; j < p0->n; j++) {
		const struct cpu_node *nd = &p0->nodes[j];
		struct cpu_group *g = &bt->group[j];
		int64_t rows = 0;
		bool ok = nd->t->op == QG_OP_MUL_MAT && nd->phases == 2;
		for (size_t b = 0; ok && b < bt->n; b++) {
			const struct qg_tensor *t = bt->p[b]->nodes[j].t;
			ok = qg_op_mul_mat_joins(nd->t, t);
			rows += ok ? t->src[1]->ne[1] : 0;
		}
		ok = ok && rows * nd->t->src[0]->ne[0] <= GROUP_QUANT_MAX;
		*g = (struct cpu_group){ .on = ok, .share = nd->share };
		/* a group reads the slot its own thread filled in the other: that one must have the thread */
		if (g->share >= 0 && p0->nodes[g->share].nth < nd->nth)
			g->share = -1;
		if (ok)
			g->slot = qg_op_mul_mat_group_slot(nd->t, rows, &g->y_bytes);
		g->on = ok && g->slot > 0;
	}
	/* a node that runs alone and reads another's activation needs that one alone too */
	for (size_t j = 0; j < p0->n; j++)
		if (p0->nodes[j].share >= 0 && !bt->group[j].on)
			bt->group[p0->nodes[j].share].on = false;
	for (size_t j = 0; j < p0->n; j++)
		if (bt->group[j].share >= 0 && !bt->group[bt->group[j].share].on)
			bt->group[j].on = false;
	for (size_t l = 0; l < p0->n_steps; l++) {
		const struct cpu_step *st = &p0->steps[l];
		size_t used = 0;
		for (size_t k = st->first; k < st->first + st->n; k++) {
			const size_t j = p0->order[k];
			struct cpu_group *g = &bt->group[j];
			if (!g->on)
				continue;
			if (g->share >= 0)
				g->slot = 0;	/* it reads the other's */
			g->slot_off = used;
			used += g->slot * (size_t)p0->nodes[j].nth;
			g->y_off = used;
			used += g->y_bytes;
		}
		if (used > need)
			need = used;
	}
	return need;
}

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
	run_batch_share(cb, bt, 0);
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
		    (bt.n && (p->key != bt.p[0]->key || !plans_align(bt.p[0], p) || !shares_weights(bt.p[0], p))))
			continue;
		if ((nw[bt.n] = plan_writes(p, &w[bt.n])) < 0) {
			free(w[bt.n]);
			w[bt.n] = NULL;
			continue;
		}
		bool clear = true;
		for (size_t m = 0; m < bt.n && clear; m++)
			clear = clear_of(p, w[m], (size_t)nw[m]) && clear_of(bt.p[m], w[bt.n], (size_t)nw[bt.n]);
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
	if (bt.n >= 2 && (bt.group = calloc(bt.p[0]->n, sizeof *bt.group))) {
		size_t need = batch_groups(&bt);
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
	if (cb->cached && cb->cached->g == g && plan_matches(cb->cached, g)) {
		plan_rebind(cb->cached, g);	/* the data may have moved: checked again */
	} else {
		plan_free(cb->cached);
		cb->cached = NULL;
		r = plan_make(cb, g, &cb->cached);
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
	plan_free(cb->cached);
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
