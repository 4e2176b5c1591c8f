#!/bin/sh
# insn-table.sh - instructions per 1000 multiply-accumulates of the aarch64
# kernels, counted exactly under qemu, for every CPU model x layout (or type) x
# GEMV (n = 1) / GEMM (n = 32) at m = k = 4096, beside ggml's figures.
#
#   tests/bench/insn-table.sh [--types "q4_0 q4_K q6_K q8_0"] [PLUGIN]
#
# PLUGIN (or $QEMU_INSN_PLUGIN) is a qemu TCG plugin that counts executed
# guest instructions and writes "insns: N" to the file named by
# $INSN_COUNT_FILE when the program exits (a plugin that adds
# qemu_plugin_tb_n_insns() per executed block does this in a few lines).
# Run from an aarch64 cross build directory (configure --host=aarch64-linux-gnu)
# after `make tests/bench/bench-mulmat`.
#
# Each cell is the difference of two runs of `bench-mulmat --kernel-only`
# that differ only in the repetition count, so set-up cancels out.
# Environment: BENCH (the aarch64 bench-mulmat), QEMU (qemu-aarch64),
# MODELS (qemu -cpu models), TYPES (q4_0, the layouts of Q4_0 weights, and
# any of the plain types q4_K q6_K q8_0, q8_0 in the layout the daemon
# stores it in there, named in the kernel column where it is not plain
# Q8_0; default q4_0), LAYOUTS, KERNEL (a
# family to force; default: the dispatcher's choice), GEMV_REPS /
# GEMM_REPS ("R1 R2").
#
# ggml's figures are the tables below.  With GGML_AARCH64=PREFIX they are
# counted in the same run instead, for the plain types, from the builds
# of tests/bench/build-ggml-aarch64.sh (PREFIX-MARCH/bin/libggml-cpu.so,
# e.g. ~/.cache/qgraph/ggml-aarch64-80fb11ac): `bench-mulmat --kernel-only
# --type T --ggml LIB` runs the kernel ggml picks with that build.
set -eu

types=${TYPES:-q4_0}
if [ "${1:-}" = --types ]; then
	types=$2
	shift 2
fi
plugin=${1:-${QEMU_INSN_PLUGIN:-}}
if [ -z "$plugin" ] || [ ! -r "$plugin" ]; then
	echo "usage: $0 PLUGIN.so   (or set QEMU_INSN_PLUGIN)" >&2
	exit 2
