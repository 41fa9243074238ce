#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""perfgraft's jitdump extension records, INLINE_INFO and UNLOAD
(docs/jitdump-extensions.md), on the ext_* cases of tests/jitdump_gen.py:
a valid dump (depth 2 and 3 chains, shared strings, a file 0xffffffff,
adjacent chains sharing a level, UNLOADs), INLINE_INFO damaged in every
count and index (dropped by the reader with a warning), ranges the code
model drops (empty, overlapping, out of order, outside the code, for other
code), two INLINE_INFO before one LOAD, and records shorter than their
fixed part (skipped with a warning, as perf skips them); each little-endian
x86-64, big-endian ppc64 and i386.  ShortRecords: inject, elf and
symbolize on a dump of 20 LOADs with one short UNLOAD or INLINE_INFO among
them use all 20 functions; a record whose size is itself impossible stays
an error (too small) or a truncated tail (past the end).

Checked: the exact `dump --json` record fields and summary, the exact
warnings and errors with their offsets (dump, dump --json, elf), the text
dump; `perfgraft elf` images (packed and --per-function) that pass
llvm-dwarfdump --verify, readelf -wi and eu-readelf --debug-dump=info, with
exactly the expected DW_TAG_inlined_subroutine entries per image and
`addr2line -f -i` giving each kept chain; images of a file whose dropped
INLINE_INFO and UNLOAD records are left out are byte-identical.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import dwarf_dies  # noqa: E402
import jitdump_gen as gen  # noqa: E402
import perfdata_gen  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
TIMEOUT = 120
DWARFDUMP = next((t for t in ("llvm-dwarfdump-14", "llvm-dwarfdump") if shutil.which(t)),
                 "llvm-dwarfdump-14")


def run(args, cwd=None):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                       timeout=TIMEOUT)
    p.out = p.stdout.decode("utf-8", "surrogateescape")
    p.err = p.stderr.decode("utf-8", "surrogateescape")
    return p


def describe(p):
    return "command: %s\nexit: %s\nstdout:\n%s\nstderr:\n%s" % (
        " ".join(map(str, p.args)), p.returncode, p.out[-3000:], p.err[-3000:])


def warn_lines(path, warns):
    return ["perfgraft: warning: %s: offset %d: %s" % (path, o, m) for o, m in warns]


def stderr_diags(p):
    """perfgraft's warning and error lines on stderr (not its summary)."""
    return [l for l in p.err.splitlines()
            if l.startswith("perfgraft: warning: ") or re.match(r"^perfgraft: .*: offset \d+: ", l)]


def parse_list(out):
    rows = []
    for line in out.splitlines():
        f = line.split("\t")
        rows.append(dict(code_index=int(f[0]), code_addr=int(f[1], 16), image=f[3],
                         pgoff=int(f[4], 16)))
    return rows


def a2l_chains(img, addrs):
    """{addr: [(func, file, line)]} from one addr2line -a -f -i call."""
    p = run(["addr2line", "-a", "-f", "-i", "-e", img] + ["0x%x" % a for a in addrs])
    if p.returncode != 0:
        raise AssertionError(describe(p))
    res, cur, lines, i = {}, None, p.out.splitlines(), 0
    while i < len(lines):
        if re.match(r"^0x[0-9a-f]+$", lines[i]):
            cur = int(lines[i], 16)
            res[cur] = []
            i += 1
            continue
        m = re.match(r"^(.*):(\d+|\?)(?: \(discriminator \d+\))?$", lines[i + 1])
        res[cur].append((lines[i], m.group(1), int(m.group(2)) if m.group(2) != "?" else None))
        i += 2
    return res


def eu_dies(img):
    """([(tag, name of the DIE or of its abstract origin)], stderr, exit)."""
    p = run(["eu-readelf", "--debug-dump=info", img])
    dies = dwarf_dies.parse(p.out)
    names = {d["off"]: d.get("name", "").strip('"') for d in dies}
    out = []
    for d in dies:
        if d["tag"] == "inlined_subroutine":
            out.append((d["tag"], names.get(dwarf_dies.origin(d)), int(d["call_line"])))
        elif d["tag"] == "subprogram":
            out.append((d["tag"], d.get("name", "").strip('"'), "inline" in d))
    return out, p


