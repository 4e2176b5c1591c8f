/*
 * mpi-shard.c - libqgraph-mpi's splits and shards (qgraph-mpi.h): a
 * matrix cut by rows or by columns into one shard per rank, scattered from
 * a root rank and uploaded to each rank's daemon.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mpi-impl.h"

QGRAPH_API int qgraph_mpi_split(int64_t len, int64_t unit, int parts, int index, int64_t *start, int64_t *count)
{
	if (len < 1 || unit < 1 || parts < 1 || index < 0 || index >= parts || !start || !count)
		return -EINVAL;
	int64_t units = len / unit + (len % unit != 0);
	if (units < parts)
		return -ERANGE;
	int64_t base = units / parts, extra = units % parts;
	int64_t first = (int64_t)index * base + (index < extra ? index : extra);
	int64_t mine = base + (index < extra);
	*start = first * unit;
	*count = mine * unit;
	if (*start + *count > len)	/* the last part, with the partial unit */
		*count = len - *start;
	return 0;
}

/* Is TYPE one a shard may be cut from: a format whose rows are 32-value blocks or single values, one row per row? */
static int splittable_type(enum qgraph_type t)
{
	return t == QGRAPH_TYPE_F32 || t == QGRAPH_TYPE_F16 || t == QGRAPH_TYPE_Q8_0 || t == QGRAPH_TYPE_Q4_0;
}

/* The checks of qgraph_mpi_weights_scatter()'s arguments that need no other rank: 0 or -EINVAL, -ERANGE. */
static int scatter_check(struct qgraph_mpi *m, int root, enum qgraph_mpi_split split, int64_t unit,
			 enum qgraph_type src, enum qgraph_type target, int64_t rows, int64_t cols, const void *data,
			 int64_t *start, int64_t *count)
{
	int64_t min_unit = split == QGRAPH_MPI_SPLIT_ROWS ? QGRAPH_MPI_ROW_UNIT : QGRAPH_MPI_COL_UNIT;

	if (split != QGRAPH_MPI_SPLIT_ROWS && split != QGRAPH_MPI_SPLIT_COLS)
		return qgm_fail(m, -EINVAL, "scatter: no split %d", (int)split);
	if (unit == 0)
		unit = min_unit;
	if (unit < 0 || unit % min_unit)
		return qgm_fail(m, -EINVAL, "scatter: a unit of %lld is not a multiple of %lld", (long long)unit,
			    (long long)min_unit);
	if (!splittable_type(src) || qgraph_type_name(target) == NULL)
		return qgm_fail(m, -EINVAL, "scatter: from f32, f16, q8_0 or q4_0 (not %s)",
			    qgraph_type_name(src) ? qgraph_type_name(src) : "a type");
	if (rows < 1 || cols < 1 || rows > INT_MAX || qgraph_row_size(src, cols) < 0 ||
	    qgraph_row_size(src, cols) > INT_MAX)
		return qgm_fail(m, -EINVAL, "scatter: a %lld x %lld %s matrix", (long long)rows, (long long)cols,
			    qgraph_type_name(src));
	if (split == QGRAPH_MPI_SPLIT_COLS && cols % QGRAPH_MPI_COL_UNIT)
		return qgm_fail(m, -EINVAL, "scatter: a column split needs columns in 32s, not %lld", (long long)cols);
	if (m->rank == root && !data)
		return qgm_fail(m, -EINVAL, "scatter: no data on the root rank");
	int r = qgraph_mpi_split(split == QGRAPH_MPI_SPLIT_ROWS ? rows : cols, unit, m->size, m->rank, start, count);
	if (r)
		return qgm_fail(m, r, "scatter: %lld %s do not split across %d ranks in units of %lld",
			    (long long)(split == QGRAPH_MPI_SPLIT_ROWS ? rows : cols),
			    split == QGRAPH_MPI_SPLIT_ROWS ? "rows" : "columns", m->size, (long long)unit);
	return 0;
}

