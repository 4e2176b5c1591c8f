/*
 * make-llama-gguf - a llama-architecture GGUF model with random weights,
 * for the end-to-end tests and benchmarks that run llama.cpp on it.
 *
 *	make-llama-gguf [--preset tiny|1b] [--dim N] [--ffn N] [--layers N]
 *	                [--heads N] [--kv-heads N] [--vocab N] [--ctx N]
 *	                [--tied] [--ftype q4_0|q4_K_M|q8_0] [--seed S] [--threads N] -o FILE
 *	make-llama-gguf --version
 *
 * The file holds what llama.cpp (at the pinned commit) needs to load and
 * run a "llama" model and nothing else: the hyperparameters under the
 * llama. prefix, each with the exact value type the loader asks for (u32
 * counts, f32 epsilon and rope base); a byte-level SentencePiece
 * vocabulary (tokenizer.ggml.model "llama": <unk>, <s>, </s>, the 256
 * byte tokens <0x00>..<0xFF>, then whole tokens over the alphabet
 * "\u2581a..z" - singles, pairs, triples - up to --vocab, scored in that
 * order); Q4_0 matrices (the token embedding, which llama.cpp reads with
 * GET_ROWS on the CPU; attention q, k, v and output; feed-forward gate, up
 * and down; output.weight unless --tied) and F32 norms.  --ftype q4_K_M
 * writes the mix llama-quantize calls Q4_K_M instead: Q4_K matrices, and
 * Q6_K for the output and, in the layers that mix gives more bits, for
 * attn_v and ffn_down (see more_bits); --ftype q8_0 makes every matrix
 * Q8_0, as llama-quantize's Q8_0 does.
 *
 * The weights come from the seed alone: each row of each tensor draws from
 * its own generator, keyed by the seed, the tensor's name and the row, so
 * the file is the same whatever --threads says.  Values are near-normal
 * (the sum of four uniforms), scaled so that activations keep their size
 * through the layers: 1/sqrt(fan-in) for every matrix, so a normalized
 * input gives outputs of unit size; norms 1 +- 0.1; the output matrix
 * 2/sqrt(dim), so logits spread over a few units and the top token is
 * neither constant nor a coin toss.
 *
 * FILE appears only when complete (written beside it and renamed).
 * Exit status: 0 done, 1 failure (memory, I/O), 2 bad usage.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"
#include "kquant.h"
#include "quant.h"

#define PROG "make-llama-gguf"
/*
 * The generator's version: part of the name under which benchmarks cache
 * a model, so raise it whenever the same options would give other bytes.
 */
#define GEN_VERSION 1

/* Token ids and types as llama.cpp's SentencePiece vocabulary expects them. */
enum { TOK_UNK = 0, TOK_BOS = 1, TOK_EOS = 2, TOK_BYTE0 = 3, TOK_WORD0 = TOK_BYTE0 + 256 };
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_BYTE = 6 };
#define ALPHABET 27		/* U+2581 (SentencePiece's space) and a..z */
#define MAX_WORD 3		/* whole tokens are up to three symbols long */
#define MAX_VOCAB (TOK_WORD0 + ALPHABET + ALPHABET * ALPHABET + ALPHABET * ALPHABET * ALPHABET)
#define QK 32			/* values per Q4_0 block */

enum { FT_Q4_0, FT_Q4_K_M, FT_Q8_0 };
static const char *const ftype_names[] = { "q4_0", "q4_K_M", "q8_0" };

struct shape {
	long dim, ffn, layers, heads, kv_heads, vocab, ctx;
	int tied;
	int ftype;		/* --ftype: FT_Q4_0, FT_Q4_K_M or FT_Q8_0 */
};

static const struct preset {
	const char *name;
	struct shape s;
} presets[] = {
	{ "tiny", { .dim = 256, .ffn = 768, .layers = 4, .heads = 8, .kv_heads = 4, .vocab = 320, .ctx = 512 } },
	{ "1b", { .dim = 2048, .ffn = 8192, .layers = 16, .heads = 32, .kv_heads = 8, .vocab = 4096, .ctx = 2048 } },
};

__attribute__((format(printf, 1, 2), noreturn))
static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry '" PROG " --help' for more information.\n", stderr);
	exit(2);
}

