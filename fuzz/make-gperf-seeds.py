#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Regenerates the seed corpus for fuzzing the gperftools CPU profile reader:
small profiles (each < 4 KB) written with tests/gperf_gen.py (64/32-bit,
both byte orders, a 4-word header, a zero-PC record, no trailer, a record
cut mid-PC, junk/build=/(deleted) map lines, period 0, header only, a
254-deep stack, no records).  tests/test_gperf_edge.py checks that the
directory holds exactly these files.

usage: fuzz/make-gperf-seeds.py [OUTDIR]
       (default: fuzz/corpus-gperf next to this file)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import gperf_gen as G  # noqa: E402


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus-gperf")
    if os.path.isdir(out):
        for n in os.listdir(out):
            if n.endswith(".prof"):
                os.unlink(os.path.join(out, n))
    names = G.seeds(out)
    for n in names:
        print("%6d %s" % (os.path.getsize(os.path.join(out, n)), n))


if __name__ == "__main__":
    main()
