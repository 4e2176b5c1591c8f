/*
 * kernels-test.c - the GEMV/GEMM kernels, the dispatcher and mul_mat.
 *
 *  1. hand-checked results of the portable kernels;
 *  2. portable kernels against a float reference built from dequantized
 *     values, GEMM rows against GEMV, every layout against the others;
 *  3. every kernel family this CPU runs, for every layout, against the
 *     portable kernel through qg_mul_mat (many shapes), and its activation
 *     quantizers against the portable ones; its gemv_rows, where it has
 *     one, against its GEMV bit for bit; sve256 against i8mm bit for bit
 *     at 256-bit vectors, and refused at any other length;
 *  4. mul_mat for every weight type, split over 1, 2, 3 and 7 threads;
 *  5. qg_mul_mat_check's errors;
 *  6. dispatch: the CPU features, the choice per layout (per qemu CPU model
 *     when QG_CPU_MODEL names one), forcing by API and by QGRAPH_KERNELS.
 *
 * Tolerances.  The kernels compute, per block and chunk of a weight row,
 * an exact integer dot product, multiply it by two fp16 scales and add it
 * to a float sum.  Against the exact value of the same dot product on the
 * dequantized numbers, each of the T terms carries at most two roundings
 * of the products and the running sum at most T additions, so the error is
 * at most gamma(T + 2) * S, gamma(n) = n*u / (1 - n*u), u = 2^-24, where S
 * is the sum of |w_i * a_i| over the row (the standard bound for recursive
 * summation of rounded products).  Any kernel that sums the same terms in
 * another order, or sums whole blocks in integers first (fewer terms),
 * stays within gamma(4*NB + 4) * S, NB = K/32; two such kernels differ by
 * at most twice that.  Where the arithmetic is the same (4x8 and 8x8, GEMM
 * and GEMV rows, thread splits, a family's GEMV of rows one at a time and
 * two or three at once) the results must be equal bit for bit;
 * so must the two x86 families, AVX2 and AVX-512 VNNI, which do the same
 * float operations in the same order (kernels-x86.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fp16.h"
#include "kernels.h"
#include "mulmat.h"
#include "quant.h"
#include "tap.h"

#define U24 (1.0 / 16777216.0)

static const int layout_r[QG_LAYOUT_COUNT] = { 4, 4, 8 };	/* rows per group */
static const int layout_b[QG_LAYOUT_COUNT] = { 4, 8, 8 };	/* bytes per chunk */
static const char *const layout_name[QG_LAYOUT_COUNT] = { "4x4", "4x8", "8x8" };

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		printf("Bail out! out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

static double gamma_n(double n)
{
	return n * U24 / (1.0 - n * U24);
}

/* ---------------------------------------------------------------- data */

static void fill(struct tap_rng *rng, float *x, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = tap_randf(rng, lo, hi);
}

/* Value I of a Q4_0 row. */
static float q4_value(const struct qg_block_q4_0 *row, int64_t i)
{
	const struct qg_block_q4_0 *b = row + i / QG_QK;
	int j = (int)(i % QG_QK);
	int code = j < QG_QK / 2 ? (b->qs[j] & 0x0f) : (b->qs[j - QG_QK / 2] >> 4);

	return (float)(code - 8) * qg_fp16_to_fp32(b->d);
}

static float q8_value(const struct qg_block_q8_0 *row, int64_t i)
{
	const struct qg_block_q8_0 *b = row + i / QG_QK;

	return (float)b->qs[i % QG_QK] * qg_fp16_to_fp32(b->d);
}

/*
 * The test's own repack of ROWS Q4_0 rows into LAYOUT, written from ggml's
 * description of block_q4_0x4/x8: per block, the R scales, then chunks of
 * B bytes, chunk c of row j at qs[(c*R + j)*B], every byte XOR 0x88.
 */
static void repack(enum qg_layout l, void *dst, const struct qg_block_q4_0 *src,
		   int64_t rows, int64_t k)
{
	const int R = layout_r[l], B = layout_b[l];
	const int64_t nb = k / QG_QK;
	uint8_t *out = dst;

	for (int64_t g = 0; g < rows / R; g++) {
		for (int64_t b = 0; b < nb; b++) {
			for (int j = 0; j < R; j++)
				memcpy(out + 2 * j, &src[(g * R + j) * nb + b].d, 2);
			uint8_t *qs = out + 2 * R;
			for (int c = 0; c < QG_QK / 2 / B; c++)
				for (int j = 0; j < R; j++)
					for (int i = 0; i < B; i++)
						qs[(c * R + j) * B + i] =
							src[(g * R + j) * nb + b].qs[c * B + i] ^ 0x88;
			out += 18 * R;
		}
	}
}

/* Exact dot product of dequantized W row R and activation row, and S = sum |w a|. */
static double ref_dot(const struct qg_block_q4_0 *w, const struct qg_block_q8_0 *a, int64_t k,
		      double *s_abs)
{
	double sum = 0.0, sa = 0.0;

	for (int64_t i = 0; i < k; i++) {
		double p = (double)q4_value(w, i) * (double)q8_value(a, i);
		sum += p;
		sa += fabs(p);
	}
	*s_abs = sa;
	return sum;
}

/* Bit-for-bit equality of two float arrays (NaN equal to NaN of the same bits). */
static int same_bits(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, n * sizeof *a) == 0;
}

/* --------------------------------------------------- 1. hand-checked */

/*
 * One block, K = 32.  Every weight row has low nibbles +1 and high nibbles
 * -2 (codes 9 and 6: byte 0x69), scale j+1 for row j; the activations are
 * a[i] = i with scale 0.25.  Row j: (sum_{i<16} i - 2 * sum_{i>=16} i) *
 * (j+1) * 0.25 = (120 - 752) * (j+1) / 4 = -158 * (j+1), exactly.
 */
static void test_hand_checked(void)
{
	struct qg_block_q4_0 w[8];
	struct qg_block_q8_0 a;
	struct qg_block_q8_0x4 a4;
	uint8_t packed[144];

	for (int j = 0; j < 8; j++) {
		w[j].d = qg_fp32_to_fp16((float)(j + 1));
		memset(w[j].qs, 0x69, sizeof w[j].qs);
	}
	a.d = qg_fp32_to_fp16(0.25f);
	for (int i = 0; i < QG_QK; i++)
		a.qs[i] = (int8_t)i;
	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		const struct qg_kernel *kn = &qg_kernels_portable[l];
		const int R = layout_r[l];
		float s[8], s4[4][8];
		int ok = 1;

		repack(l, packed, w, R, QG_QK);
		ok &= packed[2 * R] == 0xe1;	/* 0x69 ^ 0x88 */
		kn->gemv(QG_QK, s, packed, &a, R);
		for (int j = 0; j < R; j++)
			ok &= s[j] == -158.0f * (float)(j + 1);
		tap_ok(ok, "hand-checked GEMV %s: row j gives -158*(j+1) (got %g %g ...)",
		       layout_name[l], s[0], s[1]);

		/* four activation rows: a again, with scales 0.25*(r+1), interleaved by hand */
		const int il = kn->act_ileave;
		for (int r = 0; r < 4; r++) {
			a4.d[r] = qg_fp32_to_fp16(0.25f * (float)(r + 1));
			for (int i = 0; i < QG_QK; i++)
				a4.qs[((i / il) * 4 + r) * il + i % il] = a.qs[i];
		}
		kn->gemm(QG_QK, &s4[0][0], 8, packed, &a4, 4, R);
		ok = 1;
		for (int r = 0; r < 4; r++)
			for (int j = 0; j < R; j++)
				ok &= s4[r][j] == -158.0f * (float)(j + 1) * (float)(r + 1);
		tap_ok(ok, "hand-checked GEMM %s: row r, column j gives -158*(j+1)*(r+1)", layout_name[l]);
	}
}

