/*
 * kernels-dotprod.c - GEMV and GEMM for every interleaved Q4_0 layout with
 * NEON sdot (armv8.2-a+dotprod: Neoverse N1, Graviton2, and every later
 * core), built with -march=armv8.2-a+dotprod.
 *
 * Every kernel keeps one int32 accumulator vector per four outputs and
 * block: the weights' nibbles times 16 (two instructions per 16 bytes,
 * kernels-arm.h) dotted with the int8 activations, converted with the /16
 * folded in, then one multiply and one fused multiply-add by the two scales.
 *
 * GEMV, 4x4 layout: a weight vector holds 4 bytes of each of the 4 rows
 * for the same 4 values, so "sdot by element" against the 4 activation
 * bytes of those values (one 32-bit lane of the activation vector) gives
 * the 4 rows at once: 8 sdot per block and row group.
 * GEMV, 8-byte layouts: a vector holds 8 bytes of 2 rows; the activation's
 * 8 matching bytes are loaded into both halves (ld1r), a plain sdot leaves
 * each row's sum in two lanes, and one addp per block folds the pairs.
 * Two or three activation rows (gemv_rows) share each block's weight
 * loads and nibbles; each row keeps its own sdot and float steps, in its
 * GEMV's order, so that it gets its GEMV's bits.
 *
 * GEMM (every layout, activations with the 4-byte interleave): the roles
 * flip.  An activation vector holds 4 bytes of each of its 4 rows for the
 * same values, and the by-element operand is the weight: lane j of a weight
 * vector is 4 bytes of weight row j (4x4), or bytes 0-3 / 4-7 of one row
 * (8-byte layouts, lanes 2q and 2q+1 of row pair p), so the 8-byte layouts
 * need no reshuffling either.  Accumulator j then holds weight row j for
 * the 4 activation rows and is transposed once when stored.  A tile is one
 * group of 4 weight rows against up to 3 groups of 4 activation rows: the
 * weights' nibbles are taken once per block for 12 output vectors, and the
 * registers (12 sums, 4 accumulators, 8 weight and 4 activation vectors,
 * 3 scales and the mask) just fit.
 */
#include "config.h"

#include "kernels-arm.h"

#define W_BLOCK4 72	/* bytes of a block_q4_0x4 */
#define W_BLOCK8 144	/* bytes of a block_q4_0x8 */

/* --- GEMV ------------------------------------------------------------- */

/*
 * The GEMV loops are asm too, for the same reason as the GEMM tile below.
 * One loop serves one, two or three activation rows (NR): each row group's
 * weights are loaded and their nibbles taken once per block, then each row
 * takes its own sdot, conversion, multiply and fused multiply-add, the
 * same instructions on the same values whatever NR is, so a row's sums
 * are the same bits alone or beside others.  A pass takes up to 4 row
 * groups of 4 rows (2 of 8 for 8x8) against one row, 3 against two rows
 * and 2 against three (one 8x8 group against two or three), two blocks
 * per turn.
 *
 * Row r's activation scale goes to lane r of v28 (an ld1 to the lane, one
 * fcvtl for the rows).  4x4: v0-v5 the sums, v8/v9 row 0's activation
 * values 0-15 / 16-31 (v10/v11 row 1's, v12/v13 row 2's), v6 the 0xF0
 * mask, v7 weight scales, v16-v19 / v20-v23 low / high nibbles times 16,
 * v24-v27, v29, v30 the int32 accumulators, zeroed by loads of 64 and 32
 * zero bytes.
 */
#define GV44_W(wg)							\
	"ldr d7, [%[" wg "]], #8\n\t"					\
	"ld1 {v16.16b-v19.16b}, [%[" wg "]], #64\n\t"			\
	"and v20.16b, v16.16b, v6.16b\n\t"				\
	"and v21.16b, v17.16b, v6.16b\n\t"				\
	"and v22.16b, v18.16b, v6.16b\n\t"				\
	"and v23.16b, v19.16b, v6.16b\n\t"				\
	"shl v16.16b, v16.16b, #4\n\t"					\
	"shl v17.16b, v17.16b, #4\n\t"					\
	"shl v18.16b, v18.16b, #4\n\t"					\
	"shl v19.16b, v19.16b, #4\n\t"					\
	"fcvtl v7.4s, v7.4h\n\t"

