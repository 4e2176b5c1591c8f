/*
 * bench-service.c - what the service costs, beside what it could cost.
 *
 * Limits, measured in the same run between two processes of this machine,
 * each side waiting for the other's word to change:
 *  - spin: a pure spin ping-pong on shared cache lines, the floor of any
 *    hand-off between two cores;
 *  - spin_then_futex: the raw primitive a round trip is compared with:
 *    the waiter spins 20 us, then sleeps on a shared futex; the poster
 *    stores and always calls FUTEX_WAKE, knowing nothing of the waiter;
 *  - spin_then_futex_wake_sleepers: the same with the protocol qgraphd and
 *    libqgraph use, where a waiter announces its sleep and the poster
 *    calls FUTEX_WAKE only then (so while both spin it is a spin
 *    ping-pong plus a full fence a side).
 * The round trip's ratio is printed against each.  Then, through a qgraphd of this build started on a
 * socket of its own: the round trip of a one-node graph registered once
 * and run with new inputs, and of a new graph sent each time (median and
 * p99), pipelined throughput from 1 and 8 clients, and a 4096 x 4096 x 32
 * Q4_0 GEMM through the daemon against the same call in this process
 * (interleaved runs, the ratio's median and interquartile range), weights
 * uploaded against memcpy (bench_upload), and the pinned memory of 8 processes loading the same 14336 x 4096 Q4_0 matrix
 * against one copy of it.
 *
 *   bench-service [--json] [--quick] [--only round_trip|pipelined|gemm|upload|shared]
 *
 * --only runs the ping-pongs and that one part, so that a profile of it
 * holds nothing else.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon-util.h"
#include "bench.h"
#include "mulmat.h"
#include "qgraph.h"
#include "upload-opts.h"

static int json, quick;
static cpu_set_t all_cpus;	/* where this process may run */
static int gemm_cpu;		/* the daemon's compute thread and the in-process call both run on it */
static const char *only;

/* Whether the part PART runs in this invocation. */
static int part(const char *p)
{
	return !only || strcmp(only, p) == 0;
}

static void emit(const char *bench, const char *mode, double value, const char *unit, const char *limit_name,
		 double limit, const char *extra)
{
	if (json) {
		printf("{\"bench\":\"%s\",\"mode\":\"%s\",\"value\":%.4g,\"unit\":\"%s\"", bench, mode, value, unit);
		if (limit_name)
			printf(",\"limit_name\":\"%s\",\"limit_value\":%.4g,\"ratio\":%.3f", limit_name, limit,
			       value / limit);
		else
			printf(",\"limit_name\":null,\"limit_value\":null,\"ratio\":null");
		printf("%s%s}\n", extra ? "," : "", extra ? extra : "");
	} else {
		printf("%-22s %-30s %10.3f %-9s", bench, mode, value, unit);
		if (limit_name)
			printf("  %s %.3f -> ratio %.2f", limit_name, limit, value / limit);
		printf("\n");
	}
	fflush(stdout);
}

/* ---------------------------------------------------------------- ping-pong */

struct pp {
	_Alignas(64) _Atomic uint32_t ping;
	_Alignas(64) _Atomic uint32_t ping_sleeping;
	_Alignas(64) _Atomic uint32_t pong;
	_Alignas(64) _Atomic uint32_t pong_sleeping;
};

static void futex_wait(_Atomic uint32_t *w, uint32_t v)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* How the poster of a ping-pong wakes the other side. */
enum pp_kind {
	PP_SPIN,		/* never: the waiter spins for ever */
	PP_WAKE_ALWAYS,		/* FUTEX_WAKE after every store */
	PP_WAKE_SLEEPERS,	/* FUTEX_WAKE when the waiter said it sleeps */
};

