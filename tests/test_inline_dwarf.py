#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Inline chains of the code model as DWARF inlined subroutines.

tests/inline_image.c (built by meson beside perfgraft, in tests/) writes
images of a hand-made model (see its header for the LOADs and chains) in
four layouts: x86-64 LE, PowerPC 64 BE, i386, PowerPC 32 BE, packed and
--per-function.  For chosen offsets the whole chain must come back,
innermost first, from addr2line -f -i, llvm-symbolizer --inlining and
eu-addr2line -f -i: the innermost line from the line rows, the callers'
from DW_AT_call_file/DW_AT_call_line.  llvm-dwarfdump --verify, readelf
-wi and eu-readelf must be clean; the abstract subprograms and inlined
subroutines eu-readelf shows are the expected ones; an image without
chains has no inlined subroutine.  --hostile adds invalid, deep and huge
chain lists: one warning per such LOAD, the valid chains kept, the
images still verify.

eu-addr2line looks the inline scopes up at the start of the line row
that holds the address (not at the address), so it is asked only where
a row starts inside the inline range.

Everything is written in tempfile directories; ~/.debug is not touched.
"""

import os
import re
import shutil
import subprocess
import tempfile
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dwarf_dies  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PERFGRAFT = os.path.abspath(os.environ.get(
    "PERFGRAFT", os.path.join(ROOT, "build", "perfgraft")))
BUILD = os.path.dirname(PERFGRAFT)
TOOL = os.path.join(BUILD, "tests", "inline_image")
TIMEOUT = 300


def which(*names):
    for n in names:
        if shutil.which(n):
            return n
    return None


SYMBOLIZER = which("llvm-symbolizer", "llvm-symbolizer-14")
DWARFDUMP = which("llvm-dwarfdump", "llvm-dwarfdump-14")

# (load, offset) -> the chain, innermost first: (function, file, line)
A = [("outer_a", 0, [("outer_a", "a.js", 10)]),
     ("outer_a", 16, [("helper", "lib.js", 100), ("outer_a", "a.js", 11)]),
     ("outer_a", 20, [("helper", "lib.js", 100), ("outer_a", "a.js", 11)]),
     ("outer_a", 24, [("inner", "lib.js", 200), ("helper", "lib.js", 101),
                      ("outer_a", "a.js", 11)]),
     ("outer_a", 31, [("inner", "lib.js", 200), ("helper", "lib.js", 101),
                      ("outer_a", "a.js", 11)]),
     ("outer_a", 32, [("outer_a", "a.js", 12)]),
     ("outer_a", 40, [("inner", "lib.js", 201), ("outer_a", "a.js", 13)]),
     ("outer_a", 48, [("outer_a", "a.js", 14)]),
     ("outer_a", 63, [("outer_a", "a.js", 14)]),
     ("outer_b", 0, [("outer_b", "b.js", 19)]),
     ("outer_b", 8, [("helper", "lib.js", 100), ("outer_b", "b.js", 20)]),
     ("outer_b", 16, [("inner", "lib.js", 200), ("helper", "lib.js", 102),
                      ("outer_b", "b.js", 21)]),
     ("outer_b", 23, [("inner", "lib.js", 200), ("helper", "lib.js", 102),
                      ("outer_b", "b.js", 21)]),
     ("outer_b", 24, [("outer_b", "b.js", 22)]),
     ("plain", 0, [("plain", "p.js", 5)]),
     ("plain", 31, [("plain", "p.js", 5)])]
# offsets where a line row starts (eu-addr2line's lookup point)
ROW_STARTS = {("outer_a", o) for o in (0, 16, 24, 32, 40, 48)} | \
    {("outer_b", o) for o in (0, 8, 16, 24)} | {("plain", 0)}

LAYOUTS = [("x86-64", []), ("ppc64-be", ["--be"]), ("i386", ["--32"]),
           ("ppc32-be", ["--be", "--32"])]


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=TIMEOUT)
    return (p.returncode, p.stdout.decode("utf-8", "replace"),
            p.stderr.decode("utf-8", "replace"))


def make(outdir, args):
    os.makedirs(outdir)
    rc, out, err = run([TOOL] + args + [outdir])
    if rc != 0:
        raise AssertionError("inline_image %s: exit %d: %s" % (args, rc, err))
    loads, warns = {}, []
    for ln in out.splitlines():
        if ln.startswith("warning: "):
            warns.append(ln[9:])
            continue
        name, path, pgoff, size = ln.split("\t")
        loads[name] = (path, int(pgoff, 16), int(size))
    return loads, warns


def pairs(lines):
    return [(lines[i], lines[i + 1]) for i in range(0, len(lines) - 1, 2)]


def fileline(s):
    """FILE:LINE[:COL] (eu-addr2line puts the missing comp dir, '(null)',
    in front) -> (file, line); line None for '?'."""
    s = s.strip()
    if s.startswith("(null)"):
        s = s[6:]
    m = re.match(r"^(.*?):(\d+|\?)(?::\d+)?$", s)
    if not m:
        return (s, None)
    return (m.group(1), None if m.group(2) == "?" else int(m.group(2)))


def _a2l(tool, img, addrs):
    """{addr: [(func, file, line)]} from one `TOOL -a -f -i` call (binutils
    addr2line or eu-addr2line: eu-addr2line names an inlined frame
    "inner inlined at FILE:LINE in outer", the function first)."""
    rc, out, err = run([tool, "-a", "-f", "-i", "-e", img] + ["0x%x" % a for a in addrs])
    if rc != 0:
        raise AssertionError("%s %s: exit %d: %s" % (tool, img, rc, err))
    res, cur = {}, None
    lines = out.splitlines()
    i = 0
    while i < len(lines):
        if re.match(r"^0x[0-9a-f]+$", lines[i]):
            cur = int(lines[i], 16)
            res[cur] = []
            i += 1
            continue
        f = lines[i].split(" inlined ")[0]
        res[cur].append((f, ) + fileline(lines[i + 1]))
        i += 2
    return res


def addr2line(img, addrs):
    return _a2l("addr2line", img, addrs)


def symbolizer(img, addrs):
    rc, out, err = run([SYMBOLIZER, "--inlining", "--obj=" + img]
                       + ["0x%x" % a for a in addrs])
    if rc != 0:
        raise AssertionError("%s %s: exit %d: %s" % (SYMBOLIZER, img, rc, err))
    blocks = out.strip("\n").split("\n\n")
    res = {}
    for a, b in zip(addrs, blocks):
        res[a] = [(f, ) + fileline(fl) for f, fl in pairs(b.strip("\n").split("\n"))]
    return res


def eu_addr2line(img, addrs):
    return _a2l("eu-addr2line", img, addrs)


def eu_info(img):
    """(abstract subprograms {offset: name}, [(origin offset, call line)])."""
    rc, out, err = run(["eu-readelf", "--debug-dump=info", img])
    if rc != 0 or err.strip():
        raise AssertionError("eu-readelf %s: exit %d: %s" % (img, rc, err))
    dies = dwarf_dies.parse(out)
    abstract = {d["off"]: d["name"].strip('"') for d in dies
                if d["tag"] == "subprogram" and "inline" in d}
    inl = []
    for d in dies:
        if d["tag"] == "inlined_subroutine":
            inl.append((dwarf_dies.origin(d), int(d["call_line"])))
    return abstract, inl


class InlineDwarf(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(TOOL):
            raise unittest.SkipTest("%s not built" % TOOL)
        cls.tmp = tempfile.mkdtemp(prefix="pg-inline-")
        cls.sets = {}
        for name, args in LAYOUTS:
            cls.sets[name] = make(os.path.join(cls.tmp, name), args)
        cls.sets["per-function"] = make(os.path.join(cls.tmp, "perfn"), ["--per-function"])
        cls.sets["hostile"] = make(os.path.join(cls.tmp, "hostile"), ["--hostile"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def images(self, which=None):
        out = set()
        for k, (loads, _) in self.sets.items():
            if which is None or k == which:
                out |= {p for p, _, _ in loads.values()}
        return sorted(out)

    def check_tool(self, query, label, only=None):
        for lay in [n for n, _ in LAYOUTS] + ["per-function"]:
            loads = self.sets[lay][0]
            byimg = {}
            for load, off, chain in A:
                if only is not None and (load, off) not in only:
                    continue
                path, pgoff, _ = loads[load]
                byimg.setdefault(path, []).append((pgoff + off, load, off, chain))
            for img, items in byimg.items():
                got = query(img, [a for a, _, _, _ in items])
                for a, load, off, chain in items:
                    self.assertEqual(got.get(a), chain, "%s %s %s+%d (0x%x in %s)" % (
                        label, lay, load, off, a, img))

    def test_addr2line(self):
        self.check_tool(addr2line, "addr2line -f -i")

    @unittest.skipUnless(SYMBOLIZER, "no llvm-symbolizer")
    def test_llvm_symbolizer(self):
        self.check_tool(symbolizer, "llvm-symbolizer --inlining")

    @unittest.skipUnless(shutil.which("eu-addr2line"), "no eu-addr2line")
    def test_eu_addr2line(self):
        self.check_tool(eu_addr2line, "eu-addr2line -f -i", only=ROW_STARTS)

    @unittest.skipUnless(DWARFDUMP, "no llvm-dwarfdump")
    def test_dwarfdump_verify(self):
        for img in self.images():
            rc, out, err = run([DWARFDUMP, "--verify", img])
            self.assertEqual(rc, 0, "%s --verify %s: %s" % (DWARFDUMP, img, (out + err)[-800:]))
            self.assertIn("No errors.", out, img)

    def test_readelf_clean(self):
        for img in self.images():
            rc, out, err = run(["readelf", "-wi", img])
            bad = [ln for ln in (out + err).splitlines() if re.search(r"[Ww]arning|[Ee]rror", ln)]
            self.assertEqual((rc, bad), (0, []), "readelf -wi %s" % img)

    @unittest.skipUnless(shutil.which("eu-readelf"), "no eu-readelf")
    def test_eu_readelf_dies(self):
        for lay, _ in LAYOUTS:
            img = self.images(lay)
            self.assertEqual(len(img), 1, lay)
            abstract, inl = eu_info(img[0])
            # one abstract subprogram per inlined function of the image
            self.assertEqual(sorted(abstract.values()), ["helper", "inner"], lay)
            got = sorted((abstract.get(ref, "?%x" % ref), line) for ref, line in inl)
            # outer_a: helper@a.js:11 [16,32) holding inner@lib.js:101,
            # inner@a.js:13; outer_b: helper@b.js:20, helper@b.js:21
            # holding inner@lib.js:102
            self.assertEqual(got, [("helper", 11), ("helper", 20), ("helper", 21),
                                   ("inner", 13), ("inner", 101), ("inner", 102)], lay)

    @unittest.skipUnless(shutil.which("eu-readelf"), "no eu-readelf")
    def test_image_without_chains(self):
        loads = self.sets["per-function"][0]
        plain = loads["plain"][0]
        for img in self.images("per-function"):
            rc, out, err = run(["eu-readelf", "--debug-dump=info", img])
            self.assertEqual(rc, 0, img)
            has = "inlined_subroutine" in out
            self.assertEqual(has, img != plain, img)
            if img == plain:
                self.assertNotIn(" inline ", out, img)
                rc, out, err = run(["eu-readelf", "--debug-dump=abbrev", img])
                self.assertNotIn("inlined_subroutine", out, img)

    def test_hostile(self):
        loads, warns = self.sets["hostile"]
        # one warning per LOAD with something left out or cut
        self.assertEqual(len(warns), 4, warns)
        # a 1 MiB + 1 byte inlined function name is left out, the valid
        # chain beside it kept
        self.assertTrue(any("code index 7" in w and "1 of 2 inline chains left out "
                            "(the first: a function name over 1 MiB)" in w
                            for w in warns), warns)
        img, pg, _ = loads["longname"]
        got = addr2line(img, [pg + 0, pg + 8])
        self.assertEqual(got[pg + 0], [("longname", "p.js", 5)])
        self.assertEqual(got[pg + 8], [("helper", "p.js", 5), ("longname", "??", None)])
        self.assertTrue(any("code index 4" in w and "10 of 13 inline chains left out" in w
                            for w in warns), warns)
        self.assertTrue(any("code index 5" in w and "1 cut to their innermost 64" in w
                            for w in warns), warns)
        self.assertTrue(any("code index 6" in w and "1000000 of 1070000" in w
                            for w in warns), warns)
        img, pg, _ = loads["hostile"]
        got = addr2line(img, [pg + 0, pg + 8, pg + 16, pg + 24, pg + 40])
        self.assertEqual(got[pg + 0], [("hostile", "p.js", 5)])
        self.assertEqual(got[pg + 8], [("helper", "p.js", 5), ("hostile", "??", None)])
        self.assertEqual(got[pg + 16], [("inner", "p.js", 5), ("hostile", "h.js", 3)])
        self.assertEqual(got[pg + 24], [("hostile", "p.js", 5)])
        self.assertEqual(got[pg + 40], [("helper", "p.js", 5), ("hostile", "??", None)])
        # the deep chain keeps its innermost 64 inlined frames
        img, pg, _ = loads["deep"]
        got = addr2line(img, [pg, pg + 16])
        self.assertEqual([f for f, _, _ in got[pg]], ["d%d" % k for k in range(64)] + ["deep"])
        self.assertEqual(got[pg][1:], [("d%d" % k, "deep.js", 1000 + k) for k in range(1, 64)]
                         + [("deep", "deep.js", 1064)])
        self.assertEqual(got[pg + 16], [("d98", "p.js", 5), ("d99", "deep.js", 1099),
                                        ("deep", "deep.js", 1)])
        # 70000 one-byte chains alternating between two callers
        img, pg, _ = loads["many"]
        got = addr2line(img, [pg + 0, pg + 1, pg + 69999])
        self.assertEqual(got[pg + 1], [("inner", "p.js", 5), ("helper", "lib.js", 101),
                                       ("many", "a.js", 11)])
        self.assertEqual(got[pg + 0], [("inner", "p.js", 5), ("helper", "lib.js", 102),
                                       ("many", "b.js", 21)])
        self.assertEqual(got[pg + 69999], got[pg + 1])
        # the valid LOADs of the same image are unharmed
        img, pg, _ = loads["outer_a"]
        self.assertEqual(addr2line(img, [pg + 24])[pg + 24], A[3][2])


if __name__ == "__main__":
    unittest.main()
