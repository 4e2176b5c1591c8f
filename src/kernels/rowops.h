/*
 * rowops.h - the row kernels of the ops beside MUL_MAT that a decode step
 * spends its time in: RMS_NORM's sum of squares and scaling, SILU and
 * SwiGLU, ROPE's turn of a row, FLASH_ATTN_EXT's softmax over a block of
 * keys.  Rows are packed floats.
 *
 * One table per family: the portable one is the reference, the others
 * (AVX2 on x86-64, NEON on aarch64) sum in another order and compute exp
 * by a polynomial, within a few units in the last place of it; each is
 * tested against it (tests/rowops-test.c), on x86-64 and on every
 * aarch64 CPU model of the aarch64 suite.
 */
#ifndef QG_ROWOPS_H
#define QG_ROWOPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

struct qg_rowops {
	const char *name;
	enum qg_kfamily family;
	/* The sum of X[i]^2 over N values. */
	float (*sumsq)(const float *x, int64_t n);
	/* Y[i] = X[i] * S over N values (Y may be X). */
	void (*scale)(float *y, const float *x, float s, int64_t n);
	/* Y[i] = X[i] / (1 + exp(-X[i])) over N values (Y may be X). */
	void (*silu)(float *y, const float *x, int64_t n);
	/* Y[i] = silu(X[i]) * G[i] over N values (Y may be X or G). */
	void (*swiglu)(float *y, const float *x, const float *g, int64_t n);
	/*
	 * ROPE's turn of HALF pairs of a row: CS holds HALF cosines then HALF
	 * sines (already scaled).  NEOX: pair j is (X[j], X[j + HALF]); else
	 * (X[2j], X[2j + 1]).  Y gets the turned pairs at the same places (Y
	 * may be X); the values around them are not touched.
	 */
	void (*rope)(float *y, const float *x, const float *cs, int64_t half, bool neox);
	/*
	 * One block of attention's online softmax: N scores S (scaled and
	 * masked, -INFINITY where masked) against the running maximum *M.
	 * With M' = max(*M, max S): S[i] = exp(S[i] - M') (exactly 0 where
	 * masked), *M = M', *RESCALE = exp(M - M') (what the sums before
	 * this block are multiplied by: 0 when M was -INFINITY, 1 when M'
	 * is M), and the return value is the sum of the new S.  A block
	 * with every score masked (M' still -INFINITY) gives zeros, a
	 * rescale of 1 and 0.
	 */
	float (*softmax_block)(float *s, int64_t n, float *m, float *rescale);
	/*
	 * Attention's two products over a block of NK keys, read as halves
	 * where the cache holds them: key J's DK halves at K + J * KSTRIDE
	 * bytes, its value's DV halves at V + J * VSTRIDE bytes.
	 *
	 * scores: for NQ queries (query I's DK floats at Q + I * DK),
	 *   S[I * LDS + J] = Q_I . K_J * SCALE + M[I / MDIV * LDM + J], and
	 *   -INFINITY exactly where that M is -INFINITY (whatever K_J holds).
	 *   M NULL: no mask.  (MDIV: how many queries share a mask row.)
	 * mix: ACC[I * DV + T] += sum over J of P[I * LDP + J] * V_J[T] for
	 *   NQ queries; a key whose weight is 0 for every query of the call
	 *   is not read (a masked key's row may hold anything).
	 */
	void (*scores)(float *s, size_t lds, const float *q, int64_t nq, const uint16_t *k, size_t kstride,
		       int64_t nk, int64_t dk, float scale, const float *m, size_t ldm, int64_t mdiv);
	void (*mix)(float *acc, const float *p, size_t ldp, int64_t nq, const uint16_t *v, size_t vstride,
		    int64_t nk, int64_t dv);
	/* Y[i] = X[i], N halves to floats (exact). */
	void (*from_f16)(float *y, const uint16_t *x, int64_t n);
	/* Y[i] = X[i] rounded to the nearest half (ties to even) and back, N values (Y may be X). */
	void (*round_f16)(float *y, const float *x, int64_t n);
};

/*
 * For the SIMD families' scores and mix: ask for the cache lines of the
 * row QG_ROWOPS_AHEAD rows of STRIDE bytes past ROW (BYTES long), into
 * the second-level cache.  A cache row holds every K/V head of a token,
 * so one unit of attention reads a short piece of each row at a stride
 * of a kilobyte or more: the hardware's stream prefetchers do not follow
 * that, and a key's work is long enough that the out-of-order window
 * holds only a few keys' loads.  Asking for the first-level cache
 * instead fills its few miss buffers and gains a third as much.  The
 * address is made in integers: the row ahead may lie past the cache's
 * end, and a prefetch never faults.
 */
#define QG_ROWOPS_AHEAD 64

static inline void qg_rowops_prefetch(const void *row, size_t stride, size_t bytes)
{
	const uintptr_t a = (uintptr_t)row + QG_ROWOPS_AHEAD * stride;

	for (uintptr_t l = a & ~(uintptr_t)63; l < a + bytes; l += 64)
		__builtin_prefetch((const void *)l, 0, 2);
}

/* FAMILY's table in this build and on this CPU (portable, avx2 or neon), or NULL. */
const struct qg_rowops *qg_rowops_get(enum qg_kfamily family);

/*
 * The table this CPU runs best, chosen with the matrix kernels: forcing
 * those to the portable family (qg_kernels_force, QGRAPH_KERNELS) forces
 * these too.
 */
const struct qg_rowops *qg_rowops_for(void);

/* The tables of the SIMD families (in their files, compiled with their flags). */
#if defined(__x86_64__)
extern const struct qg_rowops qg_rowops_avx2;
#endif
#if defined(__aarch64__)
extern const struct qg_rowops qg_rowops_neon;
#endif

#endif /* QG_ROWOPS_H */
