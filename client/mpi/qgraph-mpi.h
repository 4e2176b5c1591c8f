/*
 * qgraph-mpi.h - tensor-parallel graphs over MPI, one qgraphd per node
 * (libqgraph-mpi; pkg-config: libqgraph-mpi).
 *
 * Every rank of a communicator connects to its node's qgraphd; a weight
 * matrix is split into shards, one per rank, each held by that rank's
 * daemon; an op runs each rank's shard through its daemon and joins the
 * shards' results with an MPI collective, so that every rank ends with the
 * whole result in its session arena.  The splits are Megatron-LM's:
 *
 *	split by ROWS (column-parallel): rank r holds output rows
 *		[start_r, start_r + count_r) and computes those outputs;
 *		MPI_Allgatherv joins them
 *	split by COLS (row-parallel): rank r holds input columns
 *		[start_r, start_r + count_r) and computes a partial sum of
 *		every output; MPI_Allreduce adds them
 *	feed-forward block: gate and up split by rows, down by columns
 *		along the same hidden range, SILU(gate) * up between them on
 *		each rank: one allreduce per block, nothing in between
 *
 * Conventions are libqgraph's (0 or -errno, no errno, matrices row-major,
 * activations f32, N tokens of K values at an arena offset).  The caller
 * initializes MPI; every function called "collective" must be called by
 * every rank of the communicator with the same arguments where the
 * comment says so.
 *
 * Failure.  MPI without fault tolerance (Open MPI 4.1 has no ULFM) cannot
 * leave a collective that a peer never joins.  Set-up calls (connect,
 * scatter, op creation) agree on their outcome with one small allreduce,
 * so that every rank returns the same error.  While an op runs, a rank
 * whose daemon fails (gone, an error, or no completion within the
 * connection's timeout) writes "rank R: qgraphd at PATH ..." on stderr and
 * calls MPI_Abort on the communicator: mpirun then ends every rank, and
 * each daemon, seeing its client's socket close, frees that client's
 * session, graphs and shards.  A rank that dies is mpirun's to notice; it
 * ends the job the same way.
 */
#ifndef QGRAPH_MPI_H
#define QGRAPH_MPI_H

#include <mpi.h>
#include <stdint.h>

#include "qgraph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A rank's connection to its node's qgraphd, within a communicator. */
struct qgraph_mpi;

/* Options for qgraph_mpi_connect(); zero-filled means the defaults. */
struct qgraph_mpi_opts {
	MPI_Comm comm;		/* the ranks that act as one; 0 or MPI_COMM_NULL: MPI_COMM_WORLD */
	const char *socket;	/* NULL: as qgraph_connect(); else a path in which one "%d" is
				   replaced by the rank ("%%" is a '%'), for one daemon per rank */
	const char *name;	/* NULL: "qgraph-mpi rank R" */
	uint64_t arena_bytes;	/* 0: the daemon's default */
	int timeout_ms;		/* the longest an op waits for this rank's daemon before it ends
				   the job; 0: 60000 (qgraphd's own graph timeout) */
};

/*
 * Collective.  Connect this rank to its qgraphd and duplicate the
 * communicator (the library's collectives never mix with the caller's).
 * Returns 0 and *OUT on every rank, or on every rank an error: this rank's
 * own -errno (as qgraph_connect()), or -ECONNABORTED when only another
 * rank failed; ERR (ERRLEN bytes, may be NULL) says which and why.
 * -EINVAL when MPI is not initialized or SOCKET has a '%' other than one
 * "%d" and "%%".
 */
QGRAPH_API int qgraph_mpi_connect(const struct qgraph_mpi_opts *opts, struct qgraph_mpi **out, char *err,
				  size_t errlen);
/*
 * Collective (as MPI_Comm_free is).  Close this rank's session: the daemon
 * frees everything it held, shards and ops included.  NULL is fine.
 */
