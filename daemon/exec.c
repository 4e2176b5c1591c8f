/*
 * exec.c - the executor: a session's graph (graphs.c built and placed it)
 * run and answered, on the loop's thread or on the executor thread (see
 * exec.h).  No protobuf here: the answer goes out through reply.c.
 *
 * A session's requests are served one at a time, in the order submitted.
 * Small graphs run on the loop's own thread, in the fair order the loop's
 * scan gives: handing them to another thread would cost more than running
 * them.  Larger ones go to the executor thread, so that the loop keeps
 * serving every other session meanwhile, and a Cancel from the same session
 * (the one request a busy session may still have served) can stop them; a
 * graph is cancelled, or stopped past its time limit, at the next node
 * boundary.  Only the loop thread touches sessions and rings: the executor
 * hands a finished job back and rings an eventfd, and the loop answers it.
 *
 * Batches: when the executor takes a job, it takes with it the queued
 * jobs of other sessions whose plans have the same batch key (a session
 * has one job at a time, so each is another session's), and the backend
 * runs their matrix products on shared weights as one, each job keeping
 * its own results, cancel and time limit.  Jobs are taken from the queue's
 * head first: one that does not match waits behind as many batches as
 * there were jobs ahead of it, no more.  With batch-window-us, the
 * executor may wait that long for the company recent batches had.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backend-cpu.h"
#include "cpulist.h"
#include "exec.h"
#include "graphs.h"
#include "hugepool.h"
#include "loop.h"
#include "ops.h"
#include "reply.h"
#include "server.h"
#include "session.h"
#include "stats.h"

static_assert(QGD_BATCH_SIZES >= QGD_BATCH_MAX && QGD_BATCH_MAX <= QG_CPU_BATCH_MAX,
	      "the backend takes, and the stats tell apart, every batch batch-max allows");

/*
 * A graph on its way through the executor thread.  The loop thread makes
 * it, the executor computes it, the loop thread answers it: a job is
 * touched by one thread at a time, handed over under EXEC->LOCK, except
 * CANCEL, which the loop thread may set while the executor runs it.
 */
struct qgd_job {
	struct qgd_session *s;
	struct qgd_graph *g;
	int registered;			/* G belongs to the session; else freed with the job */
	uint64_t rid;
	uint64_t t_decoded, t_placed, deadline_ns;
	uint32_t limit_ms;
	const struct qgd_event_ref *rec;	/* the events to record: REC_COPY, or the caller's for an inline job */
	struct qgd_event_ref *rec_copy;		/* copied: the request's own list goes with the next one */
	size_t n_rec;
	struct qg_run run;		/* its cancel flag is what a Cancel sets */
	uint64_t cancelled_by;		/* the Cancel request's id, for the error text */
	bool by_request;		/* a Cancel stopped it (else the daemon did) */
	int err;
	size_t bad;
	uint64_t t_done;
	/* a batch is counted on its first job: the graphs that ran as one, and those that then ran alone */
	unsigned batch_n, batch_alone;
	uint64_t wait_ns;		/* waited for company (batch-window-us) */
	int on_stack;			/* an inline job: nothing of it to free */
	struct qgd_job *next;
};

struct qgd_exec {
	pthread_t thread;
	int started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct qgd_job *queue, **queue_tail;	/* to run, in order (under LOCK) */
	int stop;
	/* batch-max and batch-window-us as the loop last queued a job (under LOCK: a reload changes them) */
	uint32_t batch_max, window_us;
	unsigned company;			/* executor only: the size a batch is waited for to reach */
	/*
	 * Run, to be answered (any order): a stack the executor pushes each job
	 * on (a release CAS) and the loop takes whole (an acquire exchange),
	 * without LOCK, which the loop would otherwise wait for while the
	 * executor goes back to sleep on it (a futex round).
	 * One pusher, and a consumer that only ever takes everything: no ABA.
	 */
	_Atomic(struct qgd_job *) done;
	int done_fd;				/* eventfd the executor rings after a job if the loop sleeps */
	struct qg_watch *done_watch;
	/*
	 * The loop is blocked in its event loop, or about to be: only then
	 * does the executor ring DONE_FD (a syscall).
	 * The Dekker pattern: the loop sets it, fences and looks at DONE before
	 * it blocks; the executor pushes on DONE, fences and reads it.
	 */
	_Atomic bool loop_asleep;
	unsigned in_flight;			/* loop thread only */
	/*
	 * Loop thread only.  When the one job in flight is a registered graph
	 * that ran before, it is expected to end at EXPECT_END_NS; and when
	 * the pool leaves a CPU to the loop (MAY_POLL), the loop polls for
	 * that end instead of sleeping until the executor's eventfd wakes it.
	 */
	uint64_t expect_end_ns, expect_ns;
	bool may_poll;
	struct qg_backend *pool;		/* the worker pool, driven by the executor thread */
	struct qg_backend *solo;		/* one thread, no pool: small graphs on the loop's thread */
};

