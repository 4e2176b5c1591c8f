/*
 * quant-imatrix.c - Q4_0 weighted by an importance matrix (see
 * quant-imatrix.h): for each block, the scale and codes that make the
 * weighted squared error smallest, found by a sweep over the scales where
 * a code changes and polished by refitting.
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fp16.h"
#include "quant.h"
#include "quant-imatrix.h"

/* The 4-bit code (-8..7) nearest to V; 0 for NaN (which callers avoid). */
static int q4_nearest(float v)
{
	if (v >= 7.0f)
		return 7;
	if (v <= -8.0f)
		return -8;
	if (isnan(v))
		return 0;
	return (int)(v >= 0.0f ? v + 0.5f : v - 0.5f);	/* roundf for |v| < 8.5 */
}

/* A candidate for one block: an fp16 scale, the codes, and their weighted error. */
struct q4_cand {
	qg_fp16 d;
	int8_t l[QG_QK];
	double err;
};

/* sum w_j (x_j - d l_j)^2, in double so that the comparison is sharp. */
static double q4_error(const float *x, const float *w, float d, const int8_t *l)
{
	double e = 0.0;

	for (int j = 0; j < QG_QK; j++) {
		double r = (double)x[j] - (double)d * l[j];
		e += (double)w[j] * r * r;
	}
	return e;
}

/*
 * Try scale D: round it to fp16 (a scale that does not fit is no
 * candidate), give every value its nearest code for that stored scale, and
 * keep the result in BEST if its weighted error is strictly smaller.
 */
static void q4_try_fp16(const float *x, const float *w, qg_fp16 h, struct q4_cand *best)
{
	struct q4_cand c;

	if (!qg_fp16_is_finite(h))
		return;
	float df = qg_fp16_to_fp32(h), idf = df != 0.0f ? 1.0f / df : 0.0f;
	c.d = h;
	for (int j = 0; j < QG_QK; j++)
		c.l[j] = (int8_t)q4_nearest(x[j] * idf);
	c.err = q4_error(x, w, df, c.l);
	if (c.err < best->err)
		*best = c;
}

static void q4_try(const float *x, const float *w, float d, struct q4_cand *best)
{
	if (isfinite(d))
		q4_try_fp16(x, w, qg_fp32_to_fp16(d), best);
}

/* The weighted least-squares scale for codes L: sum w x l / sum w l^2 (0 if none). */
static float q4_refit(const float *x, const float *w, const int8_t *l)
{
	double sxl = 0.0, sll = 0.0;

	for (int j = 0; j < QG_QK; j++) {
		sxl += (double)w[j] * x[j] * l[j];
		sll += (double)w[j] * l[j] * l[j];
	}
	return sll > 0.0 ? (float)(sxl / sll) : 0.0f;
}

/* A point where one value's code steps as the inverse scale grows: value J takes code L. */
struct q4_event {
	uint32_t key;		/* the inverse scale's bits: positive floats order as integers */
	int8_t j, l;
};

/* Sort N events by key: a stable radix sort, a byte at a time, skipping bytes all share. */
static void q4_sort(struct q4_event *ev, struct q4_event *tmp, int n)
{
	for (int shift = 0; shift < 32; shift += 8) {
		int count[257] = { 0 };
		for (int i = 0; i < n; i++)
			count[((ev[i].key >> shift) & 0xff) + 1]++;
		if (count[((ev[0].key >> shift) & 0xff) + 1] == n)
			continue;
		for (int b = 0; b < 256; b++)
			count[b + 1] += count[b];
		for (int i = 0; i < n; i++)
			tmp[count[(ev[i].key >> shift) & 0xff]++] = ev[i];
		memcpy(ev, tmp, (size_t)n * sizeof *ev);
	}
}

/* Code sets worth rounding to fp16: the best few by least-squares score. */
#define Q4_KEEP 4

struct q4_top {
	int n;
	double score[Q4_KEEP];
	float d[Q4_KEEP];
};

static void q4_top_add(struct q4_top *top, double score, float d)
{
	int i;

	if (top->n < Q4_KEEP)
		i = top->n++;
	else if (score > top->score[Q4_KEEP - 1])
		i = Q4_KEEP - 1;	/* the last one drops out */
	else
		return;
	for (; i > 0 && top->score[i - 1] < score; i--) {
		top->score[i] = top->score[i - 1];
		top->d[i] = top->d[i - 1];
	}
	top->score[i] = score;
	top->d[i] = d;
}

