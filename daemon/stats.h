/*
 * stats.h - what the daemon counts for its stats since it started (struct
 * qgd_stats): reply.c counts the completions, refusals, drops and
 * latencies, exec.c the graphs run, upload.c the uploads, server.c sets
 * the start; report.c alone reads them, to tell a client.  All on the
 * loop's thread.  No count decides what the daemon does: it only reports.
 */
#ifndef QGD_STATS_H
#define QGD_STATS_H

#include <stdint.h>

/* The quotas and limits a refusal may name (reply.c's qgd_quota_names), and "other". */
#define QGD_QUOTA_COUNT 16
/* Sizes of batch the histogram tells apart (1 to this); the last counts larger ones too. */
#define QGD_BATCH_SIZES 16
/* The bounds of the latency histogram (reply.c's qgd_latency_le_ns); one more bucket counts what passes them. */
#define QGD_LATENCY_BOUNDS 19

struct qgd_stats {
	uint64_t started_ns;
	uint64_t by_status[16];		/* completions by Qgraph__Status */
	uint64_t quota[QGD_QUOTA_COUNT];	/* refusals by the quota they name */
	uint64_t sessions_dropped;	/* served sessions the daemon ended (qgd_reply_drop) */
	uint64_t latency[QGD_LATENCY_BOUNDS + 1];	/* graphs by total time */
	uint64_t latency_sum_ns;
	uint64_t graphs_run;
	uint64_t mul_mat_interleaved;	/* MUL_MAT nodes run on interleaved weights */
	uint64_t weights_uploaded;	/* uploads completed (shared ones too) */
	uint64_t digest_misses;		/* OpenWeights by digest that found nothing (not errors) */
	uint64_t batch_size[QGD_BATCH_SIZES];	/* runs on the pool by the graphs run as one (1: alone) */
	uint64_t batch_wait_ns;		/* time graphs waited for company (batch-window-us) */
};

#endif /* QGD_STATS_H */
