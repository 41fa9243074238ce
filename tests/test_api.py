#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The public API as a user of the installed library meets it.

1. examples/symbolize.c (built by meson as examples/example_symbolize) on
   the real node dump tests/fixtures/node/node-unwind.dump: for a few
   functions picked from `perfgraft dump --json` (start, an offset inside,
   the last byte, ADDR@TIME before and at the LOAD) and addresses outside
   all code, the name and offset must be what the dump says and FILE:LINE
   what addr2line reads from the image `perfgraft elf` writes (image
   offset = pgoff + addr - code_addr, from `perfgraft elf --list`).  The
   same addresses through `perfgraft symbolize` must give the same
   answers.  Error paths: a missing dump, a file that is not a jitdump, a
   malformed address.
2. Installation: `meson install --destdir TMP --no-rebuild` of the build
   dir, then with PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR into TMP:
   `pkg-config --modversion perfgraft` is the project version, the example
   compiles with `cc $(pkg-config --cflags --libs perfgraft)` and, run
   with LD_LIBRARY_PATH into TMP, prints what the meson-built one prints;
   every header of include/perfgraft/ is installed and compiles on its own
   as C11 (-Wall -Wextra -Werror) and as C++, its functions with C
   linkage.

The binary under test is $PERFGRAFT (default build/perfgraft); the
example is beside it in examples/, the build dir is its directory.
Everything is written in tempfile directories; ~/.debug is not touched.
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
PERFGRAFT = os.path.abspath(os.environ.get(
    "PERFGRAFT", os.path.join(ROOT, "build", "perfgraft")))
BUILD = os.path.dirname(PERFGRAFT)
EXAMPLE = os.path.join(BUILD, "examples", "example_symbolize")
EXAMPLE_SRC = os.path.join(ROOT, "examples", "symbolize.c")
DUMP = os.path.join(HERE, "fixtures", "node", "node-unwind.dump")
HEADERS = os.path.join(ROOT, "include", "perfgraft")
TIMEOUT = 300

# ADDR[@TIME]<tab>NAME+0xOFF<tab>FILE:LINE[:COL], "??" for no code, "??:0"
# (or "??:?", or nothing) for no line.  NAME may hold blanks (V8: "JS:*fib
# /path/work.js:4:13") and so may FILE: the last "+0x<hex>" ends NAME.
LINE_RE = re.compile(r"^(?:0x)?([0-9a-fA-F]+)(?:@\d+)?\s+(.*)$")
SYM_RE = re.compile(r"^(.*)\+0x([0-9a-fA-F]+)(?:\s+(.*))?$")
FILE_RE = re.compile(r"^(.*?):(\d+)(?::(\d+))?$")


def run(cmd, env=None, cwd=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, cwd=cwd, timeout=TIMEOUT)
    return (p.returncode, p.stdout.decode("utf-8", "surrogateescape"),
            p.stderr.decode("utf-8", "surrogateescape"))


def shell(cmd):
    return " ".join(c if re.fullmatch(r"[\w./:=+@-]+", c) else repr(c)
                    for c in cmd)


def with_env(extra):
    env = dict(os.environ)
    env.update(extra or {})
    return env


def parse_line(line):
    """One output line -> (addr, name, off, file, line, col); name None for
    an address without code, file None without a line."""
    m = LINE_RE.match(line.strip())
    if not m:
        return None
    addr, rest = int(m.group(1), 16), m.group(2).strip()
    if re.match(r"\?\?(\s|$)", rest):
        return (addr, None, None, None, None, None)
    m = SYM_RE.match(rest)
    if not m:
        return None
    name, off, loc = m.group(1), int(m.group(2), 16), (m.group(3) or "").strip()
    if not loc or loc.startswith("??"):
        return (addr, name, off, None, None, None)
    f = FILE_RE.match(loc)
    if not f:
        return None
    col = int(f.group(3)) if f.group(3) else None
    return (addr, name, off, f.group(1), int(f.group(2)), col or None)


def parse_output(text):
    rows = []
    for ln in text.splitlines():
        if ln.strip():
            rows.append((ln, parse_line(ln)))
    return rows


def project_version():
    with open(os.path.join(ROOT, "meson.build"), encoding="utf-8") as f:
        m = re.search(r"project\([^)]*?version\s*:\s*'([^']+)'", f.read(), re.S)
    return m.group(1) if m else None


