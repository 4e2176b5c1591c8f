/*
 * tap.h - a few macros that print TAP for Automake's tap-driver.
 *
 *   tap_ok(cond, "fmt", ...)    one result
 *   tap_skip("why")             one skipped result
 *   tap_diag("fmt", ...)        a comment line
 *   return tap_done();          prints the plan; exit status 1 if any failed
 *
 * QGRAPH_TEST_SCALE (default 1) scales the randomized tests: 0 runs their
 * smallest form, larger values run more cases.
 */
#ifndef QG_TAP_H
#define QG_TAP_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3), unused))
static int tap_ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", cond ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!cond)
		tap_failed++;
	return cond;
}

__attribute__((unused))
static void tap_skip(const char *why)
{
	printf("ok %d # SKIP %s\n", ++tap_n, why);
	fflush(stdout);
}

__attribute__((format(printf, 1, 2), unused))
static void tap_diag(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

__attribute__((unused))
static int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

/* fork(), or a bail-out (exit 99) when it fails: a test must never go on
 * with a pid of -1, which kill() takes as every process it may signal. */
__attribute__((unused))
static pid_t tap_fork(void)
{
	fflush(NULL);	/* the child must not print the parent's buffered lines again */
	pid_t pid = fork();
	if (pid < 0) {
		printf("Bail out! fork: %s\n", strerror(errno));
		exit(99);
	}
	return pid;
}

/* The test scale: QGRAPH_TEST_SCALE, default 1, clamped to 0..100. */
__attribute__((unused))
static int tap_scale(void)
{
	const char *s = getenv("QGRAPH_TEST_SCALE");
	int v = s ? atoi(s) : 1;

	return v < 0 ? 0 : v > 100 ? 100 : v;
}

/* A small deterministic PRNG (xorshift64*), so failures reproduce. */
struct tap_rng {
	unsigned long long s;
};

__attribute__((unused))
static unsigned long long tap_rand(struct tap_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 2685821657736338717ULL;
}

/* Uniform in [lo, hi). */
__attribute__((unused))
static float tap_randf(struct tap_rng *r, float lo, float hi)
{
	return lo + (hi - lo) * (float)((tap_rand(r) >> 40) * (1.0 / 16777216.0));
}

#endif /* QG_TAP_H */
