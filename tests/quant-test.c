/*
 * quant-test.c - the quantized formats: golden bytes, round trips, the
 * importance matrix, edge cases and errors.
 *
 * Golden bytes were worked out by hand from ggml's reference code (the
 * derivations are in the comments); they avoid values that sit on a
 * rounding boundary, so they hold whether or not the compiler fuses
 * x * id + 8.5 into one multiply-add.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fp16.h"
#include "quant.h"
#include "tap.h"

static const enum qg_type q4_layouts[] = {
	QG_TYPE_Q4_0, QG_TYPE_Q4_0_4X4, QG_TYPE_Q4_0_4X8, QG_TYPE_Q4_0_8X8,
};
static const enum qg_type q8_layouts[] = {
	QG_TYPE_Q8_0, QG_TYPE_Q8_0_4X4, QG_TYPE_Q8_0_4X8,
};
#define QUANT_HASH 0x0216792937ceb668ULL	/* see test_cross_cpu() */
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		printf("Bail out! out of memory\n");
		exit(1);
	}
	return p;
}

static int bytes_eq(const void *a, const void *b, size_t n)
{
	return memcmp(a, b, n) == 0;
}

static void hexdiag(const char *what, const uint8_t *p, size_t n)
{
	char line[3 * 160 + 1];
	size_t o = 0;

	for (size_t i = 0; i < n && i < 160; i++)
		o += (size_t)snprintf(line + o, sizeof line - o, "%02x ", p[i]);
	line[o] = '\0';
	tap_diag("%s: %s", what, line);
}

static int check_bytes(const uint8_t *got, const uint8_t *want, size_t n, const char *name)
{
	int ok = tap_ok(bytes_eq(got, want, n), "%s", name);

	if (!ok) {
		hexdiag("got ", got, n);
		hexdiag("want", want, n);
	}
	return ok;
}

/* --- fp16 ---------------------------------------------------------------- */

static void test_fp16(void)
{
	static const struct {
		float f;
		uint16_t h;
		const char *what;
	} to16[] = {
		{ 1.0f, 0x3c00, "1" },
		{ -2.0f, 0xc000, "-2" },
		{ 0.0f, 0x0000, "+0" },
		{ -0.0f, 0x8000, "-0" },
		{ 65504.0f, 0x7bff, "largest finite" },
		{ 65519.0f, 0x7bff, "65519 rounds down to 65504" },
		{ 65520.0f, 0x7c00, "65520 (the halfway point) overflows to inf" },
		{ 1e10f, 0x7c00, "1e10 overflows to inf" },
		{ -1e10f, 0xfc00, "-1e10 overflows to -inf" },
		{ 0x1p-14f, 0x0400, "smallest normal" },
		{ 0x1p-24f, 0x0001, "smallest subnormal" },
		{ 3 * 0x1p-24f, 0x0003, "subnormal 3 * 2^-24" },
		{ 0x1p-25f, 0x0000, "2^-25: tie between 0 and 2^-24 goes to even 0" },
		{ 0x1.8p-25f, 0x0001, "1.5 * 2^-25 rounds up to 2^-24" },
		{ 0x1.8p-24f, 0x0002, "1.5 * 2^-24: tie goes to even 2 * 2^-24" },
		{ 0x1p-14f - 0x1p-25f, 0x0400, "halfway below 2^-14 rounds up into the normals" },
		{ 1e-10f, 0x0000, "1e-10 underflows to 0" },
		{ 1.0f + 0x1p-11f, 0x3c00, "1 + 2^-11: tie goes to even 1" },
		{ 1.0f + 0x1.8p-10f, 0x3c02, "1 + 3 * 2^-11: tie goes to even 1 + 2^-9" },
		{ 1.0f + 0x1p-11f + 0x1p-20f, 0x3c01, "just above the tie rounds up" },
		{ -3.875f, 0xc3c0, "-3.875" },
		{ 3.0f / 127.0f, 0x260c, "3/127" },
		{ 31.0f / 127.0f, 0x33d0, "31/127" },
	};
	int bad = 0;

	for (size_t i = 0; i < NELEM(to16); i++) {
		uint16_t h = qg_fp32_to_fp16(to16[i].f);
		if (!tap_ok(h == to16[i].h, "fp32 -> fp16: %s", to16[i].what))
			tap_diag("got 0x%04x, want 0x%04x", h, to16[i].h);
	}
	tap_ok(qg_fp32_to_fp16(INFINITY) == 0x7c00 && qg_fp32_to_fp16(-INFINITY) == 0xfc00,
	       "fp32 -> fp16: infinities stay infinite");
	uint16_t hn = qg_fp32_to_fp16(NAN);
	tap_ok((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0, "fp32 -> fp16: NaN stays NaN (0x%04x)", hn);
	tap_ok(qg_fp16_to_fp32(0x7bff) == 65504.0f && qg_fp16_to_fp32(0x0001) == 0x1p-24f &&
	       qg_fp16_to_fp32(0x03ff) == 1023 * 0x1p-24f && qg_fp16_to_fp32(0x3555) == 0x1.554p-2f &&
	       signbit(qg_fp16_to_fp32(0x8000)) && qg_fp16_to_fp32(0x8000) == 0.0f,
	       "fp16 -> fp32: hand-checked values");
	tap_ok(isinf(qg_fp16_to_fp32(0xfc00)) && qg_fp16_to_fp32(0xfc00) < 0 && isnan(qg_fp16_to_fp32(0x7e00)),
	       "fp16 -> fp32: -inf and NaN");
	/* every half converts to a float and back unchanged (NaNs stay NaN) */
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = qg_fp16_to_fp32((uint16_t)h);
		uint16_t back = qg_fp32_to_fp16(f);
		if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
			if (!isnan(f) || (back & 0x7c00) != 0x7c00 || !(back & 0x3ff))
				bad++;
		} else if (back != h) {
			bad++;
		}
	}
	tap_ok(bad == 0, "all 65536 halves round-trip through fp32 (%d bad)", bad);
	/* midpoints between neighbouring halves go to the even one */
	bad = 0;
	for (uint32_t h = 0; h < 0x7bff; h++) {
		double lo = qg_fp16_to_fp32((uint16_t)h), hi = qg_fp16_to_fp32((uint16_t)(h + 1));
		float mid = (float)((lo + hi) / 2);	/* exact in float */
		uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
		if (qg_fp32_to_fp16(mid) != want)
			bad++;
	}
	tap_ok(bad == 0, "every midpoint between positive halves rounds to even (%d bad)", bad);
}

/* --- type facts ---------------------------------------------------------- */

