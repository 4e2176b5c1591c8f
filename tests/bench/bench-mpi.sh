#!/bin/sh
# bench-mpi.sh - tensor parallelism on this machine: the feed-forward block
# DIM -> HIDDEN -> DIM (default 4096 -> 14336 -> 4096, Q4_0) on one rank
# whose qgraphd has 2 threads, against 2 ranks whose qgraphds have 1 thread
# each (one CPU each), for N = 1 and N = 32 tokens (and N = 32 in
# micro-batches of 8, to see what overlapping the allreduce buys).
#
#   sh tests/bench/bench-mpi.sh [--json]     from the build directory
#
# Prints qgraph-submit bench --mpi's lines (per rank: compute, collective,
# whole; per block: the collective's share, and its limit, the same
# allreduce with no compute around it), then per N the speed-up of 2 ranks
# over 1, against its limit 2 (limit_name "ranks").  Needs mpirun and a
# build with libqgraph-mpi; QG_BENCH_DIM, QG_BENCH_HIDDEN and QG_BENCH_REPEAT
# change the shape and the passes (default 10).
set -u
json=0
[ "${1:-}" = --json ] && json=1
top=${QG_TOP_BUILDDIR:-.}
submit=$top/client/tools/qgraph-submit
mpirun=${MPIRUN:-mpirun}
dim=${QG_BENCH_DIM:-4096}
hidden=${QG_BENCH_HIDDEN:-14336}
reps=${QG_BENCH_REPEAT:-10}
if ! command -v "$mpirun" >/dev/null || ! "$submit" bench --mpi --help >/dev/null 2>&1; then
	echo "bench-mpi.sh: needs mpirun and qgraph-submit built with MPI (run from the build directory)" >&2
	exit 1
fi
root=
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
T=$(mktemp -d "${TMPDIR:-/tmp}/qg-bench-mpi.XXXXXX") || exit 1
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

# daemons I THREADS CPUS: qgraphd on $T/sI.sock
daemon() {
	"$top/daemon/qgraphd" --no-config --pool-size 512M --threads "$2" --cpus "$3" -f -s "$T/s$1.sock" \
		--log-level warn --ready-fd 3 3>"$T/ready$1" 2>"$T/daemon$1.log" &
	pids="$pids $!"
	i=0
	until grep -q READY "$T/ready$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt 300 ] && { echo "bench-mpi.sh: qgraphd did not start" >&2; cat "$T/daemon$1.log" >&2; exit 1; }
		sleep 0.1
	done
}
stop() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	pids=""
}

# run NP N MICRO: one bench --mpi, its JSON lines into $T/out and on stdout (or its table)
run() {
	"$mpirun" $root --oversubscribe -np "$1" "$submit" --socket "$T/s%d.sock" bench --mpi --dim "$dim" \
		--hidden "$hidden" --tokens "$2" --micro "$3" --repeat "$reps" --json >"$T/out" 2>"$T/err" ||
		{ cat "$T/err" >&2; exit 1; }
	cat "$T/out" >>"$T/all"
	if [ $json = 1 ]; then
		cat "$T/out"
	else
		sed -n 's/.*"ranks":\([0-9]*\).*"threads":\([0-9]*\).*"n":\([0-9]*\),"micro":\([0-9]*\).*"collective_share":\([0-9.]*\),"collective_ms":\([0-9.]*\).*"value":\([0-9.]*\).*"limit_value":\([0-9.]*\).*/\1 \2 \3 \4 \5 \6 \7 \8/p' "$T/out" |
			awk '{ printf "ffn %s -> %s -> %s, n %3d, micro %2d: %d rank(s) x %d thread(s): %9.3f ms, collective %7.3f ms (%4.1f%%; alone %.3f ms)\n", \
				d, h, d, $3, $4, $1, $2, $7, $6, 100 * $5, $8 }' d="$dim" h="$hidden"
	fi
}

value() {	# value RANKS N MICRO: the block's median ms from $T/all
	grep "^{\"bench\":\"mpi_ffn\",\"ranks\":$1,.*\"n\":$2,\"micro\":$3," "$T/all" | sed 's/.*"value":\([0-9.]*\).*/\1/'
}

: >"$T/all"
daemon 0 2 0-1
for n in 1 32; do run 1 $n 0; done
stop
daemon 0 1 0
daemon 1 1 1
for n in 1 32; do run 2 $n 0; done
run 2 32 8
stop

for n in 1 32; do
	one=$(value 1 $n 0) two=$(value 2 $n 0)
	awk -v one="$one" -v two="$two" -v n="$n" -v d="$dim" -v h="$hidden" -v json=$json 'BEGIN {
		s = one / two
		if (json)
			printf "{\"bench\":\"mpi_speedup\",\"dim\":%d,\"hidden\":%d,\"n\":%d,\"one_rank_ms\":%.3f,\"two_ranks_ms\":%.3f,\"value\":%.3f,\"unit\":\"x\",\"limit_name\":\"ranks\",\"limit_value\":2,\"ratio\":%.3f}\n", d, h, n, one, two, s, s / 2
		else
			printf "n %2d: 2 ranks x 1 thread against 1 rank x 2 threads: speed-up %.2f (limit 2)\n", n, s
	}'
done
one=$(value 2 32 0) two=$(value 2 32 8)
awk -v a="$one" -v b="$two" -v json=$json 'BEGIN {
	if (json)
		printf "{\"bench\":\"mpi_micro\",\"n\":32,\"micro\":8,\"ranks\":2,\"whole_ms\":%.3f,\"micro_ms\":%.3f,\"value\":%.3f,\"unit\":\"x\"}\n", a, b, a / b
	else
		printf "n 32 on 2 ranks: micro-batches of 8 (allreduce overlapping compute) %.3f ms against one batch %.3f ms: %.2fx\n", b, a, a / b
}'
