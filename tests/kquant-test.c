/*
 * kquant-test.c - the K-quants against ggml: quantized bytes equal to the
 * pinned llama.cpp's (tests/data/kquant-vectors.bin, made by
 * tests/make-kquant-vectors.c), dot products within rounding of its
 * vec_dot, dequantization consistent with quantization, every K-quant
 * kernel family this CPU runs equal to the reference bit for bit, mul_mat
 * with Q4_K and Q6_K weights, the Q8_0_4X4 kernels and mul_mat against
 * that layout's fused float order, and bad arguments refused.
 */
#include "config.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "kquant.h"
#include "mulmat.h"
#include "quant.h"
#include "tap.h"

struct vectors {
	uint32_t rows, cols;
	float *w, *a;
	uint8_t *q4k, *q6k, *q8k;
	float *dot;		/* [rows][2] */
	float *im;		/* [cols] importance */
	uint8_t *q4k_im, *q6k_im;	/* ggml's bytes with the importance matrix */
	void *buf;
};

static uint64_t rng = 12345;

static uint32_t rnd(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}

static float frand(void)
{
	return (float)rnd() / 2147483648.0f - 1.0f;	/* [-1, 1) */
}

static int load(struct vectors *v)
{
	const char *top = getenv("QG_TOP_SRCDIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/tests/data/kquant-vectors.bin", top ? top : "..");
	FILE *f = fopen(path, "rb");
	if (!f) {
		tap_diag("%s: %s", path, strerror(errno));
		return -1;
	}
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	if (n < 16 || memcmp(buf, "QGKQV2\0\0", 8) != 0)
		return -1;
	memcpy(&v->rows, buf + 8, 4);
	memcpy(&v->cols, buf + 12, 4);
	if (v->rows == 0 || v->rows > 64 || v->cols == 0 || v->cols % 256 || v->cols > 4096)
		return -1;
	size_t nb = v->cols / 256;
	size_t need = 16 + 4 * (size_t)v->rows * v->cols + 4 * (size_t)v->cols + v->rows * nb * 144 +
		      v->rows * nb * 210 + nb * 292 + 8 * (size_t)v->rows + 4 * (size_t)v->cols + v->rows * nb * 144 +
		      v->rows * nb * 210;
	if (n != need)
		return -1;
	/* copied out so that every field is aligned for its type */
	v->buf = malloc(need);
	if (!v->buf)
		return -1;
	memcpy(v->buf, buf, need);
	char *p = (char *)v->buf + 16;
	v->w = (float *)p;
	p += 4 * (size_t)v->rows * v->cols;
	v->a = (float *)p;
	p += 4 * (size_t)v->cols;
	v->q4k = (uint8_t *)p;
	p += v->rows * nb * 144;
	v->q6k = (uint8_t *)p;
	p += v->rows * nb * 210;
	v->q8k = (uint8_t *)p;	/* 16 + 4*(...) + multiples of 4: 4-aligned */
	p += nb * 292;
	v->dot = (float *)p;
	p += 8 * (size_t)v->rows;
	v->im = (float *)p;
	p += 4 * (size_t)v->cols;
	v->q4k_im = (uint8_t *)p;
	p += v->rows * nb * 144;
	v->q6k_im = (uint8_t *)p;
	return 0;
}

/* Super-blocks of SIZE bytes that differ between A and B (N of them); the first is reported. */
static int count_diff(const char *what, const uint8_t *a, const uint8_t *b, size_t n, size_t size)
{
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (memcmp(a + i * size, b + i * size, size) == 0)
			continue;
		if (!bad++)
			for (size_t j = 0; j < size; j++)
				if (a[i * size + j] != b[i * size + j]) {
					tap_diag("%s: super-block %zu differs first at byte %zu: %02x, ggml %02x", what, i,
						 j, a[i * size + j], b[i * size + j]);
					break;
				}
	}
	return bad;
}

static void test_bytes(const struct vectors *v)
{
	const size_t nb = v->cols / 256, rows = v->rows;
	uint8_t *q = malloc(rows * nb * 292);
	int bad;

	ssize_t r = qg_quantize(QG_TYPE_Q4_K, v->w, q, rows * nb * 144, rows, v->cols, NULL);
	bad = count_diff("q4_K", q, v->q4k, rows * nb, 144);
	tap_ok(r == (ssize_t)(rows * nb * 144) && bad == 0, "Q4_K: %zu super-blocks equal ggml's byte for byte (%d differ)",
	       rows * nb, bad);

	r = qg_quantize(QG_TYPE_Q6_K, v->w, q, rows * nb * 210, rows, v->cols, NULL);
	bad = count_diff("q6_K", q, v->q6k, rows * nb, 210);
	tap_ok(r == (ssize_t)(rows * nb * 210) && bad == 0, "Q6_K: %zu super-blocks equal ggml's byte for byte (%d differ)",
	       rows * nb, bad);

	r = qg_quantize(QG_TYPE_Q4_K, v->w, q, rows * nb * 144, rows, v->cols, v->im);
	bad = count_diff("q4_K imatrix", q, v->q4k_im, rows * nb, 144);
	tap_ok(r == (ssize_t)(rows * nb * 144) && bad == 0 && memcmp(v->q4k_im, v->q4k, rows * nb * 144) != 0,
	       "Q4_K with an importance matrix: %zu super-blocks equal ggml's quantize_q4_K (%d differ)", rows * nb, bad);

	r = qg_quantize(QG_TYPE_Q6_K, v->w, q, rows * nb * 210, rows, v->cols, v->im);
	bad = count_diff("q6_K imatrix", q, v->q6k_im, rows * nb, 210);
	tap_ok(r == (ssize_t)(rows * nb * 210) && bad == 0 && memcmp(v->q6k_im, v->q6k, rows * nb * 210) != 0,
	       "Q6_K with an importance matrix: %zu super-blocks equal ggml's quantize_q6_K (%d differ)", rows * nb, bad);

	r = qg_quantize(QG_TYPE_Q8_K, v->a, q, nb * 292, 1, v->cols, NULL);
	bad = count_diff("q8_K", q, v->q8k, nb, 292);
	tap_ok(r == (ssize_t)(nb * 292) && bad == 0, "Q8_K: %zu super-blocks equal ggml's byte for byte (%d differ)", nb,
	       bad);
	free(q);
}

/*
 * Dot products against ggml's vec_dot: they sum the same exact integers
 * per super-block but in a different float order, so they agree to a few
 * ulps of the sum of the terms' magnitudes.
 */
