/*
 * numbering-test.c - the wire layer's one table binds the engine's, the
 * public API's and the wire's numbers of element types and ops: every
 * number the schema defines maps to the engine's item of the same name and
 * back; every public number to the wire's item of the same name; the
 * types that never cross the wire have no wire number; and an error that
 * names an op names the op the wire meant (a TRANSPOSE, numbered as the
 * engine's PERMUTE, was once reported as a permute).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "qgraph.h"
#include "qgraph.pb-c.h"
#include "wire.h"
#include "tap.h"

/* NAME of a schema enum value without its PREFIX, in lower case, in BUF (ggml spells "q4_K"). */
static const char *schema_name(const char *name, const char *prefix, char *buf, size_t len)
{
	size_t n = strlen(prefix), i = 0;

	if (strncmp(name, prefix, n) == 0)
		name += n;
	for (; name[i] && i + 1 < len; i++)
		buf[i] = (char)tolower((unsigned char)name[i]);
	buf[i] = 0;
	return buf;
}

static void types(void)
{
	const ProtobufCEnumDescriptor *d = &qgraph__type__descriptor;
	char want[32];
	int bad = 0;

	for (unsigned i = 0; i < d->n_values; i++) {
		int wire = d->values[i].value, eng = qg_wire_type(wire);
		const char *name = schema_name(d->values[i].name, "TYPE_", want, sizeof want);
		const char *got = eng < 0 ? "(none)" : qg_type_name_any((enum qg_type)eng);
		if (eng < 0 || strcasecmp(got, name) || qg_wire_type_of((enum qg_type)eng) != wire) {
			tap_diag("wire type %d (%s): engine %d (%s)", wire, name, eng, got);
			bad++;
		}
		int pub = qg_wire_public_type(wire);
		const char *pname = pub == (int)QGRAPH_TYPE_I32   ? "i32"
				    : pub == (int)QGRAPH_TYPE_I64 ? "i64"
								  : qgraph_type_name((enum qgraph_type)pub);
		if (pub < 0 || !pname || strcasecmp(pname, name) || qg_wire_type_of_public(pub) != wire ||
		    qg_wire_engine_type_of_public(pub) != eng) {
			tap_diag("wire type %d (%s): public %d (%s)", wire, name, pub, pname ? pname : "(none)");
			bad++;
		}
	}
	tap_ok(bad == 0, "each of the schema's %u types is the engine's and the public API's of its name, both ways",
	       d->n_values);
	tap_ok(qg_wire_type_of_public(QGRAPH_TYPE_Q8_0_4X8) == -EINVAL &&
		       qg_wire_type_of(QG_TYPE_Q8_0_4X8) == -EINVAL && qg_wire_type_of(QG_TYPE_Q8_K) == -EINVAL,
	       "the activation layouts have no wire number (public Q8_0_4X8 is not the wire's Q4_K)");
	tap_ok(qg_wire_type_of_public(QGRAPH_TYPE_Q8_0_4X4) == QGRAPH__TYPE__TYPE_Q8_0_4X4 &&
	       qg_wire_type_of(QG_TYPE_Q8_0_4X4) == QGRAPH__TYPE__TYPE_Q8_0_4X4 &&
	       qg_wire_public_type(QGRAPH__TYPE__TYPE_Q8_0_4X4) == QGRAPH_TYPE_Q8_0_4X4,
	       "the Q8_0 weight layout travels under its own number (public 7 is not the wire's I32)");
	tap_ok(qg_wire_type(99) == -EINVAL && qg_wire_type(-1) == -EINVAL && qg_wire_type_of_public(QGRAPH_TYPE_COUNT) ==
	       -EINVAL && qg_wire_public_type(-1) == -EINVAL, "numbers that name nothing: -EINVAL");
}

