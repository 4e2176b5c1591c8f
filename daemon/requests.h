/*
 * requests.h - what a session may ask for (requests.c): its decoded
 * request served by the handler for its kind.
 */
#ifndef QGD_REQUESTS_H
#define QGD_REQUESTS_H

#include <stddef.h>

#include "qgraph.pb-c.h"

struct qgd_session;

/* Serve S's decoded request S->req: answered (S->req cleared), handed to the executor, or left waiting for its events. */
void qgd_request_serve(struct qgd_session *s);
/*
 * True while S's request waits for events that have not been recorded and
 * its time is not up (nor the daemon stopping): the loop neither serves it
 * nor counts it as work until then, and sleeps no later than
 * S->wait_until_ns (qgd_exec_sleep_ms).  Reads the clock only for such a
 * request.
 */
int qgd_request_waiting(struct qgd_session *s);
/* Free everything S holds: its graphs, weight handles, upload and models being loaded. */
void qgd_session_release_all(struct qgd_session *s);

#endif /* QGD_REQUESTS_H */
