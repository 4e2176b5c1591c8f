/*
 * submit-session.c - what every qgraph-submit command shares: the global
 * options and the session it opens with them (see submit.h).  The command
 * files call in here and nothing here calls them.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "submit.h"

const char *socket_path;
int quiet;

struct qgraph_session *connect_or_die(const char *name, uint64_t arena)
{
	struct qgraph_connect_opts o = { .socket = socket_path, .name = name, .arena_bytes = arena };
	struct qgraph_session *s;
	char err[512];
	int r = qgraph_connect(&o, &s, err, sizeof err);

	if (r) {
		fprintf(stderr, "qgraph-submit: %s\n", err);
		exit(r == -ENOENT || r == -ECONNREFUSED ? EXIT_NODAEMON : EXIT_WRONG);
	}
	return s;
}
