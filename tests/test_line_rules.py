#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The code model's line rules (issue 22) on generated dumps, in both
byte orders, read back three ways: `perfgraft symbolize`, addr2line on
the image `perfgraft elf` writes, and llvm-dwarfdump's line table.

  - a row before the code's start (BeamAsm's label ahead of the
    prologue) applies from the start; of several, the one nearest the
    start; a row at the start itself wins over them;
  - a row with line 0 ("no source line") is kept as line 0, so its bytes
    do not take the line before;
  - LLVM's PerfJITEventListener adds 0x40 to line addresses without V8's
    pad1 mark: a dump whose LOADs have vma 0 and whose first function's
    first row is at its code + 0x40, or one in an llvm-IR-jit-* directory,
    has 0x40 removed, and `perfgraft dump` says why;
  - file names perf can split at their first ':' (perf reads addr2line's
    FILE:LINE so): a local file:// URL (Deno) becomes its path, percent
    escapes decoded (never into a control byte or a ':'); any other ':'
    is %3A;
  - node overwrites the first 16 bytes of the script names it writes
    (length kept): a name shorter than that is all heap bytes, NULs and
    control bytes among them; the reader finds where it really ends, and
    the name comes back from the function's own, or stays empty (with a
    warning that says so): no control byte reaches a name.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import jitdump_gen as gen  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(os.path.dirname(HERE), "build", "perfgraft"))
DWARFDUMP = "llvm-dwarfdump-14"
A = 0x7F3A1C005000
F = b"/src/app/w.erl"

ORDERS = (("le", "<", gen.EM_X86_64), ("be", ">", gen.EM_PPC64))


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


