#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""inject's reading of samples (issue 20, points 1 and 2).

With DWARF call graphs (an attr samples STACK_USER) and a perf.data file
(not a pipe), inject reads every sample of a process whose dump waits and
notes the words that may be user frames (ip, call chain, user registers,
every word of the user stack copy), so that its images carry only the code
some stack reaches.  Each field's size comes from the file.  On dbd2623:

- a BRANCH_STACK sample of an attr with branch_sample_type HW_INDEX |
  COUNTERS that ends right after the branch nr: hw_idx was skipped without
  a room check, a huge nr passed, and the pointer wrapped: SIGSEGV (139);
- a STACK_USER size of 2^64-8: the room check wrapped to 0 and the walk
  read past the record: SIGBUS (135).

Here: those two files as the issue describes them, the layout of every
field checked by where a word must be found (a word that reaches "JS:*kept"
makes one CARRY map: "1 carry" in inject's summary), and a seeded sweep of
random sample_type / read_format / branch / regs / stack combinations with
damaged counts, sizes and ends, each with its dump beside it: exit 0 or 1
(with a message), never a signal nor a sanitizer report.

The binary is $PERFGRAFT or <repo>/build/perfgraft."""

import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jitdump_gen  # noqa: E402
import perfdata_gen as G  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(HERE, "..", "build", "perfgraft"))
PID = G.PID
DUMP = "jit-%d.dump" % PID
NODE_IP = G.NODE_BASE + 0x1234          # a sampled ip outside JIT code
SAMPLE_T = G.GEN2_TIME + 10_000         # in the dump's second generation
SAN_RE = re.compile(r"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer")
CARRY_RE = re.compile(r"\((\d+) carry live code")
# a branch nr for which dbd2623 stepped 2^40 bytes back from the record
# (32 * nr wraps to -2^40): a read there faults
WRAP_NR = 2 ** 59 - 2 ** 35
BRANCH_HW_COUNTERS = G.BR_HW_INDEX | G.BR_COUNTERS


def run(args, cwd):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, errors="replace",
                          timeout=120)


def q(v):
    return struct.pack("<Q", v)


def stack_of(*words):
    return b"".join(q(w) for w in words)


def recording(d, attrs, add_samples, marker=DUMP, name="perf.data"):
    """d/name: the dump's marker (relative: found by perf's rule beside the
    file, inject runs in d), then the samples add_samples(builder) adds,
    then a FINISHED_ROUND.  Returns (path, builder)."""
    b = G.PerfDataBuilder(attrs=attrs)
    if marker:
        b.mmap2(PID, PID, 0x7F3A1B000000, 4096, 0, marker, G.T0 + 5000, role="marker")
    add_samples(b)
    b.finished_round()
    path = os.path.join(d, name)
    b.write(path)
    return path, b


class Base(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        if not os.access(PERFGRAFT, os.X_OK):
            self.fail("perfgraft binary not found: %s" % PERFGRAFT)
        self.tmpd = tempfile.TemporaryDirectory(prefix="pg-hostile-inject-")
        self.addCleanup(self.tmpd.cleanup)
        self.t = self.tmpd.name

    def inject(self, d, *args, inp="perf.data", out="out.data"):
        return run([PERFGRAFT, "inject", "-i", inp, "-o", out] + list(args), cwd=d)

    def assertSurvived(self, p, what=""):
        """exit 0, or 1 with an error line; no signal, no sanitizer."""
        self.assertGreaterEqual(p.returncode, 0, "%s: killed by signal %d\n%s"
                                % (what, -p.returncode, p.stderr[-2000:]))
        self.assertIn(p.returncode, (0, 1), "%s: exit %d\n%s"
                      % (what, p.returncode, p.stderr[-2000:]))
        self.assertIsNone(SAN_RE.search(p.stderr), "%s\n%s" % (what, p.stderr[-4000:]))
        if p.returncode == 1:
            self.assertRegex(p.stderr, r"(?m)^perfgraft: (?!warning: |inject: jitdump ).+",
                             "%s: exit 1 without a message" % what)

    def carried(self, p):
        m = CARRY_RE.search(p.stderr)
        return int(m.group(1)) if m else 0

    def assertInjectedOnce(self, p, carried=0):
        """exit 0, the dump's 3 LOADs injected, `carried` CARRY maps."""
        self.assertSurvived(p)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("1 jitdump (3 LOAD, 0 MOVE)", p.stderr)
        self.assertEqual(self.carried(p), carried, p.stderr)

    def samples_out(self, path):
        with open(path, "rb") as f:
            P = G.parse(f.read())
        return [r["data"] for r in P.records if r["type"] == G.PERF_RECORD_SAMPLE]


