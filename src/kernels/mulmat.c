/*
 * mulmat.c - Y = X * W^T: activation quantization, then GEMM/GEMV or a
 * plain dot product per output, split across the caller's threads.
 *
 * Scratch (what phase 1 writes and phase 2 reads), for K/32 = NB blocks:
 *   interleaved Q4_0 W:  N/4 groups of NB block_q8_0x4 (rows 4g..4g+3 of X,
 *                        interleaved as the kernel's act_ileave says), then
 *                        N%4 rows of NB block_q8_0 (the last rows of X),
 *                        then (from the next multiple of 64) the groups'
 *                        facts if the kernel takes them (act_facts)
 *   Q4_0 W:              N rows of NB block_q8_0
 *   Q8_0 W:              the same, then (from the next multiple of 8)
 *                        N * NB qg_q8_0_aux, one per block in order
 *   Q8_0_4X4 W:          N/4 groups of NB qg_q8_0x4_act (rows 4g..4g+3
 *                        of X, each row quantized as a lone row is),
 *                        then N%4 rows of NB block_q8_0
 *   Q4_K, Q6_K W:        N rows of K/256 block_q8_K (4-byte aligned: their
 *                        scale is a float)
 *   F32, F16 W:          nothing (X is read as it is)
 * Other blocks hold only 2-byte fields: any 4-byte-aligned scratch works, and 64
 * keeps every thread's writes on cache lines of its own most of the time.
 *
 * Splitting: phase 1 hands out units (a group of four rows, or one row)
 * and phase 2 row groups of W, both as the even split
 * [u*ith/nth, u*(ith+1)/nth), computed as q*ith + r*ith/nth with u = q*nth + r
 * so that nothing overflows for any u and nth up to INT_MAX; shares differ
 * by at most one unit.
 *
 * Phase 2 walks its rows of W in tiles of about TILE_BYTES and runs every
 * activation row against a tile before moving on, so the tile is read from
 * memory once and from cache by the other rows.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "fp16.h"
#include "kquant.h"
#include "mulmat.h"

/*
 * Bytes of W one phase-2 step works on: a quarter of a 1 MB L2 (Zen 4,
 * Neoverse N1 and V1 have one a core).  The activations stream past the
 * tile once per step, so a larger tile reads them fewer times: from 128
 * to 256 KB the Q4_0 8x8 GEMM went from 29-38% to 47-60% of the int8
 * peak at n = 512 (its activations no longer fit the L2), 54 to 62% at
 * n = 32 (bench-mulmat, one thread).
 */
#define TILE_BYTES (256 * 1024)
/* At most this many activation groups per GEMM call (keeps NR an int). */
#define GEMM_GROUPS (1 << 16)

/* The start of share ITH of NTH when U units are split evenly. */
static inline int64_t share_start(int64_t u, int ith, int nth)
{
	int64_t q = u / nth, r = u % nth;

	return q * ith + r * ith / nth;
}

/* The kernel an interleaved MM runs (its own, or the dispatcher's). */
static const struct qg_kernel *mm_kernel(const struct qg_mm *mm, int layout)
{
	return mm->kernel ? mm->kernel : qg_kernel_for(layout);
}

/* Bytes of GEMM facts per block of a group that MM's kernel takes; 0: none. */
static size_t facts_size(const struct qg_mm *mm)
{
	const int layout = qg_layout_of(mm->wtype);

	if (layout < 0)
		return 0;
	const struct qg_kernel *kn = mm_kernel(mm, layout);
	return kn->act_facts && kn->gemm_facts ? kn->act_facts_size : 0;
}

static int is_kquant(enum qg_type t)
{
	return t == QG_TYPE_Q4_K || t == QG_TYPE_Q6_K;
}

