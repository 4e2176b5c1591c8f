#!/bin/sh
# install-test.sh - `make install DESTDIR=D` puts every file under
# D$(prefix) (the systemd units, the sysusers.d file and the configuration
# included: nothing goes to /lib/systemd or /etc of the machine), qgraphd
# goes to sbin, the units name the installed paths, and `make uninstall
# DESTDIR=D` leaves no file behind.
set -u
. "$(dirname "$0")/lib/tap.sh"

make=${MAKE:-make}
if [ -n "${QG_EXEC:-}" ] || [ ! -f "$top/Makefile" ]; then
	skip_all "a cross build, or no build directory"
fi
prefix=$(sed -n 's/^prefix = //p' "$top/Makefile")
tap_tmpdir install
# DESTDIR, and beside it make's output
dest=$T/root
log=$T/make.log
mkdir "$dest" || exit 99

# MAKEFLAGS of the check that runs us name a jobserver we do not have
if env -u MAKEFLAGS -u MFLAGS $make -C "$top" install DESTDIR="$dest" >"$log" 2>&1; then
	pass "make install DESTDIR=$dest (prefix $prefix)"
else
	not_ok "make install failed"; sed 's/^/# /' "$log"
fi
outside=$(cd "$dest" && find . \( -type f -o -type l \) | sed 's|^\.||' | grep -v "^$prefix/" || true)
[ -z "$outside" ] && pass "every installed file is under DESTDIR$prefix" ||
	not_ok "installed outside the prefix: $(echo $outside)"
for f in sbin/qgraphd lib/systemd/system/qgraphd.service lib/systemd/system/qgraphd.socket \
	lib/sysusers.d/qgraph.conf etc/qgraph/qgraphd.conf share/qgraph/qgraphd.conf.example share/qgraph/qgraph.proto; do
	[ -e "$dest$prefix/$f" ] && pass "installed: $f" || not_ok "missing: $f"
done
grep -q "^ExecStart=$prefix/sbin/qgraphd\$" "$dest$prefix/lib/systemd/system/qgraphd.service" &&
	pass "the unit runs $prefix/sbin/qgraphd" || not_ok "the unit's ExecStart: $(grep ExecStart "$dest$prefix/lib/systemd/system/qgraphd.service")"
"$dest$prefix/sbin/qgraphd" --help | grep -q "$prefix/etc/qgraph/qgraphd.conf" &&
	pass "qgraphd reads $prefix/etc/qgraph/qgraphd.conf" || not_ok "qgraphd's configuration file is not under the prefix"
"$dest$prefix/sbin/qgraphd" --check-config --config "$dest$prefix/etc/qgraph/qgraphd.conf" >/dev/null 2>&1
rc=$?
# the example names the user qgraph, which this machine may not have (sysusers makes it)
if getent passwd qgraph >/dev/null; then
	[ $rc -eq 0 ] && pass "the installed configuration checks" || not_ok "the installed configuration: exit $rc"
else
	[ $rc -eq 78 ] && pass "the installed configuration names the user qgraph, not on this machine (exit 78)" ||
		not_ok "the installed configuration without the user qgraph: exit $rc"
fi
if env -u MAKEFLAGS -u MFLAGS $make -C "$top" uninstall DESTDIR="$dest" >"$log" 2>&1; then
	left=$(cd "$dest" && find . -type f)
	[ -z "$left" ] && pass "make uninstall DESTDIR leaves no file" || not_ok "left after uninstall: $(echo $left)"
else
	not_ok "make uninstall failed"; sed 's/^/# /' "$log"
fi
tap_done
