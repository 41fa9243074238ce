# SPDX-License-Identifier: MIT
"""Times in `perfgraft xray`'s output against `llvm-xray-14 account`
(issue 23, points 6-8).

For each trace, three things perfgraft gives are compared with what
`llvm-xray account -k -d` prints for the same trace:
  - `perf script -s perf-scripts/xray-account.py` on the converted
    perf.data: the text table (6 decimals) and the CSV (%e, 7 significant
    digits), row for row;
  - the samples perf report shows: every function account has a latency for
    is in the samples, with an inclusive period sum (perf report
    --children) between account's max and its sum, give or take one sample
    period per call (the grid);
  - the summary's "over X s": the trace's span in account's seconds.

Inputs:
  - the lit tests' YAML traces in ../shared/ext/llvm-xray/X86 (skipped
    when that directory is absent): `llvm-xray convert -f raw` makes a basic
    mode trace of each for perfgraft, account reads the YAML itself;
  - generated traces (tests/xray_gen.py) that run without ext: a cycle
    frequency of 0 (account takes ticks as seconds), latencies whose
    seconds need more digits than whole ns give (2.601 GHz), and calls of
    70-99 s with nothing recorded inside them (--max-gap used to drop
    them).  account reads them through `llvm-xray convert -f yaml`."""
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
from test_xray_scripts import parse_text, parse_csv, csv_key  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
SCRIPT = os.path.join(ROOT, "perf-scripts", "xray-account.py")
EXT = os.path.join(os.environ.get("PERFGRAFT_EXT", os.path.join(ROOT, "..", "shared", "ext")),
                   "llvm-xray", "X86")
LLVM_XRAY = shutil.which("llvm-xray-14") or shutil.which("llvm-xray")
PERIOD = 10000          # ns: perfgraft's default grid (100 kHz)

# the lit inputs account reads (account-empty-stack-error is an error case)
EXT_TRACES = ("account-deduce-tail-call", "account-keep-going",
              "account-recursive-calls-only-tail-call-deduction",
              "account-recursive-calls-only", "account-simple-case",
              "account-simple-sorting", "graph-color-simple-case",
              "graph-deduce-tail-call", "graph-simple-case",
              "graph-zero-latency-calls", "Inputs/graph-diff-A",
              "Inputs/graph-diff-B")
SUMMARY_RE = re.compile(r"records \(.*\) over ([\d.]+) s -> ")
REPORT_ROW = re.compile(r"^\s*[\d.]+%\s+(\d+)\s+\[\.\]\s+(0x[0-9a-f]+)\s*$")
FUNC_EV = re.compile(r"xray:function: id=(\d+) addr=(0x[0-9a-f]+) ")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                           timeout=300, **kw)


def yaml_span(text):
    """(first tsc, last tsc, cycle frequency) of a YAML trace."""
    freq = int(re.search(r"^\s*cycle-frequency:\s*(\d+)", text, re.M).group(1))
    tscs = [int(t) for t in re.findall(r"\btsc:\s*(\d+)", text)]
    return min(tscs), max(tscs), freq


def gen_freq0():
    """Cycle frequency 0: main (1) calls f (2) then g (3); ticks."""
    t = gen.BasicTrace(3, cycle_frequency=0, seed=31)
    a = t.thread(41, 40)
    a.enter(1, 10).enter(2, 11).exit(2, 14).enter(3, 15).exit(3, 16).exit(1, 17)
    return t.build("freq0")


def gen_rounding():
    """2.601 GHz (the lit traces' frequency): latencies of odd tick counts,
    whose seconds need more digits than whole ns give (7.901192e-06 s is
    20551 ticks; 7901 ns would print 7.901000e-06)."""
    t = gen.BasicTrace(3, cycle_frequency=2601000000, seed=32)
    a = t.thread(42, 40)
    tsc = 1000
    ticks = (20551, 99, 12345, 777777, 31, 4000001, 2601, 55555, 1234567, 9)
    a.enter(1, tsc)
    for i, n in enumerate(ticks):
        fid = 2 + i % 3
        a.enter(fid, tsc + 1).exit(fid, tsc + 1 + n)
        tsc += n + 7
    a.exit(1, tsc + 3)
    return t.build("rounding")


