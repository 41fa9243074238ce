#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Pipe mode with a live jitdump (issue 24, point 1), against real perf.

node runs tests/fixtures/perf/late.js, whose hottest function (fib) is
compiled after the first second, under
  perf record -k mono -g -o - | tee rec.pipe | perfgraft inject -i - -o -
so that perfgraft reads the dump while node still writes it.  Then, on the
same run's rec.pipe:
  - perf inject --jit (the reference) and perfgraft inject -o FILE (after
    the run: the dump complete) are made;
  - perf report --no-children --sort dso,sym of the live pipe output, of
    the file output and of perf's give the same rows and counts (a JIT
    image's name counted as "[jit]": the three name their images
    differently), and fib is named and is the top row;
  - the images of the pipe run are in a directory of its own
    (perfgraft-jit-*.d), not in perf.jit.data.d;
  - replaying rec.pipe with a small --live-hold writes what it held at
    the bound and says so: held memory stays under the bound plus a record.
Binary under test: $PERFGRAFT (default build/perfgraft).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jitdump_gen as jg  # noqa: E402
import perf_fixture as pf  # noqa: E402
import perfdata_gen as pg  # noqa: E402

LATE_JS = os.path.join(HERE, "fixtures", "perf", "late.js")
TESTJIT = os.path.join(os.path.dirname(os.path.abspath(pf.PERFGRAFT)),
                       "tests", "testjit")
INLINEJIT = os.path.join(os.path.dirname(TESTJIT), "inlinejit")
ROW = re.compile(r"^\s*(\d+)\s+(\S+)\s+\[(.)\]\s(.*?)\s*$")


def setUpModule():
    why = pf.environment_problem()
    if why:
        raise unittest.SkipTest("no usable perf/node here: " + why)


def rows(text):
    """perf report -F sample,dso,sym -> {(dso, sym): samples}, JIT images
    (perf's jitted-PID-N.so, ours jitted-*.so) as "[jit]"."""
    out = {}
    for ln in text.splitlines():
        if ln.startswith("#"):
            continue
        m = ROW.match(ln)
        if not m:
            continue
        dso = "[jit]" if m.group(2).startswith("jitted-") else m.group(2)
        key = (dso, m.group(4))
        out[key] = out.get(key, 0) + int(m.group(1))
    return out