static int compute(struct qgd_job *j);
static void compute_batch(struct qgd_job *const *jobs, size_t n);
static void job_free(struct qgd_job *j);

/*
 * Move the queued jobs whose plans have batch key KEY on backend BE from
 * X's queue to JOBS[N..MAX) (LOCK held), in queue order.  The new N.
 */
static size_t take_company(struct qgd_exec *x, uint64_t key, const struct qg_backend *be, struct qgd_job **jobs,
			   size_t n, size_t max)
{
	struct qgd_job **link = &x->queue;

	x->queue_tail = &x->queue;
	while (*link) {
		struct qgd_job *j = *link;
		if (n < max && j->g->be == be && qg_backend_graph_plan_batch_key(be, j->g->plan) == key) {
			*link = j->next;
			jobs[n++] = j;
			continue;
		}
		link = &j->next;
		x->queue_tail = link;
	}
	return n;
}

/*
 * Wait (LOCK held) until batch-window-us after START for company of the
 * JOBS[0..N) taken, up to the size the last batches had: the new N.
 */
static size_t wait_company(struct qgd_exec *x, uint64_t key, struct qgd_job **jobs, size_t n, size_t max,
			   uint64_t start)
{
	const uint64_t end = start + (uint64_t)x->window_us * 1000u;
	const size_t want = x->company < max ? x->company : max;

	while (n < want && !x->stop) {
		struct timespec ts = { .tv_sec = (time_t)(end / 1000000000u), .tv_nsec = (long)(end % 1000000000u) };
		int r = pthread_cond_timedwait(&x->cond, &x->lock, &ts);
		n = take_company(x, key, jobs[0]->g->be, jobs, n, max);
		if (r == ETIMEDOUT) {
			x->company = (unsigned)n;	/* the company did not come: wait for what did, next time */
			break;
		}
	}
	return n;
}

static void *executor(void *arg)
{
	struct qgd_exec *x = arg;
	struct qgd_job *jobs[QG_CPU_BATCH_MAX];

	for (;;) {
		size_t n = 0;
		uint64_t t_wait = 0;
		pthread_mutex_lock(&x->lock);
		while (!x->queue && !x->stop)
			pthread_cond_wait(&x->cond, &x->lock);
		struct qgd_job *j = x->queue;
		if (j) {
			x->queue = j->next;
			if (!x->queue)
				x->queue_tail = &x->queue;
			jobs[n++] = j;
			const size_t max = x->batch_max < QG_CPU_BATCH_MAX ? x->batch_max : QG_CPU_BATCH_MAX;
			uint64_t key = max > 1 ? qg_backend_graph_plan_batch_key(j->g->be, j->g->plan) : 0;
			if (key) {
				n = take_company(x, key, j->g->be, jobs, n, max);
				if (x->window_us && n < x->company && n < max) {
					t_wait = qg_stamp_ns();
					n = wait_company(x, key, jobs, n, max, t_wait);
				}
				if (n > x->company)
					x->company = (unsigned)n;
			}
		}
		pthread_mutex_unlock(&x->lock);
		if (!j)
			break;	/* stopping, and nothing left to run */

		uint64_t t_run = qg_stamp_ns();
		for (size_t i = 0; t_wait && i < n; i++)
			jobs[i]->wait_ns = t_run - (jobs[i]->t_placed > t_wait ? jobs[i]->t_placed : t_wait);
		compute_batch(jobs, n);
		uint64_t t_done = qg_stamp_ns();

		for (size_t i = 0; i < n; i++) {
			j = jobs[i];
			j->t_done = t_done;
			/* release: the job's outcome is seen by the loop's acquire that takes it */
			struct qgd_job *top = atomic_load_explicit(&x->done, memory_order_relaxed);
			do
				j->next = top;
			while (!atomic_compare_exchange_weak_explicit(&x->done, &top, j, memory_order_release,
								      memory_order_relaxed));
		}
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&x->loop_asleep, memory_order_relaxed)) {
			uint64_t one = 1;
			(void)!write(x->done_fd, &one, sizeof one);
		}
	}
	return NULL;
}

