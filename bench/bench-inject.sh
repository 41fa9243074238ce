#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark: `perfgraft inject` against `perf inject --jit` on one large
# node recording (about 62,000 JIT code loads, a 61 MB jitdump).  Targets:
# at least 20x faster, at most 1/5 of perf's peak RSS, at most 10 image
# files, and bytes written (images + output) at most 1.2x the dump's size.
# The same recording is injected twice: --layout packed (the figures
# above) and --layout memory; a second table sets both layouts and perf's
# jitted-*.so against the dump's code bytes (sum of LOAD code_size):
# image files, apparent bytes (ls), allocated bytes (du: memory-layout
# images are sparse) and bytes the process wrote.  Memory-layout targets:
# at most 10 image files, image bytes written and disk used at most 1.2x
# the code, inject time no worse than packed (5% for noise).  node runs
# with --perf-prof-unwinding-info, so the functions with real CFI are
# there (one image each in packed, merged .eh_frame in memory); perf
# record uses -g (frame pointers), so no CARRY maps are made.
# Bytes written are GNU time's %O ("File system outputs", the kernel's
# per-task write_bytes) x 512: counted when the process dirties page cache,
# not at writeback; checked on ext4 (a 100 MiB dd reads 204800, exact).
# It reads 0 on tmpfs (TMPDIR there: no block device to account to).
# CASES=pipe: the node workload recorded into a pipe, `perf record -o - |
# tee rec.pipe | perfgraft inject -i - -o -`, so that the dump is read while
# node writes it; then, on the same rec.pipe, perfgraft inject -o FILE and
# perf inject --jit -i - -o -.  Per mode: inject wall and CPU seconds, files
# and bytes written (everything new in its working directory, perf's
# jitted-*.so beside the dump included; %O x 512), the live reads, the most
# records held back and the samples written before their dump was read past
# them; and whether perf report --sort dso,sym gives the same rows (JIT
# images' names counted as one) from the three.
# Then the MOVE-heavy case: synthesized dumps of 20,000 and 160,000
# LOAD+MOVE pairs (move-heavy.py), both tools' times and perfgraft's RSS,
# and perfgraft's 160k/20k time ratio (8 when linear in the pairs).
# CASES=scale: peak RSS against the dump, the node workload at 1x and 4x
# (SCALES) its size, perfgraft inject in every layout; target: at most
# 0.5x the dump + 50 MB (the code is written from the dump, not copied).
#
# usage: bench/bench-inject.sh [BUILD_DIR]
#
#   BUILD_DIR  meson build directory holding perfgraft (default: build)
#
# Environment: RUNS (default 1) timed runs of each inject, best wall time
# wins; GEN_ARGS (default "20000 2 16") arguments for gen-big-node.js;
# NODE (default node); PERF (default perf); CASES (default "node move"):
# the cases to run (pipe: live pipe mode, below; dwarf: the node workload recorded with --call-graph
# dwarf, where inject carries live code into newer generations; scale: RSS
# against the dump, below); SCALES (default "1 4") its sizes, COUNT of
# GEN_ARGS times each; PF_SCALES (default "1") those per-function runs at
# (4x writes 250,000 files); MOVE_PAIRS (default "20000 160000") the MOVE-heavy
# sizes; MOVE_PERF_TIMEOUT (default 600) seconds perf inject may take on
# one MOVE-heavy dump before it is stopped and reported as timed out.
#
# Everything happens in a temporary directory removed at exit.  Every perf
# command gets --buildid-dir TMP/debug and perf record gets -N, so nothing
# under ~/.debug is read, written or removed.  MB = 10^6 bytes throughout.
# Exits 0 whether or not the targets are met (this is a benchmark, not a
# test); 1 when perf, node or perfgraft fails; 2 on a setup problem.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${1:-$root/build}
runs=${RUNS:-1}
node=${NODE:-node}
perf=${PERF:-perf}
gen_args=${GEN_ARGS:-20000 2 16}
cases=${CASES:-node dwarf move scale}
scales=${SCALES:-1 4}
pf_scales=${PF_SCALES:-1}
move_pairs=${MOVE_PAIRS:-20000 160000}
move_timeout=${MOVE_PERF_TIMEOUT:-600}

target_speedup=20	# perf wall / perfgraft wall, at least
target_rss=5		# perf RSS / perfgraft RSS, at least
target_images=10	# perfgraft image files, at most
target_bytes=1.2	# perfgraft bytes written / dump bytes, at most; memory
			# layout: image bytes written and allocated / code bytes
target_mem_time=1.05	# memory layout wall / packed wall, at most (5% noise)
target_rss_factor=0.5	# peak RSS / dump bytes, at most, plus:
target_rss_slack=50	# MB

die() { echo "bench-inject: $*" >&2; exit 2; }
fail() { echo "bench-inject: FAILED: $*" >&2; exit 1; }

pg=$build/perfgraft
[ -x "$pg" ] || die "no executable $pg (build first, or pass BUILD_DIR)"
pg=$(cd "$(dirname "$pg")" && pwd)/$(basename "$pg")
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (Debian: apt-get install time)"
command -v "$perf" >/dev/null || die "no $perf (Debian: apt-get install linux-perf)"
want() { [[ " $cases " == *" $1 "* ]]; }
for c in $cases; do
	[ "$c" = node ] || [ "$c" = dwarf ] || [ "$c" = move ] || [ "$c" = pipe ] || [ "$c" = scale ] ||
		die "CASES: unknown case '$c' (node, dwarf, move, pipe, scale)"
done
if want node || want dwarf || want pipe || want scale; then command -v "$node" >/dev/null || die "no $node"; fi
for f in $scales; do
	[[ "$f" =~ ^[1-9][0-9]*$ ]] || die "SCALES: '$f' is not a positive integer"
done
command -v python3 >/dev/null || die "no python3"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ "$move_timeout" =~ ^[1-9][0-9]*$ ]] || die "MOVE_PERF_TIMEOUT must be a positive integer"
for n in $move_pairs; do
	[[ "$n" =~ ^[1-9][0-9]*$ ]] || die "MOVE_PAIRS: '$n' is not a positive integer"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-inject.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rec=$tmp/rec		# node's cwd: perf.data, jit-PID.dump, perf's jitted-*.so
pdir=$tmp/perf		# perf inject's cwd and output
gdir=$tmp/pg-pg		# perfgraft inject's cwd, output and images (packed)
mdir=$tmp/pg-mem		# the same for --layout memory
debug=$tmp/debug	# perf's build-id cache
logs=$tmp/logs
mkdir "$rec" "$pdir" "$gdir" "$mdir" "$debug" "$logs"
touch "$logs/start"

