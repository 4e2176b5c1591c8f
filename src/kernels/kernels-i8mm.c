/*
 * kernels-i8mm.c - Q4_0_4x8 and Q4_0_8x8 GEMV and GEMM on NEON with i8mm
 * (smmla) and dotprod (sdot): Graviton4, Grace and other SVE-128 cores, and
 * any armv8.6 core.  Built with -march=armv8.2-a+dotprod+i8mm; the
 * dispatcher calls it only where HWCAP2_I8MM and HWCAP_ASIMDDP say so.
 *
 * Both layouts are read as "views" of four weight rows (kernels-arm.h):
 * a 4x8 row group is one view, an 8x8 row group two, whose bytes sit
 * interleaved in one block_q4_0x8.  In a view, 32 bytes hold bytes 0..7 of
 * rows 0,1 then of rows 2,3 (values 0..7 in the low nibbles, 16..23 in the
 * high ones) and 32 more bytes 8..15 of the same rows: exactly the 2x8
 * operand smmla multiplies, one row pair per register.
 *
 * Nibbles are taken as (int8)(b << 4) and (int8)(b & 0xF0), sixteen times
 * their value, and the factor is divided out by vcvtq_n_f32_s32(x, 4),
 * which converts with four fraction bits (exact: every block sum, times
 * 16, is below 2^20).
 *
 * Arithmetic: each block's integer dot product is exact; it is multiplied
 * by fp32(dw) * fp32(da), rounded once, and added with one fused
 * multiply-add.  The portable kernel rounds (sumi * dw) * da and the add
 * separately, per 8-byte chunk, so the results agree within the tolerance
 * tests/kernels-test.c documents (same terms, other rounding and order),
 * not bit for bit.
 */
#include "config.h"

/*
 * GCC's first scheduling pass hoists every load of a block ahead of its
 * arithmetic and then runs out of the 32 vector registers (spilling to the
 * stack inside the loops); without it the loops stay in registers.
 */
#pragma GCC optimize("no-schedule-insns")

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels-arm.h"
#include "kernels.h"
#include "quant.h"

#define INLINE static inline __attribute__((always_inline))
/* -O2 does not unroll loops over registers; these must be, to stay in registers */
#define UNROLL _Pragma("GCC unroll 16")

/* Bytes of one K/32-block row group of the layout with R rows per group. */
#define GROUP_BYTES(nb, R) ((size_t)(nb) * (R) * (2 + QG_QK / 2))

/* Activation row groups (of four rows) one GEMM pass keeps in registers. */
#define GEMM_SET 3

/*
 * The four weight registers of one view and block: W[0] rows 0,1 bytes
 * 0..7, W[1] rows 2,3 bytes 0..7, W[2] rows 0,1 bytes 8..15, W[3] rows
 * 2,3 bytes 8..15.
 */
INLINE void load_view(const uint8_t *blk, struct qg_arm_wview v, uint8x16_t w[4])
{
	w[0] = vld1q_u8(blk + v.q0off);
	w[1] = vld1q_u8(blk + v.q0off + 16);
	w[2] = vld1q_u8(blk + v.q1off);
	w[3] = vld1q_u8(blk + v.q1off + 16);
}

/*
 * The same view with offsets relative to its first weight byte, so that
 * the pointer a loop advances points at it: ldp of q registers takes only
 * offsets that are multiples of 16, and the blocks are 72 or 144 bytes.
 */
INLINE struct qg_arm_wview rebase(struct qg_arm_wview v)
{
	return (struct qg_arm_wview){ v.soff - v.q0off, 0, v.q1off - v.q0off, v.stride };
}

/* --- GEMV: sdot, one to three activation rows --------------------------- */

/*
 * V views (V constant), each from its own pointer, against NR activation
 * rows (NR constant, 1 to 3; row r at A + r*NB, writing S[v] + r*LDS).
 * Per block each row's activation is read once with ld4r: E[c] is chunk c
 * (values 8c..8c+7) in both halves, so an sdot of a view register with it
 * gives each row of the register's pair two partial sums, and one addp per
 * view folds them to rows 0..3.  smmla would only repeat sdot's work here:
 * with one activation row half of its 2x2 outputs are waste.  A view's
 * weights are loaded and their nibbles taken once for the NR rows, and
 * each row takes the same steps, in the same order, as it does alone.
 */
