/*
 * log.c - the daemon's log (see log.h).
 */
#include "config.h"

#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "stamp.h"

static int log_foreground = 1;
static int log_journal;		/* stderr is the journal's stream: "<N>" prefixes, no timestamp */
static int log_starting = 1;	/* until qgd_log_serving(): errors reach stderr whatever the log */
static enum qgd_log_level log_level = QGD_LOG_INFO;

static const char *const level_names[] = { "error", "warn", "info", "debug" };
static const int level_prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };

/* Is stderr the stream the journal gave us ($JOURNAL_STREAM is its "device:inode")? */
static bool stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char end;

	if (!env || sscanf(env, "%llu:%llu%c", &dev, &ino, &end) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void qgd_log_open(int foreground, enum qgd_log_level level)
{
	log_journal = stderr_is_journal();
	log_foreground = foreground || log_journal;
	log_level = level;
	if (!log_foreground)
		openlog("qgraphd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void qgd_log_set_level(enum qgd_log_level level)
{
	log_level = level;
}

void qgd_log_serving(void)
{
	log_starting = 0;
}

void qgd_log_reopen(void)
{
	if (!log_foreground) {
		closelog();
		openlog("qgraphd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	}
}

int qgd_log_level_from_name(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

/*
 * SRC made one line that says what it holds, into DST of CAP bytes: a
 * control byte or DEL as \n, \t, \r or \xNN, a backslash as \\ (so that
 * every escape reads one way), cut at the last escape that fits.  What a
 * message quotes (a client's weights or model name, a key of a file)
 * cannot start a line of its own, nor a journal "<N>" priority prefix.
 */
static void log_escape(char *dst, size_t cap, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	for (const unsigned char *c = (const unsigned char *)src; *c; c++) {
		char e[4];
		size_t len = 2;

		e[0] = '\\';
		if (*c == '\n')
			e[1] = 'n';
		else if (*c == '\t')
			e[1] = 't';
		else if (*c == '\r')
			e[1] = 'r';
		else if (*c == '\\')
			e[1] = '\\';
		else if (*c < 0x20 || *c == 0x7f) {
			e[1] = 'x';
			e[2] = hex[*c >> 4];
			e[3] = hex[*c & 0xf];
			len = 4;
		} else {
			e[0] = (char)*c;
			len = 1;
		}
		if (cap - n <= len)
			break;
		memcpy(dst + n, e, len);
		n += len;
	}
	dst[n] = 0;
}

static void log_v(enum qgd_log_level level, const char *fmt, va_list ap)
{
	char raw[1024], msg[1024];

	if (level > log_level)
		return;
	vsnprintf(raw, sizeof raw, fmt, ap);
	log_escape(msg, sizeof msg, raw);
	/* one write per line, so lines from a crash are never interleaved */
	char line[1200];
	int n;
	if (log_journal) {
		/* the journal stamps the line and reads its priority from the prefix (sd-daemon(3)) */
		n = snprintf(line, sizeof line, "<%d>%s: %s\n", level_prio[level], level_names[level], msg);
		if (n > 0)
			(void)!write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
		return;
	}
	if (!log_foreground) {
		syslog(level_prio[level], "%s", msg);
		/* a failed start is said where whoever started it looks, too */
		if (log_starting && level == QGD_LOG_ERROR) {
			n = snprintf(line, sizeof line, "qgraphd: %s\n", msg);
			if (n > 0)
				(void)!write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
		}
		return;
	}
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ qgraphd %s: %s\n",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			 ts.tv_nsec / 1000000, level_names[level], msg);
	if (n > 0)
		(void)!write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

void qgd_log(enum qgd_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_v(level, fmt, ap);
	va_end(ap);
}

void qgd_log_limited(struct qgd_ratelimit *rl, enum qgd_log_level level, const char *fmt, ...)
{
	va_list ap;
	uint64_t now = qg_stamp_ms();

	if (level > log_level)
		return;
	if (!rl->interval_ms) {
		rl->interval_ms = 5000;
		rl->burst = 10;
	}
	if (now - rl->window_start_ms >= rl->interval_ms) {
		if (rl->dropped)
			qgd_log(QGD_LOG_WARN, "%u messages like the next were dropped (rate limit)", rl->dropped);
		rl->window_start_ms = now;
		rl->in_window = rl->dropped = 0;
	}
	if (rl->in_window >= rl->burst) {
		rl->dropped++;
		return;
	}
	rl->in_window++;
	va_start(ap, fmt);
	log_v(level, fmt, ap);
	va_end(ap);
}

/* A uid's token bucket (qgd_log_uid): tokens in thousandths, refilled by the milliseconds since LAST_MS. */
struct uid_bucket {
	uint32_t uid;
	uint32_t milli_tokens;
	uint32_t dropped;
	int used;
	uint64_t last_ms;
};

#define UID_BUCKETS 32

static struct uid_bucket uid_buckets[UID_BUCKETS];

/* Refill B up to now; then say what it dropped, if it has a token to say it with. */
static void bucket_refill(struct uid_bucket *b, uint64_t now)
{
	uint64_t add = (now - b->last_ms) * QGD_LOG_UID_PER_S;	/* thousandths of a token a millisecond */
	uint64_t full = (uint64_t)QGD_LOG_UID_BURST * 1000;

	b->milli_tokens = (uint32_t)(b->milli_tokens + add > full ? full : b->milli_tokens + add);
	b->last_ms = now;
	if (b->dropped && b->milli_tokens >= 1000) {
		b->milli_tokens -= 1000;
		qgd_log(QGD_LOG_WARN, "uid %u: %u messages about its connections were suppressed (rate limit)",
			(unsigned)b->uid, b->dropped);
		b->dropped = 0;
	}
}

/* UID's bucket: the one it has, else a free one, else the longest idle one (whose count is said first). */
static struct uid_bucket *bucket_for(uint32_t uid, uint64_t now)
{
	struct uid_bucket *b = &uid_buckets[0];

	for (int i = 0; i < UID_BUCKETS; i++) {
		struct uid_bucket *c = &uid_buckets[i];
		if (c->used && c->uid == uid)
			return c;
		if (!c->used ? b->used : b->used && c->last_ms < b->last_ms)
			b = c;
	}
	if (b->used && b->dropped)
		qgd_log(QGD_LOG_WARN, "uid %u: %u messages about its connections were suppressed (rate limit)",
			(unsigned)b->uid, b->dropped);
	*b = (struct uid_bucket){ .uid = uid, .milli_tokens = QGD_LOG_UID_BURST * 1000, .used = 1, .last_ms = now };
	return b;
}

int qgd_log_uid(uint32_t uid, enum qgd_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return 1;
	uint64_t now = qg_stamp_ms();
	struct uid_bucket *b = bucket_for(uid, now);
	bucket_refill(b, now);
	if (b->milli_tokens < 1000) {
		b->dropped++;
		return 0;
	}
	b->milli_tokens -= 1000;
	va_start(ap, fmt);
	log_v(level, fmt, ap);
	va_end(ap);
	return 1;
}

void qgd_log_uid_flush(void)
{
	uint64_t now = qg_stamp_ms();

	for (int i = 0; i < UID_BUCKETS; i++)
		if (uid_buckets[i].used && uid_buckets[i].dropped)
			bucket_refill(&uid_buckets[i], now);
}
