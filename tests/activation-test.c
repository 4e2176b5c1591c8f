/*
 * activation-test.c - qgraphd under a service manager, played by the test:
 * readiness through $NOTIFY_SOCKET (a datagram socket of the test's own),
 * sent once a client can be served and never before; the socket appears
 * only listening (the daemon is stopped the moment it appears: a connect
 * then is taken, never refused), STOPPING=1 on
 * SIGTERM; and socket activation: a listening socket passed at fd 3 with
 * LISTEN_FDS and LISTEN_PID (set in the child, then exec) is served and
 * kept (never unlinked, served again by a second start), other inherited
 * descriptors are closed; and the same through systemd-socket-activate
 * where it is installed.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon-util.h"
#include "qgraph.h"
#include "smoke.h"
#include "tap.h"

static char top[] = "/tmp/qgd-act-XXXXXX";
static char bin[512], logpath[128], notify_path[160];
static int notify_fd = -1;

static int bind_unix(int type, const char *path, int do_listen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || (do_listen && listen(fd, 16) < 0)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Wait up to MS for a datagram on the notify socket that contains WHAT; 1 if it came (all it said in OUT). */
static int notified(const char *what, int ms, char *out, size_t len)
{
	struct pollfd p = { .fd = notify_fd, .events = POLLIN };

	out[0] = 0;
	while (poll(&p, 1, ms) == 1) {
		ssize_t n = recv(notify_fd, out, len - 1, MSG_DONTWAIT);
		if (n < 0)
			return 0;
		out[n] = 0;
		if (strstr(out, what))
			return 1;
	}
	return 0;
}

/*
 * Fork and exec the daemon with EXTRA options, stderr to the log,
 * $NOTIFY_SOCKET set; with LISTEN_FD >= 0, that socket is passed at fd 3
 * (LISTEN_FDS=1, LISTEN_PID the child's own) and a stray descriptor at 4.
 * With WRAP, the command runs under that program (its words, space separated).
 */
