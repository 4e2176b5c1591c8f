/*
 * galloc.c - the graph allocator (see galloc.h): one walk in execution order
 * that decides lifetimes and in-place reuse, the greedy placement during
 * that walk, the by-size placement after it, and the buffers sized from the
 * result.
 *
 * Steps: the leafs and inputs are born at step 0, node i at step i + 1; a
 * tensor that dies after node i has run lives through step i + 1 (its last
 * reader), and one that never dies lives through step n_nodes + 1.  Two
 * objects may share bytes only if their [birth, death] intervals are
 * disjoint: that is what both placements keep, and what the tests check.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dalloc.h"
#include "galloc.h"
#include "ops.h"

#define DEFAULT_FREE_BLOCKS 256
#define BUCKET_STEPS 16		/* steps per time bucket of the by-size placement */
#define LONG_BUCKETS 8		/* objects spanning more buckets are kept on one list */
#define NEVER_DIES (QG_TENSOR_OUTPUT | QG_TENSOR_WEIGHTS)
#define NOT_REUSED (QG_TENSOR_OUTPUT | QG_TENSOR_INPUT | QG_TENSOR_WEIGHTS)

/* One planner and one buffer, shared by every id naming the same buffer type. */
struct ga_group {
	struct qg_buft *buft;
	struct qg_dalloc *da;
	struct qg_buffer *buf;
	size_t align, max_size;
	bool greedy_on;		/* the greedy placement runs (and has not failed) this plan */
	struct qg_galloc_stats st;
};

/* A piece of memory with a lifetime: a tensor, or an in-place chain of them. */
struct ga_obj {
	int group;
	long start, end;	/* steps, inclusive */
	size_t size;		/* rounded to the group's alignment */
	size_t off_greedy, off_size, offset;
};

/* Every tensor of the planned graph: nodes first, then leafs. */
struct ga_slot {
	struct qg_tensor *t;
	/* what the plan was made for, to tell whether a graph still fits */
	const struct qg_tensor *src[QG_MAX_SRC], *view_src;
	int flags;
	enum qg_op op;
	int id;
	int obj;		/* the object holding this tensor's bytes; -1: not planned */
	size_t size;		/* its alloc size when planned */
	/* while planning */
	int n_children, n_views;
	bool owns;		/* holds OBJ, and releases it when it dies */
};

struct qg_galloc {
	int n_ids, n_groups;
	int *group_of;		/* id -> group */
	struct ga_group *groups;
	struct qg_galloc_options opt;
	enum qg_galloc_fault fault;

	struct qg_hash hash;
	size_t *hidx;		/* hash slot -> slot */
	size_t cap;		/* slots and objects there is room for */
	struct ga_slot *slots;
	struct ga_obj *objs;
	size_t n_nodes, n_leafs, n_objs;
	long t_end;
	bool planned;
};

int qg_galloc_new(struct qg_buft *const *bufts, int n_bufts, const struct qg_galloc_options *opt,
		  struct qg_galloc **out)
{
	struct qg_galloc *ga;

	*out = NULL;
	if (!bufts || n_bufts < 1 || n_bufts > 1024)
		return -EINVAL;
	for (int i = 0; i < n_bufts; i++)
		if (!bufts[i])
			return -EINVAL;
	if (opt && (unsigned)opt->placement > QG_GALLOC_BY_SIZE)
		return -EINVAL;
	ga = calloc(1, sizeof(*ga));
	if (!ga)
		return -ENOMEM;
	if (opt)
		ga->opt = *opt;
	if (!ga->opt.max_free_blocks)
		ga->opt.max_free_blocks = DEFAULT_FREE_BLOCKS;
	ga->n_ids = n_bufts;
	ga->group_of = calloc((size_t)n_bufts, sizeof(*ga->group_of));
	ga->groups = calloc((size_t)n_bufts, sizeof(*ga->groups));
	if (!ga->group_of || !ga->groups)
		goto nomem;
	for (int i = 0; i < n_bufts; i++) {
		int g;
		for (g = 0; g < ga->n_groups; g++)
			if (ga->groups[g].buft == bufts[i])
				break;
		ga->group_of[i] = g;
		if (g < ga->n_groups)
			continue;
		struct ga_group *gr = &ga->groups[ga->n_groups++];
		gr->buft = bufts[i];
		gr->align = qg_buft_alignment(bufts[i]);
		gr->max_size = qg_buft_max_size(bufts[i]);
		if (gr->align == 0 || (gr->align & (gr->align - 1))) {
			qg_galloc_free(ga);
			return -EINVAL;
		}
		gr->da = qg_dalloc_new(gr->align, gr->max_size ? gr->max_size : 1, ga->opt.max_free_blocks);
		if (!gr->da)
			goto nomem;
	}
	*out = ga;
	return 0;
nomem:
	qg_galloc_free(ga);
	return -ENOMEM;
}

