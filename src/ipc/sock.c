/*
 * sock.c - Unix sockets, lock files and descriptor passing (see sock.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sock.h"

static int sock_addr(const char *path, struct sockaddr_un *sa)
{
	if (!path || !*path)
		return -EINVAL;
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sa->sun_path)
		return -ENAMETOOLONG;
	memcpy(sa->sun_path, path, strlen(path) + 1);
	return 0;
}

int qg_sock_staging_path(const char *path, char *buf, size_t len)
{
	const size_t room = sizeof ((struct sockaddr_un *)0)->sun_path;
	const char *name = strlen(path) + sizeof ".new" <= room ? ".new" : "";

	if ((size_t)snprintf(buf, len, "%s%s", path, name) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int qg_sock_publish(const char *path)
{
	char staged[PATH_MAX];
	int err = qg_sock_staging_path(path, staged, sizeof staged);

	if (err)
		return err;
	return strcmp(staged, path) && rename(staged, path) < 0 ? -errno : 0;
}

int qg_sock_open(int fd, const char *path)
{
	return listen(fd, 128) < 0 ? -errno : qg_sock_publish(path);
}

/* Remove a socket file at PATH (never anything else): 0, or -EEXIST for something that is not a socket. */
static int remove_socket(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;	/* never remove what is not a socket */
	unlink(path);
	return 0;
}

int qg_sock_bind(const char *path, unsigned mode, int *lock_fd)
{
	struct sockaddr_un sa;
	char lock_path[PATH_MAX], staged[PATH_MAX];
	int err, lfd, fd;

	if (!lock_fd)
		return -EINVAL;
	*lock_fd = -1;
	if ((err = sock_addr(path, &sa)) || (err = qg_sock_staging_path(path, staged, sizeof staged)) ||
	    (err = sock_addr(staged, &sa)))
		return err;
	if ((size_t)snprintf(lock_path, sizeof lock_path, "%s.lock", path) >= sizeof lock_path)
		return -ENAMETOOLONG;
	lfd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lfd < 0)
		return -errno;
	if (flock(lfd, LOCK_EX | LOCK_NB) < 0) {
		err = errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
		close(lfd);
		return err;
	}
	/* we hold the lock: whatever socket files are there belong to a dead daemon */
	if ((err = remove_socket(path)) || (err = remove_socket(staged))) {
		close(lfd);
		return err;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	/* bind creates the file with the umask; fchmod cannot reach it, so
	 * narrow the umask around bind and set the mode explicitly after */
	mode_t old = umask(0177);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (r < 0 || chmod(staged, mode) < 0)
		goto fail;
	*lock_fd = lfd;
	return fd;
fail:
	err = -errno;
	if (fd >= 0)
		close(fd);
	close(lfd);
	return err;
}

int qg_sock_listen(const char *path, unsigned mode, int *lock_fd)
{
	char staged[PATH_MAX];
	int fd = qg_sock_bind(path, mode, lock_fd);

	if (fd < 0)
		return fd;
	int err = qg_sock_open(fd, path);
	if (err) {
		if (qg_sock_staging_path(path, staged, sizeof staged) == 0)
			unlink(staged);
		close(fd);
		close(*lock_fd);
		*lock_fd = -1;
		return err;
	}
	return fd;
}

int qg_sock_connect(const char *path)
{
	struct sockaddr_un sa;
	int err, fd;

	if ((err = sock_addr(path, &sa)))
		return err;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int qg_sock_accept(int listen_fd)
{
	int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int qg_sock_peercred(int fd, pid_t *pid, uid_t *uid, gid_t *gid)
{
	struct ucred cr;
	socklen_t len = sizeof cr;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -errno;
	if (len != sizeof cr)
		return -EPROTO;
	if (pid)
		*pid = cr.pid;
	if (uid)
		*uid = cr.uid;
	if (gid)
		*gid = cr.gid;
	return 0;
}

int qg_sock_peergroups(int fd, gid_t **groups, size_t *n)
{
	socklen_t len = 16 * sizeof(gid_t);
	gid_t *g = NULL;

	*groups = NULL;
	*n = 0;
	for (int tries = 0; tries < 8; tries++) {
		gid_t *ng = realloc(g, len ? len : sizeof(gid_t));
		if (!ng) {
			free(g);
			return -ENOMEM;
		}
		g = ng;
		socklen_t got = len;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &got) == 0) {
			if (got % sizeof(gid_t)) {
				free(g);
				return -EPROTO;
			}
			*groups = g;
			*n = got / sizeof(gid_t);
			return 0;
		}
		/* ERANGE: the kernel wrote the size it needs into GOT */
		if (errno != ERANGE || got <= len || got > 65536 * sizeof(gid_t)) {
			int e = -errno;
			free(g);
			return e;
		}
		len = got;
	}
	free(g);
	return -EPROTO;
}

int qg_sock_send(int fd, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * QG_SOCK_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds < 0 || nfds > QG_SOCK_MAX_FDS || (nfds && !fds))
		return -EINVAL;
	if (nfds) {
		memset(&ctl, 0, sizeof ctl);
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

/* Close every descriptor an SCM_RIGHTS message carried. */
static void close_rights(struct msghdr *msg)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (fd >= 0)
				close(fd);
		}
	}
}

ssize_t qg_sock_recv(int fd, void *buf, size_t cap, int *fds, int maxfds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * QG_SOCK_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	int got = 0;

	if (nfds)
		*nfds = 0;
	if (maxfds < 0 || maxfds > QG_SOCK_MAX_FDS || (maxfds && (!fds || !nfds)))
		return -EINVAL;
	/* room for the most we accept: more than that sets MSG_CTRUNC */
	msg.msg_control = ctl.buf;
	msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)(maxfds ? maxfds : 1));
	ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) {
		close_rights(&msg);
		return -EPROTO;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		size_t count;
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0) || (c->cmsg_len - CMSG_LEN(0)) % sizeof(int))
			goto bad;
		count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (count > (size_t)(maxfds - got))
			goto bad;
		memcpy(fds + got, CMSG_DATA(c), count * sizeof(int));
		got += (int)count;
	}
	if (nfds)
		*nfds = got;
	return n;
bad:
	close_rights(&msg);
	return -EPROTO;
}