INLINE void gemv_views(int nb, float *restrict s[], size_t lds, const uint8_t *w[],
		       const struct qg_arm_wview vw[], const struct qg_block_q8_0 *restrict a, const int V,
		       const int NR)
{
	const uint8x16_t mask = vdupq_n_u8(0xf0);
	float32x4_t acc[3][4];
	const uint8_t *p[4];
	struct qg_arm_wview rv[4];

	UNROLL
	for (int v = 0; v < V; v++) {
		UNROLL
		for (int r = 0; r < NR; r++)
			acc[r][v] = vdupq_n_f32(0.0f);
		p[v] = w[v] + vw[v].q0off;
		rv[v] = rebase(vw[v]);
	}
	for (int l = 0; l < nb; l++) {
		int8x16_t e[3][4];
		float da[3];

		UNROLL
		for (int r = 0; r < NR; r++) {
			const struct qg_block_q8_0 *ab = a + (size_t)r * nb + l;
			const int64x2x4_t t = vld4q_dup_s64((const int64_t *)(const void *)ab->qs);
			e[r][0] = vreinterpretq_s8_s64(t.val[0]);
			e[r][1] = vreinterpretq_s8_s64(t.val[1]);
			e[r][2] = vreinterpretq_s8_s64(t.val[2]);
			e[r][3] = vreinterpretq_s8_s64(t.val[3]);
			da[r] = qg_arm_f16(&ab->d);
		}
		UNROLL
		for (int v = 0; v < V; v++) {
			uint8x16_t q[4];
			load_view(p[v], rv[v], q);
			const float32x4_t dw = qg_arm_f16x4((const qg_fp16 *)(const void *)(p[v] + rv[v].soff));
			const int8x16_t x[8] = {
				qg_arm_lo16(q[0]), qg_arm_lo16(q[1]), qg_arm_lo16(q[2]), qg_arm_lo16(q[3]),
				qg_arm_hi16(q[0], mask), qg_arm_hi16(q[1], mask), qg_arm_hi16(q[2], mask),
				qg_arm_hi16(q[3], mask),
			};
			UNROLL
			for (int r = 0; r < NR; r++) {
				const float32x4_t d = vmulq_n_f32(dw, da[r]);
				int32x4_t s01 = vdotq_s32(vdupq_n_s32(0), x[0], e[r][0]);
				int32x4_t s23 = vdotq_s32(vdupq_n_s32(0), x[1], e[r][0]);
				s01 = vdotq_s32(s01, x[2], e[r][1]);
				s23 = vdotq_s32(s23, x[3], e[r][1]);
				s01 = vdotq_s32(s01, x[4], e[r][2]);
				s23 = vdotq_s32(s23, x[5], e[r][2]);
				s01 = vdotq_s32(s01, x[6], e[r][3]);
				s23 = vdotq_s32(s23, x[7], e[r][3]);
				acc[r][v] = vfmaq_f32(acc[r][v], vcvtq_n_f32_s32(vpaddq_s32(s01, s23), 4), d);
			}
			p[v] += vw[v].stride;
		}
	}
	UNROLL
	for (int v = 0; v < V; v++) {
		UNROLL
		for (int r = 0; r < NR; r++)
			vst1q_f32(s[v] + (size_t)r * lds, acc[r][v]);
	}
}

/*
 * NR (constant, 1 to 3) activation rows, LDS apart in S, against the NC
 * weight rows of layout 4x8 (R = 4) or 8x8 (R = 8): 4-row views four a
 * pass for one row, two a pass for two or three (sharing the rows'
 * activation loads), and what remains a row group at a time.
 */
INLINE void gemv_layout(int k, float *restrict s, size_t lds, const void *restrict w,
			const void *restrict a, int nc, const int R, const int NR)
{
	const int nb = k / QG_QK, ng = nc / R;
	const size_t gb = GROUP_BYTES(nb, R);
	/* views as constants, so that their offsets are immediates */
	const struct qg_arm_wview v4[4] = { QG_ARM_VIEW_4X8, QG_ARM_VIEW_4X8, QG_ARM_VIEW_4X8, QG_ARM_VIEW_4X8 };
	const struct qg_arm_wview v8[4] = { QG_ARM_VIEW_8X8(0), QG_ARM_VIEW_8X8(1), QG_ARM_VIEW_8X8(0),
					    QG_ARM_VIEW_8X8(1) };
	const struct qg_arm_wview *vw = R == 4 ? v4 : v8;
	/* row groups a pass: four views for one row, two for two or three */
	const int step = (NR == 1 ? 4 : 2) / (R / 4);
	const uint8_t *wg = w;
	int g = 0;

	for (; g + step <= ng; g += step, wg += step * gb) {
		const uint8_t *wp[4] = { wg, R == 4 ? wg + gb : wg, R == 4 ? wg + 2 * gb : wg + gb,
					 R == 4 ? wg + 3 * gb : wg + gb };
		float *sp[4] = { s + R * g, s + R * g + 4, s + R * g + 8, s + R * g + 12 };
		gemv_views(nb, sp, lds, wp, vw, a, NR == 1 ? 4 : 2, NR);
	}
	/* the rest a row group at a time: one view (4x8) or two (8x8) */
	for (; g < ng; g++, wg += gb) {
		const uint8_t *wp[2] = { wg, wg };
		float *sp[2] = { s + R * g, s + R * g + 4 };
		gemv_views(nb, sp, lds, wp, vw, a, R / 4, NR);
	}
}

