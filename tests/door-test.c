/*
 * door-test.c - qgraphd's front door under a hostile local user.
 *
 * Connections that never send a Hello cannot lock honest clients out:
 * they are bounded per uid and in all, apart from the sessions, and a
 * flood of them (reopened as they are dropped) leaves a client of another
 * uid, and one of the flooder's own, getting in every time.  A uid the
 * access policy excludes is refused the moment it connects, and told why.
 * Out of descriptors, the daemon refuses clients with a reason instead of
 * spinning on its listening socket, and serves again once some are free.
 * A session's last word is logged after any number of refusals, while a
 * connect flood writes a bounded number of log lines.  The daemon keeps
 * none of its launcher's descriptors, and checks max-message before it
 * decodes a record.
 *
 * The parts that need a second uid run as root only (TAP skip otherwise).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon-util.h"
#include "doorbell.h"
#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "region.h"
#include "ring.h"
#include "shm.h"
#include "sock.h"
#include "raw-client.h"
#include "tap.h"
#include "wire.h"

enum {
	FLOOD_UID = 60021,	/* opens silent connections (root only) */
	HONEST_UID = 60022,	/* a client of another uid (root only) */
	EXCLUDED_UID = 60023,	/* not in allow-users (root only) */
};

static int is_root;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Start D with EXTRA options in a directory other uids may pass through (as root); 0 when ready. */
static int start(struct test_daemon *d, const char *extra)
{
	char opts[512];

	memset(d, 0, sizeof *d);
	snprintf(d->dir, sizeof d->dir, "/tmp/qgd-door-XXXXXX");
	if (!mkdtemp(d->dir) || chmod(d->dir, 0711))
		return -errno;
	snprintf(opts, sizeof opts, "%s %s", is_root ? "--socket-mode 0666" : "", extra ? extra : "");
	int r = daemon_start(d, opts);
	if (r)
		daemon_dump_log(d);
	return r;
}

/* Connect with libqgraph and read the stats: 0, or -errno with the reason in ERR. */
static int honest_client(struct test_daemon *d, char *err, size_t errlen)
{
	struct qgraph_connect_opts o = { .socket = d->sock, .name = "honest", .arena_bytes = 1 << 20 };
	struct qgraph_session *s = NULL;
	char stats[4096];

	err[0] = 0;
	int r = qgraph_connect(&o, &s, err, errlen);
	if (r)
		return r;
	if (qgraph_stats(s, stats, sizeof stats) <= 0) {
		snprintf(err, errlen, "stats: %s", qgraph_session_error(s));
		r = -EIO;
	}
	qgraph_session_close(s);
	return r;
}

/*
 * The first message on FD within MS milliseconds, taken as a Welcome: its
 * error text in MSG.  1 when one came (and carried an error), 0 when the
 * connection closed or nothing came.
 */
static int refusal_on(int fd, int ms, char *msg, size_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint8_t buf[4096];

	msg[0] = 0;
	if (poll(&p, 1, ms) != 1)
		return 0;
	ssize_t n = recv(fd, buf, sizeof buf, 0);
	if (n <= 0)
		return 0;
	Qgraph__Welcome *w = qgraph__welcome__unpack(NULL, (size_t)n, buf);
	if (!w)
		return 0;
	int refused = w->error && *w->error;
	if (refused)
		snprintf(msg, len, "%s", w->error);
	qgraph__welcome__free_unpacked(w, NULL);
	return refused;
}

/* Become UID (and GID UID, no other groups): in a forked child. */
static int become(uid_t uid)
{
	return setgroups(0, NULL) || setgid((gid_t)uid) || setuid(uid) ? -1 : 0;
}

/*
 * In a child (as UID when is_root, else as we are): hold N connections
 * that never send a Hello, each reopened as soon as the daemon drops it,
 * until killed.
 */
