/*
 * kquant-arm.h - the aarch64 K-quant dot products, written once for a
 * 16-byte signed dot step that each family supplies: sdot where the CPU
 * has it (kquant-dotprod.c), widening multiplies and pairwise adds where
 * it has only the base NEON set (kquant-neon.c).
 *
 * Codes enter the step as signed bytes: Q4_K's 0..15 as they are, Q6_K's
 * code - 32 in -32..31.  Each sub-block's lanes are exact in int32, are
 * multiplied by its scale in integers (vmla) and summed once per
 * super-block, so the super-block's integer part equals the reference's;
 * the float part is qg_kq_accum, and the files
 * that include this are built without contraction, so the result is the
 * portable kernel's bit for bit.
 *
 * Also the pieces the GEMMs (kquant-gemm-dotprod.c, kquant-gemm-i8mm.c)
 * build their weight tiles from: four rows' words transposed, four rows'
 * scales, mins and fp16 scales decoded at once, Q6_K's codes.
 */
#ifndef QG_KQUANT_ARM_H
#define QG_KQUANT_ARM_H

#include <arm_neon.h>
#include <stddef.h>

#include "kernels.h"
#include "kquant.h"

/* kquant-gemm-dotprod.c, kquant-gemm-i8mm.c: the families' qg_kq_gemm_fn */
void qg_kq_gemm_q4_K_dotprod(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride,
			     int nc, const void *restrict a, int nr);
void qg_kq_gemm_q6_K_dotprod(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride,
			     int nc, const void *restrict a, int nr);
void qg_kq_gemm_q4_K_i8mm(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride, int nc,
			  const void *restrict a, int nr);
void qg_kq_gemm_q6_K_i8mm(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride, int nc,
			  const void *restrict a, int nr);
/* and their qg_q8_0_gemm_fn */
void qg_kq_gemm_q8_0_dotprod(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride,
			     int nc, const void *restrict a, const struct qg_q8_0_aux *restrict aux, int nr);
void qg_kq_gemm_q8_0_i8mm(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride, int nc,
			  const void *restrict a, const struct qg_q8_0_aux *restrict aux, int nr);
/* kquant-gemv-neon.c: the NEON family's qg_kq_gemv_fn */
void qg_kq_gemv_q4_K_neon(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
			  const void *restrict a);
void qg_kq_gemv_q6_K_neon(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
			  const void *restrict a);
void qg_kq_gemv_q8_0_neon(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
			  const void *restrict a);
/* kquant-gemv-dotprod.c: the dotprod and i8mm families' */
void qg_kq_gemv_q4_K_dotprod(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
			     const void *restrict a);
void qg_kq_gemv_q6_K_dotprod(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
			     const void *restrict a);
void qg_kq_gemv_q8_0_dotprod(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
			     const void *restrict a);
/* kquant-gemv-dotprod.c and kquant-gemm-dotprod.c: the dotprod family's Q8_0_4X4 kernels */
void qg_kq_gemv_q8_0_4x4_dotprod(int64_t k, float *restrict s, const void *restrict w, size_t wstride, int nc,
				 const void *restrict a);
void qg_kq_gemm_q8_0_4x4_dotprod(int64_t k, float *restrict s, size_t lds, const void *restrict w, size_t wstride,
				 int nc, const struct qg_q8_0x4_act *restrict a, int nr);

#if defined(__ARM_FEATURE_DOTPROD)
/* The dotprod and i8mm families' 16-byte step: one sdot. */
static inline int32x4_t kq_arm_sdot16(int32x4_t acc, int8x16_t x, int8x16_t y)
{
	return vdotq_s32(acc, x, y);
}

/* Their Q8_0 block step: two sdot. */
static inline int32x4_t kq_arm_sdot32(int8x16_t w0, int8x16_t w1, int8x16_t a0, int8x16_t a1)
{
	return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, a0), w1, a1);
}
#endif

/* ACC plus, in some order over its four lanes, the sum of the 16 products X[i] * Y[i]. */
typedef int32x4_t (*kq_arm_dot16)(int32x4_t acc, int8x16_t x, int8x16_t y);

