/*
 * qgraph-quantize - quantize, dequantize and repack raw matrices in ggml's
 * formats, with libqgraph's public API alone.
 *
 *	qgraph-quantize --type TYPE --rows R --cols C [--imatrix FILE [--imatrix-tensor NAME]]
 *			[--threads N] IN.f32 OUT
 *	qgraph-quantize --dequantize --type TYPE --rows R --cols C IN OUT.f32
 *	qgraph-quantize --repack --from TYPE --type TYPE --rows R --cols C IN OUT
 *
 * The matrix streams through in groups of rows, so its size is bounded by
 * the disk, not by memory; with --threads each group is split among the
 * threads by rows (every row is converted alone, so the bytes are the same
 * for any N).  OUT appears only when complete: it is written to a temporary
 * file beside it and renamed.  The importance matrix is raw f32, or the
 * GGUF file llama-imatrix writes (src/formats/gguf.h reads it).
 *
 * Exit status: 0 done, 1 bad input (sizes, file lengths, values, I/O),
 * 2 bad usage.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "qgraph.h"

#define PROG "qgraph-quantize"

/* Rows per chunk: about this many input bytes a thread, a multiple of every row group. */
#define CHUNK_BYTES (1u << 20)
#define ROW_ALIGN 8
#define MAX_THREADS 256

enum mode { MODE_QUANTIZE, MODE_DEQUANTIZE, MODE_REPACK };

struct job {
	enum mode mode;
	enum qgraph_type from, to;	/* FROM is F32 when quantizing, TO is F32 when dequantizing */
	int64_t rows, cols;
	const char *in_path, *out_path, *imatrix_path, *imatrix_tensor;
	float *imatrix;
	int in_fd, out_fd;
	char *tmp_path;
	int threads;
};

/* One thread's share of a chunk: ROWS rows at IN, converted to OUT (OUT_CAP bytes); RC its result. */
struct slice {
	const struct job *j;
	void *in, *out;
	size_t out_cap;
	int64_t r0, rows;
	ssize_t rc;
};

__attribute__((format(printf, 1, 2)))
static void err(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

__attribute__((format(printf, 1, 2), noreturn))
static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry '" PROG " --help' for more information.\n", stderr);
	exit(2);
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " --type TYPE --rows R --cols C [--imatrix FILE] IN.f32 OUT\n"
		"       " PROG " --dequantize --type TYPE --rows R --cols C IN OUT.f32\n"
		"       " PROG " --repack --from TYPE --type TYPE --rows R --cols C IN OUT\n"
		"\n"
		"Quantize a raw little-endian f32 matrix (R rows of C values, row-major)\n"
		"into raw blocks of TYPE, byte-compatible with ggml; or turn such blocks\n"
		"back into f32; or repack Q4_0 (Q8_0) blocks between their layouts\n"
		"without re-quantizing.  IN may be - for standard input.\n"
		"\n"
		"  -t, --type TYPE      the output type (with --dequantize: the input's)\n"
		"  -r, --rows R         rows of the matrix\n"
		"  -c, --cols C         values per row (a multiple of 32 for block types,\n"
		"                       of 256 for q4_K, q6_K and q8_K)\n"
		"  -i, --imatrix FILE   importance weights: C little-endian f32, one per\n"
		"                       column, finite and >= 0 (used by q4_0 and its layouts,\n"
		"                       q4_K and q6_K);\n"
		"                       or llama-imatrix's GGUF output (in_sum2 / counts)\n"
		"  -n, --imatrix-tensor NAME  the tensor of a GGUF imatrix to use (needed when\n"
		"                       it holds more than one)\n"
		"  -j, --threads N      convert with N threads (1 to 256; default 1); the\n"
		"                       bytes are the same for any N\n"
		"  -d, --dequantize     IN is TYPE, OUT is f32\n"
		"  -p, --repack         IN is --from TYPE, OUT is --type TYPE\n"
		"  -f, --from TYPE      the input type of --repack\n"
		"  -h, --help           print this and exit\n"
		"  -V, --version        print the version and exit\n"
		"\n"
		"Types:");
	for (int t = 0; t < QGRAPH_TYPE_COUNT; t++)
		fprintf(f, " %s", qgraph_type_name((enum qgraph_type)t));
	fprintf(f, "\n(q4_0_4x4, q4_0_4x8 and q8_0_4x* interleave 4 rows, q4_0_8x8 8 rows;\n"
		"q4_K and q6_K are ggml's quantization, with or without an imatrix.)\n"
		"On a terminal, progress goes to standard error.\n"
		"Exit status: 0 done, 1 bad input, 2 bad usage.  See qgraph-quantize(1).\n"
		"Report bugs to: " PACKAGE_BUGREPORT "\n");
}

