#!/bin/sh
# quantize-tool.sh - qgraph-quantize end to end: golden bytes, round trips,
# interleaved layouts against q4_0 + repack, and every error's exit status
# and message.  Prints TAP.
#
# Inputs are made with awk and printf alone (no python, no C helper): awk
# writes each f32's bytes as octal escapes and printf turns them into bytes.
# On a cross build the tool runs under $QG_EXEC (qemu), as tests/qemu-run.sh
# sets it, with the uninstalled libqgraph on its library path.
set -u
. "$(dirname "$0")/lib/tap.sh"

if [ -n "${QEMU_AARCH64:-}" ]; then
	bin=$top/client/tools/.libs/qgraph-quantize
	tool() { ${QG_EXEC:-} -E "LD_LIBRARY_PATH=$top/client/lib/.libs:$top/client/mpi/.libs" "$bin" "$@"; }
else
	bin=$top/client/tools/qgraph-quantize
	tool() { "$bin" "$@"; }
fi
if [ ! -x "$bin" ]; then
	skip_all "$bin not built"
fi

tap_tmpdir quantize


# f32 bytes of awk program output: one value per line on stdin -> binary file $1
mkf32() {
	esc=$(awk '
	function bits(v,   s, e) {
		if (v != v) return 2143289344	# NaN: 0x7fc00000
		if (v == 0) return 0
		s = 0
		if (v < 0) { s = 2147483648; v = -v }
		e = 0
		while (v >= 2) { v /= 2; e++ }
		while (v < 1) { v *= 2; e-- }
		return s + (e + 127) * 8388608 + (v - 1) * 8388608
	}
	{
		b = ($1 == "nan") ? 2143289344 : bits($1 + 0)
		for (k = 0; k < 4; k++) { printf "\\%03o", b % 256; b = int(b / 256) }
	}')
	printf "$esc" >"$1"
}

hex() { od -An -v -tx1 "$1" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; }
size() { wc -c <"$1" | tr -d ' '; }
same() { cmp -s "$1" "$2"; }

# A failing run: exit status $1, stderr matching $2 after the program name.
expect() {
	code=$1 pat=$2 what=$3
	shift 3
	tool "$@" >"$T/out.txt" 2>"$T/err.txt"
	rc=$?
	if [ "$rc" -eq "$code" ] && grep -q "^qgraph-quantize: .*$pat" "$T/err.txt"; then
		ok 0 "$what: exit $code"
	else
		ok 1 "$what: exit $rc, wanted $code; stderr: $(head -n 1 "$T/err.txt")"
	fi
}

# ---------------------------------------------------------------- basics
tool --help >"$T/help" 2>&1
ok $(( $? != 0 )) "--help exits 0"
grep -q '^Usage: qgraph-quantize --type TYPE --rows R --cols C' "$T/help"
ok $? "--help prints the usage"
tool --version >"$T/version" 2>&1
rc=$?
grep -q '^qgraph-quantize (qgraph) [0-9]' "$T/version"
ok $(( $? != 0 || rc != 0 )) "--version: $(cat "$T/version")"

# ---------------------------------------------------------------- golden bytes
awk 'BEGIN { for (j = 0; j < 32; j++) print j }' </dev/null | mkf32 "$T/ramp.f32"
ok $(( $(size "$T/ramp.f32") != 128 )) "awk + printf make a 128-byte f32 file"
tool --type q4_0 --rows 1 --cols 32 "$T/ramp.f32" "$T/ramp.q4"
want="c0 c3 48 48 37 37 37 37 26 26 26 26 15 15 15 15 04 04"
got=$(hex "$T/ramp.q4")
[ "$got" = "$want" ]
ok $? "q4_0 of 0..31 is ggml's block ($got)"
tool --type q8_0 --rows 1 --cols 32 "$T/ramp.f32" "$T/ramp.q8"
want="d0 33 00 04 08 0c 10 14 19 1d 21 25 29 2d 31 35 39 3d 42 46 4a 4e 52 56 5a 5e 62 66 6b 6f 73 77 7b 7f"
got=$(hex "$T/ramp.q8")
[ "$got" = "$want" ]
ok $? "q8_0 of 0..31 is ggml's block"
tool --type f16 --rows 1 --cols 4 "$T/ramp.f32" "$T/x" 2>/dev/null
ok $(( $? != 1 )) "f16 of a 32-value file as 1 x 4 is refused"
awk 'BEGIN { print 1; print -2; print 65504; print 0.5 }' </dev/null | mkf32 "$T/four.f32"
tool --type f16 --rows 1 --cols 4 "$T/four.f32" "$T/four.f16"
got=$(hex "$T/four.f16")
[ "$got" = "00 3c 00 c0 ff 7b 00 38" ]
ok $? "f16 of 1 -2 65504 0.5 ($got)"

# ---------------------------------------------------------------- a matrix
R=16 C=96
awk -v R=$R -v C=$C 'BEGIN { for (i = 0; i < R * C; i++) print ((i * 37) % 61 - 30) / 4 + (i % 89 == 0 ? 40 : 0) }' \
	</dev/null | mkf32 "$T/m.f32"
awk -v C=$C 'BEGIN { for (c = 0; c < C; c++) print (c * 7 % 11) / 4 + (c % 13 == 0 ? 0 : 0.125) }' \
	</dev/null | mkf32 "$T/im.f32"
ok $(( $(size "$T/m.f32") != R * C * 4 )) "$R x $C f32 input"

for t in f32 f16 q8_0 q4_0 q4_0_4x4 q4_0_4x8 q4_0_8x8; do
	case $t in
	f32) want=$((R * C * 4)) ;;
	f16) want=$((R * C * 2)) ;;
	q8_0) want=$((R * C / 32 * 34)) ;;
	*) want=$((R * C / 32 * 18)) ;;
	esac
	tool --type $t --rows $R --cols $C "$T/m.f32" "$T/m.$t"
	rc=$?
	ok $(( rc != 0 || $(size "$T/m.$t") != want )) "quantize to $t: $want bytes"
