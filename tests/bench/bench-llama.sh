#!/bin/sh
# bench-llama.sh - llama.cpp on a 1B-class random Q4_0 model, stock against
# the ggml backend: speed (llama-bench pp512 and tg128) and memory (four
# processes on one model).
#
#   bench-llama.sh [--json] [--rounds N] [--threads N] [--preset 1b|tiny]
#                  [--ftype q4_0|q4_K_M] [--seed S] [--model FILE]
#                  [--speed | --memory]
#
# The model comes from tests/make-llama-gguf (--preset 1b: dim 2048, ffn
# 8192, 16 layers, 32/8 heads, vocab 4096, Q4_0, about 0.56 GB; --ftype
# q4_K_M: the Q4_K_M mix of Q4_K and Q6_K), made once and cached as
# $QG_CACHE/models/llama-PRESET[-q4_K_M]-gGENVERSION-sSEED.gguf (QG_CACHE
# defaults to ~/.cache/qgraph); --model FILE takes another.
# llama.cpp is the pinned GGML_BACKEND_DL build (.ci/llama.sh, or the bin
# directory QG_LLAMA_DL); the backend is QG_GGML_PLUGIN (loaded through
# GGML_BACKEND_PATH, with the VAR=VALUE words of QG_GGML_ENV): without it,
# stock llama.cpp alone is measured.
#
# Speed: each round runs one llama-bench process per backend, stock first,
# one after the other (interleaved, so drifts of the machine hit both
# alike): pp512 and tg128, one repetition after llama-bench's warm-up.
# The value is the median over the rounds; the plugin's line has the stock
# median as its limit and their ratio (the issue's targets: pp >= 1.3,
# tg >= 1.0).  Threads: -t N (default 2), --poll 0 and OMP_WAIT_POLICY
# (default passive), the same for both; every line says them.
#
# Memory: four llama-completion processes on the model at once, each
# after a short generation, waiting for input (interactive), with and
# without mmap (--load-mode mmap / none, the old --mmap / --no-mmap), per
# backend: RssAnon and RssFile (/proc/PID/status) and Pss
# (/proc/PID/smaps_rollup) of each, and their sums against the model's
# size.  With QG_QGRAPHD_PID, the daemon's own line too.
#
# Prints a table, or with --json one JSON object per result (bench, the
# parameters, value, unit, limit_name, limit_value, ratio), as the other
# benchmarks in tests/bench do.  Run it from the build directory (or set
# QG_TOP_BUILDDIR); it takes minutes on the 1B model.
set -u
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
top=${QG_TOP_BUILDDIR:-.}
json=0 rounds=3 threads=2 preset=1b ftype=q4_0 seed=1 model='' modes="speed memory"
while [ $# -gt 0 ]; do
	case $1 in
	--json) json=1 ;;
	--rounds) rounds=$2; shift ;;
	--threads) threads=$2; shift ;;
	--preset) preset=$2; shift ;;
	--ftype) ftype=$2; shift ;;
	--seed) seed=$2; shift ;;
	--model) model=$2; shift ;;
	--speed) modes=speed ;;
	--memory) modes=memory ;;
	-h | --help)
		sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0 ;;
	*) echo "bench-llama.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
	esac
	shift
done
case $rounds$threads in *[!0-9]*) echo "bench-llama.sh: --rounds and --threads take numbers" >&2; exit 2 ;; esac

die() {
	echo "bench-llama.sh: $*" >&2
	exit 1
}

if [ -n "${QG_LLAMA_DL:-}" ]; then
	bin=$QG_LLAMA_DL
else
	paths=$(bash "$here/../../.ci/llama.sh" --print 2>/dev/null) ||
		die "llama.cpp is not built: bash .ci/llama.sh builds it (or set QG_LLAMA_DL)"
	bin=$(printf '%s\n' "$paths" | sed -n 's/.*LLAMA_DL=\([^ ]*\).*/\1/p')
fi
for t in llama-bench llama-completion; do
	[ -x "$bin/$t" ] || die "no $t in $bin"
done

plugin=${QG_GGML_PLUGIN:-}
if [ -n "$plugin" ] && [ ! -f "$plugin" ]; then
	die "QG_GGML_PLUGIN=$plugin does not exist"
fi
backends=stock
[ -n "$plugin" ] && backends="stock qgraph"
: "${OMP_WAIT_POLICY:=passive}"
export OMP_WAIT_POLICY

