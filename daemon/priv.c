/*
 * priv.c - the runtime directory, the socket's owner, the drop of
 * privileges and the access policy (see priv.h).
 *
 * Order at start-up (qgraphd.c): directory (kept root's), bind, the
 * socket's mode and owner, the directory handed over, drop, and only then
 * the event loop (io_uring keeps the credentials of the task
 * that set it up) and any thread (capabilities are per thread: a thread
 * created before the drop would keep them).  Every privileged step on the
 * socket is done while no one but root can write in its directory: once
 * the directory is the service user's, a process of that user could put a
 * link where the socket was, and a chmod or chown by path would follow it.
 */
#include "config.h"

#include <cap-ng.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "priv.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59	/* Linux 4.13 */
#endif

/* The uid and gid the daemon ends up with. */
static void target_ids(const struct qgd_priv_config *pc, uid_t *uid, gid_t *gid)
{
	*uid = pc->has_user ? pc->uid : geteuid();
	*gid = pc->has_group ? pc->gid : getegid();
}

static int becomes_other(const struct qgd_priv_config *pc)
{
	return (pc->has_user && pc->uid != geteuid()) || (pc->has_group && pc->gid != getegid());
}

/* Is DIR the runtime directory the service manager made ($RUNTIME_DIRECTORY, ':'-separated)? */
static bool is_service_runtime_dir(const char *dir)
{
	const char *env = getenv("RUNTIME_DIRECTORY");
	size_t len = strlen(dir);

	for (const char *p = env; p && *p;) {
		size_t n = strcspn(p, ":");
		size_t m = n;
		while (m > 1 && p[m - 1] == '/')
			m--;
		if (m == len && memcmp(p, dir, len) == 0)
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}

int qgd_priv_runtime_dir(const struct qgd_priv_config *pc, const char *socket_path, int *dir_fd)
{
	const char *slash = strrchr(socket_path, '/');
	int other = becomes_other(pc), created = 0;
	char dir[PATH_MAX];
	struct stat st;

	*dir_fd = -1;
	if (!slash || slash == socket_path)
		return 0;
	if ((size_t)(slash - socket_path) >= sizeof dir)
		return -ENAMETOOLONG;
	memcpy(dir, socket_path, (size_t)(slash - socket_path));
	dir[slash - socket_path] = 0;
	if (mkdir(dir, other ? 0750 : 0755) == 0) {
		created = 1;
	} else if (errno != EEXIST) {
		int err = -errno;
		qgd_error("cannot create the runtime directory %s: %s", dir, strerror(errno));
		return err;
	}
	if (!other)
		return 0;
	/*
	 * From here on, by descriptor: a path could be swapped under us.  O_PATH,
	 * because a directory a previous run handed over (mode 0750, the service
	 * user's) cannot be read by a root that lacks CAP_DAC_READ_SEARCH, as
	 * under the unit's bounding set; its owner can still be changed.
	 */
	int pfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0 || fstat(pfd, &st) < 0) {
		int err = -errno;
		qgd_error("cannot open the runtime directory %s: %s", dir, strerror(errno));
		if (pfd >= 0)
			close(pfd);
		return err;
	}
	/* ours to hand over: made now, the service manager's, or the one a previous run gave the user */
	if (!created && !is_service_runtime_dir(dir) && !(pc->has_user && st.st_uid == pc->uid)) {
		close(pfd);
		return 0;	/* someone else's directory: left as it is */
	}
	/* ours until the socket in it is finished (a previous run may have handed it over already) */
	if (st.st_uid != geteuid() && fchownat(pfd, "", geteuid(), (gid_t)-1, AT_EMPTY_PATH) < 0) {
		int err = -errno;
		qgd_error("cannot take back the runtime directory %s: %s", dir, strerror(errno));
		close(pfd);
		return err;
	}
	int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(pfd);
	if (fd < 0 || fchmod(fd, 0750) < 0) {
		int err = -errno;
		qgd_error("cannot take back the runtime directory %s: %s", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		return err;
	}
	*dir_fd = fd;
	return 0;
}

int qgd_priv_own_socket(const struct qgd_priv_config *pc, const char *path)
{
	uid_t uid = pc->has_user && pc->uid != geteuid() ? pc->uid : (uid_t)-1;
	gid_t gid = pc->has_group && pc->gid != getegid() ? pc->gid : (gid_t)-1;

	/* lchown: whatever is at PATH now, a link is never followed */
	if ((uid != (uid_t)-1 || gid != (gid_t)-1) && lchown(path, uid, gid) < 0) {
		int err = -errno;
		qgd_error("cannot give the socket %s to uid %d gid %d: %s", path, (int)uid, (int)gid, strerror(errno));
		return err;
	}
	return 0;
}

int qgd_priv_hand_over_dir(const struct qgd_priv_config *pc, const char *socket_path, int dir_fd)
{
	uid_t uid;
	gid_t gid;
	int err = 0;

	if (dir_fd < 0)
		return 0;
	target_ids(pc, &uid, &gid);
	/* the mode first: once the directory is someone else's, changing it needs CAP_FOWNER */
	if (fchmod(dir_fd, 0750) < 0 || fchown(dir_fd, pc->has_user ? uid : (uid_t)-1, gid) < 0) {
		err = -errno;
		qgd_error("cannot give the directory of %s to uid %u gid %u: %s", socket_path, (unsigned)uid,
			  (unsigned)gid, strerror(errno));
	} else {
		qgd_info("the directory of %s: uid %u, gid %u, mode 0750", socket_path, (unsigned)uid, (unsigned)gid);
	}
	close(dir_fd);
	return err;
}

static int permitted(unsigned cap)
{
	return capng_have_capability(CAPNG_PERMITTED, cap) == 1;
}

/* What capng_change_id's failure codes mean (cap-ng.c). */
static const char *change_id_error(int rc)
{
	switch (rc) {
	case -2: return "PR_SET_KEEPCAPS failed";
	case -3: return "capset before the change failed";
	case -4: return "setresgid failed";
	case -5: return "setgroups failed";
	case -6: return "setresuid failed";
	case -7: return "clearing PR_SET_KEEPCAPS failed";
	case -8: return "clearing the bounding set failed";
	case -9: return "capset after the change failed";
	default: return "it failed";
	}
}

/* After the drop: are the ids, groups, capability sets and no_new_privs what they must be? */
static int verify(uid_t uid, gid_t gid, int groups_dropped, int ipc_lock, int bound_cleared)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (getresuid(&ru, &eu, &su) || ru != uid || eu != uid || su != uid) {
		qgd_error("after the drop the uids are %u/%u/%u, not %u", (unsigned)ru, (unsigned)eu,
			  (unsigned)su, (unsigned)uid);
		return -EPERM;
	}
	if (getresgid(&rg, &eg, &sg) || rg != gid || eg != gid || sg != gid) {
		qgd_error("after the drop the gids are %u/%u/%u, not %u", (unsigned)rg, (unsigned)eg,
			  (unsigned)sg, (unsigned)gid);
		return -EPERM;
	}
	if (groups_dropped && getgroups(0, NULL) != 0) {
		qgd_error("after the drop supplementary groups remain");
		return -EPERM;
	}
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
		qgd_error("after the drop no_new_privs is not set");
		return -EPERM;
	}
	capng_get_caps_process();
	for (unsigned c = 0; c < 64; c++) {
		int want = ipc_lock && c == CAP_IPC_LOCK;
		if (capng_have_capability(CAPNG_EFFECTIVE, c) != want ||
		    capng_have_capability(CAPNG_PERMITTED, c) != want ||
		    capng_have_capability(CAPNG_INHERITABLE, c) == 1 ||
		    (bound_cleared && capng_have_capability(CAPNG_BOUNDING_SET, c) == 1)) {
			qgd_error("after the drop capability %s is %s", capng_capability_to_name(c) ?: "?",
				  want ? "missing" : "still there");
			return -EPERM;
		}
	}
	return 0;
}

