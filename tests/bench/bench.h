/*
 * bench.h - what the benchmarks share: a clock, medians, a tiny thread
 * pool with a spinning barrier, the machine limits (read bandwidth, int8
 * multiply-accumulate peak) and the output (a table for people, JSON lines
 * for programs, as DESIGN.md's benchmark convention says).
 *
 * Also the inputs they share: aligned memory that exits when there is
 * none, a small PRNG, random Q4_0 weights and activations.
 *
 * Header-only (static functions): each benchmark is one program.
 */
#ifndef QG_BENCH_H
#define QG_BENCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#include "fp16.h"
#include "kernels.h"
#include "quant.h"

/* ------------------------------------------------------------- time */

__attribute__((unused))
static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * The smallest of N values: the time of a limit's repetition.  Other work
 * on a shared machine only ever slows a repetition, so the fastest is the
 * machine's capacity (a median there measured the neighbours).
 */
__attribute__((unused))
static double bench_min(const double *v, int n)
{
	double m = n > 0 ? v[0] : 0.0;

	for (int i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

/* The largest of N values: a limit's rate, for the reason bench_min gives. */
__attribute__((unused))
static double bench_max(const double *v, int n)
{
	double m = n > 0 ? v[0] : 0.0;

	for (int i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

/* The median of N values (sorts V). */
__attribute__((unused))
static double bench_median(double *v, int n)
{
	if (n <= 0)
		return 0.0;
	qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static inline void bench_relax(void)
{
#if defined(__x86_64__)
	_mm_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

/* ------------------------------------------------------------- pool */

/*
 * NTH threads, the caller being thread 0.  bench_pool_run() starts FN on
 * every thread and returns when all are done; inside FN, bench_barrier()
 * waits for the others (the mul_mat phases need one between them).  Both
 * spin: a benchmark measures work, not wake-up latency.
 */
struct bench_pool;
typedef void (*bench_fn)(struct bench_pool *p, void *arg, int ith, int nth);

struct bench_pool {
	int nth;
	pthread_t tid[64];
	_Atomic unsigned job;		/* bumped to start a job */
	_Atomic int done;		/* workers finished with the current job */
	_Atomic int stop;
	_Atomic int bar_count;
	_Atomic unsigned bar_gen;
	bench_fn fn;
	void *arg;
};

struct bench_worker {
	struct bench_pool *p;
	int ith;
};

__attribute__((unused))
static void bench_barrier(struct bench_pool *p)
{
	if (p->nth == 1)
		return;
	unsigned gen = atomic_load_explicit(&p->bar_gen, memory_order_acquire);
	if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->nth - 1) {
		atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
		/* release: what every thread wrote before arriving is seen after */
		atomic_fetch_add_explicit(&p->bar_gen, 1, memory_order_release);
	} else {
		while (atomic_load_explicit(&p->bar_gen, memory_order_acquire) == gen)
			bench_relax();
	}
}

static void *bench_worker_main(void *v)
{
	struct bench_worker *w = v;
	struct bench_pool *p = w->p;
	unsigned seen = 0;

	for (;;) {
		unsigned j;
		while ((j = atomic_load_explicit(&p->job, memory_order_acquire)) == seen &&
		       !atomic_load_explicit(&p->stop, memory_order_acquire))
			bench_relax();
		if (atomic_load_explicit(&p->stop, memory_order_acquire))
			break;
		seen = j;
		p->fn(p, p->arg, w->ith, p->nth);
		atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
	}
	free(w);
	return NULL;
}

/* Start NTH - 1 workers (NTH <= 64).  Returns 0 or -1. */
__attribute__((unused))
static int bench_pool_start(struct bench_pool *p, int nth)
{
	memset(p, 0, sizeof *p);
	p->nth = nth < 1 ? 1 : nth > 64 ? 64 : nth;
	for (int i = 1; i < p->nth; i++) {
		struct bench_worker *w = malloc(sizeof *w);
		if (!w)
			return -1;
		w->p = p;
		w->ith = i;
		if (pthread_create(&p->tid[i], NULL, bench_worker_main, w) != 0) {
			free(w);
			p->nth = i;
			return -1;
		}
	}
	return 0;
}

__attribute__((unused))
static void bench_pool_run(struct bench_pool *p, bench_fn fn, void *arg)
{
	p->fn = fn;
	p->arg = arg;
	atomic_store_explicit(&p->done, 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->job, 1, memory_order_release);
	fn(p, arg, 0, p->nth);
	while (atomic_load_explicit(&p->done, memory_order_acquire) != p->nth - 1)
		bench_relax();
}

__attribute__((unused))
static void bench_pool_stop(struct bench_pool *p)
{
	atomic_store_explicit(&p->stop, 1, memory_order_release);
	for (int i = 1; i < p->nth; i++)
		pthread_join(p->tid[i], NULL);
}

/* ----------------------------------------------------------- limits */

/* Read LEN bytes (a multiple of 256) as fast as this CPU reads; returns a value to keep. */
#if defined(__x86_64__)
__attribute__((target("avx512f"), unused))
static uint64_t bench_read_avx512(const uint8_t *buf, size_t len)
{
	__m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;

	for (size_t i = 0; i < len; i += 256) {
		a0 = _mm512_xor_si512(a0, _mm512_load_si512((const void *)(buf + i)));
		a1 = _mm512_xor_si512(a1, _mm512_load_si512((const void *)(buf + i + 64)));
		a2 = _mm512_xor_si512(a2, _mm512_load_si512((const void *)(buf + i + 128)));
		a3 = _mm512_xor_si512(a3, _mm512_load_si512((const void *)(buf + i + 192)));
	}
	a0 = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
	return (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(a0));
}

__attribute__((target("avx2"), unused))
static uint64_t bench_read_avx2(const uint8_t *buf, size_t len)
{
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;

	for (size_t i = 0; i < len; i += 128) {
		a0 = _mm256_xor_si256(a0, _mm256_load_si256((const void *)(buf + i)));
		a1 = _mm256_xor_si256(a1, _mm256_load_si256((const void *)(buf + i + 32)));
		a2 = _mm256_xor_si256(a2, _mm256_load_si256((const void *)(buf + i + 64)));
		a3 = _mm256_xor_si256(a3, _mm256_load_si256((const void *)(buf + i + 96)));
	}
	a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
	return (uint64_t)_mm_cvtsi128_si64(_mm256_castsi256_si128(a0));
}
#endif

static uint64_t bench_read_base(const uint8_t *buf, size_t len)
{
#if defined(__x86_64__)
	__m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;

	for (size_t i = 0; i < len; i += 64) {
		a0 = _mm_xor_si128(a0, _mm_load_si128((const void *)(buf + i)));
		a1 = _mm_xor_si128(a1, _mm_load_si128((const void *)(buf + i + 16)));
		a2 = _mm_xor_si128(a2, _mm_load_si128((const void *)(buf + i + 32)));
		a3 = _mm_xor_si128(a3, _mm_load_si128((const void *)(buf + i + 48)));
	}
	a0 = _mm_xor_si128(_mm_xor_si128(a0, a1), _mm_xor_si128(a2, a3));
	return (uint64_t)_mm_cvtsi128_si64(a0);
#elif defined(__aarch64__)
	uint64x2_t a0 = vdupq_n_u64(0), a1 = a0, a2 = a0, a3 = a0;

	for (size_t i = 0; i < len; i += 64) {
		a0 = veorq_u64(a0, vld1q_u64((const uint64_t *)(buf + i)));
		a1 = veorq_u64(a1, vld1q_u64((const uint64_t *)(buf + i + 16)));
		a2 = veorq_u64(a2, vld1q_u64((const uint64_t *)(buf + i + 32)));
		a3 = veorq_u64(a3, vld1q_u64((const uint64_t *)(buf + i + 48)));
	}
	a0 = veorq_u64(veorq_u64(a0, a1), veorq_u64(a2, a3));
	return vgetq_lane_u64(a0, 0);
#else
	uint64_t a[8] = { 0 };

	for (size_t i = 0; i < len; i += 64)
		for (int j = 0; j < 8; j++) {
			uint64_t v;
			memcpy(&v, buf + i + 8 * j, 8);
			a[j] ^= v;
		}
	return a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
#endif
}

/* The widest read loop this CPU runs, and its name. */
__attribute__((unused))
static uint64_t bench_read(const uint8_t *buf, size_t len)
{
#if defined(__x86_64__)
	const struct qg_cpu *c = qg_cpu_features();
	if (c->avx512)
		return bench_read_avx512(buf, len);
	if (c->avx2)
		return bench_read_avx2(buf, len);
#endif
	return bench_read_base(buf, len);
}

__attribute__((unused))
static const char *bench_read_name(void)
{
#if defined(__x86_64__)
	const struct qg_cpu *c = qg_cpu_features();
	return c->avx512 ? "zmm loads" : c->avx2 ? "ymm loads" : "xmm loads";
#elif defined(__aarch64__)
	return "q-register loads";
#else
	return "64-bit loads";
#endif
}

/*
 * int8 multiply-accumulates of ITERS loop trips on one thread, in a tight
 * loop of independent accumulators (enough to cover the instruction's
 * latency at full throughput).  Returns the MACs done, 0 if no such
 * instruction runs here.
 */
#if defined(__x86_64__)
__attribute__((target("avx512f,avx512vnni"), unused))
static uint64_t bench_macs_vnni(uint64_t iters, int32_t *sink)
{
	__m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
	__m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
	__m512i c6 = c0, c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0;

	/*
	 * In asm, so that the compiler can neither merge the twelve identical
	 * chains into one nor fold them: written in C, this loop measured
	 * about 2.8x what the core can do.
	 */
	for (uint64_t i = 0; i < iters; i++) {
		__asm__ volatile("vpdpbusd %[a], %[b], %[c0]\n\tvpdpbusd %[a], %[b], %[c1]\n\t"
				 "vpdpbusd %[a], %[b], %[c2]\n\tvpdpbusd %[a], %[b], %[c3]\n\t"
				 "vpdpbusd %[a], %[b], %[c4]\n\tvpdpbusd %[a], %[b], %[c5]\n\t"
				 "vpdpbusd %[a], %[b], %[c6]\n\tvpdpbusd %[a], %[b], %[c7]\n\t"
				 "vpdpbusd %[a], %[b], %[c8]\n\tvpdpbusd %[a], %[b], %[c9]\n\t"
				 "vpdpbusd %[a], %[b], %[c10]\n\tvpdpbusd %[a], %[b], %[c11]"
				 : [c0] "+v"(c0), [c1] "+v"(c1), [c2] "+v"(c2), [c3] "+v"(c3), [c4] "+v"(c4),
				   [c5] "+v"(c5), [c6] "+v"(c6), [c7] "+v"(c7), [c8] "+v"(c8), [c9] "+v"(c9),
				   [c10] "+v"(c10), [c11] "+v"(c11)
				 : [a] "v"(a), [b] "v"(b));
	}
	c0 = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
			      _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)));
	c0 = _mm512_add_epi32(c0, _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)));
	*sink = _mm512_reduce_add_epi32(c0);
	return iters * 12 * 64;
}

