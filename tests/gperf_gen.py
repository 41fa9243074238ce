#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writer of synthetic gperftools CPU profiles (CPUPROFILE files) for tests.

Stdlib only.  Format as gperftools' docs/cpuprofile-fileformat.html and
pprof (perl, 2.10) read it:

  slots: unsigned words of 4 or 8 bytes in the writer's byte order
  header:  0, N (slots that follow, >= 3), version (0), period (us), pad...
           records start at slot 2 + N
  record:  count (>= 1), depth d (>= 1), d PCs (innermost first)
  trailer: 0, 1, 0 (a record with count 0 and the single PC 0)
  text:    /proc/self/maps lines as gperftools writes them
           ("%08x-%08x rwxp %08x 00:00 %-11d %s"), `build=PATH` lines,
           anything else (ignored)

build() returns a Case: the bytes, every record with its byte offset, and
what `perfgraft dump --json` must report (contract of the converter):

  detection as perl pprof (first 8 bytes zero -> 64-bit, then the half of
  slot 1 that is zero gives the byte order; 32-bit: bytes 6-7 zero -> LE,
  4-5 zero -> BE); no fit, slot0 != 0, slot1 < 3, a version other than 0
  (1 = Java) or a header cut short are fatal (exit 1 = EXIT_BADINPUT of
  src/cli/cli.h, no output file);
  period 0 -> a warning; a record with depth > 254*4 or running past EOF ->
  warning naming the record's offset, everything before it kept, nothing
  after it (no trailer, no mappings); a record whose first PC is 0 but which
  is not the exact trailer -> warning naming its offset, the data ends
  there and the bytes after it are read as the mapped-objects text (as
  perl pprof reads it); EOF at a record boundary without trailer ->
  warning "no trailer"; the text after the trailer gives the mappings
  (every /proc/maps-form line, `$build` substituted, " (deleted)" stripped
  with a warning naming the path); other lines are ignored; a last line
  without its newline was cut (gperftools ends every line with one): it
  is not used, and a warning says the text is truncated, naming the
  line's offset.

Case.derive(n) gives the expectation for the file cut to its first n bytes
(used by the truncation sweeps).  perl_model(data) re-implements perl
pprof's reader (CpuProfileStream + ReadCPUProfile of the perl pprof shipped
with gperftools 2.10) and gives the "Total: N samples" perl prints, or its
error; perl_check() compares that with the real google-pprof.  Perl counts
differently from our contract in two places: it stops at the first record
whose first PC is 0 (zero-PC record mid-file), and it counts a record cut
off by EOF as long as its count slot is complete.

    python3 tests/gperf_gen.py OUTDIR          # write the cases + .json
    python3 tests/gperf_gen.py --perl-check    # cross-check with google-pprof
    python3 tests/gperf_gen.py --perl-sweep 7  # same on truncations (slow)
    python3 tests/gperf_gen.py --seeds DIR     # write the fuzz seed corpus
