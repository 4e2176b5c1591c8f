/*
 * backend-cpu-share.c - a thread's share of a run on the CPU backend's
 * pool: each step's phases, every node of the step in each, and the
 * barrier after each phase, whose last thread decides whether the run (or
 * a member of a batch) stops there.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>

#include "backend-cpu-impl.h"
#include "futex.h"
#include "ops.h"
#include "stamp.h"

/* Keep member B's first node error. */
static void note_member_error(struct cpu_batch *bt, size_t b, int e, size_t node)
{
	int zero = 0;

	if (atomic_compare_exchange_strong_explicit(&bt->err[b], &zero, e, memory_order_relaxed,
						    memory_order_relaxed))
		atomic_store_explicit(&bt->err_node[b], (long)node, memory_order_relaxed);
}

/*
 * decide() for a batch, member by member: one with a node error stops
 * with it at the end of its step, and after a step that another follows,
 * one cancelled or past its deadline stops too.  A member that stops gets
 * its outcome now.  Nonzero once no member runs on.
 */
static int decide_batch(struct cpu_batch *bt, bool end, bool more)
{
	if (!end)
		return 0;
	for (size_t b = 0; b < bt->n; b++) {
		if (!(bt->live >> b & 1))
			continue;
		struct qg_run *run = bt->run[b];
		int st = atomic_load_explicit(&bt->err[b], memory_order_relaxed);
		if (!st && more && atomic_load_explicit(&run->cancel, memory_order_acquire))
			st = -ECANCELED;
		if (!st && more && run->deadline_ns && qg_stamp_ns() > run->deadline_ns)
			st = -ETIMEDOUT;
		if (!st)
			continue;
		bt->live &= ~(UINT32_C(1) << b);
		run->status = st;
		run->nodes_done = bt->done_after;
		long bad = atomic_load_explicit(&bt->err_node[b], memory_order_relaxed);
		if (atomic_load_explicit(&bt->err[b], memory_order_relaxed)) {
			run->failed_node = bad;
			if ((size_t)bad < run->nodes_done)
				run->nodes_done = (size_t)bad;
		}
	}
	return bt->live == 0;
}

/* --- the barrier --------------------------------------------------------- */

/*
 * The decision the last thread at a barrier takes: the run's status if it
 * stops here, 0 to go on.  A run stops only where a step ends (END): a
 * node's error lets the other phases of its step finish, so that every
 * node of the step is done (the failed one with its error) when the run
 * stops.  MORE: another step follows, and cancel and the deadline are
 * looked at.
 */
static int decide(struct cpu_backend *cb, const struct qg_run *run, bool end, bool more)
{
	if (!end)
		return 0;
	int e = atomic_load_explicit(&cb->err, memory_order_relaxed);
	if (e)
		return e;
	if (!more)
		return 0;
	/* acquire: pairs with qg_run_cancel's release */
	if (atomic_load_explicit(&run->cancel, memory_order_acquire))
		return -ECANCELED;
	if (run->deadline_ns && qg_stamp_ns() > run->deadline_ns)
		return -ETIMEDOUT;
	return 0;
}

/*
 * Wait until all NTH threads have arrived; returns the stop decision
 * (0: go on).  A sense-counting barrier on two words:
 *
 * - Each thread reads GEN before it arrives (the relaxed load cannot move
 *   after the arrival: that is an acq_rel RMW, whose release half keeps
 *   earlier accesses before it).  GEN cannot move on before this thread
 *   arrives, so the value read is this barrier's.
 * - Arriving is a fetch_add on COUNT with acq_rel.  The RMWs on COUNT form
 *   a release sequence, so the last arriver's acquire sees everything
 *   every thread wrote before arriving: their shares of the results and
 *   their errors in ERR.
 * - The last arriver resets COUNT, writes STOP and bumps GEN with release;
 *   the others' acquire load of GEN then sees all of that, and through
 *   the last arriver, everything every thread wrote before the barrier.
 *   That is what the next phase needs on ARM's weak memory model, where
 *   plain stores from another core may otherwise be seen late or out of
 *   order.  COUNT's reset is seen before anyone arrives at the next
 *   barrier, since arriving there needs the new GEN first.
 * - A waiter that spun long enough sleeps on GEN.  The same full-fence
 *   pattern as an event's (event.c, publish): the waiter adds itself to
 *   BAR_SLEEPERS, fences, and re-reads GEN before sleeping; the last
 *   arriver bumps GEN, fences and reads BAR_SLEEPERS before deciding to
 *   wake.  One of the two sees the other.
 *
 * STOP is read after the barrier and written only by the last arriver of
 * a later one, which waits for every thread to arrive first: every
 * thread reads the value written at this barrier.
 */
