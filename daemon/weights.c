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
 * Names: an upload may name its weights; another session of the same
 * user (or of a user in a share group the namer was in) opens them by
 * that name without sending the bytes.  A name belongs to the user who
 * gave it, never to the shared bytes: each matrix keeps one name record a
 * user, so a dedup shares bytes and never names, and two users may give
 * the same name to different weights.  A user's names on a matrix go when
 * that user lets go of it.
 *
 * Holders: a matrix counts, per user, the handles of its sessions and the
 * pins of its models.  Who may share a matrix follows its holders (a user
 * holding it, or one in a share group with a holder), never whoever
 * uploaded it first: when a user lets go, the matrix is no longer theirs.
 *
 * Models (models.c) hold their matrices with a pin: a public model's pin
 * (root's, or a preloaded one) makes the matrix every client's to share;
 * another user's model pins it for that user (and its share groups).  A
 * matrix stays until the last model and the last session let go of it.
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
	return (unsigned char *)qg_hugepool_base(srv->pool) + off;
}

static void pinned_free(struct qgd_server *srv, void *p, size_t bytes)
{
	(void)bytes;
	if (!p)
		return;
	qg_hugepool_release(srv->pool, (size_t)((unsigned char *)p - (unsigned char *)qg_hugepool_base(srv->pool)));
}

