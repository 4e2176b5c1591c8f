/*
 * qgraph.h - the public interface of libqgraph.
 *
 * Clients of qgraphd link libqgraph (pkg-config: libqgraph).  This header
 * is all of its public face; nothing in it depends on qgraph's sources.
 *
 * Conventions: every function that can fail returns a non-negative result
 * (bytes written, a size, a type) or -errno; none sets errno, and none
 * aborts on a bad argument.  Sizes are in bytes; matrices are row-major.
 *
 * Sections:
 *	1. version
 *	2. element types and quantized formats
 *	3. sessions with qgraphd: weights, graphs, events
 */
#ifndef QGRAPH_H
#define QGRAPH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define QGRAPH_API __attribute__((visibility("default")))
#else
#define QGRAPH_API
#endif

/* ---------------------------------------------------------------- 1. version */

/* The library's version, "MAJOR.MINOR.PATCH"; never NULL. */
QGRAPH_API const char *qgraph_version(void);

/* ------------------------------------------- 2. types and quantized formats */

/*
 * Element types.  The block formats are byte-compatible with ggml's:
 *
 *	Q8_0		block_q8_0: fp16 scale, 32 int8 codes (34 bytes per 32 values)
 *	Q4_0		block_q4_0: fp16 scale, 16 bytes of 4-bit codes, value j in
 *			the low nibble of byte j and value j + 16 in the high one
 *			(18 bytes per 32 values); value = (code - 8) * scale
 *	Q4_0_4X4	block_q4_0x4: 4 rows' Q4_0 blocks at one column, the 4
 *	Q4_0_4X8	scales then the rows' quant bytes taken 4 (or 8) at a
 *	Q4_0_8X8	time row after row, each XOR 0x88; Q4_0_8X8 is
 *			block_q4_0x8, the same with 8 rows (144 bytes)
 *	Q8_0_4X4	block_q8_0x4: 4 rows' Q8_0 blocks interleaved 4 (or 8)
 *	Q8_0_4X8	bytes at a time, no XOR; Q8_0_4X4 is also how a CPU
 *			with the dot-product instructions but not i8mm
 *			stores Q8_0 weights (Q8_0_4X8: activations only)
 *	Q4_K		block_q4_K: super-blocks of 256 values in 144 bytes:
 *			fp16 d, fp16 dmin, eight 6-bit scales and mins packed
 *			in 12 bytes, 128 bytes of 4-bit codes; value =
 *			d * scale * code - dmin * min per 32 values
 *	Q6_K		block_q6_K: 256 values in 210 bytes: 128 bytes of low
 *			nibbles, 64 of high bit pairs, 16 int8 scales, fp16 d;
 *			value = d * scale * (code - 32) per 16 values
 *	Q8_K		block_q8_K: 256 values in 292 bytes: float d, 256 int8
 *			codes, 16 int16 sums of 16 codes (activations only)
 *
 * An interleaved matrix is ROWS / R groups of R rows, each group COLS / 32
 * consecutive interleaved blocks.  Scales are IEEE binary16, little-endian.
 * A GGUF Q4_0 or Q8_0 tensor is these bytes.
 */
enum qgraph_type {
	QGRAPH_TYPE_F32 = 0,
	QGRAPH_TYPE_F16 = 1,
	QGRAPH_TYPE_Q8_0 = 2,
	QGRAPH_TYPE_Q4_0 = 3,
	QGRAPH_TYPE_Q4_0_4X4 = 4,
	QGRAPH_TYPE_Q4_0_4X8 = 5,
	QGRAPH_TYPE_Q4_0_8X8 = 6,
	QGRAPH_TYPE_Q8_0_4X4 = 7,
	QGRAPH_TYPE_Q8_0_4X8 = 8,
	QGRAPH_TYPE_Q4_K = 9,
	QGRAPH_TYPE_Q6_K = 10,
	QGRAPH_TYPE_Q8_K = 11,
	QGRAPH_TYPE_COUNT
};

/* TYPE's name as ggml spells it ("f32", "q4_0_4x8", ...), or NULL if TYPE is not a type. */
QGRAPH_API const char *qgraph_type_name(enum qgraph_type type);

/*
 * The type called NAME (case-insensitive; ggml's older "q4_0_4_4" spelling
 * is accepted too), or -EINVAL.
 */
QGRAPH_API int qgraph_type_from_name(const char *name);