/*
 * R activation rows (row r at A + r * NBA super-blocks) against one Q4_K
 * weight row: the weights are unpacked once per 32 bytes and met by
 * every row, and each row's sums are formed as with one row, so OUT[r]
 * is the one-row result bit for bit.
 */
static inline __attribute__((always_inline)) void kq_arm_q4_K(int64_t k, const void *restrict vw,
							     const void *restrict va, int64_t nba, int R,
							     float *out, kq_arm_dot16 dot)
{
	const struct qg_block_q4_K *w = vw;
	const struct qg_block_q8_K *a = va;
	const uint8x16_t low4 = vdupq_n_u8(0x0f);
	float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };

	for (int64_t b = 0; b < k / QG_QK_K; b++) {
		uint8_t sc[8], mn[8];
		for (int j = 0; j < 8; j++)
			qg_q4_K_scale_min(j, w[b].scales, &sc[j], &mn[j]);
		/* the mins as int16, against the sums of each sub-block's two block sums */
		const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
		int32x4_t iv[4];
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
			iv[r] = vdupq_n_s32(0);
		for (int c = 0; c < 4; c++) {
			const uint8x16_t q0 = vld1q_u8(w[b].qs + 32 * c), q1 = vld1q_u8(w[b].qs + 32 * c + 16);
			const int8x16_t l0 = vreinterpretq_s8_u8(vandq_u8(q0, low4));
			const int8x16_t l1 = vreinterpretq_s8_u8(vandq_u8(q1, low4));
			const int8x16_t h0 = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4));
			const int8x16_t h1 = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
			#pragma GCC unroll 4
			for (int r = 0; r < R; r++) {
				const int8_t *ap = a[r * nba + b].qs + 64 * c;
				int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
				lo = dot(lo, l0, vld1q_s8(ap));
				lo = dot(lo, l1, vld1q_s8(ap + 16));
				hi = dot(hi, h0, vld1q_s8(ap + 32));
				hi = dot(hi, h1, vld1q_s8(ap + 48));
				/* each sub-block's lanes times its scale: exact in int32, summed once at the end */
				iv[r] = vmlaq_n_s32(iv[r], lo, sc[2 * c]);
				iv[r] = vmlaq_n_s32(iv[r], hi, sc[2 * c + 1]);
			}
		}
		int32_t isum[4], msum[4];
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			const int16_t *bs = a[r * nba + b].bsums;
			const int16x8_t pairs = vpaddq_s16(vld1q_s16(bs), vld1q_s16(bs + 8));
			const int32x4_t m = vmlal_s16(vmull_s16(vget_low_s16(pairs), vget_low_s16(mins)),
						      vget_high_s16(pairs), vget_high_s16(mins));
			isum[r] = vaddvq_s32(iv[r]);
			msum[r] = vaddvq_s32(m);
		}
		const float wd = qg_fp16_to_fp32(w[b].d), wm = qg_fp16_to_fp32(w[b].dmin);
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			const float ad = a[r * nba + b].d;
			acc[r] = qg_kq_accum(acc[r], wd * ad, wm * ad, isum[r], msum[r]);
		}
	}
	for (int r = 0; r < R; r++)
		out[r] = acc[r];
}

