/*
 * bench-pool.c - what the hugepage pool buys: the cost of touching memory
 * the first time, and a weight-bound GEMV with its weights in the pool
 * against the same bytes in malloc memory.
 *
 *   bench-pool [--json] [--quick]
 *
 * First touch: 75 MB written once into fresh memory (malloc, the pool
 * unlocked, the pool locked), in ms, against writing it again (the limit:
 * what the write costs with no page faults).  A locked pool has faulted
 * its pages in at start-up, so its start-up time is printed beside it.
 * The first pool of the run is printed apart: its faults pay for the
 * kernel compacting memory into 2 MiB pages, the pools after it do not.
 *
 * GEMV: y = x * W^T with W 32768 x 4096 Q4_0 in the best layout for this
 * CPU (75 MB, beyond the last-level cache), n = 1, at 1 and 2 threads,
 * with the kernel qg_mul_mat dispatches; the median over repetitions that
 * alternate between the two copies of W.  Limit: the read bandwidth over
 * the same buffer.  The last line is the pool's speed over malloc's.
 * What backs each buffer (AnonHugePages from /proc/self/smaps) is printed,
 * since a TLB effect needs hugepages to show.
 */
#include "config.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "fp16.h"
#include "hugepool.h"
#include "kernels.h"
#include "mulmat.h"
#include "quant.h"

#define M_ROWS 32768
#define K_COLS 4096
#define CHUNK_ROWS 64		/* a multiple of every layout's interleave */

static int json;