/* Wait for *W to become V: spin (SPIN_S, 0 = forever), then sleep announcing it in *SLEEPING. */
static void await(_Atomic uint32_t *w, uint32_t v, _Atomic uint32_t *sleeping, double spin_s)
{
	double t0 = spin_s > 0 ? bench_now() : 0;

	for (;;) {
		for (int i = 0; i < 64; i++) {
			if (atomic_load_explicit(w, memory_order_acquire) == v)
				return;
			bench_relax();
		}
		if (spin_s <= 0 || bench_now() - t0 < spin_s)
			continue;
		atomic_store_explicit(sleeping, 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		uint32_t cur = atomic_load_explicit(w, memory_order_relaxed);
		if (cur != v)
			futex_wait(w, cur);
		atomic_store_explicit(sleeping, 0, memory_order_relaxed);
	}
}

static void post(_Atomic uint32_t *w, uint32_t v, _Atomic uint32_t *sleeping, enum pp_kind kind)
{
	atomic_store_explicit(w, v, memory_order_release);
	if (kind == PP_WAKE_ALWAYS) {
		futex_wake(w);
	} else if (kind == PP_WAKE_SLEEPERS) {
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(sleeping, memory_order_relaxed))
			futex_wake(w);
	}
}

/* N ping-pongs of KIND between two processes: each round trip's time in T[0..N), in seconds. */
static void ping_pong(int n, enum pp_kind kind, double *t)
{
	const double spin_s = kind == PP_SPIN ? 0 : 20e-6;
	struct pp *p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	memset(p, 0, sizeof *p);
	pid_t kid = fork();
	if (kid == 0) {
		for (uint32_t i = 1; i <= (uint32_t)n; i++) {
			await(&p->ping, i, &p->pong_sleeping, spin_s);
			post(&p->pong, i, &p->ping_sleeping, kind);
		}
		_exit(0);
	}
	for (uint32_t i = 1; i <= (uint32_t)n; i++) {
		double a = bench_now();
		post(&p->ping, i, &p->pong_sleeping, kind);
		await(&p->pong, i, &p->ping_sleeping, spin_s);
		t[i - 1] = bench_now() - a;
	}
	waitpid(kid, NULL, 0);
	munmap(p, sizeof *p);
}

/* ---------------------------------------------------------------- through the daemon */

static struct qgraph_session *connect_one(uint64_t arena)
{
	struct qgraph_connect_opts o = { .name = "bench-service", .arena_bytes = arena };
	struct qgraph_session *s = NULL;
	char err[256];

	if (qgraph_connect(&o, &s, err, sizeof err))
		fprintf(stderr, "bench-service: %s\n", err);
	return s;
}

static double percentile(double *v, int n, double p)
{
	qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
	return v[(int)(p * (n - 1) + 0.5)];
}

/* Pipelined runs of a registered tiny graph: graphs per second. */
static double pipelined(struct qgraph_session *s, uint64_t handle, int n)
{
	double t = bench_now();
	int done = 0;

	while (done < n) {
		uint64_t ids[64];
		int batch = 0;
		while (batch < 64 && done + batch < n && qgraph_run(s, handle, NULL, 0, &ids[batch]) == 0)
			batch++;
		for (int k = 0; k < batch; k++) {
			struct qgraph_result res = QGRAPH_RESULT_INIT;
			if (qgraph_wait(s, ids[k], -1, &res) || res.status)
				return -1;
		}
		done += batch;
	}
	return n / (bench_now() - t);
}

/*
 * A tiny registered graph in S: y = a + b over 16 floats each (the graph
 * ggml's rpc-server is timed with: two 16-float inputs, one add), a at
 * arena offset 0, b at 64, y at 4096.  Its handle, 0 on error.
 */
static uint64_t tiny_graph(struct qgraph_session *s, struct qgraph_graph **gp)
{
	int64_t ne[1] = { 16 };
	struct qgraph_graph *g = qgraph_graph_new();
	uint64_t id;
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	int a = qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, 0), b = qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, 64);

	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_ADD, a, b, 0), 4096);
	if (qgraph_submit(s, g, QGRAPH_SUBMIT_KEEP | QGRAPH_SUBMIT_BLOCK, &id) || qgraph_wait(s, id, -1, &res) ||
	    res.status)
		return 0;
	*gp = g;
	return res.handle;
}

/*
 * M round trips of the tiny graph through S: run registered graph HANDLE
 * with new inputs (MODE 0), or send G anew each time (MODE 1).  Each
 * one's time in T, the daemon's own account of it in TIN; 0, or -1 on a
 * wrong answer.
 */
