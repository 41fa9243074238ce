#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""perf.data handling of `perfgraft inject` on synthesized files
(tests/perfdata_gen.py), checked with `perfgraft dump --json`, an
independent reader (perfdata_gen.parse) and real perf 6.1.

Cases (perfdata_gen.STANDARD_CASES): file and pipe mode, both byte orders,
attr.size 64/112/120/128/136/144, COMPRESSED records (one frame, and two
frames with a record spanning them), an unknown record type (200), an
AUXTRACE record with payload, HEADER_TRACING_DATA with its blob, unknown
feature bit 40, two attrs with IDENTIFIER and ids arrays.

  PassThrough   inject exits 0; every input record comes out unchanged
                (bytes compared) and in order, except the jit-PID.dump
                marker (dropped) and COMPRESSED (replaced by its records);
                the injected MMAP2s are one per LOAD; same byte order and
                mode; attrs raw-equal; features copied (COMPRESSED dropped);
                BUILD_ID = the input's entries + one per image, with the
                image's real build-id; tracing/AUXTRACE payloads identical;
                `dump --json` of the input reports what was written.
  PerfReads     perf report --sort sym and perf script -F ip,sym resolve
                every sample placed in JIT code to its JIT function, on
                every output perf 6.1 can read (attr.size <= 128 in file
                mode, both byte orders, pipes); for attr.size 136/144 perf's
                own rejection is asserted on the INPUT (perf's limit, not
                ours), and for records perf 6.1 cannot process (type 200,
                AUXTRACE without AUXTRACE_INFO) the same failure on input.
  Ordering      each injected MMAP2 (time t) sits after every earlier-timed
                input record and before the first later one; FINISHED_ROUNDs
                all kept; perf reports no out-of-order events.
  Damaged       truncated at several points, record size < 8, attrs/data
                section outside the file, bad magic, corrupt zstd frame:
                exit 1, "perfgraft: FILE: offset N: ...", nothing left
                behind; a truncated data tail is a warning, complete records
                kept.
  Dumps         a missing jitdump, or attrs without use_clockid: exit 0, a
                warning naming the dump, everything else still there.
  Streams       pipe-mode input read from a real pipe (-i -) and written to
                stdout (-o -).
  Bounds        a COMPRESSED record decompresses to at most the COMPRESSED
                feature's mmap_len (8 MiB without one): a zstd "bomb" of RLE
                blocks (65 KB -> 2.1 GB) is an error naming the file and the
                record's offset, with bounded RSS and output; the bound is
                exact; memory stays flat when a record legitimately
                decompresses to hundreds of MB; in-band attrs are capped.

Binary under test: $PERFGRAFT (default build/perfgraft); perf: $PERF
(default perf), always run with --buildid-dir TMP/debug.  Files live in
tempfile directories (PERFGRAFT_KEEP_TMP=1 keeps them, the path is printed).
"""

import collections
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import perfdata_gen as G  # noqa: E402
import jitdump_oracle as O  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
PERF = os.environ.get("PERF", "perf")
KEEP_TMP = os.environ.get("PERFGRAFT_KEEP_TMP") == "1"
TIMEOUT = 120

PERF_ABI_MSG = "file uses a more recent and unsupported ABI (%d bytes extra)"
PERF_INCOMPATIBLE = "incompatible file format (rerun with -v to learn more)"


def map_times(funcs):
    """address -> when its injected MMAP2 starts: the LOAD's since (a
    range no earlier code held starts at the first LOAD)."""
    since = O.since_times([("load", t, addr, size, i)
                           for i, (_, addr, size, t) in enumerate(funcs)])
    return {f[1]: t for f, t in zip(funcs, since)}


def info(msg):
    sys.stderr.write("info: %s\n" % msg)
    sys.stderr.flush()


def run(cmd, cwd=None, input=None, stdin=None):
    p = subprocess.run(cmd, cwd=cwd, input=input, stdin=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def shell(cmd):
    return " ".join(cmd)


_problems = {}


def perfgraft_problem():
    if "pg" not in _problems:
        if not os.path.isfile(PERFGRAFT):
            _problems["pg"] = "%s not built (ninja -C build)" % PERFGRAFT
        else:
            rc, out, err = run([PERFGRAFT, "dump", "--help"])
            text = out.decode("utf-8", "replace") + err
            _problems["pg"] = (None if "perf.data" in text
                               else "perfgraft dump does not read perf.data yet")
    return _problems["pg"]


def zstd_problem():
    return None if G.zstd_tool() else "the zstd command line tool is missing (apt-get install zstd)"


def perf_problem():
    if "perf" not in _problems:
        if shutil.which(PERF) is None:
            _problems["perf"] = "perf (%s) not found" % PERF
        else:
            rc, out, err = run([PERF, "--version"])
            v = out.decode().strip()
            _problems["perf"] = (None if re.search(r"\b6\.1\.", v)
                                 else "these checks are written for perf 6.1, found %r" % v)
    return _problems["perf"]


def setUpModule():
    why = perfgraft_problem() or zstd_problem()
    if why:
        raise unittest.SkipTest(why)


# ---------------------------------------------------------------------------
# helpers

def dump_json(path):
    rc, out, err = run([PERFGRAFT, "dump", "--json", path])
    try:
        d = json.loads(out.decode("utf-8"))
    except ValueError as e:
        raise AssertionError("perfgraft dump --json %s: exit %d, not JSON (%s)\nstderr: %s"
                             % (path, rc, e, err[-2000:]))
    d["_rc"] = rc
    return d


class Injected:
    """One `perfgraft inject` run and what came out of it."""

    def __init__(self, case, out, rc, stdout, stderr, cmd, image_dir):
        self.case = case
        self.out = out
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.cmd = cmd
        self.image_dir = image_dir
        self._json = None
        self._bytes = None
        self._parsed = None

    @property
    def json(self):
        if self._json is None:
            self._json = dump_json(self.out)
        return self._json

    @property
    def data(self):
        if self._bytes is None:
            with open(self.out, "rb") as f:
                self._bytes = f.read()
        return self._bytes

    @property
    def parsed(self):
        if self._parsed is None:
            self._parsed = G.parse(self.data)
        return self._parsed

    def images(self):
        d = self.image_dir
        return sorted(os.path.join(d, n) for n in os.listdir(d)) if os.path.isdir(d) else []

    def is_injected(self, r):
        """An MMAP2 of an image, or (pipe) a HEADER_BUILD_ID naming one."""
        prefix = os.path.realpath(self.image_dir) + "/"
        if r["type"] == G.PERF_RECORD_MMAP2:
            return r.get("filename", "").startswith(prefix)
        if r["type"] == G.PERF_RECORD_HEADER_BUILD_ID:
            name = record_bytes(self.data, r)[36:].split(b"\0")[0].decode("utf-8", "replace")
            return name.startswith(prefix)
        return False

    def where(self):
        return "%s\n  stderr: %s" % (shell(self.cmd), self.stderr.strip()[-1500:])


def inject(case, out=None, args=(), cwd=None):
    out = out or os.path.join(os.path.dirname(case.path), "out.data")
    # -v, not -q: the tests look at warnings, and -q prints errors only
    cmd = [PERFGRAFT, "inject", "-v", "-i", case.path, "-o", out] + list(args)
    rc, so, se = run(cmd, cwd=cwd)
    return Injected(case, out, rc, so, se, cmd, out + ".d")


def record_bytes(data, r):
    return data[r["offset"]:r["offset"] + r["size"]]


def extra_bytes(data, r):
    o = r["offset"] + r["size"]
    return data[o:o + r.get("extra_size", 0)]


def rec_str(r):
    if isinstance(r, dict):
        return "%s(type %d, size %d, @%s)" % (r.get("name"), r["type"], r["size"], r.get("offset"))
    return "%s(type %d, size %d, @%s)" % (r.name, r.type, r.size, r.offset)


def elf_build_id(path):
    """The NT_GNU_BUILD_ID note of an ELF64 file (little-endian)."""
    with open(path, "rb") as f:
        d = f.read()
    if d[:4] != b"\x7fELF" or d[4] != 2:
        return None
    bo = "<" if d[5] == 1 else ">"
    shoff, = struct.unpack_from(bo + "Q", d, 0x28)
    shentsize, shnum = struct.unpack_from(bo + "HH", d, 0x3A)
    for i in range(shnum):
        sh = shoff + i * shentsize
        stype, = struct.unpack_from(bo + "I", d, sh + 4)
        if stype != 7:      # SHT_NOTE
            continue
        off, size = struct.unpack_from(bo + "QQ", d, sh + 0x18)
        p = off
        while p + 12 <= off + size:
            nsz, dsz, ntype = struct.unpack_from(bo + "III", d, p)
            name = d[p + 12:p + 12 + nsz]
            desc_off = p + 12 + G.align(nsz, 4)
            if ntype == 3 and name.rstrip(b"\0") == b"GNU":
                return d[desc_off:desc_off + dsz]
            p = desc_off + G.align(dsz, 4)
    return None


def build_id_entries(body, bo):
    """[(misc, pid, build_id bytes, size byte, filename)] of a BUILD_ID
    feature body (or of HEADER_BUILD_ID records joined)."""
    out = []
    p = 0
    while p + 36 <= len(body):
        _, misc, size, pid = struct.unpack_from(bo + "IHHi", body, p)
        bid = body[p + 12:p + 32]
        bsz = body[p + 32]
        name = body[p + 36:p + size].split(b"\0")[0].decode("utf-8", "replace")
        out.append((misc, pid, bid, bsz, name))
        if size < 36:
            break
        p += size
    return out


def perf(tmp, sub, *args, cwd=None):
    cmd = [PERF, "--buildid-dir", os.path.join(tmp, "debug"), sub] + list(args)
    rc, out, err = run(cmd, cwd=cwd)
    return rc, out.decode("utf-8", "replace"), err, cmd


REPORT_LINE = re.compile(r"^\s+[\d.]+%\s+(\d+)\s+\[(.)\]\s+(.*?)\s*$")


def report_counts(text):
    """perf report -n --sort sym: {symbol: samples}, summed over events."""
    c = collections.Counter()
    for line in text.splitlines():
        m = REPORT_LINE.match(line)
        if m:
            c[m.group(3)] += int(m.group(1))
    return c


def script_ip_sym(text):
    """perf script -F ip,sym -G: [(ip, sym)]."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^\s*([0-9a-f]+)\s+(.*?)\s*$", line)
        if m:
            out.append((int(m.group(1), 16), m.group(2)))
    return out


