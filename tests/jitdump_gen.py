#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writer of jitdump files (the JIT profiling format of Linux perf) for tests.

Stdlib only.  Format (all fields in the writer's byte order, see perf's
tools/perf/Documentation/jitdump-specification.txt and util/jitdump.c):

  header (40 bytes): u32 magic 0x4A695444, u32 version, u32 total_size,
                     u32 elf_mach, u32 pad1, u32 pid, u64 timestamp, u64 flags
  record prefix (16): u32 id, u32 total_size (incl. prefix), u64 timestamp
  LOAD (0):  u32 pid, u32 tid, u64 vma, u64 code_addr, u64 code_size,
             u64 code_index, name NUL, code
  MOVE (1):  u32 pid, u32 tid, u64 vma, u64 old_code_addr, u64 new_code_addr,
             u64 code_size, u64 code_index
  DEBUG_INFO (2): u64 code_addr, u64 nr_entry, entries
             {u64 addr, u32 line, u32 discrim, name NUL} ("\\xff" = previous)
  CLOSE (3): prefix only
  UNWINDING_INFO (4): u64 unwinding_size, u64 eh_frame_hdr_size,
             u64 mapped_size, blob [.eh_frame][.eh_frame_hdr], padding
  perfgraft's extension records (docs/jitdump-extensions.md):
  INLINE_INFO (0x70670001): u64 code_addr, u32 nr_strings, u32 nr_ranges,
             strings (NUL-terminated), ranges {u32 off, u32 len, u32 nframes,
             frames {u32 func, u32 file, u32 line}} (file 0xffffffff: none)
  UNLOAD (0x70670002): u32 pid, u32 tid, u64 code_addr, u64 code_size,
             u64 code_index

