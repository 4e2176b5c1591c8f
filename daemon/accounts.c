/*
 * accounts.c - what each user holds in the daemon.
 *
 * A session's quotas (client-weights, client-memory) bound one session,
 * but a user may hold many sessions at once, and a model it loads outlives
 * the session that loaded it.  So the daemon keeps an account per uid:
 * each session holds its user's account, and so does each model the user
 * loaded, until it is unloaded; the account goes with its last holder.
 * What a user holds across its sessions and past them is counted there
 * and bounded by the per-user quotas (user-weights, user-models,
 * user-graph-metadata).
 *
 * Pool bytes are counted as the pool hands them out, in whole pieces: a
 * 128-byte matrix takes a 4 KiB piece, and that is what it costs.
 *
 * Models the daemon preloads belong to no account.  Root's loads are
 * counted in its account but not bounded: root may fill the pool anyway.
 *
 * Accounts are few (one per user with something held) and looked up only
 * when a session starts and a model load begins: a list will do.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "accounts.h"
#include "hugepool.h"
#include "server.h"

struct qgd_account *qgd_account_hold(struct qgd_server *srv, uid_t uid)
{
	struct qgd_account *a;

	for (a = srv->accounts; a; a = a->next)
		if (a->uid == uid)
			break;
	if (!a) {
		if (!(a = calloc(1, sizeof *a)))
			return NULL;
		a->uid = uid;
		a->next = srv->accounts;
		srv->accounts = a;
	}
	a->holders++;
	return a;
}

void qgd_account_drop(struct qgd_server *srv, struct qgd_account *a)
{
	if (!a || --a->holders)
		return;
	/* its last session and its last model are gone: nothing may still be counted */
	if (a->model_bytes || a->weight_bytes || a->graph_bytes)
		qgd_warn("uid %u: its account ends with %llu bytes of models, %llu of weights, %llu of graphs counted",
			 (unsigned)a->uid, (unsigned long long)a->model_bytes, (unsigned long long)a->weight_bytes,
			 (unsigned long long)a->graph_bytes);
	for (struct qgd_account **p = &srv->accounts; *p; p = &(*p)->next)
		if (*p == a) {
			*p = a->next;
			break;
		}
	free(a);
}

uint64_t qgd_account_pieces(const struct qgd_server *srv, uint64_t bytes)
{
	uint64_t align = srv->pool ? qg_hugepool_alignment(srv->pool) : 4096;

	if (!bytes)
		bytes = 1;	/* the pool hands out a piece even then */
	if (bytes > UINT64_MAX - align)
		return UINT64_MAX;
	return (bytes + align - 1) / align * align;
}

/* The pool's bytes as mapped (pool-size rounded up to its pages): what a quota left at its default allows. */
static uint64_t pool_bytes(const struct qgd_server *srv)
{
	return srv->pool ? qg_hugepool_info(srv->pool)->bytes : srv->cfg.pool_bytes;
}

int qgd_account_check_weights(const struct qgd_server *srv, const struct qgd_account *a, uint64_t more, char *msg,
			      size_t len)
{
	uint64_t limit = srv->cfg.user_weights;

	/* off unless set: a matrix shared by a user's sessions counts once in each, as client-weights counts it */
	if (!a || !limit || (a->weight_bytes <= limit && more <= limit - a->weight_bytes))
		return 0;
	snprintf(msg, len,
		 "quota user-weights: uid %u's sessions hold %llu bytes of weights (in pool pieces), %llu more "
		 "would pass %llu",
		 (unsigned)a->uid, (unsigned long long)a->weight_bytes, (unsigned long long)more,
		 (unsigned long long)limit);
	return -EDQUOT;
}

int qgd_account_check_models(const struct qgd_server *srv, const struct qgd_account *a, uint64_t more, char *msg,
			     size_t len)
{
	uint64_t limit = srv->cfg.user_models ? srv->cfg.user_models : pool_bytes(srv) / 2;

	if (!a || a->uid == 0 || (a->model_bytes <= limit && more <= limit - a->model_bytes))
		return 0;
	snprintf(msg, len,
		 "quota user-models: uid %u holds %llu bytes of models, %llu more would pass %llu (unload one first)",
		 (unsigned)a->uid, (unsigned long long)a->model_bytes, (unsigned long long)more,
		 (unsigned long long)limit);
	return -EDQUOT;
}

int qgd_account_check_graphs(const struct qgd_server *srv, const struct qgd_account *a, uint64_t more, char *msg,
			     size_t len)
{
	uint64_t limit = srv->cfg.user_graph_metadata ? srv->cfg.user_graph_metadata : pool_bytes(srv);

	if (!a || (a->graph_bytes <= limit && more <= limit - a->graph_bytes))
		return 0;
	snprintf(msg, len,
		 "quota user-graph-metadata: uid %u's sessions hold %llu bytes of graph metadata, %llu more "
		 "would pass %llu",
		 (unsigned)a->uid, (unsigned long long)a->graph_bytes, (unsigned long long)more,
		 (unsigned long long)limit);
	return -EDQUOT;
}
