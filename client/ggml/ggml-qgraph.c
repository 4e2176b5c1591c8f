/*
 * ggml-qgraph.c - libggml-qgraph.so, a ggml backend that runs quantized
 * matrix products, and the ops around them that the engine computes as ggml
 * does, in qgraphd, with the weights held there once for every process.
 *
 * ggml's loader picks it up from GGML_BACKEND_PATH (ggml_backend_load_all
 * and its callers); it exports ggml_backend_init and ggml_backend_score and
 * nothing else.  It offers one device, QGRAPH0, of type ACCEL: llama.cpp
 * then tries its buffer type first for the weights it would keep in host
 * memory, and keeps it for the tensors whose op the device supports.
 * ggml's scheduler sends those MUL_MATs here, with the runs of claimed ops
 * around them (dev_supports_op), and runs the rest on its CPU backend.
 *
 * One buffer type plays two roles, and learns which only after its buffer
 * exists (ggml sets a buffer's usage after alloc_buffer):
 *   - weights: a Q4_0, Q4_K or Q6_K tensor set into a WEIGHTS or ANY
 *     buffer (Q8_0: a WEIGHTS one) is uploaded to the daemon, which stores
 *     Q4_0 in its best interleaved layout and the others as they are; the
 *     process keeps no copy.  Reading it back asks the daemon to unpack it
 *     (a CPY into the tensor's type), so the bytes come back exactly.
 *   - compute: every other tensor (activations, results) lives in the
 *     session's arena, mapped at the buffer's addresses, which the daemon
 *     reads and writes in place: the scheduler's copy is the only copy.
 * A buffer is address space only (PROT_NONE) until a tensor of the second
 * kind needs bytes: a stray CPU access to weights faults.
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

#include <stdlib.h>
#include <string.h>

#include "ggml-qgraph-impl.h"

#define QGG_EXPORT __attribute__((visibility("default")))
#define QGG_ARENA_DEFAULT (512ull << 20)	/* arena asked for unless QGRAPH_GGML_ARENA says otherwise */

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

static void dev_get_memory(ggml_backend_dev_t dev, size_t *free_bytes, size_t *total)
{
	(void)dev;
	pthread_mutex_lock(&qgg.lock);
	if (qgg_pool_memory(free_bytes, total))
		*free_bytes = *total = 0;
	pthread_mutex_unlock(&qgg.lock);
}

static enum ggml_backend_dev_type dev_get_type(ggml_backend_dev_t dev)
{
	(void)dev;
	return GGML_BACKEND_DEVICE_TYPE_ACCEL;
}

static void dev_get_props(ggml_backend_dev_t dev, struct ggml_backend_dev_props *props)
{
	memset(props, 0, sizeof *props);
	props->name = dev_get_name(dev);
	props->description = dev_get_description(dev);
	props->type = GGML_BACKEND_DEVICE_TYPE_ACCEL;
	dev_get_memory(dev, &props->memory_free, &props->memory_total);
	/* async, host buffer, buffer_from_host_ptr, events: none */
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

/*
 * Whether T is a model weight in this buffer type: in a weights buffer, or
 * in the zero-size buffer llama.cpp makes to ask where a weight may go.
 */
static bool weights_here(const struct ggml_tensor *t)
{
	ggml_backend_buffer_t b = t->view_src ? t->view_src->buffer : t->buffer;

	return b && ggml_backend_buffer_get_type(b) == &qgg_buft &&
	       (ggml_backend_buffer_get_usage(b) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS ||
		ggml_backend_buffer_get_size(b) == 0);
}

/*
 * Whether MUL_MAT weights A view whole rows of a contiguous Q4_K, Q6_K or
 * Q8_0 tensor in another order (a permuted stack): the daemon holds these
 * types as they are, and gathers the rows (ggml-qgraph-graph.c).
 */
static bool permuted_rows(const struct ggml_tensor *a)
{
	const struct ggml_tensor *base = a->view_src;
	size_t rb = ggml_row_size(a->type, a->ne[0]);

	if ((a->type != GGML_TYPE_Q4_K && a->type != GGML_TYPE_Q6_K && a->type != GGML_TYPE_Q8_0) ||
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
 * MUL_MAT's quantized weights may be a model weight in this buffer type:
 * the daemon holds Q4_0, Q4_K, Q6_K and Q8_0 weights, and any other weight
 * would take arena bytes for its whole buffer (llama.cpp keeps the norms'
 * weights on the CPU then, and runs their MULs there).  The rest, op by op:
 *   MUL_MAT   contiguous Q4_0, Q4_K, Q6_K or Q8_0 weights held in this
 *             buffer type (or not placed yet: test-backend-ops asks
 *             before it allocates) by F32 activations.  The weights'
 *             buffer is only compared, never looked into: llama.cpp asks
 *             with a zero-size dummy.  Q8_0 outside a buffer of model
 *             weights is read from the arena (see is_weights).  Q4_K,
 *             Q6_K and Q8_0 weights may be a permuted view of whole rows.
 *   ADD, MUL  F32 everywhere (the second broadcast as ggml does)
 *   SCALE     F32, without a bias (the engine multiplies only)
 *   SILU, GELU  F32 (ggml's tanh GELU; not GELU_ERF nor GELU_QUICK)
 *   RMS_NORM  F32
 *   SOFT_MAX  F32, an F32 mask or none, no ALiBi (max_bias 0), no sinks
 *   GET_ROWS  F32, F16 or Q8_0 rows by I32 indices into F32 (weights live
 *             in the daemon in its own layout)
 *   CPY, CONT from F32, F16 or Q8_0 into F32 or F16: shapes the same,
 *             or the source contiguous
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
	if (!ggml_is_contiguous(op))
		return false;
	for (int k = op->op == GGML_OP_MUL_MAT ? 1 : 0; k < GGML_MAX_SRC; k++)
		if (op->src[k] && weights_here(op->src[k]))
			return false;
	switch (op->op) {
	case GGML_OP_MUL_MAT:
		return qgg_weights_qtype(a->type) >= 0 && b->type == GGML_TYPE_F32 && op->type == GGML_TYPE_F32 &&
		       (!a->buffer || ggml_backend_buffer_get_type(a->buffer) == &qgg_buft) &&
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
	return buft == &qgg_buft;
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

static const struct ggml_backend_reg_i qgg_reg_i = {
	.get_name = reg_get_name,
	.get_device_count = reg_get_device_count,
	.get_device = reg_get_device,
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

