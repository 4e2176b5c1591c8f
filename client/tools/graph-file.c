/*
 * graph-file.c - graphs saved to files, and running them (see graph-file.h).
 *
 * A graph file is read by a tool the user runs on a file they name, but it
 * is still input from outside: every length, index and span is checked
 * before it is used, and a file that is not what it should be gets a
 * message that says what is wrong with it.  The daemon checks the graph
 * again when it arrives, as it checks every graph.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "graph-file.h"
#include "ops.h"
#include "qgraph.pb-c.h"
#include "submit.h"
#include "wire.h"

#define GF_VERSION 1u
#define GF_MAX_FILE ((size_t)4 << 30)

static int errf(char *err, size_t len, int r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int errf(char *err, size_t len, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (err && len)
		vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return r;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int gf_save(const char *path, const struct qgraph_graph *g, const struct gf_weights *w, size_t nw,
	    const void *arena, size_t arena_bytes, const char *description, char *err, size_t errlen)
{
	ssize_t n = qgraph_graph_encode(g, NULL, 0);
	uint8_t *enc = NULL, *out = NULL;
	Qgraph__SubmitGraph *sg = NULL;
	Qgraph__SavedWeights *sw = calloc(nw ? nw : 1, sizeof *sw);
	Qgraph__SavedWeights **swp = calloc(nw ? nw : 1, sizeof *swp);
	char tmp[4096];
	int r, fd = -1;

	if (n < 0) {
		r = errf(err, errlen, (int)n, "cannot encode the graph: %s", strerror((int)-n));
		goto out;
	}
	enc = malloc((size_t)n);
	if (!enc || !sw || !swp) {
		r = errf(err, errlen, -ENOMEM, "no memory");
		goto out;
	}
	qgraph_graph_encode(g, enc, (size_t)n);
	sg = qgraph__submit_graph__unpack(NULL, (size_t)n, enc);
	if (!sg) {
		r = errf(err, errlen, -ENOMEM, "no memory");
		goto out;
	}
	for (size_t i = 0; i < sg->n_tensors; i++) {
		Qgraph__Tensor *t = sg->tensors[i];
		if (t->weights) {
			size_t j = 0;
			while (j < nw && w[j].handle != t->weights)
				j++;
			if (j == nw) {
				r = errf(err, errlen, -EINVAL, "tensor %zu uses weights %llu that were not given", i,
					 (unsigned long long)t->weights);
				goto out;
			}
			t->weights = j + 1;
		}
		if (t->arena && (t->arena->offset > arena_bytes || t->arena->bytes > arena_bytes - t->arena->offset)) {
			r = errf(err, errlen, -EINVAL, "tensor %zu lies outside the %zu bytes of arena saved", i,
				 arena_bytes);
			goto out;
		}
	}
	for (size_t j = 0; j < nw; j++) {
		ssize_t bytes = qgraph_matrix_size(w[j].type, w[j].rows, w[j].cols);
		if (bytes < 0) {
			r = errf(err, errlen, (int)bytes, "weights %zu: a %lld x %lld %s matrix is not valid", j,
				 (long long)w[j].rows, (long long)w[j].cols, qgraph_type_name(w[j].type));
			goto out;
		}
		qgraph__saved_weights__init(&sw[j]);
		sw[j].type = (Qgraph__Type)qg_wire_type_of_public(w[j].type);	/* valid: its size was */
		sw[j].rows = w[j].rows;
		sw[j].cols = w[j].cols;
		sw[j].data.len = (size_t)bytes;
		sw[j].data.data = (uint8_t *)w[j].data;
		swp[j] = &sw[j];
	}
	Qgraph__SavedGraph f = QGRAPH__SAVED_GRAPH__INIT;
	f.version = GF_VERSION;
	f.graph = sg;
	f.n_weights = nw;
	f.weights = swp;
	f.arena.len = arena_bytes;
	f.arena.data = (uint8_t *)arena;
	f.description = (char *)(description ? description : "");
	size_t len = qgraph__saved_graph__get_packed_size(&f);
	out = malloc(len ? len : 1);
	if (!out) {
		r = errf(err, errlen, -ENOMEM, "no memory for %zu bytes", len);
		goto out;
	}
	qgraph__saved_graph__pack(&f, out);
	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp) {
		r = errf(err, errlen, -ENAMETOOLONG, "%s: name too long", path);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || (r = write_all(fd, out, len)) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
		r = errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			unlink(tmp);
		fd = -1;
		goto out;
	}
	fd = -1;
	r = 0;
