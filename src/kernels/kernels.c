/*
 * kernels.c - which kernel family runs each weight layout on this CPU.
 *
 * The CPU is probed once (cpuid and XCR0 on x86-64; HWCAP, HWCAP2 and the
 * SVE vector length on aarch64), then every layout gets the first family
 * of its preference order that (1) this build carries, (2) implements the
 * layout (non-NULL gemv and gemm) and (3) the CPU can run:
 *
 *	8x8:  sve256 > i8mm > dotprod > neon          avx512vnni > avx2
 *	4x8:  i8mm > sve256 > dotprod > neon          avx512vnni > avx2
 *	4x4:  dotprod > i8mm > sve256 > neon          avx512vnni > avx2
 *
 * with the portable kernel last everywhere.  sve256 is taken only at a
 * vector length of exactly 32 bytes (its kernels are written for 256-bit
 * vectors) and with i8mm as well (its GEMM is smmla).  QGRAPH_KERNELS=FAMILY in the environment (read once, at the
 * first call) or qg_kernels_force() overrides the choice; a family the CPU
 * cannot run is refused and said so in the reason, never silently ignored.
 *
 * Thread safety: the probe and the automatic choice run under pthread_once;
 * after that the choice is a pair of atomic pointers per layout (kernel and
 * reason, both pointing at data that never changes), so readers need no
 * lock.  qg_kernels_force() takes a mutex only to keep concurrent forcers
 * from interleaving their stores.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

#include "kernels.h"

/* --------------------------------------------------------------- names */

static const char *const family_names[QG_KF_COUNT] = {
	[QG_KF_PORTABLE] = "portable",
	[QG_KF_NEON] = "neon",
	[QG_KF_DOTPROD] = "dotprod",
	[QG_KF_I8MM] = "i8mm",
	[QG_KF_SVE256] = "sve256",
	[QG_KF_AVX2] = "avx2",
	[QG_KF_AVX512VNNI] = "avx512vnni",
};

static const char *const layout_names[QG_LAYOUT_COUNT] = {
	[QG_LAYOUT_4X4] = "4x4",
	[QG_LAYOUT_4X8] = "4x8",
	[QG_LAYOUT_8X8] = "8x8",
};

const char *qg_kfamily_name(enum qg_kfamily f)
{
	return (unsigned)f < QG_KF_COUNT ? family_names[f] : NULL;
}

int qg_kfamily_from_name(const char *name)
{
	if (!name)
		return -EINVAL;
	for (int f = 0; f < QG_KF_COUNT; f++)
		if (strcasecmp(name, family_names[f]) == 0)
			return f;
	return -EINVAL;
}

int qg_layout_of(enum qg_type type)
{
	switch (type) {
	case QG_TYPE_Q4_0_4X4:
		return QG_LAYOUT_4X4;
	case QG_TYPE_Q4_0_4X8:
		return QG_LAYOUT_4X8;
	case QG_TYPE_Q4_0_8X8:
		return QG_LAYOUT_8X8;
	default:
		return -EINVAL;
	}
}

enum qg_type qg_layout_type(enum qg_layout layout)
{
	switch (layout) {
	case QG_LAYOUT_4X4:
		return QG_TYPE_Q4_0_4X4;
	case QG_LAYOUT_4X8:
		return QG_TYPE_Q4_0_4X8;
	case QG_LAYOUT_8X8:
		return QG_TYPE_Q4_0_8X8;
	default:
		return QG_TYPE_COUNT;
	}
}

/* --------------------------------------------------------------- the CPU */

static struct qg_cpu cpu;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
/* XCR0: which register states the OS saves (so may be used). */
static uint64_t read_xcr0(void)
{
	uint32_t lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

static void probe_cpu_x86(void)
{
	unsigned a, b, c, d, max;
	int ymm_ok = 0, zmm_ok = 0;

	max = __get_cpuid_max(0, NULL);
	if (max < 1 || !__get_cpuid(1, &a, &b, &c, &d))
		return;
	/* leaf 1 ecx: FMA 12, OSXSAVE 27, AVX 28, F16C 29 */
	if ((c & (1u << 27)) && (c & (1u << 28))) {
		uint64_t xcr0 = read_xcr0();
		ymm_ok = (xcr0 & 0x6) == 0x6;		/* SSE + AVX state */
		zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM_Hi256, Hi16_ZMM */
	}
	if (!ymm_ok)
		return;		/* AVX registers unusable: nothing below may run */
	cpu.fma = !!(c & (1u << 12));
	cpu.f16c = !!(c & (1u << 29));
	if (max < 7)
		return;
	__cpuid_count(7, 0, a, b, c, d);
	/* leaf 7 ebx: AVX2 5, AVX512F 16, DQ 17, BW 30, VL 31; ecx: VNNI 11 */
	cpu.avx2 = !!(b & (1u << 5));
	if (zmm_ok) {
		const unsigned need = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);
		cpu.avx512 = (b & need) == need;
		cpu.avx512vnni = cpu.avx512 && (c & (1u << 11));
	}
}
#endif