static void ops(void)
{
	const ProtobufCEnumDescriptor *d = &qgraph__op__descriptor;
	static const int public_ops[] = {
		QGRAPH_OP_MUL_MAT, QGRAPH_OP_ADD, QGRAPH_OP_MUL, QGRAPH_OP_SCALE, QGRAPH_OP_SILU,
		QGRAPH_OP_GELU, QGRAPH_OP_RMS_NORM, QGRAPH_OP_SOFT_MAX, QGRAPH_OP_CPY, QGRAPH_OP_GET_ROWS,
		QGRAPH_OP_RESHAPE, QGRAPH_OP_VIEW, QGRAPH_OP_TRANSPOSE, QGRAPH_OP_PERMUTE, QGRAPH_OP_ROPE,
		QGRAPH_OP_GLU, QGRAPH_OP_SET_ROWS, QGRAPH_OP_FLASH_ATTN_EXT, QGRAPH_OP_NORM,
	};
	static const char *public_names[] = {
		"mul_mat", "add", "mul", "scale", "silu", "gelu", "rms_norm", "soft_max", "cpy", "get_rows",
		"reshape", "view", "transpose", "permute", "rope", "glu", "set_rows", "flash_attn_ext", "norm",
	};
	char want[32];
	int bad = 0;

	for (unsigned i = 0; i < d->n_values; i++) {
		int wire = d->values[i].value, eng = qg_wire_op(wire);
		const char *name = schema_name(d->values[i].name, "OP_", want, sizeof want);
		const char *got = eng < 0 ? "(none)" : qg_op_name((enum qg_op)eng);
		if (eng < 0 || strcasecmp(got, name) || qg_wire_op_of((enum qg_op)eng) != wire) {
			tap_diag("wire op %d (%s): engine %d (%s)", wire, name, eng, got);
			bad++;
		}
	}
	tap_ok(bad == 0 && d->n_values == QG_OP_COUNT, "each of the schema's %u ops is the engine's of its name, both ways",
	       d->n_values);
	bad = 0;
	for (size_t i = 0; i < sizeof public_ops / sizeof public_ops[0]; i++) {
		int wire = qg_wire_op_of_public(public_ops[i]), eng = qg_wire_op(wire);
		if (wire < 0 || eng < 0 || strcmp(qg_op_name((enum qg_op)eng), public_names[i])) {
			tap_diag("public op %d (%s): wire %d, engine %d", public_ops[i], public_names[i], wire, eng);
			bad++;
		}
	}
	tap_ok(bad == 0, "each public op is the wire's and the engine's of its name");
	tap_ok(qg_wire_op_of_public(0) == -EINVAL && qg_wire_op_of_public(-1) == -EINVAL && qg_wire_op(99) == -EINVAL,
	       "no public op 0 (a leaf is not an op) or -1; no wire op 99");
}

/* A graph of one f32 input and a TRANSPOSE without a source: the error names the transpose. */
static void op_in_errors(void)
{
	static unsigned char arena[4096];
	int64_t ne[2] = { 4, 4 };
	Qgraph__Tensor t[2], *tp[2] = { &t[0], &t[1] };
	Qgraph__Span span = QGRAPH__SPAN__INIT;
	Qgraph__SubmitGraph sg = QGRAPH__SUBMIT_GRAPH__INIT;
	struct qg_wire_env env = { .arena = arena, .arena_bytes = sizeof arena, .max_tensors = 16 };
	struct qg_wire_graph g;
	char err[256];

	for (int i = 0; i < 2; i++) {
		qgraph__tensor__init(&t[i]);
		t[i].n_ne = 2;
		t[i].ne = ne;
	}
	span.bytes = 64;
	t[0].arena = &span;
	t[0].flags = 1;
	t[1].op = QGRAPH__OP__OP_TRANSPOSE;
	sg.n_tensors = 2;
	sg.tensors = tp;
	int r = qg_wire_graph_build(&sg, &env, &g, err, sizeof err);
	tap_ok(r == -EINVAL && strstr(err, "transpose needs 1 sources"), "a transpose without a source: %d \"%s\"", r,
	       err);
}

int main(void)
{
	types();
	ops();
	op_in_errors();
	return tap_done();
}
