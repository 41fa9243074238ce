"""perfgraft inject: how dumps are found and MOVE records (the same image
bytes mapped again at the new address), checked with perfgraft dump, perf
report and perf script.

Finding dumps (src/inject/discover.c has the rule):
  - perf's rule: the recorded mmap of .../jit-<pid>.dump by that pid, also
    when shown '(deleted)'; --jitdump-dir for dumps that moved;
  - any other exec mapping of a file whose header is a jitdump's (magic in
    either byte order) with the mapping's pid: JavaScriptCore's (Bun,
    WebKit) jit-<tid>-<pid>.dump, or any name at all; --jitdump-dir for
    JSC-named dumps that moved (jit-<tid>-<pid>.dump, jit-<tid>-<pid>-XXXXXX);
  - not taken: a jitdump of another pid (said, with --jitdump as the way
    out), regular files that are not dumps (data, an ELF, a short file, a
    dump mapped without PROT_EXEC), FIFOs and devices (never opened).
inject names on stderr every dump it found.  Discovery (synthetic
perf.data, perfdata_gen) needs no perf; Recorded (testjit, a real JIT, run
under `perf record -k mono -e cpu-clock`, perf report --sort sym) is
skipped when perf cannot record here.  TESTJIT overrides the test JIT
(default: <dir of $PERFGRAFT>/tests/testjit)."""
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jitdump_gen  # noqa: E402
import perfdata_gen as pg  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(HERE, "..", "build", "perfgraft"))
TESTJIT = os.environ.get("TESTJIT", os.path.join(
    os.path.dirname(os.path.abspath(PERFGRAFT)), "tests", "testjit"))
PID = 4242
TID = 4250      # a JIT thread of PID: JavaScriptCore's jit-<tid>-<pid>.dump
OLD, NEW = 0x7f0000001000, 0x7f0000200000


