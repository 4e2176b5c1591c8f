/*
 * kernels-sve256.c - Q4_0_8x8 GEMV and GEMM with SVE at 256-bit vectors
 * (Graviton3, Neoverse V1): sdot for GEMV, smmla (i8mm) for GEMM.  Built
 * with -march=armv8.2-a+dotprod+i8mm+sve; the dispatcher calls it only
 * where HWCAP_SVE, HWCAP2_I8MM and HWCAP_ASIMDDP say so and the vector is
 * exactly 32 bytes.  Every entry point checks svcntb() again and hands a
 * call at any other length to the portable kernel: the loads and permutes
 * below take one vector to be one half of a weight chunk.
 *
 * The 8x8 layout (kernels.h): a block_q4_0x8 holds 8 fp16 scales, then
 * chunk 0 (bytes 0..7 of rows 0..7: values 0..7 in the low nibbles, 16..23
 * in the high ones) and chunk 1 (values 8..15 and 24..31), 64 bytes each.
 * One 32-byte vector is half a chunk: rows 0..3 or 4..7, 8 bytes per row,
 * two rows per 128-bit segment.  Nibbles are taken as (int8)(b << 4) and
 * (int8)(b & 0xF0), sixteen times their value (two instructions per
 * vector, kernels-arm.h).  SVE's scvtf has no fraction-bits form, so the
 * factor 16 goes into the activation scales (GEMM) or is divided out of
 * the finished sums (GEMV): exact either way, a power of two.
 *
 * GEMV: the activation's 8 bytes of each chunk are replicated into every
 * 64-bit lane (ld1rd), so an sdot of a weight vector with them leaves each
 * row's sum in two lanes; uzp1 + uzp2 + add fold a group's two vectors
 * into one of its 8 rows.  Four row groups share each block's activation
 * loads; two or three activation rows (gemv_rows) share each block's
 * weight loads and nibbles, each row with its own sdot and float steps.
 *
 * GEMM: smmla multiplies, per 128-bit segment, a 2x8 activation tile by a
 * 2x8 weight tile.  The activations (8-byte interleave) are read with
 * ld1rq, which puts the same two rows in both segments, against a weight
 * vector whose segments hold two different row pairs: 16 smmla per block
 * of one weight group by one group of four activation rows, and each
 * weight vector, its nibbles taken once, serves four activation groups.
 *
 * The block loops are asm, as in kernels-dotprod.c: the GEMM tile needs all
 * 32 vector registers (16 float accumulators, 8 weight vectors, 2 weight
 * scale vectors, 2 int tiles, 2 activation scale vectors, one activation
 * vector and one product), and GCC 12, given the same loop in intrinsics,
 * spills and copies registers: 56.4 instructions per 1000 MACs (GEMM,
 * qemu, tests/bench/insn-table.sh) against 43.6 here, and 138.0 against
 * 127.4 for GEMV.  Two int sums are cleared at a time by one ld2w of 64
 * zero bytes, as the NEON kernels clear four with one ld1.  The entry
 * points, the activation scales' table and the final scaling are C.
 *
 * Arithmetic: per block, an exact integer dot product I per output, then
 * acc = fma(I, fp32(dw) * fp32(da), acc) in block order: the i8mm kernels'
 * arithmetic, so the results equal theirs bit for bit.  The portable kernel
 * rounds per 8-byte chunk and without fusing, so against it the results
 * agree within the tolerance tests/kernels-test.c documents.
 */
#include "config.h"

#include <arm_sve.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels-arm.h"
#include "kernels.h"
#include "quant.h"

#define VL_BYTES 32		/* the vector length these kernels are written for */
#define W_BLOCK 144		/* bytes of a block_q4_0x8 */
#define W_QS 16			/* offset of its weights */

/* The portable kernels, for a call at another vector length. */
#define PORTABLE (&qg_kernels_portable[QG_LAYOUT_8X8])

/* Every vector and predicate register the asm loops use. */
#define SVE_CLOBBERS							\
	"cc", "memory", "p0", "z0", "z1", "z2", "z3", "z4", "z5", "z6", "z7", \
	"z8", "z9", "z10", "z11", "z12", "z13", "z14", "z15", "z16", "z17", \
	"z18", "z19", "z20", "z21", "z22", "z23", "z24", "z25", "z26", "z27", \
	"z28", "z29", "z30", "z31"

