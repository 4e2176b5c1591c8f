/*
 * gguf.h - GGUF files (versions 2 and 3), read from memory and written.
 *
 * The reader takes a whole file as a buffer (the caller maps it) and
 * trusts none of it: every count, length, dimension, product, type,
 * offset and the alignment is checked with overflow-safe arithmetic before
 * it is used, nothing is read past the buffer's end, memory is bounded by
 * the buffer's size, and a refusal names the field and its byte offset.
 * Tensor data is not copied: a tensor's data points into the buffer.
 *
 * The layout (little-endian): "GGUF", version u32, n_tensors u64, n_kv u64;
 * n_kv pairs (key string, value type u32, value); n_tensors infos (name
 * string, n_dims u32, ne u64 each, ggml type u32, offset u64); padding to
 * the alignment (general.alignment, default 32); the data section, each
 * tensor at its offset from the section's start.  A string is a u64
 * length and that many bytes; an array is an element type u32, a count u64
 * and the elements.
 *
 * The writer builds such a file in memory, byte-correct, for tests and
 * tools.  Functions return 0 or -errno and never abort.
 */
#ifndef QG_GGUF_H
#define QG_GGUF_H

#include <stddef.h>
#include <stdint.h>

#define QG_GGUF_MAX_DIMS 4
#define QG_GGUF_DEFAULT_ALIGNMENT 32

/* The value types of metadata. */
enum qg_gguf_vtype {
	QG_GGUF_U8 = 0,
	QG_GGUF_I8 = 1,
	QG_GGUF_U16 = 2,
	QG_GGUF_I16 = 3,
	QG_GGUF_U32 = 4,
	QG_GGUF_I32 = 5,
	QG_GGUF_F32 = 6,
	QG_GGUF_BOOL = 7,
	QG_GGUF_STRING = 8,
	QG_GGUF_ARRAY = 9,
	QG_GGUF_U64 = 10,
	QG_GGUF_I64 = 11,
	QG_GGUF_F64 = 12,
	QG_GGUF_VTYPE_COUNT
};

/* ggml's tensor type ids that qgraph reads as they are. */
enum {
	QG_GGML_F32 = 0,
	QG_GGML_F16 = 1,
	QG_GGML_Q4_0 = 2,
	QG_GGML_Q8_0 = 8,
	QG_GGML_Q4_K = 12,
	QG_GGML_Q6_K = 14,
	QG_GGML_TYPE_LIMIT = 43	/* ids are below this (GGML_TYPE_COUNT at the pinned llama.cpp) */
};

/* One metadata pair.  Strings are copies, NUL-terminated, without interior NULs. */
struct qg_gguf_kv {
	const char *key;
	uint32_t type;		/* enum qg_gguf_vtype */
	size_t file_offset;	/* where the pair starts in the file */
	union {			/* scalars: integers widened, bool as 0/1 */
		uint64_t u;
		int64_t i;
		double f;
	} v;
	const char *str;	/* QG_GGUF_STRING: the value */
	uint64_t str_len;
	uint32_t array_type;	/* QG_GGUF_ARRAY: element type (never an array) */
	uint64_t array_n;	/* element count */
	const void *array_data;	/* the first element, in the buffer */
};

/* One tensor.  ne[] beyond n_dims are 1. */
struct qg_gguf_tensor {
	const char *name;
	uint32_t type;		/* a ggml type id, known to qg_ggml_type_name() */
	uint32_t n_dims;
	int64_t ne[QG_GGUF_MAX_DIMS];
	uint64_t offset;	/* in the data section */
	uint64_t bytes;
	const void *data;	/* inside the buffer, aligned to the file's alignment */
	size_t file_offset;	/* where its info starts in the file */
};

struct qg_gguf;

/*
 * Read the GGUF file BUF of LEN bytes.  On success *OUT holds it (free
 * with qg_gguf_free; BUF must outlive it) and 0 is returned; otherwise
 * -EINVAL (a malformed file; ERR says which field at which offset),
 * -ENOTSUP (a version or a tensor type this reader does not know) or
 * -ENOMEM, with ERR (ERRLEN bytes, may be 0) filled in.
 */
int qg_gguf_open(const void *buf, size_t len, struct qg_gguf **out, char *err, size_t errlen);
void qg_gguf_free(struct qg_gguf *g);

