/*
 * conf.c - qgraphd's settings, from the command line and the configuration
 * file (see conf.h).
 *
 * The file is read whole (it is small and bounded), then cut into lines
 * that are checked before anything looks inside them: length, NULs and
 * control characters first, then the "key = value" shape, then the key,
 * then the value through the same setter the command line uses.  Users
 * and groups are resolved here, so that a name that does not exist is
 * refused with its line too.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "conf.h"
#include "cpulist.h"
#include "log.h"

enum kind {
	K_FLAG,		/* int: yes/no */
	K_PATH,		/* the socket path */
	K_SIZE,		/* uint64_t with a K/M/G suffix */
	K_U32,		/* uint32_t in [lo, hi] */
	K_INT,		/* int in [lo, hi] */
	K_LEVEL,	/* int: a log level's name */
	K_MODE,		/* unsigned: octal file mode */
	K_USER,		/* the user to run as */
	K_GROUP,	/* the group to run as */
	K_USERS,	/* allow-users */
	K_GROUPS,	/* allow-groups */
	K_SHARE,	/* share-groups */
	K_CPUS,		/* a CPU list */
	K_STATS_GROUP,	/* stats-group */
	K_FILE,		/* a file's path, in a char[PATH_MAX] */
};

struct setting {
	const char *name;
	int short_opt;
	enum kind kind;
	size_t off;		/* in struct qgd_config */
	uint64_t lo, hi;
	int cli_only;		/* no key in the file */
};

#define OFF(f) offsetof(struct qgd_config, f)

static const struct setting settings[] = {
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

#define N_SETTINGS (sizeof settings / sizeof settings[0])

void qgd_conf_defaults(struct qgd_config *cfg)
{
	*cfg = (struct qgd_config){
		.log_level = QGD_LOG_INFO, .ready_fd = -1,
		.pool_bytes = 1ull << 30, .arena_bytes = 64ull << 20, .max_arena_bytes = 1ull << 30,
		.ring_bytes = 1u << 20, .event_count = 256, .max_nodes = 4096, .max_sessions = 256,
		.handshake_ms = 2000, .graph_timeout_ms = 60000, .poll_us = 50,
		.max_sessions_per_user = 64, .total_arena_bytes = 16ull << 30, .max_graphs = 1024,
		.max_message = 1u << 20, .max_handshakes = 64, .handshakes_per_user = 8, .max_wait_ms = 60000,
		.priv = { .socket_mode = 0660 },
	};
}

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
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
			return fail(err, errlen, "a name of %zu characters", len);
		if (count == QGD_ALLOW_MAX)
			return fail(err, errlen, "more than %u entries", QGD_ALLOW_MAX);
		memcpy(word, p, len);
		word[len] = 0;
		p += len;
		uid_t u;
		gid_t g;
		int has;
		if (groups ? resolve_group(word, &g) : resolve_user(word, &u, &g, &has))
			return fail(err, errlen, "no %s '%.64s'", groups ? "group" : "user", word);
		ids[count++] = groups ? (uint32_t)g : (uint32_t)u;
	}
	if (!count)
		return fail(err, errlen, "an empty list");
	*n = count;
	return 0;
}

