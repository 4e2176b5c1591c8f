/*
 * backend-impl.h - the backend interface table, for backend
 * implementations and backend.c only (callers use backend.h).
 *
 * Each implementation is one static const table; entries marked optional
 * may be NULL, and the wrappers in backend.c supply the default.  The
 * wrappers check arguments before a table entry sees them, fill in the
 * run's outcome and record the run's events, so that an implementation
 * only computes.
 */
#ifndef QG_BACKEND_IMPL_H
#define QG_BACKEND_IMPL_H

#include "backend.h"

struct qg_backend_i {
	const char *(*name)(const struct qg_backend *b);
	void (*free)(struct qg_backend *b);

	/* optional (all four, or none): plans */
	int (*graph_plan_create)(struct qg_backend *b, struct qg_graph *g, struct qg_plan **out);
	int (*graph_plan_update)(struct qg_backend *b, struct qg_plan *p, struct qg_graph *g);
	/* fills RUN's outcome fields except STATUS; records no events */
	int (*graph_plan_compute)(struct qg_backend *b, struct qg_plan *p, struct qg_run *run);
	void (*graph_plan_free)(struct qg_backend *b, struct qg_plan *p);
	/*
	 * optional: plans PLANS[0..N) with their runs, N >= 2, computed
	 * together where they may be (see qg_backend_graph_plan_compute_batch);
	 * sets each run's outcome fields, STATUS included; records no events.
	 * Returns how many ran as one batch.
	 */
	size_t (*graph_plan_compute_batch)(struct qg_backend *b, struct qg_plan *const *plans,
					   struct qg_run *const *runs, size_t n);
	/* optional (default 0): a plan's batch key (qg_backend_graph_plan_batch_key) */
	uint64_t (*graph_plan_batch_key)(const struct qg_backend *b, const struct qg_plan *p);
	/* as graph_plan_compute */
	int (*graph_compute)(struct qg_backend *b, struct qg_graph *g, struct qg_run *run);

	bool (*supports_op)(const struct qg_backend *b, const struct qg_tensor *t);
	bool (*supports_buft)(const struct qg_backend *b, const struct qg_buft *buft);
	/* optional (default false) */
	bool (*offload_op)(const struct qg_backend *b, const struct qg_tensor *t);
	/* optional (default: nothing, the backend is synchronous) */
	void (*synchronize)(struct qg_backend *b);

	/* optional (default: a host event on the heap, and the qg_event calls; record's status is the last run's) */
	int (*event_new)(struct qg_backend *b, struct qg_event **out);
	void (*event_free)(struct qg_backend *b, struct qg_event *ev);
	int (*event_record)(struct qg_backend *b, struct qg_event *ev, uint32_t *seq);
	int (*event_wait)(struct qg_backend *b, struct qg_event *ev, uint32_t seq, int64_t timeout_ns);
	int (*event_synchronize)(struct qg_backend *b, struct qg_event *ev, uint32_t seq, int64_t timeout_ns);
};

struct qg_backend {
	const struct qg_backend_i *iface;
	void *ctx;
	_Atomic int last_status;	/* the status of the last run the wrappers saw end */
};

/*
 * The head of every plan: the backend it belongs to (checked by the
 * wrappers), and the bytes of memory the plan holds (its implementation
 * sets them, for qg_backend_graph_plan_bytes).
 */
struct qg_plan {
	struct qg_backend *backend;
	size_t bytes;
};

#endif /* QG_BACKEND_IMPL_H */