/*
 * One row group's weights for one block, from W (at its first weight
 * byte; the scales are the 16 bytes before): raw halves in z20-z23 (chunk
 * 0 rows 0-3, rows 4-7, chunk 1 rows 0-3, rows 4-7), their low nibbles
 * times 16 into z16-z19, the high ones in place.  Scales into Zs (ld1h puts
 * each fp16 in the low half of a 32-bit lane, where fcvt reads it).
 */
#define W_LOAD(w, zs)							\
	"ld1b {z20.b}, p0/z, [%[" w "]]\n\t"				\
	"ld1b {z21.b}, p0/z, [%[" w "], #1, mul vl]\n\t"		\
	"ld1b {z22.b}, p0/z, [%[" w "], #2, mul vl]\n\t"		\
	"ld1b {z23.b}, p0/z, [%[" w "], #3, mul vl]\n\t"		\
	"ld1h {z" zs ".s}, p0/z, [%[" w "], #-1, mul vl]\n\t"		\
	"lsl z16.b, z20.b, #4\n\t"					\
	"lsl z17.b, z21.b, #4\n\t"					\
	"lsl z18.b, z22.b, #4\n\t"					\
	"lsl z19.b, z23.b, #4\n\t"					\
	"and z20.b, z20.b, #0xf0\n\t"					\
	"and z21.b, z21.b, #0xf0\n\t"					\
	"and z22.b, z22.b, #0xf0\n\t"					\
	"and z23.b, z23.b, #0xf0\n\t"					\
	"fcvt z" zs ".s, p0/m, z" zs ".h\n\t"

/* --- GEMV: sdot, one to three activation rows ------------------------- */

/*
 * One loop serves one, two or three activation rows (NR): each row
 * group's weights are loaded and their nibbles taken once per block, then
 * each row takes its own sdot, folding, scale product and fused
 * multiply-add, the same instructions on the same values whatever NR is,
 * so a row's sums are the same bits alone or beside others.  A pass takes
 * 4 row groups against one row, 2 against two, 1 against three.
 *
 * Registers: the sums in z0-z3, z30, z31 (group g, row r: the (g*NR +
 * r)th), row 0's activation values 0-7, 8-15, 16-23, 24-31 (each 8 bytes
 * in every 64-bit lane) in z4-z6, z8, row 1's in z9-z12, row 2's in
 * z13-z15, z29; the rows' scales in lanes 0-2 of each 128-bit segment of
 * z7, where an indexed fmul can read them (an ld1 to the lane, one fcvtl
 * and one dup for the rows); z16-z23 the
 * weights (W_LOAD), z24/z25 the int sums of rows 0-3 / 4-7 (two lanes per
 * row), z26/z27 their folding, z28 the weight scales, z27 again their
 * product with a row's activation scale.  An activation pointer is at its
 * block.
 */
#define GV_ACT(a, lane, e0, e1, e2, e3)					\
	lane								\
	"ld1rd {z" e0 ".d}, p0/z, [%[" a "]]\n\t"			\
	"ld1rd {z" e1 ".d}, p0/z, [%[" a "], #8]\n\t"			\
	"ld1rd {z" e2 ".d}, p0/z, [%[" a "], #16]\n\t"			\
	"ld1rd {z" e3 ".d}, p0/z, [%[" a "], #24]\n\t"			\
	"add %[" a "], %[" a "], #32\n\t"

#define GV_ACT0 GV_ACT("a0", "ldr h7, [%[a0]], #2\n\t", "4", "5", "6", "8")
#define GV_ACT1 GV_ACT("a1", "ld1 {v7.h}[1], [%[a1]], #2\n\t", "9", "10", "11", "12")
#define GV_ACT2 GV_ACT("a2", "ld1 {v7.h}[2], [%[a2]], #2\n\t", "13", "14", "15", "29")
#define GV_SCALES "fcvtl v7.4s, v7.4h\n\t" "dup z7.q, z7.q[0]\n\t"

/* One row group's weights for the block; W moves to the next. */
#define GV_W(w)								\
	W_LOAD(w, "28")							\
	"add %[" w "], %[" w "], #144\n\t"