__attribute__((format(printf, 1, 2)))
static void err(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [--preset tiny|1b] [OPTIONS] -o FILE\n"
		"\n"
		"Write a llama-architecture GGUF model with random Q4_0 weights, F32\n"
		"norms and a byte-level vocabulary, which llama.cpp loads and runs.\n"
		"\n"
		"  -p, --preset NAME   tiny: dim 256, ffn 768, 4 layers, 8 heads, 4 kv heads,\n"
		"                        vocab 320, context 512 (the default; about 2 MB)\n"
		"                      1b: dim 2048, ffn 8192, 16 layers, 32 heads, 8 kv heads,\n"
		"                        vocab 4096, context 2048 (about 0.56 GB)\n"
		"      --dim N         embedding length (a multiple of 32)\n"
		"      --ffn N         feed-forward length (a multiple of 32)\n"
		"      --layers N      blocks\n"
		"      --heads N       attention heads (divide dim; head size even)\n"
		"      --kv-heads N    key/value heads (divide heads)\n"
		"      --vocab N       tokens, %d to %d\n"
		"      --ctx N         training context length\n"
		"      --tied          no output.weight: the output reuses the token embedding\n"
		"      --ftype NAME    q4_0 (the default), q4_K_M (Q4_K matrices, some Q6_K;\n"
		"                        dim and ffn multiples of 256) or q8_0\n"
		"  -s, --seed S        the weights' seed (default 1)\n"
		"  -t, --threads N     threads that make the weights (default: the CPUs online)\n"
		"  -o, --output FILE   the model file\n"
		"  -h, --help          print this and exit\n"
		"  -V, --version       print the generator's version and exit\n"
		"\n"
		"The same options and seed give the same file on every machine.\n"
		"Exit status: 0 done, 1 failure, 2 bad usage.\n",
		TOK_WORD0, MAX_VOCAB);
}

/* OPT's value S as an integer in 1..MAX, or exit 2 with a message (OPT without its dashes). */
static long parse_count(const char *opt, const char *s, long max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > max)
		usage_error("--%s: '%s' is not an integer from 1 to %ld", opt, s, max);
	return (long)v;
}

static void check_shape(const struct shape *s)
{
	if (s->dim % QK || s->ffn % QK)
		usage_error("--dim %ld and --ffn %ld must be multiples of %d (Q4_0 blocks)", s->dim, s->ffn, QK);
	if (s->ftype == FT_Q4_K_M && (s->dim % QG_QK_K || s->ffn % QG_QK_K))
		usage_error("--dim %ld and --ffn %ld must be multiples of %d for --ftype q4_K_M (K-quant blocks)",
			    s->dim, s->ffn, QG_QK_K);
	if (s->dim % s->heads || (s->dim / s->heads) % 2)
		usage_error("--heads %ld must divide --dim %ld into heads of an even size (rope turns pairs)",
			    s->heads, s->dim);
	if (s->heads % s->kv_heads)
		usage_error("--kv-heads %ld must divide --heads %ld", s->kv_heads, s->heads);
	if (s->vocab < TOK_WORD0 || s->vocab > MAX_VOCAB)
		usage_error("--vocab %ld is outside %d..%d (the 259 special and byte tokens, then whole ones)",
			    s->vocab, TOK_WORD0, MAX_VOCAB);
}

/* ---------------------------------------------------------------- random */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* FNV-1a of S: a tensor's share of its rows' keys. */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/*
 * N near-normal values of mean MEAN and standard deviation STD into X, from
 * the generator keyed by KEY: each is the sum of the four 16-bit lanes of
 * one 64-bit draw (Irwin-Hall of four, variance 1/3), centred and scaled.
 */
static void fill_normal(float *x, long n, uint64_t key, float mean, float std)
{
	uint64_t st = key;
	const float scale = std * 1.7320508f / 65536.0f;	/* sqrt(3): unit variance */

	for (long i = 0; i < n; i++) {
		uint64_t r = splitmix64(&st);
		uint32_t sum = (uint32_t)(r & 0xffff) + (uint32_t)(r >> 16 & 0xffff) +
			(uint32_t)(r >> 32 & 0xffff) + (uint32_t)(r >> 48);
		x[i] = mean + ((float)sum - 131070.0f) * scale;
	}
}

/* ---------------------------------------------------------------- tensors */

/*
 * One tensor's weights, made by several threads that take chunks of rows
 * in turn: a row's values depend only on the key and the row's index.
 */
