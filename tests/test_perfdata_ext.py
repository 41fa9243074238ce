#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`perfgraft dump --json` of other projects' perf.data files, and of
generated ones, against perf 6.1 (issue 23 points 10 and 11).

  Ext           every perf.data under ../shared/ext (perfparser/, hotspot/,
                linux-perf-data/; qCompress()ed .zlib and .gz files are
                unpacked into a temporary directory): the records `perf
                report -D` lists (its "OFFSET [SIZE]: event: TYPE" lines)
                and dump's are the same (offset, type) multiset, and for
                every MMAP, MMAP2, COMM, FORK, EXIT and SAMPLE the pid/tid
                perf prints ("-1/0", "comm:pid/tid", "(pid:tid):(ppid:ptid)")
                is dump's `pid`/`tid`, with the sample_id trailer's as
                `sample_id_pid`/`sample_id_tid` when it says otherwise.
                hotspot's perf.data.true.v1 (PERFFILE) is one of them: perf
                reads its 84 records, so must dump.  perf 6.1 refuses a
                file-mode attr of 136 bytes: it is given a copy with the
                attrs cut to 128 (the records are untouched, so offsets
                agree); it cannot read PERF_RECORD_COMPRESSED2: those
                files are held to what their upstream tests expect.
  Generated     without ext, in both byte orders (perfdata_gen): a kernel
                MMAP (pid -1) whose trailer says pid 0, an MMAP2, COMM,
                FORK and EXIT whose trailers name other threads, and the
                same file written as version 1 (PERFFILE), file and pipe
                mode (perfdata_gen.own_tid_case); perf -D and
                dump agree on every pid/tid and count, and `perfgraft
                inject` of the version 1 file writes a version 2 file perf
                reads with the same records.