done
tool --type f32 --rows $R --cols $C "$T/m.f32" "$T/m.copy"
same "$T/m.f32" "$T/m.copy"
ok $? "f32 to f32 copies"

# round trips through f32
tool --dequantize --type f16 --rows $R --cols $C "$T/m.f16" "$T/m.f16.f32"
same "$T/m.f16.f32" "$T/m.f32"
ok $? "f16 -> f32 gives the (quarter-step) input back exactly"
for t in q8_0 q4_0; do
	tool --dequantize --type $t --rows $R --cols $C "$T/m.$t" "$T/m.$t.f32" &&
		tool --type $t --rows $R --cols $C "$T/m.$t.f32" "$T/m.$t.again"
	same "$T/m.$t" "$T/m.$t.again"
	ok $? "$t -> f32 -> $t gives the same bytes"
done

# interleaved layouts: straight == q4_0 then repack; unpack; same values
tool --type q4_0 --rows $R --cols $C --imatrix "$T/im.f32" "$T/m.f32" "$T/mi.q4_0"
ok $? "q4_0 with an imatrix"
cmp -s "$T/mi.q4_0" "$T/m.q4_0"
ok $(( $? == 0 )) "the imatrix changes q4_0's bytes"
for t in q4_0_4x4 q4_0_4x8 q4_0_8x8; do
	tool --repack --from q4_0 --type $t --rows $R --cols $C "$T/m.q4_0" "$T/m.q4_0.$t"
	same "$T/m.$t" "$T/m.q4_0.$t"
	ok $? "$t straight == q4_0 + repack"
	tool --repack --from $t --type q4_0 --rows $R --cols $C "$T/m.$t" "$T/m.$t.q4_0"
	same "$T/m.$t.q4_0" "$T/m.q4_0"
	ok $? "$t unpacks to the same q4_0 bytes"
	tool --dequantize --type $t --rows $R --cols $C "$T/m.$t" "$T/m.$t.f32"
	same "$T/m.$t.f32" "$T/m.q4_0.f32"
	ok $? "$t dequantizes to q4_0's values"
	tool --type $t --rows $R --cols $C --imatrix "$T/im.f32" "$T/m.f32" "$T/mi.$t" &&
		tool --repack --from q4_0 --type $t --rows $R --cols $C "$T/mi.q4_0" "$T/mi.q4_0.$t"
	same "$T/mi.$t" "$T/mi.q4_0.$t"
	ok $? "$t with imatrix straight == q4_0 with imatrix + repack"
