/*
 * ggml-peer.c - ggml's CPU kernels for the plain types, as bench-mulmat's
 * peer (ggml-peer.h).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp16.h"
#include "ggml-peer.h"
#include "kquant.h"

/* WBYTES random bytes at W (xorshift: the values do not matter for speed). */
static void fill_random(uint8_t *w, size_t wbytes)
{
	uint64_t st = 0x13198a2e03707344ULL;

	for (size_t i = 0; i < wbytes; i++) {
		st ^= st >> 12, st ^= st << 25, st ^= st >> 27;
		w[i] = (uint8_t)((st * 0x2545f4914f6cdd1dULL) >> 56);
	}
}

/*
 * M x K weights of plain type WT (WBYTES): random bytes with every
 * block's scales set to 2^-8 (and Q4_K's dmin to 2^-10), so that the
 * products are finite; the values do not matter for speed, and
 * quantizing M * K floats would cost a qemu run many times the kernel.
 */
uint8_t *bench_plain_weights(enum qg_type wt, int64_t m, int64_t k, size_t wbytes)
{
	uint8_t *w = bench_alloc(wbytes);
	const qg_fp16 d = qg_fp32_to_fp16(1.0f / 256), dmin = qg_fp32_to_fp16(1.0f / 1024);

	fill_random(w, wbytes);
	for (int64_t b = 0; b < m * k / (wt == QG_TYPE_Q8_0 ? QG_QK : QG_QK_K); b++) {
		if (wt == QG_TYPE_Q4_K) {
			((struct qg_block_q4_K *)(void *)w)[b].d = d;
			((struct qg_block_q4_K *)(void *)w)[b].dmin = dmin;
		} else if (wt == QG_TYPE_Q6_K) {
			((struct qg_block_q6_K *)(void *)w)[b].d = d;
		} else {
			((struct qg_block_q8_0 *)(void *)w)[b].d = d;
		}
	}
	return w;
}

/*
 * ggml's CPU kernels for the plain types, loaded from libggml-cpu.so (and
 * the libggml-base.so it needs), tried in the order ggml's mul_mat tries
 * them: its repacked GEMM and GEMV where ggml repacks the type on this
 * CPU; else, on the same bytes as ours (our Q4_K, Q6_K, Q8_0 and Q8_K
 * blocks are ggml's), llamafile's sgemm where the library has it and it
 * takes the product (Q8_0 on x86 at n >= 2), and its vec_dot, walked as
 * its mul_mat walks a weight that is not repacked (16 x 16 tiles of
 * outputs, one dot each).  Always its activation quantizers.
 */
enum { GG_Q8_0 = 8, GG_Q4_K = 12, GG_Q6_K = 14 };

struct gg_traits {
	void (*from_float)(const float *x, void *y, int64_t k);
	void (*vec_dot)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y, size_t by, int nrc);
	int vec_dot_type;
	int64_t nrows;
};

/*
 * ggml-cpu-impl.h's struct ggml_compute_params, as llamafile_sgemm takes
 * it: for the quantized types it reads only ith and nth (tinyBLAS_Q0_AVX
 * deals out its tiles statically), never the thread pool.
 */
struct gg_compute_params {
	int ith, nth;
	size_t wsize;
	void *wdata;
	void *threadpool;
	_Bool use_ref;
};


static int gg_has(const struct gg *g, const char *feature)
{
	char sym[64];

	snprintf(sym, sizeof sym, "ggml_cpu_has_%s", feature);
	int (*has)(void) = (int (*)(void))dlsym(g->dl, sym);
	return has && has();
}

int gg_open(struct gg *g, const char *path)
{
	memset(g, 0, sizeof *g);
	g->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!g->dl)
		return -ENOENT;
	/* ggml-base's entries are found through libggml-cpu's own dependencies */
	void (*init)(void) = (void (*)(void))dlsym(g->dl, "ggml_cpu_init");
	g->traits = (const struct gg_traits *(*)(int))dlsym(g->dl, "ggml_get_type_traits_cpu");
	g->row_size = (size_t (*)(int, int64_t))dlsym(g->dl, "ggml_row_size");
	g->type_size = (size_t (*)(int))dlsym(g->dl, "ggml_type_size");
	g->type_name = (const char *(*)(int))dlsym(g->dl, "ggml_type_name");
	if (!init || !g->traits || !g->row_size || !g->type_size || !g->type_name) {
		dlclose(g->dl);
		return -ENOENT;
	}
	if (gg_has(g, "llamafile"))
		g->sgemm = (gg_sgemm_fn)dlsym(g->dl, "llamafile_sgemm");
	init();
	return 0;
}

void gg_close(struct gg *g)
{
	dlclose(g->dl);
}

static int gg_type(enum qg_type wt)
{
	return wt == QG_TYPE_Q4_K ? GG_Q4_K : wt == QG_TYPE_Q6_K ? GG_Q6_K : GG_Q8_0;
}

