/*
 * weights.h - weight matrices in pinned memory (weights.c): stored once,
 * shared between sessions that may share them, reached through a
 * session's handles.
 */
#ifndef QGD_WEIGHTS_H
#define QGD_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "quant.h"

struct qgd_server;
struct qgd_session;

#define QGD_WEIGHTS_NAME_MAX 64

/* A user holding a stored matrix: its sessions' handles and its models' pins (weights.c). */
struct qgd_holder {
	uid_t uid;
	uint32_t refs;
	uint64_t groups;		/* bit i: a session that took one was in cfg.share_gids[i] */
};

/* A name a user gave a stored matrix: that user's, and its share groups' (weights.c). */
struct qgd_name {
	uid_t uid;
	uint64_t groups;		/* bit i: the session that named it was in cfg.share_gids[i] */
	char name[QGD_WEIGHTS_NAME_MAX];
	uint64_t key;			/* the name's hash: its place in the server's index */
	struct qgd_stored *stored;	/* the matrix it names */
	struct qgd_name *next;		/* the matrix's next name */
	struct qgd_name *chain;		/* the next in its index bucket */
};

/* One matrix in pinned memory, shared by every session holding a handle to it (weights.c). */
struct qgd_stored {
	uint64_t hash;			/* picks candidates for sharing: its digest's first 8 bytes (weights.c) */
	enum qg_type type;
	int64_t rows, cols;
	void *data;
	size_t bytes;
	uint32_t refs;			/* handles to it, in every session, and models holding it */
	uint32_t model_refs;		/* models holding it */
	uint32_t public_refs;		/* public models holding it: every client may open it */
	uid_t owner;			/* a user holding it (the first holder), else the daemon's own */
	struct qgd_holder *holders;	/* the users holding it, each once */
	size_t n_holders, cap_holders;
	struct qgd_name *names;		/* the names its holders gave it, one a user at most */
	unsigned char digest[32];	/* SHA-256 of its values in ggml's layout of DIGEST_TYPE ... */
	enum qg_type digest_type;	/* ... TYPE's plain type (qg_type_plain) */
	bool has_digest;		/* false if there was no memory to compute it */
	struct qgd_stored *next, *prev;	/* the server's list of every matrix */
	struct qgd_stored *chain;	/* the next in its index bucket (by HASH) */
};

/* A session's handle to stored weights (type, shape and data copied for the lookups). */
struct qgd_weights {
	uint64_t handle;
	struct qgd_stored *stored;
	enum qg_type type;
	int64_t rows, cols;
	void *data;
	size_t bytes;
};

/* Pinned memory for BYTES of weights being converted, or NULL; qgd_weights_discard() gives it back. */
void *qgd_weights_alloc(struct qgd_server *srv, size_t bytes);
/* Give back DATA, BYTES of pinned memory from qgd_weights_alloc that was never stored. */
void qgd_weights_discard(struct qgd_server *srv, void *data, size_t bytes);
/*
 * Store the converted matrix DATA (from qgd_weights_alloc, consumed) for S
 * under a new handle: shared with an identical matrix S may share, or
 * stored anew; NAME (may be NULL or "") names it for S's user alone
 * (and its share groups), never for the other holders of shared bytes.  DIGEST: the SHA-256 of
 * DATA's values in ggml's layout, as the daemon converted them (NULL:
 * computed from DATA here).  0 and the handle in
 * *OUT, or -ENOMEM, -EEXIST (the name is taken; *WHY says how).
 */
int qgd_weights_add(struct qgd_session *s, enum qg_type type, int64_t rows, int64_t cols, void *data,
		    size_t bytes, const unsigned char *digest, const char *name, struct qgd_weights **out,
		    const char **why);
/*
 * A new handle of S to the weights that S's own user named NAME, or with
 * GROUP, to those a user of a share group S is in named so.  0, -ENOENT
 * or -ENOMEM.
 */
int qgd_weights_open(struct qgd_session *s, const char *name, bool group, struct qgd_weights **out);
/*
 * A new handle of S to stored weights whose values in ggml's layout of TYPE
 * (Q4_0 for every Q4_0 layout) have the SHA-256 DIGEST and are ROWS x COLS,
 * and that S may share.  0, -ENOENT (none), -ENOMEM.
 */
int qgd_weights_open_digest(struct qgd_session *s, enum qg_type type, int64_t rows, int64_t cols,
			    const unsigned char digest[32], struct qgd_weights **out);
/* S's handle HANDLE, or NULL. */
struct qgd_weights *qgd_weights_find(struct qgd_session *s, uint64_t handle);
/* Drop handle W of S (the matrix goes when its last handle does). */
void qgd_weights_release(struct qgd_session *s, struct qgd_weights *w);
/* Drop every handle of S. */
void qgd_weights_release_all(struct qgd_session *s);
/* True if S's client is in group G, as primary or supplementary group (what sharing and stats go by). */
bool qgd_weights_in_group(const struct qgd_session *s, gid_t g);
/*
 * The layout to store weights of the plain type PLAIN and ROWS rows in.
 * Q4_0: this CPU's best, else the 4-row layout with the same 8-byte
 * interleave when only 4 rows divide, else plain Q4_0.  Q8_0: its 4x4
 * layout where this CPU's kernels run it best (qg_best_q8_0_type()) and 4
 * rows divide, else plain Q8_0.  Any other type as it is.
 */
enum qg_type qgd_weights_best_layout(enum qg_type plain, int64_t rows);
/*
 * A model's hold on E, for the user UID who loaded it (its share groups in
 * GROUPS), or for every client when PUBLIC.  0 or -ENOMEM (nothing held).
 */
int qgd_weights_pin(struct qgd_stored *e, uid_t uid, uint64_t groups, bool public);
/* Let go of a model's hold on E taken with the same UID and PUBLIC (freed with its last holder). */
void qgd_weights_unpin(struct qgd_server *srv, struct qgd_stored *e, uid_t uid, bool public);
/* The configured share groups S's client is in: bit i for cfg.share_gids[i]. */
uint64_t qgd_weights_share_bits(const struct qgd_session *s);
/* Bytes of pinned memory the stored matrices (and those being converted) take. */
uint64_t qgd_weights_pinned_bytes(const struct qgd_server *srv);
/* How many matrices the daemon stores. */
uint32_t qgd_weights_stored_count(const struct qgd_server *srv);
/* Bytes of every handle of every session (a matrix counts once per handle). */
uint64_t qgd_weights_referenced_bytes(const struct qgd_server *srv);
/* How many stored matrices UID holds (a handle of one of its sessions, or a pin of one of its models). */
uint32_t qgd_weights_held_by(const struct qgd_server *srv, uid_t uid);
/*
 * Store the converted matrix DATA (from qgd_weights_alloc, consumed) for
 * no session (a model the daemon loads itself), pinned once for the
 * caller's public model; identical bytes another public model holds are
 * shared.  0 with
 * *OUT, or -ENOMEM.
 */
int qgd_weights_store_pinned(struct qgd_server *srv, enum qg_type type, int64_t rows, int64_t cols, void *data,
			     size_t bytes, struct qgd_stored **out);
/* A new handle of S to stored matrix E (a model's).  0 or -ENOMEM. */
int qgd_weights_open_stored(struct qgd_session *s, struct qgd_stored *e, struct qgd_weights **out);

#endif /* QGD_WEIGHTS_H */
