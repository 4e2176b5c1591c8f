/*
 * upload.c - weights arriving chunk by chunk (see upload.h): an upload
 * opened with its types and shape checked and its pinned memory taken,
 * each chunk copied out of the arena and converted as it comes, the
 * finished matrix stored (weights.c) or handed to the model being loaded
 * (models.c).  requests.c reads the wire's UploadWeights and answers.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <nettle/sha2.h>

#include "accounts.h"
#include "hugepool.h"
#include "kernels.h"
#include "log.h"
#include "models.h"
#include "server.h"
#include "session.h"
#include "upload.h"
#include "weights.h"

/* f32 values an upload copies out of the arena at a time: a bound on its bounce buffer, a multiple of a block. */
#define UPLOAD_BOUNCE_VALUES 16384u

void qgd_upload_reset(struct qgd_session *s)
{
	struct qgd_upload *up = &s->upload;

	if (up->dst)
		qgd_weights_discard(s->srv, up->dst, up->dst_bytes);
	free(up->stage);
	free(up->bounce);
	free(up->digest);
	memset(up, 0, sizeof *up);
}

/*
 * Set UP (its types and shape filled in) up for converting as chunks
 * arrive: a copy needs nothing; a repack stages one unit of rows that both
 * layouts group whole; f32 values are quantized from a bounce buffer, a
 * row group at a time into STAGE where the target interleaves rows.
 * STAGE is at most one row group of the stored matrix.  0 or -ENOMEM.
 */
static int upload_prepare(struct qgd_upload *up)
{
	size_t row = (size_t)qg_row_size(up->target_type, up->cols);	/* an interleaved row: its plain row's size */
	int gs = qg_type_row_group(up->src_type), gt = qg_type_row_group(up->target_type);

	if (up->src_type == up->target_type)
		return 0;
	if (up->src_type != QG_TYPE_F32) {
		up->stage_bytes = (size_t)(gs > gt ? gs : gt) * row;
	} else {
		up->bounce = malloc(UPLOAD_BOUNCE_VALUES * sizeof(float));
		if (!up->bounce)
			return -ENOMEM;
		up->stage_bytes = gt > 1 ? (size_t)gt * row : 0;
	}
	if (up->stage_bytes && !(up->stage = malloc(up->stage_bytes)))
		return -ENOMEM;
	return 0;
}

/*
 * Quantize N f32 values X of row ROW from column COL on (N and COL whole
 * blocks) to UP's target: in place in DST for a plain target, else into
 * the row group's stage, which is repacked into DST once its last row is
 * complete.  0 or the conversion's -errno (-EDOM, -ERANGE).
 */
static int upload_convert(struct qgd_upload *up, int64_t row, int64_t col, const float *x, int64_t n)
{
	enum qg_type plain = qg_type_plain(up->target_type);
	int64_t per_block = qg_type_block_values(plain);
	int64_t group = qg_type_row_group(up->target_type);
	size_t row_bytes = (size_t)qg_row_size(up->target_type, up->cols);
	size_t at = (size_t)(col / per_block) * (size_t)qg_row_size(plain, per_block);
	unsigned char *dst = up->dst;
	unsigned char *p = group == 1 ? dst + (size_t)row * row_bytes + at : up->stage + (size_t)(row % group) * row_bytes + at;
	ssize_t r = qg_quantize(plain, x, p, (size_t)qg_row_size(plain, n), 1, n, NULL);
	if (r > 0 && up->digest)	/* the values in row order, as the daemon quantized them */
		sha256_update(up->digest, (size_t)r, p);

	if (r >= 0 && group > 1 && col + n == up->cols && row % group == group - 1)
		r = qg_repack(up->target_type, dst + (size_t)(row - group + 1) * row_bytes, up->stage_bytes, plain,
			      up->stage, group, up->cols);
	return r < 0 ? (int)r : 0;
}

/*
 * Take LEN bytes of UP's source at byte AT of it (copied out of the arena
 * a piece at a time, never read there twice) and convert what they
 * complete into UP->DST.  0 or the conversion's -errno.
 */
