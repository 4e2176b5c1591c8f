/*
 * digest-test.c - weights found by content, read back exactly, and
 * stacked: what the ggml backend builds on.
 *   - the daemon's digest of what it stores (an interleaved layout unpacked
 *     to Q4_0) equals qgraph_weights_digest of the bytes sent, so a second
 *     session opens the weights by digest and qgraph_weights_upload sends
 *     nothing; a digest or shape that names nothing gives -ENOENT;
 *   - a cast to Q4_0 of weights stored in any layout gives back the bytes
 *     uploaded, for row counts of every layout's group and of none;
 *   - a stack of matrices uploaded as one (qgraph_graph_weights_nd) gives
 *     what each matrix uploaded alone gives, batch by batch;
 *   - a matrix uploaded in many chunks, through one staging buffer or two,
 *     and chunks the daemon takes in slices, is stored as sent.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-util.h"
#include "qgraph.h"
#include "tap.h"
#include "upload-opts.h"

enum { COLS = 256 };

/* ROWS x COLS random Q4_0 values (seeded) in a new buffer of *BYTES. */
static unsigned char *random_q4(int64_t rows, unsigned seed, size_t *bytes)
{
	float *f = malloc((size_t)rows * COLS * sizeof *f);
	ssize_t n = qgraph_matrix_size(QGRAPH_TYPE_Q4_0, rows, COLS);
	unsigned char *q = n > 0 ? malloc((size_t)n) : NULL;

	srand(seed);
	for (int64_t i = 0; f && i < rows * COLS; i++)
		f[i] = (float)rand() / RAND_MAX * 2 - 1;
	if (!f || !q || qgraph_quantize(QGRAPH_TYPE_Q4_0, f, q, (size_t)n, rows, COLS, NULL) != n) {
		free(q);
		q = NULL;
	}
	free(f);
	*bytes = (size_t)n;
	return q;
}

/* Run G (every output in the arena) and wait: 0 or -errno. */
static int run_graph(struct qgraph_session *s, struct qgraph_graph *g)
{
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	uint64_t id;
	int r = qgraph_submit(s, g, QGRAPH_SUBMIT_BLOCK, &id);

	if (!r)
		r = qgraph_wait(s, id, 10000, &res);
	if (!r)
		r = res.status;
	if (r)
		tap_diag("graph: %s", qgraph_session_error(s));
	return r;
}

/* Read weights H (stored as TYPE, ROWS x COLS) back as Q4_0 into OUT: 0 or -errno. */
static int read_back(struct qgraph_session *s, uint64_t h, enum qgraph_type type, int64_t rows, void *out, size_t bytes)
{
	struct qgraph_graph *g = qgraph_graph_new();
	int64_t off = qgraph_arena_alloc(s, bytes);
	int r = -ENOMEM;

	if (g && off >= 0) {
		int w = qgraph_graph_weights(g, h, type, rows, COLS);
		r = qgraph_graph_output(g, qgraph_graph_cast(g, w, QGRAPH_TYPE_Q4_0), off);
		if (r >= 0)
			r = run_graph(s, g);
		if (!r)
			memcpy(out, (char *)qgraph_arena(s, NULL) + off, bytes);
	}
	if (off >= 0)
		qgraph_arena_free(s, off);
	qgraph_graph_free(g);
	return r;
}

/* Whether weights H of session S hold the q4_0 matrix Q (ROWS x COLS): the daemon's digest of them is Q's. */
static bool stored_as(struct qgraph_session *s, uint64_t h, const unsigned char *q, int64_t rows)
{
	unsigned char d[32];
	uint64_t again = 0;

	if (qgraph_weights_digest(QGRAPH_TYPE_Q4_0, rows, COLS, q, d) ||
	    qgraph_weights_open_digest(s, QGRAPH_TYPE_Q4_0, rows, COLS, d, &again, NULL))
		return false;
	qgraph_weights_free(s, again);
	return again != 0 && h != 0;
}

