/*
 * ring-test.c - the shared-memory record ring: order, wrap-around, flow
 * control, every corruption a hostile peer can make, and a producer and a
 * consumer in two processes (and two threads, for TSan) passing records
 * whose contents are checked.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ring.h"
#include "tap.h"

#define DATA 1024u

static void *shared_mem(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void fill(uint8_t *buf, uint32_t len, uint32_t seq)
{
	for (uint32_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seq * 31u + i);
}

static int check(const uint8_t *buf, uint32_t len, uint32_t seq)
{
	for (uint32_t i = 0; i < len; i++)
		if (buf[i] != (uint8_t)(seq * 31u + i))
			return 0;
	return 1;
}

static void test_basics(void *mem)
{
	struct qg_ring p, c;
	uint8_t in[600], out[600];
	size_t bytes = qg_ring_bytes(DATA);

	tap_ok(qg_ring_format(&p, mem, bytes - 1) == -EINVAL, "a ring that is not a power of two is refused");
	tap_ok(qg_ring_format(&p, (char *)mem + 8, bytes) == -EINVAL, "a misaligned ring is refused");
	tap_ok(qg_ring_format(&p, mem, bytes) == 0 && qg_ring_attach(&c, mem, bytes, 0) == 0,
	       "format and attach");
	tap_ok(qg_ring_pop(&c, out, sizeof out) == -EAGAIN && qg_ring_pending(&c) == 0,
	       "an empty ring pops -EAGAIN");
	tap_ok(qg_ring_push(&p, in, qg_ring_max_record(&p) + 1) == -EMSGSIZE,
	       "a record larger than half the ring is refused (-EMSGSIZE)");

	/* fill until full, then drain: order and contents kept */
	uint32_t pushed = 0, popped = 0;
	int ok = 1;
	for (;;) {
		fill(in, 100, pushed);
		int r = qg_ring_push(&p, in, 100);
		if (r == -EAGAIN)
			break;
		ok &= r == 0;
		pushed++;
	}
	tap_ok(ok && pushed == DATA / 112, "the ring takes %u records of 100 bytes, then -EAGAIN", pushed);
	for (;;) {
		ssize_t n = qg_ring_pop(&c, out, sizeof out);
		if (n == -EAGAIN)
			break;
		ok &= n == 100 && check(out, 100, popped);
		popped++;
	}
	tap_ok(ok && popped == pushed, "all %u come out in order, intact", popped);

	/* many rounds of odd sizes: wrap-around with skip markers */
	ok = 1;
	uint32_t seq = 0, want = 0;
	for (int i = 0; i < 5000; i++) {
		uint32_t len = (uint32_t)(i * 37) % (qg_ring_max_record(&p) + 1);
		fill(in, len, seq);
		int r = qg_ring_push(&p, in, len);
		if (r == 0)
			seq++;
		else
			ok &= r == -EAGAIN;
		if (i % 3 == 0 || r == -EAGAIN) {
			ssize_t n;
			while ((n = qg_ring_pop(&c, out, sizeof out)) >= 0) {
				ok &= check(out, (uint32_t)n, want);
				want++;
			}
			ok &= n == -EAGAIN;
		}
	}
	ssize_t n;
	while ((n = qg_ring_pop(&c, out, sizeof out)) >= 0)
		ok &= check(out, (uint32_t)n, want++);
	tap_ok(ok && seq == want && seq > 1000, "%u records of every size wrap around intact", seq);

	/* a record larger than the consumer's buffer is skipped, not truncated */
	fill(in, 300, 7);
	qg_ring_push(&p, in, 300);
	fill(in, 10, 8);
	qg_ring_push(&p, in, 10);
	tap_ok(qg_ring_pop(&c, out, 100) == -EMSGSIZE && qg_ring_pop(&c, out, 100) == 10 && check(out, 10, 8),
	       "a record longer than the buffer gives -EMSGSIZE and the next one follows");

	/* positions wrap at 2^32 */
	atomic_store(&p.ctl->head, 0xffffff00u);
	atomic_store(&p.ctl->tail, 0xffffff00u);
	p.pos = c.pos = 0xffffff00u;
	ok = 1;
	for (uint32_t i = 0; i < 40; i++) {
		fill(in, 50, i);
		ok &= qg_ring_push(&p, in, 50) == 0;
		ok &= qg_ring_pop(&c, out, sizeof out) == 50 && check(out, 50, i);
	}
	tap_ok(ok && p.pos < 0x1000u, "positions wrap past 2^32");
}

