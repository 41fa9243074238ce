#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark: perfgraft's JVMTI agent (libperfgraft-jvmti.so) on the Java
# workload of the tests (tests/java/org/perfgraft/work/Workload.java):
#   1. steady-state run time with and without the agent, in one run:
#      RUNS runs of each, alternating, each running ROUNDS rounds of the
#      workload and timing the rounds after the first third ("steady_ms");
#      the medians and the bests, and their ratios (target: the best run
#      with the agent at most 3% slower than the best without; the best is
#      the figure other load on the machine disturbs least);
#   2. dump bytes per compiled method: the dump of one run with the agent,
#      its LOADs counted by `perfgraft dump --json` (Java methods are the
#      LOADs named NAME(ARGS); the rest are stubs);
#   3. `perfgraft inject` against `perf inject --jit` on one recording of the
#      workload with the agent (perf record -k mono -g -e cpu-clock): wall
#      times (best of INJECT_RUNS) and their ratio.
#
# usage: bench/bench-java.sh [BUILD_DIR]
#
#   BUILD_DIR  meson build directory holding perfgraft (default: build)
#
# Environment: PERFGRAFT_JVMTI (default BUILD_DIR/src/jvmti/
# libperfgraft-jvmti.so), RUNS (default 5), ROUNDS (default 900), RECORD_MS
# (default 4000: the recording's length), INJECT_RUNS (default 3), JAVA,
# JAVAC, PERF.  Everything happens in a temporary directory removed at exit;
# perf always gets --buildid-dir TMP/debug and record -N, so ~/.debug is not
# touched; the /tmp/perf-PID.map files are not written (no
# DumpPerfMapAtExit).  Exits 0 whether or not the target is met; 1 when
# java, perf or perfgraft fails; 2 when something is missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"	# machine_line
root=$(dirname "$here")
build=${1:-$root/build}
runs=${RUNS:-5}
rounds=${ROUNDS:-900}
record_ms=${RECORD_MS:-4000}
inject_runs=${INJECT_RUNS:-3}
java=${JAVA:-java}
javac=${JAVAC:-javac}
perf=${PERF:-perf}
target_overhead=3	# % slower with the agent, at most

die() { echo "bench-java: $*" >&2; exit 2; }
fail() { echo "bench-java: FAILED: $*" >&2; exit 1; }

pg=$build/perfgraft
[ -x "$pg" ] || die "no executable $pg (build first, or pass BUILD_DIR)"
pg=$(cd "$(dirname "$pg")" && pwd)/$(basename "$pg")
agent=${PERFGRAFT_JVMTI:-$(dirname "$pg")/src/jvmti/libperfgraft-jvmti.so}
[ -f "$agent" ] || die "no JVMTI agent $agent (build it, or set PERFGRAFT_JVMTI)"
agent=$(cd "$(dirname "$agent")" && pwd)/$(basename "$agent")
for t in "$java" "$javac" "$perf" python3; do
	command -v "$t" >/dev/null || die "no $t (Debian: openjdk-17-jdk-headless, linux-perf)"
done
for v in "$runs" "$rounds" "$record_ms" "$inject_runs"; do
	[[ "$v" =~ ^[1-9][0-9]*$ ]] || die "RUNS, ROUNDS, RECORD_MS, INJECT_RUNS: positive integers"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-java.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
machine_line "bench-java: "
mkdir "$tmp/classes" "$tmp/runs" "$tmp/rec" "$tmp/pg" "$tmp/perf" "$tmp/debug"
"$javac" -d "$tmp/classes" "$root/tests/java/org/perfgraft/work/Workload.java" ||
	fail "javac"
main=org.perfgraft.work.Workload
flags=(-XX:+PreserveFramePointer -cp "$tmp/classes")

# ---- 1. run time with and without the agent --------------------------------
steady() { # OUT [AGENT_ARG]
	local out=$1
	shift
	(cd "$tmp/runs" && "$java" "${flags[@]:0:1}" "$@" "${flags[@]:1}" "$main" 0 "$rounds") \
		>"$out" 2>"$out.err" || { cat "$out.err" >&2; fail "java $*"; }
	sed -n 's/^steady_ms //p' "$out"
}
echo "bench-java: $runs runs of $rounds rounds, with and without the agent, alternating"
: >"$tmp/plain.ms"
: >"$tmp/agent.ms"
for i in $(seq "$runs"); do
	steady "$tmp/p$i.out" >>"$tmp/plain.ms"
	steady "$tmp/a$i.out" "-agentpath:$agent=dir=$tmp/runs" >>"$tmp/agent.ms"
	rm -f "$tmp"/runs/jit-*.dump