struct job {
	long rows, cols;
	float mean, std;
	uint64_t key;		/* the seed mixed with the name */
	enum qg_type type;	/* Q4_0, Q4_K, Q6_K, Q8_0 or F32 */
	unsigned char *dst;
	size_t row_bytes;
	atomic_long next;	/* the first row no thread has taken */
	atomic_int failed;	/* -errno of a failure, 0 */
};

/* Rows a thread takes at a time: bounds its scratch buffer. */
#define ROW_CHUNK 16

static void *job_run(void *arg)
{
	struct job *j = arg;
	float *buf = malloc((size_t)ROW_CHUNK * (size_t)j->cols * sizeof *buf);
	long r;

	if (!buf) {
		atomic_store(&j->failed, -ENOMEM);
		return NULL;
	}
	while (!atomic_load(&j->failed) && (r = atomic_fetch_add(&j->next, ROW_CHUNK)) < j->rows) {
		long n = j->rows - r < ROW_CHUNK ? j->rows - r : ROW_CHUNK;

		for (long i = 0; i < n; i++) {
			uint64_t k = j->key ^ (uint64_t)(r + i) * 0xd1342543de82ef95ULL;
			fill_normal(buf + i * j->cols, j->cols, splitmix64(&k), j->mean, j->std);
		}
		ssize_t w = qg_quantize(j->type, buf, j->dst + (size_t)r * j->row_bytes,
					(size_t)n * j->row_bytes, n, j->cols, NULL);
		if (w < 0) {
			atomic_store(&j->failed, (int)w);
			break;
		}
	}
	free(buf);
	return NULL;
}

#define MAX_THREADS 256

/*
 * Make tensor NAME (ROWS rows of COLS values: ggml's ne = {COLS, ROWS}; 1-D
 * when ROWS is 0) of TYPE, values of MEAN and STD, with up to NTH threads,
 * and add it to W.  0 or -errno.
 */
static int add_tensor(struct qg_gguf_writer *w, const char *name, enum qg_type type, long cols, long rows,
		      float mean, float std, uint64_t seed, int nth)
{
	struct job j = {
		.rows = rows ? rows : 1, .cols = cols, .mean = mean, .std = std,
		.key = seed ^ name_hash(name), .type = type,
	};
	pthread_t tid[MAX_THREADS];
	ssize_t rb = qg_row_size(type, cols);
	int64_t ne[2] = { cols, rows };
	int started = 0, ret;

	if (rb < 0)
		return (int)rb;
	j.row_bytes = (size_t)rb;
	atomic_init(&j.next, 0);
	atomic_init(&j.failed, 0);
	j.dst = malloc(j.row_bytes * (size_t)j.rows);
	if (!j.dst)
		return -ENOMEM;
	/* this thread works too; a thread that does not start leaves its share to the others */
	while (started + 1 < nth && (long)started * ROW_CHUNK < j.rows &&
	       pthread_create(&tid[started], NULL, job_run, &j) == 0)
		started++;
	job_run(&j);
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	ret = atomic_load(&j.failed);
	if (!ret)
		ret = qg_gguf_writer_tensor(w, name,
					    type == QG_TYPE_F32 ? QG_GGML_F32 : type == QG_TYPE_Q4_K ? QG_GGML_Q4_K
					    : type == QG_TYPE_Q6_K ? QG_GGML_Q6_K : type == QG_TYPE_Q8_0 ? QG_GGML_Q8_0
					    : QG_GGML_Q4_0,
					    rows ? 2 : 1, ne, j.dst);
	free(j.dst);
	return ret;
}

/* ---------------------------------------------------------------- vocabulary */

/*
 * Token I's text into BUF (room for 16 bytes): <unk>, <s>, </s>, <0xXX>,
 * then the words over the alphabet, shortest first, each length in
 * lexicographic order.
 */
static void token_text(long i, char *buf)
{
	static const char *const special[] = { "<unk>", "<s>", "</s>" };

	if (i < TOK_BYTE0) {
		strcpy(buf, special[i]);
		return;
	}
	if (i < TOK_WORD0) {
		snprintf(buf, 16, "<0x%02X>", (unsigned)(i - TOK_BYTE0));
		return;
	}
	long k = i - TOK_WORD0, count = ALPHABET;
	int len = 1;
	while (k >= count && len < MAX_WORD) {
		k -= count;
		count *= ALPHABET;
		len++;
	}
	char *p = buf;
	for (long div = count / ALPHABET; len > 0; len--, div /= ALPHABET) {
		int sym = (int)(k / div % ALPHABET);
		if (sym == 0) {
			memcpy(p, "\xe2\x96\x81", 3);	/* U+2581, SentencePiece's space */
			p += 3;
		} else {
			*p++ = (char)('a' + sym - 1);
		}
	}
	*p = '\0';
}

