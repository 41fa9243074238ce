#!/usr/bin/env bash
# Regenerates tests/fixtures/perf/demo.data and the jitdump it maps: a short
# real node run recorded by perf, for machines where perf cannot record
# (the demo and the offline inject test use it with --jitdump-dir).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/fixtures/perf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/fixtures/perf/demo.js" "$work/"
cd "$work"
perf --buildid-dir "$work/debug" record -q -N -k mono -g -e cpu-clock -o demo.data -- \
	node --perf-prof --perf-prof-unwinding-info demo.js >/dev/null
rm -f "$out"/demo.data "$out"/jit-*.dump
cp demo.data jit-*.dump "$out/"
ls -l "$out"