int qgd_priv_drop(const struct qgd_priv_config *pc)
{
	uid_t ru, eu, su, uid;
	gid_t rg, eg, sg, gid;
	char lacks[512] = "";
	size_t at = 0;
	int rc;

	target_ids(pc, &uid, &gid);
	if (getresuid(&ru, &eu, &su) || getresgid(&rg, &eg, &sg))
		return -errno;
	int change_uid = ru != uid || eu != uid || su != uid;
	int change_gid = rg != gid || eg != gid || sg != gid;
	if (capng_get_caps_process()) {
		qgd_error("cannot read the process's capabilities");
		return -EPERM;
	}
	int can_uid = permitted(CAP_SETUID), can_gid = permitted(CAP_SETGID);
	int can_bound = permitted(CAP_SETPCAP), ipc_lock = permitted(CAP_IPC_LOCK);
	int ngroups = getgroups(0, NULL);
	if (change_uid && !can_uid) {
		qgd_error("cannot become uid %u: the daemon lacks CAP_SETUID (start it as root, or give no user)",
			  (unsigned)uid);
		return -EPERM;
	}
	if (change_gid && !can_gid) {
		qgd_error("cannot become gid %u: the daemon lacks CAP_SETGID (start it as root, or give no group)",
			  (unsigned)gid);
		return -EPERM;
	}

	/* groups first: setgroups needs CAP_SETGID, gone after the change */
	if (can_gid && setgroups(0, NULL) < 0) {
		qgd_error("cannot drop the supplementary groups: %s", strerror(errno));
		return -errno;
	}
	capng_clear(CAPNG_SELECT_BOTH);
	if (ipc_lock)
		capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED, CAP_IPC_LOCK);
	if (change_uid || change_gid || can_bound) {
		rc = capng_change_id(change_uid ? (int)uid : -1, change_gid ? (int)gid : -1,
				     (can_bound ? CAPNG_CLEAR_BOUNDING : CAPNG_NO_FLAG) |
				     (change_gid ? CAPNG_DROP_SUPP_GRP : CAPNG_NO_FLAG));
		if (rc) {
			qgd_error("cannot drop privileges to uid %u gid %u: %s", (unsigned)uid, (unsigned)gid,
				  change_id_error(rc));
			return -EPERM;
		}
	} else if (capng_apply(CAPNG_SELECT_CAPS)) {
		qgd_error("cannot drop capabilities: %s", strerror(errno));
		return -EPERM;
	}
	/* ambient capabilities (a service manager's) would survive an exec: none */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) {
		qgd_error("cannot clear the ambient capabilities: %s", strerror(errno));
		return -EPERM;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		qgd_error("cannot set no_new_privs: %s", strerror(errno));
		return -EPERM;
	}
	if ((rc = verify(uid, gid, can_gid, ipc_lock, can_bound)))
		return rc;

	qgd_info("privileges: uid %u, gid %u, %s, capabilities: %s, bounding set %s, no_new_privs", (unsigned)uid,
		 (unsigned)gid, can_gid ? "no supplementary groups" : "supplementary groups kept",
		 ipc_lock ? "cap_ipc_lock" : "none", can_bound ? "empty" : "kept");
	if (!ipc_lock) {
		struct rlimit rl = { 0 };
		getrlimit(RLIMIT_MEMLOCK, &rl);
		if (rl.rlim_cur == RLIM_INFINITY)
			at += (size_t)snprintf(lacks + at, sizeof lacks - at, "CAP_IPC_LOCK (locked memory: no limit)");
		else
			at += (size_t)snprintf(lacks + at, sizeof lacks - at,
					       "CAP_IPC_LOCK (memory it can lock: RLIMIT_MEMLOCK, %llu KiB)",
					       (unsigned long long)rl.rlim_cur >> 10);
	}
	if (!can_bound && at < sizeof lacks)
		at += (size_t)snprintf(lacks + at, sizeof lacks - at, "%sCAP_SETPCAP (the bounding set stays)",
				       at ? ", " : "");
	if (!can_gid && ngroups > 0 && at < sizeof lacks)
		at += (size_t)snprintf(lacks + at, sizeof lacks - at, "%sCAP_SETGID (%d supplementary groups stay)",
				       at ? ", " : "", ngroups);
	if (at)
		qgd_warn("running unprivileged, as it was started: it lacks %s", lacks);
	if (uid == 0)
		qgd_warn("running as root with no capability but CAP_IPC_LOCK: give a user and group "
			 "(--user, --group) to leave uid 0");
	return 0;
}

