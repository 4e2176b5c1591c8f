/*
 * backend-cpu.h - the CPU backend: a pool of worker threads, pinned to the
 * cores it is given, that split each node's rows between them.
 *
 * The calling thread is thread 0 of every run and computes its share; the
 * pool holds the other THREADS - 1.  Worker i (1..THREADS-1) is pinned to
 * the CPU at position i modulo the list's length, so with one thread per
 * listed core the first core is left for the caller (which the backend
 * pins only when asked to, with qg_backend_cpu_pin_thread).  More threads
 * than cores work (the barrier then sleeps sooner than it spins).
 *
 * Idle workers spin for SPIN_US after a run, then sleep on a futex: an
 * idle daemon uses no CPU.  A graph with less work than SMALL_WORK
 * multiply-accumulates (counting one per result element for the ops that
 * are not MUL_MAT) runs on the calling thread alone, without waking the
 * pool: for so little work, waking a sleeping worker (a futex wake, and
 * the scheduler's delay before it runs) and the barriers cost more than
 * another core gives back.
 */
#ifndef QG_BACKEND_CPU_H
#define QG_BACKEND_CPU_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

#define QG_CPU_SMALL_WORK (1u << 18)
#define QG_CPU_SPIN_US 100u
#define QG_CPU_MAX_THREADS 256
/* Plans that qg_backend_graph_plan_compute_batch runs as one batch at most. */
#define QG_CPU_BATCH_MAX 16

struct qg_cpu_opts {
	/* CPU list (cpulist.h) to pin the workers to; NULL: every CPU this process may use, unpinned */
	const char *cpus;
	/* threads, the caller included; 0: one per CPU listed */
	int threads;
	/* graphs under this many MACs run on the caller; 0: QG_CPU_SMALL_WORK; 1: every graph uses the pool */
	uint64_t small_work;
	/* microseconds an idle worker spins before it sleeps; 0: QG_CPU_SPIN_US */
	unsigned spin_us;
	/* a step per node, in graph order, no activation shared: the executor before steps, for comparisons */
	bool node_steps;
};

struct qg_cpu_stats {
	int threads;		/* caller included */
	int ncpus;		/* CPUs listed (or usable when none were) */
	bool pinned;
	uint64_t runs_caller;	/* runs done on the calling thread alone */
	uint64_t runs_pool;	/* runs that used the pool */
	uint64_t wakes;		/* futex wakes of sleeping workers */
	uint64_t plans_made;	/* plans created (graph_compute's cache misses included) */
	int sleeping;		/* workers asleep right now */
	/*
	 * The plan last scheduled (when a run finds its data new): its
	 * computing nodes, the steps they run in on the pool (a barrier after
	 * each phase of a step, none between its nodes), and the MUL_MATs
	 * that read another's quantized activation instead of their own;
	 * the barriers a pooled run of it meets (one after each phase of a
	 * step).
	 */
	size_t plan_nodes, plan_steps, plan_shared, plan_barriers;
	/* batches run (qg_backend_graph_plan_compute_batch), and the plans they held in all */
	uint64_t runs_batched, batched_plans;
};

/*
 * A CPU backend in *OUT (OPTS may be NULL: the defaults).  0, or -EINVAL
 * (a bad CPU list, a listed CPU this process may not run on, THREADS
 * outside 0..QG_CPU_MAX_THREADS), -ERANGE / -E2BIG from the list's
 * parser, -ENOMEM, -EAGAIN (no thread could be made).
 */
int qg_backend_cpu_new(const struct qg_cpu_opts *opts, struct qg_backend **out);
/* True if B is a CPU backend. */
bool qg_backend_is_cpu(const struct qg_backend *b);
/*
 * Pin THREAD, the one that will call B's computes (thread 0 of its runs),
 * to the first CPU of B's list, when B pins its workers.  Called by the
 * thread's creator, so that the pinning holds before the creator goes on.
 * 0 (nothing to do when B does not pin), or -errno.
 */
int qg_backend_cpu_pin_thread(const struct qg_backend *b, pthread_t thread);
/* B's counters.  0, or -EINVAL if B is not a CPU backend. */
int qg_backend_cpu_stats(const struct qg_backend *b, struct qg_cpu_stats *st);

#endif /* QG_BACKEND_CPU_H */
