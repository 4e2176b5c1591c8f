/*
 * mpi-impl.h - what the files of libqgraph-mpi share (qgraph-mpi.h is its
 * public face): the communicator a job's ranks work through, a shard of
 * weights, and the two calls every set-up step ends with.  Private.
 *
 *   mpi.c         the communicator: connect each rank to its daemon, close
 *   mpi-shard.c   splits, and weights scattered to shards across the ranks
 *   mpi-op.c      ops (linear, ffn) made of shard graphs and collectives, and their runs
 */
#ifndef QG_MPI_IMPL_H
#define QG_MPI_IMPL_H

#include "qgraph-mpi.h"

#define ABORT_CODE 3		/* the job's exit status after MPI_Abort: qgraph-submit's "no daemon" */

/* A job as one rank sees it: the ranks' communicator and this rank's session with its daemon. */
struct qgraph_mpi {
	MPI_Comm comm;		/* our own duplicate */
	int rank, size;
	struct qgraph_session *s;
	int timeout_ms;
	char socket[256];	/* for messages: the path, or what the default is */
	char error[512];
};

/* This rank's shard of a weight matrix, and the unit the matrix was split in. */
struct qgraph_mpi_weights {
	struct qgraph_mpi_shard sh;
	int64_t unit;
};

/* Set M's error text from FMT; returns ERR. */
__attribute__((format(printf, 3, 4)))
int qgm_fail(struct qgraph_mpi *m, int err, const char *fmt, ...);

/*
 * Collective: R is this rank's outcome of a step called WHAT.  Returns R
 * where it failed here, -ECONNABORTED (with the failing rank named in M's
 * error) where it failed only elsewhere, and 0 where it failed nowhere.
 * Ties go to the lowest rank, so every rank names the same one.
 */
int qgm_agree(struct qgraph_mpi *m, int r, const char *what);

#endif /* QG_MPI_IMPL_H */