static void gemv_4x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv_layout(k, s, 0, w, a, nc, 4, 1);
}

static void gemv_8x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	gemv_layout(k, s, 0, w, a, nc, 8, 1);
}

/* NR rows of layout R: three at a time, then the rest. */
INLINE void gemv_rows_layout(int k, float *restrict s, size_t lds, const void *restrict w,
			     const void *restrict a, int nr, int nc, const int R)
{
	const struct qg_block_q8_0 *act = a;
	const size_t nb = (size_t)(k / QG_QK);

	for (int r = 0; r < nr; r += 3) {
		float *sr = s + (size_t)r * lds;
		if (nr - r >= 3)
			gemv_layout(k, sr, lds, w, act + r * nb, nc, R, 3);
		else if (nr - r == 2)
			gemv_layout(k, sr, lds, w, act + r * nb, nc, R, 2);
		else
			gemv_layout(k, sr, lds, w, act + r * nb, nc, R, 1);
	}
}

static void gemv_rows_4x8(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			  int nr, int nc)
{
	gemv_rows_layout(k, s, lds, w, a, nr, nc, 4);
}

static void gemv_rows_8x8(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			  int nr, int nc)
{
	gemv_rows_layout(k, s, lds, w, a, nr, nc, 8);
}

/* --- GEMM: smmla, four activation rows per group ----------------------- */

/*
 * The activation scales of a GEMM pass, converted once per pass and chunk
 * of K into the order the inner loop reads them (for each block, each
 * group's scales in tile order, below) instead of once per weight row
 * group: four conversions and zips per group and block become one load.
 * KC blocks per chunk keep this at 12 KiB of stack (one chunk for K up to
 * 4096); between chunks the partial sums wait in S.
 */
#define KC 128

struct act_chunk {
	float sc[KC * GEMM_SET * 8];
};

/* Scales of blocks B0 .. B0+KB-1 of groups A[0..N-1] (NB blocks each) into C. */
INLINE void act_scales(struct act_chunk *c, const struct qg_block_q8_0x4 *a, int nb, int b0, int kb,
		       const int N)
{
	float *f = c->sc;

	for (int l = b0; l < b0 + kb; l++) {
		UNROLL
		for (int g = 0; g < N; g++, f += 8) {
			const float32x4_t da = qg_arm_f16x4(a[(size_t)g * nb + l].d);
			/* a tile of rows 0,1 takes [a0 a0 a1 a1], of rows 2,3 [a2 a2 a3 a3] */
			vst1q_f32(f, vzip1q_f32(da, da));
			vst1q_f32(f + 4, vzip2q_f32(da, da));
		}
	}
}

/*
 * One view (four weight rows) against N groups of four activation rows
 * (N constant, at most GEMM_SET), for KB blocks from chunk C.  For each
 * group and block, four int32 tiles of 2x2 outputs: T0 = rows 0,1 x
 * weights 0,1, T1 = rows 0,1 x weights 2,3, T2 and T3 the same for rows
 * 2,3, each four smmla (one per 8-value chunk; the register of chunk c and
 * row pair P is qs[32c + 16P ..]).  The float accumulators keep the tile
 * order, so a tile's scale is [a0 a0 a1 a1] * [w0 w1 w0 w1]: two dups per
 * view and block, one multiply per tile.  Rows are put back in order when
 * they are stored.  FIRST: start from zero, else from what S holds.
 */
