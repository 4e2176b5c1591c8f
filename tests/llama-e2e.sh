#!/bin/sh
# llama-e2e.sh - llama.cpp runs a model that the project writes, and the
# yardstick the ggml backend is judged by.  Prints TAP.
#
# tests/make-llama-gguf writes a tiny llama model with random weights: the
# same bytes for the same seed whatever the thread count, other bytes for
# another seed, a file qgraph-submit inspect reads, and bad shapes refused.
# Then, where the pinned llama.cpp is built (`bash .ci/llama.sh --print`;
# its GGML_BACKEND_DL build, which loads GGML_BACKEND_PATH in every tool):
#   - llama-simple loads the model and generates tokens;
#   - llama-perplexity gives a finite perplexity on a text made here, and
#     saves its log-probabilities (--kl-divergence-base): stock llama.cpp,
#     with its Q4_0 repack;
#   - the baseline: stock llama.cpp with -nr (no repack) against that base,
#     its mean KL divergence and its "same top p" share;
#   - with the ggml backend (QG_GGML_PLUGIN=/path/libggml-qgraph.so, loaded
#     through GGML_BACKEND_PATH): its device listed (so a qgraphd must be
#     running for it), generation, and the KL divergence against
#     the same base no worse than twice the baseline's: KL <= 2 x KL(-nr),
#     same top p >= top(-nr) - (100 - top(-nr)); and the graphs a decode
#     step sends the daemon (QGRAPH_GGML_TRACE), one a token (one round trip).
#   - the same for the Q4_K_M mix (make-llama-gguf --ftype q4_K_M: Q4_K and
#     Q6_K matrices): its own base and -nr baseline, and with the plugin
#     every matrix but the token embedding (the input layer, on the CPU)
#     uploaded to the daemon, and the KL divergence within the same bound.
# Every llama tool runs with OMP_WAIT_POLICY=passive, and with -t
# $QG_LLAMA_THREADS (default 2) --poll 0 where it takes them (llama-simple
# takes no options but -m and -n).
#
# Environment: QG_LLAMA_DL names llama.cpp's DL bin directory (default:
# from .ci/llama.sh --print); QG_GGML_PLUGIN the backend (unset or missing:
# that part is skipped); QG_GGML_ENV more VAR=VALUE words for the plugin's
# runs (e.g. QGRAPH_SOCKET=...); QG_LLAMA_KEEP=DIR keeps the model, the
# text, the base and every log in DIR.
set -u
. "$(dirname "$0")/lib/tap.sh"

threads=${QG_LLAMA_THREADS:-2}
gen=$top/tests/make-llama-gguf
if [ -n "${QEMU_AARCH64:-}" ]; then
	sub=$top/client/tools/.libs/qgraph-submit
	inspect() { ${QG_EXEC:-} -E "LD_LIBRARY_PATH=$top/client/lib/.libs:$top/client/mpi/.libs" "$sub" inspect "$@"; }
	makegguf() { ${QG_EXEC:-} "$gen" "$@"; }
else
	sub=$top/client/tools/qgraph-submit
	inspect() { "$sub" inspect "$@"; }
	makegguf() { "$gen" "$@"; }
fi
if [ ! -x "$gen" ] || [ ! -x "$sub" ]; then
	skip_all "tests/make-llama-gguf or qgraph-submit not built"
fi

if [ -n "${QG_LLAMA_KEEP:-}" ]; then
	T=$QG_LLAMA_KEEP
	tap_keep=1
	mkdir -p "$T" || exit 99
else
	tap_tmpdir llama
fi

# ------------------------------------------------------------ the generator
makegguf --preset tiny --seed 7 --threads 1 -o "$T/tiny.gguf" 2>"$T/gen.log"
st=$?
ok $st "make-llama-gguf writes the tiny model (exit $st)"
[ $st -eq 0 ] || show "$T/gen.log"
sed 's/^/# /' "$T/gen.log"

makegguf --preset tiny --seed 7 --threads 3 -o "$T/again.gguf" 2>/dev/null &&
	cmp -s "$T/tiny.gguf" "$T/again.gguf"
ok $? "the same seed gives the same bytes with 1 and 3 threads"
makegguf --preset tiny --seed 8 -o "$T/other.gguf" 2>/dev/null &&
	! cmp -s "$T/tiny.gguf" "$T/other.gguf" &&
	[ "$(wc -c <"$T/tiny.gguf")" -eq "$(wc -c <"$T/other.gguf")" ]