/*
 * ggml_repack_get_optimal_repack_type() (ggml-cpu/repack.cpp), for our
 * three types: the first rule whose features the library reports, for a
 * weight whose row count is a multiple of COLS, wins; a type with no rule
 * that holds is not repacked (Q6_K and Q8_0 on x86).  The rule is a static
 * function there, so it is written down here; the features, type names,
 * sizes and kernels are asked of the library, which answers for the CPU it
 * was compiled for (on aarch64 ggml_cpu_has_dotprod() and friends are
 * compile-time constants).  COLS weight rows are interleaved INTER bytes
 * at a time (ggml's NB_COLS and INTER_SIZE; its symbols say COLSxINTER),
 * and each interleaved block of COLS plain blocks starts with HALVES fp16
 * scales per row, COLS at a time (Q4_K's d then dmin; Q6_K's and Q8_0's d:
 * repack.h's block_q4_Kx8, block_q6_Kx8, block_q8_0x4): the only bytes that
 * must be finite.
 */
static const struct gg_rule {
	int type;
	int cols, inter;
	int halves;
	const char *needs[2];	/* ggml_cpu_has_<feature>() that must be true */
} gg_rules[] = {
	{ GG_Q4_K, 8, 8, 2, { "avx2", NULL } },
	{ GG_Q4_K, 8, 8, 2, { "neon", "matmul_int8" } },
	{ GG_Q4_K, 8, 4, 2, { "neon", "dotprod" } },
	{ GG_Q6_K, 8, 8, 1, { "neon", "matmul_int8" } },
	{ GG_Q6_K, 8, 4, 1, { "neon", "dotprod" } },
	{ GG_Q8_0, 4, 8, 1, { "neon", "matmul_int8" } },
	{ GG_Q8_0, 4, 4, 1, { "neon", "dotprod" } },
};


/* Chooses as ggml would for an M x K weight of WT; 0, or -ENOENT when the library lacks a kernel its rule names. */
int gg_peer_init(struct gg_peer *p, const struct gg *g, enum qg_type wt, int64_t m, int64_t k)
{
	memset(p, 0, sizeof *p);
	p->gg = g;
	p->type = gg_type(wt);
	p->wt = g->traits(p->type);
	p->at = g->traits(p->wt->vec_dot_type);
	p->arow = g->row_size(p->wt->vec_dot_type, k);
	for (size_t i = 0; i < sizeof gg_rules / sizeof gg_rules[0] && !p->rule; i++) {
		const struct gg_rule *r = &gg_rules[i];
		if (r->type == p->type && m % r->cols == 0 && gg_has(g, r->needs[0]) &&
		    (!r->needs[1] || gg_has(g, r->needs[1])))
			p->rule = r;
	}
	const char *wn = g->type_name(p->type), *an = g->type_name(p->wt->vec_dot_type);
	if (!p->rule) {
		snprintf(p->name, sizeof p->name, "ggml vec_dot");
		snprintf(p->what, sizeof p->what, "not repacked on this CPU: %sits vec_dot (%s x %s)",
			 g->sgemm ? "llamafile_sgemm where it takes the product, else " : "", wn, an);
		return 0;
	}
	char gemm[64], gemv[64], quant[64];
	snprintf(gemm, sizeof gemm, "ggml_gemm_%s_%dx%d_%s", wn, p->rule->cols, p->rule->inter, an);
	snprintf(gemv, sizeof gemv, "ggml_gemv_%s_%dx%d_%s", wn, p->rule->cols, p->rule->inter, an);
	snprintf(quant, sizeof quant, "ggml_quantize_mat_%s_4x%d", an, p->rule->inter);
	p->gemm = (gg_gemm_fn)dlsym(g->dl, gemm);
	p->gemv = (gg_gemm_fn)dlsym(g->dl, gemv);
	p->quant4 = (void (*)(const float *, void *, int64_t))dlsym(g->dl, quant);
	snprintf(p->name, sizeof p->name, "ggml %s %dx%d", wn, p->rule->cols, p->rule->inter);
	snprintf(p->what, sizeof p->what, "repacked %dx%d: %s, %s, %s", p->rule->cols, p->rule->inter, gemm, gemv,
		 quant);
	return p->gemm && p->gemv && p->quant4 ? 0 : -ENOENT;
}

/*
 * M x K weights as P's kernels read them, in *BYTES (as many as ggml's
 * plain layout: repacking interleaves, it does not grow): random bytes,
 * with the scales at the head of every interleaved block set to 2^-8
 * (Q4_K's dmin to 2^-10), or plain blocks so made where ggml does not
 * repack.  Random bytes serve because the kernels have no path that
 * depends on a value: each decodes and multiplies every byte the same way,
 * and real blocks would only be these bytes permuted.
 */