/* ------------------------------------- 2. portable against a reference */

struct wset {
	int64_t m, k;
	struct qg_block_q4_0 *q4;		/* m rows of k/32 blocks */
	void *packed[QG_LAYOUT_COUNT];		/* the same, repacked */
};

static void wset_make(struct wset *ws, struct tap_rng *rng, int64_t m, int64_t k)
{
	float *w = xmalloc((size_t)(m * k) * sizeof *w);
	const int64_t nb = k / QG_QK;

	fill(rng, w, (size_t)(m * k), -1.0f, 1.0f);
	/* a few rows of other magnitudes, so scales differ between rows */
	for (int64_t r = 0; r < m; r += 3)
		for (int64_t i = 0; i < k; i++)
			w[r * k + i] *= (float)(1 + r % 7) * 0.37f;
	ws->m = m;
	ws->k = k;
	ws->q4 = xmalloc((size_t)(m * nb) * sizeof *ws->q4);
	for (int64_t r = 0; r < m; r++)
		qg_quantize_row_q4_0(w + r * k, ws->q4 + r * nb, k);
	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		ws->packed[l] = xmalloc((size_t)(m * nb) * 18);
		repack(l, ws->packed[l], ws->q4, m, k);
	}
	free(w);
}

static void wset_free(struct wset *ws)
{
	free(ws->q4);
	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		free(ws->packed[l]);
}

/* The test's repack and quant.c's qg_repack must write the same bytes. */
static void test_repack_agrees(struct tap_rng *rng)
{
	struct wset ws;

	wset_make(&ws, rng, 16, 96);
	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		size_t size = (size_t)(16 * 3) * 18;
		uint8_t *buf = xmalloc(size);
		ssize_t n = qg_repack(qg_layout_type(l), buf, size, QG_TYPE_Q4_0, ws.q4, 16, 96);
		tap_ok(n == (ssize_t)size && memcmp(buf, ws.packed[l], size) == 0,
		       "qg_repack to %s writes the layout the kernels read", layout_name[l]);
		free(buf);
	}
	wset_free(&ws);
}

static void test_reference(struct tap_rng *rng)
{
	static const int64_t ks[] = { 32, 96, 256, 1024 };

	for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
		const int64_t k = ks[ki], nb = k / QG_QK, m = 24;
		struct wset ws;
		float *x = xmalloc((size_t)(4 * k) * sizeof *x);
		struct qg_block_q8_0 *a = xmalloc((size_t)(4 * nb) * sizeof *a);
		struct qg_block_q8_0x4 *a4 = xmalloc((size_t)nb * sizeof *a4);
		float sv[QG_LAYOUT_COUNT][4][24], sg[QG_LAYOUT_COUNT][4][24];

		wset_make(&ws, rng, m, k);
		fill(rng, x, (size_t)(4 * k), -2.0f, 2.0f);
		for (int r = 0; r < 4; r++)
			qg_quantize_row_q8_0(x + r * k, a + r * nb, k);

		for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
			const struct qg_kernel *kn = &qg_kernels_portable[l];
			const double tol_terms = (double)(nb * (QG_QK / 2 / layout_b[l]) + 2);
			double worst = 0.0;
			int ok = 1;

			for (int r = 0; r < 4; r++)
				kn->gemv((int)k, sv[l][r], ws.packed[l], a + r * nb, (int)m);
			qg_quantize_rows_q8_0x4(x, (size_t)k, a4, k, kn->act_ileave);
			kn->gemm((int)k, &sg[l][0][0], 24, ws.packed[l], a4, 4, (int)m);
			for (int r = 0; r < 4; r++) {
				for (int j = 0; j < m; j++) {
					double sa, ref = ref_dot(ws.q4 + j * nb, a + r * nb, k, &sa);
					double err = fabs((double)sv[l][r][j] - ref);
					double bound = gamma_n(tol_terms) * sa + 1e-30;
					if (err > bound)
						ok = 0;
					if (sa > 0 && err / sa > worst)
						worst = err / sa;
				}
			}
			tap_ok(ok, "portable GEMV %s K=%lld within gamma(%g)*sum|w*a| of the reference (worst %.3g)",
			       layout_name[l], (long long)k, tol_terms, worst);
			tap_ok(same_bits(&sv[l][0][0], &sg[l][0][0], 4 * 24),
			       "portable GEMM %s K=%lld rows equal GEMV bit for bit", layout_name[l], (long long)k);
		}
		/* 4x8 and 8x8 chunk alike: same bits; 4x4 sums twice the terms */
		tap_ok(same_bits(&sv[QG_LAYOUT_4X8][0][0], &sv[QG_LAYOUT_8X8][0][0], 4 * 24),
		       "K=%lld: 4x8 and 8x8 give the same bits", (long long)k);
		int ok = 1;
		for (int r = 0; r < 4; r++)
			for (int j = 0; j < m; j++) {
				double sa;
				ref_dot(ws.q4 + j * nb, a + r * nb, k, &sa);
				double d = fabs((double)sv[QG_LAYOUT_4X4][r][j] - sv[QG_LAYOUT_8X8][r][j]);
				if (d > 2 * gamma_n((double)(4 * nb + 4)) * sa + 1e-30)
					ok = 0;
				/* and plain Q4_0's vec_dot, which sums whole blocks */
				float v = qg_vec_dot_q4_0_q8_0(k, ws.q4 + j * nb, a + r * nb);
				if (fabs((double)v - sv[QG_LAYOUT_8X8][r][j]) > 2 * gamma_n((double)(4 * nb + 4)) * sa + 1e-30)
					ok = 0;
			}
		tap_ok(ok, "K=%lld: 4x4, 8x8 and Q4_0 vec_dot agree within 2*gamma(4*K/32+4)*sum|w*a|",
		       (long long)k);
		wset_free(&ws);
		free(x);
		free(a);
		free(a4);
	}
}

/* -------------------------------------------- 3. families against portable */

/* S = sum |w a| per output of mul_mat with quantized activations (for tolerances). */
static void abs_sums(const struct wset *ws, const float *x, int64_t n, double *sa)
{
	const int64_t nb = ws->k / QG_QK;
	struct qg_block_q8_0 *a = xmalloc((size_t)nb * sizeof *a);

	for (int64_t r = 0; r < n; r++) {
		qg_quantize_row_q8_0(x + r * ws->k, a, ws->k);
		for (int64_t j = 0; j < ws->m; j++)
			ref_dot(ws->q4 + j * nb, a, ws->k, &sa[r * ws->m + j]);
	}
	free(a);
}

static int run_mm(enum qg_layout l, const struct qg_kernel *kn, const struct wset *ws,
		  const float *x, int64_t n, float *y)
{
	struct qg_mm mm = {
		.wtype = qg_layout_type(l), .w = ws->packed[l], .m = ws->m, .k = ws->k,
		.x = x, .ldx = (size_t)ws->k, .n = n, .y = y, .ldy = (size_t)ws->m, .kernel = kn,
	};
	size_t ss = qg_mul_mat_scratch_size(&mm);
	void *scratch = xmalloc(ss);
	int err = qg_mul_mat(&mm, scratch);

	free(scratch);
	return err;
}