class LineRules(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="perfgraft-lines.")
        self.addCleanup(shutil.rmtree, self.tmp)

    def dump(self, bo, mach, rows, size=0x40, vma=None, subdir=None):
        b = gen.JitdumpBuilder(bo=bo, elf_mach=mach)
        b.debug_info(A, [(a, ln, 0, F if i == 0 else gen.SAME_FILE)
                         for i, (a, ln) in enumerate(rows)])
        b.load(b"w:f/1", gen.x86_64_code(size, 1), A, 0, vma=vma)
        d = os.path.join(self.tmp, subdir) if subdir else self.tmp
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "jit-4242-%s.dump" % len(os.listdir(self.tmp)))
        b.write(path)
        return path

    def symbolize(self, path, offs):
        rc, out, err = run([PERFGRAFT, "symbolize", path] + ["0x%x" % (A + o) for o in offs])
        self.assertEqual(rc, 0, err)
        lines = [l.split("\t") for l in out.splitlines()]
        return [int(re.search(r":(\d+)$", l[2]).group(1)) for l in lines]

    def symbolize_raw(self, path, offs):
        rc, out, err = run([PERFGRAFT, "symbolize", path] + ["0x%x" % (A + o) for o in offs])
        self.assertEqual(rc, 0, err)
        return [l.split("\t")[2] for l in out.splitlines()]

    def image(self, path):
        out = os.path.join(self.tmp, "img-" + os.path.basename(path))
        rc, _, err = run([PERFGRAFT, "elf", "-q", "--layout", "per-function", "-o", out, path])
        self.assertEqual(rc, 0, err)
        images = [n for n in os.listdir(out) if n.endswith(".so")]
        self.assertEqual(len(images), 1, images)
        return os.path.join(out, images[0])

    def func_start(self, img):
        rc, out, err = run(["readelf", "-Ws", img])
        self.assertEqual(rc, 0, err)
        for l in out.splitlines():
            f = l.split()
            if len(f) >= 8 and f[3] == "FUNC" and f[7] == "w:f/1":
                return int(f[1], 16)
        self.fail("no symbol w:f/1 in %s:\n%s" % (img, out))

    def dwarf_rows(self, img):
        """(address, line) of the image's line table, end_sequence rows out."""
        if shutil.which(DWARFDUMP) is None:
            self.skipTest(DWARFDUMP + " not found")
        rc, out, err = run([DWARFDUMP, "--debug-line", img])
        self.assertEqual(rc, 0, err)
        rows = []
        for l in out.splitlines():
            m = re.match(r"^0x([0-9a-f]{16})\s+(\d+)\s+\d+\s+\d+\s+\d+\s+\d+\s*(.*)$", l)
            if m and "end_sequence" not in m.group(3):
                rows.append((int(m.group(1), 16), int(m.group(2))))
        return rows

    def check(self, rows, want, size=0x40, **kw):
        """want: {offset: line} symbolize must give; the image's table must
        start at the code's start with want[0]."""
        for tag, bo, mach in ORDERS:
            with self.subTest(order=tag):
                path = self.dump(bo, mach, rows, size, **kw)
                offs = sorted(want)
                self.assertEqual(self.symbolize(path, offs), [want[o] for o in offs])
                img = self.image(path)
                table = self.dwarf_rows(img)
                self.assertTrue(table, "no line rows in " + img)
                base = self.func_start(img)
                got = {}
                for o in offs:
                    got[o] = ([None] + [ln for (a, ln) in table if a - base <= o])[-1]
                self.assertEqual(got, want, table)

    def test_row_before_start_applies_from_start(self):
        self.check([(A - 0x30, 10), (A - 0x10, 11), (A + 0x20, 12)],
                   {0: 11, 0x1f: 11, 0x20: 12, 0x3f: 12})

    def test_nearest_row_before_start_wins_in_any_order(self):
        self.check([(A + 0x20, 12), (A - 0x10, 11), (A - 0x30, 10)],
                   {0: 11, 0x20: 12})

    def test_row_at_start_wins_over_rows_before(self):
        self.check([(A - 0x8, 19), (A, 20), (A + 0x10, 21)], {0: 20, 0x8: 20, 0x10: 21})

    def test_line_zero_is_kept(self):
        self.check([(A, 5), (A + 0x10, 0), (A + 0x20, 6)],
                   {0: 5, 0xf: 5, 0x10: 0, 0x1f: 0, 0x20: 6})

    # LLVM: the function's entry row at + 0x40, then rows shifted the same
    LLVM_ROWS = [(A + 0x40, 4), (A + 0x60, 6), (A + 0x67, 5), (A + 0x6c, 7)]
    LLVM_WANT = {0: 4, 0x1f: 4, 0x20: 6, 0x27: 5, 0x2c: 7, 0x3f: 7}

    def bias_why(self, path):
        rc, out, err = run([PERFGRAFT, "dump", "--json", path])
        self.assertEqual(rc, 0, err)
        import json
        h = json.loads(out)["header"]
        return h["line_bias"], h["line_bias_why"]

    def test_llvm_bias_from_vma_and_first_row(self):
        self.check(self.LLVM_ROWS, self.LLVM_WANT, vma=0)
        path = self.dump("<", gen.EM_X86_64, self.LLVM_ROWS, vma=0)
        bias, why = self.bias_why(path)
        self.assertEqual(bias, 0x40)
        self.assertIn("vma 0", why)

    def test_llvm_bias_from_directory(self):
        """No DEBUG_INFO in the first 256 records: the directory decides
        (LLVM writes into llvm-IR-jit-*), however the path is spelled."""
        for tag, bo, mach in ORDERS:
            with self.subTest(order=tag):
                b = gen.JitdumpBuilder(bo=bo, elf_mach=mach)
                for k in range(260):    # no line tables first
                    b.load(b"plain%d" % k, gen.x86_64_code(0x10, k), A + 0x10000 + 0x10 * k, k + 1)
                b.debug_info(A, [(A + 0x48, 4, 0, F), (A + 0x60, 6, 0, gen.SAME_FILE)])
                b.load(b"w:f/1", gen.x86_64_code(0x40, 1), A, 0, vma=A)
                d = os.path.join(self.tmp, "llvm-IR-jit-20261126-%s" % tag)
                os.makedirs(d)
                path = os.path.join(d, "jit-4242.dump")
                b.write(path)
                self.assertEqual(self.symbolize(path, [0x8, 0x1f, 0x20]), [4, 4, 6])
                # the same file by a relative path from inside its directory
                p = subprocess.run([PERFGRAFT, "dump", "--json", "jit-4242.dump"], cwd=d,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                self.assertEqual(json.loads(p.stdout)["header"]["line_bias"], 0x40, p.stderr)

    def test_content_wins_over_directory(self):
        # in an llvm-IR-jit-* directory, but vma = code and the first row at
        # the start: the dump says it is not LLVM's
        rows = [(A, 4), (A + 0x20, 6)]
        self.check(rows, {0: 4, 0x1f: 4, 0x20: 6}, vma=A, subdir="llvm-IR-jit-20261126-abcdef")

    def test_row_far_before_start_is_not_the_starts(self):
        # a row more than 4 KiB before the code (a producer writing offsets,
        # or another function's table) lends the code nothing
        for tag, bo, mach in ORDERS:
            with self.subTest(order=tag):
                path = self.dump(bo, mach, [(0, 3), (0x10, 4), (A + 0x20, 12)])
                self.assertEqual(self.symbolize_raw(path, [0, 0x20]),
                                 ["??:0", "%s:12" % F.decode()])
                path = self.dump(bo, mach, [(A - 0x1001, 9), (A + 0x20, 12)])
                self.assertEqual(self.symbolize_raw(path, [0]), ["??:0"])
                path = self.dump(bo, mach, [(A - 0x1000, 9), (A + 0x20, 12)])
                self.assertEqual(self.symbolize_raw(path, [0]), ["%s:9" % F.decode()])

    def test_no_bias_without_the_evidence(self):
        # vma = code address (perf's own test JITs, Java's agent): rows as written
        self.check([(A, 4), (A + 0x40, 6)], {0: 4, 0x3f: 4, 0x40: 6}, size=0x50, vma=A)
        # vma 0 but the first row at the start: no bias either
        self.check([(A, 4), (A + 0x40, 6)], {0: 4, 0x40: 6}, size=0x50, vma=0)
        path = self.dump("<", gen.EM_X86_64, [(A, 4)], vma=0)
        self.assertEqual(self.bias_why(path), (0, None))

    NAMES = [(b"file:///srv/app/main.ts", "/srv/app/main.ts"),
             (b"file:///srv/my%20app/x.js", "/srv/my app/x.js"),
             (b"file:///srv/bad%00%0a%7f.js", "/srv/bad%00%0a%7f.js"),
             (b"file:///srv/a%3Ab.js", "/srv/a%3Ab.js"),   # never decoded into a ':'
             (b"https://deno.land/std/fmt.ts", "https%3A//deno.land/std/fmt.ts"),
             (b"ext:core/01_core.js", "ext%3Acore/01_core.js"),
             (b"node:internal/main", "node%3Ainternal/main"),
             (b"file://host/share/a.js", "file%3A//host/share/a.js"),
             (b"/plain/path.js", "/plain/path.js")]

    def test_file_names_perf_can_split(self):
        for tag, bo, mach in ORDERS:
            with self.subTest(order=tag):
                b = gen.JitdumpBuilder(bo=bo, elf_mach=mach)
                for k, (raw, _want) in enumerate(self.NAMES):
                    a = A + 0x100 * k
                    b.debug_info(a, [(a, 10 + k, 0, raw)])
                    b.load(b"f%d" % k, gen.x86_64_code(0x40, k), a, k)
                path = os.path.join(self.tmp, "names-%s.dump" % tag)
                b.write(path)
                rc, out, err = run([PERFGRAFT, "symbolize", path] +
                                   ["0x%x" % (A + 0x100 * k + 4) for k in range(len(self.NAMES))])
                self.assertEqual(rc, 0, err)
                got = [l.split("\t")[2] for l in out.splitlines()]
                self.assertEqual(got, ["%s:%d" % (w, 10 + k)
                                       for k, (_r, w) in enumerate(self.NAMES)])
                # the images' line tables name the same files (addr2line)
                img = os.path.join(self.tmp, "img-names-" + tag)
                rc, _, err = run([PERFGRAFT, "elf", "-q", "-o", img, path])
                self.assertEqual(rc, 0, err)
                if shutil.which(DWARFDUMP) is None:
                    continue
                names = set()
                for n in os.listdir(img):
                    rc, out, err = run([DWARFDUMP, "--debug-line", os.path.join(img, n)])
                    names |= set(re.findall(r'name: "([^"]*)"', out))
                for _r, w in self.NAMES:
                    self.assertIn(w, names)
                self.assertFalse([n for n in names if ":" in n], names)

    def test_short_last_name_before_padding(self):
        # a short name is only node's damage when what follows it makes no
        # sense: zeros of any length after the last one are padding
        for tag, bo, mach in ORDERS:
            with self.subTest(order=tag):
                b = gen.JitdumpBuilder(bo=bo, elf_mach=mach)
                b.debug_info(A, [(A, 4, 0, b"/src/app/long/x.erl"), (A + 8, 5, 0, b"w.erl")],
                             trailer=bytes(8))
                b.load(b"w:f/1", gen.x86_64_code(0x40, 1), A, 0)
                path = os.path.join(self.tmp, "pad-%s.dump" % tag)
                b.write(path)
                rc, out, err = run([PERFGRAFT, "symbolize", path, "0x%x" % (A + 9)])
                self.assertEqual(rc, 0, err)
                self.assertEqual(out.split("\t")[2].strip(), "w.erl:5")
                self.assertNotIn("warning", err)

    def test_inline_frames_names(self):
        # perfgraft's INLINE_INFO frames name functions and files too: the
        # images' inlined subroutines and file table get the same names
        if shutil.which(DWARFDUMP) is None:
            self.skipTest(DWARFDUMP + " not found")
        for tag, bo, mach in ORDERS:
            with self.subTest(order=tag):
                b = gen.JitdumpBuilder(bo=bo, elf_mach=mach)
                # in\tner called at x.js:5 from mid, called at y.js:7 from outer
                b.inline_info(A, [b"outer", b"in\tner", b"node:lib/x.js", b"file:///srv/y.js",
                                  b"mid"],
                              [(0, 0x20, [(1, 2, 3), (4, 2, 5), (0, 3, 7)])])
                b.load(b"outer", gen.x86_64_code(0x40, 1), A, 0)
                path = os.path.join(self.tmp, "inl-%s.dump" % tag)
                b.write(path)
                img = self.image(path)
                rc, out, err = run([DWARFDUMP, "--debug-info", "--debug-line", img])
                self.assertEqual(rc, 0, err)
                self.assertIn('"in?ner"', out)
                files = set(re.findall(r'name: "([^"]*)"', out))
                self.assertTrue({"node%3Alib/x.js", "/srv/y.js"} <= files, files)
                self.assertFalse([f for f in files if ":" in f], files)
                self.assertFalse(re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out))

    GARBAGE = b"\x94\x00\x01\x00\x41\x17\x43"      # 7 heap bytes where "/t/a.js" was

    def short_name_dump(self, bo, mach, fname):
        b = gen.JitdumpBuilder(bo=bo, elf_mach=mach, pad1=gen.V8_PAD1)
        rows = [(A + 0x40 + 0x10 * k, 3 + k, 5, self.GARBAGE) for k in range(3)]
        b.debug_info(A, rows)
        b.load(b"JS:*f " + fname + b":3:5", gen.x86_64_code(0x40, 1), A, 0)
        path = os.path.join(self.tmp, "short-%s-%d.dump" % (bo == ">", len(fname)))
        b.write(path)
        return path

    def test_short_damaged_name_recovered(self):
        for tag, bo, mach in ORDERS:
            with self.subTest(order=tag):
                path = self.short_name_dump(bo, mach, b"/t/a.js")
                rc, out, err = run([PERFGRAFT, "symbolize", path] +
                                   ["0x%x" % (A + 0x10 * k + 2) for k in range(3)])
                self.assertEqual(rc, 0, err)
                self.assertEqual([l.split("\t")[2] for l in out.splitlines()],
                                 ["/t/a.js:%d:5" % (3 + k) for k in range(3)])
                self.assertNotIn("keep no file name", err)

    def test_short_damaged_name_not_recoverable(self):
        # the function's name gives a script of another length: no name
        for tag, bo, mach in ORDERS:
            with self.subTest(order=tag):
                path = self.short_name_dump(bo, mach, b"/t/other.js")
                rc, out, err = run([PERFGRAFT, "symbolize", path] +
                                   ["0x%x" % (A + 0x10 * k + 2) for k in range(3)])
                self.assertEqual(rc, 0, err)
                self.assertEqual([l.split("\t")[2] for l in out.splitlines()],
                                 ["??:%d:5" % (3 + k) for k in range(3)])
                self.assertIn("3 line rows of", err)
                self.assertFalse(re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out + err))


if __name__ == "__main__":
    unittest.main()