static pid_t spawn(const char *extra, int listen_fd, const char *wrap)
{
	static char words[2048];
	char *argv[48];
	int argc = 0;

	snprintf(words, sizeof words, "%s %s --no-config --pool-size 256M --log-level debug %s", wrap ? wrap : "",
		 bin, extra);
	for (char *w = strtok(words, " "); w && argc < 46; w = strtok(NULL, " "))
		argv[argc++] = w;
	argv[argc] = NULL;
	pid_t pid = tap_fork();
	if (pid == 0) {
		int log = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
		dup2(log, 2);
		setenv("NOTIFY_SOCKET", notify_path, 1);
		if (listen_fd >= 0) {
			char me[32];
			dup2(listen_fd, 3);	/* dup2 clears close-on-exec */
			int stray = open("/dev/null", O_RDONLY);
			dup2(stray, 4);
			snprintf(me, sizeof me, "%d", (int)getpid());
			setenv("LISTEN_FDS", "1", 1);
			setenv("LISTEN_PID", me, 1);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static int log_has(const char *what)
{
	struct test_daemon d = { 0 };

	snprintf(d.log, sizeof d.log, "%s", logpath);
	return daemon_log_has(&d, what);
}

static void dump_log(void)
{
	struct test_daemon d = { 0 };

	snprintf(d.log, sizeof d.log, "%s", logpath);
	daemon_dump_log(&d);
}

/* Connect through SOCK and run SCALE(x, 4) on 8 floats: 0 when right, with what went wrong in MSG. */
static int run_graph(const char *sock, char *msg, size_t len)
{
	struct qgraph_connect_opts o = { .socket = sock, .name = "activation-test", .arena_bytes = 1 << 20 };
	struct qgraph_session *s = NULL;

	if (qgraph_connect(&o, &s, msg, len))
		return -1;
	int r = smoke_scale(s, 8, 4.0f, 0.5f, msg, len);
	qgraph_session_close(s);
	return r;
}

static int stop(pid_t pid)
{
	int st = 0;

	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* READY=1 only once a client can be served; STOPPING=1 at SIGTERM. */
static void test_ready(void)
{
	char dir[64], sock[108], opts[256], msg[512], note[512];
	char buf[4096];

	snprintf(dir, sizeof dir, "%s/r", top);
	snprintf(sock, sizeof sock, "%s/qgraphd.sock", dir);
	mkdir(dir, 0700);
	int in = inotify_init1(IN_CLOEXEC);
	inotify_add_watch(in, dir, IN_CREATE | IN_MOVED_TO);
	snprintf(opts, sizeof opts, "--foreground --socket %s", sock);
	pid_t pid = spawn(opts, -1, NULL);
	/* the moment the socket file is at its path, stop the daemon and try it */
	int seen = 0, connected = -1, err = 0;
	struct pollfd p = { .fd = in, .events = POLLIN };
	while (!seen && poll(&p, 1, 20000) == 1) {
		ssize_t n = read(in, buf, sizeof buf);
		for (char *q = buf; n > 0 && q < buf + n;) {
			const struct inotify_event *e = (const struct inotify_event *)(void *)q;
			if (e->len && strcmp(e->name, "qgraphd.sock") == 0)
				seen = 1;
			q += sizeof *e + e->len;
		}
	}
	close(in);
	if (seen) {
		kill(pid, SIGSTOP);
		int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
		connected = connect(c, (struct sockaddr *)&sa, sizeof sa) == 0;
		err = errno;
		close(c);
		/* bound at a staging name and moved in place once it listens, its memory ready */
		tap_ok(connected && log_has("reserved in"),
		       "stopped as its socket appears: a connect is taken, its memory ready (%s)",
		       connected ? "connected" : strerror(err));
		kill(pid, SIGCONT);
	} else {
		tap_ok(0, "the socket appears");
	}
	int ready = notified("READY=1", 30000, note, sizeof note);
	tap_ok(ready && strstr(note, "STATUS=serving on"), "READY=1 with its status: '%s'", note);
	/* right at READY=1: served at once */
	int r = run_graph(sock, msg, sizeof msg);
	tap_ok(r == 0, "a client connecting at READY=1 runs a graph %s", msg);
	kill(pid, SIGTERM);
	tap_ok(notified("STOPPING=1", 10000, note, sizeof note), "STOPPING=1 at SIGTERM");
	int st = 0;
	waitpid(pid, &st, 0);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "it exits 0");
	tap_ok(access(sock, F_OK) != 0, "and removes the socket it bound");
	if (tap_failed)
		dump_log();
	unlink(logpath);
	char lock[160];
	snprintf(lock, sizeof lock, "%s.lock", sock);
	unlink(lock);
	rmdir(dir);
}

/* A socket passed at fd 3 is served, the stray fd 4 closed; kept at exit, and served again. */
static void test_passed(void)
{
	char sock[128], other[128], opts[256], msg[512], note[512], fd4[64], lnk[256];

	snprintf(sock, sizeof sock, "%s/act.sock", top);
	snprintf(other, sizeof other, "%s/not-this.sock", top);
	int lfd = bind_unix(SOCK_SEQPACKET, sock, 1);
	tap_ok(lfd >= 0, "the test's listening socket %s", sock);
	if (lfd < 0)
		return;
	snprintf(opts, sizeof opts, "--foreground --socket %s", other);
	for (int round = 0; round < 2; round++) {
		pid_t pid = spawn(opts, lfd, NULL);
		int ready = notified("READY=1", 30000, note, sizeof note);
		tap_ok(ready && strstr(note, sock), "start %d: READY=1 serving the passed socket: '%s'", round + 1, note);
		snprintf(fd4, sizeof fd4, "/proc/%d/fd/4", (int)pid);
		ssize_t n = readlink(fd4, lnk, sizeof lnk - 1);
		lnk[n > 0 ? n : 0] = 0;
		tap_ok(n < 0 || !strstr(lnk, "/dev/null"), "start %d: an inherited stray descriptor is closed (%s)",
		       round + 1, lnk);
		int r = run_graph(sock, msg, sizeof msg);
		tap_ok(r == 0, "start %d: a client runs a graph through it %s", round + 1, msg);
		tap_ok(access(other, F_OK) != 0 && log_has("passed by the service manager"),
		       "start %d: --socket is not bound; the log says whose socket it serves", round + 1);
		int ex = stop(pid);
		tap_ok(ex == 0 && access(sock, F_OK) == 0, "start %d: exits %d and leaves the socket in place", round + 1,
		       ex);
		if (tap_failed)
			dump_log();
		unlink(logpath);
	}
	close(lfd);
	unlink(sock);
}

/* The same through systemd's own tool, where it is installed. */
static void test_socket_activate(void)
{
	const char *tool = "/usr/bin/systemd-socket-activate";
	char sock[128], wrap[256], msg[512], note[512];

	if (access(tool, X_OK) != 0) {
		tap_skip("no systemd-socket-activate (Debian package systemd)");
		return;
	}
	snprintf(sock, sizeof sock, "%s/ssa.sock", top);
	snprintf(wrap, sizeof wrap, "%s --seqpacket -E NOTIFY_SOCKET --listen=%s", tool, sock);
	pid_t pid = spawn("--foreground", -1, wrap);
	/* the tool starts the daemon at the first connection: that client waits in the queue, then is served */
	for (int i = 0; i < 1000 && access(sock, F_OK) != 0; i++)
		usleep(10000);
	/* the file appears at the tool's bind, a moment before it listens: a refused connect is tried again */
	int r = -1;
	for (int i = 0; i < 500; i++) {
		r = run_graph(sock, msg, sizeof msg);
		if (r == 0 || !strstr(msg, "Connection refused"))
			break;
		usleep(10000);
	}
	tap_ok(r == 0, "under systemd-socket-activate: the first client starts the daemon and runs a graph %s", msg);
	tap_ok(notified("READY=1", 30000, note, sizeof note), "READY=1");
	int ex = stop(pid);
	tap_ok(ex == 0 && access(sock, F_OK) == 0, "it exits %d and leaves the socket alone", ex);
	if (tap_failed)
		dump_log();
	unlink(logpath);
	unlink(sock);
}

int main(void)
{
	const char *build = getenv("QG_TOP_BUILDDIR");
	const char *exec = getenv("QG_EXEC");

	if (exec && *exec) {
		printf("1..0 # SKIP the daemon runs under a wrapper: LISTEN_PID would name the wrapper\n");
		return 77;
	}
	if (!mkdtemp(top)) {
		printf("1..0 # SKIP cannot make %s\n", top);
		return 77;
	}
	snprintf(bin, sizeof bin, "%s/daemon/qgraphd", build ? build : ".");
	snprintf(logpath, sizeof logpath, "%s/qgraphd.log", top);
	snprintf(notify_path, sizeof notify_path, "%s/notify", top);
	notify_fd = bind_unix(SOCK_DGRAM, notify_path, 0);
	if (notify_fd < 0) {
		tap_ok(0, "a notify socket: %s", strerror(errno));
		return tap_done();
	}
	test_ready();
	test_passed();
	test_socket_activate();
	close(notify_fd);
	unlink(notify_path);
	rmdir(top);
	return tap_done();
}
