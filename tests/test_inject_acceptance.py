#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Acceptance tests of `perfgraft inject` against real perf (perf 6.1).

Each test class records node running tests/fixtures/perf/work.js once
(setUpClass; tests/perf_fixture.py) in its own temporary directory, makes
perf's reference with `perf inject --jit -i perf.data -o perf.ref.data` and
ours with `perfgraft inject -i perf.data -o perf.pg.data`, and compares what
perf report / script / annotate make of the two:

  a  self sample counts per symbol (perf report --no-children --sort sym)
     are identical, JIT symbols included (and there are JIT symbols);
  b  call chains through JIT frames (perf report --children, folded chains)
     are identical: chains under the hottest JIT symbol and all
     caller->callee edges with their counts  [-g recording];
  c  perf script -F ip,sym,srcline shows a JS file:line for a JS: frame;
  d  perf annotate of the hottest JIT function shows sample percentages,
     instruction by instruction the same as on perf's output;
  e  with --call-graph dwarf: mean call-chain length of samples whose leaf
     is JIT code (by address, from the jitdump) is >= perf's  [dwarf];
  f  pipe mode: perf record -o - | perfgraft inject -i - -o - |
     perf report -i - shows JS: symbols  [pipe];
  g  a second perfgraft inject of the same input (other -o) leaves the
     first output's report unchanged  [-g recording];
  h  the image directory holds at most 10 + (functions with CFI) files,
     fewer than perf's jitted-*.so files;
  plus: a missing dump is a warning naming it (exit 0), and ~/.debug is
  left alone (every perf command gets --buildid-dir TMP/debug).

