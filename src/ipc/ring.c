/*
 * ring.c - SPSC record ring in shared memory (see ring.h).
 *
 * Memory ordering, reasoned about against the ARM model (on an x86 host,
 * qemu's emulation and the hardware both hide missing barriers, so tests
 * cannot show they are needed):
 *  - The producer writes the record's bytes, then publishes the new tail
 *    with a release store.  The consumer reads the tail with an acquire
 *    load, so every byte written before the release is visible to the
 *    reads that follow the acquire.
 *  - The consumer copies the record out, then publishes the new head with
 *    a release store.  The producer reads the head with an acquire load
 *    before it overwrites that room, so the consumer's reads of the old
 *    bytes happen before the producer's writes of new ones.
 *  - The producer keeps the head it last read.  Room it showed free stays
 *    free (the consumer only ever releases more), so a push that fits in
 *    it needs no new read; the acquire that read it still orders the
 *    consumer's reads of that room before our writes.
 * Positions are 32-bit counters that wrap; their difference (tail - head)
 * is what is checked, so wrap-around needs no special case.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "ring.h"

static uint32_t pad8(uint32_t n)
{
	return (n + 7u) & ~7u;
}

size_t qg_ring_bytes(uint32_t size)
{
	return sizeof(struct qg_ring_ctl) + size;
}

static int ring_size_of(size_t bytes, uint32_t *size)
{
	if (bytes < sizeof(struct qg_ring_ctl) + 256)
		return -EINVAL;
	size_t data = bytes - sizeof(struct qg_ring_ctl);
	if (data > (1u << 30) || (data & (data - 1)))
		return -EINVAL;
	*size = (uint32_t)data;
	return 0;
}

int qg_ring_format(struct qg_ring *r, void *mem, size_t bytes)
{
	uint32_t size;

	if (!r || !mem || ((uintptr_t)mem % QG_RING_ALIGN) || ring_size_of(bytes, &size))
		return -EINVAL;
	r->ctl = mem;
	r->size = size;
	r->pos = 0;
	r->head_seen = 0;
	atomic_store_explicit(&r->ctl->head, 0, memory_order_relaxed);
	atomic_store_explicit(&r->ctl->tail, 0, memory_order_release);
	return 0;
}

int qg_ring_attach(struct qg_ring *r, void *mem, size_t bytes, int producer)
{
	uint32_t size;

	if (!r || !mem || ((uintptr_t)mem % QG_RING_ALIGN) || ring_size_of(bytes, &size))
		return -EINVAL;
	r->ctl = mem;
	r->size = size;
	/* Start from what was published: acquire pairs with the other side's
	 * release, though a fresh ring holds nothing yet. */
	r->pos = producer ? atomic_load_explicit(&r->ctl->tail, memory_order_acquire)
			  : atomic_load_explicit(&r->ctl->head, memory_order_acquire);
	/* nothing known free yet: the first push reads the head */
	r->head_seen = r->pos - r->size;
	return 0;
}

uint32_t qg_ring_max_record(const struct qg_ring *r)
{
	/* one record plus a skip marker must fit in the ring at any offset */
	return r->size / 2 - QG_RING_HDR;
}

/*
 * Producer: the room in total, at least NEED bytes of it if it can: from
 * the head last seen, and only if that falls short from the consumer's
 * published head (read once, checked here).
 */
static int ring_room(struct qg_ring *r, uint32_t need, uint32_t *free_total)
{
	uint32_t used_seen = r->pos - r->head_seen;

	if (used_seen <= r->size && r->size - used_seen >= need) {
		*free_total = r->size - used_seen;
		return 0;
	}
	uint32_t head = atomic_load_explicit(&r->ctl->head, memory_order_acquire);
	uint32_t used = r->pos - head;

	if (used > r->size)	/* the consumer claims to have read what we never wrote */
		return -EPROTO;
	r->head_seen = head;
	*free_total = r->size - used;
	return 0;
}

