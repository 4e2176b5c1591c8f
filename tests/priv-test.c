/*
 * priv-test.c - qgraphd started as root drops to --user nobody --group
 * nogroup: /proc/PID/status shows the ids, CAP_IPC_LOCK alone in the
 * effective and permitted sets, an empty bounding set, no_new_privs and no
 * supplementary groups; its runtime directory and 0660 socket are its own.
 * Clients forked here as other users go through the access policy: an
 * allowed user works (a stats request and a graph), a user the policy
 * refuses gets the clear error, one allowed through a supplementary group
 * works, and one outside the socket's group cannot even connect.  Then the
 * daemon started as nobody says what it lacks.
 *
 * Root only (exit 77 otherwise); on the first qemu model only.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "daemon-util.h"
#include "qgraph.h"
#include "smoke.h"
#include "tap.h"

enum {
	ALLOWED_UID = 60001,	/* in allow-users */
	REFUSED_UID = 60002,	/* in no list, but in the socket's group */
	SUPP_UID = 60003,	/* allowed through a supplementary group */
	OUTSIDER_UID = 60004,	/* not even in the socket's group */
	ALLOWED_GID = 60010,	/* in allow-groups */
};

static uid_t nobody;
static gid_t nogroup;

/* The rest of the line of FIELD ("CapEff:") in /proc/PID/status, trimmed; 0 or -1. */
static int status_field(pid_t pid, const char *field, char *out, size_t len)
{
	char path[64], line[512];
	int r = -1;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof line, f)) {
		if (strncmp(line, field, strlen(field)) != 0)
			continue;
		char *v = line + strlen(field);
		v += strspn(v, " \t");
		v[strcspn(v, "\n")] = 0;
		snprintf(out, len, "%s", v);
		r = 0;
		break;
	}
	if (f)
		fclose(f);
	return r;
}

/* In the child: connect, ask for stats, run SCALE(x, 3) on 16 floats.  0 works, 1 refused, 2 no connection. */
static int client_body(void *sock, char *msg, size_t len)
{
	struct qgraph_connect_opts o = { .socket = sock, .name = "priv-test", .arena_bytes = 1 << 20 };
	struct qgraph_session *s = NULL;
	int r = qgraph_connect(&o, &s, msg, len);

	if (r)
		return r == -EPROTO ? 1 : 2;
	char stats[4096];
	if (qgraph_stats(s, stats, sizeof stats) <= 0) {
		snprintf(msg, len, "stats failed: %s", qgraph_session_error(s));
		return 3;
	}
	r = smoke_scale(s, 16, 3.0f, -4.5f, msg, len);
	qgraph_session_close(s);
	return r ? 3 : 0;
}

/* Fork a client running as UID, GID and GROUPS; its exit code, and what it said in MSG. */
static int client_as(const char *sock, uid_t uid, gid_t gid, const gid_t *groups, int ngroups, char *msg,
		     size_t len)
{
	struct child_id id = { .uid = uid, .gid = gid, .groups = groups, .ngroups = ngroups };

	return child_run_as(&id, client_body, (void *)sock, msg, len);
}

static void check_status(pid_t pid)
{
	char v[256], want[64];

	snprintf(want, sizeof want, "%u\t%u\t%u\t%u", (unsigned)nobody, nobody, nobody, nobody);
	tap_ok(status_field(pid, "Uid:", v, sizeof v) == 0 && strcmp(v, want) == 0, "Uid: %s", v);
	snprintf(want, sizeof want, "%u\t%u\t%u\t%u", (unsigned)nogroup, nogroup, nogroup, nogroup);
	tap_ok(status_field(pid, "Gid:", v, sizeof v) == 0 && strcmp(v, want) == 0, "Gid: %s", v);
	tap_ok(status_field(pid, "Groups:", v, sizeof v) == 0 && v[0] == 0, "Groups: '%s' (none)", v);
	tap_ok(status_field(pid, "CapEff:", v, sizeof v) == 0 && strcmp(v, "0000000000004000") == 0,
	       "CapEff: %s (cap_ipc_lock alone)", v);
	tap_ok(status_field(pid, "CapPrm:", v, sizeof v) == 0 && strcmp(v, "0000000000004000") == 0,
	       "CapPrm: %s (cap_ipc_lock alone)", v);
	tap_ok(status_field(pid, "CapInh:", v, sizeof v) == 0 && strcmp(v, "0000000000000000") == 0, "CapInh: %s", v);
	tap_ok(status_field(pid, "CapBnd:", v, sizeof v) == 0 && strcmp(v, "0000000000000000") == 0,
	       "CapBnd: %s (empty)", v);
	tap_ok(status_field(pid, "CapAmb:", v, sizeof v) == 0 && strcmp(v, "0000000000000000") == 0, "CapAmb: %s", v);
	tap_ok(status_field(pid, "NoNewPrivs:", v, sizeof v) == 0 && strcmp(v, "1") == 0, "NoNewPrivs: %s", v);
}

