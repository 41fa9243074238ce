"""perfgraft inject on the bundled recording (tests/fixtures/perf/demo.data
and the jitdump it mapped), so inject is checked with perf's readers even
where perf cannot record.  The dump is found with --jitdump-dir, as for a
recording moved off the machine it was made on."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures", "perf")
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(HERE, "..", "build", "perfgraft"))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", **kw)


@unittest.skipIf(shutil.which("perf") is None, "perf is not installed")
class InjectBundledRecording(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="pg-offline-")
        cls.addClassCleanup(cls.tmp.cleanup)
        t = cls.tmp.name
        cls.perf = ["perf", "--buildid-dir", os.path.join(t, "debug")]
        shutil.copy(os.path.join(FIX, "demo.data"), os.path.join(t, "perf.data"))
        cls.out = os.path.join(t, "perf.jit.data")
        cls.res = run([PERFGRAFT, "inject", "-i", "perf.data", "-o", cls.out,
                       "--jitdump-dir", FIX], cwd=t)

    def report(self, path):
        r = run(self.perf + ["report", "-i", path, "--stdio", "--no-children",
                             "--sort", "sym", "-g", "none", "-F", "sample,sym"],
                cwd=self.tmp.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        counts = {}
        for ln in r.stdout.splitlines():
            m = re.match(r"\s*(\d+)\s+\[(.)\]\s+(.*\S)", ln)
            if m:
                counts[m.group(3)] = counts.get(m.group(3), 0) + int(m.group(1))
        return counts

    def test_inject_succeeds(self):
        self.assertEqual(self.res.returncode, 0, self.res.stderr)
        self.assertRegex(self.res.stderr, r"inject: 1 jitdump \(\d+ LOAD")
        self.assertTrue(os.path.isdir(self.out + ".d"))

    def test_jit_symbols_resolve(self):
        before = self.report(os.path.join(self.tmp.name, "perf.data"))
        after = self.report(self.out)
        self.assertEqual(sum(before.values()), sum(after.values()),
                         "inject must not lose or add samples")
        fib = {k: v for k, v in after.items() if k.startswith("JS:*fib ")}
        self.assertTrue(fib, "JS:*fib not in the report: %s" % sorted(after)[:20])
        # the program spends most of its time in fib; before inject it is unresolved
        self.assertGreater(sum(fib.values()), 0.5 * sum(after.values()))
        self.assertFalse(any(k.startswith("JS:") for k in before))

    def test_srcline_of_the_hot_function(self):
        # leaf frames in the images only: addr2line on node itself takes minutes
        dsos = ",".join(sorted(os.listdir(self.out + ".d")))
        r = run(self.perf + ["script", "--no-inline", "--hide-call-graph", "--dsos", dsos,
                             "-i", self.out, "-F", "ip,sym,srcline"], cwd=self.tmp.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        src = [lines[i + 1].strip() for i, ln in enumerate(lines[:-1]) if "JS:*fib" in ln]
        self.assertTrue(src)
        # demo.js line 3 holds fib; node damaged the name, perfgraft recovered it
        self.assertGreater(sum(s == "demo.js:3" for s in src), len(src) // 2, src[:10])


if __name__ == "__main__":
    unittest.main()
