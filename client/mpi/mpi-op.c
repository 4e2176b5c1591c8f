/*
 * mpi-op.c - libqgraph-mpi's ops (qgraph-mpi.h): a linear layer or a
 * feed-forward block as this rank's shard graph, registered with its
 * daemon, and the collective (allgather or allreduce) that joins the
 * ranks' pieces.  A run has no qgm_agree() exit: a daemon that fails
 * ends the job (die()).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi-impl.h"

#define MAX_CHUNKS 64		/* micro-batches of one op: each is a registered graph */

enum op_kind { OP_GATHER, OP_REDUCE };

struct chunk {
	uint64_t graph;		/* registered in this rank's daemon */
	int64_t t0, nt;		/* its tokens */
};

struct qgraph_mpi_op {
	struct qgraph_mpi *m;
	enum op_kind kind;
	int64_t n, width;	/* Y is N rows of WIDTH floats at Y_OFF */
	int64_t y_off;
	int64_t scratch;	/* arena block this op took, or -1 */
	struct chunk chunks[MAX_CHUNKS];
	int n_chunks;
	/* OP_GATHER: this rank's piece (at SCRATCH, or in place in Y) and where every rank's goes */
	int in_place;
	int send_count;
	int *counts, *displs;
	MPI_Datatype send_type, recv_type;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * This rank's daemon failed while an op ran: the other ranks are in, or on
 * their way to, a collective this rank will not join.  Say what died and end
 * the job.
 */
__attribute__((noreturn))
static void die(struct qgraph_mpi *m, int r)
{
	if (r == -ENOTCONN)
		fprintf(stderr, "rank %d: qgraphd at %s went away: %s\n", m->rank, m->socket,
			qgraph_session_error(m->s));
	else if (r == -ETIMEDOUT)
		fprintf(stderr, "rank %d: qgraphd at %s: no completion in %d ms\n", m->rank, m->socket, m->timeout_ms);
	else
		fprintf(stderr, "rank %d: qgraphd at %s: a graph failed (%s): %s\n", m->rank, m->socket, strerror(-r),
			qgraph_session_error(m->s));
	fflush(stderr);
	MPI_Abort(m->comm, ABORT_CODE);
	abort();	/* MPI_Abort does not return; should it, end this rank at least */
}

/* Register G with this rank's daemon: 0 and *HANDLE, or -errno with the reason in M's error.  Frees G. */
static int register_graph(struct qgraph_mpi *m, struct qgraph_graph *g, uint64_t *handle)
{
	struct qgraph_result res;
	uint64_t id;
	int r = qgraph_submit(m->s, g, QGRAPH_SUBMIT_KEEP | QGRAPH_SUBMIT_BLOCK, &id);

	if (!r)
		r = qgraph_wait(m->s, id, m->timeout_ms, &res);
	if (!r)
		r = res.status;
	if (r)
		qgm_fail(m, r, "rank %d: qgraphd at %s: a shard's graph: %s", m->rank, m->socket, qgraph_session_error(m->s));
	else
		*handle = res.handle;
	qgraph_graph_free(g);
	return r;
}

static struct qgraph_mpi_op *op_new(struct qgraph_mpi *m, enum op_kind kind, int64_t n, int64_t width, int64_t y_off)
{
	struct qgraph_mpi_op *op = calloc(1, sizeof *op);

