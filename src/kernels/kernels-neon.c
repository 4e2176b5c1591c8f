/*
 * kernels-neon.c - GEMV and GEMM for every interleaved Q4_0 layout with
 * plain NEON (armv8-a: Cortex-A72, Graviton1, any aarch64 without sdot),
 * built with -march=armv8-a.
 *
 * Without sdot the multiply is smull/smlal: eight int8 x int8 products
 * into int16 lanes per instruction.  The weights are taken as plain 4-bit
 * values in [-8, 7] (three shifts per 16 bytes, in the asm below), not
 * times 16, so a product is at most 8 * 128 = 1024 in magnitude and an
 * int16 lane can take the 8 products one block gives it, then a pairwise
 * add (16 products, |sum| <= 16384) before widening to int32 with saddlp.
 * The arithmetic is exact for every input byte, -128 included.
 *
 * The weights are used in the "4x4 canonical" form (vector c = bytes
 * 4c..4c+3 of four rows); the 8-byte layouts reach it with two uzp per 32
 * bytes, in the asm.  The activation side is replicated so that its lanes
 * line up with the weights': a 32-bit lane (4 values of one activation row)
 * duplicated into all four lanes multiplies the 4 weight rows' bytes for
 * those values.
 *
 * GEMV: 8 duplicated activation vectors per block serve every row group;
 * per block and group of 4 rows, 16 multiplies, 12 nibble and 2 reduction
 * instructions and 2 float ones.  Two or three activation rows (gemv_rows)
 * share the 12 nibble instructions and the weight loads of each group;
 * each row keeps its own multiplies and float steps, in its GEMV's order.
 * GEMM (activations with the 4-byte
 * interleave): per activation row r and chunk c one dup, one smlal and one
 * smlal2; a tile is 4 weight rows against 2 groups of 4 activation rows, so
 * the nibbles are taken once for both.
 */
#include "config.h"

#include "kernels-arm.h"

#define W_BLOCK4 72	/* bytes of a block_q4_0x4 */
#define W_BLOCK8 144	/* bytes of a block_q4_0x8 */

/* --- GEMV ------------------------------------------------------------- */

/*
 * The loops are asm: left to itself the compiler spills and re-copies
 * around the 16 multiplies of each row group.  One loop serves one, two or
 * three activation rows (NR): each row group's weights are loaded and
 * their nibbles taken once per block, then each row takes its own
 * multiplies, reduction, conversion, multiply and fused multiply-add (the
 * same float steps on the same exact integer sums whatever NR is), so a
 * row's sums are the same bits alone or beside others.  A pass takes up to 4 groups
 * of 4 rows (2 of 8 for 8x8) against one activation row, 3 against two
 * rows and 2 against three (one 8x8 group against two or three), two
 * blocks per turn.
 *
 * 4x4, one row: v0-v3 the sums, v4 the activation scale, v5 the weight
 * scales, v8-v11 activation values 4c..4c+3 and v12-v15
 * values 16+4c.. each in all four lanes, v16-v19 / v20-v23 the low / high
 * nibbles of weight vector c, v24 / v25 the int16 products of rows 0,1 /
 * 2,3.  The row's 8 duplicated vectors are made once per block (from v6,
 * v7) for every group.  Two or three rows would need theirs made for each
 * group: they take the 4x4 weights in the 8-byte layouts' form instead
 * (NV44_W2, below), where one ld1r per 8 values serves.
 */
#define NV44_DUP(q0, q1)							\
	"dup v8.4s, v" q0 ".s[0]\n\t" \
	"dup v9.4s, v" q0 ".s[1]\n\t" \
	"dup v10.4s, v" q0 ".s[2]\n\t" \
	"dup v11.4s, v" q0 ".s[3]\n\t" \
	"dup v12.4s, v" q1 ".s[0]\n\t" \
	"dup v13.4s, v" q1 ".s[1]\n\t" \
	"dup v14.4s, v" q1 ".s[2]\n\t" \
	"dup v15.4s, v" q1 ".s[3]\n\t"

#define NV44_ACT1							\
	"ldr h4, [%[a0]], #2\n\t" \
	"ld1 {v6.16b, v7.16b}, [%[a0]], #32\n\t" \
	"fcvt s4, h4\n\t" \
	NV44_DUP("6", "7")
