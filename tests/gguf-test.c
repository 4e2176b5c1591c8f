/*
 * gguf-test.c - the GGUF reader and writer: a file from the writer reads
 * back exactly; the same file cut at every byte is refused; hand-made
 * hostile files (huge counts and lengths, overflowing shapes, unknown
 * types, offsets outside the data or misaligned or overlapping, names and
 * keys given twice) are refused with an error that names the field and its
 * offset.  Under ASan and UBSan nothing may be read outside the buffer.
 *
 * "gguf-test --write-imatrix FILE COLS" writes an importance matrix as
 * llama-imatrix does (for quantize-tool.sh).
 * "gguf-test --write FILE" writes the valid file to FILE instead (for the
 * shell tests of qgraph-submit inspect).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fp16.h"
#include "gguf.h"
#include "quant.h"
#include "tap.h"
#include "utf8.h"

/* ---------------------------------------------------------------- a valid file */

#define N_T 4
static float f32_data[2][8];
static uint16_t f16_data[3][16];
static unsigned char q8_data[2 * 2 * 34];
static unsigned char q4_data[2 * 4 * 18];
static const char *const tnames[N_T] = { "token_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight",
					 "blk.0.ffn_up.weight" };
static const uint32_t ttypes[N_T] = { QG_GGML_F32, QG_GGML_F16, QG_GGML_Q8_0, QG_GGML_Q4_0 };
static const uint32_t tdims[N_T] = { 2, 2, 2, 3 };
static const int64_t tne[N_T][4] = { { 8, 2, 1, 1 }, { 16, 3, 1, 1 }, { 64, 2, 1, 1 }, { 32, 4, 2, 1 } };
static const void *const tdata[N_T] = { f32_data, f16_data, q8_data, q4_data };
static const size_t tbytes[N_T] = { sizeof f32_data, sizeof f16_data, sizeof q8_data, sizeof q4_data };

static void fill_data(void)
{
	struct tap_rng rng = { 0x66756 };
	float x[8 * 32];

	for (int i = 0; i < 16; i++)
		f32_data[i / 8][i % 8] = tap_randf(&rng, -1, 1);
	for (int i = 0; i < 48; i++)
		f16_data[i / 16][i % 16] = qg_fp32_to_fp16(tap_randf(&rng, -2, 2));
	for (int i = 0; i < 8 * 32; i++)
		x[i] = tap_randf(&rng, -1, 1);
	qg_quantize(QG_TYPE_Q8_0, x, q8_data, sizeof q8_data, 2, 64, NULL);
	qg_quantize(QG_TYPE_Q4_0, x, q4_data, sizeof q4_data, 8, 32, NULL);
}

static int write_valid(uint32_t alignment, void **out, size_t *len)
{
	struct qg_gguf_writer *w = qg_gguf_writer_new(alignment);
	static const char *const toks[] = { "<s>", "</s>", "a", "" };
	int32_t ints[3] = { -1, 0, 70000 };
	int r = 0;

	if (!w)
		return -ENOMEM;
	r |= qg_gguf_writer_kv_string(w, "general.architecture", "llama");
	r |= qg_gguf_writer_kv_string(w, "general.name", "tiny test model");
	r |= qg_gguf_writer_kv_u64(w, "llama.context_length", QG_GGUF_U32, 2048);
	r |= qg_gguf_writer_kv_u64(w, "llama.block_count", QG_GGUF_U64, 1);
	r |= qg_gguf_writer_kv_u64(w, "test.i8", QG_GGUF_I8, (uint64_t)-5);
	r |= qg_gguf_writer_kv_u64(w, "test.bool", QG_GGUF_BOOL, 1);
	r |= qg_gguf_writer_kv_f64(w, "llama.rope.freq_base", QG_GGUF_F32, 10000.0);
	r |= qg_gguf_writer_kv_f64(w, "test.f64", QG_GGUF_F64, -0.125);
	r |= qg_gguf_writer_kv_strings(w, "tokenizer.ggml.tokens", 4, toks);
	r |= qg_gguf_writer_kv_array(w, "test.ints", QG_GGUF_I32, 3, ints);
	for (int i = 0; i < N_T; i++)
		r |= qg_gguf_writer_tensor(w, tnames[i], ttypes[i], tdims[i], tne[i], tdata[i]);
	if (!r)
		r = qg_gguf_writer_finish(w, out, len);
	qg_gguf_writer_free(w);
	return r;
}

