#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Truncation and bit-flip sweep of `perfgraft inject` over a real
recording: meant for the ASan/UBSan build and a perf.data recorded with
`perf record -k mono --call-graph dwarf` (samples with user stacks: inject
reads every word of them) beside its jitdump.  Not run by the test suite.

usage: fuzz/sweep-inject.py PERFGRAFT PERF_DATA JITDUMP [-n N] [--seed S]
                            [--keep DIR] [--timeout SECS]

Each of N cases (default 2000; seeded, --seed, default 1) damages a copy of
the input in a scratch directory and runs `PERFGRAFT inject -i CASE -o OUT`:

  truncate  the perf.data cut at a random offset (half of them at a record's
            start or end, give or take a few bytes)
  flip      1-8 random bits flipped, half of the time all inside SAMPLE
            records (the sizes and counts inject reads)
  smash     1-3 words of SAMPLE records set to hostile values (0, 2^64-8,
            2^63, ...: counts and sizes that overflow), mostly the counts
            and sizes themselves (read group nr, callchain nr, raw size,
            branch nr, regs abi, stack size, dyn_size: found from the
            attrs of a file-form perf.data), else any aligned word
  dump      the jitdump truncated or bit-flipped (given with --jitdump)

The dump is otherwise found through the recording's marker, so it must
still be where it was recorded (or give its directory: it is passed as
--jitdump-dir).  Exit 0 and 1 are fine; a signal, another exit status, a
sanitizer report or a timeout is a failure: it is printed, and the case
(damaged input, dump, the command and its stderr) is saved under --keep
(default: a new directory under /tmp).  Prints the count of each outcome;
exits 1 when any case failed.

Recording one (perf writes the dump's marker, node the dump, into the
current directory):

    cd $(mktemp -d) && perf record -k mono --call-graph dwarf -e cpu-clock \\
        -o X.data -- node --perf-prof --perf-prof-unwinding-info \\
        .../tests/fixtures/node/work.js
    .../fuzz/sweep-inject.py .../build-asan/perfgraft X.data jit-*.dump -n 3000
