#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writer (and minimal reader) of perf.data files for tests.  Stdlib only;
PERF_RECORD_COMPRESSED frames are made and read with the `zstd` command
line tool.

Format: perf's tools/perf/Documentation/perf.data-file-format.txt and
util/header.c, util/session.c.  In short:

  file mode   header (104 bytes: magic, size, attr_size, attrs, data,
              event_types, 256-bit feature bitmap) | ids arrays | attrs
              section (attr.size + 16 bytes per entry: attr, {ids offset,
              ids size}) | data section (records) | feature index table
              ({offset, size} per set bit, ascending) | feature bodies
  pipe mode   16-byte header (magic, size 16), then records only:
              HEADER_ATTR per attr, HEADER_FEATURE per feature (BUILD_ID
              entries as HEADER_BUILD_ID records, tracing data as a
              HEADER_TRACING_DATA record), then the data records

Byte order: "<" writes little-endian, ">" big-endian (magic bytes
"2ELIFREP", every integer at its own width swapped).  The bit-field word
of perf_event_attr (offset 40) is written the way a big-endian machine's
compiler lays it out (bit-fields allocated from the most significant bit:
flag n is byte n/8, mask 0x80 >> n%8), which is what perf's
perf_event__attr_swap() undoes with swap_bitfield().  Attr(...,
be_flags_as_u64=True) writes it as a plain byte-swapped u64 instead.

PerfDataBuilder builds a file record by record; every record method
returns a Rec that knows its bytes, its offset in the file (after
to_bytes()), and what ``perfgraft dump --json`` should say about it.
make_case() builds the standard scenario used by tests/test_perfdata.py
(COMM, MMAP, MMAP2, a jit-PID.dump marker, samples in and outside JIT
code, FINISHED_ROUNDs, tracing data, optional unknown/AUXTRACE records
and COMPRESSED blocks) together with its jitdump.

    python3 tests/perfdata_gen.py OUTDIR     writes every standard case
