/*
 * conf.c - qgraphd's settings (see conf.h): the one table of them, their
 * defaults, the setter the command line and the file share (a user or a
 * group is resolved here, so that a name that does not exist is refused
 * where it was given), and the command line's options.  The file is
 * conf-file.c's; showing the settings and reloading them conf-reload.c's.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "conf.h"
#include "conf-impl.h"
#include "cpulist.h"
#include "log.h"

#define OFF(f) offsetof(struct qgd_config, f)

const struct setting qgd_conf_settings[] = {
	{ .name = "foreground", .short_opt = 'f', .kind = K_FLAG, .off = OFF(foreground) },
	{ .name = "socket", .short_opt = 's', .kind = K_PATH },
	{ .name = "pool-size", .kind = K_SIZE, .off = OFF(pool_bytes), .lo = 1u << 20, .hi = UINT64_MAX },
	{ .name = "arena-size", .kind = K_SIZE, .off = OFF(arena_bytes), .lo = 4096, .hi = UINT64_MAX },
	{ .name = "max-arena", .kind = K_SIZE, .off = OFF(max_arena_bytes), .lo = 4096, .hi = UINT64_MAX },
	{ .name = "max-nodes", .kind = K_U32, .off = OFF(max_nodes), .lo = 1, .hi = 1u << 20 },
	{ .name = "max-sessions", .kind = K_U32, .off = OFF(max_sessions), .lo = 1, .hi = 65536 },
	{ .name = "max-sessions-per-user", .kind = K_U32, .off = OFF(max_sessions_per_user), .lo = 1, .hi = 65536 },
	{ .name = "max-handshakes", .kind = K_U32, .off = OFF(max_handshakes), .lo = 1, .hi = 65536 },
	{ .name = "handshakes-per-user", .kind = K_U32, .off = OFF(handshakes_per_user), .lo = 1, .hi = 65536 },
	{ .name = "total-arena", .kind = K_SIZE, .off = OFF(total_arena_bytes), .lo = 4096, .hi = UINT64_MAX },
	{ .name = "client-weights", .kind = K_SIZE, .off = OFF(client_weights), .lo = 4096, .hi = UINT64_MAX },
	{ .name = "client-memory", .kind = K_SIZE, .off = OFF(client_memory), .lo = 4096, .hi = UINT64_MAX },
	{ .name = "user-weights", .kind = K_SIZE, .off = OFF(user_weights), .lo = 4096, .hi = UINT64_MAX },
	{ .name = "user-models", .kind = K_SIZE, .off = OFF(user_models), .lo = 4096, .hi = UINT64_MAX },
	{ .name = "user-graph-metadata", .kind = K_SIZE, .off = OFF(user_graph_metadata), .lo = 4096, .hi = UINT64_MAX },
	{ .name = "max-graphs", .kind = K_U32, .off = OFF(max_graphs), .lo = 1, .hi = 1u << 20 },
	{ .name = "max-message", .kind = K_SIZE, .off = OFF(max_message), .lo = 4096, .hi = 64u << 20 },
	{ .name = "graph-timeout", .kind = K_U32, .off = OFF(graph_timeout_ms), .lo = 1, .hi = UINT32_MAX },
	{ .name = "max-wait-ms", .kind = K_U32, .off = OFF(max_wait_ms), .lo = 1, .hi = UINT32_MAX },
	{ .name = "batch-max", .kind = K_U32, .off = OFF(batch_max), .lo = 1, .hi = QGD_BATCH_MAX },
	{ .name = "batch-window-us", .kind = K_U32, .off = OFF(batch_window_us), .lo = 0, .hi = 1000000 },
	{ .name = "poll-us", .kind = K_U32, .off = OFF(poll_us), .lo = 0, .hi = 1000000 },
	{ .name = "epoll", .kind = K_FLAG, .off = OFF(force_epoll) },
	{ .name = "log-level", .short_opt = 'l', .kind = K_LEVEL, .off = OFF(log_level) },
	{ .name = "ready-fd", .kind = K_INT, .off = OFF(ready_fd), .lo = 0, .hi = INT32_MAX, .cli_only = 1 },
	{ .name = "user", .kind = K_USER },
	{ .name = "group", .kind = K_GROUP },
	{ .name = "allow-users", .kind = K_USERS },
	{ .name = "allow-groups", .kind = K_GROUPS },
	{ .name = "socket-mode", .kind = K_MODE, .lo = 0600, .hi = 0777 },
	{ .name = "cpus", .kind = K_CPUS },
	{ .name = "threads", .kind = K_INT, .off = OFF(threads), .lo = 1, .hi = 256 },
	{ .name = "share-groups", .kind = K_SHARE },
	{ .name = "stats-group", .kind = K_STATS_GROUP },
	{ .name = "reserve-hugepages", .kind = K_FLAG, .off = OFF(reserve_hugepages) },
	{ .name = "require-hugepages", .kind = K_FLAG, .off = OFF(require_hugepages) },
	{ .name = "preload", .kind = K_FILE, .off = OFF(preload) },
	{ .name = "test-hash-collide", .kind = K_FLAG, .off = OFF(test_hash_collide), .cli_only = 1 },
};

static_assert(sizeof qgd_conf_settings / sizeof qgd_conf_settings[0] == QGD_CONF_N_SETTINGS,
	      "conf-impl.h counts the settings");

void qgd_conf_defaults(struct qgd_config *cfg)
{
	*cfg = (struct qgd_config){
		.log_level = QGD_LOG_INFO, .ready_fd = -1,
		.pool_bytes = 1ull << 30, .arena_bytes = 64ull << 20, .max_arena_bytes = 1ull << 30,
		.ring_bytes = 1u << 20, .event_count = 256, .max_nodes = 4096, .max_sessions = 256,
		.handshake_ms = 2000, .graph_timeout_ms = 60000, .poll_us = 50, .batch_max = 8,
		.max_sessions_per_user = 64, .total_arena_bytes = 16ull << 30, .max_graphs = 1024,
		.max_message = 1u << 20, .max_handshakes = 64, .handshakes_per_user = 8, .max_wait_ms = 60000,
		.priv = { .socket_mode = 0660 },
	};
}

int qgd_conf_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Decimal digits only, no sign, no overflow past HI: 0 and the value in *OUT, or -1. */
static int parse_uint(const char *s, uint64_t hi, uint64_t *out, const char **end)
{
	uint64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (hi - d) / 10)
			return -1;	/* would overflow (or pass HI) */
		v = v * 10 + d;
	}
	if (!end && *p)
		return -1;
	if (end)
		*end = p;
	*out = v;
	return 0;
}