/* Bytes of scratch for MM (valid shapes); 0 and *OVF set if they do not fit. */
static size_t scratch_bytes(const struct qg_mm *mm, int *ovf)
{
	const uint64_t nb = (uint64_t)mm->k / QG_QK;
	const uint64_t n = (uint64_t)mm->n;
	uint64_t groups = 0, rows = 0;

	*ovf = 0;
	if (is_kquant(mm->wtype)) {
		const uint64_t rb = (uint64_t)mm->k / QG_QK_K * sizeof(struct qg_block_q8_K);
		if (n > (uint64_t)PTRDIFF_MAX / rb) {
			*ovf = 1;
			return 0;
		}
		return (size_t)(n * rb);
	}
	if (qg_type_is_interleaved(mm->wtype)) {
		groups = n / 4;
		rows = n % 4;
	} else if (mm->wtype == QG_TYPE_Q4_0 || mm->wtype == QG_TYPE_Q8_0) {
		rows = n;
	} else {
		return 0;
	}
	/* nb < 2^26 */
	const uint64_t gbytes = nb * (mm->wtype == QG_TYPE_Q8_0_4X4 ? sizeof(struct qg_q8_0x4_act)
								       : sizeof(struct qg_block_q8_0x4));
	const uint64_t fbytes = nb * facts_size(mm);			/* a group's facts */
	/* Q8_0 W: each row's blocks, and their aux after all rows */
	const uint64_t rbytes = nb * (sizeof(struct qg_block_q8_0) +
				      (mm->wtype == QG_TYPE_Q8_0 ? sizeof(struct qg_q8_0_aux) : 0));
	const uint64_t lim = PTRDIFF_MAX < SIZE_MAX ? (uint64_t)PTRDIFF_MAX - 8 : (uint64_t)SIZE_MAX - 8;
	if (groups > lim / (gbytes + fbytes) || rows > lim / rbytes ||
	    groups * (gbytes + fbytes) + 64 > lim - rows * rbytes) {
		*ovf = 1;
		return 0;
	}
	if (fbytes && groups)
		return (size_t)(((groups * gbytes + rows * rbytes + 63) & ~(uint64_t)63) + groups * fbytes);
	return (size_t)(groups * gbytes + rows * rbytes + (mm->wtype == QG_TYPE_Q8_0 ? 8 : 0));
}

/* Where the GEMM facts of an interleaved W's activation groups start in SCRATCH (scratch_bytes). */
static void *act_facts_at(const struct qg_mm *mm, const void *scratch)
{
	const size_t nb = (size_t)(mm->k / QG_QK), groups = (size_t)(mm->n / 4), rows = (size_t)(mm->n % 4);
	const size_t codes = groups * nb * sizeof(struct qg_block_q8_0x4) + rows * nb * sizeof(struct qg_block_q8_0);

	return (void *)((uintptr_t)scratch + ((codes + 63) & ~(size_t)63));
}

/* Where the qg_q8_0_aux of a Q8_0 W's activations start in SCRATCH. */
static struct qg_q8_0_aux *q8_0_aux(const struct qg_mm *mm, const void *scratch)
{
	const size_t rows = (size_t)mm->n * (size_t)(mm->k / QG_QK) * sizeof(struct qg_block_q8_0);

	return (struct qg_q8_0_aux *)((uintptr_t)scratch + ((rows + 7) & ~(size_t)7));
}

int qg_mul_mat_check(const struct qg_mm *mm)
{
	if (!mm || !mm->w || !mm->x || !mm->y)
		return -EINVAL;
	if (!qg_type_is_weight(mm->wtype))
		return -EINVAL;
	if (mm->m <= 0 || mm->k <= 0 || mm->n <= 0)
		return -EINVAL;
	if (mm->ldx < (uint64_t)mm->k || mm->ldy < (uint64_t)mm->m)
		return -EINVAL;
	/* kernels take K and row counts as int */
	if (mm->k > INT_MAX || mm->m > INT_MAX)
		return -EOVERFLOW;

	/* W: shape suits the type (K multiple of 32, M of the row group), size fits */
	ssize_t wsize = qg_matrix_size(mm->wtype, mm->m, mm->k);
	if (wsize < 0)
		return (int)wsize;

	/* X and Y: the last row ends inside the address space */
	const uint64_t fmax = (uint64_t)PTRDIFF_MAX / sizeof(float);
	const uint64_t n1 = (uint64_t)mm->n - 1;
	if ((uint64_t)mm->ldx > fmax || (uint64_t)mm->ldy > fmax)
		return -EOVERFLOW;
	if (n1 > 0 && (n1 > (fmax - (uint64_t)mm->k) / mm->ldx ||
		       n1 > (fmax - (uint64_t)mm->m) / mm->ldy))
		return -EOVERFLOW;

	if (mm->kq_kernel && ((!is_kquant(mm->wtype) && mm->wtype != QG_TYPE_Q8_0 && mm->wtype != QG_TYPE_Q8_0_4X4) ||
			      (unsigned)mm->kq_kernel->family >= QG_KF_COUNT ||
			      qg_kq_kernel_get(mm->kq_kernel->family) != mm->kq_kernel))
		return -EINVAL;

	int layout = qg_layout_of(mm->wtype);
	if (layout >= 0 && mm->kernel) {
		/* a kernel of this layout's table that this CPU runs, and nothing else */
		const struct qg_kernel *kn = mm->kernel;
		if ((unsigned)kn->family >= QG_KF_COUNT || qg_kernel_get(kn->family, layout) != kn)
			return -EINVAL;
	}
	if (layout >= 0) {
		const struct qg_kernel *kn = mm_kernel(mm, layout);
		if (!kn->gemv || !kn->gemm || !kn->quant_row || !kn->quant_x4 ||
		    (kn->act_ileave != 4 && kn->act_ileave != 8) || !kn->act_facts != !kn->gemm_facts ||
		    (kn->act_facts && (kn->act_facts_size == 0 || kn->act_facts_size % 4 || kn->act_facts_size > 256)))
			return -EINVAL;
	}
	/* after the kernel is known good: the facts it takes are part of the scratch */
	int ovf;
	scratch_bytes(mm, &ovf);
	if (ovf)
		return -EOVERFLOW;
	return 0;
}

