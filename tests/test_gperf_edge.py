#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Edge-case tests of the gperftools CPU profile reader and converter.

Run from the repository root:  python3 -m unittest tests.test_gperf_edge -v
The binary is $PERFGRAFT or <repo>/build/perfgraft.  The profiles come from
tests/gperf_gen.py (64/32-bit, both byte orders, longer headers, period 0,
versions 1 and 2, zero-PC and empty records, missing trailer, truncations,
odd mapped-object text, headers that fit no rule), which also gives what
each must decode to.  The cross-check of the generator against perl pprof
is skipped when google-pprof is not installed; everything else fails
(does not skip) while the converter is missing.

CLI contract under test:
  perfgraft dump --json PROFILE
  {"format":"gperftools-cpu","word_bits":64|32,"byte_order":"little"|"big",
   "header_slots":N,"version":V,"period_us":P,"total_samples":S,
   "records":R,"stacks":[{"count":c,"pcs":["0x..",...]}],"trailer":bool,
   "mappings":[{"start":"0x..","end":"0x..","perms":"r-xp","offset":"0x..",
   "dev":"00:00","inode":N,"path":".."}],"warnings":[".."]}
  stacks summed by identical PC list in first-seen order; damage is a
  warning naming "offset N" (N = byte offset of the record); fatal header
  problems exit 1 (EXIT_BADINPUT, src/cli/cli.h; 2 is EXIT_USAGE) with
  "perfgraft: FILE: offset N: ..." on stderr.
  perfgraft gperf PROFILE -o OUT: exit 0 and a perf.data, or for a fatal
  header exit 1 and no OUT (nor anything else) left behind.