"""

import argparse
import collections
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

from xray_gen import _bo  # "<"/">" from a byte-order spelling

MAX_DEPTH = 254 * 4          # contract: deeper records are damage
EXIT_BADINPUT = 1            # src/cli/cli.h (EXIT_USAGE is 2)
HEADER_FATAL_RE = r"offset \d+"
NO_TRAILER_RE = r"(?i)no trailer"
MAPS_CUT_RE = r"mapped-objects text is truncated"


# --------------------------------------------------------------------------
# Mapped-object text

class Map:
    """A /proc/maps-form line as gperftools writes it.  path may contain
    `$build`; expected() gives the JSON mapping after substitution."""

    def __init__(self, start, end, perms, offset, inode, path, dev="00:00",
                 deleted=False, fmt=None):
        self.start, self.end, self.perms = start, end, perms
        self.offset, self.inode, self.path = offset, inode, path
        self.dev, self.deleted, self.fmt = dev, deleted, fmt

    def line(self):
        path = self.path + (" (deleted)" if self.deleted else "")
        if self.fmt:
            return self.fmt.format(s=self.start, e=self.end, p=self.perms,
                                   o=self.offset, d=self.dev, i=self.inode,
                                   path=path)
        return "%08x-%08x %s %08x %s %-11d %s" % (
            self.start, self.end, self.perms, self.offset, self.dev,
            self.inode, path)


class Build:
    """A `build=PATH` specifier line (optionally indented)."""

    def __init__(self, path, indent=""):
        self.path, self.indent = path, indent

    def line(self):
        return "%sbuild=%s" % (self.indent, self.path)


class Junk:
    """A line that must be ignored."""

    def __init__(self, text):
        self.text = text

    def line(self):
        return self.text


MAPS_LINE = re.compile(
    r"([0-9a-fA-F]{1,16})-([0-9a-fA-F]{1,16})[ \t]+(\S{4})[ \t]+([0-9a-fA-F]{1,16})[ \t]+"
    r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,8})[ \t]+(\d+)(?:[ \t]+(.*))?")


def parse_maps_bytes(data):
    """The mappings perfgraft reads from raw bytes (after a zero-PC record,
    where the rest of the binary part is read as text, as perl pprof does):
    lines with a NUL are not text; build= lines; /proc/maps lines."""
    out, build = [], None
    for raw in data.split(b"\n"):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if b"\0" in raw:
            continue
        line = raw.decode("latin-1")
        if line.lstrip(" \t").startswith("build="):
            build = line.lstrip(" \t")[6:]
            continue
        m = MAPS_LINE.fullmatch(line)
        if not m or int(m.group(2), 16) < int(m.group(1), 16):
            continue
        path = (m.group(8) or "")
        if path.endswith(" (deleted)"):
            path = path[:-len(" (deleted)")]
        out.append({"start": int(m.group(1), 16), "end": int(m.group(2), 16),
                    "perms": m.group(3), "offset": int(m.group(4), 16),
                    "dev": "%02x:%02x" % (int(m.group(5), 16), int(m.group(6), 16)),
                    "inode": int(m.group(7)), "path": substitute_build(path, build)})
    return out


def substitute_build(path, build):
    if build is None:
        return path
    return re.sub(r"\$build(?!\w)", lambda m: build, path)


# --------------------------------------------------------------------------
# Records and cases

class Item:
    """One record as written.  kind: record | zero_pc (first PC 0) |
    empty (count 0 or depth 0; skipped with a warning like zero_pc) | deep
    (depth > MAX_DEPTH) | trailer."""

    def __init__(self, kind, offset, size, count, pcs, depth=None):
        self.kind, self.offset, self.size = kind, offset, size
        self.count, self.pcs = count, list(pcs)
        self.depth = len(self.pcs) if depth is None else depth

    @property
    def end(self):
        return self.offset + self.size

    def __repr__(self):
        return "Item(%s@%d+%d n=%d d=%d)" % (self.kind, self.offset, self.size,
                                             self.count, len(self.pcs))


class TextLine:
    def __init__(self, offset, end, entry, text):
        self.offset, self.end, self.entry, self.text = offset, end, entry, text


class Case:
    """A profile and what `perfgraft dump --json` must say about it.

    Expectations (filled by derive(); all for the file cut to self.cut
    bytes):
      exit: 0, or EXIT_BADINPUT for a fatal header; fatal_offsets: set of offsets one of
          which the fatal message must name (None: any); fatal_re: regex the
          stderr must match besides;
      convert_exit: expected exit of `perfgraft gperf` (None: not checked);
      json: exact fields (word_bits, byte_order, header_slots, version,
          period_us, total_samples, records, trailer, stacks, mappings);
      records_alt: other acceptable values of "records" (a skipped zero-PC
          record may or may not be counted as read);
      warn: list of requirements, each ("offset", N) - a warning naming
          "offset N" -, ("re", pattern) or ("any", [req, req]);
      clean: no warning at all allowed.
    perl: (total, None) or (None, error) as perl pprof's model gives."""

    def __init__(self, name, data, bits, bo, header, items, text_lines,
                 hdr_len, fatal=None, note=""):
        self.name = name
        self.full = bytes(data)
        self.bits = bits
        self.bo = bo
        self.header = header          # dict slot0, slot1, version, period
        self.items = items
        self.text_lines = text_lines
        self.hdr_len = hdr_len
        self.fatal = fatal            # (offsets, regex) if the header is bad
        self.note = note
        self.twin = None
        self.convert_override = "unset"
        self.derive(len(self.full))

    @property
    def data(self):
        return self.full[:self.cut]

    @property
    def word(self):
        return self.bits // 8

    def copy_cut(self, n, name=None):
        c = Case.__new__(Case)
        c.__dict__.update(self.__dict__)
        c.name = name or "%s-cut%d" % (self.name, n)
        c.twin = None
        c.convert_override = "unset"
        c.derive(n)
        return c

    # -- expectation ------------------------------------------------------
    def derive(self, n):
        self.cut = n
        self.warn = []
        self.clean = True
        self.records_alt = set()
        self.json = {}
        self.fatal_offsets = None
        self.fatal_re = HEADER_FATAL_RE
        data = self.full[:n]
        self.perl = perl_model(data)
        if self.fatal is not None or n < self.hdr_len:
            self.exit = EXIT_BADINPUT
            if self.fatal is not None and n >= self.fatal[2]:
                self.fatal_offsets, self.fatal_re = self.fatal[0], self.fatal[1]
            elif n == 0:
                self.fatal_offsets = {0}
            self.convert_exit = EXIT_BADINPUT
            self.clean = False
            return
        self.exit = 0
        self.convert_exit = 0
        h = self.header
        self.json = {"format": "gperftools-cpu", "word_bits": self.bits,
                     "byte_order": "little" if self.bo == "<" else "big",
                     "header_slots": h["slot1"], "version": h["version"]}
        if h["period"] != 0:
            self.json["period_us"] = h["period"]
        else:
            self.warn.append(("re", r"(?i)period"))
        stacks = collections.OrderedDict()
        total = 0
        nrec = 0
        nzero = 0
        zero_end = None
        trailer = False
        damaged = False
        for it in self.items:
            if it.offset >= n:
                break
            if it.kind == "deep" or it.end > n:
                damaged = True
                if it.kind == "trailer":
                    # a cut trailer: a record running past EOF, or simply
                    # "no trailer"
                    self.warn.append(("any", [("offset", it.offset),
                                              ("re", NO_TRAILER_RE)]))
                else:
                    self.warn.append(("offset", it.offset))
                break
            if it.kind == "trailer":
                trailer = True
                break
            if it.kind == "zero_pc":
                # the data ends here, as perl pprof reads it; the mapped
                # objects are read from after the record
                self.warn.append(("offset", it.offset))
                zero_end = it.end
                break
            if it.kind == "empty":
                self.warn.append(("offset", it.offset))
                nzero += 1
                continue
            key = tuple(it.pcs)
            stacks[key] = stacks.get(key, 0) + it.count
            total += it.count
            nrec += 1
        if not trailer and not damaged and zero_end is None:
            self.warn.append(("re", NO_TRAILER_RE))
        mappings = []
        if zero_end is not None:
            text = self.data[zero_end:n]
            if text and not text.endswith(b"\n"):
                cut = text.rfind(b"\n") + 1
                self.warn += [("offset", zero_end + cut), ("re", MAPS_CUT_RE)]
                text = text[:cut]
            mappings = parse_maps_bytes(text)
        elif trailer:
            build = None
            for tl in self.text_lines:
                if tl.offset >= n:
                    break
                if tl.end > n or not tl.text.endswith(b"\n"):
                    # a last line without its newline was cut (gperftools
                    # ends every line): not used, a warning naming it
                    self.warn += [("offset", tl.offset), ("re", MAPS_CUT_RE)]
                    break
                e = tl.entry
                if isinstance(e, Build):
                    build = e.path
                elif isinstance(e, Map):
                    path = substitute_build(e.path, build)
                    mappings.append({"start": e.start, "end": e.end,
                                     "perms": e.perms, "offset": e.offset,
                                     "dev": e.dev, "inode": e.inode,
                                     "path": path})
                    if e.deleted:
                        self.warn.append(("re", re.escape(path)))
        self.json.update({
            "total_samples": total, "records": nrec, "trailer": trailer,
            "stacks": [{"count": c, "pcs": list(k)} for k, c in stacks.items()],
            "mappings": mappings})
        if nzero:
            self.records_alt = {nrec + nzero}
        self.clean = not self.warn
        if trailer and not any(tl.end <= n for tl in self.text_lines):
            # nothing after the trailer: a warning about the missing mapped
            # objects is fair (not required)
            self.clean = False

    # -- output -------------------------------------------------------------
    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.data)

    def expected_convert_exit(self):
        if self.convert_override != "unset":
            return self.convert_override
        return self.convert_exit

    def describe(self):
        def hexs(d):
            d = dict(d)
            if "stacks" in d:
                d["stacks"] = [{"count": s["count"],
                                "pcs": ["0x%x" % p for p in s["pcs"]]}
                               for s in d["stacks"]]
            if "mappings" in d:
                d["mappings"] = [dict(m, start="0x%x" % m["start"],
                                      end="0x%x" % m["end"],
                                      offset="0x%x" % m["offset"])
                                 for m in d["mappings"]]
            return d
        perl_total, perl_err = self.perl
        return {"name": self.name, "size": len(self.data), "exit": self.exit,
                "convert_exit": self.expected_convert_exit(),
                "fatal_offsets": sorted(self.fatal_offsets)
                if self.fatal_offsets is not None else None,
                "fatal_re": self.fatal_re if self.exit else None,
                "json": hexs(self.json),
                "records_alt": sorted(self.records_alt),
                "warn": self.warn, "clean": self.clean,
                "records_at": [[it.kind, it.offset, it.size]
                               for it in self.items],
                "perl_total": perl_total, "perl_error": perl_err,
                "twin": self.twin, "note": self.note}


