/*
 * quant.c - the quantized formats: type facts, quantization, repacking
 * (the importance-weighted Q4_0 search is quant-imatrix.c's).
 *
 * The row primitives follow ggml's reference code value for value (same
 * scale, same rounding, same clamping), so a matrix quantized here has the
 * bytes ggml would write.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fp16.h"
#include "kquant.h"
#include "quant.h"
#include "quant-imatrix.h"

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
	enum qg_type base;	/* the plain block type it interleaves (itself if plain) */
	int ileave;		/* bytes of a row's quants taken at a time (all if plain) */
	uint8_t mask;		/* XOR applied to every stored quant byte */
};

static const struct type_info types[QG_TYPE_COUNT] = {
	[QG_TYPE_F32] = { .name = "f32", .block_values = 1, .block_bytes = 4, .row_group = 1, .weight = 1,
			  .base = QG_TYPE_F32 },
	[QG_TYPE_F16] = { .name = "f16", .block_values = 1, .block_bytes = 2, .row_group = 1, .weight = 1,
			  .base = QG_TYPE_F16 },
	[QG_TYPE_Q8_0] = { .name = "q8_0", .block_values = 32, .block_bytes = 34, .row_group = 1, .weight = 1,
			   .base = QG_TYPE_Q8_0, .ileave = 32 },
	[QG_TYPE_Q4_0] = { .name = "q4_0", .block_values = 32, .block_bytes = 18, .row_group = 1, .weight = 1,
			   .base = QG_TYPE_Q4_0, .ileave = 16 },
	[QG_TYPE_Q4_0_4X4] = { .name = "q4_0_4x4", .block_values = 32, .block_bytes = 18, .row_group = 4, .weight = 1,
			       .base = QG_TYPE_Q4_0, .ileave = 4, .mask = 0x88 },
	[QG_TYPE_Q4_0_4X8] = { .name = "q4_0_4x8", .block_values = 32, .block_bytes = 18, .row_group = 4, .weight = 1,
			       .base = QG_TYPE_Q4_0, .ileave = 8, .mask = 0x88 },
	[QG_TYPE_Q4_0_8X8] = { .name = "q4_0_8x8", .block_values = 32, .block_bytes = 18, .row_group = 8, .weight = 1,
			       .base = QG_TYPE_Q4_0, .ileave = 8, .mask = 0x88 },
	[QG_TYPE_Q8_0_4X4] = { .name = "q8_0_4x4", .block_values = 32, .block_bytes = 34, .row_group = 4, .weight = 1,
			       .base = QG_TYPE_Q8_0, .ileave = 4 },
	[QG_TYPE_Q8_0_4X8] = { .name = "q8_0_4x8", .block_values = 32, .block_bytes = 34, .row_group = 4, .weight = 0,
			       .base = QG_TYPE_Q8_0, .ileave = 8 },
	[QG_TYPE_Q4_K] = { .name = "q4_K", .block_values = QG_QK_K, .block_bytes = 144, .row_group = 1, .weight = 1,
			   .base = QG_TYPE_Q4_K },
	[QG_TYPE_Q6_K] = { .name = "q6_K", .block_values = QG_QK_K, .block_bytes = 210, .row_group = 1, .weight = 1,
			   .base = QG_TYPE_Q6_K },
	[QG_TYPE_Q8_K] = { .name = "q8_K", .block_values = QG_QK_K, .block_bytes = 292, .row_group = 1, .weight = 0,
			   .base = QG_TYPE_Q8_K },
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

enum qg_type qg_type_plain(enum qg_type type)
{
	return type_valid(type) ? types[type].base : type;
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

/* --- block access in any layout --------------------------------------- */

/*
 * One row's block of a block type, unpacked: its scale and its quant bytes
 * as the plain type stores them (Q4_0: 16 bytes of two codes, low nibble for
 * column j and high for j + 16; Q8_0: 32 int8 codes).
 */
struct rowblock {
	qg_fp16 d;
	uint8_t qs[QG_QK];
};

/*
 * Where a row's quant bytes sit in its group's block: byte OFF of row RI is
 * at QS[idx[RI][OFF]].  ggml's make_block_q4_0x4 / _0x8 take the rows'
 * bytes ILEAVE at a time, row after row, so chunk c of row r lands at
 * (c * R + r) * ILEAVE.  For a plain type (R = 1, ILEAVE = all) it is OFF.
 */
struct layout {
	const struct type_info *t;
	int rows;		/* R */
	int qs_bytes;		/* one row's quant bytes: 16 or 32 */
	size_t group_block;	/* bytes of one group's block at one column */
	uint8_t idx[8][QG_QK];
};

static void layout_init(struct layout *l, enum qg_type type)
{
	const struct type_info *t = &types[type];

	l->t = t;
	l->rows = t->row_group;
	l->qs_bytes = t->block_bytes - 2;
	l->group_block = (size_t)t->row_group * t->block_bytes;
	for (int r = 0; r < l->rows; r++)
		for (int off = 0; off < l->qs_bytes; off++)
			l->idx[r][off] = (uint8_t)((off / t->ileave) * (l->rows * t->ileave) +
						   r * t->ileave + off % t->ileave);
}

/* The group block holding row R's block B, in a matrix of NB blocks per row. */
static size_t layout_offset(const struct layout *l, int64_t r, int64_t nb, int64_t b)
{
	return ((size_t)(r / l->rows) * (size_t)nb + (size_t)b) * l->group_block;
}

/* Scales are little-endian binary16 and blocks may sit at any address. */
static qg_fp16 load_fp16(const uint8_t *p)
{
	return (qg_fp16)(p[0] | p[1] << 8);
}

static void store_fp16(uint8_t *p, qg_fp16 h)
{
	p[0] = (uint8_t)h;
	p[1] = (uint8_t)(h >> 8);
}

static void layout_get(const struct layout *l, const uint8_t *base, int64_t r, int64_t nb,
		       int64_t b, struct rowblock *out)
{
	const uint8_t *p = base + layout_offset(l, r, nb, b);
	const uint8_t *qs = p + 2 * l->rows;
	int ri = (int)(r % l->rows);

	out->d = load_fp16(p + 2 * ri);
	for (int off = 0; off < l->qs_bytes; off++)
		out->qs[off] = qs[l->idx[ri][off]] ^ l->t->mask;
}

static void layout_put(const struct layout *l, uint8_t *base, int64_t r, int64_t nb,
		       int64_t b, const struct rowblock *in)
{
	uint8_t *p = base + layout_offset(l, r, nb, b);
	uint8_t *qs = p + 2 * l->rows;
	int ri = (int)(r % l->rows);

	store_fp16(p + 2 * ri, in->d);
	for (int off = 0; off < l->qs_bytes; off++)
		qs[l->idx[ri][off]] = in->qs[off] ^ l->t->mask;
}

/* True when [A, A + AN) and [B, B + BN) share a byte. */
static int overlaps(const void *a, size_t an, const void *b, size_t bn)
{
	uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;

	return pa < pb + bn && pb < pa + an;
}

/* --- whole matrices ------------------------------------------------------ */

/*
 * Quantize (QUANTIZE, with IMATRIX if not NULL) or dequantize ROWS x COLS
 * between F and Q for a K-quant BASE, a row at a time.  Returns 0, doing
 * nothing, for other types.
 */
static int kquant_rows(enum qg_type base, int quantize, void *q, float *f, int64_t rows, int64_t cols,
		       const float *imatrix)
{
	const size_t rb = (size_t)(cols / QG_QK_K) * (size_t)types[base].block_bytes;
	uint8_t *qb = q;

	for (int64_t r = 0; r < rows; r++, qb += rb, f += cols) {
		switch (base) {
		case QG_TYPE_Q4_K:
			if (quantize)
				qg_quantize_row_q4_K_imatrix(f, (void *)qb, cols, imatrix);
			else
				qg_dequantize_row_q4_K((const void *)qb, f, cols);
			break;
		case QG_TYPE_Q6_K:
			if (quantize)
				qg_quantize_row_q6_K_imatrix(f, (void *)qb, cols, imatrix);
			else
				qg_dequantize_row_q6_K((const void *)qb, f, cols);
			break;
		case QG_TYPE_Q8_K:
			if (quantize)
				qg_quantize_row_q8_K(f, (void *)qb, cols);
			else
				qg_dequantize_row_q8_K((const void *)qb, f, cols);
			break;
		default:
			return 0;
		}
	}
	return 1;
}

/*
 * The checks qg_quantize makes before it writes anything: every value of a
 * block type finite (-EDOM), every block's plain scale inside fp16's range
 * (-ERANGE).  F32 and F16 are conversions and take any value.
 */
static int quantize_check_values(enum qg_type base, const float *src, int64_t rows, int64_t cols)
{
	if (base == QG_TYPE_Q4_K || base == QG_TYPE_Q6_K || base == QG_TYPE_Q8_K) {
		for (int64_t i = 0; i < rows * cols; i++) {
			if (!isfinite(src[i]))
				return -EDOM;
			if (base != QG_TYPE_Q8_K && fabsf(src[i]) >= 0x1p20f)
				return -ERANGE;
		}
		return 0;
	}
	if (base != QG_TYPE_Q4_0 && base != QG_TYPE_Q8_0)
		return 0;
	for (int64_t i = 0; i < rows * cols; i += QG_QK) {
		float amax = 0.0f, max = 0.0f;
		for (int j = 0; j < QG_QK; j++) {
			float v = src[i + j];
			if (!isfinite(v))
				return -EDOM;
			if (amax < fabsf(v)) {
				amax = fabsf(v);
				max = v;
			}
		}
		float d = base == QG_TYPE_Q4_0 ? max / -8.0f : amax / 127.0f;
		if (!qg_fp16_is_finite(qg_fp32_to_fp16(d)))
			return -ERANGE;
	}
	return 0;
}

ssize_t qg_quantize(enum qg_type type, const float *src, void *dst, size_t dst_size,
		    int64_t rows, int64_t cols, const float *imatrix)
{
	struct layout l;
	ssize_t size;
	int r;

	if (!type_valid(type) || !src || !dst)
		return -EINVAL;
	if ((size = qg_matrix_size(type, rows, cols)) < 0)
		return size;
	if (rows > INT64_MAX / cols || (uint64_t)(rows * cols) > SIZE_MAX / sizeof(float))
		return -EOVERFLOW;
	if (dst_size < (size_t)size)
		return -ENOBUFS;
	if (overlaps(src, (size_t)(rows * cols) * sizeof(float), dst, (size_t)size) ||
	    (imatrix && overlaps(imatrix, (size_t)cols * sizeof(float), dst, (size_t)size)))
		return -EINVAL;
	if (imatrix)
		for (int64_t c = 0; c < cols; c++)
			if (!(imatrix[c] >= 0.0f) || !isfinite(imatrix[c]))
				return -EINVAL;
	enum qg_type base = types[type].base;
	if ((r = quantize_check_values(base, src, rows, cols)) < 0)
		return r;

	uint8_t *out = dst;
	if (base == QG_TYPE_F32) {
		memcpy(out, src, (size_t)size);
		return size;
	}
	if (base == QG_TYPE_F16) {
		for (int64_t i = 0; i < rows * cols; i++)
			store_fp16(out + 2 * i, qg_fp32_to_fp16(src[i]));
		return size;
	}
	if (kquant_rows(base, 1, out, (float *)src, rows, cols, imatrix))
		return size;

	int64_t nb = cols / QG_QK;
	layout_init(&l, type);
	for (int64_t row = 0; row < rows; row++) {
		const float *x = src + row * cols;
		for (int64_t b = 0; b < nb; b++, x += QG_QK) {
			struct rowblock blk;
			if (base == QG_TYPE_Q8_0) {
				struct qg_block_q8_0 q;
				qg_quantize_row_q8_0(x, &q, QG_QK);
				blk.d = q.d;
				memcpy(blk.qs, q.qs, sizeof q.qs);
			} else if (imatrix) {
				struct qg_block_q4_0 plain;
				qg_quantize_row_q4_0(x, &plain, QG_QK);
				qg_q4_0_block_weighted(x, imatrix + b * QG_QK, &plain, &blk.d, blk.qs);
			} else {
				struct qg_block_q4_0 q;
				qg_quantize_row_q4_0(x, &q, QG_QK);
				blk.d = q.d;
				memcpy(blk.qs, q.qs, sizeof q.qs);
			}
			layout_put(&l, out, row, nb, b, &blk);
		}
	}
	return size;
}

/* Row ROW of a Q4_0 or Q8_0 matrix in layout L (NB blocks a row) at IN into NB * 32 floats at Y. */
static void dequantize_layout_row(const struct layout *l, const uint8_t *in, int64_t row, int64_t nb, float *y)
{
	for (int64_t b = 0; b < nb; b++, y += QG_QK) {
		struct rowblock blk;
		layout_get(l, in, row, nb, b, &blk);
		const float d = qg_fp16_to_fp32(blk.d);
		if (l->t->base == QG_TYPE_Q8_0) {
			for (int j = 0; j < QG_QK; j++)
				y[j] = (int8_t)blk.qs[j] * d;
		} else {
			for (int j = 0; j < QG_QK / 2; j++) {
				y[j] = ((blk.qs[j] & 0x0f) - 8) * d;
				y[j + QG_QK / 2] = ((blk.qs[j] >> 4) - 8) * d;
			}
		}
	}
}

ssize_t qg_dequantize(enum qg_type type, const void *src, float *dst, size_t dst_size,
		      int64_t rows, int64_t cols)
{
	struct layout l;
	ssize_t size;

	if (!type_valid(type) || !src || !dst)
		return -EINVAL;
	if ((size = qg_matrix_size(type, rows, cols)) < 0)
		return size;
	if (rows > INT64_MAX / cols || (uint64_t)(rows * cols) > SIZE_MAX / sizeof(float))
		return -EOVERFLOW;
	size_t out_size = (size_t)(rows * cols) * sizeof(float);
	if (out_size > SSIZE_MAX)
		return -EOVERFLOW;
	if (dst_size < out_size)
		return -ENOBUFS;
	if (overlaps(src, (size_t)size, dst, out_size))
		return -EINVAL;

	const uint8_t *in = src;
	enum qg_type base = types[type].base;
	if (base == QG_TYPE_F32) {
		memcpy(dst, in, out_size);
		return (ssize_t)out_size;
	}
	if (base == QG_TYPE_F16) {
		for (int64_t i = 0; i < rows * cols; i++)
			dst[i] = qg_fp16_to_fp32(load_fp16(in + 2 * i));
		return (ssize_t)out_size;
	}
	if (kquant_rows(base, 0, (void *)in, dst, rows, cols, NULL))
		return (ssize_t)out_size;

	layout_init(&l, type);
	for (int64_t row = 0; row < rows; row++)
		dequantize_layout_row(&l, in, row, cols / QG_QK, dst + row * cols);
	return (ssize_t)out_size;
}

ssize_t qg_dequantize_row(enum qg_type type, const void *src, int64_t rows, int64_t cols, int64_t row, float *dst,
			  size_t dst_size)
{
	struct layout l;
	ssize_t size, row_bytes;

	if (!type_valid(type) || !src || !dst || row < 0 || row >= rows)
		return -EINVAL;
	if ((size = qg_matrix_size(type, rows, cols)) < 0 || (row_bytes = qg_row_size(type, cols)) < 0)
		return size < 0 ? size : row_bytes;
	if ((uint64_t)cols > SSIZE_MAX / sizeof(float))
		return -EOVERFLOW;
	if (dst_size < (size_t)cols * sizeof(float))
		return -ENOBUFS;
	if (overlaps(src, (size_t)size, dst, (size_t)cols * sizeof(float)))
		return -EINVAL;
	if (types[type].row_group == 1)	/* a plain row lies whole at its place */
		return qg_dequantize(type, (const uint8_t *)src + (size_t)row * (size_t)row_bytes, dst, dst_size, 1,
				     cols);
	layout_init(&l, type);
	dequantize_layout_row(&l, src, row, cols / QG_QK, dst);
	return (ssize_t)((size_t)cols * sizeof(float));
}

/*
 * Plain Q4_0 to an interleaved layout (TO_PACKED) or back, a group's block
 * at a time: scales moved, quants moved ILEAVE bytes at a time through a
 * word with the mask applied to all its bytes at once.  The same bytes as
 * the byte-by-byte rule (qg_repack_ref), at memory speed.
 */
static void repack_q4_words(const struct type_info *packed, int to_packed, uint8_t *dst, const uint8_t *src,
			    int64_t rows, int64_t nb)
{
	const int R = packed->row_group, I = packed->ileave, chunks = 16 / I;
	const size_t gblock = (size_t)R * 18;
	const uint64_t m8 = 0x0101010101010101ull * packed->mask;

	for (int64_t g = 0; g < rows / R; g++) {
		for (int64_t b = 0; b < nb; b++) {
			uint8_t *gb = (to_packed ? dst : (uint8_t *)src) + ((size_t)g * (size_t)nb + (size_t)b) * gblock;
			for (int r = 0; r < R; r++) {
				uint8_t *pb = (to_packed ? (uint8_t *)src : dst) +
					      (((size_t)g * R + (size_t)r) * (size_t)nb + (size_t)b) * 18;
				uint8_t *from_d = to_packed ? pb : gb + 2 * r, *to_d = to_packed ? gb + 2 * r : pb;
				to_d[0] = from_d[0];
				to_d[1] = from_d[1];
				for (int c = 0; c < chunks; c++) {
					uint8_t *plain = pb + 2 + c * I, *ilv = gb + 2 * R + ((size_t)c * R + r) * I;
					uint8_t *in = to_packed ? plain : ilv, *out = to_packed ? ilv : plain;
					if (I == 8) {
						uint64_t w;
						memcpy(&w, in, 8);
						w ^= m8;
						memcpy(out, &w, 8);
					} else {
						uint32_t w;
						memcpy(&w, in, 4);
						w ^= (uint32_t)m8;
						memcpy(out, &w, 4);
					}
				}
			}
		}
	}
}

ssize_t qg_repack(enum qg_type to, void *dst, size_t dst_size,
		  enum qg_type from, const void *src, int64_t rows, int64_t cols)
{
	ssize_t size = qg_matrix_size(to, rows, cols);

	/* plain Q4_0 to or from an interleaved layout: whole words (checked as the reference checks) */
	if (type_valid(to) && type_valid(from) && src && dst && size >= 0 && dst_size >= (size_t)size &&
	    qg_matrix_size(from, rows, cols) >= 0 && !overlaps(src, (size_t)size, dst, (size_t)size) &&
	    ((from == QG_TYPE_Q4_0 && types[to].base == QG_TYPE_Q4_0 && types[to].row_group > 1) ||
	     (to == QG_TYPE_Q4_0 && types[from].base == QG_TYPE_Q4_0 && types[from].row_group > 1))) {
		const struct type_info *packed = &types[from == QG_TYPE_Q4_0 ? to : from];
		repack_q4_words(packed, from == QG_TYPE_Q4_0, dst, src, rows, cols / QG_QK);
		return size;
	}
	return qg_repack_ref(to, dst, dst_size, from, src, rows, cols);
}

ssize_t qg_repack_ref(enum qg_type to, void *dst, size_t dst_size,
		      enum qg_type from, const void *src, int64_t rows, int64_t cols)
{
	struct layout lf, lt;
	ssize_t size, in_size;

	if (!type_valid(to) || !type_valid(from) || !src || !dst)
		return -EINVAL;
	enum qg_type base = types[to].base;
	if (to == from && types[to].block_values == QG_QK_K) {
		/* the K-quants have one layout: a copy */
		if ((size = qg_matrix_size(to, rows, cols)) < 0)
			return size;
		if (dst_size < (size_t)size)
			return -ENOBUFS;
		if (overlaps(src, (size_t)size, dst, (size_t)size))
			return -EINVAL;
		memcpy(dst, src, (size_t)size);
		return size;
	}
	if (types[from].base != base || (base != QG_TYPE_Q4_0 && base != QG_TYPE_Q8_0))
		return -EINVAL;
	if ((in_size = qg_matrix_size(from, rows, cols)) < 0)
		return in_size;
	if ((size = qg_matrix_size(to, rows, cols)) < 0)
		return size;
	if (dst_size < (size_t)size)
		return -ENOBUFS;
	if (overlaps(src, (size_t)in_size, dst, (size_t)size))
		return -EINVAL;

	int64_t nb = cols / QG_QK;
	layout_init(&lf, from);
	layout_init(&lt, to);
	for (int64_t row = 0; row < rows; row++) {
		for (int64_t b = 0; b < nb; b++) {
			struct rowblock blk;
			layout_get(&lf, src, row, nb, b, &blk);
			layout_put(&lt, dst, row, nb, b, &blk);
		}
	}
	return size;
}
