#!/bin/sh
# install-test.sh - `make install DESTDIR=D` puts every file under
# D$(prefix) (the systemd units, the sysusers.d file and the configuration
# included: nothing goes to /lib/systemd or /etc of the machine), qgraphd
# goes to sbin, the units name the installed paths, and `make uninstall
# DESTDIR=D` leaves no file behind.
set -u
top=${QG_TOP_BUILDDIR:-.}
make=${MAKE:-make}
if [ -n "${QG_EXEC:-}" ] || [ ! -f "$top/Makefile" ]; then
	echo "1..0 # SKIP a cross build, or no build directory"
	exit 77
fi
prefix=$(sed -n 's/^prefix = //p' "$top/Makefile")
dest=$(mktemp -d "${TMPDIR:-/tmp}/qgd-install.XXXXXX") || exit 99
trap 'rm -rf "$dest"' EXIT
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }

# MAKEFLAGS of the check that runs us name a jobserver we do not have
if env -u MAKEFLAGS -u MFLAGS $make -C "$top" install DESTDIR="$dest" >"$dest.log" 2>&1; then
	ok "make install DESTDIR=$dest (prefix $prefix)"
else
	not_ok "make install failed"; sed 's/^/# /' "$dest.log"
fi
outside=$(cd "$dest" && find . \( -type f -o -type l \) | sed 's|^\.||' | grep -v "^$prefix/" || true)
[ -z "$outside" ] && ok "every installed file is under DESTDIR$prefix" ||
	not_ok "installed outside the prefix: $(echo $outside)"
for f in sbin/qgraphd lib/systemd/system/qgraphd.service lib/systemd/system/qgraphd.socket \
	lib/sysusers.d/qgraph.conf etc/qgraph/qgraphd.conf share/qgraph/qgraphd.conf.example share/qgraph/qgraph.proto; do
	[ -e "$dest$prefix/$f" ] && ok "installed: $f" || not_ok "missing: $f"
done
grep -q "^ExecStart=$prefix/sbin/qgraphd\$" "$dest$prefix/lib/systemd/system/qgraphd.service" &&
	ok "the unit runs $prefix/sbin/qgraphd" || not_ok "the unit's ExecStart: $(grep ExecStart "$dest$prefix/lib/systemd/system/qgraphd.service")"
"$dest$prefix/sbin/qgraphd" --help | grep -q "$prefix/etc/qgraph/qgraphd.conf" &&
	ok "qgraphd reads $prefix/etc/qgraph/qgraphd.conf" || not_ok "qgraphd's configuration file is not under the prefix"
"$dest$prefix/sbin/qgraphd" --check-config --config "$dest$prefix/etc/qgraph/qgraphd.conf" >/dev/null 2>&1
rc=$?
# the example names the user qgraph, which this machine may not have (sysusers makes it)
if getent passwd qgraph >/dev/null; then
	[ $rc -eq 0 ] && ok "the installed configuration checks" || not_ok "the installed configuration: exit $rc"
else
	[ $rc -eq 78 ] && ok "the installed configuration names the user qgraph, not on this machine (exit 78)" ||
		not_ok "the installed configuration without the user qgraph: exit $rc"
fi
if env -u MAKEFLAGS -u MFLAGS $make -C "$top" uninstall DESTDIR="$dest" >"$dest.log" 2>&1; then
	left=$(cd "$dest" && find . -type f)
	[ -z "$left" ] && ok "make uninstall DESTDIR leaves no file" || not_ok "left after uninstall: $(echo $left)"
else
	not_ok "make uninstall failed"; sed 's/^/# /' "$dest.log"
fi
rm -f "$dest.log"
echo "1..$n"
[ $fails -eq 0 ]
