/*
 * rowops-test.c - the row kernels of the decode step's ops (rowops.h):
 * every family this build and CPU offer against the portable reference,
 * over lengths that leave every tail, with values that reach SILU's
 * clamps; the portable ones against double-precision arithmetic; the
 * choice following a forced matrix-kernel family.  The aarch64 suite runs
 * it on every CPU model.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fp16.h"
#include "kernels.h"
#include "rowops.h"
#include "tap.h"

#define N_MAX 300

static struct tap_rng rng = { 0x243f6a8885a308d3ull };

static double silu_d(double x)
{
	return x / (1.0 + exp(-x));
}

/* |A - B| within REL of |B| plus ABS. */
static bool near(double a, double b, double rel, double abs_)
{
	return fabs(a - b) <= rel * fabs(b) + abs_;
}

/* The values of a row: mostly small, with a few far out (SILU's clamps, exp's range) now and then. */
static void fill(float *v, int64_t n, float span)
{
	for (int64_t i = 0; i < n; i++)
		v[i] = tap_rand(&rng) % 17 == 0 ? tap_randf(&rng, -120.0f, 120.0f) : tap_randf(&rng, -span, span);
}

static void test_attention(const struct qg_rowops *r);

/* The portable kernels against doubles. */
static void test_reference(void)
{
	const struct qg_rowops *p = qg_rowops_get(QG_KF_PORTABLE);
	float x[N_MAX], g[N_MAX], y[N_MAX], cs[N_MAX];
	int bad = 0;

	for (int64_t n = 1; n <= N_MAX; n += n < 40 ? 1 : 37) {
		fill(x, n, 8.0f);
		fill(g, n, 2.0f);
		double ss = 0;
		for (int64_t i = 0; i < n; i++)
			ss += (double)x[i] * x[i];
		bad += !near(p->sumsq(x, n), ss, 1e-6, 0);
		p->silu(y, x, n);
		for (int64_t i = 0; i < n; i++)
			bad += !near(y[i], silu_d(x[i]), 1e-6, 1e-30);
		p->swiglu(y, x, g, n);
		for (int64_t i = 0; i < n; i++)
			bad += !near(y[i], silu_d(x[i]) * g[i], 1e-6, 1e-30);
		const int64_t half = n / 2;
		for (int64_t j = 0; j < half; j++) {
			double a = 0.37 * (double)j + 0.1;
			cs[j] = (float)cos(a);
			cs[half + j] = (float)sin(a);
		}
		for (int neox = 0; neox < 2; neox++) {
			p->rope(y, x, cs, half, neox);
			for (int64_t j = 0; j < half; j++) {
				int64_t u = neox ? j : 2 * j, v = u + (neox ? half : 1);
				double c = cs[j], s = cs[half + j];
				bad += !near(y[u], x[u] * c - x[v] * s, 1e-6, 1e-5);
				bad += !near(y[v], x[u] * s + x[v] * c, 1e-6, 1e-5);
			}
		}
	}
	tap_ok(bad == 0, "portable: sum of squares, silu, swiglu and rope (normal, neox) equal doubles' (%d off)", bad);
	test_attention(p);
}

/*
 * Attention's block products of R (scores and mix) against doubles, over
 * query counts 0..9 (every tail of the four-query passes), key counts
 * and head sizes that leave every tail, rows strided as in a cache.
 * Masked keys hold NaN and infinities, and so does a value row no query
 * weighs: the masked scores must still be -INFINITY exactly and the
 * sums untouched.
 */
enum { AQ = 9, AK = 70, AD = 140, AS = AD + 5 };
/* A float sum of N products, in any order, FMA or not, is within this of the exact one, relative to sum |term|. */
#define SUM_ERR(n) ((double)((n) + 2) * 0x1p-24)

static uint16_t half_of(float x)
{
	return qg_fp32_to_fp16(x);
}