static void test_digest(struct qgraph_session *a, struct qgraph_session *b)
{
	size_t bytes;
	unsigned char *q = random_q4(64, 1, &bytes), d[32], d2[32];
	uint64_t ha = 0, hb = 0, hc = 0;
	enum qgraph_type ta = QGRAPH_TYPE_COUNT, tb = QGRAPH_TYPE_COUNT;

	tap_ok(q && qgraph_weights_digest(QGRAPH_TYPE_Q4_0, 64, COLS, q, d) == 0, "digest of a 64 x 256 q4_0 matrix");
	long long miss0 = daemon_stat(a, "digest_misses"), err0 = daemon_stat(a, "errors");
	tap_ok(qgraph_weights_open_digest(b, QGRAPH_TYPE_Q4_0, 64, COLS, d, &hb, NULL) == -ENOENT,
	       "before any upload its digest opens nothing (-ENOENT)");
	tap_ok(miss0 >= 0 && daemon_stat(a, "digest_misses") == miss0 + 1 && daemon_stat(a, "errors") == err0,
	       "the daemon counts the miss as a digest miss, not an error (misses %lld -> %lld, errors %lld -> %lld)",
	       miss0, daemon_stat(a, "digest_misses"), err0, daemon_stat(a, "errors"));
	long long up0 = daemon_stat(a, "weights_uploaded"), st0 = daemon_stat(a, "weights_stored");
	int r = qgraph_weights_upload(a, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0, .target = QGRAPH_TYPE_Q4_0,
			.rows = 64, .cols = COLS, .data = q), &ha, &ta);
	tap_ok(r == 0 && daemon_stat(a, "weights_uploaded") == up0 + 1 && daemon_stat(a, "weights_stored") == st0 + 1,
	       "session A uploads it (stored as %s)", qgraph_type_name(ta) ? qgraph_type_name(ta) : "?");
	tap_ok(qgraph_weights_open_digest(b, QGRAPH_TYPE_Q4_0, 64, COLS, d, &hb, &tb) == 0 && tb == ta,
	       "session B opens it by digest: the daemon's digest of its %s bytes is that of the q4_0 sent",
	       qgraph_type_name(ta) ? qgraph_type_name(ta) : "?");
	tap_ok(qgraph_weights_upload(b, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0, .target = QGRAPH_TYPE_Q4_0,
			.rows = 64, .cols = COLS, .data = q), &hc, &tb) == 0 &&
		       daemon_stat(a, "weights_uploaded") == up0 + 1 && daemon_stat(a, "weights_stored") == st0 + 1,
	       "qgraph_weights_upload of the same bytes in B sends nothing (uploads %lld -> %lld)", up0 + 1,
	       daemon_stat(a, "weights_uploaded"));
	memcpy(d2, d, sizeof d2);
	d2[7] ^= 1;
	uint64_t hx;
	tap_ok(qgraph_weights_open_digest(b, QGRAPH_TYPE_Q4_0, 64, COLS, d2, &hx, NULL) == -ENOENT &&
		       qgraph_weights_open_digest(b, QGRAPH_TYPE_Q4_0, 32, 2 * COLS, d, &hx, NULL) == -ENOENT &&
		       qgraph_weights_open_digest(b, QGRAPH_TYPE_Q8_0, 64, COLS, d, &hx, NULL) == -ENOENT,
	       "another digest, shape or type opens nothing");
	tap_ok(qgraph_weights_digest(QGRAPH_TYPE_F32, 64, COLS, q, d2) == -EINVAL &&
		       qgraph_weights_digest(QGRAPH_TYPE_Q4_0, 64, 100, q, d2) == -EINVAL,
	       "qgraph_weights_digest refuses f32 and a shape q4_0 cannot have");
	qgraph_weights_free(a, ha);
	qgraph_weights_free(b, hb);
	qgraph_weights_free(b, hc);
	free(q);
}

static void test_read_back(struct qgraph_session *s)
{
	static const int64_t rows[] = { 6, 12, 16, 64 };

	for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
		size_t bytes;
		unsigned char *q = random_q4(rows[i], 10 + (unsigned)i, &bytes), *back = calloc(1, bytes);
		uint64_t h;
		enum qgraph_type t = QGRAPH_TYPE_COUNT;
		int r = q && back ? qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0,
				.target = QGRAPH_TYPE_Q4_0, .rows = rows[i], .cols = COLS, .data = q), &h, &t)
				  : -ENOMEM;
		if (!r)
			r = read_back(s, h, t, rows[i], back, bytes);
		tap_ok(!r && memcmp(q, back, bytes) == 0 && stored_as(s, h, q, rows[i]),
		       "%lld rows stored as %s read back as q4_0: the bytes sent, and their digest finds them",
		       (long long)rows[i], qgraph_type_name(t) ? qgraph_type_name(t) : "?");
		if (!r)
			qgraph_weights_free(s, h);
		free(q);
		free(back);
	}
}