static void test_round_trip(uint32_t alignment)
{
	void *buf = NULL;
	size_t len = 0;
	struct qg_gguf *g;
	char err[256] = "";
	int64_t v;

	int w = write_valid(alignment, &buf, &len);
	tap_ok(w == 0, "alignment %u: the writer makes a file of %zu bytes", alignment, len);
	int r = qg_gguf_open(buf, len, &g, err, sizeof err);
	if (!tap_ok(r == 0, "alignment %u: it reads back (%s)", alignment, err)) {
		free(buf);
		return;
	}
	uint32_t want_align = alignment ? alignment : 32;
	tap_ok(qg_gguf_version(g) == 3 && qg_gguf_alignment(g) == want_align &&
		       qg_gguf_kv_count(g) == 10u + (alignment && alignment != 32) &&
		       qg_gguf_tensor_count(g) == N_T && qg_gguf_data_offset(g) % want_align == 0,
	       "alignment %u: version, alignment, counts", alignment);
	const char *arch = qg_gguf_kv_string(g, "general.architecture");
	const struct qg_gguf_kv *toks = qg_gguf_kv_find(g, "tokenizer.ggml.tokens");
	const struct qg_gguf_kv *ints = qg_gguf_kv_find(g, "test.ints");
	const struct qg_gguf_kv *fb = qg_gguf_kv_find(g, "llama.rope.freq_base");
	const struct qg_gguf_kv *f64 = qg_gguf_kv_find(g, "test.f64");
	int ok = arch && strcmp(arch, "llama") == 0 && qg_gguf_kv_int(g, "llama.context_length", &v) == 0 &&
		 v == 2048 && qg_gguf_kv_int(g, "test.i8", &v) == 0 && v == -5 &&
		 qg_gguf_kv_int(g, "test.bool", &v) == 0 && v == 1 &&
		 qg_gguf_kv_int(g, "llama.block_count", &v) == 0 && v == 1 &&
		 qg_gguf_kv_int(g, "general.name", &v) == -EINVAL && qg_gguf_kv_int(g, "nope", &v) == -ENOENT &&
		 toks && toks->type == QG_GGUF_ARRAY && toks->array_type == QG_GGUF_STRING && toks->array_n == 4 &&
		 ints && ints->array_type == QG_GGUF_I32 && ints->array_n == 3 &&
		 memcmp(ints->array_data, (int32_t[]){ -1, 0, 70000 }, 12) == 0 && fb && fb->type == QG_GGUF_F32 &&
		 fb->v.f == 10000.0 && f64 && f64->v.f == -0.125;
	tap_ok(ok, "alignment %u: every key reads back with its value", alignment);
	ok = 1;
	for (int i = 0; i < N_T; i++) {
		const struct qg_gguf_tensor *t = qg_gguf_tensor_at(g, (size_t)i);
		ok &= t && qg_gguf_tensor_find(g, tnames[i]) == t && strcmp(t->name, tnames[i]) == 0 &&
		      t->type == ttypes[i] && t->n_dims == tdims[i] && memcmp(t->ne, tne[i], sizeof t->ne) == 0 &&
		      t->bytes == tbytes[i] && memcmp(t->data, tdata[i], tbytes[i]) == 0 &&
		      (size_t)((const unsigned char *)t->data - (const unsigned char *)buf) % want_align == 0;
	}
	ok &= qg_gguf_tensor_find(g, "missing") == NULL && qg_gguf_tensor_at(g, N_T) == NULL;
	tap_ok(ok, "alignment %u: every tensor reads back: name, type, shape, bytes, aligned data", alignment);
	qg_gguf_free(g);

	/* version 2 has the same layout */
	((unsigned char *)buf)[4] = 2;
	r = qg_gguf_open(buf, len, &g, err, sizeof err);
	tap_ok(r == 0 && qg_gguf_version(g) == 2, "alignment %u: the same file as version 2 reads", alignment);
	qg_gguf_free(g);
	((unsigned char *)buf)[4] = 3;

	/* cut at every byte: refused, with a message, without a fault */
	int all = 1;
	size_t bad = 0;
	for (size_t cut = 0; cut < len; cut++) {
		unsigned char *copy = malloc(cut ? cut : 1);	/* exact size: ASan sees any overread */
		memcpy(copy, buf, cut);
		err[0] = '\0';
		r = qg_gguf_open(copy, cut, &g, err, sizeof err);
		if (r == 0 || !err[0] || g) {
			if (all)
				bad = cut;
			all = 0;
			qg_gguf_free(g);
		}
		free(copy);
	}
	tap_ok(all, "alignment %u: the file cut at each of its %zu bytes is refused with a message (first bad: %zu)",
	       alignment, len, bad);
	free(buf);
}

