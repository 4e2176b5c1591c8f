#!/bin/sh
# build-ggml-aarch64.sh - cross-build ggml's CPU backend (ggml only, not
# llama) for aarch64 at the feature levels its repacked kernels are
# compiled for, so that insn-table.sh can count ggml's instructions under
# qemu beside ours.
#
#   tests/bench/build-ggml-aarch64.sh LLAMA_SRC [MARCH...]
#
# LLAMA_SRC is a llama.cpp source tree (configure's --with-ggml); each
# MARCH (default: armv8-a armv8.2-a+dotprod armv8.6-a+i8mm
# armv8.6-a+sve+i8mm) is built shared into
# $GGML_AARCH64_CACHE/ggml-aarch64-REV-MARCH (default cache: ~/.cache/qgraph;
# REV: the tree's git revision, else "src"), and its bin/libggml-cpu.so is
# what `bench-mulmat --ggml` dlopens.  ggml picks its aarch64 kernels when
# it is compiled (ggml_cpu_has_dotprod() and friends are compile-time
# constants there), so one build per level is the only way to see each; a
# build runs only on CPU models that have its features.  Needs
# aarch64-linux-gnu-gcc/g++ (g++-aarch64-linux-gnu), cmake and ninja (or
# make).
set -eu

if [ $# -lt 1 ] || [ ! -f "$1/CMakeLists.txt" ] || [ ! -d "$1/ggml/src" ]; then
	echo "usage: $0 LLAMA_SRC [MARCH...]" >&2
	exit 2
fi
src=$(cd "$1" && pwd)
shift
[ $# -gt 0 ] || set -- armv8-a armv8.2-a+dotprod armv8.6-a+i8mm armv8.6-a+sve+i8mm
rev=$(git -C "$src" rev-parse --short=8 HEAD 2>/dev/null || echo src)
cache=${GGML_AARCH64_CACHE:-$HOME/.cache/qgraph}
jobs=${JOBS:-2}
gen=
command -v ninja >/dev/null && gen="-G Ninja"

for march in "$@"; do
	out=$cache/ggml-aarch64-$rev-$march
	if [ -f "$out/bin/libggml-cpu.so" ]; then
		echo "$out: built already"
		continue
	fi
	mkdir -p "$out"
	# A toolchain file of three lines: the cross compilers and no host libraries.
	cat >"$out/toolchain.cmake" <<-EOF
	set(CMAKE_SYSTEM_NAME Linux)
	set(CMAKE_SYSTEM_PROCESSOR aarch64)
	set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
	set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
	set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
	EOF
	# No OpenMP: bench-mulmat calls the kernels itself, and the fewer
	# libraries qemu has to find, the better.  No llamafile: its sgemm
	# takes none of Q4_K, Q6_K, Q8_0 here (its Q8_0 path needs dotprod,
	# and with dotprod ggml repacks Q8_0 first).
	# Configured from llama.cpp's top level (ggml alone wants files a
	# trimmed tree may lack, such as ggml.pc.in), but only the ggml-cpu
	# target is built.
	cmake -S "$src" -B "$out" $gen -DCMAKE_TOOLCHAIN_FILE="$out/toolchain.cmake" \
		-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF \
		-DGGML_CPU_ARM_ARCH="$march" -DGGML_OPENMP=OFF -DGGML_LLAMAFILE=OFF \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
		-DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
		-DCMAKE_RUNTIME_OUTPUT_DIRECTORY="$out/bin" -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$out/bin" \
		>"$out/cmake.log" 2>&1 || { echo "$out: cmake failed (see cmake.log)" >&2; exit 1; }
	nice -n 5 cmake --build "$out" --target ggml-cpu -j "$jobs" >"$out/build.log" 2>&1 ||
		{ echo "$out: build failed (see build.log)" >&2; exit 1; }
	echo "$out: built"
done
