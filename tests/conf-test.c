/*
 * conf-test.c - qgraphd's settings (daemon/conf.c): a file that sets every
 * key, every way a file can be wrong (each refused with its line), hostile
 * text (long lines, NULs, control characters, overflowing numbers, random
 * mutations of a good file), the command line's setter, and loading files.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "log.h"
#include "tap.h"

static char err[1024];

static int parse(struct qgd_config *cfg, const char *text, size_t len)
{
	qgd_conf_defaults(cfg);
	err[0] = 0;
	return qgd_conf_parse(cfg, "t.conf", text, len, err, sizeof err);
}

static int parse_str(struct qgd_config *cfg, const char *text)
{
	return parse(cfg, text, strlen(text));
}

static const char good[] =
	"# qgraphd.conf for the test\n"
	"\n"
	"  socket = /tmp/qgd-conf-test.sock  \n"
	"pool-size = 2G\n"
	"arena-size=8M\r\n"
	"max-arena\t=\t512m\n"
	"max-nodes = 100\n"
	"max-sessions = 3\n"
	"graph-timeout = 1000\n"
	"poll-us = 0\n"
	"batch-max = 16\n"
	"batch-window-us = 2500\n"
	"epoll = yes\n"
	"foreground = no\n"
	"log-level = debug\n"
	"socket-mode = 0600\n"
	"user = root\n"
	"group = 0\n"
	"allow-users = root, 1234 5678\n"
	"allow-groups = 0,4321\n"
	"user-weights = 128M\n"
	"user-models = 256M\n"
	"user-graph-metadata = 64M\n";

static void test_good(void)
{
	struct qgd_config c;
	int r = parse_str(&c, good);

	tap_ok(r == 0, "a file with every key parses (%s)", err);
	tap_ok(c.socket_path && strcmp(c.socket_path, "/tmp/qgd-conf-test.sock") == 0, "socket, trimmed");
	tap_ok(c.pool_bytes == 2ull << 30 && c.arena_bytes == 8ull << 20 && c.max_arena_bytes == 512ull << 20,
	       "sizes with suffixes, CRLF and tabs");
	tap_ok(c.max_nodes == 100 && c.max_sessions == 3 && c.graph_timeout_ms == 1000 && c.poll_us == 0 &&
		       c.batch_max == 16 && c.batch_window_us == 2500,
	       "numbers");
	tap_ok(c.force_epoll == 1 && c.foreground == 0 && c.log_level == QGD_LOG_DEBUG, "flags and the log level");
	tap_ok(c.priv.socket_mode == 0600, "socket-mode in octal");
	tap_ok(c.priv.has_user && c.priv.uid == 0 && c.priv.has_group && c.priv.gid == 0, "user by name, group by number");
	tap_ok(c.priv.n_allow_users == 3 && c.priv.allow_users[0] == 0 && c.priv.allow_users[1] == 1234 &&
	       c.priv.allow_users[2] == 5678, "allow-users: names and numbers, commas and blanks");
	tap_ok(c.priv.n_allow_groups == 2 && c.priv.allow_groups[1] == 4321, "allow-groups");
	tap_ok(c.user_weights == 128ull << 20 && c.user_models == 256ull << 20 && c.user_graph_metadata == 64ull << 20 &&
		       qgd_conf_restart_key("user-weights") == 0 && qgd_conf_restart_key("user-models") == 0 &&
		       qgd_conf_restart_key("user-graph-metadata") == 0,
	       "the per-user quotas, which a reload applies");
	tap_ok(qgd_conf_finish(&c, err, sizeof err) == 0, "and it is consistent");

	tap_ok(parse(&c, "", 0) == 0 && c.pool_bytes == 1ull << 30 && c.priv.socket_mode == 0660,
	       "an empty file leaves the defaults");
	tap_ok(parse_str(&c, "max-nodes = 7") == 0 && c.max_nodes == 7, "a last line without a newline");
}

/* Text that must be refused, and what the message must say. */
static const struct {
	const char *text;
	const char *says;
} bad[] = {
	{ "pool-size = 1G\nbogus = 1\n", "t.conf:2: unknown key 'bogus'" },
	{ "pool-size = 1G\n# c\npool-size = 2G\n", "t.conf:3: 'pool-size' is already set on line 1" },
	{ "max-nodes =\n", "t.conf:1: 'max-nodes' has no value" },
	{ "max-nodes =   \t\n", "t.conf:1: 'max-nodes' has no value" },
	{ "\n\nmax-nodes\n", "t.conf:3: expected 'key = value'" },
	{ "= 5\n", "t.conf:1: a value with no key" },
	{ "ready-fd = 3\n", "t.conf:1: unknown key 'ready-fd'" },
	{ "Pool-Size = 1G\n", "unknown key" },
	{ "max-nodes = 18446744073709551616\n", "t.conf:1: invalid value for 'max-nodes'" },
	{ "max-nodes = 99999999999999999999999999\n", "invalid value for 'max-nodes'" },
	{ "max-nodes = 4294967297\n", "invalid value for 'max-nodes'" },
	{ "max-nodes = 1048577\n", "from 1 to 1048576" },
	{ "max-nodes = 0\n", "invalid value" },
	{ "max-nodes = -1\n", "invalid value" },
	{ "max-nodes = +1\n", "invalid value" },
	{ "max-nodes = 0x10\n", "invalid value" },
	{ "poll-us = 1 2\n", "invalid value for 'poll-us'" },
	{ "batch-max = 0\n", "from 1 to 16" },
	{ "batch-max = 17\n", "from 1 to 16" },
	{ "batch-window-us = 1000001\n", "from 0 to 1000000" },
	{ "pool-size = 17179869184G\n", "invalid value for 'pool-size'" },
	{ "pool-size = 18446744073709551615K\n", "invalid value for 'pool-size'" },
	{ "pool-size = 99999999999999999999\n", "invalid value for 'pool-size'" },
	{ "pool-size = 1T\n", "invalid value for 'pool-size'" },
	{ "pool-size = 1GG\n", "invalid value" },
	{ "pool-size = 1023K\n", "at least 1048576" },
	{ "arena-size = 4095\n", "invalid value for 'arena-size'" },
	{ "user-models = 4095\n", "invalid value for 'user-models'" },
	{ "user-graph-metadata = 1T\n", "invalid value for 'user-graph-metadata'" },
	{ "pool-size = G\n", "invalid value" },
	{ "epoll = maybe\n", "expected yes or no" },
	{ "log-level = loud\n", "invalid value for 'log-level'" },
	{ "socket-mode = 0400\n", "owner must read and write" },
	{ "socket-mode = 0999\n", "invalid value for 'socket-mode'" },
	{ "socket-mode = 1777\n", "invalid value for 'socket-mode'" },
	{ "socket-mode = 660x\n", "invalid value for 'socket-mode'" },
	{ "socket-mode = -0660\n", "invalid value for 'socket-mode'" },
	{ "user = qgraph-no-such-user-here\n", "t.conf:1: invalid value for 'user'" },
	{ "group = qgraph-no-such-group-here\n", "invalid value for 'group'" },
	{ "user = 4294967295\n", "invalid value for 'user'" },
	{ "allow-users = , ,,\n", "an empty list" },
	{ "allow-groups = 1,qgraph-no-such-group-here\n", "no group 'qgraph-no-such-group-here'" },
	{ "ok = 1\x01\n", "t.conf:1: control character 0x01" },
	{ "max-nodes = 1\x7f\n", "control character 0x7f" },
	{ "max-nodes = 1\rx\n", "control character 0x0d" },
};