uint32_t qg_gguf_version(const struct qg_gguf *g);
uint32_t qg_gguf_alignment(const struct qg_gguf *g);
/* Offset of the data section in the file. */
size_t qg_gguf_data_offset(const struct qg_gguf *g);

size_t qg_gguf_kv_count(const struct qg_gguf *g);
/* Pair I (in file order), or NULL when I is out of range. */
const struct qg_gguf_kv *qg_gguf_kv_at(const struct qg_gguf *g, size_t i);
/* The pair whose key is KEY, or NULL. */
const struct qg_gguf_kv *qg_gguf_kv_find(const struct qg_gguf *g, const char *key);
/* KEY's string value, or NULL when absent or not a string. */
const char *qg_gguf_kv_string(const struct qg_gguf *g, const char *key);
/*
 * KEY's value as an integer in *OUT: 0, -ENOENT when absent, -EINVAL when
 * not an integer type (bool counts), -ERANGE when a u64 exceeds INT64_MAX.
 */
int qg_gguf_kv_int(const struct qg_gguf *g, const char *key, int64_t *out);

size_t qg_gguf_tensor_count(const struct qg_gguf *g);
/* Tensor I (in file order), or NULL when I is out of range. */
const struct qg_gguf_tensor *qg_gguf_tensor_at(const struct qg_gguf *g, size_t i);
/* The tensor named NAME, or NULL. */
const struct qg_gguf_tensor *qg_gguf_tensor_find(const struct qg_gguf *g, const char *name);

/* ggml's name for type id TYPE ("q4_0"), or NULL for an unknown or removed id. */
const char *qg_ggml_type_name(uint32_t type);
/* Values per block and bytes per block of TYPE: 0, or -ENOTSUP for an unknown or removed id. */
int qg_ggml_type_size(uint32_t type, uint32_t *block_values, uint32_t *block_bytes);
/* Bytes of one value of fixed-size value type VTYPE; 0 for string, array and an unknown type. */
size_t qg_gguf_vtype_size(uint32_t vtype);
/* The name of value type VTYPE ("u32", "string"), or NULL. */
const char *qg_gguf_vtype_name(uint32_t vtype);

/*
 * The model name a GGUF file's PATH gives when its loader names none: the
 * file's base name without ".gguf", into OUT (SIZE bytes).  The one rule
 * for the daemon's preload and libqgraph's qgraph_model_load: 0, or
 * -ENAMETOOLONG when it does not fit (never cut short: a cut name could
 * be another model's), -EINVAL for an empty one.
 */
int qg_gguf_model_name(const char *path, char *out, size_t size);

/* ---------------------------------------------------------------- writer */

struct qg_gguf_writer;

/*
 * A writer for a version 3 file whose data is aligned to ALIGNMENT (a power
 * of two; 0 means the default, 32; another value is written as
 * general.alignment).  NULL on allocation failure or a bad ALIGNMENT.
 */
struct qg_gguf_writer *qg_gguf_writer_new(uint32_t alignment);
void qg_gguf_writer_free(struct qg_gguf_writer *w);

/* Append a scalar pair of type VTYPE (not string or array); V holds it as for struct qg_gguf_kv. */
int qg_gguf_writer_kv_u64(struct qg_gguf_writer *w, const char *key, uint32_t vtype, uint64_t v);
int qg_gguf_writer_kv_f64(struct qg_gguf_writer *w, const char *key, uint32_t vtype, double v);
int qg_gguf_writer_kv_string(struct qg_gguf_writer *w, const char *key, const char *value);
/* An array of N elements of the fixed-size type VTYPE, their bytes at ELEMS (little-endian). */
int qg_gguf_writer_kv_array(struct qg_gguf_writer *w, const char *key, uint32_t vtype, uint64_t n,
			    const void *elems);
int qg_gguf_writer_kv_strings(struct qg_gguf_writer *w, const char *key, uint64_t n, const char *const *s);
/*
 * Append a tensor of ggml type TYPE (any known id), N_DIMS dimensions NE,
 * whose bytes (copied) are at DATA.  -EINVAL for a shape the type does not
 * allow, -EEXIST for a name already written.
 */
int qg_gguf_writer_tensor(struct qg_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
			  const int64_t *ne, const void *data);
/* The file: *OUT (free with free()) of *LEN bytes. */
int qg_gguf_writer_finish(struct qg_gguf_writer *w, void **out, size_t *len);

#endif /* QG_GGUF_H */
