/*
 * region-test.c - session region layouts: what the daemon makes passes the
 * client's check, and every field a hostile or confused daemon could get
 * wrong is refused before anything is mapped.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "region.h"
#include "ring.h"
#include "tap.h"

int main(void)
{
	struct qg_region_layout l, bad;

	int made = qg_region_layout_make(64 << 20, 1 << 16, 256, &l);
	tap_ok(made == 0 && qg_region_layout_check(&l) == 0,
	       "a 64 MiB arena layout is made and passes the check (%llu bytes)",
	       (unsigned long long)l.region_bytes);
	tap_ok(l.submit_offset == QG_REGION_HEADER_BYTES && l.complete_offset > l.submit_offset &&
	       l.events_offset > l.complete_offset && l.arena_offset > l.events_offset &&
	       l.arena_offset % 4096 == 0 && l.region_bytes >= l.arena_offset + l.arena_bytes,
	       "the parts follow each other, page-aligned");
	tap_ok(qg_region_layout_make(1, 1000, 1, &bad) == -EINVAL, "a ring that is not a power of two");
	tap_ok(qg_region_layout_make(1, 1 << 16, 0, &bad) == -EINVAL &&
	       qg_region_layout_make(1, 1 << 16, QG_REGION_MAX_EVENTS + 1, &bad) == -EINVAL,
	       "event counts out of range");
	tap_ok(qg_region_layout_make(UINT64_MAX - 4096, 1 << 16, 1, &bad) == -EOVERFLOW,
	       "an arena whose size overflows");

	/* each field bent: refused */
	int refused = 0, total = 0;
#define BENT(stmt)                                         \
	do {                                               \
		bad = l;                                   \
		stmt;                                      \
		total++;                                   \
		refused += qg_region_layout_check(&bad) == -EPROTO; \
	} while (0)
	BENT(bad.layout_version++);
	BENT(bad.submit_offset = 0);			/* over the header */
	BENT(bad.submit_offset += 8);			/* misaligned */
	BENT(bad.submit_bytes += 4096);			/* not a power of two */
	BENT(bad.complete_offset = bad.submit_offset);	/* overlaps */
	BENT(bad.complete_bytes = qg_ring_bytes(128));	/* too small */
	BENT(bad.events_offset = bad.complete_offset);
	BENT(bad.event_count = 0);
	BENT(bad.event_count = QG_REGION_MAX_EVENTS + 1);
	BENT(bad.event_count = UINT32_MAX);
	BENT(bad.arena_offset = bad.region_bytes);	/* starts at the end */
	BENT(bad.arena_bytes = bad.region_bytes);	/* runs past the end */
	BENT(bad.arena_bytes = 0);
	BENT(bad.arena_bytes = UINT64_MAX);		/* overflows */
	BENT(bad.region_bytes = bad.arena_offset);
	BENT(bad.arena_offset = bad.events_offset);
	tap_ok(refused == total, "%d of %d bent layouts refused", refused, total);

	/* random bending never passes with a part outside the region */
	struct tap_rng rng = { 7 };
	int unsafe = 0;
	for (int i = 0; i < 20000 * (1 + tap_scale()); i++) {
		bad = l;
		uint64_t *f[] = { &bad.region_bytes, &bad.submit_offset, &bad.submit_bytes, &bad.complete_offset,
				  &bad.complete_bytes, &bad.events_offset, &bad.arena_offset, &bad.arena_bytes };
		*f[tap_rand(&rng) % 8] = tap_rand(&rng) % 2 ? tap_rand(&rng) : tap_rand(&rng) % (l.region_bytes * 2);
		if (qg_region_layout_check(&bad) == 0) {
			unsafe |= bad.arena_offset + bad.arena_bytes > bad.region_bytes;
			unsafe |= bad.submit_offset + bad.submit_bytes > bad.complete_offset;
			unsafe |= bad.complete_offset + bad.complete_bytes > bad.events_offset;
			unsafe |= bad.events_offset + bad.event_count * 16ull > bad.arena_offset;
		}
	}
	tap_ok(!unsafe, "no randomly bent layout that passes has parts overlapping or outside");
	return tap_done();
}
