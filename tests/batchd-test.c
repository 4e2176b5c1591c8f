/*
 * batchd-test.c - qgraphd runs the graphs of several sessions on shared
 * weights as one batch: each session's result is the bits it gets
 * alone, a session with a bad row index fails alone, a cancel stops only
 * its own graph, a client killed while its graph is in a batch harms no
 * other, and the stats count the batches.
 *
 * The daemon runs with --batch-max 4 and a batch window of a second, so
 * that four graphs sent at once are one batch (until a window passes
 * without company, the executor waits for a full batch).  The graphs run
 * alone come last: waiting for company they never get, they end the
 * waiting after one window.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon-util.h"
#include "qgraph.h"
#include "tap.h"
#include "upload-opts.h"

/* work above the daemon's inline bound: these run on the worker pool */
enum { ROWS = 1024, COLS = 2048, TABLE = 4, NS = 4 };

static float w[ROWS * COLS];

struct member {
	struct qgraph_session *s;
	uint64_t h;
	enum qgraph_type stored;	/* the layout the daemon chose for this CPU */
	unsigned char *arena;
	int64_t to, io, yo;	/* the table, the index, the result */
	float ref[ROWS];	/* its result alone */
	float got[ROWS];	/* ... in a batch */
};

/* GET_ROWS(table, idx) -> RMS_NORM -> MUL_MAT(w, .): the shape of every member's graph. */
static struct qgraph_graph *member_graph(const struct member *m)
{
	struct qgraph_graph *g = qgraph_graph_new();
	int64_t tne[2] = { COLS, TABLE }, ine[1] = { 1 };
	int t = qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, tne, m->to);
	int i = qgraph_graph_input(g, QGRAPH_TYPE_I32, 1, ine, m->io);
	int x = qgraph_graph_op(g, QGRAPH_OP_GET_ROWS, t, i, 0);
	int h = qgraph_graph_op(g, QGRAPH_OP_RMS_NORM, x, -1, 1e-5f);
	int wi = qgraph_graph_weights(g, m->h, m->stored, ROWS, COLS);
	if (qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, h, 0), m->yo) < 0) {
		qgraph_graph_free(g);
		return NULL;
	}
	return g;
}

static int member_open(const struct test_daemon *d, struct member *m, struct tap_rng *rng)
{
	m->s = daemon_connect(d, "batchd-test", 8 << 20);
	if (!m->s || qgraph_weights_upload(m->s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0,
			.rows = ROWS, .cols = COLS, .data = w), &m->h, &m->stored))
		return -1;
	m->arena = qgraph_arena(m->s, NULL);
	m->to = qgraph_arena_alloc(m->s, TABLE * COLS * 4);
	m->io = qgraph_arena_alloc(m->s, 64);
	m->yo = qgraph_arena_alloc(m->s, ROWS * 4);
	if (m->to < 0 || m->io < 0 || m->yo < 0)
		return -1;
	for (int i = 0; i < TABLE * COLS; i++)
		((float *)(m->arena + m->to))[i] = tap_randf(rng, -1.0f, 1.0f);
	*(int32_t *)(m->arena + m->io) = (int32_t)(tap_rand(rng) % TABLE);
	return 0;
}

/*
 * Send each member's graph (M[i] with index BAD[i] if BAD and BAD[i] >= 0),
 * results poisoned first, then wait for every one: each status in ST,
 * each error text in ERR (64 bytes), each result in GOT.  CANCEL >= 0:
 * that member's graph is cancelled right after it is sent.
 */
