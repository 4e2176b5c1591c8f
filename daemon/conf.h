/*
 * conf.h - qgraphd's settings: one table serves the command line and the
 * configuration file (/etc/qgraph/qgraphd.conf, see qgraphd.conf(5)), so
 * that every key of the file is also an option and both are checked by
 * the same code.  A bad file is refused with its name and line number.
 *
 * (Named conf, not config: the build's own config.h must stay the one
 * that "config.h" finds.)
 */
#ifndef QGD_CONF_H
#define QGD_CONF_H

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "priv.h"

#ifndef QGD_CONF_FILE
#define QGD_CONF_FILE "/etc/qgraph/qgraphd.conf"	/* the build names $(sysconfdir)/qgraph/qgraphd.conf */
#endif
#define QGD_CONF_MAX_BYTES (1u << 20)	/* a larger file is refused */
#define QGD_CONF_MAX_LINE 4096u		/* so is a longer line */

#define QGD_MAX_SHARE_GROUPS 64

/* batch-max's largest value: the graphs the executor hands the backend at once */
#define QGD_BATCH_MAX 16

/* Every setting: what the command line and the file set, and what the daemon derived from them. */
struct qgd_config {
	const char *socket_path;
	int foreground;
	int log_level;
	int ready_fd;
	int force_epoll;
	uint64_t pool_bytes;		/* memory for weights */
	uint64_t arena_bytes;		/* a session's arena unless it asks */
	uint64_t max_arena_bytes;
	uint32_t ring_bytes;
	uint32_t event_count;
	uint32_t max_nodes;
	uint32_t max_sessions;
	uint32_t handshake_ms;
	uint32_t graph_timeout_ms;
	uint32_t poll_us;		/* how long to poll rings after activity before sleeping */
	uint32_t batch_max;		/* graphs of sessions on shared weights run as one batch, at most */
	uint32_t batch_window_us;	/* how long a graph may wait for company; 0: never */
	const char *cpus;		/* CPU list the compute threads are pinned to; NULL: every usable CPU */
	char cpus_store[256];
	int threads;			/* compute threads, the executor's included; 0: one per CPU */
	gid_t share_gids[QGD_MAX_SHARE_GROUPS];	/* groups whose members share weights */
	size_t n_share_gids;
	gid_t stats_gid;		/* members see every user's sessions in stats (has_stats_group) */
	int has_stats_group;
	int test_hash_collide;		/* tests only: every weights hash collides */
	int reserve_hugepages;		/* as root, raise vm.nr_hugepages for the pool */
	/* quotas (each refusal names its key) */
	uint32_t max_sessions_per_user;
	uint32_t max_handshakes;	/* connections that have not sent their Hello, all users */
	uint32_t handshakes_per_user;	/* ... of one uid */
	uint64_t total_arena_bytes;	/* all sessions' arenas together */
	uint64_t client_weights;	/* weight bytes a session holds; 0: the pool's size */
	uint64_t client_memory;		/* pool bytes a session's graphs hold; 0: the pool's size */
	uint64_t user_weights;		/* pool bytes all of one user's sessions' weights reach; 0: no bound */
	uint64_t user_models;		/* pool bytes of the models one user loaded; 0: half the pool */
	uint64_t user_graph_metadata;	/* heap all of one user's registered graphs hold; 0: the pool's size */
	uint32_t max_graphs;		/* registered graphs per session */
	uint64_t max_message;		/* bytes of one request record */
	uint32_t max_wait_ms;		/* the longest a request may wait for its events */
	int require_hugepages;		/* fail unless the pool is on hugetlb pages */
	char preload[PATH_MAX];		/* a GGUF model to hold from start-up ("": none) */
	struct qgd_priv_config priv;	/* user, group, socket mode, access policy */
	char socket_store[PATH_MAX];	/* socket_path, when the daemon chose or was told it */
};

/* Fill CFG with the defaults. */
void qgd_conf_defaults(struct qgd_config *cfg);

/*
 * Set the setting NAME (a long option, which is also the file's key) to
 * VALUE; VALUE NULL means a flag given without a value ("yes").  Returns 0;
 * -ENOENT for an unknown NAME; -EINVAL for a bad value, with the reason in
 * ERR (ERRLEN bytes).
 */
int qgd_conf_set(struct qgd_config *cfg, const char *name, const char *value, char *err, size_t errlen);

/*
 * Parse LEN bytes of configuration text (FILE names it in messages) into
 * CFG: "key = value" lines, '#' comments, blank lines.  An unknown key, a
 * key given twice, a missing value, a bad value, a line longer than
 * QGD_CONF_MAX_LINE, a NUL or another control character refuses the whole
 * text: returns -EINVAL with "FILE:LINE: reason" in ERR.
 */
int qgd_conf_parse(struct qgd_config *cfg, const char *file, const char *text, size_t len, char *err,
		   size_t errlen);

/*
 * Read and parse the file at PATH (a regular file of at most
 * QGD_CONF_MAX_BYTES).  A missing file is 0 when MISSING_OK (and *FOUND is
 * set to 0), else an error.  0 or -errno with the reason in ERR.
 */
int qgd_conf_load(struct qgd_config *cfg, const char *path, int missing_ok, int *found, char *err, size_t errlen);

/* Check what no single setting can (arena-size <= max-arena, group of user).  0 or -EINVAL with ERR. */
int qgd_conf_finish(struct qgd_config *cfg, char *err, size_t errlen);

/*
 * getopt_long's table: every setting (val = BASE + its index; flags take
 * an optional value, the rest a required one), then the NEXTRA entries of
 * EXTRA, then the terminator, in OUT (CAP entries).  Returns the count
 * without the terminator, or 0 if CAP is too small.
 */
size_t qgd_conf_options(struct option *out, size_t cap, int base, const struct option *extra, size_t nextra);

/* The getopt short-option string of the settings ("fs:l:"), to which the caller adds its own. */
const char *qgd_conf_shortopts(void);

/* The name of setting I (val - BASE of qgd_conf_options), or NULL. */
const char *qgd_conf_name(int i);

/* The setting named by short option C, or -1. */
int qgd_conf_by_short(int c);

/* Write every setting of CFG that the file may hold, in the file's syntax ("#key =" for one left at its default). */
void qgd_conf_dump(const struct qgd_config *cfg, FILE *f);

/*
 * A reload: take from NEXT into CUR every setting a running daemon can
 * change (log level, quotas, limits, time-outs, allow-users, allow-groups,
 * stats-group); NOTE (may be NULL) is called for each setting that
 * differs, with its values as the file writes them and whether it was
 * applied (0: it needs a restart, and CUR keeps its value).
 */
void qgd_conf_apply(struct qgd_config *cur, const struct qgd_config *next,
		    void (*note)(const char *name, const char *from, const char *to, int applied));

/* 1 if the setting NAME needs a restart to change, 0 if a reload applies it, -1 if there is none. */
int qgd_conf_restart_key(const char *name);

#endif /* QGD_CONF_H */
