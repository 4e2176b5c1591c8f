/*
 * models.c - models held by the daemon.
 *
 * A model is a list of named tensors, each a pin on a stored matrix
 * (weights.c): the matrix stays in pinned memory while the model holds it,
 * whoever else lets go.  Names live here, not on the stored matrix, because
 * names are labels: two models (or two tensors of one) may hold the same
 * bytes, stored once.
 *
 * Whose a model is: one loaded by root, or preloaded by the daemon, is
 * public (every client the daemon serves opens its tensors by
 * "MODEL/tensor" with qgraph_weights_open); one loaded by another user is
 * that user's, and its share groups' (the configured share groups the
 * loading session was in).  Public models have one namespace, and each
 * user has its own, so another user may load a model of a name already
 * taken and each sees its own.  A user unloads its own models; root any.
 * requests.c says in which order a name is looked up.
 *
 * Unloading a model that sessions still hold handles to is allowed: the
 * model lets go of its pins, and each matrix is freed when the last
 * session using it lets go, so nothing a graph reads disappears under it.
 *
 * A client loads a model in steps (begin, one upload per tensor, commit);
 * until the commit the model belongs to that session, is not listed and
 * cannot be opened, and goes away with the session.  The daemon loads a
 * preloaded model itself, with the same GGUF reader, at start-up.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accounts.h"
#include "gguf.h"
#include "grow.h"
#include "models.h"
#include "server.h"
#include "session.h"
#include "weights.h"
#include "quant.h"
#include "utf8.h"

struct model_tensor {
	char name[QGD_WEIGHTS_NAME_MAX];	/* "MODEL/tensor" */
	struct qgd_stored *stored;
};

struct qgd_model {
	char name[QGD_WEIGHTS_NAME_MAX];
	uid_t owner;
	bool public;			/* root's or preloaded: every client's */
	uint64_t groups;		/* not public: the share groups of the session that loaded it */
	const struct qgd_session *loading;	/* the session loading it; NULL once committed */
	struct model_tensor *t;
	size_t n, cap;
	uint32_t *index;		/* open addressing by tensor name: slot i holds a tensor's place + 1, 0 when free */
	size_t index_slots;		/* a power of two, at least twice N; 0 without an index (then: a walk) */
	uint64_t bytes;
	struct qgd_account *acct;		/* its loader's, charged for its tensors; NULL: preloaded */
	uint64_t charged;			/* pool pieces charged to ACCT */
	struct qgd_model *next;
};

/* The model NAME, loaded or loading, in the public namespace (PUBLIC) or else OWNER's; NULL if none. */
static struct qgd_model *find(const struct qgd_server *srv, const char *name, bool public, uid_t owner)
{
	for (struct qgd_model *m = srv->models; m; m = m->next)
		if (m->public == public && (public || m->owner == owner) && strcmp(m->name, name) == 0)
			return m;
	return NULL;
}

/* True if loaded model M is in SCOPE for S (see qgd_model_open). */
static bool in_scope(const struct qgd_session *s, const struct qgd_model *m, enum qgd_model_scope scope)
{
	if (m->loading)
		return false;
	switch (scope) {
	case QGD_MODEL_OWN:
		return !m->public && m->owner == s->uid;
	case QGD_MODEL_PUBLIC:
		return m->public;
	case QGD_MODEL_GROUP:
		return !m->public && m->owner != s->uid && (m->groups & qgd_weights_share_bits(s));
	}
	return false;
}

/* The loaded model NAME in SCOPE for S, or NULL. */
static struct qgd_model *find_for(const struct qgd_session *s, const char *name, size_t len,
				  enum qgd_model_scope scope)
{
	for (struct qgd_model *m = s->srv->models; m; m = m->next)
		if (in_scope(s, m, scope) && strlen(m->name) == len && memcmp(m->name, name, len) == 0)
			return m;
	return NULL;
}

