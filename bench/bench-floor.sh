#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark: issue 26's acceptance run.  A NEW perfgraft build against a
# BASE build (the "before"), side by side in one run, against the machine's
# floor rather than against other tools:
#
#  node     perfgraft inject (memory and packed layouts) against `cat DUMP
#           PERF.DATA > FILE`, perfgraft elf (both layouts) against `cat DUMP
#           > FILE`, at 1x and 4x the node recording of bench-inject.sh
#           (about 61 and 236 MB of jitdump); peak RSS against the dump.
#           Targets: time <= 2.5x the floor, RSS <= 0.5x the dump + 50 MB.
#  move     perfgraft inject on move-heavy.py's 20k and 160k LOAD+MOVE
#           pairs, packed and memory layouts: time and RSS.  Target: the
#           memory layout's time <= 1.05x packed's.
#  xray     perfgraft xray on xray-big traces of 48, 192 and 384 MB: MB/s
#           and RSS.  Target: >= 300 MB/s.  Also `perfgraft xray
#           --account` on the 192 MB trace where the build has it.
#  account  on two small traces (ACCOUNT_MB/4 and ACCOUNT_MB, 8):
#           perfgraft xray --account -k -d against perfgraft xray + `perf
#           script -s xray-account.py` and against llvm-xray's YAML route
#           (`llvm-xray convert -f yaml`, then `llvm-xray account -k -d`
#           on it), projected to the 192 MB trace along the line through
#           the two sizes (at 192 MB they take minutes and, for YAML, about
#           0.6 GB of memory a MB of trace); the native table compared with
#           the YAML route's.  --account's target, >= 100 MB/s, is judged
#           on the xray part's 192 MB trace.
#
# Every measured command runs RUNS rounds after one warm-up round; in each
# round the floor runs first, then new and base, in an order that swaps
# from one round to the next.  Wall time is measured around the process
# (date +%s%N), peak RSS and CPU by /usr/bin/time.  Printed: medians of the
# walls; "x floor", "new/base" and "memory/packed" are medians of the
# ratios taken round by round (so a drift of the machine's speed cancels);
# RSS is the largest of the counted runs.
#
# usage: bench/bench-floor.sh [NEW_BUILD] [BASE] [--keep DIR]
#
#   NEW_BUILD  meson build directory holding perfgraft (default: build)
#   BASE       the "before": a build directory holding perfgraft, or a git
#              revision of this repository, which is exported (git archive)
#              into the work directory and built there with NEW_BUILD's
#              buildtype (default: 19b5f30, main when issue 26 started)
#   --keep DIR work in DIR (created; must be empty) and keep it
#
# Environment: RUNS (default 5) counted rounds; SCALE (default 1) scales
# every input size (0.1: node functions, MOVE pairs and trace sizes a tenth;
# for trying the script on a busy machine); PARTS (default "node move xray
# account"); ACCOUNT_MB (default 8) the account part's trace; ACCOUNT_RUNS
# (default 3) its rounds; ACCOUNT_ARGS (default "--account -k -d": the
# YAML route's options) what `perfgraft xray` is given for the native
# account (a build has it when `perfgraft xray --help` mentions the first
# word); REF_TIMEOUT (default
# 600) seconds after which a reference route is stopped; NODE, PERF,
# CLANGXX (default clang++-14), LLVM_XRAY (default llvm-xray-14); TMPDIR
# (where the work directory goes: inject and elf write there, and so does
# the floor's cat).
#
# With the defaults it takes an estimated 5-7 minutes on 2 idle CPUs (17-18
# at a load average of 12-15), plus 0.5 to build BASE.  MB = 10^6 bytes.
# Nothing under ~/.debug is touched: perf gets --buildid-dir and perf
# record -N, perfgraft inject --buildid-dir, all in the work directory.  Exits 0 whatever the targets
# say; 1 when perfgraft, perf, node, clang or the base build fails; 2 on a
# setup problem.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"	# work_dir, timed, times_of, machine_line, node_record, xray_*
root=$(dirname "$here")

die() { echo "bench-floor: $*" >&2; exit 2; }
fail() { echo "bench-floor: FAILED: $*" >&2; exit 1; }
say() { echo "bench-floor: $*"; }

