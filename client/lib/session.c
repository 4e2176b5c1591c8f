/*
 * session.c - libqgraph's session with qgraphd (see qgraph.h, section 3):
 * connecting (the handshake, the region's descriptors, its layout checked
 * before it is mapped), closing, and the arena allocator.  Requests and
 * completions are in requests.c.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grow.h"
#include "paths.h"
#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "region.h"
#include "ring.h"
#include "sock.h"
#include "wire.h"

#include "session-impl.h"

QGRAPH_API const char *qgraph_session_error(struct qgraph_session *s)
{
	return s ? s->error : "no session";
}

int qg_client_fail(struct qgraph_session *s, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->error, sizeof s->error, fmt, ap);
	va_end(ap);
	return err;
}

/* ------------------------------------------------------------ connecting */

/* The uid $QGRAPH_DAEMON_USER names (a user name or a number), or -1 if unset or unknown. */
static uid_t named_daemon_user(void)
{
	const char *who = getenv("QGRAPH_DAEMON_USER");
	struct passwd pw, *found = NULL;
	char buf[1024], *end;

	if (!who || !*who)
		return (uid_t)-1;
	unsigned long n = strtoul(who, &end, 10);
	if (*end == 0 && n < (uid_t)-1)
		return (uid_t)n;
	if (getpwnam_r(who, &pw, buf, sizeof buf, &found) || !found)
		return (uid_t)-1;
	return found->pw_uid;
}

/*
 * True if the directory holding socket PATH belongs to UID and root gave
 * it to UID: its parent is root's and no one else may write it (qgraphd
 * makes /run/qgraph so and hands it to its service user).
 */