static void test_dots(const struct vectors *v)
{
	const size_t nb = v->cols / 256;
	const struct qg_block_q8_K *a = (const void *)v->q8k;
	float *dw = malloc(sizeof(float) * v->cols), *da = malloc(sizeof(float) * v->cols);
	int bad = 0;

	qg_dequantize_row_q8_K(a, da, v->cols);
	for (uint32_t r = 0; r < v->rows; r++) {
		for (int t = 0; t < 2; t++) {
			float ours, ggml = v->dot[2 * r + t];
			if (t == 0) {
				const struct qg_block_q4_K *w = (const void *)(v->q4k + r * nb * 144);
				ours = qg_vec_dot_q4_K_q8_K(v->cols, w, a);
				qg_dequantize_row_q4_K(w, dw, v->cols);
			} else {
				const struct qg_block_q6_K *w = (const void *)(v->q6k + r * nb * 210);
				ours = qg_vec_dot_q6_K_q8_K(v->cols, w, a);
				qg_dequantize_row_q6_K(w, dw, v->cols);
			}
			double mag = 0, exact = 0;
			for (uint32_t i = 0; i < v->cols; i++) {
				mag += fabs((double)dw[i] * da[i]);
				exact += (double)dw[i] * da[i];
			}
			double tol = 16 * FLT_EPSILON * mag + 1e-30;
			if (fabs((double)ours - ggml) > tol || fabs((double)ours - exact) > tol) {
				tap_diag("row %u %s: ours %.9g ggml %.9g dequantized %.9g (tolerance %.3g)", r,
					 t ? "q6_K" : "q4_K", ours, ggml, exact, tol);
				bad++;
			}
		}
	}
	tap_ok(bad == 0, "dot products equal ggml's vec_dot and the dequantized sum within 16 ulps of the terms (%d off)",
	       bad);
	free(dw);
	free(da);
}

/*
 * Dequantization: every value lies on the super-block's grid as stored
 * (Q6_K: d * scale * (code - 32); Q4_K: d * scale * code - dmin * min),
 * and the round trip from f32 stays within what 4 and 6 bits allow on the
 * typical super-blocks (kinds 0 and 1: relative RMS error).
 */
static void test_dequant(const struct vectors *v)
{
	const size_t n = (size_t)v->rows * v->cols;
	float *y = malloc(sizeof(float) * n);
	double e4 = 0, e6 = 0, s = 0;

	tap_ok(qg_dequantize(QG_TYPE_Q4_K, v->q4k, y, n * 4, v->rows, v->cols) == (ssize_t)(n * 4),
	       "Q4_K dequantizes");
	for (size_t i = 0; i < 512; i++) {
		double d = (double)v->w[i] - y[i];
		e4 += d * d;
		s += (double)v->w[i] * v->w[i];
	}
	tap_ok(qg_dequantize(QG_TYPE_Q6_K, v->q6k, y, n * 4, v->rows, v->cols) == (ssize_t)(n * 4),
	       "Q6_K dequantizes");
	for (size_t i = 0; i < 512; i++) {
		double d = (double)v->w[i] - y[i];
		e6 += d * d;
	}
	e4 = sqrt(e4 / s);
	e6 = sqrt(e6 / s);
	tap_diag("relative RMS error: q4_K %.4f, q6_K %.4f", e4, e6);
	tap_ok(e4 < 0.12 && e6 < 0.03 && e6 < e4, "round trip error: q4_K %.4f < 0.12, q6_K %.4f < 0.03", e4, e6);

	/* the grid: a hand-made Q6_K block decodes to d * scale * (code - 32) */
	struct qg_block_q6_K b6;
	memset(&b6, 0, sizeof b6);
	for (int i = 0; i < 128; i++)
		b6.ql[i] = (uint8_t)(i * 37);
	for (int i = 0; i < 64; i++)
		b6.qh[i] = (uint8_t)(i * 91 + 5);
	for (int j = 0; j < 16; j++)
		b6.scales[j] = (int8_t)(j * 17 - 128);
	b6.d = 0x3c00;	/* 1.0 */
	float y6[256];
	qg_dequantize_row_q6_K(&b6, y6, 256);
	int bad = 0;
	for (int i = 0; i < 256; i++) {
		int h = i / 128, q = (i % 128) / 32, l = i % 32;
		int lo = (b6.ql[64 * h + l + 32 * (q & 1)] >> (4 * (q >> 1))) & 15;
		int hi = (b6.qh[32 * h + l] >> (2 * q)) & 3;
		bad += y6[i] != (float)b6.scales[i / 16] * (float)((lo | hi << 4) - 32);
	}
	tap_ok(bad == 0, "Q6_K: value i decodes from ql/qh as ggml lays them out (%d wrong)", bad);

	struct qg_block_q4_K b4;
	memset(&b4, 0, sizeof b4);
	for (int i = 0; i < 12; i++)
		b4.scales[i] = (uint8_t)(i * 73 + 11);
	for (int i = 0; i < 128; i++)
		b4.qs[i] = (uint8_t)(i * 29 + 3);
	b4.d = 0x3c00;	/* 1.0 */
	b4.dmin = 0x3800;	/* 0.5 */
	float y4[256];
	qg_dequantize_row_q4_K(&b4, y4, 256);
	bad = 0;
	for (int i = 0; i < 256; i++) {
		int j = i / 32, sc, m;
		if (j < 4) {
			sc = b4.scales[j] & 63;
			m = b4.scales[j + 4] & 63;
		} else {
			sc = (b4.scales[j + 4] & 15) | (b4.scales[j - 4] >> 6) << 4;
			m = (b4.scales[j + 4] >> 4) | (b4.scales[j] >> 6) << 4;
		}
		int code = (b4.qs[32 * (j / 2) + i % 32] >> (4 * (j & 1))) & 15;
		bad += y4[i] != (float)sc * code - 0.5f * m;
	}
	tap_ok(bad == 0, "Q4_K: value i decodes from the packed 6-bit scales and mins (%d wrong)", bad);
	free(y);
}

/* Random super-blocks with every code and scale in range, extremes included. */
static void random_blocks(struct qg_block_q4_K *w4, struct qg_block_q6_K *w6, struct qg_block_q8_K *a, int nb,
			  int extreme)
{
	for (int b = 0; b < nb; b++) {
		uint8_t *p4 = (uint8_t *)&w4[b], *p6 = (uint8_t *)&w6[b];
		for (size_t i = 0; i < sizeof w4[b]; i++)
			p4[i] = extreme ? 0xff : (uint8_t)rnd();
		for (size_t i = 0; i < sizeof w6[b]; i++)
			p6[i] = extreme == 1 ? 0x00 : extreme ? 0xff : (uint8_t)rnd();
		/* extreme 3: the largest codes against -128, the widest int16 sums the kernels may form */
		w4[b].d = (qg_fp16)(0x2000 + rnd() % 0x1000);
		w4[b].dmin = (qg_fp16)(0x2000 + rnd() % 0x1000);
		w6[b].d = (qg_fp16)(0x2000 + rnd() % 0x1000);
		if (extreme)
			for (int j = 0; j < 16; j++)
				w6[b].scales[j] = extreme == 2 ? 127 : -128;
		a[b].d = 0.01f * (1.0f + frand());
		for (int i = 0; i < 256; i++)
			a[b].qs[i] = extreme ? (int8_t)(extreme == 2 ? 127 : -128) : (int8_t)rnd();
		for (int j = 0; j < 16; j++) {
			int s = 0;
			for (int i = 0; i < 16; i++)
				s += a[b].qs[16 * j + i];
			a[b].bsums[j] = (int16_t)s;
		}
	}
}

/*
 * The GEMMs against the one-row reference, bit for bit: NC weight rows
 * over every tile tail (16 rows a tile), NR activation rows over every
 * group tail, K over one and several chunks, outputs LDS apart with the
 * cells between them left alone.
 */