void qg_galloc_free(struct qg_galloc *ga)
{
	if (!ga)
		return;
	for (int g = 0; g < ga->n_groups; g++) {
		qg_buffer_free(ga->groups[g].buf);
		qg_dalloc_free(ga->groups[g].da);
	}
	free(ga->groups);
	free(ga->group_of);
	qg_hash_free(&ga->hash);
	free(ga->hidx);
	free(ga->slots);
	free(ga->objs);
	free(ga);
}

void qg_galloc_set_fault(struct qg_galloc *ga, enum qg_galloc_fault fault)
{
	ga->fault = fault;
}

/* True if BUF is one of GA's buffers. */
static bool ga_owns_buffer(const struct qg_galloc *ga, const struct qg_buffer *buf)
{
	if (!buf)
		return false;
	for (int g = 0; g < ga->n_groups; g++)
		if (ga->groups[g].buf == buf)
			return true;
	return false;
}

/* True if T's data was placed by GA (directly, or as a view of a tensor GA placed). */
static bool ga_placed(const struct qg_galloc *ga, const struct qg_tensor *t)
{
	return ga_owns_buffer(ga, t->buffer) || (t->view_src && ga_owns_buffer(ga, t->view_src->buffer));
}

/* Views first, while their sources still say where they live. */
void qg_galloc_unplace(const struct qg_galloc *ga, struct qg_graph *g)
{
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < g->n_leafs + g->n_nodes; i++) {
			struct qg_tensor *t = i < g->n_leafs ? g->leafs[i] : g->nodes[i - g->n_leafs];
			if ((pass == 0) != (t->view_src != NULL) || !ga_placed(ga, t))
				continue;
			t->data = NULL;
			t->buffer = NULL;
		}
}

/* Room for N slots and objects, and a hash set for N tensors. */
static int ga_grow(struct qg_galloc *ga, size_t n)
{
	if (n > ga->cap) {
		struct ga_slot *s = realloc(ga->slots, n * sizeof(*s));
		if (s)
			ga->slots = s;
		struct ga_obj *o = realloc(ga->objs, n * sizeof(*o));
		if (o)
			ga->objs = o;
		if (!s || !o)
			return -ENOMEM;
		ga->cap = n;
	}
	if (ga->hash.size < qg_hash_size_for(n)) {
		qg_hash_free(&ga->hash);
		free(ga->hidx);
		ga->hidx = NULL;
		int r = qg_hash_init(&ga->hash, n);
		if (r < 0)
			return r;
		ga->hidx = malloc(ga->hash.size * sizeof(*ga->hidx));
		if (!ga->hidx) {
			qg_hash_free(&ga->hash);
			return -ENOMEM;
		}
	} else {
		qg_hash_reset(&ga->hash);
	}
	return 0;
}

/* The slot of T, or NULL if T is not in the planned graph. */
static struct ga_slot *ga_slot_of(const struct qg_galloc *ga, const struct qg_tensor *t)
{
	size_t h = qg_hash_find(&ga->hash, t);

	return h == QG_HASH_NONE ? NULL : &ga->slots[ga->hidx[h]];
}