/* SIZE with an optional K/M/G suffix: 0 or -1. */
static int parse_size(const char *s, uint64_t *out)
{
	const char *end;
	uint64_t v;
	int shift = 0;

	if (parse_uint(s, UINT64_MAX, &v, &end))
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
	*out = v << shift;
	return 0;
}

static int parse_flag(const char *s, int *out)
{
	static const char *const yes[] = { "yes", "true", "on", "1" }, *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < 4; i++) {
		if (strcmp(s, yes[i]) == 0)
			return *out = 1, 0;
		if (strcmp(s, no[i]) == 0)
			return *out = 0, 0;
	}
	return -1;
}

/* A user by name or number: its uid, and its primary group if the user database knows it. */
static int resolve_user(const char *s, uid_t *uid, gid_t *gid, int *has_gid)
{
	uint64_t v;
	struct passwd *pw;

	*has_gid = 0;
	if (parse_uint(s, (uid_t)-2, &v, NULL) == 0) {
		*uid = (uid_t)v;
		pw = getpwuid(*uid);
	} else {
		pw = getpwnam(s);
		if (!pw)
			return -1;
		*uid = pw->pw_uid;
	}
	if (pw) {
		*gid = pw->pw_gid;
		*has_gid = 1;
	}
	return 0;
}

static int resolve_group(const char *s, gid_t *gid)
{
	uint64_t v;
	struct group *gr;

	if (parse_uint(s, (gid_t)-2, &v, NULL) == 0) {
		*gid = (gid_t)v;
		return 0;
	}
	gr = getgrnam(s);
	if (!gr)
		return -1;
	*gid = gr->gr_gid;
	return 0;
}