static int barrier(struct cpu_backend *cb, const struct qg_run *run, bool end, bool more)
{
	const uint32_t gen = atomic_load_explicit(&cb->bar_gen, memory_order_relaxed);

	if (atomic_fetch_add_explicit(&cb->bar_count, 1, memory_order_acq_rel) == (uint32_t)cb->nth - 1) {
		atomic_store_explicit(&cb->bar_count, 0, memory_order_relaxed);
		int stop = cb->job_batch ? decide_batch(cb->job_batch, end, more) : decide(cb, run, end, more);
		atomic_store_explicit(&cb->stop, stop, memory_order_relaxed);
		atomic_store_explicit(&cb->bar_gen, gen + 1, memory_order_release);
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&cb->bar_sleepers, memory_order_relaxed))
			qg_futex_wake(&cb->bar_gen, false);
	} else {
		uint64_t start = 0;
		for (unsigned spins = 0; atomic_load_explicit(&cb->bar_gen, memory_order_acquire) == gen; spins++) {
			if (spins % 64 != 63) {
				qg_cpu_relax();
				continue;
			}
			uint64_t now = qg_stamp_ns();
			if (!start)
				start = now;
			if (now - start < cb->bar_spin_ns) {
				/*
				 * Past a short spin the one it waits for may have lost its
				 * core to another process: offer this one (a yield with
				 * nothing else to run costs a system call, no sleep).
				 */
				if (now - start < BARRIER_SPIN_OVER_NS)
					qg_cpu_relax();
				else
					sched_yield();
				continue;
			}
			atomic_fetch_add_explicit(&cb->bar_sleepers, 1, memory_order_relaxed);
			atomic_thread_fence(memory_order_seq_cst);
			if (atomic_load_explicit(&cb->bar_gen, memory_order_relaxed) == gen)
				qg_futex_wait(&cb->bar_gen, gen, 0, false);
			atomic_fetch_sub_explicit(&cb->bar_sleepers, 1, memory_order_relaxed);
		}
	}
	return atomic_load_explicit(&cb->stop, memory_order_relaxed);
}

/* Keep the first node error (ERR) and its node. */
static void note_error(struct cpu_backend *cb, int e, size_t node)
{
	int zero = 0;

	if (atomic_compare_exchange_strong_explicit(&cb->err, &zero, e, memory_order_relaxed, memory_order_relaxed))
		atomic_store_explicit(&cb->err_node, (long)node, memory_order_relaxed);
}

/*
 * Thread ITH's part of phase PH of node ND of P: its error, or 0.  A node
 * with fewer phases sits out the last ones; one that shares another's
 * activation sits out phase 0 and reads the other's scratch in phase 1; a
 * solo one does all its work in phase 0.
 */
static int node_phase(const struct cpu_plan *p, const struct cpu_node *nd, int ph, int ith)
{
	const struct cpu_node *q = nd->share >= 0 ? &p->nodes[nd->share] : nd;
	char *scratch = p->scratch;

	if (ith >= nd->nth)
		return 0;
	if (nd->solo) {
		/* this thread's own activation, then its share of the product */
		char *mine = scratch + q->scratch_off + (size_t)ith * q->slot;
		int e = 0;
		if (ph > 0)
			return 0;
		if (nd->share < 0)
			e = qg_op_compute(nd->t, 0, 0, 1, mine);
		return e ? e : qg_op_compute(nd->t, 1, ith, nd->nth, mine);
	}
	if (ph >= nd->phases || (ph == 0 && nd->share >= 0))
		return 0;
	return qg_op_compute(nd->t, ph, ith, nd->nth, scratch + q->scratch_off);
}

/*
 * Thread ITH's part of a pooled run of P: each step's phases, every node
 * of the step in each (a node with fewer phases sits out the last ones;
 * a node that shares another's activation sits out phase 0 and reads the
 * other's scratch in phase 1, after the barrier that ends phase 0).
 * Everything it needs from P is read before the barrier that ends it: the
 * caller may free P as soon as the last thread has bumped DONE.
 */
