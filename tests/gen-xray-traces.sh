#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the XRay test programs (tests/xray/*.cc) with clang 14 and runs
# every scenario, leaving real LLVM 14 XRay traces with fixed names:
#
#   OUTDIR/<scenario>.xray   one trace per scenario
#   OUTDIR/bin/<program>     the instrumented binaries (for -m / --binary)
#   OUTDIR/scenarios.json    [{name, trace, binary, mode, options, argv,
#                              env, notes, expect}], trace and binary relative
#                              to OUTDIR (tests/xray_ref.py load_scenarios()
#                              resolves them)
#
# Usage: tests/gen-xray-traces.sh OUTDIR
# Environment: CLANGXX (default clang++-14, else clang++).
# Takes 5-10 s on 2 cores (one scenario sleeps 2.5 s to force a TSCWrap).
# Intermediate files live in a temporary directory inside OUTDIR that is
# removed on exit; nothing is written elsewhere.  Any failed build, failed
# run or missing trace makes the script exit non-zero.
set -euo pipefail

if [ $# -ne 1 ]; then
	sed -n '3,18s/^# \{0,1\}//p' "$0" >&2
	exit 2
fi
src=$(cd "$(dirname "$0")/xray" && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
bin=$out/bin
mkdir -p "$bin"
tmp=$(mktemp -d "$out/.gen-xray.XXXXXX")
# On failure, let the background jobs (builds, the sleeping fdr-tail run)
# finish before their directory is removed.
trap 'wait; rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
unset XRAY_OPTIONS XRAY_FDR_OPTIONS XRAY_BASIC_OPTIONS

if [ -n "${CLANGXX:-}" ]; then
	cxx=$CLANGXX
elif command -v clang++-14 >/dev/null; then
	cxx=clang++-14
elif [ -x /usr/lib/llvm-14/bin/clang++ ]; then
	cxx=/usr/lib/llvm-14/bin/clang++
else
	cxx=clang++
fi

die() {
	echo "gen-xray-traces: $*" >&2
	exit 1
}

# ---- build (2 parallel compiles) -------------------------------------------
# PROG:OPT; tail needs -O2 for real tail calls, the rest -O1.
progs="threads:-O1 recursion:-O1 tail:-O2 args:-O1 events:-O1 unbal:-O1
       basic:-O1 deep:-O1 empty:-O1 workload:-O1"
build() {
	local p=${1%%:*} opt=${1##*:}
	"$cxx" "$opt" -g -fxray-instrument -fxray-instruction-threshold=1 \
		"$src/$p.cc" -o "$bin/$p" -lpthread >"$tmp/build-$p.log" 2>&1 || {
		cat "$tmp/build-$p.log" >&2
		die "building $p failed"
	}
}
pids=()
failed=0
for po in $progs; do
	if [ ${#pids[@]} -ge 2 ]; then
		wait "${pids[0]}" || failed=1
		pids=("${pids[@]:1}")
	fi
	[ $failed -eq 0 ] || break
	build "$po" &
	pids+=($!)
done
for pid in "${pids[@]}"; do
	wait "$pid" || failed=1
done
[ $failed -eq 0 ] || die "build failed"

# ---- run -------------------------------------------------------------------
# Each run writes into its own directory $tmp/run/NAME/ (xray_logfile_base
# ends in '/'), so the runtime's xray-log file PROG.XXXXXX is the only file
# there; collect() renames it to OUTDIR/NAME.xray.
FDR_ENV="xray_mode=xray-fdr xray_logfile_base=PFX"
BASIC_ENV="patch_premain=true xray_mode=xray-basic xray_logfile_base=PFX"

run_fdr() { # NAME PROG OPTIONS [ARG...]
	local name=$1 prog=$2 opts=$3 d=$tmp/run/$1
	shift 3
	rm -f "$out/$name.xray"
	mkdir -p "$d"
	local rc=0
	XRAY_OPTIONS="xray_mode=xray-fdr xray_logfile_base=$d/" \
		"$bin/$prog" "$opts" "$@" >"$tmp/$name.log" 2>&1 || rc=$?
	if [ $rc -ne 0 ]; then
		cat "$tmp/$name.log" >&2
		die "$name: $prog exited with status $rc"
	fi
	collect "$name"
}

run_basic() { # NAME PROG BASIC_OPTIONS ('-' for none)
	local name=$1 prog=$2 bopts=$3 d=$tmp/run/$1 rc=0
	rm -f "$out/$name.xray"
	mkdir -p "$d"
	if [ "$bopts" = - ]; then
		XRAY_OPTIONS="patch_premain=true xray_mode=xray-basic xray_logfile_base=$d/" \
			"$bin/$prog" >"$tmp/$name.log" 2>&1 || rc=$?
	else
		XRAY_OPTIONS="patch_premain=true xray_mode=xray-basic xray_logfile_base=$d/" \
			XRAY_BASIC_OPTIONS="$bopts" "$bin/$prog" >"$tmp/$name.log" 2>&1 || rc=$?
	fi
	if [ $rc -ne 0 ]; then
		cat "$tmp/$name.log" >&2
		die "$name: $prog exited with status $rc"
	fi
	collect "$name"
}

collect() { # NAME
	local d=$tmp/run/$1 f
	local files=("$d"/*)
	if [ ${#files[@]} -ne 1 ] || [ ! -f "${files[0]}" ]; then
		die "$1: expected exactly one trace in $d, found: ${files[*]##*/}"
	fi
	f=${files[0]}
	[ "$(wc -c <"$f")" -ge 32 ] || die "$1: trace $f is shorter than its header"
	mv -f "$f" "$out/$1.xray"
}

T0="func_duration_threshold_us=0"

# The 2.5 s sleep runs in the background while the other scenarios run.
run_fdr fdr-tail tail "$T0" 2500000 &
tail_pid=$!

run_fdr fdr-workload workload "$T0"
run_fdr fdr-threads threads "$T0"
run_fdr fdr-default threads ""
run_fdr fdr-ring threads "$T0,buffer_size=256,buffer_max=2"
run_fdr fdr-recursion recursion "$T0"
run_fdr fdr-ring1 recursion "$T0,buffer_size=128,buffer_max=2"
run_fdr fdr-tail-default tail "" 300000
run_fdr fdr-args args "$T0"
run_fdr fdr-events events "$T0" 1
run_fdr fdr-typed3 events "$T0" 3
run_fdr fdr-unbal unbal "$T0"
run_basic basic-threads basic "$T0"
run_basic basic-deep deep "$T0 max_stack_depth=10 thread_buffer_size=16"
# a 1 s threshold: the call is erased even when a loaded machine preempts it
# (with the default 5 us it was sometimes recorded)
run_basic basic-empty empty func_duration_threshold_us=1000000

wait "$tail_pid" || die "fdr-tail failed"

# ---- scenarios.json --------------------------------------------------------
# The expectations below follow from the programs (see the comment at the
# top of each tests/xray/*.cc) and were checked against llvm-xray 14 output.
# Function names are spelled as llvm-xray -m prints them.
# "threads": number of distinct threads in the trace; "counts": completed
# calls (Enter/Exit or Enter/TailExit pairs) per function for the whole trace.
# "function_ids" (events binary only, whose map llvm-xray cannot read): the
# function ids, in the order of the functions in the source.
# fdr-workload: "nominal_exclusive_share" is what the busy waits add up to on
# an idle machine; preemption on a loaded machine stretches whichever call
# is running (calls of several ms appear), so compare against shares
# computed from the trace itself, not against these.
entries=()
scenario() { # NAME PROGRAM MODE OPTIONS ARGV_JSON NOTES EXPECT_JSON
	local env
	if [ "$3" = fdr ]; then
		env="{\"XRAY_OPTIONS\": \"$FDR_ENV\"}"
	elif [ "$4" = "" ]; then
		env="{\"XRAY_OPTIONS\": \"$BASIC_ENV\"}"
	else
		env="{\"XRAY_OPTIONS\": \"$BASIC_ENV\", \"XRAY_BASIC_OPTIONS\": \"$4\"}"
	fi
	[ -f "$out/$1.xray" ] || die "missing trace $out/$1.xray"
	entries+=("  {\"name\": \"$1\", \"trace\": \"$1.xray\", \"binary\": \"bin/$2\",
   \"mode\": \"$3\", \"options\": \"$4\", \"argv\": $5, \"env\": $env,
   \"notes\": \"$6\",
   \"expect\": $7}")
}

scenario fdr-threads threads fdr "$T0" "[\"$T0\"]" \
	"4 worker threads + main, each: 40 x top(mid(leaf,leaf),leaf) then slow() (50 us); every call recorded, one buffer per thread" \
	'{"version": 5, "threads": 5, "balanced": true,
     "counts": {"tree::leaf(int)": 600, "tree::mid(int)": 200, "tree::top(int)": 200,
                "tree::slow()": 5, "tree::work()": 5, "tree::worker(void*)": 4}}'
scenario fdr-default threads fdr "" '[""]' \
	"fdr-threads program with the default 5 us threshold: short top/mid/leaf subtrees are erased, slow() survives in every thread" \
	'{"version": 5, "threads": 5, "balanced": true, "elided": true,
     "counts": {"tree::slow()": 5, "tree::work()": 5, "tree::worker(void*)": 4},
     "counts_below": {"tree::leaf(int)": 600, "tree::mid(int)": 200, "tree::top(int)": 200}}'
scenario fdr-ring threads fdr "$T0,buffer_size=256,buffer_max=2" "[\"$T0,buffer_size=256,buffer_max=2\"]" \
	"fdr-threads program with a 2 x 256-byte ring: buffers are reused, only the last buffer of at most 2 threads survives" \
	'{"version": 5, "ring_overwrite": true, "buffers": 2, "max_threads": 2,
     "exits_without_entries": true}'
scenario fdr-recursion recursion fdr "$T0" "[\"$T0\"]" \
	"2 rounds of rec(20) (20 nested frames under run) and is_even(10)/is_odd mutual recursion (11 frames)" \
	'{"version": 5, "threads": 1, "balanced": true, "max_depth": 21,
     "counts": {"rec": 40, "is_even": 12, "is_odd": 10, "run": 1}}'
scenario fdr-ring1 recursion fdr "$T0,buffer_size=128,buffer_max=2" "[\"$T0,buffer_size=128,buffer_max=2\"]" \
	"fdr-recursion program with a 2 x 128-byte ring: one thread wraps the ring many times; the earlier of the two surviving buffers comes second in the file (follows from the record count, fixed for this program and clang 14)" \
	'{"version": 5, "threads": 1, "ring_overwrite": true, "buffers": 2,
     "buffers_out_of_time_order": true, "exits_without_entries": true}'