static void test_types(void)
{
	tap_ok(strcmp(qg_type_name(QG_TYPE_Q4_0_4X8), "q4_0_4x8") == 0 && qg_type_name(QG_TYPE_COUNT) == NULL &&
	       qg_type_name((enum qg_type)-1) == NULL, "type names");
	tap_ok(qg_type_from_name("q4_0") == QG_TYPE_Q4_0 && qg_type_from_name("Q4_0_8X8") == QG_TYPE_Q4_0_8X8 &&
	       qg_type_from_name("q4_0_4_4") == QG_TYPE_Q4_0_4X4 && qg_type_from_name("f16") == QG_TYPE_F16 &&
	       qg_type_from_name("q4_1") == -EINVAL && qg_type_from_name("") == -EINVAL &&
	       qg_type_from_name(NULL) == -EINVAL, "type from name");
	for (int t = 0; t < QG_TYPE_COUNT; t++)
		if (qg_type_from_name(qg_type_name((enum qg_type)t)) != t)
			tap_ok(0, "name of type %d does not map back", t);
	tap_ok(qg_row_size(QG_TYPE_Q4_0, 64) == 36 && qg_row_size(QG_TYPE_Q8_0, 32) == 34 &&
	       qg_row_size(QG_TYPE_F16, 3) == 6 && qg_row_size(QG_TYPE_F32, 5) == 20 &&
	       qg_row_size(QG_TYPE_Q4_0_8X8, 32) == 18 && qg_row_size(QG_TYPE_Q8_0_4X8, 64) == 68,
	       "row sizes");
	tap_ok(qg_row_size(QG_TYPE_Q4_0, 48) == -EINVAL && qg_row_size(QG_TYPE_Q4_0, 0) == -EINVAL &&
	       qg_row_size(QG_TYPE_F32, -1) == -EINVAL && qg_row_size(QG_TYPE_COUNT, 32) == -EINVAL &&
	       qg_row_size(QG_TYPE_Q8_0, INT64_MAX - 31) == -EOVERFLOW, "row size errors");
	tap_ok(qg_matrix_size(QG_TYPE_Q4_0_8X8, 8, 32) == 144 && qg_matrix_size(QG_TYPE_Q4_0_4X4, 4, 64) == 144 &&
	       qg_matrix_size(QG_TYPE_Q4_0_4X4, 6, 32) == -EINVAL && qg_matrix_size(QG_TYPE_Q4_0_8X8, 4, 32) == -EINVAL &&
	       qg_matrix_size(QG_TYPE_Q4_0, 0, 32) == -EINVAL &&
	       qg_matrix_size(QG_TYPE_F32, INT64_MAX / 2, 4) == -EOVERFLOW, "matrix sizes");
	tap_ok(qg_type_row_group(QG_TYPE_Q4_0_8X8) == 8 && qg_type_row_group(QG_TYPE_Q8_0_4X4) == 4 &&
	       qg_type_row_group(QG_TYPE_Q4_0) == 1 && qg_type_is_interleaved(QG_TYPE_Q4_0_4X8) &&
	       !qg_type_is_interleaved(QG_TYPE_Q8_0) && qg_type_is_weight(QG_TYPE_F16) &&
	       qg_type_is_weight(QG_TYPE_Q8_0_4X4) && !qg_type_is_weight(QG_TYPE_Q8_0_4X8) &&
	       qg_matrix_size(QG_TYPE_Q8_0_4X4, 4, 64) == 272 && qg_matrix_size(QG_TYPE_Q8_0_4X4, 6, 32) == -EINVAL,
	       "type facts (Q8_0_4X4 a weight layout of whole groups of four rows, Q8_0_4X8 activations only)");
}

/* --- golden bytes -------------------------------------------------------- */

static void test_golden_q4_0(void)
{
	float x[QG_QK];
	uint8_t got[18];

	/*
	 * 0..31: max 31, d = -31/8 = -3.875 (fp16 0xc3c0), code j =
	 * trunc(8.5 - j / 3.875): 8 8 7 7 7 7 6 6 6 6 5 5 5 5 4 4 for j < 16
	 * and 4 4 3 3 3 3 2 2 2 2 1 1 1 1 0 0 after; byte j = code j | code
	 * (j + 16) << 4.
	 */
	static const uint8_t ramp[18] = {
		0xc0, 0xc3, 0x48, 0x48, 0x37, 0x37, 0x37, 0x37, 0x26, 0x26,
		0x26, 0x26, 0x15, 0x15, 0x15, 0x15, 0x04, 0x04,
	};
	for (int j = 0; j < QG_QK; j++)
		x[j] = (float)j;
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x, got, sizeof got, 1, QG_QK, NULL) == 18, "q4_0 of 0..31 returns 18");
	check_bytes(got, ramp, 18, "q4_0 golden: 0..31");

	/* ones with a single -8 at 5: d = -8 / -8 = 1 (0x3c00), 1 -> 9, -8 -> 0 */
	uint8_t negmax[18] = { 0x00, 0x3c };
	memset(negmax + 2, 0x99, 16);
	negmax[2 + 5] = 0x90;
	for (int j = 0; j < QG_QK; j++)
		x[j] = j == 5 ? -8.0f : 1.0f;
	qg_quantize(QG_TYPE_Q4_0, x, got, sizeof got, 1, QG_QK, NULL);
	check_bytes(got, negmax, 18, "q4_0 golden: a single negative maximum maps to code 0, d > 0");

	/*
	 * 8 at 0, -8 at 1, zeros: max 8, d = -1 (0xbc00); 8 -> 0, 0 -> 8, and
	 * -8 -> trunc(16.5) = 16, clamped to 15 as ggml's MIN(15, ...) does.
	 */
	uint8_t clamp[18] = { 0x00, 0xbc, 0x80, 0x8f };
	memset(clamp + 4, 0x88, 14);
	memset(x, 0, sizeof x);
	x[0] = 8.0f;
	x[1] = -8.0f;
	qg_quantize(QG_TYPE_Q4_0, x, got, sizeof got, 1, QG_QK, NULL);
	check_bytes(got, clamp, 18, "q4_0 golden: the maximum's negation clamps to code 15");

	/*
	 * all zero: d = 0 / -8 = -0 (fp16 0x8000, as ggml writes it) and id = 0,
	 * every code trunc(8.5) = 8
	 */
	uint8_t zero[18] = { 0x00, 0x80 };
	memset(zero + 2, 0x88, 16);
	memset(x, 0, sizeof x);
	qg_quantize(QG_TYPE_Q4_0, x, got, sizeof got, 1, QG_QK, NULL);
	check_bytes(got, zero, 18, "q4_0 golden: all zero");

	/* constant 3: d = -0.375 (0xb600), 3 * id = -8, code 0 everywhere */
	uint8_t konst[18] = { 0x00, 0xb6 };
	for (int j = 0; j < QG_QK; j++)
		x[j] = 3.0f;
	qg_quantize(QG_TYPE_Q4_0, x, got, sizeof got, 1, QG_QK, NULL);
	check_bytes(got, konst, 18, "q4_0 golden: constant row");
	float y[QG_QK];
	qg_dequantize(QG_TYPE_Q4_0, got, y, sizeof y, 1, QG_QK);
	int exact = 1;
	for (int j = 0; j < QG_QK; j++)
		exact &= y[j] == 3.0f;
	tap_ok(exact, "q4_0 of a constant row dequantizes exactly");
}

