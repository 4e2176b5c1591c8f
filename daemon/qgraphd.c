/*
 * qgraphd.c - the daemon's entry: options, start-up, and the loop.
 */
#include "config.h"

#include <dirent.h>
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
#include <sys/syscall.h>
#include <sysexits.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "conf.h"
#include "exec.h"
#include "kernels.h"
#include "loop.h"
#include "memory.h"
#include "models.h"
#include "rowops.h"
#include "paths.h"
#include "priv.h"
#include "server.h"
#include "sock.h"
#include "stamp.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: qgraphd [OPTION]...\n"
		"Run quantized matrix graphs for the processes of this machine.\n"
		"\n"
		"      --config PATH      read settings from PATH (default " QGD_CONF_FILE ",\n"
		"                         if it exists); the command line wins over it\n"
		"      --no-config        read no configuration file\n"
		"  -f, --foreground       log to stderr, with timestamps (qgraphd never forks;\n"
		"                         without it: to the journal under systemd, else syslog)\n"
		"  -s, --socket PATH      listen on PATH (default: $QGRAPH_SOCKET, else\n"
		"                         /run/qgraph/qgraphd.sock as root,\n"
		"                         $XDG_RUNTIME_DIR/qgraph/qgraphd.sock otherwise)\n"
		"      --socket-mode MODE the socket's mode (default 0660)\n"
		"      --user USER        run as USER once the socket is bound (default: as started)\n"
		"      --group GROUP      run as GROUP, the socket's group (default: USER's group)\n"
		"      --allow-users LIST serve only these users (comma separated; root and the\n"
		"                         daemon's own user always) ...\n"
		"      --allow-groups LIST ... and members of these groups (default, neither:\n"
		"                         everyone who can open the socket)\n"
		"      --pool-size SIZE   memory for weights and intermediates, mapped on hugepages\n"
		"                         and locked where it may be (default 1G)\n"
		"      --preload FILE     hold the GGUF model FILE from start-up (as model FILE's\n"
		"                         base name without .gguf), until an unload\n"
		"      --arena-size SIZE  a session's tensor arena unless it asks (default 64M)\n"
		"      --max-arena SIZE   the largest arena a session may ask for (default 1G)\n"
		"      --max-nodes N      tensors per graph (default 4096)\n"
		"      --max-sessions N   clients served at once (default 256)\n"
		"      --max-handshakes N connections that have not sent a Hello yet (default 64)\n"
		"      --handshakes-per-user N  ... of one user (default 8)\n"
		"      --max-sessions-per-user N  sessions of one user at once (default 64)\n"
		"      --total-arena SIZE all sessions' arenas together (default 16G)\n"
		"      --client-weights SIZE  weight bytes one session may hold (default: pool size)\n"
		"      --client-memory SIZE   pool bytes one session's graphs may hold (default: pool size)\n"
		"      --user-weights SIZE    weight bytes all of one user's sessions may hold\n"
		"                         (default: no bound)\n"
		"      --user-models SIZE     pool bytes of the models one user loaded, until\n"
		"                         unloaded (default: half the pool size)\n"
		"      --user-graph-metadata SIZE  heap one user's graphs may hold (default: pool size)\n"
		"      --max-graphs N     registered graphs per session (default 1024)\n"
		"      --max-message SIZE the largest request record (default 1M)\n"
		"      --graph-timeout MS a graph that runs longer is cancelled (default 60000)\n"
		"      --max-wait-ms MS   the longest a request may wait for its events (default 60000)\n"
		"      --cpus LIST        run graphs on these CPUs (\"0-3,8\"; default: all usable)\n"
		"      --threads N        compute threads (default: one per CPU of --cpus, or\n"
		"                         of the machine)\n"
		"      --reserve-hugepages  as root, raise vm.nr_hugepages until the pool fits\n"
		"      --require-hugepages  fail at start unless the pool is on hugetlb pages\n"
		"      --share-groups LIST  members of these groups share identical weights and\n"
		"                         their names (a user always shares with itself)\n"
		"      --stats-group GROUP  members see every user's sessions in stats, as root does\n"
		"      --poll-us US       poll the rings this long after activity (default 50)\n"
		"      --batch-max N      graphs of sessions on shared weights run as one batch,\n"
		"                         at most (1-16, default 8; 1: never batch)\n"
		"      --batch-window-us US  how long a graph may wait for the company recent\n"
		"                         batches had (default 0: batch only what is ready)\n"
		"      --epoll[=no]       use epoll even where io_uring works\n"
		"  -l, --log-level LEVEL  error, warn, info (default) or debug\n"
		"      --ready-fd N       write \"READY\\n\" to fd N once clients are accepted\n"
		"      --info             print the CPU's features and chosen kernels, and exit\n"
		"      --check-config     read the configuration, say what is wrong, and exit\n"
		"                         (0: good, 78: not)\n"
		"      --dump-config      print the configuration in effect, in the file's syntax\n"

		"  -h, --help             show this help\n"
		"  -V, --version          show the version\n"
		"\n"
		"SIZE takes a K, M or G suffix.  A configuration error exits with status 78\n"
		"(EX_CONFIG).  SIGHUP reads the configuration again (qgraphd.conf(5) names\n"
		"what needs a restart).  See qgraphd(8).\n"
		"Report bugs to: " PACKAGE_BUGREPORT "\n");
}

