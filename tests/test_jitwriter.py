#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tests of the library's jitdump writer (include/perfgraft/jitwriter.h)
through tests/jit/testjit.c, a small x86-64 JIT built beside perfgraft
(<builddir>/tests/testjit, builddir = dirname($PERFGRAFT)).

  a  RecordedRun: `perf record -k mono -e cpu-clock` of `testjit run`
     (four JIT functions run from two threads, one of them moved), then
     `perfgraft inject`: perf report names every function with samples,
     perf script shows testjit.src:<line> with a line emitted for that
     function, the moved copy is named at its new address, the samples of
     a function come after its LOAD's time (same clock), and perf recorded
     the dump's executable one-page marker mmap.
  b  RecordedRun.test_dump_*: perfgraft dump --json of the same dump:
     header, record sequence, CLOCK_MONOTONIC times between clock readings
     taken before and after the run, unique code_index, groups
     (DEBUG_INFO [UNWINDING_INFO] LOAD) contiguous, two writer threads.
  c  Flood: 2 threads writing in a loop: a complete dump with every group
     intact; SIGKILLed mid-flood: the dump reads (exit 0) with at most a
     truncated-tail warning, every complete record present; cut copies.
  d  DumpDir: explicit directory, -c (cwd), $JITDUMPDIR and $HOME per
     perf's JVMTI agent convention, "." fallback, errors.
  e  Unwind: with --call-graph dwarf, samples in the frameless
     jit_spin_cfi unwind to its caller through the UNWINDING_INFO tables;
     without them (testjit -u, negative control) they do not.
  f  SelfTest: testjit selftest (C-level API checks).
  g  TwoWriters: a second writer on the same dump (testjit twice: in the
     same process, as an agent loaded twice; a lock held by another
     process) is refused with one message and the first writer's dump is
     whole; a dump no writer holds (a crashed process's) is replaced.

perf is always run as `perf --buildid-dir TMP/debug ...` (record with
-N), HOME and JITDUMPDIR point into temporary directories: ~/.debug is
never touched.  Everything happens in tempfile directories that are
removed afterwards (PERFGRAFT_KEEP_TMP=1 keeps them).  Tests that need
perf are skipped only when `perf record -e cpu-clock` cannot run here.
"""

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PERF = os.environ.get("PERF", "perf")
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
BUILDDIR = os.path.dirname(os.path.abspath(PERFGRAFT))
TESTJIT = os.path.join(BUILDDIR, "tests", "testjit")
KEEP_TMP = os.environ.get("PERFGRAFT_KEEP_TMP") == "1"
TIMEOUT = 300
PAGE = os.sysconf("SC_PAGE_SIZE")
MONO = time.CLOCK_MONOTONIC
FUNCS = ("jit_spin_a", "jit_spin_b", "jit_spin_c", "jit_spin_cfi")
SRC = "testjit.src"
LOAD, MOVE, DEBUG_INFO, CLOSE, UNWINDING_INFO = 0, 1, 2, 3, 4
EM_X86_64 = 62


def shell(cmd):
    return " ".join(cmd)


def run(cmd, cwd=None, env=None, check=True, timeout=TIMEOUT):
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    out = p.stdout.decode("utf-8", "surrogateescape")
    err = p.stderr.decode("utf-8", "surrogateescape")
    if check and p.returncode != 0:
        raise AssertionError("command failed (exit %d): %s\n(cwd %s)\nstderr:\n%s"
                             % (p.returncode, shell(cmd), cwd, err[-3000:]))
    return p.returncode, out, err


def perf(buildid_dir, sub, *args):
    return [PERF, "--buildid-dir", buildid_dir, sub] + list(args)


def base_env(tmp):
    """The environment for testjit: HOME and JITDUMPDIR never the user's."""
    env = dict(os.environ)
    env.pop("JITDUMPDIR", None)
    env.pop("TESTJIT_DIR", None)
    env["HOME"] = os.path.join(tmp, "home")
    os.makedirs(env["HOME"], exist_ok=True)
    return env


def mkdtemp(tag):
    d = tempfile.mkdtemp(prefix="perfgraft-jitwriter-%s." % tag)
    if KEEP_TMP:
        sys.stderr.write("info: keeping %s\n" % d)
    return d


def rmtree(d):
    if d and not KEEP_TMP:
        shutil.rmtree(d, ignore_errors=True)


_perf_problem = None


def perf_problem():
    """None when `perf record -e cpu-clock -k mono` works here, else why."""
    global _perf_problem
    if _perf_problem is not None:
        return _perf_problem or None
    why = ""
    if shutil.which(PERF) is None:
        why = "perf (%s) not found" % PERF
    else:
        d = tempfile.mkdtemp(prefix="perfgraft-jitwriter-perfcheck.")
        try:
            cmd = perf(os.path.join(d, "debug"), "record", "-N", "-q", "-k",
                       "mono", "-e", "cpu-clock", "-o",
                       os.path.join(d, "p.data"), "--", "true")
            try:
                rc, _, err = run(cmd, cwd=d, check=False, timeout=60)
            except (OSError, subprocess.TimeoutExpired) as e:
                rc, err = -1, str(e)
            if rc != 0 or not os.path.isfile(os.path.join(d, "p.data")):
                why = "`%s` does not work here (exit %d): %s" % (
                    shell(cmd), rc, err.strip()[-300:])
        finally:
            shutil.rmtree(d, ignore_errors=True)
    _perf_problem = why
    return why or None


def setUpModule():
    for f in (PERFGRAFT, TESTJIT):
        if not os.access(f, os.X_OK):
            raise AssertionError("%s is not built (meson setup BUILD && ninja -C "
                                 "BUILD; PERFGRAFT=BUILD/perfgraft)" % f)
    p = subprocess.run([TESTJIT], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if p.returncode == 77:
        raise unittest.SkipTest("testjit generates x86-64 code only")


def need_perf():
    why = perf_problem()
    if why:
        raise unittest.SkipTest("perf record -e cpu-clock cannot run here: " + why)


# ---------------------------------------------------------------------------
# Parsers

class JitRun:
    """testjit's stdout."""

    def __init__(self, text):
        self.pid = None
        self.dump = None
        self.marker = None
        self.funcs = {}     # name -> dict(addr, size, index, rows [(line, addr)], cfi)
        self.move = None    # dict(index, old, new, size)
        for ln in text.splitlines():
            w = ln.split()
            if not w:
                continue
            if w[0] == "pid":
                self.pid = int(w[1])
            elif w[0] == "dump":
                self.dump = ln.split(" ", 1)[1]
            elif w[0] == "marker":
                self.marker = ln.split(" ", 1)[1]
            elif w[0] == "func":
                rows = [(int(a), int(b, 16)) for a, b in
                        (r.split(":") for r in w[5].split(","))]
                self.funcs[w[1]] = dict(addr=int(w[2], 16), size=int(w[3]),
                                        index=int(w[4]), rows=rows,
                                        cfi=len(w) > 6 and w[6] == "cfi")
            elif w[0] == "move":
                self.move = dict(index=int(w[1]), old=int(w[2], 16),
                                 new=int(w[3], 16), size=int(w[4]))


def parse_marker(line):
    """A /proc/PID/maps line -> (start, end, perms, path)."""
    m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s+(.*)$", line)
    if not m:
        raise AssertionError("not a maps line: %r" % line)
    return int(m.group(1), 16), int(m.group(2), 16), m.group(3), m.group(4)


_REPORT_ROW = re.compile(r"^\s*(\d+\.\d+)%\s+(\d+)\s+\[(.)\]\s(.*?)\s*$")


def parse_report(text):
    """perf report --stdio --no-children --sort sym -n -> {sym: samples}."""
    out = {}
    for ln in text.splitlines():
        if ln.startswith("#"):
            continue
        m = _REPORT_ROW.match(ln)
        if m:
            out[m.group(4)] = out.get(m.group(4), 0) + int(m.group(2))
    return out


_SCRIPT_SAMPLE = re.compile(
    r"^\s*(\d+)\s+(\d+)\.(\d{9}):\s+([0-9a-f]+)\s+(.*?)\s*$")


def parse_script(text):
    """perf script -F tid,time,ip,sym,srcline --ns ->
    [dict(tid, time, ip, sym, srcline or None)]; perf prints the srcline on
    its own line (two leading spaces) after the sample."""
    out = []
    for ln in text.splitlines():
        if not ln.strip():
            continue
        if re.match(r"^  \S", ln) and out and out[-1]["srcline"] is None \
                and not _SCRIPT_SAMPLE.match(ln):
            out[-1]["srcline"] = ln.strip()
            continue
        m = _SCRIPT_SAMPLE.match(ln)
        if m:
            out.append(dict(tid=int(m.group(1)),
                            time=int(m.group(2)) * 10**9 + int(m.group(3)),
                            ip=int(m.group(4), 16), sym=m.group(5),
                            srcline=None))
    return out


def dump_json(path, check_rc=True):
    rc, out, err = run([PERFGRAFT, "dump", "--json", path], check=False)
    if check_rc and rc != 0:
        raise AssertionError("perfgraft dump --json %s: exit %d\n%s"
                             % (path, rc, err[-2000:]))
    try:
        return rc, json.loads(out), err
    except ValueError as e:
        raise AssertionError("perfgraft dump --json %s: not JSON (%s): %r"
                             % (path, e, out[:500]))


def check_groups(tc, records, max_tail=0):
    """Every DEBUG_INFO / UNWINDING_INFO is followed, within its group, by
    the LOAD it belongs to: same code_addr (DEBUG_INFO) and the same
    timestamp (one group, one time), nothing else in between.  A group may
    be unfinished only at the very end (max_tail records).  Returns the
    LOAD records."""
    loads = []
    pending = []
    for i, r in enumerate(records):
        t = r["id"]
        if t in (DEBUG_INFO, UNWINDING_INFO):
            if pending:
                tc.assertNotEqual(pending[-1]["id"], UNWINDING_INFO,
                                  "UNWINDING_INFO at %d followed by %s at %d"
                                  % (pending[-1]["offset"], r["type"], r["offset"]))
                tc.assertNotEqual(pending[-1]["id"], t,
                                  "two %s in a row (offsets %d, %d): groups mixed"
                                  % (r["type"], pending[-1]["offset"], r["offset"]))
            pending.append(r)
            continue
        if t == LOAD:
            for p in pending:
                tc.assertEqual(p["timestamp"], r["timestamp"],
                               "%s at %d and LOAD at %d are not one group"
                               % (p["type"], p["offset"], r["offset"]))
                if p["id"] == DEBUG_INFO:
                    tc.assertEqual(p["code_addr"], r["code_addr"],
                                   "DEBUG_INFO at %d is for 0x%x, the LOAD after "
                                   "it (%d) for 0x%x" % (p["offset"], p["code_addr"],
                                                         r["offset"], r["code_addr"]))
            r = dict(r)
            r["group"] = [p["id"] for p in pending]
            loads.append(r)
            pending = []
            continue
        tc.assertEqual(pending, [], "%s at %d splits a group" % (r["type"], r["offset"]))
    tc.assertLessEqual(len(pending), max_tail,
                       "unfinished group at the end: %s" % pending)
    return loads


def check_times(tc, header, records, t_end):
    last = header["timestamp"]
    for r in records:
        tc.assertGreaterEqual(r["timestamp"], last,
                              "%s at %d: time goes backwards" % (r["type"], r["offset"]))
        tc.assertLessEqual(r["timestamp"], t_end,
                           "%s at %d: time %d is after the run ended (%d): not "
                           "CLOCK_MONOTONIC?" % (r["type"], r["offset"],
                                                 r["timestamp"], t_end))
        last = r["timestamp"]


# ---------------------------------------------------------------------------

class RecordedRun(unittest.TestCase):
    """(a) and (b): one perf recording of `testjit run`."""

    MS = 150

    @classmethod
    def setUpClass(cls):
        need_perf()
        cls.tmp = mkdtemp("run")
        try:
            cls._record()
        except BaseException:
            rmtree(cls.tmp)
            raise

    @classmethod
    def _record(cls):
        cls.dir = os.path.join(cls.tmp, "run")
        cls.debug = os.path.join(cls.tmp, "debug")
        os.makedirs(cls.dir)
        env = base_env(cls.tmp)
        cls.t0 = time.clock_gettime_ns(MONO)
        _, out, _ = run(perf(cls.debug, "record", "-N", "-q", "-k", "mono",
                             "-e", "cpu-clock", "-o", "perf.data", "--",
                             TESTJIT, "run", "-d", cls.dir, "-m", str(cls.MS)),
                        cwd=cls.dir, env=env)
        cls.t1 = time.clock_gettime_ns(MONO)
        cls.jit = JitRun(out)
        run([PERFGRAFT, "inject", "-i", "perf.data", "-o", "perf.jit.data"],
            cwd=cls.dir, env=env)
        _, cls.report_text, _ = run(perf(cls.debug, "report", "-i", "perf.jit.data",
                                         "--stdio", "--no-children", "--sort", "sym",
                                         "-n"), cwd=cls.dir, env=env)
        cls.report = parse_report(cls.report_text)
        _, text, _ = run(perf(cls.debug, "script", "-i", "perf.jit.data", "-F",
                              "tid,time,ip,sym,srcline", "--ns"), cwd=cls.dir, env=env)
        cls.samples = parse_script(text)
        _, cls.mmaps, _ = run(perf(cls.debug, "script", "-i", "perf.data",
                                   "--show-mmap-events"), cwd=cls.dir, env=env)
        _, cls.dump, _ = dump_json(cls.jit.dump)
        with open(cls.jit.dump, "rb") as f:
            cls.raw_header = f.read(40)

    @classmethod
    def tearDownClass(cls):
        rmtree(getattr(cls, "tmp", None))

    # -- (a) -----------------------------------------------------------------

    def test_dump_location(self):
        self.assertEqual(self.jit.dump, os.path.join(self.dir, "jit-%d.dump" % self.jit.pid))
        self.assertTrue(os.path.isfile(self.jit.dump))

    def test_marker_mmap(self):
        start, end, perms, path = parse_marker(self.jit.marker)
        self.assertEqual((perms, end - start, path), ("r-xp", PAGE, self.jit.dump))
        # and perf record saw it: the MMAP2 event inject looks for
        pat = re.compile(r"PERF_RECORD_MMAP2? %d/\d+: \[0x[0-9a-f]+\(0x%x\) @ 0 .*\]: "
                         r"r-xp %s$" % (self.jit.pid, PAGE, re.escape(self.jit.dump)))
        hits = [ln for ln in self.mmaps.splitlines() if pat.search(ln)]
        self.assertEqual(len(hits), 1, "perf script --show-mmap-events lines for the "
                         "dump:\n%s" % "\n".join(ln for ln in self.mmaps.splitlines()
                                                 if "jit-" in ln))

    def test_report_names_functions(self):
        total = sum(self.report.values())
        for name in FUNCS:
            n = self.report.get(name, 0)
            # each ran MS ms per thread: about a fifth of the samples
            self.assertGreaterEqual(n, max(10, total // 20),
                                    "%s: %d of %d samples\n%s"
                                    % (name, n, total, self.report_text[-3000:]))
        jit = sum(self.report.get(n, 0) for n in FUNCS)
        self.assertGreater(jit, total // 2, self.report_text[-3000:])

    def test_srclines(self):
        for name in FUNCS:
            lines = {ln for ln, _ in self.jit.funcs[name]["rows"]}
            mine = [s for s in self.samples if s["sym"] == name]
            self.assertTrue(mine, "no sample named %s" % name)
            seen = {}
            for s in mine:
                m = re.fullmatch(r"(.*):(\d+)", s["srcline"] or "")
                self.assertTrue(m, "%s sample at 0x%x has srcline %r"
                                % (name, s["ip"], s["srcline"]))
                self.assertEqual(os.path.basename(m.group(1)), SRC)
                ln = int(m.group(2))
                self.assertIn(ln, lines, "%s sample at 0x%x shows line %d, emitted "
                              "%s" % (name, s["ip"], ln, sorted(lines)))
                seen[ln] = seen.get(ln, 0) + 1
            # the loop body (base+2) is where the time goes
            base = min(lines)
            self.assertGreater(seen.get(base + 2, 0) + seen.get(base + 3, 0),
                               len(mine) // 2, "%s: lines %s" % (name, seen))
            # the row each ip falls in is the one perf names
            rows = sorted((a, ln) for ln, a in self.jit.funcs[name]["rows"])
            for s in mine:
                off = None
                f = self.jit.funcs[name]
                if f["addr"] <= s["ip"] < f["addr"] + f["size"]:
                    off = s["ip"]
                elif self.jit.move and name == "jit_spin_a" and \
                        self.jit.move["new"] <= s["ip"] < self.jit.move["new"] + f["size"]:
                    off = s["ip"] - self.jit.move["new"] + f["addr"]
                self.assertIsNotNone(off, "%s sample at 0x%x outside its code" % (name, s["ip"]))
                want = [ln for a, ln in rows if a <= off][-1]
                self.assertEqual(s["srcline"].rsplit(":", 1)[1], str(want),
                                 "%s at 0x%x" % (name, s["ip"]))

    def test_moved_function(self):
        mv = self.jit.move
        a = self.jit.funcs["jit_spin_a"]
        self.assertEqual((mv["index"], mv["old"], mv["size"]),
                         (a["index"], a["addr"], a["size"]))
        at_new = [s for s in self.samples if mv["new"] <= s["ip"] < mv["new"] + mv["size"]]
        self.assertGreaterEqual(len(at_new), 10, "samples at the moved copy: %d" % len(at_new))
        self.assertEqual({s["sym"] for s in at_new}, {"jit_spin_a"})
        self.assertEqual({s["tid"] for s in at_new}, {self.jit.pid},
                         "the main thread runs the moved copy")

    def test_samples_after_their_load(self):
        """The LOAD times are on perf's -k mono clock: every sample of a
        function comes after its LOAD (moved copy: after its MOVE)."""
        loads = {r["name"]: r["timestamp"] for r in self.dump["records"] if r["id"] == LOAD}
        move_t = [r["timestamp"] for r in self.dump["records"] if r["id"] == MOVE][0]
        close_t = [r["timestamp"] for r in self.dump["records"] if r["id"] == CLOSE][0]
        mv = self.jit.move
        for s in self.samples:
            if s["sym"] not in loads:
                continue
            t = move_t if mv["new"] <= s["ip"] < mv["new"] + mv["size"] else loads[s["sym"]]
            self.assertGreater(s["time"], t, "%s sample at %d before its record (%d)"
                               % (s["sym"], s["time"], t))
            self.assertLess(s["time"], close_t)

    def test_perf_inject_reference(self):
        """perf's own `perf inject --jit` reads the dump too, and perf
        report / script then say exactly what they say on perfgraft's
        output."""
        env = base_env(self.tmp)
        run(perf(self.debug, "inject", "--jit", "-i", "perf.data", "-o", "perf.ref.data"),
            cwd=self.dir, env=env)
        _, text, _ = run(perf(self.debug, "report", "-i", "perf.ref.data", "--stdio",
                              "--no-children", "--sort", "sym", "-n"),
                         cwd=self.dir, env=env)
        ref = parse_report(text)
        self.assertEqual({n: ref.get(n) for n in FUNCS},
                         {n: self.report.get(n) for n in FUNCS})
        _, text, _ = run(perf(self.debug, "script", "-i", "perf.ref.data", "-F",
                              "tid,time,ip,sym,srcline", "--ns"), cwd=self.dir, env=env)

        mv = self.jit.move

        def after_last_row(s):
            """perf inject's line table ends AT the last DEBUG_INFO entry
            (perf's genelf_debug.c), so its images give no line past it; perfgraft's
            last row runs to the function's end.  Both are then counted as
            'past the last row' when ours names that row's line."""
            f = self.jit.funcs[s["sym"]]
            base = mv["new"] if mv["new"] <= s["ip"] < mv["new"] + mv["size"] else f["addr"]
            line, at = max(f["rows"], key=lambda r: r[1])
            return s["ip"] - base >= at - f["addr"], "%s:%d" % (SRC, line)

        def key(samples, ref):
            out = []
            for s in samples:
                if s["sym"] not in FUNCS:
                    continue
                past, last = after_last_row(s)
                src = s["srcline"]
                if past and src == (None if ref else last):
                    src = "past the last row"
                out.append((s["time"], s["ip"], s["sym"], src))
            return sorted(out)
        self.assertEqual(key(parse_script(text), True), key(self.samples, False))

    # -- (b) -----------------------------------------------------------------

    def test_dump_header(self):
        h = self.dump["header"]
        self.assertEqual(self.raw_header[:4], b"DTiJ")      # 0x4A695444, LE
        self.assertEqual((h["version"], h["total_size"], h["elf_mach"], h["pad1"],
                          h["pid"], h["flags"], h["byte_order"], h["class"]),
                         (1, 40, EM_X86_64, 0, self.jit.pid, 0, "little", 64))
        self.assertTrue(self.t0 <= h["timestamp"] <= self.t1,
                        "header time %d not in [%d, %d]" % (h["timestamp"], self.t0, self.t1))
        self.assertEqual(self.dump["warnings"], [])
        self.assertIsNone(self.dump["error"])

    def test_dump_records(self):
        recs = self.dump["records"]
        counts = {}
        for r in recs:
            counts[r["type"]] = counts.get(r["type"], 0) + 1
        self.assertEqual(counts, {"LOAD": 4, "DEBUG_INFO": 4, "UNWINDING_INFO": 1,
                                  "MOVE": 1, "CLOSE": 1})
        self.assertEqual(recs[-1]["type"], "CLOSE")
        self.assertEqual(self.dump["summary"]["truncated_bytes"], 0)
        check_times(self, self.dump["header"], recs, self.t1)
        for r in recs:
            self.assertGreaterEqual(r["timestamp"], self.t0)
        loads = check_groups(self, recs)
        idx = [l["code_index"] for l in loads]
        self.assertEqual(sorted(idx), [1, 2, 3, 4], "code_index values %s" % idx)
        by_name = {l["name"]: l for l in loads}
        self.assertEqual(set(by_name), set(FUNCS))
        for name, f in self.jit.funcs.items():
            l = by_name[name]
            self.assertEqual((l["code_addr"], l["vma"], l["code_size"], l["code_index"],
                              l["pid"]),
                             (f["addr"], f["addr"], f["size"], f["index"], self.jit.pid))
            self.assertEqual(l["group"], [DEBUG_INFO, UNWINDING_INFO] if f["cfi"]
                             else [DEBUG_INFO], name)
        dbg = {r["code_addr"]: r for r in recs if r["id"] == DEBUG_INFO}
        for name, f in self.jit.funcs.items():
            rows = [(e["line"], e["addr"], e["file"], e["discrim"])
                    for e in dbg[f["addr"]]["lines"]]
            self.assertEqual(rows, [(ln, a, SRC, 0) for ln, a in f["rows"]], name)
        uw = [r for r in recs if r["id"] == UNWINDING_INFO][0]
        self.assertEqual(uw["mapped_size"], uw["unwinding_size"])
        self.assertFalse(uw["dropped"])
        # two writer threads, neither of them the main thread
        tids = {l["tid"] for l in loads}
        self.assertEqual(len(tids), 2, "LOAD tids %s" % tids)
        self.assertNotIn(self.jit.pid, tids)
        mv = [r for r in recs if r["id"] == MOVE][0]
        a = by_name["jit_spin_a"]
        self.assertGreater(mv["offset"], a["offset"])
        self.assertEqual((mv["code_index"], mv["old_code_addr"], mv["new_code_addr"],
                          mv["vma"], mv["code_size"], mv["tid"]),
                         (a["code_index"], a["code_addr"], self.jit.move["new"],
                          self.jit.move["new"], a["code_size"], self.jit.pid))


# ---------------------------------------------------------------------------

class Unwind(unittest.TestCase):
    """(e) --call-graph dwarf through jit_spin_cfi's UNWINDING_INFO."""

    MS = 60

    @classmethod
    def setUpClass(cls):
        need_perf()
        cls.tmp = mkdtemp("unwind")

    @classmethod
    def tearDownClass(cls):
        rmtree(getattr(cls, "tmp", None))

    def callers(self, tag, *flags):
        d = os.path.join(self.tmp, tag)
        debug = os.path.join(self.tmp, "debug")
        os.makedirs(d)
        env = base_env(self.tmp)
        run(perf(debug, "record", "-N", "-q", "-k", "mono", "-e", "cpu-clock",
                 "--call-graph", "dwarf", "-o", "perf.data", "--", TESTJIT, "run",
                 "-d", d, "-m", str(self.MS), *flags), cwd=d, env=env)
        run([PERFGRAFT, "inject", "-i", "perf.data", "-o", "perf.jit.data"], cwd=d,
            env=env)
        _, text, _ = run(perf(debug, "script", "-i", "perf.jit.data", "-F", "ip,sym"),
                         cwd=d, env=env)
        n = good = 0
        for block in text.split("\n\n"):
            frames = [ln.split(None, 1) for ln in block.strip().splitlines()]
            frames = [f[1] if len(f) > 1 else "" for f in frames]
            if frames and frames[0] == "jit_spin_cfi":
                n += 1
                good += len(frames) > 1 and frames[1] == "spin_for"
        shutil.rmtree(d, ignore_errors=True)
        return n, good

    def test_dwarf_unwinding(self):
        n, good = self.callers("cfi")
        self.assertGreaterEqual(n, 10, "samples in jit_spin_cfi: %d" % n)
        self.assertGreaterEqual(good, n * 9 // 10,
                                "%d of %d jit_spin_cfi samples unwind to spin_for" % (good, n))
        # negative control: the same frameless code without its tables
        n2, good2 = self.callers("nocfi", "-u")
        self.assertGreaterEqual(n2, 10)
        self.assertLessEqual(good2, n2 // 2,
                             "without CFI %d of %d still unwind: the test does not "
                             "show the tables are used" % (good2, n2))


# ---------------------------------------------------------------------------

def flood_name(name):
    m = re.fullmatch(r"flood-t(\d)-(\d+)", name)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


class Flood(unittest.TestCase):
    """(c) two threads writing at once; SIGKILL mid-flood."""

    def setUp(self):
        self.tmp = mkdtemp("flood")
        self.env = base_env(self.tmp)

    def tearDown(self):
        rmtree(self.tmp)

    def check_flood(self, d, complete, t_end):
        recs = d["records"]
        check_times(self, d["header"], recs, t_end)
        loads = check_groups(self, recs, max_tail=0 if complete else 2)
        idx = [l["code_index"] for l in loads]
        self.assertEqual(len(set(idx)), len(idx), "code_index not unique")
        self.assertEqual(sorted(idx), list(range(1, len(idx) + 1)),
                         "code_index values are not 1..N")
        seqs = {0: [], 1: []}
        tid_of = {}
        for l in loads:
            t, seq = flood_name(l["name"])
            self.assertIsNotNone(t, l["name"])
            seqs[t].append(seq)
            tid_of.setdefault(t, set()).add(l["tid"])
            self.assertEqual(l["group"], [DEBUG_INFO, UNWINDING_INFO] if seq % 8 == 7
                             else [DEBUG_INFO], l["name"])
        for t in (0, 1):
            # every LOAD of each thread is there, in order, none lost
            self.assertEqual(seqs[t], list(range(len(seqs[t]))), "thread %d" % t)
            # (a killed run may have stopped before a thread got the lock)
            if complete or seqs[t]:
                self.assertGreater(len(seqs[t]), 0, "thread %d wrote nothing" % t)
                self.assertEqual(len(tid_of[t]), 1)
        if complete:
            self.assertNotEqual(tid_of[0], tid_of[1])
        self.per_thread = (len(seqs[0]), len(seqs[1]))
        # a MOVE follows every 16th LOAD of a thread (the last one may be
        # missing when killed), and names a LOAD before it
        by_index = {l["code_index"]: l for l in loads}
        moves = [r for r in recs if r["id"] == MOVE]
        for m in moves:
            l = by_index[m["code_index"]]
            self.assertLess(l["offset"], m["offset"])
            self.assertEqual((m["old_code_addr"], m["new_code_addr"], m["code_size"],
                              m["tid"]),
                             (l["code_addr"], l["code_addr"] + 0x1000, l["code_size"],
                              l["tid"]))
        want = sum(len(s) // 16 for s in seqs.values())
        self.assertIn(len(moves), (want, want - 1, want - 2) if not complete else (want,))
        # the records cover the file
        end = recs[-1]["offset"] + recs[-1]["size"] if recs else 40
        return loads, end

    def test_two_threads(self):
        t0 = time.clock_gettime_ns(MONO)
        _, out, _ = run([TESTJIT, "flood", "-d", self.tmp, "-n", "3000", "-s", "512"],
                        env=self.env)
        t1 = time.clock_gettime_ns(MONO)
        dump = JitRun(out).dump
        _, d, _ = dump_json(dump)
        self.assertEqual(d["warnings"], [])
        self.assertEqual(d["summary"]["loads"], 6000)
        self.assertGreaterEqual(d["header"]["timestamp"], t0)
        _, end = self.check_flood(d, True, t1)
        self.assertEqual(d["records"][-1]["type"], "CLOSE")
        self.assertEqual(end, os.path.getsize(dump))
        # the two threads wrote at the same time (testjit holds each one
        # mid-way until the other has written): their groups interleave,
        # each kept whole by the writer
        names = [flood_name(r["name"])[0] for r in d["records"] if r["id"] == LOAD]
        switches = sum(1 for a, b in zip(names, names[1:]) if a != b)
        self.assertGreater(switches, 1, "the threads' records never alternate")

    def kill_once(self, size_limit):
        d = os.path.join(self.tmp, "k%d" % len(os.listdir(self.tmp)))
        os.makedirs(d)
        p = subprocess.Popen([TESTJIT, "flood", "-d", d, "-s", "65536"],
                             stdout=subprocess.PIPE, env=self.env)
        try:
            info = JitRun(p.stdout.readline().decode() + p.stdout.readline().decode())
            deadline = time.time() + 10
            while time.time() < deadline:
                try:
                    if os.path.getsize(info.dump) >= size_limit:
                        break
                except OSError:
                    pass
                time.sleep(0.001)
            p.send_signal(signal.SIGKILL)
        finally:
            p.wait()
            p.stdout.close()
        t1 = time.clock_gettime_ns(MONO)
        self.assertEqual(p.returncode, -signal.SIGKILL)
        size = os.path.getsize(info.dump)
        rc, dj, err = dump_json(info.dump)
        self.assertEqual(rc, 0, "perfgraft dump of the killed dump: exit %d\n%s" % (rc, err))
        self.assertIsNone(dj["error"])
        trunc = dj["summary"]["truncated_bytes"]
        for w in dj["warnings"]:
            self.assertRegex(w, r"truncat", "unexpected warning: %s" % w)
        self.assertLessEqual(len(dj["warnings"]), 1)
        self.assertEqual(bool(trunc), bool(dj["warnings"]))
        self.assertNotIn("CLOSE", [r["type"] for r in dj["records"]])
        _, end = self.check_flood(dj, False, t1)
        self.assertEqual(end + trunc, size, "records + truncated tail != file size")
        # the tail is less than one group
        self.assertLess(trunc, 65536 + 4096)
        shutil.rmtree(d)
        return trunc, size, self.per_thread

    def test_kill(self):
        """SIGKILL while two threads write 64 KiB records: complete records
        only, plus at most one partial tail (not always hit: the kill
        must land inside a write(2); up to 6 tries)."""
        seen = []
        for i in range(6):
            trunc, size, per_thread = self.kill_once(4 << 20)
            seen.append((size, trunc, per_thread))
            if trunc and i >= 1:
                break
        sys.stderr.write("info: killed flood dumps (size, truncated tail bytes, "
                         "LOADs per thread): %s\n"
                         % seen)

    def test_cut_copies(self):
        """A dump cut anywhere reads (exit 0) with one truncated-tail
        warning and exactly the records that end before the cut."""
        _, out, _ = run([TESTJIT, "flood", "-d", self.tmp, "-n", "40", "-s", "300"],
                        env=self.env)
        dump = JitRun(out).dump
        _, full, _ = dump_json(dump)
        with open(dump, "rb") as f:
            data = f.read()
        recs = full["records"]
        cuts = set()
        for r in recs[1:12]:
            cuts.update((r["offset"] + 1, r["offset"] + 10, r["offset"] + r["size"] - 1))
        cut_path = os.path.join(self.tmp, "cut", os.path.basename(dump))
        os.makedirs(os.path.dirname(cut_path))
        for cut in sorted(cuts):
            with open(cut_path, "wb") as f:
                f.write(data[:cut])
            rc, d, err = dump_json(cut_path)
            self.assertEqual(rc, 0, err)
            want = [r for r in recs if r["offset"] + r["size"] <= cut]
            self.assertEqual([r["offset"] for r in d["records"]],
                             [r["offset"] for r in want], "cut at %d" % cut)
            self.assertEqual(len(d["warnings"]), 1, "cut at %d: %s" % (cut, d["warnings"]))
            self.assertRegex(d["warnings"][0], "truncat")


# ---------------------------------------------------------------------------

class DumpDir(unittest.TestCase):
    """(d) where the dump goes.  HOME and JITDUMPDIR always point into the
    test's temporary directory."""

    def setUp(self):
        self.tmp = mkdtemp("dir")
        self.env = base_env(self.tmp)
        self.home = self.env["HOME"]

    def tearDown(self):
        rmtree(self.tmp)

    def emit(self, *args, env=None, cwd=None):
        _, out, _ = run([TESTJIT, "emit"] + list(args), env=env or self.env,
                        cwd=cwd or self.tmp)
        j = JitRun(out)
        self.assertEqual(os.path.basename(j.dump), "jit-%d.dump" % j.pid)
        self.assertTrue(os.path.isabs(j.dump), j.dump)
        self.assertTrue(os.path.isfile(j.dump))
        start, end, perms, path = parse_marker(j.marker)
        self.assertEqual((perms, end - start, path), ("r-xp", PAGE, j.dump))
        _, d, _ = dump_json(j.dump)
        self.assertEqual(d["warnings"], [])
        self.assertEqual([r["type"] for r in d["records"]],
                         ["DEBUG_INFO", "LOAD", "DEBUG_INFO", "LOAD", "CLOSE"])
        self.assertEqual(d["header"]["pid"], j.pid)
        return j

    def check_convention(self, j, base, prefix="testjit"):
        """base/.debug/jit/<prefix>-YYYYMMDD.XXXXXXXX/jit-PID.dump"""
        d = os.path.dirname(j.dump)
        self.assertEqual(os.path.dirname(d), os.path.join(os.path.realpath(base), ".debug", "jit"))
        m = re.fullmatch(re.escape(prefix) + r"-(\d{8})\.([A-Za-z0-9]{8})", os.path.basename(d))
        self.assertTrue(m, os.path.basename(d))
        days = {time.strftime("%Y%m%d", time.localtime(time.time() + dt))
                for dt in (-120, 0)}
        self.assertIn(m.group(1), days)
        self.assertEqual(os.stat(d).st_mode & 0o777, 0o700)    # mkdtemp
        for sub in (".debug", os.path.join(".debug", "jit")):
            self.assertEqual(os.stat(os.path.join(base, sub)).st_mode & 0o700, 0o700)
        self.assertEqual(os.listdir(d), [os.path.basename(j.dump)])

    def test_explicit_dir(self):
        d = os.path.join(self.tmp, "explicit")
        os.makedirs(d)
        env = dict(self.env, JITDUMPDIR=os.path.join(self.tmp, "jd"))
        j = self.emit("-d", d, env=env)
        self.assertEqual(j.dump, os.path.join(d, "jit-%d.dump" % j.pid))
        self.assertFalse(os.path.exists(env["JITDUMPDIR"]))
        self.assertEqual(os.listdir(self.home), [])
        # relative: from the current directory, made absolute
        j = self.emit("-d", "explicit")
        self.assertEqual(j.dump, os.path.join(os.path.realpath(d), "jit-%d.dump" % j.pid))
        # TESTJIT_DIR is testjit's own stand-in for -d
        j = self.emit(env=dict(self.env, TESTJIT_DIR=d))
        self.assertEqual(os.path.dirname(j.dump), d)

    def test_cwd(self):
        d = os.path.join(self.tmp, "cwd")
        os.makedirs(d)
        j = self.emit("-c", cwd=d, env=dict(self.env, JITDUMPDIR=self.tmp))
        self.assertEqual(j.dump, os.path.join(os.path.realpath(d), "jit-%d.dump" % j.pid))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, ".debug")))

    def test_jitdumpdir(self):
        jd = os.path.join(self.tmp, "jd")
        os.makedirs(jd)
        env = dict(self.env, JITDUMPDIR=jd)
        j1 = self.emit(env=env)
        self.check_convention(j1, jd)
        self.assertEqual(os.listdir(self.home), [], "HOME used although JITDUMPDIR is set")
        j2 = self.emit("-p", "java-jit", env=env)
        self.check_convention(j2, jd, "java-jit")
        self.assertNotEqual(os.path.dirname(j1.dump), os.path.dirname(j2.dump))

    def test_home(self):
        j = self.emit()
        self.check_convention(j, self.home)
        # an empty JITDUMPDIR counts as unset
        j = self.emit(env=dict(self.env, JITDUMPDIR=""))
        self.check_convention(j, self.home)

    def test_no_home(self):
        env = dict(self.env)
        del env["HOME"]
        d = os.path.join(self.tmp, "nohome")
        os.makedirs(d)
        j = self.emit(env=env, cwd=d)
        self.check_convention(j, d)

    def test_errors(self):
        missing = os.path.join(self.tmp, "missing")
        rc, _, err = run([TESTJIT, "emit", "-d", missing], env=self.env, check=False)
        self.assertEqual(rc, 1)
        self.assertIn(missing, err)
        self.assertFalse(os.path.exists(missing))
        rc, _, err = run([TESTJIT, "emit", "-p", "../x"], env=self.env, check=False)
        self.assertEqual(rc, 1)
        self.assertIn("prefix", err)
        self.assertEqual(os.listdir(self.home), [])
        # JITDUMPDIR/.debug is a file: no dump, a message naming it
        jd = os.path.join(self.tmp, "jdfile")
        os.makedirs(jd)
        open(os.path.join(jd, ".debug"), "w").close()
        rc, _, err = run([TESTJIT, "emit"], env=dict(self.env, JITDUMPDIR=jd), check=False)
        self.assertEqual(rc, 1)
        self.assertIn(os.path.join(jd, ".debug"), err)


class TwoWriters(unittest.TestCase):
    """(g) one writer per dump: the writer locks it (flock, which conflicts
    between two opens in one process too).  Until then a second open
    truncated the live dump and both wrote at their own offsets: of 1000
    functions, the second's 500 survived, then garbage, no CLOSE."""

    LOCKED = ("%s: another jitdump writer has this dump open and locked (a second writer "
              "in this process, such as an agent loaded twice, or another process writing "
              "this name); not opened, that writer's dump is left as it is")

    def setUp(self):
        self.tmp = mkdtemp("twice")
        self.env = base_env(self.tmp)

    def tearDown(self):
        rmtree(self.tmp)

    def check_whole(self, dump, names):
        """The dump holds exactly these LOADs in order, then its CLOSE, and
        nothing after it."""
        _, d, _ = dump_json(dump)
        self.assertEqual(d["warnings"], [])
        self.assertIsNone(d["error"])
        loads = [r for r in d["records"] if r["id"] == LOAD]
        self.assertEqual([r["name"] for r in loads], names)
        self.assertEqual([r["code_index"] for r in loads], list(range(1, len(names) + 1)))
        self.assertEqual([r["type"] for r in d["records"]], ["LOAD"] * len(names) + ["CLOSE"])
        last = d["records"][-1]
        self.assertEqual(last["offset"] + last["size"], os.path.getsize(dump))

    def test_same_process(self):
        for extra in ([], ["-N", "code.bin"]):
            with self.subTest(args=extra):
                _, out, err = run([TESTJIT, "twice", "-d", self.tmp, "-n", "1000"] + extra,
                                  env=self.env)
                dump = JitRun(out).dump
                self.check_whole(dump, ["twice-1-%d" % i for i in range(1000)])
                self.assertEqual([ln for ln in out.splitlines() if ln.startswith("second")],
                                 ["second refused %d %s" % (16, self.LOCKED % dump)])  # EBUSY
                self.assertEqual(err, "")
                os.unlink(dump)

    def test_other_process(self):
        """A lock another process holds: refused (exit 1, the message),
        its file untouched.  Released (its writer died: the kernel drops
        the lock), the stale file is replaced by a whole dump."""
        path = os.path.join(self.tmp, "shared.dump")
        junk = b"JiTD" + bytes(range(256)) * 8
        with open(path, "wb") as f:
            f.write(junk)
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            rc, _, err = run([TESTJIT, "emit", "-d", self.tmp, "-N", "shared.dump"],
                             env=self.env, check=False)
            self.assertEqual(rc, 1, err)
            self.assertIn(self.LOCKED % path, err)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), junk)
        finally:
            os.close(fd)
        _, out, _ = run([TESTJIT, "emit", "-d", self.tmp, "-N", "shared.dump"], env=self.env)
        self.assertEqual(JitRun(out).dump, path)
        _, d, _ = dump_json(path)
        self.assertEqual(d["warnings"], [])
        self.assertEqual([r["type"] for r in d["records"]],
                         ["DEBUG_INFO", "LOAD", "DEBUG_INFO", "LOAD", "CLOSE"])


class SelfTest(unittest.TestCase):
    """(f) C-level checks of the API: testjit selftest."""

    def test_selftest(self):
        tmp = mkdtemp("self")
        try:
            rc, out, err = run([TESTJIT, "selftest", tmp], env=base_env(tmp), check=False)
            self.assertEqual(rc, 0, out + err)
            self.assertRegex(out, r"selftest: \d+ checks, 0 failed")
            self.assertEqual(sorted(os.listdir(tmp)), ["home"], "selftest left files")
        finally:
            rmtree(tmp)


if __name__ == "__main__":
    unittest.main()
