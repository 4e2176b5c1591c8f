/*
 * share-test.c - weights stored once for every process that uploads them:
 * pinned memory with 1, 4 and 8 client processes loading the same matrix,
 * released when the last one exits or is killed; weights opened by name;
 * names and sharing scoped by user (and by a configured group, when the
 * test may change its credentials); a forced hash collision still gives
 * different bytes copies of their own.  Runs its own daemons.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon-util.h"
#include "qgraph.h"
#include "tap.h"
#include "upload-opts.h"

enum { ROWS = 512, COLS = 1024 };

static float w_a[ROWS * COLS], w_b[ROWS * COLS];

/* Poll KEY until it equals WANT (up to two seconds); its last value. */
static long long stat_settles(struct qgraph_session *s, const char *key, long long want)
{
	long long v = daemon_stat(s, key);

	for (int i = 0; i < 100 && v != want; i++) {
		usleep(20000);
		v = daemon_stat(s, key);
	}
	return v;
}

/*
 * A child: connect, upload W (named NAME if not NULL), report on FD, then
 * hold the session until its parent closes GO.  Exit 0 if all went well.
 */
static int child_upload(const struct test_daemon *d, const float *w, const char *name, int fd, int go)
{
	struct qgraph_session *s = daemon_connect(d, "share-child", 8 << 20);
	uint64_t h;
	char c = 'x';

	if (s && qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0,
			.rows = ROWS, .cols = COLS, .data = w, .name = name), &h, NULL) == 0)
		c = 'u';
	(void)!write(fd, &c, 1);
	(void)!read(go, &c, 1);	/* EOF when the parent lets go */
	qgraph_session_close(s);
	return c == 'x';
}

/* N processes load the same matrix: one copy in pinned memory, gone with the last of them. */
static void test_processes(const struct test_daemon *d, struct qgraph_session *s, int n, long long one_copy)
{
	long long pinned0 = daemon_stat(s, "pinned_bytes"), stored0 = daemon_stat(s, "weights_stored");
	int rep[2], go[2], ups = 0;
	pid_t kids[8];

	if (pipe(rep) || pipe(go))
		return (void)tap_ok(0, "pipes");
	for (int i = 0; i < n; i++) {
		if ((kids[i] = tap_fork()) == 0) {
			close(go[1]);
			_exit(child_upload(d, w_a, NULL, rep[1], go[0]));
		}
	}
	close(go[0]);
	for (int i = 0; i < n; i++) {
		char c = 0;
		(void)!read(rep[0], &c, 1);
		ups += c == 'u';
	}
	long long pinned = daemon_stat(s, "pinned_bytes"), stored = daemon_stat(s, "weights_stored");
	long long refd = daemon_stat(s, "weights_referenced_bytes");
	tap_ok(ups == n && pinned - pinned0 == one_copy && stored - stored0 == 1,
	       "%d processes upload the same matrix: pinned grows by one copy (%lld bytes, %lld stored)", n,
	       pinned - pinned0, stored - stored0);
	tap_ok(refd == (long long)n * ROWS * (COLS / 32) * 18,
	       "%d processes: every session counts the weights it holds (%lld bytes)", n, refd);
	/* half are killed, the rest exit */
	for (int i = 0; i < n / 2; i++)
		kill(kids[i], SIGKILL);
	close(go[1]);
	for (int i = 0; i < n; i++)
		waitpid(kids[i], NULL, 0);
	long long after = stat_settles(s, "pinned_bytes", pinned0);
	tap_ok(after == pinned0 && daemon_stat(s, "weights_stored") == stored0,
	       "%d processes gone (%d killed): the copy is released (pinned %lld, was %lld)", n, n / 2, after, pinned0);
	close(rep[0]);
	close(rep[1]);
}