static bool has_id(const uint32_t *ids, uint32_t n, uint32_t id)
{
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

int qgd_priv_check_peer(const struct qgd_priv_config *pc, int fd, pid_t pid, uid_t uid, gid_t gid, char *why,
			size_t whylen)
{
	const uint32_t *users = (const uint32_t *)pc->allow_users, *groups = (const uint32_t *)pc->allow_groups;
	gid_t small[64], *list = small;
	socklen_t len = sizeof small;
	int r = -EACCES;

	if (why && whylen)
		why[0] = 0;
	if (!pc->n_allow_users && !pc->n_allow_groups)
		return 0;	/* no policy: the socket's mode is the gate */
	if (uid == 0 || uid == geteuid() || has_id(users, pc->n_allow_users, uid) ||
	    has_id(groups, pc->n_allow_groups, gid))
		return 0;
	/* SO_PEERCRED has the primary group only; the others come from SO_PEERGROUPS */
	int got = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, small, &len);
	if (got < 0 && errno == ERANGE && len <= NGROUPS_MAX * sizeof(gid_t)) {
		list = malloc(len);	/* the kernel said how much room the list needs */
		if (list)
			got = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, list, &len);
	}
	/* no answer: the peer is judged on its primary group alone */
	size_t n = got == 0 && list ? len / sizeof(gid_t) : 0;
	for (size_t i = 0; i < n && r; i++)
		if (has_id(groups, pc->n_allow_groups, (uint32_t)list[i]))
			r = 0;
	if (list != small)
		free(list);
	if (!r)
		return 0;
	if (why && whylen)
		snprintf(why, whylen,
			 "access denied: uid %u (group %u, %zu supplementary groups) is not among the users and groups "
			 "this daemon serves",
			 (unsigned)uid, (unsigned)gid, n);
	qgd_log_uid(uid, QGD_LOG_WARN, "refused a client (pid %d, uid %u, gid %u, %zu supplementary groups): "
		    "not in allow-users or allow-groups", (int)pid, (unsigned)uid, (unsigned)gid, n);
	return -EACCES;
}
