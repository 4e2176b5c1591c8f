/*
 * weights.c - weights in pinned memory, stored once however many sessions
 * use them.
 *
 * When an upload is complete and converted, the daemon looks for a stored
 * matrix with the same type, shape and bytes that this session may share:
 * one its own user uploaded, or one whose owner and this client are both
 * in a group the configuration shares weights within.  The hash only finds
 * candidates; the bytes are compared in full before a copy is shared, so no
 * client can pass its bytes off as another's (a hash collision, even a
 * forced one, gives two copies).  A stored matrix counts its users and is
 * freed when the last one lets go (a freed handle, a closed or killed
 * session).
 *
 * Digests: each stored matrix gets the SHA-256 of its values in ggml's
 * layout (an interleaved Q4_0 matrix unpacked to plain Q4_0 for it), from
 * the daemon's own bytes, never from what the client says or from the
 * arena it may still write: hashed by the upload as it converts (upload.c),
 * or from the bytes stored.  A client that has the same values (a ggml
 * tensor, say) hashes them and opens the matrix by digest without sending
 * it (qgd_weights_open_digest).
 *
 * Names: an upload may name its weights; another session that may share
 * them opens them by that name without sending the bytes.  Names are
 * scoped like sharing: a client sees only the names its sharing rule lets
 * it see, and two owners may use the same name for different weights.
 *
 * Models (models.c) hold their matrices with a pin: a pinned matrix is
 * the daemon's, seen and shared by every client it serves, and stays until
 * the last model and the last session let go of it.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "accounts.h"
#include "grow.h"
#include "hugepool.h"
#include "kernels.h"
#include "server.h"
#include "session.h"
#include "weights.h"

/*
 * Weights live in the pool as pieces of one owner: they are shared between
 * sessions, and the pool's zeroing between owners is not needed for bytes
 * that the conversion overwrites before anyone reads them.
 */
#define WEIGHTS_OWNER (QG_HUGEPOOL_NO_OWNER - 1)

static void *pinned_alloc(struct qgd_server *srv, size_t bytes)
{
	size_t off;

	if (qg_hugepool_alloc(srv->pool, WEIGHTS_OWNER, bytes ? bytes : 1, &off))
		return NULL;
	srv->pinned_bytes = qg_hugepool_in_use(srv->pool, WEIGHTS_OWNER);
	return (unsigned char *)qg_hugepool_base(srv->pool) + off;
}

static void pinned_free(struct qgd_server *srv, void *p, size_t bytes)
{
	(void)bytes;
	if (!p)
		return;
	qg_hugepool_release(srv->pool, (size_t)((unsigned char *)p - (unsigned char *)qg_hugepool_base(srv->pool)));
	srv->pinned_bytes = qg_hugepool_in_use(srv->pool, WEIGHTS_OWNER);
}

void *qgd_weights_alloc(struct qgd_server *srv, size_t bytes)
{
	return pinned_alloc(srv, bytes);
}

void qgd_weights_discard(struct qgd_server *srv, void *data, size_t bytes)
{
	pinned_free(srv, data, bytes);
}

bool qgd_weights_in_group(const struct qgd_session *s, gid_t g)
{
	if (s->gid == g)
		return true;
	for (size_t i = 0; i < s->n_groups; i++)
		if (s->groups[i] == g)
			return true;
	return false;
}

/* True if session S may use stored matrix E: same user, or a shared group both are in. */
static bool may_share(const struct qgd_session *s, const struct qgd_stored *e)
{
	const struct qgd_config *cfg = &s->srv->cfg;

	if (e->owner == s->uid || e->model_refs)
		return true;
	for (size_t i = 0; i < cfg->n_share_gids; i++) {
		gid_t g = cfg->share_gids[i];
		if (i < 64 && qgd_weights_in_group(s, g) && (e->owner_in_share_group >> i & 1))
			return true;
	}
	return false;
}

/* The stored matrix named NAME that S may use, or NULL. */
static struct qgd_stored *find_named(const struct qgd_session *s, const char *name)
{
	for (struct qgd_stored *e = s->srv->stored; e; e = e->next)
		if (e->name[0] && strcmp(e->name, name) == 0 && may_share(s, e))
			return e;
	return NULL;
}

/*
 * The SHA-256 of the values of the ROWS x COLS matrix DATA (BYTES) of
 * TYPE in ggml's layout into D (see the top of this file).  False without
 * the memory to unpack a row group.
 */
