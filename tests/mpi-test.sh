#!/bin/sh
# mpi-test.sh - libqgraph-mpi under mpirun on this machine, each rank with a
# qgraphd of its own (socket s<rank>.sock): the sharded feed-forward block
# and MUL_MATs on 2 and 4 ranks equal one daemon's within the bound their
# order of summation explains (tests/mpi-ffn.c states and checks it), on
# shapes that do not split evenly; a shape too small for the ranks is
# refused on every rank alike; a daemon killed mid-run and a rank killed
# mid-run end the whole job within LIMIT seconds with a message naming what
# died, and every surviving daemon's stats return to their baseline (no
# session, no weights, no pool memory).  Native builds with MPI only
# (tests/mpi-ffn is not built otherwise: sanitizers, cross builds), where
# it skips, unless QG_REQUIRE_MPI=1 (.ci/run's native suite).  Prints TAP.
set -u
. "$(dirname "$0")/lib/tap.sh"

ffn=$top/tests/mpi-ffn
mpirun=${QG_MPIRUN:-}
if [ -n "${QEMU_AARCH64:-}" ] || [ ! -x "$ffn" ] || [ -z "$mpirun" ] || [ ! -x "$top/daemon/qgraphd" ]; then
	if [ "${QG_REQUIRE_MPI:-0}" = 1 ]; then
		bail "QG_REQUIRE_MPI=1 (.ci/run's native suite), but libqgraph-mpi or mpirun is not built here"
	fi
	skip_all "libqgraph-mpi not built here (no MPI, sanitizers, or a cross build)"
fi
# how long a death may take to end the job; measured: a daemon's 0.3 s
# (its rank notices within 0.1 s, then MPI_Abort), a rank's 1.1 s (mpirun's)
LIMIT=${QG_MPI_LIMIT:-5}

tap_tmpdir mpi
mp=
tap_at_exit='[ -n "$mp" ] && kill "$mp" 2>/dev/null; wait 2>/dev/null'

run_mpi() {
	np=$1
	shift
	root=
	[ "$(id -u)" = 0 ] && root=--allow-run-as-root
	"$mpirun" $root --oversubscribe -np "$np" "$@"
}

# start_daemon I: qgraphd on $T/sI.sock, one thread, a small pool; its pid in pid_sI
start_daemon() {
	daemon_start "s$1" --pool-size 64M --threads 1 || bail "qgraphd $1 did not start" "$T/s$1.log"
}

# baseline I: daemon I holds nothing but the asking session, within 3 s; 0 if so
baseline() {
	i=0
	while [ $i -lt 30 ]; do
		"$top/client/tools/qgraph-submit" --socket "$T/s$1.sock" stats >"$T/stats$1" 2>&1
		if grep -qx 'sessions 1' "$T/stats$1" && grep -qx 'weights_stored 0' "$T/stats$1" &&
			grep -qx 'pool_used 0' "$T/stats$1"; then
			return 0
		fi
		i=$((i + 1))
		sleep 0.1
	done
	grep -E '^(sessions|weights_stored|pool_used) ' "$T/stats$1" | sed 's/^/# /'
	return 1
}

for d in 0 1 2 3; do start_daemon $d; done

# tests/mpi-ffn's suite on NP ranks: each case prints a line, ": ok" or ": WRONG"
for np in 2 4; do
	run_mpi $np "$ffn" "$T/s%d.sock" suite >"$T/out" 2>&1
	st=$?
	for c in "ffn dim 96 hidden 160 n 7 micro 4 flags 3" "ffn dim 64 hidden 192 n 1 micro 0 flags 0" \
		"column-parallel 100 x 96, n 1" "column-parallel 100 x 96, n 5" "row-parallel 40 x 160, n 3"; do
		line=$(grep "^$c on $np ranks: " "$T/out")
		echo "$line" | grep -q ': ok$'
		ok $? "$np ranks: $c equals one daemon's within its bound"
		echo "# $line"
	done
	ok $([ $st -eq 0 ] && ! grep -q WRONG "$T/out"; echo $?) "$np ranks: every rank holds the same result (exit $st)"
	[ $st -eq 0 ] || sed 's/^/# /' "$T/out" | head -n 30
done

