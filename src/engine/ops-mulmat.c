/*
 * ops-mulmat.c - MUL_MAT as an op: a node's batches handed to the matrix
 * kernels (src/kernels/mulmat.c), and a product computed once for the
 * rows of several graphs' nodes on the same weights (a batch's group).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "kernels.h"
#include "mulmat.h"
#include "ops.h"
#include "ops-cpu-impl.h"

/* The qg_mm of MUL_MAT node T for batch (I2, I3) of its result. */
static void mm_for(const struct qg_tensor *t, int64_t i2, int64_t i3, struct qg_mm *mm)
{
	const struct qg_tensor *w = t->src[0], *x = t->src[1];
	const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];

	memset(mm, 0, sizeof *mm);
	mm->wtype = w->type;
	mm->w = w->data ? (const char *)w->data + i2 / r2 * w->nb[2] + i3 / r3 * w->nb[3] : NULL;
	mm->m = w->ne[1];
	mm->k = w->ne[0];
	mm->x = x->data ? (const float *)((const char *)x->data + i2 * x->nb[2] + i3 * x->nb[3]) : NULL;
	mm->ldx = x->nb[1] / sizeof(float);
	mm->n = x->ne[1];
	mm->y = t->data ? (float *)((char *)t->data + i2 * t->nb[2] + i3 * t->nb[3]) : NULL;
	mm->ldy = t->nb[1] / sizeof(float);
}

int qg_op_mul_mat_check_data(const struct qg_tensor *t)
{
	struct qg_mm mm;

	mm_for(t, 0, 0, &mm);
	return qg_mul_mat_check(&mm);
}

size_t qg_op_mul_mat_slot(const struct qg_tensor *t)
{
	struct qg_mm mm;
	static const float dummy[1];

	mm_for(t, 0, 0, &mm);
	/* the size depends on shapes only: stand in for absent data */
	mm.w = mm.w ? mm.w : dummy;
	mm.x = mm.x ? mm.x : dummy;
	mm.y = mm.y ? mm.y : (float *)dummy;
	return align_up(qg_mul_mat_scratch_size(&mm));
}

int qg_op_mul_mat_compute(const struct qg_tensor *t, int phase, int ith, int nth, void *scratch)
{
	const size_t slot = qg_op_mul_mat_slot(t);
	struct qg_mm mm;
	int64_t b = 0;

	for (int64_t i3 = 0; i3 < t->ne[3]; i3++) {
		for (int64_t i2 = 0; i2 < t->ne[2]; i2++, b++) {
			/* weights that need no quantized activations (f32, f16) have no scratch at all */
			char *s = slot ? (char *)scratch + b * slot : NULL;
			mm_for(t, i2, i3, &mm);
			if (phase == 0)
				qg_mul_mat_quantize(&mm, s, ith, nth);
			else
				qg_mul_mat_compute(&mm, s, ith, nth);
		}
	}
	return 0;
}

bool qg_op_mul_mat_joins(const struct qg_tensor *a, const struct qg_tensor *b)
{
	const struct qg_tensor *t[2] = { a, b };

	for (int i = 0; i < 2; i++) {
		const struct qg_tensor *w = t[i]->src[0], *x = t[i]->src[1];
		if (t[i]->op != QG_OP_MUL_MAT || !w || !x || !w->data || !x->data || !t[i]->data)
			return false;
		if (w->ne[2] != 1 || w->ne[3] != 1 || x->type != QG_TYPE_F32 || x->nb[0] != sizeof(float) ||
		    x->ne[2] != 1 || x->ne[3] != 1 || !qg_tensor_is_contiguous(t[i]))
			return false;
	}
	return a->src[0]->data == b->src[0]->data && a->src[0]->type == b->src[0]->type &&
	       memcmp(a->src[0]->ne, b->src[0]->ne, sizeof a->src[0]->ne) == 0 &&
	       memcmp(a->src[0]->nb, b->src[0]->nb, sizeof a->src[0]->nb) == 0;
}

/* The product of T's weights over the N rows gathered in SLOT, into Y. */
static void group_mm(const struct qg_tensor *t, int64_t n, void *slot, float *y, struct qg_mm *mm)
{
	const struct qg_tensor *w = t->src[0];

	*mm = (struct qg_mm){ .wtype = w->type, .w = w->data, .m = w->ne[1], .k = w->ne[0], .x = slot,
			      .ldx = (size_t)w->ne[0], .n = n, .y = y, .ldy = (size_t)w->ne[1] };
}

/*
 * The activation rows a group of T's weights computes for N rows: on an
 * interleaved layout, rows past a multiple of four go through the GEMV one
 * by one, and three of them after a group of four cost more than one more
 * GEMM group of four (bench-decode --batch 7), so the group is padded with
 * a copy of its last row, whose result is dropped.  Three rows alone, or
 * two after a group, are not: there the GEMVs were as fast or faster.  A
 * row's bits do not depend on the rows beside it, so the padding changes
 * no result.
 */
