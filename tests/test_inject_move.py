"""Outputs that move or travel (issue 24, point 3), with real perf.

perf finds a dso whose recorded path is gone through its build-id cache
(DIR/.build-id/XX/YYYY -> ../../PATH/BUILD-ID/elf), and `perf archive`
packs what that cache holds for the build-ids with hits.  perfgraft inject
adds its images there (hard links), as perf inject --jit adds its
jitted-*.so.  For three real JITs (node, tests/jit/testjit.c,
tests/jit/inlinejit.c), each recorded once with `perf record -k mono -g`:

  a  the output and OUTPUT.d moved elsewhere: perf report gives the same
     {symbol: samples} as perf inject --jit's output in the same run, and
     perf script the same srclines as before the move;
  b  perf archive, unpacked into a fresh build-id directory at another
     path, with the original cache and images gone: the same again;
  c  --buildid-dir wins over $PERF_BUILDID_DIR, -N writes no cache, and
     ~/.debug is never touched.

Every perf command gets --buildid-dir; perfgraft gets --buildid-dir or
PERF_BUILDID_DIR in its environment (the default it honours).
"""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import perf_fixture as pf

HERE = os.path.dirname(os.path.abspath(__file__))
PERF = pf.PERF
PERFGRAFT = pf.PERFGRAFT
BUILDDIR = os.path.dirname(os.path.abspath(PERFGRAFT))
TESTJIT = os.path.join(BUILDDIR, "tests", "testjit")
INLINEJIT = os.path.join(BUILDDIR, "tests", "inlinejit")
REPORT = ("report", "--stdio", "--no-children", "-g", "none", "-F", "sample,sym")
SCRIPT = ("script", "-G", "--no-inline", "-F", "ip,sym,srcline")


def run(cmd, cwd, env=None, check=True):
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    out = p.stdout.decode("utf-8", "surrogateescape")
    err = p.stderr.decode("utf-8", "surrogateescape")
    if check and p.returncode != 0:
        raise AssertionError("exit %d: %s (cwd %s)\n%s" % (
            p.returncode, pf.shell(cmd), cwd, pf.tail(err)))
    return out, err


def rows(text):
    """perf report -F sample,sym -> {symbol: samples} (same names summed)."""
    out = {}
    for ln in text.splitlines():
        m = re.match(r"^\s*(\d+)\s+\[.\]\s(.*?)\s*$", ln)
        if m:
            out[m.group(2)] = out.get(m.group(2), 0) + int(m.group(1))
    return out