new_build=''
base=''
keep=''
while [ $# -gt 0 ]; do
	case $1 in
	--keep) [ $# -ge 2 ] || die "--keep needs a directory"; keep=$2; shift ;;
	--keep=*) keep=${1#--keep=} ;;
	-h|--help) sed -n '3,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown option $1 (see --help)" ;;
	*) if [ -z "$new_build" ]; then new_build=$1
	   elif [ -z "$base" ]; then base=$1
	   else die "too many arguments (see --help)"; fi ;;
	esac
	shift
done
new_build=${new_build:-$root/build}
base=${base:-19b5f30}
runs=${RUNS:-5}
scale=${SCALE:-1}
parts=${PARTS:-node move xray account}
account_mb=${ACCOUNT_MB:-8}
account_runs=${ACCOUNT_RUNS:-3}
account_args=${ACCOUNT_ARGS:---account -k -d}
ref_timeout=${REF_TIMEOUT:-600}
node=${NODE:-node}
perf=${PERF:-perf}

t_floor=2.5		# inject/elf wall / floor wall, at most
t_rss_dump=0.5		# peak RSS at most this x the dump + t_rss_mb
t_rss_mb=50
t_mem_packed=1.05	# move: memory layout wall / packed wall, at most
t_xray_mbs=300		# perfgraft xray MB/s, at least
t_account_mbs=100	# perfgraft xray --account MB/s, at least

[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ "$account_runs" =~ ^[1-9][0-9]*$ ]] || die "ACCOUNT_RUNS must be a positive integer"
[[ "$scale" =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v s="$scale" 'BEGIN {exit !(s > 0)}' ||
	die "SCALE must be a positive number"
[[ "$account_mb" =~ ^[0-9]*\.?[0-9]+$ ]] || die "ACCOUNT_MB must be a number"
[[ "$ref_timeout" =~ ^[1-9][0-9]*$ ]] || die "REF_TIMEOUT must be a positive number of seconds"
for p in $parts; do
	case $p in node|move|xray|account) ;; *) die "PARTS: unknown part '$p' (node move xray account)" ;; esac
done
want() { [[ " $parts " == *" $1 "* ]]; }
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (Debian: apt-get install time)"
command -v python3 >/dev/null || die "no python3"
if want node; then
	command -v "$node" >/dev/null || die "no $node"
	command -v "$perf" >/dev/null || die "no $perf (Debian: apt-get install linux-perf)"
fi
if want account; then command -v "$perf" >/dev/null || die "no $perf"; fi
if want xray || want account; then
	clangxx=${CLANGXX:-$(command -v clang++-14 || echo clang++)}
	command -v "$clangxx" >/dev/null || die "no $clangxx (Debian: apt-get install clang-14)"
fi
if want account; then
	llvm_xray=${LLVM_XRAY:-$(command -v llvm-xray-14 || echo llvm-xray)}
	command -v "$llvm_xray" >/dev/null || die "no $llvm_xray (Debian: apt-get install llvm-14)"
	command -v timeout >/dev/null || die "no timeout(1) (coreutils)"
fi

pg_new=$new_build/perfgraft
[ -x "$pg_new" ] || die "no executable $pg_new (build first, or pass NEW_BUILD)"
pg_new=$(cd "$(dirname "$pg_new")" && pwd)/perfgraft

work_dir bench-floor "$keep"
logs=$tmp/logs
rows=$logs/rows		# CASE SIDE ROUND WALL_NS PEAK_KB USER_S SYS_S
meta=$logs/meta		# CASE KEY VALUE
mkdir "$logs"
: >"$rows"
: >"$meta"
touch "$logs/start"