now_ns() { date +%s%N; }
# Sorted list of every path under $1 (files, links, directories).
list_paths() { (cd "$1" && find . -mindepth 1 | LC_ALL=C sort); }
# The paths under $1 that are not in the list $2: "FILES LINKS DIRS BYTES
# DISK", FILES, BYTES (apparent size) and DISK (allocated blocks) counting
# regular files only.
new_stats() {
	list_paths "$1" | LC_ALL=C comm -13 "$2" - |
		(cd "$1" && xargs -r -d '\n' stat -c '%F|%s|%b|%B' --) |
		awk -F'|' '$1 ~ /regular/ {f++; b += $2; k += $3 * $4}
			   $1 ~ /link/ {l++} $1 ~ /directory/ {d++}
			   END {print f + 0, l + 0, d + 0, b + 0, k + 0}'
}
# Remove the paths under $1 that are not in the list $2.
remove_new() {
	list_paths "$1" | LC_ALL=C comm -13 "$2" - |
		(cd "$1" && xargs -r -d '\n' rm -rf)
}
rss_kb() { awk -F': *' '/Maximum resident set size/ {print $2}' "$1"; }
cpu_s() { awk -F': *' '/User time/ {u = $2} /System time/ {s = $2} END {printf "%.2f %.2f", u, s}' "$1"; }
# Bytes the process wrote: GNU time's "File system outputs" (%O, the
# kernel's write_bytes: 512-byte units of page cache the process dirtied,
# counted at write time, not at writeback) x 512.
fs_out_bytes() { awk -F': *' '/File system outputs/ {printf "%.0f", $2 * 512}' "$1"; }

# ---- MOVE-heavy dumps ------------------------------------------------------
# For each size N of $move_pairs: move-heavy.py writes a dump of N LOAD+MOVE
# pairs and a perf.data mapping it; perfgraft inject runs RUNS times (best
# wall time), perf inject --jit once under `timeout $move_timeout` (its
# 160,000 jitted-*.so take tens of seconds and ~1 GB of disk), then the
# directory is removed.  At the smallest size the two outputs' perf report
# --sort sym are compared.
move_bench() {
	local n d t0 t1 dt best kb ps pst dump_mb first=1
	: >"$logs/move.rows"
	for n in $move_pairs; do
		d=$tmp/move-$n
		mkdir -p "$d/pg" "$d/perf" "$d/debug"
		echo "bench-inject: MOVE-heavy: $n LOAD+MOVE pairs (move-heavy.py)"
		python3 "$here/move-heavy.py" "$n" "$d" || fail "move-heavy.py $n"
		dump_mb=$(stat -c %s "$d/jit-4242.dump" | awk '{printf "%.1f", $1 / 1e6}')
		best='' kb=0
		for i in $(seq "$runs"); do
			rm -rf "$d/pg/out.data" "$d/pg/out.data.d"
			cat "$d/jit-4242.dump" "$d/perf.data" >/dev/null
			t0=$(now_ns)
			(cd "$d/pg" && /usr/bin/time -v -o "$logs/move-pg.time" \
				"$pg" inject --buildid-dir "$d/debug" -i "$d/perf.data" -o out.data \
				>"$logs/move-pg.out" 2>"$logs/move-pg.err") ||
				{ tail -n 20 "$logs/move-pg.err" >&2; fail "$pg inject ($n pairs)"; }
			t1=$(now_ns)
			dt=$((t1 - t0))
			if [ -z "$best" ] || [ "$dt" -lt "$best" ]; then best=$dt; fi
			if [ "$(rss_kb "$logs/move-pg.time")" -gt "$kb" ]; then
				kb=$(rss_kb "$logs/move-pg.time")
			fi
		done
		grep '^perfgraft: inject:' "$logs/move-pg.err" | sed 's/^/bench-inject:   /' || true
		echo "bench-inject:   perf inject --jit (at most ${move_timeout} s)"
		pst=0
		t0=$(now_ns)
		(cd "$d/perf" && timeout "$move_timeout" "$perf" --buildid-dir "$d/debug" \
			inject --jit -i "$d/perf.data" -o out.data \
			>"$logs/move-perf.out" 2>"$logs/move-perf.err") || pst=$?
		t1=$(now_ns)
		if [ "$pst" -eq 124 ]; then
			ps=timeout
		elif [ "$pst" -ne 0 ]; then
			tail -n 20 "$logs/move-perf.err" >&2
			fail "perf inject --jit ($n pairs)"
		else
			ps=$((t1 - t0))
		fi
		if [ "$first" = 1 ] && [ "$ps" != timeout ]; then
			"$perf" --buildid-dir "$d/debug" report --stdio --sort sym -n -i "$d/perf/out.data" \
				2>/dev/null | grep -v '^#' | sed '/^$/d' >"$logs/move-report.perf" || true
			"$perf" --buildid-dir "$d/debug" report --stdio --sort sym -n -i "$d/pg/out.data" \
				2>/dev/null | grep -v '^#' | sed '/^$/d' >"$logs/move-report.pg" || true
			if [ -s "$logs/move-report.pg" ] &&
				cmp -s "$logs/move-report.perf" "$logs/move-report.pg"; then
				echo "bench-inject:   perf report --sort sym: the same $(wc -l <"$logs/move-report.pg") rows from both outputs"
			else
				echo "bench-inject: WARNING: perf report --sort sym differs between the outputs ($n pairs)" >&2
				diff "$logs/move-report.perf" "$logs/move-report.pg" | head -n 10 >&2 || true
			fi
		fi
		first=0
		echo "$n $dump_mb $ps $best $kb" >>"$logs/move.rows"
		rm -rf "$d"
	done
	awk -v timeout="$move_timeout" '
	{ n[NR] = $1; mb[NR] = $2; p[NR] = $3; g[NR] = $4 / 1e9; kb[NR] = $5 }
	END {
		printf "\nMOVE-heavy dumps (LOAD+MOVE pairs; one sample per 10 pairs):\n"
		printf "%10s %9s %18s %13s %9s %11s\n", "pairs", "dump MB", "perf inject --jit s",
			"perfgraft s", "perf/pg", "pg RSS MB"
		for (i = 1; i <= NR; i++) {
			if (p[i] == "timeout")
				printf "%10d %9.1f %18s %13.2f %9s %11.1f\n", n[i], mb[i],
					"> " timeout, g[i], "> " sprintf("%.1f", timeout / g[i]) "x",
					kb[i] * 1024 / 1e6
			else
				printf "%10d %9.1f %18.2f %13.2f %8.1fx %11.1f\n", n[i], mb[i], p[i] / 1e9,
					g[i], (g[i] > 0 ? p[i] / 1e9 / g[i] : 0), kb[i] * 1024 / 1e6
		}
		if (NR > 1 && g[1] > 0)
			printf "perfgraft %d/%d time ratio: %.1f (linear: %.0f; quadratic: %.0f)\n",
				n[NR], n[1], g[NR] / g[1], n[NR] / n[1], (n[NR] / n[1]) ^ 2
	}' "$logs/move.rows"
}