The module is skipped only when `perf record -e cpu-clock` or node does not
work here.  Binary under test: $PERFGRAFT (default build/perfgraft).
A failure message names the comparison, the differing symbols/counts and
the commands; the recordings live in a tempfile directory that is removed
afterwards (set PERFGRAFT_KEEP_TMP=1 to keep it, its path is printed).
"""

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
import jitdump_oracle  # noqa: E402
import perf_fixture as pf  # noqa: E402

MAX_LIST = 25
KEEP_TMP = os.environ.get("PERFGRAFT_KEEP_TMP") == "1"


def setUpModule():
    why = pf.environment_problem()
    if why:
        raise unittest.SkipTest("no usable perf/node here: " + why)


def info(msg):
    sys.stderr.write("info: %s\n" % msg)
    sys.stderr.flush()


def fmt_diffs(diffs, limit=MAX_LIST, width=90):
    """diffs: [(key, perf, ours)] -> text, largest |delta| first."""
    diffs = sorted(diffs, key=lambda d: (-abs((d[1] or 0) - (d[2] or 0)),
                                         str(d[0])))
    lines = ["  %-*s perf %6s  ours %6s"
             % (width, short_key(k, width), a, b)
             for k, a, b in diffs[:limit]]
    if len(diffs) > limit:
        lines.append("  ... %d more" % (len(diffs) - limit))
    return "\n".join(lines)


def short_key(k, width=90):
    if isinstance(k, tuple):
        half = (width - 4) // 2
        return " -> ".join(short_key(x, half) for x in k)
    k = str(k)
    return k if len(k) <= width else k[:width - 3] + "..."


def dict_diffs(ref, ours):
    return [(k, ref.get(k), ours.get(k))
            for k in sorted(set(ref) | set(ours), key=str)
            if ref.get(k) != ours.get(k)]


class _InjectCase:
    """Shared setup and the comparisons that apply to every recording."""

    MODE = None         # "fp" or "dwarf"
    MS = None           # workload duration

    @classmethod
    def setUpClass(cls):
        cls.home_before = pf.home_debug_snapshot()
        cls.tmp = tempfile.mkdtemp(prefix="perfgraft-inject-%s." % cls.MODE)
        if KEEP_TMP:
            info("keeping %s" % cls.tmp)
        cls.buildid = os.path.join(cls.tmp, "debug")
        cls._cache = {}
        try:
            cls.rec = pf.record(os.path.join(cls.tmp, cls.MODE),
                                cls.buildid, cls.MODE, cls.MS)
            cls.ref = pf.perf_inject_reference(cls.rec)
            cls.dump = jitdump_oracle.parse(cls.rec.dump)
        except BaseException:
            cls._cleanup()
            raise
        cls.ours = cls.rec.path("perf.pg.data")
        cls.ours_cmd = [pf.PERFGRAFT, "inject", "-i", "perf.data",
                        "-o", "perf.pg.data"]
        cls.ours_error = None
        try:
            _, _, err, dt = pf.run(cls.ours_cmd, cwd=cls.rec.dir)
            cls.rec.commands.append((pf.shell(cls.ours_cmd), dt))
            cls.ours_stderr = err
        except (pf.CommandError, OSError, subprocess.TimeoutExpired) as e:
            cls.ours_error = "%s\n(cwd %s)" % (e, cls.rec.dir)

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "rec"):
            def label(c):
                w = c.split(" ")
                if c.startswith(pf.PERFGRAFT) or len(w) < 4:
                    return "perfgraft " + (w[1] if len(w) > 1 else "")
                return "perf " + w[3]
            info("%s recording (%s): %s" % (
                cls.MODE, cls.rec.dir, "; ".join(
                    "%s %.1f s" % (label(c), dt)
                    for c, dt in cls.rec.commands)))
        cls._cleanup()

    @classmethod
    def _cleanup(cls):
        if not KEEP_TMP and getattr(cls, "tmp", None):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    # -- helpers -------------------------------------------------------------

    def need_ours(self):
        if self.ours_error:
            self.fail("perfgraft inject failed, nothing to compare:\n%s"
                      % self.ours_error)

    def perf(self, sub, *args, **kw):
        return self.rec.perf(sub, *args, **kw)

    def cmdline(self, sub, *args):
        return "(cd %s && %s)" % (self.rec.dir, pf.shell(
            pf.perf_cmd(self.buildid, sub, *args)))

    def report_args(self, data):
        return ("-i", data, "--stdio", "--no-children", "--sort", "sym",
                "-g", "none", "-F", "overhead,sample,sym")

    def report_text(self, data, fresh=False):
        key = ("report", data)
        if fresh or key not in self._cache:
            _, out, _, _ = self.perf("report", *self.report_args(data))
            self._cache[key] = out
        return self._cache[key]

    def counts(self, data):
        return pf.parse_report_counts(self.report_text(data))

    def jit_names(self):
        """Names of all code the jitdump reports (exact JIT test)."""
        if "jit_names" not in self._cache:
            self._cache["jit_names"] = {
                l.name.decode("utf-8", "surrogateescape")
                for l in self.dump.loads}
        return self._cache["jit_names"]

    def hottest_jit(self):
        """Hottest JIT symbol of perf's report whose name is one row."""
        counts, rows = self.counts(self.ref)
        jn = self.jit_names()
        cands = [(n, c) for n, c in counts.items()
                 if n in jn and c > 0 and rows.get(n) == 1]
        self.assertTrue(cands, "no JIT symbol with a unique name and "
                        "samples in perf's own report")
        return max(cands, key=lambda x: (x[1], x[0]))[0]

    # -- a -----------------------------------------------------------------

    def test_a_self_counts_per_symbol(self):
        self.need_ours()
        ref, _ = self.counts(self.ref)
        ours, _ = self.counts(self.ours)
        jn = self.jit_names()
        cmds = "\n".join("  " + self.cmdline("report", *self.report_args(d))
                         for d in ("perf.ref.data", "perf.pg.data"))
        ref_jit = {n: c for n, c in ref.items() if n in jn and c > 0}
        visible = [n for n in ref_jit if n.startswith(("JS:", "Builtin:"))]
        self.assertGreater(sum(ref.values()), 500,
                           "perf's report has too few samples\n" + cmds)
        self.assertTrue(visible, "perf's own report has no JS:/Builtin: "
                        "symbol with samples: the test would be vacuous\n"
                        + cmds)
        diffs = dict_diffs(ref, ours)
        jit_diffs = [d for d in diffs if d[0] in jn]
        if diffs:
            self.fail(
                "a: self sample counts per symbol differ in %d symbols (%d "
                "of them JIT); totals perf %d ours %d, JIT samples perf %d "
                "ours %d:\n%s\ncommands:\n%s" % (
                    len(diffs), len(jit_diffs), sum(ref.values()),
                    sum(ours.values()), sum(ref_jit.values()),
                    sum(c for n, c in ours.items() if n in jn),
                    fmt_diffs(diffs), cmds))
        self.assertTrue(any(ours.get(n, 0) > 0 for n in visible))

    # -- c -----------------------------------------------------------------

    SRCLINE_RE = re.compile(r"(?:\bwork\.js|node:[\w./-]+):\d+")

    def srclines(self, data, names):
        args = ("-i", data, "-G", "--no-inline", "--full-source-path",
                "-F", "ip,sym,srcline", "-S", ",".join(sorted(names)))
        _, out, _, _ = self.perf("script", *args)
        return pf.parse_script_srclines(out), args

    def test_c_srcline_of_js_frames(self):
        self.need_ours()
        jn = self.jit_names()
        names = {n for d in (self.ref, self.ours)
                 for n, c in self.counts(d)[0].items()
                 if n in jn and c > 0 and "," not in n}
        self.assertTrue(names, "no JIT symbol with samples in the reports")
        rows, args = self.srclines(self.ours, names)
        js = [r for r in rows if r[1].startswith("JS:")]
        good = [r for r in js if r[2] and self.SRCLINE_RE.search(r[2])]
        ref_rows, _ = self.srclines(self.ref, names)
        ref_good = [r for r in ref_rows if r[1].startswith("JS:") and r[2]
                    and self.SRCLINE_RE.search(r[2])]
        seen = sorted({r[2] for r in js if r[2]})[:10]
        self.assertTrue(
            good,
            "c: no JS: sample of ours has a JS file:line srcline (%d JS: "
            "samples, %d with any srcline, e.g. %r; perf's output: %d with "
            "file:line)\ncommand: %s" % (
                len(js), sum(1 for r in js if r[2]), seen, len(ref_good),
                self.cmdline("script", *(("-i", "perf.pg.data") + args[2:]))
                [:600]))
        info("%s c: JS: samples with file:line: ours %d, perf %d (of %d)"
             % (self.MODE, len(good), len(ref_good), len(js)))

    # -- d -----------------------------------------------------------------

    def test_d_annotate_hottest_jit(self):
        self.need_ours()
        sym = self.hottest_jit()
        res = {}
        for label, data in (("perf", "perf.ref.data"),
                            ("ours", "perf.pg.data")):
            args = ("-i", data, "--stdio", "--stdio-color", "never",
                    "-s", sym)
            _, out, err, _ = self.perf("annotate", *args, check=False)
            res[label] = (pf.parse_annotate(out), out, err,
                          self.cmdline("annotate", *args))
        ours, out, err, cmd = res["ours"]
        self.assertTrue(ours, "d: perf annotate of %r on ours printed no "
                        "instruction lines\ncommand: %s\nstdout:\n%s\n"
                        "stderr:\n%s" % (sym, cmd, pf.tail(out),
                                         pf.tail(err)))
        hot = [x for x in ours if x[0] > 0]
        self.assertTrue(hot, "d: perf annotate of %r on ours shows no "
                        "instruction with a non-zero percentage\ncommand: "
                        "%s\n%s" % (sym, cmd, pf.tail(out)))
        total = sum(x[0] for x in ours)
        self.assertGreater(total, 95.0, "d: percentages of %r sum to %.2f"
                           "\ncommand: %s" % (sym, total, cmd))

        def norm(lst):
            base = lst[0][1] if lst else 0
            return [(off - base, mn, pct) for pct, off, mn in lst]
        a, b = norm(res["perf"][0]), norm(ours)
        if a != b:
            diff = [(i, x, y) for i, (x, y) in
                    enumerate(zip(a + [None] * len(b), b + [None] * len(a)))
                    if x != y][:10]
            self.fail("d: perf annotate of %r differs from perf's output "
                      "(%d vs %d instructions); first differences "
                      "(index, perf (offset, insn, pct), ours):\n%s\n"
                      "commands:\n  %s\n  %s" % (
                          sym, len(a), len(b),
                          "\n".join("  %r" % (d,) for d in diff),
                          res["perf"][3], cmd))

    # -- h -----------------------------------------------------------------

    def test_h_image_file_count(self):
        self.need_ours()
        d = self.ours + ".d"
        self.assertTrue(os.path.isdir(d), "h: image directory %s missing"
                        % d)
        n_ours = pf.count_files(d)
        n_perf = len(pf.perf_jitted_files(self.rec))
        n_cfi = sum(1 for l in self.dump.loads if l.has_cfi)
        msg = ("h: perfgraft wrote %d files in %s; perf wrote %d "
               "jitted-%d-*.so; %d functions with CFI of %d loads (limit "
               "10 + %d = %d)" % (n_ours, d, n_perf, self.rec.pid, n_cfi,
                                  len(self.dump.loads), n_cfi, 10 + n_cfi))
        info("%s %s" % (self.MODE, msg))
        self.assertGreater(n_ours, 0, msg)
        self.assertLessEqual(n_ours, 10 + n_cfi, msg)
        self.assertLess(n_ours, n_perf, msg)

    # -- ~/.debug ------------------------------------------------------------

    def test_zz_home_debug_untouched(self):
        diff = pf.snapshot_diff(self.home_before, pf.home_debug_snapshot())
        self.assertIsNone(diff, diff)


