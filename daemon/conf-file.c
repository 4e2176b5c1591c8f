/*
 * conf-file.c - qgraphd's configuration file (see conf.h).
 *
 * The file is read whole (it is small and bounded), then cut into lines
 * that are checked before anything looks inside them: length, NULs and
 * control characters first, then the "key = value" shape, then the key,
 * then the value through the same setter the command line uses
 * (conf.c), so that every error names the file, the line and the key.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "conf-impl.h"

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
	unsigned seen[QGD_CONF_N_SETTINGS] = { 0 };
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
			return qgd_conf_fail(err, errlen, "%s:%u: line longer than %u bytes", file, lineno, QGD_CONF_MAX_LINE);
		memcpy(line, text + at, n);
		at += n + (nl != NULL);
		if (n && line[n - 1] == '\r')
			n--;	/* CRLF */
		line[n] = 0;
		for (size_t i = 0; i < n; i++) {
			if (line[i] == 0)
				return qgd_conf_fail(err, errlen, "%s:%u: a NUL byte", file, lineno);
			if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
				return qgd_conf_fail(err, errlen, "%s:%u: control character 0x%02x", file, lineno,
					    (unsigned char)line[i]);
			if (line[i] == 0x7f)
				return qgd_conf_fail(err, errlen, "%s:%u: control character 0x7f", file, lineno);
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
			return qgd_conf_fail(err, errlen, "%s:%u: expected 'key = value', found '%s'", file, lineno,
				    shown(p, show, sizeof show));
		char *key_end = eq;
		while (key_end > p && is_blank(key_end[-1]))
			key_end--;
		*key_end = 0;
		char *value = eq + 1;
		while (is_blank(*value))
			value++;
		if (!*p)
			return qgd_conf_fail(err, errlen, "%s:%u: a value with no key", file, lineno);
		const struct setting *st = qgd_conf_find(p);
		if (!st || st->cli_only)
			return qgd_conf_fail(err, errlen, "%s:%u: unknown key '%s'", file, lineno, shown(p, show, sizeof show));
		size_t idx = (size_t)(st - qgd_conf_settings);
		if (seen[idx])
			return qgd_conf_fail(err, errlen, "%s:%u: '%s' is already set on line %u", file, lineno, st->name,
				    seen[idx]);
		seen[idx] = lineno;
		if (!*value)
			return qgd_conf_fail(err, errlen, "%s:%u: '%s' has no value", file, lineno, st->name);
		if (qgd_conf_set_one(cfg, st, value, why, sizeof why))
			return qgd_conf_fail(err, errlen, "%s:%u: invalid value for '%s': '%s' (%s)", file, lineno, st->name,
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
		qgd_conf_fail(err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		qgd_conf_fail(err, errlen, "%s: %s", path, strerror(-r));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = qgd_conf_fail(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	if (st.st_size > (off_t)QGD_CONF_MAX_BYTES) {
		r = qgd_conf_fail(err, errlen, "%s: larger than %u bytes", path, QGD_CONF_MAX_BYTES);
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		r = -ENOMEM;
		qgd_conf_fail(err, errlen, "%s: out of memory", path);
		goto out;
	}
	/* read to the end, but never past the bound: the file may grow under us */
	for (;;) {
		ssize_t n = read(fd, text + got, (size_t)st.st_size + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			qgd_conf_fail(err, errlen, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > (size_t)st.st_size) {
			r = qgd_conf_fail(err, errlen, "%s: the file changed while it was read", path);
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