# ---- DWARF call graphs -----------------------------------------------------
# The node workload recorded with --call-graph dwarf: inject notes the
# frames the samples' user stacks may hold and carries into a newer
# generation only the live code they reach.  perfgraft inject (memory
# layout, RUNS runs, best wall) against perf inject --jit (one run); the
# images against the dump's code: files, CARRY maps, allocated bytes (du),
# bytes written (%O), with the 1.2x target.
dwarf_bench() {
	local d=$tmp/dwarf i t0 t1 dt best='' ps code files du wrote carry
	mkdir -p "$d/rec" "$d/pg" "$d/perf"
	echo "bench-inject: DWARF call graphs: $perf record -k mono --call-graph dwarf -e cpu-clock -N -- $node gen-big-node.js $gen_args"
	# shellcheck disable=SC2086
	(cd "$d/rec" && "$perf" --buildid-dir "$debug" record -k mono --call-graph dwarf \
		-e cpu-clock -N -o perf.data -- "$node" --perf-prof --perf-prof-unwinding-info \
		--interpreted-frames-native-stack "$here/gen-big-node.js" $gen_args \
		>"$logs/dwarf-record.out" 2>"$logs/dwarf-record.err") ||
		{ tail -n 20 "$logs/dwarf-record.err" >&2; fail "perf record --call-graph dwarf / node"; }
	code=$("$pg" dump --json "$d"/rec/jit-*.dump 2>/dev/null | python3 -c '
import json, sys
print(sum(r["code_size"] for r in json.load(sys.stdin)["records"] if r["type"] == "LOAD"))') ||
		fail "$pg dump --json (dwarf)"
	for i in $(seq "$runs"); do
		rm -rf "$d/pg/out.data" "$d/pg/out.data.d"
		cat "$d"/rec/jit-*.dump "$d/rec/perf.data" >/dev/null
		t0=$(now_ns)
		(cd "$d/pg" && /usr/bin/time -v -o "$logs/dwarf-pg.time" "$pg" inject \
			--buildid-dir "$debug" -i "$d/rec/perf.data" -o out.data >"$logs/dwarf-pg.out" 2>"$logs/dwarf-pg.err") ||
			{ tail -n 20 "$logs/dwarf-pg.err" >&2; fail "$pg inject (dwarf)"; }
		t1=$(now_ns)
		dt=$((t1 - t0))
		if [ -z "$best" ] || [ "$dt" -lt "$best" ]; then best=$dt; fi
	done
	grep '^perfgraft: inject:' "$logs/dwarf-pg.err" | sed 's/^/bench-inject:   /' || true
	carry=$(sed -n 's/.*(\([0-9]*\) carry live code.*/\1/p' "$logs/dwarf-pg.err")
	files=$(find "$d/pg/out.data.d" -name '*.so' | wc -l)
	du=$(du -s -B1 "$d/pg/out.data.d" | awk '{print $1}')
	wrote=$(fs_out_bytes "$logs/dwarf-pg.time")
	wrote=$((wrote - $(stat -c %s "$d/pg/out.data")))	# the images only
	echo "bench-inject:   perf inject --jit"
	t0=$(now_ns)
	(cd "$d/perf" && "$perf" --buildid-dir "$debug" inject --jit -i "$d/rec/perf.data" \
		-o out.data >"$logs/dwarf-perf.out" 2>"$logs/dwarf-perf.err") ||
		{ tail -n 20 "$logs/dwarf-perf.err" >&2; fail "perf inject --jit (dwarf)"; }
	t1=$(now_ns)
	ps=$((t1 - t0))
	awk -v code="$code" -v files="$files" -v du="$du" -v wrote="$wrote" \
	    -v carry="${carry:-0}" -v pg="$best" -v ps="$ps" -v t_img="$target_images" \
	    -v t_bytes="$target_bytes" 'BEGIN {
		printf "\nDWARF call graphs, memory layout: %.1f MB of code\n", code / 1e6
		printf "  inject wall s: perfgraft %.2f, perf inject --jit %.2f (%.1fx)\n",
		       pg / 1e9, ps / 1e9, (pg > 0 ? ps / pg : 0)
		printf "  image files %d, CARRY maps %d\n", files, carry
		printf "  images allocated (du) %.1f MB (%.2fx the code)\n", du / 1e6, du / code
		printf "  wrote, images (%%O less the output) %.1f MB (%.2fx the code)\n",
		       wrote / 1e6, wrote / code
		printf "dwarf: image files   %s (%d vs <= %d)\n", (files <= t_img ? "PASS" : "FAIL"), files, t_img
		printf "dwarf: wrote, images %s (%.2fx the code vs <= %.1f)\n",
		       (wrote <= t_bytes * code ? "PASS" : "FAIL"), wrote / code, t_bytes
		printf "dwarf: disk used     %s (%.2fx the code vs <= %.1f)\n",
		       (du <= t_bytes * code ? "PASS" : "FAIL"), du / code, t_bytes
	}'
	rm -rf "$d"
}