fi
case $plugin in /*) ;; *) plugin=$(pwd)/$plugin ;; esac
bench=${BENCH:-tests/bench/bench-mulmat}
qemu=${QEMU:-qemu-aarch64}
models=${MODELS:-cortex-a72 neoverse-n1 max,sve=off max,sve128=on max,sve256=on}
layouts=${LAYOUTS:-4x4 4x8 8x8}
gemv_reps=${GEMV_REPS:-1 3}
gemm_reps=${GEMM_REPS:-1 2}
kernel_opt=
[ -n "${KERNEL:-}" ] && kernel_opt="--kernel $KERNEL"

if [ ! -x "$bench" ]; then
	echo "$0: $bench not found: build it with make tests/bench/bench-mulmat" >&2
	exit 2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qg-insn.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# count MODEL N REPS BENCH-ARGS...: prints "INSNS KERNEL-NAME"
count() {
	cm=$1 cn=$2 cr=$3
	shift 3
	INSN_COUNT_FILE=$tmp/count $qemu -cpu "$cm" -plugin "$plugin" "$bench" --kernel-only \
		--n "$cn" --repeat "$cr" "$@" >"$tmp/out" 2>"$tmp/err" || {
		echo "failed"
		return 0
	}
	c=$(sed -n 's/^insns: //p' "$tmp/count")
	k=$(sed -n 's/^kernel: //p' "$tmp/out")
	echo "$c $k"
}

# per_kmac MODEL N BENCH-ARGS...: prints "INSNS-PER-1000-MACS KERNEL-NAME" or "failed"
per_kmac() {
	pm=$1 pn=$2
	shift 2
	if [ "$pn" = 1 ]; then set -- $gemv_reps "$@"; else set -- $gemm_reps "$@"; fi
	r1=$1 r2=$2
	shift 2
	a=$(count "$pm" "$pn" "$r1" "$@")
	b=$(count "$pm" "$pn" "$r2" "$@")
	case "$a $b" in *failed*) echo failed; return 0 ;; esac
	echo "${a%% *} ${b%% *} $r1 $r2 $pn" | awk -v kname="${b#* }" '{
		printf "%.1f %s\n", ($2 - $1) / ($4 - $3) / (4096 * 4096 * $5) * 1000, kname
	}'
}

# ggml's figure for a cell (instructions per 1000 MACs), "-" where none is on record.
ggml_ref() {	# MODEL LAYOUT OP
	case $1 in
	cortex-a72|cortex-a57) echo 920; return ;;	# no dotprod: plain Q4_0, no repack
	esac
	case $2:$3 in
	4x4:gemv) echo 266.2 ;;
	4x4:gemm) echo 125.2 ;;
	4x8:gemv) case $1 in neoverse-n1) echo 320.9 ;; *) echo 313.0 ;; esac ;;
	4x8:gemm) case $1 in neoverse-n1) echo - ;; *) echo 101.8 ;; esac ;;
	8x8:gemv) case $1 in *sve256=on*) echo 164.3 ;; *) echo 1231 ;; esac ;;
	8x8:gemm) case $1 in *sve256=on*) echo 52.6 ;; *) echo 1258 ;; esac ;;
	*) echo - ;;
	esac
}

# The build of build-ggml-aarch64.sh whose kernels ggml runs on MODEL: the
# best that MODEL can execute (ggml chooses its aarch64 kernels when it is
# compiled, as a native build on that CPU would).
ggml_march() {	# MODEL
	case $1 in
	cortex-a72|cortex-a57) echo armv8-a ;;
	neoverse-n1) echo armv8.2-a+dotprod ;;
	*sve128=on*|*sve256=on*) echo armv8.6-a+sve+i8mm ;;
	max*) echo armv8.6-a+i8mm ;;
	*) echo none ;;
	esac
}

# ggml's figure for a plain-type cell: "INSNS-PER-1000-MACS KERNEL", "- -" where none is
# on record.  KERNEL is ggml's layout (COLSxINTER, ggml_gemm_T_COLSxINTER_q8_K or _q8_0)
# or vec_dot where it does not repack (no dotprod).  Counted by this script with
# GGML_AARCH64 on llama.cpp 80fb11ac: ggml's CPU backend built by build-ggml-aarch64.sh
# (aarch64-linux-gnu-gcc/g++ 12.2, Release -O3, shared, -march as ggml_march says),
# qemu-aarch64 7.2 with a counting plugin as above; weights random in its interleaved layout,
# activations by ggml's own quantizers.  Its SVE paths (q4_K and q8_0 GEMM) run only at
# 256-bit vectors, hence sve256's own rows.
ggml_kq_ref() {	# MODEL TYPE OP
	case $1:$2:$3 in
	cortex-a72:q4_K:gemv) echo "894.7 vec_dot" ;;
	cortex-a72:q4_K:gemm) echo "894.3 vec_dot" ;;
	cortex-a72:q6_K:gemv) echo "1070.7 vec_dot" ;;
	cortex-a72:q6_K:gemm) echo "1070.4 vec_dot" ;;
	cortex-a72:q8_0:gemv) echo "824.6 vec_dot" ;;
	cortex-a72:q8_0:gemm) echo "824.3 vec_dot" ;;
	neoverse-n1:q4_K:gemv) echo "401.9 8x4" ;;
	neoverse-n1:q4_K:gemm) echo "248.7 8x4" ;;
	neoverse-n1:q6_K:gemv) echo "592.3 8x4" ;;
	neoverse-n1:q6_K:gemm) echo "246.1 8x4" ;;
	neoverse-n1:q8_0:gemv) echo "203.7 4x4" ;;
	neoverse-n1:q8_0:gemm) echo "131.2 4x4" ;;
	*sve256=on*:q4_K:gemm) echo "144.0 8x8" ;;
	*sve256=on*:q8_0:gemm) echo "102.0 4x8" ;;
	*sve128=on*:q4_K:gemm) echo "201.5 8x8" ;;
	*sve*=on*:q4_K:gemv) echo "437.2 8x8" ;;
	max*:q4_K:gemv) echo "434.8 8x8" ;;
	max*:q4_K:gemm) echo "199.4 8x8" ;;
	max*:q6_K:gemv) echo "749.5 8x8" ;;
	max*:q6_K:gemm) echo "223.0 8x8" ;;
	max*:q8_0:gemv) echo "289.7 4x8" ;;
	max*:q8_0:gemm) echo "125.3 4x8" ;;
	*) echo "- -" ;;
	esac
}

kq_table() {
	printf '%-15s %-5s %-5s %-34s %10s %10s %-12s %6s\n' "cpu" "type" "op" "kernel" "insn/1kMAC" "ggml" \
		"ggml kernel" "ratio"
	: >"$tmp/refs"
	for model in $models; do
		march=$(ggml_march "$model")
		for type in $1; do
			for op in gemv gemm; do
				if [ $op = gemv ]; then n=1; else n=32; fi
				ours=$(per_kmac "$model" $n --type "$type" $kernel_opt)
				if [ -n "${GGML_AARCH64:-}" ]; then
					ref=$(per_kmac "$model" $n --type "$type" \
						--ggml "$GGML_AARCH64-$march/bin/libggml-cpu.so")
					# "ggml q4_K 8x4 (gemm)" -> "8x4"; "ggml vec_dot" -> "vec_dot"
					ref=$(echo "$ref" | sed 's/ ggml [A-Za-z0-9_]* \([0-9x]*\).*/ \1/; s/ ggml / /')
					[ "$ref" = failed ] && ref="- -"
					echo "	$model:$type:$op) echo \"$ref\" ;;" >>"$tmp/refs"
				else
					ref=$(ggml_kq_ref "$model" "$type" $op)
				fi
				[ "$ours" = failed ] && ours="- (run failed)"
				printf '%-15s %-5s %-5s %-34s %10s %10s %-12s %6s\n' "$model" "$type" $op "${ours#* }" \
					"${ours%% *}" "${ref%% *}" "${ref#* }" "$(ratio "${ours%% *}" "${ref%% *}")"
			done
		done
	done
	echo "ggml: its repacked kernels where it repacks the type (ggml_repack_get_optimal_repack_type), else"
	echo "its vec_dot; built per CPU model as ggml_march says.  Target (issue 25): ratio <= 0.8."
	if [ -s "$tmp/refs" ]; then
		echo "counted now; for ggml_kq_ref:"
		sort -u "$tmp/refs"
	fi
}