# The build's source commit (and whether its tree had changes) and buildtype.
build_info() { # BUILD_DIR
	python3 - "$1" <<'EOF'
import json, os, subprocess, sys
b = sys.argv[1]
try:
    src = json.load(open(os.path.join(b, "meson-info", "meson-info.json")))["directories"]["source"]
    opts = {o["name"]: o["value"] for o in json.load(open(os.path.join(b, "meson-info", "intro-buildoptions.json")))}
except (OSError, ValueError, KeyError):
    print("unknown unknown false"); sys.exit()
def git(*a):
    r = subprocess.run(["git", "-C", src] + list(a), capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""
rev = git("rev-parse", "--short", "HEAD") or "no-git"
if rev != "no-git" and git("status", "--porcelain", "--untracked-files=no"):
    rev += "+changes"
print(rev, opts.get("buildtype", "unknown"), opts.get("b_ndebug", "false"))
EOF
}
read -r new_rev new_bt new_nd < <(build_info "$new_build")

# Before the base build, whose own load would show in the load average.
machine_line "bench-floor: "
# ---- the base build -------------------------------------------------------
if [ -x "$base/perfgraft" ]; then
	pg_base=$(cd "$base" && pwd)/perfgraft
	read -r base_rev base_bt _ < <(build_info "$base")
	base_desc="$base_rev, build directory $base, $base_bt"
else
	rev=$(git -C "$root" rev-parse --verify -q "$base^{commit}") ||
		die "BASE '$base' is neither a build directory holding perfgraft nor a git revision"
	command -v meson >/dev/null && command -v ninja >/dev/null || die "no meson/ninja to build BASE"
	say "building BASE $base (${rev:0:7}) in the work directory, buildtype $new_bt"
	mkdir "$tmp/base-src"
	t0=$(date +%s)
	git -C "$root" archive "$rev" | tar -x -C "$tmp/base-src" || fail "git archive $base"
	{ meson setup "$tmp/base-build" "$tmp/base-src" --buildtype="$new_bt" -Db_ndebug="$new_nd" \
		-Dtraceevent_plugin_dir= && ninja -C "$tmp/base-build" perfgraft; } \
		>"$logs/base-build.log" 2>&1 || { tail -n 20 "$logs/base-build.log" >&2; fail "building BASE $base"; }
	pg_base=$tmp/base-build/perfgraft
	base_desc="${rev:0:7} ($base), built here in $(( $(date +%s) - t0 )) s, $new_bt"
fi

say "new:  $pg_new ($new_rev, $new_bt)"
say "base: $base_desc"
say "$runs counted rounds after 1 warm-up, new and base alternating; SCALE $scale; parts: $parts"

scaled() { awk -v n="$1" -v s="$scale" 'BEGIN { v = int(n * s + 0.5); print v < 1 ? 1 : v }'; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }

# ---- running ---------------------------------------------------------------
# run1 CASE SIDE ROUND DIR CMD...: empties DIR (its stdout goes to
# DIR/stdout), syncs, runs CMD once; a row for counted rounds (ROUND > 0).
# A command that fails stops the bench, except under REF_TIMEOUT (timeout
# as CMD): a stopped run is a row with wall "timeout".
run1() {
	local c=$1 side=$2 r=$3 d=$4 t0 t1 st=0
	shift 4
	rm -rf "$d"
	mkdir -p "$d"
	sync
	t0=$(date +%s%N)
	/usr/bin/time -f '%M %U %S' -o "$logs/run.time" "$@" >"$d/stdout" 2>"$logs/run.err" || st=$?
	t1=$(date +%s%N)
	if [ "$st" != 0 ]; then
		if [ "$1" = timeout ] && { [ "$st" = 124 ] || [ "$st" = 137 ]; }; then
			[ "$r" = 0 ] || echo "$c $side $r timeout 0 0 0" >>"$rows"
			return 0
		fi
		cp "$logs/run.err" "$logs/failed.err"
		tail -n 20 "$logs/run.err" >&2
		fail "$c ($side, round $r): exit status $st: $*"
	fi
	[ "$r" = 0 ] || echo "$c $side $r $((t1 - t0)) $(tail -n 1 "$logs/run.time")" >>"$rows"
}
# The sides in the order of round R: new first in even rounds.
sides() { if (( $1 % 2 )); then echo base new; else echo new base; fi; }
pg_of() { if [ "$1" = new ]; then echo "$pg_new"; else echo "$pg_base"; fi; }

# Sets the array cmd to one run of a case KIND by perfgraft PG, writing
# into DIR, from the part's current inputs (in_dump, in_pdata, in_trace,
# in_bin).
set_cmd() { # KIND PG DIR
	local k=$1 p=$2 d=$3
	case $k in
	inject-memory|inject-packed|move-memory|move-packed)
		cmd=("$p" inject -q --buildid-dir "$d/debug" --layout "${k#*-}" -i "$in_pdata" -o "$d/out.data") ;;
	elf-memory|elf-packed)
		cmd=("$p" elf -q --layout "${k#*-}" "$in_dump" -o "$d/img") ;;
	xray)
		cmd=("$p" xray -q "$in_trace" -b "$in_bin" -o "$d/out.data") ;;
	account)
		# shellcheck disable=SC2206	# ACCOUNT_ARGS: words
		cmd=("$p" xray $account_args "$in_trace" -b "$in_bin") ;;
	*) fail "set_cmd: $k" ;;
	esac
}
# ab ROUND CASE KIND [SIDES]: the case's runs of one round, both sides (or
# SIDES) in the round's order.
ab() {
	local r=$1 c=$2 k=$3 s only=${4:-new base}
	for s in $(sides "$r"); do
		[[ " $only " == *" $s "* ]] || continue
		set_cmd "$k" "$(pg_of "$s")" "$tmp/run-$s"
		run1 "$c" "$s" "$r" "$tmp/run-$s" "${cmd[@]}"
	done
}
has_account() { "$1" xray --help 2>&1 | grep -q -e "${account_args%% *}"; }
account_sides='new base'
has_account "$pg_new" || account_sides=${account_sides/new/}
has_account "$pg_base" || account_sides=${account_sides/base/}