class InjectFramePointer(_InjectCase, unittest.TestCase):
    """-g (frame pointer) recording, ~1.5 s."""

    MODE = "fp"
    MS = 1500

    def children(self, data):
        key = ("children", data)
        if key not in self._cache:
            _, out, _, _ = self.perf("report", *self.children_args(data))
            self._cache[key] = pf.parse_folded_children(out)
        return self._cache[key]

    @staticmethod
    def children_args(data):
        return ("-i", data, "--stdio", "--children", "--sort", "sym",
                "--no-inline", "-g", "folded,0,caller,count")

    def test_b_call_chains_through_jit(self):
        self.need_ours()
        jn = self.jit_names()
        hot = self.hottest_jit()
        ref, ours = self.children(self.ref), self.children(self.ours)
        cmds = "\n".join("  " + self.cmdline("report",
                                             *self.children_args(d))
                         for d in ("perf.ref.data", "perf.pg.data"))
        ref_edges, ours_edges = pf.chain_edges(ref), pf.chain_edges(ours)
        jj = [e for e, n in ref_edges.items()
              if e[0] in jn and e[1] in jn and n > 0]
        nj = [e for e, n in ref_edges.items()
              if e[0] not in jn and e[1] in jn and n > 0]
        self.assertTrue(jj and nj, "perf's own report has no JIT->JIT or "
                        "native->JIT call edge: the test would be vacuous\n"
                        + cmds)
        self.assertIn(hot, ref, "hottest JIT symbol %r has no children "
                      "entry in perf's report\n%s" % (hot, cmds))
        self.assertTrue(ref[hot], "no call chain under %r in perf's report"
                        % hot)

        def short(chain, keep=4):
            fr = [f if len(f) <= 36 else f[:33] + "..."
                  for f in chain.split(";")]
            return ("...;" if len(fr) > keep else "") + ";".join(fr[-keep:])
        cd = dict_diffs(ref.get(hot, {}), ours.get(hot, {}))
        if cd:
            self.fail(
                "b: the call chains under the hottest JIT symbol %r differ:"
                " %d chains differ, perf has %d, ours %d (last 4 frames, "
                "root first, long names cut):\n%s\ncommands:\n%s" % (
                    hot, len(cd), len(ref[hot]), len(ours.get(hot, {})),
                    fmt_diffs([(short(k), a, b) for k, a, b in cd],
                              width=160), cmds))
        ed = dict_diffs(ref_edges, ours_edges)
        jit_ed = [d for d in ed if d[0][0] in jn or d[0][1] in jn]
        if ed:
            self.fail(
                "b: caller->callee edges differ: %d edges (%d touching JIT "
                "code) of %d in perf's report; (caller, callee):\n%s\n"
                "commands:\n%s" % (len(ed), len(jit_ed), len(ref_edges),
                                   fmt_diffs(jit_ed or ed, width=120),
                                   cmds))

    def test_g_second_inject_keeps_first_output(self):
        self.need_ours()
        before = self.report_text(self.ours)
        cmd = [pf.PERFGRAFT, "inject", "-i", "perf.data",
               "-o", "perf.pg2.data"]
        pf.run(cmd, cwd=self.rec.dir)
        after = self.report_text(self.ours, fresh=True)
        strip = lambda t: [l for l in t.splitlines()  # noqa: E731
                           if l.strip() and not l.startswith("#")]
        b, a = pf.parse_report_counts(before)[0], \
            pf.parse_report_counts(after)[0]
        if strip(before) != strip(after):
            self.fail("g: the report of perf.pg.data changed after `%s`:"
                      "\n%s\ncommand: %s" % (
                          pf.shell(cmd), fmt_diffs(dict_diffs(b, a)),
                          self.cmdline("report", *self.report_args(
                              "perf.pg.data"))))
        second = pf.parse_report_counts(
            self.report_text(self.rec.path("perf.pg2.data")))[0]
        d = dict_diffs(a, second)
        if d:
            self.fail("g: the second output perf.pg2.data reports "
                      "differently from the first:\n%s" % fmt_diffs(d))

    def test_missing_dump_is_an_error(self):
        """The recording's only dump is gone: nothing can be injected, so
        the run fails (issue 25; perf inject --jit fails too) naming the
        dump and --jitdump-dir, and writes no output."""
        self.need_ours()
        hidden = self.rec.dump + ".hidden"
        os.rename(self.rec.dump, hidden)
        try:
            cmd = [pf.PERFGRAFT, "inject", "-i", "perf.data",
                   "-o", "perf.nodump.data"]
            rc, _, err, _ = pf.run(cmd, cwd=self.rec.dir, check=False)
        finally:
            os.rename(hidden, self.rec.dump)
        self.assertEqual(rc, 1, "`%s` with %s missing exited %d; stderr:\n%s"
                         % (pf.shell(cmd), self.rec.dump, rc, pf.tail(err)))
        self.assertIn(os.path.basename(self.rec.dump), err,
                      "the error does not name the missing dump; stderr:"
                      "\n%s" % pf.tail(err))
        self.assertIn("--jitdump-dir", err)
        self.assertFalse(os.path.exists(self.rec.path("perf.nodump.data")))


