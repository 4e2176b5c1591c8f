#!/bin/sh
# daemon-conf.sh - qgraphd and its configuration file, end to end: a bad
# file stops it at start with the file's name and line, a good file is
# used, and the command line wins over the file.
set -u
top=${QG_TOP_BUILDDIR:-.}
qgd="${QG_EXEC:-} $top/daemon/qgraphd"
dir=$(mktemp -d "${TMPDIR:-/tmp}/qgd-conf.XXXXXX") || exit 99
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }

# refused KEY-FILE-TEXT WANT: the daemon must exit 2 saying WANT
refused() {
	printf '%b' "$1" >"$dir/bad.conf"
	out=$($qgd --config "$dir/bad.conf" --foreground --socket "$dir/never.sock" 2>&1)
	rc=$?
	case $out in
	*"$2"*) [ $rc -eq 2 ] && ok "refused (exit $rc): $out" || not_ok "exit $rc: $out" ;;
	*) not_ok "wanted '$2', got (exit $rc): $out" ;;
	esac
}
refused '# qgraphd.conf\npool-size = 1G\n\nmax-nodse = 10\n' "$dir/bad.conf:4: unknown key 'max-nodse'"
refused 'max-nodes = 10\nmax-nodes = 20\n' "bad.conf:2: 'max-nodes' is already set on line 1"
refused 'poll-us =\n' "bad.conf:1: 'poll-us' has no value"
refused 'log-level = debug\nmax-sessions = 99999999999999999999999\n' "bad.conf:2: invalid value for 'max-sessions'"
refused 'user = no-such-user-for-qgraphd\n' "bad.conf:1: invalid value for 'user'"
[ -e "$dir/never.sock" ] && not_ok "a refused daemon left a socket" || ok "no refused daemon made its socket"

out=$($qgd --config "$dir/missing.conf" --foreground 2>&1)
[ $? -eq 2 ] && case $out in *missing.conf*) true ;; *) false ;; esac &&
	ok "a named file that is missing is an error: $out" || not_ok "missing file: $out"

# a good file, with the command line over it: the socket given here wins
printf 'socket = %s/file.sock\nmax-sessions = 2\nlog-level = warn\n' "$dir" >"$dir/good.conf"
$qgd --config "$dir/good.conf" --foreground --socket "$dir/cli.sock" 2>"$dir/log" &
pid=$!
# the socket is bound before the privileges are dropped, and the drop's warning after
for i in $(seq 200); do grep -q " warn: running" "$dir/log" && break; sleep 0.05; done
[ -S "$dir/cli.sock" ] && [ ! -e "$dir/file.sock" ] && ok "the command line's socket wins over the file's" ||
	{ not_ok "no socket at $dir/cli.sock"; sed 's/^/# /' "$dir/log"; }
# as root or not, the daemon warns at start (uid 0, or what it lacks); at warn, no info
grep -q " warn: running" "$dir/log" && ! grep -q " info: " "$dir/log" &&
	ok "the file's log-level (warn) is used" || { not_ok "log-level from the file"; sed 's/^/# /' "$dir/log"; }
kill $pid
wait $pid
rc=$?
pid=
[ $rc -eq 0 ] && ok "it stops cleanly" || not_ok "exit status $rc"
# --no-config reads nothing, even a file named before it
out=$($qgd --config "$dir/bad.conf" --no-config --info 2>&1) && ok "--no-config reads no file" || not_ok "--no-config: $out"

echo "1..$n"
[ $fails -eq 0 ]