class TmpDirCase(unittest.TestCase):
    """A class-wide temporary directory."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="perfgraft-perfdata.")
        if KEEP_TMP:
            info("keeping %s" % cls.tmp)

    @classmethod
    def tearDownClass(cls):
        if not KEEP_TMP:
            shutil.rmtree(cls.tmp, ignore_errors=True)


# ---------------------------------------------------------------------------
# the standard cases, generated and injected once

class _Standard(TmpDirCase):
    cases = None
    runs = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cases = {}
        cls.runs = {}
        cls.refused = {}
        for name, kw in G.STANDARD_CASES.items():
            c = G.make_case(os.path.join(cls.tmp, name), name, **kw)
            if not c.jit_ok and kw.get("jitdump", "write") == "write":
                # its only dump cannot be used (attr.size 64 has no clockid):
                # nothing injected is an error (test_unusable_dump_refused);
                # the rest of the case is checked without the dump's marker
                cls.refused[name] = (c, inject(c))
                c = G.make_case(os.path.join(cls.tmp, name + "-nojit"), name,
                                **dict(kw, jitdump="none"))
            cls.cases[name] = c
            cls.runs[name] = inject(c)

    def each(self, pred=lambda c: True):
        for name, c in self.cases.items():
            if pred(c):
                yield name, c, self.runs[name]

    def assertInjectOK(self, r):
        self.assertEqual(r.rc, 0, "inject failed (exit %d): %s" % (r.rc, r.where()))
        self.assertTrue(os.path.isfile(r.out), "no output: %s" % r.where())


class PassThrough(_Standard):
    def test_unusable_dump_refused(self):
        """A standard case whose dump cannot be used: exit 1, the one
        error saying why (re-record with -k mono), no output."""
        for name, (c, r) in self.refused.items():
            with self.subTest(case=name):
                self.assertEqual(r.rc, 1, r.where())
                errs = [ln for ln in r.stderr.splitlines()
                        if ln.startswith("perfgraft: nothing injected: ")]
                self.assertEqual(len(errs), 1, r.where())
                self.assertIn("perf record -k mono", errs[0])
                self.assertFalse(os.path.exists(r.out))

    def test_exit_and_warnings(self):
        for name, c, r in self.each():
            with self.subTest(case=name):
                self.assertInjectOK(r)
                warns = [l for l in r.stderr.splitlines() if "warning" in l]
                # attr.size 64 (no clockid field: the dump's clock cannot
                # match) is checked without its dump: test_unusable_dump_refused
                self.assertEqual(warns, [], "unexpected warnings: %s" % r.where())

    def test_records_passed_through(self):
        for name, c, r in self.each():
            with self.subTest(case=name):
                self.assertInjectOK(r)
                d = r.json
                self.assertIsNone(d.get("error"), "dump error on the output: %s" % d.get("error"))
                out = [x for x in d["records"] if not r.is_injected(x)]
                want = c.builder.expected_passthrough()
                got_sig = [(x["type"], x["size"], x["misc"]) for x in out]
                want_sig = [(x.type, x.size, x.misc) for x in want]
                if got_sig != want_sig:
                    self.fail("records differ (type, size, misc), first at %d:\n  want %s\n  got  %s\n%s"
                              % (first_diff(want_sig, got_sig),
                                 [rec_str(x) for x in want][:40],
                                 [rec_str(x) for x in out][:40], r.where()))
                for k, (w, g) in enumerate(zip(want, out)):
                    self.assertFalse(g.get("compressed"), "record %d %s came out flagged compressed"
                                     % (k, rec_str(g)))
                    self.assertEqual(record_bytes(r.data, g), w.data,
                                     "record %d %s: bytes differ" % (k, rec_str(g)))
                    self.assertEqual(g.get("extra_size", 0), len(w.extra),
                                     "record %d %s: extra_size" % (k, rec_str(g)))
                    self.assertEqual(extra_bytes(r.data, g), w.extra,
                                     "record %d %s: payload after it differs" % (k, rec_str(g)))
                # the independent reader sees the same stream
                self.assertEqual([(x["type"], x["size"]) for x in r.parsed.records],
                                 [(x["type"], x["size"]) for x in d["records"]],
                                 "perfdata_gen.parse and dump --json disagree on the output")
                self.assertNotIn(G.PERF_RECORD_COMPRESSED, [x["type"] for x in d["records"]])
                self.assertEqual(d["summary"]["records"], len(d["records"]))
                by = collections.Counter(x["name"] for x in d["records"])
                summ = collections.Counter()
                for k, n in d["summary"]["by_name"].items():
                    # unknown types may be keyed UNKNOWN_<type> in the summary
                    summ["UNKNOWN" if k.startswith("UNKNOWN") else k] += n
                self.assertEqual(dict(summ), dict(by), "summary.by_name")

    def test_payloads_identical(self):
        for name, c, r in self.each(lambda c: c.tracing or c.extras):
            with self.subTest(case=name):
                self.assertInjectOK(r)
                want = {G.PERF_RECORD_HEADER_TRACING_DATA: G.tracing_blob(c.bo)}
                if c.extras:
                    want[G.PERF_RECORD_AUXTRACE] = G.AUX_PAYLOAD
                for t, blob in want.items():
                    got = [x for x in r.json["records"] if x["type"] == t]
                    self.assertEqual(len(got), 1, "%d records of type %d" % (len(got), t))
                    padded = blob + b"\0" * ((-len(blob)) % 8) if t == 66 else blob
                    self.assertEqual(extra_bytes(r.data, got[0]), padded,
                                     "payload of record type %d differs" % t)
                if c.extras:
                    u = [x for x in r.json["records"] if x["type"] == 200]
                    self.assertEqual(len(u), 1)
                    self.assertEqual(record_bytes(r.data, u[0])[8:], G.UNKNOWN_PAYLOAD)
                    self.assertEqual(u[0]["misc"], 0x1234)

    def test_mode_byte_order_attrs(self):
        for name, c, r in self.each():
            with self.subTest(case=name):
                self.assertInjectOK(r)
                d = r.json
                self.assertEqual(d["format"], "perf.data")
                self.assertEqual(d["mode"], "pipe" if c.pipe else "file")
                self.assertEqual(d["byte_order"], "big" if c.bo == ">" else "little")
                self.assertEqual(r.data[:8], G.MAGIC_BE if c.bo == ">" else G.MAGIC)
                want = [a.raw(c.bo).hex() for a in c.attrs]
                self.assertEqual([a["raw_hex"] for a in d["attrs"]], want, "attrs not raw-equal")
                self.assertEqual([a["ids"] for a in d["attrs"]], [a.ids for a in c.attrs])
                if not c.pipe:
                    self.assertEqual([a["raw"] for a in r.parsed.attrs],
                                     [a.raw(c.bo) for a in c.attrs])
                    self.assertEqual(r.parsed.header["attr_size"], c.attr_size + 16)

    def test_attr_fields_decoded(self):
        """dump --json decodes the attrs as perf does (flags in perf's bit
        numbering; a big-endian file's bit-field word is MSB-first)."""
        for name, c, r in self.each():
            with self.subTest(case=name):
                d = dump_json(c.path)
                for got, a in zip(d["attrs"], c.attrs):
                    want = a.json(c.bo)
                    for k in ("type", "size", "config", "sample_type", "flags", "sample_id_all",
                              "use_clockid", "clockid", "ids"):
                        self.assertEqual(got.get(k), want[k], "attr field %s of %s" % (k, c.path))

    def test_features_copied(self):
        for name, c, r in self.each(lambda c: not c.pipe):
            with self.subTest(case=name):
                self.assertInjectOK(r)
                fin = c.builder.features
                got = {f["bit"]: f for f in r.json["features"]}
                want_bits = sorted((set(fin) - {G.FEAT_COMPRESSED}) | {G.FEAT_BUILD_ID})
                self.assertEqual(sorted(got), want_bits, "feature bits")
                for bit in want_bits:
                    if bit == G.FEAT_BUILD_ID:
                        continue
                    self.assertEqual(got[bit]["sha1"], hashlib.sha1(fin[bit]).hexdigest(),
                                     "feature %d body differs" % bit)
                    self.assertEqual(got[bit]["size"], len(fin[bit]))
                    self.assertEqual(r.parsed.features[bit], fin[bit])
                self.assertEqual(got[G.FEAT_BUILD_ID]["name"], "BUILD_ID")

    def test_build_ids(self):
        for name, c, r in self.each():
            with self.subTest(case=name):
                self.assertInjectOK(r)
                fin = c.builder.features.get(G.FEAT_BUILD_ID, b"")
                if c.pipe:
                    body = b"".join(record_bytes(r.data, x) for x in r.json["records"]
                                    if x["type"] == G.PERF_RECORD_HEADER_BUILD_ID)
                    fin = b"".join(x.data for x in c.builder.records
                                   if x.type == G.PERF_RECORD_HEADER_BUILD_ID)
                else:
                    body = r.parsed.features[G.FEAT_BUILD_ID]
                ents_in = build_id_entries(fin, c.bo)
                ents = build_id_entries(body, c.bo)
                self.assertEqual(ents[:len(ents_in)], ents_in, "input build-id entries not kept first")
                new = ents[len(ents_in):]
                images = r.images() if c.jit_ok else []
                self.assertEqual(sorted(e[4] for e in new),
                                 sorted(os.path.realpath(p) for p in images),
                                 "one build-id entry per image")
                if c.jit_ok:
                    self.assertTrue(images, "no images written")
                for misc, pid, bid, bsz, fn in new:
                    real = elf_build_id(fn)
                    self.assertIsNotNone(real, "%s has no build-id note" % fn)
                    self.assertEqual(bid[:bsz], real, "build-id of %s" % fn)
                    self.assertEqual(pid, -1)
                    self.assertEqual(misc & 7, G.MISC_USER)

    def test_injected_mmap2(self):
        for name, c, r in self.each():
            with self.subTest(case=name):
                self.assertInjectOK(r)
                inj = [x for x in r.json["records"] if x["type"] == G.PERF_RECORD_MMAP2
                       and r.is_injected(x)]
                if not c.jit_ok:
                    self.assertEqual(inj, [])
                    continue
                sid_all = c.attrs[0].sample_id_all
                since = map_times(c.funcs)
                want = sorted((since[addr] if sid_all else None, addr) for _, addr, _, _ in c.funcs)
                self.assertEqual(sorted((x.get("time"), x["start"]) for x in inj), want,
                                 "one MMAP2 per LOAD at its since and address")
                for x in inj:
                    fn = [f for f in c.funcs if f[1] == x["start"]][0]
                    self.assertGreaterEqual(x["len"], fn[2])
                    pid, tid, start, ln, pgoff, fname = G.decode_mmap(
                        dict(type=x["type"], data=record_bytes(r.data, x)), c.bo)
                    self.assertEqual((pid, start, ln, pgoff, fname),
                                     (G.PID, x["start"], x["len"], x["pgoff"], x["filename"]))
                    self.assertTrue(os.path.isfile(fname))
                    self.assertEqual(x["prot"] & 5, 5)
                    self.assertEqual(x.get("attr"), 0 if sid_all else None)

    def test_dump_of_input(self):
        """dump --json of the generated input reports what was written."""
        for name, c, r in self.each():
            with self.subTest(case=name):
                d = dump_json(c.path)
                self.assertIsNone(d.get("error"))
                self.assertEqual(d["_rc"], 0)
                want = [x for x in c.builder.records if x.role != "container"]
                self.assertEqual(len(d["records"]), len(want),
                                 "records: want %s got %s" % ([rec_str(x) for x in want],
                                                              [rec_str(x) for x in d["records"]]))
                for w, g in zip(want, d["records"]):
                    e = w.expect_json()
                    e.pop("ip", None)
                    e.pop("feat_id", None)
                    for k, v in e.items():
                        self.assertEqual(g.get(k), v, "%s: field %s (%s)" % (rec_str(w), k, g))
                    if not w.compressed:
                        self.assertFalse(g.get("compressed", False))
                if not c.pipe:
                    got = {f["bit"]: f for f in d["features"]}
                    self.assertEqual(sorted(got), sorted(c.builder.features))
                    for bit, body in c.builder.features.items():
                        self.assertEqual(got[bit]["sha1"], hashlib.sha1(body).hexdigest())
                        self.assertEqual(got[bit]["name"], G.FEATURE_NAMES.get(bit, "UNKNOWN"))


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


# ---------------------------------------------------------------------------
# perf 6.1 reads the outputs

class PerfReads(_Standard):
    @classmethod
    def setUpClass(cls):
        why = perf_problem()
        if why:
            raise unittest.SkipTest(why)
        super().setUpClass()

    def test_perf_accepts_inputs(self):
        """Self-check of the generator: perf reads every input it can."""
        for name, c, r in self.each(lambda c: c.perf_ok):
            with self.subTest(case=name):
                rc, out, err, cmd = perf(self.tmp, "report", "-i", c.path, "--stdio", "-n", "--no-children",
                                         "--sort", "sym", "-g", "none")
                self.assertEqual(rc, 0, "%s: %s" % (shell(cmd), err[-800:]))
                self.assertGreater(sum(report_counts(out).values()), 0)

    def test_report_resolves_jit(self):
        for name, c, r in self.each(lambda c: c.perf_ok):
            with self.subTest(case=name):
                self.assertInjectOK(r)
                rc, out, err, cmd = perf(self.tmp, "report", "-i", r.out, "--stdio",
                                         "--no-children", "--sort", "sym", "-n", "-g", "none")
                self.assertEqual(rc, 0, "%s: %s" % (shell(cmd), err[-800:]))
                counts = report_counts(out)
                want = collections.Counter(x.jit_sym for x in c.builder.records
                                           if x.type == G.PERF_RECORD_SAMPLE and x.jit_sym)
                if not c.jit_ok:
                    self.assertFalse(set(want) & set(counts))
                    continue
                got = {k: counts.get(k, 0) for k in want}
                self.assertEqual(got, dict(want), "samples per JIT symbol (perf report):\n%s\n%s"
                                 % (out[-2500:], r.where()))
                self.assertNotIn("out of order", err)

    def test_script_resolves_jit(self):
        for name, c, r in self.each(lambda c: c.perf_ok and c.jit_ok):
            with self.subTest(case=name):
                self.assertInjectOK(r)
                rc, out, err, cmd = perf(self.tmp, "script", "-i", r.out, "-F", "ip,sym", "-G")
                self.assertEqual(rc, 0, "%s: %s" % (shell(cmd), err[-800:]))
                got = script_ip_sym(out)
                want = [(x.fields["ip"], x.jit_sym or None) for x in c.builder.records
                        if x.type == G.PERF_RECORD_SAMPLE]
                self.assertEqual(len(got), len(want), "sample lines:\n%s" % out)
                for (gip, gsym), (wip, wsym) in zip(got, want):
                    self.assertEqual(gip, wip)
                    if wsym:
                        self.assertEqual(gsym, wsym, "ip %#x:\n%s" % (gip, out))

    def test_script_mmap_events_in_time_order(self):
        for name, c, r in self.each(lambda c: c.perf_ok and c.jit_ok):
            with self.subTest(case=name):
                rc, out, err, cmd = perf(self.tmp, "script", "-i", r.out, "-F", "time,event,ip,sym",
                                         "-G", "--show-mmap-events")
                self.assertEqual(rc, 0, "%s: %s" % (shell(cmd), err[-800:]))
                self.assertNotIn("out of order", err)
                seen_map = set()
                for line in out.splitlines():
                    m = re.search(r"PERF_RECORD_MMAP2 .*\[(0x[0-9a-f]+)\(", line)
                    if m and r.image_dir.split("/")[-1] in line:
                        seen_map.add(int(m.group(1), 16))
                        continue
                    m = re.match(r"^\s*[\d.]+:\s+\S+:\s+([0-9a-f]+)\s+(.*)$", line)
                    if m:
                        ip = int(m.group(1), 16)
                        for fname, addr, size, _ in c.funcs:
                            if addr <= ip < addr + size:
                                self.assertIn(addr, seen_map,
                                              "sample in %s printed before its MMAP2:\n%s"
                                              % (fname, out))
                self.assertEqual(len(seen_map), len(c.funcs))

    def test_abi_limit_is_perfs(self):
        """perf 6.1 rejects attr.size > 128 in file mode: assert its exact
        message on the INPUT, and that the output is rejected the same way."""
        for name, c, r in self.each(lambda c: not c.pipe and c.attr_size > 128):
            with self.subTest(case=name):
                extra = c.attr_size - 128
                for path in (c.path, r.out):
                    rc, out, err, cmd = perf(self.tmp, "report", "-i", path, "--stdio")
                    self.assertNotEqual(rc, 0)
                    self.assertIn(PERF_INCOMPATIBLE, err, shell(cmd))
                    rc, out, err, cmd = perf(self.tmp, "report", "-v", "-i", path, "--stdio")
                    self.assertIn(PERF_ABI_MSG % extra, err, shell(cmd))

    def test_unprocessable_records_are_perfs(self):
        """perf 6.1 stops at a record type >= 83 and at AUXTRACE without
        AUXTRACE_INFO: the input fails exactly like the output."""
        for name, c, r in self.each(lambda c: c.extras and c.attr_size <= 128):
            with self.subTest(case=name):
                self.assertInjectOK(r)
                res = []
                for path in (c.path, r.out):
                    # perf report exits 0 after "failed to process type"; on a
                    # big-endian file it indexes its swap table with type 200
                    # and crashes
                    rc, out, err, cmd = perf(self.tmp, "report", "-i", path, "--stdio")
                    m = re.search(r"failed to process type: (\d+)", err) or \
                        re.search(r"failed: wrong feature ID: (\d+)", err)
                    if rc < 0:
                        res.append("signal %d" % -rc)
                    else:
                        self.assertTrue(m, "%s (exit %d): %s" % (shell(cmd), rc, err))
                        res.append(re.sub(r"^0x[0-9a-f]+ \[0x[0-9a-f]+\]: ", "", m.group(0)))
                self.assertEqual(res[0], res[1], "perf on the input vs on the output")


# ---------------------------------------------------------------------------
# time order of the injected records

class Ordering(_Standard):
    def test_injected_between_earlier_and_later(self):
        for name, c, r in self.each(lambda c: c.jit_ok):
            with self.subTest(case=name):
                self.assertInjectOK(r)
                recs = r.json["records"]
                for i, x in enumerate(recs):
                    if not (x["type"] == G.PERF_RECORD_MMAP2 and r.is_injected(x)):
                        continue
                    # its LOAD's since (the record has none without sample_id_all)
                    t = map_times(c.funcs)[x["start"]]
                    self.assertEqual(x.get("time", t), t)
                    before = [y for y in recs[:i] if "time" in y and not r.is_injected(y)]
                    after = [y for y in recs[i + 1:] if "time" in y and not r.is_injected(y)]
                    late = [y for y in before if y["time"] > t]
                    self.assertEqual(late, [], "MMAP2 @%d (t=%d) comes after later records" % (i, t))
                    if after:
                        self.assertGreater(after[0]["time"], t,
                                           "MMAP2 @%d (t=%d) could have gone later: next %s"
                                           % (i, t, after[0]))
                    # nothing timed <= t may follow it before the next later one
                    self.assertTrue(all(y["time"] > t for y in after[:1]))

    def test_finished_rounds_kept(self):
        for name, c, r in self.each():
            with self.subTest(case=name):
                self.assertInjectOK(r)
                n_in = sum(1 for x in c.builder.records if x.type == G.PERF_RECORD_FINISHED_ROUND)
                n_out = sum(1 for x in r.json["records"] if x["type"] == G.PERF_RECORD_FINISHED_ROUND)
                self.assertEqual(n_out, n_in)
                self.assertGreaterEqual(n_in, 3)


# ---------------------------------------------------------------------------
# damaged input

class Damaged(TmpDirCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.n = 0

    def make(self, pipe=False, **kw):
        type(self).n += 1
        d = os.path.join(self.tmp, "d%d" % self.n)
        c = G.make_case(d, "base", pipe=pipe, **kw)
        with open(c.path, "rb") as f:
            data = f.read()
        return c, d, data

    def write(self, d, name, data):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def run_inject(self, d, path, stdin_data=None):
        out = os.path.join(d, "out.data")
        before = sorted(os.listdir(d))
        if stdin_data is None:
            cmd = [PERFGRAFT, "inject", "-v", "-i", path, "-o", out]
            rc, so, se = run(cmd, cwd=d)
        else:
            cmd = [PERFGRAFT, "inject", "-v", "-i", "-", "-o", out]
            rc, so, se = run(cmd, cwd=d, input=stdin_data)
        return rc, se, out, before, cmd

    def assertFails(self, d, path, offset, what=None, stdin_data=None, name=None):
        rc, se, out, before, cmd = self.run_inject(d, path, stdin_data)
        shown = name or path
        self.assertEqual(rc, 1, "%s: exit %d, want 1: %s" % (shell(cmd), rc, se))
        prefix = "perfgraft: %s: offset %d: " % (shown, offset)
        self.assertIn(prefix, se, "want a message starting %r:\n%s" % (prefix, se))
        if what:
            self.assertIn(what, se)
        self.assertFalse(os.path.exists(out), "output left behind")
        after = sorted(os.listdir(d))
        left = []
        for n in sorted(set(after) - set(before)):
            p = os.path.join(d, n)
            left.append(n + ("/ (%s)" % (", ".join(sorted(os.listdir(p))) or "empty")
                             if os.path.isdir(p) else ""))
        self.assertEqual(left, [], "left behind after a failure: %s" % left)

    def assertWarnsKeeps(self, c, d, path, cut, stdin_data=None, name=None):
        """Truncated data tail: exit 0, a warning naming the file and the
        offset of the incomplete record, and every complete record kept."""
        rc, se, out, before, cmd = self.run_inject(d, path, stdin_data)
        self.assertEqual(rc, 0, "%s: exit %d: %s" % (shell(cmd), rc, se))
        recs = [x for x in c.builder.records if x.role != "container"]
        complete = [x for x in recs if x.offset + x.total <= cut and
                    (not x.compressed or x.container.offset + x.container.total <= cut)]
        cutrec = [x for x in c.builder.records
                  if not x.compressed and x.offset < cut < x.offset + x.total]
        self.assertEqual(len(cutrec), 1)
        shown = name or path
        self.assertRegex(se, r"perfgraft: warning: %s: offset %d: " % (re.escape(shown),
                                                                       cutrec[0].offset))
        dj = dump_json(out)
        r = Injected(c, out, rc, b"", se, cmd, out + ".d")
        got = [x for x in dj["records"] if not r.is_injected(x)]
        want = [x for x in complete if x.role == "pass"]
        self.assertEqual([(x["type"], x["size"]) for x in got], [(x.type, x.size) for x in want])
        with open(out, "rb") as f:
            od = f.read()
        for g, w in zip(got, want):
            self.assertEqual(record_bytes(od, g), w.data)
        return dj

    # -- file mode -----------------------------------------------------------
    def test_too_short_for_a_header(self):
        c, d, data = self.make()
        p = self.write(d, "cut.data", data[:10])
        self.assertFails(d, p, 0)

    def test_truncated_in_header(self):
        c, d, data = self.make()
        p = self.write(d, "cut.data", data[:60])
        self.assertFails(d, p, 0)

    def test_truncated_in_attrs(self):
        c, d, data = self.make()
        b = c.builder
        p = self.write(d, "cut.data", data[:b.attrs_offset + 30])
        self.assertFails(d, p, 24)

    def test_truncated_in_ids(self):
        c, d, data = self.make()
        p = self.write(d, "cut.data", data[:G.FILE_HDR + 4])
        self.assertFails(d, p, 24)

    def test_truncated_in_data(self):
        c, d, data = self.make()
        recs = c.builder.records
        # in the middle of the third sample after the marker, and right
        # after the header of a record
        k = recs.index(c.marker)
        for cut in (recs[k + 3].offset + 20, recs[k + 5].offset + 4):
            with self.subTest(cut=cut):
                for n in os.listdir(d):
                    if n.startswith("out.data"):
                        p = os.path.join(d, n)
                        shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
                p = self.write(d, "cut.data", data[:cut])
                self.assertWarnsKeeps(c, d, p, cut)

    def test_truncated_in_compressed(self):
        c, d, data = self.make(compressed=True, frames=2)
        conts = [x for x in c.builder.records if x.role == "container"]
        cut = conts[1].offset + 30
        p = self.write(d, "cut.data", data[:cut])
        self.assertWarnsKeeps(c, d, p, cut)

    def test_truncated_in_features(self):
        """The data section is whole; only feature bodies are cut off:
        a warning, and every record is kept."""
        c, d, data = self.make()
        b = c.builder
        cut = b.data_offset + b.data_size + 16 * len(b.features) + 10
        p = self.write(d, "cut.data", data[:cut])
        rc, se, out, before, cmd = self.run_inject(d, p)
        self.assertEqual(rc, 0, se)
        self.assertIn("warning: %s: offset " % p, se)
        dj = dump_json(out)
        r = Injected(c, out, rc, b"", se, cmd, out + ".d")
        self.assertEqual(len([x for x in dj["records"] if not r.is_injected(x)]),
                         len(b.expected_passthrough()))

    def test_record_size_below_8(self):
        for size in (0, 4, 7):
            with self.subTest(size=size):
                c, d, data = self.make()
                recs = c.builder.records
                r = recs[recs.index(c.marker) + 2]
                bad = bytearray(data)
                struct.pack_into("<H", bad, r.offset + 6, size)
                p = self.write(d, "bad.data", bytes(bad))
                self.assertFails(d, p, r.offset, "record size %d" % size)

    def test_record_size_below_8_before_marker(self):
        c, d, data = self.make()
        r = c.builder.records[1]
        bad = bytearray(data)
        struct.pack_into("<H", bad, r.offset + 6, 3)
        p = self.write(d, "bad.data", bytes(bad))
        self.assertFails(d, p, r.offset)

    def test_record_size_below_8_big_endian(self):
        c, d, data = self.make(bo=">")
        r = c.builder.records[2]
        bad = bytearray(data)
        struct.pack_into(">H", bad, r.offset + 6, 5)
        p = self.write(d, "bad.data", bytes(bad))
        self.assertFails(d, p, r.offset)

    def test_attrs_outside_file(self):
        c, d, data = self.make()
        bad = bytearray(data)
        struct.pack_into("<Q", bad, 24, len(data) + 4096)
        p = self.write(d, "bad.data", bytes(bad))
        self.assertFails(d, p, 24)
        bad = bytearray(data)
        struct.pack_into("<Q", bad, 32, len(data))      # size runs past the end
        p = self.write(d, "bad2.data", bytes(bad))
        self.assertFails(d, p, 24)

    def test_data_outside_file(self):
        c, d, data = self.make()
        bad = bytearray(data)
        struct.pack_into("<Q", bad, 40, len(data) + 100)
        p = self.write(d, "bad.data", bytes(bad))
        self.assertFails(d, p, 40)

    def test_bad_magic(self):
        c, d, data = self.make()
        for magic in (b"PERFILE3", b"\0" * 8, b"ELF\x7f\0\0\0\0"):
            with self.subTest(magic=magic):
                p = self.write(d, "bad.data", magic + data[8:])
                self.assertFails(d, p, 0)

    def test_corrupt_zstd_frame(self):
        c, d, data = self.make(compressed=True)
        cont = [x for x in c.builder.records if x.role == "container"][0]
        bad = bytearray(data)
        for i in range(cont.offset + 8 + 4, cont.offset + cont.size - 4):
            bad[i] ^= 0x5A
        p = self.write(d, "bad.data", bytes(bad))
        self.assertFails(d, p, cont.offset)

    # -- pipe mode -----------------------------------------------------------
    def test_pipe_truncated(self):
        c, d, data = self.make(pipe=True)
        recs = c.builder.records
        k = recs.index(c.marker)
        cut = recs[k + 2].offset + 13
        p = self.write(d, "cut.data", data[:cut])
        self.assertWarnsKeeps(c, d, p, cut)

    def test_pipe_truncated_stream(self):
        c, d, data = self.make(pipe=True)
        recs = c.builder.records
        k = recs.index(c.marker)
        cut = recs[k + 2].offset + 13
        self.assertWarnsKeeps(c, d, "-", cut, stdin_data=data[:cut], name="<stdin>")

    def test_pipe_truncated_payload_stream(self):
        """A HEADER_TRACING_DATA whose blob is cut off (wholly or in part) at
        the end of a stream: a warning, the record is not kept."""
        c, d, data = self.make(pipe=True)
        tr = [x for x in c.builder.records if x.type == G.PERF_RECORD_HEADER_TRACING_DATA][0]
        for cut in (tr.offset + tr.size, tr.offset + tr.size + 40):
            with self.subTest(cut=cut):
                for n in os.listdir(d):
                    if n.startswith("out.data"):
                        q = os.path.join(d, n)
                        shutil.rmtree(q) if os.path.isdir(q) else os.unlink(q)
                self.assertWarnsKeeps(c, d, "-", cut, stdin_data=data[:cut], name="<stdin>")

    def test_pipe_record_size_below_8(self):
        c, d, data = self.make(pipe=True)
        r = [x for x in c.builder.records if x.type == G.PERF_RECORD_SAMPLE][0]
        bad = bytearray(data)
        struct.pack_into("<H", bad, r.offset + 6, 2)
        p = self.write(d, "bad.data", bytes(bad))
        self.assertFails(d, p, r.offset)
        self.assertFails(d, "-", r.offset, stdin_data=bytes(bad), name="<stdin>")

    def test_pipe_bad_magic_stream(self):
        c, d, data = self.make(pipe=True)
        self.assertFails(d, "-", 0, stdin_data=b"PERFILE3" + data[8:], name="<stdin>")


# ---------------------------------------------------------------------------
# jitdumps that cannot be used

class Dumps(TmpDirCase):
    def check_rest(self, c, r):
        """The recording's only dump cannot be used: nothing can be
        injected, so the run fails (issue 25, as perf inject --jit does)
        with the dump's reason, and writes nothing."""
        self.assertEqual(r.rc, 1, r.where())
        errs = [l for l in r.stderr.splitlines() if l.startswith("perfgraft: nothing injected: ")]
        self.assertEqual(len(errs), 1, r.where())
        self.assertIn(c.dump_path, errs[0], r.where())
        self.assertFalse(os.path.exists(r.out), "an output of a run that injected nothing")
        self.assertFalse(os.path.exists(r.out + ".d"), "its image directory left")

    def test_missing_dump(self):
        for pipe in (False, True):
            with self.subTest(pipe=pipe):
                c = G.make_case(os.path.join(self.tmp, "missing-%d" % pipe), "m", pipe=pipe,
                                jitdump="missing")
                self.check_rest(c, inject(c))

    def test_clock_mismatch(self):
        for pipe in (False, True):
            with self.subTest(pipe=pipe):
                c = G.make_case(os.path.join(self.tmp, "clock-%d" % pipe), "k", pipe=pipe,
                                use_clockid=False)
                r = inject(c)
                self.check_rest(c, r)
                self.assertIn("CLOCK_MONOTONIC", r.stderr)

    def test_clock_mismatch_compressed(self):
        c = G.make_case(os.path.join(self.tmp, "clock-z"), "k", compressed=True,
                        use_clockid=False)
        self.check_rest(c, inject(c))


# ---------------------------------------------------------------------------
# other file shapes

class Shapes(TmpDirCase):
    def test_data_size_zero(self):
        """perf record killed before it wrote the header back: data.size 0,
        no features.  A warning; every record is read to the end."""
        c = G.make_case(os.path.join(self.tmp, "killed"), "k", features=False, tracing=False)
        c.builder.header_overrides = dict(data_size=0)
        c.builder.write(c.path)
        r = inject(c)
        self.assertEqual(r.rc, 0, r.where())
        self.assertIn("perfgraft: warning: %s: offset 48: " % c.path, r.stderr)
        got = [x for x in r.json["records"] if not r.is_injected(x)]
        want = c.builder.expected_passthrough()
        self.assertEqual([(x["type"], x["size"]) for x in got], [(x.type, x.size) for x in want])
        self.assertEqual(len(r.json["records"]) - len(got), 3)

    def test_reinject_is_identity(self):
        """An output has no markers left: injecting it again changes nothing
        but the header."""
        for name in ("file-le-128", "file-le-comp", "pipe-le-128", "file-be-128"):
            with self.subTest(case=name):
                c = G.make_case(os.path.join(self.tmp, "re-" + name), name,
                                **G.STANDARD_CASES[name])
                r1 = inject(c)
                self.assertEqual(r1.rc, 0, r1.where())
                out2 = os.path.join(self.tmp, "re-" + name, "out2.data")
                rc, so, se = run([PERFGRAFT, "inject", "-q", "-i", r1.out, "-o", out2])
                self.assertEqual(rc, 0, se)
                self.assertEqual(se.strip(), "")
                with open(out2, "rb") as f:
                    d2 = f.read()
                skip = G.PIPE_HDR if c.pipe else G.FILE_HDR
                self.assertEqual(d2[skip:], r1.data[skip:], "second inject changed the file")

    def test_in_band_attr_and_build_id(self):
        """HEADER_ATTR / HEADER_BUILD_ID / FINISHED_INIT records inside a
        file-mode data section pass through."""
        d = os.path.join(self.tmp, "inband")
        c = G.make_case(d, "x")
        b = c.builder
        extra_attr = G.Attr(config=2, ids=[301], name="page-faults")
        body = extra_attr.raw(b.bo) + struct.pack("<Q", 301)
        rec = G.Rec(G.PERF_RECORD_HEADER_ATTR, 0, body)
        b.stream.insert(3, rec)
        b.stream.insert(4, G.Rec(G.PERF_RECORD_FINISHED_INIT, 0, b""))
        bid = b.header_build_id(G.FAKE_BUILD_ID, "/opt/perfgraft-test/lib/other.so")
        b.stream.remove(bid)
        b.stream.insert(5, bid)
        b.write(c.path)
        r = inject(c)
        self.assertEqual(r.rc, 0, r.where())
        got = [x for x in r.json["records"] if not r.is_injected(x)]
        want = b.expected_passthrough()
        self.assertEqual([(x["type"], x["size"]) for x in got], [(x.type, x.size) for x in want])
        for g, w in zip(got, want):
            self.assertEqual(record_bytes(r.data, g), w.data)
        self.assertEqual(len([x for x in r.json["records"] if r.is_injected(x)]), 3)


# ---------------------------------------------------------------------------
# output and memory bounded by the input (issue 12, point 7)

RSS_MAX_KB = 128 * 1024         # today's 2.1 GB; ~5 MB after (ASan: more)
FSIZE_MAX = 64 << 20            # a run that writes more is killed (SIGXFSZ)


def run_measured(cmd, stdin_data=None, cwd=None):
    """Runs cmd under GNU time with its output files limited to FSIZE_MAX
    bytes; returns (rc, stdout bytes, stderr text, peak RSS in KB).  (A
    child forked from this process would count Python's own RSS: Linux
    keeps the high-water mark across exec.)"""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_MAX, FSIZE_MAX))

    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se, \
            tempfile.TemporaryFile() as si, tempfile.NamedTemporaryFile() as tm:
        if stdin_data is not None:
            si.write(stdin_data)
            si.seek(0)
        p = subprocess.run([GNU_TIME, "-q", "-o", tm.name, "-f", "%M"] + cmd,
                           stdin=si if stdin_data is not None else subprocess.DEVNULL,
                           stdout=so, stderr=se, cwd=cwd, preexec_fn=limit, timeout=TIMEOUT)
        so.seek(0)
        se.seek(0)
        with open(tm.name) as f:
            rss = int(f.read().split()[-1])
        return p.returncode, so.read(), se.read().decode("utf-8", "replace"), rss


