#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark: `perfgraft gperf` against `google-pprof --text` (perl pprof)
# on one large gperftools CPU profile over a real binary: by default
# 1,000,000 records, 120,000 distinct stacks of 8-30 frames, about 167 MB,
# over the 3,000 functions of gperf-big (built from the C bench/gperf-big.py
# writes).  Target: at least 20x faster than pprof.
#
# usage: bench/bench-gperf.sh [RECORDS] [--stacks N] [--keep DIR]
#                             [--no-reference]
#
#   RECORDS           records in the profile (default 1000000)
#   --stacks N        distinct stacks among them (default 120000)
#   --keep DIR        work in DIR (created; must be empty) and keep it:
#                     gperf-big and its source, the profile, perfgraft's
#                     output, pprof's output, logs and timings
#   --no-reference    skip pprof (a quick perfgraft-only run)
#
# Environment: PERFGRAFT (default build/perfgraft at the top of the
# repository), CC (default gcc), PPROF (default google-pprof, else pprof),
# FUNCS (functions in gperf-big, default 3000), REF_TIMEOUT (default 1200:
# seconds after which pprof is stopped; its time then only bounds the
# ratio from below; 0 for none), TMPDIR (where the work directory goes).
#
# Each tool runs once, under /usr/bin/time -f '%e %M', after the profile
# and the binaries were read into the page cache.  pprof's text report
# (a few thousand lines) goes to a file: its "Total: N samples" line must
# equal the samples perfgraft counted, and those must equal what the
# generator wrote (records, samples, distinct stacks).  MB = 10^6 bytes
# throughout.  Exits 0 whether or not the target is met, and when pprof
# fails or disagrees (printed); 1 when building gperf-big, making the
# profile or perfgraft fails, or perfgraft miscounts; 2 on a setup problem.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"	# work_dir, timed, times_of
root=$(dirname "$here")

target_wall=20	# pprof wall / perfgraft wall, at least
ref_timeout=${REF_TIMEOUT:-1200}
funcs=${FUNCS:-3000}

die() { echo "bench-gperf: $*" >&2; exit 2; }
fail() { echo "bench-gperf: FAILED: $*" >&2; exit 1; }
usage() { sed -n '9,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

records=1000000
stacks=120000
keep=''
reference=1
while [ $# -gt 0 ]; do
	case $1 in
	--keep) [ $# -ge 2 ] || die "--keep needs a directory"; keep=$2; shift ;;
	--keep=*) keep=${1#--keep=} ;;
	--stacks) [ $# -ge 2 ] || die "--stacks needs a number"; stacks=$2; shift ;;
	--stacks=*) stacks=${1#--stacks=} ;;
	--no-reference) reference=0 ;;
	-h|--help) usage; exit 0 ;;
	-*) usage >&2; die "unknown option $1" ;;
	*) [[ "$1" =~ ^[1-9][0-9]*$ ]] || die "RECORDS must be a positive integer, not '$1'"
	   records=$1 ;;
	esac
	shift
done
[[ "$stacks" =~ ^[1-9][0-9]*$ ]] || die "--stacks must be a positive integer, not '$stacks'"
[ "$stacks" -le "$records" ] || die "--stacks $stacks is more than the $records records"
if ! [[ "$funcs" =~ ^[1-9][0-9]*$ ]] || [ "$funcs" -lt 32 ]; then
	die "FUNCS must be a number >= 32"
fi

[ -x /usr/bin/time ] || die "/usr/bin/time is missing (Debian: apt-get install time)"
[[ "$ref_timeout" =~ ^[0-9]+$ ]] || die "REF_TIMEOUT must be a number of seconds"
[ "$ref_timeout" = 0 ] || command -v timeout >/dev/null || die "no timeout(1) (coreutils)"
command -v python3 >/dev/null || die "no python3"
cc=${CC:-gcc}
command -v "$cc" >/dev/null || die "no $cc (set CC)"
for t in objdump readelf nm; do
	command -v "$t" >/dev/null || die "no $t (Debian: apt-get install binutils)"
done
pprof=''
if [ "$reference" = 1 ]; then
	if [ -n "${PPROF:-}" ]; then pprof=$PPROF
	elif command -v google-pprof >/dev/null; then pprof=google-pprof
	else pprof=pprof; fi
	command -v "$pprof" >/dev/null || die "no $pprof (Debian: apt-get install google-perftools; or --no-reference)"
fi
pg=${PERFGRAFT:-$root/build/perfgraft}
[ -x "$pg" ] || die "no executable $pg (build first, or set PERFGRAFT)"
pg=$(cd "$(dirname "$pg")" && pwd)/$(basename "$pg")
if ! msg=$("$pg" gperf --help 2>&1 >/dev/null); then
	[ -z "$msg" ] || printf '  %s\n' "${msg//$'\n'/$'\n  '}" >&2
	die "$pg has no working 'gperf' command ('$pg gperf --help' failed)"
