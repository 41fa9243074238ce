#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Real JIT engines recorded with perf, injected by perfgraft and by
`perf inject --jit`, and read back with `perf script -F srcline`.

Each engine's oracle is independent of perfgraft's code: for Erlang
(BeamAsm, `erl +JPperf dump`), the line ranges of the hot functions read
from tests/engines/work.erl itself; for LLVM (lli-14 -jit-kind=mcjit,
whose PerfJITEventListener adds 0x40 to every line address), llc-14's
native line table for the same bitcode, compiled as MCJIT compiles it
(-O2, the large code model, static relocations: the same bytes); for
node with a script at a path shorter than 16 bytes (node overwrites the
first 16 bytes of the name it writes: all of it), the functions' line
ranges in tests/fixtures/perf/work.js; for Deno (V8, which names its
scripts file:///path), those of tests/engines/work.js; for Bun
(JavaScriptCore, names only), PHP's opcache JIT and PostgreSQL's LLVM JIT
(names only), that the JIT samples are named, and the hot functions.  Asserted per engine: at least 99% of
the samples in JIT code are named, at least 95% of the samples in the
workload's functions that carry a source line carry one of that
function's lines, and never fewer right lines than perf inject --jit's.

BeamAsm writes its dump as /tmp/jit-PID.dump, and perf inject writes its
/tmp/jitted-PID-N.so beside it: both are removed when the test ends.
perf runs with its own --buildid-dir; a test skips, with its reason, when
its engine or a working `perf record` is missing."""

import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import jitdump_oracle  # noqa: E402
import perf_fixture as PF  # noqa: E402

ENGINES = os.path.join(HERE, "engines")


def perf_record_problem():
    if shutil.which(PF.PERF) is None:
        return "perf (%s) not found" % PF.PERF
    with tempfile.TemporaryDirectory(prefix="perfgraft-perfcheck.") as d:
        cmd = PF.perf_cmd(os.path.join(d, "debug"), "record", "-N", "-q", "-e", "cpu-clock",
                          "-o", os.path.join(d, "p.data"), "--", "true")
        try:
            rc, _, err, _ = PF.run(cmd, cwd=d, check=False, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return "`%s`: %s" % (PF.shell(cmd), e)
        if rc or not os.path.isfile(os.path.join(d, "p.data")):
            return "`%s` does not work here: %s" % (PF.shell(cmd), err.strip()[-200:])
    return None


def function_lines(source, pattern=r"^([a-z_][A-Za-z0-9_]*)\("):
    """{name: set of lines} of each function of an Erlang source: from its
    first clause to the line before the next function's (blank and comment
    lines included; a sample never lands on them anyway)."""
    starts = []
    with open(source) as f:
        for no, ln in enumerate(f, 1):
            m = re.match(pattern, ln)
            if m and (not starts or starts[-1][1] != m.group(1)):
                starts.append((no, m.group(1)))
    total = no
    out = {}
    for i, (no, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else total + 1
        out.setdefault(name, set()).update(range(no, end))
    return out


class Engine:
    """What every engine test shares: the engine found (find_engine: a
    skip with its reason when it is missing) and a working perf record, a
    recording directory, both injections and their `perf script` samples."""

    @classmethod
    def setUpClass(cls):
        cls.find_engine()
        why = perf_record_problem()
        if why:
            raise unittest.SkipTest(why)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="perfgraft-engine.")
        self.dir = self.tmp.name
        self.debug = os.path.join(self.dir, "debug")
        os.makedirs(self.debug)
        self.addCleanup(self.tmp.cleanup)

    def workload(self, name):
        """tests/engines/NAME copied into the recording directory."""
        return shutil.copy(os.path.join(ENGINES, name), os.path.join(self.dir, name))

    def perf(self, *args, **kw):
        return PF.run(PF.perf_cmd(self.debug, *args), cwd=self.dir, **kw)

    def record_tmp_dumps(self, *cmd, env=None):
        """perf record CMD for an engine that writes its dump into /tmp:
        the dumps the recording names (and perf inject's jitted-PID-N.so
        beside them, and the engine's own /tmp/perf-PID.map) are removed
        when the test ends, nothing else of /tmp.  Returns their paths."""
        start = time.time()
        try:
            PF.run(PF.perf_cmd(self.debug, "record", "-N", "-q", "-k", "mono", "-e", "cpu-clock",
                               "-o", "perf.data", "--", *cmd), cwd=self.dir, env=env)
        finally:
            dumps = []
            if os.path.exists(os.path.join(self.dir, "perf.data")):
                _, out, _, _ = self.perf("script", "-i", "perf.data", "--show-mmap-events",
                                         "-F", "pid", check=False)
                dumps = sorted(set(re.findall(r"(/tmp/jit-[0-9-]+(?:\.dump|[A-Za-z0-9]{6}))\b",
                                              out)))
            for d in dumps:
                # PHP also writes /tmp/perf-PID.map of the same process
                for pid in re.findall(r"\d+", os.path.basename(d)):
                    pm = "/tmp/perf-%s.map" % pid
                    if os.path.exists(pm) and os.path.getmtime(pm) >= start - 1:
                        self.addCleanup(os.unlink, pm)
                m = re.fullmatch(r"/tmp/jit-(\d+)\.dump", d)
                if m:
                    self.addCleanup(lambda pid=m.group(1): [
                        os.unlink(f) for f in glob.glob("/tmp/jitted-%s-*.so" % pid)])
                if os.path.exists(d):
                    self.addCleanup(os.unlink, d)
        return [d for d in dumps if os.path.exists(d)]

    def samples(self, data, dsos=None):
        args = ["script", "-i", data, "-F", "ip,sym,srcline"]
        if dsos is not None:
            if not dsos:
                return []
            args += ["--dsos", ",".join(sorted(dsos))]
        _, out, _, _ = self.perf(*args)
        return PF.parse_script_srclines(out)

    def inject_both(self, images_only=False, ref_glob=None):
        """Both injections' samples; images_only: only those in the JIT
        images (perf's addr2line over a 100 MB runtime takes minutes)."""
        PF.run([PF.PERFGRAFT, "inject", "-q", "-i", "perf.data", "-o", "pg.data"], cwd=self.dir)
        self.perf("inject", "--jit", "-i", "perf.data", "-o", "ref.data")
        if not images_only:
            return self.samples("pg.data"), self.samples("ref.data")
        ours = os.listdir(os.path.join(self.dir, "pg.data.d"))
        perfs = [os.path.basename(f) for f in
                 glob.glob(ref_glob or os.path.join(self.dir, "jitted-*.so"))]
        # perf's one file per function may be too many names for one
        # command line: then all of its samples
        return (self.samples("pg.data", ours),
                self.samples("ref.data", perfs if len(perfs) <= 500 else None))

    def annotate_lines(self, data, sym):
        """perf annotate -l's summary of sym: [(percent, file, line)], the
        "??:0" share with file None."""
        _, out, _, _ = self.perf("annotate", "-i", data, "--stdio", "--stdio-color", "never",
                                 "-l", "-s", sym, check=False)
        rows = []
        for ln in out.splitlines():
            if ln.lstrip().startswith("Percent"):
                break
            m = re.match(r"^\s*(\d+\.\d+)\s+(.*):(\d+)\s*$", ln)
            if m:
                f = None if m.group(2) == "??" else os.path.basename(m.group(2))
                rows.append((float(m.group(1)), f, int(m.group(3))))
        return rows

    @staticmethod
    def count_lines(samples, sym_re, file_name, ranges, hot):
        """(right, with a line, in the functions) of samples whose symbol
        matches sym_re (group 1: the function, a key of ranges); a line is
        right when it is file_name:N with N in that function's ranges.
        hot counts the samples by (symbol, function)."""
        hits = with_line = total = 0
        for _ip, sym, src in samples:
            m = re.match(sym_re, sym or "")
            if not m or m.group(1) not in ranges:
                continue
            total += 1
            hot[(sym, m.group(1))] += 1
            if not src or src.startswith("??"):
                continue
            with_line += 1
            f = re.fullmatch(r"(.*):(\d+)", src)
            hits += bool(f and f.group(1) == file_name and int(f.group(2)) in ranges[m.group(1)])
        return hits, with_line, total

    def check_annotate(self, sym, file_name, lines, ref=True):
        """In perf annotate of sym on perfgraft's output, at least 95% of
        the share with a source line is on one of lines in file_name, and
        that share is no smaller than on perf inject --jit's output."""
        def right(data):
            rows = self.annotate_lines(data, sym)
            known = sum(p for p, f, _ in rows if f)
            good = sum(p for p, f, ln in rows if f == file_name and ln in lines)
            return rows, known, good
        rows, known, good = right("pg.data")
        self.assertGreater(known, 0, "perf annotate -l of %r: no source lines: %r" % (sym, rows))
        self.assertGreaterEqual(good, 0.95 * known, "perf annotate -l of %r: %r" % (sym, rows))
        if ref:
            _, _, ref_good = right("ref.data")
            self.assertGreaterEqual(good + 0.01, ref_good)
        return good

    def check(self, pg, ref, ranges, funcs, file_name):
        """funcs: {symbol: set of right lines}."""
        jit = [s for s in pg if s[0] in ranges]
        self.assertGreater(len(jit), 50, "too few JIT samples to judge")
        named = [s for s in jit if s[1] and s[1] != "[unknown]" and not s[1].startswith("0x")]
        self.assertGreaterEqual(len(named), 0.99 * len(jit),
                                "JIT samples named: %d of %d" % (len(named), len(jit)))

        def right(samples):
            hits = with_line = 0
            for _ip, sym, src in samples:
                if sym not in funcs or not src or src.startswith("??"):
                    continue
                with_line += 1
                m = re.fullmatch(r"(.*):(\d+)", src)
                hits += bool(m and os.path.basename(m.group(1)) == file_name and
                             int(m.group(2)) in funcs[sym])
            return hits, with_line

        hits, with_line = right(pg)
        ref_hits, _ = right(ref)
        in_funcs = sum(1 for s in pg if s[1] in funcs)
        self.assertGreater(in_funcs, 20, "too few samples in %s" % sorted(funcs))
        self.assertGreaterEqual(with_line, 0.95 * in_funcs,
                                "samples of the workload with a line: %d of %d"
                                % (with_line, in_funcs))
        self.assertGreaterEqual(hits, 0.95 * with_line,
                                "right lines: %d of %d" % (hits, with_line))
        self.assertGreaterEqual(hits, ref_hits, "perf inject --jit has more right lines")
        return hits, with_line, ref_hits


class Erlang(Engine, unittest.TestCase):
    """BeamAsm puts each function's first DEBUG_INFO row on the label just
    before its code: that row applies from the code's start."""

    @classmethod
    def find_engine(cls):
        for tool in ("erl", "erlc"):
            if shutil.which(tool) is None:
                raise unittest.SkipTest("%s not found (Debian: apt-get install erlang-base)"
                                        % tool)

    def record(self):
        src = os.path.join(ENGINES, "work.erl")
        PF.run(["erlc", "-o", self.dir, src], cwd=self.dir)
        new = self.record_tmp_dumps("erl", "+JPperf", "dump", "-noshell", "-pa", self.dir,
                                    "-s", "work", "main")
        self.assertEqual(len(new), 1, "erl wrote %d jitdumps: %s" % (len(new), new))
        return new[0], src

    def test_lines(self):
        dump, src = self.record()
        pg, ref = self.inject_both(images_only=True, ref_glob="/tmp/jitted-%s-*.so"
                                   % re.search(r"jit-(\d+)", dump).group(1))
        loads = jitdump_oracle.parse(dump).loads
        ranges = PF.CodeRanges(loads)
        fl = function_lines(src)
        funcs = {}
        for ld in loads:
            m = re.fullmatch(r"work:(\w+)/\d+", ld.name.decode("utf-8", "replace"))
            if m and m.group(1) in fl:
                funcs[m.group(0)] = fl[m.group(1)]
        self.assertIn("work:fib/1", funcs)
        hits, with_line, ref_hits = self.check(pg, ref, ranges, funcs, "work.erl")
        good = self.check_annotate("work:fib/1", "work.erl", funcs["work:fib/1"])
        print("\nerlang: %d of %d samples with a line right (perf inject --jit: %d); "
              "annotate: %.1f%% on fib's lines" % (hits, with_line, ref_hits, good),
              file=sys.stderr)


class LLVM(Engine, unittest.TestCase):
    """lli's PerfJITEventListener biases every line address by 0x40."""

    @classmethod
    def find_engine(cls):
        for tool in ("clang-14", "lli-14", "llc-14", "llvm-dwarfdump-14", "nm"):
            if shutil.which(tool) is None:
                raise unittest.SkipTest("%s not found (Debian: apt-get install clang-14 llvm-14)"
                                        % tool)

    def oracle(self, bc):
        """{function: [(offset, line)]} from llc-14's object for bc."""
        obj = os.path.join(self.dir, "work.o")
        PF.run(["llc-14", "-O2", "-code-model=large", "-relocation-model=static",
                "-filetype=obj", "-o", obj, bc])
        _, out, _, _ = PF.run(["nm", obj])
        funcs = {f[2]: int(f[0], 16) for f in (l.split() for l in out.splitlines())
                 if len(f) == 3 and f[1] == "T"}
        _, out, _, _ = PF.run(["llvm-dwarfdump-14", "--debug-line", obj])
        rows = []
        for l in out.splitlines():
            m = re.match(r"^0x([0-9a-f]{16})\s+(\d+)\s", l)
            if m and "end_sequence" not in l:
                rows.append((int(m.group(1), 16), int(m.group(2))))
        starts = sorted(funcs.values())
        table = {}
        for name, start in funcs.items():
            end = min([s for s in starts if s > start] + [1 << 62])
            table[name] = [(a - start, ln) for a, ln in rows if start <= a < end]
        return table

    def test_lines(self):
        bc = os.path.join(self.dir, "work.bc")
        PF.run(["clang-14", "-g", "-O1", "-emit-llvm", "-c", "-o", bc,
                os.path.join(ENGINES, "work.c")])
        env = dict(os.environ, JITDUMPDIR=self.dir)
        PF.run(PF.perf_cmd(self.debug, "record", "-N", "-q", "-k", "mono", "-e", "cpu-clock",
                           "-o", "perf.data", "--", "lli-14", "-jit-kind=mcjit", bc),
               cwd=self.dir, env=env)
        dumps = glob.glob(os.path.join(self.dir, ".debug", "jit", "llvm-IR-jit-*", "jit-*.dump"))
        self.assertEqual(len(dumps), 1, "lli wrote %d jitdumps" % len(dumps))
        table = self.oracle(bc)
        PF.run([PF.PERFGRAFT, "inject", "-q", "-i", "perf.data", "-o", "pg.data"], cwd=self.dir)
        self.perf("inject", "--jit", "-i", "perf.data", "-o", "ref.data")

        # perf's srcline over the JIT images only (not over libLLVM)
        dsos = {"pg.data": os.listdir(os.path.join(self.dir, "pg.data.d")),
                "ref.data": [os.path.basename(f) for f in glob.glob(os.path.join(
                    self.dir, ".debug", "jit", "llvm-IR-jit-*", "jitted-*.so"))]}

        def right(data):
            if not dsos[data]:
                return 0, 0, 0
            _, out, _, _ = self.perf("script", "-i", data, "-F", "ip,sym,symoff,srcline",
                                     "--dsos", ",".join(sorted(dsos[data])))
            hits = with_line = total = 0
            for ip, symoff, src in PF.parse_script_srclines(out):
                m = re.fullmatch(r"(\w+)\+0x([0-9a-f]+)", symoff or "")
                if not m or m.group(1) not in table:
                    continue
                total += 1
                want = [ln for off, ln in table[m.group(1)] if off <= int(m.group(2), 16)]
                if not src or src.startswith("??") or not want:
                    continue
                with_line += 1
                hits += src == "work.c:%d" % want[-1]
            return hits, with_line, total

        hits, with_line, total = right("pg.data")
        ref_hits, ref_with, _ = right("ref.data")
        self.assertGreater(total, 50, "too few samples in the JIT functions")
        self.assertGreaterEqual(with_line, 0.95 * total,
                                "samples with a line: %d of %d" % (with_line, total))
        self.assertGreaterEqual(hits, 0.95 * with_line,
                                "llc's line: %d of %d" % (hits, with_line))
        self.assertGreaterEqual(hits, ref_hits)
        good = self.check_annotate("mix", "work.c", {ln for _off, ln in table["mix"]})
        print("\nllvm: %d of %d samples with llc's line (perf inject --jit: %d of %d); "
              "annotate: %.1f%% on mix's lines" % (hits, with_line, ref_hits, ref_with, good),
              file=sys.stderr)


class NodeShortPath(Engine, unittest.TestCase):
    """node damages every byte of a script name shorter than 16 bytes:
    the name comes back from the function's own, and no control byte
    reaches a symbol or a srcline."""

    @classmethod
    def find_engine(cls):
        if shutil.which(PF.NODE) is None:
            raise unittest.SkipTest("node not found")

    def test_lines(self):
        import random
        while True:     # /tmp/pXXXX/w.js: 15 bytes, under node's 16
            short = "/tmp/p%04x" % random.getrandbits(16)
            try:
                os.mkdir(short)
                break
            except FileExistsError:
                continue
        self.addCleanup(shutil.rmtree, short)
        script = os.path.join(short, "w.js")
        self.assertLess(len(script), 16)
        shutil.copy(PF.WORK_JS, script)
        PF.run(PF.perf_cmd(self.debug, "record", "-N", "-q", "-k", "mono", "-e", "cpu-clock",
                           "-o", os.path.join(self.dir, "perf.data"), "--", PF.NODE,
                           *PF.NODE_FLAGS, script, "1000"), cwd=short)
        for n in os.listdir(short):     # the dump goes with the recording
            if n != "w.js":
                shutil.move(os.path.join(short, n), self.dir)
        PF.run([PF.PERFGRAFT, "inject", "-q", "-i", "perf.data", "-o", "pg.data",
                "--jitdump-dir", self.dir], cwd=self.dir)
        # srclines of the images only: perf's addr2line over node itself
        # takes a minute
        images = ",".join(sorted(os.listdir(os.path.join(self.dir, "pg.data.d"))))
        _, out, _, _ = self.perf("script", "-i", "pg.data", "-F", "ip,sym,srcline",
                                 "--dsos", images)
        self.assertFalse(re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out),
                         "a control byte in perf script's symbols or srclines")
        ranges = function_lines(PF.WORK_JS, r"^function (\w+)\(")
        hot = collections.Counter()
        hits, with_line, total = self.count_lines(
            PF.parse_script_srclines(out), r"JS:[*~^+]?(\w+) " + re.escape(script) + ":",
            "w.js", {f: ranges[f] for f in ("fib", "mix", "sieve")}, hot)
        self.assertGreater(total, 20, "too few samples in fib, mix and sieve")
        self.assertGreaterEqual(with_line, 0.95 * total, "with a line: %d of %d"
                                % (with_line, total))
        self.assertGreaterEqual(hits, 0.95 * with_line, "in the function: %d of %d"
                                % (hits, with_line))
        (sym, func), _n = hot.most_common(1)[0]
        good = self.check_annotate(sym, "w.js", ranges[func], ref=False)
        print("\nnode, short path: %d of %d samples with the function's line; "
              "annotate: %.1f%% on %s's lines" % (hits, with_line, good, func), file=sys.stderr)


def js_engine(name, env_var, hint):
    path = os.environ.get(env_var) or shutil.which(name)
    if not path:
        raise unittest.SkipTest("%s not found (%s; or set %s)" % (name, hint, env_var))
    return path


class Deno(Engine, unittest.TestCase):
    """V8 under Deno names its scripts file:///path/app.js, which perf
    splits at the first ':' (srcline file:0): the images name the path."""

    @classmethod
    def find_engine(cls):
        cls.deno = js_engine("deno", "DENO", ".ci/deps installs it")

    def test_lines(self):
        script = self.workload("work.js")
        self.perf("record", "-N", "-q", "-k", "mono", "-e", "cpu-clock", "-o", "perf.data",
                  "--", self.deno, "run", "--v8-flags=--perf-prof,--perf-prof-unwinding-info",
                  script, "1000")
        pg, ref = self.inject_both(images_only=True)
        fl = function_lines(script, r"^function (\w+)\(")

        hot = collections.Counter()

        def right(samples):
            return self.count_lines(samples, r"JS:\S*?(fib|mix) file://" + re.escape(script) + ":",
                                    "work.js", {f: fl[f] for f in ("fib", "mix")}, hot)

        hits, with_line, total = right(pg)
        ref_hits, _, _ = right(ref)
        # V8's rows start after a function's prologue: the samples there
        # have no line, in perf's images too
        self.assertGreater(total, 50, "too few samples in fib and mix")
        self.assertGreaterEqual(with_line, 0.5 * total, "with a line: %d of %d"
                                % (with_line, total))
        self.assertGreaterEqual(hits, 0.95 * with_line, "right lines: %d of %d" % (hits, with_line))
        self.assertGreaterEqual(hits, ref_hits)
        (sym, func), _n = hot.most_common(1)[0]
        good = self.check_annotate(sym, "work.js", fl[func])
        print("\ndeno: %d of %d samples with their function's line (perf inject --jit: %d); "
              "annotate: %.1f%% on %s's lines" % (hits, with_line, ref_hits, good, func),
              file=sys.stderr)


class Bun(Engine, unittest.TestCase):
    """JavaScriptCore under Bun (BUN_JSC_useJITDump=1) writes its dump as a
    mkostemp file /tmp/jit-TID-PID-XXXXXX, which perf inject --jit does
    not take for a dump: perfgraft finds it by its header.  Names only
    (JSC writes no line tables)."""

    @classmethod
    def find_engine(cls):
        cls.bun = js_engine("bun", "BUN", ".ci/deps installs it")

    def test_names(self):
        script = self.workload("work.js")
        dumps = self.record_tmp_dumps(self.bun, script, "1000",
                                      env=dict(os.environ, BUN_JSC_useJITDump="1"))
        self.assertTrue(dumps, "bun wrote no jitdump the recording names")
        pg, ref = self.inject_both(images_only=True)
        hot = [s for s in pg if s[1] and re.search(r"\b(fib|mix)#", s[1])]
        self.assertGreater(len(hot), 50, "too few samples named fib or mix")
        ref_hot = [s for s in ref if s[1] and re.search(r"\b(fib|mix)#", s[1])]
        self.assertGreater(len(hot), len(ref_hot))
        print("\nbun: %d samples named fib or mix (perf inject --jit: %d)"
              % (len(hot), len(ref_hot)), file=sys.stderr)


class NamesOnly(Engine):
    """What a names-only engine's test shares: at least 99% of the samples
    in the JIT images named, and no fewer than perf inject --jit names."""

    def check_names(self, label, pattern, ref_glob=None):
        pg, ref = self.inject_both(images_only=True, ref_glob=ref_glob)
        named = [s for s in pg if s[1] and s[1] != "[unknown]"]
        self.assertGreater(len(pg), 20, "too few samples in the JIT images")
        self.assertGreaterEqual(len(named), 0.99 * len(pg),
                                "named: %d of %d" % (len(named), len(pg)))
        hot = [s for s in named if re.search(pattern, s[1])]
        ref_hot = [s for s in ref if s[1] and re.search(pattern, s[1])]
        self.assertGreater(len(hot), 20, "too few samples named like %r" % pattern)
        self.assertGreaterEqual(len(hot), len(ref_hot))
        print("\n%s: %d of %d JIT samples named, %d like %r (perf inject --jit: %d)"
              % (label, len(named), len(pg), len(hot), pattern, len(ref_hot)), file=sys.stderr)


class PHP(NamesOnly, unittest.TestCase):
    """PHP 8.2's opcache JIT with opcache.jit_debug=0x20 writes
    /tmp/jit-PID.dump (names only: PHP writes no line tables)."""

    @classmethod
    def find_engine(cls):
        cls.php = os.environ.get("PHP") or shutil.which("php")
        if not cls.php:
            raise unittest.SkipTest("php not found (Debian: apt-get install php8.2-cli "
                                    "php8.2-opcache)")

    def test_names(self):
        script = self.workload("work.php")
        dumps = self.record_tmp_dumps(
            self.php, "-d", "opcache.enable_cli=1", "-d", "opcache.jit=tracing",
            "-d", "opcache.jit_buffer_size=64M", "-d", "opcache.jit_debug=0x20",
            "-d", "opcache.file_update_protection=0", script)
        self.assertEqual(len(dumps), 1, "php wrote %d jitdumps: %s" % (len(dumps), dumps))
        self.check_names("php", r"\$fib\$", ref_glob="/tmp/jitted-%s-*.so"
                         % re.search(r"jit-(\d+)", dumps[0]).group(1))


PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")


class PostgreSQL(NamesOnly, unittest.TestCase):
    """PostgreSQL 15's LLVM JIT with jit_profiling_support: a private
    server in the test's directory (as user postgres when run as root),
    its backends' dumps under JITDUMPDIR/.debug/jit/llvm-IR-jit-*."""

    @classmethod
    def find_engine(cls):
        for tool in ("initdb", "postgres", "pg_ctl"):
            if not os.access(os.path.join(PG_BIN, tool), os.X_OK):
                raise unittest.SkipTest("%s/%s not found (Debian: apt-get install "
                                        "postgresql-15; or set PG_BIN)" % (PG_BIN, tool))
        if shutil.which("psql") is None:
            raise unittest.SkipTest("psql not found")
        cls.as_user = []
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                raise unittest.SkipTest("running as root and no runuser to start postgres")
            cls.as_user = ["runuser", "-u", "postgres", "--"]

    def test_names(self):
        import pwd
        import signal
        os.chmod(self.dir, 0o755)
        data, jd, sock = (os.path.join(self.dir, n) for n in ("data", "jd", "sock"))
        for d in (jd, sock):
            os.mkdir(d)
        if self.as_user:
            pw = pwd.getpwnam("postgres")
            for d in (jd, sock):
                os.chown(d, pw.pw_uid, pw.pw_gid)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        PF.run(self.as_user + [os.path.join(PG_BIN, "initdb"), "-D", data, "-A", "trust"],
               cwd=self.dir)
        # its own session: whatever happens, perf and the server are
        # stopped before the directory goes
        server = subprocess.Popen(
            PF.perf_cmd(self.debug, "record", "-N", "-q", "-k", "mono", "-e", "cpu-clock",
                        "-o", os.path.join(self.dir, "perf.data"), "--") +
            self.as_user + ["env", "JITDUMPDIR=" + jd, os.path.join(PG_BIN, "postgres"),
                            "-D", data, "-k", sock, "-c", "listen_addresses=",
                            "-c", "jit=on", "-c", "jit_above_cost=0",
                            "-c", "jit_inline_above_cost=0", "-c", "jit_optimize_above_cost=0",
                            "-c", "jit_profiling_support=on"],
            cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

        def stop():
            PF.run(self.as_user + [os.path.join(PG_BIN, "pg_ctl"), "-D", data, "stop",
                                   "-m", "fast", "-t", "60"], check=False, timeout=90)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        try:
            psql = ["psql", "-h", sock, "-U", "postgres", "-d", "postgres", "-Atc"]
            deadline = time.monotonic() + 60
            while PF.run(psql + ["SELECT 1"], check=False)[0] != 0:
                self.assertIsNone(server.poll(), "postgres under perf record exited")
                self.assertLess(time.monotonic(), deadline, "postgres not ready in 60 s")
                time.sleep(0.2)
            for _ in range(3):
                PF.run(psql + ["SELECT sum(x * 2 + 1) FROM generate_series(1, 3000000) x "
                               "WHERE x % 3 <> 1"])
        finally:
            stop()
        dumps = glob.glob(os.path.join(jd, ".debug", "jit", "llvm-IR-jit-*", "jit-*.dump"))
        self.assertTrue(dumps, "the server wrote no jitdump")
        # perf inject --jit writes its images beside each dump
        self.check_names("postgresql", r"^(evalexpr|deform)_",
                         ref_glob=os.path.join(jd, ".debug", "jit", "*", "jitted-*.so"))


if __name__ == "__main__":
    unittest.main()
