/*
 * gguf-read.c - the GGUF reader, and ggml's type and GGUF's value type
 * tables that the writer (gguf-write.c) shares (see gguf.h).
 *
 * The reader walks the file with a cursor that checks every read against
 * the bytes left, so no field can send it past the end; counts are bounded
 * by the smallest encoding of what they count before anything is
 * allocated, which bounds memory by the file's size.
 */
#include "config.h"

#include "gguf.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml's tensor types: name, values per block, bytes per block; an empty row is an id ggml never had. */
static const struct {
	const char *name;
	uint16_t block_values;
	uint16_t block_bytes;
	uint8_t removed;	/* an id ggml once had and took back */
} ggml_types[QG_GGML_TYPE_LIMIT] = {
	[0] = { "f32", 1, 4, 0 },
	[1] = { "f16", 1, 2, 0 },
	[2] = { "q4_0", 32, 18, 0 },
	[3] = { "q4_1", 32, 20, 0 },
	[4] = { "q4_2", 0, 0, 1 },
	[5] = { "q4_3", 0, 0, 1 },
	[6] = { "q5_0", 32, 22, 0 },
	[7] = { "q5_1", 32, 24, 0 },
	[8] = { "q8_0", 32, 34, 0 },
	[9] = { "q8_1", 32, 36, 0 },
	[10] = { "q2_K", 256, 84, 0 },
	[11] = { "q3_K", 256, 110, 0 },
	[12] = { "q4_K", 256, 144, 0 },
	[13] = { "q5_K", 256, 176, 0 },
	[14] = { "q6_K", 256, 210, 0 },
	[15] = { "q8_K", 256, 292, 0 },
	[16] = { "iq2_xxs", 256, 66, 0 },
	[17] = { "iq2_xs", 256, 74, 0 },
	[18] = { "iq3_xxs", 256, 98, 0 },
	[19] = { "iq1_s", 256, 50, 0 },
	[20] = { "iq4_nl", 32, 18, 0 },
	[21] = { "iq3_s", 256, 110, 0 },
	[22] = { "iq2_s", 256, 82, 0 },
	[23] = { "iq4_xs", 256, 136, 0 },
	[24] = { "i8", 1, 1, 0 },
	[25] = { "i16", 1, 2, 0 },
	[26] = { "i32", 1, 4, 0 },
	[27] = { "i64", 1, 8, 0 },
	[28] = { "f64", 1, 8, 0 },
	[29] = { "iq1_m", 256, 56, 0 },
	[30] = { "bf16", 1, 2, 0 },
	[31] = { "q4_0_4_4", 0, 0, 1 },
	[32] = { "q4_0_4_8", 0, 0, 1 },
	[33] = { "q4_0_8_8", 0, 0, 1 },
	[34] = { "tq1_0", 256, 54, 0 },
	[35] = { "tq2_0", 256, 66, 0 },
	[36] = { "iq4_nl_4_4", 0, 0, 1 },
	[37] = { "iq4_nl_4_8", 0, 0, 1 },
	[38] = { "iq4_nl_8_8", 0, 0, 1 },
	[39] = { "mxfp4", 32, 17, 0 },
	[40] = { "nvfp4", 64, 36, 0 },
	[41] = { "q1_0", 128, 18, 0 },
	[42] = { "q2_0", 64, 18, 0 },
};

