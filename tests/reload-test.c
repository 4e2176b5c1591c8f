/*
 * reload-test.c - SIGHUP reads qgraphd's configuration again: a quota
 * raised (max-sessions-per-user) lets a session in that was refused, and
 * a quota lowered below what is in use frees nothing but refuses the next;
 * a key that needs a restart (max-sessions) is logged as ignored; a bad file
 * (or a FIFO in its place) keeps the configuration in effect; SIGUSR1 and
 * SIGUSR2 do not kill the daemon.  As root also the access policy: a served user that allow-users
 * no longer names is dropped, with the reason in the log, and one it now
 * names is served.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon-util.h"
#include "qgraph.h"
#include "tap.h"

static char conf[160];

static void write_conf(const char *text)
{
	FILE *f = fopen(conf, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
	chmod(conf, 0644);
}

/* Send SIGHUP and wait until the log says the reload is done (N_RELOADS lines of it in all). */
static int reload(struct test_daemon *d, int n_reloads)
{
	kill(d->pid, SIGHUP);
	for (int i = 0; i < 500; i++) {
		char line[1024];
		int n = 0;
		FILE *f = fopen(d->log, "r");
		while (f && fgets(line, sizeof line, f))
			n += strstr(line, "reload: configuration") != NULL ||
			     strstr(line, "the configuration in effect is kept") != NULL;
		if (f)
			fclose(f);
		if (n >= n_reloads)
			return 0;
		usleep(10000);
	}
	return -1;
}

static struct qgraph_session *connect_as_me(char *msg, size_t len)
{
	struct qgraph_connect_opts o = { .name = "reload-test", .arena_bytes = 1 << 20 };
	struct qgraph_session *s = NULL;

	return qgraph_connect(&o, &s, msg, len) ? NULL : s;
}

/*
 * In a child as UID: connect, say so on the pipe, wait for a byte on
 * *GO_WR's pipe, then ask for stats.  The child's exit: 0 its session
 * still works, 1 it does not, 2 it was not served.  *SERVED: it said so.
 */
static pid_t hold_session_as(uid_t uid, const char *sock, int *served, int *go_wr)
{
	int ready[2], go[2];
	char c;

	*served = 0;
	*go_wr = -1;
	if (pipe(ready) || pipe(go))
		return -1;
	pid_t pid = tap_fork();
	if (pid == 0) {
		struct qgraph_connect_opts o = { .socket = sock, .name = "reload-held", .arena_bytes = 1 << 20 };
		struct qgraph_session *s = NULL;
		char msg[256], stats[4096];
		close(ready[0]);
		close(go[1]);
		if (setgroups(0, NULL) || setgid(uid) || setuid(uid) || qgraph_connect(&o, &s, msg, sizeof msg))
			_exit(2);
		(void)!write(ready[1], "r", 1);
		(void)!read(go[0], &c, 1);
		_exit(qgraph_stats(s, stats, sizeof stats) > 0 ? 0 : 1);
	}
	close(ready[1]);
	close(go[0]);
	*served = read(ready[0], &c, 1) == 1;	/* EOF if it exited first */
	close(ready[0]);
	*go_wr = go[1];
	return pid;
}