QGRAPH_API void qgraph_mpi_close(struct qgraph_mpi *m);
/* This rank's session (its arena holds every op's inputs and outputs). */
QGRAPH_API struct qgraph_session *qgraph_mpi_session(struct qgraph_mpi *m);
/* This rank, the number of ranks, and the socket this rank connected to. */
QGRAPH_API int qgraph_mpi_rank(const struct qgraph_mpi *m);
QGRAPH_API int qgraph_mpi_size(const struct qgraph_mpi *m);
QGRAPH_API const char *qgraph_mpi_socket(const struct qgraph_mpi *m);
/* The last error of M in words ("" if none). */
QGRAPH_API const char *qgraph_mpi_error(const struct qgraph_mpi *m);

/* ---- splits and sharded weights */

enum qgraph_mpi_split {
	QGRAPH_MPI_SPLIT_ROWS = 0,	/* by output rows: column-parallel */
	QGRAPH_MPI_SPLIT_COLS = 1,	/* by input columns: row-parallel */
};

#define QGRAPH_MPI_ROW_UNIT 8	/* rows: a row group of every interleaved layout (4x4, 4x8, 8x8) */
#define QGRAPH_MPI_COL_UNIT 32	/* columns: a quantization block */

/*
 * The share of part INDEX of PARTS of LEN items cut in UNITs: whole units
 * dealt out as evenly as they go (the first LEN / UNIT % PARTS parts get one
 * more), a last partial unit to the last part that has any.  0 and *START,
 * *COUNT; -EINVAL for a bad argument, -ERANGE when some part would get
 * nothing (fewer units than parts).
 */
QGRAPH_API int qgraph_mpi_split(int64_t len, int64_t unit, int parts, int index, int64_t *start,
				int64_t *count);

/* A weight matrix's shard on this rank. */
struct qgraph_mpi_weights;

/*
 * Collective.  Split the ROWS x COLS matrix DATA of SRC_TYPE (F32, F16,
 * Q8_0 or Q4_0; read on rank ROOT only, NULL elsewhere) by SPLIT in units
 * of UNIT (0: QGRAPH_MPI_ROW_UNIT rows or QGRAPH_MPI_COL_UNIT columns; else
 * a multiple of it), send each rank its shard (MPI_Scatterv of row ranges;
 * a column split sends each rank a strided type, without a copy on ROOT),
 * and upload it to that rank's daemon as TARGET (qgraph_weights_upload()).
 * Shards end on row-group and block boundaries, so each is a valid matrix
 * in any layout.  SPLIT, UNIT, SRC_TYPE, TARGET, ROWS, COLS and ROOT are
 * the same on every rank.  0 and *OUT on every rank, or the same error on
 * every rank: -EINVAL (arguments bad or not the same everywhere; COLS a
 * multiple of 32 for a column split), -ERANGE (too few units for the
 * ranks), an upload's -errno on its rank and -ECONNABORTED on the others.
 */
QGRAPH_API int qgraph_mpi_weights_scatter(struct qgraph_mpi *m, int root, enum qgraph_mpi_split split, int64_t unit,
					  enum qgraph_type src_type, enum qgraph_type target, int64_t rows,
					  int64_t cols, const void *data, struct qgraph_mpi_weights **out);
/*
 * Free this rank's shard (in its daemon too; free the ops that use it
 * first, as the daemon keeps weights a registered graph uses).  Not
 * collective; NULL is fine.
 */
QGRAPH_API void qgraph_mpi_weights_free(struct qgraph_mpi *m, struct qgraph_mpi_weights *w);

/* What this rank holds of W: the whole shape, its range and its shard in the daemon. */
struct qgraph_mpi_shard {
	enum qgraph_mpi_split split;
	int64_t rows, cols;		/* the whole matrix */
	int64_t start, count;		/* this rank's rows (split ROWS) or columns (COLS) */
	uint64_t handle;		/* the shard in this rank's daemon */
	enum qgraph_type stored;	/* as the daemon stores it */
};
QGRAPH_API int qgraph_mpi_weights_shard(const struct qgraph_mpi_weights *w, struct qgraph_mpi_shard *out);

/* ---- sharded ops */

/* A sharded op: a graph registered with each rank's daemon, and its collective. */
struct qgraph_mpi_op;

