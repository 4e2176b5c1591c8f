/*
 * backend-cpu-plan.c - the CPU backend's plans: a graph's nodes checked
 * and sized, split into steps that need no barrier between their nodes
 * (qg_cpu_plan_schedule), and the checks that let plans of several
 * graphs run as one batch.  Pure functions of the graphs: no thread runs
 * here.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend-cpu-impl.h"
#include "ops.h"

/* --- plans --------------------------------------------------------------- */

static void sig_of(const struct qg_tensor *t, struct node_sig *s)
{
	memset(s, 0, sizeof *s);
	s->op = t->op;
	memcpy(s->params, t->op_params, sizeof s->params);
	for (int i = 0; i <= QG_MAX_SRC; i++) {
		const struct qg_tensor *x = i ? t->src[i - 1] : t;
		if (!x) {
			s->type[i] = -1;
			continue;
		}
		s->type[i] = x->type;
		memcpy(s->ne[i], x->ne, sizeof x->ne);
		memcpy(s->nb[i], x->nb, sizeof x->nb);
	}
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void qg_cpu_plan_free(struct cpu_plan *p)
{
	if (!p)
		return;
	free(p->sig);
	free(p->nodes);
	free(p->order);
	free(p->steps);
	free(p->scratch);
	free(p);
}

/*
 * P's batch key, made with P: each node's op, shape and threads, and the
 * type and shape of the matrix each MUL_MAT reads (FNV-1a over them), not
 * where it lies: a graph's own operands (a KV cache) differ from session
 * to session, and the batch finds the products it can join.  Plans that
 * may run as one batch (qg_cpu_plans_align) have equal keys.
 */
static uint64_t plan_key(const struct cpu_plan *p)
{
	uint64_t h = UINT64_C(14695981039346656037);
	const uint64_t prime = UINT64_C(1099511628211);

#define MIX(v) (h = (h ^ (uint64_t)(v)) * prime)
	MIX(p->n_graph_nodes);
	MIX(p->n);
	for (size_t j = 0; j < p->n; j++) {
		const struct cpu_node *nd = &p->nodes[j];
		MIX(nd->index);
		MIX(nd->t->op);
		MIX(nd->nth);
		for (int d = 0; d < 4; d++)
			MIX(nd->t->ne[d]);
		if (nd->t->op == QG_OP_MUL_MAT) {
			MIX(nd->t->src[0]->type);
			MIX(nd->t->src[0]->ne[0]);
			MIX(nd->t->src[0]->ne[1]);
		}
	}
#undef MIX
	return h ? h : 1;
}

int qg_cpu_plan_make(struct qg_graph *g, int max_nth, struct cpu_plan **out)
{
	struct cpu_plan *p = calloc(1, sizeof *p);
	size_t scratch = 0;
	int r = -ENOMEM;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->g = g;
	p->n_graph_nodes = g->n_nodes;
	p->sig = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->sig);
	p->nodes = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->nodes);
	p->order = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->order);
	p->steps = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->steps);
	if (!p->sig || !p->nodes || !p->order || !p->steps)
		goto fail;
	for (size_t i = 0; i < g->n_nodes; i++) {
		struct qg_tensor *t = g->nodes[i];
		/* a node an op builder made was checked there; a view, or one made by hand, is checked here */
		r = t->flags & QG_TENSOR_CHECKED ? 0 : qg_op_check(t);
		if (r)
			goto fail;
		sig_of(t, &p->sig[i]);
		int phases = qg_op_n_phases(t);
		if (phases == 0)
			continue;
		int nth = qg_op_max_threads(t);
		if (nth > max_nth)
			nth = max_nth;
		size_t s1 = qg_op_scratch_size(t, 1), sn = qg_op_scratch_size(t, nth);
		if (s1 > scratch)
			scratch = s1;
		if (sn > scratch)
			scratch = sn;
		p->nodes[p->n++] = (struct cpu_node){ .t = t, .index = i, .nth = nth, .phases = phases, .share = -1 };
		p->work = add_sat(p->work, qg_op_work(t));
	}
	p->key = plan_key(p);
	r = -ENOMEM;
	if (scratch > SIZE_MAX - 63)
		goto fail;
	p->scratch_size = (scratch + 63) & ~(size_t)63;
	if (p->scratch_size && !(p->scratch = aligned_alloc(64, p->scratch_size)))
		goto fail;
	size_t per_node = sizeof *p->sig + sizeof *p->nodes + sizeof *p->order + sizeof *p->steps;
	size_t nodes = g->n_nodes ? g->n_nodes : 1;
	p->base.bytes = sizeof *p + nodes * per_node + p->scratch_size;	/* no overflow: each part is allocated */
	*out = p;
	return 0;
