/*
 * conf-reload.c - qgraphd's settings shown and reloaded (see conf.h):
 * each setting's value as the file writes it (--dump-config), which of
 * them a running daemon can take from a reload, and copying those.
 */
#include "config.h"

#include <grp.h>
#include <pwd.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "conf.h"
#include "conf-impl.h"

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
	const struct setting *st = qgd_conf_find(name);

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

	for (size_t i = 0; i < QGD_CONF_N_SETTINGS; i++) {
		const struct setting *st = &qgd_conf_settings[i];
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

	for (size_t i = 0; i < QGD_CONF_N_SETTINGS; i++) {
		const struct setting *st = &qgd_conf_settings[i];
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