size_t qg_mul_mat_scratch_size(const struct qg_mm *mm)
{
	int ovf;

	if (qg_mul_mat_check(mm) != 0)
		return 0;
	return scratch_bytes(mm, &ovf);
}

uintptr_t qg_mul_mat_act_form(const struct qg_mm *mm)
{
	if (qg_mul_mat_check(mm) != 0)
		return 0;
	const int layout = qg_layout_of(mm->wtype);
	/* an interleaved layout's kernel chooses its quantizers and interleave: one kernel, one form */
	if (layout >= 0)
		return (uintptr_t)mm_kernel(mm, layout);
	if (is_kquant(mm->wtype))
		return 2;	/* Q8_K rows; no kernel sits at address 1, 2 or 3 */
	if (mm->wtype == QG_TYPE_Q4_0)
		return 1;	/* Q8_0 rows */
	if (mm->wtype == QG_TYPE_Q8_0)
		return 3;	/* Q8_0 rows and their aux */
	if (mm->wtype == QG_TYPE_Q8_0_4X4)
		return 4;	/* groups of qg_q8_0x4_act, then Q8_0 rows: every table's kernels read these */
	return 0;
}

const struct qg_kernel *qg_mul_mat_kernel(const struct qg_mm *mm)
{
	int layout = mm ? qg_layout_of(mm->wtype) : -EINVAL;

	return layout >= 0 ? mm_kernel(mm, layout) : NULL;
}

