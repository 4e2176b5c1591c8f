#!/bin/sh
# run.sh - run every benchmark, passing the arguments on (e.g. --json, --quick).
#
# Run from the build directory (`make bench` does, after building them);
# QG_BENCH_DIR overrides where the benchmark programs are.  Each prints a
# table, or JSON lines with --json.
set -eu
dir=${QG_BENCH_DIR:-tests/bench}
status=0
for b in bench-mulmat bench-backend bench-decode bench-service bench-alloc bench-pool bench-names; do
	if [ ! -x "$dir/$b" ]; then
		echo "run.sh: $dir/$b is not built (make bench builds it)" >&2
		status=1
		continue
	fi
	"$dir/$b" "$@" || status=1
done
# ggml's MUL_MAT benchmark against the ggml backend, where it is built (--with-ggml)
[ -f client/ggml/.libs/libggml-qgraph.so ] && { sh "${QG_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/bench/bench-ggml.sh" "$@" || status=1; }
# tensor parallelism, where qgraph-submit has --mpi (configure found MPI)
if client/tools/qgraph-submit bench --mpi --help >/dev/null 2>&1; then
	case " $* " in *" --json "*) j=--json ;; *) j= ;; esac
	sh "$(dirname "$0")/bench-mpi.sh" $j || status=1
fi
exit $status
