#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Minimal, independent jitdump parser used as the test oracle.

Written from the format description only (no code shared with the C
reader).  Standard library only.

    dump = parse(path_or_bytes)
    dump.header           dict: magic, version, total_size, elf_mach, pad1,
                          pid, timestamp, flags, byteorder ('<' or '>')
    dump.loads            list of Load (in file order)
    dump.counts           dict: record id -> number of records
    dump.damaged_entries  number of DEBUG_INFO entries whose file name was
                          damaged (file is None)

Rules followed (see the jitdump notes, sections 1.2-1.6 and 1.8):
  * byte order from the magic (0x4A695444 natively written);
  * records are walked by their total_size; a record shorter than its
    prefix or running past the end of the file ends the walk (truncated
    tail, recorded in dump.truncated_bytes);
  * DEBUG_INFO and UNWINDING_INFO are pending state, attached to the next
    LOAD (a later one of the same kind replaces an unconsumed earlier one);
  * DEBUG_INFO entries are walked by nr_entry and bounded by the record,
    never by the record's byte count alone; a record whose entries do not
    fit is dropped (dump.dropped_debug);
  * node writes some file names with their first 16 bytes replaced by
    heap garbage that may contain NUL bytes (a name shorter than 16 bytes
    is all garbage, its real NUL among them).  When the NUL found by
    strlen is not followed by a plausible next entry (address within
    [code_addr - 64 KiB, code_addr + 1 GiB) of the record's code_addr:
    BeamAsm writes rows a little before the code; line number below
    2^24), the walk resyncs on the first later NUL that is, and the
    entry's file is None.
    For the last entry the name ends at the first NUL after which the rest
    of the record is zero padding.  A name with control bytes is damaged
    too.  "\\xff" means "same file as the previous entry" (None if that
    one was damaged).

