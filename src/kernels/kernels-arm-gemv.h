/*
 * kernels-arm-gemv.h - the GEMV entries of the NEON and dotprod families,
 * included by kernels-neon.c and kernels-dotprod.c after what they share
 * the shape of: gemv_groups (NR rows, 1 to 3, against NG row groups: the
 * family's asm loop), GEMV_NG (row groups a pass for a layout and a row
 * count) and W_BLOCK4, W_BLOCK8 (bytes of a block of each row group).
 * Not a header to include anywhere else: it defines static functions.
 */
#ifndef QG_KERNELS_ARM_GEMV_H
#define QG_KERNELS_ARM_GEMV_H

/*
 * NR (1 to 3) activation rows, LDS apart in S, against NC weight rows of
 * layout L, GEMV_NG(L, NR) row groups a pass.
 */
QG_ARM_INLINE void gemv(enum qg_layout l, int nr, int k, float *restrict s, size_t lds, const void *restrict w,
			const void *restrict a, int nc)
{
	const int nb = k / QG_QK, R = l == QG_LAYOUT_8X8 ? 8 : 4;
	const size_t gs = (size_t)nb * (l == QG_LAYOUT_8X8 ? W_BLOCK8 : W_BLOCK4);
	const uint8_t *wp = w;
	const int ngroups = nc / R, step = GEMV_NG(l, nr);

	if (nb <= 0) {
		for (int r = 0; r < nr; r++)
			memset(s + (size_t)r * lds, 0, (size_t)nc * sizeof *s);
		return;
	}
	for (int g = 0; g < ngroups; g += step) {
		const int ng = ngroups - g < step ? ngroups - g : step;
		gemv_groups(l, nr, ng, nb, s + g * R, lds, wp + g * gs, gs, a);
	}
}

static void gemv_4x4(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv(QG_LAYOUT_4X4, 1, k, s, 0, w, a, nc);
}

static void gemv_4x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv(QG_LAYOUT_4X8, 1, k, s, 0, w, a, nc);
}

static void gemv_8x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv(QG_LAYOUT_8X8, 1, k, s, 0, w, a, nc);
}

/* NR rows of layout L: three at a time, then the rest. */
QG_ARM_INLINE void gemv_rows(enum qg_layout l, int k, float *restrict s, size_t lds, const void *restrict w,
			     const void *restrict a, int nr, int nc)
{
	const struct qg_block_q8_0 *act = a;
	const size_t nb = (size_t)(k / QG_QK);

	for (int r = 0; r < nr; r += 3)
		gemv(l, nr - r < 3 ? nr - r : 3, k, s + (size_t)r * lds, lds, w, act + r * nb, nc);
}

static void gemv_rows_4x4(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			  int nr, int nc)
{
	gemv_rows(QG_LAYOUT_4X4, k, s, lds, w, a, nr, nc);
}

static void gemv_rows_4x8(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			  int nr, int nc)
{
	gemv_rows(QG_LAYOUT_4X8, k, s, lds, w, a, nr, nc);
}

static void gemv_rows_8x8(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			  int nr, int nc)
{
	gemv_rows(QG_LAYOUT_8X8, k, s, lds, w, a, nr, nc);
}

#endif /* QG_KERNELS_ARM_GEMV_H */