scenario fdr-tail tail fdr "$T0" "[\"$T0\", \"2500000\"]" \
	"-O2 tail calls: caller tail-calls callee (TailExit then the callee Enter, callee is a sibling); sleeper tail-calls usleep(2.5 s), so the next record follows a TSCWrap with delta 0" \
	'{"version": 5, "threads": 1, "balanced": true, "tail_exits": true,
     "tail_exit_functions": ["caller", "sleeper"], "tsc_wrap": true, "gap_seconds": 2.5,
     "counts": {"caller": 4, "callee": 4, "sleeper": 1, "run": 1}}'
scenario fdr-tail-default tail fdr "" '["", "300000"]' \
	"fdr-tail program, default 5 us threshold, 0.3 s sleep: the sleeper Enter/TailExit pair is erased, run() survives" \
	'{"version": 5, "threads": 1, "balanced": true, "elided": true,
     "absent": ["sleeper"], "counts": {"run": 1}}'
scenario fdr-args args fdr "$T0" "[\"$T0\"]" \
	"xray_always_instrument + xray_log_args(1): EnterArg + CallArgument; only the first argument is logged" \
	'{"version": 5, "threads": 1, "balanced": true,
     "args": [100, 7, 3735928559, 0, 18446744073709551615],
     "arg_functions": ["log1", "log1", "log1", "log2", "log1"],
     "counts": {"log1": 4, "log2": 1, "plain": 1, "run": 1}}'
