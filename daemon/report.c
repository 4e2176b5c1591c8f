/*
 * report.c - what the daemon tells about itself: the kernel chosen for
 * each layout (in a Welcome and in stats) and the stats a client asks for
 * (its counters, the sessions it may see, the models), paged to fit one
 * completion.  One of the daemon's edge files: it speaks protobuf.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "accounts.h"
#include "exec.h"
#include "graphs.h"
#include "hugepool.h"
#include "kernels.h"
#include "loop.h"
#include "models.h"
#include "qgraph.pb-c.h"
#include "reply.h"
#include "report.h"
#include "server.h"
#include "session.h"
#include "weights.h"

size_t qgd_kernel_choices(Qgraph__KernelChoice kc[QG_LAYOUT_COUNT], Qgraph__KernelChoice *kcp[QG_LAYOUT_COUNT])
{
	for (int l = 0; l < QG_LAYOUT_COUNT; l++) {
		qgraph__kernel_choice__init(&kc[l]);
		kc[l].layout = (char *)qg_type_name(qg_layout_type((enum qg_layout)l));
		kc[l].kernel = (char *)qg_kernel_for((enum qg_layout)l)->name;
		kc[l].reason = (char *)qg_kernel_reason((enum qg_layout)l);
		kcp[l] = &kc[l];
	}
	return QG_LAYOUT_COUNT;
}

/* Whether S's client sees the whole daemon in stats: root and members of stats-group do. */
static bool privileged(const struct qgd_session *s)
{
	const struct qgd_config *cfg = &s->srv->cfg;

	return s->uid == 0 || (cfg->has_stats_group && qgd_weights_in_group(s, cfg->stats_gid));
}

/*
 * Whether S's client may see session T in stats (its pid, uid and name,
 * which may hold a command line): its own user's sessions, and every
 * session for root and for members of stats-group.
 */
static bool may_see(const struct qgd_session *s, const struct qgd_session *t)
{
	return t->uid == s->uid || privileged(s);
}

/* Sessions and models one stats page lists at most (the completion's size bounds it first, mostly). */
#define STATS_PAGE 64

/* Bytes an entry of LEN bytes takes in a repeated message field: its tag, its length, itself. */
static size_t entry_bytes(size_t len)
{
	size_t n = 2;	/* a one-byte tag and the length's first byte */

	for (size_t v = len >> 7; v; v >>= 7)
		n++;
	return n + len;
}

/* The counters of SRV into ST (SC, QC and the histogram's arrays hold what it points at). */
static void stats_counters(const struct qgd_server *srv, Qgraph__Stats *st, Qgraph__StatusCount sc[16],
			   Qgraph__StatusCount *scp[16], Qgraph__QuotaCount qc[QGD_QUOTA_COUNT],
			   Qgraph__QuotaCount *qcp[QGD_QUOTA_COUNT], uint64_t latency[QGD_LATENCY_BOUNDS + 1])
{
	const struct qgd_stats *n = &srv->stats;

	st->version = PACKAGE_VERSION;
	st->uptime_ms = (qg_stamp_ns() - n->started_ns) / 1000000u;
	/* every status and quota, those at 0 too: a monitor sees the same series from the start */
	for (size_t k = 0; k < 16; k++) {
		st->requests += n->by_status[k];
		if (k > QGRAPH__STATUS__STATUS_DENIED && !n->by_status[k])
			continue;
		qgraph__status_count__init(&sc[st->n_completions]);
		sc[st->n_completions].status = (Qgraph__Status)k;
		sc[st->n_completions].count = n->by_status[k];
		scp[st->n_completions] = &sc[st->n_completions];
		st->n_completions++;
	}
	st->completions = scp;
	for (size_t k = 0; k < QGD_QUOTA_COUNT; k++) {
		qgraph__quota_count__init(&qc[st->n_quota_refusals]);
		qc[st->n_quota_refusals].quota = (char *)qgd_quota_names[k];
		qc[st->n_quota_refusals].count = n->quota[k];
		qcp[st->n_quota_refusals] = &qc[st->n_quota_refusals];
		st->n_quota_refusals++;
	}
	st->quota_refusals = qcp;
	st->sessions_dropped = n->sessions_dropped;
	st->n_batch_size_count = QGD_BATCH_SIZES;
	st->batch_size_count = (uint64_t *)n->batch_size;
	st->batch_wait_ns = n->batch_wait_ns;
	st->n_latency_le_ns = QGD_LATENCY_BOUNDS;
	st->latency_le_ns = (uint64_t *)qgd_latency_le_ns;
	memcpy(latency, n->latency, sizeof n->latency);
	st->n_latency_count = QGD_LATENCY_BOUNDS + 1;
	st->latency_count = latency;
	st->latency_sum_ns = n->latency_sum_ns;
}

