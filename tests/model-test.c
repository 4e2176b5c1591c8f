/*
 * model-test.c - GGUF models held by the daemon: a model written by the
 * project's own GGUF writer is loaded (with progress), listed in stats,
 * outlives the session that loaded it, is opened by name from a process
 * of another allowed user whose MUL_MATs on it match the in-process
 * kernels on the file's bytes, cannot be unloaded by that user, is
 * unloaded by its own, and stats return to their baseline.  A daemon
 * started with --preload holds the model from the start; one given a
 * broken file does not start and says which field is wrong.  Uploads take
 * f16 and q8_0 sources as the header promises.  The other user's part
 * needs root (it is skipped otherwise).  Runs its own daemons.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon-util.h"
#include "gguf-file.h"
#include "fp16.h"
#include "gguf.h"
#include "kernels.h"
#include "mulmat.h"
#include "qgraph.h"
#include "quant.h"
#include "raw-client.h"
#include "tap.h"
#include "upload-opts.h"

#define UID_OTHER 40021

enum { Q4_ROWS = 64, Q8_ROWS = 16, COLS = 256 };

static unsigned char q4[Q4_ROWS * COLS / 32 * 18], q8[Q8_ROWS * COLS / 32 * 34];
static unsigned char q6k[2 * COLS / 256 * 210], q4k[4 * COLS / 256 * 144];
static uint16_t f16[8 * 64];
static float norm[COLS], x[COLS];

/*
 * The model: a 3-D Q4_0 tensor (2 slices of 32 rows), a Q8_0 one, an F16
 * one, an F32 norm, a Q6_K output and a Q4_K one, and a Q5_K one skipped.
 */
static int write_model(const char *path)
{
	struct tap_rng rng = { 0x6d6f64656cULL };
	float w[Q4_ROWS * COLS];
	static unsigned char q5k[176];
	struct qg_gguf_writer *wr = qg_gguf_writer_new(0);
	int r = 0;

	for (int i = 0; i < Q4_ROWS * COLS; i++)
		w[i] = tap_randf(&rng, -1, 1);
	qg_quantize(QG_TYPE_Q4_0, w, q4, sizeof q4, Q4_ROWS, COLS, NULL);
	qg_quantize(QG_TYPE_Q8_0, w, q8, sizeof q8, Q8_ROWS, COLS, NULL);
	qg_quantize(QG_TYPE_Q6_K, w + 8 * COLS, q6k, sizeof q6k, 2, COLS, NULL);
	qg_quantize(QG_TYPE_Q4_K, w + 16 * COLS, q4k, sizeof q4k, 4, COLS, NULL);
	for (int i = 0; i < 8 * 64; i++)
		f16[i] = qg_fp32_to_fp16(tap_randf(&rng, -1, 1));
	for (int i = 0; i < COLS; i++) {
		norm[i] = tap_randf(&rng, 0.5f, 1.5f);
		x[i] = tap_randf(&rng, -1, 1);
	}
	r |= qg_gguf_writer_kv_string(wr, "general.architecture", "llama");
	r |= qg_gguf_writer_kv_u64(wr, "llama.context_length", QG_GGUF_U32, 128);
	r |= qg_gguf_writer_tensor(wr, "blk.0.ffn_up.weight", QG_GGML_Q4_0, 3, (int64_t[]){ COLS, 32, 2 }, q4);
	r |= qg_gguf_writer_tensor(wr, "blk.0.attn_q.weight", QG_GGML_Q8_0, 2, (int64_t[]){ COLS, Q8_ROWS }, q8);
	r |= qg_gguf_writer_tensor(wr, "blk.0.attn_k.weight", QG_GGML_F16, 2, (int64_t[]){ 64, 8 }, f16);
	r |= qg_gguf_writer_tensor(wr, "blk.0.attn_norm.weight", QG_GGML_F32, 1, (int64_t[]){ COLS }, norm);
	r |= qg_gguf_writer_tensor(wr, "output.weight", QG_GGML_Q6_K, 2, (int64_t[]){ COLS, 2 }, q6k);
	r |= qg_gguf_writer_tensor(wr, "blk.0.ffn_down.weight", QG_GGML_Q4_K, 2, (int64_t[]){ COLS, 4 }, q4k);
	r |= qg_gguf_writer_tensor(wr, "blk.0.attn_v.weight", 13, 2, (int64_t[]){ COLS, 1 }, q5k);
	return gguf_file_save(wr, r, path);
}

