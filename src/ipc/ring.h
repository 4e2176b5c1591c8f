/*
 * ring.h - a single-producer, single-consumer ring of length-prefixed
 * records in memory shared between two processes that do not trust each
 * other.
 *
 * Shared part: a control block (head and tail on cache lines of their own)
 * and a power-of-two data area.  Head and tail are free-running 32-bit byte
 * counters; a record is a 32-bit length, then the payload, padded to 8
 * bytes, and never wraps across the end of the data area (the producer
 * writes a skip marker instead and starts again at offset 0).
 *
 * Each side keeps its own position in private memory and never reads it
 * back from the shared block: the shared copy is only published.  What a
 * side reads of the other's position is checked before it is used (a
 * position more than the ring's size away, or a record that runs past what
 * was published, makes the ring corrupt: -EPROTO, and the caller drops the
 * peer).  A record is copied out before it is looked at.
 */
#ifndef QG_RING_H
#define QG_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "futex.h"

#define QG_RING_ALIGN 64	/* a cache line on every CPU we run on (and 2x on some) */
#define QG_RING_HDR 8u		/* the length word, padded */
#define QG_RING_SKIP 0xffffffffu	/* length word: nothing more before the end */

/* The control block as it lies in shared memory (layout is ABI). */
struct qg_ring_ctl {
	_Alignas(QG_RING_ALIGN) _Atomic uint32_t head;	/* written by the consumer */
	_Alignas(QG_RING_ALIGN) _Atomic uint32_t tail;	/* written by the producer */
	_Alignas(QG_RING_ALIGN) uint8_t data[];
};

_Static_assert(offsetof(struct qg_ring_ctl, head) == 0, "ring head offset");
_Static_assert(offsetof(struct qg_ring_ctl, tail) == 64, "ring tail offset");
_Static_assert(offsetof(struct qg_ring_ctl, data) == 128, "ring data offset");

/* One side's view of a ring (private memory). */
struct qg_ring {
	struct qg_ring_ctl *ctl;
	uint32_t size;		/* bytes of data, a power of two */
	uint32_t pos;		/* producer: our tail; consumer: our head */
	/*
	 * Producer: the consumer's head as last read (and checked).  Room up to
	 * it is known free, so the head, a line the consumer writes, is read
	 * again only when that room runs short: most pushes touch no line of
	 * the consumer's.
	 */
	uint32_t head_seen;
};

/*
 * Consumer, while it waits: ask for the line where the next record will
 * be, so that when the producer publishes it the record travels with the
 * tail instead of after it (one cache-line transfer saved per record).
 * A hint: no load, nothing it could read is trusted.
 */
static inline void qg_ring_warm(const struct qg_ring *r)
{
	__builtin_prefetch(r->ctl->data + (r->pos & (r->size - 1)), 0);
}

/*
 * Consumer, while it waits without the lock that guards its position:
 * spin for at most SPINS pauses until the producer's tail moves off POS
 * (the position it read up to), warming the line the next record will
 * fill meanwhile (as qg_ring_warm does).  True if the tail moved.  A hint:
 * the load is relaxed and what it reads is not trusted; qg_ring_pop reads
 * the tail again with acquire, and checks it.
 */
static inline bool qg_ring_await(const struct qg_ring *r, uint32_t pos, unsigned spins)
{
	const uint8_t *next = r->ctl->data + (pos & (r->size - 1));

	for (unsigned k = 0; k < spins; k++) {
		if (atomic_load_explicit(&r->ctl->tail, memory_order_relaxed) != pos)
			return true;
		__builtin_prefetch(next, 0);	/* the record travels with the tail */
		qg_cpu_relax();
	}
	return atomic_load_explicit(&r->ctl->tail, memory_order_relaxed) != pos;
}

/* Bytes a ring with SIZE bytes of data takes in shared memory. */
size_t qg_ring_bytes(uint32_t size);

/*
 * Format BYTES of shared memory at MEM as an empty ring and attach R to it
 * (the side that creates the region).  BYTES - header must leave a power of
 * two of at least 256.  Returns 0 or -EINVAL.
 */
int qg_ring_format(struct qg_ring *r, void *mem, size_t bytes);

/*
 * Attach R to a ring another side formatted: as the producer (PRODUCER
 * true: our position is the published tail) or the consumer.  The caller
 * passes the size from its own trusted copy of the layout.  The published
 * position is read once; 0 or -EINVAL.
 */
int qg_ring_attach(struct qg_ring *r, void *mem, size_t bytes, int producer);

/* Largest payload one record can carry in R. */
uint32_t qg_ring_max_record(const struct qg_ring *r);

/*
 * Producer: append a record of LEN bytes.  0, -EAGAIN when it does not fit
 * now, -EMSGSIZE when it could never fit, -EPROTO when the consumer's head
 * is impossible (corrupt ring).
 */
int qg_ring_push(struct qg_ring *r, const void *rec, uint32_t len);

/* Producer: would a record of LEN bytes fit now?  1, 0, or -EPROTO. */
int qg_ring_can_push(struct qg_ring *r, uint32_t len);

/*
 * Consumer: copy the next record into OUT (CAP bytes) and release its room.
 * Returns its length, -EAGAIN when the ring is empty, -EMSGSIZE when the
 * record is longer than CAP (it is skipped and its room released), or
 * -EPROTO when the ring is corrupt.
 */
ssize_t qg_ring_pop(struct qg_ring *r, void *out, size_t cap);

/* Consumer: is anything published and not yet consumed?  1, 0 or -EPROTO. */
int qg_ring_pending(struct qg_ring *r);

#endif /* QG_RING_H */
