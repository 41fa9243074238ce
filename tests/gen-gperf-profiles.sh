#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the gperftools test programs (tests/gperf/*.c) with gcc and runs
# every scenario under libprofiler (gperftools 2.10), leaving real CPU
# profiles with fixed names:
#
#   OUTDIR/<scenario>.prof   one CPU profile per scenario
#   OUTDIR/bin/              the programs and their own shared libraries
#   OUTDIR/scenarios.json    [{name, profile, binary, libs, description}],
#                            all paths absolute (binary = the main program,
#                            libs = its own .so files)
#
# Scenarios: pie, nopie, ownlib, threads, deep, api, dlopen, vdso, inline.
# Usage: tests/gen-gperf-profiles.sh OUTDIR [SCENARIO...]
#   (with SCENARIOs: only those are run and listed in scenarios.json)
# Environment: CC (default gcc), LIBPROFILER (default: libprofiler.so.0 or
# libprofiler.so in /usr/lib/x86_64-linux-gnu, else found by ldconfig),
# GPERF_SCALE=K (default 1): run K times longer (K times the work, so more
# ticks and more distinct stacks); only pie, nopie, ownlib, vdso and inline
# take a length, asking it of another scenario is an error.
# Takes ~10 s of CPU (each run <= ~1.3 s).  Intermediate files live in a
# temporary directory inside OUTDIR that is removed on exit; nothing is
# written elsewhere.  A failed build, a failed run, or a profile without
# the gperftools header makes the script exit non-zero.
set -euo pipefail

if [ $# -lt 1 ]; then
	sed -n '3,25s/^# \{0,1\}//p' "$0" >&2
	exit 2
fi
src=$(cd "$(dirname "$0")/gperf" && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
shift
all=(pie nopie ownlib threads deep api dlopen vdso inline)
only=("$@")
for s in "${only[@]}"; do
	case " ${all[*]} " in
	*" $s "*) ;;
	*) echo "gen-gperf-profiles: unknown scenario '$s' (${all[*]})" >&2; exit 2 ;;
	esac
done
scale=${GPERF_SCALE:-1}
case $scale in
'' | *[!0-9]* | 0*) echo "gen-gperf-profiles: GPERF_SCALE must be a positive integer" >&2; exit 2 ;;
esac
bin=$out/bin
mkdir -p "$bin"
tmp=$(mktemp -d "$out/.gen-gperf.XXXXXX")
trap 'wait; rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
# Settings inherited from the caller would change the profiles.
unset CPUPROFILE CPUPROFILE_FREQUENCY CPUPROFILE_REALTIME CPUPROFILESIGNAL \
	CPUPROFILE_PER_THREAD_TIMERS CPUPROFILE_TIMER_SIGNAL \
	TCMALLOC_STACKTRACE_METHOD TCMALLOC_STACKTRACE_METHOD_VERBOSE
# Resolve every PLT slot at load time, before libprofiler starts its timer,
# so that no tick lands in lazy binding (ld.so internals whose names pprof
# and perf spell differently).
export LD_BIND_NOW=1

die() {
	echo "gen-gperf-profiles: $*" >&2
	exit 1
}

cc=${CC:-gcc}
command -v "$cc" >/dev/null || die "C compiler '$cc' not found"
if [ -n "${LIBPROFILER:-}" ]; then
	prof=$LIBPROFILER
else
	prof=
	for cand in /usr/lib/x86_64-linux-gnu/libprofiler.so.0 \
		/usr/lib/x86_64-linux-gnu/libprofiler.so; do
		if [ -e "$cand" ]; then
			prof=$cand
			break
		fi
	done
	if [ -z "$prof" ]; then
		prof=$(/sbin/ldconfig -p 2>/dev/null | awk '/libprofiler\.so/ {print $NF; exit}')
	fi
fi
[ -n "$prof" ] && [ -e "$prof" ] ||
	die "libprofiler.so not found (install libgoogle-perftools4/-dev or set LIBPROFILER)"
