/*
 * bench-mulmat.c - mul_mat GFLOP/s per weight layout and kernel, beside the
 * limits measured in the same run.
 *
 *   bench-mulmat [--json] [--quick] [--kernel FAMILY | --all-kernels]
 *                [--threads LIST] [--layout L] [--n N]
 *   bench-mulmat --kernel-only --layout L --n N --repeat R [--kernel FAMILY]
 *                [--row-by-row]
 *   bench-mulmat --kernel-only --type T --n N --repeat R [--kernel FAMILY]
 *                [--gemm-rows G] [--row-by-row]
 *   bench-mulmat --kernel-only --type T --n N --repeat R --ggml LIBGGML_CPU
 *
 * Shapes: m = k = 4096 with n in {1, 8, 32, 128, 512}, and m = 32768,
 * k = 4096 at n = 1 (75 MB of weights, beyond the last-level cache), at 1
 * and 2 threads; then Q4_K, Q6_K and Q8_0 weights (one weight row at a
 * time, met by four activation rows where the kernels can; Q8_0 in the
 * layout the daemon stores it in, qg_kq_q8_0_type) at n in {1, 8,
 * 32, 128} and the same big n = 1 case, each against what ggml runs for
 * the type on this CPU (libggml-cpu.so named by --ggml, or found in
 * $QG_GGML_BINDIR): its repacked GEMM/GEMV where it repacks the type (on
 * x86 Q4_K 8x8; on aarch64 all three), else its vec_dot on the same
 * bytes, in --rounds interleaved rounds: the medians, and ggml's time
 * over ours.  A result is the median over repetitions of one whole
 * mul_mat (activation quantization, barrier, GEMM/GEMV), as
 * 2*m*n*k / time.
 *
 * Limits, per thread count: the read bandwidth over a buffer the size of
 * the 75 MB weights (the widest vector loads the CPU has), and the int8
 * multiply-accumulate peak of a tight loop of vpdpbusd zmm (AVX-512 VNNI),
 * vpmaddubsw ymm (AVX2, each product added to its accumulator) or sdot
 * (aarch64 dotprod), with twelve (eight) independent accumulators: the
 * instruction of the family that runs (--kernel or QGRAPH_KERNELS), so
 * forced AVX2 kernels are measured against vpmaddubsw.  A limit is the
 * fastest of its repetitions (bench_min says why).  Ratios: the 75 MB n = 1
 * case as weight bytes per second over the bandwidth; n >= 8 as MACs per
 * second over the peak.  The plain types' n = 1 rounds each read their
 * own weights with the widest loads right after the kernels ran, and take
 * the median of the rounds' ratios: this host's bandwidth drifts by more
 * than a third from one second to the next, so a limit measured once at
 * the start says little about a kernel timed a minute later.
 *
 * --limits measures the limits alone and stops (bench-llama.sh reads the
 * read bandwidth so).
 *
 * --kernel-only runs one kernel R times on m = k = 4096 with nothing else
 * in the loop (GEMM on the groups of four rows, GEMV on the rest: two or
 * three rows through the kernel's gemv_rows where it has one, as mul_mat
 * runs them, or one GEMV per row with --row-by-row), for instruction
 * counts under qemu: two runs that differ only in R give the kernel's
 * count (tests/bench/insn-table.sh).  With --type T the plain type's
 * kernels as mul_mat runs them (its one-row GEMV over many weight rows
 * where the family has one; --row-by-row: its one-row dot per weight
 * row instead).  Q8_0 weights are in the layout the daemon stores them
 * in on this CPU (qg_best_q8_0_type(): Q8_0_4X4 on dotprod CPUs, or for
 * the family --kernel names), which the output's layout line names;
 * --row-by-row keeps plain Q8_0.  With --type T --ggml LIB, ggml's
 * kernel for T in our place.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-limits.h"
#include "bench.h"
#include "ggml-peer.h"
#include "fp16.h"
#include "kernels.h"
#include "kquant.h"
#include "mulmat.h"
#include "quant.h"

#define K_DIM 4096
#define M_SMALL 4096
#define M_BIG 32768
#define N_MAX 512

static const int ns_all[] = { 1, 8, 32, 128, 512 };

struct opts {
	int json, quick, all_kernels, kernel_only, limits_only;
	int row_by_row;		/* --kernel-only: one GEMV per row even where gemv_rows exists */
	int gemm_rows;		/* --kernel-only --type: the K-quant GEMM from this many rows; 0: the family's */
	int family;		/* -1: dispatched */
	int layout;		/* -1: all */
	int n;			/* 0: all */
	long repeat;
	int threads[8], nthreads;
	int type;		/* the plain type to run alone, or -1 */
	int rounds;		/* interleaved rounds against ggml */
	const char *ggml_lib;	/* libggml-cpu.so to compare with, or NULL */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench-mulmat [--json] [--quick] [--kernel FAMILY | --all-kernels]\n"
		"                    [--threads 1,2] [--layout 4x4|4x8|8x8] [--n N]\n"
		"                    [--type q4_K|q6_K|q8_0] [--rounds R] [--ggml LIBGGML_CPU]\n"
		"       bench-mulmat --kernel-only --layout L --n N --repeat R [--kernel FAMILY]\n"
		"                    [--row-by-row]\n"
		"       bench-mulmat --kernel-only --type q4_K|q6_K|q8_0 --n N --repeat R [--kernel FAMILY]\n"
		"                    [--gemm-rows G] [--row-by-row]\n"
		"       bench-mulmat --kernel-only --type q4_K|q6_K|q8_0 --n N --repeat R --ggml LIBGGML_CPU\n"
		"       bench-mulmat --limits [--json] [--quick] [--threads 1,2]\n");
}

