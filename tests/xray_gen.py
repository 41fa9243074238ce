#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writer of synthetic LLVM XRay traces for tests.

Stdlib only.  Formats as LLVM 14 writes and reads them (compiler-rt/lib/xray,
llvm/lib/XRay, llvm/docs/XRayFDRFormat.rst):

  header (32 bytes): u16 version, u16 type (0 basic, 1 FDR), u32 flags,
      u64 cycle_frequency, FDR: u64 buffer_size + 8 unused bytes
  FDR v1:  header | {NewBuffer WallClock NewCPUId body EndOfBuffer filler}
           each buffer exactly buffer_size bytes
  FDR v2:  header | {BufferExtents(n) | n bytes: NewBuffer WallClock NewCPUId body}
  FDR v3+: as v2 with a PID record after WallClock
  metadata record: 16 bytes, byte0 = (kind << 1) | 1, payload at +1, unused
      bytes uninitialised (random garbage here unless padding="zero")
  function record: 8 bytes, u32 w = (func_id << 4) | (action << 1) | 0,
      u32 tsc delta (unsigned)
  events: custom v1-v3 {i32 size, u64 tsc}, v4 {i32 size, u64 tsc, u16 cpu},
      v5 {i32 size, i32 delta}; typed v5 {i32 size, i32 delta, u16 type},
      v3/v4 {i32 size, u64 tsc, u16 type}; then `size` payload bytes
  basic v1-v3: 32-byte records, NORMAL {u16 0, u8 cpu, u8 action, i32 func_id,
      u64 tsc, u32 tid, u32 pid (v3; padding before), 8 unused} and
      ARG_PAYLOAD {u16 1, 2 pad, i32 func_id, u32 tid, u32 pid, u64 arg,
      8 unused}, written as interleaved per-thread chunks.

Big-endian traces byte-swap every multi-byte field.  Choice for FDR function
records: LLVM's reader only implements the little-endian bit layout (it
reads the first byte for the metadata discriminant, then the 32-bit word in
the file's byte order and applies the LE bitfield layout), so a big-endian
function record here is the word (func_id << 4) | (action << 1) | 0 written
as a big-endian u32, and a metadata record's first byte is (kind << 1) | 1
written as a plain byte.  With this layout the discriminant byte (the first
byte in the file) holds bits 20-27 of the function id, so its bit 0 is the
id's bit 20: big-endian traces must use function ids with bit 20 clear
(FdrTrace refuses others).  llvm-xray decodes these files the same way.

Model.  FdrTrace.buffer() returns an FdrBuffer to which records are added
with *absolute* TSCs (enter/exit/tail_exit/enter_arg/custom/typed, plus
explicit cpu()/wrap()/call_arg()/raw()).  The writer emits the deltas,
inserting NewCPUId when the CPU changes and TSCWrap when a function record's
delta does not fit in u32 (or time goes backwards) and when a v5 event's
delta does not fit in i32.  Buffers are written in the order they were
created, which need not be time order.  BasicTrace.thread() returns a
thread to which records are added; BasicTrace.flush(thread, n) writes the
thread's next n records as one chunk.

build() returns a Case: the bytes plus every record as written (Item: kind,
offset, size, expected JSON fields of `perfgraft dump --json`).  Damage
helpers (truncate, bad_metadata_kind, bad_event_size, extents_past_eof,
basic_bad_record, header-level helpers, and the typed_extents_bug /
v1 no-EndOfBuffer model options) return new Cases whose expectations say
which records survive and at which byte offsets a warning must be issued.
cases(outdir) writes the edge-case set used by test_xray_edge.py;
seeds(outdir) writes the fuzz seed corpus; llvm_check(case, path) compares
a case with `llvm-xray convert -f yaml` and `llvm-xray fdr-dump`.

    python3 tests/xray_gen.py --seeds fuzz/corpus-xray
    python3 tests/xray_gen.py --llvm-check      # cross-check with llvm-xray
    python3 tests/xray_gen.py --cases DIR       # write the cases + .json
