/*
 * make-kquant-vectors.c - write tests/data/kquant-vectors.bin: inputs, and
 * what the pinned llama.cpp's ggml makes of them, for tests/kquant-test.
 *
 * Not built by make: it links ggml.  From the top of the source tree, with
 * the pinned llama.cpp built by `bash .ci/llama.sh` (its static build):
 *
 *   L=~/.cache/qgraph/llama.cpp-80fb11ac
 *   gcc -O2 -std=gnu11 -o /tmp/make-kquant-vectors tests/make-kquant-vectors.c \
 *       -I$L/src/ggml/include -I$L/src/ggml/src \
 *       $L/build-static/ggml/src/libggml-cpu.a $L/build-static/ggml/src/libggml-base.a \
 *       -lstdc++ -fopenmp -lm
 *   /tmp/make-kquant-vectors > tests/data/kquant-vectors.bin
 *
 * The file, all little-endian:
 *   char  magic[8]             "QGKQV2\0\0"
 *   u32   rows, cols           weight matrix shape (cols a multiple of 256)
 *   f32   w[rows][cols]        weights: one kind of input per super-block
 *   f32   a[cols]              one activation row
 *   u8    q4k[rows][cols/256 * 144]   ggml_quantize_chunk(GGML_TYPE_Q4_K)
 *   u8    q6k[rows][cols/256 * 210]   ggml_quantize_chunk(GGML_TYPE_Q6_K)
 *   u8    q8k[cols/256 * 292]         quantize_row_q8_K_ref(a)
 *   f32   dot[rows][2]         the CPU backend's vec_dot of each Q4_K and
 *                              Q6_K row with q8k (its SIMD code on the
 *                              machine that ran this)
 *   f32   imatrix[cols]        importance weights, one per column
 *   u8    q4k_im[rows][cols/256 * 144]   ggml_quantize_chunk(GGML_TYPE_Q4_K)
 *   u8    q6k_im[rows][cols/256 * 210]   and (GGML_TYPE_Q6_K) with imatrix
 *
 * ggml's reference quantizers (ggml-base) are built without -march, so
 * nothing in them is fused on x86-64; these bytes are what ggml writes on
 * every CPU whose compiler keeps the float operations as written.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-quants.h"

#define ROWS 4
#define COLS 512

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* xorshift64*, then 24 bits as a float in [0, 1) */
static float uniform(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (float)((rng * 0x2545f4914f6cdd1dull) >> 40) / 16777216.0f;
}

/* roughly normal: the sum of four uniforms, centred and scaled */
static float gauss(void)
{
	return (uniform() + uniform() + uniform() + uniform() - 2.0f) * 1.7320508f;
}

/* Super-block KIND (0..7) of 256 values: a different corner of the quantizers each. */
static void fill(float *x, int kind)
{
	for (int i = 0; i < 256; i++) {
		switch (kind) {
		case 0:	/* typical weights */
			x[i] = 0.02f * gauss();
			break;
		case 1:	/* uniform, both signs */
			x[i] = 2.0f * uniform() - 1.0f;
			break;
		case 2:	/* heavy outliers */
			x[i] = 0.05f * gauss() * (uniform() < 0.03f ? 40.0f : 1.0f);
			break;
		case 3:	/* all positive: Q4_K's min clamps to 0 */
			x[i] = 0.5f + 1.5f * uniform();
			break;
		case 4:	/* sparse, with whole groups of 16 and 32 at zero */
			x[i] = (i / 32) % 3 == 0 || uniform() < 0.7f ? 0.0f : gauss();
			break;
		case 5:	/* tiny: scales go subnormal in fp16 */
			x[i] = 1e-6f * gauss();
			break;
		case 6:	/* constant groups of 32, alternating sign */
			x[i] = (i / 32) % 2 ? -0.25f * (float)(i / 32) : 0.125f * (float)(i / 32 + 1);
			break;
		default: /* large values, one sign per group */
			x[i] = ((i / 16) % 2 ? -1.0f : 1.0f) * (500.0f + 500.0f * uniform());
			break;
		}
	}
}

int main(void)
{
	static float w[ROWS * COLS], a[COLS];
	static uint8_t q4k[ROWS * COLS / 256 * 144], q6k[ROWS * COLS / 256 * 210];
	static block_q8_K q8k[COLS / 256];
	static float im[COLS];
	static uint8_t q4k_im[ROWS * COLS / 256 * 144], q6k_im[ROWS * COLS / 256 * 210];
	float dot[ROWS][2];
	const uint32_t rows = ROWS, cols = COLS;

	ggml_cpu_init();
	for (int s = 0; s < ROWS * COLS / 256; s++)
		fill(w + 256 * s, s);
	for (int i = 0; i < COLS; i++)
		a[i] = gauss();

	/* importance: mostly around 1, some columns far more, a few not at all */
	for (int i = 0; i < COLS; i++)
		im[i] = i % 61 == 0 ? 0.0f : (i % 17 == 0 ? 50.0f : 1.0f) * (0.2f + uniform());

	ggml_quantize_chunk(GGML_TYPE_Q4_K, w, q4k, 0, ROWS, COLS, NULL);
	ggml_quantize_chunk(GGML_TYPE_Q6_K, w, q6k, 0, ROWS, COLS, NULL);
	ggml_quantize_chunk(GGML_TYPE_Q4_K, w, q4k_im, 0, ROWS, COLS, im);
	ggml_quantize_chunk(GGML_TYPE_Q6_K, w, q6k_im, 0, ROWS, COLS, im);
	memset(q8k, 0, sizeof q8k);
	quantize_row_q8_K_ref(a, q8k, COLS);

	const struct ggml_type_traits_cpu *t4 = ggml_get_type_traits_cpu(GGML_TYPE_Q4_K);
	const struct ggml_type_traits_cpu *t6 = ggml_get_type_traits_cpu(GGML_TYPE_Q6_K);
	if (t4->vec_dot_type != GGML_TYPE_Q8_K || t6->vec_dot_type != GGML_TYPE_Q8_K) {
		fprintf(stderr, "make-kquant-vectors: vec_dot_type is not Q8_K\n");
		return 1;
	}
	for (int r = 0; r < ROWS; r++) {
		t4->vec_dot(COLS, &dot[r][0], 0, q4k + (size_t)r * COLS / 256 * 144, 0, q8k, 0, 1);
		t6->vec_dot(COLS, &dot[r][1], 0, q6k + (size_t)r * COLS / 256 * 210, 0, q8k, 0, 1);
	}

	fwrite("QGKQV2\0\0", 1, 8, stdout);
	fwrite(&rows, 4, 1, stdout);
	fwrite(&cols, 4, 1, stdout);
	fwrite(w, sizeof w, 1, stdout);
	fwrite(a, sizeof a, 1, stdout);
	fwrite(q4k, sizeof q4k, 1, stdout);
	fwrite(q6k, sizeof q6k, 1, stdout);
	fwrite(q8k, sizeof q8k, 1, stdout);
	fwrite(dot, sizeof dot, 1, stdout);
	fwrite(im, sizeof im, 1, stdout);
	fwrite(q4k_im, sizeof q4k_im, 1, stdout);
	fwrite(q6k_im, sizeof q6k_im, 1, stdout);
	return fflush(stdout) == 0 ? 0 : 1;
}
