#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""XRay instrumentation maps of every target, checked against llvm-xray.

Run from the repository root:  python3 -m unittest tests.test_xray_maps_ext -v
The binary is $PERFGRAFT or <repo>/build/perfgraft.  perfgraft's view of a
map is `perfgraft xray --functions -b MAP` (id, address, ..., name).

GeneratedMapsTest (needs yaml2obj-14 only): tests/xray_map_gen.py's small
ELF files, one per target (x86-64, AArch64, ARM, PPC64, MIPS, MIPS64,
SystemZ), byte order, object type (.o, .so), relocation section (REL,
RELA) and relocation kind (absolute, PC-relative, RELATIVE): the functions
must be the generator's.  Where llvm-xray 14 reads the file and resolves
that relocation right (little-endian 64-bit and ARM RELA targets; REL
addends it ignores, R_ARM_REL32 and ARM's RELATIVE it resolves wrongly,
big-endian files it refuses), its `extract` must agree too.

ExtMapsTest (skipped without ../shared/ext or $PERFGRAFT_EXT): LLVM's own test inputs,
compared with `llvm-xray-14 extract` and with the lit CHECK lines where
llvm-xray 14 cannot read them (SystemZ is big-endian).  YAML maps as
`llvm-xray extract` writes them, a map whose size is not a multiple of the
entry, LLVM's test binaries cut at 256 KiB.

YamlMapTest: the strict YAML reader's errors name the line.
"""

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import xray_map_gen as gen  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
# beside the repository; $PERFGRAFT_EXT when the checkout is elsewhere (a worktree)
EXT = os.environ.get("PERFGRAFT_EXT") or os.path.join(ROOT, "..", "shared", "ext")
XEXT = os.path.join(EXT, "llvm-xray")
YAML2OBJ = shutil.which("yaml2obj-14")
LLVM_XRAY = shutil.which("llvm-xray-14")
TIMEOUT = 60
FUNC_RE = re.compile(r"^\s+(\d+)\s+0x([0-9a-f]+)\s+\d+\s+\S+\s+(.*?)(?: \[always\])?$", re.M)
SLED_RE = re.compile(r"id: (\d+), address: 0x([0-9A-Fa-f]+), function: 0x([0-9A-Fa-f]+)"
                     r"(?:.*?function-name: ('[^']*'|[^,}]*))?")


def run(args):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=TIMEOUT, universal_newlines=True)


def perfgraft_map(path, opt="-b"):
    """{id: (address, name)} from perfgraft xray --functions."""
    p = run([PERFGRAFT, "xray", "--functions", opt, path])
    if p.returncode != 0:
        raise AssertionError("perfgraft failed on %s: %s" % (path, p.stderr))
    return {int(m.group(1)): (int(m.group(2), 16), m.group(3))
            for m in FUNC_RE.finditer(p.stdout)}


def sled_lines(text):
    """[(id, address, function, name)] of llvm-xray extract's YAML (or a
    lit test's CHECK lines of it)."""
    out = []
    for m in SLED_RE.finditer(text):
        name = (m.group(4) or "").strip().strip("'")
        out.append((int(m.group(1)), int(m.group(2), 16), int(m.group(3), 16), name))
    return out


def llvm_extract(path, symbolize=False):
    p = run([LLVM_XRAY, "extract", path] + (["-s"] if symbolize else []))
    return p, sled_lines(p.stdout)


def functions_of(sleds):
    """{id: function} the way a map's sleds give them."""
    out = {}
    for fid, _, func, _ in sleds:
        out.setdefault(fid, func)
    return out


def llvm14_right(c):
    """Does llvm-xray 14 resolve this generated case right?  It refuses
    big-endian and 32-bit MIPS/PPC files; for SHT_REL it takes the word
    as it is when non-zero (the addend) instead of relocating it; it has
    no R_ARM_REL32 and gets ARM's RELATIVE wrong."""
    if c.byte_order != "<" or c.arch in ("mips", "mips64", "s390x"):
        return False
    if c.sec == "SHT_REL" and c.kind == "abs":
        return False
    if c.arch == "arm":
        return c.kind == "abs"
    return True