class InjectDwarf(_InjectCase, unittest.TestCase):
    """--call-graph dwarf recording, ~0.5 s (the data is big)."""

    MODE = "dwarf"
    MS = 500

    @staticmethod
    def chain_args(data):
        return ("-i", data, "--no-inline", "--ns", "-F", "tid,time,ip,sym")

    def test_e_dwarf_chain_length_of_jit_leaves(self):
        self.need_ours()
        _, out, _, _ = self.perf("script", "-i", "perf.data", "-G", "--ns",
                                 "-F", "tid,time,ip")
        leaves = pf.parse_script_leaves(out)
        ranges = pf.CodeRanges(self.dump.loads)
        jit_keys = {k for k, ip in leaves.items() if ip in ranges}
        self.assertGreater(len(jit_keys), 50, "only %d of %d samples have "
                           "a JIT leaf" % (len(jit_keys), len(leaves)))
        stats = {}
        for label, data in (("perf", "perf.ref.data"),
                            ("ours", "perf.pg.data")):
            _, out, _, _ = self.perf("script", *self.chain_args(data))
            chains = pf.parse_script_chains(out)
            lens = [len(chains[k]) for k in jit_keys if k in chains]
            stats[label] = (len(lens), sum(lens) / max(1, len(lens)),
                            chains)
        cmds = "\n".join("  " + self.cmdline("script", *self.chain_args(d))
                         for d in ("perf.ref.data", "perf.pg.data"))
        (np_, mp, pc), (no, mo, oc) = stats["perf"], stats["ours"]
        msg = ("e: mean call-chain length of the %d JIT-leaf samples: perf "
               "%.2f (%d found), ours %.2f (%d found)" % (
                   len(jit_keys), mp, np_, mo, no))
        info("dwarf " + msg)
        self.assertEqual(no, len(jit_keys), msg + "\n" + cmds)
        if mo < mp:
            shorter = [k for k in jit_keys if k in pc and k in oc
                       and len(oc[k]) < len(pc[k])]
            by_leaf = {}
            for k in shorter:
                st = by_leaf.setdefault(pc[k][0] if pc[k] else "?",
                                        [0, 0, 0, 0])
                st[0] += 1
                st[1] += len(pc[k])
                st[2] += len(oc[k])
                st[3] += len(oc[k]) == 1
            rows = sorted(by_leaf.items(), key=lambda x: -x[1][0])
            table = "\n".join(
                "  %-60s %5d samples: perf %5.1f frames, ours %5.1f, "
                "%d with only the leaf" % (short_key(n, 60), st[0],
                                          st[1] / st[0], st[2] / st[0],
                                          st[3])
                for n, st in rows[:MAX_LIST])
            worse = sorted(shorter,
                           key=lambda k: len(oc[k]) - len(pc[k]))[:3]
            ex = "\n".join("  %s: perf %d frames, ours %d: ours ends ... %s"
                           % (k, len(pc[k]), len(oc[k]),
                              " <- ".join(oc[k][-3:])) for k in worse)
            self.fail("%s\n%d samples shorter in ours, by leaf symbol:\n%s"
                      "\nexamples:\n%s\ncommands:\n%s"
                      % (msg, len(shorter), table, ex, cmds))