static int add_vocab(struct qg_gguf_writer *w, long n)
{
	char (*text)[16] = calloc((size_t)n, sizeof *text);
	const char **ptr = calloc((size_t)n, sizeof *ptr);
	float *score = calloc((size_t)n, sizeof *score);
	int32_t *type = calloc((size_t)n, sizeof *type);
	int ret = -ENOMEM;

	if (!text || !ptr || !score || !type)
		goto out;
	for (long i = 0; i < n; i++) {
		token_text(i, text[i]);
		ptr[i] = text[i];
		/* SentencePiece merges the pair whose token scores highest first */
		score[i] = i < TOK_WORD0 ? 0.0f : -(float)(i - TOK_WORD0);
		type[i] = i == TOK_UNK ? TT_UNKNOWN : i < TOK_BYTE0 ? TT_CONTROL : i < TOK_WORD0 ? TT_BYTE : TT_NORMAL;
	}
	if ((ret = qg_gguf_writer_kv_string(w, "tokenizer.ggml.model", "llama")) ||
	    (ret = qg_gguf_writer_kv_strings(w, "tokenizer.ggml.tokens", (uint64_t)n, ptr)) ||
	    (ret = qg_gguf_writer_kv_array(w, "tokenizer.ggml.scores", QG_GGUF_F32, (uint64_t)n, score)) ||
	    (ret = qg_gguf_writer_kv_array(w, "tokenizer.ggml.token_type", QG_GGUF_I32, (uint64_t)n, type)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "tokenizer.ggml.bos_token_id", QG_GGUF_U32, TOK_BOS)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "tokenizer.ggml.eos_token_id", QG_GGUF_U32, TOK_EOS)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "tokenizer.ggml.unknown_token_id", QG_GGUF_U32, TOK_UNK)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "tokenizer.ggml.add_bos_token", QG_GGUF_BOOL, 1)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "tokenizer.ggml.add_eos_token", QG_GGUF_BOOL, 0)))
		goto out;
	ret = 0;
out:
	free(text);
	free(ptr);
	free(score);
	free(type);
	return ret;
}

/* ---------------------------------------------------------------- the model */

/* The hyperparameters, typed as llama.cpp's loader reads them (it checks the type). */
static int add_hparams(struct qg_gguf_writer *w, const struct shape *s, const char *preset, uint64_t seed)
{
	char name[128], gen[128];
	int ret;

	snprintf(name, sizeof name, "qgraph random llama %s seed %" PRIu64, preset, seed);
	snprintf(gen, sizeof gen, PROG " %d seed %" PRIu64, GEN_VERSION, seed);
	if ((ret = qg_gguf_writer_kv_string(w, "general.architecture", "llama")) ||
	    (ret = qg_gguf_writer_kv_string(w, "general.name", name)) ||
	    (ret = qg_gguf_writer_kv_string(w, "qgraph.generator", gen)) ||
	    /* llama_ftype: MOSTLY_Q4_0, MOSTLY_Q4_K_M, MOSTLY_Q8_0 */
	    (ret = qg_gguf_writer_kv_u64(w, "general.file_type", QG_GGUF_U32,
					 s->ftype == FT_Q4_K_M ? 15 : s->ftype == FT_Q8_0 ? 7 : 2)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "general.quantization_version", QG_GGUF_U32, 2)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "llama.context_length", QG_GGUF_U32, (uint64_t)s->ctx)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "llama.embedding_length", QG_GGUF_U32, (uint64_t)s->dim)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "llama.block_count", QG_GGUF_U32, (uint64_t)s->layers)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "llama.feed_forward_length", QG_GGUF_U32, (uint64_t)s->ffn)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "llama.attention.head_count", QG_GGUF_U32, (uint64_t)s->heads)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "llama.attention.head_count_kv", QG_GGUF_U32,
					 (uint64_t)s->kv_heads)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "llama.rope.dimension_count", QG_GGUF_U32,
					 (uint64_t)(s->dim / s->heads))) ||
	    (ret = qg_gguf_writer_kv_f64(w, "llama.rope.freq_base", QG_GGUF_F32, 10000.0)) ||
	    (ret = qg_gguf_writer_kv_f64(w, "llama.attention.layer_norm_rms_epsilon", QG_GGUF_F32, 1e-5)) ||
	    (ret = qg_gguf_writer_kv_u64(w, "llama.vocab_size", QG_GGUF_U32, (uint64_t)s->vocab)))
		return ret;
	return add_vocab(w, s->vocab);
}