void qg_mul_mat_quantize(const struct qg_mm *mm, void *scratch, int ith, int nth)
{
	if (nth <= 0 || ith < 0 || ith >= nth || qg_mul_mat_check(mm) != 0)
		return;

	const int64_t nb = mm->k / QG_QK;
	const int layout = qg_layout_of(mm->wtype);

	if (layout >= 0) {
		const struct qg_kernel *kn = mm_kernel(mm, layout);
		const int64_t groups = mm->n / 4, units = groups + mm->n % 4;
		struct qg_block_q8_0x4 *ga = scratch;
		struct qg_block_q8_0 *ra = (struct qg_block_q8_0 *)(ga + groups * nb);
		const size_t fs = facts_size(mm);
		char *facts = fs ? act_facts_at(mm, scratch) : NULL;
		const int64_t u0 = share_start(units, ith, nth), u1 = share_start(units, ith + 1, nth);
		for (int64_t u = u0; u < u1; u++) {
			if (u < groups) {
				kn->quant_x4(mm->x + (size_t)u * 4 * mm->ldx, mm->ldx, ga + u * nb,
					     mm->k, kn->act_ileave);
				if (facts)
					kn->act_facts(ga + u * nb, nb, kn->act_ileave, facts + (size_t)(u * nb) * fs);
			} else {
				int64_t r = u - groups;
				kn->quant_row(mm->x + (size_t)(groups * 4 + r) * mm->ldx, ra + r * nb, mm->k);
			}
		}
	} else if (mm->wtype == QG_TYPE_Q8_0_4X4) {
		const int64_t groups = mm->n / 4, units = groups + mm->n % 4;
		struct qg_q8_0x4_act *ga = scratch;
		struct qg_block_q8_0 *ra = (struct qg_block_q8_0 *)(ga + groups * nb);
		const int64_t u0 = share_start(units, ith, nth), u1 = share_start(units, ith + 1, nth);
		for (int64_t u = u0; u < u1; u++) {
			if (u >= groups) {
				const int64_t r = u - groups;
				qg_quantize_row_q8_0(mm->x + (size_t)(groups * 4 + r) * mm->ldx, ra + r * nb, mm->k);
				continue;
			}
			/* block by block: the four rows' blocks as a lone row's, then interleaved */
			for (int64_t b = 0; b < nb; b++) {
				struct qg_block_q8_0 blk[4];
				for (int r = 0; r < 4; r++)
					qg_quantize_row_q8_0(mm->x + (size_t)(u * 4 + r) * mm->ldx + b * QG_QK, &blk[r], QG_QK);
				qg_q8_0x4_act_pack(&ga[u * nb + b], blk, 1, 1);
			}
		}
	} else if (is_kquant(mm->wtype)) {
		struct qg_block_q8_K *ra = scratch;
		const int64_t nbk = mm->k / QG_QK_K;
		const int64_t r0 = share_start(mm->n, ith, nth), r1 = share_start(mm->n, ith + 1, nth);
		for (int64_t r = r0; r < r1; r++)
			qg_quantize_row_q8_K(mm->x + (size_t)r * mm->ldx, ra + r * nbk, mm->k);
	} else if (mm->wtype == QG_TYPE_Q4_0 || mm->wtype == QG_TYPE_Q8_0) {
		struct qg_block_q8_0 *ra = scratch;
		struct qg_q8_0_aux *aux = mm->wtype == QG_TYPE_Q8_0 ? q8_0_aux(mm, scratch) : NULL;
		const int64_t r0 = share_start(mm->n, ith, nth), r1 = share_start(mm->n, ith + 1, nth);
		for (int64_t r = r0; r < r1; r++) {
			qg_quantize_row_q8_0(mm->x + (size_t)r * mm->ldx, ra + r * nb, mm->k);
			for (int64_t b = 0; aux && b < nb; b++) {
				const struct qg_block_q8_0 *blk = &ra[r * nb + b];
				int32_t sum = 0;
				for (int i = 0; i < QG_QK; i++)
					sum += blk->qs[i];
				aux[r * nb + b] = (struct qg_q8_0_aux){ .d = qg_fp16_to_fp32(blk->d), .nsum = -128 * sum };
			}
		}
	}
	/* F32 and F16 read X as it is */
}

/* Rows per tile: TILE_BYTES of W, a multiple of the row group R, at least R. */
static int64_t tile_rows(size_t row_bytes, int R)
{
	int64_t t = (int64_t)(TILE_BYTES / row_bytes);

	t -= t % R;
	return t < R ? R : t;
}

/* Interleaved W: rows [ROW0, ROW1) of Y, every activation row. */
static void compute_interleaved(const struct qg_mm *mm, const void *scratch, int layout,
				int64_t row0, int64_t row1)
{
	const struct qg_kernel *kn = mm_kernel(mm, layout);
	const int R = qg_type_row_group(mm->wtype);
	const int64_t nb = mm->k / QG_QK;
	const size_t row_bytes = (size_t)nb * sizeof(struct qg_block_q4_0);
	const int64_t groups = mm->n / 4, rem = mm->n % 4;
	const struct qg_block_q8_0x4 *ga = scratch;
	const struct qg_block_q8_0 *ra = (const struct qg_block_q8_0 *)(ga + groups * nb);
	const size_t fs = facts_size(mm);
	const char *facts = fs ? act_facts_at(mm, scratch) : NULL;
	const int64_t tile = groups || rem > 1 ? tile_rows(row_bytes, R) : row1 - row0;
	const int k = (int)mm->k;

	for (int64_t t0 = row0; t0 < row1; t0 += tile) {
		const int nc = (int)(row1 - t0 < tile ? row1 - t0 : tile);
		const uint8_t *w = (const uint8_t *)mm->w + (size_t)t0 * row_bytes;
		for (int64_t g = 0; g < groups; g += GEMM_GROUPS) {
			const int64_t ng = groups - g < GEMM_GROUPS ? groups - g : GEMM_GROUPS;
			if (facts)
				kn->gemm_facts(k, mm->y + (size_t)g * 4 * mm->ldy + t0, mm->ldy, w, ga + g * nb,
					       facts + (size_t)(g * nb) * fs, (int)(ng * 4), nc);
			else
				kn->gemm(k, mm->y + (size_t)g * 4 * mm->ldy + t0, mm->ldy, w, ga + g * nb,
					 (int)(ng * 4), nc);
		}
		if (rem > 1 && kn->gemv_rows)
			kn->gemv_rows(k, mm->y + (size_t)(groups * 4) * mm->ldy + t0, mm->ldy, w, ra, (int)rem, nc);
		else
			for (int64_t r = 0; r < rem; r++)
				kn->gemv(k, mm->y + (size_t)(groups * 4 + r) * mm->ldy + t0, w, ra + r * nb, nc);
	}
}

