/*
 * submit-models.c - qgraph-submit's GGUF commands: inspect (a file's
 * metadata and tensors, no daemon needed), load and unload (models held in
 * the daemon for every client).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "qgraph.h"
#include "submit.h"

/* Print the string S of LEN bytes quoted, control bytes escaped, at most MAX bytes of it. */
static void print_quoted(const char *s, uint64_t len, uint64_t max)
{
	putchar('"');
	for (uint64_t i = 0; i < len && i < max; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			printf("\\x%02x", ch);
		else
			putchar(ch);
	}
	putchar('"');
	if (len > max)
		printf("... (%llu bytes)", (unsigned long long)len);
}

/* Print one metadata value: scalars as they are, strings quoted, arrays as "[type x N]". */
static void print_kv(const struct qg_gguf_kv *kv)
{
	switch (kv->type) {
	case QG_GGUF_STRING:
		print_quoted(kv->str, kv->str_len, 120);
		break;
	case QG_GGUF_ARRAY:
		printf("[%s x %llu]", qg_gguf_vtype_name(kv->array_type), (unsigned long long)kv->array_n);
		break;
	case QG_GGUF_F32:
	case QG_GGUF_F64:
		printf("%.9g", kv->v.f);
		break;
	case QG_GGUF_BOOL:
		fputs(kv->v.u ? "true" : "false", stdout);
		break;
	case QG_GGUF_I8:
	case QG_GGUF_I16:
	case QG_GGUF_I32:
	case QG_GGUF_I64:
		printf("%lld", (long long)kv->v.i);
		break;
	default:
		printf("%llu", (unsigned long long)kv->v.u);
	}
}

int cmd_inspect(int argc, char **argv)
{
	if (argc != 2 || strcmp(argv[1], "--help") == 0) {
		fprintf(argc == 2 ? stdout : stderr,
			"Usage: qgraph-submit inspect FILE.gguf\n"
			"Print a GGUF file's architecture, metadata and tensors (name, type, shape,\n"
			"bytes), and the totals per type.  Needs no daemon.\n");
		return argc == 2 ? 0 : EXIT_USAGE;
	}
	const char *path = argv[1];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "qgraph-submit inspect: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return EXIT_WRONG;
	}
	size_t len = (size_t)st.st_size;
	void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (map == MAP_FAILED) {
		fprintf(stderr, "qgraph-submit inspect: %s: %s\n", path, strerror(errno));
		return EXIT_WRONG;
	}
	struct qg_gguf *g;
	char err[512];
	if (qg_gguf_open(map, len, &g, err, sizeof err)) {
		fprintf(stderr, "qgraph-submit inspect: %s: %s\n", path, err);
		if (map)
			munmap(map, len);
		return EXIT_WRONG;
	}
	const char *arch = qg_gguf_kv_string(g, "general.architecture");
	printf("file: %s\nformat: GGUF version %u, %zu bytes, alignment %u, data at offset %zu\n", path,
	       qg_gguf_version(g), len, qg_gguf_alignment(g), qg_gguf_data_offset(g));
	/* the file's own words: as they are when printable, else quoted and escaped */
	bool plain = arch != NULL;
	for (const char *c = arch; c && *c; c++)
		plain &= (unsigned char)*c >= 0x20 && (unsigned char)*c != 0x7f;
	fputs("architecture: ", stdout);
	if (plain)
		fputs(arch, stdout);
	else if (arch)
		print_quoted(arch, strlen(arch), 120);
	else
		fputs("(none)", stdout);
	putchar('\n');
	printf("metadata: %zu keys\n", qg_gguf_kv_count(g));
	for (size_t i = 0; i < qg_gguf_kv_count(g); i++) {
		const struct qg_gguf_kv *kv = qg_gguf_kv_at(g, i);
		printf("  %-40s %-6s ", kv->key, qg_gguf_vtype_name(kv->type));
		print_kv(kv);
		putchar('\n');
	}
	size_t nt = qg_gguf_tensor_count(g);
	uint64_t count[QG_GGML_TYPE_LIMIT] = { 0 }, bytes[QG_GGML_TYPE_LIMIT] = { 0 }, total = 0;
	printf("tensors: %zu\n", nt);
	printf("  %-40s %-8s %-24s %14s\n", "name", "type", "shape", "bytes");
	for (size_t i = 0; i < nt; i++) {
		const struct qg_gguf_tensor *t = qg_gguf_tensor_at(g, i);
		char shape[96];
		int n = 0;
		for (uint32_t d = 0; d < t->n_dims && n >= 0 && (size_t)n < sizeof shape; d++)
			n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%lld", d ? " x " : "", (long long)t->ne[d]);
		printf("  %-40s %-8s %-24s %14llu\n", t->name, qg_ggml_type_name(t->type), shape,
		       (unsigned long long)t->bytes);
		count[t->type]++;
		bytes[t->type] += t->bytes;
		total += t->bytes;
	}
	printf("totals:\n");
	for (uint32_t ty = 0; ty < QG_GGML_TYPE_LIMIT; ty++)
		if (count[ty])
			printf("  %-8s %6llu tensors %14llu bytes (%.1f MiB)\n", qg_ggml_type_name(ty),
			       (unsigned long long)count[ty], (unsigned long long)bytes[ty], bytes[ty] / 1048576.0);
	printf("  %-8s %6zu tensors %14llu bytes (%.1f MiB)\n", "all", nt, (unsigned long long)total,
	       total / 1048576.0);
	qg_gguf_free(g);
	if (map)
		munmap(map, len);
	return 0;
}