fail:
	qg_cpu_plan_free(p);
	return r;
}

bool qg_cpu_plan_matches(const struct cpu_plan *p, const struct qg_graph *g)
{
	struct node_sig s;

	if (g->n_nodes != p->n_graph_nodes)
		return false;
	for (size_t i = 0; i < g->n_nodes; i++) {
		sig_of(g->nodes[i], &s);
		if (memcmp(&s, &p->sig[i], sizeof s) != 0)
			return false;
	}
	return true;
}

void qg_cpu_plan_rebind(struct cpu_plan *p, struct qg_graph *g)
{
	p->g = g;
	for (size_t i = 0; i < p->n; i++)
		p->nodes[i].t = g->nodes[p->nodes[i].index];
	p->data_ok = false;
}

/* --- steps --------------------------------------------------------------- */

/* A node is put in a step with at most this many of the nodes computed before it in view. */
#define STEP_WINDOW 32
/* A MUL_MAT of at most this many activation values quantizes it on each of its threads (cpu_node.solo). */
#define SOLO_QUANT_MAX 8192
/* A step's nodes hold at most this much scratch together (or one node's, if more). */
#define STEP_SCRATCH_MAX ((size_t)4 << 20)

static struct span span_of(const struct qg_tensor *t)
{
	const uintptr_t lo = (uintptr_t)t->data;
	const size_t n = qg_tensor_nbytes(t);

	/* an extent that does not fit is taken as everything from LO on: it touches what any node does */
	return (struct span){ lo, n > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + n };
}

static bool spans_meet(struct span a, struct span b)
{
	return a.lo < b.hi && b.lo < a.hi;
}

/* What a node writes (W) and reads (R[0..n)), worked out once a qg_cpu_plan_schedule. */
struct touch {
	struct span w, r[QG_MAX_SRC];
	int n;
};

static void touch_of(const struct qg_tensor *t, struct touch *tc)
{
	tc->w = span_of(t);
	tc->n = 0;
	for (int i = 0; i < QG_MAX_SRC; i++)
		if (t->src[i])
			tc->r[tc->n++] = span_of(t->src[i]);
}

/* True if node A writes bytes node B reads or writes, or B writes bytes A reads. */
static bool nodes_touch(const struct touch *a, const struct touch *b)
{
	if (spans_meet(a->w, b->w))
		return true;
	for (int i = 0; i < b->n; i++)
		if (spans_meet(a->w, b->r[i]))
			return true;
	for (int i = 0; i < a->n; i++)
		if (spans_meet(b->w, a->r[i]))
			return true;
	return false;
}

/*
 * OP's threads each take the rows of its result that qg_op_split gives
 * them (rows_of in ops-cpu.c), and read only those rows of a source
 * shaped like the result.
 */
static bool by_rows(enum qg_op op)
{
	switch (op) {
	case QG_OP_ADD:
	case QG_OP_MUL:
	case QG_OP_SCALE:
	case QG_OP_SILU:
	case QG_OP_GELU:
	case QG_OP_RMS_NORM:
	case QG_OP_NORM:
	case QG_OP_SOFT_MAX:
	case QG_OP_GLU:
		return true;
	default:
		return false;
	}
}

/* X has T's rows at T's places: the same bytes, row count and row strides (its rows may be longer). */
static bool same_rows(const struct qg_tensor *x, const struct qg_tensor *t)
{
	for (int i = 1; i < QG_MAX_DIMS; i++)
		if (x->ne[i] != t->ne[i] || x->nb[i] != t->nb[i])
			return false;
	return x->data == t->data;
}

/*
 * True if node B, computed after node A on the same thread with no barrier
 * between, is right: both work by rows (by_rows) split over the same
 * threads, so that each thread's rows of B are its own rows of A; every
 * source of B that touches A's result is A's rows; B writes nothing A
 * reads, and over A's result only A's rows.  Then B may share A's step
 * (the decode step's RMS_NORM and MUL by the norm's weights; a residual
 * ADD and the next RMS_NORM).
 */
