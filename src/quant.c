/*
 * quant.c - the quantized formats: type facts, quantization, repacking.
 *
 * The row primitives follow ggml's reference code value for value (same
 * scale, same rounding, same clamping), so a matrix quantized here has the
 * bytes ggml would write.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "fp16.h"
#include "quant.h"

_Static_assert(sizeof(struct qg_block_q4_0) == 18, "block_q4_0 is 18 bytes");
_Static_assert(sizeof(struct qg_block_q8_0) == 34, "block_q8_0 is 34 bytes");
_Static_assert(sizeof(struct qg_block_q4_0x4) == 72, "block_q4_0x4 is 72 bytes");
_Static_assert(sizeof(struct qg_block_q4_0x8) == 144, "block_q4_0x8 is 144 bytes");
_Static_assert(sizeof(struct qg_block_q8_0x4) == 136, "block_q8_0x4 is 136 bytes");

struct type_info {
	const char *name;
	int block_values;	/* values per block along a row */
	int block_bytes;	/* bytes of one row's block */
	int row_group;		/* rows interleaved together */
	int weight;		/* accepted as a mul_mat weight */
};

static const struct type_info types[QG_TYPE_COUNT] = {
	[QG_TYPE_F32] = { .name = "f32", .block_values = 1, .block_bytes = 4, .row_group = 1, .weight = 1 },
	[QG_TYPE_F16] = { .name = "f16", .block_values = 1, .block_bytes = 2, .row_group = 1, .weight = 1 },
	[QG_TYPE_Q8_0] = { .name = "q8_0", .block_values = 32, .block_bytes = 34, .row_group = 1, .weight = 1 },
	[QG_TYPE_Q4_0] = { .name = "q4_0", .block_values = 32, .block_bytes = 18, .row_group = 1, .weight = 1 },
	[QG_TYPE_Q4_0_4X4] = { .name = "q4_0_4x4", .block_values = 32, .block_bytes = 18, .row_group = 4, .weight = 1 },
	[QG_TYPE_Q4_0_4X8] = { .name = "q4_0_4x8", .block_values = 32, .block_bytes = 18, .row_group = 4, .weight = 1 },
	[QG_TYPE_Q4_0_8X8] = { .name = "q4_0_8x8", .block_values = 32, .block_bytes = 18, .row_group = 8, .weight = 1 },
	[QG_TYPE_Q8_0_4X4] = { .name = "q8_0_4x4", .block_values = 32, .block_bytes = 34, .row_group = 4, .weight = 0 },
	[QG_TYPE_Q8_0_4X8] = { .name = "q8_0_4x8", .block_values = 32, .block_bytes = 34, .row_group = 4, .weight = 0 },
};

static int type_valid(enum qg_type type)
{
	return (unsigned)type < QG_TYPE_COUNT;
}

const char *qg_type_name(enum qg_type type)
{
	return type_valid(type) ? types[type].name : NULL;
}

int qg_type_from_name(const char *name)
{
	if (!name)
		return -EINVAL;
	for (int t = 0; t < QG_TYPE_COUNT; t++) {
		const char *n = types[t].name;
		size_t len = strlen(n);
		if (strcasecmp(name, n) == 0)
			return t;
		/* ggml's older spelling: q4_0_4_4, q4_0_4_8, q4_0_8_8 */
		if (len == 8 && strlen(name) == 8 && strncasecmp(name, n, 6) == 0 &&
		    name[6] == '_' && name[7] == n[7] && n[6] == 'x')
			return t;
	}
	return -EINVAL;
}

int qg_type_is_weight(enum qg_type type)
{
	return type_valid(type) && types[type].weight;
}

int qg_type_is_interleaved(enum qg_type type)
{
	return type_valid(type) && types[type].row_group > 1;
}

int qg_type_row_group(enum qg_type type)
{
	return type_valid(type) ? types[type].row_group : 0;
}

int qg_type_block_values(enum qg_type type)
{
	return type_valid(type) ? types[type].block_values : 0;
}

ssize_t qg_row_size(enum qg_type type, int64_t cols)
{
	if (!type_valid(type) || cols <= 0 || cols % types[type].block_values)
		return -EINVAL;
	int64_t blocks = cols / types[type].block_values;
	if (blocks > (int64_t)(SSIZE_MAX / types[type].block_bytes))
		return -EOVERFLOW;
	return (ssize_t)(blocks * types[type].block_bytes);
}

ssize_t qg_matrix_size(enum qg_type type, int64_t rows, int64_t cols)
{
	ssize_t row = qg_row_size(type, cols);

	if (row < 0)
		return row;
	if (rows <= 0 || rows % types[type].row_group)
		return -EINVAL;
	if (rows > SSIZE_MAX / row)
		return -EOVERFLOW;
	return (ssize_t)rows * row;
}

/* --- row primitives ----------------------------------------------------- */