static void run_all(struct member *m, int n, const int *bad, int cancel, int *st, char (*err)[96])
{
	uint64_t id[NS];
	int32_t keep[NS];

	for (int i = 0; i < n; i++) {
		keep[i] = *(int32_t *)(m[i].arena + m[i].io);
		if (bad && bad[i] >= 0)
			*(int32_t *)(m[i].arena + m[i].io) = bad[i];
		memset(m[i].arena + m[i].yo, 0xff, ROWS * 4);
		struct qgraph_graph *g = member_graph(&m[i]);
		st[i] = g ? qgraph_submit(m[i].s, g, QGRAPH_SUBMIT_BLOCK, &id[i]) : -ENOMEM;
		qgraph_graph_free(g);
		if (i == cancel && st[i] == 0)
			qgraph_cancel(m[i].s, id[i], NULL);
	}
	for (int i = 0; i < n; i++) {
		struct qgraph_result res = QGRAPH_RESULT_INIT;
		err[i][0] = 0;
		if (st[i] == 0)
			st[i] = qgraph_wait(m[i].s, id[i], 20000, &res) ? -ETIME : res.status;
		if (st[i])
			snprintf(err[i], sizeof err[i], "%s", qgraph_session_error(m[i].s));
		memcpy(m[i].got, m[i].arena + m[i].yo, ROWS * 4);
		*(int32_t *)(m[i].arena + m[i].io) = keep[i];
	}
}

