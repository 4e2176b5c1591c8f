/*
 * paths.h - where the daemon's socket lives, and whether a directory there
 * can be trusted, for the daemon and its clients.
 */
#ifndef QG_PATHS_H
#define QG_PATHS_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#define QG_SYSTEM_SOCKET "/run/qgraph/qgraphd.sock"	/* the system daemon's (qgraphd.socket) */

/*
 * The socket path when none is given: $QGRAPH_SOCKET if set, else
 * /run/qgraph/qgraphd.sock for root and $XDG_RUNTIME_DIR/qgraph/qgraphd.sock
 * for anyone else (/tmp/qgraph-UID/qgraphd.sock without XDG_RUNTIME_DIR).
 * Returns 0, or -ENAMETOOLONG.
 */
int qg_default_socket_path(char *buf, size_t len);

/*
 * Where a client that names no socket looks, in order: the default above,
 * then, when that is a user's own (no $QGRAPH_SOCKET, not root), the system
 * daemon's QG_SYSTEM_SOCKET.  Fills PATHS (N entries of LEN bytes each,
 * N >= 2) and returns how many, or -ENAMETOOLONG.
 */
int qg_client_socket_paths(char (*paths)[PATH_MAX], size_t n);

/* The directory part of PATH ("/" for "/x") in BUF (LEN bytes).  0, -EINVAL (no slash) or -ENAMETOOLONG. */
int qg_path_dir(const char *path, char *buf, size_t len);

/*
 * Whether the directory that holds socket PATH is safe for a process of
 * UID to put a socket in or to connect through.  A directory that sits in
 * a world-writable one (the /tmp fallback) could have been made by anyone:
 * it must be a real directory (lstat: no symlink) owned by root or UID
 * that neither group nor others may write.  A directory elsewhere was made
 * by whoever may write its parent and is not checked.  0 if safe or absent
 * (ENOENT: nobody made it yet), else -EPERM (or the lstat's -errno) with the
 * reason in WHY (WHYLEN bytes, may be NULL).
 */
int qg_socket_dir_check(const char *path, uid_t uid, char *why, size_t whylen);

#endif /* QG_PATHS_H */