class _Move:
    """Subclasses set PROGRAM and cmd(rec_dir) -> argv, or skip."""
    PROGRAM = None
    JIT = None          # regex: the JIT symbols of this program

    @classmethod
    def setUpClass(cls):
        why = pf.environment_problem()
        if why:
            raise unittest.SkipTest(why)
        cls.home_before = pf.home_debug_snapshot()
        cls.tmp = tempfile.mkdtemp(prefix="perfgraft-move-%s." % cls.PROGRAM)
        try:
            cls._setup()
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def _setup(cls):
        t = cls.tmp
        cls.rec = os.path.join(t, "rec")
        cls.bid_rec = os.path.join(t, "bid-rec")      # perf record, perf inject
        cls.bid_pg = os.path.join(t, "bid-pg")        # perfgraft's cache
        cls.out = os.path.join(t, "out")
        for d in (cls.rec, cls.out):
            os.makedirs(d)
        cls.record()
        # perf inject --jit: the reference, in the same run
        run(pf.perf_cmd(cls.bid_rec, "inject", "--jit", "-i", "perf.data",
                        "-o", "ref.data"), cls.rec)
        cls.ref = rows(cls.perf(cls.bid_rec, cls.rec, *REPORT, "-i", "ref.data"))
        env = dict(os.environ, PERF_BUILDID_DIR=cls.bid_pg)
        run([PERFGRAFT, "inject", "-q", "-i", os.path.join(cls.rec, "perf.data"),
             "-o", "pg.data"], cls.out, env=env)
        cls.before = rows(cls.perf(cls.bid_pg, cls.out, *REPORT, "-i", "pg.data"))
        # srclines of the samples in perfgraft's images only: perf 6.1
        # runs addr2line on node's own 100 MB text for the others, which
        # took 3 minutes per perf script and tells nothing about the move
        images = sorted(os.listdir(os.path.join(cls.out, "pg.data.d")))
        cls.script = SCRIPT + ("--dsos", ",".join(images))
        cls.lines = cls.perf(cls.bid_pg, cls.out, *cls.script, "-i", "pg.data")

    @classmethod
    def perf(cls, bid, cwd, *args):
        return run(pf.perf_cmd(bid, *args), cwd)[0]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def jit_rows(self, r):
        return {k: v for k, v in r.items() if re.search(self.JIT, k)}

    def check_rows(self, got, what):
        ref_jit = self.jit_rows(self.ref)
        self.assertTrue(ref_jit, "perf inject's report has no JIT symbol: %s" % self.ref)
        self.assertEqual(self.jit_rows(self.before), ref_jit, "before the move")
        self.assertEqual(self.jit_rows(got), ref_jit, what)
        self.assertEqual(got, self.before, what)

    def test_0_lines_name_jit_sources(self):
        """The srclines compared after a move are JIT code's own."""
        syms = re.findall(r"^\s*[0-9a-f]+ (.+)$", self.lines, re.M)
        self.assertTrue(any(re.search(self.JIT, s) for s in syms), self.lines[:2000])
        self.assertRegex(self.lines, re.compile(r"^\s+\S+:\d+$", re.M))

    def test_a_moved_output_resolves(self):
        dst = os.path.join(self.tmp, "elsewhere")
        os.makedirs(dst)
        for n in ("pg.data", "pg.data.d"):
            os.rename(os.path.join(self.out, n), os.path.join(dst, n))
        try:
            got = rows(self.perf(self.bid_pg, dst, *REPORT, "-i", "pg.data"))
            self.check_rows(got, "after mv pg.data pg.data.d elsewhere/")
            self.assertEqual(self.perf(self.bid_pg, dst, *self.script, "-i", "pg.data"),
                             self.lines, "perf script srclines after the move")
        finally:
            for n in ("pg.data", "pg.data.d"):
                os.rename(os.path.join(dst, n), os.path.join(self.out, n))

    def test_b_perf_archive_travels(self):
        out, err = run(pf.perf_cmd(self.bid_pg, "archive", "pg.data"), self.out)
        tarball = os.path.join(self.out, "pg.data.tar.bz2")
        self.assertTrue(os.path.isfile(tarball), out + err)
        # "another machine": a fresh cache at another path, the recording
        # alone beside it; the original images and cache hidden
        far = os.path.join(self.tmp, "far")
        fresh = os.path.join(far, "debug")
        os.makedirs(fresh)
        members = run(["tar", "tjf", tarball], far)[0].split()
        self.assertTrue(any(m.endswith("/elf") for m in members), members)
        run(["tar", "xjf", tarball, "-C", fresh], far)
        shutil.copy(os.path.join(self.out, "pg.data"), os.path.join(far, "pg.data"))
        hide = [(os.path.join(self.out, "pg.data.d"), os.path.join(self.tmp, "hidden.d")),
                (self.bid_pg, os.path.join(self.tmp, "hidden-bid"))]
        for a, b in hide:
            os.rename(a, b)
        try:
            got = rows(self.perf(fresh, far, *REPORT, "-i", "pg.data"))
            self.check_rows(got, "perf archive, extracted into %s" % fresh)
            self.assertEqual(self.perf(fresh, far, *self.script, "-i", "pg.data"),
                             self.lines, "perf script srclines from the archive")
        finally:
            for a, b in hide:
                os.rename(b, a)
            os.unlink(tarball)

    def test_c_buildid_dir_respected(self):
        given = os.path.join(self.tmp, "given")
        env_dir = os.path.join(self.tmp, "env")
        env = dict(os.environ, PERF_BUILDID_DIR=env_dir)
        for n, extra in (("c1.data", ["--buildid-dir", given]), ("c2.data", ["-N"])):
            run([PERFGRAFT, "inject", "-q", "-i", os.path.join(self.rec, "perf.data"),
                 "-o", n] + extra, self.out, env=env)
        self.assertFalse(os.path.exists(env_dir), "PERF_BUILDID_DIR used over --buildid-dir/-N")
        links = []
        for dp, dn, fn in os.walk(os.path.join(given, ".build-id")):
            # the links name directories: os.walk lists them in dn
            links += [os.path.join(dp, f) for f in dn + fn
                      if os.path.islink(os.path.join(dp, f))]
        images = os.listdir(os.path.join(self.out, "c1.data.d"))
        self.assertEqual(len(links), len(images), (links, images))
        for ln in links:
            self.assertTrue(os.path.islink(ln))
            elf = os.path.join(os.path.realpath(ln), "elf")
            st = os.stat(elf)
            # a hard link to the image in OUTPUT.d: no bytes written twice
            self.assertTrue(any(os.path.samestat(st, os.stat(os.path.join(self.out, "c1.data.d", i)))
                                for i in images), elf)
        shutil.rmtree(given)
        diff = pf.snapshot_diff(self.home_before, pf.home_debug_snapshot())
        self.assertIsNone(diff, diff)


class MoveNode(_Move, unittest.TestCase):
    PROGRAM = "node"
    JIT = r"^(JS|Builtin|BytecodeHandler|RegExp|Stub|Handler|Function|LazyCompile|Script|Eval):"

    @classmethod
    def record(cls):
        r = pf.record(cls.rec, cls.bid_rec, "fp", 800)
        cls.pid = r.pid


class MoveTestjit(_Move, unittest.TestCase):
    PROGRAM = "testjit"
    JIT = r"^jit_"

    @classmethod
    def record(cls):
        if not os.access(TESTJIT, os.X_OK):
            raise unittest.SkipTest("%s is not built" % TESTJIT)
        env = dict(os.environ, HOME=os.path.join(cls.tmp, "home"))
        env.pop("JITDUMPDIR", None)
        env.pop("TESTJIT_DIR", None)
        run(pf.perf_cmd(cls.bid_rec, "record", "-N", "-q", "-k", "mono", "-g",
                        "-e", "cpu-clock", "-o", "perf.data", "--", TESTJIT, "run",
                        "-d", cls.rec, "-m", "600"), cls.rec, env=env)


class MoveInlinejit(_Move, unittest.TestCase):
    PROGRAM = "inlinejit"
    JIT = r"^jit_outer$"

    @classmethod
    def record(cls):
        if not os.access(INLINEJIT, os.X_OK):
            raise unittest.SkipTest("%s is not built" % INLINEJIT)
        if subprocess.run([INLINEJIT], stderr=subprocess.DEVNULL).returncode == 77:
            raise unittest.SkipTest("inlinejit generates x86-64 code only")
        run(pf.perf_cmd(cls.bid_rec, "record", "-N", "-q", "-k", "mono", "-g",
                        "-e", "cpu-clock", "-o", "perf.data", "--", INLINEJIT, ".",
                        "600"), cls.rec)


if __name__ == "__main__":
    unittest.main()