static void test_gemm(void)
{
	enum { MAXC = 37, MAXR = 19, MAXB = 5, LDS = MAXC + 3 };
	static struct qg_block_q4_K w4[MAXC * MAXB];
	static struct qg_block_q6_K w6[MAXC * MAXB];
	static struct qg_block_q8_K a[MAXC * MAXB];
	static float s[MAXR * LDS];

	for (int f = 0; f < QG_KF_COUNT; f++) {
		const struct qg_kq_kernel *kn = qg_kq_kernel_get(f);
		if (!kn || (!kn->q4_K_gemm && !kn->q6_K_gemm))
			continue;
		tap_ok(kn->q4_K_gemm && kn->q6_K_gemm && kn->gemm_rows >= 1, "%s: both GEMMs, used from %d rows",
		       kn->name, kn->gemm_rows);
		int bad = 0, cases = 0, stray = 0;
		for (int iter = 0; iter < 60; iter++) {
			const int extreme = iter < 3 ? iter + 1 : 0;
			const int nc = iter < 3 ? MAXC : 1 + (int)(rnd() % MAXC);
			const int nr = iter < 3 ? MAXR : 1 + (int)(rnd() % MAXR);
			const int nb = iter < 3 ? MAXB : 1 + (int)(rnd() % MAXB);
			random_blocks(w4, w6, a, MAXC * MAXB, extreme);
			for (int t = 0; t < 2; t++) {
				const void *w = t ? (const void *)w6 : (const void *)w4;
				const size_t stride = (size_t)nb * (t ? sizeof w6[0] : sizeof w4[0]);
				for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
					s[i] = -1e30f;
				(t ? kn->q6_K_gemm : kn->q4_K_gemm)(256 * nb, s, LDS, w, stride, nc, a, nr);
				for (int r = 0; r < nr; r++) {
					for (int c = 0; c < nc; c++) {
						const void *wr = (const uint8_t *)w + (size_t)c * stride;
						float want = t ? qg_vec_dot_q6_K_q8_K(256 * nb, wr, a + r * nb)
							       : qg_vec_dot_q4_K_q8_K(256 * nb, wr, a + r * nb);
						cases++;
						if (memcmp(&want, &s[r * LDS + c], 4) != 0) {
							if (!bad)
								tap_diag("%s %s gemm: nc %d nr %d nb %d: [%d][%d] %.9g, want %.9g",
									 kn->name, t ? "q6_K" : "q4_K", nc, nr, nb, r, c,
									 s[r * LDS + c], want);
							bad++;
						}
					}
					for (int c = nc; c < LDS; c++)
						stray += s[r * LDS + c] != -1e30f;
				}
			}
		}
		tap_ok(bad == 0 && stray == 0,
		       "%s: %d GEMM outputs equal the reference bit for bit (%d differ, %d cells past NC written)",
		       kn->name, cases, bad, stray);
	}

	/*
	 * Q8_0: every code of the weights, activations down to -128, K over
	 * one and several chunks; first every pairing of the extreme codes
	 * (-128 and 127 against -128, -127 and 127), each all through a
	 * block, where the integer sums of every scheme are largest.
	 */
	enum { MAXB8 = 40, NEXT8 = 6 };
	static const int8_t ext8[NEXT8][2] = { { -128, -128 }, { -128, -127 }, { -128, 127 },
					       { 127, 127 }, { 127, -127 }, { 127, -128 } };
	static struct qg_block_q8_0 w8[MAXC * MAXB8], a8[MAXR * MAXB8];
	static struct qg_q8_0_aux aux[MAXR * MAXB8];
	for (int f = 0; f < QG_KF_COUNT; f++) {
		const struct qg_kq_kernel *kn = qg_kq_kernel_get(f);
		if (!kn || !kn->q8_0_gemm)
			continue;
		int bad = 0, cases = 0, stray = 0;
		for (int iter = 0; iter < 40 + NEXT8; iter++) {
			const int8_t *extreme = iter < NEXT8 ? ext8[iter] : NULL;
			const int nc = extreme ? MAXC : 1 + (int)(rnd() % MAXC);
			const int nr = extreme ? MAXR : 1 + (int)(rnd() % MAXR);
			const int nb = extreme ? MAXB8 : 1 + (int)(rnd() % MAXB8);
			for (int b = 0; b < MAXC * MAXB8; b++) {
				w8[b].d = (qg_fp16)(0x2000 + rnd() % 0x1000);
				for (int i = 0; i < QG_QK; i++)
					w8[b].qs[i] = extreme ? extreme[0] : (int8_t)rnd();
			}
			for (int b = 0; b < MAXR * MAXB8; b++) {
				a8[b].d = (qg_fp16)(0x2000 + rnd() % 0x1000);
				int sum = 0;
				for (int i = 0; i < QG_QK; i++) {
					a8[b].qs[i] = extreme ? extreme[1] : (int8_t)rnd();
					sum += a8[b].qs[i];
				}
				aux[b] = (struct qg_q8_0_aux){ .d = qg_fp16_to_fp32(a8[b].d), .nsum = -128 * sum };
			}
			const size_t stride = (size_t)nb * sizeof w8[0];
			for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
				s[i] = -1e30f;
			/* activation rows NB blocks apart, as mul_mat lays them out */
			for (int r = 0; r < nr; r++) {
				memmove(&a8[r * nb], &a8[r * MAXB8], (size_t)nb * sizeof a8[0]);
				memmove(&aux[r * nb], &aux[r * MAXB8], (size_t)nb * sizeof aux[0]);
			}
			kn->q8_0_gemm(QG_QK * nb, s, LDS, w8, stride, nc, a8, aux, nr);
			for (int r = 0; r < nr; r++) {
				for (int c = 0; c < nc; c++) {
					const float want = qg_vec_dot_q8_0_q8_0(QG_QK * nb, w8 + (size_t)c * nb, a8 + r * nb);
					cases++;
					if (memcmp(&want, &s[r * LDS + c], 4) != 0) {
						if (!bad)
							tap_diag("%s q8_0 gemm: nc %d nr %d nb %d: [%d][%d] %.9g, want %.9g",
								 kn->name, nc, nr, nb, r, c, s[r * LDS + c], want);
						bad++;
					}
				}
				for (int c = nc; c < LDS; c++)
					stray += s[r * LDS + c] != -1e30f;
			}
		}
		tap_ok(bad == 0 && stray == 0,
		       "%s: %d q8_0 GEMM outputs equal the reference bit for bit (%d differ, %d cells past NC written)",
		       kn->name, cases, bad, stray);
	}
}

/*
 * The GEMVs (one activation row, many weight rows) against the one-row
 * reference, bit for bit: NC over every tail of the kernels' row groups
 * (4 and 8 rows), K of one to several super-blocks (Q8_0: blocks, odd
 * counts included, and past a chunk of 128 now and then), extremes
 * first, and nothing written past NC.
 */
