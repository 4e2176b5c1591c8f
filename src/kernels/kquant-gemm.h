/*
 * kquant-gemm.h - the loop every Q4_K/Q6_K GEMM shares, and the x86 Q8_0
 * GEMMs with it, whatever builds their tiles.  Not a header of
 * declarations: each kquant-gemm-FAMILY.c includes it once, after defining
 *
 *   KQ_GEMM_FAMILY   the name's suffix (avx2, dotprod, ...): the file then
 *                    exports qg_kq_gemm_q4_K_FAMILY and _q6_K_FAMILY
 *   KQ_TILE_ROWS     weight rows per tile (lanes of its vectors)
 *   KQ_TILE_ALIGN    the tiles' alignment in bytes
 *   KC               super-blocks per chunk of K
 *   struct tile      one super-block of KQ_TILE_ROWS weight rows
 *   tile_q4_K(row, off, t), tile_q6_K(row, off, t)
 *                    build T from bytes OFF.. of the rows at ROW[r]
 *
 * and then either
 *
 *   run_rows(q6, T, kc, a, nba, nr, s, lds, first, ncol)
 *                    every one of NR activation rows (NBA super-blocks
 *                    apart) against KC tiles; the first NCOL columns of S
 *                    are written, added to unless FIRST
 *
 * or, to export qg_kq_gemm_q8_0_FAMILY too (the x86 families), the
 * function for a group of rows, this header then passing every row in
 * groups of GM and the 1 .. GM - 1 left:
 *
 *   KQ_GEMM_Q8_0     defined
 *   GM               activation rows per group
 *   run_tiles(G, q6, T, kc, a, nba, s, lds, first, ncol)
 *                    as run_rows for G (a constant) rows
 *   KC8              blocks per chunk of K (Q8_0)
 *   struct tile8     one Q8_0 block of KQ_TILE_ROWS weight rows
 *   tile_q8_0(row, off, t)
 *                    as tile_q4_K
 *   run_tiles8(G, T, kc, a, aux, nba, s, lds, first, ncol)
 *                    as run_tiles, with the activations' qg_q8_0_aux
 *
 * A family may also define
 *
 *   KQ_GEMM_PREFETCH(kind)
 *                    nonzero for the weights KIND whose next tile's bytes
 *                    are to be asked for while this tile's are used
 *
 * The product goes by chunks of KC super-blocks (KC8 blocks), and in each
 * by tiles of the NC weight rows, each built once and met by all NR
 * activation rows, so a tile's bytes are read from memory once per chunk.
 * Tiles past the last row repeat it (their lanes are computed and not
 * stored), so nothing is read out of bounds.
 */
#define KQ_GEMM_PASTE_(a, b) a##b
#define KQ_GEMM_PASTE(a, b) KQ_GEMM_PASTE_(a, b)
#define KQ_GEMM_INLINE inline __attribute__((always_inline))

/* What a GEMM's weights are (a constant in each copy of the loop). */
enum { KQ_Q4_K, KQ_Q6_K, KQ_Q8_0 };

/* Tile B of the chunk at T, of weights KIND, from bytes OFF.. of the rows at ROW[r]. */
static KQ_GEMM_INLINE void gemm_tile(const int kind, const uint8_t *const row[KQ_TILE_ROWS], size_t off, void *T,
				     int b)
{
#ifdef KQ_GEMM_Q8_0
	if (kind == KQ_Q8_0) {
		tile_q8_0(row, off, (struct tile8 *)T + b);
		return;
	}
#endif
	if (kind == KQ_Q6_K)
		tile_q6_K(row, off, (struct tile *)T + b);
	else
		tile_q4_K(row, off, (struct tile *)T + b);
}

#ifdef KQ_GEMM_Q8_0
/* G activation rows from row G0 against the chunk's tiles T; A, AUX and S as in gemm_rows. */
static KQ_GEMM_INLINE void gemm_group(const int kind, const int G, const void *T, int kc, const void *a,
				      const struct qg_q8_0_aux *aux, size_t nba, int g0, float *s, size_t lds,
				      int first, int ncol)
{
	const size_t i = (size_t)g0 * nba;

	if (kind == KQ_Q8_0)
		run_tiles8(G, T, kc, (const struct qg_block_q8_0 *)a + i, aux + i, nba, s + (size_t)g0 * lds, lds,
			   first, ncol);
	else
		run_tiles(G, kind == KQ_Q6_K, T, kc, (const struct qg_block_q8_K *)a + i, nba,
			  s + (size_t)g0 * lds, lds, first, ncol);
}
#endif

/*
 * Every one of NR activation rows (its blocks NBA apart from A, the
 * chunk's first, and for Q8_0 its aux from AUX) against the chunk's KC
 * tiles T: the first NCOL columns of S, written, or added to unless FIRST.
 */
static KQ_GEMM_INLINE void gemm_rows(const int kind, const void *T, int kc, const void *a,
				     const struct qg_q8_0_aux *aux, size_t nba, int nr, float *s, size_t lds,
				     int first, int ncol)
{
#ifdef KQ_GEMM_Q8_0
	int g0 = 0;

	for (; g0 + GM <= nr; g0 += GM)
		gemm_group(kind, GM, T, kc, a, aux, nba, g0, s, lds, first, ncol);
	/* the last 1 .. GM - 1 rows: each count its own copy, G a constant in it */
#pragma GCC unroll 8
	for (int g = 1; g < GM; g++)
		if (nr - g0 == g)
			gemm_group(kind, g, T, kc, a, aux, nba, g0, s, lds, first, ncol);
#else
	run_rows(kind == KQ_Q6_K, T, kc, a, nba, nr, s, lds, first, ncol);
#endif
}