INLINE void gemm_view(int kb, float *restrict s, size_t lds, const uint8_t *w, struct qg_arm_wview vw,
		      const struct qg_block_q8_0x4 *a, int nb, const struct act_chunk *c, int first,
		      const int N)
{
	const uint8x16_t mask = vdupq_n_u8(0xf0);
	const int8_t *aq[GEMM_SET];
	const float *af = c->sc;
	float32x4_t acc[GEMM_SET][4];

	UNROLL
	for (int g = 0; g < N; g++) {
		UNROLL
		for (int h = 0; h < 2; h++) {
			if (first) {
				acc[g][2 * h] = acc[g][2 * h + 1] = vdupq_n_f32(0.0f);
			} else {
				const float *sr = s + (size_t)(4 * g + 2 * h) * lds;
				const float64x2_t r0 = vreinterpretq_f64_f32(vld1q_f32(sr));
				const float64x2_t r1 = vreinterpretq_f64_f32(vld1q_f32(sr + lds));
				acc[g][2 * h] = vreinterpretq_f32_f64(vzip1q_f64(r0, r1));
				acc[g][2 * h + 1] = vreinterpretq_f32_f64(vzip2q_f64(r0, r1));
			}
		}
	}
	UNROLL
	for (int g = 0; g < N; g++)
		aq[g] = a[(size_t)g * nb].qs;
	w += vw.q0off;
	vw = rebase(vw);
	for (int l = 0; l < kb; l++, w += vw.stride) {
		uint8x16_t q[4];
		load_view(w, vw, q);
		/* chunk c of weight pair P: x[2c + P]; chunks 0,1 low nibbles, 2,3 high */
		const int8x16_t x[8] = {
			qg_arm_lo16(q[0]), qg_arm_lo16(q[1]), qg_arm_lo16(q[2]), qg_arm_lo16(q[3]),
			qg_arm_hi16(q[0], mask), qg_arm_hi16(q[1], mask), qg_arm_hi16(q[2], mask),
			qg_arm_hi16(q[3], mask),
		};
		const float64x2_t wd = vreinterpretq_f64_f32(qg_arm_f16x4((const qg_fp16 *)(const void *)(w + vw.soff)));
		const float32x4_t w01 = vreinterpretq_f32_f64(vdupq_laneq_f64(wd, 0));
		const float32x4_t w23 = vreinterpretq_f32_f64(vdupq_laneq_f64(wd, 1));

		UNROLL
		for (int g = 0; g < N; g++) {
			const int8x16x4_t y0 = vld1q_s8_x4(aq[g]);
			int32x4_t t0 = vmmlaq_s32(vdupq_n_s32(0), y0.val[0], x[0]);
			int32x4_t t1 = vmmlaq_s32(vdupq_n_s32(0), y0.val[0], x[1]);
			int32x4_t t2 = vmmlaq_s32(vdupq_n_s32(0), y0.val[1], x[0]);
			int32x4_t t3 = vmmlaq_s32(vdupq_n_s32(0), y0.val[1], x[1]);
			t0 = vmmlaq_s32(t0, y0.val[2], x[2]);
			t1 = vmmlaq_s32(t1, y0.val[2], x[3]);
			t2 = vmmlaq_s32(t2, y0.val[3], x[2]);
			t3 = vmmlaq_s32(t3, y0.val[3], x[3]);
			const int8x16x4_t y1 = vld1q_s8_x4(aq[g] + 64);
			aq[g] += sizeof(struct qg_block_q8_0x4);
			t0 = vmmlaq_s32(t0, y1.val[0], x[4]);
			t1 = vmmlaq_s32(t1, y1.val[0], x[5]);
			t2 = vmmlaq_s32(t2, y1.val[1], x[4]);
			t3 = vmmlaq_s32(t3, y1.val[1], x[5]);
			t0 = vmmlaq_s32(t0, y1.val[2], x[6]);
			t1 = vmmlaq_s32(t1, y1.val[2], x[7]);
			t2 = vmmlaq_s32(t2, y1.val[3], x[6]);
			t3 = vmmlaq_s32(t3, y1.val[3], x[7]);

			const float32x4_t a01 = vld1q_f32(af), a23 = vld1q_f32(af + 4);
			af += 8;
			acc[g][0] = vfmaq_f32(acc[g][0], vcvtq_n_f32_s32(t0, 4), vmulq_f32(a01, w01));
			acc[g][1] = vfmaq_f32(acc[g][1], vcvtq_n_f32_s32(t1, 4), vmulq_f32(a01, w23));
			acc[g][2] = vfmaq_f32(acc[g][2], vcvtq_n_f32_s32(t2, 4), vmulq_f32(a23, w01));
			acc[g][3] = vfmaq_f32(acc[g][3], vcvtq_n_f32_s32(t3, 4), vmulq_f32(a23, w23));
		}
	}
	UNROLL
	for (int g = 0; g < N; g++) {
		UNROLL
		for (int h = 0; h < 2; h++) {
			/* tiles 2h, 2h+1: [r0w0 r0w1 r1w0 r1w1], [r0w2 r0w3 r1w2 r1w3] */
			float *sr = s + (size_t)(4 * g + 2 * h) * lds;
			const float64x2_t lo = vreinterpretq_f64_f32(acc[g][2 * h]);
			const float64x2_t hi = vreinterpretq_f64_f32(acc[g][2 * h + 1]);
			vst1q_f32(sr, vreinterpretq_f32_f64(vzip1q_f64(lo, hi)));
			vst1q_f32(sr + lds, vreinterpretq_f32_f64(vzip2q_f64(lo, hi)));
		}
	}
}