done
tool --repack --from q4_0_4x4 --type q4_0_8x8 --rows $R --cols $C "$T/m.q4_0_4x4" "$T/m.44.88"
same "$T/m.44.88" "$T/m.q4_0_8x8"
ok $? "q4_0_4x4 -> q4_0_8x8 equals quantizing to q4_0_8x8"
tool --repack --from q4_0_8x8 --type q4_0_4x8 --rows $R --cols $C "$T/m.q4_0_8x8" "$T/m.88.48"
same "$T/m.88.48" "$T/m.q4_0_4x8"
ok $? "q4_0_8x8 -> q4_0_4x8 equals quantizing to q4_0_4x8"
tool --type q8_0_4x4 --rows $R --cols $C "$T/m.f32" "$T/m.q8_0_4x4" &&
	tool --repack --from q8_0 --type q8_0_4x4 --rows $R --cols $C "$T/m.q8_0" "$T/m.q8.44"
same "$T/m.q8_0_4x4" "$T/m.q8.44"
ok $? "q8_0_4x4 straight == q8_0 + repack"

# streaming: a matrix of more than one chunk (1 MiB of input) equals its
# parts quantized one by one; the data are seq's digits read as f16 (bytes
# 0x0a and 0x30-0x39: finite, varied, reproducible)
BR=264 BC=1024
seq 1 200000 | head -c $((BR * BC * 2)) >"$T/big.f16"
tool --dequantize --type f16 --rows $BR --cols $BC "$T/big.f16" "$T/big.f32"
ok $(( $? != 0 || $(size "$T/big.f32") != BR * BC * 4 )) "a $BR x $BC f16 matrix to f32"
head -c $((128 * BC * 4)) "$T/big.f32" >"$T/big.a.f32"
tail -c $(((BR - 128) * BC * 4)) "$T/big.f32" >"$T/big.b.f32"
awk -v C=$BC 'BEGIN { for (c = 0; c < C; c++) print (c * 5 % 17) / 8 }' </dev/null | mkf32 "$T/big.im"
for t in q4_0 q4_0_8x8 q8_0; do
	set --
	[ $t = q8_0 ] || set -- --imatrix "$T/big.im"
	tool --type $t --rows $BR --cols $BC "$@" "$T/big.f32" "$T/big.$t" &&
		tool --type $t --rows 128 --cols $BC "$@" "$T/big.a.f32" "$T/big.a.$t" &&
		tool --type $t --rows $((BR - 128)) --cols $BC "$@" "$T/big.b.f32" "$T/big.b.$t"
	cat "$T/big.a.$t" "$T/big.b.$t" >"$T/big.ab.$t"
	same "$T/big.$t" "$T/big.ab.$t"
	ok $? "$t${1:+ with imatrix}: $BR rows in two chunks == rows 0-127 and 128-$((BR - 1)) apart"
done
tool --repack --from q4_0 --type q4_0_8x8 --rows $BR --cols $BC "$T/big.q4_0" "$T/big.q4_0.88"
same "$T/big.q4_0.88" "$T/big.q4_0_8x8"
ok $? "q4_0_8x8 with imatrix == q4_0 with imatrix + repack, $BR x $BC"
set --

# --threads: the same bytes for any number of threads, over several chunks
# (64 rows repeated: 12800 x 64, 3.2 MiB of f32, chunks of 1 MiB a thread)
TR=12800 TC=64
awk -v C=$TC 'BEGIN { for (r = 0; r < 64; r++) for (c = 0; c < C; c++) print ((r * 7 + c * 13) % 41 - 20) / 4 }' \
	</dev/null | mkf32 "$T/tile.f32"
i=0
: >"$T/tall.f32"
while [ $i -lt $((TR / 64)) ]; do cat "$T/tile.f32"; i=$((i + 1)); done >"$T/tall.f32"
awk -v C=$TC 'BEGIN { for (c = 0; c < C; c++) print (c % 9) / 2 }' </dev/null | mkf32 "$T/tall.im"
for t in q4_0 q4_0_8x8 q8_0 f16; do
	set --
	case $t in q4_0*) set -- --imatrix "$T/tall.im" ;; esac
	tool --type $t --rows $TR --cols $TC "$@" "$T/tall.f32" "$T/tall.1.$t" &&
		tool --type $t --rows $TR --cols $TC --threads 3 "$@" "$T/tall.f32" "$T/tall.3.$t" &&
		tool --type $t --rows $TR --cols $TC -j 8 "$@" "$T/tall.f32" "$T/tall.8.$t"
	rc=$?
	same "$T/tall.1.$t" "$T/tall.3.$t" && same "$T/tall.1.$t" "$T/tall.8.$t"
	ok $(( rc != 0 || $? != 0 )) "$t${1:+ with imatrix}: --threads 3 and 8 write the bytes of one thread ($TR x $TC)"