/* ---------------------------------------------------------------- hand-made files */

struct file {
	unsigned char b[4096];
	size_t len;
};

static void u32(struct file *f, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		f->b[f->len++] = (unsigned char)(v >> (8 * i));
}

static void u64(struct file *f, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		f->b[f->len++] = (unsigned char)(v >> (8 * i));
}

static void str(struct file *f, const char *s)
{
	u64(f, strlen(s));
	memcpy(f->b + f->len, s, strlen(s));
	f->len += strlen(s);
}

static void header(struct file *f, uint64_t n_tensors, uint64_t n_kv)
{
	f->len = 0;
	memcpy(f->b, "GGUF", 4);
	f->len = 4;
	u32(f, 3);
	u64(f, n_tensors);
	u64(f, n_kv);
}

/* A tensor info; returns the offset of its first dimension. */
static size_t tinfo(struct file *f, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
		    uint64_t offset)
{
	str(f, name);
	u32(f, n_dims);
	size_t at = f->len;
	for (uint32_t d = 0; d < n_dims; d++)
		u64(f, ne[d]);
	u32(f, type);
	u64(f, offset);
	return at;
}

/* Pad to 32 and append N bytes of data. */
static void data(struct file *f, size_t n)
{
	while (f->len % 32)
		f->b[f->len++] = 0;
	memset(f->b + f->len, 0x11, n);
	f->len += n;
}

/* Open F (from an exact-size copy); the refusal must be R and its message must hold WANT. */
static void refused(const struct file *f, int r_want, const char *want, const char *what)
{
	unsigned char *copy = malloc(f->len);
	struct qg_gguf *g;
	char err[256] = "";

	memcpy(copy, f->b, f->len);
	int r = qg_gguf_open(copy, f->len, &g, err, sizeof err);
	tap_ok(r == r_want && !g && strstr(err, want), "%s: refused (%d): %s", what, r, err);
	qg_gguf_free(g);
	free(copy);
}