def build(name, bits=64, bo="<", period=10000, version=0, slot1=3,
          hdr_fill=0xDEADBEEF, slot0=0, records=(), trailer=True, maps=(),
          text_tail=b"", final_newline=True, fatal=None, note=""):
    """records: [(count, [pcs])] or (count, [pcs], depth) to write a depth
    slot that does not match the PCs; a record whose first PC is 0 is a
    zero-PC record, one deeper than MAX_DEPTH a deep one.  maps: Map, Build
    and Junk entries.  fatal: (offsets, regex, min_len) when the header must
    be refused (min_len: from which length the specific message is due)."""
    bo = _bo(bo)
    w = bits // 8
    fmt = bo + ("Q" if bits == 64 else "I")
    mask = (1 << bits) - 1

    def slot(v):
        return struct.pack(fmt, v & mask)

    out = bytearray()
    hdr = [slot0, slot1, version, period] + [0] + \
        [hdr_fill] * max(0, slot1 - 3)
    hdr = hdr[:2 + slot1] if slot1 >= 3 else hdr[:5]
    for v in hdr:
        out += slot(v)
    hdr_len = len(out)
    items = []
    for rec in records:
        count, pcs = rec[0], rec[1]
        depth = rec[2] if len(rec) > 2 else len(pcs)
        off = len(out)
        out += slot(count) + slot(depth)
        for p in pcs:
            out += slot(p)
        kind = "record"
        if depth > MAX_DEPTH:
            kind = "deep"
        elif count == 0 or not pcs:
            kind = "empty"
        elif pcs[0] == 0:
            kind = "zero_pc"
        items.append(Item(kind, off, len(out) - off, count, pcs, depth))
    text_lines = []
    if trailer:
        off = len(out)
        out += slot(0) + slot(1) + slot(0)
        items.append(Item("trailer", off, 3 * w, 0, [0]))
        for i, e in enumerate(maps):
            t = e.line().encode()
            if final_newline or i + 1 < len(maps):
                t += b"\n"
            text_lines.append(TextLine(len(out), len(out) + len(t), e, t))
            out += t
        out += text_tail
    return Case(name, out, bits, bo,
                {"slot0": slot0, "slot1": slot1, "version": version,
                 "period": period}, items, text_lines, hdr_len,
                fatal=fatal, note=note)