#if defined(__aarch64__) && defined(__linux__)
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP_SVE
#define HWCAP_SVE (1UL << 22)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#ifndef PR_SVE_GET_VL
#define PR_SVE_GET_VL 51
#endif
#ifndef PR_SVE_VL_LEN_MASK
#define PR_SVE_VL_LEN_MASK 0xffff
#endif

static void probe_cpu_arm(void)
{
	unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);

	cpu.neon = !!(hw & HWCAP_ASIMD);
	cpu.dotprod = !!(hw & HWCAP_ASIMDDP);
	cpu.i8mm = !!(hw2 & HWCAP2_I8MM);
	cpu.sve = !!(hw & HWCAP_SVE);
	if (cpu.sve) {
		/* the thread's vector length, without executing an SVE instruction */
		int vl = prctl(PR_SVE_GET_VL, 0, 0, 0, 0);
		cpu.sve_bytes = vl > 0 ? (vl & PR_SVE_VL_LEN_MASK) : 0;
	}
}
#endif

static void probe_cpu(void)
{
	memset(&cpu, 0, sizeof cpu);
#if defined(__x86_64__)
	probe_cpu_x86();
#elif defined(__aarch64__) && defined(__linux__)
	probe_cpu_arm();
#elif defined(__aarch64__)
	cpu.neon = 1;		/* the baseline of the architecture */
#endif
}

const struct qg_cpu *qg_cpu_features(void)
{
	pthread_once(&cpu_once, probe_cpu);
	return &cpu;
}

/* ------------------------------------------------------------- families */

/* FAMILY's table in this build, or NULL when the build has none. */
static const struct qg_kernel *family_table(enum qg_kfamily f)
{
	switch (f) {
	case QG_KF_PORTABLE:
		return qg_kernels_portable;
#if defined(__x86_64__) && defined(HAVE_AVX2)
	case QG_KF_AVX2:
		return qg_kernels_avx2;
#endif
#if defined(__x86_64__) && defined(HAVE_AVX512VNNI)
	case QG_KF_AVX512VNNI:
		return qg_kernels_avx512vnni;
#endif
#if defined(__aarch64__) && defined(HAVE_NEON)
	case QG_KF_NEON:
		return qg_kernels_neon;
#endif
#if defined(__aarch64__) && defined(HAVE_DOTPROD)
	case QG_KF_DOTPROD:
		return qg_kernels_dotprod;
#endif
#if defined(__aarch64__) && defined(HAVE_I8MM)
	case QG_KF_I8MM:
		return qg_kernels_i8mm;
#endif
#if defined(__aarch64__) && defined(HAVE_SVE)
	case QG_KF_SVE256:
		return qg_kernels_sve256;
#endif
	default:
		return NULL;
	}
}

/*
 * Whether the CPU runs FAMILY's code.  WHY gets what decided it, as the
 * reason string shows it ("HWCAP2_I8MM", "SVE vector 16 bytes (sve256
 * needs 32)").  The flags a family is compiled with are what it needs: the
 * i8mm and sve files are built with +dotprod+i8mm (+sve), the x86 ones with
 * FMA and F16C (+AVX-512 F/BW/VL/DQ/VNNI).
 */
/* WHY may be NULL: callers that only ask need no text. */
#define WHY(...) do { if (why) snprintf(why, len, __VA_ARGS__); } while (0)