/* Y = W X in this process, with the portable kernels, on the file's bytes of type T. */
static void reference(enum qg_type t, const void *w, int64_t m, float *y)
{
	struct qg_mm mm = { .wtype = t, .w = w, .m = m, .k = COLS, .x = x, .ldx = COLS, .n = 1, .y = y, .ldy = (size_t)m };
	void *scratch = aligned_alloc(64, (qg_mul_mat_scratch_size(&mm) + 63) & ~(size_t)63);

	qg_mul_mat(&mm, scratch);
	free(scratch);
}

/* Largest |a - b| over the largest |b|. */
static double rel_err(const float *a, const float *b, int n)
{
	double e = 0, m = 0;

	/* comparisons, not fmax: aarch64 gcc 12 fails (an internal error) vectorizing two fmax reductions */
	for (int i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]), v = fabs((double)b[i]);
		if (!(d <= e))	/* a NaN is the largest error */
			e = d;
		if (v > m)
			m = v;
	}
	return m > 0 ? e / m : e;
}

/* Open NAME and multiply x by it through the daemon into Y (M rows).  0 or -errno. */
static int daemon_mul(struct qgraph_session *s, const char *name, int64_t m, float *y)
{
	uint64_t h, id;
	enum qgraph_type t;
	int64_t rows, cols;
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	int r = qgraph_weights_open(s, name, &h, &t, &rows, &cols);

	if (r)
		return r;
	if (rows != m || cols != COLS)
		return -EINVAL;
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t xo = qgraph_arena_alloc(s, COLS * 4), yo = qgraph_arena_alloc(s, (size_t)m * 4);
	memcpy(arena + xo, x, sizeof x);
	struct qgraph_graph *g = qgraph_graph_new();
	int64_t xne[2] = { COLS, 1 };
	int wi = qgraph_graph_weights(g, h, t, rows, cols);
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, wi, qgraph_graph_input(g, QGRAPH_TYPE_F32, 2, xne, xo), 0),
			    yo);
	r = qgraph_submit(s, g, QGRAPH_SUBMIT_BLOCK, &id);
	if (!r)
		r = qgraph_wait(s, id, 10000, &res);
	if (!r)
		r = res.status;
	if (!r)
		memcpy(y, arena + yo, (size_t)m * 4);
	qgraph_graph_free(g);
	qgraph_arena_free(s, xo);
	qgraph_arena_free(s, yo);
	qgraph_weights_free(s, h);
	return r;
}

/* The "model NAME ..." line of S's stats: tensors and bytes; 0 if listed, -1 if not. */
static int model_listed(struct qgraph_session *s, const char *name, unsigned *tensors, unsigned long long *bytes)
{
	char buf[16384], nm[64], *save = NULL;

	if (qgraph_stats(s, buf, sizeof buf) < 0)
		return -1;
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		if (sscanf(l, "model \"%63[^\"]\" tensors %u bytes %llu", nm, tensors, bytes) == 3 &&
		    strcmp(nm, name) == 0)
			return 0;
	return -1;
}

struct progress {
	int calls;
	size_t done, total;
	uint64_t bytes_done, bytes_total;
};

static void on_progress(void *ctx, size_t done, size_t total, uint64_t bytes_done, uint64_t bytes_total)
{
	struct progress *p = ctx;

	p->calls++;
	p->done = done;
	p->total = total;
	p->bytes_done = bytes_done;
	p->bytes_total = bytes_total;
}

/*
 * Another user's process: open the model's Q4_0 and Q8_0 tensors by name,
 * multiply, write both results to OUT; then try to unload the model and
 * write the result.  Exit 0 if it got that far.
 */