static bool row_local(const struct cpu_node *a, const struct touch *ta, const struct cpu_node *b,
		      const struct touch *tb)
{
	const struct qg_tensor *ta_t = a->t, *tb_t = b->t;

	if (!by_rows(ta_t->op) || !by_rows(tb_t->op) || a->nth != b->nth || a->phases != 1 || b->phases != 1)
		return false;
	for (int i = 1; i < QG_MAX_DIMS; i++)
		if (ta_t->ne[i] != tb_t->ne[i])
			return false;
	for (int i = 0; i < QG_MAX_SRC; i++) {
		const struct qg_tensor *x = tb_t->src[i];
		if (x && spans_meet(ta->w, span_of(x)) && !same_rows(x, ta_t))
			return false;
	}
	for (int i = 0; i < ta->n; i++)
		if (spans_meet(tb->w, ta->r[i]))
			return false;
	return !spans_meet(tb->w, ta->w) || same_rows(tb_t, ta_t);
}

/* True if MUL_MATs A and B read one activation tensor (the same bytes, shape and strides) in one form. */
static bool same_activation(const struct qg_tensor *a, uintptr_t fa, const struct qg_tensor *b, uintptr_t fb)
{
	const struct qg_tensor *x = a->src[1], *y = b->src[1];

	return fa && fa == fb && x->data == y->data && x->type == y->type &&
	       memcmp(x->ne, y->ne, sizeof x->ne) == 0 && memcmp(x->nb, y->nb, sizeof x->nb) == 0;
}

/*
 * Put P's nodes in steps (its data in place: the steps follow from which
 * bytes each node reads and writes).  A node goes into the earliest step
 * after every step holding a node of its window that it touches
 * (nodes_touch) -- or into the step of one it follows by rows
 * (row_local) -- and after every step of a node that has left the window;
 * so a node never shares a step with one it depends on, or with one that
 * reads what it overwrites, and its dependencies run in earlier steps.  A
 * MUL_MAT that finds one of its activation in a step at or after that one
 * joins it and reads its scratch.  A MUL_MAT of a small activation on
 * more than one thread is solo (cpu_node.solo); it shares only with a
 * solo one of at least its threads.  Scratch: each node of a step has its
 * own (the scratch is reused from step to step), grown to fit.
 * NODE_STEPS: a step per node, nothing shared.  0 or -ENOMEM.
 */
