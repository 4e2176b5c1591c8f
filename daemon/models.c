/*
 * models.c - models held by the daemon.
 *
 * A model is a list of named tensors, each a pin on a stored matrix
 * (weights.c): the matrix stays in pinned memory while the model holds it,
 * whoever else lets go.  Names live here, not on the stored matrix, because
 * names are labels: two models (or two tensors of one) may hold the same
 * bytes, stored once.  A model's tensors are open to every client the
 * daemon serves (by "MODEL/tensor" with qgraph_weights_open); unloading is
 * for the user who loaded it and root.
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

#include "gguf.h"
#include "grow.h"
#include "models.h"
#include "server.h"
#include "session.h"
#include "weights.h"
#include "quant.h"

struct model_tensor {
	char name[QGD_WEIGHTS_NAME_MAX];	/* "MODEL/tensor" */
	struct qgd_stored *stored;
};

struct qgd_model {
	char name[QGD_WEIGHTS_NAME_MAX];
	uid_t owner;
	const struct qgd_session *loading;	/* the session loading it; NULL once committed */
	struct model_tensor *t;
	size_t n, cap;
	uint64_t bytes;
	struct qgd_model *next;
};

static struct qgd_model *find(const struct qgd_server *srv, const char *name)
{
	for (struct qgd_model *m = srv->models; m; m = m->next)
		if (strcmp(m->name, name) == 0)
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
	for (struct qgd_model **p = &srv->models; *p; p = &(*p)->next)
		if (*p == m) {
			*p = m->next;
			break;
		}
	for (size_t i = 0; i < m->n; i++)
		qgd_weights_unpin(srv, m->t[i].stored);
	free(m->t);
	free(m);
}

/* A new model NAME (not yet listed: LOADING holds it) of OWNER, or NULL without memory. */
static struct qgd_model *model_new(struct qgd_server *srv, const char *name, uid_t owner,
				   const struct qgd_session *loading)
{
	struct qgd_model *m = calloc(1, sizeof *m);

	if (!m)
		return NULL;
	snprintf(m->name, sizeof m->name, "%s", name);
	m->owner = owner;
	m->loading = loading;
	m->next = srv->models;
	srv->models = m;
	return m;
}

/* Add E (already pinned for M) to M as NAME.  0 or -ENOMEM (the pin is then let go). */
static int add_tensor(struct qgd_server *srv, struct qgd_model *m, const char *name, struct qgd_stored *e)
{
	void *p = qg_grow(m->t, &m->cap, m->n, sizeof *m->t, 16);

	if (!p) {
		qgd_weights_unpin(srv, e);
		return -ENOMEM;
	}
	m->t = p;
	snprintf(m->t[m->n].name, sizeof m->t[m->n].name, "%s", name);
	m->t[m->n++].stored = e;
	m->bytes += e->bytes;
	return 0;
}

/* A model name: 1 to 47 bytes (room for "/tensor"), no '/', no control bytes. */
static bool name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > 47)
		return false;
	for (size_t i = 0; i < n; i++)
		if (name[i] == '/' || (unsigned char)name[i] < 0x20)
			return false;
	return true;
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
	if ((m = find(srv, name))) {
		snprintf(msg, len, "model \"%s\" is %s: unload it first", name, m->loading ? "being loaded" : "loaded");
		return -EINVAL;
	}
	if (!model_new(srv, name, s->uid, s)) {
		snprintf(msg, len, "no memory");
		return -ENOMEM;
	}
	return 0;
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
	struct qgd_model *m = find(srv, name);

	if (!m || (m->loading && m->loading != s)) {
		snprintf(msg, len, "no model \"%.64s\"", name);
		return -ENOENT;
	}
	if (!m->loading && s->uid != m->owner && s->uid != 0) {
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
	qgd_weights_pin(e);
	qgd_weights_release(s, w);	/* the model's pin keeps it */
	return add_tensor(s->srv, m, name, e);
}

int qgd_model_open(struct qgd_session *s, const char *name, struct qgd_weights **out)
{
	for (struct qgd_model *m = s->srv->models; m; m = m->next) {
		if (m->loading)
			continue;
		for (size_t i = 0; i < m->n; i++)
			if (strcmp(m->t[i].name, name) == 0)
				return qgd_weights_open_stored(s, m->t[i].stored, out);
	}
	return -ENOENT;
}

void qgd_models_session_gone(struct qgd_session *s)
{
	struct qgd_model *m = loading_of(s);

	if (m) {
		qgd_info("model %s: load abandoned: its session went away", m->name);
		drop(s->srv, m);
	}
}

size_t qgd_models_list(const struct qgd_server *srv, size_t first, struct qgd_model_info *out, size_t max)
{
	size_t n = 0, seen = 0;

	for (struct qgd_model *m = srv->models; m && n < max; m = m->next) {
		if (m->loading || seen++ < first)
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
	dst = src == QG_TYPE_Q4_0 ? qgd_weights_best_layout(rows) : src;
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
		const char *b = strrchr(path, '/');
		b = b ? b + 1 : path;
		size_t n = strlen(b);
		if (n > 5 && strcmp(b + n - 5, ".gguf") == 0)
			n -= 5;
		snprintf(base, sizeof base, "%.*s", (int)(n < sizeof base - 1 ? n : sizeof base - 1), b);
		name = base;
	}
	if (!name_ok(name) || find(srv, name)) {
		qgd_error("preload %s: \"%s\" is not a model name (1 to 47 bytes, no '/', not loaded already)", path,
			  name);
		goto out;
	}
	if (!(m = model_new(srv, name, getuid(), NULL))) {
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
