/*
 * smoke.h - the smallest real graph, for tests whose subject is the way a
 * client reaches the daemon (socket activation, privileges, the unit):
 * Y = SCALE(X, K) on N floats in the session's arena, run and checked.
 */
#ifndef QG_TESTS_SMOKE_H
#define QG_TESTS_SMOKE_H

#include <errno.h>
#include <stdio.h>

#include "qgraph.h"

/*
 * Run Y = K * X on S for N floats X[i] = X0 + i, blocking, and check every
 * value (exact: one multiply by a power of two or a small integer).  0
 * when right; -1 with what went wrong in MSG (LEN bytes).
 */
__attribute__((unused))
static int smoke_scale(struct qgraph_session *s, int n, float k, float x0, char *msg, size_t len)
{
	unsigned char *arena = qgraph_arena(s, NULL);
	int64_t xo = qgraph_arena_alloc(s, (size_t)n * 4), yo = qgraph_arena_alloc(s, (size_t)n * 4);
	int64_t ne[1] = { n };

	if (xo < 0 || yo < 0) {
		snprintf(msg, len, "no arena for %d floats", n);
		return -1;
	}
	float *x = (float *)(arena + xo), *y = (float *)(arena + yo);
	for (int i = 0; i < n; i++)
		x[i] = x0 + (float)i;
	struct qgraph_graph *g = qgraph_graph_new();
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_SCALE, qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, xo),
					       -1, k), yo);
	uint64_t id;
	struct qgraph_result res = { 0 };
	int r = qgraph_submit(s, g, QGRAPH_SUBMIT_BLOCK, &id);
	if (!r)
		r = qgraph_wait(s, id, 10000, &res);
	qgraph_graph_free(g);
	int good = !r && res.status == 0;
	for (int i = 0; i < n && good; i++)
		good = y[i] == k * x[i];
	if (!good)
		snprintf(msg, len, "the graph failed: %d/%d %s", r, res.status, qgraph_session_error(s));
	qgraph_arena_free(s, xo);
	qgraph_arena_free(s, yo);
	return good ? 0 : -1;
}

/*
 * Double 16 floats through S: X at arena offset 0, Y at 4096, fixed (no
 * allocation: it runs whatever the session's allocator holds).  0 if it
 * ran and was right; else the error or status, or -EIO for a wrong value.
 */
__attribute__((unused))
static int smoke_double(struct qgraph_session *s)
{
	float *a = qgraph_arena(s, NULL);
	int64_t ne[1] = { 16 };
	struct qgraph_graph *g = qgraph_graph_new();
	struct qgraph_result res = QGRAPH_RESULT_INIT;
	uint64_t id;

	for (int i = 0; i < 16; i++)
		a[i] = (float)i;
	qgraph_graph_output(g, qgraph_graph_op(g, QGRAPH_OP_ADD, qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, 0),
					       qgraph_graph_input(g, QGRAPH_TYPE_F32, 1, ne, 0), 0), 4096);
	int r = qgraph_submit(s, g, QGRAPH_SUBMIT_BLOCK, &id);
	if (!r)
		r = qgraph_wait(s, id, 10000, &res);
	if (!r)
		r = res.status;
	qgraph_graph_free(g);
	return r ? r : a[1024 + 15] == 30.0f ? 0 : -EIO;
}

#endif /* QG_TESTS_SMOKE_H */
