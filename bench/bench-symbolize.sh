#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark: `perfgraft symbolize` on 1,000,000 addresses against a large
# node jitdump (about 82,000 LOADs), with `addr2line -f` on the images of
# `perfgraft elf` as the reference point.  Target: at least 1,000,000
# addresses a second.
#
# usage: bench/bench-symbolize.sh [BUILD_DIR] [DUMP] [--keep DIR]
#                                 [--count N] [--no-at-time]
#                                 [--no-reference] [--skip-perfgraft]
#
#   BUILD_DIR         meson build directory holding perfgraft (default: build)
#   DUMP              jitdump to use; without it one is made by running
#                     bench/gen-big-node.js under node --perf-prof
#   --keep DIR        work in DIR (created; must be empty) and keep it:
#                     the dump, the address files, the images, every
#                     tool's output, logs and timings
#   --count N         addresses in each address file (default 1000000)
#   --no-at-time      skip the second pass (ADDR@TIME over every LOAD)
#   --no-reference    skip addr2line and the comparison
#   --skip-perfgraft  skip perfgraft symbolize (reference only)
#
# Environment: RUNS (default 3: perfgraft symbolize runs this many times
# on each address file and the median wall time counts), REF_RUNS (default
# 3: the same for addr2line, all images' processes together), SEED (default 1),
# GEN_ARGS (default "20000 1 3": arguments for gen-big-node.js), NODE
# (default node), ADDR2LINE (default addr2line), ELF_LAYOUT (default
# memory, perfgraft elf's default: the layout of the images addr2line reads,
# named in the ratio lines; packed puts almost every function in one image),
# TMPDIR (where the work directory goes).
#
# Then `perfgraft perf-map` writes the same dump's perf map RUNS times
# (median wall time, peak RSS), and the map is checked to be sorted with no
# overlapping lines; no other tool writes a perf map from a jitdump.
#
# Two address files are made (bench/symbolize-ref.py, fixed seed), each
# 99% inside code and 1% outside all code:
#   plain   ADDR: a function chosen uniformly among those whose code is
#           still live at the end of the dump, then a byte of what it
#           still owns (V8 reuses the code space: most LOADs are partly or
#           wholly replaced later).  This is the pass the target is for.
#   at-time ADDR@TIME: any LOAD, uniformly, any byte of it, at a time
#           between its record time and the next LOAD over that byte.
# perfgraft symbolize reads each file on stdin and writes its text output
# to a file.  The reference translates every address into the image file
# and address `perfgraft elf DUMP --list` gives for the code live there
# (then), and runs one `addr2line -f -e IMAGE` per image with all of that
# image's addresses on stdin; the translation is timed apart.  Then every
# answer is compared: function name with addr2line's, offset with the one
# the translation expects, file:line with addr2line's where either gives
# one (columns are not compared: addr2line prints none).
#
# Peak RSS is the largest of the runs (for addr2line: of its processes).
# MB = 10^6 bytes throughout.  Exits 0 whether or not the target is met or
# the answers agree; 1 when making the dump, perfgraft or addr2line fails;
# 2 on a setup problem.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"	# work_dir, timed, times_of
root=$(dirname "$here")

target_rate=1000000	# perfgraft addresses/s, at least (plain pass)
min_loads=60000		# the issue's dump: at least this many functions
runs=${RUNS:-3}
ref_runs=${REF_RUNS:-3}
seed=${SEED:-1}
node=${NODE:-node}
a2l=${ADDR2LINE:-addr2line}
gen_args=${GEN_ARGS:-20000 1 3}
elf_layout=${ELF_LAYOUT:-memory}