static void test_golden_q8_0(void)
{
	float x[QG_QK];
	uint8_t got[34];

	/*
	 * 0..31: d = 31/127 (fp16 0x33d0), code j = round(j * 127/31), none
	 * near a half: 0 4 8 12 16 20 25 29 33 37 41 45 49 53 57 61 66 70 74 78
	 * 82 86 90 94 98 102 107 111 115 119 123 127.
	 */
	static const uint8_t ramp[34] = {
		0xd0, 0x33, 0, 4, 8, 12, 16, 20, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61,
		66, 70, 74, 78, 82, 86, 90, 94, 98, 102, 107, 111, 115, 119, 123, 127,
	};
	for (int j = 0; j < QG_QK; j++)
		x[j] = (float)j;
	tap_ok(qg_quantize(QG_TYPE_Q8_0, x, got, sizeof got, 1, QG_QK, NULL) == 34, "q8_0 of 0..31 returns 34");
	check_bytes(got, ramp, 34, "q8_0 golden: 0..31");

	/* negated: same scale (from the magnitude), negated codes */
	uint8_t neg[34];
	memcpy(neg, ramp, sizeof neg);
	for (int j = 0; j < QG_QK; j++) {
		x[j] = -(float)j;
		neg[2 + j] = (uint8_t)-(int8_t)ramp[2 + j];
	}
	qg_quantize(QG_TYPE_Q8_0, x, got, sizeof got, 1, QG_QK, NULL);
	check_bytes(got, neg, 34, "q8_0 golden: 0..-31");

	uint8_t zero[34] = { 0 };
	memset(x, 0, sizeof x);
	qg_quantize(QG_TYPE_Q8_0, x, got, sizeof got, 1, QG_QK, NULL);
	check_bytes(got, zero, 34, "q8_0 golden: all zero");

	/* constant 3: d = 3/127 (0x260c), every code 127 */
	uint8_t konst[34] = { 0x0c, 0x26 };
	memset(konst + 2, 127, 32);
	for (int j = 0; j < QG_QK; j++)
		x[j] = 3.0f;
	qg_quantize(QG_TYPE_Q8_0, x, got, sizeof got, 1, QG_QK, NULL);
	check_bytes(got, konst, 34, "q8_0 golden: constant row");
}

static void test_golden_f16(void)
{
	const float x[4] = { 1.0f, -2.0f, 65504.0f, 0x1p-24f };
	const uint8_t want[8] = { 0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00 };
	uint8_t got[8];
	float y[4];

	tap_ok(qg_quantize(QG_TYPE_F16, x, got, sizeof got, 1, 4, NULL) == 8, "f16 of 4 values returns 8");
	check_bytes(got, want, 8, "f16 golden: little-endian halves");
	tap_ok(qg_dequantize(QG_TYPE_F16, got, y, sizeof y, 1, 4) == 16 && bytes_eq(x, y, sizeof x),
	       "f16 dequantizes exactly");
	tap_ok(qg_quantize(QG_TYPE_F32, x, y, sizeof y, 1, 4, NULL) == 16 && bytes_eq(x, y, sizeof x),
	       "f32 copies");
}

/*
 * Interleaving, worked by hand: row r's Q4_0 block has scale 0x1000 + r and
 * quant bytes r * 16 + off, so a source byte names its row and offset.  The
 * interleaved block lists the source bytes ILEAVE at a time, row after row,
 * each XOR 0x88.
 */
static void test_golden_interleave(void)
{
	static const uint8_t x4[64] = {	/* 4 rows, 4-byte interleave */
		0x00, 0x01, 0x02, 0x03, 0x10, 0x11, 0x12, 0x13, 0x20, 0x21, 0x22, 0x23, 0x30, 0x31, 0x32, 0x33,
		0x04, 0x05, 0x06, 0x07, 0x14, 0x15, 0x16, 0x17, 0x24, 0x25, 0x26, 0x27, 0x34, 0x35, 0x36, 0x37,
		0x08, 0x09, 0x0a, 0x0b, 0x18, 0x19, 0x1a, 0x1b, 0x28, 0x29, 0x2a, 0x2b, 0x38, 0x39, 0x3a, 0x3b,
		0x0c, 0x0d, 0x0e, 0x0f, 0x1c, 0x1d, 0x1e, 0x1f, 0x2c, 0x2d, 0x2e, 0x2f, 0x3c, 0x3d, 0x3e, 0x3f,
	};
	static const uint8_t x48[64] = {	/* 4 rows, 8-byte interleave */
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
		0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37,
		0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
		0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0x3e, 0x3f,
	};
	static const uint8_t x88[128] = {	/* 8 rows, 8-byte interleave */
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
		0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37,
		0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57,
		0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77,
		0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
		0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0x3e, 0x3f,
		0x48, 0x49, 0x4a, 0x4b, 0x4c, 0x4d, 0x4e, 0x4f, 0x58, 0x59, 0x5a, 0x5b, 0x5c, 0x5d, 0x5e, 0x5f,
		0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x78, 0x79, 0x7a, 0x7b, 0x7c, 0x7d, 0x7e, 0x7f,
	};
	static const struct {
		enum qg_type type;
		int rows;
		const uint8_t *qs;
	} cases[] = {
		{ QG_TYPE_Q4_0_4X4, 4, x4 },
		{ QG_TYPE_Q4_0_4X8, 4, x48 },
		{ QG_TYPE_Q4_0_8X8, 8, x88 },
	};
	struct qg_block_q4_0 src[8], back[8];
	uint8_t want[144], got[144];

	for (int r = 0; r < 8; r++) {
		src[r].d = (qg_fp16)(0x1000 + r);
		for (int off = 0; off < 16; off++)
			src[r].qs[off] = (uint8_t)(r * 16 + off);
	}
	for (size_t c = 0; c < NELEM(cases); c++) {
		int rows = cases[c].rows;
		size_t n = (size_t)rows * 18;
		for (int r = 0; r < rows; r++) {
			want[2 * r] = (uint8_t)(0x00 + r);
			want[2 * r + 1] = 0x10;
		}
		for (int i = 0; i < rows * 16; i++)
			want[2 * rows + i] = cases[c].qs[i] ^ 0x88;
		ssize_t rc = qg_repack(cases[c].type, got, sizeof got, QG_TYPE_Q4_0, src, rows, QG_QK);
		tap_ok(rc == (ssize_t)n, "repack q4_0 -> %s returns %zu", qg_type_name(cases[c].type), n);
		check_bytes(got, want, n, qg_type_name(cases[c].type));
		rc = qg_repack(QG_TYPE_Q4_0, back, sizeof back, cases[c].type, got, rows, QG_QK);
		tap_ok(rc == (ssize_t)n && bytes_eq(back, src, n), "%s unpacks to the same q4_0 bytes",
		       qg_type_name(cases[c].type));
	}

	/*
	 * The Q8_0 activation layouts: 4 rows of ramps r * 32 + j quantized
	 * straight into q8_0_4x4 equal the row primitive's bytes, and the
	 * interleave is the same rule with 32 bytes a row and no XOR.
	 */
	float x[4 * QG_QK];
	struct qg_block_q8_0x4 prim;
	struct qg_block_q8_0 rows8[4];
	uint8_t q8[136];
	for (int i = 0; i < 4 * QG_QK; i++)
		x[i] = (float)(i % 37) - 18.0f;
	for (int il = 4; il <= 8; il += 4) {
		enum qg_type t = il == 4 ? QG_TYPE_Q8_0_4X4 : QG_TYPE_Q8_0_4X8;
		qg_quantize_rows_q8_0x4(x, QG_QK, &prim, QG_QK, il);
		tap_ok(qg_quantize(t, x, q8, sizeof q8, 4, QG_QK, NULL) == 136 && bytes_eq(q8, &prim, 136),
		       "%s: qg_quantize equals the row primitive", qg_type_name(t));
		qg_quantize(QG_TYPE_Q8_0, x, rows8, sizeof rows8, 4, QG_QK, NULL);
		int ok = 1;
		for (int r = 0; r < 4; r++)
			ok &= prim.d[r] == rows8[r].d;
		for (int i = 0; i < 128; i++) {
			int r = (i % (4 * il)) / il, off = (i / (4 * il)) * il + i % il;
			ok &= prim.qs[i] == rows8[r].qs[off];
		}
		tap_ok(ok, "%s: byte i is row (i %% %d) / %d's byte (i / %d) * %d + i %% %d", qg_type_name(t),
		       4 * il, il, 4 * il, il, il);
	}
}

