#!/bin/sh
# ggml-backend.sh - libggml-qgraph.so judged by ggml's own tools: the
# exports the loader wants and nothing else; without a daemon, no device
# and one line saying why; with one, ggml's conformance suite
# (test-backend-ops -o MUL_MAT against the CPU backend) runs every Q4_0,
# Q4_K, Q6_K and Q8_0 x F32 case with contiguous weights on QGRAPH0 and
# passes, as many of each as counted; for every other op the
# backend claims, the suite passes every case it runs there, and runs at
# least as many as the backend took when this was written (a claim lost
# fails); the daemon's statistics show the weights uploaded and the
# interleaved kernels used; then the daemon stops cleanly.  Needs ./configure --with-ggml=DIR; skipped otherwise.  Prints TAP.
set -u
. "$(dirname "$0")/lib/tap.sh"

plugin=$top/client/ggml/.libs/libggml-qgraph.so
bindir=${QG_GGML_BINDIR:-}
if [ ! -f "$plugin" ] || [ -z "$bindir" ]; then
	skip_all "the ggml backend is not built (./configure --with-ggml=DIR)"
fi
if [ -n "${QEMU_AARCH64:-}" ]; then
	skip_all "the ggml backend is tested natively only"
fi
tbo=$bindir/test-backend-ops
submit=$top/client/tools/qgraph-submit

