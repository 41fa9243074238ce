#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark: `perfgraft elf` on large node jitdumps against `cat DUMP` as
# the I/O floor, in every layout (--layout packed, memory, per-function),
# at 1x and 4x the generator's dump (SCALES).  Targets: >= 200 MB/s
# (packed, 1x) and peak RSS <= 0.5x the dump + 50 MB in every layout and
# scale (the code is written from the dump, not copied; the dump's
# resident pages are a window).
#
# usage: bench/bench-elf.sh [BUILD_DIR] [DUMP]
#
#   BUILD_DIR  meson build directory holding perfgraft (default: build)
#   DUMP       jitdump to convert (scale 1 only); without it one is made
#              per scale by running bench/gen-big-node.js under node
#              --perf-prof (about 60 MB at scale 1)
#
# Environment: RUNS (default 3) runs of each command, best wall time wins,
# highest RSS kept; GEN_ARGS (default "20000 1 3") arguments for
# gen-big-node.js at scale 1 (COUNT is multiplied by the scale); SCALES
# (default "1 4"); LAYOUTS (default "packed memory per-function");
# PF_SCALES (default "1"): the scales per-function runs at (its 4x run
# writes 250,000 files); NODE (default node).
#
# MB = 10^6 bytes throughout.  Exits 0 whether or not the targets are met
# (this is a benchmark, not a test); non-zero when perfgraft fails or the
# dump cannot be made.  Nothing under ~/.debug is read, written or removed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${1:-$root/build}
given=${2:-}
runs=${RUNS:-3}
node=${NODE:-node}
gen_args=${GEN_ARGS:-20000 1 3}
scales=${SCALES:-1 4}
layouts=${LAYOUTS:-packed memory per-function}
pf_scales=${PF_SCALES:-1}

target_mbs=200
rss_factor=0.5
rss_slack_mb=50

die() { echo "bench-elf: $*" >&2; exit 2; }

pg=$build/perfgraft
[ -x "$pg" ] || die "no executable $pg (build first, or pass BUILD_DIR)"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (Debian: apt-get install time)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-elf.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

now_ns() { date +%s%N; }

# Makes the dump of scale $1 in $tmp/gen-$1 and echoes its path.
make_dump() {
	local f=$1 d=$tmp/gen-$1 a
	command -v "$node" >/dev/null || die "no $node to generate a dump; pass DUMP"
	read -r -a a <<<"$gen_args"
	a[0]=$((a[0] * f))
	echo "bench-elf: generating a dump: $node gen-big-node.js ${a[*]}" >&2
	mkdir "$d"
	(cd "$d" && "$node" --perf-prof --perf-prof-unwinding-info \
		--interpreted-frames-native-stack --always-sparkplug \
		"$here/gen-big-node.js" "${a[@]}" >/dev/null) ||
		die "node failed"
	find "$d" -maxdepth 1 -name 'jit-*.dump' | head -n 1
}

# Best wall time (ns) of `cat DUMP > /dev/null`, after two warm-up reads.
cat_ns() {
	local best= t0 t1
	cat "$1" >/dev/null
	cat "$1" >/dev/null
	for _ in $(seq "$runs"); do
		t0=$(now_ns)
		cat "$1" >/dev/null
		t1=$(now_ns)
		if [ -z "$best" ] || [ $((t1 - t0)) -lt "$best" ]; then best=$((t1 - t0)); fi
	done
	echo "$best"
}

# perfgraft elf --layout L DUMP: "BEST_NS PEAK_KB FILES BYTES".
pg_elf() { # DUMP LAYOUT
	local out=$tmp/out best= kb=0 k t0 t1 i
	for i in $(seq "$runs"); do
		rm -rf "$out"
		mkdir "$out"
		t0=$(now_ns)
		if ! /usr/bin/time -v -o "$tmp/time.$i" "$pg" elf --layout "$2" "$1" -o "$out" \
			>"$tmp/stdout.$i" 2>"$tmp/stderr.$i"; then
			echo "bench-elf: FAILED: $pg elf --layout $2 $1 -o $out (run $i)" >&2
			tail -n 20 "$tmp/stderr.$i" >&2
			grep -E 'Exit status|Command terminated' "$tmp/time.$i" >&2 || true
			exit 1
		fi
		t1=$(now_ns)
		if [ -z "$best" ] || [ $((t1 - t0)) -lt "$best" ]; then best=$((t1 - t0)); fi
		k=$(awk -F': *' '/Maximum resident set size/ {print $2}' "$tmp/time.$i")
		if [ "${k:-0}" -gt "$kb" ]; then kb=$k; fi
	done
	echo "$best $kb $(find "$out" -type f | wc -l) $(find "$out" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')"
	rm -rf "$out"
}

: >"$tmp/rows"
for f in $scales; do
	[[ "$f" =~ ^[1-9][0-9]*$ ]] || die "SCALES: '$f' is not a positive integer"
	if [ "$f" = 1 ] && [ -n "$given" ]; then dump=$given; else dump=$(make_dump "$f"); fi
	[ -n "$dump" ] && [ -r "$dump" ] || die "no dump at scale $f"
	size=$(stat -L -c %s "$dump")
	[ "$size" -gt 0 ] || die "$dump is empty"
	c=$(cat_ns "$dump")
	for l in $layouts; do
		if [ "$l" = per-function ] && [[ " $pf_scales " != *" $f "* ]]; then continue; fi
		echo "bench-elf: ${f}x: $pg elf --layout $l $dump" >&2
		echo "$f $size $c $l $(pg_elf "$dump" "$l")" >>"$tmp/rows"
	done
	[ "$dump" = "$given" ] || rm -rf "$tmp/gen-$f"
done

awk -v target="$target_mbs" -v factor="$rss_factor" -v slack="$rss_slack_mb" -v runs="$runs" '
function pf(ok) { return ok ? "PASS" : "FAIL" }
{ f[NR] = $1; size[NR] = $2; cat[NR] = $3; lay[NR] = $4; ns[NR] = $5; kb[NR] = $6
  files[NR] = $7; bytes[NR] = $8 }
END {
	printf "\nperfgraft elf, best of %d runs (peak RSS: the highest); MB = 10^6 bytes\n", runs
	printf "%5s %8s %13s %9s %9s %7s %9s %8s %9s %10s %7s\n", "scale", "dump MB", "layout",
		"cat MB/s", "pg s", "MB/s", "RSS MB", "RSS/dump", "budget", "images", "RSS"
	for (i = 1; i <= NR; i++) {
		mb = size[i] / 1e6
		rss = kb[i] * 1024 / 1e6
		budget = factor * mb + slack
		mbs[i] = ns[i] > 0 ? mb / (ns[i] / 1e9) : 0
		printf "%4dx %8.1f %13s %9.0f %9.3f %7.0f %9.1f %7.2fx %9.1f %10d %7s\n", f[i], mb,
			lay[i], (cat[i] > 0 ? mb / (cat[i] / 1e9) : 0), ns[i] / 1e9, mbs[i], rss,
			rss / mb, budget, files[i], pf(rss <= budget)
		if (rss > budget)
			bad++
		if (f[i] == 1 && lay[i] == "packed")
			tp = mbs[i]
	}
	printf "\nthroughput target    %s (%.0f MB/s packed at 1x vs >= %d MB/s)\n", pf(tp >= target), tp, target
	printf "memory target        %s (peak RSS <= %.1fx the dump + %d MB: %d of %d runs over)\n",
		pf(!bad), factor, slack, bad, NR
}' "$tmp/rows"
exit 0