out:
	if (sg)
		qgraph__submit_graph__free_unpacked(sg, NULL);
	free(enc);
	free(out);
	free(sw);
	free(swp);
	return r;
}

/* ---------------------------------------------------------------- reading */

static uint8_t *read_file(const char *path, size_t *len, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *buf = NULL;
	size_t got = 0;

	if (fd < 0 || fstat(fd, &st) < 0) {
		errf(err, errlen, 0, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uint64_t)st.st_size > GF_MAX_FILE) {
		errf(err, errlen, 0, "%s: not a regular file of 1 byte to %zu GiB", path, GF_MAX_FILE >> 30);
		goto fail;
	}
	buf = malloc((size_t)st.st_size);
	if (!buf) {
		errf(err, errlen, 0, "%s: no memory for %lld bytes", path, (long long)st.st_size);
		goto fail;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			errf(err, errlen, 0, "%s: %s", path, n < 0 ? strerror(errno) : "shorter than its size");
			goto fail;
		}
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return buf;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

static bool is_q4_family(Qgraph__Type t)
{
	return t == QGRAPH__TYPE__TYPE_Q4_0 || t == QGRAPH__TYPE__TYPE_Q4_0_4X4 || t == QGRAPH__TYPE__TYPE_Q4_0_4X8 ||
	       t == QGRAPH__TYPE__TYPE_Q4_0_8X8;
}

/*
 * Check F for what this tool relies on before it touches anything: the
 * version, a graph, weights of the size their shape says, weight numbers
 * in range, and the arena bytes every span needs (*NEED).  0, or 2 with
 * the reason on stderr.
 */
static int check_file(const char *path, const Qgraph__SavedGraph *f, uint64_t *need)
{
	const Qgraph__SubmitGraph *sg = f->graph;

	if (f->version != GF_VERSION) {
		fprintf(stderr, "qgraph-submit run: %s: graph file version %u; this tool reads version %u\n", path,
			f->version, GF_VERSION);
		return 2;
	}
	if (!sg || sg->n_tensors == 0) {
		fprintf(stderr, "qgraph-submit run: %s: the file holds no graph\n", path);
		return 2;
	}
	for (size_t j = 0; j < f->n_weights; j++) {
		const Qgraph__SavedWeights *w = f->weights[j];
		int pt = qg_wire_public_type(w->type);
		ssize_t bytes = pt < 0 ? -EINVAL : qgraph_matrix_size((enum qgraph_type)pt, w->rows, w->cols);
		if (bytes < 0 || (size_t)bytes != w->data.len) {
			fprintf(stderr, "qgraph-submit run: %s: weights %zu: %zu bytes for a %lld x %lld matrix of type %d\n",
				path, j, w->data.len, (long long)w->rows, (long long)w->cols, (int)w->type);
			return 2;
		}
	}
	*need = f->arena.len;
	for (size_t i = 0; i < sg->n_tensors; i++) {
		const Qgraph__Tensor *t = sg->tensors[i];
		if (t->weights > f->n_weights) {
			fprintf(stderr, "qgraph-submit run: %s: tensor %zu names weights %llu; the file holds %zu\n", path,
				i, (unsigned long long)t->weights, f->n_weights);
			return 2;
		}
		if (t->arena) {
			if (t->arena->offset > (UINT64_C(1) << 40) || t->arena->bytes > (UINT64_C(1) << 40)) {
				fprintf(stderr, "qgraph-submit run: %s: tensor %zu: arena span out of range\n", path, i);
				return 2;
			}
			if (t->arena->offset + t->arena->bytes > *need)
				*need = t->arena->offset + t->arena->bytes;
		}
	}
	return 0;
}

/* The file's weights, 64-byte aligned copies (what the kernels need), for the in-process run. */
struct local_weights {
	const Qgraph__SavedGraph *f;
	void **data;
};

static int local_weights_fn(void *ctx, uint64_t handle, struct qg_wire_weights *out)
{
	const struct local_weights *lw = ctx;

	if (handle == 0 || handle > lw->f->n_weights)
		return -ENOENT;
	const Qgraph__SavedWeights *w = lw->f->weights[handle - 1];
	int type = qg_wire_type(w->type);
	if (type < 0)
		return -ENOENT;
	out->type = (enum qg_type)type;
	out->rows = w->rows;
	out->cols = w->cols;
	out->data = lw->data[handle - 1];
	return 0;
}

/*
 * Compute SG in this process on ARENA (the file's arena, ARENA_BYTES),
 * every intermediate in memory of its own, one node after another.  0, or
 * 1 with the reason on stderr.
 */
static int local_run(const Qgraph__SubmitGraph *sg, unsigned char *arena, uint64_t arena_bytes,
		     struct local_weights *lw)
{
	struct qg_wire_env env = { .arena = arena, .arena_bytes = arena_bytes, .max_tensors = (uint32_t)sg->n_tensors,
				   .weights = local_weights_fn, .weights_ctx = lw };
	struct qg_wire_graph wg;
	char err[256];
	void **own = NULL;
	void *scratch = NULL;
	size_t n_own = 0, scratch_bytes = 0;
	int r = 1;

	if (qg_wire_graph_build(sg, &env, &wg, err, sizeof err)) {
		fprintf(stderr, "qgraph-submit run: the graph does not check: %s\n", err);
		return 1;
	}
	struct qg_graph *g = wg.graph;
	own = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *own);
	if (!own)
		goto nomem;
	for (size_t i = 0; i < g->n_nodes; i++) {
		struct qg_tensor *t = g->nodes[i];
		if (!t->data && !t->view_src) {
			size_t b = (qg_tensor_nbytes(t) + 63) & ~(size_t)63;
			if (!(own[n_own] = aligned_alloc(64, b ? b : 64)))
				goto nomem;
			t->data = own[n_own++];
		}
		if (!t->data && t->view_src && t->view_src->data)
			t->data = (unsigned char *)t->view_src->data + t->view_offs;
		size_t sc = qg_op_scratch_size(t, 1);
		if (sc > scratch_bytes)
			scratch_bytes = sc;
	}
	if (scratch_bytes && !(scratch = aligned_alloc(64, (scratch_bytes + 63) & ~(size_t)63)))
		goto nomem;
	for (size_t i = 0; i < g->n_nodes; i++) {
		for (int p = 0; p < qg_op_n_phases(g->nodes[i]); p++) {
			int e = qg_op_compute(g->nodes[i], p, 0, 1, scratch);
			if (e) {
				fprintf(stderr, "qgraph-submit run: in this process, node %zu (%s) failed: %s\n", i,
					qg_op_name(g->nodes[i]->op), strerror(-e));
				goto done;
			}
		}
	}
	r = 0;
	goto done;
nomem:
	fprintf(stderr, "qgraph-submit run: no memory for the in-process run\n");
done:
	for (size_t i = 0; i < n_own; i++)
		free(own[i]);
	free(own);
	free(scratch);
	qg_wire_graph_free(&wg);
	return r;
}