static void test_clients(const char *sock, struct test_daemon *d)
{
	char msg[512];
	gid_t supp[1] = { ALLOWED_GID };
	int r;

	r = client_as(sock, ALLOWED_UID, nogroup, NULL, 0, msg, sizeof msg);
	tap_ok(r == 0, "uid %d (in allow-users) connects through the 0660 socket and runs a graph %s", ALLOWED_UID, msg);
	r = client_as(sock, REFUSED_UID, nogroup, NULL, 0, msg, sizeof msg);
	tap_ok(r == 1 && strstr(msg, "refused the session: access denied: uid 60002"),
	       "uid %d (in no list) is refused: %s", REFUSED_UID, msg);
	r = client_as(sock, SUPP_UID, nogroup, supp, 1, msg, sizeof msg);
	tap_ok(r == 0, "uid %d with supplementary group %d (in allow-groups) is served %s", SUPP_UID, ALLOWED_GID, msg);
	gid_t sock_group[1] = { nogroup };
	r = client_as(sock, REFUSED_UID, ALLOWED_GID, sock_group, 1, msg, sizeof msg);
	tap_ok(r == 0, "uid %d with primary group %d (in allow-groups) is served %s", REFUSED_UID, ALLOWED_GID, msg);
	r = client_as(sock, OUTSIDER_UID, OUTSIDER_UID, NULL, 0, msg, sizeof msg);
	tap_ok(r == 2 && strstr(msg, "Permission denied"), "uid %d outside the socket's group cannot connect: %s",
	       OUTSIDER_UID, msg);
	r = client_as(sock, 0, 0, NULL, 0, msg, sizeof msg);
	tap_ok(r == 0, "root is always served %s", msg);
	tap_ok(daemon_log_has(d, "refused a client") && daemon_log_has(d, "uid 60002"), "the refusal is in the daemon's log");
}

/* Started as nobody: it runs, and says once what it lacks. */
static void test_unprivileged(const char *top)
{
	struct test_daemon u = { 0 };
	char v[64], exec[128];
	const char *old = getenv("QG_EXEC");

	snprintf(u.dir, sizeof u.dir, "%s/u", top);
	if (mkdir(u.dir, 0700) || chown(u.dir, nobody, nogroup)) {
		tap_ok(0, "a directory for nobody: %s", strerror(errno));
		return;
	}
	snprintf(exec, sizeof exec, "setpriv --reuid=%u --regid=%u --clear-groups", (unsigned)nobody,
		 (unsigned)nogroup);
	if (access("/usr/bin/setpriv", X_OK) != 0 || (old && *old)) {
		tap_skip("no setpriv, or a wrapper already runs the daemon");
		rmdir(u.dir);
		return;
	}
	setenv("QG_EXEC", exec, 1);
	int r = daemon_start(&u, NULL);
	unsetenv("QG_EXEC");
	if (r) {
		tap_skip("the build cannot be run as nobody (a directory on its path is closed to it)");
		daemon_cleanup(&u);
		return;
	}
	tap_ok(status_field(u.pid, "CapEff:", v, sizeof v) == 0 && strcmp(v, "0000000000000000") == 0 &&
	       status_field(u.pid, "NoNewPrivs:", v, sizeof v) == 0 && strcmp(v, "1") == 0,
	       "started as nobody it runs, no capabilities, no_new_privs");
	char msg[512];
	r = client_as(u.sock, nobody, nogroup, NULL, 0, msg, sizeof msg);
	tap_ok(r == 0, "and serves its own user %s", msg);
	daemon_stop(&u, SIGTERM);
	tap_ok(daemon_log_has(&u, "running unprivileged, as it was started: it lacks CAP_IPC_LOCK"),
	       "its log says what it lacks");
	if (!daemon_log_has(&u, "it lacks"))
		daemon_dump_log(&u);
	daemon_cleanup(&u);
}

/*
 * The runtime directory the service manager made ($RUNTIME_DIRECTORY) is
 * handed to the daemon's user only once the socket in it is finished, so
 * that no process of that user can swap a link in while root still works
 * on the socket by path: inotify sees the directory's last change after
 * the socket's last.  Again when a previous run left the directory the
 * user's: the daemon takes it back first.
 */
