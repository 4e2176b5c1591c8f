/*
 * kernels-neon.c - GEMV and GEMM for every interleaved Q4_0 layout with
 * plain NEON (armv8-a: Cortex-A72, Graviton1, any aarch64 without sdot),
 * built with -march=armv8-a.
 *
 * Without sdot the multiply is smull/smlal: eight int8 x int8 products
 * into int16 lanes per instruction.  The weights are taken as plain 4-bit
 * values in [-8, 7] (three shifts per 16 bytes, kernels-arm.h), not times
 * 16, so a product is at most 8 * 128 = 1024 in magnitude and an int16 lane
 * can take the 8 products one block gives it, then a pairwise add (16
 * products, |sum| <= 16384) before widening to int32 with saddlp.  The
 * arithmetic is exact for every input byte, -128 included.
 *
 * The weights are used in the "4x4 canonical" form (vector c = bytes
 * 4c..4c+3 of four rows); the 8-byte layouts reach it with two uzp per 32
 * bytes.  The activation side is replicated so that its lanes line up with
 * the weights': a 32-bit lane (4 values of one activation row) duplicated
 * into all four lanes multiplies the 4 weight rows' bytes for those values.
 *
 * GEMV: 8 duplicated activation vectors per block serve every row group;
 * per block and group of 4 rows, 16 multiplies, 12 nibble and 2 reduction
 * instructions and 2 float ones.  GEMM (activations with the 4-byte
 * interleave): per activation row r and chunk c one dup, one smlal and one
 * smlal2; a tile is 4 weight rows against 2 groups of 4 activation rows, so
 * the nibbles are taken once for both.
 */
#include "config.h"

#include "kernels-arm.h"

#define W_BLOCK4 72	/* bytes of a block_q4_0x4 */
#define W_BLOCK8 144	/* bytes of a block_q4_0x8 */

/*
 * The four canonical vectors of 4 weight rows: view V of layout L in the
 * block at W, as plain nibbles LO (values 4c..4c+3) and HI (16+4c..).
 */
QG_ARM_INLINE void load_canon(enum qg_layout l, struct qg_arm_wview v, const uint8_t *w,
			      int8x16_t lo[4], int8x16_t hi[4])
{
	uint8x16_t q[4];

	if (l == QG_LAYOUT_4X4)
		qg_arm_canon_4x4(w + v.q0off, q);
	else
		qg_arm_canon_x8(w + v.q0off, w + v.q1off, q);
	_Pragma("GCC unroll 4")
	for (int i = 0; i < 4; i++) {
		lo[i] = qg_arm_lo(q[i]);
		hi[i] = qg_arm_hi(q[i]);
	}
}

/* int16 lanes [row 0 x4, row 1 x4] and [row 2 x4, row 3 x4] to int32 [row 0..3]. */
QG_ARM_INLINE int32x4_t reduce_rows(int16x8_t p01, int16x8_t p23)
{
	return vpaddlq_s16(vpaddq_s16(p01, p23));
}

/* --- GEMV ------------------------------------------------------------- */

/*
 * NG views (4 rows each) against one activation row.  View g is view
 * VIEWS(g) of the group whose first block is at W + GROUP(g) * GS.
 */
