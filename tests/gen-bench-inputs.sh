#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Records the benchmarks' inputs once, for tests/output_digest.py
# --bench-inputs OUTDIR (a restructuring's proof that two builds write the
# same bytes on the large inputs too, not only on the generated cases):
#
#   OUTDIR/fp/      perf record -k mono -g of node gen-big-node.js (the
#                   bench-inject node case): perf.data + jit-PID.dump
#   OUTDIR/dwarf/   the same under --call-graph dwarf (bench-inject's dwarf
#                   case: inject notes stacks and carries live code)
#   OUTDIR/move/    bench/move-heavy.py's LOAD+MOVE dump and perf.data
#   OUTDIR/scenarios.json  [{name, data, dumps}], paths relative to OUTDIR
#
# Usage: tests/gen-bench-inputs.sh OUTDIR
# Environment: GEN_ARGS (default "20000 2 16", bench-inject's), DWARF_ARGS
# (default "4000 2 16": a --call-graph dwarf recording of the full workload
# is 1-2 GB), MOVE_PAIRS (default 20000), NODE (node), PERF (perf).
# Needs root or perf_event_paranoid <= 1 for perf record.  perf gets its own
# build-id directory inside OUTDIR (removed at exit); ~/.debug is not
# touched.  The recordings are not deterministic: make them once and give
# the same OUTDIR to both digest runs.
set -euo pipefail

if [ $# -ne 1 ]; then
	sed -n '3,22s/^# \{0,1\}//p' "$0" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
node=${NODE:-node}
perf=${PERF:-perf}
gen_args=${GEN_ARGS:-20000 2 16}
dwarf_args=${DWARF_ARGS:-4000 2 16}
pairs=${MOVE_PAIRS:-20000}
debug=$(mktemp -d "$out/.debug.XXXXXX")
trap 'rm -rf "$debug"' EXIT

record() {	# DIR ARGS CALLGRAPH...
	local d=$out/$1 args=$2
	shift 2
	rm -rf "$d"
	mkdir -p "$d"
	# shellcheck disable=SC2086
	(cd "$d" && "$perf" --buildid-dir "$debug" record -q -k mono "$@" -e cpu-clock -N \
		-o perf.data -- "$node" --perf-prof --perf-prof-unwinding-info \
		--interpreted-frames-native-stack "$root/bench/gen-big-node.js" $args \
		>/dev/null 2>"$d/record.err") ||
		{ tail -n 20 "$d/record.err" >&2; exit 1; }
	rm -f "$d/record.err"
}
record fp "$gen_args" -g
record dwarf "$dwarf_args" --call-graph dwarf
rm -rf "$out/move"
python3 "$root/bench/move-heavy.py" "$pairs" "$out/move" >/dev/null

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
sc = []
for name in ("fp", "dwarf", "move"):
    d = os.path.join(out, name)
    dumps = sorted(n for n in os.listdir(d) if n.startswith("jit-") and n.endswith(".dump"))
    if not dumps or not os.path.exists(os.path.join(d, "perf.data")):
        sys.exit("gen-bench-inputs: %s has no perf.data or jitdump" % d)
    sc.append({"name": name, "data": name + "/perf.data",
               "dumps": [name + "/" + n for n in dumps]})
with open(os.path.join(out, "scenarios.json"), "w") as f:
    json.dump(sc, f, indent=1)
PY
echo "gen-bench-inputs: $(du -sh "$out" | cut -f1) in $out"
