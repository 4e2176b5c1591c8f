/*
 * impostor-test.c - another local user cannot pose as a client's qgraphd.
 *
 * Without XDG_RUNTIME_DIR a client's default socket is
 * /tmp/qgraph-UID/qgraphd.sock, a name anyone can take first.  Here an
 * attacker (uid ATTACKER) does: makes the victim's directory and runs a
 * daemon of its own there that would serve the victim.  The victim's client
 * refuses the directory before it connects; given the attacker's socket by
 * another path, it refuses the daemon itself after connect (SO_PEERCRED)
 * and before it sends anything; the victim's own daemon refuses to bind in
 * the attacker's directory, or through a symbolic link.  Controls: a client
 * told to trust the attacker's user (QGRAPH_DAEMON_USER) is served, and with
 * the directory gone the victim's daemon and client meet on the default path.
 *
 * Root only (the users are made with setuid); native only (the daemons run
 * under setpriv, which a cross build's wrapper cannot prefix).
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "daemon-util.h"
#include "qgraph.h"
#include "tap.h"

enum {
	VICTIM = 54321,
	ATTACKER = 54322,
};

#define VICTIM_DIR "/tmp/qgraph-54321"
#define VICTIM_SOCK VICTIM_DIR "/qgraphd.sock"

struct victim {
	const char *sock, *trust;
};

static int victim_body(void *arg, char *msg, size_t len)
{
	const struct victim *v = arg;
	struct qgraph_connect_opts o = { .socket = v->sock, .name = "impostor-victim" };
	struct qgraph_session *s = NULL;
	char stats[4096];

	unsetenv("QGRAPH_SOCKET");
	unsetenv("XDG_RUNTIME_DIR");
	if (v->trust)
		setenv("QGRAPH_DAEMON_USER", v->trust, 1);
	else
		unsetenv("QGRAPH_DAEMON_USER");
	int rc = qgraph_connect(&o, &s, msg, len);
	if (rc == 0 && qgraph_stats(s, stats, sizeof stats) < 0) {
		snprintf(msg, len, "stats failed: %s", qgraph_session_error(s));
		rc = -EIO;
	}
	qgraph_session_close(s);
	return rc == -EPERM ? EPERM : rc ? 1 : 0;
}

/*
 * Connect as the victim to SOCK (NULL: the default path, with neither
 * QGRAPH_SOCKET nor XDG_RUNTIME_DIR set), trusting TRUST as daemon user
 * (NULL: none), and ask for the stats.  Returns 0 if served, EPERM if
 * refused as untrusted, 1 for any other failure; what it said in MSG.
 */
static int victim_connects(const char *sock, const char *trust, char *msg, size_t len)
{
	struct child_id id = { .uid = VICTIM, .gid = VICTIM };
	struct victim v = { sock, trust };
	int r = child_run_as(&id, victim_body, &v, msg, len);

	return r == 4 ? 1 : r;	/* 4: could not become the victim, any other failure */
}

/* Start D as UID through setpriv with EXTRA options; what daemon_start returned. */
static int start_as(struct test_daemon *d, uid_t uid, const char *extra)
{
	char exec[128];

	snprintf(exec, sizeof exec, "setpriv --reuid=%u --regid=%u --clear-groups", (unsigned)uid, (unsigned)uid);
	setenv("QG_EXEC", exec, 1);
	int r = daemon_start(d, extra);
	unsetenv("QG_EXEC");
	unsetenv("QGRAPH_SOCKET");	/* daemon_start sets it for this process's clients */
	return r;
}

/* Make directory PATH owned by UID with MODE; 0 or -errno. */
static int make_dir(const char *path, uid_t uid, mode_t mode)
{
	if (mkdir(path, mode) < 0 || chown(path, uid, uid) < 0 || chmod(path, mode) < 0)
		return -errno;
	return 0;
}

/* Remove the victim's directory and what the daemons left in it. */
static void clear_victim_dir(void)
{
	unlink(VICTIM_SOCK);
	unlink(VICTIM_SOCK ".lock");
	unlink(VICTIM_DIR);	/* a symbolic link */
	rmdir(VICTIM_DIR);
}