static void test_gemv(void)
{
	enum { MAXC = 37, MAXB = 5, MAXB8 = 300 };
	static struct qg_block_q4_K w4[MAXC * MAXB];
	static struct qg_block_q6_K w6[MAXC * MAXB];
	static struct qg_block_q8_K a[MAXC * MAXB];
	static struct qg_block_q8_0 w8[MAXC * MAXB8], a8[MAXB8];
	static float s[MAXC + 3];

	for (int f = 0; f < QG_KF_COUNT; f++) {
		const struct qg_kq_kernel *kn = qg_kq_kernel_get(f);
		if (!kn || (!kn->q4_K_gemv && !kn->q6_K_gemv && !kn->q8_0_gemv))
			continue;
		int bad = 0, cases = 0, stray = 0;
		for (int iter = 0; iter < 120; iter++) {
			const int extreme = iter < 3 ? iter + 1 : 0;
			/* every NC of 1 .. MAXC in turn, so every tail of 4 and 8 rows is met with each type */
			const int nc = iter < 3 ? MAXC : 1 + iter % MAXC;
			const int nb = iter < 3 ? MAXB : 1 + (int)(rnd() % MAXB);
			const int nb8 = iter < 3 ? MAXB8 : 1 + (int)(rnd() % (iter % 4 ? 40 : MAXB8));
			random_blocks(w4, w6, a, MAXC * MAXB, extreme);
			for (int b = 0; b < MAXC * MAXB8; b++) {
				w8[b].d = (qg_fp16)(0x2000 + rnd() % 0x1000);
				for (int i = 0; i < QG_QK; i++)
					w8[b].qs[i] = extreme ? (int8_t)(extreme == 2 ? 127 : -128) : (int8_t)rnd();
			}
			for (int b = 0; b < MAXB8; b++) {
				a8[b].d = (qg_fp16)(0x2000 + rnd() % 0x1000);
				for (int i = 0; i < QG_QK; i++)
					a8[b].qs[i] = extreme ? (int8_t)(extreme == 2 ? 127 : -127)
							      : (int8_t)((int)(rnd() % 255) - 127);
			}
			for (int t = 0; t < 3; t++) {
				const qg_kq_gemv_fn gemv = t == 0 ? kn->q4_K_gemv : t == 1 ? kn->q6_K_gemv : kn->q8_0_gemv;
				if (!gemv)
					continue;
				const void *w = t == 0 ? (const void *)w4 : t == 1 ? (const void *)w6 : (const void *)w8;
				const size_t stride = t == 0 ? (size_t)nb * sizeof w4[0]
						      : t == 1 ? (size_t)nb * sizeof w6[0] : (size_t)nb8 * sizeof w8[0];
				const int64_t k = t == 2 ? (int64_t)QG_QK * nb8 : (int64_t)QG_QK_K * nb;
				for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
					s[i] = -1e30f;
				gemv(k, s, w, stride, nc, t == 2 ? (const void *)a8 : (const void *)a);
				for (int c = 0; c < nc; c++) {
					const void *wr = (const uint8_t *)w + (size_t)c * stride;
					const float want = t == 0 ? qg_vec_dot_q4_K_q8_K(k, wr, a)
							   : t == 1 ? qg_vec_dot_q6_K_q8_K(k, wr, a)
							   : qg_vec_dot_q8_0_q8_0(k, wr, a8);
					cases++;
					if (memcmp(&want, &s[c], 4) != 0) {
						if (!bad)
							tap_diag("%s %s gemv: nc %d k %lld: [%d] %.9g, want %.9g", kn->name,
								 t == 0 ? "q4_K" : t == 1 ? "q6_K" : "q8_0", nc, (long long)k, c,
								 s[c], want);
						bad++;
					}
				}
				for (size_t c = (size_t)nc; c < sizeof s / sizeof s[0]; c++)
					stray += s[c] != -1e30f;
			}
		}
		char what[32];	/* the types the family has a GEMV for, a space before each */
		snprintf(what, sizeof what, "%s%s%s", kn->q4_K_gemv ? " q4_K" : "", kn->q6_K_gemv ? " q6_K" : "",
			 kn->q8_0_gemv ? " q8_0" : "");
		tap_ok(bad == 0 && stray == 0, "%s: %d GEMV outputs (%s) equal the reference bit for bit (%d differ, %d past NC)",
		       kn->name, cases, what + 1, bad, stray);
	}
}

/*
 * The K-quant GEMVs over a K of more super-blocks than the x86 Q4_K
 * GEMV lays out at once (64), so that each row's sum is carried from one
 * chunk of K to the next, against the one-row reference bit for bit; NC
 * of a group of four rows and a tail.
 */
static void test_gemv_long(void)
{
	enum { NC = 7, NB = 2 * 64 + 3 };
	static struct qg_block_q4_K w4[NC * NB];
	static struct qg_block_q6_K w6[NC * NB];
	static struct qg_block_q8_K a[NC * NB];
	static float s[NC + 1];

	for (int f = 0; f < QG_KF_COUNT; f++) {
		const struct qg_kq_kernel *kn = qg_kq_kernel_get(f);
		if (!kn || (!kn->q4_K_gemv && !kn->q6_K_gemv))
			continue;
		int bad = 0, cases = 0;
		for (int iter = 0; iter < 4; iter++) {
			/* NB, then a K that ends a chunk exactly, then less than one, then one past */
			const int nb = iter == 0 ? NB : iter == 1 ? 128 : iter == 2 ? 63 : 65;
			random_blocks(w4, w6, a, NC * NB, 0);
			for (int t = 0; t < 2; t++) {
				const qg_kq_gemv_fn gemv = t == 0 ? kn->q4_K_gemv : kn->q6_K_gemv;
				if (!gemv)
					continue;
				const void *w = t == 0 ? (const void *)w4 : (const void *)w6;
				const size_t stride = (size_t)nb * (t == 0 ? sizeof w4[0] : sizeof w6[0]);
				const int64_t k = (int64_t)QG_QK_K * nb;
				s[NC] = -1e30f;
				gemv(k, s, w, stride, NC, a);
				for (int c = 0; c < NC; c++) {
					const void *wr = (const uint8_t *)w + (size_t)c * stride;
					const float want = t == 0 ? qg_vec_dot_q4_K_q8_K(k, wr, a) : qg_vec_dot_q6_K_q8_K(k, wr, a);
					cases++;
					if (memcmp(&want, &s[c], 4) != 0) {
						if (!bad)
							tap_diag("%s %s gemv: k %lld: [%d] %.9g, want %.9g", kn->name,
								 t == 0 ? "q4_K" : "q6_K", (long long)k, c, s[c], want);
						bad++;
					}
				}
				bad += s[NC] != -1e30f;
			}
		}
		tap_ok(bad == 0, "%s: %d GEMV outputs over K up to %d super-blocks equal the reference bit for bit (%d differ)",
		       kn->name, cases, NB, bad);
	}
}