../shared/ext is found beside the repository, or at $PERFGRAFT_EXT.
Binary under test: $PERFGRAFT (default build/perfgraft); perf: $PERF
(default perf), run with --buildid-dir TMP/debug.
"""

import collections
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import perfdata_gen as G  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
PERF = os.environ.get("PERF", "perf")
# beside the repository; $PERFGRAFT_EXT names it for a checkout elsewhere
# (a git worktree)
EXT = os.environ.get("PERFGRAFT_EXT") or os.path.join(ROOT, "..", "shared", "ext")
EXT_DIRS = ("perfparser", "hotspot", "linux-perf-data")
TIMEOUT = 120

# records with a pid/tid of their own, as perf -D prints them
OWN_TID = {1: "MMAP", 3: "COMM", 4: "EXIT", 7: "FORK", 9: "SAMPLE", 10: "MMAP2"}
NAME_TYPE = {v: k for k, v in OWN_TID.items()}
CONTAINERS = (81, 83)           # COMPRESSED, COMPRESSED2: replaced by their records

# upstream expectations for the files perf 6.1 cannot read (COMPRESSED2):
# mstange/linux-perf-data tests/compressed2.rs
COMPRESSED2_EXPECT = {
    "fibo.compressed2.pipe.data": dict(records=1001, samples=501),
    "sleep.compressed2.pipe.data": dict(records=100, samples=1),
    "sleep.compressed2.data": dict(records=10, samples=1),
}


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=TIMEOUT, **kw)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def have_perf():
    try:
        return run([PERF, "--version"])[0] == 0
    except OSError:
        return False


def dump_json(path):
    rc, out, err = run([PERFGRAFT, "dump", "--json", path])
    try:
        d = json.loads(out.decode("utf-8"))
    except ValueError as e:
        raise AssertionError("perfgraft dump --json %s: exit %d, not JSON (%s)\n%s"
                             % (path, rc, e, err[-2000:]))
    d["_rc"] = rc
    d["_stderr"] = err
    return d


# ---------------------------------------------------------------------------
# the ext corpus

def ext_files(tmp):
    """[(name, path)] of every perf.data in the ext folders, packed ones
    unpacked into tmp."""
    out = []
    for d in EXT_DIRS:
        top = os.path.join(EXT, d)
        for root, _, files in sorted(os.walk(top)):
            for f in sorted(files):
                p = os.path.join(root, f)
                rel = os.path.relpath(p, EXT)
                with open(p, "rb") as fh:
                    data = fh.read()
                if f.endswith(".zlib"):     # qCompress(): u32 BE length + zlib
                    data = zlib.decompress(data[4:])
                elif f.endswith(".gz"):
                    data = gzip.decompress(data)
                else:
                    data = None
                if data is not None:
                    if data[:4] not in (b"PERF", b"2ELI"):
                        continue            # perf.data.broken.gz is a tar archive
                    p = os.path.join(tmp, rel.replace("/", "_").rsplit(".", 1)[0])
                    with open(p, "wb") as fh:
                        fh.write(data)
                else:
                    with open(p, "rb") as fh:
                        if fh.read(4) not in (b"PERF", b"2ELI"):
                            continue
                out.append((rel, p))
    return out


def file_header(data):
    """(byte order, pipe, header fields) of a perf.data of either version."""
    magic = data[:8]
    if magic == b"PERFILE2":
        bo = "<"
    elif magic == b"2ELIFREP":
        bo = ">"
    else:                               # PERFFILE: attr_size tells
        sizes = [s + 16 for s in (64, 72, 80, 96, 104)]
        hs = struct.unpack_from("<Q", data, 8)[0]
        if hs == 16 or struct.unpack_from(">Q", data, 8)[0] == 16:
            bo = "<" if hs == 16 else ">"
        else:
            bo = "<" if struct.unpack_from("<Q", data, 16)[0] in sizes else ">"
    size = struct.unpack_from(bo + "Q", data, 8)[0]
    if size == 16:
        return bo, True, None
    f = struct.unpack_from(bo + "7Q", data, 8)
    return bo, False, dict(size=f[0], attr_size=f[1], attrs=(f[2], f[3]),
                           data=(f[4], f[5]))


def top_types(data):
    """Types of the top-level records (containers not opened)."""
    bo, pipe, h = file_header(data)
    pos, end = (16, len(data)) if pipe else (h["data"][0], sum(h["data"]))
    out = []
    while pos + 8 <= end:
        t, _, sz = struct.unpack_from(bo + "IHH", data, pos)
        if sz < 8:
            break
        out.append(t)
        extra = 0
        if t == 66 and sz >= 12:
            extra = struct.unpack_from(bo + "I", data, pos + 8)[0]
        elif t == 71 and sz >= 16:
            extra = struct.unpack_from(bo + "Q", data, pos + 8)[0]
        pos += sz + extra
    return out


def attrs_for_perf61(data):
    """perf 6.1 refuses a file-mode perf_event_attr larger than its own 128
    bytes: the same file with each attr cut to 128 (the fields past it are
    newer than perf 6.1), the section rewritten in place, records untouched.
    None when nothing needs cutting."""
    bo, pipe, h = file_header(data)
    if pipe:
        return None
    off, size = h["attrs"]
    pos, entries = off, []
    for _ in range(size // h["attr_size"]):
        asz = struct.unpack_from(bo + "I", data, pos + 4)[0] or 64
        entries.append((data[pos:pos + asz], data[pos + asz:pos + asz + 16]))
        pos += asz + 16
    if all(len(a) <= 128 for a, _ in entries):
        return None
    out = bytearray(data)
    sec = b""
    for a, ids in entries:
        a = bytearray(a[:128])
        struct.pack_into(bo + "I", a, 4, len(a))
        sec += bytes(a) + ids
    out[off:off + len(sec)] = sec
    new = max(len(a) for a, _ in entries)
    new = min(new, 128) + 16
    struct.pack_into(bo + "Q", out, 16, new)
    struct.pack_into(bo + "Q", out, 32, new * len(entries))
    return bytes(out)


# ---------------------------------------------------------------------------
# perf report -D

EVENT_LINE = re.compile(r"^(0x[0-9a-f]+|0)@\S* \[(0x[0-9a-f]+)\]: event: (\d+)$")
REC_LINE = re.compile(r"^.*?(0x[0-9a-f]+|0) \[(0x[0-9a-f]+)\]: PERF_RECORD_(\w+)(.*)$")
TID_RE = {
    "MMAP": re.compile(r"^ (-?\d+)/(-?\d+): \["),
    "MMAP2": re.compile(r"^ (-?\d+)/(-?\d+): \["),
    "COMM": re.compile(r"^(?: exec)?: .*:(-?\d+)/(-?\d+)$"),
    "FORK": re.compile(r"^\((-?\d+):(-?\d+)\):\((-?\d+):(-?\d+)\)"),
    "EXIT": re.compile(r"^\((-?\d+):(-?\d+)\):\((-?\d+):(-?\d+)\)"),
    "SAMPLE": re.compile(r"^\([^)]*\): (-?\d+)/(-?\d+): "),
}


class PerfView:
    """What perf report -D says about a file: every record as (offset,
    type) and, for OWN_TID's types, (offset, type, pid, tid)."""

    def __init__(self, text, pipe):
        base = 16 if pipe else 0        # a pipe's offsets start after its header
        self.records = collections.Counter()
        self.tids = collections.Counter()
        for line in text.splitlines():
            m = EVENT_LINE.match(line)
            if m:
                t = int(m.group(3))
                if t not in CONTAINERS:
                    self.records[(int(m.group(1), 16) + base, t)] += 1
                continue
            m = REC_LINE.match(line)
            if m and m.group(3) in TID_RE:
                name = m.group(3)
                g = TID_RE[name].match(m.group(4))
                if not g:
                    raise AssertionError("perf -D line not understood: %r" % line)
                self.tids[(int(m.group(1), 16) + base, NAME_TYPE[name],
                           int(g.group(1)), int(g.group(2)))] += 1