static void test_bad(void)
{
	struct qgd_config c;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int r = parse_str(&c, bad[i].text);
		tap_ok(r == -EINVAL && strstr(err, bad[i].says), "refused: %s", err);
	}
	/* a socket path too long for sun_path */
	char text[400];
	snprintf(text, sizeof text, "socket = /%0200d\n", 0);
	tap_ok(parse_str(&c, text) == -EINVAL && strstr(err, "shorter than"), "a socket path too long: %.60s", err);
	/* 65 users */
	size_t at = (size_t)snprintf(text, sizeof text, "allow-users =");
	for (int i = 0; i < 65; i++)
		at += (size_t)snprintf(text + at, sizeof text - at, " %d", i + 1000);
	tap_ok(parse_str(&c, text) == -EINVAL && strstr(err, "more than 64"), "65 allowed users: %s", err);
}

static void test_hostile(void)
{
	struct qgd_config c;
	static char text[3 * QGD_CONF_MAX_LINE];

	/* NULs: the text has a length, a NUL inside it is a NUL, not an end */
	static const char nul[] = "pool-size = 2G\nmax-nodes = 5\0 and more\n";
	tap_ok(parse(&c, nul, sizeof nul - 1) == -EINVAL && strstr(err, "t.conf:2: a NUL byte"), "NUL: %s", err);
	static const char nul2[] = "\0";
	tap_ok(parse(&c, nul2, 1) == -EINVAL && strstr(err, ":1: a NUL"), "a lone NUL");

	/* long lines: one byte over the limit is refused, a line at it is fine */
	size_t n = (size_t)snprintf(text, sizeof text, "max-nodes = 1\n# short\n");
	memset(text + n, 'a', QGD_CONF_MAX_LINE + 1);
	n += QGD_CONF_MAX_LINE + 1;
	text[n++] = '\n';
	tap_ok(parse(&c, text, n) == -EINVAL && strstr(err, "t.conf:3: line longer than"), "a long line: %s", err);
	text[0] = '#';
	memset(text + 1, 'b', QGD_CONF_MAX_LINE - 1);
	text[QGD_CONF_MAX_LINE] = '\n';
	tap_ok(parse(&c, text, QGD_CONF_MAX_LINE + 1) == 0, "a comment of exactly %u bytes", QGD_CONF_MAX_LINE);
	memset(text, 'k', 2 * QGD_CONF_MAX_LINE);
	tap_ok(parse(&c, text, 2 * QGD_CONF_MAX_LINE) == -EINVAL && strstr(err, "t.conf:1: line longer"),
	       "a huge line with no newline");
	memset(text, 'k', QGD_CONF_MAX_LINE - 4);
	memcpy(text + QGD_CONF_MAX_LINE - 4, " = 1", 4);
	tap_ok(parse(&c, text, QGD_CONF_MAX_LINE) == -EINVAL && strstr(err, "unknown key 'kkkk") &&
	       strlen(err) < 200, "a long unknown key is cut short in the message (%zu bytes)", strlen(err));

	/* mutations of the good file: refused cleanly or accepted, never worse */
	struct tap_rng rng = { 77 };
	int refused = 0, accepted = 0, bad_msg = 0;
	int rounds = 3000 * tap_scale();
	for (int i = 0; i < rounds; i++) {
		size_t len = sizeof good - 1;
		memcpy(text, good, len);
		int flips = 1 + (int)(tap_rand(&rng) % 4);
		for (int f = 0; f < flips && len; f++) {
			size_t at = tap_rand(&rng) % len;
			switch (tap_rand(&rng) % 4) {
			case 0: text[at] = (char)tap_rand(&rng); break;
			case 1: text[at] ^= (char)(1u << (tap_rand(&rng) % 8)); break;
			case 2: len = at; break;	/* truncated */
			default: text[at] = "=\n#\0 ,9"[tap_rand(&rng) % 7]; break;
			}
		}
		int r = parse(&c, text, len);
		if (r == 0)
			accepted++;
		else if (r == -EINVAL && strncmp(err, "t.conf:", 7) == 0 && atoi(err + 7) >= 1 && atoi(err + 7) <= 30)
			refused++;
		else
			bad_msg++;
	}
	tap_ok(bad_msg == 0 && refused > 0, "%d mutated files: %d refused with a line number, %d accepted, %d otherwise",
	       rounds, refused, accepted, bad_msg);
	/* random bytes */
	bad_msg = 0;
	for (int i = 0; i < rounds; i++) {
		size_t len = tap_rand(&rng) % 300;
		for (size_t k = 0; k < len; k++)
			text[k] = (char)tap_rand(&rng);
		int r = parse(&c, text, len);
		if (r != 0 && !(r == -EINVAL && strncmp(err, "t.conf:", 7) == 0))
			bad_msg++;
	}
	tap_ok(bad_msg == 0, "%d random texts: refused with a place or accepted", rounds);
}