static const char *const vtype_names[QG_GGUF_VTYPE_COUNT] = {
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

/* Bytes of a fixed-size value type; 0 for string and array. */
static const uint8_t vtype_bytes[QG_GGUF_VTYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

const char *qg_ggml_type_name(uint32_t type)
{
	return type < QG_GGML_TYPE_LIMIT && ggml_types[type].block_values ? ggml_types[type].name : NULL;
}

int qg_ggml_type_size(uint32_t type, uint32_t *block_values, uint32_t *block_bytes)
{
	if (!qg_ggml_type_name(type))
		return -ENOTSUP;
	*block_values = ggml_types[type].block_values;
	*block_bytes = ggml_types[type].block_bytes;
	return 0;
}

size_t qg_gguf_vtype_size(uint32_t vtype)
{
	return vtype < QG_GGUF_VTYPE_COUNT ? vtype_bytes[vtype] : 0;
}

const char *qg_gguf_vtype_name(uint32_t vtype)
{
	return vtype < QG_GGUF_VTYPE_COUNT ? vtype_names[vtype] : NULL;
}

int qg_gguf_model_name(const char *path, char *out, size_t size)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	size_t n = strlen(b);

	if (n > 5 && strcmp(b + n - 5, ".gguf") == 0)
		n -= 5;
	if (n == 0)
		return -EINVAL;
	if (n >= size)
		return -ENAMETOOLONG;
	memcpy(out, b, n);
	out[n] = '\0';
	return 0;
}

/* ---------------------------------------------------------------- reader */

struct qg_gguf {
	uint32_t version;
	uint32_t alignment;
	size_t data_offset;
	size_t n_kv, n_tensors;
	struct qg_gguf_kv *kv;
	struct qg_gguf_tensor *tensors;
	size_t cap_kv, cap_tensors;
	struct qg_gguf_tensor **by_name;	/* sorted by name */
	struct chunk *strings;			/* every key, name and string value, NUL-terminated */
};

/* A block of the string pool; copies never move, so pointers into it stay valid. */
struct chunk {
	struct chunk *next;
	size_t used, cap;
	char data[];
};

/* A position in the file; every read checks the bytes left. */
struct cursor {
	const unsigned char *buf;
	size_t len, pos;
	char *err;
	size_t errlen;
	char what[160];		/* the field being read, for errors */
};

__attribute__((format(printf, 2, 3)))
static int fail(struct cursor *c, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (!c->errlen)
		return -EINVAL;
	if (c->what[0])
		n = snprintf(c->err, c->errlen, "%s: ", c->what);
	if (n < 0 || (size_t)n >= c->errlen)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

__attribute__((format(printf, 2, 3)))
static void field(struct cursor *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->what, sizeof c->what, fmt, ap);
	va_end(ap);
}

static size_t left(const struct cursor *c)
{
	return c->len - c->pos;
}

/* Read N bytes of NAME (for the error) into OUT, little-endian. */
static int rd_le(struct cursor *c, const char *name, unsigned n, uint64_t *out)
{
	uint64_t v = 0;

	if (left(c) < n)
		return fail(c, "%s at offset %zu: the file ends (%u bytes needed, %zu left)", name, c->pos, n,
			    left(c));
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)c->buf[c->pos + i] << (8 * i);
	c->pos += n;
	*out = v;
	return 0;
}

static int rd_u32(struct cursor *c, const char *name, uint32_t *out)
{
	uint64_t v = 0;
	int r = rd_le(c, name, 4, &v);

	*out = (uint32_t)v;
	return r;
}

static int rd_u64(struct cursor *c, const char *name, uint64_t *out)
{
	return rd_le(c, name, 8, out);
}

/*
 * Keep a NUL-terminated copy of LEN bytes at P in G's string pool, or NULL
 * when out of memory.  The pool grows with what was read, never ahead of it.
 */
static const char *keep(struct qg_gguf *g, const unsigned char *p, size_t len)
{
	struct chunk *k = g->strings;
	char *s;

	if (!k || k->cap - k->used < len + 1) {
		size_t cap = len + 1 > 65536 ? len + 1 : 65536;
		k = malloc(sizeof *k + cap);
		if (!k)
			return NULL;
		k->next = g->strings;
		k->used = 0;
		k->cap = cap;
		g->strings = k;
	}
	s = k->data + k->used;
	memcpy(s, p, len);
	s[len] = '\0';
	k->used += len + 1;
	return s;
}

/*
 * Make room for element I of an array of N (*CAP allocated) of SIZE bytes
 * each.  The array grows with what was read, so a count that the file
 * does not back costs no memory.
 */
static int reserve(void **array, size_t *cap, size_t i, size_t size)
{
	if (i < *cap)
		return 0;
	size_t n = *cap ? 2 * *cap : 16;
	void *p = realloc(*array, n * size);
	if (!p)
		return -ENOMEM;
	memset((char *)p + *cap * size, 0, (n - *cap) * size);
	*array = p;
	*cap = n;
	return 0;
}