def public_functions(header_text):
    """Names of the functions a header declares (declarations start at
    column 0; typedefs of function pointers are left out)."""
    text = re.sub(r"/\*.*?\*/", " ", header_text, flags=re.S)
    names = []
    for m in re.finditer(r"^(?!typedef|#|\s)[^;{}()]*?\b(pg_\w+)\s*\(", text, re.M):
        names.append(m.group(1))
    return names


class DumpFacts:
    """What the dump and the images say, computed once."""

    loads = None        # code_addr -> LOAD record (dump --json)
    places = None       # code_addr -> (image, pgoff)
    imgdir = None
    tmp = None

    @classmethod
    def get(cls):
        if cls.loads is not None:
            return cls
        cls.tmp = tempfile.TemporaryDirectory(prefix="pg-api-")
        rc, out, err = run([PERFGRAFT, "dump", "--json", DUMP])
        if rc != 0:
            raise AssertionError("perfgraft dump --json %s: exit %d: %s"
                                 % (DUMP, rc, err[-2000:]))
        doc = json.loads(out)
        cls.loads = {}
        cls.first_time = None   # the first LOAD's, in file order
        for r in doc["records"]:
            if r.get("type") == "LOAD" and r.get("code_size"):
                cls.loads[r["code_addr"]] = r
                if cls.first_time is None:
                    cls.first_time = r["timestamp"]
        cls.imgdir = os.path.join(cls.tmp.name, "img")
        os.mkdir(cls.imgdir)
        cmd = [PERFGRAFT, "elf", DUMP, "-o", cls.imgdir, "--list", "-q"]
        rc, out, err = run(cmd)
        if rc != 0:
            raise AssertionError("%s: exit %d: %s" % (shell(cmd), rc, err[-2000:]))
        cls.places = {}
        for ln in out.splitlines():
            f = ln.split("\t")
            if len(f) < 7:
                continue
            cls.places[int(f[1], 16)] = (os.path.join(cls.imgdir, f[3]), int(f[4], 16))
        return cls

    @classmethod
    def cleanup(cls):
        if cls.tmp is not None:
            cls.tmp.cleanup()
        cls.tmp = cls.loads = cls.places = cls.imgdir = None


def tearDownModule():
    DumpFacts.cleanup()


def addr2line(image, offsets):
    """[(function, file or None, line or None)] for image offsets."""
    cmd = ["addr2line", "-f", "-e", image] + ["0x%x" % o for o in offsets]
    rc, out, err = run(cmd)
    if rc != 0:
        raise AssertionError("%s: exit %d: %s" % (shell(cmd), rc, err))
    ls = out.splitlines()
    res = []
    for i in range(len(offsets)):
        fn, loc = ls[2 * i], ls[2 * i + 1]
        # addr2line appends " (discriminator N)" to some rows
        loc = re.sub(r" \(discriminator \d+\)$", "", loc)
        file, _, line = loc.rpartition(":")
        if file == "??" or not line.isdigit() or line == "0":
            res.append((fn, None, None))
        else:
            res.append((fn, file, int(line)))
    return res


