/*
 * names-test.c - names belong to the user who gave them.  Processes of
 * five users (forked, each with its own uid and groups) upload, name,
 * load, open and unload, and each must find what it meant: its own
 * upload before anyone's model, its own model of a name another user
 * also loaded, a public (root's) model, or what a share group it is in
 * published; never another user's private name or model.  A name given
 * by an upload that deduplicates onto a public matrix is the uploader's
 * alone; stats do not tell a user of another's dedup hits; a matrix whose
 * model goes stays its holders'.  A model of many tensors and many names
 * of one user each resolve to their own matrix, past every growth of the
 * daemon's indexes.  Needs root (skipped otherwise).  Runs its own daemon.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
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

/* A, B and C share nothing; D and E are in the share group. */
enum { UID_A = 40031, UID_B, UID_C, UID_D, UID_E };
enum { GID_SHARE = 40040, GID_LONE = 40041 };
enum { COLS = 32, ROWS_MAX = 4 };

/* Three sets of values: the models' files hold them as F32 of 2, 3 and 4 rows. */
static float vals[3][ROWS_MAX * COLS];

enum op { OP_UPLOAD, OP_OPEN, OP_LOAD, OP_UNLOAD, OP_STAT, OP_STATS_HAVE };

struct cmd {
	enum op op;
	int which, rows;	/* OP_UPLOAD: vals[WHICH], ROWS rows */
	char name[64];		/* a weights or model name ("" for none) */
	char arg[192];		/* OP_LOAD: the file; OP_STAT: the key; OP_STATS_HAVE: the text */
};

struct res {
	int rc;
	long long v;		/* OP_OPEN: the rows opened; OP_STAT: the value */
};

/* One user's process, driven through two pipes. */
struct agent {
	pid_t pid;
	int to, from;
};

static struct test_daemon d;

static void serve(struct qgraph_session *s, const struct cmd *c, struct res *r)
{
	static char buf[16384];
	uint64_t h;
	int64_t rows = 0;

	switch (c->op) {
	case OP_UPLOAD:
		r->rc = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
				.rows = c->rows, .cols = COLS, .data = vals[c->which],
				.name = c->name[0] ? c->name : NULL), &h, NULL);
		break;
	case OP_OPEN:
		r->rc = qgraph_weights_open(s, c->name, &h, NULL, &rows, NULL);
		r->v = rows;
		break;
	case OP_LOAD:
		r->rc = qgraph_model_load(s, c->arg, c->name, NULL, NULL);
		break;
	case OP_UNLOAD:
		r->rc = qgraph_model_unload(s, c->name);
		break;
	case OP_STAT:
		r->v = daemon_stat(s, c->arg);
		r->rc = r->v < 0 ? -EIO : 0;
		break;
	case OP_STATS_HAVE:
		r->rc = qgraph_stats(s, buf, sizeof buf) < 0 ? -EIO : 0;
		r->v = r->rc == 0 && strstr(buf, c->arg) != NULL;
		break;
	}
}

/* The agent's body: become UID in GID (and GROUPS), connect, serve commands until EOF. */
static _Noreturn void agent_main(uid_t uid, gid_t gid, int in, int out)
{
	/* nothing of the parent's but the two pipe ends: another agent's ends would keep its pipes open */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != in && fd != out)
			close(fd);
	if (setgroups(0, NULL) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid))
		_exit(2);
	char name[32];
	snprintf(name, sizeof name, "names-%u", (unsigned)uid);
	struct qgraph_session *s = daemon_connect(&d, name, 1 << 20);
	struct cmd c;
	while (read(in, &c, sizeof c) == sizeof c) {
		struct res r = { s ? 0 : -ENOTCONN, 0 };
		if (s)
			serve(s, &c, &r);
		if (write(out, &r, sizeof r) != sizeof r)
			break;
	}
	qgraph_session_close(s);
	_exit(0);
}