die() { echo "bench-symbolize: $*" >&2; exit 2; }
fail() { echo "bench-symbolize: FAILED: $*" >&2; exit 1; }
say() { echo "bench-symbolize: $*"; }
usage() { sed -n '8,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

build=''
dump=''
keep=''
count=1000000
at_time=1
reference=1
run_pg=1
npos=0
while [ $# -gt 0 ]; do
	case $1 in
	--keep) [ $# -ge 2 ] || die "--keep needs a directory"; keep=$2; shift ;;
	--keep=*) keep=${1#--keep=} ;;
	--count) [ $# -ge 2 ] || die "--count needs a number"; count=$2; shift ;;
	--count=*) count=${1#--count=} ;;
	--no-at-time) at_time=0 ;;
	--no-reference) reference=0 ;;
	--skip-perfgraft) run_pg=0 ;;
	-h|--help) usage; exit 0 ;;
	-*) usage >&2; die "unknown option $1" ;;
	*) case $npos in
	   0) build=$1 ;;
	   1) dump=$1 ;;
	   *) usage >&2; die "too many arguments" ;;
	   esac
	   npos=$((npos + 1)) ;;
	esac
	shift
done
[ "$reference" = 1 ] || [ "$run_pg" = 1 ] || die "--no-reference with --skip-perfgraft leaves nothing to measure"
[[ "$count" =~ ^[1-9][0-9]*$ ]] || die "--count must be a positive number"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number"
[[ "$ref_runs" =~ ^[1-9][0-9]*$ ]] || die "REF_RUNS must be a positive number"
[[ "$seed" =~ ^[0-9]+$ ]] || die "SEED must be a number"

build=${build:-$root/build}
pg=$build/perfgraft
[ -x "$pg" ] || die "no executable $pg (build first, or pass BUILD_DIR)"
pg=$(cd "$(dirname "$pg")" && pwd)/$(basename "$pg")
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (Debian: apt-get install time)"
command -v python3 >/dev/null || die "no python3"
if [ "$reference" = 1 ]; then
	command -v "$a2l" >/dev/null || die "no $a2l (Debian: binutils; or --no-reference)"
fi
if [ "$run_pg" = 1 ] && ! msg=$("$pg" symbolize --help 2>&1 >/dev/null); then
	[ -z "$msg" ] || printf '  %s\n' "${msg//$'\n'/$'\n  '}" >&2
	die "$pg has no working 'symbolize' command ('$pg symbolize --help' failed); use --skip-perfgraft to measure the reference only"
fi
if [ -n "$dump" ]; then
	[ -r "$dump" ] || die "cannot read $dump"
	dump=$(cd "$(dirname "$dump")" && pwd)/$(basename "$dump")
fi

work_dir bench-symbolize "$keep"
machine_line "bench-symbolize: "
logs=$tmp/logs
mkdir "$logs"
ref_py=$here/symbolize-ref.py

# "key=value ..." line -> value of KEY.
kv() { # KEY LINE
	sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"
}
# Writes NAME.time as "MEDIAN_WALL_S MAX_PEAK_KB" of the runs NAME.1..N.
median_of() { # NAME N
	local name=$1 n=$2 i
	for ((i = 1; i <= n; i++)); do times_of "$name.$i"; done >"$logs/$name.runs"
	sort -n -k1,1 "$logs/$name.runs" | awk -v n="$n" '
		{ w[NR] = $1; if ($2 > kb) kb = $2 }
		END { printf "%s %d\n", w[int((n + 1) / 2)], kb }' >"$logs/$name.time"
}
walls() { cut -d' ' -f1 "$logs/$1.runs" | tr '\n' ' '; }

# ---- 1. the dump -------------------------------------------------------
if [ -z "$dump" ]; then
	command -v "$node" >/dev/null || die "no $node to make a dump; pass DUMP"
	say "making a dump: $node --perf-prof --perf-prof-unwinding-info --interpreted-frames-native-stack --always-sparkplug gen-big-node.js $gen_args"
	mkdir "$tmp/gen"
	# shellcheck disable=SC2086
	if ! (cd "$tmp/gen" && timed gen "$node" --perf-prof --perf-prof-unwinding-info \
		--interpreted-frames-native-stack --always-sparkplug \
		"$here/gen-big-node.js" $gen_args); then
		tail -n 20 "$logs/gen.err" >&2
		fail "node gen-big-node.js $gen_args"
	fi
	mapfile -t dumps < <(find "$tmp/gen" -maxdepth 1 -name 'jit-*.dump')
	[ "${#dumps[@]}" = 1 ] || fail "expected one jit-*.dump from node, found ${#dumps[@]}"
	dump=${dumps[0]}