# ---- summaries ---------------------------------------------------------------
cat >"$tmp/summary.py" <<'EOF'
import sys
from statistics import median
part, rows_path, meta_path = sys.argv[1:4]
t = dict(a.split("=", 1) for a in sys.argv[4:])
runs = {}
for line in open(rows_path):
    c, side, r, wall, kb, u, s = line.split()
    runs.setdefault((c, side), {})[int(r)] = None if wall == "timeout" else (int(wall) / 1e9, int(kb) * 1024 / 1e6)
meta = {}
for line in open(meta_path):
    c, k, v = line.split(None, 2)
    meta[(c, k)] = v.strip()

def med(c, side):
    w = [x[0] for x in runs.get((c, side), {}).values() if x]
    return median(w) if w else None
def rss(c, side):
    m = [x[1] for x in runs.get((c, side), {}).values() if x]
    return max(m) if m else None
def ratio(a, b):
    """Median of the round-by-round ratios a/b (a and b: (case, side))."""
    ra, rb = runs.get(a, {}), runs.get(b, {})
    q = [ra[r][0] / rb[r][0] for r in ra if r in rb and ra[r] and rb[r] and rb[r][0] > 0]
    return median(q) if q else None
def f(v, fmt):
    return "-" if v is None else format(v, fmt)
def pf(ok):
    return "-" if ok is None else ("PASS" if ok else "FAIL")
def n(c, side):
    return len([x for x in runs.get((c, side), {}).values() if x])

if part == "node":
    tf, tr, tm = float(t["floor"]), float(t["rss_dump"]), float(t["rss_mb"])
    print(f"\nnode: perfgraft inject against the floor `cat DUMP PERF.DATA > FILE`, perfgraft elf against `cat DUMP > FILE`;")
    print(f"targets: time <= {tf}x the floor, peak RSS <= {tr}x the dump + {tm:.0f} MB (medians of {t['runs']} rounds)")
    hdr = (f"{'':20} {'dump MB':>8} {'floor s':>8} | {'new s':>7} {'x floor':>7} {'RSS MB':>7} {'x dump':>6} | "
           f"{'base s':>7} {'x floor':>7} {'RSS MB':>7} {'x dump':>6} | {'new/base':>8} | {'new: time, RSS':>14} | {'base: time, RSS':>15}")
    print(hdr)
    for mult in t["mults"].split():
        for kind in ("inject-memory", "inject-packed", "elf-memory", "elf-packed"):
            c = f"{kind}.{mult}"
            fl = ("floor-inject." if kind.startswith("inject") else "floor-elf.") + mult
            dump = float(meta[(f"node.{mult}", "dump_bytes")]) / 1e6
            cols, verdict = [], []
            for side in ("new", "base"):
                w, m = med(c, side), rss(c, side)
                x = ratio((c, side), (fl, "floor"))
                cols.append(f"{f(w, '7.3f')} {f(x, '7.2f')} {f(m, '7.1f')} {f(m / dump if m else None, '6.2f')}")
                verdict.append(f"{pf(None if x is None else x <= tf)}, {pf(None if m is None else m <= tr * dump + tm)}")
            label = kind.replace("-", " ") + " " + mult
            print(f"{label:20} {dump:8.1f} {f(med(fl, 'floor'), '8.3f')} | {cols[0]} | {cols[1]} | "
                  f"{f(ratio((c, 'new'), (c, 'base')), '7.2f')}x | {verdict[0]:>14} | {verdict[1]:>15}")