done
set --
tool --dequantize --type q4_0_8x8 --rows $TR --cols $TC --threads 4 "$T/tall.1.q4_0_8x8" "$T/tall.4.f32" &&
	tool --dequantize --type q4_0_8x8 --rows $TR --cols $TC "$T/tall.1.q4_0_8x8" "$T/tall.d1.f32"
rc=$?
same "$T/tall.4.f32" "$T/tall.d1.f32"
ok $(( rc != 0 || $? != 0 )) "--dequantize with --threads 4 == one thread"
expect 2 "--threads: at most 256" "--threads 1000" --type q4_0 --rows 8 --cols 32 --threads 1000 "$T/ramp.f32" "$T/x"
expect 2 "--threads: '0' is not a positive integer" "--threads 0" --type q4_0 --rows 8 --cols 32 --threads 0 \
	"$T/ramp.f32" "$T/x"

# progress: on a terminal only (script(1) gives the tool one), never into a pipe or file
tool --type q4_0 --rows $TR --cols $TC "$T/tall.f32" "$T/tall.p" 2>"$T/progress.err"
ok $(( $? != 0 || $(size "$T/progress.err") != 0 )) "no progress when standard error is not a terminal"
if command -v script >/dev/null && [ -z "${QEMU_AARCH64:-}" ]; then
	script -qec "$bin --type q4_0 --rows $TR --cols $TC $T/tall.f32 $T/tall.tty" /dev/null >"$T/tty.out" 2>&1
	grep -q "qgraph-quantize: $TR of $TR rows (100%)" "$T/tty.out"
	ok $? "on a terminal it shows rows done of the total"
	same "$T/tall.tty" "$T/tall.p"
	ok $? "and writes the same bytes"
fi

# llama-imatrix's GGUF output, written by the project's own writer (tests/gguf-test --write-imatrix):
# in_sum2 / counts is the weight of each column
gtop=$top/tests/gguf-test
if [ -x "$gtop" ]; then
	if [ -n "${QEMU_AARCH64:-}" ]; then gwriter() { ${QG_EXEC:-} "$gtop" "$@"; }; else gwriter() { "$gtop" "$@"; }; fi
	gwriter --write-imatrix "$T/im.gguf" $TC
	ok $? "an imatrix GGUF file for $TC columns"
	awk -v C=$TC 'BEGIN { for (c = 0; c < C; c++) print c + 1 }' </dev/null | mkf32 "$T/im.raw"
	head -c $((640 * TC * 4)) "$T/tall.f32" >"$T/short640.f32"
	tool --type q4_0 --rows 640 --cols $TC --imatrix "$T/im.raw" "$T/short640.f32" "$T/ig.raw" &&
		tool --type q4_0 --rows 640 --cols $TC --imatrix "$T/im.gguf" --imatrix-tensor blk.0.ffn_up.weight \
			"$T/short640.f32" "$T/ig.gguf"
	rc=$?
	same "$T/ig.raw" "$T/ig.gguf"
	ok $(( rc != 0 || $? != 0 )) "a GGUF imatrix (in_sum2 / counts) quantizes as the same weights in raw f32"
	tool --type q4_0 --rows 640 --cols $TC --imatrix "$T/im.gguf" --imatrix-tensor blk.1.ffn_down.weight \
		"$T/short640.f32" "$T/ig.zero"
	ok $? "a tensor no activation reached (counts 0) weighs its columns alike"
	expect 1 "im.gguf: 2 tensors have an importance matrix; name one with --imatrix-tensor" \
		"a GGUF imatrix of two tensors without --imatrix-tensor" \
		--type q4_0 --rows 640 --cols $TC --imatrix "$T/im.gguf" "$T/short640.f32" "$T/x"
	expect 1 "im.gguf: no tensor blk.9.attn_q.weight.in_sum2" "--imatrix-tensor naming no tensor" \
		--type q4_0 --rows 640 --cols $TC --imatrix "$T/im.gguf" --imatrix-tensor blk.9.attn_q.weight \
		"$T/short640.f32" "$T/x"
	expect 1 "im.gguf: blk.0.ffn_up.weight.in_sum2 is f32 \[64 1\]; an importance matrix for 32 columns" \
		"a GGUF imatrix for other columns" --type q4_0 --rows 8 --cols 32 --imatrix "$T/im.gguf" \
		--imatrix-tensor blk.0.ffn_up.weight "$T/ramp.f32" "$T/x"
	head -c 100 "$T/im.gguf" >"$T/cut.gguf"
	expect 1 "cut.gguf: " "a GGUF imatrix cut short is refused by the reader" \
		--type q4_0 --rows 8 --cols 32 --imatrix "$T/cut.gguf" "$T/ramp.f32" "$T/x"
	expect 1 "im.raw: --imatrix-tensor goes with a GGUF importance matrix" "--imatrix-tensor with a raw imatrix" \
		--type q4_0 --rows 640 --cols $TC --imatrix "$T/im.raw" --imatrix-tensor x "$T/short640.f32" "$T/x"
