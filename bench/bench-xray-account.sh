#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark: `perfgraft xray --account` (llvm-xray account's table, native)
# against the two other routes to the same table, on bench/xray-big.cc's
# FDR trace:
#   - perf script: `perfgraft xray TRACE -b BIN -o x.data` then
#     `perf script -i x.data -s perf-scripts/xray-account.py -- -k -d`;
#   - llvm-xray's YAML route: `llvm-xray convert -f yaml TRACE`, the header's
#     version set to 1, `llvm-xray account -k -d -m BIN` on the YAML (the
#     route whose figures are right on multi-threaded traces).
# Target: --account at >= 100 MB of trace per second of user CPU time.
#
# usage: bench/bench-xray-account.sh [SIZE_MB] [--small MB] [--keep DIR]
#                                    [--no-reference]
#
#   SIZE_MB         the trace --account reads (default 192); the other routes
#                   need minutes and GBs there (the YAML route ~580x the
#                   trace in RAM), so they run on a small trace and are
#                   projected to SIZE_MB linearly (time and RSS)
#   --small MB      the small trace all three routes read (default 4); the
#                   three tables must be the same bytes there
#   --keep DIR      work in DIR (created, must be empty) and keep it
#   --no-reference  --account only (no perf, no llvm-xray)
#
# Environment: PERFGRAFT (default build/perfgraft), CLANGXX, LLVM_XRAY, PERF
# (default perf), RUNS (default 3: --account's runs, the median counts),
# XRAY_TRACE and XRAY_BIN (use this trace and binary as the SIZE_MB one,
# as bench-xray.sh does, instead of making one), TMPDIR.
#
# Times: /usr/bin/time's user CPU seconds (and wall), peak RSS; the trace
# and binary are read into the page cache first.  MB = 10^6 bytes.
# Exits 0 whatever the figures, 1 when making a trace or perfgraft fails,
# 2 on a setup problem.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
root=$(dirname "$here")

bytes_per_iter=1886	# xray-big: trace bytes an iteration (both threads)
target_mbs=100

die() { echo "bench-xray-account: $*" >&2; exit 2; }
fail() { echo "bench-xray-account: FAILED: $*" >&2; exit 1; }
usage() { sed -n '13,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

size_mb=192 small_mb=4 keep='' reference=1 runs=${RUNS:-3}
while [ $# -gt 0 ]; do
	case $1 in
	--small) [ $# -ge 2 ] || die "--small needs a size"; small_mb=$2; shift ;;
	--keep) [ $# -ge 2 ] || die "--keep needs a directory"; keep=$2; shift ;;
	--no-reference) reference=0 ;;
	-h|--help) usage; exit 0 ;;
	-*) usage >&2; die "unknown option $1" ;;
	*) size_mb=$1 ;;
	esac
	shift
done
[[ "$size_mb" =~ ^[1-9][0-9]*$ ]] || die "SIZE_MB must be a positive integer"
[[ "$small_mb" =~ ^[1-9][0-9]*$ ]] || die "--small must be a positive integer"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (Debian: apt-get install time)"
pg=${PERFGRAFT:-$root/build/perfgraft}
[ -x "$pg" ] || die "no executable $pg (build first, or set PERFGRAFT)"
pg=$(cd "$(dirname "$pg")" && pwd)/$(basename "$pg")
"$pg" xray --help 2>/dev/null | grep -q -- --account || die "$pg xray has no --account"
if [ -n "${CLANGXX:-}" ]; then clangxx=$CLANGXX
elif command -v clang++-14 >/dev/null; then clangxx=clang++-14
else clangxx=clang++; fi
xray='' perf=''
if [ "$reference" = 1 ]; then
	if [ -n "${LLVM_XRAY:-}" ]; then xray=$LLVM_XRAY
	elif command -v llvm-xray-14 >/dev/null; then xray=llvm-xray-14
	else xray=llvm-xray; fi
	command -v "$xray" >/dev/null || die "no $xray (apt-get install llvm-14; or --no-reference)"
	perf=${PERF:-perf}
	command -v "$perf" >/dev/null || die "no $perf (apt-get install linux-perf; or --no-reference)"
