/*
 * futex.h - the few waiting primitives the backend and events share: a
 * pause for spin loops, and futex wait / wake on a 32-bit atomic word.
 * (Their clock is qg_stamp_ns, stamp.h: the one clock of the project.)
 *
 * SHARED selects a shared futex (the word may be mapped by several
 * processes: the kernel keys it by the page, not by the address space);
 * otherwise the cheaper private futex is used.  Header-only (static
 * inline): one syscall each, nothing to keep in a library.
 */
#ifndef QG_FUTEX_H
#define QG_FUTEX_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

/* Tell the core we are spinning (frees the pipeline for its sibling thread). */
static inline void qg_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	_mm_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#endif
}

/*
 * Sleep while *WORD == EXPECT, until woken or the CLOCK_MONOTONIC time
 * DEADLINE_NS (0: no deadline).  FUTEX_WAIT_BITSET takes an absolute time,
 * so a wait cut short by a signal or a spurious wake-up is simply retried
 * by the caller without the time-out drifting.  Returns 0 when woken (or
 * the word already differed: -EAGAIN is folded into 0), -ETIMEDOUT, or
 * -EINTR.
 */
static inline int qg_futex_wait(_Atomic uint32_t *word, uint32_t expect, uint64_t deadline_ns, bool shared)
{
	struct timespec ts, *tp = NULL;
	int op = FUTEX_WAIT_BITSET | (shared ? 0 : FUTEX_PRIVATE_FLAG);

	if (deadline_ns) {
		ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
		ts.tv_nsec = (long)(deadline_ns % 1000000000u);
		tp = &ts;
	}
	long r = syscall(SYS_futex, (uint32_t *)word, op, expect, tp, NULL, FUTEX_BITSET_MATCH_ANY);
	if (r == 0 || errno == EAGAIN)
		return 0;
	return -errno;
}

/* Wake every thread sleeping on WORD. */
static inline void qg_futex_wake(_Atomic uint32_t *word, bool shared)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE | (shared ? 0 : FUTEX_PRIVATE_FLAG), INT_MAX, NULL,
		NULL, 0);
}

#endif /* QG_FUTEX_H */
