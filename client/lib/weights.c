/*
 * weights.c - libqgraph's calls on weights held in qgraphd (see qgraph.h):
 * their digest, opening them by digest or by name, uploading them in
 * chunks through the arena (two staging buffers), and freeing them.  The
 * requests go through requests.c (qg_client_call, qg_client_send_request).
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <nettle/sha2.h>

#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "session-impl.h"
#include "wire.h"

/*
 * Whether weights of SRC_TYPE uploaded as TARGET are stored with the same
 * values, so that their digest finds them: Q4_0 and Q8_0 in any of their
 * weight layouts (a TARGET of Q4_0 or Q8_0 lets the daemon pick among
 * them), F16, Q4_K and Q6_K as they are.
 */
static bool digest_finds(enum qgraph_type src_type, enum qgraph_type target)
{
	if (src_type == QGRAPH_TYPE_Q4_0)
		return target == QGRAPH_TYPE_Q4_0 || target == QGRAPH_TYPE_Q4_0_4X4 || target == QGRAPH_TYPE_Q4_0_4X8 ||
		       target == QGRAPH_TYPE_Q4_0_8X8;
	if (src_type == QGRAPH_TYPE_Q8_0)
		return target == QGRAPH_TYPE_Q8_0 || target == QGRAPH_TYPE_Q8_0_4X4;
	return (src_type == QGRAPH_TYPE_F16 || src_type == QGRAPH_TYPE_Q4_K || src_type == QGRAPH_TYPE_Q6_K) &&
	       target == src_type;
}

QGRAPH_API int qgraph_weights_digest(enum qgraph_type type, int64_t rows, int64_t cols, const void *data,
				     unsigned char digest[32])
{
	ssize_t bytes = qgraph_matrix_size(type, rows, cols);
	struct sha256_ctx c;

	if (bytes < 0)
		return (int)bytes;
	if (!data || !digest ||
	    (type != QGRAPH_TYPE_Q4_0 && type != QGRAPH_TYPE_F16 && type != QGRAPH_TYPE_Q8_0 && type != QGRAPH_TYPE_Q4_K &&
	     type != QGRAPH_TYPE_Q6_K))
		return -EINVAL;
	sha256_init(&c);
	sha256_update(&c, (size_t)bytes, data);
	sha256_digest(&c, 32, digest);
	return 0;
}

QGRAPH_API int qgraph_weights_open_digest(struct qgraph_session *s, enum qgraph_type type, int64_t rows, int64_t cols,
					  const unsigned char digest[32], uint64_t *handle, enum qgraph_type *stored)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__OpenWeights ow = QGRAPH__OPEN_WEIGHTS__INIT;
	struct qgraph_result res;
	int wt = qg_wire_type_of_public(type);

	if (!s || !digest || !handle || wt < 0 || rows < 1 || cols < 1)
		return -EINVAL;
	ow.digest.data = (uint8_t *)digest;
	ow.digest.len = 32;
	ow.digest_type = (Qgraph__Type)wt;
	ow.rows = rows;
	ow.cols = cols;
	req.body_case = QGRAPH__REQUEST__BODY_OPEN_WEIGHTS;
	req.open_weights = &ow;
	int r = qg_client_call(s, &req, &res);
	if (r)
		return r;
	*handle = res.handle;
	if (stored)
		*stored = (enum qgraph_type)res.stored_type;
	return 0;
}

/*
 * Whether O's weights are held by the daemon already where S may share
 * them, in the layout O asks for: then their handle is in *HANDLE, their
 * type in *STORED (may be NULL), and O's progress is told it is all done.
 */
static bool found_by_digest(struct qgraph_session *s, const struct qgraph_upload_opts *o, uint64_t *handle,
			    enum qgraph_type *stored)
{
	unsigned char digest[32];
	enum qgraph_type got;

	if (!digest_finds(o->src_type, o->target) ||
	    qgraph_weights_digest(o->src_type, o->rows, o->cols, o->data, digest) ||
	    qgraph_weights_open_digest(s, o->src_type, o->rows, o->cols, digest, handle, &got))
		return false;
	if (o->target != o->src_type && o->target != QGRAPH_TYPE_Q4_0 && got != o->target) {
		qgraph_weights_free(s, *handle);	/* stored in another layout than the one asked for */
		return false;
	}
	if (stored)
		*stored = got;
	if (o->progress) {
		uint64_t bytes = (uint64_t)qgraph_matrix_size(o->src_type, o->rows, o->cols);
		o->progress(o->progress_ctx, 1, 1, bytes, bytes);
	}
	return true;
}

