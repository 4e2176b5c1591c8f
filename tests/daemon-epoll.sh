#!/bin/sh
# daemon-epoll.sh - the daemon suite again, with the daemon forced onto its
# epoll loop (where io_uring works, the other run covers io_uring).
QG_DAEMON_ARGS="--epoll ${QG_DAEMON_ARGS:-}"
export QG_DAEMON_ARGS
exec ${QG_EXEC:-} "${QG_TOP_BUILDDIR:-.}/tests/daemon-test"