What perfgraft's code model makes of the names (issue 22), for oracles
of its outputs: perf_file_name() and symbol_name().
"""

import bisect
import struct
import sys

MAGIC = 0x4A695444
LOAD, MOVE, DEBUG_INFO, CLOSE, UNWINDING_INFO = 0, 1, 2, 3, 4
RECORD_NAMES = {LOAD: "LOAD", MOVE: "MOVE", DEBUG_INFO: "DEBUG_INFO",
                CLOSE: "CLOSE", UNWINDING_INFO: "UNWINDING_INFO"}
PLAUSIBLE_SPAN = 1 << 30          # 1 GiB
PLAUSIBLE_BEFORE = 1 << 16        # rows this close before the code are real
V8_LINE_BIAS = 0x40               # V8 (64-bit) adds this to line addresses


class JitdumpError(Exception):
    pass


class Entry:
    __slots__ = ("addr", "line", "discrim", "file", "raw_name", "damaged")

    def __init__(self, addr, line, discrim, file, raw_name, damaged):
        self.addr = addr
        self.line = line
        self.discrim = discrim
        self.file = file          # str, or None when damaged
        self.raw_name = raw_name  # bytes as written (without the NUL)
        self.damaged = damaged

    def __repr__(self):
        return "Entry(0x%x, %d, %d, %r)" % (self.addr, self.line,
                                            self.discrim, self.file)


class DebugInfo:
    def __init__(self, offset, timestamp, code_addr, entries):
        self.offset = offset
        self.timestamp = timestamp
        self.code_addr = code_addr
        self.entries = entries


class Unwind:
    def __init__(self, offset, timestamp, unwinding_size, eh_frame_hdr_size,
                 mapped_size, data):
        self.offset = offset
        self.timestamp = timestamp
        self.unwinding_size = unwinding_size
        self.eh_frame_hdr_size = eh_frame_hdr_size
        self.mapped_size = mapped_size
        self.data = data    # unwinding_size bytes: [eh_frame][eh_frame_hdr]

    @property
    def eh_frame(self):
        return self.data[:self.unwinding_size - self.eh_frame_hdr_size]

    @property
    def eh_frame_hdr(self):
        return self.data[self.unwinding_size - self.eh_frame_hdr_size:]


class Load:
    def __init__(self, offset, timestamp, pid, tid, vma, code_addr,
                 code_size, code_index, name, code, debug, unwind):
        self.offset = offset
        self.timestamp = timestamp
        self.pid = pid
        self.tid = tid
        self.vma = vma
        self.code_addr = code_addr
        self.code_size = code_size
        self.code_index = code_index
        self.name = name            # bytes, without the NUL
        self.code = code            # bytes, code_size long
        self.debug = debug          # DebugInfo or None
        self.unwind = unwind        # Unwind or None

    @property
    def has_cfi(self):
        """Real CFI: an UNWINDING_INFO with mapped_size != 0 and FDE bytes."""
        u = self.unwind
        return (u is not None and u.mapped_size != 0
                and u.unwinding_size > u.eh_frame_hdr_size)

    def __repr__(self):
        return "Load(#%d %r 0x%x+%d)" % (self.code_index, self.name,
                                         self.code_addr, self.code_size)


class Dump:
    def __init__(self):
        self.header = {}
        self.loads = []
        self.moves = []
        self.counts = {}
        self.debug_infos = []
        self.unwinds = []
        self.damaged_entries = 0
        self.damaged_debug_infos = 0
        self.dropped_debug = 0
        self.dropped_unwind = 0
        self.dropped_loads = 0
        self.truncated_bytes = 0
        self.size = 0

    @property
    def line_bias(self):
        return V8_LINE_BIAS if self.header.get("pad1") == 0xDEADBEEF else 0


def _is_control(name):
    return any(b < 0x20 or b == 0x7F for b in name)


def _plausible(buf, pos, end, bo, code_addr):
    """Does an entry header that starts at pos look real?  Its address is
    within [code_addr - 64 KiB, code_addr + 1 GiB) and its line number
    below 2^24."""
    if pos + 16 > end:
        return False
    a, line = struct.unpack_from(bo + "QI", buf, pos)
    return (code_addr - PLAUSIBLE_BEFORE <= a < code_addr + PLAUSIBLE_SPAN
            and line < (1 << 24))


def _is_ctl(b):
    return b < 0x20 or b == 0x7F


def perf_file_name(name):
    """The file name perfgraft's code model gives a row whose producer
    wrote name (bytes or a surrogateescape str; the same type back).  perf
    reads addr2line's FILE:LINE up to the first ':', so: a local file:///
    URL becomes its path, its %XX escapes decoded unless into a control
    byte or a ':'; any other ':' becomes %3A; a control byte becomes '?'.
    None stays None."""
    if name is None:
        return None
    as_str = isinstance(name, str)
    raw = name.encode("utf-8", "surrogateescape") if as_str else bytes(name)
    url = raw.startswith(b"file:///")
    if url:
        raw = raw[len(b"file://"):]
    out = bytearray()
    i = 0
    while i < len(raw):
        c = raw[i]
        esc = raw[i + 1:i + 3]
        if (url and c == ord("%") and len(esc) == 2 and
                all(chr(x) in "0123456789abcdefABCDEF" for x in esc)):
            v = int(esc, 16)
            if not _is_ctl(v) and v != ord(":"):
                out.append(v)
                i += 3
                continue
        if c == ord(":"):
            out += b"%3A"
        elif _is_ctl(c):
            out += b"?"
        else:
            out.append(c)
        i += 1
    out = bytes(out)
    return out.decode("utf-8", "surrogateescape") if as_str else out


def symbol_name(name):
    """A LOAD's name as perfgraft's code model gives it (symbols, --list):
    each control byte becomes '?' (a terminal would act on it)."""
    return bytes(ord("?") if _is_ctl(b) else b for b in name)


def _parse_entries(buf, start, end, bo, code_addr, nr_entry):
    """Returns (entries, damaged_count) or raises JitdumpError."""
    entries = []
    damaged_count = 0
    pos = start
    prev_file = None
    for i in range(nr_entry):
        if pos + 16 > end:
            raise JitdumpError("entry %d header past record end" % i)
        addr, line, discrim = struct.unpack_from(bo + "QII", buf, pos)
        name_start = pos + 16
        first_nul = buf.find(b"\0", name_start, end)
        if first_nul < 0:
            raise JitdumpError("entry %d name not terminated" % i)
        last = (i == nr_entry - 1)
        nul = -1
        q = first_nul
        while 0 <= q < end:
            if last:
                if not any(buf[q + 1:end]):
                    nul = q
                    break
            elif _plausible(buf, q + 1, end, bo, code_addr):
                nul = q
                break
            q = buf.find(b"\0", q + 1, end)
        if nul < 0:
            raise JitdumpError("entry %d: no resync point" % i)
        raw = bytes(buf[name_start:nul])
        damaged = nul != first_nul or _is_control(raw)
        if damaged:
            file = None
        elif raw == b"\xff":
            file = prev_file
        else:
            file = raw.decode("utf-8", "surrogateescape")
        if file is None:
            damaged_count += 1
            damaged = True
        entries.append(Entry(addr, line, discrim, file, raw, damaged))
        prev_file = file
        pos = nul + 1
    return entries, damaged_count


def parse(src):
    """Parses a jitdump file (path, bytes or bytearray)."""
    if isinstance(src, (bytes, bytearray, memoryview)):
        buf = bytes(src)
    else:
        with open(src, "rb") as f:
            buf = f.read()
    d = Dump()
    d.size = len(buf)
    if len(buf) < 40:
        raise JitdumpError("file shorter than a header")
    (m,) = struct.unpack_from("<I", buf, 0)
    if m == MAGIC:
        bo = "<"
    elif struct.unpack_from(">I", buf, 0)[0] == MAGIC:
        bo = ">"
    else:
        raise JitdumpError("bad magic 0x%08x" % m)
    (magic, version, total_size, elf_mach, pad1, pid, timestamp,
     flags) = struct.unpack_from(bo + "IIIIIIQQ", buf, 0)
    d.header = dict(magic=magic, version=version, total_size=total_size,
                    elf_mach=elf_mach, pad1=pad1, pid=pid,
                    timestamp=timestamp, flags=flags, byteorder=bo)
    if total_size < 40 or total_size > len(buf):
        raise JitdumpError("bad header size %d" % total_size)
    off = total_size
    pend_debug = None
    pend_unwind = None
    while off < len(buf):
        if off + 16 > len(buf):
            d.truncated_bytes = len(buf) - off
            break
        rid, size, ts = struct.unpack_from(bo + "IIQ", buf, off)
        if size < 16 or off + size > len(buf):
            d.truncated_bytes = len(buf) - off
            break
        end = off + size
        d.counts[rid] = d.counts.get(rid, 0) + 1
        body = off + 16
        if rid == LOAD:
            if size < 16 + 40:
                d.dropped_loads += 1
            else:
                (lpid, tid, vma, code_addr, code_size,
                 code_index) = struct.unpack_from(bo + "IIQQQQ", buf, body)
                name_start = body + 40
                code_start = end - code_size
                if code_size > size - 56:
                    nul = -1
                else:
                    nul = buf.find(b"\0", name_start, code_start)
                if nul < 0:
                    d.dropped_loads += 1
                else:
                    ld = Load(off, ts, lpid, tid, vma, code_addr, code_size,
                              code_index, bytes(buf[name_start:nul]),
                              bytes(buf[code_start:end]), pend_debug,
                              pend_unwind)
                    d.loads.append(ld)
            pend_debug = None
            pend_unwind = None
        elif rid == MOVE:
            if size >= 16 + 48:
                d.moves.append(struct.unpack_from(bo + "IIQQQQQ", buf, body))
        elif rid == DEBUG_INFO:
            ok = size >= 16 + 16
            if ok:
                code_addr, nr = struct.unpack_from(bo + "QQ", buf, body)
                try:
                    if nr > (end - body - 16) // 17:
                        raise JitdumpError("nr_entry too large")
                    entries, dmg = _parse_entries(buf, body + 16, end, bo,
                                                  code_addr, nr)
                except JitdumpError:
                    ok = False
            if ok:
                pend_debug = DebugInfo(off, ts, code_addr, entries)
                d.debug_infos.append(pend_debug)
                d.damaged_entries += dmg
                if dmg:
                    d.damaged_debug_infos += 1
            else:
                d.dropped_debug += 1
                pend_debug = None
        elif rid == UNWINDING_INFO:
            ok = size >= 16 + 24
            if ok:
                usz, hsz, msz = struct.unpack_from(bo + "QQQ", buf, body)
                ok = hsz <= usz and body + 24 + usz <= end
            if ok:
                pend_unwind = Unwind(off, ts, usz, hsz, msz,
                                     bytes(buf[body + 24:body + 24 + usz]))
                d.unwinds.append(pend_unwind)
            else:
                d.dropped_unwind += 1
                pend_unwind = None
        off = end
    return d


def summary(d):
    c = d.counts
    cfi = [ld for ld in d.loads if ld.has_cfi]
    lines = [
        "byteorder %s pid %d version %d elf_mach %d pad1 0x%x" % (
            d.header["byteorder"], d.header["pid"], d.header["version"],
            d.header["elf_mach"], d.header["pad1"]),
        "records: LOAD %d, MOVE %d, DEBUG_INFO %d, CLOSE %d, "
        "UNWINDING_INFO %d, other %d" % (
            c.get(LOAD, 0), c.get(MOVE, 0), c.get(DEBUG_INFO, 0),
            c.get(CLOSE, 0), c.get(UNWINDING_INFO, 0),
            sum(v for k, v in c.items() if k > 4)),
        "loads with code %d, code bytes %d" % (
            sum(1 for ld in d.loads if ld.code_size),
            sum(ld.code_size for ld in d.loads)),
        "debug entries %d (damaged %d in %d DEBUG_INFO); dropped: debug %d "
        "unwind %d loads %d; truncated tail %d bytes" % (
            sum(len(x.entries) for x in d.debug_infos), d.damaged_entries,
            d.damaged_debug_infos, d.dropped_debug, d.dropped_unwind,
            d.dropped_loads, d.truncated_bytes),
        "real CFI (mapped_size != 0): %d: %s" % (
            len(cfi), ", ".join("#%d %s" % (ld.code_index,
                                            ld.name.decode(errors="replace"))
                                for ld in cfi)),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print("%s:" % p)
        print(summary(parse(p)))


def since_times(events):
    """When each LOAD's code may be taken to run (perfgraft's since, issue
    22 point 6), from events in file order: (kind, time, addr, size,
    code_index) with kind "load", "move" or "unload".  Returns one time per
    event (the event's own time for all but LOADs).

    The rule, spelled out on disjoint segments: a LOAD or MOVE makes its
    range held by its code index; an UNLOAD makes the parts its code index
    still holds vacant, at its time.  A LOAD whose range covers nothing
    held starts at the latest time a covered part was vacated, or at the
    first LOAD's time where nothing was ever there (never after itself);
    one covering held code starts at its own time."""
    segs = []          # sorted disjoint [start, end, holder or None, time]
    out, first = [], None

    def cut(at):
        i = bisect.bisect_left(segs, at, key=lambda s: s[0])
        if i > 0 and segs[i - 1][0] < at < segs[i - 1][1]:
            s = segs[i - 1]
            segs.insert(i, [at, s[1], s[2], s[3]])
            s[1] = at
        return i

    def covered(start, end):
        lo = cut(start)
        hi = cut(end)
        return lo, hi

    for kind, time, addr, size, ci in events:
        end = min(addr + size, 2 ** 64 - 1)
        if not size:
            out.append(time)
            continue
        lo, hi = covered(addr, end)
        if kind == "load":
            if first is None:
                first = time
            part = segs[lo:hi]
            if any(s[2] is not None for s in part):
                since = time
            else:
                since = max([first] + [s[3] for s in part])
                since = min(since, time)
            segs[lo:hi] = [[addr, end, ci, time]]
            out.append(since)
        elif kind == "move":
            segs[lo:hi] = [[addr, end, ci, time]]
            out.append(time)
        else:
            new, at = [], addr
            for s in segs[lo:hi]:
                if s[0] > at:
                    new.append([at, s[0], None, time])
                new.append([s[0], s[1], None, time] if s[2] == ci else s)
                at = s[1]
            if at < end:
                new.append([at, end, None, time])
            segs[lo:hi] = new
            out.append(time)
    return out