"""

import argparse
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HEADER_SIZE = 32
META_SIZE = 16
FUNC_SIZE = 8
BASIC_SIZE = 32

TYPE_BASIC = 0
TYPE_FDR = 1

# FDR metadata kinds
MK_NEW_BUFFER = 0
MK_END_OF_BUFFER = 1
MK_NEW_CPU = 2
MK_TSC_WRAP = 3
MK_WALLCLOCK = 4
MK_CUSTOM = 5
MK_CALL_ARG = 6
MK_EXTENTS = 7
MK_TYPED = 8
MK_PID = 9

A_ENTER, A_EXIT, A_TAIL_EXIT, A_ENTER_ARG = 0, 1, 2, 3
ACTION_KIND = {0: "enter", 1: "exit", 2: "tail_exit", 3: "enter_arg"}

U32_MAX = 0xFFFFFFFF
I32_MAX = 0x7FFFFFFF
I32_MIN = -0x80000000
FDR_ID_MASK = (1 << 28) - 1

FUNCTION_KINDS = ("enter", "exit", "tail_exit", "enter_arg")
EVENT_KINDS = ("custom_event", "typed_event")
TIMED_KINDS = FUNCTION_KINDS + EVENT_KINDS


# Bit layout of big-endian FDR records.  "llvm" (the default, what
# llvm-xray decodes): metadata byte0 = (kind << 1) | 1, function word
# (func_id << 4) | (action << 1) as a BE u32.  "rst": the layout
# XRayFDRFormat.rst describes for big-endian bitfields (discriminant in the
# most significant bit: metadata byte0 = 0x80 | kind, function word
# (action << 28) | func_id), which llvm-xray does not implement; only for
# experiments (XRAY_GEN_BE_BITS=rst).
BE_BITS = os.environ.get("XRAY_GEN_BE_BITS", "llvm")


def meta_byte(bo, kind):
    if bo == ">" and BE_BITS == "rst":
        return 0x80 | (kind & 0x7F)
    return ((kind << 1) | 1) & 0xFF


def is_metadata_byte(bo, b):
    if bo == ">" and BE_BITS == "rst":
        return bool(b & 0x80)
    return bool(b & 1)


def _bo(byte_order):
    if byte_order in ("<", "little", "le"):
        return "<"
    if byte_order in (">", "big", "be"):
        return ">"
    raise ValueError("byte order %r" % (byte_order,))


# --------------------------------------------------------------------------
# Records as written

class Item:
    """One record in the file.  kind is the JSON kind of `dump --json`;
    fields are the JSON fields expected besides offset/kind/size.  buf is
    the FDR buffer (or basic chunk) index; key is (pid, tid) for function
    and event records.  Function records that may take arguments keep their
    CallArgument / ARG_PAYLOAD items in children."""

    def __init__(self, kind, offset, size, fields=None, buf=None, key=None,
                 action=None, check_size=True):
        self.kind = kind
        self.offset = offset
        self.size = size
        self.fields = dict(fields or {})
        self.buf = buf
        self.key = key
        self.action = action
        self.children = None
        self.parent = None
        self.check_size = check_size
        self.idx = None

    @property
    def end(self):
        return self.offset + self.size

    @property
    def timed(self):
        return self.kind in TIMED_KINDS

    def __repr__(self):
        return "Item(%s@%d+%d %r)" % (self.kind, self.offset, self.size, self.fields)


class Case:
    """A trace and what `perfgraft dump --json` must say about it.

    data: the file bytes.  items: every record as written (file order).
    bufs: [(start, end)] byte range of each FDR buffer / basic chunk.
    Expectations (derived by records()/time_order()/summary()):
      cuts {buf: offset}: the buffer's records ending after offset are lost
          (damage: the rest of the buffer is skipped);
      dropped: item indexes lost (basic damage skips one record);
      a record is also lost when it does not end inside the file.
      exit: expected exit status; warn: list of sets of offsets, each set
      must be named ("offset N") by at least one warning; clean: no warning
      at all; truncated: True / False / None (unknown) for truncated_bytes;
      damaged: expected damaged_buffers or None; extra_ok: [(lo, hi, kinds)]
      ranges in which the reader may list additional file-order records of
      those kinds (the skipped rest of a damaged buffer).
    llvm: whether llvm-xray 14 can read it (cross-check); llvm_note: why
    not, or which fields it gets wrong."""

    def __init__(self, name, data, mode, version, byte_order, header, items,
                 bufs):
        self.name = name
        self.data = bytes(data)
        self.mode = mode
        self.version = version
        self.byte_order = byte_order
        self.header = header
        self.items = items
        for i, it in enumerate(items):
            it.idx = i
        self.bufs = bufs
        self.cuts = {}
        self.dropped = set()
        self.exit = 0
        self.warn = []
        self.clean = True
        self.truncated = False
        self.damaged = 0
        self.extra_ok = []
        self.llvm = True
        self.llvm_note = ""
        self.summary_override = {}
        self.trunc_warn = False
        self.value_override = {}    # offset -> "value" of a patched record

    # -- derivation -----------------------------------------------------
    def copy(self, name, data=None):
        c = Case(name, self.data if data is None else data, self.mode,
                 self.version, self.byte_order, dict(self.header), self.items,
                 list(self.bufs))
        c.cuts = dict(self.cuts)
        c.dropped = set(self.dropped)
        c.exit = self.exit
        c.warn = [set(w) for w in self.warn]
        c.clean = self.clean
        c.truncated = self.truncated
        c.damaged = self.damaged
        c.extra_ok = list(self.extra_ok)
        c.llvm = self.llvm
        c.llvm_note = self.llvm_note
        c.summary_override = dict(self.summary_override)
        c.trunc_warn = self.trunc_warn
        c.value_override = dict(self.value_override)
        return c

    def kept(self, it):
        if self.exit != 0:
            return False
        if it.end > len(self.data) or it.idx in self.dropped:
            return False
        if it.buf in self.cuts and it.end > self.cuts[it.buf]:
            return False
        return True

    def expected_json(self, it):
        d = {"offset": it.offset, "kind": it.kind}
        if it.check_size:
            d["size"] = it.size
        d.update(it.fields)
        if it.offset in self.value_override and "value" in d:
            d["value"] = self.value_override[it.offset]
        if it.children is not None:
            args = [c.fields["value"] for c in it.children if self.kept(c)]
            if it.action == A_ENTER_ARG or args:
                d["kind"] = "enter_arg"
                d["args"] = args
                d.pop("size", None)
            else:
                d["kind"] = "enter"
        return d

    def records(self):
        """Expected file-order records (every kind)."""
        return [self.expected_json(it) for it in self.items if self.kept(it)]

    def timed(self):
        return [it for it in self.items if it.timed and self.kept(it)]

    def time_order(self):
        """{(pid, tid): [records]}: each thread's function and event records,
        its buffers (chunks) ordered by their first TSC."""
        groups = {}
        for it in self.timed():
            groups.setdefault(it.key, {}).setdefault(it.buf, []).append(it)
        out = {}
        for key, bufs in groups.items():
            order = sorted(bufs.items(),
                           key=lambda kv: (kv[1][0].fields["tsc"], kv[0]))
            out[key] = [self.expected_json(it) for _, its in order for it in its]
        return out

    def counts(self):
        recs = [self.expected_json(it) for it in self.timed()]
        c = {k: 0 for k in TIMED_KINDS}
        nargs = 0
        for r in recs:
            c[r["kind"]] += 1
            nargs += len(r.get("args", []))
        orphans = sum(1 for it in self.items
                      if it.kind == "call_arg" and it.parent is None
                      and self.kept(it))
        if self.mode == "fdr":
            buffers = sum(1 for s, _ in self.bufs if s < len(self.data))
        else:
            # basic: chunks are runs of one thread's records
            buffers = 0
            prev = None
            for it in self.timed():
                if it.key != prev:
                    buffers += 1
                prev = it.key
        return dict(records=len(recs), enter=c["enter"],
                    enter_arg=c["enter_arg"], arg_values=nargs,
                    exits=c["exit"], tail_exits=c["tail_exit"],
                    custom=c["custom_event"], typed=c["typed_event"],
                    threads=len(set(it.key for it in self.timed())),
                    orphan_args=orphans, buffers=buffers)

    def summary(self):
        """Exact expected summary fields (those with a fixed meaning)."""
        c = self.counts()
        s = {k: c[k] for k in ("records", "exits", "tail_exits", "custom",
                               "typed", "threads", "orphan_args")}
        if self.clean and not self.truncated and not self.damaged:
            s["buffers"] = c["buffers"]
            s["damaged_buffers"] = 0
            s["truncated_bytes"] = 0
        elif self.damaged is not None and self.damaged > 0:
            s["damaged_buffers"] = self.damaged
        s.update(self.summary_override)
        return s

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.data)

    def describe(self):
        return {"name": self.name, "mode": self.mode, "version": self.version,
                "byte_order": self.byte_order, "size": len(self.data),
                "header": self.header, "exit": self.exit,
                "warn": [sorted(w) for w in self.warn], "clean": self.clean,
                "records": self.records(),
                "time_order": {"%d/%d" % k: v for k, v in
                               sorted(self.time_order().items())},
                "summary": self.summary(), "counts": self.counts()}


def _header(version, type_, flags, freq, free, bo):
    return struct.pack(bo + "HHIQ", version, type_, flags, freq) + free


def _header_json(version, type_, flags, freq, buffer_size, bo):
    return {"version": version, "type": "fdr" if type_ == TYPE_FDR else "basic",
            "flags": flags & 3, "cycle_frequency": freq,
            "buffer_size": buffer_size,
            "byte_order": "little" if bo == "<" else "big"}


# --------------------------------------------------------------------------
# FDR

class FdrBuffer:
    def __init__(self, trace, tid, pid, wallclock, cpu, start_tsc, eob,
                 filler, extents_adjust, typed_extents_bug):
        self.trace = trace
        self.tid = tid
        self.pid = pid
        self.wallclock = wallclock
        self.cpu0 = cpu
        self.start_tsc = start_tsc
        self.eob = eob
        self.filler = filler
        self.extents_adjust = extents_adjust
        self.typed_extents_bug = typed_extents_bug
        self.ops = []

    def _fn(self, action, fid, tsc, cpu, args=(), style=None):
        self.ops.append(("fn", action, fid, tsc, cpu, list(args), style))
        return self

    def enter(self, fid, tsc, cpu=None):
        return self._fn(A_ENTER, fid, tsc, cpu)

    def exit(self, fid, tsc, cpu=None):
        return self._fn(A_EXIT, fid, tsc, cpu)

    def tail_exit(self, fid, tsc, cpu=None):
        return self._fn(A_TAIL_EXIT, fid, tsc, cpu)

    def enter_arg(self, fid, tsc, args, cpu=None, style=None):
        """style "action3" (EnterArg, the v5 writer) or "enter" (plain Enter
        followed by CallArgument, the v1-v3 writers); default by version."""
        return self._fn(A_ENTER_ARG, fid, tsc, cpu, args, style)

    def custom(self, tsc, data, cpu=None):
        self.ops.append(("custom", tsc, bytes(data), cpu))
        return self

    def typed(self, tsc, data, event_type, cpu=None):
        self.ops.append(("typed", tsc, bytes(data), event_type, cpu))
        return self

    def cpu(self, cpu, tsc):
        """Explicit NewCPUId (CPU migration)."""
        self.ops.append(("cpu", cpu, tsc))
        return self

    def wrap(self, tsc):
        """Explicit TSCWrap."""
        self.ops.append(("wrap", tsc))
        return self

    def call_arg(self, value):
        """A CallArgument record where it is written (orphan unless it
        directly follows an enter)."""
        self.ops.append(("callarg", value))
        return self

    def raw(self, data):
        """Bytes written verbatim (not described by any expected record)."""
        self.ops.append(("raw", bytes(data)))
        return self


class FdrTrace:
    def __init__(self, version=5, byte_order="<", buffer_size=4096,
                 cycle_frequency=1000000000, flags=3, padding="random",
                 seed=1, header_free=None):
        if version < 1:
            raise ValueError("FDR version %d" % version)
        self.version = version
        self.bo = _bo(byte_order)
        self.buffer_size = buffer_size
        self.freq = cycle_frequency
        self.flags = flags
        self.padding = padding
        self.rng = random.Random(seed)
        self.buffers = []
        self.header_free = header_free

    def buffer(self, tid, pid=None, wallclock=(1, 0), cpu=None,
               start_tsc=None, eob=True, filler="random", extents_adjust=0,
               typed_extents_bug=False):
        """A new thread buffer.  cpu/start_tsc: the preamble NewCPUId
        (default: the first record's cpu (0) and TSC, so that record has
        delta 0).  v1: eob=False leaves the buffer unclosed; filler is
        "random" (garbage), "records" (decodable function records, which
        llvm-xray can skip) or bytes (its first bytes; random after).
        v2+: extents_adjust is added to the BufferExtents value;
        typed_extents_bug emulates LLVM 14 (extents 16 bytes short per typed
        event, and only that many bytes written)."""
        b = FdrBuffer(self, tid, tid if pid is None else pid, wallclock, cpu,
                      start_tsc, eob, filler, extents_adjust,
                      typed_extents_bug)
        self.buffers.append(b)
        return b

    # -- encoding ---------------------------------------------------------
    def _pad(self, n):
        if self.padding == "zero":
            return bytes(n)
        return bytes(self.rng.getrandbits(8) for _ in range(n))

    def meta(self, kind, fields=()):
        """16-byte metadata record; fields [(offset, fmt, value)], offsets
        from the record start (payload at +1)."""
        rec = bytearray(bytes([meta_byte(self.bo, kind)]) + self._pad(15))
        for off, fmt, val in fields:
            struct.pack_into(self.bo + fmt, rec, off, val)
        return bytes(rec)

    def func(self, action, fid, delta):
        if self.bo == ">" and BE_BITS == "rst":
            w = ((action & 7) << 28) | (fid & FDR_ID_MASK)
            return struct.pack(">II", w, delta & U32_MAX)
        if self.bo == ">" and fid & (1 << 20):
            raise ValueError("big-endian FDR function id 0x%x has bit 20 set: "
                             "its first byte would read as metadata" % fid)
        w = ((fid & FDR_ID_MASK) << 4) | ((action & 7) << 1)
        return struct.pack(self.bo + "II", w, delta & U32_MAX)

    def header(self):
        free = self.header_free
        if free is None:
            free = struct.pack(self.bo + "Q", self.buffer_size) + bytes(8)
        return _header(self.version, TYPE_FDR, self.flags, self.freq, free,
                       self.bo)

    def header_json(self):
        return _header_json(self.version, TYPE_FDR, self.flags, self.freq,
                            self.buffer_size, self.bo)

    def _body(self, b, bi, base, items):
        """Encodes buffer b's records from NewBuffer on; offsets from base."""
        v = self.version
        out = bytearray()
        pid = b.pid if v >= 3 else b.tid
        key = (pid, b.tid)

        def add(data, kind=None, size=None, fields=None, **kw):
            it = None
            if kind is not None:
                it = Item(kind, base + len(out), len(data) if size is None else size,
                          fields, buf=bi, **kw)
                items.append(it)
            out.extend(data)
            return it

        add(self.meta(MK_NEW_BUFFER, [(1, "i", b.tid)]), "new_buffer",
            fields={"tid": b.tid})
        sec, usec = b.wallclock
        add(self.meta(MK_WALLCLOCK, [(1, "Q", sec), (9, "I", usec)]),
            "wallclock", fields={"seconds": sec, "usec": usec})
        if v >= 3:
            add(self.meta(MK_PID, [(1, "i", b.pid)]), "pid",
                fields={"pid": b.pid})
        first_tsc = None
        first_cpu = 0
        for op in b.ops:
            if op[0] in ("fn", "custom", "typed"):
                first_tsc = op[3] if op[0] == "fn" else op[1]
                c = op[4] if op[0] in ("fn", "typed") else op[3]
                first_cpu = 0 if c is None else c
                break
            if op[0] in ("cpu", "wrap"):
                break
        cpu = b.cpu0 if b.cpu0 is not None else first_cpu
        cur = b.start_tsc if b.start_tsc is not None else (first_tsc or 0)
        add(self.meta(MK_NEW_CPU, [(1, "H", cpu), (3, "Q", cur)]), "new_cpu",
            fields={"cpu": cpu, "tsc": cur})
        last_fn = None          # function record CallArgument may follow
        for op in b.ops:
            t = op[0]
            if t == "fn":
                _, action, fid, tsc, ocpu, args, style = op
                if ocpu is not None and ocpu != cpu:
                    cpu = ocpu
                    cur = tsc
                    add(self.meta(MK_NEW_CPU, [(1, "H", cpu), (3, "Q", cur)]),
                        "new_cpu", fields={"cpu": cpu, "tsc": cur})
                d = tsc - cur
                if d < 0 or d > U32_MAX:
                    cur = tsc
                    add(self.meta(MK_TSC_WRAP, [(1, "Q", cur)]), "tsc_wrap",
                        fields={"tsc": cur})
                    d = 0
                cur += d
                wact = action
                if action == A_ENTER_ARG:
                    if style is None:
                        style = "action3" if v >= 5 else "enter"
                    wact = A_ENTER_ARG if style == "action3" else A_ENTER
                fields = {"func_id": fid & FDR_ID_MASK, "tsc": cur,
                          "pid": pid, "tid": b.tid, "cpu": cpu, "delta": d}
                it = add(self.func(wact, fid, d), ACTION_KIND[action],
                         fields=fields, key=key, action=wact)
                if wact in (A_ENTER, A_ENTER_ARG):
                    it.children = []
                    last_fn = it
                else:
                    last_fn = None
                for a in args:
                    c = add(self.meta(MK_CALL_ARG, [(1, "Q", a)]), "call_arg",
                            fields={"value": a})
                    c.parent = it
                    it.children.append(c)
                continue
            if t == "callarg":
                c = add(self.meta(MK_CALL_ARG, [(1, "Q", op[1])]), "call_arg",
                        fields={"value": op[1]})
                if last_fn is not None:
                    c.parent = last_fn
                    last_fn.children.append(c)
                continue
            last_fn = None
            if t == "cpu":
                cpu, cur = op[1], op[2]
                add(self.meta(MK_NEW_CPU, [(1, "H", cpu), (3, "Q", cur)]),
                    "new_cpu", fields={"cpu": cpu, "tsc": cur})
            elif t == "wrap":
                cur = op[1]
                add(self.meta(MK_TSC_WRAP, [(1, "Q", cur)]), "tsc_wrap",
                    fields={"tsc": cur})
            elif t == "raw":
                add(op[1])
            elif t in ("custom", "typed"):
                if t == "custom":
                    _, tsc, data, ocpu = op
                    etype = None
                else:
                    _, tsc, data, etype, ocpu = op
                    if v < 3:
                        raise ValueError("typed events need FDR v3+")
                if ocpu is not None and ocpu != cpu:
                    cpu = ocpu
                    cur = tsc
                    add(self.meta(MK_NEW_CPU, [(1, "H", cpu), (3, "Q", cur)]),
                        "new_cpu", fields={"cpu": cpu, "tsc": cur})
                fields = {"tsc": tsc, "pid": pid, "tid": b.tid, "cpu": cpu,
                          "payload_size": len(data), "data": data.hex()}
                if v >= 5:
                    d = tsc - cur
                    if d < I32_MIN or d > I32_MAX or (d < 0 and not self.signed_event_deltas):
                        cur = tsc
                        add(self.meta(MK_TSC_WRAP, [(1, "Q", cur)]),
                            "tsc_wrap", fields={"tsc": cur})
                        d = 0
                    cur += d
                    fields["delta"] = d
                    if t == "custom":
                        m = self.meta(MK_CUSTOM, [(1, "i", len(data)), (5, "i", d)])
                    else:
                        m = self.meta(MK_TYPED, [(1, "i", len(data)), (5, "i", d),
                                                 (9, "H", etype)])
                else:
                    if t == "custom":
                        f = [(1, "i", len(data)), (5, "Q", tsc)]
                        if v == 4:
                            f.append((13, "H", cpu))
                        m = self.meta(MK_CUSTOM, f)
                    else:
                        m = self.meta(MK_TYPED, [(1, "i", len(data)), (5, "Q", tsc),
                                                 (13, "H", etype)])
                if etype is not None:
                    fields["event_type"] = etype
                add(m + data, "custom_event" if t == "custom" else "typed_event",
                    fields=fields, key=key)
            else:
                raise ValueError(op)
        return bytes(out)

    signed_event_deltas = False

    def build(self, name="fdr"):
        v = self.version
        out = bytearray(self.header())
        items = []
        bufs = []
        crossing = []
        for bi, b in enumerate(self.buffers):
            start = len(out)
            if v == 1:
                body = bytearray(self._body(b, bi, start, items))
                if b.eob:
                    items.append(Item("end_of_buffer", start + len(body),
                                      META_SIZE, buf=bi))
                    body += self.meta(MK_END_OF_BUFFER)
                nfill = self.buffer_size - len(body)
                if nfill < 0:
                    raise ValueError("buffer %d: %d bytes > buffer_size %d"
                                     % (bi, len(body), self.buffer_size))
                fill = self._filler(b.filler, nfill)
                if nfill and b.eob:
                    items.append(Item("skipped", start + len(body), nfill,
                                      buf=bi))
                body += fill
                out += body
            else:
                base = start + META_SIZE
                bitems = []
                body = self._body(b, bi, base, bitems)
                n = len(body)
                if b.typed_extents_bug:
                    ntyped = sum(1 for it in bitems if it.kind == "typed_event")
                    n -= 16 * ntyped
                    body = body[:n]
                    lost = [it for it in bitems if it.offset >= base + n]
                    for it in lost:
                        if it.parent is not None:
                            it.parent.children.remove(it)
                    bitems = [it for it in bitems if it.offset < base + n]
                    crossing.extend(it for it in bitems if it.end > base + n)
                n += b.extents_adjust
                items.append(Item("buffer_extents", start, META_SIZE,
                                  {"value": n}, buf=bi))
                items.extend(bitems)
                out += self.meta(MK_EXTENTS, [(1, "Q", n)]) + body
            bufs.append((start, len(out)))
        for it in items:
            if it.children is not None:
                it.children.sort(key=lambda c: c.offset)
        items.sort(key=lambda it: it.offset)
        case = Case(name, out, "fdr", v, "little" if self.bo == "<" else "big",
                    self.header_json(), items, bufs)
        if v == 1:
            case.llvm = all(b.filler == "records" for b in self.buffers)
            if not case.llvm:
                case.llvm_note = "v1 filler garbage is not decodable by llvm-xray"
        for it in crossing:
            # written in part (the typed-event extents bug): dropped, with a
            # warning naming the record
            case.dropped.add(it.idx)
            case.warn.append({it.offset})
            case.clean = False
            case.damaged = None
            case.llvm = False
            case.llvm_note = "llvm-xray: Buffer over-read"
        return case

    def _filler(self, spec, n):
        if n <= 0:
            return b""
        if spec == "records":
            if n % FUNC_SIZE:
                raise ValueError("records filler needs a multiple of 8 bytes (%d)" % n)
            out = bytearray()
            for _ in range(n // FUNC_SIZE):
                # bit 0 clear (function record), bit 3 clear (action <= 3)
                b0 = self.rng.getrandbits(8) & 0xF6
                out += bytes([b0]) + bytes(self.rng.getrandbits(8) for _ in range(7))
            if self.bo == ">":
                # big endian: the first byte is the word's MSB; build words
                out = bytearray()
                for _ in range(n // FUNC_SIZE):
                    fid = self.rng.getrandbits(20)
                    out += self.func(self.rng.randrange(3), fid,
                                     self.rng.getrandbits(32))
            return bytes(out)
        head = b""
        if isinstance(spec, (bytes, bytearray)):
            head = bytes(spec[:n])
        return head + bytes(self.rng.getrandbits(8) for _ in range(n - len(head)))


# --------------------------------------------------------------------------
# basic mode

class BasicThread:
    def __init__(self, trace, tid, pid):
        self.trace = trace
        self.tid = tid
        self.pid = pid
        self.recs = []          # [(action, fid, tsc, cpu, args)]
        self.pos = 0

    def _add(self, action, fid, tsc, cpu, args=()):
        self.recs.append((action, fid, tsc, cpu, list(args)))
        return self

    def enter(self, fid, tsc, cpu=0):
        return self._add(A_ENTER, fid, tsc, cpu)

    def exit(self, fid, tsc, cpu=0):
        return self._add(A_EXIT, fid, tsc, cpu)

    def tail_exit(self, fid, tsc, cpu=0):
        return self._add(A_TAIL_EXIT, fid, tsc, cpu)

    def enter_arg(self, fid, tsc, args, cpu=0):
        return self._add(A_ENTER_ARG, fid, tsc, cpu, args)


class BasicTrace:
    def __init__(self, version=3, byte_order="<", cycle_frequency=1000000000,
                 flags=0xFF, padding="random", seed=1):
        self.version = version
        self.bo = _bo(byte_order)
        self.freq = cycle_frequency
        self.flags = flags
        self.padding = padding
        self.rng = random.Random(seed)
        self.threads = []
        self.layout = []        # [(thread, first record, count)]
        self.orphan_at = {}     # chunk position -> [(fid, tid, pid, arg)]

    def thread(self, tid, pid=None):
        t = BasicThread(self, tid, tid if pid is None else pid)
        self.threads.append(t)
        return t

    def flush(self, th, n=None):
        """Writes th's next n records (all remaining when None) as a chunk."""
        if n is None:
            n = len(th.recs) - th.pos
        self.layout.append((th, th.pos, n))
        th.pos += n

    def orphan_payload(self, fid, tid, pid, arg):
        """An ARG_PAYLOAD record written by itself, as the next chunk."""
        self.layout.append(("orphan", (fid, tid, pid, arg)))

    def _pad(self, n):
        if self.padding == "zero":
            return bytes(n)
        return bytes(self.rng.getrandbits(8) for _ in range(n))

    def normal(self, action, fid, tsc, cpu, tid, pid):
        p = pid if self.version >= 3 else struct.unpack(
            self.bo + "I", self._pad(4))[0]
        return struct.pack(self.bo + "HBBIQII", 0, cpu, action,
                           fid & U32_MAX, tsc, tid, p) + self._pad(8)

    def payload(self, fid, tid, pid, arg):
        return (struct.pack(self.bo + "H", 1) + self._pad(2)
                + struct.pack(self.bo + "IIIQ", fid & U32_MAX, tid, pid, arg)
                + self._pad(8))

    def header(self):
        return _header(self.version, TYPE_BASIC, self.flags, self.freq,
                       bytes(16), self.bo)

    def header_json(self):
        return _header_json(self.version, TYPE_BASIC, self.flags, self.freq,
                            0, self.bo)

    def build(self, name="basic"):
        for th in self.threads:
            if th.pos != len(th.recs):
                self.flush(th)
        v = self.version
        out = bytearray(self.header())
        items = []
        bufs = []
        for ci, ent in enumerate(self.layout):
            start = len(out)
            if ent[0] == "orphan":
                fid, tid, pid, arg = ent[1]
                items.append(Item("call_arg", len(out), BASIC_SIZE,
                                  {"value": arg}, buf=ci))
                out += self.payload(fid, tid, pid if v >= 3 else
                                    self.rng.getrandbits(32), arg)
                bufs.append((start, len(out)))
                continue
            th, first, n = ent
            pid = th.pid if v >= 3 else th.tid
            for action, fid, tsc, cpu, args in th.recs[first:first + n]:
                it = Item(ACTION_KIND[action], len(out), BASIC_SIZE,
                          {"func_id": fid & U32_MAX, "tsc": tsc, "pid": pid,
                           "tid": th.tid, "cpu": cpu},
                          buf=ci, key=(pid, th.tid), action=action)
                items.append(it)
                out += self.normal(action, fid, tsc, cpu, th.tid, th.pid)
                if action in (A_ENTER, A_ENTER_ARG):
                    it.children = []
                for a in args:
                    c = Item("call_arg", len(out), BASIC_SIZE, {"value": a},
                             buf=ci)
                    c.parent = it
                    it.children.append(c)
                    items.append(c)
                    ppid = th.pid if v >= 3 else self.rng.getrandbits(32)
                    out += self.payload(fid, th.tid, ppid, a)
            bufs.append((start, len(out)))
        case = Case(name, out, "basic", v, "little" if self.bo == "<" else "big",
                    self.header_json(), items, bufs)
        if len(out) == HEADER_SIZE:
            case.llvm = False
            case.llvm_note = "llvm-xray rejects a header-only basic log (#57657)"
        return case


# --------------------------------------------------------------------------
# damage helpers (each returns a new Case)

def buf_of(case, offset):
    for i, (s, e) in enumerate(case.bufs):
        if s <= offset < e:
            return i
    return None


def _cut(case, bi, off):
    """Buffer bi loses its records from offset off on; the reader may list
    `skipped` records for the rest of the buffer."""
    if bi in case.cuts:
        off = min(off, case.cuts[bi])
    case.cuts[bi] = off
    end = case.bufs[bi][1]
    case.extra_ok.append((off, end, ("skipped",)))


def truncate(case, n, name=None):
    """The first n bytes.  Expectations: exit 1 below 32 bytes; every record
    ending at or before n kept; a warning (offset unspecified) and
    truncated_bytes > 0 when n cuts into a buffer's declared bytes (v2+),
    a v1 buffer stride, or a basic record; a clean run otherwise."""
    c = case.copy(name or "%s-trunc%d" % (case.name, n), case.data[:n])
    c.llvm = False
    c.llvm_note = "truncated"
    if n < HEADER_SIZE:
        c.exit = 1
        c.clean = False
        c.truncated = None
        c.damaged = None
        return c
    c.warn = [w for w in c.warn if all(o < n for o in w)]
    c.trunc_warn = False
    bi = buf_of(case, n) if n < len(case.data) else None
    if n >= len(case.data):
        return c
    inside = False
    if bi is not None:
        s, e = case.bufs[bi]
        if case.mode == "basic":
            inside = (n - HEADER_SIZE) % BASIC_SIZE != 0
        else:
            inside = n != s     # a buffer started and is cut
        if inside:
            _cut(c, bi, n)
    c.truncated = True if inside else False
    c.trunc_warn = inside
    if inside and case.mode == "fdr" and case.version == 1:
        # a cut in the filler after EndOfBuffer loses no record: whether it
        # is reported is the reader's choice
        eob = [it for it in case.items if it.buf == bi and it.kind == "end_of_buffer"]
        if eob and n >= eob[0].end:
            c.trunc_warn = None
            c.truncated = None
    c.clean = not inside and c.clean
    c.damaged = None
    return c


def bad_metadata_kind(case, offset, kind=10, name=None):
    """Turns the metadata record at offset into kind (>= 10: invalid).  The
    rest of its buffer is lost, a warning names offset."""
    it = _item_at(case, offset)
    bo = "<" if case.byte_order == "little" else ">"
    if it is None or not is_metadata_byte(bo, case.data[offset]):
        raise ValueError("no metadata record at %d" % offset)
    d = bytearray(case.data)
    d[offset] = meta_byte(bo, kind)
    c = case.copy(name or "%s-badkind%d" % (case.name, offset), bytes(d))
    _damage(c, offset)
    return c


def bad_event_size(case, offset, size, name=None):
    """Sets the size field of the custom/typed event at offset (size <= 0
    or larger than the buffer).  The rest of its buffer is lost."""
    it = _item_at(case, offset)
    if it is None or it.kind not in EVENT_KINDS:
        raise ValueError("no event at %d" % offset)
    d = bytearray(case.data)
    bo = "<" if case.byte_order == "little" else ">"
    struct.pack_into(bo + "i", d, offset + 1, size)
    c = case.copy(name or "%s-evsize%d" % (case.name, offset), bytes(d))
    _damage(c, offset)
    if size > 0:
        # reads as a record crossing the buffer's end: whether that counts
        # as a damaged buffer is the reader's choice
        c.damaged = None
    return c


def extents_past_eof(case, extra=64, name=None):
    """The last buffer's BufferExtents claims `extra` more bytes than the
    file holds.  All its records are complete, so they are kept; a warning
    names the extents record or the end of the file."""
    if case.mode != "fdr" or case.version < 2:
        raise ValueError("needs FDR v2+")
    s, e = case.bufs[-1]
    ext = _item_at(case, s)
    d = bytearray(case.data)
    bo = "<" if case.byte_order == "little" else ">"
    struct.pack_into(bo + "Q", d, s + 1, ext.fields["value"] + extra)
    c = case.copy(name or "%s-extents-past-eof" % case.name, bytes(d))
    # the extents item is shared with the source case: override its value
    c.value_override[s] = ext.fields["value"] + extra
    c.warn.append({s, len(d)})
    c.clean = False
    c.truncated = True
    c.damaged = None
    c.llvm = False
    c.llvm_note = "damaged"
    return c


def basic_bad_record(case, offset, how="type", name=None):
    """Basic mode: makes the record at offset undecodable (how="type":
    record type 7; how="action": action 9).  Only that record is lost."""
    it = _item_at(case, offset)
    if it is None or it.children:
        raise ValueError("no plain basic record at %d" % offset)
    d = bytearray(case.data)
    bo = "<" if case.byte_order == "little" else ">"
    if how == "type":
        struct.pack_into(bo + "H", d, offset, 7)
    else:
        d[offset + 3] = 9
    c = case.copy(name or "%s-bad%s%d" % (case.name, how, offset), bytes(d))
    c.dropped.add(it.idx)
    c.warn.append({offset})
    c.clean = False
    c.damaged = None
    c.llvm = False
    c.llvm_note = "damaged"
    return c


def _item_at(case, offset):
    for it in case.items:
        if it.offset == offset:
            return it
    return None


def _damage(c, offset):
    bi = buf_of(c, offset)
    _cut(c, bi, offset)
    c.warn.append({offset})
    c.clean = False
    c.damaged = (c.damaged or 0) + 1
    c.llvm = False
    c.llvm_note = "damaged"


def header_case(name, version, type_, data_after=b"", bo="<", freq=1000000000,
                buffer_size=4096, flags=3, exit_=None):
    """A header (with arbitrary bytes after it): version/type as given."""
    free = struct.pack(_bo(bo) + "Q", buffer_size) + bytes(8) \
        if type_ == TYPE_FDR else bytes(16)
    data = _header(version, type_, flags, freq, free, _bo(bo)) + data_after
    ok = (type_ == TYPE_FDR and 1 <= version <= 5) or \
         (type_ == TYPE_BASIC and 1 <= version <= 3)
    c = Case(name, data, "fdr" if type_ == TYPE_FDR else "basic", version,
             "little" if _bo(bo) == "<" else "big",
             _header_json(version, type_, flags, freq,
                          buffer_size if type_ == TYPE_FDR else 0, _bo(bo)),
             [], [])
    c.exit = (0 if ok else 1) if exit_ is None else exit_
    c.clean = ok
    c.truncated = False if ok else None
    c.damaged = 0 if ok else None
    c.llvm = False
    c.llvm_note = "header only / unusable header"
    return c


# --------------------------------------------------------------------------
# sample traces

def fdr_sample(version, bo="<", padding="random", filler="random", seed=1,
               events=True, name=None):
    """Three threads (two sharing a tid in different processes for v3+),
    several buffers each, written out of time order; nested calls, tail
    exits, arguments (both styles), CPU migration, an unsigned delta above
    INT32_MAX, TSCWraps from u32 overflow, v5 event-delta wraps, the largest
    28-bit id, custom and typed events with odd payload sizes (v2+)."""
    bo = _bo(bo)
    v = version
    big = 0x0FFFFFFF if bo == "<" else 0x0FEFFFFF
    pl = (lambda s: s) if v >= 2 else (lambda s: (s + b"\0" * 8)[:8])
    t = FdrTrace(v, bo, buffer_size=512 if v == 1 else 16384,
                 cycle_frequency=2400000000, padding=padding, seed=seed)
    kw = dict(filler=filler) if v == 1 else {}
    pid = 4242
    # file order: 101 late, 102 early, 101 early, 102 late, (pid 5000, 101)
    b = t.buffer(101, pid, wallclock=(50, 999999), **kw)
    T = 20000000000
    b.enter(10, T).enter(11, T + 5).exit(11, T + 9)
    b.enter_arg(12, T + 20, [0xFFFFFFFFFFFFFFFF], style="enter")
    b.exit(12, T + 20).exit(10, T + 31)
    b.tail_exit(13, T + 40).enter(14, T + 41).exit(14, T + 50)

    b = t.buffer(102, pid, wallclock=(10, 5), start_tsc=1500000, **kw)
    T = 1500100
    b.enter(20, T).enter_arg(21, T + 3, [1, 2, 3], style="action3")
    if events:
        b.custom(T + 7, pl(b"custom!"))
    b.exit(21, T + 8)
    b.enter(22, T + 10, cpu=5).exit(22, T + 0x90000000, cpu=5)   # delta > INT32_MAX
    b.exit(20, T + 0x90000000 + 0x100000005, cpu=5)            # wrap (u32)
    if events and v >= 3:
        b.typed(T + 0x90000000 + 0x100000009, pl(b"typ"), 7, cpu=5)

    b = t.buffer(101, pid, wallclock=(10, 1), **kw)
    T = 1000000
    b.enter(1, T).enter(2, T + 100)
    b.enter_arg(3, T + 150, [7, 0x8000000000000000])
    b.exit(3, T + 400)
    if events:
        b.custom(T + 450, pl(b"hello"))
    b.exit(2, T + 600)
    b.cpu(3, T + 700)
    b.enter(big, T + 710).exit(big, T + 710)
    b.enter(4, T + 800).exit(4, T + 800 + 0xFFFFFFFF)           # max u32 delta
    b.enter(5, T + 800 + 0xFFFFFFFF + 0x100000000)              # wrap
    b.exit(5, T + 800 + 0xFFFFFFFF + 0x100000001)
    b.exit(1, T + 800 + 0xFFFFFFFF + 0x100000002)
    if events and v >= 5:
        # v5 events: i32 deltas; a gap above INT32_MAX wraps
        X = T + 800 + 0xFFFFFFFF + 0x100000002
        b.custom(X + 0x80000000, b"\x00\xff")
        b.typed(X + 0x80000010, b"z", 65535)

    b = t.buffer(102, pid, wallclock=(60, 0), **kw)
    T = 30000000000
    b.enter(23, T).tail_exit(23, T + 1).enter(24, T + 1).exit(24, T + 2)
    if events:
        b.custom(T + 3, pl(b"last-custom"), cpu=1)
    b.enter(25, T + 4, cpu=1).exit(25, T + 7, cpu=1)

    if v >= 3:
        b = t.buffer(101, 5000, wallclock=(11, 0), **kw)
        T = 1000050
        b.enter(30, T).exit(30, T + 1).enter(31, T + 1).exit(31, T + 1)
    return t.build(name or "fdr-v%d-%s" % (v, "le" if bo == "<" else "be"))


def basic_sample(version, bo="<", seed=2, name=None):
    bo = _bo(bo)
    t = BasicTrace(version, bo, cycle_frequency=3000000000, seed=seed)
    a = t.thread(201, 300)
    b = t.thread(202, 300)
    T = 5000000
    a.enter(1, T, cpu=1).enter_arg(2, T + 10, [42], cpu=1).exit(2, T + 20, cpu=1)
    a.enter(0xFFFFFFF0, T + 30, cpu=2).exit(0xFFFFFFF0, T + 31, cpu=2)
    if version >= 2:
        a.tail_exit(1, T + 40, cpu=2).enter(3, T + 40, cpu=2).exit(3, T + 50)
    else:
        a.exit(1, T + 40, cpu=2)
    b.enter(7, T + 15, cpu=255).enter(8, T + 16, cpu=255)
    b.enter_arg(9, T + 17, [0xFFFFFFFFFFFFFFFF], cpu=255)
    b.exit(9, T + 25, cpu=255).exit(8, T + 26).exit(7, T + 27)
    t.flush(a, 2)       # enter + enter_arg (its payload stays with it)
    t.flush(b, 3)
    t.flush(a)
    t.flush(b)
    return t.build(name or "basic-v%d-%s" % (version, "le" if bo == "<" else "be"))


def small_fdr_v5(bo="<"):
    """Small one-thread v5 trace for truncation sweeps."""
    t = FdrTrace(5, bo, buffer_size=4096, seed=3)
    b = t.buffer(7, 70, wallclock=(1, 2))
    b.enter(1, 100).enter_arg(2, 105, [99, 100]).custom(107, b"abc")
    b.exit(2, 110).typed(111, b"xy", 3).exit(1, 0x200000000)
    b = t.buffer(7, 70, wallclock=(3, 4))
    b.enter(3, 0x300000000).tail_exit(3, 0x300000001).exit(3, 0x300000002)
    return t.build("small-v5")


def long_calls_fdr(threads=1, gap_ns=59 * 10**9, stagger_ns=1):
    """Tiny FDR v5 trace (192 bytes for one thread) whose calls last long:
    per thread, main (id 1) calls f (id 2) for gap_ns, then g (id 3) for
    gap_ns, and returns; the threads (tids 7, 8, ...) start stagger_ns
    apart.  Sampled on a fixed grid, each thread's two calls alone are
    2 * gap_ns of samples (11.8 million at 100 kHz for 59 s)."""
    t = FdrTrace(5, buffer_size=4096, seed=12)
    for i in range(threads):
        b = t.buffer(7 + i, 70, wallclock=(1, 0))
        s = 1000 + i * stagger_ns
        b.enter(1, s).enter(2, s + 1).exit(2, s + gap_ns)
        b.enter(3, s + gap_ns + 1).exit(3, s + 2 * gap_ns).exit(1, s + 2 * gap_ns + 1)
    return t.build("long-calls-%d" % threads)


def long_call_beside_ticks():
    """FDR v5, 1 MHz ticks: tid 7 stays in main > f from 0.001 s to 61 s
    while tid 8 makes a short call every second up to 19 s, then nothing
    until one call at 45-46 s: a stack unchanged across many records of
    another thread, then two silent stretches (26 s and 15 s) that a
    --max-gap below them reports (tid 7's call stays open: sampled)."""
    t = FdrTrace(5, buffer_size=8192, seed=12, cycle_frequency=1000000)
    a = t.buffer(7, 70, wallclock=(1, 0))
    a.enter(1, 1000).enter(2, 1001).exit(2, 61000000).exit(1, 61000005)
    b = t.buffer(8, 70, wallclock=(1, 0))
    for i in range(20):
        b.enter(3, 1017 + i * 1000000).exit(3, 1500 + i * 1000000)
    b.enter(4, 45000000).exit(4, 46000000)
    return t.build("long-call-beside-ticks")


def small_basic_v3(bo="<"):
    t = BasicTrace(3, bo, seed=4)
    a = t.thread(11, 10)
    b = t.thread(12, 10)
    a.enter(1, 1000).enter_arg(2, 1001, [5]).exit(2, 1002)
    b.enter(3, 1000, cpu=1).exit(3, 1003, cpu=1)
    a.exit(1, 1004)
    t.flush(a, 2)
    t.flush(b)
    t.flush(a)
    return t.build("small-basic-v3")


# --------------------------------------------------------------------------
# case set

def _first(case, kind, buf=None, nth=0):
    got = [it for it in case.items if it.kind == kind
           and (buf is None or it.buf == buf)]
    return got[nth]


def cases(outdir=None):
    """Builds the edge-case set; writes NAME.xray into outdir when given.
    Returns {name: Case}."""
    out = {}

    def emit(c):
        if c.name in out:
            raise ValueError("duplicate case %s" % c.name)
        out[c.name] = c
        if outdir is not None:
            c.write(os.path.join(outdir, c.name + ".xray"))
        return c

    # --- well-formed traces, every version, both byte orders ------------
    base = {}
    for bo in ("<", ">"):
        for v in (1, 2, 3, 4, 5):
            base[(v, bo)] = emit(fdr_sample(v, bo))
        for v in (1, 2, 3):
            emit(basic_sample(v, bo))
    # llvm-xray-readable v1 (decodable filler) and zero padding
    for bo in ("<", ">"):
        emit(fdr_sample(1, bo, filler="records",
                        name="fdr-v1-%s-llvmfill" % ("le" if bo == "<" else "be")))
    emit(fdr_sample(5, "<", padding="zero", name="fdr-v5-le-zeropad"))
    emit(fdr_sample(3, "<", events=False, name="fdr-v3-le-noevents"))

    # v1-v3 argument style in v5 and v5 style in v3 (readers accept both)
    t = FdrTrace(5, seed=9)
    b = t.buffer(1, 2, wallclock=(1, 1))
    b.enter_arg(1, 10, [1], style="enter").exit(1, 11)
    b.enter_arg(2, 12, [2, 3], style="action3").exit(2, 13)
    b.enter_arg(3, 14, [], style="action3").exit(3, 15)
    emit(t.build("fdr-v5-arg-styles"))
    t = FdrTrace(3, seed=9)
    b = t.buffer(1, 2, wallclock=(1, 1))
    b.enter_arg(1, 10, [1], style="action3").exit(1, 11)
    emit(t.build("fdr-v3-enterarg-action3"))

    # v5 events with negative deltas (signed i32)
    t = FdrTrace(5, seed=10)
    t.signed_event_deltas = True
    b = t.buffer(1, 2, wallclock=(1, 1))
    b.enter(1, 1000).custom(990, b"neg").typed(980, b"n2", 1).exit(1, 1005)
    c = t.build("fdr-v5-negative-event-delta")
    c.llvm = True
    emit(c)

    # orphan CallArgument (after an exit)
    t = FdrTrace(5, seed=11)
    b = t.buffer(1, 2, wallclock=(1, 1))
    b.enter(1, 10).exit(1, 11).call_arg(77).enter(2, 12).exit(2, 13)
    c = t.build("fdr-v5-orphan-callarg")
    c.clean = False
    c.llvm = False
    c.llvm_note = ("llvm-xray attaches a CallArgument to whatever function "
                   "record precedes it: the exit becomes function-enter-arg")
    emit(c)

    # buffer with a start TSC below the first record (non-zero first delta)
    t = FdrTrace(4, seed=12)
    b = t.buffer(1, 2, wallclock=(1, 1), start_tsc=500, cpu=9)
    b.enter(1, 1500, cpu=9).custom(1600, b"v4cpu", cpu=9).exit(1, 1700, cpu=9)
    emit(t.build("fdr-v4-start-delta"))

    # v3/v4 events carry an absolute TSC that does not move the delta chain:
    # a thread whose last record is such an event ends at the event's TSC
    for v in (3, 4):
        t = FdrTrace(v, seed=20 + v)
        b = t.buffer(1, 2, wallclock=(1, 1))
        b.enter(1, 1000).exit(1, 1010).custom(1020, b"late").typed(1030, b"t", 5)
        c = t.build("fdr-v%d-event-last" % v)
        c.llvm = False
        c.llvm_note = "llvm-xray decodes typed events in the v5 layout only"
        emit(c)

    # cycle_frequency 0, flags with extra bits
    t = FdrTrace(5, cycle_frequency=0, flags=0xFFFFFFFC | 1, seed=13)
    t.buffer(1, 2, wallclock=(1, 1)).enter(1, 10).exit(1, 20)
    emit(t.build("fdr-v5-freq0"))
    bt = BasicTrace(3, cycle_frequency=0, flags=0xFF, seed=13)
    bt.thread(5, 6).enter(1, 10).exit(1, 20)
    emit(bt.build("basic-v3-freq0"))

    # header only
    emit(header_case("fdr-v5-header-only", 5, TYPE_FDR))
    emit(header_case("basic-v3-header-only", 3, TYPE_BASIC))
    emit(header_case("fdr-v1-header-only", 1, TYPE_FDR, buffer_size=512))
    emit(header_case("fdr-v5-be-header-only", 5, TYPE_FDR, bo=">"))
    # unusable headers (exit 1)
    tail = base[(5, "<")].data[HEADER_SIZE:]
    emit(header_case("fdr-v6", 6, TYPE_FDR, tail))
    emit(header_case("fdr-v0", 0, TYPE_FDR, tail))
    emit(header_case("type2", 5, 2, tail))
    emit(header_case("basic-v4", 4, TYPE_BASIC, bytes(64)))
    c = header_case("short-header-31", 5, TYPE_FDR)
    c = c.copy("short-header-31", base[(5, "<")].data[:31])
    c.exit = 1
    c.clean = False
    c.truncated = None
    c.damaged = None
    emit(c)
    c = c.copy("empty-file", b"")
    emit(c)

    # --- damage -----------------------------------------------------------
    for (v, bo), src in sorted(base.items()):
        sfx = "v%d-%s" % (v, "le" if bo == "<" else "be")
        # invalid metadata kind at a NewCPUId in the middle of a buffer (the
        # migration in the third buffer); both kind 10 and kind 127
        mig = [it for it in src.items if it.kind == "new_cpu" and it.buf == 2][1]
        emit(bad_metadata_kind(src, mig.offset, 10, "fdr-%s-badkind10" % sfx))
        wc = _first(src, "wallclock", buf=1)
        emit(bad_metadata_kind(src, wc.offset, 127, "fdr-%s-badkind127" % sfx))
        # event sizes
        ev = _first(src, "custom_event", buf=2)
        emit(bad_event_size(src, ev.offset, 0, "fdr-%s-evsize0" % sfx))
        emit(bad_event_size(src, ev.offset, -5, "fdr-%s-evsizeneg" % sfx))
        emit(bad_event_size(src, ev.offset, 0x7FFFFFF0, "fdr-%s-evsizehuge" % sfx))
        if v >= 2:
            emit(extents_past_eof(src, 64, "fdr-%s-extents-past-eof" % sfx))
            ev = _first(src, "custom_event", buf=1)
            emit(bad_event_size(src, ev.offset, src.bufs[1][1] - ev.offset,
                                "fdr-%s-evsize-past-buffer" % sfx))
        # a CallArgument damaged: its enter keeps the arguments before it
        ca = [it for it in src.items if it.kind == "call_arg" and it.buf == 1][1]
        emit(bad_metadata_kind(src, ca.offset, 12, "fdr-%s-badcallarg" % sfx))

    # v1: buffer with no EndOfBuffer (filled exactly; followed by garbage)
    for bo in ("<", ">"):
        sfx = "le" if bo == "<" else "be"
        t = FdrTrace(1, bo, buffer_size=160, seed=14)
        b = t.buffer(1, wallclock=(1, 1), eob=False, filler=b"")
        b.enter(1, 10).exit(1, 11).enter(2, 12).exit(2, 13)
        b.custom(14, b"8bytes!!").enter(3, 15).exit(3, 16)
        b.enter(4, 17).exit(4, 18).enter(5, 19).exit(5, 20)
        b.enter(6, 21)                                          # 160 bytes
        b = t.buffer(2, wallclock=(1, 2))
        b.enter(5, 5).exit(5, 6)
        c = t.build("fdr-v1-%s-no-eob-full" % sfx)
        assert c.items[0].offset == HEADER_SIZE and \
            [it for it in c.items if it.buf == 0][-1].end == HEADER_SIZE + 160
        c.clean = False
        c.llvm = False
        emit(c)
        t = FdrTrace(1, bo, buffer_size=160, seed=15)
        b = t.buffer(1, wallclock=(1, 1), eob=False, filler=b"\xff")
        b.enter(1, 10).exit(1, 11)
        b = t.buffer(2, wallclock=(1, 2))
        b.enter(5, 5).exit(5, 6)
        c = t.build("fdr-v1-%s-no-eob-garbage" % sfx)
        fill = c.bufs[0][0] + 48 + 2 * FUNC_SIZE
        c.warn.append({fill})
        c.extra_ok.append((fill, c.bufs[0][1], ("skipped",)))
        c.clean = False
        c.damaged = None
        c.llvm = False
        emit(c)

    # LLVM 14 typed-event extents bug
    for bo in ("<", ">"):
        sfx = "le" if bo == "<" else "be"
        # (a) the lost 16 bytes are two whole function records: no damage
        t = FdrTrace(5, bo, seed=16)
        b = t.buffer(1, 2, wallclock=(1, 1), typed_extents_bug=True)
        b.enter(1, 10).typed(11, b"typed!", 42).enter(2, 12).exit(2, 13)
        b.exit(1, 14).enter(3, 15).exit(3, 16)
        b = t.buffer(1, 2, wallclock=(1, 2))
        b.enter(4, 20).exit(4, 21)
        emit(t.build("fdr-v5-%s-typedbug-aligned" % sfx))
        # (b) the boundary falls inside the last record (a typed event)
        t = FdrTrace(5, bo, seed=17)
        b = t.buffer(1, 2, wallclock=(1, 1), typed_extents_bug=True)
        b.enter(1, 10).exit(1, 11).typed(12, b"0123456789", 9)
        b = t.buffer(1, 2, wallclock=(1, 2))
        b.enter(4, 20).exit(4, 21)
        c = t.build("fdr-v5-%s-typedbug-crossing" % sfx)
        assert c.dropped and c.warn
        emit(c)
        # (c) three typed events in v3 (absolute-TSC layout)
        t = FdrTrace(3, bo, seed=18)
        b = t.buffer(1, 2, wallclock=(1, 1), typed_extents_bug=True)
        b.enter(1, 10).typed(11, b"a", 1).typed(12, b"bb", 2).typed(13, b"ccc", 3)
        b.exit(1, 14)
        for i in range(6):
            b.enter(10 + i, 20 + i).exit(10 + i, 20 + i)
        c = t.build("fdr-v3-%s-typedbug3" % sfx)
        c.llvm = False
        c.llvm_note = "llvm-xray decodes typed events in the v5 layout only"
        emit(c)

    # basic damage and truncation
    for bo in ("<", ">"):
        sfx = "le" if bo == "<" else "be"
        src = out["basic-v3-%s" % sfx]
        rec = [it for it in src.items if it.kind == "exit"][0]
        emit(basic_bad_record(src, rec.offset, "type", "basic-v3-%s-badtype" % sfx))
        rec = [it for it in src.items if it.kind == "exit"][2]
        emit(basic_bad_record(src, rec.offset, "action", "basic-v3-%s-badaction" % sfx))
        emit(truncate(src, len(src.data) - 5, "basic-v3-%s-trunc-tail" % sfx))
    bt = BasicTrace(3, seed=19)
    th = bt.thread(3, 4)
    bt.orphan_payload(9, 3, 4, 1234)
    th.enter(9, 10).exit(9, 11)
    c = bt.build("basic-v3-orphan-payload")
    c.clean = False
    c.llvm = False
    c.llvm_note = ("llvm-xray 14 crashes (SIGSEGV: Records.back() of an "
                   "empty list) on an ARG_PAYLOAD with no record before it")
    emit(c)

    # FDR truncations: inside a record, at a record boundary inside a
    # buffer, at a buffer boundary
    for (v, bo) in ((5, "<"), (5, ">"), (3, "<"), (2, "<"), (1, "<")):
        src = base[(v, bo)]
        sfx = "v%d-%s" % (v, "le" if bo == "<" else "be")
        fn = [it for it in src.items if it.kind == "exit" and it.buf == 2][1]
        emit(truncate(src, fn.offset + 3, "fdr-%s-trunc-inrecord" % sfx))
        emit(truncate(src, fn.offset, "fdr-%s-trunc-atrecord" % sfx))
        emit(truncate(src, src.bufs[3][0], "fdr-%s-trunc-atbuffer" % sfx))
        ev = _first(src, "custom_event", buf=2)
        emit(truncate(src, ev.end - 1, "fdr-%s-trunc-inpayload" % sfx))
    return out


def seeds(outdir):
    """Fuzz seeds (each <= 4 KB): every version, mode and byte order."""
    os.makedirs(outdir, exist_ok=True)
    sel = []
    for v in (1, 2, 3, 4, 5):
        sel.append(("fdr-v%d-le" % v, fdr_sample(v, "<", events=True)))
    sel.append(("fdr-v5-be", fdr_sample(5, ">")))
    sel.append(("fdr-v3-be", fdr_sample(3, ">")))
    sel.append(("fdr-v1-be", fdr_sample(1, ">")))
    sel.append(("basic-v1-le", basic_sample(1, "<")))
    sel.append(("basic-v2-be", basic_sample(2, ">")))
    sel.append(("basic-v3-le", basic_sample(3, "<")))
    sel.append(("basic-v3-be", basic_sample(3, ">")))
    allc = cases()
    sel.append(("fdr-v5-typedbug", allc["fdr-v5-le-typedbug-crossing"]))
    sel.append(("fdr-v5-badkind", allc["fdr-v5-le-badkind10"]))
    sel.append(("fdr-v5-truncated", allc["fdr-v5-le-trunc-inrecord"]))
    sel.append(("fdr-v4-be-evsize", allc["fdr-v4-be-evsizehuge"]))
    sel.append(("fdr-v1-no-eob", allc["fdr-v1-le-no-eob-garbage"]))
    sel.append(("basic-header-only", allc["basic-v3-header-only"]))
    sel.append(("fdr-v5-small", small_fdr_v5()))
    names = []
    for i, (n, c) in enumerate(sel, 1):
        if len(c.data) > 4096:
            raise ValueError("seed %s is %d bytes" % (n, len(c.data)))
        fn = "%02d-%s.xray" % (i, n)
        c.write(os.path.join(outdir, fn))
        names.append(fn)
    return names


# --------------------------------------------------------------------------
# llvm-xray cross-check

def llvm_xray():
    for n in ("llvm-xray-14", "llvm-xray"):
        p = shutil.which(n)
        if p:
            return p
    return None


YAML_KIND = {"function-enter": "enter", "function-exit": "exit",
             "function-tail-exit": "tail_exit",
             "function-enter-arg": "enter_arg", "custom-event": "custom_event",
             "typed-event": "typed_event"}


def _parse_flow_map(s):
    """One `{ k: v, k: [ a, b ], k: 'str' }` line of llvm-xray's YAML."""
    s = s.strip()
    assert s.startswith("{") and s.endswith("}"), s
    s = s[1:-1]
    out = {}
    i = 0
    n = len(s)
    while i < n:
        while i < n and s[i] in " ,":
            i += 1
        if i >= n:
            break
        j = s.index(":", i)
        key = s[i:j].strip()
        i = j + 1
        while i < n and s[i] == " ":
            i += 1
        if s[i] == "[":
            j = s.index("]", i)
            val = [x.strip() for x in s[i + 1:j].split(",") if x.strip()]
            i = j + 1
        elif s[i] in "'\"":
            q = s[i]
            j = i + 1
            buf = []
            while True:
                if s[j] == q:
                    if q == "'" and j + 1 < n and s[j + 1] == "'":
                        buf.append("'")
                        j += 2
                        continue
                    break
                if q == '"' and s[j] == "\\":
                    buf.append(s[j:j + 2])
                    j += 2
                    continue
                buf.append(s[j])
                j += 1
            val = "".join(buf)
            i = j + 1
        else:
            j = i
            while j < n and s[j] != ",":
                j += 1
            val = s[i:j].strip()
            i = j
        out[key] = val
    return out


def llvm_yaml(path, tool=None):
    tool = tool or llvm_xray()
    p = subprocess.run([tool, "convert", "-f", "yaml", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    if p.returncode != 0:
        return None, p.stderr.decode("utf-8", "replace").strip()
    hdr = {}
    recs = []
    text = p.stdout.decode("utf-8", "replace")
    for line in text.splitlines():
        m = re.match(r"^\s+(version|type|constant-tsc|nonstop-tsc|cycle-frequency):\s+(\S+)", line)
        if m and not line.lstrip().startswith("-"):
            hdr[m.group(1)] = m.group(2)
            continue
        if line.lstrip().startswith("- {"):
            recs.append(_parse_flow_map(line.lstrip()[2:]))
    return {"header": hdr, "records": recs}, text


def llvm_check(case, path, tool=None):
    """Compares case's expected records with llvm-xray's YAML (per thread,
    in TSC order) and, for FDR, with fdr-dump.  Returns a list of mismatch
    descriptions (empty: agreement).  Fields llvm-xray is known to get
    wrong (llvm/lib/XRay/FDRTraceExpander.cpp and BlockPrinter.cpp) are not compared:
      - event records: func-id (stale from the previous function record)
        and `type` (stale typed-event type);
      - FDR v1: process (the reader sets it only from v2/PID records: 0);
      - basic v1/v2: process (llvm-xray reads padding);
      - FDR v1-v3 custom events: cpu (no cpu field; llvm-xray leaves 0);
      - FDR v3/v4 typed events: not compared at all (llvm-xray decodes only
        the v5 layout, so their TSC and type are misread);
      - event payload data: compared only when it is printable ASCII.
    fdr-dump is run on little-endian files only: it reads them as
    little-endian whatever the header says (convert retries big-endian).
    Other llvm-xray 14 behaviour seen while writing this (not compared):
      - v1-v3 custom events: the cpu it prints is uninitialised memory;
      - a CallArgument after an Exit turns that exit into
        function-enter-arg (the verifier only knows "Function");
      - a basic trace whose first record is an ARG_PAYLOAD crashes it."""
    tool = tool or llvm_xray()
    problems = []
    doc, text = llvm_yaml(path, tool)
    if doc is None:
        return ["llvm-xray convert failed: %s" % text]
    h = doc["header"]
    if int(h.get("version", -1)) != case.version:
        problems.append("header version %s != %d" % (h.get("version"), case.version))
    if int(h.get("type", -1)) != (1 if case.mode == "fdr" else 0):
        problems.append("header type %s" % h.get("type"))
    if int(h.get("cycle-frequency", -1)) != case.header["cycle_frequency"]:
        problems.append("cycle-frequency %s" % h.get("cycle-frequency"))
    old_typed = case.mode == "fdr" and case.version < 5
    cmp_pid = not ((case.mode == "fdr" and case.version == 1) or
                   (case.mode == "basic" and case.version < 3))

    def norm_exp(r, key):
        d = {"kind": r["kind"], "tsc": r["tsc"], "tid": key[1]}
        if cmp_pid:
            d["pid"] = key[0]
        if r["kind"] in FUNCTION_KINDS:
            d["func_id"] = r["func_id"] & U32_MAX
            d["args"] = r.get("args", [])
            d["cpu"] = r["cpu"]
        else:
            if not (case.mode == "fdr" and case.version <= 3 and
                    r["kind"] == "custom_event"):
                d["cpu"] = r["cpu"]
            data = bytes.fromhex(r["data"])
            if _printable(data):
                d["data"] = data.decode()
        return d

    exp = {}
    for key, recs in case.time_order().items():
        lst = [norm_exp(r, key) for r in recs
               if not (old_typed and r["kind"] == "typed_event")]
        k = key if cmp_pid else key[1]
        exp.setdefault(k, []).extend(lst)
    for k in exp:
        exp[k].sort(key=lambda d: d["tsc"])
    got = {}
    for r in doc["records"]:
        kind = YAML_KIND.get(r.get("kind"))
        if kind is None:
            problems.append("unknown yaml kind %r" % r.get("kind"))
            continue
        if old_typed and kind == "typed_event":
            continue
        d = {"kind": kind, "tsc": int(r["tsc"]), "tid": int(r["thread"])}
        if cmp_pid:
            d["pid"] = int(r["process"])
        if kind in FUNCTION_KINDS:
            d["func_id"] = int(r["func-id"]) & U32_MAX
            d["args"] = [int(a, 0) for a in r.get("args", [])]
            d["cpu"] = int(r["cpu"])
        else:
            if not (case.mode == "fdr" and case.version <= 3 and
                    kind == "custom_event"):
                d["cpu"] = int(r["cpu"])
            if "data" in r and _printable(r["data"].encode("latin-1", "replace")):
                d["data"] = r["data"]
        k = (d["pid"], d["tid"]) if cmp_pid else d["tid"]
        got.setdefault(k, []).append(d)
    for k in got:
        got[k].sort(key=lambda d: d["tsc"])
    for k in sorted(set(exp) | set(got), key=str):
        e, g = exp.get(k, []), got.get(k, [])
        if len(e) != len(g):
            problems.append("thread %s: %d records expected, llvm-xray has %d"
                            % (k, len(e), len(g)))
        for i, (a, b) in enumerate(zip(e, g)):
            # data: only when both sides have it (printable payloads)
            if ("data" in a) != ("data" in b):
                a = dict(a)
                b = dict(b)
                a.pop("data", None)
                b.pop("data", None)
            if a != b:
                problems.append("thread %s record %d: expected %s, llvm-xray %s"
                                % (k, i, a, b))
                break
    if case.mode == "fdr" and case.byte_order == "little":
        # fdr-dump reads little-endian only (its DataExtractor is hard-coded
        # LE, unlike convert, which retries big-endian)
        problems += _fdr_dump_check(case, path, tool)
    return problems


def _printable(b):
    return bool(b) and all(0x20 <= c < 0x7F and c not in b"'\"\\,:{}[]#"
                           for c in b)


FDR_DUMP_RE = {
    "buffer_extents": re.compile(r"^<Buffer: size = (\d+) bytes>$"),
    "new_buffer": re.compile(r"^<Thread ID: (-?\d+)>$"),
    "wallclock": re.compile(r"^<Wall Time: seconds = (\d+)\.(\d+)>$"),
    "pid": re.compile(r"^<PID: (-?\d+)>$"),
    "new_cpu": re.compile(r"^<CPU: id = (\d+), tsc = (\d+)>$"),
    "tsc_wrap": re.compile(r"^<TSC Wrap: base = (\d+)>$"),
    "call_arg": re.compile(r"^<Call Argument: data = (\d+) \(hex = .*\)>$"),
    "end_of_buffer": re.compile(r"^<End of Buffer>$"),
    "function": re.compile(r"^<Function (Enter|Exit|Tail Exit|Enter With Arg): #(\d+) delta = \+(\d+)>$"),
    "custom_event": re.compile(r"^<Custom Event: tsc = (-?\d+), cpu = (\d+), size = (\d+), data = '.*'>$", re.S),
    "custom_event5": re.compile(r"^<Custom Event: delta = \+?(-?\d+), size = (\d+), data = '.*'>$", re.S),
    "typed_event": re.compile(r"^<Typed Event: delta = \+?(-?\d+), type = (\d+), size = (\d+), data = '.*'>?$", re.S),
}

FN_ACTION = {"Enter": 0, "Exit": 1, "Tail Exit": 2, "Enter With Arg": 3}


def _fdr_dump_check(case, path, tool):
    """fdr-dump prints the records in file order (delta form).  Checks the
    sequence of record kinds and their raw values against the items (v1:
    the decodable filler after EndOfBuffer is skipped)."""
    p = subprocess.run([tool, "fdr-dump", "--verify", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    if p.returncode != 0:
        return ["llvm-xray fdr-dump --verify failed: %s"
                % p.stderr.decode("utf-8", "replace").strip()]
    p = subprocess.run([tool, "fdr-dump", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    if p.returncode != 0:
        return ["llvm-xray fdr-dump failed: %s"
                % p.stderr.decode("utf-8", "replace").strip()]
    text = p.stdout.decode("latin-1")
    # records start with '<'; event data may span lines
    lines = []
    for ln in text.split("\n"):
        if ln.startswith("<") or not lines:
            lines.append(ln)
        else:
            lines[-1] += "\n" + ln
    lines = [ln for ln in lines if ln.strip()]
    want = [it for it in case.items if it.kind != "skipped"]
    got = []
    skipping = False
    for ln in lines:
        if case.version == 1:
            if FDR_DUMP_RE["new_buffer"].match(ln):
                skipping = False
            elif skipping:
                continue
            if FDR_DUMP_RE["end_of_buffer"].match(ln):
                skipping = True
        got.append(ln)
    problems = []
    if len(got) != len(want):
        problems.append("fdr-dump: %d records, expected %d" % (len(got), len(want)))
    for it, ln in zip(want, got):
        bad = None
        k = it.kind
        f = it.fields
        if k in FUNCTION_KINDS:
            m = FDR_DUMP_RE["function"].match(ln)
            if not m or FN_ACTION[m.group(1)] != it.action or \
                    int(m.group(2)) != f["func_id"] or int(m.group(3)) != f["delta"]:
                bad = "function %s #%d delta %d" % (it.action, f["func_id"], f["delta"])
        elif k == "custom_event" and case.version >= 5:
            m = FDR_DUMP_RE["custom_event5"].match(ln)
            if not m or int(m.group(1)) != f["delta"] or int(m.group(2)) != f["payload_size"]:
                bad = "custom delta %d size %d" % (f["delta"], f["payload_size"])
        elif k == "custom_event":
            m = FDR_DUMP_RE["custom_event"].match(ln)
            if not m or int(m.group(1)) != f["tsc"] or int(m.group(3)) != f["payload_size"] \
                    or (case.version == 4 and int(m.group(2)) != f["cpu"]):
                bad = "custom tsc %d cpu %d size %d" % (f["tsc"], f["cpu"], f["payload_size"])
        elif k == "typed_event":
            m = FDR_DUMP_RE["typed_event"].match(ln)
            if case.version >= 5:
                if not m or int(m.group(1)) != f["delta"] or \
                        int(m.group(2)) != f["event_type"] or int(m.group(3)) != f["payload_size"]:
                    bad = "typed delta %d type %d size %d" % (
                        f["delta"], f["event_type"], f["payload_size"])
            elif not m:
                bad = "typed event"
        else:
            m = FDR_DUMP_RE[k].match(ln)
            vals = [int(x) for x in m.groups()] if m else None
            exp = {"buffer_extents": lambda: [f["value"]],
                   "new_buffer": lambda: [f["tid"]],
                   "wallclock": lambda: [f["seconds"], f["usec"]],
                   "pid": lambda: [f["pid"]],
                   "new_cpu": lambda: [f["cpu"], f["tsc"]],
                   "tsc_wrap": lambda: [f["tsc"]],
                   "call_arg": lambda: [f["value"]],
                   "end_of_buffer": lambda: []}[k]()
            if vals != exp:
                bad = "%s %s" % (k, exp)
        if bad:
            problems.append("fdr-dump: at offset %d expected %s, got %r"
                            % (it.offset, bad, ln[:120]))
            break
    return problems


def llvm_cases():
    """The cases llvm-xray 14 should read exactly like the expectations."""
    return {n: c for n, c in cases().items() if c.llvm and c.exit == 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", metavar="DIR", help="write fuzz seeds into DIR")
    ap.add_argument("--cases", metavar="DIR",
                    help="write every case (NAME.xray, NAME.json) into DIR")
    ap.add_argument("--llvm-check", action="store_true",
                    help="cross-check the cases with llvm-xray")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    rc = 0
    if a.seeds:
        for n in seeds(a.seeds):
            print(n)
    if a.cases:
        os.makedirs(a.cases, exist_ok=True)
        for n, c in cases(a.cases).items():
            with open(os.path.join(a.cases, n + ".json"), "w") as f:
                json.dump(c.describe(), f, indent=1)
    if a.llvm_check:
        tool = llvm_xray()
        if tool is None:
            print("llvm-xray not found")
            return 2
        with tempfile.TemporaryDirectory(prefix="xray-gen-") as d:
            for n, c in sorted(llvm_cases().items()):
                p = os.path.join(d, n + ".xray")
                c.write(p)
                probs = llvm_check(c, p, tool)
                print("%-40s %s" % (n, "ok" if not probs else "MISMATCH"))
                for pr in probs[:8]:
                    print("    " + pr)
                if probs:
                    rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
