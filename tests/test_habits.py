"""Issue 25, points 5-8: perfgraft's habits against perf 6.1's.

5. exit status: a run asked to inject (the recording mapped jitdumps, or
   --jitdump named one) that injects nothing fails, as perf inject --jit
   does (exit 255); a recording without a JIT is copied with exit 0, as
   perf inject --jit copies it.  A failed run keeps the earlier output.
6. overwriting: a perf.data output that replaces a non-empty file keeps
   it as NAME.old, as perf record and perf inject do (any -o name; an
   empty file is not kept); a failed run renames nothing.
7. modes: perf.data outputs get perf record's mode (0600 under umask 022);
   images keep the mode of perf inject --jit's jitted-*.so (0644).
8. noise: -q prints errors only; by default a warning kind is cut short
   after a few with a count of the rest; -v prints them all.

Real perf records testjit (tests/testjit.c) here; inputs for xray and
gperf are generated.  Everything is in a temporary directory (HOME too,
for perf's jit directory; perf gets --buildid-dir)."""
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gperf_gen  # noqa: E402
import xray_gen  # noqa: E402

ROOT = os.path.dirname(HERE)
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
BUILDDIR = os.path.dirname(os.path.abspath(PERFGRAFT))
TESTJIT = os.environ.get("TESTJIT", os.path.join(BUILDDIR, "tests", "testjit"))
NODE_DUMP = os.path.join(HERE, "fixtures", "node", "node-unwind.dump")


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


