/*
 * kernels-arm.h - inline helpers shared by the aarch64 kernel files.
 *
 * Everything here is plain NEON (armv8-a), so every aarch64 kernel file may
 * include it whatever its own -march flags.  Nothing here is exported: each
 * kernel file gets its own copy of what it uses.
 *
 * Weight nibbles: the interleaved Q4_0 layouts store each byte XOR 0x88, so
 * a byte B read as int8 has the signed high nibble in its top four bits and
 * the signed low nibble in its bottom four.  (int8)(B << 4) is the low value
 * times 16 and (int8)(B & 0xF0) the high value times 16: two instructions per
 * 16 bytes, and a dot product of those with int8 activations is exactly 16
 * times the true one, which vcvtq_n_f32_s32(x, 4) divides out for free in the
 * int-to-float conversion (exact: |sum| < 2^24).
 */
#ifndef QG_KERNELS_ARM_H
#define QG_KERNELS_ARM_H

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"

#define QG_ARM_INLINE static inline __attribute__((always_inline))

/*
 * 64 zero bytes: "ld1 {v28.4s-v31.4s}" from here clears four accumulators
 * in one instruction where four movi would take four.
 */
static const int32_t qg_arm_zero64[16] __attribute__((aligned(64), unused));

/* Four fp16 scales at P (any alignment) as floats: one load, one fcvtl. */
QG_ARM_INLINE float32x4_t qg_arm_f16x4(const qg_fp16 *p)
{
	return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

/* One fp16 scale as a float (ldr h + fcvt). */
QG_ARM_INLINE float qg_arm_f16(const qg_fp16 *p)
{
	__fp16 h;

	memcpy(&h, p, sizeof h);
	return (float)h;
}

/* Low nibbles of 16 weight bytes, times 16, as int8. */
QG_ARM_INLINE int8x16_t qg_arm_lo16(uint8x16_t b)
{
	return vreinterpretq_s8_u8(vshlq_n_u8(b, 4));
}

/* High nibbles of 16 weight bytes, times 16, as int8 (MASK is 0xF0 in every byte). */
QG_ARM_INLINE int8x16_t qg_arm_hi16(uint8x16_t b, uint8x16_t mask)
{
	return vreinterpretq_s8_u8(vandq_u8(b, mask));
}

/*
 * Where one 4-row group of a weight block lives: scales at byte SOFF of the
 * block, chunk 0 and chunk 1 of the 8-byte interleave at Q0OFF and Q1OFF
 * (for the 4x4 layout Q0OFF is the start of 64 bytes), blocks STRIDE bytes
 * apart.  An 8x8 row group is two of these.
 */
struct qg_arm_wview {
	int soff, q0off, q1off, stride;
};

#define QG_ARM_VIEW_4X4 ((struct qg_arm_wview){ 0, 8, 40, 72 })
#define QG_ARM_VIEW_4X8 ((struct qg_arm_wview){ 0, 8, 40, 72 })
#define QG_ARM_VIEW_8X8(h) ((struct qg_arm_wview){ 8 * (h), 16 + 32 * (h), 80 + 32 * (h), 144 })

/*
 * Activation quantization, the same bytes as quant.c's: scale
 * fp16(amax / 127), codes round-half-away(x * (1/d)) where |x/d| <= 127.5,
 * else 0.  A block that holds a NaN goes to the portable code, whose choice
 * among several NaN payloads a reduction tree would not reproduce.
 */

/* Largest |x| of 32 floats (NaN if any is). */
QG_ARM_INLINE float32x4_t qg_arm_amax32(const float32x4_t v[8])
{
	float32x4_t m0 = vmaxq_f32(vabsq_f32(v[0]), vabsq_f32(v[1]));
	float32x4_t m1 = vmaxq_f32(vabsq_f32(v[2]), vabsq_f32(v[3]));
	float32x4_t m2 = vmaxq_f32(vabsq_f32(v[4]), vabsq_f32(v[5]));
	float32x4_t m3 = vmaxq_f32(vabsq_f32(v[6]), vabsq_f32(v[7]));

	return vmaxq_f32(vmaxq_f32(m0, m1), vmaxq_f32(m2, m3));
}

/* 32 floats times ID, rounded half away from zero, 0 out of [-127.5, 127.5]. */
QG_ARM_INLINE int8x16x2_t qg_arm_codes32(const float32x4_t v[8], float32x4_t id)
{
	const float32x4_t lim = vdupq_n_f32(127.5f);
	int32x4_t c[8];
	int8x16x2_t r;

	for (int i = 0; i < 8; i++) {
		float32x4_t x = vmulq_f32(v[i], id);
		/* facge is false for NaN, so NaN and overflow both give 0 */
		c[i] = vandq_s32(vcvtaq_s32_f32(x), vreinterpretq_s32_u32(vcaleq_f32(x, lim)));
	}
	/* narrow by keeping the low halves (128 wraps to -128, as the cast does) */
	for (int i = 0; i < 2; i++) {
		int16x8_t h0 = vuzp1q_s16(vreinterpretq_s16_s32(c[4 * i]), vreinterpretq_s16_s32(c[4 * i + 1]));
		int16x8_t h1 = vuzp1q_s16(vreinterpretq_s16_s32(c[4 * i + 2]), vreinterpretq_s16_s32(c[4 * i + 3]));
		r.val[i] = vuzp1q_s8(vreinterpretq_s8_s16(h0), vreinterpretq_s8_s16(h1));
	}
	return r;
}

/* id = d ? 1/d : 0 for four scales. */
QG_ARM_INLINE float32x4_t qg_arm_inv(float32x4_t d)
{
	float32x4_t id = vdivq_f32(vdupq_n_f32(1.0f), d);

	return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(id), vceqzq_f32(d)));
}