static struct qgd_model *loading_of(const struct qgd_session *s)
{
	for (struct qgd_model *m = s->srv->models; m; m = m->next)
		if (m->loading == s)
			return m;
	return NULL;
}

/* Unlink M from the server's list and let go of every tensor it holds. */
static void drop(struct qgd_server *srv, struct qgd_model *m)
{
	if (m->acct) {
		m->acct->model_bytes -= m->charged;
		qgd_account_drop(srv, m->acct);
	}
	for (struct qgd_model **p = &srv->models; *p; p = &(*p)->next)
		if (*p == m) {
			*p = m->next;
			break;
		}
	for (size_t i = 0; i < m->n; i++)
		qgd_weights_unpin(srv, m->t[i].stored, m->owner, m->public);
	free(m->t);
	free(m->index);
	free(m);
}

/*
 * A new model NAME (not yet listed: LOADING holds it) of OWNER, every
 * client's if PUBLIC, else OWNER's and its share GROUPS'; NULL without
 * memory.
 */
static struct qgd_model *model_new(struct qgd_server *srv, const char *name, uid_t owner, bool public,
				   uint64_t groups, const struct qgd_session *loading)
{
	struct qgd_model *m = calloc(1, sizeof *m);

	if (!m)
		return NULL;
	snprintf(m->name, sizeof m->name, "%s", name);
	m->owner = owner;
	m->public = public;
	m->groups = public ? 0 : groups;
	m->loading = loading;
	m->next = srv->models;
	srv->models = m;
	return m;
}