static void print_info(void)
{
	const struct qg_cpu *c = qg_cpu_features();

	printf("qgraphd (qgraph) %s\n", PACKAGE_VERSION);
	printf("cpu: neon=%d dotprod=%d i8mm=%d sve=%d (vector %d bytes) avx2=%d avx512=%d avx512vnni=%d\n",
	       c->neon, c->dotprod, c->i8mm, c->sve, c->sve_bytes, c->avx2, c->avx512, c->avx512vnni);
	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		printf("%-9s %-22s %s\n", qg_type_name(qg_layout_type((enum qg_layout)l)),
		       qg_kernel_for((enum qg_layout)l)->name, qg_kernel_reason((enum qg_layout)l));
	const struct qg_kq_kernel *kq = qg_kq_kernel_for();
	printf("%-9s %-22s %s\n", "q4_K q6_K q8_0", kq->name, qg_kq_kernel_reason());
	const int q8_0_rows = kq->q8_0_gemm_rows > 0 ? kq->q8_0_gemm_rows : kq->gemm_rows;
	if (kq->q4_K_gemm || kq->q6_K_gemm || kq->q8_0_gemm)
		printf("%-14s gemm:%s%s%s, from %d activation rows\n", "", kq->q4_K_gemm ? " q4_K" : "",
		       kq->q6_K_gemm ? " q6_K" : "", kq->q8_0_gemm && q8_0_rows == kq->gemm_rows ? " q8_0" : "",
		       kq->gemm_rows);
	if (kq->q8_0_gemm && q8_0_rows != kq->gemm_rows)
		printf("%-14s gemm: q8_0, from %d activation row%s\n", "", q8_0_rows, q8_0_rows == 1 ? "" : "s");
	if (kq->q4_K_gemv || kq->q6_K_gemv || kq->q8_0_gemv)
		printf("%-14s gemv:%s%s%s, one activation row against many weight rows\n", "",
		       kq->q4_K_gemv ? " q4_K" : "", kq->q6_K_gemv ? " q6_K" : "", kq->q8_0_gemv ? " q8_0" : "");
	printf("%-9s %-22s %s\n", "row ops", qg_rowops_for()->name, "norms, SiLU, SwiGLU, RoPE: as the K-quant family");
	printf("best weight layout: %s\n", qg_type_name(qg_best_weight_type()));
	printf("q8_0 weights stored as: %s\n", qg_type_name(qg_best_q8_0_type()));
}

/* Close the descriptors from FROM to TO (inclusive): close_range where the kernel has it, else one by one from /proc. */
static void close_between(unsigned from, unsigned to)
{
	if (from > to)
		return;
#ifdef SYS_close_range
	if (syscall(SYS_close_range, from, to, 0) == 0)
		return;
#endif
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	int own = dirfd(d);
	for (struct dirent *e; (e = readdir(d));) {
		char *end;
		unsigned long fd = strtoul(e->d_name, &end, 10);
		if (*end || end == e->d_name || fd < from || fd > to || (int)fd == own)
			continue;
		close((int)fd);
	}
	closedir(d);
}

/*
 * Close every descriptor above stderr that the launcher left open but
 * --ready-fd's and the N_LISTEN sockets the service manager passed (from
 * SD_LISTEN_FDS_START on): a client of the daemon must never reach what its
 * launcher held (a terminal, a pipe, a file), and the descriptors are
 * max-sessions'.
 */