/* One row (values zE0..zE3, scale in lane R of z7) of the group into sum zACC. */
#define GV_DOT(e0, e1, e2, e3, r, acc)					\
	"ld2w {z24.s, z25.s}, p0/z, [%[zero]]\n\t"			\
	"sdot z24.s, z16.b, z" e0 ".b\n\t"				\
	"sdot z25.s, z17.b, z" e0 ".b\n\t"				\
	"sdot z24.s, z18.b, z" e1 ".b\n\t"				\
	"sdot z25.s, z19.b, z" e1 ".b\n\t"				\
	"sdot z24.s, z20.b, z" e2 ".b\n\t"				\
	"sdot z25.s, z21.b, z" e2 ".b\n\t"				\
	"sdot z24.s, z22.b, z" e3 ".b\n\t"				\
	"sdot z25.s, z23.b, z" e3 ".b\n\t"				\
	/* lanes 2j, 2j+1 hold row j's halves: even + odd lanes = rows 0..7 */ \
	"uzp1 z26.s, z24.s, z25.s\n\t"					\
	"uzp2 z27.s, z24.s, z25.s\n\t"					\
	"add z26.s, z26.s, z27.s\n\t"					\
	"fmul z27.s, z28.s, z7.s[" r "]\n\t"				\
	"scvtf z26.s, p0/m, z26.s\n\t"					\
	"fmla z" acc ".s, p0/m, z26.s, z27.s\n\t"

#define GV_R0(acc) GV_DOT("4", "5", "6", "8", "0", acc)
#define GV_R1(acc) GV_DOT("9", "10", "11", "12", "1", acc)
#define GV_R2(acc) GV_DOT("13", "14", "15", "29", "2", acc)

#define GV_LOOP(BODY)							\
	__asm__ volatile(						\
		"ptrue p0.b\n\t"					\
		"mov z0.s, #0\n\t" "mov z1.s, #0\n\t"			\
		"mov z2.s, #0\n\t" "mov z3.s, #0\n\t"			\
		"mov z30.s, #0\n\t" "mov z31.s, #0\n\t"			\
		"1:\n\t"						\
		BODY							\
		"subs %w[n], %w[n], #1\n\t"				\
		"b.ne 1b\n\t"						\
		"st1w {z0.s}, p0, [%[out]]\n\t"				\
		"st1w {z1.s}, p0, [%[out], #1, mul vl]\n\t"		\
		"st1w {z2.s}, p0, [%[out], #2, mul vl]\n\t"		\
		"st1w {z3.s}, p0, [%[out], #3, mul vl]\n\t"		\
		"st1w {z30.s}, p0, [%[out], #4, mul vl]\n\t"		\
		"st1w {z31.s}, p0, [%[out], #5, mul vl]\n\t"		\
		: [w0] "+&r"(w0), [w1] "+&r"(w1), [w2] "+&r"(w2), [w3] "+&r"(w3), \
		  [a0] "+&r"(a0), [a1] "+&r"(a1), [a2] "+&r"(a2), [n] "+&r"(n) \
		: [zero] "r"(qg_arm_zero64), [out] "r"(sum)		\
		: SVE_CLOBBERS)

/* Row groups a pass takes against NR rows: at most 6 sums. */
#define GEMV_NG(nr) ((nr) == 1 ? 4 : (nr) == 2 ? 3 : 2)

/*
 * NG (1 to GEMV_NG(NR)) row groups from W, GS bytes apart, against NR (1
 * to 3) activation rows of NB (> 0) blocks each, one after another from
 * A; row r writes its 8*NG outputs to S + r*LDS.
 */
