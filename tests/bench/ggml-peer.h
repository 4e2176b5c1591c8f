/*
 * ggml-peer.h - what ggml's CPU backend runs for a Q4_K, Q6_K or Q8_0
 * weight on this CPU, loaded from its libggml-cpu.so, for bench-mulmat to
 * time and count beside our kernels (ggml-peer.c says how it chooses).
 */
#ifndef QG_BENCH_GGML_PEER_H
#define QG_BENCH_GGML_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"
#include "quant.h"

struct gg_traits;
struct gg_compute_params;
struct gg_rule;

typedef _Bool (*gg_sgemm_fn)(const struct gg_compute_params *params, int64_t m, int64_t n, int64_t k,
			     const void *a, int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc,
			     int atype, int btype, int ctype);
typedef void (*gg_gemm_fn)(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);

/* The library and what is asked of it by name. */
struct gg {
	void *dl;
	const struct gg_traits *(*traits)(int type);
	size_t (*row_size)(int type, int64_t ne);
	size_t (*type_size)(int type);
	const char *(*type_name)(int type);
	gg_sgemm_fn sgemm;		/* NULL: built without llamafile */
};

/* What ggml runs for one weight type on this CPU, and how to feed it. */
struct gg_peer {
	const struct gg *gg;
	int type;
	const struct gg_traits *wt, *at;	/* the weight's and its activations' */
	size_t arow;				/* bytes per activation row of K */
	const struct gg_rule *rule;		/* NULL: vec_dot */
	gg_gemm_fn gemm, gemv;
	void (*quant4)(const float *x, void *vy, int64_t k);	/* four rows, interleaved */
	char name[32];				/* for the tables: "ggml q4_K 8x8" */
	char what[256];				/* the symbols, for people */
};

/* One whole mul_mat by ggml's kernels, for bench_pool_run (gg_job). */
struct gg_job {
	const struct gg_peer *peer;
	const uint8_t *w;
	int64_t m, k, n;
	const float *x;
	float *y;
	void *scratch;
	int sgemm_ran;		/* thread 0's answer: each thread gets the same */
};

/*
 * M x K weights of plain type WT (WBYTES): random bytes with every
 * block's scales set so that the products are finite (ggml-peer.c).
 */
uint8_t *bench_plain_weights(enum qg_type wt, int64_t m, int64_t k, size_t wbytes);

/* Opens libggml-cpu.so at PATH and asks it for its entries; 0, or -ENOENT. */
int gg_open(struct gg *g, const char *path);
void gg_close(struct gg *g);
/* Chooses as ggml would for an M x K weight of WT; 0, or -ENOENT when the library lacks a kernel its rule names. */
int gg_peer_init(struct gg_peer *p, const struct gg *g, enum qg_type wt, int64_t m, int64_t k);
/* M x K weights as P's kernels read them, their size in *BYTES. */
uint8_t *gg_make_weights(const struct gg_peer *p, enum qg_type wt, int64_t m, int64_t k, size_t *bytes);
/* Thread ITH of NTH's share of quantizing N activation rows of K at X into ACT, as ggml does. */
void gg_peer_quantize(const struct gg_peer *p, const float *x, int64_t k, int64_t n, uint8_t *act, int ith, int nth);
/* Thread ITH of NTH's share of the M x N outputs into Y; 1 where llamafile's sgemm ran. */
int gg_peer_compute(const struct gg_peer *p, const uint8_t *w, int64_t m, int64_t k, int64_t n, const uint8_t *act,
		    float *y, int ith, int nth);
/* ARG a struct gg_job: quantize, barrier, product, as ours is timed. */
void gg_job(struct bench_pool *pool, void *arg, int ith, int nth);

#endif