QG_ARM_INLINE void gemv_views(enum qg_layout l, int ng, int nb, float *restrict s,
			      const uint8_t *restrict w, size_t gs,
			      const struct qg_block_q8_0 *restrict a)
{
	const int bb = l == QG_LAYOUT_8X8 ? W_BLOCK8 : W_BLOCK4;
	float32x4_t sum[4];
	const uint8_t *p[4];
	struct qg_arm_wview v[4];

	_Pragma("GCC unroll 4")
	for (int g = 0; g < 4; g++) {
		sum[g] = vdupq_n_f32(0.0f);
		if (l == QG_LAYOUT_8X8) {
			p[g] = w + (g / 2) * gs;
			v[g] = QG_ARM_VIEW_8X8(g % 2);
		} else {
			p[g] = w + g * gs;
			v[g] = QG_ARM_VIEW_4X8;
		}
	}
	for (int b = 0; b < nb; b++) {
		const float da = qg_arm_f16(&a[b].d);
		int8x16x2_t av = vld1q_s8_x2(a[b].qs);
		int8x16_t rl[4], rh[4];

		/* values 4c..4c+3 (and 16+4c..) in all four lanes */
		rl[0] = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(av.val[0]), 0));
		rl[1] = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(av.val[0]), 1));
		rl[2] = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(av.val[0]), 2));
		rl[3] = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(av.val[0]), 3));
		rh[0] = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(av.val[1]), 0));
		rh[1] = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(av.val[1]), 1));
		rh[2] = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(av.val[1]), 2));
		rh[3] = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(av.val[1]), 3));
		_Pragma("GCC unroll 4")
		for (int g = 0; g < ng; g++) {
			const uint8_t *q = p[g] + (size_t)b * bb;
			int8x16_t lo[4], hi[4];
			load_canon(l, v[g], q, lo, hi);
			int16x8_t p01 = vmull_s8(vget_low_s8(lo[0]), vget_low_s8(rl[0]));
			int16x8_t p23 = vmull_high_s8(lo[0], rl[0]);
			p01 = vmlal_s8(p01, vget_low_s8(hi[0]), vget_low_s8(rh[0]));
			p23 = vmlal_high_s8(p23, hi[0], rh[0]);
			_Pragma("GCC unroll 4")
			for (int c = 1; c < 4; c++) {
				p01 = vmlal_s8(p01, vget_low_s8(lo[c]), vget_low_s8(rl[c]));
				p23 = vmlal_high_s8(p23, lo[c], rl[c]);
				p01 = vmlal_s8(p01, vget_low_s8(hi[c]), vget_low_s8(rh[c]));
				p23 = vmlal_high_s8(p23, hi[c], rh[c]);
			}
			float32x4_t t = vcvtq_f32_s32(reduce_rows(p01, p23));
			sum[g] = qg_arm_acc_n(sum[g], t, qg_arm_f16x4((const qg_fp16 *)(q + v[g].soff)), da);
		}
	}
	_Pragma("GCC unroll 4")
	for (int g = 0; g < 4; g++)
		if (g < ng)
			vst1q_f32(s + 4 * g, sum[g]);
}

QG_ARM_INLINE void gemv(enum qg_layout l, int k, float *restrict s, const void *restrict w,
			const void *restrict a, int nc)
{
	const int nb = k / QG_QK, R = l == QG_LAYOUT_8X8 ? 8 : 4;
	const size_t gs = (size_t)nb * (l == QG_LAYOUT_8X8 ? W_BLOCK8 : W_BLOCK4);
	const uint8_t *wp = w;
	int v = 0, nv = nc / 4;		/* 4-row views; an 8x8 group is two */

	for (; v + 4 <= nv; v += 4)
		gemv_views(l, 4, nb, s + 4 * v, wp + (size_t)(v * 4 / R) * gs, gs, a);
	/* what is left is a whole number of groups: 1..3 views, or 2 for 8x8 */
	switch (nv - v) {
	case 3:
		gemv_views(l, 3, nb, s + 4 * v, wp + (size_t)(v * 4 / R) * gs, gs, a);
		break;
	case 2:
		gemv_views(l, 2, nb, s + 4 * v, wp + (size_t)(v * 4 / R) * gs, gs, a);
		break;
	case 1:
		gemv_views(l, 1, nb, s + 4 * v, wp + (size_t)(v * 4 / R) * gs, gs, a);
		break;
	default:
		break;
	}
}

static void gemv_4x4(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv(QG_LAYOUT_4X4, k, s, w, a, nc);
}

static void gemv_4x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv(QG_LAYOUT_4X8, k, s, w, a, nc);
}