/*
 * M x K weights in LAYOUT: random Q4_0 blocks (random nibbles, scales in
 * [2^-10, 2^-7)) repacked.  The values do not matter for speed, and this
 * avoids holding M*K floats for the 75 MB case.
 */
static void *make_weights(enum qg_layout layout, int64_t m, int64_t k, size_t *bytes)
{
	const int64_t nb = m * k / QG_QK;
	struct qg_block_q4_0 *q = bench_q4_0_blocks(nb, 0x243f6a8885a308d3ULL ^ (uint64_t)m);

	*bytes = (size_t)nb * sizeof *q;
	void *w = bench_alloc(*bytes);
	ssize_t n = qg_repack(qg_layout_type(layout), w, *bytes, QG_TYPE_Q4_0, q, m, k);
	free(q);
	if (n != (ssize_t)*bytes) {
		fprintf(stderr, "bench-mulmat: repack failed: %zd\n", n);
		exit(1);
	}
	return w;
}

static float *make_x(int64_t n, int64_t k)
{
	float *x = bench_alloc((size_t)(n * k) * sizeof *x);

	bench_fill_x(x, n * k);
	return x;
}

/* Repeat FN until there are enough samples; returns the median seconds. */
struct timing {
	double min_time;	/* total seconds at least */
	int min_reps, max_reps;
	double max_total;	/* stop after this many seconds once min_reps... */
};

static void mm_job(struct bench_pool *p, void *arg, int ith, int nth)
{
	void **a = arg;
	const struct qg_mm *mm = a[0];

	qg_mul_mat_quantize(mm, a[1], ith, nth);
	bench_barrier(p);
	qg_mul_mat_compute(mm, a[1], ith, nth);
}

/* The median seconds of FN(ARG) on the pool, repeated as T says. */
static double time_fn(struct bench_pool *pool, bench_fn fn, void *arg, const struct timing *t)
{
	double v[256], total = 0;
	int reps = 0;

	bench_pool_run(pool, fn, arg);	/* warm up */
	while (reps < t->max_reps && reps < 256) {
		double t0 = bench_now();
		bench_pool_run(pool, fn, arg);
		v[reps++] = bench_now() - t0;
		total += v[reps - 1];
		if (reps >= t->min_reps && total >= t->min_time)
			break;
		if (reps >= 3 && total >= t->max_total)
			break;
	}
	return bench_median(v, reps);
}

static double time_mm(struct bench_pool *pool, const struct qg_mm *mm, void *scratch,
		      const struct timing *t)
{
	void *arg[2] = { (void *)mm, scratch };

	return time_fn(pool, mm_job, arg, t);
}

/* ---------------------------------------------------------------- runs */

static const char *const layout_names[QG_LAYOUT_COUNT] = { "4x4", "4x8", "8x8" };

static int parse_layout(const char *s)
{
	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		if (strcmp(s, layout_names[l]) == 0 || qg_type_from_name(s) == (int)qg_layout_type(l))
			return l;
	return -1;
}

/* The kernels to run for LAYOUT (at most QG_KF_COUNT). */
static int kernels_for(const struct opts *o, enum qg_layout l, const struct qg_kernel **out)
{
	int n = 0;

	if (o->all_kernels) {
		for (int f = 0; f < QG_KF_COUNT; f++)
			if ((out[n] = qg_kernel_get(f, l)))
				n++;
	} else if (o->family >= 0) {
		if ((out[n] = qg_kernel_get(o->family, l)))
			n++;
	} else {
		out[n++] = qg_kernel_for(l);
	}
	return n;
}

/*
 * --kernel-only --type q8_0 where the family stores Q8_0 weights as
 * Q8_0_4X4 (qg_kq_q8_0_type): its kernels for that layout alone, R times
 * over m = k = 4096, as mul_mat runs them: the GEMM on each group of four
 * activation rows, the GEMV on the rest.
 */
