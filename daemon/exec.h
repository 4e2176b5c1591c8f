/*
 * exec.h - running graphs for sessions: building them from the wire,
 * registering them, placing their intermediate tensors, computing them and
 * answering.
 */
#ifndef QGD_EXEC_H
#define QGD_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

struct qgd_server;
struct qgd_session;

/*
 * Start the CPU backends (the pool on --cpus, and one thread for small
 * graphs) and the executor thread, watched by SRV's loop.  0 or -errno.
 */
int qgd_exec_init(struct qgd_server *srv);
/* Stop the executor thread (after the jobs queued) and free the backends.  SRV->exec may be NULL. */
void qgd_exec_fini(struct qgd_server *srv);

/* Build, check and run SG (registering it if SG->keep); answers the request. */
void qgd_exec_submit(struct qgd_session *s, uint64_t rid, const Qgraph__SubmitGraph *sg,
		     const struct qg_wire_env *env);
/*
 * Ask for the first lines of registered graph HANDLE's tensors (if S has
 * it, and it is small), so that they travel from the client's cache while
 * its request is checked: a hint, nothing more.
 */
void qgd_exec_prefetch(const struct qgd_session *s, uint64_t handle);
/* Run a registered graph again with the inputs now in the arena; answers. */
void qgd_exec_run_registered(struct qgd_session *s, uint64_t rid, const Qgraph__RunGraph *run);
/* Forget a registered graph; answers. */
void qgd_exec_free_graph(struct qgd_session *s, uint64_t rid, uint64_t handle);
/* True if a registered graph of S reads the weights at DATA. */
int qgd_exec_weights_in_use(struct qgd_session *s, const void *data);
/* Free everything S registered. */
void qgd_exec_release_session(struct qgd_session *s);

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

/* Graphs registered by every session (stats). */
uint32_t qgd_exec_plans(const struct qgd_server *srv);
/* What the pool's memory is ("none" without one), for stats. */
const char *qgd_exec_pool_kind(const struct qgd_server *srv);
/* The pool's compute threads, the executor's included (1 without a pool). */
int qgd_exec_threads(const struct qgd_server *srv);

#endif /* QGD_EXEC_H */