static void test_kernels(void)
{
	enum { NB = 40 };	/* four rows of up to ten: every grouping and its tail */
	static struct qg_block_q4_K w4[NB];
	static struct qg_block_q6_K w6[NB];
	static struct qg_block_q8_K a[NB];
	int ran = 0;

	const struct qg_kq_kernel *chosen = qg_kq_kernel_for();
	tap_ok(chosen && chosen->q4_K && chosen->q6_K, "the chosen K-quant kernels: %s", chosen ? chosen->name : "none");
	tap_ok(qg_kq_kernel_get(QG_KF_PORTABLE) == &qg_kq_portable, "the portable K-quant kernels run everywhere");
	for (int f = 0; f < QG_KF_COUNT; f++) {
		const struct qg_kq_kernel *kn = qg_kq_kernel_get(f);
		if (!kn)
			continue;
		ran++;
		int bad = 0, cases = 0;
		for (int iter = 0; iter < 200; iter++) {
			int extreme = iter < 3 ? iter + 1 : 0;
			int nb = iter < 3 ? NB : 1 + (int)(rnd() % NB);
			random_blocks(w4, w6, a, nb, extreme);
			float r4 = qg_vec_dot_q4_K_q8_K(256 * nb, w4, a), k4 = kn->q4_K(256 * nb, w4, a);
			float r6 = qg_vec_dot_q6_K_q8_K(256 * nb, w6, a), k6 = kn->q6_K(256 * nb, w6, a);
			cases += 2;
			/* four activation rows at once: each of Q blocks, row r at a + r * Q */
			const int q = nb / 4;
			for (int t = 0; t < 2 && q > 0; t++) {
				qg_kq_dot4_fn d4 = t ? kn->q6_K_x4 : kn->q4_K_x4;
				if (!d4)
					continue;
				float out[4];
				d4(256 * q, t ? (const void *)w6 : (const void *)w4, a, q, out);
				for (int r = 0; r < 4; r++) {
					float want = t ? qg_vec_dot_q6_K_q8_K(256 * q, w6, a + r * q)
						       : qg_vec_dot_q4_K_q8_K(256 * q, w4, a + r * q);
					cases++;
					bad += memcmp(&want, &out[r], 4) != 0;
				}
			}
			if (memcmp(&r4, &k4, 4) || memcmp(&r6, &k6, 4)) {
				if (!bad)
					tap_diag("%s: nb %d: q4_K %.9g vs %.9g, q6_K %.9g vs %.9g", kn->name, nb, k4, r4, k6,
						 r6);
				bad++;
			}
		}
		tap_ok((int)kn->family == f && bad == 0, "%s: %d dot products equal the reference bit for bit (%d differ)",
		       kn->name, cases, bad);
	}
	tap_diag("%d K-quant kernel families run on this CPU", ran);
	test_gemm();
	test_gemv();
	test_gemv_long();

	/* Q8_0 x Q8_0: weights over every byte, -128 included; activations in -127..127 */
	static struct qg_block_q8_0 w8[NB * 8], a8[NB * 8];
	for (int f = 0; f < QG_KF_COUNT; f++) {
		const struct qg_kq_kernel *kn = qg_kq_kernel_get(f);
		if (!kn || !kn->q8_0)
			continue;
		int bad = 0, cases = 0;
		for (int iter = 0; iter < 200; iter++) {
			const int extreme = iter < 2 ? iter + 1 : 0;
			const int nb = 1 + (int)(rnd() % (NB * 8));
			for (int b = 0; b < nb; b++) {
				w8[b].d = (qg_fp16)(0x2000 + rnd() % 0x1000);
				a8[b].d = (qg_fp16)(0x2000 + rnd() % 0x1000);
				for (int i = 0; i < QG_QK; i++) {
					w8[b].qs[i] = extreme ? (int8_t)(extreme == 1 ? -128 : 127) : (int8_t)rnd();
					a8[b].qs[i] = extreme ? (int8_t)(extreme == 1 ? -127 : 127)
							      : (int8_t)((int)(rnd() % 255) - 127);
				}
			}
			float want = qg_vec_dot_q8_0_q8_0(QG_QK * nb, w8, a8), got = kn->q8_0(QG_QK * nb, w8, a8);
			cases++;
			bad += memcmp(&want, &got, 4) != 0;
			const int q = nb / 4;
			if (kn->q8_0_x4 && q > 0) {
				float out[4];
				kn->q8_0_x4(QG_QK * q, w8, a8, q, out);
				for (int r = 0; r < 4; r++) {
					want = qg_vec_dot_q8_0_q8_0(QG_QK * q, w8, a8 + r * q);
					cases++;
					bad += memcmp(&want, &out[r], 4) != 0;
				}
			}
		}
		tap_ok(bad == 0, "%s: %d q8_0 dot products equal the reference bit for bit (%d differ)", kn->name,
		       cases, bad);
	}
}

/*
 * The Q8_0_4X4 layout's float order, written out from the plain rows
 * before they are interleaved (kernels.h, struct qg_kq_kernel): per block
 * the exact int32 sum, then one fused step with the scales' product.
 */
static float ref_q8_0_4x4(int64_t nb, const struct qg_block_q8_0 *w, const struct qg_block_q8_0 *a)
{
	float acc = 0.0f;

	for (int64_t b = 0; b < nb; b++) {
		int32_t isum = 0;
		for (int i = 0; i < QG_QK; i++)
			isum += w[b].qs[i] * a[b].qs[i];
		const float p = qg_fp16_to_fp32(w[b].d) * qg_fp16_to_fp32(a[b].d);
		acc = fmaf((float)isum, p, acc);
	}
	return acc;
}

/*
 * Q8_0_4X4 kernels: the portable ones against ref_q8_0_4x4, every
 * family's against the portable ones, bit for bit; the GEMV's row equal
 * to the GEMM's.  Weights are plain Q8_0 rows repacked, over every code
 * (-128 included), activations too; K of one and two blocks, odd counts,
 * and past the GEMM's (32) and the GEMV's (128) chunks of K; NC 4, 8, 12,
 * 20 and 36 (the GEMM's pairs of groups and a lone one, the GEMV's
 * passes of eight groups and lone ones); 4, 8 and 12 activation rows for
 * the GEMM, each also through the GEMV; extremes first.
 */