/* Rows stored together: 4 or 8 for the interleaved types, 1 otherwise; -EINVAL for a bad TYPE. */
QGRAPH_API int qgraph_type_row_group(enum qgraph_type type);

/* Values per block along a row: 32 for the block types, 1 for F32 and F16; -EINVAL for a bad TYPE. */
QGRAPH_API int qgraph_type_block_values(enum qgraph_type type);

/*
 * Bytes one row of COLS values of TYPE takes (for an interleaved type, a
 * row's share of its group).  -EINVAL when COLS is not a positive multiple
 * of the type's block values, -EOVERFLOW when the size does not fit.
 */
QGRAPH_API ssize_t qgraph_row_size(enum qgraph_type type, int64_t cols);

/* Bytes of a ROWS x COLS matrix of TYPE; -EINVAL also when ROWS is not a positive multiple of the row group. */
QGRAPH_API ssize_t qgraph_matrix_size(enum qgraph_type type, int64_t rows, int64_t cols);

/*
 * Quantize the ROWS x COLS f32 matrix SRC into TYPE at DST (DST_SIZE bytes
 * available).  TYPE is any type above but the result is meant for F32,
 * F16, Q8_0, Q4_0, the Q4_0 interleaved layouts, Q4_K and Q6_K.  Without
 * IMATRIX the bytes are those ggml's reference quantization writes.
 *
 * IMATRIX is NULL or COLS finite, non-negative importance weights, one per
 * column.  Q4_0 and its interleaved layouts then give each block the fp16
 * scale and codes that minimise sum w_j (x_j - d q_j)^2, never a larger
 * weighted error than plain rounding (a block whose weights are all zero
 * gets plain rounding's bytes), and an interleaved layout gets exactly the
 * bytes of Q4_0 followed by qgraph_repack().  Q4_K and Q6_K give the bytes
 * of ggml's quantize_q4_K / quantize_q6_K with IMATRIX as its quant_weights.
 * The other types check IMATRIX and ignore it.
 *
 * F32 and F16 convert every value (F16: NaN stays NaN, beyond +-65504 is
 * infinity).  The block types refuse NaN or infinity in SRC (-EDOM) and a
 * block whose fp16 scale would overflow (-ERANGE: Q4_0 magnitudes of
 * 524160 and more, Q8_0 of 127 * 65520 and more, Q4_K and Q6_K of 2^20 and
 * more); DST is then untouched.
 *
 * Returns bytes written, or -EINVAL (bad type, NULL pointer, shape that
 * does not suit TYPE, a negative or non-finite weight, SRC or IMATRIX
 * overlapping DST), -ENOBUFS (DST_SIZE too small), -EDOM, -ERANGE, -EOVERFLOW.
 */
QGRAPH_API ssize_t qgraph_quantize(enum qgraph_type type, const float *src, void *dst, size_t dst_size,
				   int64_t rows, int64_t cols, const float *imatrix);

/*
 * Turn the ROWS x COLS matrix SRC of TYPE (any type) into f32 at DST:
 * code times scale, as ggml's dequantize functions compute it.  Returns
 * bytes written (ROWS * COLS * 4) or -EINVAL, -ENOBUFS, -EOVERFLOW.
 */
QGRAPH_API ssize_t qgraph_dequantize(enum qgraph_type type, const void *src, float *dst, size_t dst_size,
				     int64_t rows, int64_t cols);

/*
 * Repack the ROWS x COLS matrix SRC from type FROM into type TO at DST
 * without re-quantizing: between Q4_0 and its interleaved layouts (either
 * way, or from one layout to another) and between Q8_0 and its interleaved
 * layouts.  Every scale and code is carried over, so a GGUF Q4_0 tensor
 * repacks and unpacks to the same bytes.  FROM == TO copies.  Returns
 * bytes written or -EINVAL (types of different families, a shape either
 * type refuses, NULL, SRC overlapping DST), -ENOBUFS, -EOVERFLOW.
 */
QGRAPH_API ssize_t qgraph_repack(enum qgraph_type to, void *dst, size_t dst_size,
				 enum qgraph_type from, const void *src, int64_t rows, int64_t cols);

/* ------------------------------------------------ 3. sessions with qgraphd */