static bool values_digest(enum qg_type type, int64_t rows, int64_t cols, const void *data, size_t bytes,
			  unsigned char d[SHA256_DIGEST_SIZE])
{
	struct sha256_ctx c;

	sha256_init(&c);
	if (qg_layout_of(type) >= 0) {
		/* unpacked a row group at a time: the values as ggml lays them out */
		int64_t g = qg_type_row_group(type);
		size_t gbytes = (size_t)g * (size_t)qg_row_size(type, cols);
		unsigned char *tmp = malloc(gbytes);
		if (!tmp)
			return false;
		for (int64_t r = 0; r < rows; r += g) {
			qg_repack(QG_TYPE_Q4_0, tmp, gbytes, type, (const unsigned char *)data + (size_t)(r / g) * gbytes, g,
				  cols);
			sha256_update(&c, gbytes, tmp);
		}
		free(tmp);
	} else {
		sha256_update(&c, bytes, data);
	}
	sha256_digest(&c, SHA256_DIGEST_SIZE, d);
	return true;
}

/*
 * A 64-bit hash of BYTES at P, eight bytes at a time (a multiply and a
 * shift per word), for a matrix whose digest could not be computed.
 */
static uint64_t hash_bytes(const void *p, size_t bytes)
{
	const unsigned char *b = p;
	uint64_t h = 0x51ed2701f3a5c9b1ull ^ bytes;
	size_t i = 0;

	for (; i + 8 <= bytes; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	for (; i < bytes; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h ^ (h >> 32);
}

/*
 * The hash that picks the stored matrices DATA (BYTES) may be a copy of:
 * the first eight bytes of its DIGEST, or where there is none a hash of
 * its bytes (no digest then matches it: a second copy, never a wrong
 * share).  It only picks candidates: equality is decided by comparing the
 * bytes.
 */
static uint64_t candidate_hash(const struct qgd_server *srv, const unsigned char *digest, const void *data,
			       size_t bytes)
{
	uint64_t h;

	if (srv->cfg.test_hash_collide)
		return 42;	/* a test's forced collision: every matrix is a candidate */
	if (!digest)
		return hash_bytes(data, bytes);
	memcpy(&h, digest, sizeof h);
	return h;
}

/* A new stored matrix, with DIGEST (may be NULL) and candidate hash H; NULL without memory. */
static struct qgd_stored *stored_new(enum qg_type type, int64_t rows, int64_t cols, void *data, size_t bytes,
				     const unsigned char *digest, uint64_t h, uid_t owner)
{
	struct qgd_stored *e = calloc(1, sizeof *e);

	if (!e)
		return NULL;
	*e = (struct qgd_stored){ .hash = h, .type = type, .rows = rows, .cols = cols, .data = data, .bytes = bytes,
				  .owner = owner };
	if (digest) {
		memcpy(e->digest, digest, sizeof e->digest);
		e->digest_type = qg_layout_of(type) >= 0 ? QG_TYPE_Q4_0 : type;
		e->has_digest = true;
	}
	return e;
}

static void unref(struct qgd_server *srv, struct qgd_stored *e)
{
	if (--e->refs)
		return;
	for (struct qgd_stored **p = &srv->stored; *p; p = &(*p)->next) {
		if (*p == e) {
			*p = e->next;
			break;
		}
	}
	srv->n_stored--;
	pinned_free(srv, e->data, e->bytes);
	free(e);
}

/* A new handle in S's table for E (whose reference the caller passes on).  0 or -ENOMEM. */
static int add_handle(struct qgd_session *s, struct qgd_stored *e, struct qgd_weights **out)
{
	void *p = qg_grow(s->weights, &s->cap_weights, s->n_weights, sizeof *s->weights, 8);
	if (!p)
		return -ENOMEM;
	s->weights = p;
	struct qgd_weights *w = &s->weights[s->n_weights++];
	*w = (struct qgd_weights){ .handle = s->next_handle++, .stored = e, .type = e->type, .rows = e->rows,
				   .cols = e->cols, .data = e->data, .bytes = e->bytes };
	s->weight_bytes += qgd_account_pieces(s->srv, e->bytes);	/* what it takes of the pool */
	s->acct->weight_bytes += qgd_account_pieces(s->srv, e->bytes);
	s->srv->weights_referenced += e->bytes;
	*out = w;
	return 0;
}

int qgd_weights_add(struct qgd_session *s, enum qg_type type, int64_t rows, int64_t cols, void *data,
		    size_t bytes, const unsigned char *digest, const char *name, struct qgd_weights **out,
		    const char **why)
{
	struct qgd_server *srv = s->srv;
	unsigned char own[SHA256_DIGEST_SIZE];
	if (!digest && values_digest(type, rows, cols, data, bytes, own))
		digest = own;
	uint64_t h = candidate_hash(srv, digest, data, bytes);
	struct qgd_stored *e;

	*why = NULL;
	for (e = srv->stored; e; e = e->next)
		if (e->hash == h && e->type == type && e->rows == rows && e->cols == cols && e->bytes == bytes &&
		    may_share(s, e) && memcmp(e->data, data, bytes) == 0)
			break;
	if (name && *name) {
		struct qgd_stored *n = find_named(s, name);
		if (n && n != e) {
			*why = "that name already names other weights";
			pinned_free(srv, data, bytes);
			return -EEXIST;
		}
		if (e && e->name[0] && strcmp(e->name, name) != 0) {
			*why = "the same weights are stored under another name";
			pinned_free(srv, data, bytes);
			return -EEXIST;
		}
	}
	if (e) {
		pinned_free(srv, data, bytes);	/* the same bytes are stored already */
		e->refs++;
	} else {
		e = stored_new(type, rows, cols, data, bytes, digest, h, s->uid);
		if (!e) {
			pinned_free(srv, data, bytes);
			return -ENOMEM;
		}
		e->refs = 1;
		for (size_t i = 0; i < srv->cfg.n_share_gids && i < 64; i++)
			if (qgd_weights_in_group(s, srv->cfg.share_gids[i]))
				e->owner_in_share_group |= 1ull << i;
		e->next = srv->stored;
		srv->stored = e;
		srv->n_stored++;
	}
	if (name && *name && !e->name[0])
		snprintf(e->name, sizeof e->name, "%s", name);
	int r = add_handle(s, e, out);
	if (r)
		unref(srv, e);
	return r;
}

enum qg_type qgd_weights_best_layout(int64_t rows)
{
	enum qg_type best = qg_best_weight_type();

	if (rows % qg_type_row_group(best) == 0)
		return best;
	if (rows % 4 == 0)
		return QG_TYPE_Q4_0_4X8;	/* best was 8x8 */
	return QG_TYPE_Q4_0;
}

void qgd_weights_pin(struct qgd_stored *e)
{
	e->refs++;
	e->model_refs++;
}

void qgd_weights_unpin(struct qgd_server *srv, struct qgd_stored *e)
{
	e->model_refs--;
	unref(srv, e);
}

int qgd_weights_store_pinned(struct qgd_server *srv, enum qg_type type, int64_t rows, int64_t cols, void *data,
			     size_t bytes, struct qgd_stored **out)
{
	unsigned char own[SHA256_DIGEST_SIZE];
	const unsigned char *digest = values_digest(type, rows, cols, data, bytes, own) ? own : NULL;
	uint64_t h = candidate_hash(srv, digest, data, bytes);
	struct qgd_stored *e;

	for (e = srv->stored; e; e = e->next)
		if (e->model_refs && e->hash == h && e->type == type && e->rows == rows && e->cols == cols &&
		    e->bytes == bytes && memcmp(e->data, data, bytes) == 0)
			break;	/* only what models hold is everyone's to share */
	if (e) {
		pinned_free(srv, data, bytes);
	} else {
		e = stored_new(type, rows, cols, data, bytes, digest, h, getuid());
		if (!e) {
			pinned_free(srv, data, bytes);
			return -ENOMEM;
		}
		e->next = srv->stored;
		srv->stored = e;
		srv->n_stored++;
	}
	qgd_weights_pin(e);
	*out = e;
	return 0;
}

int qgd_weights_open_stored(struct qgd_session *s, struct qgd_stored *e, struct qgd_weights **out)
{
	e->refs++;
	int r = add_handle(s, e, out);
	if (r)
		unref(s->srv, e);
	return r;
}

int qgd_weights_open(struct qgd_session *s, const char *name, struct qgd_weights **out)
{
	struct qgd_stored *e = find_named(s, name);

	if (!e)
		return -ENOENT;
	e->refs++;
	int r = add_handle(s, e, out);
	if (r)
		unref(s->srv, e);
	return r;
}

int qgd_weights_open_digest(struct qgd_session *s, enum qg_type type, int64_t rows, int64_t cols,
			    const unsigned char digest[32], struct qgd_weights **out)
{
	struct qgd_stored *e;

	for (e = s->srv->stored; e; e = e->next)
		if (e->has_digest && e->digest_type == type && e->rows == rows && e->cols == cols &&
		    memcmp(e->digest, digest, sizeof e->digest) == 0 && may_share(s, e))
			break;
	return e ? qgd_weights_open_stored(s, e, out) : -ENOENT;
}

struct qgd_weights *qgd_weights_find(struct qgd_session *s, uint64_t handle)
{
	for (size_t i = 0; i < s->n_weights; i++)
		if (s->weights[i].handle == handle)
			return &s->weights[i];
	return NULL;
}

void qgd_weights_release(struct qgd_session *s, struct qgd_weights *w)
{
	s->weight_bytes -= qgd_account_pieces(s->srv, w->bytes);
	s->acct->weight_bytes -= qgd_account_pieces(s->srv, w->bytes);
	s->srv->weights_referenced -= w->bytes;
	unref(s->srv, w->stored);
	*w = s->weights[--s->n_weights];
}

void qgd_weights_release_all(struct qgd_session *s)
{
	while (s->n_weights)
		qgd_weights_release(s, &s->weights[s->n_weights - 1]);
	free(s->weights);
	s->weights = NULL;
	s->cap_weights = 0;
}