/*
 * Read a string: its length (checked against the bytes left) and its
 * bytes, which may hold no NUL; a copy into G's pool when G is not NULL.
 * IS_NAME: a key or a tensor name, which is not empty and holds no control
 * byte or DEL (names are printed and quoted in messages; values are not
 * read as names, and whoever prints them escapes them).
 */
static int rd_string(struct cursor *c, struct qg_gguf *g, const char *name, int is_name, const char **out,
		     uint64_t *out_len)
{
	uint64_t len = 0;
	size_t at = c->pos;
	int r = rd_u64(c, name, &len);

	if (r)
		return r;
	if (len > left(c))
		return fail(c, "%s length at offset %zu: %llu bytes, but only %zu are left", name, at,
			    (unsigned long long)len, left(c));
	if (!len && is_name)
		return fail(c, "%s at offset %zu: empty", name, at);
	if (memchr(c->buf + c->pos, '\0', (size_t)len))
		return fail(c, "%s at offset %zu: holds a NUL byte", name, at);
	for (size_t i = 0; is_name && i < (size_t)len; i++) {
		unsigned char b = c->buf[c->pos + i];
		if (b < 0x20 || b == 0x7f)
			return fail(c, "%s at offset %zu: byte 0x%02x at offset %zu is a control character", name, at,
				    b, c->pos + i);
	}
	if (g && out && !(*out = keep(g, c->buf + c->pos, (size_t)len)))
		return -ENOMEM;
	if (out_len)
		*out_len = len;
	c->pos += (size_t)len;
	return 0;
}

/* Read one scalar of fixed-size type VT into KV's value. */
static int rd_scalar(struct cursor *c, uint32_t vt, struct qg_gguf_kv *kv)
{
	uint64_t v = 0;
	int r = rd_le(c, "value", vtype_bytes[vt], &v);

	if (r)
		return r;
	switch (vt) {
	case QG_GGUF_I8:
		kv->v.i = (int8_t)v;
		break;
	case QG_GGUF_I16:
		kv->v.i = (int16_t)v;
		break;
	case QG_GGUF_I32:
		kv->v.i = (int32_t)v;
		break;
	case QG_GGUF_I64:
		kv->v.i = (int64_t)v;
		break;
	case QG_GGUF_F32: {
		uint32_t u = (uint32_t)v;
		float f;
		memcpy(&f, &u, sizeof f);
		kv->v.f = f;
		break;
	}
	case QG_GGUF_F64:
		memcpy(&kv->v.f, &v, sizeof kv->v.f);
		break;
	case QG_GGUF_BOOL:
		if (v > 1)
			return fail(c, "bool value at offset %zu: %llu is neither 0 nor 1", c->pos - 1,
				    (unsigned long long)v);
		kv->v.u = v;
		break;
	default:
		kv->v.u = v;
	}
	return 0;
}

/* Read the value of KV, whose type has been read. */
static int rd_value(struct cursor *c, struct qg_gguf *g, struct qg_gguf_kv *kv)
{
	size_t at = c->pos;
	int r;

	if (kv->type == QG_GGUF_STRING)
		return rd_string(c, g, "string value", 0, &kv->str, &kv->str_len);
	if (kv->type != QG_GGUF_ARRAY)
		return rd_scalar(c, kv->type, kv);

	if ((r = rd_u32(c, "array element type", &kv->array_type)))
		return r;
	if (kv->array_type >= QG_GGUF_VTYPE_COUNT)
		return fail(c, "array element type at offset %zu: %u is not a value type", at, kv->array_type);
	if (kv->array_type == QG_GGUF_ARRAY)
		return fail(c, "array element type at offset %zu: arrays of arrays are not read", at);
	at = c->pos;
	if ((r = rd_u64(c, "array length", &kv->array_n)))
		return r;
	/* the smallest element is one byte (or an 8-byte string length) */
	uint64_t min = kv->array_type == QG_GGUF_STRING ? 8 : vtype_bytes[kv->array_type];
	if (kv->array_n > left(c) / min)
		return fail(c, "array length at offset %zu: %llu elements of %s cannot fit in the %zu bytes left", at,
			    (unsigned long long)kv->array_n, vtype_names[kv->array_type], left(c));
	kv->array_data = c->buf + c->pos;
	if (kv->array_type != QG_GGUF_STRING) {
		size_t n = (size_t)kv->array_n * min;
		if (kv->array_type == QG_GGUF_BOOL) {
			for (size_t i = 0; i < n; i++)
				if (c->buf[c->pos + i] > 1)
					return fail(c, "bool element %zu at offset %zu: %u is neither 0 nor 1", i,
						    c->pos + i, c->buf[c->pos + i]);
		}
		c->pos += n;
		return 0;
	}
	for (uint64_t i = 0; i < kv->array_n; i++) {
		size_t el = c->pos;
		if (rd_string(c, NULL, "string element", 0, NULL, NULL)) {
			/* read it again to name its index (only on the way out: token arrays are long) */
			char name[48];
			snprintf(name, sizeof name, "string element %llu", (unsigned long long)i);
			c->pos = el;
			return rd_string(c, NULL, name, 0, NULL, NULL);
		}
	}
	return 0;
}