static int round_trips(struct qgraph_session *s, struct qgraph_graph *g, uint64_t handle, int mode, int m, double *t,
		       double *tin)
{
	float *a = qgraph_arena(s, NULL), *b = a + 16, *y = (float *)((char *)a + 4096);

	for (int i = 0; i < m; i++) {
		uint64_t id;
		struct qgraph_result res = QGRAPH_RESULT_INIT;
		float v = (float)(i % 4096);
		a[0] = v;
		b[0] = v;
		double t0 = bench_now();
		if (mode)
			qgraph_submit(s, g, QGRAPH_SUBMIT_BLOCK, &id);
		else
			qgraph_run(s, handle, NULL, QGRAPH_SUBMIT_BLOCK, &id);
		qgraph_wait(s, id, -1, &res);
		t[i] = bench_now() - t0;
		tin[i] = (double)res.total_ns * 1e-9;
		if (res.status || y[0] != 2.0f * v) {
			fprintf(stderr, "bench-service: a wrong result\n");
			return -1;
		}
	}
	return 0;
}

static void bench_gemm(void)
{
	enum { M = 4096, K = 4096, N = 32 };
	int runs = quick ? 5 : 21;
	struct qgraph_session *s = connect_one(8u << 20);
	if (!s)
		return;
	float *w = malloc((size_t)M * K * 4);
	for (size_t i = 0; i < (size_t)M * K; i++)
		w[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
	uint64_t h, id;
	enum qgraph_type st;
	if (qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0, .rows = M,
			.cols = K, .data = w), &h, &st)) {
		fprintf(stderr, "bench-service: upload: %s\n", qgraph_session_error(s));
		return;
	}
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t xo = qgraph_arena_alloc(s, N * K * 4), yo = qgraph_arena_alloc(s, N * M * 4);
	for (int i = 0; i < N * K; i++)
		((float *)(arena + xo))[i] = (float)(i % 97) / 97.0f - 0.5f;
	struct qgraph_graph *g = qgraph_graph_new();
	int64_t xne[2] = { K, N };
	int wi = qgraph_graph_weights(g, h, st, M, K), xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, xi, 0), yo);
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	if (qgraph_submit(s, g, QGRAPH_SUBMIT_KEEP | QGRAPH_SUBMIT_BLOCK, &id) || qgraph_wait(s, id, -1, &res) ||
	    res.status)
		return;
	uint64_t handle = res.handle;

	/* the same call in this process, on the same bytes, with the same kernels */
	ssize_t wb = qgraph_matrix_size(st, M, K);
	void *wq = malloc((size_t)wb);
	float *y = malloc((size_t)N * M * 4);
	qgraph_quantize(st, w, wq, (size_t)wb, M, K, NULL);
	struct qg_mm mm = { .wtype = (enum qg_type)st, .w = wq, .m = M, .k = K, .x = (float *)(arena + xo),
			    .ldx = K, .n = N, .y = y, .ldy = M };
	void *scratch = aligned_alloc(64, (qg_mul_mat_scratch_size(&mm) + 63) & ~(size_t)63);
	double *ratio = calloc((size_t)runs, sizeof *ratio), *td = calloc((size_t)runs, sizeof *td);
	double *tl = calloc((size_t)runs, sizeof *tl), *tc = calloc((size_t)runs, sizeof *tc);
	/*
	 * The call in this process runs on GEMM_CPU; while the daemon computes
	 * there, this process waits on the other CPUs (as a client would: the
	 * compute CPU is the daemon's), not on the CPU the executor is woken on.
	 */
	cpu_set_t one, others = all_cpus;
	CPU_ZERO(&one);
	CPU_SET(gemm_cpu, &one);
	CPU_CLR(gemm_cpu, &others);
	if (CPU_COUNT(&others) == 0)
		others = all_cpus;
	for (int i = 0; i < runs; i++) {
		sched_setaffinity(0, sizeof others, &others);
		double a = bench_now();
		qgraph_run(s, handle, NULL, QGRAPH_SUBMIT_BLOCK, &id);
		qgraph_wait(s, id, -1, &res);
		td[i] = bench_now() - a;
		tc[i] = (double)res.compute_ns * 1e-9;
		sched_setaffinity(0, sizeof one, &one);
		a = bench_now();
		qg_mul_mat(&mm, scratch);
		tl[i] = bench_now() - a;
		ratio[i] = td[i] / tl[i];
	}
	sched_setaffinity(0, sizeof all_cpus, &all_cpus);
	double q1 = percentile(ratio, runs, 0.25), q3 = percentile(ratio, runs, 0.75);
	double med = percentile(ratio, runs, 0.5);
	char extra[160];
	snprintf(extra, sizeof extra,
		 "\"m\":%d,\"n\":%d,\"k\":%d,\"layout\":\"%s\",\"runs\":%d,\"iqr\":[%.4f,%.4f],\"cpu\":%d", M, N, K,
		 qgraph_type_name(st), runs, q1, q3, gemm_cpu);
	emit("gemm_overhead", "daemon/in-process", med, "ratio", NULL, 0, extra);
	if (!json)
		printf("%-22s %-30s daemon %.2f ms (of which computing %.2f), in-process %.2f ms (medians), ratio IQR "
		       "[%.3f, %.3f], %d runs\n",
		       "", "", bench_median(td, runs) * 1e3, bench_median(tc, runs) * 1e3, bench_median(tl, runs) * 1e3,
		       q1, q3, runs);
	free(ratio);
	free(td);
	free(tl);
	free(tc);
	free(scratch);
	free(wq);
	free(y);
	free(w);
	qgraph_graph_free(g);
	qgraph_session_close(s);
}

