/*
 * fp16.h - IEEE binary16 <-> binary32, round to nearest even.
 *
 * Bit-exact with F16C's vcvtps2ph (imm 0) and with aarch64's fcvt, which are
 * what ggml uses, so scales written here equal ggml's on every CPU.  NaN
 * stays NaN (quiet), infinities stay infinite, overflow rounds to infinity.
 */
#ifndef QG_FP16_H
#define QG_FP16_H

#include <stdint.h>
#include <string.h>

static inline float qg_fp32_from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static inline uint32_t qg_fp32_to_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static inline float qg_fp16_to_fp32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;

	if (exp == 0x1f)	/* inf or nan */
		return qg_fp32_from_bits(sign | 0x7f800000u | (man << 13));
	if (exp == 0) {
		/* zero or subnormal: man * 2^-24, exact in float */
		float f = (float)man * 0x1p-24f;
		return sign ? -f : f;
	}
	return qg_fp32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t qg_fp32_to_fp16(float f)
{
	uint32_t x = qg_fp32_to_bits(f);
	uint32_t sign = (x >> 16) & 0x8000;
	uint32_t ax = x & 0x7fffffffu;

	if (ax >= 0x7f800000u)	/* inf or nan: keep nan quiet and non-zero */
		return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
	if (ax >= 0x477ff000u)	/* rounds to >= 65520: overflow to inf */
		return (uint16_t)(sign | 0x7c00);
	if (ax < 0x38800000u) {	/* below 2^-14: subnormal or zero */
		if (ax < 0x33000000u)	/* below 2^-25: rounds to zero */
			return (uint16_t)sign;
		uint32_t e = ax >> 23;
		uint32_t m = (ax & 0x7fffff) | 0x800000;
		uint32_t shift = 126 - e;	/* 14..24: bits dropped from m */
		uint32_t h = m >> shift;
		uint32_t rem = m & ((1u << shift) - 1);
		uint32_t half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	/* normal: rebias and round the 13 dropped bits to nearest even */
	uint32_t h = ((ax >> 13) - (112u << 10));
	uint32_t rem = ax & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++;	/* a carry into the exponent is the right answer */
	return (uint16_t)(sign | h);
}

/* Whether binary16 H is finite (not an infinity or a NaN). */
static inline int qg_fp16_is_finite(uint16_t h)
{
	return (h & 0x7c00) != 0x7c00;
}

#endif /* QG_FP16_H */
