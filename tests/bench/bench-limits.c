/*
 * bench-limits.c - the limits bench-mulmat sets its figures against,
 * measured in the same run: the read bandwidth and the int8
 * multiply-accumulate peak (bench-limits.h).
 */
#include "config.h"

#include <stdatomic.h>

#include "bench-limits.h"

struct bw_arg {
	const uint8_t *buf;
	size_t len;
	_Atomic uint64_t sink;
};

static void bw_job(struct bench_pool *p, void *arg, int ith, int nth)
{
	struct bw_arg *a = arg;
	size_t chunk = a->len / (size_t)nth / 256 * 256;
	uint64_t v = bench_read(a->buf + chunk * (size_t)ith, chunk);

	atomic_fetch_xor_explicit(&a->sink, v, memory_order_relaxed);
}

/* One timed read of the bytes at A with the pool's threads: bytes/s. */
static double read_once(struct bench_pool *pool, struct bw_arg *a)
{
	const size_t chunk = a->len / (size_t)pool->nth / 256 * 256;
	const double t0 = bench_now();

	bench_pool_run(pool, bw_job, a);
	return (double)(chunk * (size_t)pool->nth) / (bench_now() - t0);
}

double bench_read_once(struct bench_pool *pool, const uint8_t *buf, size_t len)
{
	struct bw_arg a = { .buf = buf, .len = len };

	bench_pool_run(pool, bw_job, &a);	/* the pages and the threads warmed */
	return read_once(pool, &a);
}

double bench_read_bw(struct bench_pool *pool, const uint8_t *buf, size_t len, int quick)
{
	struct bw_arg a = { .buf = buf, .len = len };
	double v[64];
	int reps = quick ? 5 : 15;

	bench_pool_run(pool, bw_job, &a);
	for (int i = 0; i < reps; i++)
		v[i] = 1.0 / read_once(pool, &a);
	return 1.0 / bench_min(v, reps);
}

struct mac_arg {
	uint64_t iters;
	enum qg_kfamily family;		/* whose MAC instruction (see bench_macs) */
	_Atomic uint64_t macs;
	_Atomic int32_t sink;
};

static void mac_job(struct bench_pool *p, void *arg, int ith, int nth)
{
	struct mac_arg *a = arg;
	int32_t s;
	uint64_t n = bench_macs(a->family, a->iters, &s);

	atomic_fetch_add_explicit(&a->macs, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&a->sink, s, memory_order_relaxed);
}

/* int8 MACs/s of FAMILY's MAC loop with the pool's threads; 0 when none runs here. */
double bench_int8_peak(struct bench_pool *pool, int quick, enum qg_kfamily family)
{
	struct mac_arg a = { .iters = 1000, .family = family };
	double v[64];
	int reps = quick ? 5 : 11;

	if (!bench_macs_name(family)[0])
		return 0;
	/* size the loop to about 20 ms */
	for (;;) {
		atomic_store(&a.macs, 0);
		double t0 = bench_now();
		bench_pool_run(pool, mac_job, &a);
		double dt = bench_now() - t0;
		if (dt > 0.02 || a.iters > ((uint64_t)1 << 40))
			break;
		a.iters *= dt < 0.002 ? 10 : 2;
	}
	uint64_t macs = 0;
	for (int i = 0; i < reps; i++) {
		atomic_store(&a.macs, 0);
		double t0 = bench_now();
		bench_pool_run(pool, mac_job, &a);
		v[i] = bench_now() - t0;
		macs = atomic_load(&a.macs);
	}
	return (double)macs / bench_min(v, reps);
}