/* R activation rows against one Q6_K weight row, as kq_arm_q4_K does for Q4_K. */
static inline __attribute__((always_inline)) void kq_arm_q6_K(int64_t k, const void *restrict vw,
							     const void *restrict va, int64_t nba, int R,
							     float *out, kq_arm_dot16 dot)
{
	const struct qg_block_q6_K *w = vw;
	const struct qg_block_q8_K *a = va;
	const uint8x16_t low4 = vdupq_n_u8(0x0f), bits45 = vdupq_n_u8(0x30);
	const int8x16_t off = vdupq_n_s8(32);
	float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };

	for (int64_t b = 0; b < k / QG_QK_K; b++) {
		const int8_t *sc = w[b].scales;
		int32x4_t iv[4];
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
			iv[r] = vdupq_n_s32(0);
		for (int h = 0; h < 2; h++) {
			for (int half = 0; half < 2; half++) {
				/* values l = 16 * half .. 16 * half + 15 of each quarter q */
				const int o = 16 * half;
				const uint8x16_t ql0 = vld1q_u8(w[b].ql + 64 * h + o);
				const uint8x16_t ql1 = vld1q_u8(w[b].ql + 64 * h + 32 + o);
				const uint8x16_t qh = vld1q_u8(w[b].qh + 32 * h + o);
				uint8x16_t u[4];
				u[0] = vorrq_u8(vandq_u8(ql0, low4), vandq_u8(vshlq_n_u8(qh, 4), bits45));
				u[1] = vorrq_u8(vandq_u8(ql1, low4), vandq_u8(vshlq_n_u8(qh, 2), bits45));
				u[2] = vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, bits45));
				u[3] = vorrq_u8(vshrq_n_u8(ql1, 4), vandq_u8(vshrq_n_u8(qh, 2), bits45));
				for (int q = 0; q < 4; q++) {
					const int8x16_t codes = vsubq_s8(vreinterpretq_s8_u8(u[q]), off);
					const int s = sc[8 * h + 2 * q + half];
					#pragma GCC unroll 4
					for (int r = 0; r < R; r++) {
						const int8x16_t av = vld1q_s8(a[r * nba + b].qs + 128 * h + 32 * q + o);
						iv[r] = vmlaq_n_s32(iv[r], dot(vdupq_n_s32(0), codes, av), s);
					}
				}
			}
		}
		const float wd = qg_fp16_to_fp32(w[b].d);
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
			acc[r] = qg_kq_accum(acc[r], wd * a[r * nba + b].d, 0.0f, vaddvq_s32(iv[r]), 0);
	}
	for (int r = 0; r < R; r++)
		out[r] = acc[r];
}

/* An fp16 scale to float by the hardware (ldr h, fcvt): exact, so qg_fp16_to_fp32's value. */
static inline float kq_arm_h2f(const qg_fp16 *p)
{
	return (float)*(const __fp16 *)(const void *)p;
}

/*
 * One Q8_0 block's 32 products (weights W0, W1 against activations A0,
 * A1) as four int32 lanes whose sum is the block's exact dot product.
 */
typedef int32x4_t (*kq_arm_dot32)(int8x16_t w0, int8x16_t w1, int8x16_t a0, int8x16_t a1);

/*
 * R activation rows (row r at A + r * NBA blocks) against one Q8_0 weight
 * row: per block the exact int32 sum, then qg_vec_dot_q8_0_q8_0's float
 * steps (sum += sumi * (dw * da)) in its order, so OUT[r] is its bits.
 */
static inline __attribute__((always_inline)) void kq_arm_q8_0(int64_t k, const void *restrict vw,
							     const void *restrict va, int64_t nba, int R,
							     float *out, kq_arm_dot32 dot)
{
	const struct qg_block_q8_0 *w = vw;
	const struct qg_block_q8_0 *a = va;
	float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };

	for (int64_t b = 0; b < k / QG_QK; b++) {
		const int8x16_t w0 = vld1q_s8(w[b].qs), w1 = vld1q_s8(w[b].qs + 16);
		const float dw = kq_arm_h2f(&w[b].d);
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			const struct qg_block_q8_0 *ab = &a[r * nba + b];
			const int32_t sumi = vaddvq_s32(dot(w0, w1, vld1q_s8(ab->qs), vld1q_s8(ab->qs + 16)));
			acc[r] += (float)sumi * (dw * kq_arm_h2f(&ab->d));
		}
	}
	for (int r = 0; r < R; r++)
		out[r] = acc[r];
}

/* --- several weight rows at once: the GEMMs' tiles, the GEMVs' lanes ---- */

#define KQ_ARM_INLINE static inline __attribute__((always_inline))

/*
 * The 16 bytes at OFF of rows ROW[0..3] as four vectors, V[m] holding
 * bytes 4m .. 4m + 3 of row r in 32-bit lane r.
 */