done
median() { sort -n "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
best() { sort -n "$1" | head -n 1; }
pm=$(median "$tmp/plain.ms") am=$(median "$tmp/agent.ms")
pb=$(best "$tmp/plain.ms") ab=$(best "$tmp/agent.ms")

# ---- 2. the recording and its dump -----------------------------------------
echo "bench-java: recording $record_ms ms of the workload with the agent"
(cd "$tmp/rec" && "$perf" --buildid-dir "$tmp/debug" record -N -q -k mono -g -e cpu-clock \
	-o perf.data -- "$java" "${flags[@]:0:1}" "-agentpath:$agent=dir=$tmp/rec" \
	"${flags[@]:1}" "$main" "$record_ms") >"$tmp/rec.out" 2>"$tmp/rec.err" ||
	{ cat "$tmp/rec.err" >&2; fail "perf record"; }
pid=$(sed -n 's/^pid //p' "$tmp/rec.out")
dump=$tmp/rec/jit-$pid.dump
[ -f "$dump" ] || fail "the agent wrote no $dump"
"$pg" dump --json "$dump" >"$tmp/dump.json" || fail "perfgraft dump"
read -r dump_bytes loads methods stubs debug inl < <(python3 - "$tmp/dump.json" "$dump" <<'PY'
import json, os, re, sys
d = json.load(open(sys.argv[1]))
names = [r.get("name", "") for r in d["records"] if r.get("type") == "LOAD"]
meth = sum(1 for n in names if re.search(r"\S\(.*\)$", n))
s = d["summary"]
print(os.path.getsize(sys.argv[2]), s["loads"], meth, s["loads"] - meth, s["debug_infos"],
      s.get("inline_infos", 0))
PY
)

# ---- 3. perfgraft inject against perf inject --jit -------------------------
now_ns() { date +%s%N; }
cat "$tmp/rec/perf.data" "$dump" >/dev/null
pg_best='' perf_best=''
for i in $(seq "$inject_runs"); do
	rm -rf "$tmp/pg/"*
	t0=$(now_ns)
	(cd "$tmp/pg" && "$pg" inject -N -i "$tmp/rec/perf.data" -o inj.data) \
		>/dev/null 2>"$tmp/pg.err" || { cat "$tmp/pg.err" >&2; fail "perfgraft inject"; }
	dt=$(( $(now_ns) - t0 ))
	[ -z "$pg_best" ] || [ "$dt" -lt "$pg_best" ] && pg_best=$dt
	rm -rf "$tmp/perf/"* "$tmp/debug/"* "$tmp"/rec/jitted-*.so
	t0=$(now_ns)
	(cd "$tmp/perf" && "$perf" --buildid-dir "$tmp/debug" inject --jit \
		-i "$tmp/rec/perf.data" -o inj.data) >/dev/null 2>"$tmp/perf.err" ||
		{ tail -n 20 "$tmp/perf.err" >&2; fail "perf inject --jit"; }
	dt=$(( $(now_ns) - t0 ))
	[ -z "$perf_best" ] || [ "$dt" -lt "$perf_best" ] && perf_best=$dt
done
pg_files=$(find "$tmp/pg" -type f | wc -l)
perf_files=$(ls "$tmp"/rec/jitted-*.so 2>/dev/null | wc -l)

# ---- the figures -----------------------------------------------------------
awk -v pm="$pm" -v am="$am" -v pb="$pb" -v ab="$ab" -v runs="$runs" -v rounds="$rounds" \
    -v t="$target_overhead" -v db="$dump_bytes" -v loads="$loads" -v meth="$methods" \
    -v stubs="$stubs" -v dbg="$debug" -v inl="$inl" -v pgt="$pg_best" -v pft="$perf_best" \
    -v pgf="$pg_files" -v pff="$perf_files" 'BEGIN {
	printf "\nsteady state (%d rounds after the first third of %d, %d runs each):\n", rounds - int(rounds / 3), rounds, runs
	printf "  %-16s %10s %10s\n", "", "median ms", "best ms"
	printf "  %-16s %10.1f %10.1f\n", "without agent", pm, pb
	printf "  %-16s %10.1f %10.1f\n", "with agent", am, ab
	ov = (ab / pb - 1) * 100
	printf "  agent/plain: median %.4f (%+.2f%%), best %.4f (%+.2f%%): %s (target on best: <= %d%%)\n",
		am / pm, (am / pm - 1) * 100, ab / pb, ov, ov <= t ? "PASS" : "FAIL", t
	printf "\ndump of the recording: %.2f MB, %d LOADs (%d Java methods, %d stubs), %d DEBUG_INFO, %d INLINE_INFO\n",
		db / 1e6, loads, meth, stubs, dbg, inl
	printf "  bytes per LOAD %.0f, per compiled Java method %.0f\n", db / loads, meth ? db / meth : 0
	printf "\ninject of the recording (best of runs):\n"
	printf "  perfgraft inject  %8.3f s  %d files\n", pgt / 1e9, pgf
	printf "  perf inject --jit %8.3f s  %d jitted-*.so\n", pft / 1e9, pff
	printf "  perf/perfgraft: %.1fx\n", pft / pgt
}'
