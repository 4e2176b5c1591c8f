/*
 * bench-alloc.c - the graph allocator on synthetic transformer graphs:
 * planning time per node, and the peak compute buffer against the lower
 * bound, for the greedy placement, the by-size one and the best of both.
 *
 *   bench-alloc [--json] [--quick]
 *
 * Graphs: layers of a feed-forward block (rms_norm, gate and up 4096 ->
 * 14336, silu, mul, down, residual add) or of attention scores (q, k, v
 * projections, heads of 128 split by reshape and permute, k^T q scaled and
 * soft-maxed under a mask, times v, merged back, output projection,
 * residual add), Q4_0 weights that have data of their own, stacked until
 * the graph has about 100, 1,000 or 10,000 nodes, at batch 1, 32 and 512.
 *
 * Planning time is the median over repetitions of qg_galloc_reserve() on a
 * graph already reserved once (so no buffer is allocated in the loop),
 * divided by the nodes; its limit is the 1 microsecond per node target.
 * The peak is the compute buffer the plan needs; its limit is the lower
 * bound: the largest sum of the bytes of tensors alive at one step of the
 * execution order (after in-place reuse), which no placement can beat.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "galloc.h"
#include "ops.h"

#define DIM 4096
#define FFN 14336
#define HEAD 128

static unsigned char weight_bytes;	/* weights need data, never read while planning */

static struct qg_tensor *weight(struct qg_ctx *ctx, int64_t k, int64_t m)
{
	struct qg_tensor *w = qg_tensor_new_2d(ctx, QG_TYPE_Q4_0, k, m);

	if (w) {
		w->data = &weight_bytes;
		w->flags = QG_TENSOR_WEIGHTS;
	}
	return w;
}

static struct qg_tensor *ffn_layer(struct qg_ctx *c, struct qg_tensor *x)
{
	struct qg_tensor *h = qg_op_rms_norm(c, x, 1e-5f);
	struct qg_tensor *g = qg_op_silu(c, qg_op_mul_mat(c, weight(c, DIM, FFN), h));
	struct qg_tensor *u = qg_op_mul_mat(c, weight(c, DIM, FFN), h);

	return qg_op_add(c, x, qg_op_mul_mat(c, weight(c, FFN, DIM), qg_op_mul(c, g, u)));
}

static struct qg_tensor *attn_layer(struct qg_ctx *c, struct qg_tensor *x, struct qg_tensor *mask, int64_t b)
{
	const int64_t nh = DIM / HEAD;
	struct qg_tensor *h = qg_op_rms_norm(c, x, 1e-5f);
	struct qg_tensor *q = qg_op_mul_mat(c, weight(c, DIM, DIM), h);
	struct qg_tensor *k = qg_op_mul_mat(c, weight(c, DIM, DIM), h);
	struct qg_tensor *v = qg_op_mul_mat(c, weight(c, DIM, DIM), h);
	const int64_t heads[3] = { HEAD, nh, b };

	q = qg_tensor_permute(c, qg_tensor_reshape(c, q, 3, heads), 0, 2, 1, 3);	/* [HEAD, b, nh] */
	k = qg_op_cast(c, qg_tensor_permute(c, qg_tensor_reshape(c, k, 3, heads), 0, 2, 1, 3), QG_TYPE_F32);
	v = qg_op_cast(c, qg_tensor_permute(c, qg_tensor_reshape(c, v, 3, heads), 1, 2, 0, 3), QG_TYPE_F32);
	struct qg_tensor *kq = qg_op_soft_max(c, qg_op_mul_mat(c, k, q), mask, 0.088f);	/* [b, b, nh] */
	struct qg_tensor *kqv = qg_op_mul_mat(c, v, kq);					/* [HEAD, b, nh] */
	struct qg_tensor *merged = qg_op_cast(c, qg_tensor_permute(c, kqv, 0, 2, 1, 3), QG_TYPE_F32);
	merged = qg_tensor_reshape(c, merged, 2, (const int64_t[]){ DIM, b });
	return qg_op_add(c, x, qg_op_mul_mat(c, weight(c, DIM, DIM), merged));
}

struct bgraph {
	struct qg_ctx *ctx;
	struct qg_graph *g;
};

/* LAYERS layers of KIND (0 feed-forward, 1 attention) at batch B into *BG: 0 or -1. */
static int build(struct bgraph *bg, int kind, int layers, int64_t b)
{
	size_t cap = 64 * (size_t)layers + 64;

	bg->ctx = qg_ctx_new(cap);
	bg->g = qg_graph_new(cap);
	if (!bg->ctx || !bg->g)
		return -1;
	struct qg_tensor *x = qg_tensor_new_2d(bg->ctx, QG_TYPE_F32, DIM, b);
	struct qg_tensor *mask = qg_tensor_new_2d(bg->ctx, QG_TYPE_F32, b, b);
	if (!x || !mask)
		return -1;
	x->flags = mask->flags = QG_TENSOR_INPUT;
	for (int l = 0; l < layers; l++)
		x = kind ? attn_layer(bg->ctx, x, mask, b) : ffn_layer(bg->ctx, x);
	x = qg_op_rms_norm(bg->ctx, x, 1e-5f);
	if (!x || qg_ctx_error(bg->ctx))
		return -1;
	x->flags |= QG_TENSOR_OUTPUT;
	return qg_graph_build(bg->g, x) < 0 ? -1 : 0;
}