/* One row group's weights (WG) for the block. */
#define NV44_W(wg)							\
	"ldr d5, [%[" wg "]], #8\n\t" \
	"ld1 {v16.16b-v19.16b}, [%[" wg "]], #64\n\t" \
	NV_X8_NIB("16", "17", "18", "19") \
	"fcvtl v5.4s, v5.4h\n\t"

/* The row whose duplicated values are in v8-v15 and scale in lane R of v4, into sum S. */
#define NV44_DOT(r, s)							\
	"smull v24.8h, v16.8b, v8.8b\n\t" \
	"smull2 v25.8h, v16.16b, v8.16b\n\t" \
	"smlal v24.8h, v20.8b, v12.8b\n\t" \
	"smlal2 v25.8h, v20.16b, v12.16b\n\t" \
	"smlal v24.8h, v17.8b, v9.8b\n\t" \
	"smlal2 v25.8h, v17.16b, v9.16b\n\t" \
	"smlal v24.8h, v21.8b, v13.8b\n\t" \
	"smlal2 v25.8h, v21.16b, v13.16b\n\t" \
	"smlal v24.8h, v18.8b, v10.8b\n\t" \
	"smlal2 v25.8h, v18.16b, v10.16b\n\t" \
	"smlal v24.8h, v22.8b, v14.8b\n\t" \
	"smlal2 v25.8h, v22.16b, v14.16b\n\t" \
	"smlal v24.8h, v19.8b, v11.8b\n\t" \
	"smlal2 v25.8h, v19.16b, v11.16b\n\t" \
	"smlal v24.8h, v23.8b, v15.8b\n\t" \
	"smlal2 v25.8h, v23.16b, v15.16b\n\t" \
	"addp v24.8h, v24.8h, v25.8h\n\t" \
	"saddlp v24.4s, v24.8h\n\t" \
	"scvtf v24.4s, v24.4s\n\t" \
	"fmul v24.4s, v24.4s, v5.4s\n\t" \
	"fmla v" s ".4s, v24.4s, v4.s[" r "]\n\t"


/*
 * 8-byte layouts, no reshuffling: v8-v11 activation bytes 0-7, 8-15,
 * 16-23, 24-31 in both halves (ld1r; a second row's in v12-v15, a third's
 * in v28-v31), so smull multiplies row 2p's 8 bytes and smull2 row 2p+1's
 * by the same 8 activations.  A 4-row unit is chunk 0 rows 0,1 (R0) and
 * 2,3 (R1), chunk 1 likewise (R2, R3), nibbles taken in place (low) and
 * into v20-v23 (high); v24-v27 collect rows 0..3 (4 products per lane),
 * three addp and a saddlp leave the rows' sums in four int32 lanes.  v4
 * the activation scales (row r in lane r), v5 the weight scales, v0-v3,
 * v6, v7 the sums (one row: v0-v3, and v6 an 8x8 group's second scales).
 */
#define NV_X8_ACT0							\
	"ld1r {v8.2d}, [%[a0]], #8\n\t" \
	"ld1r {v9.2d}, [%[a0]], #8\n\t" \
	"ld1r {v10.2d}, [%[a0]], #8\n\t" \
	"ld1r {v11.2d}, [%[a0]], #8\n\t"
#define NV_X8_ACT1							\
	"ld1r {v12.2d}, [%[a1]], #8\n\t" \
	"ld1r {v13.2d}, [%[a1]], #8\n\t" \
	"ld1r {v14.2d}, [%[a1]], #8\n\t" \
	"ld1r {v15.2d}, [%[a1]], #8\n\t"
#define NV_X8_ACT2							\
	"ld1r {v28.2d}, [%[a2]], #8\n\t" \
	"ld1r {v29.2d}, [%[a2]], #8\n\t" \
	"ld1r {v30.2d}, [%[a2]], #8\n\t" \
	"ld1r {v31.2d}, [%[a2]], #8\n\t"
