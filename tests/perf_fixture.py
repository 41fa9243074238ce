#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Real perf recordings of a node run, and parsers for perf's text output.

Used by tests/test_inject_acceptance.py; tests/gen-perf-fixtures.sh runs
the same recording code from the command line so a failure can be looked
at by hand:

    python3 tests/perf_fixture.py record DIR [fp|dwarf] [MS]
        records tests/fixtures/perf/work.js into DIR (a new or empty
        directory) and writes perf's own reference DIR/perf.ref.data;
        prints the commands it ran.

Layout of a recording (everything in one directory, because the perf.data
names the jitdump by its absolute path):

    DIR/work.js          copy of tests/fixtures/perf/work.js
    DIR/jit-PID.dump     written by node --perf-prof (node's cwd is DIR)
    DIR/perf.data        perf record -k mono ... -o perf.data
    BUILDID/             the --buildid-dir passed to EVERY perf command

perf is always run as `perf --buildid-dir BUILDID SUBCOMMAND ...` so that
it never reads or writes ~/.debug; home_debug_snapshot() lets a test check
that.  `perf record` also gets -N (no build-id cache update): the recorded
binaries are found by path, and it saves copying them into BUILDID.
"""

import bisect
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXDIR = os.path.join(HERE, "fixtures", "perf")
WORK_JS = os.path.join(FIXDIR, "work.js")

PERF = os.environ.get("PERF", "perf")
NODE = os.environ.get("NODE", "node")
PERFGRAFT = os.environ.get("PERFGRAFT",
                           os.path.join(ROOT, "build", "perfgraft"))

NODE_FLAGS = ["--perf-prof", "--perf-prof-unwinding-info",
              "--interpreted-frames-native-stack"]
TIMEOUT = 300

# Names V8 gives the code it reports in a jitdump (V8 prefixes: JS:, Builtin:, RegExp:, ...).
JIT_PREFIXES = ("JS:", "Builtin:", "BytecodeHandler:", "RegExp:", "Stub:",
                "Handler:", "Function:", "LazyCompile:", "Script:", "Eval:")


def is_jit_name(name):
    return name.startswith(JIT_PREFIXES)


def shell(cmd):
    return " ".join(shlex.quote(c) for c in cmd)


class CommandError(AssertionError):
    pass


def run(cmd, cwd=None, stdin=None, input=None, check=True, timeout=TIMEOUT,
        env=None):
    """Runs cmd; returns (rc, stdout str, stderr str, seconds).  With check,
    a non-zero exit raises CommandError naming the command and its stderr."""
    t0 = time.time()
    p = subprocess.run(cmd, cwd=cwd, stdin=stdin, input=input,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=env)
    dt = time.time() - t0
    out = p.stdout.decode("utf-8", "surrogateescape")
    err = p.stderr.decode("utf-8", "surrogateescape")
    if check and p.returncode != 0:
        raise CommandError("command failed (exit %d): %s\n  (cwd %s)\n"
                           "stderr:\n%s" % (p.returncode, shell(cmd), cwd,
                                            tail(err)))
    return p.returncode, out, err, dt


def tail(text, lines=30):
    ls = text.rstrip("\n").splitlines()
    if len(ls) > lines:
        ls = ["... (%d lines before)" % (len(ls) - lines)] + ls[-lines:]
    return "\n".join(ls)


def perf_cmd(buildid_dir, sub, *args):
    return [PERF, "--buildid-dir", buildid_dir, sub] + list(args)


# ---------------------------------------------------------------------------
# Environment checks and ~/.debug

def environment_problem():
    """None when perf record -e cpu-clock and node work here, else a reason."""
    if shutil.which(NODE) is None:
        return "node (%s) not found" % NODE
    if shutil.which(PERF) is None:
        return "perf (%s) not found" % PERF
    with tempfile.TemporaryDirectory(prefix="perfgraft-perfcheck.") as d:
        cmd = perf_cmd(os.path.join(d, "debug"), "record", "-N", "-q",
                       "-e", "cpu-clock", "-o", os.path.join(d, "p.data"),
                       "--", "true")
        try:
            rc, _, err, _ = run(cmd, cwd=d, check=False, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return "%s: %s" % (shell(cmd), e)
        if rc != 0 or not os.path.isfile(os.path.join(d, "p.data")):
            return "`%s` does not work here (exit %d): %s" % (
                shell(cmd), rc, err.strip()[-300:])
    return None


def home_debug_snapshot():
    """{path: (mtime_ns, size)} of everything under ~/.debug (lstat)."""
    top = os.path.expanduser("~/.debug")
    out = {}
    if not os.path.lexists(top):
        return out
    for dirpath, dirnames, filenames in os.walk(top):
        for n in [""] + dirnames + filenames:
            p = os.path.join(dirpath, n) if n else dirpath
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out[p] = (st.st_mtime_ns, st.st_size)
    return out


def snapshot_diff(before, after, limit=20):
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(p for p in set(before) & set(after)
                     if before[p] != after[p] and not os.path.isdir(p))
    if not (added or removed or changed):
        return None
    return ("~/.debug changed: %d added %s, %d removed %s, %d changed %s"
            % (len(added), added[:limit], len(removed), removed[:limit],
               len(changed), changed[:limit]))


# ---------------------------------------------------------------------------
# Recording

class Recording:
    """One `perf record` of work.js in its own directory."""

    def __init__(self, directory, buildid_dir, mode):
        self.dir = directory
        self.buildid_dir = buildid_dir
        self.mode = mode
        self.data = os.path.join(directory, "perf.data")
        self.dump = None
        self.pid = None
        self.commands = []          # (shell line, seconds)

    def perf(self, sub, *args, **kw):
        """Runs perf SUB ARGS in the recording directory."""
        cmd = perf_cmd(self.buildid_dir, sub, *args)
        res = run(cmd, cwd=self.dir, **kw)
        self.commands.append((shell(cmd), res[3]))
        return res

    def path(self, name):
        return os.path.join(self.dir, name)


def call_graph_args(mode):
    if mode == "fp":
        return ["-g"]
    if mode == "dwarf":
        return ["--call-graph", "dwarf"]
    if mode == "none":
        return []
    raise ValueError(mode)


def record(directory, buildid_dir, mode="fp", ms=1500):
    """Records node work.js MS into DIRECTORY; returns a Recording."""
    os.makedirs(directory, exist_ok=True)
    os.makedirs(buildid_dir, exist_ok=True)
    shutil.copy(WORK_JS, os.path.join(directory, "work.js"))
    rec = Recording(directory, buildid_dir, mode)
    rec.perf("record", "-N", "-q", "-k", "mono", *call_graph_args(mode),
             "-e", "cpu-clock", "-o", "perf.data", "--",
             NODE, *NODE_FLAGS, "work.js", str(ms))
    find_dump(rec)
    return rec


def find_dump(rec):
    dumps = sorted(n for n in os.listdir(rec.dir)
                   if re.fullmatch(r"jit-\d+\.dump", n))
    if len(dumps) != 1:
        raise CommandError("expected one jit-PID.dump in %s, found %s"
                           % (rec.dir, dumps))
    rec.dump = os.path.join(rec.dir, dumps[0])
    rec.pid = int(re.search(r"\d+", dumps[0]).group())


def perf_inject_reference(rec, out="perf.ref.data"):
    rec.perf("inject", "--jit", "-i", "perf.data", "-o", out)
    return rec.path(out)


def perf_jitted_files(rec):
    """perf inject's per-function ELF files for this recording."""
    pat = re.compile(r"jitted-%d-\d+\.so" % rec.pid)
    return sorted(n for n in os.listdir(rec.dir) if pat.fullmatch(n))


def count_files(top):
    n = 0
    for _, _, filenames in os.walk(top):
        n += len(filenames)
    return n


# ---------------------------------------------------------------------------
# Parsers for perf's text output

_REPORT_ROW = re.compile(
    r"^\s*(\d+\.\d+)%\s+(\d+)\s+\[(.)\]\s(.*?)\s*$")


def parse_report_counts(text):
    """`perf report --stdio -F overhead,sample,sym` -> {symbol: samples}.

    Rows with the same name (perf keeps one row per DSO and symbol start;
    V8 has many functions with the same name) are summed.  The privilege
    level is dropped; kernel rows are rare and have distinct names.
    Also returns the number of rows per name, as (counts, rows)."""
    counts, rows = {}, {}
    for ln in text.splitlines():
        if ln.startswith("#") or not ln.strip():
            continue
        m = _REPORT_ROW.match(ln)
        if not m:
            continue
        name = m.group(4)
        counts[name] = counts.get(name, 0) + int(m.group(2))
        rows[name] = rows.get(name, 0) + 1
    return counts, rows


_CHILDREN_ENTRY = re.compile(
    r"^\s*(\d+\.\d+)%\s+(\d+\.\d+)%\s+\[(.)\]\s(.*?)\s*$")
_FOLDED = re.compile(r"^(\d+) (.*)$")


def parse_folded_children(text):
    """`perf report --stdio --children --sort sym -g folded,0,caller,count`
    -> {entry symbol: {folded chain: samples}} (rows of the same name
    merged, chains summed)."""
    out = {}
    cur = None
    for ln in text.splitlines():
        if ln.startswith("#"):
            continue
        m = _CHILDREN_ENTRY.match(ln)
        if m:
            cur = out.setdefault(m.group(4), {})
            continue
        m = _FOLDED.match(ln)
        if m and cur is not None:
            chain = m.group(2).rstrip()
            cur[chain] = cur.get(chain, 0) + int(m.group(1))
    return out


def chain_edges(children):
    """{(caller, callee): samples} summed over all entries and chains."""
    edges = {}
    for chains in children.values():
        for chain, n in chains.items():
            fr = chain.split(";")
            for a, b in zip(fr, fr[1:]):
                edges[(a, b)] = edges.get((a, b), 0) + n
    return edges


_READELF_FUNC = re.compile(
    r"^\s*\d+:\s+([0-9a-f]+)\s+(0x[0-9a-f]+|\d+)\s+FUNC\s+\S+\s+\S+\s+\S+\s+(.*)$")


def image_funcs(image_dir, check=False):
    """(path, [(value, size, name)]) for each .so file below image_dir:
    its FUNC symbols as `readelf -sW` lists them (check: a readelf
    failure raises)."""
    for root, _, files in os.walk(image_dir):
        for f in files:
            if not f.endswith(".so"):
                continue
            path = os.path.join(root, f)
            out = subprocess.run(["readelf", "-sW", path], stdout=subprocess.PIPE,
                                 stderr=None if check else subprocess.DEVNULL,
                                 check=check, text=True).stdout
            funcs = []
            for ln in out.splitlines():
                m = _READELF_FUNC.match(ln)
                if m:
                    funcs.append((int(m.group(1), 16), int(m.group(2), 0), m.group(3)))
            yield path, funcs


_SCRIPT_IP_SYM = re.compile(r"^\s*([0-9a-f]+) (.*?)\s*$")


def parse_script_srclines(text):
    """`perf script -G -F ip,sym,srcline` -> [(ip, sym, srcline or None)].
    perf prints the srcline on its own line after the sample, or nothing
    when it has none.
    Sample lines print the ip right-aligned in 16 columns (x86-64 user
    addresses have at most 12 digits, kernel ones 16); the srcline line is
    prefixed by exactly two spaces."""
    out = []
    for ln in text.splitlines():
        if not ln.strip():
            continue
        if re.match(r"^  \S", ln):
            if out and out[-1][2] is None:
                out[-1][2] = ln[2:].rstrip()
            continue
        m = _SCRIPT_IP_SYM.match(ln)
        if m:
            out.append([int(m.group(1), 16), m.group(2), None])
    return [tuple(x) for x in out]


_ANNOTATE_INSN = re.compile(r"^\s*(\d+\.\d+)\s*:\s+([0-9a-f]+):\s+(\S+)(.*)$")


def parse_annotate(text):
    """`perf annotate --stdio -s SYM` -> [(percent, offset, mnemonic)] for
    the instruction lines (source lines interleaved by objdump skipped)."""
    out = []
    for ln in text.splitlines():
        m = _ANNOTATE_INSN.match(ln)
        if m:
            out.append((float(m.group(1)), int(m.group(2), 16), m.group(3)))
    return out


_SCRIPT_HEAD = re.compile(r"^\s*(\d+)\s+(\d+\.\d+):\s*(?:([0-9a-f]+)\s*)?$")


def parse_script_leaves(text):
    """`perf script -G --ns -F tid,time,ip` -> {(tid, time): ip}."""
    out = {}
    for ln in text.splitlines():
        m = _SCRIPT_HEAD.match(ln)
        if m and m.group(3):
            out[(int(m.group(1)), m.group(2))] = int(m.group(3), 16)
    return out


def parse_script_chains(text):
    """`perf script --ns -F tid,time,ip,sym` (with callchains) ->
    {(tid, time): [sym, ...]} innermost first."""
    out = {}
    cur = None
    for ln in text.splitlines():
        if not ln.strip():
            cur = None
            continue
        m = _SCRIPT_HEAD.match(ln)
        if m and not m.group(3):
            cur = out.setdefault((int(m.group(1)), m.group(2)), [])
            continue
        if cur is not None:
            m = _SCRIPT_IP_SYM.match(ln)
            cur.append(m.group(2) if m else ln.strip())
    return out


class CodeRanges:
    """Address ranges of every LOAD in a jitdump (tests/jitdump_oracle.py)."""

    def __init__(self, loads):
        rs = sorted((l.code_addr, l.code_addr + l.code_size)
                    for l in loads if l.code_size)
        self.starts = [a for a, _ in rs]
        self.ends = [b for _, b in rs]
        # running max of ends so overlapping/reused ranges are handled
        self.maxend = []
        m = 0
        for b in self.ends:
            m = max(m, b)
            self.maxend.append(m)

    def __contains__(self, ip):
        i = bisect.bisect_right(self.starts, ip) - 1
        return i >= 0 and ip < self.maxend[i]


# ---------------------------------------------------------------------------

def main(argv):
    if len(argv) < 3 or argv[1] != "record":
        sys.stderr.write(__doc__)
        return 2
    directory = os.path.abspath(argv[2])
    mode = argv[3] if len(argv) > 3 else "fp"
    ms = int(argv[4]) if len(argv) > 4 else (1500 if mode == "fp" else 500)
    if os.path.exists(directory) and os.listdir(directory):
        sys.stderr.write("%s exists and is not empty\n" % directory)
        return 2
    why = environment_problem()
    if why:
        sys.stderr.write("cannot record: %s\n" % why)
        return 1
    rec = record(directory, os.path.join(directory, "debug"), mode, ms)
    perf_inject_reference(rec)
    for line, dt in rec.commands:
        print("(cd %s && %s)   # %.1f s" % (shlex.quote(directory), line, dt))
    print("dump: %s" % rec.dump)
    print("perf's jitted files: %d" % len(perf_jitted_files(rec)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