/* The activation quantizers of KN write the portable quantizers' bytes. */
static int quantizers_agree(const struct qg_kernel *kn, struct tap_rng *rng)
{
	const int64_t k = 4128, nb = k / QG_QK;
	float *x = xmalloc((size_t)(4 * k) * sizeof *x);
	struct qg_block_q8_0 *a = xmalloc((size_t)nb * sizeof *a), *b = xmalloc((size_t)nb * sizeof *b);
	struct qg_block_q8_0x4 *a4 = xmalloc((size_t)nb * sizeof *a4), *b4 = xmalloc((size_t)nb * sizeof *b4);
	int ok = 1;

	fill(rng, x, (size_t)(4 * k), -3.0f, 3.0f);
	memset(x + 64, 0, 32 * sizeof *x);			/* an all-zero block */
	for (int i = 0; i < 32; i++)				/* a constant block */
		x[k + 128 + i] = -0.75f;
	/* scale exactly 1, values on exact halves: roundf away from zero */
	for (int i = 0; i < 32; i++)
		x[2 * k + 256 + i] = i == 0 ? 127.0f : (float)(i - 16) + (i & 1 ? 0.5f : -0.5f);
	x[3 * k + 320] = INFINITY;				/* an infinite value */
	x[k + 352 + 5] = NAN;					/* a NaN (row 1) */
	for (int i = 0; i < 32; i++)				/* a subnormal fp16 scale */
		x[3 * k + 384 + i] = (float)(i - 16) * 0x1p-20f;
	kn->quant_row(x, a, k);
	qg_quantize_row_q8_0(x, b, k);
	ok &= memcmp(a, b, (size_t)nb * sizeof *a) == 0;
	kn->quant_x4(x, (size_t)k, a4, k, kn->act_ileave);
	qg_quantize_rows_q8_0x4(x, (size_t)k, b4, k, kn->act_ileave);
	ok &= memcmp(a4, b4, (size_t)nb * sizeof *a4) == 0;
	free(x);
	free(a);
	free(b);
	free(a4);
	free(b4);
	return ok;
}

static void test_families(struct tap_rng *rng)
{
	/* 8224 = 257 blocks: past the x86 GEMV's chunk of 256 blocks of K */
	static const int64_t ks[] = { 32, 64, 96, 256, 4096, 4128, 8224 };
	static const int64_t ns[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17 };
	const int nn = sizeof ns / sizeof ns[0];
	const int64_t nmax = 17;
	int any[QG_LAYOUT_COUNT] = { 0 };

	for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
		const int64_t k = ks[ki];
		struct wset ws;
		float *x = xmalloc((size_t)(nmax * k) * sizeof *x);

		fill(rng, x, (size_t)(nmax * k), -1.5f, 1.5f);
		for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
			const int R = layout_r[l];
			for (int mi = 0; mi < 2; mi++) {
				/*
				 * the smallest allowed row count and a larger one;
				 * at large K (several chunks of K) one row group
				 * past a 16-row tile: the AVX-512 GEMM's pair of
				 * tiles with a partial second one
				 */
				const int64_t m = mi ? (k >= 4096 ? 16 + R : 5 * R) : R;
				const size_t ny = (size_t)(nmax * m);
				float *ref[sizeof ns / sizeof ns[0]];
				double *sa = xmalloc(ny * sizeof *sa);
				float *y = xmalloc(ny * sizeof *y);

				wset_make(&ws, rng, m, k);
				abs_sums(&ws, x, nmax, sa);
				for (int ni = 0; ni < nn; ni++) {
					ref[ni] = xmalloc(ny * sizeof(float));
					run_mm(l, &qg_kernels_portable[l], &ws, x, ns[ni], ref[ni]);
				}
				for (int f = 1; f < QG_KF_COUNT; f++) {
					const struct qg_kernel *kn = qg_kernel_get(f, l);
					if (!kn)
						continue;
					any[l] = 1;
					const double bound = 2 * gamma_n((double)(4 * (k / QG_QK) + 4));
					int ok = 1, exact = 1, err = 0;
					double worst = 0.0;
					for (int ni = 0; ni < nn; ni++) {
						const int64_t n = ns[ni];
						memset(y, 0xff, ny * sizeof *y);	/* NaN: unwritten shows */
						err |= run_mm(l, kn, &ws, x, n, y);
						for (int64_t i = 0; i < n * m; i++) {
							double d = fabs((double)y[i] - (double)ref[ni][i]);
							if (!(d <= bound * sa[i] + 1e-30))
								ok = 0;
							if (sa[i] > 0 && d / sa[i] > worst)
								worst = d / sa[i];
						}
						exact &= same_bits(y, ref[ni], (size_t)(n * m));
					}
					tap_ok(ok && !err, "%s vs portable: K=%lld M=%lld N=1..9,16,17 %s (worst %.3g of sum|w*a|, bound %.3g)",
					       kn->name, (long long)k, (long long)m,
					       exact ? "bit-exact" : "within tolerance", worst, bound);
				}
				/* the two x86 families: the same bits */
				const struct qg_kernel *k2 = qg_kernel_get(QG_KF_AVX2, l);
				const struct qg_kernel *k5 = qg_kernel_get(QG_KF_AVX512VNNI, l);
				if (k2 && k5) {
					float *y5 = xmalloc(ny * sizeof *y5);
					int same = 1, err = 0;
					for (int ni = 0; ni < nn; ni++) {
						err |= run_mm(l, k2, &ws, x, ns[ni], y);
						err |= run_mm(l, k5, &ws, x, ns[ni], y5);
						same &= same_bits(y, y5, (size_t)(ns[ni] * m));
					}
					tap_ok(same && !err, "%s and %s: K=%lld M=%lld N=1..9,16,17 bit for bit",
					       k2->name, k5->name, (long long)k, (long long)m);
					free(y5);
				}
				for (int ni = 0; ni < nn; ni++)
					free(ref[ni]);
				free(sa);
				free(y);
				wset_free(&ws);
			}
		}
		free(x);
	}
	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		int found = 0;
		for (int f = 1; f < QG_KF_COUNT; f++) {
			const struct qg_kernel *kn = qg_kernel_get(f, l);
			if (!kn)
				continue;
			found = 1;
			tap_ok(quantizers_agree(kn, rng), "%s: activation quantizers write the portable bytes", kn->name);
		}
		if (!any[l] || !found) {
			char why[96];
			snprintf(why, sizeof why, "no SIMD kernel for %s in this build on this CPU", layout_name[l]);
			tap_skip(why);
		}
	}
}

/*
 * A kernel that takes its activation facts from mul_mat (act_facts, then
 * gemm_facts) gives its own GEMM's bits: over chunks of K (129 blocks),
 * one to five groups of four rows, and weight rows that end inside a tile.
 * A mutation of either path shows here and in test_families' mul_mat.
 */
static void test_act_facts(struct tap_rng *rng)
{
	const int64_t k = 4128, nb = k / QG_QK, m = 40, nrs[] = { 4, 8, 20 };
	struct wset ws;
	float *x = xmalloc((size_t)(20 * k) * sizeof *x);
	struct qg_block_q8_0x4 *a4 = xmalloc((size_t)(5 * nb) * sizeof *a4);
	float *y1 = xmalloc((size_t)(20 * m) * sizeof *y1), *y2 = xmalloc((size_t)(20 * m) * sizeof *y2);
	int tested = 0;

	wset_make(&ws, rng, m, k);
	fill(rng, x, (size_t)(20 * k), -1.5f, 1.5f);
	for (int f = 1; f < QG_KF_COUNT; f++) {
		for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
			const struct qg_kernel *kn = qg_kernel_get(f, l);
			if (!kn || !kn->act_facts)
				continue;
			uint8_t *facts = xmalloc((size_t)(5 * nb) * kn->act_facts_size);
			int same = 1;
			for (size_t i = 0; i < sizeof nrs / sizeof nrs[0]; i++) {
				const int64_t nr = nrs[i];
				for (int64_t g = 0; g < nr / 4; g++) {
					kn->quant_x4(x + g * 4 * k, (size_t)k, a4 + g * nb, k, kn->act_ileave);
					kn->act_facts(a4 + g * nb, nb, kn->act_ileave, facts + (size_t)(g * nb) * kn->act_facts_size);
				}
				memset(y1, 0xff, (size_t)(20 * m) * sizeof *y1);
				memset(y2, 0xff, (size_t)(20 * m) * sizeof *y2);
				kn->gemm((int)k, y1, (size_t)m, ws.packed[l], a4, (int)nr, (int)m);
				kn->gemm_facts((int)k, y2, (size_t)m, ws.packed[l], a4, facts, (int)nr, (int)m);
				same &= same_bits(y1, y2, (size_t)(nr * m));
			}
			tap_ok(same, "%s: the GEMM on mul_mat's activation facts gives its own GEMM's bits (K=%lld, "
			       "N=4,8,20, M=%lld)", kn->name, (long long)k, (long long)m);
			tested++;
			free(facts);
		}
	}
	if (!tested)
		tap_skip("no kernel here takes activation facts");
	wset_free(&ws);
	free(x);
	free(a4);
	free(y1);
	free(y2);
}

