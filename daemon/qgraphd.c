/*
 * qgraphd.c - the daemon's entry: options, start-up, and the loop.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "exec.h"
#include "kernels.h"
#include "paths.h"
#include "cpulist.h"
#include "qgraphd.h"
#include "sock.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: qgraphd [OPTION]...\n"
		"Run quantized matrix graphs for the processes of this machine.\n"
		"\n"
		"  -f, --foreground       stay in the foreground, log to stderr (else syslog)\n"
		"  -s, --socket PATH      listen on PATH (default: $QGRAPH_SOCKET, else\n"
		"                         /run/qgraph/qgraphd.sock as root,\n"
		"                         $XDG_RUNTIME_DIR/qgraph/qgraphd.sock otherwise)\n"
		"      --pool-size SIZE   memory for weights (default 1G)\n"
		"      --arena-size SIZE  a session's tensor arena unless it asks (default 64M)\n"
		"      --max-arena SIZE   the largest arena a session may ask for (default 1G)\n"
		"      --max-nodes N      tensors per graph (default 4096)\n"
		"      --max-sessions N   clients at once (default 256)\n"
		"      --graph-timeout MS a graph that runs longer is cancelled (default 60000)\n"
		"      --cpus LIST        run graphs on these CPUs (\"0-3,8\"; default: any)\n"
		"      --threads N        compute threads (default: one per CPU of --cpus, or\n"
		"                         of the machine)\n"
		"      --share-group GROUP  clients in GROUP share identical weights and their\n"
		"                         names with each other (repeatable; a user always\n"
		"                         shares with itself)\n"
		"      --poll-us US       poll the rings this long after activity (default 50)\n"
		"      --epoll            use epoll even where io_uring works\n"
		"  -l, --log-level LEVEL  error, warn, info (default) or debug\n"
		"      --ready-fd N       write \"READY\\n\" to fd N once clients are accepted\n"
		"      --info             print the CPU's features and chosen kernels, and exit\n"
		"      --test-hash-collide  for tests: make every weights hash collide (the\n"
		"                         bytes are still compared)\n"
		"  -h, --help             show this help\n"
		"  -V, --version          show the version\n"
		"\n"
		"SIZE takes a K, M or G suffix.  See qgraphd(8).\n");
}

/* Parse SIZE with an optional K/M/G suffix into *OUT; 0 or -1. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = 0;

	if (errno || end == s || *s == '-')
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 0: break;
	default: return -1;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);

	if (errno || end == s || *end || *s == '-' || v < lo || v > hi)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static void print_info(void)
{
	const struct qg_cpu *c = qg_cpu_features();

	printf("qgraphd %s\n", PACKAGE_VERSION);
	printf("cpu: neon=%d dotprod=%d i8mm=%d sve=%d (vector %d bytes) avx2=%d avx512=%d avx512vnni=%d\n",
	       c->neon, c->dotprod, c->i8mm, c->sve, c->sve_bytes, c->avx2, c->avx512, c->avx512vnni);
	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		printf("%-9s %-22s %s\n", qg_type_name(qg_layout_type((enum qg_layout)l)),
		       qg_kernel_for((enum qg_layout)l)->name, qg_kernel_reason((enum qg_layout)l));
	printf("best weight layout: %s\n", qg_type_name(qg_best_weight_type()));
}

enum {
	OPT_POOL = 256, OPT_ARENA, OPT_MAX_ARENA, OPT_MAX_NODES, OPT_MAX_SESSIONS,
	OPT_GRAPH_TIMEOUT, OPT_POLL, OPT_EPOLL, OPT_READY_FD, OPT_INFO, OPT_SHARE_GROUP, OPT_TEST_HASH_COLLIDE,
	OPT_CPUS, OPT_THREADS,
};

static const struct option options[] = {
	{ "foreground", no_argument, NULL, 'f' },
	{ "socket", required_argument, NULL, 's' },
	{ "pool-size", required_argument, NULL, OPT_POOL },
	{ "arena-size", required_argument, NULL, OPT_ARENA },
	{ "max-arena", required_argument, NULL, OPT_MAX_ARENA },
	{ "max-nodes", required_argument, NULL, OPT_MAX_NODES },
	{ "max-sessions", required_argument, NULL, OPT_MAX_SESSIONS },
	{ "graph-timeout", required_argument, NULL, OPT_GRAPH_TIMEOUT },
	{ "poll-us", required_argument, NULL, OPT_POLL },
	{ "epoll", no_argument, NULL, OPT_EPOLL },
	{ "log-level", required_argument, NULL, 'l' },
	{ "ready-fd", required_argument, NULL, OPT_READY_FD },
	{ "info", no_argument, NULL, OPT_INFO },
	{ "share-group", required_argument, NULL, OPT_SHARE_GROUP },
	{ "cpus", required_argument, NULL, OPT_CPUS },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "test-hash-collide", no_argument, NULL, OPT_TEST_HASH_COLLIDE },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static int bad_value(const char *opt, const char *val)
{
	fprintf(stderr, "qgraphd: invalid value for --%s: '%s'\n", opt, val);
	return 2;
}

int main(int argc, char **argv)
{
	static struct qgd_server srv;
	struct qgd_config *cfg = &srv.cfg;
	char default_path[PATH_MAX];
	uint32_t u;
	int c, lvl;

	*cfg = (struct qgd_config){
		.log_level = QGD_LOG_INFO, .ready_fd = -1,
		.pool_bytes = 1ull << 30, .arena_bytes = 64ull << 20, .max_arena_bytes = 1ull << 30,
		.ring_bytes = 1u << 20, .event_count = 256, .max_nodes = 4096, .max_sessions = 256,
		.handshake_ms = 2000, .graph_timeout_ms = 60000, .poll_us = 50,
	};
	while ((c = getopt_long(argc, argv, "fs:l:hV", options, NULL)) != -1) {
		switch (c) {
		case 'f': cfg->foreground = 1; break;
		case 's': cfg->socket_path = optarg; break;
		case OPT_POOL:
			if (parse_size(optarg, &cfg->pool_bytes) || cfg->pool_bytes < (1u << 20))
				return bad_value("pool-size", optarg);
			break;
		case OPT_ARENA:
			if (parse_size(optarg, &cfg->arena_bytes) || cfg->arena_bytes < 4096)
				return bad_value("arena-size", optarg);
			break;
		case OPT_MAX_ARENA:
			if (parse_size(optarg, &cfg->max_arena_bytes) || cfg->max_arena_bytes < 4096)
				return bad_value("max-arena", optarg);
			break;
		case OPT_MAX_NODES:
			if (parse_u32(optarg, 1, 1u << 20, &cfg->max_nodes))
				return bad_value("max-nodes", optarg);
			break;
		case OPT_MAX_SESSIONS:
			if (parse_u32(optarg, 1, 65536, &cfg->max_sessions))
				return bad_value("max-sessions", optarg);
			break;
		case OPT_GRAPH_TIMEOUT:
			if (parse_u32(optarg, 1, UINT32_MAX, &cfg->graph_timeout_ms))
				return bad_value("graph-timeout", optarg);
			break;
		case OPT_POLL:
			if (parse_u32(optarg, 0, 1000000, &cfg->poll_us))
				return bad_value("poll-us", optarg);
			break;
		case OPT_EPOLL: cfg->force_epoll = 1; break;
		case 'l':
			if ((lvl = qgd_log_level_from_name(optarg)) < 0)
				return bad_value("log-level", optarg);
			cfg->log_level = lvl;
			break;
		case OPT_READY_FD:
			if (parse_u32(optarg, 0, INT32_MAX, &u))
				return bad_value("ready-fd", optarg);
			cfg->ready_fd = (int)u;
			break;
		case OPT_SHARE_GROUP: {
			struct group *gr = getgrnam(optarg);
			if (!gr && parse_u32(optarg, 0, UINT32_MAX - 1, &u) == 0)
				gr = getgrgid((gid_t)u);
			if (!gr || cfg->n_share_gids == QGD_MAX_SHARE_GROUPS)
				return bad_value("share-group", optarg);
			cfg->share_gids[cfg->n_share_gids++] = gr->gr_gid;
			break;
		}
		case OPT_TEST_HASH_COLLIDE: cfg->test_hash_collide = 1; break;
		case OPT_CPUS: {
			static int cpus[QG_CPU_MAX];
			int n;
			if (qg_cpulist_parse(optarg, cpus, QG_CPU_MAX, &n) || n < 1)
				return bad_value("cpus", optarg);
			cfg->cpus = optarg;
			break;
		}
		case OPT_THREADS:
			if (parse_u32(optarg, 1, 256, &u))
				return bad_value("threads", optarg);
			cfg->threads = (int)u;
			break;
		case OPT_INFO: print_info(); return 0;
		case 'h': usage(stdout); return 0;
		case 'V': printf("qgraphd %s\n", PACKAGE_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "qgraphd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (cfg->arena_bytes > cfg->max_arena_bytes) {
		fprintf(stderr, "qgraphd: --arena-size is larger than --max-arena\n");
		return 2;
	}
	if (!cfg->socket_path) {
		if (qg_default_socket_path(default_path, sizeof default_path)) {
			fprintf(stderr, "qgraphd: the default socket path is too long\n");
			return 1;
		}
		cfg->socket_path = default_path;
		int err = qg_make_socket_dir(default_path, 0755);
		if (err) {
			fprintf(stderr, "qgraphd: cannot create the directory of %s: %s\n", default_path,
				strerror(-err));
			return 1;
		}
	}
	qgd_log_open(cfg->foreground, (enum qgd_log_level)cfg->log_level);

	/* signals arrive through the loop; a client that goes away is no SIGPIPE */
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	srv.signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

	const char *why = NULL;
	int err = qg_loop_new(cfg->force_epoll ? QG_LOOP_EPOLL : QG_LOOP_AUTO, &srv.loop, &why);
	if (err) {
		qgd_error("cannot create the event loop: %s", strerror(-err));
		return 1;
	}
	qgd_info("event loop: %s%s%s", qg_loop_kind_name(srv.loop), why ? " (" : "", why ? why : "");
	if (qgd_exec_init(&srv))
		return 1;
	const struct qg_cpu *cpu = qg_cpu_features();
	snprintf(srv.cpu_features, sizeof srv.cpu_features, "%s%s%s%s%s%s%s",
		 cpu->neon ? "neon " : "", cpu->dotprod ? "dotprod " : "", cpu->i8mm ? "i8mm " : "",
		 cpu->sve ? "sve " : "", cpu->avx2 ? "avx2 " : "", cpu->avx512 ? "avx512 " : "",
		 cpu->avx512vnni ? "avx512vnni" : "");
	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		qgd_info("kernel for %s: %s (%s)", qg_type_name(qg_layout_type((enum qg_layout)l)),
			 qg_kernel_for((enum qg_layout)l)->name, qg_kernel_reason((enum qg_layout)l));

	if (qgd_server_start(&srv))
		return 1;
	if (cfg->ready_fd >= 0) {
		(void)!write(cfg->ready_fd, "READY\n", 6);
		close(cfg->ready_fd);
	}

	int rc = qgd_server_run(&srv);
	qgd_exec_fini(&srv);
	if (srv.listen_fd >= 0) {
		close(srv.listen_fd);
		unlink(cfg->socket_path);
	}
	qg_loop_free(srv.loop);
	close(srv.lock_fd);
	qgd_info("exiting");
	return rc;
}