QG_ARM_INLINE void qg_arm_quant_row(const float *x, struct qg_block_q8_0 *y, int64_t k)
{
	for (int64_t b = 0; b < k / QG_QK; b++, x += QG_QK) {
		float32x4_t v[8];
		for (int i = 0; i < 8; i++)
			v[i] = vld1q_f32(x + 4 * i);
		float amax = vmaxvq_f32(qg_arm_amax32(v));
		if (isnan(amax)) {
			qg_quantize_row_q8_0(x, &y[b], QG_QK);
			continue;
		}
		float32x4_t d = vdivq_f32(vdupq_n_f32(amax), vdupq_n_f32(127.0f));
		float16x4_t dh = vcvt_f16_f32(d);
		int8x16x2_t c = qg_arm_codes32(v, qg_arm_inv(d));

		vst1_lane_u16(&y[b].d, vreinterpret_u16_f16(dh), 0);
		vst1q_s8_x2(y[b].qs, c);
	}
}

QG_ARM_INLINE void qg_arm_quant_x4(const float *x, size_t ldx, struct qg_block_q8_0x4 *y,
				   int64_t k, int ileave)
{
	for (int64_t b = 0; b < k / QG_QK; b++) {
		float32x4_t v[4][8];
		float32x4_t amax;
		for (int r = 0; r < 4; r++)
			for (int i = 0; i < 8; i++)
				v[r][i] = vld1q_f32(x + r * ldx + b * QG_QK + 4 * i);
		/* the four rows' maxima in the four lanes */
		float32x4_t m0 = qg_arm_amax32(v[0]), m1 = qg_arm_amax32(v[1]);
		float32x4_t m2 = qg_arm_amax32(v[2]), m3 = qg_arm_amax32(v[3]);
		amax = vpmaxq_f32(vpmaxq_f32(m0, m1), vpmaxq_f32(m2, m3));
		/* NaN != NaN: the mask's lanes are all ones unless a row holds a NaN */
		if (vminvq_u32(vceqq_f32(amax, amax)) == 0) {
			qg_quantize_rows_q8_0x4(x + b * QG_QK, ldx, &y[b], QG_QK, ileave);
			continue;
		}
		float32x4_t d = vdivq_f32(amax, vdupq_n_f32(127.0f));
		float32x4_t id = qg_arm_inv(d);
		int8x16x2_t c[4];
		c[0] = qg_arm_codes32(v[0], vdupq_laneq_f32(id, 0));
		c[1] = qg_arm_codes32(v[1], vdupq_laneq_f32(id, 1));
		c[2] = qg_arm_codes32(v[2], vdupq_laneq_f32(id, 2));
		c[3] = qg_arm_codes32(v[3], vdupq_laneq_f32(id, 3));

		vst1_u16(y[b].d, vreinterpret_u16_f16(vcvt_f16_f32(d)));
		/*
		 * st4 stores element e of the four registers one after the
		 * other: with 4-byte (8-byte) elements that is exactly chunk e
		 * of rows 0..3, the interleave of block_q8_0x4.
		 */
		for (int h = 0; h < 2; h++) {
			if (ileave == 8) {
				int64x2x4_t t = { { vreinterpretq_s64_s8(c[0].val[h]), vreinterpretq_s64_s8(c[1].val[h]),
						    vreinterpretq_s64_s8(c[2].val[h]), vreinterpretq_s64_s8(c[3].val[h]) } };
				vst4q_s64((int64_t *)(y[b].qs + 64 * h), t);
			} else {
				int32x4x4_t t = { { vreinterpretq_s32_s8(c[0].val[h]), vreinterpretq_s32_s8(c[1].val[h]),
						    vreinterpretq_s32_s8(c[2].val[h]), vreinterpretq_s32_s8(c[3].val[h]) } };
				vst4q_s32((int32_t *)(y[b].qs + 64 * h), t);
			}
		}
	}
}