#ifdef KQ_GEMM_PREFETCH
/*
 * Ask for bytes OFF .. OFF + LEN - 1 of the KQ_TILE_ROWS rows from C
 * (the last repeated past NC), the next tile's.  A tile's rows are
 * WSTRIDE apart, a few hundred bytes of each, too short for the
 * hardware's stream prefetch: unasked, the tile waits on memory when it
 * is built; asked a tile ahead, its bytes arrive while the activation
 * rows meet this one.  Into L2 only (locality 2): the chunk's tiles and
 * activations already fill L1, and prefetching into L1 ran 3% slower.
 */
static KQ_GEMM_INLINE void gemm_prefetch(const uint8_t *w, size_t wstride, int nc, int c, size_t off, size_t len)
{
	for (int r = 0; r < KQ_TILE_ROWS; r++) {
		const uintptr_t p = (uintptr_t)(w + (size_t)(c + r < nc ? c + r : nc - 1) * wstride + off);
		for (uintptr_t l = p & ~(uintptr_t)63; l < p + len; l += 64)
			__builtin_prefetch((const void *)l, 0, 2);
	}
}
#endif

/* The GEMM of weights KIND, with T room for KCMAX tiles of them. */
static KQ_GEMM_INLINE void gemm_any(const int kind, void *T, const int kcmax, int64_t k, float *restrict s,
				    size_t lds, const void *restrict vw, size_t wstride, int nc,
				    const void *restrict va, const struct qg_q8_0_aux *restrict aux, int nr)
{
	const uint8_t *w = vw;
	const int q8 = kind == KQ_Q8_0;
	const int64_t nb = k / (q8 ? QG_QK : QG_QK_K);
	const size_t bsz = q8 ? sizeof(struct qg_block_q8_0)
			      : kind == KQ_Q6_K ? sizeof(struct qg_block_q6_K) : sizeof(struct qg_block_q4_K);

	for (int64_t b0 = 0; b0 < nb; b0 += kcmax) {
		const int kc = nb - b0 < kcmax ? (int)(nb - b0) : kcmax;
		for (int c0 = 0; c0 < nc; c0 += KQ_TILE_ROWS) {
			const uint8_t *row[KQ_TILE_ROWS];
			for (int r = 0; r < KQ_TILE_ROWS; r++)
				row[r] = w + (size_t)(c0 + r < nc ? c0 + r : nc - 1) * wstride;
#ifdef KQ_GEMM_PREFETCH
			/*
			 * the next tile: the next rows of this chunk, or the first
			 * of the next chunk; asked before this one is built, so
			 * that its misses overlap the building too
			 */
			if (KQ_GEMM_PREFETCH(kind)) {
				if (c0 + KQ_TILE_ROWS < nc)
					gemm_prefetch(w, wstride, nc, c0 + KQ_TILE_ROWS, (size_t)b0 * bsz, (size_t)kc * bsz);
				else if (b0 + kcmax < nb)
					gemm_prefetch(w, wstride, nc, 0, (size_t)(b0 + kcmax) * bsz,
						      (size_t)(nb - b0 - kcmax < kcmax ? nb - b0 - kcmax : kcmax) * bsz);
			}
#endif
			for (int b = 0; b < kc; b++)
				gemm_tile(kind, row, (size_t)(b0 + b) * bsz, T, b);
			/* the chunk's first activation block: Q8_0 for Q8_0 weights, Q8_K for the K-quants */
			const void *a = q8 ? (const void *)((const struct qg_block_q8_0 *)va + b0)
					   : (const void *)((const struct qg_block_q8_K *)va + b0);
			gemm_rows(kind, T, kc, a, q8 ? aux + b0 : NULL, (size_t)nb, nr, s + c0, lds, b0 == 0,
				  nc - c0 < KQ_TILE_ROWS ? nc - c0 : KQ_TILE_ROWS);
		}
	}
}

void KQ_GEMM_PASTE(qg_kq_gemm_q4_K_, KQ_GEMM_FAMILY)(int64_t k, float *restrict s, size_t lds, const void *restrict w,
						      size_t wstride, int nc, const void *restrict a, int nr)
{
	_Alignas(KQ_TILE_ALIGN) struct tile T[KC];

	gemm_any(KQ_Q4_K, T, KC, k, s, lds, w, wstride, nc, a, NULL, nr);
}

void KQ_GEMM_PASTE(qg_kq_gemm_q6_K_, KQ_GEMM_FAMILY)(int64_t k, float *restrict s, size_t lds, const void *restrict w,
						      size_t wstride, int nc, const void *restrict a, int nr)
{
	_Alignas(KQ_TILE_ALIGN) struct tile T[KC];

	gemm_any(KQ_Q6_K, T, KC, k, s, lds, w, wstride, nc, a, NULL, nr);
}

#ifdef KQ_GEMM_Q8_0
/* As qg_q8_0_gemm_fn. */
void KQ_GEMM_PASTE(qg_kq_gemm_q8_0_, KQ_GEMM_FAMILY)(int64_t k, float *restrict s, size_t lds, const void *restrict w,
						      size_t wstride, int nc, const void *restrict a,
						      const struct qg_q8_0_aux *restrict aux, int nr)
{
	_Alignas(KQ_TILE_ALIGN) struct tile8 T[KC8];

	gemm_any(KQ_Q8_0, T, KC8, k, s, lds, w, wstride, nc, a, aux, nr);
}
#endif
