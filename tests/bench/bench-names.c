/*
 * bench-names.c - what a large model costs every other session: a model of
 * N distinct small tensors (20,000 by default; --tensors 100000 for the
 * size issue 23 measured) is loaded into a qgraphd of
 * this build, and another session then times opening a tensor by name, an
 * open of its own named upload, and a small upload of new bytes (the
 * dedup's look for a copy): the median wall time of many, and the daemon's
 * CPU time per request over them all (what a shared machine's neighbours
 * disturb least).
 *
 *   bench-names [--json] [--quick] [--tensors N] [--model FILE]
 *
 * --model FILE: load FILE, a model this program wrote (N tensors "tNNNNNN"
 * of one F32 row of 32), instead of writing a new one: writing one of
 * 100,000 tensors takes the GGUF writer minutes.
 * Run from the build directory (make bench does).
 */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "daemon-util.h"
#include "gguf.h"
#include "qgraph.h"
#include "upload-opts.h"

enum { COLS = 32 };

static int json;

/* The CPU time PID has used, user and system, in seconds (from /proc; 0 if unreadable). */
static double cpu_seconds(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long ut = 0, st = 0;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');	/* the command may hold spaces; the fields after it do not */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void report(const char *what, double value, const char *unit, long long tensors)
{
	struct bench_result r = { .bench = "names", .m = tensors, .n = 1, .k = COLS, .threads = 1, .value = value,
				  .unit = unit };

	if (json) {
		bench_json(stdout, &r);
		return;
	}
	printf("%-44s %8lld %10.4g %s\n", what, tensors, value, unit);
}

/* A GGUF model of N distinct F32 tensors "tNNNNNN" of one row of COLS at PATH.  0 or -1. */
static int write_model(const char *path, long n)
{
	struct qg_gguf_writer *wr = qg_gguf_writer_new(0);
	float *v = bench_alloc((size_t)n * COLS * sizeof *v);
	uint64_t rng = 0x6e616d6573ULL;
	void *buf = NULL;
	size_t len;
	char name[16];
	int r = qg_gguf_writer_kv_string(wr, "general.architecture", "llama");

	for (long i = 0; i < n && !r; i++) {
		for (int j = 0; j < COLS; j++)
			v[i * COLS + j] = (float)(bench_rng(&rng) >> 40) / (float)(1 << 24);
		v[i * COLS] = (float)i;	/* distinct whatever the generator does */
		snprintf(name, sizeof name, "t%06ld", i);
		r = qg_gguf_writer_tensor(wr, name, QG_GGML_F32, 2, (int64_t[]){ COLS, 1 }, v + i * COLS);
	}
	if (!r)
		r = qg_gguf_writer_finish(wr, &buf, &len);
	qg_gguf_writer_free(wr);
	FILE *f = r ? NULL : fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len)
		r = -1;
	if (f && fclose(f))
		r = -1;
	free(buf);
	free(v);
	return r ? -1 : 0;
}

static struct qgraph_session *connect_one(const struct test_daemon *d, const char *name)
{
	struct qgraph_connect_opts o = { .socket = d->sock, .name = name, .arena_bytes = 1 << 20 };
	struct qgraph_session *s = NULL;
	char err[256];