/*
 * The in-process copies of F's arena (NEED bytes, into *LOCAL) and of its
 * weights (64-byte aligned, into LW), which the reference run and the
 * check read.  0, or -ENOMEM (what was made is left in LW and *LOCAL for
 * the caller to free).
 */
static int copy_local(const Qgraph__SavedGraph *f, uint64_t need, struct local_weights *lw, unsigned char **local)
{
	lw->f = f;
	lw->data = calloc(f->n_weights ? f->n_weights : 1, sizeof *lw->data);
	*local = calloc(1, need ? need : 1);
	if (!lw->data || !*local)
		return -ENOMEM;
	memcpy(*local, f->arena.data, f->arena.len);
	for (size_t j = 0; j < f->n_weights; j++) {
		size_t b = f->weights[j]->data.len;
		if (!(lw->data[j] = aligned_alloc(64, (b + 63) & ~(size_t)63)))
			return -ENOMEM;
		memcpy(lw->data[j], f->weights[j]->data.data, b);
	}
	return 0;
}

/*
 * Upload weights W (the file's J-th) to S: its handle into *HANDLE and
 * the type the daemon stores into *STORED.  0, or 1 with the reason on
 * stderr.
 */
static int upload_one(struct qgraph_session *s, const Qgraph__SavedWeights *w, size_t j, uint64_t *handle,
		      enum qgraph_type *stored)
{
	enum qgraph_type type = (enum qgraph_type)qg_wire_public_type(w->type), target = type, src_type = type;	/* checked */
	const void *data = w->data.data;
	float *f32 = NULL;

