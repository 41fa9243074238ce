#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 24.2: under DWARF call graphs perf report shows perfgraft's
output with perf inject --jit's rows, one per function.

perf report keys a row on the dso's short name (the file's basename) and
the symbol's start and end in that file (tools/perf/util/sort.c,
sort__sym_cmp; --sort sym compares the dso too).  With user stacks the
memory layout copies code (MOVE copies, code carried into newer
generations); each copy must therefore sit at one offset in files of one
basename, or perf splits the function's samples into several rows.

Recordings (perf record -k mono --call-graph dwarf, -N, --buildid-dir in a
temporary directory, HOME there too):
  - Testjit: `testjit run -c` (tests/jit/testjit.c), whose jit_spin_a is
    MOVEd while it runs;
  - Node: bench/gen-big-node.js 20000 2 16 with --perf-prof
    --perf-prof-unwinding-info --interpreted-frames-native-stack, the
    DWARF bench's case (bench/bench-inject.sh): about 62,000 LOADs, V8
    reuses its code space (6 generations of one region) and the
    top-level function, carried into each, was 6 rows.
Each is injected by perfgraft and by perf inject --jit, and
`perf report --stdio --no-children -g none -F sample,sym --sort sym` and
`-F sample,dso,sym --sort dso,sym` must give the same rows with the same
sample counts, row for row (ties in any order); a JIT image's dso name is
compared as "JIT" (perf inject names a file per function, perfgraft per
region).  Skipped without a working perf record (or node, for Node).

One difference is allowed, the one perfgraft-inject(1) documents: perf
keys a row on no name, so two different functions that perfgraft placed
at one offset with one size in two images of one file name (V8 reusing a
freed code range for code of the same size, in two generations) share a
row when both have samples, where perf inject's files keep them apart.
A row of perfgraft's that is the sum of perf inject's rows is accepted
only when the images' symbol tables (readelf -sW) show each of those
functions at such a shared offset and size; anything else fails.
"""

import collections
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import perf_fixture as pf  # noqa: E402

TESTJIT = os.path.join(os.path.dirname(os.path.abspath(pf.PERFGRAFT)), "tests", "testjit")
KEEP_TMP = os.environ.get("PERFGRAFT_KEEP_TMP") == "1"

# perf inject --jit's jitted-PID-N.so, perfgraft's jitted-PID[.K]-rR[-lL].so
# (and, before issue 24.2, -rR-gG[-HEX].so)
_JIT_DSO = re.compile(r"^jitted-\d+(\.\d+)?-(\d+|r\d+(-l\d+)?|r\d+-g\d+(-[0-9a-f]{12})?)\.so$")
_ROW = re.compile(r"^\s*(\d+)\s+(.*?)\s*$")


def shared_places(image_dir):
    """{name: {(basename, value, size)}} of the FUNC symbols that sit at
    an offset and size which two or more image files of one basename
    have (readelf -sW): where perf report merges functions' rows."""
    files = collections.defaultdict(set)     # (basename, value, size) -> paths
    names = collections.defaultdict(set)     # name -> keys
    for path, funcs in pf.image_funcs(image_dir):
        for value, size, name in funcs:
            key = (os.path.basename(path), value, size)
            files[key].add(path)
            names[name].add(key)
    return {n: {k for k in ks if len(files[k]) > 1} for n, ks in names.items()}


def explain_merges(got, ref, shared):
    """Matches perfgraft's rows that perf inject's do not have to sums of
    two or more of perf inject's leftover rows (same dso column) whose
    functions share a place (shared_places) with the row's function.
    Returns (merges, unexplained got rows, unexplained ref rows)."""
    extra = list((collections.Counter(got) - collections.Counter(ref)).elements())
    missing = list((collections.Counter(ref) - collections.Counter(got)).elements())
    merges, left = [], []
    for row in sorted(extra, key=lambda r: -r[2]):
        keys = shared.get(row[1][4:], set())
        cand = [i for i, m in enumerate(missing)
                if m[0] == row[0] and keys & shared.get(m[1][4:], set())]
        pick = None
        for k in range(2, min(len(cand), 12) + 1):
            for combo in itertools.combinations(cand, k):
                if sum(missing[i][2] for i in combo) == row[2]:
                    pick = combo
                    break
            if pick:
                break
        if pick is None:
            left.append(row)
            continue
        merges.append((row, [missing[i] for i in pick]))
        missing = [m for i, m in enumerate(missing) if i not in pick]
    return merges, left, missing


def rows(rec, data, keys):
    """[(dso or "JIT" or None, "[x] sym", samples)] of perf report --sort keys."""
    fields = "sample," + keys
    _, out, _, _ = rec.perf("report", "--stdio", "-i", data, "--no-children", "-g", "none",
                            "-F", fields, "--sort", keys, check=True)
    got = []
    for ln in out.splitlines():
        if ln.startswith("#") or not ln.strip():
            continue
        m = _ROW.match(ln)
        if not m:
            continue
        rest = m.group(2)
        dso = None
        if keys == "dso,sym":
            mm = re.match(r"^(\S+)\s+(\[.\] .*)$", rest)
            if not mm:
                raise AssertionError("not a dso,sym row: %r" % ln)
            dso, rest = mm.group(1), mm.group(2)
            if _JIT_DSO.match(dso):
                dso = "JIT"
        got.append((dso, rest, int(m.group(1))))
    return got