/* A list of users or groups, separated by commas and/or blanks, into IDS (at most QGD_ALLOW_MAX). */
static int parse_ids(const char *s, int groups, uint32_t *ids, uint32_t *n, char *err, size_t errlen)
{
	char word[256];
	uint32_t count = 0;

	for (const char *p = s; *p;) {
		size_t len = strcspn(p, ", \t");
		if (len == 0) {
			p++;
			continue;
		}
		if (len >= sizeof word)
			return qgd_conf_fail(err, errlen, "a name of %zu characters", len);
		if (count == QGD_ALLOW_MAX)
			return qgd_conf_fail(err, errlen, "more than %u entries", QGD_ALLOW_MAX);
		memcpy(word, p, len);
		word[len] = 0;
		p += len;
		uid_t u;
		gid_t g;
		int has;
		if (groups ? resolve_group(word, &g) : resolve_user(word, &u, &g, &has))
			return qgd_conf_fail(err, errlen, "no %s '%.64s'", groups ? "group" : "user", word);
		ids[count++] = groups ? (uint32_t)g : (uint32_t)u;
	}
	if (!count)
		return qgd_conf_fail(err, errlen, "an empty list");
	*n = count;
	return 0;
}

int qgd_conf_set_one(struct qgd_config *cfg, const struct setting *st, const char *v, char *err, size_t errlen)
{
	char *base = (char *)cfg;
	struct qgd_priv_config *pc = &cfg->priv;
	uint64_t n;
	int i;

	if (!v) {
		if (st->kind != K_FLAG)
			return qgd_conf_fail(err, errlen, "a value is needed");
		v = "yes";
	}
	if (!*v)
		return qgd_conf_fail(err, errlen, "a value is needed");
	switch (st->kind) {
	case K_FLAG:
		if (parse_flag(v, &i))
			return qgd_conf_fail(err, errlen, "expected yes or no");
		*(int *)(base + st->off) = i;
		return 0;
	case K_PATH:
		if (strlen(v) >= sizeof(((struct sockaddr_un *)0)->sun_path))
			return qgd_conf_fail(err, errlen, "a socket path must be shorter than %zu bytes",
				    sizeof(((struct sockaddr_un *)0)->sun_path));
		snprintf(cfg->socket_store, sizeof cfg->socket_store, "%s", v);
		cfg->socket_path = cfg->socket_store;
		return 0;
	case K_FILE:
		if (strlen(v) >= PATH_MAX)
			return qgd_conf_fail(err, errlen, "a path must be shorter than %d bytes", PATH_MAX);
		snprintf(base + st->off, PATH_MAX, "%s", v);
		return 0;
	case K_SIZE:
		if (parse_size(v, &n) || n < st->lo || n > st->hi)
			return qgd_conf_fail(err, errlen, "expected a size of at least %llu bytes, with K, M or G",
				    (unsigned long long)st->lo);
		*(uint64_t *)(base + st->off) = n;
		return 0;
	case K_U32:
	case K_INT:
		if (parse_uint(v, UINT64_MAX, &n, NULL) || n < st->lo || n > st->hi)
			return qgd_conf_fail(err, errlen, "expected a number from %llu to %llu", (unsigned long long)st->lo,
				    (unsigned long long)st->hi);
		if (st->kind == K_U32)
			*(uint32_t *)(base + st->off) = (uint32_t)n;
		else
			*(int *)(base + st->off) = (int)n;
		return 0;
	case K_LEVEL:
		if ((i = qgd_log_level_from_name(v)) < 0)
			return qgd_conf_fail(err, errlen, "expected error, warn, info or debug");
		*(int *)(base + st->off) = i;
		return 0;
	case K_MODE: {
		char *end;
		errno = 0;
		unsigned long m = strtoul(v, &end, 8);
		if (errno || *end || *v < '0' || *v > '7' || m > st->hi || (m & st->lo) != st->lo)
			return qgd_conf_fail(err, errlen, "expected an octal mode from 0600 to 0777 (the owner must read and write)");
		pc->socket_mode = (unsigned)m;
		return 0;
	}
	case K_USER:
		if (resolve_user(v, &pc->uid, &pc->user_gid, &pc->user_has_gid))
			return qgd_conf_fail(err, errlen, "no such user");
		pc->has_user = 1;
		return 0;
	case K_GROUP:
		if (resolve_group(v, &pc->gid))
			return qgd_conf_fail(err, errlen, "no such group");
		pc->has_group = 1;
		return 0;
	case K_USERS:
		return parse_ids(v, 0, (uint32_t *)pc->allow_users, &pc->n_allow_users, err, errlen);
	case K_GROUPS:
		return parse_ids(v, 1, (uint32_t *)pc->allow_groups, &pc->n_allow_groups, err, errlen);
	case K_SHARE: {
		uint32_t n32;
		_Static_assert(QGD_MAX_SHARE_GROUPS >= QGD_ALLOW_MAX, "share-groups holds a full list");
		if (parse_ids(v, 1, (uint32_t *)cfg->share_gids, &n32, err, errlen))
			return -1;
		cfg->n_share_gids = n32;
		return 0;
	}
	case K_STATS_GROUP:
		if (resolve_group(v, &cfg->stats_gid))
			return qgd_conf_fail(err, errlen, "no such group");
		cfg->has_stats_group = 1;
		return 0;
	case K_CPUS: {
		static int cpus[QG_CPU_MAX];
		int ncpu;
		if (strlen(v) >= sizeof cfg->cpus_store || qg_cpulist_parse(v, cpus, QG_CPU_MAX, &ncpu) || ncpu < 1)
			return qgd_conf_fail(err, errlen, "expected a CPU list such as 0-3,8 (CPUs below %d, each once)", QG_CPU_MAX);
		snprintf(cfg->cpus_store, sizeof cfg->cpus_store, "%s", v);
		cfg->cpus = cfg->cpus_store;
		return 0;
	}
	}
	return qgd_conf_fail(err, errlen, "unknown kind of setting");
}