/* Time one rank spent in qgraph_mpi_op_run() calls, added up. */
struct qgraph_mpi_times {
	uint64_t compute_ns;	/* waiting for this rank's daemon to compute its shard */
	uint64_t collective_ns;	/* in collectives, past what overlapped compute (the wait for
				   the slowest rank included) */
	uint64_t total_ns;	/* the whole of each call */
	uint64_t daemon_ns;	/* the daemon's own compute time, from its completions */
	uint64_t runs;
};

/*
 * Collective.  Y = W X for the sharded W (ROWS x COLS): X is N rows of COLS
 * f32 at arena offset X_OFF, the same on every rank; every rank gets Y, N
 * rows of ROWS f32, at arena offset Y_OFF (not overlapping X).  Split by
 * rows: each rank computes its rows and MPI_Allgatherv joins them (N = 1
 * straight into Y, in place; N > 1 through a strided datatype from a
 * scratch block of the arena).  Split by columns: each rank reads its
 * columns of X through a view, writes its partial sum to Y, and
 * MPI_Allreduce adds them there in place.  0 and *OUT everywhere, or the
 * same -errno everywhere (-EINVAL, -ENOMEM: no arena room; the daemon's
 * refusal of the graph on its rank, -ECONNABORTED on the others).
 */
QGRAPH_API int qgraph_mpi_linear_new(struct qgraph_mpi *m, struct qgraph_mpi_weights *w, int64_t n, int64_t x_off,
				     int64_t y_off, struct qgraph_mpi_op **out);

enum {
	QGRAPH_MPI_FFN_NORM = 1 << 0,		/* RMS_NORM X (eps NORM_EPS) before the projections */
	QGRAPH_MPI_FFN_RESIDUAL = 1 << 1,	/* Y = X + the block (rank 0 adds X to its partial sum) */
};

/* A feed-forward block's shape and placement. */
struct qgraph_mpi_ffn_opts {
	int64_t n;		/* tokens */
	int64_t x_off, y_off;	/* N x DIM f32 each, in the arena, not overlapping */
	int64_t micro;		/* tokens per micro-batch (rounded up to 4, the GEMM kernels'
				   rows); 0: all N in one */
	int flags;		/* QGRAPH_MPI_FFN_* */
	float norm_eps;
};

/*
 * Collective.  The Megatron feed-forward block Y = DOWN (SILU(GATE X) *
 * (UP X)): GATE and UP (HIDDEN x DIM) split by rows and DOWN (DIM x HIDDEN)
 * by columns, all three in the same unit (a multiple of 32, so that the
 * hidden ranges agree), which qgraph_mpi_weights_scatter() gives them when
 * called with the same UNIT.  One graph per micro-batch computes a partial
 * sum of Y's rows; with micro-batches, each one's MPI_Iallreduce runs
 * while the daemon computes the next.  Errors as qgraph_mpi_linear_new(),
 * and -EINVAL when the three shards' ranges do not agree.
 */
QGRAPH_API int qgraph_mpi_ffn_new(struct qgraph_mpi *m, struct qgraph_mpi_weights *gate,
				  struct qgraph_mpi_weights *up, struct qgraph_mpi_weights *down,
				  const struct qgraph_mpi_ffn_opts *opts, struct qgraph_mpi_op **out);

/*
 * Collective.  Run OP on what the arenas hold now; on return Y is whole on
 * every rank.  Adds this call's times to *T (may be NULL).  Returns 0; a
 * daemon's failure ends the job (see the top of this file), so there is no
 * error return to handle but -EINVAL for a NULL OP.
 */
QGRAPH_API int qgraph_mpi_op_run(struct qgraph_mpi_op *op, struct qgraph_mpi_times *t);
/* Unregister OP's graphs and give back its arena scratch.  Not collective; NULL is fine. */
QGRAPH_API void qgraph_mpi_op_free(struct qgraph_mpi_op *op);

#ifdef __cplusplus
}
#endif

#endif /* QGRAPH_MPI_H */