static int cpu_runs(const struct qg_cpu *c, enum qg_kfamily f, char *why, size_t len)
{
	switch (f) {
	case QG_KF_PORTABLE:
		WHY("runs everywhere");
		return 1;
	case QG_KF_NEON:
		WHY(c->neon ? "HWCAP_ASIMD" : "no HWCAP_ASIMD");
		return c->neon;
	case QG_KF_DOTPROD:
		WHY(c->dotprod ? "HWCAP_ASIMDDP" : "no HWCAP_ASIMDDP");
		return c->dotprod;
	case QG_KF_I8MM:
		if (!c->i8mm || !c->dotprod) {
			WHY("%s", !c->i8mm ? "no HWCAP2_I8MM" : "no HWCAP_ASIMDDP");
			return 0;
		}
		if (c->sve)
			WHY("HWCAP2_I8MM, SVE vector %d bytes%s", c->sve_bytes,
				 c->sve_bytes != 32 ? " (sve256 needs 32)" : "");
		else
			WHY("HWCAP2_I8MM, no SVE");
		return 1;
	case QG_KF_SVE256:
		if (!c->sve) {
			WHY("no HWCAP_SVE");
			return 0;
		}
		if (c->sve_bytes != 32) {
			WHY("SVE vector %d bytes (needs 32)", c->sve_bytes);
			return 0;
		}
		if (!c->i8mm || !c->dotprod) {
			WHY("SVE-256 but %s", !c->i8mm ? "no HWCAP2_I8MM" : "no HWCAP_ASIMDDP");
			return 0;
		}
		/* its GEMM is smmla: i8mm is needed, not only allowed by the flags */
		WHY("HWCAP_SVE, SVE vector 32 bytes, HWCAP2_I8MM (smmla GEMM)");
		return 1;
	case QG_KF_AVX2:
		if (!c->avx2 || !c->fma || !c->f16c) {
			WHY("no %s", !c->avx2 ? "AVX2 (cpuid 7, or XCR0 lacks YMM state)"
				 : !c->fma ? "FMA" : "F16C");
			return 0;
		}
		WHY("cpuid AVX2+FMA+F16C, XCR0 YMM state");
		return 1;
	case QG_KF_AVX512VNNI:
		if (!c->avx512vnni || !c->avx2 || !c->fma || !c->f16c) {
			WHY("no %s", !c->avx512 ? "AVX-512 F/DQ/BW/VL (cpuid 7, or XCR0 lacks ZMM state)"
				 : !c->avx512vnni ? "AVX512_VNNI" : "AVX2+FMA+F16C");
			return 0;
		}
		WHY("cpuid AVX512F/DQ/BW/VL+VNNI, XCR0 ZMM state");
		return 1;
	default:
		WHY("unknown family");
		return 0;
	}
}

#undef WHY

/* FAMILY's kernel for LAYOUT: in the build, implemented, runnable.  WHY as above. */
static const struct qg_kernel *family_kernel(enum qg_kfamily f, enum qg_layout l,
					     char *why, size_t len)
{
	const struct qg_kernel *t = family_table(f);

	if (!t) {
		if (why)
			snprintf(why, len, "not in this build");
		return NULL;
	}
	if (!t[l].gemv || !t[l].gemm) {
		if (why)
			snprintf(why, len, "no %s kernel", layout_names[l]);
		return NULL;
	}
	if (!cpu_runs(qg_cpu_features(), f, why, len))
		return NULL;
	return &t[l];
}

const struct qg_kernel *qg_kernel_get(enum qg_kfamily family, enum qg_layout layout)
{
	if ((unsigned)family >= QG_KF_COUNT || (unsigned)layout >= QG_LAYOUT_COUNT)
		return NULL;
	return family_kernel(family, layout, NULL, 0);
}

/* ------------------------------------------------------------- choosing */

#if defined(__x86_64__)
static const enum qg_kfamily pref[QG_LAYOUT_COUNT][3] = {
	[QG_LAYOUT_4X4] = { QG_KF_AVX512VNNI, QG_KF_AVX2, QG_KF_PORTABLE },
	[QG_LAYOUT_4X8] = { QG_KF_AVX512VNNI, QG_KF_AVX2, QG_KF_PORTABLE },
	[QG_LAYOUT_8X8] = { QG_KF_AVX512VNNI, QG_KF_AVX2, QG_KF_PORTABLE },
};
#define NPREF 3
#elif defined(__aarch64__)
static const enum qg_kfamily pref[QG_LAYOUT_COUNT][5] = {
	[QG_LAYOUT_4X4] = { QG_KF_DOTPROD, QG_KF_I8MM, QG_KF_SVE256, QG_KF_NEON, QG_KF_PORTABLE },
	[QG_LAYOUT_4X8] = { QG_KF_I8MM, QG_KF_SVE256, QG_KF_DOTPROD, QG_KF_NEON, QG_KF_PORTABLE },
	[QG_LAYOUT_8X8] = { QG_KF_SVE256, QG_KF_I8MM, QG_KF_DOTPROD, QG_KF_NEON, QG_KF_PORTABLE },
};
#define NPREF 5
#else
static const enum qg_kfamily pref[QG_LAYOUT_COUNT][1] = {
	[QG_LAYOUT_4X4] = { QG_KF_PORTABLE },
	[QG_LAYOUT_4X8] = { QG_KF_PORTABLE },
	[QG_LAYOUT_8X8] = { QG_KF_PORTABLE },
};
#define NPREF 1
#endif

