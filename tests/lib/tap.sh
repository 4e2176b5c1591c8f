# tests/lib/tap.sh - what the shell tests share, sourced first by each:
#	. "$(dirname "$0")/lib/tap.sh"
# It sets LC_ALL=C, top (the build tree) and src (the source tree), and
# gives TAP results and the plan, a temporary directory removed at exit,
# and private qgraphd daemons: started on a socket in that directory,
# waited for, and stopped with a check that they exited cleanly.  A test
# with more to undo at exit puts it in tap_at_exit (a command, eval'd
# after the daemons are gone).
# The C tests' counterparts are tests/lib/tap.h and tests/lib/daemon-util.h.

LC_ALL=C
export LC_ALL
top=${QG_TOP_BUILDDIR:-.}
src=${QG_TOP_SRCDIR:-$(dirname "$0")/..}
n=0
failed=0
T=
tap_keep=		# non-empty: leave $T at exit
tap_at_exit=
tap_pids=		# every daemon started, for the exit

# ok STATUS TEXT: test point N, passed when STATUS is 0, else failed (and counted).
ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
	fi
}

# pass TEXT, not_ok TEXT: a passed or a failed test point, for tests that decide with && and ||.
pass() {
	ok 0 "$1"
}
not_ok() {
	ok 1 "$1"
}

# skip TEXT: test point N, skipped because of TEXT.
skip() {
	n=$((n + 1))
	echo "ok $n # SKIP $1"
}

# show FILE [LINES]: the last LINES (default 30) of FILE as TAP comments,
# each ended by a newline (a last line without one would swallow the
# next test point).
show() {
	tail -n "${2:-30}" "$1" | awk '{ print "# " $0 }'
}

# skip_all REASON: the plan of a test that cannot run here; exits 0.
skip_all() {
	echo "1..0 # SKIP $1"
	exit 0
}

# bail REASON [LOG]: the rest cannot run: "Bail out!", LOG as comments, exit 1.
bail() {
	echo "Bail out! $1"
	[ -n "${2:-}" ] && show "$2" 50
	exit 1
}

# tap_done: the plan, after the results; the status to exit with: 0 if every test passed.
tap_done() {
	echo "1..$n"
	[ "$failed" -eq 0 ]
}

# tap_tmpdir NAME: T, a new directory (qg-NAME.XXXXXX under $TMPDIR) removed at exit.
tap_tmpdir() {
	T=$(mktemp -d "${TMPDIR:-/tmp}/qg-$1.XXXXXX") || exit 99
}

# daemon_start NAME ARGS...: a qgraphd of this test's own on $T/NAME.sock,
# its log in $T/NAME.log, logging at warn unless ARGS say otherwise (the
# last of an option wins); waits up to 30 s for it to say it is ready.  0
# with its pid in daemon_pid (and in $pid_NAME), or 1 if it exited first
# or never got ready (then it is gone, and daemon_pid empty).
daemon_start() {
	_name=$1
	shift
	: >"$T/$_name.ready"
	${QG_EXEC:-} "$top/daemon/qgraphd" --no-config -f -s "$T/$_name.sock" --log-level warn "$@" --ready-fd 3 \
		3>"$T/$_name.ready" 2>"$T/$_name.log" &
	daemon_pid=$!
	eval "pid_$_name=$daemon_pid"
	tap_pids="$tap_pids $daemon_pid"
	_i=0
	while ! grep -q READY "$T/$_name.ready" 2>/dev/null; do
		_i=$((_i + 1))
		if [ $_i -gt 300 ] || ! kill -0 "$daemon_pid" 2>/dev/null; then
			kill "$daemon_pid" 2>/dev/null
			wait "$daemon_pid" 2>/dev/null
			daemon_pid=
			eval "pid_$_name="
			return 1
		fi
		sleep 0.1
	done
	return 0
}

# daemon_stop NAME: stop that daemon (SIGTERM) and wait for it; a test
# point: it exits 0, its log shown if not.  Returns its exit status.
daemon_stop() {
	eval "_pid=\${pid_$1:-}"
	if [ -z "$_pid" ]; then
		ok 1 "qgraphd $1 stops cleanly: it is not running"
		return 1
	fi
	kill "$_pid" 2>/dev/null
	wait "$_pid" 2>/dev/null
	_st=$?
	eval "pid_$1="
	tap_pids=$(echo " $tap_pids " | sed "s/ $_pid / /")
	ok $_st "qgraphd $1 stops cleanly on SIGTERM (exit $_st)"
	[ $_st -eq 0 ] || show "$T/$1.log"
	return $_st
}

# At exit: every daemon still running killed, the test's own undoing, $T removed.
tap_cleanup() {
	for _p in $tap_pids; do
		kill "$_p" 2>/dev/null && wait "$_p" 2>/dev/null
	done
	eval "$tap_at_exit"
	[ -n "$T" ] && [ -z "$tap_keep" ] && rm -rf "$T"
}
trap tap_cleanup EXIT