/*
 * A session is a connection to qgraphd: a shared region holding this
 * process's tensor arena (where inputs and outputs live), two rings for
 * requests and their completions, and a table of events.
 *
 * Threads: every function may be called from several threads on one
 * session; calls that touch the rings take the session's lock for the
 * moment they do, and waiting (qgraph_wait, qgraph_event_sync) sleeps
 * without it.  fork(): the child must not use its parent's session (the
 * daemon knows only the parent); it may qgraph_session_close() it to free
 * the memory, and connect anew.  Every descriptor is close-on-exec.
 */
struct qgraph_session;

/*
 * Options of a session for qgraph_connect(); zero-filled means the defaults.  SIZE is the caller's sizeof this struct
 * (QGRAPH_CONNECT_OPTS_INIT sets it; 0 means this version's): a caller
 * built against a smaller struct gets the defaults for the fields it does
 * not know, and one built against a larger struct is refused (-E2BIG) if
 * it sets a field this library does not know.
 */
struct qgraph_connect_opts {
	size_t size;
	const char *socket;	/* NULL: $QGRAPH_SOCKET, then qgraphd's default path */
	const char *name;	/* shown in the daemon's logs and stats */
	uint64_t arena_bytes;	/* 0: the daemon's default */
	int timeout_ms;		/* for the handshake; 0: 5000 */
	/*
	 * How long to wait for a daemon that is starting (its socket missing,
	 * or there but refusing while it reserves its pool), retrying every
	 * 10 to 100 ms; 0: $QGRAPH_CONNECT_TIMEOUT (ms), else no wait.  64
	 * bits so that the struct grows past any padding an older caller's
	 * had (whose SIZE then leaves this field at its default).
	 */
	int64_t connect_timeout_ms;
};
#define QGRAPH_CONNECT_OPTS_INIT { .size = sizeof(struct qgraph_connect_opts) }

/*
 * Connect to qgraphd.  Returns 0 and the session in *OUT, or -errno
 * (-ENOENT / -ECONNREFUSED: no daemon, still none after
 * connect_timeout_ms, -EINVAL: QGRAPH_CONNECT_TIMEOUT is not a number of
 * milliseconds, -EDQUOT: a quota or limit of the
 * daemon refused the session, naming it, -ESHUTDOWN: the daemon is
 * stopping, -EPROTO: the daemon refused for another reason or spoke
 * nonsense); ERR (ERRLEN bytes, may be NULL) then says why in words.
 */
QGRAPH_API int qgraph_connect(const struct qgraph_connect_opts *opts, struct qgraph_session **out, char *err,
			      size_t errlen);

/* Close the session and free everything it holds, here and in the daemon.  NULL is fine. */
QGRAPH_API void qgraph_session_close(struct qgraph_session *s);

/*
 * The message of S's last call, in words: why it failed, or "" when it
 * succeeded (each call clears it as it starts).
 */
QGRAPH_API const char *qgraph_session_error(struct qgraph_session *s);

/* The session's arena: its address in this process and its size. */
QGRAPH_API void *qgraph_arena(struct qgraph_session *s, size_t *bytes);

/*
 * Take BYTES of the arena (64-byte aligned); returns the offset, or -ENOMEM.
 * A simple first-fit allocator over the arena, for clients that do not
 * manage it themselves.
 */
QGRAPH_API int64_t qgraph_arena_alloc(struct qgraph_session *s, size_t bytes);
/* Give back what qgraph_arena_alloc() returned at OFFSET. */
QGRAPH_API void qgraph_arena_free(struct qgraph_session *s, int64_t offset);

/*
 * Map the arena's bytes [OFFSET, OFFSET + BYTES) a second time, at ADDR,
 * over whatever the caller had mapped there (MAP_FIXED: typically its own
 * reservation of address space): writes through either mapping are seen
 * by the daemon.  OFFSET, BYTES and ADDR are multiples of the page size
 * (qgraph_arena_alloc a page more, and round up).  Unmap it with munmap(2)
 * before the session closes.  0, -EINVAL (outside the arena, unaligned, or
 * [ADDR, ADDR + BYTES) overlapping the session's own mapping of its
 * region: its rings, events and arena), or mmap's -errno.
 */
QGRAPH_API int qgraph_arena_map_at(struct qgraph_session *s, int64_t offset, size_t bytes, void *addr);

/* What the daemon said about itself at connect time, one line per fact. */
QGRAPH_API const char *qgraph_session_info(struct qgraph_session *s);

/*
 * Progress of an upload or of qgraph_model_load(): TENSORS_DONE of
 * TENSORS_TOTAL tensors and BYTES_DONE of BYTES_TOTAL bytes sent.
 */