static int agent_start(struct agent *a, uid_t uid, gid_t gid)
{
	int to[2], from[2];

	if (pipe(to))
		return -1;
	if (pipe(from)) {
		close(to[0]);
		close(to[1]);
		return -1;
	}
	a->pid = tap_fork();
	if (a->pid == 0) {
		close(to[1]);
		close(from[0]);
		agent_main(uid, gid, to[0], from[1]);
	}
	close(to[0]);
	close(from[1]);
	a->to = to[1];
	a->from = from[0];
	return 0;
}

/* Send C to A and wait for the answer, at most 30 s; -ETIMEDOUT if none came. */
static struct res ask(const struct agent *a, const struct cmd *c)
{
	struct res r = { -ETIMEDOUT, -1 };
	struct pollfd p = { .fd = a->from, .events = POLLIN };

	if (write(a->to, c, sizeof *c) != sizeof *c)
		return r;
	if (poll(&p, 1, 30000) == 1 && read(a->from, &r, sizeof r) != sizeof r)
		r = (struct res){ -EIO, -1 };
	return r;
}

static int upload(const struct agent *a, const char *name, int which, int rows)
{
	struct cmd c = { .op = OP_UPLOAD, .which = which, .rows = rows };

	snprintf(c.name, sizeof c.name, "%s", name);
	return ask(a, &c).rc;
}

/* The rows of what A opens as NAME, or -errno. */
static long long open_rows(const struct agent *a, const char *name)
{
	struct cmd c = { .op = OP_OPEN };

	snprintf(c.name, sizeof c.name, "%s", name);
	struct res r = ask(a, &c);
	return r.rc ? r.rc : r.v;
}

static int load(const struct agent *a, const char *path, const char *name)
{
	struct cmd c = { .op = OP_LOAD };

	snprintf(c.name, sizeof c.name, "%s", name);
	snprintf(c.arg, sizeof c.arg, "%s", path);
	return ask(a, &c).rc;
}

static int unload(const struct agent *a, const char *name)
{
	struct cmd c = { .op = OP_UNLOAD };

	snprintf(c.name, sizeof c.name, "%s", name);
	return ask(a, &c).rc;
}

static long long stat_of(const struct agent *a, const char *key)
{
	struct cmd c = { .op = OP_STAT };

	snprintf(c.arg, sizeof c.arg, "%s", key);
	return ask(a, &c).v;
}

/* 1 if A's stats text holds TEXT, 0 if not, -1 on an error. */
static int stats_have(const struct agent *a, const char *text)
{
	struct cmd c = { .op = OP_STATS_HAVE };

	snprintf(c.arg, sizeof c.arg, "%s", text);
	struct res r = ask(a, &c);
	return r.rc ? -1 : (int)r.v;
}

static void agent_stop(struct agent *a)
{
	if (a->pid <= 0)
		return;
	close(a->to);
	close(a->from);
	waitpid(a->pid, NULL, 0);
	a->pid = 0;
}

/* A model file of one F32 tensor "w": vals[WHICH], ROWS rows. */
static int write_model(const char *path, int which, int rows)
{
	struct qg_gguf_writer *wr = qg_gguf_writer_new(0);
	int r = qg_gguf_writer_kv_string(wr, "general.architecture", "llama");

	r |= qg_gguf_writer_tensor(wr, "w", QG_GGML_F32, 2, (int64_t[]){ COLS, rows }, vals[which]);
	return gguf_file_save(wr, r, path);
}

enum { MANY_TENSORS = 700, MANY_NAMES = 1200 };

/* A model file of MANY_TENSORS F32 tensors "tNNN" of one row, tensor i of i % 4 + 1 rows. */
static int write_many(const char *path)
{
	struct qg_gguf_writer *wr = qg_gguf_writer_new(0);
	char name[16];
	int r = qg_gguf_writer_kv_string(wr, "general.architecture", "llama");

	for (int i = 0; i < MANY_TENSORS && !r; i++) {
		snprintf(name, sizeof name, "t%03d", i);
		r = qg_gguf_writer_tensor(wr, name, QG_GGML_F32, 2, (int64_t[]){ COLS, i % 4 + 1 }, vals[i % 3]);
	}
	return gguf_file_save(wr, r, path);
}

