#!/bin/sh
# submit-run.sh - qgraph-submit's saved graphs end to end: gemm and mlp
# --save write a graph file, run FILE sends it through a daemon of its own
# and checks every output against the in-process engine; files that are
# not graph files, and a daemon that is gone, get their documented exit
# status and message.  Prints TAP.
set -u
. "$(dirname "$0")/lib/tap.sh"

if [ -n "${QEMU_AARCH64:-}" ]; then
	bin=$top/client/tools/.libs/qgraph-submit
	tool() { ${QG_EXEC:-} -E "LD_LIBRARY_PATH=$top/client/lib/.libs:$top/client/mpi/.libs" "$bin" --socket "$T/s.sock" "$@"; }
else
	bin=$top/client/tools/qgraph-submit
	tool() { "$bin" --socket "$T/s.sock" "$@"; }
fi
if [ ! -x "$bin" ] || [ ! -x "$top/daemon/qgraphd" ]; then
	skip_all "qgraph-submit or qgraphd not built"
fi
tap_tmpdir run

# run_tool NAME EXPECTED-STATUS PATTERN ARGS...: the tool exits EXPECTED and prints PATTERN
run_tool() {
	name=$1 want=$2 pat=$3
	shift 3
	tool "$@" >"$T/out" 2>&1
	st=$?
	grep -q -- "$pat" "$T/out"
	found=$?
	[ "$st" -eq "$want" ] && [ "$found" -eq 0 ]
	r=$?
	ok $r "$name (exit $st, want $want)"
	[ $r -eq 0 ] || sed 's/^/# /' "$T/out"
}

daemon_start s --pool-size 256M ${QG_DAEMON_ARGS:-} || bail "qgraphd did not start" "$T/s.log"

run_tool "mlp --save writes a file" 0 "ok" mlp --dim 256 --hidden 512 --tokens 5 --layers 2 --repeat 1 \
	--save "$T/mlp.qg"
ok $([ -s "$T/mlp.qg" ]; echo $?) "the mlp graph file is not empty"
run_tool "run FILE: the mlp graph through the daemon equals the in-process run" 0 "checked" \
	run --repeat 2 --print 3 "$T/mlp.qg"
run_tool "run FILE prints the saved description" 0 "qgraph-submit mlp --dim 256" run "$T/mlp.qg"
for ty in q4_0 q8_0 f16; do
	run_tool "gemm --type $ty --save" 0 "ok" gemm -m 64 -n 3 -k 96 --type $ty --repeat 1 --save "$T/g-$ty.qg"
	run_tool "run FILE: the $ty gemm graph checks" 0 "max error vs in-process .* ok" run "$T/g-$ty.qg"
done
for ty in q4_K q6_K; do
	run_tool "gemm --type $ty --save" 0 "stored=$ty: .* ok" gemm -m 64 -n 3 -k 512 --type $ty --repeat 1 \
		--save "$T/g-$ty.qg"
	run_tool "run FILE: the $ty gemm graph checks" 0 "max error vs in-process .* ok" run "$T/g-$ty.qg"
done
run_tool "gemm --type q4_K needs K a multiple of 256" 2 "of 256 for q4_K" gemm -k 96 --type q4_K
run_tool "run --no-check still runs" 0 "median" run --no-check "$T/g-q4_0.qg"

head -c 100 "$T/mlp.qg" >"$T/short.qg"
run_tool "a truncated file is not a graph file" 2 "not a qgraph graph file" run "$T/short.qg"
: >"$T/empty.qg"
run_tool "an empty file is refused" 2 "not a regular file of 1 byte" run "$T/empty.qg"
run_tool "a missing file is named" 2 "No such file" run "$T/nothing.qg"
run_tool "a directory is refused" 2 "not a regular file" run "$T"
run_tool "two files is a usage error" 2 "one FILE" run "$T/mlp.qg" "$T/mlp.qg"
run_tool "run --help" 0 "Usage: qgraph-submit run" run --help

