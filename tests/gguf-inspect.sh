#!/bin/sh
# gguf-inspect.sh - qgraph-submit inspect on a file from the project's own
# GGUF writer (gguf-test --write): the architecture, every metadata key,
# every tensor with its type, shape and bytes, and the totals per type; a
# file cut short, a file that is not GGUF and a missing file are refused
# with exit status 1 and a message that names the field.  Prints TAP.
set -u
. "$(dirname "$0")/lib/tap.sh"

if [ -n "${QEMU_AARCH64:-}" ]; then
	bin=$top/client/tools/.libs/qgraph-submit
	tool() { ${QG_EXEC:-} -E "LD_LIBRARY_PATH=$top/client/lib/.libs:$top/client/mpi/.libs" "$bin" "$@"; }
	writer() { ${QG_EXEC:-} "$top/tests/gguf-test" "$@"; }
else
	bin=$top/client/tools/qgraph-submit
	tool() { "$bin" "$@"; }
	writer() { "$top/tests/gguf-test" "$@"; }
fi
if [ ! -x "$bin" ] || [ ! -x "$top/tests/gguf-test" ]; then
	skip_all "qgraph-submit or tests/gguf-test not built"
fi

tap_tmpdir gguf

# has PATTERN: the last output holds the line PATTERN (a grep -E expression)
has() {
	grep -Eq -- "$1" "$T/out"
}

writer --write "$T/m.gguf"
ok $? "the writer makes a model file"

tool inspect "$T/m.gguf" >"$T/out" 2>&1
st=$?
ok $st "inspect reads it (exit $st)"
has '^architecture: llama$'
ok $? "the architecture"
has '^format: GGUF version 3, [0-9]+ bytes, alignment 32, data at offset [0-9]+$'
ok $? "the version, size and alignment"
has '^  general.name +string +"tiny test model"$' && has '^  llama.context_length +u32 +2048$' &&
	has '^  llama.rope.freq_base +f32 +10000$' && has '^  test.i8 +i8 +-5$' && has '^  test.bool +bool +true$' &&
	has '^  test.f64 +f64 +-0.125$' && has '^metadata: 10 keys$'
ok $? "every scalar key with its type and value"
has '^  tokenizer.ggml.tokens +array +\[string x 4\]$' && has '^  test.ints +array +\[i32 x 3\]$'
ok $? "arrays as [type x N]"
has '^tensors: 4$' && has '^  token_embd.weight +f32 +8 x 2 +64$' &&
	has '^  blk.0.attn_norm.weight +f16 +16 x 3 +96$' && has '^  blk.0.attn_q.weight +q8_0 +64 x 2 +136$' &&
	has '^  blk.0.ffn_up.weight +q4_0 +32 x 4 x 2 +144$'
ok $? "every tensor: name, type, shape, bytes"
has '^  q4_0 +1 tensors +144 bytes' && has '^  all +4 tensors +440 bytes'
ok $? "totals per type and in all"
[ $n -ne 0 ] && [ $failed -ne 0 ] && sed 's/^/# /' "$T/out"

head -c 300 "$T/m.gguf" >"$T/cut.gguf"
tool inspect "$T/cut.gguf" >"$T/out" 2>&1
st=$?
[ $st -eq 1 ] && has 'cut.gguf: key-value [0-9]+: key at offset [0-9]+: the file ends'
ok $? "a file cut short: exit $st, the field and its offset named"
[ $st -eq 1 ] || sed 's/^/# /' "$T/out"
printf 'not a model' >"$T/text"
tool inspect "$T/text" >"$T/out" 2>&1
st=$?
[ $st -eq 1 ] && has 'magic at offset 0: not "GGUF"'
ok $? "a file that is not GGUF: exit $st"
: >"$T/empty"
tool inspect "$T/empty" >"$T/out" 2>&1
st=$?
[ $st -eq 1 ] && has 'magic at offset 0: the file ends'
ok $? "an empty file: exit $st"
tool inspect "$T/missing.gguf" >"$T/out" 2>&1
st=$?
[ $st -eq 1 ] && has 'missing.gguf: No such file'
ok $? "a missing file: exit $st"
tool inspect >"$T/out" 2>&1
st=$?
[ $st -eq 2 ]
ok $? "no file: usage, exit $st"
if [ -w /dev/full ]; then
	# what inspect prints cannot be written (a full disk): it says so, and fails
	tool inspect "$T/m.gguf" >/dev/full 2>"$T/out"
	st=$?
	[ $st -eq 1 ] && has '^qgraph-submit: writing standard output: No space left on device$'
	ok $? "its output cannot be written (/dev/full): exit $st, and it says why"
else
	skip "its output cannot be written: no /dev/full here"
fi

# the file's own words reach no terminal raw: an architecture holding an
# escape sequence (the same five bytes as "llama") is printed escaped
perl -0777 -pe 's/\x05\x00{7}llama/\x05\x00\x00\x00\x00\x00\x00\x00\x1b]0;X/' "$T/m.gguf" >"$T/esc.gguf"
tool inspect "$T/esc.gguf" >"$T/out" 2>&1
st=$?
[ $st -eq 0 ] && has '^architecture: "\\x1b\]0;X"$' && ! grep -q "$(printf '\033')" "$T/out"
ok $? "an architecture with a control byte is printed escaped (exit $st), no ESC in the output"

tap_done
