/*
 * ggml-qgraph-xlate.h - a ggml graph under translation to a qgraph graph
 * (struct xlate), and the calls ggml-qgraph-graph.c builds it with
 * (ggml-qgraph-xlate.c).  Private to those two files.
 */
#ifndef QGG_XLATE_H
#define QGG_XLATE_H

#include <stdbool.h>
#include <stdint.h>

#include "ggml-qgraph-impl.h"

/* A ggml tensor with a qgraph tensor in the graph under translation. */
struct qgg_done {
	const struct ggml_tensor *t;
	int id;
	int64_t off;			/* its arena offset (an output's, or an input's) */
	int64_t lo, hi;			/* the arena bytes it reads (input) or would write (result) */
	bool input;			/* read from the arena, or computed here */
	bool dead;			/* a result a later node writes over: not an output */
};

/* A graph under translation: the qgraph graph and the key that names it in the cache. */
struct xlate {
	struct qgraph_graph *g;
	uint64_t *key;
	size_t n_key, cap_key;
	struct qgg_done *done;
	size_t n_done, cap_done;
	/*
	 * Indices into DONE of the inputs, and of the results not yet written
	 * over (live): the overlap checks each node makes look at these, not
	 * at every tensor of the graph, which made translating a graph
	 * quadratic in its nodes.  Results a later node writes over leave
	 * LIVE as they are marked dead.
	 */
	size_t *inputs, n_inputs, cap_inputs;
	size_t *live, n_live, cap_live;
	/*
	 * DONE by ggml tensor: an open-addressing table (a power of two of
	 * slots, at most half full) from a tensor to its latest entry, so
	 * that finding a node's sources does not scan DONE.
	 */
	struct qgg_slot {
		const struct ggml_tensor *t;
		size_t i;
	} *tab;
	size_t tab_cap, tab_n;
	struct qgg_fixed {		/* outputs made at once (a product per slice) */
		int64_t lo, hi;
	} *fixed;
	size_t n_fixed;
	int64_t *staged;		/* arena room of copies (stage), freed once the graphs ran */
	size_t n_staged;
	struct qgg_write {		/* the bytes each claimed node of the ggml graph writes */
		int64_t lo, hi;
	} *writes;
	int n_writes, cur;		/* ... indexed by node; CUR: the node being translated */
	int n_nodes;			/* nodes in the graph so far */
	char error[256];
	long long t0;			/* when graph_compute began (QGRAPH_GGML_TRACE) */
};

/* Keep the first error's text in X; returns ERR (or -EINVAL if ERR is not negative). */
int qgg_fail(struct xlate *x, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * The graph builders: qgraph_graph_input, _view, _reshape, _op, _op_ex
 * (N_SRC sources, N_PARAMS words of T's op parameters), _effect, _cast, _weights,
 * _weights_nd and _output on X's graph, each keeping its call in X's key.
 * The new tensor's index, or -errno.
 */
int qgg_input(struct xlate *x, enum qgraph_type type, const int64_t ne[4], int64_t off);
int qgg_view(struct xlate *x, int a, const int64_t ne[4], const uint64_t nb[3], uint64_t off);
int qgg_reshape(struct xlate *x, int a, const int64_t ne[4]);
int qgg_op(struct xlate *x, enum qgraph_op op, int a, int b, float param);
int qgg_op_ex(struct xlate *x, enum qgraph_op op, int n_src, const int *src, const struct ggml_tensor *t,
	      int n_params);
int qgg_effect(struct xlate *x, int t);
int qgg_cast(struct xlate *x, int a, enum qgraph_type type);
int qgg_leaf_weights(struct xlate *x, uint64_t handle, enum qgraph_type type, int64_t rows, int64_t cols);
int qgg_leaf_weights_nd(struct xlate *x, uint64_t handle, enum qgraph_type type, const int64_t ne[4]);
int qgg_output(struct xlate *x, int t, int64_t off);

/* Where T's bytes are in the session arena, or -1 if its buffer is not one of ours or has none. */
int64_t qgg_arena_offset(const struct ggml_tensor *t);
/* The arena bytes [*LO, *HI) that T's elements lie in (from an aligned start); false if not in our buffers. */
bool qgg_tensor_span(const struct ggml_tensor *t, int64_t *lo, int64_t *hi);
/* Whether [LO, HI) and [LO2, HI2) share a byte. */
bool qgg_overlap(int64_t lo, int64_t hi, int64_t lo2, int64_t hi2);
/* The qgraph type of ggml type T, or -1 for one no claimed op takes outside MUL_MAT's weights. */
int qgg_qtype(enum ggml_type t);

/* Remember D (a ggml tensor's qgraph tensor).  0 or -ENOMEM. */
int qgg_done_add(struct xlate *x, struct qgg_done d);
/* Forget every tensor remembered (a new graph begins). */
void qgg_done_clear(struct xlate *x);
/* Whether S will be read from the arena (nothing in this graph stands for it yet). */
bool qgg_reads_arena(struct xlate *x, const struct ggml_tensor *s);
/* An input for S at arena offset OFF, its bytes spanning [LO, HI), remembered as S's tensor; or -errno. */
int qgg_input_at(struct xlate *x, const struct ggml_tensor *s, int64_t off, int64_t lo, int64_t hi);
/* The qgraph tensor for source S of a node (of this graph, or an input over S's bytes or a copy); or -errno. */
int qgg_source(struct xlate *x, const struct ggml_tensor *s);

#endif /* QGG_XLATE_H */