static void test_hostile(void)
{
	struct file f;
	char want[160];
	uint64_t ne2[2] = { 32, 2 };

	header(&f, 0, 0);
	memcpy(f.b, "GGUG", 4);
	refused(&f, -EINVAL, "magic at offset 0", "bad magic");
	header(&f, 0, 0);
	f.b[4] = 1;
	refused(&f, -ENOTSUP, "version at offset 4: 1 is not 2 or 3", "version 1");
	header(&f, 0, 0);
	memcpy(f.b + 4, "\0\0\0\3", 4);
	refused(&f, -ENOTSUP, "big-endian", "a big-endian file");

	header(&f, 0, 1ULL << 60);
	refused(&f, -EINVAL, "n_kv at offset 16", "2^60 pairs");
	header(&f, UINT64_MAX, 0);
	refused(&f, -EINVAL, "n_tensors at offset 8", "2^64-1 tensors");
	header(&f, 0, 1);
	u64(&f, UINT64_MAX);
	u32(&f, QG_GGUF_U8);
	f.b[f.len++] = 0;
	data(&f, 32);
	refused(&f, -EINVAL, "key-value 0: key length at offset 24", "a key 2^64-1 bytes long");

	header(&f, 0, 1);
	str(&f, "a.key");
	u32(&f, QG_GGUF_STRING);
	u64(&f, 1ULL << 40);
	refused(&f, -EINVAL, "key-value 0 (a.key): string value length at offset 41", "a string value 2^40 bytes long");

	header(&f, 0, 1);
	str(&f, "tokens");
	u32(&f, QG_GGUF_ARRAY);
	u32(&f, QG_GGUF_STRING);
	u64(&f, 1ULL << 62);
	refused(&f, -EINVAL, "key-value 0 (tokens): array length at offset 46", "an array of 2^62 strings");

	header(&f, 0, 1);
	str(&f, "tokens");
	u32(&f, QG_GGUF_ARRAY);
	u32(&f, QG_GGUF_STRING);
	u64(&f, 2);
	str(&f, "ok");
	u64(&f, 1000);
	f.b[f.len++] = 'x';
	for (int i = 0; i < 16; i++)
		f.b[f.len++] = 'y';
	refused(&f, -EINVAL, "string element 1 length at offset 64", "a string element longer than the file");

	header(&f, 0, 1);
	str(&f, "nested");
	u32(&f, QG_GGUF_ARRAY);
	u32(&f, QG_GGUF_ARRAY);
	u64(&f, 0);
	refused(&f, -EINVAL, "arrays of arrays", "an array of arrays");

	header(&f, 0, 1);
	str(&f, "k");
	u32(&f, 13);
	u64(&f, 0);
	refused(&f, -EINVAL, "key-value 0 (k): value type at offset 33: 13", "value type 13");

	header(&f, 0, 1);
	str(&f, "k");
	u32(&f, QG_GGUF_BOOL);
	f.b[f.len++] = 2;
	refused(&f, -EINVAL, "bool value at offset 37", "a bool of 2");

	header(&f, 0, 1);
	u64(&f, 3);
	memcpy(f.b + f.len, "a\0b", 3);
	f.len += 3;
	u32(&f, QG_GGUF_U8);
	f.b[f.len++] = 0;
	refused(&f, -EINVAL, "key at offset 24: holds a NUL", "a key with a NUL byte");

	/* names are printed and quoted in errors: a control byte in one is refused, and not quoted */
	header(&f, 0, 1);
	str(&f, "\033]0;PWNED\a\033[2J");
	u32(&f, QG_GGUF_U8);
	f.b[f.len++] = 0;
	refused(&f, -EINVAL, "key at offset 24: byte 0x1b at offset 32 is a control character",
		"a key holding terminal escapes");
	header(&f, 1, 0);
	tinfo(&f, "blk.0\x7f\033[2J", 1, (const uint64_t[]){ 8 }, QG_GGML_F32, 0);
	data(&f, 32);
	refused(&f, -EINVAL, "name at offset 24: byte 0x7f at offset 37 is a control character",
		"a tensor name holding DEL and an escape");

	header(&f, 0, 2);
	str(&f, "dup");
	u32(&f, QG_GGUF_U8);
	f.b[f.len++] = 0;
	str(&f, "dup");
	u32(&f, QG_GGUF_U8);
	f.b[f.len++] = 0;
	refused(&f, -EINVAL, "key-value at offset 40: key dup already given at offset 24", "a key given twice");

	header(&f, 0, 1);
	str(&f, "general.alignment");
	u32(&f, QG_GGUF_U32);
	u32(&f, 48);
	refused(&f, -EINVAL, "48 is not a power of two", "alignment 48");
	header(&f, 0, 1);
	str(&f, "general.alignment");
	u32(&f, QG_GGUF_U64);
	u64(&f, 64);
	refused(&f, -EINVAL, "the alignment is a u64, not a u32", "alignment as a u64");

	/* tensors */
	header(&f, 1, 0);
	size_t at = tinfo(&f, "blk.0.attn_q.weight", 2, (uint64_t[]){ 32, 0 }, QG_GGML_Q4_0, 0);
	data(&f, 64);
	snprintf(want, sizeof want, "tensor 0 (blk.0.attn_q.weight): dimension 1 at offset %zu: 0 is not a size", at + 8);
	refused(&f, -EINVAL, want, "a dimension of 0");

	header(&f, 1, 0);
	at = tinfo(&f, "w", 2, (uint64_t[]){ 1ULL << 32, 1ULL << 32 }, QG_GGML_F32, 0);
	data(&f, 64);
	snprintf(want, sizeof want, "tensor 0 (w): dimension 1 at offset %zu: the element count overflows", at + 8);
	refused(&f, -EINVAL, want, "dimensions whose product overflows int64");
	header(&f, 1, 0);
	at = tinfo(&f, "w", 1, (uint64_t[]){ 1ULL << 63 }, QG_GGML_F32, 0);
	data(&f, 64);
	refused(&f, -EINVAL, "dimension 0 at offset 37", "a dimension of 2^63");
	header(&f, 1, 0);
	tinfo(&f, "w", 2, (uint64_t[]){ 1ULL << 62, 1 }, QG_GGML_F32, 0);
	data(&f, 64);
	refused(&f, -EINVAL, "tensor 0 (w): shape at offset 33: the size in bytes overflows", "a size in bytes that overflows");
	header(&f, 1, 0);
	tinfo(&f, "w", 2, (uint64_t[]){ 1ULL << 20, 1ULL << 20 }, QG_GGML_F32, 0);
	data(&f, 64);
	refused(&f, -EINVAL, "tensor 0 (w): shape at offset 33: 4398046511104 bytes of data, more than the file's",
		"4 TiB of data in a small file");

	header(&f, 1, 0);
	tinfo(&f, "w", 5, (uint64_t[]){ 1, 1, 1, 1, 1 }, QG_GGML_F32, 0);
	refused(&f, -EINVAL, "tensor 0 (w): n_dims at offset 33: 5 is not 1 to 4", "five dimensions");

	header(&f, 1, 0);
	tinfo(&f, "w", 2, ne2, 99, 0);
	data(&f, 64);
	refused(&f, -ENOTSUP, "tensor 0 (w): type at offset 53: 99 is not a ggml type", "type 99");
	header(&f, 1, 0);
	tinfo(&f, "w", 2, ne2, 31, 0);
	data(&f, 64);
	refused(&f, -ENOTSUP, "type at offset 53: 31 (q4_0_4_4) was removed from ggml", "removed type 31");
	header(&f, 1, 0);
	tinfo(&f, "w", 2, ne2, 43, 0);
	data(&f, 64);
	refused(&f, -ENOTSUP, "43 is not a ggml type", "type 43 (one past ggml's last)");

	header(&f, 1, 0);
	tinfo(&f, "w", 2, (uint64_t[]){ 16, 2 }, QG_GGML_Q4_0, 0);
	data(&f, 64);
	refused(&f, -EINVAL, "dimension 0 at offset 37: 16 is not a multiple of q4_0's 32 values per block",
		"a Q4_0 row of 16 values");

	header(&f, 1, 0);
	tinfo(&f, "w", 2, ne2, QG_GGML_Q4_0, 8);
	data(&f, 72);
	refused(&f, -EINVAL, "tensor 0 (w): offset at offset 57: 8 is not a multiple of the alignment 32",
		"a misaligned offset");
	header(&f, 1, 0);
	tinfo(&f, "w", 2, ne2, QG_GGML_Q4_0, 32);
	data(&f, 64);
	refused(&f, -EINVAL, "tensor 0 (w): offset at offset 57: data at 32 (36 bytes) lies outside the data section",
		"data past the end of the file");
	header(&f, 1, 0);
	tinfo(&f, "w", 2, ne2, QG_GGML_Q4_0, 0xffffffffffffffe0ULL);
	data(&f, 64);
	refused(&f, -EINVAL, "lies outside the data section", "an offset near 2^64");

	header(&f, 2, 0);
	tinfo(&f, "a", 2, ne2, QG_GGML_Q4_0, 0);
	tinfo(&f, "b", 2, ne2, QG_GGML_Q4_0, 32);
	data(&f, 128);
	refused(&f, -EINVAL, "tensor 1 (b): offset: data at 32 overlaps tensor 0 (a) at 0..36", "overlapping data");

	header(&f, 2, 0);
	tinfo(&f, "same", 2, ne2, QG_GGML_Q4_0, 0);
	size_t second = f.len;
	tinfo(&f, "same", 2, ne2, QG_GGML_Q4_0, 64);
	data(&f, 128);
	snprintf(want, sizeof want, "tensor 1 (same): name at offset %zu: already the name of tensor 0", second);
	refused(&f, -EINVAL, want, "a tensor name given twice");

	header(&f, 1, 0);
	tinfo(&f, "", 2, ne2, QG_GGML_Q4_0, 0);
	data(&f, 64);
	refused(&f, -EINVAL, "tensor 0: name at offset 24: empty", "an empty tensor name");

	/* a hand-made file that is right reads, so the refusals above are each for their one fault */
	header(&f, 2, 0);
	tinfo(&f, "a", 2, ne2, QG_GGML_Q4_0, 0);
	tinfo(&f, "b", 2, ne2, QG_GGML_Q4_0, 64);
	data(&f, 128);
	struct qg_gguf *g;
	char err[256];
	tap_ok(qg_gguf_open(f.b, f.len, &g, err, sizeof err) == 0 && qg_gguf_tensor_count(g) == 2,
	       "the same hand-made file with its faults removed reads (%s)", err);
	qg_gguf_free(g);
}