static void gemv_groups(int nr, int ng, int nb, float *restrict s, size_t lds, const uint8_t *w, size_t gs,
			const struct qg_block_q8_0 *restrict a)
{
	float sum[48] __attribute__((aligned(32)));
	/* pointers past the NG groups and NR rows stay at the first: never read, always valid */
	const uint8_t *w0 = w + W_QS, *w1 = ng > 1 ? w0 + gs : w0;
	const uint8_t *w2 = ng > 2 ? w0 + 2 * gs : w0, *w3 = ng > 3 ? w0 + 3 * gs : w0;
	const struct qg_block_q8_0 *a0 = a, *a1 = nr > 1 ? a + nb : a, *a2 = nr > 2 ? a + 2 * (size_t)nb : a;
	long n = nb;

	if (nr == 1) {
		if (ng == 4)
			GV_LOOP(GV_ACT0 GV_SCALES GV_W("w0") GV_R0("0") GV_W("w1") GV_R0("1") GV_W("w2") GV_R0("2")
				GV_W("w3") GV_R0("3"));
		else if (ng == 3)
			GV_LOOP(GV_ACT0 GV_SCALES GV_W("w0") GV_R0("0") GV_W("w1") GV_R0("1") GV_W("w2") GV_R0("2"));
		else if (ng == 2)
			GV_LOOP(GV_ACT0 GV_SCALES GV_W("w0") GV_R0("0") GV_W("w1") GV_R0("1"));
		else
			GV_LOOP(GV_ACT0 GV_SCALES GV_W("w0") GV_R0("0"));
	} else if (nr == 2) {
		if (ng == 3)
			GV_LOOP(GV_ACT0 GV_ACT1 GV_SCALES GV_W("w0") GV_R0("0") GV_R1("1") GV_W("w1") GV_R0("2")
				GV_R1("3") GV_W("w2") GV_R0("30") GV_R1("31"));
		else if (ng == 2)
			GV_LOOP(GV_ACT0 GV_ACT1 GV_SCALES GV_W("w0") GV_R0("0") GV_R1("1") GV_W("w1") GV_R0("2")
				GV_R1("3"));
		else
			GV_LOOP(GV_ACT0 GV_ACT1 GV_SCALES GV_W("w0") GV_R0("0") GV_R1("1"));
	} else {
		if (ng == 2)
			GV_LOOP(GV_ACT0 GV_ACT1 GV_ACT2 GV_SCALES GV_W("w0") GV_R0("0") GV_R1("1") GV_R2("2")
				GV_W("w1") GV_R0("3") GV_R1("30") GV_R2("31"));
		else
			GV_LOOP(GV_ACT0 GV_ACT1 GV_ACT2 GV_SCALES GV_W("w0") GV_R0("0") GV_R1("1") GV_R2("2"));
	}
	/* the sums are 16 times too large (the nibbles' factor): exact to divide */
	const svbool_t pt = svptrue_b8();
	for (int g = 0; g < ng; g++)
		for (int r = 0; r < nr; r++)
			svst1_f32(pt, s + (size_t)r * lds + 8 * g,
				  svmul_n_f32_x(pt, svld1_f32(pt, sum + 8 * (g * nr + r)), 1.0f / 16));
}

/* NR (1 to 3) activation rows, LDS apart in S, against NC weight rows. */
static void gemv_any(int nr, int k, float *restrict s, size_t lds, const void *restrict w,
		     const void *restrict a, int nc)
{
	const int nb = k / QG_QK, ng = nc / 8, step = GEMV_NG(nr);
	const size_t gs = (size_t)nb * W_BLOCK;

	if (nb <= 0) {
		for (int r = 0; r < nr; r++)
			memset(s + (size_t)r * lds, 0, (size_t)nc * sizeof *s);
		return;
	}
	for (int g = 0; g < ng; g += step)
		gemv_groups(nr, ng - g < step ? ng - g : step, nb, s + 8 * g, lds, (const uint8_t *)w + g * gs, gs, a);
}

static void gemv_8x8(int k, float *restrict s, const void *restrict w, const void *restrict a, int nc)
{
	if (svcntb() != VL_BYTES) {
		PORTABLE->gemv(k, s, w, a, nc);
		return;
	}
	gemv_any(1, k, s, 0, w, a, nc);
}

/* NR rows: three at a time, then the rest; each row gets its GEMV's bits. */
static void gemv_rows_8x8(int k, float *restrict s, size_t lds, const void *restrict w, const void *restrict a,
			  int nr, int nc)
{
	const struct qg_block_q8_0 *act = a;
	const size_t nb = (size_t)(k / QG_QK);

	for (int r = 0; r < nr; r += 3) {
		const int n = nr - r < 3 ? nr - r : 3;
		if (svcntb() != VL_BYTES) {
			for (int i = 0; i < n; i++)
				PORTABLE->gemv(k, s + (size_t)(r + i) * lds, w, act + (r + i) * nb, nc);
		} else {
			gemv_any(n, k, s + (size_t)r * lds, lds, w, act + r * nb, nc);
		}
	}
}

/* --- GEMM: smmla, groups of four activation rows ------------------------ */

/* Activation groups one tile keeps in registers: 16 float accumulators. */
#define GEMM_SET 4

/*
 * Blocks per pass over K.  The activation scales of a pass are converted
 * once, into the order the tiles read them (a KC * GEMM_SET * 64 byte
 * table, 16 KiB); between passes the partial sums wait in S.
 */
