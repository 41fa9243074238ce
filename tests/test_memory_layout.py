#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The memory image layout (`perfgraft elf --layout memory`), on dumps
written by tests/jitdump_gen.py's JitdumpBuilder into a temporary
directory, checked with the real tools (readelf, eu-readelf,
llvm-dwarfdump, addr2line) and by reading the images' bytes.

Covered:
  - invariants of every image: one PT_LOAD with p_offset == p_vaddr <
    4096; one base (start - pgoff) for every map of an image; every
    .symtab function at code_addr - base, its code bytes at that file
    offset; addr2line on addr - base gives the generator's line rows;
    little-endian x86-64, big-endian ppc64, i386;
  - regions and generations: a LOAD over earlier code starts r0-g1, LOADs
    more than PG_ELF_REGION_GAP apart make r0 and r1, adjacent LOADs one
    image; a MOVE's code at the new address's offset (a MOVE row in -l);
    UNLOAD records change no image and no map;
  - CFI: one .eh_frame with one FDE per function with CFI whose
    initial_location is the function's file offset and whose range is its
    code (eu-readelf, llvm-dwarfdump, readelf -wF), the .eh_frame_hdr
    (version 1, 0x1b/0x03/0x3b) with one sorted entry per FDE, and a
    TABLES map at base + the .eh_frame address; LE64, BE64, LE32;
  - sparse files: holes between functions 512 KiB apart take no blocks
    and read back as zeros;
  - limits: a huge name, code near 2^64, 2,000 LOADs at one address;
  - compressed DWARF: .debug_info and .debug_line SHF_COMPRESSED (zlib,
    the Chdr in the image's class and byte order) by default, plain with
    --compress-debug-sections none, the same DWARF either way (Python's
    zlib, readelf and eu-readelf decode them alike, llvm-dwarfdump
    --verify, addr2line), other build-ids; LE64, BE64, LE32;
  - amplification (Amplification, inject runs): the run's sparse images
    within 64 x (its code + 16 MiB), the dumps past it packed and named in
    one warning; MOVEs under user stacks counted with every name, symbol,
    line row and inlined function name they write again: output and peak
    RSS bounded by the input.
"""

import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import jitdump_gen as gen  # noqa: E402
import perfdata_gen as pg  # noqa: E402
from test_extension_records import describe, run  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
DWARFDUMP = next((t for t in ("llvm-dwarfdump-14", "llvm-dwarfdump") if shutil.which(t)),
                 "llvm-dwarfdump-14")
REGION_GAP = 1 << 20        # PG_ELF_REGION_GAP
BASE = 0x7F3A1C000000
FILE_A = b"/src/app/a.js"
FILE_B = b"/src/app/b.js"

# (name, byte order, e_machine, arch, code generator, base address)
LAYOUTS = (("le64", "<", gen.EM_X86_64, "x86_64", gen.x86_64_code, BASE),
           ("be64", ">", gen.EM_PPC64, "ppc64", gen.x86_64_code, BASE),
           ("le32", "<", gen.EM_386, "i386", gen.i386_code, gen.BASE32))


def unload_reuse_dump():
    """Two functions with CFI, both unloaded, one address used again
    (test_unload_changes_nothing; tests/output_digest.py)."""
    b = gen.JitdumpBuilder()
    a = BASE + 0x5000
    b.debug_info(a, [(a, 1, 0, FILE_A), (a + 8, 2, 0, gen.SAME_FILE)])
    b.cfi_unwinding_info(a, 0x30)
    b.load(b"JS:*gone", gen.x86_64_code(0x30, 1), a, 0)
    b.load(b"JS:*kept", gen.x86_64_code(0x30, 2), a + 0x100, 1)
    b.unload(a, 0x30, 0)
    b.load(b"JS:*reuse", gen.x86_64_code(0x20, 3), a + 0x8, 2)
    b.unload(a + 0x100, 0x30, 1)
    b.load(b"JS:*later", gen.x86_64_code(0x20, 4), a + 0x200, 3)
    return b


def parse_list(out):
    """The --maps rows of the memory layout: kind, code_index, start, size,
    image, pgoff, map_len, name."""
    rows = []
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) < 8:
            raise AssertionError("not a memory layout -l row: %r" % line)
        rows.append(dict(kind=f[0], code_index=int(f[1]), start=int(f[2], 16),
                         size=int(f[3]), image=f[4], pgoff=int(f[5], 16),
                         map_len=int(f[6]), name=f[7]))
    return rows


# --------------------------------------------------------------------------
# a small ELF reader (both classes, both byte orders)

class Elf:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = d = f.read()
        if d[:4] != b"\x7fELF":
            raise AssertionError("%s: not ELF" % path)
        self.is64 = d[4] == 2
        self.bo = "<" if d[5] == 1 else ">"
        bo = self.bo
        if self.is64:
            (_, _, _, _, self.phoff, self.shoff, _, _, phentsize, phnum, shentsize, shnum,
             shstrndx) = struct.unpack_from(bo + "HHIQQQIHHHHHH", d, 16)
        else:
            (_, _, _, _, self.phoff, self.shoff, _, _, phentsize, phnum, shentsize, shnum,
             shstrndx) = struct.unpack_from(bo + "HHIIIIIHHHHHH", d, 16)
        self.phdrs = []
        for i in range(phnum):
            o = self.phoff + i * phentsize
            if self.is64:
                t, fl, off, va, pa, fsz, msz, al = struct.unpack_from(bo + "IIQQQQQQ", d, o)
            else:
                t, off, va, pa, fsz, msz, fl, al = struct.unpack_from(bo + "IIIIIIII", d, o)
            self.phdrs.append(dict(type=t, offset=off, vaddr=va, filesz=fsz, memsz=msz))
        self.shdrs = []
        for i in range(shnum):
            o = self.shoff + i * shentsize
            if self.is64:
                nm, t, fl, ad, off, sz, ln, inf, al, es = struct.unpack_from(
                    bo + "IIQQQQIIQQ", d, o)
            else:
                nm, t, fl, ad, off, sz, ln, inf, al, es = struct.unpack_from(
                    bo + "IIIIIIIIII", d, o)
            self.shdrs.append(dict(name_off=nm, type=t, flags=fl, addr=ad, offset=off,
                                   size=sz, link=ln, entsize=es, align=al))
        strtab = self.shdrs[shstrndx]
        for s in self.shdrs:
            s["name"] = self._str(strtab, s["name_off"])

    def _str(self, sec, off):
        o = sec["offset"] + off
        return self.data[o:self.data.index(b"\0", o)].decode()

    def section(self, name):
        for s in self.shdrs:
            if s["name"] == name:
                return s
        return None

    def bytes_of(self, name):
        s = self.section(name)
        return self.data[s["offset"]:s["offset"] + s["size"]]

    def loads(self):
        return [p for p in self.phdrs if p["type"] == 1]

    def funcs(self):
        """[(name bytes, value, size)] of the STT_FUNC symbols."""
        st = self.section(".symtab")
        strs = self.shdrs[st["link"]]
        out = []
        for i in range(st["size"] // st["entsize"]):
            o = st["offset"] + i * st["entsize"]
            if self.is64:
                nm, info, _, _, val, sz = struct.unpack_from(self.bo + "IBBHQQ", self.data, o)
            else:
                nm, val, sz, info, _, _ = struct.unpack_from(self.bo + "IIIBBH", self.data, o)
            if info & 0xF == 2:
                so = strs["offset"] + nm
                out.append((self.data[so:self.data.index(b"\0", so)], val, sz))
        return out


# --------------------------------------------------------------------------

class MemoryLayout(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="perfgraft-memlayout-")
        cls.tmp = cls._tmp.name
        cls.n = 0

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def setUp(self):
        if not os.access(PERFGRAFT, os.X_OK):
            self.fail("perfgraft binary not found: %s" % PERFGRAFT)

    def need(self, *tools):
        for t in tools:
            if not shutil.which(t):
                self.skipTest("%s not installed" % t)

    # -- running ---------------------------------------------------------
    def convert(self, b, data=None, expect_rc=0, extra=()):
        """Writes the dump, runs `perfgraft elf --layout memory -l -o DIR`;
        returns (process, rows, dir)."""
        type(self).n += 1
        d = os.path.join(self.tmp, "c%03d" % self.n)
        os.mkdir(d)
        dump = os.path.join(d, "in.dump")
        with open(dump, "wb") as f:
            f.write(b.to_bytes() if data is None else data)
        out = os.path.join(d, "img")
        p = run([PERFGRAFT, "elf", "--layout", "memory", "--maps", *extra, "-o", out, dump])
        self.assertEqual(p.returncode, expect_rc, describe(p))
        self.assertNotIn("Sanitizer", p.err, describe(p))
        return p, parse_list(p.out), out

    def images(self, out):
        """The images under out, as paths relative to it (under user
        stacks each is in a directory of its own)."""
        return sorted(os.path.relpath(os.path.join(d, n), out)
                      for d, _, names in os.walk(out) for n in names if n.endswith(".so"))

    def bases(self, rows, p=None):
        """{image: base}, checking that every row of an image has one
        start - pgoff."""
        res = {}
        for r in rows:
            b = (r["start"] - r["pgoff"]) & (2 ** 64 - 1)
            self.assertEqual(res.setdefault(r["image"], b), b,
                             "rows of %s with different bases (start - pgoff): %r\n%s"
                             % (r["image"], [x for x in rows if x["image"] == r["image"]],
                                p.out if p else ""))
        return res

    # -- checks ------------------------------------------------------------
    def check_invariants(self, b, p, rows, out, live=None):
        """Every image: one PT_LOAD at p_offset == p_vaddr < 4096; every
        function symbol at code_addr - base, its code there; addr2line
        gives the line rows.  live: {code_index: Func} of the functions
        whose code should be in the images (default: every LOAD of b)."""
        funcs = {f.code_index: f for f in b.funcs} if live is None else live
        bases = self.bases(rows, p)
        imgs = self.images(out)
        self.assertEqual(sorted(bases), imgs, "images listed vs written\n" + p.out)
        for name in imgs:
            path = os.path.join(out, name)
            elf = Elf(path)
            base = bases[name]
            loads = elf.loads()
            self.assertEqual(len(loads), 1, "%s: PT_LOADs %r" % (name, loads))
            ld = loads[0]
            self.assertEqual(ld["offset"], ld["vaddr"], name)
            self.assertLess(ld["offset"], 4096, name)
            self.assertEqual(ld["offset"] % 64, 0, name)
            # laid out like memory down to the 64-byte line (under user
            # stacks a MOVE's copy keeps its LOAD's offset instead, in an
            # image of its own base)
            if "/" not in name or any(r["kind"] == "LOAD" for r in rows
                                      if r["image"] == name):
                self.assertEqual(base % 64, 0, "%s: base 0x%x" % (name, base))
            text = elf.section(".text")
            self.assertEqual(text["addr"], text["offset"], name)
            # the lowest function starts on the PT_LOAD's 64-byte line
            # (under user stacks: the region's lowest, the same for each
            # of its images, below or at the image's own)
            syms = elf.funcs()
            self.assertTrue(syms, name)
            lowest = min(v for _, v, _ in syms)
            if "/" in name:
                self.assertLessEqual(ld["offset"], lowest, name)
            else:
                self.assertEqual(lowest & ~63, ld["offset"], name)
            self.assertEqual(text["addr"], lowest, name)
            # every symbol is a map of this image, every map a symbol
            want = sorted((funcs[r["code_index"]].name, r["start"] - base,
                           funcs[r["code_index"]].code_size) for r in rows
                          if r["image"] == name and r["kind"] != "TABLES"
                          and r["code_index"] in funcs)
            self.assertEqual(sorted(syms), want, "%s: symbols vs -l rows\n%s" % (name, p.out))
            byname = {}
            for sname, val, size in syms:
                byname.setdefault(sname, []).append((val, size))
            for r in rows:
                if r["image"] != name or r["kind"] == "TABLES":
                    continue
                f = funcs.get(r["code_index"])
                if f is None:
                    continue
                off = r["start"] - base
                self.assertEqual(off, r["pgoff"])
                self.assertIn((off, f.code_size), byname.get(f.name, []),
                              "%s: symbol %r at 0x%x (code 0x%x - base 0x%x); symbols %r"
                              % (name, f.name, off, r["start"], base, syms))
                self.assertLessEqual(off + f.code_size, ld["offset"] + ld["filesz"], name)
                self.assertEqual(elf.data[off:off + f.code_size], f.code,
                                 "%s: bytes at 0x%x are not %r's code" % (name, off, f.name))
                self.assertEqual(r["size"], f.code_size)
                self.assertEqual(r["map_len"], f.map_len())
            self.check_lines(path, base, [f for f in funcs.values()
                                          if f.debug and any(
                                              r["image"] == name and r["kind"] == "LOAD"
                                              and r["code_index"] == f.code_index
                                              and r["start"] == f.code_addr for r in rows)])

    def check_lines(self, path, base, funcs):
        rows = [(l["addr"], l["file"], l["line"]) for f in funcs for l in f.debug]
        if not rows:
            return
        self.need("addr2line")
        p = run(["addr2line", "-e", path] + ["0x%x" % (a - base) for a, _, _ in rows])
        self.assertEqual(p.returncode, 0, describe(p))
        got = p.out.splitlines()
        want = ["%s:%d" % (fl.decode(), ln) for _, fl, ln in rows]
        self.assertEqual(got, want, "addr2line on %s at %s" % (
            path, ["0x%x" % (a - base) for a, _, _ in rows]))

    # -- 1. invariants --------------------------------------------------------
    def layout_dump(self, lay, cfi=False):
        """Functions with line rows, some adjacent, one 64 KiB away, one in
        a second region, one reusing an address (a second generation)."""
        _, bo, mach, arch, code, base = lay
        b = gen.JitdumpBuilder(bo=bo, elf_mach=mach, arch=arch)
        specs = [(base + 0x40, 0x30), (base + 0x70, 0x45), (base + 0xC0, 0x20),
                 (base + 0x10000 + 0x17, 0x60), (base + 3 * REGION_GAP + 0x123, 0x28),
                 (base + 0x70, 0x38)]
        for i, (a, size) in enumerate(specs):
            fl = FILE_A if i % 2 else FILE_B
            b.debug_info(a, [(a, 10 + i, 0, fl), (a + 4, 20 + i, 0, gen.SAME_FILE),
                             (a + size - 2, 30 + i, 0, FILE_A)])
            if cfi and i % 2:
                b.cfi_unwinding_info(a, size)
            b.load(b"JS:*f%d" % i, code(size, i), a, i)
        return b

    def test_invariants(self):
        for lay in LAYOUTS:
            with self.subTest(layout=lay[0]):
                b = self.layout_dump(lay)
                p, rows, out = self.convert(b)
                self.assertEqual(self.images(out), ["jitted-4242-r0-g0.so",
                                                    "jitted-4242-r0-g1.so",
                                                    "jitted-4242-r1-g0.so"], p.out)
                self.assertEqual(sorted(r["kind"] for r in rows), ["LOAD"] * 6, p.out)
                self.check_invariants(b, p, rows, out)

    def test_invariants_with_cfi(self):
        for lay in LAYOUTS:
            with self.subTest(layout=lay[0]):
                b = self.layout_dump(lay, cfi=True)
                p, rows, out = self.convert(b)
                self.check_invariants(b, p, rows, out)
                # odd code indexes have CFI: f1 (g0), f3 (g1), f5 (g2); r1's f4 none
                self.assertEqual(self.images(out), ["jitted-4242-r0-g0.so",
                                                    "jitted-4242-r0-g1.so",
                                                    "jitted-4242-r0-g2.so",
                                                    "jitted-4242-r1-g0.so"], p.out)
                self.assertEqual(sorted(r["image"] for r in rows if r["kind"] == "TABLES"),
                                 ["jitted-4242-r0-g0.so", "jitted-4242-r0-g1.so",
                                  "jitted-4242-r0-g2.so"], p.out)
                # each image's FDEs: its own functions with CFI, at their offsets
                self.need("eu-readelf")
                bases = self.bases(rows, p)
                for img in self.images(out):
                    want = sorted((r["pgoff"], r["size"]) for r in rows
                                  if r["image"] == img and r["kind"] == "LOAD"
                                  and b.funcs[r["code_index"]].has_cfi)
                    pe = run(["eu-readelf", "--debug-dump=frames", os.path.join(out, img)])
                    got = sorted((int(o, 16), int(n, 16)) for o, n in re.findall(
                        r"\(offset: (0x[0-9a-f]+)\)\n\s+address_range:\s+(0x[0-9a-f]+)", pe.out))
                    self.assertEqual(got, want, "%s (base 0x%x)\n%s" % (img, bases[img], pe.out))

    # -- 2. regions and generations ------------------------------------------
    def test_reuse_starts_generation(self):
        b = gen.JitdumpBuilder()
        a = BASE + 0x1000
        b.load(b"JS:*old", gen.x86_64_code(0x40, 1), a, 0)
        b.load(b"JS:*next", gen.x86_64_code(0x20, 2), a + 0x40, 1)
        b.load(b"JS:*new", gen.x86_64_code(0x30, 3), a + 0x10, 2)   # over *old
        b.load(b"JS:*after", gen.x86_64_code(0x20, 4), a + 0x80, 3)
        p, rows, out = self.convert(b)
        self.assertEqual(self.images(out), ["jitted-4242-r0-g0.so", "jitted-4242-r0-g1.so"])
        where = {r["code_index"]: r["image"] for r in rows if r["kind"] == "LOAD"}
        self.assertEqual(where, {0: "jitted-4242-r0-g0.so", 1: "jitted-4242-r0-g0.so",
                                 2: "jitted-4242-r0-g1.so", 3: "jitted-4242-r0-g1.so"})
        self.check_invariants(b, p, rows, out)
        # the same bytes at a + 0x10 in the two images: old's, then new's
        bases = self.bases(rows)
        g0 = Elf(os.path.join(out, "jitted-4242-r0-g0.so")).data
        g1 = Elf(os.path.join(out, "jitted-4242-r0-g1.so")).data
        o0 = a + 0x10 - bases["jitted-4242-r0-g0.so"]
        o1 = a + 0x10 - bases["jitted-4242-r0-g1.so"]
        self.assertEqual(g0[o0:o0 + 0x30], b.funcs[0].code[0x10:0x40])
        self.assertEqual(g1[o1:o1 + 0x30], b.funcs[2].code)

    def test_far_apart_regions(self):
        b = gen.JitdumpBuilder()
        a = BASE + 0x2000
        b.load(b"JS:*lo", gen.x86_64_code(0x40, 1), a, 0)
        # exactly the gap after lo's end: a new region
        b.load(b"JS:*hi", gen.x86_64_code(0x40, 2), a + 0x40 + REGION_GAP, 1)
        # just under the gap after hi's end: hi's region
        b.load(b"JS:*hi2", gen.x86_64_code(0x40, 3), a + 0x80 + 2 * REGION_GAP - 1, 2)
        p, rows, out = self.convert(b)
        self.assertEqual(self.images(out), ["jitted-4242-r0-g0.so", "jitted-4242-r1-g0.so"])
        where = {r["code_index"]: r["image"] for r in rows}
        self.assertEqual(where, {0: "jitted-4242-r0-g0.so", 1: "jitted-4242-r1-g0.so",
                                 2: "jitted-4242-r1-g0.so"})
        self.check_invariants(b, p, rows, out)

    def test_adjacent_one_image(self):
        b = gen.JitdumpBuilder()
        a = BASE + 0x3000
        for i in range(8):
            b.load(b"JS:*adj%d" % i, gen.x86_64_code(0x20, i), a + 0x20 * i, i)
        p, rows, out = self.convert(b)
        self.assertEqual(self.images(out), ["jitted-4242-r0-g0.so"])
        self.assertEqual(len(rows), 8)
        self.check_invariants(b, p, rows, out)
        elf = Elf(os.path.join(out, "jitted-4242-r0-g0.so"))
        base = self.bases(rows)["jitted-4242-r0-g0.so"]
        self.assertEqual(elf.data[a - base:a - base + 0x100],
                         b"".join(f.code for f in b.funcs))

    def test_move(self):
        b = gen.JitdumpBuilder()
        a = BASE + 0x4000
        c0 = gen.x86_64_code(0x28, 7)
        b.load(b"JS:*moved", c0, a, 0)
        b.load(b"JS:*stays", gen.x86_64_code(0x18, 8), a + 0x80, 1)
        b.move(0, a, a + 0x1000, len(c0))       # free space: same generation
        b.move(1, a + 0x80, a + 0x1010, 0x18)   # over moved's new copy: next one
        p, rows, out = self.convert(b, extra=["--user-stacks"])
        moves = [r for r in rows if r["kind"] == "MOVE"]
        self.assertEqual([(r["code_index"], r["start"], r["size"]) for r in moves],
                         [(0, a + 0x1000, 0x28), (1, a + 0x1010, 0x18)], p.out)
        # under user stacks each copy is at its LOAD's offset in an image
        # of the region's one file name (perf: one row per function), in a
        # directory of its own: its generation's, numbered after it when
        # the generation has images at other bases
        self.assertEqual(moves[0]["image"], "jitted-4242-r0-g0-m1/jitted-4242-r0.so")
        self.assertEqual(moves[1]["image"], "jitted-4242-r0-g1/jitted-4242-r0.so")
        loads = {r["code_index"]: r for r in rows if r["kind"] == "LOAD"}
        self.assertEqual(loads[0]["image"], "jitted-4242-r0-g0/jitted-4242-r0.so")
        for m in moves:
            self.assertEqual(m["pgoff"], loads[m["code_index"]]["pgoff"])
        bases = self.bases(rows, p)
        for m, f in zip(moves, b.funcs):
            elf = Elf(os.path.join(out, m["image"]))
            off = m["start"] - bases[m["image"]]
            self.assertEqual(m["pgoff"], off)
            self.assertEqual(elf.data[off:off + f.code_size], f.code,
                             "%s: moved code not at 0x%x" % (m["image"], off))
            self.assertIn((f.name, off, f.code_size), elf.funcs())
        # the LOADs stay where they were
        self.check_invariants(b, p, [r for r in rows if r["kind"] == "LOAD"] +
                              [r for r in rows if r["kind"] != "LOAD"], out)

    def test_user_stacks_one_offset_per_function(self):
        """Under user stacks (issue 24.2) a function carried into newer
        generations is at the same offset, in files of one basename, in
        every image it is mapped from (perf report's row key: the dso's
        short name and the symbol's start and end), each image in a
        directory of its own, and the generations share one base."""
        b = gen.JitdumpBuilder()
        a = BASE + 0x6000
        b.load(b"JS:*one", gen.x86_64_code(0x20, 1), a, 0)
        b.load(b"JS:*kept", gen.x86_64_code(0x20, 2), a + 0x400, 1)
        b.load(b"JS:*longer", gen.x86_64_code(0x30, 3), a, 2)  # over one: g1
        b.load(b"JS:*other", gen.x86_64_code(0x30, 4), a, 3)   # over longer: g2
        p, rows, out = self.convert(b, extra=["--user-stacks"])
        by = {}
        for r in rows:
            if r["kind"] != "TABLES":
                by.setdefault(r["code_index"], []).append(r)
        self.assertEqual([r["kind"] for r in by[1]], ["LOAD", "CARRY", "CARRY"], p.out)
        self.assertEqual(len(set(r["pgoff"] for r in by[1])), 1, p.out)
        self.assertEqual([r["image"] for r in by[1]],
                         ["jitted-4242-r0-g%d/jitted-4242-r0.so" % g for g in range(3)], p.out)
        self.assertEqual(len(set(self.bases(rows, p).values())), 1)
        self.assertEqual(by[3][0]["image"], "jitted-4242-r0-g2/jitted-4242-r0.so")
        self.check_invariants(b, p, rows, out)

    def test_user_stacks_move_images_bounded(self):
        """A MOVE's copy under user stacks goes into an image at a base of
        its own (its LOAD's offset): each such image spans the region
        again, so they are bounded by what the layout's spread bound
        leaves; past it the copies stay in the region's image, at their
        own offsets, with one warning."""
        b = gen.JitdumpBuilder()
        a = BASE + 0x10000
        step = REGION_GAP - 0x10000
        for i in range(64):     # a region of 63 x 0.94 MiB, 1 KiB of code
            b.load(b"JS:*f%d" % i, gen.x86_64_code(0x10, i), a + i * step, i)
        for k in range(100):    # one function moved to 100 free places
            old = a + (k * 0x40 if k else 0)
            b.move(0, old, a + (k + 1) * 0x40, 0x10)
        p, rows, out = self.convert(b, extra=["--user-stacks"])
        self.assertRegex(p.err, r"MOVEs past the layout's bound")
        self.assertLess(len(self.images(out)), 8, self.images(out))
        moves = [r for r in rows if r["kind"] == "MOVE"]
        self.assertEqual(len(moves), 100)
        self.check_invariants(b, p, rows, out)

    def test_move_maps_the_loaded_bytes(self):
        """Without --user-stacks (frame-pointer call graphs), a MOVE maps
        the bytes its code has in the image, as perf inject --jit maps its
        moved function's file: the same symbol for perf, nothing copied,
        no new generation."""
        b = gen.JitdumpBuilder()
        a = BASE + 0x4000
        c0 = gen.x86_64_code(0x28, 7)
        b.load(b"JS:*moved", c0, a, 0)
        b.load(b"JS:*stays", gen.x86_64_code(0x18, 8), a + 0x80, 1)
        b.move(0, a, a + 0x1000, len(c0))
        b.move(1, a + 0x80, a + 0x1010, 0x18)   # over moved's new place
        b.move(0, a + 0x1000, a + 0x9000, len(c0))   # and on
        p, rows, out = self.convert(b)
        self.assertEqual(self.images(out), ["jitted-4242-r0-g0.so"])
        loads = {r["code_index"]: r for r in rows if r["kind"] == "LOAD"}
        moves = [r for r in rows if r["kind"] == "MOVE"]
        self.assertEqual([(r["code_index"], r["start"], r["size"]) for r in moves],
                         [(0, a + 0x1000, 0x28), (1, a + 0x1010, 0x18),
                          (0, a + 0x9000, 0x28)], p.out)
        for m in moves:
            ld = loads[m["code_index"]]
            self.assertEqual((m["image"], m["pgoff"], m["map_len"], m["name"]),
                             (ld["image"], ld["pgoff"], ld["map_len"], ld["name"]), p.out)
        elf = Elf(os.path.join(out, "jitted-4242-r0-g0.so"))
        self.assertEqual(sorted(elf.funcs()), sorted((f.name, loads[f.code_index]["pgoff"],
                                                      f.code_size) for f in b.funcs))
        self.check_invariants(b, p, [r for r in rows if r["kind"] == "LOAD"], out)

    def test_move_with_cfi(self):
        """The moved copy keeps its CFI: an FDE at the old place in its
        LOAD's image and one at the new in the copy's (under user stacks
        an image of the same file name at the same offset, its own
        tables), each in its image's .eh_frame_hdr."""
        self.need("eu-readelf")
        b = gen.JitdumpBuilder()
        a = BASE + 0x4000
        b.cfi_unwinding_info(a, 0x40)
        b.load(b"JS:*m", gen.x86_64_code(0x40, 1), a, 0)
        b.move(0, a, a + 0x1000, 0x40)
        p, rows, out = self.convert(b, extra=["--user-stacks"])
        self.assertEqual([r["kind"] for r in rows], ["TABLES", "LOAD", "TABLES", "MOVE"],
                         p.out)
        self.check_invariants(b, p, rows, out)
        for kind, img in (("LOAD", "jitted-4242-r0-g0/jitted-4242-r0.so"),
                          ("MOVE", "jitted-4242-r0-g0-m1/jitted-4242-r0.so")):
            path = os.path.join(out, img)
            want = [(r["pgoff"], 0x40) for r in rows if r["kind"] == kind]
            self.assertEqual([r["image"] for r in rows if r["kind"] == kind], [img])
            pe = run(["eu-readelf", "--debug-dump=frames", path])
            got = sorted((int(o, 16), int(n, 16)) for o, n in re.findall(
                r"\(offset: (0x[0-9a-f]+)\)\n\s+address_range:\s+(0x[0-9a-f]+)", pe.out))
            self.assertEqual(got, want, pe.out)
            self.assertRegex(pe.out, r"fde_count:\s+1\n")

    def test_unload_changes_nothing(self):
        b = unload_reuse_dump()
        p1, rows1, out1 = self.convert(b)
        p2, rows2, out2 = self.convert(b, data=b.without(lambda r: r.kind == "UNLOAD"))
        self.assertEqual(self.images(out1), self.images(out2))
        self.assertEqual(self.images(out1), ["jitted-4242-r0-g0.so", "jitted-4242-r0-g1.so"])
        self.assertEqual(p1.out, p2.out)
        for n in self.images(out1):
            with open(os.path.join(out1, n), "rb") as f1, open(os.path.join(out2, n), "rb") as f2:
                self.assertEqual(f1.read(), f2.read(), "%s differs with UNLOADs" % n)
        self.check_invariants(b, p1, rows1, out1)

    # -- 3. CFI -----------------------------------------------------------------
    def cfi_dump(self, lay):
        _, bo, mach, arch, code, base = lay
        b = gen.JitdumpBuilder(bo=bo, elf_mach=mach, arch=arch)
        # loaded out of address order, one without CFI, one with empty info
        specs = [(0x300, 0x45, True), (0x40, 0x30, True), (0x200, 0x20, False),
                 (0x100, 0x61, True), (0x500, 0x28, "empty")]
        for i, (o, size, cfi) in enumerate(specs):
            if cfi == "empty":
                b.empty_unwinding_info()
            elif cfi:
                b.cfi_unwinding_info(base + o, size)
            b.load(b"JS:*c%d" % i, code(size, i), base + o, i)
        return b

    def test_cfi(self):
        self.need("eu-readelf", "readelf", DWARFDUMP)
        for lay in LAYOUTS:
            with self.subTest(layout=lay[0]):
                b = self.cfi_dump(lay)
                p, rows, out = self.convert(b)
                self.assertEqual(self.images(out), ["jitted-4242-r0-g0.so"])
                self.check_invariants(b, p, rows, out)
                self.check_cfi(b, p, rows, out, "jitted-4242-r0-g0.so", lay)

    def check_cfi(self, b, p, rows, out, name, lay):
        path = os.path.join(out, name)
        base = self.bases(rows)[name]
        elf = Elf(path)
        cfi = sorted((f.code_addr - base, f.code_size) for f in b.funcs if f.has_cfi)
        self.assertEqual(len(cfi), 3)
        eh = elf.section(".eh_frame")
        hdr = elf.section(".eh_frame_hdr")
        self.assertIsNotNone(eh, name)
        self.assertIsNotNone(hdr, name)
        # after the region's code
        code_end = max(f.code_addr + f.map_len() for f in b.funcs) - base
        self.assertGreaterEqual(eh["addr"], code_end)
        self.assertEqual(eh["addr"], eh["offset"])
        # the per-function tables are in memory after each function's code too
        for f in b.funcs:
            if f.has_cfi:
                o = f.code_addr - base + gen.align(f.code_size, 8)
                blob = f.unwind["eh_frame"] + f.unwind["hdr"]
                self.assertEqual(elf.data[o:o + len(blob)], blob,
                                 "%s: %r's own tables not at 0x%x" % (name, f.name, o))
        # the TABLES map
        tables = [r for r in rows if r["kind"] == "TABLES"]
        self.assertEqual(len(tables), 1, p.out)
        self.assertEqual(tables[0]["start"], base + eh["addr"], p.out)
        self.assertEqual(tables[0]["image"], name)
        self.assertGreaterEqual(tables[0]["map_len"],
                                hdr["addr"] + hdr["size"] - eh["addr"], p.out)
        ld = elf.loads()[0]
        self.assertGreaterEqual(ld["offset"] + ld["filesz"], hdr["addr"] + hdr["size"])
        # .eh_frame_hdr by hand: version 1, encodings, count, sorted table
        hb = elf.bytes_of(".eh_frame_hdr")
        bo = elf.bo
        self.assertEqual(hb[:4], bytes([1, 0x1B, 0x03, 0x3B]))
        ptr, count = struct.unpack_from(bo + "iI", hb, 4)
        self.assertEqual(hdr["addr"] + 4 + ptr, eh["addr"])
        self.assertEqual(count, len(cfi))
        table = [struct.unpack_from(bo + "ii", hb, 12 + 8 * i) for i in range(count)]
        self.assertEqual([hdr["addr"] + loc for loc, _ in table], [o for o, _ in cfi])
        self.assertEqual(len(hb), 12 + 8 * count)
        # eu-readelf
        pe = run(["eu-readelf", "--debug-dump=frames", path])
        self.assertEqual(pe.returncode, 0, describe(pe))
        self.assertNotIn("invalid", pe.out + pe.err, describe(pe))
        fdes = [(int(m.group(1), 16), int(m.group(2), 16)) for m in re.finditer(
            r"initial_location:\s+\S+.*?\(offset: (0x[0-9a-f]+)\)\n\s+address_range:\s+"
            r"(0x[0-9a-f]+)", pe.out)]
        self.assertEqual(sorted(fdes), cfi, pe.out)
        m = re.search(r"fde_count:\s+(\d+)", pe.out)
        self.assertEqual(int(m.group(1)), len(cfi), pe.out)
        locs = [int(x, 16) for x in re.findall(r"^\s+0x[0-9a-f]+ \(offset:\s+(0x[0-9a-f]+)\)",
                                               pe.out, re.M)]
        self.assertEqual(locs, [o for o, _ in cfi], pe.out)
        # llvm-dwarfdump
        pl = run([DWARFDUMP, "--eh-frame", path])
        self.assertEqual(pl.returncode, 0, describe(pl))
        fdes = [(int(a, 16), int(e, 16) - int(a, 16))
                for a, e in re.findall(r"FDE cie=\S+ pc=([0-9a-f]+)\.\.\.([0-9a-f]+)", pl.out)]
        self.assertEqual(sorted(fdes), cfi, pl.out)
        self.assertNotIn("error", pl.err.lower(), describe(pl))
        # readelf -wF
        pr = run(["readelf", "--debug-dump=frames-interp", path])
        self.assertEqual(pr.returncode, 0, describe(pr))
        self.assertNotIn("Warning", pr.err, describe(pr))
        fdes = [(int(a, 16), int(e, 16) - int(a, 16))
                for a, e in re.findall(r"FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", pr.out)]
        self.assertEqual(sorted(fdes), cfi, pr.out)

    def test_cfi_generations_tables_after_earlier(self):
        """A second generation's tables go after the first's."""
        self.need("eu-readelf")
        b = gen.JitdumpBuilder()
        a = BASE + 0x6000
        for i in range(2):
            b.cfi_unwinding_info(a, 0x40)
            b.load(b"JS:*g%d" % i, gen.x86_64_code(0x40, i), a, i)
        p, rows, out = self.convert(b)
        tables = [r for r in rows if r["kind"] == "TABLES"]
        self.assertEqual([t["image"] for t in tables],
                         ["jitted-4242-r0-g0.so", "jitted-4242-r0-g1.so"], p.out)
        self.assertGreaterEqual(tables[1]["start"], tables[0]["start"] + tables[0]["map_len"])
        self.check_invariants(b, p, rows, out)
        bases = self.bases(rows)
        for t, f in zip(tables, b.funcs):
            elf = Elf(os.path.join(out, t["image"]))
            self.assertEqual(t["start"], bases[t["image"]] + elf.section(".eh_frame")["addr"])
            pe = run(["eu-readelf", "--debug-dump=frames", os.path.join(out, t["image"])])
            self.assertIn("(offset: 0x%x)" % (f.code_addr - bases[t["image"]]), pe.out)
            self.assertEqual(len(re.findall(r"FDE length", pe.out)), 1, pe.out)

    # -- 4. sparse -----------------------------------------------------------------
    def test_sparse(self):
        b = gen.JitdumpBuilder()
        a = BASE + 0x7000
        far = a + 512 * 1024
        b.load(b"JS:*near", gen.x86_64_code(0x40, 1), a, 0)
        b.load(b"JS:*far", gen.x86_64_code(0x40, 2), far, 1)
        p, rows, out = self.convert(b)
        self.assertEqual(self.images(out), ["jitted-4242-r0-g0.so"])
        self.check_invariants(b, p, rows, out)
        path = os.path.join(out, "jitted-4242-r0-g0.so")
        st = os.stat(path)
        base = self.bases(rows)[os.path.basename(path)]
        self.assertGreater(st.st_size, 512 * 1024)
        self.assertLess(st.st_blocks * 512, 64 * 1024,
                        "size %d, %d blocks: holes not sparse" % (st.st_size, st.st_blocks))
        with open(path, "rb") as f:
            data = f.read()
        hole = data[a + 0x40 - base:far - base]
        self.assertEqual(len(hole), 512 * 1024 - 0x40)
        self.assertEqual(hole.count(0), len(hole), "hole bytes not zero")

    # -- 5. limits -------------------------------------------------------------------
    def test_huge_name(self):
        b = gen.JitdumpBuilder()
        a = BASE + 0x8000
        b.load(b"N" * (2 << 20), gen.x86_64_code(0x20, 1), a, 0)       # over 1 MiB
        b.load(b"M" * (512 << 10), gen.x86_64_code(0x20, 2), a + 0x40, 1)
        b.load(b"JS:*ok", gen.x86_64_code(0x20, 3), a + 0x80, 2)
        p, rows, out = self.convert(b)
        self.assertRegex(p.err, r"warning: .*function at 0x%x has a name of %d bytes; not placed"
                         % (a, 2 << 20))
        self.assertEqual(sorted(r["code_index"] for r in rows), [1, 2])
        self.check_invariants(b, p, rows, out, live={f.code_index: f for f in b.funcs[1:]})

    def test_near_top_of_address_space(self):
        """The last MiB below 2^64 is left for a region's unwind tables:
        code that runs into it is not placed (a warning); code just below
        it is."""
        b = gen.JitdumpBuilder()
        top = (1 << 64) - (1 << 20)
        b.load(b"JS:*low", gen.x86_64_code(0x20, 1), BASE, 0)
        b.load(b"JS:*top", gen.x86_64_code(0x20, 2), top - 0x40, 1)
        b.load(b"JS:*end", gen.x86_64_code(0x20, 3), top - 0x20, 2)     # ends at top
        b.load(b"JS:*over", gen.x86_64_code(0x20, 4), top - 0x10, 3)    # past it
        b.load(b"JS:*wrap", gen.x86_64_code(0x20, 5), (1 << 64) - 0x10, 4)
        p, rows, out = self.convert(b)
        self.assertRegex(p.err, r"warning: .*function at 0x%x runs into the last MiB of "
                         r"the address space; not placed" % (top - 0x10))
        # in every layout: a map must end inside the address space
        self.assertRegex(p.err, r"warning: .*function at 0x%x runs past the end of the "
                         r"address space; not placed" % ((1 << 64) - 0x10))
        self.assertEqual(sorted(r["code_index"] for r in rows if r["kind"] == "LOAD"),
                         [0, 1, 2], p.out)
        self.check_invariants(b, p, rows, out,
                              live={f.code_index: f for f in b.funcs[:3]})

    def test_near_top_with_cfi(self):
        """CFI just below the last MiB: the region's tables after its code
        stay below 2^64."""
        b = gen.JitdumpBuilder()
        top = (1 << 64) - (1 << 20)
        b.cfi_unwinding_info(top - 0x400, 0x20)
        b.load(b"JS:*room", gen.x86_64_code(0x20, 1), top - 0x400, 0)
        b.cfi_unwinding_info(top - 0x40, 0x20)
        b.load(b"JS:*noroom", gen.x86_64_code(0x20, 2), top - 0x40, 1)
        p, rows, out = self.convert(b)
        self.assertIn("warning", p.err, describe(p))
        bases = self.bases(rows, p)
        for r in rows:
            self.assertLessEqual(r["start"] + r["map_len"], 1 << 64, "a map past 2^64\n" + p.out)
        self.check_invariants(b, p, rows, out,
                              live={r["code_index"]: b.funcs[r["code_index"]]
                                    for r in rows if r["kind"] == "LOAD"})
        self.assertTrue(bases)

    # just below the last MiB close functions share one region, and the
    # tables after it overlap no map (a bug this found once: near 2^64
    # each function started a region of its own)
    def test_last_mib_one_region(self):
        b = gen.JitdumpBuilder()
        top = (1 << 64) - (1 << 20)
        b.cfi_unwinding_info(top - 0x400, 0x20)
        b.load(b"JS:*cfi", gen.x86_64_code(0x20, 1), top - 0x400, 0)
        b.load(b"JS:*next", gen.x86_64_code(0x20, 2), top - 0x380, 1)
        p, rows, out = self.convert(b)
        maps = sorted((r["start"], r["start"] + r["map_len"], r["kind"], r["image"])
                      for r in rows)
        for (s0, e0, k0, i0), (s1, e1, k1, i1) in zip(maps, maps[1:]):
            self.assertLessEqual(e0, s1, "overlapping maps %s %s and %s %s\n%s"
                                 % (k0, i0, k1, i1, p.out))
        self.assertEqual(self.images(out), ["jitted-4242-r0-g0.so"], p.out + p.err)

    def test_2000_loads_one_address(self):
        """2,000 LOADs at one address would be 2,000 generations: past its
        limits (256 + LOADs/64 images) the dump is written in the packed
        layout instead, one shared image, with a warning."""
        b = gen.JitdumpBuilder()
        a = BASE + 0x9000
        n = 2000
        for i in range(n):
            b.load(b"JS:*same%d" % i, gen.x86_64_code(0x20, i), a, i)
        p, rows, out = self.convert(b)
        self.assertRegex(p.err, r"too many generations of reused code: written in the packed "
                         r"layout instead of the memory layout \(2000 generations")
        self.assertEqual(self.images(out), ["jitted-4242-pack0.so"])
        self.assertEqual([(r["kind"], r["code_index"]) for r in rows],
                         [("LOAD", i) for i in range(n)])
        elf = Elf(os.path.join(out, "jitted-4242-pack0.so"))
        funcs = {name: (off, size) for name, off, size in elf.funcs()}
        for i in (0, 1, n // 2, n - 1):
            off = rows[i]["pgoff"]
            self.assertEqual(funcs[b"JS:*same%d" % i], (off, 0x20))
            self.assertEqual(elf.data[off:off + 0x20], b.funcs[i].code)
        # a little below the limit: one image per generation
        b = gen.JitdumpBuilder()
        for i in range(200):
            b.load(b"JS:*same%d" % i, gen.x86_64_code(0x20, i), a, i)
        p, rows, out = self.convert(b)
        self.assertNotIn("packed layout", p.err)
        self.assertEqual(len(self.images(out)), 200)


    def du(self, out):
        return sum(os.stat(os.path.join(out, n)).st_blocks * 512 for n in os.listdir(out))

    def test_hostile_dumps_fall_back_to_packed(self):
        """Dumps that would make the memory layout's output explode are
        written in the packed layout, with a warning: bounded output."""
        big = 1 << 20
        # a 1 MiB function bounced between two addresses 256 MiB apart:
        # every MOVE back lands on its own earlier copy
        b = gen.JitdumpBuilder()
        x, y = BASE, BASE + (256 << 20)
        b.load(b"JS:*big", gen.x86_64_code(big, 1), x, 0)
        for i in range(200):
            b.move(0, x if i % 2 == 0 else y, y if i % 2 == 0 else x, big)
        # laid out for user stacks, each MOVE would be a copy
        p, rows, out = self.convert(b, extra=["--user-stacks"])
        self.assertRegex(p.err, r"code moved too often: written in the packed layout")
        self.assertEqual(self.images(out), ["jitted-4242-pack0.so"])
        self.assertLess(self.du(out), 3 * big)
        self.assertEqual(len([r for r in rows if r["kind"] == "MOVE"]), 200)
        # without, a MOVE maps the bytes already there: nothing to give up
        p, rows, out = self.convert(b)
        self.assertNotIn("packed layout", p.err)
        self.assertEqual(self.images(out), ["jitted-4242-r0-g0.so"])
        self.assertLess(self.du(out), 3 * big)
        self.assertEqual(len([r for r in rows if r["kind"] == "MOVE"]), 200)
        # 1,100 tiny functions just under 1 MiB apart: one region wider
        # than 1 GiB
        b = gen.JitdumpBuilder()
        for i in range(1100):
            b.load(b"JS:*far%d" % i, gen.x86_64_code(0x20, i), BASE + i * (big - 0x100), i)
        p, rows, out = self.convert(b)
        self.assertRegex(p.err, r"a code region wider than 1 GiB: written in the packed layout")
        self.assertEqual(self.images(out), ["jitted-4242-pack0.so"])
        self.assertLess(sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out)),
                        1 << 20)

    def test_compressed_debug(self):
        """DWARF sections zlib-compressed where that makes them smaller
        (the default), plain with --compress-debug-sections none: the same
        DWARF, decoded alike by every tool; symbols, code and unwind
        tables never compressed."""
        self.need("readelf", "eu-readelf", DWARFDUMP)
        shf_compressed = 0x800
        for lay in LAYOUTS:
            with self.subTest(layout=lay[0]):
                _, bo, mach, arch, code, base = lay
                b = gen.JitdumpBuilder(bo=bo, elf_mach=mach, arch=arch)
                for i in range(200):
                    a = base + 0x40 + i * 0x100
                    b.debug_info(a, [(a + 4 * k, 10 + k, 0, FILE_A if k % 3 else FILE_B)
                                     for k in range(24)])
                    b.load(b"JS:*compress%d" % i, code(0xC0, i), a, i)
                p, rows, zdir = self.convert(b)
                self.check_invariants(b, p, rows, zdir)    # addr2line included
                p2, rows2, pdir = self.convert(b, extra=["--compress-debug-sections", "none"])
                self.check_invariants(b, p2, rows2, pdir)
                self.assertEqual(self.images(zdir), self.images(pdir))
                self.assertEqual(len(self.images(zdir)), 1, p.out)
                img = self.images(zdir)[0]
                zpath, ppath = os.path.join(zdir, img), os.path.join(pdir, img)
                ze, pe = Elf(zpath), Elf(ppath)
                for name in (".debug_info", ".debug_line"):
                    zs, ps = ze.section(name), pe.section(name)
                    self.assertTrue(zs["flags"] & shf_compressed, (name, zs))
                    self.assertFalse(ps["flags"] & shf_compressed, (name, ps))
                    self.assertLess(zs["size"], ps["size"] // 2, name)
                    chdr = ze.bytes_of(name)
                    if ze.is64:
                        t, _, size, align = struct.unpack_from(bo + "IIQQ", chdr)
                        hsz = 24
                    else:
                        t, size, align = struct.unpack_from(bo + "III", chdr)
                        hsz = 12
                    self.assertEqual((t, size, align), (1, ps["size"], 1), name)
                    self.assertEqual(zs["offset"] % (hsz // 3), 0, name)
                    self.assertEqual(zs["align"], hsz // 3, name)
                    self.assertEqual(zlib.decompress(chdr[hsz:]), pe.bytes_of(name), name)
                for name in (".text", ".eh_frame", ".eh_frame_hdr", ".symtab", ".strtab",
                             ".note.gnu.build-id"):
                    self.assertFalse(ze.section(name)["flags"] & shf_compressed, name)
                    if name != ".note.gnu.build-id":
                        self.assertEqual(ze.bytes_of(name), pe.bytes_of(name), name)
                # another image, another build-id
                self.assertNotEqual(ze.bytes_of(".note.gnu.build-id"),
                                    pe.bytes_of(".note.gnu.build-id"))
                # the tools decode both alike, and say nothing
                for tool in (["readelf", "--debug-dump=info,decodedline"],
                             ["eu-readelf", "--debug-dump=info", "--debug-dump=decodedline"]):
                    zo, po = run(tool + [zpath]), run(tool + [ppath])
                    self.assertEqual((zo.returncode, zo.err), (0, ""), describe(zo))

                    def norm(text, path):
                        # eu-readelf names each section's file offset
                        return re.sub(r"at offset 0x[0-9a-f]+", "at offset X",
                                      text.replace(path, "IMG"))
                    self.assertEqual(norm(zo.out, zpath), norm(po.out, ppath), tool)
                    self.assertIn("JS:*compress199", zo.out, tool)
                    self.assertIn("a.js", zo.out, tool)
                v = run([DWARFDUMP, "--verify", zpath])
                self.assertEqual(v.returncode, 0, describe(v))
                self.assertIn("No errors.", v.out)
                for tool in (["readelf", "-a", "-W"], ["eu-readelf", "-a"]):
                    r = run(tool + [zpath])
                    self.assertEqual((r.returncode, r.err), (0, ""), describe(r))

    def test_absolute_fde_is_not_merged(self):
        """An FDE with an absolute pc_begin would need the image's base:
        it is not merged (a warning), the function unwinds by frame
        pointers; the image is still written."""
        b = gen.JitdumpBuilder()
        eh, hdr, _ = gen.build_eh_frame(BASE, 0x40)
        eh = bytearray(eh)
        # the CIE's augmentation "zR" with R = 0x1b (pcrel sdata4) becomes
        # 0x03 (absolute udata4) when present
        at = eh.find(b"zR\x00")
        if at < 0:
            self.skipTest("the generator's CIE has no zR augmentation")
        i = eh.index(b"\x1b", at)
        eh[i] = 0x03
        b.unwinding_info(bytes(eh), hdr)
        b.load(b"JS:*abs", gen.x86_64_code(0x40, 1), BASE, 0)
        p, rows, out = self.convert(b)
        self.assertRegex(p.err, r"its unwind tables have a CIE this cannot rebase; unwound by "
                         r"frame pointers")
        self.assertEqual([r["kind"] for r in rows], ["LOAD"])


# --------------------------------------------------------------------------
# amplification: what a run writes (and its memory) against its input

S_STACK_USER = 1 << 13      # PERF_SAMPLE_STACK_USER: DWARF call graphs


def run_measured(args, cwd):
    """Runs args; returns (exit status, stdout, stderr, peak RSS in bytes,
    or None without GNU time).  GNU time, a small process, forks it: the
    rusage of a child of this (large) Python process would count the
    parent's pages it was forked with."""
    with tempfile.NamedTemporaryFile() as rss:
        timed = os.access("/usr/bin/time", os.X_OK)
        p = run((["/usr/bin/time", "-f", "%M", "-o", rss.name] if timed else []) + args, cwd=cwd)
        kib = open(rss.name).read().split() if timed else []
        peak = int(kib[-1]) * 1024 if kib and kib[-1].isdigit() else None
        return p.returncode, p.out, p.err, peak


def apparent_size(d):
    return sum(os.lstat(os.path.join(d, n)).st_size for n in os.listdir(d))


class Amplification(unittest.TestCase):
    """The memory layout bounded per run, not only per dump: inject runs
    on generated dumps and perf.data (issue 20, points 7 and 8)."""

    def setUp(self):
        if not os.access(PERFGRAFT, os.X_OK):
            self.fail("perfgraft binary not found: %s" % PERFGRAFT)
        # the reference build writes GBs of (sparse) images here: /tmp, gone
        # after each test
        self._tmp = tempfile.TemporaryDirectory(prefix="perfgraft-amplify-", dir="/tmp")
        self.addCleanup(self._tmp.cleanup)
        self.d = self._tmp.name

    def test_run_bound_on_sparse_images(self):
        """200 dumps of ~240 bytes, each one LOAD whose UNWINDING_INFO maps
        64 MiB: each dump alone is within its bound (64 x (code + 1 MiB)),
        the 200 of them were 13.4 GB of sparse images.  The run's images
        span at most 64 x (the run's code + 16 MiB); the dumps past that
        are written in the packed layout, named in one warning; perf
        resolves every sample, readelf reads the images."""
        n, mapped, size = 200, 64 << 20, 16
        b = pg.PerfDataBuilder(attrs=[pg.Attr(ids=[7])])
        dumps = []
        for i in range(n):
            pid = 5000 + i
            j = gen.JitdumpBuilder(pid=pid)
            j.cfi_unwinding_info(BASE, size, mapped_size=mapped)
            j.load(b"JS:*tiny%d" % i, gen.x86_64_code(size, i), BASE, 0, tid=pid,
                   timestamp=3000)
            path = os.path.join(self.d, "jit-%d.dump" % pid)
            j.write(path)
            self.assertLess(os.path.getsize(path), 256)
            dumps.append(path)
            b.comm(pid, pid, "node", 10 + i)
            b.mmap2(pid, pid, 0x10000, 4096, 0, path, 1000 + i)
        for i in range(n):
            b.sample(BASE + 4, 5000 + i, 5000 + i, 10000 + i)
        b.finished_round()
        src = os.path.join(self.d, "perf.data")
        b.write(src)
        out = os.path.join(self.d, "out.data")
        p = run([PERFGRAFT, "inject", "-i", src, "-o", out], cwd=self.d)
        self.assertEqual(p.returncode, 0, describe(p))
        imgdir = out + ".d"
        total = apparent_size(imgdir)
        bound = 64 * (n * size + (16 << 20)) + n * (64 << 10)   # + headers, tables, DWARF
        self.assertLess(total, bound, "%d bytes of images from %d bytes of dumps\n%s"
                        % (total, sum(map(os.path.getsize, dumps)), describe(p)))
        # the dumps laid out like memory, and those packed (their CFI gives
        # each an image of its own: jitted-PID-0-*.so)
        images = os.listdir(imgdir)
        memory = sorted(int(m.group(1)) for m in (re.match(r"jitted-(\d+)-r0-g0-", x)
                                                  for x in images) if m)
        packed = sorted(int(m.group(1)) for m in (re.match(r"jitted-(\d+)-0-", x)
                                                  for x in images) if m)
        self.assertEqual(len(images), n, images)
        self.assertEqual(sorted(memory + packed), list(range(5000, 5000 + n)))
        self.assertTrue(memory and packed, images)
        self.assertGreater(len(memory) * mapped, 64 * (16 << 20) - mapped, memory)
        # one warning names the first dumps packed, then says how many more
        warns = [ln for ln in p.err.splitlines() if "packed layout" in ln]
        self.assertEqual(len(warns), 1, p.err)
        fell = [dumps[pid - 5000] for pid in packed]
        self.assertRegex(warns[0], r"^perfgraft: warning: %d dumps written in the packed layout "
                         r"instead of the memory layout: the run's images would span more than "
                         r"64 x \(its %d bytes of code \+ 16 MiB\) of address space: "
                         % (len(packed), n * size))
        self.assertTrue(warns[0].endswith(": %s and %d more" % (", ".join(fell[:8]),
                                                                len(packed) - 8)), warns[0])
        # perf reads them: every sample on its function
        self.need("perf")
        r = run(["perf", "--buildid-dir", os.path.join(self.d, "debug"), "script", "-i", out,
                 "-F", "pid,ip,sym", "--hide-call-graph"], cwd=self.d)
        got = sorted((ln.split()[0], ln.split()[-1]) for ln in r.out.splitlines() if ln.strip())
        self.assertEqual(got, sorted((str(5000 + i), "JS:*tiny%d" % i) for i in range(n)),
                         describe(r))
        for pid in (memory[0], memory[-1], packed[0], packed[-1]):
            img = next(x for x in images if x.startswith("jitted-%d-" % pid))
            r = run(["readelf", "-a", "-W", os.path.join(imgdir, img)])
            self.assertEqual((r.returncode, r.err), (0, ""), describe(r))
            self.assertIn("JS:*tiny%d" % (pid - 5000), r.out)

    def need(self, *tools):
        for t in tools:
            if not shutil.which(t):
                self.skipTest("%s not installed" % t)

    def moves_dump(self, path, nfuncs=4, name_len=16 << 10, nrows=32, nmoves=1000):
        """nfuncs functions with long names (pseudo-random: DWARF does not
        compress them away) and line tables, each MOVEd nmoves times to the
        next 16 bytes: laid out for user stacks, every MOVE is a copy in
        one image (one region, one generation)."""
        rnd = random.Random(20)
        alnum = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$"
        b = gen.JitdumpBuilder()
        for f in range(nfuncs):
            a = BASE + f * 0x100000 // 4
            b.debug_info(a, [(a + k % 16, 10 + k, 0, FILE_A if k == 0 else gen.SAME_FILE)
                             for k in range(nrows)])
            name = b"JS:*" + bytes(rnd.choice(alnum) for _ in range(name_len))
            b.load(name, gen.x86_64_code(16, f), a, f)
            cur = a
            for k in range(nmoves):
                new = a + 16 * (k + 1)
                b.move(f, cur, new, 16)
                cur = new
        b.write(path)
        return b

    def test_moves_under_user_stacks_bounded(self):
        """Under DWARF call graphs every MOVE is a copy that writes its
        function's name again (.strtab and DW_AT_name) with its symbol and
        line rows: 4,000 MOVEs of four functions with 16 KiB names wrote
        68 MB with 194 MB RSS from 325 KB of input.  What the copies write
        is counted: the dump is written in the packed layout (a warning),
        its output and RSS bounded by the input."""
        dump = os.path.join(self.d, "jit-4242.dump")
        b = self.moves_dump(dump)
        b2 = pg.PerfDataBuilder(attrs=[pg.Attr(ids=[7], sample_type=pg.SAMPLE_TYPE | S_STACK_USER)])
        b2.comm(4242, 4242, "node", 10)
        b2.mmap2(4242, 4242, 0x10000, 4096, 0, dump, 20)
        b2.finished_round()
        src = os.path.join(self.d, "perf.data")
        b2.write(src)
        out = os.path.join(self.d, "out.data")
        inp = os.path.getsize(dump) + os.path.getsize(src)
        rc, _, err, rss = run_measured([PERFGRAFT, "inject", "-i", src, "-o", out], self.d)
        self.assertEqual(rc, 0, err)
        written = os.path.getsize(out) + apparent_size(out + ".d")
        # the MMAP2 records (one per MOVE) are ~2x the dump; the images hold
        # each name once.  RSS: the binary itself takes ~5 MB (~20 MB with
        # ASan)
        figures = "%d bytes written, peak RSS %s bytes, from %d bytes of input\n%s" % (
            written, rss, inp, err)
        self.assertLess(written, 4 * inp + (1 << 20), figures)
        if rss is not None:
            self.assertLess(rss, 64 * inp + (32 << 20), figures)
        self.assertRegex(err, r"warning: jit-4242.dump: names and line rows moved too often: "
                         r"written in the packed layout instead of the memory layout")
        d = json.loads(run([PERFGRAFT, "dump", "--json", out]).out)
        mm = [x for x in d["records"] if x["name"] == "MMAP2" and x["filename"].endswith(".so")]
        self.assertEqual(len(mm), 4 + 4000)
        self.assertEqual(len({x["filename"] for x in mm}), 1, mm[:3])
        img = mm[0]["filename"]
        r = run(["readelf", "-s", "-W", img])
        self.assertEqual((r.returncode, r.err), (0, ""), describe(r))
        self.assertEqual(r.out.count("JS:*"), 4)
        # perfgraft elf --user-stacks lays it out as inject does
        p = run([PERFGRAFT, "elf", "--user-stacks", "-v", "-o", os.path.join(self.d, "elf"),
                 dump])
        self.assertEqual(p.returncode, 0, describe(p))
        self.assertIn("names and line rows moved too often", p.err)
        self.assertLess(apparent_size(os.path.join(self.d, "elf")), 4 * inp)

    def test_moved_inline_names_counted(self):
        """A copy in an image of its own writes the names of its inlined
        functions again (DW_AT_name and DW_AT_linkage_name of the abstract
        subprogram): 200 MOVEs, each to a region of its own, of a function
        with one inline chain through a 64 KiB name wrote 20 MB from 78 KB.
        Counted, the dump is written in the packed layout (a warning),
        its DWARF still holds the chain."""
        rnd = random.Random(7)
        alnum = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$"
        inl = b"JS:*inlined" + bytes(rnd.choice(alnum) for _ in range(64 << 10))
        b = gen.JitdumpBuilder()
        b.inline_info(BASE, [inl, FILE_A, b"JS:*outer"], [(0, 8, [(0, 1, 5), (2, 1, 10)])])
        b.load(b"JS:*outer", gen.x86_64_code(16, 1), BASE, 0)
        cur = BASE
        for k in range(200):
            new = BASE + (k + 1) * 2 * REGION_GAP
            b.move(0, cur, new, 16)
            cur = new
        dump = os.path.join(self.d, "inl.dump")
        b.write(dump)
        out = os.path.join(self.d, "img")
        p = run([PERFGRAFT, "elf", "--user-stacks", "-v", "-o", out, dump])
        self.assertEqual(p.returncode, 0, describe(p))
        inp = os.path.getsize(dump)
        written = apparent_size(out)
        self.assertLess(written, 4 * inp + (1 << 20), "%d bytes written from %d bytes\n%s"
                        % (written, inp, describe(p)))
        self.assertIn("inl.dump: names and line rows moved too often: written in the packed "
                      "layout", p.err)
        self.need("readelf")
        r = run(["readelf", "--debug-dump=info", "-W", os.path.join(out, os.listdir(out)[0])])
        self.assertEqual((r.returncode, r.err), (0, ""), describe(r))
        self.assertIn("DW_TAG_inlined_subroutine", r.out)
        self.assertIn(inl[:40].decode(), r.out)


class WriteCalls(unittest.TestCase):
    """An image's code goes out in batches: tests/write_calls writes one
    memory-layout image of 20,000 functions (64 KiB holes every 64) and
    counts the library's pwrite/pwritev/write calls (one pwrite a function
    before); the image must still hold each function's bytes at its
    offset, zeros between them, and stay sparse over the holes."""

    N = 20000

    def test_batched_and_same_bytes(self):
        tool = os.path.join(os.path.dirname(PERFGRAFT), "tests", "write_calls")
        if not os.access(tool, os.X_OK):
            self.fail("write_calls not built: %s" % tool)
        with tempfile.TemporaryDirectory(prefix="perfgraft-writecalls-") as d:
            p = run([tool, str(self.N), d])
            self.assertEqual(p.returncode, 0, describe(p))
            lines = p.out.splitlines()
            calls = int(lines[0].split()[1])
            rows = [ln.split("\t") for ln in lines[1:]]
            self.assertEqual(len(rows), self.N)
            # 256-piece batches, a new one at each hole: ~N/64 + N/254
            self.assertLessEqual(calls, self.N // 40, "%d write calls for %d functions" % (calls, self.N))
            paths = {r[0] for r in rows}
            self.assertEqual(len(paths), 1)
            path = paths.pop()
            rs = run(["readelf", "-S", "-W", path])
            self.assertEqual(rs.returncode, 0, describe(rs))
            self.assertIn(".text", rs.out)
            self.assertNotIn("Warning", rs.err)
            data = open(path, "rb").read()
            spans = []
            for _, off, size, byte in rows:
                off, size, byte = int(off, 16), int(size), int(byte, 16)
                self.assertEqual(data[off:off + size], bytes([byte]) * size, "function at 0x%x" % off)
                spans.append((off, off + size))
            spans.sort()
            for (_, e), (s2, _) in zip(spans, spans[1:]):
                self.assertEqual(data[e:s2].count(0), s2 - e, "gap [0x%x, 0x%x) not zeros" % (e, s2))
            code = sum(e - b for b, e in spans)
            st = os.stat(path)
            # the 64 KiB holes (20 MB of the file) stay holes: what is
            # allocated is the functions' 5 MB span and the tables
            holes = (self.N - 1) // 64 * 0x10000 - 0x10000
            self.assertGreater(st.st_size, holes)
            self.assertLess(st.st_blocks * 512, st.st_size - holes + (2 << 20))


class FewOpenFiles(unittest.TestCase):
    """Images written in finish go to a worker thread, each holding its
    open temporary until joined: a fallback to the packed layout writes an
    image per CFI function there (400 here), which must not need 400 open
    files (ulimit -n 40)."""

    def test_fallback_many_cfi_images(self):
        import resource
        with tempfile.TemporaryDirectory(prefix="perfgraft-fewfiles-") as d:
            b = gen.JitdumpBuilder()
            for f in range(400):    # one address reused: 400 generations
                b.cfi_unwinding_info(BASE, 0x40)
                b.load(b"JS:*f%d" % f, gen.x86_64_code(0x40, f), BASE, f)
            dump = os.path.join(d, "jit-4242.dump")
            b.write(dump)
            out = os.path.join(d, "out")
            os.mkdir(out)

            def limit():
                resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))
            p = subprocess.run([PERFGRAFT, "elf", "--user-stacks", "-o", out, dump],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit,
                               timeout=300)
            err = p.stderr.decode("utf-8", "replace")
            self.assertEqual(p.returncode, 0, err)
            self.assertIn("written in the packed layout instead", err)
            self.assertEqual(len([n for n in os.listdir(out) if n.endswith(".so")]), 400)


if __name__ == "__main__":
    unittest.main()
