/*
 * graph-file.h - graphs saved to files (the SavedGraph message of
 * proto/qgraph.proto), for qgraph-submit: gemm and mlp --save FILE write
 * one, run FILE reads it, submits it through the daemon and checks the
 * outputs against the same graph computed in this process.
 */
#ifndef QG_GRAPH_FILE_H
#define QG_GRAPH_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "qgraph.h"

/* One weight matrix a saved graph uses: the handle the graph names, and its bytes. */
struct gf_weights {
	uint64_t handle;
	enum qgraph_type type;
	int64_t rows, cols;
	const void *data;
};

/*
 * Save G to PATH (written to a temporary file, then renamed): its weights
 * W[0..NW) (every handle G names must be among them), the first
 * ARENA_BYTES of ARENA (which must hold every span G names), and a
 * description.  0, or -errno with the reason in ERR.
 */
int gf_save(const char *path, const struct qgraph_graph *g, const struct gf_weights *w, size_t nw,
	    const void *arena, size_t arena_bytes, const char *description, char *err, size_t errlen);

struct gf_run_opts {
	long repeat;		/* timed runs after the first (>= 1) */
	int check;		/* compare with the graph computed in this process */
	int print;		/* values of each output to print */
	int quiet;
	int json;		/* the result as one JSON object on stdout */
};

/*
 * Run the graph saved in PATH through a session with the daemon at SOCKET
 * (NULL: the default): upload its weights, copy
 * its arena in, register and run it, check and print its outputs.  Returns
 * an exit status for qgraph-submit: 0, 1 (it failed or was wrong), 2 (the
 * file is not a graph file this tool can read).
 */
int gf_run(const char *path, const char *socket, const struct gf_run_opts *o);

#endif /* QG_GRAPH_FILE_H */