/* What a hostile peer can do to the shared block, and that each is caught. */
static void test_hostile(void *mem)
{
	struct qg_ring p, c;
	uint8_t buf[600] = { 0 };
	size_t bytes = qg_ring_bytes(DATA);
	uint32_t len;

	/*
	 * The producer reads the head only when the room it last saw runs
	 * short; that read is where a corrupt head is caught.  Each case fills
	 * the room a fresh ring shows, then pushes once more.
	 */
	int n_fill = 0;
	qg_ring_format(&p, mem, bytes);
	qg_ring_attach(&c, mem, bytes, 0);
	while (n_fill < 1000 && qg_ring_can_push(&p, 10) == 1 && qg_ring_push(&p, buf, 10) == 0)
		n_fill++;
	atomic_store(&p.ctl->head, p.pos + 8);	/* consumer read what was never written */
	tap_ok(n_fill == DATA / 24 && qg_ring_can_push(&p, 10) == -EPROTO && qg_ring_push(&p, buf, 10) == -EPROTO,
	       "a head ahead of the tail is corrupt, when the producer reads it (after %d records)", n_fill);
	qg_ring_format(&p, mem, bytes);
	qg_ring_attach(&c, mem, bytes, 0);
	for (n_fill = 0; n_fill < 1000 && qg_ring_push(&p, buf, 10) == 0;)
		n_fill++;
	atomic_store(&p.ctl->head, p.pos - DATA - 8);	/* more in flight than the ring holds */
	tap_ok(n_fill == DATA / 24 && qg_ring_push(&p, buf, 10) == -EPROTO, "a head too far behind is corrupt");
	qg_ring_format(&p, mem, bytes);
	qg_ring_attach(&c, mem, bytes, 0);
	for (n_fill = 0; n_fill < 1000 && qg_ring_push(&p, buf, 10) == 0;)
		n_fill++;
	tap_ok(n_fill == DATA / 24 && qg_ring_pop(&c, buf, sizeof buf) == 10 && qg_ring_push(&p, buf, 10) == 0 &&
		       qg_ring_push(&p, buf, 10) == -EAGAIN,
	       "a full ring: the room one pop releases is seen, and no more");

	qg_ring_format(&p, mem, bytes);
	qg_ring_attach(&c, mem, bytes, 0);
	atomic_store(&p.ctl->tail, c.pos + DATA + 8);
	tap_ok(qg_ring_pop(&c, buf, sizeof buf) == -EPROTO, "a tail beyond the ring's size is corrupt");
	atomic_store(&p.ctl->tail, c.pos + 12);
	tap_ok(qg_ring_pop(&c, buf, sizeof buf) == -EPROTO, "a misaligned tail is corrupt");

	qg_ring_format(&p, mem, bytes);
	qg_ring_attach(&c, mem, bytes, 0);
	qg_ring_push(&p, buf, 16);
	len = 400;	/* scribble: the length claims more than was published */
	memcpy(p.ctl->data, &len, 4);
	tap_ok(qg_ring_pop(&c, buf, sizeof buf) == -EPROTO, "a length past the published tail is corrupt");
	len = DATA;	/* longer than any record */
	memcpy(p.ctl->data, &len, 4);
	atomic_store(&p.ctl->tail, DATA);
	tap_ok(qg_ring_pop(&c, buf, sizeof buf) == -EPROTO, "a length beyond the maximum is corrupt");

	qg_ring_format(&p, mem, bytes);
	qg_ring_attach(&c, mem, bytes, 0);
	len = QG_RING_SKIP;	/* a skip that does not reach the published tail's end */
	memcpy(p.ctl->data, &len, 4);
	atomic_store(&p.ctl->tail, 64);
	tap_ok(qg_ring_pop(&c, buf, sizeof buf) == -EPROTO, "a skip marker short of the end is corrupt");

	/* random scribbling never crashes and never reads out of the ring */
	struct tap_rng rng = { 42 };
	int fine = 1;
	for (int i = 0; i < 2000 * (1 + tap_scale()); i++) {
		qg_ring_format(&p, mem, bytes);
		qg_ring_attach(&c, mem, bytes, 0);
		for (int j = 0; j < 5; j++)
			qg_ring_push(&p, buf, (uint32_t)(tap_rand(&rng) % 200));
		for (int j = 0; j < 4; j++)
			((uint8_t *)p.ctl->data)[tap_rand(&rng) % DATA] = (uint8_t)tap_rand(&rng);
		if (tap_rand(&rng) % 2)
			atomic_store(&p.ctl->tail, (uint32_t)tap_rand(&rng) & ~7u);
		for (int j = 0; j < 8; j++) {
			ssize_t n = qg_ring_pop(&c, buf, sizeof buf);
			fine &= n == -EAGAIN || n == -EPROTO || n == -EMSGSIZE || (n >= 0 && n <= (ssize_t)sizeof buf);
			if (n == -EPROTO || n == -EAGAIN)
				break;
		}
	}
	tap_ok(fine, "random scribbling gives records, -EAGAIN or -EPROTO, nothing else");
}

