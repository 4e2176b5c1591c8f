/*
 * arena-test.c - the shared arena: a child process maps the owner's memfd
 * through the checks and places tensors at offsets in it; memfds that are
 * unsealed, partly sealed or of another size are refused; windows and
 * buffers are bounded; pieces this side allocates do not overlap; the
 * session region's layout is expressed as an arena with a window.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arena.h"
#include "buffer.h"
#include "region.h"
#include "tap.h"
#include "tensor.h"

#define BYTES ((size_t)1 << 20)

/*
 * The child: map FD through the checks, read the floats the parent put at
 * offset 4096 through a tensor in a buffer named by offset, write them
 * doubled at offset 8192.  Exit status 0 or the step that failed.
 */
static int child(int fd)
{
	struct qg_arena *a = NULL;
	struct qg_buffer *in = NULL, *out = NULL;
	float v[64];

	if (qg_arena_map(fd, BYTES, &a))
		return 1;
	if (qg_arena_fd(a) != -1 || qg_arena_bytes(a) != BYTES)
		return 2;
	if (qg_arena_buffer_at(a, 4096, 4096, &in) || qg_arena_buffer_at(a, 8192, 4096, &out))
		return 3;
	struct qg_ctx *ctx = qg_ctx_new(4);
	struct qg_tensor *ti = qg_tensor_new_1d(ctx, QG_TYPE_F32, 64);
	struct qg_tensor *to = qg_tensor_new_1d(ctx, QG_TYPE_F32, 64);
	if (!ti || !to || qg_buffer_place(in, ti, 0) || qg_buffer_place(out, to, 0))
		return 4;
	if (qg_tensor_get(ti, v, 0, sizeof v))
		return 5;
	for (int i = 0; i < 64; i++)
		v[i] *= 2;
	if (qg_tensor_set(to, v, 0, sizeof v))
		return 6;
	qg_ctx_free(ctx);
	qg_buffer_free(in);
	qg_buffer_free(out);
	qg_arena_free(a);
	return 0;
}

static void test_share(void)
{
	struct qg_arena *a = NULL;

	tap_ok(qg_arena_create("qg-arena-test", BYTES, &a) == 0 && a, "the owner creates an arena");
	if (!a)
		return;
	int fd = qg_arena_fd(a);
	tap_ok(fd >= 0 && (fcntl(fd, F_GET_SEALS) & 0x7) == 0x7, "its memfd is sealed against grow, shrink, seal");
	tap_ok(ftruncate(fd, (off_t)BYTES / 2) < 0 && errno == EPERM, "the owner cannot shrink it either");
	float *f = (float *)((unsigned char *)qg_arena_base(a) + 4096);
	for (int i = 0; i < 64; i++)
		f[i] = (float)i + 0.25f;
	pid_t pid = tap_fork();
	if (pid == 0)
		_exit(child(fd));
	int st = 0;
	waitpid(pid, &st, 0);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a child maps it through the checks and writes tensors (%d)",
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	const float *g = (const float *)((unsigned char *)qg_arena_base(a) + 8192);
	int same = 1;
	for (int i = 0; i < 64; i++)
		same &= g[i] == 2 * ((float)i + 0.25f);
	tap_ok(same, "the owner reads what the child wrote");

	struct qg_arena *b = NULL;
	tap_ok(qg_arena_map(fd, BYTES + 4096, &b) == -EINVAL && !b, "mapping it with another size is refused");
	tap_ok(qg_arena_map(fd, BYTES, &b) == 0 && qg_arena_map_base(b) != qg_arena_map_base(a), "a second mapping");
	((unsigned char *)qg_arena_base(b))[100] = 42;
	tap_ok(((unsigned char *)qg_arena_base(a))[100] == 42, "the mappings share their bytes");
	qg_arena_free(b);
	qg_arena_free(a);
	tap_ok(fcntl(fd, F_GETFD) < 0 && errno == EBADF, "freeing the owner's arena closes its fd");
}