void qg_cpu_run_share(struct cpu_backend *cb, struct cpu_plan *p, const struct qg_run *run, int ith)
{
	const size_t n_steps = p->n_steps;

	for (size_t l = 0; l < n_steps; l++) {
		const struct cpu_step st = p->steps[l];
		for (int ph = 0; ph < st.phases; ph++) {
			for (size_t k = st.first; k < st.first + st.n; k++) {
				const struct cpu_node *nd = &p->nodes[p->order[k]];
				int e = node_phase(p, nd, ph, ith);
				if (e)
					note_error(cb, e, nd->index);
			}
			bool last = ph == st.phases - 1;
			if (last && ith == 0)
				atomic_store_explicit(&cb->nodes_done, st.done_after, memory_order_relaxed);
			if (barrier(cb, run, last, l + 1 < n_steps))
				return;
		}
	}
}

/*
 * Thread ITH's share of group J of batch BT over its LIVE members: the
 * activation rows gathered and quantized into its own slot (or read from
 * its slot of the group it shares them with), then parts of the product,
 * claimed one at a time until none is left.  A thread that loses its
 * core for a while (to the daemon's loop, a client, the machine's other
 * work) leaves its parts to the others instead of keeping them all at
 * the barrier; the relaxed claim is enough, as the barrier that ends the
 * phase orders what every part wrote.  Which thread computes a row does
 * not change its bits.
 */
static void group_phase(struct cpu_batch *bt, size_t j, uint32_t live, int ith)
{
	const struct cpu_group *g = &bt->group[j];
	const struct qg_tensor *t[QG_CPU_BATCH_MAX];
	const char *quant = NULL;
	const void *read;
	size_t n = 0;

	for (size_t b = 0; b < bt->n; b++)
		if (live >> b & 1)
			t[n++] = bt->p[b]->nodes[j].t;
	if (g->share >= 0) {
		const struct cpu_group *q = &bt->group[g->share];
		quant = bt->scratch + q->slot_off + (size_t)ith * q->slot;
	}
	int e = qg_op_mul_mat_group_prepare(t, n, bt->scratch + g->slot_off + (size_t)ith * g->slot, quant, &read);
	for (int part; !e && (part = atomic_fetch_add_explicit(&bt->claimed[j], 1, memory_order_relaxed)) < g->parts;)
		e = qg_op_mul_mat_group_part(t, n, part, g->parts, read, (float *)(bt->scratch + g->y_off));
	for (size_t b = 0; e && b < bt->n; b++)
		if (live >> b & 1)
			note_member_error(bt, b, e, bt->p[b]->nodes[j].index);
}

/*
 * The thread number member B's own nodes see thread ITH of NTH as: the
 * pool's numbering turned by B.  A node on fewer threads than the pool's
 * (a norm or a rope of one token's row, on one) runs on B's first
 * threads, so that the members' small nodes of a step spread over the
 * pool instead of all waiting for thread 0 while the others sit at the
 * barrier.  The same turn for every node of a member keeps a node that
 * reads another's rows on the thread that wrote them (row_local pairs
 * have equal thread counts), and a node's split of its work is the one
 * it has alone: the bits do not change.
 */
static int member_ith(int ith, size_t b, int nth)
{
	return (ith + nth - (int)(b % (size_t)nth)) % nth;
}

/*
 * Thread ITH's part of a batch: qg_cpu_run_share over every live member at once,
 * a group's product once for all.  The members' plans are alike, so
 * P[0]'s steps and order are every member's.
 */
void qg_cpu_run_batch_share(struct cpu_backend *cb, struct cpu_batch *bt, int ith)
{
	const struct cpu_plan *p0 = bt->p[0];
	const size_t n_steps = p0->n_steps;

	for (size_t l = 0; l < n_steps; l++) {
		const struct cpu_step st = p0->steps[l];
		for (int ph = 0; ph < st.phases; ph++) {
			const uint32_t live = bt->live;
			for (size_t k = st.first; k < st.first + st.n; k++) {
				const size_t j = p0->order[k];
				if (bt->group[j].on) {
					if (ph == 0 && ith < p0->nodes[j].nth)
						group_phase(bt, j, live, ith);
					continue;
				}
				for (size_t b = 0; b < bt->n; b++) {
					if (!(live >> b & 1))
						continue;
					const struct cpu_node *nd = &bt->p[b]->nodes[j];
					int e = node_phase(bt->p[b], nd, ph, member_ith(ith, b, cb->nth));
					if (e)
						note_member_error(bt, b, e, nd->index);
				}
			}
			bool last = ph == st.phases - 1;
			if (last && ith == 0)
				bt->done_after = st.done_after;
			if (barrier(cb, NULL, last, l + 1 < n_steps))
				return;
		}
	}
}