static void test_set(void)
{
	struct qgd_config c;

	qgd_conf_defaults(&c);
	tap_ok(qgd_conf_set(&c, "no-such-option", "1", err, sizeof err) == -ENOENT, "an unknown setting");
	tap_ok(qgd_conf_set(&c, "epoll", NULL, err, sizeof err) == 0 && c.force_epoll == 1, "--epoll alone is yes");
	tap_ok(qgd_conf_set(&c, "epoll", "no", err, sizeof err) == 0 && c.force_epoll == 0, "--epoll=no");
	tap_ok(qgd_conf_set(&c, "max-nodes", NULL, err, sizeof err) == -EINVAL, "a value-taking option without one");
	tap_ok(qgd_conf_set(&c, "ready-fd", "5", err, sizeof err) == 0 && c.ready_fd == 5,
	       "ready-fd is a command-line setting");
	/* the command line is applied after the file: it wins */
	tap_ok(parse_str(&c, "max-nodes = 9\n") == 0 && qgd_conf_set(&c, "max-nodes", "11", err, sizeof err) == 0 &&
	       c.max_nodes == 11, "a later setting replaces the file's");

	qgd_conf_defaults(&c);
	qgd_conf_set(&c, "arena-size", "2G", err, sizeof err);
	tap_ok(qgd_conf_finish(&c, err, sizeof err) == -EINVAL && strstr(err, "max-arena"),
	       "arena-size above max-arena: %s", err);
	qgd_conf_defaults(&c);
	qgd_conf_set(&c, "user", "root", err, sizeof err);
	tap_ok(qgd_conf_finish(&c, err, sizeof err) == 0 && c.priv.has_group && c.priv.gid == 0,
	       "a user without a group takes its primary group");
	qgd_conf_defaults(&c);
	qgd_conf_set(&c, "user", "3999999999", err, sizeof err);
	int r = qgd_conf_finish(&c, err, sizeof err);
	tap_ok(r == -EINVAL && strstr(err, "name its group"), "a numeric user unknown to the database needs a group: %s",
	       err);

	struct option opts[64];
	static const struct option extra[] = { { "config", required_argument, NULL, 1 } };
	size_t n = qgd_conf_options(opts, 64, 512, extra, 1);
	int has_config = 0, has_socket = 0, epoll_opt = 0;
	for (size_t i = 0; i < n; i++) {
		has_config |= strcmp(opts[i].name, "config") == 0;
		has_socket |= strcmp(opts[i].name, "socket") == 0 && opts[i].has_arg == required_argument;
		epoll_opt |= strcmp(opts[i].name, "epoll") == 0 && opts[i].has_arg == optional_argument;
	}
	tap_ok(n > 10 && !opts[n].name && has_config && has_socket && epoll_opt,
	       "the getopt table: %zu options, settings and extras", n);
	tap_ok(qgd_conf_options(opts, 3, 512, extra, 1) == 0, "a table too small is refused");
	tap_ok(strcmp(qgd_conf_shortopts(), "fs:l:") == 0, "short options %s", qgd_conf_shortopts());
	tap_ok(qgd_conf_by_short('s') >= 0 && strcmp(qgd_conf_name(qgd_conf_by_short('s')), "socket") == 0 &&
	       qgd_conf_name(-1) == NULL && qgd_conf_name(1000) == NULL, "names by index and short option");
}

