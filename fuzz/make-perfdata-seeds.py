#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Regenerates the seed corpus of fuzz_perfdata: tiny perf.data files
(each < 4 KB) written with tests/perfdata_gen.py.  COMPRESSED seeds need the
`zstd` command line tool.

usage: fuzz/make-perfdata-seeds.py [OUTDIR]
       (default: fuzz/corpus-perfdata next to this file)
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import perfdata_gen as G  # noqa: E402

T = G.T0
PID = 4242


def basic(b, sid2=None, n=3):
    b.comm(PID, PID, "node", T + 1000)
    b.mmap2(PID, PID, 0x400000, 0x10000, 0, "/bin/x", T + 2000)
    b.mmap2(PID, PID, 0x7F0000000000, 0x1000, 0, "/tmp/jit-%d.dump" % PID, T + 3000)
    for i in range(n):
        b.sample(0x400100 + i, PID, PID, T + 4000 + i,
                 callchain=[G.PERF_CONTEXT_USER, 0x400100 + i, 0x400200],
                 sid=sid2 if i % 2 else None)
    b.finished_round()


def seeds():
    out = {}

    # 1: file mode, one attr (VER7), HOSTNAME
    b = G.PerfDataBuilder(attrs=[G.Attr(ids=[101])])
    b.feat_string(G.FEAT_HOSTNAME, "h")
    basic(b)
    out["01-file-le.data"] = b.to_bytes()

    # 2: file mode, big-endian, two attrs of 120 bytes, BUILD_ID feature
    b = G.PerfDataBuilder(bo=">", attrs=[G.Attr(size=120, ids=[101]),
                                         G.Attr(size=120, config=1, ids=[201])])
    b.feat_string(G.FEAT_HOSTNAME, "h")
    b.feat_build_ids([(G.FAKE_BUILD_ID, "/bin/x")])
    basic(b, sid2=201)
    out["02-file-be-2attrs.data"] = b.to_bytes()

    # 3: pipe mode: HEADER_ATTR, HEADER_FEATURE, tracing data, AUXTRACE,
    # an unknown record type, HEADER_BUILD_ID
    b = G.PerfDataBuilder(pipe=True, attrs=[G.Attr(ids=[101])])
    b.feat_string(G.FEAT_HOSTNAME, "h")
    b.feat_build_ids([(G.FAKE_BUILD_ID, "/bin/x")])
    b.tracing_data(b"\x17\x08\x44tracing0.6\0" + bytes(30))
    basic(b, n=2)
    b.auxtrace(bytes(range(40)))
    b.unknown(200, b"\1\2\3\4\5\6\7\x08")
    out["03-pipe-le-extras.data"] = b.to_bytes()

    # 4: file mode, COMPRESSED: two frames, a record spanning them
    b = G.PerfDataBuilder(attrs=[G.Attr(ids=[101])])
    b.feature(G.FEAT_COMPRESSED, G.compressed_feature("<"))
    b.comm(PID, PID, "node", T + 1000)
    b.begin_compressed()
    basic(b, n=4)
    b.end_compressed(frames=2)
    b.finished_round()
    out["04-file-le-compressed.data"] = b.to_bytes()

    # 5: pipe mode, big-endian, COMPRESSED
    b = G.PerfDataBuilder(bo=">", pipe=True, attrs=[G.Attr(ids=[101])])
    b.begin_compressed()
    basic(b, n=2)
    b.end_compressed()
    out["05-pipe-be-compressed.data"] = b.to_bytes()

    # 6: attr.size 64 (no clockid), no sample_id_all, TIME_CONV
    a = G.Attr(size=64, ids=[], sample_type=G.S_IP | G.S_TID | G.S_TIME | G.S_PERIOD,
               flags=(G.F_EXCLUDE_KERNEL, G.F_MMAP, G.F_COMM))
    b = G.PerfDataBuilder(attrs=[a])
    b.unknown(G.PERF_RECORD_TIME_CONV,
              struct.pack("<QQQQQBB6x", 10, 1 << 10, 5000, 100, (1 << 56) - 1, 1, 1))
    basic(b, n=2)
    out["06-file-le-v0-timeconv.data"] = b.to_bytes()

    # 7: file mode with a truncated data tail
    b = G.PerfDataBuilder(attrs=[G.Attr(ids=[101])])
    basic(b)
    data = b.to_bytes()
    out["07-file-le-truncated.data"] = data[:b.data_offset + b.data_size - 20]

    # 8: attr.size 136, an in-band HEADER_ATTR, FINISHED_INIT, unknown feature
    b = G.PerfDataBuilder(attrs=[G.Attr(size=136, ids=[101])])
    extra = G.Attr(size=136, config=2, ids=[301])
    b.raw_record(G.PERF_RECORD_HEADER_ATTR, 0, extra.raw("<") + struct.pack("<Q", 301))
    b.finished_init()
    b.feature(40, b"future")
    basic(b, n=2)
    out["08-file-le-136-inband.data"] = b.to_bytes()

    # 11: version 1 ("PERFFILE"), big-endian: only attr_size (72 + 16)
    # tells the byte order; a kernel MMAP whose trailer says other than
    # its own pid/tid
    b = G.PerfDataBuilder(bo=">", v1=True, attrs=[G.Attr(size=72, ids=[101])])
    b.raw_record(G.PERF_RECORD_MMAP, G.MISC_KERNEL,
                 b.p("IIQQQ", 0xFFFFFFFF, 0, 0xFFFFFFFF81000000, 0x1000000, 0)
                 + G.cstr("[kernel.kallsyms]_text", 8) + b.trailer(0, 0, 0))
    basic(b, n=2)
    out["11-file-be-v1.data"] = b.to_bytes()
    return out


def main(argv):
    outdir = argv[1] if len(argv) > 1 else os.path.join(HERE, "corpus-perfdata")
    os.makedirs(outdir, exist_ok=True)
    for name, data in seeds().items():
        if len(data) >= 4096:
            raise SystemExit("%s: %d bytes, seeds must stay under 4 KB" % (name, len(data)))
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
        print("%-32s %5d bytes" % (name, len(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
