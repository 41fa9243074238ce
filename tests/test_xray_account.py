# SPDX-License-Identifier: MIT
"""`perfgraft xray --account` (issue 26, point 5) against llvm-xray 14's
account, byte for byte.

The reference is account's "YAML route": `llvm-xray convert -f yaml` of the
trace (records sorted by time), the header's version set to 1 (as
test_xray_scripts.py does), then `llvm-xray account` on that YAML with
the same options.  perfgraft reads the raw trace.  Both outputs, text and
CSV, must be the same bytes, rows with equal sort keys included (account's
DenseMap order, then libstdc++'s std::sort, which perfgraft reproduces).

Inputs:
  - the scenarios of tests/gen-xray-traces.sh (real LLVM 14 traces: threads,
    recursion, tail exits, ring-buffer wraps that lose entries, events);
  - the binary traces of LLVM's lit tests in ../shared/ext/llvm-xray/X86
    (PERFGRAFT_EXT), with the binaries and maps of those tests;
  - the lit tests' account-*.yaml traces, made raw with `llvm-xray convert
    -f raw`, run with each RUN line's options (account reads the YAML);
  - the ppc64le and aarch64 fixtures;
  - a generated trace of 60 functions with many equal counts and times
    (tests/xray_gen.py): every sort key, both orders, --top, text and CSV.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import xray_gen as gen  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
EXT = os.path.join(os.environ.get("PERFGRAFT_EXT", os.path.join(ROOT, "..", "shared", "ext")),
                   "llvm-xray", "X86")
FIXTURES = os.path.join(HERE, "fixtures")
GEN = os.path.join(HERE, "gen-xray-traces.sh")
LLVM_XRAY = shutil.which("llvm-xray-14") or shutil.which("llvm-xray")
SORT_KEYS = ("funcid", "count", "min", "med", "90p", "99p", "max", "sum")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                          timeout=600, **kw)


def gen_ties():
    """60 functions on 3 threads, counts of 1-4 and latencies of a few
    values: most sort keys tie, and 60 rows take std::sort past its
    insertion sort (16)."""
    t = gen.BasicTrace(3, cycle_frequency=1000, seed=41)
    ths = [t.thread(100 + i, 99) for i in range(3)]
    tsc = [1000, 1000, 1000]
    for f in range(1, 61):
        k = f % 3
        for c in range(1 + (f * 7) % 4):
            d = (5, 9, 5, 13)[(f + c) % 4]
            # ids spread out so the hash table's order is not the id order
            fid = f * 97 % 1000 + 1
            ths[k].enter(fid, tsc[k]).exit(fid, tsc[k] + d)
            tsc[k] += d + 1
    return t.build("ties")


@unittest.skipIf(LLVM_XRAY is None, "llvm-xray is not installed")
class XrayAccount(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="pg-xray-account-")
        cls.tmp = cls._tmp.name
        cls.yamls = {}

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    # ---- the two routes ------------------------------------------------------
    def yaml_of(self, trace):
        if trace not in self.yamls:
            r = run([LLVM_XRAY, "convert", "-f", "yaml", trace])
            self.assertEqual(r.returncode, 0, "%s: llvm-xray convert: %s" % (trace, r.stderr))
            text, n = re.subn(r"^(  version:\s+)\d+$", r"\g<1>1", r.stdout, count=1, flags=re.M)
            self.assertEqual(n, 1, trace)
            y = os.path.join(self.tmp, "y%d.yaml" % len(self.yamls))
            with open(y, "w") as f:
                f.write(text)
            self.yamls[trace] = y
        return self.yamls[trace]

    def llvm(self, yaml_path, args, binary=None):
        cmd = [LLVM_XRAY, "account"] + list(args)
        if binary:
            cmd += ["-m", binary]
        return run(cmd + [yaml_path])

    def mine(self, trace, args, binary=None, extra=("-q",)):
        cmd = [PERFGRAFT, "xray", "--account"] + list(extra) + list(args)
        if binary:
            cmd += ["-b", binary]
        return run(cmd + [trace])

    def same(self, trace, binary=None, args=("-k", "-d"), yaml_path=None):
        """Both routes succeed and print the same bytes; returns the rows."""
        ref = self.llvm(yaml_path or self.yaml_of(trace), args, binary)
        got = self.mine(trace, args, binary)
        what = "%s %s%s" % (trace, " ".join(args), " -m " + binary if binary else "")
        self.assertEqual(ref.returncode, 0, "%s: llvm-xray account: %s" % (what, ref.stderr))
        self.assertEqual(got.returncode, 0, "%s: perfgraft: %s" % (what, got.stderr))
        self.assertEqual(got.stdout, ref.stdout, what)
        return len(ref.stdout.splitlines()) - (1 if "csv" in args else 2)

    # ---- real traces ---------------------------------------------------------
    def scenarios(self):
        if not hasattr(self, "_scen"):
            import json
            out = os.path.join(self.tmp, "gen")
            env = dict(os.environ)
            env.pop("TMPDIR", None)
            r = run(["bash", GEN, out], env=env)
            js = os.path.join(out, "scenarios.json")
            if r.returncode != 0 or not os.path.isfile(js):
                self.skipTest("gen-xray-traces.sh: %s" % (r.stderr.strip().splitlines() or ["?"])[-1])
            with open(js) as f:
                XrayAccount._scen = [
                    (os.path.join(out, s["trace"]),
                     None if s["expect"].get("instr_map_unreadable_by_llvm_xray")
                     else os.path.join(out, s["binary"]))
                    for s in json.load(f)
                    if not s["expect"].get("llvm_xray_fails") and not s["expect"].get("header_only")]
        return self._scen

    def test_generated_traces(self):
        rows = 0
        for trace, binary in self.scenarios():
            for fmt in ((), ("-f", "csv")):
                with self.subTest(trace=os.path.basename(trace), fmt=fmt):
                    rows += self.same(trace, binary, ("-k", "-d") + fmt)
        self.assertGreater(rows, 50)

    def test_generated_options(self):
        # without -d, without -k, --recursive-calls-only: account's
        # decisions record by record (exit status and table)
        for trace, binary in self.scenarios():
            y = self.yaml_of(trace)
            for args in ((), ("-k",), ("-d",), ("-k", "--recursive-calls-only"),
                         ("-k", "-d", "--recursive-calls-only")):
                with self.subTest(trace=os.path.basename(trace), args=args):
                    ref = self.llvm(y, args, binary)
                    got = self.mine(trace, args, binary)
                    self.assertEqual(got.returncode, ref.returncode, got.stderr)
                    self.assertEqual(got.stdout, ref.stdout)

    def test_keep_going(self):
        unbal = [t for t, _ in self.scenarios() if t.endswith("fdr-unbal.xray")]
        if not unbal:
            self.skipTest("no fdr-unbal scenario")
        trace = unbal[0]
        ref = self.llvm(self.yaml_of(trace), ())
        got = self.mine(trace, (), extra=())
        # account stops at the first exit without an entry: no table
        self.assertEqual(ref.returncode, 1)
        self.assertEqual(got.returncode, 1)
        self.assertEqual(got.stdout, "")
        self.assertRegex(got.stderr, r"fdr-unbal.xray: offset \d+: exit of function \d+ on "
                                     r"thread \d+ with no call open.*-k skips")
        # -k: each record account rejects is a warning (-v: all of them)
        ref = self.llvm(self.yaml_of(trace), ("-k",))
        got = self.mine(trace, ("-k", "-v"), extra=())
        self.assertEqual(got.returncode, 0)
        self.assertEqual(got.stdout, ref.stdout)
        self.assertEqual(got.stderr.count("skipped (-k)"),
                         ref.stderr.count("Error processing record"))

    def test_ext_binary_traces(self):
        if not os.path.isdir(EXT):
            self.skipTest("no %s" % EXT)
        inp = os.path.join(EXT, "Inputs")
        n = 0
        for name in sorted(os.listdir(inp)):
            if name.endswith(".xray"):
                for fmt in ((), ("-f", "csv")):
                    with self.subTest(trace=name, fmt=fmt):
                        n += self.same(os.path.join(inp, name), None, ("-k", "-d") + fmt)
        simple = os.path.join(inp, "naive-log-simple.xray")
        for m in ("elf64-sample-o2.bin", "elf64-objcopied-instrmap.bin",
                  "simple-xray-instrmap.yaml"):
            for fmt in ((), ("-f", "csv")):
                with self.subTest(map=m, fmt=fmt):
                    n += self.same(simple, os.path.join(inp, m), ("-k", "-d") + fmt)
        self.assertGreater(n, 20)

    def test_lit_account_tests(self):
        """Each account-*.yaml lit test: its RUN lines' options, account on
        the YAML, perfgraft on the same records made raw."""
        if not os.path.isdir(EXT):
            self.skipTest("no %s" % EXT)
        runs = 0
        for name in sorted(os.listdir(EXT)):
            if not (name.startswith("account-") and name.endswith(".yaml")):
                continue
            y = os.path.join(EXT, name)
            raw = os.path.join(self.tmp, name + ".xray")
            r = run([LLVM_XRAY, "convert", "-f", "raw", "-o", raw, y])
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(y) as f:
                lines = [ln for ln in f if re.match(r"#\s*RUN:.*llvm-xray account", ln)]
            self.assertTrue(lines, name)
            for ln in lines:
                words = ln.split("|")[0].split()
                args = words[words.index("account") + 1:]
                args = [a.replace("%S", EXT) for a in args if a not in ("%s", "2>&1")]
                if "-o" in args:
                    del args[args.index("-o"):args.index("-o") + 2]
                with self.subTest(test=name, args=args):
                    ref = run([LLVM_XRAY, "account"] + args + [y])
                    got = run([PERFGRAFT, "xray", "--account", "-q"] + args + [raw])
                    self.assertEqual(got.returncode, ref.returncode, got.stderr)
                    self.assertEqual(got.stdout, ref.stdout)
                    runs += 1
        self.assertGreaterEqual(runs, 15)

    def test_fixtures(self):
        # ppc64le: the binary (llvm-xray 14 reads its map); the cycle
        # frequency is 0 there, so account prints ticks as seconds
        import lzma
        ppc = os.path.join(FIXTURES, "xray-ppc64le")
        prog = os.path.join(self.tmp, "ppc-prog")
        with lzma.open(os.path.join(ppc, "prog.xz")) as f, open(prog, "wb") as o:
            o.write(f.read())
        for t in ("prog-fdr.xray", "prog-basic.xray"):
            for fmt in ((), ("-f", "csv")):
                with self.subTest(trace=t, fmt=fmt):
                    self.same(os.path.join(ppc, t), prog, ("-k", "-d") + fmt)
        # relocatable objects of another target: llvm-xray 14 cannot place
        # their functions (every one at 0: one ID), so the figures are
        # compared without a map, and perfgraft names them from the object
        a64 = os.path.join(FIXTURES, "xray-aarch64")
        for t in ("prog-fdr.xray", "prog-basic.xray"):
            with self.subTest(trace=t):
                self.same(os.path.join(a64, t))
                named = self.mine(os.path.join(a64, t), ("-k", "-d"),
                                  os.path.join(a64, "prog.o"))
                self.assertEqual(named.returncode, 0, named.stderr)
                self.assertIn(": rec\n", named.stdout)
                self.assertIn(": arm::leaf(int)\n", named.stdout)

    # ---- sorting -------------------------------------------------------------
    def test_sort_ties_in_account_order(self):
        case = gen_ties()
        trace = os.path.join(self.tmp, "ties.xray")
        case.write(trace)
        y = self.yaml_of(trace)
        for key in SORT_KEYS:
            for order in ("asc", "dsc"):
                for top in ((), ("-p", "7")):
                    for fmt in ((), ("-f", "csv")):
                        args = ("-s", key, "-r", order) + top + fmt
                        with self.subTest(args=" ".join(args)):
                            self.same(trace, None, args, y)
        # llvm-xray's single-dash spellings, as pasted from an account
        # command line
        for args in (("-keep-going", "-deduce-sibling-calls", "-format=csv", "-sort", "count",
                      "-sortorder=dsc", "-top=9"),
                     ("-format", "csv", "-sort=sum", "-sortorder", "dsc", "-top", "4"),
                     ("--format=text", "--sort=min", "--top=5", "-recursive-calls-only")):
            with self.subTest(args=" ".join(args)):
                self.same(trace, None, args, y)
        # -s func: by name (account lists it but aborts); names are #ID here
        got = self.mine(trace, ("-f", "csv", "-s", "func", "-r", "dsc"))
        names = [ln.rsplit(",", 1)[1] for ln in got.stdout.splitlines()[1:]]
        self.assertEqual(len(names), 60)
        self.assertEqual(names, sorted(names, reverse=True))
        # the count line is not cut by --top
        got = self.mine(trace, ("--top", "3", "--sort", "count"))
        self.assertEqual(got.stdout.splitlines()[0], "Functions with latencies: 60")
        self.assertEqual(len(got.stdout.splitlines()), 5)

    def test_deep_stacks_deduction(self):
        """Stacks past 256 frames (perfgraft then counts open frames by
        function, so that -d's search for an exit's function costs no scan
        of the whole stack): exits of functions in the stack, deep down,
        and not in it, against the YAML route, with -d and
        --recursive-calls-only."""
        import random
        rng = random.Random(7)
        t = gen.BasicTrace(3, cycle_frequency=1000, padding="zero", seed=5)
        ths = [t.thread(70 + i, 70) for i in range(2)]
        tsc = 100
        for rnd in range(6):
            for th in ths:
                for _ in range(300 + 40 * rnd):
                    tsc += rng.randint(0, 2)
                    th.enter(rng.randint(1, 40), tsc)
                for _ in range(250):
                    tsc += rng.randint(0, 3)
                    th.exit(rng.randint(1, 60), tsc)   # 41-60: never entered
        trace = os.path.join(self.tmp, "deep.xray")
        t.build("deep").write(trace)
        for args in (("-k", "-d"), ("-k", "-d", "--recursive-calls-only"),
                     ("-k", "-d", "-f", "csv", "-s", "count")):
            with self.subTest(args=args):
                self.same(trace, None, args)

    # ---- the command ---------------------------------------------------------
    def test_output_file_and_usage(self):
        case = gen_ties()
        trace = os.path.join(self.tmp, "cli.xray")
        case.write(trace)
        out = os.path.join(self.tmp, "table.csv")
        r = self.mine(trace, ("-f", "csv", "-o", out))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "")
        with open(out) as f:
            self.assertEqual(f.read(), self.mine(trace, ("-f", "csv")).stdout)
        self.assertEqual(sorted(os.listdir(self.tmp)).count("table.csv"), 1)
        self.assertFalse([n for n in os.listdir(self.tmp) if n.startswith(".table.csv")])
        self.assertEqual(os.stat(out).st_mode & 0o777, 0o600)  # as dump -o, perf.data
        # -i and standard input: the same table (the one grammar of issue 25)
        want = self.mine(trace, ("-f", "csv")).stdout
        r = run([PERFGRAFT, "xray", "--account", "-q", "-f", "csv", "-i", trace])
        self.assertEqual((r.returncode, r.stdout), (0, want), r.stderr)
        with open(trace, "rb") as f:
            r = subprocess.run([PERFGRAFT, "xray", "--account", "-q", "-f", "csv", "-"],
                               stdin=f, capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout), (0, want), r.stderr)
        # a run that fails leaves an earlier table as it was
        bad = os.path.join(self.tmp, "bad.xray")
        with open(bad, "wb") as f:
            f.write(b"\x07" * 40)
        r = run([PERFGRAFT, "xray", "--account", "-q", "-o", out, bad])
        self.assertEqual(r.returncode, 1, r.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), want)
        # the summary line (without -q)
        r = self.mine(trace, (), extra=())
        self.assertRegex(r.stderr, r"xray --account: .*cli.xray: \d+ function records on 3 "
                                   r"threads, \d+ calls of 60 functions")
        for args, msg in (
                (("--account", "-F", "10", trace), "--frequency is not an option of --account"),
                (("--account", trace, trace), "--account takes one trace"),
                (("--account", "-o", trace, trace), "would destroy the input"),
                (("-s", "count", trace), "--sort is an option of --account"),
                (("--account", "-s", "bogus", trace), "--sort takes funcid"),
                (("--account", "-r", "up", trace), "--sortorder takes asc or dsc"),
                (("--account", "-f", "json", trace), "--format takes text or csv"),
                (("--account", "-p", "x", trace), "--top takes a number")):
            with self.subTest(args=args):
                r = run([PERFGRAFT, "xray"] + list(args))
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(msg, r.stderr)
                self.assertEqual(r.stdout, "")
        # a trace that is not one
        bad = os.path.join(self.tmp, "bad.xray")
        with open(bad, "wb") as f:
            f.write(b"\x07" * 40)
        r = self.mine(bad, ())
        self.assertEqual(r.returncode, 1)
        self.assertIn("bad.xray", r.stderr)


if __name__ == "__main__":
    unittest.main()