JitdumpBuilder writes well-formed files and, through overrides and raw(),
damaged ones.  Every record method returns a Rec with the record's file
offset, its size and the fields ``perfgraft dump --json`` should report.
cases(outdir) writes the edge-case set used by test_edge_cases.py.
"""

import os
import struct

MAGIC = 0x4A695444

JIT_CODE_LOAD = 0
JIT_CODE_MOVE = 1
JIT_CODE_DEBUG_INFO = 2
JIT_CODE_CLOSE = 3
JIT_CODE_UNWINDING_INFO = 4
JIT_CODE_INLINE_INFO = 0x70670001
JIT_CODE_UNLOAD = 0x70670002

TYPE_NAMES = {0: "LOAD", 1: "MOVE", 2: "DEBUG_INFO", 3: "CLOSE",
              4: "UNWINDING_INFO", JIT_CODE_INLINE_INFO: "INLINE_INFO",
              JIT_CODE_UNLOAD: "UNLOAD"}

EM_386 = 3
EM_PPC64 = 21
EM_S390 = 22
EM_X86_64 = 62

HEADER_SIZE = 40
PREFIX_SIZE = 16
LOAD_FIXED = PREFIX_SIZE + 40
MOVE_FIXED = PREFIX_SIZE + 48
DEBUG_FIXED = PREFIX_SIZE + 16
DEBUG_ENTRY_FIXED = 16
UNWIND_FIXED = PREFIX_SIZE + 24
INLINE_FIXED = PREFIX_SIZE + 16
UNLOAD_FIXED = PREFIX_SIZE + 32
NO_FILE = 0xFFFFFFFF

V8_PAD1 = 0xDEADBEEF
V8_LINE_BIAS_64 = 0x40
V8_LINE_BIAS_32 = 0x34

SAME_FILE = b"\xff"


def align(n, a):
    return (n + a - 1) // a * a


def uleb128(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def sleb128(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if (v == 0 and not b & 0x40) or (v == -1 and b & 0x40):
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


# --------------------------------------------------------------------------
# Machine code: real instructions so objdump can disassemble them.

def x86_64_code(size, tag=0):
    """push rbp; mov rbp,rsp; movabs rax,imm64; mov eax,imm32; nop...;
    pop rbp; ret -- exactly `size` bytes (size >= 6)."""
    if size < 6:
        raise ValueError("x86-64 function needs >= 6 bytes")
    head = b"\x55\x48\x89\xe5"                       # push rbp; mov rbp,rsp
    tail = b"\x5d\xc3"                               # pop rbp; ret
    body = b""
    room = size - len(head) - len(tail)
    if room >= 10:                                   # movabs rax, imm64 (10 bytes)
        body += b"\x48\xb8" + struct.pack("<Q", 0x1122334455667788 + tag)
        room -= 10
    if room >= 5:                                    # mov eax, imm32
        body += b"\xb8" + struct.pack("<I", 0x31415926 + tag)
        room -= 5
    body += b"\x90" * room                           # nop
    return head + body + tail


def i386_code(size, tag=0):
    """push ebp; mov ebp,esp; mov eax,imm32; nop...; pop ebp; ret."""
    if size < 5:
        raise ValueError("i386 function needs >= 5 bytes")
    head = b"\x55\x89\xe5"
    tail = b"\x5d\xc3"
    room = size - len(head) - len(tail)
    body = b""
    if room >= 5:
        body += b"\xb8" + struct.pack("<I", 0x27182818 + tag)
        room -= 5
    body += b"\x90" * room
    return head + body + tail


# --------------------------------------------------------------------------
# .eh_frame / .eh_frame_hdr like V8 writes them.

CFI_ARCH = {
    # ra column, sp reg, fp reg, data align, pointer size, prologue lengths
    # (push fp; mov fp,sp).  ppc64 reuses the x86 prologue shape because the
    # big-endian cases carry the same (x86) code bytes as the little-endian
    # baseline, so that their jitdump content is identical.
    "x86_64": dict(ra=16, sp=7, fp=6, data_align=-8, ptr=8, push=1, mov=3),
    "i386": dict(ra=8, sp=4, fp=5, data_align=-4, ptr=4, push=1, mov=2),
    "ppc64": dict(ra=65, sp=1, fp=31, data_align=-8, ptr=8, push=1, mov=3),
}


def _cfa_offset(reg, factored):
    if reg < 0x40:
        return bytes([0x80 | reg]) + uleb128(factored)       # DW_CFA_offset
    return b"\x05" + uleb128(reg) + uleb128(factored)       # DW_CFA_offset_extended


def build_eh_frame(code_addr, code_size, bo="<", arch="x86_64"):
    """Returns (eh_frame, eh_frame_hdr, fde_offset): one CIE + one FDE
    covering [code_addr, code_addr+code_size) with pc-relative sdata4
    pointers, a zero terminator, and a version-1 hdr (enc 0x1b/0x03/0x3b)
    with one table entry, valid when .eh_frame sits at
    code_addr + align8(code_size) and the hdr right after it (V8 layout).
    The FDE describes push fp (push bytes), mov fp,sp (mov bytes),
    ..., pop fp at code_size-2, ret."""
    a = CFI_ARCH[arch]
    ptr = a["ptr"]

    def u32(v):
        return struct.pack(bo + "I", v & 0xFFFFFFFF)

    def s32(v):
        return struct.pack(bo + "i", v)

    def pad(body):
        # length field (4) + body must be a multiple of the pointer size
        while (4 + len(body)) % ptr:
            body += b"\x00"                          # DW_CFA_nop
        return body

    def advance(delta):
        if delta < 0x40:
            return bytes([0x40 | delta])              # DW_CFA_advance_loc
        if delta < 0x100:
            return bytes([0x02, delta])               # DW_CFA_advance_loc1
        return b"\x03" + struct.pack(bo + "H", delta)  # DW_CFA_advance_loc2

    eh_addr = code_addr + align(code_size, 8)
    sp, fp, ra = a["sp"], a["fp"], a["ra"]
    # CIE: version 1, "zR", code align 1, data align, ra column, FDE enc 0x1b
    cie = u32(0) + b"\x01" + b"zR\x00" + uleb128(1) + sleb128(a["data_align"])
    cie += uleb128(ra) + uleb128(1) + b"\x1b"
    cie += b"\x0c" + uleb128(sp) + uleb128(ptr)      # def_cfa sp+ptr
    cie += _cfa_offset(ra, 1)                         # ra at cfa-ptr
    cie = pad(cie)
    cie = u32(len(cie)) + cie
    # FDE
    fo = len(cie)
    insns = advance(a["push"])
    insns += b"\x0e" + uleb128(2 * ptr)               # def_cfa_offset 2*ptr
    insns += _cfa_offset(fp, 2)                       # fp at cfa-2*ptr
    insns += advance(a["mov"])
    insns += b"\x0d" + uleb128(fp)                    # def_cfa_register fp
    insns += advance(code_size - 1 - a["push"] - a["mov"])  # after pop fp
    insns += b"\x0c" + uleb128(sp) + uleb128(ptr)     # def_cfa sp+ptr
    fde = u32(fo + 4)                                 # CIE pointer
    fde += s32(code_addr - (eh_addr + fo + 8))        # pc_begin, pcrel sdata4
    fde += u32(code_size)                             # pc_range
    fde += uleb128(0) + insns                         # no augmentation data
    fde = pad(fde)
    fde = u32(len(fde)) + fde
    eh_frame = cie + fde + u32(0)                     # zero terminator
    hdr_addr = eh_addr + len(eh_frame)
    hdr = bytes([1, 0x1B, 0x03, 0x3B])
    hdr += s32(eh_addr - (hdr_addr + 4))              # eh_frame_ptr, pcrel
    hdr += u32(1)                                     # fde_count
    hdr += s32(code_addr - hdr_addr)                  # initial loc, datarel
    hdr += s32(eh_addr + fo - hdr_addr)               # FDE address, datarel
    return eh_frame, hdr, fo


def empty_eh_frame_hdr():
    """What V8 writes when the code has no CFI (EhFrameWriter::WriteEmptyEhFrame)."""
    return bytes([1, 0x1B, 0x03, 0x3B]) + b"\x00" * 16


# --------------------------------------------------------------------------

class Rec:
    """One record as written: offset, size, and the JSON fields expected."""

    def __init__(self, kind, rid, offset, size, timestamp, fields=None):
        self.kind = kind          # "LOAD", ..., "UNKNOWN", "RAW"
        self.id = rid
        self.offset = offset
        self.size = size          # bytes actually written
        self.end = offset + size
        self.timestamp = timestamp
        self.fields = fields or {}
        self.json = None          # expected JSON object (None: may be absent)
        self.optional_json = None # when json is None: fields to check if listed
        self.extra = {}           # builder-side details (code bytes, ...)

    def __repr__(self):
        return "Rec(%s @%d+%d)" % (self.kind, self.offset, self.size)


class Func:
    """A LOAD as the tests expect it to be placed in an image."""

    def __init__(self, rec, name, code, code_addr, code_index, debug, unwind):
        self.rec = rec
        self.name = name          # bytes
        self.code = code          # bytes
        self.code_addr = code_addr
        self.code_size = len(code)
        self.code_index = code_index
        self.debug = debug        # list of dict(addr, line, discrim, file, damaged) or None
        self.unwind = unwind      # dict(unwinding_size, hdr_size, mapped_size, real) or None
        self.inline = None        # the pending INLINE_INFO (dict) or None
        self.chains = []          # its chains the code model keeps (dicts)
        self.model_warning = None # the model's warning about them (str) or None

    @property
    def has_cfi(self):
        return bool(self.unwind and self.unwind["real"] and self.unwind["mapped_size"])

    def map_len(self):
        if self.unwind and self.unwind["mapped_size"]:
            return align(self.code_size, 8) + self.unwind["mapped_size"]
        return self.code_size


class JitdumpBuilder:
    def __init__(self, bo="<", version=1, total_size=HEADER_SIZE,
                 elf_mach=EM_X86_64, pad1=0, pid=4242, timestamp=1700000000123456,
                 flags=0, magic=MAGIC, header_extra=None, arch="x86_64"):
        if bo not in ("<", ">"):
            raise ValueError("byte order must be '<' or '>'")
        self.bo = bo
        self.arch = arch
        self.hdr = dict(version=version, total_size=total_size, elf_mach=elf_mach,
                        pad1=pad1, pid=pid, timestamp=timestamp, flags=flags)
        head = struct.pack(bo + "IIIIIIQQ", magic, version, total_size, elf_mach,
                           pad1, pid, timestamp, flags)
        if header_extra is None:
            header_extra = bytes((0xA5 + i) & 0xFF for i in range(max(0, total_size - HEADER_SIZE)))
        self.buf = bytearray(head + header_extra)
        self.records = []
        self.funcs = []
        self._ts = 1000
        self._pending_debug = None
        self._pending_unwind = None
        self._pending_inline = None

    # -- low level ------------------------------------------------------
    @property
    def offset(self):
        return len(self.buf)

    def u32(self, v):
        return struct.pack(self.bo + "I", v & 0xFFFFFFFF)

    def u64(self, v):
        return struct.pack(self.bo + "Q", v & 0xFFFFFFFFFFFFFFFF)

    def next_ts(self):
        self._ts += 1000
        return self._ts

    def raw(self, data):
        """Escape hatch: append arbitrary bytes."""
        rec = Rec("RAW", None, self.offset, len(data), None)
        self.buf += data
        return rec

    def header_json(self):
        d = dict(self.hdr)
        d["byte_order"] = "little" if self.bo == "<" else "big"
        return d

    def _record(self, kind, rid, payload, timestamp, total_size, pad_to=None,
                trailer=b""):
        body = payload + trailer
        size = PREFIX_SIZE + len(body)
        if pad_to:
            padded = align(size, pad_to)
            body += b"\x00" * (padded - size)
            size = padded
        ts = self.next_ts() if timestamp is None else timestamp
        ts_field = total_size if total_size is not None else size
        data = self.u32(rid) + self.u32(ts_field) + self.u64(ts) + body
        rec = Rec(kind, rid, self.offset, len(data), ts)
        rec.declared_size = ts_field
        self.buf += data
        self.records.append(rec)
        rec.json = dict(offset=rec.offset, type=kind, id=rid, size=ts_field,
                        timestamp=ts)
        return rec

    # -- records --------------------------------------------------------
    def load(self, name, code, code_addr, code_index, pid=None, tid=None,
             vma=None, code_size=None, timestamp=None, total_size=None,
             nul=True, trailer=b""):
        """LOAD.  code_size overrides the declared size (corrupt files);
        nul=False omits the name terminator."""
        pid = self.hdr["pid"] if pid is None else pid
        tid = pid + 1 if tid is None else tid
        vma = code_addr if vma is None else vma
        csize = len(code) if code_size is None else code_size
        payload = (self.u32(pid) + self.u32(tid) + self.u64(vma) + self.u64(code_addr)
                   + self.u64(csize) + self.u64(code_index) + name
                   + (b"\x00" if nul else b"") + trailer + code)
        rec = self._record("LOAD", JIT_CODE_LOAD, payload, timestamp, total_size)
        rec.json.update(pid=pid, tid=tid, vma=vma, code_addr=code_addr,
                        code_size=csize, code_index=code_index)
        try:
            rec.json["name"] = name.decode("utf-8")
        except UnicodeDecodeError:
            rec.json["name_hex"] = name.hex()
        rec.extra.update(name=name, code=code)
        f = Func(rec, name, code, code_addr, code_index, self._pending_debug,
                 self._pending_unwind)
        f.inline = self._pending_inline
        if f.inline:
            f.chains, f.model_warning = model_chains(f.inline, code_addr, len(code))
        self._pending_debug = None
        self._pending_unwind = None
        self._pending_inline = None
        self.funcs.append(f)
        return rec

    def move(self, code_index, old_code_addr, new_code_addr, code_size, pid=None,
             tid=None, vma=None, timestamp=None, total_size=None):
        pid = self.hdr["pid"] if pid is None else pid
        tid = pid + 1 if tid is None else tid
        vma = new_code_addr if vma is None else vma
        payload = (self.u32(pid) + self.u32(tid) + self.u64(vma) + self.u64(old_code_addr)
                   + self.u64(new_code_addr) + self.u64(code_size) + self.u64(code_index))
        rec = self._record("MOVE", JIT_CODE_MOVE, payload, timestamp, total_size)
        rec.json.update(pid=pid, tid=tid, vma=vma, old_code_addr=old_code_addr,
                        new_code_addr=new_code_addr, code_size=code_size,
                        code_index=code_index)
        return rec

    def debug_info(self, code_addr, entries, pad8=False, nr_entry=None,
                   timestamp=None, total_size=None, trailer=b"", expect_drop=False,
                   damaged=()):
        """DEBUG_INFO.  entries: (addr, line, discrim, filename_bytes[, nul]);
        filename b"\\xff" = same as previous.  nul=False leaves the name
        unterminated.  pad8 pads the record to 8 bytes like V8.  nr_entry
        overrides the count.  damaged: indices of entries whose file name is
        damaged (expected to come back as null).  expect_drop: the reader
        should drop the record (pending state not set)."""
        n = len(entries) if nr_entry is None else nr_entry
        payload = self.u64(code_addr) + self.u64(n)
        lines = []
        prev = None
        for i, e in enumerate(entries):
            addr, line, discrim, fname = e[:4]
            nul = e[4] if len(e) > 4 else True
            payload += self.u64(addr) + self.u32(line) + self.u32(discrim) + fname
            if nul:
                payload += b"\x00"
            resolved = prev if fname == SAME_FILE else fname
            if fname != SAME_FILE:
                prev = fname
            is_damaged = i in damaged
            lines.append(dict(addr=addr, line=line, discrim=discrim,
                              file=None if is_damaged else resolved,
                              raw_file=fname, damaged=is_damaged))
        rec = self._record("DEBUG_INFO", JIT_CODE_DEBUG_INFO, payload, timestamp,
                           total_size, pad_to=8 if pad8 else None, trailer=trailer)
        rec.json.update(code_addr=code_addr, nr_entry=n)
        rec.extra.update(lines=lines)
        if expect_drop:
            rec.optional_json = dict(offset=rec.offset, type="DEBUG_INFO")
            rec.json = None
        else:
            self._pending_debug = lines
        return rec

    def unwinding_info(self, eh_frame=b"", eh_frame_hdr=b"", mapped_size=None,
                       unwinding_size=None, eh_frame_hdr_size=None, pad8=True,
                       timestamp=None, total_size=None, expect_drop=False, real=None):
        """UNWINDING_INFO with blob [eh_frame][eh_frame_hdr].  Sizes can be
        overridden to write inconsistent records."""
        blob = eh_frame + eh_frame_hdr
        usize = len(blob) if unwinding_size is None else unwinding_size
        hsize = len(eh_frame_hdr) if eh_frame_hdr_size is None else eh_frame_hdr_size
        msize = usize if mapped_size is None else mapped_size
        payload = self.u64(usize) + self.u64(hsize) + self.u64(msize) + blob
        rec = self._record("UNWINDING_INFO", JIT_CODE_UNWINDING_INFO, payload,
                           timestamp, total_size, pad_to=8 if pad8 else None)
        rec.json.update(unwinding_size=usize, eh_frame_hdr_size=hsize, mapped_size=msize)
        if real is None:
            real = len(eh_frame) > 0
        if expect_drop:
            rec.optional_json = dict(offset=rec.offset, type="UNWINDING_INFO")
            rec.json = None
        else:
            self._pending_unwind = dict(unwinding_size=usize, hdr_size=hsize,
                                        mapped_size=msize, real=real,
                                        eh_frame=eh_frame, hdr=eh_frame_hdr)
        return rec

    def cfi_unwinding_info(self, code_addr, code_size, **kw):
        """UNWINDING_INFO with a real CIE+FDE for the function, V8 layout."""
        eh, hdr, _ = build_eh_frame(code_addr, code_size, self.bo, self.arch)
        return self.unwinding_info(eh, hdr, **kw)

    def add_reads(self, reads):
        """What a live dump holds at each of its reads, in turn: per read,
        (name, addr, time) for a 0x40-byte function with CFI (V8's layout:
        its LOAD's map covers its code and its CFI), (name, addr, time,
        size, False) for one without, ("UNLOAD", addr, time, size, index)
        for the UNLOAD of the index-th LOAD (from 1; the LOADs count from
        1 too) and ("MOVE", index, old, new, size, time).  -> (the dump's
        length after each read's records, each read's last time)."""
        ends, last, nload = [], [], 0
        for items in reads:
            for it in items:
                if it[0] == "UNLOAD":
                    self.unload(it[1], it[3], it[4], timestamp=it[2])
                    continue
                if it[0] == "MOVE":
                    self.move(it[1], it[2], it[3], it[4], timestamp=it[5])
                    continue
                name, addr, t = it[:3]
                size, cfi = it[3:] if len(it) > 3 else (0x40, True)
                nload += 1
                if cfi:
                    self.cfi_unwinding_info(addr, size, timestamp=t)
                code = x86_64_code(size, nload) if size >= 6 else b"\xc3" * size
                self.load(name.encode(), code, addr, nload, timestamp=t)
            ends.append(len(self.to_bytes()))
            last.append(max(it[5] if it[0] == "MOVE" else it[2] for it in items))
        return ends, last

    def empty_unwinding_info(self, **kw):
        """V8's record for code without CFI: 20-byte empty hdr, mapped_size 0."""
        kw.setdefault("mapped_size", 0)
        return self.unwinding_info(b"", empty_eh_frame_hdr(), real=False, **kw)

    def close(self, timestamp=None, total_size=None):
        return self._record("CLOSE", JIT_CODE_CLOSE, b"", timestamp, total_size)

    def inline_info(self, code_addr, strings, ranges, nr_strings=None, nr_ranges=None,
                    terminate=True, trailer=b"", timestamp=None, total_size=None,
                    drop=None):
        """INLINE_INFO (perfgraft's extension).  strings: bytes each (a NUL
        added; terminate=False leaves the last one without).  ranges:
        (off, len, frames[, nframes]) with frames (func, file, line) string
        indexes, innermost first; nframes overrides the count written.
        nr_strings / nr_ranges override the counts (nr_strings may be a
        function of the bytes after the fixed part).  drop: the reader's
        warning (after "FILE: offset N: ") when it must drop the record;
        a dropped record clears the pending INLINE_INFO."""
        body = b""
        for i, st in enumerate(strings):
            body += st
            if terminate or i + 1 < len(strings):
                body += b"\x00"
        for r in ranges:
            off, ln, frames = r[:3]
            n = r[3] if len(r) > 3 else len(frames)
            body += self.u32(off) + self.u32(ln) + self.u32(n)
            for fn, fl, line in frames:
                body += self.u32(fn) + self.u32(fl) + self.u32(line)
        body += trailer
        ns = len(strings) if nr_strings is None else nr_strings
        if callable(ns):
            ns = ns(len(body))
        nr = len(ranges) if nr_ranges is None else nr_ranges
        if drop is not None:
            drop = drop.format(ns=ns, nr=nr)
        payload = self.u64(code_addr) + self.u32(ns) + self.u32(nr) + body
        rec = self._record("INLINE_INFO", JIT_CODE_INLINE_INFO, payload, timestamp,
                           total_size)
        chains = []
        if drop is None:
            for off, ln, frames in (r[:3] for r in ranges):
                chains.append(dict(off=off, len=ln, frames=[
                    dict(func=strings[fn].decode("utf-8"),
                         file=None if fl == NO_FILE else strings[fl].decode("utf-8"),
                         line=line) for fn, fl, line in frames]))
        rec.json.update(code_addr=code_addr, nr_strings=ns & 0xFFFFFFFF,
                        nr_ranges=nr & 0xFFFFFFFF, dropped=drop is not None,
                        ranges=chains)
        rec.extra.update(drop=drop)
        self._pending_inline = None if drop else dict(rec=rec, code_addr=code_addr,
                                                      chains=chains)
        return rec

    def unload(self, code_addr, code_size, code_index, pid=None, tid=None,
               timestamp=None, total_size=None, trailer=b""):
        """UNLOAD (perfgraft's extension): the code of a LOAD is gone."""
        pid = self.hdr["pid"] if pid is None else pid
        tid = pid + 1 if tid is None else tid
        payload = (self.u32(pid) + self.u32(tid) + self.u64(code_addr)
                   + self.u64(code_size) + self.u64(code_index) + trailer)
        rec = self._record("UNLOAD", JIT_CODE_UNLOAD, payload, timestamp, total_size)
        rec.json.update(pid=pid, tid=tid, code_addr=code_addr, code_size=code_size,
                        code_index=code_index)
        return rec

    def unknown(self, rid, payload=b"", timestamp=None, total_size=None):
        rec = self._record("UNKNOWN", rid, payload, timestamp, total_size)
        return rec

    # -- output ---------------------------------------------------------
    def to_bytes(self):
        return bytes(self.buf)

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.buf)
        return path

    def without(self, leave_out):
        """The file with the records for which leave_out(rec) is true left
        out."""
        out = bytearray()
        pos = 0
        for r in self.records:
            if leave_out(r):
                out += self.buf[pos:r.offset]
                pos = r.end
        return bytes(out + self.buf[pos:])