typedef void (*qgraph_progress_fn)(void *ctx, size_t tensors_done, size_t tensors_total, uint64_t bytes_done,
				   uint64_t bytes_total);

/* Send the bytes even where the daemon may hold the same weights already (no look-up by digest first). */
#define QGRAPH_UPLOAD_SEND 1u

/*
 * What qgraph_weights_upload() sends.  SIZE is the caller's sizeof, as in
 * qgraph_connect_opts (QGRAPH_UPLOAD_OPTS_INIT; 0: this version's).
 */
struct qgraph_upload_opts {
	size_t size;
	enum qgraph_type src_type;	/* of DATA: F32, F16, Q8_0, Q4_0, an interleaved Q4_0 layout, Q4_K or Q6_K */
	enum qgraph_type target;	/* the type to store them as */
	int64_t rows, cols;
	const void *data;		/* ROWS x COLS of SRC_TYPE, in ggml's layout */
	const char *name;		/* NULL: unnamed; else this user's name for them (at most 63 bytes) */
	uint64_t flags;			/* 0 or QGRAPH_UPLOAD_SEND */
	qgraph_progress_fn progress;	/* NULL: none; called with PROGRESS_CTX after each chunk */
	void *progress_ctx;
};
#define QGRAPH_UPLOAD_OPTS_INIT { .size = sizeof(struct qgraph_upload_opts) }

/*
 * Upload the weight matrix OPTS describes, in chunks through the arena, to
 * be stored as its TARGET (Q4_0 or Q8_0: the daemon picks the fastest
 * layout of that type its CPU and the shape allow; F32 quantized to any
 * weight type, Q4_K and Q6_K with ggml's reference quantizers; F16, Q4_K
 * and Q6_K stored as they are, TARGET the same type; Q8_0 as Q8_0 or
 * Q8_0_4X4).  Returns 0, the handle in *HANDLE
 * and the type they are stored as in *STORED (may be NULL; graphs name
 * the weights with that type), or -errno with the daemon's reason in the
 * session error (-EINVAL for a bad field or flag, -E2BIG for a field of a
 * larger struct that this version does not know and that is set).
 * Blocks until done.
 *
 * Unnamed, and unless QGRAPH_UPLOAD_SEND is set, a Q4_0, F16, Q8_0, Q4_K
 * or Q6_K source is looked up by digest first (qgraph_weights_open_digest):
 * a second process uploading the same weights sends nothing (PROGRESS is
 * then called once, with everything done).
 *
 * NAME names the weights so that other processes may open them with
 * qgraph_weights_open().  Identical weights are stored once in the daemon
 * whoever uploads them, where its policy lets the uploaders share (the
 * same user, or a group it is configured to share within, or a public
 * model's weights).  The name is this user's (and its share groups'),
 * never the other holders' of the same bytes: another user may give the
 * same name to other weights.  -EINVAL when NAME already names other
 * weights of this user, or this user named the same weights otherwise.
 *
 * PROGRESS runs on the calling thread after each chunk the daemon has
 * taken, and must not use S: TENSORS_DONE 0 of TENSORS_TOTAL 1 until the
 * last chunk (then 1), BYTES_DONE of the source's BYTES_TOTAL.  A chunk
 * is at most a quarter of the arena (and 16 MiB).
 */
QGRAPH_API int qgraph_weights_upload(struct qgraph_session *s, const struct qgraph_upload_opts *opts,
				     uint64_t *handle, enum qgraph_type *stored);
/*
 * A handle of this session to the weights named NAME; their stored type
 * and shape in *TYPE, *ROWS, *COLS (each may be NULL).  0, or -ENOENT
 * when there are none.  NAME is looked up in this order, the first found
 * wins: weights this process's user uploaded under NAME; a tensor
 * "MODEL/tensor" of a model this user loaded; of a public model (loaded
 * by root, or preloaded by the daemon); then, where the daemon shares
 * within groups this process is in, weights and models of the users of
 * those groups.  Nobody else's names are seen: another user's model or
 * upload never stands in for this user's own.
 */
QGRAPH_API int qgraph_weights_open(struct qgraph_session *s, const char *name, uint64_t *handle,
				   enum qgraph_type *type, int64_t *rows, int64_t *cols);