/* --- round trips --------------------------------------------------------- */

static void fill_random(struct tap_rng *rng, float *x, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++) {
		float v = tap_randf(rng, -1.0f, 1.0f);
		/* now and then an outlier, so that blocks differ in shape */
		if ((tap_rand(rng) & 31) == 0)
			v *= 8.0f;
		x[i] = v * scale;
	}
}

static void test_roundtrip(struct tap_rng *rng, int scale)
{
	const int64_t rows = 16, cols = 32 * (4 + 4 * scale);
	const size_t n = (size_t)(rows * cols);
	float *x = xmalloc(n * sizeof *x), *y = xmalloc(n * sizeof *y), *y2 = xmalloc(n * sizeof *y);
	uint8_t *q = xmalloc(n * 4), *q2 = xmalloc(n * 4), *q3 = xmalloc(n * 4);

	fill_random(rng, x, n, 3.0f);

	/* Q4_0: each value within half a step (a full step where -max clamps) */
	ssize_t qs = qg_quantize(QG_TYPE_Q4_0, x, q, n * 4, rows, cols, NULL);
	tap_ok(qs == (ssize_t)(n / 32 * 18), "q4_0 of %lldx%lld returns %zd", (long long)rows, (long long)cols, qs);
	tap_ok(qg_dequantize(QG_TYPE_Q4_0, q, y, n * 4, rows, cols) == (ssize_t)(n * 4), "q4_0 dequantize size");
	int bad = 0;
	double worst = 0;
	for (size_t b = 0; b < n / 32; b++) {
		float d = fabsf(qg_fp16_to_fp32((qg_fp16)(q[b * 18] | q[b * 18 + 1] << 8)));
		for (int j = 0; j < 32; j++) {
			size_t i = b * 32 + j;
			double e = fabs((double)x[i] - y[i]) / d;
			/* codes use the f32 scale, values the fp16 one: 8 steps of 2^-11 */
			double lim = (y[i] == 7.0f * qg_fp16_to_fp32((qg_fp16)(q[b * 18] | q[b * 18 + 1] << 8)) ?
				      1.0 : 0.5) + 8.0 / 2048 + 1e-6;
			if (e > lim)
				bad++;
			if (e > worst)
				worst = e;
		}
	}
	tap_ok(bad == 0, "q4_0 round trip: every error within 0.5 d (1 d where clamped); worst %.4f d", worst);

	/* Q8_0: half a step, plus the scale's fp16 rounding on 127 steps */
	qg_quantize(QG_TYPE_Q8_0, x, q, n * 4, rows, cols, NULL);
	qg_dequantize(QG_TYPE_Q8_0, q, y, n * 4, rows, cols);
	bad = 0;
	worst = 0;
	for (size_t b = 0; b < n / 32; b++) {
		float d = fabsf(qg_fp16_to_fp32((qg_fp16)(q[b * 34] | q[b * 34 + 1] << 8)));
		for (int j = 0; j < 32; j++) {
			double e = fabs((double)x[b * 32 + j] - y[b * 32 + j]) / d;
			if (e > 0.5 + 127.0 / 2048 + 1e-6)
				bad++;
			if (e > worst)
				worst = e;
		}
	}
	tap_ok(bad == 0, "q8_0 round trip: every error within 0.56 d; worst %.4f d", worst);

	/* F16: relative 2^-11 */
	qg_quantize(QG_TYPE_F16, x, q, n * 4, rows, cols, NULL);
	qg_dequantize(QG_TYPE_F16, q, y, n * 4, rows, cols);
	bad = 0;
	for (size_t i = 0; i < n; i++)
		if (fabs((double)x[i] - y[i]) > fabs((double)x[i]) * 0x1p-11 + 0x1p-25)
			bad++;
	tap_ok(bad == 0, "f16 round trip: relative error within 2^-11");

	/* Q4_0 of its own dequantized values gives the same bytes back */
	qg_quantize(QG_TYPE_Q4_0, x, q, n * 4, rows, cols, NULL);
	qg_dequantize(QG_TYPE_Q4_0, q, y, n * 4, rows, cols);
	qg_quantize(QG_TYPE_Q4_0, y, q2, n * 4, rows, cols, NULL);
	tap_ok(bytes_eq(q, q2, n / 32 * 18), "q4_0 -> f32 -> q4_0 is the identity");

	/* every interleaved layout: straight == q4_0 + repack, same values, unpacks back */
	for (int w = 0; w < 2; w++) {
		float *im = NULL;
		if (w) {
			im = xmalloc((size_t)cols * sizeof *im);
			for (int64_t c = 0; c < cols; c++)
				im[c] = tap_randf(rng, 0.0f, 4.0f);
		}
		qg_quantize(QG_TYPE_Q4_0, x, q, n * 4, rows, cols, im);
		qg_dequantize(QG_TYPE_Q4_0, q, y, n * 4, rows, cols);
		for (size_t k = 1; k < NELEM(q4_layouts); k++) {
			enum qg_type t = q4_layouts[k];
			const char *name = qg_type_name(t);
			ssize_t a = qg_quantize(t, x, q2, n * 4, rows, cols, im);
			ssize_t b = qg_repack(t, q3, n * 4, QG_TYPE_Q4_0, q, rows, cols);
			tap_ok(a == qs && b == qs && bytes_eq(q2, q3, (size_t)qs),
			       "%s%s: quantized straight == q4_0 then repack", name, w ? " with imatrix" : "");
			qg_dequantize(t, q2, y2, n * 4, rows, cols);
			tap_ok(bytes_eq(y, y2, n * 4), "%s%s: dequantizes to q4_0's values", name,
			       w ? " with imatrix" : "");
			qg_repack(QG_TYPE_Q4_0, q3, n * 4, t, q2, rows, cols);
			tap_ok(bytes_eq(q, q3, (size_t)qs), "%s%s: unpacks to the same q4_0 bytes", name,
			       w ? " with imatrix" : "");
		}
		free(im);
	}

	/* Q8_0 activation layouts: straight == q8_0 + repack, and the same values */
	qg_quantize(QG_TYPE_Q8_0, x, q, n * 4, rows, cols, NULL);
	qg_dequantize(QG_TYPE_Q8_0, q, y, n * 4, rows, cols);
	for (size_t k = 1; k < NELEM(q8_layouts); k++) {
		enum qg_type t = q8_layouts[k];
		ssize_t a = qg_quantize(t, x, q2, n * 4, rows, cols, NULL);
		ssize_t b = qg_repack(t, q3, n * 4, QG_TYPE_Q8_0, q, rows, cols);
		qg_dequantize(t, q2, y2, n * 4, rows, cols);
		tap_ok(a == b && a == (ssize_t)(n / 32 * 34) && bytes_eq(q2, q3, (size_t)a) && bytes_eq(y, y2, n * 4),
		       "%s: straight == q8_0 + repack, same values", qg_type_name(t));
	}

	/* repack of arbitrary bytes: every pair of layouts, there and back */
	for (size_t i = 0; i < n * 4; i++)
		q[i] = (uint8_t)tap_rand(rng);
	for (int fam = 0; fam < 2; fam++) {
		const enum qg_type *ls = fam ? q8_layouts : q4_layouts;
		size_t nl = fam ? NELEM(q8_layouts) : NELEM(q4_layouts);
		size_t sz = (size_t)qg_matrix_size(ls[0], rows, cols);
		int ok = 1;
		for (size_t a = 0; a < nl; a++) {
			for (size_t b = 0; b < nl; b++) {
				/* q -> a (from the plain type), a -> b, b -> plain */
				ok &= qg_repack(ls[a], q2, n * 4, ls[0], q, rows, cols) == (ssize_t)sz;
				ok &= qg_repack(ls[b], q3, n * 4, ls[a], q2, rows, cols) == (ssize_t)sz;
				ok &= qg_repack(ls[0], y, n * 4, ls[b], q3, rows, cols) == (ssize_t)sz;
				ok &= bytes_eq(y, q, sz);
				/* and a -> b equals plain -> b */
				ok &= qg_repack(ls[b], y2, n * 4, ls[0], q, rows, cols) == (ssize_t)sz;
				ok &= bytes_eq(y2, q3, sz);
			}
		}
		tap_ok(ok, "%s family: repack between every pair of layouts carries every byte",
		       fam ? "q8_0" : "q4_0");
	}
	/* the word-wise path (plain q4_0 <-> a layout) gives the reference's bytes, both ways */
	for (size_t a = 1; a < NELEM(q4_layouts); a++) {
		size_t sz = (size_t)qg_matrix_size(QG_TYPE_Q4_0, rows, cols);
		ssize_t r1 = qg_repack(q4_layouts[a], q2, n * 4, QG_TYPE_Q4_0, q, rows, cols);
		ssize_t r2 = qg_repack_ref(q4_layouts[a], q3, n * 4, QG_TYPE_Q4_0, q, rows, cols);
		ssize_t r3 = qg_repack(QG_TYPE_Q4_0, y, n * 4, q4_layouts[a], q3, rows, cols);
		ssize_t r4 = qg_repack_ref(QG_TYPE_Q4_0, y2, n * 4, q4_layouts[a], q3, rows, cols);
		tap_ok(r1 == (ssize_t)sz && r2 == r1 && bytes_eq(q2, q3, sz) && r3 == r1 && r4 == r1 && bytes_eq(y, y2, sz),
		       "q4_0 <-> %s: the word-wise repack gives the reference's bytes (%lld x %lld)",
		       qg_type_name(q4_layouts[a]), (long long)rows, (long long)cols);
	}
	free(x);
	free(y);
	free(y2);
	free(q);
	free(q2);
	free(q3);
}