int main(void)
{
	const char *exec = getenv("QG_EXEC");
	struct test_daemon att = { 0 }, vic = { 0 };
	char top[] = "/tmp/qgd-imp-XXXXXX", a[64], s[80], msg[1024];
	struct stat st;
	int r;

	if (geteuid() != 0) {
		printf("1..0 # SKIP not root: the attacker and the victim are made with setuid\n");
		return 77;
	}
	if ((exec && *exec) || access("/usr/bin/setpriv", X_OK) != 0) {
		printf("1..0 # SKIP native with setpriv only: the daemons run as other users through it\n");
		return 77;
	}
	if (lstat(VICTIM_DIR, &st) == 0) {
		printf("1..0 # SKIP %s exists (another run of this test?)\n", VICTIM_DIR);
		return 77;
	}
	if (!mkdtemp(top) || chmod(top, 0755)) {
		printf("1..0 # SKIP no directory for the test: %s\n", strerror(errno));
		return 77;
	}

	/* 1: the attacker takes the victim's /tmp directory and serves there */
	r = make_dir(VICTIM_DIR, ATTACKER, 0755);
	snprintf(att.sock, sizeof att.sock, "%s", VICTIM_SOCK);
	if (!r)
		r = start_as(&att, ATTACKER, "--allow-users 54321 --socket-mode 0666");
	if (r) {
		printf("# the attacker's daemon did not start (%d): the build may be closed to other users\n", r);
		daemon_dump_log(&att);
		daemon_cleanup(&att);
		clear_victim_dir();
		rmdir(top);
		printf("1..0 # SKIP the build cannot be run as another user (a directory on its path is closed)\n");
		return 77;
	}
	r = victim_connects(NULL, NULL, msg, sizeof msg);
	tap_ok(r == EPERM && strstr(msg, VICTIM_DIR) && strstr(msg, "belongs to uid 54322"),
	       "the victim's client refuses the attacker's %s: %d %s", VICTIM_DIR, r, msg);
	daemon_stop(&att, SIGTERM);
	tap_ok(!daemon_log_has(&att, "impostor-victim"), "and the attacker's daemon never heard from it");
	daemon_cleanup(&att);
	clear_victim_dir();

	/* 2: the attacker's daemon reached by a path in no shared directory: SO_PEERCRED */
	snprintf(a, sizeof a, "%s/a", top);
	snprintf(s, sizeof s, "%s/s", a);
	struct test_daemon att2 = { 0 };
	r = make_dir(a, ATTACKER, 0755);
	if (!r)
		r = make_dir(s, ATTACKER, 0755);
	snprintf(att2.sock, sizeof att2.sock, "%s/qgraphd.sock", s);
	if (!r)
		r = start_as(&att2, ATTACKER, "--allow-users 54321 --socket-mode 0666");
	tap_ok(r == 0, "the attacker's daemon serves at %s (%d)", att2.sock, r);
	r = victim_connects(att2.sock, NULL, msg, sizeof msg);
	tap_ok(r == EPERM && strstr(msg, "runs as uid 54322"), "the victim's client refuses a daemon of uid %d: %d %s",
	       ATTACKER, r, msg);
	tap_ok(!daemon_log_has(&att2, "impostor-victim"), "before it sent the daemon anything");
	r = victim_connects(att2.sock, "54322", msg, sizeof msg);
	tap_ok(r == 0 && daemon_log_has(&att2, "impostor-victim"),
	       "told to trust uid 54322 (QGRAPH_DAEMON_USER) it is served, and the daemon logs its name %s", msg);
	daemon_stop(&att2, SIGTERM);
	daemon_cleanup(&att2);

	/* 3: the victim's own daemon will not bind in the attacker's directory, or through a link */
	r = make_dir(VICTIM_DIR, ATTACKER, 0777);	/* open to the victim, as a trap is */
	snprintf(vic.sock, sizeof vic.sock, "%s", VICTIM_SOCK);
	r = r ? r : start_as(&vic, VICTIM, NULL);
	tap_ok(r != 0 && daemon_log_has(&vic, "refusing the socket " VICTIM_SOCK) && daemon_log_has(&vic, "belongs to uid 54322") &&
	       lstat(VICTIM_SOCK, &st) < 0,
	       "the victim's daemon refuses to bind in the attacker's %s (%d)", VICTIM_DIR, r);
	if (r == 0)
		daemon_dump_log(&vic);
	daemon_cleanup(&vic);
	clear_victim_dir();
	memset(&vic, 0, sizeof vic);

	r = symlink(s, VICTIM_DIR) ? -errno : 0;
	snprintf(vic.sock, sizeof vic.sock, "%s", VICTIM_SOCK);
	r = r ? r : start_as(&vic, VICTIM, NULL);
	tap_ok(r != 0 && daemon_log_has(&vic, "is a symbolic link"), "nor through a symbolic link at %s (%d)", VICTIM_DIR, r);
	daemon_cleanup(&vic);
	r = victim_connects(NULL, NULL, msg, sizeof msg);
	tap_ok(r == EPERM && strstr(msg, "is a symbolic link"), "and the client refuses the link: %d %s", r, msg);
	clear_victim_dir();
	memset(&vic, 0, sizeof vic);

	/* 4: with the directory the victim's own, both meet on the default path */
	snprintf(vic.sock, sizeof vic.sock, "%s", VICTIM_SOCK);
	r = start_as(&vic, VICTIM, NULL);
	if (lstat(VICTIM_DIR, &st) < 0)
		memset(&st, 0, sizeof st);
	tap_ok(r == 0 && st.st_uid == VICTIM && S_ISDIR(st.st_mode) && !(st.st_mode & 022),
	       "the victim's daemon makes %s its own (%d, uid %u, mode %o)", VICTIM_DIR, r, (unsigned)st.st_uid,
	       st.st_mode & 0777);
	r = victim_connects(NULL, NULL, msg, sizeof msg);
	tap_ok(r == 0, "and the victim's client is served on the default path %s", msg);
	daemon_stop(&vic, SIGTERM);
	daemon_cleanup(&vic);
	clear_victim_dir();
	rmdir(s);
	rmdir(a);
	rmdir(top);
	return tap_done();
}