def raw_case(name, data, fatal_offsets, fatal_re=HEADER_FATAL_RE, note=""):
    """A file whose header must be refused."""
    c = Case(name, data, 64, "<", {"slot0": 0, "slot1": 3, "version": 0,
                                   "period": 0}, [], [], 0,
             fatal=(fatal_offsets, fatal_re, 0), note=note)
    return c


# --------------------------------------------------------------------------
# perl pprof model

def perl_model(data):
    """(total, None) or (None, error) as perl pprof 2.10's ReadCPUProfile
    would give for this file (total = sum of all record counts it reads)."""
    if data[:1] and 0x20 <= data[0] <= 0x7E:
        # ReadProfileHeader: a printable first byte means text header lines
        # ("%..." commands, then one header line); a binary CPU profile
        # would then be read from after that line
        pos = 0
        while True:
            nl = data.find(b"\n", pos)
            if nl < 0:
                return None, "Profile is empty."
            line = data[pos:nl + 1]
            pos = nl + 1
            if not line.startswith(b"%"):
                break
        if line.startswith(b"heap profile:") or line.startswith(b"---"):
            return None, "text profile: not modelled"
        data = data[pos:]
    first = data[:8]
    if first == b"\0" * 8:
        addr_len = 16
    else:
        addr_len = 8
    if addr_len == 8:
        if len(first) >= 8 and first[6:8] == b"\0\0":
            code = "<"
        elif len(first) >= 6 and first[4:6] == b"\0\0":
            code = ">"
        else:
            return None, "header size >= 2**16"

        def words(b):
            k = len(b) // 4
            return list(struct.unpack(code + "%dI" % k, b[:4 * k]))
        slots = words(first) + words(data[8:])
    else:
        second = data[8:16]
        if len(second) >= 8 and second[4:8] == b"\0" * 4:
            code = "<"
        elif len(second) >= 4 and second[0:4] == b"\0" * 4:
            code = ">"
        else:
            return None, "header size >= 2**32"
        k = len(second) // 4
        pair = struct.unpack(code + "%dI" % k, second[:4 * k])
        s1 = sum(pair)
        rest = data[16:]
        k = len(rest) // 4
        b32 = struct.unpack(code + "%dI" % k, rest[:4 * k])
        vals = []
        for i in range(0, len(b32) - 1, 2):
            lo, hi = b32[i], b32[i + 1]
            if code == ">":
                lo, hi = hi, lo
            vals.append(lo + (hi << 32))
        slots = [0, s1] + vals

    eof = [False]

    def get(i):
        if eof[0] or i >= len(slots) or i < 0:
            if i >= len(slots):
                eof[0] = True
            return -1
        return slots[i]

    if get(0) != 0:
        return None, "not a profile file, or old format profile file"
    i = 2 + get(1)
    version, period = get(2), get(3)
    if version > 2 ** 32 or period > 2 ** 32 or i > 2 ** 32 or i < 5:
        return None, "not a profile file, or corrupted profile file"
    total = 0
    while get(i) != -1:
        n = get(i)
        i += 1
        d = get(i)
        i += 1
        if d > 2 ** 16:
            return None, "stack trace depth >= 2**32"
        if get(i) == 0:
            i += d
            break
        total += n
        i += d
    return total, None