/* Many tensors and many names: each opens its own, before and after the indexes grow. */
static void test_many(const char *dir)
{
	char path[160], name[32];
	struct qgraph_session *s = daemon_connect(&d, "names-many", 1 << 20);
	int64_t rows;
	uint64_t h;
	int bad = 0, i;

	snprintf(path, sizeof path, "%s/many.gguf", dir);
	if (!tap_ok(s && write_many(path) == 0 && qgraph_model_load(s, path, "many", NULL, NULL) == 0,
		    "load a model of %d tensors", MANY_TENSORS)) {
		qgraph_session_close(s);
		return;
	}
	for (i = 0; i < MANY_TENSORS; i++) {
		snprintf(name, sizeof name, "many/t%03d", i);
		if (qgraph_weights_open(s, name, &h, NULL, &rows, NULL) || rows != i % 4 + 1 || qgraph_weights_free(s, h))
			bad++;
	}
	snprintf(name, sizeof name, "many/t%03d", MANY_TENSORS);
	tap_ok(bad == 0 && qgraph_weights_open(s, name, &h, NULL, NULL, NULL) == -ENOENT,
	       "each of its tensors opens by name with its own shape (%d wrong); one past them is not found", bad);
	float w[COLS];
	for (i = 0, bad = 0; i < MANY_NAMES; i++) {
		for (int j = 0; j < COLS; j++)
			w[j] = (float)(i * COLS + j);	/* new bytes for each */
		snprintf(name, sizeof name, "n%04d", i);
		if (qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
				.rows = 1, .cols = COLS, .data = w, .name = name), &h, NULL))
			bad++;
	}
	tap_ok(bad == 0, "upload %d weights, each of its own name (%d refused)", MANY_NAMES, bad);
	for (i = 0, bad = 0; i < MANY_NAMES; i++) {
		uint64_t o;
		snprintf(name, sizeof name, "n%04d", i);
		if (qgraph_weights_open(s, name, &o, NULL, NULL, NULL)) {
			bad++;
			continue;
		}
		/* the same matrix: uploading its bytes again under its name is a dedup, under another a refusal */
		for (int j = 0; j < COLS; j++)
			w[j] = (float)(i * COLS + j);
		if (qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
				.rows = 1, .cols = COLS, .data = w, .name = name), &h, NULL) ||
		    qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
				.rows = 1, .cols = COLS, .data = w, .name = "n-other"), &h, NULL) !=
			    -EINVAL)
			bad++;
	}
	tap_ok(bad == 0, "each name opens its own matrix (%d wrong)", bad);
	tap_ok(qgraph_model_unload(s, "many") == 0 && qgraph_weights_open(s, "many/t000", &h, NULL, NULL, NULL) == -ENOENT,
	       "the model unloads; its names are gone");
	qgraph_session_close(s);
	unlink(path);
}

