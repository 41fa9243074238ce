#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark: `perfgraft elf` on a large node jitdump against `cat DUMP` as
# the I/O floor.  Targets: >= 200 MB/s and peak RSS <= dump size + 50 MB.
# Also against the write floor, `cat DUMP > FILE` in the output's file
# system: the time ratio (target: at most 2.5x) and RSS against the dump,
# on the dump and (without DUMP) on one of SCALES times its functions.
#
# usage: bench/bench-elf.sh [BUILD_DIR] [DUMP]
#
#   BUILD_DIR  meson build directory holding perfgraft (default: build)
#   DUMP       jitdump to convert; without it one is made by running
#              bench/gen-big-node.js under node --perf-prof (about 60 MB)
#
# Environment: RUNS (default 3) runs of each command, best wall time wins;
# GEN_ARGS (default "20000 1 3") arguments for gen-big-node.js;
# NODE (default node); SCALES (default "1 4": about 60 and 240 MB) the
# generated dumps, as multiples of GEN_ARGS' function count (with DUMP:
# that dump alone).
#
# MB = 10^6 bytes throughout.  Exits 0 whether or not the targets are met
# (this is a benchmark, not a test); non-zero when perfgraft fails or the
# dump cannot be made.  Nothing under ~/.debug is read, written or removed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"	# machine_line
root=$(dirname "$here")
build=${1:-$root/build}
dump=${2:-}
runs=${RUNS:-3}
node=${NODE:-node}
gen_args=${GEN_ARGS:-20000 1 3}
scales=${SCALES:-1 4}

target_mbs=200
rss_slack_mb=50
target_floor=2.5	# perfgraft elf wall / `cat DUMP > FILE` wall, at most

die() { echo "bench-elf: $*" >&2; exit 2; }

pg=$build/perfgraft
[ -x "$pg" ] || die "no executable $pg (build first, or pass BUILD_DIR)"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (Debian: apt-get install time)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-elf.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
machine_line "bench-elf: "

now_ns() { date +%s%N; }

# gen SCALE: a dump of SCALE times GEN_ARGS' function count, in $tmp/gen-SCALE
gen() {
	local count rest sc=$1
	read -r count rest <<<"$gen_args"
	command -v "$node" >/dev/null || die "no $node to generate a dump; pass DUMP"
	echo "bench-elf: generating a dump: $node gen-big-node.js $((count * sc)) $rest"
	mkdir "$tmp/gen-$sc"
	# shellcheck disable=SC2086
	(cd "$tmp/gen-$sc" && "$node" --perf-prof --perf-prof-unwinding-info \
		--interpreted-frames-native-stack --always-sparkplug \
		"$here/gen-big-node.js" $((count * sc)) $rest >/dev/null) ||
		die "node failed"
	dump=$(find "$tmp/gen-$sc" -maxdepth 1 -name 'jit-*.dump' | head -n 1)
	[ -n "$dump" ] || die "node wrote no jit-*.dump"
}

