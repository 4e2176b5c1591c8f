/*
 * exec.h - the executor (exec.c): running sessions' graphs, small ones
 * on the loop's thread and the rest on the executor thread, and
 * answering them.
 */
#ifndef QGD_EXEC_H
#define QGD_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct qg_backend;
struct qgd_event_ref;
struct qgd_graph;
struct qgd_server;
struct qgd_session;

/*
 * Start the CPU backends (the pool on --cpus, and one thread for small
 * graphs) and the executor thread, watched by SRV's loop.  0 or -errno.
 */
int qgd_exec_init(struct qgd_server *srv);
/* Stop the executor thread (after the jobs queued) and free the backends.  SRV->exec may be NULL. */
void qgd_exec_fini(struct qgd_server *srv);

/*
 * Run G (graphs.c built and placed it) for request RID of S: on the loop's
 * thread when it is small, else on the executor (S->job is set until it
 * is answered, and S serves nothing else meanwhile but a Cancel).
 * Answers, now or later, recording the N_REC events REC (copied when the
 * run is handed over) with the outcome; consumes G unless REGISTERED.
 * T_DECODED and T_PLACED: when the request was decoded and its graph
 * placed; TIMEOUT_MS its time limit (0: graph-timeout).
 */
void qgd_exec_run(struct qgd_session *s, uint64_t rid, struct qgd_graph *g, bool registered, uint64_t t_decoded,
		  uint64_t t_placed, uint32_t timeout_ms, const struct qgd_event_ref *rec, size_t n_rec);
/* The backends graphs are planned on: SMALL, the loop's thread alone; LARGE, the pool the executor drives. */
void qgd_exec_backends(const struct qgd_server *srv, struct qg_backend **small, struct qg_backend **large);

/*
 * The loop thread is about to block in its event loop (ASLEEP), or is back:
 * the executor wakes it through an eventfd only while it is blocked.  Set
 * before the fence and the last look at qgd_exec_reap that precede the
 * block.
 */
void qgd_exec_loop_asleep(struct qgd_server *srv, bool asleep);
/*
 * Answer the jobs the executor has finished (loop thread; cheap when there
 * are none, so the loop calls it every pass).  Returns how many.
 */
int qgd_exec_reap(struct qgd_server *srv);
/* Jobs handed to the executor and not answered yet. */
unsigned qgd_exec_in_flight(const struct qgd_server *srv);
/*
 * How long the loop may sleep, at most LONGEST ms: 0 when a graph on the
 * executor is expected to end within a margin and the loop has a CPU of
 * its own to poll for it (see exec.c), else until shortly before then,
 * and never past the deadline of a request waiting for events.
 */
int qgd_exec_sleep_ms(const struct qgd_server *srv, int longest);
/*
 * Ask S's running graph to stop at its next node boundary, if it is request
 * TARGET (0: whatever runs); BY points at the Cancel's id, or is NULL when
 * the daemon stops it itself (stopping, or the session is gone), which
 * its answer then says.  0, or -ENOENT.
 */
int qgd_exec_cancel(struct qgd_session *s, uint64_t target, const uint64_t *by);

/* What the pool's memory is ("none" without one), for stats. */
const char *qgd_exec_pool_kind(const struct qgd_server *srv);
/* The pool's compute threads, the executor's included (1 without a pool). */
int qgd_exec_threads(const struct qgd_server *srv);

#endif /* QGD_EXEC_H */