def model_chains(inl, code_addr, code_size):
    """The chains of a pending INLINE_INFO the code model keeps for the LOAD
    at code_addr, and its warning (docs/jitdump-extensions.md): none when
    the record is for other code; else ranges that are empty, out of order,
    overlapping or outside the code dropped."""
    if not inl["chains"]:
        return [], None
    if inl["code_addr"] != code_addr:
        return [], ("INLINE_INFO is for code at 0x%x, the LOAD after it is at 0x%x; "
                    "chains dropped" % (inl["code_addr"], code_addr))
    kept, bad, end = [], 0, 0
    for c in inl["chains"]:
        if not c["len"] or c["off"] < end or c["off"] + c["len"] > code_size:
            bad += 1
            continue
        end = c["off"] + c["len"]
        kept.append(c)
    warn = None
    if bad:
        warn = ("INLINE_INFO has %d range%s that %s empty, outside the code or out of "
                "order; dropped" % (bad, "" if bad == 1 else "s", "is" if bad == 1 else "are"))
    return kept, warn


def inlined_dies(chains):
    """How many DW_TAG_inlined_subroutine entries the chains make: a chain
    right after the previous one (no gap) shares its outer levels that are
    the same function called from the same file and line."""
    n, prev_end, open_ = 0, None, []
    for c in chains:
        fr = c["frames"]
        top = min(len(fr) - 1, 64)
        levels = [(fr[top - 1 - k]["func"], fr[top - k]["file"] or "??", fr[top - k]["line"])
                  for k in range(top)]
        m = 0
        if c["off"] == prev_end:
            while m < min(len(open_), top) and open_[m] == levels[m]:
                m += 1
        n += top - m
        open_ = levels
        prev_end = c["off"] + c["len"]
    return n