	if (is_q4_family(w->type)) {
		target = QGRAPH_TYPE_Q4_0;	/* the daemon picks its layout: repacking loses nothing */
	} else if (type == QGRAPH_TYPE_Q4_K || type == QGRAPH_TYPE_Q6_K) {
		/* sent as they are: quantizing their values again would search anew */
	} else if (type != QGRAPH_TYPE_F32) {
		/*
		 * Uploads arrive as f32 or Q4_0: send the values and let the
		 * daemon quantize them again, which gives the same bytes back
		 * (an F16 value is exact in f32; a Q8_0 block's largest code
		 * is 127, so its scale comes out unchanged).
		 */
		size_t nf = (size_t)w->rows * (size_t)w->cols;
		if (nf > SIZE_MAX / 4 || !(f32 = malloc(nf * 4)) ||
		    qgraph_dequantize(type, w->data.data, f32, nf * 4, w->rows, w->cols) < 0) {
			fprintf(stderr, "qgraph-submit run: weights %zu: cannot convert them to f32\n", j);
			free(f32);
			return 1;
		}
		data = f32;
		src_type = QGRAPH_TYPE_F32;
	}
	struct qgraph_upload_opts uo = { .size = sizeof uo, .src_type = src_type, .target = target,
					 .rows = w->rows, .cols = w->cols, .data = data };
	int r = qgraph_weights_upload(s, &uo, handle, stored);
	free(f32);
	if (r) {
		fprintf(stderr, "qgraph-submit run: weights %zu: %s\n", j, qgraph_session_error(s));
		return 1;
	}
	return 0;
}

/*
 * Upload every weights of F to S and point SG's tensors at the daemon's
 * handles and stored types, and at the arena copy at BASE.  HANDLES holds
 * f->n_weights.  0, or 1 with the reason on stderr (-ENOMEM: no memory).
 */
static int upload_and_rebase(struct qgraph_session *s, const Qgraph__SavedGraph *f, Qgraph__SubmitGraph *sg,
			     uint64_t *handles, int64_t base)
{
	enum qgraph_type *stored = calloc(f->n_weights ? f->n_weights : 1, sizeof *stored);

	if (!stored)
		return -ENOMEM;
	for (size_t j = 0; j < f->n_weights; j++)
		if (upload_one(s, f->weights[j], j, &handles[j], &stored[j])) {
			free(stored);
			return 1;
		}
	for (size_t i = 0; i < sg->n_tensors; i++) {
		Qgraph__Tensor *t = sg->tensors[i];
		if (t->weights) {
			t->type = (Qgraph__Type)qg_wire_type_of_public(stored[t->weights - 1]);
			t->weights = handles[t->weights - 1];
		}
		if (t->arena)
			t->arena->offset += (uint64_t)base;
	}
	free(stored);
	return 0;
}

/*
 * Register SG with S, then run it O->repeat times, each run's seconds
 * into TIMES (sorted).  0, or 1 with the reason on stderr (-ENOMEM: no
 * memory).
 */
static int register_and_time(struct qgraph_session *s, const Qgraph__SubmitGraph *sg, const struct gf_run_opts *o,
			     double *times)
{
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	uint64_t id, handle;
	size_t elen = qgraph__submit_graph__get_packed_size(sg);
	uint8_t *enc = malloc(elen);
	int r;

	if (!enc)
		return -ENOMEM;
	qgraph__submit_graph__pack(sg, enc);
	r = qgraph_submit_encoded(s, enc, elen, QGRAPH_SUBMIT_KEEP | QGRAPH_SUBMIT_BLOCK, &id);
	free(enc);
	if (r || (r = qgraph_wait(s, id, -1, &res)) || (r = res.status)) {
		fprintf(stderr, "qgraph-submit run: %s\n", r == -EMSGSIZE ? "the graph is too large for a request"
						     : qgraph_session_error(s));
		return 1;
	}
	handle = res.handle;
	for (long i = 0; i < o->repeat; i++) {
		double t0 = now_s();
		if ((r = qgraph_run(s, handle, NULL, QGRAPH_SUBMIT_BLOCK, &id)) || (r = qgraph_wait(s, id, -1, &res)) ||
		    (r = res.status)) {
			fprintf(stderr, "qgraph-submit run: run %ld: %s\n", i + 1, qgraph_session_error(s));
			return 1;
		}
		times[i] = now_s() - t0;
	}
	qsort(times, (size_t)o->repeat, sizeof *times, cmp_double);
	return 0;
}