/* Compare two tensors by name, for the sorted index. */
static int cmp_name(const void *a, const void *b)
{
	const struct qg_gguf_tensor *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

/* Compare two tensors by data offset. */
static int cmp_offset(const void *a, const void *b)
{
	const struct qg_gguf_tensor *const *x = a, *const *y = b;

	return (*x)->offset < (*y)->offset ? -1 : (*x)->offset > (*y)->offset;
}

/* Compare two pairs by key. */
static int cmp_key(const void *a, const void *b)
{
	const struct qg_gguf_kv *const *x = a, *const *y = b;

	return strcmp((*x)->key, (*y)->key);
}

/* Read the metadata pairs; general.alignment sets G's alignment. */
static int rd_kvs(struct cursor *c, struct qg_gguf *g)
{
	int r;

	for (size_t i = 0; i < g->n_kv; i++) {
		if ((r = reserve((void **)&g->kv, &g->cap_kv, i, sizeof *g->kv)))
			return r;
		struct qg_gguf_kv *kv = &g->kv[i];
		kv->file_offset = c->pos;
		field(c, "key-value %zu", i);
		if ((r = rd_string(c, g, "key", 1, &kv->key, NULL)))
			return r;
		field(c, "key-value %zu (%.80s)", i, kv->key);
		size_t at = c->pos;
		if ((r = rd_u32(c, "value type", &kv->type)))
			return r;
		if (kv->type >= QG_GGUF_VTYPE_COUNT)
			return fail(c, "value type at offset %zu: %u is not a value type", at, kv->type);
		if ((r = rd_value(c, g, kv)))
			return r;
		if (strcmp(kv->key, "general.alignment") == 0) {
			if (kv->type != QG_GGUF_U32)
				return fail(c, "at offset %zu: the alignment is a %s, not a u32", at,
					    vtype_names[kv->type]);
			if (kv->v.u == 0 || (kv->v.u & (kv->v.u - 1)))
				return fail(c, "value at offset %zu: %llu is not a power of two", at + 4,
					    (unsigned long long)kv->v.u);
			g->alignment = (uint32_t)kv->v.u;
		}
	}
	c->what[0] = '\0';

	/* no key twice */
	struct qg_gguf_kv **sorted = malloc((g->n_kv ? g->n_kv : 1) * sizeof *sorted);
	if (!sorted)
		return -ENOMEM;
	for (size_t i = 0; i < g->n_kv; i++)
		sorted[i] = &g->kv[i];
	qsort(sorted, g->n_kv, sizeof *sorted, cmp_key);
	r = 0;
	for (size_t i = 1; i < g->n_kv && !r; i++)
		if (strcmp(sorted[i - 1]->key, sorted[i]->key) == 0) {
			const struct qg_gguf_kv *a = sorted[i - 1], *b = sorted[i];
			if (a->file_offset > b->file_offset) {
				a = sorted[i];
				b = sorted[i - 1];
			}
			r = fail(c, "key-value at offset %zu: key %.80s already given at offset %zu", b->file_offset,
				 b->key, a->file_offset);
		}
	free(sorted);
	return r;
}

/* Read tensor info I: its name, shape, type and offset, with its size. */
static int rd_tensor_info(struct cursor *c, struct qg_gguf *g, size_t i)
{
	struct qg_gguf_tensor *t;
	uint32_t bv, bb;
	size_t at;
	int r;

	if ((r = reserve((void **)&g->tensors, &g->cap_tensors, i, sizeof *g->tensors)))
		return r;
	t = &g->tensors[i];
	t->file_offset = c->pos;
	field(c, "tensor %zu", i);
	if ((r = rd_string(c, g, "name", 1, &t->name, NULL)))
		return r;
	field(c, "tensor %zu (%.80s)", i, t->name);
	at = c->pos;
	if ((r = rd_u32(c, "n_dims", &t->n_dims)))
		return r;
	if (t->n_dims < 1 || t->n_dims > QG_GGUF_MAX_DIMS)
		return fail(c, "n_dims at offset %zu: %u is not 1 to %d", at, t->n_dims, QG_GGUF_MAX_DIMS);
	for (unsigned d = 0; d < QG_GGUF_MAX_DIMS; d++)
		t->ne[d] = 1;
	uint64_t elements = 1;
	for (unsigned d = 0; d < t->n_dims; d++) {
		uint64_t ne = 0;
		char name[32];
		snprintf(name, sizeof name, "dimension %u", d);
		at = c->pos;
		if ((r = rd_u64(c, name, &ne)))
			return r;
		if (ne == 0 || ne > INT64_MAX)
			return fail(c, "dimension %u at offset %zu: %llu is not a size", d, at, (unsigned long long)ne);
		if (elements > INT64_MAX / ne)
			return fail(c, "dimension %u at offset %zu: the element count overflows (%llu x %llu)", d, at,
				    (unsigned long long)elements, (unsigned long long)ne);
		elements *= ne;
		t->ne[d] = (int64_t)ne;
	}
	at = c->pos;
	if ((r = rd_u32(c, "type", &t->type)))
		return r;
	if (qg_ggml_type_size(t->type, &bv, &bb)) {
		if (t->type < QG_GGML_TYPE_LIMIT && ggml_types[t->type].removed)
			fail(c, "type at offset %zu: %u (%s) was removed from ggml", at, t->type,
			     ggml_types[t->type].name);
		else
			fail(c, "type at offset %zu: %u is not a ggml type", at, t->type);
		return -ENOTSUP;
	}
	if ((uint64_t)t->ne[0] % bv)
		return fail(c, "dimension 0 at offset %zu: %lld is not a multiple of %s's %u values per block",
			    t->file_offset + 8 + strlen(t->name) + 4, (long long)t->ne[0], ggml_types[t->type].name, bv);
	/* bytes = ne0 / bv * bb * ne1 * ne2 * ne3, each step checked */
	size_t shape_at = t->file_offset + 8 + strlen(t->name);
	uint64_t bytes = (uint64_t)t->ne[0] / bv;
	if (bytes > UINT64_MAX / bb)
		return fail(c, "shape at offset %zu: the size in bytes overflows", shape_at);
	bytes *= bb;
	for (unsigned d = 1; d < QG_GGUF_MAX_DIMS; d++) {
		if (bytes > UINT64_MAX / (uint64_t)t->ne[d])
			return fail(c, "shape at offset %zu: the size in bytes overflows", shape_at);
		bytes *= (uint64_t)t->ne[d];
	}
	if (bytes > c->len)
		return fail(c, "shape at offset %zu: %llu bytes of data, more than the file's %zu", shape_at,
			    (unsigned long long)bytes, c->len);
	t->bytes = bytes;
	at = c->pos;
	if ((r = rd_u64(c, "offset", &t->offset)))
		return r;
	if (t->offset % g->alignment)
		return fail(c, "offset at offset %zu: %llu is not a multiple of the alignment %u", at,
			    (unsigned long long)t->offset, g->alignment);
	return 0;
}

/* Place the data section and check every tensor's range in it: inside, and no two overlapping. */
static int place_data(struct cursor *c, struct qg_gguf *g)
{
	size_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
	struct qg_gguf_tensor **by_offset;
	int r = 0;

	c->what[0] = '\0';
	if (pad > left(c) && g->n_tensors)
		return fail(c, "data section at offset %zu: the file ends before the alignment to %u", c->pos,
			    g->alignment);
	g->data_offset = c->pos + (pad <= left(c) ? pad : left(c));
	size_t data_len = c->len - g->data_offset;
	for (size_t i = 0; i < g->n_tensors; i++) {
		struct qg_gguf_tensor *t = &g->tensors[i];
		if (t->offset > data_len || t->bytes > data_len - t->offset) {
			field(c, "tensor %zu (%.80s)", i, t->name);
			return fail(c, "offset at offset %zu: data at %llu (%llu bytes) lies outside the data section (%zu bytes at offset %zu)",
				    t->file_offset + 8 + strlen(t->name) + 4 + 8 * (size_t)t->n_dims + 4,
				    (unsigned long long)t->offset, (unsigned long long)t->bytes, data_len,
				    g->data_offset);
		}
		t->data = c->buf + g->data_offset + t->offset;
	}
	c->what[0] = '\0';
	if (!g->n_tensors)
		return 0;
	by_offset = malloc(g->n_tensors * sizeof *by_offset);
	if (!by_offset)
		return -ENOMEM;
	for (size_t i = 0; i < g->n_tensors; i++)
		by_offset[i] = &g->tensors[i];
	qsort(by_offset, g->n_tensors, sizeof *by_offset, cmp_offset);
	for (size_t i = 1; i < g->n_tensors && !r; i++) {
		const struct qg_gguf_tensor *a = by_offset[i - 1], *b = by_offset[i];
		if (b->offset < a->offset + a->bytes) {
			size_t ia = (size_t)(a - g->tensors), ib = (size_t)(b - g->tensors);
			field(c, "tensor %zu (%.80s)", ib, b->name);
			r = fail(c, "offset: data at %llu overlaps tensor %zu (%.80s) at %llu..%llu",
				 (unsigned long long)b->offset, ia, a->name, (unsigned long long)a->offset,
				 (unsigned long long)(a->offset + a->bytes));
		}
	}
	free(by_offset);
	return r;
}

/* Sort the name index and refuse a name given twice. */
static int index_names(struct cursor *c, struct qg_gguf *g)
{
	g->by_name = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *g->by_name);
	if (!g->by_name)
		return -ENOMEM;
	for (size_t i = 0; i < g->n_tensors; i++)
		g->by_name[i] = &g->tensors[i];
	qsort(g->by_name, g->n_tensors, sizeof *g->by_name, cmp_name);
	for (size_t i = 1; i < g->n_tensors; i++)
		if (strcmp(g->by_name[i - 1]->name, g->by_name[i]->name) == 0) {
			const struct qg_gguf_tensor *a = g->by_name[i - 1], *b = g->by_name[i];
			if (a > b) {
				a = g->by_name[i];
				b = g->by_name[i - 1];
			}
			field(c, "tensor %zu (%.80s)", (size_t)(b - g->tensors), b->name);
			return fail(c, "name at offset %zu: already the name of tensor %zu", b->file_offset,
				    (size_t)(a - g->tensors));
		}
	return 0;
}

