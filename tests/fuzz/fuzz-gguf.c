/*
 * fuzz-gguf.c - a GGUF file from anywhere, through the reader.  Whatever
 * the bytes, qg_gguf_open must return (an error with a message, or a file)
 * without touching memory outside the buffer; a file it takes must hold
 * what it promises: every tensor's data inside the buffer and aligned,
 * every tensor found by its name, every key by its key.  Neither an error
 * message nor a key or tensor name (what inspect prints) holds a control
 * byte or DEL.
 *
 * Built two ways: with --enable-fuzzing as a libFuzzer target
 * (tests/fuzz/fuzz-gguf), and always as tests/fuzz-gguf-test, whose main()
 * mutates files from the writer (bit flips, byte values, truncation,
 * counts and lengths set to edge values) for a bounded time; the sanitizer
 * suite runs it under ASan and UBSan.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

static long n_opened;

/* Abort if S holds a control byte or DEL: it would reach a terminal or a log raw. */
static void printable(const char *s)
{
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct qg_gguf *g;
	char err[256];
	volatile unsigned char sink = 0;

	err[0] = '\0';
	if (qg_gguf_open(data, size, &g, err, sizeof err)) {
		if (g || !err[0])
			abort();	/* a refusal leaves nothing and says why */
		printable(err);
		return 0;
	}
	n_opened++;
	for (size_t i = 0; i < qg_gguf_kv_count(g); i++) {
		const struct qg_gguf_kv *kv = qg_gguf_kv_at(g, i);
		if (qg_gguf_kv_find(g, kv->key) != kv)
			abort();
		printable(kv->key);
		if (kv->type == QG_GGUF_STRING && strlen(kv->str) != kv->str_len)
			abort();
	}
	for (size_t i = 0; i < qg_gguf_tensor_count(g); i++) {
		const struct qg_gguf_tensor *t = qg_gguf_tensor_at(g, i);
		const unsigned char *p = t->data;
		if (qg_gguf_tensor_find(g, t->name) != t || p < data || t->bytes > size ||
		    (size_t)(p - data) > size - t->bytes || (size_t)(p - data) % qg_gguf_alignment(g))
			abort();
		printable(t->name);
		sink ^= p[0] ^ p[t->bytes - 1];	/* ASan checks both ends */
	}
	(void)sink;
	qg_gguf_free(g);
	return 0;
}

#ifndef QG_LIBFUZZER
#include <time.h>

#include "../lib/tap.h"

/* A small valid file: metadata of several types and six tensors. */
static int seed(uint32_t alignment, void **out, size_t *len)
{
	struct qg_gguf_writer *w = qg_gguf_writer_new(alignment);
	static const char *const toks[] = { "<s>", "a", "bc" };
	static unsigned char bytes[4 * 34 * 2];
	int64_t ne[6][3] = { { 4, 2, 1 }, { 8, 1, 1 }, { 64, 2, 1 }, { 32, 2, 2 }, { 256, 1, 1 }, { 256, 1, 1 } };
	uint32_t types[6] = { QG_GGML_F32, QG_GGML_F16, QG_GGML_Q8_0, QG_GGML_Q4_0, QG_GGML_Q4_K, QG_GGML_Q6_K };
	int r = 0;

	for (size_t i = 0; i < sizeof bytes; i++)
		bytes[i] = (unsigned char)(i * 7);
	r |= qg_gguf_writer_kv_string(w, "general.architecture", "llama");
	r |= qg_gguf_writer_kv_u64(w, "llama.context_length", QG_GGUF_U32, 128);
	r |= qg_gguf_writer_kv_f64(w, "llama.rope.freq_base", QG_GGUF_F32, 10000);
	r |= qg_gguf_writer_kv_strings(w, "tokenizer.ggml.tokens", 3, toks);
	r |= qg_gguf_writer_kv_array(w, "test.bools", QG_GGUF_BOOL, 3, "\1\0\1");
	for (int i = 0; i < 6; i++) {
		char name[32];
		snprintf(name, sizeof name, "blk.%d.weight", i);
		r |= qg_gguf_writer_tensor(w, name, types[i], 3, ne[i], bytes);
	}
	if (!r)
		r = qg_gguf_writer_finish(w, out, len);
	qg_gguf_writer_free(w);
	return r;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
	static const uint64_t edges[] = { 0, 1, 2, 31, 32, 33, 0x7fffffffULL, 0xffffffffULL, 1ULL << 32,
					  1ULL << 62, INT64_MAX, UINT64_MAX };
	void *base[2];
	size_t blen[2];
	struct tap_rng rng = { 0x6775ffULL };
	double limit = 1.5 + 4.0 * (tap_scale() > 1 ? tap_scale() - 1 : 0), t0 = now();
	long rounds = 0;

	tap_ok(seed(0, &base[0], &blen[0]) == 0 && seed(128, &base[1], &blen[1]) == 0, "the seed files are written");
	LLVMFuzzerTestOneInput(base[0], blen[0]);
	LLVMFuzzerTestOneInput(base[1], blen[1]);
	tap_ok(n_opened == 2, "the seed files read");

	while (now() - t0 < limit) {
		for (int batch = 0; batch < 256; batch++, rounds++) {
			int v = (int)(tap_rand(&rng) & 1);
			size_t len = blen[v];
			unsigned char *buf = malloc(len);
			memcpy(buf, base[v], len);
			switch (tap_rand(&rng) % 4) {
			case 0:	/* bit flips */
				for (int f = 0, n = 1 + (int)(tap_rand(&rng) % 4); f < n; f++)
					buf[tap_rand(&rng) % len] ^= (unsigned char)(1u << (tap_rand(&rng) % 8));
				break;
			case 1:	/* byte values */
				for (int f = 0, n = 1 + (int)(tap_rand(&rng) % 4); f < n; f++)
					buf[tap_rand(&rng) % len] = (unsigned char)tap_rand(&rng);
				break;
			case 2:	/* truncation */
				len = tap_rand(&rng) % len;
				break;
			default: {	/* an edge value over 4 or 8 bytes somewhere in the metadata */
				size_t at = tap_rand(&rng) % (len - 8);
				uint64_t e = edges[tap_rand(&rng) % (sizeof edges / sizeof edges[0])];
				unsigned n = tap_rand(&rng) & 1 ? 8 : 4;
				for (unsigned i = 0; i < n; i++)
					buf[at + i] = (unsigned char)(e >> (8 * i));
			}
			}
			/* an exact-size copy, so ASan sees a read one byte past the end */
			unsigned char *exact = malloc(len ? len : 1);
			memcpy(exact, buf, len);
			free(buf);
			LLVMFuzzerTestOneInput(exact, len);
			free(exact);
		}
	}
	tap_ok(n_opened > 2 && n_opened < rounds, "%ld mutated files went through the reader without a fault (%ld read)",
	       rounds, n_opened - 2);
	free(base[0]);
	free(base[1]);
	return tap_done();
}
#endif
