/*
 * backend.c - the checked wrappers around the backend interface (see
 * backend.h and backend-impl.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "backend-impl.h"

void qg_run_init(struct qg_run *r)
{
	*r = (struct qg_run){ .failed_node = -1 };
	atomic_init(&r->cancel, 0);
}

void qg_run_cancel(struct qg_run *r)
{
	/* release: whatever the canceller wrote first is seen by the thread that stops */
	atomic_store_explicit(&r->cancel, 1, memory_order_release);
}

const char *qg_backend_name(const struct qg_backend *b)
{
	return b ? b->iface->name(b) : "(none)";
}

void qg_backend_free(struct qg_backend *b)
{
	if (b)
		b->iface->free(b);
}

int qg_backend_graph_plan_create(struct qg_backend *b, struct qg_graph *g, struct qg_plan **out)
{
	if (out)
		*out = NULL;
	if (!b || !g || !out)
		return -EINVAL;
	if (!b->iface->graph_plan_create)
		return -ENOTSUP;
	int r = b->iface->graph_plan_create(b, g, out);
	if (r == 0)
		(*out)->backend = b;
	return r;
}

int qg_backend_graph_plan_update(struct qg_backend *b, struct qg_plan *p, struct qg_graph *g)
{
	if (!b || !p || !g || p->backend != b || !b->iface->graph_plan_update)
		return -EINVAL;
	return b->iface->graph_plan_update(b, p, g);
}

/* The end of every run: its outcome in RUN and B, its events recorded with STATUS. */
static int finish(struct qg_backend *b, struct qg_run *run, int status)
{
	if (b)
		atomic_store_explicit(&b->last_status, status, memory_order_relaxed);
	run->status = status;
	for (size_t i = 0; i < run->n_record; i++) {
		struct qg_event *ev = run->record ? run->record[i] : NULL;
		if (!ev)
			continue;
		if (run->record_seq)
			qg_event_record_seq(ev, run->record_seq[i], status);
		else
			qg_event_record(ev, status);
	}
	return status;
}

/* RUN's outcome fields reset; LOCAL stands in for a NULL run. */
static struct qg_run *run_start(struct qg_run *run, struct qg_run *local)
{
	if (!run) {
		qg_run_init(local);
		return local;
	}
	run->status = 0;
	run->failed_node = -1;
	run->nodes_done = 0;
	run->pooled = false;
	return run;
}

int qg_backend_graph_plan_compute(struct qg_backend *b, struct qg_plan *p, struct qg_run *run)
{
	struct qg_run local;

	run = run_start(run, &local);
	if (!b || !p || p->backend != b)
		return finish(b, run, -EINVAL);
	return finish(b, run, b->iface->graph_plan_compute(b, p, run));
}

size_t qg_backend_graph_plan_compute_batch(struct qg_backend *b, struct qg_plan *const *plans,
					   struct qg_run *const *runs, size_t n)
{
	bool ok = b && plans && runs && n > 0;
	size_t joined = 0;

	for (size_t i = 0; ok && i < n; i++)
		ok = plans[i] && runs[i] && plans[i]->backend == b;
	if (!ok) {
		for (size_t i = 0; runs && i < n; i++)
			if (runs[i])
				finish(b, run_start(runs[i], NULL), -EINVAL);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		run_start(runs[i], NULL);
	if (n >= 2 && b->iface->graph_plan_compute_batch) {
		joined = b->iface->graph_plan_compute_batch(b, plans, runs, n);
		for (size_t i = 0; i < n; i++)
			finish(b, runs[i], runs[i]->status);
		return joined;
	}
	for (size_t i = 0; i < n; i++)
		finish(b, runs[i], b->iface->graph_plan_compute(b, plans[i], runs[i]));
	return 1;
}

uint64_t qg_backend_graph_plan_batch_key(const struct qg_backend *b, const struct qg_plan *p)
{
	if (!b || !p || p->backend != b || !b->iface->graph_plan_batch_key)
		return 0;
	return b->iface->graph_plan_batch_key(b, p);
}

size_t qg_backend_graph_plan_bytes(const struct qg_plan *p)
{
	return p ? p->bytes : 0;
}

void qg_backend_graph_plan_free(struct qg_backend *b, struct qg_plan *p)
{
	if (b && p && p->backend == b)
		b->iface->graph_plan_free(b, p);
}

int qg_backend_graph_compute(struct qg_backend *b, struct qg_graph *g, struct qg_run *run)
{
	struct qg_run local;

	run = run_start(run, &local);
	if (!b || !g)
		return finish(b, run, -EINVAL);
	return finish(b, run, b->iface->graph_compute(b, g, run));
}

bool qg_backend_supports_op(const struct qg_backend *b, const struct qg_tensor *t)
{
	return b && t && b->iface->supports_op(b, t);
}

bool qg_backend_supports_buft(const struct qg_backend *b, const struct qg_buft *buft)
{
	return b && buft && b->iface->supports_buft(b, buft);
}

bool qg_backend_offload_op(const struct qg_backend *b, const struct qg_tensor *t)
{
	return b && t && b->iface->offload_op && b->iface->offload_op(b, t);
}

void qg_backend_synchronize(struct qg_backend *b)
{
	if (b && b->iface->synchronize)
		b->iface->synchronize(b);
}

int qg_backend_event_new(struct qg_backend *b, struct qg_event **out)
{
	if (out)
		*out = NULL;
	if (!b || !out)
		return -EINVAL;
	if (b->iface->event_new)
		return b->iface->event_new(b, out);
	struct qg_event *ev = malloc(sizeof *ev);
	if (!ev)
		return -ENOMEM;
	qg_event_init(ev, 0, NULL);
	*out = ev;
	return 0;
}

void qg_backend_event_free(struct qg_backend *b, struct qg_event *ev)
{
	if (!b || !ev)
		return;
	if (b->iface->event_free)
		b->iface->event_free(b, ev);
	else
		free(ev);
}

int qg_backend_event_record(struct qg_backend *b, struct qg_event *ev, uint32_t *seq)
{
	if (!b || !ev)
		return -EINVAL;
	if (b->iface->event_record)
		return b->iface->event_record(b, ev, seq);
	qg_backend_synchronize(b);
	uint32_t s = qg_event_record(ev, atomic_load_explicit(&b->last_status, memory_order_relaxed));
	if (seq)
		*seq = s;
	return 0;
}

int qg_backend_event_wait(struct qg_backend *b, struct qg_event *ev, uint32_t seq, int64_t timeout_ns)
{
	if (!b || !ev)
		return -EINVAL;
	if (b->iface->event_wait)
		return b->iface->event_wait(b, ev, seq, timeout_ns);
	/* a synchronous backend starts its next work only after the caller returns from here */
	return qg_event_wait(ev, seq, timeout_ns);
}

int qg_backend_event_synchronize(struct qg_backend *b, struct qg_event *ev, uint32_t seq, int64_t timeout_ns)
{
	if (!b || !ev)
		return -EINVAL;
	if (b->iface->event_synchronize)
		return b->iface->event_synchronize(b, ev, seq, timeout_ns);
	return qg_event_wait(ev, seq, timeout_ns);
}