# --json: one JSON object a run, each command's own keys
json_cmd() {
	name=$1
	shift
	tool "$@" >"$T/cmd.json" 2>"$T/cmd.err"
	st=$?
	if ! command -v python3 >/dev/null; then
		ok $([ $st -eq 0 ] && [ "$(wc -l <"$T/cmd.json")" -eq 1 ] && grep -q '^{.*}$' "$T/cmd.json"; echo $?) \
			"$name --json prints one object (exit $st)"
		return
	fi
	python3 - "$T/cmd.json" "$name" >"$T/out" 2>&1 <<'PY'
import json, sys
text = open(sys.argv[1]).read()
assert text.count("\n") == 1, "not one line: %r" % text
d = json.loads(text)
want = {
    "gemm": ["command", "m", "n", "k", "type", "stored", "repeat", "median_ms", "gflops", "upload_ms", "max_error", "ok"],
    "mlp": ["command", "dim", "hidden", "tokens", "layers", "stored", "repeat", "median_ms", "gflops", "max_error", "ok"],
    "run": ["command", "file", "description", "tensors", "repeat", "median_ms", "checked", "outputs", "ok"],
    "info": ["tool_version", "session", "cpu", "best_layout", "kernels"],
}[sys.argv[2]]
missing = [k for k in want if k not in d]
assert not missing, "missing %s in %s" % (missing, d)
if "command" in d:
    assert d["command"] == sys.argv[2] and d["ok"] is True and d["median_ms"] > 0, d
if sys.argv[2] == "run":
    assert len(d["outputs"]) == 1 and d["outputs"][0]["ok"] and len(d["outputs"][0]["first"]) == 2, d
if sys.argv[2] == "info":
    assert d["kernels"] and all(set(k) == {"layout", "kernel", "reason"} for k in d["kernels"]), d
PY
	r=$?
	ok $([ $st -eq 0 ] && [ $r -eq 0 ]; echo $?) "$name --json prints one JSON object with its keys (exit $st)"
	[ $r -eq 0 ] || sed 's/^/# /' "$T/out" "$T/cmd.json" "$T/cmd.err"
}
json_cmd gemm gemm -m 64 -n 3 -k 96 --repeat 1 --json
json_cmd mlp mlp --dim 64 --hidden 96 --tokens 2 --layers 1 --repeat 1 --json
json_cmd run run --repeat 1 --print 2 --json "$T/g-q4_0.qg"
json_cmd info info --json

# global options through getopt_long; stats as JSON and as Prometheus text
run_tool "-V prints the version as every program does" 0 "^qgraph-submit (qgraph) [0-9]" -V
run_tool "an unknown global option is named" 2 "unrecognized option '--frobnicate'" --frobnicate stats
run_tool "stats --help names --json and --prometheus" 0 "--prometheus" stats --help
# stats: a summary by default, every line with --all
tool stats >"$T/stats.short" 2>&1
st=$?
tool stats --all >"$T/stats.all" 2>&1
st_all=$?
n_short=$(wc -l <"$T/stats.short") n_all=$(wc -l <"$T/stats.all")
ok $([ $st -eq 0 ] && [ "$n_short" -le 16 ] && grep -q '^sessions [1-9]' "$T/stats.short" &&
	grep -q '^pool_used [0-9]' "$T/stats.short" && grep -q '^graphs_run [1-9]' "$T/stats.short" &&
	grep -q '^latency_median_le_ns [1-9]' "$T/stats.short" && ! grep -q '^latency_le_ns ' "$T/stats.short"
	echo $?) "stats prints a summary of $n_short lines with sessions, pool use, graphs run and the median latency (exit $st)"
ok $([ $st_all -eq 0 ] && [ "$n_all" -gt "$n_short" ] && grep -q '^latency_le_ns ' "$T/stats.all" &&
	grep -q '^session ' "$T/stats.all"; echo $?) "stats --all prints every line ($n_all, exit $st_all)"
[ "$n_short" -le 16 ] || sed 's/^/# /' "$T/stats.short"
tool stats --json >"$T/stats.json" 2>&1
st=$?
ok $([ $st -eq 0 ] && grep -q '^{"version": "' "$T/stats.json"; echo $?) "stats --json prints one JSON object (exit $st)"
if command -v python3 >/dev/null; then
	python3 - "$T/stats.json" >"$T/out" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["sessions"] >= 1 and d["graphs_run"] >= 1 and d["pool_bytes"] > 0, d