/*
 * The SHA-256 of a ROWS x COLS matrix of TYPE (Q4_0, F16, Q8_0, Q4_K or
 * Q6_K) at DATA,
 * in ggml's layout: what the daemon knows its weights by (its own digest
 * of what it stores, an interleaved Q4_0 matrix unpacked to Q4_0 for it).
 * 0 or -EINVAL.
 */
QGRAPH_API int qgraph_weights_digest(enum qgraph_type type, int64_t rows, int64_t cols, const void *data,
				     unsigned char digest[32]);
/*
 * A handle of this session to stored weights with DIGEST (as
 * qgraph_weights_digest() computes it for TYPE) and shape ROWS x COLS that
 * this process may share (its user's, a share group's, a model's), without
 * sending them; their stored type in *STORED (may be NULL).  0, or -ENOENT.
 * qgraph_weights_upload() tries this first for an unnamed Q4_0, F16,
 * Q8_0, Q4_K or Q6_K source: a second process uploading the same weights
 * sends nothing.
 */
QGRAPH_API int qgraph_weights_open_digest(struct qgraph_session *s, enum qgraph_type type, int64_t rows,
					  int64_t cols, const unsigned char digest[32], uint64_t *handle,
					  enum qgraph_type *stored);
/* Free weights.  0 or -errno (-EBUSY while a registered graph uses them). */
QGRAPH_API int qgraph_weights_free(struct qgraph_session *s, uint64_t handle);

/* ---- models */

/*
 * Load the GGUF file PATH (versions 2 and 3) into the daemon as model NAME
 * (NULL: the file's base name without ".gguf"; 1 to 47 bytes, no '/').
 * Each tensor qgraph computes with is uploaded as weights named
 * "NAME/tensor.name": Q4_0 stored in the daemon's best layout, Q4_K, Q6_K,
 * Q8_0, F16 and F32 as they are; a tensor of N dimensions is a matrix of
 * ne[0] columns and ne[1] x ... x ne[N-1] rows.  Tensors of other types
 * (q5_K, bf16, ...) are skipped.  The daemon holds the model, past this
 * session, until qgraph_model_unload(): loaded by root it is public, for
 * every client the daemon serves; loaded by another user it is that
 * user's, and its share groups' (clients open its tensors with
 * qgraph_weights_open()).  Each user has its own model names beside the
 * public ones, so another user's model of the same name is no obstacle.
 * PROGRESS (may be NULL) is called with CTX after each tensor.  Blocks until done; returns
 * 0, or -errno with the reason in the session error: -EINVAL for a file
 * the reader refuses (the field and its byte offset named), a bad name or
 * a model NAME loaded already, -EDQUOT or -ENOMEM when the daemon's pool
 * or a quota cannot hold it (the loader's user-models counts the model
 * until it is unloaded, past this session), -ENAMETOOLONG when
 * "NAME/tensor" passes 63 bytes.  A load that fails leaves nothing in the
 * daemon.
 */
QGRAPH_API int qgraph_model_load(struct qgraph_session *s, const char *path, const char *name,
				 qgraph_progress_fn progress, void *ctx);
/*
 * Let the daemon go of model NAME, the one qgraph_weights_open() would
 * look in (for root: a public one, else any user's of that name): 0,
 * -ENOENT (no such model) or -EPERM (a user unloads its own models; root
 * any).  Sessions that hold handles
 * to its weights keep them until they free them; the memory goes with the
 * last holder.
 */
QGRAPH_API int qgraph_model_unload(struct qgraph_session *s, const char *name);

/* ---- graphs */

/* Ops (the numbers are the wire protocol's). */
enum qgraph_op {
	QGRAPH_OP_MUL_MAT = 1,
	QGRAPH_OP_ADD = 2,
	QGRAPH_OP_MUL = 3,
	QGRAPH_OP_SCALE = 4,
	QGRAPH_OP_SILU = 5,
	QGRAPH_OP_GELU = 6,
	QGRAPH_OP_RMS_NORM = 7,
	QGRAPH_OP_SOFT_MAX = 8,
	QGRAPH_OP_CPY = 9,
	QGRAPH_OP_GET_ROWS = 10,
	/* views (qgraph_graph_reshape and the others below, not qgraph_graph_op) */
	QGRAPH_OP_RESHAPE = 11,
	QGRAPH_OP_VIEW = 12,
	QGRAPH_OP_TRANSPOSE = 13,
	QGRAPH_OP_PERMUTE = 14,
	/* ggml's ops of these names, with ggml's op_params (qgraph_graph_op_ex only) */
	QGRAPH_OP_ROPE = 15,
	QGRAPH_OP_GLU = 16,
	QGRAPH_OP_SET_ROWS = 17,
	QGRAPH_OP_FLASH_ATTN_EXT = 18,
	QGRAPH_OP_NORM = 19,
};

