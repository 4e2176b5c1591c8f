/*
 * daemon-util.h - start and stop a qgraphd of the build for a test, on a
 * socket of its own.  QG_TOP_BUILDDIR names the build; QG_EXEC (qemu on a
 * cross build) prefixes the command; QG_DAEMON_ARGS adds options (the
 * epoll variant of a suite sets --epoll).
 */
#ifndef QG_DAEMON_UTIL_H
#define QG_DAEMON_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qgraph.h"
#include "tap.h"

struct test_daemon {
	pid_t pid;
	char dir[64];
	char sock[128];
	char log[128];
};

/*
 * Start a daemon with EXTRA options (space separated, may be NULL) without
 * waiting for it: the read end of its --ready-fd pipe, for
 * daemon_wait_ready(), or -errno.
 */
__attribute__((unused))
static int daemon_spawn(struct test_daemon *d, const char *extra)
{
	const char *top = getenv("QG_TOP_BUILDDIR");
	const char *exec = getenv("QG_EXEC");
	const char *more = getenv("QG_DAEMON_ARGS");
	char *argv[48];
	int argc = 0, ready[2];
	static char words[2048];
	char bin[512];

	if (!d->dir[0]) {
		snprintf(d->dir, sizeof d->dir, "/tmp/qgd-test-XXXXXX");
		if (!mkdtemp(d->dir))
			return -errno;
	}
	if (!d->sock[0])	/* a test may name its own, in a directory the daemon makes */
		snprintf(d->sock, sizeof d->sock, "%s/qgraphd.sock", d->dir);
	snprintf(d->log, sizeof d->log, "%s/qgraphd.log", d->dir);
	snprintf(bin, sizeof bin, "%s/daemon/qgraphd", top ? top : ".");
	snprintf(words, sizeof words, "%s %s --no-config --pool-size 256M --foreground --socket %s --log-level debug --ready-fd 3 %s %s",
		 exec ? exec : "", bin, d->sock, more ? more : "", extra ? extra : "");
	for (char *w = strtok(words, " "); w && argc < 46; w = strtok(NULL, " "))
		argv[argc++] = w;
	argv[argc] = NULL;
	if (pipe(ready))
		return -errno;
	d->pid = tap_fork();
	if (d->pid == 0) {
		int log = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		dup2(log, 2);
		dup2(ready[1], 3);
		if (ready[0] != 3)
			close(ready[0]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(ready[1]);
	return ready[0];
}

/* Wait until the daemon daemon_spawn() started says it is ready on READY_FD (closed here); 0 then. */
__attribute__((unused))
static int daemon_wait_ready(struct test_daemon *d, int ready_fd)
{
	char buf[16] = "";
	ssize_t n = read(ready_fd, buf, sizeof buf - 1);	/* EOF if it died first */
	close(ready_fd);
	if (n < 6 || strncmp(buf, "READY\n", 6) != 0) {
		int st;
		waitpid(d->pid, &st, 0);
		d->pid = 0;
		return WIFEXITED(st) ? -WEXITSTATUS(st) - 1000 : -EIO;
	}
	setenv("QGRAPH_SOCKET", d->sock, 1);
	return 0;
}

/* Start a daemon with EXTRA options (space separated, may be NULL); 0 when it is ready. */
__attribute__((unused))
static int daemon_start(struct test_daemon *d, const char *extra)
{
	int fd = daemon_spawn(d, extra);

	return fd < 0 ? fd : daemon_wait_ready(d, fd);
}

/* Send SIG and wait; returns the wait status. */
__attribute__((unused))
static int daemon_stop(struct test_daemon *d, int sig)
{
	int st = 0;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, sig);
	waitpid(d->pid, &st, 0);
	d->pid = 0;
	return st;
}

/* Print the daemon's log as TAP comments (after a failure). */
__attribute__((unused))
static void daemon_dump_log(struct test_daemon *d)
{
	char line[1024];
	FILE *f = fopen(d->log, "r");

	while (f && fgets(line, sizeof line, f))
		printf("# log: %s", line);
	if (f)
		fclose(f);
}

__attribute__((unused))
static void daemon_cleanup(struct test_daemon *d)
{
	char p[200];

	if (d->pid > 0)
		daemon_stop(d, SIGKILL);
	unlink(d->sock);
	snprintf(p, sizeof p, "%s.lock", d->sock);
	unlink(p);
	unlink(d->log);
	rmdir(d->dir);
}

/* How many lines of the daemon's log contain WHAT. */
__attribute__((unused))
static int daemon_log_count(const struct test_daemon *d, const char *what)
{
	char line[2048];
	int n = 0;
	FILE *f = fopen(d->log, "r");

	while (f && fgets(line, sizeof line, f))
		n += strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return n;
}

/* True if a line of the daemon's log contains WHAT. */
__attribute__((unused))
static int daemon_log_has(const struct test_daemon *d, const char *what)
{
	return daemon_log_count(d, what) > 0;
}

/* The value of "KEY N" in the daemon's stats, as session S reads them, or -1. */
__attribute__((unused))
static long long daemon_stat(struct qgraph_session *s, const char *key)
{
	char buf[8192], *save = NULL;
	size_t n = strlen(key);

	if (qgraph_stats(s, buf, sizeof buf) < 0)
		return -1;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, key, n) == 0 && line[n] == ' ')
			return atoll(line + n + 1);
	return -1;
}

/* A session on D's socket named NAME with an arena of ARENA_BYTES, or NULL (the reason in a diagnostic). */
__attribute__((unused))
static struct qgraph_session *daemon_connect(const struct test_daemon *d, const char *name, size_t arena_bytes)
{
	struct qgraph_connect_opts o = { .socket = d->sock, .name = name, .arena_bytes = arena_bytes };
	struct qgraph_session *s = NULL;
	char err[256];

	if (qgraph_connect(&o, &s, err, sizeof err))
		tap_diag("connect %s: %s", name, err);
	return s;
}

#endif /* QG_DAEMON_UTIL_H */