	if (!op)
		return NULL;
	*op = (struct qgraph_mpi_op){ .m = m, .kind = kind, .n = n, .width = width, .y_off = y_off, .scratch = -1,
				      .send_type = MPI_DATATYPE_NULL, .recv_type = MPI_DATATYPE_NULL };
	return op;
}

QGRAPH_API void qgraph_mpi_op_free(struct qgraph_mpi_op *op)
{
	if (!op)
		return;
	for (int i = 0; i < op->n_chunks; i++)
		qgraph_graph_unregister(op->m->s, op->chunks[i].graph);
	if (op->scratch >= 0)
		qgraph_arena_free(op->m->s, op->scratch);
	if (op->send_type != MPI_DATATYPE_NULL)
		MPI_Type_free(&op->send_type);
	if (op->recv_type != MPI_DATATYPE_NULL)
		MPI_Type_free(&op->recv_type);
	free(op->counts);
	free(op->displs);
	free(op);
}

/* Do [A, A + AN) and [B, B + BN) overlap? */
static int overlap(int64_t a, int64_t an, int64_t b, int64_t bn)
{
	return a < b + bn && b < a + an;
}

/* The arena's bytes, and whether N x K floats at OFF lie in it, 64-byte aligned: 0 or -EINVAL. */
static int arena_span(struct qgraph_mpi *m, int64_t off, int64_t n, int64_t k, const char *what)
{
	size_t size = 0;

	qgraph_arena(m->s, &size);
	if (off < 0 || off % 64 || n < 1 || k < 1 || n > (int64_t)(size / 4) / k || off > (int64_t)size - n * k * 4)
		return qgm_fail(m, -EINVAL, "%s: %lld x %lld floats at offset %lld do not fit the %zu-byte arena "
			    "(64-byte aligned)", what, (long long)n, (long long)k, (long long)off, size);
	return 0;
}

/* The row split's gather: every rank's rows of Y, and the datatypes that put them there. */
static int gather_setup(struct qgraph_mpi_op *op, const struct qgraph_mpi_weights *w)
{
	struct qgraph_mpi *m = op->m;
	int64_t n = op->n, rows = w->sh.rows;
	int aligned = 1;

	op->counts = calloc((size_t)m->size, sizeof *op->counts);
	op->displs = calloc((size_t)m->size, sizeof *op->displs);
	if (!op->counts || !op->displs)
		return qgm_fail(m, -ENOMEM, "linear: no memory");
	for (int i = 0; i < m->size; i++) {
		int64_t s0, c0;
		qgraph_mpi_split(rows, w->unit, m->size, i, &s0, &c0);
		op->counts[i] = (int)c0;
		op->displs[i] = (int)s0;
		aligned &= s0 * 4 % 64 == 0;
	}
	op->send_count = (int)w->sh.count;
	/* one token: every rank's rows are contiguous in Y; where they are aligned the graph writes them there */
	op->in_place = n == 1 && aligned;
	if (n == 1)
		return 0;
	/*
	 * Several tokens: rank r's piece is N x count_r, Y's columns [start_r,
	 * start_r + count_r) of N rows.  Both sides go column by column: one
	 * column is N floats a row apart, and a type of extent one float lets
	 * count_r of them follow each other.
	 */
	MPI_Datatype col;
	MPI_Type_vector((int)n, 1, (int)rows, MPI_FLOAT, &col);
	MPI_Type_create_resized(col, 0, sizeof(float), &op->recv_type);
	MPI_Type_free(&col);
	MPI_Type_vector((int)n, 1, (int)w->sh.count, MPI_FLOAT, &col);
	MPI_Type_create_resized(col, 0, sizeof(float), &op->send_type);
	MPI_Type_free(&col);
	MPI_Type_commit(&op->recv_type);
	MPI_Type_commit(&op->send_type);
	return 0;
}

QGRAPH_API int qgraph_mpi_linear_new(struct qgraph_mpi *m, struct qgraph_mpi_weights *w, int64_t n, int64_t x_off,
				     int64_t y_off, struct qgraph_mpi_op **out)
{
	if (!m || !w || !out)
		return -EINVAL;
	*out = NULL;
	const struct qgraph_mpi_shard *sh = &w->sh;
	int rowsplit = sh->split == QGRAPH_MPI_SPLIT_ROWS;
	struct qgraph_mpi_op *op = op_new(m, rowsplit ? OP_GATHER : OP_REDUCE, n, sh->rows, y_off);
	int r = op ? 0 : qgm_fail(m, -ENOMEM, "linear: no memory");

	if (!r && !(r = arena_span(m, x_off, n, sh->cols, "linear: X")) && !(r = arena_span(m, y_off, n, sh->rows, "linear: Y")) &&
	    overlap(x_off, n * sh->cols * 4, y_off, n * sh->rows * 4))
		r = qgm_fail(m, -EINVAL, "linear: X and Y overlap");
	if (!r && n * sh->rows > INT_MAX)
		r = qgm_fail(m, -EINVAL, "linear: %lld outputs are more than one collective takes", (long long)(n * sh->rows));
	if (!r && rowsplit)
		r = gather_setup(op, w);
	int64_t out_off = y_off;
	if (!r && rowsplit) {
		if (op->in_place) {
			out_off = y_off + sh->start * 4;
		} else {
			out_off = op->scratch = qgraph_arena_alloc(m->s, (size_t)(n * sh->count * 4));
			if (out_off < 0)
				r = qgm_fail(m, -ENOMEM, "linear: no arena room for %lld x %lld floats", (long long)n,
					 (long long)sh->count);
		}
	}
	if (!r) {
		struct qgraph_graph *g = qgraph_graph_new();
		int64_t xne[2] = { sh->cols, n };
		int x = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, x_off);
		int wt = rowsplit ? qgraph_graph_weights(g, sh->handle, sh->stored, sh->count, sh->cols)
				  : qgraph_graph_weights(g, sh->handle, sh->stored, sh->rows, sh->count);
		if (!rowsplit) {
			/* this rank's columns of every token: a view, read in place */
			int64_t vne[2] = { sh->count, n };
			uint64_t vnb[1] = { (uint64_t)sh->cols * 4 };
			x = qgraph_graph_view(g, x, 2, vne, vnb, (uint64_t)sh->start * 4);
		}
		int y = qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wt, x, 0);
		if (!g || qgraph_graph_output(g, y, out_off) < 0) {
			qgraph_graph_free(g);
			r = qgm_fail(m, -EINVAL, "linear: the shard's graph does not build");
		} else {
			r = register_graph(m, g, &op->chunks[0].graph);
			if (!r) {
				op->chunks[0] = (struct chunk){ .graph = op->chunks[0].graph, .t0 = 0, .nt = n };
				op->n_chunks = 1;
			}
		}
	}
	if ((r = qgm_agree(m, r, "linear"))) {
		qgraph_mpi_op_free(op);
		return r;
	}
	*out = op;
	return 0;
}