static void test_attention(const struct qg_rowops *r)
{
	static float q[AQ * AD], m[AQ * AK], s[AQ * AK], acc[AQ * AD], acc0[AQ * AD], pw[AQ * AK];
	static uint16_t kv[AK * AS];
	static const int64_t dks[] = { 1, 3, 8, 15, 16, 17, 24, 64, 80, 128, 140 };
	const float scale = 0.125f;
	int sbad = 0, mbad = 0, cases = 0;

	for (size_t di = 0; di < sizeof dks / sizeof dks[0]; di++) {
		const int64_t d = dks[di];
		for (int64_t nk = 1; nk <= AK; nk += nk < 10 ? 1 : 13) {
			for (int64_t nq = 0; nq <= AQ; nq++) {
				const int64_t mdiv = 1 + nq % 3;	/* 1, 2, 3 queries a mask row */
				for (int64_t j = 0; j < nk; j++) {
					const int masked = j % 4 == 2;
					for (int64_t t = 0; t < AS; t++)
						kv[j * AS + t] = half_of(tap_randf(&rng, -1.0f, 1.0f));
					if (masked)	/* garbage a masked key may hold */
						kv[j * AS + j % d] = j % 8 == 2 ? 0x7e00 : 0x7c00;
				}
				for (int64_t i = 0; i < nq; i++)
					for (int64_t t = 0; t < d; t++)
						q[i * d + t] = qg_fp16_to_fp32(half_of(tap_randf(&rng, -2.0f, 2.0f)));
				for (int64_t i = 0; i < (nq + mdiv - 1) / mdiv; i++)
					for (int64_t j = 0; j < nk; j++)
						m[i * AK + j] = j % 4 == 2 ? -INFINITY : tap_randf(&rng, -1.0f, 0.0f);
				for (int with_mask = 1; with_mask >= 0; with_mask--) {
					if (!with_mask && nk > 1)
						for (int64_t j = 2; j < nk; j += 4)	/* unmasked: every key finite */
							kv[j * AS + j % d] = half_of(0.5f);
					r->scores(s, AK, q, nq, kv, AS * sizeof *kv, nk, d, scale, with_mask ? m : NULL, AK,
						  mdiv);
					for (int64_t i = 0; i < nq; i++) {
						for (int64_t j = 0; j < nk; j++) {
							const float mv = with_mask ? m[i / mdiv * AK + j] : 0.0f;
							double want = 0, mag = 0;
							for (int64_t t = 0; t < d; t++) {
								const double x = (double)q[i * d + t] *
									   qg_fp16_to_fp32(kv[j * AS + t]);
								want += x;
								mag += fabs(x);
							}
							want = want * scale + mv;
							const float got = s[i * AK + j];
							const int ok = mv == -INFINITY ? got == -INFINITY
								     : fabs(got - want) <= SUM_ERR(d) * (mag * scale + fabs(mv)) + 1e-30;
							if (!ok && !sbad)
								tap_diag("%s scores, d %lld, nk %lld, nq %lld, [%lld][%lld]: %.9g, "
									 "want %.9g", r->name, (long long)d, (long long)nk,
									 (long long)nq, (long long)i, (long long)j, got, want);
							sbad += !ok;
						}
					}
				}
				/* weights: 0 where masked (key j % 4 == 2, garbage), and for some queries key 1 too */
				for (int64_t j = 2; j < nk; j += 4)
					kv[j * AS + j % d] = j % 8 == 2 ? 0x7e00 : 0xfc00;
				for (int64_t i = 0; i < nq; i++)
					for (int64_t j = 0; j < nk; j++)
						pw[i * AK + j] = j % 4 == 2 || (j == 1 && i % 2) ? 0.0f : tap_randf(&rng, 0.0f, 1.0f);
				for (int64_t i = 0; i < nq * d; i++)
					acc[i] = acc0[i] = tap_randf(&rng, -1.0f, 1.0f);
				r->mix(acc, pw, AK, nq, kv, AS * sizeof *kv, nk, d);
				for (int64_t i = 0; i < nq; i++) {
					for (int64_t t = 0; t < d; t++) {
						double want = acc0[i * d + t], mag = fabs(want);
						for (int64_t j = 0; j < nk; j++) {
							if (pw[i * AK + j] == 0.0f)
								continue;
							const double x = (double)pw[i * AK + j] * qg_fp16_to_fp32(kv[j * AS + t]);
							want += x;
							mag += fabs(x);
						}
						const float got = acc[i * d + t];
						const int ok = fabs(got - want) <= SUM_ERR(nk) * mag + 1e-30;
						if (!ok && !mbad)
							tap_diag("%s mix, d %lld, nk %lld, nq %lld, [%lld][%lld]: %.9g, want %.9g",
								 r->name, (long long)d, (long long)nk, (long long)nq, (long long)i,
								 (long long)t, got, want);
						mbad += !ok;
					}
				}
				cases++;
			}
		}
	}
	tap_ok(sbad == 0, "%s: attention scores over %d shapes equal doubles' (masked: -inf exactly, whatever the key holds)",
	       r->name, cases);
	tap_ok(mbad == 0, "%s: attention mix over %d shapes equals doubles' (a key no query weighs is not read)", r->name,
	       cases);
}