# qgraph-submit mlp --mpi and bench --mpi: per-rank compute, collective and whole times
submit=$top/client/tools/qgraph-submit
run_mpi 2 "$submit" --socket "$T/s%d.sock" mlp --mpi --dim 128 --hidden 352 --tokens 6 --layers 2 --micro 4 \
	--repeat 2 >"$T/out" 2>&1
st=$?
[ $st -eq 0 ] && grep -q 'max error vs in-process .*: ok' "$T/out" && [ "$(grep -c '^  rank [01]: compute .* collective .* whole' "$T/out")" -eq 2 ]
r=$?
ok $r "2 ranks: qgraph-submit mlp --mpi checks against its process and prints each rank's times (exit $st)"
sed 's/^/# /' "$T/out" | head -n 20
run_mpi 2 "$submit" --socket "$T/s%d.sock" bench --mpi --dim 128 --hidden 256 --tokens 3 --repeat 3 --json >"$T/out" 2>&1
st=$?
[ $st -eq 0 ] && [ "$(grep -c '^{"bench":"mpi_ffn_rank","ranks":2,"rank":[01],.*"compute_ms":.*"collective_ms":' "$T/out")" -eq 2 ] &&
	grep -q '^{"bench":"mpi_ffn","ranks":2,.*"collective_share":.*"value":[0-9.]*,"unit":"ms","limit_name":"allreduce_alone_ms","limit_value":[0-9.]*,"ratio":[0-9.]*}$' "$T/out"
r=$?
ok $r "2 ranks: qgraph-submit bench --mpi --json prints a line per rank and one for the block (exit $st)"
[ $r -eq 0 ] || sed 's/^/# /' "$T/out" | head -n 20

# too few units for the ranks: refused on every rank alike, nothing hangs
run_mpi 4 "$ffn" "$T/s%d.sock" ffn 64 96 1 0 0 >"$T/out" 2>&1
st=$?
c=$(grep -c 'do not split across 4 ranks\|scatter: rank 0 failed' "$T/out")
ok $([ $st -ne 0 ] && [ "$c" -ge 4 ]; echo $?) "4 ranks: hidden 96 (3 units) is refused on every rank (exit $st, $c ranks said why)"
[ "$c" -ge 4 ] || sed 's/^/# /' "$T/out" | head -n 20

# kill_during WHAT NP: start a looping FFN on NP ranks, wait until every rank runs, then WHAT
# (a command run with the ranks' pids in $T/out); sets st (mpirun's exit) and ms (kill to exit)
kill_during() {
	run_mpi "$2" "$ffn" "$T/s%d.sock" loop 30 >"$T/out" 2>"$T/err" &
	mp=$!
	i=0
	while [ "$(grep -c running "$T/out")" -lt "$2" ] && [ $i -lt 100 ]; do
		i=$((i + 1))
		sleep 0.1
	done
	t0=$(date +%s%N)
	eval "$1"
	wait "$mp"
	st=$?
	mp=
	ms=$((($(date +%s%N) - t0) / 1000000))
}

for d in 0 1 2 3; do baseline $d || echo "# daemon $d not at its baseline before the kills"; done

kill_during 'kill -9 $pid_s1' 2
ok $([ $st -ne 0 ] && [ $ms -le $((LIMIT * 1000)) ]; echo $?) "daemon 1 killed: the job ends in $ms ms (limit ${LIMIT} s, exit $st)"
grep -q "rank 1: qgraphd at $T/s1.sock went away" "$T/err"
r=$?
ok $r "rank 1 says its qgraphd went away, naming its socket"
[ $r -eq 0 ] || sed 's/^/# /' "$T/err" | head -n 20
baseline 0
ok $? "the surviving daemon 0 is back to its baseline"
start_daemon 1

kill_during 'kill -9 $(sed -n "s/^rank 2 pid \([0-9]*\) running/\1/p" "$T/out")' 4
ok $([ $st -ne 0 ] && [ $ms -le $((LIMIT * 1000)) ]; echo $?) "rank 2 killed: mpirun ends the job in $ms ms (limit ${LIMIT} s, exit $st)"
grep -q "process rank 2 .* exited on signal 9" "$T/err"
r=$?
ok $r "mpirun names the rank that died"
[ $r -eq 0 ] || sed 's/^/# /' "$T/err" | head -n 20
for d in 0 1 2 3; do
	baseline $d
	ok $? "daemon $d is back to its baseline (sessions, weights and pool of the job freed)"
done
for d in 0 1 2 3; do daemon_stop "s$d"; done

tap_done
