#!/usr/bin/env bash
# .ci/deb.sh - build qgraph's Debian packages from this checkout, check them
# with lintian, install them and use what they installed; TAP on stdout.
#
#   bash .ci/deb.sh [OUTDIR]    (root; default OUTDIR build/deb)
#
# The packages are built from a copy of the tracked files (what a source
# package would hold), with DEB_BUILD_OPTIONS=nocheck: the native suite
# already runs make check on the same tree.  Installing them replaces any
# qgraph installed on this machine; it is meant for CI machines.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD
out=${1:-$top/build/deb}
rm -rf "$out"
mkdir -p "$out/src"
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
check() { local what=$1; shift; if "$@" >>"$out/checks.log" 2>&1; then ok "$what"; else notok "$what"; fi; }

# the tracked files, and debian/ as it is in the work tree
git ls-files -z | xargs -0 cp -a --parents -t "$out/src" 2>/dev/null || { echo "Bail out! copying the tree"; exit 1; }
cp -a debian "$out/src/"
t0=$SECONDS
if (cd "$out/src" && DEB_BUILD_OPTIONS="nocheck parallel=${QG_JOBS_N:-2}" dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
	ok "dpkg-buildpackage -us -uc -b ($((SECONDS - t0)) s)"
else
	notok "dpkg-buildpackage -us -uc -b"
	tail -n 40 "$out/build.log" | sed 's/^/# /'
	echo "1..$n"
	exit 1
fi
want="qgraphd libqgraph1 libqgraph-dev qgraph-tools libqgraph-mpi0 libqgraph-mpi-dev"
debs=
for p in $want; do
	check "package $p built" ls "$out"/${p}_*.deb
	debs="$debs $(ls "$out"/${p}_*.deb 2>/dev/null)"
done

# the symbols files say every symbol the libraries export, no more, no less
# (dpkg-gensymbols warns of a difference; it fails the build only on a loss)
if grep -q 'dpkg-gensymbols: warning' "$out/build.log"; then
	notok "debian/*.symbols match the libraries' exports"
	grep -A 12 'dpkg-gensymbols: warning' "$out/build.log" | head -n 24 | sed 's/^/# /'
else
	ok "debian/*.symbols match the libraries' exports"
fi

# lintian: no errors (warnings are listed in the log and README.Debian)
changes=$(ls "$out"/qgraph_*.changes 2>/dev/null | head -n 1)
lintian --no-tag-display-limit "$changes" >"$out/lintian.log" 2>&1
if grep -q '^E: ' "$out/lintian.log"; then
	notok "lintian reports no errors"
	grep '^E: ' "$out/lintian.log" | head -n 20 | sed 's/^/# /'
else
	ok "lintian reports no errors ($(grep -c '^W: ' "$out/lintian.log") warnings)"
fi

# install them, and use what they installed
check "apt-get installs every package (and what they depend on)" \
	env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $debs
check "qgraphd installed in /usr/sbin" test -x /usr/sbin/qgraphd
check "the configuration is a conffile" grep -qx /etc/qgraph/qgraphd.conf /var/lib/dpkg/info/qgraphd.conffiles
check "the units are installed" test -f /lib/systemd/system/qgraphd.service -a -f /lib/systemd/system/qgraphd.socket
check "the sysusers.d entry is installed" test -f /usr/lib/sysusers.d/qgraphd.conf
check "the user qgraph exists after install" getent passwd qgraph
check "the installed configuration checks" /usr/sbin/qgraphd --check-config
check "libqgraph's pkg-config file" pkg-config --exists libqgraph
check "man pages are installed" man -w qgraphd qgraphd.conf libqgraph qgraph-submit

# a program built against the installed library, run through an installed daemon
cat >"$out/hello.c" <<'C'
#include <qgraph.h>
#include <stdio.h>
int main(void)
{
	struct qgraph_session *s;
	char err[256];
	int r = qgraph_connect(NULL, &s, err, sizeof(err));
	if (r) {
		fprintf(stderr, "connect: %s\n", err);
		return 1;
	}
	qgraph_session_close(s);
	return 0;
}
C
# shellcheck disable=SC2046 # pkg-config prints flags
check "a client compiles against libqgraph-dev" cc -o "$out/hello" "$out/hello.c" $(pkg-config --cflags --libs libqgraph)
# the installed daemon started as qgraphd.service starts it, where systemd
# does not run: as root with the unit's bounding set (setpriv), reading
# /etc/qgraph/qgraphd.conf (user = qgraph, group = qgraph), on a socket of
# this run's (the unit's /run/qgraph is the socket unit's)
# (a directory of the daemon user's that root made: what /run/qgraph is,
# and what a client needs to trust a daemon that is not root)
sock=$out/run/qgraphd.sock
mkdir -p "$out/run"
chown qgraph:qgraph "$out/run"
: >"$out/ready"
setpriv --bounding-set=-all,+ipc_lock,+setuid,+setgid,+setpcap,+chown \
	/usr/sbin/qgraphd --foreground --socket "$sock" --pool-size 64M --ready-fd 3 \
	3>"$out/ready" >"$out/qgraphd.log" 2>&1 &
pid=$!
# READY on the fd once it serves (or up to 30 s, then the checks below fail)
for _ in $(seq 1 300); do grep -q READY "$out/ready" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
check "the installed daemon runs as the packaged user qgraph" test "$(ps -o user= -p "$pid" 2>/dev/null)" = qgraph
check "the installed client connects to the installed daemon" env QGRAPH_SOCKET="$sock" "$out/hello"
# the demo's workload (.ci/demo): quantize, GEMMs checked in-process, a saved graph run
head -c $((256 * 256 * 4)) /dev/zero >"$out/w.f32"
check "qgraph-quantize writes every Q4_0 layout" sh -c 'for t in q4_0 q4_0_4x4 q4_0_4x8 q4_0_8x8; do
	qgraph-quantize --type $t --rows 256 --cols 256 "$1" "$1.$t" || exit 1; done' sh "$out/w.f32"
check "qgraph-submit gemm through the installed daemon" env QGRAPH_SOCKET="$sock" qgraph-submit gemm -m 256 -n 8 -k 256
check "qgraph-submit mlp --save and run through the installed daemon" \
	sh -c 'QGRAPH_SOCKET="$1" qgraph-submit mlp --save "$2" && QGRAPH_SOCKET="$1" qgraph-submit run "$2"' sh "$sock" "$out/ffn.qgraph"
check "qgraph-submit stats from the installed daemon" env QGRAPH_SOCKET="$sock" qgraph-submit stats
kill "$pid" 2>/dev/null
wait "$pid"
check "qgraphd stops cleanly on SIGTERM (exit $?)" test "$?" = 0

# purge leaves nothing of the packages' files behind (the user and group
# stay, as Debian's sysusers entries do)
# shellcheck disable=SC2086
dpkg -L $want 2>/dev/null | sort -u >"$out/files"
check "apt-get purge removes them" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $want
# files and links to files: directories (and /lib, a link to one) are shared
left=$(while read -r f; do [ ! -d "$f" ] && { [ -f "$f" ] || [ -L "$f" ]; } && echo "$f"; done <"$out/files")
check "purge leaves none of their $(wc -l <"$out/files") paths' files (left: ${left:-none})" test -z "$left"
check "purge removes the configuration" test ! -e /etc/qgraph/qgraphd.conf
check "the user and group qgraph stay, as Debian leaves them" getent group qgraph
echo "1..$n"
[ "$fails" = 0 ]