static void test_types(void)
{
	static const struct {
		uint32_t id, bv, bb;
		const char *name;
	} known[] = {
		{ 0, 1, 4, "f32" },	  { 1, 1, 2, "f16" },	     { 2, 32, 18, "q4_0" },	{ 3, 32, 20, "q4_1" },
		{ 6, 32, 22, "q5_0" },	  { 7, 32, 24, "q5_1" },     { 8, 32, 34, "q8_0" },	{ 9, 32, 36, "q8_1" },
		{ 10, 256, 84, "q2_K" },  { 11, 256, 110, "q3_K" },  { 12, 256, 144, "q4_K" },	{ 13, 256, 176, "q5_K" },
		{ 14, 256, 210, "q6_K" }, { 15, 256, 292, "q8_K" },  { 16, 256, 66, "iq2_xxs" }, { 17, 256, 74, "iq2_xs" },
		{ 18, 256, 98, "iq3_xxs" }, { 19, 256, 50, "iq1_s" }, { 20, 32, 18, "iq4_nl" }, { 21, 256, 110, "iq3_s" },
		{ 22, 256, 82, "iq2_s" }, { 23, 256, 136, "iq4_xs" }, { 24, 1, 1, "i8" },	{ 25, 1, 2, "i16" },
		{ 26, 1, 4, "i32" },	  { 27, 1, 8, "i64" },	     { 28, 1, 8, "f64" },	{ 29, 256, 56, "iq1_m" },
		{ 30, 1, 2, "bf16" },	  { 34, 256, 54, "tq1_0" },  { 35, 256, 66, "tq2_0" },	{ 39, 32, 17, "mxfp4" },
		{ 40, 64, 36, "nvfp4" },  { 41, 128, 18, "q1_0" },  { 42, 64, 18, "q2_0" },
	};
	int ok = 1, n_known = 0;
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		uint32_t bv, bb;
		ok &= qg_ggml_type_size(known[i].id, &bv, &bb) == 0 && bv == known[i].bv && bb == known[i].bb &&
		      strcmp(qg_ggml_type_name(known[i].id), known[i].name) == 0;
	}
	for (uint32_t id = 0; id < 64; id++)
		n_known += qg_ggml_type_name(id) != NULL;
	tap_ok(ok && n_known == 35, "ggml's %d type ids: names, values and bytes per block", n_known);
	uint32_t bv, bb;
	tap_ok(qg_ggml_type_size(4, &bv, &bb) == -ENOTSUP && qg_ggml_type_size(33, &bv, &bb) == -ENOTSUP &&
		       qg_ggml_type_size(38, &bv, &bb) == -ENOTSUP && qg_ggml_type_size(UINT32_MAX, &bv, &bb) == -ENOTSUP,
	       "removed and unknown ids have no size");
}

