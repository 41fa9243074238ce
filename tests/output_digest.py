#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A digest of everything a perfgraft build writes for the test inputs, to
show that a change leaves the outputs of the existing tests byte-identical.

    python3 tests/output_digest.py BUILD_DIR OUT.txt [--work DIR]
            [--gperf-profiles DIR] [--xray-traces DIR]

Runs BUILD_DIR/perfgraft on a fixed set of inputs and writes OUT.txt, one
line per output, sorted: a stable name and the sha256 of the output (an
image, a perf.data, a file in an image directory, or the text `elf --maps`
/ `elf --list` print), or `NAME exit=N` when the command failed (only the
exit status of a failing run counts: its messages are not compared).  Run
it on two builds and diff the files:

    python3 tests/output_digest.py /work/wt/base/build base.txt
    python3 tests/output_digest.py build new.txt
    diff base.txt new.txt

Inputs (written afresh into WORK/in each run; everything runs in WORK, by
default /tmp/pg-digest, which the script removes and recreates: the
perf.data files name their jitdumps and images by absolute path, so the
same directory on every run keeps the outputs comparable):
  jit/      every case of tests/jitdump_gen.py's cases() (byte orders,
            32-bit, CFI, MOVE, CLOSE, truncations, damaged records,
            INLINE_INFO and UNLOAD in three layouts, ...), plus the dumps
            of test_memory_layout.py's layout_dump()/cfi_dump() in its
            three layouts and a few of MOVE, UNLOAD and reused addresses;
  node/     tests/fixtures/node/*.dump;
  each through `perfgraft elf --maps` and `elf --list` in each layout
  (memory, memory --user-stacks, packed, per-function; the CFI dumps also
  with --cfi-layout perf-5.19 and --compress-debug-sections none);
  pd/       tests/perfdata_gen.py's STANDARD_CASES (file and pipe mode, both
            byte orders, compressed, ...) with their jitdumps, and perf.data
            files with REGS_USER/STACK_USER samples (a `--call-graph dwarf`
            recording, file and pipe mode) of a dump with MOVEs, UNLOAD and
            a reused address;
  demo/     tests/fixtures/perf/demo.data with jit-19989.dump (--jitdump-dir);
  each through `perfgraft inject` in each layout: the output perf.data and
  every file of its image directory; pipe-mode inputs also from stdin, and
  every input also to stdout (-o - --image-dir);
  gperf/    tests/gperf_gen.py's cases() through `perfgraft gperf` (default,
            --max-samples 0, --pipe);
  xray/     tests/xray_gen.py's cases() through `perfgraft xray` (default,
            --pipe, -z 0, --no-events).
The MMAP2 records of inject's images carry each image file's device and
inode number, new on every run: those fields (of MMAP2 records naming a
file under WORK/out) are zeroed before a perf.data is hashed.
Real recordings are not deterministic, so they are only used when given:
--gperf-profiles DIR (written once by tests/gen-gperf-profiles.sh DIR) and
--xray-traces DIR (tests/gen-xray-traces.sh DIR) add their conversions;
--bench-inputs DIR (tests/gen-bench-inputs.sh DIR: the benchmarks' node
recordings, -g and --call-graph dwarf, and the MOVE-heavy dump) adds elf
in every layout on each dump and inject in every layout on each perf.data;
pass the same DIR to both runs.

A line that differs between two builds names the input and the command.
The clean cases (jitdump_gen's baseline_*, move_close, names, header_48,
the ext_*_valid ones, every perf.data case, the fixtures) must not differ
unless a change means to change them; damaged inputs may legitimately
change (a warning where there was an error).  The script checks nothing
else and is not part of the suite (tests/run.py does not run it).
Takes about 20 s.
"""

import argparse
import hashlib
import os
import resource
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gperf_gen  # noqa: E402
import jitdump_gen as J  # noqa: E402
import perfdata_gen as G  # noqa: E402
import xray_gen  # noqa: E402

# not for its tests: its dump builders and layouts
from test_memory_layout import LAYOUTS, MemoryLayout, unload_reuse_dump  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")
TIMEOUT = 300

ELF_VARIANTS = {
    "memory": ["--layout", "memory"],
    "memory-user-stacks": ["--layout", "memory", "--user-stacks"],
    "packed": ["--layout", "packed"],
    "per-function": ["--layout", "per-function"],
}
CFI_VARIANTS = {
    "memory-cfi-perf-5.19": ["--layout", "memory", "--cfi-layout", "perf-5.19"],
    "packed-cfi-perf-5.19": ["--layout", "packed", "--cfi-layout", "perf-5.19"],
    "memory-uncompressed": ["--layout", "memory", "--compress-debug-sections", "none"],
}
INJECT_VARIANTS = {
    "memory": ["--layout", "memory"],
    "packed": ["--layout", "packed"],
    "per-function": ["--layout", "per-function"],
}
GPERF_VARIANTS = {"default": [], "weighted": ["--max-samples", "0"], "pipe": ["--pipe"]}
XRAY_VARIANTS = {"default": [], "pipe": ["--pipe"], "z0": ["-z", "0"],
                 "no-events": ["--no-events"]}


MISC_MMAP_BUILD_ID = 1 << 14


def normalised(data, prefix):
    """data (a perf.data inject wrote) with the device and inode fields
    (maj, min, ino, ino_generation) zeroed in every MMAP2 record that maps
    a file whose name starts with prefix: inject's images, new files on
    every run.  inject writes no COMPRESSED record (it writes what it
    decompressed), so every MMAP2 is a top-level record."""
    p = G.parse(data, decompress=False)
    out = bytearray(data)
    for r in p.records:
        if r["type"] == G.PERF_RECORD_COMPRESSED:
            raise RuntimeError("a COMPRESSED record at %d of inject's output" % r["offset"])
        if r["type"] != G.PERF_RECORD_MMAP2 or r["misc"] & MISC_MMAP_BUILD_ID:
            continue
        if G.decode_mmap(r, p.bo)[5].startswith(prefix):
            out[r["offset"] + 48:r["offset"] + 72] = bytes(24)
    return bytes(out)


def no_memory_limit():
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


class Digest:
    def __init__(self, perfgraft, work):
        self.perfgraft = perfgraft
        self.work = work
        self.lines = {}
        self.runs = 0

    def add(self, name, data):
        if name in self.lines:
            raise RuntimeError("two outputs named %s" % name)
        self.lines[name] = hashlib.sha256(data).hexdigest()

    def add_file(self, name, path):
        with open(path, "rb") as f:
            self.add(name, f.read())

    def add_perfdata(self, name, data):
        """A perf.data inject wrote (a path or its bytes), with its images'
        device and inode numbers zeroed."""
        if isinstance(data, str):
            with open(data, "rb") as f:
                data = f.read()
        self.add(name, normalised(data, os.path.join(self.work, "out") + os.sep))

    def add_tree(self, name, top):
        """Every file under top (sorted, relative names); a symlink by its
        target's text."""
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for n in sorted(filenames):
                p = os.path.join(dirpath, n)
                rel = os.path.relpath(p, top)
                if os.path.islink(p):
                    self.add("%s/%s" % (name, rel), b"symlink:" + os.readlink(p).encode())
                else:
                    self.add_file("%s/%s" % (name, rel), p)

    def run(self, name, args, cwd=None, stdin=None):
        """perfgraft ARGS; stdout bytes, or None (and an exit= line) when it
        failed."""
        self.runs += 1
        fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
        try:
            p = subprocess.run([self.perfgraft] + args, cwd=cwd or self.work, stdin=fin,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=TIMEOUT, preexec_fn=no_memory_limit)
        finally:
            if stdin:
                fin.close()
        if p.returncode != 0:
            self.lines[name] = "exit=%d" % p.returncode
            return None
        return p.stdout

    def write(self, path):
        with open(path, "w") as f:
            for name in sorted(self.lines):
                f.write("%s %s\n" % (name, self.lines[name]))


# ---------------------------------------------------------------------------
# inputs

def extra_dumps(outdir):
    """{name: path} of dumps built like the memory-layout tests build them."""
    out = {}

    def emit(name, b):
        out[name] = b.write(os.path.join(outdir, name + ".dump"))

    for lay in LAYOUTS:
        emit("layout_%s" % lay[0], MemoryLayout.layout_dump(None, lay))
        emit("layout_cfi_%s" % lay[0], MemoryLayout.layout_dump(None, lay, cfi=True))
        emit("cfi_%s" % lay[0], MemoryLayout.cfi_dump(None, lay))
    base = LAYOUTS[0][5]
    a = base + 0x4000
    b = J.JitdumpBuilder()
    c0 = J.x86_64_code(0x28, 7)
    b.load(b"JS:*moved", c0, a, 0)
    b.load(b"JS:*stays", J.x86_64_code(0x18, 8), a + 0x80, 1)
    b.move(0, a, a + 0x1000, len(c0))
    b.move(1, a + 0x80, a + 0x1010, 0x18)
    b.move(0, a + 0x1000, a + 0x9000, len(c0))
    emit("moves", b)
    b = J.JitdumpBuilder()
    b.cfi_unwinding_info(a, 0x40)
    b.load(b"JS:*m", J.x86_64_code(0x40, 1), a, 0)
    b.move(0, a, a + 0x1000, 0x40)
    emit("move_cfi", b)
    b = unload_reuse_dump()
    emit("unload_reuse", b)
    return out


STACK_BYTES = 64


def user_stack_sample(b, ip, stack_words, time):
    """A SAMPLE with REGS_USER (abi 64, ip/sp/bp set) and STACK_USER."""
    regs = [0] * bin(G.REGS_USER_X86_64).count("1")
    regs[6], regs[7], regs[8] = 0x7FFC00001000, 0x7FFC00000F00, ip    # bp, sp, ip
    stack = b"".join(b.p("Q", w) for w in stack_words)
    b.sample(ip, G.PID, G.PID, time, callchain=[G.PERF_CONTEXT_USER, ip], period=1000000,
             regs=regs, stack=stack + bytes(STACK_BYTES - len(stack)))


def user_stack_case(outdir, name, pipe):
    """A perf.data of a --call-graph dwarf recording and its dump: a MOVE
    whose old address stays on the stack, an UNLOAD and a reused address."""
    os.makedirs(outdir, exist_ok=True)
    t0, base = G.T0, G.JIT_BASE
    f0, f1, f2 = base + 0x40, base + 0x100, base + 0x200
    moved = base + 0x1000
    jd = J.JitdumpBuilder(pid=G.PID, timestamp=t0)
    jd.load(b"JS:*fib", J.x86_64_code(0x30, 0), f0, 0, timestamp=t0 + 20_000)
    jd.cfi_unwinding_info(f1, 0x45, timestamp=t0 + 29_000)
    jd.load(b"JS:~work", J.x86_64_code(0x45, 1), f1, 1, timestamp=t0 + 30_000)
    jd.load(b"Builtin:ArrayPrototypePush", J.x86_64_code(0x20, 2), f2, 2,
            timestamp=t0 + 40_000)
    jd.move(0, f0, moved, 0x30, timestamp=t0 + 50_000)
    jd.unload(f2, 0x20, 2, timestamp=t0 + 60_000)
    jd.load(b"JS:*again", J.x86_64_code(0x18, 3), f2, 3, timestamp=t0 + 70_000)
    jd.close(timestamp=t0 + 90_000)
    dump = os.path.join(os.path.abspath(outdir), "jit-%d.dump" % G.PID)
    jd.write(dump)
    st = G.S_IDENTIFIER | G.DWARF_SAMPLE_TYPE
    b = G.PerfDataBuilder(pipe=pipe, attrs=[G.dwarf_attr(ids=[101], sample_type=st)])
    b.feat_string(G.FEAT_HOSTNAME, "perfgraft-test-host")
    b.comm(G.PID, G.PID, "node", t0 + 1000)
    b.mmap(G.PID, G.PID, G.NODE_BASE, 0x200000, 0, G.NODE_PATH, t0 + 2000)
    b.mmap2(G.PID, G.PID, 0x7F3A1B000000, 4096, 0, dump, t0 + 5000, prot=5, role="marker")
    node = G.NODE_BASE + 0x2000
    plan = [(f0 + 8, [f1 + 0x10, node], 25_000),
            (f1 + 0x20, [f0 + 0x12, node], 35_000),
            (f2 + 4, [f1 + 0x30, f0 + 0x20, node], 45_000),
            (moved + 8, [f0 + 0x12, f1 + 0x10, node], 55_000),     # old copy on the stack
            (f1 + 0x24, [moved + 0x10, node], 65_000),
            (f2 + 8, [f0 + 0x12, moved + 0x14, node], 75_000),      # reused address
            (G.NODE_BASE + 0x1300, [node], 95_000)]
    for ip, words, dt in plan:
        user_stack_sample(b, ip, words, t0 + dt)
        b.finished_round()
    path = os.path.join(outdir, name + ".data")
    b.write(path)
    return path


# ---------------------------------------------------------------------------
# conversions

def elf_runs(d, name, dump, variants):
    for v, opts in variants.items():
        tag = "elf/%s/%s" % (name, v)
        out = os.path.join(d.work, "out", "elf", name, v)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        maps = d.run(tag + "/maps", ["elf", "-q", *opts, "--maps", "-o", out, dump])
        if maps is not None:
            d.add(tag + "/maps", maps)
            d.add_tree(tag + "/images", out)
        listing = d.run(tag + "/list", ["elf", "-q", *opts, "--list", "-o", out + "-list", dump])
        if listing is not None:
            d.add(tag + "/list", listing)


def inject_runs(d, name, data, pipe, extra=()):
    # -N: no build-id cache (it would fill ~/.debug); the outputs are the same
    for v, opts in INJECT_VARIANTS.items():
        tag = "inject/%s/%s" % (name, v)
        top = os.path.join(d.work, "out", "inject", name, v)
        os.makedirs(top)
        out = os.path.join(top, "out.data")
        if d.run(tag, ["inject", "-q", "-N", *opts, *extra, "-i", data, "-o", out]) is not None:
            d.add_perfdata(tag + "/out.data", out)
            d.add_tree(tag + "/out.data.d", out + ".d")
        if pipe:
            out = os.path.join(top, "stdin.data")
            if d.run(tag + "/stdin", ["inject", "-q", "-N", *opts, *extra, "-i", "-", "-o", out],
                     stdin=data) is not None:
                d.add_perfdata(tag + "/stdin/out.data", out)
                d.add_tree(tag + "/stdin/out.data.d", out + ".d")
        img = os.path.join(top, "stdout-images")
        so = d.run(tag + "/stdout", ["inject", "-q", "-N", *opts, *extra, "-i", data, "-o", "-",
                                     "--image-dir", img])
        if so is not None:
            d.add_perfdata(tag + "/stdout/out.data", so)
            d.add_tree(tag + "/stdout/images", img)


def convert_runs(d, kind, name, args, variants):
    for v, opts in variants.items():
        tag = "%s/%s/%s" % (kind, name, v)
        out = os.path.join(d.work, "out", kind, name, v + ".data")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        if d.run(tag, [kind, *args, *opts, "-q", "-o", out]) is not None:
            d.add_file(tag, out)


def digest(perfgraft, work, gperf_profiles=None, xray_traces=None, bench_inputs=None):
    if os.path.lexists(work):
        shutil.rmtree(work)
    inp = os.path.join(work, "in")
    os.makedirs(inp)
    d = Digest(perfgraft, work)

    # jitdumps through elf
    jit = os.path.join(inp, "jit")
    os.makedirs(jit)
    cases = J.cases(jit)
    dumps = {n: p for n, (p, _e) in cases.items()}
    cfi = {n for n, (_p, e) in cases.items() if any(f.has_cfi for f in e.funcs)}
    extra = extra_dumps(jit)
    dumps.update(extra)
    cfi |= {n for n in extra if "cfi" in n or n == "unload_reuse"}
    node = os.path.join(inp, "node")
    os.makedirs(node)
    for n in sorted(os.listdir(os.path.join(FIXTURES, "node"))):
        if n.endswith(".dump"):
            p = shutil.copy(os.path.join(FIXTURES, "node", n), node)
            dumps["node-" + n[:-5]] = p
            cfi.add("node-" + n[:-5])
    for name in sorted(dumps):
        variants = dict(ELF_VARIANTS)
        if name in cfi:
            variants.update(CFI_VARIANTS)
        elf_runs(d, name, dumps[name], variants)

    # perf.data through inject
    pd = os.path.join(inp, "pd")
    for name, kw in sorted(G.STANDARD_CASES.items()):
        c = G.make_case(os.path.join(pd, name), name, **kw)
        inject_runs(d, name, c.path, kw.get("pipe", False))
    for pipe in (False, True):
        name = "user-stacks-%s" % ("pipe" if pipe else "file")
        inject_runs(d, name, user_stack_case(os.path.join(pd, name), name, pipe), pipe)
    demo = os.path.join(inp, "demo")
    os.makedirs(demo)
    for n in ("demo.data", "jit-19989.dump"):
        shutil.copy(os.path.join(FIXTURES, "perf", n), demo)
    inject_runs(d, "demo", os.path.join(demo, "demo.data"), False,
                extra=("--jitdump-dir", demo))

    # gperf and xray conversions of the generated inputs
    gp = os.path.join(inp, "gperf")
    gperf_gen.write_cases(gperf_gen.cases(), gp)
    for n in sorted(os.listdir(gp)):
        if n.endswith(".prof"):
            convert_runs(d, "gperf", n[:-5], [os.path.join(gp, n)], GPERF_VARIANTS)
    xr = os.path.join(inp, "xray")
    os.makedirs(xr)
    for n in sorted(xray_gen.cases(xr)):
        convert_runs(d, "xray", n, [os.path.join(xr, n + ".xray")], XRAY_VARIANTS)

    # real recordings, when given
    if gperf_profiles:
        import json
        with open(os.path.join(gperf_profiles, "scenarios.json")) as f:
            for s in json.load(f):
                convert_runs(d, "gperf", "recorded-" + s["name"], [s["profile"]],
                             GPERF_VARIANTS)
    if xray_traces:
        import json
        with open(os.path.join(xray_traces, "scenarios.json")) as f:
            for s in json.load(f):
                args = [os.path.join(xray_traces, s["trace"])]
                if s.get("binary"):
                    args += ["-b", os.path.join(xray_traces, s["binary"])]
                convert_runs(d, "xray", "recorded-" + s["name"], args, XRAY_VARIANTS)
    if bench_inputs:
        import json
        with open(os.path.join(bench_inputs, "scenarios.json")) as f:
            for s in json.load(f):
                for dump in s["dumps"]:
                    variants = dict(ELF_VARIANTS)
                    variants.update(CFI_VARIANTS)
                    elf_runs(d, "bench-%s-%s" % (s["name"], os.path.basename(dump)[:-5]),
                             os.path.join(bench_inputs, dump), variants)
                # the recordings name their dumps by absolute path: they are
                # read where they were recorded
                inject_runs(d, "bench-" + s["name"], os.path.join(bench_inputs, s["data"]),
                            False, extra=("--jitdump-dir", os.path.join(bench_inputs, s["name"])))
    return d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", help="meson build directory holding perfgraft")
    ap.add_argument("out", help="the digest to write")
    ap.add_argument("--work", default="/tmp/pg-digest",
                    help="working directory, removed and recreated (default: %(default)s)")
    ap.add_argument("--gperf-profiles", metavar="DIR",
                    help="also convert tests/gen-gperf-profiles.sh DIR's profiles")
    ap.add_argument("--xray-traces", metavar="DIR",
                    help="also convert tests/gen-xray-traces.sh DIR's traces")
    ap.add_argument("--bench-inputs", metavar="DIR",
                    help="also run elf and inject on tests/gen-bench-inputs.sh DIR's "
                         "recordings (minutes, not seconds)")
    args = ap.parse_args(argv)
    # a runaway parse here must not take the machine's memory (a soft
    # limit: perfgraft, maybe an ASan build, runs without it)
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))
    perfgraft = os.path.join(os.path.abspath(args.build), "perfgraft")
    if not os.access(perfgraft, os.X_OK):
        ap.error("%s is not an executable" % perfgraft)
    work = os.path.abspath(args.work)
    out = os.path.abspath(args.out)
    if out == work or out.startswith(work + os.sep):
        ap.error("OUT.txt must not be inside the working directory %s" % work)
    d = digest(perfgraft, work, args.gperf_profiles, args.xray_traces, args.bench_inputs)
    d.write(out)
    failed = sum(1 for v in d.lines.values() if v.startswith("exit="))
    print("%d outputs (%d of them failed runs) from %d perfgraft runs: %s"
          % (len(d.lines), failed, d.runs, out))
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
