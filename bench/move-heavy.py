#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The MOVE-heavy inject workload of bench-inject.sh: a jitdump of N
LOAD+MOVE pairs and a perf.data that maps it, so that both `perf inject
--jit` and `perfgraft inject` take it.

usage: bench/move-heavy.py N DIR

Writes DIR/jit-4242.dump and DIR/perf.data (file mode, one cpu-clock attr
with use_clockid CLOCK_MONOTONIC, as `perf record -k mono` writes).

The dump (x86_64, little-endian, no DEBUG_INFO or UNWINDING_INFO): pair i
is LOAD of code index i (64 bytes of code at LOAD_BASE + 128 i, named
"JS:*move_i"), then a MOVE of an earlier (or the same) index k to a fresh
address MOVE_BASE + 128 i.  k = h(i) mod (i + 1), h a multiplicative
hash (Knuth's 2654435761 i mod 2^32), so the indexes moved are spread
uniformly over the whole past, and an index moved again moves from where
its last MOVE put it: a lookup by code index that scans the loads costs on
average half of the loads so far, whatever end it starts from.
Timestamps: LOAD i at T0 + 1000 i + 100, its MOVE at + 600.

The perf.data: COMM "node", an MMAP2 of the dump (the marker perf and
perfgraft look for, before the first LOAD), then one sample every 10
pairs at the start of the code the pair's MOVE moved, timed just after it
(so that perf report has JIT frames to name), and FINISHED_ROUNDs.

Needs tests/perfdata_gen.py from the same tree (stdlib only).
"""

import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import perfdata_gen as G  # noqa: E402

PID = 4242
T0 = 10_000_000_000
LOAD_BASE = 0x7F0000000000
MOVE_BASE = 0x7F4000000000
STRIDE = 128
CODE_SIZE = 64
JITDUMP_MAGIC = 0x4A695444
EM_X86_64 = 62
CODE = bytes([0x55, 0x48, 0x89, 0xE5]) + bytes([0x90]) * (CODE_SIZE - 6) + bytes([0x5D, 0xC3])


def write_dump(path, n):
    """Returns [(time, address)] of every 10th MOVE's target."""
    hits = []
    cur = {}
    with open(path, "wb") as f:
        f.write(struct.pack("<IIIIIIQQ", JITDUMP_MAGIC, 1, 40, EM_X86_64, 0, PID, T0, 0))
        out = []
        for i in range(n):
            t = T0 + 1000 * i + 100
            addr = LOAD_BASE + STRIDE * i
            name = b"JS:*move_%d\0" % i
            size = 16 + 40 + len(name) + CODE_SIZE
            out.append(struct.pack("<IIQIIQQQQ", 0, size, t, PID, PID, addr, addr,
                                   CODE_SIZE, i) + name + CODE)
            cur[i] = addr
            k = ((i * 2654435761) & 0xFFFFFFFF) % (i + 1)
            new = MOVE_BASE + STRIDE * i
            out.append(struct.pack("<IIQIIQQQQQ", 1, 64, t + 500, PID, PID, new, cur[k], new,
                                   CODE_SIZE, k))
            cur[k] = new
            if i % 10 == 0:
                hits.append((t + 600, new))
            if len(out) >= 4096:
                f.write(b"".join(out))
                out = []
        f.write(b"".join(out))
    return hits


def write_perfdata(path, dump, hits):
    b = G.PerfDataBuilder(attrs=[G.Attr(ids=[101])])
    b.feat_string(G.FEAT_HOSTNAME, "perfgraft-bench")
    b.feat_string(G.FEAT_OSRELEASE, "6.1.0")
    b.feat_string(G.FEAT_VERSION, "6.1.0")
    b.feat_string(G.FEAT_ARCH, "x86_64")
    b.feat_event_desc()
    b.comm(PID, PID, "node", T0 - 3000)
    b.mmap2(PID, PID, 0x555555554000, 0x200000, 0, "/usr/bin/node", T0 - 2000)
    b.mmap2(PID, PID, 0x7FFFF7FF0000, 4096, 0, os.path.abspath(dump), T0 - 1000)
    for j, (t, ip) in enumerate(hits):
        b.sample(ip + 8, PID, PID, t, callchain=[G.PERF_CONTEXT_USER, ip + 8])
        if j % 1000 == 999:
            b.finished_round()
    b.finished_round()
    b.write(path)


def main(argv):
    if len(argv) != 3 or not argv[1].isdigit() or int(argv[1]) < 1:
        sys.stderr.write(__doc__)
        return 2
    n, d = int(argv[1]), argv[2]
    os.makedirs(d, exist_ok=True)
    dump = os.path.join(d, "jit-%d.dump" % PID)
    hits = write_dump(dump, n)
    write_perfdata(os.path.join(d, "perf.data"), dump, hits)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
