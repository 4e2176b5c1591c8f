/*
 * paths.c - the default socket path and the check of the directory that
 * holds it (see paths.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
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
		n = snprintf(buf, len, "%s", QG_SYSTEM_SOCKET);
	else if (xdg && *xdg == '/')
		n = snprintf(buf, len, "%s/qgraph/qgraphd.sock", xdg);
	else
		n = snprintf(buf, len, "/tmp/qgraph-%u/qgraphd.sock", (unsigned)geteuid());
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int qg_client_socket_paths(char (*paths)[PATH_MAX], size_t n)
{
	const char *env = getenv("QGRAPH_SOCKET");

	if (n < 2)
		return -EINVAL;
	if (qg_default_socket_path(paths[0], PATH_MAX))
		return -ENAMETOOLONG;
	if ((env && *env) || strcmp(paths[0], QG_SYSTEM_SOCKET) == 0)
		return 1;
	snprintf(paths[1], PATH_MAX, "%s", QG_SYSTEM_SOCKET);
	return 2;
}

int qg_path_dir(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t n;

	if (!slash)
		return -EINVAL;
	n = slash == path ? 1 : (size_t)(slash - path);
	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(buf, path, n);
	buf[n] = 0;
	return 0;
}

__attribute__((format(printf, 3, 4)))
static int refuse(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -EPERM;
}

int qg_socket_dir_check(const char *path, uid_t uid, char *why, size_t whylen)
{
	char dir[PATH_MAX], parent[PATH_MAX];
	struct stat st;

	if (why && whylen)
		why[0] = 0;
	if (qg_path_dir(path, dir, sizeof dir) || qg_path_dir(dir, parent, sizeof parent) ||
	    strcmp(dir, parent) == 0)
		return 0;	/* a socket in / or a relative name: its directory is not in question */
	if (stat(parent, &st) < 0 || !(st.st_mode & S_IWOTH))
		return 0;	/* only those who may write the parent made DIR */
	if (lstat(dir, &st) < 0) {
		int err = -errno;
		if (err == -ENOENT)
			return 0;
		refuse(why, whylen, "cannot examine %s: %s", dir, strerror(errno));
		return err;
	}
	if (S_ISLNK(st.st_mode))
		return refuse(why, whylen, "%s, in the world-writable %s, is a symbolic link", dir, parent);
	if (!S_ISDIR(st.st_mode))
		return refuse(why, whylen, "%s, in the world-writable %s, is not a directory", dir, parent);
	if (st.st_uid != 0 && st.st_uid != uid)
		return refuse(why, whylen, "%s, in the world-writable %s, belongs to uid %u, not to uid %u or root",
			      dir, parent, (unsigned)st.st_uid, (unsigned)uid);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return refuse(why, whylen, "%s, in the world-writable %s, is writable by others (mode %03o)", dir,
			      parent, (unsigned)(st.st_mode & 0777));
	return 0;
}