"""

import json
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import gperf_gen as gen  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(REPO, "build", "perfgraft"))
TIMEOUT = 60
SEED_DIR = os.path.join(REPO, "fuzz", "corpus-gperf")
OFFSET_RE = re.compile(r"offset (\d+)")
FATAL_LINE_RE = re.compile(r"^perfgraft: .*: offset (\d+): ", re.M)
STR_FIELDS = ("perms", "dev", "path")
HEX_FIELDS = ("start", "end", "offset")

_gperf_ok = None


def run(args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=TIMEOUT)
    p.out = p.stdout.decode("utf-8", "surrogateescape")
    p.err = p.stderr.decode("utf-8", "surrogateescape")
    return p


def describe(p):
    return "command: %s\nexit: %s\nstdout (tail):\n%s\nstderr (tail):\n%s" % (
        " ".join(map(str, p.args)), p.returncode, p.out[-2000:], p.err[-2000:])


def hexval(v):
    """int of a "0x..." string, None when it is not one."""
    if isinstance(v, str) and re.match(r"^0[xX][0-9a-fA-F]+$", v):
        return int(v, 16)
    return None


def short(x):
    return json.dumps(x, sort_keys=True)[:300]


def req_met(req, texts):
    kind, val = req
    if kind == "offset":
        return any(val in [int(m) for m in OFFSET_RE.findall(t)] for t in texts)
    if kind == "re":
        return any(re.search(val, t) for t in texts)
    if kind == "any":
        return any(req_met(r, texts) for r in val)
    raise ValueError(req)


def req_str(req):
    kind, val = req
    if kind == "offset":
        return "a warning naming offset %d" % val
    if kind == "re":
        return "a warning matching /%s/" % val
    return " or ".join(req_str(r) for r in val)


def warning_problems(c, texts, what="warnings"):
    probs = []
    for r in c.warn:
        if not req_met(r, texts):
            probs.append("%s: expected %s; got %s" % (what, req_str(r),
                                                      short(texts)))
    if c.clean and texts:
        probs.append("%s: expected none, got %s" % (what, short(texts)))
    return probs


def stack_problems(c, doc):
    got = doc.get("stacks")
    want = c.json["stacks"]
    if not isinstance(got, list):
        return ["stacks is not a list: %r" % (got,)]
    probs = []
    norm = []
    for s in got:
        pcs = s.get("pcs") if isinstance(s, dict) else None
        if not isinstance(pcs, list) or any(hexval(p) is None for p in pcs):
            probs.append("stack with PCs that are not \"0x..\" strings: %s"
                         % short(s))
            return probs
        norm.append({"count": s.get("count"), "pcs": [hexval(p) for p in pcs]})
    if len(norm) != len(want):
        probs.append("%d stacks, expected %d" % (len(norm), len(want)))
    for i, (g, w) in enumerate(zip(norm, want)):
        if g != w:
            probs.append("stack %d: count %r, %d PCs %s...; expected count %d, "
                         "%d PCs %s..." % (i, g["count"], len(g["pcs"]),
                                           [hex(p) for p in g["pcs"][:3]],
                                           w["count"], len(w["pcs"]),
                                           [hex(p) for p in w["pcs"][:3]]))
            break
    return probs


def mapping_problems(c, doc):
    got = doc.get("mappings")
    want = c.json["mappings"]
    if not isinstance(got, list):
        return ["mappings is not a list: %r" % (got,)]
    probs = []
    norm = []
    for m in got:
        if not isinstance(m, dict):
            return ["mapping is not an object: %r" % (m,)]
        n = dict(m)
        for k in HEX_FIELDS:
            n[k] = hexval(m.get(k))
            if n[k] is None:
                probs.append("mapping %s: %s is not a \"0x..\" string"
                             % (short(m), k))
        norm.append(n)
    if probs:
        return probs
    if len(norm) != len(want):
        probs.append("%d mappings, expected %d" % (len(norm), len(want)))
    for i, (g, w) in enumerate(zip(norm, want)):
        bad = [k for k in w if g.get(k) != w[k]]
        if bad:
            probs.append("mapping %d: %s differ\n  got:  %s\n  want: %s" % (
                i, bad, short(got[i]),
                short(dict(w, start=hex(w["start"]), end=hex(w["end"]),
                           offset=hex(w["offset"])))))
    return probs


def doc_problems(c, doc):
    """Differences between a `dump --json` document and the case."""
    if not isinstance(doc, dict):
        return ["stdout is not a JSON object"]
    probs = []
    for k, v in c.json.items():
        if k in ("stacks", "mappings"):
            continue
        if k == "records" and doc.get(k) in c.records_alt:
            continue
        if doc.get(k) != v:
            probs.append("%s is %r, expected %r" % (k, doc.get(k), v))
    probs += stack_problems(c, doc)
    probs += mapping_problems(c, doc)
    ws = doc.get("warnings")
    if not isinstance(ws, list) or not all(isinstance(w, str) for w in ws):
        probs.append("warnings is not a list of strings: %r" % (ws,))
    else:
        probs += warning_problems(c, ws)
    return probs


def fatal_problems(c, p, check_message=True):
    probs = []
    if p.returncode < 0:
        return ["killed by signal %d" % -p.returncode]
    if p.returncode == 0:
        return ["exit 0, expected a failure"]
    if not check_message:
        return probs
    if p.returncode != gen.EXIT_BADINPUT:
        probs.append("exit %d, expected %d" % (p.returncode, gen.EXIT_BADINPUT))
    offs = [int(m) for m in FATAL_LINE_RE.findall(p.err)]
    if not offs:
        probs.append("no 'perfgraft: FILE: offset N: ...' line on stderr: %r"
                     % p.err[-300:])
    elif c.fatal_offsets is not None and not set(offs) & c.fatal_offsets:
        probs.append("fatal message names offset %s, expected one of %s"
                     % (offs, sorted(c.fatal_offsets)))
    if c.fatal_re and not re.search(c.fatal_re, p.err):
        probs.append("stderr does not match /%s/: %r" % (c.fatal_re, p.err[-300:]))
    return probs


class GperfEdgeTest(unittest.TestCase):
    maxDiff = 6000

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="perfgraft-gperf-")
        cls.tmp = cls._tmp.name
        cls.gendir = os.path.join(cls.tmp, "cases")
        os.mkdir(cls.gendir)
        cls.cases = gen.cases(cls.gendir)
        cls._cache = {}

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    # -- helpers ------------------------------------------------------------
    def need_binary(self):
        global _gperf_ok
        if not (os.path.isfile(PERFGRAFT) and os.access(PERFGRAFT, os.X_OK)):
            self.fail("perfgraft binary not found or not executable: %s "
                      "(build with: meson setup build; ninja -C build, or set "
                      "PERFGRAFT)" % PERFGRAFT)
        if _gperf_ok is None:
            p = run([PERFGRAFT, "gperf", "--help"])
            _gperf_ok = (p.returncode == 0, describe(p))
        if not _gperf_ok[0]:
            self.fail("%s has no working 'gperf' command yet (the gperftools "
                      "converter is not built):\n%s" % (PERFGRAFT, _gperf_ok[1]))

    def path(self, name):
        return os.path.join(self.gendir, name + ".prof")

    def dump(self, path, cache=True):
        if cache and path in self._cache:
            return self._cache[path]
        p = run([PERFGRAFT, "dump", "--json", path])
        doc = None
        try:
            doc = json.loads(p.out)
        except ValueError:
            pass
        if cache:
            self._cache[path] = (p, doc)
        return p, doc

    def convert(self, path, extra=(), read_back=False):
        """Runs `perfgraft gperf PATH -o OUT` in a fresh directory; returns
        (process, out path, names in the directory afterwards, first bytes
        of OUT).  read_back: also `perfgraft dump --json OUT`, kept in
        self.read_back as (process, document)."""
        d = tempfile.mkdtemp(dir=self.tmp)
        out = os.path.join(d, "out.data")
        p = run([PERFGRAFT, "gperf", path, "-o", out] + list(extra))
        names = sorted(os.listdir(d))
        data = b""
        self.read_back = None
        if os.path.exists(out):
            with open(out, "rb") as f:
                data = f.read(16)
            if read_back:
                q = run([PERFGRAFT, "dump", "--json", out])
                try:
                    doc = json.loads(q.out)
                except ValueError:
                    doc = None
                self.read_back = (q, doc)
            os.unlink(out)
        for n in os.listdir(d):
            os.unlink(os.path.join(d, n))
        os.rmdir(d)
        return p, out, names, data

    # -- per-case checks ----------------------------------------------------
    def check_dump(self, name):
        self.need_binary()
        c = self.cases[name]
        p, doc = self.dump(self.path(name))
        if c.exit:
            probs = fatal_problems(c, p, check_message=False)
            self.assertEqual(probs, [], "%s (%s)\n%s" % (name, c.note, describe(p)))
            return
        self.assertGreaterEqual(p.returncode, 0, describe(p))
        self.assertEqual(p.returncode, 0, describe(p))
        self.assertIsNotNone(doc, "stdout is not JSON\n" + describe(p))
        probs = doc_problems(c, doc)
        self.assertEqual(probs, [], "%s (%s)\n%s" % (name, c.note,
                                                     "\n".join(probs)))

    def check_convert(self, name):
        self.need_binary()
        c = self.cases[name]
        p, out, names, head = self.convert(self.path(name), read_back=True)
        if c.exit:
            probs = fatal_problems(c, p)
            if names:
                probs.append("left behind: %s" % names)
            self.assertEqual(probs, [], "%s (%s)\n%s" % (name, c.note, describe(p)))
            return
        self.assertGreaterEqual(p.returncode, 0, describe(p))
        want = c.expected_convert_exit()
        if want is None:
            if p.returncode != 0:
                self.assertEqual(names, [], "failed but left files behind\n"
                                 + describe(p))
            return
        self.assertEqual(p.returncode, want, describe(p))
        self.assertEqual(names, ["out.data"], describe(p))
        self.assertTrue(head.startswith(b"PERFILE2"), head)
        # perfgraft's own perf.data reader takes it, with one SAMPLE per
        # sample of the profile (no stack here loses all its frames)
        q, doc = self.read_back
        self.assertEqual(q.returncode, 0, describe(q))
        self.assertIsInstance(doc, dict, describe(q))
        self.assertIsNone(doc.get("error"), describe(q))
        self.assertEqual(doc.get("warnings"), [], describe(q))
        nsamples = ((doc.get("summary") or {}).get("by_name") or {}).get("SAMPLE", 0)
        self.assertEqual(nsamples, c.json["total_samples"],
                         "SAMPLE records in the perf.data\n" + describe(p))
        # the converter reports the same damage as dump, on stderr
        lines = p.err.splitlines()
        probs = [pr for pr in warning_problems(c, lines, "stderr")
                 if not pr.startswith("stderr: expected none")]
        self.assertEqual(probs, [], describe(p))

    # -- groups ---------------------------------------------------------------
    def test_twins_identical(self):
        """BE/LE and 32/64-bit twins: same stacks, totals, records, trailer
        and mappings; word size and byte order as written."""
        self.need_binary()
        groups = {}
        for name, c in self.cases.items():
            if c.twin:
                groups.setdefault(c.twin, []).append(name)
        self.assertEqual(sorted(groups), ["base", "small"])
        for g, names in sorted(groups.items()):
            docs = {}
            for n in names:
                p, doc = self.dump(self.path(n))
                self.assertEqual(p.returncode, 0, describe(p))
                self.assertIsInstance(doc, dict, describe(p))
                c = self.cases[n]
                self.assertEqual((doc.get("word_bits"), doc.get("byte_order")),
                                 (c.bits, "little" if c.bo == "<" else "big"), n)
                docs[n] = doc
            ref = names[0]
            for n in names[1:]:
                with self.subTest(group=g, twin=n):
                    for k in ("total_samples", "records", "stacks", "trailer",
                              "mappings", "version", "header_slots"):
                        a = docs[ref].get(k)
                        b = docs[n].get(k)
                        if k == "stacks":
                            # offsets differ with the word size
                            a = [(s.get("count"), _numeric(s.get("pcs")))
                                 for s in a or []]
                            b = [(s.get("count"), _numeric(s.get("pcs")))
                                 for s in b or []]
                        elif k == "mappings":
                            # the contract's fields, compared numerically;
                            # line offsets differ with the word size
                            keep = STR_FIELDS + HEX_FIELDS + ("inode",)
                            a = [{f: _numeric(m.get(f)) for f in keep}
                                 for m in a or []]
                            b = [{f: _numeric(m.get(f)) for f in keep}
                                 for m in b or []]
                        self.assertEqual(a, b, "%s of %s vs %s" % (k, n, ref))

    def test_huge_counts_saturate_and_are_refused(self):
        """Two records of the same stack, each counting 2^63: the sum must
        not wrap to 0 (it saturates), and the converter refuses the profile
        at once, naming the record, instead of writing samples for ever."""
        self.need_binary()
        words = [0, 3, 0, 1000, 0]
        big = 1 << 63
        for _ in range(2):
            words += [big, 2, 0x401000, 0x401100]
        words += [0, 1, 0]
        path = os.path.join(self.tmp, "huge-counts.prof")
        with open(path, "wb") as f:
            f.write(struct.pack("<%dQ" % len(words), *words))
        p, doc = self.dump(path, cache=False)
        self.assertEqual(doc["total_samples"], 2 ** 64 - 1)
        self.assertEqual(doc["stacks"][0]["count"], 2 ** 64 - 1)
        p, out, names, data = self.convert(path)
        self.assertEqual(p.returncode, gen.EXIT_BADINPUT, p.err)
        self.assertIn("offset 40:", p.err)
        self.assertIn("damaged count", p.err)
        self.assertEqual(names, [])

    def test_maps_text_cut_mid_line(self):
        """Issue 12 point 11: a profile cut inside its maps text (here in
        the main program's line, the last one) is read with a warning that
        names the cut line's offset, exit 0, and the cut line is not a
        mapping: no directory ("/opt/app/"), no truncated path, neither in
        dump --json nor among the MMAP2 records perf sees."""
        self.need_binary()
        prog = "/opt/app/bin/prog"
        libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
        maps = [gen.Map(gen.LIBC, gen.LIBC + 0x156000, "r-xp", 0x26000, 332835, libc),
                gen.Map(gen.PROG, gen.PROG + 0x4000, "r-xp", 0x1000, 1311, prog)]
        c = gen.build("maps-cut", records=[(5, [gen.PROG + 0x1A8, gen.PROG + 0x1CF]),
                                           (3, [gen.LIBC + 0x100, gen.PROG + 0x1FF])],
                      maps=maps)
        line = c.text_lines[-1]
        self.assertTrue(line.text.endswith(prog.encode() + b"\n"))
        at_path = line.offset + line.text.index(prog.encode())
        cuts = {"mid-address": line.offset + 7,
                "after-perms": line.offset + line.text.index(b"r-xp") + 4,
                "path-is-a-directory": at_path + len("/opt/app/"),
                "path-cut": at_path + len(prog) - 2,
                "no-newline": line.end - 1}
        perf = shutil.which("perf")
        work = tempfile.mkdtemp(dir=self.tmp)
        path = os.path.join(work, "cut.prof")
        for label, n in cuts.items():
            with self.subTest(cut=label, at=n):
                with open(path, "wb") as f:
                    f.write(c.full[:n])
                p, doc = self.dump(path, cache=False)
                self.assertEqual(p.returncode, 0, describe(p))
                self.assertEqual([m["path"] for m in doc["mappings"]], [libc], describe(p))
                self.assertEqual(doc["total_samples"], 8)
                cut_warn = [w for w in doc["warnings"] if "mapped-objects text is truncated" in w]
                self.assertEqual(len(cut_warn), 1, doc["warnings"])
                self.assertIn("%s: offset %d: " % (path, line.offset), cut_warn[0])
                self.assertEqual(doc["truncated_at"], line.offset)
                out = os.path.join(work, "cut.data")
                q = run([PERFGRAFT, "gperf", path, "-o", out])
                self.assertEqual(q.returncode, 0, describe(q))
                self.assertIn("offset %d: the mapped-objects text is truncated" % line.offset,
                              q.err)
                if perf:
                    r = run(["perf", "--buildid-dir", work, "script", "-i", out,
                             "--show-mmap-events", "-F", "ip"])
                    self.assertEqual(r.returncode, 0, describe(r))
                    files = re.findall(r"PERF_RECORD_MMAP2 .*\]: [rwxsp-]+ (.*)$", r.out, re.M)
                    self.assertEqual(files, [libc], r.out[:2000])
                os.unlink(out)
        # the complete profile has both mappings and no warning
        with open(path, "wb") as f:
            f.write(c.full)
        p, doc = self.dump(path, cache=False)
        self.assertEqual(([m["path"] for m in doc["mappings"]], doc["warnings"]),
                         ([libc, prog], []))

    def _convert_bounded(self, path, limit=64 << 20, timeout=300):
        """perfgraft gperf PATH -o OUT with output files capped at limit
        bytes (the converter of issue 12 wrote 8 GB in 20 s); (process,
        output size, CPU seconds, directory).  CPU time, not wall time:
        the machine may be busy with other work."""
        def cap():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        d = tempfile.mkdtemp(dir=self.tmp)
        out = os.path.join(d, "out.data")
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            p = subprocess.run([PERFGRAFT, "gperf", path, "-o", out], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=timeout, preexec_fn=cap)
        except subprocess.TimeoutExpired:
            self.fail("perfgraft gperf %s: still running after %d s" % (path, timeout))
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        p.out = p.stdout.decode("utf-8", "surrogateescape")
        p.err = p.stderr.decode("utf-8", "surrogateescape")
        size = os.path.getsize(out) if os.path.exists(out) else -1
        return p, size, cpu, d

    def _check_weighted(self, name, data, counts_at, period_us):
        """data: a profile whose counts (by record offset: counts_at) sum to
        far more than the default --max-samples: converted at once into a
        small perf.data of one sample per distinct stack, whose periods
        add up to the ticks x the period."""
        path = os.path.join(self.tmp, name + ".prof")
        with open(path, "wb") as f:
            f.write(data)
        _p, doc = self.dump(path, cache=False)
        total = doc["total_samples"]
        self.assertEqual(total, sum(s["count"] for s in doc["stacks"]))
        self.assertGreater(total, 10 ** 6)
        p, size, cpu, d = self._convert_bounded(path)
        self.assertEqual(p.returncode, 0, describe(p))
        self.assertLess(size, 1 << 20, describe(p))
        self.assertLess(cpu, 10.0)
        big = max(counts_at, key=counts_at.get)
        self.assertIn("%s: %d ticks, more than --max-samples 1000000" % (path, total), p.err)
        self.assertIn("largest record count %d, offset %d" % (counts_at[big], big), p.err)
        out = os.path.join(d, "out.data")
        q = run([PERFGRAFT, "dump", "--json", out])
        self.assertEqual(q.returncode, 0, describe(q))
        rb = json.loads(q.out)
        self.assertEqual(rb["summary"]["by_name"]["SAMPLE"], len(doc["stacks"]))
        if shutil.which("perf"):
            r = run(["perf", "--buildid-dir", d, "script", "-i", out, "-F", "period"])
            self.assertEqual(r.returncode, 0, describe(r))
            periods = sorted(int(x) for x in r.out.split())
            self.assertEqual(periods, sorted(s["count"] * period_us * 1000
                                             for s in doc["stacks"]))
            r = run(["perf", "--buildid-dir", d, "report", "-i", out, "--stdio",
                     "--sort", "sym"])
            self.assertEqual(r.returncode, 0, describe(r))
            self.assertIn("# Event count (approx.): %d\n" % (total * period_us * 1000), r.out)
        tool = gen.google_pprof()
        if tool is not None:
            self.assertEqual(gen.perl_run(path, tool)[0], total)
        return total

    def test_count_near_4e9_small_output(self):
        """Issue 12 point 8: one record counting 3,999,999,000 ticks (the
        converter wrote one sample per tick: 8 GB in 20 s)."""
        self.need_binary()
        st = gen.base_stacks()
        c = gen.build("count-4e9", records=st[:3] + [(3999999000, st[3][1])] + st[4:],
                      maps=gen.base_maps())
        self._check_weighted(c.name, c.full, {c.items[3].offset: 3999999000}, 10000)

    def test_flipped_count_bytes_small_output(self):
        """Issue 12 point 8: random byte flips in counts (9 of 6,000 wrote
        more than 400 MB): one byte of the count slot flipped in four
        records of base, bytes 1-3 (up to 0xff << 24)."""
        self.need_binary()
        c = self.cases["base"]
        data = bytearray(c.full)
        counts = {}
        for k, (byte, val) in zip((0, 2, 5, 8), ((3, 0xc7), (2, 0x41), (1, 0x9e), (3, 0x02))):
            it = c.items[k]
            data[it.offset + byte] ^= val
            counts[it.offset] = struct.unpack_from("<Q", data, it.offset)[0]
        self._check_weighted("flips", bytes(data), counts, 10000)

    def test_period_beyond_64bit_ns_is_refused(self):
        """A sampling period whose nanoseconds do not fit 64 bits (a
        damaged header: gperftools writes at most 1,000,000 us) is refused
        naming the period slot, with no output, instead of a wrapped
        period; the largest that fits is converted."""
        self.need_binary()
        big = (1 << 64) // 1000 + 1      # a 32-bit slot always fits
        c = gen.build("period-huge", period=big, records=gen.base_stacks()[:2],
                      maps=gen.base_maps())
        path = os.path.join(self.tmp, "period-huge.prof")
        c.write(path)
        p, _out, names, _ = self.convert(path)
        self.assertEqual(p.returncode, gen.EXIT_BADINPUT, describe(p))
        self.assertIn("%s: offset 24: a sampling period of %d us" % (path, big), p.err)
        self.assertEqual(names, [])
        ok = gen.build("period-max", period=(1 << 64) // 1000 // 16,
                       records=[(1, [gen.PROG + 0x1A8])], maps=gen.base_maps())
        ok.write(path)
        p, _out, names, _ = self.convert(path)
        self.assertEqual((p.returncode, names), (0, ["out.data"]), describe(p))

    def test_no_output_for_fatal_headers(self):
        """Every fatal case: EXIT_BADINPUT, nothing at -o, not even a temp
        file."""
        self.need_binary()
        fatal = [n for n, c in self.cases.items() if c.exit]
        self.assertGreaterEqual(len(fatal), 8)
        bad = []
        for n in fatal:
            p, out, names, _ = self.convert(self.path(n))
            if p.returncode != gen.EXIT_BADINPUT or names:
                bad.append("%s: exit %d, left %s: %s" % (n, p.returncode, names,
                                                        p.err.strip()[-200:]))
        self.assertEqual(bad, [], "\n".join(bad))

    def test_dump_leaves_nothing(self):
        self.need_binary()
        before = sorted(os.listdir(self.gendir))
        for n in ("base", "maps-junk", "garbage", "trunc-pc-mid"):
            self.dump(self.path(n), cache=False)
        self.assertEqual(sorted(os.listdir(self.gendir)), before)

    def _sweep(self, case, convert_every=0):
        """Every cut 0..size of the file: no crash; exit 1 below the header,
        0 from it on; the records before the cut kept, a warning at the
        offset of the record the cut falls in; mappings only after a
        complete trailer, one per complete line.  convert_every=k also runs
        the converter on every k-th cut."""
        self.need_binary()
        work = tempfile.TemporaryDirectory(prefix="perfgraft-gperf-cut-")
        self.addCleanup(work.cleanup)
        path = os.path.join(work.name, case.name + ".prof")
        failures = []
        classes = {}

        def note(tag, msg):
            k = re.sub(r"\d+", "N", msg)
            if k in classes:
                classes[k][1] += 1
            else:
                classes[k] = [tag + ": " + msg, 1]
                failures.append(k)

        for n in range(len(case.full) + 1):
            t = gen.truncate(case, n)
            t.write(path)
            p, doc = self.dump(path, cache=False)
            tag = "cut %d" % n
            if p.returncode < 0:
                note(tag, "killed by signal %d" % -p.returncode)
                continue
            if t.exit:
                if p.returncode == 0:
                    note(tag, "exit 0, expected a failure")
            elif p.returncode != 0:
                note(tag, "exit %d: %s" % (p.returncode, p.err.strip()[:200]))
            elif doc is None:
                note(tag, "stdout is not JSON")
            else:
                for pr in doc_problems(t, doc)[:4]:
                    note(tag, pr.split("\n")[0])
            if convert_every and n % convert_every == 0:
                q, out, names, head = self.convert(path)
                if q.returncode < 0:
                    note(tag, "gperf killed by signal %d" % -q.returncode)
                elif t.exit:
                    if q.returncode != gen.EXIT_BADINPUT or names:
                        note(tag, "gperf exit %d (expected %d), left %s"
                             % (q.returncode, gen.EXIT_BADINPUT, names))
                elif t.expected_convert_exit() == 0 and t.json["total_samples"]:
                    if q.returncode != 0 or not head.startswith(b"PERFILE2"):
                        note(tag, "gperf exit %d: %s" % (q.returncode,
                                                         q.err.strip()[:200]))
        report = ["%s  [%d cut(s) like this]" % (classes[k][0], classes[k][1])
                  for k in failures]
        self.assertEqual(report, [], "\n".join(report[:30]))

    def test_truncation_sweep_base(self):
        self._sweep(self.cases["base"], convert_every=7)

    def test_truncation_sweep_small_be32(self):
        self._sweep(self.cases["small-be32"], convert_every=5)

    def test_truncation_sweep_hdr5_be32(self):
        self._sweep(self.cases["hdr5-be32"])

    def test_truncation_sweep_zeropc(self):
        self._sweep(self.cases["zeropc-depth1-le32"])

    def test_seed_corpus(self):
        """fuzz/corpus-gperf holds exactly what gperf_gen.seeds() writes."""
        if not os.path.isdir(SEED_DIR):
            self.fail("%s missing (python3 fuzz/make-gperf-seeds.py)" % SEED_DIR)
        with tempfile.TemporaryDirectory(prefix="gperf-seeds-") as d:
            names = gen.seeds(d)
            self.assertEqual(sorted(os.listdir(SEED_DIR)), sorted(names))
            for n in names:
                with open(os.path.join(d, n), "rb") as f:
                    want = f.read()
                with open(os.path.join(SEED_DIR, n), "rb") as f:
                    got = f.read()
                self.assertLessEqual(len(got), 4096, n)
                self.assertEqual(got, want, "%s differs from the generator's" % n)


def _numeric(x):
    if isinstance(x, list):
        return [_numeric(v) for v in x]
    if isinstance(x, dict):
        return {k: _numeric(v) for k, v in x.items()}
    h = hexval(x)
    return h if h is not None else x


def _add_case_tests():
    for name, c in gen.cases().items():
        safe = re.sub(r"\W", "_", name)

        def td(self, name=name):
            self.check_dump(name)
        td.__doc__ = "dump --json %s: %s" % (name, c.note or "")
        setattr(GperfEdgeTest, "test_dump_" + safe, td)

        def tc(self, name=name):
            self.check_convert(name)
        tc.__doc__ = "gperf %s -o OUT: exit status, warnings, output" % name
        setattr(GperfEdgeTest, "test_convert_" + safe, tc)


_add_case_tests()


class GperfGeneratorTest(unittest.TestCase):
    """The generator itself: structure and perl pprof cross-check."""

    @classmethod
    def setUpClass(cls):
        cls.cases = gen.cases()

    def test_record_structure(self):
        """Records tile the binary part from the end of the header; the
        trailer is 0,1,0; slot values read back as built."""
        import struct
        for name, c in self.cases.items():
            if not c.items or c.fatal:
                continue
            with self.subTest(case=name):
                fmt = c.bo + ("Q" if c.bits == 64 else "I")
                w = c.word
                pos = c.hdr_len
                for it in c.items:
                    self.assertEqual(it.offset, pos, repr(it))
                    if it.end <= len(c.full):
                        cnt, depth = struct.unpack_from(fmt + fmt[1], c.full,
                                                        it.offset)
                        self.assertEqual((cnt, depth), (it.count, it.depth))
                        pcs = struct.unpack_from(c.bo + fmt[1] * len(it.pcs),
                                                 c.full,
                                                 it.offset + 2 * w)
                        self.assertEqual(list(pcs), it.pcs)
                    pos = it.end
                if c.items[-1].kind == "trailer":
                    self.assertEqual(c.items[-1].count, 0)
                    self.assertEqual(c.items[-1].pcs, [0])

    def test_known_perl_differences(self):
        """Where the contract and perl pprof count differently (documented,
        and nowhere else): empty records (perl counts a depth-0 record),
        records cut short by the end of the file (perl counts them), depth
        > 1016, and the versions we refuse.  A zero-PC record ends the data
        for both, so those totals are equal."""
        diff = sorted(n for n, c in self.cases.items()
                      if c.perl[0] is not None and not c.exit
                      and c.perl[0] != c.json["total_samples"])
        for n in ("zeropc-mid", "zeropc-depth1", "zeropc-depth1-le32"):
            self.assertEqual(self.cases[n].perl[0], self.cases[n].json["total_samples"], n)
        self.assertEqual(diff, sorted([
            "empty-records", "deep-1017", "trunc-depth", "trunc-depth-part",
            "trunc-pcs", "trunc-pc-mid", "trunc-last-pc", "trunc-pc-be32"]))

    def test_perl_cross_check(self):
        """google-pprof --text prints the totals (or errors) perl_model says."""
        tool = gen.google_pprof()
        if tool is None:
            self.skipTest("google-pprof (perl pprof) not installed")
        with tempfile.TemporaryDirectory(prefix="gperf-perl-") as d:
            probs = []
            for name, c in sorted(self.cases.items()):
                path = os.path.join(d, name + ".prof")
                c.write(path)
                probs += gen.perl_check(c, path, tool)
            self.assertEqual(probs, [], "\n".join(probs))


if __name__ == "__main__":
    unittest.main()
