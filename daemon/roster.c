/*
 * roster.c - the sessions the daemon holds (see roster.h): a doubly
 * linked list through each session's roster links, so taking one off
 * costs the same wherever it is.
 */
#include "config.h"

#include "roster.h"
#include "server.h"
#include "session.h"

void qgd_roster_add(struct qgd_server *srv, struct qgd_session *s)
{
	struct qgd_roster *r = &srv->roster;

	s->roster_prev = NULL;
	s->roster_next = r->first;
	if (r->first)
		r->first->roster_prev = s;
	r->first = s;
	r->n++;
}

void qgd_roster_remove(struct qgd_server *srv, struct qgd_session *s)
{
	struct qgd_roster *r = &srv->roster;

	if (s->roster_prev)
		s->roster_prev->roster_next = s->roster_next;
	else
		r->first = s->roster_next;
	if (s->roster_next)
		s->roster_next->roster_prev = s->roster_prev;
	s->roster_prev = s->roster_next = NULL;
	r->n--;
}

struct qgd_session *qgd_roster_first(const struct qgd_server *srv)
{
	return srv->roster.first;
}

struct qgd_session *qgd_roster_next(const struct qgd_session *s)
{
	return s->roster_next;
}

uint32_t qgd_roster_count(const struct qgd_server *srv)
{
	return srv->roster.n;
}