/*
 * Store four float vectors whose lane r belongs to output row r (vector j
 * holds column j): S[r*LDS + j], a 4x4 transpose by trn1/trn2.
 */
QG_ARM_INLINE void qg_arm_store_t4(float *s, size_t lds, float32x4_t c0, float32x4_t c1,
				   float32x4_t c2, float32x4_t c3)
{
	float32x4_t t0 = vtrn1q_f32(c0, c1), t1 = vtrn2q_f32(c0, c1);
	float32x4_t t2 = vtrn1q_f32(c2, c3), t3 = vtrn2q_f32(c2, c3);
	float64x2_t u0 = vreinterpretq_f64_f32(t0), u1 = vreinterpretq_f64_f32(t1);
	float64x2_t u2 = vreinterpretq_f64_f32(t2), u3 = vreinterpretq_f64_f32(t3);

	vst1q_f32(s, vreinterpretq_f32_f64(vtrn1q_f64(u0, u2)));
	vst1q_f32(s + lds, vreinterpretq_f32_f64(vtrn1q_f64(u1, u3)));
	vst1q_f32(s + 2 * lds, vreinterpretq_f32_f64(vtrn2q_f64(u0, u2)));
	vst1q_f32(s + 3 * lds, vreinterpretq_f32_f64(vtrn2q_f64(u1, u3)));
}

/*
 * A family's activation quantizers (quant_row and quant_x4, for its
 * struct qg_kernel): the NEON code above, built with the family's flags.
 */
#define QG_ARM_QUANT_ENTRIES()                                                                           \
	static void quant_row(const float *x, struct qg_block_q8_0 *y, int64_t k)                        \
	{                                                                                                 \
		qg_arm_quant_row(x, y, k);                                                                \
	}                                                                                                 \
	static void quant_x4(const float *x, size_t ldx, struct qg_block_q8_0x4 *y, int64_t k, int ileave) \
	{                                                                                                 \
		qg_arm_quant_x4(x, ldx, y, k, ileave);                                                    \
	}

/* A family's GEMM of layout LAYOUT, gemm_NAME (qg_gemm_fn), over its gemm(layout, k, s, lds, w, a, nr, nc). */
#define QG_ARM_GEMM_ENTRY(name, layout)                                                                  \
	static void gemm_##name(int k, float *restrict s, size_t lds, const void *restrict w,            \
				const void *restrict a, int nr, int nc)                                   \
	{                                                                                                 \
		gemm(layout, k, s, lds, w, a, nr, nc);                                                    \
	}

#endif /* QG_KERNELS_ARM_H */