__attribute__((target("avx2"), unused))
static uint64_t bench_macs_avx2(uint64_t iters, int32_t *sink)
{
	__m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
	__m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
	__m256i t0, t1, t2, t3;

	/*
	 * In asm, as the vpdpbusd loop: written in C, the compiler computed
	 * the repeated products once and folded maddubs(b, b) to a constant
	 * (three vpmaddubsw a trip where eight were counted).  Each product
	 * is added to its accumulator (vpaddw), as a kernel must: vpmaddubsw
	 * does not accumulate.
	 */
	for (uint64_t i = 0; i < iters; i++) {
		__asm__ volatile("vpmaddubsw %[b], %[a], %[t0]\n\tvpmaddubsw %[b], %[a], %[t1]\n\t"
				 "vpmaddubsw %[b], %[a], %[t2]\n\tvpmaddubsw %[b], %[a], %[t3]\n\t"
				 "vpaddw %[t0], %[c0], %[c0]\n\tvpaddw %[t1], %[c1], %[c1]\n\t"
				 "vpaddw %[t2], %[c2], %[c2]\n\tvpaddw %[t3], %[c3], %[c3]\n\t"
				 "vpmaddubsw %[b], %[a], %[t0]\n\tvpmaddubsw %[b], %[a], %[t1]\n\t"
				 "vpmaddubsw %[b], %[a], %[t2]\n\tvpmaddubsw %[b], %[a], %[t3]\n\t"
				 "vpaddw %[t0], %[c4], %[c4]\n\tvpaddw %[t1], %[c5], %[c5]\n\t"
				 "vpaddw %[t2], %[c6], %[c6]\n\tvpaddw %[t3], %[c7], %[c7]"
				 : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4),
				   [c5] "+x"(c5), [c6] "+x"(c6), [c7] "+x"(c7),
				   [t0] "=&x"(t0), [t1] "=&x"(t1), [t2] "=&x"(t2), [t3] "=&x"(t3)
				 : [a] "x"(a), [b] "x"(b));
	}
	c0 = _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(c0, c1), _mm256_add_epi16(c2, c3)),
			      _mm256_add_epi16(_mm256_add_epi16(c4, c5), _mm256_add_epi16(c6, c7)));
	*sink = _mm256_extract_epi32(c0, 0);
	return iters * 8 * 32;
}
#endif

