/*
 * roster.h - the sessions the daemon holds, newest first: connections in
 * their handshake, served sessions, and dropped ones not freed yet.
 *
 * server.c adds a session when it accepts its connection and takes it off
 * once it is dead and nothing runs for it; every file walks the roster,
 * on the loop's thread, with qgd_roster_each (or first and next, where
 * the walk takes sessions off).  The links are this file's alone.
 */
#ifndef QGD_ROSTER_H
#define QGD_ROSTER_H

#include <stdint.h>

struct qgd_server;
struct qgd_session;

/* A roster: struct qgd_server holds one, roster.c's own. */
struct qgd_roster {
	struct qgd_session *first;
	uint32_t n;
};

/* Put S, not on the roster, first on SRV's. */
void qgd_roster_add(struct qgd_server *srv, struct qgd_session *s);
/* Take S off SRV's roster (S stays valid: the caller frees it). */
void qgd_roster_remove(struct qgd_server *srv, struct qgd_session *s);
/* The newest session, and the one after S: NULL after the last. */
struct qgd_session *qgd_roster_first(const struct qgd_server *srv);
struct qgd_session *qgd_roster_next(const struct qgd_session *s);
/* Sessions on the roster. */
uint32_t qgd_roster_count(const struct qgd_server *srv);

/* Every session, newest first; the body must not take VAR off the roster. */
#define qgd_roster_each(srv, var) \
	for (struct qgd_session *var = qgd_roster_first(srv); var; var = qgd_roster_next(var))

#endif /* QGD_ROSTER_H */