static void on_done_bell(struct qg_watch *w, int fd, uint32_t events, void *arg)
{
	uint64_t v;

	(void)w;
	(void)events;
	(void)arg;
	/* only wakes the loop: qgd_exec_reap() collects the jobs */
	(void)!read(fd, &v, sizeof v);
}

/* Every CPU this process may use, as a CPU list in BUF (LEN bytes).  0 or -errno. */
static int usable_cpus(char *buf, size_t len)
{
	cpu_set_t set;
	int cpus[QG_CPU_MAX], n = 0;

	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return -errno;
	for (int c = 0; c < CPU_SETSIZE && n < QG_CPU_MAX; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n ? qg_cpulist_format(cpus, n, buf, len) < 0 ? -ENOSPC : 0 : -ENOENT;
}

int qgd_exec_init(struct qgd_server *srv)
{
	struct qgd_exec *x = calloc(1, sizeof *x);
	char all[1024];
	int r;

	if (!x)
		return -ENOMEM;
	x->queue_tail = &x->queue;
	/*
	 * The pool is pinned, on --cpus or else on every CPU the daemon may
	 * use: left to the scheduler, a woken worker is often placed on the
	 * waking executor's CPU and the two share it, the executor's barrier
	 * spin included, until load balancing moves one away.
	 */
	const char *cpus = srv->cfg.cpus;
	if (!cpus && usable_cpus(all, sizeof all) == 0)
		cpus = all;
	/* the pool runs every graph it is given on its workers: which graphs are small is decided here alone */
	struct qg_cpu_opts po = { .cpus = cpus, .threads = srv->cfg.threads, .small_work = 1 }, so = { .threads = 1 };
	if ((r = qg_backend_cpu_new(&po, &x->pool)) || (r = qg_backend_cpu_new(&so, &x->solo))) {
		qgd_error("cannot start the CPU backend (cpus %s, threads %d): %s", srv->cfg.cpus ? srv->cfg.cpus : "any",
			  srv->cfg.threads, strerror(-r));
		qg_backend_free(x->pool);
		free(x);
		return r;
	}
	struct qg_cpu_stats cs;
	cpu_set_t usable;
	if (qg_backend_cpu_stats(x->pool, &cs) == 0 && sched_getaffinity(0, sizeof usable, &usable) == 0)
		x->may_poll = cs.threads < CPU_COUNT(&usable);
	x->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (x->done_fd < 0) {
		r = -errno;
		free(x);
		return r;
	}
	pthread_mutex_init(&x->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);	/* the window is timed on qg_stamp_ns's clock */
	pthread_cond_init(&x->cond, &ca);
	pthread_condattr_destroy(&ca);
	x->batch_max = srv->cfg.batch_max;
	x->window_us = srv->cfg.batch_window_us;
	x->company = QG_CPU_BATCH_MAX;	/* until a window shows otherwise, wait for a full batch */
	srv->exec = x;
	if ((r = qg_loop_watch(srv->loop, x->done_fd, POLLIN, on_done_bell, srv, &x->done_watch)) ||
	    (r = -pthread_create(&x->thread, NULL, executor, x))) {
		qgd_exec_fini(srv);
		return r;
	}
	x->started = 1;
	/*
	 * Thread 0 of every pooled run (the workers are qg-cpu1..), named and
	 * pinned to the first of the --cpus here rather than by itself, so
	 * that both hold once the daemon says it is ready.
	 */
	pthread_setname_np(x->thread, "qgd-exec");
	if ((r = qg_backend_cpu_pin_thread(x->pool, x->thread)))
		qgd_warn("the executor thread cannot be pinned: %s", strerror(-r));
	return 0;
}

void qgd_exec_fini(struct qgd_server *srv)
{
	struct qgd_exec *x = srv->exec;

	if (!x)
		return;
	if (x->started) {
		pthread_mutex_lock(&x->lock);
		x->stop = 1;
		pthread_cond_signal(&x->cond);
		pthread_mutex_unlock(&x->lock);
		pthread_join(x->thread, NULL);
	}
	if (x->done_watch)
		qg_loop_unwatch(srv->loop, x->done_watch);
	close(x->done_fd);
	qg_backend_free(x->pool);
	qg_backend_free(x->solo);
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->cond);
	free(x);
	srv->exec = NULL;
}

