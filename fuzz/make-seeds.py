#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Regenerates the seed corpus of fuzz_jitdump: tiny jitdump files that
follow the layouts real producers write (see the jitdump notes, section 1).

usage: fuzz/make-seeds.py [OUTDIR]     (default: fuzz/corpus next to this file)
"""
import os
import struct
import sys

MAGIC = 0x4A695444
V8_PAD = 0xDEADBEEF
EM_386, EM_PPC64, EM_X86_64, EM_AARCH64 = 3, 21, 62, 183
LOAD, MOVE, DEBUG_INFO, CLOSE, UNWINDING_INFO = 0, 1, 2, 3, 4
INLINE_INFO, UNLOAD = 0x70670001, 0x70670002   # perfgraft's extensions
NO_FILE = 0xFFFFFFFF

# push rbp; mov rbp,rsp; mov eax,42; pop rbp; ret; int3 x6 (16 bytes)
CODE = bytes.fromhex("554889e5b82a0000005dc3cccccccccc")


def align(n, a):
    return (n + a - 1) & ~(a - 1)


class Dump:
    def __init__(self, mach=EM_X86_64, pad1=0, pid=4242, flags=0, be=False):
        self.e = ">" if be else "<"
        self.t = 1000
        self.buf = struct.pack(self.e + "IIIIIIQQ", MAGIC, 1, 40, mach, pad1,
                               pid, 1700000000000000, flags)

    def rec(self, rid, body, pad8=False):
        size = 16 + len(body)
        if pad8:
            size = align(size, 8)
        self.t += 10
        self.buf += struct.pack(self.e + "IIQ", rid, size, self.t) + body
        self.buf += b"\0" * (size - 16 - len(body))

    def load(self, addr, name, code, index, pid=4242):
        self.rec(LOAD, struct.pack(self.e + "IIQQQQ", pid, pid, addr, addr,
                                   len(code), index) + name + b"\0" + code)

    def move(self, old, new, size, index, pid=4242):
        self.rec(MOVE, struct.pack(self.e + "IIQQQQQ", pid, pid, new, old,
                                   new, size, index))

    def debug(self, addr, entries):
        body = struct.pack(self.e + "QQ", addr, len(entries))
        for a, line, col, name in entries:
            body += struct.pack(self.e + "QII", a, line, col) + name + b"\0"
        self.rec(DEBUG_INFO, body, pad8=True)

    def unwind(self, blob, hdr_size, mapped):
        self.rec(UNWINDING_INFO,
                 struct.pack(self.e + "QQQ", len(blob), hdr_size, mapped) + blob,
                 pad8=True)

    def unknown(self, rid, body):
        self.rec(rid, body)

    def inline(self, addr, strings, ranges, nr_strings=None, nr_ranges=None):
        """INLINE_INFO: ranges (off, len, [(func, file, line)...][, nframes])."""
        body = struct.pack(self.e + "QII", addr,
                           len(strings) if nr_strings is None else nr_strings,
                           len(ranges) if nr_ranges is None else nr_ranges)
        body += b"".join(s + b"\0" for s in strings)
        for r in ranges:
            off, ln, frames = r[:3]
            body += struct.pack(self.e + "III", off, ln, r[3] if len(r) > 3 else len(frames))
            for f in frames:
                body += struct.pack(self.e + "III", *f)
        self.rec(INLINE_INFO, body)

    def unload(self, addr, size, index, pid=4242):
        self.rec(UNLOAD, struct.pack(self.e + "IIQQQ", pid, pid, addr, size, index))

    def close(self):
        self.rec(CLOSE, b"")


def empty_hdr():
    """V8's 'no CFI' table: a 20-byte .eh_frame_hdr with fde_count 0,
    eh_frame empty (unwinding_size == eh_frame_hdr_size == 20)."""
    return bytes.fromhex("011b033b") + b"\0" * 16


def v8_cfi(code_size):
    """[.eh_frame: CIE + FDE + terminator][.eh_frame_hdr], laid out as V8
    maps it: eh_frame at align8(code_size) after the code start."""
    e = align(code_size, 8)
    cie = bytes.fromhex("18000000" "00000000" "03" "7a4c5200" "01" "78" "10"
                        "02" "ff" "1b" "0c0708" "9001" "00000000")
    assert len(cie) == 28
    fde_pc = 28 + 8                      # pc_begin field offset in eh_frame
    instr = bytes.fromhex("410e10" "8602" "430d06" "46" "0c0708")
    fde = struct.pack("<Ii", 40, 32) + struct.pack("<iI", -(e + fde_pc),
                                                   code_size)
    fde += b"\0" + instr
    fde += b"\0" * (44 - len(fde))
    eh = cie + fde + b"\0" * 4
    assert len(eh) == 76
    h = len(eh)                          # hdr offset in eh_frame
    hdr = bytes.fromhex("011b033b") + struct.pack(
        "<iIii", -(h + 4), 1, -(e + h), 28 - h)
    return eh + hdr, len(hdr)


def seeds():
    out = {}
    base = 0x7F00DEAD0000

    d = Dump()
    out["01-header-only.jd"] = d.buf

    d = Dump()
    d.load(base, b"f", CODE, 1)
    d.load(base + 0x40, b"g", CODE[:11], 2)
    d.close()
    out["02-loads-close.jd"] = d.buf

    # V8 style: UNWINDING_INFO (no CFI) + DEBUG_INFO + LOAD per function.
    d = Dump(pad1=V8_PAD)
    d.unwind(empty_hdr(), 20, 0)
    d.debug(base, [(base + 0x40, 1, 1, b"file:///a.js"),
                   (base + 0x44, 2, 5, b"\xff"),
                   (base + 0x49, 3, 3, b"node:internal/b")])
    d.load(base, b"JS:~f file:///a.js:1:1", CODE, 0)
    d.unwind(empty_hdr(), 20, 0)
    d.load(base + 0x80, b"Builtin:X", CODE[:8], 1)
    out["03-v8-debug.jd"] = d.buf

    # V8 TurboFan function with real CFI (mapped_size != 0).
    d = Dump(pad1=V8_PAD)
    blob, hsz = v8_cfi(len(CODE))
    d.unwind(blob, hsz, len(blob))
    d.debug(base, [(base + 0x40, 7, 2, b"/srv/app.js")])
    d.load(base, b"JS:*hot /srv/app.js:7:2", CODE, 0)
    blob, hsz = v8_cfi(11)
    d.unwind(blob, hsz, len(blob))
    d.load(base + 0x100, b"JS:*hot2", CODE[:11], 1)
    out["04-v8-cfi.jd"] = d.buf

    # MOVE, an unknown id, a zero-size LOAD, CLOSE.
    d = Dump()
    d.load(base, b"m", CODE, 1)
    d.move(base, base + 0x1000, len(CODE), 1)
    d.unknown(9, b"\x01\x02\x03\x04\x05\x06\x07\x08")
    d.load(base + 0x2000, b"empty", b"", 2)
    d.close()
    out["05-move-unknown.jd"] = d.buf

    # Big-endian 64-bit producer (ppc64) with debug info.
    d = Dump(mach=EM_PPC64, be=True, pid=77)
    d.debug(base, [(base, 10, 0, b"be.c"), (base + 4, 11, 0, b"\xff")])
    d.load(base, b"be_func", bytes.fromhex("3860002a4e800020"), 5, pid=77)
    out["06-big-endian.jd"] = d.buf

    # 32-bit V8 (line bias 0x34), ARCH_TIMESTAMP flag, truncated tail.
    d = Dump(mach=EM_386, pad1=V8_PAD, flags=1, pid=9)
    d.debug(0x8000000, [(0x8000000 + 0x34, 1, 1, b"x.js")])
    d.load(0x8000000, b"JS:~x", bytes.fromhex("5589e5b82a0000005dc3"), 0,
           pid=9)
    d.load(0x8000100, b"JS:~cut", CODE, 1, pid=9)
    out["07-i386-truncated.jd"] = d.buf[:-7]

    # aarch64, duplicate code_index, DEBUG_INFO not followed by a LOAD.
    d = Dump(mach=EM_AARCH64, pid=31337)
    ret = bytes.fromhex("400580d2c0035fd6")   # mov x0,#42; ret
    d.load(0x400000, b"a", ret, 3, pid=31337)
    d.load(0x400010, b"a", ret, 3, pid=31337)
    d.debug(0x400020, [(0x400020, 1, 0, b"dangling.c")])
    out["08-aarch64-dup.jd"] = d.buf

    # perfgraft's INLINE_INFO (depth 2 and 3 chains, shared strings, no
    # file) before a LOAD with DEBUG_INFO, UNLOAD after it.
    d = Dump()
    d.inline(base, [b"f", b"inl", b"a.js", b"deep"], [
        (0, 4, [(1, 2, 7), (0, 2, 1)]),
        (4, 4, [(3, NO_FILE, 9), (1, 2, 8), (0, 2, 2)]),
        (8, 4, [(1, NO_FILE, 5), (0, 2, 3)])])
    d.debug(base, [(base, 1, 0, b"a.js"), (base + 4, 9, 0, b"\xff")])
    d.load(base, b"f", CODE, 1)
    d.unload(base, len(CODE), 1)
    out["09-inline-unload.jd"] = d.buf

    # Big-endian: a damaged INLINE_INFO (a frame names string 5 of 2), two
    # before one LOAD, one for other code, ranges the model drops (empty,
    # overlapping, outside the code), an UNLOAD.
    d = Dump(mach=EM_PPC64, be=True, pid=77)
    d.inline(base, [b"g", b"x"], [(0, 4, [(5, 0, 1), (0, 0, 1)])])
    d.inline(base, [b"g", b"x"], [(0, 4, [(1, NO_FILE, 1), (0, 0, 2)])])
    d.inline(base, [b"g", b"x"], [(0, 4, [(1, 1, 1), (0, 0, 2)]),
                                  (4, 0, [(1, 1, 1), (0, 0, 2)]),
                                  (2, 4, [(1, 1, 1), (0, 0, 2)]),
                                  (6, 9, [(1, 1, 1), (0, 0, 2)])])
    d.load(base, b"g", bytes.fromhex("3860002a4e800020"), 5, pid=77)
    d.inline(base + 0x1000, [b"h", b"y"], [(0, 4, [(1, 1, 1), (0, 0, 2)])])
    d.load(base + 0x40, b"h", bytes.fromhex("3860002a4e800020"), 6, pid=77)
    d.unload(base, 8, 5, pid=77)
    out["10-inline-be-damaged.jd"] = d.buf

    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")
    os.makedirs(outdir, exist_ok=True)
    for name, data in sorted(seeds().items()):
        assert len(data) < 4096, name
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
