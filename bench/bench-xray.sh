#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark: `perfgraft xray` against `llvm-xray account -k` and `llvm-xray
# convert -output-format=trace_event` on one large LLVM XRay FDR trace (two
# threads, about 12 million calls, 192 MB by default) written by
# bench/xray-big.cc.  Targets: at least 100x faster than account, at least
# 20x faster than convert, peak RSS at most 100 MB.
#
# usage: bench/bench-xray.sh [SIZE_MB] [--keep DIR] [--no-reference]
#                            [--skip-perfgraft] [--sizes LIST]
#
#   SIZE_MB           size of the trace to make, in MB (default 192, the
#                     size of the trace in the issue); the iteration count
#                     of xray-big is derived from it (1,886 bytes each)
#   --keep DIR        work in DIR (created; must be empty) and keep it:
#                     xray-big, the trace, perfgraft's output, the tools'
#                     outputs, logs and timings
#   --no-reference    skip the llvm-xray runs (a quick perfgraft-only run)
#   --skip-perfgraft  skip perfgraft (measure the reference tools only, for
#                     instance before `perfgraft xray` exists)
#   --sizes LIST      instead: perfgraft's MB/s of trace, CPU and peak RSS
#                     on a trace of each size (comma-separated MB, e.g.
#                     48,192,384), warm and after a cold re-read of the
#                     trace; with BASELINE=PERFGRAFT also that build's, the
#                     runs alternating (no reference tools)
#
# Environment: PERFGRAFT (default build/perfgraft at the top of the
# repository), CLANGXX (default clang++-14, else clang++), LLVM_XRAY
# (default llvm-xray-14, else llvm-xray), REF_TIMEOUT (default 600: seconds
# after which a reference tool is stopped; its time then only bounds the
# ratio from below; 0 for none), RUNS (default 3: perfgraft and convert
# each run this many times and their median wall time counts; account runs
# once), TMPDIR (where the work directory goes).
#
# Each run is timed under /usr/bin/time -f '%e %M', after the trace and
# the binary were read into the page cache (peak RSS: the largest of the
# runs).  convert writes to /dev/null,
# and so does account's stderr.  On the default trace llvm-xray 14's
# account -k does not finish in any reasonable time (its -k messages grow
# with the trace: about 8.5 hours projected, see bench/README.md), so it is
# normally stopped by REF_TIMEOUT and the account ratio is a lower bound.
# MB = 10^6 bytes throughout.  Exits 0 whether or not the targets are met,
# and when a reference tool fails (its exit status is printed); 1 when
# building xray-big, making the trace or perfgraft fails; 2 on a setup
# problem.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"	# work_dir, timed, times_of, machine_line, xray_*
root=$(dirname "$here")

target_account=100	# account wall / perfgraft wall, at least
target_convert=20	# convert wall / perfgraft wall, at least
target_rss_mb=100	# perfgraft peak RSS, at most
target_mbps=300		# --sizes: trace MB per wall second, at least
ref_timeout=${REF_TIMEOUT:-600}
runs=${RUNS:-3}		# perfgraft and convert: the median of this many runs

die() { echo "bench-xray: $*" >&2; exit 2; }
fail() { echo "bench-xray: FAILED: $*" >&2; exit 1; }
usage() { sed -n '9,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

size_mb=192
keep=''
reference=1
run_pg=1
sizes=''
while [ $# -gt 0 ]; do
	case $1 in
	--sizes) [ $# -ge 2 ] || die "--sizes needs a list of sizes in MB"; sizes=$2; shift ;;
	--sizes=*) sizes=${1#--sizes=} ;;
	--keep) [ $# -ge 2 ] || die "--keep needs a directory"; keep=$2; shift ;;
	--keep=*) keep=${1#--keep=} ;;
	--no-reference) reference=0 ;;
	--skip-perfgraft) run_pg=0 ;;
	-h|--help) usage; exit 0 ;;
	-*) usage >&2; die "unknown option $1" ;;
	*) [[ "$1" =~ ^[1-9][0-9]*$ ]] || die "SIZE_MB must be a positive integer, not '$1'"
	   size_mb=$1 ;;
	esac
	shift