static int kernel_only_q8_0_4x4(const struct opts *o, const struct qg_kq_kernel *kq)
{
	const int64_t m = M_SMALL, k = K_DIM, n = o->n > 0 ? o->n : 1, nb = k / QG_QK, groups = n / 4;
	const size_t wbytes = (size_t)qg_matrix_size(QG_TYPE_Q8_0_4X4, m, k), wstride = wbytes / (size_t)(m / 4);
	float *x = make_x(n, k), *y = bench_alloc((size_t)(n * m) * sizeof *y);
	uint8_t *w8 = bench_plain_weights(QG_TYPE_Q8_0, m, k, wbytes), *w = bench_alloc(wbytes);
	struct qg_block_q8_0 *a = bench_alloc((size_t)(n * nb) * sizeof *a);
	struct qg_q8_0x4_act *act = bench_alloc((size_t)(groups * nb + 1) * sizeof *act);

	if (qg_repack(QG_TYPE_Q8_0_4X4, w, wbytes, QG_TYPE_Q8_0, w8, m, k) != (ssize_t)wbytes) {
		fprintf(stderr, "bench-mulmat: repacking to q8_0_4x4 failed\n");
		return 1;
	}
	for (int64_t r = 0; r < n; r++)
		qg_quantize_row_q8_0(x + r * k, a + r * nb, k);
	for (int64_t g = 0; g < groups; g++)
		qg_q8_0x4_act_pack(act + g * nb, a + g * 4 * nb, (size_t)nb, nb);
	for (long it = 0; it < o->repeat; it++) {
		if (groups)
			kq->q8_0_4x4_gemm(k, y, (size_t)m, w, wstride, (int)m, act, (int)(groups * 4));
		for (int64_t i = groups * 4; i < n; i++)
			kq->q8_0_4x4_gemv(k, y + i * m, w, wstride, (int)m, a + i * nb);
	}
	printf("kernel: %s (%s, q8_0_4x4)\nlayout: q8_0_4x4\nm: %lld\nn: %lld\nk: %lld\nrepeat: %ld\nmacs: %.0f\ncheck: %g\n",
	       kq->name, groups ? "gemm" : "gemv", (long long)m, (long long)n, (long long)k, o->repeat,
	       (double)m * (double)n * (double)k * (double)o->repeat, (double)y[0]);
	free(x);
	free(y);
	free(w8);
	free(w);
	free(a);
	free(act);
	return 0;
}

/*
 * --kernel-only --type T: T's plain-type kernels alone, R times over
 * m = k = 4096, as mul_mat runs them: the family's GEMM where N is at
 * least its gemm_rows (Q8_0: its q8_0_gemm_rows if set; --gemm-rows G
 * in its place: a G above N measures what runs without the GEMM), else
 * the GEMV over all m weight rows for each activation row where the
 * family has one (after the four-row entry on each group of four rows
 * where it sets x4_before_gemv), else (or with --row-by-row) the
 * four-row entry on each group of four activation rows and the one-row
 * entry on the rest.
 */
static int kernel_only_plain(const struct opts *o)
{
	const int64_t m = M_SMALL, k = K_DIM, n = o->n > 0 ? o->n : 1;
	const struct qg_kq_kernel *kq = o->family >= 0 ? qg_kq_kernel_get(o->family) : qg_kq_kernel_for();
	const enum qg_type wt = (enum qg_type)o->type;

	if (!kq) {
		fprintf(stderr, "bench-mulmat: %s has no K-quant kernels that run here\n", qg_kfamily_name(o->family));
		return 2;
	}
	/* Q8_0: the layout the daemon stores it in for this family */
	if (wt == QG_TYPE_Q8_0 && qg_kq_q8_0_type(kq) == QG_TYPE_Q8_0_4X4 && !o->row_by_row)
		return kernel_only_q8_0_4x4(o, kq);
	const size_t wbytes = (size_t)qg_matrix_size(wt, m, k);
	const size_t arow = wt == QG_TYPE_Q8_0 ? (size_t)qg_row_size(QG_TYPE_Q8_0, k)
				: (size_t)(k / QG_QK_K) * sizeof(struct qg_block_q8_K);
	const int64_t nba = wt == QG_TYPE_Q8_0 ? k / QG_QK : k / QG_QK_K;
	float *x = make_x(n, k), *y = bench_alloc((size_t)(n * m) * sizeof *y);
	uint8_t *w = bench_plain_weights(wt, m, k, wbytes), *a = bench_alloc((size_t)n * arow);
	for (int64_t r = 0; r < n; r++) {
		if (wt == QG_TYPE_Q8_0)
			qg_quantize_row_q8_0(x + r * k, (struct qg_block_q8_0 *)(a + (size_t)r * arow), k);
		else
			qg_quantize_row_q8_K(x + r * k, (struct qg_block_q8_K *)(a + (size_t)r * arow), k);
	}
	const qg_kq_dot_fn dot = wt == QG_TYPE_Q4_K ? kq->q4_K : wt == QG_TYPE_Q6_K ? kq->q6_K : kq->q8_0;
	const qg_kq_dot4_fn dot4 = wt == QG_TYPE_Q4_K ? kq->q4_K_x4 : wt == QG_TYPE_Q6_K ? kq->q6_K_x4 : kq->q8_0_x4;
	const qg_kq_gemv_fn gemv = o->row_by_row	  ? NULL
				   : wt == QG_TYPE_Q4_K ? kq->q4_K_gemv
				   : wt == QG_TYPE_Q6_K ? kq->q6_K_gemv : kq->q8_0_gemv;
	const qg_kq_gemm_fn gemm = wt == QG_TYPE_Q4_K ? kq->q4_K_gemm : wt == QG_TYPE_Q6_K ? kq->q6_K_gemm : NULL;
	const qg_q8_0_gemm_fn gemm8 = wt == QG_TYPE_Q8_0 ? kq->q8_0_gemm : NULL;
	const int rows = gemm8 && kq->q8_0_gemm_rows > 0 ? kq->q8_0_gemm_rows : kq->gemm_rows;
	const int use_gemm = (gemm || gemm8) && n >= (o->gemm_rows > 0 ? o->gemm_rows : rows);
	const size_t wrow = wbytes / (size_t)m;
	/* the Q8_0 GEMM's side table of each activation block's scale and -128 times its sum, as mul_mat keeps it */
	struct qg_q8_0_aux *aux = bench_alloc((size_t)(gemm8 ? n * nba : 1) * sizeof *aux);
	for (int64_t b = 0; gemm8 && b < n * nba; b++) {
		const struct qg_block_q8_0 *blk = (const struct qg_block_q8_0 *)(const void *)a + b;
		int32_t sum = 0;
		for (int j = 0; j < QG_QK; j++)
			sum += blk->qs[j];
		aux[b] = (struct qg_q8_0_aux){ .d = qg_fp16_to_fp32(blk->d), .nsum = -128 * sum };
	}
	for (long it = 0; it < o->repeat; it++) {
		int64_t i = 0;
		if (use_gemm) {
			if (gemm8)
				gemm8(k, y, (size_t)m, w, wrow, (int)m, a, aux, (int)n);
			else
				gemm(k, y, (size_t)m, w, wrow, (int)m, a, (int)n);
			i = n;
		}
		for (; dot4 && (!gemv || kq->x4_before_gemv) && i + 4 <= n; i += 4)
			for (int64_t r = 0; r < m; r++) {
				float out[4];
				dot4(k, w + (size_t)r * wrow, a + (size_t)i * arow, nba, out);
				for (int j = 0; j < 4; j++)
					y[(i + j) * m + r] = out[j];
			}
		for (; gemv && i < n; i++)
			gemv(k, y + i * m, w, wrow, (int)m, a + (size_t)i * arow);
		for (; i < n; i++)
			for (int64_t r = 0; r < m; r++)
				y[i * m + r] = dot ? dot(k, w + (size_t)r * wrow, a + (size_t)i * arow)
						   : qg_vec_dot_q8_0_q8_0(k, (const void *)(w + (size_t)r * wrow),
									  (const void *)(a + (size_t)i * arow));
	}
	/* a family without a kernel for the type leaves it to the portable C */
	printf("kernel: %s%s\nlayout: %s\nm: %lld\nn: %lld\nk: %lld\nrepeat: %ld\nmacs: %.0f\ncheck: %g\n",
	       dot || dot4 || use_gemm ? kq->name : "portable",
	       use_gemm ? " (gemm)" : gemv ? " (gemv)" : "", qg_type_name(wt),
	       (long long)m, (long long)n, (long long)k, o->repeat,
	       (double)m * (double)n * (double)k * (double)o->repeat, (double)y[0]);
	free(x);
	free(y);
	free(w);
	free(a);
	free(aux);
	return 0;
}

