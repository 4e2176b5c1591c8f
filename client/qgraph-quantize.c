/*
 * qgraph-quantize - quantize, dequantize and repack raw matrices in ggml's
 * formats, with libqgraph's public API alone.
 *
 *	qgraph-quantize --type TYPE --rows R --cols C [--imatrix FILE] IN.f32 OUT
 *	qgraph-quantize --dequantize --type TYPE --rows R --cols C IN OUT.f32
 *	qgraph-quantize --repack --from TYPE --type TYPE --rows R --cols C IN OUT
 *
 * The matrix streams through in groups of rows, so its size is bounded by
 * the disk, not by memory.  OUT appears only when complete: it is written
 * to a temporary file beside it and renamed.
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qgraph.h"

#define PROG "qgraph-quantize"

/* Rows per chunk: about this many input bytes, a multiple of every row group. */
#define CHUNK_BYTES (1u << 20)
#define ROW_ALIGN 8

enum mode { MODE_QUANTIZE, MODE_DEQUANTIZE, MODE_REPACK };

struct job {
	enum mode mode;
	enum qgraph_type from, to;	/* FROM is F32 when quantizing, TO is F32 when dequantizing */
	int64_t rows, cols;
	const char *in_path, *out_path, *imatrix_path;
	float *imatrix;
	int in_fd, out_fd;
	char *tmp_path;
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
		"  -c, --cols C         values per row (a multiple of 32 for block types)\n"
		"  -i, --imatrix FILE   importance weights: C little-endian f32, one per\n"
		"                       column, finite and >= 0 (used by q4_0 and its layouts)\n"
		"  -d, --dequantize     IN is TYPE, OUT is f32\n"
		"  -p, --repack         IN is --from TYPE, OUT is --type TYPE\n"
		"  -f, --from TYPE      the input type of --repack\n"
		"  -h, --help           print this and exit\n"
		"  -V, --version        print the version and exit\n"
		"\n"
		"Types:");
	for (int t = 0; t < QGRAPH_TYPE_COUNT; t++)
		fprintf(f, " %s", qgraph_type_name((enum qgraph_type)t));
	fprintf(f, "\n(q4_0_4x4, q4_0_4x8 and q8_0_4x* interleave 4 rows, q4_0_8x8 8 rows.)\n"
		"Exit status: 0 done, 1 bad input, 2 bad usage.  See qgraph-quantize(1).\n");
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

static int load_imatrix(struct job *j)
{
	const char *p = j->imatrix_path;
	size_t want = (size_t)j->cols * sizeof(float);
	int fd = open(p, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		err("%s: %s", p, strerror(errno));
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
	for (int64_t c = 0; c < j->cols; c++) {
		float v = j->imatrix[c];
		if (!isfinite(v) || v < 0.0f) {
			err("%s: weight %" PRId64 " is %g; weights must be finite and non-negative", p, c, v);
			return -1;
		}
	}
	return 0;
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
		/* a block's scale (q4_0: max / 8, q8_0: max / 127) rounds to f16 infinity from 65520 */
		float limit = j->to == QGRAPH_TYPE_Q8_0 || j->to == QGRAPH_TYPE_Q8_0_4X4 ||
			      j->to == QGRAPH_TYPE_Q8_0_4X8 ? 127.0f * 65520.0f : 8.0f * 65520.0f;
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
		ssize_t w;
		if (j->mode == MODE_QUANTIZE) {
			f32_from_le(in, (size_t)(n * j->cols));
			w = qgraph_quantize(j->to, in, out, out_cap, n, j->cols, j->imatrix);
			if (w < 0) {
				explain_quantize(j, in, r0, n, w);
				goto out;
			}
		} else if (j->mode == MODE_DEQUANTIZE) {
			w = qgraph_dequantize(j->from, in, out, out_cap, n, j->cols);
			if (w >= 0)
				f32_from_le(out, (size_t)(n * j->cols));	/* the same swap writes LE */
		} else {
			w = qgraph_repack(j->to, out, out_cap, j->from, in, n, j->cols);
		}
		if (w < 0) {
			err("%s: rows %" PRId64 "-%" PRId64 ": %s", j->in_path, r0, r0 + n - 1, strerror((int)-w));
			goto out;
		}
		if (write_full(j->out_fd, out, (size_t)w) < 0) {
			err("%s: %s", j->tmp_path, strerror(errno));
			goto out;
		}
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
		{ "dequantize", no_argument, NULL, 'd' },
		{ "repack", no_argument, NULL, 'p' },
		{ "from", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct job j = { .mode = MODE_QUANTIZE, .in_fd = -1, .out_fd = -1 };
	const char *type_arg = NULL, *from_arg = NULL;
	int dequantize = 0, repack = 0, opt, status = 1;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":t:r:c:i:dpf:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 't': type_arg = optarg; break;
		case 'r': j.rows = parse_count("--rows", optarg); break;
		case 'c': j.cols = parse_count("--cols", optarg); break;
		case 'i': j.imatrix_path = optarg; break;
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
		int fq8 = j.from == QGRAPH_TYPE_Q8_0 || j.from >= QGRAPH_TYPE_Q8_0_4X4;
		int tq8 = j.to == QGRAPH_TYPE_Q8_0 || j.to >= QGRAPH_TYPE_Q8_0_4X4;
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