/*
 * N activation groups against NV views: view v of weight row group v / VPG
 * is half v % VPG (VPG = 1 for 4x8, 2 for 8x8), GB bytes per row group.
 */
INLINE void gemm_set(int nb, float *restrict s, size_t lds, const uint8_t *w, size_t gb, int nv,
		     const int VPG, const struct qg_block_q8_0x4 *a, const int N)
{
	struct act_chunk c;

	for (int b0 = 0; b0 < nb; b0 += KC) {
		const int kb = nb - b0 < KC ? nb - b0 : KC;
		act_scales(&c, a, nb, b0, kb, N);
		for (int v = 0; v < nv; v++) {
			const uint8_t *wv = w + (size_t)(v / VPG) * gb;
			struct qg_arm_wview vw = VPG == 1 ? QG_ARM_VIEW_4X8 : QG_ARM_VIEW_8X8(v % VPG);
			wv += (size_t)b0 * vw.stride;
			gemm_view(kb, s + 4 * v, lds, wv, vw, a + b0, nb, &c, b0 == 0, N);
		}
	}
}

/* All NR/4 activation groups, GEMM_SET at a time (the rest by two or one). */
INLINE void gemm_layout(int k, float *restrict s, size_t lds, const void *restrict w,
			const void *restrict a, int nr, int nc, const int R)
{
	const int nb = k / QG_QK, ng = nr / 4;
	const size_t gb = GROUP_BYTES(nb, R);
	const struct qg_block_q8_0x4 *ag = a;
	int g = 0;

	for (; g + GEMM_SET <= ng; g += GEMM_SET)
		gemm_set(nb, s + (size_t)4 * g * lds, lds, w, gb, nc / 4, R / 4, ag + (size_t)g * nb, GEMM_SET);
	if (ng - g == 2)
		gemm_set(nb, s + (size_t)4 * g * lds, lds, w, gb, nc / 4, R / 4, ag + (size_t)g * nb, 2);
	else if (ng - g == 1)
		gemm_set(nb, s + (size_t)4 * g * lds, lds, w, gb, nc / 4, R / 4, ag + (size_t)g * nb, 1);
}

static void gemm_4x8(int k, float *restrict s, size_t lds, const void *restrict w,
		     const void *restrict a, int nr, int nc)
{
	gemm_layout(k, s, lds, w, a, nr, nc, 4);
}

static void gemm_8x8(int k, float *restrict s, size_t lds, const void *restrict w,
		     const void *restrict a, int nr, int nc)
{
	gemm_layout(k, s, lds, w, a, nr, nc, 8);
}

/* --- activation quantizers: kernels-arm.h's NEON code, same bytes as quant.c --- */

QG_ARM_QUANT_ENTRIES()

const struct qg_kernel qg_kernels_i8mm[QG_LAYOUT_COUNT] = {
	[QG_LAYOUT_4X8] = {
		.name = "i8mm 4x8", .family = QG_KF_I8MM,
		.gemv = gemv_4x8, .gemv_rows = gemv_rows_4x8, .gemm = gemm_4x8, .act_ileave = 8,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
	[QG_LAYOUT_8X8] = {
		.name = "i8mm 8x8", .family = QG_KF_I8MM,
		.gemv = gemv_8x8, .gemv_rows = gemv_rows_8x8, .gemm = gemm_8x8, .act_ileave = 8,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
};
