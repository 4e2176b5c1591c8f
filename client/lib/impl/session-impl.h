/*
 * session-impl.h - what the files of libqgraph share about a session
 * (not installed, not exported): session.c connects, maps the region and
 * keeps the arena; requests.c sends requests and reads their completions;
 * weights.c uploads, opens and frees weights; graph.c builds graphs.
 */
#ifndef QG_CLIENT_SESSION_IMPL_H
#define QG_CLIENT_SESSION_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "qgraph.h"
#include "region.h"

struct done {
	uint64_t id;
	struct qgraph_result res;
	char error[256];
	char *stats;		/* a stats request's answer, as text */
	size_t stats_lists;	/* where its sessions and models begin in STATS */
	int stats_more;		/* more stats pages: ask again from these */
	uint32_t next_session, next_model;
};

struct block {
	int64_t off, size;
};

struct qgraph_session {
	pthread_mutex_t lock;
	int sock, bell;
	int region_fd;			/* the region's memfd, for qgraph_arena_map_at */
	struct qg_region rg;		/* mapped, with our own copy of its layout */
	uint64_t next_id;
	uint32_t max_record;
	unsigned char *rec;
	struct done *done;		/* completions read, not yet waited for */
	size_t n_done, cap_done;
	struct block *blocks;		/* arena allocations, sorted by offset */
	size_t n_blocks, cap_blocks;
	int dead;
	uint64_t alive_at;		/* when the socket last showed the daemon there */
	/* completions are decoded into this, freed all at once (a malloc'd answer only if it overflows) */
	_Alignas(16) unsigned char unpack[16384];
	size_t unpack_used;
	char error[512];
	char info[2048];
};

/* Set S's error text from FMT; returns ERR. */
__attribute__((format(printf, 3, 4)))
int qg_client_fail(struct qgraph_session *s, int err, const char *fmt, ...);

/* Send REQ (a Qgraph__Request) without waiting for its completion, blocking for room if BLOCK.  Sets *ID. */
int qg_client_send_request(struct qgraph_session *s, void *req, int block, uint64_t *id);
/*
 * Send the Qgraph__Request REQ and wait for its completion, filled into RES
 * (may be NULL): 0 or -errno (the daemon's reason in the session error).
 */
int qg_client_call(struct qgraph_session *s, void *req, struct qgraph_result *res);
/*
 * The caller's options struct THEIRS (THEIR_SIZE bytes, 0: ours; its
 * first field the size) in OURS (OUR_SIZE bytes): the fields it does not
 * know stay zero, their defaults, and OURS's size is set to OUR_SIZE.  0,
 * or -EINVAL for a size that does not hold the size itself, -E2BIG for a
 * field beyond ours that is set.
 */
int qg_client_opts(const void *theirs, size_t their_size, void *ours, size_t our_size);
/*
 * qgraph_weights_upload() past its options and the look-up by digest (NAME
 * may be NULL), or for the model being loaded when MODEL
 * (the daemon then holds the weights and *HANDLE is 0).
 */
int qg_client_upload(struct qgraph_session *s, const char *name, int model, enum qgraph_type src_type,
		     enum qgraph_type target, int64_t rows, int64_t cols, const void *data, uint64_t *handle,
		     enum qgraph_type *stored, qgraph_progress_fn progress, void *ctx);

#endif /* QG_CLIENT_SESSION_IMPL_H */