static pid_t other_user(const struct test_daemon *d, int out)
{
	pid_t pid = tap_fork();

	if (pid)
		return pid;
	if (setgroups(0, NULL) || setresgid(UID_OTHER, UID_OTHER, UID_OTHER) ||
	    setresuid(UID_OTHER, UID_OTHER, UID_OTHER))
		_exit(2);
	struct qgraph_session *s = daemon_connect(d, "model-other", 4 << 20);
	float y[Q4_ROWS + Q8_ROWS];
	int r[3] = { -1, -1, -1 };
	if (!s)
		_exit(3);
	r[0] = daemon_mul(s, "tiny/blk.0.ffn_up.weight", Q4_ROWS, y);
	r[1] = daemon_mul(s, "tiny/blk.0.attn_q.weight", Q8_ROWS, y + Q4_ROWS);
	r[2] = qgraph_model_unload(s, "tiny");
	(void)!write(out, r, sizeof r);
	(void)!write(out, y, sizeof y);
	qgraph_session_close(s);
	_exit(0);
}

/* read() that gives up after 10 s: bytes read, or -1. */
static ssize_t read_10s(int fd, void *buf, size_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;

	while (got < len && poll(&p, 1, 10000) == 1) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

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

static void test_load(struct test_daemon *d, const char *path, const char *cut, int root)
{
	float ref[Q4_ROWS + Q8_ROWS], y[Q4_ROWS + Q8_ROWS];
	struct progress p = { 0 };
	unsigned tensors;
	unsigned long long bytes;

	reference(QG_TYPE_Q4_0, q4, Q4_ROWS, ref);
	reference(QG_TYPE_Q8_0, q8, Q8_ROWS, ref + Q4_ROWS);

	struct qgraph_session *s = daemon_connect(d, "model-loader", 4 << 20);
	if (!tap_ok(s != NULL, "connect"))
		return;
	long long p0 = daemon_stat(s, "pinned_bytes"), w0 = daemon_stat(s, "weights_stored");
	int r = qgraph_model_load(s, path, "tiny", on_progress, &p);
	tap_ok(r == 0, "load the writer's model as \"tiny\" (%s)", r ? qgraph_session_error(s) : "ok");
	uint64_t want_bytes = sizeof q4 + sizeof q8 + sizeof f16 + sizeof norm + sizeof q6k + sizeof q4k;
	tap_ok(p.calls == 6 && p.done == 6 && p.total == 6 && p.bytes_done == want_bytes && p.bytes_total == want_bytes,
	       "progress after each of the 6 computable tensors (%d calls, %zu/%zu, %llu/%llu bytes); q5_K skipped",
	       p.calls, p.done, p.total, (unsigned long long)p.bytes_done, (unsigned long long)p.bytes_total);
	r = model_listed(s, "tiny", &tensors, &bytes);
	tap_ok(r == 0 && tensors == 6 && bytes == want_bytes, "stats list the model: 6 tensors, %llu bytes", bytes);
	tap_ok(daemon_stat(s, "pinned_bytes") > p0 && daemon_stat(s, "weights_stored") == w0 + 6,
	       "its tensors are pinned in the daemon (%lld stored)", daemon_stat(s, "weights_stored"));
	tap_ok(qgraph_model_load(s, path, "tiny", NULL, NULL) == -EINVAL && strstr(qgraph_session_error(s), "is loaded"),
	       "a second load under the same name is refused: %s", qgraph_session_error(s));
	r = qgraph_model_load(s, cut, "broken", NULL, NULL);
	tap_ok(r == -EINVAL && strstr(qgraph_session_error(s), "at offset") && model_listed(s, "broken", &tensors, &bytes) < 0,
	       "a file cut short is refused, naming the field: %s", qgraph_session_error(s));
	tap_ok(qgraph_model_load(s, path, "a/b", NULL, NULL) == -EINVAL, "a model name with '/' is refused");
	tap_ok(qgraph_model_load(s, path, "del\x7f", NULL, NULL) == -EINVAL, "a model name with DEL (0x7f) is refused");
	tap_ok(qgraph_model_load(s, path, "bad\xff", NULL, NULL) == -EINVAL, "a model name of bytes that are not UTF-8 is refused");
	tap_ok(qgraph_model_load(s, path, "over\xc0\xaflong", NULL, NULL) == -EINVAL, "a model name with an overlong '/' is refused");
	r = qgraph_model_load(s, path, "mod\xc3\xa8le", NULL, NULL);
	tap_ok(r == 0 && qgraph_model_unload(s, "mod\xc3\xa8le") == 0, "a model name of UTF-8 beyond ASCII is taken (%s)",
	       r ? qgraph_session_error(s) : "ok");
	qgraph_session_close(s);

	/* the model outlives the session that loaded it */
	s = daemon_connect(d, "model-user", 4 << 20);
	if (!tap_ok(s && stat_settles(s, "sessions", 1) == 1 && model_listed(s, "tiny", &tensors, &bytes) == 0,
		    "the loader's session is gone and the model is still listed"))
		return;
	r = daemon_mul(s, "tiny/blk.0.ffn_up.weight", Q4_ROWS, y);
	int r2 = daemon_mul(s, "tiny/blk.0.attn_q.weight", Q8_ROWS, y + Q4_ROWS);
	tap_ok(r == 0 && r2 == 0 && rel_err(y, ref, Q4_ROWS) < 1e-5 && rel_err(y + Q4_ROWS, ref + Q4_ROWS, Q8_ROWS) < 1e-5,
	       "another session opens the q4_0 and q8_0 tensors by name; MUL_MAT matches the in-process kernels "
	       "(rel err %.2g, %.2g)", rel_err(y, ref, Q4_ROWS), rel_err(y + Q4_ROWS, ref + Q4_ROWS, Q8_ROWS));
	uint64_t h;
	enum qgraph_type t;
	int64_t rows, cols;
	tap_ok(qgraph_weights_open(s, "tiny/blk.0.attn_k.weight", &h, &t, &rows, &cols) == 0 && t == QGRAPH_TYPE_F16 &&
		       rows == 8 && cols == 64 && qgraph_weights_free(s, h) == 0 &&
		       qgraph_weights_open(s, "tiny/blk.0.attn_norm.weight", &h, &t, &rows, &cols) == 0 &&
		       t == QGRAPH_TYPE_F32 && rows == 1 && cols == COLS && qgraph_weights_free(s, h) == 0,
	       "the f16 and f32 tensors are held as they are");
	float yk[6], refk[6];
	reference(QG_TYPE_Q6_K, q6k, 2, refk);
	reference(QG_TYPE_Q4_K, q4k, 4, refk + 2);
	r = daemon_mul(s, "tiny/output.weight", 2, yk);
	r2 = daemon_mul(s, "tiny/blk.0.ffn_down.weight", 4, yk + 2);
	tap_ok(r == 0 && r2 == 0 && memcmp(yk, refk, sizeof yk) == 0,
	       "the q6_K and q4_K tensors are held as they are; MUL_MAT gives the in-process kernels' bits");
	tap_ok(qgraph_weights_open(s, "tiny/blk.0.attn_v.weight", &h, NULL, NULL, NULL) == -ENOENT,
	       "the q5_K tensor was not loaded");

	if (root) {
		int fds[2], res[3] = { -1, -1, -1 };
		float yo[Q4_ROWS + Q8_ROWS];
		if (pipe(fds))
			return;
		pid_t pid = other_user(d, fds[1]);
		close(fds[1]);
		int ok = read_10s(fds[0], res, sizeof res) == sizeof res && read_10s(fds[0], yo, sizeof yo) == sizeof yo;
		close(fds[0]);
		int st;
		waitpid(pid, &st, 0);
		tap_ok(ok && res[0] == 0 && res[1] == 0 && rel_err(yo, ref, Q4_ROWS) < 1e-5 &&
			       rel_err(yo + Q4_ROWS, ref + Q4_ROWS, Q8_ROWS) < 1e-5,
		       "a process of another allowed user (uid %d) opens them by name; its MUL_MATs match (%d %d)",
		       UID_OTHER, res[0], res[1]);
		tap_ok(ok && res[2] == -EPERM && model_listed(s, "tiny", &tensors, &bytes) == 0,
		       "that user may not unload the model (%d)", res[2]);
	} else {
		tap_skip("another user's process needs root");
		tap_skip("another user's unload needs root");
	}

	/* a session holding a handle keeps its matrix across the unload */
	tap_ok(qgraph_weights_open(s, "tiny/blk.0.attn_q.weight", &h, NULL, NULL, NULL) == 0 &&
		       qgraph_model_unload(s, "tiny") == 0 && model_listed(s, "tiny", &tensors, &bytes) < 0 &&
		       daemon_stat(s, "weights_stored") == w0 + 1,
	       "the loader's user unloads it; the one matrix a session holds stays");
	tap_ok(qgraph_weights_open(s, "tiny/blk.0.ffn_up.weight", &h, NULL, NULL, NULL) == -ENOENT &&
		       qgraph_model_unload(s, "tiny") == -ENOENT,
	       "its names are gone; a second unload finds nothing");
	qgraph_session_close(s);
	s = daemon_connect(d, "model-after", 4 << 20);
	tap_ok(s && stat_settles(s, "pinned_bytes", p0) == p0 && daemon_stat(s, "weights_stored") == w0,
	       "with the last handle closed, stats are back to the baseline (pinned %lld, stored %lld)",
	       s ? daemon_stat(s, "pinned_bytes") : -1, s ? daemon_stat(s, "weights_stored") : -1);
	qgraph_session_close(s);
}

/* More models than one stats answer held once (16): every one is listed, and unloaded. */
static void test_many_models(struct test_daemon *d, const char *path)
{
	enum { MANY = 20 };
	struct qgraph_session *s = daemon_connect(d, "model-many", 4 << 20);
	unsigned tensors;
	unsigned long long bytes;
	char name[16];
	int loaded = 0, listed = 0, unloaded = 0;

	for (int i = 0; s && i < MANY; i++) {
		snprintf(name, sizeof name, "m%02d", i);
		loaded += qgraph_model_load(s, path, name, NULL, NULL) == 0;
	}
	for (int i = 0; s && i < MANY; i++) {
		snprintf(name, sizeof name, "m%02d", i);
		listed += model_listed(s, name, &tensors, &bytes) == 0;
	}
	for (int i = 0; s && i < MANY; i++) {
		snprintf(name, sizeof name, "m%02d", i);
		unloaded += qgraph_model_unload(s, name) == 0;
	}
	tap_ok(loaded == MANY && listed == MANY && unloaded == MANY,
	       "%d models loaded (%d), every one listed in stats (%d), and unloaded (%d)", MANY, loaded, listed,
	       unloaded);
	qgraph_session_close(s);
}

/* Uploads of f16 and q8_0 sources, stored as they are (the header's GGUF sentence). */
static void test_sources(struct test_daemon *d)
{
	struct qgraph_session *s = daemon_connect(d, "model-sources", 4 << 20);
	uint64_t h;
	enum qgraph_type st;
	float ref[Q8_ROWS], y[Q8_ROWS];

	if (!s)
		return;
	int r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q8_0, .target = QGRAPH_TYPE_Q8_0,
			.rows = Q8_ROWS, .cols = COLS, .data = q8, .name = "src.q8"), &h, &st);
	/* plain, or q8_0_4x4 on a dotprod CPU without i8mm */
	tap_ok(r == 0 && (st == QGRAPH_TYPE_Q8_0 || st == QGRAPH_TYPE_Q8_0_4X4),
	       "a q8_0 source uploads, stored as this CPU's q8_0 layout (%s)",
	       r ? qgraph_session_error(s) : qgraph_type_name(st));
	reference(QG_TYPE_Q8_0, q8, Q8_ROWS, ref);
	tap_ok(r == 0 && daemon_mul(s, "src.q8", Q8_ROWS, y) == 0 && rel_err(y, ref, Q8_ROWS) < 1e-6,
	       "and multiplies as the in-process kernel does");
	r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F16, .target = QGRAPH_TYPE_F16, .rows = 8,
			.cols = 64, .data = f16), &h, &st);
	tap_ok(r == 0 && st == QGRAPH_TYPE_F16, "an f16 source uploads, stored as f16 (%s)",
	       r ? qgraph_session_error(s) : "ok");
	r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q8_0, .target = QGRAPH_TYPE_Q4_0,
			.rows = Q8_ROWS, .cols = COLS, .data = q8), &h, &st);
	tap_ok(r == -EINVAL && strstr(qgraph_session_error(s), "stored as they are"),
	       "a q8_0 source for a q4_0 target is refused: %s", qgraph_session_error(s));
	qgraph_session_close(s);
}

