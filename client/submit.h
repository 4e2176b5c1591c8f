/*
 * submit.h - what qgraph-submit's command files share.
 */
#ifndef QG_SUBMIT_H
#define QG_SUBMIT_H

#include <stdint.h>

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

/* submit-stats.c: the daemon's stats (text, --json, --prometheus); an exit status. */
int cmd_stats(int argc, char **argv);

/* submit-models.c: the GGUF commands, each with --help; an exit status. */
int cmd_inspect(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_unload(int argc, char **argv);

#endif /* QG_SUBMIT_H */
