#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write errors on standard output: every command and option that writes
to stdout, run with stdout on /dev/full (every write fails with ENOSPC),
exits 1 with exactly one error line naming standard output; the same on a
full file system (a small tmpfs; root only), where the first 100 KiB are
written before the disk fills.  Until then `dump` (every input kind,
text and --json), `elf --list`, `elf --maps` and `--help` exited 0 with
part or none of their output written.

A reader that goes away early (| head) behaves as before: the text
commands die of SIGPIPE silently, as cat does (exit 141 in a shell); the
perf.data writers (-o -) say "Broken pipe" once and exit 1
(test_safety.ClosedPipe).

Inputs are generated (tests/jitdump_gen.py, perfdata_gen.py, xray_gen.py,
gperf_gen.py) into a temporary directory; nothing is left behind."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gperf_gen  # noqa: E402
import jitdump_gen  # noqa: E402
import perfdata_gen  # noqa: E402
import xray_gen  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(HERE, "..", "build", "perfgraft"))
TIMEOUT = 120
ENOSPC = "No space left on device"
# the message of the stdio-writing commands (main.c), and of the perf.data
# writers, which write(2) to fd 1 themselves
STDIO_ERR = "perfgraft: write error on standard output: " + ENOSPC
PDW_ERR = re.compile(r"^perfgraft: standard output: .*" + ENOSPC + "$")


def error_lines(stderr):
    """stderr less warnings and inject's line naming each dump it found:
    what is left is errors (the commands run with -q where they have a
    summary)."""
    return [ln for ln in stderr.splitlines()
            if ln and "warning:" not in ln and not ln.startswith("perfgraft: inject: jitdump ")]


class StdoutErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="perfgraft-stdout-")
        cls.t = cls._tmp.name
        t = cls.t
        jitdump_gen._baseline().write(os.path.join(t, "base.dump"))
        perfdata_gen.make_case(t, "file")       # writes t/jit-PID.dump for inject
        perfdata_gen.make_case(os.path.join(t, "pipe"), "pipe", pipe=True)
        shutil.move(os.path.join(t, "pipe", "pipe.data"), os.path.join(t, "pipe.data"))
        with open(os.path.join(t, "t.xray"), "wb") as f:
            f.write(xray_gen.small_fdr_v5().data)
        with open(os.path.join(t, "p.prof"), "wb") as f:
            f.write(gperf_gen.build("p", records=gperf_gen.base_stacks(),
                                    maps=gperf_gen.base_maps()).data)
        # outputs larger than a pipe's buffer and the 100 KiB file system
        b = jitdump_gen.JitdumpBuilder()
        for i in range(4000):
            b.load(b"JS:*f%05d" % i, jitdump_gen.x86_64_code(0x10, i),
                   jitdump_gen.BASE64 + i * 0x20, i)
        b.write(os.path.join(t, "big.dump"))
        with open(os.path.join(t, "many.txt"), "w") as f:
            f.write("".join("0x%x\n" % (jitdump_gen.BASE64 + i * 0x20 + 4)
                            for i in range(4000)))
        cls.addr = "0x%x" % (jitdump_gen.BASE64 + 0x48)   # inside JS:*fib
        with open(os.path.join(t, "script.txt"), "w") as f:
            f.write("node  4242 10.000001:     250000 cpu-clock:\n"
                    "\t    %x [unknown] (/tmp/perf-4242.map)\n\n" % (jitdump_gen.BASE64 + 0x48))

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def run_pg(self, args, stdout, stdin=None):
        fin = open(os.path.join(self.t, stdin), "rb") if stdin else subprocess.DEVNULL
        try:
            return subprocess.run([PERFGRAFT] + args, stdin=fin, stdout=stdout,
                                  stderr=subprocess.PIPE, cwd=self.t, timeout=TIMEOUT,
                                  text=True, errors="replace")
        finally:
            if stdin:
                fin.close()

    # (args, stdin file, the perf.data writer's message instead of main's)
    CASES = [
        (["dump", "base.dump"], None, False),
        (["dump", "--json", "base.dump"], None, False),
        (["dump", "file.data"], None, False),
        (["dump", "--json", "file.data"], None, False),
        (["dump", "pipe.data"], None, False),
        (["dump", "-"], "pipe.data", False),
        (["dump", "--json", "-"], "pipe.data", False),
        (["dump", "t.xray"], None, False),
        (["dump", "--json", "t.xray"], None, False),
        (["dump", "--time-order", "t.xray"], None, False),
        (["dump", "p.prof"], None, False),
        (["dump", "--json", "p.prof"], None, False),
        (["elf", "-q", "--list", "-o", "elf-list", "base.dump"], None, False),
        (["elf", "-q", "--maps", "-o", "elf-maps", "base.dump"], None, False),
        (["symbolize", "-q", "base.dump", "ADDR"], None, False),
        (["symbolize", "-q", "--format=json", "base.dump", "ADDR"], None, False),
        (["symbolize", "-q", "base.dump"], "addrs.txt", False),
        (["symbolize", "-q", "--perf-script", "base.dump"], "script.txt", False),
        (["perf-map", "-q", "-o", "-", "base.dump"], None, False),
        (["--help"], None, False),
        (["--version"], None, False),
        (["inject", "-q", "-i", "file.data", "-o", "-"], None, True),
        (["xray", "-q", "t.xray", "-o", "-"], None, True),
        (["xray", "--account", "-q", "-k", "-d", "t.xray"], None, False),
        (["xray", "--account", "-q", "-k", "-d", "-f", "csv", "t.xray"], None, False),
        (["gperf", "-q", "p.prof", "-o", "-"], None, True),
    ] + [([c, "--help"], None, False)
         for c in ("dump", "elf", "inject", "gperf", "symbolize", "perf-map", "xray")]

    def cases(self):
        with open(os.path.join(self.t, "addrs.txt"), "w") as f:
            f.write(self.addr + "\n")
        for args, stdin, pdw in self.CASES:
            yield [self.addr if a == "ADDR" else a for a in args], stdin, pdw

    def test_cases_write_when_stdout_works(self):
        """Each case writes something to a working stdout and exits 0 (so
        that /dev/full has something to refuse)."""
        for args, stdin, _ in self.cases():
            with self.subTest(args=args):
                p = self.run_pg(args, subprocess.PIPE, stdin)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertTrue(p.stdout, "nothing written")
                self.assertEqual(error_lines(p.stderr), [], p.stderr)
        shutil.rmtree(os.path.join(self.t, "elf-list"), ignore_errors=True)
        shutil.rmtree(os.path.join(self.t, "elf-maps"), ignore_errors=True)

    def test_dev_full(self):
        """stdout on /dev/full: exit 1, one error line."""
        for args, stdin, pdw in self.cases():
            with self.subTest(args=args):
                with open("/dev/full", "w") as full:
                    p = self.run_pg(args, full, stdin)
                self.assertEqual(p.returncode, 1, p.stderr)
                errs = error_lines(p.stderr)
                self.assertEqual(len(errs), 1, p.stderr)
                if pdw:
                    self.assertRegex(errs[0], PDW_ERR)
                else:
                    self.assertEqual(errs[0], STDIO_ERR)

    def test_inject_error_while_adding_images(self):
        """inject -o - whose output fails while a dump's images are added
        (per-function: 800 build-id records pass the first 64 KiB flush),
        after an earlier dump that was only a warning: the one error names
        standard output, not the earlier dump's problem nor nothing (both
        seen before: the error went to the dump's own diagnostics)."""
        d = os.path.join(self.t, "two")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "jit-5000.dump"), "wb") as f:
            f.write(b"garbage, not a jitdump" * 4)
        b = jitdump_gen.JitdumpBuilder(pid=4242)
        for i in range(800):
            b.load(b"JS:*f%05d" % i, jitdump_gen.x86_64_code(0x10, i),
                   jitdump_gen.BASE64 + i * 0x20, i, timestamp=2000 + i)
        b.write(os.path.join(d, "jit-4242.dump"))
        pd = perfdata_gen.PerfDataBuilder(attrs=[perfdata_gen.Attr(ids=[7])])
        for pid, t in ((5000, 10), (4242, 20)):
            pd.comm(pid, pid, "node", t)
            pd.mmap2(pid, pid, 0x10000, 4096, 0, os.path.join(d, "jit-%d.dump" % pid),
                     t + 1, prot=5)
        pd.sample(jitdump_gen.BASE64 + 8, 4242, 4242, 5000)
        pd.finished_round()
        pd.write(os.path.join(d, "two.data"))
        # -v, not -q: -q prints errors only, and the warning is looked for
        args = ["inject", "-v", "--layout", "per-function", "--image-dir",
                os.path.join(d, "imgs"), "-i", os.path.join(d, "two.data"), "-o", "-"]
        with open("/dev/full", "w") as full:
            p = self.run_pg(args, full)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("bad magic", p.stderr)	# the first dump's warning
        errs = error_lines(p.stderr)
        self.assertEqual(len(errs), 1, p.stderr)
        self.assertRegex(errs[0], PDW_ERR)
        self.assertFalse(os.path.exists(os.path.join(d, "imgs")) and
                         os.listdir(os.path.join(d, "imgs")), "images of an output never written")

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("mount"), "tmpfs needs root")
    def test_full_disk(self):
        """The issue's case: stdout a file on a 100 KiB file system that
        the dump outgrows: exit 1, one message, where it was exit 0 with
        the first 102,400 bytes."""
        fs = os.path.join(self.t, "fs")
        os.mkdir(fs)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=100k", "tmpfs", fs],
                           capture_output=True, text=True)
        if r.returncode:
            self.skipTest("cannot mount a tmpfs: " + r.stderr.strip())
        try:
            for args, stdin in ((["dump", "big.dump"], None),
                                (["dump", "--json", "big.dump"], None),
                                (["elf", "-q", "--list", "-o", "elf-big", "big.dump"], None),
                                (["symbolize", "-q", "big.dump"], "many.txt")):
                with self.subTest(args=args):
                    with open(os.path.join(fs, "out"), "w") as out:
                        p = self.run_pg(args, out, stdin)
                    size = os.path.getsize(os.path.join(fs, "out"))
                    self.assertEqual(p.returncode, 1, p.stderr)
                    self.assertEqual(error_lines(p.stderr), [STDIO_ERR], p.stderr)
                    self.assertGreater(size, 50 << 10)
                    os.unlink(os.path.join(fs, "out"))
        finally:
            subprocess.run(["umount", "-l", fs])

    def test_short_pipe(self):
        """A reader that reads 100 bytes and goes: SIGPIPE, nothing on
        stderr, as before (the output was not wanted)."""
        for args, stdin in ((["dump", "big.dump"], None), (["dump", "--json", "big.dump"], None),
                            (["elf", "-q", "--list", "-o", "elf-pipe", "big.dump"], None),
                            (["symbolize", "-q", "big.dump"], "many.txt")):
            with self.subTest(args=args):
                fin = open(os.path.join(self.t, stdin), "rb") if stdin else subprocess.DEVNULL
                p1 = subprocess.Popen([PERFGRAFT] + args, cwd=self.t, stdin=fin,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                if stdin:
                    fin.close()
                head = p1.stdout.read(100)
                p1.stdout.close()
                err = p1.stderr.read().decode(errors="replace")
                p1.stderr.close()
                p1.wait(timeout=TIMEOUT)
                self.assertEqual(len(head), 100)
                self.assertEqual(p1.returncode, -signal.SIGPIPE, err)
                self.assertEqual(err, "")


if __name__ == "__main__":
    unittest.main()
