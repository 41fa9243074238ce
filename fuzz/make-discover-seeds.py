#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Regenerates the seed corpus of fuzz_discover (fuzz/fuzz_discover.c).

A seed is: a control byte (bit 0 exec; bits 1-2 mapping pid: 0 the
header's, 1 the header's + 1, 2 zero, 3 bytes 1..4; bits 3-5 file name:
0 jit-<pid>.dump, 1 jit-<tid>-<pid>.dump, 2 code.bin, 3 jit-<tid>-<pid>-XXXXXX,
4 jit-<pid+1>.dump, 5 from the input, 6 jit-<bytes 1..4>.dump, 7 /memfd:;
bit 6 " (deleted)"; bit 7 moved, looked for in the scratch directory
unless bit 31 of the pid is set), a little-endian pid, [name length and
name bytes], then the file's content: headers as real producers write
them (perf's JVMTI agent and JavaScriptCore: version 1, e_machine,
pad 0; V8: pad 0xdeadbeef; a big-endian ppc64 one), one with the wrong
pid, a short one, a non-dump.

usage: fuzz/make-discover-seeds.py [OUTDIR [TESTJIT]]
  (default OUTDIR: fuzz/corpus-discover next to this file; with TESTJIT,
  also a dump written by `testjit emit`)
"""
import os
import struct
import subprocess
import sys
import tempfile

MAGIC = 0x4A695444
EM_PPC64, EM_X86_64 = 21, 62
PID = 4242


def header(pid=PID, be=False, mach=EM_X86_64, pad1=0, version=1, size=40):
    return struct.pack((">" if be else "<") + "IIIIIIQQ", MAGIC, version, size, mach,
                       pad1, pid, 1700000000000000, 0)


def load(pid=PID, be=False):
    """One LOAD record of 16 bytes of x86-64 code named f."""
    code = bytes.fromhex("554889e5b82a0000005dc3cccccccccc")
    body = struct.pack((">" if be else "<") + "IIQQQQ", pid, pid, 0x7000, 0x7000,
                       len(code), 1) + b"f\0" + code
    return struct.pack((">" if be else "<") + "IIQ", 0, 16 + len(body), 2000) + body


def seed(ctl, pid=PID, content=b"", name=None):
    out = bytes([ctl]) + struct.pack("<I", pid)
    if name is not None:
        out += bytes([len(name)]) + name
    return out + content


EXEC = 1
PID_HDR, PID_WRONG, PID_ZERO, PID_BYTES = 0 << 1, 1 << 1, 2 << 1, 3 << 1
N_PERF, N_JSC, N_BIN, N_JSCTMP, N_PERF1, N_INPUT, N_PERFB, N_MEMFD = (n << 3 for n in range(8))
DELETED, MOVED = 1 << 6, 1 << 7

SEEDS = {
    "01-jvmti-le-perf-name": seed(EXEC | PID_HDR | N_PERF, content=header() + load()),
    "02-jsc-name": seed(EXEC | PID_HDR | N_JSC, content=header() + load()),
    "03-v8-any-name": seed(EXEC | PID_HDR | N_BIN, content=header(pad1=0xDEADBEEF)),
    "04-big-endian-ppc64": seed(EXEC | PID_HDR | N_BIN,
                                content=header(be=True, mach=EM_PPC64) + load(be=True)),
    "05-wrong-pid": seed(EXEC | PID_WRONG | N_JSC, content=header()),
    "06-short": seed(EXEC | PID_HDR | N_BIN, content=header()[:30]),
    "07-perf-name-not-a-dump": seed(EXEC | PID_BYTES | N_PERFB, content=b"\x7fELF" + bytes(60)),
    "08-jsc-moved": seed(EXEC | PID_HDR | N_JSCTMP | MOVED, content=header()),
    "09-deleted-not-exec": seed(PID_HDR | N_PERF | DELETED, content=header()),
    "10-name-from-input": seed(EXEC | PID_ZERO | N_INPUT, content=header(version=2),
                               name=b"jit-7-4242.dump"),
    "11-memfd": seed(EXEC | PID_HDR | N_MEMFD, content=header()),
    "12-bad-size": seed(EXEC | PID_HDR | N_PERF1, content=header(size=4096)),
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus-discover")
    os.makedirs(out, exist_ok=True)
    seeds = dict(SEEDS)
    if len(sys.argv) > 2:
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.argv[2], "emit", "-d", d, "-J"], capture_output=True,
                               text=True, check=True)
            path = [ln.split(" ", 1)[1] for ln in r.stdout.splitlines()
                    if ln.startswith("dump ")][0]
            with open(path, "rb") as f:
                seeds["13-testjit-emit-jsc"] = seed(EXEC | PID_HDR | N_JSC, content=f.read())
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(seeds), out))


if __name__ == "__main__":
    main()