@unittest.skipUnless(YAML2OBJ, "needs yaml2obj-14")
class GeneratedMapsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pg-xmap-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def build(self, c):
        y = os.path.join(self.tmp, c.name + ".yaml")
        out = os.path.join(self.tmp, c.name)
        with open(y, "w") as f:
            f.write(c.yaml())
        p = run([YAML2OBJ, y, "-o", out])
        self.assertEqual(p.returncode, 0, p.stderr)
        return out

    def test_every_target_relocation_and_byte_order(self):
        cases = gen.cases()
        seen = set()
        for c in cases:
            seen.add((c.arch, c.byte_order, c.etype, c.sec, c.kind))
            with self.subTest(case=c.name):
                path = self.build(c)
                got = perfgraft_map(path)
                self.assertEqual({k: v[0] for k, v in got.items()}, c.functions)
                self.assertEqual([got[k][1] for k in sorted(got)], ["f0", "f1", "f2"])
                if LLVM_XRAY and llvm14_right(c):
                    p, sleds = llvm_extract(path)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    self.assertEqual(functions_of(sleds), c.functions)
        # both byte orders wherever the target has them, REL and RELA, .o and .so
        for arch, (_, _, orders, _, _, _) in gen.ARCHES.items():
            for bo in orders:
                for sec in ("SHT_REL", "SHT_RELA"):
                    self.assertIn((arch, bo, "ET_REL", sec, "abs"), seen)
                    self.assertIn((arch, bo, "ET_DYN", sec, "relative"), seen)


