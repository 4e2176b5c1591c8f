/*
 * ggml-qgraph.c - libggml-qgraph.so, a ggml backend that runs quantized
 * matrix products, and the ops around them that the engine computes as ggml
 * does, in qgraphd, with the weights held there once for every process.
 *
 * ggml's loader picks it up from GGML_BACKEND_PATH (ggml_backend_load_all
 * and its callers); it exports ggml_backend_init and ggml_backend_score and
 * nothing else.  It offers one device, QGRAPH0, of type IGPU (its memory
 * is host memory; llama.cpp uses it when no discrete GPU is present):
 * llama.cpp offloads its layers here, weights, KV cache and graph, and
 * ggml's scheduler sends the runs of claimed ops (dev_supports_op) here
 * and the rest to its CPU backend.
 *
 * The device has two buffer types (ggml-qgraph-buffer.c):
 *   - QGRAPH, its default: host memory, the session's arena mapped at the
 *     buffer's addresses when the buffer is made, which the daemon reads
 *     and writes in place and the CPU backend too (the scheduler's copy
 *     is the only copy): the KV cache, compute buffers, and the weights
 *     the daemon does not hold.  A quantized tensor set into one that is
 *     not a compute buffer is uploaded as well (Q8_0 only from a buffer
 *     of model weights) (test-backend-ops puts its
 *     weights there).
 *   - QGRAPH_WEIGHTS, its extra type: a Q4_0, Q4_K, Q6_K or Q8_0 tensor
 *     set there is uploaded to the daemon, which stores Q4_0 in its best
 *     interleaved layout and the others as they are; the process keeps no
 *     copy, and the buffer is address space only (PROT_NONE): a stray CPU
 *     access faults.  Reading it back asks the daemon to unpack it (a CPY
 *     into the tensor's type), so the bytes come back exactly.  llama.cpp
 *     puts a layer's matrices there because QGRAPH refuses them for
 *     MUL_MAT.
 *
 * Each graph_compute is translated to one qgraph graph, registered with
 * the daemon the first time and run by its handle after that: llama.cpp
 * sends the same few graphs every token.
 *
 * Without a daemon the backend registers no device and says why once on
 * stderr: the program goes on on its other backends.  Once weights are in
 * the daemon there is nothing to fall back to: an error marks the buffer,
 * and graph_compute then fails with GGML_STATUS_FAILED and the reason;
 * when the daemon is gone it ends the process (GGML_ABORT): its weights
 * went with the daemon.
 *
 * Threads: ggml calls a backend from one thread at a time per backend; a
 * mutex guards the state all backends and buffers share.
 *
 * This file is the device, the backend and the registry; buffers and
 * weights, graph translation and the registered graphs have a file each
 * (ggml-qgraph-impl.h lists them).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-qgraph-impl.h"

#define QGG_EXPORT __attribute__((visibility("default")))
#define QGG_ARENA_DEFAULT (512ull << 20)	/* arena asked for unless QGRAPH_GGML_ARENA says otherwise */
#define QGG_FIT_MARGIN (1ull << 30)		/* llama.cpp's default --fit-target */

struct qgg_state qgg = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct ggml_backend_reg qgg_reg;
static struct ggml_backend_device qgg_dev;

/* ------------------------------------------------------------ backend */

static const char *backend_get_name(ggml_backend_t backend)
{
	(void)backend;
	return "QGRAPH";
}

static void backend_free(ggml_backend_t backend)
{
	free(backend);
}

static const struct ggml_backend_i qgg_backend_i = {
	.get_name = backend_get_name,
	.free = backend_free,
	.graph_compute = qgg_graph_compute,
};

static ggml_guid_t backend_guid(void)
{
	static ggml_guid guid = { 0x71, 0x67, 0x72, 0x61, 0x70, 0x68, 0x64, 0x2d,
				  0x67, 0x67, 0x6d, 0x6c, 0x2d, 0x30, 0x30, 0x31 };
	return &guid;
}

/* ------------------------------------------------------------- device */

static const char *dev_get_name(ggml_backend_dev_t dev)
{
	(void)dev;
	return "QGRAPH0";
}

static const char *dev_get_description(ggml_backend_dev_t dev)
{
	(void)dev;
	return qgg.desc;
}

/* The host's available memory in bytes (MemAvailable), or 0 when /proc does not say. */
static size_t host_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb = 0;
	char line[128];

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (size_t)kb << 10;
}