# ratio OURS GGML: "-" where ggml has no figure
ratio() {
	case $1:$2 in -:*|*:-|*:) echo - ;; *) awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' ;; esac
}

q4_0_row() {	# CPU LAYOUT OP KERNEL INSNS GGML RATIO
	printf '%-15s %-6s %-5s %-20s %12s %10s %8s\n' "$@"
}

q4_0_table() {
	q4_0_row "cpu" "layout" "op" "kernel" "insn/1kMAC" "ggml" "ratio"
	for model in $models; do
		for layout in $layouts; do
			for op in gemv gemm; do
				if [ $op = gemv ]; then n=1; else n=32; fi
				ref=$(ggml_ref "$model" "$layout" $op)
				ours=$(per_kmac "$model" $n --layout "$layout" $kernel_opt)
				if [ "$ours" = failed ]; then
					q4_0_row "$model" "$layout" $op "(run failed)" - "$ref" -
					continue
				fi
				q4_0_row "$model" "$layout" $op "${ours#* }" "${ours%% *}" "$ref" \
					"$(ratio "${ours%% *}" "$ref")"
			done
		done
	done
	echo "ggml: its aarch64 kernels where it has them; 920 = plain Q4_0 without dotprod (cortex-a72);"
	echo "1231/1258 = its scalar 8x8 fallback off SVE-256.  Target: ratio <= 0.85 for the SIMD kernels."
}

kq_types=
for type in $types; do
	case $type in
	q4_0) ;;
	q4_K|q6_K|q8_0) kq_types="$kq_types $type" ;;
	*) echo "$0: unknown type $type (q4_0 q4_K q6_K q8_0)" >&2; exit 2 ;;
	esac
done
case " $types " in *" q4_0 "*) q4_0_table ;; esac
[ -z "$kq_types" ] || kq_table "$kq_types"