# measure: the figures of one dump ($dump)
measure() {
local size cat_best wcat_best pg_best rss_kb nfiles nbytes out t0 t1 dt kb i
[ -r "$dump" ] || die "cannot read $dump"

size=$(stat -L -c %s "$dump")
[ "$size" -gt 0 ] || die "$dump is empty"

# Best wall time (ns) of `cat DUMP > /dev/null`, after two warm-up reads.
cat "$dump" >/dev/null
cat "$dump" >/dev/null
cat_best=
for _ in $(seq "$runs"); do
	t0=$(now_ns)
	cat "$dump" >/dev/null
	t1=$(now_ns)
	dt=$((t1 - t0))
	if [ -z "$cat_best" ] || [ "$dt" -lt "$cat_best" ]; then cat_best=$dt; fi
done
# Best wall time of `cat DUMP > FILE` in the output's file system: the
# bytes a copy writes (the file removed and the page cache synced between runs).
wcat_best=
for _ in $(seq "$runs"); do
	rm -f "$tmp/cat.out"
	sync
	t0=$(now_ns)
	cat "$dump" >"$tmp/cat.out"
	t1=$(now_ns)
	dt=$((t1 - t0))
	if [ -z "$wcat_best" ] || [ "$dt" -lt "$wcat_best" ]; then wcat_best=$dt; fi
done
rm -f "$tmp/cat.out"

# perfgraft elf: best wall time, highest peak RSS over the runs.
out=$tmp/out
pg_best=
rss_kb=0
nfiles=0
nbytes=0
for i in $(seq "$runs"); do
	rm -rf "$out"
	mkdir "$out"
	sync
	t0=$(now_ns)
	if ! /usr/bin/time -v -o "$tmp/time.$i" \
		"$pg" elf "$dump" -o "$out" >"$tmp/stdout.$i" 2>"$tmp/stderr.$i"; then
		t1=$(now_ns)
		echo "bench-elf: FAILED: $pg elf $dump -o $out (run $i)" >&2
		tail -n 20 "$tmp/stderr.$i" >&2
		grep -E 'Exit status|Command terminated' "$tmp/time.$i" >&2 || true
		exit 1
	fi
	t1=$(now_ns)
	dt=$((t1 - t0))
	if [ -z "$pg_best" ] || [ "$dt" -lt "$pg_best" ]; then pg_best=$dt; fi
	kb=$(awk -F': *' '/Maximum resident set size/ {print $2}' "$tmp/time.$i")
	if [ "${kb:-0}" -gt "$rss_kb" ]; then rss_kb=$kb; fi
	nfiles=$(find "$out" -type f | wc -l)
	nbytes=$(find "$out" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
done
[ "$nfiles" -gt 0 ] || echo "bench-elf: warning: perfgraft wrote no files" >&2

awk -v size="$size" -v cat_ns="$cat_best" -v pg_ns="$pg_best" -v wcat_ns="$wcat_best" \
    -v t_floor="$target_floor" \
    -v rss_kb="$rss_kb" -v nfiles="$nfiles" -v nbytes="$nbytes" \
    -v target="$target_mbs" -v slack="$rss_slack_mb" -v runs="$runs" \
    -v dump="$dump" '
BEGIN {
	mb = size / 1e6
	cat_s = cat_ns / 1e9; pg_s = pg_ns / 1e9
	cat_mbs = cat_s > 0 ? mb / cat_s : 0
	pg_mbs = pg_s > 0 ? mb / pg_s : 0
	rss_mb = rss_kb * 1024 / 1e6
	budget = 0.5 * mb + slack	# issue 26: half the dump, not all of it
	printf "dump                 %s\n", dump
	printf "dump size            %.1f MB (%d bytes)\n", mb, size
	printf "cat (I/O floor)      %.3f s  %.0f MB/s  (best of %d)\n", cat_s, cat_mbs, runs
	printf "perfgraft elf        %.3f s  %.0f MB/s  (best of %d)\n", pg_s, pg_mbs, runs
	printf "ratio perfgraft/cat  %.3f (throughput)\n", (cat_mbs > 0 ? pg_mbs / cat_mbs : 0)
	wcat_s = wcat_ns / 1e9
	printf "cat > FILE (floor)   %.3f s  %.0f MB/s  (best of %d; the write floor)\n", wcat_s, (wcat_s > 0 ? mb / wcat_s : 0), runs
	printf "perfgraft/cat > FILE %.2fx (time)\n", (wcat_s > 0 ? pg_s / wcat_s : 0)
	printf "peak RSS / dump      %.2fx\n", (mb > 0 ? rss_mb / mb : 0)
	printf "peak RSS             %.1f MB\n", rss_mb
	printf "RSS budget           %.1f MB (0.5x the dump + %d MB)\n", budget, slack
	printf "images written       %d files, %.1f MB (%d bytes)\n", nfiles, nbytes / 1e6, nbytes
	printf "throughput target    %s (%.0f MB/s vs >= %d MB/s)\n", (pg_mbs >= target ? "PASS" : "FAIL"), pg_mbs, target
	printf "memory target        %s (%.1f MB vs <= %.1f MB)\n", (rss_mb <= budget ? "PASS" : "FAIL"), rss_mb, budget
	printf "write floor target   %s (%.2fx vs <= %.1f)\n", (wcat_s > 0 && pg_s <= t_floor * wcat_s ? "PASS" : "FAIL"), (wcat_s > 0 ? pg_s / wcat_s : 0), t_floor
}'
}

if [ -n "$dump" ]; then
	measure
else
	first=1
	for sc in $scales; do
		[[ "$sc" =~ ^[1-9][0-9]*$ ]] || die "SCALES: '$sc' is not a positive integer"
		[ "$first" = 1 ] || echo
		first=0
		echo "bench-elf: scale ${sc}x"
		gen "$sc"
		measure
		rm -rf "$tmp/gen-$sc"
	done
fi
exit 0