def google_pprof():
    for name in ("google-pprof", "pprof-perl"):
        p = shutil.which(name)
        if p:
            return p
    return None


def perl_run(path, tool=None, binary="/bin/true"):
    """(total, None) from `google-pprof --text`, or (None, stderr tail)."""
    tool = tool or google_pprof()
    p = subprocess.run([tool, "--text", binary, path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    m = re.search(r"^Total: (\d+) samples", out, re.M)
    if p.returncode != 0:
        return None, err.strip().splitlines()[-1] if err.strip() else \
            "exit %d" % p.returncode
    if m:
        return int(m.group(1)), None
    return 0, None       # perl prints no Total line when the total is 0


def perl_check(case, path, tool=None):
    """Problems (list of str) between the model and the real perl pprof."""
    want = case.perl
    got = perl_run(path, tool)
    if want[0] is not None:
        if got[0] != want[0]:
            return ["%s: perl total %r (%s), model %r"
                    % (case.name, got[0], got[1], want[0])]
        return []
    if got[0] is not None:
        return ["%s: perl read it (total %d), model says %r"
                % (case.name, got[0], want[1])]
    if want[1] not in got[1]:
        return ["%s: perl error %r, model %r" % (case.name, got[1], want[1])]
    return []


# --------------------------------------------------------------------------
# The edge-case set

PROG = 0x55D0C0A01000        # r-xp text of /opt/app/bin/prog (offset 0x1000)
LIBC = 0x7F3A1C026000        # r-xp text of libc.so.6 (offset 0x26000)
VDSO = 0x7FFD5E3F8000
VSYSCALL = 0xFFFFFFFFFF600000


def base_maps(build_path=None):
    prog = "/opt/app/bin/prog"
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    return [
        Map(PROG - 0x1000, PROG, "r--p", 0, 1311, prog),
        Map(PROG, PROG + 0x4000, "r-xp", 0x1000, 1311, prog),
        Map(PROG + 0x4000, PROG + 0x6000, "r--p", 0x5000, 1311, prog),
        Map(PROG + 0x7000, PROG + 0x8000, "rw-p", 0x6000, 1311, prog),
        Map(0x55D0C1B2D000, 0x55D0C1B4E000, "rw-p", 0, 0, "[heap]"),
        Map(0x7F3A1BE00000, 0x7F3A1C000000, "rw-p", 0, 0, ""),
        Map(LIBC - 0x26000, LIBC, "r--p", 0, 332835, libc),
        Map(LIBC, LIBC + 0x156000, "r-xp", 0x26000, 332835, libc),
        Map(LIBC + 0x156000, LIBC + 0x1A9000, "r--p", 0x17C000, 332835, libc),
        Map(LIBC + 0x1AE000, LIBC + 0x1B0000, "rw-p", 0x1D3000, 332835, libc),
        Map(VDSO - 0x4000, VDSO, "r--p", 0, 0, "[vvar]"),
        Map(VDSO, VDSO + 0x2000, "r-xp", 0, 0, "[vdso]"),
        Map(0x7FFD5E2E0000, 0x7FFD5E301000, "rw-p", 0, 0, "[stack]"),
        Map(VSYSCALL, VSYSCALL + 0x1000, "--xp", 0, 0, "[vsyscall]"),
    ]


def base_stacks():
    leaf1, leaf2, leaf3 = PROG + 0x1A8, PROG + 0x199, PROG + 0x1A0
    mid, top, main_ = PROG + 0x1CF, PROG + 0x1FF, PROG + 0x23A
    start_main, start = LIBC + 0x41CA, PROG + 0x0C5
    s1 = [leaf1, mid, top, main_, start_main, start]
    s2 = [leaf2, mid, top, main_, start_main, start]
    s3 = [VDSO + 0x6D0, LIBC + 0xA1E85, main_, start_main, start]
    s4 = [VSYSCALL + 0x400, LIBC + 0xA1F00, main_, start_main, start]
    return [(5, s1), (3, s2), (2, s1), (1, s3), (4, s2), (1, s4), (7, [leaf3]),
            (2, s1[:-1]), (6, s1)]


SMALL_MAPS32 = [
    Map(0x08048000, 0x08049000, "r--p", 0, 77, "/usr/bin/small"),
    Map(0x08049000, 0x0804C000, "r-xp", 0x1000, 77, "/usr/bin/small"),
    Map(0x0804C000, 0x0804D000, "rw-p", 0x4000, 77, "/usr/bin/small"),
    Map(0xF7D00000, 0xF7D20000, "r--p", 0, 901, "/lib/i386-linux-gnu/libc.so.6"),
    Map(0xF7D20000, 0xF7E90000, "r-xp", 0x20000, 901, "/lib/i386-linux-gnu/libc.so.6"),
    Map(0xF7FC4000, 0xF7FC6000, "r-xp", 0, 0, "[vdso]"),
    Map(0xFFFDD000, 0xFFFFE000, "rw-p", 0, 0, "[stack]"),
]


def small_stacks():
    a = [0x08049123, 0x08049200, 0x08049310, 0xF7D21519, 0x08049055]
    b = [0x08049140, 0x08049200, 0x08049310, 0xF7D21519, 0x08049055]
    c = [0xF7FC4570, 0xF7D8A001, 0x08049310, 0xF7D21519, 0x08049055]
    return [(4, a), (2, b), (3, a), (1, c), (9, [0x08049130]), (1, b)]


def cases(outdir=None):
    """The edge-case set {name: Case}; written to outdir (NAME.prof plus
    NAME.json) when given."""
    cs = collections.OrderedDict()

    def add(c, twin=None):
        c.twin = twin
        cs[c.name] = c
        return c

    st = base_stacks()
    add(build("base", records=st, maps=base_maps(),
              note="64-bit LE, repeated stacks, [vdso]/[vsyscall] PCs, "
              "a prefix of a stack as its own stack"), "base")
    add(build("base-be64", bo=">", records=st, maps=base_maps()), "base")
    for bits in (64, 32):
        for bo in ("<", ">"):
            add(build("small-%s%d" % ("le" if bo == "<" else "be", bits),
                      bits=bits, bo=bo, period=1000, records=small_stacks(),
                      maps=SMALL_MAPS32), "small")
    add(build("hdr4-le64", slot1=4, records=st[:4], maps=base_maps(),
              note="slot1 = 4: one extra header word (0xdeadbeef)"))
    add(build("hdr5-be32", bits=32, bo=">", slot1=5, period=4000,
              records=small_stacks(), maps=SMALL_MAPS32,
              note="slot1 = 5: two extra header words"), )
    add(build("period0", period=0, records=st[:3], maps=base_maps(),
              note="period 0: warning (pprof Go refuses it, perl accepts)"))
    add(build("version1", version=1, records=st[:3], maps=base_maps(),
              fatal=({0, 16}, r"(?i)java", 24),
              note="version 1 is a Java CPU profile: refused"))
    add(build("version2-le32", bits=32, version=2, records=small_stacks(),
              maps=SMALL_MAPS32, fatal=({0, 8}, r"(?i)version", 12),
              note="unknown version: refused"))
    zst = list(st[:3]) + [(7, [0, PROG + 0x1CF, PROG + 0x1FF])] + list(st[3:])
    add(build("zeropc-mid", records=zst, maps=base_maps(),
              note="a record whose first PC is 0 after 3 records: the data "
              "ends there with a warning, as perl reads it"))
    zst1 = list(st[:5]) + [(3, [0])] + list(st[5:])
    add(build("zeropc-depth1-le32", bits=32, records=[(c, p) for c, p in
                                                       small_stacks()[:2]] +
              [(3, [0])] + small_stacks()[2:], maps=SMALL_MAPS32,
              note="count 3, depth 1, PC 0: not the trailer (count != 0)"))
    add(build("zeropc-depth1", records=zst1, maps=base_maps()))
    add(build("empty-records", records=st[:2] + [(0, [PROG + 0x1A8, PROG + 0x1CF])]
              + st[2:4] + [(4, [])] + st[4:6], maps=base_maps(),
              note="a record with count 0 and one with depth 0 mid-file: "
              "skipped with a warning naming their offsets (the reader's "
              "header says so; perl counts the depth-0 record's 4)"))
    add(build("no-trailer", records=st, trailer=False,
              note="the process was killed: no trailer, no maps"))
    add(build("no-trailer-be32", bits=32, bo=">", records=small_stacks(),
              trailer=False))
    add(build("header-only", records=(), trailer=False,
              note="header and nothing else"))
    add(build("trailer-only", records=(), maps=base_maps(),
              note="no samples at all, but a complete file"))
    deep = [PROG + 0x100 + i for i in range(MAX_DEPTH)]
    add(build("deep-1016", records=st[:2] + [(2, deep)] + st[2:4],
              maps=base_maps(), note="depth 254*4: still accepted"))
    add(build("deep-1017", records=st[:2] + [(2, deep + [PROG + 0x5])] +
              st[2:4], maps=base_maps(),
              note="depth 254*4+1: damage (perl reads it)"))
    add(build("depth-huge-le32", bits=32, records=small_stacks()[:3] +
              [(5, [0x08049123, 0x08049200], 0x7FFFFFFF)] +
              small_stacks()[3:], maps=SMALL_MAPS32,
              note="a depth slot of 2**31-1 mid-file: damage (perl: error)"))
    # maps text edge cases
    prog = "/opt/app/bin/prog"
    mj = [
        Junk("garbage line"),
        Junk(""),
        Build("/srv/b1"),
        Map(PROG, PROG + 0x4000, "r-xp", 0x1000, 1311, "$build/bin/prog"),
        Junk("prefix=/p"),
        Map(LIBC, LIBC + 0x156000, "r-xp", 0x26000, 332835,
            "$prefix/lib/libc.so.6"),
        Junk("7f3a1c026000-7f3a1c17c000: /usr/lib/libcooked.so"),
        Junk("abc=/x"),
        Build("/srv/b2", indent="   "),
        Map(0x7F3A1D000000, 0x7F3A1D010000, "r-xp", 0x2000, 4242,
            "$builder/libkeep.so"),
        Map(0x7F3A1D100000, 0x7F3A1D110000, "r-xp", 0x3000, 4243, "$build"),
        Map(0x7F3A1D200000, 0x7F3A1D210000, "r-xp", 0x1000, 4244,
            "$build.so/x"),
        Map(0x7F3A1E000000, 0x7F3A1E020000, "r-xp", 0x4000, 999,
            "/tmp/old/libgone.so", deleted=True),
        Map(0x7F3A1F000000, 0x7F3A1F001000, "r-xp", 0, 12,
            "/tmp/my dir/lib with spaces.so", dev="fd:01"),
        Junk("# comment"),
        Junk("7f3a20000000-7f3a20001000 r-xp zz 00:00 0 /bad/offset"),
        Map(0x7F3A21000000, 0x7F3A21001000, "r-xp", 0, 13,
            "/opt/deleted (deleted) twice.so", deleted=True),
        Map(VDSO, VDSO + 0x2000, "r-xp", 0, 0, "[vdso]"),
    ]
    add(build("maps-junk", records=st[:4], maps=mj, final_newline=False,
              note="build=/$build substitution, unrelated key=value lines, "
              "cooked and junk lines, (deleted), a path with spaces, "
              "no final newline"))
    add(build("maps-deleted-be64", bo=">", records=st[:2], maps=[
        Map(PROG, PROG + 0x4000, "r-xp", 0x1000, 1311, prog, deleted=True),
        Map(LIBC, LIBC + 0x156000, "r-xp", 0x26000, 332835,
            "/usr/lib/x86_64-linux-gnu/libc.so.6")]))
    # truncations of base inside records (not at their boundaries)
    b = cs["base"]
    w = 8
    r2, r5 = b.items[2], b.items[5]
    for label, n in (("count", r2.offset + 3), ("depth", r2.offset + w),
                     ("depth-part", r2.offset + w + 5),
                     ("pcs", r2.offset + 2 * w),
                     ("pc-mid", r5.offset + 3 * w + 4),
                     ("last-pc", r5.end - 1),
                     ("trailer", b.items[-1].offset + 2 * w)):
        add(b.copy_cut(n, "trunc-%s" % label))
    s32 = cs["small-be32"]
    add(s32.copy_cut(s32.items[3].offset + 2 * 4 + 2, "trunc-pc-be32"))
    add(b.copy_cut(b.items[4].offset, "cut-at-record"))
    add(b.copy_cut(b.items[-1].end, "cut-after-trailer"))
    # headers that must be refused
    add(raw_case("empty", b"", {0}, note="empty file"))
    add(raw_case("garbage", bytes([0x01, 0x9C, 0x7F, 0x33, 0x10, 0x20, 0x30,
                                   0x40]) + bytes(range(1, 120)), {0},
                 r"(?i)not a gperftools CPU profile",
                 note="fits no detection rule"))
    add(raw_case("hdr-huge-le32", struct.pack("<5I", 0, 0x10003, 0, 100, 0),
                 {0}, r"(?i)not a gperftools CPU profile",
                 note="32-bit slot1 >= 2**16: fits no rule"))
    add(raw_case("hdr-huge-le64", struct.pack("<5Q", 0, 0x100000003, 0, 100,
                                              0),
                 {0}, r"(?i)not a gperftools CPU profile",
                 note="64-bit slot1 >= 2**32: fits no rule"))
    # (slot 0's first byte must not be printable: perl would read a text
    # header line; 0x2301 is no XRay version either)
    add(build("slot0-nonzero-le32", bits=32, slot0=0x12301, records=small_stacks(),
              maps=SMALL_MAPS32, fatal=({0}, HEADER_FATAL_RE, 8)))
    add(build("slot1-2", slot1=2, records=st[:2], maps=base_maps(),
              fatal=({0, 8}, HEADER_FATAL_RE, 16)))
    hdr = cs["base"].full[:40]
    add(raw_case("header-short", hdr[:28], None,
                 note="64-bit header cut after 3.5 slots"))
    add(raw_case("header-short-le32", cs["small-le32"].full[:14], None))
    # converter: no samples at all may be refused; not checked
    for n in ("header-only", "trailer-only"):
        cs[n].convert_override = None
    if outdir:
        write_cases(cs, outdir)
    return cs


def write_cases(cs, outdir):
    os.makedirs(outdir, exist_ok=True)
    for name, c in cs.items():
        c.write(os.path.join(outdir, name + ".prof"))
        with open(os.path.join(outdir, name + ".json"), "w") as f:
            json.dump(c.describe(), f, indent=1, sort_keys=True)
            f.write("\n")


def truncate(case, n):
    return case.copy_cut(n)


# --------------------------------------------------------------------------
# Fuzz seeds

def seeds(outdir):
    """Writes the fuzz seed corpus (each file < 4 KB); returns the names."""
    cs = cases()
    pick = [("01-base-le64", cs["base"]),
            ("02-base-be64", cs["base-be64"]),
            ("03-small-le32", cs["small-le32"]),
            ("04-small-be32", cs["small-be32"]),
            ("05-hdr4-le64", cs["hdr4-le64"]),
            ("06-zeropc-mid", cs["zeropc-mid"]),
            ("07-no-trailer-be32", cs["no-trailer-be32"]),
            ("08-trunc-pc-mid", cs["trunc-pc-mid"]),
            ("09-maps-junk", cs["maps-junk"]),
            ("10-period0", cs["period0"]),
            ("11-header-only", cs["header-only"])]
    d254 = [0x08049000 + 4 * i for i in range(254)]
    pick.append(("12-deep254-le32",
                 build("deep254", bits=32, records=[(3, d254), (1, d254[:9])],
                       maps=SMALL_MAPS32[:3])))
    pick.append(("13-trailer-only-be32",
                 build("t", bits=32, bo=">", records=(),
                       maps=SMALL_MAPS32)))
    os.makedirs(outdir, exist_ok=True)
    names = []
    for name, c in pick:
        data = c.data
        if len(data) > 4096:
            raise ValueError("seed %s is %d bytes" % (name, len(data)))
        with open(os.path.join(outdir, name + ".prof"), "wb") as f:
            f.write(data)
        names.append(name + ".prof")
    return names


# --------------------------------------------------------------------------

def perl_check_all(verbose=True):
    tool = google_pprof()
    if tool is None:
        print("google-pprof not installed", file=sys.stderr)
        return 2
    probs = []
    with tempfile.TemporaryDirectory(prefix="gperf-perl-") as d:
        for name, c in cases().items():
            path = os.path.join(d, name + ".prof")
            c.write(path)
            got = perl_run(path, tool)
            pr = perl_check(c, path, tool)
            probs += pr
            if verbose:
                print("%-22s contract total %-5s perl model %-40s perl %s%s"
                      % (name, c.json.get("total_samples", "FATAL"),
                         c.perl[0] if c.perl[0] is not None else c.perl[1],
                         got[0] if got[0] is not None else got[1],
                         "  <-- MISMATCH" if pr else ""))
    for p in probs:
        print(p, file=sys.stderr)
    return 1 if probs else 0


def perl_sweep(step=7, names=("small-be32", "base", "zeropc-depth1-le32",
                                 "hdr4-le64")):
    """The model against google-pprof on every step-th cut of some cases
    (slow: one perl run per cut)."""
    tool = google_pprof()
    if tool is None:
        print("google-pprof not installed", file=sys.stderr)
        return 2
    cs = cases()
    probs = []
    n = 0
    with tempfile.TemporaryDirectory(prefix="gperf-perl-sweep-") as d:
        path = os.path.join(d, "cut.prof")
        for name in names:
            c = cs[name]
            for k in range(0, len(c.full) + 1, step):
                t = truncate(c, k)
                t.write(path)
                probs += perl_check(t, path, tool)
                n += 1
    print("%d cuts checked, %d problems" % (n, len(probs)))
    for p in probs:
        print(p, file=sys.stderr)
    return 1 if probs else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?", help="write the cases + .json here")
    ap.add_argument("--perl-check", action="store_true",
                    help="compare the perl model with google-pprof")
    ap.add_argument("--perl-sweep", metavar="STEP", type=int,
                    help="compare the perl model with google-pprof on every "
                    "STEP-th truncation of a few cases (slow)")
    ap.add_argument("--seeds", metavar="DIR", help="write the fuzz seeds")
    a = ap.parse_args(argv)
    if not (a.outdir or a.perl_check or a.seeds or a.perl_sweep):
        ap.error("nothing to do")
    rc = 0
    if a.outdir:
        cs = cases(a.outdir)
        print("%d cases written to %s" % (len(cs), a.outdir))
    if a.seeds:
        print("\n".join(seeds(a.seeds)))
    if a.perl_check:
        rc = perl_check_all()
    if a.perl_sweep:
        rc = perl_sweep(a.perl_sweep) or rc
    return rc


if __name__ == "__main__":
    sys.exit(main())