/*
 * The device's memory: the daemon's pool (weights) and this session's
 * arena (the KV cache, activations, the weights the daemon does not
 * hold), both qgraphd's and this process's alone.  llama.cpp fits layers
 * and context to what is free less its --fit-target margin (1 GiB unless
 * set), a margin meant for what other programs need of a device's
 * memory: here that is host memory, so the host's available memory, up
 * to that 1 GiB, is counted too, and the margin comes out of it rather
 * than out of the pool.  The weights other processes already hold count
 * as free (qgg_pool_memory), so a second llama.cpp on the same model
 * gets as many layers as the first.
 */
static void dev_get_memory(ggml_backend_dev_t dev, size_t *free_bytes, size_t *total)
{
	size_t host = host_available();

	(void)dev;
	if (host > QGG_FIT_MARGIN)
		host = QGG_FIT_MARGIN;
	pthread_mutex_lock(&qgg.lock);
	if (qgg_pool_memory(free_bytes, total, true)) {
		*free_bytes = *total = 0;
	} else {
		*total += qgg.arena_bytes + host;
		*free_bytes += (qgg.arena_bytes > qgg.arena_held ? qgg.arena_bytes - qgg.arena_held : 0) + host;
	}
	pthread_mutex_unlock(&qgg.lock);
}

static enum ggml_backend_dev_type dev_get_type(ggml_backend_dev_t dev)
{
	(void)dev;
	return GGML_BACKEND_DEVICE_TYPE_IGPU;
}

static void dev_get_props(ggml_backend_dev_t dev, struct ggml_backend_dev_props *props)
{
	memset(props, 0, sizeof *props);
	props->name = dev_get_name(dev);
	props->description = dev_get_description(dev);
	props->type = dev_get_type(dev);
	dev_get_memory(dev, &props->memory_free, &props->memory_total);
	/*
	 * mmap: the loader reads each weight from the mapped file and sets it
	 * here (set_tensor), which uploads it; without the cap llama.cpp turns
	 * mmap off for the whole model, the CPU's tensors included.  async,
	 * host buffer, buffer_from_host_ptr, events: none.
	 */
	props->caps.mmap_support = true;
}

static ggml_backend_t dev_init_backend(ggml_backend_dev_t dev, const char *params)
{
	ggml_backend_t b = calloc(1, sizeof *b);

	(void)params;
	if (!b)
		return NULL;
	*b = (struct ggml_backend){ .guid = backend_guid(), .iface = qgg_backend_i, .device = dev };
	return b;
}

static ggml_backend_buffer_type_t dev_get_buffer_type(ggml_backend_dev_t dev)
{
	(void)dev;
	return &qgg_buft;
}

/* T is F32 with packed elements along its rows (the engine's float ops read rows so). */
static bool f32_rows(const struct ggml_tensor *t)
{
	return t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float);
}

/* A type the engine's CPY converts between (Q8_0 rows of whole blocks, packed). */
static bool cpy_type(const struct ggml_tensor *t)
{
	return t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16 ||
	       (t->type == GGML_TYPE_Q8_0 && t->ne[0] % 32 == 0);
}

/* A float op parameter of T. */
static float op_param(const struct ggml_tensor *t, int i)
{
	float v;

	memcpy(&v, (const char *)t->op_params + i * sizeof v, sizeof v);
	return v;
}

/* T's op_params words from N on are all 0 (the engine refuses a word it does not read). */
static bool words_zero_from(const struct ggml_tensor *t, int n)
{
	for (int i = n; i < (int)(GGML_MAX_OP_PARAMS / sizeof(int32_t)); i++)
		if (t->op_params[i])
			return false;
	return true;
}

/* T is F16 with packed elements along its rows. */
static bool f16_rows(const struct ggml_tensor *t)
{
	return t->type == GGML_TYPE_F16 && t->nb[0] == sizeof(ggml_fp16_t);
}

/*
 * Whether T is in a QGRAPH_WEIGHTS buffer (or the zero-size one llama.cpp
 * makes of that type to ask where a weight may go): its bytes are in the
 * daemon only, for MUL_MAT to read.
 */
static bool weights_here(const struct ggml_tensor *t)
{
	ggml_backend_buffer_t b = t->view_src ? t->view_src->buffer : t->buffer;

	return b && ggml_backend_buffer_get_type(b) == &qgg_wbuft;
}

