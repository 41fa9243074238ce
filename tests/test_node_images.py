#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ELF images written by `perfgraft elf` from real node jitdumps, checked
with the real tools (readelf, eu-readelf, llvm-dwarfdump-14, objdump,
addr2line) against tests/jitdump_oracle.py.

Fixtures: tests/fixtures/node/node-unwind.dump and node-interp.dump
(regenerate with tests/gen-node-fixtures.sh).  Conversions:
  unwind  packed        perfgraft elf node-unwind.dump -o DIR --list
  unwind  per-function  ... --per-function  (the smaller fixture)
  interp  packed        perfgraft elf node-interp.dump -o DIR --list
Each conversion is also run a second time into another directory to check
that build-ids are deterministic.  Everything is written in a
tempfile.TemporaryDirectory; the binary is $PERFGRAFT (default
build/perfgraft).

Every check looks at every image and every function; a failure message
names fixture, image, command, expected and got.
"""

import concurrent.futures
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jitdump_oracle  # noqa: E402

ROOT = os.path.dirname(HERE)
FIXDIR = os.path.join(HERE, "fixtures", "node")
PERFGRAFT = os.environ.get("PERFGRAFT",
                           os.path.join(ROOT, "build", "perfgraft"))
DWARFDUMP = os.environ.get("LLVM_DWARFDUMP", "llvm-dwarfdump-14")
JOBS = max(2, min(8, (os.cpu_count() or 2) * 2))
TIMEOUT = 300
MAX_REPORT = 25         # failures listed in one assertion message

_oracle_cache = {}


def oracle(fixture):
    if fixture not in _oracle_cache:
        _oracle_cache[fixture] = jitdump_oracle.parse(
            os.path.join(FIXDIR, fixture))
    return _oracle_cache[fixture]


def run(cmd, cwd=None, check_rc=None):
    """Runs cmd; returns (rc, stdout bytes, stderr bytes)."""
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def pmap(fn, items):
    with concurrent.futures.ThreadPoolExecutor(JOBS) as ex:
        return list(ex.map(fn, items))


def shell(cmd):
    return " ".join(c if re.fullmatch(r"[\w./:=+-]+", c) else repr(c)
                    for c in cmd)


def unescape_name(s):
    """Undoes the --list name escaping (\\t \\n \\\\ \\xHH) into bytes."""
    out = bytearray()
    b = s.encode("utf-8", "surrogateescape")
    i = 0
    while i < len(b):
        c = b[i]
        if c == 0x5C and i + 1 < len(b):
            n = b[i + 1]
            if n == ord("t"):
                out.append(9)
                i += 2
                continue
            if n == ord("n"):
                out.append(10)
                i += 2
                continue
            if n == 0x5C:
                out.append(0x5C)
                i += 2
                continue
            if n == ord("x") and i + 3 < len(b) and re.fullmatch(
                    rb"[0-9a-fA-F]{2}", b[i + 2:i + 4]):
                out.append(int(b[i + 2:i + 4], 16))
                i += 4
                continue
            raise ValueError("bad escape in %r" % s)
        out.append(c)
        i += 1
    return bytes(out)


def align8(x):
    return (x + 7) & ~7


# ---------------------------------------------------------------------------
# readelf -a -W parsing

SEC_RE = re.compile(r"^\s*\[\s*(\d+)\]\s+(\S*)\s+(\S+)\s+([0-9a-f]{8,})\s+"
                    r"([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+(\S*)")
PH_RE = re.compile(r"^\s+(LOAD)\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+"
                   r"(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(.*?)\s+"
                   r"(0x[0-9a-f]+)$")
SYM_RE = re.compile(r"^\s+\d+: [0-9a-f]{16}\s+(?:\d+|0x[0-9a-f]+)\s+[A-Z]+")
BUILDID_RE = re.compile(r"Build ID: ([0-9a-f]+)")


class ReadelfInfo:
    def __init__(self, text):
        self.text = text
        self.sections = {}      # name -> dict(type, addr, off, size, flags)
        self.loads = []         # (offset, vaddr, filesz, memsz, flags)
        self.symtab = []        # (value, size, type, bind, ndx, name)
        self.symtab_seen = False
        self.build_ids = BUILDID_RE.findall(text)
        lines = text.split("\n")
        in_syms = False
        for ln in lines:
            m = SEC_RE.match(ln)
            if m and not in_syms:
                self.sections[m.group(2)] = dict(
                    type=m.group(3), addr=int(m.group(4), 16),
                    off=int(m.group(5), 16), size=int(m.group(6), 16),
                    flags=m.group(8))
                continue
            m = PH_RE.match(ln)
            if m:
                self.loads.append((int(m.group(2), 16), int(m.group(3), 16),
                                   int(m.group(5), 16), int(m.group(6), 16),
                                   m.group(7)))
                continue
            if ln.startswith("Symbol table '.symtab'"):
                in_syms = True
                self.symtab_seen = True
                continue
            if in_syms:
                if not ln.strip():
                    in_syms = False
                    continue
                if ln.strip().startswith("Num:"):
                    continue
                parts = ln.split(None, 7)
                if len(parts) < 7:
                    in_syms = False
                    continue
                name = parts[7] if len(parts) > 7 else ""
                self.symtab.append((int(parts[1], 16), int(parts[2], 0),
                                    parts[3], parts[4], parts[6], name))


# ---------------------------------------------------------------------------

class ImageChecks:
    """Mixin: one conversion of one fixture, checked image by image."""

    FIXTURE = None
    PER_FUNCTION = False
    EXTRA_ARGS = ()

    @classmethod
    def setUpClass(cls):
        if not (os.path.isfile(PERFGRAFT) and os.access(PERFGRAFT, os.X_OK)):
            raise AssertionError(
                "perfgraft binary not found at %s (set PERFGRAFT or build "
                "with meson/ninja)" % PERFGRAFT)
        for tool in ("readelf", "eu-readelf", DWARFDUMP, "objdump",
                     "addr2line"):
            if shutil.which(tool) is None:
                raise AssertionError("required tool %s not in PATH" % tool)
        cls.dump_path = os.path.join(FIXDIR, cls.FIXTURE)
        cls.oracle = oracle(cls.FIXTURE)
        cls.tmp = tempfile.TemporaryDirectory(prefix="pg-node-images-")
        cls.addClassCleanup(cls.tmp.cleanup)
        t = cls.tmp.name
        cls.home_debug = os.path.expanduser("~/.debug")
        before = cls._outside_snapshot()
        cls.out1, cls.list1, cls.cmd1 = cls._convert(os.path.join(t, "out1"))
        cls.out2, cls.list2, cls.cmd2 = cls._convert(os.path.join(t, "out2"))
        after = cls._outside_snapshot()
        for o in (cls.out1, cls.out2):
            if after.get(o) == "dir" and o not in before:
                del after[o]
        cls.outside_changes = cls._diff_snapshot(before, after)
        cls.places = cls._parse_list(cls.list1)
        cls.images = sorted({p["image"] for p in cls.places})
        cls.by_image = {}
        for p in cls.places:
            cls.by_image.setdefault(p["image"], []).append(p)
        for v in cls.by_image.values():
            v.sort(key=lambda p: p["pgoff"])
        cls.loads = {ld.code_index: ld for ld in cls.oracle.loads}
        cls._readelf_cache = {}

    # -- helpers ------------------------------------------------------------

    @classmethod
    def _outside_snapshot(cls):
        # The fixture directory, the cwd given to perfgraft (the temp dir,
        # which must end up holding only the output dirs) and ~/.debug.
        # (The repository as a whole is checked by tests/run.py.)
        snap = {}
        for d in (FIXDIR, cls.tmp.name):
            for name in os.listdir(d):
                p = os.path.join(d, name)
                if os.path.isfile(p):
                    st = os.stat(p)
                    snap[p] = (st.st_size, st.st_mtime_ns)
                else:
                    snap[p] = "dir"
        snap["~/.debug"] = (sorted(os.listdir(cls.home_debug))
                            if os.path.isdir(cls.home_debug) else None)
        return snap

    @staticmethod
    def _diff_snapshot(a, b):
        out = []
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                out.append("%s: %r -> %r" % (k, a.get(k), b.get(k)))
        return out

    @classmethod
    def _convert(cls, outdir):
        os.mkdir(outdir)
        cmd = [PERFGRAFT, "elf", cls.dump_path, "-o", outdir, "--list"]
        cmd += ["--per-function"] if cls.PER_FUNCTION else ["--layout", "packed"]
        cmd.extend(cls.EXTRA_ARGS)
        rc, out, err = run(cmd, cwd=cls.tmp.name)
        if rc != 0:
            raise AssertionError("%s: `%s` exited %d; stderr:\n%s" % (
                cls.FIXTURE, shell(cmd), rc,
                err.decode(errors="replace")[-3000:]))
        return outdir, out.decode("utf-8", "surrogateescape"), cmd

    @classmethod
    def _parse_list(cls, text):
        places = []
        for n, ln in enumerate(text.split("\n"), 1):
            if not ln:
                continue
            f = ln.split("\t")
            if len(f) != 7:
                raise AssertionError("%s: `%s` stdout line %d has %d tab "
                                     "separated fields, expected 7: %r" % (
                                         cls.FIXTURE, shell(cls.cmd1), n,
                                         len(f), ln))
            try:
                places.append(dict(
                    code_index=int(f[0]), code_addr=int(f[1], 16),
                    code_size=int(f[2]), image=f[3], pgoff=int(f[4], 16),
                    map_len=int(f[5]), name=unescape_name(f[6]),
                    line=n, raw=ln))
            except ValueError as e:
                raise AssertionError("%s: `%s` stdout line %d unparsable "
                                     "(%s): %r" % (cls.FIXTURE,
                                                   shell(cls.cmd1), n, e, ln))
        if not places:
            raise AssertionError("%s: `%s` listed no function" % (
                cls.FIXTURE, shell(cls.cmd1)))
        return places

    def image_path(self, image, out=None):
        return os.path.join(out or self.out1, image)

    def readelf(self, image, out=None):
        key = (out or self.out1, image)
        if key not in self._readelf_cache:
            cmd = ["readelf", "-a", "-W", self.image_path(image, out)]
            rc, o, e = run(cmd)
            self._readelf_cache[key] = (cmd, rc, o.decode(errors="replace"),
                                        e.decode(errors="replace"))
        return self._readelf_cache[key]

    def readelf_all(self, out=None):
        imgs = self.images
        pmap(lambda i: self.readelf(i, out), imgs)
        return {i: self.readelf(i, out) for i in imgs}

    def where(self, image, cmd):
        return "%s: image %s: `%s`" % (self.FIXTURE, image, shell(cmd))

    def report(self, failures, what):
        if failures:
            msg = "%d failure(s) in %s:\n  " % (len(failures), what)
            msg += "\n  ".join(failures[:MAX_REPORT])
            if len(failures) > MAX_REPORT:
                msg += "\n  ... and %d more" % (len(failures) - MAX_REPORT)
            self.fail(msg)

    # -- the listing against the oracle ------------------------------------

    def test_00_list_matches_oracle(self):
        fails = []
        loads = [ld for ld in self.oracle.loads if ld.code_size]
        self.assertGreater(len(loads), 100, "oracle found few LOADs")
        self.assertEqual(len(self.loads), len(self.oracle.loads),
                         "fixture has duplicate code_index values")
        seen = set()
        for p in self.places:
            ld = self.loads.get(p["code_index"])
            tag = "%s: --list line %d (%r)" % (self.FIXTURE, p["line"],
                                               p["raw"][:120])
            if ld is None:
                fails.append("%s: code_index %d not in the dump" % (
                    tag, p["code_index"]))
                continue
            if p["code_index"] in seen:
                fails.append("%s: code_index listed twice" % tag)
            seen.add(p["code_index"])
            exp_map = (align8(ld.code_size) + ld.unwind.mapped_size
                       if ld.has_cfi else ld.code_size)
            for k, exp, got in (("code_addr", ld.code_addr, p["code_addr"]),
                                ("code_size", ld.code_size, p["code_size"]),
                                ("name", ld.name, p["name"]),
                                ("map_len", exp_map, p["map_len"])):
                if exp != got:
                    fails.append("%s: %s expected %r got %r" % (
                        tag, k, exp, got))
            if "/" in p["image"] or p["image"] in ("", ".", ".."):
                fails.append("%s: bad image name %r" % (tag, p["image"]))
            if p["pgoff"] % 16:
                fails.append("%s: pgoff 0x%x not 16-byte aligned" % (
                    tag, p["pgoff"]))
            prefix = "jitted-%d-" % self.oracle.header["pid"]
            own = "%s%d.so" % (prefix, ld.code_index)
            if ld.has_cfi or self.PER_FUNCTION:
                if p["image"] != own:
                    fails.append("%s: expected an image of its own %s, got "
                                 "%s" % (tag, own, p["image"]))
            elif not re.fullmatch(re.escape(prefix) + r"pack\d+\.so",
                                  p["image"]):
                fails.append("%s: expected a packed image %spackN.so, got %s"
                             % (tag, prefix, p["image"]))
        missing = [ld.code_index for ld in loads if ld.code_index not in seen]
        if missing:
            fails.append("%s: %d LOADs with code not listed, e.g. %s" % (
                self.FIXTURE, len(missing), missing[:10]))
        for img, ps in self.by_image.items():
            if len(ps) > 1 and any(p["code_index"] in self.loads and
                                   self.loads[p["code_index"]].has_cfi
                                   for p in ps):
                fails.append("%s: image %s holds a CFI function and %d "
                             "others" % (self.FIXTURE, img, len(ps) - 1))
            for a, b in zip(ps, ps[1:]):
                if a["pgoff"] + a["code_size"] > b["pgoff"]:
                    fails.append("%s: image %s: #%d [0x%x,+%d) overlaps #%d "
                                 "at 0x%x" % (self.FIXTURE, img,
                                              a["code_index"], a["pgoff"],
                                              a["code_size"],
                                              b["code_index"], b["pgoff"]))
        self.report(fails, "--list vs oracle")

    def test_01_output_dir_holds_exactly_the_images(self):
        for out in (self.out1, self.out2):
            got = sorted(os.listdir(out))
            self.assertEqual(got, self.images,
                             "%s: files in %s differ from the images in "
                             "--list" % (self.FIXTURE, out))

    def test_02_nothing_written_outside(self):
        self.assertEqual(self.outside_changes, [],
                         "%s: `%s` changed files outside its output dir" % (
                             self.FIXTURE, shell(self.cmd1)))

    # -- readelf / eu-readelf / llvm-dwarfdump -----------------------------

    def test_10_readelf_clean(self):
        fails = []
        for img, (cmd, rc, out, err) in self.readelf_all().items():
            # Symbol names (e.g. "Builtin:ErrorConstructor") are not
            # messages: drop the name column of symbol table entry lines.
            text = [" ".join(ln.split(None, 7)[:7]) if SYM_RE.match(ln)
                    else ln for ln in out.split("\n")]
            bad = [ln for ln in text + err.split("\n")
                   if re.search(r"Warning|Error|warning", ln)]
            if rc != 0 or bad:
                fails.append("%s: exit %d, expected no Warning/Error; got: %s"
                             % (self.where(img, cmd), rc, bad[:3]))
        self.report(fails, "readelf -a -W")

    def test_11_eu_readelf_clean(self):
        def one(img):
            cmd = ["eu-readelf", "-a", self.image_path(img)]
            rc, o, e = run(cmd)
            o = o.decode(errors="replace")
            e = e.decode(errors="replace")
            inval = [ln for ln in o.split("\n") if "invalid" in ln]
            if rc != 0 or e.strip() or inval:
                return "%s: exit %d, expected empty stderr and no 'invalid'; "\
                    "stderr %r, lines %s" % (self.where(img, cmd), rc,
                                             e[:300], inval[:3])
            return None
        fails = [f for f in pmap(one, self.images) if f]
        self.report(fails, "eu-readelf -a")

    def test_12_dwarfdump_verify(self):
        def one(img):
            cmd = [DWARFDUMP, "--verify", self.image_path(img)]
            rc, o, e = run(cmd)
            if rc != 0:
                return "%s: expected exit 0, got %d: %s" % (
                    self.where(img, cmd), rc,
                    (o + e).decode(errors="replace")[-500:])
            return None
        fails = [f for f in pmap(one, self.images) if f]
        self.report(fails, "llvm-dwarfdump --verify")

    def test_13_layout_vaddr_equals_offset(self):
        fails = []
        for img, (cmd, rc, out, err) in self.readelf_all().items():
            info = ReadelfInfo(out)
            w = self.where(img, cmd)
            text = info.sections.get(".text")
            if text is None:
                fails.append("%s: no .text section" % w)
                continue
            if text["addr"] != text["off"]:
                fails.append("%s: .text sh_addr 0x%x != sh_offset 0x%x" % (
                    w, text["addr"], text["off"]))
            if "X" not in text["flags"]:
                fails.append("%s: .text flags %r lack X" % (w, text["flags"]))
            for p in self.by_image[img]:
                lo, hi = p["pgoff"], p["pgoff"] + p["code_size"]
                if not (text["addr"] <= lo and hi <= text["addr"] +
                        text["size"]):
                    fails.append("%s: #%d [0x%x,0x%x) outside .text "
                                 "[0x%x,+0x%x)" % (w, p["code_index"], lo, hi,
                                                   text["addr"],
                                                   text["size"]))
                if not any(off == va and off <= lo and hi <= off + fsz
                           for off, va, fsz, msz, fl in info.loads):
                    fails.append("%s: #%d [0x%x,0x%x) not inside a PT_LOAD "
                                 "with p_offset == p_vaddr (got %s)" % (
                                     w, p["code_index"], lo, hi,
                                     [(hex(a), hex(b), c) for a, b, c, _, _
                                      in info.loads]))
        self.report(fails, "layout")

    def test_14_cfi_image_load_segment(self):
        # perf 5.19..6.7 (libunwind) finds .eh_frame_hdr at
        # min(map start) - (first PT_LOAD vaddr & ~4095) + hdr vaddr: with
        # --cfi-layout perf-5.19 the first PT_LOAD must start at the page-aligned
        # code (== pgoff); otherwise at 0 (older/newer perf, libdw).
        compat = "perf-5.19" in self.EXTRA_ARGS
        cfi = [p for p in self.places if self.loads[p["code_index"]].has_cfi]
        self.assertGreater(len(cfi), 0, "fixture has no function with CFI")
        fails = []
        for p in cfi:
            cmd, rc, out, err = self.readelf(p["image"])
            loads = ReadelfInfo(out).loads
            want = p["pgoff"] if compat else 0
            if not loads or loads[0][1] != want or (compat and want % 4096):
                fails.append("%s: #%d: first PT_LOAD vaddr %s, expected 0x%x" % (
                    self.where(p["image"], cmd), p["code_index"],
                    hex(loads[0][1]) if loads else None, want))
        self.report(fails, "PT_LOAD of CFI images")

    # -- code bytes --------------------------------------------------------

    def test_20_objdump_code_bytes(self):
        line_re = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f]{2}(?: [0-9a-f]{2})*)"
                             r"\s*(?:\t|$)")
        checked = [0]

        def one(img):
            cmd = ["objdump", "-d", "-z", self.image_path(img)]
            rc, o, e = run(cmd)
            if rc != 0:
                return ["%s: exit %d: %s" % (self.where(img, cmd), rc,
                                             e.decode(errors="replace")[:300])]
            mem = {}
            for ln in o.decode(errors="replace").split("\n"):
                m = line_re.match(ln)
                if m:
                    a = int(m.group(1), 16)
                    for i, hb in enumerate(m.group(2).split(" ")):
                        mem[a + i] = int(hb, 16)
            fails = []
            for p in self.by_image[img]:
                code = self.loads[p["code_index"]].code
                got = bytes(mem.get(p["pgoff"] + i, 0)
                            for i in range(len(code)))
                missing = [i for i in range(len(code))
                           if (p["pgoff"] + i) not in mem]
                if missing:
                    fails.append("%s: #%d %r: %d of %d code bytes not shown "
                                 "in the disassembly (first at pgoff+0x%x)"
                                 % (self.where(img, cmd), p["code_index"],
                                    p["name"][:60], len(missing), len(code),
                                    missing[0]))
                elif got != code:
                    i = next(i for i in range(len(code)) if got[i] != code[i])
                    fails.append("%s: #%d %r: bytes differ at pgoff+0x%x: "
                                 "expected %s got %s" % (
                                     self.where(img, cmd), p["code_index"],
                                     p["name"][:60], i,
                                     code[i:i + 8].hex(), got[i:i + 8].hex()))
                else:
                    checked[0] += 1
            return fails
        fails = [f for fs in pmap(one, self.images) for f in fs]
        self.report(fails, "objdump -d code bytes")
        self.assertEqual(checked[0], len(self.places),
                         "not every function's bytes were checked")

    # -- symbols -------------------------------------------------------------

    def test_21_symtab(self):
        fails = []
        nsyms = 0
        for img, (cmd, rc, out, err) in self.readelf_all().items():
            info = ReadelfInfo(out)
            w = self.where(img, cmd)
            if not info.symtab_seen:
                fails.append("%s: no .symtab" % w)
                continue
            funcs = {}
            for value, size, typ, bind, ndx, name in info.symtab:
                if typ == "FUNC":
                    funcs.setdefault(value, []).append((size, name, ndx))
            nfunc = sum(len(v) for v in funcs.values())
            if nfunc != len(self.by_image[img]):
                fails.append("%s: expected %d FUNC symbols, got %d" % (
                    w, len(self.by_image[img]), nfunc))
            for p in self.by_image[img]:
                exp_name = p["name"].decode("utf-8", "replace")
                syms = funcs.get(p["pgoff"], [])
                if len(syms) != 1:
                    fails.append("%s: #%d: expected one FUNC at 0x%x, got %r"
                                 % (w, p["code_index"], p["pgoff"], syms))
                    continue
                size, name, ndx = syms[0]
                if size != p["code_size"] or name != exp_name:
                    fails.append("%s: FUNC at 0x%x: expected size %d name %r,"
                                 " got size %d name %r" % (
                                     w, p["pgoff"], p["code_size"], exp_name,
                                     size, name))
                else:
                    nsyms += 1
        self.report(fails, ".symtab")
        self.assertEqual(nsyms, len(self.places))

    # -- line tables -----------------------------------------------------------

    def test_30_addr2line(self):
        bias = self.oracle.line_bias
        self.assertEqual(bias, 0x40, "fixture is not a V8 dump?")
        counts = dict(lines=0, funcs=0, damaged_addrs=0)
        jobs = []
        for img, ps in self.by_image.items():
            addrs = []   # (addr, place, [entries], damaged)
            for p in ps:
                ld = self.loads[p["code_index"]]
                if ld.debug is None:
                    continue
                byaddr = {}
                for e in ld.debug.entries:
                    off = e.addr - bias - ld.code_addr
                    if 0 <= off < ld.code_size:
                        byaddr.setdefault(off, []).append(e)
                good = sorted(o for o, es in byaddr.items()
                              if any(e.file is not None for e in es))
                bad = sorted(o for o, es in byaddr.items()
                             if all(e.file is None for e in es))
                for o in good:
                    addrs.append((p["pgoff"] + o, p, byaddr[o], False))
                for o in bad:
                    addrs.append((p["pgoff"] + o, p, byaddr[o], True))
            if addrs:
                jobs.append((img, addrs))
        self.assertTrue(jobs, "no function with debug entries in fixture")

        def one(job):
            img, addrs = job
            cmd = ["addr2line", "-f", "-e", self.image_path(img)] + \
                ["0x%x" % a for a, _, _, _ in addrs]
            rc, o, e = run(cmd)
            cmd_short = cmd[:4] + ["ADDR... (%d addresses)" % len(addrs)]
            w = self.where(img, cmd_short)
            if rc != 0:
                return ["%s: exit %d: %s" % (w, rc,
                                             e.decode(errors="replace")[:300])
                        ], 0, set(), 0
            text = o.decode("utf-8", "surrogateescape")
            lines = text.split("\n")
            if len(lines) < 2 * len(addrs):
                return ["%s: expected %d output lines, got %d" % (
                    w, 2 * len(addrs), len(lines) - 1)], 0, set(), 0
            fails, nlines, funcs, ndamaged = [], 0, set(), 0
            for k, (addr, p, es, damaged) in enumerate(addrs):
                fn, loc = lines[2 * k], lines[2 * k + 1]
                loc = re.sub(r" \(discriminator \d+\)$", "", loc)
                if damaged:
                    ndamaged += 1
                    if re.search(r"[\x00-\x1f\x7f]|[\udc80-\udcff]", loc):
                        fails.append("%s: 0x%x (#%d, damaged file name in "
                                     "the dump): garbage file in %r" % (
                                         w, addr, p["code_index"], loc))
                    continue
                exp_fn = p["name"].decode("utf-8", "surrogateescape")
                # the names perf can split: node:internal/x is written
                # node%3Ainternal/x
                exp_locs = ["%s:%d" % (jitdump_oracle.perf_file_name(e.file), e.line)
                            for e in es if e.file is not None]
                if fn != exp_fn or loc not in exp_locs:
                    fails.append("%s: 0x%x (#%d +0x%x): expected %r %s, got "
                                 "%r %r" % (w, addr, p["code_index"],
                                            addr - p["pgoff"], exp_fn,
                                            " or ".join(exp_locs), fn, loc))
                else:
                    nlines += 1
                    funcs.add(p["code_index"])
            return fails, nlines, funcs, ndamaged

        fails = []
        allfuncs = set()
        for f, n, fs, nd in pmap(one, jobs):
            fails += f
            counts["lines"] += n
            counts["damaged_addrs"] += nd
            allfuncs |= fs
        self.report(fails, "addr2line")
        exp_lines = sum(
            len({e.addr for e in ld.debug.entries if e.file is not None and
                 0 <= e.addr - bias - ld.code_addr < ld.code_size})
            for ld in self.oracle.loads if ld.debug)
        self.assertGreater(counts["lines"], 100)
        self.assertEqual(counts["lines"], exp_lines)
        self.assertGreater(len(allfuncs), 10)
        self.assertGreater(counts["damaged_addrs"], 0,
                           "fixture lost its damaged-name entries?")

    # -- unwind tables -----------------------------------------------------

    def frames(self, img):
        cmd = ["eu-readelf", "--debug-dump=frames", self.image_path(img)]
        rc, o, e = run(cmd)
        return cmd, rc, o.decode(errors="replace"), e.decode(errors="replace")

    def test_40_cfi_images(self):
        cfi = [p for p in self.places if self.loads[p["code_index"]].has_cfi]
        self.assertGreater(len(cfi), 0, "fixture has no function with CFI")

        def one(p):
            img = p["image"]
            cmd, rc, out, err = self.frames(img)
            w = self.where(img, cmd)
            if rc != 0 or err.strip():
                return "%s: exit %d stderr %r" % (w, rc, err[:300])
            # "initial_location:   +0000000000000080 <SYM> (offset: 0x80)"
            # or "initial_location:   0x0000000000000080"
            locs = []
            for m in re.finditer(r"initial_location:[ \t]+([^\n]*)", out):
                v = m.group(1)
                mo = re.findall(r"\(offset: (0x[0-9a-f]+)\)", v)
                mv = re.match(r"\+?(?:0x)?([0-9a-f]+)", v)
                if mo:
                    locs.append(int(mo[-1], 16))
                elif mv:
                    locs.append(int(mv.group(1), 16))
            nfde = len(re.findall(r"\] FDE length=", out))
            if nfde == 0 or not locs:
                return "%s: #%d: expected at least one FDE, got none" % (
                    w, p["code_index"])
            if p["pgoff"] not in locs:
                return "%s: #%d: expected an FDE with initial_location 0x%x, "\
                    "got %s" % (w, p["code_index"], p["pgoff"],
                                [hex(x) for x in locs])
            m = re.search(r"fde_count:\s+(\d+)", out)
            if m is None or int(m.group(1)) < 1:
                return "%s: #%d: .eh_frame_hdr fde_count expected >= 1, got "\
                    "%s" % (w, p["code_index"], m and m.group(1))
            return None
        fails = [f for f in pmap(one, cfi) if f]
        self.report(fails, "eu-readelf --debug-dump=frames (CFI images)")

    def test_41_packed_images_have_empty_eh_frame_hdr(self):
        packed = [img for img in self.images
                  if not any(self.loads[p["code_index"]].has_cfi
                             for p in self.by_image[img])
                  and re.search(r"-pack\d+\.so$", img)]
        if self.PER_FUNCTION:
            self.assertEqual(packed, [], "packed image in --per-function")
            return
        self.assertGreater(len(packed), 0, "no packed image")

        def one(img):
            cmd, rc, out, err = self.readelf(img)
            info = ReadelfInfo(out)
            w = self.where(img, cmd)
            if ".eh_frame_hdr" not in info.sections:
                return "%s: expected an .eh_frame_hdr section, got sections "\
                    "%s" % (w, sorted(info.sections))
            cmd, rc, out, err = self.frames(img)
            w = self.where(img, cmd)
            m = re.search(r"fde_count:\s+(\d+)", out)
            if rc != 0 or err.strip() or m is None or m.group(1) != "0":
                return "%s: expected a decodable .eh_frame_hdr with fde_count"\
                    " 0; exit %d stderr %r fde_count %s" % (
                        w, rc, err[:200], m and m.group(1))
            return None
        fails = [f for f in pmap(one, packed) if f]
        self.report(fails, "packed .eh_frame_hdr")

    # -- build-ids ---------------------------------------------------------------

    def test_50_build_ids(self):
        # The notes are read from `readelf -a -W` output, which includes
        # everything `readelf -n` prints.
        fails = []
        ids = {}
        for out in (self.out1, self.out2):
            ids[out] = {}
            for img, (cmd, rc, text, err) in self.readelf_all(out).items():
                info = ReadelfInfo(text)
                if ".note.gnu.build-id" not in info.sections or \
                        len(info.build_ids) != 1 or \
                        len(info.build_ids[0]) != 40:
                    fails.append("%s: expected one 20-byte GNU build-id note,"
                                 " got %s" % (self.where(img, cmd),
                                              info.build_ids))
                    continue
                ids[out][img] = info.build_ids[0]
        self.report(fails, "readelf -n build-id")
        first = ids[self.out1]
        self.assertEqual(len(first), len(self.images))
        dup = {}
        for img, b in first.items():
            dup.setdefault(b, []).append(img)
        dups = ["%s shared by %s" % (b, imgs[:4]) for b, imgs in dup.items()
                if len(imgs) > 1]
        self.report(["%s: build-id %s" % (self.FIXTURE, d) for d in dups],
                    "build-id uniqueness")
        self.assertEqual(self.list1, self.list2,
                         "%s: --list output differs between two runs" %
                         self.FIXTURE)
        diff = ["%s: image %s: build-id %s in %s, %s in %s" % (
            self.FIXTURE, img, first[img], self.out1,
            ids[self.out2].get(img), self.out2)
            for img in sorted(first) if ids[self.out2].get(img) != first[img]]
        self.report(diff, "build-id determinism (same dump converted twice)")


class NodeUnwindPacked(ImageChecks, unittest.TestCase):
    FIXTURE = "node-unwind.dump"


class NodeUnwindPerFunction(ImageChecks, unittest.TestCase):
    FIXTURE = "node-unwind.dump"
    PER_FUNCTION = True


class NodeInterpPacked(ImageChecks, unittest.TestCase):
    FIXTURE = "node-interp.dump"


class NodeUnwindPerf519(ImageChecks, unittest.TestCase):
    FIXTURE = "node-unwind.dump"
    EXTRA_ARGS = ("--cfi-layout", "perf-5.19")


class FixtureOracle(unittest.TestCase):
    """The committed fixtures are what the README says they are."""

    def test_fixtures(self):
        for name in ("node-unwind.dump", "node-interp.dump"):
            d = oracle(name)
            c = d.counts
            self.assertLess(d.size, 3 * 1000 * 1000, name)
            self.assertGreater(c.get(jitdump_oracle.LOAD, 0), 1000, name)
            self.assertEqual(c.get(jitdump_oracle.LOAD),
                             c.get(jitdump_oracle.UNWINDING_INFO), name)
            self.assertGreater(c.get(jitdump_oracle.DEBUG_INFO, 0), 10, name)
            self.assertGreaterEqual(sum(ld.has_cfi for ld in d.loads), 2, name)
            self.assertGreater(d.damaged_entries, 0, name)
            self.assertEqual((d.dropped_debug, d.dropped_unwind,
                              d.dropped_loads, d.truncated_bytes),
                             (0, 0, 0, 0), name)
            idx = sorted(ld.code_index for ld in d.loads)
            self.assertEqual(idx, list(range(len(idx))), name)


def _synthetic_dump(bo):
    """A small jitdump in byte order bo ('<' or '>'): UNWINDING_INFO +
    DEBUG_INFO (one good name, one "\\xff", one damaged name with NULs in
    its first 16 bytes, last entry padded) + LOAD, then a bare LOAD."""
    code_addr = 0x7F0000001000
    code = bytes(range(1, 65))

    def rec(rid, body):
        return struct.pack(bo + "IIQ", rid, 16 + len(body), 5) + body

    good = b"node:internal/x.js\0"
    damaged = b"\x01\x02\0\0\x05\x06\x07\x08\0\0\0\0\x7f\0\0\x10tail/work.js\0"
    ents = [(code_addr + 0x40, 3, 1, good), (code_addr + 0x44, 4, 2, b"\xff\0"),
            (code_addr + 0x48, 5, 3, damaged), (code_addr + 0x50, 6, 4, damaged)]
    dbody = struct.pack(bo + "QQ", code_addr, len(ents))
    for a, ln, col, nm in ents:
        dbody += struct.pack(bo + "QII", a, ln, col) + nm
    dbody += bytes(-(16 + len(dbody)) % 8)
    blob = bytes(range(24)) + bytes(20)
    ubody = struct.pack(bo + "QQQ", len(blob), 20, 48) + blob
    lbody = struct.pack(bo + "IIQQQQ", 1, 2, code_addr, code_addr, len(code),
                        0) + b"JS:*f x.js:1:1\0" + code
    l2 = struct.pack(bo + "IIQQQQ", 1, 2, code_addr + 0x100,
                     code_addr + 0x100, 4, 1) + b"Builtin:B\0" + b"\xc3" * 4
    hdr = struct.pack(bo + "IIIIIIQQ", jitdump_oracle.MAGIC, 1, 40, 62,
                      0xDEADBEEF, 77, 123, 0)
    return (hdr + rec(4, ubody) + rec(2, dbody) + rec(0, lbody) + rec(0, l2)
            + b"\1\0\0")


class OracleSelfTest(unittest.TestCase):
    """The oracle itself, on a synthetic dump in both byte orders."""

    def test_both_byte_orders(self):
        res = []
        for bo in ("<", ">"):
            d = jitdump_oracle.parse(_synthetic_dump(bo))
            self.assertEqual(d.header["byteorder"], bo)
            self.assertEqual(len(d.loads), 2)
            self.assertEqual(d.truncated_bytes, 3)
            a, b = d.loads
            self.assertEqual((a.code_index, a.name, a.code),
                             (0, b"JS:*f x.js:1:1", bytes(range(1, 65))))
            self.assertTrue(a.has_cfi)
            self.assertEqual(a.unwind.mapped_size, 48)
            self.assertEqual(a.unwind.eh_frame, bytes(range(24)))
            self.assertEqual(len(a.unwind.eh_frame_hdr), 20)
            self.assertIsNone(b.debug)
            self.assertIsNone(b.unwind)
            got = [(e.addr - a.code_addr, e.line, e.discrim, e.file)
                   for e in a.debug.entries]
            self.assertEqual(got, [(0x40, 3, 1, "node:internal/x.js"),
                                   (0x44, 4, 2, "node:internal/x.js"),
                                   (0x48, 5, 3, None), (0x50, 6, 4, None)])
            self.assertEqual(d.damaged_entries, 2)
            res.append(got)
        self.assertEqual(res[0], res[1])

    def test_row_before_code_is_plausible(self):
        """A short name followed by a row a little before the code (BeamAsm)
        is not damaged, even at addresses small enough that a NUL inside
        the big-endian address would make a shifted entry look real."""
        code_addr = 0x7000
        for bo in ("<", ">"):
            ents = [(code_addr + 8, 21, 0, b"b.js\0"), (code_addr - 1, 23, 0, b"a.js\0")]
            body = struct.pack(bo + "QQ", code_addr, len(ents))
            for a, ln, col, nm in ents:
                body += struct.pack(bo + "QII", a, ln, col) + nm
            body += bytes(-(16 + len(body)) % 8)
            hdr = struct.pack(bo + "IIIIIIQQ", jitdump_oracle.MAGIC, 1, 40, 62, 0, 77, 123, 0)
            d = jitdump_oracle.parse(hdr + struct.pack(bo + "IIQ", 2, 16 + len(body), 5) + body)
            got = [(e.addr, e.line, e.file) for e in d.debug_infos[0].entries]
            self.assertEqual(got, [(code_addr + 8, 21, "b.js"), (code_addr - 1, 23, "a.js")], bo)

    def test_name_rules(self):
        """The code model's names as the oracle predicts them (issue 22)."""
        pf = jitdump_oracle.perf_file_name
        for raw, want in ((b"file:///srv/my%20app/x.js", b"/srv/my app/x.js"),
                          (b"file:///a%3Ab%0a%7f%2", b"/a%3Ab%0a%7f%2"),
                          (b"file://host/a.js", b"file%3A//host/a.js"),
                          (b"node:internal/util", b"node%3Ainternal/util"),
                          (b"x\ty\x7f", b"x?y?"), (b"/plain.js", b"/plain.js")):
            self.assertEqual(pf(raw), want)
            self.assertEqual(pf(raw.decode("utf-8", "surrogateescape")),
                             want.decode("utf-8", "surrogateescape"))
        self.assertIsNone(pf(None))
        self.assertEqual(jitdump_oracle.symbol_name(b"a\tb\nc\x7f\xe9"), b"a?b?c?\xe9")


if __name__ == "__main__":
    unittest.main()