static void test_writer_errors(void)
{
	struct qg_gguf_writer *w = qg_gguf_writer_new(0);
	int64_t ne[2] = { 16, 2 };

	tap_ok(qg_gguf_writer_new(48) == NULL, "the writer refuses alignment 48");
	tap_ok(qg_gguf_writer_tensor(w, "w", QG_GGML_Q4_0, 2, ne, q4_data) == -EINVAL,
	       "the writer refuses a Q4_0 row of 16 values");
	ne[0] = 32;
	tap_ok(qg_gguf_writer_tensor(w, "w", QG_GGML_Q4_0, 2, ne, q4_data) == 0 &&
		       qg_gguf_writer_tensor(w, "w", QG_GGML_Q4_0, 2, ne, q4_data) == -EEXIST,
	       "the writer refuses a name twice");
	tap_ok(qg_gguf_writer_tensor(w, "x", 31, 2, ne, q4_data) == -EINVAL &&
		       qg_gguf_writer_kv_u64(w, "s", QG_GGUF_STRING, 0) == -EINVAL,
	       "the writer refuses a removed type and a string as an integer");
	qg_gguf_writer_free(w);
}

/* Write the valid file to PATH, for the shell tests. */
static int write_fixture(const char *path)
{
	void *buf;
	size_t len;
	FILE *f;

	if (write_valid(0, &buf, &len) || !(f = fopen(path, "wb")))
		return 1;
	int bad = fwrite(buf, 1, len, f) != len;
	bad |= fclose(f) != 0;
	free(buf);
	return bad;
}