elif part == "move":
    tm = float(t["mem_packed"])
    print(f"\nmove: perfgraft inject on move-heavy.py's LOAD+MOVE pairs; target: memory layout time <= {tm}x packed's")
    print(f"{'':20} {'dump MB':>8} | {'new s':>7} {'RSS MB':>7} | {'base s':>7} {'RSS MB':>7} | {'new/base':>8}")
    for npairs in t["pairs"].split():
        dump = float(meta[(f"move.{npairs}", "dump_bytes")]) / 1e6
        for lay in ("packed", "memory"):
            c = f"move-{lay}.{npairs}"
            print(f"{'move ' + lay + ' ' + npairs:20} {dump:8.1f} | {f(med(c, 'new'), '7.3f')} {f(rss(c, 'new'), '7.1f')} | "
                  f"{f(med(c, 'base'), '7.3f')} {f(rss(c, 'base'), '7.1f')} | {f(ratio((c, 'new'), (c, 'base')), '7.2f')}x")
        out = []
        for side in ("new", "base"):
            x = ratio((f"move-memory.{npairs}", side), (f"move-packed.{npairs}", side))
            out.append(f"{side} {f(x, '.2f')}x {pf(None if x is None else x <= tm)}")
        print(f"{'move memory/packed ' + npairs:28} time: " + ", ".join(out))
elif part == "xray":
    tx, ta = float(t["xray_mbs"]), float(t["account_mbs"])
    print(f"\nxray: perfgraft xray TRACE -b xray-big -o out.data (xray-big's two threads; defaults: zstd level 1 on two\n"
          f"threads); target >= {tx:.0f} MB/s of trace (medians of {t['runs']} rounds)")
    print(f"{'':20} {'trace MB':>8} | {'new s':>7} {'MB/s':>6} {'RSS MB':>7} | {'base s':>7} {'MB/s':>6} {'RSS MB':>7} | "
          f"{'new/base':>8} | {'new':>4} | {'base':>4}")
    for size in t["sizes"].split():
        c = f"xray.{size}"
        mbytes = float(meta[(c, "trace_bytes")]) / 1e6
        cols, v = [], []
        for side in ("new", "base"):
            w = med(c, side)
            r = mbytes / w if w else None
            cols.append(f"{f(w, '7.3f')} {f(r, '6.0f')} {f(rss(c, side), '7.1f')}")
            v.append(pf(None if r is None else r >= tx))
        print(f"{'xray ' + size:20} {mbytes:8.1f} | {cols[0]} | {cols[1]} | "
              f"{f(ratio((c, 'new'), (c, 'base')), '7.2f')}x | {v[0]:>4} | {v[1]:>4}")
    c = f"account.{t['account_size']}"
    for side in ("new", "base"):
        label = f"{'account ' + t['account_size']:20}"
        if (c, side) not in runs:
            print(f"{label} {'':8} | {side}: no `perfgraft xray {t['account_args'].split()[0]}`: skipped")
            continue
        mbytes = float(meta[(f"xray.{t['account_size']}", "trace_bytes")]) / 1e6
        w = med(c, side)
        r = mbytes / w if w else None
        print(f"{label} {mbytes:8.1f} | {side}: perfgraft xray {t['account_args']} {f(w, '.3f')} s, "
              f"{f(r, '.0f')} MB/s, RSS {f(rss(c, side), '.1f')} MB (target >= {ta:.0f} MB/s: {pf(None if r is None else r >= ta)})")
