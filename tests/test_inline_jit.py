"""Inline chains of JIT code, end to end, with real perf.

tests/jit/inlinejit.c runs one real x86-64 JIT function, jit_outer, whose
three equal spin loops are its own code, `helper` inlined at outer.src:11,
and `leaf` inlined into helper at helper.src:21 (helper at outer.src:12);
it announces them through pg_jitwriter_load_ext() (an INLINE_INFO record)
and ends with pg_jitwriter_unload() (UNLOAD).  Recorded once with
`perf record -k mono --call-graph dwarf`, then:
  - `perfgraft inject` + `perf report --inline` and `perf script --inline`
    show leaf and helper as inlined frames of jit_outer, each region about
    a third of the samples, with the callers' call lines;
  - `perf inject --jit` (6.1) skips the extension records ("unknown record
    type ... skipping") and still names jit_outer;
  - addr2line -i on perfgraft's image prints the chain;
  - `perfgraft dump --json` shows both records.
perf 6.1.192 (as every perf since the 2023 change that took inline
expansion out of frame-pointer call chains) expands inlines only for
DWARF-unwound frames, hence --call-graph dwarf.  perf runs with a
--buildid-dir of its own in a temporary directory.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PERF = os.environ.get("PERF", "perf")
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
INLINEJIT = os.path.join(os.path.dirname(os.path.abspath(PERFGRAFT)), "tests", "inlinejit")
REGION = 64
INLINE_INFO, UNLOAD = 0x70670001, 0x70670002


def run(cmd, cwd, check=True):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    if check and p.returncode != 0:
        raise AssertionError("exit %d: %s\n%s" % (p.returncode, " ".join(cmd), err[-2000:]))
    return p.returncode, out, err


class InlineJit(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(INLINEJIT, os.X_OK):
            raise AssertionError("%s is not built" % INLINEJIT)
        if subprocess.run([INLINEJIT], stderr=subprocess.DEVNULL).returncode == 77:
            raise unittest.SkipTest("inlinejit generates x86-64 code only")
        if shutil.which(PERF) is None:
            raise unittest.SkipTest("perf not found")
        cls.tmp = tempfile.mkdtemp(prefix="perfgraft-inlinejit.")
        cls.bid = os.path.join(cls.tmp, "debug")
        rc, out, err = run([PERF, "--buildid-dir", cls.bid, "record", "-q", "-k", "mono",
                            "--call-graph", "dwarf", "-e", "cpu-clock", "-o", "perf.data",
                            "--", INLINEJIT, ".", "600"], cls.tmp, check=False)
        if rc != 0 or not os.path.exists(os.path.join(cls.tmp, "perf.data")):
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise unittest.SkipTest("perf record cannot run here: " + err[-300:])
        cls.pid = int(re.search(r"^pid (\d+)", out, re.M).group(1))
        cls.dump = re.search(r"^dump (\S+)", out, re.M).group(1)
        cls.addr = int(re.search(r"^func (0x[0-9a-f]+)", out, re.M).group(1), 16)
        run([PERFGRAFT, "inject", "-i", "perf.data", "-o", "pg.data"], cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def perf(self, *args, check=True):
        return run([PERF, "--buildid-dir", self.bid] + list(args), self.tmp, check=check)

    def test_report_inline(self):
        _, out, _ = self.perf("report", "-i", "pg.data", "--stdio", "--inline",
                              "--no-children", "--percent-limit", "1")
        # the branches of jit_outer's entry: a percentage, then its frames
        branches = {}
        parts = re.split(r"--([\d.]+)%--", out)
        short = []
        for pct, text in zip(parts[1::2], parts[2::2]):
            frames = [ln.strip(" |") for ln in text.splitlines()]
            frames = short + [f for f in frames if f]
            # a branch of fewer frames goes on in the branch nested under
            # it (a sample or two whose chain stopped there split it off)
            short = frames if len(frames) < 3 else []
            if not short:
                branches[tuple(frames[:3])] = float(pct)
        want = {
            ("leaf (inlined)", "helper (inlined)", "jit_outer"): "leaf",
            ("helper (inlined)", "jit_outer", "main"): "helper",
            ("jit_outer", "main", "__libc_start_call_main"): "own",
        }
        for chain, what in want.items():
            self.assertIn(chain, branches, "%s chain missing:\n%s" % (what, out[:3000]))
            # three loops of equal trip counts: about a third each
            self.assertGreater(branches[chain], 20.0, "%s: %s" % (what, branches))
            self.assertLess(branches[chain], 47.0, "%s: %s" % (what, branches))

    def test_script_inline_lines(self):
        _, out, _ = self.perf("script", "-i", "pg.data", "-F", "ip,sym,srcline", "--inline")
        # the deepest chain with the lines of each frame
        self.assertRegex(out, r"\S+ leaf\n  leaf\.src:30 \(inlined\)\n\s+\S+ helper\n"
                              r"  helper\.src:21 \(inlined\)\n\s+\S+ jit_outer\n  outer\.src:12\n")
        self.assertRegex(out, r"\S+ helper\n  helper\.src:20 \(inlined\)\n\s+\S+ jit_outer\n"
                              r"  outer\.src:11\n")

    def test_perf_inject_skips_the_extension(self):
        rc, _, err = self.perf("inject", "--jit", "-i", "perf.data", "-o", "perf.jit.data")
        self.assertEqual(rc, 0)
        self.assertIn("unknown record type %d, skipping" % INLINE_INFO, err)
        self.assertIn("unknown record type %d, skipping" % UNLOAD, err)
        _, out, _ = self.perf("report", "-i", "perf.jit.data", "--stdio", "--no-children",
                              "-g", "none", "--sort", "sym")
        # the top row, most of the samples: under a sanitizer on a loaded
        # machine its start-up and leak check took 13% (86.49% in a CI run)
        rows = re.findall(r"^\s*(\d+\.\d+)%\s+\[.\] (\S+)", out, re.M)
        self.assertTrue(rows, out)
        self.assertEqual(rows[0][1], "jit_outer", out)
        self.assertGreaterEqual(float(rows[0][0]), 75.0, out)

    def test_addr2line_chain(self):
        images = os.path.join(self.tmp, "pg.data.d")
        # under user stacks each image is in a directory of its own
        (img,) = [os.path.join(d, f) for d, _, fs in os.walk(images) for f in fs
                  if f.endswith(".so")]
        # where the function sits in its image: elf -l lays it out as inject does
        _, out, _ = run([PERFGRAFT, "elf", "-l", "-q", "-o", "elf", self.dump], self.tmp)
        pgoff = int(out.split("\t")[4], 16)
        _, a2l, _ = run(["addr2line", "-f", "-i", "-e", os.path.join(images, img),
                         hex(pgoff + 2 * REGION + 5)], self.tmp)
        self.assertEqual(a2l.split(), ["leaf", "leaf.src:30", "helper", "helper.src:21",
                                       "jit_outer", "outer.src:12"])

    def test_dump_records(self):
        _, out, _ = run([PERFGRAFT, "dump", "--json", self.dump], self.tmp)
        doc = json.loads(out)
        recs = {r["id"]: r for r in doc["records"]}
        inl = recs[INLINE_INFO]
        self.assertEqual(inl["type"], "INLINE_INFO")
        self.assertEqual(inl["code_addr"], self.addr)
        self.assertEqual([(r["off"], r["len"], [f["func"] for f in r["frames"]])
                          for r in inl["ranges"]],
                         [(64, 64, ["helper", "jit_outer"]),
                          (128, 64, ["leaf", "helper", "jit_outer"])])
        self.assertEqual(recs[UNLOAD]["code_addr"], self.addr)
        self.assertEqual(doc["summary"]["inline_infos"], 1)
        self.assertEqual(doc["summary"]["unloads"], 1)


if __name__ == "__main__":
    unittest.main()