const struct setting *qgd_conf_find(const char *name)
{
	for (size_t i = 0; i < QGD_CONF_N_SETTINGS; i++)
		if (strcmp(qgd_conf_settings[i].name, name) == 0)
			return &qgd_conf_settings[i];
	return NULL;
}

int qgd_conf_set(struct qgd_config *cfg, const char *name, const char *value, char *err, size_t errlen)
{
	const struct setting *st = qgd_conf_find(name);

	if (!st) {
		qgd_conf_fail(err, errlen, "unknown setting");
		return -ENOENT;
	}
	return qgd_conf_set_one(cfg, st, value, err, errlen);
}

int qgd_conf_finish(struct qgd_config *cfg, char *err, size_t errlen)
{
	struct qgd_priv_config *pc = &cfg->priv;

	if (cfg->arena_bytes > cfg->max_arena_bytes)
		return qgd_conf_fail(err, errlen, "arena-size is larger than max-arena");
	if (pc->has_user && !pc->has_group) {
		if (!pc->user_has_gid)
			return qgd_conf_fail(err, errlen, "user %u is not in the user database: name its group too",
				    (unsigned)pc->uid);
		pc->gid = pc->user_gid;
		pc->has_group = 1;
	}
	return 0;
}

size_t qgd_conf_options(struct option *out, size_t cap, int base, const struct option *extra, size_t nextra)
{
	size_t n = 0;

	if (cap < QGD_CONF_N_SETTINGS + nextra + 1)
		return 0;
	for (size_t i = 0; i < QGD_CONF_N_SETTINGS; i++) {
		const struct setting *st = &qgd_conf_settings[i];
		out[n++] = (struct option){ .name = st->name,
					    .has_arg = st->kind == K_FLAG ? optional_argument : required_argument,
					    .val = base + (int)i };
	}
	for (size_t i = 0; i < nextra; i++)
		out[n++] = extra[i];
	out[n] = (struct option){ 0 };
	return n;
}

const char *qgd_conf_shortopts(void)
{
	static char s[2 * QGD_CONF_N_SETTINGS + 1];
	size_t n = 0;

	if (!s[0]) {
		for (size_t i = 0; i < QGD_CONF_N_SETTINGS; i++) {
			if (!qgd_conf_settings[i].short_opt)
				continue;
			s[n++] = (char)qgd_conf_settings[i].short_opt;
			if (qgd_conf_settings[i].kind != K_FLAG)
				s[n++] = ':';
		}
		s[n] = 0;
	}
	return s;
}

const char *qgd_conf_name(int i)
{
	return i >= 0 && (size_t)i < QGD_CONF_N_SETTINGS ? qgd_conf_settings[i].name : NULL;
}

int qgd_conf_by_short(int c)
{
	for (size_t i = 0; i < QGD_CONF_N_SETTINGS; i++)
		if (qgd_conf_settings[i].short_opt == c)
			return (int)i;
	return -1;
}
