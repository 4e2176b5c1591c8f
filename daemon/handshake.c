/*
 * handshake.c - a connection's first message: the client's Hello read,
 * its session's region made and sent with the Welcome, or the connection
 * refused with a Welcome that says why.  The daemon's edge for the
 * handshake's messages (protobuf stops here).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doorbell.h"
#include "handshake.h"
#include "hints.h"
#include "kernels.h"
#include "loopcpu.h"
#include "loop.h"
#include "qgraph.pb-c.h"
#include "reply.h"
#include "report.h"
#include "server.h"
#include "session.h"
#include "sock.h"
#include "wire.h"

#define QGD_HELLO_MAX 4096

static void on_bell(struct qg_watch *w, int fd, uint32_t events, void *arg)
{
	(void)w;
	(void)arg;
	(void)events;
	/* the doorbell only wakes the loop; the scan finds the work */
	qg_doorbell_clear(fd);
}

/*
 * Send FD's client a Welcome that carries only MSG and ST: why it is
 * refused (libqgraph shows it, and returns -EDQUOT for a quota).
 */
static void send_refusal(int fd, Qgraph__Status st, const char *msg)
{
	Qgraph__Welcome w = QGRAPH__WELCOME__INIT;
	uint8_t buf[1024];

	w.protocol = QGRAPH__PROTOCOL__PROTOCOL_V1;
	w.error = (char *)msg;
	w.status = st;
	if (qgraph__welcome__get_packed_size(&w) <= sizeof buf) {
		size_t len = qgraph__welcome__pack(&w, buf);
		qg_sock_send(fd, buf, len, NULL, 0);
	}
}

/* The status a refusal for ERR carries (handshake.h): reply.c's table, else internal. */
static Qgraph__Status refusal_status(int err)
{
	return qgd_reply_status(err, QGRAPH__STATUS__STATUS_INTERNAL);
}

void qgd_refuse_fd(int fd, int err, const char *msg)
{
	send_refusal(fd, refusal_status(err), msg);
}

/* Send a Welcome that refuses the session with ST and MSG (a quota refusal counted), then drop it. */
static void refuse_msg(struct qgd_session *s, Qgraph__Status st, const char *msg)
{
	if (!s->refused)	/* one reason to a client: the first */
		send_refusal(s->sock, st, msg);
	if (st == QGRAPH__STATUS__STATUS_QUOTA)
		qgd_count_quota(s->srv, msg);
	qgd_reply_drop(s, msg);
}