int qg_cpu_plan_schedule(struct cpu_plan *p, bool node_steps)
{
	const size_t n = p->n;
	size_t *level = calloc(n ? n : 1, sizeof *level);
	size_t *used = calloc(n ? n : 1, sizeof *used);	/* scratch per step */
	uintptr_t *form = calloc(n ? n : 1, sizeof *form);
	struct touch *tc = calloc(n ? n : 1, sizeof *tc);
	size_t n_steps = 0, floor = 0, need = p->scratch_size;
	int r = -ENOMEM;

	if (!level || !used || !form || !tc)
		goto out;
	for (size_t j = 0; j < n; j++)
		touch_of(p->nodes[j].t, &tc[j]);
	for (size_t j = 0; j < n; j++) {
		struct cpu_node *nd = &p->nodes[j];
		const size_t w0 = j > STEP_WINDOW ? j - STEP_WINDOW : 0;

		form[j] = nd->phases > 1 ? qg_op_act_form(nd->t) : 0;
		nd->share = -1;
		nd->solo = !node_steps && nd->t->op == QG_OP_MUL_MAT && nd->phases == 2 && nd->nth > 1 &&
			   qg_tensor_nelements(nd->t->src[1]) <= SOLO_QUANT_MAX;
		if (w0 > 0 && level[w0 - 1] + 1 > floor)
			floor = level[w0 - 1] + 1;	/* that one has left the window */
		size_t lv = node_steps ? j : floor;
		for (size_t i = w0; i < j && !node_steps; i++) {
			if (level[i] + 1 <= lv || !nodes_touch(&tc[i], &tc[j]))
				continue;
			/* after I on the same thread, by rows: in I's step (after it: graph order within a step) */
			lv = row_local(&p->nodes[i], &tc[i], nd, &tc[j]) ? (level[i] > lv ? level[i] : lv) : level[i] + 1;
		}
		for (size_t i = w0; i < j && form[j] && !node_steps; i++) {
			const struct cpu_node *o = &p->nodes[i];
			/* a solo node reads the activation its own thread quantized: the other has that thread too */
			if (level[i] >= lv && o->share < 0 && o->solo == nd->solo && (!nd->solo || o->nth >= nd->nth) &&
			    same_activation(o->t, form[i], nd->t, form[j])) {
				nd->share = (long)i;
				lv = level[i];
				break;
			}
		}
		size_t mine = 0;
		if (nd->share < 0) {
			nd->slot = nd->solo ? (qg_op_scratch_size(nd->t, 1) + 63) & ~(size_t)63 : 0;
			mine = nd->solo ? nd->slot * (size_t)nd->nth
					: (qg_op_scratch_size(nd->t, nd->nth) + 63) & ~(size_t)63;
			while (used[lv] && used[lv] + mine > STEP_SCRATCH_MAX)
				lv++;
			nd->scratch_off = used[lv];
			used[lv] += mine;
			if (used[lv] > need)
				need = used[lv];
		}
		level[j] = lv;
		if (lv + 1 > n_steps)
			n_steps = lv + 1;
	}
	/* the order: by step, by graph order within one (a counting sort) */
	for (size_t l = 0; l < n_steps; l++)
		p->steps[l] = (struct cpu_step){ .done_after = p->n_graph_nodes };
	for (size_t j = 0; j < n; j++) {
		struct cpu_step *st = &p->steps[level[j]];
		const int phases = p->nodes[j].solo ? 1 : p->nodes[j].phases;
		st->n++;
		if (phases > st->phases)
			st->phases = phases;
	}
	for (size_t l = 0, at = 0; l < n_steps; l++) {
		p->steps[l].first = at;
		at += p->steps[l].n;
		p->steps[l].n = 0;
	}
	for (size_t j = 0; j < n; j++) {
		struct cpu_step *st = &p->steps[level[j]];
		p->order[st->first + st->n++] = j;
		p->nodes[j].step = level[j];
	}
	/* done after step L: every graph node before the first one of a later step */
	for (size_t l = n_steps, first = p->n_graph_nodes; l-- > 0;) {
		p->steps[l].done_after = first;
		const struct cpu_step *st = &p->steps[l];
		for (size_t k = st->first; k < st->first + st->n; k++)
			if (p->nodes[p->order[k]].index < first)
				first = p->nodes[p->order[k]].index;
	}
	if (need > p->scratch_size) {
		void *s = aligned_alloc(64, need);
		if (!s)
			goto out;
		free(p->scratch);
		p->base.bytes += need - p->scratch_size;
		p->scratch = s;
		p->scratch_size = need;
	}
	p->n_steps = n_steps;
	r = 0;
out:
	free(level);
	free(used);
	free(form);
	free(tc);
	return r;
}

bool qg_cpu_plans_align(const struct cpu_plan *a, const struct cpu_plan *b)
{
	if (a->n != b->n || a->n_steps != b->n_steps || a->n_graph_nodes != b->n_graph_nodes ||
	    memcmp(a->order, b->order, a->n * sizeof *a->order) != 0)
		return false;
	for (size_t l = 0; l < a->n_steps; l++) {
		const struct cpu_step *x = &a->steps[l], *y = &b->steps[l];
		if (x->first != y->first || x->n != y->n || x->phases != y->phases || x->done_after != y->done_after)
			return false;
	}
	for (size_t j = 0; j < a->n; j++) {
		const struct cpu_node *x = &a->nodes[j], *y = &b->nodes[j];
		if (x->index != y->index || x->t->op != y->t->op || x->nth != y->nth || x->phases != y->phases ||
		    x->solo != y->solo || x->share != y->share)
			return false;
	}
	return true;
}