/* One row (values in vE0, vE1, scale in lane R of v28) into sum S by ACC. */
#define GV44_DOT(e0, e1, r, acc, s)					\
	"sdot v" acc ".4s, v16.16b, v" e0 ".4b[0]\n\t"			\
	"sdot v" acc ".4s, v20.16b, v" e1 ".4b[0]\n\t"			\
	"sdot v" acc ".4s, v17.16b, v" e0 ".4b[1]\n\t"			\
	"sdot v" acc ".4s, v21.16b, v" e1 ".4b[1]\n\t"			\
	"sdot v" acc ".4s, v18.16b, v" e0 ".4b[2]\n\t"			\
	"sdot v" acc ".4s, v22.16b, v" e1 ".4b[2]\n\t"			\
	"sdot v" acc ".4s, v19.16b, v" e0 ".4b[3]\n\t"			\
	"sdot v" acc ".4s, v23.16b, v" e1 ".4b[3]\n\t"			\
	"scvtf v" acc ".4s, v" acc ".4s, #4\n\t"			\
	"fmul v" acc ".4s, v" acc ".4s, v7.4s\n\t"			\
	"fmla v" s ".4s, v" acc ".4s, v28.s[" r "]\n\t"

#define GV44_R0(acc, s) GV44_DOT("8", "9", "0", acc, s)
#define GV44_R1(acc, s) GV44_DOT("10", "11", "1", acc, s)
#define GV44_R2(acc, s) GV44_DOT("12", "13", "2", acc, s)

/* Row r's scale and values (4x4: two vectors); the scales' fcvtl and zeroing come after. */
#define GV_SCALE0 "ldr h28, [%[a0]], #2\n\t"
#define GV_SCALE1 "ld1 {v28.h}[1], [%[a1]], #2\n\t"
#define GV_SCALE2 "ld1 {v28.h}[2], [%[a2]], #2\n\t"
#define GV_SCALES "fcvtl v28.4s, v28.4h\n\t"
#define GV_ZERO4 "ld1 {v24.4s-v27.4s}, [%[zero]]\n\t"
#define GV_ZERO6 GV_ZERO4 "ld1 {v29.4s, v30.4s}, [%[zero]]\n\t"

#define GV44_ACT1							\
	GV_SCALE0 "ld1 {v8.16b, v9.16b}, [%[a0]], #32\n\t"		\
	GV_SCALES GV_ZERO4
#define GV44_ACT2							\
	GV_SCALE0 "ld1 {v8.16b, v9.16b}, [%[a0]], #32\n\t"		\
	GV_SCALE1 "ld1 {v10.16b, v11.16b}, [%[a1]], #32\n\t"		\
	GV_SCALES GV_ZERO6
#define GV44_ACT3							\
	GV_SCALE0 "ld1 {v8.16b, v9.16b}, [%[a0]], #32\n\t"		\
	GV_SCALE1 "ld1 {v10.16b, v11.16b}, [%[a1]], #32\n\t"		\
	GV_SCALE2 "ld1 {v12.16b, v13.16b}, [%[a2]], #32\n\t"		\
	GV_SCALES GV_ZERO6

/*
 * 8-byte layouts: row 0's activation bytes 0-7, 8-15, 16-23, 24-31, each
 * in both halves (ld1r), in v8-v11 (row 1's in v12-v15, row 2's in
 * v16-v19); v6 the mask, v7 weight scales (8x8: the group's 8, a half's 4
 * converted into v31).  A 4-row unit is chunk 0 rows 0,1 (R0) and 2,3
 * (R1), chunk 1 likewise (R2, R3), in v20-v23, high nibbles into v24-v27;
 * per row, two accumulators whose lane pairs addp folds into the 4 rows:
 * one row has v12-v19 for 4x8 (unit u: v12+2u, v13+2u), zeroed for the
 * block (GV88_1 for 8x8), two or three rows v29, v30, zeroed for each.
 * v0-v5 the sums.
 */
#define GVX8_NIBW(r0, r1, r2, r3)					\
	"and v24.16b, v" r0 ".16b, v6.16b\n\t"				\
	"and v25.16b, v" r1 ".16b, v6.16b\n\t"				\
	"and v26.16b, v" r2 ".16b, v6.16b\n\t"				\
	"and v27.16b, v" r3 ".16b, v6.16b\n\t"				\
	"shl v" r0 ".16b, v" r0 ".16b, #4\n\t"				\
	"shl v" r1 ".16b, v" r1 ".16b, #4\n\t"				\
	"shl v" r2 ".16b, v" r2 ".16b, #4\n\t"				\
	"shl v" r3 ".16b, v" r3 ".16b, #4\n\t"
#define GVX8_NIB GVX8_NIBW("20", "21", "22", "23")

/*
 * One row (values in vE0..vE3, scale in lane R of v28) of the unit in
 * vR0..vR3 (v20-v23 unless said), with weight scales vDW, into sum S by
 * accumulators A0 and A1 (zero).
 */
