/*
 * handshake.h - a connection's handshake (handshake.c): its Hello read and
 * answered with a Welcome that hands over the session's region, or a
 * Welcome that refuses it.  A refusal names its kind by -errno: -EDQUOT a
 * quota (counted), -EACCES the access policy, -ENOMEM no memory, any
 * other an internal error.
 */
#ifndef QGD_HANDSHAKE_H
#define QGD_HANDSHAKE_H

struct qgd_session;

/*
 * S's Hello may have come: read it, check it against the quotas, make the
 * session's region and send the Welcome with it (S is then QGD_READY), or
 * refuse S (dropped).  Nothing yet to read: nothing done.
 */
void qgd_handshake(struct qgd_session *s);
/* Send the client on FD, which has no session, a Welcome that refuses it for ERR with MSG. */
void qgd_refuse_fd(int fd, int err, const char *msg);
/* Send S's client a Welcome that refuses it for ERR with the message FMT (unless it was refused already), then drop S. */
void qgd_refuse(struct qgd_session *s, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/*
 * Refuse S as soon as it connects, before its Hello: send the Welcome that
 * says why (MSG) now, and close when its Hello comes, it hangs up, or the
 * handshake time runs out (so that a client that writes its Hello first
 * still reads the reason, rather than a broken pipe).  Until then it holds
 * a place among the handshakes of its uid, and nothing else.  WHY is what
 * the log will say.
 */
void qgd_refuse_early(struct qgd_session *s, int err, const char *why, const char *msg);

#endif /* QGD_HANDSHAKE_H */