int main(void)
{
	struct tap_rng rng = { 0x51ed270b27ad4a63ull };
	struct test_daemon d = { 0 };
	struct member m[NS];
	int st[NS];
	char err[NS][96];
	float got[NS][ROWS];

	signal(SIGPIPE, SIG_IGN);
	memset(m, 0, sizeof m);
	for (size_t i = 0; i < ROWS * COLS; i++)
		w[i] = tap_randf(&rng, -1.0f, 1.0f);
	int r = daemon_start(&d, "--batch-max 4 --batch-window-us 1000000 --threads 2");
	bool up = r == 0;
	for (int i = 0; i < NS && up; i++)
		up = member_open(&d, &m[i], &rng) == 0;
	if (!tap_ok(up, "start qgraphd, %d sessions upload one matrix (%d)", NS, r)) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return tap_done();
	}
	struct qgraph_session *s = m[0].s;
	tap_ok(daemon_stat(s, "weights_stored") == 1, "the four uploads are one stored matrix");
	tap_ok(daemon_stat(s, "batch_max") == 4 && daemon_stat(s, "batch_window_us") == 1000000,
	       "the stats tell the batching settings in force (%lld, %lld)", daemon_stat(s, "batch_max"),
	       daemon_stat(s, "batch_window_us"));

	/* a batch with a row index out of range in one member */
	const int bad[NS] = { -1, TABLE + 5, -1, -1 };
	run_all(m, NS, bad, -1, st, err);
	tap_ok(st[1] != 0 && strstr(err[1], "get_rows") && strstr(err[1], "out of range"),
	       "the bad member fails with its node: %d %s", st[1], err[1]);
	tap_ok(st[0] == 0 && st[2] == 0 && st[3] == 0, "the other three members of its batch succeed (%d %d %d)", st[0],
	       st[2], st[3]);
	for (int i = 0; i < NS; i++)
		memcpy(got[i], m[i].got, sizeof got[i]);
	tap_ok(daemon_stat(s, "batches") == 1 && daemon_stat(s, "batched_graphs") == 4,
	       "the stats count one batch of four graphs (%lld, %lld)", daemon_stat(s, "batches"),
	       daemon_stat(s, "batched_graphs"));

	/* every member good */
	run_all(m, NS, NULL, -1, st, err);
	tap_ok(st[0] == 0 && st[1] == 0 && st[2] == 0 && st[3] == 0, "a batch of four good graphs succeeds");
	tap_ok(daemon_stat(s, "batches") == 2 && daemon_stat(s, "batched_graphs") == 8,
	       "the stats count a second batch of four (%lld, %lld)", daemon_stat(s, "batches"),
	       daemon_stat(s, "batched_graphs"));
	tap_ok(daemon_stat(s, "batch_size 4") == 2 && daemon_stat(s, "batch_size 2") == -1,
	       "the size histogram holds the two batches under size 4 (%lld), none under 2",
	       daemon_stat(s, "batch_size 4"));

	/* one cancelled as it is sent */
	float before[NS][ROWS];
	for (int i = 0; i < NS; i++)
		memcpy(before[i], m[i].got, sizeof before[i]);
	run_all(m, NS, NULL, 2, st, err);
	tap_ok(st[2] == -ECANCELED || (st[2] == 0 && memcmp(m[2].got, before[2], sizeof before[2]) == 0),
	       "a member cancelled as it was sent ends cancelled, or exact (%d %s)", st[2], err[2]);
	tap_ok(st[0] == 0 && st[1] == 0 && st[3] == 0 && memcmp(m[0].got, before[0], sizeof before[0]) == 0 &&
		       memcmp(m[1].got, before[1], sizeof before[1]) == 0 &&
		       memcmp(m[3].got, before[3], sizeof before[3]) == 0,
	       "the others' results are unchanged by it");

	/*
	 * A client killed (SIGKILL) once its graph is sent, while three others'
	 * graphs gather with it into a batch: theirs are exact, and the
	 * daemon serves on.
	 */
	int go[2], sent[2];
	if (pipe(go) || pipe(sent))
		return tap_ok(0, "pipes"), tap_done();
	pid_t kid = tap_fork();
	if (kid == 0) {
		struct tap_rng crng = { 77 };
		struct member cm;
		char c;
		memset(&cm, 0, sizeof cm);
		if (member_open(&d, &cm, &crng) || read(go[0], &c, 1) != 1)
			_exit(1);
		struct qgraph_graph *g = member_graph(&cm);
		uint64_t id;
		if (!g || qgraph_submit(cm.s, g, QGRAPH_SUBMIT_BLOCK, &id))
			_exit(1);
		(void)!write(sent[1], "s", 1);
		for (;;)
			pause();	/* until killed */
	}
	char c = 0;
	(void)!write(go[1], "g", 1);
	bool kid_sent = read(sent[0], &c, 1) == 1 && c == 's';
	uint64_t ids[3];
	int kst[3];
	for (int i = 0; i < 3; i++) {
		memset(m[i].arena + m[i].yo, 0xff, ROWS * 4);
		struct qgraph_graph *g = member_graph(&m[i]);
		kst[i] = g ? qgraph_submit(m[i].s, g, QGRAPH_SUBMIT_BLOCK, &ids[i]) : -ENOMEM;
		qgraph_graph_free(g);
	}
	kill(kid, SIGKILL);
	int ws;
	waitpid(kid, &ws, 0);
	bool three_ok = kid_sent && WIFSIGNALED(ws);
	for (int i = 0; i < 3; i++) {
		struct qgraph_result res = QGRAPH_RESULT_INIT;
		if (kst[i] == 0)
			kst[i] = qgraph_wait(m[i].s, ids[i], 20000, &res) ? -ETIME : res.status;
		three_ok = three_ok && kst[i] == 0 && memcmp(m[i].arena + m[i].yo, before[i], sizeof before[i]) == 0;
	}
	tap_ok(three_ok, "a client killed with its graph in the batch: the other three are exact (%d %d %d)", kst[0],
	       kst[1], kst[2]);
	close(go[0]);
	close(go[1]);
	close(sent[0]);
	close(sent[1]);

	/* alone, one at a time: the references */
	bool alone_ok = true;
	for (int i = 0; i < NS; i++) {
		run_all(&m[i], 1, NULL, -1, &st[i], &err[i]);
		memcpy(m[i].ref, m[i].got, sizeof m[i].ref);
		alone_ok = alone_ok && st[i] == 0 && m[i].ref[0] != 0.0f;
	}
	tap_ok(alone_ok, "each member's graph alone succeeds");
	bool same = true;
	for (int i = 0; i < NS; i++)
		same = same && memcmp(before[i], m[i].ref, sizeof m[i].ref) == 0 &&
		       (i == 1 || memcmp(got[i], m[i].ref, sizeof m[i].ref) == 0);
	tap_ok(same, "every result in a batch is the bits of that graph alone");
	tap_ok(daemon_stat(s, "batches") == 4,
	       "the graphs alone are not batches (%lld)", daemon_stat(s, "batches"));
	/* the first graph alone waited a whole window for the company the batches had, and ended the waiting */
	tap_ok(daemon_stat(s, "batch_wait_ns") >= 1000000000ll, "the time waited for company is counted (%lld ns)",
	       daemon_stat(s, "batch_wait_ns"));

	for (int i = 0; i < NS; i++)
		qgraph_session_close(m[i].s);
	if (tap_failed)
		daemon_dump_log(&d);
	tap_ok(daemon_stop(&d, SIGTERM) == 0, "qgraphd stops cleanly");
	daemon_cleanup(&d);
	return tap_done();
}