static void test_load(void)
{
	struct qgd_config c;
	char dir[] = "/tmp/qgd-conf-XXXXXX", path[64];
	int found = -1;

	if (!mkdtemp(dir)) {
		tap_ok(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof path, "%s/qgraphd.conf", dir);
	qgd_conf_defaults(&c);
	tap_ok(qgd_conf_load(&c, path, 1, &found, err, sizeof err) == 0 && found == 0, "a missing default file is fine");
	tap_ok(qgd_conf_load(&c, path, 0, &found, err, sizeof err) == -ENOENT && strstr(err, path),
	       "a missing named file is not: %s", err);
	tap_ok(qgd_conf_load(&c, dir, 0, &found, err, sizeof err) < 0 && strstr(err, "regular file"),
	       "a directory is refused: %s", err);
	FILE *f = fopen(path, "w");
	fputs("max-sessions = 4\nmax-nodes = many\n", f);
	fclose(f);
	qgd_conf_defaults(&c);
	int r = qgd_conf_load(&c, path, 0, &found, err, sizeof err);
	char want[160];
	snprintf(want, sizeof want, "%s:2: invalid value for 'max-nodes'", path);
	tap_ok(r == -EINVAL && strstr(err, want), "a bad file, named with its line: %s", err);
	f = fopen(path, "w");
	fputs("max-sessions = 4\n", f);
	fclose(f);
	qgd_conf_defaults(&c);
	tap_ok(qgd_conf_load(&c, path, 0, &found, err, sizeof err) == 0 && found == 1 && c.max_sessions == 4,
	       "a good file is read");
	/* larger than the bound */
	int fd = open(path, O_WRONLY | O_TRUNC);
	tap_ok(fd >= 0 && ftruncate(fd, QGD_CONF_MAX_BYTES + 1) == 0, "a file of %u bytes", QGD_CONF_MAX_BYTES + 1);
	close(fd);
	tap_ok(qgd_conf_load(&c, path, 0, &found, err, sizeof err) == -EINVAL && strstr(err, "larger than"),
	       "is refused: %s", err);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	test_good();
	test_bad();
	test_hostile();
	test_set();
	test_load();
	return tap_done();
}
