"""perfgraft inject: how dumps are found (perf's rule: the recorded mmap of
.../jit-<pid>.dump by that pid, also when shown '(deleted)'; --jitdump-dir
for dumps that moved) and MOVE records (the same image bytes mapped again at
the new address), checked with perfgraft dump and perf script."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jitdump_gen  # noqa: E402
import perfdata_gen as pg  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(HERE, "..", "build", "perfgraft"))
PID = 4242
OLD, NEW = 0x7f0000001000, 0x7f0000200000


class Discovery(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="pg-disc-")
        self.addCleanup(self.tmp.cleanup)
        self.d = self.tmp.name

    def dump(self, where, move=False, pid=PID):
        jd = jitdump_gen.JitdumpBuilder(pid=pid)
        jd.load(b"JS:*moved", jitdump_gen.x86_64_code(0x40, 1), OLD, 0, timestamp=1000)
        if move:
            jd.move(0, OLD, NEW, 0x40, timestamp=3000)
        os.makedirs(where, exist_ok=True)
        path = os.path.join(where, "jit-%d.dump" % pid)
        jd.write(path)
        return path

    def inject(self, marker, mapper=PID, args=(), samples=((OLD + 8, 2000),)):
        b = pg.PerfDataBuilder(attrs=[pg.Attr(ids=[7])])
        b.comm(PID, PID, "node", 1)
        b.mmap2(mapper, mapper, 0x10000, 4096, 0, marker, 2, prot=5)
        for ip, t in samples:
            b.sample(ip, PID, PID, t)
        b.finished_round()
        src = os.path.join(self.d, "perf.data")
        b.write(src)
        out = os.path.join(self.d, "out.data")
        r = subprocess.run([PERFGRAFT, "inject", "-i", src, "-o", out, *args],
                           capture_output=True, text=True, cwd=self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        d = json.loads(subprocess.run([PERFGRAFT, "dump", "--json", out],
                                      capture_output=True, text=True).stdout)
        mm = [x for x in d["records"] if x["name"] == "MMAP2"]
        return r.stderr, mm, out

    def injected(self, mm):
        return [x for x in mm if x["filename"].endswith(".so")]

    def test_marker_found_and_dropped(self):
        path = self.dump(os.path.join(self.d, "run"))
        err, mm, _ = self.inject(path)
        self.assertEqual(len(self.injected(mm)), 1, err)
        self.assertFalse(any(x["filename"] == path for x in mm), "marker kept")

    def test_deleted_suffix(self):
        path = self.dump(os.path.join(self.d, "run"))
        err, mm, _ = self.inject(path + " (deleted)")
        self.assertEqual(len(self.injected(mm)), 1, err)

    def test_jitdump_dir_finds_a_moved_dump(self):
        self.dump(os.path.join(self.d, "moved"))
        gone = os.path.join(self.d, "gone", "jit-%d.dump" % PID)
        err, mm, _ = self.inject(gone)
        self.assertEqual(self.injected(mm), [])
        self.assertIn(gone, err)
        self.assertIn("--jitdump-dir", err)
        err, mm, _ = self.inject(gone, args=("--jitdump-dir", os.path.join(self.d, "moved")))
        self.assertEqual(len(self.injected(mm)), 1, err)

    def test_pid_rule(self):
        # perf 6.1: the digits must be the mapping process's pid
        path = self.dump(os.path.join(self.d, "run"), pid=999)
        err, mm, _ = self.inject(path, mapper=PID)
        self.assertEqual(self.injected(mm), [])
        self.assertTrue(any(x["filename"] == path for x in mm), "not a marker: kept")

    def test_move_maps_the_same_bytes_again(self):
        path = self.dump(os.path.join(self.d, "run"), move=True)
        err, mm, out = self.inject(path, samples=((OLD + 8, 2000), (NEW + 8, 4000)))
        inj = self.injected(mm)
        self.assertEqual([x["start"] for x in inj], [OLD, NEW], err)
        self.assertEqual(len({(x["filename"], x["pgoff"], x["len"]) for x in inj}), 1)
        self.assertEqual([x["time"] for x in inj], [1000, 3000])
        if shutil.which("perf") is None:
            self.skipTest("perf is not installed")
        r = subprocess.run(["perf", "--buildid-dir", os.path.join(self.d, "debug"), "script",
                            "-i", out, "-F", "ip,sym", "--hide-call-graph"],
                           capture_output=True, text=True, cwd=self.d)
        syms = [ln.split(None, 1)[1] for ln in r.stdout.splitlines() if ln.strip()]
        self.assertEqual(syms, ["JS:*moved", "JS:*moved"], r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