/*
 * Every code set that nearest rounding at some scale gives, for scales of
 * sign SIGN (codes l_j = clamp(round(s x_j), -8, 7), s = SIGN * t, t > 0):
 * as t grows, each weighted value's code steps one at a time, at
 * t = (|l| - 1/2) / |x_j|.  Walking the steps in order keeps the sums
 * sum w x l and sum w l^2 current, so each set's least-squares scale and
 * its error (sum w x^2 - (sum w x l)^2 / sum w l^2) cost O(1).  The best
 * sets' scales go into TOP.
 */
static void q4_sweep(const float *x, const float *w, float sign, struct q4_top *top)
{
	struct q4_event ev[QG_QK * 8], tmp[QG_QK * 8];
	int n = 0;

	for (int j = 0; j < QG_QK; j++) {
		float u = sign * x[j];
		if (w[j] == 0.0f || u == 0.0f)
			continue;
		int steps = u > 0 ? 7 : 8, dir = u > 0 ? 1 : -1;
		for (int k = 1; k <= steps; k++) {
			ev[n].key = qg_fp32_to_bits(((float)k - 0.5f) / fabsf(u));
			ev[n].j = (int8_t)j;
			ev[n].l = (int8_t)(dir * k);
			n++;
		}
	}
	if (n == 0)
		return;
	q4_sort(ev, tmp, n);

	int8_t l[QG_QK] = { 0 };
	double sxl = 0.0, sll = 0.0;
	for (int i = 0; i < n; i++) {
		int j = ev[i].j, old = l[j], now = ev[i].l;
		sxl += (double)w[j] * x[j] * (now - old);
		sll += (double)w[j] * (now * now - old * old);
		l[j] = (int8_t)now;
		if (sll > 0.0 && (i + 1 == n || ev[i + 1].key != ev[i].key))
			q4_top_add(top, sxl * sxl / sll, (float)(sxl / sll));
	}
}

/*
 * One Q4_0 block minimising the weighted squared error sum w_j (x_j - d q_j)^2
 * with d as stored (fp16).  Plain rounding's exact block is the first
 * candidate, so the result is never worse than it.  q4_sweep() finds the
 * code sets with the best least-squares scales (the continuous optimum is
 * among them); each scale is rounded to fp16 and paired with its nearest
 * codes, then polished by refitting and by its fp16 neighbours until
 * nothing improves.  With all weights zero the block is plain rounding's.
 */
void qg_q4_0_block_weighted(const float *x, const float *w, const struct qg_block_q4_0 *plain, qg_fp16 *d,
			    uint8_t qs[QG_QK / 2])
{
	struct q4_cand best;
	struct q4_top top = { 0 };
	float amax = 0.0f;
	double wsum = 0.0;

	best.d = plain->d;
	for (int j = 0; j < QG_QK / 2; j++) {
		best.l[j] = (int8_t)((plain->qs[j] & 0x0f) - 8);
		best.l[j + QG_QK / 2] = (int8_t)((plain->qs[j] >> 4) - 8);
	}
	for (int j = 0; j < QG_QK; j++) {
		wsum += w[j];
		amax = fmaxf(amax, fabsf(x[j]));
	}
	if (wsum > 0.0 && amax > 0.0f) {
		best.err = q4_error(x, w, qg_fp16_to_fp32(plain->d), best.l);
		q4_sweep(x, w, 1.0f, &top);
		q4_sweep(x, w, -1.0f, &top);
		for (int i = 0; i < top.n; i++) {
			struct q4_cand c = best;
			q4_try(x, w, top.d[i], &c);
			for (int iter = 0; iter < 8; iter++) {
				double before = c.err;
				qg_fp16 mag = c.d & 0x7fff, sgn = c.d & 0x8000;
				q4_try(x, w, q4_refit(x, w, c.l), &c);
				for (int k = 1; k <= 2; k++) {
					if (mag >= k)
						q4_try_fp16(x, w, (qg_fp16)(sgn | (mag - k)), &c);
					q4_try_fp16(x, w, (qg_fp16)(sgn | (mag + k)), &c);
				}
				if (!(c.err < before))
					break;
			}
			if (c.err < best.err)
				best = c;
		}
	}
	*d = best.d;
	for (int j = 0; j < QG_QK / 2; j++)
		qs[j] = (uint8_t)((best.l[j] + 8) | (best.l[j + QG_QK / 2] + 8) << 4);
}
