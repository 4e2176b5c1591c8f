#!/bin/sh
# qemu-run.sh - run one test (a program, or a .sh script) for Automake's harness.
#
# Native build: runs it once, as it is.  Cross build (QEMU_AARCH64 set): runs
# it once under each CPU model in QEMU_CPUS and merges the TAP streams into
# one, numbering the results anew and tagging each with its model, so that a
# failure says on which CPU it happened.  A run that exits 77 becomes a
# skipped result; one that crashes or stops short becomes a failed one.
#
# Scripts get QG_EXEC: the command prefix that runs a built program on the
# CPU model at hand (empty on a native build), and QG_CPU_MODEL.
# QG_ONE_MODEL lists test names (basenames) that run on the first model only:
# integration tests whose subject is not the CPU.
set -u
prog=$1
shift

if [ -z "${QEMU_AARCH64:-}" ]; then
	QG_EXEC=${TEST_WRAPPER:-}
	QG_CPU_MODEL=native
	export QG_EXEC QG_CPU_MODEL
	case $prog in
	*.sh) exec ${SHELL:-/bin/sh} "$prog" "$@" ;;
	*) exec ${TEST_WRAPPER:-} "$prog" "$@" ;;
	esac
fi

models=${QEMU_CPUS:-max}
name=$(basename "$prog")
for one in ${QG_ONE_MODEL:-}; do
	[ "$one" = "$name" ] && models=${models%% *}
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/qg-tap.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT
i=0
for model in $models; do
	i=$((i + 1))
	QG_CPU_MODEL=$model
	QG_EXEC="$QEMU_AARCH64 -cpu $model"
	export QG_EXEC QG_CPU_MODEL
	case $prog in
	*.sh) ${SHELL:-/bin/sh} "$prog" "$@" >"$dir/$i.out" 2>&1 ;;
	*) $QG_EXEC "$prog" "$@" >"$dir/$i.out" 2>&1 ;;
	esac
	echo "$i $? $model" >>"$dir/runs"
done

# Merge: renumber, tag with the model, add a result for a run that skipped,
# crashed or stopped short of its plan, and print one plan at the end.
while read -r i rc model; do
	printf '#QG-RUN %s %s\n' "$rc" "$model"
	cat "$dir/$i.out"
done <"$dir/runs" | awk '
	function close_run() {
		if (model == "") return
		if (rc == 77 || (skipall && seen == 0))
			printf "ok %d [%s] # SKIP whole test skipped on this model\n", ++n, model
		else if (rc != 0 && !failed)
			printf "not ok %d [%s] exited with status %d\n", ++n, model, rc
		else if (plan > seen && !failed)
			printf "not ok %d [%s] ran %d of %d planned tests\n", ++n, model, seen, plan
	}
	/^#QG-RUN / {
		close_run()
		rc = $2; model = $3; plan = 0; seen = 0; failed = 0; skipall = 0
		next
	}
	/^1\.\.[0-9]+/ {
		plan = substr($1, 4) + 0
		if (tolower($0) ~ /# *skip/) skipall = 1
		next
	}
	/^(not )?ok( |$)/ {
		bad = ($1 == "not")
		rest = $0
		sub(/^(not )?ok *[0-9]* *(- *)?/, "", rest)
		seen++
		if (bad) failed++
		printf "%s %d [%s] %s\n", bad ? "not ok" : "ok", ++n, model, rest
		next
	}
	/^Bail out!/ { printf "not ok %d [%s] %s\n", ++n, model, $0; failed++; next }
	{ print }
	END { close_run(); printf "1..%d\n", n }'
