/*
 * backend-cpu-impl.h - what the three files of the CPU backend share, and
 * nothing else includes: its plans and steps (backend-cpu-plan.c), a
 * thread's share of a run and the barrier (backend-cpu-share.c), and the
 * pool and the interface (backend-cpu.c).
 */
#ifndef QG_BACKEND_CPU_IMPL_H
#define QG_BACKEND_CPU_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend-cpu.h"
#include "backend-impl.h"
#include "graph.h"

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
	/* set by qg_cpu_plan_schedule(): */
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

/* Bytes [lo, hi) a tensor's data spans. */
struct span {
	uintptr_t lo, hi;
};

/*
 * A batch: plans of one structure (qg_cpu_plans_align) run in lockstep,
 * step by step, as one run on the pool.  Their nodes touch disjoint bytes
 * except weights that none of them writes (qg_cpu_plan_clear_of), so a step of the
 * batch holds the step's nodes of every member.  A MUL_MAT that every
 * member has as a solo one on the same weights is a group: one product
 * over all the members' activation rows (qg_op_mul_mat_group_prepare,
 * _part), which reads the weights once.  Each member keeps its own outcome: an error,
 * a cancel or a deadline stops that member at the end of a step (the
 * last thread at the barrier takes it out of LIVE), and the others go on.
 */

/* A MUL_MAT computed once for every member of a batch (qg_cpu_batch_groups). */
struct cpu_group {
	bool on;
	long share;		/* the group (a node index of the plans) whose quantized rows it reads, or -1 */
	size_t slot;		/* a thread's gathered and quantized rows: at SLOT_OFF + ITH * SLOT of the scratch */
	size_t slot_off;
	size_t y_off, y_bytes;	/* the product, shared by the threads */
	int parts;		/* the product's parts, which the threads claim as they finish (cpu_batch.claimed) */
};

struct cpu_batch {
	size_t n;
	struct cpu_plan *p[QG_CPU_BATCH_MAX];
	struct qg_run *run[QG_CPU_BATCH_MAX];
	struct cpu_group *group;	/* per node (the members number theirs alike) */
	_Atomic int *claimed;		/* per node: a group's parts claimed so far (a batch runs each once) */
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

/* The backend: its pool, the job it runs, the barrier. */
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

/* --- backend-cpu-plan.c ------------------------------------------------- */

/* Check, split and size G's nodes, each on at most MAX_NTH threads, into a new plan in *OUT.  0, -EINVAL, -ENOMEM. */
int qg_cpu_plan_make(struct qg_graph *g, int max_nth, struct cpu_plan **out);
void qg_cpu_plan_free(struct cpu_plan *p);
/* True if G has the structure P was made for. */
bool qg_cpu_plan_matches(const struct cpu_plan *p, const struct qg_graph *g);
/* Point P at G (same structure): its nodes, data to be checked again. */
void qg_cpu_plan_rebind(struct cpu_plan *p, struct qg_graph *g);
/* P's steps, once its data is where it will be read (NODE_STEPS: a step per node).  0 or -ENOMEM. */
int qg_cpu_plan_schedule(struct cpu_plan *p, bool node_steps);
/* True if plans A and B run in lockstep: the same nodes, steps and order, each node split and shared alike. */
bool qg_cpu_plans_align(const struct cpu_plan *a, const struct cpu_plan *b);
/* True if aligned plans A and B have a matrix product that may be computed as one (the same weights). */
bool qg_cpu_plans_share_weights(const struct cpu_plan *a, const struct cpu_plan *b);
/*
 * The bytes P's nodes write, sorted and merged into disjoint spans, in
 * *OUT (freed by the caller).  Their count, or -ENOMEM.
 */
long qg_cpu_plan_writes(const struct cpu_plan *p, struct span **out);
/* True if no node of P reads or writes bytes among the N spans W (another plan's writes). */
bool qg_cpu_plan_clear_of(const struct cpu_plan *p, const struct span *w, size_t n);
/* BT's groups and their scratch; the bytes of scratch in all, or 0 when there is no group. */
size_t qg_cpu_batch_groups(struct cpu_batch *bt);

/* --- backend-cpu-share.c ------------------------------------------------ */

/*
 * Thread ITH's part of a pooled run of P, or of batch BT: every step's
 * phases, a barrier after each; it returns at the barrier where the run
 * stops, or after the last.
 */
void qg_cpu_run_share(struct cpu_backend *cb, struct cpu_plan *p, const struct qg_run *run, int ith);
void qg_cpu_run_batch_share(struct cpu_backend *cb, struct cpu_batch *bt, int ith);

#endif /* QG_BACKEND_CPU_IMPL_H */