#define QGRAPH_TYPE_I32 ((enum qgraph_type)32)	/* int32 indices and positions, in graphs only */
#define QGRAPH_TYPE_I64 ((enum qgraph_type)33)	/* int64 SET_ROWS indices, in graphs only */

#define QGRAPH_OP_MAX_SRC 6	/* sources of one op (ggml's GGML_MAX_SRC) */
#define QGRAPH_OP_MAX_PARAMS 16	/* int32 words of op parameters (ggml's op_params) */

struct qgraph_graph;

/* A new, empty graph description, or NULL. */
QGRAPH_API struct qgraph_graph *qgraph_graph_new(void);
QGRAPH_API void qgraph_graph_free(struct qgraph_graph *g);

/*
 * Tensors of a graph are named by index (>= 0); every builder returns the
 * new tensor's index or -errno, and a negative source makes a negative
 * result, so a whole graph can be built and checked once.  The builders
 * are the engine's, with the daemon's rules for every op's types and
 * shapes: a tensor they refuse (-EINVAL) is refused as it is built, and
 * its graph is never sent.
 *
 * input:   TYPE with NDIMS (1..4) dimensions NE (innermost first) at arena
 *          OFFSET (contiguous, 64-byte aligned)
 * weights: uploaded weights HANDLE of TYPE, ROWS x COLS
 * op:      OP on A (and B, or -1), its shape worked out as the daemon's
 *          (MUL_MAT(w, x): [w rows, x rows, ...]; GET_ROWS(t, idx):
 *          [t cols, idx count, ...]; the rest: A's shape); PARAM is SCALE's
 *          factor, RMS_NORM's eps or SOFT_MAX's scale (SOFT_MAX's B is an
 *          optional mask)
 * output:  make tensor T an output written to arena OFFSET
 */
QGRAPH_API int qgraph_graph_input(struct qgraph_graph *g, enum qgraph_type type, int ndims, const int64_t *ne,
				  int64_t offset);
QGRAPH_API int qgraph_graph_weights(struct qgraph_graph *g, uint64_t handle, enum qgraph_type type, int64_t rows,
				    int64_t cols);
/*
 * weights_nd: uploaded weights HANDLE of TYPE as NDIMS (2..4) dimensions NE:
 *          NE[0] = cols, NE[1] * NE[2] * NE[3] = rows, a stack of matrices
 *          of NE[1] rows each (whole row groups of the stored layout) that
 *          MUL_MAT takes slice by slice, broadcast over the activations'
 *          dimensions 2 and 3 as ggml does
 */
QGRAPH_API int qgraph_graph_weights_nd(struct qgraph_graph *g, uint64_t handle, enum qgraph_type type, int ndims,
				       const int64_t *ne);
QGRAPH_API int qgraph_graph_op(struct qgraph_graph *g, enum qgraph_op op, int a, int b, float param);
/*
 * op_ex:   the general form, as a ggml node: OP on the N_SRC (1 to
 *          QGRAPH_OP_MAX_SRC) tensors SRC, with the N_PARAMS (0 to
 *          QGRAPH_OP_MAX_PARAMS) int32 words PARAMS of ggml's op_params
 *          (floats by their bits; the words not given are 0).  Every op
 *          of qgraph_graph_op too (a float parameter is word 0, and a word
 *          an op does not read must be 0), and ggml's:
 *   ROPE(a, pos[, freq_factors]): a F32 [head dim, heads, tokens, ...],
 *          pos I32 [tokens]; words 1 n_dims, 2 mode (0 normal, 2 NeoX),
 *          4 n_ctx_orig, 5..10 freq_base, freq_scale, ext_factor,
 *          attn_factor, beta_fast, beta_slow, 15 the first value turned
 *   GLU(a[, b]): F32; word 0 the gate (0 ReGLU, 1 GeGLU, 2 SwiGLU), word
 *          1 swapped; one source: its rows' halves are the value and the
 *          gate (the result half as wide), two: a is the value, b the gate
 *   SET_ROWS(rows, idx, dst): rows F32 or F16, idx I32 or I64, dst F32 or
 *          F16 (not weights): row idx[j] of dst becomes row j of rows; the
 *          result is dst's bytes, as CPY's (not an output itself)
 *   FLASH_ATTN_EXT(q, k, v[, mask]): q F32, k and v F16, mask F16; word 0
 *          the scale (max_bias and logit_softcap 0); the result F32
 *          [v's head dim, heads, tokens, ...]
 *   NORM(a): F32, word 0 eps (a float): each row less its mean, over
 *          the square root of its variance plus eps
 *          Indices out of range are found when the graph runs: the run
 *          fails, its status says so.
 */
