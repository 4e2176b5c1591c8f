/*
 * models.h - models held by the daemon: named weights that outlive the
 * session that loaded them, until an unload (models.c).
 */
#ifndef QGD_MODELS_H
#define QGD_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct qgd_server;
struct qgd_session;
struct qgd_weights;

/*
 * Begin loading model NAME for S (its uploads named "NAME/tensor" go to
 * it until the commit).  0, or -EINVAL (a bad name, S loading one already,
 * NAME taken in its namespace: the public one for root, else S's user's)
 * or -ENOMEM, with the refusal in MSG (LEN bytes).
 */
int qgd_model_begin(struct qgd_session *s, const char *name, char *msg, size_t len);
/* S's load of model NAME is complete: the clients it is for may open its tensors.  0, or -ENOENT with MSG. */
int qgd_model_commit(struct qgd_session *s, const char *name, char *msg, size_t len);
/*
 * Unload model NAME (or abandon S's own load of it): the model that name
 * opens for S, or for root a public one, else any user's of that name.
 * Its owner and root alone may.  0, or -ENOENT or -EACCES with the refusal in MSG.
 */
int qgd_model_unload(struct qgd_session *s, const char *name, char *msg, size_t len);
/*
 * Whether S may upload weights named NAME into the model it is loading:
 * 0, or -ENOENT (no load in progress) or -EINVAL (NAME not "MODEL/...")
 * with *WHY.
 */
int qgd_model_may_upload(const struct qgd_session *s, const char *name, const char **why);
/*
 * Hand S's fresh handle W (uploaded for its model under NAME) to the model
 * S is loading: the model pins the weights and the handle is released.
 * 0, -ENOENT (the load ended while the upload's chunks came: the handle is
 * released, nothing kept) or -ENOMEM.
 */
int qgd_model_adopt(struct qgd_session *s, const char *name, struct qgd_weights *w);
/* Which models a name is looked up among, for a session S. */
enum qgd_model_scope {
	QGD_MODEL_OWN,		/* those S's user loaded (root's are public) */
	QGD_MODEL_PUBLIC,	/* root's and the preloaded ones */
	QGD_MODEL_GROUP,	/* other users', loaded in a share group S is in */
};
/*
 * A handle of S to the tensor NAME ("MODEL/tensor") of a loaded model in
 * SCOPE: 0, -ENOENT or -ENOMEM.
 */
int qgd_model_open(struct qgd_session *s, const char *name, enum qgd_model_scope scope, struct qgd_weights **out);
/* S goes away: a model it was loading goes with it. */
void qgd_models_session_gone(struct qgd_session *s);
/* A loaded model, as stats tell it (its name is the model's own, valid while it is loaded). */
struct qgd_model_info {
	const char *name;
	uint32_t tensors;
	uint64_t bytes;
	uint32_t uid;
};
/*
 * Up to MAX of the loaded models S may open (every one with ALL) in OUT,
 * from the FIRST-th on (0: the first); returns how many.
 */
size_t qgd_models_list(const struct qgd_session *s, bool all, size_t first, struct qgd_model_info *out,
		       size_t max);
/*
 * Read the GGUF file PATH and hold its computable tensors (Q4_0 in the
 * best layout, Q8_0, F16 and F32 as they are) as model NAME (NULL: the
 * file's base name without ".gguf").  0 or -errno (logged: start-up fails).
 */
int qgd_models_preload(struct qgd_server *srv, const char *path, const char *name);
/* Let go of every model (at exit). */
void qgd_models_fini(struct qgd_server *srv);

#endif /* QGD_MODELS_H */