static pid_t flood(struct test_daemon *d, uid_t uid, int n)
{
	pid_t pid = tap_fork();

	if (pid != 0)
		return pid;
	if (uid && become(uid))
		_exit(4);
	struct pollfd *p = calloc((size_t)n, sizeof *p);
	for (int i = 0; i < n; i++) {
		p[i].fd = qg_sock_connect(d->sock);
		p[i].events = POLLIN;
	}
	for (;;) {
		if (poll(p, (nfds_t)n, 100) < 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (p[i].fd >= 0 && !p[i].revents)
				continue;
			if (p[i].fd >= 0)
				close(p[i].fd);
			p[i].fd = qg_sock_connect(d->sock);
			p[i].revents = 0;
		}
	}
}

static void stop_flood(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

/* Fork HONEST tries as UID (0: as we are); how many were served, and the last refusal in ERR. */
static int honest_tries(struct test_daemon *d, uid_t uid, int tries, char *err, size_t errlen)
{
	int p[2], st, served = 0;

	if (pipe(p))
		return -1;
	pid_t pid = tap_fork();
	if (pid == 0) {
		char e[512] = "";
		close(p[0]);
		if (uid && become(uid)) {
			snprintf(e, sizeof e, "cannot become uid %u", (unsigned)uid);
		} else {
			for (int i = 0; i < tries; i++) {
				char m[512];
				if (honest_client(d, m, sizeof m) == 0)
					served++;
				else
					snprintf(e, sizeof e, "%s", m);
			}
		}
		(void)!write(p[1], e, strlen(e));
		_exit(served);
	}
	close(p[1]);
	ssize_t n = read(p[0], err, errlen - 1);
	err[n > 0 ? n : 0] = 0;
	close(p[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * Silent connections of one uid: past handshakes-per-user (8) the oldest
 * is dropped and told why, and none of them takes a session's place
 * (max-sessions 4): an honest client gets in beside them.
 */
static void test_silent_bounded(void)
{
	struct test_daemon d;
	int fds[20], told = 0;
	char msg[512], err[512];

	if (!tap_ok(start(&d, "--max-sessions 4") == 0, "start qgraphd with max-sessions 4"))
		return daemon_cleanup(&d);
	for (int i = 0; i < 20; i++)
		fds[i] = qg_sock_connect(d.sock);
	for (int i = 0; i < 20; i++) {
		if (refusal_on(fds[i], i < 12 ? 1000 : 50, msg, sizeof msg) && strstr(msg, "handshakes-per-user"))
			told++;
	}
	tap_ok(told == 12, "20 silent connections of one uid: the 12 oldest are dropped, told why (%d): %s", told, msg);
	int r = honest_client(&d, err, sizeof err);
	tap_ok(r == 0, "beside 8 silent connections, with max-sessions 4, an honest client is served (%d %s)", r, err);
	struct qgraph_connect_opts o = { .socket = d.sock, .name = "holder", .arena_bytes = 1 << 20 };
	struct qgraph_session *s[5] = { 0 };
	int got = 0;
	for (int i = 0; i < 4; i++)
		got += qgraph_connect(&o, &s[i], err, sizeof err) == 0;
	r = qgraph_connect(&o, &s[4], err, sizeof err);
	tap_ok(got == 4 && r == -EDQUOT && strstr(err, "max-sessions"),
	       "the 4 sessions of max-sessions are served; a 5th is refused naming the key: %s", err);
	for (int i = 0; i < 5; i++)
		qgraph_session_close(s[i]);
	for (int i = 0; i < 20; i++)
		close(fds[i]);
	daemon_stop(&d, SIGTERM);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_cleanup(&d);
}

/*
 * 256 silent connections, reopened as they are dropped: honest clients
 * get in every time, of the flooder's own uid and (as root) of another.
 */
static void test_flood(void)
{
	struct test_daemon d;
	char err[512];

	if (!tap_ok(start(&d, NULL) == 0, "start qgraphd"))
		return daemon_cleanup(&d);
	pid_t f = flood(&d, is_root ? FLOOD_UID : 0, 256);
	usleep(200000);
	int served = honest_tries(&d, 0, 20, err, sizeof err);
	tap_ok(served == 20, "under a flood of 256 silent connections %s, a client of %s is served %d times of 20 %s",
	       is_root ? "of another uid" : "of its uid", is_root ? "root" : "the same uid", served, err);
	if (is_root) {
		served = honest_tries(&d, HONEST_UID, 20, err, sizeof err);
		tap_ok(served == 20, "and a client of uid %d, %d times of 20 %s", HONEST_UID, served, err);
		stop_flood(f);
		f = flood(&d, HONEST_UID, 256);
		usleep(200000);
		served = honest_tries(&d, HONEST_UID, 20, err, sizeof err);
		tap_ok(served == 20, "a flood of uid %d's own: its honest client is served %d times of 20 %s", HONEST_UID,
		       served, err);
	} else {
		tap_skip("a second uid needs root");
		tap_skip("a second uid needs root");
	}
	stop_flood(f);
	tap_ok(honest_client(&d, err, sizeof err) == 0, "after the flood, served as ever %s", err);
	daemon_stop(&d, SIGTERM);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_cleanup(&d);
}

/* A uid allow-users excludes is refused as it connects, before any Hello, and its flood locks no one out. */
static void test_excluded(void)
{
	struct test_daemon d;
	char opts[128], msg[512], err[512];

	if (!is_root) {
		tap_skip("a second uid needs root");
		tap_skip("a second uid needs root");
		return;
	}
	snprintf(opts, sizeof opts, "--allow-users %d", HONEST_UID);
	if (!tap_ok(start(&d, opts) == 0, "start qgraphd with allow-users %d", HONEST_UID))
		return daemon_cleanup(&d);
	int p[2];
	if (pipe(p))
		return;
	pid_t pid = tap_fork();
	if (pid == 0) {
		char m[512] = "no connection";
		close(p[0]);
		if (become(EXCLUDED_UID) == 0) {
			int fd = qg_sock_connect(d.sock);
			if (fd >= 0 && !refusal_on(fd, 1000, m, sizeof m))
				snprintf(m, sizeof m, "no refusal within 1 s");
		}
		(void)!write(p[1], m, strlen(m));
		_exit(0);
	}
	close(p[1]);
	ssize_t n = read(p[0], msg, sizeof msg - 1);
	msg[n > 0 ? n : 0] = 0;
	close(p[0]);
	waitpid(pid, NULL, 0);
	tap_ok(strstr(msg, "access denied: uid 60023") != NULL,
	       "uid %d (not in allow-users) is refused as it connects, without a Hello, and told why: %s", EXCLUDED_UID,
	       msg);
	pid_t f = flood(&d, EXCLUDED_UID, 256);
	usleep(200000);
	int served = honest_tries(&d, HONEST_UID, 20, err, sizeof err);
	tap_ok(served == 20, "under its flood, uid %d is served %d times of 20 %s", HONEST_UID, served, err);
	stop_flood(f);
	daemon_stop(&d, SIGTERM);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_cleanup(&d);
}

/* Descriptors PID has open below LIMIT, or -1. */
static int open_fds(pid_t pid, int limit)
{
	char path[64];
	int n = 0;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(path);
	if (!dir)
		return -1;
	for (struct dirent *e; (e = readdir(dir));)
		n += e->d_name[0] != '.' && atoi(e->d_name) < limit;
	closedir(dir);
	return n;
}

/* PID's CPU time (user and system), in clock ticks, or -1. */
static long long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long ut, st;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	/* after the name: state, then 10 fields before utime and stime */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

/*
 * The daemon runs out of descriptors with a connection pending: it
 * refuses it with a reason instead of spinning on its listening socket,
 * says so once in its log, and serves again once descriptors are free.
 */
static void test_emfile(void)
{
	struct test_daemon d;
	struct qgraph_session *s[2] = { 0 };
	char err[512], msg[512];

	if (!tap_ok(start(&d, NULL) == 0, "start qgraphd"))
		return daemon_cleanup(&d);
	/* room for two sessions (two descriptors each, three while shaking hands) and a connection or so */
	int limit = 0;
	for (int free_ = 0; free_ < 5; limit++) {	/* descriptors are numbered from the lowest free one */
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)d.pid, limit);
		free_ += access(path, F_OK) != 0;
	}
	struct rlimit rl = { (rlim_t)limit, (rlim_t)limit };
	int r = prlimit(d.pid, RLIMIT_NOFILE, &rl, NULL);
	struct qgraph_connect_opts o = { .socket = d.sock, .name = "fd", .arena_bytes = 1 << 20 };
	int got = 0;
	for (int i = 0; i < 2; i++)
		got += qgraph_connect(&o, &s[i], err, sizeof err) == 0;
	/* and silent connections for what is left (once the daemon has closed the regions' memfds it sent) */
	usleep(50000);
	int silent[8], n_silent = 0;
	while (n_silent < 8 && open_fds(d.pid, limit) < limit) {
		silent[n_silent++] = qg_sock_connect(d.sock);
		usleep(20000);
	}
	tap_ok(r == 0 && got == 2 && open_fds(d.pid, limit) == limit,
	       "its descriptors are all taken: %d of %d (two sessions and %d silent connections)",
	       open_fds(d.pid, limit), limit, n_silent);

	/* a client every 50 ms for a second, each while the daemon has no descriptor for it */
	long long tick = sysconf(_SC_CLK_TCK), before = cpu_ticks(d.pid);
	double t0 = now_s();
	int refused = 0, tries = 0;
	for (; now_s() - t0 < 1.0; tries++) {
		int c = qg_sock_connect(d.sock);
		refused += c >= 0 && refusal_on(c, 50, msg, sizeof msg) && strstr(msg, "out of file descriptors");
		if (c >= 0)
			close(c);
		usleep(50000);
	}
	double secs = now_s() - t0;
	long long used = cpu_ticks(d.pid) - before;
	tap_ok(refused == tries, "each of %d clients is refused at once, told why (%d): %s", tries, refused, msg);
	tap_ok(used >= 0 && (double)used < 0.1 * secs * (double)tick,
	       "and the daemon does not spin: %.0f%% of a CPU over %.1f s", 100.0 * (double)used / ((double)tick * secs),
	       secs);
	tap_ok(daemon_log_count(&d, "out of file descriptors") == 1, "its log says so once (%d)",
	       daemon_log_count(&d, "out of file descriptors"));
	for (int i = 0; i < n_silent; i++)
		close(silent[i]);
	qgraph_session_close(s[0]);
	s[0] = NULL;
	r = -1;
	for (int i = 0; i < 50 && r; i++) {
		r = qgraph_connect(&o, &s[0], err, sizeof err);
		if (r)
			usleep(20000);
	}
	tap_ok(r == 0 && qgraph_stats(s[0], msg, sizeof msg) > 0, "descriptors free again: a new client is served (%s)",
	       err);
	qgraph_session_close(s[0]);
	qgraph_session_close(s[1]);
	daemon_stop(&d, SIGTERM);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_cleanup(&d);
}

/* A hand-made session: socket, region and rings, enough to push records and read answers. */
/* Push a record and ring; then the answer: its status, request id and error, or -errno. */
static int raw_ask(struct raw *r, const void *rec, size_t len, uint64_t *id, char *err, size_t errlen)
{
	struct raw_reply rep;

	if (raw_push(r, rec, len))
		return -ENOSPC;
	int e = raw_reply(r, 5000, &rep);
	*id = rep.request_id;
	if (errlen) {	/* cut to ERRLEN */
		size_t n = strnlen(rep.error, errlen - 1);
		memcpy(err, rep.error, n);
		err[n] = '\0';
	}
	return e ? e : rep.status;
}

/*
 * A record past max-message is refused before it is decoded: one that
 * begins as a request (its id) and goes on as garbage is answered with
 * the quota and its id, not as a record that does not decode.
 */
static void test_max_message(void)
{
	struct test_daemon d;
	static uint8_t rec[12000];
	char err[512];
	uint64_t id = 0;
	struct raw r;

	if (!tap_ok(start(&d, "--max-message 8K") == 0, "start qgraphd with max-message 8K"))
		return daemon_cleanup(&d);
	int c = raw_connect_hello(&r, d.sock, 1, "door", 1 << 20, NULL, 0);
	tap_ok(c == 0, "a hand-made session (%d)", c);
	memset(rec, 0xff, sizeof rec);
	rec[0] = 0x08;	/* field 1, a varint: request_id 4242 */
	rec[1] = 0x80 | (4242 & 0x7f);
	rec[2] = 4242 >> 7;
	int st = raw_ask(&r, rec, sizeof rec, &id, err, sizeof err);
	tap_ok(st == QGRAPH__STATUS__STATUS_QUOTA && id == 4242 && strstr(err, "quota max-message") &&
	       strstr(err, "not decoded"), "a 12000-byte record: refused by max-message before decoding (%d, id %llu): %s",
	       st, (unsigned long long)id, err);
	st = raw_ask(&r, rec, 100, &id, err, sizeof err);
	tap_ok(st == QGRAPH__STATUS__STATUS_INVALID && strstr(err, "not a request"),
	       "the same bytes within max-message are decoded, and refused as such (%d): %s", st, err);
	raw_close(&r);
	daemon_stop(&d, SIGTERM);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_cleanup(&d);
}

/*
 * The log: a session refused many requests still has its close reason
 * logged; a connect flood from one uid writes a bounded number of lines.
 */
static void test_log(void)
{
	struct test_daemon d;
	uint8_t junk[64];
	char err[512], want[128];
	uint64_t id;
	struct raw r;

	if (!tap_ok(start(&d, NULL) == 0, "start qgraphd"))
		return daemon_cleanup(&d);
	raw_connect_hello(&r, d.sock, 1, "door", 1 << 20, NULL, 0);
	memset(junk, 0xff, sizeof junk);
	int answered = 0;
	for (int i = 0; i < 30; i++)
		answered += raw_ask(&r, junk, sizeof junk, &id, err, sizeof err) > 0;
	/* a submit tail the client could never have written: the session is dropped */
	uint64_t one = 1;
	atomic_store(&r.submit.ctl->tail, 12345);
	(void)!write(r.bell, &one, sizeof one);
	struct pollfd p = { .fd = r.sock, .events = POLLIN };
	int dropped = poll(&p, 1, 3000) == 1 && recv(r.sock, junk, 1, 0) == 0;
	snprintf(want, sizeof want, "closed: submit ring corrupt");
	tap_ok(answered == 30 && dropped && daemon_log_count(&d, want) == 1,
	       "after 30 refused requests, the session's end is logged: \"%s\" (%d)", want, daemon_log_count(&d, want));
	raw_close(&r);

	/* 2000 connections of one uid, each a garbage Hello */
	int lines0 = daemon_log_count(&d, "qgraphd");
	for (int i = 0; i < 2000; i++) {
		int fd = qg_sock_connect(d.sock);
		if (fd < 0)
			continue;
		(void)!send(fd, "\xff\xff", 2, MSG_NOSIGNAL);
		close(fd);
	}
	int got = honest_client(&d, err, sizeof err);
	int lines = daemon_log_count(&d, "qgraphd") - lines0;
	tap_ok(got == 0 && lines < 60, "2000 connections with a bad Hello wrote %d log lines (a bucket per uid) %s", lines,
	       err);
	int said = 0;
	for (int i = 0; i < 40 && !said; i++, usleep(50000))	/* once the bucket has a token again */
		said = daemon_log_count(&d, "messages about its connections were suppressed");
	tap_ok(said == 1, "and once the flood is over, the log says how many it held back");
	daemon_stop(&d, SIGTERM);
	if (tap_failed)
		daemon_dump_log(&d);
	daemon_cleanup(&d);
}

/* A descriptor the launcher leaves open is closed as the daemon starts: the pipe's reader sees its end. */
static void test_inherited(void)
{
	struct test_daemon d;
	int p[2];

	if (pipe(p)) {
		tap_ok(0, "pipe: %s", strerror(errno));
		return;
	}
	/* no O_CLOEXEC: the daemon inherits the write end */
	int r = start(&d, NULL);
	close(p[1]);
	struct pollfd pf = { .fd = p[0], .events = POLLIN };
	char c;
	int eof = r == 0 && poll(&pf, 1, 2000) == 1 && read(p[0], &c, 1) == 0;
	tap_ok(eof, "a pipe the daemon inherited is closed by it: its reader sees the end");
	close(p[0]);
	daemon_stop(&d, SIGTERM);
	daemon_cleanup(&d);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	is_root = geteuid() == 0;
	test_inherited();
	test_silent_bounded();
	test_flood();
	test_excluded();
	test_emfile();
	test_log();
	test_max_message();
	return tap_done();
}