[ -e /usr/include/gperftools/profiler.h ] ||
	die "gperftools/profiler.h not found (install libgoogle-perftools-dev)"

# ---- build -----------------------------------------------------------------
# build NAME ARGS...: runs $cc ARGS, output to $bin/NAME, log on failure.
build() {
	local name=$1
	shift
	"$cc" "$@" -o "$bin/$name" >"$tmp/build-$name.log" 2>&1 || {
		cat "$tmp/build-$name.log" >&2
		die "building $name failed: $cc $* -o $bin/$name"
	}
}
# Libraries first (the programs link against libwork.so).
build libwork.so -O1 -g -fPIC -shared "$src/libwork.c"
build libplug.so -O1 -g -fPIC -shared "$src/plug.c"
pids=()
failed=0
# bg NAME ARGS...: build in the background, at most 2 at a time.
bg() {
	if [ ${#pids[@]} -ge 2 ]; then
		wait "${pids[0]}" || failed=1
		pids=("${pids[@]:1}")
	fi
	[ $failed -eq 0 ] || die "build failed"
	build "$@" &
	pids+=($!)
}
bg pie -O1 -g "$src/loops.c"
bg nopie -O1 -g -no-pie "$src/loops.c"
bg ownlib -O1 -g "$src/ownlib_main.c" -L"$bin" -lwork '-Wl,-rpath,$ORIGIN'
bg threads -O1 -g -pthread "$src/threads.c"
bg deep -O1 -g -fno-optimize-sibling-calls "$src/deep.c"
bg api -O1 -g "$src/api.c" -lprofiler
bg dlopen -O1 -g "$src/dlopen.c" -ldl
bg vdso -O1 -g "$src/vdso.c"
bg inline -O2 -g "$src/inline.c"
for pid in "${pids[@]}"; do
	wait "$pid" || failed=1
done
[ $failed -eq 0 ] || die "build failed"

# ---- run -------------------------------------------------------------------
# run NAME FREQ MODE PROGRAM [ARG...]: MODE preload sets CPUPROFILE and
# LD_PRELOAD; MODE api passes the profile path as the first argument (the
# program calls ProfilerStart itself).  The profile is written to $tmp and
# moved to OUTDIR/NAME.prof once checked.
run() {
	local name=$1 freq=$2 mode=$3 prog=$4 rc=0
	shift 4
	local p=$tmp/$name.prof
	rm -f "$out/$name.prof"
	case $mode in
	preload)
		CPUPROFILE=$p CPUPROFILE_FREQUENCY=$freq LD_PRELOAD=$prof \
			"$bin/$prog" "$@" >"$tmp/$name.log" 2>&1 || rc=$?
		;;
	api)
		CPUPROFILE_FREQUENCY=$freq "$bin/$prog" "$p" "$@" \
			>"$tmp/$name.log" 2>&1 || rc=$?
		;;
	*) die "bad mode $mode" ;;
	esac
	if [ $rc -ne 0 ]; then
		cat "$tmp/$name.log" >&2
		die "$name: $prog exited with status $rc"
	fi
	[ -s "$p" ] || die "$name: no profile written to $p"
	# 64-bit little-endian header: 0, 3, 0, period, 0.
	local hdr
	hdr=$(od -An -tu8 -N40 -v "$p" | tr -s ' \n' ' ')
	case $hdr in
	" 0 3 0 "*" 0 ") ;;
	*) die "$name: $p does not start with a gperftools CPU profile header (got:$hdr)" ;;
	esac
	grep -q "PROFILE: interrupts/evictions/bytes" "$tmp/$name.log" ||
		die "$name: libprofiler did not report stopping (log: $(cat "$tmp/$name.log"))"
	mv -f "$p" "$out/$name.prof"
}

