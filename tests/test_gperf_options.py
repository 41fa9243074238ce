# SPDX-License-Identifier: MIT
"""perfgraft gperf's --root, --map, --set-pid and --comm on a real profile.

A small program is profiled with libprofiler; its binary is then moved, as
when a profile is read on another machine.  perf report must name the
program's functions only when the option points perf at the moved file
(--root DIR for a copy under DIR, --map OLD=NEW for a moved directory), and
perf script must show the process ID and command given (or the PID from a
child's NAME_PID profile name).
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(os.path.dirname(HERE), "build", "perfgraft"))
LIBPROFILER = "/usr/lib/x86_64-linux-gnu/libprofiler.so"

PROG = r"""
#include <stdio.h>
volatile unsigned long sink;
__attribute__((noinline)) void opt_leaf(int n) { for (int i = 0; i < n; i++) sink += (unsigned)i * i; }
__attribute__((noinline)) void opt_mid(int k) { opt_leaf(k & 1 ? 3000 : 1000); }
int main(void) { for (int i = 0; i < 300000; i++) opt_mid(i); printf("%lu\n", sink); return 0; }
"""


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=300, **kw)


@unittest.skipIf(shutil.which("perf") is None, "perf is not installed")
@unittest.skipIf(shutil.which("gcc") is None, "gcc is not installed")
@unittest.skipIf(not os.path.exists(LIBPROFILER),
                 "libprofiler is not installed (apt-get install libgoogle-perftools-dev)")
class GperfOptions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="pg-gperf-opts-")
        t = cls.tmp.name
        cls.built = os.path.join(t, "built")
        os.mkdir(cls.built)
        src = os.path.join(cls.built, "optprog.c")
        with open(src, "w") as f:
            f.write(PROG)
        cls.exe = os.path.join(cls.built, "optprog")
        r = run(["gcc", "-O1", "-g", "-o", cls.exe, src])
        if r.returncode:
            raise AssertionError("gcc: " + r.stderr)
        cls.prof = os.path.join(t, "optprog.prof")
        env = dict(os.environ, CPUPROFILE=cls.prof, CPUPROFILE_FREQUENCY="1000",
                   LD_PRELOAD=LIBPROFILER)
        r = run([cls.exe], env=env)
        if r.returncode or not os.path.exists(cls.prof):
            raise AssertionError("profiling failed: " + r.stderr)
        cls.buildid = os.path.join(t, "buildid")
        os.mkdir(cls.buildid)
        # the binary leaves its recorded place, as on another machine
        cls.root = os.path.join(t, "sysroot")
        os.makedirs(cls.root + cls.built)
        shutil.copy2(cls.exe, cls.root + cls.exe)
        cls.moved = os.path.join(t, "moved")
        os.mkdir(cls.moved)
        shutil.copy2(cls.exe, os.path.join(cls.moved, "optprog"))
        os.unlink(cls.exe)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def convert(self, name, *opts, prof=None):
        out = os.path.join(self.tmp.name, name + ".data")
        r = run([PERFGRAFT, "gperf", prof or self.prof, "-o", out] + list(opts))
        self.assertEqual(r.returncode, 0, r.stderr)
        return out, r.stderr

    def symbols(self, data):
        r = run(["perf", "--buildid-dir", self.buildid, "report", "-i", data, "--stdio",
                 "--no-children", "-n", "--sort", "sym"])
        self.assertEqual(r.returncode, 0, r.stderr)
        return {m.group(2): int(m.group(1))
                for m in re.finditer(r"^\s+[\d.]+%\s+(\d+)\s+\[\.\]\s+(\S+)", r.stdout, re.M)}

    def test_moved_binary_unresolved_without_options(self):
        syms = self.symbols(self.convert("plain")[0])
        self.assertNotIn("opt_leaf", syms)

    def test_root(self):
        data, err = self.convert("root", "--root", self.root)
        syms = self.symbols(data)
        self.assertIn("opt_leaf", syms, syms)
        # the hot loop holds nearly all the ticks
        self.assertGreater(syms["opt_leaf"], 0.8 * sum(syms.values()))

    def test_map(self):
        data, err = self.convert("map", "--map", "%s=%s" % (self.built, self.moved))
        syms = self.symbols(data)
        self.assertIn("opt_leaf", syms, syms)
        # a prefix that is not a whole directory name does not match
        data, err = self.convert("map2", "--map", "%s=%s" % (self.built[:-2], self.moved))
        self.assertNotIn("opt_leaf", self.symbols(data))

    def test_pid_comm(self):
        data, err = self.convert("pidcomm", "--set-pid", "4242", "--comm", "renamed",
                                 "--root", self.root)
        r = run(["perf", "--buildid-dir", self.buildid, "script", "-i", data, "-F", "comm,pid"])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = {ln.split()[0] + " " + ln.split()[1] for ln in r.stdout.splitlines() if ln.strip()}
        self.assertEqual(lines, {"renamed 4242"})
        # by default: the program's name, the PID of a child's NAME_PID profile
        child = os.path.join(self.tmp.name, "optprog.prof_31337")
        shutil.copy(self.prof, child)
        data, err = self.convert("child", prof=child)
        self.assertIn("of optprog (pid 31337)", err)
        r = run(["perf", "--buildid-dir", self.buildid, "script", "-i", data, "-F", "comm,pid"])
        self.assertEqual({" ".join(ln.split()[:2]) for ln in r.stdout.splitlines() if ln.strip()},
                         {"optprog 31337"})


if __name__ == "__main__":
    unittest.main()
