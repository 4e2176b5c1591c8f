/*
 * account-test.c - what one user holds in qgraphd is bounded across its
 * sessions and past them (daemon/accounts.c):
 *
 * - client-weights counts the pool's pieces, not the bytes asked for: 128 B
 *   uploads reach the quota after quota / 4096 of them; user-weights bounds
 *   them across a user's sessions;
 * - a model counts against its loader's user-models, past the session that
 *   loaded it, until it is unloaded: a user cannot fill the pool with a
 *   model and leave, and another user's upload still fits;
 * - registered graphs' metadata is bounded per user (user-graph-metadata)
 *   across that user's sessions: a second session is refused at the
 *   user's total, another user is not.
 *
 * The users are made with setuid in forked children: those parts need
 * root, and are skipped without it.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon-util.h"
#include "gguf-file.h"
#include "gguf.h"
#include "qgraph.h"
#include "tap.h"
#include "upload-opts.h"

enum {
	UID_A = 60051,	/* loads models */
	UID_B = 60052,	/* uploads beside them; registers graphs beside UID_A's */
};

static struct qgraph_session *open_session(const struct test_daemon *d, char *err, size_t len)
{
	struct qgraph_connect_opts o = { .socket = d->sock, .name = "account-test", .arena_bytes = 4 << 20 };
	struct qgraph_session *s = NULL;

	err[0] = 0;
	return qgraph_connect(&o, &s, err, len) ? NULL : s;
}

/*
 * Run FN(D, ARG, MSG, LEN) in a child as UID (its own gid, no other
 * groups): FN's result (0 or -errno), or -1000 if the child did not get
 * that far; what it said in MSG.
 */
static int as_user(uid_t uid, int (*fn)(const struct test_daemon *, const void *, char *, size_t),
		   const struct test_daemon *d, const void *arg, char *msg, size_t len)
{
	int p[2], st = 0;
	int32_t rc = -1000;

	msg[0] = 0;
	if (pipe(p))
		return -1000;
	pid_t pid = tap_fork();
	if (pid == 0) {
		char m[512] = "";
		int32_t r;
		close(p[0]);
		if (setgroups(0, NULL) || setgid(uid) || setuid(uid)) {
			snprintf(m, sizeof m, "cannot become uid %u: %s", (unsigned)uid, strerror(errno));
			r = -1000;
		} else {
			r = fn(d, arg, m, sizeof m);
		}
		(void)!write(p[1], &r, sizeof r);
		(void)!write(p[1], m, strlen(m));
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &rc, sizeof rc) != sizeof rc)
		rc = -1000;
	ssize_t n = read(p[0], msg, len - 1);
	msg[n > 0 ? n : 0] = 0;
	close(p[0]);
	waitpid(pid, &st, 0);
	return rc;
}

/* ---------------------------------------------------------------- client-weights counts pieces */

enum { TRIES = 600 };

/* Upload different 128-byte matrices (1 x 32 f32) through S from number FIRST on until one is refused: how many fit. */
static int tiny_uploads(struct qgraph_session *s, int first, uint64_t *h)
{
	float w[32];
	int n = 0;

	for (; n < TRIES; n++) {
		for (int i = 0; i < 32; i++)
			w[i] = (float)((first + n) * 32 + i);	/* no two alike: none is shared */
		if (qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
				.rows = 1, .cols = 32, .data = w), &h[n], NULL))
			break;
	}
	return n;
}

/* As a child: one 128-byte upload.  0 or -errno, the refusal in MSG. */
static int one_tiny_upload(const struct test_daemon *d, const void *arg, char *msg, size_t len)
{
	struct qgraph_session *s = open_session(d, msg, len);
	float w[32];
	uint64_t h;

	(void)arg;
	if (!s)
		return -1001;
	for (int i = 0; i < 32; i++)
		w[i] = 7.0f + (float)i;
	int r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
			.rows = 1, .cols = 32, .data = w), &h, NULL);
	snprintf(msg, len, "%s", r ? qgraph_session_error(s) : "stored");
	qgraph_session_close(s);
	return r;
}

/*
 * Item 5: 128-byte matrices, each different, take a 4 KiB piece of the
 * pool each: a 64K client-weights holds 16 of them, and the 17th is
 * refused naming the quota.  Freeing one gives its piece back.  With
 * user-weights 96K a second session of the same user holds 8 more, then
 * is refused naming user-weights; another user is not.
 */