#define GVX8_DOTW(r0, r1, r2, r3, e0, e1, e2, e3, r, dw, s, a0, a1)	\
	"sdot v" a0 ".4s, v" r0 ".16b, v" e0 ".16b\n\t"			\
	"sdot v" a0 ".4s, v24.16b, v" e2 ".16b\n\t"			\
	"sdot v" a0 ".4s, v" r2 ".16b, v" e1 ".16b\n\t"			\
	"sdot v" a0 ".4s, v26.16b, v" e3 ".16b\n\t"			\
	"sdot v" a1 ".4s, v" r1 ".16b, v" e0 ".16b\n\t"			\
	"sdot v" a1 ".4s, v25.16b, v" e2 ".16b\n\t"			\
	"sdot v" a1 ".4s, v" r3 ".16b, v" e1 ".16b\n\t"			\
	"sdot v" a1 ".4s, v27.16b, v" e3 ".16b\n\t"			\
	"addp v" a0 ".4s, v" a0 ".4s, v" a1 ".4s\n\t"			\
	"scvtf v" a0 ".4s, v" a0 ".4s, #4\n\t"				\
	"fmul v" a0 ".4s, v" a0 ".4s, v" dw ".4s\n\t"			\
	"fmla v" s ".4s, v" a0 ".4s, v28.s[" r "]\n\t"
#define GVX8_DOT(...) GVX8_DOTW("20", "21", "22", "23", __VA_ARGS__)

/* Unit U of one row (its accumulators zeroed with the block). */
#define GVX8_U(u, dw, s) GVX8_DOT_("8", "9", "10", "11", "0", dw, s, GVX8_A##u)
#define GVX8_DOT_(...) GVX8_DOT(__VA_ARGS__)
#define GVX8_A0 "12", "13"
#define GVX8_A1 "14", "15"
#define GVX8_A2 "16", "17"
#define GVX8_A3 "18", "19"
#define GVX8_A8 "29", "30"	/* the second 8x8 group's (GV88_1) */
#define GVX8_A9 "4", "5"
/* Row r of two or three. */
#define GVX8_Z "ld1 {v29.4s, v30.4s}, [%[zero]]\n\t"
#define GVX8_R0(dw, s) GVX8_Z GVX8_DOT("8", "9", "10", "11", "0", dw, s, "29", "30")
#define GVX8_R1(dw, s) GVX8_Z GVX8_DOT("12", "13", "14", "15", "1", dw, s, "29", "30")
#define GVX8_R2(dw, s) GVX8_Z GVX8_DOT("16", "17", "18", "19", "2", dw, s, "29", "30")

#define GVX8_ACT0							\
	GV_SCALE0							\
	"ld1r {v8.2d}, [%[a0]], #8\n\t"					\
	"ld1r {v9.2d}, [%[a0]], #8\n\t"					\
	"ld1r {v10.2d}, [%[a0]], #8\n\t"				\
	"ld1r {v11.2d}, [%[a0]], #8\n\t"
#define GVX8_ACT1							\
	GV_SCALE1							\
	"ld1r {v12.2d}, [%[a1]], #8\n\t"				\
	"ld1r {v13.2d}, [%[a1]], #8\n\t"				\
	"ld1r {v14.2d}, [%[a1]], #8\n\t"				\
	"ld1r {v15.2d}, [%[a1]], #8\n\t"
#define GVX8_ACT2							\
	GV_SCALE2							\
	"ld1r {v16.2d}, [%[a2]], #8\n\t"				\
	"ld1r {v17.2d}, [%[a2]], #8\n\t"				\
	"ld1r {v18.2d}, [%[a2]], #8\n\t"				\
	"ld1r {v19.2d}, [%[a2]], #8\n\t"

/* A 4x8 group: 4 scales, then chunk 0 rows 0-3 and chunk 1 (64 bytes). */
#define GV48_W(wg)							\
	"ldr d7, [%[" wg "]], #8\n\t"					\
	"ld1 {v20.16b-v23.16b}, [%[" wg "]], #64\n\t"			\
	"fcvtl v7.4s, v7.4h\n\t"					\
	GVX8_NIB

/*
 * An 8x8 group: its 8 scales (W moves past the block), then half H: its
 * scales into v31, its rows of chunk 0 and of chunk 1.
 */
#define GV88_W(wg) "ldr q7, [%[" wg "]], #144\n\t"
#define GV88_H0(wg)							\
	"ldp q20, q21, [%[" wg "], #-128]\n\t"				\
	"ldp q22, q23, [%[" wg "], #-64]\n\t"				\
	"fcvtl v31.4s, v7.4h\n\t"					\
	GVX8_NIB
#define GV88_H1(wg)							\
	"ldp q20, q21, [%[" wg "], #-96]\n\t"				\
	"ldp q22, q23, [%[" wg "], #-32]\n\t"				\
	"fcvtl2 v31.4s, v7.8h\n\t"					\
	GVX8_NIB