int qg_gguf_open(const void *buf, size_t len, struct qg_gguf **out, char *err, size_t errlen)
{
	struct cursor c = { .buf = buf, .len = len, .err = err, .errlen = errlen };
	struct qg_gguf *g = NULL;
	uint64_t n_tensors = 0, n_kv = 0, magic = 0;
	int r;

	*out = NULL;
	if (errlen)
		err[0] = '\0';
	if (!buf && len)
		return fail(&c, "no buffer");
	if ((r = rd_le(&c, "magic", 4, &magic)))
		return r;
	if (memcmp(buf, "GGUF", 4) != 0)
		return fail(&c, "magic at offset 0: not \"GGUF\"");
	g = calloc(1, sizeof *g);
	if (!g)
		return -ENOMEM;
	g->alignment = QG_GGUF_DEFAULT_ALIGNMENT;
	if ((r = rd_u32(&c, "version", &g->version)))
		goto out;
	if (g->version != 2 && g->version != 3) {
		if ((g->version & 0xffff) == 0)
			fail(&c, "version at offset 4: %u (byte-swapped %u): big-endian files are not read", g->version,
			     __builtin_bswap32(g->version));
		else
			fail(&c, "version at offset 4: %u is not 2 or 3", g->version);
		r = -ENOTSUP;
		goto out;
	}
	if ((r = rd_u64(&c, "n_tensors", &n_tensors)) || (r = rd_u64(&c, "n_kv", &n_kv)))
		goto out;
	/*
	 * A pair takes at least 14 bytes (key length 8, a 1-byte key, type 4,
	 * a 1-byte value) and a tensor info 33 (name length 8, a 1-byte name,
	 * n_dims 4, one dimension 8, type 4, offset 8): counts beyond what the
	 * file could hold are refused before anything is allocated.
	 */
	if (n_kv > left(&c) / 14) {
		r = fail(&c, "n_kv at offset 16: %llu pairs cannot fit in the %zu bytes left", (unsigned long long)n_kv,
			 left(&c));
		goto out;
	}
	if (n_tensors > (left(&c) - n_kv * 14) / 33) {
		r = fail(&c, "n_tensors at offset 8: %llu tensors cannot fit in the %zu bytes left",
			 (unsigned long long)n_tensors, left(&c));
		goto out;
	}
	g->n_kv = (size_t)n_kv;
	g->n_tensors = (size_t)n_tensors;
	if ((r = rd_kvs(&c, g)))
		goto out;
	for (size_t i = 0; i < g->n_tensors; i++)
		if ((r = rd_tensor_info(&c, g, i)))
			goto out;
	c.what[0] = '\0';
	if ((r = index_names(&c, g)) || (r = place_data(&c, g)))
		goto out;
	*out = g;
	g = NULL;
	r = 0;
out:
	qg_gguf_free(g);
	return r;
}

