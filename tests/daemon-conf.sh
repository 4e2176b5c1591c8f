#!/bin/sh
# daemon-conf.sh - qgraphd and its configuration file, end to end: a bad
# file stops it at start with the file's name and line, a good file is
# used, and the command line wins over the file.
set -u
. "$(dirname "$0")/lib/tap.sh"

qgd="${QG_EXEC:-} $top/daemon/qgraphd"
tap_tmpdir conf
# not daemon_start's: this daemon reads a configuration file
pid=
tap_at_exit='[ -n "$pid" ] && kill $pid 2>/dev/null'

# refused KEY-FILE-TEXT WANT: the daemon must exit 78 (EX_CONFIG) saying WANT
refused() {
	printf '%b' "$1" >"$T/bad.conf"
	out=$($qgd --config "$T/bad.conf" --foreground --socket "$T/never.sock" 2>&1)
	rc=$?
	case $out in
	*"$2"*) [ $rc -eq 78 ] && pass "refused (exit $rc): $out" || not_ok "exit $rc: $out" ;;
	*) not_ok "wanted '$2', got (exit $rc): $out" ;;
	esac
}
refused '# qgraphd.conf\npool-size = 1G\n\nmax-nodse = 10\n' "$T/bad.conf:4: unknown key 'max-nodse'"
refused 'max-nodes = 10\nmax-nodes = 20\n' "bad.conf:2: 'max-nodes' is already set on line 1"
refused 'poll-us =\n' "bad.conf:1: 'poll-us' has no value"
refused 'log-level = debug\nmax-sessions = 99999999999999999999999\n' "bad.conf:2: invalid value for 'max-sessions'"
refused 'user = no-such-user-for-qgraphd\n' "bad.conf:1: invalid value for 'user'"
[ -e "$T/never.sock" ] && not_ok "a refused daemon left a socket" || pass "no refused daemon made its socket"

out=$($qgd --config "$T/missing.conf" --foreground 2>&1)
[ $? -eq 78 ] && case $out in *missing.conf*) true ;; *) false ;; esac &&
	pass "a named file that is missing is an error: $out" || not_ok "missing file: $out"

# a good file, with the command line over it: the socket given here wins
printf 'socket = %s/file.sock\nmax-sessions = 2\nlog-level = warn\n' "$T" >"$T/good.conf"
$qgd --config "$T/good.conf" --foreground --socket "$T/cli.sock" 2>"$T/log" &
pid=$!
# the socket is bound before the privileges are dropped, and the drop's warning after
for i in $(seq 200); do grep -q " warn: running" "$T/log" && break; sleep 0.05; done
[ -S "$T/cli.sock" ] && [ ! -e "$T/file.sock" ] && pass "the command line's socket wins over the file's" ||
	{ not_ok "no socket at $T/cli.sock"; sed 's/^/# /' "$T/log"; }
# as root or not, the daemon warns at start (uid 0, or what it lacks); at warn, no info
grep -q " warn: running" "$T/log" && ! grep -q " info: " "$T/log" &&
	pass "the file's log-level (warn) is used" || { not_ok "log-level from the file"; sed 's/^/# /' "$T/log"; }
kill $pid
wait $pid
rc=$?
pid=
[ $rc -eq 0 ] && pass "it stops cleanly" || not_ok "exit status $rc"
# --no-config reads nothing, even a file named before it
out=$($qgd --config "$T/bad.conf" --no-config --info 2>&1) && pass "--no-config reads no file" || not_ok "--no-config: $out"

# --check-config: like sshd -t, 0 for a good file, 78 and the reason for a bad one
printf 'max-nodes = 10\nmax-nodes = 20\n' >"$T/bad.conf"
out=$($qgd --config "$T/bad.conf" --check-config 2>&1)
rc=$?
[ $rc -eq 78 ] && case $out in *"bad.conf:2: 'max-nodes' is already set"*) true ;; *) false ;; esac &&
	pass "--check-config: a bad file exits 78 with the reason" || not_ok "--check-config of a bad file: $rc $out"
# a FIFO (or any other file that is not regular) is refused without a read
# that waits for a writer; timeout fires only if the open blocks again
mkfifo "$T/fifo.conf"
out=$(timeout 10 $qgd --config "$T/fifo.conf" --check-config 2>&1)
rc=$?
[ $rc -eq 78 ] && case $out in *"fifo.conf: not a regular file"*) true ;; *) false ;; esac &&
	pass "--check-config: a FIFO exits 78 naming the file: $out" || not_ok "--check-config of a FIFO: $rc $out"
out=$($qgd --config "$T/good.conf" --check-config 2>&1)
[ $? -eq 0 ] && case $out in *"good.conf: good"*) true ;; *) false ;; esac &&
	pass "--check-config: a good file exits 0" || not_ok "--check-config of a good file: $out"
# --dump-config: like sshd -T, the configuration in effect, in the file's syntax: it reads back the same
$qgd --config "$T/good.conf" --max-nodes 77 --dump-config >"$T/dump.conf" 2>&1
grep -qx "max-nodes = 77" "$T/dump.conf" && grep -qx "max-sessions = 2" "$T/dump.conf" &&
	grep -qx "socket = $T/file.sock" "$T/dump.conf" && grep -qx "log-level = warn" "$T/dump.conf" &&
	pass "--dump-config shows the file's and the command line's settings" ||
	{ not_ok "--dump-config"; sed 's/^/# /' "$T/dump.conf"; }
$qgd --config "$T/dump.conf" --dump-config >"$T/dump2.conf" 2>&1 && cmp -s "$T/dump.conf" "$T/dump2.conf" &&
	pass "what --dump-config prints is read back to the same configuration" ||
	{ not_ok "--dump-config does not read back"; diff "$T/dump.conf" "$T/dump2.conf" | sed 's/^/# /'; }

# without --foreground and without the journal the log is syslog's, but a failed start still says why on stderr
out=$($qgd --no-config --socket "$T/no/such/dir/q.sock" 2>&1)
rc=$?
[ $rc -ne 0 ] && case $out in *"cannot create the runtime directory"*) true ;; *) false ;; esac &&
	pass "a failed start without --foreground says why on stderr (exit $rc)" || not_ok "a silent failed start: $rc '$out'"
# stderr the journal's stream ($JOURNAL_STREAM its device:inode): lines with <N> priorities, no timestamps
: >"$T/journal"
JOURNAL_STREAM=$(stat -c '%d:%i' "$T/journal") $qgd --no-config --socket "$T/no/such/dir/q.sock" 2>>"$T/journal"
grep -q '^<6>info: configuration: none' "$T/journal" && grep -q '^<3>error: cannot create the runtime directory' "$T/journal" &&
	pass "under the journal: <6> and <3> prefixes" || { not_ok "journal prefixes"; sed 's/^/# /' "$T/journal"; }

tap_done
