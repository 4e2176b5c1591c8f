/*
 * submit-mpi.c - qgraph-submit mlp --mpi and bench --mpi: feed-forward
 * blocks split across the ranks of mpirun, each rank with its node's
 * qgraphd (--socket may hold "%d", the rank), through libqgraph-mpi.
 *
 *   mlp --mpi    L layers of rms_norm, the Megatron FFN and the residual,
 *                checked on rank 0 against the same layers in its process
 *   bench --mpi  one FFN block (default 4096 -> 14336 -> 4096), timed
 *
 * Both print, per rank, the time it waited for its daemon's compute, the
 * time in collectives past what overlapped compute, and the whole.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qgraph-mpi.h"
#include "submit.h"

static int cmp_ns(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct mpi_run {
	long d, h, n, layers, reps, micro;
	int mlp;		/* mlp: norm, residual, check; else bench */
	int json;
};

static uint64_t now_ns(void)
{
	return (uint64_t)(now_s() * 1e9);
}

/* The median of V[0..N), in ms (sorts V). */
static double median_ms(uint64_t *v, long n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_ns);
	return (double)v[n / 2] * 1e-6;
}

/* The daemon's compute threads, from its stats (0 if it does not say). */
static long daemon_threads(struct qgraph_session *s)
{
	char buf[16384];
	ssize_t len = qgraph_stats(s, buf, sizeof buf - 1);

	if (len <= 0)
		return 0;
	buf[len] = 0;
	for (char *l = buf; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, "threads ", 8) == 0)
			return atol(l + 8);
	return 0;
}

/*
 * Rank 0 prints every rank's times: MED[0..3] this rank's medians over the
 * passes of compute, collective, whole and the daemon's own compute, in ms.
 */
