/*
 * upload.h - weights arriving chunk by chunk (upload.c): a session's one
 * upload in progress, converted into pinned memory as its chunks come,
 * and stored (weights.c) or handed to a model (models.c) when complete.
 */
#ifndef QGD_UPLOAD_H
#define QGD_UPLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant.h"
#include "weights.h"

struct qgd_session;
struct sha256_ctx;

/*
 * The most of a chunk taken in one turn of the loop: a larger chunk (a
 * client's arena may hold hundreds of MiB) is taken a slice per turn, so
 * that every other session is served between slices, not after the chunk.
 */
#define QGD_UPLOAD_SLICE (1u << 20)

/*
 * A weight matrix arriving chunk by chunk, converted as it arrives into
 * DST, pinned memory of the stored size taken when the upload opens
 * (upload.c).  No copy of the source is kept: STAGE holds what the next
 * conversion step waits for (a part of a 32-value block, a row group for
 * a repack), never more than one row group of the stored matrix, and
 * BOUNCE a bounded window of f32 values copied out of the arena.  DIGEST
 * hashes the stored values in ggml's layout as they are converted, from
 * the daemon's own copy (DST, or STAGE before a repack), where the
 * conversion passes through that layout: plain Q4_0 into an interleaved
 * one, f32 into a plain type, a plain type copied.
 */
struct qgd_upload {
	uint64_t id;
	enum qg_type src_type, target_type;
	int64_t rows, cols;
	size_t bytes, received;		/* of the source */
	size_t chunk_taken;		/* of the chunk being taken, in slices: 0 between chunks */
	void *dst;			/* DST_BYTES, from qgd_weights_alloc */
	size_t dst_bytes;
	unsigned char *stage, *bounce;
	size_t stage_bytes, staged, bounced;
	uint64_t values_done;		/* f32 sources: values converted so far */
	struct sha256_ctx *digest;	/* NULL: the digest is computed from DST once stored */
	char name[QGD_WEIGHTS_NAME_MAX];
	int model;			/* for the model this session is loading (models.c) */
};

/* What a finished upload stored: its handle (0 when a model holds it), type and shape. */
struct qgd_upload_done {
	uint64_t handle;
	enum qg_type type;
	int64_t rows, cols;
};

/* Abandon S's upload, if any: its pinned memory goes back. */
void qgd_upload_reset(struct qgd_session *s);
/*
 * Open an upload on S of a ROWS x COLS matrix arriving as SRC, to be
 * stored as DST (Q4_0: the best layout for ROWS), named NAME (may be
 * NULL), for the model S is loading if MODEL: the shape, name and quotas
 * checked and the stored size of pinned memory taken.  S's upload must be
 * reset.  0 (S->upload.id names it), or -EINVAL, -EDQUOT (a quota) or
 * -ENOMEM with the refusal in MSG (LEN bytes).
 */
int qgd_upload_begin(struct qgd_session *s, enum qg_type src, enum qg_type dst, int64_t rows, int64_t cols,
		     const char *name, bool model, char *msg, size_t len);
/*
 * Take the chunk of S's upload that starts at byte CHUNK_OFFSET of the
 * source and lies in S's arena at [OFF, +LEN), converting what it
 * completes; LAST: the source's last.  At most QGD_UPLOAD_SLICE bytes of
 * it a call: 2 while some of the chunk is left (call again with the same
 * arguments: it is checked once, at its first slice).  0 when the chunk is
 * taken and more chunks are to come; 1 when the last has come and the
 * matrix is stored (*DONE says how); or -EINVAL (out of order, outside the
 * arena or the matrix, a failed conversion, a name taken), -ENOENT (its
 * model's load ended), -EDQUOT (its model would pass user-models) or -ENOMEM with the refusal in MSG (MLEN bytes), the
 * upload abandoned.
 */
int qgd_upload_chunk(struct qgd_session *s, uint64_t chunk_offset, uint64_t off, uint64_t len, bool last,
		     struct qgd_upload_done *done, char *msg, size_t mlen);

#endif /* QGD_UPLOAD_H */