static int set_one(struct qgd_config *cfg, const struct setting *st, const char *v, char *err, size_t errlen)
{
	char *base = (char *)cfg;
	struct qgd_priv_config *pc = &cfg->priv;
	uint64_t n;
	int i;

	if (!v) {
		if (st->kind != K_FLAG)
			return fail(err, errlen, "a value is needed");
		v = "yes";
	}
	if (!*v)
		return fail(err, errlen, "a value is needed");
	switch (st->kind) {
	case K_FLAG:
		if (parse_flag(v, &i))
			return fail(err, errlen, "expected yes or no");
		*(int *)(base + st->off) = i;
		return 0;
	case K_PATH:
		if (strlen(v) >= sizeof(((struct sockaddr_un *)0)->sun_path))
			return fail(err, errlen, "a socket path must be shorter than %zu bytes",
				    sizeof(((struct sockaddr_un *)0)->sun_path));
		snprintf(cfg->socket_store, sizeof cfg->socket_store, "%s", v);
		cfg->socket_path = cfg->socket_store;
		return 0;
	case K_FILE:
		if (strlen(v) >= PATH_MAX)
			return fail(err, errlen, "a path must be shorter than %d bytes", PATH_MAX);
		snprintf(base + st->off, PATH_MAX, "%s", v);
		return 0;
	case K_SIZE:
		if (parse_size(v, &n) || n < st->lo || n > st->hi)
			return fail(err, errlen, "expected a size of at least %llu bytes, with K, M or G",
				    (unsigned long long)st->lo);
		*(uint64_t *)(base + st->off) = n;
		return 0;
	case K_U32:
	case K_INT:
		if (parse_uint(v, UINT64_MAX, &n, NULL) || n < st->lo || n > st->hi)
			return fail(err, errlen, "expected a number from %llu to %llu", (unsigned long long)st->lo,
				    (unsigned long long)st->hi);
		if (st->kind == K_U32)
			*(uint32_t *)(base + st->off) = (uint32_t)n;
		else
			*(int *)(base + st->off) = (int)n;
		return 0;
	case K_LEVEL:
		if ((i = qgd_log_level_from_name(v)) < 0)
			return fail(err, errlen, "expected error, warn, info or debug");
		*(int *)(base + st->off) = i;
		return 0;
	case K_MODE: {
		char *end;
		errno = 0;
		unsigned long m = strtoul(v, &end, 8);
		if (errno || *end || *v < '0' || *v > '7' || m > st->hi || (m & st->lo) != st->lo)
			return fail(err, errlen, "expected an octal mode from 0600 to 0777 (the owner must read and write)");
		pc->socket_mode = (unsigned)m;
		return 0;
	}
	case K_USER:
		if (resolve_user(v, &pc->uid, &pc->user_gid, &pc->user_has_gid))
			return fail(err, errlen, "no such user");
		pc->has_user = 1;
		return 0;
	case K_GROUP:
		if (resolve_group(v, &pc->gid))
			return fail(err, errlen, "no such group");
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
			return fail(err, errlen, "no such group");
		cfg->has_stats_group = 1;
		return 0;
	case K_CPUS: {
		static int cpus[QG_CPU_MAX];
		int ncpu;
		if (strlen(v) >= sizeof cfg->cpus_store || qg_cpulist_parse(v, cpus, QG_CPU_MAX, &ncpu) || ncpu < 1)
			return fail(err, errlen, "expected a CPU list such as 0-3,8 (CPUs below %d, each once)", QG_CPU_MAX);
		snprintf(cfg->cpus_store, sizeof cfg->cpus_store, "%s", v);
		cfg->cpus = cfg->cpus_store;
		return 0;
	}
	}
	return fail(err, errlen, "unknown kind of setting");
}

static const struct setting *find(const char *name)
{
	for (size_t i = 0; i < N_SETTINGS; i++)
		if (strcmp(settings[i].name, name) == 0)
			return &settings[i];
	return NULL;
}

int qgd_conf_set(struct qgd_config *cfg, const char *name, const char *value, char *err, size_t errlen)
{
	const struct setting *st = find(name);

	if (!st) {
		fail(err, errlen, "unknown setting");
		return -ENOENT;
	}
	return set_one(cfg, st, value, err, errlen);
}