scenario fdr-events events fdr "$T0" "[\"$T0\", \"1\"]" \
	"custom event from a non-leaf function, typed event from a frameless leaf (LLVM 14 sled alignment crash), static payloads; the typed event makes the buffer extents 16 bytes short, cutting the last leaf Exit and the run Exit; binary has a kind-5 sled, so llvm-xray -m and extract fail on it" \
	'{"version": 5, "threads": 1, "custom": ["hello-custom"], "typed": [[42, "typed!"]],
     "typed_extents_short_bytes": 16, "instr_map_unreadable_by_llvm_xray": true,
     "leaf_enters": 5, "leaf_exits": 4, "entries_without_exits": ["run", "leaf"],
     "function_ids": {"after_custom": 1, "custom_emit": 2, "typed_emit": 3, "leaf": 4, "run": 5}}'
scenario fdr-typed3 events fdr "$T0" "[\"$T0\", \"3\"]" \
	"fdr-events program with 3 typed events: the extents are 48 bytes short, so the trace ends 6 records early (run Exit and the last 2.5 leaf pairs)" \
	'{"version": 5, "threads": 1, "custom": ["hello-custom"],
     "typed": [[42, "typed!"], [42, "typed!"], [42, "typed!"]],
     "typed_extents_short_bytes": 48, "instr_map_unreadable_by_llvm_xray": true,
     "leaf_enters": 3, "leaf_exits": 2, "entries_without_exits": ["run", "leaf"],
     "function_ids": {"after_custom": 1, "custom_emit": 2, "typed_emit": 3, "leaf": 4, "run": 5}}'