#define KC 64

/*
 * For block l, group g: 16 floats that ld2w splits into [a0 a0 a1 a1]
 * (twice) and [a2 a2 a3 a3] (twice), over 16 (the nibbles' factor): the
 * scales of an smmla tile of activation rows 0,1 and of rows 2,3.
 */
struct act_scales {
	float f[KC * GEMM_SET * 16];
};

/* Scales of blocks B0 .. B0+KB-1 of groups A[0..N-1] (NB blocks apart) into C. */
static void act_scales(struct act_scales *c, const struct qg_block_q8_0x4 *a, int nb, int b0,
		       int kb, int n)
{
	float *f = c->f;

	for (int l = b0; l < b0 + kb; l++) {
		for (int g = 0; g < n; g++, f += 16) {
			const float32x4_t da = vmulq_n_f32(qg_arm_f16x4(a[(size_t)g * nb + l].d), 1.0f / 16);
			/* [a0 a2 a0 a2] [a1 a3 a1 a3], twice: ld2w's even and odd elements */
			const float32x4_t e = vuzp1q_f32(da, da), o = vuzp2q_f32(da, da);
			vst1q_f32(f, e);
			vst1q_f32(f + 4, o);
			vst1q_f32(f + 8, e);
			vst1q_f32(f + 12, o);
		}
	}
}

/*
 * Registers: z0-z15 the float tiles, group g's tile (X, h) in z(4g+2X+h):
 * activation rows 2X, 2X+1 by weight rows 4h..4h+3, lanes [r0w0 r0w1 r1w0
 * r1w1 | r0w2 r0w3 r1w2 r1w3] (w counted from 4h).  z16-z23 the weights
 * (W_LOAD): z16/z17 chunk 0 low nibbles of rows 0-3 / 4-7 (what activation
 * values 0-7 meet), z18/z19 chunk 1 low (values 8-15), z20/z21 chunk 0
 * high (16-23), z22/z23 chunk 1 high (24-31).  z24/z25 the weight scales
 * as the tiles of h = 0 / 1 want them, [w0 w1 w0 w1 | w2 w3 w2 w3] of the
 * half.  z26 an activation vector, z27/z28 the int tiles of h = 0 / 1, z29
 * and z30 the activation scales of X = 0 and 1, z31 a scale product.
 *
 * The loop takes two blocks a turn: the first block's activations at
 * immediate offsets from each group's pointer, the second's (136 bytes
 * on) at offsets held in x9..x16, shared by the groups; weights
 * through two pointers 144 bytes apart; scales from one table pointer.
 *
 * GM_X: rows 2X, 2X+1 of the group at AQ (the block's quants, operands
 * Q0..Q3 address value chunks 0..3), scales in zDA, into float tiles zT0
 * (h = 0) and zT1 (h = 1).
 */
#define GM_X(q0, q1, q2, q3, da, t0, t1)				\
	"ld2w {z27.s, z28.s}, p0/z, [%[zero]]\n\t"			\
	"ld1rqb {z26.b}, p0/z, " q0 "\n\t"				\
	"smmla z27.s, z26.b, z16.b\n\t"					\
	"smmla z28.s, z26.b, z17.b\n\t"					\
	"ld1rqb {z26.b}, p0/z, " q1 "\n\t"				\
	"smmla z27.s, z26.b, z18.b\n\t"					\
	"smmla z28.s, z26.b, z19.b\n\t"					\
	"ld1rqb {z26.b}, p0/z, " q2 "\n\t"				\
	"smmla z27.s, z26.b, z20.b\n\t"					\
	"smmla z28.s, z26.b, z21.b\n\t"					\
	"ld1rqb {z26.b}, p0/z, " q3 "\n\t"				\
	"smmla z27.s, z26.b, z22.b\n\t"					\
	"smmla z28.s, z26.b, z23.b\n\t"					\
	"scvtf z27.s, p0/m, z27.s\n\t"					\
	"scvtf z28.s, p0/m, z28.s\n\t"					\
	"fmul z31.s, z" da ".s, z24.s\n\t"				\
	"fmla z" t0 ".s, p0/m, z27.s, z31.s\n\t"			\
	"fmul z31.s, z" da ".s, z25.s\n\t"				\
	"fmla z" t1 ".s, p0/m, z28.s, z31.s\n\t"

