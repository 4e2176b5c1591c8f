#!/bin/sh
# hugepages.sh - qgraphd's pool with hugepages present (reserved by the
# daemon itself, as root), absent (the THP fallback, and a GEMM still
# works) and required but absent (a clean failure that says how many pages
# were asked for and how many exist).  Root only; vm.nr_hugepages is
# changed under a lock on that file (other tests that change it take the
# same lock) and put back at the end.  Prints TAP.
set -u
LC_ALL=C
export LC_ALL

top=${QG_TOP_BUILDDIR:-.}
nr=/proc/sys/vm/nr_hugepages
if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP not root: cannot change $nr"
	exit 0
fi
if [ -n "${QEMU_AARCH64:-}" ]; then
	echo "1..0 # SKIP qemu user emulation has no hugetlb"
	exit 0
fi
if [ ! -x "$top/daemon/qgraphd" ] || [ ! -x "$top/client/qgraph-submit" ] || ! command -v flock >/dev/null; then
	echo "1..0 # SKIP qgraphd, qgraph-submit or flock(1) missing"
	exit 0
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/qg-huge.XXXXXX") || exit 99
exec 9<"$nr"
flock 9
old=$(cat "$nr")
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	echo "$old" >"$nr"
	rm -rf "$T"
}
trap cleanup EXIT
if ! echo "$old" >"$nr" 2>/dev/null; then
	echo "1..0 # SKIP $nr is not writable here"
	exit 0
fi

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

# start ARGS...: a daemon on $T/s.sock; 0 when it is ready (its log in $T/log)
start() {
	: >"$T/ready"
	"$top/daemon/qgraphd" --no-config -f -s "$T/s.sock" --pool-size 32M "$@" --ready-fd 3 3>"$T/ready" \
		2>"$T/log" &
	pid=$!
	i=0
	while ! grep -q READY "$T/ready" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" 2>/dev/null
			pid=
			return 1
		fi
		sleep 0.1
	done
	return 0
}
stop() {
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=
}
gemm() {
	"$top/client/qgraph-submit" --socket "$T/s.sock" gemm -m 256 -n 8 -k 512 --repeat 2 >"$T/gemm" 2>&1 &&
		grep -q ": ok" "$T/gemm"
}

# absent: the pool falls back to transparent hugepages and says so
echo 0 >"$nr"
start
ok $? "no hugepages reserved: the daemon starts"
grep -q "hugepool: 32 MiB thp" "$T/log"
ok $? "it falls back to THP and says why: $(grep -o 'hugepool: .*' "$T/log" | head -n 1)"
gemm
ok $? "a GEMM runs in the THP pool"
stop

# required but absent: a clean failure naming what was asked and what exists
start --require-hugepages
st=$?
ok $([ $st -ne 0 ]; echo $?) "--require-hugepages without hugepages: the daemon refuses to start"
grep -q "16 pages of 2048 kB asked for; vm.nr_hugepages is 0" "$T/log"
ok $? "the error names the pages asked for and those that exist"
[ -n "$pid" ] && stop

# present: the daemon reserves what its pool needs (never lowering the count), and runs on hugetlb
echo 3 >"$nr"
start --reserve-hugepages --require-hugepages
ok $? "--reserve-hugepages: the daemon starts on hugetlb pages"
after=$(cat "$nr")
ok $([ "$after" -ge 16 ]; echo $?) "it raised vm.nr_hugepages from 3 to $after for 16 pages"
grep -q "hugepages: vm.nr_hugepages: added" "$T/log" && grep -q "hugepool: 32 MiB hugetlb" "$T/log"
ok $? "it logs how many it added and that the pool is hugetlb"
gemm
ok $? "a GEMM runs in the hugetlb pool"
stats=$("$top/client/qgraph-submit" --socket "$T/s.sock" stats 2>&1)
echo "$stats" | grep -q "^pool hugepool: 32 MiB hugetlb"
ok $? "stats report the pool's kind"
stop
echo 64 >"$nr"
start --reserve-hugepages
grep -q "none to add" "$T/log" && [ "$(cat "$nr")" -eq 64 ]
ok $? "with enough pages reserved it adds none and lowers nothing"
stop

echo "1..$n"
[ "$failed" -eq 0 ]