bool qg_cpu_plans_share_weights(const struct cpu_plan *a, const struct cpu_plan *b)
{
	for (size_t j = 0; j < a->n; j++)
		if (a->nodes[j].t->op == QG_OP_MUL_MAT && a->nodes[j].phases == 2 &&
		    qg_op_mul_mat_joins(a->nodes[j].t, b->nodes[j].t))
			return true;
	return false;
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

long qg_cpu_plan_writes(const struct cpu_plan *p, struct span **out)
{
	struct span *w = malloc((p->n ? p->n : 1) * sizeof *w);
	size_t m = 0;

	*out = w;
	if (!w)
		return -ENOMEM;
	for (size_t j = 0; j < p->n; j++)
		w[j] = span_of(p->nodes[j].t);
	qsort(w, p->n, sizeof *w, span_cmp);
	for (size_t j = 0; j < p->n; j++) {
		if (m && w[j].lo <= w[m - 1].hi)
			w[m - 1].hi = w[j].hi > w[m - 1].hi ? w[j].hi : w[m - 1].hi;
		else
			w[m++] = w[j];
	}
	return (long)m;
}

/* True if S meets one of the N sorted disjoint spans W: only the last that starts before S ends can. */
static bool meets_any(const struct span *w, size_t n, struct span s)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w[mid].lo < s.hi)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && w[lo - 1].hi > s.lo;
}

bool qg_cpu_plan_clear_of(const struct cpu_plan *p, const struct span *w, size_t n)
{
	struct touch tc;

	for (size_t j = 0; j < p->n; j++) {
		touch_of(p->nodes[j].t, &tc);
		if (meets_any(w, n, tc.w))
			return false;
		for (int i = 0; i < tc.n; i++)
			if (meets_any(w, n, tc.r[i]))
				return false;
	}
	return true;
}

/* A group's activations hold at most this many values in all: each of its threads gathers and quantizes them. */
#define GROUP_QUANT_MAX 65536

/*
 * Which nodes of BT's members are groups, and where each group's scratch
 * lies (in each step, a slot per thread and the product's rows).  A
 * MUL_MAT is a group when every member's reads the same weights with a
 * small activation; one that reads another's quantized activation is a
 * group exactly when that one is (if that one is a group and this one
 * cannot be, neither is: the member's own scratch must then hold it).
 * The bytes of scratch in all, or 0 when there is no group.
 */
size_t qg_cpu_batch_groups(struct cpu_batch *bt)
{
	const struct cpu_plan *p0 = bt->p[0];
	size_t need = 0;

	for (size_t j = 0; j < p0->n; j++) {
		const struct cpu_node *nd = &p0->nodes[j];
		struct cpu_group *g = &bt->group[j];
		int64_t rows = 0;
		bool ok = nd->t->op == QG_OP_MUL_MAT && nd->phases == 2;
		for (size_t b = 0; ok && b < bt->n; b++) {
			const struct qg_tensor *t = bt->p[b]->nodes[j].t;
			ok = qg_op_mul_mat_joins(nd->t, t);
			rows += ok ? t->src[1]->ne[1] : 0;
		}
		ok = ok && rows * nd->t->src[0]->ne[0] <= GROUP_QUANT_MAX;
		*g = (struct cpu_group){ .on = ok, .share = nd->share };
		/* a group reads the slot its own thread filled in the other: that one must have the thread */
		if (g->share >= 0 && p0->nodes[g->share].nth < nd->nth)
			g->share = -1;
		if (ok) {
			g->slot = qg_op_mul_mat_group_slot(nd->t, rows, &g->y_bytes);
			g->parts = qg_op_mul_mat_group_parts(nd->t, nd->nth);
		}
		g->on = ok && g->slot > 0;
	}
	/* a node that runs alone and reads another's activation needs that one alone too */
	for (size_t j = 0; j < p0->n; j++)
		if (p0->nodes[j].share >= 0 && !bt->group[j].on)
			bt->group[p0->nodes[j].share].on = false;
	for (size_t j = 0; j < p0->n; j++)
		if (bt->group[j].share >= 0 && !bt->group[bt->group[j].share].on)
			bt->group[j].on = false;
	for (size_t l = 0; l < p0->n_steps; l++) {
		const struct cpu_step *st = &p0->steps[l];
		size_t used = 0;
		for (size_t k = st->first; k < st->first + st->n; k++) {
			const size_t j = p0->order[k];
			struct cpu_group *g = &bt->group[j];
			if (!g->on)
				continue;
			if (g->share >= 0)
				g->slot = 0;	/* it reads the other's */
			g->slot_off = used;
			used += g->slot * (size_t)p0->nodes[j].nth;
			g->y_off = used;
			used += g->y_bytes;
		}
		if (used > need)
			need = used;
	}
	return need;
}