/* One F32 or F16 row of W against one row of X, accumulated in float. */
static float dot_float(enum qg_type t, const void *wrow, const float *x, int64_t k)
{
	float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
	int64_t i = 0;

	if (t == QG_TYPE_F32) {
		const float *w = wrow;
		for (; i + 4 <= k; i += 4) {
			s0 += w[i] * x[i];
			s1 += w[i + 1] * x[i + 1];
			s2 += w[i + 2] * x[i + 2];
			s3 += w[i + 3] * x[i + 3];
		}
		for (; i < k; i++)
			s0 += w[i] * x[i];
	} else {
		const uint16_t *w = wrow;
		for (; i + 4 <= k; i += 4) {
			s0 += qg_fp16_to_fp32(w[i]) * x[i];
			s1 += qg_fp16_to_fp32(w[i + 1]) * x[i + 1];
			s2 += qg_fp16_to_fp32(w[i + 2]) * x[i + 2];
			s3 += qg_fp16_to_fp32(w[i + 3]) * x[i + 3];
		}
		for (; i < k; i++)
			s0 += qg_fp16_to_fp32(w[i]) * x[i];
	}
	return (s0 + s1) + (s2 + s3);
}

/* qg_vec_dot_q8_0_q8_0 as a qg_kq_dot_fn. */
static float dot_q8_0_ref(int64_t k, const void *restrict w, const void *restrict a)
{
	return qg_vec_dot_q8_0_q8_0(k, w, a);
}

/*
 * Q4_K, Q6_K, Q8_0 W: rows [ROW0, ROW1) of Y, every activation row, in
 * tiles as below: by the family's GEMM where it has one and N is at
 * least its gemm_rows (Q8_0: its q8_0_gemm_rows if set), else one
 * activation row at a time by the family's GEMV over the tile's weight
 * rows where it has one (it keeps several weight rows in the lanes of
 * its vectors, and counts fewer instructions per activation row than
 * the four-row kernels: NEON's q4_K 478 per 1000 MACs under qemu
 * against 642; a family with x4_before_gemv gives the groups of four
 * activation rows to the four-row kernel first), else four activation
 * rows at a time where the kernels can, and one weight row at a time.
 * All give the one-row kernel's bits.
 */