/* Named weights: opened by another session of the same user, and used. */
static void test_names(const struct test_daemon *d, struct qgraph_session *s)
{
	struct qgraph_session *t = daemon_connect(d, "share-names", 8 << 20);
	uint64_t ha, hb, hx, ho;
	enum qgraph_type st, ot;
	int64_t rows = 0, cols = 0;

	long long stored0 = daemon_stat(s, "weights_stored");
	tap_ok(qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0,
			.rows = ROWS, .cols = COLS, .data = w_a, .name = "ffn.up"), &ha, &st) ==
		       0, "upload weights named ffn.up");
	int r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0,
			.rows = ROWS, .cols = COLS, .data = w_b, .name = "ffn.up"), &hb, NULL);
	tap_ok(r == -EINVAL && strstr(qgraph_session_error(s), "already names"),
	       "other bytes under the same name are refused: %s", qgraph_session_error(s));
	r = t ? qgraph_weights_open(t, "ffn.up", &ho, &ot, &rows, &cols) : -1;
	tap_ok(r == 0 && ot == st && rows == ROWS && cols == COLS,
	       "another session of the same user opens them by name (%s %lld x %lld)", r ? "-" : qgraph_type_name(ot),
	       (long long)rows, (long long)cols);
	char longname[100];
	memset(longname, 'n', sizeof longname - 1);
	longname[sizeof longname - 1] = 0;
	r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0,
			.rows = ROWS, .cols = COLS, .data = w_b, .name = longname), &hb, NULL);
	tap_ok(r == -EINVAL && strstr(qgraph_session_error(s), "at most 63"), "a 99-byte name is refused: %s",
	       qgraph_session_error(s));
	tap_ok(t && qgraph_weights_open(t, longname, &hx, NULL, NULL, NULL) == -ENOENT &&
		       qgraph_weights_open(t, "", &hx, NULL, NULL, NULL) == -EINVAL,
	       "opening a name too long finds nothing; an empty one is refused");
	tap_ok(t && qgraph_weights_open(t, "ffn.down", &hx, NULL, NULL, NULL) == -ENOENT,
	       "an unknown name: -ENOENT (%s)", t ? qgraph_session_error(t) : "");

	/* the opened handle computes what the uploader's does */
	float *y[2] = { NULL, NULL };
	struct qgraph_session *ss[2] = { s, t };
	uint64_t hs[2] = { ha, ho };
	for (int k = 0; k < 2 && t; k++) {
		unsigned char *arena = qgraph_arena(ss[k], NULL);
		int64_t xo = qgraph_arena_alloc(ss[k], COLS * 4), yo = qgraph_arena_alloc(ss[k], ROWS * 4);
		for (int i = 0; i < COLS; i++)
			((float *)(arena + xo))[i] = (float)(i % 7) - 3.0f;
		struct qgraph_graph *g = qgraph_graph_new();
		int64_t xne[2] = { COLS, 1 };
		int wi = qgraph_graph_weights(g, hs[k], st, ROWS, COLS);
		qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo), 0),
				    yo);
		uint64_t id;
		struct qgraph_result res = QGRAPH_RESULT_INIT;
		if (qgraph_submit(ss[k], g, QGRAPH_SUBMIT_BLOCK, &id) == 0 && qgraph_wait(ss[k], id, 10000, &res) == 0 &&
		    res.status == 0)
			y[k] = (float *)(arena + yo);
		qgraph_graph_free(g);
	}
	tap_ok(y[0] && y[1] && memcmp(y[0], y[1], ROWS * 4) == 0 && y[0][1] != 0.0f,
	       "a graph on the opened handle gives the uploader's result");
	tap_ok(qgraph_weights_free(s, ha) == 0 && t && qgraph_weights_open(t, "ffn.up", &hx, NULL, NULL, NULL) == 0,
	       "the name lives while any handle does");
	qgraph_session_close(t);
	/* the daemon frees a closed session when it notices the hang-up */
	long long left = stat_settles(s, "weights_stored", stored0);
	tap_ok(left == stored0 && qgraph_weights_open(s, "ffn.up", &hx, NULL, NULL, NULL) == -ENOENT,
	       "and goes with the last handle");
}

/* A forced collision: different bytes are never shared, identical ones still are. */
static void test_collision(void)
{
	struct test_daemon d = { 0 };
	int r = daemon_start(&d, "--test-hash-collide");
	struct qgraph_session *s = r == 0 ? daemon_connect(&d, "collide", 8 << 20) : NULL;
	uint64_t h1, h2, h3;

	if (!tap_ok(s != NULL, "start a daemon whose weights hashes all collide")) {
		daemon_cleanup(&d);
		return;
	}
	long long p0 = daemon_stat(s, "pinned_bytes");
	qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0, .rows = ROWS,
			.cols = COLS, .data = w_a), &h1, NULL);
	long long one = daemon_stat(s, "pinned_bytes") - p0;
	qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0, .rows = ROWS,
			.cols = COLS, .data = w_b), &h2, NULL);
	tap_ok(daemon_stat(s, "weights_stored") == 2 && daemon_stat(s, "pinned_bytes") - p0 == 2 * one,
	       "different bytes with the same hash: two copies");
	qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0, .rows = ROWS,
			.cols = COLS, .data = w_a), &h3, NULL);
	tap_ok(daemon_stat(s, "weights_stored") == 2 && h3 != h1, "the same bytes again: shared, under a new handle");
	qgraph_session_close(s);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
}

/*
 * As root: a client of another user neither shares nor sees names, unless
 * the daemon shares weights within a group both are in.
 */
