#!/bin/sh
# daemon-epoll.sh - the daemon suite again, with the daemon forced onto its
# epoll loop (where io_uring works, the other run covers io_uring), and on
# one compute thread: the loop then has a CPU of its own and polls for the
# end of a graph it expects to end soon (the other run covers the pool).
QG_DAEMON_ARGS="--epoll --threads 1 ${QG_DAEMON_ARGS:-}"
export QG_DAEMON_ARGS
exec ${QG_EXEC:-} "${QG_TOP_BUILDDIR:-.}/tests/daemon-test"