/*
 * --kernel-only --type T --ggml LIB: the kernel ggml would run for T on
 * this CPU (gg_peer_init: its repacked GEMM on the groups of four rows and
 * GEMV on the rest, or its vec_dot), alone R times over m = k = 4096, for
 * the same instruction counts as ours.
 */
static int kernel_only_ggml(const struct opts *o)
{
	const int64_t m = M_SMALL, k = K_DIM, n = o->n > 0 ? o->n : 1;
	const enum qg_type wt = (enum qg_type)o->type;
	struct gg gg;
	struct gg_peer peer;

	if (gg_open(&gg, o->ggml_lib) != 0) {
		const char *e = dlerror();
		fprintf(stderr, "bench-mulmat: %s does not load: %s\n", o->ggml_lib, e ? e : "not ggml's CPU backend");
		return 2;
	}
	if (gg_peer_init(&peer, &gg, wt, m, k) != 0) {
		fprintf(stderr, "bench-mulmat: ggml %s: missing from %s\n", peer.what, o->ggml_lib);
		gg_close(&gg);
		return 2;
	}
	size_t wbytes;
	uint8_t *w = gg_make_weights(&peer, wt, m, k, &wbytes), *act = bench_alloc((size_t)n * peer.arow);
	float *x = make_x(n, k), *y = bench_alloc((size_t)(n * m) * sizeof *y);

	int sgemm_ran = 0;
	gg_peer_quantize(&peer, x, k, n, act, 0, 1);
	for (long it = 0; it < o->repeat; it++)
		sgemm_ran = gg_peer_compute(&peer, w, m, k, n, act, y, 0, 1);
	printf("kernel: %s%s\nggml: %s\nlayout: %s\nm: %lld\nn: %lld\nk: %lld\nrepeat: %ld\nmacs: %.0f\ncheck: %g\n",
	       sgemm_ran ? "ggml sgemm" : peer.name, peer.rule && n >= 4 ? " (gemm)" : "", peer.what,
	       qg_type_name(wt), (long long)m, (long long)n, (long long)k, o->repeat,
	       (double)m * (double)n * (double)k * (double)o->repeat, (double)y[0]);
	free(w);
	free(act);
	free(x);
	free(y);
	gg_close(&gg);
	return 0;
}