# ---- live pipe mode ---------------------------------------------------------
pipe_rows() {	# perf report --sort dso,sym of $1: "count dso sym", JIT images as [jit]
	"$perf" --buildid-dir "$debug" report -i "$1" --stdio --no-children --sort dso,sym \
		-F sample,dso,sym 2>/dev/null | grep -v '^#' | sed '/^$/d' |
		awk '{ d = ($2 ~ /^jitted-/) ? "[jit]" : $2; $1 = $1; n = $1; $1 = ""; $2 = d; c[$0] += n }
		     END { for (k in c) print c[k], k }' | LC_ALL=C sort
}
pipe_bench() {
	local d=$tmp/pipe m t0 t1 before
	mkdir -p "$d/rec" "$d/live" "$d/file" "$d/perf"
	echo "bench-inject: live pipe: $perf record -k mono -g -e cpu-clock -N -o - -- $node gen-big-node.js $gen_args | tee rec.pipe | perfgraft inject -i - -o -"
	list_paths "$d/live" >"$logs/pipe-live.before"
	t0=$(now_ns)
	# shellcheck disable=SC2086
	(cd "$d/rec" && "$perf" --buildid-dir "$debug" record -k mono -g -e cpu-clock -N \
		-o - -- "$node" --perf-prof --perf-prof-unwinding-info \
		--interpreted-frames-native-stack "$here/gen-big-node.js" $gen_args \
		2>"$logs/pipe-record.err" | tee "$d/rec/rec.pipe" |
		(cd "$d/live" && /usr/bin/time -v -o "$logs/pipe-live.time" "$pg" inject -i - -o - \
			>out.pipe 2>"$logs/pipe-live.err")) ||
		{ tail -n 20 "$logs/pipe-live.err" "$logs/pipe-record.err" >&2; fail "perf record | perfgraft inject (pipe)"; }
	t1=$(now_ns)
	echo "live $(( (t1 - t0) / 1000000 )) $(cpu_s "$logs/pipe-live.time") $(new_stats "$d/live" "$logs/pipe-live.before" | cut -d' ' -f1,4) $(fs_out_bytes "$logs/pipe-live.time")" >"$logs/pipe.rows"
	grep '^perfgraft: inject:' "$logs/pipe-live.err" | sed 's/^/bench-inject:   /' || true
	list_paths "$d/file" >"$logs/pipe-file.before"
	t0=$(now_ns)
	(cd "$d/file" && /usr/bin/time -v -o "$logs/pipe-file.time" "$pg" inject -i "$d/rec/rec.pipe" \
		-o out.data >/dev/null 2>"$logs/pipe-file.err") || fail "$pg inject -i rec.pipe"
	t1=$(now_ns)
	echo "file $(( (t1 - t0) / 1000000 )) $(cpu_s "$logs/pipe-file.time") $(new_stats "$d/file" "$logs/pipe-file.before" | cut -d' ' -f1,4) $(fs_out_bytes "$logs/pipe-file.time")" >>"$logs/pipe.rows"
	before=$tmp/pipe-perf.before
	{ list_paths "$d/perf"; list_paths "$d/rec" | sed 's|^\./|./REC/|'; } | LC_ALL=C sort >"$before"
	t0=$(now_ns)
	(cd "$d/perf" && /usr/bin/time -v -o "$logs/pipe-perf.time" "$perf" --buildid-dir "$debug" \
		inject --jit -i - -o - <"$d/rec/rec.pipe" >out.pipe 2>"$logs/pipe-perf.err") ||
		fail "perf inject --jit (pipe)"
	t1=$(now_ns)
	# perf writes its jitted-*.so beside the dump: counted with its output
	ln -s "$d/rec" "$d/perf/REC"
	echo "perf $(( (t1 - t0) / 1000000 )) $(cpu_s "$logs/pipe-perf.time") $(cd "$d/perf" && { find . -mindepth 1 -not -path './REC*'; find -L ./REC -mindepth 1; } | LC_ALL=C sort | LC_ALL=C comm -13 "$before" - | grep -v '^\./REC$' | (cd "$d/perf" && xargs -r -d '\n' stat -L -c '%F|%s' --) | awk -F'|' '$1 ~ /regular/ {f++; b += $2} END {print f + 0, b + 0}') $(fs_out_bytes "$logs/pipe-perf.time")" >>"$logs/pipe.rows"
	rm "$d/perf/REC"
	for m in live file perf; do
		pipe_rows "$d/$m/out.$([ $m = file ] && echo data || echo pipe)" >"$logs/pipe-$m.rows"
	done
	awk '{ printf "%-5s %9.2f %7.2f %7.2f %7d %10.1f %10.1f\n", $1, $2 / 1000, $3, $4, $5, $6 / 1e6, $7 / 1e6 }' \
		"$logs/pipe.rows" | { printf "\nLive pipe mode (one recording; live: perfgraft in the recording's pipe, for\nthe whole run; file: perfgraft -o FILE on rec.pipe after it; perf: perf inject\n--jit -i - -o - on rec.pipe):\n%-5s %9s %7s %7s %7s %10s %10s\n" mode "wall s" "user s" "sys s" files "files MB" "wrote MB"; cat; }
	sed -n 's/^perfgraft: inject: live dumps read \([0-9]*\) times; at most \([0-9.]*\) MiB of records held back, \([0-9]*\) samples.*/live: dump read \1 times, at most \2 MiB of records held back, \3 samples written before their dump was read past them/p' "$logs/pipe-live.err"
	for m in file perf; do
		if cmp -s "$logs/pipe-live.rows" "$logs/pipe-$m.rows"; then
			echo "pipe: perf report --sort dso,sym, live vs $m: the same $(wc -l <"$logs/pipe-live.rows") rows and counts"
		else
			echo "pipe: perf report --sort dso,sym, live vs $m: DIFFERENT ($(diff "$logs/pipe-live.rows" "$logs/pipe-$m.rows" | grep -c '^[<>]') rows); the largest differing rows (<: live, >: $m):"
			diff "$logs/pipe-live.rows" "$logs/pipe-$m.rows" | grep '^[<>]' | sort -k2,2 -rn | head -n 6 | sed 's/^/  /'
		fi
	done
	rm -rf "$d"
}

