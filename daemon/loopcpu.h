/*
 * loopcpu.h - where the event loop runs: the CPU each session is told
 * (region.h: loop_cpu), and moving the loop off a CPU it shares with a
 * client that spins there for its answers.
 *
 * The state is srv->loop_cpu (the CPU last seen) and the request to move,
 * both this file's alone: others read the CPU through
 * qgd_loopcpu_current; reply.c asks for a move, and server.c's loop
 * carries it out once a scan is done.
 */
#ifndef QGD_LOOPCPU_H
#define QGD_LOOPCPU_H

struct qgd_server;

/* Before the loop first runs: the CPU not known yet, no move asked. */
void qgd_loopcpu_start(struct qgd_server *srv);
/* The CPU the loop last found itself on (-1: not known, -2: not looked yet). */
int qgd_loopcpu_current(const struct qgd_server *srv);
/* Look where the loop runs now, and tell every ready session if that changed. */
void qgd_loopcpu_note(struct qgd_server *srv);
/*
 * Ask the loop to leave the CPU it shares with a client that spins there
 * for its answers: done at the next qgd_loopcpu_move_if_asked.
 */
void qgd_loopcpu_ask_move(struct qgd_server *srv);
/*
 * If a move was asked: move the loop off its CPU, at most ten times a
 * second and only off that CPU, then free again, so the scheduler keeps it
 * where it went until it has a reason not to.
 */
void qgd_loopcpu_move_if_asked(struct qgd_server *srv);

#endif /* QGD_LOOPCPU_H */
