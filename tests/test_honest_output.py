#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the commands say on stderr is what they did (issue 25, point 11).

  * the "written (N MB)" of xray, gperf and inject is the size of the file
    as it is on disk after the run (it was read before the compression
    workers and the trailing sections were written: 0.9 MB for a
    1,362,778-byte file), to perf record's precision (3 decimals); elf's
    and inject's image megabytes are the bytes of the images written;
  * elf's and inject's progress on a terminal (a pseudo-terminal here)
    advances and ends at 100% before the line is cleared; on a pipe, or
    under -q, there is none at all; a warning clears it first;
  * elf's summary says in words what it counted: functions with unwind
    tables from the dump's UNWINDING_INFO, and images holding several
    functions (it said "(0 with CFI of their own, 2 shared)").
"""

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gperf_gen  # noqa: E402
import jitdump_gen as J  # noqa: E402
import xray_gen  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))

MB_RE = r"written \(([\d.]+) MB\)"


def run_pty(argv, cwd=None, timeout=120):
    """argv with stderr (and stdin/stdout) on a pseudo-terminal: (exit
    status, everything written to the terminal, as text)."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            if cwd:
                os.chdir(cwd)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    out = bytearray()
    while True:
        r, _, _ = select.select([fd], [], [], timeout)
        if not r:
            os.kill(pid, 9)
            raise AssertionError("%s: no output for %d s" % (argv, timeout))
        try:
            chunk = os.read(fd, 65536)
        except OSError:         # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def progress_values(text, cmd):
    """The percentages of cmd's progress line, in the order printed."""
    return [int(v) for v in re.findall(r"\rperfgraft: %s: +(\d+)%%" % cmd, text)]


def many_functions_dump(path, n, cfi_every=0):
    """A jitdump of n functions of 64 bytes, one every 128 bytes; every
    cfi_every-th one (0: none) with an UNWINDING_INFO record of its own."""
    b = J.JitdumpBuilder(pid=4242)
    base = 0x7F0000000000
    for i in range(n):
        addr = base + 128 * i
        if cfi_every and i % cfi_every == 0:
            b.cfi_unwinding_info(addr, 64)
        b.load(b"JS:*f%d" % i, J.x86_64_code(64, i), addr, i + 1)
    with open(path, "wb") as f:
        f.write(b.buf)
    return b