class Habits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if shutil.which("perf") is None:
            raise unittest.SkipTest("perf is not installed")
        if not os.access(TESTJIT, os.X_OK):
            raise AssertionError("%s is not built" % TESTJIT)
        if subprocess.run([TESTJIT], capture_output=True).returncode == 77:
            raise unittest.SkipTest("testjit generates x86-64 code only")
        cls.old_umask = os.umask(0o022)
        cls._tmp = tempfile.TemporaryDirectory(prefix="pg-habits-")
        cls.d = cls._tmp.name
        os.makedirs(os.path.join(cls.d, "home"))
        cls.env = dict(os.environ, HOME=os.path.join(cls.d, "home"))
        for k in ("JITDUMPDIR", "TESTJIT_DIR"):
            cls.env.pop(k, None)
        r = cls.perf("record", "-N", "-q", "-k", "mono", "-e", "cpu-clock",
                     "-o", "plain.data", "--", "true")
        if r.returncode != 0:
            cls.tearDownClass()
            raise unittest.SkipTest("perf record cannot run here: " + r.stderr[-300:])
        cls.mono_dump = cls.record_jit("mono.data", "-k", "mono")
        cls.nomono_dump = cls.record_jit("nomono.data")
        with open(os.path.join(cls.d, "t.xray"), "wb") as f:
            f.write(xray_gen.small_fdr_v5().data)
        with open(os.path.join(cls.d, "p.prof"), "wb") as f:
            f.write(gperf_gen.build("p", records=gperf_gen.base_stacks(),
                                    maps=gperf_gen.base_maps()).data)

    @classmethod
    def tearDownClass(cls):
        os.umask(cls.old_umask)
        cls._tmp.cleanup()

    @classmethod
    def perf(cls, *args):
        return subprocess.run(["perf", "--buildid-dir", os.path.join(cls.d, "debug"), *args],
                              capture_output=True, text=True, cwd=cls.d, env=cls.env)

    @classmethod
    def record_jit(cls, out, *opts):
        r = cls.perf("record", "-N", "-q", *opts, "-e", "cpu-clock", "-o", out, "--",
                     TESTJIT, "run", "-m", "100")
        assert r.returncode == 0, r.stderr
        return re.search(r"^dump (.*)$", r.stdout, re.M).group(1)

    def pg(self, *args):
        return subprocess.run([PERFGRAFT, *args], capture_output=True, text=True,
                              cwd=self.d, env=self.env, timeout=120)

    def path(self, name):
        return os.path.join(self.d, name)

    def inject(self, out, *args, inp="mono.data"):
        return self.pg("inject", "-N", "-q", "-i", inp, "-o", out, *args)

    def perf_inject(self, inp, out):
        return self.perf("inject", "--jit", "-i", inp, "-o", out)

    # ---- 5: exit status ----

    def assert_fails_keeping(self, r, out, *words):
        self.assertEqual(r.returncode, 1, r.stderr)
        err = [ln for ln in r.stderr.splitlines() if ln]
        self.assertEqual(len(err), 1, "-q: one error line, got:\n" + r.stderr)
        for w in words:
            self.assertIn(w, err[0])
        with open(self.path(out), "rb") as f:
            self.assertEqual(f.read(), b"earlier", "a failed run replaced " + out)
        self.assertFalse(os.path.exists(self.path(out + ".old")),
                         "a failed run renamed %s to .old" % out)
        self.assertFalse(os.path.exists(self.path(out + ".d")),
                         "a failed run left its image directory")

    def earlier(self, out):
        with open(self.path(out), "wb") as f:
            f.write(b"earlier")

    def test_5_recording_without_k_mono(self):
        ref = self.perf_inject("nomono.data", "nomono.perf.data")
        self.assertEqual(ref.returncode, 255, ref.stderr)
        self.assertIn("perf record -k 1", ref.stderr)
        self.earlier("nomono.pg.data")
        r = self.inject("nomono.pg.data", inp="nomono.data")
        self.assert_fails_keeping(r, "nomono.pg.data", "nothing injected",
                                  os.path.basename(self.nomono_dump), "perf record -k mono")

    def test_5_missing_dump(self):
        hidden = self.mono_dump + ".hidden"
        os.rename(self.mono_dump, hidden)
        try:
            ref = self.perf_inject("mono.data", "missing.perf.data")
            self.earlier("missing.pg.data")
            r = self.inject("missing.pg.data")
        finally:
            os.rename(hidden, self.mono_dump)
        self.assertNotEqual(ref.returncode, 0, "perf inject --jit with the dump missing")
        self.assert_fails_keeping(r, "missing.pg.data", "nothing injected",
                                  os.path.basename(self.mono_dump), "--jitdump-dir")

    def test_5_jitdump_that_does_not_exist(self):
        self.earlier("nonexist.pg.data")
        r = self.inject("nonexist.pg.data", "--jitdump", self.path("nonexistent.dump"),
                        inp="plain.data")
        self.assert_fails_keeping(r, "nonexist.pg.data", "--jitdump",
                                  "nonexistent.dump", "No such file")
        # named beside a dump that is injected: still an error
        self.earlier("nonexist2.pg.data")
        r = self.inject("nonexist2.pg.data", "--jitdump", self.path("nonexistent.dump"))
        self.assert_fails_keeping(r, "nonexist2.pg.data", "nonexistent.dump")

    def test_5_recording_without_jit_is_copied(self):
        ref = self.perf_inject("plain.data", "plain.perf.data")
        self.assertEqual(ref.returncode, 0, ref.stderr)
        r = self.inject("plain.pg.data", inp="plain.data")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(self.path("plain.pg.data")))

    def test_5_injecting_exits_0(self):
        r = self.inject("ok.pg.data")
        self.assertEqual(r.returncode, 0, r.stderr)

    # ---- 6: NAME.old ----

    def kept_like_perf(self, name, run):
        """run(name) twice, as perf record twice: the first output is
        NAME.old after the second, byte for byte."""
        ref = name + ".ref"
        for _ in range(2):
            r = self.perf("record", "-N", "-q", "-o", ref, "--", "true")
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(self.path(ref + ".old")),
                        "perf record does not keep %s.old here" % ref)
        r = run(name)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path(name), "rb") as f:
            first = f.read()
        self.assertFalse(os.path.exists(self.path(name + ".old")))
        r = run(name)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path(name + ".old"), "rb") as f:
            self.assertEqual(f.read(), first, name + ".old is not the earlier output")
        self.assertTrue(os.path.isfile(self.path(name)))
        self.assertEqual([n for n in os.listdir(self.d) if "pgtmp" in n], [])

    def test_6_xray_keeps_perf_data_old(self):
        sub = "xr"
        os.makedirs(self.path(sub), exist_ok=True)
        self.kept_like_perf(os.path.join(sub, "perf.data"),
                            lambda n: self.pg("xray", "-q", "t.xray", "-o", n))

    def test_6_gperf_keeps_perf_data_old(self):
        sub = "gp"
        os.makedirs(self.path(sub), exist_ok=True)
        self.kept_like_perf(os.path.join(sub, "perf.data"),
                            lambda n: self.pg("gperf", "-q", "p.prof", "-o", n))

    def test_6_inject_keeps_old(self):
        self.kept_like_perf("again.jit.data", lambda n: self.inject(n))

    def test_6_empty_file_not_kept_and_failure_renames_nothing(self):
        # perf keeps no empty file (check_backup: st_size)
        open(self.path("empty.data"), "wb").close()
        r = self.perf("record", "-N", "-q", "-o", "empty.data", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(self.path("empty.data.old")))
        open(self.path("empty.pg.data"), "wb").close()
        r = self.pg("gperf", "-q", "p.prof", "-o", "empty.pg.data")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(self.path("empty.pg.data.old")))
        # a failed run: perf.data and its .old stay as they were
        with open(self.path("fail.data"), "wb") as f:
            f.write(b"current")
        with open(self.path("fail.data.old"), "wb") as f:
            f.write(b"older")
        r = self.pg("gperf", "-q", "does-not-exist.prof", "-o", "fail.data")
        self.assertNotEqual(r.returncode, 0)
        for n, want in (("fail.data", b"current"), ("fail.data.old", b"older")):
            with open(self.path(n), "rb") as f:
                self.assertEqual(f.read(), want, n + " changed on a failed run")

    # ---- 7: modes ----

    def test_7_perf_data_mode_is_perfs(self):
        r = self.perf("record", "-N", "-q", "-o", "moderef.data", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        want = mode(self.path("moderef.data"))
        self.assertEqual(want, 0o600, "perf record's perf.data mode under umask 022")
        for name, r in (("m.inject.data", self.inject("m.inject.data")),
                        ("m.xray.data", self.pg("xray", "-q", "t.xray", "-o", "m.xray.data")),
                        ("m.gperf.data", self.pg("gperf", "-q", "p.prof", "-o", "m.gperf.data"))):
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(oct(mode(self.path(name))), oct(want), name)

    def test_7_images_mode_is_perf_injects(self):
        ref = self.perf_inject("mono.data", "img.perf.data")
        self.assertEqual(ref.returncode, 0, ref.stderr)
        jitdir = os.path.dirname(self.mono_dump)
        sos = [n for n in os.listdir(jitdir) if n.startswith("jitted-") and n.endswith(".so")]
        self.assertTrue(sos, "perf inject --jit wrote no jitted-*.so")
        want = {mode(os.path.join(jitdir, n)) for n in sos}
        r = self.inject("img.pg.data")
        self.assertEqual(r.returncode, 0, r.stderr)
        imgs = os.path.join(self.d, "img.pg.data.d")
        got = {mode(os.path.join(imgs, n)) for n in os.listdir(imgs)}
        self.assertEqual(got, want)

    # ---- 8: noise ----

    def elf(self, *opts):
        out = tempfile.mkdtemp(dir=self.d)
        r = self.pg("elf", *opts, "-o", out, NODE_DUMP)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [ln for ln in r.stderr.splitlines() if "warning:" in ln]

    def test_8_quiet_prints_no_warning(self):
        self.assertEqual(self.elf("-q"), [])

    def test_8_one_kind_is_cut_short(self):
        every = self.elf("-v")
        kind = [ln for ln in every if "DEBUG_INFO has" in ln]
        self.assertGreater(len(kind), 4, "the fixture has fewer warnings of one kind")
        shown = self.elf()
        printed = [ln for ln in shown if "DEBUG_INFO has" in ln and "more like" not in ln]
        self.assertEqual(printed, kind[:3])
        summary = [ln for ln in shown if "more like" in ln]
        self.assertEqual(len(summary), 1, shown)
        self.assertIn("and %d more like" % (len(kind) - 3), summary[0])


if __name__ == "__main__":
    unittest.main()