fi
dump_bytes=$(stat -L -c %s "$dump")

# The counts, by perfgraft dump and by the script's own reader.
own=$(python3 "$ref_py" count "$dump") || fail "reading $dump"
loads=$(kv code_loads "$own")
debug_infos=$(kv debug_infos "$own")
nlines=$(kv lines "$own")
moves=$(kv moves "$own")
pg_loads=''
if "$pg" dump --json "$dump" >"$logs/dump.json" 2>"$logs/dump.err"; then
	pg_loads=$(python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print(s["loads"], s["debug_infos"], s["lines"])' "$logs/dump.json" 2>/dev/null || true)
	rm -f "$logs/dump.json"
fi
awk -v b="$dump_bytes" -v l="$loads" -v d="$debug_infos" -v n="$nlines" -v m="$moves" -v f="$dump" 'BEGIN {
	printf "bench-symbolize: dump %s: %.1f MB, %d LOADs with code, %d MOVEs, %d DEBUG_INFO (%d line entries)\n", f, b / 1e6, l, m, d, n }'
if [ -n "$pg_loads" ]; then
	if [ "$pg_loads" = "$(kv loads "$own") $debug_infos $nlines" ]; then
		say "  perfgraft dump counts the same LOADs, DEBUG_INFO and line entries"
	else
		say "  WARNING: perfgraft dump counts LOAD/DEBUG_INFO/lines = $pg_loads, this script $(kv loads "$own") $debug_infos $nlines"
	fi
else
	say "  (perfgraft dump --json gave no counts to check against)"
fi
[ "$loads" -ge "$min_loads" ] || say "  WARNING: fewer than $min_loads LOADs with code (the issue's dump has at least $min_loads)"

# ---- 2. the addresses --------------------------------------------------
passes=(plain)
if [ "$at_time" = 1 ]; then passes+=(at-time); fi
for p in "${passes[@]}"; do
	flag=''
	[ "$p" = at-time ] && flag=--at-time
	t0=$(date +%s%N)
	# shellcheck disable=SC2086
	info=$(python3 "$ref_py" gen $flag --count "$count" --seed "$seed" "$dump" "$tmp/addrs.$p") ||
		fail "making the $p addresses"
	t1=$(date +%s%N)
	echo "$info" >"$logs/gen.$p"
	if [ "$p" = plain ]; then
		awk -v i="$info" -v s="$(((t1 - t0) / 1000000))e-3" 'BEGIN {
			n = split(i, kvs, " "); for (j = 1; j <= n; j++) { split(kvs[j], x, "="); v[x[1]] = x[2] }
			printf "bench-symbolize: at the end of the dump %d of the %d LOADs still own code (%d were partly, %d wholly replaced by later code)\n", v["live_placements"], v["placements"], v["partly_replaced"] - v["wholly_replaced"], v["wholly_replaced"]
			printf "bench-symbolize: plain addresses: %d (%d in %d functions live at the end, %d outside all code), seed %d, made in %.1f s\n", v["addresses"], v["inside"], v["functions_hit"], v["outside"], v["seed"], s }'
	else
		awk -v i="$info" -v s="$(((t1 - t0) / 1000000))e-3" 'BEGIN {
			n = split(i, kvs, " "); for (j = 1; j <= n; j++) { split(kvs[j], x, "="); v[x[1]] = x[2] }
			printf "bench-symbolize: at-time addresses: %d ADDR@TIME (%d in %d functions, %d of them at code replaced later, %d outside all code), seed %d, made in %.1f s\n", v["addresses"], v["inside"], v["functions_hit"], v["at_replaced_code"], v["outside"], v["seed"], s }'
	fi
done