static bool handed_over_by_root(const char *path, uid_t uid)
{
	char dir[PATH_MAX], parent[PATH_MAX];
	struct stat st;

	if (qg_path_dir(path, dir, sizeof dir) || qg_path_dir(dir, parent, sizeof parent))
		return false;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return false;
	return lstat(parent, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/*
 * Before anything is sent: the process at the other end of S's socket
 * (bound at PATH) must be a daemon this process may trust with its data:
 * root, this process's own user, the user $QGRAPH_DAEMON_USER names, or
 * the owner of a socket directory that root handed over.  0 or -EPERM.
 */
static int check_daemon(struct qgraph_session *s, const char *path)
{
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int r = qg_sock_peercred(s->sock, &pid, &uid, &gid);

	if (r < 0)
		return qg_client_fail(s, r, "cannot learn who serves %s: %s", path, strerror(-r));
	if (uid == 0 || uid == geteuid() || uid == named_daemon_user() || handed_over_by_root(path, uid))
		return 0;
	return qg_client_fail(s, -EPERM,
			      "refusing the daemon at %s: it runs as uid %u (pid %d), which is neither root, this "
			      "user, nor the owner of a directory root gave it (QGRAPH_DAEMON_USER names another "
			      "daemon user to trust)",
			      path, (unsigned)uid, (int)pid);
}

/*
 * Why connecting to PATH failed with ERR, in BUF: for EACCES the owner,
 * group and mode of the socket (or of its directory, where that is what
 * is closed), and the group to join.
 */
static void connect_error(const char *path, int err, char *buf, size_t len)
{
	char dir[PATH_MAX];
	const char *what = "socket", *where = path;
	struct stat st;

	if (err != -EACCES) {
		snprintf(buf, len, "%s: %s", path, strerror(-err));
		return;
	}
	/* the socket's group, or, where its directory is closed to us, the directory's */
	if (stat(path, &st) < 0) {
		if (qg_path_dir(path, dir, sizeof dir) || stat(dir, &st) < 0) {
			snprintf(buf, len, "%s: %s", path, strerror(-err));
			return;
		}
		what = "directory";
		where = dir;
	}
	char gbuf[1024], gname[64];
	struct group gr, *found = NULL;
	if (getgrgid_r(st.st_gid, &gr, gbuf, sizeof gbuf, &found) == 0 && found)
		snprintf(gname, sizeof gname, "%s", found->gr_name);
	else
		snprintf(gname, sizeof gname, "%u", (unsigned)st.st_gid);
	snprintf(buf, len, "%s: %s (the %s %s is uid %u, group %s, mode %04o: join the group %s, "
		 "e.g. usermod -aG %s $USER, and log in again)", path, strerror(-err), what, where,
		 (unsigned)st.st_uid, gname, (unsigned)(st.st_mode & 07777), gname, gname);
}

/*
 * Check the directory of PATH and connect S to it.  0, or -errno with the
 * message set; TRIED (AT bytes, may be NULL) names the paths tried before,
 * for the message.
 */
static int connect_one(struct qgraph_session *s, const char *path, const char *tried, size_t at)
{
	char why[PATH_MAX + 512];
	int r;

	if ((r = qg_socket_dir_check(path, geteuid(), why, sizeof why)))
		return qg_client_fail(s, r, "refusing to connect through %s: %s", path, why);
	s->sock = qg_sock_connect(path);
	if (s->sock >= 0)
		return 0;
	r = s->sock;
	connect_error(path, r, why, sizeof why);
	qg_client_fail(s, r, "cannot connect to qgraphd: %.*s%s%s", (int)at, tried ? tried : "", why,
		       r == -ENOENT || r == -ECONNREFUSED ? " (is qgraphd running? QGRAPH_SOCKET names its socket)" : "");
	return r;
}

/*
 * True if the N bytes of BUF are a Welcome that drops this connection to
 * make room for newer ones that have not said Hello either (the quotas
 * handshakes-per-user and max-handshakes): the daemon drops the oldest
 * silent connection, which an honest client's is if more came in after
 * it before its Hello was read.  Trying again then is no flood.
 */
static bool dropped_for_room(const uint8_t *buf, size_t n)
{
	Qgraph__Welcome *w = qgraph__welcome__unpack(NULL, n, buf);
	bool dropped = w && w->status == QGRAPH__STATUS__STATUS_QUOTA && w->error &&
		       (strncmp(w->error, "handshakes-per-user:", 20) == 0 ||
			strncmp(w->error, "max-handshakes:", 15) == 0);

	if (w)
		qgraph__welcome__free_unpacked(w, NULL);
	return dropped;
}

static void session_free(struct qgraph_session *s)
{
	qg_region_unmap(&s->rg);
	if (s->sock >= 0)
		close(s->sock);
	if (s->bell >= 0)
		close(s->bell);
	if (s->region_fd >= 0)
		close(s->region_fd);
	pthread_mutex_destroy(&s->lock);
	free(s->rec);
	for (size_t i = 0; i < s->n_done; i++)
		free(s->done[i].stats);
	free(s->done);
	free(s->blocks);
	free(s);
}

int qg_client_opts(const void *theirs, size_t their_size, void *ours, size_t our_size)
{
	size_t n = their_size ? their_size : our_size;

	if (n < sizeof(size_t))
		return -EINVAL;
	for (size_t i = our_size; i < n; i++)
		if (((const unsigned char *)theirs)[i])
			return -E2BIG;
	memset(ours, 0, our_size);
	memcpy(ours, theirs, n < our_size ? n : our_size);
	*(size_t *)ours = our_size;
	return 0;
}

/* The caller's connect options in *O (qg_client_opts). */
static int connect_opts(const struct qgraph_connect_opts *opts, struct qgraph_connect_opts *o)
{
	return qg_client_opts(opts, opts->size, o, sizeof *o);
}

/*
 * S's socket, connected to O->socket, else to the user's own daemon and
 * else the system's (every path tried named if none answers; O->socket
 * then names the one in PATH).  0 or -errno with the session error set.
 */
static int connect_any(struct qgraph_session *s, struct qgraph_connect_opts *o, char path[PATH_MAX])
{
	int r = 0;

	if (o->socket) {
		if ((r = connect_one(s, o->socket, NULL, 0)))
			return r;
	} else {
		/* the user's own daemon, else the system's: every path tried is named if none answers */
		char paths[2][PATH_MAX], tried[2 * PATH_MAX + 256] = "";
		int n = qg_client_socket_paths(paths, 2);
		size_t at = 0;
		if (n < 0)
			return qg_client_fail(s, -ENAMETOOLONG, "the default socket path is too long");
		for (int i = 0; i < n; i++) {
			r = connect_one(s, paths[i], tried, at);
			if (r != -ENOENT || i == n - 1) {
				memcpy(path, paths[i], PATH_MAX);	/* NUL-terminated by qg_client_socket_paths */
				break;
			}
			at += (size_t)snprintf(tried + at, sizeof tried - at, "%s: %s; ", paths[i], strerror(ENOENT));
		}
		if (r)
			return r;
		o->socket = path;	/* a retry goes to the daemon that answered */
	}
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * S's socket, connected as connect_any() does, retried while no daemon
 * answers (-ENOENT, -ECONNREFUSED: one may be starting, its socket not
 * yet there or not yet listening) until O->connect_timeout_ms has passed,
 * sleeping 10 ms, doubling to 100; then checked for who serves it and
 * given O's timeouts.  0 or -errno with the session error set.
 */
static int open_socket(struct qgraph_session *s, struct qgraph_connect_opts *o, char path[PATH_MAX])
{
	int64_t wait = o->connect_timeout_ms < (INT64_C(1) << 40) ? o->connect_timeout_ms : INT64_C(1) << 40;
	int64_t deadline = wait > 0 ? now_ms() + wait : 0;
	long pause_ms = 10;
	int r;

	while ((r = connect_any(s, o, path)) == -ENOENT || r == -ECONNREFUSED) {
		int64_t left = deadline - now_ms();
		if (!deadline || left <= 0)
			return r;
		long ms = pause_ms < left ? pause_ms : (long)left;
		nanosleep(&(struct timespec){ .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L }, NULL);
		pause_ms = pause_ms * 2 > 100 ? 100 : pause_ms * 2;
	}
	if (r)
		return r;
	if ((r = check_daemon(s, o->socket)))
		return r;
	struct timeval tv = { .tv_sec = (o->timeout_ms ? o->timeout_ms : 5000) / 1000,
			      .tv_usec = (o->timeout_ms ? o->timeout_ms : 5000) % 1000 * 1000 };
	setsockopt(s->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(s->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	return 0;
}

/*
 * $QGRAPH_CONNECT_TIMEOUT (milliseconds) in *MS, left as it is when
 * unset or empty.  0, or -EINVAL for anything but a number from 0 to a
 * day, said in ERR (ERRLEN bytes, may be NULL).
 */
static int env_connect_timeout(int64_t *ms, char *err, size_t errlen)
{
	const char *v = getenv("QGRAPH_CONNECT_TIMEOUT");
	char *end;

	if (!v || !*v)
		return 0;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (errno || *end || n < 0 || n > 86400000) {
		if (err && errlen)
			snprintf(err, errlen, "QGRAPH_CONNECT_TIMEOUT=%s: not a time-out in milliseconds "
				 "(0 to 86400000)", v);
		return -EINVAL;
	}
	*ms = n;
	return 0;
}

QGRAPH_API int qgraph_connect(const struct qgraph_connect_opts *opts, struct qgraph_session **out, char *err,
			      size_t errlen)
{
	struct qgraph_connect_opts o = { 0 };
	struct qg_region_layout layout = { 0 };
	char path[PATH_MAX];
	struct qgraph_session *s;
	int r, fds[2] = { -1, -1 }, nfds = 0;

	if (err && errlen)
		err[0] = 0;
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (opts && (r = connect_opts(opts, &o)))
		return r;
	if (o.connect_timeout_ms < 0) {
		if (err && errlen)
			snprintf(err, errlen, "connect_timeout_ms %lld is negative", (long long)o.connect_timeout_ms);
		return -EINVAL;
	}
	if (!o.connect_timeout_ms && (r = env_connect_timeout(&o.connect_timeout_ms, err, errlen)))
		return r;
	s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	s->sock = s->bell = s->region_fd = -1;
	s->next_id = 1;
	Qgraph__Hello hello = QGRAPH__HELLO__INIT;
	uint8_t hbuf[512], wbuf[8192];
	hello.protocol = QGRAPH__PROTOCOL__PROTOCOL_V1;
	hello.client_name = (char *)(o.name ? o.name : "libqgraph");
	hello.arena_bytes = o.arena_bytes;
	if (qgraph__hello__get_packed_size(&hello) > sizeof hbuf) {
		r = qg_client_fail(s, -EINVAL, "the client name is too long");
		goto out;
	}
	size_t hlen = qgraph__hello__pack(&hello, hbuf);
	ssize_t n = 0;
	for (int attempt = 0;; attempt++) {
		if ((r = open_socket(s, &o, path)))
			goto out;
		r = qg_sock_send(s->sock, hbuf, hlen, NULL, 0);
		bool closed = r == -EPIPE || r == -ECONNRESET;
		n = 0;
		if (!r || closed)	/* the answer, or the refusal the daemon sent before it closed */
			n = qg_sock_recv(s->sock, wbuf, sizeof wbuf, fds, 2, &nfds);
		/*
		 * Closed without an answer, or told it was dropped for room: under
		 * a flood of connections that have not said Hello, the daemon makes
		 * room by closing the oldest, which is ours if more came in after it
		 * before its Hello did.  A new connection is the newest: tried twice
		 * more.
		 */
		bool again = n > 0 ? dropped_for_room(wbuf, (size_t)n) : !(r && !closed) && (n == 0 || n == -ECONNRESET);
		if (!again || attempt == 2)
			break;
		close(s->sock);
		s->sock = -1;
		nanosleep(&(struct timespec){ .tv_nsec = 1000000L << attempt }, NULL);
	}
	if (n > 0)
		r = 0;	/* an answer came, a refusal perhaps, though the Hello could not be sent */
	if (r) {
		r = qg_client_fail(s, r, "cannot send the handshake: %s", strerror(-r));
		goto out;
	}
	if (n <= 0) {
		r = qg_client_fail(s, n == 0 ? -ECONNRESET : (int)n, "no welcome from qgraphd: %s",
			 n == 0 ? "it hung up" : strerror((int)-n));
		goto out;
	}
	Qgraph__Welcome *w = qgraph__welcome__unpack(NULL, (size_t)n, wbuf);
	if (!w) {
		r = qg_client_fail(s, -EPROTO, "the daemon's welcome does not decode");
		goto out;
	}
	if (w->error && *w->error) {
		/* a quota (or the daemon's session limit) and a daemon on its way out, told apart from the rest */
		int e = w->status == QGRAPH__STATUS__STATUS_QUOTA	    ? -EDQUOT :
			w->status == QGRAPH__STATUS__STATUS_SHUTTING_DOWN ? -ESHUTDOWN :
									    -EPROTO;
		r = qg_client_fail(s, e, "qgraphd refused the session: %s", w->error);
	} else if (w->protocol != QGRAPH__PROTOCOL__PROTOCOL_V1 || !w->region || nfds != 2) {
		r = qg_client_fail(s, -EPROTO, "the daemon speaks protocol %d with %d descriptors; this library speaks %d",
			 (int)w->protocol, nfds, QGRAPH__PROTOCOL__PROTOCOL_V1);
	} else {
		qg_wire_layout_unpack(w->region, &layout);
		size_t at = (size_t)snprintf(s->info, sizeof s->info, "session %llu\ncpu %s\nbest_layout %s\n",
					     (unsigned long long)w->session_id, w->cpu_features ? w->cpu_features : "",
					     qgraph_type_name((enum qgraph_type)qg_wire_public_type(w->best_weight_type)) ?: "?");
		for (size_t k = 0; k < w->n_kernels && at < sizeof s->info; k++)
			at += (size_t)snprintf(s->info + at, sizeof s->info - at, "kernel %s %s (%s)\n",
					       w->kernels[k]->layout, w->kernels[k]->kernel, w->kernels[k]->reason);
		r = 0;
	}
	qgraph__welcome__free_unpacked(w, NULL);
	if (r)
		goto out;
	/* the layout checked, and the region sealed and of the size it says, before it is mapped */
	r = qg_region_attach(fds[0], &layout, &s->rg);
	if (r == -EPROTO) {
		r = qg_client_fail(s, r, "the daemon sent a region layout (or rings) this library cannot use");
		goto out;
	}
	if (r) {
		r = qg_client_fail(s, r, "the session region is not a sealed memfd of the announced size");
		goto out;
	}
	s->bell = fds[1];
	s->region_fd = fds[0];
	fds[0] = fds[1] = -1;
	s->max_record = qg_ring_max_record(&s->rg.submit);
	s->rec = malloc(s->max_record);
	if (!s->rec) {
		r = qg_client_fail(s, -ENOMEM, "out of memory");
		goto out;
	}
	*out = s;
	s = NULL;
out:
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (s) {
		if (err && errlen)
			snprintf(err, errlen, "%s", s->error);
		session_free(s);
	}
	return r;
}

QGRAPH_API void qgraph_session_close(struct qgraph_session *s)
{
	if (s)
		session_free(s);	/* the daemon sees the hang-up and frees its side */
}

QGRAPH_API const char *qgraph_session_info(struct qgraph_session *s)
{
	return s ? s->info : "";
}

QGRAPH_API void *qgraph_arena(struct qgraph_session *s, size_t *bytes)
{
	if (!s)
		return NULL;
	if (bytes)
		*bytes = (size_t)s->rg.layout.arena_bytes;
	return s->rg.arena;
}

/* ------------------------------------------------------------ the arena */

QGRAPH_API int qgraph_arena_map_at(struct qgraph_session *s, int64_t offset, size_t bytes, void *addr)
{
	long page = sysconf(_SC_PAGESIZE);

	if (!s || !addr || bytes == 0 || offset < 0 || page <= 0)
		return -EINVAL;
	uint64_t at = s->rg.layout.arena_offset + (uint64_t)offset;
	if ((uint64_t)offset > s->rg.layout.arena_bytes || bytes > s->rg.layout.arena_bytes - (uint64_t)offset ||
	    at % (uint64_t)page || (uintptr_t)addr % (uintptr_t)page || bytes % (size_t)page)
		return -EINVAL;
	/* MAP_FIXED replaces what is there: never the session's own mapping (header, rings, events, arena) */
	uintptr_t lo = (uintptr_t)addr, base = (uintptr_t)s->rg.base;
	if (bytes > UINTPTR_MAX - lo || (lo < base + s->rg.layout.region_bytes && lo + bytes > base))
		return -EINVAL;
	void *p = mmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, s->region_fd, (off_t)at);
	return p == MAP_FAILED ? -errno : 0;
}

QGRAPH_API int64_t qgraph_arena_alloc(struct qgraph_session *s, size_t bytes)
{
	int64_t size = (int64_t)((bytes + 63) & ~(size_t)63), at = 0, ret = -ENOMEM;

	if (!s || bytes == 0 || bytes > (size_t)INT64_MAX - 63)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	size_t i = 0;
	for (; i <= s->n_blocks; i++) {
		int64_t end = i < s->n_blocks ? s->blocks[i].off : (int64_t)s->rg.layout.arena_bytes;
		if (end - at >= size)
			break;
		if (i < s->n_blocks)
			at = s->blocks[i].off + s->blocks[i].size;
	}
	if (i <= s->n_blocks && at + size <= (int64_t)s->rg.layout.arena_bytes) {
		void *p = qg_grow(s->blocks, &s->cap_blocks, s->n_blocks, sizeof *s->blocks, 16);
		if (!p)
			goto out;
		s->blocks = p;
		memmove(&s->blocks[i + 1], &s->blocks[i], (s->n_blocks - i) * sizeof *s->blocks);
		s->blocks[i] = (struct block){ at, size };
		s->n_blocks++;
		ret = at;
	}
out:
	pthread_mutex_unlock(&s->lock);
	return ret;
}

QGRAPH_API void qgraph_arena_free(struct qgraph_session *s, int64_t offset)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_blocks; i++) {
		if (s->blocks[i].off == offset) {
			memmove(&s->blocks[i], &s->blocks[i + 1], (s->n_blocks - i - 1) * sizeof *s->blocks);
			s->n_blocks--;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

