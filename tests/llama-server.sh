#!/bin/sh
# llama-server.sh - llama.cpp's HTTP server (llama-server) through the ggml
# backend, against a stock llama-server on the same model.  Prints TAP.
#
# On the tiny model of tests/make-llama-gguf, with the pinned llama.cpp's
# GGML_BACKEND_DL build (`bash .ci/llama.sh --print`, which builds
# llama-server without its web UI) and the backend (QG_GGML_PLUGIN, or this
# build's own client/ggml/.libs/libggml-qgraph.so):
#   - stock llama-server answers /health, /completion (also streamed) and
#     /v1/chat/completions on 127.0.0.1 (a port the kernel picks);
#   - llama-server with the plugin, on a qgraphd of the test's own, answers
#     the same, and its greedy tokens equal stock's (or equal up to a step
#     where stock's two best tokens were a near tie: the products are the
#     same quantized ones, summed in another order); the streamed tokens
#     equal the whole answer's; chat answers with printable text (the byte
#     tokens banned through logit_bias: a random model's bytes are not
#     UTF-8, which the chat endpoint refuses);
#   - a second llama-server with the plugin on the same model adds no
#     stored weights to the daemon: one copy for both processes; both
#     offload every layer and their KV cache to the device;
#   - the daemon killed: a request fails with an error and the servers
#     exit (the backend ends a process whose weights went with the
#     daemon), saying why, within a bound: never a hang.
# The HTTP requests are tests/llama-server-client.py's (python3's standard
# library).  Every llama-server runs with -t $QG_LLAMA_THREADS (default 2).
set -u
. "$(dirname "$0")/lib/tap.sh"

threads=${QG_LLAMA_THREADS:-2}
gen=$top/tests/make-llama-gguf
client="python3 $src/tests/llama-server-client.py"
reason=
if [ -n "${QEMU_AARCH64:-}" ]; then
	reason="a cross build: llama.cpp runs natively only"
elif [ ! -x "$gen" ]; then
	reason="tests/make-llama-gguf is not built"
elif ! command -v python3 >/dev/null; then
	reason="no python3 for the HTTP requests"
elif [ -n "${QG_LLAMA_DL:-}" ]; then
	bin=$QG_LLAMA_DL
elif [ -n "${QG_GGML_BINDIR:-}" ]; then
	bin=$QG_GGML_BINDIR
else
	paths=$(bash "$src/.ci/llama.sh" --print 2>/dev/null) || reason="llama.cpp is not built (bash .ci/llama.sh builds it)"
	bin=$(printf '%s\n' "${paths:-}" | sed -n 's/.*LLAMA_DL=\([^ ]*\).*/\1/p')
fi
[ -z "$reason" ] && [ ! -x "$bin/llama-server" ] && reason="no llama-server in $bin"
plugin=${QG_GGML_PLUGIN:-}
[ -z "$plugin" ] && [ -f "$top/client/ggml/.libs/libggml-qgraph.so" ] && plugin=$top/client/ggml/.libs/libggml-qgraph.so
[ -z "$reason" ] && [ ! -f "$plugin" ] && reason="no ggml backend (configure --with-ggml, or QG_GGML_PLUGIN)"
[ -n "$reason" ] && skip_all "$reason"

if [ -n "${QG_LLAMA_KEEP:-}" ]; then
	T=$QG_LLAMA_KEEP
	tap_keep=1
	mkdir -p "$T" || exit 99
else
	tap_tmpdir llsrv
fi
"$gen" --preset tiny --seed 7 -o "$T/tiny.gguf" 2>"$T/gen.log" || bail "make-llama-gguf" "$T/gen.log"

servers=
# server_start NAME [VAR=VALUE...]: a llama-server on 127.0.0.1, a port of
# the kernel's choice, its log in $T/NAME.log; waits (up to 120 s) until
# /health answers.  0 with its base URL in $url and in $url_NAME, its pid
# in $pid_srv_NAME; 1 if it exited or never answered.
server_start() {
	_n=$1
	shift
	env "$@" "$bin/llama-server" -m "$T/tiny.gguf" --host 127.0.0.1 --port 0 -t "$threads" \
		-c 512 -np 1 --no-warmup >"$T/$_n.log" 2>&1 </dev/null &
	_p=$!
	eval "pid_srv_$_n=$_p"
	servers="$servers $_p"
	url=
	_i=0
	while [ $_i -lt 1200 ]; do
		kill -0 "$_p" 2>/dev/null || return 1
		[ -z "$url" ] && url=$(sed -n 's/.*listening on \(http:\/\/127\.0\.0\.1:[0-9]*\).*/\1/p' "$T/$_n.log" | head -n 1)
		if [ -n "$url" ] && $client "$url" health 2>/dev/null; then
			eval "url_$_n=$url"
			return 0
		fi
		_i=$((_i + 1))
		sleep 0.1
	done
	return 1
}
# server_gone NAME SECONDS: the server exited within SECONDS (0), or is
# killed (1)
server_gone() {
	eval "_p=\$pid_srv_$1"
	_i=0
	while kill -0 "$_p" 2>/dev/null; do
		_i=$((_i + 1))
		if [ $_i -gt $(($2 * 10)) ]; then
			kill -9 "$_p" 2>/dev/null
			return 1
		fi
		sleep 0.1
	done
	return 0
}
tap_at_exit='for p in $servers; do kill $p 2>/dev/null; done'

