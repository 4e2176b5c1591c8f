#!/bin/sh
# man-test.sh - the manual pages against the programs and the header:
# libqgraph(3)'s SYNOPSIS names every function qgraph.h exports and its
# EXAMPLE compiles, links against libqgraph and runs against a daemon;
# every option qgraphd --help and qgraph-submit --help list is in their
# pages; every program says its version as "PROG (qgraph) VERSION" and
# names the bug-report address in --help.  Prints TAP.
set -u
. "$(dirname "$0")/lib/tap.sh"

tap_tmpdir man

# run PROG ARGS...: the program of the build, under $QG_EXEC on a cross build
run() {
	p=$1
	shift
	if [ -n "${QEMU_AARCH64:-}" ]; then
		# a libtool wrapper's program is in .libs; a program linked with no shared library of ours is itself
		d=$(dirname "$p")
		[ -x "$d/.libs/$(basename "$p")" ] && p=$d/.libs/$(basename "$p")
		${QG_EXEC:-} -E "LD_LIBRARY_PATH=$top/client/lib/.libs:$top/client/mpi/.libs" "$p" "$@"
	else
		"$p" "$@"
	fi
}
# the text of a page: roff escapes for '-' and '\' undone
unroff() { sed -e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/\\(aq/'"'"'/g' "$1"; }

# ---- libqgraph(3): every exported function in SYNOPSIS
sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' "$src/man/libqgraph.3" >"$T/synopsis"
missing=
for f in $(sed -n 's/.*QGRAPH_API[^(]*[ *]\(qgraph_[a-z0-9_]*\)(.*/\1/p' "$src/client/lib/qgraph.h"); do
	grep -q "\\\\fB$f\\\\fR(" "$T/synopsis" || missing="$missing $f"
done
ok $([ -z "$missing" ]; echo $?) "libqgraph(3) SYNOPSIS has every function of qgraph.h${missing:+ (missing:$missing)}"
for sec in "RETURN VALUE" ERRORS EXAMPLE; do
	grep -q "^\.SH $sec\$" "$src/man/libqgraph.3"
	ok $? "libqgraph(3) has $sec"
done

# ---- its EXAMPLE compiles, links and runs
sed -n '/^\.SH EXAMPLE/,/^\.SH /p' "$src/man/libqgraph.3" | sed -n '/^\.EX/,/^\.EE/p' | sed '1d;$d' >"$T/ex.roff"
unroff "$T/ex.roff" >"$T/example.c"
cc=${QG_CC:-cc}
# shellcheck disable=SC2086
$cc ${QG_CFLAGS:-} -Wall -Wextra -Werror -I"$src/client/lib" "$T/example.c" -o "$T/example" ${QG_LDFLAGS:-} \
	-L"$top/client/lib/.libs" -lqgraph -Wl,-rpath,"$top/client/lib/.libs" >"$T/cc.out" 2>&1
r=$?
ok $r "libqgraph(3)'s EXAMPLE compiles and links against libqgraph ($(wc -l <"$T/example.c") lines)"
[ $r -eq 0 ] || sed 's/^/# /' "$T/cc.out"
if [ $r -eq 0 ] && [ -z "${QEMU_AARCH64:-}" ] && [ -x "$top/daemon/qgraphd" ]; then
	daemon_start s --pool-size 64M || show "$T/s.log"
	QGRAPH_SOCKET=$T/s.sock "$T/example" >"$T/ex.out" 2>&1
	r=$?
	ok $([ $r -eq 0 ] && grep -q '^y\[0\] = ' "$T/ex.out"; echo $?) "and runs against a daemon: $(head -n 1 "$T/ex.out")"
	daemon_stop s
fi

# ---- every option of --help in the program's page
# options PROG ARGS...: the long options its help lists, one a line
options() { run "$@" 2>&1 | grep -o -- '--[a-z][a-z-]*' | sed 's/^--//' | sort -u; }
options "$top/daemon/qgraphd" --help >"$T/d.opts"
unroff "$src/man/qgraphd.8" >"$T/d.man"
missing=
for o in $(cat "$T/d.opts"); do
	grep -q -- "--$o\\b" "$T/d.man" || missing="$missing --$o"
done
ok $([ -s "$T/d.opts" ] && [ -z "$missing" ]; echo $?) \
	"qgraphd(8) documents every option of qgraphd --help ($(wc -l <"$T/d.opts"))${missing:+, missing:$missing}"
run "$top/daemon/qgraphd" --help | grep -q -- '--test-'
ok $(( $? == 0 )) "qgraphd --help lists no option for tests"
options "$top/client/tools/qgraph-submit" --help >"$T/s.opts"
for c in gemm mlp run bench stats info inspect load unload; do
	options "$top/client/tools/qgraph-submit" "$c" --help
done | sort -u >>"$T/s.opts"
unroff "$src/man/qgraph-submit.1" >"$T/s.man"
missing=
for o in $(sort -u "$T/s.opts"); do
	grep -q -- "--$o\\b" "$T/s.man" || missing="$missing --$o"
done
ok $([ -z "$missing" ]; echo $?) "qgraph-submit(1) documents every option of its commands' --help${missing:+, missing:$missing}"
for sec in OPTIONS ENVIRONMENT EXAMPLES; do
	grep -q "^\.SH $sec\$" "$src/man/qgraph-submit.1"
	ok $? "qgraph-submit(1) has $sec"
done

# ---- one version format, a bug-report address
for p in daemon/qgraphd client/tools/qgraph-submit client/tools/qgraph-quantize; do
	name=$(basename "$p")
	v=$(run "$top/$p" --version 2>&1)
	ok $([ "$v" = "$name (qgraph) ${QG_VERSION:-}" ]; echo $?) "$name --version: '$v'"
	run "$top/$p" --help 2>&1 | grep -q "^Report bugs to: ${QG_BUGREPORT:-?}\$"
	ok $([ $? -eq 0 ] && [ -n "${QG_BUGREPORT:-}" ]; echo $?) "$name --help names the bug-report address"
done

tap_done