/* FAMILY's kernels against the portable ones. */
/*
 * How many of N floats of GOT differ in their bits from WANT (any NaN
 * equals any NaN); the first difference is told unless SEEN already
 * counts some.
 */
static int floats_off(const char *family, const char *what, const float *want, const float *got, int64_t n, int seen)
{
	int off = 0;

	for (int64_t i = 0; i < n; i++) {
		if (memcmp(&want[i], &got[i], sizeof *want) == 0 || (isnan(want[i]) && isnan(got[i])))
			continue;
		if (!seen && !off)
			tap_diag("%s %s, value %lld of %lld: %a against %a", family, what, (long long)i, (long long)n,
				 got[i], want[i]);
		off++;
	}
	return off;
}

static void test_family(enum qg_kfamily f)
{
	const struct qg_rowops *p = qg_rowops_get(QG_KF_PORTABLE), *r = qg_rowops_get(f);
	float x[N_MAX + 1], g[N_MAX], y0[N_MAX], y1[N_MAX], cs[N_MAX];
	int bad = 0;

	if (!r) {
		tap_skip("no rowops for this family on this CPU");
		return;
	}
	for (int64_t n = 0; n <= N_MAX; n += n < 40 ? 1 : 37) {
		double mag = 0;
		fill(x, n, 8.0f);
		fill(g, n, 2.0f);
		for (int64_t i = 0; i < n; i++)
			mag += (double)x[i] * x[i];
		float s0 = p->sumsq(x, n), s1 = r->sumsq(x, n);
		if (!near(s1, s0, 1e-6, 1e-30)) {
			tap_diag("%s sumsq, n %lld: %g against %g", r->name, (long long)n, s1, s0);
			bad++;
		}
		p->scale(y0, x, 0.3f, n);
		r->scale(y1, x, 0.3f, n);
		bad += memcmp(y0, y1, (size_t)n * sizeof *y0) != 0;	/* one rounding each: exact */
		p->silu(y0, x, n);
		r->silu(y1, x, n);
		for (int64_t i = 0; i < n; i++)
			if (!near(y1[i], y0[i], 4e-7, 1e-30)) {
				tap_diag("%s silu(%g): %.9g against %.9g", r->name, x[i], y1[i], y0[i]);
				bad++;
				break;
			}
		p->swiglu(y0, x, g, n);
		memcpy(y1, x, (size_t)n * sizeof *y1);
		r->swiglu(y1, y1, g, n);	/* in place */
		for (int64_t i = 0; i < n; i++)
			if (!near(y1[i], y0[i], 4e-7, 1e-30)) {
				tap_diag("%s swiglu(%g, %g): %.9g against %.9g", r->name, x[i], g[i], y1[i], y0[i]);
				bad++;
				break;
			}
		const int64_t half = n / 2;
		for (int64_t j = 0; j < half; j++) {
			double a = 0.37 * (double)j + 0.1;
			cs[j] = (float)(0.9 * cos(a));
			cs[half + j] = (float)(0.9 * sin(a));
		}
		for (int neox = 0; neox < 2; neox++) {
			x[n] = 12345.0f;	/* past the pairs: never touched */
			memcpy(y0, x, (size_t)n * sizeof *y0);
			memcpy(y1, x, (size_t)n * sizeof *y1);
			p->rope(y0, x, cs, half, neox);
			r->rope(y1, y1, cs, half, neox);	/* in place */
			for (int64_t i = 0; i < n; i++)
				if (!near(y1[i], y0[i], 1e-6, 1e-5 * 8.0)) {
					tap_diag("%s rope %s, n %lld, i %lld: %g against %g", r->name,
						 neox ? "neox" : "normal", (long long)n, (long long)i, y1[i], y0[i]);
					bad++;
					break;
				}
			bad += x[n] != 12345.0f;
		}
	}
	tap_ok(bad == 0, "%s: sum of squares, scale, silu, swiglu (in place) and rope (in place) equal the portable ones, "
	       "lengths 0 to %d", r->name, N_MAX);

	/* attention's softmax blocks: some scores masked, a block masked whole, a first block and a later one */
	int sbad = 0;
	for (int64_t n = 1; n <= N_MAX; n += n < 40 ? 1 : 37) {
		for (int kind = 0; kind < 4; kind++) {
			/* kind 0: first block (M -inf); 1: a later block; 2: every score masked; 3: M above every score */
			float m0 = kind == 0 || kind == 2 ? -INFINITY : kind == 1 ? 0.5f : 100.0f, m1 = m0;
			float r0, r1;
			fill(x, n, 8.0f);
			for (int64_t i = 0; i < n; i++)
				if (kind == 2 || i % 5 == 3)
					x[i] = -INFINITY;
			memcpy(y0, x, (size_t)n * sizeof *y0);
			memcpy(y1, x, (size_t)n * sizeof *y1);
			const float s0 = p->softmax_block(y0, n, &m0, &r0), s1 = r->softmax_block(y1, n, &m1, &r1);
			int ok = m0 == m1 && near(s1, s0, 1e-5, 1e-30) && near(r1, r0, 4e-7, 1e-30);
			for (int64_t i = 0; i < n; i++)
				ok &= near(y1[i], y0[i], 4e-7, 1e-30) && (x[i] != -INFINITY || y1[i] == 0.0f);
			if (kind == 2)
				ok &= s1 == 0.0f && r1 == 1.0f && m1 == -INFINITY;
			if (!ok && !sbad)
				tap_diag("%s softmax block, n %lld, kind %d: sum %g/%g, rescale %g/%g, max %g/%g", r->name,
					 (long long)n, kind, s1, s0, r1, r0, m1, m0);
			sbad += !ok;
		}
	}
	tap_ok(sbad == 0, "%s: attention's softmax blocks equal the portable ones (masked scores 0 exactly), "
	       "lengths 1 to %d", r->name, N_MAX);

	/* halves to floats, and floats through halves: any bits, NaN and infinity included */
	enum { W = 140 };
	static float yd0[W], yd1[W], xr[W];
	static uint16_t h[W];
	int dbad = 0, rbad = 0;
	for (int64_t n = 1; n <= W; n += n < 40 ? 1 : 33) {
		for (int64_t i = 0; i < n; i++) {
			h[i] = (uint16_t)tap_rand(&rng);
			uint32_t u = (uint32_t)tap_rand(&rng);
			if (i % 3 == 1) {	/* in the half range (2^-25 .. 2^16), half of them ties */
				uint32_t m = (u & 0x7fffffu) | (i % 2 ? 0x1000u : 0);
				if (i % 2)
					m &= ~0xfffu;
				u = (u & 0x80000000u) | ((102u + (uint32_t)(tap_rand(&rng) % 42)) << 23) | m;
			}
			memcpy(&xr[i], &u, sizeof u);
		}
		p->from_f16(yd0, h, n);
		r->from_f16(yd1, h, n);
		dbad += floats_off(r->name, "from_f16", yd0, yd1, n, dbad);
		p->round_f16(yd0, xr, n);
		r->round_f16(yd1, xr, n);
		rbad += floats_off(r->name, "round_f16", yd0, yd1, n, rbad);
	}
	tap_ok(dbad == 0, "%s: halves to floats exactly (%d off)", r->name, dbad);
	tap_ok(rbad == 0, "%s: floats rounded through halves exactly (%d off)", r->name, rbad);
	test_attention(r);
}

int main(void)
{
	test_reference();
	test_family(QG_KF_AVX2);
	test_family(QG_KF_NEON);
	const struct qg_rowops *best = qg_rowops_for();
	tap_diag("chosen: %s", best->name);
	tap_ok(qg_kernels_force(QG_KF_PORTABLE) == 0 && qg_rowops_for() == qg_rowops_get(QG_KF_PORTABLE) &&
		       qg_kernels_force(QG_KF_COUNT) == 0 && qg_rowops_for() == best,
	       "forced to portable, the row kernels are the portable ones; unforced, %s again", best->name);
	return tap_done();
}