/* T is in a buffer llama.cpp filled with a model's weights. */
static bool in_weights_buffer(const struct ggml_tensor *t)
{
	ggml_backend_buffer_t b = t->view_src ? t->view_src->buffer : t->buffer;

	return b && ggml_backend_buffer_get_usage(b) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
}

/*
 * Whether source K of OP is a cache (SET_ROWS' destination, attention's
 * keys, values and mask), never a weight llama.cpp asks about.  Its
 * buffer may have no bytes as a weight's probe does (llama.cpp's dry run
 * to fit a model allocates none), and a cache write refused there makes
 * ggml abort: its result lies in that buffer.
 */
static bool cache_src(const struct ggml_tensor *op, int k)
{
	return (op->op == GGML_OP_SET_ROWS && k == 2) || op->op == GGML_OP_FLASH_ATTN_EXT;
}

/*
 * Whether MUL_MAT weights A view whole rows of a contiguous Q8_0, Q4_K or
 * Q6_K tensor in another order (a permuted stack): the daemon gathers the
 * rows (ggml-qgraph-graph.c).  Not Q4_0, whose rows the daemon holds
 * interleaved.
 */
static bool permuted_rows(const struct ggml_tensor *a)
{
	const struct ggml_tensor *base = a->view_src;
	size_t rb = ggml_row_size(a->type, a->ne[0]);

	if ((a->type != GGML_TYPE_Q8_0 && a->type != GGML_TYPE_Q4_K && a->type != GGML_TYPE_Q6_K) ||
	    base->view_src || base->type != a->type || !ggml_is_contiguous(base) || base->ne[0] != a->ne[0] ||
	    a->nb[0] != ggml_type_size(a->type) || a->view_offs % rb || ggml_nrows(base) > INT32_MAX ||
	    ggml_nrows(a) > INT32_MAX)
		return false;
	for (int d = 1; d < GGML_MAX_DIMS; d++)
		if (a->nb[d] % rb)
			return false;
	return true;
}

/*
 * What runs here: the ops the engine computes exactly as ggml defines
 * them, and the view ops around them (they compute nothing).  Every
 * result is contiguous (the daemon writes outputs whole).  No source but
 * MUL_MAT's quantized weights may be in QGRAPH_WEIGHTS (they have no
 * bytes anywhere else); the other weights of a layer (norms, and what the
 * daemon does not hold) are in QGRAPH, the arena, like any activation.
 * The rest, op by op:
 *   MUL_MAT   Q4_0, Q4_K, Q6_K or Q8_0 weights in QGRAPH_WEIGHTS (or not
 *             placed yet: test-backend-ops asks before it allocates) by
 *             F32 activations: contiguous, or but for Q4_0 a permuted
 *             view of whole rows.  Saying no for weights in
 *             QGRAPH is what sends llama.cpp's matrices to QGRAPH_WEIGHTS,
 *             the next type of the device.  The weights' buffer is only
 *             compared, never looked into: llama.cpp asks with a
 *             zero-size dummy.  Q8_0 outside a buffer of model weights is
 *             read from the arena (see is_weights).
 *   ADD, MUL  F32 everywhere (the second broadcast as ggml does)
 *   SCALE     F32, without a bias (the engine multiplies only)
 *   SILU, GELU  F32 (ggml's tanh GELU; not GELU_ERF nor GELU_QUICK)
 *   RMS_NORM  F32
 *   SOFT_MAX  F32, an F32 mask or none, no ALiBi (max_bias 0), no sinks
 *   GET_ROWS  F32, F16 or Q8_0 rows by I32 indices into F32 (weights live
 *             in the daemon in its own layout)
 *   CPY, CONT from F32, F16 or Q8_0 into F32 or F16: shapes the same,
 *             or the source contiguous
 *   ROPE      F32 rows (strided sources too), normal or NeoX (no M-RoPE
 *             nor vision), YaRN, frequency factors, an offset
 *   GLU       ReGLU, GeGLU, SwiGLU: F32, fused (an even row) or split,
 *             swapped or not
 *   NORM      F32 rows
 *   SET_ROWS  F32 or F16 rows by I32 or I64 indices into F32 or F16
 *             (the KV-cache write), in place, strided destinations too
 *   FLASH_ATTN_EXT  F32 queries by F16 keys and values (views of a
 *             cache: strided rows), heads grouped; an F16 mask or none;
 *             no ALiBi, soft cap nor sinks
 */