static void test_refused(void)
{
	struct qg_arena *a = NULL;
	int fd = memfd_create("qg-raw", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	tap_ok(fd >= 0 && ftruncate(fd, (off_t)BYTES) == 0, "an unsealed memfd");
	tap_ok(qg_arena_map(fd, BYTES, &a) == -EPERM && !a, "an unsealed memfd is refused");
	fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
	tap_ok(qg_arena_map(fd, BYTES, &a) == -EPERM, "one whose seals are not sealed is refused");
	close(fd);

	/* resized before sealing: the size the other side announced no longer holds */
	fd = memfd_create("qg-resized", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ftruncate(fd, (off_t)BYTES);
	ftruncate(fd, (off_t)BYTES / 2);
	fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	tap_ok(qg_arena_map(fd, BYTES, &a) == -EINVAL && !a, "a resized memfd is refused at its announced size");
	tap_ok(qg_arena_map(fd, BYTES / 2, &a) == 0, "and accepted at its real size");
	qg_arena_free(a);
	close(fd);
	int nos = memfd_create("qg-nos", MFD_CLOEXEC);
	ftruncate(nos, (off_t)BYTES);
	tap_ok(qg_arena_map(nos, BYTES, &a) == -EPERM, "a memfd without sealing is refused");
	close(nos);
	tap_ok(qg_arena_map(-1, BYTES, &a) == -EINVAL && qg_arena_map(0, BYTES, NULL) == -EINVAL &&
		       qg_arena_create(NULL, BYTES, &a) == -EINVAL && qg_arena_create("x", 0, &a) == -EINVAL,
	       "bad arguments are refused");
}

static void test_buffers(void)
{
	struct qg_arena *a = NULL;
	struct qg_buffer *b1 = NULL, *b2 = NULL, *b3 = NULL;

	if (qg_arena_create("qg-arena-buf", BYTES, &a)) {
		tap_ok(0, "an arena for the buffer tests");
		return;
	}
	struct qg_buft *bt = qg_arena_buft(a);
	tap_ok(!strcmp(qg_buft_name(bt), "arena") && qg_buft_alignment(bt) == QG_ARENA_ALIGN &&
		       qg_buft_max_size(bt) == BYTES && qg_buft_is_host(bt),
	       "the buffer type: name, alignment, max size, host");
	tap_ok(qg_arena_buffer_at(a, 0, BYTES, &b1) == 0 && qg_buffer_base(b1) == qg_arena_base(a),
	       "a buffer over the whole window");
	qg_buffer_free(b1);
	tap_ok(qg_arena_buffer_at(a, 64, BYTES, &b1) == -EINVAL && !b1 &&
		       qg_arena_buffer_at(a, BYTES, 1, &b1) == -EINVAL &&
		       qg_arena_buffer_at(a, 32, 64, &b1) == -EINVAL && qg_arena_buffer_at(a, 0, 0, &b1) == -EINVAL &&
		       qg_arena_buffer_at(a, SIZE_MAX - 63, 128, &b1) == -EINVAL,
	       "named ranges outside the window, misaligned or empty are refused");
	tap_ok(qg_arena_buffer_at(a, BYTES - 64, 64, &b1) == 0, "the last line of the window");
	struct qg_ctx *ctx = qg_ctx_new(4);
	struct qg_tensor *t = qg_tensor_new_1d(ctx, QG_TYPE_F32, 32);
	tap_ok(qg_buffer_place(b1, t, 0) == -EINVAL && !t->data, "a tensor larger than the named range is refused");
	qg_buffer_free(b1);
	tap_ok(qg_arena_window(a, 4096, 8192) == 0 && qg_arena_bytes(a) == 8192 &&
		       qg_arena_base(a) == (unsigned char *)qg_arena_map_base(a) + 4096,
	       "a window narrows where buffers go");
	tap_ok(qg_arena_window(a, 32, 64) == -EINVAL && qg_arena_window(a, 4096, BYTES) == -EINVAL &&
		       qg_arena_window(a, 0, 0) == -EINVAL,
	       "a window misaligned or past the file is refused");

	/* pieces this side allocates */
	tap_ok(qg_buft_alloc_buffer(bt, 3000, &b1) == 0 && qg_buft_alloc_buffer(bt, 3000, &b2) == 0,
	       "two pieces of the window");
	unsigned char *p1 = qg_buffer_base(b1), *p2 = qg_buffer_base(b2), *w = qg_arena_base(a);
	tap_ok(p1 >= w && p2 >= w && p1 + 3000 <= w + 8192 && p2 + 3000 <= w + 8192 &&
		       (p1 + 3008 <= p2 || p2 + 3008 <= p1) && (uintptr_t)p1 % 64 == 0 && (uintptr_t)p2 % 64 == 0,
	       "they are aligned, inside the window, and apart");
	tap_ok(qg_buft_alloc_buffer(bt, 3000, &b3) == -ENOMEM && !b3, "a third does not fit: -ENOMEM");
	tap_ok(qg_arena_window(a, 0, BYTES) == -EBUSY, "the window cannot move under its buffers");
	qg_buffer_free(b1);
	tap_ok(qg_buft_alloc_buffer(bt, 3000, &b3) == 0 && qg_buffer_base(b3) == p1, "a freed piece is reused");
	tap_ok(qg_buffer_place(b3, t, 64) == 0 && (unsigned char *)t->data == p1 + 64, "a tensor in a piece");
	qg_buffer_free(b2);
	qg_buffer_free(b3);
	tap_ok(qg_buft_alloc_buffer(bt, 8193, &b1) == -E2BIG, "a piece larger than the window: -E2BIG");
	qg_ctx_free(ctx);
	qg_arena_free(a);
}

/* The session region is an arena whose window is its tensor part. */
static void test_region(void)
{
	struct qg_region_layout l;
	struct qg_arena *owner = NULL, *peer = NULL;

	if (qg_region_layout_make(BYTES, 4096, 16, &l)) {
		tap_ok(0, "a region layout");
		return;
	}
	tap_ok(qg_arena_create("qg-session", l.region_bytes, &owner) == 0 &&
		       qg_arena_window(owner, l.arena_offset, l.arena_bytes) == 0,
	       "the daemon's side: the region as an arena, its window the tensor arena");
	if (!owner)
		return;
	qg_region_header_init(qg_arena_map_base(owner), &l);
	tap_ok(qg_arena_map(qg_arena_fd(owner), l.region_bytes, &peer) == 0 &&
		       qg_arena_window(peer, l.arena_offset, l.arena_bytes) == 0,
	       "the client's side maps it through the checks, with the same window");
	if (peer) {
		const struct qg_region_header *h = qg_arena_map_base(peer);
		memset(qg_arena_base(owner), 0x3c, 256);
		tap_ok(h->magic == QG_REGION_MAGIC && ((unsigned char *)qg_arena_base(peer))[255] == 0x3c &&
			       qg_arena_bytes(peer) == BYTES,
		       "the header and the tensor arena are where the layout says on both sides");
	}
	qg_arena_free(peer);
	qg_arena_free(owner);
}

int main(void)
{
	test_share();
	test_refused();
	test_buffers();
	test_region();
	return tap_done();
}