/* VALUE made fit for a message: printable, at most 48 characters. */
static const char *shown(const char *value, char *buf, size_t len)
{
	size_t i;

	for (i = 0; value[i] && i + 4 < len && i < 48; i++)
		buf[i] = value[i] >= 0x20 && value[i] < 0x7f ? value[i] : '?';
	if (value[i]) {
		memcpy(buf + i, "...", 3);
		i += 3;
	}
	buf[i] = 0;
	return buf;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

int qgd_conf_parse(struct qgd_config *cfg, const char *file, const char *text, size_t len, char *err,
		   size_t errlen)
{
	static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t), "ids are 32 bits");
	unsigned seen[N_SETTINGS] = { 0 };
	char line[QGD_CONF_MAX_LINE + 1], why[256], show[64];
	unsigned lineno = 0;
	size_t at = 0;

	if (!cfg || (!text && len))
		return -EINVAL;
	if (!file)
		file = "(configuration)";
	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
		lineno++;
		if (n > QGD_CONF_MAX_LINE)
			return fail(err, errlen, "%s:%u: line longer than %u bytes", file, lineno, QGD_CONF_MAX_LINE);
		memcpy(line, text + at, n);
		at += n + (nl != NULL);
		if (n && line[n - 1] == '\r')
			n--;	/* CRLF */
		line[n] = 0;
		for (size_t i = 0; i < n; i++) {
			if (line[i] == 0)
				return fail(err, errlen, "%s:%u: a NUL byte", file, lineno);
			if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
				return fail(err, errlen, "%s:%u: control character 0x%02x", file, lineno,
					    (unsigned char)line[i]);
			if (line[i] == 0x7f)
				return fail(err, errlen, "%s:%u: control character 0x7f", file, lineno);
		}
		char *p = line, *end = line + n;
		while (p < end && is_blank(*p))
			p++;
		while (end > p && is_blank(end[-1]))
			*--end = 0;
		if (p == end || *p == '#')
			continue;
		char *eq = strchr(p, '=');
		if (!eq)
			return fail(err, errlen, "%s:%u: expected 'key = value', found '%s'", file, lineno,
				    shown(p, show, sizeof show));
		char *key_end = eq;
		while (key_end > p && is_blank(key_end[-1]))
			key_end--;
		*key_end = 0;
		char *value = eq + 1;
		while (is_blank(*value))
			value++;
		if (!*p)
			return fail(err, errlen, "%s:%u: a value with no key", file, lineno);
		const struct setting *st = find(p);
		if (!st || st->cli_only)
			return fail(err, errlen, "%s:%u: unknown key '%s'", file, lineno, shown(p, show, sizeof show));
		size_t idx = (size_t)(st - settings);
		if (seen[idx])
			return fail(err, errlen, "%s:%u: '%s' is already set on line %u", file, lineno, st->name,
				    seen[idx]);
		seen[idx] = lineno;
		if (!*value)
			return fail(err, errlen, "%s:%u: '%s' has no value", file, lineno, st->name);
		if (set_one(cfg, st, value, why, sizeof why))
			return fail(err, errlen, "%s:%u: invalid value for '%s': '%s' (%s)", file, lineno, st->name,
				    shown(value, show, sizeof show), why);
	}
	return 0;
}