# ---- 3. perfgraft symbolize -------------------------------------------
warm() { cat "$dump" "$@" >/dev/null; }
if [ "$run_pg" = 1 ]; then
	# The fixed cost: reading the dump and building the index, no address.
	warm
	timed pg.empty "$pg" symbolize "$dump" </dev/null ||
		{ tail -n 5 "$logs/pg.empty.err" >&2; fail "$pg symbolize $dump </dev/null"; }
	for p in "${passes[@]}"; do
		say "perfgraft symbolize DUMP < $p addresses ($runs runs)"
		for ((i = 1; i <= runs; i++)); do
			rm -f "$logs/pg.$p.$((i - 1)).out"	# keep the last run's output only
			warm "$tmp/addrs.$p"
			if ! timed "pg.$p.$i" "$pg" symbolize "$dump" <"$tmp/addrs.$p"; then
				tail -n 20 "$logs/pg.$p.$i.err" >&2
				fail "$pg symbolize $dump < addrs.$p (exit status $(cat "$logs/pg.$p.$i.status"))"
			fi
		done
		mv "$logs/pg.$p.$runs.out" "$tmp/pg.$p.out"
		median_of "pg.$p" "$runs"
		say "  wall s of the runs: $(walls "pg.$p")(median $(cut -d' ' -f1 "$logs/pg.$p.time"))"
		say "  $(wc -l <"$tmp/pg.$p.out") lines out; perfgraft said:"
		grep -v '^perfgraft: warning:' "$logs/pg.$p.$runs.err" | sed 's/^/bench-symbolize:     /'
		w=$(grep -c '^perfgraft: warning:' "$logs/pg.$p.$runs.err" || true)
		[ "$w" = 0 ] || say "    (and $w warnings about the dump, in logs/pg.$p.$runs.err)"
	done
fi