"""
import argparse
import collections
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

SAN_RE = re.compile(r"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|"
                    r"ERROR: UndefinedBehaviorSanitizer")
HOSTILE = (0, 1, 7, 8, 0xFFFFFFFF, 1 << 32, (1 << 59) - (1 << 35), 1 << 61, 1 << 63,
           (1 << 64) // 3 + 1, (1 << 64) - 8, (1 << 64) - 1)
PERF_RECORD_SAMPLE = 9


def records(data):
    """[(offset, size, type)] of the top-level records of a perf.data (file
    or pipe form, either byte order), as far as they parse."""
    if data[:8] == b"PERFILE2":
        bo = "<"
    elif data[:8] == b"2ELIFREP":
        bo = ">"
    else:
        return []
    hsize = struct.unpack_from(bo + "Q", data, 8)[0]
    if hsize == 16:
        pos, end = 16, len(data)
    else:
        pos, size = struct.unpack_from(bo + "QQ", data, 40)
        end = min(len(data), pos + size)
    out = []
    while pos + 8 <= end:
        rtype, _, size = struct.unpack_from(bo + "IHH", data, pos)
        if size < 8 or pos + size > end:
            break
        out.append((pos, size, rtype))
        pos += size
        if rtype in (66, 71):       # tracing data, AUXTRACE: a payload follows
            n = struct.unpack_from(bo + ("Q" if rtype == 71 else "I"), data,
                                   out[-1][0] + 8)[0]
            pos += n
    return out


def attrs_of(data):
    """[(sample_type, read_format, branch_sample_type, sample_regs_user,
    ids)] of a file-form perf.data's attrs section (pipe form: [])."""
    bo = "<" if data[:8] == b"PERFILE2" else ">"
    if struct.unpack_from(bo + "Q", data, 8)[0] == 16:
        return []
    attr_size, aoff, asz = struct.unpack_from(bo + "QQQ", data, 16)
    out = []
    for pos in range(aoff, aoff + asz - attr_size + 1, max(attr_size, 1)):
        size = attr_size - 16
        raw = data[pos:pos + size] + bytes(max(0, 88 - size))
        st, rf = struct.unpack_from(bo + "QQ", raw, 24)
        bst, regs = struct.unpack_from(bo + "QQ", raw, 72)
        ioff, isz = struct.unpack_from(bo + "QQ", data, pos + size)
        ids = struct.unpack_from(bo + "%dQ" % (isz // 8), data, ioff) if isz < 1 << 20 else ()
        out.append((st, rf, bst if size >= 80 else 0, regs if size >= 88 else 0, ids))
    return out


def count_fields(data, attrs, off, size):
    """Offsets of the counts and sizes of the SAMPLE at off (read group nr,
    callchain nr, raw size, branch nr, regs abi, stack size, dyn_size), as
    the kernel lays them out; [] when its attr is not known."""
    bo = "<" if data[:8] == b"PERFILE2" else ">"
    end = off + size
    p = off + 8
    if not attrs:
        return []
    st, rf, bst, regs, _ = attrs[0]
    if len(attrs) > 1 and st & (1 << 16) and p + 8 <= end:    # IDENTIFIER
        sid = struct.unpack_from(bo + "Q", data, p)[0]
        for a in attrs:
            if sid in a[4]:
                st, rf, bst, regs, _ = a
    u64 = lambda at: struct.unpack_from(bo + "Q", data, at)[0]  # noqa: E731
    p += 8 * sum(bool(st & 1 << b) for b in (16, 0, 1, 2, 3, 6, 9, 7, 8))
    out = []
    try:
        if st & 1 << 4:                 # READ
            per = 1 + bool(rf & 4) + bool(rf & 16)
            times = bool(rf & 1) + bool(rf & 2)
            if rf & 8:
                out.append(p)
                p += 8 * (1 + times + u64(p) * per)
            else:
                p += 8 * (per + times)
        if st & 1 << 5:                 # CALLCHAIN
            out.append(p)
            p += 8 + 8 * u64(p)
        if st & 1 << 10:                # RAW: a u32
            out.append(p)
            p += 4 + struct.unpack_from(bo + "I", data, p)[0]
        if st & 1 << 11:                # BRANCH_STACK
            out.append(p)
            nr = u64(p)
            p += 8 + (8 if bst & 1 << 17 else 0) + nr * (32 if bst & 1 << 19 else 24)
        if st & 1 << 12:                # REGS_USER
            out.append(p)
            p += 8 + (8 * bin(regs).count("1") if u64(p) else 0)
        if st & 1 << 13:                # STACK_USER
            out.append(p)
            n = u64(p)
            if n and p + 8 + n + 8 <= end:
                out.append(p + 8 + n)
    except struct.error:
        pass
    return [at for at in out if at + 8 <= end]


def damage(rng, data, recs, kind, attrs=()):
    """(damaged bytes, what was done)."""
    samples = [r for r in recs if r[2] == PERF_RECORD_SAMPLE and r[1] > 16]
    if kind == "truncate":
        if recs and rng.random() < 0.5:
            off, size, _ = rng.choice(recs)
            cut = off + rng.choice((0, size)) + rng.randint(-8, 8)
        else:
            cut = rng.randrange(len(data))
        cut = max(0, min(len(data) - 1, cut))
        return data[:cut], "truncated at %d of %d" % (cut, len(data))
    buf = bytearray(data)
    if kind == "flip":
        n = rng.randint(1, 8)
        where = []
        for _ in range(n):
            if samples and rng.random() < 0.5:
                off, size, _ = rng.choice(samples)
                bit = 8 * (off + 8) + rng.randrange(8 * (size - 8))
            else:
                bit = rng.randrange(8 * len(buf))
            buf[bit // 8] ^= 1 << (bit % 8)
            where.append(bit)
        return bytes(buf), "bits flipped: %s" % ", ".join("%d.%d" % (b // 8, b % 8)
                                                          for b in where)
    if kind == "smash":
        if not samples:
            return damage(rng, data, recs, "flip")
        bo = "<" if data[:8] == b"PERFILE2" else ">"
        where = []
        for _ in range(rng.randint(1, 3)):
            off, size, _ = rng.choice(samples)
            fields = count_fields(data, attrs, off, size)
            if fields and rng.random() < 0.7:
                at = rng.choice(fields)     # a count or a size
            else:
                at = off + 8 + 8 * rng.randrange((size - 8) // 8)
            v = rng.choice(HOSTILE)
            struct.pack_into(bo + "Q", buf, at, v)
            where.append("%d=0x%x" % (at, v))
        return bytes(buf), "words set: %s" % ", ".join(where)
    raise ValueError(kind)


def damage_dump(rng, dump):
    if rng.random() < 0.5:
        cut = rng.randrange(len(dump))
        return dump[:cut], "dump truncated at %d of %d" % (cut, len(dump))
    buf = bytearray(dump)
    bits = [rng.randrange(8 * len(buf)) for _ in range(rng.randint(1, 8))]
    for bit in bits:
        buf[bit // 8] ^= 1 << (bit % 8)
    return bytes(buf), "dump bits flipped: %s" % ", ".join("%d.%d" % (b // 8, b % 8)
                                                           for b in bits)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("perfgraft")
    ap.add_argument("perf_data")
    ap.add_argument("jitdump")
    ap.add_argument("-n", type=int, default=2000, help="cases (default 2000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="where failing cases are saved")
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()

    data = open(a.perf_data, "rb").read()
    dump = open(a.jitdump, "rb").read()
    recs = records(data)
    attrs = attrs_of(data)
    dump_dir = os.path.dirname(os.path.abspath(a.jitdump))
    rng = random.Random(a.seed)
    kinds = ("truncate",) * 9 + ("flip",) * 6 + ("smash",) * 4 + ("dump",)
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    env.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
    keep = a.keep
    counts = collections.Counter()
    failures = 0
    t0 = time.time()
    print("%s: %d bytes, %d records (%d samples); %s: %d bytes; %d cases, seed %d"
          % (a.perf_data, len(data), len(recs),
             sum(r[2] == PERF_RECORD_SAMPLE for r in recs), a.jitdump, len(dump), a.n,
             a.seed), flush=True)
    with tempfile.TemporaryDirectory(prefix="pg-sweep-inject-") as tmp:
        for k in range(a.n):
            kind = rng.choice(kinds)
            case_dump = None
            if kind == "dump":
                case, what = data, ""
                case_dump, what = damage_dump(rng, dump)
            else:
                case, what = damage(rng, data, recs, kind, attrs)
            d = os.path.join(tmp, "c")
            os.mkdir(d)
            with open(os.path.join(d, "in.data"), "wb") as f:
                f.write(case)
            cmd = [a.perfgraft, "inject", "-q", "-i", "in.data", "-o", "out.data",
                   "--jitdump-dir", dump_dir]
            if case_dump is not None:
                with open(os.path.join(d, os.path.basename(a.jitdump)), "wb") as f:
                    f.write(case_dump)
                cmd += ["--jitdump", os.path.basename(a.jitdump)]
            try:
                p = subprocess.run(cmd, cwd=d, capture_output=True, text=True,
                                   errors="replace", timeout=a.timeout, env=env)
                rc, err = p.returncode, p.stderr
            except subprocess.TimeoutExpired as e:
                rc, err = "timeout", (e.stderr or b"").decode("utf-8", "replace")
            if rc == "timeout":
                outcome = "timeout"
            elif SAN_RE.search(err):
                outcome = "sanitizer report"
            elif rc < 0:
                outcome = "signal %d" % -rc
            else:
                outcome = "exit %d" % rc
            counts[outcome] += 1
            if outcome not in ("exit 0", "exit 1"):
                failures += 1
                if not keep:
                    keep = tempfile.mkdtemp(prefix="pg-sweep-inject-failures-")
                dst = os.path.join(keep, "case-%d-%d" % (a.seed, k))
                shutil.copytree(d, dst, ignore=shutil.ignore_patterns("out.data*"))
                with open(os.path.join(dst, "README"), "w") as f:
                    f.write("%s (%s)\ncd %s && %s\n\n%s" % (what, outcome, dst,
                                                          " ".join(cmd), err))
                print("case %d: %s: %s -> %s" % (k, kind, what, outcome), flush=True)
                print("\n".join(err.splitlines()[:30]), flush=True)
            shutil.rmtree(d)
            if (k + 1) % 250 == 0:
                print("%d cases, %.0f s: %s" % (k + 1, time.time() - t0, dict(counts)),
                      flush=True)
    print("%d cases in %.0f s: %s" % (a.n, time.time() - t0,
                                      ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
    if failures:
        print("%d failures, saved in %s" % (failures, keep))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