/* A 64-bit FNV-1a hash of the string NAME. */
static uint64_t name_hash(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

/* Put tensor I of M in M's index (which has a free slot). */
static void index_put(struct qgd_model *m, size_t i)
{
	size_t mask = m->index_slots - 1, k = (size_t)name_hash(m->t[i].name) & mask;

	while (m->index[k])
		k = (k + 1) & mask;
	m->index[k] = (uint32_t)i + 1;
}

/*
 * Index M's tensor just added: in place while the index stays at most half
 * full, else in one twice as large.  Without memory for that, M has no
 * index and its lookups walk the tensors.
 */
static void index_added(struct qgd_model *m)
{
	if (m->n > UINT32_MAX - 1) {	/* past what a slot holds: walk */
		free(m->index);
		m->index = NULL;
		m->index_slots = 0;
		return;
	}
	if (m->index && 2 * m->n <= m->index_slots) {
		index_put(m, m->n - 1);
		return;
	}
	size_t slots = m->index_slots ? 2 * m->index_slots : 64;
	while (slots < 2 * m->n)
		slots *= 2;
	free(m->index);
	m->index = calloc(slots, sizeof *m->index);
	m->index_slots = m->index ? slots : 0;
	for (size_t i = 0; m->index && i < m->n; i++)
		index_put(m, i);
}

/* M's tensor named NAME, or NULL. */
static struct model_tensor *tensor_named(const struct qgd_model *m, const char *name)
{
	if (!m->index) {
		for (size_t i = 0; i < m->n; i++)
			if (strcmp(m->t[i].name, name) == 0)
				return &m->t[i];
		return NULL;
	}
	size_t mask = m->index_slots - 1;
	for (size_t k = (size_t)name_hash(name) & mask; m->index[k]; k = (k + 1) & mask)
		if (strcmp(m->t[m->index[k] - 1].name, name) == 0)
			return &m->t[m->index[k] - 1];
	return NULL;
}

/* Add E (already pinned for M) to M as NAME.  0 or -ENOMEM (the pin is then let go). */
static int add_tensor(struct qgd_server *srv, struct qgd_model *m, const char *name, struct qgd_stored *e)
{
	void *p = qg_grow(m->t, &m->cap, m->n, sizeof *m->t, 16);

	if (!p) {
		qgd_weights_unpin(srv, e, m->owner, m->public);
		return -ENOMEM;
	}
	m->t = p;
	snprintf(m->t[m->n].name, sizeof m->t[m->n].name, "%s", name);
	m->t[m->n++].stored = e;
	m->bytes += e->bytes;
	index_added(m);
	if (m->acct) {	/* each tensor whole, shared or not: the model keeps it whoever else lets go */
		m->charged += qgd_account_pieces(srv, e->bytes);
		m->acct->model_bytes += qgd_account_pieces(srv, e->bytes);
	}
	return 0;
}

/*
 * A model name: 1 to 47 bytes (room for "/tensor") of well-formed UTF-8,
 * no '/', no control bytes: it reaches logs, listings and other users'
 * terminals.
 */
static bool name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > 47)
		return false;
	for (size_t i = 0; i < n; i++)
		if (name[i] == '/' || (unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return false;
	return qg_utf8_valid(name, n);
}

/*
 * The model S just began is its user's from now: held by the account it is
 * charged to.  0, or -ENOMEM with MSG (the model is dropped).
 */
static int charge_loader(struct qgd_session *s, char *msg, size_t len)
{
	struct qgd_model *m = loading_of(s);

	if (!(m->acct = qgd_account_hold(s->srv, s->uid))) {
		drop(s->srv, m);
		snprintf(msg, len, "no memory");
		return -ENOMEM;
	}
	return 0;
}

int qgd_model_begin(struct qgd_session *s, const char *name, char *msg, size_t len)
{
	struct qgd_server *srv = s->srv;
	struct qgd_model *m;

	if (!name_ok(name)) {
		snprintf(msg, len, "a model name is 1 to 47 bytes, without '/'");
		return -EINVAL;
	}
	if (loading_of(s)) {
		snprintf(msg, len, "this session is loading a model already");
		return -EINVAL;
	}
	bool public = s->uid == 0;
	if ((m = find(srv, name, public, s->uid))) {
		snprintf(msg, len, "model \"%s\" is %s: unload it first", name, m->loading ? "being loaded" : "loaded");
		return -EINVAL;
	}
	if (!model_new(srv, name, s->uid, public, qgd_weights_share_bits(s), s)) {
		snprintf(msg, len, "no memory");
		return -ENOMEM;
	}
	return charge_loader(s, msg, len);
}

int qgd_model_commit(struct qgd_session *s, const char *name, char *msg, size_t len)
{
	struct qgd_model *m = loading_of(s);

	if (!m || strcmp(m->name, name) != 0) {
		snprintf(msg, len, "this session is not loading model \"%.64s\"", name);
		return -ENOENT;
	}
	m->loading = NULL;
	qgd_info("model %s: loaded by uid %u: %zu tensors, %llu bytes", m->name, (unsigned)m->owner, m->n,
		 (unsigned long long)m->bytes);
	return 0;
}

int qgd_model_unload(struct qgd_session *s, const char *name, char *msg, size_t len)
{
	struct qgd_server *srv = s->srv;
	struct qgd_model *m = loading_of(s);
	size_t n = strlen(name);

	if (!m || strcmp(m->name, name) != 0) {
		/* the model this name opens, in the order opens look; root may name any user's */
		m = find_for(s, name, n, QGD_MODEL_OWN);
		if (!m)
			m = find_for(s, name, n, QGD_MODEL_PUBLIC);
		for (struct qgd_model *o = srv->models; !m && s->uid == 0 && o; o = o->next)
			if (!o->loading && strcmp(o->name, name) == 0)
				m = o;
		if (!m)
			m = find_for(s, name, n, QGD_MODEL_GROUP);
	}
	if (!m) {
		snprintf(msg, len, "no model \"%.64s\"", name);
		return -ENOENT;
	}
	if (s->uid != m->owner && s->uid != 0) {
		snprintf(msg, len, "model \"%s\" was loaded by uid %u: only that user and root may unload it", name,
			 (unsigned)m->owner);
		return -EACCES;
	}
	qgd_info("model %s: %s by uid %u", m->name, m->loading ? "load abandoned" : "unloaded", (unsigned)s->uid);
	drop(srv, m);
	return 0;
}

int qgd_model_may_upload(const struct qgd_session *s, const char *name, const char **why)
{
	const struct qgd_model *m = loading_of(s);
	size_t n;

	if (!m) {
		*why = "no model is being loaded by this session";
		return -ENOENT;
	}
	n = strlen(m->name);
	if (!name || strncmp(name, m->name, n) != 0 || name[n] != '/' || !name[n + 1]) {
		*why = "a model's weights are named \"MODEL/tensor\"";
		return -EINVAL;
	}
	return 0;
}

int qgd_model_adopt(struct qgd_session *s, const char *name, struct qgd_weights *w)
{
	struct qgd_model *m = loading_of(s);
	struct qgd_stored *e = w->stored;
	const char *why;

	/* the load may have ended (and another begun) while the upload's chunks came */
	if (!m || qgd_model_may_upload(s, name, &why)) {
		qgd_weights_release(s, w);
		return -ENOENT;
	}
	int r = qgd_weights_pin(e, m->owner, m->groups, m->public);
	qgd_weights_release(s, w);	/* the model's pin keeps it (or, without memory for it, nothing does) */
	return r ? r : add_tensor(s->srv, m, name, e);
}

int qgd_model_open(struct qgd_session *s, const char *name, enum qgd_model_scope scope, struct qgd_weights **out)
{
	const char *slash = strchr(name, '/');
	struct qgd_model *m = slash ? find_for(s, name, (size_t)(slash - name), scope) : NULL;

	struct model_tensor *t = m ? tensor_named(m, name) : NULL;

	return t ? qgd_weights_open_stored(s, t->stored, out) : -ENOENT;
}

void qgd_models_session_gone(struct qgd_session *s)
{
	struct qgd_model *m = loading_of(s);

	if (m) {
		qgd_info("model %s: load abandoned: its session went away", m->name);
		drop(s->srv, m);
	}
}

size_t qgd_models_list(const struct qgd_session *s, bool all, size_t first, struct qgd_model_info *out,
		       size_t max)
{
	size_t n = 0, seen = 0;

	for (struct qgd_model *m = s->srv->models; m && n < max; m = m->next) {
		if (m->loading)
			continue;
		if (!all && !in_scope(s, m, QGD_MODEL_OWN) && !in_scope(s, m, QGD_MODEL_PUBLIC) &&
		    !in_scope(s, m, QGD_MODEL_GROUP))
			continue;
		if (seen++ < first)
			continue;
		out[n] = (struct qgd_model_info){ .name = m->name, .tensors = (uint32_t)m->n, .bytes = m->bytes,
						  .uid = (uint32_t)m->owner };
		n++;
	}
	return n;
}

/* Hold tensor T of the mapped file as NAME in M: converted into pinned memory, stored, pinned. */
static int preload_tensor(struct qgd_server *srv, struct qgd_model *m, const struct qg_gguf_tensor *t,
			  const char *name)
{
	int64_t cols = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];	/* the reader bounds the product */
	enum qg_type src, dst;
	struct qgd_stored *e;

	switch (t->type) {
	case QG_GGML_F32:
		src = QG_TYPE_F32;
		break;
	case QG_GGML_F16:
		src = QG_TYPE_F16;
		break;
	case QG_GGML_Q8_0:
		src = QG_TYPE_Q8_0;
		break;
	case QG_GGML_Q4_K:
		src = QG_TYPE_Q4_K;
		break;
	case QG_GGML_Q6_K:
		src = QG_TYPE_Q6_K;
		break;
	default:
		src = QG_TYPE_Q4_0;
	}
	dst = qgd_weights_best_layout(src, rows);
	ssize_t bytes = qg_matrix_size(dst, rows, cols);
	if (bytes < 0 || (uint64_t)bytes != t->bytes) {
		qgd_error("preload: tensor %s: %lld x %lld does not suit %s", t->name, (long long)rows, (long long)cols,
			  qg_type_name(dst));
		return -EINVAL;
	}
	void *mem = qgd_weights_alloc(srv, (size_t)bytes);
	if (!mem) {
		qgd_error("preload: tensor %s: the pool has no room for %zd more bytes (pool-size)", t->name, bytes);
		return -ENOMEM;
	}
	if (dst == src)
		memcpy(mem, t->data, (size_t)bytes);
	else if (qg_repack(dst, mem, (size_t)bytes, src, t->data, rows, cols) < 0) {
		qgd_weights_discard(srv, mem, (size_t)bytes);
		qgd_error("preload: tensor %s: cannot repack to %s", t->name, qg_type_name(dst));
		return -EINVAL;
	}
	int r = qgd_weights_store_pinned(srv, dst, rows, cols, mem, (size_t)bytes, &e);
	if (!r)
		r = add_tensor(srv, m, name, e);
	if (r)
		qgd_error("preload: tensor %s: no memory", t->name);
	return r;
}