static void close_inherited(int ready_fd, int n_listen)
{
	unsigned from = SD_LISTEN_FDS_START + (unsigned)(n_listen > 0 ? n_listen : 0);

	if (ready_fd >= (int)from) {
		close_between(from, (unsigned)ready_fd - 1);
		close_between((unsigned)ready_fd + 1, ~0u);
	} else {
		close_between(from, ~0u);
	}
}

enum { OPT_INFO = 256, OPT_CONFIG, OPT_NO_CONFIG, OPT_CHECK_CONFIG, OPT_DUMP_CONFIG, OPT_SETTING = 512 };

/* The options that are no setting (the settings' own come from conf.c). */
/* True if the directory of socket PATH is safe for this process (see qg_socket_dir_check); else says why. */
static bool socket_dir_ours(const char *path)
{
	char why[PATH_MAX + 128];

	if (qg_socket_dir_check(path, geteuid(), why, sizeof why) == 0)
		return true;
	qgd_error("refusing the socket %s: %s (remove it, or set XDG_RUNTIME_DIR or --socket)", path, why);
	return false;
}

static const struct option extra_options[] = {
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "no-config", no_argument, NULL, OPT_NO_CONFIG },
	{ "info", no_argument, NULL, OPT_INFO },
	{ "check-config", no_argument, NULL, OPT_CHECK_CONFIG },
	{ "dump-config", no_argument, NULL, OPT_DUMP_CONFIG },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
};

/* What the command line said, kept for a reload: the command line wins over the file then too. */
static struct {
	const char *path;	/* NULL: --no-config */
	int named;		/* --config: a missing file is an error */
	int n_given;
	struct given {
		int setting;
		const char *value;
	} given[256];
} args = { .path = QGD_CONF_FILE };

/*
 * Fill CFG from the defaults, the file and the command line, and choose
 * the socket if none is named.  0, or EX_CONFIG with the reason in MSG
 * (LEN bytes).  *FOUND: the file was read.
 */
static int load_config(struct qgd_config *cfg, int *found, char *msg, size_t len)
{
	char why[512];

	qgd_conf_defaults(cfg);
	*found = 0;
	if (args.path && qgd_conf_load(cfg, args.path, !args.named, found, msg, len))
		return EX_CONFIG;
	for (int i = 0; i < args.n_given; i++) {
		const char *name = qgd_conf_name(args.given[i].setting);
		if (qgd_conf_set(cfg, name, args.given[i].value, why, sizeof why)) {
			snprintf(msg, len, "invalid value for --%s: '%.64s' (%s)", name,
				 args.given[i].value ? args.given[i].value : "", why);
			return EX_CONFIG;
		}
	}
	if (qgd_conf_finish(cfg, msg, len))
		return EX_CONFIG;
	if (!cfg->socket_path) {
		if (qg_default_socket_path(cfg->socket_store, sizeof cfg->socket_store)) {
			snprintf(msg, len, "the default socket path is too long");
			return EX_CONFIG;
		}
		cfg->socket_path = cfg->socket_store;
	}
	return 0;
}

/* A setting that differs after a reload: say whether it took. */
static void note_change(const char *name, const char *from, const char *to, int applied)
{
	if (applied)
		qgd_info("reload: %s: %s -> %s", name, from, to);
	else
		qgd_warn("reload: %s: %s -> %s needs a restart: ignored until then", name, from, to);
}

/* The server's reload hook: SIGHUP reads the configuration again and applies what may change (conf.h). */
static void reload(struct qgd_server *srv)
{
	static struct qgd_config next;
	char msg[600];
	int found;

	sd_notify(0, "RELOADING=1");
	qgd_log_reopen();
	if (load_config(&next, &found, msg, sizeof msg)) {
		qgd_error("reload: %s: the configuration in effect is kept", msg);
	} else {
		if (qgd_server_activated(srv))	/* the passed socket is the one served: no path to compare */
			next.socket_path = srv->cfg.socket_path;
		qgd_conf_apply(&srv->cfg, &next, note_change);
		qgd_log_set_level((enum qgd_log_level)srv->cfg.log_level);
		qgd_server_recheck(srv);
		qgd_info("reload: configuration %s%s", found ? "read from " : "none", found ? args.path : "");
	}
	sd_notifyf(0, "READY=1\nSTATUS=serving on %s", srv->cfg.socket_path);
}

/*
 * Read the command line into args (its settings wait for the file: the
 * command line wins over it), *CHECK and *DUMP.  -1 to go on, or the
 * status to exit with (--help, --version, --info, or a bad argument).
 */
