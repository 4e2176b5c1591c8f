/*
 * paths.h - where the daemon's socket lives, for the daemon and its clients.
 */
#ifndef QG_PATHS_H
#define QG_PATHS_H

#include <stddef.h>

/*
 * The socket path when none is given: $QGRAPH_SOCKET if set, else
 * /run/qgraph/qgraphd.sock for root and $XDG_RUNTIME_DIR/qgraph/qgraphd.sock
 * for anyone else (/tmp/qgraph-UID/qgraphd.sock without XDG_RUNTIME_DIR).
 * Returns 0, or -ENAMETOOLONG.
 */
int qg_default_socket_path(char *buf, size_t len);

/* Create the directory that holds PATH (one level, mode MODE) if missing.  0 or -errno. */
int qg_make_socket_dir(const char *path, unsigned mode);

#endif /* QG_PATHS_H */
