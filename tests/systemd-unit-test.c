/*
 * systemd-unit-test.c - qgraphd started the way daemon/qgraphd.service starts it,
 * without systemd: as root, under the unit's own CapabilityBoundingSet (read
 * from the unit), NoNewPrivileges and UMask (setpriv and umask), with
 * --user nobody --group nogroup and its socket in a runtime directory it
 * must create under a root-owned parent.  It must start, bind, drop, and
 * serve a non-root client in the socket's group (a graph runs).  Then the
 * restarts the unit meets: the directory a previous run handed over, named
 * by $RUNTIME_DIRECTORY or not.
 *
 * Root only (exit 77 otherwise), and setpriv (util-linux) is needed.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "daemon-util.h"
#include "qgraph.h"
#include "smoke.h"
#include "tap.h"

enum { CLIENT_UID = 60021 };

static uid_t nobody;
static gid_t nogroup;

/*
 * The unit's capability bounding set as setpriv's --bounding-set argument
 * ("-all,+chown,...") in OUT, and whether it sets NoNewPrivileges; 0 or -1.
 */
static int unit_caps(char *out, size_t len, int *nnp)
{
	const char *src = getenv("QG_TOP_SRCDIR");
	char path[512], line[1024];
	int found = -1;

	*nnp = 0;
	snprintf(path, sizeof path, "%s/daemon/qgraphd.service.in", src ? src : "..");
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (strcmp(line, "NoNewPrivileges=yes") == 0)
			*nnp = 1;
		if (strncmp(line, "CapabilityBoundingSet=", 22) != 0)
			continue;
		size_t at = (size_t)snprintf(out, len, "-all");
		for (char *save = NULL, *w = strtok_r(line + 22, " ", &save); w && at < len;
		     w = strtok_r(NULL, " ", &save)) {
			at += (size_t)snprintf(out + at, len - at, ",+");
			for (const char *c = w + (strncmp(w, "CAP_", 4) ? 0 : 4); *c && at + 1 < len; c++)
				out[at++] = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
			out[at] = 0;
		}
		found = 0;
	}
	if (f)
		fclose(f);
	return found;
}

/* In the child: connect through SOCK, run SCALE(x, 2) on 8 floats; 0 when the result is right. */
static int client_body(void *sock, char *msg, size_t len)
{
	struct qgraph_connect_opts o = { .socket = sock, .name = "unit-test", .arena_bytes = 1 << 20 };
	struct qgraph_session *s = NULL;

	unsetenv("QGRAPH_SOCKET");
	int r = qgraph_connect(&o, &s, msg, len);

	if (r)
		return 2;
	r = smoke_scale(s, 8, 2.0f, -2.5f, msg, len);
	qgraph_session_close(s);
	return r ? 3 : 0;
}

/* Fork a client as CLIENT_UID, primary group its own, supplementary the socket's group; its exit code. */
static int client(const char *sock, char *msg, size_t len)
{
	gid_t groups[1] = { nogroup };
	struct child_id id = { .uid = CLIENT_UID, .gid = CLIENT_UID, .groups = groups, .ngroups = 1 };

	return child_run_as(&id, client_body, (void *)sock, msg, len);
}

/* One start of the daemon as the unit starts it, on SOCK; checks it serves, stops it. */
static void start_as_unit(const char *top, const char *sock, const char *what, int round)
{
	struct test_daemon d = { 0 };
	char msg[512], run[160];
	struct stat st;

	snprintf(d.dir, sizeof d.dir, "%s/d%d", top, round);
	mkdir(d.dir, 0700);
	snprintf(d.sock, sizeof d.sock, "%s", sock);
	snprintf(run, sizeof run, "%s", sock);
	*strrchr(run, '/') = 0;
	mode_t old = umask(077);	/* the unit's UMask */
	int r = daemon_start(&d, "--user nobody --group nogroup");
	umask(old);
	tap_ok(r == 0, "%s: the daemon starts under the unit's bounding set (%d)", what, r);
	if (r) {
		daemon_dump_log(&d);
		unlink(d.log);
		rmdir(d.dir);
		return;
	}
	r = stat(sock, &st);
	tap_ok(r == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 07777) == 0660 && st.st_uid == nobody &&
	       st.st_gid == nogroup, "%s: the socket is nobody:nogroup, mode %o", what, st.st_mode & 07777);
	r = stat(run, &st);
	tap_ok(r == 0 && (st.st_mode & 07777) == 0750 && st.st_uid == nobody && st.st_gid == nogroup,
	       "%s: its directory is nobody:nogroup, mode %o", what, st.st_mode & 07777);
	tap_ok(daemon_log_has(&d, "privileges: uid") && daemon_log_has(&d, "capabilities: cap_ipc_lock"),
	       "%s: it dropped to nobody keeping CAP_IPC_LOCK", what);
	r = client(sock, msg, sizeof msg);
	tap_ok(r == 0, "%s: uid %d in the socket's group connects and runs a graph %s", what, CLIENT_UID, msg);
	int ws = daemon_stop(&d, SIGTERM);
	tap_ok(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "%s: it stops cleanly", what);
	if (tap_failed)
		daemon_dump_log(&d);
	unlink(d.log);
	rmdir(d.dir);
}

int main(void)
{
	char top[] = "/tmp/qgd-unit-XXXXXX", bset[512], exec[1024], sock[128], run[96];
	int nnp;

	if (geteuid() != 0) {
		printf("1..0 # SKIP not root: the unit starts qgraphd as root\n");
		return 77;
	}
	struct passwd *pw = getpwnam("nobody");
	struct group *gr = getgrnam("nogroup");
	const char *wrap = getenv("QG_EXEC");
	if (!pw || !gr || access("/usr/bin/setpriv", X_OK) != 0 || (wrap && *wrap)) {
		printf("1..0 # SKIP no user nobody, group nogroup or setpriv, or a wrapper already runs the daemon\n");
		return 77;
	}
	nobody = pw->pw_uid;
	nogroup = gr->gr_gid;
	if (unit_caps(bset, sizeof bset, &nnp)) {
		tap_ok(0, "the unit names its CapabilityBoundingSet");
		return tap_done();
	}
	tap_ok(nnp, "the unit sets NoNewPrivileges");
	snprintf(exec, sizeof exec, "/usr/bin/setpriv --bounding-set=%s --inh-caps=-all%s", bset,
		 nnp ? " --no-new-privs" : "");
	tap_diag("%s", exec);
	if (!mkdtemp(top) || chmod(top, 0755)) {
		tap_ok(0, "mkdtemp: %s", strerror(errno));
		return tap_done();
	}
	/* the parent is root's, 0755: the daemon creates run/ in it */
	snprintf(run, sizeof run, "%s/run", top);
	snprintf(sock, sizeof sock, "%s/qgraphd.sock", run);
	setenv("QG_EXEC", exec, 1);
	start_as_unit(top, sock, "first start, runtime directory created", 0);
	/* RuntimeDirectoryPreserve=yes: the next start finds the directory the last one handed over */
	setenv("RUNTIME_DIRECTORY", run, 1);
	start_as_unit(top, sock, "restart, $RUNTIME_DIRECTORY left nobody's", 1);
	unsetenv("RUNTIME_DIRECTORY");
	start_as_unit(top, sock, "restart, the directory left nobody's", 2);
	unsetenv("QG_EXEC");

	char lock[160];
	snprintf(lock, sizeof lock, "%s.lock", sock);
	unlink(lock);
	unlink(sock);
	rmdir(run);
	rmdir(top);
	return tap_done();
}
