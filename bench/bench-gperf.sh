#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark: `perfgraft gperf` against `google-pprof --text` (perl pprof)
# on one large gperftools CPU profile over a real binary: by default
# 1,000,000 records, 120,000 distinct stacks of 8-30 frames, about 167 MB,
# over the 3,000 functions of gperf-big (built from the C bench/gperf-big.py
# writes).  Target: at least 20x faster than pprof.  perfgraft runs twice:
# as by default (the profile counts more ticks than --max-samples' default,
# so one sample per distinct stack whose period carries its ticks), and in
# the other form (one sample per tick: --max-samples TICKS), for the figures
# of both; the target is for the default.
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
usage() { sed -n '13,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

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
machine_line "bench-gperf: "
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
# Its summary: "perfgraft: gperf: P: R records, N samples in S distinct
# stacks, ... -> M samples of ...[, one per distinct stack weighted by its
# ticks], ...": the first three must be what was written, M the ticks (one
# sample per tick) or the stacks (one per stack).
run_pg() { # NAME OUT FORM(default|tick|stack) [OPTION...]
	local name=$1 out=$2 form=$3 summary got want
	shift 3
	warm
	echo "bench-gperf: perfgraft gperf PROFILE -o $(basename "$out")${*:+ $*}"
	if ! timed "$name" "$pg" gperf "$prof" -o "$out" "$@"; then
		tail -n 20 "$logs/$name.err" >&2
		fail "$pg gperf (exit status $(cat "$logs/$name.status"))"
	fi
	sed -n '1,10s/^/bench-gperf:   /p' "$logs/$name.err"
	summary=$(grep -m1 '^perfgraft: gperf: ' "$logs/$name.err" || true)
	[ -n "$summary" ] || fail "perfgraft printed no summary line"
	got=$(sed -n 's/.*: \([0-9]*\) records, .*/\1/p' <<<"$summary")
	[ "$got" = "$exp_records" ] || fail "perfgraft counted ${got:-?} records, the profile has $exp_records"
	got=$(sed -n 's/.* records, \([0-9]*\) samples in .*/\1/p' <<<"$summary")
	[ "$got" = "$exp_samples" ] || fail "perfgraft counted ${got:-?} samples, the profile has $exp_samples"
	got=$(sed -n 's/.* samples in \([0-9]*\) distinct stacks.*/\1/p' <<<"$summary")
	[ "$got" = "$exp_stacks" ] || fail "perfgraft counted ${got:-?} distinct stacks, the profile has $exp_stacks"
	if grep -q ', one per distinct stack weighted by its ticks' <<<"$summary"; then
		[ "$form" != tick ] || fail "perfgraft $* did not write one sample per tick"
		form=stack want=$exp_stacks
	else
		[ "$form" != stack ] || fail "perfgraft $* did not write one sample per stack"
		form=tick want=$exp_samples
	fi
	got=$(sed -n 's/.* -> \([0-9]*\) samples of .*/\1/p' <<<"$summary")
	[ "$got" = "$want" ] || fail "perfgraft wrote ${got:-?} samples, expected $want (one per $form)"
	echo "$form" >"$logs/$name.form"
	awk -v b="$(stat -c %s "$out")" -v n="$got" -v f="$form" 'BEGIN {
		printf "bench-gperf: perfgraft wrote %.1f MB (%d samples, one per %s)\n", b / 1e6, n, f }'
}
run_pg pg "$tmp/out.data" default
read -r pg_s pg_kb < <(times_of pg)
pg_form=$(cat "$logs/pg.form")
pg_mb=$(stat -c %s "$tmp/out.data")
# the other form
if [ "$pg_form" = stack ]; then
	run_pg pg2 "$tmp/out2.data" tick --max-samples "$exp_samples"
else
	run_pg pg2 "$tmp/out2.data" stack --max-samples 0
fi
read -r pg2_s pg2_kb < <(times_of pg2)
pg2_form=$(cat "$logs/pg2.form")
pg2_mb=$(stat -c %s "$tmp/out2.data")
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
awk -v ref="$reference" -v pg_s="$pg_s" -v pg_kb="$pg_kb" -v pg_form="$pg_form" \
    -v pg_b="$pg_mb" -v pg2_s="$pg2_s" -v pg2_kb="$pg2_kb" -v pg2_form="$pg2_form" -v pg2_b="$pg2_mb" \
    -v pp_s="${pp_s:-0}" -v pp_kb="${pp_kb:-0}" -v pp_st="$pp_st" -v pp_to="$pp_to" \
    -v pp_total="$pp_total" -v bytes="$prof_bytes" -v records="$exp_records" \
    -v samples="$exp_samples" -v stacks="$exp_stacks" -v depths="$depths" -v funcs="$funcs" \
    -v t_wall="$target_wall" '
function mb(kb) { return kb * 1024 / 1e6 }
function pm(ok) { return ok ? "PASS" : "MISS" }
function row(name, s, kb, st, to, out) {
	printf "%-34s %9s %12.1f %6s %9s\n", name, sprintf("%s%.2f", to ? ">" : "", s), mb(kb), \
		to ? "t/o" : st, out == "" ? "" : sprintf("%.1f", out / 1e6)
}
BEGIN {
	printf "\nprofile: %.1f MB, %d records, %d samples, %d distinct stacks of %s frames, over %d functions\n\n", \
		bytes / 1e6, records, samples, stacks, depths, funcs
	printf "%-34s %9s %12s %6s %9s\n", "", "wall s", "peak RSS MB", "exit", "output MB"
	row("perfgraft gperf (one per " pg_form ")", pg_s, pg_kb, 0, 0, pg_b)
	row("perfgraft gperf (one per " pg2_form ")", pg2_s, pg2_kb, 0, 0, pg2_b)
	if (!ref) {
		printf "\n(no ratios: pprof skipped)\n"
		exit
	}
	row("google-pprof --text", pp_s, pp_kb, pp_st, pp_to, "")
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
	echo "bench-gperf: kept $tmp (gperf-big, gperf-big.c, gperf-big.prof, out.data, out2.data, logs/)"
fi
exit 0
