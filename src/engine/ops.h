/*
 * ops.h - the ops a graph is made of: builders, checks and the per-thread
 * compute functions the backends call.
 *
 * Shapes are written innermost first, as NE: [ne0, ne1, ne2, ne3]; a "row"
 * is the ne0 values at fixed (i1, i2, i3).  Unless said otherwise an op's
 * sources are F32 with any strides, and its result is a new contiguous F32
 * tensor.  "A divides B" below means B % A == 0 (B repeats A).
 *
 *   MUL_MAT(w, x)     w: any weight type [K, M, w2, w3], rows packed (an
 *                     interleaved layout: M a multiple of its row group);
 *                     x: F32 [K, N, x2, x3], elements packed along rows;
 *                     w2 divides x2, w3 divides x3.  Result [M, N, x2, x3]:
 *                     y[m, n, i2, i3] = sum_k w[k, m, i2/(x2/w2), i3/(x3/w3)]
 *                     * x[k, n, i2, i3], computed by qg_mul_mat (x quantized
 *                     to Q8_0 first for the quantized weight types).
 *   ADD(a, b), MUL(a, b)
 *                     b's every dimension divides a's (row broadcast and
 *                     more): y[i] = a[i] + (or *) b[i0 % b0, i1 % b1, ...].
 *                     Result has a's shape.
 *   SCALE(a, s)       y = a * s.
 *   SILU(a)           y = a / (1 + exp(-a)).
 *   GELU(a)           y = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))).
 *   RMS_NORM(a, eps)  per row: y = a / sqrt(mean(a^2) + eps), eps >= 0.
 *   SOFT_MAX(a, mask, scale)
 *                     per row: v = a * scale + mask (mask optional, F32,
 *                     ne0 equal to a's, its other dimensions dividing a's);
 *                     y = exp(v - max v) / sum exp(v - max v).  A row whose
 *                     values are all -inf gives zeros.
 *   CPY(a, b)         a and b: F32, F16 or Q8_0, same shape; the values of
 *                     a, converted to b's type (rounded to nearest for F16,
 *                     quantized by ggml's rule for Q8_0), are written over
 *                     b.  The result is a view of b.  CAST(a, type) is CPY
 *                     into a new contiguous tensor.
 *   GET_ROWS(t, idx)  t: F32, F16, Q8_0 or Q4_0 [ne0, R, n2, n3]; idx: I32
 *                     [n, n2, n3].  Result F32 [ne0, n, n2, n3]: row j of
 *                     slice (i2, i3) is row idx[j, i2, i3] of t's slice
 *                     (i2, i3).  An index outside [0, R) is found when the
 *                     op runs: that row is zeroed and the run fails -ERANGE.
 *
 * ggml's ops, built by qg_op_ex with ggml's op_params (int32 words, floats
 * by their bits; a word an op does not read must be 0), with ggml's
 * semantics (ggml-cpu/ops.cpp at the pinned llama.cpp):
 *   ROPE(a, pos[, ff])
 *                     a: F32 [ne0, heads, n, b], rows packed; pos: I32
 *                     [n]; ff (frequency factors, optional): F32, at
 *                     least n_dims/2 values.  Params: [1] n_dims (even),
 *                     [2] mode (0 normal: pairs (i, i+1); 2 NeoX: pairs
 *                     (i, i+n_dims/2)), [4] n_ctx_orig, [5] freq_base,
 *                     [6] freq_scale, [7] ext_factor, [8] attn_factor,
 *                     [9] beta_fast, [10] beta_slow, [15] n_offs (the
 *                     first value rotated); n_offs + n_dims <= ne0.  Pair
 *                     j of the row of token i2 turns by pos[i2] *
 *                     freq_base^(-2j/n_dims) / ff[j], YaRN-corrected,
 *                     scaled by attn_factor; the other values are copied.
 *   GLU(a[, b])       Params: [0] the gate (QG_GLU_*), [1] swapped.  With
 *                     b: y = gate(a) * b, a and b F32 of one shape.
 *                     Without: a's row is x (first half) and g (second
 *                     half; swapped: the other way), y = gate(x) * g,
 *                     ne0 halved.  Gates: ReGLU max(x, 0), GeGLU gelu(x)
 *                     (as GELU), SwiGLU silu(x).
 *   SET_ROWS(rows, idx, dst)
 *                     rows: F32 or F16 [n0, n, n2, n3]; idx: I32 or I64
 *                     [n, i2, i3], i2 dividing n2, i3 dividing n3; dst:
 *                     F32 or F16 [n0, R, n2, n3], rows packed.  Row
 *                     idx[j, k2 % i2, k3 % i3] of dst's slice (k2, k3)
 *                     becomes row j of rows' slice (k2, k3), converted
 *                     (F16 rounded to nearest).  The result is a view of
 *                     dst.  An index outside [0, R) is found when the op
 *                     runs: that row is not written and the run fails
 *                     -ERANGE.  NULL when dst is weights.
 *   FLASH_ATTN_EXT(q, k, v[, mask])
 *                     q: F32 [dk, n, h, b]; k: F16 [dk, n_kv, hk, b]; v:
 *                     F16 [dv, n_kv, hv, b], hk and hv dividing h (grouped
 *                     heads); mask: F16 [>= n_kv, >= n, m2, m3], m2
 *                     dividing h, m3 dividing b.  Params: [0] scale, [1]
 *                     max_bias (0), [2] logit_softcap (0), [3] precision
 *                     (0 or 10).  Result F32 [dv, h, n, b]: for query row
 *                     (i1, head i2, i3), softmax over the n_kv keys of
 *                     scale * (q . k) + mask, times v; q is rounded to F16
 *                     before its dot products, as ggml does.  A row whose
 *                     mask is -inf everywhere gives zeros.
 *   NORM(a)           Params: [0] eps (a float, >= 0).  Per row: y = (a -
 *                     mean a) / sqrt(mean((a - mean a)^2) + eps).
 *
 * Builders return NULL (and record the error in CTX) on bad types or
 * shapes, never abort, and pass a NULL source on as a NULL result.
 */
