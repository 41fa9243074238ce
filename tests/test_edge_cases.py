#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Edge-case tests of the perfgraft binary against generated jitdump files.

Run from the repository root:  python3 -m unittest tests.test_edge_cases -v
The binary is $PERFGRAFT or <repo>/build/perfgraft.  Images are checked with
readelf, eu-readelf, llvm-dwarfdump-14, objdump and addr2line; a test that
needs a missing tool is skipped and says which tool.

The ext_* cases (perfgraft's INLINE_INFO and UNLOAD records) go through
the checks here too; tests/test_extension_records.py checks them exactly.

CLI contract under test:
  perfgraft dump [--json] FILE
  perfgraft elf FILE -o DIR [--per-function] [--list]
  stderr: "perfgraft: warning: FILE: offset N: msg" / "perfgraft: FILE: offset N: msg"
  exit: 0 ok (warnings allowed), 1 bad input, 2 usage.
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
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import jitdump_gen as gen  # noqa: E402
import jitdump_oracle  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(REPO, "build", "perfgraft"))
TIMEOUT = 60

READELF = "readelf"
EU_READELF = "eu-readelf"
DWARFDUMP = "llvm-dwarfdump-14"
OBJDUMP = "objdump"
ADDR2LINE = "addr2line"

WARN_RE = re.compile(r"^perfgraft: warning: (?P<file>.*?): offset (?P<off>\d+): (?P<msg>.*)$")
ERR_RE = re.compile(r"^perfgraft: (?!warning: )(?P<file>.*?): offset (?P<off>\d+): (?P<msg>.*)$")
OBJDUMP_RE = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f]{2}(?: [0-9a-f]{2})*)")
A2L_LOC_RE = re.compile(r"^(?P<file>.*):(?P<line>\d+|\?)(?: \(discriminator \d+\))?$")

X86_ARCHES = ("x86_64", "i386")


# ---------------------------------------------------------------------------
# helpers

def run(args, cwd=None):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       cwd=cwd, timeout=TIMEOUT)
    p.out = p.stdout.decode("utf-8", "surrogateescape")
    p.err = p.stderr.decode("utf-8", "surrogateescape")
    return p


def pg(*args, cwd=None):
    return run([PERFGRAFT] + list(args), cwd=cwd)


def describe(p):
    return "command: %s\nexit: %s\nstdout:\n%s\nstderr:\n%s" % (
        " ".join(map(str, p.args)), p.returncode, p.out[-4000:], p.err[-4000:])


def diags(stderr, path):
    """(warnings, errors, other lines) of perfgraft's stderr; each diag is
    (offset, message, line)."""
    warns, errs, other = [], [], []
    for line in stderr.splitlines():
        m = WARN_RE.match(line)
        if m and m.group("file") == path:
            warns.append((int(m.group("off")), m.group("msg"), line))
            continue
        m = ERR_RE.match(line)
        if m and m.group("file") == path:
            errs.append((int(m.group("off")), m.group("msg"), line))
            continue
        if line.strip():
            other.append(line)
    return warns, errs, other


def json_warnings(doc, path):
    """Warnings of a dump --json document, as (offset, message, text); each
    string is expected as "FILE: offset N: message" (the stderr form without
    the "perfgraft: warning: " prefix); other strings give offset -1."""
    res = []
    for w in doc.get("warnings") or []:
        w = str(w)
        m = re.match(r"^(?:perfgraft: warning: )?(?P<file>.*?): offset (?P<off>\d+): (?P<msg>.*)$", w)
        if m and m.group("file") == path:
            res.append((int(m.group("off")), m.group("msg"), w))
        else:
            res.append((-1, w, w))
    return res


def unescape(field):
    """Inverse of --list name escaping: \\t \\n \\\\ \\xHH."""
    out = bytearray()
    i = 0
    raw = field.encode("utf-8", "surrogateescape")
    while i < len(raw):
        c = raw[i]
        if c == 0x5C and i + 1 < len(raw):
            n = raw[i + 1]
            if n == ord("x") and re.fullmatch(rb"[0-9a-fA-F]{2}", raw[i + 2:i + 4]):
                out.append(int(raw[i + 2:i + 4], 16))
                i += 4
                continue
            if n == ord("t"):
                out.append(9)
            elif n == ord("n"):
                out.append(10)
            elif n == ord("\\"):
                out.append(0x5C)
            else:
                raise ValueError("bad escape in %r" % field)
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out)


