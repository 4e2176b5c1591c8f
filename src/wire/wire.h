/*
 * wire.h - the wire protocol's messages <-> the engine's graphs.
 *
 * This is where bytes from a client become something the engine may run:
 * a record is decoded with a bounded allocator, and a submitted graph is
 * checked field by field (types, shapes, strides, ops, sources earlier in
 * the list, spans inside the arena and aligned, outputs that overlap
 * nothing, weight handles that resolve, views aligned to their elements,
 * no op writing into weights) with overflow-safe arithmetic before a
 * single tensor is built from it.  Weights may be viewed: views of them
 * are read-only, as the weights are.
 */
#ifndef QG_WIRE_H
#define QG_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "qgraph.pb-c.h"
#include "region.h"
#include "tensor.h"

#define QG_WIRE_ALIGN 64	/* arena spans start on a cache line (and the kernels' vectors) */
#define QG_WIRE_MAX_DIM (INT64_C(1) << 40)

/* A bump allocator for decoding one record: everything is freed at once. */
struct qg_wire_arena {
	unsigned char *buf;
	size_t cap, used;
};

/* Room for decoding records of up to CAP bytes of decoded structures.  0 or -ENOMEM. */
int qg_wire_arena_init(struct qg_wire_arena *a, size_t cap);
void qg_wire_arena_free(struct qg_wire_arena *a);

/*
 * Decode a Request of LEN bytes with A (reset first).  NULL when the bytes
 * are not a Request or decoding it would need more than A holds.  The
 * result lives in A until the next decode.
 */
Qgraph__Request *qg_wire_decode_request(struct qg_wire_arena *a, const void *buf, size_t len);

/* What a weight handle resolves to. */
struct qg_wire_weights {
	enum qg_type type;
	int64_t rows, cols;
	void *data;
};

/* Look HANDLE up for the session; 0 and *OUT, or -ENOENT. */
typedef int (*qg_wire_weights_fn)(void *ctx, uint64_t handle, struct qg_wire_weights *out);

/* What a graph may refer to: the session's arena and weights, and limits. */
struct qg_wire_env {
	unsigned char *arena;	/* the daemon's own mapping of the session arena */
	uint64_t arena_bytes;	/* from the daemon's own copy of the layout */
	uint32_t max_tensors;
	qg_wire_weights_fn weights;
	void *weights_ctx;
};

/* A graph built from a SubmitGraph: the tensors (by wire index) and their graph. */
struct qg_wire_graph {
	struct qg_ctx *ctx;
	struct qg_graph *graph;
	struct qg_tensor **tensors;
	size_t n_tensors;
	size_t n_outputs;
};

/*
 * Check SG against ENV and build it.  Returns 0 and fills OUT (free it with
 * qg_wire_graph_free), or -EINVAL (-ENOENT for an unknown weight handle,
 * -E2BIG over the tensor limit, -ENOMEM) with a message naming the tensor
 * and what is wrong with it in ERR.  OUT is cleared on error.
 */
int qg_wire_graph_build(const Qgraph__SubmitGraph *sg, const struct qg_wire_env *env,
			struct qg_wire_graph *out, char *err, size_t errlen);

void qg_wire_graph_free(struct qg_wire_graph *g);

/*
 * The other way: a graph of engine tensors as the SubmitGraph that
 * qg_wire_graph_build turns back into it.  What the wire says of a tensor
 * beyond its engine struct is in a struct qg_wire_tensor beside it.
 */
#define QG_WIRE_INPUT 1u	/* Tensor.flags: a leaf the client writes */
#define QG_WIRE_OUTPUT 2u	/* Tensor.flags: a result the client reads */
#define QG_WIRE_EFFECT 4u	/* Tensor.flags: a node writing into a source (CPY, SET_ROWS) that runs though nothing reads it */
#define QG_WIRE_MAX_EVENTS 16	/* events a graph waits for, and records, each */

struct qg_wire_tensor {
	int n_dims;		/* dimensions declared, 1 to 4 (0: up to the last that is not 1) */
	uint64_t weights;	/* a weights leaf's handle, else 0 */
	int64_t offset;		/* the arena offset of an input leaf or an output, else -1 */
	unsigned flags;		/* QG_WIRE_INPUT (leafs), QG_WIRE_OUTPUT or QG_WIRE_EFFECT (ops) */
};

struct qg_wire_event {
	uint32_t index, value;
};

/* An encoded SubmitGraph and the arrays it points into (qg_wire_record_free frees them). */
struct qg_wire_record {
	Qgraph__SubmitGraph sg;
	Qgraph__Tensor *t, **tp;
	Qgraph__Span *spans;
	uint32_t *srcs;
	int64_t *nes;
	uint64_t *nbs;
	float *fparams;
	int32_t *iparams;
	Qgraph__EventRef ev[2 * QG_WIRE_MAX_EVENTS], *evp[2 * QG_WIRE_MAX_EVENTS];
};

/*
 * The SubmitGraph of T[0..N), tensor I of it being T[I] as INFO[I] places
 * it, every source of T[I] among T[0..I); waiting for WAIT[0..N_WAIT) and
 * recording RECORD[0..N_RECORD) (up to QG_WIRE_MAX_EVENTS each).  0 and
 * *OUT (free it with qg_wire_record_free), or -EINVAL (a source that is not
 * an earlier tensor, a type or op with no wire number, too many events) or
 * -ENOMEM; *OUT is cleared on error.  Nothing is checked that
 * qg_wire_graph_build checks: the daemon does that.
 */
int qg_wire_graph_encode(struct qg_tensor *const *t, const struct qg_wire_tensor *info, size_t n,
			 const struct qg_wire_event *wait, size_t n_wait, const struct qg_wire_event *record,
			 size_t n_record, struct qg_wire_record *out);
void qg_wire_record_free(struct qg_wire_record *r);

/* SRC[0..N) as the wire's event references in EV, listed in PTRS (room for N each); returns N. */
size_t qg_wire_events(const struct qg_wire_event *src, size_t n, Qgraph__EventRef *ev, Qgraph__EventRef **ptrs);

/*
 * The session region's layout L as the Welcome carries it, in *OUT
 * (initialised here): the daemon's side of the handshake.
 */
void qg_wire_layout_pack(const struct qg_region_layout *l, Qgraph__RegionLayout *out);

/*
 * The layout the Welcome's RL carries, in *OUT: the client's side.  Not
 * checked here: qg_region_attach checks it before anything is mapped.
 */
void qg_wire_layout_unpack(const Qgraph__RegionLayout *rl, struct qg_region_layout *out);

/*
 * Numbering: the one table between the engine's, the public API's and the
 * wire's numbers of element types and ops.  Each returns the number asked
 * for, or -EINVAL when there is none (a type that never crosses the wire,
 * a number that names nothing).
 */
int qg_wire_type(int wire_type);			/* wire -> engine */
int qg_wire_type_of(enum qg_type type);			/* engine -> wire */
int qg_wire_type_of_public(int public_type);		/* enum qgraph_type -> wire */
int qg_wire_public_type(int wire_type);			/* wire -> enum qgraph_type */
int qg_wire_engine_type_of_public(int public_type);	/* enum qgraph_type -> engine */
int qg_wire_op(int wire_op);				/* wire -> engine */
int qg_wire_op_of(enum qg_op op);			/* engine -> wire */
int qg_wire_op_of_public(int public_op);		/* enum qgraph_op -> wire */

#endif /* QG_WIRE_H */