/* One activation group of the turn's first block: pointer AQ, scales at vector VL of the table. */
#define GM_GA(aq, vl, t0, t1, t2, t3)					\
	"ld2w {z29.s, z30.s}, p0/z, [%[af], #" vl ", mul vl]\n\t"	\
	GM_X("[%[" aq "]]", "[%[" aq "], #32]", "[%[" aq "], #64]", "[%[" aq "], #96]", "29", t0, t1) \
	GM_X("[%[" aq "], #16]", "[%[" aq "], #48]", "[%[" aq "], #80]", "[%[" aq "], #112]", "30", t2, t3)

/* The same for the second block. */
#define GM_GB(aq, vl, t0, t1, t2, t3)					\
	"ld2w {z29.s, z30.s}, p0/z, [%[af], #" vl ", mul vl]\n\t"	\
	GM_X("[%[" aq "], x9]", "[%[" aq "], x11]", "[%[" aq "], x13]", "[%[" aq "], x15]", "29", t0, t1) \
	GM_X("[%[" aq "], x10]", "[%[" aq "], x12]", "[%[" aq "], x14]", "[%[" aq "], x16]", "30", t2, t3)

#define GM_WEIGHTS(w)							\
	W_LOAD(w, "24")							\
	"zip2 z25.d, z24.d, z24.d\n\t"					\
	"zip1 z24.d, z24.d, z24.d\n\t"

/*
 * Rows 2X, 2X+1 of a group between S (in order, ROW advancing by LDB
 * bytes) and tiles zT0, zT1 (64-bit lanes [r0 w01, r1 w01, r0 w23, r1 w23]).
 */
#define GM_ROWS_IN(t0, t1)						\
	"ld1w {z16.s}, p0/z, [%[row]]\n\t"				\
	"add %[row], %[row], %[ldb]\n\t"				\
	"ld1w {z17.s}, p0/z, [%[row]]\n\t"				\
	"add %[row], %[row], %[ldb]\n\t"				\
	"zip1 z" t0 ".d, z16.d, z17.d\n\t"				\
	"zip2 z" t1 ".d, z16.d, z17.d\n\t"

#define GM_ROWS_OUT(t0, t1)						\
	"uzp1 z16.d, z" t0 ".d, z" t1 ".d\n\t"				\
	"uzp2 z17.d, z" t0 ".d, z" t1 ".d\n\t"				\
	"st1w {z16.s}, p0, [%[row]]\n\t"				\
	"add %[row], %[row], %[ldb]\n\t"				\
	"st1w {z17.s}, p0, [%[row]]\n\t"				\
	"add %[row], %[row], %[ldb]\n\t"

#define GM_IN(a, b, c, d) GM_ROWS_IN(a, b) GM_ROWS_IN(c, d)
#define GM_OUT(a, b, c, d) GM_ROWS_OUT(a, b) GM_ROWS_OUT(c, d)
#define GM_ZERO(a, b, c, d) "mov z" a ".s, #0\n\t" "mov z" b ".s, #0\n\t" "mov z" c ".s, #0\n\t" "mov z" d ".s, #0\n\t"

/* Group g's four tiles. */
#define GM_T0 "0", "1", "2", "3"
#define GM_T1 "4", "5", "6", "7"
#define GM_T2 "8", "9", "10", "11"
#define GM_T3 "12", "13", "14", "15"
/* OP on the tiles T (expanded first, so OP sees four arguments) */
#define GM_ON(OP, ...) OP(__VA_ARGS__)

/*
 * The whole tile: S in (or zero), N turns of two blocks (the first turn
 * only its second block when ODD), S out.  The arguments are the groups'
 * parts of each step; STEP: bytes of the scale table per block.
 */