elif part == "account":
    ta = float(t["account_mbs"])
    lo, hi = (float(meta[(f"account.{z}", "trace_bytes")]) / 1e6 for z in ("lo", "hi"))
    proj = float(t["proj_bytes"]) / 1e6
    print(f"\naccount: the latency table of {lo:.1f} and {hi:.1f} MB traces (medians of {t['runs']} rounds); 'projected':"
          f"\nthe {proj:.1f} MB xray trace, on the line through the two sizes' figures")
    print(f"{'':38} {'s ' + format(lo, '.1f') + ' MB':>10} {'s ' + format(hi, '.1f') + ' MB':>10} {'MB/s':>7} "
          f"{'RSS MB':>8} | {'projected s':>11} {'RSS MB':>8}")
    def proj_of(a, b):
        if a is None or b is None:
            return None
        return max(b + (b - a) / (hi - lo) * (proj - hi), b) if hi > lo else b * proj / hi
    def line(label, wl, wh, ml, mh, stopped=False):
        r = hi / wh if wh else None
        print(f"{label:38} {f(wl, '10.2f')} {(('>' if stopped else '') + f(wh, '.2f')):>10} {f(r, '7.1f')} "
              f"{f(mh, '8.1f')} | {f(proj_of(wl, wh), '11.1f')} {f(proj_of(ml, mh), '8.0f')}")
        return r
    for side in ("new", "base"):
        if ("account-native.hi", side) in runs:
            r = line(f"perfgraft xray {t['account_args']} ({side})", med("account-native.lo", side),
                     med("account-native.hi", side), rss("account-native.lo", side), rss("account-native.hi", side))
            print(f"{'':38} (start-up weighs on so small a trace: the >= {ta:.0f} MB/s target is judged on the xray part's `account` line)")
    if ("account-native.hi", "new") not in runs and ("account-native.hi", "base") not in runs:
        print(f"{'perfgraft xray ' + t['account_args']:38} (neither build has it: skipped)")
    def route(label, steps):
        tot = {"lo": 0.0, "hi": 0.0}
        mem = {"lo": 0.0, "hi": 0.0}
        stopped = False
        for c in steps:
            for z in ("lo", "hi"):
                w = med(f"{c}.{z}", "ref")
                if w is None or any(x is None for x in runs.get((f"{c}.{z}", "ref"), {}).values()):
                    stopped = True
                tot[z] += w if w is not None else float(t["ref_timeout"])
                mem[z] = max(mem[z], rss(f"{c}.{z}", "ref") or 0)
            print(f"  {meta.get((c, 'label'), c):36} {f(med(c + '.lo', 'ref'), '10.2f')} {f(med(c + '.hi', 'ref'), '10.2f')} "
                  f"{'':7} {f(rss(c + '.hi', 'ref'), '8.1f')}")
        line(label, tot["lo"], tot["hi"], mem["lo"], mem["hi"], stopped)
        if stopped:
            print(f"{'':38} (a step was stopped by REF_TIMEOUT: a lower bound)")
    route("perf script route (total)", ["account-pgxray", "account-script"])
    route("llvm-xray YAML route (total)", ["account-yaml", "account-yacc"])
    if "same" in t:
        print(f"native table vs the YAML route's ({hi:.1f} MB): {t['same']}")
EOF
summary() { # PART KEY=VALUE...
	python3 "$tmp/summary.py" "$1" "$rows" "$meta" runs="$runs" "${@:2}" | tee -a "$logs/summary.txt"
}

# ---- node ----------------------------------------------------------------------
node_part() {
	local mult count d dump r c k
	mkdir -p "$tmp/debug-rec"
	for mult in 1x 4x; do
		count=$(scaled $((20000 * ${mult%x})))
		d=$tmp/node-$mult
		mkdir "$d"
		say "node $mult: $perf record -k mono -g -e cpu-clock -N -- $node --perf-prof ... gen-big-node.js $count 2 16"
		node_record "$d" "$count 2 16" "$tmp/debug-rec" "$logs/record-$mult" ||
			{ tail -n 20 "$logs/record-$mult.err" >&2; fail "perf record / node ($mult)"; }
		dump=$(find "$d" -maxdepth 1 -name 'jit-*.dump' | head -n 1)
		[ -n "$dump" ] || fail "node wrote no jit-*.dump ($mult)"
		echo "node.$mult dump_bytes $(stat -c %s "$dump")" >>"$meta"
		say "node $mult: jitdump $(mb "$(stat -c %s "$dump")") MB, perf.data $(mb "$(stat -c %s "$d/perf.data")") MB"
	done
	for ((r = 0; r <= runs; r++)); do
		say "node: round $r of $runs$([ "$r" = 0 ] && echo ' (warm-up)')"
		for mult in 1x 4x; do
			d=$tmp/node-$mult
			in_dump=$(find "$d" -maxdepth 1 -name 'jit-*.dump' | head -n 1)
			in_pdata=$d/perf.data
			run1 "floor-inject.$mult" floor "$r" "$tmp/run-floor" cat "$in_dump" "$in_pdata"
			for k in inject-memory inject-packed; do ab "$r" "$k.$mult" "$k"; done
			run1 "floor-elf.$mult" floor "$r" "$tmp/run-floor" cat "$in_dump"
			for k in elf-memory elf-packed; do ab "$r" "$k.$mult" "$k"; done
		done
	done
	rm -rf "$tmp"/run-* "$tmp"/node-*
	summary node mults="1x 4x" floor="$t_floor" rss_dump="$t_rss_dump" rss_mb="$t_rss_mb"
}

