/*
 * sock-test.c - one listener per socket path, stale sockets replaced,
 * peer credentials, and descriptor passing that leaks nothing when the
 * sender sends more than was asked for.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sock.h"
#include "tap.h"

/* Descriptors this process has open. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

int main(void)
{
	char dir[] = "/tmp/qg-sock-XXXXXX", path[64], lockp[80];
	int lock, lock2, pfd[2];

	if (!mkdtemp(dir))
		return 99;
	snprintf(path, sizeof path, "%s/s.sock", dir);
	snprintf(lockp, sizeof lockp, "%s.lock", path);

	int l = qg_sock_listen(path, 0660, &lock);
	tap_ok(l >= 0 && lock >= 0, "listen on a fresh path");
	tap_ok(qg_sock_listen(path, 0660, &lock2) == -EADDRINUSE && lock2 == -1,
	       "a second listener on the same path is refused while the first lives");

	int c = qg_sock_connect(path);
	int a = qg_sock_accept(l);
	tap_ok(c >= 0 && a >= 0, "connect and accept");
	pid_t pid;
	uid_t uid;
	gid_t gid;
	tap_ok(qg_sock_peercred(a, &pid, &uid, &gid) == 0 && pid == getpid() && uid == getuid() && gid == getgid(),
	       "SO_PEERCRED names this process");

	/* two descriptors pass, close-on-exec */
	pipe(pfd);
	int got[QG_SOCK_MAX_FDS], n;
	char buf[64];
	tap_ok(qg_sock_send(a, "hi", 2, pfd, 2) == 0, "send two descriptors");
	ssize_t r = qg_sock_recv(c, buf, sizeof buf, got, 2, &n);
	tap_ok(r == 2 && n == 2 && (fcntl(got[0], F_GETFD) & FD_CLOEXEC) && (fcntl(got[1], F_GETFD) & FD_CLOEXEC),
	       "they arrive, close-on-exec");
	write(got[1], "x", 1);
	tap_ok(read(pfd[0], buf, 1) == 1 && buf[0] == 'x', "and are the same pipe");
	close(got[0]);
	close(got[1]);

	/*
	 * More descriptors than the receiver takes: refused, none leaked.
	 * qemu's user-mode emulation of recvmsg() neither reports MSG_CTRUNC
	 * nor closes what it cut, so this is checked on real kernels only.
	 */
	const char *model = getenv("QG_CPU_MODEL");
	if (model && strcmp(model, "native") != 0) {
		tap_skip("qemu-user does not report control-message truncation");
		tap_skip("qemu-user does not report control-message truncation");
		tap_skip("qemu-user does not report control-message truncation");
	} else {
		int before = open_fds();
		int three[3] = { pfd[0], pfd[1], pfd[0] };
		qg_sock_send(a, "hi", 2, three, 3);
		r = qg_sock_recv(c, buf, sizeof buf, got, 2, &n);
		tap_ok(r == -EPROTO && n == 0, "three descriptors where two are allowed: -EPROTO");
		tap_ok(open_fds() == before, "and every descriptor it brought is closed (%d open)", open_fds());
		qg_sock_send(a, "hi", 2, pfd, 1);
		r = qg_sock_recv(c, buf, sizeof buf, NULL, 0, NULL);
		tap_ok(r == -EPROTO && open_fds() == before, "a descriptor where none is allowed: refused, closed");
	}

	/* a payload longer than the buffer is not silently cut */
	char big[200];
	memset(big, 'b', sizeof big);
	qg_sock_send(a, big, sizeof big, NULL, 0);
	tap_ok(qg_sock_recv(c, buf, sizeof buf, NULL, 0, NULL) == -EPROTO, "a truncated payload gives -EPROTO");

	tap_ok(qg_sock_send(a, NULL, 0, NULL, QG_SOCK_MAX_FDS + 1) == -EINVAL, "too many fds to send: -EINVAL");
	close(a);
	tap_ok(qg_sock_recv(c, buf, sizeof buf, NULL, 0, NULL) == 0, "a hang-up reads as 0");
	tap_ok(qg_sock_send(c, "x", 1, NULL, 0) == -EPIPE, "sending to a closed peer gives -EPIPE, no SIGPIPE");
	close(c);
	close(l);
	close(lock);

	/* a daemon that died without cleaning up leaves its socket: replaced */
	unlink(path);
	pid_t child = tap_fork();
	if (child == 0) {
		int lk;
		_exit(qg_sock_listen(path, 0600, &lk) >= 0 ? 0 : 1);	/* dies holding nothing */
	}
	int status;
	waitpid(child, &status, 0);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && access(path, F_OK) == 0,
	       "a dead daemon left its socket file behind");
	l = qg_sock_listen(path, 0600, &lock);
	c = qg_sock_connect(path);
	tap_ok(l >= 0 && c >= 0, "a new listener replaces the stale socket and takes clients");
	close(c);
	close(l);
	close(lock);

	/* something that is not a socket at the path is never removed */
	unlink(path);
	int f = open(path, O_CREAT | O_WRONLY, 0600);
	close(f);
	tap_ok(qg_sock_listen(path, 0600, &lock) == -EEXIST && access(path, F_OK) == 0,
	       "a regular file at the path is left alone (-EEXIST)");

	/*
	 * A daemon getting ready: bound, the path taken, but no socket at the
	 * path for a client to be refused by, until it listens and publishes
	 */
	unlink(path);
	char staged[80];
	l = qg_sock_bind(path, 0600, &lock);
	tap_ok(l >= 0 && qg_sock_staging_path(path, staged, sizeof staged) == 0 && access(path, F_OK) != 0 &&
		       access(staged, F_OK) == 0 && qg_sock_connect(path) == -ENOENT,
	       "bound, the socket is at its staging name %s and the path has none", staged);
	tap_ok(qg_sock_listen(path, 0600, &lock2) == -EADDRINUSE, "yet the path is taken");
	c = -1;
	tap_ok(listen(l, 8) == 0 && qg_sock_publish(path) == 0 && access(staged, F_OK) != 0 &&
		       (c = qg_sock_connect(path)) >= 0,
	       "listening and published, the socket is at the path and takes clients");
	close(c);
	close(l);
	close(lock);
	unlink(path);
	l = qg_sock_bind(path, 0600, &lock);
	close(l);
	close(lock);
	l = qg_sock_listen(path, 0600, &lock);
	tap_ok(l >= 0 && access(staged, F_OK) != 0 && access(path, F_OK) == 0,
	       "a dead daemon's staged socket is removed by the next listener");
	close(l);
	close(lock);
	unlink(path);

	char longp[200];
	memset(longp, 'a', sizeof longp - 1);
	longp[sizeof longp - 1] = 0;
	tap_ok(qg_sock_connect(longp) == -ENAMETOOLONG && qg_sock_connect("") == -EINVAL,
	       "bad paths are refused");

	unlink(path);
	unlink(lockp);
	rmdir(dir);
	return tap_done();
}