static void bg_free(struct bgraph *bg)
{
	qg_graph_free(bg->g);
	qg_ctx_free(bg->ctx);
}

static void print_row(const char *kind, int64_t b, size_t nodes, const char *place, double ns, double peak,
		      double lower)
{
	printf("%-5s %5lld %6zu  %-8s %9.1f %6.1f%%  %10.2f %10.2f %7.4f\n", kind, (long long)b, nodes, place, ns,
	       100.0 * ns / 1000.0, peak / 1048576.0, lower / 1048576.0, lower > 0 ? peak / lower : 1.0);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const kinds[] = { "ffn", "attn" };
	static const char *const places[] = { "best", "greedy", "by-size" };
	static const int64_t batches[] = { 1, 32, 512 };
	static const size_t targets[] = { 100, 1000, 10000 };
	int json = 0, quick = 0, c, status = 0;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 'q': quick = 1; break;
		default:
			fprintf(c == 'h' ? stdout : stderr, "usage: bench-alloc [--json] [--quick]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!json) {
		printf("graph allocator: planning time per node (limit: 1 us/node) and peak compute buffer\n"
		       "against the lower bound (largest sum of live bytes at one step)\n\n");
		printf("%-5s %5s %6s  %-8s %9s %7s  %10s %10s %7s\n", "graph", "batch", "nodes", "place", "ns/node",
		       "of 1us", "peak MiB", "bound MiB", "ratio");
	}
	for (int kind = 0; kind < 2; kind++)
		for (size_t bi = 0; bi < 3; bi++)
			for (size_t ti = 0; ti < (quick ? 2 : 3); ti++) {
				int64_t b = batches[bi];
				struct bgraph one = { 0 }, bg = { 0 };
				/* nodes per layer, from a graph of one layer */
				if (build(&one, kind, 1, b) < 0) {
					fprintf(stderr, "bench-alloc: cannot build a %s layer\n", kinds[kind]);
					return 1;
				}
				size_t per = one.g->n_nodes - 1;
				bg_free(&one);
				int layers = (int)(targets[ti] / per) > 0 ? (int)(targets[ti] / per) : 1;
				if (build(&bg, kind, layers, b) < 0) {
					fprintf(stderr, "bench-alloc: cannot build %d %s layers\n", layers, kinds[kind]);
					return 1;
				}
				for (int p = 0; p < 3; p++) {
					struct qg_galloc_options opt = { .placement = (enum qg_galloc_placement)p };
					struct qg_buft *host = qg_buft_host();
					struct qg_galloc *ga;
					struct qg_galloc_stats st;
					double t[64];
					int reps = quick ? 5 : targets[ti] >= 10000 ? 15 : 41;
					if (qg_galloc_new(&host, 1, &opt, &ga) < 0 || qg_galloc_reserve(ga, bg.g, NULL, NULL) < 0) {
						fprintf(stderr, "bench-alloc: reserve failed\n");
						status = 1;
						qg_galloc_free(ga);
						continue;
					}
					for (int r = 0; r < reps; r++) {
						double t0 = bench_now();
						int rr = qg_galloc_reserve(ga, bg.g, NULL, NULL);
						t[r] = bench_now() - t0;
						if (rr < 0)
							status = 1;
					}
					if (qg_galloc_alloc_graph(ga, bg.g) < 0)
						status = 1;
					qg_galloc_stats(ga, 0, &st);
					double ns = bench_median(t, reps) * 1e9 / (double)bg.g->n_nodes;
					if (json) {
						struct bench_result res = {
							.bench = "alloc-plan", .m = (long long)bg.g->n_nodes, .n = b,
							.threads = 1, .layout = kinds[kind], .kernel = places[p], .value = ns,
							.unit = "ns/node", .limit_name = "target 1000 ns/node",
							.limit_value = 1000.0, .ratio = ns / 1000.0,
						};
						bench_json(stdout, &res);
						res.bench = "alloc-peak";
						res.value = (double)st.planned;
						res.unit = "bytes";
						res.limit_name = "live lower bound";
						res.limit_value = (double)st.live_peak;
						res.ratio = st.live_peak ? (double)st.planned / (double)st.live_peak : 1.0;
						bench_json(stdout, &res);
					} else {
						print_row(kinds[kind], b, bg.g->n_nodes, places[p], ns, (double)st.planned,
							  (double)st.live_peak);
					}
					qg_galloc_unplace(ga, bg.g);
					qg_galloc_free(ga);
				}
				bg_free(&bg);
			}
	return status;
}