void qgd_exec_backends(const struct qgd_server *srv, struct qg_backend **small, struct qg_backend **large)
{
	*small = srv->exec->solo;
	*large = srv->exec->pool;
}

const char *qgd_exec_pool_kind(const struct qgd_server *srv)
{
	return srv->pool ? qg_hugepool_info(srv->pool)->text : "none";
}

int qgd_exec_threads(const struct qgd_server *srv)
{
	struct qg_cpu_stats st;

	if (!srv->exec || qg_backend_cpu_stats(srv->exec->pool, &st))
		return 1;
	return st.threads;
}

unsigned qgd_exec_in_flight(const struct qgd_server *srv)
{
	return srv->exec ? srv->exec->in_flight : 0;
}

/*
 * Compute J's graph on its backend: 0, or at a node boundary -ECANCELED
 * once a Cancel set the run's flag or -ETIMEDOUT past its deadline, or a
 * node's error (its index in J->bad).
 */
static int compute(struct qgd_job *j)
{
	j->run.deadline_ns = j->deadline_ns;
	int r = qg_backend_graph_plan_compute(j->g->be, j->g->plan, &j->run);
	j->bad = j->run.failed_node >= 0 ? (size_t)j->run.failed_node : SIZE_MAX;
	return r;
}

/* compute() for JOBS[0..N), of one backend, as one batch where the backend can. */
static void compute_batch(struct qgd_job *const *jobs, size_t n)
{
	struct qg_plan *plans[QG_CPU_BATCH_MAX];
	struct qg_run *runs[QG_CPU_BATCH_MAX];

	if (n == 1) {
		jobs[0]->err = compute(jobs[0]);
		jobs[0]->batch_n = 1;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		jobs[i]->run.deadline_ns = jobs[i]->deadline_ns;
		plans[i] = jobs[i]->g->plan;
		runs[i] = &jobs[i]->run;
	}
	size_t together = qg_backend_graph_plan_compute_batch(jobs[0]->g->be, plans, runs, n);
	for (size_t i = 0; i < n; i++) {
		struct qgd_job *j = jobs[i];
		j->err = j->run.status;
		j->bad = j->run.failed_node >= 0 ? (size_t)j->run.failed_node : SIZE_MAX;
	}
	jobs[0]->batch_n = (unsigned)(together ? together : 1);
	jobs[0]->batch_alone = (unsigned)(n - jobs[0]->batch_n);
}

static void job_free(struct qgd_job *j)
{
	if (!j)
		return;
	if (!j->registered)
		qgd_graph_free(j->g);
	if (j->on_stack)
		return;
	free(j->rec_copy);
	free(j);
}