static void test_q8_0_4x4(void)
{
	enum { MAXC = 36, MAXR = 12, MAXB = 200, LDS = MAXC + 3 };
	static const int ncs[] = { 4, 8, 12, 20, MAXC };
	static struct qg_block_q8_0 w8[MAXC * MAXB], a8[MAXR * MAXB];
	static uint8_t w44[MAXC * MAXB * 34];
	static struct qg_q8_0x4_act act[MAXR / 4 * MAXB];
	static float s[MAXR * LDS], sv[LDS], want[MAXR * LDS];
	int checked = 0;

	for (int f = 0; f < QG_KF_COUNT; f++) {
		const struct qg_kq_kernel *kn = qg_kq_kernel_get(f);
		if (!kn || (!kn->q8_0_4x4_gemv && !kn->q8_0_4x4_gemm))
			continue;
		checked++;
		const int pairs = !kn->q8_0_4x4_gemv == !kn->q8_0_4x4_gemm;
		int bad = 0, cases = 0, stray = 0, split = 0;
		for (int iter = 0; iter < 48; iter++) {
			static const int nbs[] = { 1, 2, 3, 32, 33, 129, 131, MAXB };
			const int extreme = iter < 4 ? iter + 1 : 0;
			const int nb = iter < 4 ? MAXB : iter < 12 ? nbs[iter - 4] : 1 + (int)(rnd() % MAXB);
			const int nc = iter < 4 ? MAXC : ncs[iter % 5];
			const int nr = 4 * (1 + iter % 3);
			for (int b = 0; b < MAXC * MAXB; b++) {
				w8[b].d = (qg_fp16)(0x2000 + rnd() % 0x1000);
				for (int i = 0; i < QG_QK; i++)
					w8[b].qs[i] = extreme ? (int8_t)(extreme & 1 ? -128 : 127) : (int8_t)rnd();
			}
			for (int b = 0; b < MAXR * MAXB; b++) {
				a8[b].d = (qg_fp16)(0x2000 + rnd() % 0x1000);
				for (int i = 0; i < QG_QK; i++)
					a8[b].qs[i] = extreme ? (int8_t)(extreme & 2 ? -128 : 127) : (int8_t)rnd();
			}
			const size_t wstride = (size_t)nb * 4 * 34;
			split += qg_repack(QG_TYPE_Q8_0_4X4, w44, sizeof w44, QG_TYPE_Q8_0, w8, nc, QG_QK * nb) !=
				 (ssize_t)(wstride / 4 * (size_t)nc);
			for (int g = 0; g < nr / 4; g++)
				qg_q8_0x4_act_pack(act + (size_t)g * nb, a8 + (size_t)g * 4 * nb, (size_t)nb, nb);
			/* the want: the portable kernels' bits, which are ref_q8_0_4x4's (checked below) */
			for (int r = 0; r < nr; r++)
				for (int c = 0; c < nc; c++)
					want[r * LDS + c] = ref_q8_0_4x4(nb, w8 + (size_t)c * nb, a8 + (size_t)r * nb);
			for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
				s[i] = -1e30f;
			if (kn->q8_0_4x4_gemm)
				kn->q8_0_4x4_gemm(QG_QK * nb, s, LDS, w44, wstride, nc, act, nr);
			for (int r = 0; r < nr; r++) {
				for (int c = 0; c < LDS; c++)
					sv[c] = -1e30f;
				if (kn->q8_0_4x4_gemv)
					kn->q8_0_4x4_gemv(QG_QK * nb, sv, w44, wstride, nc, a8 + (size_t)r * nb);
				for (int c = 0; c < nc; c++) {
					const float *want_rc = &want[r * LDS + c];
					cases += 2;
					if ((kn->q8_0_4x4_gemm && memcmp(want_rc, &s[r * LDS + c], 4) != 0) ||
					    (kn->q8_0_4x4_gemv && memcmp(want_rc, &sv[c], 4) != 0)) {
						if (!bad)
							tap_diag("%s q8_0_4x4: nc %d nr %d nb %d: [%d][%d] gemm %.9g gemv %.9g, want %.9g",
								 kn->name, nc, nr, nb, r, c, s[r * LDS + c], sv[c], *want_rc);
						bad++;
					}
				}
				for (int c = nc; c < LDS; c++)
					stray += (kn->q8_0_4x4_gemm && s[r * LDS + c] != -1e30f) || sv[c] != -1e30f;
			}
			for (int i = nr * LDS; kn->q8_0_4x4_gemm && i < MAXR * LDS; i++)
				stray += s[i] != -1e30f;
		}
		tap_ok(pairs && bad == 0 && stray == 0 && split == 0,
		       "%s: %d q8_0_4x4 GEMM and GEMV outputs equal the layout's fused reference bit for bit "
		       "(%d differ, %d cells past NC or NR written)", kn->name, cases, bad, stray);
	}
	tap_ok(checked >= 1 && qg_kq_portable.q8_0_4x4_gemv && qg_kq_portable.q8_0_4x4_gemm,
	       "%d families with q8_0_4x4 kernels, the portable ones among them", checked);
	const enum qg_type best = qg_best_q8_0_type();
	const struct qg_kq_kernel *kq = qg_kq_kernel_for();
	tap_ok(best == (kq->family != QG_KF_PORTABLE && kq->q8_0_4x4_gemv ? QG_TYPE_Q8_0_4X4 : QG_TYPE_Q8_0) &&
	       qg_kq_q8_0_type(&qg_kq_portable) == QG_TYPE_Q8_0 && qg_type_is_weight(best),
	       "Q8_0 weights are stored as %s here (%s)", qg_type_name(best), kq->name);
}

/*
 * mul_mat with Q8_0_4X4 weights (plain Q8_0 repacked) against the
 * layout's reference over the quantized rows, bit for bit, for 1 .. 9
 * activation rows (the GEMM on each group of four, the GEMV on the rest),
 * on any thread count and with the portable kernels asked for; and
 * against mul_mat with the plain Q8_0 weights, whose float order is
 * unfused, within what the two orders' roundings allow.
 *
 * The bound: both orders start from the same p_b = dw * da (rounded
 * alike); with t_b = isum_b * p_b exact and T = sum |t_b| over NB
 * blocks, the unfused order rounds each product (an error of at most
 * 2^-24 |t_b|) and each sum (2^-24 times a partial sum, <= T), the fused
 * one each step once (<= 2^-24 T): each is within its sum of those of
 * the exact sum of the t_b, so the two are within (2 NB + 1) 2^-24 T of
 * each other, to first order; the terms of second order (NB^2 2^-48 T)
 * stay below one more 2^-24 T for any NB here.
 */
static void test_mulmat_q8_0_4x4(void)
{
	enum { M = 44, K = 32 * 131, NMAX = 9, NB = K / 32 };
	static float wf[M * K], xf[NMAX * K], y44[NMAX * M], y3[NMAX * M], y8[NMAX * M];
	static struct qg_block_q8_0 w8[M * NB], x8[NMAX * NB];
	static uint8_t w44[M * NB * 34];
	static _Alignas(64) uint8_t scr[NMAX * NB * (34 + 8) + 64];

	for (int i = 0; i < M * K; i++)
		wf[i] = frand();
	for (int i = 0; i < NMAX * K; i++)
		xf[i] = frand() * (i % 97 == 0 ? 8.0f : 1.0f);
	qg_quantize(QG_TYPE_Q8_0, wf, w8, sizeof w8, M, K, NULL);
	qg_quantize(QG_TYPE_Q8_0, xf, x8, sizeof x8, NMAX, K, NULL);
	tap_ok(qg_repack(QG_TYPE_Q8_0_4X4, w44, sizeof w44, QG_TYPE_Q8_0, w8, M, K) == (ssize_t)sizeof w44,
	       "q8_0_4x4 weights: plain Q8_0 repacked");
	int bad = 0, far = 0, threads = 0, portable = 0, refused = 0, differ = 0;
	double worst = 0;
	for (int n = 1; n <= NMAX; n++) {
		struct qg_mm mm = { .wtype = QG_TYPE_Q8_0_4X4, .w = w44, .m = M, .k = K, .x = xf, .ldx = K, .n = n,
				    .y = y44, .ldy = M };
		struct qg_mm m8 = mm;
		m8.wtype = QG_TYPE_Q8_0;
		m8.w = w8;
		m8.y = y8;
		const size_t ybytes = (size_t)n * M * sizeof y44[0];
		refused += qg_mul_mat_check(&mm) != 0 || qg_mul_mat_scratch_size(&mm) > sizeof scr ||
			   qg_mul_mat_act_form(&mm) == qg_mul_mat_act_form(&m8) || qg_mul_mat(&mm, scr) != 0 ||
			   qg_mul_mat(&m8, scr) != 0;
		for (int i = 0; i < n; i++) {
			for (int r = 0; r < M; r++) {
				const float want = ref_q8_0_4x4(NB, w8 + r * NB, x8 + i * NB);
				if (memcmp(&want, &y44[i * M + r], 4) != 0) {
					if (!bad)
						tap_diag("q8_0_4x4 mul_mat n %d: [%d][%d] %.9g, want %.9g", n, i, r,
							 y44[i * M + r], want);
					bad++;
				}
				double t = 0;
				for (int b = 0; b < NB; b++) {
					int32_t isum = 0;
					for (int j = 0; j < QG_QK; j++)
						isum += w8[r * NB + b].qs[j] * x8[i * NB + b].qs[j];
					t += fabs((double)isum * (qg_fp16_to_fp32(w8[r * NB + b].d) *
								  qg_fp16_to_fp32(x8[i * NB + b].d)));
				}
				const double d = fabs((double)y44[i * M + r] - (double)y8[i * M + r]);
				const double bound = (2.0 * NB + 2) * 0x1p-24 * t;
				far += d > bound;
				differ += d != 0;
				worst = d / bound > worst ? d / bound : worst;
			}
		}
		mm.y = y3;
		for (int ith = 0; ith < 3; ith++)
			qg_mul_mat_quantize(&mm, scr, ith, 3);
		for (int ith = 0; ith < 3; ith++)
			qg_mul_mat_compute(&mm, scr, ith, 3);
		threads += memcmp(y44, y3, ybytes) != 0;
		mm.kq_kernel = &qg_kq_portable;
		portable += qg_mul_mat(&mm, scr) != 0 || memcmp(y44, y3, ybytes) != 0;
	}
	tap_ok(refused == 0 && bad == 0, "q8_0_4x4 mul_mat, n 1..%d (%s): the layout's reference bit for bit (%d differ)",
	       NMAX, qg_kq_kernel_for()->name, bad);
	tap_ok(far == 0, "q8_0_4x4 mul_mat: within (2 NB + 2) 2^-24 sum |terms| of plain Q8_0's (%d beyond, "
	       "%d differ at all; the largest difference %.3f of the bound)", far, differ, worst);
	tap_ok(threads == 0, "q8_0_4x4 mul_mat: three threads give the same bits as one");
	tap_ok(portable == 0, "q8_0_4x4 mul_mat: the portable kernels, asked for, give the same bits");
}