T=$(mktemp -d "${TMPDIR:-/tmp}/qg-bench-llama.XXXXXX") || exit 1
pids=
cleanup() {
	for p in $pids; do
		kill "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------ the model
if [ -z "$model" ]; then
	gen=$top/tests/make-llama-gguf
	[ -x "$gen" ] || die "$gen is not built (make builds it; run from the build directory or set QG_TOP_BUILDDIR)"
	ver=$("$gen" --version | awk '{ print $2 }')
	cache=${QG_CACHE:-$HOME/.cache/qgraph}/models
	suffix=
	[ "$ftype" = q4_0 ] || suffix=-$ftype
	model=$cache/llama-$preset$suffix-g$ver-s$seed.gguf
	if [ ! -f "$model" ]; then
		mkdir -p "$cache" || die "cannot make $cache"
		echo "bench-llama.sh: making $model" >&2
		"$gen" --preset "$preset" --ftype "$ftype" --seed "$seed" -o "$model" || die "make-llama-gguf failed"
	fi
fi
[ -f "$model" ] || die "$model: no such file"
model_bytes=$(wc -c <"$model")
model_name=$(basename "$model" .gguf)

# env_for BACKEND: the environment words of a backend's runs
env_for() {
	if [ "$1" = qgraph ]; then
		echo "GGML_BACKEND_PATH=$plugin ${QG_GGML_ENV:-}"
	fi
}

# ------------------------------------------------------------ output
# result BENCH BACKEND UNIT VALUE [LIMIT-NAME LIMIT-VALUE] [EXTRA-JSON]
result() {
	b=$1 be=$2 unit=$3 v=$4 ln=${5:-} lv=${6:-} extra=${7:-}
	if [ $json -eq 1 ]; then
		awk -v b="$b" -v be="$be" -v u="$unit" -v v="$v" -v ln="$ln" -v lv="$lv" -v x="$extra" \
			-v m="$model_name" -v t="$threads" -v w="$OMP_WAIT_POLICY" 'BEGIN {
			printf "{\"bench\":\"%s\",\"model\":\"%s\",\"backend\":\"%s\",\"threads\":%d,\"poll\":0,", b, m, be, t
			printf "\"omp_wait_policy\":\"%s\"%s,\"value\":%.6g,\"unit\":\"%s\",", w, x, v, u
			if (ln == "" || lv + 0 <= 0)
				printf "\"limit_name\":null,\"limit_value\":null,\"ratio\":null}\n"
			else
				printf "\"limit_name\":\"%s\",\"limit_value\":%.6g,\"ratio\":%.4f}\n", ln, lv, v / lv
		}'
	else
		awk -v b="$b" -v be="$be" -v u="$unit" -v v="$v" -v ln="$ln" -v lv="$lv" -v x="$extra" 'BEGIN {
			gsub(/"/, "", x); gsub(/^,/, "", x)
			fv = v + 0 >= 1e5 ? sprintf("%.0f", v) : sprintf("%.6g", v)
			if (ln != "" && lv + 0 > 0)
				printf "%-19s %-7s %12s %-5s  x%.3f of %s %.6g  %s\n", b, be, fv, u, v / lv, ln, lv, x
			else
				printf "%-19s %-7s %12s %-5s  %s\n", b, be, fv, u, x
		}'
	fi
}

median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

if [ $json -eq 0 ]; then
	echo "llama.cpp $bin"
	echo "model $model ($model_bytes bytes); backends: $backends${plugin:+ ($plugin)}"
	echo "threads: -t $threads --poll 0, OMP_WAIT_POLICY=$OMP_WAIT_POLICY (stock and plugin alike)"
fi