static bool dev_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor *op)
{
	const struct ggml_tensor *a = op->src[0], *b = op->src[1];

	(void)dev;
	switch (op->op) {
	case GGML_OP_NONE:
	case GGML_OP_RESHAPE:
	case GGML_OP_VIEW:
	case GGML_OP_PERMUTE:
	case GGML_OP_TRANSPOSE:
		return true;
	default:
		break;
	}
	for (int k = op->op == GGML_OP_MUL_MAT ? 1 : 0; k < GGML_MAX_SRC; k++)
		if (op->src[k] && (cache_src(op, k) ? in_weights_buffer(op->src[k]) : weights_here(op->src[k])))
			return false;
	if (op->op == GGML_OP_SET_ROWS) {
		/* written in place: the result is the destination's bytes, strided or not */
		const struct ggml_tensor *d = op->src[2];
		return (f32_rows(a) || f16_rows(a)) && (b->type == GGML_TYPE_I32 || b->type == GGML_TYPE_I64) &&
		       (f32_rows(d) || f16_rows(d)) && op->type == d->type && words_zero_from(op, 0) &&
		       a->ne[0] == d->ne[0] && a->ne[2] == d->ne[2] && a->ne[3] == d->ne[3] && b->ne[0] == a->ne[1] &&
		       a->ne[2] % b->ne[1] == 0 && a->ne[3] % b->ne[2] == 0 && b->ne[3] == 1;
	}
	if (!ggml_is_contiguous(op))
		return false;
	switch (op->op) {
	case GGML_OP_MUL_MAT:
		/* attention without flash attention: F16 keys or values (not weights) by F32, heads grouped */
		if (a->type == GGML_TYPE_F16 && !weights_here(a))
			return f16_rows(a) && b->type == GGML_TYPE_F32 && b->nb[0] == sizeof(float) &&
			       op->type == GGML_TYPE_F32 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0;
		return qgg_weights_qtype(a->type) >= 0 && b->type == GGML_TYPE_F32 && op->type == GGML_TYPE_F32 &&
		       /* weights in QGRAPH_WEIGHTS; not placed yet (test-backend-ops asks before it allocates) */
		       (!a->buffer || weights_here(a)) &&
		       (a->view_src == NULL ? ggml_is_contiguous(a) : permuted_rows(a)) && b->nb[0] == sizeof(float) &&
		       /* stacked Q4_0 of odd row counts write a result per batch: at offsets the arena takes */
		       (a->ne[2] * a->ne[3] == 1 || a->type != GGML_TYPE_Q4_0 || a->ne[1] % 8 == 0 ||
			(op->nb[2] % QGG_ALIGN == 0 && op->nb[3] % QGG_ALIGN == 0));
	case GGML_OP_ADD:
	case GGML_OP_MUL:
		return f32_rows(a) && f32_rows(b) && op->type == GGML_TYPE_F32 && ggml_can_repeat(b, a) &&
		       ggml_are_same_shape(op, a);
	case GGML_OP_SCALE:
		return f32_rows(a) && op->type == GGML_TYPE_F32 && op_param(op, 1) == 0.0f;
	case GGML_OP_UNARY:
		switch (ggml_get_unary_op(op)) {
		case GGML_UNARY_OP_SILU:
		case GGML_UNARY_OP_GELU:
			return f32_rows(a) && op->type == GGML_TYPE_F32;
		default:
			return false;
		}
	case GGML_OP_RMS_NORM:
		return f32_rows(a) && op->type == GGML_TYPE_F32 && op_param(op, 0) >= 0.0f;
	case GGML_OP_SOFT_MAX:
		return f32_rows(a) && op->type == GGML_TYPE_F32 && op_param(op, 1) == 0.0f && !op->src[2] &&
		       (!b || (f32_rows(b) && b->ne[0] == a->ne[0] && b->ne[1] >= a->ne[1] &&
			       a->ne[2] % b->ne[2] == 0 && a->ne[3] % b->ne[3] == 0));
	case GGML_OP_ROPE: {
		const int32_t *p = op->op_params;
		const int n_dims = p[1], mode = p[2], n_offs = p[15];
		const struct ggml_tensor *ff = op->src[2];
		if (!f32_rows(a) || op->type != GGML_TYPE_F32 || b->type != GGML_TYPE_I32 || b->ne[0] != a->ne[2] ||
		    ggml_nelements(b) != b->ne[0] || (ff && ff->type != GGML_TYPE_F32) || op->src[3])
			return false;
		/* normal and NeoX only (no M-RoPE nor vision), the sections' words 0 */
		if ((mode != GGML_ROPE_TYPE_NORMAL && mode != GGML_ROPE_TYPE_NEOX) || p[0] || p[3] || p[11] || p[12] ||
		    p[13] || p[14] || n_dims < 2 || n_dims % 2 || n_offs < 0 || n_offs % 2 || n_dims > a->ne[0] - n_offs)
			return false;
		for (int i = 5; i <= 10; i++)
			if (!isfinite(op_param(op, i)))
				return false;
		return op_param(op, 5) > 0.0f && op_param(op, 6) > 0.0f;
	}
	case GGML_OP_GLU:
		/* ReGLU, GeGLU (ggml's tanh GELU) and SwiGLU; the others clamp or take parameters */
		switch (ggml_get_glu_op(op)) {
		case GGML_GLU_OP_REGLU:
		case GGML_GLU_OP_GEGLU:
		case GGML_GLU_OP_SWIGLU:
			break;
		default:
			return false;
		}
		/* one source: its rows split in halves (ggml drops an odd row's last value; the engine refuses it) */
		return f32_rows(a) && op->type == GGML_TYPE_F32 &&
		       (b ? f32_rows(b) && ggml_are_same_shape(a, b) : a->ne[0] % 2 == 0) &&
		       (op->op_params[1] == 0 || op->op_params[1] == 1) && words_zero_from(op, 2);
	case GGML_OP_NORM:
		return f32_rows(a) && op->type == GGML_TYPE_F32 && op_param(op, 0) >= 0.0f &&
		       words_zero_from(op, 1);
	case GGML_OP_FLASH_ATTN_EXT: {
		const struct ggml_tensor *k = op->src[1], *v = op->src[2], *m = op->src[3];
		/* F16 keys and values, an F16 mask or none; no ALiBi, no soft cap, no sinks */
		return f32_rows(a) && f16_rows(k) && f16_rows(v) && op->type == GGML_TYPE_F32 && !op->src[4] &&
		       isfinite(op_param(op, 0)) && op->op_params[1] == 0 && op->op_params[2] == 0 &&
		       (op->op_params[3] == GGML_PREC_DEFAULT || op->op_params[3] == GGML_PREC_F32) &&
		       words_zero_from(op, 4) && k->ne[0] == a->ne[0] && v->ne[1] == k->ne[1] &&
		       a->ne[2] % k->ne[2] == 0 && a->ne[2] % v->ne[2] == 0 && k->ne[3] == a->ne[3] &&
		       v->ne[3] == a->ne[3] &&
		       (!m || (f16_rows(m) && m->ne[0] >= k->ne[1] && m->ne[1] >= a->ne[1] && a->ne[2] % m->ne[2] == 0 &&
			       a->ne[3] % m->ne[3] == 0));
	}
	case GGML_OP_GET_ROWS:
		return (a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16 || a->type == GGML_TYPE_Q8_0) &&
		       b->type == GGML_TYPE_I32 && op->type == GGML_TYPE_F32 &&
		       (a->type == GGML_TYPE_Q8_0 ? ggml_is_contiguous(a) : a->nb[0] == ggml_type_size(a->type));
	case GGML_OP_CPY:
	case GGML_OP_CONT:
		/* into Q8_0: the engine's rounding is not ggml's to the last bit */
		return cpy_type(a) && cpy_type(op) && op->type != GGML_TYPE_Q8_0 && (a->type != GGML_TYPE_Q8_0 || ggml_is_contiguous(a)) &&
		       (a->type == GGML_TYPE_Q8_0 || a->nb[0] == ggml_type_size(a->type)) &&
		       (ggml_are_same_shape(a, op) || ggml_is_contiguous(a)) &&
		       (a->type != GGML_TYPE_Q8_0 || ggml_are_same_shape(a, op)) &&
		       (op->type != GGML_TYPE_Q8_0 || a->ne[0] % 32 == 0);
	default:
		return false;
	}
}

