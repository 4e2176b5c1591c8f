/*
 * batch-test.c - a row's product does not depend on the rows beside it.
 *
 * The daemon may one day run the activations of several clients as one
 * product against weights they share; a client's result must then be the
 * bits it gets alone.  qg_mul_mat splits the activation rows into GEMM
 * groups and GEMV rows, so a row's kernel changes with the batch: this
 * test holds every weight type, and every kernel family this CPU runs, to
 * the same bits for a row computed alone (N = 1) and at each position of
 * batches of 2 to 9 rows of other random activations.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "mulmat.h"
#include "quant.h"
#include "tap.h"

enum { K = 512, NMAX = 9 };	/* K: two Q4_K/Q6_K super-blocks, 16 Q4_0 blocks */

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		printf("Bail out! out of memory (%zu bytes)\n", n);
		exit(99);
	}
	return p;
}

/* Y (N x M) = X (N rows) * W^T with KN or KQ as the kernels (NULL: the dispatcher's). */
static int product(enum qg_type t, const void *w, int64_t m, const float *x, int64_t n, float *y,
		   const struct qg_kernel *kn, const struct qg_kq_kernel *kq)
{
	struct qg_mm mm = {
		.wtype = t, .w = w, .m = m, .k = K, .x = x, .ldx = K, .n = n, .y = y, .ldy = (size_t)m,
		.kernel = kn, .kq_kernel = kq,
	};
	void *scratch = xmalloc(qg_mul_mat_scratch_size(&mm));
	int r = qg_mul_mat(&mm, scratch);

	free(scratch);
	return r;
}

/*
 * Weights of type T (M rows) through kernels KN/KQ: each of NMAX rows
 * alone, then every batch size and position against those bits.
 */
static void check_type(struct tap_rng *rng, enum qg_type t, int64_t m, const struct qg_kernel *kn,
		       const struct qg_kq_kernel *kq, const char *family)
{
	float *wf = xmalloc((size_t)(m * K) * sizeof *wf);
	float *x = xmalloc((size_t)(NMAX * K) * sizeof *x);
	float *batch = xmalloc((size_t)(NMAX * K) * sizeof *batch);
	float *alone = xmalloc((size_t)(NMAX * m) * sizeof *alone);
	float *y = xmalloc((size_t)(NMAX * m) * sizeof *y);
	ssize_t wsize = qg_matrix_size(t, m, K);
	void *w = xmalloc(wsize > 0 ? (size_t)wsize : 1);
	int ok = wsize > 0, cases = 0;
	char where[96] = "";

	for (int64_t i = 0; i < m * K; i++)
		wf[i] = tap_randf(rng, -1.0f, 1.0f);
	for (int64_t i = 0; i < NMAX * K; i++)
		x[i] = tap_randf(rng, -2.0f, 2.0f);
	ok = ok && qg_quantize(t, wf, w, (size_t)wsize, m, K, NULL) == wsize;
	for (int i = 0; i < NMAX && ok; i++)
		ok = product(t, w, m, x + (size_t)i * K, 1, alone + (size_t)i * m, kn, kq) == 0;
	for (int n = 2; n <= NMAX && ok; n++) {
		for (int pos = 0; pos < n && ok; pos++) {
			/* row POS of the batch is test row (n + pos) % NMAX; the others are fresh */
			const int row = (n + pos) % NMAX;
			for (int i = 0; i < n; i++) {
				float *b = batch + (size_t)i * K;
				if (i == pos)
					memcpy(b, x + (size_t)row * K, K * sizeof *b);
				else
					for (int c = 0; c < K; c++)
						b[c] = tap_randf(rng, -2.0f, 2.0f);
			}
			ok = product(t, w, m, batch, n, y, kn, kq) == 0 &&
			     memcmp(y + (size_t)pos * m, alone + (size_t)row * m, (size_t)m * sizeof *y) == 0;
			if (!ok)
				snprintf(where, sizeof where, " (first difference: batch of %d, position %d)", n, pos);
			cases++;
		}
	}
	tap_ok(ok, "%s weights, %s kernels: a row's %lld results in %d batches equal its results alone%s",
	       qg_type_name(t), family, (long long)m, cases, where);
	free(wf);
	free(x);
	free(batch);
	free(alone);
	free(y);
	free(w);
}

int main(void)
{
	static const enum qg_type plain[] = { QG_TYPE_F32, QG_TYPE_F16, QG_TYPE_Q8_0, QG_TYPE_Q4_0 };
	struct tap_rng rng = { 0x6261746368ULL };

	for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
		check_type(&rng, plain[i], 24, NULL, NULL, "the chosen");
	for (int f = 0; f < QG_KF_COUNT; f++) {
		for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
			const struct qg_kernel *kn = qg_kernel_get((enum qg_kfamily)f, (enum qg_layout)l);
			if (kn)
				check_type(&rng, qg_layout_type((enum qg_layout)l), 24, kn, NULL,
					   qg_kfamily_name((enum qg_kfamily)f));
		}
		const struct qg_kq_kernel *kq = qg_kq_kernel_get((enum qg_kfamily)f);
		if (kq) {
			check_type(&rng, QG_TYPE_Q4_K, 12, NULL, kq, qg_kfamily_name((enum qg_kfamily)f));
			check_type(&rng, QG_TYPE_Q6_K, 12, NULL, kq, qg_kfamily_name((enum qg_kfamily)f));
		}
	}
	return tap_done();
}
