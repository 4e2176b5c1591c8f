/*
 * log.h - qgraphd's log: to stderr with a timestamp in the foreground, to
 * syslog (and so the journal) otherwise.  Messages about one session go
 * through a rate limit, so a misbehaving client cannot flood the log.
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

/* Where and how much to log.  FOREGROUND: stderr, else syslog. */
void qgd_log_open(int foreground, enum qgd_log_level level);
/* Reopen the log (SIGHUP). */
void qgd_log_reopen(void);
/* The level named NAME ("error", "warn", "info", "debug"), or -1. */
int qgd_log_level_from_name(const char *name);

void qgd_log(enum qgd_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* At most BURST messages per INTERVAL_MS, then one note of how many were dropped. */
struct qgd_ratelimit {
	uint64_t window_start_ms;
	uint32_t interval_ms, burst, in_window, dropped;
};

/* Log through RL: returns without logging when the limit is reached. */
void qgd_log_limited(struct qgd_ratelimit *rl, enum qgd_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define qgd_error(...) qgd_log(QGD_LOG_ERROR, __VA_ARGS__)
#define qgd_warn(...) qgd_log(QGD_LOG_WARN, __VA_ARGS__)
#define qgd_info(...) qgd_log(QGD_LOG_INFO, __VA_ARGS__)
#define qgd_debug(...) qgd_log(QGD_LOG_DEBUG, __VA_ARGS__)

#endif /* QGD_LOG_H */