def parse_list(stdout):
    rows = []
    for line in stdout.splitlines():
        if not line:
            continue
        f = line.split("\t")
        if len(f) != 7:
            raise AssertionError("--list line has %d fields, want 7: %r" % (len(f), line))
        rows.append(dict(code_index=int(f[0]), code_addr=int(f[1], 16),
                         code_size=int(f[2]), image=f[3], pgoff=int(f[4], 16),
                         map_len=int(f[5]), name_field=f[6], line=line))
    return rows


def objdump_bytes(text):
    """address -> byte, from objdump -d output (handles wrapped lines)."""
    out = {}
    for line in text.splitlines():
        m = OBJDUMP_RE.match(line)
        if not m:
            continue
        a = int(m.group(1), 16)
        for i, h in enumerate(m.group(2).split()):
            out[a + i] = int(h, 16)
    return out


def is_printable_ascii(b):
    return all(0x20 <= c < 0x7F for c in b)


def is_escaped_text(b):
    """Valid UTF-8 without C0 controls or DEL: what an escaped --list field
    may contain (printable multi-byte UTF-8 may pass through unescaped)."""
    try:
        t = b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in t)


def file_snapshot(root):
    res = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            st = os.lstat(p)
            res[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return res


# ---------------------------------------------------------------------------

class EdgeCaseTest(unittest.TestCase):
    maxDiff = 4000

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="perfgraft-edge-")
        cls.tmp = cls._tmp.name
        cls.gendir = os.path.join(cls.tmp, "cases")
        os.mkdir(cls.gendir)
        cls.cases = gen.cases(cls.gendir)
        cls.gen_snapshot = file_snapshot(cls.gendir)
        cls._json_cache = {}

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    # -- preconditions ------------------------------------------------------
    def need_binary(self):
        if not (os.path.isfile(PERFGRAFT) and os.access(PERFGRAFT, os.X_OK)):
            self.fail("perfgraft binary not found or not executable: %s "
                      "(build with: meson setup build; ninja -C build, or set PERFGRAFT)"
                      % PERFGRAFT)

    def need_tools(self, *tools):
        missing = [t for t in tools if shutil.which(t) is None]
        if missing:
            msg = "missing external tool(s): %s" % ", ".join(missing)
            print("SKIP: " + msg, file=sys.stderr)
            self.skipTest(msg)

    def case(self, name):
        return self.cases[name]

    def names(self, pred):
        return sorted(n for n, (_, e) in self.cases.items() if pred(e))

    # -- invocations ----------------------------------------------------------
    def dump_json(self, path):
        if path in self._json_cache:
            return self._json_cache[path]
        p = pg("dump", "--json", path)
        doc = None
        try:
            doc = json.loads(p.out)
        except ValueError:
            pass
        self._json_cache[path] = (p, doc)
        return p, doc

    def run_elf(self, path, per_function=False):
        """Runs `perfgraft elf PATH -o DIR --list` in a fresh temp dir.
        Returns (proc, workdir TemporaryDirectory, outdir, rows)."""
        work = tempfile.TemporaryDirectory(prefix="perfgraft-elf-")
        self.addCleanup(work.cleanup)
        outdir = os.path.join(work.name, "out")
        os.mkdir(outdir)
        args = ["elf", path, "-o", outdir, "--list"]
        # the packed layout: these cases check its images (the memory
        # layout's are test_memory_layout.py's)
        args += ["--per-function"] if per_function else ["--layout", "packed"]
        p = pg(*args, cwd=work.name)
        # nothing outside DIR, nothing below DIR but plain files
        for rel in file_snapshot(work.name):
            parts = rel.split(os.sep)
            self.assertTrue(len(parts) == 2 and parts[0] == "out",
                            "file created outside DIR or in a subdirectory: %s\n%s"
                            % (rel, describe(p)))
        for d, dirs, _ in os.walk(outdir):
            self.assertEqual(dirs, [], "subdirectories created in DIR: %s" % dirs)
        self.assertEqual(file_snapshot(self.gendir), self.gen_snapshot,
                         "files appeared or changed next to the input dumps\n" + describe(p))
        rows = None
        if p.returncode == 0:
            rows = parse_list(p.out)
        return p, work, outdir, rows

    # -- shared assertions ------------------------------------------------------
    def check_diags(self, p, path, e, doc=None, model=False):
        """Exit status and the offsets named on stderr (or, for dump --json,
        in the JSON "warnings" array when doc is given).  model: the run
        went through the code model (elf), which adds the warnings of
        e.model_warn_offsets."""
        warns, errs, other = diags(p.err, path)
        if doc is not None:
            warns = json_warnings(doc, path)
        if e.exit == 1:
            self.assertEqual(p.returncode, 1, describe(p))
            self.assertTrue(errs, "no 'perfgraft: FILE: offset N: msg' line on stderr\n"
                            + describe(p))
            offs = [o for o, _, _ in errs]
            self.assertTrue(any(o in e.error_offsets for o in offs),
                            "error offset %s, expected one of %s\n%s"
                            % (offs, sorted(e.error_offsets), describe(p)))
            return
        self.assertEqual(p.returncode, 0, describe(p))
        self.assertEqual(errs, [], "error lines on a successful run\n" + describe(p))
        if e.clean:
            self.assertEqual(warns, [], "expected no warnings\n" + describe(p))
            self.assertFalse(re.search(r"(?i)warning|error", p.err),
                             "expected no diagnostics\n" + describe(p))
        for allowed in (e.warn_offsets or []) + ((e.model_warn_offsets or []) if model else []):
            got = [o for o, _, _ in warns]
            self.assertTrue(any(o in allowed for o in got),
                            "expected a warning naming offset %s, got warnings at %s\n%s"
                            % (self.fmt_set(allowed), got, describe(p)))
        if e.no_warn_at is not None:
            bad = [l for o, _, l in warns if o >= e.no_warn_at]
            self.assertEqual(bad, [], "warning past the end of a cleanly cut file\n"
                             + describe(p))

    @staticmethod
    def fmt_set(s):
        s = sorted(s)
        if len(s) > 4 and s[-1] - s[0] + 1 == len(s):
            return "[%d..%d]" % (s[0], s[-1])
        return str(s)

    def check_json_records(self, doc, path, e):
        self.assertEqual(doc.get("format"), "jitdump")
        self.assertEqual(doc.get("file"), path)
        self.assertIsNone(doc.get("error"), "error set on a successful run: %r" % doc.get("error"))
        self.assertIsInstance(doc.get("warnings"), list)
        hdr = doc["header"]
        for k, v in e.header.items():
            if k == "version" and e.header["version"] == 2:
                self.assertIn(hdr.get(k), (1, 2), "header.version")
                continue
            self.assertEqual(hdr.get(k), v, "header.%s" % k)
        recs = doc["records"]
        self.assertIsInstance(recs, list)
        by_off = {}
        for r in recs:
            self.assertNotIn(r.get("offset"), by_off, "two records at one offset")
            by_off[r.get("offset")] = r
        want = {j["offset"]: j for j in e.records}
        optional = e.optional or {}
        extra = sorted(set(by_off) - set(want) - set(optional))
        self.assertEqual(extra, [], "records listed at unexpected offsets %s (expected %s)"
                         % (extra, sorted(want)))
        missing = sorted(set(want) - set(by_off))
        self.assertEqual(missing, [], "records missing at offsets %s" % missing)
        for off, j in want.items():
            got = by_off[off]
            for k, v in j.items():
                self.assertEqual(got.get(k), v, "record @%d field %s: %r" % (off, k, got))
            if j["type"] == "LOAD":
                if "name_hex" in j:
                    self.assertIsInstance(got.get("name"), str,
                                          "LOAD @%d: name missing with name_hex" % off)
                    self.assertEqual(got.get("name_hex", "").lower(), j["name_hex"])
                else:
                    self.assertNotIn("name_hex", got, "name_hex on a UTF-8 name @%d" % off)
            if j["type"] == "DEBUG_INFO":
                rec = next(r for r in e.builder.records if r.offset == off)
                self.check_lines(got, rec.extra["lines"], off)
        for off, j in optional.items():
            if off in by_off and j:
                for k, v in j.items():
                    self.assertEqual(by_off[off].get(k), v,
                                     "optional record @%d field %s" % (off, k))
        # no LOAD / MOVE beyond what the generator wrote
        nloads = sum(1 for r in recs if r.get("type") == "LOAD")
        self.assertEqual(nloads, sum(1 for j in e.records if j["type"] == "LOAD"))

    def check_lines(self, got, lines, off):
        gl = got.get("lines")
        self.assertIsInstance(gl, list, "DEBUG_INFO @%d has no lines array" % off)
        self.assertEqual(len(gl), len(lines), "DEBUG_INFO @%d: number of lines" % off)
        for i, (g, w) in enumerate(zip(gl, lines)):
            ctx = "DEBUG_INFO @%d line %d: got %r" % (off, i, g)
            self.assertEqual(g.get("addr"), w["addr"], ctx)
            self.assertEqual(g.get("line"), w["line"], ctx)
            self.assertEqual(g.get("discrim"), w["discrim"], ctx)
            if w["damaged"]:
                self.assertIsNone(g.get("file"), ctx + " (damaged name must be null)")
            elif w["raw_file"] == gen.SAME_FILE:
                # reader may resolve "\xff" or report it as written
                self.assertIn(g.get("file"), (w["file"].decode("utf-8"), "\u00ff",
                                              "\ufffd", "\\xff"), ctx)
            else:
                self.assertEqual(g.get("file"), w["file"].decode("utf-8"), ctx)

    def check_list(self, rows, e, p, per_function=False):
        funcs = [f for f in e.funcs if f.code_size > 0]
        self.assertEqual(len(rows), len(funcs),
                         "--list lines %d, placed LOADs %d\n%s" % (len(rows), len(funcs), describe(p)))
        rows_s = sorted(rows, key=lambda r: (r["code_index"], r["code_addr"]))
        funcs_s = sorted(funcs, key=lambda f: (f.code_index, f.code_addr))
        for r, f in zip(rows_s, funcs_s):
            ctx = "--list line %r for LOAD @%d" % (r["line"], f.rec.offset)
            self.assertEqual(r["code_index"], f.code_index, ctx)
            self.assertEqual(r["code_addr"], f.code_addr, ctx)
            self.assertEqual(r["code_size"], f.code_size, ctx)
            self.assertEqual(r["map_len"], f.map_len(), ctx + " map_len")
            self.assertNotIn("/", r["image"], ctx)
            self.assertTrue(is_escaped_text(r["name_field"].encode("utf-8", "surrogateescape")),
                            ctx + ": name field has raw control or invalid UTF-8 bytes "
                            "(want \\xHH escapes)")
            # the code model's name: control bytes are '?'
            self.assertEqual(unescape(r["name_field"]), jitdump_oracle.symbol_name(f.name),
                             ctx + " name")
            if f.has_cfi or per_function:
                self.assertTrue(r["image"].endswith("-%d.so" % f.code_index),
                                ctx + ": function should have an image of its own")
        if per_function:
            imgs = [r["image"] for r in rows]
            self.assertEqual(len(set(imgs)), len(imgs), "--per-function shares images")
        cfi_imgs = set(r["image"] for r, f in zip(rows_s, funcs_s) if f.has_cfi)
        for r, f in zip(rows_s, funcs_s):
            if not f.has_cfi and not per_function:
                self.assertNotIn(r["image"], cfi_imgs, "non-CFI code in a CFI image")
        return list(zip(rows_s, funcs_s))

    def check_images(self, outdir, rows, pairs, e, p):
        names = sorted(os.listdir(outdir))
        self.assertEqual(names, sorted(set(r["image"] for r in rows)),
                         "DIR contents differ from the images named by --list\n" + describe(p))
        self.need_tools(READELF, EU_READELF, DWARFDUMP)
        for img in names:
            path = os.path.join(outdir, img)
            with self.subTest(image=img):
                r = run([READELF, "-a", "-W", path])
                txt = r.out + r.err
                bad = [l for l in txt.splitlines() if "Warning" in l or "Error" in l]
                self.assertEqual(bad, [], "readelf -a -W %s" % img)
                r = run([EU_READELF, "-a", path])
                self.assertEqual(r.err.strip(), "", "eu-readelf -a %s: stderr" % img)
                bad = [l for l in r.out.splitlines() if "invalid" in l.lower()]
                self.assertEqual(bad, [], "eu-readelf -a %s" % img)
                r = run([DWARFDUMP, "--verify", path])
                self.assertEqual(r.returncode, 0, "llvm-dwarfdump-14 --verify %s\n%s"
                                 % (img, describe(r)))
        # code bytes in the file at pgoff
        for r, f in pairs:
            with open(os.path.join(outdir, r["image"]), "rb") as fh:
                fh.seek(r["pgoff"])
                self.assertEqual(fh.read(f.code_size), f.code,
                                 "bytes at pgoff 0x%x of %s differ from LOAD @%d code"
                                 % (r["pgoff"], r["image"], f.rec.offset))
        if e.arch in X86_ARCHES:
            self.need_tools(OBJDUMP)
            by_img = {}
            for r, f in pairs:
                by_img.setdefault(r["image"], []).append((r, f))
            for img, lst in by_img.items():
                d = run([OBJDUMP, "-d", "-z", "-w", os.path.join(outdir, img)])
                self.assertEqual(d.returncode, 0, describe(d))
                bytes_at = objdump_bytes(d.out)
                for r, f in lst:
                    missing = [i for i in range(f.code_size) if r["pgoff"] + i not in bytes_at]
                    self.assertEqual(missing, [], "objdump -d %s: no bytes at 0x%x+%s"
                                     % (img, r["pgoff"], missing[:8]))
                    got = bytes(bytes_at[r["pgoff"] + i] for i in range(f.code_size))
                    self.assertEqual(got, f.code, "objdump -d %s at 0x%x (LOAD @%d)"
                                     % (img, r["pgoff"], f.rec.offset))
                    first = [l for l in d.out.splitlines()
                             if re.match(r"^\s*%x:\t" % r["pgoff"], l)]
                    self.assertTrue(first and "push" in first[0],
                                    "objdump: no instruction boundary/push at 0x%x: %s"
                                    % (r["pgoff"], first))
                    if is_printable_ascii(f.name):
                        label = re.compile(r"^0*%x <%s>:$" % (r["pgoff"], re.escape(f.name.decode())),
                                           re.M)
                        self.assertRegex(d.out, label, "objdump: no symbol label for %r" % f.name)

    def full_elf_check(self, name, per_function=False):
        path, e = self.case(name)
        p, work, outdir, rows = self.run_elf(path, per_function)
        self.check_diags(p, path, e, model=True)
        if e.exit != 0:
            return None
        pairs = self.check_list(rows, e, p, per_function)
        self.check_images(outdir, rows, pairs, e, p)
        return p, outdir, rows, pairs

    # =====================================================================
    # tests

    def test_00_generator_roundtrip(self):
        """The generator's well-formed outputs parse back to what it recorded."""
        for name, (path, e) in sorted(self.cases.items()):
            if e.exit != 0 or e.warn_offsets or name.startswith("trunc") and e.cut_kind != "boundary":
                continue
            with self.subTest(case=name):
                with open(path, "rb") as fh:
                    hdr, recs = gen.parse(fh.read())
                self.assertEqual(hdr, e.header)
                by_off = {r["offset"]: r for r in recs}
                for j in e.records:
                    r = by_off[j["offset"]]
                    for k, v in j.items():
                        if k == "name":
                            self.assertEqual(r["name_bytes"].decode(), v)
                        elif k == "name_hex":
                            self.assertEqual(r["name_bytes"].hex(), v)
                        else:
                            self.assertEqual(r[k], v, (name, k))
                for f in e.funcs:
                    self.assertEqual(by_off[f.rec.offset]["code"], f.code)

    def test_01_usage_errors(self):
        self.need_binary()
        path, _ = self.case("baseline_le64")
        with tempfile.TemporaryDirectory() as d:
            # (-o is optional: `perfgraft elf --help` documents "default: .")
            for args in ([], ["frobnicate", path], ["dump"], ["elf"],
                         ["dump", "--no-such-option", path], ["elf", path, "-o"]):
                with self.subTest(args=args):
                    p = pg(*args, cwd=d)
                    self.assertEqual(p.returncode, 2, describe(p))
            self.assertEqual(os.listdir(d), [])

    def test_02_dump_json_success_cases(self):
        """dump --json on every case that must parse: records, fields, diagnostics."""
        self.need_binary()
        for name in self.names(lambda e: e.exit == 0):
            path, e = self.case(name)
            with self.subTest(case=name):
                p, doc = self.dump_json(path)
                self.assertIsNotNone(doc, "stdout is not one JSON object\n" + describe(p))
                self.check_diags(p, path, e, doc)
                self.check_json_records(doc, path, e)

    def test_03_dump_text(self):
        self.need_binary()
        for name in self.names(lambda e: e.exit == 0):
            path, e = self.case(name)
            with self.subTest(case=name):
                p = pg("dump", path)
                self.check_diags(p, path, e)
                self.assertTrue(p.out.strip(), "empty text dump")
                for t in ("LOAD", "MOVE", "DEBUG_INFO", "UNWINDING_INFO", "CLOSE"):
                    n = sum(1 for j in e.records if j["type"] == t)
                    got = len(re.findall(r"(?<![A-Z_])%s(?![A-Z_])" % t, p.out))
                    self.assertGreaterEqual(got, n, "text dump names %s %d times, %d records"
                                            % (t, got, n))
                for f in e.funcs:
                    if is_printable_ascii(f.name) and f.name:
                        self.assertIn(f.name.decode(), p.out)

    def test_04_fatal_cases(self):
        """Bad input: exit 1 and 'perfgraft: FILE: offset N: msg' for dump, dump --json, elf."""
        self.need_binary()
        for name in self.names(lambda e: e.exit == 1):
            path, e = self.case(name)
            with self.subTest(case=name, cmd="dump"):
                self.check_diags(pg("dump", path), path, e)
            with self.subTest(case=name, cmd="dump --json"):
                p, doc = self.dump_json(path)
                self.check_diags(p, path, e)
                if doc is not None:
                    self.assertTrue(doc.get("error"), "JSON error is empty: %r" % doc)
                    nums = set(int(x) for x in re.findall(r"\d+", str(doc["error"])))
                    self.assertTrue(nums & e.error_offsets, "JSON error %r names none of %s"
                                    % (doc["error"], sorted(e.error_offsets)))
            with self.subTest(case=name, cmd="elf"):
                p, work, outdir, rows = self.run_elf(path)
                self.check_diags(p, path, e)

    def test_05_truncation_every_boundary(self):
        """Cut at every record boundary and inside records: LOADs before the cut kept."""
        self.need_binary()
        for name in self.names(lambda e: e.cut is not None):
            path, e = self.case(name)
            with self.subTest(case=name, cut=e.cut, kind=e.cut_kind):
                p, doc = self.dump_json(path)
                if e.exit != 0:
                    self.check_diags(p, path, e)
                    continue
                self.assertIsNotNone(doc, describe(p))
                self.check_diags(p, path, e, doc)
                loads = [r for r in doc["records"] if r.get("type") == "LOAD"]
                self.assertEqual(len(loads), e.nloads, "LOADs in --json after cut at %d" % e.cut)
                self.check_json_records(doc, path, e)
                pe, work, outdir, rows = self.run_elf(path)
                self.check_diags(pe, path, e, model=True)
                self.assertEqual(len(rows), e.nloads, "--list lines after cut at %d" % e.cut)

    def test_06_big_endian_equals_little(self):
        self.need_binary()
        lp, le = self.case("baseline_le64")
        _, ldoc = self.dump_json(lp)
        self.assertIsNotNone(ldoc)
        for name in ("baseline_be_ppc64", "baseline_be_s390"):
            bp, be = self.case(name)
            with self.subTest(case=name):
                p, bdoc = self.dump_json(bp)
                self.assertIsNotNone(bdoc, describe(p))
                self.assertEqual(bdoc["header"]["byte_order"], "big")
                self.assertEqual(ldoc["header"]["byte_order"], "little")
                self.assertEqual(bdoc["header"]["elf_mach"], be.header["elf_mach"])
                strip = lambda h: {k: v for k, v in h.items() if k not in ("byte_order", "elf_mach")}
                self.assertEqual(strip(bdoc["header"]), strip(ldoc["header"]))
                self.assertEqual(bdoc["records"], ldoc["records"])
                self.assertEqual(bdoc["warnings"], ldoc["warnings"])

    def test_07_elf_images_all_success_cases(self):
        """perfgraft elf on every parsable case; every image passes readelf, eu-readelf,
        llvm-dwarfdump --verify; code bytes and objdump match the dump."""
        self.need_binary()
        for name in self.names(lambda e: e.exit == 0):
            with self.subTest(case=name, mode="packed"):
                self.full_elf_check(name)

    def test_08_elf_per_function(self):
        self.need_binary()
        for name in ("baseline_le64", "baseline_be_ppc64", "baseline_le32_i386",
                     "move_close", "names", "v8_damaged_names", "header_48"):
            with self.subTest(case=name, mode="per-function"):
                self.full_elf_check(name, per_function=True)

    def test_09_names_stay_inside_dir(self):
        """'/', '../', absolute and non-UTF-8 names never leave DIR; JSON name_hex."""
        self.need_binary()
        path, e = self.case("names")
        outside = ["/tmp/perfgraft-evil", "/nonexistent-perfgraft-dir"]
        before = {p: os.path.exists(p) for p in outside}
        for per_function in (False, True):
            with self.subTest(per_function=per_function):
                res = self.full_elf_check("names", per_function)
                self.assertIsNotNone(res)
                _, outdir, rows, _ = res
                for r in rows:
                    self.assertTrue(os.path.isfile(os.path.join(outdir, r["image"])))
        for p_, existed in before.items():
            self.assertEqual(os.path.exists(p_), existed, "%s appeared" % p_)
        p, doc = self.dump_json(path)
        self.assertIsNotNone(doc, describe(p))
        loads = [r for r in doc["records"] if r.get("type") == "LOAD"]
        nonutf = [r for r in loads if "name_hex" in r]
        self.assertEqual(len(nonutf), 1, "exactly one non-UTF-8 name expected: %r" % loads)
        self.assertEqual(nonutf[0]["name_hex"].lower(), b"JS:*caf\xe9/\xff\xfe".hex())
        # dump shows the record as written; the images' symbols (and
        # --list, checked by full_elf_check) have '?' for control bytes
        tab = [r for r in loads if r.get("name") == "tab\tnew\nline\\back"]
        self.assertEqual(len(tab), 1, "name with tab/newline/backslash not kept verbatim")
        self.assertIn("tab?new?line\\\\back", [r["name_field"] for r in rows])

    def test_10_cfi_function_has_fde(self):
        """The CFI function: own image, map_len covers the tables, eu-readelf decodes its FDE."""
        self.need_binary()
        self.need_tools(EU_READELF)
        for name in ("baseline_le64", "baseline_be_ppc64", "baseline_be_s390",
                     "baseline_le32_i386", "version_2", "header_48"):
            with self.subTest(case=name):
                res = self.full_elf_check(name)
                self.assertIsNotNone(res)
                _, outdir, rows, pairs = res
                cfi = [(r, f) for r, f in pairs if f.has_cfi]
                self.assertEqual(len(cfi), 1)
                r, f = cfi[0]
                img = os.path.join(outdir, r["image"])
                d = run([EU_READELF, "--debug-dump=frames", img])
                self.assertEqual(d.err.strip(), "", describe(d))
                fdes = re.findall(r"initial_location:\s+[^\n]*?\(offset:\s+(0x[0-9a-f]+)\)\s*\n"
                                  r"\s*address_range:\s+(0x[0-9a-f]+)", d.out)
                fdes = [(int(a, 16), int(b, 16)) for a, b in fdes]
                self.assertIn((r["pgoff"], f.code_size), fdes,
                              "no FDE for [0x%x, +0x%x) in %s\n%s"
                              % (r["pgoff"], f.code_size, r["image"], d.out))
                self.assertRegex(d.out, r"fde_count:\s+1\b")
                self.assertRegex(d.out, r"\(offset:\s+0x%x\) -> \S+ fde=" % r["pgoff"],
                                 "eh_frame_hdr table does not point at the function")
                # non-CFI functions get no FDE in their (packed) images
                for r2, f2 in pairs:
                    if f2.has_cfi:
                        continue
                    d2 = run([EU_READELF, "--debug-dump=frames",
                              os.path.join(outdir, r2["image"])])
                    self.assertNotRegex(d2.out, r"initial_location:[^\n]*\(offset:\s+0x%x\)"
                                        % r2["pgoff"], "FDE for non-CFI function %r" % f2.name)

    def test_11_dropped_unwind_info(self):
        """UNWINDING_INFO with inconsistent sizes: warning, dropped, function placed without CFI."""
        self.need_binary()
        for name in ("unwind_hdr_gt_size", "unwind_size_gt_record"):
            with self.subTest(case=name):
                res = self.full_elf_check(name)
                self.assertIsNotNone(res)
                _, outdir, rows, pairs = res
                for r, f in pairs:
                    self.assertEqual(r["map_len"], f.code_size)

    def addr2line(self, image, addr):
        r = run([ADDR2LINE, "-f", "-e", image, "0x%x" % addr])
        lines = r.out.splitlines()
        self.assertEqual(r.returncode, 0, describe(r))
        self.assertEqual(len(lines), 2, describe(r))
        m = A2L_LOC_RE.match(lines[1])
        self.assertIsNotNone(m, describe(r))
        return lines[0], m.group("file"), m.group("line"), r

    def line_checks(self, name, last_only):
        path, e = self.case(name)
        res = self.full_elf_check(name)
        self.assertIsNotNone(res)
        _, outdir, rows, pairs = res
        bias = e.line_bias or 0
        checked = 0
        for r, f in pairs:
            if not f.debug:
                continue
            img = os.path.join(outdir, r["image"])
            good = [(i, l) for i, l in enumerate(f.debug) if l["file"] is not None]
            last = len(f.debug) - 1
            for i, l in good:
                if (i == last) != last_only:
                    continue
                addr = r["pgoff"] + (l["addr"] - f.code_addr) - bias
                fn, fname, line, proc = self.addr2line(img, addr)
                ctx = ("addr2line -f -e %s 0x%x (LOAD @%d %r, debug entry %d: %r)\n%s"
                       % (r["image"], addr, f.rec.offset, f.name, i,
                          {k: l[k] for k in ("addr", "line", "file")}, describe(proc)))
                if is_printable_ascii(f.name):
                    self.assertEqual(fn, f.name.decode(), ctx)
                # the name perf can split (node:internal/x -> node%3Ainternal/x)
                want = jitdump_oracle.perf_file_name(l["file"]).decode()
                if want.startswith("/"):
                    self.assertEqual(fname, want, ctx)
                else:
                    self.assertTrue(fname.endswith(want), ctx)
                self.assertEqual(line, str(l["line"]), ctx)
                checked += 1
        self.assertGreater(checked, 0)

    def test_12_addr2line_rows(self):
        """addr2line gives function and file:line for each debug entry (except each
        function's last entry, see test_13)."""
        self.need_binary()
        self.need_tools(ADDR2LINE)
        for name in ("baseline_le64", "baseline_le32_i386", "baseline_be_ppc64",
                     "header_48", "version_2", "debug_nr_entry_huge", "debug_name_overrun",
                     "v8_damaged_names"):
            with self.subTest(case=name):
                self.line_checks(name, last_only=False)

    def test_13_addr2line_last_row(self):
        """The last debug entry of a function also resolves (perf's genelf ends the
        sequence at the last entry's address, leaving it without a row)."""
        self.need_binary()
        self.need_tools(ADDR2LINE)
        for name in ("baseline_le64", "v8_damaged_names"):
            with self.subTest(case=name):
                self.line_checks(name, last_only=True)

    def test_14_dropped_debug_info_has_no_lines(self):
        """A dropped DEBUG_INFO gives its LOAD no line info; symbols still resolve."""
        self.need_binary()
        self.need_tools(ADDR2LINE)
        for name in ("debug_nr_entry_huge", "debug_name_overrun", "debug_nr_entry_plus1"):
            with self.subTest(case=name):
                res = self.full_elf_check(name)
                self.assertIsNotNone(res)
                _, outdir, rows, pairs = res
                r, f = pairs[0]
                self.assertIsNone(f.debug)
                fn, fname, line, proc = self.addr2line(os.path.join(outdir, r["image"]),
                                                       r["pgoff"] + 8)
                self.assertEqual(fn, f.name.decode(), describe(proc))
                self.assertIn((fname, line), (("??", "0"), ("??", "?")),
                                 "line info for a function whose DEBUG_INFO was dropped\n"
                                 + describe(proc))

    def test_15_v8_damaged_names(self):
        self.need_binary()
        path, e = self.case("v8_damaged_names")
        p, doc = self.dump_json(path)
        self.assertIsNotNone(doc, describe(p))
        self.check_diags(p, path, e, doc)
        self.assertEqual(doc["header"]["pad1"], gen.V8_PAD1)
        dbg = [r for r in doc["records"] if r.get("type") == "DEBUG_INFO"]
        self.assertEqual(len(dbg), 3)
        nulls = sum(1 for r in dbg for l in r["lines"] if l.get("file") is None)
        want = sum(1 for r in e.builder.records if r.kind == "DEBUG_INFO"
                   for l in r.extra["lines"] if l["damaged"])
        self.assertEqual(nulls, want, "lines with file null")
        self.assertEqual(sum(1 for r in doc["records"] if r.get("type") == "LOAD"), 4)

    def test_16_unknown_and_versions(self):
        self.need_binary()
        path, e = self.case("unknown_id_9")
        p, doc = self.dump_json(path)
        self.assertIsNotNone(doc, describe(p))
        names = [r.get("name") for r in doc["records"] if r.get("type") == "LOAD"]
        self.assertEqual(names, ["JS:*first", "JS:*second"])
        unk = [r for r in doc["records"] if r.get("id") == 9]
        for r in unk:
            self.assertEqual(r.get("type"), "UNKNOWN")
        path, e = self.case("header_48")
        p, doc = self.dump_json(path)
        self.assertIsNotNone(doc, describe(p))
        self.assertEqual(doc["header"]["total_size"], 48)
        self.assertEqual(doc["records"][0]["offset"], 48)

    def test_17_move_close(self):
        self.need_binary()
        path, e = self.case("move_close")
        p, doc = self.dump_json(path)
        self.assertIsNotNone(doc, describe(p))
        types = [r.get("type") for r in doc["records"]]
        self.assertEqual(types, ["LOAD", "LOAD", "MOVE", "CLOSE"])

    def test_18_json_mode_warnings_on_stderr(self):
        """The contract sends warnings to stderr for every command, --json included."""
        self.need_binary()
        for name in ("trunc_00701", "unknown_id_9", "version_2"):
            path, e = self.case(name)
            with self.subTest(case=name):
                p, doc = self.dump_json(path)
                self.check_diags(p, path, e)


if __name__ == "__main__":
    unittest.main()