static int kernel_only(const struct opts *o)
{
	if (o->type >= 0 && o->ggml_lib)
		return kernel_only_ggml(o);
	if (o->type >= 0)
		return kernel_only_plain(o);
	if (o->ggml_lib) {
		fprintf(stderr, "bench-mulmat: --kernel-only --ggml wants --type q4_K, q6_K or q8_0\n");
		return 2;
	}
	const int64_t m = M_SMALL, k = K_DIM, n = o->n > 0 ? o->n : 1;
	const int l = o->layout >= 0 ? o->layout : QG_LAYOUT_8X8;
	const struct qg_kernel *kn = o->family >= 0 ? qg_kernel_get(o->family, l) : qg_kernel_for(l);

	if (!kn) {
		fprintf(stderr, "bench-mulmat: %s has no %s kernel that runs here\n",
			qg_kfamily_name(o->family), layout_names[l]);
		return 2;
	}
	size_t wbytes;
	void *w = make_weights(l, m, k, &wbytes);
	float *x = make_x(n, k);
	float *y = bench_alloc((size_t)(n * m) * sizeof *y);
	const int64_t nb = k / QG_QK, groups = n / 4, rem = n % 4;
	struct qg_block_q8_0x4 *a4 = bench_alloc((size_t)(groups * nb + 1) * sizeof *a4);
	struct qg_block_q8_0 *a1 = bench_alloc((size_t)(rem * nb + 1) * sizeof *a1);

	for (int64_t g = 0; g < groups; g++)
		kn->quant_x4(x + g * 4 * k, (size_t)k, a4 + g * nb, k, kn->act_ileave);
	for (int64_t r = 0; r < rem; r++)
		kn->quant_row(x + (groups * 4 + r) * k, a1 + r * nb, k);
	for (long i = 0; i < o->repeat; i++) {
		if (groups)
			kn->gemm((int)k, y, (size_t)m, w, a4, (int)(groups * 4), (int)m);
		if (rem > 1 && kn->gemv_rows && !o->row_by_row)
			kn->gemv_rows((int)k, y + groups * 4 * m, (size_t)m, w, a1, (int)rem, (int)m);
		else
			for (int64_t r = 0; r < rem; r++)
				kn->gemv((int)k, y + (groups * 4 + r) * m, w, a1 + r * nb, (int)m);
	}
	printf("kernel: %s%s\nlayout: %s\nm: %lld\nn: %lld\nk: %lld\nrepeat: %ld\nmacs: %.0f\ncheck: %g\n",
	       kn->name, rem > 1 && kn->gemv_rows && !o->row_by_row ? " (gemv_rows)" : "", layout_names[l],
	       (long long)m, (long long)n, (long long)k, o->repeat,
	       (double)m * (double)n * (double)k * (double)o->repeat, (double)y[0]);
	free(w);
	free(x);
	free(y);
	free(a4);
	free(a1);
	return 0;
}

static void print_header(const struct opts *o, const char *what)
{
	if (o->json)
		return;
	printf("\n%s\n", what);
	printf("%6s %4s %5s %3s %-6s %-18s %10s %10s  %-26s %s\n", "m", "n", "k", "thr", "layout",
	       "kernel", "GFLOP/s", "ms", "limit", "ratio");
}