int main(void)
{
	struct tap_rng rng = { 0x6e616d6573ULL };
	char dir[] = "/tmp/qg-names-XXXXXX", m2[128], m3[128], m4[128], args[256];
	struct agent a = { 0 }, a2 = { 0 }, b = { 0 }, c = { 0 }, dd = { 0 }, e = { 0 }, root = { 0 };

	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root: its clients are processes of other users\n");
		return 77;
	}
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < ROWS_MAX * COLS; j++)
			vals[i][j] = tap_randf(&rng, -1, 1);
	if (!mkdtemp(dir))
		return 99;
	chmod(dir, 0755);	/* the other users' clients read the files */
	snprintf(m2, sizeof m2, "%s/m2.gguf", dir);
	snprintf(m3, sizeof m3, "%s/m3.gguf", dir);
	snprintf(m4, sizeof m4, "%s/m4.gguf", dir);
	tap_ok(write_model(m2, 0, 2) == 0 && write_model(m3, 1, 3) == 0 && write_model(m4, 2, 4) == 0,
	       "the model files: one F32 tensor \"w\" of 2, 3 and 4 rows");

	snprintf(args, sizeof args, "--socket-mode 0666 --allow-users %d,%d,%d,%d,%d --share-groups %d", UID_A,
		 UID_B, UID_C, UID_D, UID_E, GID_SHARE);
	int started = daemon_start(&d, args) == 0;
	chmod(d.dir, 0711);	/* other users reach the socket */
	if (!tap_ok(started, "start qgraphd for five users, sharing within group %d", GID_SHARE)) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return tap_done();
	}
	agent_start(&root, 0, 0);
	agent_start(&a, UID_A, GID_LONE);
	agent_start(&a2, UID_A, GID_LONE);
	agent_start(&b, UID_B, GID_LONE);
	agent_start(&c, UID_C, GID_LONE);
	agent_start(&dd, UID_D, GID_SHARE);
	agent_start(&e, UID_E, GID_SHARE);

	/* a model shadows nobody's own names */
	tap_ok(upload(&a, "proj/w", 0, 1) == 0, "A uploads its own weights named proj/w (1 row)");
	tap_ok(load(&b, m2, "proj") == 0, "B loads model proj (its w: 2 rows)");
	long long ra = open_rows(&a, "proj/w"), rb = open_rows(&b, "proj/w"), rc = open_rows(&c, "proj/w");
	tap_ok(ra == 1, "A's proj/w is its own upload, not B's model's tensor (%lld rows)", ra);
	tap_ok(rb == 2, "B's proj/w is its model's tensor (%lld rows)", rb);
	tap_ok(rc == -ENOENT, "C does not see B's model (%lld)", rc);
	tap_ok(stats_have(&c, "model \"proj\"") == 0 && stats_have(&b, "model \"proj\"") == 1,
	       "C's stats do not list B's model; B's do");

	/* model names are scoped to their loader */
	tap_ok(load(&c, m3, "proj") == 0, "C loads a model proj of its own beside B's");
	rb = open_rows(&b, "proj/w");
	rc = open_rows(&c, "proj/w");
	tap_ok(rb == 2 && rc == 3, "each opens its own proj/w (B %lld rows, C %lld)", rb, rc);
	tap_ok(load(&c, m3, "proj") == -EINVAL, "C's second load of proj is refused");
	tap_ok(unload(&c, "proj") == 0 && open_rows(&c, "proj/w") == -ENOENT && open_rows(&b, "proj/w") == 2,
	       "C unloads its proj; B's stays");
	tap_ok(unload(&a, "proj") != 0 && open_rows(&b, "proj/w") == 2, "A cannot unload B's proj");

	/* public models: root's */
	long long stored0 = stat_of(&root, "weights_stored");
	tap_ok(load(&root, m4, "pub") == 0 && open_rows(&a, "pub/w") == 4 && open_rows(&c, "pub/w") == 4,
	       "root's model pub is public: A and C open pub/w");
	tap_ok(unload(&b, "pub") != 0 && open_rows(&a, "pub/w") == 4, "B may not unload root's model");
	tap_ok(unload(&root, "proj") == 0 && open_rows(&b, "proj/w") == -ENOENT, "root unloads B's proj");

	/* a name given to a public matrix is the namer's alone */
	long long stored1 = stat_of(&root, "weights_stored");
	tap_ok(upload(&b, "victim-w", 2, 4) == 0 && stat_of(&root, "weights_stored") == stored1,
	       "B uploads pub/w's bytes as victim-w: deduplicated (%lld stored, %lld before pub)", stored1, stored0);
	ra = open_rows(&a, "victim-w");
	tap_ok(ra == -ENOENT, "A does not see B's name victim-w (%lld)", ra);
	tap_ok(upload(&a, "victim-w", 0, 2) == 0, "A names weights of its own victim-w");
	ra = open_rows(&a, "victim-w");
	rb = open_rows(&b, "victim-w");
	tap_ok(ra == 2 && rb == 4, "each opens its own victim-w (A %lld rows, B %lld)", ra, rb);

	/* stats tell no user of another's dedup hits */
	long long ref0 = stat_of(&b, "weights_referenced_bytes"), st0 = stat_of(&b, "weights_stored");
	tap_ok(upload(&c, "", 2, 4) == 0, "C uploads pub/w's bytes");
	long long ref1 = stat_of(&b, "weights_referenced_bytes"), st1 = stat_of(&b, "weights_stored");
	tap_ok(ref1 == ref0 && st1 == st0 && ref0 > 0,
	       "B's stats count B's holdings alone (referenced %lld then %lld, stored %lld then %lld)", ref0, ref1, st0,
	       st1);

	/* a matrix whose public model goes stays its holders', and its publisher does not take it */
	tap_ok(load(&root, m3, "pub2") == 0 && upload(&a, "mine", 1, 3) == 0,
	       "root loads model pub2; A uploads pub2/w's bytes as mine");
	tap_ok(unload(&root, "pub2") == 0, "root unloads pub2");
	ra = open_rows(&a2, "mine");
	tap_ok(ra == 3, "A's other process opens A's mine (%lld rows)", ra);
	long long rr = open_rows(&root, "mine");
	rb = open_rows(&b, "mine");
	rc = open_rows(&c, "mine");
	tap_ok(rr == -ENOENT && rb == -ENOENT && rc == -ENOENT,
	       "the model's publisher, B and C do not open A's name (%lld, %lld, %lld)", rr, rb, rc);
	tap_ok(unload(&root, "pub") == 0, "root unloads pub");

	/* share groups: D and E see each other's models and names, C neither */
	tap_ok(load(&dd, m2, "gm") == 0, "D loads model gm in the share group");
	long long re = open_rows(&e, "gm/w");
	rc = open_rows(&c, "gm/w");
	tap_ok(re == 2 && rc == -ENOENT, "E (in the group) opens gm/w (%lld rows); C does not (%lld)", re, rc);
	tap_ok(stats_have(&e, "model \"gm\"") == 1 && stats_have(&c, "model \"gm\"") == 0,
	       "E's stats list gm; C's do not");
	tap_ok(upload(&dd, "gname", 1, 3) == 0 && open_rows(&e, "gname") == 3 && open_rows(&c, "gname") == -ENOENT,
	       "D's name gname: E opens it, C does not");
	tap_ok(upload(&e, "gm/w", 0, 1) == 0 && open_rows(&e, "gm/w") == 1 && open_rows(&dd, "gm/w") == 2,
	       "E's own gm/w comes before the group's model; D still opens its model's");
	tap_ok(unload(&e, "gm") != 0 && unload(&dd, "gm") == 0, "E may not unload D's gm; D does");
	long long rd = open_rows(&dd, "gm/w");
	rc = open_rows(&c, "gm/w");
	tap_ok(rd == 1 && rc == -ENOENT, "now D's gm/w is E's upload, by the group (%lld rows); C's none (%lld)", rd,
	       rc);

	test_many(dir);

	agent_stop(&root);
	agent_stop(&a);
	agent_stop(&a2);
	agent_stop(&b);
	agent_stop(&c);
	agent_stop(&dd);
	agent_stop(&e);
	struct qgraph_session *s = daemon_connect(&d, "names-end", 1 << 20);
	long long pinned = -1;
	for (int i = 0; s && i < 200 && (pinned = daemon_stat(s, "pinned_bytes")) != 0; i++)
		usleep(10000);	/* the agents' sessions end as the daemon reads their hang-ups */
	tap_ok(pinned == 0, "every process gone: nothing stays pinned (%lld)", pinned);
	qgraph_session_close(s);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
	unlink(m2);
	unlink(m3);
	unlink(m4);
	rmdir(dir);
	return tap_done();
}