/*
 * gemv_rows, where a family has it: 2 and 3 activation rows at once must
 * give each row the bits of that family's GEMV of the row alone, over
 * block counts odd and even, one block and past the x86 GEMV's chunk, and
 * row-group counts that leave every remainder of the kernels' passes; and
 * it must leave the padding of S (between NC and LDS) alone.
 */
static int rows_match(enum qg_layout l, const struct qg_kernel *kn, const struct wset *ws, struct tap_rng *rng,
		      int nr)
{
	const int64_t k = ws->k, m = ws->m, nb = k / QG_QK, lds = m + 3;
	float *x = xmalloc((size_t)(nr * k) * sizeof *x);
	struct qg_block_q8_0 *a = xmalloc((size_t)(nr * nb) * sizeof *a);
	float *y = xmalloc((size_t)(nr * lds) * sizeof *y), *y1 = xmalloc((size_t)m * sizeof *y1);
	int ok = 1;

	fill(rng, x, (size_t)(nr * k), -2.0f, 2.0f);
	for (int r = 0; r < nr; r++)
		qg_quantize_row_q8_0(x + r * k, a + r * nb, k);
	memset(y, 0xff, (size_t)(nr * lds) * sizeof *y);
	kn->gemv_rows((int)k, y, (size_t)lds, ws->packed[l], a, nr, (int)m);
	for (int r = 0; r < nr; r++) {
		kn->gemv((int)k, y1, ws->packed[l], a + r * nb, (int)m);
		ok &= same_bits(y + r * lds, y1, (size_t)m);
		for (int64_t j = m; j < lds; j++)
			ok &= isnan(y[r * lds + j]);
	}
	free(x);
	free(a);
	free(y);
	free(y1);
	return ok;
}

static void test_gemv_rows(struct tap_rng *rng)
{
	/* 1, 2, 3, 8 and 9 blocks, 129 (odd, past a pass of 64/128), 257 (past the x86 GEMV's 256) */
	static const int64_t ks[] = { 32, 64, 96, 256, 288, 4128, 8224 };
	/* row groups: 1 to 5 (every remainder of passes of 2, 3 or 4 groups) and 9 */
	static const int64_t gs[] = { 1, 2, 3, 4, 5, 9 };
	int any = 0;

	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		for (int f = 0; f < QG_KF_COUNT; f++) {
			const struct qg_kernel *kn = qg_kernel_get(f, l);
			if (!kn || !kn->gemv_rows)
				continue;
			any = 1;
			int ok = 1, cases = 0;
			for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
				for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++) {
					struct wset ws;
					/* fewer shapes at large K: qemu is slow */
					if (ks[ki] >= 4096 && gs[gi] != 1 && gs[gi] != 5)
						continue;
					wset_make(&ws, rng, gs[gi] * layout_r[l], ks[ki]);
					for (int nr = 2; nr <= 3; nr++, cases++)
						ok &= rows_match(l, kn, &ws, rng, nr);
					wset_free(&ws);
				}
			}
			tap_ok(ok, "%s: gemv_rows of 2 and 3 rows gives each row its GEMV's bits (%d shapes)",
			       kn->name, cases);
		}
	}
	if (!any)
		tap_skip("no family with gemv_rows runs here");
}

/*
 * sve256 8x8, beyond the comparison with portable above.  At a vector
 * length of 32 bytes its arithmetic is the i8mm kernels' (one fused
 * multiply-add per block, scales multiplied first), so it must give their
 * bits exactly, over row-group counts that exercise each of its paths
 * (GEMV: 1 to 4 groups a pass and the rest, one row and three at once
 * through gemv_rows; GEMM: 1 to 4 activation groups a tile, an odd or
 * even number of blocks, K beyond one pass of its scale table), and it
 * must leave Y's padding alone.  At any other length the
 * dispatcher must not offer it, and its table entries, called directly,
 * must give the portable kernel's bits (they hand such calls over).
 */
#if defined(__aarch64__) && defined(HAVE_SVE)
static int sve256_matches(const struct qg_kernel *kn, const struct qg_kernel *ref, struct tap_rng *rng,
			  int64_t k, int64_t m, int64_t nr, int *padding_ok)
{
	const int64_t nb = k / QG_QK, lds = m + 3;
	struct wset ws;
	float *x = xmalloc((size_t)(nr * k) * sizeof *x);
	struct qg_block_q8_0 *a = xmalloc((size_t)nb * sizeof *a);
	struct qg_block_q8_0x4 *a4 = xmalloc((size_t)(nr / 4 * nb) * sizeof *a4);
	float *y1 = xmalloc((size_t)(nr * lds) * sizeof *y1), *y2 = xmalloc((size_t)(nr * lds) * sizeof *y2);
	int ok;

	wset_make(&ws, rng, m, k);
	fill(rng, x, (size_t)(nr * k), -1.5f, 1.5f);
	qg_quantize_row_q8_0(x, a, k);
	for (int64_t g = 0; g < nr / 4; g++)
		qg_quantize_rows_q8_0x4(x + g * 4 * k, (size_t)k, a4 + g * nb, k, kn->act_ileave);
	memset(y1, 0xff, (size_t)(nr * lds) * sizeof *y1);
	memset(y2, 0xff, (size_t)(nr * lds) * sizeof *y2);
	kn->gemv((int)k, y1, ws.packed[QG_LAYOUT_8X8], a, (int)m);
	ref->gemv((int)k, y2, ws.packed[QG_LAYOUT_8X8], a, (int)m);
	ok = same_bits(y1, y2, (size_t)m);
	/* three rows at once: each the reference's GEMV of it */
	if (nr >= 3) {
		struct qg_block_q8_0 *a3 = xmalloc((size_t)(3 * nb) * sizeof *a3);
		for (int r = 0; r < 3; r++)
			qg_quantize_row_q8_0(x + r * k, a3 + r * nb, k);
		kn->gemv_rows((int)k, y1, (size_t)lds, ws.packed[QG_LAYOUT_8X8], a3, 3, (int)m);
		for (int r = 0; r < 3; r++) {
			ref->gemv((int)k, y2, ws.packed[QG_LAYOUT_8X8], a3 + r * nb, (int)m);
			ok &= same_bits(y1 + r * lds, y2, (size_t)m);
		}
		free(a3);
	}
	kn->gemm((int)k, y1, (size_t)lds, ws.packed[QG_LAYOUT_8X8], a4, (int)nr, (int)m);
	ref->gemm((int)k, y2, (size_t)lds, ws.packed[QG_LAYOUT_8X8], a4, (int)nr, (int)m);
	ok &= same_bits(y1, y2, (size_t)(nr * lds));
	for (int64_t r = 0; r < nr; r++)
		for (int64_t j = m; j < lds; j++)
			*padding_ok &= isnan(y1[r * lds + j]);
	wset_free(&ws);
	free(x);
	free(a);
	free(a4);
	free(y1);
	free(y2);
	return ok;
}