/* Answer J's request, record its events with the outcome, and free J. */
static void job_answer(struct qgd_job *j)
{
	struct qgd_session *s = j->s;
	struct qgd_graph *g = j->g;
	struct qgd_run_answer a = { .rid = j->rid, .handle = g->handle, .err = j->err };
	char msg[160];
	int err = j->err;

	struct qgd_stats *st = &s->srv->stats;
	st->graphs_run++;
	if (!err)
		st->mul_mat_interleaved += g->mm_interleaved;
	if (j->batch_n) {
		st->batch_size[(j->batch_n < QGD_BATCH_SIZES ? j->batch_n : QGD_BATCH_SIZES) - 1]++;
		st->batch_size[0] += j->batch_alone;
	}
	st->batch_wait_ns += j->wait_ns;
	g->runs++;
	if (!j->on_stack && !err)
		g->last_compute_ns = j->t_done - j->t_placed;
	qgd_reply_record_events(s, j->rec, j->n_rec, err);
	a.decode_ns = j->t_decoded - s->req_started_ns;
	a.alloc_ns = j->t_placed - j->t_decoded;
	a.compute_ns = j->t_done - j->t_placed;
	a.total_ns = j->t_done - s->req_started_ns;
	if (err == -ETIMEDOUT) {
		snprintf(msg, sizeof msg, "cancelled after %llu ms, the graph's time limit",
			 (unsigned long long)j->limit_ms);
		a.error = msg;
	} else if (err == -ECANCELED) {
		if (j->by_request)
			snprintf(msg, sizeof msg, "cancelled by request %llu", (unsigned long long)j->cancelled_by);
		else
			snprintf(msg, sizeof msg, "cancelled: %s",
				 qgd_server_stopping(s->srv) ? "the daemon is stopping" : "the session is closing");
		a.error = msg;
	} else if (err) {
		const char *why = err == -ERANGE ? "a row index out of range" : strerror(-err);
		if (j->bad < g->wg.graph->n_nodes)
			snprintf(msg, sizeof msg, "node %zu (%s) failed: %s", j->bad,
				 qg_op_name(g->wg.graph->nodes[j->bad]->op), why);
		else
			snprintf(msg, sizeof msg, "the graph failed: %s", why);
		a.error = msg;
	}
	if (s->state == QGD_READY)
		qgd_reply_answer_run(s, &a);
	if (s->job == j)
		s->job = NULL;
	job_free(j);
}

void qgd_exec_run(struct qgd_session *s, uint64_t rid, struct qgd_graph *g, bool registered, uint64_t t_decoded,
		  uint64_t t_placed, uint32_t timeout_ms, const struct qgd_event_ref *rec, size_t n_rec)
{
	struct qgd_exec *x = s->srv->exec;
	uint32_t limit_ms = timeout_ms ? timeout_ms : s->srv->cfg.graph_timeout_ms;

	if (qgd_graph_small(g) || !x) {
		/*
		 * Small: run it here and now.  The job lives on this stack and
		 * names the request's own event list, which stays put until the
		 * answer is posted (the next record is decoded only after).
		 */
		struct qgd_job sj = { .s = s, .g = g, .registered = registered, .rid = rid, .t_decoded = t_decoded,
				      .t_placed = t_placed, .limit_ms = limit_ms, .rec = rec, .n_rec = n_rec,
				      .on_stack = 1 };
		sj.deadline_ns = t_placed + (uint64_t)limit_ms * 1000000u;
		qg_run_init(&sj.run);
		sj.run.start_ns = t_placed;	/* read just now: the backend need not read it again */
		s->job = &sj;
		sj.err = compute(&sj);
		sj.t_done = qg_stamp_ns();
		job_answer(&sj);
		return;
	}
	struct qgd_job *j = calloc(1, sizeof *j);
	if (j && n_rec)
		j->rec_copy = calloc(n_rec, sizeof *j->rec_copy);
	if (!j || (n_rec && !j->rec_copy)) {
		free(j);
		if (!registered)
			qgd_graph_free(g);
		qgd_reply_record_events(s, rec, n_rec, -ENOMEM);
		qgd_reply_refuse(s, rid, -ENOMEM, "no memory");
		return;
	}
	if (n_rec)
		memcpy(j->rec_copy, rec, n_rec * sizeof *rec);
	j->rec = j->rec_copy;
	j->n_rec = n_rec;
	qg_run_init(&j->run);
	j->s = s;
	j->g = g;
	j->registered = registered;
	j->rid = rid;
	j->t_decoded = t_decoded;
	j->t_placed = t_placed;
	j->limit_ms = limit_ms;
	j->deadline_ns = t_placed + (uint64_t)limit_ms * 1000000u;
	s->job = j;
	/* alone on the executor, and run there before: when it should end */
	x->expect_ns = x->in_flight == 0 ? g->last_compute_ns : 0;
	x->expect_end_ns = x->expect_ns ? t_placed + x->expect_ns : 0;
	x->in_flight++;
	pthread_mutex_lock(&x->lock);
	x->batch_max = s->srv->cfg.batch_max;	/* as a reload left them */
	x->window_us = s->srv->cfg.batch_window_us;
	*x->queue_tail = j;
	x->queue_tail = &j->next;
	pthread_cond_signal(&x->cond);
	pthread_mutex_unlock(&x->lock);
}