#define GM_TILE(ZERO, IN, BLOCK_A, BLOCK_B, ADVANCE, OUT, STEP)	\
	__asm__ volatile(						\
		"ptrue p0.b\n\t"					\
		/* the second block's activation offsets, in x9..x16 */	\
		"mov x9, #136\n\t" "mov x10, #152\n\t"			\
		"mov x11, #168\n\t" "mov x12, #184\n\t"			\
		"mov x13, #200\n\t" "mov x14, #216\n\t"			\
		"mov x15, #232\n\t" "mov x16, #248\n\t"			\
		"mov %[row], %[s]\n\t"				\
		"cbz %w[first], 3f\n\t"					\
		ZERO							\
		"b 4f\n\t"						\
		"3:\n\t"						\
		IN							\
		"4:\n\t"						\
		"cbz %w[odd], 1f\n\t"					\
		/* enter at the second block, one block back */	\
		"sub %[w], %[w], #144\n\t"				\
		"sub %[wb], %[wb], #144\n\t"				\
		"sub %[a0], %[a0], #136\n\t"				\
		"sub %[a1], %[a1], #136\n\t"				\
		"sub %[a2], %[a2], #136\n\t"				\
		"sub %[a3], %[a3], #136\n\t"				\
		"sub %[af], %[af], #" STEP "\n\t"			\
		"b 2f\n\t"						\
		"1:\n\t"						\
		GM_WEIGHTS("w")						\
		BLOCK_A							\
		"2:\n\t"						\
		GM_WEIGHTS("wb")					\
		BLOCK_B							\
		"add %[w], %[w], #288\n\t"				\
		"add %[wb], %[wb], #288\n\t"				\
		ADVANCE							\
		"add %[af], %[af], #2*" STEP "\n\t"			\
		"subs %w[n], %w[n], #1\n\t"				\
		"b.ne 1b\n\t"						\
		"mov %[row], %[s]\n\t"				\
		OUT							\
		: [w] "+&r"(wp), [wb] "+&r"(wq), [a0] "+&r"(a0), [a1] "+&r"(a1), \
		  [a2] "+&r"(a2), [a3] "+&r"(a3), [af] "+&r"(af), [n] "+&r"(n), \
		  [row] "+&r"(row)					\
		: [zero] "r"(qg_arm_zero64), [ldb] "r"(ldb), [s] "r"(s),	\
		  [first] "r"(first), [odd] "r"(odd)			\
		: SVE_CLOBBERS, "x9", "x10", "x11", "x12", "x13", "x14", "x15", "x16")

#define GM_ADV(aq) "add %[" aq "], %[" aq "], #272\n\t"

#define GM_TILE1()							\
	GM_TILE(GM_ON(GM_ZERO, GM_T0), GM_ON(GM_IN, GM_T0),		\
		GM_ON(GM_GA, "a0", "0", GM_T0),				\
		GM_ON(GM_GB, "a0", "2", GM_T0),				\
		GM_ADV("a0"), GM_ON(GM_OUT, GM_T0), "64")
#define GM_TILE2()							\
	GM_TILE(GM_ON(GM_ZERO, GM_T0) GM_ON(GM_ZERO, GM_T1),		\
		GM_ON(GM_IN, GM_T0) GM_ON(GM_IN, GM_T1),		\
		GM_ON(GM_GA, "a0", "0", GM_T0) GM_ON(GM_GA, "a1", "2", GM_T1), \
		GM_ON(GM_GB, "a0", "4", GM_T0) GM_ON(GM_GB, "a1", "6", GM_T1), \
		GM_ADV("a0") GM_ADV("a1"),				\
		GM_ON(GM_OUT, GM_T0) GM_ON(GM_OUT, GM_T1), "128")
#define GM_TILE3()							\
	GM_TILE(GM_ON(GM_ZERO, GM_T0) GM_ON(GM_ZERO, GM_T1) GM_ON(GM_ZERO, GM_T2), \
		GM_ON(GM_IN, GM_T0) GM_ON(GM_IN, GM_T1) GM_ON(GM_IN, GM_T2), \
		GM_ON(GM_GA, "a0", "0", GM_T0) GM_ON(GM_GA, "a1", "2", GM_T1) \
		GM_ON(GM_GA, "a2", "4", GM_T2),				\
		GM_ON(GM_GB, "a0", "6", GM_T0) GM_ON(GM_GB, "a1", "8", GM_T1) \
		GM_ON(GM_GB, "a2", "10", GM_T2),			\
		GM_ADV("a0") GM_ADV("a1") GM_ADV("a2"),			\
		GM_ON(GM_OUT, GM_T0) GM_ON(GM_OUT, GM_T1) GM_ON(GM_OUT, GM_T2), "192")