static enum qgraph_type parse_type(const char *opt, const char *s)
{
	int t = qgraph_type_from_name(s);

	if (t < 0) {
		fprintf(stderr, PROG ": %s: unknown type '%s'; types are:", opt, s);
		for (int k = 0; k < QGRAPH_TYPE_COUNT; k++)
			fprintf(stderr, " %s", qgraph_type_name((enum qgraph_type)k));
		fputs("\nTry '" PROG " --help' for more information.\n", stderr);
		exit(2);
	}
	return (enum qgraph_type)t;
}

static int64_t parse_count(const char *opt, const char *s)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v <= 0)
		usage_error("%s: '%s' is not a positive integer", opt, s);
	return (int64_t)v;
}

/* Little-endian f32 on disk; a big-endian host swaps. */
static void f32_from_le(float *v, size_t n)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &v[i], 4);
		u = __builtin_bswap32(u);
		memcpy(&v[i], &u, 4);
	}
#else
	(void)v;
	(void)n;
#endif
}

/* Read exactly N bytes, or fewer at the end of the file.  Returns bytes read or -1. */
static ssize_t read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static int write_full(int fd, const void *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = write(fd, (const char *)buf + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* "TYPE needs ..." checks of the shape against one type; 0 or -1 after a message. */
static int check_shape(const struct job *j, enum qgraph_type t)
{
	const char *name = qgraph_type_name(t);
	int bv = qgraph_type_block_values(t), rg = qgraph_type_row_group(t);

	if (j->cols % bv) {
		err("--cols %" PRId64 " is not a multiple of %d, which %s needs (its blocks hold %d values)",
		    j->cols, bv, name, bv);
		return -1;
	}
	if (j->rows % rg) {
		err("--rows %" PRId64 " is not a multiple of %d, which %s needs (it interleaves %d rows)",
		    j->rows, rg, name, rg);
		return -1;
	}
	ssize_t s = qgraph_matrix_size(t, j->rows, j->cols);
	if (s < 0 || j->rows > INT64_MAX / j->cols || (uint64_t)(j->rows * j->cols) > (uint64_t)SSIZE_MAX / 4) {
		err("a %" PRId64 " x %" PRId64 " matrix is too large", j->rows, j->cols);
		return -1;
	}
	return 0;
}

/* TENSOR.SUFFIX's f32 values in G, checked to be NE0 x NE1; NULL after a message. */
static const float *imatrix_part(const struct job *j, const struct qg_gguf *g, const char *tensor, const char *suffix,
				 int64_t ne0, int64_t ne1)
{
	char name[512];
	const struct qg_gguf_tensor *t;

	snprintf(name, sizeof name, "%s.%s", tensor, suffix);
	if (!(t = qg_gguf_tensor_find(g, name))) {
		err("%s: no tensor %s (llama-imatrix writes NAME.in_sum2 and NAME.counts)", j->imatrix_path, name);
		return NULL;
	}
	if (t->type != 0 || t->n_dims > 2 || t->ne[0] != ne0 || t->ne[1] != ne1) {
		err("%s: %s is %s [%lld %lld]; an importance matrix for %" PRId64 " columns needs f32 [%lld %lld]",
		    j->imatrix_path, name, qg_ggml_type_name(t->type) ? qg_ggml_type_name(t->type) : "?",
		    (long long)t->ne[0], (long long)t->ne[1], j->cols, (long long)ne0, (long long)ne1);
		return NULL;
	}
	return t->data;
}

/*
 * The importance matrix of llama-imatrix's GGUF file BUF (LEN bytes): the
 * tensor J->imatrix_tensor names, or the only one there is.  Each column's
 * weight is its sum of squared activations over the count of them (a
 * tensor no activation reached weighs every column 1, as llama-quantize
 * reads it).  0, or -1 after a message.
 */
static int load_imatrix_gguf(struct job *j, const void *buf, size_t len)
{
	char why[256], name[512] = "";
	struct qg_gguf *g = NULL;
	int rc = -1;

	if (qg_gguf_open(buf, len, &g, why, sizeof why)) {
		err("%s: %s", j->imatrix_path, why);
		return -1;
	}
	if (j->imatrix_tensor) {
		snprintf(name, sizeof name, "%s", j->imatrix_tensor);
	} else {
		size_t found = 0;
		for (size_t i = 0; i < qg_gguf_tensor_count(g); i++) {
			const char *n = qg_gguf_tensor_at(g, i)->name;
			size_t l = strlen(n);
			if (l > 8 && strcmp(n + l - 8, ".in_sum2") == 0 && found++ == 0)
				snprintf(name, sizeof name, "%.*s", (int)(l - 8), n);
		}
		if (found != 1) {
			err("%s: %zu tensors have an importance matrix; name one with --imatrix-tensor",
			    j->imatrix_path, found);
			goto out;
		}
	}
	const float *sum2 = imatrix_part(j, g, name, "in_sum2", j->cols, 1);
	const float *counts = sum2 ? imatrix_part(j, g, name, "counts", 1, 1) : NULL;
	if (!counts)
		goto out;
	float n;
	memcpy(&n, counts, sizeof n);	/* the reader aligns tensor data, but say what is meant */
	f32_from_le(&n, 1);
	if (!isfinite(n) || n < 0.0f) {
		err("%s: %s.counts is %g; a count is finite and >= 0", j->imatrix_path, name, n);
		goto out;
	}
	if (!(j->imatrix = malloc((size_t)j->cols * sizeof(float)))) {
		err("%s: out of memory", j->imatrix_path);
		goto out;
	}
	memcpy(j->imatrix, sum2, (size_t)j->cols * sizeof(float));
	f32_from_le(j->imatrix, (size_t)j->cols);
	for (int64_t c = 0; c < j->cols; c++)
		j->imatrix[c] = n > 0.0f ? j->imatrix[c] / n : 1.0f;
	rc = 0;
out:
	qg_gguf_free(g);
	return rc;
}

static int check_imatrix(const struct job *j)
{
	for (int64_t c = 0; c < j->cols; c++) {
		float v = j->imatrix[c];
		if (!isfinite(v) || v < 0.0f) {
			err("%s: weight %" PRId64 " is %g; weights must be finite and non-negative", j->imatrix_path,
			    c, v);
			return -1;
		}
	}
	return 0;
}

static int load_imatrix(struct job *j)
{
	const char *p = j->imatrix_path;
	size_t want = (size_t)j->cols * sizeof(float);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	char magic[4];
	struct stat st;

	if (fd < 0) {
		err("%s: %s", p, strerror(errno));
		return -1;
	}
	/* a GGUF file (llama-imatrix's) is read mapped; a raw one as it was */
	if (pread(fd, magic, 4, 0) == 4 && memcmp(magic, "GGUF", 4) == 0 && fstat(fd, &st) == 0 &&
	    S_ISREG(st.st_mode) && st.st_size > 0 && (uintmax_t)st.st_size <= SIZE_MAX) {
		void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
		if (map == MAP_FAILED) {
			err("%s: %s", p, strerror(errno));
			return -1;
		}
		int r = load_imatrix_gguf(j, map, (size_t)st.st_size);
		munmap(map, (size_t)st.st_size);
		return r < 0 ? r : check_imatrix(j);
	}
	if (j->imatrix_tensor) {
		close(fd);
		err("%s: --imatrix-tensor goes with a GGUF importance matrix, and this one is raw f32", p);
		return -1;
	}
	if (!(j->imatrix = malloc(want + 1))) {
		err("%s: out of memory", p);
		close(fd);
		return -1;
	}
	ssize_t got = read_full(fd, j->imatrix, want + 1);
	int e = errno;
	close(fd);
	if (got < 0) {
		err("%s: %s", p, strerror(e));
		return -1;
	}
	if ((size_t)got != want) {
		if ((size_t)got > want)
			err("%s: longer than %zu bytes, the size of an importance matrix for %" PRId64
			    " columns (one little-endian f32 per column)", p, want, j->cols);
		else
			err("%s: %zd bytes, but an importance matrix for %" PRId64
			    " columns is %zu bytes (one little-endian f32 per column)", p, got, j->cols, want);
		return -1;
	}
	f32_from_le(j->imatrix, (size_t)j->cols);
	return check_imatrix(j);
}

/* Explain why quantizing ROWS rows from row R0 failed with RC. */
static void explain_quantize(const struct job *j, const float *x, int64_t r0, int64_t rows, ssize_t rc)
{
	const char *name = qgraph_type_name(j->to);

	if (rc == -EDOM) {
		for (int64_t i = 0; i < rows * j->cols; i++) {
			if (!isfinite(x[i])) {
				err("%s: row %" PRId64 ", column %" PRId64 " is %g; %s cannot represent NaN or infinity",
				    j->in_path, r0 + i / j->cols, i % j->cols, x[i], name);
				return;
			}
		}
	}
	if (rc == -ERANGE) {
		/* a block's scale (q4_0: max / 8, q8_0: max / 127) rounds to f16 infinity from 65520;
		 * q4_K and q6_K take magnitudes below 2^20 (qg_quantize's bound) */
		float limit = j->to == QGRAPH_TYPE_Q8_0 || j->to == QGRAPH_TYPE_Q8_0_4X4 ||
			      j->to == QGRAPH_TYPE_Q8_0_4X8 ? 127.0f * 65520.0f
			      : j->to == QGRAPH_TYPE_Q4_K || j->to == QGRAPH_TYPE_Q6_K ? 0x1p20f : 8.0f * 65520.0f;
		for (int64_t i = 0; i < rows * j->cols; i++) {
			if (fabsf(x[i]) >= limit) {
				err("%s: row %" PRId64 ", column %" PRId64 " is %g; its block's f16 scale would "
				    "overflow in %s (magnitudes below %g fit)",
				    j->in_path, r0 + i / j->cols, i % j->cols, x[i], name, limit);
				return;
			}
		}
		err("%s: rows %" PRId64 "-%" PRId64 ": values too large for %s's f16 scales",
		    j->in_path, r0, r0 + rows - 1, name);
		return;
	}
	err("%s: rows %" PRId64 "-%" PRId64 ": %s", j->in_path, r0, r0 + rows - 1, strerror((int)-rc));
}

static int open_output(struct job *j)
{
	size_t n = strlen(j->out_path);
	mode_t mask;

	if (!(j->tmp_path = malloc(n + sizeof ".XXXXXX"))) {
		err("%s: out of memory", j->out_path);
		return -1;
	}
	memcpy(j->tmp_path, j->out_path, n);
	memcpy(j->tmp_path + n, ".XXXXXX", sizeof ".XXXXXX");
	if ((j->out_fd = mkstemp(j->tmp_path)) < 0) {
		err("%s: cannot create a temporary file beside it: %s", j->out_path, strerror(errno));
		free(j->tmp_path);
		j->tmp_path = NULL;
		return -1;
	}
	mask = umask(0);
	umask(mask);
	if (fchmod(j->out_fd, 0666 & ~mask) < 0) {
		err("%s: %s", j->tmp_path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Convert slice S (a thread's start routine; the main thread runs the first slice itself). */
static void *convert(void *arg)
{
	struct slice *sl = arg;
	const struct job *j = sl->j;

	if (j->mode == MODE_QUANTIZE) {
		f32_from_le(sl->in, (size_t)(sl->rows * j->cols));
		sl->rc = qgraph_quantize(j->to, sl->in, sl->out, sl->out_cap, sl->rows, j->cols, j->imatrix);
	} else if (j->mode == MODE_DEQUANTIZE) {
		sl->rc = qgraph_dequantize(j->from, sl->in, sl->out, sl->out_cap, sl->rows, j->cols);
		if (sl->rc >= 0)
			f32_from_le(sl->out, (size_t)(sl->rows * j->cols));	/* the same swap writes LE */
	} else {
		sl->rc = qgraph_repack(j->to, sl->out, sl->out_cap, j->from, sl->in, sl->rows, j->cols);
	}
	return NULL;
}

/*
 * Convert the N rows from row R0 at IN into OUT, split among J's threads in
 * whole groups of ROW_ALIGN rows (each thread's share at its own offset of
 * both buffers).  Bytes written, or -1 after a message naming the first
 * failing rows.
 */
static ssize_t convert_chunk(const struct job *j, unsigned char *in, unsigned char *out, int64_t r0, int64_t n,
			     size_t in_row, size_t out_row)
{
	struct slice sl[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	int64_t per = (n + j->threads - 1) / j->threads;
	int k = 0, started = 0;

	per = (per + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
	for (int64_t at = 0; at < n; at += per, k++)
		sl[k] = (struct slice){ .j = j, .in = in + (size_t)at * in_row, .out = out + (size_t)at * out_row,
					.out_cap = (size_t)(n - at < per ? n - at : per) * out_row, .r0 = r0 + at,
					.rows = n - at < per ? n - at : per };
	for (int i = 1; i < k; i++) {
		if (pthread_create(&tid[i], NULL, convert, &sl[i]) != 0)
			break;	/* the rest on this thread */
		started = i;
	}
	convert(&sl[0]);
	for (int i = started + 1; i < k; i++)
		convert(&sl[i]);
	for (int i = 1; i <= started; i++)
		pthread_join(tid[i], NULL);
	ssize_t total = 0;
	for (int i = 0; i < k; i++) {
		if (sl[i].rc < 0) {
			if (j->mode == MODE_QUANTIZE)
				explain_quantize(j, sl[i].in, sl[i].r0, sl[i].rows, sl[i].rc);
			else
				err("%s: rows %" PRId64 "-%" PRId64 ": %s", j->in_path, sl[i].r0,
				    sl[i].r0 + sl[i].rows - 1, strerror((int)-sl[i].rc));
			return -1;
		}
		total += sl[i].rc;
	}
	return total;
}

/* Rows DONE of TOTAL on standard error, when it is a terminal: a line redrawn, ended when all are done. */
static void show_progress(int64_t done, int64_t total)
{
	static int tty = -1;

	if (tty < 0)
		tty = isatty(STDERR_FILENO);
	if (!tty)
		return;
	fprintf(stderr, "\r" PROG ": %" PRId64 " of %" PRId64 " rows (%d%%)", done, total, (int)(done * 100 / total));
	if (done == total)
		fputc('\n', stderr);
}

/* Stream IN through the conversion into the temporary output. */
static int run(struct job *j)
{
	ssize_t in_row = j->mode == MODE_QUANTIZE ? (ssize_t)(j->cols * 4) : qgraph_row_size(j->from, j->cols);
	ssize_t out_row = j->mode == MODE_DEQUANTIZE ? (ssize_t)(j->cols * 4) : qgraph_row_size(j->to, j->cols);
	uint64_t in_total = (uint64_t)in_row * (uint64_t)j->rows;
	int64_t chunk = (int64_t)(CHUNK_BYTES / (size_t)in_row) / ROW_ALIGN * ROW_ALIGN;
	struct stat st;
	int rc = -1;

	if (chunk < ROW_ALIGN)
		chunk = ROW_ALIGN;
	chunk *= j->threads;	/* each thread its share */
	if (chunk > j->rows)
		chunk = j->rows;
	if (fstat(j->in_fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size != in_total) {
		err("%s: %jd bytes, but a %" PRId64 " x %" PRId64 " %s matrix is %" PRIu64 " bytes",
		    j->in_path, (intmax_t)st.st_size, j->rows, j->cols,
		    qgraph_type_name(j->from), in_total);
		return -1;
	}

	size_t in_cap = (size_t)chunk * (size_t)in_row, out_cap = (size_t)chunk * (size_t)out_row;
	void *in = malloc(in_cap + 1), *out = malloc(out_cap);
	if (!in || !out) {
		err("out of memory");
		goto out;
	}
	for (int64_t r0 = 0; r0 < j->rows; r0 += chunk) {
		int64_t n = j->rows - r0 < chunk ? j->rows - r0 : chunk;
		size_t want = (size_t)n * (size_t)in_row;
		ssize_t got = read_full(j->in_fd, in, want);
		if (got < 0) {
			err("%s: %s", j->in_path, strerror(errno));
			goto out;
		}
		if ((size_t)got < want) {
			err("%s: ends after %" PRIu64 " bytes, but a %" PRId64 " x %" PRId64 " %s matrix is %" PRIu64
			    " bytes", j->in_path, (uint64_t)r0 * (uint64_t)in_row + (uint64_t)got, j->rows,
			    j->cols, qgraph_type_name(j->from), in_total);
			goto out;
		}
		ssize_t w = convert_chunk(j, in, out, r0, n, (size_t)in_row, (size_t)out_row);
		if (w < 0)
			goto out;
		if (write_full(j->out_fd, out, (size_t)w) < 0) {
			err("%s: %s", j->tmp_path, strerror(errno));
			goto out;
		}
		show_progress(r0 + n, j->rows);
	}
	/* a pipe may carry more than the matrix */
	if (read_full(j->in_fd, in, 1) != 0) {
		err("%s: longer than %" PRIu64 " bytes, the size of a %" PRId64 " x %" PRId64 " %s matrix",
		    j->in_path, in_total, j->rows, j->cols, qgraph_type_name(j->from));
		goto out;
	}
	rc = 0;
out:
	free(in);
	free(out);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "type", required_argument, NULL, 't' },
		{ "rows", required_argument, NULL, 'r' },
		{ "cols", required_argument, NULL, 'c' },
		{ "imatrix", required_argument, NULL, 'i' },
		{ "imatrix-tensor", required_argument, NULL, 'n' },
		{ "threads", required_argument, NULL, 'j' },
		{ "dequantize", no_argument, NULL, 'd' },
		{ "repack", no_argument, NULL, 'p' },
		{ "from", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct job j = { .mode = MODE_QUANTIZE, .in_fd = -1, .out_fd = -1, .threads = 1 };
	const char *type_arg = NULL, *from_arg = NULL;
	int dequantize = 0, repack = 0, opt, status = 1;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":t:r:c:i:n:j:dpf:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 't': type_arg = optarg; break;
		case 'r': j.rows = parse_count("--rows", optarg); break;
		case 'c': j.cols = parse_count("--cols", optarg); break;
		case 'i': j.imatrix_path = optarg; break;
		case 'n': j.imatrix_tensor = optarg; break;
		case 'j':
			if (parse_count("--threads", optarg) > MAX_THREADS)
				usage_error("--threads: at most %d", MAX_THREADS);
			j.threads = (int)parse_count("--threads", optarg);
			break;
		case 'd': dequantize = 1; break;
		case 'p': repack = 1; break;
		case 'f': from_arg = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf(PROG " (qgraph) %s\n", qgraph_version()); return 0;
		case ':': usage_error("option '%s' needs an argument", argv[optind - 1]);
		default:
			if (optopt)
				usage_error("unknown option '-%c'", optopt);
			usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 2)
		usage_error(argc - optind < 2 ? "expected IN and OUT" : "too many arguments: expected IN and OUT");
	j.in_path = argv[optind];
	j.out_path = argv[optind + 1];
	if (dequantize && repack)
		usage_error("--dequantize and --repack exclude each other");
	if (!type_arg)
		usage_error("--type is required");
	if (!j.rows || !j.cols)
		usage_error("--rows and --cols are required");
	if (from_arg && !repack)
		usage_error("--from goes with --repack");
	if (j.imatrix_path && (dequantize || repack))
		usage_error("--imatrix goes with quantizing only");
	if (j.imatrix_tensor && !j.imatrix_path)
		usage_error("--imatrix-tensor goes with --imatrix");
	if (strcmp(j.out_path, "-") == 0)
		usage_error("OUT must be a file (it is written to a temporary file and renamed)");

	enum qgraph_type type = parse_type("--type", type_arg);
	if (repack) {
		if (!from_arg)
			usage_error("--repack needs --from TYPE");
		j.mode = MODE_REPACK;
		j.from = parse_type("--from", from_arg);
		j.to = type;
		int fq4 = j.from >= QGRAPH_TYPE_Q4_0 && j.from <= QGRAPH_TYPE_Q4_0_8X8;
		int tq4 = j.to >= QGRAPH_TYPE_Q4_0 && j.to <= QGRAPH_TYPE_Q4_0_8X8;
		int fq8 = j.from == QGRAPH_TYPE_Q8_0 || j.from == QGRAPH_TYPE_Q8_0_4X4 || j.from == QGRAPH_TYPE_Q8_0_4X8;
		int tq8 = j.to == QGRAPH_TYPE_Q8_0 || j.to == QGRAPH_TYPE_Q8_0_4X4 || j.to == QGRAPH_TYPE_Q8_0_4X8;
		if (!((fq4 && tq4) || (fq8 && tq8)))
			usage_error("cannot repack %s into %s: repacking moves q4_0 blocks between q4_0 and "
				    "q4_0_4x4/4x8/8x8, or q8_0 blocks between q8_0 and q8_0_4x4/4x8",
				    qgraph_type_name(j.from), qgraph_type_name(j.to));
	} else if (dequantize) {
		j.mode = MODE_DEQUANTIZE;
		j.from = type;
		j.to = QGRAPH_TYPE_F32;
	} else {
		j.from = QGRAPH_TYPE_F32;
		j.to = type;
	}

	if (check_shape(&j, j.from) < 0 || check_shape(&j, j.to) < 0)
		return 1;
	if (j.imatrix_path && load_imatrix(&j) < 0)
		goto out;
	if (strcmp(j.in_path, "-") == 0) {
		j.in_fd = STDIN_FILENO;
		j.in_path = "(standard input)";
	} else if ((j.in_fd = open(j.in_path, O_RDONLY | O_CLOEXEC)) < 0) {
		err("%s: %s", j.in_path, strerror(errno));
		goto out;
	}
	if (open_output(&j) < 0 || run(&j) < 0)
		goto out;
	if (fsync(j.out_fd) < 0 || close(j.out_fd) < 0) {
		j.out_fd = -1;
		err("%s: %s", j.tmp_path, strerror(errno));
		goto out;
	}
	j.out_fd = -1;
	if (rename(j.tmp_path, j.out_path) < 0) {
		err("%s: %s", j.out_path, strerror(errno));
		goto out;
	}
	free(j.tmp_path);
	j.tmp_path = NULL;	/* it is OUT now */
	status = 0;
out:
	if (j.out_fd >= 0)
		close(j.out_fd);
	if (j.tmp_path) {
		unlink(j.tmp_path);
		free(j.tmp_path);
	}
	if (j.in_fd > STDIN_FILENO)
		close(j.in_fd);
	free(j.imatrix);
	return status;
}