# --------------------------------------------------------------------------
# Minimal reader, used to self-check the writer.

def parse(data):
    """Parses a well-formed jitdump: returns (header dict, list of records)."""
    magic = struct.unpack_from("<I", data, 0)[0]
    bo = "<" if magic == MAGIC else ">"
    if struct.unpack_from(bo + "I", data, 0)[0] != MAGIC:
        raise ValueError("bad magic")
    f = struct.unpack_from(bo + "IIIIIIQQ", data, 0)
    hdr = dict(version=f[1], total_size=f[2], elf_mach=f[3], pad1=f[4], pid=f[5],
               timestamp=f[6], flags=f[7],
               byte_order="little" if bo == "<" else "big")
    off = max(HEADER_SIZE, hdr["total_size"])
    recs = []
    while off + PREFIX_SIZE <= len(data):
        rid, size, ts = struct.unpack_from(bo + "IIQ", data, off)
        if size < PREFIX_SIZE or off + size > len(data):
            raise ValueError("bad record at %d" % off)
        body = data[off + PREFIX_SIZE: off + size]
        r = dict(offset=off, type=TYPE_NAMES.get(rid, "UNKNOWN"), id=rid, size=size,
                 timestamp=ts)
        if rid == JIT_CODE_LOAD:
            pid, tid, vma, ca, cs, ci = struct.unpack_from(bo + "IIQQQQ", body, 0)
            nul = body.index(b"\x00", 40)
            r.update(pid=pid, tid=tid, vma=vma, code_addr=ca, code_size=cs,
                     code_index=ci, name_bytes=body[40:nul], code=body[len(body) - cs:])
            assert len(body) - cs == nul + 1, "LOAD layout"
        elif rid == JIT_CODE_MOVE:
            v = struct.unpack_from(bo + "IIQQQQQ", body, 0)
            r.update(zip(("pid", "tid", "vma", "old_code_addr", "new_code_addr",
                          "code_size", "code_index"), v))
        elif rid == JIT_CODE_DEBUG_INFO:
            ca, n = struct.unpack_from(bo + "QQ", body, 0)
            p = 16
            lines = []
            for _ in range(n):
                a, ln, d = struct.unpack_from(bo + "QII", body, p)
                p += 16
                e = body.index(b"\x00", p)
                lines.append(dict(addr=a, line=ln, discrim=d, file=body[p:e]))
                p = e + 1
            assert p <= len(body)
            assert not body[p:].strip(b"\x00"), "DEBUG_INFO trailing bytes"
            r.update(code_addr=ca, nr_entry=n, lines=lines)
        elif rid == JIT_CODE_UNWINDING_INFO:
            us, hs, ms = struct.unpack_from(bo + "QQQ", body, 0)
            assert hs <= us and 24 + us <= len(body)
            blob = body[24:24 + us]
            r.update(unwinding_size=us, eh_frame_hdr_size=hs, mapped_size=ms,
                     eh_frame=blob[:us - hs], hdr=blob[us - hs:])
        elif rid == JIT_CODE_INLINE_INFO:
            ca, ns, nr = struct.unpack_from(bo + "QII", body, 0)
            p = 16
            strs = []
            for _ in range(ns):
                e = body.index(b"\x00", p)
                strs.append(body[p:e].decode("utf-8"))
                p = e + 1
            ranges = []
            for _ in range(nr):
                o, ln, n = struct.unpack_from(bo + "III", body, p)
                p += 12
                frames = []
                for _ in range(n):
                    fn, fl, line = struct.unpack_from(bo + "III", body, p)
                    p += 12
                    frames.append(dict(func=strs[fn], file=None if fl == NO_FILE else strs[fl],
                                       line=line))
                ranges.append(dict(off=o, len=ln, frames=frames))
            assert p == len(body), "INLINE_INFO trailing bytes"
            r.update(code_addr=ca, nr_strings=ns, nr_ranges=nr, dropped=False, ranges=ranges)
        elif rid == JIT_CODE_UNLOAD:
            v = struct.unpack_from(bo + "IIQQQ", body, 0)
            r.update(zip(("pid", "tid", "code_addr", "code_size", "code_index"), v))
        recs.append(r)
        off += size
    if off != len(data):
        raise ValueError("trailing %d bytes at %d" % (len(data) - off, off))
    return hdr, recs


# --------------------------------------------------------------------------
# The edge-case set.

BASE64 = 0x7F3A1C000000
BASE32 = 0x0A010000