/*
 * An 8x8 group against one row: chunk 0 in v20-v23, chunk 1 in v16-v19,
 * the halves' units into sums S0, S1 by accumulators A0.., A1.. (for the
 * first group v12-v15, for the second v29, v30 and v4, v5: GV88_ZERO).
 */
#define GV88_1(wg, s0, s1, a0, a1)					\
	"ldr q7, [%[" wg "]], #16\n\t"					\
	"ld1 {v20.16b-v23.16b}, [%[" wg "]], #64\n\t"			\
	"ld1 {v16.16b-v19.16b}, [%[" wg "]], #64\n\t"			\
	"fcvtl v31.4s, v7.4h\n\t"					\
	GVX8_NIBW("20", "21", "16", "17")				\
	GVX8_DOTW_("20", "21", "16", "17", "8", "9", "10", "11", "0", "31", s0, a0) \
	"fcvtl2 v31.4s, v7.8h\n\t"					\
	GVX8_NIBW("22", "23", "18", "19")				\
	GVX8_DOTW_("22", "23", "18", "19", "8", "9", "10", "11", "0", "31", s1, a1)
#define GVX8_DOTW_(...) GVX8_DOTW(__VA_ARGS__)
#define GV88_ZERO "ld1 {v29.4s, v30.4s}, [%[zero]]\n\t" "ld1 {v4.4s, v5.4s}, [%[zero]]\n\t"

/* A block's activations (and zeroed accumulators for one row): 4x8, 8x8 of 1 or 2 groups. */
#define GV48_BLOCK1 GVX8_ACT0 GV_SCALES GVX8_ZERO8
#define GVX8_ZERO8 "ld1 {v12.4s-v15.4s}, [%[zero]]\n\t" "ld1 {v16.4s-v19.4s}, [%[zero]]\n\t"
#define GV88_BLOCK1 GVX8_ACT0 GV_SCALES "ld1 {v12.4s-v15.4s}, [%[zero]]\n\t"
#define GV88_BLOCK1_2 GV88_BLOCK1 GV88_ZERO
#define GVX8_BLOCK2 GVX8_ACT0 GVX8_ACT1 GV_SCALES
#define GVX8_BLOCK3 GVX8_ACT0 GVX8_ACT1 GVX8_ACT2 GV_SCALES

/*
 * The loop: BODY is one block (two per turn; an odd block count enters at
 * the second copy); the sums v0-v5 go to OUT.
 */