/* Another session's round trips of the tiny graph, one after another until STOP: their times in T[0..N). */
struct neighbour {
	atomic_int stop;
	double *t;
	int n, cap;
};

static void *neighbour_main(void *v)
{
	struct neighbour *nb = v;
	struct qgraph_session *s = connect_one(1 << 20);
	struct qgraph_graph *g = NULL;
	uint64_t h = s ? tiny_graph(s, &g) : 0;
	double inside;

	while (h && nb->n < nb->cap && !atomic_load_explicit(&nb->stop, memory_order_relaxed) &&
	       round_trips(s, g, h, 0, 1, nb->t + nb->n, &inside) == 0)
		nb->n++;
	qgraph_graph_free(g);
	qgraph_session_close(s);
	return NULL;
}

/* Emit a neighbour's round trips as MODE: the median, against LIMIT_US where it is given; the p99 and largest beside. */
static double emit_neighbour(struct neighbour *nb, const char *mode, double limit_us)
{
	double med = percentile(nb->t, nb->n, 0.5) * 1e6;
	double p99 = percentile(nb->t, nb->n, 0.99) * 1e6, max = nb->t[nb->n - 1] * 1e6;
	char extra[128];

	snprintf(extra, sizeof extra, "\"p99_us\":%.1f,\"max_us\":%.1f,\"runs\":%d", p99, max, nb->n);
	emit("upload", mode, med, "us", limit_us > 0 ? "alone_us" : NULL, limit_us, extra);
	if (!json)
		printf("%-22s %-30s p99 %.1f us, largest %.1f us, %d round trips\n", "", "", p99, max, nb->n);
	return med;
}

/*
 * Weights uploaded, in bytes sent per second, against a memcpy of as many
 * bytes in this process (the limit: a chunk is copied once into the arena
 * by the client and once out of it by the daemon, which overlap).  Q4_0
 * sent as it is, through the two staging buffers libqgraph uses and
 * through one (the arena held all but one chunk's room, so each chunk
 * waits for the last), and f32 quantized by the daemon as it comes.  The
 * modes and the limit in turns; medians.  Uploads without the digest
 * lookup (QGRAPH_UPLOAD_SEND), so every run sends its bytes.
 */