/* Rows' scales (row r in lane r of v4) and values. */
#define NV_SCALE0 "ldr h4, [%[a0]], #2\n\t"
#define NV_SCALE1 "ld1 {v4.h}[1], [%[a1]], #2\n\t"
#define NV_SCALE2 "ld1 {v4.h}[2], [%[a2]], #2\n\t"
#define NV_SCALES "fcvtl v4.4s, v4.4h\n\t"
#define NV_X8_BLOCK1 "ldr h4, [%[a0]], #2\n\t" NV_X8_ACT0 "fcvt s4, h4\n\t"
#define NV_X8_BLOCK2 NV_SCALE0 NV_X8_ACT0 NV_SCALE1 NV_X8_ACT1 NV_SCALES
#define NV_X8_BLOCK3 NV_SCALE0 NV_X8_ACT0 NV_SCALE1 NV_X8_ACT1 NV_SCALE2 NV_X8_ACT2 NV_SCALES

/* The nibbles of vR0..vR3 as signed codes: the high ones to v20-v23, the low ones in place. */
#define NV_X8_NIB(r0, r1, r2, r3)						\
	"sshr v20.16b, v" r0 ".16b, #4\n\t" \
	"sshr v21.16b, v" r1 ".16b, #4\n\t" \
	"sshr v22.16b, v" r2 ".16b, #4\n\t" \
	"sshr v23.16b, v" r3 ".16b, #4\n\t" \
	"shl v" r0 ".16b, v" r0 ".16b, #4\n\t" \
	"shl v" r1 ".16b, v" r1 ".16b, #4\n\t" \
	"shl v" r2 ".16b, v" r2 ".16b, #4\n\t" \
	"shl v" r3 ".16b, v" r3 ".16b, #4\n\t" \
	"sshr v" r0 ".16b, v" r0 ".16b, #4\n\t" \
	"sshr v" r1 ".16b, v" r1 ".16b, #4\n\t" \
	"sshr v" r2 ".16b, v" r2 ".16b, #4\n\t" \
	"sshr v" r3 ".16b, v" r3 ".16b, #4\n\t"

/* One row (values vE0..vE3, scale in lane R of v4) of the unit, weight scales vDW, into sum S. */
#define NV_X8_DOT(r0, r1, r2, r3, e0, e1, e2, e3, r, dw, s)			\
	"smull v24.8h, v" r0 ".8b, v" e0 ".8b\n\t" \
	"smlal v24.8h, v20.8b, v" e2 ".8b\n\t" \
	"smlal v24.8h, v" r2 ".8b, v" e1 ".8b\n\t" \
	"smlal v24.8h, v22.8b, v" e3 ".8b\n\t" \
	"smull2 v25.8h, v" r0 ".16b, v" e0 ".16b\n\t" \
	"smlal2 v25.8h, v20.16b, v" e2 ".16b\n\t" \
	"smlal2 v25.8h, v" r2 ".16b, v" e1 ".16b\n\t" \
	"smlal2 v25.8h, v22.16b, v" e3 ".16b\n\t" \
	"smull v26.8h, v" r1 ".8b, v" e0 ".8b\n\t" \
	"smlal v26.8h, v21.8b, v" e2 ".8b\n\t" \
	"smlal v26.8h, v" r3 ".8b, v" e1 ".8b\n\t" \
	"smlal v26.8h, v23.8b, v" e3 ".8b\n\t" \
	"smull2 v27.8h, v" r1 ".16b, v" e0 ".16b\n\t" \
	"smlal2 v27.8h, v21.16b, v" e2 ".16b\n\t" \
	"smlal2 v27.8h, v" r3 ".16b, v" e1 ".16b\n\t" \
	"smlal2 v27.8h, v23.16b, v" e3 ".16b\n\t" \
	"addp v24.8h, v24.8h, v25.8h\n\t" \
	"addp v26.8h, v26.8h, v27.8h\n\t" \
	"addp v24.8h, v24.8h, v26.8h\n\t" \
	"saddlp v24.4s, v24.8h\n\t" \
	"scvtf v24.4s, v24.4s\n\t" \
	"fmul v24.4s, v24.4s, v" dw ".4s\n\t" \
	"fmla v" s ".4s, v24.4s, v4.s[" r "]\n\t"

#define NV_X8_UNIT(r0, r1, r2, r3, dw, s)					\
	NV_X8_NIB(r0, r1, r2, r3) \
	NV_X8_DOT(r0, r1, r2, r3, "8", "9", "10", "11", "0", dw, s)

