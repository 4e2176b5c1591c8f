#!/bin/sh
# layers.sh - includes go only downwards: with the include path each
# target is compiled with, a header of its own folder and of the folders
# it may use compiles, and any other does not.  src/'s layers see only
# the layers below them, and nothing of daemon/ or client/; the daemon
# and libqgraph see src/ and not each other; the tools and libqgraph-mpi
# see libqgraph's public header (qgraph.h) and not its private ones.
# QG_CC and QG_*_CPPFLAGS come from make (Makefile.am's qg_*_cppflags).
set -u
. "$(dirname "$0")/lib/tap.sh"

cc=${QG_CC:-cc}
tap_tmpdir layers

# try LAYER FLAGS HEADER WANT: compile a file including HEADER; WANT is ok
# or fail.  It is ok when it compiles and the header found is the
# project's (a system header of the same name, libevent's event.h, is not).
try() {
	printf '#include "%s"\nint qg_layers_probe;\n' "$3" >"$T/probe.c"
	got=fail
	if $cc $2 -fsyntax-only "$T/probe.c" >"$T/out" 2>&1 &&
	   $cc $2 -M "$T/probe.c" 2>/dev/null | tr ' ' '\n' | grep -Eq "(^|/)(src/[a-z]+|client/[a-z]+(/impl)?|daemon|proto)/$3\$"; then
		got=ok
	fi
	if [ "$got" = "$4" ]; then
		pass "$1 including $3: $( [ "$4" = ok ] && echo compiles || echo 'does not compile')"
	else
		not_ok "$1 including $3: expected $4, got $got"
		sed 's/^/# /' "$T/out" | head -n 5
	fi
}

k=$QG_KERNELS_CPPFLAGS i=$QG_IPC_CPPFLAGS e=$QG_ENGINE_CPPFLAGS
try kernels "$k" quant.h ok
try kernels "$k" mulmat.h ok
try kernels "$k" ring.h fail
try kernels "$k" event.h fail
try kernels "$k" tensor.h fail
try kernels "$k" wire.h fail
try ipc "$i" region.h ok
try ipc "$i" quant.h ok
try ipc "$i" tensor.h fail
try ipc "$i" backend.h fail
try ipc "$i" wire.h fail
try engine "$e" backend.h ok
try engine "$e" region.h ok
try engine "$e" wire.h fail
try engine "$e" qgraph.h fail
try engine "$e" loop.h fail
try engine "$e" session-impl.h fail

w=$QG_WIRE_CPPFLAGS d=$QG_DAEMON_CPPFLAGS l=$QG_LIB_CPPFLAGS t=$QG_TOOLS_CPPFLAGS m=$QG_MPI_CPPFLAGS
try wire "$w" wire.h ok
try wire "$w" numbers.h ok
try wire "$w" tensor.h ok
try wire "$w" qgraph.h fail
try wire "$w" server.h fail
try wire "$w" session-impl.h fail
try daemon "$d" server.h ok
try daemon "$d" wire.h ok
try daemon "$d" backend.h ok
try daemon "$d" qgraph.h fail
try daemon "$d" session-impl.h fail
try daemon "$d" submit.h fail
try daemon "$d" qgraph-mpi.h fail
try libqgraph "$l" qgraph.h ok
try libqgraph "$l" session-impl.h ok
try libqgraph "$l" wire.h ok
try libqgraph "$l" server.h fail
try libqgraph "$l" loop.h fail
try libqgraph "$l" submit.h fail
try tools "$t" qgraph.h ok
try tools "$t" submit.h ok
try tools "$t" wire.h ok
try tools "$t" session-impl.h fail
try tools "$t" server.h fail
try tools "$t" loop.h fail
try mpi "$m" qgraph.h ok
try mpi "$m" session-impl.h fail
try mpi "$m" wire.h fail
try mpi "$m" server.h fail
tap_done