class ExtensionRecords(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="perfgraft-extrec-")
        cls.tmp = cls._tmp.name
        os.mkdir(os.path.join(cls.tmp, "cases"))
        cls.cases = {n: c for n, c in gen.cases(os.path.join(cls.tmp, "cases")).items()
                     if c[1].ext}
        cls.cwd = os.path.join(cls.tmp, "cases")
        cls._json = {}

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def setUp(self):
        if not os.access(PERFGRAFT, os.X_OK):
            self.fail("perfgraft binary not found: %s" % PERFGRAFT)

    def pg(self, *args, cwd=None):
        return run([PERFGRAFT] + list(args), cwd=cwd or self.cwd)

    def names(self, pred=lambda e: True):
        return sorted(n for n, (_, e) in self.cases.items() if pred(e))

    def dump_json(self, name):
        if name not in self._json:
            p = self.pg("dump", "--json", name + ".dump")
            self._json[name] = (p, json.loads(p.out))
        return self._json[name]

    def need(self, *tools):
        missing = [t for t in tools if not shutil.which(t)]
        if missing:
            self.skipTest("missing tool(s): " + ", ".join(missing))

    # ------------------------------------------------------------------
    def test_01_dump_json_records(self):
        """Every record's exact fields (INLINE_INFO and UNLOAD whole), the
        summary, the warnings with their offsets (JSON and stderr)."""
        self.assertEqual(len(self.names()), 81)
        for name in self.names(lambda e: e.exit == 0):
            path, e = self.cases[name]
            with self.subTest(case=name):
                p, doc = self.dump_json(name)
                fname = name + ".dump"
                self.assertEqual(p.returncode, 0, describe(p))
                self.assertIsNone(doc["error"])
                want = [r.json for r in e.builder.records]
                got = doc["records"]
                self.assertEqual([r["offset"] for r in got], [r["offset"] for r in want])
                for g, w in zip(got, want):
                    if w["type"] in ("INLINE_INFO", "UNLOAD"):
                        self.assertEqual(g, w, "record @%d" % w["offset"])
                    else:
                        self.assertEqual({k: g.get(k) for k in w}, w, "record @%d" % w["offset"])
                self.assertEqual(doc["summary"], e.summary)
                wl = ["%s: offset %d: %s" % (fname, o, m) for o, m in e.warns]
                self.assertEqual(doc["warnings"], wl)
                self.assertEqual(stderr_diags(p), warn_lines(fname, e.warns), describe(p))

    def test_02_dump_text(self):
        for name in self.names(lambda e: e.exit == 0):
            path, e = self.cases[name]
            with self.subTest(case=name):
                fname = name + ".dump"
                p = self.pg("dump", fname)
                self.assertEqual(p.returncode, 0, describe(p))
                self.assertEqual(stderr_diags(p), warn_lines(fname, e.warns), describe(p))
                for r in e.builder.records:
                    if r.kind == "INLINE_INFO":
                        j = r.json
                        line = re.search(r"(?m)^ +%d  INLINE_INFO +time %d  code 0x%x strings %d "
                                         r"ranges %d(.*)$" % (r.offset, r.timestamp, j["code_addr"],
                                                              j["nr_strings"], j["nr_ranges"]),
                                         p.out)
                        self.assertIsNotNone(line, "INLINE_INFO @%d\n%s" % (r.offset, p.out))
                        self.assertEqual(line.group(1), " (dropped: damaged)" if j["dropped"] else "")
                        for c in j["ranges"]:
                            chain = " <- ".join("%s (%s:%d)" % (f["func"], f["file"] or "??", f["line"])
                                                for f in c["frames"])
                            self.assertIn("+0x%x..+0x%x  %s\n" % (c["off"], c["off"] + c["len"], chain),
                                          p.out)
                    elif r.kind == "UNLOAD":
                        j = r.json
                        self.assertRegex(p.out, r"(?m)^ +%d  UNLOAD +time %d  pid %d tid %d code 0x%x "
                                         r"size %d index %d$" % (r.offset, r.timestamp, j["pid"], j["tid"],
                                                                j["code_addr"], j["code_size"],
                                                                j["code_index"]))
                s = e.summary
                self.assertIn(", %d INLINE_INFO, %d UNLOAD\n" % (s["inline_infos"], s["unloads"]),
                              p.out)

    def test_03_short_records_skipped(self):
        """INLINE_INFO / UNLOAD shorter than the fixed part: skipped with one
        warning at the record's offset (dump, dump --json, elf), exit 0,
        every LOAD there, the INLINE_INFO pending before it kept."""
        names = self.names(lambda e: bool(e.skipped))
        self.assertEqual(len(names), 12)
        for name in names:
            path, e = self.cases[name]
            fname = name + ".dump"
            want = warn_lines(fname, e.skipped)
            self.assertEqual(len(want), 1)
            self.assertRegex(want[0], r"record of \d+ bytes is smaller than its \d+-byte fixed "
                             r"part; record skipped$")
            with self.subTest(case=name, cmd="dump"):
                p = self.pg("dump", fname)
                self.assertEqual(p.returncode, 0, describe(p))
                self.assertEqual(stderr_diags(p), want, describe(p))
            with self.subTest(case=name, cmd="dump --json"):
                p, doc = self.dump_json(name)
                self.assertEqual(p.returncode, 0, describe(p))
                self.assertIsNone(doc["error"])
                self.assertEqual([r["type"] for r in doc["records"]],
                                 ["INLINE_INFO", "DEBUG_INFO", "LOAD"] * 2)
                self.assertEqual(doc["summary"]["loads"], 2)
            with self.subTest(case=name, cmd="elf"):
                p, _, rows = self.elf(name)
                self.assertEqual(stderr_diags(p), want, describe(p))
                self.assertEqual(sorted(r["code_index"] for r in rows), [0, 1])

    def test_04_byte_orders_agree(self):
        """Big-endian ppc64 and little-endian x86-64 dumps give the same
        records and warnings; i386 the same chains."""
        for name in self.names(lambda e: e.exit == 0 and e.bo == "<" and e.arch == "x86_64"):
            base = name[:-len("_le64")]
            with self.subTest(case=base):
                _, le = self.dump_json(base + "_le64")
                _, be = self.dump_json(base + "_be64")
                _, l32 = self.dump_json(base + "_le32")
                self.assertEqual(be["records"], le["records"])
                self.assertEqual(be["summary"], le["summary"])
                self.assertEqual([w.split(": ", 1)[1] for w in be["warnings"]],
                                 [w.split(": ", 1)[1] for w in le["warnings"]])
                self.assertEqual([r.get("ranges") for r in l32["records"]],
                                 [r.get("ranges") for r in le["records"]])

    def elf(self, name, per_function=False, data=None):
        """perfgraft elf --list on the case (or on data written under the
        case's name in another directory): (proc, outdir, rows)."""
        work = tempfile.mkdtemp(dir=self.tmp)
        src = os.path.join(self.cwd, name + ".dump")
        if data is not None:
            src = os.path.join(work, name + ".dump")
            with open(src, "wb") as f:
                f.write(data)
        out = os.path.join(work, "out")
        os.mkdir(out)
        args = ["elf", name + ".dump", "-o", out, "--list"] + (["--per-function"] if per_function else [])
        p = self.pg(*args, cwd=os.path.dirname(src))
        self.assertEqual(p.returncode, 0, describe(p))
        return p, out, parse_list(p.out)

    def test_05_elf_images(self):
        """Warnings (reader + model) exact; every image passes llvm-dwarfdump
        --verify, readelf -wi, eu-readelf; inlined subroutines exactly for
        the kept chains; addr2line -f -i gives each kept chain."""
        self.need("readelf", "eu-readelf", DWARFDUMP, "addr2line")
        checked = 0
        for name in self.names(lambda e: e.exit == 0):
            path, e = self.cases[name]
            for per_function in (False, True):
                with self.subTest(case=name, per_function=per_function):
                    n = self.check_elf(name, e, per_function)
                    self.assertEqual(n, sum(len(f.chains) for f in e.funcs))
                    checked += n
        # 3 layouts x 2 modes x (6 valid, 1 after each of 16 victims, twice 3,
        # model cases 2+2+1+2+3, 4 short-record cases with 2 each)
        self.assertEqual(checked, 3 * 2 * (6 + 16 + 3 + 10 + 8))

    def check_elf(self, name, e, per_function):
        fname = name + ".dump"
        p, out, rows = self.elf(name, per_function)
        self.assertEqual(sorted(stderr_diags(p)), sorted(warn_lines(fname, e.warns + e.model_warns)),
                         describe(p))
        funcs = {f.code_index: f for f in e.funcs}
        self.assertEqual(sorted(r["code_index"] for r in rows), sorted(funcs))
        by_img = {}
        for r in rows:
            by_img.setdefault(r["image"], []).append((r, funcs[r["code_index"]]))
        self.assertEqual(sorted(os.listdir(out)), sorted(by_img))
        n = 0
        for img, pairs in sorted(by_img.items()):
            ip = os.path.join(out, img)
            d = run([DWARFDUMP, "--verify", ip])
            self.assertEqual(d.returncode, 0, describe(d))
            d = run(["readelf", "-wi", ip])
            self.assertEqual(d.returncode, 0, describe(d))
            self.assertFalse(re.search(r"(?i)warning|error", d.out + d.err), describe(d))
            dies, d = eu_dies(ip)
            self.assertEqual((d.returncode, d.err.strip()), (0, ""), describe(d))
            self.assertNotIn("invalid", d.out.lower())
            inl = [x for x in dies if x[0] == "inlined_subroutine"]
            self.assertEqual(len(inl), sum(f.dies for _, f in pairs),
                             "%s: inlined subroutines %r" % (img, inl))
            want_abstract = sorted(set(fr["func"] for _, f in pairs for c in f.chains
                                       for fr in c["frames"][:-1]))
            got_abstract = sorted(set(x[1] for x in dies if x[0] == "subprogram" and x[2]))
            self.assertEqual(got_abstract, want_abstract, img)
            # one address per kept chain: the chain's first byte, and the
            # first byte of every function (no chain there unless one starts at 0)
            addrs, expect = [], {}
            for r, f in pairs:
                for c in f.chains:
                    a = r["pgoff"] + c["off"]
                    row = max((l for l in f.debug or [] if l["addr"] - f.code_addr <= c["off"]),
                              key=lambda l: l["addr"], default=None)
                    fr = c["frames"]
                    want = [(fr[0]["func"], row["file"].decode() if row else "??",
                             row["line"] if row else 0)]
                    want += [(x["func"], x["file"] or "??", x["line"]) for x in fr[1:]]
                    addrs.append(a)
                    expect[a] = want
                if not any(c["off"] == 0 for c in f.chains):
                    addrs.append(r["pgoff"])
                    expect[r["pgoff"]] = None
            got = a2l_chains(ip, addrs)
            for a in addrs:
                if expect[a] is None:
                    self.assertEqual(len(got[a]), 1, "%s 0x%x: %r" % (img, a, got[a]))
                else:
                    self.assertEqual(got[a], expect[a], "addr2line -f -i -e %s 0x%x" % (img, a))
                    n += 1
        return n

    def test_06_dropped_is_absent(self):
        """A dropped or replaced INLINE_INFO, one no LOAD follows, one for
        other code, and UNLOAD: the images are those of the file without
        them, byte for byte."""
        for name in self.names(lambda e: e.exit == 0):
            path, e = self.cases[name]
            used = set(id(f.inline["rec"]) for f in e.funcs if f.chains)
            leave = (lambda r: r.kind == "UNLOAD" or
                     (r.kind == "INLINE_INFO" and id(r) not in used))
            if not any(leave(r) for r in e.builder.records):
                continue
            with self.subTest(case=name):
                p1, out1, rows1 = self.elf(name)
                p2, out2, rows2 = self.elf(name, data=e.builder.without(leave))
                self.assertEqual(stderr_diags(p2), [], describe(p2))
                self.assertEqual([(r["code_index"], r["image"], r["pgoff"]) for r in rows1],
                                 [(r["code_index"], r["image"], r["pgoff"]) for r in rows2])
                for img in sorted(os.listdir(out1)):
                    with open(os.path.join(out1, img), "rb") as a, \
                            open(os.path.join(out2, img), "rb") as b:
                        self.assertTrue(a.read() == b.read(), "%s differs" % img)

    def test_07_fuzz_seeds(self):
        """fuzz/corpus holds exactly what fuzz/make-seeds.py writes, and
        seeds with both records that dump reads without an error."""
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "make_seeds", os.path.join(ROOT, "fuzz", "make-seeds.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        seeds = mod.seeds()
        corpus = os.path.join(ROOT, "fuzz", "corpus")
        self.assertEqual(sorted(os.listdir(corpus)), sorted(seeds))
        for name, data in seeds.items():
            with open(os.path.join(corpus, name), "rb") as f:
                self.assertEqual(f.read(), data, name)
        ext = {}
        for name in sorted(seeds):
            p = self.pg("dump", "--json", os.path.join(corpus, name))
            doc = json.loads(p.out)
            self.assertIsNone(doc["error"], name)
            for r in doc["records"]:
                ext.setdefault(r["type"], set()).add(name)
        self.assertEqual(ext.get("INLINE_INFO"), {"09-inline-unload.jd", "10-inline-be-damaged.jd"})
        self.assertEqual(ext.get("UNLOAD"), {"09-inline-unload.jd", "10-inline-be-damaged.jd"})


class ShortRecords(unittest.TestCase):
    """One extension record shorter than its fixed part among 20 LOADs:
    inject, elf and symbolize use all 20 functions, with one warning naming
    the file and the record's offset, exit 0 (perf skips such a record as
    an unknown id; perfgraft gave up the whole dump).  A record whose own
    size is impossible is still what it was: an error when smaller than
    the record header, a truncated tail when past the end."""

    N = 20
    PID = perfdata_gen.PID

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="perfgraft-extshort-")
        self.addCleanup(self._tmp.cleanup)
        self.tmp = self._tmp.name
        # a perf.data whose marker names TMP/jit-PID.dump (rewritten below)
        perfdata_gen.make_case(self.tmp, "p")
        self.dump = os.path.join(self.tmp, "jit-%d.dump" % self.PID)

    def addr(self, i):
        return perfdata_gen.JIT_BASE + 0x1000 + i * 0x100

    def write(self, rid, size, total_size=None):
        """20 LOADs with the record (id rid, size bytes, total_size saying
        so unless given) after the 10th; returns its offset."""
        t0 = perfdata_gen.T0
        b = gen.JitdumpBuilder(pid=self.PID, timestamp=t0)
        at = None
        for i in range(self.N):
            if i == self.N // 2:
                at = b.offset
                rec = bytearray(gen.short_record(b, rid, size, t0 + 19_500 + i * 1000))
                if total_size is not None:
                    rec[4:8] = b.u32(total_size)
                b.raw(bytes(rec))
            b.load(b"JS:*f%02d" % i, gen.x86_64_code(0x40, i), self.addr(i), i + 1,
                   timestamp=t0 + 20_000 + i * 1000)
        b.close(timestamp=t0 + 90_000)
        b.write(self.dump)
        return at

    def pg(self, *args):
        return run([PERFGRAFT] + list(args), cwd=self.tmp)

    def expect_skipped(self, p, path, at, what, size, fixed):
        self.assertEqual(p.returncode, 0, describe(p))
        self.assertEqual(stderr_diags(p), [
            "perfgraft: warning: %s: offset %d: %s record of %d bytes is smaller than its "
            "%d-byte fixed part; record skipped" % (path, at, what, size, fixed)], describe(p))

    def check_all_used(self, rid, size):
        what = "UNLOAD" if rid == gen.JIT_CODE_UNLOAD else "INLINE_INFO"
        fixed = gen.UNLOAD_FIXED if rid == gen.JIT_CODE_UNLOAD else gen.INLINE_FIXED
        at = self.write(rid, size)
        want = [self.addr(i) for i in range(self.N)]
        with self.subTest(what=what, size=size, cmd="inject"):
            p = self.pg("inject", "-i", "p.data", "-o", "out.data")
            self.expect_skipped(p, self.dump, at, what, size, fixed)
            self.assertIn("(%d LOAD, 0 MOVE)" % self.N, p.err)
            self.assertIn("; %d MMAP2 injected" % self.N, p.err)
            d = self.pg("dump", "--json", "out.data")
            self.assertEqual(d.returncode, 0, describe(d))
            images = os.path.join(self.tmp, "out.data.d")
            starts = sorted(r["start"] for r in json.loads(d.out)["records"]
                            if r["name"] == "MMAP2"
                            and r["filename"].startswith(images + os.sep))
            self.assertEqual(starts, want)
        with self.subTest(what=what, size=size, cmd="elf"):
            p = self.pg("elf", os.path.basename(self.dump), "-o", "elf", "--list")
            self.expect_skipped(p, os.path.basename(self.dump), at, what, size, fixed)
            self.assertEqual(sorted(r["code_addr"] for r in parse_list(p.out)), want)
        with self.subTest(what=what, size=size, cmd="symbolize"):
            p = self.pg("symbolize", os.path.basename(self.dump),
                        *["0x%x" % (a + 0x10) for a in want])
            self.expect_skipped(p, os.path.basename(self.dump), at, what, size, fixed)
            self.assertEqual(p.out.splitlines(),
                             ["0x%x\tJS:*f%02d+0x10\t??:0" % (a + 0x10, i)
                              for i, a in enumerate(want)])

    def test_short_unload(self):
        self.check_all_used(gen.JIT_CODE_UNLOAD, 16)

    def test_short_unload_one_byte_less(self):
        self.check_all_used(gen.JIT_CODE_UNLOAD, gen.UNLOAD_FIXED - 1)

    def test_short_inline_info(self):
        self.check_all_used(gen.JIT_CODE_INLINE_INFO, 16)

    def test_short_inline_info_one_byte_less(self):
        self.check_all_used(gen.JIT_CODE_INLINE_INFO, gen.INLINE_FIXED - 1)

    def test_impossible_sizes_unchanged(self):
        """A size below the 16-byte record header is damage: exit 1 at its
        offset; one past the end is a truncated tail: the LOADs before it,
        a warning, exit 0.  For an extension id as for any other."""
        for rid in (gen.JIT_CODE_UNLOAD, gen.JIT_CODE_INLINE_INFO, 0x7067ffff):
            with self.subTest(id=rid, total_size=8):
                at = self.write(rid, 16, total_size=8)
                p = self.pg("elf", os.path.basename(self.dump), "-o", "elf8", "--list")
                self.assertEqual(p.returncode, 1, describe(p))
                self.assertEqual(stderr_diags(p), [
                    "perfgraft: %s: offset %d: record total_size 8 is smaller than the "
                    "16-byte record header" % (os.path.basename(self.dump), at)], describe(p))
            with self.subTest(id=rid, total_size="past the end"):
                size = os.path.getsize(self.dump)
                at = self.write(rid, 16, total_size=size)
                p = self.pg("elf", os.path.basename(self.dump), "-o", "elfbig", "--list")
                self.assertEqual(p.returncode, 0, describe(p))
                self.assertEqual(stderr_diags(p), [
                    "perfgraft: warning: %s: offset %d: record (id %d) needs %d bytes but "
                    "only %d remain; truncated tail ignored"
                    % (os.path.basename(self.dump), at, rid, size, size - at)], describe(p))
                self.assertEqual(sorted(r["code_addr"] for r in parse_list(p.out)),
                                 [self.addr(i) for i in range(self.N // 2)])


if __name__ == "__main__":
    unittest.main()
