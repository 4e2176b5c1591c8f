/*
 * qgraphd.h - the daemon's own structures, shared by its files and no one
 * else (the engine never includes anything from daemon/).
 */
#ifndef QGRAPHD_H
#define QGRAPHD_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kernels.h"
#include "log.h"
#include "loop.h"
#include "priv.h"
#include "region.h"
#include "ring.h"
#include "hotpath.h"
#include "stamp.h"
#include "wire.h"

struct qg_buft;
struct qg_hugepool;

#define QGD_MAX_COMPLETION QG_MAX_COMPLETION	/* room kept free in the completion ring per request */
#define QGD_WEIGHTS_NAME_MAX 64
#define QGD_MAX_SHARE_GROUPS 64

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
	uint32_t max_graphs;		/* registered graphs per session */
	uint64_t max_message;		/* bytes of one request record */
	uint32_t max_wait_ms;		/* the longest a request may wait for its events */
	int require_hugepages;		/* fail unless the pool is on hugetlb pages */
	char preload[PATH_MAX];		/* a GGUF model to hold from start-up ("": none) */
	struct qgd_priv_config priv;	/* user, group, socket mode, access policy */
	char socket_store[PATH_MAX];	/* socket_path, when the daemon chose or was told it */
};


/* One matrix in pinned memory, shared by every session holding a handle to it (weights.c). */
struct qgd_stored {
	uint64_t hash;
	enum qg_type type;
	int64_t rows, cols;
	void *data;
	size_t bytes;
	uint32_t refs;			/* handles to it, in every session, and models holding it */
	uint32_t model_refs;		/* models holding it: it is theirs, every client may open it */
	uid_t owner;			/* who uploaded it first */
	uint64_t owner_in_share_group;	/* bit i: the owner is in cfg.share_gids[i] */
	char name[QGD_WEIGHTS_NAME_MAX];	/* "" when unnamed */
	unsigned char digest[32];	/* SHA-256 of its values in ggml's layout of DIGEST_TYPE ... */
	enum qg_type digest_type;	/* ... Q4_0 for every Q4_0 layout, else TYPE */
	bool has_digest;		/* false if there was no memory to compute it */
	struct qgd_stored *next;
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

/*
 * A weight matrix arriving chunk by chunk, converted as it arrives into
 * DST, pinned memory of the stored size taken when the upload opens
 * (requests.c).  No copy of the source is kept: STAGE holds what the next
 * conversion step waits for (a part of a 32-value block, a row group for
 * a repack), never more than one row group of the stored matrix, and
 * BOUNCE a bounded window of f32 values copied out of the arena.
 */
struct qgd_upload {
	uint64_t id;
	enum qg_type src_type, target_type;
	int64_t rows, cols;
	size_t bytes, received;		/* of the source */
	void *dst;			/* DST_BYTES, from qgd_weights_alloc */
	size_t dst_bytes;
	unsigned char *stage, *bounce;
	size_t stage_bytes, staged, bounced;
	uint64_t values_done;		/* f32 sources: values converted so far */
	char name[QGD_WEIGHTS_NAME_MAX];
	int model;			/* for the model this session is loading (models.c) */
};

struct qgd_graph;
struct qgd_job;

/* The quotas and limits a refusal may name (reply.c's qgd_quota_names), and "other". */
#define QGD_QUOTA_COUNT 13
/* The bounds of the latency histogram (reply.c's qgd_latency_le_ns); one more bucket counts what passes them. */
#define QGD_LATENCY_BOUNDS 19

/* What the daemon counts for its stats since it started (reply.c and server.c count; the loop's thread alone). */
struct qgd_counters {
	uint64_t started_ns;
	uint64_t by_status[16];		/* completions by Qgraph__Status */
	uint64_t quota[QGD_QUOTA_COUNT];	/* refusals by the quota they name */
	uint64_t sessions_dropped;	/* served sessions the daemon ended (qgd_session_drop) */
	uint64_t latency[QGD_LATENCY_BOUNDS + 1];	/* graphs by total time */
	uint64_t latency_sum_ns;
};
extern const char *const qgd_quota_names[QGD_QUOTA_COUNT];
extern const uint64_t qgd_latency_le_ns[QGD_LATENCY_BOUNDS];

enum qgd_session_state {
	QGD_HANDSHAKE = 0,
	QGD_READY,
	QGD_DEAD,
};

struct qgd_session {
	uint64_t id;
	enum qgd_session_state state;
	int sock;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	gid_t *groups;			/* supplementary groups, where the kernel told them */
	size_t n_groups;
	char name[64];
	uint64_t started_ms;
	struct qgd_server *srv;
	struct qg_watch *sock_watch, *bell_watch;
	int memfd, bell;
	struct qg_region_layout layout;	/* our own copy; never read back */
	unsigned char *base;
	struct qg_region_header *hdr;
	struct qg_ring submit, complete;
	struct qg_event_slot *events;
	struct qg_event *ev;		/* the trusted events, each mirrored to its slot in EVENTS */
	unsigned char *arena;
	unsigned char *rec;		/* the record being served, copied out */
	struct qg_wire_arena decode;
	Qgraph__Request *req;		/* decoded from REC, not yet answered */
	uint64_t req_started_ns;
	uint64_t wait_until_ns;		/* REQ waits for events until then (0: it does not wait) */
	uint64_t last_run;		/* the registered graph its last Run named: likely the next one's too */
	struct qgd_job *job;		/* in the executor, at most one */
	struct qgd_weights *weights;
	size_t n_weights, cap_weights;
	struct qgd_graph **graphs;
	size_t n_graphs;
	uint64_t graph_bytes;		/* heap its registered graphs hold (exec.c), counted in client-memory */
	struct qgd_upload upload;
	uint64_t next_handle;
	uint64_t completed, failed;
	uint64_t weight_bytes;
	struct qgd_ratelimit rl;	/* for its refusals */
	int announced;			/* its start was logged: its end will be too */
	const char *refused;		/* refused when it connected, and told: why, for the log (server.c) */
	struct qg_buft *buft;		/* this session's pieces of the pool, for intermediates */
	struct qgd_session *next;
};

struct qgd_server {
	struct qgd_config cfg;
	struct qg_loop *loop;
	int listen_fd, lock_fd;
	int activated;			/* listen_fd came from the service manager (LISTEN_FDS): never unlinked */
	int signal_fd, timer_fd;
	struct qg_watch *listen_watch, *signal_watch, *timer_watch;
	int reserve_fd;			/* /dev/null, given up to take a connection when descriptors run out */
	uint64_t accept_paused_ms;	/* when accepting stopped for want of descriptors (0: it did not) */
	struct qgd_ratelimit fd_rl;	/* the log line about it */
	struct qgd_session *sessions;
	struct qgd_session *rr;		/* where the fair scan starts next */
	uint32_t n_sessions;
	int loop_cpu;			/* the CPU the loop last found itself on (-1: not known); told to every session */
	unsigned beside;		/* answers in a row to BESIDE_SESSION's client, on the loop's CPU */
	const struct qgd_session *beside_session;
	bool move_loop;			/* reply.c asks the loop to leave the CPU it shares with BESIDE_SESSION's client */
	uint64_t moved_ms;		/* when the loop last moved away from a client */
	uint64_t next_session_id;
	int stopping;
	uint64_t stop_deadline_ms;
	uint64_t graphs_run;
	struct qgd_counters counters;
	uint64_t mul_mat_interleaved;	/* MUL_MAT nodes run on interleaved weights, since start */
	uint64_t weights_uploaded;	/* uploads completed, since start (shared ones too) */
	uint64_t pinned_bytes;
	struct qg_hugepool *pool;	/* weights and intermediates (memory.c) */
	struct qgd_stored *stored;	/* every matrix in pinned memory */
	struct qgd_model *models;	/* models held, and being loaded (models.c) */
	uint32_t n_stored;
	uint64_t weights_referenced;	/* bytes of every handle of every session */
	struct qgd_exec *exec;
	char cpu_features[256];
	/* SIGHUP: read the configuration again and apply what may change at run time (set by main) */
	void (*reload)(struct qgd_server *srv);
};

/* server.c */
/*
 * Bind the socket, without listening (before the privileges are dropped):
 * until qgd_server_start a client's connect() is refused at once rather
 * than left waiting for a daemon that cannot serve yet.  0 or -1 (logged).
 */
int qgd_server_bind(struct qgd_server *srv);
/*
 * Serve on FD, a listening socket the service manager passed (socket
 * activation): it must be a Unix SOCK_SEQPACKET socket that listens; the
 * socket path becomes its address.  0 or -1 (logged).
 */
int qgd_server_adopt(struct qgd_server *srv, int fd);
/*
 * After a reload: refuse or drop every connection the access policy no
 * longer allows (a served session is dropped, with the reason logged).
 */
void qgd_server_recheck(struct qgd_server *srv);
/* Listen (unless the socket was passed) and watch the socket and the signals in the loop.  0 or -1 (logged). */
int qgd_server_start(struct qgd_server *srv);
int qgd_server_run(struct qgd_server *srv);

/* The daemon's clock: CLOCK_MONOTONIC, from the CPU's counter where it can be (stamp.h). */
static inline uint64_t qgd_now_ns(void)
{
	return qg_stamp_ns();
}

static inline uint64_t qgd_now_ms(void)
{
	return qg_stamp_ns() / 1000000u;
}

/* session.c */
/* A session for the client connected on FD (its credentials read), or NULL. */
struct qgd_session *qgd_session_new(struct qgd_server *srv, int fd);
/* Free S and everything it holds; its event waiters see an error.  NULL is fine. */
void qgd_session_free(struct qgd_session *s);
/* Take and serve S's next request if there is one and room for its answer: 1 if it did, 0 if not. */
int qgd_session_step(struct qgd_session *s);
/* True if S has a request waiting in its ring. */
int qgd_session_pending(struct qgd_session *s);

/* reply.c: what every file above may do to a session's client; calls nothing above it */
/* End S (logged with WHY, once; counted as dropped if it was served); the server frees it at its next reap. */
void qgd_session_drop(struct qgd_session *s, const char *why);
/* As qgd_session_drop, for a session its client ended (hung up): not counted as dropped. */
void qgd_session_hung_up(struct qgd_session *s, const char *why);
/* Count a refusal whose message MSG names its quota ("quota KEY: ..." or "KEY: ..."). */
void qgd_count_quota(struct qgd_server *srv, const char *msg);
/* Post completion C to S's ring and wake its client if it sleeps; a broken ring drops S. */
void qgd_session_complete(struct qgd_session *s, Qgraph__Completion *c);
/* Answer request REQUEST_ID of S with status ST and the message FMT (logged, rate limited). */
void qgd_session_fail(struct qgd_session *s, uint64_t request_id, Qgraph__Status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Record each of the N events EV on S's event table, with STATUS. */
void qgd_session_record_events(struct qgd_session *s, Qgraph__EventRef **ev, size_t n, int32_t status);

/* memory.c: the pool, mapped and locked before the privilege drop */
int qgd_memory_init(struct qgd_server *srv);
/*
 * The NUMA nodes (bit i: node i) under SYSFS that the pool should spread
 * over: those with memory that hold a CPU of CPUS (every memory node when
 * CPUS is NULL or names none of them); 0 on a machine of one node (or
 * when sysfs does not say).
 */
uint64_t qgd_hugepages_nodes(const char *sysfs, const char *cpus);
/*
 * Reserve hugepages under SYSFS so that PAGES 2 MiB pages are free: in the
 * global count when NODES is 0, else each node of NODES its share.  Never
 * lowers a count; logs what it added.
 */
void qgd_hugepages_reserve(const char *sysfs, long pages, uint64_t nodes);
void qgd_memory_fini(struct qgd_server *srv);

/* weights.c */
/* Pinned memory for BYTES of weights being converted, or NULL; qgd_weights_discard() gives it back. */
void *qgd_weights_alloc(struct qgd_server *srv, size_t bytes);
void qgd_weights_discard(struct qgd_server *srv, void *data, size_t bytes);
/*
 * Store the converted matrix DATA (from qgd_weights_alloc, consumed) for S
 * under a new handle: shared with an identical matrix S may share, or
 * stored anew; NAME (may be NULL or "") names it.  0 and the handle in
 * *OUT, or -ENOMEM, -EEXIST (the name is taken; *WHY says how).
 */
int qgd_weights_add(struct qgd_session *s, enum qg_type type, int64_t rows, int64_t cols, void *data,
		    size_t bytes, const char *name, struct qgd_weights **out, const char **why);
/* A new handle of S to the weights named NAME that S may share.  0, -ENOENT or -ENOMEM. */
int qgd_weights_open(struct qgd_session *s, const char *name, struct qgd_weights **out);
/*
 * A new handle of S to stored weights whose values in ggml's layout of TYPE
 * (Q4_0 for every Q4_0 layout) have the SHA-256 DIGEST and are ROWS x COLS,
 * and that S may share.  0, -ENOENT (none), -ENOMEM.
 */
int qgd_weights_open_digest(struct qgd_session *s, enum qg_type type, int64_t rows, int64_t cols,
			    const unsigned char digest[32], struct qgd_weights **out);
struct qgd_weights *qgd_weights_find(struct qgd_session *s, uint64_t handle);
/* Drop handle W of S (the matrix goes when its last handle does). */
void qgd_weights_release(struct qgd_session *s, struct qgd_weights *w);
void qgd_weights_release_all(struct qgd_session *s);
/* True if S's client is in group G, as primary or supplementary group (what sharing and stats go by). */
int qgd_weights_in_group(const struct qgd_session *s, gid_t g);
/*
 * The layout to store Q4_0 weights of ROWS rows in: this CPU's best, else
 * the 4-row layout with the same 8-byte interleave when only 4 rows
 * divide, else plain Q4_0.
 */
enum qg_type qgd_weights_best_layout(int64_t rows);
/* A model's hold on E: every client may open it by name while one lasts. */
void qgd_weights_pin(struct qgd_stored *e);
/* Let go of a model's hold on E (freed with its last holder). */
void qgd_weights_unpin(struct qgd_server *srv, struct qgd_stored *e);
/*
 * Store the converted matrix DATA (from qgd_weights_alloc, consumed) for
 * no session (a model the daemon loads itself), pinned once for the
 * caller's model; identical bytes another model holds are shared.  0 with
 * *OUT, or -ENOMEM.
 */
int qgd_weights_store_pinned(struct qgd_server *srv, enum qg_type type, int64_t rows, int64_t cols, void *data,
			     size_t bytes, struct qgd_stored **out);
/* A new handle of S to stored matrix E (a model's).  0 or -ENOMEM. */
int qgd_weights_open_stored(struct qgd_session *s, struct qgd_stored *e, struct qgd_weights **out);

/* requests.c */
/* The kernel chosen for each layout, for a Welcome or a Stats (KC holds them, KCP points at them). */
size_t qgd_kernel_choices(Qgraph__KernelChoice kc[QG_LAYOUT_COUNT], Qgraph__KernelChoice *kcp[QG_LAYOUT_COUNT]);
void qgd_request_serve(struct qgd_session *s);
/*
 * True while S's request waits for events that have not been recorded and
 * its time is not up (nor the daemon stopping): the loop neither serves it
 * nor counts it as work until then, and sleeps no later than
 * S->wait_until_ns (qgd_exec_sleep_ms).  Reads the clock only for such a
 * request.
 */
int qgd_request_waiting(struct qgd_session *s);
void qgd_session_release_all(struct qgd_session *s);

#endif /* QGRAPHD_H */