scenario fdr-unbal unbal fdr "$T0" "[\"$T0\"]" \
	"__xray_patch inside outer()->do_patch() and __xray_log_finalize inside fin_a()->fin_b()->fin_c(): exits without entries and entries never exited" \
	'{"version": 5, "threads": 1,
     "exits_without_entries": ["do_patch", "outer"],
     "entries_without_exits": ["fin_a", "fin_b", "fin_c"],
     "counts": {"balanced": 1, "leaf": 2}}'
scenario fdr-workload workload fdr "$T0" "[\"$T0\"]" \
	"2 threads x 3000 iterations of busy-wait functions with known exclusive times (5/10/20 us), ~0.33 s of trace time, 33000 calls, each at most ~50 us" \
	'{"version": 5, "threads": 2, "balanced": true,
     "counts": {"wl_a": 9000, "wl_b": 6000, "wl_c": 6000, "wl_mid": 6000,
                "wl_outer": 3000, "wl_loop_a": 1, "wl_worker": 1},
     "exclusive_us_per_call": {"wl_a": 5, "wl_b": 10, "wl_c": 20, "wl_mid": 10,
                               "wl_outer": 5},
     "nominal_exclusive_share": {"wl_a": 0.1364, "wl_b": 0.1818, "wl_c": 0.3636,
                                 "wl_mid": 0.1818, "wl_outer": 0.0455,
                                 "wl_loop_a": 0.0455, "wl_worker": 0.0455}}'
scenario basic-threads basic basic "$T0" '[]' \
	"basic mode v3, main + 2 workers, each calls logged(arg) once (NORMAL action 3 + ARG_PAYLOAD) and 10 x b_mid(b_leaf,b_leaf); per-thread chunks written at thread exit" \
	'{"version": 3, "threads": 3, "balanced": true, "args_sorted": [100, 1001, 1002],
     "counts": {"logged": 3, "b_work": 3, "b_mid": 30, "b_leaf": 60, "b_worker": 2}}'
scenario basic-deep deep basic "$T0 max_stack_depth=10 thread_buffer_size=16" '[]' \
	"basic mode, 4 rounds of a 100-deep recursion with max_stack_depth=10 and 16-record thread buffers: 7 chunks; the depth counter is reset at every chunk flush, so rounds after a flush mid-recursion record more than 10 frames" \
	'{"version": 3, "threads": 1, "basic_depth_cap": 10, "first_round_frames": 10,
     "records": 104, "chunks": 7, "thread_buffer_records": 16}'
scenario basic-empty empty basic "func_duration_threshold_us=1000000" '[]' \
	"basic mode with nothing recorded (the only call is erased by a 1 s duration threshold): the file is just the 32-byte header; llvm-xray rejects it (version 768)" \
	'{"version": 3, "header_only": true, "size": 32, "llvm_xray_fails": true}'

{
	echo "["
	for i in "${!entries[@]}"; do
		if [ "$i" -lt $((${#entries[@]} - 1)) ]; then
			printf '%s,\n' "${entries[$i]}"
		else
			printf '%s\n' "${entries[$i]}"
		fi
	done
	echo "]"
} >"$tmp/scenarios.json"
mv -f "$tmp/scenarios.json" "$out/scenarios.json"