fi

work_dir bench-xray-account "$keep"
logs=$tmp/logs
mkdir "$logs"

# Runs CMD under /usr/bin/time: NAME.t gets "WALL USER PEAK_KB", NAME.out
# its stdout, NAME.err its stderr.  Returns CMD's status.
utimed() { # NAME CMD...
	local name=$1 st=0
	shift
	/usr/bin/time -f '%e %U %M' -o "$logs/$name.t" "$@" >"$logs/$name.out" \
		2>"$logs/$name.err" || st=$?
	return "$st"
}
tline() { tail -n 1 "$logs/$1.t"; }

bin=${XRAY_BIN:-}
if [ -z "$bin" ]; then
	command -v "$clangxx" >/dev/null || die "no $clangxx (apt-get install clang-14)"
	bin=$tmp/xray-big
	echo "bench-xray-account: building xray-big with $clangxx"
	"$clangxx" -O1 -fxray-instrument -fxray-instruction-threshold=1 \
		"$here/xray-big.cc" -o "$bin" -lpthread 2>"$logs/build.err" ||
		{ cat "$logs/build.err" >&2; fail "$clangxx xray-big.cc"; }
fi
make_trace() { # MB OUT
	local it=$(( ($1 * 1000000 + bytes_per_iter / 2) / bytes_per_iter )) f
	rm -f "$tmp"/xray-big-*
	(cd "$tmp" && XRAY_OPTIONS="xray_mode=xray-fdr xray_logfile_base=$tmp/xray-big-" \
		"$bin" "$it" >"$logs/gen.out" 2>"$logs/gen.err") || fail "xray-big $it"
	f=$(find "$tmp" -maxdepth 1 -name 'xray-big-*' | head -n 1)
	[ -n "$f" ] || fail "xray-big $it wrote no trace"
	mv "$f" "$2"
}
trace=${XRAY_TRACE:-}
if [ -z "$trace" ]; then
	echo "bench-xray-account: making a ~$size_mb MB FDR trace"
	trace=$tmp/trace.fdr
	make_trace "$size_mb" "$trace"
fi
echo "bench-xray-account: making a ~$small_mb MB FDR trace"
small=$tmp/small.fdr
make_trace "$small_mb" "$small"
big_b=$(stat -c %s "$trace")
small_b=$(stat -c %s "$small")

# ---- 1. --account on the full trace -------------------------------------
echo "bench-xray-account: perfgraft xray --account -k -d -b xray-big TRACE ($runs runs)"
for ((i = 1; i <= runs; i++)); do
	cat "$trace" "$bin" >/dev/null
	utimed "acc.$i" "$pg" xray --account -k -d -b "$bin" "$trace" ||
		{ tail -n 5 "$logs/acc.$i.err" >&2; fail "perfgraft xray --account"; }
	tline "acc.$i"
done >/dev/null
for ((i = 1; i <= runs; i++)); do tline "acc.$i"; done | sort -n -k2,2 >"$logs/acc.runs"
read -r acc_w acc_u acc_kb < <(sed -n "$(( (runs + 1) / 2 ))p" "$logs/acc.runs")
acc_kb=$(awk '$3 > m { m = $3 } END { print m }' "$logs/acc.runs")
sed -n '1,2s/^/bench-xray-account:   /p' "$logs/acc.1.err"