ok $? "another seed gives other weights of the same size"
rm -f "$T/again.gguf" "$T/other.gguf"

inspect "$T/tiny.gguf" >"$T/inspect.out" 2>&1
st=$?
has() { grep -Eq -- "$1" "$T/inspect.out"; }
[ $st -eq 0 ] && has '^architecture: llama$' && has '^  llama.embedding_length +u32 +256$' &&
	has '^  llama.attention.head_count_kv +u32 +4$' && has '^  llama.rope.dimension_count +u32 +32$' &&
	has '^  llama.attention.layer_norm_rms_epsilon +f32 ' && has '^  tokenizer.ggml.model +string +"llama"$' &&
	has '^  tokenizer.ggml.tokens +array +\[string x 320\]$' &&
	has '^  tokenizer.ggml.token_type +array +\[i32 x 320\]$'
ok $? "qgraph-submit inspect reads it (exit $st): the llama keys, typed as llama.cpp asks"
[ $failed -eq 0 ] || { echo "# inspect: exit $st, $(wc -c <"$T/inspect.out") bytes of output"; show "$T/inspect.out" 40; }
# 4 layers of 9 tensors, the embedding, the output norm and the output
has '^tensors: 39$' && has '^  token_embd.weight +q4_0 +256 x 320 ' &&
	has '^  blk.3.attn_k.weight +q4_0 +256 x 128 ' && has '^  blk.0.ffn_down.weight +q4_0 +768 x 256 ' &&
	has '^  blk.0.ffn_norm.weight +f32 +256 ' && has '^  output.weight +q4_0 +256 x 320 '
ok $? "its tensors: Q4_0 matrices in ggml's shapes, F32 norms"

makegguf --preset tiny --seed 7 --ftype q4_K_M -o "$T/km.gguf" 2>"$T/gen-km.log"
st=$?
inspect "$T/km.gguf" >"$T/inspect-km.out" 2>&1
# the matrices llama.cpp's loader puts in a device's buffers: all but the token embedding
km_mats=$(grep -Ec '^  [a-z0-9_.]+ +q[46]_K +[0-9]+ x ' "$T/inspect-km.out")
[ $st -eq 0 ] && grep -Eq '^  general.file_type +u32 +15$' "$T/inspect-km.out" &&
	grep -Eq '^  token_embd.weight +q4_K +256 x 320 ' "$T/inspect-km.out" &&
	grep -Eq '^  blk.0.attn_v.weight +q4_K +256 x 128 ' "$T/inspect-km.out" &&
	grep -Eq '^  blk.3.ffn_down.weight +q6_K +768 x 256 ' "$T/inspect-km.out" &&
	grep -Eq '^  output.weight +q6_K +256 x 320 ' "$T/inspect-km.out" && [ "$km_mats" -eq 30 ]
ok $? "--ftype q4_K_M: Q4_K matrices, Q6_K output and late attn_v, ffn_down ($km_mats matrices, exit $st)"
[ $st -eq 0 ] || show "$T/gen-km.log"

makegguf --heads 7 -o "$T/bad.gguf" >"$T/bad.out" 2>&1
st=$?
[ $st -eq 2 ] && grep -q 'heads 7 must divide --dim 256' "$T/bad.out" && [ ! -e "$T/bad.gguf" ]
ok $? "a shape llama.cpp cannot run is refused (exit $st) and no file is left"

# ------------------------------------------------------------ llama.cpp
reason=
if [ -n "${QEMU_AARCH64:-}" ]; then
	reason="a cross build: llama.cpp runs natively only"
elif [ -n "${QG_LLAMA_DL:-}" ]; then
	bin=$QG_LLAMA_DL
elif [ -n "${QG_GGML_BINDIR:-}" ]; then
	bin=$QG_GGML_BINDIR	# the llama.cpp build configure --with-ggml named
else
	paths=$(bash "$src/.ci/llama.sh" --print 2>/dev/null) || reason="llama.cpp is not built (bash .ci/llama.sh builds it)"
	bin=$(printf '%s\n' "${paths:-}" | sed -n 's/.*LLAMA_DL=\([^ ]*\).*/\1/p')
fi
if [ -z "$reason" ] && { [ ! -x "$bin/llama-perplexity" ] || [ ! -x "$bin/llama-completion" ] ||
	[ ! -x "$bin/llama-simple" ]; }; then
	reason="no llama-perplexity, llama-completion or llama-simple in ${bin:-?}"