@unittest.skipUnless(os.path.isfile(PERFGRAFT), "no binary at %s" % PERFGRAFT)
class ExampleSymbolize(unittest.TestCase):
    """examples/example_symbolize against the dump and addr2line."""

    @classmethod
    def setUpClass(cls):
        if not os.access(EXAMPLE, os.X_OK):
            raise unittest.SkipTest("%s is not built" % EXAMPLE)
        if not shutil.which("addr2line"):
            raise unittest.SkipTest("addr2line (binutils) is not installed")
        cls.facts = DumpFacts.get()
        cls.cases = cls.pick()
        cls.expected = cls.expect(cls.cases)

    @classmethod
    def pick(cls):
        """[(argument, addr, load or None)]: functions of every kind (own
        CFI image with lines, packed with lines, builtin without lines),
        and addresses outside all code."""
        loads = cls.facts.loads
        by_name = {}
        for a in sorted(loads):
            by_name.setdefault(loads[a]["name"], a)

        def first(pred):
            for a in sorted(loads):
                if pred(loads[a]["name"]) and a in cls.facts.places:
                    return a
            raise AssertionError("no function matching in %s" % DUMP)

        picks = [
            first(lambda n: n.startswith("JS:*fib ")),      # TurboFan, own image
            first(lambda n: n.startswith("JS:^work ")),     # Sparkplug, packed
            first(lambda n: n.startswith("JS:^fib ")),
            first(lambda n: n.startswith("Builtin:")),      # no line table
        ]
        cases = []
        for a in picks:
            ld = loads[a]
            size, t = ld["code_size"], ld["timestamp"]
            for off in sorted({0, min(0x10, size - 1), size // 2, size - 1}):
                cases.append(("0x%x" % (a + off), a + off, ld))
            # A JIT reuses addresses, so lookups take a time.  No two
            # LOADs of this dump overlap, so each function is there from
            # its since, the dump's first LOAD (code may run before it is
            # announced), and before that nothing.  Integer ns, and perf
            # script's seconds with 6 digits, whose interval's end counts.
            x = a + min(4, size - 1)
            since = cls.facts.first_time
            cases.append(("0x%x@%d" % (x, t), x, ld))
            cases.append(("%x@%d" % (x, t - 1), x, ld if t - 1 >= since else None))
            cases.append(("%x@%d" % (x, since - 1), x, None))
            for us in (t // 1000, t // 1000 - 1, (since - 1) // 1000):
                end = us * 1000 + 999
                cases.append(("0x%x@%d.%06d" % (x, us // 10**6, us % 10**6), x,
                              ld if end >= since else None))
        spans = sorted((a, a + loads[a]["code_size"]) for a in loads)
        assert all(e <= s2 for (_, e), (s2, _) in zip(spans, spans[1:])), \
            "two LOADs of %s overlap: the cases above assume none do" % DUMP
        ends = [a + loads[a]["code_size"] for a in loads]
        for a in (0x10, max(ends) + 0x100000):
            if any(s <= a < s + loads[s]["code_size"] for s in loads):
                continue
            cases.append(("0x%x" % a, a, None))
        return cases

    @classmethod
    def expect(cls, cases):
        """addr -> (addr, name, off, file, line) from the dump and
        addr2line on the image."""
        want = {}
        by_image = {}
        for arg, addr, ld in cases:
            if ld is None:
                want[arg] = (addr, None, None, None, None)
                continue
            image, pgoff = cls.facts.places[ld["code_addr"]]
            by_image.setdefault(image, []).append(
                (arg, addr, ld, pgoff + addr - ld["code_addr"]))
        for image, items in by_image.items():
            got = addr2line(image, [o for _, _, _, o in items])
            for (arg, addr, ld, _), (fn, file, line) in zip(items, got):
                if fn != ld["name"]:
                    raise AssertionError(
                        "addr2line -f -e %s names 0x%x %r, the dump %r"
                        % (image, addr, fn, ld["name"]))
                want[arg] = (addr, ld["name"], addr - ld["code_addr"], file, line)
        return want

    def run_example(self, args, binary=EXAMPLE, env=None):
        return run([binary] + args, env=env)

    def check_rows(self, what, cmd, rc, out, err):
        args = [c for c, _, _ in self.cases]
        self.assertEqual(rc, 0, "%s: exit %d\n%s" % (shell(cmd), rc, err))
        rows = parse_output(out)
        self.assertEqual(len(rows), len(args),
                         "%s: %d lines for %d addresses:\n%s"
                         % (shell(cmd), len(rows), len(args), out))
        bad = []
        for arg, (ln, got) in zip(args, rows):
            exp = self.expected[arg]
            if got is None:
                bad.append("%s: unparsable line %r" % (arg, ln))
                continue
            if got[:5] != exp:
                bad.append("%s: got %r\n    want %r (dump + addr2line)" % (arg, got[:5], exp))
        self.assertFalse(bad, "%s (%s):\n  %s" % (what, shell(cmd), "\n  ".join(bad)))
        return rows

    def test_names_offsets_lines(self):
        args = [c for c, _, _ in self.cases]
        cmd = [EXAMPLE, DUMP] + args
        rc, out, err = run(cmd)
        rows = self.check_rows("example_symbolize", cmd, rc, out, err)
        # V8 gives columns: some row with a line has one
        self.assertTrue(any(r[1] and r[1][5] for r in rows),
                        "no FILE:LINE:COLUMN in:\n%s" % out)
        # the dump's damaged file names are reported through the warn
        # callback, on stderr, and are not errors
        self.assertRegex(err, r"(?m)^example_symbolize: warning: .*node-unwind\.dump: offset \d+:")

    def test_same_as_perfgraft_symbolize(self):
        rc, out, err = run([PERFGRAFT, "symbolize", "--help"])
        if rc != 0 or "usage" not in (out + err).lower():
            self.skipTest("perfgraft symbolize is not there yet (--help exits %d)" % rc)
        args = [c for c, _, _ in self.cases]
        cmd = [PERFGRAFT, "symbolize", DUMP] + args
        rc, cli, err = run(cmd)
        cli_rows = self.check_rows("perfgraft symbolize", cmd, rc, cli, err)
        rc, ex, err = run([EXAMPLE, DUMP] + args)
        self.assertEqual(rc, 0, err)
        ex_rows = parse_output(ex)
        # the same answers, and the example prints them as the command does
        diff = ["%s:\n    perfgraft symbolize: %r\n    example_symbolize:   %r"
                % (a, c[0], e[0])
                for a, c, e in zip(args, cli_rows, ex_rows) if c != e]
        self.assertFalse(diff, "\n".join(diff))

    def test_errors(self):
        with tempfile.TemporaryDirectory(prefix="pg-api-") as tmp:
            missing = os.path.join(tmp, "jit-1.dump")
            rc, out, err = run([EXAMPLE, missing, "0x10"])
            self.assertEqual(rc, 1, err)
            self.assertIn(missing, err)
            self.assertIn("No such file", err)
            self.assertEqual(out, "")
            # not a jitdump: the message from pg_diag names the file
            notdump = os.path.join(HERE, "fixtures", "node", "work.js")
            rc, out, err = run([EXAMPLE, notdump, "0x10"])
            self.assertEqual(rc, 1, err)
            self.assertIn("work.js", err)
            self.assertEqual(out, "")
        # a malformed address: usage error (2), the good ones still answered
        a = min(self.facts.loads)
        rc, out, err = run([EXAMPLE, DUMP, "0xzz", "0x%x" % a])
        self.assertEqual(rc, 2, err)
        self.assertIn("0xzz", err)
        self.assertEqual(len(out.splitlines()), 1, out)
        rc, out, err = run([EXAMPLE])
        self.assertEqual(rc, 2)
        self.assertIn("usage", err)


@unittest.skipUnless(os.path.isfile(PERFGRAFT), "no binary at %s" % PERFGRAFT)
class Installed(unittest.TestCase):
    """meson install into a DESTDIR and use the library through pkg-config."""

    @classmethod
    def setUpClass(cls):
        for tool in ("meson", "pkg-config", "cc", "c++", "nm"):
            if not shutil.which(tool):
                raise unittest.SkipTest("%s is not installed" % tool)
        if not os.path.isfile(os.path.join(BUILD, "meson-private", "coredata.dat")):
            raise unittest.SkipTest("%s is not a meson build directory" % BUILD)
        cls.tmp = tempfile.TemporaryDirectory(prefix="pg-api-inst-")
        cls.dest = os.path.join(cls.tmp.name, "dest")
        cmd = ["meson", "install", "-C", BUILD, "--destdir", cls.dest,
               "--no-rebuild", "--quiet"]
        rc, out, err = run(cmd)
        if rc != 0:
            cls.tmp.cleanup()
            raise AssertionError("%s: exit %d\n%s%s" % (shell(cmd), rc, out, err))
        pcs = []
        for dirpath, _, files in os.walk(cls.dest):
            if "perfgraft.pc" in files:
                pcs.append(dirpath)
        if len(pcs) != 1:
            cls.tmp.cleanup()
            raise AssertionError("perfgraft.pc installed %d times under %s"
                                 % (len(pcs), cls.dest))
        cls.pcdir = pcs[0]
        cls.env = with_env({
            "PKG_CONFIG_PATH": cls.pcdir,
            "PKG_CONFIG_SYSROOT_DIR": cls.dest,
        })

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def pkgconfig(self, *args):
        cmd = ["pkg-config"] + list(args) + ["perfgraft"]
        rc, out, err = run(cmd, env=self.env)
        self.assertEqual(rc, 0, "%s: exit %d: %s" % (shell(cmd), rc, err))
        return out.split()

    def test_modversion(self):
        self.assertEqual(self.pkgconfig("--modversion"), [project_version()])

    def test_flags_point_into_destdir(self):
        cflags = self.pkgconfig("--cflags")
        incs = [f[2:] for f in cflags if f.startswith("-I")]
        self.assertTrue(any(os.path.isfile(os.path.join(i, "perfgraft", "common.h"))
                            for i in incs),
                        "no -I of pkg-config --cflags finds perfgraft/common.h: %r" % cflags)
        libs = self.pkgconfig("--libs")
        self.assertIn("-lperfgraft", libs)
        dirs = [f[2:] for f in libs if f.startswith("-L")]
        self.assertTrue(any(os.path.exists(os.path.join(d, "libperfgraft.so"))
                            for d in dirs),
                        "no -L of pkg-config --libs holds libperfgraft.so: %r" % libs)
        # static linking must find the private dependencies too
        self.pkgconfig("--libs", "--static")

    def libdirs(self):
        return [f[2:] for f in self.pkgconfig("--libs") if f.startswith("-L")]

    def sanitizer_flags(self):
        libs = [os.path.join(d, f) for d, _, fs in os.walk(self.dest)
                for f in fs if re.fullmatch(r"libperfgraft\.so\.\d+\.\d+\.\d+", f)]
        self.assertEqual(len(libs), 1, libs)
        rc, out, err = run(["readelf", "-d", libs[0]])
        self.assertEqual(rc, 0, err)
        san = [n for n in ("address", "undefined")
               if re.search(r"NEEDED.*\[lib%ssan\.so" % ("a" if n == "address" else "ub"), out)]
        return ["-fsanitize=" + ",".join(san)] if san else []

    def test_example_against_installed_library(self):
        with tempfile.TemporaryDirectory(prefix="pg-api-cc-") as tmp:
            exe = os.path.join(tmp, "example")
            # a sanitizer build's library needs its runtime loaded first:
            # the program is then built with the same sanitizers
            cmd = (["cc", "-std=c11", "-Wall", "-Wextra", "-Werror"]
                   + self.sanitizer_flags() + ["-o", exe, EXAMPLE_SRC]
                   + self.pkgconfig("--cflags", "--libs"))
            rc, out, err = run(cmd, env=self.env)
            self.assertEqual(rc, 0, "%s: exit %d\n%s" % (shell(cmd), rc, err))
            env = with_env({"LD_LIBRARY_PATH": ":".join(self.libdirs())})
            # it loads the installed library, not the build dir's
            rc, out, err = run(["ldd", exe], env=env)
            if rc == 0:
                m = re.search(r"libperfgraft\.so\S*\s+=>\s+(\S+)", out)
                self.assertTrue(m, out)
                self.assertTrue(os.path.realpath(m.group(1)).startswith(
                    os.path.realpath(self.dest)), out)
            if not os.access(EXAMPLE, os.X_OK):
                self.skipTest("%s is not built: nothing to compare with" % EXAMPLE)
            loads = DumpFacts.get().loads
            a = sorted(loads)
            args = ["0x%x" % a[0], "0x%x" % (a[len(a) // 2] + 1),
                    "0x%x" % (a[-1] + 0x10), "0x10", "0x%x@1" % a[0]]
            rc1, out1, err1 = run([exe, DUMP] + args, env=env)
            rc2, out2, err2 = run([EXAMPLE, DUMP] + args)
            self.assertEqual((rc1, out1), (rc2, out2),
                             "installed: %s\nbuild dir: %s" % (err1, err2))
            self.assertEqual(rc1, 0, err1)
            self.assertEqual(len(out1.splitlines()), len(args), out1)

    def test_headers_stand_alone(self):
        headers = sorted(h for h in os.listdir(HEADERS) if h.endswith(".h"))
        self.assertIn("common.h", headers)
        cflags = self.pkgconfig("--cflags")
        with tempfile.TemporaryDirectory(prefix="pg-api-h-") as tmp:
            bad = []
            for h in headers:
                inst = [os.path.join(f[2:], "perfgraft", h) for f in cflags
                        if f.startswith("-I")]
                if not any(os.path.isfile(p) for p in inst):
                    bad.append("%s: not installed (looked in %s)" % (h, inst))
                    continue
                with open(os.path.join(HEADERS, h), encoding="utf-8") as f:
                    funcs = public_functions(f.read())
                base = os.path.join(tmp, h[:-2])
                with open(base + ".c", "w") as f:
                    f.write("#include <perfgraft/%s>\n" % h)
                with open(base + ".cc", "w") as f:
                    f.write("#include <perfgraft/%s>\n" % h)
                    # references make the compiler emit their symbols:
                    # mangled ones mean a missing extern "C"
                    f.write("typedef void (*fn)(void);\n"
                            "extern const fn refs[];\nconst fn refs[] = {\n")
                    for fn in funcs:
                        f.write("\treinterpret_cast<fn>(&%s),\n" % fn)
                    f.write("\t0 };\n")
                for cmd in (["cc", "-std=c11", "-Wall", "-Wextra", "-Werror",
                             "-fsyntax-only", base + ".c"] + cflags,
                            ["cc", "-std=c11", "-pedantic", "-Wall", "-Wextra",
                             "-Werror", "-fsyntax-only", base + ".c"] + cflags,
                            ["c++", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                             base + ".cc"] + cflags,
                            ["c++", "-c", "-o", base + ".o", base + ".cc"] + cflags):
                    rc, out, err = run(cmd, env=self.env)
                    if rc != 0:
                        bad.append("%s: %s: exit %d\n%s" % (h, shell(cmd), rc, err))
                        break
                else:
                    rc, out, err = run(["nm", "-u", base + ".o"])
                    undef = set(out.split()) - {"U"}
                    mangled = [s for s in undef if s.startswith("_Z")]
                    missing = [fn for fn in funcs if fn not in undef]
                    if mangled or missing:
                        bad.append("%s: C++ sees mangled %s, misses %s"
                                   % (h, mangled, missing))
            self.assertFalse(bad, "\n".join(bad))

    def test_exports_are_the_public_api(self):
        """The installed libperfgraft.so exports exactly the functions the
        headers declare: the modules' shared helpers (pg_err, pg_buf_*,
        ...) stay inside (src/libperfgraft.map), and every one is
        versioned: PERFGRAFT_1.0, or the node that added it."""
        libs = [os.path.join(d, f) for d, _, fs in os.walk(self.dest)
                for f in fs if re.fullmatch(r"libperfgraft\.so\.\d+\.\d+\.\d+", f)]
        self.assertEqual(len(libs), 1, libs)
        rc, out, err = run(["nm", "-D", "--defined-only", libs[0]])
        self.assertEqual(rc, 0, err)
        versioned = {ln.split()[-1] for ln in out.splitlines()
                     if len(ln.split()) == 3 and ln.split()[1] in "TWDBRVi"}
        versioned = {e for e in versioned if not e.startswith("_")}
        # every public function carries a version node, as the default
        # version (@@): 1.0, or the node of those added later
        added = {"pg_code_since": "1.1", "pg_elfset_add_since": "1.1",
                 "pg_elfset_map_loaded": "1.1",
                 "pg_perfdata_own_tid": "1.2", "pg_perfdata_version": "1.2",
                 "pg_elfset_wait": "1.3", "pg_pdw_build_ids_later": "1.3"}
        want = {e.split("@")[0]: "PERFGRAFT_" + added.get(e.split("@")[0], "1.0")
                for e in versioned}
        self.assertEqual(sorted(e for e in versioned
                                if not e.endswith("@@" + want[e.split("@")[0]])), [],
                         "exported without its version node")
        exported = {e.split("@")[0] for e in versioned}
        declared = set()
        for h in os.listdir(HEADERS):
            if h.endswith(".h"):
                with open(os.path.join(HEADERS, h), encoding="utf-8") as f:
                    declared |= set(public_functions(f.read()))
        self.assertEqual(sorted(exported - declared), [],
                         "exported but not in a public header")
        self.assertEqual(sorted(declared - exported), [],
                         "declared in a header but not exported")


if __name__ == "__main__":
    unittest.main()