static void bench_upload(void)
{
	enum { ROWS = 32768, COLS = 4096, F32_ROWS = 8192 };	/* 75.5 MB of q4_0; 128 MiB of f32 */
	const uint64_t arena = 32u << 20;	/* chunks of 8 MiB */
	int runs = quick ? 3 : 7;
	struct qgraph_session *s = connect_one(arena);
	if (!s)
		return;
	size_t qbytes = (size_t)qgraph_matrix_size(QGRAPH_TYPE_Q4_0, ROWS, COLS), fbytes = (size_t)F32_ROWS * COLS * 4;
	float *f = bench_alloc(fbytes);
	void *q = bench_q4_0_blocks((int64_t)(qbytes / sizeof(struct qg_block_q4_0)), 7), *copy = bench_alloc(qbytes);
	bench_fill_x(f, (int64_t)F32_ROWS * COLS);
	double *t[4];
	for (int k = 0; k < 4; k++)
		t[k] = calloc((size_t)runs, sizeof *t[k]);
	for (int i = 0; i < runs; i++) {
		for (int mode = 0; mode < 4; mode++) {
			int64_t hold = mode == 1 ? qgraph_arena_alloc(s, arena - arena / 4 - (1u << 20)) : -1;
			uint64_t h = 0;
			double a = bench_now();
			int r = 0;
			if (mode == 0 || mode == 1)
				r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0,
						.target = QGRAPH_TYPE_Q4_0, .rows = ROWS, .cols = COLS, .data = q,
						.flags = QGRAPH_UPLOAD_SEND), &h, NULL);
			else if (mode == 2)
				r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32,
						.target = QGRAPH_TYPE_Q4_0, .rows = F32_ROWS, .cols = COLS, .data = f,
						.flags = QGRAPH_UPLOAD_SEND), &h, NULL);
			else
				memcpy(copy, q, qbytes);
			t[mode][i] = bench_now() - a;
			if (r) {
				fprintf(stderr, "bench-service: upload: %s\n", qgraph_session_error(s));
				return;
			}
			if (h)
				qgraph_weights_free(s, h);
			if (hold >= 0)
				qgraph_arena_free(s, hold);
		}
	}
	/*
	 * The daemon takes a chunk a slice at a time, serving every other
	 * session between slices: a neighbour's round trip alone, then while
	 * this session uploads.
	 */
	struct neighbour nb = { .cap = 1 << 20 };
	nb.t = calloc((size_t)nb.cap, sizeof *nb.t);
	pthread_t th;
	double *alone = calloc((size_t)nb.cap, sizeof *alone);
	int n_alone = 0;
	if (nb.t && alone && pthread_create(&th, NULL, neighbour_main, &nb) == 0) {
		struct timespec pause = { 0, 300000000 };
		nanosleep(&pause, NULL);
		atomic_store(&nb.stop, 1);
		pthread_join(th, NULL);
		n_alone = nb.n;
		memcpy(alone, nb.t, (size_t)n_alone * sizeof *alone);
		nb.n = 0;
		atomic_store(&nb.stop, 0);
	}
	if (n_alone && pthread_create(&th, NULL, neighbour_main, &nb) == 0) {
		struct timespec pause = { 0, 50000000 };
		nanosleep(&pause, NULL);	/* connected, and running */
		for (int i = 0; i < runs; i++) {
			uint64_t h = 0;
			if (qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0,
					.target = QGRAPH_TYPE_Q4_0, .rows = ROWS, .cols = COLS, .data = q,
					.flags = QGRAPH_UPLOAD_SEND), &h, NULL) == 0)
				qgraph_weights_free(s, h);
		}
		atomic_store(&nb.stop, 1);
		pthread_join(th, NULL);
	}
	double lim = (double)qbytes / bench_median(t[3], runs) * 1e-9;
	static const char *const modes[3] = { "q4_0, two buffers", "q4_0, one buffer", "f32 to q4_0, two buffers" };
	for (int mode = 0; mode < 3; mode++) {
		char extra[96];
		double bytes = mode == 2 ? (double)fbytes : (double)qbytes;
		snprintf(extra, sizeof extra, "\"bytes\":%.0f,\"chunk_bytes\":%llu,\"runs\":%d", bytes,
			 (unsigned long long)(arena / 4), runs);
		emit("upload", modes[mode], bytes / bench_median(t[mode], runs) * 1e-9, "GB/s", "memcpy_GB/s", lim, extra);
	}
	if (n_alone && nb.n) {
		struct neighbour a = { .t = alone, .n = n_alone };
		double us = emit_neighbour(&a, "neighbour round trip, alone", 0);
		emit_neighbour(&nb, "neighbour round trip, uploads", us);
	}
	free(alone);
	free(nb.t);
	for (int k = 0; k < 4; k++)
		free(t[k]);
	free(f);
	free(q);
	free(copy);
	qgraph_session_close(s);
}

/*
 * Weights shared across processes: 8 client processes load the same
 * 14336 x 4096 Q4_0 matrix (a feed-forward projection of a 7B model); the
 * daemon's own accounting of pinned bytes against one stored copy.
 */