GNU_TIME = "/usr/bin/time"


class Bounds(TmpDirCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(GNU_TIME, os.X_OK):
            raise unittest.SkipTest("GNU time (%s) is needed to measure RSS" % GNU_TIME)
        super().setUpClass()

    def msg(self, path, off, limit, feature=True):
        if feature:
            return ("perfgraft: %s: offset %d: COMPRESSED record decompresses to more than "
                    "%d bytes, the mmap_len of the COMPRESSED feature\n" % (path, off, limit))
        return ("perfgraft: %s: offset %d: COMPRESSED record decompresses to more than "
                "%d bytes (the bound used when the header gives no mmap_len)\n"
                % (path, off, limit))

    def assertBounded(self, what, rc, out, err, rss, want_err):
        self.assertEqual(rc, 1, "%s: exit %d, want 1\n%s" % (what, rc, err[-2000:]))
        self.assertIn(want_err, err, what)
        self.assertLess(rss, RSS_MAX_KB, "%s: peak RSS %d KB" % (what, rss))
        self.assertLess(len(out), 1 << 20, "%s: %d bytes on stdout" % (what, len(out)))

    def check_bomb(self, name, want, **kw):
        """dump and inject of a hostile_rle_case file fail with `want`
        (a function of the path shown) in bounded memory, leaving nothing."""
        d = os.path.join(self.tmp, name)
        os.makedirs(d)
        path = os.path.join(d, "bomb.data")
        b = G.hostile_rle_case(path, **kw)
        self.assertLess(os.path.getsize(path), 70_000)
        c = b.containers[0]
        rc, out, err, rss = run_measured([PERFGRAFT, "dump", path])
        info("%s: dump exit %d, peak RSS %d KB, %d bytes out" % (name, rc, rss, len(out)))
        self.assertBounded("dump " + name, rc, out, err, rss, want(path, c.offset))
        out_path = os.path.join(d, "out.data")
        rc, out, err, rss = run_measured([PERFGRAFT, "inject", "-q", "-i", path, "-o", out_path],
                                         cwd=d)
        info("%s: inject exit %d, peak RSS %d KB" % (name, rc, rss))
        self.assertBounded("inject " + name, rc, out, err, rss, want(path, c.offset))
        self.assertEqual(sorted(os.listdir(d)), ["bomb.data"], "left behind by inject")
        if kw.get("pipe"):
            with open(path, "rb") as f:
                data = f.read()
            rc, out, err, rss = run_measured([PERFGRAFT, "dump", "-"], stdin_data=data)
            self.assertBounded("dump - <" + name, rc, out, err, rss, want("<stdin>", c.offset))

    def test_rle_bomb_capped_at_mmap_len(self):
        """The issue's file: one COMPRESSED record of 16,380 RLE blocks,
        2,146,959,360 bytes from 65,534; perf record's mmap_len 528,384."""
        lim = G.PERF_MMAP_LEN
        self.check_bomb("file", lambda p, o: self.msg(p, o, lim))
        self.check_bomb("file-be", lambda p, o: self.msg(p, o, lim), bo=">")
        self.check_bomb("pipe", lambda p, o: self.msg(p, o, lim), pipe=True)

    def test_rle_bomb_without_mmap_len(self):
        """No COMPRESSED feature, or mmap_len 0 (perf 6.1 then decompresses
        nothing): an 8 MiB bound."""
        lim = 8 << 20
        self.check_bomb("nofeat", lambda p, o: self.msg(p, o, lim, False), feature=False)
        self.check_bomb("nofeat-pipe", lambda p, o: self.msg(p, o, lim, False), feature=False,
                        pipe=True)
        self.check_bomb("mmap-len-0", lambda p, o: self.msg(p, o, lim, False), mmap_len=0)

    def test_bound_is_exact(self):
        """Real zstd frames (records spanning two COMPRESSED records): an
        mmap_len equal to the largest record's output reads; one byte less
        is an error at that record.  A record's bound does not count the
        bytes carried over from the one before (perf: decomp_len +=
        last_rem): RLE records each exactly at the bound read."""
        for name in ("file-le-comp2", "pipe-le-comp"):
            kw = G.STANDARD_CASES[name]
            # same-length directories: the marker's path is in a record
            c = G.make_case(os.path.join(self.tmp, "sz-" + name), name, **kw)
            sizes = G.container_sizes(c)
            self.assertEqual(len(sizes), 2)
            big, n = max(sizes, key=lambda x: x[1])
            for lim, ok in ((n, True), (n - 1, False)):
                with self.subTest(case=name, mmap_len=lim):
                    c = G.make_case(os.path.join(self.tmp, "%s-%s" % ("ok" if ok else "no", name)),
                                    name, comp_mmap_len=lim, **kw)
                    self.assertEqual([x[1] for x in G.container_sizes(c)],
                                     [x[1] for x in sizes])
                    r = inject(c)
                    if ok:
                        self.assertEqual(r.rc, 0, r.where())
                        got = [x for x in r.json["records"] if not r.is_injected(x)]
                        want = c.builder.expected_passthrough()
                        self.assertEqual([(x["type"], x["size"]) for x in got],
                                         [(x.type, x.size) for x in want])
                    else:
                        self.assertEqual(r.rc, 1, r.where())
                        self.assertIn(self.msg(c.path, big.offset, lim), r.stderr)
                        self.assertFalse(os.path.exists(r.out))
        # RLE: 3 records of exactly mmap_len bytes; 2056-byte records span them
        lim = 4 * 128 * 1024
        path = os.path.join(self.tmp, "rle-exact.data")
        G.hostile_rle_case(path, outputs=[lim] * 3, mmap_len=lim)
        dj = dump_json(path)
        self.assertEqual(dj["_rc"], 0)
        junk = [x for x in dj["records"] if x["type"] == 0x08080808]
        self.assertEqual(len(junk), 3 * lim // 0x808)
        self.assertEqual({x["size"] for x in junk}, {0x808})
        G.hostile_rle_case(path, outputs=[lim, lim + 1, lim], mmap_len=lim)
        rc, out, err = run([PERFGRAFT, "dump", path])
        self.assertEqual(rc, 1, err)
        off = 304 + 8 + 6 + 4 * 4          # header..COMM, then the first record
        self.assertIn(self.msg(path, off, lim), err)

    def test_rle_bomb_past_largest_ring(self):
        """mmap_len is the file's own word: 0xFFFFFFFF let 66 KB decompress
        to 2 GiB per record (issue 20.6).  Whatever the header says, a
        record holds at most what perf record's largest ring buffer (-m 1G)
        plus its control page can: past 1 GiB + 64 KiB it is an error at
        its offset, for dump and inject, with nothing left behind."""
        lim = (1 << 30) + (64 << 10)
        d = os.path.join(self.tmp, "huge-mmap-len")
        os.makedirs(d)
        path = os.path.join(d, "bomb.data")
        b = G.hostile_rle_case(path, mmap_len=0xFFFFFFFF)
        self.assertGreater(b.containers[0].output, lim)
        want = ("perfgraft: %s: offset %d: COMPRESSED record decompresses to more than %d "
                "bytes (the largest ring buffer perf record maps; the header's mmap_len is "
                "larger)\n" % (path, b.containers[0].offset, lim))
        for cmd in ([PERFGRAFT, "dump", path],
                    [PERFGRAFT, "inject", "-q", "-i", path, "-o", os.path.join(d, "out.data")],
                    [PERFGRAFT, "inject", "-q", "-i", path, "-o", "/dev/null"]):
            with self.subTest(cmd=cmd[1:]):
                p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True, cwd=d, timeout=TIMEOUT)
                self.assertEqual(p.returncode, 1, p.stderr[-2000:])
                self.assertIn(want, p.stderr)
                self.assertEqual(sorted(os.listdir(d)), ["bomb.data"])
        # a record within the bound still reads under such a header
        G.hostile_rle_case(path, outputs=[64 << 20], mmap_len=0xFFFFFFFF)
        p = subprocess.run([PERFGRAFT, "dump", path], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])

    def test_memory_flat_for_a_large_record(self):
        """A record within a huge mmap_len (u32: up to 4 GiB) that
        decompresses to 268 MB: read a window at a time, not whole."""
        path = os.path.join(self.tmp, "large.data")
        total = 2048 * G.ZSTD_BLOCK_MAX
        G.hostile_rle_case(path, outputs=[total], mmap_len=0xFFFFFFFF)
        rc, out, err, rss = run_measured([PERFGRAFT, "dump", "--json", path])
        info("large record: dump --json exit %d, peak RSS %d KB" % (rc, rss))
        self.assertEqual(rc, 0, err[-2000:])
        self.assertLess(rss, RSS_MAX_KB, "peak RSS %d KB" % rss)

    def test_inband_attrs_capped(self):
        """HEADER_ATTR records repeat cheaply inside compressed data (20 MB
        of them from a few KB) and are all kept: more than 16 MiB of them
        is an error at the record that passes it."""
        d = os.path.join(self.tmp, "attrs")
        os.makedirs(d)
        b = G.PerfDataBuilder(attrs=[G.Attr(ids=[101])])
        b.feat_string(G.FEAT_HOSTNAME, "h")
        b.feature(G.FEAT_COMPRESSED, G.compressed_feature("<", 64 << 20))
        b.comm(G.PID, G.PID, "node", G.T0 + 1000)
        a = G.Attr(config=2, ids=[], name="x").raw("<")
        nids = (0xFFF8 - 8 - len(a)) // 8
        body = a + b"".join(struct.pack("<Q", 1000 + i) for i in range(nids))
        rec = G.Rec(G.PERF_RECORD_HEADER_ATTR, 0, body)
        n = (20 << 20) // rec.size
        frame = G.zstd_compress(rec.data * n, 19)
        self.assertLess(len(frame), 0xFFF0)
        c = G.Rec(G.PERF_RECORD_COMPRESSED, 0, frame, role="container")
        b.stream.append(c)
        path = os.path.join(d, "attrs.data")
        b.write(path)
        rc, out, err, rss = run_measured([PERFGRAFT, "dump", path])
        self.assertEqual(rc, 1, err[-2000:])
        self.assertIn("perfgraft: %s: offset %d: more than 16777216 bytes of HEADER_ATTR "
                      "records\n" % (path, c.offset), err)