done
[ "$reference" = 1 ] || [ "$run_pg" = 1 ] || die "--no-reference with --skip-perfgraft leaves nothing to measure"
if [ -n "$sizes" ]; then
	[[ "$sizes" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--sizes takes sizes in MB separated by commas, not '$sizes'"
	[ "$run_pg" = 1 ] || die "--sizes measures perfgraft: not with --skip-perfgraft"
	reference=0
fi

[ -x /usr/bin/time ] || die "/usr/bin/time is missing (Debian: apt-get install time)"
[[ "$ref_timeout" =~ ^[0-9]+$ ]] || die "REF_TIMEOUT must be a number of seconds"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number"
[ "$ref_timeout" = 0 ] || command -v timeout >/dev/null || die "no timeout(1) (coreutils)"
command -v python3 >/dev/null || die "no python3"
if [ -n "${CLANGXX:-}" ]; then clangxx=$CLANGXX
elif command -v clang++-14 >/dev/null; then clangxx=clang++-14
else clangxx=clang++; fi
command -v "$clangxx" >/dev/null || die "no $clangxx (Debian: apt-get install clang-14)"
xray=''
if [ "$reference" = 1 ]; then
	if [ -n "${LLVM_XRAY:-}" ]; then xray=$LLVM_XRAY
	elif command -v llvm-xray-14 >/dev/null; then xray=llvm-xray-14
	else xray=llvm-xray; fi
	command -v "$xray" >/dev/null || die "no $xray (Debian: apt-get install llvm-14; or --no-reference)"
fi
pg=''
if [ "$run_pg" = 1 ]; then
	pg=${PERFGRAFT:-$root/build/perfgraft}
	[ -x "$pg" ] || die "no executable $pg (build first, set PERFGRAFT, or --skip-perfgraft)"
	pg=$(cd "$(dirname "$pg")" && pwd)/$(basename "$pg")
	if ! msg=$("$pg" xray --help 2>&1 >/dev/null); then
		[ -z "$msg" ] || printf '  %s\n' "${msg//$'\n'/$'\n  '}" >&2
		die "$pg has no working 'xray' command ('$pg xray --help' failed); use --skip-perfgraft to measure the reference tools only"
	fi
fi

baseline=''
if [ -n "$sizes" ] && [ -n "${BASELINE:-}" ]; then
	[ -x "$BASELINE" ] || die "BASELINE=$BASELINE is not an executable"
	baseline=$(cd "$(dirname "$BASELINE")" && pwd)/$(basename "$BASELINE")
fi

work_dir bench-xray "$keep"
machine_line "bench-xray: "
bin=$tmp/xray-big
trace=$tmp/trace.fdr
logs=$tmp/logs
mkdir "$logs"

# Writes NAME.time as "MEDIAN_WALL_S MAX_PEAK_KB" of the runs NAME.1..N
# (each timed), and NAME.runs as their walls, for tools run several times.
median_of() { # NAME N
	local name=$1 n=$2 i
	for ((i = 1; i <= n; i++)); do times_of "$name.$i"; done >"$logs/$name.runs"
	sort -n -k1,1 "$logs/$name.runs" | awk -v n="$n" '
		{ w[NR] = $1; if ($2 > kb) kb = $2 }
		END { printf "%s %d\n", w[int((n + 1) / 2)], kb }' >"$logs/$name.time"
}

# ---- 1. build xray-big and make the trace ------------------------------
iterations=$(xray_iterations $((size_mb * 1000000)))
echo "bench-xray: building xray-big with $clangxx"
xray_build "$clangxx" "$bin" 2>"$logs/build.err" ||
	{ cat "$logs/build.err" >&2; fail "$clangxx xray-big.cc"; }

# ---- --sizes: MB/s, CPU and peak RSS by trace size --------------------
# The trace is read warm (cat), then again after its pages were dropped
# from the page cache and read back by cat: readahead then leaves large
# folios, which a fault maps whole (Linux 6.18), the case where the peak
# used to follow how the threads' buffers lie in the file.
if [ -n "$sizes" ]; then
	cold() { # FILE: out of the page cache, then read back
		python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)' "$1"
		cat "$1" >/dev/null
	}
	one() { # NAME PERFGRAFT TRACE: "wall user sys peak_kb" into NAME.t
		rm -f "$tmp/out.data"
		/usr/bin/time -f '%e %U %S %M' -o "$logs/$1.t" "$2" xray "$3" --binary "$bin" \
			-o "$tmp/out.data" >/dev/null 2>"$logs/$1.err" ||
			{ tail -n 5 "$logs/$1.err" >&2; fail "$2 xray $3"; }
		tail -n 1 "$logs/$1.t"
	}
	echo "bench-xray: load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs before the runs"
	printf '%-10s %-9s %7s %9s %8s %8s %10s %10s %10s\n' "trace MB" build "wall s" "MB/s" "user s" "sys s" "out MB" "peak MiB" "cold MiB"
	IFS=, read -r -a size_list <<<"$sizes"
	for sz in "${size_list[@]}"; do
		it=$(( (sz * 1000000 + bytes_per_iter / 2) / bytes_per_iter ))
		(cd "$tmp" && export XRAY_OPTIONS="xray_mode=xray-fdr xray_logfile_base=$tmp/xray-big-" &&
			timed "gen.$sz" "$bin" "$it") || { tail -n 20 "$logs/gen.$sz.err" >&2; fail "xray-big $it"; }
		mapfile -t made < <(find "$tmp" -maxdepth 1 -name 'xray-big-*')
		[ "${#made[@]}" -eq 1 ] || fail "expected one xray-big-* trace in $tmp, found ${#made[@]}"
		tr="$tmp/trace.$sz.fdr"
		mv "${made[0]}" "$tr"
		tb=$(stat -c %s "$tr")
		builds=(new)
		[ -z "$baseline" ] || builds=(new base)
		for b in "${builds[@]}"; do : >"$logs/s.$sz.$b.runs"; done
		for ((i = 1; i <= runs; i++)); do
			for b in "${builds[@]}"; do
				exe=$pg
				[ "$b" = new ] || exe=$baseline
				cat "$tr" "$bin" >/dev/null
				one "s.$sz.$b.$i" "$exe" "$tr" >>"$logs/s.$sz.$b.runs"
				cp "$tmp/out.data" "$tmp/out.$b.data" 2>/dev/null || true
			done
		done
		for b in "${builds[@]}"; do
			exe=$pg
			[ "$b" = new ] || exe=$baseline
			cold "$tr"
			read -r _ _ _ cold_kb < <(one "s.$sz.$b.cold" "$exe" "$tr")
			out_b=$(stat -c %s "$tmp/out.$b.data")
			sort -n -k1,1 "$logs/s.$sz.$b.runs" | awk -v n="$runs" -v tb="$tb" -v b="$b" \
				-v ob="$out_b" -v ckb="$cold_kb" -v t="$target_mbps" '
				{ w[NR] = $1; u[NR] = $2; s[NR] = $3; if ($4 > kb) kb = $4 }
				END { m = int((n + 1) / 2); wall = w[m] > 0 ? w[m] : 0.01
					printf "%-10.1f %-9s %7.2f %9.1f %8.2f %8.2f %10.1f %10.1f %10.1f%s\n", tb / 1e6, b, w[m],
						tb / 1e6 / wall, u[m], s[m], ob / 1e6, kb / 1024, ckb / 1024,
						b == "new" ? sprintf("  (MB/s %s vs >= %d)", tb / 1e6 / wall >= t ? "PASS" : "MISS", t) : "" }'
		done
		if [ -n "$baseline" ] && ! cmp -s "$tmp/out.new.data" "$tmp/out.base.data"; then
			echo "bench-xray: note: the two builds' outputs differ at $sz MB"
		fi
		rm -f "$tr" "$tmp"/out.*.data "$tmp/out.data"
	done
	echo "bench-xray: wall, user and sys: the median run of $runs (by wall); peak MiB: the largest warm run;"
	echo "            cold MiB: one run after the trace was dropped from the page cache and read back"
	echo "bench-xray: load average $(cut -d' ' -f1-3 /proc/loadavg) after the runs"
	exit 0
fi

echo "bench-xray: making a ~$size_mb MB FDR trace: xray-big $iterations"
if ! xray_trace gen "$bin" "$iterations" "$trace"; then
	tail -n 20 "$logs/gen.err" >&2
	fail "xray-big $iterations"
fi
read -r gen_s _ < <(times_of gen)
trace_bytes=$(stat -c %s "$trace")

# What xray-big counted, and a walk over the trace's buffers (16-byte
# BufferExtents, then a NewBuffer with the thread id) to check that every
# record made it: the payload must be 64 bytes of preamble a buffer, 8 a
# function record and 16 a CallArgument (plus 16 for any NewCPUId or
# TSCWrap written mid-buffer).
sed -n 's/^xray-big: //p' "$logs/gen.out" >"$logs/gen.counts"
python3 - "$trace" "$logs/gen.counts" >"$logs/summary" <<'EOF' || fail "reading the trace's buffers"
import struct, sys
path, counts = sys.argv[1], sys.argv[2]
kv = {}
threads = []
for line in open(counts):
    d = dict(f.split("=", 1) for f in line.split() if "=" in f)
    (threads.append(d) if "thread" in d else kv.update(d))
fn, args = int(kv["function_records"]), int(kv["arg_records"])
with open(path, "rb") as f:
    hdr = f.read(32)
    ver, typ = struct.unpack_from("<HH", hdr, 0)
    bufs, payload, per_tid = 0, 0, {}
    while True:
        ext = f.read(16)
        if not ext:
            break
        if len(ext) < 16 or ext[0] != 0x0F:
            sys.exit(f"no BufferExtents at offset {f.tell() - len(ext)}")
        n = struct.unpack_from("<Q", ext, 1)[0]
        nb = f.read(16)
        if len(nb) < 16 or nb[0] != 0x01:
            sys.exit(f"no NewBuffer at offset {f.tell() - len(nb)}")
        tid = struct.unpack_from("<i", nb, 1)[0]
        per_tid[tid] = per_tid.get(tid, 0) + 1
        f.seek(n - 16, 1)
        bufs += 1
        payload += n
extra = payload - 64 * bufs - 8 * fn - 16 * args
records = 5 * bufs + fn + args + max(extra, 0) // 16  # BufferExtents included
print(f"records={records} buffers={bufs} threads={len(per_tid)} calls={kv['calls']} extra={extra}")
print(f"trace: FDR v{ver}, {bufs} buffers ({kv['options']}), "
      f"{len(per_tid)} threads, {int(kv['calls']):,} calls "
      f"({int(kv['arg_calls']):,} with a logged argument), {records:,} records "
      f"({2 * int(kv['calls']):,} function, {args:,} CallArgument, "
      f"{records - fn - args:,} other metadata)")
for t in threads:
    print(f"  thread {t['thread']} (tid {t['tid']}): {int(t['calls']):,} calls in {t['s']} s, "
          f"{per_tid.get(int(t['tid']), 0)} buffers")
if extra < 0:
    print(f"WARNING: {-extra} bytes of records are missing (the buffer ring wrapped?)")
elif extra:
    print(f"  ({extra // 16} NewCPUId/TSCWrap records mid-buffer)")
EOF
records=$(sed -n '1s/^records=\([0-9]*\) .*/\1/p' "$logs/summary")
calls=$(sed -n '1s/.* calls=\([0-9]*\) .*/\1/p' "$logs/summary")
nthreads=$(sed -n '1s/.* threads=\([0-9]*\) .*/\1/p' "$logs/summary")
awk -v b="$trace_bytes" -v s="$gen_s" -v it="$iterations" 'BEGIN {
	printf "bench-xray: trace %.1f MB (%d bytes), made in %.2f s (xray-big %d, flush included)\n", b / 1e6, b, s, it }'