# ---- move ----------------------------------------------------------------------
move_part() {
	local n d r k pairs=''
	for n in 20000 160000; do
		n=$(scaled "$n")
		pairs="$pairs $n"
		d=$tmp/move-$n
		mkdir "$d"
		python3 "$here/move-heavy.py" "$n" "$d" >"$logs/move-$n.out" || fail "move-heavy.py $n"
		echo "move.$n dump_bytes $(stat -c %s "$d/jit-4242.dump")" >>"$meta"
	done
	say "move: LOAD+MOVE pairs:$pairs"
	for ((r = 0; r <= runs; r++)); do
		say "move: round $r of $runs$([ "$r" = 0 ] && echo ' (warm-up)')"
		for n in $pairs; do
			in_pdata=$tmp/move-$n/perf.data
			for k in move-packed move-memory; do ab "$r" "$k.$n" "$k"; done
		done
	done
	rm -rf "$tmp"/run-* "$tmp"/move-*
	summary move pairs="${pairs# }" mem_packed="$t_mem_packed"
}

# ---- xray ----------------------------------------------------------------------
build_xray_big() {
	[ -x "$tmp/xray-big" ] && return 0
	say "building xray-big with $clangxx"
	xray_build "$clangxx" "$tmp/xray-big" 2>"$logs/xray-build.err" ||
		{ cat "$logs/xray-build.err" >&2; fail "$clangxx xray-big.cc"; }
}
make_trace() { # NAME BYTES OUT
	local it
	it=$(xray_iterations "$2")
	xray_trace "$1" "$tmp/xray-big" "$it" "$3" || { tail -n 20 "$logs/$1.err" >&2; fail "xray-big $it"; }
	say "trace $(mb "$(stat -c %s "$3")") MB (xray-big $it, $(times_of "$1" | cut -d' ' -f1) s)"
}
xray_part() {
	local mb_ r size acc_size
	build_xray_big
	acc_size=$(awk -v s="$scale" 'BEGIN { printf "%gMB", 192 * s }')
	for mb_ in 48 192 384; do
		size=$(awk -v m="$mb_" -v s="$scale" 'BEGIN { printf "%gMB", m * s }')
		mkdir -p "$tmp/xray"
		make_trace "gen-$size" "$(scaled $((mb_ * 1000000)))" "$tmp/xray/trace.fdr"
		echo "xray.$size trace_bytes $(stat -c %s "$tmp/xray/trace.fdr")" >>"$meta"
		in_trace=$tmp/xray/trace.fdr in_bin=$tmp/xray-big
		for ((r = 0; r <= runs; r++)); do
			say "xray $size: round $r of $runs$([ "$r" = 0 ] && echo ' (warm-up)')"
			ab "$r" "xray.$size" xray
			if [ "$size" = "$acc_size" ] && [ -n "${account_sides// /}" ]; then
				ab "$r" "account.$size" account "$account_sides"
			fi
		done
		rm -rf "$tmp/xray" "$tmp"/run-*
	done
	summary xray sizes="$(awk -v s="$scale" 'BEGIN { printf "%gMB %gMB %gMB", 48 * s, 192 * s, 384 * s }')" \
		xray_mbs="$t_xray_mbs" account_mbs="$t_account_mbs" account_size="$acc_size" account_args="$account_args"
}

