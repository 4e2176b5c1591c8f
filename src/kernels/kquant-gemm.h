/*
 * kquant-gemm.h - the loop every Q4_K/Q6_K GEMM shares, whatever builds
 * its tiles.  Not a header of declarations: each kquant-gemm-FAMILY.c
 * includes it once, after defining
 *
 *   KQ_GEMM_FAMILY   the name's suffix (avx2, dotprod, ...): the file then
 *                    exports qg_kq_gemm_q4_K_FAMILY and _q6_K_FAMILY
 *   KQ_TILE_ROWS     weight rows per tile (lanes of its vectors)
 *   KQ_TILE_ALIGN    the tiles' alignment in bytes
 *   KC               super-blocks per chunk of K
 *   struct tile      one super-block of KQ_TILE_ROWS weight rows
 *   tile_q4_K(row, off, t), tile_q6_K(row, off, t)
 *                    build T from bytes OFF.. of the rows at ROW[r]
 *   run_rows(q6, T, kc, a, nba, nr, s, lds, first, ncol)
 *                    every one of NR activation rows (NBA super-blocks
 *                    apart) against KC tiles; the first NCOL columns of S
 *                    are written, added to unless FIRST
 *
 * The product goes by chunks of KC super-blocks, and in each by tiles of
 * the NC weight rows, each built once and met by all NR activation rows,
 * so a tile's bytes are read from memory once per chunk.  Tiles past the
 * last row repeat it (their lanes are computed and not stored), so
 * nothing is read out of bounds.
 */
#define KQ_GEMM_PASTE_(a, b) a##b
#define KQ_GEMM_PASTE(a, b) KQ_GEMM_PASTE_(a, b)

static inline __attribute__((always_inline)) void gemm_any(const int q6, int64_t k, float *restrict s, size_t lds,
							   const void *restrict vw, size_t wstride, int nc,
							   const void *restrict va, int nr)
{
	const uint8_t *w = vw;
	const struct qg_block_q8_K *a = va;
	const int64_t nsb = k / QG_QK_K;
	const size_t bsz = q6 ? sizeof(struct qg_block_q6_K) : sizeof(struct qg_block_q4_K);
	_Alignas(KQ_TILE_ALIGN) struct tile T[KC];

	for (int64_t b0 = 0; b0 < nsb; b0 += KC) {
		const int kc = nsb - b0 < KC ? (int)(nsb - b0) : KC;
		for (int c0 = 0; c0 < nc; c0 += KQ_TILE_ROWS) {
			const uint8_t *row[KQ_TILE_ROWS];
			for (int r = 0; r < KQ_TILE_ROWS; r++)
				row[r] = w + (size_t)(c0 + r < nc ? c0 + r : nc - 1) * wstride;
			for (int b = 0; b < kc; b++) {
				if (q6)
					tile_q6_K(row, (size_t)(b0 + b) * bsz, &T[b]);
				else
					tile_q4_K(row, (size_t)(b0 + b) * bsz, &T[b]);
			}
			run_rows(q6, T, kc, a + b0, (size_t)nsb, nr, s + c0, lds, b0 == 0,
				 nc - c0 < KQ_TILE_ROWS ? nc - c0 : KQ_TILE_ROWS);
		}
	}
}

void KQ_GEMM_PASTE(qg_kq_gemm_q4_K_, KQ_GEMM_FAMILY)(int64_t k, float *restrict s, size_t lds, const void *restrict w,
						      size_t wstride, int nc, const void *restrict a, int nr)
{
	gemm_any(0, k, s, lds, w, wstride, nc, a, nr);
}

void KQ_GEMM_PASTE(qg_kq_gemm_q6_K_, KQ_GEMM_FAMILY)(int64_t k, float *restrict s, size_t lds, const void *restrict w,
						      size_t wstride, int nc, const void *restrict a, int nr)
{
	gemm_any(1, k, s, lds, w, wstride, nc, a, nr);
}