def read(path):
    with open(path, "rb") as f:
        return f.read()


def perf_view(tmp, path, data):
    bo, pipe, _ = file_header(data)
    cut = attrs_for_perf61(data)
    if cut is not None:
        path = os.path.join(tmp, os.path.basename(path) + ".attr128")
        with open(path, "wb") as f:
            f.write(cut)
    rc, out, err = run([PERF, "--buildid-dir", os.path.join(tmp, "debug"), "report", "-D",
                        "-i", path], stdin=subprocess.DEVNULL)
    if rc != 0:
        raise AssertionError("perf report -D -i %s: exit %d: %s" % (path, rc, err[-1500:]))
    return PerfView(out.decode("utf-8", "replace"), pipe)


def dump_view(d):
    records = collections.Counter((r["offset"], r["type"]) for r in d["records"])
    tids = collections.Counter((r["offset"], r["type"], r["pid"], r["tid"])
                               for r in d["records"] if r["type"] in OWN_TID and "pid" in r)
    return records, tids


def trailer_of(r):
    """The sample_id trailer's pid/tid dump gives for record r."""
    return (r.get("sample_id_pid", r.get("pid")), r.get("sample_id_tid", r.get("tid")))


class Compare(unittest.TestCase):
    maxDiff = 4000

    def compare(self, tmp, name, path, sample_tid_swapped=False):
        """sample_tid_swapped: perf prints each SAMPLE's pid/tid as tid/pid
        (a big-endian pipe: perf gives the evsels of in-band attrs no
        needs_swap, so evsel__parse_sample() does not put the two u32
        back after the u64 swap; the file-mode copy of the same records
        is right)."""
        with open(path, "rb") as f:
            data = f.read()
        d = dump_json(path)
        self.assertEqual(d["_rc"], 0, "%s: %s" % (name, d.get("error")))
        self.assertIsNone(d["error"])
        types = top_types(data)
        if 83 in types:
            # perf 6.1 predates COMPRESSED2: upstream's expectations
            want = COMPRESSED2_EXPECT[os.path.basename(name)]
            self.assertGreaterEqual(d["summary"]["records"], want["records"], name)
            self.assertGreaterEqual(d["summary"]["by_name"].get("SAMPLE", 0), want["samples"],
                                    name)
            return d, None
        pv = perf_view(tmp, path, data)
        if sample_tid_swapped:
            pv.tids = collections.Counter({((o, t, tid, pid) if t == 9 else (o, t, pid, tid)): n
                                           for (o, t, pid, tid), n in pv.tids.items()})
        records, tids = dump_view(d)
        self.assertEqual(sum(pv.records.values()), sum(records.values()), name)
        self.assertEqual(pv.records - records, collections.Counter(), "%s: only perf" % name)
        self.assertEqual(records - pv.records, collections.Counter(), "%s: only dump" % name)
        self.assertEqual(pv.tids - tids, collections.Counter(), "%s: pid/tid only perf" % name)
        self.assertEqual(tids - pv.tids, collections.Counter(), "%s: pid/tid only dump" % name)
        n_own = sum(1 for r in d["records"] if r["type"] in OWN_TID)
        self.assertEqual(sum(tids.values()), n_own, "%s: a record without pid/tid" % name)
        return d, pv