class _Rows:
    tmp = None

    @classmethod
    def mkdtemp(cls, tag):
        cls.tmp = tempfile.mkdtemp(prefix="perfgraft-rows-%s." % tag)
        if KEEP_TMP:
            sys.stderr.write("info: keeping %s\n" % cls.tmp)

    @classmethod
    def tearDownClass(cls):
        if cls.tmp and not KEEP_TMP:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def inject_both(cls):
        rec = cls.rec
        rec.perf("inject", "--jit", "-i", "perf.data", "-o", "ref.data")
        # HOME: nothing of a perfgraft that fills a build-id cache goes
        # into the user's ~/.debug
        home = os.path.join(cls.tmp, "home")
        os.makedirs(home, exist_ok=True)
        pf.run([pf.PERFGRAFT, "inject", "-q", "-i", "perf.data", "-o", "pg.data"],
               cwd=rec.dir, env=dict(os.environ, HOME=home))

    def compare(self, keys, what):
        ref = rows(self.rec, "ref.data", keys)
        got = rows(self.rec, "pg.data", keys)
        jit = [r for r in ref if r[0] in ("JIT", None) and self.is_jit(r[1])]
        self.assertGreater(len(jit), 2, "no JIT rows in perf inject's report: %s" % ref[:10])
        names = collections.Counter(r[1] for r in got if self.is_jit(r[1]))
        dup = sorted(n for n, c in names.items() if c > 1 and
                     c > sum(1 for r in ref if r[1] == n))
        sys.stderr.write("info: %s --sort %s: perf inject %d rows (%d JIT), perfgraft %d rows; "
                         "names with more rows than perf inject's: %s\n"
                         % (what, keys, len(ref), len(jit), len(got), dup[:5]))
        self.assertEqual(dup, [], "functions split into several rows")
        if sorted(got) == sorted(ref):
            return
        merges, left, missing = explain_merges(
            got, ref, shared_places(self.rec.path("pg.data.d")))
        for row, parts in merges:
            sys.stderr.write("info: %s --sort %s: %r is perf inject's %r, functions at one "
                             "offset and size in two images of one name (the documented "
                             "merge)\n" % (what, keys, row, parts))
        self.assertEqual((left, missing), ([], []),
                         "rows neither perf inject's nor a documented merge of them")


class Testjit(_Rows, unittest.TestCase):
    """testjit run -c: jit_spin_a MOVEd while it runs."""

    @classmethod
    def setUpClass(cls):
        if not os.access(TESTJIT, os.X_OK):
            raise AssertionError("%s is not built" % TESTJIT)
        if subprocess.run([TESTJIT], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 77:
            raise unittest.SkipTest("testjit generates x86-64 code only")
        if shutil.which(pf.PERF) is None:
            raise unittest.SkipTest("no perf")
        cls.mkdtemp("testjit")
        try:
            debug = os.path.join(cls.tmp, "debug")
            home = os.path.join(cls.tmp, "home")
            os.makedirs(debug)
            os.makedirs(home)
            env = dict(os.environ, HOME=home)
            env.pop("JITDUMPDIR", None)
            env.pop("TESTJIT_DIR", None)
            cls.rec = pf.Recording(cls.tmp, debug, "dwarf")
            rc, _, err, _ = pf.run(pf.perf_cmd(
                debug, "record", "-N", "-q", "-k", "mono", "--call-graph", "dwarf",
                "-e", "cpu-clock", "-o", "perf.data", "--", TESTJIT, "run", "-c"),
                cwd=cls.tmp, check=False, env=env)
            if rc != 0:
                raise unittest.SkipTest("perf record --call-graph dwarf cannot run here: "
                                        + err[-300:])
            cls.inject_both()
        except BaseException:
            cls.tearDownClass()
            raise

    @staticmethod
    def is_jit(sym):
        return sym.startswith("[.] jit_spin")

    def test_sort_sym(self):
        self.compare("sym", "testjit")

    def test_sort_dso_sym(self):
        self.compare("dso,sym", "testjit")


class Node(_Rows, unittest.TestCase):
    """The DWARF bench's node run: reused code space, carried code."""

    ARGS = ("20000", "2", "16")     # bench-inject.sh's GEN_ARGS

    @classmethod
    def setUpClass(cls):
        why = pf.environment_problem()
        if why:
            raise unittest.SkipTest("no usable perf/node here: " + why)
        cls.mkdtemp("node")
        try:
            debug = os.path.join(cls.tmp, "debug")
            os.makedirs(debug)
            shutil.copy(os.path.join(pf.ROOT, "bench", "gen-big-node.js"), cls.tmp)
            cls.rec = pf.Recording(cls.tmp, debug, "dwarf")
            cls.rec.perf("record", "-N", "-q", "-k", "mono", "--call-graph", "dwarf",
                         "-e", "cpu-clock", "-o", "perf.data", "--", pf.NODE,
                         "--perf-prof", "--perf-prof-unwinding-info",
                         "--interpreted-frames-native-stack", "gen-big-node.js", *cls.ARGS)
            pf.find_dump(cls.rec)
            cls.inject_both()
        except BaseException:
            cls.tearDownClass()
            raise

    @staticmethod
    def is_jit(sym):
        return pf.is_jit_name(sym[4:])

    def test_sort_sym(self):
        self.compare("sym", "node")

    def test_sort_dso_sym(self):
        self.compare("dso,sym", "node")


if __name__ == "__main__":
    unittest.main()