FILE_FIB = b"/home/user/app/fib.js"
FILE_LIB = b"/home/user/app/lib/util.js"
FILE_WORK = b"/home/user/app/work.js"


class Expect(dict):
    """Expectation of one case (a dict with attribute access)."""
    __getattr__ = dict.get


def _expect(b, **kw):
    e = Expect(
        exit=0,                 # exit status of dump / elf
        error_offsets=None,     # fatal: allowed offsets in the message
        warn_offsets=[],        # each item: set of allowed offsets for one warning
        clean=False,            # no warnings at all
        header=b.header_json(),
        records=[r.json for r in b.records if r.json is not None],
        optional={r.offset: r.optional_json for r in b.records if r.json is None},
        funcs=list(b.funcs),
        arch=b.arch,
        bo=b.bo,
        line_bias=0,
        builder=b,
    )
    e.update(kw)
    return e


def _baseline(bo="<", elf_mach=EM_X86_64, arch="x86_64", base=BASE64, **hdr_kw):
    """3 functions, debug info for two, real CFI for one."""
    b = JitdumpBuilder(bo=bo, elf_mach=elf_mach, arch=arch, **hdr_kw)
    gen = i386_code if arch == "i386" else x86_64_code
    f0_addr, f0 = base + 0x40, gen(0x30, 0)
    f1_addr, f1 = base + 0x100, gen(0x45, 1)
    f2_addr, f2 = base + 0x200, gen(0x20, 2)
    b.debug_info(f0_addr, [
        (f0_addr + 0x0, 3, 0, FILE_FIB),
        (f0_addr + 0x4, 4, 0, SAME_FILE),
        (f0_addr + 0x12, 7, 0, SAME_FILE),
        (f0_addr + 0x20, 12, 0, FILE_LIB),
        (f0_addr + 0x2e, 13, 0, SAME_FILE),
    ])
    b.load(b"JS:*fib", f0, f0_addr, 0)
    b.debug_info(f1_addr, [
        (f1_addr + 0x0, 20, 0, FILE_WORK),
        (f1_addr + 0x10, 21, 0, SAME_FILE),
        (f1_addr + 0x30, 25, 0, FILE_FIB),
    ])
    b.cfi_unwinding_info(f1_addr, len(f1))
    b.load(b"JS:~work", f1, f1_addr, 1)
    b.load(b"Builtin:ArrayPrototypePush", f2, f2_addr, 2)
    return b