# ------------------------------------------------------------ stock
if server_start stock; then
	pass "stock llama-server answers /health at $url"
else
	not_ok "stock llama-server answers /health"
	show "$T/stock.log"
	tap_done
	exit
fi
for what in complete stream chat; do
	$client "$url_stock" $what "$T/stock-$what.json" 2>"$T/stock-$what.err"
	r=$?
	ok $r "stock: $what answers"
	[ $r -eq 0 ] || show "$T/stock-$what.err" 5
done
kill "$pid_srv_stock"
server_gone stock 30
ok $? "stock llama-server stops on SIGTERM"

# ------------------------------------------------------------ the plugin
daemon_start d --pool-size 256M || bail "qgraphd did not start" "$T/d.log"
sub="$top/client/tools/qgraph-submit --socket $T/d.sock"
stat() { $sub stats --all 2>/dev/null | awk -v k="$1" '$1 == k { print $2 }'; }
penv="GGML_BACKEND_PATH=$plugin QGRAPH_SOCKET=$T/d.sock"

# shellcheck disable=SC2086
if server_start p1 $penv LLAMA_ARG_LOG_VERBOSITY=4; then
	pass "llama-server with the plugin answers /health at $url"
else
	not_ok "llama-server with the plugin answers /health"
	show "$T/p1.log"
	tap_done
	exit
fi
for what in complete stream chat; do
	$client "$url_p1" $what "$T/p1-$what.json" 2>"$T/p1-$what.err"
	r=$?
	ok $r "with the plugin: $what answers"
	[ $r -eq 0 ] || show "$T/p1-$what.err" 5
done
out=$($client - same "$T/stock-complete.json" "$T/p1-complete.json" 2>&1)
ok $? "with the plugin: the greedy tokens are stock's: $out"
out=$($client - same "$T/p1-complete.json" "$T/p1-stream.json" 2>&1)
ok $? "with the plugin: the streamed tokens are the whole answer's: $out"
echo "# chat, stock: $(cat "$T/stock-chat.json" 2>/dev/null | head -c 200)"
echo "# chat, plugin: $(cat "$T/p1-chat.json" 2>/dev/null | head -c 200)"
mm=$(stat mul_mat_interleaved)
[ "${mm:-0}" -gt 0 ]
ok $? "the daemon ran its MUL_MATs (mul_mat_interleaved ${mm:-none})"

# a second server on the same model: the daemon holds its weights once
stored1=$(stat weights_stored) used1=$(stat pool_used) ref1=$(stat weights_referenced_bytes)
# shellcheck disable=SC2086
server_start p2 $penv LLAMA_ARG_LOG_VERBOSITY=4
ok $? "a second llama-server with the plugin answers /health at $url"
$client "$url_p2" complete "$T/p2-complete.json" 2>"$T/p2-complete.err"
ok $? "the second server answers /completion"
out=$($client - same "$T/p1-complete.json" "$T/p2-complete.json" 2>&1)
ok $? "its tokens are the first server's: $out"
stored2=$(stat weights_stored) used2=$(stat pool_used) ref2=$(stat weights_referenced_bytes)
[ -n "$stored1" ] && [ "$stored1" -gt 0 ] && [ "$stored2" = "$stored1" ] && [ "${ref2:-0}" -gt "${ref1:-0}" ]
ok $? "one copy of the weights for both: $stored1 -> $stored2 matrices stored, referenced $ref1 -> $ref2 bytes"
echo "# pool in use: $used1 -> $used2 bytes (the second server's graphs only)"
# both offload the whole model (QGRAPH0 is an IGPU; -lv 4 logs it): fit, on by default,
# counts the weights the first holds as free to the second
grep -q 'offloaded 5/5 layers to GPU' "$T/p1.log" && grep -q 'offloaded 5/5 layers to GPU' "$T/p2.log" &&
	grep -q 'QGRAPH KV buffer size' "$T/p2.log"
ok $? "both servers offload 5/5 layers and keep their KV cache in QGRAPH"

# the daemon dies: requests fail, the servers end, nothing hangs
kill -9 "$pid_d"
wait "$pid_d" 2>/dev/null
pid_d=
tap_pids=
out=$($client "$url_p1" fails 2>&1)
ok $? "the daemon killed: a request fails: $(echo "$out" | head -n 1 | head -c 160)"
server_gone p1 60
ok $? "the daemon killed: the server that was asked exits"
grep -q "qgraphd went away with this process's weights" "$T/p1.log"
ok $? "and says why: qgraphd went away with its weights"
$client "$url_p2" fails >/dev/null 2>&1
server_gone p2 60
ok $? "the daemon killed: the other server exits once asked"
grep -m 1 'went away' "$T/p1.log" | sed 's/^/# p1: /'
tap_done