static bool dev_supports_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft)
{
	(void)dev;
	return buft == &qgg_buft || buft == &qgg_wbuft;
}

static const struct ggml_backend_device_i qgg_dev_i = {
	.get_name = dev_get_name,
	.get_description = dev_get_description,
	.get_memory = dev_get_memory,
	.get_type = dev_get_type,
	.get_props = dev_get_props,
	.init_backend = dev_init_backend,
	.get_buffer_type = dev_get_buffer_type,
	.supports_op = dev_supports_op,
	.supports_buft = dev_supports_buft,
	/* offload_op stays NULL: a yes would copy host weights here every batch */
};

/* ---------------------------------------------------------- registry */

static const char *reg_get_name(ggml_backend_reg_t reg)
{
	(void)reg;
	return "QGRAPH";
}

static size_t reg_get_device_count(ggml_backend_reg_t reg)
{
	(void)reg;
	return qgg.s ? 1 : 0;
}

static ggml_backend_dev_t reg_get_device(ggml_backend_reg_t reg, size_t index)
{
	(void)reg;
	return qgg.s && index == 0 ? &qgg_dev : NULL;
}

/* The device's buffer types after its default one: llama.cpp tries them, in order, for a layer's weights. */
static ggml_backend_buffer_type_t *dev_extra_bufts(ggml_backend_dev_t dev)
{
	static ggml_backend_buffer_type_t bufts[] = { &qgg_wbuft, NULL };

	(void)dev;
	return bufts;
}