static void test_stacked(struct qgraph_session *s)
{
	enum { M = 16, SLICES = 3, N = 5, BATCH = 6 };
	size_t bytes;
	unsigned char *q = random_q4(M * SLICES, 20, &bytes);
	uint64_t whole, one[SLICES];
	enum qgraph_type tw, t1[SLICES];
	int r = q ? qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0, .target = QGRAPH_TYPE_Q4_0,
			.rows = M * SLICES, .cols = COLS, .data = q), &whole, &tw) : -ENOMEM;
	size_t slice_bytes = bytes / SLICES;

	for (int i = 0; i < SLICES && !r; i++)
		r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0, .target = QGRAPH_TYPE_Q4_0,
				.rows = M, .cols = COLS, .data = q + i * slice_bytes), &one[i], &t1[i]);
	tap_ok(!r, "a stack of %d matrices of %d rows uploaded as one, and each alone", SLICES, M);
	if (r) {
		free(q);
		return;
	}
	/* activations [COLS, N, BATCH]: batch b multiplies slice b / (BATCH / SLICES), as ggml broadcasts */
	size_t xbytes = (size_t)COLS * N * BATCH * sizeof(float), ybytes = (size_t)M * N * BATCH * sizeof(float);
	int64_t xo = qgraph_arena_alloc(s, xbytes), yo = qgraph_arena_alloc(s, ybytes), zo = qgraph_arena_alloc(s, ybytes);
	char *arena = qgraph_arena(s, NULL);
	float *x = (float *)(arena + xo);
	for (size_t i = 0; i < xbytes / sizeof *x; i++)
		x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;

	struct qgraph_graph *g = qgraph_graph_new();
	const int64_t wne[4] = { COLS, M, SLICES, 1 }, xne[3] = { COLS, N, BATCH };
	int xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 3, xne, xo);
	int mm = qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, qgraph_graph_weights_nd(g, whole, tw, 4, wne), xi, 0);
	r = qgraph_graph_output(g, mm, yo);
	tap_ok(r >= 0 && run_graph(s, g) == 0, "MUL_MAT of the stack by %d batches runs", BATCH);
	qgraph_graph_free(g);

	g = qgraph_graph_new();
	xi = qgraph_graph_input(g, QGRAPH_TYPE_F32, 3, xne, xo);
	for (int b = 0; b < BATCH && r >= 0; b++) {
		const int64_t ne[2] = { COLS, N };
		const uint64_t nb[1] = { COLS * sizeof(float) };
		int xv = qgraph_graph_view(g, xi, 2, ne, nb, (uint64_t)b * COLS * N * sizeof(float));
		int sl = b / (BATCH / SLICES);
		int p = qgraph_graph_op(g, QGRAPH_OP_MUL_MAT, qgraph_graph_weights(g, one[sl], t1[sl], M, COLS), xv, 0);
		r = qgraph_graph_output(g, p, zo + (int64_t)b * M * N * (int64_t)sizeof(float));
	}
	tap_ok(r >= 0 && run_graph(s, g) == 0, "the same products slice by slice run");
	qgraph_graph_free(g);
	tap_ok(memcmp(arena + yo, arena + zo, ybytes) == 0, "the stack gives each slice's products exactly");
	qgraph_weights_free(s, whole);
	for (int i = 0; i < SLICES; i++)
		qgraph_weights_free(s, one[i]);
	free(q);
}

/*
 * Matrices larger than an upload's staging chunk (a quarter of the arena,
 * 256 KiB here) go in chunks through two staging buffers, or one when the
 * arena has room for no more: what is stored is what was sent, in every
 * byte (its digest finds it), from q4_0 as it is and from f32 quantized.
 */