# ---- account -------------------------------------------------------------------
# Two traces, ACCOUNT_MB/4 and ACCOUNT_MB: each route's time and RSS at the
# 192 MB trace are projected along the line through its two medians (a
# route's fixed cost, perf's start-up for one, does not scale).
account_part() {
	local r d=$tmp/acct same="" s sz bytes
	build_xray_big
	mkdir -p "$d" "$tmp/debug-acct"
	for sz in lo hi; do
		bytes=$(awk -v m="$account_mb" -v s="$scale" -v q="$([ $sz = lo ] && echo 4 || echo 1)" \
			'BEGIN { v = int(m * 1e6 * s / q); print v < 2000 ? 2000 : v }')
		make_trace "gen-account-$sz" "$bytes" "$d/$sz.fdr"
		echo "account.$sz trace_bytes $(stat -c %s "$d/$sz.fdr")" >>"$meta"
	done
	{
		echo "account-pgxray label perfgraft xray -o x.data (new)"
		echo "account-script label perf script -s xray-account.py"
		echo "account-yaml label llvm-xray convert -f yaml"
		echo "account-yacc label llvm-xray account -k -d on the YAML"
	} >>"$meta"
	in_bin=$tmp/xray-big
	for ((r = 0; r <= account_runs; r++)); do
		say "account: round $r of $account_runs$([ "$r" = 0 ] && echo ' (warm-up)')"
		for sz in lo hi; do
			in_trace=$d/$sz.fdr
			[ -z "${account_sides// /}" ] || ab "$r" "account-native.$sz" account "$account_sides"
			# perfgraft xray + perf script: the user's route from the trace.
			run1 "account-pgxray.$sz" ref "$r" "$d/pg" timeout -k 10 "$ref_timeout" \
				"$pg_new" xray -q "$in_trace" -b "$in_bin" -o "$d/x.data"
			run1 "account-script.$sz" ref "$r" "$d/script" timeout -k 10 "$ref_timeout" \
				"$perf" --buildid-dir "$tmp/debug-acct" script -i "$d/x.data" \
				-s "$root/perf-scripts/xray-account.py"
			# llvm-xray's YAML route: account refuses the YAML's FDR
			# version (5), so the header says 1, as
			# tests/test_xray_ext_times.py does.
			run1 "account-yaml.$sz" ref "$r" "$d/yaml" timeout -k 10 "$ref_timeout" \
				"$llvm_xray" convert -f yaml -m "$in_bin" "$in_trace" -o "$d/t.yaml"
			if [ -s "$d/t.yaml" ]; then
				sed -i '0,/^  version: *[0-9]*$/s//  version: 1/' "$d/t.yaml"
				run1 "account-yacc.$sz" ref "$r" "$d/yacc" timeout -k 10 "$ref_timeout" \
					"$llvm_xray" account -k -d -m "$in_bin" "$d/t.yaml"
			fi
			rm -f "$d/t.yaml" "$d/x.data"
		done
	done
	# The last round's tables, of the larger trace.
	for s in $account_sides; do
		[ -s "$tmp/run-$s/stdout" ] && [ -s "$d/yacc/stdout" ] || continue
		if cmp -s "$tmp/run-$s/stdout" "$d/yacc/stdout"; then
			same="$same$s: the same $(wc -l <"$d/yacc/stdout") lines; "
		else
			same="$same$s: DIFFERENT ($(diff "$tmp/run-$s/stdout" "$d/yacc/stdout" | grep -c '^[<>]' || true) lines differ); "
		fi
	done
	rm -rf "$d" "$tmp"/run-*
	summary account account_mbs="$t_account_mbs" ref_timeout="$ref_timeout" runs="$account_runs" \
		proj_bytes="$(scaled 192000000)" account_args="$account_args" ${same:+same="${same%; }"}
}

t_start=$(date +%s)
if want node; then node_part; fi
if want move; then move_part; fi
if want xray; then xray_part; fi
if want account; then account_part; fi
echo
machine_line "bench-floor: at the end: "
say "took $(( $(date +%s) - t_start )) s (the base build not included)"
if [ -d "$HOME/.debug" ] && [ -n "$(find "$HOME/.debug" -newer "$logs/start" -print -quit 2>/dev/null)" ]; then
	echo "bench-floor: warning: something under $HOME/.debug changed during the run" >&2
fi
[ -z "$keep" ] || say "kept $tmp (logs/rows: every run)"
exit 0