# ---- 2. the three routes on the small trace --------------------------------
small_table=$logs/small.acc.out
cat "$small" "$bin" >/dev/null
utimed small.acc "$pg" xray --account -k -d -b "$bin" "$small" || fail "--account on the small trace"
read -r sa_w sa_u sa_kb < <(tline small.acc)
same_yaml='' same_script=''
if [ "$reference" = 1 ]; then
	echo "bench-xray-account: the YAML route on the small trace"
	utimed small.yconv "$xray" convert -f yaml -o "$tmp/small.yaml" "$small" || true
	sed -i '0,/^  version:/s/^\(  version: *\)[0-9]*$/\11/' "$tmp/small.yaml"
	utimed small.yacc "$xray" account -k -d -m "$bin" "$tmp/small.yaml" || true
	read -r yc_w yc_u yc_kb < <(tline small.yconv)
	read -r ya_w ya_u ya_kb < <(tline small.yacc)
	cmp -s "$logs/small.yacc.out" "$small_table" && same_yaml=identical || same_yaml=DIFFERENT
	rm -f "$tmp/small.yaml"
	echo "bench-xray-account: the perf script route on the small trace"
	utimed small.conv "$pg" xray -q "$small" -b "$bin" -o "$tmp/small.data" || fail "perfgraft xray"
	utimed small.script "$perf" --buildid-dir "$tmp/debug" script -i "$tmp/small.data" \
		-s "$root/perf-scripts/xray-account.py" -- -k -d || true
	read -r pc_w pc_u pc_kb < <(tline small.conv)
	read -r ps_w ps_u ps_kb < <(tline small.script)
	cmp -s "$logs/small.script.out" "$small_table" && same_script=identical || same_script=DIFFERENT
fi

awk -v big="$big_b" -v small="$small_b" -v aw="$acc_w" -v au="$acc_u" -v akb="$acc_kb" \
    -v sw="$sa_w" -v su="$sa_u" -v skb="$sa_kb" -v ref="$reference" -v target="$target_mbs" \
    -v ycw="${yc_w:-0}" -v ycu="${yc_u:-0}" -v yckb="${yc_kb:-0}" \
    -v yaw="${ya_w:-0}" -v yau="${ya_u:-0}" -v yakb="${ya_kb:-0}" \
    -v pcw="${pc_w:-0}" -v pcu="${pc_u:-0}" -v pckb="${pc_kb:-0}" \
    -v psw="${ps_w:-0}" -v psu="${ps_u:-0}" -v pskb="${ps_kb:-0}" \
    -v same_yaml="$same_yaml" -v same_script="$same_script" '
function mb(kb) { return kb * 1024 / 1e6 }
function row(name, w, u, kb) { printf "  %-48s %8.2f %8.2f %10.1f\n", name, w, u, mb(kb) }
function mx(a, b) { return a > b ? a : b }
BEGIN {
	k = big / small
	u = au > 0 ? au : 0.01
	printf "\naccount: trace %.1f MB\n", big / 1e6
	printf "  %-48s %8s %8s %10s\n", "", "wall s", "user s", "peak RSS MB"
	row("perfgraft xray --account -k -d", aw, au, akb)
	rate = big / 1e6 / u
	verdict = "MISS"
	if (rate >= target) verdict = "PASS"
	printf "  --account: %.0f MB/s of trace per user CPU second: %s (target >= %d MB/s)\n",
		rate, verdict, target
	printf "\naccount: small trace %.1f MB (every route runs)\n", small / 1e6
	row("perfgraft xray --account -k -d", sw, su, skb)
	if (!ref) exit
	row("yaml route: llvm-xray convert -f yaml", ycw, ycu, yckb)
	row("yaml route: llvm-xray account -k -d", yaw, yau, yakb)
	row("perf script route: perfgraft xray", pcw, pcu, pckb)
	row("perf script route: perf script -s xray-account", psw, psu, pskb)
	printf "  tables: --account vs yaml route %s, vs perf script route %s\n", same_yaml, same_script
	printf "\naccount: at %.1f MB (the routes other than --account scaled by %.1fx)\n", big / 1e6, k
	row("perfgraft xray --account -k -d (measured)", aw, au, akb)
	# the routes run one command after the other: times add, RSS is the larger
	printf "  %-48s %8.1f %8.1f %10.1f  (projected)\n", "yaml route (convert + account)",
		(ycw + yaw) * k, (ycu + yau) * k, mx(mb(yckb), mb(yakb)) * k
	printf "  %-48s %8.1f %8.1f %10.1f  (projected)\n", "perf script route (xray + perf script)",
		(pcw + psw) * k, (pcu + psu) * k, mx(mb(pckb), mb(pskb)) * k
	printf "  --account is %.0fx the yaml route and %.0fx the perf script route in user CPU time\n",
		(ycu + yau) * k / u, (pcu + psu) * k / u
}'
if [ -n "$keep" ]; then
	echo "bench-xray-account: kept $tmp"
fi
exit 0