static void test_pieces(void)
{
	enum { QUOTA = 64 << 10 };
	struct test_daemon d = { 0 };
	static uint64_t h[TRIES];
	char err[256], msg[512], args[160];
	float w[32];
	int n = 0;

	snprintf(args, sizeof args, "--client-weights 64K --user-weights 96K --socket-mode 0666 --allow-users %d", UID_B);
	int started = daemon_start(&d, args) == 0;
	chmod(d.dir, 0711);	/* other users reach the socket */
	if (!tap_ok(started, "start a daemon with client-weights 64K, user-weights 96K")) {
		daemon_cleanup(&d);
		return;
	}
	struct qgraph_session *s = open_session(&d, err, sizeof err), *s2 = NULL;
	if (!tap_ok(s != NULL, "a session (%s)", err))
		goto out;
	n = tiny_uploads(s, 0, h);
	const char *why = qgraph_session_error(s);
	tap_ok(n == QUOTA / 4096 && strstr(why, "quota client-weights"),
	       "128 B uploads reach client-weights 64K after %d of them (%d expected): \"%s\"", n, QUOTA / 4096, why);
	long long acct = daemon_stat(s, "account_weight_bytes");
	tap_ok(acct == (long long)n * 4096, "stats show the user's account holding %lld bytes of weights (%d pieces)",
	       acct, n);
	w[0] = -1.0f;
	for (int i = 1; i < 32; i++)
		w[i] = 0.5f;
	tap_ok(n > 0 && qgraph_weights_free(s, h[0]) == 0 &&
		       qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
				.rows = 1, .cols = 32, .data = w), &h[0], NULL) == 0,
	       "freeing one gives its piece back: another fits (%s)", qgraph_session_error(s));
	s2 = open_session(&d, err, sizeof err);
	int n2 = s2 ? tiny_uploads(s2, 1000, h) : -1;
	why = s2 ? qgraph_session_error(s2) : err;
	tap_ok(n2 == 8 && strstr(why, "quota user-weights"),
	       "a second session of the user holds %d more (8 expected), then reaches user-weights: \"%s\"", n2, why);
	if (geteuid() == 0) {
		int r = as_user(UID_B, one_tiny_upload, &d, NULL, msg, sizeof msg);
		tap_ok(r == 0, "another user's upload still fits (%d: %s)", r, msg);
	} else {
		tap_skip("not root: another user cannot be played");
	}
out:
	qgraph_session_close(s2);
	qgraph_session_close(s);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
}

/* ---------------------------------------------------------------- user-models */

enum { ROWS = 128, COLS = 1024 };	/* an f32 tensor of 512 KiB */

/* Write a GGUF file at PATH of N f32 tensors of ROWS x COLS, their values from SEED.  0 or -errno. */
static int write_model(const char *path, int n, int seed)
{
	static float t[ROWS * COLS];
	struct qg_gguf_writer *wr = qg_gguf_writer_new(0);
	char name[32];
	int r = wr ? 0 : -ENOMEM;

	for (int k = 0; k < n && !r; k++) {
		for (size_t i = 0; i < ROWS * COLS; i++)
			t[i] = (float)((i * 31 + (size_t)k * 7 + (size_t)seed * 1013) % 97) * 0.125f;
		snprintf(name, sizeof name, "blk.%d.weight", k);
		r = qg_gguf_writer_tensor(wr, name, QG_GGML_F32, 2, (int64_t[]){ COLS, ROWS }, t);
	}
	if (!r)
		r = qg_gguf_writer_kv_string(wr, "general.architecture", "llama");
	return gguf_file_save(wr, r, path);
}

struct load {
	const char *path, *name;
	int unload_first;	/* unload model "small" first */
};

/*
 * As a child: connect and load L's model (after an unload if asked).  The
 * load's result, its error in MSG (or, loaded, what stats say the user's
 * account holds in models).
 */
static int load_model(const struct test_daemon *d, const void *arg, char *msg, size_t len)
{
	const struct load *l = arg;
	struct qgraph_session *s = open_session(d, msg, len);

	if (!s)
		return -1001;
	int r = l->unload_first ? qgraph_model_unload(s, "small") : 0;
	if (!r)
		r = qgraph_model_load(s, l->path, l->name, NULL, NULL);
	if (r)
		snprintf(msg, len, "%s", qgraph_session_error(s));
	else
		snprintf(msg, len, "loaded; account_model_bytes %lld", daemon_stat(s, "account_model_bytes"));
	qgraph_session_close(s);
	return r;
}

/* As a child: connect and upload a 1 MiB f32 matrix.  0 or -errno, the refusal in MSG. */
static int upload_1m(const struct test_daemon *d, const void *arg, char *msg, size_t len)
{
	static float w[256 * 1024];
	struct qgraph_session *s = open_session(d, msg, len);
	uint64_t h;

	(void)arg;
	if (!s)
		return -1001;
	for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
		w[i] = (float)(i % 89) - 44.0f;
	int r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
			.rows = 256, .cols = 1024, .data = w), &h, NULL);
	snprintf(msg, len, "%s", r ? qgraph_session_error(s) : "stored");
	qgraph_session_close(s);
	return r;
}