fi

work_dir bench-gperf "$keep"
bin=$tmp/gperf-big
prof=$tmp/gperf-big.prof
logs=$tmp/logs
mkdir "$logs"

# KEY=VALUE from a line of words.
field() { # KEY LINE
	sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<" $2"
}

# ---- 1. build gperf-big and make the profile ----------------------------
echo "bench-gperf: building gperf-big ($funcs functions) with $cc -O1 -g -no-pie"
python3 "$here/gperf-big.py" source --funcs "$funcs" >"$tmp/gperf-big.c" ||
	fail "gperf-big.py source"
"$cc" -O1 -g -no-pie -fno-optimize-sibling-calls -fno-inline \
	"$tmp/gperf-big.c" -o "$bin" 2>"$logs/build.err" ||
	{ tail -n 20 "$logs/build.err" >&2; fail "$cc gperf-big.c"; }
# A real program: run it (16 call trees of depth 3).
"$bin" 3 || fail "gperf-big 3 (exit status $?)"

echo "bench-gperf: making the profile: $records records, $stacks distinct stacks"
if ! timed gen python3 "$here/gperf-big.py" profile "$bin" "$prof" \
	--records "$records" --stacks "$stacks"; then
	tail -n 20 "$logs/gen.err" >&2
	fail "gperf-big.py profile"
fi
read -r gen_s gen_kb < <(times_of gen)
gen_line=$(grep -m1 '^gperf-big: records=' "$logs/gen.out") || fail "gperf-big.py printed no counts"
exp_records=$(field records "$gen_line")
exp_samples=$(field samples "$gen_line")
exp_stacks=$(field stacks "$gen_line")
prof_bytes=$(field bytes "$gen_line")
depths="$(field min_depth "$gen_line")-$(field max_depth "$gen_line")"
awk -v s="$gen_s" -v kb="$gen_kb" 'BEGIN {
	printf "bench-gperf: made in %.2f s (peak RSS %.1f MB)\n", s, kb * 1024 / 1e6 }'
sed -n '2,$s/^/bench-gperf: /p' "$logs/gen.out"

# The libraries pprof reads with nm too.
libs=()
[ "$(field libs "$gen_line")" = - ] || IFS=, read -r -a libs <<<"$(field libs "$gen_line")"
warm() { cat "$prof" "$bin" "${libs[@]}" >/dev/null; }

# ---- 2. perfgraft gperf --------------------------------------------------
warm
echo "bench-gperf: perfgraft gperf PROFILE -o out.data"
if ! timed pg "$pg" gperf "$prof" -o "$tmp/out.data"; then
	tail -n 20 "$logs/pg.err" >&2
	fail "$pg gperf (exit status $(cat "$logs/pg.status"))"
fi
read -r pg_s pg_kb < <(times_of pg)
sed -n '1,10s/^/bench-gperf:   /p' "$logs/pg.err"
pg_out=$(stat -c %s "$tmp/out.data" 2>/dev/null || echo 0)
awk -v b="$pg_out" 'BEGIN { printf "bench-gperf: perfgraft wrote %.1f MB\n", b / 1e6 }'
# Its summary: "perfgraft: gperf: P: R records, N samples in S distinct
# stacks, ... -> M samples of ...": all four must be what was written.
summary=$(grep -m1 '^perfgraft: gperf: ' "$logs/pg.err" || true)
[ -n "$summary" ] || fail "perfgraft printed no summary line"
pg_records=$(sed -n 's/.*: \([0-9]*\) records, .*/\1/p' <<<"$summary")
pg_samples=$(sed -n 's/.* records, \([0-9]*\) samples in .*/\1/p' <<<"$summary")
pg_stacks=$(sed -n 's/.* samples in \([0-9]*\) distinct stacks.*/\1/p' <<<"$summary")
pg_emitted=$(sed -n 's/.* -> \([0-9]*\) samples of .*/\1/p' <<<"$summary")
[ "$pg_records" = "$exp_records" ] || fail "perfgraft counted ${pg_records:-?} records, the profile has $exp_records"
[ "$pg_samples" = "$exp_samples" ] || fail "perfgraft counted ${pg_samples:-?} samples, the profile has $exp_samples"
[ "$pg_stacks" = "$exp_stacks" ] || fail "perfgraft counted ${pg_stacks:-?} distinct stacks, the profile has $exp_stacks"
[ "$pg_emitted" = "$exp_samples" ] || fail "perfgraft wrote ${pg_emitted:-?} samples, the profile has $exp_samples"
echo "bench-gperf: perfgraft's counts match the profile ($exp_records records, $exp_samples samples, $exp_stacks distinct stacks)"