/* qgraph_progress_fn for load: tensors done / total and MiB/s on a terminal. */
static void load_progress(void *ctx, size_t done, size_t total, uint64_t bytes_done, uint64_t bytes_total)
{
	double t = now_s() - *(double *)ctx;

	if (quiet || !isatty(STDERR_FILENO))
		return;
	fprintf(stderr, "\rloading: %zu/%zu tensors, %.1f/%.1f MiB, %.1f MiB/s", done, total, bytes_done / 1048576.0,
		bytes_total / 1048576.0, t > 0 ? bytes_done / 1048576.0 / t : 0.0);
	if (done == total)
		fputc('\n', stderr);
}

int cmd_load(int argc, char **argv)
{
	const char *path = NULL, *name = NULL;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			printf("Usage: qgraph-submit load FILE.gguf [--name MODEL]\n"
			       "Load a GGUF model into the daemon, held there for every client until\n"
			       "'qgraph-submit unload MODEL'.  MODEL defaults to the file's name without\n"
			       ".gguf; its tensors are opened as \"MODEL/tensor.name\".\n");
			return 0;
		}
		if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
			name = argv[++i];
		else if (strncmp(argv[i], "--name=", 7) == 0)
			name = argv[i] + 7;
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else {
			fprintf(stderr, "Usage: qgraph-submit load FILE.gguf [--name MODEL]\n");
			return EXIT_USAGE;
		}
	}
	if (!path) {
		fprintf(stderr, "Usage: qgraph-submit load FILE.gguf [--name MODEL]\n");
		return EXIT_USAGE;
	}
	struct qgraph_session *s = connect_or_die("qgraph-submit load", 16u << 20);
	double t0 = now_s();
	int r = qgraph_model_load(s, path, name, load_progress, &t0);
	if (r) {
		fprintf(stderr, "\nqgraph-submit load: %s\n", qgraph_session_error(s));
		qgraph_session_close(s);
		return EXIT_WRONG;
	}
	if (!quiet)
		printf("loaded %s in %.2f s\n", path, now_s() - t0);
	qgraph_session_close(s);
	return 0;
}

int cmd_unload(int argc, char **argv)
{
	if (argc != 2 || strcmp(argv[1], "--help") == 0) {
		fprintf(argc == 2 ? stdout : stderr, "Usage: qgraph-submit unload MODEL\n"
						     "Let the daemon go of a model loaded with 'load' or preload.\n");
		return argc == 2 ? 0 : EXIT_USAGE;
	}
	struct qgraph_session *s = connect_or_die("qgraph-submit unload", 1 << 20);
	int r = qgraph_model_unload(s, argv[1]);
	if (r)
		fprintf(stderr, "qgraph-submit unload: %s\n", qgraph_session_error(s));
	qgraph_session_close(s);
	return r ? EXIT_WRONG : 0;
}