KQ_ARM_INLINE void kq_arm_transpose4(const uint8_t *const row[4], size_t off, uint8x16_t v[4])
{
	const uint32x4_t x0 = vreinterpretq_u32_u8(vld1q_u8(row[0] + off));
	const uint32x4_t x1 = vreinterpretq_u32_u8(vld1q_u8(row[1] + off));
	const uint32x4_t x2 = vreinterpretq_u32_u8(vld1q_u8(row[2] + off));
	const uint32x4_t x3 = vreinterpretq_u32_u8(vld1q_u8(row[3] + off));
	const uint64x2_t t0 = vreinterpretq_u64_u32(vtrn1q_u32(x0, x1)), t1 = vreinterpretq_u64_u32(vtrn2q_u32(x0, x1));
	const uint64x2_t t2 = vreinterpretq_u64_u32(vtrn1q_u32(x2, x3)), t3 = vreinterpretq_u64_u32(vtrn2q_u32(x2, x3));

	v[0] = vreinterpretq_u8_u64(vtrn1q_u64(t0, t2));
	v[1] = vreinterpretq_u8_u64(vtrn1q_u64(t1, t3));
	v[2] = vreinterpretq_u8_u64(vtrn2q_u64(t0, t2));
	v[3] = vreinterpretq_u8_u64(vtrn2q_u64(t1, t3));
}

/* The GEMVs' row groups: rows ROW[0..N-1] from row C0 of W, the last of NC repeated past it. */
KQ_ARM_INLINE void kq_arm_group_rows(const uint8_t *w, size_t wstride, int c0, int nc, int n, const uint8_t **row)
{
	for (int r = 0; r < n; r++)
		row[r] = w + (size_t)(c0 + r < nc ? c0 + r : nc - 1) * wstride;
}

/* The first N lanes of V to S (N < 4: a group's tail). */
KQ_ARM_INLINE void kq_arm_store_lanes(float *s, float32x4_t v, int n)
{
	if (n >= 4) {
		vst1q_f32(s, v);
	} else {
		float t[4];
		vst1q_f32(t, v);
		for (int r = 0; r < n; r++)
			s[r] = t[r];
	}
}

/* Byte J of each 32-bit lane of V, zero-extended: a table lookup whose out-of-range indices give 0. */
KQ_ARM_INLINE int32x4_t kq_arm_byte_lanes(uint8x16_t v, int j)
{
	const uint8x16_t idx = vreinterpretq_u8_u32(vdupq_n_u32(0xffffff00u | (uint32_t)j) +
						     (uint32x4_t){ 0, 4, 8, 12 });

	return vreinterpretq_s32_u8(vqtbl1q_u8(v, idx));
}

/* The head of four rows' Q4_K super-blocks, lane r (bytes 4r .. 4r + 3) row r's. */
struct kq_arm_q4_K_head {
	int32x4_t sc[8];	/* the eight scales */
	uint8x16_t mn[2];	/* byte 4r + j: min j (MN[0]) and min 4 + j (MN[1]) */
	uint8x16_t sb[2];	/* the scales as bytes, as MN */
	float32x4_t d, dmin;
};

/*
 * The Q4_K super-blocks at OFF of rows ROW[0..3]: their first 16 bytes,
 * transposed, are d and dmin (word 0) and the 12 scale bytes (words 1-3).
 * Scales 0-3 and mins 0-3 are the low six bits of words 1 and 2; scales
 * and mins 4-7 the nibbles of word 3 with their top two bits in bits 6-7
 * of words 1 and 2 (qg_q4_K_scale_min, four rows at once).
 */
KQ_ARM_INLINE void kq_arm_q4_K_head(const uint8_t *const row[4], size_t off, struct kq_arm_q4_K_head *h)
{
	const uint8x16_t low4 = vdupq_n_u8(0x0f), m63 = vdupq_n_u8(0x3f), m48 = vdupq_n_u8(0x30);
	uint8x16_t y[4];

	kq_arm_transpose4(row, off, y);
	const uint32x4_t dd = vreinterpretq_u32_u8(y[0]);
	h->d = vcvt_f32_f16(vreinterpret_f16_u16(vmovn_u32(dd)));
	h->dmin = vcvt_f32_f16(vreinterpret_f16_u16(vshrn_n_u32(dd, 16)));
	const uint8x16_t sl = vandq_u8(y[1], m63);
	const uint8x16_t sh = vorrq_u8(vandq_u8(y[3], low4), vandq_u8(vshrq_n_u8(y[1], 2), m48));
	h->mn[0] = vandq_u8(y[2], m63);
	h->mn[1] = vorrq_u8(vshrq_n_u8(y[3], 4), vandq_u8(vshrq_n_u8(y[2], 2), m48));
	h->sb[0] = sl;
	h->sb[1] = sh;
	#pragma GCC unroll 4
	for (int j = 0; j < 4; j++) {
		h->sc[j] = kq_arm_byte_lanes(sl, j);
		h->sc[4 + j] = kq_arm_byte_lanes(sh, j);
	}
}