fi
if [ -n "$reason" ]; then
	for what in "llama-simple generates" "llama-perplexity: finite" "the base log-probabilities" \
		"stock -nr against the base" "with the plugin: its device is listed" "with the plugin: generation" \
		"with the plugin: KL divergence" "with the plugin: the daemon ran the matmuls" \
		"with the plugin: graphs a decode step" "with the plugin: llama-completion offloads every layer" "with the plugin: the default build runs on QGRAPH0" \
		"q4_K_M: the base" "q4_K_M: stock -nr against the base" "q4_K_M with the plugin: matrices in the daemon" \
		"q4_K_M with the plugin: KL divergence"; do
		skip "$what: $reason"
	done
	tap_done
	exit
fi
echo "# llama.cpp: $bin; -t $threads --poll 0, OMP_WAIT_POLICY=passive"

# A text of a few KB from a fixed word list and a fixed generator.
awk 'BEGIN {
	n = split("the of and a to in is was that for on as with by he at from his it an were are which this " \
		"be or had not first also after but new one their its who two has time her they more she been " \
		"other all there when used during into over city may between some only most would can years " \
		"school later three such world called up him about where state many while part made national " \
		"being both known", w, " ")
	s = 12345
	line = ""
	for (i = 0; i < 700; i++) {
		s = (s * 1103515245 + 12345) % 2147483648
		line = line (line == "" ? "" : " ") w[int(s / 65536) % n + 1]
		if (length(line) > 70) { print line "."; line = "" }
	}
	print line
}' >"$T/text.txt"

run() {
	timeout 300 "$@"
}
# The tools log through a thread of their own that nobody waits for at
# exit (llama.cpp's common_log is leaked on purpose), so their last lines
# can be lost, more so while OpenMP's threads spin or the machine is
# busy: tests/logflush.so, preloaded, writes them at exit; OpenMP's
# threads wait passively; and a run whose summary line PATTERN is still
# missing runs again, up to three times in all.  tool_run LOG PATTERN
# COMMAND...: LOG.out and LOG.err hold its output; the exit status of the
# last run, or 1 without PATTERN.
OMP_WAIT_POLICY=passive
export OMP_WAIT_POLICY
logflush=$(cd "$top" && pwd)/tests/logflush.so
tool_run() {
	log=$1 pat=$2
	shift 2
	for try in 1 2 3; do
		if [ -f "$logflush" ]; then
			run env LD_PRELOAD="$logflush" "$@" >"$log.out" 2>"$log.err" </dev/null
		else
			run "$@" >"$log.out" 2>"$log.err" </dev/null
		fi
		st=$?
		[ $st -ne 0 ] && return $st
		grep -Eq -- "$pat" "$log.out" "$log.err" && return 0
		echo "# $(basename "$log"): run $try lost its summary line ($pat)"
	done
	return 1
}
model=$T/tiny.gguf base=$T/base.kld
llama_args="-t $threads --poll 0"

# gen LOG [VAR=VALUE...]: greedy generation of 16 tokens; 0 when they came.
# llama-simple, whose output and summary are written as they happen: the
# summary line of llama-completion, written by its log thread at exit,
# was lost three runs in three beside two busy loops.
gen_tokens() {
	log=$1
	shift
	tool_run "$log" 'decoded 16 tokens' env "$@" "$bin/llama-simple" -m "$T/tiny.gguf" -n 16 "the city of" &&
		[ "$(wc -c <"$log.out")" -gt "$(printf 'the city of' | wc -c)" ]
}
gen_tokens "$T/gen-stock"
r=$?
ok $r "llama-simple generates 16 tokens from the model"
[ $r -eq 0 ] || show "$T/gen-stock.err"
echo "# stock: $(head -c 200 "$T/gen-stock.out" | tr -c '[:print:]' '?')"

# The base: stock llama.cpp (with its repack); its perplexity on the way.
ppl_args="-f $T/text.txt -c 128"
# shellcheck disable=SC2086
tool_run "$T/base" 'Final estimate: PPL' "$bin/llama-perplexity" -m "$model" $llama_args $ppl_args \
	--kl-divergence-base "$base"
st=$?
ppl=$(sed -n 's/.*Final estimate: PPL = \([0-9.eE+-]*\).*/\1/p' "$T/base.out" "$T/base.err" | head -n 1)
[ $st -eq 0 ] && [ -n "$ppl" ] && awk -v p="$ppl" 'BEGIN { exit !(p + 0 > 1 && p + 0 < 1e30) }'
r=$?
ok $r "llama-perplexity: finite perplexity ${ppl:-none} (exit $st)"
[ $r -eq 0 ] || show "$T/base.err"
[ $st -eq 0 ] && [ -s "$T/base.kld" ]
ok $? "the base log-probabilities are saved ($(wc -c <"$T/base.kld" 2>/dev/null || echo 0) bytes)"