@unittest.skipUnless(os.path.isdir(XEXT), "no %s (LLVM's test inputs)" % XEXT)
@unittest.skipUnless(YAML2OBJ and LLVM_XRAY, "needs yaml2obj-14 and llvm-xray-14")
class ExtMapsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pg-xmap-ext-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def yaml2obj(self, src, name):
        out = os.path.join(self.tmp, name)
        p = run([YAML2OBJ, src, "-o", out])
        self.assertEqual(p.returncode, 0, p.stderr)
        return out

    def check_lit(self, test, so, llvm_reads):
        """The lit test's CHECK lines (symbolized, demangled) are the
        reference; llvm-xray 14 must agree with them when it reads the file."""
        with open(test) as f:
            want = sled_lines("\n".join(l for l in f if l.startswith("# CHECK")))
        self.assertTrue(want)
        got = perfgraft_map(so)
        self.assertEqual({k: v[0] for k, v in got.items()}, functions_of(want))
        names = {}
        for fid, _, _, name in want:
            names.setdefault(fid, name)
        self.assertEqual({k: v[1] for k, v in got.items()}, names)
        p, sleds = llvm_extract(so, symbolize=True)
        if llvm_reads:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(functions_of(sleds), functions_of(want))
        else:
            self.assertNotEqual(p.returncode, 0)
        return got

    def test_aarch64_pic(self):
        # R_AARCH64_RELATIVE in .rela.dyn (before: every sled was @(0));
        # llvm-xray 14 reads this one right
        so = self.yaml2obj(os.path.join(XEXT, "AArch64", "Inputs", "elf64-pic.yaml"), "a64.so")
        got = self.check_lit(os.path.join(XEXT, "AArch64", "extract-instrmap.test"), so, True)
        self.assertEqual([got[k][0] for k in sorted(got)], [0x420, 0x464, 0x4a8])

    def test_arm_pic(self):
        so = self.yaml2obj(os.path.join(XEXT, "ARM", "extract-instrmap.test"), "arm.so")
        got = self.check_lit(os.path.join(XEXT, "ARM", "extract-instrmap.test"), so, True)
        self.assertEqual([got[k][0] for k in sorted(got)], [0x12b0, 0x12ec, 0x1328])

    def test_systemz_pic(self):
        # big-endian: llvm-xray 14 refuses it ("only does ... little endian
        # 64-bit"); the lit test's CHECK lines (a newer llvm-xray) are the reference
        so = self.yaml2obj(os.path.join(XEXT, "SystemZ", "Inputs", "elf64-pic.yaml"), "s390.so")
        self.check_lit(os.path.join(XEXT, "SystemZ", "extract-instrmap.test"), so, False)

    def test_relocatable_object(self):
        # only .relaxray_instr_map applies (before: .rela.text's offsets
        # were matched too, giving {1: 0x40, 2: 0x0}).  llvm-xray numbers
        # a function at address 0 with the next one (its "no function yet"
        # is 0): compare the functions in sled order, not its IDs.
        o = os.path.join(XEXT, "X86", "Inputs", "all-sleds.o")
        p, sleds = llvm_extract(o)
        self.assertEqual(p.returncode, 0, p.stderr)
        order = []
        for _, _, func, _ in sleds:
            if not order or order[-1] != func:
                order.append(func)
        self.assertEqual(order, [0x0, 0x20, 0x50])
        got = perfgraft_map(o)
        self.assertEqual([got[k][0] for k in sorted(got)], order)
        self.assertEqual(sorted(got), [1, 2, 3])

    def test_x86_binaries_agree_with_llvm_xray(self):
        for name in ("elf64-example.bin", "elf64-pie.bin", "elf64-sample-o2.bin",
                     "elf64-objcopied-instrmap.bin"):
            with self.subTest(binary=name):
                path = os.path.join(XEXT, "X86", "Inputs", name)
                p, sleds = llvm_extract(path)
                self.assertEqual(p.returncode, 0, p.stderr)
                got = perfgraft_map(path)
                self.assertEqual({k: v[0] for k, v in got.items()}, functions_of(sleds))

    def test_bad_entry_sizes(self):
        path = os.path.join(XEXT, "X86", "Inputs", "elf64-badentrysizes.bin")
        q = run([LLVM_XRAY, "extract", path])
        self.assertNotEqual(q.returncode, 0)
        self.assertIn("not evenly divisible", q.stderr)
        p = run([PERFGRAFT, "xray", "--functions", "-b", path])
        self.assertEqual(p.returncode, 1, p.stderr)
        r = run(["readelf", "-SW", path])
        m = re.search(r"xray_instr_map\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", r.stdout)
        off, size = int(m.group(1), 16), int(m.group(2), 16)
        self.assertNotEqual(size % 32, 0)
        for part in (path, "xray_instr_map", "size %d" % size, "offset %d" % off):
            self.assertIn(part, p.stderr)
        self.assertEqual(p.stdout, "")

    def test_truncated_binaries(self):
        tdir = os.path.join(EXT, "llvm-xray-truncated")
        if not os.path.isdir(tdir):
            self.skipTest("no %s" % tdir)
        for name in sorted(os.listdir(tdir)):
            path = os.path.join(tdir, name)
            with self.subTest(binary=name):
                with open(path, "rb") as f:
                    head = f.read(64)
                shoff = struct.unpack_from("<Q", head, 0x28)[0]
                size = os.path.getsize(path)
                self.assertGreater(shoff, size)
                p = run([PERFGRAFT, "xray", "--functions", "-b", path])
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn("truncated", p.stderr)
                self.assertIn("offset %d" % shoff, p.stderr)
                self.assertIn("(%d bytes)" % size, p.stderr)
                self.assertNotIn("-fxray-instrument", p.stderr)

    def test_yaml_maps(self):
        for name in ("simple-instrmap.yaml", "simple-xray-instrmap.yaml"):
            path = os.path.join(XEXT, "X86", "Inputs", name)
            with open(path) as f:
                want = functions_of(sled_lines(f.read()))
            for opt in ("-m", "-b"):
                with self.subTest(map=name, opt=opt):
                    got = perfgraft_map(path, opt)
                    self.assertEqual({k: v[0] for k, v in got.items()}, want)
                    self.assertEqual({k: v[1] for k, v in got.items()},
                                     {k: "@(%x)" % a for k, a in want.items()})

    def test_own_extract_output_round_trips(self):
        # llvm-xray extract -s of a binary, read back as a map: the same
        # functions and names as the binary gives
        path = os.path.join(XEXT, "X86", "Inputs", "elf64-sample-o2.bin")
        p = run([LLVM_XRAY, "extract", "-s", path])
        self.assertEqual(p.returncode, 0, p.stderr)
        y = os.path.join(self.tmp, "map.yaml")
        with open(y, "w") as f:
            f.write(p.stdout)
        got = perfgraft_map(y, "-m")
        sleds = sled_lines(p.stdout)
        names = {}
        for fid, _, _, name in sleds:
            names.setdefault(fid, name)
        self.assertEqual({k: v[0] for k, v in got.items()}, functions_of(sleds))
        self.assertEqual({k: v[0] for k, v in perfgraft_map(path).items()}, functions_of(sleds))
        self.assertEqual({k: v[1] for k, v in got.items()}, names)

    @unittest.skipUnless(shutil.which("perf"), "needs perf")
    def test_yaml_map_converts_like_llvm_xray(self):
        # convert-with-yaml-instrmap.txt's inputs: the functions perf script
        # shows are those llvm-xray convert --symbolize names
        x = os.path.join(XEXT, "X86", "Inputs")
        m = os.path.join(x, "simple-xray-instrmap.yaml")
        trace = os.path.join(x, "naive-log-simple.xray")
        q = run([LLVM_XRAY, "convert", "-m", m, trace, "-f", "yaml", "--symbolize"])
        self.assertEqual(q.returncode, 0, q.stderr)
        want = {(int(a), b) for a, b in re.findall(r"func-id: (\d+), function: '([^']*)'", q.stdout)}
        out = os.path.join(self.tmp, "perf.data")
        p = run([PERFGRAFT, "xray", trace, "-m", m, "-o", out, "-q"])
        self.assertEqual(p.returncode, 0, p.stderr)
        s = run(["perf", "--buildid-dir", os.path.join(self.tmp, "bid"), "script", "-i", out])
        self.assertEqual(s.returncode, 0, s.stderr)
        got = {(int(a), b) for a, b in re.findall(r"xray:function: id=(\d+) addr=\S+ name=(\S+)",
                                                  s.stdout)}
        self.assertEqual(got, want)


class YamlMapTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pg-xmap-yaml-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def write(self, text):
        path = os.path.join(self.tmp, "map.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    GOOD = ("# comment\n---\n"
            "- { id: 1, address: 0x10, function: 0x10, kind: function-enter, "
            "always-instrument: true, function-name: '_Z3foov' }\n"
            "- { id: 1, address: 0x20, function: 0x10, kind: function-exit, "
            "always-instrument: false, version: 2 }\n"
            "- id: 7\n  address: 0x40\n  function: 0x40   # block style\n"
            "  kind: log-args-enter\n  always-instrument: true\n"
            "  function-name: \"a, b\"\n"
            "...\n")

    def test_accepts_llvm_subset(self):
        got = perfgraft_map(self.write(self.GOOD), "-m")
        self.assertEqual(got, {1: (0x10, "foo()"), 7: (0x40, "a, b")})

    def test_errors_name_the_line(self):
        lines = self.GOOD.splitlines(True)
        bad = {
            3: lines[2].replace("kind:", "knd:"),                # unknown key
            4: lines[3].replace("function: 0x10", "function: 0x11"),  # id 1 twice
            6: "  address: 0x4g\n",                             # not a number
            8: "  kind: function-entry\n",                      # unknown kind
            9: "  always-instrument: maybe\n",
        }
        for line, text in sorted(bad.items()):
            doc = lines[:line - 1] + [text] + lines[line:]
            with self.subTest(line=line, text=text.strip()):
                p = run([PERFGRAFT, "xray", "--functions", "-m", self.write("".join(doc))])
                self.assertEqual(p.returncode, 1, p.stdout)
                self.assertIn("map.yaml: line %d:" % line, p.stderr)
        # a missing required key: the entry's first line
        doc = lines[:6] + lines[7:]
        p = run([PERFGRAFT, "xray", "--functions", "-m", self.write("".join(doc))])
        self.assertEqual(p.returncode, 1)
        self.assertIn("line 5: the entry has no 'function'", p.stderr)
        # text that is neither ELF nor YAML
        p = run([PERFGRAFT, "xray", "--functions", "-m", self.write("hello\n")])
        self.assertEqual(p.returncode, 1)
        self.assertIn("not an ELF file", p.stderr)


if __name__ == "__main__":
    unittest.main()