# ---- 3. google-pprof --text ----------------------------------------------
pp_to=0 pp_st='' pp_total='' pp_rows=0 pp_frows=0
if [ "$reference" = 1 ]; then
	warm
	echo "bench-gperf: $pprof --text gperf-big PROFILE (about a minute; REF_TIMEOUT=$ref_timeout)"
	if [ "$ref_timeout" = 0 ]; then
		timed pprof "$pprof" --text "$bin" "$prof" || true
	else
		timed pprof timeout -k 10 "$ref_timeout" "$pprof" --text "$bin" "$prof" || true
	fi
	read -r pp_s pp_kb < <(times_of pprof)
	pp_st=$(cat "$logs/pprof.status")
	if [ "$pp_st" = 0 ]; then
		pp_total=$(sed -n 's/^Total: \([0-9]*\) samples$/\1/p' "$logs/pprof.out" | head -n 1)
		pp_rows=$(awk 'NR > 1 && NF >= 6 { n++ } END { print n + 0 }' "$logs/pprof.out")
		pp_frows=$(awk 'NR > 1 && $6 ~ /^f_[0-9]+$/ { n++ } END { print n + 0 }' "$logs/pprof.out")
		echo "bench-gperf: pprof succeeded (exit 0): Total ${pp_total:-missing}, $pp_rows rows ($pp_frows of them gperf-big's f_* functions)"
	elif [ "$ref_timeout" != 0 ] && { [ "$pp_st" = 124 ] || [ "$pp_st" = 137 ]; }; then
		pp_to=1
		echo "bench-gperf: pprof STOPPED by REF_TIMEOUT after $ref_timeout s (still running)"
	else
		echo "bench-gperf: pprof FAILED (exit status $pp_st): $(tail -n 1 "$logs/pprof.err" 2>/dev/null)"
	fi
fi

# ---- 4. summary ----------------------------------------------------------
awk -v ref="$reference" -v pg_s="$pg_s" -v pg_kb="$pg_kb" \
    -v pp_s="${pp_s:-0}" -v pp_kb="${pp_kb:-0}" -v pp_st="$pp_st" -v pp_to="$pp_to" \
    -v pp_total="$pp_total" -v bytes="$prof_bytes" -v records="$exp_records" \
    -v samples="$exp_samples" -v stacks="$exp_stacks" -v depths="$depths" -v funcs="$funcs" \
    -v t_wall="$target_wall" '
function mb(kb) { return kb * 1024 / 1e6 }
function pm(ok) { return ok ? "PASS" : "MISS" }
function row(name, s, kb, st, to) {
	printf "%-28s %9s %12.1f %6s\n", name, sprintf("%s%.2f", to ? ">" : "", s), mb(kb), to ? "t/o" : st
}
BEGIN {
	printf "\nprofile: %.1f MB, %d records, %d samples, %d distinct stacks of %s frames, over %d functions\n\n", \
		bytes / 1e6, records, samples, stacks, depths, funcs
	printf "%-28s %9s %12s %6s\n", "", "wall s", "peak RSS MB", "exit"
	row("perfgraft gperf", pg_s, pg_kb, 0)
	if (!ref) {
		printf "\n(no ratios: pprof skipped)\n"
		exit
	}
	row("google-pprof --text", pp_s, pp_kb, pp_st, pp_to)
	# /usr/bin/time has 10 ms resolution: count a 0.00 s run as 0.01 s.
	p = pg_s > 0 ? pg_s : 0.01
	rw = pp_s / p; rr = pg_kb ? pp_kb / pg_kb : 0
	g = pp_to ? ">=" : ""
	printf "\npprof/perfgraft wall = %s%.1fx, pprof/perfgraft peak RSS = %.2fx\n", g, rw, rr
	printf "pprof/perfgraft wall  %s (%s%.1fx vs >= %dx)%s\n", pm(rw >= t_wall), g, rw, t_wall, \
		pp_to ? " (lower bound: pprof was stopped by REF_TIMEOUT)" : \
		pp_st == 0 ? "" : " (pprof failed; its wall time is until it stopped)"
	if (pp_st != 0)
		printf "pprof Total            n/a (pprof did not finish)\n"
	else if (pp_total == samples)
		printf "pprof Total            MATCH (%d samples, as perfgraft counted)\n", samples
	else
		printf "pprof Total            MISMATCH (pprof %s samples, perfgraft %d)\n", pp_total == "" ? "no Total line:" : pp_total, samples
}'
if [ -n "$keep" ]; then
	echo "bench-gperf: kept $tmp (gperf-big, gperf-big.c, gperf-big.prof, out.data, logs/)"
fi
exit 0