# ---------------------------------------------------------------------------
# real pipes

class Streams(TmpDirCase):
    def test_stdin_to_file_and_stdout(self):
        for name in ("pipe-le-128", "pipe-le-comp", "pipe-be-128", "pipe-le-extras"):
            with self.subTest(case=name):
                kw = G.STANDARD_CASES[name]
                c = G.make_case(os.path.join(self.tmp, name), name, **kw)
                with open(c.path, "rb") as f:
                    data = f.read()
                ref = inject(c, out=os.path.join(self.tmp, name, "ref.data"))
                self.assertEqual(ref.rc, 0, ref.where())
                # a real pipe on stdin: the stream reader, not the mapping
                out = os.path.join(self.tmp, name, "stdin.data")
                rc, so, se = run([PERFGRAFT, "inject", "-q", "-i", "-", "-o", out], input=data)
                self.assertEqual(rc, 0, se)
                a = dump_json(ref.out)["records"]
                r2 = Injected(c, out, rc, so, se, [], out + ".d")
                b = dump_json(out)["records"]
                self.assertEqual([(x["type"], x["size"], x.get("time")) for x in a
                                  if not ref.is_injected(x)],
                                 [(x["type"], x["size"], x.get("time")) for x in b
                                  if not r2.is_injected(x)])
                self.assertEqual([(x["type"], x.get("time"), x.get("start")) for x in a
                                  if ref.is_injected(x)],
                                 [(x["type"], x.get("time"), x.get("start")) for x in b
                                  if r2.is_injected(x)])
                # to stdout
                rc, so, se = run([PERFGRAFT, "inject", "-q", "-i", c.path, "-o", "-",
                                  "--image-dir", os.path.join(self.tmp, name, "img")])
                self.assertEqual(rc, 0, se)
                p = G.parse(so)
                self.assertTrue(p.pipe)
                self.assertEqual(p.bo, c.bo)
                self.assertEqual([(x["type"], x["size"]) for x in p.records
                                  if not (x["type"] in (10, 67) and b"/img/" in x["data"])],
                                 [(x["type"], x["size"]) for x in a
                                  if not ref.is_injected(x)])

    def test_file_to_stdout_is_pipe_mode(self):
        c = G.make_case(os.path.join(self.tmp, "f2p"), "f2p")
        rc, so, se = run([PERFGRAFT, "inject", "-q", "-i", c.path, "-o", "-",
                          "--image-dir", os.path.join(self.tmp, "f2p", "img")])
        self.assertEqual(rc, 0, se)
        p = G.parse(so)
        self.assertTrue(p.pipe)
        self.assertEqual([a["raw"] for a in p.attrs], [a.raw(c.bo) for a in c.attrs])
        types = [x["type"] for x in p.records]
        self.assertEqual(types[:2], [G.PERF_RECORD_HEADER_ATTR] * 2)
        if perf_problem() is None:
            path = os.path.join(self.tmp, "f2p", "piped.data")
            with open(path, "wb") as f:
                f.write(so)
            rc, out, err, cmd = perf(self.tmp, "report", "-i", path, "--stdio", "--no-children",
                                     "--sort", "sym", "-n", "-g", "none")
            self.assertEqual(rc, 0, err)
            counts = report_counts(out)
            for fname, _, _, _ in c.funcs:
                self.assertGreater(counts.get(fname, 0), 0, "%s not resolved:\n%s" % (fname, out))


if __name__ == "__main__":
    unittest.main()