/* As refuse_msg, with the message FMT. */
static void refuse(struct qgd_session *s, Qgraph__Status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void refuse(struct qgd_session *s, Qgraph__Status st, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	refuse_msg(s, st, msg);
}

void qgd_refuse(struct qgd_session *s, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	refuse_msg(s, refusal_status(err), msg);
}

/* Refused at connection (handshake.h): the Welcome now, the close when the client next speaks or hangs up. */
void qgd_refuse_early(struct qgd_session *s, int err, const char *why, const char *msg)
{
	Qgraph__Status st = refusal_status(err);

	send_refusal(s->sock, st, msg);
	if (st == QGRAPH__STATUS__STATUS_QUOTA)
		qgd_count_quota(s->srv, msg);
	s->refused = why;
}

/*
 * Read S's Hello: its protocol into *PROTO, the arena it asks for (or the
 * configured one) into *ARENA, and the client's name into s->name.  0;
 * -EAGAIN when nothing came yet; -EPROTO when S was dropped or refused.
 */
static int read_hello(struct qgd_session *s, int *proto, uint64_t *arena)
{
	uint8_t buf[QGD_HELLO_MAX];
	ssize_t n = qg_sock_recv(s->sock, buf, sizeof buf, NULL, 0, NULL);

	if (n == -EAGAIN)
		return -EAGAIN;
	if (n <= 0) {
		qgd_reply_drop(s, n == 0 ? "hung up during the handshake" : "bad handshake message");
		return -EPROTO;
	}
	Qgraph__Hello *h = qgraph__hello__unpack(NULL, (size_t)n, buf);
	if (!h) {
		refuse(s, QGRAPH__STATUS__STATUS_INVALID, "the handshake message is not a Hello");
		return -EPROTO;
	}
	*proto = h->protocol;
	*arena = h->arena_bytes ? h->arena_bytes : s->srv->cfg.arena_bytes;
	if (h->client_name && *h->client_name) {
		snprintf(s->name, sizeof s->name, "%.40s, pid %d", h->client_name, (int)s->pid);
		for (char *c = s->name; *c; c++)	/* shown to other clients (stats): printable only */
			if (*c < 0x20 || *c > 0x7e)
				*c = '?';
	}
	qgraph__hello__free_unpacked(h, NULL);
	return 0;
}

/*
 * Whether S may have a session speaking PROTO with an arena of ARENA
 * bytes (rounded up to pages into *ARENA): the protocol, the stop, and
 * every quota on sessions and arenas.  0, or -EPROTO when S was refused.
 * The access policy was checked at accept (admit).
 */
static int admit_hello(struct qgd_session *s, int proto, uint64_t *arena)
{
	struct qgd_server *srv = s->srv;
	const struct qgd_config *cfg = &srv->cfg;

	if (proto != QGRAPH__PROTOCOL__PROTOCOL_V1) {
		refuse(s, QGRAPH__STATUS__STATUS_UNSUPPORTED,
			      "protocol version %d is not spoken here: this daemon speaks version %d", proto,
			      QGRAPH__PROTOCOL__PROTOCOL_V1);
		return -EPROTO;
	}
	if (qgd_server_stopping(srv)) {
		refuse(s, QGRAPH__STATUS__STATUS_SHUTTING_DOWN, "the daemon is shutting down");
		return -EPROTO;
	}
	if (*arena > cfg->max_arena_bytes) {
		refuse(s, QGRAPH__STATUS__STATUS_QUOTA, "quota max-arena: an arena of %llu bytes asked for, at most %llu",
			      (unsigned long long)*arena,
			      (unsigned long long)cfg->max_arena_bytes);
		return -EPROTO;
	}
	*arena = (*arena + 4095) & ~(uint64_t)4095;
	uint64_t arenas = 0;
	uint32_t same_user = 0, served = 0;
	qgd_roster_each(srv, t) {
		if (t->state != QGD_READY)
			continue;	/* connections in their handshake are bounded apart (admit) */
		arenas += t->rg.layout.arena_bytes;
		same_user += t->uid == s->uid;
		served++;
	}
	char why[96];
	if (qgd_session_room(srv, served, why, sizeof why)) {
		refuse(s, QGRAPH__STATUS__STATUS_QUOTA, "%s", why);
		return -EPROTO;
	}
	if (same_user >= cfg->max_sessions_per_user) {
		refuse(s, QGRAPH__STATUS__STATUS_QUOTA, "quota max-sessions-per-user: uid %u has %u sessions already",
			      (unsigned)s->uid,
			      same_user);
		return -EPROTO;
	}
	if (arenas + *arena > cfg->total_arena_bytes) {
		refuse(s, QGRAPH__STATUS__STATUS_QUOTA,
			      "quota total-arena: %llu bytes of arenas in use, %llu more asked for, at most %llu",
			      (unsigned long long)arenas, (unsigned long long)*arena,
			      (unsigned long long)cfg->total_arena_bytes);
		return -EPROTO;
	}
	return 0;
}

/*
 * S's region of ARENA bytes (created, sealed, mapped, its rings formatted:
 * region.c), its event table, record buffer, doorbell and decode arena.
 * 0, or -EPROTO when S was refused for want of memory.
 */
static int make_region(struct qgd_session *s, uint64_t arena)
{
	const struct qgd_config *cfg = &s->srv->cfg;
	struct qg_region_layout layout;
	int err = qg_region_layout_make(arena, cfg->ring_bytes, cfg->event_count, &layout);

	if (err) {
		refuse(s, QGRAPH__STATUS__STATUS_NO_MEMORY, "cannot lay out a region of %llu bytes",
			      (unsigned long long)arena);
		return -EPROTO;
	}
	if ((err = qg_region_create(&layout, &s->rg, &s->memfd))) {
		refuse(s, QGRAPH__STATUS__STATUS_NO_MEMORY, "cannot create the session region: %s", strerror(-err));
		return -EPROTO;
	}
	s->ev = calloc(s->rg.layout.event_count, sizeof *s->ev);
	for (uint32_t i = 0; s->ev && i < s->rg.layout.event_count; i++)
		qg_event_init(&s->ev[i], 0, &s->rg.events[i]);
	s->rec = malloc(cfg->ring_bytes);
	s->bell = qg_doorbell_open();
	if (!s->ev || !s->rec || s->bell < 0 ||
	    qg_wire_arena_init(&s->decode, 4 * (size_t)cfg->ring_bytes + 65536)) {
		refuse(s, QGRAPH__STATUS__STATUS_NO_MEMORY, "out of memory for the session");
		return -EPROTO;
	}
	return 0;
}

/*
 * Send S's client its Welcome (limits, region layout, kernels) with the
 * region's memfd and the doorbell, then close the daemon's copy of the
 * memfd.  0, or -EPROTO when S was refused or dropped.
 */
static int send_welcome(struct qgd_session *s)
{
	const struct qgd_config *cfg = &s->srv->cfg;
	Qgraph__Welcome w = QGRAPH__WELCOME__INIT;
	Qgraph__Limits lim = QGRAPH__LIMITS__INIT;
	Qgraph__RegionLayout rl;
	Qgraph__KernelChoice kc[QG_LAYOUT_COUNT], *kcp[QG_LAYOUT_COUNT];
	w.protocol = QGRAPH__PROTOCOL__PROTOCOL_V1;
	w.session_id = s->id;
	lim.max_record_bytes = qg_ring_max_record(&s->rg.submit);
	lim.max_nodes = cfg->max_nodes;
	lim.max_in_flight = 1;
	lim.max_arena_bytes = cfg->max_arena_bytes;
	lim.max_weight_bytes = cfg->pool_bytes;
	lim.max_events = cfg->event_count;
	w.limits = &lim;
	qg_wire_layout_pack(&s->rg.layout, &rl);
	w.region = &rl;
	w.cpu_features = s->srv->cpu_features;
	w.n_kernels = qgd_kernel_choices(kc, kcp);
	w.kernels = kcp;
	w.best_weight_type = (Qgraph__Type)qg_wire_type_of(qg_best_weight_type());
	size_t len = qgraph__welcome__get_packed_size(&w);
	uint8_t out[8192];
	if (len > sizeof out) {
		refuse(s, QGRAPH__STATUS__STATUS_INTERNAL, "welcome too large");
		return -EPROTO;
	}
	qgraph__welcome__pack(&w, out);
	int fds[2] = { s->memfd, s->bell };
	if (qg_sock_send(s->sock, out, len, fds, 2)) {
		qgd_reply_drop(s, "could not send the welcome");
		return -EPROTO;
	}
	/* the client has its own references now */
	close(s->memfd);
	s->memfd = -1;
	return 0;
}

void qgd_handshake(struct qgd_session *s)
{
	struct qgd_server *srv = s->srv;
	int proto = 0;
	uint64_t arena = 0;

	if (read_hello(s, &proto, &arena) || admit_hello(s, proto, &arena) || make_region(s, arena) ||
	    send_welcome(s))
		return;
	if (qg_loop_watch(srv->loop, s->bell, POLLIN, on_bell, s, &s->bell_watch)) {
		qgd_reply_drop(s, "cannot watch the doorbell");
		return;
	}
	s->state = QGD_READY;
	qg_hint_loop_cpu(s->rg.hdr, qgd_loopcpu_current(srv));
	s->announced = qgd_log_uid(s->uid, QGD_LOG_INFO, "session %llu (%s, uid %u): ready, arena %llu MiB",
				   (unsigned long long)s->id, s->name, (unsigned)s->uid,
				   (unsigned long long)(s->rg.layout.arena_bytes >> 20));
}
