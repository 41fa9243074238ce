#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The code model's line rules (issue 22) on generated dumps, in both
byte orders, read back three ways: `perfgraft symbolize`, addr2line on
the image `perfgraft elf` writes, and llvm-dwarfdump's line table.

  - a row before the code's start (BeamAsm's label ahead of the
    prologue) applies from the start; of several, the one nearest the
    start; a row at the start itself wins over them;
  - a row with line 0 ("no source line") is kept as line 0, so its bytes
    do not take the line before.
"""

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

    def dump(self, bo, mach, rows, size=0x40):
        b = gen.JitdumpBuilder(bo=bo, elf_mach=mach)
        b.debug_info(A, [(a, ln, 0, F if i == 0 else gen.SAME_FILE)
                         for i, (a, ln) in enumerate(rows)])
        b.load(b"w:f/1", gen.x86_64_code(size, 1), A, 0)
        path = os.path.join(self.tmp, "jit-4242-%s.dump" % len(os.listdir(self.tmp)))
        b.write(path)
        return path

    def symbolize(self, path, offs):
        rc, out, err = run([PERFGRAFT, "symbolize", path] + ["0x%x" % (A + o) for o in offs])
        self.assertEqual(rc, 0, err)
        lines = [l.split("\t") for l in out.splitlines()]
        return [int(re.search(r":(\d+)$", l[2]).group(1)) for l in lines]

    def image(self, path):
        out = os.path.join(self.tmp, "img-" + os.path.basename(path))
        rc, _, err = run([PERFGRAFT, "elf", "-q", "--layout", "per-function", "-o", out, path])
        self.assertEqual(rc, 0, err)
        images = [n for n in os.listdir(out) if n.endswith(".so")]
        self.assertEqual(len(images), 1, images)
        return os.path.join(out, images[0])

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

    def check(self, rows, want, size=0x40):
        """want: {offset: line} symbolize must give; the image's table must
        start at the code's start with want[0]."""
        for tag, bo, mach in ORDERS:
            with self.subTest(order=tag):
                path = self.dump(bo, mach, rows, size)
                offs = sorted(want)
                self.assertEqual(self.symbolize(path, offs), [want[o] for o in offs])
                img = self.image(path)
                table = self.dwarf_rows(img)
                self.assertTrue(table, "no line rows in " + img)
                base = table[0][0]
                got = {}
                for o in offs:
                    got[o] = [ln for (a, ln) in table if a - base <= o][-1]
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


if __name__ == "__main__":
    unittest.main()