QGRAPH_API int qgraph_graph_op_ex(struct qgraph_graph *g, enum qgraph_op op, int n_src, const int *src, int n_params,
				  const int32_t *params);
QGRAPH_API int qgraph_graph_output(struct qgraph_graph *g, int t, int64_t offset);
/*
 * effect:  run node T, an op that writes into a source (CPY into a tensor,
 *          SET_ROWS: a KV-cache write), though no output reads it; a node
 *          made after T runs after it, so it reads what T wrote through
 *          any view of those bytes.  Returns T or -errno (-EINVAL for any
 *          other tensor).  Such a node is never an output itself.
 */
QGRAPH_API int qgraph_graph_effect(struct qgraph_graph *g, int t);
/*
 * Views: tensors with no bytes of their own, read through A's.  An op
 * takes them as sources like any tensor; to put a view's values in the
 * arena, make an op of it the output (SCALE by 1, or an ADD).  These
 * builders make no views of weights (their bytes are in the layout the
 * daemon chose); the daemon accepts views of weights in a graph's wire form
 * (qgraph_submit_encoded) as read-only.  Weights are read-only to every
 * graph: a CPY into weights, or into a view of them, is refused.
 *
 * reshape:   A, which must be contiguous (an input, an op's result, or a
 *            reshape or contiguous view of one), as NDIMS dimensions NE
 *            holding the same number of elements
 * transpose: A with its first two dimensions swapped
 * permute:   A with its dimension i moved to position AXES[i] (AXES a
 *            permutation of 0..3; a dimension beyond A's is of size 1)
 * view:      NDIMS dimensions NE of A's bytes from byte OFFSET on, its
 *            dimension d (1 <= d < NDIMS) NB[d - 1] bytes apart and the
 *            elements of a row as A's; one that reaches past A's bytes, or
 *            whose OFFSET or strides are not multiples of A's element (or
 *            block), is refused
 */
QGRAPH_API int qgraph_graph_reshape(struct qgraph_graph *g, int a, int ndims, const int64_t *ne);
QGRAPH_API int qgraph_graph_transpose(struct qgraph_graph *g, int a);
QGRAPH_API int qgraph_graph_permute(struct qgraph_graph *g, int a, const int axes[4]);
QGRAPH_API int qgraph_graph_view(struct qgraph_graph *g, int a, int ndims, const int64_t *ne, const uint64_t *nb,
				 uint64_t offset);
/*
 * A new tensor: A's values as TYPE (QGRAPH_OP_CPY with one source).  It may
 * be an output.  Conversions the daemon computes: between F32, F16 and
 * Q8_0 (rows of whole blocks), and weights of Q4_0 in any layout into
 * plain Q4_0 (of Q8_0_4X4 into plain Q8_0), which reads uploaded weights
 * back in ggml's layout, every scale and code as it was.
 */
QGRAPH_API int qgraph_graph_cast(struct qgraph_graph *g, int a, enum qgraph_type type);
/* Bytes tensor T of G takes (for sizing its arena room), or -errno. */
QGRAPH_API int64_t qgraph_graph_tensor_bytes(const struct qgraph_graph *g, int t);
/* Before the graph runs, wait until EVENT reaches VALUE; after, record VALUE on EVENT. */
QGRAPH_API int qgraph_graph_wait(struct qgraph_graph *g, unsigned event, uint32_t value);
QGRAPH_API int qgraph_graph_record(struct qgraph_graph *g, unsigned event, uint32_t value);

/*
 * Timings and status of a finished request.  SIZE is set by the caller to
 * its sizeof this struct (QGRAPH_RESULT_INIT; 0 means this version's), and
 * qgraph_wait fills no byte past it (nor past this version's struct, and
 * sets SIZE to what it filled): a caller built against a smaller struct
 * keeps working when it grows.
 */