/*
 * Whether layer L of N gets the larger type in a Q4_K_M mix: the first
 * and the last eighth of the layers, and every third one between.
 */
static bool more_bits(long l, long n)
{
	return l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
}

/* Every tensor llama.cpp's llama model asks for, in the order its converter writes them. */
static int add_weights(struct qg_gguf_writer *w, const struct shape *s, uint64_t seed, int nth)
{
	const long kv_dim = s->dim / s->heads * s->kv_heads;
	const float sd = 1.0f / sqrtf((float)s->dim), sf = 1.0f / sqrtf((float)s->ffn);
	/* llama-quantize's choices: Q4_K_M gives some matrices and the output Q6_K, Q8_0 all Q8_0 */
	const enum qg_type mat = s->ftype == FT_Q4_K_M ? QG_TYPE_Q4_K : s->ftype == FT_Q8_0 ? QG_TYPE_Q8_0 : QG_TYPE_Q4_0;
	const enum qg_type big = s->ftype == FT_Q4_K_M ? QG_TYPE_Q6_K : mat;
	char name[64];
	int ret;

	if ((ret = add_tensor(w, "token_embd.weight", mat, s->dim, s->vocab, 0.0f, 1.0f, seed, nth)))
		return ret;
	for (long l = 0; l < s->layers; l++) {
		static const struct {
			const char *suffix;
			int norm;	/* F32, 1-D */
			int out;	/* rows: 0 dim, 1 kv_dim, 2 ffn */
			int in_ffn;	/* columns: ffn rather than dim */
			int more;	/* the larger type in a more_bits layer */
		} t[] = {
			{ "attn_norm", 1, 0, 0, 0 },
			{ "attn_q", 0, 0, 0, 0 },
			{ "attn_k", 0, 1, 0, 0 },
			{ "attn_v", 0, 1, 0, 1 },
			{ "attn_output", 0, 0, 0, 0 },
			{ "ffn_norm", 1, 0, 0, 0 },
			{ "ffn_gate", 0, 2, 0, 0 },
			{ "ffn_down", 0, 0, 1, 1 },
			{ "ffn_up", 0, 2, 0, 0 },
		};
		for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
			long rows = t[i].out == 0 ? s->dim : t[i].out == 1 ? kv_dim : s->ffn;
			long cols = t[i].in_ffn ? s->ffn : s->dim;

			snprintf(name, sizeof name, "blk.%ld.%s.weight", l, t[i].suffix);
			ret = t[i].norm ? add_tensor(w, name, QG_TYPE_F32, s->dim, 0, 1.0f, 0.1f, seed, nth)
				: add_tensor(w, name, t[i].more && more_bits(l, s->layers) ? big : mat, cols, rows,
					     0.0f, t[i].in_ffn ? sf : sd, seed, nth);
			if (ret)
				return ret;
		}
	}
	if ((ret = add_tensor(w, "output_norm.weight", QG_TYPE_F32, s->dim, 0, 1.0f, 0.1f, seed, nth)))
		return ret;
	if (!s->tied)
		ret = add_tensor(w, "output.weight", big, s->dim, s->vocab, 0.0f, 2.0f * sd, seed, nth);
	return ret;
}

