/*
 * doorbell.c - the region's wake-up protocols (see doorbell.h): what is
 * not on the hot path, where a call costs nothing beside a syscall.
 */
#include "config.h"

#include <errno.h>
#include <sys/eventfd.h>

#include "doorbell.h"

int qg_doorbell_open(void)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	return fd < 0 ? -errno : fd;
}

void qg_doorbell_clear(int bell)
{
	uint64_t v;

	(void)!read(bell, &v, sizeof v);
}

int qg_completion_sleep(struct qg_region_header *h, struct qg_ring *complete, uint64_t deadline_ns)
{
	/*
	 * The count first, then the announcement, the fence, and a last look:
	 * a completion posted after the caller's last read of the ring and
	 * before this read is in the ring when it is looked at again; one
	 * posted after this read changes the count the futex compares.
	 */
	uint32_t seen = atomic_load_explicit(&h->completions, memory_order_acquire);
	int r = 0;

	atomic_fetch_add_explicit(&h->client_waiting, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);	/* pairs with qg_completion_notify's */
	int pending = qg_ring_pending(complete);
	if (pending < 0)
		r = -EPROTO;
	else if (pending == 0 && atomic_load_explicit(&h->completions, memory_order_relaxed) == seen)
		r = qg_futex_wait(&h->completions, seen, deadline_ns, true);
	atomic_fetch_sub_explicit(&h->client_waiting, 1, memory_order_relaxed);
	return r;
}