/* Rows 0-2 of a unit whose weights are in v16-v19, weight scales in v5. */
#define NV_X8_R0(s) NV_X8_DOT("16", "17", "18", "19", "8", "9", "10", "11", "0", "5", s)
#define NV_X8_R1(s) NV_X8_DOT("16", "17", "18", "19", "12", "13", "14", "15", "1", "5", s)
#define NV_X8_R2(s) NV_X8_DOT("16", "17", "18", "19", "28", "29", "30", "31", "2", "5", s)

#define NV48_W(wg)							\
	"ldr d5, [%[" wg "]], #8\n\t" \
	"ld1 {v16.16b-v19.16b}, [%[" wg "]], #64\n\t" \
	"fcvtl v5.4s, v5.4h\n\t"

#define NV48_GROUP(wg, s) NV48_W(wg) NV_X8_UNIT("16", "17", "18", "19", "5", s)

/*
 * A 4x4 group in the 8-byte layouts' form: vectors c, c+1 (values 4c..
 * 4c+3 and 4c+4.. of rows 0..3) zipped by 32-bit lanes give values 4c..
 * 4c+7 of rows 0,1 and of rows 2,3, as a 4x8 chunk has them.  The integer
 * sums are exact either way, so the rows get the 4x4 GEMV's bits.
 */
#define NV44_W2(wg)							\
	"ldr d5, [%[" wg "]], #8\n\t" \
	"ld1 {v24.16b-v27.16b}, [%[" wg "]], #64\n\t" \
	"zip1 v16.4s, v24.4s, v25.4s\n\t" \
	"zip2 v17.4s, v24.4s, v25.4s\n\t" \
	"zip1 v18.4s, v26.4s, v27.4s\n\t" \
	"zip2 v19.4s, v26.4s, v27.4s\n\t" \
	"fcvtl v5.4s, v5.4h\n\t"

/* A 4x8 group against two or three rows, into sums S0.. (4x4: the same after NV44_W2). */
#define NV_X8_ROWS2(s0, s1) NV_X8_NIB("16", "17", "18", "19") NV_X8_R0(s0) NV_X8_R1(s1)
#define NV_X8_ROWS3(s0, s1, s2) NV_X8_ROWS2(s0, s1) NV_X8_R2(s2)

/*
 * In gemv_groups: NR (2 or 3) rows against NG groups in the 4x8 form,
 * each group's weights loaded by WLOAD(wg) (NV48_W, or NV44_W2 for 4x4).
 */
#define NV_X8_GEMV_ROWS(WLOAD)							\
	do {									\
		if (nr == 2) {							\
			if (ng == 3)						\
				NV_LOOP(NV_X8_BLOCK2 WLOAD("w0") NV_X8_ROWS2("0", "1") \
					WLOAD("w1") NV_X8_ROWS2("2", "3")		\
					WLOAD("w2") NV_X8_ROWS2("6", "7"));		\
			else if (ng == 2)					\
				NV_LOOP(NV_X8_BLOCK2 WLOAD("w0") NV_X8_ROWS2("0", "1") \
					WLOAD("w1") NV_X8_ROWS2("2", "3"));		\
			else							\
				NV_LOOP(NV_X8_BLOCK2 WLOAD("w0") NV_X8_ROWS2("0", "1")); \
		} else {							\
			if (ng == 2)						\
				NV_LOOP(NV_X8_BLOCK3 WLOAD("w0") NV_X8_ROWS3("0", "1", "2") \
					WLOAD("w1") NV_X8_ROWS3("3", "6", "7"));	\
			else							\
				NV_LOOP(NV_X8_BLOCK3 WLOAD("w0") NV_X8_ROWS3("0", "1", "2")); \
		}								\
	} while (0)

#define NV88_GROUP(wg, s0, s1)							\
	"ldr q5, [%[" wg "]], #16\n\t" \
	"ld1 {v16.16b-v19.16b}, [%[" wg "]], #64\n\t" \
	"ld1 {v28.16b-v31.16b}, [%[" wg "]], #64\n\t" \
	"fcvtl2 v6.4s, v5.8h\n\t" \
	"fcvtl v5.4s, v5.4h\n\t" \
	NV_X8_UNIT("16", "17", "28", "29", "5", s0) \
	NV_X8_UNIT("18", "19", "30", "31", "6", s1)

/*
 * Half H of an 8x8 group for two or three rows, one half's weights in
 * v16-v19 at a time (W moves past the block with half 0).
 */
