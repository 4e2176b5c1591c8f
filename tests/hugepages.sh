#!/bin/sh
# hugepages.sh - qgraphd's pool with hugepages present (reserved by the
# daemon itself, as root), absent (the THP fallback, and a GEMM still
# works) and required but absent (a clean failure that says how many pages
# were asked for and how many exist).  Root only; vm.nr_hugepages is
# changed under a lock on that file (other tests that change it take the
# same lock) and put back at the end.  Prints TAP.
set -u
. "$(dirname "$0")/lib/tap.sh"

nr=/proc/sys/vm/nr_hugepages
if [ "$(id -u)" != 0 ]; then
	skip_all "not root: cannot change $nr"
fi
if [ -n "${QEMU_AARCH64:-}" ]; then
	skip_all "qemu user emulation has no hugetlb"
fi
if [ ! -x "$top/daemon/qgraphd" ] || [ ! -x "$top/client/tools/qgraph-submit" ] || ! command -v flock >/dev/null; then
	skip_all "qgraphd, qgraph-submit or flock(1) missing"
fi

tap_tmpdir huge
exec 9<"$nr"
flock 9
old=$(cat "$nr")
tap_at_exit='echo "$old" >"$nr"'
if ! echo "$old" >"$nr" 2>/dev/null; then
	skip_all "$nr is not writable here"
fi

# start ARGS...: a daemon on $T/s.sock, logging at info; 0 when it is ready (its log in $T/s.log)
start() {
	daemon_start s --pool-size 32M --log-level info "$@"
}
gemm() {
	"$top/client/tools/qgraph-submit" --socket "$T/s.sock" gemm -m 256 -n 8 -k 512 --repeat 2 >"$T/gemm" 2>&1 &&
		grep -q ": ok" "$T/gemm"
}

# absent: the pool falls back to transparent hugepages and says so
echo 0 >"$nr"
start
ok $? "no hugepages reserved: the daemon starts"
grep -q "hugepool: 32 MiB thp" "$T/s.log"
ok $? "it falls back to THP and says why: $(grep -o 'hugepool: .*' "$T/s.log" | head -n 1)"
gemm
ok $? "a GEMM runs in the THP pool"
daemon_stop s

# required but absent: a clean failure naming what was asked and what exists
start --require-hugepages
st=$?
ok $([ $st -ne 0 ]; echo $?) "--require-hugepages without hugepages: the daemon refuses to start"
grep -q "16 pages of 2048 kB asked for; vm.nr_hugepages is 0" "$T/s.log"
ok $? "the error names the pages asked for and those that exist"
[ -n "$pid_s" ] && daemon_stop s

# present: the daemon reserves what its pool needs (never lowering the count), and runs on hugetlb
echo 3 >"$nr"
start --reserve-hugepages --require-hugepages
ok $? "--reserve-hugepages: the daemon starts on hugetlb pages"
after=$(cat "$nr")
ok $([ "$after" -ge 16 ]; echo $?) "it raised vm.nr_hugepages from 3 to $after for 16 pages"
grep -q "hugepages: vm.nr_hugepages: added" "$T/s.log" && grep -q "hugepool: 32 MiB hugetlb" "$T/s.log"
ok $? "it logs how many it added and that the pool is hugetlb"
gemm
ok $? "a GEMM runs in the hugetlb pool"
stats=$("$top/client/tools/qgraph-submit" --socket "$T/s.sock" stats 2>&1)
echo "$stats" | grep -q "^pool hugepool: 32 MiB hugetlb"
ok $? "stats report the pool's kind"
daemon_stop s
echo 64 >"$nr"
start --reserve-hugepages
grep -q "none to add" "$T/s.log" && [ "$(cat "$nr")" -eq 64 ]
ok $? "with enough pages reserved it adds none and lowers nothing"
daemon_stop s

tap_done