#define GV_LOOP(BODY)							\
	__asm__ volatile(						\
		"movi v6.16b, #0xf0\n\t"				\
		"movi v0.4s, #0\n\t" "movi v1.4s, #0\n\t"		\
		"movi v2.4s, #0\n\t" "movi v3.4s, #0\n\t"		\
		"movi v4.4s, #0\n\t" "movi v5.4s, #0\n\t"		\
		"cbnz %w[odd], 2f\n\t"					\
		"1:\n\t"						\
		BODY							\
		"2:\n\t"						\
		BODY							\
		"subs %w[n], %w[n], #1\n\t"				\
		"b.ne 1b\n\t"						\
		"st1 {v0.4s-v3.4s}, [%[out]]\n\t"			\
		"stp q4, q5, [%[out], #64]\n\t"				\
		: [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3), \
		  [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [n] "+r"(n) \
		: [zero] "r"(qg_arm_zero64), [odd] "r"(odd), [out] "r"(sum) \
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
 * 8x8) to S + r*LDS.  The sums of 4-row unit u and row r are v(u*NR + r).
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
				GV_LOOP(GV44_ACT1 GV44_W("w0") GV44_R0("24", "0") GV44_W("w1") GV44_R0("25", "1")
					GV44_W("w2") GV44_R0("26", "2") GV44_W("w3") GV44_R0("27", "3"));
			else if (ng == 3)
				GV_LOOP(GV44_ACT1 GV44_W("w0") GV44_R0("24", "0") GV44_W("w1") GV44_R0("25", "1")
					GV44_W("w2") GV44_R0("26", "2"));
			else if (ng == 2)
				GV_LOOP(GV44_ACT1 GV44_W("w0") GV44_R0("24", "0") GV44_W("w1") GV44_R0("25", "1"));
			else
				GV_LOOP(GV44_ACT1 GV44_W("w0") GV44_R0("24", "0"));
		} else if (nr == 2) {
			if (ng == 3)
				GV_LOOP(GV44_ACT2 GV44_W("w0") GV44_R0("24", "0") GV44_R1("25", "1")
					GV44_W("w1") GV44_R0("26", "2") GV44_R1("27", "3")
					GV44_W("w2") GV44_R0("29", "4") GV44_R1("30", "5"));
			else if (ng == 2)
				GV_LOOP(GV44_ACT2 GV44_W("w0") GV44_R0("24", "0") GV44_R1("25", "1")
					GV44_W("w1") GV44_R0("26", "2") GV44_R1("27", "3"));
			else
				GV_LOOP(GV44_ACT2 GV44_W("w0") GV44_R0("24", "0") GV44_R1("25", "1"));
		} else {
			if (ng == 2)
				GV_LOOP(GV44_ACT3 GV44_W("w0") GV44_R0("24", "0") GV44_R1("25", "1")
					GV44_R2("26", "2") GV44_W("w1") GV44_R0("27", "3") GV44_R1("29", "4")
					GV44_R2("30", "5"));
			else
				GV_LOOP(GV44_ACT3 GV44_W("w0") GV44_R0("24", "0") GV44_R1("25", "1")
					GV44_R2("26", "2"));
		}
	} else if (l == QG_LAYOUT_4X8) {
		if (nr == 1) {
			if (ng == 4)
				GV_LOOP(GV48_BLOCK1 GV48_W("w0") GVX8_U(0, "7", "0") GV48_W("w1") GVX8_U(1, "7", "1")
					GV48_W("w2") GVX8_U(2, "7", "2") GV48_W("w3") GVX8_U(3, "7", "3"));
			else if (ng == 3)
				GV_LOOP(GV48_BLOCK1 GV48_W("w0") GVX8_U(0, "7", "0") GV48_W("w1") GVX8_U(1, "7", "1")
					GV48_W("w2") GVX8_U(2, "7", "2"));
			else if (ng == 2)
				GV_LOOP(GV48_BLOCK1 GV48_W("w0") GVX8_U(0, "7", "0") GV48_W("w1") GVX8_U(1, "7", "1"));
			else
				GV_LOOP(GV48_BLOCK1 GV48_W("w0") GVX8_U(0, "7", "0"));
		} else if (nr == 2) {
			if (ng == 3)
				GV_LOOP(GVX8_BLOCK2 GV48_W("w0") GVX8_R0("7", "0") GVX8_R1("7", "1")
					GV48_W("w1") GVX8_R0("7", "2") GVX8_R1("7", "3")
					GV48_W("w2") GVX8_R0("7", "4") GVX8_R1("7", "5"));
			else if (ng == 2)
				GV_LOOP(GVX8_BLOCK2 GV48_W("w0") GVX8_R0("7", "0") GVX8_R1("7", "1")
					GV48_W("w1") GVX8_R0("7", "2") GVX8_R1("7", "3"));
			else
				GV_LOOP(GVX8_BLOCK2 GV48_W("w0") GVX8_R0("7", "0") GVX8_R1("7", "1"));
		} else {
			if (ng == 2)
				GV_LOOP(GVX8_BLOCK3 GV48_W("w0") GVX8_R0("7", "0") GVX8_R1("7", "1") GVX8_R2("7", "2")
					GV48_W("w1") GVX8_R0("7", "3") GVX8_R1("7", "4") GVX8_R2("7", "5"));
			else
				GV_LOOP(GVX8_BLOCK3 GV48_W("w0") GVX8_R0("7", "0") GVX8_R1("7", "1") GVX8_R2("7", "2"));
		}
	} else {
		if (nr == 1) {
			if (ng == 2)
				GV_LOOP(GV88_BLOCK1_2 GV88_1("w0", "0", "1", GVX8_A0, GVX8_A1)
					GV88_1("w1", "2", "3", GVX8_A8, GVX8_A9));
			else
				GV_LOOP(GV88_BLOCK1 GV88_1("w0", "0", "1", GVX8_A0, GVX8_A1));
		} else if (nr == 2) {
			GV_LOOP(GVX8_BLOCK2 GV88_W("w0") GV88_H0("w0") GVX8_R0("31", "0") GVX8_R1("31", "1")
				GV88_H1("w0") GVX8_R0("31", "2") GVX8_R1("31", "3"));
		} else {
			GV_LOOP(GVX8_BLOCK3 GV88_W("w0") GV88_H0("w0") GVX8_R0("31", "0") GVX8_R1("31", "1")
				GVX8_R2("31", "2") GV88_H1("w0") GVX8_R0("31", "3") GVX8_R1("31", "4")
				GVX8_R2("31", "5"));
		}
	}
	if (nr == 1) {
		memcpy(s, sum, (size_t)units * 4 * sizeof *s);
		return;
	}
	for (int u = 0; u < units; u++)
		for (int r = 0; r < nr; r++)
			memcpy(s + (size_t)r * lds + 4 * u, sum + 4 * (u * nr + r), 4 * sizeof *s);
}

#include "kernels-arm-gemv.h"

/* --- GEMM ------------------------------------------------------------- */

