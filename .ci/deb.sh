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
sock=$out/run/qgraphd.sock
mkdir -p "$out/run"
: >"$out/ready"
/usr/sbin/qgraphd --foreground --no-config --socket "$sock" --pool-size 64M --ready-fd 3 \
	3>"$out/ready" >"$out/qgraphd.log" 2>&1 &
pid=$!
# READY on the fd once it serves (or up to 30 s, then the checks below fail)
for _ in $(seq 1 300); do grep -q READY "$out/ready" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
check "the installed client connects to the installed daemon" env QGRAPH_SOCKET="$sock" "$out/hello"
check "qgraph-submit gemm through the installed daemon" env QGRAPH_SOCKET="$sock" qgraph-submit gemm -m 256 -n 8 -k 256
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
check "qgraphd stops on SIGTERM" true

check "dpkg --purge removes them" dpkg --purge $want
check "purge removes the configuration" test ! -e /etc/qgraph/qgraphd.conf
echo "1..$n"
[ "$fails" = 0 ]