struct qgraph_result {
	size_t size;
	int status;		/* 0 or -errno */
	uint64_t handle;	/* a registered graph's handle, or weights' */
	int stored_type;	/* weights: the enum qgraph_type they are stored as */
	uint64_t decode_ns, alloc_ns, compute_ns, total_ns;
	int64_t rows, cols;	/* weights: their shape */
};
#define QGRAPH_RESULT_INIT { .size = sizeof(struct qgraph_result) }

enum {
	QGRAPH_SUBMIT_KEEP = 1 << 0,	/* register the graph: the result carries its handle */
	QGRAPH_SUBMIT_BLOCK = 1 << 1,	/* wait for ring space instead of -EAGAIN */
};

/*
 * Submit G (asynchronous: returns once the request is in the ring).
 * Returns 0 and the request's id in *ID, -EAGAIN when the ring is full
 * (unless QGRAPH_SUBMIT_BLOCK), -EMSGSIZE, -ENOTCONN when the daemon went
 * away, -EINVAL for a graph whose building failed.
 */
QGRAPH_API int qgraph_submit(struct qgraph_session *s, struct qgraph_graph *g, int flags, uint64_t *id);
/* Run registered graph HANDLE again on what the arena holds now; G (may be NULL) supplies its events. */
QGRAPH_API int qgraph_run(struct qgraph_session *s, uint64_t handle, struct qgraph_graph *g, int flags,
			  uint64_t *id);
/*
 * G in its wire form (a SubmitGraph message), for saving it to a file:
 * writes it to BUF when LEN is large enough, and returns the bytes it takes
 * (so a call with LEN 0 sizes BUF), or -errno (-EINVAL for a graph whose
 * building failed).  Weight handles and arena offsets are written as they
 * are: they mean something only to the session that made them.
 */
QGRAPH_API ssize_t qgraph_graph_encode(const struct qgraph_graph *g, void *buf, size_t len);

#define QGRAPH_ENCODED_MAX (64u << 20)	/* the largest encoded graph qgraph_submit_encoded() takes */

/*
 * Submit a graph in its wire form (from qgraph_graph_encode, or a file),
 * as qgraph_submit() does; only FLAGS decide whether it is registered.
 * -EBADMSG when BUF is not a SubmitGraph; the daemon checks the rest.
 */
QGRAPH_API int qgraph_submit_encoded(struct qgraph_session *s, const void *buf, size_t len, int flags,
				     uint64_t *id);
/*
 * Ask the daemon to stop request TARGET, a graph of this session that is
 * running: it stops at its next node boundary and its completion says
 * -ECANCELED (its events record that error).  Returns 0 and the Cancel's
 * own id in *ID: its completion is 0 if it found TARGET still running, or
 * -ENOENT if TARGET had already completed.  Requests run in order, so
 * only the one running can be reached.
 */
QGRAPH_API int qgraph_cancel(struct qgraph_session *s, uint64_t target, uint64_t *id);
/* Forget a registered graph.  0 or -errno. */
QGRAPH_API int qgraph_graph_unregister(struct qgraph_session *s, uint64_t handle);

/*
 * Wait up to TIMEOUT_MS (-1: no limit) for request ID's completion: spins
 * briefly, then sleeps.  Returns 0 and fills *RES (if not NULL) with
 * RES->status the request's outcome; -ETIMEDOUT, -ENOTCONN when the
 * daemon went away (noticed within a second), or -EINVAL at once for an
 * ID this session never gave out.
 */
QGRAPH_API int qgraph_wait(struct qgraph_session *s, uint64_t id, int timeout_ms, struct qgraph_result *res);

/*
 * Wait until EVENT has reached VALUE (wrap-around compare), spinning
 * briefly, then sleeping; 0 or the recorded error (-errno), -ETIMEDOUT,
 * -ENOTCONN.  qgraph_event_query: 1 if reached, 0 if not, or -errno.
 */
QGRAPH_API int qgraph_event_sync(struct qgraph_session *s, unsigned event, uint32_t value, int timeout_ms);
QGRAPH_API int qgraph_event_query(struct qgraph_session *s, unsigned event, uint32_t value);

/* The daemon's statistics as text (one "key value" per line) into BUF; bytes or -errno. */
QGRAPH_API ssize_t qgraph_stats(struct qgraph_session *s, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* QGRAPH_H */