/*
 * The GEMM tile is one asm loop over the blocks: the compiler, left to
 * itself, spills sums around the 32 sdot of each activation group.
 * Registers: v0-v11 the sums of up to 3 activation groups (4 per group,
 * one per weight row, lanes = activation rows), v12 the weight scales,
 * v13 the activation scales, v14 the 0xF0 mask, v16-v19 / v20-v23 the
 * weights' low / high nibbles times 16, v24-v27 four activation vectors,
 * v28-v31 the int32 accumulators of weight rows 0..3, zeroed for each
 * group by one load of 64 zero bytes instead of four movi.
 *
 * DP_LO_* / DP_HI_*: the 16 sdot of one activation group's low / high
 * values (v24-v27 = its vectors of values 4c..4c+3, or 16+4c..).  4x4:
 * weight vector c holds those values of rows 0..3, lane j = row j.
 * 8-byte layouts: vector 2c'+p holds values 8c'..8c'+7 of rows 2p and
 * 2p+1, lanes 2q and 2q+1 = row 2p+q, bytes 0-3 and 4-7.
 */
#define DP_LO_4X4 \
	"sdot v28.4s, v24.16b, v16.4b[0]\n\t" "sdot v29.4s, v24.16b, v16.4b[1]\n\t" \
	"sdot v30.4s, v24.16b, v16.4b[2]\n\t" "sdot v31.4s, v24.16b, v16.4b[3]\n\t" \
	"sdot v28.4s, v25.16b, v17.4b[0]\n\t" "sdot v29.4s, v25.16b, v17.4b[1]\n\t" \
	"sdot v30.4s, v25.16b, v17.4b[2]\n\t" "sdot v31.4s, v25.16b, v17.4b[3]\n\t" \
	"sdot v28.4s, v26.16b, v18.4b[0]\n\t" "sdot v29.4s, v26.16b, v18.4b[1]\n\t" \
	"sdot v30.4s, v26.16b, v18.4b[2]\n\t" "sdot v31.4s, v26.16b, v18.4b[3]\n\t" \
	"sdot v28.4s, v27.16b, v19.4b[0]\n\t" "sdot v29.4s, v27.16b, v19.4b[1]\n\t" \
	"sdot v30.4s, v27.16b, v19.4b[2]\n\t" "sdot v31.4s, v27.16b, v19.4b[3]\n\t"

#define DP_HI_4X4 \
	"sdot v28.4s, v24.16b, v20.4b[0]\n\t" "sdot v29.4s, v24.16b, v20.4b[1]\n\t" \
	"sdot v30.4s, v24.16b, v20.4b[2]\n\t" "sdot v31.4s, v24.16b, v20.4b[3]\n\t" \
	"sdot v28.4s, v25.16b, v21.4b[0]\n\t" "sdot v29.4s, v25.16b, v21.4b[1]\n\t" \
	"sdot v30.4s, v25.16b, v21.4b[2]\n\t" "sdot v31.4s, v25.16b, v21.4b[3]\n\t" \
	"sdot v28.4s, v26.16b, v22.4b[0]\n\t" "sdot v29.4s, v26.16b, v22.4b[1]\n\t" \
	"sdot v30.4s, v26.16b, v22.4b[2]\n\t" "sdot v31.4s, v26.16b, v22.4b[3]\n\t" \
	"sdot v28.4s, v27.16b, v23.4b[0]\n\t" "sdot v29.4s, v27.16b, v23.4b[1]\n\t" \
	"sdot v30.4s, v27.16b, v23.4b[2]\n\t" "sdot v31.4s, v27.16b, v23.4b[3]\n\t"

#define DP_LO_X8 \
	"sdot v28.4s, v24.16b, v16.4b[0]\n\t" "sdot v29.4s, v24.16b, v16.4b[2]\n\t" \
	"sdot v30.4s, v24.16b, v17.4b[0]\n\t" "sdot v31.4s, v24.16b, v17.4b[2]\n\t" \
	"sdot v28.4s, v25.16b, v16.4b[1]\n\t" "sdot v29.4s, v25.16b, v16.4b[3]\n\t" \
	"sdot v30.4s, v25.16b, v17.4b[1]\n\t" "sdot v31.4s, v25.16b, v17.4b[3]\n\t" \
	"sdot v28.4s, v26.16b, v18.4b[0]\n\t" "sdot v29.4s, v26.16b, v18.4b[2]\n\t" \
	"sdot v30.4s, v26.16b, v19.4b[0]\n\t" "sdot v31.4s, v26.16b, v19.4b[2]\n\t" \
	"sdot v28.4s, v27.16b, v18.4b[1]\n\t" "sdot v29.4s, v27.16b, v18.4b[3]\n\t" \
	"sdot v30.4s, v27.16b, v19.4b[1]\n\t" "sdot v31.4s, v27.16b, v19.4b[3]\n\t"