int qgd_conf_load(struct qgd_config *cfg, const char *path, int missing_ok, int *found, char *err, size_t errlen)
{
	struct stat st;
	char *text = NULL;
	size_t got = 0;
	int fd, r;

	if (found)
		*found = 0;
	/*
	 * O_NONBLOCK: a FIFO (or a device) put where the file was would block
	 * the open or the read, at start or in the event loop at SIGHUP; it
	 * is refused below by its type, and a regular file reads the same.
	 * No O_NOFOLLOW: a configuration linked from elsewhere (config
	 * management's /etc/static, a package's alternative) is legitimate,
	 * and whoever can change /etc/qgraph can change the file anyway.
	 */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		if (r == -ENOENT && missing_ok)
			return 0;
		fail(err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		fail(err, errlen, "%s: %s", path, strerror(-r));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = fail(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	if (st.st_size > (off_t)QGD_CONF_MAX_BYTES) {
		r = fail(err, errlen, "%s: larger than %u bytes", path, QGD_CONF_MAX_BYTES);
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		r = -ENOMEM;
		fail(err, errlen, "%s: out of memory", path);
		goto out;
	}
	/* read to the end, but never past the bound: the file may grow under us */
	for (;;) {
		ssize_t n = read(fd, text + got, (size_t)st.st_size + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			fail(err, errlen, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > (size_t)st.st_size) {
			r = fail(err, errlen, "%s: the file changed while it was read", path);
			goto out;
		}
	}
	if (found)
		*found = 1;
	r = qgd_conf_parse(cfg, path, text, got, err, errlen);
out:
	free(text);
	close(fd);
	return r;
}

int qgd_conf_finish(struct qgd_config *cfg, char *err, size_t errlen)
{
	struct qgd_priv_config *pc = &cfg->priv;

	if (cfg->arena_bytes > cfg->max_arena_bytes)
		return fail(err, errlen, "arena-size is larger than max-arena");
	if (pc->has_user && !pc->has_group) {
		if (!pc->user_has_gid)
			return fail(err, errlen, "user %u is not in the user database: name its group too",
				    (unsigned)pc->uid);
		pc->gid = pc->user_gid;
		pc->has_group = 1;
	}
	return 0;
}

size_t qgd_conf_options(struct option *out, size_t cap, int base, const struct option *extra, size_t nextra)
{
	size_t n = 0;

	if (cap < N_SETTINGS + nextra + 1)
		return 0;
	for (size_t i = 0; i < N_SETTINGS; i++)
		out[n++] = (struct option){ .name = settings[i].name,
					    .has_arg = settings[i].kind == K_FLAG ? optional_argument : required_argument,
					    .val = base + (int)i };
	for (size_t i = 0; i < nextra; i++)
		out[n++] = extra[i];
	out[n] = (struct option){ 0 };
	return n;
}

const char *qgd_conf_shortopts(void)
{
	static char s[2 * N_SETTINGS + 1];
	size_t n = 0;

	if (!s[0]) {
		for (size_t i = 0; i < N_SETTINGS; i++) {
			if (!settings[i].short_opt)
				continue;
			s[n++] = (char)settings[i].short_opt;
			if (settings[i].kind != K_FLAG)
				s[n++] = ':';
		}
		s[n] = 0;
	}
	return s;
}

const char *qgd_conf_name(int i)
{
	return i >= 0 && (size_t)i < N_SETTINGS ? settings[i].name : NULL;
}

int qgd_conf_by_short(int c)
{
	for (size_t i = 0; i < N_SETTINGS; i++)
		if (settings[i].short_opt == c)
			return (int)i;
	return -1;
}

/*
 * Settings a running daemon cannot take from a reload: where it listens
 * and as whom, its memory and cores, how it waits, and who shares weights
 * (weights stored under the old groups would stay shared).  max-sessions
 * and max-handshakes size the descriptors raised at start.
 */
static const char *const restart_keys[] = {
	"foreground", "socket", "socket-mode", "user", "group", "pool-size", "cpus", "threads", "epoll",
	"reserve-hugepages", "require-hugepages", "share-groups", "max-sessions", "max-handshakes",
};

static int needs_restart(const struct setting *st)
{
	for (size_t i = 0; i < sizeof restart_keys / sizeof restart_keys[0]; i++)
		if (strcmp(st->name, restart_keys[i]) == 0)
			return 1;
	switch (st->kind) {	/* what qgd_conf_apply knows how to copy */
	case K_FLAG: case K_SIZE: case K_U32: case K_INT: case K_LEVEL:
	case K_USERS: case K_GROUPS: case K_STATS_GROUP:
		return 0;
	default:
		return 1;
	}
}

int qgd_conf_restart_key(const char *name)
{
	const struct setting *st = find(name);

	return st ? needs_restart(st) : -1;
}

/* A size in the largest unit that holds it exactly. */
static void format_size(uint64_t v, char *buf, size_t len)
{
	if (v && v % (1ull << 30) == 0)
		snprintf(buf, len, "%lluG", (unsigned long long)(v >> 30));
	else if (v && v % (1ull << 20) == 0)
		snprintf(buf, len, "%lluM", (unsigned long long)(v >> 20));
	else if (v && v % 1024 == 0)
		snprintf(buf, len, "%lluK", (unsigned long long)(v >> 10));
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* The names of IDS (users, or groups with GROUPS), comma separated; numbers where the database has no name. */
static void format_ids(const uint32_t *ids, size_t n, int groups, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n && at < len; i++) {
		const char *name = NULL;
		if (groups) {
			struct group *gr = getgrgid((gid_t)ids[i]);
			name = gr ? gr->gr_name : NULL;
		} else {
			struct passwd *pw = getpwuid((uid_t)ids[i]);
			name = pw ? pw->pw_name : NULL;
		}
		if (name)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? "," : "", name);
		else
			at += (size_t)snprintf(buf + at, len - at, "%s%u", i ? "," : "", (unsigned)ids[i]);
	}
}

/* Setting ST's value in CFG as the file writes it, in BUF; 0, or -1 when it has none (the default stands). */
static int format_value(const struct qgd_config *cfg, const struct setting *st, char *buf, size_t len)
{
	const char *base = (const char *)cfg;
	const struct qgd_priv_config *pc = &cfg->priv;

	buf[0] = 0;
	switch (st->kind) {
	case K_FLAG:
		snprintf(buf, len, "%s", *(const int *)(base + st->off) ? "yes" : "no");
		return 0;
	case K_PATH:
		if (!cfg->socket_path)
			return -1;
		snprintf(buf, len, "%s", cfg->socket_path);
		return 0;
	case K_SIZE:
		format_size(*(const uint64_t *)(base + st->off), buf, len);
		return *(const uint64_t *)(base + st->off) ? 0 : -1;	/* 0: the pool's size */
	case K_U32:
		snprintf(buf, len, "%u", *(const uint32_t *)(base + st->off));
		return 0;
	case K_INT:
		snprintf(buf, len, "%d", *(const int *)(base + st->off));
		return *(const int *)(base + st->off) >= (int)st->lo ? 0 : -1;
	case K_LEVEL: {
		static const char *const names[] = { "error", "warn", "info", "debug" };
		int l = *(const int *)(base + st->off);
		snprintf(buf, len, "%s", l >= 0 && l < 4 ? names[l] : "info");
		return 0;
	}
	case K_MODE:
		snprintf(buf, len, "%04o", pc->socket_mode);
		return 0;
	case K_FILE:
		snprintf(buf, len, "%s", base + st->off);
		return buf[0] ? 0 : -1;
	case K_USER:
		if (!pc->has_user)
			return -1;
		format_ids((const uint32_t *)&pc->uid, 1, 0, buf, len);
		return 0;
	case K_GROUP:
		if (!pc->has_group)
			return -1;
		format_ids((const uint32_t *)&pc->gid, 1, 1, buf, len);
		return 0;
	case K_USERS:
		format_ids((const uint32_t *)pc->allow_users, pc->n_allow_users, 0, buf, len);
		return pc->n_allow_users ? 0 : -1;
	case K_GROUPS:
		format_ids((const uint32_t *)pc->allow_groups, pc->n_allow_groups, 1, buf, len);
		return pc->n_allow_groups ? 0 : -1;
	case K_SHARE:
		format_ids((const uint32_t *)cfg->share_gids, cfg->n_share_gids, 1, buf, len);
		return cfg->n_share_gids ? 0 : -1;
	case K_CPUS:
		if (!cfg->cpus)
			return -1;
		snprintf(buf, len, "%s", cfg->cpus);
		return 0;
	case K_STATS_GROUP:
		if (!cfg->has_stats_group)
			return -1;
		format_ids((const uint32_t *)&cfg->stats_gid, 1, 1, buf, len);
		return 0;
	}
	return -1;
}

void qgd_conf_dump(const struct qgd_config *cfg, FILE *f)
{
	char v[4096];

	for (size_t i = 0; i < N_SETTINGS; i++) {
		const struct setting *st = &settings[i];
		if (st->cli_only || strcmp(st->name, "foreground") == 0)
			continue;
		if (format_value(cfg, st, v, sizeof v) == 0)
			fprintf(f, "%s = %s\n", st->name, v);
		else
			fprintf(f, "#%s =\t(not set: the default)\n", st->name);
	}
}

/* Copy setting ST from NEXT into CUR (a kind needs_restart() lets through). */
static void copy_setting(struct qgd_config *cur, const struct qgd_config *next, const struct setting *st)
{
	switch (st->kind) {
	case K_FLAG: case K_INT: case K_LEVEL:
		memcpy((char *)cur + st->off, (const char *)next + st->off, sizeof(int));
		break;
	case K_SIZE:
		memcpy((char *)cur + st->off, (const char *)next + st->off, sizeof(uint64_t));
		break;
	case K_U32:
		memcpy((char *)cur + st->off, (const char *)next + st->off, sizeof(uint32_t));
		break;
	case K_USERS:
		cur->priv.n_allow_users = next->priv.n_allow_users;
		memcpy(cur->priv.allow_users, next->priv.allow_users, sizeof cur->priv.allow_users);
		break;
	case K_GROUPS:
		cur->priv.n_allow_groups = next->priv.n_allow_groups;
		memcpy(cur->priv.allow_groups, next->priv.allow_groups, sizeof cur->priv.allow_groups);
		break;
	case K_STATS_GROUP:
		cur->has_stats_group = next->has_stats_group;
		cur->stats_gid = next->stats_gid;
		break;
	default:
		break;
	}
}

void qgd_conf_apply(struct qgd_config *cur, const struct qgd_config *next,
		    void (*note)(const char *name, const char *from, const char *to, int applied))
{
	char a[4096], b[4096];

	for (size_t i = 0; i < N_SETTINGS; i++) {
		const struct setting *st = &settings[i];
		if (st->cli_only)
			continue;
		int ha = format_value(cur, st, a, sizeof a), hb = format_value(next, st, b, sizeof b);
		if (ha == hb && strcmp(a, b) == 0)
			continue;
		int restart = needs_restart(st);
		if (!restart)
			copy_setting(cur, next, st);
		if (note)
			note(st->name, ha == 0 ? a : "(default)", hb == 0 ? b : "(default)", !restart);
	}
}
