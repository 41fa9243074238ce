#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Regenerates the seed corpora of the symbolizer harnesses (each file < 4 KB):

  corpus-symbolize/   jitdumps for fuzz_symbolize: the node fixtures cut
                      down (header and a few LOAD groups, with and without
                      DEBUG_INFO), and synthetic dumps written with
                      tests/jitdump_gen.py: overlapping LOADs at times out of
                      file order and equal times, MOVEs (there and back, of
                      an unknown code_index, at the LOAD's time), a V8 dump
                      with line rows in and outside the function, LOADs at 0
                      and at the top of the address space (end clamped) and
                      empty ones, a damaged record after LOADs (refused
                      dump), a truncated tail, big-endian.
  corpus-symaddr/     address arguments for fuzz_symaddr: the addresses and
                      times of the harness's own demo dump (fuzz_symcheck.h),
                      JIT frames of tests/fixtures/perf/demo.data as
                      ADDR@SECS.FRAC:, and malformed ones.
  corpus-perfscript/  `perf script` output for fuzz_perfscript: samples with
                      JIT frames from demo.data in five field lists (default,
                      -F comm,pid,tid,time,ip,sym,dso,symoff, --ns,
                      -F tid,time,ip,sym, -G), and hand-written lines: frames
                      at the demo dump's addresses, DSOs with parentheses,
                      odd headers.

The perf-*.txt seeds need perf and tests/fixtures/perf/demo.data; without
perf they are left as they are.  Everything else is written afresh.

usage: fuzz/make-symbolize-seeds.py
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
import jitdump_gen as G  # noqa: E402

LIMIT = 4096
NODE = os.path.join(REPO, "tests", "fixtures", "node")
PERF = os.path.join(REPO, "tests", "fixtures", "perf")


# ---- jitdumps -------------------------------------------------------------

def records(data):
    """(byte order, header bytes, [(offset, id, size, time)]) of a dump."""
    bo = "<" if struct.unpack_from("<I", data, 0)[0] == G.MAGIC else ">"
    hsize = max(G.HEADER_SIZE, struct.unpack_from(bo + "I", data, 8)[0])
    off, out = hsize, []
    while off + G.PREFIX_SIZE <= len(data):
        rid, size, t = struct.unpack_from(bo + "IIQ", data, off)
        if size < G.PREFIX_SIZE or off + size > len(data):
            break
        out.append((off, rid, size, t))
        off += size
    return bo, data[:hsize], out


def groups(data):
    """The LOADs with the records before each (its DEBUG_INFO, UNWINDING_INFO)."""
    bo, head, recs = records(data)
    gs, cur = [], []
    for r in recs:
        cur.append(r)
        if r[1] == G.JIT_CODE_LOAD:
            gs.append(cur)
            cur = []
    return head, gs


def cut(data, pick):
    """Header and the picked groups, in file order."""
    head, gs = groups(data)
    out = bytearray(head)
    for i in sorted(pick(gs)):
        for off, _, size, _ in gs[i]:
            out += data[off:off + size]
    return bytes(out)


def gsize(g):
    return sum(r[2] for r in g)


def first_fit(gs, budget, want=lambda g: True):
    """Indices of the first groups, in order, that fit in the budget."""
    out, used = [], 0
    for i, g in enumerate(gs):
        if want(g) and used + gsize(g) <= budget:
            out.append(i)
            used += gsize(g)
        if len(out) >= 8:
            break
    return out


def has_debug(g):
    return any(r[1] == G.JIT_CODE_DEBUG_INFO for r in g)


def node_seeds():
    seeds = {}
    interp = os.path.join(NODE, "node-interp.dump")
    unwind = os.path.join(NODE, "node-unwind.dump")
    jit = os.path.join(PERF, "jit-19989.dump")
    if os.path.exists(interp):
        with open(interp, "rb") as f:
            d = f.read()
        seeds["01-node-interp-head.jd"] = cut(d, lambda gs: first_fit(gs, 3200))
    if os.path.exists(unwind):
        with open(unwind, "rb") as f:
            d = f.read()

        def debug_and_small(gs):
            dbg = sorted((i for i, g in enumerate(gs) if has_debug(g)),
                         key=lambda i: gsize(gs[i]))[:1]
            small = sorted(range(len(gs)), key=lambda i: gsize(gs[i]))[:6]
            return set(dbg + small)
        seeds["02-node-unwind-debug.jd"] = cut(d, debug_and_small)
    if os.path.exists(jit):
        with open(jit, "rb") as f:
            d = f.read()

        def two_debug(gs):
            dbg = [i for i, g in enumerate(gs) if has_debug(g) and gsize(g) < 1700]
            return dbg[:2]
        seeds["03-demo-jit-debug.jd"] = cut(d, two_debug)
    return seeds


BASE = 0x7F3A1C000000


def fn(size, tag=0):
    return G.x86_64_code(size, tag)


def synthetic_seeds():
    seeds = {}

    # overlapping LOADs, times out of file order, equal times
    b = G.JitdumpBuilder()
    b.load(b"LazyCompile:*fib a.js:1", fn(64), BASE, 1, timestamp=1000)
    b.load(b"LazyCompile:*g a.js:9", fn(64, 1), BASE + 32, 2, timestamp=3000)
    b.load(b"LazyCompile:*h a.js:20", fn(16, 2), BASE + 8, 3, timestamp=2000)
    b.load(b"Builtin:wide", fn(256, 3), BASE - 64, 4, timestamp=5000)
    b.load(b"same-a", fn(32, 4), BASE + 0x1000, 5, timestamp=4000)
    b.load(b"same-b", fn(32, 5), BASE + 0x1000, 6, timestamp=4000)
    b.load(b"inside", fn(8, 6), BASE + 0x1008, 7, timestamp=4500)
    b.load(b"fib again", fn(64, 7), BASE, 1, timestamp=6000)
    seeds["04-overlap-loads.jd"] = b.to_bytes()

    # MOVEs: there and back, onto other code, of an unknown index, at the
    # LOAD's own time, and a re-LOAD of the index after a MOVE
    b = G.JitdumpBuilder()
    b.load(b"mover", fn(48), BASE, 1, timestamp=1000)
    b.load(b"victim", fn(48, 1), BASE + 0x100, 2, timestamp=1500)
    b.move(1, BASE, BASE + 0x100, 48, timestamp=2000)
    b.move(1, BASE + 0x100, BASE, 48, timestamp=3000)
    b.move(9, BASE, BASE + 0x200, 48, timestamp=3500)
    b.move(2, BASE + 0x100, BASE + 0x110, 48, timestamp=1500)
    b.load(b"mover v2", fn(24, 2), BASE + 0x300, 1, timestamp=4000)
    b.move(1, BASE + 0x300, BASE + 0x20, 24, timestamp=5000)
    b.move(2, BASE + 0x100, BASE + 0x400, 0, timestamp=5500)
    seeds["05-moves.jd"] = b.to_bytes()

    # V8: line rows (biased by 0x40) inside, before and after the code,
    # a row with line 0, equal offsets, a damaged-looking file name
    b = G.JitdumpBuilder(pad1=G.V8_PAD1)
    bias = G.V8_LINE_BIAS_64
    b.debug_info(BASE, [(BASE + bias, 3, 1, b"/app/a.js"),
                        (BASE + bias + 8, 4, 7, G.SAME_FILE),
                        (BASE + bias + 8, 5, 2, b"/app/b.js"),
                        (BASE + bias + 40, 0, 1, G.SAME_FILE),
                        (BASE + bias - 4, 1, 1, b"/app/before.js"),
                        (BASE + bias + 64, 9, 1, b"/app/after.js"),
                        (BASE + bias + 16, 6, 3, b"")], pad8=True)
    b.empty_unwinding_info()
    b.load(b"JS:~run /app/a.js:3", fn(64), BASE, 1, timestamp=2000)
    b.debug_info(BASE + 0x80, [(BASE + 0x80 + bias, 11, 5, b"/app/c.js")], pad8=True)
    b.load(b"JS:*opt /app/c.js:11", fn(32, 1), BASE + 0x80, 2, timestamp=2500)
    b.move(1, BASE, BASE + 0x200, 64, timestamp=3000)
    seeds["06-v8-lines.jd"] = b.to_bytes()

    # the edges of the address space, empty LOADs, time 0 and near the end
    b = G.JitdumpBuilder()
    b.load(b"at-zero", fn(16), 0, 1, timestamp=0)
    b.load(b"top", fn(32, 1), 0xFFFFFFFFFFFFFFF0, 2, timestamp=10)
    b.load(b"empty", b"", BASE, 3, timestamp=20)
    b.load(b"past-top", b"\xcc" * 8, 0xFFFFFFFFFFFFFFFF, 4, timestamp=30)
    b.load(b"late", fn(16, 2), 8, 5, timestamp=0xFFFFFFFFFFFFFFFE)
    b.move(3, BASE, BASE + 64, 16, timestamp=40)
    seeds["07-edges.jd"] = b.to_bytes()

    # a damaged record after good LOADs: the dump is refused whole
    b = G.JitdumpBuilder()
    b.load(b"good", fn(32), BASE, 1, timestamp=100)
    b.load(b"also good", fn(32, 1), BASE + 64, 2, timestamp=200)
    b.raw(struct.pack("<IIQ", G.JIT_CODE_LOAD, 8, 300))
    seeds["08-refused.jd"] = b.to_bytes()

    # a truncated tail: the records before it are used
    b = G.JitdumpBuilder()
    b.load(b"kept", fn(32), BASE, 1, timestamp=100)
    b.move(1, BASE, BASE + 0x40, 32, timestamp=200)
    b.load(b"cut", fn(32, 1), BASE + 0x80, 2, timestamp=300)
    seeds["09-truncated.jd"] = b.to_bytes()[:-20]

    # big-endian (ppc64 header), overlapping LOAD and a MOVE
    b = G.JitdumpBuilder(bo=">", elf_mach=G.EM_PPC64, arch="ppc64")
    b.load(b"be-one", fn(32), BASE, 1, timestamp=100)
    b.load(b"be-two", fn(32, 1), BASE + 16, 2, timestamp=50)
    b.move(1, BASE, BASE + 0x100, 32, timestamp=150)
    seeds["10-big-endian.jd"] = b.to_bytes()
    return seeds


# ---- text -----------------------------------------------------------------

def perf_script(args):
    data = os.path.join(PERF, "demo.data")
    if not shutil.which("perf") or not os.path.exists(data):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            p = subprocess.run(["perf", "--buildid-dir", os.path.join(tmp, "debug"),
                                "script", "-i", data] + args,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               timeout=300, check=True)
        except (subprocess.SubprocessError, OSError):
            return None
    return p.stdout.decode("utf-8", "replace")


def jit_frame(line):
    return "[unknown]" in line and "perf-" in line


def blocks(text):
    """Sample blocks (header and call chain), in sample order."""
    return [b.strip("\n").split("\n") for b in text.split("\n\n") if b.strip("\n")]


def trim(lines):
    """The header, the [unknown] frames (at most 6) and 3 other frames, in order."""
    keep, unk, other = [], 0, 0
    for i, l in enumerate(lines):
        if i == 0:
            keep.append(l)
        elif "[unknown]" in l and unk < 6:
            keep.append(l)
            unk += 1
        elif "[unknown]" not in l and other < 3:
            keep.append(l)
            other += 1
    return keep


def perf_seeds():
    """Samples with JIT frames (and two early ones with other [unknown]
    frames), the same samples in every field list."""
    seeds = {}
    default = perf_script([])
    if default is None:
        return None
    blks = blocks(default)
    other = [i for i, b in enumerate(blks) if any("[unknown]" in l for l in b[1:])][:2]
    jit = [i for i, b in enumerate(blks) if any(jit_frame(l) for l in b[1:])]
    chosen = other + jit[:40]
    for name, args in [("perf-default.txt", []),
                       ("perf-fields.txt", ["-F", "comm,pid,tid,time,ip,sym,dso,symoff"]),
                       ("perf-ns.txt", ["--ns"]),
                       ("perf-tid.txt", ["-F", "tid,time,ip,sym"])]:
        text = default if not args else perf_script(args)
        if text is None:
            return None
        b, out, used = blocks(text), [], 0
        for i in chosen:
            s = "\n".join(trim(b[i])) + "\n\n"
            if used + len(s) > 2400:
                break
            out.append(s)
            used += len(s)
        seeds[name] = "".join(out)
    text = perf_script(["-G"])
    if text is None:
        return None
    lines = text.split("\n")
    pick = sorted(set(other[:2] + jit[:20]))
    seeds["perf-g.txt"] = "\n".join(lines[i] for i in pick if i < len(lines)) + "\n"
    # ADDR@TIME of JIT frames, as a user would pass them
    addrs = []
    for i in jit:
        t = blks[i][0].split(":")[0].split()[-1] + ":"
        for l in blks[i][1:]:
            if jit_frame(l):
                addrs.append("%s@%s" % (l.split()[0], t))
        if len(addrs) >= 24:
            break
    seeds["addr-perf.txt"] = "\n".join(addrs[:24]) + "\n"
    return seeds


# the demo dump of fuzz_symcheck.h: f_a 7f0000001000+100 t=1000, f_b +80
# t=2000, f_low 10+20 t=1500, MOVE of f_a to 7f0000002000 t=3000, f_c
# 7f0000001000+40 t=2500, f_d 7f0000000f00+400 t=4000, f_top
# ffffffffffffff00 t=3500, f_same/f_same2 7f0000003000+10 t=2000, f_zero
# 1000+10 t=0, f_empty 7f0000004000 (no code)
SYMADDR = {
    "demo-hits.txt": """7f0000001010
7f0000001010@1000
0x7f0000001050@1999
0x7f0000001090@2000
7f0000001010@2500
7F0000001010@0.000003999
7f0000002010@3000
7f0000002010@0.000002999:
7f0000000f00@4000
7f00000012ff@4000
10@1500
2f@0.0000015
1000@0
100f@0.0
ffffffffffffff00@3500
ffffffffffffffff@3600
7f0000003008@2000
7f0000004000@100
""",
    "forms.txt": """  0x7f0000001040  \r
\t7f0000001040@2600\t
7f0000001040@0.0000026:
7f0000001040@0.000002
7f0000001040@0.00000
0000000000000000007f0000001040
7f0000001040@18446744073709551615
7f0000001040@18446744072.999999999
""",
    "bad.txt": """
0x
@5
12@
12@1.
12@1.1234567891
12@.5
zz
ffffffffffffffff0
12@18446744073709551616
12@18446744073.709551615
12@1.5::
12 34
0x0x12
12@1.5:x
-12
""",
    "one.txt": "7f0000001080@2000",
}

SCRIPT_EDGE = """node  4242/4242 [001]     0.000001500: 250000 cpu-clock:
\t    7f0000001010 [unknown] (/tmp/perf-4242.map)
\t    7f0000001090 [unknown] (/tmp/perf-4242.map)
\t              1f [unknown] ([unknown])
\t    7f0000002000 [unknown] (/memfd:jit (deleted))
\t    7f0000003000 [unknown]
\t ffffffffffffff00 [unknown] (//anon)

node 4242  0.000004000: 250000 cpu-clock:      7f0000000f10 [unknown] (/tmp/perf-4242.map)
4242  0.000002500:
\t    7f0000001000 [unknown] (a (b) c)
    some comm 4242/4243  [000]  0.000003000:
\t    7f0000002010 [unknown]   \r
\t  17f0000002010 [unknown] (x)
\t7f0000002010 [unknown](x)
\t    7f0000002010  [unknown] (x)
\t    7f0000002010 [unknown] (x))
\t    7f0000002010 [unknown] ((x)
\t    7f0000002010 [unknown] ()
\t    zz [unknown] (x)
\t    1000 [unknown] (unbalanced (
x 1/2/3 [9999999999] 1.5:
x 99999999999/1 [1] 1.5:
x 1/99999999999 1.5:
x [001] 1.5:
x 12  1.123456789:
x 12  1.1234567890:
x 12  1.:
x 12  1.5:x
"""


def write(dirname, files, keep_prefix=None):
    out = os.path.join(HERE, dirname)
    os.makedirs(out, exist_ok=True)
    for n in os.listdir(out):
        if keep_prefix is None or not n.startswith(keep_prefix):
            os.unlink(os.path.join(out, n))
    for n, data in sorted(files.items()):
        if isinstance(data, str):
            data = data.encode()
        if len(data) >= LIMIT:
            sys.exit("%s/%s: %d bytes, over %d" % (dirname, n, len(data), LIMIT))
        with open(os.path.join(out, n), "wb") as f:
            f.write(data)
        print("%6d %s/%s" % (len(data), dirname, n))


def main():
    seeds = node_seeds()
    seeds.update(synthetic_seeds())
    # found-*: inputs the fuzzer found bugs with, kept as they are
    write("corpus-symbolize", seeds, "found-")
    ps = perf_seeds()
    if ps is None:
        print("perf or tests/fixtures/perf/demo.data missing: perf-*.txt and "
              "addr-perf.txt left as they are", file=sys.stderr)
        keep = ("perf-", "addr-perf")
    else:
        keep = None
    sym = dict(SYMADDR)
    script = {"edge.txt": SCRIPT_EDGE}
    if ps:
        sym["addr-perf.txt"] = ps.pop("addr-perf.txt")
        script.update(ps)
    write("corpus-symaddr", sym, keep and keep[1])
    write("corpus-perfscript", script, keep and keep[0])


if __name__ == "__main__":
    main()