static void bench_shared(struct qgraph_session *s)
{
	enum { CLIENTS = 8 };
	const int64_t rows = quick ? 1792 : 14336, cols = 4096;
	struct qg_block_q4_0 *q = bench_q4_0_blocks(rows * cols / 32, 42);
	long long p0 = daemon_stat(s, "pinned_bytes");
	int rep[2], go[2], ups = 0;

	if (!q || pipe(rep) || pipe(go))
		return;
	for (int c = 0; c < CLIENTS; c++) {
		if (fork() == 0) {
			struct qgraph_session *cs = connect_one(16 << 20);
			uint64_t h;
			char ch = cs && qgraph_weights_upload(cs, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0,
					.target = QGRAPH_TYPE_Q4_0, .rows = rows, .cols = cols, .data = q), &h,
					NULL) == 0 ? 'u' : 'x';
			close(go[1]);
			(void)!write(rep[1], &ch, 1);
			(void)!read(go[0], &ch, 1);	/* EOF: the parent has counted */
			qgraph_session_close(cs);
			_exit(0);
		}
	}
	close(go[0]);
	for (int c = 0; c < CLIENTS; c++) {
		char ch = 0;
		(void)!read(rep[0], &ch, 1);
		ups += ch == 'u';
	}
	double pinned = (double)(daemon_stat(s, "pinned_bytes") - p0) / (1 << 20);
	double one = (double)qgraph_matrix_size(QGRAPH_TYPE_Q4_0, rows, cols) / (1 << 20);
	char mode[64], extra[64];
	snprintf(mode, sizeof mode, "%d processes, %lldx%lld q4_0", ups, (long long)rows, (long long)cols);
	snprintf(extra, sizeof extra, "\"clients\":%d", ups);
	emit("shared_weights", mode, pinned, "MiB", "one_copy_MiB", one, extra);
	close(go[1]);
	for (int c = 0; c < CLIENTS; c++)
		wait(NULL);
	close(rep[0]);
	close(rep[1]);
	free(q);
}