static int upload_take(struct qgd_upload *up, size_t at, const unsigned char *p, size_t len)
{
	unsigned char *dst = up->dst;

	if (up->src_type == up->target_type) {
		memcpy(dst + at, p, len);
		if (up->digest)
			sha256_update(up->digest, len, dst + at);	/* the daemon's copy, not the arena */
		return 0;
	}
	if (up->src_type != QG_TYPE_F32) {
		/* a repack: whole units of rows, which sit at the same offset in both layouts */
		while (len) {
			size_t n = len < up->stage_bytes - up->staged ? len : up->stage_bytes - up->staged;
			memcpy(up->stage + up->staged, p, n);
			if (up->digest)	/* plain rows on their way into a layout */
				sha256_update(up->digest, n, up->stage + up->staged);
			up->staged += n;
			at += n;
			p += n;
			len -= n;
			if (up->staged < up->stage_bytes)
				break;
			int64_t rows = (int64_t)(up->stage_bytes / (size_t)qg_row_size(up->src_type, up->cols));
			ssize_t r = qg_repack(up->target_type, dst + at - up->stage_bytes, up->stage_bytes, up->src_type,
					      up->stage, rows, up->cols);
			if (r < 0)
				return (int)r;
			up->staged = 0;
		}
		return 0;
	}
	/* f32: whole blocks of values, a row's run at a time; a part of a block waits for the next chunk */
	const int64_t per_block = qg_type_block_values(qg_type_plain(up->target_type));
	const size_t cap = UPLOAD_BOUNCE_VALUES * sizeof(float);
	while (len) {
		size_t n = len < cap - up->bounced ? len : cap - up->bounced;
		memcpy(up->bounce + up->bounced, p, n);
		up->bounced += n;
		p += n;
		len -= n;
		const float *x = (const float *)(void *)up->bounce;
		int64_t avail = (int64_t)(up->bounced / sizeof(float)) / per_block * per_block;
		size_t used = (size_t)avail * sizeof(float);
		while (avail) {
			int64_t row = (int64_t)(up->values_done / (uint64_t)up->cols);
			int64_t col = (int64_t)(up->values_done % (uint64_t)up->cols);
			int64_t run = avail < up->cols - col ? avail : up->cols - col;
			int r = upload_convert(up, row, col, x, run);
			if (r)
				return r;
			x += run;
			avail -= run;
			up->values_done += (uint64_t)run;
		}
		memmove(up->bounce, up->bounce + used, up->bounced - used);
		up->bounced -= used;
	}
	return 0;
}

