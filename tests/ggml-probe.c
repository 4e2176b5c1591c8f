/*
 * ggml-probe.c - asks libggml-qgraph.so (the path in argv[1], a daemon
 * reachable through QGRAPH_SOCKET) whether it claims ops the way
 * llama.cpp asks when it places a model's weights: with the weight in a
 * zero-size buffer of the device's buffer type.  One line per question,
 * "claimed" or "refused"; then quantized weights of each type the daemon
 * holds set into a buffer of model weights and read back ("exact" or
 * what differed).  tests/ggml-backend.sh judges the lines.  Exit 77
 * when the backend offers no device, 1 when it cannot be loaded; without
 * an argument (make check runs every check program) it skips, in TAP.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-backend.h"

/* Whether DEV claims OP with W (a source of OP) in a zero-size buffer of BUFT. */
static const char *probe(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft, struct ggml_tensor *op,
			 struct ggml_tensor *w)
{
	bool yes;

	w->buffer = ggml_backend_buft_alloc_buffer(buft, 0);
	if (!w->buffer)
		return "no buffer";
	yes = ggml_backend_dev_supports_op(dev, op);
	ggml_backend_buffer_free(w->buffer);
	w->buffer = NULL;
	return yes ? "claimed" : "refused";
}

/*
 * Weights of TYPE (ROWS x 256 in SLICES slices) quantized by ggml, set
 * into a buffer of model weights of BUFT, read back whole and by halves:
 * "exact", or what went wrong.
 */
static const char *round_trip(ggml_backend_buffer_type_t buft, enum ggml_type type, int64_t rows, int64_t slices)
{
	struct ggml_init_params params = { .mem_size = 2 * ggml_tensor_overhead(), .no_alloc = true };
	struct ggml_context *ctx = ggml_init(params);
	const int64_t cols = 256;
	const char *why = "exact";

	if (!ctx)
		return "no context";
	struct ggml_tensor *w = ggml_new_tensor_3d(ctx, type, cols, rows, slices);
	size_t n = (size_t)ggml_nbytes(w);
	float *x = malloc((size_t)(cols * rows * slices) * sizeof *x);
	unsigned char *q = malloc(n), *back = malloc(n);
	ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
	if (!x || !q || !back || !buf) {
		why = "no memory";
		goto out;
	}
	ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
	srand(7 + (unsigned)type);
	for (int64_t i = 0; i < cols * rows * slices; i++)
		x[i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
	ggml_quantize_chunk(type, x, q, 0, rows * slices, cols, NULL);
	ggml_backend_tensor_set(w, q, 0, n);
	memset(back, 0, n);
	ggml_backend_tensor_get(w, back, 0, n);
	if (memcmp(q, back, n)) {
		why = "differs";
		goto out;
	}
	memset(back, 0, n);
	ggml_backend_tensor_get(w, back, 0, n / 2);
	ggml_backend_tensor_get(w, back + n / 2, n / 2, n - n / 2);
	if (memcmp(q, back, n))
		why = "differs by halves";
out:
	if (buf)
		ggml_backend_buffer_free(buf);
	free(x);
	free(q);
	free(back);
	ggml_free(ctx);
	return why;
}

int main(int argc, char **argv)
{
	if (argc == 1) {	/* run by make check on its own: tests/ggml-backend.sh runs it */
		printf("1..0 # SKIP run by tests/ggml-backend.sh with the backend's path\n");
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: ggml-probe PLUGIN.so\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	ggml_backend_reg_t (*init)(void) = h ? (ggml_backend_reg_t (*)(void))dlsym(h, "ggml_backend_init") : NULL;
	if (!init) {
		fprintf(stderr, "ggml-probe: %s: %s\n", argv[1], dlerror());
		return 1;
	}
	ggml_backend_reg_t reg = init();
	if (!reg || ggml_backend_reg_dev_count(reg) == 0)
		return 77;
	ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
	ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev);
	struct ggml_init_params params = { .mem_size = 32 * ggml_tensor_overhead(), .no_alloc = true };
	struct ggml_context *ctx = ggml_init(params);
	if (!ctx)
		return 1;

	struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 4);
	struct ggml_tensor *norm = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 256);
	struct ggml_tensor *q4 = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 256, 64);
	struct ggml_tensor *mul = ggml_mul(ctx, x, norm), *add = ggml_add(ctx, x, norm);
	struct ggml_tensor *mm = ggml_mul_mat(ctx, q4, x);
	static const enum ggml_type quants[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_0 };
	struct ggml_tensor *qw[3], *qmm[3];
	for (int i = 0; i < 3; i++) {
		qw[i] = ggml_new_tensor_2d(ctx, quants[i], 256, 64);
		qmm[i] = ggml_mul_mat(ctx, qw[i], x);
	}

	printf("MUL by an F32 tensor of no buffer: %s\n", ggml_backend_dev_supports_op(dev, mul) ? "claimed" : "refused");
	printf("MUL by an F32 weight: %s\n", probe(dev, buft, mul, norm));
	printf("ADD of an F32 weight: %s\n", probe(dev, buft, add, norm));
	printf("MUL_MAT by Q4_0 weights: %s\n", probe(dev, buft, mm, q4));
	for (int i = 0; i < 3; i++)
		printf("MUL_MAT by %s weights: %s\n", ggml_type_name(quants[i]), probe(dev, buft, qmm[i], qw[i]));
	static const enum ggml_type all[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_0 };
	for (int i = 0; i < 4; i++) {
		printf("%s weights read back: %s\n", ggml_type_name(all[i]), round_trip(buft, all[i], 48, 1));
		printf("%s stacked weights of 5 rows read back: %s\n", ggml_type_name(all[i]),
		       round_trip(buft, all[i], 5, 3));
	}
	ggml_free(ctx);
	return 0;
}