/*
 * Print output tensor I of SG (T), read at GOT, checked against WANT (the
 * in-process run) when O asks; OUTPUTS counts the outputs printed so far.
 * Whether it was wrong.
 */
static bool print_output(const Qgraph__Tensor *t, size_t i, size_t outputs, const unsigned char *got_bytes,
			 const unsigned char *want_bytes, const struct gf_run_opts *o)
{
	size_t nf = t->arena->bytes / 4;
	const float *got = (const float *)got_bytes, *want = (const float *)want_bytes;
	bool f32 = t->type == QGRAPH__TYPE__TYPE_F32, wrong = false;

	if (o->json)
		printf("%s{\"tensor\": %zu, \"values\": %zu", outputs > 1 ? ", " : "", i, nf);
	else
		printf("output %zu (tensor %zu, %zu values)", outputs, i, nf);
	if (o->check && f32) {
		double e = rel_err(got, want, nf);
		if (o->json)
			printf(", \"max_error\": %.3e, \"ok\": %s", e, e < 1e-3 ? "true" : "false");
		else
			printf(": max error vs in-process %.2e %s", e, e < 1e-3 ? "ok" : "WRONG");
		wrong = !(e < 1e-3);
	} else if (o->check) {
		/* converted results (F16, Q8_0) are rounded by one rule on both sides: equal bytes */
		bool same = memcmp(got, want, t->arena->bytes) == 0;
		if (o->json)
			printf(", \"equal_bytes\": %s, \"ok\": %s", same ? "true" : "false",
			       same ? "true" : "false");
		else
			printf(": %s the in-process bytes %s", same ? "equal to" : "differ from",
			       same ? "ok" : "WRONG");
		wrong = !same;
	}
	if (o->json) {
		printf(", \"first\": [");
		for (int k = 0; f32 && k < o->print && (size_t)k < nf; k++)
			printf(isfinite(got[k]) ? "%s%.9g" : "%snull", k ? ", " : "", (double)got[k]);
		printf("]}");
		return wrong;
	}
	putchar('\n');
	for (int k = 0; f32 && k < o->print && (size_t)k < nf; k++)
		printf("  [%d] %.6g\n", k, (double)got[k]);
	return wrong;
}

/*
 * Print the result of running F's graph SG from PATH: its outputs as the
 * daemon left them in ARENA and as the in-process run left them in LOCAL
 * (both from BASE), and the median of TIMES.  0, or 1 if one was wrong.
 */
static int report_run(const char *path, const Qgraph__SavedGraph *f, const Qgraph__SubmitGraph *sg,
		      const unsigned char *arena, const unsigned char *local, int64_t base, const double *times,
		      const struct gf_run_opts *o)
{
	bool wrong = false;
	size_t outputs = 0;

	if (o->json) {
		printf("{\"command\": \"run\", \"file\": ");
		json_string(stdout, path, strlen(path));
		printf(", \"description\": ");
		json_string(stdout, f->description ? f->description : "", SIZE_MAX);
		printf(", \"tensors\": %zu, \"repeat\": %ld, \"median_ms\": %.6f, \"checked\": %s, \"outputs\": [",
		       sg->n_tensors, o->repeat, times[o->repeat / 2] * 1e3, o->check ? "true" : "false");
	}
	for (size_t i = 0; i < sg->n_tensors; i++) {
		const Qgraph__Tensor *t = sg->tensors[i];
		if (!(t->flags & 2) || !t->arena)
			continue;
		uint64_t at = t->arena->offset - (uint64_t)base;
		wrong |= print_output(t, i, ++outputs, arena + at, local + at, o);
	}
	if (o->json)
		printf("], \"ok\": %s}\n", wrong ? "false" : "true");
	else
		printf("%s: %zu tensors, %zu outputs: median %.3f ms over %ld runs%s\n", path, sg->n_tensors, outputs,
		       times[o->repeat / 2] * 1e3, o->repeat, o->check ? (wrong ? ", WRONG" : ", checked") : "");
	return wrong ? 1 : 0;
}