/* Send a ModelRequest OP for NAME through R; the daemon's answer in *OUT.  0 or -errno. */
static int raw_model(struct raw *r, Qgraph__ModelRequest__Op op, const char *name, struct raw_reply *out)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__ModelRequest mr = QGRAPH__MODEL_REQUEST__INIT;

	mr.op = op;
	mr.name = (char *)name;
	req.request_id = 1000 + (uint64_t)op;
	req.body_case = QGRAPH__REQUEST__BODY_MODEL;
	req.model = &mr;
	int e = raw_send(r, &req);
	return e ? e : raw_reply(r, 30000, out);
}

/* An upload for a model, with a model request between its chunks; and uploads for no model or a wrong name. */
static void test_protocol(struct test_daemon *d)
{
	struct raw r;
	struct raw_reply rep, rep2;
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__UploadWeights up = QGRAPH__UPLOAD_WEIGHTS__INIT;
	Qgraph__Span span = QGRAPH__SPAN__INIT;
	size_t half = sizeof q8 / 2;

	if (!tap_ok(raw_connect(&r, d->sock, 1 << 20) == 0, "a raw client connects"))
		return;
	memcpy(r.arena, q8, sizeof q8);
	span.offset = 0;
	span.bytes = half;
	up.src_type = QGRAPH__TYPE__TYPE_Q8_0;
	up.target_type = QGRAPH__TYPE__TYPE_Q8_0;
	up.rows = Q8_ROWS;
	up.cols = COLS;
	up.data = &span;
	up.model = 1;
	up.name = "raw/w";
	req.request_id = 1;
	req.body_case = QGRAPH__REQUEST__BODY_UPLOAD;
	req.upload = &up;
	tap_ok(raw_send(&r, &req) == 0 && raw_reply(&r, 30000, &rep) == 0 && rep.status == QGRAPH__STATUS__STATUS_INVALID &&
		       strstr(rep.error, "no model is being loaded"),
	       "an upload for a model with none being loaded is refused: %s", rep.error);
	tap_ok(raw_model(&r, QGRAPH__MODEL_REQUEST__OP__MODEL_BEGIN, "raw", &rep) == 0 && rep.status == 0,
	       "begin loading model \"raw\"");
	up.name = "other/w";
	tap_ok(raw_send(&r, &req) == 0 && raw_reply(&r, 30000, &rep) == 0 && rep.status == QGRAPH__STATUS__STATUS_INVALID &&
		       strstr(rep.error, "MODEL/tensor"),
	       "an upload named outside the model is refused: %s", rep.error);
	up.name = "raw/w";
	int ok = raw_send(&r, &req) == 0 && raw_reply(&r, 30000, &rep) == 0 && rep.status == 0;
	/* the load ends between the upload's chunks */
	ok &= raw_model(&r, QGRAPH__MODEL_REQUEST__OP__MODEL_UNLOAD, "raw", &rep2) == 0 && rep2.status == 0;
	up.upload_id = rep.handle;
	up.name = NULL;
	up.model = 0;
	up.chunk_offset = half;
	span.offset = half;
	span.bytes = sizeof q8 - half;
	up.last = 1;
	req.request_id = 2;
	ok &= raw_send(&r, &req) == 0 && raw_reply(&r, 30000, &rep) == 0;
	tap_ok(ok && rep.status == QGRAPH__STATUS__STATUS_NOT_FOUND && strstr(rep.error, "no longer being loaded"),
	       "an upload whose model load was abandoned between its chunks is refused at its end: %s", rep.error);
	struct qgraph_session *s = daemon_connect(d, "model-after-raw", 4 << 20);
	unsigned tensors;
	unsigned long long bytes;
	tap_ok(s && model_listed(s, "raw", &tensors, &bytes) < 0 && stat_settles(s, "pinned_bytes", 0) == 0,
	       "the daemon serves on, holding nothing of it");
	qgraph_session_close(s);
	raw_close(&r);
}