/*
 * An importance matrix as llama-imatrix writes it, for COLS columns, to
 * PATH: tensor "blk.0.ffn_up.weight" with in_sum2 3 (c + 1) and counts 3
 * (so column c weighs c + 1), and "blk.1.ffn_down.weight" that no
 * activation reached (counts 0).  0 or 1.
 */
static int write_imatrix(const char *path, const char *cols_arg)
{
	long cols = atol(cols_arg);
	struct qg_gguf_writer *w = qg_gguf_writer_new(0);
	float *sum2 = cols > 0 ? malloc((size_t)cols * sizeof *sum2) : NULL;
	float three = 3.0f, zero = 0.0f;
	int64_t ne_sum[2] = { cols, 1 }, ne_count[2] = { 1, 1 };
	void *buf = NULL;
	size_t len = 0;
	int r = !w || !sum2;

	for (long c = 0; !r && c < cols; c++)
		sum2[c] = 3.0f * (float)(c + 1);
	if (!r) {
		r |= qg_gguf_writer_kv_string(w, "general.type", "imatrix");
		r |= qg_gguf_writer_tensor(w, "blk.0.ffn_up.weight.in_sum2", QG_GGML_F32, 2, ne_sum, sum2);
		r |= qg_gguf_writer_tensor(w, "blk.0.ffn_up.weight.counts", QG_GGML_F32, 2, ne_count, &three);
		r |= qg_gguf_writer_tensor(w, "blk.1.ffn_down.weight.in_sum2", QG_GGML_F32, 2, ne_sum, sum2);
		r |= qg_gguf_writer_tensor(w, "blk.1.ffn_down.weight.counts", QG_GGML_F32, 2, ne_count, &zero);
	}
	if (!r)
		r = qg_gguf_writer_finish(w, &buf, &len);
	qg_gguf_writer_free(w);
	free(sum2);
	FILE *f = r ? NULL : fopen(path, "wb");
	if (!f) {
		free(buf);
		return 1;
	}
	int bad = fwrite(buf, 1, len, f) != len;
	bad |= fclose(f) != 0;
	free(buf);
	return bad;
}