sed -n '2,$p' "$logs/summary" | sed 's/^/bench-xray: /; 2,$s/^bench-xray: /            /'
if grep -q '^WARNING' "$logs/summary"; then
	echo "bench-xray: warning: the trace is incomplete; raise buffer_max in xray-big.cc" >&2
fi

warm() { cat "$trace" "$bin" >/dev/null; }

# ---- 2. perfgraft xray -------------------------------------------------
if [ "$run_pg" = 1 ]; then
	echo "bench-xray: perfgraft xray TRACE --binary xray-big -o out.data ($runs runs)"
	for ((i = 1; i <= runs; i++)); do
		rm -f "$tmp/out.data"
		warm
		if ! timed "pg.$i" --stderr "$logs/pg.err" "$pg" xray "$trace" --binary "$bin" -o "$tmp/out.data"; then
			tail -n 20 "$logs/pg.err" >&2
			fail "$pg xray (exit status $(cat "$logs/pg.$i.status"))"
		fi
	done
	median_of pg "$runs"
	read -r pg_s pg_kb < <(times_of pg)
	echo "bench-xray:   wall s of the runs: $(cut -d' ' -f1 "$logs/pg.runs" | tr '\n' ' ')(median $pg_s)"
	# What perfgraft said (its first lines), if anything.
	sed -n '1,10s/^/bench-xray:   /p' "$logs/pg.err"
	pg_out=$(stat -c %s "$tmp/out.data" 2>/dev/null || echo 0)
	awk -v b="$pg_out" 'BEGIN { printf "bench-xray: perfgraft wrote %.1f MB\n", b / 1e6 }'