fi

# standard input, and a pipe that is too short or too long
tool --type q4_0_8x8 --rows $R --cols $C - "$T/m.stdin" <"$T/m.f32"
same "$T/m.stdin" "$T/m.q4_0_8x8"
ok $? "IN - reads standard input"
head -c 1000 "$T/m.f32" | tool --type q4_0 --rows $R --cols $C - "$T/x" 2>"$T/err.txt"
rc=$?
grep -q '^qgraph-quantize: (standard input): ends after 1000 bytes' "$T/err.txt"
ok $(( $? != 0 || rc != 1 )) "a short pipe: exit 1, says where it ended"
cat "$T/m.f32" "$T/ramp.f32" | tool --type q4_0 --rows $R --cols $C - "$T/x" 2>"$T/err.txt"
rc=$?
grep -q '^qgraph-quantize: (standard input): longer than' "$T/err.txt"
ok $(( $? != 0 || rc != 1 )) "a long pipe: exit 1"

# ---------------------------------------------------------------- K-quants: ggml's bytes
# tests/data/kquant-vectors.bin (tests/make-kquant-vectors.c): 16 bytes of
# header, 4 x 512 f32 weights, 512 f32 activations, then ggml's q4_K (1152
# bytes) and q6_K (1680 bytes) of the weights; at byte 13704 an importance
# matrix (512 f32) and ggml's q4_K and q6_K with it.
vec=${QG_TOP_SRCDIR:-$top/..}/tests/data/kquant-vectors.bin
if [ -r "$vec" ]; then
	dd if="$vec" of="$T/kw.f32" bs=16 skip=1 count=512 2>/dev/null
	dd if="$vec" of="$T/k.q4k" bs=16 skip=641 count=72 2>/dev/null
	dd if="$vec" of="$T/k.q6k" bs=16 skip=713 count=105 2>/dev/null
	for ty in q4_K q6_K; do
		f=$T/k.$(echo $ty | tr K k | tr -d _)
		tool --type $ty --rows 4 --cols 512 "$T/kw.f32" "$T/kw.$ty" >/dev/null 2>&1
		ok $(same "$T/kw.$ty" "$f"; echo $?) "--type $ty: ggml's bytes for the test vectors"
		tool --dequantize --type $ty --rows 4 --cols 512 "$T/kw.$ty" "$T/kd.$ty.f32" >/dev/null 2>&1
		ok $([ "$(size "$T/kd.$ty.f32")" = 8192 ]; echo $?) "--dequantize --type $ty: 4 x 512 f32 back"
	done
	dd if="$vec" of="$T/kim.f32" bs=8 skip=1713 count=256 2>/dev/null
	dd if="$vec" of="$T/kim.q4k" bs=8 skip=1969 count=144 2>/dev/null
	dd if="$vec" of="$T/kim.q6k" bs=8 skip=2113 count=210 2>/dev/null
	for ty in q4_K q6_K; do
		f=$T/kim.$(echo $ty | tr K k | tr -d _)
		tool --type $ty --rows 4 --cols 512 --imatrix "$T/kim.f32" "$T/kw.f32" "$T/kwi.$ty" >/dev/null 2>&1
		ok $(same "$T/kwi.$ty" "$f"; echo $?) "--type $ty --imatrix: ggml's bytes with its quant_weights"
	done
