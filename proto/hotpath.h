/*
 * hotpath.h - hand-written codecs for the messages of a round trip.
 *
 * Running a registered graph costs a Request{run} one way and a Completion
 * the other; through protobuf-c's descriptor-driven code the four steps
 * (pack, unpack, pack, unpack) take about 0.8 microseconds on a 2 GHz
 * core, more than the rest of the round trip together.  These codecs
 * speak the same protobuf wire format, for exactly those messages:
 *
 *  - The packers write the bytes protobuf-c would write (fields in number
 *    order, proto3 zero values left out), so a peer cannot tell them apart.
 *  - The unpackers accept only that canonical form: known fields, in
 *    ascending order, each once (repeated ones together), varints that
 *    protobuf-c reads the same way.  Anything else (a field out of order,
 *    an unknown field, a Completion with stats) they leave to protobuf-c,
 *    so that what is decoded never depends on which decoder ran.
 *
 * tests/proto-test.c compares both ways against protobuf-c, and the wire
 * fuzzer checks that whatever the fast unpacker accepts, protobuf-c
 * decodes to the same values.
 */
#ifndef QG_HOTPATH_H
#define QG_HOTPATH_H

#include <stddef.h>
#include <stdint.h>

#include "qgraph.pb-c.h"

/*
 * The largest completion record the daemon writes: it keeps this much room
 * in a session's completion ring for each request it takes, and a client
 * reads completions into a buffer this big.
 */
#define QG_MAX_COMPLETION 4096u

/*
 * Pack R into BUF (CAP bytes) if it is a RunGraph request: the number of
 * bytes written, or 0 when R is another request or CAP is too small (pack
 * it with protobuf-c then).
 */
size_t qg_hot_pack_request(const Qgraph__Request *r, uint8_t *buf, size_t cap);

/*
 * Unpack LEN bytes as a RunGraph request in canonical form, allocating
 * from ALLOC (as protobuf-c's unpack does; the structures are initialised
 * with their descriptors).  NULL when the bytes are anything else, or
 * ALLOC ran out: then unpack with protobuf-c, which decides.
 */
Qgraph__Request *qg_hot_unpack_request(ProtobufCAllocator *alloc, const uint8_t *buf, size_t len);

/*
 * Pack C into BUF (CAP bytes) unless it carries stats: the number of
 * bytes written, or 0 (pack it with protobuf-c then).
 */
size_t qg_hot_pack_completion(const Qgraph__Completion *c, uint8_t *buf, size_t cap);

/* A Completion without stats, as the fast unpacker reads it. */
struct qg_hot_completion {
	uint64_t request_id;
	int32_t status;		/* a Qgraph__Status value */
	const char *error;	/* points into the unpacked bytes: ERROR_LEN of them, not terminated */
	size_t error_len;
	int has_timings;
	uint64_t queued_ns, decode_ns, alloc_ns, compute_ns, total_ns;
	uint64_t handle;
	int32_t stored_type;	/* a Qgraph__Type value */
	int64_t rows, cols;
};

/*
 * Unpack LEN bytes as a Completion in canonical form without stats into
 * OUT: 0, or -1 when the bytes are anything else (unpack them with
 * protobuf-c then).
 */
int qg_hot_unpack_completion(const uint8_t *buf, size_t len, struct qg_hot_completion *out);

/*
 * The request_id (field 1) of the Request packed in LEN bytes at BUF, read
 * without decoding the rest: the top-level fields are stepped over by
 * their wire type until it turns up.  0 when it has none, or the bytes are
 * not well formed enough to tell (the daemon answers a record it will not
 * decode with it).
 */
uint64_t qg_hot_request_id(const uint8_t *buf, size_t len);

#endif /* QG_HOTPATH_H */