/* --- importance matrix --------------------------------------------------- */

static double block_err(const float *x, const float *w, const uint8_t *blk)
{
	double d = qg_fp16_to_fp32((qg_fp16)(blk[0] | blk[1] << 8)), e = 0;

	for (int j = 0; j < 16; j++) {
		double r0 = x[j] - d * ((blk[2 + j] & 15) - 8);
		double r1 = x[j + 16] - d * ((blk[2 + j] >> 4) - 8);
		e += w[j] * r0 * r0 + w[j + 16] * r1 * r1;
	}
	return e;
}

/* The exact optimum over every finite fp16 scale, each with its nearest codes. */
static double brute_best(const float *x, const float *w)
{
	double best = INFINITY;

	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00)
			continue;
		double d = qg_fp16_to_fp32((qg_fp16)h), e = 0;
		for (int j = 0; j < 32 && e < best; j++) {
			double l = d != 0 ? nearbyint(x[j] / d) : 0;
			l = l < -8 ? -8 : l > 7 ? 7 : l;
			double r = x[j] - d * l;
			e += w[j] * r * r;
		}
		if (e < best)
			best = e;
	}
	return best;
}

static void test_imatrix(struct tap_rng *rng, int scale)
{
	const int64_t rows = 8, cols = 32 * (8 + 8 * scale);
	const size_t n = (size_t)(rows * cols), nb = n / 32;
	float *x = xmalloc(n * sizeof *x), *w = xmalloc((size_t)cols * sizeof *w);
	uint8_t *plain = xmalloc(nb * 18), *wq = xmalloc(nb * 18);
	double sum_plain = 0, sum_w = 0;
	int worse = 0, better = 0;

	fill_random(rng, x, n, 1.0f);
	for (int64_t c = 0; c < cols; c++) {
		/* heavy-tailed weights, some zero, like activations' squares */
		float u = tap_randf(rng, 0.0f, 1.0f);
		w[c] = (tap_rand(rng) % 9 == 0) ? 0.0f : u * u * u * 10.0f;
	}
	/* one block of columns entirely unweighted */
	for (int j = 0; j < 32; j++)
		w[32 + j] = 0.0f;

	qg_quantize(QG_TYPE_Q4_0, x, plain, nb * 18, rows, cols, NULL);
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x, wq, nb * 18, rows, cols, w) == (ssize_t)(nb * 18),
	       "q4_0 with imatrix returns the same size");
	for (size_t b = 0; b < nb; b++) {
		const float *wb = w + (b % (size_t)(cols / 32)) * 32;
		double ep = block_err(x + b * 32, wb, plain + b * 18);
		double ew = block_err(x + b * 32, wb, wq + b * 18);
		/* the library and this test evaluate in double, perhaps in another order */
		if (ew > ep * (1 + 1e-12) + 1e-30)
			worse++;
		if (ew < ep)
			better++;
		sum_plain += ep;
		sum_w += ew;
	}
	tap_ok(worse == 0, "imatrix: no block's weighted error exceeds plain rounding's (%d worse of %zu)",
	       worse, nb);
	tap_ok(sum_w < 0.9 * sum_plain, "imatrix: weighted error %.4g vs plain %.4g (%.1f%% lower; %d of %zu blocks better)",
	       sum_w, sum_plain, 100.0 * (1 - sum_w / sum_plain), better, nb);
	int same = 1;
	for (int64_t r = 0; r < rows; r++)
		same &= bytes_eq(wq + ((size_t)r * (size_t)(cols / 32) + 1) * 18,
				 plain + ((size_t)r * (size_t)(cols / 32) + 1) * 18, 18);
	tap_ok(same, "imatrix: a block whose weights are all zero gets plain rounding's bytes");

	/* uniform weights: still never worse than plain rounding, usually better */
	for (int64_t c = 0; c < cols; c++)
		w[c] = 1.0f;
	qg_quantize(QG_TYPE_Q4_0, x, wq, nb * 18, rows, cols, w);
	worse = 0;
	sum_plain = sum_w = 0;
	for (size_t b = 0; b < nb; b++) {
		double ep = block_err(x + b * 32, w, plain + b * 18), ew = block_err(x + b * 32, w, wq + b * 18);
		worse += ew > ep * (1 + 1e-12) + 1e-30;
		sum_plain += ep;
		sum_w += ew;
	}
	tap_ok(worse == 0 && sum_w < sum_plain, "imatrix of ones: squared error %.4g vs plain %.4g, none worse",
	       sum_w, sum_plain);

	/* against the exact optimum over all fp16 scales, on a few blocks */
	int nbrute = 4 + 4 * scale;
	double gap = 0, gap_max = 0;
	int below = 0;
	for (int k = 0; k < nbrute; k++) {
		float bx[32], bw[32];
		uint8_t blk[18];
		fill_random(rng, bx, 32, 2.0f);
		for (int j = 0; j < 32; j++)
			bw[j] = tap_randf(rng, 0.0f, 1.0f) * tap_randf(rng, 0.0f, 1.0f);
		qg_quantize(QG_TYPE_Q4_0, bx, blk, sizeof blk, 1, 32, bw);
		double e = block_err(bx, bw, blk), opt = brute_best(bx, bw);
		if (e < opt * (1 - 1e-9))
			below++;
		double g = opt > 0 ? e / opt - 1 : 0;
		gap += g;
		if (g > gap_max)
			gap_max = g;
	}
	/* the sweep finds the continuous optimum; fp16 rounding is then polished */
	tap_ok(below == 0 && gap / nbrute < 0.005,
	       "imatrix vs the exact fp16 optimum on %d blocks: %.4f%% above on average, %.4f%% at worst",
	       nbrute, 100 * gap / nbrute, 100 * gap_max);

	/* bad weights */
	uint8_t small[34];
	float x1[32] = { 1.0f }, w1[32] = { 0 };
	w1[3] = -1.0f;
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x1, small, sizeof small, 1, 32, w1) == -EINVAL, "negative weight: -EINVAL");
	w1[3] = NAN;
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x1, small, sizeof small, 1, 32, w1) == -EINVAL, "NaN weight: -EINVAL");
	w1[3] = INFINITY;
	tap_ok(qg_quantize(QG_TYPE_Q8_0, x1, small, sizeof small, 1, 32, w1) == -EINVAL,
	       "infinite weight: -EINVAL, also for q8_0");
	w1[3] = 5.0f;
	uint8_t a8[34], b8[34];
	qg_quantize(QG_TYPE_Q8_0, x1, a8, sizeof a8, 1, 32, NULL);
	qg_quantize(QG_TYPE_Q8_0, x1, b8, sizeof b8, 1, 32, w1);
	tap_ok(bytes_eq(a8, b8, 34), "q8_0 ignores the imatrix (as ggml's quantize_q8_0 does)");
	free(x);
	free(w);
	free(plain);
	free(wq);
}