# ---- 4. the reference: perfgraft elf --list, translation, addr2line -------
ref_failed=0
if [ "$reference" = 1 ]; then
	mkdir "$tmp/img"
	if ! timed elf "$pg" elf -q --layout "$elf_layout" "$dump" -o "$tmp/img" --list; then
		tail -n 20 "$logs/elf.err" >&2
		fail "$pg elf $dump --list"
	fi
	mv "$logs/elf.out" "$tmp/list.tsv"
	say "perfgraft elf --layout $elf_layout --list: $(wc -l <"$tmp/list.tsv") functions in $(find "$tmp/img" -type f | wc -l) images, $(times_of elf | cut -d' ' -f1) s"
	for p in "${passes[@]}"; do
		rdir=$tmp/ref.$p
		mkdir "$rdir"
		if ! timed "translate.$p" python3 "$ref_py" translate "$dump" "$tmp/list.tsv" "$tmp/addrs.$p" "$rdir"; then
			cat "$logs/translate.$p.err" >&2
			fail "translating the $p addresses"
		fi
		mapfile -t images <"$rdir/images"
		n_ref=0
		for ((k = 0; k < ${#images[@]}; k++)); do
			n_ref=$((n_ref + $(wc -l <"$rdir/img.$k.addrs")))
		done
		say "addr2line -f -e IMAGE < $p image addresses: $n_ref addresses in ${#images[@]} images, one process each ($ref_runs runs; translation took $(times_of "translate.$p" | cut -d' ' -f1) s, not counted)"
		if [ "$p" = plain ]; then
			# addr2line's fixed cost: one address for each image.
			wall=0 kb=0
			for ((k = 0; k < ${#images[@]}; k++)); do
				head -n 1 "$rdir/img.$k.addrs" >"$rdir/one.$k"
				warm "$tmp/img/${images[$k]}"
				timed "a2l.one.$k" "$a2l" -f -e "$tmp/img/${images[$k]}" <"$rdir/one.$k" || true
				read -r w m < <(times_of "a2l.one.$k")
				wall=$(awk -v a="$wall" -v b="$w" 'BEGIN { print a + b }')
				if [ "$m" -gt "$kb" ]; then kb=$m; fi
			done
			echo "$wall $kb" >"$logs/a2l.one.time"
		fi
		for ((r = 1; r <= ref_runs; r++)); do
			wall=0 kb=0
			for ((k = 0; k < ${#images[@]}; k++)); do
				rm -f "$logs/a2l.$p.img$k.out"
				warm "$tmp/img/${images[$k]}" "$rdir/img.$k.addrs"
				if ! timed "a2l.$p.img$k" "$a2l" -f -e "$tmp/img/${images[$k]}" <"$rdir/img.$k.addrs"; then
					say "  FAILED: $a2l -f -e ${images[$k]} (exit status $(cat "$logs/a2l.$p.img$k.status")): $(tail -n 1 "$logs/a2l.$p.img$k.err")"
					ref_failed=1
				fi
				read -r w m < <(times_of "a2l.$p.img$k")
				wall=$(awk -v a="$wall" -v b="$w" 'BEGIN { print a + b }')
				if [ "$m" -gt "$kb" ]; then kb=$m; fi
			done
			echo "$wall $kb" >"$logs/a2l.$p.$r.time"
		done
		for ((k = 0; k < ${#images[@]}; k++)); do
			mv "$logs/a2l.$p.img$k.out" "$rdir/img.$k.out"
		done
		median_of "a2l.$p" "$ref_runs"
		echo "$n_ref" >"$logs/a2l.$p.count"
		say "  wall s of the runs (all images): $(walls "a2l.$p")(median $(cut -d' ' -f1 "$logs/a2l.$p.time"))"
	done
fi

# ---- 5. comparison -----------------------------------------------------
if [ "$reference" = 1 ] && [ "$run_pg" = 1 ] && [ "$ref_failed" = 0 ]; then
	for p in "${passes[@]}"; do
		python3 "$ref_py" compare --show 5 "$tmp/addrs.$p" "$tmp/ref.$p" "$tmp/pg.$p.out" \
			>"$logs/compare.$p" || fail "comparing the $p answers"
	done
fi

# ---- 6. summary --------------------------------------------------------
echo
awk -v b="$dump_bytes" -v l="$loads" -v d="$debug_infos" 'BEGIN {
	printf "dump: %.1f MB, %d LOADs with code, %d DEBUG_INFO\n", b / 1e6, l, d }'
if [ "$run_pg" = 1 ]; then
	awk -v t="$(times_of pg.empty)" 'BEGIN { split(t, x, " ")
		printf "perfgraft symbolize with no address (one run: read the dump, build the index): %.2f s, %.1f MB peak RSS\n", x[1], x[2] * 1024 / 1e6 }'
fi
if [ "$reference" = 1 ]; then
	awk -v t="$(times_of a2l.one)" 'BEGIN { split(t, x, " ")
		printf "addr2line -f with one address an image (one run): %.2f s, %.1f MB peak RSS\n", x[1], x[2] * 1024 / 1e6 }'
fi
printf '\n%-8s %-30s %10s %9s %14s %12s\n' pass tool addresses "wall s" "addresses/s" "peak RSS MB"
for p in "${passes[@]}"; do
	if [ "$run_pg" = 1 ]; then
		read -r s kb < <(times_of "pg.$p")
		awk -v p="$p" -v n="$count" -v s="$s" -v kb="$kb" -v r="$runs" 'BEGIN {
			printf "%-8s %-30s %10d %9.2f %14.0f %12.1f\n", p, "perfgraft symbolize (med. " r ")", n, s, (s > 0 ? n / s : 0), kb * 1024 / 1e6 }'
	fi
	if [ "$reference" = 1 ]; then
		read -r s kb < <(times_of "a2l.$p")
		awk -v p="$p" -v n="$(cat "$logs/a2l.$p.count")" -v s="$s" -v kb="$kb" -v r="$ref_runs" 'BEGIN {
			printf "%-8s %-30s %10d %9.2f %14.0f %12.1f\n", p, "addr2line -f (med. " r ")", n, s, (s > 0 ? n / s : 0), kb * 1024 / 1e6 }'
	fi
done
echo "(addr2line gets the addresses inside code only: those outside all code have no image)"
if [ "$run_pg" = 1 ] && [ "$reference" = 1 ]; then
	for p in "${passes[@]}"; do
		read -r ps pkb < <(times_of "pg.$p")
		read -r as akb < <(times_of "a2l.$p")
		awk -v p="$p" -v lay="$elf_layout" -v n="$count" -v ps="$ps" -v pkb="$pkb" -v na="$(cat "$logs/a2l.$p.count")" -v as="$as" -v akb="$akb" 'BEGIN {
			# /usr/bin/time has 10 ms resolution: count 0.00 s as 0.01 s.
			pr = n / (ps > 0 ? ps : 0.01); ar = na / (as > 0 ? as : 0.01)
			printf "%s: perfgraft/addr2line rate = %.1fx (addr2line on %s-layout images), peak RSS perfgraft/addr2line = %.2fx\n", p, pr / ar, lay, (akb ? pkb / akb : 0) }'
	done
fi
if [ "$run_pg" = 1 ]; then
	read -r s _ < <(times_of pg.plain)
	awk -v n="$count" -v s="$s" -v t="$target_rate" 'BEGIN {
		r = n / (s > 0 ? s : 0.01)
		printf "perfgraft symbolize rate  %s (%.0f addresses/s vs >= %d, plain pass)\n", (r >= t ? "PASS" : "FAIL"), r, t }'
fi
if [ "$ref_failed" = 1 ]; then
	echo "comparison: not done (addr2line failed)"
elif [ "$run_pg" = 1 ] && [ "$reference" = 1 ]; then
	for p in "${passes[@]}"; do
		c=$(head -n 1 "$logs/compare.$p")
		awk -v p="$p" -v c="$c" 'BEGIN {
			n = split(c, kvs, " "); for (j = 1; j <= n; j++) { split(kvs[j], x, "="); v[x[1]] = x[2] }
			printf "%s answers: %d of %d agree (%s); names %d/%d, offsets %d/%d, file:line %d/%d (addr2line gives a line for %d, perfgraft for %d), outside all code %d/%d\n", \
				p, v["agree"], v["compared"], (v["agree"] == v["compared"] && v["results"] == v["compared"] ? "MATCH" : "MISMATCH"), \
				v["names_ok"], v["inside"], v["offsets_ok"], v["inside"], v["lines_ok"], v["lines_compared"], \
				v["ref_with_line"], v["pg_with_line"], v["outside_ok"], v["outside"]
			if (v["results"] != v["compared"]) printf "  perfgraft wrote %d result lines for %d addresses\n", v["results"], v["compared"] }'
		sed -n '2,$s/^/  /p' "$logs/compare.$p"
	done
fi
# perfgraft perf-map on the same dump: the other export of a dump's code.
# No tool writes a perf map from a jitdump, so there is no reference; the
# map is checked instead: sorted, no two lines overlapping.
if [ "$run_pg" = 1 ]; then
	for i in $(seq 1 "$runs"); do
		timed "pmap.$i" "$pg" perf-map -q "$dump" -o "$tmp/perf.map" ||
			fail "perfgraft perf-map: $(cat "$logs/pmap.$i.err")"
	done
	median_of pmap "$runs"
	read -r s kb < <(times_of pmap)
	python3 - "$tmp/perf.map" "$s" "$kb" <<'EOF_PY'
import sys
end = n = bad = 0
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    st, sz = (int(x, 16) for x in line.split(" ", 2)[:2])
    bad += n > 0 and st < end
    end = st + sz
    n += 1
ok = f"{bad} lines overlap the one before: FAIL" if bad else "sorted, no overlapping lines"
print(f"perfgraft perf-map: {n} lines in {float(sys.argv[2]):.2f} s (median of runs), "
      f"{int(sys.argv[3]) * 1024 / 1e6:.1f} MB peak RSS; {ok}")
EOF_PY
fi
if [ -n "$keep" ]; then
	say "kept $tmp (addrs.*, pg.*.out, ref.*/, img/, list.tsv, logs/)"
fi
[ "$ref_failed" = 0 ] || exit 1
exit 0