static int parse_args(int argc, char **argv, int *check, int *dump)
{
	struct option options[64];
	char shortopts[64];
	int c;

	if (!qgd_conf_options(options, sizeof options / sizeof options[0], OPT_SETTING, extra_options,
					sizeof extra_options / sizeof extra_options[0]))
		return 1;
	snprintf(shortopts, sizeof shortopts, "%shV", qgd_conf_shortopts());
	while ((c = getopt_long(argc, argv, shortopts, options, NULL)) != -1) {
		int i = c >= OPT_SETTING ? c - OPT_SETTING : qgd_conf_by_short(c);
		if (i >= 0 && qgd_conf_name(i)) {
			if (args.n_given == sizeof args.given / sizeof args.given[0]) {
				fprintf(stderr, "qgraphd: too many options\n");
				return 2;
			}
			args.given[args.n_given++] = (struct given){ i, optarg };
			continue;
		}
		switch (c) {
		case OPT_CONFIG: args.path = optarg; args.named = 1; break;
		case OPT_NO_CONFIG: args.path = NULL; break;
		case OPT_CHECK_CONFIG: *check = 1; break;
		case OPT_DUMP_CONFIG: *dump = 1; break;
		case OPT_INFO: print_info(); return 0;
		case 'h': usage(stdout); return 0;
		case 'V': printf("qgraphd (qgraph) %s\n", PACKAGE_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "qgraphd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	return -1;
}

/*
 * Take the socket the service manager passed, if it passed one (socket
 * activation), close every other inherited descriptor and open the log.
 * 0, or the status to exit with.
 */
static int take_inherited(struct qgd_server *srv)
{
	int n_listen = sd_listen_fds(0);

	if (n_listen < 0) {
		fprintf(stderr, "qgraphd: LISTEN_FDS: %s\n", strerror(-n_listen));
		return EX_CONFIG;
	}
	if (n_listen > 1) {
		fprintf(stderr, "qgraphd: the service manager passed %d sockets; qgraphd serves one\n", n_listen);
		return EX_CONFIG;
	}
	unsetenv("LISTEN_PID");	/* they are ours, not a child's */
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	close_inherited(srv->cfg.ready_fd, n_listen);	/* the passed socket is kept */
	qgd_log_open(srv->cfg.foreground, (enum qgd_log_level)srv->cfg.log_level);
	if (n_listen == 1 && qgd_server_adopt(srv, SD_LISTEN_FDS_START) < 0)
		return EX_CONFIG;
	return 0;
}

/* Signals arrive through the loop (srv->signal_fd); a client that goes away is no SIGPIPE. */
static void take_signals(struct qgd_server *srv)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);	/* read by the loop: never the default action, which kills */
	sigaddset(&mask, SIGUSR2);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	srv->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

/*
 * What needs privileges (the socket unless it was passed, the pool), then
 * the drop; the loop and any thread come only after.  0, or 1 (logged).
 */
static int use_privileges(struct qgd_server *srv)
{
	struct qgd_config *cfg = &srv->cfg;

	if (qgd_server_activated(srv))
		return qgd_memory_init(srv) || qgd_priv_drop(&cfg->priv) ? 1 : 0;
	/* a socket directory in /tmp could be anyone's: never bind in one we do not own */
	if (!socket_dir_ours(cfg->socket_path))
		return 1;
	int run_dir = -1;
	char staged[PATH_MAX];
	if (qg_sock_staging_path(cfg->socket_path, staged, sizeof staged) ||
	    qgd_priv_runtime_dir(&cfg->priv, cfg->socket_path, &run_dir) || qgd_server_bind(srv) < 0 ||
	    qgd_priv_own_socket(&cfg->priv, staged) || qgd_memory_init(srv) || qgd_server_open(srv) ||
	    qgd_priv_hand_over_dir(&cfg->priv, cfg->socket_path, run_dir) || qgd_priv_drop(&cfg->priv))
		return 1;
	if (!socket_dir_ours(cfg->socket_path))	/* again: it may have been made between the check and mkdir */
		return 1;
	return 0;
}

/* The event loop (logged: its kind, the clock, how io_uring is restricted) and the executor.  0, or 1 (logged). */
static int make_loop(struct qgd_server *srv)
{
	const char *why = NULL, *what;
	int err = qg_loop_new(srv->cfg.force_epoll ? QG_LOOP_EPOLL : QG_LOOP_AUTO, &srv->loop, &why);

	if (err) {
		qgd_error("cannot create the event loop: %s", strerror(-err));
		return 1;
	}
	qgd_info("event loop: %s%s%s%s", qg_loop_kind_name(srv->loop), why ? " (" : "", why ? why : "", why ? ")" : "");
	if (strcmp(qg_stamp_source(), "none"))
		qgd_debug("timestamps: CLOCK_MONOTONIC extrapolated from the %s counter", qg_stamp_source());
	else
		qgd_debug("timestamps: clock_gettime (no counter the kernel keeps time with)");
	int restricted = qg_loop_restricted(srv->loop, &what);
	if (restricted > 0)
		qgd_info("io_uring: restricted to %s", what);
	else if (restricted == 0)
		qgd_warn("io_uring: unrestricted (%s)", what);
	return qgd_exec_init(srv) ? 1 : 0;
}

/* Note the CPU's features for the Welcome, and log the kernel chosen for each layout. */
static void note_cpu(struct qgd_server *srv)
{
	const struct qg_cpu *cpu = qg_cpu_features();

	snprintf(srv->cpu_features, sizeof srv->cpu_features, "%s%s%s%s%s%s%s",
		 cpu->neon ? "neon " : "", cpu->dotprod ? "dotprod " : "", cpu->i8mm ? "i8mm " : "",
		 cpu->sve ? "sve " : "", cpu->avx2 ? "avx2 " : "", cpu->avx512 ? "avx512 " : "",
		 cpu->avx512vnni ? "avx512vnni" : "");
	for (int l = 0; l < QG_LAYOUT_COUNT; l++)
		qgd_info("kernel for %s: %s (%s)", qg_type_name(qg_layout_type((enum qg_layout)l)),
			 qg_kernel_for((enum qg_layout)l)->name, qg_kernel_reason((enum qg_layout)l));
	qgd_info("kernel for q4_K, q6_K and q8_0: %s (%s); q8_0 weights stored as %s", qg_kq_kernel_for()->name,
		 qg_kq_kernel_reason(), qg_type_name(qg_best_q8_0_type()));
}

/* Say that the daemon serves: on --ready-fd, to the service manager, in the log. */
static void announce_ready(struct qgd_config *cfg)
{
	if (cfg->ready_fd >= 0) {
		(void)!write(cfg->ready_fd, "READY\n", 6);
		close(cfg->ready_fd);
	}
	sd_notifyf(0, "READY=1\nSTATUS=serving on %s", cfg->socket_path);
	qgd_log_serving();
}

int main(int argc, char **argv)
{
	static struct qgd_server srv;
	struct qgd_config *cfg = &srv.cfg;
	char msg[600];
	int conf_found = 0, check = 0, dump = 0;
	int rc = parse_args(argc, argv, &check, &dump);

	if (rc >= 0)
		return rc;
	if ((rc = load_config(cfg, &conf_found, msg, sizeof msg))) {
		fprintf(stderr, "qgraphd: %s\n", msg);
		return rc;
	}
	if (check || dump) {
		if (check)
			printf("%s: good\n", conf_found ? args.path : args.path ? "no file, the defaults" : "--no-config");
		if (dump)
			qgd_conf_dump(cfg, stdout);
		return fflush(stdout) ? 1 : 0;
	}
	if ((rc = take_inherited(&srv)))
		return rc;
	take_signals(&srv);
	if (conf_found)
		qgd_info("configuration: %s", args.path);
	else
		qgd_info("configuration: none (%s%s)", args.path ? "no file " : "--no-config", args.path ? args.path : "");
	if (use_privileges(&srv) || make_loop(&srv))
		return 1;
	note_cpu(&srv);
	/* a preloaded model: read as the daemon's own user, before any client is served */
	if (cfg->preload[0] && qgd_models_preload(&srv, cfg->preload, NULL))
		return 1;
	srv.reload = reload;
	if (qgd_server_start(&srv) < 0)
		return 1;
	/* the pool is reserved and locked, the socket listens and the loop runs next: ready */
	announce_ready(cfg);

	rc = qgd_server_run(&srv);
	qgd_exec_fini(&srv);
	qgd_models_fini(&srv);
	qgd_memory_fini(&srv);
	qgd_server_close(&srv);
	qg_loop_free(srv.loop);
	qgd_info("exiting");
	return rc;
}
