#!/bin/sh
# submit-run.sh - qgraph-submit's saved graphs end to end: gemm and mlp
# --save write a graph file, run FILE sends it through a daemon of its own
# and checks every output against the in-process engine; files that are
# not graph files, and a daemon that is gone, get their documented exit
# status and message.  Prints TAP.
set -u
LC_ALL=C
export LC_ALL

top=${QG_TOP_BUILDDIR:-.}
if [ -n "${QEMU_AARCH64:-}" ]; then
	bin=$top/client/.libs/qgraph-submit
	tool() { ${QG_EXEC:-} -E "LD_LIBRARY_PATH=$top/client/.libs" "$bin" --socket "$T/s.sock" "$@"; }
else
	bin=$top/client/qgraph-submit
	tool() { "$bin" --socket "$T/s.sock" "$@"; }
fi
if [ ! -x "$bin" ] || [ ! -x "$top/daemon/qgraphd" ]; then
	echo "1..0 # SKIP qgraph-submit or qgraphd not built"
	exit 0
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/qg-run.XXXXXX") || exit 99
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

n=0
failed=0
ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
	fi
}
# run_tool NAME EXPECTED-STATUS PATTERN ARGS...: the tool exits EXPECTED and prints PATTERN
run_tool() {
	name=$1 want=$2 pat=$3
	shift 3
	tool "$@" >"$T/out" 2>&1
	st=$?
	grep -q -- "$pat" "$T/out"
	found=$?
	[ "$st" -eq "$want" ] && [ "$found" -eq 0 ]
	r=$?
	ok $r "$name (exit $st, want $want)"
	[ $r -eq 0 ] || sed 's/^/# /' "$T/out"
}

${QG_EXEC:-} "$top/daemon/qgraphd" --no-config --pool-size 256M -f -s "$T/s.sock" --log-level warn ${QG_DAEMON_ARGS:-} --ready-fd 3 \
	3>"$T/ready" 2>"$T/daemon.log" &
pid=$!
i=0
while ! grep -q READY "$T/ready" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "Bail out! qgraphd did not start"
		cat "$T/daemon.log"
		exit 1
	fi
	sleep 0.1
done

run_tool "mlp --save writes a file" 0 "ok" mlp --dim 256 --hidden 512 --tokens 5 --layers 2 --repeat 1 \
	--save "$T/mlp.qg"
ok $([ -s "$T/mlp.qg" ]; echo $?) "the mlp graph file is not empty"
run_tool "run FILE: the mlp graph through the daemon equals the in-process run" 0 "checked" \
	run --repeat 2 --print 3 "$T/mlp.qg"
run_tool "run FILE prints the saved description" 0 "qgraph-submit mlp --dim 256" run "$T/mlp.qg"
for ty in q4_0 q8_0 f16; do
	run_tool "gemm --type $ty --save" 0 "ok" gemm -m 64 -n 3 -k 96 --type $ty --repeat 1 --save "$T/g-$ty.qg"
	run_tool "run FILE: the $ty gemm graph checks" 0 "max error vs in-process .* ok" run "$T/g-$ty.qg"
done
run_tool "run --no-check still runs" 0 "median" run --no-check "$T/g-q4_0.qg"

head -c 100 "$T/mlp.qg" >"$T/short.qg"
run_tool "a truncated file is not a graph file" 2 "not a qgraph graph file" run "$T/short.qg"
: >"$T/empty.qg"
run_tool "an empty file is refused" 2 "not a regular file of 1 byte" run "$T/empty.qg"
run_tool "a missing file is named" 2 "No such file" run "$T/nothing.qg"
run_tool "a directory is refused" 2 "not a regular file" run "$T"
run_tool "two files is a usage error" 2 "one FILE" run "$T/mlp.qg" "$T/mlp.qg"
run_tool "run --help" 0 "Usage: qgraph-submit run" run --help

kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
pid=
run_tool "no daemon: exit 3" 3 "" run "$T/mlp.qg"

echo "1..$n"
[ "$failed" -eq 0 ]