else
	for i in 1 2 3 4 5 6; do skip "$vec not readable"; done
fi

# ---------------------------------------------------------------- bad input: exit 1
expect 1 'cols 48 is not a multiple of 32, which q4_0 needs' "cols 48 for q4_0" \
	--type q4_0 --rows 8 --cols 48 "$T/m.f32" "$T/x"
expect 1 'rows 6 is not a multiple of 4, which q4_0_4x4 needs' "rows 6 for q4_0_4x4" \
	--type q4_0_4x4 --rows 6 --cols 32 "$T/m.f32" "$T/x"
expect 1 'rows 4 is not a multiple of 8, which q4_0_8x8 needs' "rows 4 for q4_0_8x8" \
	--type q4_0_8x8 --rows 4 --cols 32 "$T/m.f32" "$T/x"
expect 1 'rows 12 is not a multiple of 8, which q4_0_8x8 needs' "repack to q4_0_8x8 with rows 12" \
	--repack --from q4_0 --type q4_0_8x8 --rows 12 --cols 32 "$T/m.q4_0" "$T/x"
expect 1 "m.f32: $((R * C * 4)) bytes, but a 32 x $C f32 matrix is $((32 * C * 4)) bytes" "input of the wrong length" \
	--type q4_0 --rows 32 --cols $C "$T/m.f32" "$T/x"
expect 1 "m.q4_0: $((R * C / 32 * 18)) bytes, but a $R x $C q8_0 matrix" "dequantize input of the wrong length" \
	--dequantize --type q8_0 --rows $R --cols $C "$T/m.q4_0" "$T/x"
expect 1 "ramp.f32: 128 bytes, but an importance matrix for $C columns is $((C * 4)) bytes" "imatrix too short" \
	--type q4_0 --rows $R --cols $C --imatrix "$T/ramp.f32" "$T/m.f32" "$T/x"
expect 1 "m.f32: longer than $((C * 4)) bytes, the size of an importance matrix" "imatrix too long" \
	--type q4_0 --rows $R --cols $C --imatrix "$T/m.f32" "$T/m.f32" "$T/x"
awk 'BEGIN { for (c = 0; c < 32; c++) print (c == 7 ? -1 : 1) }' </dev/null | mkf32 "$T/neg.im"
awk 'BEGIN { for (c = 0; c < 32; c++) print (c == 9 ? "nan" : 1) }' </dev/null | mkf32 "$T/nan.im"
expect 1 'neg.im: weight 7 is -1; weights must be finite and non-negative' "imatrix with a negative weight" \
	--type q4_0 --rows 1 --cols 32 --imatrix "$T/neg.im" "$T/ramp.f32" "$T/x"
expect 1 'nan.im: weight 9 is nan; weights must be finite and non-negative' "imatrix with a NaN weight" \
	--type q4_0 --rows 1 --cols 32 --imatrix "$T/nan.im" "$T/ramp.f32" "$T/x"
awk 'BEGIN { for (j = 0; j < 64; j++) print (j == 40 ? "nan" : j) }' </dev/null | mkf32 "$T/nan.f32"
expect 1 'nan.f32: row 1, column 8 is nan; q4_0 cannot represent NaN or infinity' "NaN input to q4_0" \
	--type q4_0 --rows 2 --cols 32 "$T/nan.f32" "$T/x"
expect 1 'row 0, column 40 is nan; q8_0 cannot represent' "NaN input to q8_0" \
	--type q8_0 --rows 1 --cols 64 "$T/nan.f32" "$T/x"
tool --type f32 --rows 1 --cols 64 "$T/nan.f32" "$T/nan.copy"
same "$T/nan.f32" "$T/nan.copy"
ok $? "f32 carries NaN through"
awk 'BEGIN { for (j = 0; j < 32; j++) print (j == 3 ? -600000 : j) }' </dev/null | mkf32 "$T/huge.f32"
expect 1 'row 0, column 3 is -600000; its block.s f16 scale would overflow in q4_0' "6e5 in q4_0" \
	--type q4_0 --rows 1 --cols 32 "$T/huge.f32" "$T/x"