# ---------------------------------------------------------------------------
# the two crashes, as the issue describes them

def bw_attr():
    """The issue's bw.data attr: BRANCH_STACK with HW_INDEX | COUNTERS,
    REGS_USER and STACK_USER (perf record -b --call-graph dwarf)."""
    st = (G.S_IDENTIFIER | G.S_IP | G.S_TID | G.S_TIME | G.S_CPU | G.S_PERIOD
          | G.S_BRANCH_STACK | G.S_REGS_USER | G.S_STACK_USER)
    return G.dwarf_attr(ids=[101], sample_type=st, branch_sample_type=BRANCH_HW_COUNTERS)


# IDENTIFIER, IP, TID, TIME, CPU, PERIOD, then the branch nr
BW_CUT = 7 * 8


class Crashes(Base):
    def bw(self, marker=DUMP):
        G.generations_dump(os.path.join(self.t, DUMP))
        return recording(self.t, [bw_attr()], lambda b: b.sample(
            NODE_IP, PID, PID, SAMPLE_T, lie={"branch_nr": WRAP_NR}, cut=BW_CUT),
            marker=marker)

    def check_passed_through(self, b):
        """The damaged sample is in the output as it was."""
        want = [r.data for r in b.records if r.type == G.PERF_RECORD_SAMPLE]
        self.assertEqual(self.samples_out(os.path.join(self.t, "out.data")), want)

    def test_branch_stack_ends_after_nr(self):
        """The issue's 456-byte bw.data: the SAMPLE ends right after the
        branch nr, hw_idx is not there.  dbd2623: SIGSEGV (exit 139).
        Now the sample's words end before the branch stack: nothing is
        carried, the sample is passed through."""
        path, b = self.bw()
        self.assertEqual(os.path.getsize(path), 456)
        p = self.inject(self.t)
        self.assertIn("jitdump %s of pid %d, found by its name (jit-PID.dump)" % (DUMP, PID),
                      p.stderr)
        self.assertInjectedOnce(p)
        self.check_passed_through(b)

    def test_branch_stack_ends_after_nr_dump_by_hand(self):
        """The same sample, the dump given with --jitdump (no marker)."""
        path, b = self.bw(marker=None)
        p = self.inject(self.t, "--jitdump", DUMP)
        self.assertInjectedOnce(p)
        self.check_passed_through(b)

    def test_hw_idx_missing(self):
        """The sample ends inside hw_idx; and a nr whose 24- and 32-byte
        multiples wrap to small numbers: nothing read past the end."""
        G.generations_dump(os.path.join(self.t, DUMP))
        for bst in (G.BR_HW_INDEX, BRANCH_HW_COUNTERS, G.BR_COUNTERS, 0):
            for nr, cut in ((WRAP_NR, BW_CUT + 4), (2 ** 61, None), (2 ** 64 // 3 + 1, None),
                            (2 ** 64 - 1, None)):
                with self.subTest(bst=bst, nr=nr, cut=cut):
                    a = bw_attr()
                    a.branch_sample_type = bst
                    recording(self.t, [a], lambda b: b.sample(
                        NODE_IP, PID, PID, SAMPLE_T, lie={"branch_nr": nr}, cut=cut,
                        stack=stack_of(G.KEPT_ADDR)))
                    self.assertInjectedOnce(self.inject(self.t))

    def test_user_stack_size_wraps(self):
        """STACK_USER size 2^64-8, then 64 bytes and a dyn_size: dbd2623's
        room check wrapped to 0 and read past the record, SIGBUS (135)."""
        G.generations_dump(os.path.join(self.t, DUMP))
        path, b = recording(self.t, [G.dwarf_attr(ids=[101])], lambda b: b.sample(
            NODE_IP, PID, PID, SAMPLE_T, stack=stack_of(*[G.KEPT_ADDR] * 8),
            lie={"stack_size": 2 ** 64 - 8}))
        p = self.inject(self.t)
        self.assertInjectedOnce(p)
        want = [r.data for r in b.records if r.type == G.PERF_RECORD_SAMPLE]
        self.assertEqual(self.samples_out(os.path.join(self.t, "out.data")), want)

    def test_user_stack_sizes_past_the_record(self):
        """Every size that does not fit the record, 64- and 32-bit
        processes: nothing read (the stack holds "JS:*kept" but it is not
        carried); the size that fits exactly is read."""
        for i386 in (False, True):
            G.generations_dump(os.path.join(self.t, DUMP), i386=i386)
            kept = jit_base(i386) + 0x40
            stack = stack_of(*[kept | kept << 32 if i386 else kept] * 4)
            for size in (2 ** 64 - 8, 2 ** 64 - 1, 2 ** 63, 2 ** 32 + 32, 33, 40, 32):
                with self.subTest(i386=i386, size=size):
                    recording(self.t, [G.dwarf_attr(ids=[101])], lambda b: b.sample(
                        NODE_IP, PID, PID, SAMPLE_T, stack=stack, lie={"stack_size": size}))
                    p = self.inject(self.t)
                    self.assertInjectedOnce(p, carried=1 if size <= 32 else 0)


def jit_base(i386):
    return jitdump_gen.BASE32 if i386 else G.JIT_BASE


# ---------------------------------------------------------------------------
# the layout: a word that reaches "JS:*kept" must be found where it is

ALL_FIELDS = (G.S_IDENTIFIER | G.S_IP | G.S_TID | G.S_TIME | G.S_ADDR | G.S_ID | G.S_STREAM_ID
              | G.S_CPU | G.S_PERIOD | G.S_READ | G.S_CALLCHAIN | G.S_RAW | G.S_BRANCH_STACK
              | G.S_REGS_USER | G.S_STACK_USER)


class Layout(Base):
    def setUp(self):
        super().setUp()
        G.generations_dump(os.path.join(self.t, DUMP))

    def carry_of(self, attr, **sample):
        kw = dict(ip=NODE_IP, pid=PID, tid=PID, time=SAMPLE_T,
                  callchain=[G.PERF_CONTEXT_USER, NODE_IP, G.NODE_BASE + 0x2000])
        kw.update(sample)
        recording(self.t, [attr], lambda b: b.sample(**kw))
        p = self.inject(self.t)
        self.assertSurvived(p)
        self.assertEqual(p.returncode, 0, p.stderr)
        return self.carried(p)

    def test_every_read_format(self):
        """READ in each of the 32 read_format combinations (GROUP with 0, 1
        and 3 members), before a stack whose last word reaches "kept"."""
        for rf in range(32):
            for n in ((0, 1, 3) if rf & G.RF_GROUP else (1,)):
                with self.subTest(read_format=rf, members=n):
                    a = G.dwarf_attr(ids=[101], sample_type=ALL_FIELDS & ~(
                        G.S_RAW | G.S_BRANCH_STACK) | G.S_READ, read_format=rf)
                    read = [(1000 + i, 101, i) for i in range(n)]
                    self.assertEqual(self.carry_of(a, read=read, stack=stack_of(
                        1, 2, G.KEPT_ADDR + 8)), 1)

    def test_branch_stack_layouts(self):
        """nr entries of 24 bytes, hw_idx with HW_INDEX, nr counters with
        COUNTERS, then the registers and the stack.  The 10-entry stacks
        without COUNTERS are less than 32 bytes an entry with what follows
        (dbd2623 took 32 bytes an entry for its room check and dropped
        them)."""
        for bst in (0, G.BR_HW_INDEX, G.BR_COUNTERS, BRANCH_HW_COUNTERS):
            for nr in (0, 1, 3, 10):
                with self.subTest(branch_sample_type=bst, nr=nr):
                    a = G.dwarf_attr(ids=[101], branch_sample_type=bst,
                                     sample_type=G.DWARF_SAMPLE_TYPE | G.S_BRANCH_STACK)
                    br = [(G.KEPT_ADDR, G.KEPT_ADDR + 4, 0)] * nr  # branches are no frames
                    self.assertEqual(self.carry_of(a, branches=br, hw_idx=G.KEPT_ADDR,
                                                   counters=[G.KEPT_ADDR] * nr,
                                                   stack=stack_of(G.KEPT_ADDR)), 1)
                    self.assertEqual(self.carry_of(a, branches=br, hw_idx=G.KEPT_ADDR,
                                                   counters=[G.KEPT_ADDR] * nr,
                                                   stack=stack_of(7)), 0)
        # the same, the stack alone after the branches (no registers)
        for bst in (0, G.BR_HW_INDEX, G.BR_COUNTERS, BRANCH_HW_COUNTERS):
            with self.subTest(branch_sample_type=bst, regs=False):
                a = G.dwarf_attr(ids=[101], branch_sample_type=bst,
                                 sample_type=(G.DWARF_SAMPLE_TYPE | G.S_BRANCH_STACK)
                                 & ~G.S_REGS_USER)
                self.assertEqual(self.carry_of(a, branches=[(1, 2, 3)] * 10,
                                               stack=stack_of(G.KEPT_ADDR)), 1)

    def test_raw_sizes(self):
        """RAW of 0..13 bytes (u32 size, padded to 8) before the stack."""
        for n in range(14):
            with self.subTest(raw=n):
                a = G.dwarf_attr(ids=[101], sample_type=G.DWARF_SAMPLE_TYPE | G.S_RAW)
                self.assertEqual(self.carry_of(a, raw=bytes(range(n)),
                                               stack=stack_of(G.KEPT_ADDR)), 1)

    def test_each_field_is_read(self):
        """The word in the ip, the call chain, a register or the stack;
        none when it is in a field that holds no frame (addr, period,
        read value, raw, branch entry) or in the stack past dyn_size."""
        a = G.dwarf_attr(ids=[101], sample_type=ALL_FIELDS)
        k = G.KEPT_ADDR
        base = dict(stack=stack_of(1, 2, 3))
        cases = [
            ("ip", 1, dict(ip=k)),
            ("callchain", 1, dict(callchain=[G.PERF_CONTEXT_USER, NODE_IP, k])),
            ("regs", 1, dict(regs=[k] + list(range(19)))),
            ("stack", 1, dict(stack=stack_of(1, k, 3))),
            ("stack, dyn_size", 1, dict(stack=stack_of(1, k, 3), dyn_size=16)),
            ("past dyn_size", 0, dict(stack=stack_of(1, 2, k), dyn_size=16)),
            ("no regs (abi 0)", 0, dict(regs_abi=0, stack=stack_of(1, 2, 3))),
            ("read", 0, dict(read=[(k, k, k)])),
            ("raw", 0, dict(raw=q(k))),
            ("branch", 0, dict(branches=[(k, k, k)])),
            ("period", 0, dict(period=k)),
        ]
        for what, want, kw in cases:
            with self.subTest(what):
                s = dict(base)
                s.update(kw)
                self.assertEqual(self.carry_of(a, **s), want)
        # registers after abi 0 are not there: the stack follows the abi
        with self.subTest("abi 0, stack"):
            self.assertEqual(self.carry_of(a, regs_abi=0, stack=stack_of(1, k)), 1)

    def test_32bit_stack_words(self):
        """A 32-bit process's stack is read 4 bytes a word."""
        G.generations_dump(os.path.join(self.t, DUMP), i386=True)
        a = G.dwarf_attr(ids=[101])
        kept = jit_base(True) + 0x40
        self.assertEqual(self.carry_of(a, stack=struct.pack("<4I", 1, 2, 3, kept)), 1)
        self.assertEqual(self.carry_of(a, stack=struct.pack("<4I", 1, 2, kept, 4),
                                       dyn_size=8), 0)

    def test_truncated_anywhere(self):
        """A well-formed sample of every field cut after every third byte
        of it: each run survives, and the words before the cut are used
        (the ip carries once the tid and time the reader needs are in)."""
        a = G.dwarf_attr(ids=[101], sample_type=ALL_FIELDS, read_format=31,
                         branch_sample_type=BRANCH_HW_COUNTERS)

        def add(b, cut=None):
            return b.sample(G.KEPT_ADDR, PID, PID, SAMPLE_T, read=[(1, 2, 3)] * 2,
                            raw=b"abc", branches=[(1, 2, 3)] * 2, stack=stack_of(1, 2),
                            cut=cut)
        _, b = recording(self.t, [a], add)
        full = [r for r in b.records if r.type == G.PERF_RECORD_SAMPLE][0].size - 8
        for cut in range(0, full + 1, 3):
            with self.subTest(cut=cut):
                recording(self.t, [a], lambda b: add(b, cut))
                p = self.inject(self.t)
                self.assertSurvived(p, "cut %d" % cut)
                self.assertEqual(p.returncode, 0, p.stderr)
                # IDENTIFIER, ip, tid, time: a sample without its time
                # is not read (the reader gives it none); with it, the ip
                self.assertEqual(self.carried(p), 1 if cut >= 32 else 0, "cut %d" % cut)


# ---------------------------------------------------------------------------
# found by fuzz_inject and fuzz/sweep-inject.py

class WaitingDumpWarns(Base):
    def test_warning_when_a_waiting_dump_is_written(self):
        """A dump that waits for the samples (file mode, user stacks) and
        warns when its images are written (here its CIE is damaged): the
        warning went through the pg_diag of load_dump()'s returned frame
        (SIGSEGV on dbd2623; ASan: stack-use-after-return in pg_warn from
        mem_image; node's real dumps with a bit flipped did the same).  The
        run's sets now share one pg_diag that outlives them."""
        d = jitdump_gen.JitdumpBuilder(pid=PID, timestamp=G.T0)
        eh, hdr, _ = jitdump_gen.build_eh_frame(G.KEPT_ADDR, 0x30)
        d.unwinding_info(eh[:4] + b"\xff\xff\xff\x7f" + eh[8:], hdr)
        d.load(b"JS:*badcfi", jitdump_gen.x86_64_code(0x30, 0), G.KEPT_ADDR, 0,
               timestamp=G.T0 + 10_000)
        d.close(timestamp=G.T0 + 90_000)
        d.write(os.path.join(self.t, DUMP))
        recording(self.t, [G.dwarf_attr(ids=[101])], lambda b: b.sample(
            NODE_IP, PID, PID, G.T0 + 20_000, stack=stack_of(G.KEPT_ADDR + 8)))
        env = dict(os.environ, ASAN_OPTIONS="detect_stack_use_after_return=1:"
                   + os.environ.get("ASAN_OPTIONS", ""))
        p = subprocess.run([PERFGRAFT, "inject", "-i", "perf.data", "-o", "out.data"],
                           cwd=self.t, capture_output=True, text=True, errors="replace",
                           timeout=120, env=env)
        self.assertSurvived(p)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stderr, r"warning: %s: function at 0x%x \(code index 0\): its unwind "
                         r"tables have" % (DUMP, G.KEPT_ADDR))
        self.assertIn("1 jitdump (1 LOAD, 0 MOVE)", p.stderr)


