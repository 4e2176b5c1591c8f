/*
 * backend.h - backends: what runs a graph.
 *
 * A backend takes a graph whose tensors have their data in place and
 * computes its nodes in order.  The fast path is a plan: made once for a
 * graph (checks, threads per node, scratch), updated when only the data
 * changed (the same structure placed again), computed as often as wanted,
 * freed.  graph_compute is the one-shot form (the CPU backend keeps the
 * plan of the last graph it ran and reuses it when it runs that graph
 * again).
 *
 * Every run takes an optional struct qg_run: a cancel flag another thread
 * may set, a deadline, the events to record when the run ends, and the
 * outcome.  A run never aborts: it returns 0 or -errno, which is also the
 * status its events are recorded with, however it ended (so waiters on a
 * graph that failed or was cancelled learn it instead of waiting forever).
 *
 * Like buffer types (buffer.h), a backend is an interface table plus a
 * context (backend-impl.h); callers use the checked wrappers below.
 * Backends: the CPU backend (backend-cpu.h).
 */
#ifndef QG_BACKEND_H
#define QG_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "event.h"
#include "graph.h"

struct qg_backend;
struct qg_plan;

/*
 * One run's controls and outcome.  Zero it (or qg_run_init) before a run;
 * the controls are read, the outcome written.
 */
struct qg_run {
	/* Non-zero: stop at the next node boundary with -ECANCELED.  Any thread may set it (qg_run_cancel). */
	_Atomic int cancel;
	/* CLOCK_MONOTONIC nanoseconds (qg_stamp_ns, stamp.h); past it at a node boundary: -ETIMEDOUT.  0: none. */
	uint64_t deadline_ns;
	/*
	 * The clock when the run was handed over, for a caller that has just
	 * read it: the deadline is checked against it before the first node,
	 * one clock read saved, which a tiny graph's run notices.
	 * 0: the backend reads the clock.
	 */
	uint64_t start_ns;
	/* Events recorded when the run ends, with its status: at RECORD_SEQ[i], or each one's next number if NULL. */
	struct qg_event *const *record;
	const uint32_t *record_seq;
	size_t n_record;
	/* outcome */
	int status;		/* what the run returned */
	long failed_node;	/* index in the graph's nodes of the node that failed (or was refused), or -1 */
	size_t nodes_done;	/* nodes finished (all of them when STATUS is 0) */
	bool pooled;		/* true if the run woke the worker pool, false if it ran on the caller alone */
};

/* Zero R: no cancel, no deadline, no events. */
void qg_run_init(struct qg_run *r);
/* Ask the run R to stop at its next node boundary (any thread, any time). */
void qg_run_cancel(struct qg_run *r);

/* The backend's name ("cpu"). */
const char *qg_backend_name(const struct qg_backend *b);
/* Free B (waits for nothing: no run may be in progress).  NULL is fine. */
void qg_backend_free(struct qg_backend *b);

/*
 * A plan for graph G in *OUT.  0, or -EINVAL (a node B cannot run: a bad
 * op, type or shape; NULL arguments), -ENOMEM, -ENOTSUP (B has no plans).
 * G must outlive the plan.
 */
int qg_backend_graph_plan_create(struct qg_backend *b, struct qg_graph *g, struct qg_plan **out);
/*
 * Point plan P at graph G, which has the structure P was made for (the
 * same nodes, ops, types and shapes) and possibly new data.  0, or -EINVAL
 * when the structure differs (make a new plan) or P is not B's.
 */
int qg_backend_graph_plan_update(struct qg_backend *b, struct qg_plan *p, struct qg_graph *g);
/*
 * Run plan P with RUN's controls (RUN may be NULL).  0, or -errno: the
 * first node error (-ERANGE from GET_ROWS, -EINVAL for a node without its
 * data), -ECANCELED, -ETIMEDOUT.  RUN's events are recorded with that
 * status in every case.
 */
int qg_backend_graph_plan_compute(struct qg_backend *b, struct qg_plan *p, struct qg_run *run);
/*
 * Run plans PLANS[0..N) of B, each with its run RUNS[i] (none NULL), as
 * qg_backend_graph_plan_compute would one after another, except that
 * plans of one structure whose matrix products read the same weights may
 * run as one batch: each such product then reads the weights once for
 * every plan.  Each plan's results are the bits it computes alone, each
 * run keeps its own controls (a cancel or a deadline stops that plan
 * only, at a step's end) and gets its own outcome and events.  Plans that
 * cannot join the first one run alone, in order, after the batch.
 * Returns the number that ran as one batch (1 when none joined, 0 when N
 * is 0 or an argument is bad, every run then failed with -EINVAL).
 */
size_t qg_backend_graph_plan_compute_batch(struct qg_backend *b, struct qg_plan *const *plans,
					   struct qg_run *const *runs, size_t n);
/*
 * A key for batching plan P: plans that may run as one batch have equal
 * nonzero keys (the converse need not hold: the batch checks).  0 when B
 * does not batch.  Call it from the thread that computes P.
 */
uint64_t qg_backend_graph_plan_batch_key(const struct qg_backend *b, const struct qg_plan *p);
/* Bytes of memory plan P holds (its tables and scratch; not the graph's), or 0 for NULL. */
size_t qg_backend_graph_plan_bytes(const struct qg_plan *p);
/* Free plan P of B.  NULL is fine. */
void qg_backend_graph_plan_free(struct qg_backend *b, struct qg_plan *p);
/* Plan (or reuse the plan of the last run of G), then compute G, as above. */
int qg_backend_graph_compute(struct qg_backend *b, struct qg_graph *g, struct qg_run *run);

/* True if B can run node T (its op, types and shapes). */
bool qg_backend_supports_op(const struct qg_backend *b, const struct qg_tensor *t);
/* True if B can read and write buffers of type BUFT directly. */
bool qg_backend_supports_buft(const struct qg_backend *b, const struct qg_buft *buft);
/* True if B would rather run T itself even though its weights live elsewhere (default false). */
bool qg_backend_offload_op(const struct qg_backend *b, const struct qg_tensor *t);
/* Wait until the work given to B is done (a synchronous backend returns at once). */
void qg_backend_synchronize(struct qg_backend *b);

/*
 * Events.  event_new makes one on the heap (at sequence number 0, no
 * mirror); an event in memory of the caller's own (qg_event_init) works
 * with the other calls too.
 */
int qg_backend_event_new(struct qg_backend *b, struct qg_event **out);
void qg_backend_event_free(struct qg_backend *b, struct qg_event *ev);
/*
 * Record EV once the work given to B so far is done, with the status of
 * the last run B finished (0 if none); *SEQ (if not NULL) gets the number
 * recorded.  0 or -errno.
 */
int qg_backend_event_record(struct qg_backend *b, struct qg_event *ev, uint32_t *seq);
/*
 * Make B's next work wait until EV reaches SEQ, for at most TIMEOUT_NS
 * (negative: no limit).  A synchronous backend waits here, on the
 * calling thread.  The status recorded with EV, or -ETIMEDOUT.
 */
int qg_backend_event_wait(struct qg_backend *b, struct qg_event *ev, uint32_t seq, int64_t timeout_ns);
/* Wait on the calling thread until EV reaches SEQ (TIMEOUT_NS as above).  The status, or -ETIMEDOUT. */
int qg_backend_event_synchronize(struct qg_backend *b, struct qg_event *ev, uint32_t seq, int64_t timeout_ns);

#endif /* QG_BACKEND_H */
