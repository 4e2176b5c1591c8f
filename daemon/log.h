/*
 * log.h - qgraphd's log: to stderr with a timestamp in the foreground
 * (--foreground), to stderr with "<N>" priority prefixes when stderr is the
 * journal's stream ($JOURNAL_STREAM, as systemd starts a service), to
 * syslog otherwise; errors before the daemon serves reach stderr in every
 * case, so a failed start is never silent.  Messages about one session's
 * requests go through that session's rate limit, and messages about
 * connections (accepted, refused, closed before anyone heard of them)
 * through a token bucket per uid, so that a misbehaving client, or one that
 * connects again and again, cannot flood the log.  What ends a session that
 * was logged as served is always logged.
 *
 * Every message is one line of printable text whatever it quotes: a
 * control byte or DEL in it is written \n, \t, \r or \xNN, and a backslash
 * \\, so that a name a client chose cannot write a line of its own (nor,
 * on the journal's stream, a "<N>" priority).  Callers quote as they like.
 */
#ifndef QGD_LOG_H
#define QGD_LOG_H

#include <stdint.h>

enum qgd_log_level {
	QGD_LOG_ERROR = 0,
	QGD_LOG_WARN,
	QGD_LOG_INFO,
	QGD_LOG_DEBUG,
};

/* Where and how much to log.  FOREGROUND: stderr, else the journal's stream or syslog. */
void qgd_log_open(int foreground, enum qgd_log_level level);
/* Log up to LEVEL from now on (a reload). */
void qgd_log_set_level(enum qgd_log_level level);
/* Start-up is over: errors go to the log alone from now on. */
void qgd_log_serving(void);
/* Reopen the log (SIGHUP). */
void qgd_log_reopen(void);
/* The level named NAME ("error", "warn", "info", "debug"), or -1. */
int qgd_log_level_from_name(const char *name);
/* Log the message FMT at LEVEL if the log takes that level (qgd_error and the others below say which). */
void qgd_log(enum qgd_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* At most BURST messages per INTERVAL_MS, then one note of how many were dropped. */
struct qgd_ratelimit {
	uint64_t window_start_ms;
	uint32_t interval_ms, burst, in_window, dropped;
};

/* Log through RL: returns without logging when the limit is reached. */
void qgd_log_limited(struct qgd_ratelimit *rl, enum qgd_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Log a message about a connection of UID through that uid's token bucket
 * (a burst of QGD_LOG_UID_BURST, then QGD_LOG_UID_PER_S messages a second;
 * the buckets of recently seen uids are kept, the longest idle one is
 * reused).  What a bucket drops is counted and said in one line when it
 * has tokens again.  Returns 1 when the message was logged (or is below
 * the log level), 0 when the bucket dropped it.
 */
int qgd_log_uid(uint32_t uid, enum qgd_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define QGD_LOG_UID_BURST 20
#define QGD_LOG_UID_PER_S 2

/* Say how many messages each full bucket dropped (the flood it limited is over): call now and then. */
void qgd_log_uid_flush(void);

#define qgd_error(...) qgd_log(QGD_LOG_ERROR, __VA_ARGS__)
#define qgd_warn(...) qgd_log(QGD_LOG_WARN, __VA_ARGS__)
#define qgd_info(...) qgd_log(QGD_LOG_INFO, __VA_ARGS__)
#define qgd_debug(...) qgd_log(QGD_LOG_DEBUG, __VA_ARGS__)

#endif /* QGD_LOG_H */