	if (qgraph_connect(&o, &s, err, sizeof err))
		fprintf(stderr, "bench-names: connect: %s\n", err);
	return s;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
					      { "quick", no_argument, NULL, 'q' },
					      { "tensors", required_argument, NULL, 't' },
					      { "model", required_argument, NULL, 'm' },
					      { NULL, 0, NULL, 0 } };
	long tensors = 20000;
	const char *model = NULL;
	int reps = 2000, c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'q':
			tensors = 5000;
			reps = 300;
			break;
		case 't':
			tensors = strtol(optarg, NULL, 10);
			break;
		case 'm':
			model = optarg;
			break;
		default:
			fprintf(stderr, "usage: bench-names [--json] [--quick] [--tensors N] [--model FILE]\n");
			return 2;
		}
	}
	if (tensors < 1 || tensors > 1000000) {
		fprintf(stderr, "bench-names: --tensors takes 1 to 1000000\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!getenv("QG_TOP_BUILDDIR"))
		setenv("QG_TOP_BUILDDIR", ".", 1);

	char dir[] = "/tmp/qg-bench-names-XXXXXX", path[512], dopts[128];
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof path, "%s/big.gguf", dir);
	if (model && ((size_t)snprintf(path, sizeof path, "%s", model) >= sizeof path || access(path, R_OK))) {
		fprintf(stderr, "bench-names: %s: not found\n", model);
		return 1;
	}
	if (!model && write_model(path, tensors)) {
		fprintf(stderr, "bench-names: cannot write %s\n", path);
		return 1;
	}
	/* every tensor takes a piece of the pool: room for them all and the uploads */
	snprintf(dopts, sizeof dopts, "--threads 1 --poll-us 0 --pool-size %ldM", tensors * 4096 / (1 << 20) + 256);
	struct test_daemon d = { 0 };
	if (daemon_start(&d, dopts)) {
		fprintf(stderr, "bench-names: cannot start qgraphd; run from the build directory\n");
		return 1;
	}
	struct qgraph_session *loader = connect_one(&d, "bench-loader"), *s = connect_one(&d, "bench-names");
	double *t = calloc((size_t)reps, sizeof *t);
	int rc = 1;
	double t0 = bench_now();
	if (!t || !loader || !s || qgraph_model_load(loader, path, "big", NULL, NULL)) {
		fprintf(stderr, "bench-names: the model did not load: %s\n",
			loader ? qgraph_session_error(loader) : "no session");
		goto out;
	}
	if (!json)
		printf("%-44s %8s %10s %s\n", "what", "tensors", "value", "unit");
	report("load the model", (bench_now() - t0) * 1e3, "ms", tensors);

	uint64_t rng = 7, h;
	char name[32];
	float w[COLS];
	double c0 = cpu_seconds(d.pid);
	for (int i = 0; i < reps; i++) {
		snprintf(name, sizeof name, "big/t%06ld", (long)(bench_rng(&rng) % (uint64_t)tensors));
		double a = bench_now();
		int r = qgraph_weights_open(s, name, &h, NULL, NULL, NULL);
		t[i] = bench_now() - a;
		if (r || qgraph_weights_free(s, h)) {
			fprintf(stderr, "bench-names: open %s: %s\n", name, qgraph_session_error(s));
			goto out;
		}
	}
	report("open a model's tensor by name (median)", bench_median(t, reps) * 1e6, "us", tensors);
	report("  daemon CPU per open and free", (cpu_seconds(d.pid) - c0) / reps * 1e6, "us", tensors);

	for (int j = 0; j < COLS; j++)
		w[j] = -1.0f - (float)j;
	if (qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32, .rows = 1,
			.cols = COLS, .data = w, .name = "mine"), &h, NULL)) {
		fprintf(stderr, "bench-names: upload: %s\n", qgraph_session_error(s));
		goto out;
	}
	c0 = cpu_seconds(d.pid);
	for (int i = 0; i < reps; i++) {
		uint64_t o;
		double a = bench_now();
		int r = qgraph_weights_open(s, "mine", &o, NULL, NULL, NULL);
		t[i] = bench_now() - a;
		if (r || qgraph_weights_free(s, o))
			goto out;
	}
	report("open its own upload by name (median)", bench_median(t, reps) * 1e6, "us", tensors);
	report("  daemon CPU per open and free", (cpu_seconds(d.pid) - c0) / reps * 1e6, "us", tensors);
	c0 = cpu_seconds(d.pid);

	for (int i = 0; i < reps; i++) {
		w[0] = -1000.0f - (float)i;	/* new bytes each time: a full look for a copy */
		double a = bench_now();
		int r = qgraph_weights_upload(s, UPLOAD_OPTS(.src_type = QGRAPH_TYPE_F32, .target = QGRAPH_TYPE_F32,
				.rows = 1, .cols = COLS, .data = w), &h, NULL);
		t[i] = bench_now() - a;
		if (r || qgraph_weights_free(s, h))
			goto out;
	}
	report("upload 128 new bytes (median)", bench_median(t, reps) * 1e6, "us", tensors);
	report("  daemon CPU per upload and free", (cpu_seconds(d.pid) - c0) / reps * 1e6, "us", tensors);
	rc = 0;
out:
	free(t);
	qgraph_session_close(s);
	if (loader && qgraph_model_unload(loader, "big"))
		rc = 1;
	qgraph_session_close(loader);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
	if (!model)
		unlink(path);
	rmdir(dir);
	return rc;
}