# kl LABEL ARGS-AND-ENV...: llama-perplexity --kl-divergence of $model
# against $base with llama ARGS (VAR=VALUE words go to env); sets kld and same_top (the
# mean KL divergence and the same-top-p percentage) or returns 1.
kl() {
	label=$1
	shift
	envs='' args=''
	for a in "$@"; do
		case $a in
		*=*) envs="$envs $a" ;;
		*) args="$args $a" ;;
		esac
	done
	# shellcheck disable=SC2086
	tool_run "$T/$label" '^Same top p:' env $envs "$bin/llama-perplexity" -m "$model" $llama_args $ppl_args \
		$args --kl-divergence-base "$base" --kl-divergence
	st=$?
	kld=$(awk '/^Mean +KLD:/ { print $3; exit }' "$T/$label.out" "$T/$label.err")
	same_top=$(awk '/^Same top p:/ { print $4; exit }' "$T/$label.out" "$T/$label.err")
	[ $st -eq 0 ] && [ -n "$kld" ] && [ -n "$same_top" ]
}

kl nr -nr
r=$?
kld_nr=${kld:-} top_nr=${same_top:-}
# the repacked and the plain kernels compute the same products: a small difference
[ $r -eq 0 ] && awk -v k="$kld_nr" -v t="$top_nr" 'BEGIN { exit !(k >= 0 && k < 0.01 && t >= 90 && t <= 100) }'
r=$?
ok $r "stock -nr against the base: mean KLD ${kld_nr:-none}, same top p ${top_nr:-none}%"
[ $r -eq 0 ] || show "$T/nr.err"

# The Q4_K_M model: its own base (stock, with ggml's Q4_K repack) and -nr baseline
model=$T/km.gguf base=$T/km-base.kld
# shellcheck disable=SC2086
tool_run "$T/km-base" 'Final estimate: PPL' "$bin/llama-perplexity" -m "$model" $llama_args $ppl_args \
	--kl-divergence-base "$base"
st=$?
[ $st -eq 0 ] && [ -s "$base" ]
r=$?
ok $r "q4_K_M: the base log-probabilities are saved (exit $st)"
[ $r -eq 0 ] || show "$T/km-base.err"
kl km-nr -nr
r=$?
km_kld_nr=${kld:-} km_top_nr=${same_top:-}
[ $r -eq 0 ] && awk -v k="$km_kld_nr" -v t="$km_top_nr" 'BEGIN { exit !(k >= 0 && k < 0.01 && t >= 90 && t <= 100) }'
r=$?
ok $r "q4_K_M: stock -nr against the base: mean KLD ${km_kld_nr:-none}, same top p ${km_top_nr:-none}%"
[ $r -eq 0 ] || show "$T/km-nr.err"
model=$T/tiny.gguf base=$T/base.kld

plugin=${QG_GGML_PLUGIN:-}
# a build configured --with-ggml tests its own backend
[ -z "$plugin" ] && [ -f "$top/client/ggml/.libs/libggml-qgraph.so" ] && plugin=$top/client/ggml/.libs/libggml-qgraph.so
if [ -z "$plugin" ]; then
	reason="QG_GGML_PLUGIN is not set (the path of libggml-qgraph.so)"
elif [ ! -f "$plugin" ]; then
	reason="QG_GGML_PLUGIN=$plugin does not exist"
elif [ -z "$kld_nr" ]; then
	reason="no baseline to compare with"
else
	reason=
fi
if [ -n "$reason" ]; then
	skip "with the plugin: its device is listed: $reason"
	skip "with the plugin: generation: $reason"
	skip "with the plugin: KL divergence against the base: $reason"
	skip "with the plugin: the daemon ran the matmuls: $reason"
	skip "with the plugin: graphs a decode step: $reason"
	skip "with the plugin: llama-completion offloads every layer: $reason"
	skip "with the plugin: the default build runs on QGRAPH0: $reason"
	skip "q4_K_M with the plugin: matrices in the daemon: $reason"
	skip "q4_K_M with the plugin: KL divergence: $reason"