/* Let the child of hold_session_as go on; its exit code. */
static int release(pid_t pid, int go_wr)
{
	int st = 0;

	(void)!write(go_wr, "g", 1);
	close(go_wr);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_policy(struct test_daemon *d, int *n_reloads)
{
	if (geteuid() != 0) {
		tap_skip("not root: clients of other users cannot be played");
		return;
	}
	write_conf("max-sessions-per-user = 2\nallow-users = 60031\n");
	tap_ok(reload(d, ++*n_reloads) == 0, "reload: allow-users = 60031");
	int served, go;
	pid_t held = hold_session_as(60031, d->sock, &served, &go);
	tap_ok(served, "uid 60031 is served");
	write_conf("max-sessions-per-user = 2\nallow-users = 60032\n");
	tap_ok(reload(d, ++*n_reloads) == 0, "reload: allow-users = 60032");
	int ex = release(held, go);
	tap_ok(served && ex == 1, "the session of uid 60031 is dropped: its next request fails (%d)", ex);
	tap_ok(daemon_log_has(d, "dropped at a reload: no longer among the users and groups served"),
	       "the log says why");
	pid_t other = hold_session_as(60032, d->sock, &served, &go);
	ex = release(other, go);
	tap_ok(served && ex == 0, "uid 60032 is served now (%d)", ex);
}

int main(void)
{
	struct test_daemon d = { 0 };
	char extra[256], msg[512];
	int n_reloads = 0;

	snprintf(d.dir, sizeof d.dir, "/tmp/qgd-reload-XXXXXX");
	if (!mkdtemp(d.dir)) {
		printf("1..0 # SKIP cannot make a directory\n");
		return 77;
	}
	chmod(d.dir, 0755);
	snprintf(conf, sizeof conf, "%s/qgraphd.conf", d.dir);
	write_conf("max-sessions-per-user = 1\n");
	/* daemon_start's --no-config comes first: --config after it wins */
	snprintf(extra, sizeof extra, "--config %s --socket-mode 0666", conf);
	int r = daemon_start(&d, extra);
	tap_ok(r == 0, "the daemon starts with max-sessions-per-user = 1 (%d)", r);
	if (r) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return tap_done();
	}
	struct qgraph_session *a = connect_as_me(msg, sizeof msg), *b = connect_as_me(msg, sizeof msg);
	tap_ok(a && !b && strstr(msg, "max-sessions-per-user"), "a second session is refused: %s", msg);

	write_conf("max-sessions-per-user = 3\nmax-sessions = 100\n");
	tap_ok(reload(&d, ++n_reloads) == 0, "SIGHUP: the configuration is read again");
	b = connect_as_me(msg, sizeof msg);
	tap_ok(b != NULL, "max-sessions-per-user = 3 applies: the second session is served %s", b ? "" : msg);
	tap_ok(daemon_log_has(&d, "reload: max-sessions-per-user: 1 -> 3"), "the log names the change");
	tap_ok(daemon_log_has(&d, "reload: max-sessions: 256 -> 100 needs a restart: ignored until then"),
	       "max-sessions needs a restart, and the log says so");

	/* lowered below use: nothing is taken away, the next is refused */
	write_conf("max-sessions-per-user = 1\n");
	tap_ok(reload(&d, ++n_reloads) == 0, "reload: max-sessions-per-user = 1 with two sessions");
	char stats[4096];
	tap_ok(a && b && qgraph_stats(a, stats, sizeof stats) > 0 && qgraph_stats(b, stats, sizeof stats) > 0,
	       "both sessions still work");
	struct qgraph_session *c = connect_as_me(msg, sizeof msg);
	tap_ok(!c && strstr(msg, "max-sessions-per-user"), "a third is refused: %s", msg);
	if (c)
		qgraph_session_close(c);

	/* the per-user quotas reload as the per-session ones do */
	write_conf("max-sessions-per-user = 1\nuser-weights = 1M\nuser-models = 2M\nuser-graph-metadata = 3M\n");
	tap_ok(reload(&d, ++n_reloads) == 0 && daemon_log_has(&d, "reload: user-weights: (default) -> 1M") &&
		       daemon_log_has(&d, "reload: user-models: (default) -> 2M") &&
		       daemon_log_has(&d, "reload: user-graph-metadata: (default) -> 3M"),
	       "user-weights, user-models and user-graph-metadata apply at a reload, and the log names them");

	/* the batch settings reload: the executor takes them with the next graph it is given */
	write_conf("max-sessions-per-user = 1\nbatch-max = 2\nbatch-window-us = 500\n");
	tap_ok(reload(&d, ++n_reloads) == 0 && daemon_log_has(&d, "reload: batch-max: 8 -> 2") &&
		       daemon_log_has(&d, "reload: batch-window-us: 0 -> 500"),
	       "batch-max and batch-window-us apply at a reload, and the log names them");

	write_conf("max-sessions-per-user = many\n");
	tap_ok(reload(&d, ++n_reloads) == 0 && daemon_log_has(&d, "the configuration in effect is kept"),
	       "a bad file is refused at reload, and the configuration kept");

	kill(d.pid, SIGUSR1);
	kill(d.pid, SIGUSR2);
	usleep(100000);
	tap_ok(waitpid(d.pid, NULL, WNOHANG) == 0 && qgraph_stats(a, stats, sizeof stats) > 0,
	       "SIGUSR1 and SIGUSR2 do not kill it");
	tap_ok(daemon_log_has(&d, "User defined signal 1: "), "SIGUSR1 logs a summary");
	if (b)
		qgraph_session_close(b);

	/* the file replaced by a FIFO: refused without waiting for a writer, the loop serves on */
	unlink(conf);
	tap_ok(mkfifo(conf, 0644) == 0, "the configuration file is now a FIFO");
	int kept = reload(&d, ++n_reloads);
	if (kept) {	/* the daemon waits in open(): be its writer, so that the test ends */
		int w = open(conf, O_WRONLY | O_NONBLOCK);
		if (w >= 0)
			close(w);
	}
	tap_ok(kept == 0 && daemon_log_has(&d, "qgraphd.conf: not a regular file"),
	       "SIGHUP with a FIFO: refused at once, naming the file, and the configuration kept");
	tap_ok(qgraph_stats(a, stats, sizeof stats) > 0, "the session in place is still served");
	unlink(conf);
	write_conf("max-sessions-per-user = 1\n");

	test_policy(&d, &n_reloads);

	if (a)
		qgraph_session_close(a);
	int ws = daemon_stop(&d, SIGTERM);
	tap_ok(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "it stops cleanly");
	if (tap_failed)
		daemon_dump_log(&d);
	unlink(conf);
	daemon_cleanup(&d);
	return tap_done();
}
