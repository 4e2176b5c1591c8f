#!/usr/bin/env bash
# .ci/llama.sh - the reference llama.cpp, pinned, built CPU-only and cached.
#
#   bash .ci/llama.sh            fetch, check and build both trees; print their paths
#   bash .ci/llama.sh --print    print the paths only (exit 1 if not built)
#
# llama.cpp's source comes from the npm registry: node-llama-cpp@3.21.1
# carries it as a git bundle (package/llama/gitRelease.bundle) at commit
# 80fb11ac (GGML_BACKEND_API_VERSION 2).  Two builds, cached outside the
# clone under $QG_CACHE (default ~/.cache/qgraph) in a folder named by the
# commit, so a second run costs nothing:
#   build-static  GGML_NATIVE=ON, everything linked in (ggml's own defaults)
#   build-dl      GGML_BACKEND_DL=ON: every tool loads its backends, and so a
#                 plugin named by GGML_BACKEND_PATH (x86: explicit AVX2,
#                 AVX-512 and VNNI, since native is refused with DL)
# Targets: test-backend-ops, llama-simple, llama-completion, llama-bench,
# llama-perplexity, llama-batched-bench (bench-llama.sh --procs's anchor),
# and in build-dl llama-server too (without its web UI,
# which the default build would download).  A tree's .done stamp holds its
# target list, so a cache built for fewer targets is built again.  Prints
# "LLAMA_SRC=... LLAMA_STATIC=... LLAMA_DL=..." on its last line.
set -euo pipefail

pkg=node-llama-cpp@3.21.1
commit=80fb11ac73e66d89eae2c6a91d8a77428fa733ed
cache=${QG_CACHE:-$HOME/.cache/qgraph}
top=$cache/llama.cpp-${commit:0:8}
src=$top/src
jobs=${QG_JOBS:--j2}
targets=(test-backend-ops llama-simple llama-completion llama-bench llama-perplexity llama-batched-bench)

say() { echo "llama.sh: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }

print() {
	echo "LLAMA_SRC=$src LLAMA_STATIC=$top/build-static/bin LLAMA_DL=$top/build-dl/bin"
}

# DL refuses GGML_NATIVE, and a CPU backend built for instructions this CPU
# lacks is not loaded at all ("no backends are loaded"): on x86-64 AVX2
# (ggml's default without native), and AVX-512 with VNNI where this CPU
# has them.  The stamp holds the choice, so a cache moved to another CPU is
# built again.
simd=(-DGGML_NATIVE=OFF)
if [ "$(uname -m)" = x86_64 ]; then
	flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
	has() { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
	# OFF said aloud: a tree configured before keeps its cached choice otherwise
	if has avx512f && has avx512bw && has avx512vl && has avx512dq && has avx512_vnni; then
		simd+=(-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON)
	else
		simd+=(-DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF)
	fi
fi
if [ "${1:-}" = --print ]; then
	[ "$(cat "$top/build-static/.done" 2>/dev/null)" = "${targets[*]}" ] &&
		[ "$(cat "$top/build-dl/.done" 2>/dev/null)" = "${targets[*]} llama-server ${simd[*]}" ] || exit 1
	print
	exit 0
fi

mkdir -p "$top"
if [ ! -d "$src/.git" ]; then
	command -v npm >/dev/null || die "npm is not on PATH (node-llama-cpp comes from the npm registry)"
	command -v cmake >/dev/null || die "cmake is not on PATH (.ci/setup installs it)"
	tmp=$(mktemp -d "$top/fetch.XXXXXX")
	say "fetching $pkg"
	(cd "$tmp" && npm pack --silent "$pkg" >/dev/null) || die "npm pack $pkg"
	tar -xzf "$tmp"/node-llama-cpp-*.tgz -C "$tmp" package/llama/gitRelease.bundle || die "no git bundle in $pkg"
	git clone -q "$tmp/package/llama/gitRelease.bundle" "$tmp/src" 2>/dev/null || die "git clone of the bundle"
	mv "$tmp/src" "$src"
	rm -rf "$tmp"
fi
got=$(git -C "$src" rev-parse HEAD)
[ "$got" = "$commit" ] || die "the bundle holds $got, not $commit"

# build NAME 'TARGET... [-DFLAG...]' CMAKE-ARGS...: configure and build the
# targets, once for a given target list and flags (the .done stamp holds them)
build() {
	local name=$1 dir=$top/$1 want=$2
	shift 2
	[ "$(cat "$dir/.done" 2>/dev/null)" = "$want" ] && return 0
	say "building $name: $want (a few minutes)"
	cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=ON \
		-DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
		"$@" >"$dir.log" 2>&1 || { tail -n 30 "$dir.log" >&2; die "cmake $name"; }
	# shellcheck disable=SC2086 # WANT is a list of target names (then the flags that made them)
	cmake --build "$dir" "$jobs" --target ${want%% -D*} >>"$dir.log" 2>&1 ||
		{ tail -n 30 "$dir.log" >&2; die "build $name"; }
	echo "$want" >"$dir/.done"
}

build build-static "${targets[*]}" -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_SERVER=OFF
build build-dl "${targets[*]} llama-server ${simd[*]}" -DGGML_BACKEND_DL=ON -DBUILD_SHARED_LIBS=ON "${simd[@]}" \
	-DLLAMA_BUILD_SERVER=ON
print