/* Write LEN bytes at BUF to PATH through a temporary file beside it.  0 or -1 after a message. */
static int write_file(const char *path, const void *buf, size_t len)
{
	size_t n = strlen(path) + 16;
	char *tmp = malloc(n);
	FILE *f;
	int fd;

	if (!tmp) {
		err("out of memory");
		return -1;
	}
	snprintf(tmp, n, "%s.tmp.XXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0) {
		err("%s: cannot make a file beside it: %s", path, strerror(errno));
		free(tmp);
		return -1;
	}
	f = fdopen(fd, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fflush(f) || fchmod(fd, 0644)) {
		err("%s: %s", tmp, strerror(errno));
		if (f)
			fclose(f);
		else
			close(fd);
		unlink(tmp);
		free(tmp);
		return -1;
	}
	if (fclose(f) || rename(tmp, path)) {
		err("%s: %s", path, strerror(errno));
		unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	enum { O_DIM = 256, O_FFN, O_LAYERS, O_HEADS, O_KV_HEADS, O_VOCAB, O_CTX, O_TIED, O_FTYPE };
	static const struct option opts[] = {
		{ "preset", required_argument, NULL, 'p' },
		{ "dim", required_argument, NULL, O_DIM },
		{ "ffn", required_argument, NULL, O_FFN },
		{ "layers", required_argument, NULL, O_LAYERS },
		{ "heads", required_argument, NULL, O_HEADS },
		{ "kv-heads", required_argument, NULL, O_KV_HEADS },
		{ "vocab", required_argument, NULL, O_VOCAB },
		{ "ctx", required_argument, NULL, O_CTX },
		{ "tied", no_argument, NULL, O_TIED },
		{ "ftype", required_argument, NULL, O_FTYPE },
		{ "seed", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *preset = "tiny", *out = NULL;
	struct shape s;
	/* what the options set, applied over the preset at the end */
	long set[O_TIED - O_DIM + 1] = { 0 };
	uint64_t seed = 1;
	int ftype = FT_Q4_0;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int nth = online > 0 ? (online < MAX_THREADS ? (int)online : MAX_THREADS) : 1;
	int c;

	while ((c = getopt_long(argc, argv, "p:s:t:o:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			preset = optarg;
			break;
		case O_DIM: case O_FFN: case O_LAYERS: case O_HEADS: case O_KV_HEADS: case O_VOCAB: case O_CTX:
			/* opts[] lists these in enum order, after --preset */
			set[c - O_DIM] = parse_count(opts[c - O_DIM + 1].name, optarg, 1L << 20);
			break;
		case O_TIED:
			set[c - O_DIM] = 1;
			break;
		case O_FTYPE:
			for (ftype = 0; ftype < 3 && strcmp(optarg, ftype_names[ftype]); ftype++)
				;
			if (ftype == 3)
				usage_error("--ftype: '%s' is not q4_0, q4_K_M or q8_0", optarg);
			break;
		case 's': {
			char *end;
			errno = 0;
			unsigned long long v = strtoull(optarg, &end, 0);
			if (errno || end == optarg || *end || optarg[0] == '-')
				usage_error("--seed: '%s' is not an unsigned integer", optarg);
			seed = v;
			break;
		}
		case 't':
			nth = (int)parse_count("threads", optarg, MAX_THREADS);
			break;
		case 'o':
			out = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf(PROG " %d\n", GEN_VERSION);
			return 0;
		default:
			fputs("Try '" PROG " --help' for more information.\n", stderr);
			return 2;
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (!out)
		usage_error("no output file (-o FILE)");
	size_t pi;
	for (pi = 0; pi < sizeof presets / sizeof presets[0]; pi++)
		if (strcmp(presets[pi].name, preset) == 0)
			break;
	if (pi == sizeof presets / sizeof presets[0])
		usage_error("--preset: '%s' is not tiny or 1b", preset);
	s = presets[pi].s;
	long *field[] = { &s.dim, &s.ffn, &s.layers, &s.heads, &s.kv_heads, &s.vocab, &s.ctx };
	for (size_t i = 0; i < sizeof field / sizeof field[0]; i++)
		if (set[i])
			*field[i] = set[i];
	s.tied = set[O_TIED - O_DIM] != 0;
	s.ftype = ftype;
	check_shape(&s);

	double t0 = now();
	struct qg_gguf_writer *w = qg_gguf_writer_new(0);
	void *file = NULL;
	size_t len = 0;
	int ret = w ? 0 : -ENOMEM;

	if (!ret)
		ret = add_hparams(w, &s, preset, seed);
	if (!ret)
		ret = add_weights(w, &s, seed, nth);
	if (!ret)
		ret = qg_gguf_writer_finish(w, &file, &len);
	qg_gguf_writer_free(w);
	if (ret) {
		err("cannot make the model: %s", strerror(-ret));
		return 1;
	}
	if (write_file(out, file, len)) {
		free(file);
		return 1;
	}
	free(file);
	fprintf(stderr, PROG ": %s: llama dim %ld ffn %ld layers %ld heads %ld/%ld vocab %ld%s %s seed %" PRIu64
		": %zu bytes in %.2f s (%d threads)\n", out, s.dim, s.ffn, s.layers, s.heads, s.kv_heads, s.vocab,
		s.tied ? " tied" : "", ftype_names[s.ftype], seed, len, now() - t0, nth);
	return 0;
}