static int64_t group_rows(const struct qg_tensor *t, int64_t n)
{
	const int64_t rem = n % 4;

	if (qg_layout_of(t->src[0]->type) < 0)
		return n;
	return n > 4 && rem == 3 ? n + 1 : n;
}

size_t qg_op_mul_mat_group_slot(const struct qg_tensor *t, int64_t n, size_t *y_bytes)
{
	static float dummy[1];
	struct qg_mm mm;
	const int64_t rows = group_rows(t, n);

	group_mm(t, rows, dummy, dummy, &mm);
	if (qg_mul_mat_check(&mm) != 0)
		return 0;
	*y_bytes = align_up((size_t)(rows * mm.m) * sizeof(float));
	return align_up((size_t)(rows * mm.k) * sizeof(float)) + align_up(qg_mul_mat_scratch_size(&mm));
}

/* The group T[0..N)'s product over every activation row (and the padding), reading QUANT, into Y: in *MM. */
static int group_of(const struct qg_tensor *const *t, size_t n, const void *quant, float *y, struct qg_mm *mm,
		    int64_t *rows, size_t *xbytes)
{
	*rows = 0;
	for (size_t i = 0; i < n; i++)
		*rows += t[i]->src[1]->ne[1];
	if (n == 0)
		return -EINVAL;
	const int64_t k = t[0]->src[0]->ne[0], padded = group_rows(t[0], *rows);
	*xbytes = align_up((size_t)(padded * k) * sizeof(float));
	/* the gathered rows (float weights read them), then their quantized form */
	group_mm(t[0], padded, (void *)quant, y, mm);
	return qg_mul_mat_check(mm) ? -EINVAL : 0;
}

int qg_op_mul_mat_group_prepare(const struct qg_tensor *const *t, size_t n, void *slot, const void *quant,
				const void **read)
{
	int64_t rows;
	size_t xbytes;
	struct qg_mm mm;
	static float dummy[1];

	*read = quant ? quant : slot;
	if (group_of(t, n, *read, dummy, &mm, &rows, &xbytes))
		return -EINVAL;
	if (quant)
		return 0;
	const int64_t k = mm.k;
	float *xs = slot;
	for (size_t i = 0; i < n; i++) {
		const struct qg_tensor *x = t[i]->src[1];
		for (int64_t r = 0; r < x->ne[1]; r++, xs += k)
			memcpy(xs, (const char *)x->data + r * x->nb[1], (size_t)k * sizeof(float));
	}
	for (int64_t r = rows; r < mm.n; r++, xs += k)
		memcpy(xs, xs - k, (size_t)k * sizeof(float));	/* the padding: the last row again */
	qg_mul_mat_quantize(&mm, (char *)slot + xbytes, 0, 1);
	return 0;
}

int qg_op_mul_mat_group_part(const struct qg_tensor *const *t, size_t n, int part, int parts, const void *read,
			     float *y)
{
	int64_t rows, r0, r1;
	size_t xbytes;
	struct qg_mm mm;

	if (group_of(t, n, read, y, &mm, &rows, &xbytes))
		return -EINVAL;
	qg_mul_mat_compute(&mm, (const char *)read + xbytes, part, parts);
	qg_mul_mat_rows(&mm, part, parts, &r0, &r1);
	if (r0 >= r1)
		return 0;
	const int64_t m = mm.m;
	const float *col = y;
	for (size_t i = 0; i < n; i++) {
		const struct qg_tensor *d = t[i];
		for (int64_t r = 0; r < d->ne[1]; r++, col += m)
			memcpy((char *)d->data + r * d->nb[1] + r0 * (int64_t)sizeof(float), col + r0,
			       (size_t)(r1 - r0) * sizeof(float));
	}
	return 0;
}

/*
 * Parts of at least this many weight rows: a part's call prepares little
 * (the GEMM's tiles are 16 rows), and four parts a thread let one that
 * lost its core for a while leave the rest to the others.
 */
#define GROUP_PART_ROWS 256
#define GROUP_PARTS_PER_THREAD 4

int qg_op_mul_mat_group_parts(const struct qg_tensor *t, int nth)
{
	const int64_t m = t->src[0]->ne[1];
	int64_t parts = m / GROUP_PART_ROWS;

	if (parts > (int64_t)nth * GROUP_PARTS_PER_THREAD)
		parts = (int64_t)nth * GROUP_PARTS_PER_THREAD;
	return parts < nth ? nth : (int)parts;
}

uintptr_t qg_op_act_form(const struct qg_tensor *t)
{
	struct qg_mm mm;

	if (t->op != QG_OP_MUL_MAT)
		return 0;
	mm_for(t, 0, 0, &mm);
	return qg_mul_mat_act_form(&mm);
}