/* --- edge cases ---------------------------------------------------------- */

static void test_edges(void)
{
	float x[64], y[64], w[32];
	uint8_t q[68], keep[68];

	for (int j = 0; j < 32; j++)
		w[j] = 1.0f + j;

	/* huge: 500000 fits Q4_0's scale (62500 < 65504), 600000 does not */
	for (int j = 0; j < 32; j++)
		x[j] = 500000.0f * (j - 15.5f) / 16.5f;
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x, q, sizeof q, 1, 32, NULL) == 18, "q4_0 of magnitudes up to 5e5");
	qg_dequantize(QG_TYPE_Q4_0, q, y, sizeof y, 1, 32);
	int ok = 1;
	for (int j = 0; j < 32; j++)
		ok &= isfinite(y[j]) && fabsf(x[j] - y[j]) <= 500000.0f / 8 * 1.01f;
	tap_ok(ok, "  ... dequantizes finite, within a step");
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x, q, sizeof q, 1, 32, w) == 18, "  ... and with an imatrix");
	x[7] = -600000.0f;
	memset(q, 0xa5, sizeof q);
	memcpy(keep, q, sizeof q);
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x, q, sizeof q, 1, 32, NULL) == -ERANGE && bytes_eq(q, keep, sizeof q),
	       "q4_0 of 6e5 (scale beyond fp16): -ERANGE, nothing written");
	tap_ok(qg_quantize(QG_TYPE_Q8_0, x, q, sizeof q, 1, 32, NULL) == 34, "q8_0 of 6e5 fits (scale 4724)");
	x[7] = 9e6f;
	tap_ok(qg_quantize(QG_TYPE_Q8_0, x, q, sizeof q, 1, 32, NULL) == -ERANGE, "q8_0 of 9e6: -ERANGE");
	tap_ok(qg_quantize(QG_TYPE_F16, x, q, sizeof q, 1, 32, NULL) == 64 && q[14] == 0x00 && q[15] == 0x7c,
	       "f16 of 9e6 rounds to inf, as a conversion does");

	/* tiny: scales that underflow fp16 give zeros, never NaN */
	for (int j = 0; j < 32; j++)
		x[j] = 1e-30f * (j - 16);
	for (int k = 0; k < 2; k++) {
		qg_quantize(QG_TYPE_Q4_0, x, q, sizeof q, 1, 32, k ? w : NULL);
		qg_dequantize(QG_TYPE_Q4_0, q, y, sizeof y, 1, 32);
		ok = 1;
		for (int j = 0; j < 32; j++)
			ok &= y[j] == 0.0f;
		tap_ok(ok && q[0] == 0 && q[1] == 0, "q4_0 of 1e-30s%s: scale 0, values 0", k ? " with imatrix" : "");
	}
	for (int j = 0; j < 32; j++)
		x[j] = 0x1p-149f * (j % 3);	/* f32 subnormals: d = max / -8 underflows to 0 in f32 */
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x, q, sizeof q, 1, 32, w) == 18 &&
	       qg_quantize(QG_TYPE_Q8_0, x, q, sizeof q, 1, 32, w) == 34, "f32 subnormal input quantizes");
	/* values near fp16's subnormal scales keep their error within a step */
	for (int j = 0; j < 32; j++)
		x[j] = 1e-5f * (j - 10);
	qg_quantize(QG_TYPE_Q4_0, x, q, sizeof q, 1, 32, NULL);
	qg_dequantize(QG_TYPE_Q4_0, q, y, sizeof y, 1, 32);
	float d = fabsf(qg_fp16_to_fp32((qg_fp16)(q[0] | q[1] << 8)));
	ok = d > 0;
	for (int j = 0; j < 32; j++)
		ok &= fabsf(x[j] - y[j]) <= 0.5f * d + 8 * 0x1p-24f;	/* subnormal d: absolute rounding */
	tap_ok(ok, "q4_0 with a subnormal fp16 scale (%g): errors within half a step plus d's rounding", d);

	/* NaN and infinity: -EDOM for the block types, nothing written */
	static const enum qg_type blocky[] = {
		QG_TYPE_Q8_0, QG_TYPE_Q4_0, QG_TYPE_Q4_0_4X4, QG_TYPE_Q4_0_4X8, QG_TYPE_Q4_0_8X8,
		QG_TYPE_Q8_0_4X4, QG_TYPE_Q8_0_4X8,
	};
	float big[8 * 32];
	uint8_t out[8 * 32 * 2], keep2[8 * 32 * 2];
	for (int i = 0; i < 8 * 32; i++)
		big[i] = (float)(i % 7);
	for (int v = 0; v < 3; v++) {
		big[200] = v == 0 ? NAN : v == 1 ? INFINITY : -INFINITY;
		ok = 1;
		for (size_t t = 0; t < NELEM(blocky); t++) {
			memset(out, 0x5a, sizeof out);
			memcpy(keep2, out, sizeof out);
			ok &= qg_quantize(blocky[t], big, out, sizeof out, 8, 32, NULL) == -EDOM;
			ok &= qg_quantize(blocky[t], big, out, sizeof out, 8, 32, w) == -EDOM;
			ok &= bytes_eq(out, keep2, sizeof out);
		}
		tap_ok(ok, "%s input: -EDOM for every block type, nothing written", v == 0 ? "NaN" : v == 1 ? "+inf" : "-inf");
	}
	big[200] = NAN;
	big[201] = INFINITY;
	float back[8 * 32];
	ok = qg_quantize(QG_TYPE_F32, big, back, sizeof back, 8, 32, NULL) == (ssize_t)sizeof back &&
	     isnan(back[200]) && isinf(back[201]);
	tap_ok(ok, "f32 keeps NaN and inf");
	ok = qg_quantize(QG_TYPE_F16, big, out, sizeof out, 8, 32, NULL) == 8 * 32 * 2 &&
	     qg_dequantize(QG_TYPE_F16, out, back, sizeof back, 8, 32) == (ssize_t)sizeof back &&
	     isnan(back[200]) && isinf(back[201]) && back[199] == big[199];
	tap_ok(ok, "f16 keeps NaN and inf");

	/* the row primitives themselves: a NaN makes the block's scale NaN */
	struct qg_block_q4_0 b4;
	struct qg_block_q8_0 b8;
	for (int j = 0; j < 32; j++)
		x[j] = (float)j;
	x[9] = NAN;
	qg_quantize_row_q4_0(x, &b4, 32);
	qg_quantize_row_q8_0(x, &b8, 32);
	tap_ok(isnan(qg_fp16_to_fp32(b4.d)) && isnan(qg_fp16_to_fp32(b8.d)),
	       "row primitives: a NaN in a block gives a NaN scale");
}

