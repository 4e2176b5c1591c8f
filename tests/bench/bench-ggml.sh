#!/bin/sh
# bench-ggml.sh - ggml's own MUL_MAT benchmark (test-backend-ops perf) on
# QGRAPH0 against ggml's CPU backend, the same cases, interleaved.
#
#   sh tests/bench/bench-ggml.sh [--json] [--quick]      (from the build directory)
#
# The cases are test-backend-ops' Q4_0 x F32 perf cases (m=4096, k=14336,
# n=1..8 and 512).  Each is run ROUNDS times (5; --quick 1) on each backend,
# alternating; the medians and their ratio are printed.  The limit is ggml's
# CPU backend on the same machine in the same run, as test-backend-ops runs
# it: its plain buffer type (Q4_0 as stored, not repacked; llama.cpp's own
# repack is measured by bench-llama.sh) and its own threads; qgraphd runs with
# --threads $QG_BENCH_THREADS (default: one per CPU).  Needs a build
# configured --with-ggml; QG_GGML_BINDIR names the llama.cpp build's
# programs (configure's GGML_BINDIR, which `make bench` passes).
set -u
LC_ALL=C
export LC_ALL

json=0 rounds=5
for a in "$@"; do
	case $a in
	--json) json=1 ;;
	--quick) rounds=1 ;;
	*) echo "bench-ggml.sh: unknown option $a" >&2; exit 2 ;;
	esac
done
top=${QG_TOP_BUILDDIR:-.}
plugin=$top/client/ggml/.libs/libggml-qgraph.so
tbo=${QG_GGML_BINDIR:-}/test-backend-ops
if [ ! -f "$plugin" ] || [ ! -x "$tbo" ]; then
	echo "bench-ggml.sh: needs a build configured --with-ggml and QG_GGML_BINDIR (skipped)" >&2
	exit 0
fi
threads=${QG_BENCH_THREADS:-$(nproc)}

T=$(mktemp -d "${TMPDIR:-/tmp}/qg-bench-ggml.XXXXXX") || exit 1
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
"$top/daemon/qgraphd" --no-config --pool-size 512M --threads "$threads" -f -s "$T/s.sock" --log-level warn \
	--ready-fd 3 3>"$T/ready" 2>"$T/daemon.log" &
pid=$!
i=0
while ! grep -q READY "$T/ready" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "bench-ggml.sh: qgraphd did not start" >&2
		cat "$T/daemon.log" >&2
		exit 1
	fi
	sleep 0.1
done
export QGRAPH_SOCKET="$T/s.sock" GGML_BACKEND_PATH="$plugin"

# us BACKEND N: test-backend-ops' microseconds per run of the case with N columns on BACKEND
us() {
	"$tbo" perf -o MUL_MAT -b "$1" -p "type_a=q4_0,type_b=f32,m=4096,n=$2,k=14336,bs=\[1,1\],nr=\[1,1\],per=\[0,1,2,3\]" \
		2>/dev/null | sed -n 's#.* \([0-9.]*\) us/run.*#\1#p' | head -n 1
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

[ "$json" = 1 ] || printf '%-28s %12s %12s %8s\n' "MUL_MAT q4_0 4096x14336" "CPU us" "QGRAPH0 us" "ratio"
for n in 1 2 4 8 512; do
	: >"$T/cpu"
	: >"$T/qg"
	r=0
	while [ $r -lt $rounds ]; do
		us CPU "$n" >>"$T/cpu"
		us QGRAPH0 "$n" >>"$T/qg"
		r=$((r + 1))
	done
	c=$(median <"$T/cpu")
	q=$(median <"$T/qg")
	if [ -z "$c" ] || [ -z "$q" ]; then
		echo "bench-ggml.sh: n=$n gave no figure (CPU '$c', QGRAPH0 '$q')" >&2
		continue
	fi
	ratio=$(awk -v c="$c" -v q="$q" 'BEGIN { printf "%.2f", c / q }')
	if [ "$json" = 1 ]; then
		printf '{"bench":"ggml_mul_mat","m":4096,"n":%s,"k":14336,"type":"q4_0","daemon_threads":%s,"rounds":%s,' \
			"$n" "$threads" "$rounds"
		printf '"value":%s,"unit":"us","limit_name":"ggml_cpu_backend_us","limit_value":%s,"ratio":%s}\n' \
			"$q" "$c" "$ratio"
	else
		printf '%-28s %12s %12s %8s\n' "n=$n" "$c" "$q" "${ratio}x"
	fi
done