QGRAPH_API int qgraph_weights_upload(struct qgraph_session *s, const struct qgraph_upload_opts *opts,
				     uint64_t *handle, enum qgraph_type *stored)
{
	struct qgraph_upload_opts o;
	int r;

	if (!s)
		return -EINVAL;
	if (!opts)
		return qg_client_fail(s, -EINVAL, "weights upload: no options");
	if ((r = qg_client_opts(opts, opts->size, &o, sizeof o)))
		return qg_client_fail(s, r, "weights upload: %s", r == -E2BIG ? "a field this library does not know is set"
									  : "the options' size does not hold itself");
	if (o.flags & ~(uint64_t)QGRAPH_UPLOAD_SEND)
		return qg_client_fail(s, -EINVAL, "weights upload: flags 0x%llx are not known",
				      (unsigned long long)(o.flags & ~(uint64_t)QGRAPH_UPLOAD_SEND));
	/* what the daemon holds already (this user's, a share group's, a model's) is not sent again */
	if (!o.name && !(o.flags & QGRAPH_UPLOAD_SEND) && handle && found_by_digest(s, &o, handle, stored))
		return 0;
	return qg_client_upload(s, o.name, 0, o.src_type, o.target, o.rows, o.cols, o.data, handle, stored, o.progress,
				o.progress_ctx);
}

/* One chunk of an upload: the request that sends [DONE, DONE + N) of TOTAL from the arena at OFF. */
struct upload_chunk {
	Qgraph__Request req;
	Qgraph__UploadWeights up;
	Qgraph__Span span;
};

static void upload_chunk_init(struct upload_chunk *c, uint64_t upload, int wsrc, int wtarget, int64_t rows,
			      int64_t cols, int64_t off, size_t done, size_t n, size_t total)
{
	qgraph__request__init(&c->req);
	qgraph__upload_weights__init(&c->up);
	qgraph__span__init(&c->span);
	c->span.offset = (uint64_t)off;
	c->span.bytes = n;
	c->up.upload_id = upload;
	c->up.src_type = (Qgraph__Type)wsrc;
	c->up.target_type = (Qgraph__Type)wtarget;
	c->up.rows = rows;
	c->up.cols = cols;
	c->up.chunk_offset = done;
	c->up.data = &c->span;
	c->up.last = done + n == total;
	c->req.body_case = QGRAPH__REQUEST__BODY_UPLOAD;
	c->req.upload = &c->up;
}

/* Wait for the sent chunk ID, which ends at byte END of TOTAL: 0 with RES filled, or the error. */
static int upload_answered(struct qgraph_session *s, uint64_t id, size_t end, size_t total, struct qgraph_result *res,
			   qgraph_progress_fn progress, void *ctx)
{
	int r = qgraph_wait(s, id, -1, res);

	if (!r)
		r = res->status;
	if (!r && progress)	/* the chunk is in the daemon: the matrix counts as done with its last */
		progress(ctx, end == total, 1, end, total);
	return r;
}

/*
 * Chunks go through two staging buffers in the arena: chunk i is copied
 * into one while the daemon copies chunk i - 1 out of the other, and is
 * sent once chunk i - 1 is answered.  So the daemon takes the chunks in
 * order, a buffer is written again only after the daemon has read it, and
 * chunk i names the upload that chunk 0's answer opened.  Where the arena
 * has room for one buffer only, each chunk waits for the one before.
 */