def gen_long_calls():
    """1 GHz: main (1) calls f (2) for 70 s, g (3) for 99 s and h (4) for
    85 s (which calls k (5) for 61 s); nothing is recorded inside them."""
    s = 10**9
    t = gen.BasicTrace(3, cycle_frequency=s, seed=33)
    a = t.thread(43, 40)
    a.enter(1, 5).enter(2, 6).exit(2, 6 + 70 * s)
    a.enter(3, 7 + 70 * s).exit(3, 7 + 169 * s)
    a.enter(4, 8 + 169 * s).enter(5, 9 + 170 * s).exit(5, 9 + 231 * s)
    a.exit(4, 8 + 254 * s).exit(1, 10 + 254 * s)
    return t.build("long-calls")


@unittest.skipIf(LLVM_XRAY is None, "llvm-xray is not installed")
@unittest.skipIf(shutil.which("perf") is None, "perf is not installed")
class XrayTimesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="pg-xray-times-")
        cls.tmp = cls._tmp.name
        cls.perf = ["perf", "--buildid-dir", os.path.join(cls.tmp, "buildid")]

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    # ---- the pieces ----------------------------------------------------------
    def account(self, yaml_path, *args):
        r = run([LLVM_XRAY, "account", "-k", "-d"] + list(args) + [yaml_path])
        self.assertEqual(r.returncode, 0, "llvm-xray account %s: %s" % (yaml_path, r.stderr))
        return r.stdout

    def script(self, data, *args):
        r = run(self.perf + ["script", "-i", data, "-s", SCRIPT, "--"] + list(args),
                cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        return r.stdout

    def inclusive(self, data):
        """{function id: inclusive time in ns} from the xray-time samples
        perf reads (perf script: period and call chain).  Without a binary
        perf has no symbols, and perf report --children does not add an
        unresolved caller's children to it, so the chains are summed here:
        a function is its address as the leaf and its address + 1 as a
        caller (perfgraft writes callers one byte in); a sample counts once
        for each function in its chain."""
        r = run(self.perf + ["script", "-i", data, "-F", "event,trace"])
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        ids = {int(a, 16): int(i) for i, a in FUNC_EV.findall(r.stdout)}
        r = run(self.perf + ["script", "-i", data,
                             "-F", "period,ip"])
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        out = {}
        samples = []
        for line in r.stdout.splitlines():
            f = line.split()
            if len(f) == 1 and f[0].isdigit() and not line.startswith("\t"):
                samples.append([int(f[0]), set()])
            elif len(f) == 1 and samples:
                a = int(f[0], 16)
                samples[-1][1].add(ids.get(a, ids.get(a - 1, -1)))
        for period, fids in samples:
            for fid in fids:
                out[fid] = out.get(fid, 0) + period
        return out

    def compare(self, name, trace, yaml_path):
        """Converts trace and compares it with account on yaml_path."""
        data = os.path.join(self.tmp, name.replace("/", "_") + ".data")
        r = run([PERFGRAFT, "xray", trace, "-o", data])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(yaml_path) as f:
            first, last, freq = yaml_span(f.read())
        # the summary: the span in account's seconds (ticks when freq is 0)
        span = (last - first) / freq if freq else float(last - first)
        m = SUMMARY_RE.search(r.stderr)
        self.assertTrue(m, r.stderr)
        self.assertEqual(m.group(1), "%.6f" % span, "%s: summary: %s" % (name, r.stderr))
        if freq == 0:
            self.assertIn("cycle frequency 0", r.stderr)
            self.assertIn("ticks are taken as seconds", r.stderr)
        # the script's tables, to account's digits
        mine, ref = parse_text(self.script(data)), parse_text(self.account(yaml_path))
        self.assertEqual(mine[0], ref[0], name)
        self.assertEqual(mine[2], ref[2], "%s: text table" % name)
        mine = parse_csv(self.script(data, "-f", "csv"))[1]
        ref = parse_csv(self.account(yaml_path, "-f", "csv"))[1]
        self.assertEqual([csv_key(x) for x in mine], [csv_key(x) for x in ref],
                         "%s: CSV" % name)
        # the samples: each function's inclusive time is at least its
        # longest call and at most the sum of its calls (recursion), to a
        # grid period per call; freq 0: ticks as seconds
        incl = self.inclusive(data)
        for row in ref:
            fid, count = int(row["funcid"]), int(row["count"])
            tol = PERIOD * (count + 1)
            lo = round(float(row["max"]) * 1e9) - tol
            hi = round(float(row["sum"]) * 1e9) + tol
            got = incl.get(fid, 0)
            self.assertTrue(lo <= got <= hi,
                            "%s: function %d: perf report's inclusive period %d ns, "
                            "account's max %s s, sum %s s" % (name, fid, got, row["max"],
                                                              row["sum"]))
        return len(ref)

    def generated(self, case):
        trace = os.path.join(self.tmp, case.name + ".xray")
        case.write(trace)
        r = run([LLVM_XRAY, "convert", "-f", "yaml", trace])
        self.assertEqual(r.returncode, 0, r.stderr)
        # account refuses basic-mode YAML of version 3 as it does raw
        # multi-version input: version 1, as test_xray_scripts.py does
        text = re.sub(r"^(  version:\s+)\d+$", r"\g<1>1", r.stdout, count=1, flags=re.M)
        y = trace + ".yaml"
        with open(y, "w") as f:
            f.write(text)
        return self.compare(case.name, trace, y)

    # ---- generated cases (always) -------------------------------------------
    def test_frequency_zero_counts_ticks_as_seconds(self):
        """Point 6: frequency 0, as account: ticks are seconds, with a warning."""
        self.assertEqual(self.generated(gen_freq0()), 3)

    def test_latencies_rounded_to_account_digits(self):
        """Point 7: the CSV's 7 significant digits are account's."""
        self.assertEqual(self.generated(gen_rounding()), 4)

    def test_long_open_calls_are_sampled(self):
        """Point 8: calls of 61-99 s with no record inside are not gaps."""
        self.assertEqual(self.generated(gen_long_calls()), 5)

    def test_idle_stretch_is_still_reported(self):
        """--max-gap still names a stretch with no call open (nothing is
        sampled there either way) and the summary counts it."""
        t = gen.BasicTrace(3, seed=34)
        a = t.thread(44, 40)
        a.enter(1, 5).exit(1, 1000).enter(2, 5 * 10**9).exit(2, 5 * 10**9 + 100)
        trace = os.path.join(self.tmp, "idle.xray")
        t.build("idle").write(trace)
        r = run([PERFGRAFT, "xray", trace, "-o", os.path.join(self.tmp, "idle.data"),
                 "--max-gap", "2"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no call was open for 5.000 s", r.stderr)
        self.assertIn("1 idle gaps", r.stderr)

    # ---- the lit inputs (when ../shared/ext is there) -------------------------
    @unittest.skipUnless(os.path.isdir(EXT), "no ../shared/ext/llvm-xray (lit inputs)")
    def test_ext_lit_traces(self):
        compared = 0
        for name in EXT_TRACES:
            with self.subTest(trace=name):
                y = os.path.join(EXT, name + ".yaml")
                raw = os.path.join(self.tmp, os.path.basename(name) + ".xray")
                r = run([LLVM_XRAY, "convert", "-f", "raw", y, "-o", raw])
                self.assertEqual(r.returncode, 0, r.stderr)
                compared += self.compare(name, raw, y)
        self.assertGreater(compared, 0)


if __name__ == "__main__":
    unittest.main()