static void gemv_8x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv(QG_LAYOUT_8X8, k, s, w, a, nc);
}

/* --- GEMM ------------------------------------------------------------- */

/* Products of activation row R (lane R of X) with canonical weight vector W, accumulated. */
#define MLAL_ROW(p01, p23, x, wv, r)							\
	do {										\
		int8x16_t d_ = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(x), r)); \
		(p01) = vmlal_s8((p01), vget_low_s8(wv), vget_low_s8(d_));		\
		(p23) = vmlal_high_s8((p23), (wv), d_);					\
	} while (0)

#define MULL_ROW(p01, p23, x, wv, r)							\
	do {										\
		int8x16_t d_ = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(x), r)); \
		(p01) = vmull_s8(vget_low_s8(wv), vget_low_s8(d_));			\
		(p23) = vmull_high_s8((wv), d_);					\
	} while (0)

/* One activation row R of a group: X = its 8 vectors, LO/HI the weights. */
#define ROW_DOT(res, x, lo, hi, r)							\
	do {										\
		int16x8_t p01_, p23_;							\
		MULL_ROW(p01_, p23_, (x)[0], (lo)[0], r);				\
		MLAL_ROW(p01_, p23_, (x)[1], (lo)[1], r);				\
		MLAL_ROW(p01_, p23_, (x)[2], (lo)[2], r);				\
		MLAL_ROW(p01_, p23_, (x)[3], (lo)[3], r);				\
		MLAL_ROW(p01_, p23_, (x)[4], (hi)[0], r);				\
		MLAL_ROW(p01_, p23_, (x)[5], (hi)[1], r);				\
		MLAL_ROW(p01_, p23_, (x)[6], (hi)[2], r);				\
		MLAL_ROW(p01_, p23_, (x)[7], (hi)[3], r);				\
		(res) = reduce_rows(p01_, p23_);					\
	} while (0)

/*
 * Four weight rows (view V of layout L, first block at W) against NG <= 2
 * groups of 4 activation rows (first at A).  Row 4g+r writes
 * S[(4g+r)*LDS + 0..3].
 */
QG_ARM_INLINE void gemm_tile(enum qg_layout l, struct qg_arm_wview v, int ng, int nb,
			     float *restrict s, size_t lds, const uint8_t *restrict w,
			     const struct qg_block_q8_0x4 *restrict a)
{
	float32x4_t sum[2][4];

	_Pragma("GCC unroll 2")
	for (int g = 0; g < 2; g++)
		_Pragma("GCC unroll 4")
		for (int r = 0; r < 4; r++)
			sum[g][r] = vdupq_n_f32(0.0f);
	for (int b = 0; b < nb; b++, w += v.stride) {
		const float32x4_t dw = qg_arm_f16x4((const qg_fp16 *)(w + v.soff));
		int8x16_t lo[4], hi[4];

		load_canon(l, v, w, lo, hi);
		_Pragma("GCC unroll 2")
		for (int g = 0; g < ng; g++) {
			const struct qg_block_q8_0x4 *ab = a + (size_t)g * nb + b;
			const float32x4_t da = qg_arm_f16x4(ab->d);
			int8x16x4_t x0 = vld1q_s8_x4(ab->qs), x1 = vld1q_s8_x4(ab->qs + 64);
			int8x16_t x[8] = { x0.val[0], x0.val[1], x0.val[2], x0.val[3],
					   x1.val[0], x1.val[1], x1.val[2], x1.val[3] };
			int32x4_t r0, r1, r2, r3;

			ROW_DOT(r0, x, lo, hi, 0);
			ROW_DOT(r1, x, lo, hi, 1);
			ROW_DOT(r2, x, lo, hi, 2);
			ROW_DOT(r3, x, lo, hi, 3);
			sum[g][0] = vfmaq_laneq_f32(sum[g][0], vmulq_f32(vcvtq_f32_s32(r0), dw), da, 0);
			sum[g][1] = vfmaq_laneq_f32(sum[g][1], vmulq_f32(vcvtq_f32_s32(r1), dw), da, 1);
			sum[g][2] = vfmaq_laneq_f32(sum[g][2], vmulq_f32(vcvtq_f32_s32(r2), dw), da, 2);
			sum[g][3] = vfmaq_laneq_f32(sum[g][3], vmulq_f32(vcvtq_f32_s32(r3), dw), da, 3);
		}
	}
	_Pragma("GCC unroll 2")
	for (int g = 0; g < 2; g++)
		if (g < ng)
			_Pragma("GCC unroll 4")
			for (int r = 0; r < 4; r++)
				vst1q_f32(s + (size_t)(4 * g + r) * lds, sum[g][r]);
}