static void test_hand_over(const char *top)
{
	char svc[96], buf[4096];
	struct stat st;

	snprintf(svc, sizeof svc, "%s/svc", top);
	if (mkdir(svc, 0755)) {
		tap_ok(0, "mkdir %s: %s", svc, strerror(errno));
		return;
	}
	setenv("RUNTIME_DIRECTORY", svc, 1);
	for (int round = 0; round < 2; round++) {
		struct test_daemon v = { 0 };
		int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		int wd = inotify_add_watch(in, svc, IN_ATTRIB | IN_CREATE | IN_MOVED_TO);
		snprintf(v.dir, sizeof v.dir, "%s/v%d", top, round);
		snprintf(v.sock, sizeof v.sock, "%s/qgraphd.sock", svc);
		mkdir(v.dir, 0700);
		int r = daemon_start(&v, "--user nobody --group nogroup");
		int seq = 0, last_sock = -1, last_dir = -1;
		ssize_t n;
		while (r == 0 && wd >= 0 && (n = read(in, buf, sizeof buf)) > 0) {
			for (char *p = buf; p < buf + n;) {
				const struct inotify_event *e = (const struct inotify_event *)(void *)p;
				if (!e->len)
					last_dir = seq;
				else if (strcmp(e->name, "qgraphd.sock") == 0 || strcmp(e->name, "qgraphd.sock.new") == 0)
					last_sock = seq;	/* bound at its staging name, then moved in place */
				seq++;
				p += sizeof *e + e->len;
			}
		}
		close(in);
		tap_ok(r == 0 && last_sock >= 0 && last_dir > last_sock,
		       "%s: the directory is handed over after the socket's last change (events %d, %d of %d)",
		       round ? "the directory left the user's by a previous run" : "a service runtime directory",
		       last_sock, last_dir, seq);
		int sr = stat(v.sock, &st);
		tap_ok(sr == 0 && (st.st_mode & 07777) == 0660 && st.st_uid == nobody && st.st_gid == nogroup,
		       "its socket is nobody:nogroup, mode %o", st.st_mode & 07777);
		sr = stat(svc, &st);
		tap_ok(sr == 0 && (st.st_mode & 07777) == 0750 && st.st_uid == nobody && st.st_gid == nogroup,
		       "and its directory nobody:nogroup, mode %o", st.st_mode & 07777);
		if (tap_failed)
			daemon_dump_log(&v);
		daemon_stop(&v, SIGTERM);
		unlink(v.log);
		rmdir(v.dir);
	}
	unsetenv("RUNTIME_DIRECTORY");
	char lock[160];
	snprintf(lock, sizeof lock, "%s/qgraphd.sock.lock", svc);
	unlink(lock);
	snprintf(lock, sizeof lock, "%s/qgraphd.sock", svc);
	unlink(lock);
	rmdir(svc);
}

int main(void)
{
	static struct test_daemon d;
	char top[] = "/tmp/qgd-priv-XXXXXX", run[96];
	struct stat st;

	if (geteuid() != 0) {
		printf("1..0 # SKIP not root: privileges cannot be dropped\n");
		return 77;
	}
	struct passwd *pw = getpwnam("nobody");
	struct group *gr = getgrnam("nogroup");
	if (!pw || !gr) {
		printf("1..0 # SKIP no user nobody or group nogroup\n");
		return 77;
	}
	nobody = pw->pw_uid;
	nogroup = gr->gr_gid;
	if (!mkdtemp(top) || chmod(top, 0711)) {
		printf("1..0 # SKIP cannot make %s\n", top);
		return 77;
	}
	/* the daemon makes run/ (one level) and gives it to nobody:nogroup */
	snprintf(run, sizeof run, "%s/run", top);
	snprintf(d.dir, sizeof d.dir, "%s", top);
	snprintf(d.sock, sizeof d.sock, "%s/qgraphd.sock", run);
	int r = daemon_start(&d, "--user nobody --group nogroup --allow-users 60001 --allow-groups 60010");
	tap_ok(r == 0, "the daemon starts as root with --user nobody --group nogroup (%d)", r);
	if (r) {
		daemon_dump_log(&d);
		daemon_cleanup(&d);
		return tap_done();
	}
	check_status(d.pid);
	r = stat(d.sock, &st);
	tap_ok(r == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 07777) == 0660 &&
	       st.st_uid == nobody && st.st_gid == nogroup, "the socket is nobody:nogroup, mode %o", st.st_mode & 07777);
	r = stat(run, &st);
	tap_ok(r == 0 && (st.st_mode & 07777) == 0750 && st.st_uid == nobody && st.st_gid == nogroup,
	       "its directory is nobody:nogroup, mode %o", st.st_mode & 07777);
	test_clients(d.sock, &d);
	int ws = daemon_stop(&d, SIGTERM);
	tap_ok(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "it stops cleanly");
	tap_ok(access(d.sock, F_OK) != 0, "and, its directory being its own, removes its socket");
	if (tap_failed)
		daemon_dump_log(&d);

	test_unprivileged(top);
	test_hand_over(top);

	char lock[160];
	snprintf(lock, sizeof lock, "%s.lock", d.sock);
	unlink(lock);
	unlink(d.sock);
	rmdir(run);
	daemon_cleanup(&d);
	return tap_done();
}