void qgd_report_stats(struct qgd_session *s, uint64_t rid, const Qgraph__StatsRequest *sr)
{
	struct qgd_server *srv = s->srv;
	Qgraph__Completion c = QGRAPH__COMPLETION__INIT;
	Qgraph__Stats st = QGRAPH__STATS__INIT;
	Qgraph__KernelChoice kc[QG_LAYOUT_COUNT], *kcp[QG_LAYOUT_COUNT];
	Qgraph__SessionStats ss[STATS_PAGE], *ssp[STATS_PAGE];
	Qgraph__ModelStats ms[STATS_PAGE + 1], *msp[STATS_PAGE + 1];
	Qgraph__StatusCount sc[16], *scp[16];
	Qgraph__QuotaCount qc[QGD_QUOTA_COUNT], *qcp[QGD_QUOTA_COUNT];
	uint64_t latency[QGD_LATENCY_BOUNDS + 1];
	int all = sr && sr->all_sessions;
	uint32_t first_session = sr ? sr->first_session : 0, first_model = sr ? sr->first_model : 0;
	size_t n = 0;

	qgd_roster_each(srv, t) {
		st.sessions += t->state == QGD_READY;
		st.handshaking += t->state == QGD_HANDSHAKE;
		st.sessions_hidden += t->state == QGD_READY && !may_see(s, t);
	}
	st.pinned_bytes = qgd_weights_pinned_bytes(srv);
	st.pool_bytes = qg_hugepool_info(srv->pool)->bytes;
	st.pool_used = qg_hugepool_in_use_total(srv->pool);
	st.plans = qgd_graphs_count(srv);
	st.graphs_run = srv->stats.graphs_run;
	st.weights_uploaded = srv->stats.weights_uploaded;
	st.digest_misses = srv->stats.digest_misses;
	st.mul_mat_interleaved = srv->stats.mul_mat_interleaved;
	st.pool_kind = (char *)qgd_exec_pool_kind(srv);
	st.loop = (char *)qg_loop_kind_name(srv->loop);
	st.threads = (uint32_t)qgd_exec_threads(srv);
	st.batch_max = srv->cfg.batch_max;
	st.batch_window_us = srv->cfg.batch_window_us;
	if (privileged(s)) {
		st.weights_stored = qgd_weights_stored_count(srv);
		st.weights_referenced_bytes = qgd_weights_referenced_bytes(srv);
	} else {
		/* what this user holds: the whole daemon's would tell when another user's upload was deduplicated */
		st.weights_stored = qgd_weights_held_by(srv, s->uid);
		qgd_roster_each(srv, t)
			for (size_t i = 0; t->uid == s->uid && i < t->n_weights; i++)
				st.weights_referenced_bytes += t->weights[i].bytes;	/* bytes, as the daemon's figure */
	}
	st.n_kernels = qgd_kernel_choices(kc, kcp);
	st.kernels = kcp;
	stats_counters(srv, &st, sc, scp, qc, qcp, latency);
	st.account_model_bytes = s->acct->model_bytes;	/* the caller's own account */
	st.account_weight_bytes = s->acct->weight_bytes;
	st.account_graph_bytes = s->acct->graph_bytes;
	c.request_id = rid;
	c.stats = &st;
	/* what the page holds before its lists, with the paging fields at their largest */
	st.more = 1;
	st.next_session = st.next_model = UINT32_MAX;
	size_t used = qgraph__completion__get_packed_size(&c) + 4;	/* 4: the Stats' own length may grow */
	size_t room = used < QGD_MAX_COMPLETION ? QGD_MAX_COMPLETION - used : 0;
	st.more = 0;
	st.next_session = st.next_model = 0;

	uint32_t v = 0;	/* sessions listed so far, this page's and the earlier pages' */
	qgd_roster_each(srv, t) {
		if (t->state != QGD_READY || !may_see(s, t) || (!all && t != s) || v++ < first_session)
			continue;
		qgraph__session_stats__init(&ss[n]);
		ss[n].session_id = t->id;
		ss[n].pid = (uint32_t)t->pid;
		ss[n].uid = (uint32_t)t->uid;
		ss[n].client_name = t->name;
		ss[n].arena_bytes = t->rg.layout.arena_bytes;
		ss[n].weight_bytes = t->weight_bytes;
		ss[n].graphs = (uint32_t)t->n_graphs;
		ss[n].in_flight = t->job != NULL;
		ss[n].completed = t->completed;
		ss[n].memory_bytes = qg_hugepool_in_use(srv->pool, t->id) + t->graph_bytes;
		size_t e = entry_bytes(qgraph__session_stats__get_packed_size(&ss[n]));
		if (n == STATS_PAGE || e > room) {
			st.more = 1;
			st.next_session = v - 1;
			st.next_model = first_model;
			break;
		}
		room -= e;
		ssp[n] = &ss[n];
		n++;
	}
	st.n_session = n;
	st.session = ssp;
	if (!st.more) {
		struct qgd_model_info mi[STATS_PAGE + 1];
		size_t m = qgd_models_list(s, privileged(s), first_model, mi, STATS_PAGE + 1), k;
		for (k = 0; k < m; k++) {
			qgraph__model_stats__init(&ms[k]);
			ms[k].name = (char *)mi[k].name;
			ms[k].tensors = mi[k].tensors;
			ms[k].bytes = mi[k].bytes;
			ms[k].uid = mi[k].uid;
			msp[k] = &ms[k];
		}
		for (k = 0; k < m && k < STATS_PAGE; k++) {
			size_t e = entry_bytes(qgraph__model_stats__get_packed_size(&ms[k]));
			if (e > room)
				break;
			room -= e;
		}
		st.n_model = k;
		st.model = msp;
		if (k < m) {
			st.more = 1;
			st.next_session = v;
			st.next_model = first_model + (uint32_t)k;
		}
	}
	qgd_reply_complete(s, &c);
}