/* A new object for slot S, born at step T: its greedy place too while that placement runs. */
static int ga_new_obj(struct qg_galloc *ga, struct ga_slot *s, long t)
{
	struct ga_group *gr = &ga->groups[ga->group_of[s->id]];
	struct ga_obj *o = &ga->objs[ga->n_objs];
	size_t size = s->size ? s->size : 1;

	if (size > SIZE_MAX - (gr->align - 1))
		return -EOVERFLOW;
	o->group = ga->group_of[s->id];
	o->start = t;
	o->end = ga->t_end;
	o->size = (size + gr->align - 1) & ~(gr->align - 1);
	o->off_greedy = o->off_size = o->offset = 0;
	if (gr->greedy_on) {
		int r = qg_dalloc_alloc(gr->da, o->size, &o->off_greedy);
		if (r < 0) {
			if (ga->opt.placement == QG_GALLOC_GREEDY)
				return r;
			gr->greedy_on = false;	/* BEST: by size alone for this buffer */
		}
	}
	s->obj = (int)ga->n_objs++;
	s->owns = true;
	gr->st.objects++;
	return 0;
}

/* Slot S dies after step T: its object is free from step T + 1 (unless S never dies). */
static int ga_release(struct qg_galloc *ga, struct ga_slot *s, long t)
{
	if (!s->owns || (s->t->flags & NEVER_DIES))
		return 0;
	struct ga_obj *o = &ga->objs[s->obj];
	struct ga_group *gr = &ga->groups[o->group];
	s->owns = false;
	o->end = t;
	if (gr->greedy_on) {
		int r = qg_dalloc_release(gr->da, o->off_greedy, o->size);
		if (r < 0) {
			if (ga->opt.placement == QG_GALLOC_GREEDY)
				return r;
			gr->greedy_on = false;
		}
	}
	return 0;
}

/* Parent P of a node has lost its last reader at step T: P, or its view source, may die. */
static int ga_parent_done(struct qg_galloc *ga, struct ga_slot *p, long t)
{
	/* an output view keeps its source: the caller reads the source's bytes */
	if (p->t->flags & QG_TENSOR_OUTPUT)
		return 0;
	if (!p->t->view_src)
		return ga_release(ga, p, t);
	if (ga->fault == QG_GALLOC_FAULT_IGNORE_VIEWS)
		return 0;
	struct ga_slot *vs = ga_slot_of(ga, p->t->view_src);
	if (--vs->n_views == 0 && vs->n_children == 0)
		return ga_release(ga, vs, t);
	return 0;
}