QGRAPH_API int qgraph_mpi_ffn_new(struct qgraph_mpi *m, struct qgraph_mpi_weights *gate,
				  struct qgraph_mpi_weights *up, struct qgraph_mpi_weights *down,
				  const struct qgraph_mpi_ffn_opts *o, struct qgraph_mpi_op **out)
{
	if (!m || !gate || !up || !down || !o || !out)
		return -EINVAL;
	*out = NULL;
	const struct qgraph_mpi_shard *g = &gate->sh, *u = &up->sh, *d = &down->sh;
	int64_t dim = d->rows, hidden = d->cols, n = o->n;
	struct qgraph_mpi_op *op = op_new(m, OP_REDUCE, n, dim, o->y_off);
	int r = op ? 0 : qgm_fail(m, -ENOMEM, "ffn: no memory");

	if (!r && (g->split != QGRAPH_MPI_SPLIT_ROWS || u->split != QGRAPH_MPI_SPLIT_ROWS ||
		   d->split != QGRAPH_MPI_SPLIT_COLS))
		r = qgm_fail(m, -EINVAL, "ffn: gate and up split by rows, down by columns");
	if (!r && (g->rows != hidden || u->rows != hidden || g->cols != dim || u->cols != dim))
		r = qgm_fail(m, -EINVAL, "ffn: gate and up are %lld x %lld, down %lld x %lld", (long long)hidden,
			 (long long)dim, (long long)dim, (long long)hidden);
	if (!r && (g->start != d->start || u->start != d->start || g->count != d->count || u->count != d->count))
		r = qgm_fail(m, -EINVAL, "ffn: the hidden ranges of gate, up and down differ (scatter them in one unit)");
	if (!r && (o->flags & ~(QGRAPH_MPI_FFN_NORM | QGRAPH_MPI_FFN_RESIDUAL) || o->micro < 0 ||
		   ((o->flags & QGRAPH_MPI_FFN_NORM) && !(o->norm_eps >= 0.0f))))
		r = qgm_fail(m, -EINVAL, "ffn: bad flags, micro-batch or eps");
	if (!r && !(r = arena_span(m, o->x_off, n, dim, "ffn: X")) && !(r = arena_span(m, o->y_off, n, dim, "ffn: Y")) &&
	    overlap(o->x_off, n * dim * 4, o->y_off, n * dim * 4))
		r = qgm_fail(m, -EINVAL, "ffn: X and Y overlap");
	if (!r && n * dim > INT_MAX)
		r = qgm_fail(m, -EINVAL, "ffn: %lld outputs are more than one collective takes", (long long)(n * dim));
	int64_t micro = o->micro && o->micro < n ? (o->micro + 3) / 4 * 4 : n;
	if (!r && (n + micro - 1) / micro > MAX_CHUNKS)
		r = qgm_fail(m, -EINVAL, "ffn: more than %d micro-batches", MAX_CHUNKS);
	for (int64_t t0 = 0; !r && t0 < n; t0 += micro) {
		int64_t nt = n - t0 < micro ? n - t0 : micro;
		struct qgraph_graph *gr = qgraph_graph_new();
		int64_t xne[2] = { dim, nt };
		int x = qgraph_graph_input(gr, QGRAPH_TYPE_F32, 2, xne, o->x_off + t0 * dim * 4);
		int a = o->flags & QGRAPH_MPI_FFN_NORM ? qgraph_graph_op(gr, QGRAPH_OP_RMS_NORM, x, -1, o->norm_eps) : x;
		int wg = qgraph_graph_weights(gr, g->handle, g->stored, g->count, dim);
		int wu = qgraph_graph_weights(gr, u->handle, u->stored, u->count, dim);
		int wd = qgraph_graph_weights(gr, d->handle, d->stored, dim, d->count);
		int gt = qgraph_graph_op(gr, QGRAPH_OP_SILU, qgraph_graph_op(gr, QGRAPH_OP_MUL_MAT, wg, a, 0), -1, 0);
		int h = qgraph_graph_op(gr, QGRAPH_OP_MUL, gt, qgraph_graph_op(gr, QGRAPH_OP_MUL_MAT, wu, a, 0), 0);
		int y = qgraph_graph_op(gr, QGRAPH_OP_MUL_MAT, wd, h, 0);
		/* the residual joins the sum once: on rank 0, before the allreduce */
		if ((o->flags & QGRAPH_MPI_FFN_RESIDUAL) && m->rank == 0)
			y = qgraph_graph_op(gr, QGRAPH_OP_ADD, x, y, 0);
		if (!gr || qgraph_graph_output(gr, y, o->y_off + t0 * dim * 4) < 0) {
			qgraph_graph_free(gr);
			r = qgm_fail(m, -EINVAL, "ffn: the shard's graph does not build");
			break;
		}
		struct chunk *c = &op->chunks[op->n_chunks];
		if (!(r = register_graph(m, gr, &c->graph))) {
			c->t0 = t0;
			c->nt = nt;
			op->n_chunks++;
		}
	}
	if ((r = qgm_agree(m, r, "ffn"))) {
		qgraph_mpi_op_free(op);
		return r;
	}
	*out = op;
	return 0;
}

