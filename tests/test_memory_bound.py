"""Peak memory against the dump (issue 26, point 2).

The dump is a file: its code goes into the images by pwrite from the
mapping, and the mapping's pages leave the process's page tables as they
are read (a touched mapped page counts in RSS), so `perfgraft inject` and
`perfgraft elf` peak well under the dump's size in every layout.  A
synthetic dump of 768 LOADs of 64 KiB of code each (48 MiB; code bytes
differ per function, so no page is shared) and a perf.data mapping it;
each command runs alone in a child whose peak RSS (ru_maxrss) must stay
under half the dump + 8 MiB (19 MiB here; unchecked in a sanitizer
build), and the images must hold the dump's code
byte for byte (vaddr == file offset).  Before the change every layout
peaked at the dump's size and more.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import perf_fixture as pf
import perfdata_gen as G

PERFGRAFT = pf.PERFGRAFT
PID = 4343
T0 = 10_000_000_000
BASE = 0x7F1000000000
NFUNC = 768
CODE = 64 * 1024
MAGIC = 0x4A695444
EM_X86_64 = 62


def code_of(i):
    """64 KiB that differ per function: a ret-terminated run of nops with
    the index spelt through it."""
    word = struct.pack("<I", i) + b"\x90" * 12
    return (word * (CODE // 16))[:-1] + b"\xc3"


def write_dump(path):
    with open(path, "wb") as f:
        f.write(struct.pack("<IIIIIIQQ", MAGIC, 1, 40, EM_X86_64, 0, PID, T0, 0))
        for i in range(NFUNC):
            name = b"JS:*big_%d\0" % i
            addr = BASE + i * (CODE + 4096)
            size = 16 + 40 + len(name) + CODE
            f.write(struct.pack("<IIQIIQQQQ", 0, size, T0 + 1000 * i + 100, PID, PID,
                                addr, addr, CODE, i) + name + code_of(i))


def write_perfdata(path, dump):
    b = G.PerfDataBuilder(attrs=[G.Attr(ids=[101])])
    b.feat_string(G.FEAT_HOSTNAME, "perfgraft-test")
    b.feat_string(G.FEAT_OSRELEASE, "6.1.0")
    b.feat_string(G.FEAT_VERSION, "6.1.0")
    b.feat_string(G.FEAT_ARCH, "x86_64")
    b.feat_event_desc()
    b.comm(PID, PID, "node", T0 - 3000)
    b.mmap2(PID, PID, 0x7FFFF7FF0000, 4096, 0, os.path.abspath(dump), T0 - 1000)
    for i in range(0, NFUNC, 16):
        ip = BASE + i * (CODE + 4096) + 8
        b.sample(ip, PID, PID, T0 + 1000 * i + 500, callchain=[G.PERF_CONTEXT_USER, ip])
    b.finished_round()
    b.write(path)


def peak_rss(cmd, cwd):
    """(exit status, stderr, peak RSS in bytes) of cmd run in a fresh
    child (a forked helper, so ru_maxrss is that command's alone)."""
    helper = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
        "sys.stderr.buffer.write(p.stderr)\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    p = subprocess.run([sys.executable, "-c", helper] + list(cmd), cwd=cwd,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    rc, kb = p.stdout.decode().split()
    return int(rc), p.stderr.decode("utf-8", "replace"), int(kb) * 1024


def images_hold_code(testcase, d):
    """Every function's code is in some image at the offset of its symbol."""
    found = 0
    for path, funcs in pf.image_funcs(d, check=True):
        with open(path, "rb") as fh:
            data = fh.read()
        for off, _, name in funcs:
            if name.startswith("JS:*big_"):
                i = int(name[len("JS:*big_"):])
                testcase.assertEqual(data[off:off + CODE], code_of(i),
                                     "%s in %s" % (name, os.path.basename(path)))
                found += 1
    return found


class MemoryBound(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pg-membound-")
        cls.dump = os.path.join(cls.tmp, "jit-%d.dump" % PID)
        write_dump(cls.dump)
        cls.data = os.path.join(cls.tmp, "perf.data")
        write_perfdata(cls.data, cls.dump)
        cls.size = os.path.getsize(cls.dump)
        cls.budget = cls.size // 2 + 8 * 2**20
        # a sanitizer's shadow memory and quarantine are no figure of ours
        dyn = subprocess.run(["readelf", "-d", PERFGRAFT], stdout=subprocess.PIPE,
                             check=True).stdout.decode()
        cls.sanitized = "libasan" in dyn

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check(self, cmd, outdir):
        rc, err, rss = peak_rss(cmd, self.tmp)
        self.assertEqual(rc, 0, err)
        if not self.sanitized:
            self.assertLessEqual(rss, self.budget,
                                 "peak RSS %.1f MiB for a %.1f MiB dump: %s" % (
                                     rss / 2**20, self.size / 2**20, " ".join(cmd)))
        self.assertEqual(images_hold_code(self, outdir), NFUNC)

    def test_elf_every_layout(self):
        for layout in ("packed", "memory", "per-function"):
            with self.subTest(layout=layout):
                out = os.path.join(self.tmp, "elf-" + layout)
                os.mkdir(out)
                self.check([PERFGRAFT, "elf", "-q", "--layout", layout, self.dump, "-o", out], out)
                shutil.rmtree(out)

    def test_inject_every_layout(self):
        for layout in ("packed", "memory", "per-function"):
            with self.subTest(layout=layout):
                out = os.path.join(self.tmp, "inj-%s.data" % layout)
                self.check([PERFGRAFT, "inject", "-N", "-q", "--layout", layout,
                            "-i", self.data, "-o", out], out + ".d")
                shutil.rmtree(out + ".d")
                os.unlink(out)


if __name__ == "__main__":
    unittest.main()