class Discovery(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="pg-disc-")
        self.addCleanup(self.tmp.cleanup)
        self.d = self.tmp.name

    def dump(self, where, move=False, pid=PID, name=None, bo="<"):
        jd = jitdump_gen.JitdumpBuilder(pid=pid, bo=bo)
        jd.load(b"JS:*moved", jitdump_gen.x86_64_code(0x40, 1), OLD, 0, timestamp=1000)
        if move:
            jd.move(0, OLD, NEW, 0x40, timestamp=3000)
        os.makedirs(where, exist_ok=True)
        path = os.path.join(where, name or "jit-%d.dump" % pid)
        jd.write(path)
        return path

    def inject(self, marker, mapper=PID, args=(), samples=((OLD + 8, 2000),), prot=5, rc=0):
        b = pg.PerfDataBuilder(attrs=[pg.Attr(ids=[7])])
        b.comm(PID, PID, "node", 1)
        b.mmap2(mapper, mapper, 0x10000, 4096, 0, marker, 2, prot=prot)
        for ip, t in samples:
            b.sample(ip, PID, PID, t)
        b.finished_round()
        src = os.path.join(self.d, "perf.data")
        b.write(src)
        out = os.path.join(self.d, "out.data")
        r = subprocess.run([PERFGRAFT, "inject", "-i", src, "-o", out, *args],
                           capture_output=True, text=True, cwd=self.d)
        self.assertEqual(r.returncode, rc, r.stderr)
        if rc:
            return r.stderr, None, out
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
        # the only dump is missing: nothing injected is an error (issue 25)
        err, _, _ = self.inject(gone, rc=1)
        self.assertIn("nothing injected", err)
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

    # -- any jitdump the process mapped, by its header ----------------------

    def assert_found(self, path, marker=None, args=()):
        """The mmap of marker (default: path) is taken as the marker of the
        dump at path: one image injected, the marker dropped, and stderr
        names the dump."""
        marker = marker or path
        err, mm, _ = self.inject(marker, args=args)
        self.assertEqual(len(self.injected(mm)), 1, err)
        self.assertFalse(any(x["filename"] == marker for x in mm), "marker kept\n" + err)
        self.assertIn(path, err, "inject does not say which dump it found")
        return err

    def assert_not_taken(self, marker, mapper=PID, prot=5):
        err, mm, _ = self.inject(marker, mapper=mapper, prot=prot)
        self.assertEqual(self.injected(mm), [], err)
        self.assertTrue(any(x["filename"] == marker for x in mm), "not a marker: kept\n" + err)
        return err

    def test_jsc_name_found_by_header(self):
        # JavaScriptCore (Bun BUN_JSC_useJITDump=1, WebKit): jit-<tid>-<pid>.dump;
        # perf 6.1 and perf's naming rule find nothing
        self.assert_found(self.dump(os.path.join(self.d, "run"),
                                    name="jit-%d-%d.dump" % (TID, PID)))

    def test_any_name_found_by_header(self):
        for name in ("code.bin", "jit-%d-%d-Ab3xYz" % (TID, PID), "jit-%d.dump.1" % PID):
            with self.subTest(name=name):
                self.assert_found(self.dump(os.path.join(self.d, "run-" + name), name=name))

    def test_big_endian_header(self):
        # the magic is read in either byte order (the writer's native one)
        path = self.dump(os.path.join(self.d, "run"), name="be.bin", bo=">")
        with open(path, "rb") as f:
            self.assertEqual(f.read(4), b"JiTD")
        self.assert_found(path)

    def test_jsc_name_deleted(self):
        path = self.dump(os.path.join(self.d, "run"), name="jit-%d-%d.dump" % (TID, PID))
        self.assert_found(path, marker=path + " (deleted)")

    def test_jsc_name_moved_needs_jitdump_dir(self):
        # a file gone from the recorded path cannot show its magic: JSC's
        # names are looked for in --jitdump-dir like jit-<pid>.dump
        for name in ("jit-%d-%d.dump" % (TID, PID), "jit-%d-%d-Ab3xYz" % (TID, PID)):
            with self.subTest(name=name):
                moved = self.dump(os.path.join(self.d, "moved"), name=name)
                gone = os.path.join(self.d, "gone", name)
                err, _, _ = self.inject(gone, rc=1)	# nothing injected: an error
                self.assertIn(gone, err)
                self.assertIn("--jitdump-dir", err)
                self.assert_found(moved, marker=gone,
                                  args=("--jitdump-dir", os.path.join(self.d, "moved")))

    def test_header_pid_differs(self):
        # a jitdump of pid 999 that pid 4242 mapped: not taken, and said
        # (--jitdump FILE injects it by hand)
        for name in ("code.bin", "jit-%d-%d.dump" % (TID, PID)):
            with self.subTest(name=name):
                path = self.dump(os.path.join(self.d, "other-" + name), pid=999, name=name)
                err = self.assert_not_taken(path)
                said = [ln for ln in err.splitlines() if path in ln]
                self.assertTrue(said and "999" in said[0] and "--jitdump" in said[0], err)
                err, mm, _ = self.inject(path, args=("--jitdump", path))
                self.assertEqual(len(self.injected(mm)), 1, err)
        # perf's name rule wins over the header, as before: jit-4242.dump
        # by pid 4242 is read, with a warning, for the pid its header says
        path = self.dump(os.path.join(self.d, "named"), pid=999, name="jit-%d.dump" % PID)
        err, mm, _ = self.inject(path)
        self.assertEqual(len(self.injected(mm)), 1, err)
        self.assertRegex(err, r"says pid 999.*pid %d" % PID)

    def test_mapping_pid_zero(self):
        # system-wide synthesized mmaps may carry pid 0: perf skips the pid check
        path = self.dump(os.path.join(self.d, "run0"), name="code.bin")
        err, mm, _ = self.inject(path, mapper=0)
        self.assertEqual(len(self.injected(mm)), 1, err)
        self.assertIn(path, err)

    def test_regular_files_that_are_not_dumps(self):
        """Exec maps of files that are not jitdumps are left alone: a data
        file, an ELF, a file too short for a header, a header with a
        version or size no dump has, and a real dump mapped without
        PROT_EXEC."""
        run = os.path.join(self.d, "files")
        os.makedirs(run)
        good = jitdump_gen.JitdumpBuilder(pid=PID).to_bytes()
        files = {
            "data.bin": bytes(range(256)) * 16,
            "true.elf": open(shutil.which("true") or "/bin/true", "rb").read(),
            "short.bin": good[:39],
            "version.bin": good[:4] + struct.pack("<I", 0x10000) + good[8:],
            "size.bin": good[:8] + struct.pack("<I", 4096) + good[12:],
        }
        for name, data in files.items():
            with self.subTest(name=name):
                path = os.path.join(run, name)
                with open(path, "wb") as f:
                    f.write(data)
                err = self.assert_not_taken(path)
                self.assertNotIn(path, err)
        with self.subTest(name="not exec"):
            path = self.dump(os.path.join(self.d, "noexec"), name="code.bin")
            err = self.assert_not_taken(path, prot=1)
            self.assertNotIn(path, err)

    def test_fifo_and_device_never_opened(self):
        # opening a FIFO for its header would block inject forever
        run = os.path.join(self.d, "special")
        os.makedirs(run)
        fifos = [os.path.join(run, n) for n in ("jit-%d-%d.dump" % (TID, PID), "code.bin")]
        for fifo in fifos:
            os.mkfifo(fifo)
        for marker in fifos + ["/dev/zero"]:
            with self.subTest(marker=marker):
                t0 = time.monotonic()
                self.assert_not_taken(marker)
                self.assertLess(time.monotonic() - t0, 20)

    def test_move_maps_the_same_bytes_again(self):
        path = self.dump(os.path.join(self.d, "run"), move=True)
        # packed: the moved code is the same bytes of the same image
        err, mm, out = self.inject(path, samples=((OLD + 8, 2000), (NEW + 8, 4000)),
                                   args=("--layout", "packed"))
        inj = self.injected(mm)
        self.assertEqual([x["start"] for x in inj], [OLD, NEW], err)
        self.assertEqual(len({(x["filename"], x["pgoff"], x["len"]) for x in inj}), 1)
        self.assertEqual([x["time"] for x in inj], [1000, 3000])
        # memory (the default), samples without user stacks: as perf
        # inject --jit and packed, the MOVE maps the bytes the LOAD's map
        # has (a copy, at NEW's own offset, only for DWARF call graphs:
        # test_memory_layout, unit_tests)
        err, mm, out = self.inject(path, samples=((OLD + 8, 2000), (NEW + 8, 4000)))
        inj = self.injected(mm)
        self.assertEqual([x["start"] for x in inj], [OLD, NEW], err)
        self.assertRegex(inj[0]["filename"], r"-r0-g0-[0-9a-f]{12}\.so$")
        self.assertEqual(len({(x["filename"], x["pgoff"], x["len"]) for x in inj}), 1, inj)
        self.assertEqual([x["time"] for x in inj], [1000, 3000])
        if shutil.which("perf") is None:
            self.skipTest("perf is not installed")
        r = subprocess.run(["perf", "--buildid-dir", os.path.join(self.d, "debug"), "script",
                            "-i", out, "-F", "ip,sym", "--hide-call-graph"],
                           capture_output=True, text=True, cwd=self.d)
        syms = [ln.split(None, 1)[1] for ln in r.stdout.splitlines() if ln.strip()]
        self.assertEqual(syms, ["JS:*moved", "JS:*moved"], r.stdout + r.stderr)


    def test_one_dump_many_spellings_read_once(self):
        """One dump named by many path spellings (/./, //, a symlink, a
        hard link) in many markers is read once: its images, MMAP2s and
        output do not grow with the number of spellings (issue 20: K=300
        spellings turned a 45 KB perf.data into 496 MB)."""
        run = os.path.join(self.d, "run")
        path = self.dump(run)
        os.symlink(path, os.path.join(self.d, "link.dump"))
        os.link(path, os.path.join(self.d, "hard.dump"))
        spellings = [path, os.path.join(self.d, "link.dump"), os.path.join(self.d, "hard.dump")]
        for k in range(1, 100):
            spellings.append(run.replace("/", "/./" if k % 2 else "//", k % 7 + 1)
                             + "/" * k + "jit-%d.dump" % PID)
        b = pg.PerfDataBuilder(attrs=[pg.Attr(ids=[7])])
        b.comm(PID, PID, "node", 1)
        for k, m in enumerate(spellings):
            b.mmap2(PID, PID, 0x10000 + 0x1000 * k, 4096, 0, m, 2 + k, prot=5)
        b.sample(OLD + 8, PID, PID, 2000)
        b.finished_round()
        src = os.path.join(self.d, "perf.data")
        b.write(src)
        out = os.path.join(self.d, "out.data")
        r = subprocess.run([PERFGRAFT, "inject", "-i", src, "-o", out],
                           capture_output=True, text=True, cwd=self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        d = json.loads(subprocess.run([PERFGRAFT, "dump", "--json", out],
                                      capture_output=True, text=True).stdout)
        inj = self.injected([x for x in d["records"] if x["name"] == "MMAP2"])
        self.assertEqual(len(inj), 1, r.stderr[-2000:])
        self.assertEqual(len(os.listdir(out + ".d")), 1, os.listdir(out + ".d"))
        self.assertEqual(r.stderr.count(", found by"), 1, r.stderr[-2000:])
        self.assertFalse(any(x["filename"] in spellings
                             for x in d["records"] if x["name"] == "MMAP2"),
                         "a marker spelling was kept")

# ---------------------------------------------------------------------------
# Real recordings: testjit (tests/jit/testjit.c) under perf record

FUNCS = ("jit_spin_a", "jit_spin_b", "jit_spin_c", "jit_spin_cfi")
_REPORT_ROW = re.compile(r"^\s*(\d+\.\d+)%\s+(\d+)\s+\[(.)\]\s(.*?)\s*$")


def parse_report(text):
    """perf report --stdio --no-children --sort sym -n -> {sym: samples}."""
    out = {}
    for ln in text.splitlines():
        m = _REPORT_ROW.match(ln)
        if m and not ln.startswith("#"):
            out[m.group(4)] = out.get(m.group(4), 0) + int(m.group(2))
    return out


def perf_problem(d):
    if shutil.which("perf") is None:
        return "perf is not installed"
    r = subprocess.run(["perf", "--buildid-dir", os.path.join(d, "debug"), "record", "-N",
                        "-q", "-k", "mono", "-e", "cpu-clock", "-o",
                        os.path.join(d, "check.data"), "--", "true"],
                       capture_output=True, text=True, cwd=d)
    if r.returncode != 0:
        return "perf record -k mono -e cpu-clock cannot run here: " + r.stderr[-300:]
    return None


class Recorded(unittest.TestCase):
    """A real JIT writes its dump under other names than jit-<pid>.dump;
    perf record sees the exec mmap of it; perfgraft inject finds it and perf
    report names the JIT functions (counts as in test_jitwriter.py)."""

    MS = 150

    @classmethod
    def setUpClass(cls):
        if not os.access(TESTJIT, os.X_OK):
            raise AssertionError("%s is not built" % TESTJIT)
        if subprocess.run([TESTJIT], capture_output=True).returncode == 77:
            raise unittest.SkipTest("testjit generates x86-64 code only")
        cls.tmp = tempfile.TemporaryDirectory(prefix="pg-disc-rec-")
        why = perf_problem(cls.tmp.name)
        if why:
            cls.tmp.cleanup()
            raise unittest.SkipTest(why)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def record(self, tag, *testjit_args, env_extra=None):
        """perf record of `testjit run ARGS`, then perfgraft inject:
        (testjit's pid, its dump path, inject's stderr, {sym: samples})."""
        d = os.path.join(self.tmp.name, tag)
        os.makedirs(os.path.join(d, "home"))
        debug = os.path.join(d, "debug")
        env = dict(os.environ, HOME=os.path.join(d, "home"))
        env.pop("JITDUMPDIR", None)
        env.pop("TESTJIT_DIR", None)
        env.update(env_extra or {})
        r = subprocess.run(["perf", "--buildid-dir", debug, "record", "-N", "-q", "-k", "mono",
                            "-e", "cpu-clock", "-o", "perf.data", "--", TESTJIT, "run",
                            "-m", str(self.MS), *testjit_args],
                           capture_output=True, text=True, cwd=d, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = int(re.search(r"^pid (\d+)$", r.stdout, re.M).group(1))
        dump = re.search(r"^dump (.*)$", r.stdout, re.M).group(1)
        inj = subprocess.run([PERFGRAFT, "inject", "-i", "perf.data", "-o", "perf.jit.data"],
                             capture_output=True, text=True, cwd=d, env=env)
        self.assertEqual(inj.returncode, 0, inj.stderr)
        rep = subprocess.run(["perf", "--buildid-dir", debug, "report", "-i", "perf.jit.data",
                              "--stdio", "--no-children", "--sort", "sym", "-n"],
                             capture_output=True, text=True, cwd=d, env=env)
        self.assertEqual(rep.returncode, 0, rep.stderr)
        return pid, dump, inj.stderr, parse_report(rep.stdout), rep.stdout

    def check(self, pid, dump, err, report, text):
        total = sum(report.values())
        for name in FUNCS:
            n = report.get(name, 0)
            # each ran MS ms per thread: about a fifth of the samples
            self.assertGreaterEqual(n, max(10, total // 20), "%s: %d of %d samples\n%s%s"
                                    % (name, n, total, err, text[-3000:]))
        jit = sum(report.get(n, 0) for n in FUNCS)
        self.assertGreater(jit, total // 2, err + text[-3000:])
        self.assertIn(dump, err, "inject does not say which dump it found")

    def test_jsc_name(self):
        # JavaScriptCore's jit-<tid>-<pid>.dump, opened by a thread that
        # is not the main one (tid != pid)
        pid, dump, err, report, text = self.record("jsc", "-J", "-d", ".")
        m = re.fullmatch(r"jit-(\d+)-(\d+)\.dump", os.path.basename(dump))
        self.assertTrue(m and int(m.group(2)) == pid and int(m.group(1)) != pid, dump)
        self.check(pid, dump, err, report, text)

    def test_any_name(self):
        pid, dump, err, report, text = self.record("bin", "-N", "code.bin", "-d", ".")
        self.assertEqual(os.path.basename(dump), "code.bin")
        self.check(pid, dump, err, report, text)

    def test_jvmti_directory_convention(self):
        # perf's JVMTI agent: $JITDUMPDIR/.debug/jit/java-jit-YYYYMMDD.XXXXXXXX/jit-<pid>.dump
        jd = os.path.join(self.tmp.name, "jvmti-dir")
        os.makedirs(jd)
        pid, dump, err, report, text = self.record("jvmti", "-p", "java-jit",
                                                   env_extra={"JITDUMPDIR": jd})
        self.assertRegex(dump, r"^%s/\.debug/jit/java-jit-\d{8}\.[A-Za-z0-9]{8}/jit-%d\.dump$"
                         % (re.escape(jd), pid))
        self.check(pid, dump, err, report, text)


if __name__ == "__main__":
    unittest.main()
