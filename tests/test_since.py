#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Code that runs before its LOAD (issue 22 point 6).

A producer announces code after installing it: HotSpot posts
CompiledMethodLoad once the method may already run, so samples land in a
function before its LOAD.  Where the range held no other code, its map
starts earlier: at the latest UNLOAD that vacated a part of it, or at the
dump's first LOAD where nothing was ever there; a range that covers code
still held (a LOAD or MOVE no UNLOAD took away) starts at its LOAD.

1. Symbolize, on a generated dump in both byte orders: every case of the
   rule, spelled out as name-at-time expectations, and the same times from
   jitdump_oracle.since_times (an independent model of the rule).
2. Inject, on a generated perf.data: the MMAP2 of a LOAD into fresh space
   starts at the first LOAD, and perf script names a sample between the two
   (perf inject --jit's would leave it unknown); a sample before the first
   LOAD stays unnamed.  A file the recording maps over such a range before
   the LOAD (before the map went out, or after) cancels the early start
   there: perf script names the file's samples by the file and the JIT
   code's after its LOAD by the JIT code, in file and in pipe mode, in
   every layout.  Memory an UNLOAD freed and a LOAD uses again (a new
   generation of the memory layout's region) is the new code's from the
   UNLOAD on.  A page the JIT maps (a kept read-write anonymous map) over
   such a range puts the map back after it.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jitdump_gen as jg  # noqa: E402
import jitdump_oracle as O  # noqa: E402
import perfdata_gen as pg  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(HERE, "..", "build", "perfgraft"))
PERF = os.environ.get("PERF", "perf")
PID = 5151
BASE = 0x7f0000100000


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


class SymbolizeRule(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="pg-since-")
        self.addCleanup(self.tmp.cleanup)

    def dump(self, bo):
        b = jg.JitdumpBuilder(bo=bo, pid=PID)
        code = jg.x86_64_code
        ev = []

        def load(name, off, size, idx, t):
            b.load(name.encode(), code(size, idx), BASE + off, idx, timestamp=t)
            ev.append(("load", t, BASE + off, size, idx))

        load("A", 0x000, 0x40, 1, 1000)     # the first LOAD
        load("B", 0x100, 0x40, 2, 2000)     # fresh: from 1000
        load("C", 0x020, 0x40, 3, 3000)     # over A, held: from 3000
        b.unload(BASE + 0x100, 0x40, 2, timestamp=4000)
        ev.append(("unload", 4000, BASE + 0x100, 0x40, 2))
        load("D", 0x100, 0x40, 4, 5000)     # where B was unloaded: from 4000
        b.move(1, BASE, BASE + 0x200, 0x40, timestamp=6000)
        ev.append(("move", 6000, BASE + 0x200, 0x40, 1))
        b.unload(BASE, 0x40, 1, timestamp=6500)   # A's part C does not hold
        ev.append(("unload", 6500, BASE, 0x40, 1))
        load("E", 0x230, 0x20, 5, 7000)     # over A's moved copy: from 7000
        load("F", 0x300, 0x40, 6, 8000)     # fresh: from 1000
        load("G", 0x000, 0x10, 7, 9000)     # vacated at 6500: from 6500
        load("H", 0x010, 0x20, 8, 9500)     # half vacated, half C's: from 9500
        path = os.path.join(self.tmp.name, "jit-%d.%s.dump" % (PID, "le" if bo == "<" else "be"))
        b.write(path)
        return path, ev

    # (offset, time, name or None)
    CASES = [
        (0x108, 999, None), (0x108, 1000, "B"), (0x108, 1999, "B"),
        (0x050, 2999, None), (0x050, 3000, "C"),
        (0x028, 2999, "A"), (0x028, 3000, "C"),
        (0x108, 3999, "B"), (0x108, 4000, "D"), (0x108, 4999, "D"),
        (0x308, 999, None), (0x308, 1000, "F"), (0x308, 7999, "F"),
        (0x248, 6999, None), (0x238, 5999, None), (0x238, 6999, "A"), (0x238, 7000, "E"),
        (0x008, 6499, "A"), (0x008, 6500, "G"),
        (0x018, 9499, "A"), (0x018, 9500, "H"),
    ]
    SINCE = {"A": 1000, "B": 1000, "C": 3000, "D": 4000, "E": 7000, "F": 1000,
             "G": 6500, "H": 9500}

    def test_rule_both_byte_orders(self):
        for bo in "<>":
            with self.subTest(bo=bo):
                path, ev = self.dump(bo)
                # the independent model agrees with the cases' times
                since = O.since_times(ev)
                got = [s for e, s in zip(ev, since) if e[0] == "load"]
                self.assertEqual(got, [self.SINCE[n] for n in "ABCDEFGH"])
                lines = ["0x%x@%d" % (BASE + off, t) for off, t, _ in self.CASES]
                r = run([PERFGRAFT, "symbolize", "--format=json", path, "-"],
                        input="\n".join(lines) + "\n")
                self.assertEqual(r.returncode, 0, r.stderr)
                res = json.loads(r.stdout)["results"]
                bad = []
                for (off, t, want), x in zip(self.CASES, res):
                    name = x.get("name") if x.get("found") else None
                    if name != want:
                        bad.append("+0x%x@%d: %r, want %r" % (off, t, name, want))
                self.assertEqual(bad, [])


class InjectEarly(unittest.TestCase):
    T0 = 1_000_000_000          # the first LOAD
    X, Y, Z, W, V = BASE, BASE + 0x10000, BASE + 0x20000, BASE + 0x30000, BASE + 0x40000
    U = BASE + 0x50000
    FILE = "/usr/lib/perfgraft-test/libother.so"

    def setUp(self):
        if not shutil.which(PERF):
            self.skipTest("perf not installed")
        self.tmp = tempfile.TemporaryDirectory(prefix="pg-since-inj-")
        self.addCleanup(self.tmp.cleanup)
        self.d = self.tmp.name
        t0 = self.T0
        jd = jg.JitdumpBuilder(pid=PID)
        jd.load(b"JS:*first", jg.x86_64_code(0x40, 1), self.X, 1, timestamp=t0)
        jd.load(b"JS:*early", jg.x86_64_code(0x40, 2), self.Y, 2, timestamp=t0 + 4_000_000)
        jd.load(b"JS:*late", jg.x86_64_code(0x40, 3), self.Z, 3, timestamp=t0 + 6_000_000)
        jd.load(b"JS:*w", jg.x86_64_code(0x40, 4), self.W, 4, timestamp=t0 + 6_000_000)
        # memory an UNLOAD freed, used again (a new generation of the region)
        jd.load(b"JS:*v1", jg.x86_64_code(0x40, 5), self.V, 5, timestamp=t0 + 1_000_000)
        jd.unload(self.V, 0x40, 5, timestamp=t0 + 2_000_000)
        # a page the JIT maps (read-write, kept by perf) before its LOAD
        jd.load(b"JS:*u", jg.x86_64_code(0x40, 7), self.U, 7, timestamp=t0 + 6_000_000)
        jd.load(b"JS:*v2", jg.x86_64_code(0x40, 6), self.V, 6, timestamp=t0 + 4_000_000)
        self.dump = os.path.join(self.d, "jit-%d.dump" % PID)
        jd.write(self.dump)
        self.data = os.path.join(self.d, "perf.data")
        self.pipe = os.path.join(self.d, "pipe.in")
        self.build(self.data, False)
        self.build(self.pipe, True)

    def build(self, path, pipe):
        t0 = self.T0
        b = pg.PerfDataBuilder(attrs=[pg.Attr(ids=[7])], pipe=pipe)
        b.comm(PID, PID, "java", t0 - 3_000_000)
        b.mmap2(PID, PID, 0x10000, 4096, 0, self.dump, t0 - 2_000_000, prot=5, role="marker")
        # a file over W's range before the first LOAD: W's map, still
        # queued, waits for its LOAD
        b.mmap2(PID, PID, self.W, 0x1000, 0, self.FILE, t0 - 500_000, prot=5)
        self.samples = [
            (self.Y + 8, t0 - 1_000_000, "[unknown]"),     # before the first LOAD
            (self.Y + 8, t0 + 2_000_000, "JS:*early"),     # before its LOAD
            (self.Y + 8, t0 + 5_000_000, "JS:*early"),
            (self.Z + 8, t0 + 1_000_000, "JS:*late"),      # before the file came
            (self.W + 8, t0 + 1_000_000, "[unknown]"),     # the file's
            (self.V + 8, t0 + 1_500_000, "JS:*v1"),
            (self.V + 8, t0 + 3_000_000, "JS:*v2"),        # after the UNLOAD
        ]
        for ip, t, _ in self.samples:
            b.sample(ip, PID, PID, t)
        b.finished_round()
        # a file the process maps over Z's range before Z's LOAD
        b.mmap2(PID, PID, self.Z, 0x1000, 0, self.FILE, t0 + 3_000_000, prot=5)
        # an anonymous read-write page over U's range (perf keeps it)
        b.mmap2(PID, PID, self.U, 0x1000, 0, "//anon", t0 + 3_000_000, prot=3)
        for ip, t, want in ((self.Z + 8, t0 + 4_000_000, "[unknown]"),
                            (self.Z + 8, t0 + 7_000_000, "JS:*late"),
                            (self.W + 8, t0 + 7_000_000, "JS:*w"),
                            (self.U + 8, t0 + 4_000_000, "JS:*u")):
            b.sample(ip, PID, PID, t)
            self.samples.append((ip, t, want))
        b.finished_round()
        b.write(path)

    def script(self, path):
        r = run([PERF, "--buildid-dir", os.path.join(self.d, "debug"), "script", "-i", path,
                 "-F", "ip,sym,dso", "--hide-call-graph"], cwd=self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [ln.split(None, 1)[1].strip() if len(ln.split()) > 1 else ""
                for ln in r.stdout.splitlines() if ln.strip()]

    def check(self, out):
        got = self.script(out)         # perf script: in time order
        self.assertEqual(len(got), len(self.samples), got)
        for (ip, t, want), g in zip(sorted(self.samples, key=lambda x: x[1]), got):
            if want == "[unknown]":
                self.assertTrue(g.startswith("[unknown]"), (hex(ip), t, g))
                if ip in (self.Z + 8, self.W + 8):    # the file's, not the JIT's
                    self.assertIn("libother.so", g)
            else:
                self.assertTrue(g.startswith(want + " "), (hex(ip), t, g, want))

    def test_file_mode(self):
        for layout in ("packed", "per-function", "memory"):
            with self.subTest(layout=layout):
                out = os.path.join(self.d, "out-%s.data" % layout)
                r = run([PERFGRAFT, "inject", "-q", "-N", "--layout", layout, "-i", self.data,
                         "-o", out], cwd=self.d)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.check(out)
                self.check_maps(out)

    def check_maps(self, out):
        # the MMAP2s: first and early from the first LOAD; late from the
        # first LOAD, then again at its LOAD after the file's map
        d = json.loads(run([PERFGRAFT, "dump", "--json", out]).stdout)
        mm = [(x["start"], x["time"]) for x in d["records"]
              if x["name"] == "MMAP2" and x["filename"].endswith(".so")
              and "jitted" in x["filename"]]
        t0 = self.T0
        self.assertEqual(sorted(mm), sorted([(self.X, t0), (self.Y, t0), (self.Z, t0),
                                             (self.Z, t0 + 6_000_000),
                                             (self.W, t0 + 6_000_000),
                                             (self.V, t0), (self.V, t0 + 2_000_000),
                                             (self.U, t0), (self.U, t0 + 3_000_000)]))

    def test_pipe_mode(self):
        r = run("cat pipe.in | %s inject -q -N -i - -o - > pipe.data" % PERFGRAFT,
                shell=True, cwd=self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check(os.path.join(self.d, "pipe.data"))


if __name__ == "__main__":
    unittest.main()