#define NV88_H0(wg)							\
	"ldr d5, [%[" wg "]], #144\n\t" \
	"ldp q16, q17, [%[" wg "], #-128]\n\t" \
	"ldp q18, q19, [%[" wg "], #-64]\n\t" \
	"fcvtl v5.4s, v5.4h\n\t" \
	NV_X8_NIB("16", "17", "18", "19")
#define NV88_H1(wg)							\
	"ldur d5, [%[" wg "], #-136]\n\t" \
	"ldp q16, q17, [%[" wg "], #-96]\n\t" \
	"ldp q18, q19, [%[" wg "], #-32]\n\t" \
	"fcvtl v5.4s, v5.4h\n\t" \
	NV_X8_NIB("16", "17", "18", "19")

#define NV_LOOP(BODY)							\
	__asm__ volatile(						\
		"movi v0.4s, #0\n\t" "movi v1.4s, #0\n\t"		\
		"movi v2.4s, #0\n\t" "movi v3.4s, #0\n\t"		\
		"movi v6.4s, #0\n\t" "movi v7.4s, #0\n\t"		\
		/* an odd block count enters at the second copy */	\
		"cbnz %w[odd], 2f\n\t"					\
		"1:\n\t"						\
		BODY							\
		"2:\n\t"						\
		BODY							\
		"subs %w[n], %w[n], #1\n\t"				\
		"b.ne 1b\n\t"						\
		"st1 {v0.4s-v3.4s}, [%[out]]\n\t"			\
		"stp q6, q7, [%[out], #64]\n\t"				\
		: [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3), \
		  [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [n] "+r"(n) \
		: [odd] "r"(odd), [out] "r"(sum)			\
		: "cc", "memory", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", \
		  "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", \
		  "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", \
		  "v26", "v27", "v28", "v29", "v30", "v31")

/* Row groups a pass takes against NR rows (4-row units: 4, 6, 6). */
#define GEMV_NG(l, nr) ((l) == QG_LAYOUT_8X8 ? ((nr) == 1 ? 2 : 1) : (nr) == 1 ? 4 : (nr) == 2 ? 3 : 2)

/*
 * NG (at most GEMV_NG) row groups of layout L, whose first blocks are GS
 * bytes apart, against NR (1 to 3) activation rows of NB (> 0) blocks
 * each, one after another from A: row r writes its 4*NG outputs (8*NG for
 * 8x8) to S + r*LDS.  The sums of 4-row unit u and row r are the
 * (u*NR + r)th of v0-v3, v6, v7.
 */
static void gemv_groups(enum qg_layout l, int nr, int ng, int nb, float *restrict s, size_t lds,
			const uint8_t *restrict w, size_t gs, const struct qg_block_q8_0 *restrict a)
{
	float sum[24];
	/* pointers past the NG groups and NR rows stay at the first: never read, always valid */
	const uint8_t *w0 = w, *w1 = ng > 1 ? w + gs : w;
	const uint8_t *w2 = ng > 2 ? w + 2 * gs : w, *w3 = ng > 3 ? w + 3 * gs : w;
	const struct qg_block_q8_0 *a0 = a, *a1 = nr > 1 ? a + nb : a, *a2 = nr > 2 ? a + 2 * (size_t)nb : a;
	long n = (nb + 1) / 2, odd = nb & 1;
	const int units = l == QG_LAYOUT_8X8 ? 2 * ng : ng;

	if (l == QG_LAYOUT_4X4) {
		if (nr == 1) {
			if (ng == 4)
				NV_LOOP(NV44_ACT1 NV44_W("w0") NV44_DOT("0", "0") NV44_W("w1") NV44_DOT("0", "1")
					NV44_W("w2") NV44_DOT("0", "2") NV44_W("w3") NV44_DOT("0", "3"));
			else if (ng == 3)
				NV_LOOP(NV44_ACT1 NV44_W("w0") NV44_DOT("0", "0") NV44_W("w1") NV44_DOT("0", "1")
					NV44_W("w2") NV44_DOT("0", "2"));
			else if (ng == 2)
				NV_LOOP(NV44_ACT1 NV44_W("w0") NV44_DOT("0", "0") NV44_W("w1") NV44_DOT("0", "1"));
			else
				NV_LOOP(NV44_ACT1 NV44_W("w0") NV44_DOT("0", "0"));
		} else {
			NV_X8_GEMV_ROWS(NV44_W2);
		}
	} else if (l == QG_LAYOUT_4X8) {
		if (nr == 1) {
			if (ng == 4)
				NV_LOOP(NV_X8_BLOCK1 NV48_GROUP("w0", "0") NV48_GROUP("w1", "1")
					NV48_GROUP("w2", "2") NV48_GROUP("w3", "3"));
			else if (ng == 3)
				NV_LOOP(NV_X8_BLOCK1 NV48_GROUP("w0", "0") NV48_GROUP("w1", "1") NV48_GROUP("w2", "2"));
			else if (ng == 2)
				NV_LOOP(NV_X8_BLOCK1 NV48_GROUP("w0", "0") NV48_GROUP("w1", "1"));
			else
				NV_LOOP(NV_X8_BLOCK1 NV48_GROUP("w0", "0"));
		} else {
			NV_X8_GEMV_ROWS(NV48_W);
		}
	} else {
		if (nr == 1) {
			if (ng == 2)
				NV_LOOP(NV_X8_BLOCK1 NV88_GROUP("w0", "0", "1") NV88_GROUP("w1", "2", "3"));
			else
				NV_LOOP(NV_X8_BLOCK1 NV88_GROUP("w0", "0", "1"));
		} else if (nr == 2) {
			NV_LOOP(NV_X8_BLOCK2 NV88_H0("w0") NV_X8_R0("0") NV_X8_R1("1")
				NV88_H1("w0") NV_X8_R0("2") NV_X8_R1("3"));
		} else {
			NV_LOOP(NV_X8_BLOCK3 NV88_H0("w0") NV_X8_R0("0") NV_X8_R1("1") NV_X8_R2("2")
				NV88_H1("w0") NV_X8_R0("3") NV_X8_R1("6") NV_X8_R2("7"));
		}
	}
	if (nr == 1) {
		memcpy(s, sum, (size_t)units * 4 * sizeof *s);
		return;
	}
	for (int u = 0; u < units; u++)
		for (int r = 0; r < nr; r++) {
			const int i = u * nr + r;
			/* the 5th and 6th sums are v6, v7, stored after v0-v3 */
			memcpy(s + (size_t)r * lds + 4 * u, sum + 4 * i, 4 * sizeof *s);
		}
}

#include "kernels-arm-gemv.h"

/* --- GEMM ------------------------------------------------------------- */

/*
 * The GEMM tile is an asm loop as well: 4 weight rows against up to 2
 * groups of 4 activation rows (activations with the 4-byte interleave).
 * v0-v7 the sums (one per activation row, lanes = weight rows), v8 / v9
 * the weight / activation scales, v10 one activation row's 4 values in
 * all lanes, v11 / v12 the int16 products of weight rows 0,1 / 2,3,
 * v16-v19 / v20-v23 the canonical weight vectors' low / high nibbles,
 * v24-v31 one group's 8 activation vectors (chunk c: values 4c..4c+3 of
 * rows 0..3; also the 8-byte layouts' raw weights before the uzp).
 */
#define NV_NIBBLES							\
	NV_X8_NIB("16", "17", "18", "19") \
	"fcvtl v8.4s, v8.4h\n\t"

#define NV_WLOAD_72							\
	"ldr d8, [%[w]], #8\n\t" \
	"ld1 {v16.16b-v19.16b}, [%[w]], #64\n\t"

/* 4x8: 64 bytes of the 8-byte interleave, unzipped to the canonical form. */
#define NV_WLOAD_48							\
	"ldr d8, [%[w]], #8\n\t" \
	"ld1 {v24.16b-v27.16b}, [%[w]], #64\n\t" \
	"uzp1 v16.4s, v24.4s, v25.4s\n\t" \
	"uzp2 v17.4s, v24.4s, v25.4s\n\t" \
	"uzp1 v18.4s, v26.4s, v27.4s\n\t" \
	"uzp2 v19.4s, v26.4s, v27.4s\n\t"

/* Half H of an 8x8 block: W points at its chunk 0 (block + 16 + 32H). */
#define NV_WLOAD_88(soff)							\
	"ldur d8, [%[w], #" soff "]\n\t" \
	"ldp q26, q27, [%[w], #64]\n\t" \
	"ldp q24, q25, [%[w]], #144\n\t" \
	"uzp1 v16.4s, v24.4s, v25.4s\n\t" \
	"uzp2 v17.4s, v24.4s, v25.4s\n\t" \
	"uzp1 v18.4s, v26.4s, v27.4s\n\t" \
	"uzp2 v19.4s, v26.4s, v27.4s\n\t"

/*
 * Row L of an activation group (its values in lane L of v24-v31, its
 * scale in lane L of v9) against the tile (codes in v16-v23, scales in
 * v8), into sum S.
 */
#define NV_GROUP_ROW(l, s)							\
	"dup v10.4s, v24.s[" l "]\n\t" \
	"smull v11.8h, v16.8b, v10.8b\n\t" \
	"smull2 v12.8h, v16.16b, v10.16b\n\t" \
	"dup v10.4s, v25.s[" l "]\n\t" \
	"smlal v11.8h, v17.8b, v10.8b\n\t" \
	"smlal2 v12.8h, v17.16b, v10.16b\n\t" \
	"dup v10.4s, v26.s[" l "]\n\t" \
	"smlal v11.8h, v18.8b, v10.8b\n\t" \
	"smlal2 v12.8h, v18.16b, v10.16b\n\t" \
	"dup v10.4s, v27.s[" l "]\n\t" \
	"smlal v11.8h, v19.8b, v10.8b\n\t" \
	"smlal2 v12.8h, v19.16b, v10.16b\n\t" \
	"dup v10.4s, v28.s[" l "]\n\t" \
	"smlal v11.8h, v20.8b, v10.8b\n\t" \
	"smlal2 v12.8h, v20.16b, v10.16b\n\t" \
	"dup v10.4s, v29.s[" l "]\n\t" \
	"smlal v11.8h, v21.8b, v10.8b\n\t" \
	"smlal2 v12.8h, v21.16b, v10.16b\n\t" \
	"dup v10.4s, v30.s[" l "]\n\t" \
	"smlal v11.8h, v22.8b, v10.8b\n\t" \
	"smlal2 v12.8h, v22.16b, v10.16b\n\t" \
	"dup v10.4s, v31.s[" l "]\n\t" \
	"smlal v11.8h, v23.8b, v10.8b\n\t" \
	"smlal2 v12.8h, v23.16b, v10.16b\n\t" \
	"addp v11.8h, v11.8h, v12.8h\n\t" \
	"saddlp v11.4s, v11.8h\n\t" \
	"scvtf v11.4s, v11.4s\n\t" \
	"fmul v11.4s, v11.4s, v8.4s\n\t" \
	"fmla v" s ".4s, v11.4s, v9.s[" l "]\n\t"

/* One activation group (pointer operand AG) into sums S0..S3. */
#define NV_GROUP(ag, s0, s1, s2, s3)							\
	"ldr d9, [%[" ag "]], #8\n\t" \
	"ld1 {v24.16b-v27.16b}, [%[" ag "]], #64\n\t" \
	"ld1 {v28.16b-v31.16b}, [%[" ag "]], #64\n\t" \
	"fcvtl v9.4s, v9.4h\n\t" \
	NV_GROUP_ROW("0", s0) NV_GROUP_ROW("1", s1) NV_GROUP_ROW("2", s2) NV_GROUP_ROW("3", s3)

#define NV_TILE(WLOAD, GROUPS)						\
	__asm__ volatile(						\
		"movi v0.4s, #0\n\t" "movi v1.4s, #0\n\t" "movi v2.4s, #0\n\t" "movi v3.4s, #0\n\t" \
		"movi v4.4s, #0\n\t" "movi v5.4s, #0\n\t" "movi v6.4s, #0\n\t" "movi v7.4s, #0\n\t" \
		"1:\n\t"						\
		WLOAD NV_NIBBLES GROUPS					\
		"subs %w[n], %w[n], #1\n\t"				\
		"b.ne 1b\n\t"						\
		"st1 {v0.4s-v3.4s}, [%[out]], #64\n\t"			\
		"st1 {v4.4s-v7.4s}, [%[out]]\n\t"			\
		: [w] "+r"(wp), [a0] "+r"(a0), [a1] "+r"(a1), [n] "+r"(n), [out] "+r"(out) \
		:							\
		: "cc", "memory", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", \
		  "v8", "v9", "v10", "v11", "v12", "v16", "v17", "v18", "v19", \
		  "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", \
		  "v29", "v30", "v31")

#define NV_TILE_NG(WLOAD)						\
	do {								\
		if (ng == 2)						\
			NV_TILE(WLOAD, NV_GROUP("a0", "0", "1", "2", "3") NV_GROUP("a1", "4", "5", "6", "7")); \
		else							\
			NV_TILE(WLOAD, NV_GROUP("a0", "0", "1", "2", "3")); \
	} while (0)

/*
 * Four weight rows (view H of layout L, first block at W) against NG <= 2
 * groups of 4 activation rows (first at A).  Row 4g+r writes
 * S[(4g+r)*LDS + 0..3].
 */
static void gemm_tile(enum qg_layout l, int h, int ng, int nb, float *restrict s, size_t lds,
		      const uint8_t *restrict w, const struct qg_block_q8_0x4 *restrict a)
{
	float sum[2][4][4];
	float *out = &sum[0][0][0];
	const uint8_t *wp = w;
	const struct qg_block_q8_0x4 *a0 = a, *a1 = ng > 1 ? a + nb : a;
	long n = nb;

	if (l == QG_LAYOUT_4X4) {
		NV_TILE_NG(NV_WLOAD_72);
	} else if (l == QG_LAYOUT_4X8) {
		NV_TILE_NG(NV_WLOAD_48);
	} else if (h == 0) {
		wp += 16;
		NV_TILE_NG(NV_WLOAD_88("-16"));
	} else {
		wp += 48;
		NV_TILE_NG(NV_WLOAD_88("-40"));
	}
	for (int g = 0; g < ng; g++)
		for (int r = 0; r < 4; r++)
			memcpy(s + (size_t)(4 * g + r) * lds, sum[g][r], sizeof sum[g][r]);
}

QG_ARM_INLINE void gemm(enum qg_layout l, int k, float *restrict s, size_t lds,
			const void *restrict w, const void *restrict a, int nr, int nc)
{
	const int nb = k / QG_QK, ngroups = nr / 4;
	const struct qg_block_q8_0x4 *ap = a;

	if (nb <= 0) {
		for (int r = 0; r < nr; r++)
			memset(s + (size_t)r * lds, 0, (size_t)nc * sizeof *s);
		return;
	}
	for (int c = 0; c < nc; c += 4) {
		/* an 8x8 group is two views: rows 0-3 and rows 4-7 */
		const int h = l == QG_LAYOUT_8X8 ? (c / 4) % 2 : 0;
		const uint8_t *wp = (const uint8_t *)w + (l == QG_LAYOUT_8X8 ?
			(size_t)(c / 8) * nb * W_BLOCK8 : (size_t)(c / 4) * nb * W_BLOCK4);
		for (int g = 0; g < ngroups; g += 2)
			gemm_tile(l, h, ngroups - g < 2 ? 1 : 2, nb, s + (size_t)g * 4 * lds + c, lds, wp,
				  ap + (size_t)g * nb);
	}
}

QG_ARM_GEMM_ENTRY(4x4, QG_LAYOUT_4X4)
QG_ARM_GEMM_ENTRY(4x8, QG_LAYOUT_4X8)
QG_ARM_GEMM_ENTRY(8x8, QG_LAYOUT_8X8)

/* --- activation quantization ------------------------------------------ */

QG_ARM_QUANT_ENTRIES()

const struct qg_kernel qg_kernels_neon[QG_LAYOUT_COUNT] = {
	[QG_LAYOUT_4X4] = {
		.name = "neon 4x4", .family = QG_KF_NEON,
		.gemv = gemv_4x4, .gemv_rows = gemv_rows_4x4, .gemm = gemm_4x4, .act_ileave = 4,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
	[QG_LAYOUT_4X8] = {
		.name = "neon 4x8", .family = QG_KF_NEON,
		.gemv = gemv_4x8, .gemv_rows = gemv_rows_4x8, .gemm = gemm_4x8, .act_ileave = 4,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
	[QG_LAYOUT_8X8] = {
		.name = "neon 8x8", .family = QG_KF_NEON,
		.gemv = gemv_8x8, .gemv_rows = gemv_rows_8x8, .gemm = gemm_8x8, .act_ileave = 4,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
};