/*
 * mul_mat with K-quant weights: the dequantized product, split over any
 * thread count alike, with N activation rows (the four-row kernels and a
 * tail) and NG (the GEMMs, where a family has them: gemm_rows <= NG).
 */
static void test_mulmat(void)
{
	enum { M = 24, K = 512, N = 5, NG = 21 };
	static float w[M * K], x[NG * K], wd[M * K], y[NG * M], y3[NG * M];
	static uint8_t wq[M * K / 256 * 210];
	static _Alignas(64) uint8_t scratch[NG * K / 256 * 292];
	const enum qg_type types[] = { QG_TYPE_Q4_K, QG_TYPE_Q6_K };

	for (int i = 0; i < M * K; i++)
		w[i] = frand();
	for (int i = 0; i < NG * K; i++)
		x[i] = frand();
	for (int tn = 0; tn < 4; tn++) {
		const int t = tn % 2, n = tn < 2 ? N : NG;
		const size_t ybytes = (size_t)n * M * sizeof y[0];
		struct qg_mm mm = { .wtype = types[t], .w = wq, .m = M, .k = K, .x = x, .ldx = K, .n = n, .y = y,
				    .ldy = M };
		qg_quantize(types[t], w, wq, sizeof wq, M, K, NULL);
		qg_dequantize(types[t], wq, wd, sizeof wd, M, K);
		tap_ok(qg_mul_mat_check(&mm) == 0 && qg_mul_mat_scratch_size(&mm) == (size_t)n * K / 256 * 292,
		       "%s mul_mat, n %d: accepted, scratch is n rows of Q8_K", qg_type_name(types[t]), n);
		qg_mul_mat(&mm, scratch);
		int bad = 0;
		for (int i = 0; i < n; i++)
			for (int r = 0; r < M; r++) {
				double exact = 0, mag = 0;
				for (int c = 0; c < K; c++) {
					exact += (double)wd[r * K + c] * x[i * K + c];
					mag += fabs((double)wd[r * K + c] * x[i * K + c]);
				}
				/* Q8_K rounds each activation by at most half a step of 1/127 of its block's largest */
				bad += fabs(y[i * M + r] - exact) > 0.01 * mag + 1e-6;
			}
		tap_ok(bad == 0, "%s mul_mat, n %d: within Q8_K's rounding of the dequantized product (%d off)",
		       qg_type_name(types[t]), n, bad);
		mm.y = y3;
		for (int ith = 0; ith < 3; ith++)
			qg_mul_mat_quantize(&mm, scratch, ith, 3);
		for (int ith = 0; ith < 3; ith++)
			qg_mul_mat_compute(&mm, scratch, ith, 3);
		tap_ok(memcmp(y, y3, ybytes) == 0, "%s mul_mat, n %d: three threads give the same bits as one",
		       qg_type_name(types[t]), n);
		mm.kq_kernel = &qg_kq_portable;
		tap_ok(qg_mul_mat(&mm, scratch) == 0 && memcmp(y, y3, ybytes) == 0,
		       "%s mul_mat, n %d: the portable kernels, asked for, give the same bits", qg_type_name(types[t]), n);
	}
	/* Q8_0 weights: every output is the reference dot of the quantized rows, bit for bit */
	{
		enum { K8 = 32 * 19 };	/* two groups of eight blocks and a tail */
		static struct qg_block_q8_0 w8[M * K8 / 32], x8[NG * K8 / 32];
		static _Alignas(64) uint8_t scr8[NG * K8 / 32 * (34 + 8) + 8];
		static float wf8[M * K8], xf8[NG * K8], y8[NG * M], y83[NG * M];
		struct qg_mm mm = { .wtype = QG_TYPE_Q8_0, .w = w8, .m = M, .k = K8, .x = xf8, .ldx = K8, .n = NG,
				    .y = y8, .ldy = M };
		for (int i = 0; i < M * K8; i++)
			wf8[i] = frand();
		for (int i = 0; i < NG * K8; i++)
			xf8[i] = frand();
		qg_quantize(QG_TYPE_Q8_0, wf8, w8, sizeof w8, M, K8, NULL);
		qg_quantize(QG_TYPE_Q8_0, xf8, x8, sizeof x8, NG, K8, NULL);
		tap_ok(qg_mul_mat_check(&mm) == 0 && qg_mul_mat_scratch_size(&mm) == sizeof scr8 &&
		       qg_mul_mat(&mm, scr8) == 0, "q8_0 mul_mat: accepted, scratch is the rows of Q8_0 and their aux");
		int bad = 0;
		for (int i = 0; i < NG; i++)
			for (int r = 0; r < M; r++) {
				float want = qg_vec_dot_q8_0_q8_0(K8, w8 + r * K8 / 32, x8 + i * K8 / 32);
				bad += memcmp(&want, &y8[i * M + r], 4) != 0;
			}
		tap_ok(bad == 0, "q8_0 mul_mat (%s): the reference dot products bit for bit (%d differ)",
		       qg_kq_kernel_for()->name, bad);
		mm.y = y83;
		for (int ith = 0; ith < 3; ith++)
			qg_mul_mat_quantize(&mm, scr8, ith, 3);
		for (int ith = 0; ith < 3; ith++)
			qg_mul_mat_compute(&mm, scr8, ith, 3);
		tap_ok(memcmp(y8, y83, sizeof y8) == 0, "q8_0 mul_mat: three threads give the same bits as one");
		mm.kq_kernel = &qg_kq_portable;
		tap_ok(qg_mul_mat(&mm, scr8) == 0 && memcmp(y8, y83, sizeof y8) == 0,
		       "q8_0 mul_mat: the portable kernels, asked for, give the same bits");
		/* one row: the GEMV where the family has one, a GEMM where q8_0_gemm_rows says so */
		mm.kq_kernel = NULL;
		mm.n = 1;
		tap_ok(qg_mul_mat(&mm, scr8) == 0 && memcmp(y8, y83, M * sizeof y8[0]) == 0,
		       "q8_0 mul_mat, n 1 (%s): the same bits", qg_kq_kernel_for()->name);
	}
	/* one activation row (the GEMVs where the family has them): every output the reference's bits */
	{
		enum { M1 = 37, K1 = 1024 };
		static uint8_t w1[M1 * K1 / 32 * 34];	/* Q8_0's, the largest */
		/* Q8_0's scratch (blocks and their aux) is the larger */
		static _Alignas(64) uint8_t scr1[K1 / 32 * (34 + 8) + 8];
		static float wf1[M1 * K1], y1[M1];
		const enum qg_type t1[] = { QG_TYPE_Q4_K, QG_TYPE_Q6_K, QG_TYPE_Q8_0 };
		for (int i = 0; i < M1 * K1; i++)
			wf1[i] = frand();
		for (int t = 0; t < 3; t++) {
			struct qg_mm mm = { .wtype = t1[t], .w = w1, .m = M1, .k = K1, .x = x, .ldx = K1, .n = 1, .y = y1,
					    .ldy = M1 };
			const size_t rb = (size_t)qg_row_size(t1[t], K1);
			int bad = qg_quantize(t1[t], wf1, w1, sizeof w1, M1, K1, NULL) != (ssize_t)(rb * M1) ||
				  qg_mul_mat_scratch_size(&mm) > sizeof scr1 || qg_mul_mat(&mm, scr1) != 0;
			for (int r = 0; r < M1; r++) {
				const void *wr = w1 + (size_t)r * rb;
				const float want = t == 0 ? qg_vec_dot_q4_K_q8_K(K1, wr, (const void *)scr1)
						   : t == 1 ? qg_vec_dot_q6_K_q8_K(K1, wr, (const void *)scr1)
						   : qg_vec_dot_q8_0_q8_0(K1, wr, (const void *)scr1);
				bad += memcmp(&want, &y1[r], 4) != 0;
			}
			tap_ok(bad == 0, "%s mul_mat, n 1, m %d (%s): the reference dot products bit for bit (%d differ)",
			       qg_type_name(t1[t]), M1, qg_kq_kernel_for()->name, bad);
		}
	}
	struct qg_mm bad = { .wtype = QG_TYPE_Q8_K, .w = wq, .m = M, .k = K, .x = x, .ldx = K, .n = N, .y = y, .ldy = M };
	tap_ok(qg_mul_mat_check(&bad) == -EINVAL, "mul_mat: Q8_K is no weight type");
	bad.wtype = QG_TYPE_Q4_K;
	bad.k = 288;
	bad.ldx = 288;
	tap_ok(qg_mul_mat_check(&bad) == -EINVAL, "mul_mat: Q4_K with K not a multiple of 256: -EINVAL");
	bad.k = K;
	bad.ldx = K;
	struct qg_kq_kernel fake = qg_kq_portable;
	bad.kq_kernel = &fake;
	tap_ok(qg_mul_mat_check(&bad) == -EINVAL, "mul_mat: a K-quant kernel table not the build's: -EINVAL");
	bad.wtype = QG_TYPE_Q4_0;
	bad.kq_kernel = &qg_kq_portable;
	tap_ok(qg_mul_mat_check(&bad) == -EINVAL, "mul_mat: K-quant kernels with a Q4_0 weight: -EINVAL");
}