#define DP_HI_X8 \
	"sdot v28.4s, v24.16b, v20.4b[0]\n\t" "sdot v29.4s, v24.16b, v20.4b[2]\n\t" \
	"sdot v30.4s, v24.16b, v21.4b[0]\n\t" "sdot v31.4s, v24.16b, v21.4b[2]\n\t" \
	"sdot v28.4s, v25.16b, v20.4b[1]\n\t" "sdot v29.4s, v25.16b, v20.4b[3]\n\t" \
	"sdot v30.4s, v25.16b, v21.4b[1]\n\t" "sdot v31.4s, v25.16b, v21.4b[3]\n\t" \
	"sdot v28.4s, v26.16b, v22.4b[0]\n\t" "sdot v29.4s, v26.16b, v22.4b[2]\n\t" \
	"sdot v30.4s, v26.16b, v23.4b[0]\n\t" "sdot v31.4s, v26.16b, v23.4b[2]\n\t" \
	"sdot v28.4s, v27.16b, v22.4b[1]\n\t" "sdot v29.4s, v27.16b, v22.4b[3]\n\t" \
	"sdot v30.4s, v27.16b, v23.4b[1]\n\t" "sdot v31.4s, v27.16b, v23.4b[3]\n\t"

/* Weights of one block: 4x4 and 4x8 (scales then 64 bytes; W advances 72). */
#define DP_WLOAD_72							\
	"ldr d12, [%[w]], #8\n\t"					\
	"ld1 {v16.16b-v19.16b}, [%[w]], #64\n\t"
/* Half H of an 8x8 block: W points at its chunk 0 (block + 16 + 32H). */
#define DP_WLOAD_144(soff)						\
	"ldur d12, [%[w], #" soff "]\n\t"				\
	"ldp q18, q19, [%[w], #64]\n\t"					\
	"ldp q16, q17, [%[w]], #144\n\t"

#define DP_NIBBLES							\
	"fcvtl v12.4s, v12.4h\n\t"					\
	"and v20.16b, v16.16b, v14.16b\n\t"				\
	"and v21.16b, v17.16b, v14.16b\n\t"				\
	"and v22.16b, v18.16b, v14.16b\n\t"				\
	"and v23.16b, v19.16b, v14.16b\n\t"				\
	"shl v16.16b, v16.16b, #4\n\t"					\
	"shl v17.16b, v17.16b, #4\n\t"					\
	"shl v18.16b, v18.16b, #4\n\t"					\
	"shl v19.16b, v19.16b, #4\n\t"

/* Sum row J (v S) += ((acc J) / 16 * weight scale J) * activation scales. */
#define DP_FLOAT(acc, j, s)						\
	"scvtf v" acc ".4s, v" acc ".4s, #4\n\t"			\
	"fmul v" acc ".4s, v" acc ".4s, v12.s[" j "]\n\t"		\
	"fmla v" s ".4s, v" acc ".4s, v13.4s\n\t"

/* One activation group (pointer operand AG) into sums S0..S3. */
#define DP_GROUP(ag, LO, HI, s0, s1, s2, s3)				\
	"ldr d13, [%[" ag "]], #8\n\t"					\
	"ld1 {v24.16b-v27.16b}, [%[" ag "]], #64\n\t"			\
	"ld1 {v28.4s-v31.4s}, [%[zero]]\n\t"				\
	LO								\
	"ld1 {v24.16b-v27.16b}, [%[" ag "]], #64\n\t"			\
	HI								\
	"fcvtl v13.4s, v13.4h\n\t"					\
	DP_FLOAT("28", "0", s0) DP_FLOAT("29", "1", s1)			\
	DP_FLOAT("30", "2", s2) DP_FLOAT("31", "3", s3)

#define DP_G0(LO, HI) DP_GROUP("a0", LO, HI, "0", "1", "2", "3")
#define DP_G1(LO, HI) DP_GROUP("a1", LO, HI, "4", "5", "6", "7")
#define DP_G2(LO, HI) DP_GROUP("a2", LO, HI, "8", "9", "10", "11")

