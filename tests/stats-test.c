/*
 * stats-test.c - stats show a client its own user's sessions (pid, uid
 * and a name that may hold a command line); every user's only to root and
 * to members of stats-group; the others are counted, not shown.  A
 * client that asks for its own session alone gets that.  Needs root, to
 * connect as other users (exit 77 otherwise).
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon-util.h"
#include "qgraph.h"
#include "raw-client.h"
#include "tap.h"

#define UID_A 40001
#define UID_B 40002
#define UID_OP 40003
#define GID_STATS 40010

static struct test_daemon d;

/* What a client saw: the uids of the sessions listed, and the count of those hidden. */
struct seen {
	int n;
	unsigned uids[16];
	long long hidden;
};

/* Parse libqgraph's stats text into *SEEN.  0 or -1. */
static int parse(char *text, struct seen *seen)
{
	char *save = NULL;

	memset(seen, 0, sizeof *seen);
	seen->hidden = -1;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		unsigned uid;
		if (sscanf(l, "session %*llu pid %*u uid %u", &uid) == 1 && seen->n < 16)
			seen->uids[seen->n++] = uid;
		else if (strncmp(l, "sessions_hidden ", 16) == 0)
			seen->hidden = atoll(l + 16);
	}
	return seen->hidden < 0 ? -1 : 0;
}

/*
 * A client of user UID (in group GROUP too, when not 0): connects, says so
 * on READY, waits for a byte on GO, writes what its stats show to OUT, and
 * keeps its session until BYE reads end-of-file.
 */
static pid_t client_as(uid_t uid, gid_t group, int ready, int go, int out, const int bye[2])
{
	pid_t pid = fork();

	if (pid)
		return pid;
	close(bye[1]);	/* the parent's alone: its close is the end-of-file */
	gid_t groups[1] = { group };
	if (setgroups(group ? 1 : 0, groups) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
		_exit(2);
	struct qgraph_connect_opts o = { .socket = d.sock, .name = "secret --password hunter2", .arena_bytes = 1 << 20 };
	struct qgraph_session *s = NULL;
	char err[256], buf[16384], c = 0;
	if (qgraph_connect(&o, &s, err, sizeof err))
		_exit(3);
	(void)!write(ready, "r", 1);
	if (read(go, &c, 1) != 1)
		_exit(4);
	ssize_t n = qgraph_stats(s, buf, sizeof buf);
	if (n < 0)
		_exit(5);
	(void)!write(out, buf, (size_t)n + 1);
	while (read(bye[0], &c, 1) > 0)
		;
	qgraph_session_close(s);
	_exit(0);
}

/* read() that gives up after 10 s (a client that failed keeps no promise): bytes read, or -1. */
static ssize_t read_10s(int fd, void *buf, size_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 10000) == 1 ? read(fd, buf, len) : -1;
}

/* True if SEEN lists exactly the N uids UIDS (in any order) and counts HIDDEN more. */
static int saw(const struct seen *seen, const unsigned *uids, int n, long long hidden)
{
	if (seen->n != n || seen->hidden != hidden)
		return 0;
	for (int i = 0; i < n; i++) {
		int found = 0;
		for (int j = 0; j < seen->n; j++)
			found |= seen->uids[j] == uids[i];
		if (!found)
			return 0;
	}
	return 1;
}

int main(void)
{
	enum { NC = 3 };
	static const uid_t uids[NC] = { UID_A, UID_B, UID_OP };
	int ready[2], go[2], bye[2], out[NC][2];
	pid_t kids[NC];
	char err[256], args[64];

	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root to connect as other users\n");
		return 77;
	}
	snprintf(args, sizeof args, "--socket-mode 0666 --stats-group %d", GID_STATS);
	if (!tap_ok(daemon_start(&d, args) == 0, "start qgraphd with stats-group %d", GID_STATS)) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return tap_done();
	}
	chmod(d.dir, 0711);	/* other users reach the socket */
	struct qgraph_connect_opts o = { .socket = d.sock, .name = "root", .arena_bytes = 1 << 20 };
	struct qgraph_session *root = NULL;
	int e = qgraph_connect(&o, &root, err, sizeof err);
	tap_ok(e == 0, "root's session (%s)", err);

	if (pipe(ready) || pipe(go) || pipe(bye))
		return 1;
	for (int i = 0; i < NC; i++) {
		if (pipe(out[i]))
			return 1;
		kids[i] = client_as(uids[i], uids[i] == UID_OP ? GID_STATS : 0, ready[1], go[0], out[i][1], bye);
	}
	close(bye[0]);
	int up = 0;
	char c;
	for (int i = 0; i < NC; i++)
		up += read_10s(ready[0], &c, 1) == 1;
	tap_ok(up == NC, "three clients of three other users connected");
	for (int i = 0; i < NC; i++)
		(void)!write(go[1], "g", 1);

	struct seen seen[NC];
	for (int i = 0; i < NC; i++) {
		static char buf[16384];
		ssize_t n = read_10s(out[i][0], buf, sizeof buf - 1);
		buf[n > 0 ? n : 0] = 0;
		if (parse(buf, &seen[i]))
			seen[i].n = -1;
	}
	static const unsigned all[] = { 0, UID_A, UID_B, UID_OP };
	tap_ok(saw(&seen[0], (unsigned[]){ UID_A }, 1, 3), "uid %d sees its own session, and 3 others counted, not shown",
	       UID_A);
	tap_ok(saw(&seen[1], (unsigned[]){ UID_B }, 1, 3), "uid %d sees its own session only", UID_B);
	tap_ok(saw(&seen[2], all, 4, 0), "a member of stats-group sees all four");
	char buf[16384];
	struct seen rs;
	tap_ok(root && qgraph_stats(root, buf, sizeof buf) > 0 && parse(buf, &rs) == 0 && saw(&rs, all, 4, 0),
	       "root sees all four");

	/* asking for its own session alone */
	struct raw r;
	struct raw_reply rep;
	e = raw_connect(&r, d.sock, 1 << 20);
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__StatsRequest sr = QGRAPH__STATS_REQUEST__INIT;
	req.request_id = 5;
	req.body_case = QGRAPH__REQUEST__BODY_STATS;
	req.stats = &sr;
	sr.all_sessions = 0;
	int ok = e == 0 && raw_send(&r, &req) == 0 && raw_reply(&r, 5000, &rep) == 0 && rep.status == 0;
	tap_ok(ok && rep.sessions_listed == 1, "a Stats request without all_sessions lists the asking session alone (%d)",
	       rep.sessions_listed);
	sr.all_sessions = 1;
	ok = e == 0 && raw_send(&r, &req) == 0 && raw_reply(&r, 5000, &rep) == 0 && rep.status == 0;
	tap_ok(ok && rep.sessions_listed == 5, "with it, root's raw session lists all five (%d)", rep.sessions_listed);
	raw_close(&r);
	close(bye[1]);

	for (int i = 0; i < NC; i++) {
		int st;
		waitpid(kids[i], &st, 0);
		tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client of uid %u exits 0 (%d)", (unsigned)uids[i],
		       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	qgraph_session_close(root);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
	return tap_done();
}