static void test_sve256(struct tap_rng *rng)
{
	const struct qg_cpu *c = qg_cpu_features();
	const struct qg_kernel *kn = &qg_kernels_sve256[QG_LAYOUT_8X8];

	if (!c->sve) {
		tap_skip("no SVE: the sve256 kernels cannot be called here");
		return;
	}
	if (c->sve_bytes != 32) {
		int none = 1;
		for (int l = 0; l < QG_LAYOUT_COUNT; l++)
			none &= qg_kernel_get(QG_KF_SVE256, l) == NULL;
		tap_ok(none && strstr(qg_kernel_reason(QG_LAYOUT_8X8), "sve256: SVE vector") != NULL,
		       "SVE vector %d bytes: no sve256 kernel offered, and the reason says why", c->sve_bytes);
		int ok = 1, pad = 1;
		ok &= sve256_matches(kn, &qg_kernels_portable[QG_LAYOUT_8X8], rng, 96, 24, 12, &pad);
		ok &= sve256_matches(kn, &qg_kernels_portable[QG_LAYOUT_8X8], rng, 2080, 16, 8, &pad);
		tap_ok(ok && pad, "SVE vector %d bytes: sve256's entries called directly give the portable bits",
		       c->sve_bytes);
		return;
	}
	const struct qg_kernel *ref = qg_kernel_get(QG_KF_I8MM, QG_LAYOUT_8X8);
	tap_ok(qg_kernel_get(QG_KF_SVE256, QG_LAYOUT_8X8) == kn && strstr(qg_kernel_reason(QG_LAYOUT_8X8), "I8MM"),
	       "SVE vector 32 bytes: sve256 8x8 offered, the reason names i8mm (%s)", qg_kernel_reason(QG_LAYOUT_8X8));
	if (!ref) {
		tap_skip("no i8mm 8x8 kernel in this build to compare sve256 with");
		return;
	}
	/* M: 1, 3, 7, 8 row groups; NR: 1 to 7 activation groups; K: 1, 3, 8, 65, 129 blocks */
	static const struct { int64_t k, m, nr; } shapes[] = {
		{ 32, 8, 4 }, { 96, 24, 8 }, { 96, 56, 12 }, { 256, 64, 16 }, { 256, 8, 20 },
		{ 2080, 24, 28 }, { 4128, 16, 16 }, { 4128, 8, 4 },
	};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		int pad = 1;
		int ok = sve256_matches(kn, ref, rng, shapes[i].k, shapes[i].m, shapes[i].nr, &pad);
		tap_ok(ok && pad, "sve256 8x8 equals i8mm 8x8 bit for bit: K=%lld M=%lld, GEMV and GEMM of %lld rows%s",
		       (long long)shapes[i].k, (long long)shapes[i].m, (long long)shapes[i].nr,
		       pad ? "" : " (wrote Y's padding)");
	}
}
#endif

/* ------------------------------------------- 4. every type, thread splits */

/* Run MM split over NTH threads, serially: every quantize share, then every compute share. */
static void run_split(const struct qg_mm *mm, void *scratch, int nth)
{
	for (int ith = nth - 1; ith >= 0; ith--)
		qg_mul_mat_quantize(mm, scratch, ith, nth);
	for (int ith = 0; ith < nth; ith++)
		qg_mul_mat_compute(mm, scratch, (ith * 5 + 3) % nth, nth);	/* any order */
}

static void test_types_and_threads(struct tap_rng *rng)
{
	static const enum qg_type types[] = {
		QG_TYPE_F32, QG_TYPE_F16, QG_TYPE_Q8_0, QG_TYPE_Q4_0,
		QG_TYPE_Q4_0_4X4, QG_TYPE_Q4_0_4X8, QG_TYPE_Q4_0_8X8,
	};
	static const int nths[] = { 2, 3, 7 };
	const int64_t k = 96, ldx = 100;

	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
		const enum qg_type t = types[ti];
		const int R = qg_type_row_group(t);
		for (int shape = 0; shape < 2; shape++) {
			/* 5 row groups (uneven shares), or 1 (fewer groups than threads) */
			const int64_t m = shape ? R : 5 * R, n = shape ? 2 : 7, ldy = m + 3;
			float *w = xmalloc((size_t)(m * k) * sizeof *w);
			float *x = xmalloc((size_t)(n * ldx) * sizeof *x);
			float *y1 = xmalloc((size_t)(n * ldy) * sizeof *y1);
			float *yt = xmalloc((size_t)(n * ldy) * sizeof *yt);
			ssize_t wsize = qg_matrix_size(t, m, k);
			void *wq = xmalloc(wsize > 0 ? (size_t)wsize : 1);

			fill(rng, w, (size_t)(m * k), -1.0f, 1.0f);
			fill(rng, x, (size_t)(n * ldx), -1.0f, 1.0f);
			ssize_t wn = qg_quantize(t, w, wq, (size_t)wsize, m, k, NULL);
			struct qg_mm mm = {
				.wtype = t, .w = wq, .m = m, .k = k, .x = x, .ldx = ldx,
				.n = n, .y = y1, .ldy = ldy,
			};
			size_t ss = qg_mul_mat_scratch_size(&mm);
			void *scratch = xmalloc(ss);

			memset(y1, 0xff, (size_t)(n * ldy) * sizeof *y1);
			int err = qg_mul_mat(&mm, scratch);

			/* against the dequantized weights (and Q8_0 activations where quantized) */
			float *wd = xmalloc((size_t)(m * k) * sizeof *wd);
			qg_dequantize(t, wq, wd, (size_t)(m * k) * sizeof *wd, m, k);
			struct qg_block_q8_0 *xa = xmalloc((size_t)(k / QG_QK) * sizeof *xa);
			int ok = wn == wsize && err == 0, pad = 1;
			double worst = 0;
			for (int64_t i = 0; i < n; i++) {
				qg_quantize_row_q8_0(x + i * ldx, xa, k);
				for (int64_t r = 0; r < m; r++) {
					double ref = 0, sa = 0;
					for (int64_t c = 0; c < k; c++) {
						double xv = t == QG_TYPE_F32 || t == QG_TYPE_F16 ? x[i * ldx + c] : q8_value(xa, c);
						ref += (double)wd[r * k + c] * xv;
						sa += fabs((double)wd[r * k + c] * xv);
					}
					double d = fabs(y1[i * ldy + r] - ref);
					if (!(d <= gamma_n((double)(k + 4)) * sa + 1e-30))
						ok = 0;
					if (sa > 0 && d / sa > worst)
						worst = d / sa;
				}
				for (int64_t r = m; r < ldy; r++)
					pad &= isnan(y1[i * ldy + r]);
			}
			tap_ok(ok, "mul_mat %s M=%lld N=%lld K=%lld against dequantized weights (worst %.3g of sum|w*x|)",
			       qg_type_name(t), (long long)m, (long long)n, (long long)k, worst);
			tap_ok(pad, "mul_mat %s leaves Y's padding (LDY > M) alone", qg_type_name(t));

			for (size_t hi = 0; hi < sizeof nths / sizeof nths[0]; hi++) {
				mm.y = yt;
				memset(yt, 0xff, (size_t)(n * ldy) * sizeof *yt);
				memset(scratch, 0x5a, ss);
				run_split(&mm, scratch, nths[hi]);
				tap_ok(same_bits(yt, y1, (size_t)(n * ldy)),
				       "mul_mat %s M=%lld N=%lld over %d threads equals 1 thread",
				       qg_type_name(t), (long long)m, (long long)n, nths[hi]);
			}
			free(w);
			free(x);
			free(y1);
			free(yt);
			free(wq);
			free(wd);
			free(xa);
			free(scratch);
		}
	}
}

