#!/bin/sh
# layers.sh - src/'s layers include only downwards: with the include path
# each layer's library is compiled with, a header of its own layer and of
# the layers below it compiles, and a header of any layer above does not.
# QG_CC and QG_*_CPPFLAGS come from make (Makefile.am's layer flags).
set -u
. "$(dirname "$0")/tap.sh"

cc=${QG_CC:-cc}
tap_tmpdir layers

# try LAYER FLAGS HEADER WANT: compile a file including HEADER; WANT is ok
# or fail.  It is ok when it compiles and the header found is the
# project's (a system header of the same name, libevent's event.h, is not).
try() {
	printf '#include "%s"\nint qg_layers_probe;\n' "$3" >"$T/probe.c"
	got=fail
	if $cc $2 -fsyntax-only "$T/probe.c" >"$T/out" 2>&1 &&
	   $cc $2 -M "$T/probe.c" 2>/dev/null | tr ' ' '\n' | grep -Eq "(^|/)(src/[a-z]+|client/[a-z]+|daemon|proto)/$3\$"; then
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
tap_done