uint8_t *gg_make_weights(const struct gg_peer *p, enum qg_type wt, int64_t m, int64_t k, size_t *bytes)
{
	*bytes = (size_t)m * p->gg->row_size(p->type, k);
	if (!p->rule)
		return bench_plain_weights(wt, m, k, *bytes);
	uint8_t *w = bench_alloc(*bytes);
	const size_t block = (size_t)p->rule->cols * p->gg->type_size(p->type);
	const int cols = p->rule->cols;
	const qg_fp16 d = qg_fp32_to_fp16(1.0f / 256), dmin = qg_fp32_to_fp16(1.0f / 1024);

	fill_random(w, *bytes);
	for (size_t b = 0; b + block <= *bytes; b += block) {
		qg_fp16 *h = (qg_fp16 *)(void *)(w + b);
		for (int i = 0; i < cols * p->rule->halves; i++)
			h[i] = i < cols ? d : dmin;
	}
	return w;
}

/*
 * Thread ITH of NTH's share of quantizing N activation rows of K at X into
 * ACT, as ggml's forward_mul_mat does for a repacked weight: groups of four
 * rows interleaved, dealt round the threads, the rows past the last group
 * one by one; plain rows, split in ranges, for vec_dot.
 */
void gg_peer_quantize(const struct gg_peer *p, const float *x, int64_t k, int64_t n, uint8_t *act, int ith,
			     int nth)
{
	const int64_t n4 = p->rule ? n - n % 4 : 0;

	for (int64_t r = 4 * ith; r < n4; r += 4 * nth)
		p->quant4(x + r * k, act + (size_t)r * p->arow, k);
	if (p->rule) {
		for (int64_t r = n4 + ith; r < n; r += nth)
			p->at->from_float(x + r * k, act + (size_t)r * p->arow, k);
	} else {
		for (int64_t r = n * ith / nth; r < n * (ith + 1) / nth; r++)
			p->at->from_float(x + r * k, act + (size_t)r * p->arow, k);
	}
}

/*
 * Thread ITH of NTH's share of the M x N outputs into Y (N rows of M).
 * Repacked: its even share of the weight rows (ggml deals out chunks of
 * them at run time; with equal threads the shares come out the same), the
 * bounds rounded up to whole interleaved groups as ggml rounds its chunks;
 * the GEMM on the whole groups of four activation rows and one GEMV per
 * row past them, as forward_mul_mat_one_chunk calls them.  Otherwise
 * llamafile's sgemm, which splits the work itself, if it takes the
 * product; else vec_dot in ggml's 16 x 16 tiles over an even share of the
 * rows.  Returns 1 where sgemm ran.
 */
int gg_peer_compute(const struct gg_peer *p, const uint8_t *w, int64_t m, int64_t k, int64_t n,
			   const uint8_t *act, float *y, int ith, int nth)
{
	const size_t wrow = p->gg->row_size(p->type, k);
	const int64_t cols = p->rule ? p->rule->cols : 1;
	int64_t r0 = m * ith / nth, r1 = m * (ith + 1) / nth;

	r0 = (r0 + cols - 1) / cols * cols;
	r1 = (r1 + cols - 1) / cols * cols;
	r1 = r1 < m ? r1 : m;
	if (p->rule) {
		if (r0 >= r1)
			return 0;
		const int64_t n4 = n - n % 4;
		if (n4)
			p->gemm((int)k, y + r0, (size_t)m, w + (size_t)r0 * wrow, act, (int)n4, (int)(r1 - r0));
		for (int64_t c = n4; c < n; c++)
			p->gemv((int)k, y + c * m + r0, (size_t)m, w + (size_t)r0 * wrow, act + (size_t)c * p->arow, 1,
				(int)(r1 - r0));
		return 0;
	}
	if (p->gg->sgemm) {
		/* as ggml_compute_forward_mul_mat calls it: strides in blocks, F32 (type 0) out */
		const struct gg_compute_params cp = { .ith = ith, .nth = nth };
		const int at = p->wt->vec_dot_type;
		if (p->gg->sgemm(&cp, m, n, (int64_t)(wrow / p->gg->type_size(p->type)), w,
				 (int64_t)(wrow / p->gg->type_size(p->type)), act,
				 (int64_t)(p->arow / p->gg->type_size(at)), y, m, p->type, at, 0))
			return 1;
	}
	for (int64_t c0 = 0; c0 < n; c0 += 16)
		for (int64_t i0 = r0; i0 < r1; i0 += 16)
			for (int64_t c = c0; c < c0 + 16 && c < n; c++)
				for (int64_t i = i0; i < i0 + 16 && i < r1; i++)
					p->wt->vec_dot((int)k, y + c * m + i, 0, w + (size_t)i * wrow, 0,
						       act + (size_t)c * p->arow, 0, 1);
	return 0;
}


/* One whole mul_mat by ggml's kernels on the pool, timed as ours is: quantize, barrier, product. */
void gg_job(struct bench_pool *pool, void *arg, int ith, int nth)
{
	struct gg_job *j = arg;

	gg_peer_quantize(j->peer, j->x, j->k, j->n, j->scratch, ith, nth);
	bench_barrier(pool);
	int ran = gg_peer_compute(j->peer, j->w, j->m, j->k, j->n, j->scratch, j->y, ith, nth);
	if (ith == 0)
		j->sgemm_ran = ran;
}

