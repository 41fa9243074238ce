#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Regenerates the seed corpus of fuzz_inject: FLAGS PERFDATA [JITDUMP:
DUMP]... (see fuzz/fuzz_inject.c), each a few KB, written with
tests/perfdata_gen.py and tests/jitdump_gen.py.  The perf.data files hold
DWARF call-graph samples (user registers and stacks) whose words reach the
dumps' code in a later generation, so that inject notes and carries them;
branch stacks, read groups, RAW, two attrs, pipe and big-endian forms, a
compressed file (needs the `zstd` command line tool; left out without it),
frame-pointer samples, two processes, the two inputs that crashed
dbd2623 (issue 20), and the one this harness found there.  The markers name /nonexistent-perfgraft-fuzz/jit-PID.dump:
the harness's jitdump_dir finds the dump it wrote.

usage: fuzz/make-inject-seeds.py [OUTDIR]
       (default: fuzz/corpus-inject next to this file)
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import jitdump_gen as J  # noqa: E402
import perfdata_gen as G  # noqa: E402

SEP = b"JITDUMP:"
CUT = b"JITCUT::"                # a live dump's pieces (pipe mode)
PID = G.PID
T = G.T0
T2 = G.GEN2_TIME + 5000          # in the dump's second generation
NODE_IP = G.NODE_BASE + 0x1234
# fuzz_inject's flags
OUT_FILE, OUT_DEVNULL, OUT_STDOUT, OUT_DEFAULT_DIR = 0, 1, 2, 3
STDIN, BY_HAND, NO_DIR, PACKED, PER_FUNCTION, CFI_5_19 = 4, 8, 16, 32, 64, 128


def marker(b, pid=PID, t=T + 5000):
    b.mmap2(pid, pid, 0x7F3A1B000000 + pid * 0x1000, 4096, 0,
            "/nonexistent-perfgraft-fuzz/jit-%d.dump" % pid, t)


def stack(*words, i386=False, bo="<"):
    """A user stack copy: the process's words in the recording's byte order."""
    return b"".join(struct.pack(bo + ("I" if i386 else "Q"), w) for w in words)


def gen_dump(pid=PID, i386=False, bo="<", extra=None):
    """generations_dump's three LOADs (in memory), optionally more records."""
    if i386:
        b = J.JitdumpBuilder(bo=bo, pid=pid, timestamp=T, elf_mach=J.EM_386, arch="i386")
        base, code = J.BASE32, J.i386_code
    else:
        b = J.JitdumpBuilder(bo=bo, pid=pid, timestamp=T)
        base, code = G.JIT_BASE, J.x86_64_code
    for i, (name, off, dt) in enumerate(G.GEN_LOADS):
        b.load(name, code(0x30, i), base + off, i, timestamp=T + dt)
    if extra:
        extra(b, base, code)
    b.close(timestamp=T + 90_000)
    return b.to_bytes()


def seed(flags, perf, *dumps):
    return bytes([flags]) + perf + b"".join(SEP + d for d in dumps)


def dwarf_samples(b, sid=None, i386=False, n=3, bo="<", **kw):
    kept = (J.BASE32 if i386 else G.JIT_BASE) + 0x48
    for k in range(n):
        words = [1, kept if k != 1 else 2, 0x08048000, 3]
        b.sample(NODE_IP, PID, PID + k % 2, T2 + 1000 * k, sid=sid,
                 callchain=[G.PERF_CONTEXT_USER, NODE_IP],
                 stack=stack(*words, i386=i386, bo=bo), **kw)


