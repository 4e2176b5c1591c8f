/*
 * models.c - GGUF models loaded into the daemon (qgraph_model_load,
 * qgraph_model_unload).
 *
 * The client reads the file itself, with the same bounds-checked reader as
 * the daemon's preload (src/formats/gguf.c), and sends each tensor through the
 * ordinary upload path, marked for the model: begin, one upload per
 * tensor, commit.  A load that fails midway abandons the model, so the
 * daemon keeps nothing of it (and would drop it anyway if this process
 * died before the commit).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "session-impl.h"

/* Send a ModelRequest OP for NAME: 0 or -errno. */
static int model_request(struct qgraph_session *s, Qgraph__ModelRequest__Op op, const char *name)
{
	Qgraph__Request req = QGRAPH__REQUEST__INIT;
	Qgraph__ModelRequest mr = QGRAPH__MODEL_REQUEST__INIT;

	mr.op = op;
	mr.name = (char *)name;
	req.body_case = QGRAPH__REQUEST__BODY_MODEL;
	req.model = &mr;
	return qg_client_call(s, &req, NULL);
}

/* The qgraph type a GGUF tensor of ggml type TYPE is sent as, and stored as in *TARGET; -1 if not computed with. */
static int send_type(uint32_t type, enum qgraph_type *target)
{
	switch (type) {
	case QG_GGML_F32:
		*target = QGRAPH_TYPE_F32;
		return QGRAPH_TYPE_F32;
	case QG_GGML_F16:
		*target = QGRAPH_TYPE_F16;
		return QGRAPH_TYPE_F16;
	case QG_GGML_Q8_0:
		*target = QGRAPH_TYPE_Q8_0;
		return QGRAPH_TYPE_Q8_0;
	case QG_GGML_Q4_0:
		*target = QGRAPH_TYPE_Q4_0;	/* the daemon's best layout */
		return QGRAPH_TYPE_Q4_0;
	case QG_GGML_Q4_K:
		*target = QGRAPH_TYPE_Q4_K;
		return QGRAPH_TYPE_Q4_K;
	case QG_GGML_Q6_K:
		*target = QGRAPH_TYPE_Q6_K;
		return QGRAPH_TYPE_Q6_K;
	default:
		return -1;
	}
}

/* Upload every tensor of G that qgraph computes with, as NAME/tensor. */
static int send_tensors(struct qgraph_session *s, const struct qg_gguf *g, const char *name,
			qgraph_progress_fn progress, void *ctx)
{
	size_t n = qg_gguf_tensor_count(g), total = 0, done = 0;
	uint64_t bytes = 0, sent = 0;
	char full[64];
	enum qgraph_type target;

	for (size_t i = 0; i < n; i++) {
		const struct qg_gguf_tensor *t = qg_gguf_tensor_at(g, i);
		if (send_type(t->type, &target) < 0)
			continue;
		if ((size_t)snprintf(full, sizeof full, "%s/%s", name, t->name) >= sizeof full)
			return qg_client_fail(s, -ENAMETOOLONG, "\"%s/%s\" is longer than a weights name may be (63 bytes)",
					      name, t->name);
		total++;
		bytes += t->bytes;
	}
	for (size_t i = 0; i < n; i++) {
		const struct qg_gguf_tensor *t = qg_gguf_tensor_at(g, i);
		int src = send_type(t->type, &target);
		uint64_t handle;
		if (src < 0 || (size_t)snprintf(full, sizeof full, "%s/%s", name, t->name) >= sizeof full)
			continue;	/* (every name was checked to fit above) */
		/* the reader bounds the element count, so the row count fits */
		int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
		int r = qg_client_upload(s, full, 1, (enum qgraph_type)src, target, rows, t->ne[0], t->data, &handle,
					 NULL, NULL, NULL);
		if (r) {
			char why[sizeof s->error];
			snprintf(why, sizeof why, "%s", s->error);
			return qg_client_fail(s, r, "tensor %s (%s, %lld x %lld): %s", t->name,
					      qg_ggml_type_name(t->type), (long long)rows, (long long)t->ne[0], why);
		}
		sent += t->bytes;
		if (progress)
			progress(ctx, ++done, total, sent, bytes);
	}
	return 0;
}

QGRAPH_API int qgraph_model_load(struct qgraph_session *s, const char *path, const char *name,
				 qgraph_progress_fn progress, void *ctx)
{
	char base[64], err[512];
	struct qg_gguf *g = NULL;
	struct stat st;
	void *map = NULL;
	int r;

	if (!s || !path)
		return -EINVAL;
	if (!name) {
		if ((r = qg_gguf_model_name(path, base, sizeof base)))
			return qg_client_fail(s, -EINVAL, "%s: the file's name gives no model name (%s): give one", path,
					      strerror(-r));
		name = base;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		return qg_client_fail(s, r, "%s: %s", path, strerror(-r));
	}
	size_t len = (size_t)st.st_size;
	if (len && (map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
		r = -errno;
		close(fd);
		return qg_client_fail(s, r, "%s: %s", path, strerror(-r));
	}
	close(fd);
	r = qg_gguf_open(map, len, &g, err, sizeof err);
	if (r) {
		qg_client_fail(s, -EINVAL, "%s: %s", path, err);
		r = -EINVAL;
		goto out;
	}
	if ((r = model_request(s, QGRAPH__MODEL_REQUEST__OP__MODEL_BEGIN, name)))
		goto out;
	r = send_tensors(s, g, name, progress, ctx);
	if (!r)
		r = model_request(s, QGRAPH__MODEL_REQUEST__OP__MODEL_COMMIT, name);
	if (r) {
		/* abandon the load, keeping the first error's text */
		char why[sizeof s->error];
		snprintf(why, sizeof why, "%s", s->error);
		model_request(s, QGRAPH__MODEL_REQUEST__OP__MODEL_UNLOAD, name);
		snprintf(s->error, sizeof s->error, "%s", why);
	}
out:
	qg_gguf_free(g);
	if (map)
		munmap(map, len);
	return r;
}

QGRAPH_API int qgraph_model_unload(struct qgraph_session *s, const char *name)
{
	if (!s || !name || !*name)
		return -EINVAL;
	return model_request(s, QGRAPH__MODEL_REQUEST__OP__MODEL_UNLOAD, name);
}
