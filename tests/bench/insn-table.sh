#!/bin/sh
# insn-table.sh - instructions per 1000 multiply-accumulates of the aarch64
# kernels, counted exactly under qemu, for every CPU model x layout x
# GEMV (n = 1) / GEMM (n = 32) at m = k = 4096, beside ggml's figures.
#
#   tests/bench/insn-table.sh [PLUGIN]
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
# MODELS (qemu -cpu models), LAYOUTS, KERNEL (a family to force; default:
# the dispatcher's choice), GEMV_REPS / GEMM_REPS ("R1 R2").
set -eu

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

# count MODEL LAYOUT N REPS: prints "INSNS KERNEL-NAME"
count() {
	INSN_COUNT_FILE=$tmp/count $qemu -cpu "$1" -plugin "$plugin" "$bench" --kernel-only \
		--layout "$2" --n "$3" --repeat "$4" $kernel_opt >"$tmp/out" 2>"$tmp/err" || {
		echo "failed"
		return 0
	}
	n=$(sed -n 's/^insns: //p' "$tmp/count")
	k=$(sed -n 's/^kernel: //p' "$tmp/out")
	echo "$n $k"
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

printf '%-15s %-6s %-5s %-20s %12s %10s %8s\n' "cpu" "layout" "op" "kernel" "insn/1kMAC" "ggml" "ratio"
for model in $models; do
	for layout in $layouts; do
		for op in gemv gemm; do
			if [ $op = gemv ]; then n=1; reps=$gemv_reps; else n=32; reps=$gemm_reps; fi
			set -- $reps
			r1=$1 r2=$2
			a=$(count "$model" "$layout" $n "$r1")
			b=$(count "$model" "$layout" $n "$r2")
			ref=$(ggml_ref "$model" "$layout" $op)
			case "$a $b" in
			*failed*)
				printf '%-15s %-6s %-5s %-20s %12s %10s %8s\n' "$model" "$layout" $op "(run failed)" - "$ref" -
				continue ;;
			esac
			ia=${a%% *} ib=${b%% *} kname=${b#* }
			echo "$ia $ib $r1 $r2 $n $ref" | awk -v model="$model" -v layout="$layout" -v op=$op -v kname="$kname" '{
				macs = 4096 * 4096 * $5
				per = ($2 - $1) / ($4 - $3) / macs * 1000
				ratio = ($6 == "-") ? "-" : sprintf("%.2f", per / $6)
				printf "%-15s %-6s %-5s %-20s %12.1f %10s %8s\n", model, layout, op, kname, per, $6, ratio
			}'
		done
	done
done
echo "ggml: its aarch64 kernels where it has them; 920 = plain Q4_0 without dotprod (cortex-a72);"
echo "1231/1258 = its scalar 8x8 fallback off SVE-256.  Target: ratio <= 0.85 for the SIMD kernels."