struct pair {
	void *mem;
	uint32_t count;
	int ok;
};

static void *produce(void *arg)
{
	struct pair *pp = arg;
	struct qg_ring p;
	uint8_t in[512];

	qg_ring_attach(&p, pp->mem, qg_ring_bytes(DATA), 1);
	for (uint32_t seq = 0; seq < pp->count;) {
		uint32_t len = 4 + (seq * 13u) % 300u;
		fill(in, len, seq);
		memcpy(in, &seq, 4);
		int r = qg_ring_push(&p, in, len);
		if (r == 0)
			seq++;
		else if (r != -EAGAIN)
			return NULL;
	}
	return NULL;
}

/* Consume COUNT records and check each one's sequence number and bytes. */
static int consume(void *mem, uint32_t count)
{
	struct qg_ring c;
	uint8_t out[512];
	uint32_t want = 0;

	qg_ring_attach(&c, mem, qg_ring_bytes(DATA), 0);
	while (want < count) {
		ssize_t n = qg_ring_pop(&c, out, sizeof out);
		if (n == -EAGAIN)
			continue;
		uint32_t seq;
		memcpy(&seq, out, 4);
		if (n != (ssize_t)(4 + (want * 13u) % 300u) || seq != want)
			return 0;
		uint8_t ref[512];
		fill(ref, (uint32_t)n, want);
		if (memcmp(ref + 4, out + 4, (size_t)n - 4))
			return 0;
		want++;
	}
	return 1;
}

int main(void)
{
	size_t bytes = qg_ring_bytes(DATA);
	void *mem = shared_mem(bytes);
	struct qg_ring r;

	if (!mem)
		return 99;
	test_basics(mem);
	test_hostile(mem);

	uint32_t count = 20000 + 50000u * (uint32_t)tap_scale();
	qg_ring_format(&r, mem, bytes);
	struct pair pp = { .mem = mem, .count = count };
	pthread_t t;
	pthread_create(&t, NULL, produce, &pp);
	int ok = consume(mem, count);
	pthread_join(t, NULL);
	tap_ok(ok, "two threads pass %u records in order, intact", count);

	qg_ring_format(&r, mem, bytes);
	pid_t pid = tap_fork();
	if (pid == 0) {
		produce(&pp);
		_exit(0);
	}
	ok = consume(mem, count);
	int status;
	waitpid(pid, &status, 0);
	tap_ok(ok && WIFEXITED(status), "two processes pass %u records in order, intact", count);

	munmap(mem, bytes);
	return tap_done();
}