/*
 * Collective: ROOT sends each rank its COUNT rows from START of DATA (ROWS
 * rows of ROW bytes) with MPI_Scatterv of a row type; into BUF.
 */
static int scatter_rows(struct qgraph_mpi *m, int root, int64_t unit, int64_t rows, int row, const void *data,
			void *buf, int64_t count)
{
	MPI_Datatype rt;
	int *counts = NULL, *displs = NULL, r = 0;

	if (m->rank == root) {
		counts = calloc((size_t)m->size, sizeof *counts);
		displs = calloc((size_t)m->size, sizeof *displs);
		if (!counts || !displs)
			MPI_Abort(m->comm, ABORT_CODE);	/* the others are in the Scatterv already */
		for (int i = 0; i < m->size; i++) {
			int64_t s0, c0;
			qgraph_mpi_split(rows, unit, m->size, i, &s0, &c0);
			counts[i] = (int)c0;
			displs[i] = (int)s0;
		}
	}
	MPI_Type_contiguous(row, MPI_BYTE, &rt);
	MPI_Type_commit(&rt);
	if (MPI_Scatterv(data, counts, displs, rt, buf, (int)count, rt, root, m->comm) != MPI_SUCCESS)
		r = qgm_fail(m, -EIO, "scatter: MPI_Scatterv failed");
	MPI_Type_free(&rt);
	free(counts);
	free(displs);
	return r;
}

/*
 * Collective: ROOT sends each rank its COUNT columns from START of every
 * one of DATA's ROWS rows (ROW bytes each, a block of BLOCK bytes per 32
 * columns) as one strided vector, with no copy on ROOT but its own share;
 * into BUF, packed.
 */