int qgd_upload_begin(struct qgd_session *s, enum qg_type src, enum qg_type dst, int64_t rows, int64_t cols,
		     const char *name, bool model, char *msg, size_t len)
{
	struct qgd_upload *up = &s->upload;
	const struct qgd_config *cfg = &s->srv->cfg;

	/* in their own type, or (Q8_0) a layout of it: the same blocks */
	if ((src == QG_TYPE_F16 || src == QG_TYPE_Q8_0 || src == QG_TYPE_Q4_K || src == QG_TYPE_Q6_K) &&
	    qg_type_plain(dst) != src) {
		snprintf(msg, len, "%s weights are stored as they are: the target must be %s%s", qg_type_name(src),
			 qg_type_name(src), src == QG_TYPE_Q8_0 ? " (or q8_0_4x4)" : "");
		return -EINVAL;
	}
	if (model) {
		const char *why;
		if (qgd_model_may_upload(s, name, &why)) {
			snprintf(msg, len, "model weights \"%.64s\": %s", name ? name : "", why);
			return -EINVAL;
		}
	}
	if (src != QG_TYPE_F32 && src != QG_TYPE_F16 && src != QG_TYPE_Q8_0 &&
	    (dst == QG_TYPE_F32 || dst == QG_TYPE_F16 || qg_type_plain(dst) == QG_TYPE_Q8_0)) {
		snprintf(msg, len, "q4_0 weights can only be stored as q4_0 layouts");
		return -EINVAL;
	}
	if ((dst == QG_TYPE_Q4_K || dst == QG_TYPE_Q6_K) && src != dst && src != QG_TYPE_F32) {
		snprintf(msg, len, "%s weights are quantized from f32 or sent as they are", qg_type_name(dst));
		return -EINVAL;
	}
	if (dst == QG_TYPE_Q4_0 || dst == QG_TYPE_Q8_0)	/* the best layout this CPU and shape allow */
		dst = qgd_weights_best_layout(dst, rows);
	ssize_t in = qg_matrix_size(src, rows, cols);
	ssize_t out = qg_matrix_size(dst, rows, cols);
	if (in < 0 || out < 0) {
		snprintf(msg, len,
			 "%lld x %lld does not fit %s -> %s (columns a multiple of 32, of 256 for "
			 "q4_K and q6_K; rows a multiple of the layout's 4 or 8)",
			 (long long)rows, (long long)cols, qg_type_name(src), qg_type_name(dst));
		return -EINVAL;
	}
	if (name && strlen(name) >= sizeof up->name) {
		snprintf(msg, len, "a weights name is at most %zu bytes", sizeof up->name - 1);
		return -EINVAL;
	}
	/* quotas count what the pool hands out: whole pieces */
	uint64_t limit = cfg->client_weights ? cfg->client_weights : cfg->pool_bytes;
	uint64_t pieces = qgd_account_pieces(s->srv, (uint64_t)out);
	if (s->weight_bytes > limit || pieces > limit - s->weight_bytes) {
		snprintf(msg, len,
			 "quota client-weights: this session holds %llu bytes of weights (in pool pieces), %llu more "
			 "would pass %llu", (unsigned long long)s->weight_bytes, (unsigned long long)pieces,
			 (unsigned long long)limit);
		return -EDQUOT;
	}
	int q = qgd_account_check_weights(s->srv, s->acct, pieces, msg, len);
	if (!q && model)
		q = qgd_account_check_models(s->srv, s->acct, pieces, msg, len);
	if (q)
		return q;
	/* the stored matrix's pinned memory now: the pool counts it while the chunks arrive */
	up->dst = qgd_weights_alloc(s->srv, (size_t)out);
	if (!up->dst) {
		snprintf(msg, len, "quota pool-size: the pool has no room for %zd more bytes (%llu of %llu in use)", out,
			 (unsigned long long)qg_hugepool_in_use_total(s->srv->pool),
			 (unsigned long long)qg_hugepool_info(s->srv->pool)->bytes);
		return -EDQUOT;
	}
	up->dst_bytes = (size_t)out;
	up->src_type = src;
	up->target_type = dst;
	up->rows = rows;
	up->cols = cols;
	up->bytes = (size_t)in;
	up->received = 0;
	/* the digest as the values are converted, where they pass through ggml's layout (see upload.h) */
	if (src == dst ? !qg_type_is_interleaved(dst)
		       : src == QG_TYPE_F32 || src == QG_TYPE_Q4_0 || src == QG_TYPE_Q8_0) {
		up->digest = malloc(sizeof *up->digest);	/* without it: computed once stored */
		if (up->digest)
			sha256_init(up->digest);
	}
	if (upload_prepare(up)) {
		qgd_upload_reset(s);
		snprintf(msg, len, "no memory to convert weights");
		return -ENOMEM;
	}
	up->id = s->next_handle++;
	snprintf(up->name, sizeof up->name, "%s", name ? name : "");
	up->model = model;
	return 0;
}

int qgd_upload_chunk(struct qgd_session *s, uint64_t chunk_offset, uint64_t off, uint64_t len, bool last,
		     struct qgd_upload_done *done, char *msg, size_t mlen)
{
	struct qgd_upload *up = &s->upload;