static void test_args(void)
{
	float x[512], y[512];
	uint8_t q[2 * 292];

	for (int i = 0; i < 512; i++)
		x[i] = frand();
	tap_ok(qg_row_size(QG_TYPE_Q4_K, 4096) == 16 * 144 && qg_row_size(QG_TYPE_Q6_K, 256) == 210 &&
	       qg_row_size(QG_TYPE_Q8_K, 512) == 584 && qg_row_size(QG_TYPE_Q4_K, 32) == -EINVAL &&
	       qg_row_size(QG_TYPE_Q6_K, 288) == -EINVAL, "row sizes: 144, 210, 292 per 256; other widths -EINVAL");
	tap_ok(qg_type_block_values(QG_TYPE_Q4_K) == 256 && qg_type_is_weight(QG_TYPE_Q4_K) &&
	       qg_type_is_weight(QG_TYPE_Q6_K) && !qg_type_is_weight(QG_TYPE_Q8_K) &&
	       !qg_type_is_interleaved(QG_TYPE_Q6_K) && qg_type_from_name("Q6_K") == QG_TYPE_Q6_K &&
	       strcmp(qg_type_name(QG_TYPE_Q4_K), "q4_K") == 0, "type facts and names");
	tap_ok(qg_quantize(QG_TYPE_Q4_K, x, q, 143, 1, 256, NULL) == -ENOBUFS &&
	       qg_quantize(QG_TYPE_Q6_K, x, q, sizeof q, 1, 128, NULL) == -EINVAL,
	       "quantize: short buffer -ENOBUFS, short row -EINVAL");
	memset(q, 0x5a, sizeof q);
	x[300] = NAN;
	tap_ok(qg_quantize(QG_TYPE_Q4_K, x, q, sizeof q, 1, 512, NULL) == -EDOM && q[0] == 0x5a && q[150] == 0x5a,
	       "quantize: NaN -EDOM, nothing written");
	x[300] = INFINITY;
	tap_ok(qg_quantize(QG_TYPE_Q8_K, x, q, sizeof q, 1, 512, NULL) == -EDOM, "quantize Q8_K: infinity -EDOM");
	x[300] = 0x1p20f;
	tap_ok(qg_quantize(QG_TYPE_Q6_K, x, q, sizeof q, 1, 512, NULL) == -ERANGE && q[0] == 0x5a,
	       "quantize: 2^20 -ERANGE, nothing written");
	x[300] = 0.5f;
	tap_ok(qg_dequantize(QG_TYPE_Q6_K, q, y, 1023, 1, 256) == -ENOBUFS, "dequantize: short output -ENOBUFS");

	/* all zero: ggml's bytes are all zero too */
	memset(x, 0, sizeof x);
	memset(q, 0x5a, sizeof q);
	int zero = 1;
	qg_quantize(QG_TYPE_Q6_K, x, q, sizeof q, 1, 256, NULL);
	for (int i = 0; i < 210; i++)
		zero &= q[i] == 0;
	qg_quantize(QG_TYPE_Q8_K, x, q, sizeof q, 1, 256, NULL);
	for (int i = 0; i < 292; i++)
		zero &= q[i] == 0;
	tap_ok(zero, "zero input: Q6_K and Q8_K blocks are all zero bytes");

	/* a K-quant matrix repacks only to itself */
	uint8_t q2[2 * 292];
	qg_quantize(QG_TYPE_Q4_K, x, q, sizeof q, 1, 256, NULL);
	tap_ok(qg_repack(QG_TYPE_Q4_K, q2, sizeof q2, QG_TYPE_Q4_K, q, 1, 256) == 144 && memcmp(q, q2, 144) == 0 &&
	       qg_repack(QG_TYPE_Q4_0, q2, sizeof q2, QG_TYPE_Q4_K, q, 1, 256) == -EINVAL,
	       "repack: Q4_K to itself copies, to Q4_0 -EINVAL");
}

int main(void)
{
	struct vectors v;

	if (load(&v) != 0) {
		tap_ok(0, "tests/data/kquant-vectors.bin loads");
		return tap_done();
	}
	tap_ok(1, "tests/data/kquant-vectors.bin: %u x %u weights", v.rows, v.cols);
	test_bytes(&v);
	test_dots(&v);
	test_dequant(&v);
	test_kernels();
	test_mulmat();
	test_q8_0_4x4();
	test_mulmat_q8_0_4x4();
	test_args();
	free(v.buf);
	return tap_done();
}