int qgd_models_preload(struct qgd_server *srv, const char *path, const char *name)
{
	char base[QGD_WEIGHTS_NAME_MAX], err[512], full[QGD_WEIGHTS_NAME_MAX];
	struct qg_gguf *g = NULL;
	struct qgd_model *m = NULL;
	size_t skipped = 0;
	struct stat st;
	void *map = NULL;
	int rc = -EINVAL;

	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		qgd_error("preload %s: %s", path, strerror(-rc));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	size_t len = (size_t)st.st_size;
	if (len && (map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
		rc = -errno;
		qgd_error("preload %s: %s", path, strerror(-rc));
		close(fd);
		return rc;
	}
	close(fd);
	if (qg_gguf_open(map, len, &g, err, sizeof err)) {
		qgd_error("preload %s: %s", path, err);
		goto out;
	}
	if (!name) {
		if ((rc = qg_gguf_model_name(path, base, sizeof base))) {
			qgd_error("preload %s: the file's name gives no model name (%s): rename the file",
				  path, strerror(-rc));
			goto out;
		}
		name = base;
	}
	if (!name_ok(name) || find(srv, name, true, 0)) {
		qgd_error("preload %s: \"%s\" is not a model name (1 to 47 bytes, no '/', not loaded already)", path,
			  name);
		goto out;
	}
	if (!(m = model_new(srv, name, getuid(), true, 0, NULL))) {
		qgd_error("preload %s: no memory", path);
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < qg_gguf_tensor_count(g); i++) {
		const struct qg_gguf_tensor *t = qg_gguf_tensor_at(g, i);
		if (t->type != QG_GGML_F32 && t->type != QG_GGML_F16 && t->type != QG_GGML_Q8_0 &&
		    t->type != QG_GGML_Q4_0 && t->type != QG_GGML_Q4_K && t->type != QG_GGML_Q6_K) {
			skipped++;
			continue;
		}
		if ((size_t)snprintf(full, sizeof full, "%s/%s", name, t->name) >= sizeof full) {
			qgd_error("preload %s: \"%s/%s\" is longer than a weights name may be (%d bytes)", path, name,
				  t->name, QGD_WEIGHTS_NAME_MAX - 1);
			rc = -ENAMETOOLONG;
			goto out;
		}
		if ((rc = preload_tensor(srv, m, t, full)))
			goto out;
	}
	qgd_info("model %s: preloaded from %s: %zu tensors, %llu bytes; %zu skipped (types qgraph does not compute with)",
		 m->name, path, m->n, (unsigned long long)m->bytes, skipped);
	m = NULL;
	rc = 0;
out:
	if (m)
		drop(srv, m);
	qg_gguf_free(g);
	if (map)
		munmap(map, len);
	return rc;
}

void qgd_models_fini(struct qgd_server *srv)
{
	while (srv->models)
		drop(srv, srv->models);
}
