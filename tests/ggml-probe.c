/*
 * ggml-probe.c - asks libggml-qgraph.so (the path in argv[1], a daemon
 * reachable through QGRAPH_SOCKET) whether it claims ops the way
 * llama.cpp asks when it places a layer's weights: with the weight in a
 * zero-size buffer of each of the device's buffer types in turn (its
 * default, then its extra ones), the first that claims the op winning.
 * llama.cpp's dry run to fit a model places its KV cache in a buffer of
 * no bytes too.  One line per question: the winning type's name, or
 * "refused" (the weight would go to the CPU), or for a cache "claimed" or
 * "refused"; then quantized weights of each type the daemon holds set
 * into a buffer of model weights of its weights type and read back
 * ("exact" or what differed).  tests/ggml-backend.sh judges the lines.
 * Exit 77
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

/* ggml_backend_dev_get_extra_bufts_t in ggml-cpu.h, which this program does not include */
typedef ggml_backend_buffer_type_t *(*extra_bufts_fn)(ggml_backend_dev_t dev);

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

/* The first of DEV's buffer types (default, then extra) with which DEV claims OP, as llama.cpp picks. */
static const char *place(ggml_backend_dev_t dev, struct ggml_tensor *op, struct ggml_tensor *w)
{
	ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
	extra_bufts_fn extra = (extra_bufts_fn)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
	ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev);

	if (probe(dev, buft, op, w)[0] == 'c')
		return ggml_backend_buft_name(buft);
	for (ggml_backend_buffer_type_t *b = extra ? extra(dev) : NULL; b && *b; b++)
		if (probe(dev, *b, op, w)[0] == 'c')
			return ggml_backend_buft_name(*b);
	return "refused";
}

/* DEV's first extra buffer type (QGRAPH_WEIGHTS), or its default if it has none. */
static ggml_backend_buffer_type_t weights_buft(ggml_backend_dev_t dev)
{
	ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
	extra_bufts_fn extra = (extra_bufts_fn)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
	ggml_backend_buffer_type_t *b = extra ? extra(dev) : NULL;

	return b && *b ? *b : ggml_backend_dev_buffer_type(dev);
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
	printf("MUL by an F32 weight: %s\n", place(dev, mul, norm));
	printf("ADD of an F32 weight: %s\n", place(dev, add, norm));
	printf("MUL_MAT by Q4_0 weights: %s\n", place(dev, mm, q4));
	printf("MUL_MAT by Q4_0 weights in %s: %s\n", ggml_backend_buft_name(buft), probe(dev, buft, mm, q4));
	printf("device type: %s\n", ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_IGPU ? "IGPU" : "other");
	/* a model's F16 weight: computed where it is placed, in the arena */
	struct ggml_tensor *f16 = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 256, 64);
	printf("MUL_MAT by F16 weights: %s\n", place(dev, ggml_mul_mat(ctx, f16, x), f16));
	/* llama.cpp's dry run to fit a model puts its KV cache in a buffer of no bytes too */
	struct ggml_tensor *cache = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 256, 32);
	struct ggml_tensor *idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 4);
	printf("SET_ROWS into a cache of no bytes: %s\n", probe(dev, buft, ggml_set_rows(ctx, cache, x, idx), cache));
	struct ggml_tensor *q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 256, 1, 2);
	struct ggml_tensor *kv = ggml_view_3d(ctx, cache, 256, 32, 1, cache->nb[1], cache->nb[2], 0);
	printf("FLASH_ATTN_EXT over a cache of no bytes: %s\n",
	       probe(dev, buft, ggml_flash_attn_ext(ctx, q, kv, kv, NULL, 0.0625f, 0.0f, 0.0f), cache));
	for (int i = 0; i < 3; i++)
		printf("MUL_MAT by %s weights: %s\n", ggml_type_name(quants[i]), place(dev, qmm[i], qw[i]));
	static const enum ggml_type all[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_0 };
	ggml_backend_buffer_type_t wbuft = weights_buft(dev);
	for (int i = 0; i < 4; i++) {
		printf("%s weights read back: %s\n", ggml_type_name(all[i]), round_trip(wbuft, all[i], 48, 1));
		printf("%s stacked weights of 5 rows read back: %s\n", ggml_type_name(all[i]),
		       round_trip(wbuft, all[i], 5, 3));
	}
	ggml_free(ctx);
	return 0;
}
