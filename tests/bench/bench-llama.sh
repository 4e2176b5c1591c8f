#!/bin/sh
# bench-llama.sh - llama.cpp on a 1B-class random Q4_0 model, stock against
# the ggml backend: speed (llama-bench pp512 and tg128) and memory (four
# processes on one model).
#
#   bench-llama.sh [--json] [--rounds N] [--threads LIST] [--depth LIST]
#                  [--preset 1b|tiny] [--ftype q4_0|q4_K_M|q8_0] [--seed S]
#                  [--model FILE] [--procs LIST]
#                  [--speed | --memory | --procs-only]
#
# The model comes from tests/make-llama-gguf (--preset 1b: dim 2048, ffn
# 8192, 16 layers, 32/8 heads, vocab 4096, Q4_0, about 0.56 GB; --ftype
# q4_K_M: the Q4_K_M mix of Q4_K and Q6_K; q8_0: all Q8_0), made once
# and cached as $QG_CACHE/models/llama-PRESET[-FTYPE]-gGENVERSION-sSEED.gguf
# (QG_CACHE defaults to ~/.cache/qgraph); --model FILE takes another.
# llama.cpp is the pinned GGML_BACKEND_DL build (.ci/llama.sh, or the bin
# directory QG_LLAMA_DL); the backend is QG_GGML_PLUGIN (loaded through
# GGML_BACKEND_PATH, with the VAR=VALUE words of QG_GGML_ENV): without it,
# stock llama.cpp alone is measured.
#
# Speed: each side at its best, as its users run it: llama-bench with its
# own defaults (--poll, OMP_WAIT_POLICY unset unless the caller sets it,
# and then for both alike), at each thread count of --threads LIST
# (default 1 to the CPUs), pp512 and tg128 at each depth of --depth LIST
# (default 0; llama-bench -d).  Each round runs every backend at every
# thread count, one process after the other (interleaved, so drifts of
# the machine hit all alike), one repetition after llama-bench's warm-up.
# A side's value is, for each test, the median over the rounds at its best
# thread count; both settings are printed.  The plugin's line has the
# stock value as its limit and their ratio (the issue's targets: pp512 >=
# 2.0, tg128 >= 1.5).  Decode is also set against its own limit: model
# bytes times tokens per second over the read bandwidth that bench-mulmat
# --limits measures in the same run at the CPUs' thread count.
#
# Memory: four llama-completion processes on the model at once, each
# after a short generation, waiting for input (interactive), with and
# without mmap (--load-mode mmap / none, the old --mmap / --no-mmap), per
# backend: RssAnon and RssFile (/proc/PID/status) and Pss
# (/proc/PID/smaps_rollup) of each, and their sums against the model's
# size; the processes run at the first thread count of --threads.  For the
# plugin, the daemon's pinned bytes (qgraph-submit stats: what it holds,
# not its reserved pool) before and while the four run.
#
# Processes (--procs LIST, default 1,2,4; --procs-only runs these alone):
# N llama-bench processes decoding on the model at once (tg128, -t 1 each,
# the setting N processes on these cores leave each, --rounds
# repetitions), per backend: the aggregate t/s (the sum of each process's
# mean) and the ms per token of every repetition of every process, median
# and worst.  With the plugin, the daemon may run the N processes' decode
# graphs as one batch (qgraphd.conf batch-max, batch-window-us), reading
# the weights once for all; its result says how many graphs a run on the
# daemon's pool held on average (graphs_per_run) and the window it had.
# The anchor is stock llama-batched-bench with
# N sequences in one process (where it is built), at the best of the
# thread counts of --threads: one process batching N sequences reads the
# weights once too.
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
ncpu=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
json=0 rounds=3 threads=$(seq -s, 1 "$ncpu") depths=0 preset=1b ftype=q4_0 seed=1 model='' modes="speed memory procs"
procs_list=1,2,4
while [ $# -gt 0 ]; do
	case $1 in
	--json) json=1 ;;
	--rounds) rounds=$2; shift ;;
	--threads) threads=$2; shift ;;
	--depth) depths=$2; shift ;;
	--preset) preset=$2; shift ;;
	--ftype) ftype=$2; shift ;;
	--seed) seed=$2; shift ;;
	--model) model=$2; shift ;;
	--speed) modes=speed ;;
	--memory) modes=memory ;;
	--procs) procs_list=$2; shift ;;
	--procs-only) modes=procs ;;
	-h | --help)
		sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0 ;;
	*) echo "bench-llama.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
	esac
	shift
done
case $rounds in '' | *[!0-9]*) echo "bench-llama.sh: --rounds takes a number" >&2; exit 2 ;; esac
case $threads,$depths,$procs_list in *[!0-9,]* | ,* | *,,*) echo "bench-llama.sh: --threads, --depth and --procs take lists of numbers (1,2)" >&2; exit 2 ;; esac
thread_list=$(echo "$threads" | tr ',' ' ')
first_threads=${thread_list%% *}

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
omp=${OMP_WAIT_POLICY:-default}

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
			-v m="$model_name" -v t="${res_threads:-$first_threads}" -v w="$omp" 'BEGIN {
			printf "{\"bench\":\"%s\",\"model\":\"%s\",\"backend\":\"%s\",\"threads\":%d,", b, m, be, t
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
	echo "settings: llama-bench's defaults (--poll, OMP_WAIT_POLICY=$omp), -t each of $threads, the best taken per side"