/* The sixteen int8 scales (SC) and d of the Q6_K super-blocks at OFF of rows ROW[0..3], lane r row r's. */
KQ_ARM_INLINE void kq_arm_q6_K_head(const uint8_t *const row[4], size_t off, int32x4_t sc[16], float32x4_t *d)
{
	const size_t od = off + offsetof(struct qg_block_q6_K, d);
	uint8x16_t y[4];

	/* word w holds scales 4w .. 4w + 3: byte e to the top, then down with its sign */
	kq_arm_transpose4(row, off + offsetof(struct qg_block_q6_K, scales), y);
	#pragma GCC unroll 4
	for (int w = 0; w < 4; w++) {
		const int32x4_t x = vreinterpretq_s32_u8(y[w]);
		sc[4 * w] = vshrq_n_s32(vshlq_n_s32(x, 24), 24);
		sc[4 * w + 1] = vshrq_n_s32(vshlq_n_s32(x, 16), 24);
		sc[4 * w + 2] = vshrq_n_s32(vshlq_n_s32(x, 8), 24);
		sc[4 * w + 3] = vshrq_n_s32(x, 24);
	}
	uint16x4_t h = vdup_n_u16(0);
	h = vld1_lane_u16((const uint16_t *)(const void *)(row[0] + od), h, 0);
	h = vld1_lane_u16((const uint16_t *)(const void *)(row[1] + od), h, 1);
	h = vld1_lane_u16((const uint16_t *)(const void *)(row[2] + od), h, 2);
	h = vld1_lane_u16((const uint16_t *)(const void *)(row[3] + od), h, 3);
	*d = vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/*
 * Q6_K codes - 32, as signed bytes, of 16 values l .. l + 15 of each
 * quarter q of a half (value 128h + 32q + l) from the 16 bytes L0 at
 * ql[64h + l], L1 at ql[64h + 32 + l] and HB at qh[32h + l]: the low four
 * bits are L0's (q = 0) or L1's (q = 1) low nibbles, their high nibbles
 * for q = 2, 3; the top two HB's bits 2q.  A nibble and two bits are
 * joined by one shift-and-insert, the bits above six masked off.  The
 * operations are bytewise, so the bytes may be in any order.
 */
KQ_ARM_INLINE void kq_arm_q6_K_codes(uint8x16_t l0, uint8x16_t l1, uint8x16_t hb, uint8x16_t c[4])
{
	const uint8x16_t low6 = vdupq_n_u8(0x3f), bias = vdupq_n_u8(32);
	const uint8x16_t h2 = vshrq_n_u8(hb, 2);

	c[0] = vsubq_u8(vandq_u8(vsliq_n_u8(l0, hb, 4), low6), bias);
	c[1] = vsubq_u8(vandq_u8(vsliq_n_u8(l1, h2, 4), low6), bias);
	c[2] = vsubq_u8(vandq_u8(vsriq_n_u8(hb, l0, 4), low6), bias);
	c[3] = vsubq_u8(vandq_u8(vsriq_n_u8(h2, l1, 4), low6), bias);
}

/*
 * The base NEON set's Q8_0 block step: products in int16 (smull, smlal2:
 * two products of |w| <= 128 and |a| <= 127 are at most 32512), widened
 * by pairwise adds.  Activations are in -127..127 as the kernels ask.
 */
static inline int32x4_t kq_arm_mull32(int8x16_t w0, int8x16_t w1, int8x16_t a0, int8x16_t a1)
{
	const int16x8_t p0 = vmlal_high_s8(vmull_s8(vget_low_s8(w0), vget_low_s8(a0)), w0, a0);
	const int16x8_t p1 = vmlal_high_s8(vmull_s8(vget_low_s8(w1), vget_low_s8(a1)), w1, a1);

	return vpadalq_s16(vpaddlq_s16(p0), p1);
}

/* One family's entries (DOT its 16-byte step): one row, and four rows per weight load. */
#define KQ_ARM_ENTRIES(dot)                                                                              \
	static float dot_q4_K(int64_t k, const void *restrict w, const void *restrict a)                 \
	{                                                                                                 \
		float out;                                                                                \
		kq_arm_q4_K(k, w, a, 0, 1, &out, dot);                                                    \
		return out;                                                                               \
	}                                                                                                 \
	static void dot4_q4_K(int64_t k, const void *restrict w, const void *restrict a, int64_t nba,    \
			      float *restrict out)                                                        \
	{                                                                                                 \
		kq_arm_q4_K(k, w, a, nba, 4, out, dot);                                                   \
	}                                                                                                 \
	static float dot_q6_K(int64_t k, const void *restrict w, const void *restrict a)                 \
	{                                                                                                 \
		float out;                                                                                \
		kq_arm_q6_K(k, w, a, 0, 1, &out, dot);                                                    \
		return out;                                                                               \
	}                                                                                                 \
	static void dot4_q6_K(int64_t k, const void *restrict w, const void *restrict a, int64_t nba,    \
			      float *restrict out)                                                        \
	{                                                                                                 \
		kq_arm_q6_K(k, w, a, nba, 4, out, dot);                                                   \
	}

/*
 * A family's Q4_K and Q6_K GEMVs (qg_kq_gemv_fn, named qg_kq_gemv_q4_K_FAMILY
 * and _q6_K_FAMILY) from its four-row kernels gemv4_q4_K and gemv4_q6_K
 * (four weight rows, lane r row r's sum, against one activation row): NC
 * rows four at a time, the last group's missing rows the last row again,
 * computed and not stored.
 */
#define KQ_ARM_GEMV_ENTRIES(family)                                                                      \
	static void gemv_kq(const int q6, int64_t k, float *restrict s, const void *restrict w,          \
			    size_t wstride, int nc, const void *restrict a)                               \
	{                                                                                                 \
		for (int c0 = 0; c0 < nc; c0 += 4) {                                                      \
			const uint8_t *row[4];                                                            \
			kq_arm_group_rows(w, wstride, c0, nc, 4, row);                                    \
			kq_arm_store_lanes(s + c0, q6 ? gemv4_q6_K(row, a, k / QG_QK_K)                   \
						      : gemv4_q4_K(row, a, k / QG_QK_K), nc - c0);        \
		}                                                                                         \
	}                                                                                                 \
	void qg_kq_gemv_q4_K_##family(int64_t k, float *restrict s, const void *restrict w, size_t wstride, \
				      int nc, const void *restrict a)                                     \
	{                                                                                                 \
		gemv_kq(0, k, s, w, wstride, nc, a);                                                      \
	}                                                                                                 \
	void qg_kq_gemv_q6_K_##family(int64_t k, float *restrict s, const void *restrict w, size_t wstride, \
				      int nc, const void *restrict a)                                     \
	{                                                                                                 \
		gemv_kq(1, k, s, w, wstride, nc, a);                                                      \
	}

/* The same for Q8_0 weights and activations (DOT32 the family's block step). */
#define KQ_ARM_Q8_0_ENTRIES(dot32)                                                                       \
	static float dot_q8_0(int64_t k, const void *restrict w, const void *restrict a)                 \
	{                                                                                                 \
		float out;                                                                                \
		kq_arm_q8_0(k, w, a, 0, 1, &out, dot32);                                                  \
		return out;                                                                               \
	}                                                                                                 \
	static void dot4_q8_0(int64_t k, const void *restrict w, const void *restrict a, int64_t nba,    \
			      float *restrict out)                                                        \
	{                                                                                                 \
		kq_arm_q8_0(k, w, a, nba, 4, out, dot32);                                                 \
	}

#endif /* QG_KQUANT_ARM_H */