/* The model name a file's path gives: the base name without ".gguf", whole or refused. */
static void test_model_name(void)
{
	char buf[16];
	int r;

	r = qg_gguf_model_name("/srv/models/llama-1b.gguf", buf, sizeof buf);
	tap_ok(r == 0 && strcmp(buf, "llama-1b") == 0, "model name of a path: \"%s\" (%d)", r ? "" : buf, r);
	r = qg_gguf_model_name("m.bin", buf, sizeof buf);
	tap_ok(r == 0 && strcmp(buf, "m.bin") == 0, "a name without .gguf is kept whole (%d)", r);
	/* 15 bytes fit the 16 of BUF; 16 would be cut, and are refused instead */
	r = qg_gguf_model_name("dir/abcdefghijklmno.gguf", buf, sizeof buf);
	tap_ok(r == 0 && strlen(buf) == 15, "a name that just fits (%d)", r);
	r = qg_gguf_model_name("dir/abcdefghijklmnop.gguf", buf, sizeof buf);
	tap_ok(r == -ENAMETOOLONG, "a name one byte too long is refused, not cut (%d)", r);
	r = qg_gguf_model_name("dir/.gguf", buf, sizeof buf);
	tap_ok(r == 0 && strcmp(buf, ".gguf") == 0, "\".gguf\" alone is a name, with nothing to take off (%d)", r);
	r = qg_gguf_model_name("dir/", buf, sizeof buf);
	tap_ok(r == -EINVAL, "a directory gives no name (%d)", r);
}

/* Well-formed UTF-8, the rule model names are held to: each case one way or the other. */
static void test_utf8(void)
{
	static const struct { const char *s; bool ok; const char *what; } cases[] = {
		{ "", true, "empty" },
		{ "llama-3.2-1b", true, "ASCII" },
		{ "mod\xc3\xa8le", true, "two bytes (U+00E8)" },
		{ "\xe2\x82\xac", true, "three bytes (U+20AC)" },
		{ "\xf0\x9f\xa6\x99", true, "four bytes (U+1F999)" },
		{ "\xf4\x8f\xbf\xbf", true, "U+10FFFF, the last" },
		{ "\xed\x9f\xbf", true, "U+D7FF, before the surrogates" },
		{ "\xff", false, "0xff" },
		{ "\x80", false, "a lone continuation byte" },
		{ "\xc3", false, "a lead byte at the end" },
		{ "\xe2\x82", false, "three bytes cut short" },
		{ "\xc3(", false, "a lead byte without its continuation" },
		{ "\xc0\xaf", false, "overlong '/' (two bytes)" },
		{ "\xe0\x80\xaf", false, "overlong '/' (three bytes)" },
		{ "\xf0\x80\x80\xaf", false, "overlong '/' (four bytes)" },
		{ "\xed\xa0\x80", false, "a surrogate (U+D800)" },
		{ "\xf4\x90\x80\x80", false, "past U+10FFFF" },
		{ "\xf5\x80\x80\x80", false, "lead byte 0xf5" },
		{ "ok\xe2\x82\xacx\xe2(\xac", false, "a bad continuation after good ones" },
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		tap_ok(qg_utf8_valid(cases[i].s, strlen(cases[i].s)) == cases[i].ok, "UTF-8 %s: %s", cases[i].what,
		       cases[i].ok ? "taken" : "refused");
}

int main(int argc, char **argv)
{
	fill_data();
	if (argc == 3 && strcmp(argv[1], "--write") == 0)
		return write_fixture(argv[2]);
	if (argc == 4 && strcmp(argv[1], "--write-imatrix") == 0)
		return write_imatrix(argv[2], argv[3]);
	test_types();
	test_round_trip(0);
	test_round_trip(64);
	test_hostile();
	test_writer_errors();
	test_model_name();
	test_utf8();
	return tap_done();
}
