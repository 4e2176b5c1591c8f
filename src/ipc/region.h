/*
 * region.h - the session region: one sealed memfd per client, shared by the
 * daemon and that client.
 *
 *   [ header | submit ring | completion ring | event table | tensor arena ]
 *
 * The daemon computes the layout, creates and seals the memfd
 * (qg_region_create), and tells the client the layout in its Welcome
 * (qg_wire_layout_pack / qg_wire_layout_unpack carry it).  Each side keeps
 * its own copy of the layout and never reads it back from shared memory:
 * the copy in the header is for people with a debugger.  The client checks
 * the layout it was sent, and the memfd's seals and size, before it maps
 * anything (qg_region_attach).
 *
 * The protocols through the header's words live beside this file, each
 * used by both sides: the doorbell and the completion wait in doorbell.h,
 * the CPU hints in hints.h; the event table's in event.h.
 *
 * Everything here is ABI between the two sides: the layout version changes
 * whenever a size or an offset does.
 */
#ifndef QG_REGION_H
#define QG_REGION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "event.h"
#include "ring.h"

#define QG_REGION_MAGIC 0x31524751u	/* "QGR1" little-endian */
#define QG_REGION_LAYOUT_VERSION 2u
#define QG_REGION_HEADER_BYTES 4096u
#define QG_REGION_ALIGN 4096u		/* every part starts on a page */
#define QG_REGION_MAX_EVENTS 4096u

struct qg_region_layout {
	uint32_t layout_version;
	uint64_t region_bytes;
	uint64_t submit_offset, submit_bytes;
	uint64_t complete_offset, complete_bytes;
	uint64_t events_offset;
	uint32_t event_count;
	uint64_t arena_offset, arena_bytes;
};

/*
 * The header.  The words the two sides signal through each sit on a cache
 * line of their own, so that polling one does not slow writes to another.
 */
struct qg_region_header {
	uint32_t magic;
	uint32_t layout_version;
	uint64_t region_bytes;	/* informative only: see above */
	/* daemon -> client: set while the daemon sleeps; ring the doorbell then */
	_Alignas(64) _Atomic uint32_t daemon_sleeping;
	/* daemon -> client: bumped after every completion it posts (a futex word) */
	_Alignas(64) _Atomic uint32_t completions;
	/* client -> daemon: non-zero while the client sleeps on COMPLETIONS */
	_Alignas(64) _Atomic uint32_t client_waiting;
	/*
	 * Where each side runs, plus one (0: not known), so that two that share
	 * a CPU yield to each other instead of spinning against each other:
	 * the daemon's loop thread (daemon -> client; a client thread waiting
	 * on that CPU yields at once), and a client thread spinning for a
	 * completion (client -> daemon; the loop yields after posting one to a
	 * client on its CPU).  Hints only: what they say is never trusted
	 * beyond choosing to yield.
	 */
	_Alignas(64) _Atomic uint32_t loop_cpu;
	_Alignas(64) _Atomic uint32_t waiter_cpu;
};

_Static_assert(offsetof(struct qg_region_header, daemon_sleeping) == 64, "header layout");
_Static_assert(offsetof(struct qg_region_header, completions) == 128, "header layout");
_Static_assert(offsetof(struct qg_region_header, client_waiting) == 192, "header layout");
_Static_assert(offsetof(struct qg_region_header, loop_cpu) == 256, "header layout");
_Static_assert(offsetof(struct qg_region_header, waiter_cpu) == 320, "header layout");
_Static_assert(sizeof(struct qg_region_header) <= QG_REGION_HEADER_BYTES, "header fits its page");

/*
 * The event table is an array of struct qg_event_slot (event.h): the
 * daemon publishes each event's sequence number and status there as the
 * mirror of its own trusted copy, and never trusts what it reads back.
 */

/*
 * The layout for an arena of ARENA_BYTES, rings of RING_BYTES of data each
 * (a power of two) and EVENT_COUNT events.  0, or -EINVAL / -EOVERFLOW.
 */
int qg_region_layout_make(uint64_t arena_bytes, uint32_t ring_bytes, uint32_t event_count,
			  struct qg_region_layout *out);

/*
 * 0 if L is a layout this code can use: the version it speaks, every part
 * page-aligned, inside the region, in order, not overlapping, rings of a
 * power-of-two size, events within limits.  -EPROTO otherwise.
 */
int qg_region_layout_check(const struct qg_region_layout *l);

/* Write the header of a new region at BASE (the daemon, once). */
void qg_region_header_init(void *base, const struct qg_region_layout *l);

/*
 * One side's view of a mapped region (private memory): where each part
 * lies, found from that side's own copy of the layout.  The client
 * produces into SUBMIT and consumes COMPLETE; the daemon the reverse.
 */
struct qg_region {
	/* first what every round trip touches, then what set-up and the arena read */
	struct qg_region_header *hdr;
	struct qg_ring submit, complete;
	struct qg_event_slot *events;	/* LAYOUT.event_count of them */
	unsigned char *arena;
	unsigned char *base;
	struct qg_region_layout layout;
};

/*
 * Daemon: create a sealed memfd for layout L (from qg_region_layout_make),
 * map it, write its header and format both rings, in *RG; the memfd (for
 * the client) in *FD.  0, or -errno with nothing left open or mapped.
 */
int qg_region_create(const struct qg_region_layout *l, struct qg_region *rg, int *fd);

/*
 * Client: check layout L (as the daemon sent it), check that FD is a
 * sealed memfd of its size, map it and attach to both rings, in *RG.
 * 0, -EPROTO for a layout or rings this code cannot use, or the -errno of
 * qg_shm_map_checked (-EPERM, -EINVAL, ...); nothing is left mapped then.
 * FD stays the caller's.
 */
int qg_region_attach(int fd, const struct qg_region_layout *l, struct qg_region *rg);

/* Unmap RG's region (either side; nothing if it is not mapped). */
void qg_region_unmap(struct qg_region *rg);

#endif /* QG_REGION_H */
