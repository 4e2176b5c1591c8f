/*
 * submit.h - what qgraph-submit's command files share.
 */
#ifndef QG_SUBMIT_H
#define QG_SUBMIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qgraph.h"
#include "stamp.h"

/* Exit status: 0 success, and these. */
#define EXIT_WRONG 1	/* the work failed or its result was wrong */
#define EXIT_USAGE 2	/* bad usage */
#define EXIT_NODAEMON 3	/* no daemon to talk to */

/* submit-session.c: the global options, and a session opened with them */
extern const char *socket_path;	/* --socket, or NULL for the default */
extern int quiet;		/* --quiet */

/* Seconds on CLOCK_MONOTONIC, by the project's one clock. */
static inline double now_s(void)
{
	return (double)qg_stamp_ns() * 1e-9;
}
/* A session named NAME with an arena of ARENA bytes, or the reason on stderr and exit. */
struct qgraph_session *connect_or_die(const char *name, uint64_t arena);

/* submit-stats.c: at most N bytes of S as a JSON string (quotes and backslashes escaped, control characters as \u00XX). */
void json_string(FILE *f, const char *s, size_t n);

/* submit-util.c: at exit, flush standard output; when that or an earlier write failed
 * (a full disk, a closed descriptor), say so on stderr and exit EXIT_WRONG whatever
 * the command returned. */
void check_stdout_at_exit(void);

/* submit-util.c: X[0..N) random in [-SCALE, SCALE), the same for the same SEED on every machine. */
void fill_random(float *x, size_t n, unsigned long long seed, float scale);
/* qsort's comparison of two doubles: -1, 0 or 1 as *A is less than, equal to or greater than *B. */
int cmp_double(const void *a, const void *b);
/* Largest |a - b| relative to the largest |b|. */
double rel_err(const float *a, const float *b, size_t n);
/*
 * The in-process reference of one mlp layer on N tokens of D values (hidden
 * H): x += W2 (silu(W3 n) * (W1 n)), n = rms_norm(x); WQ[0..2] are W1, W3,
 * W2 quantized as T[0..2].
 */
void mlp_ref_layer(float *x, long d, long h, long n, void *const wq[3], enum qgraph_type t[3]);

/* submit-mpi.c (where MPI is built): mlp --mpi and bench --mpi, COMMAND the one asked; an exit status. */
int cmd_mpi(const char *command, int argc, char **argv);

/* submit-stats.c: the daemon's stats (text, --json, --prometheus); an exit status. */
int cmd_stats(int argc, char **argv);

/* submit-models.c: the GGUF commands, each with --help; an exit status. */
int cmd_inspect(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_unload(int argc, char **argv);

#endif /* QG_SUBMIT_H */