class WrittenSizeTest(unittest.TestCase):
    """The summary's megabytes are the file's, after the run."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pg-honest-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_written(self, stderr, path):
        m = re.search(MB_RE, stderr)
        self.assertTrue(m, stderr)
        size = os.path.getsize(path)
        self.assertEqual(m.group(1), "%.3f" % (size / 1e6),
                         "summary says %s MB, the file has %d bytes" % (m.group(1), size))

    def test_xray_compressed(self):
        """-z 1 (the default): the compressed stages the workers still held
        when the size was read are in the figure (3.5 MB said, 3,621,562
        bytes written)."""
        trace = os.path.join(self.tmp, "long.xray")
        with open(trace, "wb") as f:
            f.write(xray_gen.long_calls_fdr(threads=2, gap_ns=2 * 10**9).data)
        for z in ("1", "0"):
            out = os.path.join(self.tmp, "x%s.data" % z)
            p = subprocess.run([PERFGRAFT, "xray", trace, "-F", "100000", "--thin-after", "0",
                                "-z", z, "-o", out], capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.check_written(p.stderr, out)

    def test_gperf(self):
        """gperf: the feature sections and attrs written at the end count."""
        prog = gperf_gen.PROG
        recs = [(1 + i % 7, [prog + 0x100 + 3 * (i % 1000), prog + 0x1000 + i, prog + 0x2000])
                for i in range(20000)]
        c = gperf_gen.build("many", records=recs, maps=gperf_gen.base_maps())
        prof = os.path.join(self.tmp, "many.prof")
        c.write(prof)
        out = os.path.join(self.tmp, "g.data")
        p = subprocess.run([PERFGRAFT, "gperf", prof, "-o", out], capture_output=True,
                           text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_written(p.stderr, out)

    def test_inject_and_elf_images(self):
        """inject: the output and the images it names; elf: the images."""
        d = os.path.join(self.tmp, "move")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "move-heavy.py"), "3000", d],
                       check=True, capture_output=True, timeout=300)
        out = os.path.join(d, "o.data")
        p = subprocess.run([PERFGRAFT, "inject", "-N", "-i", os.path.join(d, "perf.data"),
                            "-o", out], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_written(p.stderr, out)
        m = re.search(r"images in (\S+) \(([\d.]+) MB", p.stderr)
        self.assertTrue(m, p.stderr)
        imgs = sum(os.path.getsize(os.path.join(m.group(1), n)) for n in os.listdir(m.group(1)))
        self.assertEqual(m.group(2), "%.3f" % (imgs / 1e6))
        edir = os.path.join(d, "elf")
        p = subprocess.run([PERFGRAFT, "elf", "-o", edir, os.path.join(d, "jit-4242.dump")],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        m = re.search(r"; ([\d.]+) MB written in", p.stderr)
        self.assertTrue(m, p.stderr)
        imgs = sum(os.path.getsize(os.path.join(edir, n)) for n in os.listdir(edir))
        self.assertEqual(m.group(1), "%.3f" % (imgs / 1e6))


class ProgressTest(unittest.TestCase):
    """elf's and inject's progress line: a terminal's only, not under -q;
    it advances and its last figure is 100% (then the line is cleared)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pg-progress-")
        cls.d = os.path.join(cls.tmp, "move")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "move-heavy.py"), "3000",
                        cls.d], check=True, capture_output=True, timeout=300)
        cls.dump = os.path.join(cls.d, "jit-4242.dump")
        cls.data = os.path.join(cls.d, "perf.data")
        # the same recording in pipe mode, as perf record -o - writes it
        cls.pipe_data = os.path.join(cls.d, "pipe.data")
        with open(cls.pipe_data, "wb") as f:
            subprocess.run(["perf", "--buildid-dir", os.path.join(cls.tmp, "debug"), "inject",
                            "-i", cls.data, "-o", "-"], stdout=f, check=True, timeout=300)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_line(self, text, cmd):
        vals = progress_values(text, cmd)
        self.assertGreaterEqual(len(vals), 2, "no progress that advances: %r" % text)
        self.assertEqual(vals[-1], 100, text)
        self.assertEqual(vals, sorted(vals), text)
        # cleared before the summary
        self.assertIn("\r\x1b[Kperfgraft: ", text)

    def test_elf(self):
        out = os.path.join(self.tmp, "elf")
        rc, text = run_pty([PERFGRAFT, "elf", "-o", out, self.dump])
        self.assertEqual(rc, 0, text)
        self.check_line(text, "elf")
        # -q on the terminal: nothing at all
        rc, text = run_pty([PERFGRAFT, "elf", "-q", "-o", out, self.dump])
        self.assertEqual((rc, text), (0, ""))
        # not a terminal: no progress
        p = subprocess.run([PERFGRAFT, "elf", "-o", out, self.dump], capture_output=True,
                           text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("\r", p.stderr)
        self.assertNotIn("%", p.stderr)

    def test_warnings_clear_the_line(self):
        """A warning printed while the progress line is up starts a line
        of its own (the bundled node dump warns of names node damaged)."""
        out = os.path.join(self.tmp, "warn")
        rc, text = run_pty([PERFGRAFT, "elf", "-o", out,
                            os.path.join(HERE, "fixtures", "perf", "jit-19989.dump")])
        self.assertEqual(rc, 0, text)
        self.check_line(text, "elf")
        self.assertIn("perfgraft: warning: ", text)
        for m in re.finditer("perfgraft: warning: ", text):
            before = text[:m.start()]
            self.assertTrue(before == "" or before.endswith("\n") or before.endswith("\x1b[K"),
                            "a warning after the progress line: %r" % before[-80:])

    def test_inject_file(self):
        out = os.path.join(self.tmp, "f.data")
        argv = [PERFGRAFT, "inject", "-N", "-i", self.data, "-o", out]
        rc, text = run_pty(argv)
        self.assertEqual(rc, 0, text)
        self.check_line(text, "inject")
        # the figures are the perf.data's and the dump's bytes
        m = re.findall(r"\rperfgraft: inject: 100% \(([\d.]+) of ([\d.]+) MB read\)", text)
        want = "%.1f" % ((os.path.getsize(self.dump) + os.path.getsize(self.data)) / 1e6)
        self.assertTrue(m, text)
        self.assertAlmostEqual(float(m[-1][1]), float(want), delta=0.11)
        rc, text = run_pty(argv[:2] + ["-q"] + argv[2:])
        self.assertEqual((rc, text), (0, ""))
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("\r", p.stderr)
        self.assertNotIn("MB read", p.stderr)

    def test_inject_pipe(self):
        """-i -: the size is not known, the bytes read are counted (the
        dump's as it is followed)."""
        out = os.path.join(self.tmp, "p.data")
        cmd = "exec %s inject -N -i - -o %s < %s" % (PERFGRAFT, out, self.pipe_data)
        rc, text = run_pty(["/bin/sh", "-c", cmd])
        self.assertEqual(rc, 0, text)
        reads = [float(v) for v in re.findall(r"\rperfgraft: inject: ([\d.]+) MB read", text)]
        self.assertTrue(reads, text)
        self.assertEqual(reads, sorted(reads), text)
        total = (os.path.getsize(self.dump) + os.path.getsize(self.pipe_data)) / 1e6
        self.assertAlmostEqual(reads[-1], total, delta=0.11)
        self.assertIn("\r\x1b[Kperfgraft: ", text)
        rc, text = run_pty(["/bin/sh", "-c", cmd.replace(" -N ", " -q -N ")])
        self.assertEqual((rc, text), (0, ""))
        p = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("MB read", p.stderr)


class ElfSummaryTest(unittest.TestCase):
    """elf's summary counts in words: functions with unwind tables from
    the dump, images holding several functions (it said "(0 with CFI of
    their own, 2 shared)"), each checked against the images."""

    def test_counts(self):
        tmp = tempfile.mkdtemp(prefix="pg-elfsum-")
        self.addCleanup(shutil.rmtree, tmp, True)
        dump = os.path.join(tmp, "jit-4242.dump")
        many_functions_dump(dump, 10, cfi_every=3)      # 0, 3, 6, 9 have CFI
        for layout in ("memory", "packed", "per-function"):
            out = os.path.join(tmp, layout)
            p = subprocess.run([PERFGRAFT, "elf", "--layout", layout, "-o", out, dump],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            names = sorted(os.listdir(out))
            several = 0
            with_eh = 0
            for n in names:
                syms = subprocess.run(["readelf", "-sW", os.path.join(out, n)],
                                      capture_output=True, text=True, check=True).stdout
                funcs = [ln for ln in syms.splitlines() if " FUNC " in ln]
                several += len(funcs) > 1
                secs = subprocess.run(["readelf", "-SW", os.path.join(out, n)],
                                      capture_output=True, text=True, check=True).stdout
                with_eh += ".eh_frame " in secs
            self.assertGreater(with_eh, 0, layout)
            want = ("10 functions (4 with unwind tables from an UNWINDING_INFO record, "
                    "6 without) in %d image%s in %s (%d holding several functions)"
                    % (len(names), "" if len(names) == 1 else "s", out, several))
            self.assertIn(want, p.stderr)
            self.assertNotIn("CFI of their own", p.stderr)


if __name__ == "__main__":
    unittest.main()