/* --- errors -------------------------------------------------------------- */

static void test_errors(void)
{
	float x[8 * 64] = { 0 }, y[8 * 64], w[64] = { 0 };
	uint8_t q[8 * 64 * 4];

	tap_ok(qg_quantize(QG_TYPE_Q4_0, x, q, sizeof q, 1, 48, NULL) == -EINVAL, "quantize: cols 48: -EINVAL");
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x, q, sizeof q, 1, 0, NULL) == -EINVAL, "quantize: cols 0: -EINVAL");
	tap_ok(qg_quantize(QG_TYPE_F32, x, q, sizeof q, -1, 4, NULL) == -EINVAL, "quantize: rows -1: -EINVAL");
	tap_ok(qg_quantize(QG_TYPE_Q4_0_4X4, x, q, sizeof q, 6, 32, NULL) == -EINVAL, "quantize: 4x4 rows 6: -EINVAL");
	tap_ok(qg_quantize(QG_TYPE_Q4_0_8X8, x, q, sizeof q, 4, 32, NULL) == -EINVAL, "quantize: 8x8 rows 4: -EINVAL");
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x, q, 17, 1, 32, NULL) == -ENOBUFS, "quantize: dst 17 bytes: -ENOBUFS");
	tap_ok(qg_quantize(QG_TYPE_Q4_0, NULL, q, sizeof q, 1, 32, NULL) == -EINVAL, "quantize: NULL src: -EINVAL");
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x, NULL, sizeof q, 1, 32, NULL) == -EINVAL, "quantize: NULL dst: -EINVAL");
	tap_ok(qg_quantize(QG_TYPE_COUNT, x, q, sizeof q, 1, 32, NULL) == -EINVAL &&
	       qg_quantize((enum qg_type)-1, x, q, sizeof q, 1, 32, NULL) == -EINVAL, "quantize: bad type: -EINVAL");
	tap_ok(qg_quantize(QG_TYPE_Q4_0, x, x + 8, sizeof x, 1, 64, w) == -EINVAL,
	       "quantize: dst overlapping src: -EINVAL");
	tap_ok(qg_quantize(QG_TYPE_F32, x, q, SIZE_MAX, INT64_MAX / 64, 64, NULL) == -EOVERFLOW,
	       "quantize: size overflow: -EOVERFLOW");

	tap_ok(qg_dequantize(QG_TYPE_Q4_0, q, y, sizeof y, 1, 40) == -EINVAL, "dequantize: cols 40: -EINVAL");
	tap_ok(qg_dequantize(QG_TYPE_Q4_0_4X8, q, y, sizeof y, 2, 32) == -EINVAL, "dequantize: 4x8 rows 2: -EINVAL");
	tap_ok(qg_dequantize(QG_TYPE_Q8_0_4X4, q, y, sizeof y, 3, 32) == -EINVAL, "dequantize: q8_0_4x4 rows 3: -EINVAL");
	tap_ok(qg_dequantize(QG_TYPE_Q4_0, q, y, 127, 1, 32) == -ENOBUFS, "dequantize: dst 127 bytes: -ENOBUFS");
	tap_ok(qg_dequantize(QG_TYPE_Q4_0, NULL, y, sizeof y, 1, 32) == -EINVAL &&
	       qg_dequantize(QG_TYPE_Q4_0, q, NULL, sizeof y, 1, 32) == -EINVAL, "dequantize: NULL: -EINVAL");
	tap_ok(qg_dequantize(QG_TYPE_COUNT, q, y, sizeof y, 1, 32) == -EINVAL, "dequantize: bad type: -EINVAL");

	tap_ok(qg_repack(QG_TYPE_Q4_0_4X4, q, sizeof q, QG_TYPE_Q8_0, x, 4, 32) == -EINVAL,
	       "repack: q8_0 -> q4_0_4x4: -EINVAL");
	tap_ok(qg_repack(QG_TYPE_F16, q, sizeof q, QG_TYPE_F32, x, 4, 32) == -EINVAL, "repack: f32 -> f16: -EINVAL");
	tap_ok(qg_repack(QG_TYPE_Q4_0_8X8, q, sizeof q, QG_TYPE_Q4_0_4X4, x, 4, 32) == -EINVAL,
	       "repack: 4 rows into 8x8: -EINVAL");
	tap_ok(qg_repack(QG_TYPE_Q4_0_4X4, q, sizeof q, QG_TYPE_Q4_0, x, 4, 33) == -EINVAL, "repack: cols 33: -EINVAL");
	tap_ok(qg_repack(QG_TYPE_Q4_0_4X4, q, 71, QG_TYPE_Q4_0, x, 4, 32) == -ENOBUFS, "repack: dst 71 bytes: -ENOBUFS");
	tap_ok(qg_repack(QG_TYPE_Q4_0_4X4, NULL, sizeof q, QG_TYPE_Q4_0, x, 4, 32) == -EINVAL &&
	       qg_repack(QG_TYPE_Q4_0_4X4, q, sizeof q, QG_TYPE_Q4_0, NULL, 4, 32) == -EINVAL, "repack: NULL: -EINVAL");
	tap_ok(qg_repack(QG_TYPE_Q4_0_4X4, q + 10, sizeof q - 10, QG_TYPE_Q4_0, q, 4, 32) == -EINVAL,
	       "repack: overlapping: -EINVAL");
	tap_ok(qg_repack((enum qg_type)99, q, sizeof q, QG_TYPE_Q4_0, x, 4, 32) == -EINVAL, "repack: bad type: -EINVAL");

	/* unaligned buffers work (blocks are 18 bytes, scales read byte by byte) */
	uint8_t *odd = q + 1, ref[288];
	for (int i = 0; i < 8 * 64; i++)
		x[i] = (float)((i * 7) % 23) - 11.0f;
	qg_quantize(QG_TYPE_Q4_0_8X8, x, ref, sizeof ref, 8, 64, NULL);
	tap_ok(qg_quantize(QG_TYPE_Q4_0_8X8, x, odd, sizeof q - 1, 8, 64, NULL) == 288 && bytes_eq(odd, ref, 288),
	       "quantize into an odd address");
}