#if defined(__aarch64__)
__attribute__((target("arch=armv8.2-a+dotprod"), unused))
static uint64_t bench_macs_sdot(uint64_t iters, int32_t *sink)
{
	int8x16_t a = vdupq_n_s8(3), b = vdupq_n_s8(-5);
	int32x4_t c0 = vdupq_n_s32(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
	int32x4_t c8 = c0, c9 = c0, c10 = c0, c11 = c0;

	for (uint64_t i = 0; i < iters; i++) {
		c0 = vdotq_s32(c0, a, b);
		c1 = vdotq_s32(c1, a, b);
		c2 = vdotq_s32(c2, a, b);
		c3 = vdotq_s32(c3, a, b);
		c4 = vdotq_s32(c4, a, b);
		c5 = vdotq_s32(c5, a, b);
		c6 = vdotq_s32(c6, a, b);
		c7 = vdotq_s32(c7, a, b);
		c8 = vdotq_s32(c8, a, b);
		c9 = vdotq_s32(c9, a, b);
		c10 = vdotq_s32(c10, a, b);
		c11 = vdotq_s32(c11, a, b);
	}
	c0 = vaddq_s32(vaddq_s32(vaddq_s32(c0, c1), vaddq_s32(c2, c3)), vaddq_s32(vaddq_s32(c4, c5), vaddq_s32(c6, c7)));
	c0 = vaddq_s32(c0, vaddq_s32(vaddq_s32(c8, c9), vaddq_s32(c10, c11)));
	*sink = vaddvq_s32(c0);
	return iters * 12 * 16;
}
#endif

/*
 * The int8 MAC loop that bounds kernel family FAMILY on this CPU: on x86-64
 * the vpmaddubsw loop for QG_KF_AVX2, otherwise (any other family, or
 * QG_KF_COUNT: the CPU's best) the best loop the CPU runs.
 */
__attribute__((unused))
static int bench_macs_avx2_for(enum qg_kfamily family)
{
#if defined(__x86_64__)
	const struct qg_cpu *c = qg_cpu_features();
	return c->avx2 && (family == QG_KF_AVX2 || !c->avx512vnni);
#else
	(void)family;
	return 0;
#endif
}

/* The int8 MAC instruction measured for FAMILY on this CPU ("" if none). */
__attribute__((unused))
static const char *bench_macs_name(enum qg_kfamily family)
{
	const struct qg_cpu *c = qg_cpu_features();
#if defined(__x86_64__)
	if (bench_macs_avx2_for(family))
		return "vpmaddubsw ymm";
	if (c->avx512vnni)
		return "vpdpbusd zmm";
#elif defined(__aarch64__)
	if (c->dotprod)
		return "sdot";
#endif
	(void)c;
	(void)family;
	return "";
}

__attribute__((unused))
static uint64_t bench_macs(enum qg_kfamily family, uint64_t iters, int32_t *sink)
{
	const struct qg_cpu *c = qg_cpu_features();
#if defined(__x86_64__)
	if (bench_macs_avx2_for(family))
		return bench_macs_avx2(iters, sink);
	if (c->avx512vnni)
		return bench_macs_vnni(iters, sink);
#elif defined(__aarch64__)
	if (c->dotprod)
		return bench_macs_sdot(iters, sink);
#endif
	(void)c;
	(void)family;
	(void)iters;
	*sink = 0;
	return 0;
}

/* ----------------------------------------------------------- inputs */

/* N bytes aligned to 64; a benchmark without the memory it needs exits. */
__attribute__((unused))
static void *bench_alloc(size_t n)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, n ? n : 64) != 0) {
		fprintf(stderr, "bench: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

/* xorshift64*: the inputs are the same on every run. */
__attribute__((unused))
static uint64_t bench_rng(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

/*
 * NB random Q4_0 blocks from SEED (random nibbles, scales in [2^-10,
 * 2^-7)): the values do not matter for speed, and no floats are held.
 */
__attribute__((unused))
static struct qg_block_q4_0 *bench_q4_0_blocks(int64_t nb, uint64_t seed)
{
	struct qg_block_q4_0 *q = bench_alloc((size_t)nb * sizeof *q);
	uint64_t s = seed;

	for (int64_t i = 0; i < nb; i++) {
		uint64_t r = bench_rng(&s), r2 = bench_rng(&s);
		q[i].d = qg_fp32_to_fp16((float)(0x1p-10 * (1.0 + (double)(r >> 61))));
		memcpy(q[i].qs, &r, 8);
		memcpy(q[i].qs + 8, &r2, 8);
	}
	return q;
}

/* N values in [-1, 1) at X. */
__attribute__((unused))
static void bench_fill_x(float *x, int64_t n)
{
	uint64_t s = 0x13198a2e03707344ULL;

	for (int64_t i = 0; i < n; i++)
		x[i] = (float)((double)(bench_rng(&s) >> 40) / 16777216.0 * 2.0 - 1.0);
}

/* ----------------------------------------------------------- output */

struct bench_result {
	const char *bench;
	long long m, n, k;
	int threads;
	const char *layout;	/* NULL: not applicable */
	const char *kernel;
	double value;
	const char *unit;
	const char *limit_name;	/* NULL: no limit applies */
	double limit_value;
	double ratio;
};

/* Print R as one JSON object on one line (NULL strings and absent shapes as null). */
__attribute__((unused))
static void bench_json(FILE *f, const struct bench_result *r)
{
	fprintf(f, "{\"bench\":\"%s\"", r->bench);
#define BENCH_JSON_INT(name, v) do { if ((v) > 0) fprintf(f, ",\"" name "\":%lld", (long long)(v)); \
		else fprintf(f, ",\"" name "\":null"); } while (0)
#define BENCH_JSON_STR(name, v) do { if (v) fprintf(f, ",\"" name "\":\"%s\"", (v)); \
		else fprintf(f, ",\"" name "\":null"); } while (0)
	BENCH_JSON_INT("m", r->m);
	BENCH_JSON_INT("n", r->n);
	BENCH_JSON_INT("k", r->k);
	BENCH_JSON_INT("threads", r->threads);
	BENCH_JSON_STR("layout", r->layout);
	BENCH_JSON_STR("kernel", r->kernel);
	fprintf(f, ",\"value\":%.6g", r->value);
	BENCH_JSON_STR("unit", r->unit);
	BENCH_JSON_STR("limit_name", r->limit_name);
	if (r->limit_name)
		fprintf(f, ",\"limit_value\":%.6g,\"ratio\":%.4f}\n", r->limit_value, r->ratio);
	else
		fprintf(f, ",\"limit_value\":null,\"ratio\":null}\n");
#undef BENCH_JSON_INT
#undef BENCH_JSON_STR
	fflush(f);
}

#endif /* QG_BENCH_H */
