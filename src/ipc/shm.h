/*
 * shm.h - sealed shared memory between processes that do not trust each other.
 *
 * The owner creates a memfd, sizes it and seals it against growing and
 * shrinking (and seals the seals), so the other side can map it without the
 * owner being able to pull pages from under it (SIGBUS) or the other side
 * being able to resize it.  The side that receives the fd checks the seals
 * and the size before it maps: a mapping of a file that can still shrink is
 * a crash waiting for the other side to cause it.
 */
#ifndef QG_SHM_H
#define QG_SHM_H

#include <stddef.h>

#define QG_SHM_SEALS_REQUIRED 0x7	/* F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW */

/*
 * Create a sealed memfd of BYTES (> 0) named NAME (for /proc, not a path),
 * close-on-exec.  Returns the fd or -errno.
 */
int qg_shm_create(const char *name, size_t bytes);

/*
 * Check that FD is a memfd sealed against growing, shrinking and further
 * sealing, of exactly BYTES, then map it shared and read-write.  Returns 0
 * and the address in *ADDR, or -EPERM (seals missing), -EINVAL (size
 * differs) or another -errno.
 */
int qg_shm_map_checked(int fd, size_t bytes, void **addr);

/* Unmap what qg_shm_map_checked() mapped. */
void qg_shm_unmap(void *addr, size_t bytes);

#endif /* QG_SHM_H */