static void test_preload(const char *path, const char *cut)
{
	struct test_daemon d = { 0 };
	char args[512];
	unsigned tensors;
	unsigned long long bytes;
	float ref[Q4_ROWS], y[Q4_ROWS];

	snprintf(args, sizeof args, "--preload %s", path);
	int r = daemon_start(&d, args);
	struct qgraph_session *s = r == 0 ? daemon_connect(&d, "model-preload", 4 << 20) : NULL;
	tap_ok(s && model_listed(s, "tiny", &tensors, &bytes) == 0 && tensors == 6,
	       "a daemon started with --preload holds the model (as the file's base name) from the start");
	reference(QG_TYPE_Q4_0, q4, Q4_ROWS, ref);
	tap_ok(s && daemon_mul(s, "tiny/blk.0.ffn_up.weight", Q4_ROWS, y) == 0 && rel_err(y, ref, Q4_ROWS) < 1e-5,
	       "its tensors compute as the file's bytes do");
	tap_ok(s && qgraph_model_unload(s, "tiny") == 0 && model_listed(s, "tiny", &tensors, &bytes) < 0 &&
		       stat_settles(s, "pinned_bytes", 0) == 0,
	       "a preloaded model unloads, and its memory goes");
	qgraph_session_close(s);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);

	struct test_daemon e = { 0 };
	snprintf(args, sizeof args, "--preload %s", cut);
	r = daemon_start(&e, args);
	tap_ok(r != 0 && daemon_log_has(&e, "preload") && daemon_log_has(&e, "at offset"),
	       "a daemon given a broken file to preload does not start, and says which field (%d)", r);
	if (r == 0)
		daemon_stop(&e, SIGTERM);
	daemon_cleanup(&e);
}