#define REASON_LEN 512

/* Written once under init_once, read-only afterwards. */
static const struct qg_kernel *auto_kernel[QG_LAYOUT_COUNT];
static char auto_reason[QG_LAYOUT_COUNT][REASON_LEN];
static char forced_reason[QG_KF_COUNT][QG_LAYOUT_COUNT][REASON_LEN];
static char env_reason[QG_LAYOUT_COUNT][REASON_LEN];
static int forced_served[QG_KF_COUNT];

/* The current choice; readers load these without a lock. */
static _Atomic(const struct qg_kernel *) cur_kernel[QG_LAYOUT_COUNT];
static const struct qg_kq_kernel *auto_kq;
static _Atomic(const struct qg_kq_kernel *) cur_kq;
static char kq_reason_auto[REASON_LEN], kq_reason_forced[QG_KF_COUNT][REASON_LEN];
static _Atomic(const char *) cur_kq_reason;
static _Atomic(const char *) cur_reason[QG_LAYOUT_COUNT];

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t force_lock = PTHREAD_MUTEX_INITIALIZER;

/* Append to BUF (of REASON_LEN) without overflowing it. */
__attribute__((format(printf, 2, 3)))
static void reason_add(char *buf, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used + 1 >= REASON_LEN)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, REASON_LEN - used, fmt, ap);
	va_end(ap);
}

/* Pick LAYOUT's kernel by preference and describe why in auto_reason. */
static void choose_auto(enum qg_layout l)
{
	char skipped[REASON_LEN] = "";
	char why[128];

	for (int i = 0; i < NPREF; i++) {
		enum qg_kfamily f = pref[l][i];
		const struct qg_kernel *k = family_kernel(f, l, why, sizeof why);
		if (k) {
			auto_kernel[l] = k;
			snprintf(auto_reason[l], REASON_LEN, "%s: %s", family_names[f], why);
			if (skipped[0])
				reason_add(auto_reason[l], " (%s)", skipped);
			return;
		}
		reason_add(skipped, "%s%s: %s", skipped[0] ? "; " : "", family_names[f], why);
	}
	/* not reached: the portable family serves every layout */
	auto_kernel[l] = &qg_kernels_portable[l];
	snprintf(auto_reason[l], REASON_LEN, "portable: %s", skipped);
}

/*
 * Describe forcing FAMILY by HOW into OUT[layout].  Layouts the family does
 * not implement keep the automatic choice.  Returns the number of layouts
 * it serves: 0 if the CPU cannot run it or the build lacks it.
 */
static int prepare_force(enum qg_kfamily f, const char *how, char out[][REASON_LEN])
{
	char why[128];
	int served = 0;

	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		if (family_kernel(f, l, why, sizeof why)) {
			served++;
			snprintf(out[l], REASON_LEN, "%s: forced by %s (%s)", family_names[f], how, why);
		} else {
			snprintf(out[l], REASON_LEN, "%.300s (%s %s: %s)", auto_reason[l], how,
				 family_names[f], why);
		}
	}
	return served;
}

/* Make FAMILY current, with reasons R; QG_KF_COUNT: the automatic choice. */
static void apply(enum qg_kfamily f, char r[][REASON_LEN])
{
	const struct qg_kq_kernel *kq = f < QG_KF_COUNT ? qg_kq_kernel_get(f) : NULL;

	atomic_store_explicit(&cur_kq, kq ? kq : auto_kq, memory_order_release);
	atomic_store_explicit(&cur_kq_reason, kq ? kq_reason_forced[f] : kq_reason_auto, memory_order_release);
	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		const struct qg_kernel *k = f < QG_KF_COUNT ? qg_kernel_get(f, l) : NULL;
		atomic_store_explicit(&cur_kernel[l], k ? k : auto_kernel[l], memory_order_release);
		atomic_store_explicit(&cur_reason[l], f < QG_KF_COUNT ? r[l] : auto_reason[l],
				      memory_order_release);
	}
}