/* kB of AnonHugePages in the mapping that holds ADDR (/proc/self/smaps), -1 if unknown. */
static long huge_kb(const void *addr)
{
	char line[256];
	long kb = -1;
	int inside = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	while (f && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			inside = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
		else if (inside && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	}
	if (f)
		fclose(f);
	return kb;
}

/*
 * Fill DST with M x K random Q4_0 weights (random nibbles, small scales)
 * repacked to TYPE, CHUNK_ROWS rows at a time so that no M x K copy is
 * needed: an interleaved layout keeps each group of rows contiguous.
 */
static int fill_weights(enum qg_type type, unsigned char *dst, size_t bytes)
{
	const int64_t nb = CHUNK_ROWS * K_COLS / QG_QK;
	const size_t chunk = (size_t)nb * sizeof(struct qg_block_q4_0);
	struct qg_block_q4_0 *q = malloc(chunk);
	uint64_t s = 0x9e3779b97f4a7c15ULL;

	if (!q || bytes != (size_t)(M_ROWS / CHUNK_ROWS) * chunk)
		return -1;
	for (int64_t r = 0; r < M_ROWS; r += CHUNK_ROWS) {
		for (int64_t i = 0; i < nb; i++) {
			uint64_t v[2];
			for (int j = 0; j < 2; j++) {
				s ^= s << 13;
				s ^= s >> 7;
				s ^= s << 17;
				v[j] = s;
			}
			q[i].d = qg_fp32_to_fp16(0x1p-9f * (float)(1 + (v[0] & 3)));
			memcpy(q[i].qs, v, sizeof q[i].qs);
		}
		size_t at = (size_t)(r / CHUNK_ROWS) * chunk;
		if (qg_repack(type, dst + at, chunk, QG_TYPE_Q4_0, q, CHUNK_ROWS, K_COLS) != (ssize_t)chunk) {
			free(q);
			return -1;
		}
	}
	free(q);
	return 0;
}

static void print(const struct bench_result *r, const char *what)
{
	if (json) {
		bench_json(stdout, r);
		return;
	}
	printf("%-34s %3d %10.4g %-4s", what, r->threads, r->value, r->unit);
	if (r->limit_name)
		printf("  %-16s %10.4g  %6.3f", r->limit_name, r->limit_value, r->ratio);
	putchar('\n');
}

/* Milliseconds to write BYTES at P once, then again (the second in *AGAIN). */
static double touch_ms(unsigned char *p, size_t bytes, double *again)
{
	double t0 = bench_now();
	memset(p, 1, bytes);
	double t1 = bench_now();
	memset(p, 2, bytes);
	*again = (bench_now() - t1) * 1e3;
	return (t1 - t0) * 1e3;
}

static void first_touch(size_t bytes, int *ok)
{
	double again, ms;
	struct bench_result r = { .bench = "pool-first-touch", .threads = 1, .unit = "ms",
				  .limit_name = "rewrite" };
	char what[64];

	unsigned char *p = aligned_alloc(64, bytes);
	if (!p) {
		*ok = 0;
		return;
	}
	ms = touch_ms(p, bytes, &again);
	r.kernel = "malloc";
	r.value = ms;
	r.limit_value = again;
	r.ratio = again / ms;
	print(&r, "first touch, malloc");
	free(p);

	/*
	 * Run 0 is the first pool, unlocked: its faults find few free 2 MiB
	 * pages and compact memory for them (defrag=madvise), a cost that the
	 * runs after it, getting the pages it freed, do not pay.  It is
	 * printed on its own line; runs 1 and 2 are the steady state.
	 */
	for (int run = 0; run < 3; run++) {
		int lock = run == 2;
		struct qg_hugepool_opts o = { .bytes = bytes, .lock = lock ? QG_HUGEPOOL_LOCK_TRY : QG_HUGEPOOL_LOCK_NO };
		struct qg_hugepool *pool = NULL;
		char err[256];
		double t0 = bench_now();
		if (qg_hugepool_new(&o, &pool, err, sizeof err)) {
			fprintf(stderr, "bench-pool: %s\n", err);
			*ok = 0;
			return;
		}
		double start_ms = (bench_now() - t0) * 1e3;
		const struct qg_hugepool_info *in = qg_hugepool_info(pool);
		if (!json)
			printf("# %s (start-up %.1f ms)\n", in->text, start_ms);
		ms = touch_ms(qg_hugepool_base(pool), bytes, &again);
		snprintf(what, sizeof what, "first touch, %s pool %s%s", run ? "next" : "first", lock ? "locked " : "",
			 in->kind == QG_HUGEPOOL_HUGETLB ? "hugetlb" : in->kind == QG_HUGEPOOL_THP ? "thp" : "plain");
		r.kernel = run == 0 ? "first-pool" : lock && in->locked ? "pool-locked" : "pool";
		r.value = ms;
		r.limit_value = again;
		r.ratio = again / ms;
		print(&r, what);
		r.bench = "pool-start-up";
		r.value = start_ms;
		r.limit_name = NULL;
		print(&r, run == 0 ? "start-up, first pool" : lock ? "start-up, pool locked" : "start-up, pool");
		r.bench = "pool-first-touch";
		r.limit_name = "rewrite";
		qg_hugepool_free(pool);
	}
}

struct job {
	struct qg_mm mm;
	void *scratch;
	const uint8_t *read;
	size_t read_bytes;
	_Atomic uint64_t sink;
};

static void gemv_job(struct bench_pool *p, void *arg, int ith, int nth)
{
	struct job *j = arg;

	qg_mul_mat_quantize(&j->mm, j->scratch, ith, nth);
	bench_barrier(p);
	qg_mul_mat_compute(&j->mm, j->scratch, ith, nth);
}

static void read_job(struct bench_pool *p, void *arg, int ith, int nth)
{
	struct job *j = arg;
	size_t share = j->read_bytes / (size_t)nth / 256 * 256;

	(void)p;
	atomic_fetch_xor_explicit(&j->sink, bench_read(j->read + share * (size_t)ith, share),
				  memory_order_relaxed);
}

static void gemv(size_t bytes, int quick, int *ok)
{
	enum qg_type type = qg_best_weight_type();
	int layout = qg_layout_of(type);
	float *x = malloc(K_COLS * sizeof *x), *y = malloc(M_ROWS * sizeof *y);
	unsigned char *wm = aligned_alloc(64, bytes);
	struct qg_hugepool_opts o = { .bytes = bytes, .lock = QG_HUGEPOOL_LOCK_TRY };
	struct qg_hugepool *pool = NULL;
	size_t off;
	char err[256];

	if (layout < 0 || !x || !y || !wm || fill_weights(type, wm, bytes) ||
	    qg_hugepool_new(&o, &pool, err, sizeof err) || qg_hugepool_alloc(pool, 1, bytes, &off)) {
		fprintf(stderr, "bench-pool: cannot set up the GEMV\n");
		*ok = 0;
		goto out;
	}
	unsigned char *wp = (unsigned char *)qg_hugepool_base(pool) + off;
	memcpy(wp, wm, bytes);
	for (int i = 0; i < K_COLS; i++)
		x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
	const struct qg_kernel *kern = qg_kernel_for((enum qg_layout)layout);
	if (!json)
		printf("# weights %s, kernel %s; AnonHugePages: malloc %ld kB, pool %ld kB (%s)\n",
		       qg_type_name(type), kern->name, huge_kb(wm), huge_kb(wp), qg_hugepool_info(pool)->text);

	static const int threads[] = { 1, 2 };
	for (int t = 0; t < 2; t++) {
		struct bench_pool bp;
		if (bench_pool_start(&bp, threads[t])) {
			*ok = 0;
			break;
		}
		struct job jm = { .mm = { .wtype = type, .w = wm, .m = M_ROWS, .k = K_COLS, .x = x, .ldx = K_COLS,
					  .n = 1, .y = y, .ldy = M_ROWS } };
		struct job jp = jm;
		jp.mm.w = wp;
		void *scratch = aligned_alloc(64, (qg_mul_mat_scratch_size(&jm.mm) + 63) & ~(size_t)63);
		jm.scratch = jp.scratch = scratch;
		jm.read = wm;
		jp.read = wp;
		jm.read_bytes = jp.read_bytes = bytes;
		int reps = quick ? 9 : 41;
		double vm[41], vp[41], rm[41], rp[41];
		bench_pool_run(&bp, gemv_job, &jm);
		bench_pool_run(&bp, gemv_job, &jp);
		for (int i = 0; i < reps; i++) {
			/* alternate, so that drift in the machine hits both alike */
			struct job *js[2] = { i & 1 ? &jp : &jm, i & 1 ? &jm : &jp };
			double *vs[2] = { i & 1 ? vp : vm, i & 1 ? vm : vp };
			double *rs[2] = { i & 1 ? rp : rm, i & 1 ? rm : rp };
			for (int w = 0; w < 2; w++) {
				double t0 = bench_now();
				bench_pool_run(&bp, gemv_job, js[w]);
				vs[w][i] = bench_now() - t0;
				t0 = bench_now();
				bench_pool_run(&bp, read_job, js[w]);
				rs[w][i] = bench_now() - t0;
			}
		}
		double tm = bench_median(vm, reps), tp = bench_median(vp, reps);
		double bm = (double)bytes / bench_median(rm, reps), bpw = (double)bytes / bench_median(rp, reps);
		struct bench_result r = { .bench = "pool-gemv", .m = M_ROWS, .n = 1, .k = K_COLS,
					  .threads = threads[t], .layout = qg_type_name(type), .kernel = "malloc",
					  .value = (double)bytes / tm / 1e9, .unit = "GB/s",
					  .limit_name = "read bandwidth", .limit_value = bm / 1e9 };
		r.ratio = r.value / r.limit_value;
		print(&r, "GEMV 75 MB, malloc memory");
		r.kernel = "pool";
		r.value = (double)bytes / tp / 1e9;
		r.limit_value = bpw / 1e9;
		r.ratio = r.value / r.limit_value;
		print(&r, "GEMV 75 MB, pool memory");
		struct bench_result s = { .bench = "pool-gemv-speedup", .m = M_ROWS, .n = 1, .k = K_COLS,
					  .threads = threads[t], .layout = qg_type_name(type), .kernel = kern->name,
					  .value = tm / tp, .unit = "x", .limit_name = "malloc memory",
					  .limit_value = 1.0, .ratio = tm / tp };
		print(&s, "GEMV pool speed / malloc speed");
		free(scratch);
		bench_pool_stop(&bp);
	}
out:
	qg_hugepool_free(pool);
	free(wm);
	free(x);
	free(y);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "quick", no_argument, NULL, 'q' },
		{ NULL, 0, NULL, 0 },
	};
	int c, quick = 0, ok = 1;
	size_t bytes = (size_t)M_ROWS * K_COLS / QG_QK * sizeof(struct qg_block_q4_0);

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'j')
			json = 1;
		else if (c == 'q')
			quick = 1;
		else {
			fprintf(stderr, "usage: bench-pool [--json] [--quick]\n");
			return 2;
		}
	}
	if (!json)
		printf("%-34s %3s %10s %-4s  %-16s %10s  %6s\n", "what", "thr", "value", "unit", "limit", "value",
		       "ratio");
	first_touch(bytes, &ok);
	gemv(bytes, quick, &ok);
	return ok ? 0 : 1;
}