int main(void)
{
	struct test_daemon d = { 0 };
	char dir[] = "/tmp/qg-model-XXXXXX", path[128], cut[128], args[128];
	int root = geteuid() == 0;

	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir))
		return 99;
	chmod(dir, 0755);	/* the daemon reads the files for preload */
	snprintf(path, sizeof path, "%s/tiny.gguf", dir);
	snprintf(cut, sizeof cut, "%s/cut.gguf", dir);
	if (!tap_ok(write_model(path) == 0, "the writer makes the model file"))
		return tap_done();
	/* the same file cut in its tensor infos */
	FILE *in = fopen(path, "rb"), *out = fopen(cut, "wb");
	char buf[260];
	size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
	if (out)
		fwrite(buf, 1, n, out);
	if (in)
		fclose(in);
	if (out)
		fclose(out);

	snprintf(args, sizeof args, "--socket-mode 0666 --allow-users %d", UID_OTHER);
	int started = daemon_start(&d, root ? args : NULL) == 0;
	chmod(d.dir, 0711);	/* other users reach the socket */
	if (!tap_ok(started, "start qgraphd%s", root ? " allowing another user" : "")) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return tap_done();
	}
	test_load(&d, path, cut, root);
	test_many_models(&d, path);
	test_sources(&d);
	test_protocol(&d);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
	test_preload(path, cut);
	unlink(path);
	unlink(cut);
	rmdir(dir);
	return tap_done();
}