# ---------------------------------------------------------------------------
# the sweep

HOSTILE = (0, 1, 3, 7, 8, 24, 32, 0xFFFFFFFF, 2 ** 32, 2 ** 59 - 2 ** 35, 2 ** 61, 2 ** 63,
           2 ** 64 // 3 + 1, 2 ** 64 - 8, 2 ** 64 - 1)
OPTIONAL = (G.S_IDENTIFIER, G.S_IP, G.S_ADDR, G.S_ID, G.S_STREAM_ID, G.S_CPU, G.S_PERIOD,
            G.S_READ, G.S_CALLCHAIN, G.S_RAW, G.S_BRANCH_STACK, G.S_REGS_USER)
# sizes that wrap when 8 is added (dbd2623's room check of the stack)
WRAP8 = (2 ** 64 - 8, 2 ** 64 - 5, 2 ** 64 - 1) * 2
LIES = ("read_nr", "chain_nr", "raw_size", "branch_nr", "stack_size")


def random_recording(rng, d, i386=False):
    """A dump beside a perf.data of one or two random attrs (STACK_USER in
    the first) and a few samples of the dump's process, each well-formed,
    lying about one or two counts or sizes, cut short (mostly at or just
    after the start of a field: right after a count), or with random words
    overwritten by hostile values."""
    size = rng.choice((136, 136, 136, 128, 96, 88, 80))   # < 96: no clockid

    def attr(ids, two):
        st = G.S_STACK_USER
        if rng.random() < 0.9:
            st |= G.S_TID | G.S_TIME    # without them no sample is read
        for bit in OPTIONAL:
            if rng.random() < 0.5:
                st |= bit
        if two:
            st |= G.S_IDENTIFIER        # two attrs: a sample names its own
        regs = rng.choice((G.REGS_USER_X86_64, 0, 1, 2 ** 64 - 1, rng.getrandbits(64)))
        bst = rng.choice((0, G.BR_HW_INDEX, G.BR_COUNTERS, BRANCH_HW_COUNTERS,
                          BRANCH_HW_COUNTERS, rng.getrandbits(20)))
        return G.dwarf_attr(size=size, ids=ids, sample_type=st, read_format=rng.getrandbits(5),
                            branch_sample_type=bst, sample_regs_user=regs)

    two = rng.random() < 0.3
    attrs = [attr(ids, two) for ids in ([[101], [201]] if two else [[101]])]
    kept = jit_base(i386) + 0x40
    G.generations_dump(os.path.join(d, DUMP), i386=i386)

    def word():
        return rng.choice((kept, kept + 8, NODE_IP, rng.getrandbits(64)) + HOSTILE)

    def add(b):
        for _ in range(rng.randint(1, 4)):
            a = rng.choice(attrs)
            kw = dict(sid=a.ids[0], read=[(word(), word(), word())
                                          for _ in range(rng.randint(0, 3))] or None,
                      callchain=[G.PERF_CONTEXT_USER] + [word() for _ in range(rng.randint(0, 4))],
                      raw=bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 12))),
                      branches=[(word(), word(), word()) for _ in range(rng.randint(0, 3))],
                      hw_idx=word(), regs_abi=rng.choice((0, 2, 2, word())),
                      stack=b"".join(q(word()) for _ in range(rng.randint(0, 6))))
            kw["regs"] = [word() for _ in range(bin(a.sample_regs_user).count("1"))]
            if kw["stack"] and rng.random() < 0.3:
                kw["dyn_size"] = word()
            if kw["branches"] and a.branch_sample_type & G.BR_COUNTERS:
                kw["counters"] = [word() for _ in kw["branches"]]
            how = rng.random()
            if how < 0.4:
                lies = rng.sample(LIES, rng.randint(1, 2))
                if rng.random() < 0.3:
                    lies = ["stack_size"]
                kw["lie"] = {k: rng.choice(HOSTILE + (rng.getrandbits(64),) + (
                    WRAP8 if k == "stack_size" else ())) for k in lies}
            elif how < 0.7:
                r = b.sample(word(), PID, PID, SAMPLE_T, **kw)
                b.stream.pop()
                field, start = rng.choice(r.layout)
                kw["cut"] = start + rng.choice((0, 4, 8, 8, 12, 16, 24))
                if rng.random() < 0.5:  # and the count before the cut lies
                    kw["lie"] = {rng.choice(LIES): rng.choice(HOSTILE)}
            elif how < 0.8:
                kw["cut"] = rng.randint(0, 300)
            r = b.sample(word(), PID, PID, SAMPLE_T + rng.randint(0, 1000), **kw)
            if 0.8 <= how < 0.9 and r.size >= 16:
                body = bytearray(r.data)
                for _ in range(rng.randint(1, 3)):
                    at = 8 + 8 * rng.randrange((r.size - 8) // 8)
                    body[at:at + 8] = q(rng.choice(HOSTILE))
                r.data = bytes(body)

    return recording(d, attrs, add)


class Sweep(Base):
    N = int(os.environ.get("PG_HOSTILE_INJECT_N", "300"))
    SEED = 20

    def test_random_samples(self):
        """N seeded random recordings (PG_HOSTILE_INJECT_N, default 300):
        exit 0 or 1 with a message, never a signal; and some of them carry
        (the sweep reaches the stack walk).  A failure names the case and
        keeps its files in $PG_HOSTILE_INJECT_KEEP when that is set."""
        rng = random.Random(self.SEED)
        carried = exits = 0
        for k in range(self.N):
            d = os.path.join(self.t, "c%d" % k)
            os.mkdir(d)
            random_recording(rng, d, i386=rng.random() < 0.2)
            p = self.inject(d)
            keep = os.environ.get("PG_HOSTILE_INJECT_KEEP")
            if keep and (p.returncode < 0 or p.returncode > 1 or SAN_RE.search(p.stderr)):
                shutil.copytree(d, os.path.join(keep, "case-%d-%d" % (self.SEED, k)))
            self.assertSurvived(p, "case %d of seed %d" % (k, self.SEED))
            # exit 1 is also what a recording whose every dump is left out
            # gets (issue 25: nothing injected where injection was asked)
            exits += p.returncode == 0 or (p.returncode == 1 and
                                           "perfgraft: nothing injected: " in p.stderr)
            carried += self.carried(p) > 0
            shutil.rmtree(d)
        # the sweep is worth its time only when it reaches the walk
        self.assertGreater(carried, self.N // 20, "only %d of %d cases carried" % (carried, self.N))
        self.assertEqual(exits, self.N)


if __name__ == "__main__":
    unittest.main()