int qg_ring_can_push(struct qg_ring *r, uint32_t len)
{
	uint32_t free_total, need, to_end;
	int err;

	if (len > qg_ring_max_record(r))
		return 0;
	need = QG_RING_HDR + pad8(len);
	to_end = r->size - (r->pos & (r->size - 1));
	if (to_end < need)
		need += to_end;	/* a skip to the start, then the record */
	if ((err = ring_room(r, need, &free_total)))
		return err;
	return free_total >= need;
}

int qg_ring_push(struct qg_ring *r, const void *rec, uint32_t len)
{
	uint32_t free_total, need, off, to_end;
	int err;

	if (len > qg_ring_max_record(r))
		return -EMSGSIZE;
	need = QG_RING_HDR + pad8(len);
	off = r->pos & (r->size - 1);
	to_end = r->size - off;
	if ((err = ring_room(r, to_end < need ? to_end + need : need, &free_total)))
		return err;
	if (to_end < need) {
		if (free_total < to_end + need)
			return -EAGAIN;
		/* the length word fits: offsets are 8-aligned, to_end >= 8 */
		uint32_t skip = QG_RING_SKIP;
		memcpy(r->ctl->data + off, &skip, sizeof skip);
		r->pos += to_end;
		off = 0;
	} else if (free_total < need) {
		return -EAGAIN;
	}
	memcpy(r->ctl->data + off, &len, sizeof len);
	if (len)
		memcpy(r->ctl->data + off + QG_RING_HDR, rec, len);
	r->pos += need;
	/* release: the bytes above are visible before the new tail is */
	atomic_store_explicit(&r->ctl->tail, r->pos, memory_order_release);
	return 0;
}

/* Consumer: bytes published and not consumed, checked (tail read once). */
static int ring_avail(struct qg_ring *r, uint32_t *avail)
{
	uint32_t tail = atomic_load_explicit(&r->ctl->tail, memory_order_acquire);
	uint32_t n = tail - r->pos;

	if (n > r->size || (n & 7u))	/* more than the ring holds, or misaligned */
		return -EPROTO;
	*avail = n;
	return 0;
}

int qg_ring_pending(struct qg_ring *r)
{
	uint32_t avail;
	int err = ring_avail(r, &avail);

	return err ? err : avail > 0;
}

ssize_t qg_ring_pop(struct qg_ring *r, void *out, size_t cap)
{
	uint32_t avail, len, off, to_end;
	int err;

	if ((err = ring_avail(r, &avail)))
		return err;
	if (avail == 0)
		return -EAGAIN;
	off = r->pos & (r->size - 1);
	to_end = r->size - off;
	memcpy(&len, r->ctl->data + off, sizeof len);	/* read the length once */
	if (len == QG_RING_SKIP) {
		if (avail < to_end)
			return -EPROTO;	/* a skip must cover the rest of the data */
		r->pos += to_end;
		avail -= to_end;
		if (avail == 0) {
			atomic_store_explicit(&r->ctl->head, r->pos, memory_order_release);
			return -EAGAIN;
		}
		off = 0;
		to_end = r->size;
		memcpy(&len, r->ctl->data, sizeof len);
		if (len == QG_RING_SKIP)
			return -EPROTO;	/* two skips in a row cannot be written */
	}
	if (len > qg_ring_max_record(r))
		return -EPROTO;
	uint32_t need = QG_RING_HDR + pad8(len);
	if (need > avail || need > to_end)
		return -EPROTO;	/* runs past what was published, or wraps */
	ssize_t ret = len;
	if (len > cap)
		ret = -EMSGSIZE;
	else if (len)
		memcpy(out, r->ctl->data + off + QG_RING_HDR, len);
	r->pos += need;
	/* release: our reads of the record happen before the producer may reuse its room */
	atomic_store_explicit(&r->ctl->head, r->pos, memory_order_release);
	return ret;
}