static void report(const struct opts *o, const struct bench_result *r, double ms)
{
	if (o->json) {
		bench_json(stdout, r);
		return;
	}
	char lim[64] = "";
	char ratio[16] = "";
	if (r->limit_name) {
		snprintf(lim, sizeof lim, "%s %.1f", r->limit_name, r->limit_value);
		snprintf(ratio, sizeof ratio, "%.1f%%", 100.0 * r->ratio);
	}
	printf("%6lld %4lld %5lld %3d %-6s %-18s %10.2f %10.3f  %-26s %s\n", r->m, r->n, r->k, r->threads,
	       r->layout, r->kernel, r->value, ms, lim, ratio);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct opts o = { .family = -1, .layout = -1, .type = -1, .repeat = 1, .threads = { 1, 2 }, .nthreads = 2 };
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "quick", no_argument, NULL, 'q' },
		{ "kernel", required_argument, NULL, 'K' },
		{ "all-kernels", no_argument, NULL, 'a' },
		{ "threads", required_argument, NULL, 't' },
		{ "layout", required_argument, NULL, 'l' },
		{ "n", required_argument, NULL, 'n' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "kernel-only", no_argument, NULL, 'o' },
		{ "row-by-row", no_argument, NULL, 'B' },
		{ "gemm-rows", required_argument, NULL, 'G' },
		{ "limits", no_argument, NULL, 'L' },
		{ "type", required_argument, NULL, 'T' },
		{ "rounds", required_argument, NULL, 'R' },
		{ "ggml", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'j': o.json = 1; break;
		case 'q': o.quick = 1; break;
		case 'a': o.all_kernels = 1; break;
		case 'o': o.kernel_only = 1; break;
		case 'B': o.row_by_row = 1; break;
		case 'G':
			o.gemm_rows = atoi(optarg);
			if (o.gemm_rows < 1) {
				fprintf(stderr, "bench-mulmat: --gemm-rows wants a count >= 1\n");
				return 2;
			}
			break;
		case 'L': o.limits_only = 1; break;
		case 'K':
			o.family = qg_kfamily_from_name(optarg);
			if (o.family < 0) {
				fprintf(stderr, "bench-mulmat: unknown kernel family %s\n", optarg);
				return 2;
			}
			break;
		case 'l':
			o.layout = parse_layout(optarg);
			if (o.layout < 0) {
				fprintf(stderr, "bench-mulmat: unknown layout %s (4x4, 4x8, 8x8)\n", optarg);
				return 2;
			}
			break;
		case 'n':
			o.n = atoi(optarg);
			if (o.n < 1 || o.n > N_MAX) {
				fprintf(stderr, "bench-mulmat: --n wants 1..%d\n", N_MAX);
				return 2;
			}
			break;
		case 'r':
			o.repeat = atol(optarg);
			if (o.repeat < 0) {
				fprintf(stderr, "bench-mulmat: --repeat wants a count >= 0\n");
				return 2;
			}
			break;
		case 't': {
			char *s = optarg, *end;
			o.nthreads = 0;
			while (*s && o.nthreads < 8) {
				long v = strtol(s, &end, 10);
				if (end == s || v < 1 || v > 64) {
					fprintf(stderr, "bench-mulmat: --threads wants a list like 1,2\n");
					return 2;
				}
				o.threads[o.nthreads++] = (int)v;
				s = *end == ',' ? end + 1 : end;
				if (*end && *end != ',')
					break;
			}
			break;
		}
		case 'T':
			o.type = qg_type_from_name(optarg);
			if (o.type != QG_TYPE_Q4_K && o.type != QG_TYPE_Q6_K && o.type != QG_TYPE_Q8_0) {
				fprintf(stderr, "bench-mulmat: --type wants q4_K, q6_K or q8_0\n");
				return 2;
			}
			o.layout = -1;
			break;
		case 'R':
			o.rounds = atoi(optarg);
			if (o.rounds < 1 || o.rounds > 16) {
				fprintf(stderr, "bench-mulmat: --rounds wants 1..16\n");
				return 2;
			}
			break;
		case 'g': o.ggml_lib = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (o.kernel_only)
		return kernel_only(&o);

	const struct timing tm = {
		.min_time = o.quick ? 0.05 : 0.5,
		.min_reps = o.quick ? 3 : 7,
		.max_reps = o.quick ? 9 : 51,
		.max_total = o.quick ? 2.0 : 20.0,
	};
	const struct timing tm_round = {
		.min_time = o.quick ? 0.02 : 0.1, .min_reps = 3, .max_reps = 15, .max_total = 2.0,
	};
	const int rounds = o.rounds ? o.rounds : o.quick ? 1 : 5;
	if (!o.ggml_lib && getenv("QG_GGML_BINDIR") && *getenv("QG_GGML_BINDIR")) {
		static char lib[4096];
		snprintf(lib, sizeof lib, "%s/libggml-cpu.so", getenv("QG_GGML_BINDIR"));
		o.ggml_lib = lib;
	}
	const double bw_bytes = (double)M_BIG * K_DIM / QG_QK * sizeof(struct qg_block_q4_0);
	double bw[8] = { 0 }, peak[8] = { 0 };
	char bw_name[64], peak_name[64];

	snprintf(bw_name, sizeof bw_name, "read GB/s");
	snprintf(peak_name, sizeof peak_name, "int8 GMAC/s");

	/*
	 * Limits first, per thread count.  The MAC peak is that of the family
	 * that runs (forced by --kernel or QGRAPH_KERNELS: the AVX2 kernels
	 * against vpmaddubsw); with --all-kernels, the CPU's best.
	 */
	const enum qg_kfamily mac_family = o.all_kernels ? QG_KF_COUNT
		: o.family >= 0 ? (enum qg_kfamily)o.family : qg_kernel_for(QG_LAYOUT_8X8)->family;
	{
		uint8_t *buf = bench_alloc((size_t)bw_bytes);
		memset(buf, 1, (size_t)bw_bytes);
		if (!o.json)
			printf("limits (fastest of repetitions; reads: %s over %.1f MB; MACs: %s)\n",
			       bench_read_name(), bw_bytes / 1e6,
			       bench_macs_name(mac_family)[0] ? bench_macs_name(mac_family) : "none on this CPU");
		for (int t = 0; t < o.nthreads; t++) {
			struct bench_pool pool;
			bench_pool_start(&pool, o.threads[t]);
			bw[t] = bench_read_bw(&pool, buf, (size_t)bw_bytes, o.quick);
			peak[t] = bench_int8_peak(&pool, o.quick, mac_family);
			bench_pool_stop(&pool);
			struct bench_result r = {
				.bench = "read-bandwidth", .threads = o.threads[t], .kernel = bench_read_name(),
				.value = bw[t] / 1e9, .unit = "GB/s",
			};
			struct bench_result p = {
				.bench = "int8-mac-peak", .threads = o.threads[t], .kernel = bench_macs_name(mac_family),
				.value = peak[t] / 1e9, .unit = "GMAC/s",
			};
			if (o.json) {
				bench_json(stdout, &r);
				if (peak[t] > 0)
					bench_json(stdout, &p);
			} else {
				printf("  %d thread%s: read %.1f GB/s, int8 peak %.1f GMAC/s\n", o.threads[t],
				       o.threads[t] > 1 ? "s" : "", bw[t] / 1e9, peak[t] / 1e9);
			}
		}
		free(buf);
	}
	if (o.limits_only)
		return 0;

	float *x = make_x(N_MAX, K_DIM);
	float *y = bench_alloc((size_t)N_MAX * M_SMALL * sizeof *y);
	/* what the largest product of any type asks for, with every kernel this CPU runs */
	size_t scratch_max = 0;
	for (int f = 0; f < QG_KF_COUNT; f++) {
		for (int l = 0; l < QG_LAYOUT_COUNT + 4; l++) {
			static const enum qg_type plain[4] = { QG_TYPE_Q4_K, QG_TYPE_Q6_K, QG_TYPE_Q8_0, QG_TYPE_Q8_0_4X4 };
			const int il = l < QG_LAYOUT_COUNT;
			struct qg_mm probe = {
				.wtype = il ? qg_layout_type((enum qg_layout)l) : plain[l - QG_LAYOUT_COUNT],
				.w = x, .m = M_SMALL, .k = K_DIM, .x = x, .ldx = K_DIM, .n = il ? N_MAX : 128,
				.y = y, .ldy = M_SMALL, .kernel = il ? qg_kernel_get((enum qg_kfamily)f, (enum qg_layout)l) : NULL,
			};
			if (il && !probe.kernel)
				continue;
			const size_t need = qg_mul_mat_scratch_size(&probe);
			scratch_max = need > scratch_max ? need : scratch_max;
		}
	}
	void *scratch = bench_alloc(scratch_max);

	for (int l = 0; l < QG_LAYOUT_COUNT && o.type < 0; l++) {
		if (o.layout >= 0 && l != o.layout)
			continue;
		const struct qg_kernel *ks[QG_KF_COUNT];
		int nk = kernels_for(&o, l, ks);
		if (nk == 0) {
			if (!o.json)
				printf("\n%s: no kernel of %s runs here\n", layout_names[l],
				       qg_kfamily_name(o.family));
			continue;
		}
		if (!o.json)
			for (int i = 0; i < nk; i++)
				printf("\n%s: %s (dispatcher: %s)", layout_names[l], ks[i]->name, qg_kernel_reason(l));
		for (int big = 0; big < 2; big++) {
			const int64_t m = big ? M_BIG : M_SMALL;
			if (big && o.n > 1)
				continue;
			size_t wbytes;
			void *w = make_weights(l, m, K_DIM, &wbytes);
			char title[128];
			snprintf(title, sizeof title, "%s weights, %lld x %d (%.1f MB)", layout_names[l],
				 (long long)m, K_DIM, (double)wbytes / 1e6);
			print_header(&o, title);
			for (int i = 0; i < nk; i++) {
				for (int t = 0; t < o.nthreads; t++) {
					struct bench_pool pool;
					bench_pool_start(&pool, o.threads[t]);
					for (size_t ni = 0; ni < sizeof ns_all / sizeof ns_all[0]; ni++) {
						const int64_t n = ns_all[ni];
						if ((big && n != 1) || (o.n && n != o.n))
							continue;
						struct qg_mm mm = {
							.wtype = qg_layout_type(l), .w = w, .m = m, .k = K_DIM,
							.x = x, .ldx = K_DIM, .n = n, .y = y, .ldy = (size_t)m,
							.kernel = ks[i],
						};
						if (qg_mul_mat_check(&mm) != 0 || qg_mul_mat_scratch_size(&mm) > scratch_max) {
							fprintf(stderr, "bench-mulmat: bad product\n");
							return 1;
						}
						double sec = time_mm(&pool, &mm, scratch, &tm);
						double macs = (double)m * (double)n * K_DIM;
						struct bench_result r = {
							.bench = "mulmat", .m = m, .n = n, .k = K_DIM,
							.threads = o.threads[t], .layout = layout_names[l],
							.kernel = ks[i]->name, .value = 2 * macs / sec / 1e9,
							.unit = "GFLOP/s",
						};
						if (big) {
							r.limit_name = bw_name;
							r.limit_value = bw[t] / 1e9;
							r.ratio = (double)wbytes / sec / bw[t];
						} else if (n >= 8 && peak[t] > 0) {
							r.limit_name = peak_name;
							r.limit_value = peak[t] / 1e9;
							r.ratio = macs / sec / peak[t];
						}
						report(&o, &r, sec * 1e3);
					}
					bench_pool_stop(&pool);
				}
			}
			free(w);
		}
	}
	/*
	 * The plain block types (one weight row per output; the K-quants and
	 * Q8_0 meet activation rows four at a time where the kernels can),
	 * against ggml's vec_dot on the same bytes in interleaved rounds.
	 */
	static const enum qg_type plain_types[] = { QG_TYPE_Q4_K, QG_TYPE_Q6_K, QG_TYPE_Q8_0 };
	static const int plain_ns[] = { 1, 8, 16, 32, 128 };
	/* --n N: that N alone, listed or not (4 shows where a GEMM starts to pay), if the scratch has room */
	const int *ns = o.n ? &o.n : plain_ns;
	const size_t nns = !o.n ? sizeof plain_ns / sizeof plain_ns[0] : o.n <= 128 ? 1 : 0;
	struct gg gg;
	const int have_gg = o.ggml_lib && gg_open(&gg, o.ggml_lib) == 0;
	if (!o.json && o.ggml_lib && !have_gg)
		printf("\nggml: %s does not load (no comparison)\n", o.ggml_lib);
	for (size_t ti = 0; ti < sizeof plain_types / sizeof plain_types[0] && o.layout < 0; ti++) {
		const enum qg_type wt = plain_types[ti];
		if (o.type >= 0 && (int)wt != o.type)
			continue;
		const struct qg_kq_kernel *kq = o.family >= 0 ? qg_kq_kernel_get(o.family) : qg_kq_kernel_for();
		const char *kname = kq ? kq->name : "none";
		if (!kq)
			continue;
		/* Q8_0: ours in the layout the daemon stores it in for this family, ggml's as ggml keeps it */
		const enum qg_type st = wt == QG_TYPE_Q8_0 ? qg_kq_q8_0_type(kq) : wt;
		for (int big = 0; big < 2; big++) {
			const int64_t m = big ? M_BIG : M_SMALL;
			if (big && o.n > 1)
				continue;
			size_t wbytes = (size_t)qg_matrix_size(wt, m, K_DIM);
			float *wf = make_x(m, K_DIM);
			void *w = bench_alloc(wbytes), *ws = w;
			qg_quantize(wt, wf, w, wbytes, m, K_DIM, NULL);
			free(wf);
			if (st != wt) {
				ws = bench_alloc(wbytes);
				if (qg_repack(st, ws, wbytes, wt, w, m, K_DIM) != (ssize_t)wbytes) {
					fprintf(stderr, "bench-mulmat: repacking to %s failed\n", qg_type_name(st));
					return 1;
				}
			}
			/* ggml's kernels on its own layout where it repacks, else on our bytes */
			struct gg_peer peer;
			const int have_peer = have_gg && gg_peer_init(&peer, &gg, wt, m, K_DIM) == 0;
			size_t gbytes = wbytes;
			uint8_t *gw = have_peer && peer.rule ? gg_make_weights(&peer, wt, m, K_DIM, &gbytes) : w;
			if (!o.json && have_gg && !big)
				printf("\n%s: ggml %s%s\n", qg_type_name(wt), peer.what,
				       have_peer ? "" : " (missing from the library: no comparison)");
			char title[160];
			snprintf(title, sizeof title, "%s weights, %lld x %d (%.1f MB); %d round%s, medians%s",
				 qg_type_name(st), (long long)m, K_DIM, (double)wbytes / 1e6, rounds,
				 rounds > 1 ? "s" : "", have_peer ? "; ratio vs ggml: its time over ours" : "");
			print_header(&o, title);
			for (int t = 0; t < o.nthreads; t++) {
				struct bench_pool pool;
				bench_pool_start(&pool, o.threads[t]);
				for (size_t ni = 0; ni < nns; ni++) {
					const int64_t n = ns[ni];
					if (big && n != 1)
						continue;
					struct qg_mm mm = {
						.wtype = st, .w = ws, .m = m, .k = K_DIM, .x = x, .ldx = K_DIM,
						.n = n, .y = y, .ldy = (size_t)m,
						.kq_kernel = kq,
					};
					if (qg_mul_mat_check(&mm) != 0 || qg_mul_mat_scratch_size(&mm) > scratch_max) {
						fprintf(stderr, "bench-mulmat: bad product\n");
						return 1;
					}
					struct gg_job gj = {
						.peer = &peer, .w = gw, .m = m, .k = K_DIM, .n = n,
						.x = x, .y = y, .scratch = scratch,
					};
					double ours[16], theirs[16], rbw[16], rq[16], rg[16];
					for (int r = 0; r < rounds; r++) {
						ours[r] = time_mm(&pool, &mm, scratch, &tm_round);
						if (have_peer)
							theirs[r] = time_fn(&pool, gg_job, &gj, &tm_round);
						if (!big)
							continue;
						/* the limit of this round: the same bytes, read by the widest loads */
						rbw[r] = bench_read_bw(&pool, ws, wbytes, 1);
						rq[r] = (double)wbytes / ours[r] / rbw[r];
						rg[r] = have_peer ? (double)wbytes / theirs[r] / rbw[r] : 0;
					}
					const double sec = bench_median(ours, rounds);
					const double macs = (double)m * (double)n * K_DIM;
					struct bench_result r = {
						.bench = "mulmat", .m = m, .n = n, .k = K_DIM, .threads = o.threads[t],
						.layout = qg_type_name(st), .kernel = kname, .value = 2 * macs / sec / 1e9,
						.unit = "GFLOP/s",
					};
					if (big) {
						r.limit_name = bw_name;
						r.limit_value = bench_median(rbw, rounds) / 1e9;
						r.ratio = bench_median(rq, rounds);
					} else if (n >= 8 && peak[t] > 0) {
						r.limit_name = peak_name;
						r.limit_value = peak[t] / 1e9;
						r.ratio = macs / sec / peak[t];
					}
					report(&o, &r, sec * 1e3);
					if (have_peer) {
						const double gsec = bench_median(theirs, rounds);
						struct bench_result g = r;
						g.kernel = gj.sgemm_ran ? "ggml sgemm" : peer.name;
						g.value = 2 * macs / gsec / 1e9;
						g.ratio = big ? bench_median(rg, rounds) : n >= 8 ? macs / gsec / peak[t] : 0;
						report(&o, &g, gsec * 1e3);
						struct bench_result v = {
							.bench = "mulmat-vs-ggml", .m = m, .n = n, .k = K_DIM,
							.threads = o.threads[t], .layout = qg_type_name(st), .kernel = kname,
							.value = gsec / sec, .unit = "x",
						};
						if (o.json)
							bench_json(stdout, &v);
						else
							printf("%*s%.2fx ggml\n", 40, "", gsec / sec);
					}
				}
				bench_pool_stop(&pool);
			}
			if (gw != w)
				free(gw);
			if (ws != w)
				free(ws);
			free(w);
		}
	}
	if (have_gg)
		gg_close(&gg);
	if (!o.json)
		printf("\nratios: n = 1 at m = %d against read bandwidth (weight bytes/s); n >= 8 against the int8 MAC peak\n",
		       M_BIG);
	free(x);
	free(y);
	free(scratch);
	return 0;
}