void qg_gguf_free(struct qg_gguf *g)
{
	if (!g)
		return;
	free(g->kv);
	free(g->tensors);
	free(g->by_name);
	while (g->strings) {
		struct chunk *k = g->strings;
		g->strings = k->next;
		free(k);
	}
	free(g);
}

uint32_t qg_gguf_version(const struct qg_gguf *g)
{
	return g->version;
}

uint32_t qg_gguf_alignment(const struct qg_gguf *g)
{
	return g->alignment;
}

size_t qg_gguf_data_offset(const struct qg_gguf *g)
{
	return g->data_offset;
}

size_t qg_gguf_kv_count(const struct qg_gguf *g)
{
	return g->n_kv;
}

const struct qg_gguf_kv *qg_gguf_kv_at(const struct qg_gguf *g, size_t i)
{
	return i < g->n_kv ? &g->kv[i] : NULL;
}

const struct qg_gguf_kv *qg_gguf_kv_find(const struct qg_gguf *g, const char *key)
{
	for (size_t i = 0; i < g->n_kv; i++)
		if (strcmp(g->kv[i].key, key) == 0)
			return &g->kv[i];
	return NULL;
}

const char *qg_gguf_kv_string(const struct qg_gguf *g, const char *key)
{
	const struct qg_gguf_kv *kv = qg_gguf_kv_find(g, key);

	return kv && kv->type == QG_GGUF_STRING ? kv->str : NULL;
}

