/*
 * accounts.h - what each user holds in the daemon, across its sessions
 * and past them (accounts.c): the per-user quotas user-weights,
 * user-models and user-graph-metadata.
 */
#ifndef QGD_ACCOUNTS_H
#define QGD_ACCOUNTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct qgd_server;

/*
 * One user's account: held by each of its sessions and each model it
 * loaded, freed with the last holder.  Counters are bytes.
 */
struct qgd_account {
	uid_t uid;
	uint32_t holders;		/* sessions and models of this user */
	uint64_t model_bytes;		/* pool pieces of the models it loaded (and is loading), in user-models */
	uint64_t weight_bytes;		/* pool pieces its sessions' weight handles reach, in user-weights */
	uint64_t graph_bytes;		/* heap its sessions' registered graphs hold, in user-graph-metadata */
	struct qgd_account *next;
};

/* UID's account in SRV, made if it has none, with one more holder: the caller's.  NULL without memory. */
struct qgd_account *qgd_account_hold(struct qgd_server *srv, uid_t uid);
/* Let go of the caller's hold on A (freed with its last holder).  NULL is fine. */
void qgd_account_drop(struct qgd_server *srv, struct qgd_account *a);

/* The pool bytes BYTES of weights take: whole pieces of the pool's alignment (4 KiB unless told). */
uint64_t qgd_account_pieces(const struct qgd_server *srv, uint64_t bytes);

/*
 * Whether A's sessions may reach MORE bytes of weights: 0, or -EDQUOT
 * naming user-weights in MSG (LEN bytes).  No bound unless user-weights
 * is set.
 */
int qgd_account_check_weights(const struct qgd_server *srv, const struct qgd_account *a, uint64_t more, char *msg,
			      size_t len);
/*
 * Whether A may take MORE bytes of models: 0, or -EDQUOT with the refusal,
 * naming user-models, in MSG (LEN bytes).  Root's loads are not bounded.
 */
int qgd_account_check_models(const struct qgd_server *srv, const struct qgd_account *a, uint64_t more, char *msg,
			     size_t len);
/* Whether A's graphs may hold MORE bytes of heap: 0, or -EDQUOT naming user-graph-metadata in MSG. */
int qgd_account_check_graphs(const struct qgd_server *srv, const struct qgd_account *a, uint64_t more, char *msg,
			     size_t len);

#endif /* QGD_ACCOUNTS_H */
