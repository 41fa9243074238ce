#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Edge-case tests of `perfgraft dump` on generated XRay traces.

Run from the repository root:  python3 -m unittest tests.test_xray_edge -v
The binary is $PERFGRAFT or <repo>/build/perfgraft.  The traces come from
tests/xray_gen.py (FDR v1-v5 and basic v1-v3, both byte orders, damaged
variants), which also gives the records each must decode to.  The
cross-check of the generator against llvm-xray 14 is skipped when
llvm-xray is not installed.

CLI contract under test:
  perfgraft dump --json [--time-order] FILE
  {"format":"xray","file":PATH,"header":{version,type,flags,cycle_frequency,
   buffer_size,byte_order},"records":[{offset,kind,size,...}],
   "warnings":[str],"warnings_omitted":N,"error":null|str,"summary":{...}}
  file order lists every record (metadata too); --time-order lists function
  and event records per thread by time plus one thread_end per thread.
  Damage: a warning naming "offset N" (the bad record), the rest of that
  buffer skipped; exit 1 only when the header is unusable.

XrayBoundTest: tiny traces whose calls last long (tests/xray_gen.py
long_calls_fdr, long_call_beside_ticks) convert into small perf.data:
  perfgraft xray TRACE [--thin-after N] [-F HZ] [--max-gap SEC]