# wanted NAME: NAME is to be run (every scenario when none was named).
wanted() {
	[ ${#only[@]} -eq 0 ] && return 0
	case " ${only[*]} " in *" $1 "*) return 0 ;; esac
	return 1
}
# length NAME DEFAULT...: sets largs to the length arguments of NAME's
# program at GPERF_SCALE: none at 1 (the program's defaults, DEFAULT...),
# each DEFAULT x GPERF_SCALE otherwise.
length() {
	local name=$1 d
	shift
	largs=()
	[ "$scale" -eq 1 ] && return 0
	[ $# -gt 0 ] || die "$name: its program takes no length (GPERF_SCALE=$scale)"
	for d in "$@"; do
		largs+=($((d * scale)))
	done
}
if wanted pie; then length pie 12; run pie 1000 preload pie "${largs[@]}"; fi
if wanted nopie; then length nopie 12; run nopie 1000 preload nopie "${largs[@]}"; fi
if wanted ownlib; then length ownlib 10 1; run ownlib 1000 preload ownlib "${largs[@]}"; fi
if wanted threads; then length threads; run threads 1000 preload threads "${largs[@]}"; fi
if wanted deep; then length deep; run deep 250 preload deep 300; fi
if wanted api; then length api; run api 250 api api; fi
if wanted dlopen; then length dlopen; run dlopen 1000 preload dlopen "$bin/libplug.so"; fi
if wanted vdso; then length vdso 30000000; run vdso 1000 preload vdso "${largs[@]}"; fi
if wanted inline; then length inline 900000000; run inline 1000 preload inline "${largs[@]}"; fi

# ---- scenarios.json --------------------------------------------------------
entries=()
scenario() { # NAME PROGRAM LIBS_JSON DESCRIPTION
	wanted "$1" || return 0
	[ -f "$out/$1.prof" ] || die "missing profile $out/$1.prof"
	entries+=("  {\"name\": \"$1\", \"profile\": \"$out/$1.prof\",
   \"binary\": \"$bin/$2\", \"libs\": $3,
   \"description\": \"$4\"}")
}

scenario pie pie '[]' \
	"default gcc PIE, 1000 Hz: main -> top -> mid_a -> leaf_a / mid_b -> leaf_b, every function but main spins itself"
scenario nopie nopie '[]' \
	"the pie program built with -no-pie (ET_EXEC at 0x400000), 1000 Hz"
scenario ownlib ownlib "[\"$bin/libwork.so\"]" \
	"program + its own libwork.so (rpath \$ORIGIN), 1000 Hz: main -> work_outer -> work_inner in the library, local_spin in the program"
scenario threads threads '[]' \
	"4 busy pthreads (worker -> thread_leaf), main in pthread_join, 1000 Hz; stacks end in start_thread/clone3"
scenario deep deep '[]' \
	"rec() recursion 300 frames deep (-fno-optimize-sibling-calls), 250 Hz: the records hit the 254-PC cap, so main/_start are cut off; shallow_spin keeps a short main path"
scenario api api '[]' \
	"linked with -lprofiler: ProfilerStart, phase1 -> p1_leaf, ProfilerFlush, phase2 -> p2_leaf, ProfilerStop, 250 Hz; unprofiled() runs outside the window"
scenario dlopen dlopen "[\"$bin/libplug.so\"]" \
	"dlopen libplug.so, plug_spin -> plug_leaf, dlclose, then after_close spins, 1000 Hz: the plugin's mapping is absent from the maps, so its addresses are unresolvable"
scenario vdso vdso '[]' \
	"loop on clock_gettime(CLOCK_MONOTONIC) served by [vdso] (no file), plus own_spin, 1000 Hz"
scenario inline inline '[]' \
	"gcc -O2, static inline hot_inl always inlined into outer, 1000 Hz: pprof splits hot_inl (inline) from outer, perf shows only outer"

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
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/scenarios.json" ||
	die "scenarios.json is not valid JSON"
mv -f "$tmp/scenarios.json" "$out/scenarios.json"
