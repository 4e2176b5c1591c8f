/*
 * shm.c - sealed memfds (see shm.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm.h"

_Static_assert(QG_SHM_SEALS_REQUIRED == (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW),
	       "seal bits");

int qg_shm_create(const char *name, size_t bytes)
{
	int fd, err;

	if (!name || bytes == 0 || bytes > (size_t)INT64_MAX)
		return -EINVAL;
	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) < 0)
		goto fail;
	/* seal the seals last: a failed seal is an error, never a warning */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	return fd;
fail:
	err = -errno;
	close(fd);
	return err;
}

int qg_shm_map_checked(int fd, size_t bytes, void **addr)
{
	struct stat st;
	int seals;
	void *p;

	if (!addr)
		return -EINVAL;
	*addr = NULL;
	if (fd < 0 || bytes == 0)
		return -EINVAL;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return errno == EINVAL ? -EPERM : -errno;	/* not a sealable file */
	if ((seals & QG_SHM_SEALS_REQUIRED) != QG_SHM_SEALS_REQUIRED)
		return -EPERM;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size < 0 || (size_t)st.st_size != bytes)
		return -EINVAL;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*addr = p;
	return 0;
}

void qg_shm_unmap(void *addr, size_t bytes)
{
	if (addr)
		munmap(addr, bytes);
}