tool --type q8_0 --rows 1 --cols 32 "$T/huge.f32" "$T/huge.q8"
ok $? "6e5 fits q8_0's scale"
expect 1 'nosuch.f32: No such file' "missing input" --type q4_0 --rows 1 --cols 32 "$T/nosuch.f32" "$T/x"
expect 1 'nosuch.im: No such file' "missing imatrix" \
	--type q4_0 --rows 1 --cols 32 --imatrix "$T/nosuch.im" "$T/ramp.f32" "$T/x"

# atomic output: a failed run leaves OUT as it was and no temporary behind
printf 'old\n' >"$T/keep"
tool --type q4_0 --rows 2 --cols 32 "$T/nan.f32" "$T/keep" 2>/dev/null
rc=$?
[ "$rc" -eq 1 ] && [ "$(cat "$T/keep")" = old ] && [ -z "$(ls "$T" | grep '^keep\.')" ]
ok $? "a failed run keeps the old OUT and removes its temporary file"
tool --type q4_0 --rows 1 --cols 32 "$T/ramp.f32" "$T/keep" && same "$T/keep" "$T/ramp.q4" &&
	[ -z "$(ls "$T" | grep '^keep\.')" ]
ok $? "a good run replaces OUT"
expect 1 'nodir/x: cannot create a temporary file beside it: No such file' "OUT in a missing directory" \
	--type q4_0 --rows 1 --cols 32 "$T/ramp.f32" "$T/nodir/x"

# ---------------------------------------------------------------- bad usage: exit 2
expect 2 "--type: unknown type 'q5_k'; types are: f32 f16 q8_0 q4_0 q4_0_4x4" "unknown type" \
	--type q5_k --rows 1 --cols 32 "$T/ramp.f32" "$T/x"
expect 2 "--from: unknown type 'bogus'" "unknown --from type" \
	--repack --from bogus --type q4_0 --rows 1 --cols 32 "$T/ramp.q4" "$T/x"
expect 2 '--type is required' "no --type" --rows 1 --cols 32 "$T/ramp.f32" "$T/x"
expect 2 '--rows and --cols are required' "no --rows" --type q4_0 --cols 32 "$T/ramp.f32" "$T/x"
expect 2 "--rows: 'abc' is not a positive integer" "--rows abc" --type q4_0 --rows abc --cols 32 "$T/ramp.f32" "$T/x"
expect 2 "--cols: '0' is not a positive integer" "--cols 0" --type q4_0 --rows 1 --cols 0 "$T/ramp.f32" "$T/x"
expect 2 "--cols: '-32' is not a positive integer" "--cols -32" --type q4_0 --rows 1 --cols -32 "$T/ramp.f32" "$T/x"
expect 2 "unknown option '--bogus'" "unknown option" --bogus --type q4_0 --rows 1 --cols 32 "$T/ramp.f32" "$T/x"
expect 2 "option '--type' needs an argument" "--type without its argument" --rows 1 --cols 32 --type
expect 2 'expected IN and OUT' "one file only" --type q4_0 --rows 1 --cols 32 "$T/ramp.f32"
expect 2 'too many arguments' "three files" --type q4_0 --rows 1 --cols 32 "$T/ramp.f32" "$T/x" "$T/y"
expect 2 '--repack needs --from TYPE' "--repack without --from" --repack --type q4_0 --rows 1 --cols 32 "$T/ramp.q4" "$T/x"
expect 2 '--from goes with --repack' "--from without --repack" --from q4_0 --type q4_0 --rows 1 --cols 32 "$T/ramp.q4" "$T/x"
expect 2 'cannot repack f32 into q4_0' "repack f32 into q4_0" \
	--repack --from f32 --type q4_0 --rows 1 --cols 32 "$T/ramp.f32" "$T/x"
expect 2 'cannot repack q8_0 into q4_0_4x4' "repack across families" \
	--repack --from q8_0 --type q4_0_4x4 --rows 4 --cols 32 "$T/ramp.f32" "$T/x"
expect 2 '--dequantize and --repack exclude each other' "--dequantize --repack" \
	--dequantize --repack --from q4_0 --type q4_0 --rows 1 --cols 32 "$T/ramp.q4" "$T/x"
expect 2 '--imatrix goes with quantizing only' "--imatrix with --dequantize" \
	--dequantize --imatrix "$T/im.f32" --type q4_0 --rows 1 --cols 32 "$T/ramp.q4" "$T/x"
expect 2 'OUT must be a file' "OUT -" --type q4_0 --rows 1 --cols 32 "$T/ramp.f32" -

tap_done