static void compute_kquant(const struct qg_mm *mm, const void *scratch, int64_t row0, int64_t row1)
{
	const struct qg_kq_kernel *kn = mm->kq_kernel ? mm->kq_kernel : qg_kq_kernel_for();
	qg_kq_dot_fn dot;
	qg_kq_dot4_fn dot4;
	qg_kq_gemv_fn gemv;
	size_t ab;	/* bytes of one activation block */
	int qk;		/* values per activation block */
	if (mm->wtype == QG_TYPE_Q8_0) {
		dot = kn->q8_0 ? kn->q8_0 : dot_q8_0_ref;
		dot4 = kn->q8_0_x4;
		gemv = kn->q8_0_gemv;
		ab = sizeof(struct qg_block_q8_0);
		qk = QG_QK;
	} else {
		dot = mm->wtype == QG_TYPE_Q4_K ? kn->q4_K : kn->q6_K;
		dot4 = mm->wtype == QG_TYPE_Q4_K ? kn->q4_K_x4 : kn->q6_K_x4;
		gemv = mm->wtype == QG_TYPE_Q4_K ? kn->q4_K_gemv : kn->q6_K_gemv;
		ab = sizeof(struct qg_block_q8_K);
		qk = QG_QK_K;
	}
	const qg_kq_gemm_fn gemm = mm->wtype == QG_TYPE_Q4_K ? kn->q4_K_gemm
				   : mm->wtype == QG_TYPE_Q6_K ? kn->q6_K_gemm : NULL;
	const qg_q8_0_gemm_fn gemm8 = mm->wtype == QG_TYPE_Q8_0 ? kn->q8_0_gemm : NULL;
	const int gemm_rows = gemm8 && kn->q8_0_gemm_rows > 0 ? kn->q8_0_gemm_rows : kn->gemm_rows;
	const int use_gemm = (gemm || gemm8) && mm->n >= gemm_rows;
	if (gemv && !kn->x4_before_gemv)
		dot4 = NULL;
	const size_t row_bytes = (size_t)qg_row_size(mm->wtype, mm->k);
	/*
	 * the GEMMs build tiles of 16 weight rows (AVX2's of 8); one
	 * activation row reuses no weights, and its GEMV takes all its rows
	 * at once (what it prepares of the activation row serves them all)
	 */
	const int64_t tile = mm->n == 1 && gemv ? row1 - row0 : tile_rows(row_bytes, use_gemm ? 16 : 1);
	const int64_t nbk = mm->k / qk;
	const size_t arow = (size_t)nbk * ab;
	const uint8_t *xa = scratch;

	for (int64_t t0 = row0; t0 < row1; t0 += tile) {
		const int64_t t1 = row1 - t0 < tile ? row1 : t0 + tile;
		int64_t i = 0;
		for (; use_gemm && i < mm->n; i += GEMM_GROUPS) {
			const int64_t nr = mm->n - i < GEMM_GROUPS ? mm->n - i : GEMM_GROUPS;
			float *y = mm->y + (size_t)i * mm->ldy + (size_t)t0;
			const uint8_t *w = (const uint8_t *)mm->w + (size_t)t0 * row_bytes;
			if (gemm8)
				gemm8(mm->k, y, mm->ldy, w, row_bytes, (int)(t1 - t0), xa + (size_t)i * arow,
				      q8_0_aux(mm, scratch) + i * nbk, (int)nr);
			else
				gemm(mm->k, y, mm->ldy, w, row_bytes, (int)(t1 - t0), xa + (size_t)i * arow, (int)nr);
		}
		for (; dot4 && i + 4 <= mm->n; i += 4) {
			for (int64_t r = t0; r < t1; r++) {
				float out[4];
				dot4(mm->k, (const uint8_t *)mm->w + (size_t)r * row_bytes, xa + (size_t)i * arow, nbk, out);
				for (int j = 0; j < 4; j++)
					mm->y[(size_t)(i + j) * mm->ldy + (size_t)r] = out[j];
			}
		}
		for (; i < mm->n; i++) {
			float *y = mm->y + (size_t)i * mm->ldy;
			if (gemv) {
				gemv(mm->k, y + t0, (const uint8_t *)mm->w + (size_t)t0 * row_bytes, row_bytes,
				     (int)(t1 - t0), xa + (size_t)i * arow);
				continue;
			}
			for (int64_t r = t0; r < t1; r++)
				y[r] = dot(mm->k, (const uint8_t *)mm->w + (size_t)r * row_bytes, xa + (size_t)i * arow);
		}
	}
}

/*
 * Q8_0_4X4 W: rows [ROW0, ROW1) of Y (whole groups of four), every
 * activation row, in tiles: the groups of four activation rows by the
 * table's GEMM, the rest one at a time by its GEMV (qg_kq_portable's
 * where the table has none).  Both give the layout's bits, so where a
 * row falls does not change its result.  One activation row's GEMV
 * takes all its rows at once: it reuses no weights.
 */