/*
 * Item 2: with a 4M pool and user-models 2M, uid A's 3.5M model is
 * refused at its quota and leaves nothing; its 1.5M model loads, and
 * stays counted after A's session ends: A's next 1M model is refused until
 * A unloads the first.  Meanwhile uid B's 1M upload fits the pool.  Root's
 * loads are not bounded.
 */
static void test_models(const char *dir)
{
	struct test_daemon d = { 0 };
	char big[128], small[128], more[128], msg[512], args[160];
	int r;

	snprintf(big, sizeof big, "%s/big.gguf", dir);
	snprintf(small, sizeof small, "%s/small.gguf", dir);
	snprintf(more, sizeof more, "%s/more.gguf", dir);
	if (!tap_ok(write_model(big, 7, 1) == 0 && write_model(small, 3, 2) == 0 && write_model(more, 2, 3) == 0,
		    "the writer makes models of 3.5M, 1.5M and 1M"))
		return;
	snprintf(args, sizeof args, "--pool-size 4M --user-models 2M --socket-mode 0666 --allow-users %d,%d", UID_A,
		 UID_B);
	int started = daemon_start(&d, args) == 0;
	chmod(d.dir, 0711);	/* other users reach the socket */
	if (!tap_ok(started, "start a daemon with a 4M pool and user-models 2M")) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return;
	}

	r = as_user(UID_A, load_model, &d, &(struct load){ big, "big", 0 }, msg, sizeof msg);
	tap_ok(r == -EDQUOT && strstr(msg, "quota user-models"), "uid %d's 3.5M model is refused at user-models (%d: %s)",
	       UID_A, r, msg);
	r = as_user(UID_A, load_model, &d, &(struct load){ small, "small", 0 }, msg, sizeof msg);
	tap_ok(r == 0 && strstr(msg, "account_model_bytes 1572864"), "uid %d's 1.5M model loads, and its session ends (%d: %s)",
	       UID_A, r, msg);
	r = as_user(UID_A, load_model, &d, &(struct load){ more, "more", 0 }, msg, sizeof msg);
	tap_ok(r == -EDQUOT && strstr(msg, "quota user-models"),
	       "in a new session, uid %d's next 1M model is refused: the first still counts (%d: %s)", UID_A, r, msg);
	r = as_user(UID_B, upload_1m, &d, NULL, msg, sizeof msg);
	tap_ok(r == 0, "uid %d's 1M upload fits the pool beside it (%d: %s)", UID_B, r, msg);
	r = as_user(UID_A, load_model, &d, &(struct load){ more, "more", 1 }, msg, sizeof msg);
	tap_ok(r == 0 && strstr(msg, "account_model_bytes 1048576"),
	       "once uid %d unloads its first model, the 1M one loads (%d: %s)", UID_A, r, msg);

	/* root is not bounded: with the pool free again, its 3.5M model loads */
	struct qgraph_session *s = open_session(&d, msg, sizeof msg);
	r = s ? qgraph_model_unload(s, "more") : -1;
	if (!r)
		r = qgraph_model_load(s, big, "big", NULL, NULL);
	tap_ok(r == 0 && daemon_stat(s, "account_model_bytes") == 7 * (ROWS * COLS * 4),
	       "root unloads it and loads the 3.5M model past user-models (%d: %s)", r, s ? qgraph_session_error(s) : msg);
	qgraph_session_close(s);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
	unlink(big);
	unlink(small);
	unlink(more);
}

/* ---------------------------------------------------------------- user-graph-metadata */

/* a graph of about half a megabyte of metadata: several fit each quota, whatever the plan takes per thread */
enum { NODES = 500, MAX_GRAPHS = 64 };

/* A chain of NODES silu nodes on 16 floats at arena offset 0. */
static struct qgraph_graph *chain(void)
{
	int64_t ne[1] = { 16 };
	struct qgraph_graph *g = qgraph_graph_new();
	int x = qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, 0);

	for (int i = 0; i < NODES; i++)
		x = qgraph_graph_op(g, QGRAPH_OP_SILU, x, -1, 0);
	qgraph_graph_output(g, x, 4096);
	return g;
}

