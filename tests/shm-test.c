/*
 * shm-test.c - sealed memfds: the receiving side maps only a file sealed
 * against growing and shrinking, of the size it expects; a sealed file can
 * not be resized by either side; the mapping is shared across fork.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm.h"
#include "tap.h"

int main(void)
{
	size_t bytes = 1 << 20;
	void *p = NULL, *q = NULL;
	int fd = qg_shm_create("qg-test", bytes);

	tap_ok(fd >= 0, "create a sealed memfd (%d)", fd);
	if (fd < 0)
		return tap_done();
	tap_ok((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0, "it is close-on-exec");
	tap_ok(ftruncate(fd, (off_t)bytes * 2) < 0 && errno == EPERM, "it cannot grow");
	tap_ok(ftruncate(fd, (off_t)bytes / 2) < 0 && errno == EPERM, "it cannot shrink");
	tap_ok(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) < 0 && errno == EPERM, "its seals are sealed");
	tap_ok(qg_shm_map_checked(fd, bytes + 4096, &p) == -EINVAL && p == NULL,
	       "mapping with the wrong size is refused");
	tap_ok(qg_shm_map_checked(fd, bytes, &p) == 0 && p != NULL, "mapping with the right size works");

	/* an unsealed memfd, and a file that is not sealable, are refused */
	int raw = memfd_create("qg-raw", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ftruncate(raw, (off_t)bytes);
	tap_ok(qg_shm_map_checked(raw, bytes, &q) == -EPERM && q == NULL, "an unsealed memfd is refused");
	fcntl(raw, F_ADD_SEALS, F_SEAL_SHRINK);
	tap_ok(qg_shm_map_checked(raw, bytes, &q) == -EPERM, "a memfd that can still grow is refused");
	close(raw);
	int nos = memfd_create("qg-nos", MFD_CLOEXEC);
	ftruncate(nos, (off_t)bytes);
	tap_ok(qg_shm_map_checked(nos, bytes, &q) == -EPERM, "a memfd without sealing is refused");
	close(nos);
	int pfd[2];
	pipe(pfd);
	tap_ok(qg_shm_map_checked(pfd[0], bytes, &q) == -EPERM, "a pipe is refused");
	close(pfd[0]);
	close(pfd[1]);
	tap_ok(qg_shm_map_checked(-1, bytes, &q) == -EINVAL && qg_shm_map_checked(fd, bytes, NULL) == -EINVAL,
	       "bad arguments are refused");
	tap_ok(qg_shm_create(NULL, 1) == -EINVAL && qg_shm_create("x", 0) == -EINVAL, "bad create arguments");

	/* shared between processes: the child maps the same fd and writes */
	memset(p, 0, bytes);
	pid_t pid = tap_fork();
	if (pid == 0) {
		void *c;
		if (qg_shm_map_checked(fd, bytes, &c))
			_exit(1);
		memcpy((char *)c + bytes - 6, "hello", 6);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strcmp((char *)p + bytes - 6, "hello") == 0,
	       "another process maps it and its writes are seen");

	qg_shm_unmap(p, bytes);
	close(fd);
	return tap_done();
}
