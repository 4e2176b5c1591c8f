/*
 * gguf-write.c - the GGUF writer (see gguf.h): a version 3 file built in
 * memory, its pairs encoded as they are added and its tensors copied,
 * the whole laid out by qg_gguf_writer_finish.  Growth that fails is
 * remembered and reported at the end.
 */
#include "config.h"

#include "gguf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A growing byte buffer; a failed growth is remembered and reported at the end. */
struct bytes {
	unsigned char *p;
	size_t len, cap;
	int failed;
};

static void put(struct bytes *b, const void *src, size_t n)
{
	if (b->failed)
		return;
	if (n > b->cap - b->len) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap - b->len < n) {
			if (cap > SIZE_MAX / 2) {
				b->failed = -EOVERFLOW;
				return;
			}
			cap *= 2;
		}
		unsigned char *p = realloc(b->p, cap);
		if (!p) {
			b->failed = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, src, n);
	b->len += n;
}

static void put_le(struct bytes *b, uint64_t v, unsigned n)
{
	unsigned char x[8];

	for (unsigned i = 0; i < n; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	put(b, x, n);
}

static void put_str(struct bytes *b, const char *s)
{
	size_t n = strlen(s);

	put_le(b, n, 8);
	put(b, s, n);
}

struct wtensor {
	char *name;
	uint32_t type, n_dims;
	int64_t ne[QG_GGUF_MAX_DIMS];
	uint64_t bytes;
	unsigned char *data;
};

/*
 * The tensors, and their names in a hash set so that refusing a second
 * tensor of one name costs the same at the millionth as at the first:
 * open addressing, linear probing, a slot holding a tensor's index plus
 * one (0: empty), kept at most half full.
 */
struct qg_gguf_writer {
	uint32_t alignment;
	uint64_t n_kv;
	struct bytes kv;
	struct wtensor *t;
	size_t n_t, cap_t;
	size_t *slots;
	size_t n_slots;		/* a power of two, or 0 before the first tensor */
};

/* A 64-bit FNV-1a hash of the string NAME. */
static uint64_t name_hash(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

/* The slot of W's set where NAME is, or the empty one where it would go (the set has an empty slot). */
static size_t *name_slot(const struct qg_gguf_writer *w, const char *name)
{
	size_t mask = w->n_slots - 1, i = (size_t)name_hash(name) & mask;

	while (w->slots[i] && strcmp(w->t[w->slots[i] - 1].name, name) != 0)
		i = (i + 1) & mask;
	return &w->slots[i];
}

/* Room in W's name set for one more name: twice the slots once it would be half full.  0 or -ENOMEM. */
static int names_reserve(struct qg_gguf_writer *w)
{
	if (w->n_slots && 2 * (w->n_t + 1) <= w->n_slots)
		return 0;
	size_t n = w->n_slots ? 2 * w->n_slots : 16;
	size_t *old = w->slots;
	if (n > SIZE_MAX / sizeof *old || !(w->slots = calloc(n, sizeof *old))) {
		w->slots = old;
		return -ENOMEM;
	}
	w->n_slots = n;
	for (size_t i = 0; i < w->n_t; i++)
		*name_slot(w, w->t[i].name) = i + 1;
	free(old);
	return 0;
}

struct qg_gguf_writer *qg_gguf_writer_new(uint32_t alignment)
{
	struct qg_gguf_writer *w;

	if (alignment & (alignment - 1))
		return NULL;
	w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->alignment = alignment ? alignment : QG_GGUF_DEFAULT_ALIGNMENT;
	if (alignment && alignment != QG_GGUF_DEFAULT_ALIGNMENT &&
	    qg_gguf_writer_kv_u64(w, "general.alignment", QG_GGUF_U32, alignment)) {
		qg_gguf_writer_free(w);
		return NULL;
	}
	return w;
}

void qg_gguf_writer_free(struct qg_gguf_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_t; i++) {
		free(w->t[i].name);
		free(w->t[i].data);
	}
	free(w->t);
	free(w->slots);
	free(w->kv.p);
	free(w);
}

/* The key and the value type of a new pair. */
static int kv_head(struct qg_gguf_writer *w, const char *key, uint32_t vtype)
{
	if (!key || !*key || vtype >= QG_GGUF_VTYPE_COUNT)
		return -EINVAL;
	put_str(&w->kv, key);
	put_le(&w->kv, vtype, 4);
	w->n_kv++;
	return 0;
}

int qg_gguf_writer_kv_u64(struct qg_gguf_writer *w, const char *key, uint32_t vtype, uint64_t v)
{
	if (!qg_gguf_vtype_size(vtype) || vtype == QG_GGUF_F32 || vtype == QG_GGUF_F64)
		return -EINVAL;
	if (kv_head(w, key, vtype))
		return -EINVAL;
	put_le(&w->kv, v, qg_gguf_vtype_size(vtype));
	return w->kv.failed;
}

int qg_gguf_writer_kv_f64(struct qg_gguf_writer *w, const char *key, uint32_t vtype, double v)
{
	uint64_t u;

	if (vtype == QG_GGUF_F32) {
		float f = (float)v;
		uint32_t u32;
		memcpy(&u32, &f, sizeof u32);
		u = u32;
	} else if (vtype == QG_GGUF_F64) {
		memcpy(&u, &v, sizeof u);
	} else {
		return -EINVAL;
	}
	if (kv_head(w, key, vtype))
		return -EINVAL;
	put_le(&w->kv, u, qg_gguf_vtype_size(vtype));
	return w->kv.failed;
}

int qg_gguf_writer_kv_string(struct qg_gguf_writer *w, const char *key, const char *value)
{
	if (!value || kv_head(w, key, QG_GGUF_STRING))
		return -EINVAL;
	put_str(&w->kv, value);
	return w->kv.failed;
}

int qg_gguf_writer_kv_array(struct qg_gguf_writer *w, const char *key, uint32_t vtype, uint64_t n,
			    const void *elems)
{
	if (!qg_gguf_vtype_size(vtype) || (n && !elems) || n > SIZE_MAX / 8)
		return -EINVAL;
	if (kv_head(w, key, QG_GGUF_ARRAY))
		return -EINVAL;
	put_le(&w->kv, vtype, 4);
	put_le(&w->kv, n, 8);
	/* elements are given little-endian, as the file holds them */
	put(&w->kv, elems, (size_t)n * qg_gguf_vtype_size(vtype));
	return w->kv.failed;
}

int qg_gguf_writer_kv_strings(struct qg_gguf_writer *w, const char *key, uint64_t n, const char *const *s)
{
	if ((n && !s) || kv_head(w, key, QG_GGUF_ARRAY))
		return -EINVAL;
	put_le(&w->kv, QG_GGUF_STRING, 4);
	put_le(&w->kv, n, 8);
	for (uint64_t i = 0; i < n; i++)
		put_str(&w->kv, s[i] ? s[i] : "");
	return w->kv.failed;
}

int qg_gguf_writer_tensor(struct qg_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
			  const int64_t *ne, const void *data)
{
	uint32_t bv, bb;
	struct wtensor t = { .type = type, .n_dims = n_dims };

	if (!name || !*name || qg_ggml_type_size(type, &bv, &bb) || n_dims < 1 || n_dims > QG_GGUF_MAX_DIMS ||
	    !data)
		return -EINVAL;
	if (names_reserve(w))
		return -ENOMEM;
	size_t *slot = name_slot(w, name);
	if (*slot)
		return -EEXIST;
	for (unsigned d = 0; d < QG_GGUF_MAX_DIMS; d++)
		t.ne[d] = 1;
	for (unsigned d = 0; d < n_dims; d++) {
		if (ne[d] <= 0)
			return -EINVAL;
		t.ne[d] = ne[d];
	}
	if (t.ne[0] % bv)
		return -EINVAL;
	t.bytes = (uint64_t)t.ne[0] / bv * bb;
	for (unsigned d = 1; d < QG_GGUF_MAX_DIMS; d++) {
		if (t.bytes > SIZE_MAX / (uint64_t)t.ne[d])
			return -EOVERFLOW;
		t.bytes *= (uint64_t)t.ne[d];
	}
	if (w->n_t == w->cap_t) {
		size_t cap = w->cap_t ? 2 * w->cap_t : 8;
		struct wtensor *p = realloc(w->t, cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		w->t = p;
		w->cap_t = cap;
	}
	t.name = strdup(name);
	t.data = malloc(t.bytes ? (size_t)t.bytes : 1);
	if (!t.name || !t.data) {
		free(t.name);
		free(t.data);
		return -ENOMEM;
	}
	memcpy(t.data, data, (size_t)t.bytes);
	w->t[w->n_t++] = t;
	*slot = w->n_t;	/* the set did not move since name_slot: nothing between allocates for it */
	return 0;
}

/* Zero bytes up to the next multiple of the alignment. */
static void put_pad(struct bytes *b, uint32_t alignment)
{
	static const unsigned char zero[64];

	while (!b->failed && b->len % alignment) {
		size_t n = alignment - b->len % alignment;
		put(b, zero, n < sizeof zero ? n : sizeof zero);
	}
}

int qg_gguf_writer_finish(struct qg_gguf_writer *w, void **out, size_t *len)
{
	struct bytes b = { 0 };
	uint64_t offset = 0;

	*out = NULL;
	*len = 0;
	if (w->kv.failed)
		return w->kv.failed;
	put(&b, "GGUF", 4);
	put_le(&b, 3, 4);
	put_le(&b, w->n_t, 8);
	put_le(&b, w->n_kv, 8);
	put(&b, w->kv.p, w->kv.len);
	for (size_t i = 0; i < w->n_t; i++) {
		const struct wtensor *t = &w->t[i];
		put_str(&b, t->name);
		put_le(&b, t->n_dims, 4);
		for (unsigned d = 0; d < t->n_dims; d++)
			put_le(&b, (uint64_t)t->ne[d], 8);
		put_le(&b, t->type, 4);
		put_le(&b, offset, 8);
		offset += (t->bytes + w->alignment - 1) / w->alignment * w->alignment;
	}
	for (size_t i = 0; i < w->n_t; i++) {
		put_pad(&b, w->alignment);
		put(&b, w->t[i].data, (size_t)w->t[i].bytes);
	}
	if (b.failed) {
		free(b.p);
		return b.failed;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}