/* Node slot S has run at step T: each of its sources has one reader less. */
static int ga_finish_sources(struct qg_galloc *ga, struct ga_slot *s, long t)
{
	for (int j = 0; j < QG_MAX_SRC; j++) {
		if (!s->t->src[j])
			continue;
		struct ga_slot *p = ga_slot_of(ga, s->t->src[j]);
		if (--p->n_children > 0)
			continue;
		if (p->n_views == 0 || ga->fault == QG_GALLOC_FAULT_IGNORE_VIEWS) {
			int r = ga_parent_done(ga, p, t);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/*
 * True if T is a plain intermediate: computed (not a leaf), not flagged,
 * and not weights' bytes (a CPY's result views its destination): weights
 * may be shared with other sessions, and are never written.
 */
static bool ga_reusable(const struct qg_tensor *t)
{
	return t->op != QG_OP_NONE && !(t->flags & NOT_REUSED) && !qg_tensor_is_weights(t);
}

/*
 * Node slot S takes over its first source's object if the op allows it
 * and nothing else can still read those bytes (see galloc.h).  True if it
 * did.
 */
static bool ga_try_inplace(struct qg_galloc *ga, struct ga_slot *s)
{
	const struct qg_tensor *n = s->t, *p = n->src[0];

	if (!qg_op_can_inplace(n->op) || !p || !ga_reusable(p) || (n->flags & QG_TENSOR_INPUT))
		return false;
	struct ga_slot *ps = ga_slot_of(ga, p), *owner = ps;
	if (ps->n_children != 1 || ps->n_views != 0 || !qg_tensor_same_layout(n, p))
		return false;
	if (p->view_src) {
		/* a view at the start of a source that nothing else reads */
		owner = ga_slot_of(ga, p->view_src);
		if (!ga_reusable(p->view_src) || owner->n_views != 1 || owner->n_children != 0 || p->view_offs)
			return false;
	}
	if (!owner->owns)
		return false;
	struct ga_obj *o = &ga->objs[owner->obj];
	if (o->group != ga->group_of[s->id] || s->size > o->size)
		return false;
	owner->owns = false;
	s->obj = owner->obj;
	s->owns = true;
	ga->groups[o->group].st.inplace++;
	return true;
}

/* True if slot S is a tensor the plan gives memory (no data, not a view). */
static bool ga_wants_memory(const struct ga_slot *s)
{
	return !s->t->data && !s->t->view_src;
}

/* Fill the slots and the hash set from G and the ids; count children and views. */
static int ga_walk_init(struct qg_galloc *ga, struct qg_graph *g, const int *node_ids, const int *leaf_ids)
{
	size_t n = g->n_nodes + g->n_leafs;
	int r;

	if (n < g->n_nodes || n > (size_t)INT32_MAX)
		return -EOVERFLOW;
	if ((r = ga_grow(ga, n ? n : 1)) < 0)
		return r;
	ga->n_nodes = g->n_nodes;
	ga->n_leafs = g->n_leafs;
	ga->n_objs = 0;
	ga->t_end = (long)g->n_nodes + 1;
	for (size_t i = 0; i < n; i++) {
		struct ga_slot *s = &ga->slots[i];
		bool leaf = i >= g->n_nodes;
		struct qg_tensor *t = leaf ? g->leafs[i - g->n_nodes] : g->nodes[i];
		const int *ids = leaf ? leaf_ids : node_ids;
		int id = ids ? ids[leaf ? i - g->n_nodes : i] : 0;
		int added;

		if (!t || id < 0 || id >= ga->n_ids)
			return -EINVAL;
		memset(s, 0, sizeof(*s));
		s->t = t;
		memcpy(s->src, t->src, sizeof(s->src));
		s->view_src = t->view_src;
		s->flags = t->flags;
		s->op = t->op;
		s->id = id;
		s->obj = -1;
		if (ga_wants_memory(s))
			s->size = qg_buft_alloc_size(ga->groups[ga->group_of[id]].buft, t);
		size_t h = qg_hash_insert(&ga->hash, t, &added);
		if (h == QG_HASH_NONE || !added)
			return -EINVAL;	/* a tensor listed twice */
		ga->hidx[h] = i;
	}
	for (size_t i = 0; i < n; i++) {
		const struct qg_tensor *t = ga->slots[i].t;
		for (int j = 0; j < QG_MAX_SRC; j++) {
			if (!t->src[j])
				continue;
			struct ga_slot *p = ga_slot_of(ga, t->src[j]);
			if (!p)
				return -EINVAL;
			p->n_children++;
		}
		if (t->view_src) {
			struct ga_slot *vs = ga_slot_of(ga, t->view_src);
			if (!vs)
				return -EINVAL;
			vs->n_views++;
		}
	}
	return 0;
}

/* The walk: lifetimes, in-place reuse and the greedy placement. */
static int ga_walk(struct qg_galloc *ga)
{
	size_t n = ga->n_nodes + ga->n_leafs;
	int r;

	/* inputs first, then the other leafs: all of them born before the first node */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			struct ga_slot *s = &ga->slots[i];
			bool input = s->t->flags & QG_TENSOR_INPUT;
			if (s->owns || !ga_wants_memory(s) || (pass == 0 ? !input : i < ga->n_nodes))
				continue;
			if ((r = ga_new_obj(ga, s, 0)) < 0)
				return r;
		}
	for (size_t i = 0; i < ga->n_nodes; i++) {
		struct ga_slot *s = &ga->slots[i];
		long t = (long)i + 1;
		bool alloc = !s->owns && ga_wants_memory(s);

		if (alloc && ga_try_inplace(ga, s))
			alloc = false;
		if (ga->fault == QG_GALLOC_FAULT_EARLY_FREE && (r = ga_finish_sources(ga, s, t - 1)) < 0)
			return r;
		if (alloc && (r = ga_new_obj(ga, s, t)) < 0)
			return r;
		if (ga->fault != QG_GALLOC_FAULT_EARLY_FREE && (r = ga_finish_sources(ga, s, t)) < 0)
			return r;
	}
	return 0;
}

struct bs_entry {
	int obj, next;
};

struct bs_cand {
	size_t offset, size;
};

static int bs_cmp_cand(const void *a, const void *b)
{
	const struct bs_cand *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* For sorting objects by size, largest first; ties by birth, then index, so the order is stable. */
struct bs_key {
	size_t size;
	long start;
	int obj;
};

static int bs_cmp_key(const void *a, const void *b)
{
	const struct bs_key *x = a, *y = b;

	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->obj > y->obj) - (x->obj < y->obj);
}

static bool bs_overlap(const struct ga_obj *a, const struct ga_obj *b)
{
	return a->start <= b->end && b->start <= a->end;
}

/*
 * The by-size placement of GROUP's objects: largest first, each at the
 * smallest gap (between the objects already placed whose lifetimes overlap
 * its own) that holds it, or above them all.  Placed objects are found
 * through time buckets of BUCKET_STEPS steps; the few that span more than
 * LONG_BUCKETS buckets are kept on one list that every query reads.  The
 * peak in *PEAK.
 */
static int ga_place_by_size(struct qg_galloc *ga, int group, size_t *peak)
{
	size_t n = 0, nb = (size_t)ga->t_end / BUCKET_STEPS + 1, n_entries = 0, n_long = 0, n_placed = 0;
	struct bs_key *keys = malloc(ga->n_objs * sizeof(*keys) + 1);
	struct bs_cand *cand = malloc(ga->n_objs * sizeof(*cand) + 1);
	struct bs_entry *entries = malloc(ga->n_objs * LONG_BUCKETS * sizeof(*entries) + 1);
	int *head = malloc(nb * sizeof(*head)), *longs = malloc(ga->n_objs * sizeof(int) + 1);
	int *placed = malloc(ga->n_objs * sizeof(int) + 1), *stamp = malloc(ga->n_objs * sizeof(int) + 1);
	int r = -ENOMEM;

	*peak = 0;
	if (!keys || !cand || !entries || !head || !longs || !placed || !stamp)
		goto out;
	for (size_t i = 0; i < ga->n_objs; i++) {
		stamp[i] = -1;
		if (ga->objs[i].group == group)
			keys[n++] = (struct bs_key){ ga->objs[i].size, ga->objs[i].start, (int)i };
	}
	for (size_t b = 0; b < nb; b++)
		head[b] = -1;
	qsort(keys, n, sizeof(*keys), bs_cmp_key);

	for (size_t q = 0; q < n; q++) {
		struct ga_obj *o = &ga->objs[keys[q].obj];
		size_t b0 = (size_t)o->start / BUCKET_STEPS, b1 = (size_t)o->end / BUCKET_STEPS, k = 0;
		bool is_long = b1 - b0 + 1 > LONG_BUCKETS;

		if (is_long) {
			for (size_t i = 0; i < n_placed; i++)
				if (bs_overlap(o, &ga->objs[placed[i]]))
					cand[k++] = (struct bs_cand){ ga->objs[placed[i]].off_size, ga->objs[placed[i]].size };
		} else {
			for (size_t b = b0; b <= b1; b++)
				for (int e = head[b]; e >= 0; e = entries[e].next) {
					int c = entries[e].obj;
					if (stamp[c] == (int)q || !bs_overlap(o, &ga->objs[c]))
						continue;
					stamp[c] = (int)q;
					cand[k++] = (struct bs_cand){ ga->objs[c].off_size, ga->objs[c].size };
				}
			for (size_t i = 0; i < n_long; i++)
				if (bs_overlap(o, &ga->objs[longs[i]]))
					cand[k++] = (struct bs_cand){ ga->objs[longs[i]].off_size, ga->objs[longs[i]].size };
		}
		qsort(cand, k, sizeof(*cand), bs_cmp_cand);

		size_t cur = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
		for (size_t i = 0; i < k; i++) {
			if (cand[i].offset > cur) {
				size_t gap = cand[i].offset - cur;
				if (gap >= o->size && gap < best_gap) {
					best = cur;
					best_gap = gap;
				}
			}
			if (cand[i].offset + cand[i].size > cur)
				cur = cand[i].offset + cand[i].size;
		}
		if (best == SIZE_MAX)
			best = cur;
		if (best > SIZE_MAX - o->size) {
			r = -EOVERFLOW;
			goto out;
		}
		o->off_size = best;
		if (best + o->size > *peak)
			*peak = best + o->size;

		if (is_long) {
			longs[n_long++] = keys[q].obj;
		} else {
			for (size_t b = b0; b <= b1; b++) {
				entries[n_entries] = (struct bs_entry){ keys[q].obj, head[b] };
				head[b] = (int)n_entries++;
			}
		}
		placed[n_placed++] = keys[q].obj;
	}
	r = 0;
out:
	free(keys);
	free(cand);
	free(entries);
	free(head);
	free(longs);
	free(placed);
	free(stamp);
	return r;
}

/* Each group's lower bound: the largest sum of live object sizes at any step. */
static int ga_live_peaks(struct qg_galloc *ga)
{
	size_t steps = (size_t)ga->t_end + 2;
	size_t *diff = malloc(steps * (size_t)ga->n_groups * sizeof(*diff));

	if (!diff)
		return -ENOMEM;
	memset(diff, 0, steps * (size_t)ga->n_groups * sizeof(*diff));
	for (size_t i = 0; i < ga->n_objs; i++) {
		const struct ga_obj *o = &ga->objs[i];
		size_t *d = diff + (size_t)o->group * steps;
		d[o->start] += o->size;		/* wraps back in the sum below */
		d[o->end + 1] -= o->size;
	}
	for (int g = 0; g < ga->n_groups; g++) {
		size_t live = 0, peak = 0, *d = diff + (size_t)g * steps;
		for (size_t t = 0; t < steps; t++) {
			live += d[t];
			if (live > peak)
				peak = live;
		}
		ga->groups[g].st.live_peak = peak;
	}
	free(diff);
	return 0;
}

/* Choose each group's placement, set the offsets and the planned sizes. */
static int ga_choose(struct qg_galloc *ga)
{
	int r;

	for (int g = 0; g < ga->n_groups; g++) {
		struct ga_group *gr = &ga->groups[g];
		size_t bs = SIZE_MAX;
		gr->st.greedy = gr->greedy_on ? qg_dalloc_high_water(gr->da) : SIZE_MAX;
		if (ga->opt.placement != QG_GALLOC_GREEDY) {
			if ((r = ga_place_by_size(ga, g, &bs)) < 0)
				return r;
		}
		gr->st.by_size = bs;
		bool use_greedy = gr->greedy_on && (gr->st.greedy <= bs || bs > gr->max_size);
		gr->st.planned = use_greedy ? gr->st.greedy : bs;
		if (gr->st.planned > gr->max_size)
			return -ENOSPC;
		for (size_t i = 0; i < ga->n_objs; i++)
			if (ga->objs[i].group == g)
				ga->objs[i].offset = use_greedy ? ga->objs[i].off_greedy : ga->objs[i].off_size;
	}
	return 0;
}

/* Give every group a buffer of at least its planned size. */
static int ga_size_buffers(struct qg_galloc *ga)
{
	for (int g = 0; g < ga->n_groups; g++) {
		struct ga_group *gr = &ga->groups[g];
		if (gr->st.planned == 0 || (gr->buf && qg_buffer_size(gr->buf) >= gr->st.planned))
			continue;
		qg_buffer_free(gr->buf);
		gr->buf = NULL;
		int r = qg_buft_alloc_buffer(gr->buft, gr->st.planned, &gr->buf);
		if (r < 0) {
			gr->buf = NULL;
			return r;
		}
		qg_buffer_set_usage(gr->buf, QG_BUFFER_USAGE_COMPUTE);
	}
	return 0;
}

int qg_galloc_reserve(struct qg_galloc *ga, struct qg_graph *g, const int *node_ids, const int *leaf_ids)
{
	int r;

	ga->planned = false;
	if (!g)
		return -EINVAL;
	qg_galloc_unplace(ga, g);
	for (int i = 0; i < ga->n_groups; i++) {
		struct ga_group *gr = &ga->groups[i];
		qg_dalloc_reset(gr->da);
		gr->greedy_on = ga->opt.placement != QG_GALLOC_BY_SIZE;
		memset(&gr->st, 0, sizeof(gr->st));
	}
	if ((r = ga_walk_init(ga, g, node_ids, leaf_ids)) < 0 || (r = ga_walk(ga)) < 0 ||
	    (r = ga_live_peaks(ga)) < 0 || (r = ga_choose(ga)) < 0 || (r = ga_size_buffers(ga)) < 0)
		return r;
	ga->planned = true;
	return 0;
}

/* True if G has the nodes, leafs, sources, views, flags and ops the plan was made for. */
static bool ga_same_structure(const struct qg_galloc *ga, const struct qg_graph *g)
{
	if (!ga->planned || g->n_nodes != ga->n_nodes || g->n_leafs != ga->n_leafs)
		return false;
	for (size_t i = 0; i < ga->n_nodes + ga->n_leafs; i++) {
		const struct ga_slot *s = &ga->slots[i];
		const struct qg_tensor *t = i < ga->n_nodes ? g->nodes[i] : g->leafs[i - ga->n_nodes];
		if (t != s->t || t->view_src != s->view_src || t->flags != s->flags || t->op != s->op ||
		    memcmp(t->src, s->src, sizeof(s->src)))
			return false;
	}
	return true;
}

bool qg_galloc_needs_realloc(const struct qg_galloc *ga, const struct qg_graph *g)
{
	if (!g || !ga_same_structure(ga, g))
		return true;
	for (size_t i = 0; i < ga->n_nodes + ga->n_leafs; i++) {
		const struct ga_slot *s = &ga->slots[i];
		const struct qg_tensor *t = s->t;
		if (s->obj >= 0) {
			if (qg_buft_alloc_size(ga->groups[ga->group_of[s->id]].buft, t) > s->size)
				return true;
		} else if (!t->view_src && (!t->data || ga_owns_buffer(ga, t->buffer))) {
			return true;
		}
	}
	return false;
}

/* Plan G again from the ids of the current plan (same structure) or with all ids 0. */
static int ga_replan(struct qg_galloc *ga, struct qg_graph *g)
{
	size_t n = ga->n_nodes + ga->n_leafs;
	int *ids, r;

	if (!ga_same_structure(ga, g))
		return ga->n_ids == 1 ? qg_galloc_reserve(ga, g, NULL, NULL) : -EAGAIN;
	ids = malloc((n ? n : 1) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		ids[i] = ga->slots[i].id;
	r = qg_galloc_reserve(ga, g, ids, ids + ga->n_nodes);
	free(ids);
	return r;
}

int qg_galloc_alloc_graph(struct qg_galloc *ga, struct qg_graph *g)
{
	int r;

	if (!g)
		return -EINVAL;
	if (qg_galloc_needs_realloc(ga, g) && (r = ga_replan(ga, g)) < 0)
		return r;
	qg_galloc_unplace(ga, g);
	/* leafs first: a view node's source is a leaf or an earlier node */
	for (size_t k = 0; k < ga->n_nodes + ga->n_leafs; k++) {
		size_t i = k < ga->n_leafs ? ga->n_nodes + k : k - ga->n_leafs;
		const struct ga_slot *s = &ga->slots[i];
		struct qg_tensor *t = s->t;
		if (s->obj >= 0) {
			const struct ga_obj *o = &ga->objs[s->obj];
			r = qg_buffer_place(ga->groups[o->group].buf, t, o->offset);
		} else if (t->view_src && !t->data) {
			r = qg_buffer_init_view(t);
		} else {
			r = 0;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

size_t qg_galloc_buffer_size(const struct qg_galloc *ga, int id)
{
	if (id < 0 || id >= ga->n_ids)
		return 0;
	for (int j = 0; j < id; j++)
		if (ga->group_of[j] == ga->group_of[id])
			return 0;
	const struct qg_buffer *buf = ga->groups[ga->group_of[id]].buf;
	return buf ? qg_buffer_size(buf) : 0;
}

struct qg_buffer *qg_galloc_buffer(const struct qg_galloc *ga, int id)
{
	return id < 0 || id >= ga->n_ids ? NULL : ga->groups[ga->group_of[id]].buf;
}

int qg_galloc_stats(const struct qg_galloc *ga, int id, struct qg_galloc_stats *st)
{
	if (id < 0 || id >= ga->n_ids)
		return -EINVAL;
	const struct ga_group *gr = &ga->groups[ga->group_of[id]];
	*st = gr->st;
	st->buffer = gr->buf ? qg_buffer_size(gr->buf) : 0;
	return 0;
}
