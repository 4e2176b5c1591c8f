/*
 * requests.h - what a session may ask for (requests.c): its decoded
 * request served by the handler for its kind.
 */
#ifndef QGD_REQUESTS_H
#define QGD_REQUESTS_H

#include <stdbool.h>
#include <stddef.h>

#include "qgraph.pb-c.h"

struct qgd_session;

/*
 * S's record S->rec (N bytes, popped from its submit ring) becomes its
 * current request S->req, decoded, unless it is refused (answered: too
 * large for max-message, or no request).  True if S has a request to
 * serve now.
 */
bool qgd_request_take(struct qgd_session *s, size_t n);
/*
 * Serve S's current request S->req by the handler for its kind (while a
 * graph of S runs, only a Cancel is served): answered, or handed to the
 * executor, and S->req cleared; or left as it is while it waits for its
 * events.  requests.c alone sets and clears S->req.
 */
void qgd_request_serve(struct qgd_session *s);
/*
 * True while S's request waits for events that have not been recorded and
 * its time is not up (nor the daemon stopping): the loop neither serves it
 * nor counts it as work until then, and sleeps no later than
 * S->wait_until_ns (qgd_exec_sleep_ms).  Reads the clock only for such a
 * request.
 */
bool qgd_request_waiting(struct qgd_session *s);
/* Free everything S holds: its graphs, weight handles, upload and models being loaded. */
void qgd_request_release_all(struct qgd_session *s);

#endif /* QGD_REQUESTS_H */