def seeds():
    out = {}

    # 1: perf record -k mono --call-graph dwarf: one attr, no ids; stacks
    # reaching "JS:*kept" in the second generation
    b = G.PerfDataBuilder(attrs=[G.dwarf_attr()])
    b.comm(PID, PID, "node", T + 1000)
    marker(b)
    dwarf_samples(b)
    b.finished_round()
    out["01-dwarf-carry"] = seed(OUT_FILE, b.to_bytes(), gen_dump())

    # 2: two attrs (IDENTIFIER), branch stacks with HW_INDEX and COUNTERS,
    # READ groups with every read_format bit, RAW
    st = (G.DWARF_SAMPLE_TYPE | G.S_IDENTIFIER | G.S_CPU | G.S_READ | G.S_RAW
          | G.S_BRANCH_STACK)
    attrs = [G.dwarf_attr(ids=[101], sample_type=st, read_format=31,
                          branch_sample_type=G.BR_HW_INDEX | G.BR_COUNTERS),
             G.dwarf_attr(ids=[201], config=1, sample_type=st, read_format=4,
                          branch_sample_type=G.BR_HW_INDEX)]
    b = G.PerfDataBuilder(attrs=attrs)
    marker(b)
    for k, sid in enumerate((101, 201, 101)):
        b.sample(NODE_IP, PID, PID, T2 + 100 * k, sid=sid, read=[(5, 101, 0), (6, 201, 1)],
                 raw=b"rawdata", branches=[(G.JIT_BASE + 0x40, NODE_IP, 0)] * 2,
                 hw_idx=1, counters=[3, 4], stack=stack(G.JIT_BASE + 0x44, 9))
    b.finished_round()
    out["02-branch-read-raw"] = seed(OUT_FILE, b.to_bytes(), gen_dump())

    # 3: a pipe-form perf.data (HEADER_ATTR) to standard output
    b = G.PerfDataBuilder(pipe=True, attrs=[G.dwarf_attr(ids=[101])])
    b.feat_string(G.FEAT_HOSTNAME, "h")
    marker(b)
    dwarf_samples(b)
    b.finished_round()
    out["03-pipe-stdout"] = seed(OUT_STDOUT, b.to_bytes(), gen_dump())

    # 4: the pipe form read from standard input, written in place
    out["04-pipe-stdin-devnull"] = seed(OUT_DEVNULL | STDIN, b.to_bytes(), gen_dump())

    # 5: a function with CFI and lines, a MOVE under user stacks (a copy),
    # a third generation (a LOAD over "JS:*new"), an UNLOAD; samples after
    # them reach the CFI function and the moved copy
    def moves(d, base, code):
        d.debug_info(base + 0x2000, [(base + 0x2000, 3, 0, b"/app/a.js"),
                                     (base + 0x2010, 4, 0, J.SAME_FILE)])
        d.cfi_unwinding_info(base + 0x2000, 0x30)
        d.load(b"JS:*cfi", code(0x30, 7), base + 0x2000, 3, timestamp=T + 31_000)
        d.move(0, base + 0x40, base + 0x3000, 0x30, timestamp=T + 32_000)
        d.load(b"JS:*over", code(0x30, 8), base + 0x1000, 4, timestamp=T + 33_000)
        d.unload(base + 0x1000, 0x30, 4, timestamp=T + 34_000)
    b = G.PerfDataBuilder(attrs=[G.dwarf_attr()])
    marker(b)
    dwarf_samples(b, n=2)
    b.sample(NODE_IP, PID, PID, T2 + 2000, stack=stack(G.JIT_BASE + 0x2004, G.JIT_BASE + 0x3008))
    b.finished_round()
    out["05-moves-cfi"] = seed(OUT_FILE, b.to_bytes(), gen_dump(extra=moves))

    # 6: big-endian perf.data and dump, default image directory
    b = G.PerfDataBuilder(bo=">", attrs=[G.dwarf_attr(ids=[101])])
    marker(b)
    dwarf_samples(b, bo=">")
    b.finished_round()
    out["06-big-endian"] = seed(OUT_DEFAULT_DIR, b.to_bytes(), gen_dump(bo=">"))

    # 7: a 32-bit process's dump given by hand (no marker, no jitdump_dir)
    b = G.PerfDataBuilder(attrs=[G.dwarf_attr(sample_stack_user=64)])
    b.comm(PID, PID, "node", T + 1000)
    dwarf_samples(b, i386=True)
    b.finished_round()
    out["07-i386-by-hand"] = seed(BY_HAND | NO_DIR, b.to_bytes(), gen_dump(i386=True))

    # 8: COMPRESSED records (zstd) holding the samples
    if G.zstd_tool():
        b = G.PerfDataBuilder(attrs=[G.dwarf_attr(ids=[101])])
        b.feature(G.FEAT_COMPRESSED, G.compressed_feature("<"))
        marker(b)
        b.begin_compressed()
        dwarf_samples(b)
        b.finished_round()
        b.end_compressed(frames=2)
        out["08-compressed"] = seed(OUT_FILE, b.to_bytes(), gen_dump())

    # 9: frame-pointer call graphs (no user stacks), exec anon maps; the
    # packed layout, per-function images, perf 5.19's CFI layout
    b = G.PerfDataBuilder(attrs=[G.Attr(ids=[101])])
    b.mmap2(PID, PID, 0x7F3A1D000000, 0x10000, 0, "//anon", T + 6000, prot=7, maj=0, minor=0,
            ino=0)
    marker(b)
    b.mmap2(PID, PID, 0x7F3A1E000000, 0x10000, 0, "//anon", T + 21_000, prot=7, maj=0,
            minor=0, ino=0)
    b.sample(G.JIT_BASE + 0x44, PID, PID, T2, callchain=[G.PERF_CONTEXT_USER, G.JIT_BASE + 0x44])
    b.finished_round()
    out["09-framepointer-packed"] = seed(PACKED | CFI_5_19, b.to_bytes(), gen_dump(extra=moves))
    out["10-framepointer-per-function"] = seed(PER_FUNCTION | OUT_DEVNULL, b.to_bytes(),
                                               gen_dump())

    # 11: two processes, two dumps, samples of both
    b = G.PerfDataBuilder(attrs=[G.dwarf_attr(ids=[101])])
    marker(b)
    marker(b, pid=PID + 10)
    dwarf_samples(b, n=2)
    b.sample(NODE_IP, PID + 10, PID + 10, T2, stack=stack(G.JIT_BASE + 0x50))
    b.finished_round()
    out["11-two-processes"] = seed(OUT_FILE, b.to_bytes(), gen_dump(), gen_dump(pid=PID + 10))

    # 12, 13: what crashed dbd2623 (issue 20): a branch stack of an
    # HW_INDEX|COUNTERS attr that ends after its nr (SIGSEGV), and a user
    # stack of 2^64-8 bytes (SIGBUS)
    st = (G.S_IDENTIFIER | G.S_IP | G.S_TID | G.S_TIME | G.S_CPU | G.S_PERIOD
          | G.S_BRANCH_STACK | G.S_REGS_USER | G.S_STACK_USER)
    b = G.PerfDataBuilder(attrs=[G.dwarf_attr(ids=[101], sample_type=st,
                                              branch_sample_type=G.BR_HW_INDEX | G.BR_COUNTERS)])
    marker(b)
    b.sample(NODE_IP, PID, PID, T2, lie={"branch_nr": 2 ** 59 - 2 ** 35}, cut=7 * 8)
    b.finished_round()
    out["12-found-branch-wrap"] = seed(OUT_FILE, b.to_bytes(), gen_dump())
    b = G.PerfDataBuilder(attrs=[G.dwarf_attr(ids=[101])])
    marker(b)
    b.sample(NODE_IP, PID, PID, T2, stack=stack(*[G.JIT_BASE + 0x48] * 8),
             lie={"stack_size": 2 ** 64 - 8})
    b.finished_round()
    out["13-found-stack-wrap"] = seed(OUT_FILE, b.to_bytes(), gen_dump())

    # 14: what this harness found on dbd2623: a dump that waits for the
    # samples (file mode, user stacks) and warns when its images are
    # written (a damaged CIE): the warning went through the pg_diag of
    # load_dump()'s returned frame (stack-use-after-return, SIGSEGV)
    d = J.JitdumpBuilder(pid=PID, timestamp=T)
    eh, hdr, _ = J.build_eh_frame(G.JIT_BASE + 0x40, 0x30)
    d.unwinding_info(eh[:4] + b"\xff\xff\xff\x7f" + eh[8:], hdr)
    d.load(b"JS:*badcfi", J.x86_64_code(0x30, 0), G.JIT_BASE + 0x40, 0, timestamp=T + 10_000)
    d.close(timestamp=T + 90_000)
    b = G.PerfDataBuilder(attrs=[G.dwarf_attr(ids=[101])])
    marker(b)
    b.sample(NODE_IP, PID, PID, T + 20_000, stack=stack(G.JIT_BASE + 0x48, 0))
    b.finished_round()
    out["14-found-waiting-dump-warns"] = seed(OUT_FILE, b.to_bytes(), d.to_bytes())

    # 15-20: a pipe read from standard input while the dump grows: its
    # pieces (CUT) are appended one a look (see fuzz_inject.c), so each
    # read finds more; after the first piece an empty one, since the look
    # that finds the dump (its marker) appends one before it reads
    z, p = 0x7F0000400000, 0x7F0000200000

    def live(reads, samples, attr=None, flags=STDIN | OUT_STDOUT, anon=None):
        """reads as JitdumpBuilder.add_reads takes them; a sample after
        each read's records waits for the next read; anon: (start, len,
        time) of an executable anonymous map before the marker."""
        d = J.JitdumpBuilder(pid=PID, timestamp=T)
        ends, last = d.add_reads(reads)
        whole = d.to_bytes()
        pieces = [whole[a:b] for a, b in zip([0] + ends[:-1], ends)]
        b = G.PerfDataBuilder(attrs=[attr or G.Attr(ids=[7])], pipe=True)
        b.comm(PID, PID, "jit", T - 3000)
        if anon:
            b.mmap2(PID, PID, anon[0], anon[1], anon[0], "//anon", anon[2], prot=5)
        marker(b, t=T - 2000)
        for t in last:
            b.sample(0x1000, PID, PID, t + 1, **({"stack": stack(0)} if attr else {}))
        for ip, t, *st in samples:
            b.sample(ip, PID, PID, t, **({"stack": stack(*st[0])} if st else {}))
        b.finished_round()
        return seed(flags, b.to_bytes(), CUT.join(pieces[:1] + [b""] + pieces[1:]))

    out["15-live-code-over-tables"] = live(
        [[("jit_z", z, T), ("jit_a", p, T + 500)], [("jit_b", p + 0x90, T + 2000)]],
        [(p + 0x98, T + 3000), (p + 8, T + 4000), (z + 8, T + 5000)])
    out["16-live-tables-over-code"] = live(
        [[("jit_z", z, T), ("jit_a", p, T + 500)], [("jit_c", p - 0x90, T + 2000)]],
        [(p + 8, T + 3000), (p - 0x88, T + 4000)], flags=STDIN | OUT_DEVNULL)
    # 16 under the JIT's anonymous map, which came before the marker: the
    # second read's tables written again at its time (rehide_anons)
    out["20-live-tables-under-anon"] = live(
        [[("jit_z", z, T), ("jit_a", p, T + 500)], [("jit_c", p - 0x90, T + 2000)]],
        [(p + 8, T + 3000), (p - 0x88, T + 4000)], anon=(p - 0x1000, 0x2000, T + 2500))
    tiny = [("tiny_%d" % i, p + i, T + 100 + i, 1, False) for i in range(12)]
    reads = [[("jit_z", z, T)] + tiny]
    for k in range(3):
        t = T + (k + 1) * 1000
        read = [("jit_c%d" % k, p - 0x90, t + 50)]
        if k:
            read.insert(0, ("UNLOAD", p - 0x90, t, 0x40, 13 + k))
        reads.append(read)
    out["17-live-rewrites"] = live(reads, [(p + 3, T + 9000)])
    # a MOVE and an UNLOAD of the first read's code in the second, under
    # user stacks (every live function carried), packed and memory
    reads = [[("jit_a", p, T), ("jit_b", p + 0x200, T + 100)],
             [("MOVE", 1, p, p + 0x1000, 0x40, T + 1000),
              ("UNLOAD", p + 0x200, T + 1100, 0x40, 2),
              ("jit_c", p + 0x200, T + 1200)]]
    smp = [(p + 0x1008, T + 2000, [p + 0x208, p + 8]), (p + 0x208, T + 2100, [p + 0x1010])]
    out["18-live-move-carry"] = live(reads, smp, attr=G.dwarf_attr(ids=[7]))
    out["19-live-move-packed"] = live(reads, smp, attr=G.dwarf_attr(ids=[7]),
                                      flags=STDIN | OUT_DEVNULL | PACKED)
    return out


def main(argv):
    outdir = argv[1] if len(argv) > 1 else os.path.join(HERE, "corpus-inject")
    os.makedirs(outdir, exist_ok=True)
    for name, data in sorted(seeds().items()):
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
        print("%s\t%d bytes" % (name, len(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