else
	# a daemon of the test's own unless QG_GGML_ENV names one
	own_daemon=
	case " ${QG_GGML_ENV:-} " in
	*" QGRAPH_SOCKET="*) ;;
	*)
		own_daemon=1
		daemon_start s --pool-size 256M || show "$T/s.log"
		QG_GGML_ENV="${QG_GGML_ENV:-} QGRAPH_SOCKET=$T/s.sock"
		;;
	esac
	sock=$(printf '%s\n' $QG_GGML_ENV | sed -n 's/^QGRAPH_SOCKET=//p' | tail -n 1)
	mm() { "$top/client/tools/qgraph-submit" --socket "$sock" stats --all 2>/dev/null | awk '$1 == "mul_mat_interleaved" { print $2 }'; }
	mm0=$(mm)
	# the backend registers its device (an IGPU: --list-devices leaves out the CPU's)
	# shellcheck disable=SC2086
	run env GGML_BACKEND_PATH="$plugin" ${QG_GGML_ENV:-} "$bin/llama-completion" --list-devices \
		>"$T/devices.out" 2>"$T/devices.err" </dev/null
	st=$?
	dev=$(sed -n 's/^  \([^ :]*\): .*/\1/p' "$T/devices.out" | tr '\n' ' ')
	[ $st -eq 0 ] && [ -n "$dev" ]
	r=$?
	ok $r "with the plugin: llama.cpp lists its device: ${dev:-none}"
	[ $r -eq 0 ] || { show "$T/devices.out" 5; show "$T/devices.err" 10; }

	# shellcheck disable=SC2086
	gen_tokens "$T/gen-plugin" GGML_BACKEND_PATH="$plugin" ${QG_GGML_ENV:-}
	r=$?
	ok $r "with the plugin: llama-simple generates 16 tokens"
	[ $r -eq 0 ] || show "$T/gen-plugin.err"
	echo "# plugin: $(head -c 200 "$T/gen-plugin.out" | tr -c '[:print:]' '?')"

	# shellcheck disable=SC2086
	kl plugin GGML_BACKEND_PATH="$plugin" ${QG_GGML_ENV:-}
	r=$?
	limit_k=$(awk -v k="$kld_nr" 'BEGIN { printf "%.6f", 2 * k }')
	limit_t=$(awk -v t="$top_nr" 'BEGIN { printf "%.3f", t - (100 - t) }')
	[ $r -eq 0 ] && awk -v k="$kld" -v t="$same_top" -v lk="$limit_k" -v lt="$limit_t" \
		'BEGIN { exit !(k >= 0 && k <= lk && t >= lt) }'
	r=$?
	ok $r "with the plugin: mean KLD ${kld:-none} <= $limit_k, same top p ${same_top:-none}% >= $limit_t%"
	[ $r -eq 0 ] || show "$T/plugin.err" 30

	mm1=$(mm)
	[ -n "$mm1" ] && [ "$mm1" -gt "${mm0:-0}" ]
	ok $? "with the plugin: the daemon ran the matmuls on interleaved weights (${mm0:-?} -> ${mm1:-?})"

	# Graphs a decode step, from the trace's line a graph: 24 tokens less 8.
	# With every layer offloaded and every op of the step claimed, a decoded
	# token is one graph in the daemon: one round trip.
	graphs() {
		# shellcheck disable=SC2086
		tool_run "$T/trace-$1" "decoded $1 tokens" env GGML_BACKEND_PATH="$plugin" ${QG_GGML_ENV:-} \
			QGRAPH_GGML_TRACE=1 "$bin/llama-simple" -m "$T/tiny.gguf" -n "$1" "the city of" >&2 &&
			grep -c '^qgraph: graph ' "$T/trace-$1.err"
	}
	g8=$(graphs 8) && g24=$(graphs 24) && [ $((g24 - g8)) -eq 16 ]
	ok $? "with the plugin: graphs a decode step: one ($((${g24:-0} - ${g8:-0}))/16: ${g8:-?} graphs for 8 tokens, ${g24:-?} for 24)"

	# llama.cpp at its defaults (every layer, fit on) offloads the whole
	# model to QGRAPH0, an IGPU: the 4 layers and the output, the KV cache
	# in QGRAPH; "graph splits" (-lv 4) counts the hand-overs between the
	# daemon and the CPU a graph takes, and grows when a claim is lost
	# shellcheck disable=SC2086
	tool_run "$T/layers" 'graph splits = ' env GGML_BACKEND_PATH="$plugin" ${QG_GGML_ENV:-} \
		"$bin/llama-completion" -m "$T/tiny.gguf" $llama_args -p "the city of" -n 8 --temp 0 -no-cnv -lv 4
	st=$?
	splits=$(sed -n 's/.*graph splits = \([0-9]*\).*/\1/p' "$T/layers.out" "$T/layers.err" | tail -n 1)
	[ $st -eq 0 ] && grep -q 'offloaded 5/5 layers to GPU' "$T/layers.err" &&
		grep -q 'QGRAPH KV buffer size' "$T/layers.err" && grep -q 'QGRAPH_WEIGHTS model buffer size' "$T/layers.err" &&
		[ -n "$splits" ] && [ "$splits" -le 2 ]
	r=$?
	ok $r "with the plugin: llama-completion offloads 5/5 layers and the KV cache, graph splits = ${splits:-?} <= 2 (exit $st)"
	[ $r -eq 0 ] || grep -E 'offloaded|buffer size|splits|qgraph:|error' "$T/layers.err" | head -n 20 | sed 's/^/# /'

	# The default build (no GGML_BACKEND_DL: the CPU backend linked in)
	# loads GGML_BACKEND_PATH only where something calls
	# ggml_backend_load_all: llama.cpp's own init does so only when no
	# backend is registered, --list-devices and -dev always.  So the
	# device is listed but a plain run never loads it; -dev QGRAPH0, or
	# LLAMA_ARG_DEVICE=QGRAPH0 for every common tool, loads and uses it.
	static=${QG_LLAMA_STATIC:-$(dirname "$(dirname "$bin")")/build-static/bin}
	if [ -x "$static/llama-completion" ]; then
		# shellcheck disable=SC2086
		tool_run "$T/static" 'graph splits = ' env GGML_BACKEND_PATH="$plugin" ${QG_GGML_ENV:-} \
			LLAMA_ARG_DEVICE=QGRAPH0 QGRAPH_GGML_TRACE=1 "$static/llama-completion" -m "$T/tiny.gguf" $llama_args \
			-p "the city of" -n 8 --temp 0 -no-cnv -lv 4
		st=$?
		graphs=$(grep -c '^qgraph: graph ' "$T/static.err")
		[ $st -eq 0 ] && grep -q 'offloaded 5/5 layers to GPU' "$T/static.err" && [ "$graphs" -gt 0 ]
		r=$?
		ok $r "with the plugin: the default build runs on QGRAPH0 with LLAMA_ARG_DEVICE=QGRAPH0 ($graphs graphs, exit $st)"
		[ $r -eq 0 ] || grep -E 'offloaded|splits|qgraph:|error' "$T/static.err" | head -n 20 | sed 's/^/# /'
	else
		skip "with the plugin: the default build runs on QGRAPH0: no llama-completion in $static"
	fi

	# Q4_K_M: every matrix but the token embedding goes to the daemon (a
	# daemon of our own has none of them yet: each is an upload), and the
	# KL divergence is as bounded as Q4_0's
	up() { "$top/client/tools/qgraph-submit" --socket "$sock" stats --all 2>/dev/null | awk '$1 == "weights_uploaded" { print $2 }'; }
	up0=$(up)
	model=$T/km.gguf base=$T/km-base.kld
	# shellcheck disable=SC2086
	kl km-plugin GGML_BACKEND_PATH="$plugin" ${QG_GGML_ENV:-}
	r=$?
	up1=$(up)
	if [ -n "$own_daemon" ]; then
		[ -n "$up1" ] && [ $((up1 - ${up0:-0})) -eq $((km_mats - 1)) ]
		ok $? "q4_K_M with the plugin: every matrix but token_embd in the daemon ($((${up1:-0} - ${up0:-0})) of $km_mats uploaded)"
	else
		skip "q4_K_M with the plugin: matrices in the daemon: QG_GGML_ENV names a daemon that may hold them"
	fi
	limit_k=$(awk -v k="$km_kld_nr" 'BEGIN { printf "%.6f", 2 * k }')
	limit_t=$(awk -v t="$km_top_nr" 'BEGIN { printf "%.3f", t - (100 - t) }')
	[ $r -eq 0 ] && [ -n "$km_kld_nr" ] && awk -v k="$kld" -v t="$same_top" -v lk="$limit_k" -v lt="$limit_t" \
		'BEGIN { exit !(k >= 0 && k <= lk && t >= lt) }'
	r=$?
	ok $r "q4_K_M with the plugin: mean KLD ${kld:-none} <= $limit_k, same top p ${same_top:-none}% >= $limit_t%"
	[ $r -eq 0 ] || show "$T/km-plugin.err" 30
	[ -n "$own_daemon" ] && daemon_stop s
fi

tap_done