/* ------------------------------------------------------ 5. check's errors */

static void test_check(void)
{
	static float xbuf[64 * 2], ybuf[64 * 2];
	static uint8_t wbuf[8 * 2 * 18];
	const struct qg_mm good = {
		.wtype = QG_TYPE_Q4_0_8X8, .w = wbuf, .m = 8, .k = 64,
		.x = xbuf, .ldx = 64, .n = 2, .y = ybuf, .ldy = 8,
	};
	struct qg_mm mm;
	float y[8];
	int wrong_layout = -1;

	tap_ok(qg_mul_mat_check(&good) == 0, "check accepts a good product");
	tap_ok(qg_mul_mat_check(NULL) == -EINVAL, "check: NULL mm");
#define BAD(field, value, want, what) do { \
		mm = good; mm.field = value; \
		int r_ = qg_mul_mat_check(&mm); \
		tap_ok(r_ == (want), "check: %s gives %d (want %d)", what, r_, want); \
	} while (0)
	BAD(w, NULL, -EINVAL, "NULL w");
	BAD(x, NULL, -EINVAL, "NULL x");
	BAD(y, NULL, -EINVAL, "NULL y");
	BAD(m, 4, -EINVAL, "M not a multiple of 8 for 8x8");
	BAD(m, 0, -EINVAL, "M = 0");
	BAD(m, -8, -EINVAL, "negative M");
	BAD(k, 48, -EINVAL, "K not a multiple of 32");
	BAD(k, 0, -EINVAL, "K = 0");
	BAD(n, 0, -EINVAL, "N = 0");
	BAD(n, -1, -EINVAL, "negative N");
	BAD(ldx, 63, -EINVAL, "LDX < K");
	BAD(ldy, 7, -EINVAL, "LDY < M");
	BAD(wtype, QG_TYPE_Q8_0_4X8, -EINVAL, "activation type as weights");
	BAD(wtype, QG_TYPE_Q8_0_4X4, 0, "Q8_0_4X4 weights, M a multiple of 4");
	mm = good;
	mm.wtype = QG_TYPE_Q8_0_4X4;
	mm.m = 6;
	mm.ldy = 6;
	tap_ok(qg_mul_mat_check(&mm) == -EINVAL, "check: Q8_0_4X4 weights with M not a multiple of 4");
	mm.m = 4;
	mm.ldy = 8;
	mm.kq_kernel = &qg_kq_portable;
	tap_ok(qg_mul_mat_check(&mm) == 0, "check: Q8_0_4X4 weights with the portable K-quant kernels asked for");
	BAD(wtype, QG_TYPE_COUNT, -EINVAL, "type out of range");
	BAD(wtype, (enum qg_type)-1, -EINVAL, "negative type");
	mm = good;
	mm.k = (int64_t)1 << 32;
	mm.ldx = (size_t)1 << 32;
	tap_ok(qg_mul_mat_check(&mm) == -EOVERFLOW, "check: K beyond int");
	mm = good;
	mm.m = (int64_t)1 << 40;
	mm.ldy = (size_t)1 << 40;
	tap_ok(qg_mul_mat_check(&mm) == -EOVERFLOW, "check: M beyond int");
	BAD(n, INT64_MAX, -EOVERFLOW, "N*LDX beyond the address space");
	mm = good;
	mm.ldx = SIZE_MAX / 2;
	tap_ok(qg_mul_mat_check(&mm) == -EOVERFLOW, "check: huge LDX");
	mm = good;
	mm.wtype = QG_TYPE_F32;
	mm.m = mm.k = INT_MAX;
	mm.ldx = mm.ldy = INT_MAX;
	mm.n = 1;
	tap_ok(qg_mul_mat_check(&mm) == -EOVERFLOW, "check: a weight matrix beyond the address space");
	BAD(kernel, &qg_kernels_portable[QG_LAYOUT_4X4], -EINVAL, "a 4x4 kernel for 8x8 weights");
	BAD(kernel, &qg_kernels_portable[QG_LAYOUT_8X8], 0, "the 8x8 portable kernel");
	/* a kernel that is not one of the tables' */
	struct qg_kernel fake = qg_kernels_portable[QG_LAYOUT_8X8];
	BAD(kernel, &fake, -EINVAL, "a kernel from outside the tables");
#undef BAD
	/* a family this CPU cannot run: its table entry is refused */
#if defined(__x86_64__) && defined(HAVE_AVX512VNNI)
	if (!qg_cpu_features()->avx512vnni && qg_kernels_avx512vnni[QG_LAYOUT_8X8].gemv) {
		mm = good;
		mm.kernel = &qg_kernels_avx512vnni[QG_LAYOUT_8X8];
		wrong_layout = qg_mul_mat_check(&mm);
	}
#endif
#if defined(__aarch64__) && defined(HAVE_SVE)
	if (!qg_kernel_get(QG_KF_SVE256, QG_LAYOUT_8X8) && qg_kernels_sve256[QG_LAYOUT_8X8].gemv) {
		mm = good;
		mm.kernel = &qg_kernels_sve256[QG_LAYOUT_8X8];
		wrong_layout = qg_mul_mat_check(&mm);
	}
#endif
	if (wrong_layout != -1)
		tap_ok(wrong_layout == -EINVAL, "check: a kernel this CPU cannot run is refused");
	mm = good;
	tap_ok(qg_mul_mat(&mm, NULL) == -EINVAL, "mul_mat: NULL scratch where scratch is needed");
	mm.wtype = QG_TYPE_F32;
	mm.m = 1;
	mm.k = 2;
	mm.ldx = 2;
	mm.n = 1;
	mm.y = y;
	mm.ldy = 1;
	tap_ok(qg_mul_mat_check(&mm) == 0 && qg_mul_mat_scratch_size(&mm) == 0 &&
	       qg_mul_mat(&mm, NULL) == 0, "F32 weights: any K, no scratch");
	mm.m = 8;
	mm.wtype = QG_TYPE_Q4_0_8X8;
	mm.k = 64;
	mm.ldx = 64;
	mm.ldy = 8;
	mm.y = ybuf;
	tap_ok(qg_mul_mat_scratch_size(&mm) == 64 / 32 * sizeof(struct qg_block_q8_0),
	       "scratch: one Q8_0 row for N=1");
	mm.n = 5;
	const struct qg_kernel *skn = qg_mul_mat_kernel(&mm);
	const size_t codes5 = 2 * (sizeof(struct qg_block_q8_0x4) + sizeof(struct qg_block_q8_0));
	const size_t facts5 = skn && skn->act_facts ? 2 * skn->act_facts_size : 0;	/* one group of two blocks */
	tap_ok(qg_mul_mat_scratch_size(&mm) == (facts5 ? (codes5 + 63) / 64 * 64 + facts5 : codes5),
	       "scratch: one group of four and one row for N=5 (%s: %zu bytes of facts after them)",
	       skn ? skn->name : "?", facts5);
	mm.n = 0;
	tap_ok(qg_mul_mat_scratch_size(&mm) == 0, "scratch size of an invalid product is 0");
	/* phases on invalid input or thread index do nothing */
	memset(ybuf, 0, sizeof ybuf);
	mm = good;
	qg_mul_mat_compute(&mm, NULL, 2, 2);
	qg_mul_mat_compute(&mm, NULL, -1, 2);
	qg_mul_mat_compute(&mm, NULL, 0, 0);
	mm.k = 33;
	qg_mul_mat_compute(&mm, NULL, 0, 1);
	int zero = 1;
	for (size_t i = 0; i < sizeof ybuf / sizeof ybuf[0]; i++)
		zero &= ybuf[i] == 0.0f;
	tap_ok(zero, "phases ignore a bad thread index or an invalid product");
}