static void init_choice(void);

/* The K-quant kernels' families, best first. */
static const enum qg_kfamily kq_pref[] = {
	QG_KF_AVX512VNNI, QG_KF_AVX2, QG_KF_SVE256, QG_KF_I8MM, QG_KF_DOTPROD, QG_KF_NEON,
};

const struct qg_kq_kernel *qg_kq_kernel_get(enum qg_kfamily family)
{
	const struct qg_kq_kernel *t = NULL;

	switch (family) {
	case QG_KF_PORTABLE:
		t = &qg_kq_portable;
		break;
#if defined(__x86_64__) && defined(HAVE_AVX2)
	case QG_KF_AVX2:
		t = &qg_kq_avx2;
		break;
#endif
#if defined(__x86_64__) && defined(HAVE_AVX512VNNI)
	case QG_KF_AVX512VNNI:
		t = &qg_kq_avx512vnni;
		break;
#endif
#if defined(__aarch64__) && defined(HAVE_NEON)
	case QG_KF_NEON:
		t = &qg_kq_neon;
		break;
#endif
#if defined(__aarch64__) && defined(HAVE_DOTPROD)
	case QG_KF_DOTPROD:
		t = &qg_kq_dotprod;
		break;
#endif
#if defined(__aarch64__) && defined(HAVE_I8MM)
	case QG_KF_I8MM:
		t = &qg_kq_i8mm;
		break;
#endif
	default:
		break;
	}
	return t && cpu_runs(qg_cpu_features(), family, NULL, 0) ? t : NULL;
}

/* The best K-quant family this CPU runs, and every reason string the choice can show. */
static void choose_auto_kq(void)
{
	char why[128];

	auto_kq = &qg_kq_portable;
	snprintf(kq_reason_auto, REASON_LEN, "portable: no SIMD K-quant kernels for this CPU");
	for (size_t i = 0; i < sizeof kq_pref / sizeof kq_pref[0]; i++) {
		const struct qg_kq_kernel *t = qg_kq_kernel_get(kq_pref[i]);
		if (t) {
			auto_kq = t;
			cpu_runs(qg_cpu_features(), kq_pref[i], why, sizeof why);
			snprintf(kq_reason_auto, REASON_LEN, "%s: %s", family_names[kq_pref[i]], why);
			break;
		}
	}
	for (int f = 0; f < QG_KF_COUNT; f++)
		snprintf(kq_reason_forced[f], REASON_LEN, "%s: forced", family_names[f]);
}

const char *qg_kq_kernel_reason(void)
{
	pthread_once(&init_once, init_choice);
	return atomic_load_explicit(&cur_kq_reason, memory_order_acquire);
}

const struct qg_kq_kernel *qg_kq_kernel_for(void)
{
	pthread_once(&init_once, init_choice);
	return atomic_load_explicit(&cur_kq, memory_order_acquire);
}

static void init_choice(void)
{
	const char *env = getenv("QGRAPH_KERNELS");

	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		choose_auto(l);
	choose_auto_kq();
	/* every reason string is written here, once; later calls only point at them */
	for (int f = 0; f < QG_KF_COUNT; f++)
		forced_served[f] = prepare_force(f, "qg_kernels_force()", forced_reason[f]);
	apply(QG_KF_COUNT, NULL);
	if (!env || !env[0] || strcasecmp(env, "auto") == 0)
		return;

	int f = qg_kfamily_from_name(env);
	const char *problem = NULL;
	char how[64];
	snprintf(how, sizeof how, "QGRAPH_KERNELS=%.40s", env);
	if (f < 0)
		problem = "is not a kernel family (portable, neon, dotprod, i8mm, sve256, avx2, avx512vnni, auto)";
	else if (prepare_force(f, how, env_reason) == 0)
		problem = "cannot run on this CPU or is not in this build";
	if (!problem) {
		apply(f, env_reason);
		return;
	}
	/* refused: keep the automatic choice, and say so where it is reported */
	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		snprintf(env_reason[l], REASON_LEN, "%.300s (%s ignored: %s)", auto_reason[l], how, problem);
		atomic_store_explicit(&cur_reason[l], env_reason[l], memory_order_release);
	}
	fprintf(stderr, "qgraph: %s %s; choosing kernels automatically\n", how, problem);
}