fi

# ------------------------------------------------------------ speed
# read_bw THREADS: the read bandwidth in GB/s that bench-mulmat measures, or nothing
read_bw() {
	[ -x "$top/tests/bench/bench-mulmat" ] || return 0
	"$top/tests/bench/bench-mulmat" --json --limits --threads "$1" 2>/dev/null |
		sed -n 's/.*"bench":"read-bandwidth".*"value":\([0-9.eE+-]*\).*/\1/p' | head -n 1
}

speed() {
	depth_args=$(echo "$depths" | sed 's/^/-d /')
	bw=$(read_bw "$ncpu")
	r=1
	while [ $r -le "$rounds" ]; do
		for t in $thread_list; do
			for be in $backends; do
				# shellcheck disable=SC2046,SC2086
				env $(env_for "$be") "$bin/llama-bench" -m "$model" -p 512 -n 128 $depth_args -t "$t" -r 1 \
					-o jsonl >"$T/bench.out" 2>"$T/bench.err" </dev/null ||
					{ tail -n 20 "$T/bench.err" >&2; die "llama-bench ($be, -t $t) failed"; }
				sed -n 's/.*"n_prompt": \([0-9]*\), "n_gen": \([0-9]*\), "n_depth": \([0-9]*\),.*"avg_ts": \([0-9.eE+-]*\),.*/\1 \2 \3 \4/p' \
					"$T/bench.out" | while read -r np ng nd ts; do
					if [ "$np" -gt 0 ]; then
						echo "$ts" >>"$T/pp$np@d$nd.$be.t$t"
					else
						echo "$ts" >>"$T/tg$ng@d$nd.$be.t$t"
					fi
				done
			done
		done
		r=$((r + 1))
	done
	[ -n "$bw" ] && result read_bandwidth machine GB/s "$bw" "" "" ",\"threads_measured\":$ncpu"
	for d in $(echo "$depths" | tr ',' ' '); do
		for test in pp512 tg128; do
			stock=
			for be in $backends; do
				best= best_t=
				for t in $thread_list; do
					[ -s "$T/$test@d$d.$be.t$t" ] || die "llama-bench gave no $test (depth $d) result for $be at -t $t"
					v=$(median <"$T/$test@d$d.$be.t$t")
					if [ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN { exit !(a > b) }'; then
						best=$v best_t=$t
					fi
				done
				samples=$(tr '\n' ' ' <"$T/$test@d$d.$be.t$best_t" | sed 's/ $//; s/ /,/g')
				per_t=$(for t in $thread_list; do printf '"%s":%s,' "$t" "$(median <"$T/$test@d$d.$be.t$t")"; done | sed 's/,$//')
				n=${test#??}
				x=",\"n\":$n,\"depth\":$d,\"rounds\":$rounds,\"samples\":[$samples],\"median_by_threads\":{$per_t}"
				res_threads=$best_t
				if [ "$be" = stock ]; then
					stock=$best
					result "llama_$test" "$be" t/s "$best" "" "" "$x"
				else
					target=2.0
					[ "$test" = tg128 ] && target=1.5
					result "llama_$test" "$be" t/s "$best" stock_llama_cpp "$stock" "$x,\"target_ratio\":$target"
				fi
				if [ "$test" = tg128 ] && [ -n "$bw" ]; then
					# model bytes read per token, at the tokens per second reached
					gbs=$(awk -v b="$model_bytes" -v ts="$best" 'BEGIN { printf "%.4f", b * ts / 1e9 }')
					result "llama_tg128_bytes" "$be" GB/s "$gbs" read_bandwidth "$bw" "$x,\"target_ratio\":0.75"
				fi
				res_threads=
			done
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

# pinned_kib: the daemon's pinned bytes in KiB (qgraph-submit stats), or nothing
pinned_kib() {
	sub=$top/client/tools/qgraph-submit
	[ -x "$sub" ] || sub=$(command -v qgraph-submit) || return 1
	# shellcheck disable=SC2086
	env ${QG_GGML_ENV:-} "$sub" stats --all 2>/dev/null | awk '$1 == "pinned_bytes" { printf "%d\n", $2 / 1024; exit }'
}

# The daemon's runs on its pool so far and the graphs in them (its batch-size
# histogram summed), and its batch-window-us: "RUNS GRAPHS WINDOW", or nothing.
batch_counts() {
	sub=$top/client/tools/qgraph-submit
	[ -x "$sub" ] || sub=$(command -v qgraph-submit) || return 1
	# shellcheck disable=SC2086
	env ${QG_GGML_ENV:-} "$sub" stats --all 2>/dev/null | awk '$1 == "batch_size" { r += $3; g += $2 * $3 }
		$1 == "batch_window_us" { w = $2 } END { if (w != "") print r + 0, g + 0, w }'
}

memory() {
	mkfifo "$T/in" || die "mkfifo failed"
	pinned0=$(pinned_kib) || pinned0=
	pinned0=${pinned0:-0}
	for be in $backends; do
		for mode in mmap none; do
			# held open read-write here, so the readers block instead of seeing an end of file
			exec 7<>"$T/in"
			pids=
			for i in 1 2 3 4; do
				# shellcheck disable=SC2046
				env $(env_for "$be") "$bin/llama-completion" -m "$model" -t "$first_threads" --load-mode "$mode" \
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
			if [ "$be" = qgraph ] && pinned=$(pinned_kib) && [ -n "$pinned" ]; then
				# the weights the daemon holds for all four, once (not its reserved pool)
				result llama_memory_daemon "$be" KiB "$pinned" model_file_kib $((model_bytes / 1024)) \
					",\"load_mode\":\"$mode\",\"pinned_before_kib\":$pinned0"
				sum_anon=$((sum_anon + pinned - pinned0))
			fi
			# the four processes' anonymous memory (and what the daemon pinned for them) against one copy of the weights
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

# ------------------------------------------------------------ processes
procs() {
	for n in $(echo "$procs_list" | tr ',' ' '); do
		for be in $backends; do
			pids=
			i=0
			[ "$be" = qgraph ] && batch0=$(batch_counts)
			while [ $i -lt "$n" ]; do
				i=$((i + 1))
				# shellcheck disable=SC2046
				env $(env_for "$be") "$bin/llama-bench" -m "$model" -p 0 -n 128 -t 1 -r "$rounds" -o jsonl \
					>"$T/procs$i.out" 2>"$T/procs$i.err" </dev/null &
				pids="$pids $!"
			done
			for p in $pids; do
				wait "$p" || { tail -n 20 "$T"/procs*.err >&2; die "llama-bench ($be, $n processes) failed"; }
			done
			pids=
			: >"$T/procs.ms"
			agg=0
			i=0
			while [ $i -lt "$n" ]; do
				i=$((i + 1))
				ts=$(sed -n 's/.*"avg_ts": \([0-9.eE+-]*\),.*/\1/p' "$T/procs$i.out" | head -n 1)
				[ -n "$ts" ] || die "llama-bench ($be, process $i of $n) gave no tg128 result"
				agg=$(awk -v a="$agg" -v b="$ts" 'BEGIN { print a + b }')
				# each repetition's ms per token
				sed -n 's/.*"samples_ts": \[\([^]]*\)\].*/\1/p' "$T/procs$i.out" | tr ',' '\n' |
					awk 'NF { printf "%.4f\n", 1000 / $1 }' >>"$T/procs.ms"
			done
			p50=$(median <"$T/procs.ms")
			worst=$(sort -g "$T/procs.ms" | tail -n 1)
			x=",\"procs\":$n,\"rounds\":$rounds,\"ms_per_token_p50\":$p50,\"ms_per_token_worst\":$worst"
			res_threads=1
			if [ "$be" = stock ]; then
				stock_agg=$agg
				result llama_tg128_procs "$be" t/s "$agg" "" "" "$x"
			else
				qgraph_agg=$agg
				# how many processes' graphs ran as one, on average, at the daemon's window
				batch1=$(batch_counts)
				if [ -n "$batch0" ] && [ -n "$batch1" ]; then
					x=$x$(echo "$batch0 $batch1" | awk '{ r = $4 - $1; g = $5 - $2
						printf ",\"graphs_per_run\":%.2f,\"batch_window_us\":%d", r ? g / r : 0, $6 }')
				fi
				result llama_tg128_procs "$be" t/s "$agg" stock_procs "$stock_agg" "$x"
			fi
			res_threads=
		done
		# the in-process anchor: N sequences batched by one llama.cpp process
		[ -x "$bin/llama-batched-bench" ] || continue
		best= best_t=
		for t in $thread_list; do
			"$bin/llama-batched-bench" -m "$model" -c 4096 -b 2048 -ub 512 -npp 16 -ntg 128 -npl "$n" -t "$t" \
				>"$T/bb.out" 2>"$T/bb.err" </dev/null || { tail -n 20 "$T/bb.err" >&2; die "llama-batched-bench failed"; }
			# the table's row: | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
			v=$(awk -F'|' -v n="$n" '$4 + 0 == n && $3 + 0 == 128 { gsub(/ /, "", $9); print $9; exit }' "$T/bb.out")
			[ -n "$v" ] || continue
			if [ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN { exit !(a > b) }'; then
				best=$v best_t=$t
			fi
		done
		[ -n "$best" ] || die "llama-batched-bench gave no result for $n sequences"
		res_threads=$best_t
		result llama_tg128_batched_bench stock t/s "$best" "" "" ",\"sequences\":$n"
		res_threads=1
		# the plugin's N processes against one process batching N sequences
		[ -n "$plugin" ] && result llama_tg128_procs_vs_batched qgraph t/s "$qgraph_agg" batched_bench "$best" \
			",\"procs\":$n,\"batched_bench_threads\":$best_t"
		res_threads=
	done
}

for m in $modes; do
	$m
done