/* Register chain graphs through S until one is refused (at most MAX_GRAPHS): how many were registered. */
static int register_until_refused(struct qgraph_session *s)
{
	struct qgraph_graph *g = chain();
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	uint64_t id;
	int n = 0;

	memset(qgraph_arena(s, NULL), 0, 8192);
	while (n < MAX_GRAPHS && qgraph_submit(s, g, QGRAPH_SUBMIT_KEEP | QGRAPH_SUBMIT_BLOCK, &id) == 0 &&
	       qgraph_wait(s, id, 20000, &res) == 0 && res.status == 0)
		n++;
	qgraph_graph_free(g);
	return n;
}

/* As a child: register one chain graph.  0, or -EDQUOT with the refusal in MSG. */
static int register_one(const struct test_daemon *d, const void *arg, char *msg, size_t len)
{
	struct qgraph_graph *g = chain();
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	struct qgraph_session *s = open_session(d, msg, len);
	uint64_t id;

	(void)arg;
	if (!s)
		return -1001;
	memset(qgraph_arena(s, NULL), 0, 8192);
	int r = qgraph_submit(s, g, QGRAPH_SUBMIT_KEEP | QGRAPH_SUBMIT_BLOCK, &id);
	if (!r)
		r = qgraph_wait(s, id, 20000, &res);
	if (!r && res.status)
		r = -EDQUOT;
	snprintf(msg, len, "%s", r ? qgraph_session_error(s) : "registered");
	qgraph_graph_free(g);
	qgraph_session_close(s);
	return r;
}

/*
 * Item 11: client-memory 8M bounds each session, user-graph-metadata 12M
 * the user's sessions together: a first session registers graphs up to
 * its 8M, a second of the same user only up to the user's 12M (less than
 * its own 8M), refused naming user-graph-metadata; another user's session
 * is not.
 */
static void test_graph_metadata(void)
{
	struct test_daemon d = { 0 };
	char err[256], msg[512], args[200];

	snprintf(args, sizeof args,
		 "--client-memory 8M --user-graph-metadata 12M --max-graphs %d --socket-mode 0666 --allow-users %d",
		 MAX_GRAPHS, UID_B);
	int started = daemon_start(&d, args) == 0;
	chmod(d.dir, 0711);
	if (!tap_ok(started, "start a daemon with client-memory 8M and user-graph-metadata 12M")) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return;
	}
	struct qgraph_session *s1 = open_session(&d, err, sizeof err), *s2 = open_session(&d, err, sizeof err);
	if (!tap_ok(s1 && s2, "two sessions of one user (%s)", err))
		goto out;
	int n1 = register_until_refused(s1);
	const char *why1 = qgraph_session_error(s1);
	tap_ok(n1 > 0 && n1 < MAX_GRAPHS && strstr(why1, "quota client-memory"),
	       "the first session registers %d graphs, then reaches client-memory: \"%s\"", n1, why1);
	long long one = n1 > 0 ? daemon_stat(s1, "account_graph_metadata_bytes") / n1 : 0;
	int n2 = register_until_refused(s2);
	const char *why2 = qgraph_session_error(s2);
	tap_ok(one > 0 && (n1 + n2) * one <= 12 << 20 && strstr(why2, "quota user-graph-metadata"),
	       "the second registers %d of %lld bytes, then reaches the user's user-graph-metadata: \"%s\"", n2, one,
	       why2);
	long long acct = daemon_stat(s2, "account_graph_metadata_bytes");
	tap_ok(acct == (n1 + n2) * one, "stats show the user's graphs holding %lld bytes of metadata", acct);
	if (geteuid() == 0) {
		int r = as_user(UID_B, register_one, &d, NULL, msg, sizeof msg);
		tap_ok(r == 0, "another user's session still registers one (%d: %s)", r, msg);
	} else {
		tap_skip("not root: another user cannot be played");
	}
	qgraph_session_close(s1);
	s1 = NULL;
	/* the first session's graphs are let go when the daemon frees it: wait for the state, bounded */
	int n3 = 0;
	for (int i = 0; i < 250 && n3 == 0; i++) {
		n3 = register_until_refused(s2);
		if (n3 == 0)
			usleep(20000);
	}
	tap_ok(n3 > 0, "once the first session ends, the second registers %d more (%s)", n3, qgraph_session_error(s2));
out:
	qgraph_session_close(s1);
	qgraph_session_close(s2);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
}

int main(void)
{
	char dir[] = "/tmp/qg-account-XXXXXX";

	signal(SIGPIPE, SIG_IGN);
	test_pieces();
	if (geteuid() != 0) {
		tap_skip("user-models: not root: other users cannot be played");
	} else if (!mkdtemp(dir) || chmod(dir, 0755)) {
		tap_ok(0, "a directory for the model files: %s", strerror(errno));
	} else {
		test_models(dir);
		rmdir(dir);
	}
	test_graph_metadata();
	return tap_done();
}