# ------------------------------------------------------------ speed
speed() {
	r=1
	while [ $r -le "$rounds" ]; do
		for be in $backends; do
			# shellcheck disable=SC2046
			env $(env_for "$be") "$bin/llama-bench" -m "$model" -p 512 -n 128 -t "$threads" --poll 0 -r 1 \
				-o jsonl >"$T/bench.out" 2>"$T/bench.err" </dev/null ||
				{ tail -n 20 "$T/bench.err" >&2; die "llama-bench ($be) failed"; }
			sed -n 's/.*"n_prompt": \([0-9]*\), "n_gen": \([0-9]*\),.*"avg_ts": \([0-9.eE+-]*\),.*/\1 \2 \3/p' \
				"$T/bench.out" | while read -r np ng ts; do
				if [ "$np" -gt 0 ]; then
					echo "$ts" >>"$T/pp$np.$be"
				else
					echo "$ts" >>"$T/tg$ng.$be"
				fi
			done
		done
		r=$((r + 1))
	done
	for test in pp512 tg128; do
		stock=
		for be in $backends; do
			[ -s "$T/$test.$be" ] || die "llama-bench gave no $test result for $be"
			v=$(median <"$T/$test.$be")
			samples=$(tr '\n' ' ' <"$T/$test.$be" | sed 's/ $//; s/ /,/g')
			n=${test#??}
			if [ "$be" = stock ]; then
				stock=$v
				result "llama_$test" "$be" t/s "$v" "" "" ",\"n\":$n,\"rounds\":$rounds,\"samples\":[$samples]"
			else
				target=1.3
				[ "$test" = tg128 ] && target=1.0
				result "llama_$test" "$be" t/s "$v" stock_llama_cpp "$stock" \
					",\"n\":$n,\"rounds\":$rounds,\"samples\":[$samples],\"target_ratio\":$target"
			fi
		done
	done
}

# ------------------------------------------------------------ memory
# kib PID KEY FILE: the value of "KEY: N kB" in /proc/PID/FILE
kib() {
	awk -v k="$2:" '$1 == k { print $2; exit }' "/proc/$1/$3" 2>/dev/null
}

# waiting PID: the process sleeps reading its standard input
waiting() {
	case $(cat "/proc/$1/wchan" 2>/dev/null) in
	*pipe_read* | *pipe_wait*) return 0 ;;	# the name varies with the kernel
	esac
	return 1
}

memory() {
	mkfifo "$T/in" || die "mkfifo failed"
	for be in $backends; do
		for mode in mmap none; do
			# held open read-write here, so the readers block instead of seeing an end of file
			exec 7<>"$T/in"
			pids=
			for i in 1 2 3 4; do
				# shellcheck disable=SC2046
				env $(env_for "$be") "$bin/llama-completion" -m "$model" -t "$threads" --poll 0 --load-mode "$mode" \
					-i -no-cnv -p "the city of" -n 8 --temp 0 --ignore-eos \
					<"$T/in" >"$T/mem$i.out" 2>"$T/mem$i.err" &
				pids="$pids $!"
			done
			# every process loaded, generated and now waits for input (at most 5 minutes)
			deadline=$(($(date +%s) + 300))
			for p in $pids; do
				until waiting "$p"; do
					kill -0 "$p" 2>/dev/null || { tail -n 20 "$T"/mem*.err >&2; die "llama-completion ($be, $mode) exited"; }
					[ "$(date +%s)" -lt "$deadline" ] || die "llama-completion ($be, $mode) does not come to wait for input"
					sleep 0.5
				done
			done
			sum_anon=0 sum_file=0 sum_pss=0 i=0
			for p in $pids; do
				i=$((i + 1))
				anon=$(kib "$p" RssAnon status) file=$(kib "$p" RssFile status) pss=$(kib "$p" Pss smaps_rollup)
				result llama_memory_proc "$be" KiB "$anon" "" "" \
					",\"load_mode\":\"$mode\",\"proc\":$i,\"rss_anon_kib\":$anon,\"rss_file_kib\":$file,\"pss_kib\":$pss"
				sum_anon=$((sum_anon + anon)) sum_file=$((sum_file + file)) sum_pss=$((sum_pss + pss))
			done
			if [ "$be" = qgraph ] && [ -n "${QG_QGRAPHD_PID:-}" ]; then
				p=$QG_QGRAPHD_PID
				anon=$(kib "$p" RssAnon status) file=$(kib "$p" RssFile status) pss=$(kib "$p" Pss smaps_rollup)
				result llama_memory_daemon "$be" KiB "${anon:-0}" "" "" \
					",\"load_mode\":\"$mode\",\"rss_anon_kib\":${anon:-0},\"rss_file_kib\":${file:-0},\"pss_kib\":${pss:-0}"
				sum_anon=$((sum_anon + ${anon:-0})) sum_pss=$((sum_pss + ${pss:-0}))
			fi
			# the four processes' anonymous memory (and the daemon's) against one copy of the weights
			result llama_memory_anon_4 "$be" KiB "$sum_anon" model_file_kib $((model_bytes / 1024)) \
				",\"load_mode\":\"$mode\",\"rss_file_kib\":$sum_file,\"pss_kib\":$sum_pss"
			for p in $pids; do
				kill "$p" 2>/dev/null
				wait "$p" 2>/dev/null
			done
			pids=
			exec 7>&-
		done
	done
}

for m in $modes; do
	$m
done
