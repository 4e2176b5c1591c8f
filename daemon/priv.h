/*
 * priv.h - qgraphd's privileges: the runtime directory and socket given to
 * the daemon's user and group, the drop to that user with libcap-ng
 * (CAP_IPC_LOCK kept, everything else gone, the bounding set cleared,
 * no_new_privs set, supplementary groups dropped), and the access policy
 * checked against a client's credentials when it connects.
 *
 * Started unprivileged, the daemon keeps what it has (at most
 * CAP_IPC_LOCK) and says once, in the log, what it lacks.
 */
#ifndef QGD_PRIV_H
#define QGD_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define QGD_ALLOW_MAX 64	/* entries in allow-users, and in allow-groups */

/* What the configuration says about privileges and access (conf.c fills it). */
struct qgd_priv_config {
	int has_user, has_group;	/* --user / --group given */
	uid_t uid;			/* the user to run as */
	gid_t gid;			/* the group to run as */
	gid_t user_gid;			/* the user's primary group, when it has one */
	int user_has_gid;
	unsigned socket_mode;		/* of the socket file (default 0660) */
	uint32_t n_allow_users, n_allow_groups;
	uid_t allow_users[QGD_ALLOW_MAX];
	gid_t allow_groups[QGD_ALLOW_MAX];
};

/*
 * Create the directory that holds SOCKET_PATH if it is missing (one level).
 * When the daemon will run as another user, a directory it created, the
 * one the service manager made for it ($RUNTIME_DIRECTORY), or one that
 * user owns already (a previous run handed it over), is to be given
 * to that user and group: it is opened (never through a link), kept root's
 * with mode 0750 for now (taken back if a previous run gave it away), and
 * its descriptor returned in *DIR_FD for qgd_priv_hand_over_dir() once the
 * socket is bound and owned; else *DIR_FD is -1.  0 or -errno (logged).
 */
int qgd_priv_runtime_dir(const struct qgd_priv_config *pc, const char *socket_path, int *dir_fd);

/* Give the bound socket at PATH the daemon's user and group (a link there is not followed).  0 or -errno (logged). */
int qgd_priv_own_socket(const struct qgd_priv_config *pc, const char *path);

/*
 * Give the runtime directory DIR_FD of SOCKET_PATH (from
 * qgd_priv_runtime_dir; -1: nothing to do) to the daemon's user and group,
 * mode 0750, by its descriptor, and close it.  Call after every step on the
 * socket.  0 or -errno (logged).
 */
int qgd_priv_hand_over_dir(const struct qgd_priv_config *pc, const char *socket_path, int dir_fd);

/*
 * Become the configured user and group, keeping CAP_IPC_LOCK alone (where
 * the process has it), clear the bounding and ambient sets, drop the
 * supplementary groups, set no_new_privs, and check that all of it took.
 * Call before any thread is created.  Logs once what it did and what the
 * process lacks.  0, or -errno when what the configuration asks cannot be
 * done (then the daemon must not start).
 */
int qgd_priv_drop(const struct qgd_priv_config *pc);

/*
 * Check the peer on FD (PID, UID and GID from SO_PEERCRED) against the
 * access policy, its supplementary groups read with SO_PEERGROUPS.  With
 * no allow-users and no allow-groups, everyone who can open the socket is
 * served; otherwise root, the daemon's own user, the users listed and the
 * members (primary or supplementary) of the groups listed.  Returns 0 when
 * the peer may have a session, or -EACCES (logged through the uid's rate
 * limit, qgd_log_uid) with the reason, for the client, in WHY (WHYLEN
 * bytes).
 */
int qgd_priv_check_peer(const struct qgd_priv_config *pc, int fd, pid_t pid, uid_t uid, gid_t gid, char *why,
			size_t whylen);

#endif /* QGD_PRIV_H */
