/*
 * paths.c - default socket path (see paths.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"

int qg_default_socket_path(char *buf, size_t len)
{
	const char *env = getenv("QGRAPH_SOCKET");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "/run/qgraph/qgraphd.sock");
	else if (xdg && *xdg == '/')
		n = snprintf(buf, len, "%s/qgraph/qgraphd.sock", xdg);
	else
		n = snprintf(buf, len, "/tmp/qgraph-%u/qgraphd.sock", (unsigned)geteuid());
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int qg_make_socket_dir(const char *path, unsigned mode)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (!slash || slash == path)
		return 0;
	if ((size_t)(slash - path) >= sizeof dir)
		return -ENAMETOOLONG;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = 0;
	if (mkdir(dir, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}