class InjectPipe(unittest.TestCase):
    """perf record -o - | perfgraft inject -i - -o - | perf report -i -"""

    MS = 800

    @classmethod
    def setUpClass(cls):
        cls.home_before = pf.home_debug_snapshot()
        cls.tmp = tempfile.mkdtemp(prefix="perfgraft-inject-pipe.")
        cls.dir = os.path.join(cls.tmp, "pipe")
        cls.buildid = os.path.join(cls.tmp, "debug")
        os.makedirs(cls.dir)
        shutil.copy(pf.WORK_JS, os.path.join(cls.dir, "work.js"))

    @classmethod
    def tearDownClass(cls):
        if not KEEP_TMP:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_f_pipe_end_to_end(self):
        rec = pf.perf_cmd(self.buildid, "record", "-N", "-q", "-k", "mono",
                          "-e", "cpu-clock", "-o", "-", "--", pf.NODE,
                          *pf.NODE_FLAGS, "work.js", str(self.MS))
        inj = [pf.PERFGRAFT, "inject", "-i", "-", "-o", "-"]
        rep = pf.perf_cmd(self.buildid, "report", "-i", "-", "--stdio",
                          "--sort", "sym", "-F", "overhead,sample,sym")
        line = "(cd %s && %s | %s | %s)" % (self.dir, pf.shell(rec),
                                            pf.shell(inj), pf.shell(rep))
        errs = [tempfile.TemporaryFile() for _ in range(3)]
        t0 = time.time()
        p1 = subprocess.Popen(rec, cwd=self.dir, stdout=subprocess.PIPE,
                              stderr=errs[0])
        try:
            p2 = subprocess.Popen(inj, cwd=self.dir, stdin=p1.stdout,
                                  stdout=subprocess.PIPE, stderr=errs[1])
        except OSError as e:
            p1.kill()
            p1.wait()
            self.fail("cannot run %s: %s" % (inj[0], e))
        p1.stdout.close()
        p3 = subprocess.Popen(rep, cwd=self.dir, stdin=p2.stdout,
                              stdout=subprocess.PIPE, stderr=errs[2])
        p2.stdout.close()
        try:
            out, _ = p3.communicate(timeout=pf.TIMEOUT)
            rcs = [p1.wait(timeout=60), p2.wait(timeout=60), p3.returncode]
        except subprocess.TimeoutExpired:
            for p in (p1, p2, p3):
                p.kill()
                p.wait()
            self.fail("pipeline timed out: " + line)
        err = []
        for f in errs:
            f.seek(0)
            err.append(f.read().decode("utf-8", "replace"))
            f.close()
        info("pipe: %.1f s" % (time.time() - t0))
        detail = "\n".join("stderr of %s:\n%s" % (n, pf.tail(e, 10))
                           for n, e in zip(("record", "perfgraft inject",
                                            "report"), err))
        self.assertEqual(rcs, [0, 0, 0], "f: exit statuses (record, inject, "
                         "report) %s\ncommand: %s\n%s" % (rcs, line, detail))
        counts, _ = pf.parse_report_counts(
            out.decode("utf-8", "surrogateescape"))
        total = sum(counts.values())
        js = {n: c for n, c in counts.items() if n.startswith("JS:")}
        jit = sum(c for n, c in counts.items() if pf.is_jit_name(n))
        top = sorted(counts.items(), key=lambda x: -x[1])[:8]
        msg = ("f: %d samples, JS: %d (%d symbols), all JIT %d; top %s\n"
               "command: %s\n%s" % (total, sum(js.values()), len(js), jit,
                                    top, line, detail))
        info("pipe: %d samples, JIT %d" % (total, jit))
        self.assertGreater(total, 100, msg)
        self.assertGreater(sum(js.values()), 0, msg)
        # -o -: the images are in a directory of the run's own
        ds = [n for n in os.listdir(self.dir) if n.startswith("perfgraft-jit-")]
        d = os.path.join(self.dir, ds[0]) if len(ds) == 1 else "perfgraft-jit-*.d"
        self.assertTrue(os.path.isdir(d) and pf.count_files(d) > 0,
                        "f: %s missing or empty\n%s" % (d, msg))

    def test_zz_home_debug_untouched(self):
        diff = pf.snapshot_diff(self.home_before, pf.home_debug_snapshot())
        self.assertIsNone(diff, diff)


if __name__ == "__main__":
    unittest.main()