static void test_users(void)
{
	if (geteuid() != 0) {
		tap_skip("not root: cannot run clients as other users");
		return;
	}
	struct group *ng = getgrnam("nogroup");
	gid_t shared_gid = ng ? ng->gr_gid : 65534;
	char arg[64];
	for (int with_group = 0; with_group < 2; with_group++) {
		struct test_daemon d = { 0 };
		snprintf(arg, sizeof arg, "--share-groups %u", (unsigned)shared_gid);
		int r = daemon_start(&d, with_group ? arg : NULL);
		chmod(d.dir, 0755);
		chmod(d.sock, 0666);
		struct qgraph_session *s = r == 0 ? daemon_connect(&d, "root", 8 << 20) : NULL;
		if (!tap_ok(s != NULL, "start a daemon%s", with_group ? " sharing within nogroup" : "")) {
			daemon_cleanup(&d);
			continue;
		}
		uint64_t h;
		int up = 0;
		const char *exec = getenv("QG_EXEC");
		int emulated = exec && *exec;
		if (with_group) {
			/*
			 * root joins the group as a supplementary group: the daemon
			 * learns it through SO_PEERGROUPS.  qemu's user emulation does
			 * not pass that option on, so there root takes the group as its
			 * effective one, which SO_PEERCRED carries.
			 */
			gid_t g = shared_gid;
			if (emulated ? setegid(g) : setgroups(1, &g))
				tap_diag("cannot join group %u: %s", (unsigned)g, strerror(errno));
			qgraph_session_close(s);
			s = daemon_connect(&d, "root", 8 << 20);
		}
		up = s && qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32,
				.target = QGRAPH_TYPE_Q4_0, .rows = ROWS, .cols = COLS, .data = w_a,
				.name = "shared"), &h, NULL) == 0;
		long long p0 = daemon_stat(s, "pinned_bytes");
		int p[2], q[2];	/* child -> parent, parent -> child */
		(void)!pipe(p);
		(void)!pipe(q);
		pid_t kid = tap_fork();
		if (kid == 0) {
			if (setgid(shared_gid) || setgroups(0, NULL) || setuid(65534))
				_exit(3);
			struct qgraph_session *c = daemon_connect(&d, "nobody", 8 << 20);
			uint64_t hc, ho;
			int opened = c ? qgraph_weights_open(c, "shared", &ho, NULL, NULL, NULL) : -1;
			int upl = c ? qgraph_weights_upload(c, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32,
					.target = QGRAPH_TYPE_Q4_0, .rows = ROWS, .cols = COLS, .data = w_a), &hc, NULL)
				    : -1;
			char msg[2] = { opened == 0 ? 'o' : opened == -ENOENT ? 'n' : 'e', upl == 0 ? 'u' : 'e' };
			(void)!write(p[1], msg, 2);
			char ch;
			(void)!read(q[0], &ch, 1);
			qgraph_session_close(c);
			_exit(0);
		}
		char msg[2] = { 0, 0 };
		(void)!read(p[0], msg, 2);
		long long grew = daemon_stat(s, "pinned_bytes") - p0;
		if (!with_group)
			tap_ok(up && msg[0] == 'n' && msg[1] == 'u' && grew > 0,
			       "another user cannot open root's name and gets a copy of its own (%c%c, +%lld bytes)",
			       msg[0], msg[1], grew);
		else
			tap_ok(up && msg[0] == 'o' && msg[1] == 'u' && grew == 0,
			       "in a shared group another user opens the name and shares the bytes (%c%c, +%lld bytes)",
			       msg[0], msg[1], grew);
		(void)!write(q[1], "x", 1);
		waitpid(kid, NULL, 0);
		close(p[0]);
		close(p[1]);
		close(q[0]);
		close(q[1]);
		if (with_group && (emulated ? setegid(0) : setgroups(0, NULL)))
			tap_diag("cannot leave group %u", (unsigned)shared_gid);
		qgraph_session_close(s);
		daemon_stop(&d, SIGTERM);
		daemon_cleanup(&d);
	}
}

int main(void)
{
	struct tap_rng rng = { 3 };
	struct test_daemon d = { 0 };

	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < ROWS * COLS; i++) {
		w_a[i] = tap_randf(&rng, -1.0f, 1.0f);
		w_b[i] = tap_randf(&rng, -1.0f, 1.0f);
	}
	int r = daemon_start(&d, NULL);
	struct qgraph_session *s = r == 0 ? daemon_connect(&d, "share-test", 8 << 20) : NULL;
	if (!tap_ok(s != NULL, "start qgraphd and connect (%d)", r)) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return tap_done();
	}
	/* one copy's pinned size, as the daemon counts it */
	long long p0 = daemon_stat(s, "pinned_bytes");
	uint64_t h;
	qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0, .rows = ROWS,
			.cols = COLS, .data = w_b), &h, NULL);
	long long one = daemon_stat(s, "pinned_bytes") - p0;
	qgraph_weights_free(s, h);
	tap_ok(one > 0 && daemon_stat(s, "pinned_bytes") == p0, "one copy takes %lld pinned bytes, and is freed", one);

	test_processes(&d, s, 1, one);
	test_processes(&d, s, 4, one);
	test_processes(&d, s, 8, one);
	test_names(&d, s);
	qgraph_session_close(s);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
	test_collision();
	test_users();
	return tap_done();
}