static void report(struct qgraph_mpi *m, const struct mpi_run *o, const double med[4], long threads, double alone_ms)
{
	int rank = qgraph_mpi_rank(m), size = qgraph_mpi_size(m);
	double *all = rank == 0 ? calloc((size_t)size * 4, sizeof *all) : NULL;

	MPI_Gather(med, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	if (rank != 0)
		return;
	double med_ms = all[2];	/* rank 0's whole pass: every rank ends a pass in the same allreduce */
	double flops = 2.0 * 3 * (double)o->d * (double)o->h * (double)o->n * (double)o->layers;
	double coll = 0, total = 0;
	for (int r = 0; r < size; r++) {
		coll += all[r * 4 + 1] / size;
		total += all[r * 4 + 2] / size;
	}
	if (o->json) {
		for (int r = 0; r < size; r++)
			printf("{\"bench\":\"mpi_ffn_rank\",\"ranks\":%d,\"rank\":%d,\"threads\":%ld,\"dim\":%ld,\"hidden\":%ld,"
			       "\"n\":%ld,\"micro\":%ld,\"compute_ms\":%.3f,\"collective_ms\":%.3f,\"daemon_ms\":%.3f,"
			       "\"value\":%.3f,\"unit\":\"ms\"}\n",
			       size, r, threads, o->d, o->h, o->n, o->micro, all[r * 4], all[r * 4 + 1], all[r * 4 + 3],
			       all[r * 4 + 2]);
		printf("{\"bench\":\"mpi_ffn\",\"ranks\":%d,\"threads\":%ld,\"dim\":%ld,\"hidden\":%ld,\"n\":%ld,"
		       "\"micro\":%ld,\"layers\":%ld,\"collective_share\":%.4f,\"collective_ms\":%.3f,\"gflops\":%.2f,"
		       "\"value\":%.3f,\"unit\":\"ms\",\"limit_name\":\"allreduce_alone_ms\",\"limit_value\":%.4f,"
		       "\"ratio\":%.3f}\n",
		       size, threads, o->d, o->h, o->n, o->micro, o->layers, total > 0 ? coll / total : 0, coll,
		       flops / med_ms * 1e-6, med_ms, alone_ms, alone_ms > 0 ? coll / alone_ms : 0);
	} else {
		printf("%s --mpi dim=%ld hidden=%ld tokens=%ld layers=%ld micro=%ld: %d ranks, threads %ld each: "
		       "median %.3f ms per pass (%.1f GFLOP/s); collectives %.1f%% of the time (an allreduce of "
		       "the block's output alone: %.3f ms)\n",
		       o->mlp ? "mlp" : "bench", o->d, o->h, o->n, o->layers, o->micro, size, threads, med_ms,
		       flops / med_ms * 1e-6, total > 0 ? 100 * coll / total : 0, alone_ms);
		for (int r = 0; r < size; r++)
			printf("  rank %d: compute %.3f ms (daemon %.3f), collective %.3f ms, whole %.3f ms (medians per pass)\n", r,
			       all[r * 4], all[r * 4 + 3], all[r * 4 + 1], all[r * 4 + 2]);
	}
	free(all);
}

/* Scatter one random weight matrix from rank 0 (seeded as qgraph-submit mlp seeds it); NULL on failure. */
static struct qgraph_mpi_weights *scatter(struct qgraph_mpi *m, enum qgraph_mpi_split split, long rows, long cols,
					  unsigned long long seed, void **ref)
{
	float *w = NULL;
	struct qgraph_mpi_weights *sw;

	if (qgraph_mpi_rank(m) == 0) {
		w = malloc((size_t)rows * (size_t)cols * 4);
		if (!w) {
			fprintf(stderr, "qgraph-submit: no memory for a %ld x %ld matrix\n", rows, cols);
			MPI_Abort(MPI_COMM_WORLD, EXIT_WRONG);
		}
		fill_random(w, (size_t)rows * (size_t)cols, seed, 0.05f);
	}
	int r = qgraph_mpi_weights_scatter(m, 0, split, 32, QGRAPH_TYPE_F32, QGRAPH_TYPE_Q4_0, rows, cols, w, &sw);
	if (r)
		fprintf(stderr, "qgraph-submit: rank %d: %s\n", qgraph_mpi_rank(m), qgraph_mpi_error(m));
	if (!r && w && ref) {	/* the in-process reference's copy, in plain Q4_0 */
		ssize_t qb = qgraph_matrix_size(QGRAPH_TYPE_Q4_0, rows, cols);
		*ref = malloc((size_t)qb);
		qgraph_quantize(QGRAPH_TYPE_Q4_0, w, *ref, (size_t)qb, rows, cols, NULL);
	}
	free(w);
	return r ? NULL : sw;
}

static int mpi_ffn(struct qgraph_mpi *m, const struct mpi_run *o)
{
	struct qgraph_session *s = qgraph_mpi_session(m);
	unsigned char *arena = qgraph_arena(s, NULL);
	int rank = qgraph_mpi_rank(m), status = 0;
	long L = o->layers;
	struct qgraph_mpi_weights **w = calloc((size_t)L * 3, sizeof *w);
	struct qgraph_mpi_op **ops = calloc((size_t)L, sizeof *ops);
	void *(*ref)[3] = calloc((size_t)L, sizeof *ref);
	uint64_t *pass = calloc((size_t)o->reps * 4, sizeof *pass);	/* per pass: compute, collective, whole, daemon */
	size_t xbytes = (size_t)o->n * (size_t)o->d * 4;
	int64_t buf[2] = { qgraph_arena_alloc(s, xbytes), qgraph_arena_alloc(s, xbytes) };
	float *x0 = malloc(xbytes);

	if (!w || !ops || !ref || !pass || !x0 || buf[0] < 0 || buf[1] < 0) {
		fprintf(stderr, "qgraph-submit: rank %d: no memory (or arena) for %ld tokens\n", rank, o->n);
		MPI_Abort(MPI_COMM_WORLD, EXIT_WRONG);
	}
	fill_random(x0, (size_t)o->n * (size_t)o->d, 7, 1.0f);
	for (long l = 0; l < L; l++) {
		/* mlp's seeds: up (W1) 100 + 3l, gate (W3) + 1, down (W2) + 2 */
		unsigned long long seed = (unsigned long long)(100 + 3 * l);
		void **rq = o->mlp ? ref[l] : NULL;
		if (!(w[l * 3] = scatter(m, QGRAPH_MPI_SPLIT_ROWS, o->h, o->d, seed + 1, rq ? &rq[1] : NULL)) ||
		    !(w[l * 3 + 1] = scatter(m, QGRAPH_MPI_SPLIT_ROWS, o->h, o->d, seed, rq ? &rq[0] : NULL)) ||
		    !(w[l * 3 + 2] = scatter(m, QGRAPH_MPI_SPLIT_COLS, o->d, o->h, seed + 2, rq ? &rq[2] : NULL))) {
			status = EXIT_WRONG;
			goto out;
		}
		struct qgraph_mpi_ffn_opts fo = { .n = o->n, .x_off = buf[l % 2], .y_off = buf[(l + 1) % 2],
						  .micro = o->micro, .norm_eps = 1e-5f,
						  .flags = o->mlp ? QGRAPH_MPI_FFN_NORM | QGRAPH_MPI_FFN_RESIDUAL : 0 };
		if (qgraph_mpi_ffn_new(m, w[l * 3], w[l * 3 + 1], w[l * 3 + 2], &fo, &ops[l])) {
			fprintf(stderr, "qgraph-submit: rank %d: %s\n", rank, qgraph_mpi_error(m));
			status = EXIT_WRONG;
			goto out;
		}
	}
	/* one pass to check (and warm up), then the timed ones */
	memcpy(arena + buf[0], x0, xbytes);
	for (long l = 0; l < L; l++)
		qgraph_mpi_op_run(ops[l], NULL);
	double err = 0;
	if (o->mlp && rank == 0) {
		enum qgraph_type t[3] = { QGRAPH_TYPE_Q4_0, QGRAPH_TYPE_Q4_0, QGRAPH_TYPE_Q4_0 };
		float *x = malloc(xbytes);
		memcpy(x, x0, xbytes);
		for (long l = 0; l < L; l++)
			mlp_ref_layer(x, o->d, o->h, o->n, ref[l], t);
		err = rel_err((const float *)(arena + buf[L % 2]), x, (size_t)o->n * (size_t)o->d);
		free(x);
	}
	for (long i = 0; i < o->reps; i++) {
		struct qgraph_mpi_times t = { 0 };
		MPI_Barrier(MPI_COMM_WORLD);	/* each pass starts together: its time is the pass's, not a wait for a peer */
		for (long l = 0; l < L; l++)
			qgraph_mpi_op_run(ops[l], &t);
		pass[i] = t.compute_ns;
		pass[o->reps + i] = t.collective_ns;
		pass[2 * o->reps + i] = t.total_ns;
		pass[3 * o->reps + i] = t.daemon_ns;
	}
	double med[4];
	for (int k = 0; k < 4; k++)
		med[k] = median_ms(pass + k * o->reps, o->reps);
	/* the limit of the collective time: the same allreduce with no compute around it */
	float *y = (float *)(arena + buf[L % 2]);
	for (long i = 0; i < o->reps; i++) {
		MPI_Barrier(MPI_COMM_WORLD);
		uint64_t a = now_ns();
		MPI_Allreduce(MPI_IN_PLACE, y, (int)(o->n * o->d), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		pass[i] = now_ns() - a;
	}
	report(m, o, med, daemon_threads(s), median_ms(pass, o->reps));
	if (o->mlp && rank == 0) {
		printf("max error vs in-process %.2e: %s\n", err, err < 1e-3 ? "ok" : "WRONG");
		if (!(err < 1e-3))
			status = EXIT_WRONG;
	}
out:
	for (long l = 0; l < L; l++) {
		qgraph_mpi_op_free(ops[l]);
		for (int i = 0; i < 3; i++) {
			qgraph_mpi_weights_free(m, w[l * 3 + i]);
			free(ref[l][i]);
		}
	}
	free(w);
	free(ops);
	free(ref);
	free(pass);
	free(x0);
	return status;
}

int cmd_mpi(const char *command, int argc, char **argv)
{
	int mlp = strcmp(command, "mlp") == 0;
	struct mpi_run o = { .d = mlp ? 1024 : 4096, .h = mlp ? 2816 : 14336, .n = mlp ? 8 : 1, .layers = mlp ? 2 : 1,
			     .reps = mlp ? 3 : 10, .mlp = mlp };
	static const struct option opts[] = {
		{ "mpi", no_argument, NULL, 'M' }, { "dim", required_argument, NULL, 'd' },
		{ "hidden", required_argument, NULL, 'H' }, { "tokens", required_argument, NULL, 'n' },
		{ "layers", required_argument, NULL, 'l' }, { "repeat", required_argument, NULL, 'r' },
		{ "micro", required_argument, NULL, 'u' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "d:H:n:l:r:u:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'M': break;
		case 'd': o.d = atol(optarg); break;
		case 'H': o.h = atol(optarg); break;
		case 'n': o.n = atol(optarg); break;
		case 'l': o.layers = atol(optarg); break;
		case 'r': o.reps = atol(optarg); break;
		case 'u': o.micro = atol(optarg); break;
		case 'j': o.json = 1; break;
		case 'h':
			printf("Usage: mpirun -np P qgraph-submit [--socket PATTERN] %s --mpi [--dim D] [--hidden H]\n"
			       "           [--tokens N] [--layers L] [--micro M] [--repeat R] [--json]\n"
			       "Split feed-forward blocks across the P ranks, each with its node's qgraphd (a\n"
			       "--socket PATTERN's \"%%d\" is the rank): gate and up by rows, down by columns, one\n"
			       "allreduce per block, in micro-batches of M tokens whose allreduce overlaps the\n"
			       "next one's compute (0: one batch).  Prints the median pass and, per rank, the\n"
			       "time computing, in collectives and the whole.  %s\n",
			       command,
			       mlp ? "mlp: L layers of rms_norm, FFN and residual, checked against this process.\n"
				     "Defaults: 1024 2816 8 tokens 2 layers, 3 repeats."
				   : "bench: one FFN block.\nDefaults: 4096 14336 1 token, 10 repeats.");
			return 0;
		default: return EXIT_USAGE;
		}
	}
	if (optind != argc || o.d < 32 || o.d % 32 || o.h < 32 || o.h % 32 || o.n < 1 || o.layers < 1 || o.layers > 64 ||
	    o.reps < 1 || o.micro < 0) {
		fprintf(stderr, "qgraph-submit %s --mpi: --dim and --hidden are multiples of 32; 1 to 64 layers\n", command);
		return EXIT_USAGE;
	}
	MPI_Init(NULL, NULL);
	struct qgraph_mpi_opts mo = { .socket = socket_path, .arena_bytes = (uint64_t)o.n * (uint64_t)o.d * 8 + (16u << 20) };
	struct qgraph_mpi *m;
	char err[512];
	int r = qgraph_mpi_connect(&mo, &m, err, sizeof err), status;
	if (r) {
		fprintf(stderr, "qgraph-submit: %s\n", err);
		status = r == -ENOENT || r == -ECONNREFUSED || r == -ECONNABORTED ? EXIT_NODAEMON : EXIT_WRONG;
	} else {
		status = mpi_ffn(m, &o);
		qgraph_mpi_close(m);
	}
	MPI_Finalize();
	return status;
}
