/*
 * fallback-test.c - a client that names no socket finds the system daemon:
 * a non-root user whose own default socket ($XDG_RUNTIME_DIR/qgraph) does
 * not exist falls back to /run/qgraph/qgraphd.sock; a user outside the
 * socket's group is told which group to join; with no daemon, the error
 * names every path tried.  The system daemon runs here in a mount
 * namespace of the test's own, on a tmpfs over /run, so the machine's
 * /run is never touched.
 *
 * Root only (exit 77 otherwise, or where mount namespaces are refused).
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "daemon-util.h"
#include "qgraph.h"
#include "tap.h"

enum { MEMBER_UID = 60051, OUTSIDER_UID = 60052 };

static gid_t nogroup;

/* In the child: connect by default (no QGRAPH_SOCKET, XDG_RUNTIME_DIR XDG) and ask for stats; 0 works, 1 no connection. */
static int client_body(void *xdg, char *msg, size_t len)
{
	struct qgraph_session *s = NULL;
	char stats[4096];

	unsetenv("QGRAPH_SOCKET");
	setenv("XDG_RUNTIME_DIR", xdg, 1);
	if (qgraph_connect(NULL, &s, msg, len))
		return 1;
	int rc = qgraph_stats(s, stats, sizeof stats) > 0 ? 0 : 3;
	qgraph_session_close(s);
	return rc;
}

/* In a child as UID (supplementary group GROUP unless -1), XDG_RUNTIME_DIR XDG: connect by default; its message. */
static int client_as(uid_t uid, gid_t group, const char *xdg, char *msg, size_t len)
{
	gid_t groups[1] = { group };
	struct child_id id = { .uid = uid, .gid = uid, .groups = groups, .ngroups = group == (gid_t)-1 ? 0 : 1 };

	return child_run_as(&id, client_body, (void *)xdg, msg, len);
}

int main(void)
{
	struct test_daemon d = { 0 };
	char msg[1024], xdg[64] = "/tmp/qgd-xdg-XXXXXX", own[128];

	if (geteuid() != 0) {
		printf("1..0 # SKIP not root: the system daemon's /run/qgraph is root's\n");
		return 77;
	}
	struct group *gr = getgrnam("nogroup");
	if (!gr || !getpwnam("nobody")) {
		printf("1..0 # SKIP no user nobody or group nogroup\n");
		return 77;
	}
	nogroup = gr->gr_gid;
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("qgraph-test-run", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")) {
		printf("1..0 # SKIP no mount namespace with a tmpfs on /run here: %s\n", strerror(errno));
		return 77;
	}
	if (!mkdtemp(xdg) || chmod(xdg, 0777)) {
		tap_ok(0, "a runtime directory for the clients");
		return tap_done();
	}
	snprintf(own, sizeof own, "%s/qgraph/qgraphd.sock", xdg);
	snprintf(d.sock, sizeof d.sock, "%s", "/run/qgraph/qgraphd.sock");
	int r = daemon_start(&d, "--user nobody --group nogroup");
	tap_ok(r == 0, "a system daemon on /run/qgraph/qgraphd.sock (%d)", r);
	if (r) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return tap_done();
	}
	r = client_as(MEMBER_UID, nogroup, xdg, msg, sizeof msg);
	tap_ok(r == 0, "uid %d in the socket's group, without a daemon of its own, is served by the system's %s",
	       MEMBER_UID, msg);
	r = client_as(OUTSIDER_UID, (gid_t)-1, xdg, msg, sizeof msg);
	tap_ok(r == 1 && strstr(msg, "/run/qgraph/qgraphd.sock: Permission denied") &&
	       strstr(msg, "join the group nogroup") && strstr(msg, own),
	       "uid %d outside the group is told both paths and the group to join: %s", OUTSIDER_UID, msg);
	daemon_stop(&d, SIGTERM);
	r = client_as(MEMBER_UID, nogroup, xdg, msg, sizeof msg);
	tap_ok(r == 1 && strstr(msg, own) && strstr(msg, "/run/qgraph/qgraphd.sock: No such file or directory"),
	       "with no daemon, the error names every path tried: %s", msg);
	if (tap_failed)
		daemon_dump_log(&d);
	rmdir(xdg);
	daemon_cleanup(&d);
	return tap_done();
}
