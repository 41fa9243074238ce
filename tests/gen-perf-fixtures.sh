#!/bin/sh
# SPDX-License-Identifier: MIT
# Records node running tests/fixtures/perf/work.js under real perf, the way
# tests/test_inject_acceptance.py does (tests/perf_fixture.py), into a
# directory you can inspect by hand, and writes perf's own reference
# (perf inject --jit -> perf.ref.data).  Nothing is committed: the
# perf.data names the jitdump by its absolute path, so a recording only
# works where it was made.
#
# Usage: tests/gen-perf-fixtures.sh DIR [fp|dwarf] [MS]
#   DIR    new or empty directory (the recording, jit-PID.dump, perf's
#          jitted-*.so files and DIR/debug, the --buildid-dir given to
#          every perf command, end up there)
#   fp     perf record -k mono -g ...             (default, 1500 ms)
#   dwarf  perf record -k mono --call-graph dwarf (default 500 ms)
#
# Then, for example:
#   cd DIR && perfgraft inject -i perf.data -o perf.pg.data
#   perf --buildid-dir DIR/debug report -i perf.pg.data --stdio --sort sym
# Environment: PERF, NODE (default perf and node from PATH).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ]; then
	sed -n '3,22s/^# \{0,1\}//p' "$0" >&2
	exit 2
fi
exec python3 "$here/perf_fixture.py" record "$@"