uint64_t qgd_weights_pinned_bytes(const struct qgd_server *srv)
{
	return srv->pool ? qg_hugepool_in_use(srv->pool, WEIGHTS_OWNER) : 0;
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

uint64_t qgd_weights_share_bits(const struct qgd_session *s)
{
	const struct qgd_config *cfg = &s->srv->cfg;
	uint64_t bits = 0;

	for (size_t i = 0; i < cfg->n_share_gids && i < 64; i++)
		if (qgd_weights_in_group(s, cfg->share_gids[i]))
			bits |= 1ull << i;
	return bits;
}

static struct qgd_holder *holder_of(const struct qgd_stored *e, uid_t uid)
{
	for (size_t i = 0; i < e->n_holders; i++)
		if (e->holders[i].uid == uid)
			return &e->holders[i];
	return NULL;
}

/* UID's name record on E, or NULL. */
static struct qgd_name *name_of(const struct qgd_stored *e, uid_t uid)
{
	for (struct qgd_name *n = e->names; n; n = n->next)
		if (n->uid == uid)
			return n;
	return NULL;
}

/*
 * The store, this file's alone (others read it through the calls of
 * weights.h): the list of stored matrices, their count and the bytes the
 * sessions' handles reference, and the index: stored matrices chained by
 * candidate hash, names by the hash of the name, in power-of-two bucket
 * arrays that double as they fill, so that neither a dedup nor an open by
 * name walks every matrix.  It exists while a matrix does (a daemon
 * without weights holds none).
 */
struct qgd_weights_store {
	struct qgd_stored *stored;	/* every matrix in pinned memory */
	uint32_t n_stored;
	uint64_t referenced;	/* bytes of every handle of every session */
	struct qgd_stored **by_hash;
	struct qgd_name **by_name;
	size_t hash_buckets, name_buckets;	/* powers of two */
	size_t n_names;
};

uint32_t qgd_weights_stored_count(const struct qgd_server *srv)
{
	return srv->weights_store ? srv->weights_store->n_stored : 0;
}

uint64_t qgd_weights_referenced_bytes(const struct qgd_server *srv)
{
	return srv->weights_store ? srv->weights_store->referenced : 0;
}

enum { INDEX_FIRST_BUCKETS = 256 };

/* The server's store, made if there is none; NULL without memory. */
static struct qgd_weights_store *store_of(struct qgd_server *srv)
{
	struct qgd_weights_store *ix = srv->weights_store;

	if (ix)
		return ix;
	ix = calloc(1, sizeof *ix);
	if (!ix)
		return NULL;
	ix->by_hash = calloc(INDEX_FIRST_BUCKETS, sizeof *ix->by_hash);
	ix->by_name = calloc(INDEX_FIRST_BUCKETS, sizeof *ix->by_name);
	if (!ix->by_hash || !ix->by_name) {
		free(ix->by_hash);
		free(ix->by_name);
		free(ix);
		return NULL;
	}
	ix->hash_buckets = ix->name_buckets = INDEX_FIRST_BUCKETS;
	srv->weights_store = ix;
	return ix;
}

/* The index's bucket for 64-bit hash H among N (a power of two): the high bits, which a multiply mixes best. */
static size_t bucket(uint64_t h, size_t n)
{
	return (size_t)((h * 0x9e3779b97f4a7c15ull) >> 32) & (n - 1);
}

/* A 64-bit FNV-1a hash of the string NAME. */
static uint64_t name_hash(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

/* Twice the buckets for the matrices, when there is memory for them (else the chains grow longer). */
static void grow_hash(struct qgd_weights_store *ix)
{
	size_t n = ix->hash_buckets * 2;
	struct qgd_stored **b = calloc(n, sizeof *b);

	if (!b)
		return;
	for (size_t i = 0; i < ix->hash_buckets; i++)
		for (struct qgd_stored *e = ix->by_hash[i], *next; e; e = next) {
			next = e->chain;
			size_t k = bucket(e->hash, n);
			e->chain = b[k];
			b[k] = e;
		}
	free(ix->by_hash);
	ix->by_hash = b;
	ix->hash_buckets = n;
}

static void grow_names(struct qgd_weights_store *ix)
{
	size_t n = ix->name_buckets * 2;
	struct qgd_name **b = calloc(n, sizeof *b);

	if (!b)
		return;
	for (size_t i = 0; i < ix->name_buckets; i++)
		for (struct qgd_name *m = ix->by_name[i], *next; m; m = next) {
			next = m->chain;
			size_t k = bucket(m->key, n);
			m->chain = b[k];
			b[k] = m;
		}
	free(ix->by_name);
	ix->by_name = b;
	ix->name_buckets = n;
}

/* List E (new) among the store's matrices and in the index.  0 or -ENOMEM (E is then not listed). */
static int link_stored(struct qgd_server *srv, struct qgd_stored *e)
{
	struct qgd_weights_store *ix = store_of(srv);

	if (!ix)
		return -ENOMEM;
	e->prev = NULL;
	e->next = ix->stored;
	if (e->next)
		e->next->prev = e;
	ix->stored = e;
	ix->n_stored++;
	if (ix->n_stored > 2 * ix->hash_buckets)
		grow_hash(ix);
	size_t k = bucket(e->hash, ix->hash_buckets);
	e->chain = ix->by_hash[k];
	ix->by_hash[k] = e;
	return 0;
}

/* Take E off the store's list and out of the index; the store goes with the last matrix. */
static void unlink_stored(struct qgd_server *srv, struct qgd_stored *e)
{
	struct qgd_weights_store *ix = srv->weights_store;

	if (e->prev)
		e->prev->next = e->next;
	else
		ix->stored = e->next;
	if (e->next)
		e->next->prev = e->prev;
	ix->n_stored--;
	for (struct qgd_stored **p = &ix->by_hash[bucket(e->hash, ix->hash_buckets)]; *p; p = &(*p)->chain)
		if (*p == e) {
			*p = e->chain;
			break;
		}
	if (!ix->stored) {
		free(ix->by_hash);
		free(ix->by_name);
		free(ix);
		srv->weights_store = NULL;
	}
}

/* The first of the matrices whose candidate hash is H (the rest follow through chain), or NULL. */
static struct qgd_stored *first_with_hash(const struct qgd_server *srv, uint64_t h)
{
	const struct qgd_weights_store *ix = srv->weights_store;

	return ix ? ix->by_hash[bucket(h, ix->hash_buckets)] : NULL;
}

/* Name E as NAME for UID (in share GROUPS).  0 or -ENOMEM. */
static int add_name(struct qgd_server *srv, struct qgd_stored *e, uid_t uid, uint64_t groups, const char *name)
{
	struct qgd_weights_store *ix = srv->weights_store;	/* E is listed: the index exists */
	struct qgd_name *n = calloc(1, sizeof *n);

	if (!n)
		return -ENOMEM;
	*n = (struct qgd_name){ .uid = uid, .groups = groups, .key = name_hash(name), .stored = e, .next = e->names };
	snprintf(n->name, sizeof n->name, "%s", name);
	e->names = n;
	if (++ix->n_names > 2 * ix->name_buckets)
		grow_names(ix);
	size_t k = bucket(n->key, ix->name_buckets);
	n->chain = ix->by_name[k];
	ix->by_name[k] = n;
	return 0;
}

/* Take name N off its matrix and out of the index, and free it. */
static void drop_name(struct qgd_server *srv, struct qgd_name *n)
{
	struct qgd_weights_store *ix = srv->weights_store;
	struct qgd_stored *e = n->stored;

	for (struct qgd_name **p = &e->names; *p; p = &(*p)->next)
		if (*p == n) {
			*p = n->next;
			break;
		}
	for (struct qgd_name **p = &ix->by_name[bucket(n->key, ix->name_buckets)]; *p; p = &(*p)->chain)
		if (*p == n) {
			*p = n->chain;
			break;
		}
	ix->n_names--;
	free(n);
}

/* True if session S may use stored matrix E: a public model's, held by its user, or by a share group's. */
static bool may_share(const struct qgd_session *s, const struct qgd_stored *e)
{
	if (e->public_refs || holder_of(e, s->uid))
		return true;
	uint64_t bits = qgd_weights_share_bits(s);
	for (size_t i = 0; bits && i < e->n_holders; i++)
		if (e->holders[i].groups & bits)
			return true;
	return false;
}

/* One more hold of UID (in share groups GROUPS) on E.  0 or -ENOMEM. */
static int hold(struct qgd_stored *e, uid_t uid, uint64_t groups)
{
	struct qgd_holder *h = holder_of(e, uid);

	if (!h) {
		void *p = qg_grow(e->holders, &e->cap_holders, e->n_holders, sizeof *e->holders, 2);
		if (!p)
			return -ENOMEM;
		e->holders = p;
		h = &e->holders[e->n_holders++];
		*h = (struct qgd_holder){ .uid = uid };
		if (e->n_holders == 1)
			e->owner = uid;
	}
	h->refs++;
	h->groups |= groups;
	return 0;
}

/* One hold of UID on E less: with its last, UID's name on E goes and E is no longer UID's. */
static void let_go(struct qgd_server *srv, struct qgd_stored *e, uid_t uid)
{
	struct qgd_holder *h = holder_of(e, uid);
	struct qgd_name *n;

	if (!h || --h->refs)
		return;
	*h = e->holders[--e->n_holders];
	if ((n = name_of(e, uid)))
		drop_name(srv, n);
	e->owner = e->n_holders ? e->holders[0].uid : getuid();
}

/* The stored matrix S's own user named NAME (or with GROUP, a share group's user), or NULL. */
static struct qgd_stored *find_named(const struct qgd_session *s, const char *name, bool group)
{
	const struct qgd_weights_store *ix = s->srv->weights_store;
	uint64_t bits = group ? qgd_weights_share_bits(s) : 0, key = name_hash(name);

	if (!ix || (group && !bits))
		return NULL;
	for (const struct qgd_name *n = ix->by_name[bucket(key, ix->name_buckets)]; n; n = n->chain) {
		if (n->key != key || strcmp(n->name, name) != 0)
			continue;
		if (group ? n->uid != s->uid && (n->groups & bits) : n->uid == s->uid)
			return n->stored;
	}
	return NULL;
}

uint32_t qgd_weights_held_by(const struct qgd_server *srv, uid_t uid)
{
	uint32_t n = 0;

	for (const struct qgd_stored *e = srv->weights_store ? srv->weights_store->stored : NULL; e; e = e->next)
		n += holder_of(e, uid) != NULL;
	return n;
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
	if (qg_type_is_interleaved(type)) {
		/* unpacked a row group at a time: the values as ggml lays them out */
		int64_t g = qg_type_row_group(type);
		size_t gbytes = (size_t)g * (size_t)qg_row_size(type, cols);
		unsigned char *tmp = malloc(gbytes);
		if (!tmp)
			return false;
		for (int64_t r = 0; r < rows; r += g) {
			qg_repack(qg_type_plain(type), tmp, gbytes, type,
				  (const unsigned char *)data + (size_t)(r / g) * gbytes, g, cols);
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
				     const unsigned char *digest, uint64_t h)
{
	struct qgd_stored *e = calloc(1, sizeof *e);

	if (!e)
		return NULL;
	*e = (struct qgd_stored){ .hash = h, .type = type, .rows = rows, .cols = cols, .data = data, .bytes = bytes,
				  .owner = getuid() };
	if (digest) {
		memcpy(e->digest, digest, sizeof e->digest);
		e->digest_type = qg_type_plain(type);
		e->has_digest = true;
	}
	return e;
}

static void unref(struct qgd_server *srv, struct qgd_stored *e)
{
	if (--e->refs)
		return;
	while (e->names)	/* none left: a name goes with its user's last hold */
		drop_name(srv, e->names);
	unlink_stored(srv, e);
	pinned_free(srv, e->data, e->bytes);
	free(e->holders);
	free(e);
}

/*
 * A new handle in S's table for E (whose reference the caller passes on),
 * held for S's user, and named NAME for that user when NAME is set.
 * 0 or -ENOMEM.
 */
static int add_handle(struct qgd_session *s, struct qgd_stored *e, const char *name, struct qgd_weights **out)
{
	uint64_t groups = qgd_weights_share_bits(s);
	void *p = qg_grow(s->weights, &s->cap_weights, s->n_weights, sizeof *s->weights, 8);
	if (!p)
		return -ENOMEM;
	s->weights = p;
	if (hold(e, s->uid, groups))
		return -ENOMEM;
	if (name && *name && !name_of(e, s->uid) && add_name(s->srv, e, s->uid, groups, name)) {
		let_go(s->srv, e, s->uid);
		return -ENOMEM;
	}
	struct qgd_weights *w = &s->weights[s->n_weights++];
	*w = (struct qgd_weights){ .handle = s->next_handle++, .stored = e, .type = e->type, .rows = e->rows,
				   .cols = e->cols, .data = e->data, .bytes = e->bytes };
	s->weight_bytes += qgd_account_pieces(s->srv, e->bytes);	/* what it takes of the pool */
	s->acct->weight_bytes += qgd_account_pieces(s->srv, e->bytes);
	s->srv->weights_store->referenced += e->bytes;	/* E is listed: the store exists */
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
	for (e = first_with_hash(srv, h); e; e = e->chain)
		if (e->hash == h && e->type == type && e->rows == rows && e->cols == cols && e->bytes == bytes &&
		    may_share(s, e) && memcmp(e->data, data, bytes) == 0)
			break;
	if (name && *name) {
		/* only the names this user gave: another's name for the same bytes is theirs */
		struct qgd_stored *n = find_named(s, name, false);
		const struct qgd_name *mine = e ? name_of(e, s->uid) : NULL;
		if (n && n != e) {
			*why = "that name already names other weights";
			pinned_free(srv, data, bytes);
			return -EEXIST;
		}
		if (mine && strcmp(mine->name, name) != 0) {
			*why = "the same weights are stored under another name";
			pinned_free(srv, data, bytes);
			return -EEXIST;
		}
	}
	if (e) {
		pinned_free(srv, data, bytes);	/* the same bytes are stored already */
		e->refs++;
	} else {
		e = stored_new(type, rows, cols, data, bytes, digest, h);
		if (!e) {
			pinned_free(srv, data, bytes);
			return -ENOMEM;
		}
		e->refs = 1;
		if (link_stored(srv, e)) {
			pinned_free(srv, data, bytes);
			free(e);
			return -ENOMEM;
		}
	}
	int r = add_handle(s, e, name, out);
	if (r)
		unref(srv, e);
	return r;
}

enum qg_type qgd_weights_best_layout(enum qg_type plain, int64_t rows)
{
	if (plain == QG_TYPE_Q8_0) {
		enum qg_type best = qg_best_q8_0_type();
		return rows % qg_type_row_group(best) == 0 ? best : QG_TYPE_Q8_0;
	}
	if (plain != QG_TYPE_Q4_0)
		return plain;	/* one layout */

	enum qg_type best = qg_best_weight_type();
	if (rows % qg_type_row_group(best) == 0)
		return best;
	if (rows % 4 == 0)
		return QG_TYPE_Q4_0_4X8;	/* best was 8x8 */
	return QG_TYPE_Q4_0;
}

int qgd_weights_pin(struct qgd_stored *e, uid_t uid, uint64_t groups, bool public)
{
	if (!public && hold(e, uid, groups))
		return -ENOMEM;
	e->refs++;
	e->model_refs++;
	e->public_refs += public;
	return 0;
}

void qgd_weights_unpin(struct qgd_server *srv, struct qgd_stored *e, uid_t uid, bool public)
{
	if (!public)
		let_go(srv, e, uid);
	e->public_refs -= public;
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

	for (e = first_with_hash(srv, h); e; e = e->chain)
		if (e->public_refs && e->hash == h && e->type == type && e->rows == rows && e->cols == cols &&
		    e->bytes == bytes && memcmp(e->data, data, bytes) == 0)
			break;	/* only what public models hold is everyone's to share */
	if (e) {
		pinned_free(srv, data, bytes);
	} else {
		e = stored_new(type, rows, cols, data, bytes, digest, h);
		if (!e) {
			pinned_free(srv, data, bytes);
			return -ENOMEM;
		}
		if (link_stored(srv, e)) {
			pinned_free(srv, data, bytes);
			free(e);
			return -ENOMEM;
		}
	}
	qgd_weights_pin(e, getuid(), 0, true);	/* public: no holder to record, nothing to fail */
	*out = e;
	return 0;
}

int qgd_weights_open_stored(struct qgd_session *s, struct qgd_stored *e, struct qgd_weights **out)
{
	e->refs++;
	int r = add_handle(s, e, NULL, out);
	if (r)
		unref(s->srv, e);
	return r;
}

int qgd_weights_open(struct qgd_session *s, const char *name, bool group, struct qgd_weights **out)
{
	struct qgd_stored *e = find_named(s, name, group);

	return e ? qgd_weights_open_stored(s, e, out) : -ENOENT;
}

int qgd_weights_open_digest(struct qgd_session *s, enum qg_type type, int64_t rows, int64_t cols,
			    const unsigned char digest[32], struct qgd_weights **out)
{
	struct qgd_stored *e;

	for (e = first_with_hash(s->srv, candidate_hash(s->srv, digest, NULL, 0)); e; e = e->chain)
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
	s->srv->weights_store->referenced -= w->bytes;
	let_go(s->srv, w->stored, s->uid);
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