/* ------------------------------------------------------------ 6. dispatch */

struct model {
	const char *name;
	int dotprod, i8mm, sve, sve_bytes;	/* sve_bytes -1: any but 32 */
};

static const struct model models[] = {
	{ "cortex-a72", 0, 0, 0, 0 },
	{ "cortex-a57", 0, 0, 0, 0 },
	{ "neoverse-n1", 1, 0, 0, 0 },
	{ "cortex-a76", 1, 0, 0, 0 },
	{ "max,sve=off", 1, 1, 0, 0 },
	{ "max,sve128=on", 1, 1, 1, 16 },
	{ "max,sve256=on", 1, 1, 1, 32 },
	{ "max", 1, 1, 1, -1 },
};

#if defined(__aarch64__)
/* The table entry of FAMILY for LAYOUT exists in this build (regardless of the CPU). */
static int entry_exists(enum qg_kfamily f, enum qg_layout l)
{
	const struct qg_kernel *t = NULL;

	switch (f) {
#if defined(HAVE_NEON)
	case QG_KF_NEON: t = qg_kernels_neon; break;
#endif
#if defined(HAVE_DOTPROD)
	case QG_KF_DOTPROD: t = qg_kernels_dotprod; break;
#endif
#if defined(HAVE_I8MM)
	case QG_KF_I8MM: t = qg_kernels_i8mm; break;
#endif
#if defined(HAVE_SVE)
	case QG_KF_SVE256: t = qg_kernels_sve256; break;
#endif
	case QG_KF_PORTABLE: t = qg_kernels_portable; break;
	default: break;
	}
	return t && t[l].gemv && t[l].gemm;
}

/* What the preference order gives on model MD. */
static enum qg_kfamily expected_family(const struct model *md, enum qg_layout l)
{
	static const enum qg_kfamily order[QG_LAYOUT_COUNT][5] = {
		[QG_LAYOUT_4X4] = { QG_KF_DOTPROD, QG_KF_I8MM, QG_KF_SVE256, QG_KF_NEON, QG_KF_PORTABLE },
		[QG_LAYOUT_4X8] = { QG_KF_I8MM, QG_KF_SVE256, QG_KF_DOTPROD, QG_KF_NEON, QG_KF_PORTABLE },
		[QG_LAYOUT_8X8] = { QG_KF_SVE256, QG_KF_I8MM, QG_KF_DOTPROD, QG_KF_NEON, QG_KF_PORTABLE },
	};
	for (int i = 0; i < 5; i++) {
		enum qg_kfamily f = order[l][i];
		int runs = f == QG_KF_PORTABLE || f == QG_KF_NEON ||
			   (f == QG_KF_DOTPROD && md->dotprod) ||
			   (f == QG_KF_I8MM && md->i8mm && md->dotprod) ||
			   (f == QG_KF_SVE256 && md->sve && md->sve_bytes == 32 && md->i8mm);
		if (runs && entry_exists(f, l))
			return f;
	}
	return QG_KF_PORTABLE;
}
#endif

static void test_cpu_and_choice(void)
{
	const struct qg_cpu *c = qg_cpu_features();
	const char *model = getenv("QG_CPU_MODEL");
	const char *env = getenv("QGRAPH_KERNELS");

	tap_diag("CPU: neon=%d dotprod=%d i8mm=%d sve=%d (%d bytes) avx2=%d fma=%d f16c=%d avx512=%d avx512vnni=%d",
		 c->neon, c->dotprod, c->i8mm, c->sve, c->sve_bytes, c->avx2, c->fma, c->f16c,
		 c->avx512, c->avx512vnni);
	tap_ok(qg_cpu_features() == c, "qg_cpu_features() is probed once");
#if defined(__x86_64__)
	__builtin_cpu_init();
	tap_ok(c->avx2 == !!__builtin_cpu_supports("avx2") && c->fma == !!__builtin_cpu_supports("fma"),
	       "x86-64: AVX2 and FMA as the compiler's own probe sees them");
	tap_ok(c->avx512vnni == (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
				 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")),
	       "x86-64: AVX-512 VNNI as the compiler's own probe sees it");
#endif
#if defined(__aarch64__)
	tap_ok(c->neon, "aarch64: NEON (HWCAP_ASIMD) present");
	tap_ok(c->sve ? c->sve_bytes >= 16 && c->sve_bytes % 16 == 0 : c->sve_bytes == 0,
	       "aarch64: SVE vector length %d bytes is sane", c->sve_bytes);
#endif
	if (env && env[0]) {
		tap_diag("QGRAPH_KERNELS=%s is set: the unforced checks are left to the children below", env);
		return;
	}
	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		const struct qg_kernel *k = qg_kernel_for(l);
		int simd = 0;
		for (int f = 1; f < QG_KF_COUNT; f++)
			simd |= qg_kernel_get(f, l) != NULL;
		tap_diag("%s: %s -- %s", layout_name[l], k->name, qg_kernel_reason(l));
		tap_ok(k && k == qg_kernel_get(k->family, l), "%s: the chosen kernel (%s) runs on this CPU",
		       layout_name[l], k ? k->name : "NULL");
		tap_ok(!simd || k->family != QG_KF_PORTABLE,
		       "%s: portable is not chosen while a SIMD family serves the layout", layout_name[l]);
		tap_ok(c->sve_bytes == 32 || k->family != QG_KF_SVE256,
		       "%s: sve256 is not chosen at a vector length of %d bytes", layout_name[l], c->sve_bytes);
	}
	tap_diag("best weight type: %s", qg_type_name(qg_best_weight_type()));
	tap_ok(qg_layout_of(qg_best_weight_type()) >= 0, "the best weight type is an interleaved layout");

	const struct model *md = NULL;
	for (size_t i = 0; model && i < sizeof models / sizeof models[0]; i++)
		if (strcmp(model, models[i].name) == 0)
			md = &models[i];
	if (!md) {
		tap_diag("CPU model %s: no expectations on record", model ? model : "(unset)");
		return;
	}
#if defined(__aarch64__)
	tap_ok(c->dotprod == md->dotprod && c->i8mm == md->i8mm && c->sve == md->sve &&
	       (md->sve_bytes >= 0 ? c->sve_bytes == md->sve_bytes : c->sve_bytes != 32),
	       "%s: features as the model has them", md->name);
	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		enum qg_kfamily want = expected_family(md, l);
		tap_ok(qg_kernel_for(l)->family == want, "%s %s: %s chosen (expected %s)", md->name,
		       layout_name[l], qg_kfamily_name(qg_kernel_for(l)->family), qg_kfamily_name(want));
	}
	enum qg_type best = qg_best_weight_type();
	/* 8x8 on SVE-256, 4x8 with i8mm, 4x4 with dotprod or plain NEON, 8x8 for portable C */
	enum qg_type want = qg_kernel_get(QG_KF_SVE256, QG_LAYOUT_8X8) ? QG_TYPE_Q4_0_8X8
		: qg_kernel_get(QG_KF_I8MM, QG_LAYOUT_4X8) ? QG_TYPE_Q4_0_4X8
		: qg_kernel_get(QG_KF_DOTPROD, QG_LAYOUT_4X4) || qg_kernel_get(QG_KF_NEON, QG_LAYOUT_4X4)
		? QG_TYPE_Q4_0_4X4 : QG_TYPE_Q4_0_8X8;
	tap_ok(best == want, "%s: best weight type %s (expected %s)", md->name, qg_type_name(best),
	       qg_type_name(want));