#define DP_TILE(WLOAD, GROUPS)						\
	__asm__ volatile(						\
		"movi v14.16b, #0xf0\n\t"				\
		"movi v0.4s, #0\n\t" "movi v1.4s, #0\n\t" "movi v2.4s, #0\n\t" "movi v3.4s, #0\n\t" \
		"movi v4.4s, #0\n\t" "movi v5.4s, #0\n\t" "movi v6.4s, #0\n\t" "movi v7.4s, #0\n\t" \
		"movi v8.4s, #0\n\t" "movi v9.4s, #0\n\t" "movi v10.4s, #0\n\t" "movi v11.4s, #0\n\t" \
		/* two blocks per turn; an odd count enters at the second */ \
		"cbnz %w[odd], 2f\n\t"					\
		"1:\n\t"						\
		WLOAD DP_NIBBLES GROUPS					\
		"2:\n\t"						\
		WLOAD DP_NIBBLES GROUPS					\
		"subs %w[n], %w[n], #1\n\t"				\
		"b.ne 1b\n\t"						\
		"st1 {v0.4s-v3.4s}, [%[out]], #64\n\t"			\
		"st1 {v4.4s-v7.4s}, [%[out]], #64\n\t"			\
		"st1 {v8.4s-v11.4s}, [%[out]]\n\t"			\
		: [w] "+r"(wp), [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), \
		  [n] "+r"(n), [out] "+r"(out)				\
		: [zero] "r"(qg_arm_zero64), [odd] "r"(odd)		\
		: "cc", "memory", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", \
		  "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v16", "v17", \
		  "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", \
		  "v27", "v28", "v29", "v30", "v31")

#define DP_TILE_NG(WLOAD, LO, HI)					\
	do {								\
		if (ng == 3)						\
			DP_TILE(WLOAD, DP_G0(LO, HI) DP_G1(LO, HI) DP_G2(LO, HI)); \
		else if (ng == 2)					\
			DP_TILE(WLOAD, DP_G0(LO, HI) DP_G1(LO, HI));	\
		else							\
			DP_TILE(WLOAD, DP_G0(LO, HI));			\
	} while (0)

/*
 * Four weight rows (view H of layout L, first block at W) against NG <= 3
 * groups of 4 activation rows (first at A, K/32 blocks each).  Activation
 * row 4g+r writes S[(4g+r)*LDS + 0..3].
 */
static void gemm_tile(enum qg_layout l, int h, int ng, int nb, float *restrict s, size_t lds,
		      const uint8_t *restrict w, const struct qg_block_q8_0x4 *restrict a)
{
	float sum[3][4][4];
	float *out = &sum[0][0][0];
	const uint8_t *wp = w;
	const struct qg_block_q8_0x4 *a0 = a, *a1 = ng > 1 ? a + nb : a;
	const struct qg_block_q8_0x4 *a2 = ng > 2 ? a + 2 * (size_t)nb : a;
	long n = (nb + 1) / 2, odd = nb & 1;

	if (l == QG_LAYOUT_4X4) {
		DP_TILE_NG(DP_WLOAD_72, DP_LO_4X4, DP_HI_4X4);
	} else if (l == QG_LAYOUT_4X8) {
		DP_TILE_NG(DP_WLOAD_72, DP_LO_X8, DP_HI_X8);
	} else if (h == 0) {
		wp += 16;
		DP_TILE_NG(DP_WLOAD_144("-16"), DP_LO_X8, DP_HI_X8);
	} else {
		wp += 48;
		DP_TILE_NG(DP_WLOAD_144("-40"), DP_LO_X8, DP_HI_X8);
	}
	for (int g = 0; g < ng; g++)
		qg_arm_store_t4(s + (size_t)g * 4 * lds, lds, vld1q_f32(sum[g][0]), vld1q_f32(sum[g][1]),
				vld1q_f32(sum[g][2]), vld1q_f32(sum[g][3]));
}

/* Every 4-row view of the weights against activation groups, 3 at a time. */
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
		for (int g = 0; g < ngroups; g += 3) {
			const int ng = ngroups - g < 3 ? ngroups - g : 3;
			gemm_tile(l, h, ng, nb, s + (size_t)g * 4 * lds + c, lds, wp, ap + (size_t)g * nb);
		}
	}
}

QG_ARM_GEMM_ENTRY(4x4, QG_LAYOUT_4X4)
QG_ARM_GEMM_ENTRY(4x8, QG_LAYOUT_4X8)
QG_ARM_GEMM_ENTRY(8x8, QG_LAYOUT_8X8)

/* --- activation quantization ------------------------------------------ */

QG_ARM_QUANT_ENTRIES()

const struct qg_kernel qg_kernels_dotprod[QG_LAYOUT_COUNT] = {
	[QG_LAYOUT_4X4] = {
		.name = "dotprod 4x4", .family = QG_KF_DOTPROD,
		.gemv = gemv_4x4, .gemv_rows = gemv_rows_4x4, .gemm = gemm_4x4, .act_ileave = 4,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
	[QG_LAYOUT_4X8] = {
		.name = "dotprod 4x8", .family = QG_KF_DOTPROD,
		.gemv = gemv_4x8, .gemv_rows = gemv_rows_4x8, .gemm = gemm_4x8, .act_ileave = 4,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
	[QG_LAYOUT_8X8] = {
		.name = "dotprod 8x8", .family = QG_KF_DOTPROD,
		.gemv = gemv_8x8, .gemv_rows = gemv_rows_8x8, .gemm = gemm_8x8, .act_ileave = 4,
		.quant_row = quant_row, .quant_x4 = quant_x4,
	},
};