a stack unchanged for more than N samples (default 1000) is sampled ever
more sparsely, each sample's period the grid time since the one before;
perf report's period sums stay the full grid's, a warning names the first
thinned stack, the summary counts them.
"""

import collections
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import xray_gen as gen  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(REPO, "build", "perfgraft"))
TIMEOUT = 60
SEED_DIR = os.path.join(REPO, "fuzz", "corpus-xray")
OFFSET_RE = re.compile(r"offset (\d+)")
META_KINDS = ("new_buffer", "end_of_buffer", "new_cpu", "tsc_wrap",
              "wallclock", "buffer_extents", "pid", "call_arg", "skipped")


def run(args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=TIMEOUT)
    p.out = p.stdout.decode("utf-8", "surrogateescape")
    p.err = p.stderr.decode("utf-8", "surrogateescape")
    return p


def describe(p):
    return "command: %s\nexit: %s\nstdout (tail):\n%s\nstderr (tail):\n%s" % (
        " ".join(map(str, p.args)), p.returncode, p.out[-2000:], p.err[-2000:])


def warning_offsets(doc):
    offs = []
    for w in doc.get("warnings") or []:
        offs += [int(m) for m in OFFSET_RE.findall(str(w))]
    return offs


def short(r):
    return json.dumps(r, sort_keys=True)[:300]


class XrayEdgeTest(unittest.TestCase):
    maxDiff = 6000

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="perfgraft-xray-")
        cls.tmp = cls._tmp.name
        cls.gendir = os.path.join(cls.tmp, "cases")
        os.mkdir(cls.gendir)
        cls.cases = gen.cases(cls.gendir)
        cls._cache = {}

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    # -- helpers ------------------------------------------------------------
    def need_binary(self):
        if not (os.path.isfile(PERFGRAFT) and os.access(PERFGRAFT, os.X_OK)):
            self.fail("perfgraft binary not found or not executable: %s "
                      "(build with: meson setup build; ninja -C build, or set PERFGRAFT)"
                      % PERFGRAFT)

    def path(self, name):
        return os.path.join(self.gendir, name + ".xray")

    def dump(self, path, time_order=False, cache=True):
        key = (path, time_order)
        if cache and key in self._cache:
            return self._cache[key]
        args = [PERFGRAFT, "dump", "--json"]
        if time_order:
            args.append("--time-order")
        p = run(args + [path])
        doc = None
        try:
            doc = json.loads(p.out)
        except ValueError:
            pass
        if cache:
            self._cache[key] = (p, doc)
        return p, doc

    def each_case(self, pred=lambda c: True):
        for name in sorted(self.cases):
            c = self.cases[name]
            if pred(c):
                yield name, c

    def check_exit(self, p, c):
        self.assertGreaterEqual(p.returncode, 0,
                                "killed by signal %d\n%s" % (-p.returncode, describe(p)))
        self.assertEqual(p.returncode, c.exit, describe(p))

    def file_order_problems(self, c, doc):
        """Differences between doc["records"] and the case's expectation."""
        probs = []
        recs = doc.get("records")
        if not isinstance(recs, list):
            return ["records is not a list: %r" % (recs,)]
        by_off = {}
        for r in recs:
            off = r.get("offset")
            if off in by_off:
                probs.append("two records at offset %s: %s / %s"
                             % (off, short(by_off[off]), short(r)))
            by_off[off] = r
        prev = -1
        for r in recs:
            if not isinstance(r.get("offset"), int) or r["offset"] < prev:
                probs.append("records not in file order at %s" % short(r))
                break
            prev = r["offset"]
        want = {r["offset"]: r for r in c.records()}
        for off, w in sorted(want.items()):
            g = by_off.get(off)
            if g is None:
                probs.append("missing record %s" % short(w))
                continue
            for k, v in w.items():
                if g.get(k) != v:
                    probs.append("record @%d: %s is %r, expected %r\n  got:  %s\n  want: %s"
                                 % (off, k, g.get(k), v, short(g), short(w)))
                    break
        for off, g in sorted(by_off.items(), key=lambda kv: str(kv[0])):
            if off in want:
                continue
            if any(lo <= off < hi and g.get("kind") in kinds
                   for lo, hi, kinds in c.extra_ok):
                continue
            probs.append("unexpected record %s" % short(g))
        return probs

    def time_order_problems(self, c, doc):
        probs = []
        recs = doc.get("records")
        if not isinstance(recs, list):
            return ["records is not a list: %r" % (recs,)]
        want = c.time_order()
        got = {}
        ends = {}
        for i, r in enumerate(recs):
            kind = r.get("kind")
            key = (r.get("pid"), r.get("tid"))
            if kind == "thread_end":
                if key in ends:
                    probs.append("two thread_end records for %s" % (key,))
                ends[key] = (i, r)
                continue
            if kind not in gen.TIMED_KINDS:
                probs.append("record of kind %r in time order: %s" % (kind, short(r)))
                continue
            if key in ends:
                probs.append("record after its thread's thread_end: %s" % short(r))
            got.setdefault(key, []).append((i, r))
        if sorted(got) != sorted(want):
            probs.append("threads %s, expected %s" % (sorted(got), sorted(want)))
        for key in sorted(set(got) & set(want)):
            g = [r for _, r in got[key]]
            w = want[key]
            if len(g) != len(w):
                probs.append("thread %s: %d records, expected %d"
                             % (key, len(g), len(w)))
            for j, (a, b) in enumerate(zip(g, w)):
                bad = [k for k, v in b.items() if a.get(k) != v]
                if bad:
                    probs.append("thread %s record %d: %s differ\n  got:  %s\n  want: %s"
                                 % (key, j, bad, short(a), short(b)))
                    break
        for key, lst in sorted(want.items()):
            e = ends.get(key)
            if e is None:
                probs.append("no thread_end for thread %s" % (key,))
                continue
            i, r = e
            if got.get(key) and i < got[key][-1][0]:
                probs.append("thread_end of %s before its last record" % (key,))
            if lst and r.get("tsc") != lst[-1]["tsc"]:
                probs.append("thread_end of %s: tsc %r, expected %d"
                             % (key, r.get("tsc"), lst[-1]["tsc"]))
        for key in sorted(set(ends) - set(want), key=str):
            probs.append("thread_end for unknown thread %s" % (key,))
        monotonic = all(all(a["tsc"] <= b["tsc"] for a, b in zip(l, l[1:]))
                        for l in want.values())
        if monotonic:
            last = None
            for r in recs:
                t = r.get("tsc")
                if isinstance(t, int) and last is not None and t < last:
                    probs.append("threads not merged by time: tsc %d after %d (%s)"
                                 % (t, last, short(r)))
                    break
                if isinstance(t, int):
                    last = t
        return probs

    def warning_problems(self, c, doc):
        probs = []
        ws = doc.get("warnings")
        if not isinstance(ws, list):
            return ["warnings is not a list: %r" % (ws,)]
        offs = warning_offsets(doc)
        for allowed in c.warn:
            if not any(o in allowed for o in offs):
                probs.append("no warning naming offset %s (warnings: %s)"
                             % (sorted(allowed), ws[:6]))
        if c.clean and (ws or doc.get("warnings_omitted")):
            probs.append("expected no warnings, got %s" % ws[:6])
        if c.trunc_warn and not ws:
            probs.append("truncated inside a buffer/record but no warning")
        return probs

    def summary_problems(self, c, doc):
        probs = []
        s = doc.get("summary")
        if not isinstance(s, dict):
            return ["summary missing: %r" % (s,)]
        for k, v in c.summary().items():
            if s.get(k) != v:
                probs.append("summary.%s = %r, expected %r" % (k, s.get(k), v))
        n = c.counts()
        if s.get("enters") not in (n["enter"], n["enter"] + n["enter_arg"]):
            probs.append("summary.enters = %r, expected %d (or %d with enter_arg)"
                         % (s.get("enters"), n["enter"], n["enter"] + n["enter_arg"]))
        if s.get("args") not in (n["enter_arg"], n["arg_values"]):
            probs.append("summary.args = %r, expected %d records / %d values"
                         % (s.get("args"), n["enter_arg"], n["arg_values"]))
        tb = s.get("truncated_bytes")
        if c.truncated is True and not (isinstance(tb, int) and tb > 0):
            probs.append("summary.truncated_bytes = %r on a truncated file" % (tb,))
        if c.truncated is False and tb != 0:
            probs.append("summary.truncated_bytes = %r, expected 0" % (tb,))
        return probs

    # -- tests --------------------------------------------------------------
    def test_exit_status_and_header(self):
        """Exit 1 only for an unusable header; format/file/header fields."""
        self.need_binary()
        for name, c in self.each_case():
            with self.subTest(case=name):
                path = self.path(name)
                for order in (False, True):
                    p, doc = self.dump(path, order)
                    self.check_exit(p, c)
                    if c.exit:
                        self.assertTrue(p.err.strip(), "exit 1 without a message\n"
                                        + describe(p))
                        if doc is not None:
                            self.assertIsInstance(doc.get("error"), str, describe(p))
                            self.assertTrue(doc["error"])
                        continue
                    self.assertIsNotNone(doc, "stdout is not JSON\n" + describe(p))
                    self.assertEqual(doc.get("format"), "xray")
                    self.assertEqual(doc.get("file"), path)
                    self.assertIsNone(doc.get("error"), describe(p))
                    self.assertEqual(doc.get("header"), c.header, describe(p))

    def test_file_order_records(self):
        """dump --json lists exactly the expected records (metadata too)."""
        self.need_binary()
        for name, c in self.each_case(lambda c: c.exit == 0):
            with self.subTest(case=name):
                p, doc = self.dump(self.path(name))
                self.check_exit(p, c)
                self.assertIsNotNone(doc, describe(p))
                probs = self.file_order_problems(c, doc)
                self.assertEqual(probs, [], "%s:\n%s" % (name, "\n".join(probs[:12])))

    def test_time_order_records(self):
        """--time-order: each thread's records by buffer time, threads merged
        by TSC, one thread_end per thread at its last TSC."""
        self.need_binary()
        for name, c in self.each_case(lambda c: c.exit == 0):
            with self.subTest(case=name):
                p, doc = self.dump(self.path(name), True)
                self.check_exit(p, c)
                self.assertIsNotNone(doc, describe(p))
                probs = self.time_order_problems(c, doc)
                self.assertEqual(probs, [], "%s:\n%s" % (name, "\n".join(probs[:12])))

    def test_warnings_name_damage_offsets(self):
        """Each damage is reported with "offset N" of the bad record; clean
        files have no warnings; a cut inside a buffer warns."""
        self.need_binary()
        for name, c in self.each_case(lambda c: c.exit == 0):
            with self.subTest(case=name):
                for order in (False, True):
                    p, doc = self.dump(self.path(name), order)
                    self.assertIsNotNone(doc, describe(p))
                    probs = self.warning_problems(c, doc)
                    self.assertEqual(probs, [], "%s%s:\n%s" % (
                        name, " --time-order" if order else "", "\n".join(probs)))

    def test_summary(self):
        self.need_binary()
        for name, c in self.each_case(lambda c: c.exit == 0):
            with self.subTest(case=name):
                for order in (False, True):
                    p, doc = self.dump(self.path(name), order)
                    self.assertIsNotNone(doc, describe(p))
                    probs = self.summary_problems(c, doc)
                    self.assertEqual(probs, [], "%s%s:\n%s" % (
                        name, " --time-order" if order else "", "\n".join(probs)))

    def test_damage_keeps_other_buffers(self):
        """After damage the next buffer is read: every record of the buffers
        after the damaged one is there (v2+: extents boundary; v1: stride;
        basic: next record)."""
        self.need_binary()
        damaged = [(n, c) for n, c in self.each_case(
            lambda c: c.exit == 0 and (c.cuts or c.dropped) and not c.truncated)]
        self.assertTrue(damaged)
        for name, c in damaged:
            with self.subTest(case=name):
                p, doc = self.dump(self.path(name))
                self.assertIsNotNone(doc, describe(p))
                got = {r.get("offset") for r in doc.get("records", [])}
                first_bad = min(list(c.cuts.values()) +
                                [c.items[i].offset for i in c.dropped])
                after = [it for it in c.items if c.kept(it) and it.offset > first_bad]
                self.assertTrue(after, "case has nothing after its damage")
                missing = [it for it in after if it.offset not in got]
                self.assertEqual(missing, [], name)

    def test_big_endian_twins(self):
        """A big-endian trace decodes to the same records as its
        little-endian twin (same layout, same values)."""
        self.need_binary()
        pairs = [(n, n.replace("-be", "-le")) for n in self.cases
                 if "-be" in n and n.replace("-be", "-le") in self.cases
                 and self.cases[n].exit == 0]
        self.assertTrue(pairs)
        for be, le in sorted(pairs):
            with self.subTest(case=be):
                _, dbe = self.dump(self.path(be))
                _, dle = self.dump(self.path(le))
                self.assertIsNotNone(dbe)
                self.assertIsNotNone(dle)
                self.assertEqual(dbe["header"].get("byte_order"), "big")
                self.assertEqual(dle["header"].get("byte_order"), "little")

                def norm(recs):
                    out = []
                    for r in recs:
                        r = dict(r)
                        # the samples' largest id differs (BE needs bit 20 clear)
                        if r.get("func_id") in (0x0FFFFFFF, 0x0FEFFFFF):
                            r["func_id"] = "big"
                        out.append(r)
                    return out
                self.assertEqual(norm(dbe["records"]), norm(dle["records"]))
                self.assertEqual(dbe["summary"], dle["summary"])

    def _sweep(self, case):
        """Every truncation length 0..size: no crash, exit 1 below the header
        and 0 from it on, every record before the cut kept."""
        self.need_binary()
        work = tempfile.TemporaryDirectory(prefix="perfgraft-xray-cut-")
        self.addCleanup(work.cleanup)
        path = os.path.join(work.name, case.name + ".xray")
        failures = []
        classes = {}    # problem with its numbers blanked -> (first, count)

        def note(tag, msg):
            k = re.sub(r"\d+", "N", msg)
            if k in classes:
                classes[k][1] += 1
            else:
                classes[k] = [tag + ": " + msg, 1]
                failures.append(k)

        for n in range(len(case.data) + 1):
            t = gen.truncate(case, n)
            with open(path, "wb") as f:
                f.write(t.data)
            for order in (False, True):
                p, doc = self.dump(path, order, cache=False)
                tag = "cut %d%s" % (n, " --time-order" if order else "")
                if p.returncode < 0:
                    note(tag, "killed by signal %d" % -p.returncode)
                    continue
                if p.returncode != t.exit:
                    note(tag, "exit %d, expected %d: %s"
                         % (p.returncode, t.exit, p.err.strip()[:200]))
                    continue
                if t.exit:
                    continue
                if doc is None:
                    note(tag, "stdout is not JSON")
                    continue
                probs = (self.time_order_problems(t, doc) if order
                         else self.file_order_problems(t, doc))
                probs += self.warning_problems(t, doc)
                probs += self.summary_problems(t, doc)
                for pr in probs[:4]:
                    note(tag, pr.split("\n")[0])
        report = ["%s  [%d cut(s) like this]" % (classes[k][0], classes[k][1])
                  for k in failures]
        self.assertEqual(report, [], "\n".join(report[:30]))

    def test_truncation_sweep_fdr_v5(self):
        self._sweep(gen.small_fdr_v5("<"))

    def test_truncation_sweep_fdr_v5_big_endian(self):
        self._sweep(gen.small_fdr_v5(">"))

    def test_truncation_sweep_basic_v3(self):
        self._sweep(gen.small_basic_v3("<"))

    def test_not_a_trace_left_behind(self):
        """Dumping writes nothing next to the trace."""
        self.need_binary()
        before = sorted(os.listdir(self.gendir))
        self.dump(self.path("fdr-v5-le"), cache=False)
        self.dump(self.path("basic-v3-le"), True, cache=False)
        self.assertEqual(sorted(os.listdir(self.gendir)), before)


    def test_output_to_fifo_and_device(self):
        """-o on a FIFO or a device writes into it: renaming a finished file
        onto the name (how regular outputs are made atomic) would replace
        the node itself, /dev/null included."""
        self.need_binary()
        trace = self.path("fdr-v5-le")
        d = tempfile.mkdtemp(dir=self.tmp)
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)
        # the pipe form streams into the FIFO; a reader drains it
        got = os.path.join(self.tmp, "from-fifo.data")
        with open(got, "wb") as sink:
            reader = subprocess.Popen(["cat", fifo], stdout=sink)
            p = subprocess.run([PERFGRAFT, "xray", trace, "--pipe", "-o", fifo],
                               capture_output=True, text=True, timeout=120)
            reader.wait(timeout=120)
        with open(got, "rb") as f:
            data = f.read()
        os.unlink(got)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(data.startswith(b"PERFILE2"), data[:16])
        m = re.search(r"written \(([\d.]+) MB\)", p.stderr)
        self.assertTrue(m, p.stderr)
        self.assertAlmostEqual(len(data) / 1e6, float(m.group(1)), delta=0.06)
        # the file form must seek back to its header: refused, FIFO intact
        reader = subprocess.Popen(["cat", fifo], stdout=subprocess.DEVNULL)
        p = subprocess.run([PERFGRAFT, "xray", trace, "-o", fifo],
                           capture_output=True, text=True, timeout=120)
        reader.wait(timeout=120)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("use the pipe form (--pipe)", p.stderr)
        self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode))
        self.assertEqual(sorted(os.listdir(d)), ["fifo"])
        # a character device (seekable): written in place, still a device
        p = subprocess.run([PERFGRAFT, "xray", trace, "-o", "/dev/null"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(stat.S_ISCHR(os.stat("/dev/null").st_mode),
                        "perfgraft replaced /dev/null")


class XrayGeneratorTest(unittest.TestCase):
    """The generator itself: structure checks and llvm-xray cross-check."""

    @classmethod
    def setUpClass(cls):
        cls.cases = gen.cases()

    def test_record_structure(self):
        """Every item of an undamaged FDR case starts with the right
        discriminant byte and kind; items tile each buffer; basic records
        are 32 bytes apart; v1 buffers are buffer_size apart."""
        for name, c in sorted(self.cases.items()):
            if c.exit or c.cuts or c.dropped or "extents" in name:
                continue
            with self.subTest(case=name):
                d = c.data
                for it in c.items:
                    if it.end > len(d):
                        continue
                    if c.mode == "basic":
                        self.assertEqual((it.offset - 32) % 32, 0)
                        bo = "<" if c.byte_order == "little" else ">"
                        rt = int.from_bytes(d[it.offset:it.offset + 2],
                                            "little" if bo == "<" else "big")
                        self.assertEqual(rt, 1 if it.kind == "call_arg" else 0)
                        continue
                    b0 = d[it.offset]
                    bo = "<" if c.byte_order == "little" else ">"
                    if it.kind in gen.FUNCTION_KINDS:
                        self.assertFalse(gen.is_metadata_byte(bo, b0),
                                         "function record %r" % it)
                    elif it.kind != "skipped":
                        kinds = {"new_buffer": 0, "end_of_buffer": 1, "new_cpu": 2,
                                 "tsc_wrap": 3, "wallclock": 4, "custom_event": 5,
                                 "call_arg": 6, "buffer_extents": 7,
                                 "typed_event": 8, "pid": 9}
                        self.assertEqual(b0, gen.meta_byte(bo, kinds[it.kind]),
                                         repr(it))
                if c.mode == "fdr":
                    for bi, (s, e) in enumerate(c.bufs):
                        its = sorted((it for it in c.items if it.buf == bi),
                                     key=lambda it: it.offset)
                        pos = s
                        for it in its:
                            self.assertEqual(it.offset, pos, "gap before %r" % it)
                            pos = it.end
                        if c.version == 1:
                            self.assertEqual(e - s, c.header["buffer_size"])

    def test_seed_corpus(self):
        """fuzz/corpus-xray holds exactly what seeds() writes."""
        if not os.path.isdir(SEED_DIR):
            self.fail("%s missing (python3 tests/xray_gen.py --seeds %s)"
                      % (SEED_DIR, SEED_DIR))
        with tempfile.TemporaryDirectory(prefix="xray-seeds-") as d:
            names = gen.seeds(d)
            self.assertEqual(sorted(os.listdir(SEED_DIR)), sorted(names))
            self.assertTrue(10 <= len(names) <= 20)
            for n in names:
                with open(os.path.join(d, n), "rb") as f:
                    want = f.read()
                with open(os.path.join(SEED_DIR, n), "rb") as f:
                    got = f.read()
                self.assertLessEqual(len(got), 4096, n)
                self.assertEqual(got, want, "%s differs from the generator's" % n)

    def test_llvm_xray_cross_check(self):
        """llvm-xray 14 decodes the well-formed cases (FDR v1-v5 and basic
        v1-v3, both byte orders) like the generator says, apart from the
        fields it is known to get wrong (see xray_gen.llvm_check)."""
        tool = gen.llvm_xray()
        if tool is None:
            self.skipTest("llvm-xray not installed")
        todo = {n: c for n, c in self.cases.items() if c.llvm and c.exit == 0}
        seen = set()
        for c in todo.values():
            seen.add((c.mode, c.version, c.byte_order))
        for mode, versions in (("fdr", range(1, 6)), ("basic", range(1, 4))):
            for v in versions:
                for bo in ("little", "big"):
                    self.assertIn((mode, v, bo), seen)
        with tempfile.TemporaryDirectory(prefix="xray-llvm-") as d:
            for name, c in sorted(todo.items()):
                with self.subTest(case=name):
                    path = os.path.join(d, name + ".xray")
                    c.write(path)
                    probs = gen.llvm_check(c, path, tool)
                    self.assertEqual(probs, [], name)

    def test_llvm_xray_sees_the_damage(self):
        """llvm-xray refuses the damaged cases we call damaged where it
        checks the same thing (sanity check of the damage helpers)."""
        tool = gen.llvm_xray()
        if tool is None:
            self.skipTest("llvm-xray not installed")
        names = [n for n in self.cases if re.search(
            r"^fdr-v[2-5]-le-(badkind10|badkind127|evsize0|evsizeneg)$", n)]
        self.assertTrue(names)
        with tempfile.TemporaryDirectory(prefix="xray-llvm-") as d:
            for name in sorted(names):
                with self.subTest(case=name):
                    path = os.path.join(d, name + ".xray")
                    self.cases[name].write(path)
                    doc, text = gen.llvm_yaml(path, tool)
                    self.assertIsNone(doc, "llvm-xray accepted %s" % name)


THIN_DEFAULT = 1000
SAMPLES_RE = re.compile(r"-> (\d+) samples every")
THINNED_RE = re.compile(r"thinned: (\d+) runs? of an unchanged call stack outlasted (\d+) "
                        r"samples \(--thin-after\).* the (\d+) samples carry the time of "
                        r"(\d+) grid samples")


def thin_bound(points, n):
    """Most samples a run of `points` grid points may take with
    --thin-after n: n per doubling of the spacing, plus the last one."""
    if points <= n:
        return points
    return n * math.ceil(math.log2(points / n + 1)) + 1


def interleaved_fdr_v5(path, buffers):
    """An FDR v5 trace of two threads' 64 KiB buffers, alternating in the
    file, the second thread's in the reverse order of their time (the
    threads read far apart in the file: each folio one maps holds buffers
    of the other's that are read much later), each full of enter/exit
    pairs 10 ticks of 1 GHz apart; written fast (one body for all)."""
    import struct
    body_n = (65536 - 16 - 64) // 8 // 2 * 2
    body = b"".join(struct.pack("<II", (1 << 4) | ((i & 1) << 1), 10) for i in range(body_n))
    with open(path, "wb") as f:
        f.write(struct.pack("<HHIQQQ", 5, 1, 3, 10**9, 65536, 0))
        for k in range(buffers):
            tid = 100 + (k & 1)
            nth = k >> 1 if k & 1 == 0 else (buffers >> 1) - 1 - (k >> 1)
            tsc = 1000 + nth * body_n * 10
            pre = (struct.pack("<BQ7x", 0x0F, 64 + len(body)) +
                   struct.pack("<Bi11x", 0x01, tid) +
                   struct.pack("<BQI3x", 0x09, 1, 0) +
                   struct.pack("<Bi11x", 0x13, 4242) +
                   struct.pack("<BHQ5x", 0x05, k & 1, tsc))
            f.write(pre + body)


def peak_rss_kb(args):
    """Runs args; (exit status, stderr, its peak RSS in KiB)."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return p.returncode, err.read().decode("utf-8", "replace"), ru.ru_maxrss


class XrayMemoryTest(unittest.TestCase):
    """The trace's pages are given back as it is read, whatever the page
    cache's folios: a read fault maps a large folio whole (Linux 6.18), and
    a folio shared by two threads' buffers came back with each touch, so
    the peak followed the distance in the file between the threads being
    read, up to the 32 MB between sweeps (45 MB at 192 MB against 17 MB
    for the same trace with small folios)."""

    def test_peak_rss_does_not_follow_the_trace(self):
        if not (os.path.isfile(PERFGRAFT) and os.access(PERFGRAFT, os.X_OK)):
            self.fail("perfgraft binary not found or not executable: %s" % PERFGRAFT)
        with tempfile.TemporaryDirectory(prefix="perfgraft-xray-mem-") as tmp:
            peaks = {}
            for name, n in (("small", 16), ("big", 1600)):
                trace = os.path.join(tmp, name + ".xray")
                interleaved_fdr_v5(trace, n)
                # into the page cache again by a plain read, as after a
                # copy or a reboot: readahead makes large folios there
                fd = os.open(trace, os.O_RDONLY)
                try:
                    os.fsync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    while os.read(fd, 1 << 20):
                        pass
                finally:
                    os.close(fd)
                rc, err, kb = peak_rss_kb([PERFGRAFT, "xray", trace, "--no-events",
                                           "-o", os.path.join(tmp, name + ".data")])
                self.assertEqual(rc, 0, err)
                peaks[name] = kb
            # 105 MB of trace: what stays mapped is the two threads'
            # current folios (2 MiB each at most) and the index's window
            # (was 40 MB against 11 MB for 1 MB)
            self.assertLess(peaks["big"] - peaks["small"], 12 << 10,
                            "peak RSS %d KiB for 105 MB of trace, %d KiB for 1 MB"
                            % (peaks["big"], peaks["small"]))


class XrayBoundTest(unittest.TestCase):
    """Samples are bounded by --thin-after, not by the trace's time span."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="perfgraft-xray-bound-")
        cls.tmp = cls._tmp.name
        cls.buildid = os.path.join(cls.tmp, "buildid")
        os.mkdir(cls.buildid)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def need_binary(self):
        if not (os.path.isfile(PERFGRAFT) and os.access(PERFGRAFT, os.X_OK)):
            self.fail("perfgraft binary not found or not executable: %s" % PERFGRAFT)

    def need_perf(self):
        if not shutil.which("perf"):
            self.skipTest("perf not installed")

    def write(self, case):
        path = os.path.join(self.tmp, case.name + ".xray")
        case.write(path)
        return path

    def stream(self, trace, limit, *args):
        """Converts into a pipe (uncompressed, nothing on disk) and counts
        the bytes; stops the converter once it wrote more than limit.
        Returns (bytes, exit status or None when stopped, stderr)."""
        with tempfile.TemporaryFile() as err:
            p = subprocess.Popen([PERFGRAFT, "xray", trace, "-o", "-"] + list(args),
                                 stdout=subprocess.PIPE, stderr=err)
            total = 0
            try:
                while True:
                    chunk = p.stdout.read(1 << 20)
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > limit:
                        p.kill()
                        break
                rc = p.wait(timeout=TIMEOUT)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                p.stdout.close()
            err.seek(0)
            text = err.read().decode("utf-8", "replace")
        return total, (None if total > limit else rc), text

    def test_large_ids_named_once(self):
        """Function IDs past the seen-bitmap (2^20) up to 2^32-1: each ID's
        xray:function is written once, before its first entry."""
        self.need_binary()
        self.need_perf()
        ids = [5, (1 << 20) + 7, (1 << 31) - 1, (1 << 32) - 1, 3 << 25, (1 << 20) + 8]
        t = gen.BasicTrace(3, "<", seed=9)
        th = t.thread(21, 20)
        tsc = 1000
        for rep in range(3):
            for fid in ids:
                th.enter(fid, tsc).exit(fid, tsc + 5)
                tsc += 10
        trace = self.write(t.build("large-ids"))
        out = os.path.join(self.tmp, "large-ids.data")
        self.convert(trace, out)
        p = subprocess.run(["perf", "--buildid-dir", self.buildid, "script", "-i", out,
                            "-F", "event,trace"],
                           capture_output=True, text=True, errors="replace", timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        named = collections.Counter(int(m.group(1)) for m in
                                    re.finditer(r"xray:function:\s+id=(\d+)", p.stdout))
        self.assertEqual(named, collections.Counter(ids), p.stdout[-3000:])

    def convert(self, trace, out, *args):
        p = run([PERFGRAFT, "xray", trace, "-o", out] + list(args))
        self.assertEqual(p.returncode, 0, describe(p))
        m = SAMPLES_RE.search(p.err)
        self.assertTrue(m, describe(p))
        p.samples = int(m.group(1))
        p.thinned = THINNED_RE.search(p.err)
        return p

    def perf_samples(self, data):
        """xray-time samples as perf script prints them:
        [(tid, ns, period, callchain)]."""
        p = subprocess.run(["perf", "--buildid-dir", self.buildid, "script", "--ns", "-i",
                            data, "-F", "tid,time,period,ip"],
                           capture_output=True, text=True, errors="replace", timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        out = []
        for line in p.stdout.splitlines():
            m = re.match(r"^\s*(\d+)\s+(\d+)\.(\d+):\s+(\d+)\s*$", line)
            if m:
                out.append((int(m.group(1)), int(m.group(2)) * 10**9 + int(m.group(3)),
                            int(m.group(4)), []))
            elif line.strip() and out:
                out[-1][3].append(line.split()[0])
        return [(tid, t, per, tuple(ch)) for tid, t, per, ch in out]

    def report(self, data, mode="--no-children"):
        """perf report's xray-time section: (event count, [row lines])."""
        p = subprocess.run(["perf", "--buildid-dir", self.buildid, "report", "-i", data,
                            mode, "--sort", "sym", "--stdio", "-g", "none",
                            "--percent-limit", "0"],
                           capture_output=True, text=True, errors="replace", timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        sec = p.stdout.split("of event 'xray-time'")[1].split("# Samples:")[0]
        count = int(re.search(r"# Event count \(approx\.\): (\d+)", sec).group(1))
        rows = sorted(l.strip() for l in sec.splitlines() if "%" in l and not l.startswith("#"))
        return count, rows

    def assert_same_grid(self, grid, thinned, period):
        """Every thinned sample stands for consecutive points of the full
        grid with its thread and stack, ending at its own grid point (or
        the one before: a sample owed at a stack change may be written at
        the first time the output had not passed, under one period later);
        together they are exactly the full grid's samples."""
        left = collections.Counter((tid, t, ch) for tid, t, per, ch in grid)
        self.assertTrue(all(per == period for _, _, per, _ in grid))
        for tid, t, per, ch in thinned:
            self.assertEqual(per % period, 0, "period %d not a multiple of %d" % (per, period))
            k = per // period
            for end in (t // period * period, t // period * period - period):
                pts = [(tid, end - i * period, ch) for i in range(k)]
                if all(left[x] > 0 for x in pts):
                    for x in pts:
                        left[x] -= 1
                    break
            else:
                self.fail("sample tid %d at %d ns with period %d: not %d grid samples of "
                          "its stack" % (tid, t, per, k))
        self.assertEqual(+left, collections.Counter(), "grid samples nobody took")

    def test_tiny_trace_with_long_calls_is_small(self):
        """192 bytes, two 59 s calls: was 11.8 M samples (1 GB uncompressed);
        now bounded by --thin-after, with the time exact and a message."""
        self.need_binary()
        case = gen.long_calls_fdr(1)
        self.assertEqual(len(case.data), 192)
        trace = self.write(case)
        n, rc, err = self.stream(trace, 8 << 20)
        self.assertIsNotNone(rc, "more than 8 MB into the pipe from a 192-byte trace")
        self.assertEqual(rc, 0, err)
        self.assertLess(n, 3 << 20)
        out = os.path.join(self.tmp, "long1.data")
        p = self.convert(trace, out)
        self.assertLess(os.path.getsize(out), 200 << 10)
        points = 59 * 10**9 // 10000
        self.assertLessEqual(p.samples, 2 * thin_bound(points, THIN_DEFAULT) + 3)
        self.assertGreater(p.samples, 2 * THIN_DEFAULT)
        # the message: the first thinned stack (the record that entered f
        # in tid 7), how to change it; the summary: both calls, exact time
        enter_f = [it.offset for it in case.items
                   if it.kind == "enter" and it.fields["func_id"] == 2][0]
        self.assertIn("warning: %s: offset %d: tid 7: " % (trace, enter_f), p.err)
        self.assertIn("--thin-after N", p.err)
        self.assertTrue(p.thinned, describe(p))
        self.assertEqual(int(p.thinned.group(1)), 2)
        self.assertEqual(int(p.thinned.group(2)), THIN_DEFAULT)
        self.assertEqual(int(p.thinned.group(3)), p.samples)
        self.assertEqual(int(p.thinned.group(4)), 2 * points)
        self.need_perf()
        count, rows = self.report(out)
        self.assertEqual(count, 2 * 59 * 10**9)       # ns: 118 s, as the full grid
        self.assertEqual(len(rows), 2, rows)
        self.assertTrue(all(r.startswith("50.00%") for r in rows), rows)
        self.assertEqual(len(self.perf_samples(out)), p.samples)

    def test_sixteen_threads_stay_small(self):
        """16 threads of the same: was 189 M samples (more than 3 GB)."""
        self.need_binary()
        case = gen.long_calls_fdr(16)
        self.assertLess(len(case.data), 4096)
        trace = self.write(case)
        n, rc, err = self.stream(trace, 64 << 20)
        self.assertIsNotNone(rc, "more than 64 MB into the pipe from a %d-byte trace"
                             % len(case.data))
        self.assertEqual(rc, 0, err)
        out = os.path.join(self.tmp, "long16.data")
        p = self.convert(trace, out)
        self.assertLess(os.path.getsize(out), 2 << 20)
        points = 59 * 10**9 // 10000
        self.assertLessEqual(p.samples, 16 * (2 * thin_bound(points, THIN_DEFAULT) + 3))
        self.assertEqual(p.err.count("warning: "), 1, p.err)     # the first one only
        self.assertTrue(p.thinned, describe(p))
        self.assertEqual(int(p.thinned.group(1)), 32)
        self.assertEqual(int(p.thinned.group(4)), 16 * 2 * points)

    def test_thin_after_option(self):
        """--thin-after N: 0 is the full grid; any N gives the same perf
        report (period sums) and the same grid samples, in fewer samples."""
        self.need_binary()
        self.need_perf()
        trace = self.write(gen.long_calls_fdr(1))
        runs = {}
        for n in ("0", None, "10", "1"):
            out = os.path.join(self.tmp, "opt-%s.data" % n)
            args = ["-F", "1000", "--no-events"] + (["--thin-after", n] if n else [])
            p = self.convert(trace, out, *args)
            runs[n] = (p, out)
        full, full_out = runs["0"]
        self.assertEqual(full.samples, 118000)
        self.assertIsNone(full.thinned, full.err)
        self.assertNotIn("warning", full.err)
        want = (self.report(full_out), self.report(full_out, "--children"))
        grid = self.perf_samples(full_out)
        self.assertEqual(len(grid), 118000)
        for n, limit in ((None, THIN_DEFAULT), ("10", 10), ("1", 1)):
            with self.subTest(thin_after=n):
                p, out = runs[n]
                self.assertTrue(p.thinned, p.err)
                self.assertEqual(int(p.thinned.group(2)), limit)
                self.assertEqual(int(p.thinned.group(4)), 118000)
                self.assertLessEqual(p.samples, 2 * thin_bound(59000, limit) + 3)
                self.assertEqual((self.report(out), self.report(out, "--children")), want)
                self.assert_same_grid(grid, self.perf_samples(out), 10**6)
        for bad in ("-1", "x", "", "1e3", "18446744073709551616"):
            with self.subTest(bad=bad):
                p = run([PERFGRAFT, "xray", trace, "-o", os.path.join(self.tmp, "bad.data"),
                         "--thin-after", bad])
                self.assertEqual(p.returncode, 2, describe(p))
                self.assertIn("--thin-after takes a number", p.err)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "bad.data")))

    def test_thinning_across_other_threads_and_gaps(self):
        """A thinned stack while another thread records every second, and
        --max-gap stretches: the samples stand for exactly the full grid's
        (what is before a gap is kept, the gap itself is not sampled)."""
        self.need_binary()
        self.need_perf()
        trace = self.write(gen.long_call_beside_ticks())
        # (a --max-gap under tid 8's 1 s ticks leaves 0.5 ms stretches:
        # few samples to thin, each gap ending a sample)
        for hz, gap, shrink in (("1000", [], 4), ("1000", ["--max-gap", "10"], 4),
                                ("997", ["--max-gap", "10"], 4),
                                ("10000", ["--max-gap", "0.5"], 1)):
            period = 10**9 // int(hz)
            full = os.path.join(self.tmp, "ticks-full.data")
            self.convert(trace, full, "-F", hz, "--no-events", "--thin-after", "0", *gap)
            grid = self.perf_samples(full)
            for n in ("1", "3", "50"):
                with self.subTest(hz=hz, gap=gap, thin_after=n):
                    out = os.path.join(self.tmp, "ticks.data")
                    p = self.convert(trace, out, "-F", hz, "--no-events", "--thin-after", n,
                                     *gap)
                    self.assertTrue(p.thinned, p.err)
                    self.assertLessEqual(p.samples, len(grid) / shrink)
                    self.assertEqual(int(p.thinned.group(4)), len(grid))
                    self.assert_same_grid(grid, self.perf_samples(out), period)


if __name__ == "__main__":
    unittest.main()