/*
 * Wait for the collectives REQ[0..NREQ) to finish.  A rank waits here for
 * its slowest peer, often for as long as that peer's daemon computes; on a
 * node with no CPU to spare a spinning wait takes the CPU that daemon (or
 * this node's) needs.  So: spin for NAP_AFTER_NS, then nap NAP_NS between
 * looks (each look moves Open MPI's progress on).
 */
#define NAP_AFTER_NS 50000u
#define NAP_NS 20000
static void wait_collectives(struct qgraph_mpi *m, MPI_Request *req, int nreq)
{
	uint64_t start = now_ns();
	int done = 0;

	for (;;) {
		if (MPI_Testall(nreq, req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
			MPI_Abort(m->comm, ABORT_CODE);
		if (done)
			return;
		if (now_ns() - start > NAP_AFTER_NS)
			nanosleep(&(struct timespec){ .tv_nsec = NAP_NS }, NULL);
	}
}

/*
 * Wait for request ID, this rank's daemon computing chunk I, while NREQ
 * earlier chunks' collectives REQ are in flight: look at both in turn, so
 * that MPI moves them on (Open MPI progresses a non-blocking collective only
 * inside MPI calls) until they are done, then sleep on the completion.
 * Returns the daemon's compute time; a failure ends the job.
 */
static uint64_t wait_chunk(struct qgraph_mpi *m, uint64_t id, MPI_Request *req, int nreq)
{
	struct qgraph_result res;
	uint64_t deadline = now_ns() + (uint64_t)m->timeout_ms * 1000000u;
	int r, done = nreq == 0;

	while (!done) {
		r = qgraph_wait(m->s, id, 0, &res);
		if (r != -ETIMEDOUT)
			goto got;
		if (MPI_Testall(nreq, req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
			MPI_Abort(m->comm, ABORT_CODE);
		if (now_ns() > deadline)
			die(m, -ETIMEDOUT);
		sched_yield();
	}
	r = qgraph_wait(m->s, id, m->timeout_ms, &res);
got:
	if (!r)
		r = res.status;
	if (r)
		die(m, r);
	return res.compute_ns;
}

QGRAPH_API int qgraph_mpi_op_run(struct qgraph_mpi_op *op, struct qgraph_mpi_times *t)
{
	if (!op)
		return -EINVAL;
	struct qgraph_mpi *m = op->m;
	unsigned char *arena = qgraph_arena(m->s, NULL);
	MPI_Request req[MAX_CHUNKS];
	uint64_t ids[MAX_CHUNKS], t0 = now_ns(), compute = 0, coll = 0, daemon = 0;
	int nreq = 0, r;

	/* every micro-batch goes to the daemon at once: it runs them back to back */
	for (int i = 0; i < op->n_chunks; i++)
		if ((r = qgraph_run(m->s, op->chunks[i].graph, NULL, QGRAPH_SUBMIT_BLOCK, &ids[i])))
			die(m, r);
	for (int i = 0; i < op->n_chunks; i++) {
		const struct chunk *c = &op->chunks[i];
		uint64_t a = now_ns();
		daemon += wait_chunk(m, ids[i], req, nreq);
		uint64_t b = now_ns();
		compute += b - a;
		float *y = (float *)(arena + op->y_off) + c->t0 * op->width;
		int count = (int)(c->nt * op->width);
		if (op->kind == OP_GATHER) {
			const void *send = op->in_place ? MPI_IN_PLACE : (const void *)(arena + op->scratch);
			MPI_Datatype st = op->n == 1 ? MPI_FLOAT : op->send_type, rt = op->n == 1 ? MPI_FLOAT : op->recv_type;
			r = MPI_Iallgatherv(send, op->send_count, st, y, op->counts, op->displs, rt, m->comm, &req[nreq++]);
		} else {
			r = MPI_Iallreduce(MPI_IN_PLACE, y, count, MPI_FLOAT, MPI_SUM, m->comm, &req[nreq++]);
		}
		if (r != MPI_SUCCESS)
			MPI_Abort(m->comm, ABORT_CODE);
		coll += now_ns() - b;
	}
	uint64_t a = now_ns();
	wait_collectives(m, req, nreq);
	coll += now_ns() - a;
	if (t) {
		t->compute_ns += compute;
		t->collective_ns += coll;
		t->daemon_ns += daemon;
		t->total_ns += now_ns() - t0;
		t->runs++;
	}
	return 0;
}