/*
 * The same bytes on every CPU: a hash of Q8_0, Q4_0 and F16 of a fixed
 * pseudo-random matrix, taken from the x86-64 build (whose arithmetic is
 * ggml's reference C, no fused multiply-add).  An aarch64 compiler that
 * fused x * id + 8.5 differently, or a changed rounding, shows up here.
 */
static void test_cross_cpu(void)
{
	enum { R = 64, C = 1024 };
	static float x[R * C];
	static uint8_t q[R * C * 2];
	struct tap_rng rng = { 0x243f6a8885a308d3ULL };
	uint64_t h = 1469598103934665603ULL;	/* FNV-1a */

	for (int i = 0; i < R * C; i++)
		x[i] = tap_randf(&rng, -1.0f, 1.0f) * (float)(1 + (tap_rand(&rng) & 7));
	for (int t = QG_TYPE_F16; t <= QG_TYPE_Q4_0; t++) {
		ssize_t n = qg_quantize((enum qg_type)t, x, q, sizeof q, R, C, NULL);
		for (ssize_t i = 0; i < n; i++) {
			h ^= q[i];
			h *= 1099511628211ULL;
		}
	}
	if (!tap_ok(h == QUANT_HASH, "f16, q8_0, q4_0 of a fixed matrix: the x86-64 bytes"))
		tap_diag("hash 0x%016llx", (unsigned long long)h);
}

int main(void)
{
	struct tap_rng rng = { 0x9e3779b97f4a7c15ULL };
	int scale = tap_scale();

	test_fp16();
	test_types();
	test_golden_q4_0();
	test_golden_q8_0();
	test_golden_f16();
	test_golden_interleave();
	test_roundtrip(&rng, scale);
	test_imatrix(&rng, scale);
	test_edges();
	test_errors();
	test_cross_cpu();
	return tap_done();
}