int main(int argc, char **argv)
{
	static struct test_daemon d;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "--quick") == 0)
			quick = 1;
		else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc && (only = argv[++i]) &&
			 (!strcmp(only, "round_trip") || !strcmp(only, "pipelined") || !strcmp(only, "gemm") ||
			  !strcmp(only, "upload") || !strcmp(only, "shared")))
			;
		else {
			printf("Usage: bench-service [--json] [--quick] [--only round_trip|pipelined|gemm|upload|shared]\n");
			return strcmp(argv[i], "--help") ? 2 : 0;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	int n = quick ? 5000 : 50000;
	/* two processes spinning on one CPU measure the scheduler's time slice, for minutes */
	int ncpu = sched_getaffinity(0, sizeof all_cpus, &all_cpus) == 0 ? CPU_COUNT(&all_cpus) : 2;

	if (!getenv("QG_TOP_BUILDDIR"))
		setenv("QG_TOP_BUILDDIR", ".", 1);
	/*
	 * One compute thread, on the same CPU as the call in this process it is
	 * compared with: the CPUs of a shared machine differ by more than the
	 * overhead to be measured (here, one ran the same GEMM 2.5x slower).
	 */
	gemm_cpu = 0;
	while (gemm_cpu < CPU_SETSIZE - 1 && !CPU_ISSET(gemm_cpu, &all_cpus))
		gemm_cpu++;
	char dopts[64];
	snprintf(dopts, sizeof dopts, "--threads 1 --cpus %d", gemm_cpu);
	int r = daemon_start(&d, dopts);
	if (r) {
		fprintf(stderr, "bench-service: cannot start qgraphd (%d); run from the build directory\n", r);
		return 1;
	}
	struct qgraph_session *s = connect_one(1 << 20);
	struct qgraph_graph *g = NULL;
	uint64_t handle = s ? tiny_graph(s, &g) : 0;
	if (!handle) {
		daemon_cleanup(&d);
		return 1;
	}

	/*
	 * The limits and the registered round trip in turns, a fifth of each at
	 * a time: a shared machine's CPUs change speed and neighbours from one
	 * second to the next, and a ratio means something only between figures
	 * taken under the same conditions.
	 */
	enum { ROUNDS = 5 };
	const int chunk = n / ROUNDS;
	double *pp[3], *t = calloc((size_t)n, sizeof *t), *tin = calloc((size_t)n, sizeof *tin);
	for (int k = 0; k < 3; k++)
		pp[k] = calloc((size_t)n, sizeof *pp[k]);
	for (int round = 0; round < ROUNDS; round++) {
		if (ncpu > 1)
			ping_pong(chunk, PP_SPIN, pp[PP_SPIN] + round * chunk);
		ping_pong(chunk, PP_WAKE_ALWAYS, pp[PP_WAKE_ALWAYS] + round * chunk);
		ping_pong(chunk, PP_WAKE_SLEEPERS, pp[PP_WAKE_SLEEPERS] + round * chunk);
		if (part("round_trip") &&
		    round_trips(s, g, handle, 0, chunk, t + round * chunk, tin + round * chunk))
			return 1;
	}
	const int total = chunk * ROUNDS;
	double spin = ncpu > 1 ? bench_median(pp[PP_SPIN], total) : 0, futex = bench_median(pp[PP_WAKE_ALWAYS], total),
	       flagged = bench_median(pp[PP_WAKE_SLEEPERS], total);
	if (ncpu > 1)
		emit("ping_pong", "spin", spin * 1e6, "us", NULL, 0, NULL);
	else if (!json)
		printf("ping_pong              spin: not measured on one CPU\n");
	emit("ping_pong", "spin_then_futex", futex * 1e6, "us", NULL, 0, NULL);
	emit("ping_pong", "spin_then_futex_wake_sleepers", flagged * 1e6, "us", NULL, 0, NULL);

	for (int mode = 0; mode < 2 && part("round_trip"); mode++) {
		int m = mode ? n / 4 : total;
		if (mode && round_trips(s, g, handle, 1, m, t, tin))
			return 1;
		double p99 = percentile(t, m, 0.99), med = percentile(t, m, 0.5), inside = percentile(tin, m, 0.5);
		char extra[192];
		snprintf(extra, sizeof extra,
			 "\"p99_us\":%.3f,\"daemon_us\":%.3f,\"runs\":%d,\"ratio_wake_sleepers\":%.3f,"
			 "\"ratio_spin\":%.3f",
			 p99 * 1e6, inside * 1e6, m, med / flagged, spin > 0 ? med / spin : 0.0);
		emit("round_trip", mode ? "new graph each time" : "registered, new inputs", med * 1e6, "us",
		     "spin_then_futex_us", futex * 1e6, extra);
		if (!json) {
			printf("%-22s %-30s p99 %.2f us; inside the daemon (request decoded to answer ready) %.2f us\n",
			       "", "", p99 * 1e6, inside * 1e6);
			printf("%-22s %-30s ratio %.2f to spin_then_futex_wake_sleepers", "", "", med / flagged);
			if (spin > 0)
				printf(", %.2f to spin", med / spin);
			printf("\n");
		}
	}
	for (int k = 0; k < 3; k++)
		free(pp[k]);
	int bad = 0;
	if (part("pipelined")) {
		double one = pipelined(s, handle, n);
		emit("pipelined", "1 client", one, "graphs/s", NULL, 0, NULL);
		/* 8 clients at once, each its own session */
		double t0 = bench_now();
		for (int c = 0; c < 8; c++) {
			if (fork() == 0) {
				struct qgraph_session *cs = connect_one(1 << 20);
				struct qgraph_graph *cg = NULL;
				uint64_t ch = cs ? tiny_graph(cs, &cg) : 0;
				_exit(ch && pipelined(cs, ch, n / 8) > 0 ? 0 : 1);
			}
		}
		for (int c = 0; c < 8; c++) {
			int st;
			wait(&st);
			bad |= !WIFEXITED(st) || WEXITSTATUS(st);
		}
		if (!bad)
			emit("pipelined", "8 clients", (double)(n / 8 * 8) / (bench_now() - t0), "graphs/s", NULL, 0, NULL);
	}
	free(t);
	free(tin);
	qgraph_graph_free(g);
	qgraph_session_close(s);
	if (part("gemm"))
		bench_gemm();
	if (part("upload"))
		bench_upload();
	s = part("shared") ? connect_one(1 << 20) : NULL;
	if (s)
		bench_shared(s);
	qgraph_session_close(s);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
	return bad;
}