int qg_client_upload(struct qgraph_session *s, const char *name, int model, enum qgraph_type src_type,
		     enum qgraph_type target, int64_t rows, int64_t cols, const void *data, uint64_t *handle,
		     enum qgraph_type *stored, qgraph_progress_fn progress, void *ctx)
{
	ssize_t total = src_type == QGRAPH_TYPE_F32 ? qgraph_matrix_size(QGRAPH_TYPE_F32, rows, cols)
						   : qgraph_matrix_size(src_type, rows, cols);
	if (!s)
		return -EINVAL;
	if (!data || !handle)
		return qg_client_fail(s, -EINVAL, "weights upload: %s is NULL", !data ? "the data" : "the handle's place");
	if (total < 0)
		return qg_client_fail(s, (int)total, "%lld x %lld does not suit %s", (long long)rows, (long long)cols,
			    qgraph_type_name(src_type) ?: "that type");
	int wsrc = qg_wire_type_of_public(src_type), wtarget = qg_wire_type_of_public(target);
	if (wsrc < 0 || wtarget < 0)
		return qg_client_fail(s, -EINVAL, "%s is not a type weights are uploaded as or stored in",
				      qgraph_type_name(wsrc < 0 ? src_type : target) ?: "that type");
	size_t chunk = (size_t)(s->rg.layout.arena_bytes / 4) & ~(size_t)63;
	if (chunk > (16u << 20))
		chunk = 16u << 20;
	int64_t off[2] = { qgraph_arena_alloc(s, chunk), -1 };
	if (off[0] < 0)
		return qg_client_fail(s, -ENOMEM, "no room in the arena to stage weights");
	if ((size_t)total > chunk)
		off[1] = qgraph_arena_alloc(s, chunk);	/* may fail: then one buffer */
	const unsigned char *src = data;
	struct upload_chunk c;	/* packed into the ring as it is sent */
	struct qgraph_result res = { .size = sizeof res };
	uint64_t upload = 0, id = 0;
	size_t copied = 0, pending_end = 0;
	bool pending = false;	/* a chunk is sent and not yet answered; it ends at byte PENDING_END */
	int r = 0;

	for (unsigned k = 0; copied < (size_t)total || k == 0; k++) {
		size_t n = (size_t)total - copied < chunk ? (size_t)total - copied : chunk;
		int b = off[1] >= 0 ? (int)(k & 1) : 0;
		if (pending && off[1] < 0) {	/* one buffer: the daemon must have read it */
			pending = false;
			if ((r = upload_answered(s, id, pending_end, (size_t)total, &res, progress, ctx)))
				break;
		}
		memcpy(s->rg.arena + off[b], src + copied, n);	/* while the daemon reads the other buffer */
		if (pending) {
			pending = false;
			if ((r = upload_answered(s, id, pending_end, (size_t)total, &res, progress, ctx)))
				break;
		}
		if (k == 1)
			upload = res.handle;	/* chunk 0 opened the upload */
		upload_chunk_init(&c, upload, wsrc, wtarget, rows, cols, off[b], copied, n, (size_t)total);
		if (k == 0 && name)
			c.up.name = (char *)name;	/* named when the upload opens */
		c.up.model = k == 0 && model;
		if ((r = qg_client_send_request(s, &c.req, 1, &id)))
			break;
		pending = true;
		copied += n;
		pending_end = copied;
	}
	if (pending)	/* the last chunk */
		r = upload_answered(s, id, pending_end, (size_t)total, &res, progress, ctx);
	if (!r) {
		*handle = res.handle;
		if (stored)
			*stored = (enum qgraph_type)res.stored_type;
	}
	qgraph_arena_free(s, off[0]);
	if (off[1] >= 0)
		qgraph_arena_free(s, off[1]);
	return r;
}

QGRAPH_API int qgraph_weights_open(struct qgraph_session *s, const char *name, uint64_t *handle,
				   enum qgraph_type *type, int64_t *rows, int64_t *cols)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__OpenWeights ow = QGRAPH__OPEN_WEIGHTS__INIT;
	struct qgraph_result res;

	if (!s)
		return -EINVAL;
	if (!name || !*name || !handle)
		return qg_client_fail(s, -EINVAL, "weights open: %s", !handle ? "the handle's place is NULL" : "no name");
	ow.name = (char *)name;
	req.body_case = QGRAPH__REQUEST__BODY_OPEN_WEIGHTS;
	req.open_weights = &ow;
	int r = qg_client_call(s, &req, &res);
	if (r)
		return r;
	*handle = res.handle;
	if (type)
		*type = (enum qgraph_type)res.stored_type;
	if (rows)
		*rows = res.rows;
	if (cols)
		*cols = res.cols;
	return 0;
}

QGRAPH_API int qgraph_weights_free(struct qgraph_session *s, uint64_t handle)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__FreeWeights fw = QGRAPH__FREE_WEIGHTS__INIT;

	if (!s)
		return -EINVAL;
	fw.handle = handle;
	req.body_case = QGRAPH__REQUEST__BODY_FREE_WEIGHTS;
	req.free_weights = &fw;
	int r = qg_client_call(s, &req, NULL);
	return r == -EINVAL ? -EBUSY : r;
}