/*
 * ggml's MIN(15, (int8_t)v): for finite input V is in [0.5, 16.5], the cast
 * truncates (so +8.5 rounds) and 16 (from the negated maximum's partner
 * side) is clamped to 15.  Written without the cast's undefined cases, so a
 * NaN scale gives code 0 instead of undefined behaviour.
 */
static inline int q4_code(float v)
{
	if (v >= 15.0f)
		return 15;
	return v >= 0.0f ? (int)v : 0;
}

/* ggml's roundf(v) for |v| <= 127; NaN (from a NaN or infinite scale) gives 0. */
static inline int8_t q8_code(float v)
{
	return fabsf(v) <= 127.5f ? (int8_t)roundf(v) : 0;
}

/*
 * The largest magnitude in a block, or NaN if the block holds a NaN: a
 * non-finite value makes the block's scale non-finite, so whatever it is
 * multiplied with comes out NaN instead of silently finite.
 */
static inline float block_amax(const float *x)
{
	float amax = 0.0f;

	for (int j = 0; j < QG_QK; j++) {
		float a = fabsf(x[j]);
		if (!(a <= amax))
			amax = a;	/* larger, or NaN */
		if (isnan(amax))
			break;
	}
	return amax;
}

void qg_quantize_row_q4_0(const float *x, struct qg_block_q4_0 *y, int64_t k)
{
	for (int64_t b = 0; b < k / QG_QK; b++, x += QG_QK) {
		/* the value of largest magnitude, with its sign, maps to -8 */
		float amax = 0.0f, max = 0.0f;
		for (int j = 0; j < QG_QK; j++) {
			if (amax < fabsf(x[j])) {
				amax = fabsf(x[j]);
				max = x[j];
			} else if (isnan(x[j])) {
				max = x[j];	/* a NaN makes the scale NaN */
				break;
			}
		}
		const float d = max / -8.0f;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;

		y[b].d = qg_fp32_to_fp16(d);
		for (int j = 0; j < QG_QK / 2; j++) {
			/* (int8_t) truncates toward zero, as in ggml; the +8.5
			 * makes that a rounding, and MIN keeps -max's 16 at 15 */
			int q0 = q4_code(x[j] * id + 8.5f);
			int q1 = q4_code(x[QG_QK / 2 + j] * id + 8.5f);
			y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
		}
	}
}

void qg_quantize_row_q8_0(const float *x, struct qg_block_q8_0 *y, int64_t k)
{
	for (int64_t b = 0; b < k / QG_QK; b++, x += QG_QK) {
		const float d = block_amax(x) / 127.0f;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;

		y[b].d = qg_fp32_to_fp16(d);
		for (int j = 0; j < QG_QK; j++)
			y[b].qs[j] = q8_code(x[j] * id);
	}
}

void qg_quantize_rows_q8_0x4(const float *x, size_t ldx, struct qg_block_q8_0x4 *y,
			     int64_t k, int ileave)
{
	for (int64_t b = 0; b < k / QG_QK; b++) {
		float id[4];
		for (int r = 0; r < 4; r++) {
			const float d = block_amax(x + r * ldx + b * QG_QK) / 127.0f;
			id[r] = d != 0.0f ? 1.0f / d : 0.0f;
			y[b].d[r] = qg_fp32_to_fp16(d);
		}
		/* chunk c of ILEAVE values of row r goes to qs[(c*4 + r)*ILEAVE] */
		for (int j = 0; j < QG_QK * 4; j++) {
			int chunk = j / (4 * ileave);
			int r = (j % (4 * ileave)) / ileave;
			int col = chunk * ileave + j % ileave;
			y[b].qs[j] = q8_code(x[r * ldx + b * QG_QK + col] * id[r]);
		}
	}
}

float qg_vec_dot_q4_0_q8_0(int64_t k, const struct qg_block_q4_0 *x, const struct qg_block_q8_0 *y)
{
	float sum = 0.0f;

	for (int64_t b = 0; b < k / QG_QK; b++) {
		int sumi = 0;
		for (int j = 0; j < QG_QK / 2; j++) {
			int v0 = (x[b].qs[j] & 0x0f) - 8;
			int v1 = (x[b].qs[j] >> 4) - 8;
			sumi += v0 * y[b].qs[j] + v1 * y[b].qs[j + QG_QK / 2];
		}
		sum += sumi * qg_fp16_to_fp32(x[b].d) * qg_fp16_to_fp32(y[b].d);
	}
	return sum;
}

float qg_vec_dot_q8_0_q8_0(int64_t k, const struct qg_block_q8_0 *x, const struct qg_block_q8_0 *y)
{
	float sum = 0.0f;

	for (int64_t b = 0; b < k / QG_QK; b++) {
		int sumi = 0;
		for (int j = 0; j < QG_QK; j++)
			sumi += x[b].qs[j] * y[b].qs[j];
		sum += sumi * (qg_fp16_to_fp32(x[b].d) * qg_fp16_to_fp32(y[b].d));
	}
	return sum;
}