#ifndef QG_OPS_H
#define QG_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

struct qg_tensor *qg_op_mul_mat(struct qg_ctx *ctx, struct qg_tensor *w, struct qg_tensor *x);
struct qg_tensor *qg_op_add(struct qg_ctx *ctx, struct qg_tensor *a, struct qg_tensor *b);
struct qg_tensor *qg_op_mul(struct qg_ctx *ctx, struct qg_tensor *a, struct qg_tensor *b);
struct qg_tensor *qg_op_scale(struct qg_ctx *ctx, struct qg_tensor *a, float s);
struct qg_tensor *qg_op_silu(struct qg_ctx *ctx, struct qg_tensor *a);
struct qg_tensor *qg_op_gelu(struct qg_ctx *ctx, struct qg_tensor *a);
struct qg_tensor *qg_op_rms_norm(struct qg_ctx *ctx, struct qg_tensor *a, float eps);
/* MASK may be NULL (then no mask, not an error). */
struct qg_tensor *qg_op_soft_max(struct qg_ctx *ctx, struct qg_tensor *a, struct qg_tensor *mask, float scale);
/* A's values into B's bytes (the result is a view of B); NULL when B is weights (qg_tensor_is_weights). */
struct qg_tensor *qg_op_cpy(struct qg_ctx *ctx, struct qg_tensor *a, struct qg_tensor *b);
struct qg_tensor *qg_op_cast(struct qg_ctx *ctx, struct qg_tensor *a, enum qg_type type);
struct qg_tensor *qg_op_get_rows(struct qg_ctx *ctx, struct qg_tensor *t, struct qg_tensor *idx);

/* GLU's gates: ggml's enum ggml_glu_op numbers. */
enum qg_glu {
	QG_GLU_REGLU = 0,
	QG_GLU_GEGLU = 1,
	QG_GLU_SWIGLU = 2,
};

/*
 * The general form: OP on SRC[0..N_SRC) (1 to QG_MAX_SRC) with PARAMS[0..
 * N_PARAMS) (0 to QG_MAX_OP_PARAMS; the rest are 0), ggml's op_params.
 * Every op but the views: the first ops read PARAMS[0] as their float
 * (SCALE's factor, 1 when absent; RMS_NORM's eps; SOFT_MAX's scale, 1 when
 * absent) and refuse any other word that is not 0; CPY takes two sources
 * (a cast has its own builder).  NULL (and CTX's error) otherwise.
 */
struct qg_tensor *qg_op_ex(struct qg_ctx *ctx, enum qg_op op, struct qg_tensor *const *src, int n_src,
			   const int32_t *params, int n_params);

/* Float parameter I (by its bits): SCALE's, RMS_NORM's eps, SOFT_MAX's scale, ROPE's [5..10]. */
float qg_op_param_f32(const struct qg_tensor *t, int i);
void qg_op_set_param_f32(struct qg_tensor *t, int i, float v);

/*
 * 0 if node T is one the compute functions can run: a known op, sources of
 * the right types and shapes, strides that keep every access inside each
 * tensor.  -EINVAL (or -EOVERFLOW) otherwise: a graph from outside is
 * checked with this before it runs.
 */
