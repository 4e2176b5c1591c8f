/*
 * region.c - the session region's layout (see region.h).
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "region.h"
#include "ring.h"
#include "shm.h"

static int add_part(uint64_t *at, uint64_t bytes, uint64_t *offset)
{
	uint64_t rounded = (bytes + QG_REGION_ALIGN - 1) & ~(uint64_t)(QG_REGION_ALIGN - 1);

	if (rounded < bytes || *at > UINT64_MAX - rounded)
		return -EOVERFLOW;
	*offset = *at;
	*at += rounded;
	return 0;
}

int qg_region_layout_make(uint64_t arena_bytes, uint32_t ring_bytes, uint32_t event_count,
			  struct qg_region_layout *out)
{
	struct qg_region_layout l = { .layout_version = QG_REGION_LAYOUT_VERSION };
	uint64_t at = QG_REGION_HEADER_BYTES;

	if (!out || ring_bytes < 256 || (ring_bytes & (ring_bytes - 1)) || ring_bytes > (1u << 30) ||
	    event_count < 1 || event_count > QG_REGION_MAX_EVENTS || arena_bytes == 0)
		return -EINVAL;
	l.submit_bytes = qg_ring_bytes(ring_bytes);
	l.complete_bytes = qg_ring_bytes(ring_bytes);
	l.event_count = event_count;
	l.arena_bytes = arena_bytes;
	if (add_part(&at, l.submit_bytes, &l.submit_offset) ||
	    add_part(&at, l.complete_bytes, &l.complete_offset) ||
	    add_part(&at, (uint64_t)event_count * sizeof(struct qg_event_slot), &l.events_offset) ||
	    add_part(&at, arena_bytes, &l.arena_offset))
		return -EOVERFLOW;
	l.region_bytes = at;
	*out = l;
	return 0;
}

/* A ring part: page-aligned, header plus a power of two of at least 256. */
static int ring_ok(uint64_t off, uint64_t bytes)
{
	uint64_t data;

	if (off % QG_REGION_ALIGN || bytes < qg_ring_bytes(256))
		return 0;
	data = bytes - qg_ring_bytes(0);
	return data <= (1u << 30) && (data & (data - 1)) == 0;
}

int qg_region_layout_check(const struct qg_region_layout *l)
{
	uint64_t end = QG_REGION_HEADER_BYTES;
	const uint64_t parts[4][2] = {
		{ l->submit_offset, l->submit_bytes },
		{ l->complete_offset, l->complete_bytes },
		{ l->events_offset, (uint64_t)l->event_count * sizeof(struct qg_event_slot) },
		{ l->arena_offset, l->arena_bytes },
	};

	if (l->layout_version != QG_REGION_LAYOUT_VERSION)
		return -EPROTO;
	if (!ring_ok(l->submit_offset, l->submit_bytes) || !ring_ok(l->complete_offset, l->complete_bytes))
		return -EPROTO;
	if (l->event_count < 1 || l->event_count > QG_REGION_MAX_EVENTS || l->arena_bytes == 0)
		return -EPROTO;
	for (int i = 0; i < 4; i++) {
		/* in order, page-aligned, not overlapping, inside the region */
		if (parts[i][0] % QG_REGION_ALIGN || parts[i][0] < end || parts[i][1] > l->region_bytes ||
		    parts[i][0] > l->region_bytes - parts[i][1])
			return -EPROTO;
		end = parts[i][0] + parts[i][1];
	}
	return 0;
}

void qg_region_header_init(void *base, const struct qg_region_layout *l)
{
	struct qg_region_header *h = base;

	memset(h, 0, sizeof *h);
	h->magic = QG_REGION_MAGIC;
	h->layout_version = l->layout_version;
	h->region_bytes = l->region_bytes;
	atomic_store_explicit(&h->daemon_sleeping, 0, memory_order_relaxed);
	atomic_store_explicit(&h->completions, 0, memory_order_relaxed);
	atomic_store_explicit(&h->loop_cpu, 0, memory_order_relaxed);
	atomic_store_explicit(&h->waiter_cpu, 0, memory_order_relaxed);
	atomic_store_explicit(&h->client_waiting, 0, memory_order_release);
}

/* The parts of the region mapped at BASE, from RG's layout. */
static void find_parts(struct qg_region *rg, void *base)
{
	rg->base = base;
	rg->hdr = base;
	rg->events = (struct qg_event_slot *)(rg->base + rg->layout.events_offset);
	rg->arena = rg->base + rg->layout.arena_offset;
}

int qg_region_create(const struct qg_region_layout *l, struct qg_region *rg, int *fd)
{
	void *base;
	int r;

	*rg = (struct qg_region){ .layout = *l };
	if (qg_region_layout_check(l))
		return -EINVAL;	/* not one qg_region_layout_make gave */
	int mfd = qg_shm_create("qgraph-session", l->region_bytes);
	if (mfd < 0)
		return mfd;
	if ((r = qg_shm_map_checked(mfd, l->region_bytes, &base))) {
		close(mfd);
		return r;
	}
	find_parts(rg, base);
	qg_region_header_init(base, l);
	if ((r = qg_ring_format(&rg->submit, rg->base + l->submit_offset, l->submit_bytes)) ||
	    (r = qg_ring_format(&rg->complete, rg->base + l->complete_offset, l->complete_bytes))) {
		qg_region_unmap(rg);
		close(mfd);
		return r;
	}
	*fd = mfd;
	return 0;
}

int qg_region_attach(int fd, const struct qg_region_layout *l, struct qg_region *rg)
{
	void *base;
	int r;

	*rg = (struct qg_region){ .layout = *l };
	if (qg_region_layout_check(l))
		return -EPROTO;
	/* sealed, and of the size the layout says, before it is mapped */
	if ((r = qg_shm_map_checked(fd, l->region_bytes, &base)))
		return r;
	find_parts(rg, base);
	if (qg_ring_attach(&rg->submit, rg->base + l->submit_offset, l->submit_bytes, 1) ||
	    qg_ring_attach(&rg->complete, rg->base + l->complete_offset, l->complete_bytes, 0)) {
		qg_region_unmap(rg);
		return -EPROTO;
	}
	return 0;
}

void qg_region_unmap(struct qg_region *rg)
{
	if (rg->base)
		qg_shm_unmap(rg->base, rg->layout.region_bytes);
	rg->base = NULL;
	rg->hdr = NULL;
	rg->events = NULL;
	rg->arena = NULL;
}
