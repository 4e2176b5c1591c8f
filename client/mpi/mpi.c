/*
 * mpi.c - libqgraph-mpi: tensor-parallel graphs over MPI (qgraph-mpi.h).
 *
 * Built on libqgraph's public interface and MPI alone.  A set-up call
 * (connect, scatter, op creation) ends with qgm_agree(): every rank learns
 * whether any rank failed, so that all return the same outcome and none
 * is left in a later collective alone.  An op's run has no such exit: a
 * rank whose daemon fails calls die(), which ends the job (MPI_Abort).
 *
 * This file is the communicator and each rank's connection; shards and
 * ops have a file each (mpi-impl.h lists them).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi-impl.h"

#define DEFAULT_TIMEOUT_MS 60000

/* Set M's error text from FMT; returns ERR. */
__attribute__((format(printf, 3, 4)))
int qgm_fail(struct qgraph_mpi *m, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->error, sizeof m->error, fmt, ap);
	va_end(ap);
	return err;
}

/* Collective: every rank learns whether a step failed anywhere (the contract is in mpi-impl.h). */
int qgm_agree(struct qgraph_mpi *m, int r, const char *what)
{
	struct { int value, rank; } mine = { r < 0 ? -1 : 0, m->rank }, first;

	if (MPI_Allreduce(&mine, &first, 1, MPI_2INT, MPI_MINLOC, m->comm) != MPI_SUCCESS)
		return qgm_fail(m, -EIO, "%s: MPI_Allreduce failed", what);
	if (r < 0)
		return r;
	if (first.value < 0)
		return qgm_fail(m, -ECONNABORTED, "%s: rank %d failed", what, first.rank);
	return 0;
}

/* ------------------------------------------------------------ connection */

/* PATTERN with its one "%d" made RANK and "%%" a '%', into OUT; -EINVAL for any other '%' or a second %d. */
static int socket_path(const char *pattern, int rank, char *out, size_t len)
{
	size_t o = 0;
	int ds = 0;

	for (const char *p = pattern; *p; p++) {
		char buf[16];
		const char *add = buf;
		if (*p != '%') {
			buf[0] = *p;
			buf[1] = 0;
		} else if (p[1] == '%') {
			strcpy(buf, "%");
			p++;
		} else if (p[1] == 'd' && !ds++) {
			snprintf(buf, sizeof buf, "%d", rank);
			p++;
		} else {
			return -EINVAL;
		}
		size_t k = strlen(add);
		if (o + k >= len)
			return -ENAMETOOLONG;
		memcpy(out + o, add, k);
		o += k;
	}
	out[o] = 0;
	return 0;
}

QGRAPH_API int qgraph_mpi_connect(const struct qgraph_mpi_opts *opts, struct qgraph_mpi **out, char *err,
				  size_t errlen)
{
	static const struct qgraph_mpi_opts none;
	const struct qgraph_mpi_opts *o = opts ? opts : &none;
	int inited = 0, r;
	char name[64];

	if (err && errlen)
		err[0] = 0;
	if (!out || MPI_Initialized(&inited) != MPI_SUCCESS || !inited) {
		if (err && errlen)
			snprintf(err, errlen, "qgraph_mpi_connect: %s", out ? "MPI is not initialized" : "no OUT");
		return -EINVAL;
	}
	*out = NULL;
	struct qgraph_mpi *m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;	/* no collective yet: a rank out of memory takes the job down at the next one */
	MPI_Comm comm = o->comm == (MPI_Comm)0 || o->comm == MPI_COMM_NULL ? MPI_COMM_WORLD : o->comm;
	if (MPI_Comm_dup(comm, &m->comm) != MPI_SUCCESS) {
		free(m);
		return -EIO;
	}
	MPI_Comm_rank(m->comm, &m->rank);
	MPI_Comm_size(m->comm, &m->size);
	m->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;

	struct qgraph_connect_opts co = { .arena_bytes = o->arena_bytes };
	const char *env = getenv("QGRAPH_SOCKET");
	r = 0;
	if (o->socket) {
		r = socket_path(o->socket, m->rank, m->socket, sizeof m->socket);
		if (r)
			qgm_fail(m, r, "socket pattern \"%s\": one %%d (the rank) and %%%% only, and short", o->socket);
		co.socket = m->socket;
	} else {
		snprintf(m->socket, sizeof m->socket, "%s", env && *env ? env : "(its default socket)");
	}
	if (o->name)
		snprintf(name, sizeof name, "%s", o->name);
	else
		snprintf(name, sizeof name, "qgraph-mpi rank %d", m->rank);
	co.name = name;
	if (!r) {
		char why[400];
		r = qgraph_connect(&co, &m->s, why, sizeof why);
		if (r)
			qgm_fail(m, r, "rank %d: qgraphd at %s: %s", m->rank, m->socket, why);
	}
	r = qgm_agree(m, r, "connect");
	if (r) {
		if (err && errlen)
			snprintf(err, errlen, "%s", m->error);
		qgraph_mpi_close(m);
		return r;
	}
	*out = m;
	return 0;
}

QGRAPH_API void qgraph_mpi_close(struct qgraph_mpi *m)
{
	if (!m)
		return;
	qgraph_session_close(m->s);
	MPI_Comm_free(&m->comm);
	free(m);
}

QGRAPH_API struct qgraph_session *qgraph_mpi_session(struct qgraph_mpi *m)
{
	return m ? m->s : NULL;
}

QGRAPH_API int qgraph_mpi_rank(const struct qgraph_mpi *m)
{
	return m ? m->rank : -EINVAL;
}

QGRAPH_API int qgraph_mpi_size(const struct qgraph_mpi *m)
{
	return m ? m->size : -EINVAL;
}

QGRAPH_API const char *qgraph_mpi_socket(const struct qgraph_mpi *m)
{
	return m ? m->socket : "";
}

QGRAPH_API const char *qgraph_mpi_error(const struct qgraph_mpi *m)
{
	return m ? m->error : "";
}