assert d["kernels"] and all("layout" in k and "kernel" in k for k in d["kernels"]), d["kernels"]
assert len(d["session"]) == 1 and d["session"][0]["name"].startswith("qgraph-submit"), d["session"]
assert d["version"] and d["uptime_ms"] >= 0 and d["requests"] >= d["errors"] >= 0, d
assert d["status"]["ok"] >= 1 and "quota" in d["status"] and "max-message" in d["quota_refusals"], d
assert d["latency"]["count"] >= 1 and d["latency"]["cumulative"][-1] <= d["latency"]["count"], d["latency"]
assert sorted(d["latency"]["le_ns"]) == d["latency"]["le_ns"], d["latency"]
assert all(k in d for k in ("timeouts", "cancels", "sessions_dropped", "models")), d
assert all(int(k) >= 1 for k in d["batch_size"]) and sum(d["batch_size"].values()) <= d["graphs_run"], d
PY
	r=$?
	ok $r "stats --json parses, with its counters, kernels and the asking session"
	[ $r -eq 0 ] || { sed 's/^/# /' "$T/out" "$T/stats.json"; }
fi
tool stats --prometheus >"$T/stats.prom" 2>&1
st=$?
# the text exposition format: HELP and TYPE once per metric, before its samples; names qgraph_*; numbers;
# a histogram's samples are its _bucket (le="..." ascending to +Inf), _sum and _count
awk '
	/^# HELP / { if (help[$3]++) { print "two HELP lines for " $3; bad = 1 } next }
	/^# TYPE / { if (type[$3]++) { print "two TYPE lines for " $3; bad = 1 }
		     if ($4 != "gauge" && $4 != "counter" && $4 != "histogram") { print "type " $4; bad = 1 }
		     t = $4; family = $3; next }
	/^#/ { print "stray comment: " $0; bad = 1; next }
	{
		name = $1; sub(/\{.*/, "", name)
		if (t == "histogram") {
			if (name != family "_bucket" && name != family "_sum" && name != family "_count") {
				print "not of histogram " family ": " name; bad = 1
			}
			if (name == family "_bucket") hist_buckets++
			if ($0 ~ /le="\+Inf"/) inf = $NF
			if (name == family "_count" && $NF != inf) { print "count " $NF " is not the +Inf bucket " inf; bad = 1 }
			name = family
		}
		if (name !~ /^qgraph_[a-z_]+$/) { print "bad name: " $0; bad = 1 }
		if (!type[name]) { print "no TYPE before " name; bad = 1 }
		if ($NF !~ /^[0-9]+(\.[0-9]+)?$/) { print "bad value: " $0; bad = 1 }
		if (t == "counter" && name !~ /_total$/) { print "counter without _total: " name; bad = 1 }
		if ($0 ~ /\{/ && $0 !~ /^[a-z_]+\{([a-z_]+="([^"\\]|\\.)*",?)+\} [0-9]+(\.[0-9]+)?$/) { print "bad labels: " $0; bad = 1 }
		n++
	}
	END { if (n < 10) { print n " samples"; bad = 1 }
	      if (hist_buckets < 2) { print "no latency histogram"; bad = 1 } exit bad }
' "$T/stats.prom" >"$T/out" 2>&1
r=$?
ok $([ $st -eq 0 ] && [ $r -eq 0 ] && grep -q '^qgraph_graphs_run_total [1-9]' "$T/stats.prom" &&
	grep -q '^qgraph_session_memory_bytes{session="' "$T/stats.prom" &&
	grep -q '^qgraph_completions_total{status="ok"} [1-9]' "$T/stats.prom" &&
	grep -q '^qgraph_quota_refusals_total{quota="max-message"} 0' "$T/stats.prom" &&
	grep -q '^qgraph_uptime_seconds [0-9]' "$T/stats.prom"; echo $?) \
	"stats --prometheus is the text exposition format, with qgraph_graphs_run_total, per-session series, completions by status, quota refusals, uptime and a latency histogram"
[ $r -eq 0 ] || sed 's/^/# /' "$T/out" "$T/stats.prom"
if command -v promtool >/dev/null; then
	promtool check metrics <"$T/stats.prom" >"$T/out" 2>&1
	ok $? "promtool check metrics"
fi

daemon_stop s
run_tool "no daemon: exit 3" 3 "" run "$T/mlp.qg"

tap_done