static void *reg_get_proc_address(ggml_backend_reg_t reg, const char *name)
{
	(void)reg;
	if (strcmp(name, "ggml_backend_dev_get_extra_bufts") == 0)
		return (void *)dev_extra_bufts;
	return NULL;
}

static const struct ggml_backend_reg_i qgg_reg_i = {
	.get_name = reg_get_name,
	.get_device_count = reg_get_device_count,
	.get_device = reg_get_device,
	.get_proc_address = reg_get_proc_address,
};

/* Connect to qgraphd; without one the backend has no device, and says so once. */
static void connect_daemon(void)
{
	struct qgraph_connect_opts o = { .name = "ggml" };
	const char *env = getenv("QGRAPH_GGML_ARENA");
	char err[512];

	qgg.arena_bytes = QGG_ARENA_DEFAULT;
	qgg.trace = getenv("QGRAPH_GGML_TRACE") && *getenv("QGRAPH_GGML_TRACE") == '1';
	if (env && *env) {
		char *end;
		unsigned long long v = strtoull(env, &end, 10);
		switch (*end) {
		case 'G': case 'g': v <<= 30; break;
		case 'M': case 'm': v <<= 20; break;
		case 'K': case 'k': v <<= 10; break;
		case 0: break;
		default: v = 0; break;
		}
		if (v)
			qgg.arena_bytes = v;
		else
			say("QGRAPH_GGML_ARENA=%s is not a size (like 512M or 2G): using %llu MiB", env,
			    QGG_ARENA_DEFAULT >> 20);
	}
	o.arena_bytes = qgg.arena_bytes;
	int r = qgraph_connect(&o, &qgg.s, err, sizeof err);
	if (r) {
		say("no device: %s; this program goes on without qgraph", err);
		qgg.s = NULL;
		return;
	}
	snprintf(qgg.desc, sizeof qgg.desc, "qgraphd: quantized matrix products and the ops around them, weights held once (libqgraph %s)",
		 qgraph_version());
}

static ggml_backend_reg_t qgg_reg_get(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	static bool refused;

	if (strncmp(ggml_commit(), QG_GGML_COMMIT, strlen(ggml_commit())) != 0 || !*ggml_commit()) {
		if (!refused)
			say("not registering: built for ggml commit %.12s, this process runs ggml %s "
			    "(rebuild qgraph with ./configure --with-ggml=DIR for this ggml)",
			    QG_GGML_COMMIT, ggml_commit());
		refused = true;
		return NULL;
	}
	pthread_once(&once, connect_daemon);
	qgg_buft = (struct ggml_backend_buffer_type){
		.iface = qgg_buft_i,
		.device = &qgg_dev,
	};
	qgg_wbuft = (struct ggml_backend_buffer_type){
		.iface = qgg_buft_i,
		.device = &qgg_dev,
	};
	qgg_dev = (struct ggml_backend_device){ .iface = qgg_dev_i, .reg = &qgg_reg };
	qgg_reg = (struct ggml_backend_reg){ .api_version = GGML_BACKEND_API_VERSION, .iface = qgg_reg_i };
	return &qgg_reg;
}

/* The two symbols ggml's loader looks up (GGML_BACKEND_API_VERSION 2). */
QGG_EXPORT ggml_backend_reg_t ggml_backend_init(void);
QGG_EXPORT int ggml_backend_score(void);

ggml_backend_reg_t ggml_backend_init(void)
{
	return qgg_reg_get();
}

int ggml_backend_score(void)
{
	return 1;	/* one build, for every CPU it was compiled for */
}