#else
	tap_diag("model %s is an aarch64 model; this is not an aarch64 build", md->name);
#endif
}

static void test_force(void)
{
	const struct qg_kernel *before[QG_LAYOUT_COUNT];

	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		before[l] = qg_kernel_for(l);
	tap_ok(qg_kernels_force(QG_KF_PORTABLE) == 0, "force portable");
	int ok = 1;
	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		ok &= qg_kernel_for(l) == &qg_kernels_portable[l] && strstr(qg_kernel_reason(l), "forced");
	tap_ok(ok, "forced: every layout runs the portable kernel, and the reason says forced");

	/* mul_mat with no kernel of its own follows the forced choice */
	struct tap_rng rng = { 99 };
	struct wset ws;
	float x[3 * 64], y1[3 * 8], y2[3 * 8];
	wset_make(&ws, &rng, 8, 64);
	fill(&rng, x, 3 * 64, -1, 1);
	run_mm(QG_LAYOUT_8X8, NULL, &ws, x, 3, y1);
	run_mm(QG_LAYOUT_8X8, &qg_kernels_portable[QG_LAYOUT_8X8], &ws, x, 3, y2);
	struct qg_mm mm = { .wtype = QG_TYPE_Q4_0_8X8 };
	tap_ok(qg_mul_mat_kernel(&mm) == &qg_kernels_portable[QG_LAYOUT_8X8] && same_bits(y1, y2, 24),
	       "forced portable: mul_mat runs it");
	wset_free(&ws);

	/* a family this CPU cannot run (or this build lacks) */
#if defined(__x86_64__)
	const enum qg_kfamily foreign = QG_KF_NEON;
#else
	const enum qg_kfamily foreign = QG_KF_AVX2;
#endif
	tap_ok(qg_kernels_force(foreign) == -ENOTSUP, "force %s: -ENOTSUP", qg_kfamily_name(foreign));
	ok = 1;
	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		ok &= qg_kernel_for(l) == &qg_kernels_portable[l];
	tap_ok(ok, "a refused force changes nothing");
	for (int f = 1; f < QG_KF_COUNT; f++) {
		int served = 0;
		for (int l = 0; l < QG_LAYOUT_COUNT; l++)
			served += qg_kernel_get(f, l) != NULL;
		int r = qg_kernels_force(f);
		if (served == 0) {
			tap_ok(r == -ENOTSUP, "force %s (nothing it serves runs here): -ENOTSUP", qg_kfamily_name(f));
			continue;
		}
		ok = r == 0;
		for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
			const struct qg_kernel *want = qg_kernel_get(f, l);
			ok &= qg_kernel_for(l) == (want ? want : before[l]);
		}
		tap_ok(ok, "force %s: the layouts it serves run it, the others keep the automatic choice",
		       qg_kfamily_name(f));
	}
	tap_ok(qg_kernels_force((enum qg_kfamily)-1) == -EINVAL && qg_kernels_force(QG_KF_COUNT + 1) == -EINVAL,
	       "force of a family out of range: -EINVAL");
	tap_ok(qg_kernels_force(QG_KF_COUNT) == 0, "back to automatic");
	ok = 1;
	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		ok &= qg_kernel_for(l) == before[l];
	tap_ok(ok, "automatic again: the first choice is back");
	tap_ok(qg_kfamily_from_name("AVX512VNNI") == QG_KF_AVX512VNNI && qg_kfamily_from_name("x") == -EINVAL &&
	       qg_kfamily_from_name(NULL) == -EINVAL && qg_kfamily_name(QG_KF_COUNT) == NULL &&
	       strcmp(qg_kfamily_name(QG_KF_I8MM), "i8mm") == 0, "family names");
	ok = qg_layout_of(QG_TYPE_Q4_0) == -EINVAL && qg_layout_of(QG_TYPE_Q8_0_4X8) == -EINVAL;
	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		ok &= qg_layout_of(qg_layout_type(l)) == l;
	tap_ok(ok, "layouts and their types");
}

/*
 * QGRAPH_KERNELS is read at the first call, so each value is tried in a
 * child forked before this process asks anything: the child reports the
 * family of each layout and whether its reason mentions the variable.
 */
struct env_result {
	int family[QG_LAYOUT_COUNT];
	int mentions[QG_LAYOUT_COUNT];	/* reason names QGRAPH_KERNELS */
	int ignored[QG_LAYOUT_COUNT];	/* reason says it was ignored */
	int ok;
};

static struct env_result env_child(const char *value)
{
	struct env_result res = { .ok = 0 };
	int fd[2];

	if (pipe(fd) != 0)
		return res;
	fflush(stdout);
	pid_t pid = tap_fork();
	if (pid == 0) {
		close(fd[0]);
		setenv("QGRAPH_KERNELS", value, 1);
		struct env_result r = { .ok = 1 };
		for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
			r.family[l] = qg_kernel_for(l)->family;
			r.mentions[l] = strstr(qg_kernel_reason(l), "QGRAPH_KERNELS") != NULL;
			r.ignored[l] = strstr(qg_kernel_reason(l), "ignored") != NULL;
		}
		ssize_t n = write(fd[1], &r, sizeof r);
		_exit(n == (ssize_t)sizeof r ? 0 : 1);
	}
	close(fd[1]);
	if (pid > 0) {
		ssize_t n = read(fd[0], &res, sizeof res);
		int st;
		waitpid(pid, &st, 0);
		if (n != (ssize_t)sizeof res || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			res.ok = 0;
	}
	close(fd[0]);
	return res;
}

static void test_env(struct env_result *r_portable, struct env_result *r_bogus,
		     struct env_result *r_foreign, struct env_result *r_auto)
{
	int ok = r_portable->ok;
	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		ok &= r_portable->family[l] == QG_KF_PORTABLE && r_portable->mentions[l] && !r_portable->ignored[l];
	tap_ok(ok, "QGRAPH_KERNELS=portable forces the portable kernels, and the reason says so");
	ok = r_bogus->ok && r_foreign->ok && r_auto->ok;
	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		int autof = qg_kernel_for(l)->family;
		ok &= r_bogus->family[l] == autof && r_bogus->ignored[l];
		ok &= r_foreign->family[l] == autof && r_foreign->ignored[l];
		ok &= r_auto->family[l] == autof && !r_auto->mentions[l];
	}
	tap_ok(ok, "QGRAPH_KERNELS: an unknown name or a family the CPU cannot run is reported and ignored; auto is automatic");
}

int main(void)
{
	struct tap_rng rng = { 0x9e3779b97f4a7c15ULL };
	struct env_result r_portable, r_bogus, r_foreign, r_auto;
	const char *env = getenv("QGRAPH_KERNELS");

	/* before anything in this process reads the choice */
	if (env && env[0])
		unsetenv("QGRAPH_KERNELS");
	r_portable = env_child("portable");
	r_bogus = env_child("no-such-family");
#if defined(__x86_64__)
	r_foreign = env_child("neon");
#else
	r_foreign = env_child("avx2");
#endif
	r_auto = env_child("auto");

	test_hand_checked();
	test_repack_agrees(&rng);
	test_reference(&rng);
	test_families(&rng);
	test_act_facts(&rng);
	test_gemv_rows(&rng);
#if defined(__aarch64__) && defined(HAVE_SVE)
	test_sve256(&rng);
#endif
	test_types_and_threads(&rng);
	test_check();
	test_cpu_and_choice();
	test_force();
	test_env(&r_portable, &r_bogus, &r_foreign, &r_auto);
	return tap_done();
}
