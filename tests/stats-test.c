/*
 * stats-test.c - stats show a client its own user's sessions (pid, uid
 * and a name that may hold a command line); every user's only to root and
 * to members of stats-group; the others are counted, not shown.  A
 * client that asks for its own session alone gets that.  The counters an
 * operator reads move when a quota refuses, a graph is cancelled, a wait
 * times out, a request fails and a session is dropped; the latency
 * histogram counts graphs; every session and model is listed, however
 * many (the answer comes in pages).  Needs root, to connect as other
 * users (exit 77 otherwise).
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
#include "upload-opts.h"

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
		if (sscanf(l, "session %*[0-9] pid %*[0-9] uid %u", &uid) == 1 && seen->n < 16)
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
	pid_t pid = tap_fork();

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

/* The value of "KEY N" in TEXT (libqgraph's stats text), or -1. */
static long long stat_of(const char *text, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, n) == 0 && p[n] == ' ')
			return atoll(p + n + 1);
	return -1;
}

/* Lines of TEXT that begin with WORD. */
static int lines_of(const char *text, const char *word)
{
	int n = 0;
	size_t wl = strlen(word);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		n += strncmp(p, word, wl) == 0;
	return n;
}

/*
 * The counters: each cause moves its own.  S is root's session; the daemon
 * runs with max-arena 8M.
 */
static void test_counters(struct qgraph_session *s)
{
	static char before[1 << 16], after[1 << 16];
	char err[256];

	if (!tap_ok(qgraph_stats(s, before, sizeof before) > 0, "stats before"))
		return;
	tap_ok(stat_of(before, "uptime_ms") >= 0 && strstr(before, "version " PACKAGE_VERSION "\n"),
	       "stats carry the daemon's version and uptime");

	/* a quota at connect: refused with -EDQUOT, counted under its key */
	struct qgraph_connect_opts o = { .socket = d.sock, .name = "too big", .arena_bytes = 16 << 20 };
	struct qgraph_session *big = NULL;
	int e = qgraph_connect(&o, &big, err, sizeof err);
	tap_ok(e == -EDQUOT && strstr(err, "max-arena"), "a quota refusal at connect is -EDQUOT (%d: %s)", e, err);
	qgraph_session_close(big);

	/* an error: freeing weights that do not exist */
	tap_ok(qgraph_weights_free(s, 987654) == -ENOENT, "freeing unknown weights fails");

	/* a timeout: a run waiting for an event never recorded, for 20 ms */
	struct raw r;
	struct raw_reply rep;
	int ok = raw_connect(&r, d.sock, 1 << 20) == 0;
	ok = ok && raw_send_waiting(&r, 9, 20) == 0 && raw_reply(&r, 5000, &rep) == 0;
	tap_ok(ok && rep.status == QGRAPH__STATUS__STATUS_TIMED_OUT, "a wait for an event times out (%d)", rep.status);
	/* a dropped session: a message on its socket after the handshake */
	(void)!write(r.sock, "x", 1);
	usleep(100000);
	raw_close(&r);

	/* a cancel: a long graph, cancelled as it runs */
	enum { D = 256, N = 32, NODES = 4000 };
	static float w[D * D];
	for (size_t i = 0; i < D * D; i++)
		w[i] = (float)(i % 7) / D;
	int64_t xo = qgraph_arena_alloc(s, D * N * 4), yo = qgraph_arena_alloc(s, D * N * 4);
	uint64_t h = 0, id = 0, cid = 0;
	struct qgraph_result res = { 0 }, cres = { 0 };
	memset((char *)qgraph_arena(s, NULL) + xo, 0, D * N * 4);
	int rc = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
			.rows = D, .cols = D, .data = w), &h, NULL);
	struct qgraph_graph *g = qgraph_graph_new();
	int64_t xne[2] = { D, N };
	int wi = qgraph_graph_weights(g, h, QGRAPH_TYPE_F32, D, D);
	int x = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo);
	for (int i = 0; i < NODES; i++)
		x = qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, x, 0);
	qgraph_graph_output(g, x, yo);
	if (!rc)
		rc = qgraph_submit(s, g, QGRAPH_SUBMIT_BLOCK, &id);
	usleep(50000);
	if (!rc)
		rc = qgraph_cancel(s, id, &cid);
	if (!rc)
		rc = qgraph_wait(s, cid, 10000, &cres);
	if (!rc)
		rc = qgraph_wait(s, id, 30000, &res);
	tap_ok(rc == 0 && res.status == -ECANCELED, "a long graph is cancelled (%d, %d)", rc, res.status);
	qgraph_graph_free(g);
	qgraph_weights_free(s, h);
	qgraph_arena_free(s, xo);
	qgraph_arena_free(s, yo);

	if (!tap_ok(qgraph_stats(s, after, sizeof after) > 0, "stats after"))
		return;
	static const char *const moved[] = {
		"quota max-arena", "status not_found", "status timed_out", "status cancelled", "timeouts", "cancels",
		"sessions_dropped", "latency_count",
	};
	for (size_t k = 0; k < sizeof moved / sizeof moved[0]; k++) {
		long long b = stat_of(before, moved[k]), a = stat_of(after, moved[k]);
		tap_ok(b >= 0 && a == b + 1, "%s: %lld, then %lld", moved[k], b, a);
	}
	long long eb = stat_of(before, "errors"), ea = stat_of(after, "errors");
	long long rb = stat_of(before, "requests"), ra = stat_of(after, "requests");
	tap_ok(eb >= 0 && ea == eb + 3, "errors: the three failed requests (%lld, then %lld)", eb, ea);
	tap_ok(rb >= 0 && ra > rb + 3, "requests counts them all (%lld, then %lld)", rb, ra);
	tap_ok(stat_of(after, "latency_le_ns 10000000000") == stat_of(after, "latency_count"),
	       "the histogram's buckets are cumulative up to its count");
}

/* More sessions than one answer holds: every one is listed (the stats come in pages). */
static void test_many_sessions(struct qgraph_session *root)
{
	enum { MANY = 80 };
	static struct qgraph_session *many[MANY];
	static char text[1 << 20];
	char err[256];
	int up = 0;

	for (int i = 0; i < MANY; i++) {
		struct qgraph_connect_opts o = { .socket = d.sock, .name = "one of a crowd with a long name",
						 .arena_bytes = 64 << 10 };
		up += qgraph_connect(&o, &many[i], err, sizeof err) == 0;
	}
	tap_ok(up == MANY, "%d more sessions connected (%d): %s", MANY, up, up == MANY ? "" : err);
	long long served = -1;
	int listed = -1;
	if (qgraph_stats(root, text, sizeof text) > 0) {
		served = stat_of(text, "sessions");
		listed = lines_of(text, "session ");
	}
	tap_ok(served >= MANY && listed == served && lines_of(text, "version ") == 1,
	       "root's stats list every one of the %lld sessions (%d listed), the counters once", served, listed);
	for (int i = 0; i < MANY; i++)
		qgraph_session_close(many[i]);
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
	char err[256], args[128];

	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root to connect as other users\n");
		return 77;
	}
	snprintf(args, sizeof args, "--socket-mode 0666 --stats-group %d --max-arena 8M --arena-size 1M --max-sessions-per-user 128",
		 GID_STATS);
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
	test_counters(root);
	test_many_sessions(root);
	qgraph_session_close(root);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
	return tap_done();
}