static void test_chunked(const struct test_daemon *d)
{
	enum { ROWS = 8192 };	/* 1.1 MiB of q4_0: five chunks; 8 MiB of f32: thirty-two */
	struct qgraph_connect_opts o = { .socket = d->sock, .name = "digest-chunks", .arena_bytes = 1 << 20 };
	struct qgraph_session *s = NULL;
	char err[256];

	if (!tap_ok(qgraph_connect(&o, &s, err, sizeof err) == 0, "a session with a 1 MiB arena (%s)", err))
		return;
	size_t bytes;
	uint64_t h = 0;
	unsigned char *q = random_q4(ROWS, 20, &bytes);
	int r = q ? qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0, .target = QGRAPH_TYPE_Q4_0,
			.rows = ROWS, .cols = COLS, .data = q), &h, NULL) : -ENOMEM;
	tap_ok(!r && stored_as(s, h, q, ROWS), "%zu bytes of q4_0 in chunks through two buffers: stored as sent (%d: %s)",
	       bytes, r, qgraph_session_error(s));
	qgraph_weights_free(s, h);
	free(q);

	int64_t hold = qgraph_arena_alloc(s, 600 << 10);	/* leaves room for one 256 KiB buffer */
	q = random_q4(ROWS, 21, &bytes);
	r = q && hold >= 0 ? qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0,
			.target = QGRAPH_TYPE_Q4_0, .rows = ROWS, .cols = COLS, .data = q), &h, NULL)
			   : -ENOMEM;
	tap_ok(!r && stored_as(s, h, q, ROWS), "and through one buffer, the arena all but full: stored as sent (%d: %s)",
	       r, qgraph_session_error(s));
	qgraph_weights_free(s, h);
	if (hold >= 0)
		qgraph_arena_free(s, hold);
	free(q);

	float *f = malloc((size_t)ROWS * COLS * sizeof *f);
	q = malloc(bytes);
	srand(22);
	for (size_t i = 0; f && i < (size_t)ROWS * COLS; i++)
		f[i] = (float)rand() / RAND_MAX * 2 - 1;
	r = f && q && qgraph_quantize(QGRAPH_TYPE_Q4_0, f, q, bytes, ROWS, COLS, NULL) == (ssize_t)bytes
		    ? qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0,
				.rows = ROWS, .cols = COLS, .data = f), &h, NULL)
		    : -ENOMEM;
	tap_ok(!r && stored_as(s, h, q, ROWS), "%zu bytes of f32 in chunks, quantized as they come: what "
	       "qgraph_quantize makes of them (%d: %s)", (size_t)ROWS * COLS * sizeof *f, r, qgraph_session_error(s));
	qgraph_weights_free(s, h);
	qgraph_session_close(s);

	/* a 16 MiB arena: chunks of 4 MiB, each taken by the daemon in four slices between other sessions' turns */
	o.arena_bytes = 16 << 20;
	s = NULL;
	if (tap_ok(qgraph_connect(&o, &s, err, sizeof err) == 0, "a session with a 16 MiB arena (%s)", err)) {
		r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_Q4_0,
				.rows = ROWS, .cols = COLS, .data = f), &h, NULL);
		tap_ok(!r && stored_as(s, h, q, ROWS), "8 MiB of f32 in chunks of 4 MiB, taken in slices: stored as "
		       "qgraph_quantize makes them (%d: %s)", r, qgraph_session_error(s));
		qgraph_weights_free(s, h);
		unsigned char *big = random_q4(4 * ROWS, 23, &bytes);
		r = big ? qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_Q4_0,
				.target = QGRAPH_TYPE_Q4_0, .rows = 4 * ROWS, .cols = COLS, .data = big), &h, NULL)
			: -ENOMEM;
		tap_ok(!r && stored_as(s, h, big, 4 * ROWS), "%zu bytes of q4_0 in chunks of 4 MiB, taken in slices: "
		       "stored as sent (%d: %s)", bytes, r, qgraph_session_error(s));
		qgraph_weights_free(s, h);
		free(big);
	}
	free(f);
	free(q);
	qgraph_session_close(s);
}

int main(void)
{
	struct test_daemon d = { 0 };

	if (daemon_start(&d, NULL)) {
		daemon_dump_log(&d);
		printf("Bail out! qgraphd did not start\n");
		return 1;
	}
	struct qgraph_session *a = daemon_connect(&d, "digest-a", 8 << 20), *b = daemon_connect(&d, "digest-b", 8 << 20);
	if (!a || !b) {
		printf("Bail out! cannot connect\n");
		daemon_cleanup(&d);
		return 1;
	}
	test_digest(a, b);
	test_read_back(b);
	test_stacked(a);
	test_chunked(&d);
	qgraph_session_close(a);
	qgraph_session_close(b);
	daemon_cleanup(&d);
	return tap_done();
}