QG_ARM_INLINE void gemm(enum qg_layout l, int k, float *restrict s, size_t lds,
			const void *restrict w, const void *restrict a, int nr, int nc)
{
	const int nb = k / QG_QK, ngroups = nr / 4;
	const struct qg_block_q8_0x4 *ap = a;

	for (int c = 0; c < nc; c += 4) {
		struct qg_arm_wview v;
		const uint8_t *wp;
		if (l == QG_LAYOUT_8X8) {
			v = QG_ARM_VIEW_8X8((c / 4) % 2);
			wp = (const uint8_t *)w + (size_t)(c / 8) * nb * W_BLOCK8;
		} else {
			v = QG_ARM_VIEW_4X8;
			wp = (const uint8_t *)w + (size_t)(c / 4) * nb * W_BLOCK4;
		}
		int g = 0;
		for (; g + 2 <= ngroups; g += 2)
			gemm_tile(l, v, 2, nb, s + (size_t)g * 4 * lds + c, lds, wp, ap + (size_t)g * nb);
		if (g < ngroups)
			gemm_tile(l, v, 1, nb, s + (size_t)g * 4 * lds + c, lds, wp, ap + (size_t)g * nb);
	}
}

static void gemm_4x4(int k, float *restrict s, size_t lds, const void *restrict w,
		     const void *restrict a, int nr, int nc)
{
	gemm(QG_LAYOUT_4X4, k, s, lds, w, a, nr, nc);
}

static void gemm_4x8(int k, float *restrict s, size_t lds, const void *restrict w,
		     const void *restrict a, int nr, int nc)
{
	gemm(QG_LAYOUT_4X8, k, s, lds, w, a, nr, nc);
}

static void gemm_8x8(int k, float *restrict s, size_t lds, const void *restrict w,
		     const void *restrict a, int nr, int nc)
{
	gemm(QG_LAYOUT_8X8, k, s, lds, w, a, nr, nc);
}

/* --- activation quantization ------------------------------------------ */

static void quant_row(const float *x, struct qg_block_q8_0 *y, int64_t k)
{
	qg_arm_quant_row(x, y, k);
}

static void quant_x4(const float *x, size_t ldx, struct qg_block_q8_0x4 *y, int64_t k, int ileave)
{
	qg_arm_quant_x4(x, ldx, y, k, ileave);
}

const struct qg_kernel qg_kernels_neon[QG_LAYOUT_COUNT] = {
	[QG_LAYOUT_4X4] = {
		.name = "neon 4x4", .family = QG_KF_NEON,
		.gemv = gemv_4x4, .gemm = gemm_4x4, .act_ileave = 4,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
	[QG_LAYOUT_4X8] = {
		.name = "neon 4x8", .family = QG_KF_NEON,
		.gemv = gemv_4x8, .gemm = gemm_4x8, .act_ileave = 4,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
	[QG_LAYOUT_8X8] = {
		.name = "neon 8x8", .family = QG_KF_NEON,
		.gemv = gemv_8x8, .gemm = gemm_8x8, .act_ileave = 4,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
};