fi

# ---- 3. the reference tools --------------------------------------------
# Runs a reference tool under timed, stopped after REF_TIMEOUT seconds
# (timeout(1) then exits 124, and the time is a lower bound).
ref() { # NAME [--stderr ERR] CMD...
	local name=$1
	shift
	local -a redir=()
	if [ "$1" = --stderr ]; then redir=(--stderr "$2"); shift 2; fi
	warm
	if [ "$ref_timeout" = 0 ]; then
		timed "$name" "${redir[@]}" "$@" || true
	else
		timed "$name" "${redir[@]}" timeout -k 10 "$ref_timeout" "$@" || true
	fi
}
# "succeeded", "STOPPED ..." or "FAILED ..." for NAME; sets NAME's
# timed-out flag (1 when REF_TIMEOUT stopped it).
ref_note() { # NAME
	local st
	st=$(cat "$logs/$1.status")
	if [ "$st" = 0 ]; then
		echo "succeeded (exit 0)"
	elif [ "$ref_timeout" != 0 ] && { [ "$st" = 124 ] || [ "$st" = 137 ]; }; then
		echo "STOPPED by REF_TIMEOUT after $ref_timeout s (still running)"
	else
		echo "FAILED (exit status $st): $(tail -n 1 "$logs/$1.err" 2>/dev/null)"
	fi
}
acc_to=0 conv_to=0
if [ "$reference" = 1 ]; then
	echo "bench-xray: $xray convert -output-format=trace_event -m xray-big TRACE -o /dev/null ($runs runs)"
	for ((i = 1; i <= runs; i++)); do
		ref "convert.$i" "$xray" convert -output-format=trace_event -m "$bin" "$trace" -o /dev/null
		cp "$logs/convert.$i.status" "$logs/convert.status"
		cp "$logs/convert.$i.err" "$logs/convert.err"
		[ "$(cat "$logs/convert.$i.status")" = 0 ] || break	# failed or stopped: once is enough
	done
	if [ "$(cat "$logs/convert.status")" = 0 ]; then
		median_of convert "$runs"
		echo "bench-xray:   wall s of the runs: $(cut -d' ' -f1 "$logs/convert.runs" | tr '\n' ' ')(median $(cut -d' ' -f1 "$logs/convert.time"))"
	else
		cp "$logs/convert.$i.time" "$logs/convert.time"
	fi
	read -r conv_s conv_kb < <(times_of convert)
	conv_st=$(cat "$logs/convert.status")
	conv_note=$(ref_note convert)
	case $conv_note in STOPPED*) conv_to=1 ;; esac
	echo "bench-xray: convert $conv_note"

	# With -k, account writes a message and every thread's stack to stderr
	# for each record it rejects, unbuffered, one write() per piece: tens
	# of GB and billions of write()s for the default trace.  It goes to
	# /dev/null, the cheapest place (account's time is a lower bound);
	# the calls its table holds, against the calls xray-big made, show how
	# much it rejected.
	echo "bench-xray: $xray account -k -m xray-big TRACE 2>/dev/null (takes minutes; REF_TIMEOUT=$ref_timeout)"
	ref account --stderr /dev/null "$xray" account -k -m "$bin" "$trace"
	read -r acc_s acc_kb < <(times_of account)
	acc_st=$(cat "$logs/account.status")
	acc_note=$(ref_note account)
	case $acc_note in STOPPED*) acc_to=1 ;; esac
	acc_funcs=$(sed -n 's/^Functions with latencies: \([0-9]*\).*/\1/p' "$logs/account.out")
	acc_calls=$(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ {n += $2} END {print n + 0}' "$logs/account.out")
	if [ "$acc_st" = 0 ] && [ -n "$acc_funcs" ]; then
		acc_note=$(awk -v a="$acc_calls" -v c="$calls" -v f="$acc_funcs" 'BEGIN {
			printf "succeeded (exit 0): %d functions; its table counts %d of the %d calls (%.1f%%)%s", f, a, c,
				c ? 100 * a / c : 0, a < c ? ", it rejected the rest" : "" }')
	elif [ "$acc_st" != 0 ] && [ "$acc_to" = 0 ]; then
		acc_note="FAILED (exit status $acc_st; its stderr went to /dev/null: rerun by hand to see it)"
	fi
	echo "bench-xray: account $acc_note"
fi

# ---- 4. summary --------------------------------------------------------
awk -v run_pg="$run_pg" -v ref="$reference" \
    -v pg_s="${pg_s:-0}" -v pg_kb="${pg_kb:-0}" \
    -v acc_s="${acc_s:-0}" -v acc_kb="${acc_kb:-0}" -v acc_st="${acc_st:-}" -v acc_to="$acc_to" \
    -v conv_s="${conv_s:-0}" -v conv_kb="${conv_kb:-0}" -v conv_st="${conv_st:-}" -v conv_to="$conv_to" \
    -v bytes="$trace_bytes" -v records="$records" -v calls="$calls" -v nthreads="$nthreads" \
    -v t_acc="$target_account" -v t_conv="$target_convert" -v t_rss="$target_rss_mb" '
function mb(kb) { return kb * 1024 / 1e6 }
function pm(ok) { return ok ? "PASS" : "MISS" }
function row(name, s, kb, st, to) {
	printf "%-36s %9s %12.1f %6s\n", name, sprintf("%s%.2f", to ? ">" : "", s), mb(kb), to ? "t/o" : st
}
function note(st, to, what) {
	if (to) return " (lower bound: " what " was stopped by REF_TIMEOUT)"
	return st == 0 ? "" : " (" what " failed; its wall time is until it stopped)"
}
BEGIN {
	printf "\ntrace: %.1f MB, %d threads, %d calls, %d records\n\n", bytes / 1e6, nthreads, calls, records
	printf "%-36s %9s %12s %6s\n", "", "wall s", "peak RSS MB", "exit"
	if (run_pg) row("perfgraft xray", pg_s, pg_kb, 0)
	if (ref) {
		row("llvm-xray account -k", acc_s, acc_kb, acc_st, acc_to)
		row("llvm-xray convert (trace_event)", conv_s, conv_kb, conv_st, conv_to)
	}
	if (!run_pg || !ref) {
		printf "\n(no ratios: %s skipped)\n", run_pg ? "the reference tools were" : "perfgraft was"
		if (run_pg) printf "perfgraft peak RSS = %.1f MB: %s (target <= %d MB)\n", mb(pg_kb), pm(mb(pg_kb) <= t_rss), t_rss
		exit
	}
	# /usr/bin/time has 10 ms resolution: count a 0.00 s run as 0.01 s.
	p = pg_s > 0 ? pg_s : 0.01
	ra = acc_s / p; rc = conv_s / p
	ga = acc_to ? ">=" : ""; gc = conv_to ? ">=" : ""
	printf "\naccount/perfgraft wall = %s%.1fx, convert/perfgraft wall = %s%.1fx, perfgraft peak RSS = %.1f MB\n", \
		ga, ra, gc, rc, mb(pg_kb)
	printf "account/perfgraft wall  %s (%s%.1fx vs >= %dx)%s\n", pm(ra >= t_acc), ga, ra, t_acc, note(acc_st, acc_to, "account")
	printf "convert/perfgraft wall  %s (%s%.1fx vs >= %dx)%s\n", pm(rc >= t_conv), gc, rc, t_conv, note(conv_st, conv_to, "convert")
	printf "perfgraft peak RSS      %s (%.1f MB vs <= %d MB)\n", pm(mb(pg_kb) <= t_rss), mb(pg_kb), t_rss
}'
# ---- 5. account: --account against the perf script and YAML routes ----
# (bench-xray-account.sh on this trace and binary; its own small trace for
# the routes that cannot read this one in reasonable time and memory)
if [ "$run_pg" = 1 ]; then
	acc_args=()
	[ "$reference" = 1 ] || acc_args=(--no-reference)
	XRAY_TRACE=$trace XRAY_BIN=$bin PERFGRAFT=$pg LLVM_XRAY=${xray:-llvm-xray} RUNS=$runs \
		bash "$here/bench-xray-account.sh" "${acc_args[@]}" ||
		echo "bench-xray: bench-xray-account.sh failed (exit status $?)" >&2
fi
if [ -n "$keep" ]; then
	echo "bench-xray: kept $tmp (trace.fdr, xray-big, logs/)"
fi
exit 0