@unittest.skipUnless(os.path.isdir(EXT), "no ../shared/ext (other projects' test inputs)")
@unittest.skipUnless(have_perf(), "perf not installed")
class Ext(Compare):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pg-pdext-")
        cls.files = ext_files(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_every_file(self):
        """records and per-record pid/tid as perf report -D gives them"""
        names = [n for n, _ in self.files]
        self.assertIn("hotspot/perf.data.true.v1", names)
        differ = 0
        for name, path in self.files:
            with self.subTest(file=name):
                d, _ = self.compare(self.tmp, name, path)
                for r in d["records"]:
                    if "sample_id_pid" in r:
                        differ += 1
                        self.assertNotEqual((r["pid"], r["tid"]), trailer_of(r))
        # the kernel maps perf synthesizes have 0/0 in their trailers
        self.assertGreater(differ, 1000)

    def test_v1(self):
        """hotspot's PERFFILE: perf's 84 records (80 MMAP, 2 COMM, 2 EXIT)"""
        path = dict(self.files)["hotspot/perf.data.true.v1"]
        d = dump_json(path)
        self.assertEqual(d["header"]["version"], 1)
        self.assertEqual(d["summary"]["records"], 84)
        self.assertEqual(d["summary"]["by_name"], {"MMAP": 80, "COMM": 2, "EXIT": 2})
        k = d["records"][0]
        self.assertEqual((k["pid"], k["tid"], k["sample_id_pid"], k["sample_id_tid"]),
                         (-1, 0, 0, 0))
        # inject writes it as version 2; perf reads the same 84 records
        out = os.path.join(self.tmp, "v1.jit.data")
        rc, _, err = run([PERFGRAFT, "inject", "-i", path, "-o", out], cwd=self.tmp)
        self.assertEqual(rc, 0, err)
        self.assertEqual(read(out)[:8], b"PERFILE2")
        pin, pout = perf_view(self.tmp, path, read(path)), perf_view(self.tmp, out, read(out))
        self.assertEqual(sum(pout.records.values()), 84)
        strip = lambda c: sorted((k[1:], n) for k, n in c.items())  # noqa: E731
        self.assertEqual(strip(pin.tids), strip(pout.tids))


# ---------------------------------------------------------------------------
# generated

class Generated(Compare):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pg-pdgen-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def check_dump(self, path, want, v1):
        d = dump_json(path)
        self.assertEqual(d["_rc"], 0, d.get("error"))
        got = [(r["type"], r["pid"], r["tid"]) + trailer_of(r) for r in d["records"]
               if r["type"] != G.PERF_RECORD_HEADER_ATTR]
        self.assertEqual(got, want)
        self.assertEqual(d["header"]["version"], 1 if v1 else 2)
        for r in d["records"]:
            # the trailer's are named only when they say otherwise
            if "sample_id_pid" in r:
                self.assertNotEqual((r["pid"], r["tid"]), trailer_of(r))
        rc, out, err = run([PERFGRAFT, "dump", path])
        self.assertEqual(rc, 0, err)
        line = [x for x in out.decode().splitlines() if " MMAP " in x][0]
        self.assertIn(" pid -1 tid 0 (sample_id pid 0 tid 0) ", line)
        return d

    def test_pid_tid(self):
        """record pid/tid vs trailer pid/tid, both byte orders, v2 and v1"""
        for v1, bo, pipe in ((v, b, p) for v in (False, True) for b in ("<", ">")
                             for p in (False, True)):
            with self.subTest(v1=v1, bo=bo, pipe=pipe):
                path = os.path.join(self.tmp, "g%s%s%s.data" % (
                    "1" if v1 else "2", "be" if bo == ">" else "le", "p" if pipe else ""))
                want = G.own_tid_case(path, bo, v1, pipe)
                self.check_dump(path, want, v1)
                if not have_perf():
                    continue
                if v1 and pipe and bo == ">":
                    # perf's try_all_pipe_abis() compares the swapped
                    # header size with itself, not with 16: it never
                    # takes a big-endian version 1 pipe (perf's defect;
                    # the header says 16 plainly, dump reads it)
                    rc, _, err = run([PERF, "--buildid-dir", os.path.join(self.tmp, "debug"),
                                      "report", "-D", "-i", path],
                                     stdin=subprocess.DEVNULL)
                    self.assertNotEqual(rc, 0)
                    self.assertIn("incompatible file format", err)
                    continue
                self.compare(self.tmp, path, path, sample_tid_swapped=pipe and bo == ">")

    def test_v1_errors(self):
        """a v1 header whose attr_size is no ABI size in either byte order"""
        path = os.path.join(self.tmp, "bad.data")
        G.own_tid_case(path, "<", True)
        with open(path, "r+b") as f:
            f.seek(16)
            f.write(struct.pack("<Q", 89))
        d = dump_json(path)
        self.assertEqual(d["_rc"], 1)
        self.assertRegex(d["error"], r"^%s: offset 16: perf.data version 1 with attr_size 89"
                         % re.escape(path))
        if have_perf():
            rc, _, _ = run([PERF, "--buildid-dir", os.path.join(self.tmp, "debug"), "report",
                            "-D", "-i", path], stdin=subprocess.DEVNULL)
            self.assertNotEqual(rc, 0)

    @unittest.skipUnless(have_perf(), "perf not installed")
    def test_v1_inject(self):
        """inject of a v1 file writes a version 2 file perf reads alike"""
        for bo in ("<", ">"):
            with self.subTest(bo=bo):
                src = os.path.join(self.tmp, "v1%s.data" % ("be" if bo == ">" else "le"))
                G.own_tid_case(src, bo, True)
                out = src + ".jit"
                rc, _, err = run([PERFGRAFT, "inject", "-i", src, "-o", out],
                                 cwd=self.tmp)
                self.assertEqual(rc, 0, err)
                with open(out, "rb") as f:
                    head = f.read(8)
                self.assertEqual(head, b"PERFILE2" if bo == "<" else b"2ELIFREP")
                pin = perf_view(self.tmp, src, read(src))
                pout = perf_view(self.tmp, out, read(out))
                strip = lambda c: sorted((k[1:], n) for k, n in c.items())  # noqa: E731
                self.assertEqual(strip(pin.tids), strip(pout.tids))
                self.assertEqual(sorted(t for _, t in pin.records.elements()),
                                 sorted(t for _, t in pout.records.elements()))


if __name__ == "__main__":
    unittest.main()