static int scatter_cols(struct qgraph_mpi *m, int root, int64_t unit, int64_t rows, int64_t cols, int row,
			int block, const void *data, void *buf, int64_t count)
{
	int mine = (int)(count / 32 * block), r = 0;

	if (m->rank != root) {
		MPI_Datatype st;
		MPI_Type_contiguous(mine, MPI_BYTE, &st);
		MPI_Type_commit(&st);
		if (MPI_Recv(buf, (int)rows, st, root, 0, m->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			r = qgm_fail(m, -EIO, "scatter: MPI_Recv failed");
		MPI_Type_free(&st);
		return r;
	}
	MPI_Request *req = calloc((size_t)m->size, sizeof *req);
	MPI_Datatype *vt = calloc((size_t)m->size, sizeof *vt);
	if (!req || !vt)
		MPI_Abort(m->comm, ABORT_CODE);	/* the others wait in MPI_Recv */
	int nreq = 0;
	for (int i = 0; i < m->size; i++) {
		int64_t s0, c0;
		qgraph_mpi_split(cols, unit, m->size, i, &s0, &c0);
		const unsigned char *from = (const unsigned char *)data + s0 / 32 * block;
		if (i == root) {
			for (int64_t j = 0; j < rows; j++)
				memcpy((unsigned char *)buf + j * mine, from + j * row, (size_t)mine);
			continue;
		}
		MPI_Type_vector((int)rows, (int)(c0 / 32 * block), row, MPI_BYTE, &vt[nreq]);
		MPI_Type_commit(&vt[nreq]);
		if (MPI_Isend(from, 1, vt[nreq], i, 0, m->comm, &req[nreq]) != MPI_SUCCESS)
			MPI_Abort(m->comm, ABORT_CODE);
		nreq++;
	}
	if (MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
		r = qgm_fail(m, -EIO, "scatter: MPI_Waitall failed");
	for (int i = 0; i < nreq; i++)
		MPI_Type_free(&vt[i]);
	free(req);
	free(vt);
	return r;
}

QGRAPH_API int qgraph_mpi_weights_scatter(struct qgraph_mpi *m, int root, enum qgraph_mpi_split split, int64_t unit,
					  enum qgraph_type src_type, enum qgraph_type target, int64_t rows,
					  int64_t cols, const void *data, struct qgraph_mpi_weights **out)
{
	int64_t start = 0, count = 0;
	void *buf = NULL;
	struct qgraph_mpi_weights *w = NULL;
	int r;

	if (!m || !out)
		return -EINVAL;
	*out = NULL;
	if (root < 0 || root >= m->size)
		return qgm_fail(m, -EINVAL, "scatter: no rank %d", root);	/* the same on every rank, or nothing works */
	r = scatter_check(m, root, split, unit, src_type, target, rows, cols, data, &start, &count);
	if (unit == 0)
		unit = split == QGRAPH_MPI_SPLIT_ROWS ? QGRAPH_MPI_ROW_UNIT : QGRAPH_MPI_COL_UNIT;
	/* every rank compares its arguments with ROOT's */
	int64_t mine[6] = { split, unit, src_type, target, rows, cols }, roots[6];
	memcpy(roots, mine, sizeof roots);
	MPI_Bcast(roots, 6, MPI_INT64_T, root, m->comm);
	if (!r && memcmp(mine, roots, sizeof mine))
		r = qgm_fail(m, -EINVAL, "scatter: rank %d's arguments differ from rank %d's", m->rank, root);
	if ((r = qgm_agree(m, r, "scatter")))
		return r;

	int row = (int)qgraph_row_size(src_type, cols);
	int64_t scols = split == QGRAPH_MPI_SPLIT_ROWS ? cols : count, srows = split == QGRAPH_MPI_SPLIT_ROWS ? count : rows;
	ssize_t bytes = qgraph_row_size(src_type, scols);
	buf = bytes > 0 && (uint64_t)bytes <= SIZE_MAX / (uint64_t)srows ? malloc((size_t)bytes * (size_t)srows) : NULL;
	w = calloc(1, sizeof *w);
	r = buf && w ? 0 : qgm_fail(m, -ENOMEM, "scatter: no memory for a %lld-row shard", (long long)srows);
	if ((r = qgm_agree(m, r, "scatter")))
		goto out;
	if (split == QGRAPH_MPI_SPLIT_ROWS)
		r = scatter_rows(m, root, unit, rows, row, data, buf, count);
	else
		r = scatter_cols(m, root, unit, rows, cols, row, (int)qgraph_row_size(src_type, 32), data, buf, count);
	if (!r) {
		w->sh = (struct qgraph_mpi_shard){ .split = split, .rows = rows, .cols = cols, .start = start,
						   .count = count };
		w->unit = unit;
		struct qgraph_upload_opts uo = { .size = sizeof uo, .src_type = src_type, .target = target,
						 .rows = srows, .cols = scols, .data = buf };
		r = qgraph_weights_upload(m->s, &uo, &w->sh.handle, &w->sh.stored);
		if (r)
			qgm_fail(m, r, "rank %d: qgraphd at %s: upload of a %lld x %lld shard: %s", m->rank, m->socket,
			     (long long)srows, (long long)scols, qgraph_session_error(m->s));
	}
	int uploaded = !r;
	if ((r = qgm_agree(m, r, "scatter"))) {
		if (uploaded)
			qgraph_weights_free(m->s, w->sh.handle);
		goto out;
	}
	*out = w;
	w = NULL;	/* transferred */
out:
	free(buf);
	free(w);
	return r;
}

QGRAPH_API void qgraph_mpi_weights_free(struct qgraph_mpi *m, struct qgraph_mpi_weights *w)
{
	if (!w)
		return;
	if (m)
		qgraph_weights_free(m->s, w->sh.handle);
	free(w);
}

QGRAPH_API int qgraph_mpi_weights_shard(const struct qgraph_mpi_weights *w, struct qgraph_mpi_shard *out)
{
	if (!w || !out)
		return -EINVAL;
	*out = w->sh;
	return 0;
}