# ---- RSS against the dump ---------------------------------------------------
# For each scale F of $scales: the node workload with F times COUNT
# recorded (perf record -k mono -g), then perfgraft inject in each layout
# (per-function at $pf_scales only), RUNS runs, best wall, highest RSS,
# each against 0.5x the dump + 50 MB.
scale_bench() {
	local f d a l i t0 t1 best kb k size
	: >"$logs/scale.rows"
	for f in $scales; do
		d=$tmp/scale-$f
		mkdir -p "$d/rec" "$d/pg"
		read -r -a a <<<"$gen_args"
		a[0]=$((a[0] * f))
		echo "bench-inject: scale ${f}x: $perf record -k mono -g -e cpu-clock -N -- $node gen-big-node.js ${a[*]}"
		(cd "$d/rec" && "$perf" --buildid-dir "$debug" record -k mono -g -e cpu-clock -N \
			-o perf.data -- "$node" --perf-prof --perf-prof-unwinding-info \
			--interpreted-frames-native-stack "$here/gen-big-node.js" "${a[@]}" \
			>"$logs/scale-record.out" 2>"$logs/scale-record.err") ||
			{ tail -n 20 "$logs/scale-record.err" >&2; fail "perf record / node (scale $f)"; }
		size=$(find "$d/rec" -maxdepth 1 -name 'jit-*.dump' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
		for l in packed memory per-function; do
			if [ "$l" = per-function ] && [[ " $pf_scales " != *" $f "* ]]; then continue; fi
			best='' kb=0
			for i in $(seq "$runs"); do
				rm -rf "$d/pg/out.data" "$d/pg/out.data.d"
				cat "$d"/rec/jit-*.dump "$d/rec/perf.data" >/dev/null
				t0=$(now_ns)
				(cd "$d/pg" && /usr/bin/time -v -o "$logs/scale-pg.time" "$pg" inject \
					--buildid-dir "$debug" --layout "$l" -i "$d/rec/perf.data" -o out.data \
					>"$logs/scale-pg.out" 2>"$logs/scale-pg.err") ||
					{ tail -n 20 "$logs/scale-pg.err" >&2; fail "$pg inject --layout $l (scale $f)"; }
				t1=$(now_ns)
				if [ -z "$best" ] || [ $((t1 - t0)) -lt "$best" ]; then best=$((t1 - t0)); fi
				k=$(rss_kb "$logs/scale-pg.time")
				if [ "$k" -gt "$kb" ]; then kb=$k; fi
			done
			echo "$f $size $l $best $kb" >>"$logs/scale.rows"
		done
		rm -rf "$d"
	done
	awk -v factor="$target_rss_factor" -v slack="$target_rss_slack" -v runs="$runs" '
	function pf(ok) { return ok ? "PASS" : "FAIL" }
	{ f[NR] = $1; mb[NR] = $2 / 1e6; lay[NR] = $3; s[NR] = $4 / 1e9; rss[NR] = $5 * 1024 / 1e6 }
	END {
		printf "\nperfgraft inject peak RSS against the dump (best wall of %d runs, highest RSS):\n", runs
		printf "%5s %9s %13s %9s %9s %9s %9s %6s\n", "scale", "dump MB", "layout", "wall s",
			"RSS MB", "RSS/dump", "budget", ""
		for (i = 1; i <= NR; i++) {
			b = factor * mb[i] + slack
			if (rss[i] > b)
				bad++
			printf "%4dx %9.1f %13s %9.2f %9.1f %8.2fx %9.1f %6s\n", f[i], mb[i], lay[i], s[i],
				rss[i], rss[i] / mb[i], b, pf(rss[i] <= b)
		}
		printf "memory: RSS target    %s (<= %.1fx the dump + %d MB: %d of %d runs over)\n",
			pf(!bad), factor, slack, bad, NR
	}' "$logs/scale.rows"
}

home_debug_check() {
	if [ -d "$HOME/.debug" ] && [ -n "$(find "$HOME/.debug" -newer "$logs/start" -print -quit 2>/dev/null)" ]; then
		echo "bench-inject: warning: something under $HOME/.debug changed during the run" >&2
	fi
}

if ! want node; then
	if want pipe; then pipe_bench; fi
	if want dwarf; then dwarf_bench; fi
	if want move; then move_bench; fi
	if want scale; then scale_bench; fi
	home_debug_check
	exit 0
fi

# ---- 1. record ---------------------------------------------------------
echo "bench-inject: recording: $perf record -k mono -g -e cpu-clock -N -- $node gen-big-node.js $gen_args"
# shellcheck disable=SC2086
if ! (cd "$rec" && "$perf" --buildid-dir "$debug" record -k mono -g -e cpu-clock -N \
	-o perf.data -- "$node" --perf-prof --perf-prof-unwinding-info \
	--interpreted-frames-native-stack "$here/gen-big-node.js" $gen_args \
	>"$logs/record.out" 2>"$logs/record.err"); then
	tail -n 20 "$logs/record.err" >&2
	fail "perf record / node"
fi
mapfile -t dumps < <(find "$rec" -maxdepth 1 -name 'jit-*.dump')
[ "${#dumps[@]}" -eq 1 ] || fail "expected one jit-*.dump in $rec, found ${#dumps[@]}"
dump=${dumps[0]}
dump_bytes=$(stat -c %s "$dump")
in_bytes=$(stat -c %s "$rec/perf.data")

# Counts from the dump, and the functions with real CFI (perfgraft gives each
# of those an image of its own).
"$pg" dump --json "$dump" 2>"$logs/dump.err" >"$logs/dump.json" ||
	fail "$pg dump --json $dump"
python3 - "$logs/dump.json" "$dump_bytes" >"$logs/summary" <<'EOF' || fail "summarising the dump"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["summary"]
code = 0
cfi = []
pending = None
for r in d["records"]:
    t = r["type"]
    if t == "UNWINDING_INFO":
        pending = r
    elif t == "LOAD":
        code += r["code_size"]
        u, pending = pending, None
        if u and u["mapped_size"] and u["eh_frame_hdr_size"] and not u.get("dropped"):
            cfi.append(r["name"])
print(f"loads={s['loads']} cfi={len(cfi)} code={code}")
print(f"dump: {int(sys.argv[2]) / 1e6:.1f} MB, {s['loads']} LOAD, {s['moves']} MOVE, "
      f"{s['unwinding_infos']} UNWINDING_INFO ({len(cfi)} with real CFI), "
      f"{s['debug_infos']} DEBUG_INFO ({s['lines']} line entries), "
      f"{code / 1e6:.1f} MB of code")
for n in cfi[:5]:
    print(f"  real CFI: {n}")
if len(cfi) > 5:
    print(f"  ... and {len(cfi) - 5} more with real CFI")
EOF
loads=$(sed -n '1s/^loads=\([0-9]*\) .*/\1/p' "$logs/summary")
ncfi=$(sed -n '1s/.* cfi=\([0-9]*\) .*/\1/p' "$logs/summary")
code_bytes=$(sed -n '1s/.* code=\([0-9]*\)$/\1/p' "$logs/summary")
echo "bench-inject: $(sed -n '2p' "$logs/summary")"
sed -n '3,$p' "$logs/summary"
echo "bench-inject: perf.data $(awk -v b="$in_bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB"
if [ "$loads" -lt 50000 ] || [ "$loads" -gt 75000 ]; then
	echo "bench-inject: warning: $loads LOADs, outside the expected ~60,000 (GEN_ARGS?)" >&2
fi
if [ "$dump_bytes" -lt 55000000 ] || [ "$dump_bytes" -gt 65000000 ]; then
	echo "bench-inject: warning: the dump is not 55-65 MB (GEN_ARGS?)" >&2
fi

warm() { cat "$dump" "$rec/perf.data" >/dev/null; sync; }

# ---- 2. perf inject --jit ----------------------------------------------
# perf writes jitted-PID-N.so next to the dump, the output in its cwd, and
# fills the build-id cache; each run starts from the recorded state.
list_paths "$rec" >"$logs/rec.before"
list_paths "$debug" >"$logs/debug.before"
perf_best='' perf_rss='' perf_cpu=''
for i in $(seq "$runs"); do
	if [ "$i" -gt 1 ]; then
		remove_new "$rec" "$logs/rec.before"
		remove_new "$debug" "$logs/debug.before"
		find "$pdir" -mindepth 1 -delete
	fi
	warm
	echo "bench-inject: perf inject --jit (run $i of $runs)"
	t0=$(now_ns)
	if ! (cd "$pdir" && /usr/bin/time -v -o "$logs/perf.time.$i" \
		"$perf" --buildid-dir "$debug" inject --jit -i "$rec/perf.data" \
		-o perf.ref.data >"$logs/perf.out.$i" 2>"$logs/perf.err.$i"); then
		tail -n 20 "$logs/perf.err.$i" >&2
		grep -E 'Exit status|Command terminated' "$logs/perf.time.$i" >&2 || true
		fail "perf inject --jit (run $i)"
	fi
	t1=$(now_ns)
	dt=$((t1 - t0))
	kb=$(rss_kb "$logs/perf.time.$i")
	if [ -z "$perf_best" ] || [ "$dt" -lt "$perf_best" ]; then
		perf_best=$dt
		perf_cpu=$(cpu_s "$logs/perf.time.$i")
	fi
	# The lowest of the runs: the conservative side for the RSS ratio.
	if [ -z "$perf_rss" ] || [ "$kb" -lt "$perf_rss" ]; then perf_rss=$kb; fi
	perf_wrote=$(fs_out_bytes "$logs/perf.time.$i")
done
read -r f1 _ _ b1 k1 < <(new_stats "$rec" "$logs/rec.before")
read -r f2 _ _ b2 k2 < <(new_stats "$pdir" /dev/null)
perf_files=$((f1 + f2))
perf_images=$f1 perf_img_bytes=$b1 perf_img_disk=$k1	# the jitted-*.so
perf_bytes=$((b1 + b2))
perf_disk=$((k1 + k2))
perf_out_bytes=$(stat -c %s "$pdir/perf.ref.data")
read -r cache_reg cache_links cache_dirs cache_bytes _ < <(new_stats "$debug" "$logs/debug.before")
cache_du=$(du -s -B1 "$debug" | awk '{print $1}')

# ---- 3. perfgraft inject, packed and memory layouts ---------------------
# pg_inject NAME LAYOUT: RUNS runs of perfgraft inject --layout LAYOUT in
# $tmp/pg-NAME (output perf.NAME.data, images perf.NAME.data.d); sets pg_*
# of the best run (wall, user+sys), the highest RSS, and the last run's
# files: pg_images, pg_img_bytes (apparent), pg_img_disk (allocated),
# pg_wrote (%O x 512 of the process), pg_out_bytes (the output perf.data),
# pg_files/pg_bytes/pg_disk (everything new).
pg_inject() { # NAME LAYOUT
	local name=$1 layout=$2 i t0 t1 dt kb f1 b1 k1 f2 b2 k2 d1 d2 d3 dir
	dir=$tmp/pg-$name
	mkdir -p "$dir"
	list_paths "$rec" >"$logs/rec.before.$name"
	list_paths "$debug" >"$logs/debug.before.$name"
	pg_best='' pg_rss=0 pg_cpu='' pg_wrote=0
	for i in $(seq "$runs"); do
		find "$dir" -mindepth 1 -delete
		remove_new "$debug" "$logs/debug.before.$name"
		warm
		echo "bench-inject: perfgraft inject --layout $layout (run $i of $runs)"
		t0=$(now_ns)
		if ! (cd "$dir" && /usr/bin/time -v -o "$logs/$name.time.$i" \
			"$pg" inject --buildid-dir "$debug" --layout "$layout" -i "$rec/perf.data" -o "perf.$name.data" \
			>"$logs/$name.out.$i" 2>"$logs/$name.err.$i"); then
			tail -n 20 "$logs/$name.err.$i" >&2
			grep -E 'Exit status|Command terminated' "$logs/$name.time.$i" >&2 || true
			fail "$pg inject --layout $layout (run $i)"
		fi
		t1=$(now_ns)
		dt=$((t1 - t0))
		kb=$(rss_kb "$logs/$name.time.$i")
		if [ -z "$pg_best" ] || [ "$dt" -lt "$pg_best" ]; then
			pg_best=$dt
			pg_cpu=$(cpu_s "$logs/$name.time.$i")
		fi
		# The highest of the runs: the conservative side for the RSS ratio.
		if [ "$kb" -gt "$pg_rss" ]; then pg_rss=$kb; fi
		pg_wrote=$(fs_out_bytes "$logs/$name.time.$i")
	done
	grep '^perfgraft: inject:' "$logs/$name.err.$runs" | sed 's/^/bench-inject: /' || true
	# Anything perfgraft put beside the dump counts too.
	read -r f1 _ _ b1 k1 < <(new_stats "$rec" "$logs/rec.before.$name")
	read -r f2 _ _ b2 k2 < <(new_stats "$dir" /dev/null)
	# Written outside OUTPUT.d: the build-id cache entries (hard links to
	# the images: names, no data, unless the cache is on another file
	# system and they are copies; DISK counts blocks of inodes new there)
	read -r d1 d2 d3 d4 _ < <(new_stats "$debug" "$logs/debug.before.$name")
	pg_cache="$d1 $d2 $d3 $d4 $(find "$debug" -newer "$logs/debug.before.$name" -type f -links 1 -printf '%b\n' | awk '{k += $1 * 512} END {print k + 0}')"
	read -r pg_images _ _ pg_img_bytes pg_img_disk < <(new_stats "$dir/perf.$name.data.d" /dev/null)
	pg_files=$((f1 + f2))
	pg_bytes=$((b1 + b2))
	pg_disk=$((k1 + k2))
	pg_out_bytes=$(stat -c %s "$dir/perf.$name.data")
	if [ "$f1" -gt 0 ]; then
		echo "bench-inject: warning: perfgraft wrote $f1 files beside the dump (counted)" >&2
	fi
	echo "bench-inject: perfgraft --layout $layout wrote outside OUTPUT.d (build-id cache): $d1 files (hard links), $d2 symlinks, $d3 dirs, $d4 bytes apparent"
}
pg_inject pg packed
pk_best=$pg_best pk_rss=$pg_rss pk_cpu=$pg_cpu pk_wrote=$pg_wrote
pk_images=$pg_images pk_img_bytes=$pg_img_bytes pk_img_disk=$pg_img_disk
pk_files=$pg_files pk_bytes=$pg_bytes pk_disk=$pg_disk pk_out_bytes=$pg_out_bytes pk_cache=$pg_cache
pg_inject mem memory
mm_cache=$pg_cache
mm_best=$pg_best mm_rss=$pg_rss mm_wrote=$pg_wrote
mm_images=$pg_images mm_img_bytes=$pg_img_bytes mm_img_disk=$pg_img_disk mm_out_bytes=$pg_out_bytes
pg_best=$pk_best pg_rss=$pk_rss pg_cpu=$pk_cpu pg_images=$pk_images
pg_files=$pk_files pg_bytes=$pk_bytes pg_disk=$pk_disk pg_out_bytes=$pk_out_bytes

# ---- 4. perf report on each output ---------------------------------------
# One untimed run each (warms the page cache; its output is compared), then
# RUNS timed runs, best wall time kept.
report() { # NAME FILE
	local name=$1 file=$2 best='' i t0 t1 dt
	"$perf" --buildid-dir "$debug" report --stdio --sort sym -i "$file" \
		>"$logs/report.$name" 2>"$logs/report.$name.err" ||
		{ tail -n 20 "$logs/report.$name.err" >&2; fail "perf report -i $file"; }
	for i in $(seq "$runs"); do
		t0=$(now_ns)
		"$perf" --buildid-dir "$debug" report --stdio --sort sym -i "$file" \
			>/dev/null 2>&1 || fail "perf report -i $file (run $i)"
		t1=$(now_ns)
		dt=$((t1 - t0))
		if [ -z "$best" ] || [ "$dt" -lt "$best" ]; then best=$dt; fi
	done
	echo "$best"
}
echo "bench-inject: perf report --stdio --sort sym on each output"
rep_perf=$(report perf "$pdir/perf.ref.data")
rep_pg=$(report pg "$gdir/perf.pg.data")
rep_mem=$(report mem "$mdir/perf.mem.data")

for name in pg mem; do
python3 - "$logs/report.perf" "$logs/report.$name" "$name" <<'EOF' || true
import re, sys
pat = re.compile(r"^\s+([0-9.]+)%\s+(?:([0-9.]+)%\s+)?\[(.)\]\s+(.*?)\s*$")
jit = re.compile(r"^(JS|Builtin|BytecodeHandler|Eval|RegExp|Stub|Function|Script|LazyCompile|Handler):")
def parse(path):
    rows = {}
    for line in open(path, errors="replace"):
        m = pat.match(line)
        if m:
            first = float(m.group(1))
            self_ = float(m.group(2)) if m.group(2) is not None else first
            rows.setdefault(m.group(4), (first, self_))
    return rows
a, b = parse(sys.argv[1]), parse(sys.argv[2])
lay = "packed" if sys.argv[3] == "pg" else "memory"
def top(rows, k):
    return [s for s, _ in sorted(rows.items(), key=lambda kv: (-kv[1][k], kv[0]))[:10]]
ok = True
for k, what in ((0, "children"), (1, "self")):
    ta, tb = top(a, k), top(b, k)
    if ta == tb:
        print(f"bench-inject: perf report top 10 by {what} ({lay}): the same 10 symbols")
    else:
        ok = False
        print(f"bench-inject: WARNING: perf report top 10 by {what} differ ({lay})", file=sys.stderr)
        for i in range(10):
            x = ta[i] if i < len(ta) else "-"
            y = tb[i] if i < len(tb) else "-"
            print(f"  {'=' if x == y else '!'} {x[:60]:60}  {y[:60]}", file=sys.stderr)
diff = sum(1 for s in set(a) | set(b) if a.get(s) != b.get(s))
ja = sum(1 for s in a if jit.match(s))
jb = sum(1 for s in b if jit.match(s))
ra = sum(1 for s in a if s.startswith("0x"))
rb = sum(1 for s in b if s.startswith("0x"))
print(f"bench-inject: perf report symbols: perf {len(a)} ({ja} JIT, {ra} raw addresses), "
      f"perfgraft {lay} {len(b)} ({jb} JIT, {rb} raw addresses); {diff} differ in percentages or presence")
EOF
done

# ---- 5. table ------------------------------------------------------------
awk -v runs="$runs" -v dump_bytes="$dump_bytes" \
    -v p_ns="$perf_best" -v g_ns="$pg_best" \
    -v p_kb="$perf_rss" -v g_kb="$pg_rss" \
    -v p_cpu="$perf_cpu" -v g_cpu="$pg_cpu" \
    -v p_files="$perf_files" -v g_files="$pg_files" -v g_images="$pg_images" \
    -v p_bytes="$perf_bytes" -v g_bytes="$pg_bytes" \
    -v p_disk="$perf_disk" -v g_disk="$pg_disk" \
    -v p_out="$perf_out_bytes" -v g_out="$pg_out_bytes" \
    -v p_rep="$rep_perf" -v g_rep="$rep_pg" \
    -v c_reg="$cache_reg" -v c_links="$cache_links" -v c_dirs="$cache_dirs" \
    -v c_bytes="$cache_bytes" -v c_du="$cache_du" -v ncfi="$ncfi" \
    -v t_speed="$target_speedup" -v t_rss="$target_rss" \
    -v t_img="$target_images" -v t_bytes="$target_bytes" '
function pf(ok) { return ok ? "PASS" : "FAIL" }
BEGIN {
	p_s = p_ns / 1e9; g_s = g_ns / 1e9
	p_mb = p_kb * 1024 / 1e6; g_mb = g_kb * 1024 / 1e6
	split(p_cpu, pc, " "); split(g_cpu, gc, " ")
	speed = g_s > 0 ? p_s / g_s : 0
	rssr = g_mb > 0 ? p_mb / g_mb : 0
	bytes_r = g_bytes / dump_bytes
	printf "\n"
	printf "%-22s %16s %16s %10s\n", "", "perf inject --jit", "perfgraft", "perf/pg"
	printf "%-22s %16.2f %16.2f %9.1fx\n", "wall s (best of " runs ")", p_s, g_s, speed
	printf "%-22s %16s %16s\n", "user+sys s", \
		sprintf("%.2f+%.2f", pc[1], pc[2]), sprintf("%.2f+%.2f", gc[1], gc[2])
	printf "%-22s %16.1f %16.1f %9.1fx\n", "peak RSS MB", p_mb, g_mb, rssr
	printf "%-22s %16d %16d %9.0fx\n", "files written", p_files, g_files, (g_files ? p_files / g_files : 0)
	printf "%-22s %16.1f %16.1f %9.2fx\n", "bytes written MB", p_bytes / 1e6, g_bytes / 1e6, (g_bytes ? p_bytes / g_bytes : 0)
	printf "%-22s %16.1f %16.1f\n", "  of which perf.data", p_out / 1e6, g_out / 1e6
	printf "%-22s %16.1f %16.1f %9.2fx\n", "disk used MB", p_disk / 1e6, g_disk / 1e6, (g_disk ? p_disk / g_disk : 0)
	printf "%-22s %16.2f %16.2f %9.2fx\n", "perf report s", p_rep / 1e9, g_rep / 1e9, (g_rep ? p_rep / g_rep : 0)
	printf "\n"
	printf "perf also filled its build-id cache (--buildid-dir): %d files, %d symlinks, %d dirs,\n", c_reg, c_links, c_dirs
	printf "  %.1f MB apparent, %.1f MB on disk (du; this includes the elf files, which are\n", c_bytes / 1e6, c_du / 1e6
	printf "  hard links to the jitted-*.so counted above)\n"
	printf "perfgraft: %d image files (%d for the function(s) with real CFI, the rest packed)\n\n", g_images, ncfi
	printf "speedup target        %s (%.1fx vs >= %dx)\n", pf(speed >= t_speed), speed, t_speed
	printf "memory target         %s (perf/perfgraft RSS %.1fx vs >= %dx)\n", pf(rssr >= t_rss), rssr, t_rss
	printf "image files target    %s (%d vs <= %d)\n", pf(g_images <= t_img), g_images, t_img
	printf "bytes target          %s (%.1f MB / %.1f MB dump = %.2f vs <= %.1f)\n", \
		pf(bytes_r <= t_bytes), g_bytes / 1e6, dump_bytes / 1e6, bytes_r, t_bytes
}'

# ---- 6. the image layouts against the dump's code ------------------------
if [ "$perf_wrote" = 0 ] || [ "$mm_wrote" = 0 ]; then
	echo "bench-inject: warning: %O read 0 bytes written (TMPDIR on tmpfs?): the wrote rows mean nothing" >&2
fi
# Images only (perf's jitted-*.so beside the dump; perfgraft's OUTPUT.d), so
# the ratios to the code bytes (sum of LOAD code_size) show the layout's
# overhead: ELF headers, symbols, line tables, CFI, padding, holes.  "wrote"
# is the whole process (%O x 512, output perf.data and for perf its
# build-id cache included); "wrote, images" subtracts the output perf.data's
# size from it.
awk -v runs="$runs" -v code="$code_bytes" \
    -v p_ns="$perf_best" -v k_ns="$pk_best" -v m_ns="$mm_best" \
    -v p_img="$perf_images" -v k_img="$pk_images" -v m_img="$mm_images" \
    -v p_app="$perf_img_bytes" -v k_app="$pk_img_bytes" -v m_app="$mm_img_bytes" \
    -v p_du="$perf_img_disk" -v k_du="$pk_img_disk" -v m_du="$mm_img_disk" \
    -v p_wr="$perf_wrote" -v k_wr="$pk_wrote" -v m_wr="$mm_wrote" \
    -v p_out="$perf_out_bytes" -v k_out="$pk_out_bytes" -v m_out="$mm_out_bytes" \
    -v p_kb="$perf_rss" -v k_kb="$pk_rss" -v m_kb="$mm_rss" \
    -v p_rep="$rep_perf" -v k_rep="$rep_pg" -v m_rep="$rep_mem" \
    -v t_img="$target_images" -v t_bytes="$target_bytes" -v t_time="$target_mem_time" '
function pf(ok) { return ok ? "PASS" : "FAIL" }
function row(label, p, k, m) { printf "%-24s %16s %16s %16s\n", label, p, k, m }
function mbr(b) { return sprintf("%.1f (%.2fx)", b / 1e6, code > 0 ? b / code : 0) }
BEGIN {
	m_wi = m_wr - m_out; k_wi = k_wr - k_out; p_wi = p_wr - p_out
	printf "\nImage layouts against the dump'"'"'s code: %.1f MB (sum of LOAD code_size);\n", code / 1e6
	printf "MB (ratio to the code):\n"
	row("", "perf inject --jit", "pg packed", "pg memory")
	row("wall s (best of " runs ")", sprintf("%.2f", p_ns / 1e9), sprintf("%.2f", k_ns / 1e9),
	    sprintf("%.2f", m_ns / 1e9))
	row("peak RSS MB", sprintf("%.1f", p_kb * 1024 / 1e6), sprintf("%.1f", k_kb * 1024 / 1e6),
	    sprintf("%.1f", m_kb * 1024 / 1e6))
	row("image files", p_img, k_img, m_img)
	row("images apparent (ls)", mbr(p_app), mbr(k_app), mbr(m_app))
	row("images allocated (du)", mbr(p_du), mbr(k_du), mbr(m_du))
	row("wrote, process (%O)", mbr(p_wr), mbr(k_wr), mbr(m_wr))
	row("  output perf.data", sprintf("%.1f", p_out / 1e6), sprintf("%.1f", k_out / 1e6),
	    sprintf("%.1f", m_out / 1e6))
	row("wrote, images", mbr(p_wi), mbr(k_wi), mbr(m_wi))
	row("perf report s", sprintf("%.2f", p_rep / 1e9), sprintf("%.2f", k_rep / 1e9),
	    sprintf("%.2f", m_rep / 1e9))
	printf "\n"
	tr = k_ns > 0 ? m_ns / k_ns : 0
	printf "memory: image files   %s (%d vs <= %d)\n", pf(m_img <= t_img), m_img, t_img
	printf "memory: wrote, images %s (%.2fx the code vs <= %.1f)\n", pf(m_wi <= t_bytes * code), m_wi / code, t_bytes
	printf "memory: disk used     %s (%.2fx the code vs <= %.1f)\n", pf(m_du <= t_bytes * code), m_du / code, t_bytes
	printf "memory: inject time   %s (%.2fx packed vs <= %.2f)\n", pf(tr <= t_time), tr, t_time
}'

if want pipe; then pipe_bench; fi
# ---- 7. outside OUTPUT.d: the build-id cache -----------------------------
# What each tool wrote outside its images for the output to survive mv and
# perf archive: perf inject --jit's jitted-*.so are hard-linked into the
# cache with every other dso with hits; perfgraft's images alone.  "new
# data" is the blocks of files there with one link (copies, perf's own
# kallsyms/debug files), i.e. bytes written twice.
read -r pf1 pf2 pf3 pf4 _ <<<"$cache_reg $cache_links $cache_dirs $cache_bytes x"
printf "\nWritten outside the images' directory (build-id cache):\n"
printf "%-16s %8s %9s %7s %16s\n" "" files symlinks dirs "apparent MB"
printf "%-16s %8d %9d %7d %16.1f\n" "perf inject" "$pf1" "$pf2" "$pf3" "$(echo "$pf4" | awk '{print $1 / 1e6}')"
for m in pk mm; do
	v=${m}_cache
	read -r c1 c2 c3 c4 c5 <<<"${!v}"
	printf "%-16s %8d %9d %7d %16.1f  (new data %.1f MB)\n" \
		"pg $([ $m = pk ] && echo packed || echo memory)" "$c1" "$c2" "$c3" \
		"$(echo "$c4" | awk '{print $1 / 1e6}')" "$(echo "$c5" | awk '{print $1 / 1e6}')"
done

if want dwarf; then dwarf_bench; fi
if want move; then move_bench; fi
if want scale; then scale_bench; fi
home_debug_check
exit 0