int qg_gguf_kv_int(const struct qg_gguf *g, const char *key, int64_t *out)
{
	const struct qg_gguf_kv *kv = qg_gguf_kv_find(g, key);

	if (!kv)
		return -ENOENT;
	switch (kv->type) {
	case QG_GGUF_U8:
	case QG_GGUF_U16:
	case QG_GGUF_U32:
	case QG_GGUF_BOOL:
		*out = (int64_t)kv->v.u;
		return 0;
	case QG_GGUF_U64:
		if (kv->v.u > INT64_MAX)
			return -ERANGE;
		*out = (int64_t)kv->v.u;
		return 0;
	case QG_GGUF_I8:
	case QG_GGUF_I16:
	case QG_GGUF_I32:
	case QG_GGUF_I64:
		*out = kv->v.i;
		return 0;
	default:
		return -EINVAL;
	}
}

size_t qg_gguf_tensor_count(const struct qg_gguf *g)
{
	return g->n_tensors;
}

const struct qg_gguf_tensor *qg_gguf_tensor_at(const struct qg_gguf *g, size_t i)
{
	return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct qg_gguf_tensor *qg_gguf_tensor_find(const struct qg_gguf *g, const char *name)
{
	size_t lo = 0, hi = g->n_tensors;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(g->by_name[mid]->name, name);
		if (c == 0)
			return g->by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}