/*
 * Read and check the graph file PATH into *F (its arena's bytes, rounded
 * up to 64, into *NEED); BUF holds the file's bytes until F is freed.
 * 0, or the exit status (2: not a graph file this tool reads).
 */
static int load_file(const char *path, uint8_t **buf, Qgraph__SavedGraph **f, uint64_t *need)
{
	char err[512];
	size_t len;
	int rc;

	if (!(*buf = read_file(path, &len, err, sizeof err))) {
		fprintf(stderr, "qgraph-submit run: %s\n", err);
		return 2;
	}
	if (!(*f = qgraph__saved_graph__unpack(NULL, len, *buf))) {
		fprintf(stderr, "qgraph-submit run: %s: not a qgraph graph file (it does not decode as one)\n", path);
		return 2;
	}
	if ((rc = check_file(path, *f, need)) != 0)
		return rc;
	*need = (*need + 63) & ~UINT64_C(63);
	return 0;
}

/*
 * A session with the daemon at SOCKET into *S, and NEED bytes of its
 * arena at *BASE holding F's arena.  0, or the exit status (3: no daemon)
 * with the reason on stderr (*S may then be open, for the caller to close).
 */
static int open_session(const char *socket, const Qgraph__SavedGraph *f, uint64_t need, struct qgraph_session **s,
			int64_t *base)
{
	struct qgraph_connect_opts co = { .socket = socket, .name = "qgraph-submit run",
					  .arena_bytes = need + (1u << 20) };
	char err[512];
	int r = qgraph_connect(&co, s, err, sizeof err);

	if (r) {
		fprintf(stderr, "qgraph-submit run: %s\n", err);
		return r == -ENOENT || r == -ECONNREFUSED ? 3 : 1;
	}
	*base = qgraph_arena_alloc(*s, need ? need : 64);
	if (*base < 0) {
		fprintf(stderr, "qgraph-submit run: the daemon's arena has no room for %llu bytes\n",
			(unsigned long long)need);
		return 1;
	}
	memcpy((unsigned char *)qgraph_arena(*s, NULL) + *base, f->arena.data, f->arena.len);
	return 0;
}

int gf_run(const char *path, const char *socket, const struct gf_run_opts *o)
{
	uint8_t *buf = NULL;
	Qgraph__SavedGraph *f = NULL;
	struct qgraph_session *s = NULL;
	struct local_weights lw = { 0 };
	unsigned char *local = NULL;
	uint64_t *handles = NULL, need = 0;
	double *times = NULL;
	int rc = load_file(path, &buf, &f, &need);

	if (rc)
		goto out;
	rc = 1;
	Qgraph__SubmitGraph *sg = f->graph;
	if (!o->quiet && !o->json && f->description && *f->description)
		printf("%s: %s\n", path, f->description);
	/* the reference first, while the graph still names the file's own weights and offsets */
	if (copy_local(f, need, &lw, &local))
		goto nomem;
	if (o->check && local_run(sg, local, need, &lw))
		goto out;

	int64_t base;
	int r;
	if ((rc = open_session(socket, f, need, &s, &base)))
		goto out;
	rc = 1;
	unsigned char *arena = (unsigned char *)qgraph_arena(s, NULL) + base;
	handles = calloc(f->n_weights ? f->n_weights : 1, sizeof *handles);
	times = calloc((size_t)o->repeat, sizeof *times);
	if (!handles || !times)
		goto nomem;
	if ((r = upload_and_rebase(s, f, sg, handles, base)) || (r = register_and_time(s, sg, o, times))) {
		if (r == -ENOMEM)
			goto nomem;
		goto out;
	}
	rc = report_run(path, f, sg, arena, local, base, times, o);
	goto out;
nomem:
	fprintf(stderr, "qgraph-submit run: no memory\n");
	rc = 1;
out:
	if (lw.data)
		for (size_t j = 0; j < f->n_weights; j++)
			free(lw.data[j]);
	free(lw.data);
	free(local);
	free(handles);
	free(times);
	qgraph_session_close(s);
	if (f)
		qgraph__saved_graph__free_unpacked(f, NULL);
	free(buf);
	return rc;
}
