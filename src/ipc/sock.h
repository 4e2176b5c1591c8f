/*
 * sock.h - Unix sockets for the daemon and its clients: one listener per
 * path guarded by a lock file, credentials of the peer, and messages that
 * carry file descriptors (SCM_RIGHTS), received with every check a hostile
 * sender makes necessary.
 */
#ifndef QG_SOCK_H
#define QG_SOCK_H

#include <stddef.h>
#include <sys/types.h>

#define QG_SOCK_MAX_FDS 8	/* most fds one message may carry */

/*
 * Listen on PATH (non-blocking, close-on-exec, mode MODE, backlog 128).
 * PATH.lock is created and held with flock(): while another process holds
 * it, returns -EADDRINUSE; when it is free, a socket file left at PATH by a
 * dead daemon is removed first.  On success returns the listening fd and
 * stores the lock fd (keep it open for the listener's life) in *LOCK_FD.
 */
int qg_sock_listen(const char *path, unsigned mode, int *lock_fd);

/*
 * qg_sock_listen() without the listen(), and out of sight: PATH is taken
 * (its lock held, a dead daemon's socket removed) but the socket is bound
 * at the staging name qg_sock_staging_path() gives, so that no client
 * finds a socket at PATH that refuses it while the daemon gets ready.
 * Listen, then qg_sock_publish() moves it to PATH.
 */
int qg_sock_bind(const char *path, unsigned mode, int *lock_fd);

/*
 * Where qg_sock_bind() binds for PATH, in BUF (LEN bytes): PATH".new", or
 * PATH itself when that name would not fit a socket address.  0 or
 * -ENAMETOOLONG.
 */
int qg_sock_staging_path(const char *path, char *buf, size_t len);

/* The socket qg_sock_bind() bound for PATH, renamed to PATH: 0 or -errno. */
int qg_sock_publish(const char *path);

/* Listen on FD (qg_sock_bind's for PATH, backlog 128), then publish it at PATH.  0 or -errno. */
int qg_sock_open(int fd, const char *path);

/* Connect to PATH (blocking, close-on-exec).  Returns the fd or -errno. */
int qg_sock_connect(const char *path);

/* Accept a client on LISTEN_FD: non-blocking, close-on-exec.  fd or -errno. */
int qg_sock_accept(int listen_fd);

/* The peer's pid, uid and gid as the kernel saw them at connect time. */
int qg_sock_peercred(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/*
 * The peer's supplementary groups (SO_PEERGROUPS; SO_PEERCRED carries only
 * the primary one): 0 and a malloc'd array in *GROUPS of *N entries (free
 * it), or -errno (-ENOPROTOOPT on kernels before 4.13).
 */
int qg_sock_peergroups(int fd, gid_t **groups, size_t *n);

/*
 * Send LEN bytes and NFDS (<= QG_SOCK_MAX_FDS) descriptors as one message,
 * with MSG_NOSIGNAL.  Returns 0, -EAGAIN, -EMSGSIZE on a short send, or
 * -errno (-EPIPE when the peer is gone).
 */
int qg_sock_send(int fd, const void *buf, size_t len, const int *fds, int nfds);

/*
 * Receive one message of at most CAP bytes and at most MAXFDS descriptors
 * (close-on-exec).  Returns the byte count (0: the peer hung up) and stores
 * the descriptors in FDS and their count in *NFDS.  A message whose
 * descriptors did not all fit (MSG_CTRUNC), that carries control data other
 * than SCM_RIGHTS or with a malformed length, or whose payload was cut
 * (MSG_TRUNC) gives -EPROTO, and every descriptor it brought is closed.
 */
ssize_t qg_sock_recv(int fd, void *buf, size_t cap, int *fds, int maxfds, int *nfds);

#endif /* QG_SOCK_H */