"""

import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jitdump_gen  # noqa: E402

# ---------------------------------------------------------------------------
# constants

MAGIC = b"PERFILE2"
MAGIC_BE = b"2ELIFREP"
MAGIC_V1 = b"PERFFILE"      # version 1: same layout, the byte order told by attr_size
FILE_HDR = 104
PIPE_HDR = 16

PERF_RECORD_MMAP = 1
PERF_RECORD_LOST = 2
PERF_RECORD_COMM = 3
PERF_RECORD_EXIT = 4
PERF_RECORD_FORK = 7
PERF_RECORD_SAMPLE = 9
PERF_RECORD_MMAP2 = 10
PERF_RECORD_HEADER_ATTR = 64
PERF_RECORD_HEADER_TRACING_DATA = 66
PERF_RECORD_HEADER_BUILD_ID = 67
PERF_RECORD_FINISHED_ROUND = 68
PERF_RECORD_AUXTRACE = 71
PERF_RECORD_TIME_CONV = 79
PERF_RECORD_HEADER_FEATURE = 80
PERF_RECORD_COMPRESSED = 81
PERF_RECORD_FINISHED_INIT = 82

RECORD_NAMES = {
    1: "MMAP", 2: "LOST", 3: "COMM", 4: "EXIT", 5: "THROTTLE", 6: "UNTHROTTLE",
    7: "FORK", 8: "READ", 9: "SAMPLE", 10: "MMAP2", 11: "AUX", 12: "ITRACE_START",
    13: "LOST_SAMPLES", 14: "SWITCH", 15: "SWITCH_CPU_WIDE", 16: "NAMESPACES",
    17: "KSYMBOL", 18: "BPF_EVENT", 19: "CGROUP", 20: "TEXT_POKE", 21: "AUX_OUTPUT_HW_ID",
    64: "HEADER_ATTR", 65: "HEADER_EVENT_TYPE", 66: "HEADER_TRACING_DATA",
    67: "HEADER_BUILD_ID", 68: "FINISHED_ROUND", 69: "ID_INDEX", 70: "AUXTRACE_INFO",
    71: "AUXTRACE", 72: "AUXTRACE_ERROR", 73: "THREAD_MAP", 74: "CPU_MAP",
    75: "STAT_CONFIG", 76: "STAT", 77: "STAT_ROUND", 78: "EVENT_UPDATE",
    79: "TIME_CONV", 80: "HEADER_FEATURE", 81: "COMPRESSED", 82: "FINISHED_INIT",
    83: "COMPRESSED2",
}

FEAT_TRACING_DATA = 1
FEAT_BUILD_ID = 2
FEAT_HOSTNAME = 3
FEAT_OSRELEASE = 4
FEAT_VERSION = 5
FEAT_ARCH = 6
FEAT_NRCPUS = 7
FEAT_CMDLINE = 11
FEAT_EVENT_DESC = 12
FEAT_SAMPLE_TIME = 21
FEAT_CLOCKID = 23
FEAT_COMPRESSED = 27
HEADER_LAST_FEATURE_6_1 = 32

FEATURE_NAMES = {
    1: "TRACING_DATA", 2: "BUILD_ID", 3: "HOSTNAME", 4: "OSRELEASE", 5: "VERSION",
    6: "ARCH", 7: "NRCPUS", 8: "CPUDESC", 9: "CPUID", 10: "TOTAL_MEM", 11: "CMDLINE",
    12: "EVENT_DESC", 13: "CPU_TOPOLOGY", 14: "NUMA_TOPOLOGY", 15: "BRANCH_STACK",
    16: "PMU_MAPPINGS", 17: "GROUP_DESC", 18: "AUXTRACE", 19: "STAT", 20: "CACHE",
    21: "SAMPLE_TIME", 22: "MEM_TOPOLOGY", 23: "CLOCKID", 24: "DIR_FORMAT",
    25: "BPF_PROG_INFO", 26: "BPF_BTF", 27: "COMPRESSED", 28: "CPU_PMU_CAPS",
    29: "CLOCK_DATA", 30: "HYBRID_TOPOLOGY", 31: "PMU_CAPS",
}

# sample_type bits
S_IP = 1 << 0
S_TID = 1 << 1
S_TIME = 1 << 2
S_ADDR = 1 << 3
S_READ = 1 << 4
S_CALLCHAIN = 1 << 5
S_ID = 1 << 6
S_CPU = 1 << 7
S_PERIOD = 1 << 8
S_STREAM_ID = 1 << 9
S_RAW = 1 << 10
S_BRANCH_STACK = 1 << 11
S_REGS_USER = 1 << 12
S_STACK_USER = 1 << 13
S_IDENTIFIER = 1 << 16
SAMPLE_TYPE = S_IDENTIFIER | S_IP | S_TID | S_TIME | S_PERIOD | S_CALLCHAIN

# read_format bits
RF_TOTAL_TIME_ENABLED = 1 << 0
RF_TOTAL_TIME_RUNNING = 1 << 1
RF_ID = 1 << 2
RF_GROUP = 1 << 3
RF_LOST = 1 << 4

# branch_sample_type bits that change a sample's layout
BR_HW_INDEX = 1 << 17
BR_COUNTERS = 1 << 19

# perf record --call-graph dwarf on x86_64: sample_regs_user (perf's
# PERF_REGS_MASK: the 20 registers but ds, es, fs, gs) and the stack
# copy's size
REGS_USER_X86_64 = 0xFF0FFF
STACK_USER_DEFAULT = 8192
ABI_64 = 2

# attr flag bit numbers (offset 40)
F_DISABLED, F_INHERIT, F_EXCLUDE_KERNEL, F_EXCLUDE_HV = 0, 1, 5, 6
F_MMAP, F_COMM, F_FREQ, F_ENABLE_ON_EXEC, F_TASK = 8, 9, 10, 12, 13
F_SAMPLE_ID_ALL, F_EXCLUDE_GUEST, F_MMAP2, F_COMM_EXEC, F_USE_CLOCKID = 18, 20, 23, 24, 25
DEFAULT_FLAGS = (F_DISABLED, F_INHERIT, F_EXCLUDE_KERNEL, F_EXCLUDE_HV, F_MMAP,
                 F_COMM, F_ENABLE_ON_EXEC, F_TASK, F_SAMPLE_ID_ALL, F_EXCLUDE_GUEST,
                 F_MMAP2, F_COMM_EXEC, F_USE_CLOCKID)

CLOCK_MONOTONIC = 1
PERF_CONTEXT_USER = (1 << 64) - 512
MISC_KERNEL = 1
MISC_USER = 2
MISC_COMM_EXEC = 0x2000
MISC_MMAP_DATA = 0x2000
MISC_BUILD_ID_SIZE = 0x8000
NAME_ALIGN = 64
HOST_PID = -1


def align(n, a):
    return (n + a - 1) // a * a


def cstr(s, a):
    """s (str or bytes) NUL-terminated and zero-padded to a multiple of a."""
    if isinstance(s, str):
        s = s.encode()
    s += b"\0"
    return s + b"\0" * (align(len(s), a) - len(s))


# ---------------------------------------------------------------------------
# zstd through the command line tool

def zstd_tool():
    return shutil.which("zstd")


def zstd_compress(data, level=3):
    tool = zstd_tool()
    if not tool:
        raise RuntimeError("the zstd command line tool is needed (apt-get install zstd)")
    p = subprocess.run([tool, "-q", "-c", "-%d" % level], input=data,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    return p.stdout


def zstd_decompress(data):
    tool = zstd_tool()
    if not tool:
        raise RuntimeError("the zstd command line tool is needed (apt-get install zstd)")
    p = subprocess.run([tool, "-q", "-d", "-c"], input=data,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    return p.stdout


# ---------------------------------------------------------------------------
# perf_event_attr

class Attr:
    """A perf_event_attr of any size (64 = VER0 ... 128 = VER7, 136 = VER8
    with config3, larger: zero... then a recognisable tail pattern)."""

    def __init__(self, size=128, type=1, config=0, period=1000000,
                 sample_type=SAMPLE_TYPE, flags=DEFAULT_FLAGS, clockid=CLOCK_MONOTONIC,
                 ids=(), name="cpu-clock", read_format=0, sample_max_stack=127,
                 config3=0x0c0ffee3, be_flags_as_u64=False, branch_sample_type=0,
                 sample_regs_user=0, sample_stack_user=0):
        if size < 64 or size % 8:
            raise ValueError("attr size must be >= 64 and a multiple of 8")
        self.size = size
        self.type = type
        self.config = config
        self.period = period
        self.sample_type = sample_type
        self.flag_bits = tuple(flags)
        self.clockid = clockid
        self.ids = list(ids)
        self.name = name
        self.read_format = read_format
        self.sample_max_stack = sample_max_stack
        self.config3 = config3
        self.be_flags_as_u64 = be_flags_as_u64
        self.branch_sample_type = branch_sample_type
        self.sample_regs_user = sample_regs_user
        self.sample_stack_user = sample_stack_user

    @property
    def flags(self):
        v = 0
        for b in self.flag_bits:
            v |= 1 << b
        return v

    @property
    def sample_id_all(self):
        return F_SAMPLE_ID_ALL in self.flag_bits

    @property
    def use_clockid(self):
        return F_USE_CLOCKID in self.flag_bits

    def flags_bytes(self, bo):
        if bo == "<" or self.be_flags_as_u64:
            return struct.pack(bo + "Q", self.flags)
        out = bytearray(8)
        for b in self.flag_bits:
            out[b // 8] |= 0x80 >> (b % 8)
        return bytes(out)

    def raw(self, bo):
        """attr.size bytes in byte order bo."""
        p = lambda f, v: struct.pack(bo + f, v)  # noqa: E731
        b = (p("I", self.type) + p("I", self.size) + p("Q", self.config)
             + p("Q", self.period) + p("Q", self.sample_type) + p("Q", self.read_format)
             + self.flags_bytes(bo)
             + p("I", 0) + p("I", 0)            # wakeup_events, bp_type
             + p("Q", 0))                       # config1          -> 64 (VER0)
        b += p("Q", 0)                          # config2          -> 72 (VER1)
        b += p("Q", self.branch_sample_type)    # branch_sample_type -> 80 (VER2)
        # sample_regs_user, sample_stack_user
        b += p("Q", self.sample_regs_user) + p("I", self.sample_stack_user)
        b += p("i", self.clockid)               # clockid          -> 96 (VER3)
        b += p("Q", 0)                          # sample_regs_intr -> 104 (VER4)
        b += p("I", 0) + p("H", self.sample_max_stack) + p("H", 0)  # -> 112 (VER5)
        b += p("I", 0) + p("I", 0)              # aux_sample_size, reserved -> 120 (VER6)
        b += p("Q", 0)                          # sig_data         -> 128 (VER7)
        b += p("Q", self.config3)               # config3          -> 136 (VER8)
        if self.size > len(b):
            b += bytes((0x40 + i) & 0xFF for i in range(self.size - len(b)))
        return b[:self.size]

    def json(self, bo):
        """What dump --json should say about this attr."""
        has_clockid = self.size >= 96
        return dict(type=self.type, size=self.size, config=self.config,
                    sample_type=self.sample_type, flags=self.flags,
                    sample_id_all=self.sample_id_all, use_clockid=self.use_clockid,
                    clockid=self.clockid if has_clockid else 0, ids=list(self.ids),
                    raw_hex=self.raw(bo).hex())


def trailer_size(st):
    return 8 * sum(bool(st & b) for b in (S_TID, S_TIME, S_ID, S_STREAM_ID, S_CPU,
                                          S_IDENTIFIER))


# ---------------------------------------------------------------------------
# records

class Rec:
    """One record as written.  role: "pass" (expected unchanged in the
    output), "marker" (a jitdump marker: dropped by inject), "container"
    (a COMPRESSED record: replaced by its records), "feature-compressed"
    (pipe mode HEADER_FEATURE of COMPRESSED: dropped by inject),
    "anon-dropped" (an exec //anon map of a JIT process after its first
    LOAD: dropped by inject)."""

    def __init__(self, rtype, misc, body, extra=b"", bo="<", time=None, pid=None,
                 tid=None, attr=None, fields=None, role="pass", size=None):
        self.type = rtype
        self.misc = misc
        self.size = 8 + len(body) if size is None else size
        self.data = struct.pack(bo + "IHH", rtype, misc, self.size) + body
        self.extra = extra
        self.time = time
        self.pid = pid
        self.tid = tid
        self.attr = attr
        self.fields = fields or {}
        self.role = role
        self.offset = None          # in the file (container's for compressed)
        self.compressed = False
        self.container = None
        self.inner = []             # container: its records
        self.jit_sym = None         # samples: the JIT function name expected
        self.note = ""

    @property
    def name(self):
        return RECORD_NAMES.get(self.type, "UNKNOWN")

    @property
    def total(self):
        return len(self.data) + len(self.extra)

    def expect_json(self):
        d = dict(type=self.type, name=self.name, misc=self.misc, size=self.size,
                 extra_size=len(self.extra), offset=self.offset)
        if self.time is not None:
            d["time"] = self.time
        if self.pid is not None:
            d["pid"] = self.pid
            d["tid"] = self.tid
        if self.attr is not None:
            d["attr"] = self.attr
        d.update(self.fields)
        if self.compressed:
            d["compressed"] = True
        return d

    def __repr__(self):
        return "Rec(%s size=%d off=%s t=%s)" % (self.name, self.size, self.offset, self.time)


# ---------------------------------------------------------------------------
# feature bodies

def perf_string(s, bo):
    b = cstr(s, NAME_ALIGN)
    return struct.pack(bo + "I", len(b)) + b


def build_id_entry(bo, build_id, filename, pid=HOST_PID, misc=MISC_USER | MISC_BUILD_ID_SIZE,
                   rtype=0):
    """One BUILD_ID feature entry (rtype 0) or HEADER_BUILD_ID record (67)."""
    name = cstr(filename, NAME_ALIGN)
    size = 36 + len(name)
    bid = bytes(build_id)[:20]
    return (struct.pack(bo + "IHHi", rtype, misc, size, pid) + bid + b"\0" * (20 - len(bid))
            + struct.pack(bo + "BBH", len(bid), 0, 0) + name)


def event_desc(bo, attrs):
    out = struct.pack(bo + "II", len(attrs), attrs[0].size)
    for a in attrs:
        out += a.raw(bo) + struct.pack(bo + "I", len(a.ids)) + perf_string(a.name, bo)
        out += b"".join(struct.pack(bo + "Q", i) for i in a.ids)
    return out


# perf record's mmap_len with its default 128-page ring buffer: (128 + 1)
# pages of 4 KiB, the same value `perf record -z` writes on this machine
PERF_MMAP_LEN = 528384


def compressed_feature(bo, mmap_len=PERF_MMAP_LEN):
    # ver, type (1 = zstd), level, ratio, mmap_len
    return struct.pack(bo + "IIIII", 1, 1, 3, 4, mmap_len)


HEADER_PAGE = (
    "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
    "\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
    "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
    "\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n")
HEADER_EVENT = (
    "# compressed entry header\n\ttype_len    :    5 bits\n"
    "\ttime_delta  :   27 bits\n\tarray       :   32 bits\n")


def tracing_blob(bo):
    """A minimal trace-cmd 0.6 blob: header_page, header_event, no event
    formats, no kallsyms/printk/cmdlines (section 4 of the notes)."""
    p = lambda f, v: struct.pack(bo + f, v)  # noqa: E731
    b = b"\x17\x08\x44tracing" + b"0.6\0"
    b += bytes([1 if bo == ">" else 0, 8]) + p("I", 4096)
    hp = HEADER_PAGE.encode()
    he = HEADER_EVENT.encode()
    b += b"header_page\0" + p("Q", len(hp)) + hp
    b += b"header_event\0" + p("Q", len(he)) + he
    b += p("I", 0)          # ftrace formats
    b += p("I", 0)          # systems
    b += p("I", 0)          # kallsyms
    b += p("I", 0)          # printk
    b += p("Q", 0)          # saved cmdlines
    return b


# ---------------------------------------------------------------------------
# the builder

class PerfDataBuilder:
    def __init__(self, bo="<", pipe=False, attrs=None, end_marker=False, v1=False):
        """v1: written with version 1's magic ("PERFFILE"), which says no
        byte order: perf tells it from attr_size (a perf_event_attr ABI
        size, 64/72/80/96/104, + 16) or a pipe's header size."""
        if bo not in ("<", ">"):
            raise ValueError("byte order must be '<' or '>'")
        self.bo = bo
        self.v1 = v1
        self.pipe = pipe
        self.attrs = attrs if attrs is not None else [Attr(ids=[101])]
        self.features = {}          # bit -> body
        self.stream = []            # top-level records (containers hold theirs)
        self.end_marker = end_marker
        self._group = None
        self.records = None         # every record in file order, after to_bytes()
        self.header = None
        self.data_offset = self.data_size = None
        self.attrs_offset = self.attrs_size = None
        self.feature_sections = {}  # bit -> (offset, size)
        self.header_overrides = {}
        self._bytes = None

    # -- helpers ----------------------------------------------------------
    def p(self, fmt, *v):
        return struct.pack(self.bo + fmt, *v)

    @property
    def a0(self):
        return self.attrs[0]

    def attr_index(self, sid):
        for i, a in enumerate(self.attrs):
            if sid in a.ids:
                return i
        return 0

    def trailer(self, pid, tid, time, sid=None):
        """sample_id trailer of attr 0's layout (sample_id_all)."""
        a = self.attrs[self.attr_index(sid) if sid is not None else 0]
        if not self.a0.sample_id_all:
            return b""
        sid = a.ids[0] if sid is None and a.ids else (sid or 0)
        st = a.sample_type
        t = b""
        if st & S_TID:
            t += self.p("II", pid, tid)
        if st & S_TIME:
            t += self.p("Q", time)
        if st & S_ID:
            t += self.p("Q", sid)
        if st & S_STREAM_ID:
            t += self.p("Q", sid)
        if st & S_CPU:
            t += self.p("II", 0, 0)
        if st & S_IDENTIFIER:
            t += self.p("Q", sid)
        return t

    def _kernel_meta(self, pid, tid, time, sid):
        if not self.a0.sample_id_all:
            return dict(time=None, pid=None, tid=None, attr=None)
        return dict(time=time, pid=pid, tid=tid,
                    attr=self.attr_index(sid) if sid is not None else 0)

    def add(self, rec):
        if self._group is not None:
            rec.compressed = True
            self._group.append(rec)
        else:
            self.stream.append(rec)
        return rec

    # -- features -----------------------------------------------------------
    def feature(self, bit, body):
        self.features[bit] = bytes(body)

    def feat_string(self, bit, s):
        self.feature(bit, perf_string(s, self.bo))

    def feat_event_desc(self):
        self.feature(FEAT_EVENT_DESC, event_desc(self.bo, self.attrs))

    def feat_build_ids(self, entries):
        """entries: [(build_id bytes, filename)]"""
        self.feature(FEAT_BUILD_ID, b"".join(build_id_entry(self.bo, bid, fn)
                                             for bid, fn in entries))

    # -- records ------------------------------------------------------------
    def comm(self, pid, tid, comm, time, sid=None, misc=MISC_COMM_EXEC):
        body = self.p("II", pid, tid) + cstr(comm[:15], 8) + self.trailer(pid, tid, time, sid)
        return self.add(Rec(PERF_RECORD_COMM, misc, body, bo=self.bo,
                            fields=dict(comm=comm[:15]), **self._kernel_meta(pid, tid, time, sid)))

    def mmap(self, pid, tid, start, length, pgoff, filename, time, sid=None,
             misc=MISC_USER):
        body = (self.p("IIQQQ", pid, tid, start, length, pgoff) + cstr(filename, 8)
                + self.trailer(pid, tid, time, sid))
        f = dict(start=start, len=length, pgoff=pgoff, filename=filename)
        return self.add(Rec(PERF_RECORD_MMAP, misc, body, bo=self.bo, fields=f,
                            **self._kernel_meta(pid, tid, time, sid)))

    def mmap2(self, pid, tid, start, length, pgoff, filename, time, prot=5, flags=2,
              maj=8, minor=1, ino=123456, ino_gen=0, sid=None, misc=MISC_USER, role="pass"):
        body = (self.p("IIQQQIIQQII", pid, tid, start, length, pgoff, maj, minor, ino,
                       ino_gen, prot, flags)
                + cstr(filename, 8) + self.trailer(pid, tid, time, sid))
        f = dict(start=start, len=length, pgoff=pgoff, prot=prot, filename=filename)
        return self.add(Rec(PERF_RECORD_MMAP2, misc, body, bo=self.bo, fields=f, role=role,
                            **self._kernel_meta(pid, tid, time, sid)))

    def sample(self, ip, pid, tid, time, callchain=None, period=None, sid=None,
               misc=MISC_USER, jit_sym=None, read=None, raw=b"", branches=(), hw_idx=0,
               counters=None, regs_abi=ABI_64, regs=None, stack=b"", dyn_size=None,
               lie=None, cut=None):
        """A SAMPLE in its attr's layout (sample_type, read_format,
        branch_sample_type, sample_regs_user), the kernel's field order.
        The fields past CALLCHAIN, when the attr samples them:
          read       [(value, id, lost)] (one entry unless GROUP; default
                     one of the period); the times are 1000 and 999
          raw        the RAW bytes (u32 size first; zeros added to end
                     the field 8-aligned, counted in the size)
          branches   [(from, to, flags)], then hw_idx with HW_INDEX and
                     counters (default 0 each) with COUNTERS
          regs_abi   0 = no registers; else the values of `regs` (default
                     1, 2, ...: one per bit of sample_regs_user)
          stack      the stack copy, dyn_size the part of it copied
                     (default all); no copy and no dyn_size when empty
        Damaged samples: lie {field: value} writes value in place of a
        count or size ("read_nr", "chain_nr", "raw_size", "branch_nr",
        "stack_size"; the bytes that follow are the true ones); cut ends
        the record after this many bytes of its body (its header's size
        says so too).  The Rec's .layout lists (field, its offset in
        the body), then ("end", the body's size)."""
        lie = lie or {}
        ai = self.attr_index(sid) if sid is not None else 0
        a = self.attrs[ai]
        if sid is None:
            sid = a.ids[0] if a.ids else 0
        st = a.sample_type
        body = b""
        starts = []                 # (field, offset in the body)

        def at(field):
            starts.append((field, len(body)))

        if st & S_IDENTIFIER:
            at("identifier")
            body += self.p("Q", sid)
        if st & S_IP:
            at("ip")
            body += self.p("Q", ip)
        if st & S_TID:
            at("tid")
            body += self.p("II", pid, tid)
        if st & S_TIME:
            at("time")
            body += self.p("Q", time)
        if st & S_ADDR:
            at("addr")
            body += self.p("Q", 0)
        if st & S_ID:
            at("id")
            body += self.p("Q", sid)
        if st & S_STREAM_ID:
            at("stream_id")
            body += self.p("Q", sid)
        if st & S_CPU:
            at("cpu")
            body += self.p("II", 0, 0)
        if st & S_PERIOD:
            at("period")
            body += self.p("Q", a.period if period is None else period)
        if st & S_READ:
            at("read")
            body += self.read_values(a, read, sid, period, lie)
        if st & S_CALLCHAIN:
            at("callchain")
            chain = [PERF_CONTEXT_USER, ip] if callchain is None else callchain
            body += (self.p("Q", lie.get("chain_nr", len(chain)))
                     + b"".join(self.p("Q", c) for c in chain))
        if st & S_RAW:
            at("raw")
            # the kernel pads the bytes so that the field ends 8-aligned,
            # and its size counts the padding
            raw += b"\0" * (align(len(raw) + 4, 8) - 4 - len(raw))
            body += self.p("I", lie.get("raw_size", len(raw)) & 0xFFFFFFFF) + raw
        if st & S_BRANCH_STACK:
            at("branch_stack")
            body += self.p("Q", lie.get("branch_nr", len(branches)))
            if a.branch_sample_type & BR_HW_INDEX:
                body += self.p("Q", hw_idx)
            body += b"".join(self.p("QQQ", *e) for e in branches)
            if a.branch_sample_type & BR_COUNTERS:
                cs = [0] * len(branches) if counters is None else counters
                body += b"".join(self.p("Q", c) for c in cs)
        if st & S_REGS_USER:
            at("regs_user")
            body += self.p("Q", regs_abi)
            if regs_abi:
                k = bin(a.sample_regs_user).count("1")
                vals = list(range(1, k + 1)) if regs is None else regs
                body += b"".join(self.p("Q", v) for v in vals)
        if st & S_STACK_USER:
            at("stack_user")
            body += self.p("Q", lie.get("stack_size", len(stack)))
            if stack:
                body += stack + self.p("Q", len(stack) if dyn_size is None else dyn_size)
        if cut is not None:
            body = body[:cut]
        starts.append(("end", len(body)))
        r = Rec(PERF_RECORD_SAMPLE, misc, body, bo=self.bo,
                time=time if st & S_TIME else None,
                pid=pid if st & S_TID else None, tid=tid if st & S_TID else None,
                attr=ai)
        r.jit_sym = jit_sym
        r.fields["ip"] = ip
        r.layout = starts
        return self.add(r)

    def read_values(self, a, read, sid, period, lie):
        """The READ field of attr a's read_format."""
        rf = a.read_format
        if read is None:
            read = [(a.period if period is None else period, sid, 0)]
        times = b""
        if rf & RF_TOTAL_TIME_ENABLED:
            times += self.p("Q", 1000)
        if rf & RF_TOTAL_TIME_RUNNING:
            times += self.p("Q", 999)

        def one(v):
            out = self.p("Q", v[0])
            if rf & RF_ID:
                out += self.p("Q", v[1])
            if rf & RF_LOST:
                out += self.p("Q", v[2])
            return out
        if rf & RF_GROUP:
            return (self.p("Q", lie.get("read_nr", len(read))) + times
                    + b"".join(one(v) for v in read))
        return one(read[0])[:8] + times + one(read[0])[8:]

    def finished_round(self):
        return self.add(Rec(PERF_RECORD_FINISHED_ROUND, 0, b"", bo=self.bo))

    def finished_init(self):
        return self.add(Rec(PERF_RECORD_FINISHED_INIT, 0, b"", bo=self.bo))

    def unknown(self, rtype, payload, misc=0):
        return self.add(Rec(rtype, misc, payload, bo=self.bo))

    def tracing_data(self, blob=None):
        blob = tracing_blob(self.bo) if blob is None else blob
        padded = blob + b"\0" * (align(len(blob), 8) - len(blob))
        return self.add(Rec(PERF_RECORD_HEADER_TRACING_DATA, 0,
                            self.p("II", len(padded), 0), extra=padded, bo=self.bo))

    def auxtrace(self, payload, offset=0, reference=0x1234, idx=0, tid=0, cpu=0):
        body = self.p("QQQIIII", len(payload), offset, reference, idx, tid, cpu, 0)
        return self.add(Rec(PERF_RECORD_AUXTRACE, 0, body, extra=payload, bo=self.bo))

    def header_build_id(self, build_id, filename, pid=HOST_PID):
        e = build_id_entry(self.bo, build_id, filename, pid=pid,
                           rtype=PERF_RECORD_HEADER_BUILD_ID)
        r = Rec(PERF_RECORD_HEADER_BUILD_ID, MISC_USER | MISC_BUILD_ID_SIZE, e[8:], bo=self.bo)
        return self.add(r)

    def raw_record(self, rtype, misc, body, size=None, extra=b""):
        """Any bytes; size overrides header.size (damaged files)."""
        return self.add(Rec(rtype, misc, body, extra=extra, bo=self.bo, size=size))

    # -- COMPRESSED ---------------------------------------------------------
    def begin_compressed(self):
        if self._group is not None:
            raise RuntimeError("nested compressed block")
        self._group = []

    def end_compressed(self, frames=1, level=3):
        """Packs the records since begin_compressed() into `frames`
        COMPRESSED records (one zstd frame each); with frames > 1 the split
        points fall inside records, so a record spans two COMPRESSED
        records, as perf record -z can write."""
        group, self._group = self._group, None
        blob = b"".join(r.data + r.extra for r in group)
        cuts = [len(blob) * k // frames + 3 for k in range(1, frames)]
        parts, prev = [], 0
        for c in cuts + [len(blob)]:
            parts.append(blob[prev:c])
            prev = c
        conts = []
        for i, part in enumerate(parts):
            frame = zstd_compress(part, level)
            if 8 + len(frame) > 0xFFFF:
                raise ValueError("compressed block too large for one record")
            c = Rec(PERF_RECORD_COMPRESSED, 0, frame, bo=self.bo, role="container")
            conts.append(c)
            self.stream.append(c)
        # attribute each inner record to the container holding its last byte
        pos, ci, ends = 0, 0, []
        acc = 0
        for part in parts:
            acc += len(part)
            ends.append(acc)
        for r in group:
            pos += r.total
            while ends[ci] < pos:
                ci += 1
            r.container = conts[ci]
            conts[ci].inner.append(r)
        return conts

    # -- output -------------------------------------------------------------
    def _pipe_prefix(self):
        out = []
        for a in self.attrs:
            raw = a.raw(self.bo)
            body = raw + b"".join(self.p("Q", i) for i in a.ids)
            out.append(Rec(PERF_RECORD_HEADER_ATTR, 0, body, bo=self.bo))
        for bit in sorted(self.features):
            body = self.features[bit]
            if bit == FEAT_BUILD_ID:
                pos = 0
                while pos < len(body):
                    sz = struct.unpack_from(self.bo + "H", body, pos + 6)[0]
                    e = body[pos:pos + sz]
                    out.append(Rec(PERF_RECORD_HEADER_BUILD_ID,
                                   struct.unpack_from(self.bo + "H", e, 4)[0], e[8:],
                                   bo=self.bo))
                    pos += sz
            elif bit == FEAT_TRACING_DATA:
                padded = body + b"\0" * (align(len(body), 8) - len(body))
                out.append(Rec(PERF_RECORD_HEADER_TRACING_DATA, 0,
                               self.p("II", len(padded), 0), extra=padded, bo=self.bo))
            else:
                r = Rec(PERF_RECORD_HEADER_FEATURE, 0, self.p("Q", bit) + body, bo=self.bo,
                        role="feature-compressed" if bit == FEAT_COMPRESSED else "pass")
                r.fields["feat_id"] = bit
                out.append(r)
        if self.end_marker:
            r = Rec(PERF_RECORD_HEADER_FEATURE, 0, self.p("Q", HEADER_LAST_FEATURE_6_1),
                    bo=self.bo)
            r.fields["feat_id"] = HEADER_LAST_FEATURE_6_1
            out.append(r)
        return out

    def _layout(self, top, start):
        """Assigns offsets; returns (bytes, every record in order)."""
        buf = bytearray()
        flat = []
        for r in top:
            r.offset = start + len(buf)
            buf += r.data + r.extra
            if r.role == "container":
                flat.append(r)
            else:
                flat.append(r)
        # inner records take their container's offset; list them after it
        out = []
        for r in flat:
            out.append(r)
            for x in r.inner:
                x.offset = r.offset
                out.append(x)
        return bytes(buf), out

    def to_bytes(self):
        if self._group is not None:
            raise RuntimeError("unfinished compressed block")
        bo = self.bo
        magic = MAGIC_V1 if self.v1 else MAGIC if bo == "<" else MAGIC_BE
        if self.pipe:
            top = self._pipe_prefix() + self.stream
            data, self.records = self._layout(top, PIPE_HDR)
            self.data_offset, self.data_size = PIPE_HDR, len(data)
            hdr = magic + self.p("Q", PIPE_HDR)
            self._bytes = hdr + data
            return self._bytes
        # file mode: header | ids | attrs | data | feature table | bodies
        ids = bytearray()
        id_secs = []
        for a in self.attrs:
            off = FILE_HDR + len(ids)
            blob = b"".join(self.p("Q", i) for i in a.ids)
            ids += blob
            id_secs.append((off, len(blob)))
        attrs_off = FILE_HDR + len(ids)
        ents = bytearray()
        for a, (o, s) in zip(self.attrs, id_secs):
            ents += a.raw(bo) + self.p("QQ", o, s)
        attr_size = self.attrs[0].size + 16
        data_off = attrs_off + len(ents)
        data, self.records = self._layout(self.stream, data_off)
        feat_off = data_off + len(data)
        bits = sorted(self.features)
        table = bytearray()
        bodies = bytearray()
        body_off = feat_off + 16 * len(bits)
        for bit in bits:
            b = self.features[bit]
            table += self.p("QQ", body_off + len(bodies), len(b))
            self.feature_sections[bit] = (body_off + len(bodies), len(b))
            bodies += b
        bitmap = [0, 0, 0, 0]
        for bit in bits:
            bitmap[bit // 64] |= 1 << (bit % 64)
        h = dict(size=FILE_HDR, attr_size=attr_size, attrs_offset=attrs_off,
                 attrs_size=len(ents), data_offset=data_off, data_size=len(data))
        h.update(self.header_overrides)
        self.header = h
        self.attrs_offset, self.attrs_size = attrs_off, len(ents)
        self.data_offset, self.data_size = data_off, len(data)
        hdr = (magic + self.p("QQQQQQQQ", h["size"], h["attr_size"], h["attrs_offset"],
                              h["attrs_size"], h["data_offset"], h["data_size"], 0, 0)
               + b"".join(self.p("Q", w) for w in bitmap))
        assert len(hdr) == FILE_HDR
        self._bytes = hdr + bytes(ids) + bytes(ents) + data + bytes(table) + bytes(bodies)
        return self._bytes

    def write(self, path):
        data = self.to_bytes()
        with open(path, "wb") as f:
            f.write(data)
        return path

    def expected_passthrough(self):
        """Records inject must copy unchanged, in order: containers become
        their records, markers and the pipe COMPRESSED feature go."""
        return [r for r in self.records if r.role == "pass"]


# ---------------------------------------------------------------------------
# minimal reader (independent of perfgraft), for self-checks and for
# reading perfgraft's output

class Parsed:
    pass


def parse(data, decompress=True):
    """Parses a perf.data.  Returns Parsed with: bo, pipe, header (dict),
    attrs ([dict raw, size, sample_type, flags_raw, ids]), features
    ({bit: bytes}), records ([dict offset, type, misc, size, data, extra,
    compressed])."""
    P = Parsed()
    if data[:8] == MAGIC:
        bo = "<"
    elif data[:8] == MAGIC_BE:
        bo = ">"
    else:
        raise ValueError("bad magic")
    P.bo = bo
    hsize = struct.unpack_from(bo + "Q", data, 8)[0]
    P.pipe = hsize == PIPE_HDR
    P.attrs = []
    P.features = {}
    P.header = dict(size=hsize)
    if P.pipe:
        start, end = PIPE_HDR, len(data)
    else:
        (attr_size, aoff, asz, doff, dsz) = struct.unpack_from(bo + "QQQQQ", data, 16)
        bitmap = struct.unpack_from(bo + "QQQQ", data, 72)
        P.header.update(attr_size=attr_size, attrs_offset=aoff, attrs_size=asz,
                        data_offset=doff, data_size=dsz, bitmap=bitmap)
        pos = aoff
        for _ in range(asz // attr_size):
            sz = struct.unpack_from(bo + "I", data, pos + 4)[0] or 64
            raw = data[pos:pos + sz]
            io, isz = struct.unpack_from(bo + "QQ", data, pos + sz)
            ids = list(struct.unpack_from(bo + "%dQ" % (isz // 8), data, io))
            P.attrs.append(_attr_dict(raw, bo, ids))
            pos += sz + 16
        start, end = doff, doff + dsz
        tpos = end
        for bit in range(256):
            if bitmap[bit // 64] >> (bit % 64) & 1:
                o, s = struct.unpack_from(bo + "QQ", data, tpos)
                P.features[bit] = data[o:o + s]
                tpos += 16
    P.records = []
    pos = start
    while pos < end:
        t, misc, size = struct.unpack_from(bo + "IHH", data, pos)
        if size < 8 or pos + size > end:
            raise ValueError("bad record at %d" % pos)
        rec = data[pos:pos + size]
        nx = pos + size
        extra = b""
        if t == PERF_RECORD_HEADER_TRACING_DATA:
            n = struct.unpack_from(bo + "I", rec, 8)[0]
            extra = data[nx:nx + n]
        elif t == PERF_RECORD_AUXTRACE:
            n = struct.unpack_from(bo + "Q", rec, 8)[0]
            extra = data[nx:nx + n]
        if t == PERF_RECORD_COMPRESSED and decompress:
            P.records.append(dict(offset=pos, type=t, misc=misc, size=size, data=rec,
                                  extra=b"", container=True))
            P.records.extend(_inner(zstd_decompress(rec[8:]), bo, pos))
        else:
            P.records.append(dict(offset=pos, type=t, misc=misc, size=size, data=rec,
                                  extra=extra))
            if t == PERF_RECORD_HEADER_ATTR:
                sz = struct.unpack_from(bo + "I", rec, 12)[0] or 64
                raw = rec[8:8 + sz]
                ids = list(struct.unpack_from(bo + "%dQ" % ((size - 8 - sz) // 8), rec, 8 + sz))
                P.attrs.append(_attr_dict(raw, bo, ids))
        pos = nx + len(extra)
    return P


def _inner(blob, bo, off):
    # records may span frames; the caller's blobs are whole here only when
    # frames == 1, so join consecutive containers before calling in general
    out = []
    pos = 0
    while pos + 8 <= len(blob):
        t, misc, size = struct.unpack_from(bo + "IHH", blob, pos)
        if size < 8:    # damage: no record is shorter than its header
            raise ValueError("record of %d bytes inside compressed data" % size)
        out.append(dict(offset=off, type=t, misc=misc, size=size, data=blob[pos:pos + size],
                        extra=b"", compressed=True))
        pos += size
    return out


def _attr_dict(raw, bo, ids):
    return dict(raw=raw, size=len(raw), type=struct.unpack_from(bo + "I", raw, 0)[0],
                sample_type=struct.unpack_from(bo + "Q", raw, 24)[0],
                flags_raw=raw[40:48], ids=ids)


def decode_mmap(rec, bo):
    """(pid, tid, start, len, pgoff, filename) of an MMAP/MMAP2 record dict."""
    d = rec["data"]
    pid, tid, start, length, pgoff = struct.unpack_from(bo + "IIQQQ", d, 8)
    noff = 40 if rec["type"] == PERF_RECORD_MMAP else 72
    name = d[noff:d.index(b"\0", noff)].decode("utf-8", "replace")
    return pid, tid, start, length, pgoff, name


# ---------------------------------------------------------------------------
# the standard scenario

T0 = 10_000_000_000            # perf time (CLOCK_MONOTONIC ns) of the first record
PID = 4242
JIT_BASE = jitdump_gen.BASE64
NODE_PATH = "/opt/perfgraft-test/bin/node"
LIBC_PATH = "/opt/perfgraft-test/lib/libc.so.6"
NODE_BASE = 0x555555554000
LIBC_BASE = 0x7F0000100000
FAKE_BUILD_ID = bytes(range(0xA0, 0xB4))
UNKNOWN_FEATURE_BIT = 40
AUX_PAYLOAD = bytes((i * 7 + 3) & 0xFF for i in range(200))
UNKNOWN_PAYLOAD = b"\xde\xad\xbe\xef" + bytes(range(20))

# JIT functions: (name, offset from JIT_BASE, size, load time offset)
JIT_FUNCS = [
    (b"JS:*fib /app/fib.js:3", 0x40, 0x30, 20_000),
    (b"JS:~work /app/work.js:20", 0x100, 0x45, 30_000),
    (b"Builtin:ArrayPrototypePush", 0x200, 0x20, 40_000),
]


def own_tid_case(path, bo="<", v1=False, pipe=False):
    """A file whose records carry a pid/tid unlike their sample_id
    trailers' (issue 23 point 10): a kernel MMAP of pid -1 with 0/0 in its
    trailer (as perf synthesizes it), a COMM and a FORK whose trailers
    name the parent thread, an MMAP2 whose trailer names thread 1, a
    SAMPLE, and an EXIT with 0/0 in its trailer.  v1: version 1's magic
    with a 72-byte attr (attr_size 88).  Returns [(type, pid, tid,
    trailer pid, trailer tid)] in file order, pids as perf prints them
    (signed)."""
    a = Attr(size=72 if v1 else 128, sample_type=S_IP | S_TID | S_TIME | S_PERIOD, ids=[7])
    b = PerfDataBuilder(bo=bo, attrs=[a], pipe=pipe, v1=v1)
    pid, tid, t = PID, PID + 1, T0

    def rec(rtype, misc, body, tpid, ttid, time):
        b.raw_record(rtype, misc, body + b.trailer(tpid, ttid, time))

    rec(PERF_RECORD_MMAP, MISC_KERNEL,
        b.p("IIQQQ", 0xFFFFFFFF, 0, 0xffffffff81000000, 0x1000000, 0xffffffff81000000)
        + cstr("[kernel.kallsyms]_text", 8), 0, 0, 0)
    rec(PERF_RECORD_COMM, MISC_COMM_EXEC, b.p("II", pid, tid) + cstr("worker", 8), pid, pid, t)
    # FORK and EXIT: u32 pid, ppid, tid, ptid; u64 time
    rec(PERF_RECORD_FORK, 0, b.p("IIIIQ", pid, pid, tid, pid, t + 1), pid, pid, t + 1)
    rec(PERF_RECORD_MMAP2, MISC_USER,
        b.p("IIQQQIIQQII", pid, tid, 0x400000, 0x1000, 0, 8, 1, 99, 0, 5, 2)
        + cstr("/usr/bin/true", 8), 1, 1, t + 2)
    b.sample(0x400010, pid, tid, t + 3)
    rec(PERF_RECORD_EXIT, 0, b.p("IIIIQ", pid, pid, tid, pid, t + 4), 0, 0, t + 4)
    b.write(path)
    return [(PERF_RECORD_MMAP, -1, 0, 0, 0), (PERF_RECORD_COMM, pid, tid, pid, pid),
            (PERF_RECORD_FORK, pid, tid, pid, pid), (PERF_RECORD_MMAP2, pid, tid, 1, 1),
            (PERF_RECORD_SAMPLE, pid, tid, pid, tid), (PERF_RECORD_EXIT, pid, tid, 0, 0)]


class Case:
    """A generated perf.data and what inject should make of it."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return "Case(%s)" % self.name


def write_jitdump(path, pid=PID, t0=T0, funcs=JIT_FUNCS):
    b = jitdump_gen.JitdumpBuilder(pid=pid, timestamp=t0)
    for i, (name, off, size, dt) in enumerate(funcs):
        b.load(name, jitdump_gen.x86_64_code(size, i), JIT_BASE + off, i,
               timestamp=t0 + dt)
    b.close(timestamp=t0 + 90_000)
    b.write(path)
    return b


def make_case(outdir, name, bo="<", pipe=False, attr_size=128, two_attrs=True,
              compressed=False, frames=1, extras=False, use_clockid=True,
              jitdump="write", features=True, tracing=True, unknown_feature=None,
              header_features=None, end_marker=False, be_flags_as_u64=False,
              sample_id_all=True, ids=True, anon=False, comp_mmap_len=PERF_MMAP_LEN):
    """Writes OUTDIR/NAME.data (and OUTDIR/jit-PID.dump unless jitdump is
    "missing"; "none" writes no marker at all).

    extras: an unknown record type 200 and an AUXTRACE with payload
    (perf 6.1 cannot process either: see the tests).
    compressed: the middle of the stream goes into COMPRESSED records
    (`frames` zstd frames, records spanning them when > 1).
    unknown_feature (default: file mode only): feature bit 40; perf 6.1
    stops at it in a pipe ("failed: wrong feature ID: 40").
    header_features (default: not for big-endian pipes): the features that
    travel as HEADER_FEATURE in a pipe; perf 6.1 does not byte-swap their
    feat_id, so it cannot read them from a big-endian pipe.  BUILD_ID
    entries (HEADER_BUILD_ID records) are always there.

    sample_id_all=False: no sample_id trailers (non-sample records untimed).
    ids=False: one attr, no ids, no IDENTIFIER (perf record's default for a
    single event in file mode).
    anon: two exec //anon maps of the JIT pid, one before the first LOAD
    (kept by inject) and one after it (dropped: the images replace it).
    comp_mmap_len: the COMPRESSED feature's mmap_len (the bound on what
    one COMPRESSED record may decompress to).

    The returned Case says whether perf 6.1 can read the file (perf_ok)."""
    os.makedirs(outdir, exist_ok=True)
    if unknown_feature is None:
        unknown_feature = not pipe
    if header_features is None:
        header_features = not (pipe and bo == ">")
    flags = tuple(f for f in DEFAULT_FLAGS if (use_clockid or f != F_USE_CLOCKID)
                  and (sample_id_all or f != F_SAMPLE_ID_ALL))
    if not ids:
        two_attrs = False
    attrs = [Attr(size=attr_size, config=0, ids=[101, 102] if ids else [], name="cpu-clock",
                  flags=flags, be_flags_as_u64=be_flags_as_u64,
                  sample_type=SAMPLE_TYPE if ids else SAMPLE_TYPE & ~S_IDENTIFIER)]
    if two_attrs:
        attrs.append(Attr(size=attr_size, config=1, ids=[201], name="task-clock",
                          flags=flags, be_flags_as_u64=be_flags_as_u64))
    b = PerfDataBuilder(bo=bo, pipe=pipe, attrs=attrs, end_marker=end_marker)
    dump_path = os.path.join(os.path.abspath(outdir), "jit-%d.dump" % PID)
    jd = None
    if jitdump == "write":
        jd = write_jitdump(dump_path)
    if features:
        if header_features:
            b.feat_string(FEAT_HOSTNAME, "perfgraft-test-host")
            b.feat_string(FEAT_OSRELEASE, "6.1.0-test")
            b.feat_string(FEAT_VERSION, "6.1.0")
            b.feat_string(FEAT_ARCH, "x86_64")
            b.feat_event_desc()
            if unknown_feature:
                b.feature(UNKNOWN_FEATURE_BIT, b"future feature body \x01\x02\x03\x04")
        b.feat_build_ids([(FAKE_BUILD_ID, LIBC_PATH)])
    if compressed and header_features:
        b.feature(FEAT_COMPRESSED, compressed_feature(bo, comp_mmap_len))

    t = T0
    sid_b = attrs[1].ids[0] if two_attrs else (attrs[0].ids[1] if ids else None)
    b.comm(PID, PID, "node", t + 1000)
    b.mmap(PID, PID, NODE_BASE, 0x200000, 0, NODE_PATH, t + 2000)
    b.mmap2(PID, PID, LIBC_BASE, 0x1d0000, 0x28000, LIBC_PATH, t + 3000)
    if tracing:
        b.tracing_data()
    # perf record -z compresses what comes from the ring buffers: from
    # the marker on (the synthesized COMM/MMAPs before it are plain)
    if compressed:
        b.begin_compressed()
    marker = None
    if jitdump != "none":
        marker = b.mmap2(PID, PID, 0x7F3A1B000000, 4096, 0, dump_path, t + 5000,
                         prot=5, role="marker")
    anon_recs = []
    if anon:
        anon_recs.append(b.mmap2(PID, PID, 0x7F3A1D000000, 0x10000, 0, "//anon", t + 6000,
                                 prot=7, maj=0, minor=0, ino=0))
    b.sample(NODE_BASE + 0x1234, PID, PID, t + 10_000)
    b.sample(LIBC_BASE + 0x500, PID, PID + 1, t + 12_000, sid=sid_b)
    b.finished_round()
    if anon:
        r = b.mmap2(PID, PID, 0x7F3A1E000000, 0x10000, 0, "//anon", t + 21_000,
                    prot=7, maj=0, minor=0, ino=0, role="anon-dropped" if jit_ok_for(
                        jitdump, use_clockid, attr_size) else "pass")
        anon_recs.append(r)
    funcs = [(n.decode(), JIT_BASE + off, size, t + dt) for n, off, size, dt in JIT_FUNCS]
    # samples in JIT code, each after its function's LOAD; callers in JIT too
    plan = [(0, 25_000, None), (0, 26_000, None), (0, 31_000, 1), (1, 35_000, None),
            (1, 36_000, 0), (0, 38_000, 1), (2, 45_000, 1), (2, 46_000, None),
            (1, 47_000, None)]
    for k, (fi, dt, caller) in enumerate(plan):
        fname, addr, size, _ = funcs[fi]
        ip = addr + 4 + (k * 5) % (size - 8)
        chain = [PERF_CONTEXT_USER, ip]
        if caller is not None:
            chain.append(funcs[caller][1] + 8)
        chain.append(NODE_BASE + 0x2000)
        sid = sid_b if k % 3 == 2 else None
        b.sample(ip, PID, PID, t + dt, callchain=chain, sid=sid, jit_sym=fname)
        if k == 4:
            b.finished_round()
    if extras:
        b.unknown(200, UNKNOWN_PAYLOAD, misc=0x1234)
    if compressed:
        b.end_compressed(frames=frames)
    b.finished_round()
    if extras:
        b.auxtrace(AUX_PAYLOAD)
    b.sample(NODE_BASE + 0x1300, PID, PID, t + 60_000)
    b.comm(PID, PID + 1, "worker", t + 61_000)
    b.finished_round()
    path = os.path.join(outdir, name + ".data")
    b.write(path)
    jit_ok = jit_ok_for(jitdump, use_clockid, attr_size)
    perf_ok = (attr_size <= 128 and not extras and not (pipe and unknown_feature)
               and not (compressed and not header_features))
    return Case(name=name, path=path, builder=b, bo=bo, pipe=pipe, attr_size=attr_size,
                attrs=attrs, compressed=compressed, extras=extras, jitdump=jd,
                dump_path=dump_path, marker=marker, funcs=funcs,
                use_clockid=use_clockid, tracing=tracing, features=features,
                perf_ok=perf_ok, jit_ok=jit_ok, anon=anon_recs)


# ---------------------------------------------------------------------------
# DWARF call graphs: samples with user registers and stacks

# perf record --call-graph dwarf's sample_type for one event
DWARF_SAMPLE_TYPE = S_IP | S_TID | S_TIME | S_PERIOD | S_CALLCHAIN | S_REGS_USER | S_STACK_USER
# a dump in two generations (generations_dump): "JS:*kept" lives on into
# the second, which starts when "JS:*new" is loaded over "JS:*old"
KEPT_ADDR = JIT_BASE + 0x40
GEN_LOADS = [(b"JS:*kept", 0x40, 10_000), (b"JS:*old", 0x1000, 20_000),
             (b"JS:*new", 0x1000, 30_000)]
GEN2_TIME = T0 + 30_000


def dwarf_attr(**kw):
    """perf record -k mono --call-graph dwarf's attr (x86_64's registers,
    an 8 KiB stack copy); kw overrides any Attr argument."""
    d = dict(size=136, sample_type=DWARF_SAMPLE_TYPE, sample_regs_user=REGS_USER_X86_64,
             sample_stack_user=STACK_USER_DEFAULT)
    d.update(kw)
    return Attr(**d)


def generations_dump(path, pid=PID, t0=T0, i386=False):
    """A jitdump whose memory layout has two generations: a sample of pid
    after GEN2_TIME whose ip, chain, registers or stack holds KEPT_ADDR (+
    up to 0x30) makes inject (file mode, user stacks) carry "JS:*kept" into
    the second generation's image: one CARRY map more.  i386: a 32-bit
    process (its stacks are read 4 bytes a word; the code at BASE32)."""
    if i386:
        b = jitdump_gen.JitdumpBuilder(pid=pid, timestamp=t0, elf_mach=jitdump_gen.EM_386,
                                       arch="i386")
        base, code = jitdump_gen.BASE32, jitdump_gen.i386_code
    else:
        b = jitdump_gen.JitdumpBuilder(pid=pid, timestamp=t0)
        base, code = JIT_BASE, jitdump_gen.x86_64_code
    for i, (name, off, dt) in enumerate(GEN_LOADS):
        b.load(name, code(0x30, i), base + off, i, timestamp=t0 + dt)
    b.close(timestamp=t0 + 90_000)
    b.write(path)
    return b


def container_sizes(case):
    """[(COMPRESSED record, bytes its zstd frame decompresses to)] of a
    make_case() file, in file order."""
    return [(r, len(zstd_decompress(r.data[8:]))) for r in case.builder.records
            if r.role == "container"]


# ---------------------------------------------------------------------------
# hostile COMPRESSED records: zstd RLE blocks (issue 12, point 7)

ZSTD_MAGIC = 0xFD2FB528
ZSTD_BLOCK_MAX = 128 * 1024
# the most 4-byte RLE blocks one COMPRESSED record holds: 8-byte record
# header, 6-byte frame header, then the blocks, under the u16 record size
RLE_BLOCKS_MAX = (0xFFFF - 8 - 6) // 4


def zstd_rle_frame(blocks, byte=0x08):
    """A zstd frame written by hand (RFC 8878): no content size, a 128 KiB
    window, then one RLE block per entry of `blocks` (its regenerated
    size, at most 128 KiB), 4 bytes each; the last one ends the frame.
    Decompresses to sum(blocks) copies of `byte`: 32,768 times its size."""
    if not blocks:
        raise ValueError("a frame needs a block")
    # Frame_Header_Descriptor 0 (one Window_Descriptor byte follows);
    # Window_Descriptor: exponent 7, mantissa 0 = 2^17 bytes
    out = struct.pack("<IBB", ZSTD_MAGIC, 0x00, 7 << 3)
    for i, n in enumerate(blocks):
        if not 0 < n <= ZSTD_BLOCK_MAX:
            raise ValueError("RLE block of %d bytes" % n)
        last = 1 if i == len(blocks) - 1 else 0
        hdr = last | (1 << 1) | (n << 3)            # Block_Type 1 = RLE
        out += struct.pack("<I", hdr)[:3] + bytes([byte])
    return out


def rle_blocks(total):
    """Block sizes adding up to `total` bytes, 128 KiB each but the last."""
    full, rest = divmod(total, ZSTD_BLOCK_MAX)
    return [ZSTD_BLOCK_MAX] * full + ([rest] if rest else [])


def hostile_rle_case(path, bo="<", pipe=False, outputs=None, mmap_len=PERF_MMAP_LEN,
                     feature=True, byte=0x08):
    """A perf.data whose COMPRESSED records are zstd RLE blocks: one COMM,
    then one COMPRESSED record per entry of `outputs` (the bytes it
    decompresses to; default: one record holding RLE_BLOCKS_MAX blocks of
    128 KiB, 2,146,959,360 bytes from a 65,534-byte record), then a COMM.
    The decompressed bytes are all `byte`: records of type and size
    byte * 0x0101 (2056 for 0x08), an unknown type, passed through.
    feature: the COMPRESSED feature with mmap_len (a HEADER_FEATURE record
    in a pipe).  Returns the builder; .containers lists the COMPRESSED
    records (offsets set) with .output (bytes each decompresses to)."""
    if outputs is None:
        outputs = [RLE_BLOCKS_MAX * ZSTD_BLOCK_MAX]
    b = PerfDataBuilder(bo=bo, pipe=pipe, attrs=[Attr(ids=[101])])
    b.feat_string(FEAT_HOSTNAME, "perfgraft-test-host")
    if feature:
        b.feature(FEAT_COMPRESSED, compressed_feature(bo, mmap_len))
    b.comm(PID, PID, "node", T0 + 1000)
    b.containers = []
    for n in outputs:
        frame = zstd_rle_frame(rle_blocks(n), byte)
        if 8 + len(frame) > 0xFFFF:
            raise ValueError("%d bytes do not fit one record as RLE blocks" % n)
        c = Rec(PERF_RECORD_COMPRESSED, 0, frame, bo=bo, role="container")
        c.output = n
        b.stream.append(c)
        b.containers.append(c)
    b.comm(PID, PID + 1, "worker", T0 + 2000)
    b.write(path)
    return b


def jit_ok_for(jitdump, use_clockid, attr_size):
    """JIT code is injected when the dump is there and the clock matches
    (attr.size 64 has no clockid field)."""
    return jitdump == "write" and use_clockid and attr_size >= 96


# The standard set: name -> make_case keyword arguments.
STANDARD_CASES = {
    "file-le-128": dict(),
    "file-be-128": dict(bo=">"),
    "file-le-64": dict(attr_size=64),
    "file-le-112": dict(attr_size=112),
    "file-le-120": dict(attr_size=120),
    "file-be-120": dict(bo=">", attr_size=120),
    "file-le-136": dict(attr_size=136),
    "file-le-144": dict(attr_size=144),
    "file-le-comp": dict(compressed=True),
    "file-le-comp2": dict(compressed=True, frames=2),
    "file-be-comp": dict(bo=">", compressed=True),
    "file-le-extras": dict(extras=True),
    "file-be-extras": dict(bo=">", extras=True, compressed=True),
    "file-le-1attr": dict(two_attrs=False),
    "file-le-noidall": dict(sample_id_all=False),
    "file-le-noids": dict(ids=False),
    "file-le-anon": dict(anon=True),
    "pipe-le-128": dict(pipe=True),
    "pipe-be-128": dict(pipe=True, bo=">"),
    "pipe-le-comp": dict(pipe=True, compressed=True, frames=2),
    "pipe-le-extras": dict(pipe=True, extras=True, unknown_feature=True),
    "pipe-le-136": dict(pipe=True, attr_size=136),
}


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        sys.stderr.write(__doc__)
        return 2
    outdir = argv[1]
    for name, kw in STANDARD_CASES.items():
        sub = os.path.join(outdir, name)
        c = make_case(sub, name, **kw)
        print("%s\t%d records\t%s" % (c.path, len(c.builder.records), kw))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