class _Pipe:
    """One program recorded in pipe mode, as the module's docstring says.
    Subclasses set PROGRAM, MODE ("fp" or "dwarf") and ARGV(cls) -> argv
    run under perf record in the run's directory, and check_top(ref)."""
    PROGRAM = None
    MODE = "fp"
    ENV = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="perfgraft-inject-live-%s." % cls.PROGRAM)
        try:
            cls._setup()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _setup(cls):
        cls.dir = os.path.join(cls.tmp, "run")
        cls.bid = os.path.join(cls.tmp, "debug")
        os.makedirs(cls.dir)
        os.makedirs(cls.bid)
        argv = cls.argv()
        rec = pf.perf_cmd(cls.bid, "record", "-N", "-q", "-k", "mono",
                          *pf.call_graph_args(cls.MODE),
                          "-e", "cpu-clock", "-o", "-", "--", *argv)
        # perfgraft inject writes perf's build-id cache: the run's, not ~/.debug
        inj = [pf.PERFGRAFT, "inject", "-i", "-", "-o", "-", "--buildid-dir",
               cls.bid]
        cls.line = "%s | tee rec.pipe | %s > live.pipe" % (pf.shell(rec),
                                                           pf.shell(inj))
        with open(os.path.join(cls.dir, "live.pipe"), "wb") as out, \
                tempfile.TemporaryFile() as e1, tempfile.TemporaryFile() as e2:
            p1 = subprocess.Popen(rec, cwd=cls.dir, stdout=subprocess.PIPE,
                                  stderr=e1, env=cls.ENV)
            p2 = subprocess.Popen(["tee", "rec.pipe"], cwd=cls.dir,
                                  stdin=p1.stdout, stdout=subprocess.PIPE)
            p1.stdout.close()
            p3 = subprocess.Popen(inj, cwd=cls.dir, stdin=p2.stdout,
                                  stdout=out, stderr=e2)
            p2.stdout.close()
            rcs = [p.wait(timeout=pf.TIMEOUT) for p in (p1, p2, p3)]
            e2.seek(0)
            cls.inject_err = e2.read().decode("utf-8", "replace")
        if rcs != [0, 0, 0]:
            raise AssertionError("pipeline %s exited %s:\n%s"
                                 % (cls.line, rcs, cls.inject_err))
        # the reference and the file output, on the same run
        with open(os.path.join(cls.dir, "rec.pipe"), "rb") as i, \
                open(os.path.join(cls.dir, "ref.pipe"), "wb") as o:
            subprocess.run(pf.perf_cmd(cls.bid, "inject", "--jit", "-i", "-",
                                       "-o", "-"), cwd=cls.dir, stdin=i,
                           stdout=o, stderr=subprocess.DEVNULL, check=True,
                           timeout=pf.TIMEOUT)
        pf.run([pf.PERFGRAFT, "inject", "-q", "-i", "rec.pipe", "-o",
                "file.data", "--buildid-dir", cls.bid], cwd=cls.dir)

    @classmethod
    def tearDownClass(cls):
        if os.environ.get("PERFGRAFT_KEEP_TMP") != "1":
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def report(self, name):
        _, out, _, _ = pf.run(pf.perf_cmd(
            self.bid, "report", "-i", name, "--stdio", "--no-children",
            "--sort", "dso,sym", "-F", "sample,dso,sym"), cwd=self.dir)
        return rows(out)

    def test_live_pipe_rows_as_file_and_perf(self):
        live, ref, filed = (self.report(n) for n in
                            ("live.pipe", "ref.pipe", "file.data"))
        self.check_top(ref)
        live_top = sorted(live.items(), key=lambda kv: -kv[1])[:5]
        diff = sorted(set(live.items()) ^ set(ref.items()),
                      key=lambda kv: -kv[1])[:12]
        self.assertEqual(live, ref, "pipe output's perf report rows differ "
                         "from perf inject --jit's on the same run (top of "
                         "pipe: %s; differing rows: %s)\ncommand: %s\n%s"
                         % (live_top, diff, self.line, self.inject_err))
        self.assertEqual(live, filed, "pipe and file outputs differ")


class LivePipe(_Pipe, unittest.TestCase):
    """node late.js: fib compiled after the first second."""
    PROGRAM = "node"

    @classmethod
    def argv(cls):
        shutil.copy(LATE_JS, os.path.join(cls.dir, "late.js"))
        return [pf.NODE, "--perf-prof", "--perf-prof-unwinding-info",
                "late.js"]

    def check_top(self, ref):
        top = max(ref.items(), key=lambda kv: kv[1])
        self.assertEqual(top[0][0], "[jit]", "perf inject --jit's top row "
                         "is not JIT code: %s" % (top,))
        self.assertTrue(top[0][1].startswith("JS:*fib"), top)

    def test_pipe_images_in_a_directory_of_the_run(self):
        self.assertFalse(os.path.exists(os.path.join(self.dir,
                                                     "perf.jit.data.d")))
        dirs = [n for n in os.listdir(self.dir)
                if re.fullmatch(r"perfgraft-jit-\d{8}-\d{6}-\d+\.d", n)]
        self.assertEqual(len(dirs), 1, os.listdir(self.dir))
        self.assertTrue(os.listdir(os.path.join(self.dir, dirs[0])))

    def test_held_memory_bounded(self):
        # replayed at once, the records after the dump's last LOAD wait for
        # node's EXIT: a 16 KiB bound makes them go out at the bound
        bound = 16 << 10
        _, _, err, _ = pf.run([pf.PERFGRAFT, "inject", "-i", "rec.pipe",
                               "-o", "-", "--image-dir", "held.d",
                               "--buildid-dir", self.bid,
                               "--live-hold", str(bound / 1048576.0),
                               "--live-wait", "86400"],
                              cwd=self.dir)
        m = re.search(r"at most ([\d.]+) MiB of records held back, (\d+) "
                      r"samples written before", err)
        self.assertTrue(m, err)
        self.assertLessEqual(float(m.group(1)) * 1048576,
                             bound + 65536 + 200, err)
        if int(m.group(2)) == 0:
            after = self.samples_after_last_load()
            if after < 400:
                # on a loaded machine V8 may compile its last code at the
                # very end: then nothing waits, and nothing is to check
                self.skipTest("only %d samples after the dump's last LOAD "
                              "in this recording" % after)
            self.fail("%d samples after the dump's last LOAD, none written "
                      "at the bound:\n%s" % (after, err))
        self.assertIn("--live-hold", err)

    def samples_after_last_load(self):
        dumps = [n for n in os.listdir(self.dir) if re.fullmatch(r"jit-\d+\.dump", n)]
        self.assertEqual(len(dumps), 1, dumps)
        _, out, _, _ = pf.run([pf.PERFGRAFT, "dump", "--json",
                               os.path.join(self.dir, dumps[0])])
        last = max(r["timestamp"] for r in json.loads(out)["records"]
                   if r["type"] == "LOAD")
        _, out, _, _ = pf.run(pf.perf_cmd(self.bid, "script", "-i", "rec.pipe",
                                          "-F", "time", "--ns"), cwd=self.dir)
        times = [int(a) * 10**9 + int(b) for a, b in
                 re.findall(r"(?m)^\s*(\d+)\.(\d{9}):", out)]
        self.assertTrue(times, out[:500])
        return sum(1 for t in times if t > last)