	/* the chunk, at its first slice: in order, inside the arena and inside the matrix */
	if (up->chunk_taken == 0 && chunk_offset != up->received) {
		size_t want = up->received;
		qgd_upload_reset(s);
		snprintf(msg, mlen, "chunk at byte %llu where %zu was expected: upload abandoned",
			 (unsigned long long)chunk_offset, want);
		return -EINVAL;
	}
	if (up->chunk_taken == 0 &&
	    (off > s->rg.layout.arena_bytes || len > s->rg.layout.arena_bytes - off || len > up->bytes - up->received)) {
		qgd_upload_reset(s);
		snprintf(msg, mlen, "chunk [%llu, +%llu) is outside the arena or past the matrix: upload abandoned",
			 (unsigned long long)off, (unsigned long long)len);
		return -EINVAL;
	}
	size_t n = (size_t)len - up->chunk_taken < QGD_UPLOAD_SLICE ? (size_t)len - up->chunk_taken : QGD_UPLOAD_SLICE;
	int e = upload_take(up, up->received, s->rg.arena + off + up->chunk_taken, n);
	if (e) {
		qgd_upload_reset(s);
		snprintf(msg, mlen, "conversion failed: %s: upload abandoned",
			 e == -EDOM ? "the matrix holds NaN or infinity"
			 : e == -ERANGE ? "a block's scale does not fit in fp16"
					: strerror(-e));
		return -EINVAL;
	}
	up->received += n;
	up->chunk_taken += n;
	if (up->chunk_taken < len)
		return 2;	/* the rest of the chunk at the session's next turn */
	up->chunk_taken = 0;
	if (!last)
		return 0;
	if (up->received != up->bytes) {
		size_t got = up->received, bytes = up->bytes;	/* the reset clears both */
		qgd_upload_reset(s);
		snprintf(msg, mlen, "last chunk after %zu of %zu bytes: upload abandoned", got, bytes);
		return -EINVAL;
	}

	/* every byte has arrived, so every row group is converted: store it */
	struct qgd_weights *w;
	const char *why;
	size_t out = up->dst_bytes;
	void *mem = up->dst;
	unsigned char digest[SHA256_DIGEST_SIZE];
	if (up->digest)
		sha256_digest(up->digest, sizeof digest, digest);
	up->dst = NULL;	/* qgd_weights_add consumes it */
	/* a model's tensor: stored unnamed (its name is the model's label for it) and handed to the model */
	e = qgd_weights_add(s, up->target_type, up->rows, up->cols, mem, out, up->digest ? digest : NULL,
			    up->model ? NULL : up->name, &w, &why);
	if (e) {
		char name[QGD_WEIGHTS_NAME_MAX];
		snprintf(name, sizeof name, "%s", up->name);
		qgd_upload_reset(s);
		if (e == -EEXIST) {
			snprintf(msg, mlen, "weights name \"%s\": %s", name, why);
			return -EINVAL;
		}
		snprintf(msg, mlen, "no memory");
		return -ENOMEM;
	}
	s->srv->stats.weights_uploaded++;
	qgd_debug("session %llu: weights %llu: %s %lld x %lld (%zu bytes, %u users)", (unsigned long long)s->id,
		  (unsigned long long)w->handle, qg_type_name(w->type), (long long)w->rows, (long long)w->cols, out,
		  w->stored->refs);
	*done = (struct qgd_upload_done){ .handle = w->handle, .type = w->type, .rows = w->rows, .cols = w->cols };
	if (up->model) {
		done->handle = 0;	/* the model holds them, not the session */
		/* again: the user's other sessions may have loaded meanwhile */
		if ((e = qgd_account_check_models(s->srv, s->acct, qgd_account_pieces(s->srv, out), msg, mlen))) {
			qgd_weights_release(s, w);
			qgd_upload_reset(s);
			return e;
		}
		e = qgd_model_adopt(s, up->name, w);
		if (e) {
			qgd_upload_reset(s);
			if (e == -ENOENT) {
				snprintf(msg, mlen, "its model is no longer being loaded: upload dropped");
				return -ENOENT;
			}
			snprintf(msg, mlen, "no memory");
			return -ENOMEM;
		}
	}
	qgd_upload_reset(s);
	return 1;
}