int qg_op_check(const struct qg_tensor *t);
/*
 * 0 if node T, which passed qg_op_check, and its sources have data the
 * kernels accept (MUL_MAT's operands as qg_mul_mat_check wants them);
 * -EINVAL otherwise.  In ops-cpu.c.
 */
int qg_op_check_data(const struct qg_tensor *t);

/* True if OP may write its result over its first source (same layout, elementwise or by rows). */
bool qg_op_can_inplace(enum qg_op op);

/*
 * Whether T is a CPY that unpacks a 2-D Q4_0 matrix of any layout into
 * plain, contiguous Q4_0, or copies a Q4_K or Q6_K one into its own type
 * (weights read back): every scale and code carried over.
 */
bool qg_op_cpy_is_unpack(const struct qg_tensor *t);

/* T's work: multiply-accumulates for MUL_MAT and FLASH_ATTN_EXT, result elements for the rest. */
uint64_t qg_op_work(const struct qg_tensor *t);

/*
 * For a MUL_MAT node T with its data: the form its phase 0 leaves the
 * activation in (qg_mul_mat_act_form), 0 for any other node.  Two MUL_MATs
 * of one activation tensor (same data, shape and strides) with equal
 * nonzero forms fill identical scratch in phase 0.  In ops-cpu.c.
 */
uintptr_t qg_op_act_form(const struct qg_tensor *t);

/*
 * A group: MUL_MAT nodes of different graphs that read the same weight
 * bytes, each with an activation of its own, computed as one product (the
 * weights read once for all).  In ops-cpu.c.
 *
 * True if MUL_MAT nodes A and B may be in one group: the same weights (the
 * same bytes, type and shape, one matrix), each activation F32 with
 * contiguous rows in one batch, each result contiguous.
 */
bool qg_op_mul_mat_joins(const struct qg_tensor *a, const struct qg_tensor *b);
/*
 * Bytes of scratch one thread of a group of products of T's weights over
 * N activation rows in all needs (64-byte aligned): the rows gathered and
 * their quantized form; in *Y_BYTES the bytes of the product the threads
 * share (64-byte aligned).  0 if the product cannot be computed.
 */
size_t qg_op_mul_mat_group_slot(const struct qg_tensor *t, int64_t n, size_t *y_bytes);
/*
 * Into SLOT (a thread's qg_op_mul_mat_group_slot bytes, 64-byte aligned)
 * gather every activation row of the group T[0..N) (joined by
 * qg_op_mul_mat_joins, checked, data in place) and quantize them, unless
 * QUANT is a slot another group of the same activations filled (same
 * rows, same qg_op_act_form).  *READ: the slot the product reads.  0 or
 * -EINVAL.
 */
int qg_op_mul_mat_group_prepare(const struct qg_tensor *const *t, size_t n, void *slot, const void *quant,
				const void **read);
/*
 * Part PART of PARTS of the group's product (its weight rows split in
 * whole row groups, as qg_mul_mat_rows splits them) over every
 * activation row, reading READ (a slot qg_op_mul_mat_group_prepare
 * filled), into Y (the *Y_BYTES of qg_op_mul_mat_group_slot, shared by
 * the threads), perhaps over a few copies of the last row that pay
 * (dropped), and copied to each node's result.  Each result's bits are
 * those of the node computed alone, whatever the parts and whichever
 * thread takes them.  0 or -EINVAL.
 */
int qg_op_mul_mat_group_part(const struct qg_tensor *const *t, size_t n, int part, int parts, const void *read,
			     float *y);
/* The parts NTH threads take a group of T's products in, claiming them as they finish: NTH or more. */
int qg_op_mul_mat_group_parts(const struct qg_tensor *t, int nth);

/* Phases of T's computation, with a barrier between each: 2 for MUL_MAT, 0 for views and leafs, else 1. */
int qg_op_n_phases(const struct qg_tensor *t);
/* The most threads T's work can be split over (its rows, or row groups), at least 1. */
int qg_op_max_threads(const struct qg_tensor *t);
/* Bytes of scratch T needs when run on NTH threads (0 if none). */
size_t qg_op_scratch_size(const struct qg_tensor *t, int nth);

/*
 * Thread ITH of NTH runs its share of phase PHASE of node T (a checked
 * node, data in place); SCRATCH holds qg_op_scratch_size(T, NTH) bytes,
 * 64-byte aligned, shared by the threads.  Returns 0 or -errno (GET_ROWS
 * and SET_ROWS: -ERANGE on an index out of range); never aborts.
 */
int qg_op_compute(const struct qg_tensor *t, int phase, int ith, int nth, void *scratch);

/* The rows [*R0, *R1) of NROWS that thread ITH of NTH takes. */
void qg_op_split(int64_t nrows, int ith, int nth, int64_t *r0, int64_t *r1);

#endif /* QG_OPS_H */