#define GM_TILE4()							\
	GM_TILE(GM_ON(GM_ZERO, GM_T0) GM_ON(GM_ZERO, GM_T1) GM_ON(GM_ZERO, GM_T2) \
		GM_ON(GM_ZERO, GM_T3),					\
		GM_ON(GM_IN, GM_T0) GM_ON(GM_IN, GM_T1) GM_ON(GM_IN, GM_T2) \
		GM_ON(GM_IN, GM_T3),					\
		GM_ON(GM_GA, "a0", "0", GM_T0) GM_ON(GM_GA, "a1", "2", GM_T1) \
		GM_ON(GM_GA, "a2", "4", GM_T2) GM_ON(GM_GA, "a3", "6", GM_T3), \
		GM_ON(GM_GB, "a0", "8", GM_T0) GM_ON(GM_GB, "a1", "10", GM_T1) \
		GM_ON(GM_GB, "a2", "12", GM_T2) GM_ON(GM_GB, "a3", "14", GM_T3), \
		GM_ADV("a0") GM_ADV("a1") GM_ADV("a2") GM_ADV("a3"),	\
		GM_ON(GM_OUT, GM_T0) GM_ON(GM_OUT, GM_T1) GM_ON(GM_OUT, GM_T2) \
		GM_ON(GM_OUT, GM_T3), "256")

/*
 * One weight row group (first block W) against NG (1 to GEMM_SET)
 * activation groups (group g's first block at A + g*NB) for KB (> 0)
 * blocks, with the scales of C.  FIRST: start from zero, else from what S
 * holds (rows 4g.. of group g at S + 4g*LDS, columns 0..7).
 */
static void gemm_tile(int ng, int kb, float *restrict s, size_t lds, const uint8_t *w,
		      const struct qg_block_q8_0x4 *a, int nb, const struct act_scales *c, int first)
{
	const uint8_t *wp = w + W_QS, *wq = wp + W_BLOCK;
	/* pointers past the NG groups stay at the first: never read, always valid */
	const int8_t *a0 = a[0].qs, *a1 = ng > 1 ? a[(size_t)nb].qs : a0;
	const int8_t *a2 = ng > 2 ? a[2 * (size_t)nb].qs : a0, *a3 = ng > 3 ? a[3 * (size_t)nb].qs : a0;
	const float *af = c->f;
	float *row = s;
	const long ldb = (long)(lds * sizeof *s), odd = kb & 1;
	long n = (kb + 1) / 2;

	switch (ng) {
	case 4:
		GM_TILE4();
		break;
	case 3:
		GM_TILE3();
		break;
	case 2:
		GM_TILE2();
		break;
	default:
		GM_TILE1();
		break;
	}
}

static void gemm_8x8(int k, float *restrict s, size_t lds, const void *restrict w,
		     const void *restrict a, int nr, int nc)
{
	const int nb = k / QG_QK, ngroups = nr / 4;
	const size_t gs = (size_t)nb * W_BLOCK;
	const struct qg_block_q8_0x4 *ap = a;
	struct act_scales c;

	if (svcntb() != VL_BYTES) {
		PORTABLE->gemm(k, s, lds, w, a, nr, nc);
		return;
	}
	if (nb <= 0) {
		for (int r = 0; r < nr; r++)
			memset(s + (size_t)r * lds, 0, (size_t)nc * sizeof *s);
		return;
	}
	for (int g = 0; g < ngroups; g += GEMM_SET) {
		const int ng = ngroups - g < GEMM_SET ? ngroups - g : GEMM_SET;
		const struct qg_block_q8_0x4 *ag = ap + (size_t)g * nb;
		for (int b0 = 0; b0 < nb; b0 += KC) {
			const int kb = nb - b0 < KC ? nb - b0 : KC;
			act_scales(&c, ag, nb, b0, kb, ng);
			for (int j = 0; j < nc / 8; j++)
				gemm_tile(ng, kb, s + (size_t)4 * g * lds + 8 * j, lds,
					  (const uint8_t *)w + j * gs + (size_t)b0 * W_BLOCK, ag + b0, nb, &c,
					  b0 == 0);
		}
	}
}

/* --- activation quantizers: kernels-arm.h's NEON code, same bytes as quant.c --- */

QG_ARM_QUANT_ENTRIES()

const struct qg_kernel qg_kernels_sve256[QG_LAYOUT_COUNT] = {
	[QG_LAYOUT_8X8] = {
		.name = "sve256 8x8", .family = QG_KF_SVE256,
		.gemv = gemv_8x8, .gemv_rows = gemv_rows_8x8, .gemm = gemm_8x8, .act_ileave = 8,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
};