const struct qg_kernel *qg_kernel_for(enum qg_layout layout)
{
	if ((unsigned)layout >= QG_LAYOUT_COUNT)
		layout = QG_LAYOUT_4X4;	/* never NULL, as promised; callers pass a valid layout */
	pthread_once(&init_once, init_choice);
	return atomic_load_explicit(&cur_kernel[layout], memory_order_acquire);
}

const char *qg_kernel_reason(enum qg_layout layout)
{
	if ((unsigned)layout >= QG_LAYOUT_COUNT)
		return "no such layout";
	pthread_once(&init_once, init_choice);
	return atomic_load_explicit(&cur_reason[layout], memory_order_acquire);
}

int qg_kernels_force(enum qg_kfamily family)
{
	if (family != QG_KF_COUNT && (unsigned)family >= QG_KF_COUNT)
		return -EINVAL;
	pthread_once(&init_once, init_choice);
	if (family != QG_KF_COUNT && forced_served[family] == 0)
		return -ENOTSUP;
	pthread_mutex_lock(&force_lock);
	apply(family, family != QG_KF_COUNT ? forced_reason[family] : NULL);
	pthread_mutex_unlock(&force_lock);
	return 0;
}

/*
 * The layout each CPU runs best, in order: the first of these whose kernel
 * this build has and the CPU runs.
 *  - SVE-256 (Graviton3): 8x8, the layout its kernels are written for.
 *  - x86-64 with AVX-512 VNNI or AVX2: 8x8 (eight rows per block of
 *    activations loaded, as ggml repacks on x86).
 *  - i8mm (Graviton4, Grace): 4x8, smmla's 2x8 by 8x2 shape.
 *  - dotprod (Graviton2, Neoverse N1): 4x4, sdot's four 4-byte lanes.
 *  - plain NEON (Cortex-A72, Graviton1): 4x4, so a weight file prepared
 *    for an aarch64 fleet has one layout whether or not dotprod is there.
 *  - portable C only: 8x8: GCC vectorizes its loops best (on aarch64 it
 *    runs several times fewer instructions per MAC than 4x4 and 4x8:
 *    tests/bench/insn-table.sh with KERNEL=portable; on x86-64 the three
 *    are within noise of each other).
 */
enum qg_type qg_best_weight_type(void)
{
	static const struct {
		enum qg_kfamily f;
		enum qg_layout l;
	} order[] = {
		{ QG_KF_SVE256, QG_LAYOUT_8X8 },
		{ QG_KF_AVX512VNNI, QG_LAYOUT_8X8 },
		{ QG_KF_AVX2, QG_LAYOUT_8X8 },
		{ QG_KF_I8MM, QG_LAYOUT_4X8 },
		{ QG_KF_DOTPROD, QG_LAYOUT_4X4 },
		{ QG_KF_NEON, QG_LAYOUT_4X4 },
	};

	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
		if (qg_kernel_get(order[i].f, order[i].l))
			return qg_layout_type(order[i].l);
	return QG_TYPE_Q4_0_8X8;
}

/*
 * Q8_0 weights go interleaved four rows at a time (Q8_0_4X4) where the
 * K-quant family has SIMD kernels for that layout: on dotprod CPUs,
 * where the plain rows' GEMV must gather each row's codes and scale by
 * lane loads, and sdot then gives four rows' sums in one vector.  i8mm
 * and SVE CPUs keep plain Q8_0, whose smmla kernels need no such layout,
 * and so does every CPU without such kernels: plain Q8_0 is the form
 * every other reader of the weights expects.
 */
enum qg_type qg_kq_q8_0_type(const struct qg_kq_kernel *kq)
{
	return kq && kq->family != QG_KF_PORTABLE && kq->q8_0_4x4_gemv && kq->q8_0_4x4_gemm ? QG_TYPE_Q8_0_4X4
											     : QG_TYPE_Q8_0;
}

enum qg_type qg_best_q8_0_type(void)
{
	return qg_kq_q8_0_type(qg_kq_kernel_for());
}