def built(path):
    """Skips a class whose program is not built or not for this machine
    (the JITs of tests/jit/ generate x86-64 code only: exit 77)."""
    if not os.access(path, os.X_OK):
        raise unittest.SkipTest("%s is not built" % path)
    if subprocess.run([path], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode == 77:
        raise unittest.SkipTest("%s generates x86-64 code only" % path)
    return path


class _Testjit(_Pipe):
    """testjit run -c (tests/jit/testjit.c): four functions, then
    jit_spin_a MOVEd and run again, the MOVE written ~4*MS ms after the
    LOADs."""
    PROGRAM = "testjit"
    MS = 300

    @classmethod
    def argv(cls):
        cls.ENV = dict(os.environ, HOME=os.path.join(cls.tmp, "home"))
        cls.ENV.pop("JITDUMPDIR", None)
        cls.ENV.pop("TESTJIT_DIR", None)
        return [built(TESTJIT), "run", "-c", "-m", str(cls.MS)]

    def check_top(self, ref):
        jit = {k[1] for k in ref if k[0] == "[jit]"}
        self.assertEqual(jit, {"jit_spin_a", "jit_spin_b", "jit_spin_c",
                               "jit_spin_cfi"}, ref)


class LivePipeTestjit(_Testjit, unittest.TestCase):
    """The MOVE comes in a later read than its LOAD (inject.c's
    live_wanted gives that read the LOAD again)."""
    MODE = "fp"
    MS = 1000       # the dump surely read once before the MOVE is written


class LivePipeInlinejit(_Pipe, unittest.TestCase):
    """inlinejit (tests/jit/inlinejit.c): one function with INLINE_INFO."""
    PROGRAM = "inlinejit"

    @classmethod
    def argv(cls):
        return [built(INLINEJIT), ".", "600"]

    def check_top(self, ref):
        top = max(ref.items(), key=lambda kv: kv[1])
        self.assertEqual(top[0], ("[jit]", "jit_outer"), ref)


def inject_in_reads(tc, dump, whole, cuts, parts, out, quiet=True):
    """perfgraft inject -i - -o OUT, its pipe fed parts[k] while the dump
    holds whole[:cuts[k]] (a read made meanwhile), then the rest: each
    part starts with the one before it, the last dump part runs to the
    end.  -> its stderr; exit 0 asserted."""
    for k in range(1, len(parts)):
        tc.assertEqual(parts[k][:len(parts[k - 1])], parts[k - 1])
    cuts = list(cuts) + [len(whole)]
    with open(dump, "wb") as f:
        f.write(whole[:cuts[0]])
    with open(out, "wb") as o:
        p = subprocess.Popen([pf.PERFGRAFT, "inject"] + ["-q"] * quiet +
                             ["-N", "-i", "-", "-o", "-"],
                             cwd=os.path.dirname(out), stdin=subprocess.PIPE, stdout=o,
                             stderr=subprocess.PIPE)
        try:
            p.stdin.write(parts[0])
            p.stdin.flush()
            for k in range(1, len(parts)):
                time.sleep(0.5)
                with open(dump, "ab") as f:
                    f.write(whole[cuts[k - 1]:cuts[k]])
                time.sleep(0.1)
                p.stdin.write(parts[k][len(parts[k - 1]):])
                p.stdin.flush()
            p.stdin.close()
            err = p.stderr.read().decode("utf-8", "replace")
        finally:
            p.wait(timeout=pf.TIMEOUT)
    tc.assertEqual(p.returncode, 0, err)
    return err


class LiveAnonMap(unittest.TestCase):
    """A JIT maps a page executable before it writes the LOAD of the code
    in it (testjit: one //anon map over two threads' pages, after the
    dump's first LOAD).  File mode drops such a map; a live read must too,
    or it hides the code mapped before it (LivePipeTestjit lost every
    function's samples but the MOVEd one's when the map went out before
    the dump was read).  Made here, step by step: the map goes through
    while the dump has no LOAD yet, then the LOADs are written."""
    PID = 6262
    T0 = 1_000_000_000
    P1, P2 = 0x7f0000200000, 0x7f0000201000

    def setUp(self):
        if not shutil.which(pf.PERF):
            self.skipTest("perf not installed")
        self.d = tempfile.mkdtemp(prefix="pg-live-anon-")
        self.addCleanup(shutil.rmtree, self.d, True)

    def records(self, b, part, before_marker=False):
        pid, t0 = self.PID, self.T0
        dump = os.path.join(self.d, "jit-%d.dump" % pid)
        b.comm(pid, pid, "jit", t0 - 3_000_000)
        if before_marker:
            # a pipe's records come from several CPUs' buffers: the map can
            # come before the dump's marker, while no dump is known yet
            b.mmap2(pid, pid, self.P1, 0x2000, self.P1, "//anon", t0 + 1_000_000, prot=5)
        b.mmap2(pid, pid, 0x10000, 4096, 0, dump, t0 - 2_000_000, prot=5, role="marker")
        b.mmap2(pid, pid, self.P1, 0x1000, self.P1, "//anon", t0 - 100_000, prot=5)
        # both pages, after the first LOAD, before the second
        if not before_marker:
            b.mmap2(pid, pid, self.P1, 0x2000, self.P1, "//anon", t0 + 1_000_000, prot=5)
        if part == 1:
            return
        b.sample(self.P1 + 8, pid, pid, t0 + 3_000_000)
        b.sample(self.P2 + 8, pid, pid, t0 + 4_000_000)
        b.finished_round()

    def test_map_before_its_load_dropped_as_in_file_mode(self):
        self.check(False)

    def test_map_before_the_marker_undone(self):
        self.check(True)

    def check(self, before_marker):
        pid, t0 = self.PID, self.T0
        jd = jg.JitdumpBuilder(pid=pid)
        jd.load(b"jit_a", jg.x86_64_code(0x40, 1), self.P1, 1, timestamp=t0)
        jd.load(b"jit_b", jg.x86_64_code(0x40, 2), self.P2, 2, timestamp=t0 + 2_000_000)
        whole = jd.to_bytes()
        hsize = int.from_bytes(whole[8:12], "little")
        parts = []
        for part in (1, 2):
            b = pg.PerfDataBuilder(attrs=[pg.Attr(ids=[7])], pipe=True)
            self.records(b, part, before_marker)
            parts.append(b.to_bytes())
        dump = os.path.join(self.d, "jit-%d.dump" % pid)
        out = os.path.join(self.d, "live-%d.data" % before_marker)
        # the map read, and the dump (a header) read, before the LOADs
        err = inject_in_reads(self, dump, whole, [hsize], parts, out)
        r = subprocess.run([pf.PERF, "--buildid-dir", os.path.join(self.d, "debug"), "script",
                            "-i", out, "-F", "ip,sym", "--hide-call-graph"], cwd=self.d,
                           capture_output=True, text=True, timeout=pf.TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [ln.split()[1] for ln in r.stdout.splitlines() if len(ln.split()) > 1]
        self.assertEqual(got, ["jit_a", "jit_b"], r.stdout + err)


class LiveTables(unittest.TestCase):
    """A live read's memory images put their unwind tables right after
    their region's code, where the JIT may place code a later read finds
    (node: fib right after the script's first functions).  An image's
    tables map must never hide code, whichever read came first:
      later   a later read's code where an earlier read's tables are,
              its map starting (pg_code_since) before those tables' map;
      earlier a later read's tables over an earlier read's code.
    Made step by step as LiveAnonMap is: the dump grows between reads of
    it (a sample waits for it); samples after the reads must name the
    code at their address."""
    PID = 6363
    T0 = 1_000_000_000
    Z, P = 0x7f0000400000, 0x7f0000200000   # two regions: Z's LOAD first

    def setUp(self):
        if not shutil.which(pf.PERF):
            self.skipTest("perf not installed")
        self.d = tempfile.mkdtemp(prefix="pg-live-tables-")
        self.addCleanup(shutil.rmtree, self.d, True)

    def run_reads(self, reads, samples, quiet=True, anon=None):
        """reads: what the dump holds at each read, in turn (see
        JitdumpBuilder.add_reads); samples: [(ip, time)]; anon: (start,
        len, time) of an executable anonymous map that comes before the
        dump's marker.  -> (the symbols perf script names at those times,
        its MMAP2 count, a log)."""
        pid, t0 = self.PID, self.T0
        jd = jg.JitdumpBuilder(pid=pid)
        ends, last = jd.add_reads(reads)
        cuts = ends[:-1]
        whole = jd.to_bytes()
        dump = os.path.join(self.d, "jit-%d.dump" % pid)
        parts = []
        for r in range(len(reads)):
            b = pg.PerfDataBuilder(attrs=[pg.Attr(ids=[7])], pipe=True)
            b.comm(pid, pid, "jit", t0 - 3_000_000)
            if anon:
                b.mmap2(pid, pid, anon[0], anon[1], anon[0], "//anon", anon[2], prot=5)
            b.mmap2(pid, pid, 0x10000, 4096, 0, dump, t0 - 2_000_000, prot=5, role="marker")
            # after each read's records, a sample that waits for the dump
            # (so that it is read again once it grew)
            for k in range(r + 1):
                b.sample(0x1000, pid, pid, last[k] + 1)
            if r == len(reads) - 1:
                for ip, t in samples:
                    b.sample(ip, pid, pid, t)
                b.finished_round()
            parts.append(b.to_bytes())
        out = os.path.join(self.d, "live.data")
        err = inject_in_reads(self, dump, whole, cuts, parts, out, quiet)
        r = subprocess.run([pf.PERF, "--buildid-dir", os.path.join(self.d, "debug"), "script",
                            "-i", out, "--ns", "--show-mmap-events", "-F", "time,ip,sym",
                            "--hide-call-graph"],
                           cwd=self.d, capture_output=True, text=True, timeout=pf.TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stderr)
        for k in range(1, len(reads)):
            self.assertIn("-part%d-" % k, r.stdout, "a set of images per read")
        by_time = {}
        for ln in r.stdout.splitlines():
            w = ln.split()
            if len(w) >= 3 and not w[1].startswith("PERF_RECORD_"):
                by_time[w[0].rstrip(":")] = w[2]
        names = [by_time.get("%d.%09d" % (t // 10**9, t % 10**9), "?") for _, t in samples]
        return names, r.stdout.count("PERF_RECORD_MMAP2"), r.stdout + err

    def test_later_code_over_earlier_tables(self):
        t0, p, z = self.T0, self.P, self.Z
        got, _, log = self.run_reads([
            [("jit_z", z, t0), ("jit_a", p, t0 + 500_000)],
            # right after jit_a: where the first read's tables went; its
            # range never held code, so its map starts at the dump's
            # first LOAD (t0), before the first read's tables (t0 + 0.5 ms)
            [("jit_b", p + 0x90, t0 + 2_000_000)]],
            [(p + 0x90 + 8, t0 + 3_000_000), (p + 0x90 + 0x30, t0 + 3_100_000),
             (p + 8, t0 + 4_000_000), (z + 8, t0 + 5_000_000)])
        self.assertEqual(got, ["jit_b", "jit_b", "jit_a", "jit_z"], log)

    def test_later_tables_over_earlier_code(self):
        t0, p, z = self.T0, self.P, self.Z
        got, _, log = self.run_reads([
            [("jit_z", z, t0), ("jit_a", p, t0 + 500_000)],
            # right below jit_a, a region of its own in the second read:
            # its tables go where jit_a is
            [("jit_c", p - 0x90, t0 + 2_000_000)]],
            [(p + 8, t0 + 3_000_000), (p + 0x30, t0 + 3_100_000),
             (p - 0x90 + 8, t0 + 4_000_000), (z + 8, t0 + 5_000_000)])
        self.assertEqual(got, ["jit_a", "jit_a", "jit_c", "jit_z"], log)

    def test_tables_over_code_under_an_anon_map(self):
        """The JIT's executable anonymous map over both reads' code went
        out before the dump's marker (a pipe's records from several
        CPUs): each read's maps under it are written again at its time
        (rehide_anons), the second read's tables among them, which must
        not hide the first read's code there either."""
        t0, p, z = self.T0, self.P, self.Z
        got, _, log = self.run_reads([
            [("jit_z", z, t0), ("jit_a", p, t0 + 500_000)],
            [("jit_c", p - 0x90, t0 + 2_000_000)]],
            [(p + 8, t0 + 3_000_000), (p + 0x30, t0 + 3_100_000),
             (p - 0x90 + 8, t0 + 4_000_000), (z + 8, t0 + 5_000_000)],
            anon=(p - 0x1000, 0x2000, t0 + 2_500_000))
        self.assertEqual(got, ["jit_a", "jit_a", "jit_c", "jit_z"], log)

    def test_own_time_rewrites_first(self):
        """The budget goes to the tables' own time first: with it too
        small for both, the group at an anonymous map's later time is
        the one left out (with the warning), not the one from the
        tables' time to the anonymous map's."""
        t0, p, z = self.T0, self.P, self.Z
        tiny = [("tiny_%d" % i, p + i, t0 + 1000 + i, 1, False) for i in range(80)]
        got, _, log = self.run_reads(
            [[("jit_z", z, t0)] + tiny, [("jit_c", p - 0x90, t0 + 1_500_000)]],
            [(p + 8, t0 + 2_000_000), (p - 0x90 + 8, t0 + 4_000_000)],
            quiet=False, anon=(p - 0x1000, 0x2000, t0 + 2_500_000))
        self.assertEqual(got, ["tiny_8", "jit_c"], log)
        self.assertIn("over each other's code more than", log)

    def test_rewrites_bounded(self):
        """Reads that put their tables over the same code again and again
        (here 80 one-byte functions, each read's code replacing the last
        one's right below them): the maps written again stay within the
        maps the reads gave, a group all or none, with a warning; not one
        more set of them per read."""
        t0, p, z = self.T0, self.P, self.Z
        tiny = [("tiny_%d" % i, p + i, t0 + 1000 + i, 1, False) for i in range(80)]
        reads = [[("jit_z", z, t0)] + tiny]
        for k in range(3):
            t = t0 + (k + 1) * 1_000_000
            read = [("jit_c%d" % k, p - 0x90, t + 500)]
            if k:   # the one before it is gone (LOAD indexes count from 1)
                read.insert(0, ("UNLOAD", p - 0x90, t, 0x40, 81 + k))
            reads.append(read)
        # (past the bound, the tables of the third read, at jit_c0's time
        # since that read takes jit_c0 again for its UNLOAD, hide the tiny
        # functions from then on: the warning says so)
        got, nmaps, log = self.run_reads(
            reads, [(p + 8, t0 + 500_000), (p - 0x90 + 8, t0 + 3_600_000)], quiet=False)
        self.assertEqual(got, ["tiny_8", "jit_c2"], log)
        self.assertIn("over each other's code more than", log)
        # the maps the reads give: jit_z's code and tables, the 80; each
        # later read its function and tables, and from the third on the
        # function its UNLOAD names again (a read takes it again) with
        # its tables
        given = 2 + 80 + 2 + 4 + 4
        # read 2's tables: the 80 written again; the next reads' groups
        # of 80 are over what the budget has left: none of either (half
        # a group could let an older map hide a newer one)
        self.assertEqual(nmaps, given + 80, log)
        self.assertLessEqual(nmaps, 2 * given)


if __name__ == "__main__":
    unittest.main()