void qgd_exec_loop_asleep(struct qgd_server *srv, bool asleep)
{
	if (srv->exec)
		atomic_store_explicit(&srv->exec->loop_asleep, asleep, memory_order_relaxed);
}

int qgd_exec_reap(struct qgd_server *srv)
{
	struct qgd_exec *x = srv->exec;

	/* a plain look first: while nothing is done the line stays shared, and each poll costs a load */
	if (!x || !atomic_load_explicit(&x->done, memory_order_relaxed))
		return 0;
	struct qgd_job *j = atomic_exchange_explicit(&x->done, NULL, memory_order_acquire);
	int n = 0;
	while (j) {
		struct qgd_job *next = j->next;
		x->in_flight--;
		job_answer(j);
		j = next;
		n++;
	}
	if (!x->in_flight)
		x->expect_end_ns = x->expect_ns = 0;
	return n;
}

/*
 * The poll that ends a graph early costs a CPU for its margin; the sleep
 * costs the eventfd wake at its end, a large share of a short graph.  The
 * margin covers the lateness of the timed wake that starts the poll, and
 * the graph running a little long; a graph late by more than half its time
 * (or the margin) is left to the eventfd.
 * At most 1.55 ms of margin and 10 ms of lateness: a CPU is never spent
 * for long.
 */
#define EXPECT_MARGIN_NS 300000u
/* Past this a wake costs under 1% of the graph: the loop sleeps through it, spending no CPU on a poll. */
#define EXPECT_POLL_MAX_NS 20000000u

/* LONGEST, or less: until the first deadline of a request waiting for events (rounded up: woken past it). */
static int wait_deadline_ms(const struct qgd_server *srv, int longest)
{
	uint64_t now = 0;

	qgd_roster_each(srv, s) {
		if (!s->wait_until_ns)
			continue;
		if (!now)
			now = qg_stamp_ns();
		uint64_t ms = s->wait_until_ns > now ? (s->wait_until_ns - now + 999999u) / 1000000u : 0;
		if (ms < (uint64_t)longest)
			longest = (int)ms;
	}
	return longest;
}

int qgd_exec_sleep_ms(const struct qgd_server *srv, int longest)
{
	const struct qgd_exec *x = srv->exec;

	longest = wait_deadline_ms(srv, longest);
	if (!x || !x->may_poll || !x->in_flight || !x->expect_end_ns || x->expect_ns > EXPECT_POLL_MAX_NS)
		return longest;
	uint64_t now = qg_stamp_ns(), margin = EXPECT_MARGIN_NS + x->expect_ns / 16;
	if (now + margin >= x->expect_end_ns) {
		uint64_t late = margin > x->expect_ns / 2 ? margin : x->expect_ns / 2;
		return now > x->expect_end_ns + late ? longest : 0;	/* overdue: the estimate was wrong */
	}
	uint64_t ms = (x->expect_end_ns - margin - now) / 1000000u;
	return ms < (uint64_t)longest ? (int)ms : longest;
}

int qgd_exec_cancel(struct qgd_session *s, uint64_t target, const uint64_t *by)
{
	struct qgd_job *j = s->job;

	if (!j || (target && j->rid != target))
		return -ENOENT;
	j->by_request = by != NULL;
	j->cancelled_by = by ? *by : 0;
	qg_run_cancel(&j->run);
	return 0;
}

