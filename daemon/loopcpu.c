/*
 * loopcpu.c - where the event loop runs, and moving it off a client's CPU
 * (loopcpu.h).
 */
#include "config.h"

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "hints.h"
#include "loopcpu.h"
#include "server.h"
#include "session.h"
#include "stamp.h"

void qgd_loopcpu_start(struct qgd_server *srv)
{
	srv->loop_cpu = -2;	/* nothing yet: the first look tells */
	srv->move_asked = false;
	srv->moved_ms = 0;
}

int qgd_loopcpu_current(const struct qgd_server *srv)
{
	return srv->loop_cpu;
}

void qgd_loopcpu_note(struct qgd_server *srv)
{
	int c = sched_getcpu();

	if (c == srv->loop_cpu)
		return;
	srv->loop_cpu = c;
	qgd_roster_each(srv, s)
		if (s->state == QGD_READY)
			qg_hint_loop_cpu(s->rg.hdr, c);
}

void qgd_loopcpu_ask_move(struct qgd_server *srv)
{
	srv->move_asked = true;
}

void qgd_loopcpu_move_if_asked(struct qgd_server *srv)
{
	cpu_set_t all, others;

	if (!srv->move_asked)
		return;
	srv->move_asked = false;
	uint64_t now = qg_stamp_ms();
	if (now - srv->moved_ms < 100)
		return;	/* at most ten moves a second */
	srv->moved_ms = now;
	if (sched_getaffinity(0, sizeof all, &all) || CPU_COUNT(&all) < 2)
		return;
	others = all;
	CPU_CLR(srv->loop_cpu, &others);
	if (CPU_COUNT(&others) && sched_setaffinity(0, sizeof others, &others) == 0) {
		sched_setaffinity(0, sizeof all, &all);
		qgd_loopcpu_note(srv);
	}
}