# The MUL_MAT cases by F32 activations in test-backend-ops at the pinned
# llama.cpp (80fb11ac), by weights type: every one the CPU backend runs
# runs on QGRAPH0 (for q4_K and q8_0, 10 of them with permuted weights,
# which test-backend-ops fills through the permuted view); q4_0 with
# contiguous weights only.  The CPU runs none by F16 activations.
mul_mat_types="q4_0:38 q4_K:64 q6_K:13 q8_0:49"
want_cases=0
for tc in $mul_mat_types; do want_cases=$((want_cases + ${tc#*:})); done
want_cases=${QG_GGML_MUL_MAT_CASES:-$want_cases}
# Q8_0 outside a buffer of model weights is read from the arena, not uploaded
want_uploads=$((want_cases - $(echo "$mul_mat_types" | sed -E 's/.*q8_0:([0-9]+).*/\1/')))
n_types=0
for tc in $mul_mat_types; do n_types=$((n_types + 1)); done

# The other ops the backend claims, each with the number of its cases that
# ran on QGRAPH0 at the pinned llama.cpp (counted off test-backend-ops'
# "N/N tests passed"): a smaller count means a claim was lost.  OP:N runs
# every case of OP; OP:N:REGEX only those whose parameters match REGEX
# (FLASH_ATTN_EXT has 800 cases here, minutes of work on two cores: the
# head sizes of llama-class models at decode-sized batches stand for
# them).  GLU ops go by the gate's name.  MUL_MAT here: attention's
# F16 by F32 products (flash attention off), no weights.
claimed_ops="ADD:42 MUL:34 SCALE:1 SILU:4 GELU:4 RMS_NORM:51 SOFT_MAX:42 CPY:117 CONT:24 GET_ROWS:16
ROPE:161 REGLU:8 GEGLU:8 SWIGLU:8 NORM:50 SET_ROWS:86 FLASH_ATTN_EXT:93:hsk=(64|128),.*,nb=(1|3|8),
MUL_MAT:211:type_a=f16,type_b=f32,"
n_ops=0
set -f	# the words hold regular expressions: no file names made of them
for oc in $claimed_ops; do n_ops=$((n_ops + 1)); done

tap_tmpdir ggml

# stat KEY: the daemon's statistic KEY (text form), or nothing
stat() {
	"$submit" --socket "$T/s.sock" stats --all 2>/dev/null | awk -v k="$1" '$1 == k { print $2; exit }'
}

echo "1..$((10 + n_types + n_ops))"

# 1: the loader's two symbols, nothing else
nm -D --defined-only "$plugin" | awk '{print $3}' | sort >"$T/exports"
printf 'ggml_backend_init\nggml_backend_score\n' >"$T/want"
cmp -s "$T/exports" "$T/want"
r=$?
ok $r "libggml-qgraph.so exports ggml_backend_init and ggml_backend_score and nothing else"
[ $r -eq 0 ] && : || show "$T/exports"

# 2-3: no daemon: no device, one line saying why, and the program goes on
export GGML_BACKEND_PATH="$plugin"
if [ -x "$bindir/llama-completion" ]; then
	QGRAPH_SOCKET=$T/none.sock "$bindir/llama-completion" --list-devices >"$T/nodev" 2>&1
	st=$?
	c=$(grep -c '^qgraph: no device: cannot connect to qgraphd: .*none.sock' "$T/nodev")
	ok $([ "$st" -eq 0 ] && [ "$c" -eq 1 ]; echo $?) "without a daemon: no device, said once (exit $st, $c lines)"
	[ "$st" -eq 0 ] && [ "$c" -eq 1 ] || show "$T/nodev"
	ok $(grep -q QGRAPH0 "$T/nodev"; [ $? -ne 0 ]; echo $?) "without a daemon: QGRAPH0 is not listed"
else
	skip "llama-completion not built"
	skip "llama-completion not built"
fi

daemon_start s --pool-size 1G || bail "qgraphd did not start" "$T/s.log"
export QGRAPH_SOCKET="$T/s.sock"

# 4: the device is there
if [ -x "$bindir/llama-completion" ]; then
	"$bindir/llama-completion" --list-devices >"$T/dev" 2>&1
	ok $(grep -q '^  QGRAPH0: qgraphd' "$T/dev"; echo $?) "with a daemon: llama-completion --list-devices lists QGRAPH0"
else
	skip "llama-completion not built"
fi

# 5-6: ggml's conformance suite for MUL_MAT on our device
up0=$(stat weights_uploaded)
il0=$(stat mul_mat_interleaved)
"$tbo" test -b QGRAPH0 -o MUL_MAT >"$T/tbo" 2>&1
st=$?
line=$(grep -E '^ *[0-9]+/[0-9]+ tests passed' "$T/tbo" | head -n 1)
passed=$(echo "$line" | sed -E 's#^ *([0-9]+)/([0-9]+).*#\1#')
total=$(echo "$line" | sed -E 's#^ *([0-9]+)/([0-9]+).*#\2#')
# a case whose graph failed may still compare equal (an empty write): no failure may be said
nf=$(grep -c 'qgraph: graph_compute failed' "$T/tbo")
ok $([ "$st" -eq 0 ] && [ -n "$passed" ] && [ "$passed" = "$total" ] && [ "$nf" -eq 0 ]; echo $?) \
	"test-backend-ops test -b QGRAPH0 -o MUL_MAT: $line, $nf graphs failed (exit $st)"
[ "$st" -eq 0 ] || { grep -E 'FAIL|qgraph:' "$T/tbo" | head -n 20 | sed 's/^/# /'; }
for tc in $mul_mat_types; do
	ty=${tc%%:*}
	want=${tc#*:}
	ran=$(grep -c "MUL_MAT(type_a=$ty,type_b=f32,.*OK" "$T/tbo")
	ok $([ "$ran" -eq "$want" ]; echo $?) \
		"every $ty x F32 case counted ran on QGRAPH0 ($ran of $want)"
done

# nothing else was claimed (F16 by F32, attention's products, is counted below)
f16=$(grep -c 'MUL_MAT(type_a=f16,type_b=f32,.*OK' "$T/tbo")
other=$(grep -E 'MUL_MAT\(type_a=[a-z0-9_]+,.*OK' "$T/tbo" | grep -Evc 'type_a=(q4_0|q4_K|q6_K|q8_0|f16),type_b=f32')
ok $([ "$other" -eq 0 ] && [ "${total:-0}" -eq $((want_cases + f16)) ]; echo $?) \
	"no other MUL_MAT case was taken by QGRAPH0 ($other; suite counted ${total:-0}: $want_cases quantized, $f16 F16)"

# 8..: every other claimed op, its cases on QGRAPH0 all passed, as many as were counted
# (a QGRAPH buffer takes its arena bytes when it is made, and GET_ROWS'
# largest case makes one of 616 MiB: the arena is the daemon's max-arena)
for oc in $claimed_ops; do
	op=${oc%%:*}
	want=${oc#*:}
	filter=
	case $want in *:*) filter=${want#*:}; want=${want%%:*} ;; esac
	# GET_ROWS has a case of 616 MiB: more than the default arena holds
	QGRAPH_GGML_ARENA=1G "$tbo" test -b QGRAPH0 -o "$op" ${filter:+-p "$filter"} >"$T/tbo-$op" 2>&1
	st=$?
	line=$(grep -E '^ *[0-9]+/[0-9]+ tests passed' "$T/tbo-$op" | head -n 1)
	passed=$(echo "$line" | sed -E 's#^ *([0-9]+)/([0-9]+).*#\1#')
	total=$(echo "$line" | sed -E 's#^ *([0-9]+)/([0-9]+).*#\2#')
	# a case whose graph failed may still compare equal (an empty write): no failure may be said
	nf=$(grep -c 'qgraph: graph_compute failed' "$T/tbo-$op")
	ok $([ "$st" -eq 0 ] && [ -n "$passed" ] && [ "$passed" = "$total" ] && [ "$total" -ge "$want" ] && [ "$nf" -eq 0 ]; echo $?) \
		"test-backend-ops test -b QGRAPH0 -o $op${filter:+ -p '$filter'}: ${passed:-?}/${total:-?} passed on QGRAPH0, at least $want, $nf graphs failed (exit $st)"
	[ "$st" -eq 0 ] && [ "$nf" -eq 0 ] || { grep -E 'FAIL|qgraph:' "$T/tbo-$op" | head -n 20 | sed 's/^/# /'; }
done

# llama.cpp's question for a layer's weight (the weight in a zero-size
# buffer of each of our types in turn): the device is an IGPU, whose layers
# llama.cpp offloads; Q4_0 matrices go to QGRAPH_WEIGHTS (held in the
# daemon, no bytes here: QGRAPH, the default type, refuses them), F32
# weights to QGRAPH (the arena), where the daemon reads them
probe=$top/tests/ggml-probe
"$probe" "$plugin" >"$T/probe" 2>&1
st=$?
printf '%s\n' 'MUL by an F32 tensor of no buffer: claimed' 'MUL by an F32 weight: QGRAPH' \
	'ADD of an F32 weight: QGRAPH' 'MUL_MAT by Q4_0 weights: QGRAPH_WEIGHTS' \
	'MUL_MAT by Q4_0 weights in QGRAPH: refused' 'device type: IGPU' \
	'MUL_MAT by F16 weights: QGRAPH' 'SET_ROWS into a cache of no bytes: claimed' \
	'FLASH_ATTN_EXT over a cache of no bytes: claimed' >"$T/probe.want"
for ty in q4_K q6_K q8_0; do printf 'MUL_MAT by %s weights: QGRAPH_WEIGHTS\n' $ty; done >>"$T/probe.want"
for ty in q4_0 q4_K q6_K q8_0; do
	printf '%s weights read back: exact\n%s stacked weights of 5 rows read back: exact\n' $ty $ty
done >>"$T/probe.want"
cmp -s "$T/probe" "$T/probe.want"
r=$?
ok $([ $st -eq 0 ] && [ $r -eq 0 ]; echo $?) "weights: an IGPU; Q4_0, Q4_K, Q6_K, Q8_0 for MUL_MAT in QGRAPH_WEIGHTS and read back exactly, F32 and F16 weights in QGRAPH, a cache of no bytes written here (exit $st)"
[ $st -eq 0 ] && [ $r -eq 0 ] || show "$T/probe"

# the daemon did the work: weights uploaded, interleaved kernels ran
up1=$(stat weights_uploaded)
il1=$(stat mul_mat_interleaved)
ok $([ -n "$up1" ] && [ "$up1" -ge $((${up0:-0} + want_uploads)) ]; echo $?) \
	"the daemon's stats: weights uploaded ${up0:-?} -> ${up1:-?}"
ok $([ -n "$il1" ] && [ "$il1" -gt "${il0:-0}" ]; echo $?) \
	"the daemon's stats: MUL_MATs on interleaved weights ${il0:-?} -> ${il1:-?}"

# last: the daemon outlived all that and stops cleanly
daemon_stop s
[ "$failed" -eq 0 ]