def cases(outdir):
    """Writes the edge-case dumps into outdir; returns {name: (path, Expect)}."""
    out = {}

    def emit(name, b, data=None, **kw):
        path = os.path.join(outdir, name + ".dump")
        with open(path, "wb") as f:
            f.write(b.to_bytes() if data is None else data)
        e = _expect(b, **kw)
        e.size = os.path.getsize(path)
        out[name] = (path, e)
        return e

    # --- baselines ---------------------------------------------------------
    base = _baseline()
    emit("baseline_le64", base, clean=True)
    emit("baseline_be_ppc64", _baseline(">", EM_PPC64, "ppc64"), clean=True,
         twin="baseline_le64")
    emit("baseline_be_s390", _baseline(">", EM_S390, "ppc64"), clean=True,
         twin="baseline_le64")
    emit("baseline_le32_i386", _baseline("<", EM_386, "i386", BASE32), clean=True)

    # --- MOVE and CLOSE ----------------------------------------------------
    b = JitdumpBuilder()
    a0, c0 = BASE64 + 0x1000, x86_64_code(0x28, 7)
    b.load(b"JS:*moved", c0, a0, 0)
    b.load(b"JS:*stays", x86_64_code(0x18, 8), BASE64 + 0x1080, 1)
    b.move(0, a0, BASE64 + 0x5000, len(c0))
    b.close()
    emit("move_close", b, clean=True)

    # --- truncation --------------------------------------------------------
    full = base.to_bytes()
    cuts = {}
    for c in (0, 1, 4, 8, 20, 39):
        cuts[c] = ("header",)
    cuts[HEADER_SIZE] = ("boundary", None)
    for r in base.records:
        for k in (0, 1, 8, 15, 16, r.size // 2, r.size - 1):
            c = r.offset + k
            if k == 0:
                cuts[c] = ("boundary", r)
            elif 0 < k < r.size:
                cuts[c] = ("inside", r)
    cuts[len(full)] = ("boundary", None)
    for c in sorted(cuts):
        kind = cuts[c][0]
        name = "trunc_%05d" % c
        complete = [r for r in base.records if r.end <= c]
        done = set(id(r) for r in complete)
        funcs = [f for f in base.funcs if id(f.rec) in done]
        recs = [r.json for r in complete]
        if kind == "header":
            emit(name, base, full[:c], exit=1, error_offsets={0, c}, records=[], funcs=[],
                 cut=c, cut_kind=kind)
        elif kind == "boundary":
            emit(name, base, full[:c], records=recs, funcs=funcs, cut=c, cut_kind=kind,
                 clean=None, no_warn_at=c, nloads=len(funcs))
        else:
            r = cuts[c][1]
            emit(name, base, full[:c], records=recs, funcs=funcs, cut=c, cut_kind=kind,
                 warn_offsets=[{r.offset}], nloads=len(funcs))

    # --- absurd sizes and counts --------------------------------------------
    def two_loads(b, base_addr=BASE64 + 0x2000):
        b.load(b"JS:*one", x86_64_code(0x20, 1), base_addr, 0)
        b.load(b"JS:*two", x86_64_code(0x20, 2), base_addr + 0x40, 1)

    # record total_size < 16 (8 and 0): fatal
    for ts in (0, 8, 15):
        b = JitdumpBuilder()
        two_loads(b)
        bad = b.raw(b.u32(JIT_CODE_LOAD) + b.u32(ts) + b.u64(12345) + b"\x00" * 40)
        emit("rec_size_%d" % ts, b, exit=1, error_offsets={bad.offset, bad.offset + 4})

    # total_size 0xffffffff: runs past EOF, truncated tail
    b = JitdumpBuilder()
    two_loads(b)
    bad = b.load(b"JS:*huge", x86_64_code(0x20, 3), BASE64 + 0x3000, 2,
                 total_size=0xFFFFFFFF)
    b.load(b"JS:*after", x86_64_code(0x20, 4), BASE64 + 0x3100, 3)
    n_before = 2
    emit("rec_size_ffffffff", b, warn_offsets=[{bad.offset}],
         records=[r.json for r in b.records[:2]], funcs=b.funcs[:2], nloads=n_before)

    # record size below the type's fixed size: fatal
    for kind, fixed in (("LOAD", LOAD_FIXED), ("MOVE", MOVE_FIXED),
                        ("DEBUG_INFO", DEBUG_FIXED), ("UNWINDING_INFO", UNWIND_FIXED)):
        b = JitdumpBuilder()
        two_loads(b)
        rid = {"LOAD": 0, "MOVE": 1, "DEBUG_INFO": 2, "UNWINDING_INFO": 4}[kind]
        size = fixed - 8
        bad = b.raw(b.u32(rid) + b.u32(size) + b.u64(5555) + b"\x00" * (size - 16))
        b.load(b"JS:*after", x86_64_code(0x20, 4), BASE64 + 0x3100, 2)
        emit("short_%s" % kind.lower(), b, exit=1, error_offsets={bad.offset, bad.offset + 4})

    # LOAD code_size larger than the record: fatal
    b = JitdumpBuilder()
    two_loads(b)
    bad = b.load(b"JS:*liar", x86_64_code(0x20, 5), BASE64 + 0x3000, 2,
                 code_size=0x1000)
    b.load(b"JS:*after", x86_64_code(0x20, 4), BASE64 + 0x3100, 3)
    emit("load_code_size_overrun", b, exit=1,
         error_offsets={bad.offset, bad.offset + PREFIX_SIZE + 24})

    # LOAD name without NUL inside its record (code_size 0 so name runs to end): fatal
    b = JitdumpBuilder()
    two_loads(b)
    bad = b.load(b"JS:*unterminated", b"", BASE64 + 0x3000, 2, nul=False)
    b.load(b"JS:*after", x86_64_code(0x20, 4), BASE64 + 0x3100, 3)
    emit("load_name_unterminated", b, exit=1,
         error_offsets={bad.offset, bad.offset + LOAD_FIXED})

    # DEBUG_INFO nr_entry = 2^60: warning, dropped
    b = JitdumpBuilder()
    a = BASE64 + 0x4000
    bad = b.debug_info(a, [(a, 1, 0, FILE_FIB), (a + 8, 2, 0, SAME_FILE)],
                       nr_entry=1 << 60, expect_drop=True)
    b.load(b"JS:*nodebug", x86_64_code(0x20, 1), a, 0)
    b.debug_info(a + 0x40, [(a + 0x40, 5, 0, FILE_LIB), (a + 0x48, 6, 0, SAME_FILE)])
    b.load(b"JS:*withdebug", x86_64_code(0x20, 2), a + 0x40, 1)
    emit("debug_nr_entry_huge", b, warn_offsets=[{bad.offset, bad.offset + PREFIX_SIZE + 8}])

    # DEBUG_INFO entries overrunning the record (last name without NUL)
    b = JitdumpBuilder()
    bad = b.debug_info(a, [(a, 1, 0, FILE_FIB), (a + 8, 2, 0, b"/no/terminator.js", False)],
                       expect_drop=True)
    b.load(b"JS:*nodebug", x86_64_code(0x20, 1), a, 0)
    b.debug_info(a + 0x40, [(a + 0x40, 5, 0, FILE_LIB), (a + 0x48, 6, 0, SAME_FILE)])
    b.load(b"JS:*withdebug", x86_64_code(0x20, 2), a + 0x40, 1)
    emit("debug_name_overrun", b, warn_offsets=[set(range(bad.offset, bad.end))])

    # DEBUG_INFO nr_entry one more than present (entry fixed part overruns)
    b = JitdumpBuilder()
    bad = b.debug_info(a, [(a, 1, 0, FILE_FIB), (a + 8, 2, 0, SAME_FILE)],
                       nr_entry=3, expect_drop=True)
    b.load(b"JS:*nodebug", x86_64_code(0x20, 1), a, 0)
    b.load(b"JS:*plain", x86_64_code(0x20, 2), a + 0x40, 1)
    emit("debug_nr_entry_plus1", b, warn_offsets=[set(range(bad.offset, bad.end))])

    # UNWINDING_INFO eh_frame_hdr_size > unwinding_size: warning, dropped
    b = JitdumpBuilder()
    code = x86_64_code(0x30, 1)
    eh, hdr, _ = build_eh_frame(a, len(code))
    bad = b.unwinding_info(eh, hdr, eh_frame_hdr_size=len(eh) + len(hdr) + 8,
                           expect_drop=True)
    b.load(b"JS:*nocfi", code, a, 0)
    b.load(b"JS:*plain", x86_64_code(0x20, 2), a + 0x100, 1)
    emit("unwind_hdr_gt_size", b, warn_offsets=[{bad.offset, bad.offset + PREFIX_SIZE + 8}])

    # UNWINDING_INFO unwinding_size larger than the record: warning, dropped
    b = JitdumpBuilder()
    bad = b.unwinding_info(eh, hdr, unwinding_size=0x10000, expect_drop=True)
    b.load(b"JS:*nocfi", code, a, 0)
    b.load(b"JS:*plain", x86_64_code(0x20, 2), a + 0x100, 1)
    emit("unwind_size_gt_record", b, warn_offsets=[{bad.offset, bad.offset + PREFIX_SIZE}])

    # --- names -----------------------------------------------------------------
    b = JitdumpBuilder()
    names = [b"JS:*caf\xe9/\xff\xfe", b"../../x", b"a/b/c", b"/etc/passwd",
             b"../../../../../../tmp/perfgraft-evil", b"tab\tnew\nline\\back", b"."]
    for i, n in enumerate(names):
        b.load(n, x86_64_code(0x20, i), BASE64 + 0x6000 + 0x40 * i, i)
    emit("names", b, clean=True)

    # --- versions, magic, unknown ids, long header ------------------------------
    b2 = _baseline(version=2)
    emit("version_2", b2, warn_offsets=[{0, 4}])
    b7 = _baseline(version=7)
    emit("version_7", b7, exit=1, error_offsets={0, 4})
    bm = JitdumpBuilder(magic=0x4A695445)
    two_loads(bm)
    emit("bad_magic", bm, exit=1, error_offsets={0})
    # magic bytes of a perf.data file
    bp = JitdumpBuilder()
    data = b"PERFILE2" + bp.to_bytes()[8:]
    # dump detects the perf.data magic and fails at its header size (offset 8);
    # elf, which reads only jitdumps, fails at the magic (offset 0)
    emit("bad_magic_perfile", bp, data, exit=1, error_offsets={0, 8})

    b = JitdumpBuilder()
    b.load(b"JS:*first", x86_64_code(0x20, 1), BASE64 + 0x7000, 0)
    unk = b.unknown(9, b"\x11" * 24)
    b.load(b"JS:*second", x86_64_code(0x20, 2), BASE64 + 0x7040, 1)
    unk.optional_json, unk.json = unk.json, None
    emit("unknown_id_9", b, warn_offsets=[{unk.offset}])

    b = _baseline(total_size=48)
    emit("header_48", b, clean=True)

    # --- V8-like --------------------------------------------------------------
    b, warn = _v8_like()
    emit("v8_damaged_names", b, line_bias=V8_LINE_BIAS_64, warn_offsets=warn, v8=True)

    # --- perfgraft's extension records -----------------------------------------
    for lay in EXT_LAYOUTS:
        for name, b, kw in _ext_cases(lay):
            emit("ext_%s_%s" % (name, lay[0]), b, **kw)
    return out


# --------------------------------------------------------------------------
# perfgraft's extension records, INLINE_INFO and UNLOAD
# (docs/jitdump-extensions.md), in three layouts.  Each case's Expect has
# ext=True and: warns, the reader's warnings [(offset, message)] (dump and
# elf); model_warns, the code model's (elf only); summary, dump --json's
# summary; error (offset, message) for the fatal ones; each Func's chains
# (what the model keeps) and dies (DW_TAG_inlined_subroutine entries).

EXT_LAYOUTS = (("le64", "<", EM_X86_64, "x86_64", BASE64),
               ("be64", ">", EM_PPC64, "ppc64", BASE64),
               ("le32", "<", EM_386, "i386", BASE32))

FILE_A = b"/src/app/a.js"
FILE_B = b"/src/app/b.js"
FILE_L = b"/src/app/lib.js"


def _summary(b, extra_records=0):
    """dump --json's summary of the builder's records (extra_records: one
    more record counted, as the reader does for the one it fails at)."""
    recs = b.records

    def cnt(k):
        return sum(1 for r in recs if r.kind == k)
    lines = sum(r.json["nr_entry"] for r in recs if r.kind == "DEBUG_INFO" and r.json)
    return dict(records=len(recs) + extra_records, loads=cnt("LOAD"), moves=cnt("MOVE"),
                debug_infos=cnt("DEBUG_INFO"), unwinding_infos=cnt("UNWINDING_INFO"),
                closes=cnt("CLOSE"), unknown=cnt("UNKNOWN"), lines=lines, damaged_names=0,
                truncated_bytes=0, inline_infos=cnt("INLINE_INFO"), unloads=cnt("UNLOAD"))


def _ext_expect(b, skipped=()):
    """skipped: (offset, warning) of records the reader skips that are not
    in b.records (raw bytes), each counted as a record."""
    warns = sorted([(r.offset, r.extra["drop"]) for r in b.records
                    if r.kind == "INLINE_INFO" and r.extra.get("drop")] + list(skipped))
    model = [(f.inline["rec"].offset, f.model_warning) for f in b.funcs if f.model_warning]
    for f in b.funcs:
        f.dies = inlined_dies(f.chains)
    kw = dict(ext=True, warns=warns, model_warns=model, clean=not warns and not model,
              warn_offsets=[{o} for o, _ in warns], model_warn_offsets=[{o} for o, _ in model],
              summary=_summary(b, len(skipped)), skipped=list(skipped))
    return kw


def _ext_valid(b, gen, base):
    """Depth 2 and 3 chains sharing strings, a file 0xffffffff, adjacent
    chains sharing a level, INLINE_INFO before and after the DEBUG_INFO,
    UNLOADs, an INLINE_INFO that no LOAD follows."""
    a1, a2, a3 = base + 0x9000, base + 0x9080, base + 0x9100
    out, hlp, leaf, fa, fl = range(5)
    b.inline_info(a1, [b"JS:*outer1", b"helper", b"leaf", FILE_A, FILE_L], [
        (0x08, 0x08, [(leaf, fl, 200), (out, fa, 11)]),
        (0x18, 0x08, [(leaf, fl, 201), (hlp, fl, 101), (out, fa, 12)]),
        (0x20, 0x08, [(hlp, fl, 105), (out, fa, 12)]),     # shares the helper level
        (0x30, 0x10, [(leaf, NO_FILE, 202), (out, NO_FILE, 15)]),
    ])
    b.debug_info(a1, [(a1, 10, 0, FILE_A), (a1 + 0x08, 200, 0, FILE_L),
                      (a1 + 0x10, 11, 0, FILE_A), (a1 + 0x18, 201, 0, FILE_L),
                      (a1 + 0x20, 105, 0, SAME_FILE), (a1 + 0x28, 13, 0, FILE_A),
                      (a1 + 0x30, 202, 0, FILE_L), (a1 + 0x40, 16, 0, FILE_A)])
    b.load(b"JS:*outer1", gen(0x60, 0x21), a1, 0)
    leaf, hlp, fl, out, fb = range(5)
    b.debug_info(a2, [(a2, 20, 0, FILE_B), (a2 + 0x04, 300, 0, FILE_L),
                      (a2 + 0x10, 301, 0, SAME_FILE), (a2 + 0x18, 22, 0, FILE_B)])
    b.inline_info(a2, [b"leaf", b"helper", FILE_L, b"JS:*outer2", FILE_B], [
        (0x04, 0x0c, [(leaf, fl, 300), (hlp, fl, 110), (out, fb, 21)]),
        (0x10, 0x08, [(leaf, fl, 301), (hlp, fl, 111), (out, fb, 21)]),
    ])
    b.load(b"JS:*outer2", gen(0x40, 0x22), a2, 1)
    b.unload(a1, 0x60, 0, tid=7)
    b.load(b"JS:*plain", gen(0x20, 0x23), a3, 2)
    b.unload(a3, 0x20, 2)
    b.inline_info(a3 + 0x100, [b"JS:*never", b"inl"], [(0, 4, [(1, NO_FILE, 2), (0, NO_FILE, 1)])])


_STRS = [b"JS:*victim", b"inl", FILE_A, FILE_L]
_G = (0, 8, [(1, 3, 5), (0, 2, 1)])

# name: (inline_info keyword arguments, the reader's warning)
_DAMAGED = {
    "str_count": (dict(strings=_STRS, ranges=[_G], nr_strings=lambda n: n + 1),
                  "INLINE_INFO string count does not fit: {ns}; record dropped"),
    "str_unterminated": (dict(strings=_STRS, ranges=[], terminate=False),
                         "INLINE_INFO string runs past the end of its record: string 3; "
                         "record dropped"),
    "range_count": (dict(strings=_STRS, ranges=[_G], nr_ranges=2),
                    "INLINE_INFO range count does not fit: 2; record dropped"),
    "range_frames_past": (dict(strings=_STRS, ranges=[_G + (4,)]),
                          "INLINE_INFO range runs past the end of its record: range 0; "
                          "record dropped"),
    "range_header_past": (dict(strings=_STRS, ranges=[(0, 8, [(1, 3, 5)] * 5 + [(0, 2, 1)])],
                               nr_ranges=2),
                          "INLINE_INFO range runs past the end of its record: range 1; "
                          "record dropped"),
    # one 1-frame range fills less than the smallest range (2 frames)
    "nframes_1_tight": (dict(strings=_STRS, ranges=[(0, 8, [(0, 2, 1)])]),
                        "INLINE_INFO range count does not fit: 1; record dropped"),
    "nframes_1": (dict(strings=_STRS, ranges=[_G, (0x10, 8, [(0, 2, 1)])],
                       trailer=b"\x00" * 12),
                  "INLINE_INFO range has a frame count out of 2..1024: 1; record dropped"),
    "nframes_1025": (dict(strings=_STRS, ranges=[_G + (1025,)]),
                     "INLINE_INFO range has a frame count out of 2..1024: 1025; "
                     "record dropped"),
    "nframes_0": (dict(strings=_STRS, ranges=[_G + (0,)]),
                  "INLINE_INFO range has a frame count out of 2..1024: 0; record dropped"),
    "func_index": (dict(strings=_STRS, ranges=[(0, 8, [(4, 3, 5), (0, 2, 1)])]),
                   "INLINE_INFO frame names a string that is not there: index 4; "
                   "record dropped"),
    "func_no_string": (dict(strings=_STRS, ranges=[(0, 8, [(NO_FILE, 3, 5), (0, 2, 1)])]),
                       "INLINE_INFO frame names a string that is not there: index "
                       "4294967295; record dropped"),
    "file_index": (dict(strings=_STRS, ranges=[_G, (0x10, 8, [(1, 0xFFFFFFFE, 5), (0, 2, 1)])]),
                   "INLINE_INFO frame names a string that is not there: index 4294967294; "
                   "record dropped"),
}

_HOST = [b"JS:*host", b"inl", FILE_A, FILE_L, b"deeper"]
_G0 = (0x00, 8, [(1, 3, 5), (0, 2, 1)])
_G1 = (0x10, 8, [(1, 3, 6), (0, 2, 2)])
_G2 = (0x20, 8, [(4, 3, 7), (1, 3, 8), (0, 2, 3)])

# name: ranges of an INLINE_INFO for a 0x40-byte LOAD (the model drops the bad)
_MODEL = {
    "range_empty": [_G0, (0x08, 0, _G0[2]), _G1],
    "range_overlap": [_G0, (0x04, 8, _G0[2]), _G1],
    "range_order": [_G1, _G0],
    "range_outside": [_G0, (0x30, 0x11, _G0[2]), (0x38, 8, _G0[2])],
    "ranges_mixed": [_G0, (0x08, 0, _G0[2]), _G1, (0x14, 8, _G1[2]), (0x04, 2, _G0[2]), _G2,
                     (0x3C, 8, _G0[2]), (0xFFFFFFF0, 0x20, _G0[2])],
}


def short_record(b, rid, size, timestamp=5555):
    """The bytes of a record of id rid and total_size size (>= 16) whose
    body is zeros: an extension record shorter than its fixed part."""
    return b.u32(rid) + b.u32(size) + b.u64(timestamp) + b"\x00" * (size - PREFIX_SIZE)


def _ext_cases(lay):
    """[(name, builder, emit keywords)] of one layout."""
    _, bo, mach, arch, base = lay
    gen = i386_code if arch == "i386" else x86_64_code
    res = []

    def new():
        return JitdumpBuilder(bo=bo, elf_mach=mach, arch=arch)

    b = new()
    _ext_valid(b, gen, base)
    res.append(("valid", b, _ext_expect(b)))

    a = base + 0xA000

    def victim(b, write):
        """write(b) puts the INLINE_INFO(s) for the LOAD at a; a good
        INLINE_INFO + LOAD and an UNLOAD follow."""
        write(b)
        b.debug_info(a, [(a, 1, 0, FILE_A), (a + 8, 2, 0, SAME_FILE)])
        b.load(b"JS:*victim", gen(0x20, 0x31), a, 0)
        b.inline_info(a + 0x40, [b"JS:*after", b"inl", FILE_A],
                      [(0x4, 0x8, [(1, 2, 7), (0, 2, 3)])])
        b.debug_info(a + 0x40, [(a + 0x40, 3, 0, FILE_A), (a + 0x44, 7, 0, SAME_FILE),
                                (a + 0x4C, 4, 0, SAME_FILE)])
        b.load(b"JS:*after", gen(0x20, 0x32), a + 0x40, 1)
        b.unload(a, 0x20, 0)
        return b

    for name, (kw, msg) in _DAMAGED.items():
        b = victim(new(), lambda b: b.inline_info(a, drop=msg, **kw))
        res.append((name, b, _ext_expect(b)))

    # an empty one: nothing to drop
    b = victim(new(), lambda b: b.inline_info(a, [], []))
    res.append(("empty", b, _ext_expect(b)))

    # for other code than the next LOAD's
    b = victim(new(), lambda b: b.inline_info(a + 0x1000, _STRS, [_G]))
    res.append(("addr_mismatch", b, _ext_expect(b)))

    # two before one LOAD: the second wins (and a damaged one clears)
    def two(first_bad, second_bad):
        def write(b):
            b.inline_info(a, [b"JS:*victim", b"first_inl", FILE_A, FILE_L],
                          [(0, 8, [(7, 3, 5), (0, 2, 1)]) if first_bad else _G],
                          drop="INLINE_INFO frame names a string that is not there: "
                               "index 7; record dropped" if first_bad else None)
            if second_bad:
                b.inline_info(a, _STRS, [(0, 8, [(9, 3, 5), (0, 2, 1)])],
                              drop="INLINE_INFO frame names a string that is not there: "
                                   "index 9; record dropped")
            else:
                b.inline_info(a, [b"JS:*victim", b"second_inl", FILE_A, FILE_L],
                              [(0x8, 8, [(1, 3, 9), (0, 2, 2)])])
        return write
    for name, fb, sb in (("twice", False, False), ("twice_first_damaged", True, False),
                         ("twice_second_damaged", False, True)):
        b = victim(new(), two(fb, sb))
        res.append((name, b, _ext_expect(b)))

    # ranges the model drops
    for name, ranges in _MODEL.items():
        b = new()
        ha = base + 0xB000
        b.inline_info(ha, _HOST, ranges)
        b.debug_info(ha, [(ha + o, 1 + o, 0, FILE_A) for o in range(0, 0x40, 4)])
        b.load(b"JS:*host", gen(0x40, 0x41), ha, 0)
        b.load(b"JS:*plain", gen(0x20, 0x42), ha + 0x80, 1)
        res.append((name, b, _ext_expect(b)))

    # shorter than the fixed part: skipped with a warning, as perf skips
    # them, the rest of the dump used; the INLINE_INFO pending before one
    # still goes to the next LOAD
    for kind, rid, fixed in (("inline", JIT_CODE_INLINE_INFO, INLINE_FIXED),
                             ("unload", JIT_CODE_UNLOAD, UNLOAD_FIXED)):
        for size in (PREFIX_SIZE, fixed - 1):
            b = new()
            b.inline_info(a, [b"JS:*first", b"inl", FILE_A, FILE_L], [_G])
            b.debug_info(a, [(a, 1, 0, FILE_A), (a + 8, 2, 0, SAME_FILE)])
            b.load(b"JS:*first", gen(0x20, 0x51), a, 0)
            b.inline_info(a + 0x40, [b"JS:*after", b"inl", FILE_A],
                          [(0x4, 0x8, [(1, 2, 7), (0, 2, 3)])])
            b.debug_info(a + 0x40, [(a + 0x40, 3, 0, FILE_A), (a + 0x44, 7, 0, SAME_FILE),
                                    (a + 0x4C, 4, 0, SAME_FILE)])
            bad = b.raw(short_record(b, rid, size))
            b.load(b"JS:*after", gen(0x20, 0x52), a + 0x40, 1)
            msg = "%s record of %d bytes is smaller than its %d-byte fixed part; " \
                  "record skipped" % ("INLINE_INFO" if rid == JIT_CODE_INLINE_INFO
                                      else "UNLOAD", size, fixed)
            res.append(("short_%s_%d" % (kind, size), b,
                        _ext_expect(b, skipped=[(bad.offset, msg)])))
    return res


def damage_name(name, seed):
    """Node 20's damage: the first 16 bytes replaced by heap garbage (a
    tcache-style pointer with NUL high bytes and a random key), same length."""
    assert len(name) > 16
    seed &= 0xFFFF
    ptr = 0x000055D3A1B2C3D0 + 0x10 * seed
    key = 0x6E41D28B70331C9F ^ (seed * 0x0101010101)
    garbage = struct.pack("<QQ", ptr, key)
    assert b"\x00" in garbage
    return garbage + name[16:]


V8_SCRIPT = b"/home/user/project/src/fibonacci.js"
V8_INTERNAL = b"node:internal/modules/run_main"


def _v8_like():
    b = JitdumpBuilder(pad1=V8_PAD1, pid=31337, timestamp=1731000000123456)
    base = BASE64 + 0x10000
    bias = V8_LINE_BIAS_64

    def dbg(addr, pcs, fi):
        ents, damaged = [], []
        for i, (pc, line, col, fname, bad) in enumerate(pcs):
            ents.append((addr + pc + bias, line, col,
                         damage_name(fname, i + 8 * fi) if bad else fname))
            if bad:
                damaged.append(i)
        return ents, damaged

    funcs = [
        # name, size, debug rows (pc, line, column, file, damaged)
        (b"JS:*fib file:///home/user/project/src/fibonacci.js:3:13", 0x60, [
            (0x00, 3, 13, V8_SCRIPT, True),
            (0x0c, 4, 5, V8_SCRIPT, True),
            (0x21, 5, 12, V8_SCRIPT, True),
            (0x40, 6, 3, V8_SCRIPT, True)]),
        (b"JS:~runMain node:internal/modules/run_main:120:20", 0x40, [
            (0x00, 120, 20, V8_INTERNAL, False),
            (0x10, 121, 3, V8_INTERNAL, False),
            (0x28, 125, 7, V8_INTERNAL, False)]),
        (b"JS:*work file:///home/user/project/src/fibonacci.js:9:1", 0x50, [
            (0x00, 9, 1, V8_SCRIPT, True),
            (0x14, 10, 3, V8_INTERNAL, False),
            (0x20, 11, 9, V8_SCRIPT, True),
            (0x38, 12, 2, V8_INTERNAL, False)]),
        (b"Builtin:ArgumentsAdaptorTrampoline", 0x30, None),
    ]
    addr = base
    for i, (name, size, rows) in enumerate(funcs):
        code = x86_64_code(size, 0x40 + i)
        b.empty_unwinding_info()
        if rows:
            ents, damaged = dbg(addr, rows, i)
            b.debug_info(addr, ents, pad8=True, damaged=damaged)
        b.load(name, code, addr, i)
        addr += align(size, 16) + 0x40
    # warnings: one per DEBUG_INFO with damaged names (any offset inside it)
    warn = [set(range(r.offset, r.end)) for r in b.records
            if r.kind == "DEBUG_INFO" and any(l["damaged"] for l in r.extra["lines"])]
    return b, warn


def main(argv):
    outdir = argv[1] if len(argv) > 1 else "."
    cs = cases(outdir)
    for name, (path, e) in sorted(cs.items()):
        print("%-28s %6d bytes exit=%d %s" % (name, e.size, e.exit, path))
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main(sys.argv))