static void compute_q8_0_4x4(const struct qg_mm *mm, const void *scratch, int64_t row0, int64_t row1)
{
	const struct qg_kq_kernel *kt = mm->kq_kernel ? mm->kq_kernel : qg_kq_kernel_for();
	const struct qg_kq_kernel *kn = kt->q8_0_4x4_gemv && kt->q8_0_4x4_gemm ? kt : &qg_kq_portable;
	const int64_t nb = mm->k / QG_QK, groups = mm->n / 4, rem = mm->n % 4;
	const size_t row_bytes = (size_t)qg_row_size(mm->wtype, mm->k);
	const struct qg_q8_0x4_act *ga = scratch;
	const struct qg_block_q8_0 *ra = (const struct qg_block_q8_0 *)(ga + groups * nb);
	const int64_t tile = mm->n == 1 ? row1 - row0 : tile_rows(row_bytes, 8);

	for (int64_t t0 = row0; t0 < row1; t0 += tile) {
		const int nc = (int)(row1 - t0 < tile ? row1 - t0 : tile);
		const uint8_t *w = (const uint8_t *)mm->w + (size_t)t0 * row_bytes;
		for (int64_t g = 0; g < groups; g += GEMM_GROUPS) {
			const int64_t ng = groups - g < GEMM_GROUPS ? groups - g : GEMM_GROUPS;
			kn->q8_0_4x4_gemm(mm->k, mm->y + (size_t)g * 4 * mm->ldy + t0, mm->ldy, w, 4 * row_bytes, nc,
					  ga + g * nb, (int)(ng * 4));
		}
		for (int64_t r = 0; r < rem; r++)
			kn->q8_0_4x4_gemv(mm->k, mm->y + (size_t)(groups * 4 + r) * mm->ldy + t0, w, 4 * row_bytes, nc,
					  ra + r * nb);
	}
}

/* F32, F16, Q4_0 W: rows [ROW0, ROW1) of Y, every activation row. */
static void compute_rows(const struct qg_mm *mm, const void *scratch, int64_t row0, int64_t row1)
{
	const size_t row_bytes = (size_t)qg_row_size(mm->wtype, mm->k);
	const int64_t tile = tile_rows(row_bytes, 1);
	const int64_t nb = mm->k / QG_QK;
	const struct qg_block_q8_0 *xa = scratch;

	for (int64_t t0 = row0; t0 < row1; t0 += tile) {
		const int64_t t1 = row1 - t0 < tile ? row1 : t0 + tile;
		for (int64_t i = 0; i < mm->n; i++) {
			float *y = mm->y + (size_t)i * mm->ldy;
			for (int64_t r = t0; r < t1; r++) {
				const void *w = (const uint8_t *)mm->w + (size_t)r * row_bytes;
				switch (mm->wtype) {
				case QG_TYPE_Q4_0:
					y[r] = qg_vec_dot_q4_0_q8_0(mm->k, w, xa + i * nb);
					break;
				default:
					y[r] = dot_float(mm->wtype, w, mm->x + (size_t)i * mm->ldx, mm->k);
					break;
				}
			}
		}
	}
}

void qg_mul_mat_rows(const struct qg_mm *mm, int ith, int nth, int64_t *row0, int64_t *row1)
{
	const int R = qg_type_row_group(mm->wtype);

	*row0 = *row1 = 0;
	if (nth <= 0 || ith < 0 || ith >= nth || R <= 0)
		return;
	const int64_t groups = mm->m / R;
	*row0 = share_start(groups, ith, nth) * R;
	*row1 = share_start(groups, ith + 1, nth) * R;
}

void qg_mul_mat_compute(const struct qg_mm *mm, const void *scratch, int ith, int nth)
{
	int64_t row0, row1;

	if (nth <= 0 || ith < 0 || ith >= nth || qg_mul_mat_check(mm) != 0)
		return;
	qg_mul_mat_rows(mm, ith, nth, &row0, &row1);

	const int layout = qg_layout_of(mm->wtype);

	if (row0 >= row1)
		return;
	if (layout >= 0)
		compute_interleaved(mm, scratch, layout, row0, row1);
	else if (mm->wtype == QG_TYPE_Q8_0_4X4)
		compute_q8_0_4x4(mm, scratch, row0, row1);
	else if (is_kquant(mm->wtype) || mm->wtype == QG_TYPE_Q8_0)
		compute_kquant(mm, scratch, row0, row1);
	else
		compute_rows(mm, scratch, row0, row1);
}

int qg_mul_mat(const struct qg_mm *mm, void *scratch)
{
	int err = qg_mul_mat_check(mm);

	if (err)
		return err;
	if (!scratch && qg_mul_mat_scratch_size(mm) > 0)
		return -EINVAL;
	qg_mul_mat_quantize(mm, scratch, 0, 1);
	qg_mul_mat_compute(mm, scratch, 0, 1);
	return 0;
}
