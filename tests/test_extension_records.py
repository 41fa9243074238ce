#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""perfgraft's jitdump extension records, INLINE_INFO and UNLOAD
(docs/jitdump-extensions.md), on the ext_* cases of tests/jitdump_gen.py:
a valid dump (depth 2 and 3 chains, shared strings, a file 0xffffffff,
adjacent chains sharing a level, UNLOADs), INLINE_INFO damaged in every
count and index (dropped by the reader with a warning), ranges the code
model drops (empty, overlapping, out of order, outside the code, for other
code), two INLINE_INFO before one LOAD, and records shorter than their
fixed part (fatal); each little-endian x86-64, big-endian ppc64 and i386.

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

    def test_03_fatal_short_records(self):
        """INLINE_INFO / UNLOAD shorter than the fixed part: exit 1, the exact
        error at the record's offset (dump, dump --json, elf); the records
        before it listed."""
        names = self.names(lambda e: e.exit == 1)
        self.assertEqual(len(names), 12)
        for name in names:
            path, e = self.cases[name]
            fname = name + ".dump"
            err = "%s: offset %d: %s" % (fname, e.error[0], e.error[1])
            with self.subTest(case=name, cmd="dump"):
                p = self.pg("dump", fname)
                self.assertEqual(p.returncode, 1, describe(p))
                self.assertEqual(stderr_diags(p), ["perfgraft: " + err], describe(p))
            with self.subTest(case=name, cmd="dump --json"):
                p, doc = self.dump_json(name)
                self.assertEqual(p.returncode, 1, describe(p))
                self.assertEqual(doc["error"], err)
                self.assertEqual(doc["records"], [r.json for r in e.builder.records])
                self.assertEqual(doc["summary"], e.summary)
            with self.subTest(case=name, cmd="elf"):
                with tempfile.TemporaryDirectory() as d:
                    p = self.pg("elf", fname, "-o", d)
                    self.assertEqual(p.returncode, 1, describe(p))
                    self.assertEqual(stderr_diags(p), ["perfgraft: " + err], describe(p))

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
        # model cases 2+2+1+2+3)
        self.assertEqual(checked, 3 * 2 * (6 + 16 + 3 + 10))

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


if __name__ == "__main__":
    unittest.main()
