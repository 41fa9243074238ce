#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/libdw_unwind.c: perf's libdw unwinder (perf >= 6.13,
util/unwind-libdw.c) reproduced here, where perf 6.1 unwinds with
libunwind; and what it makes of perfgraft's image layouts.

  1  Native: a C program with a deep call chain, built with
     -fno-omit-frame-pointer and with -fomit-frame-pointer, recorded with
     `perf record --call-graph dwarf`: the tool's user chain of every
     sample equals `perf script -F ip` (libunwind), ip for ip.
  2  node (--perf-prof --perf-prof-unwinding-info
     --interpreted-frames-native-stack, `perf record -k mono --call-graph
     dwarf`), run in /tmp so that its dump is /tmp/jit-PID.dump and
     `perf inject --jit` writes /tmp/jitted-PID-N.so, the names perf's
     libdw unwinder takes for perf inject's own images; the samples whose
     perf 6.1 chain goes through JIT code:
       - `perf inject --jit`: perf's own per-function images, the
         reference; hardly any chain breaks on them;
       - `perfgraft inject` (the memory layout, the default): the tool's
         chains are those of perf inject --jit's images, sample by sample
         and ip for ip; no chain breaks on a JIT image, the chains are
         perf 6.1's wherever node's text or [vdso] does not stop them, and
         perf 6.1's own chains (libunwind) on it are perf inject --jit's;
       - `perfgraft inject --per-function`: the tool's chains equal perf
         6.1's on the same file for most samples, and hardly any breaks
         on a JIT image;
       - `perfgraft inject --layout packed`: most chains break on a JIT
         image (frames of one packed image with different biases: the
         module reported for one is not dwfl_addrmodule's for the other):
         the negative control.
     The figures are printed (info:) for the report.

Samples whose chain stops at node's own text remapped at run time
(/usr/bin/node is ET_EXEC, for which libdwfl ignores the base perf
gives, so dwfl_addrmodule never returns it there) or at [vdso] (perf
would look for it in its build-id cache, which the tool does not) break
under perf's libdw path whatever the JIT layout; they are counted apart.

Why perf needs the /tmp/jitted- rule for its own images: their PT_LOAD
is at p_vaddr 0x80 (p_align 8), and dwfl_report_elf(base) puts the
module's start at base and its bias at base - 0x80.  With perf's usual
base = start - pgoff = code - 0x80, the module spans [code - 0x80,
code - 0x80 + size), 0x80 bytes too low: it overlaps the function
before and misses the last 0x80 bytes of its own (checked with
dwfl_module_info).  With base = map start it spans the code exactly.
Under any other name, as when node runs elsewhere than /tmp, 67% of
the JIT chains broke on perf inject's images ("address range overlaps
an existing module"): that is perf's limitation, not this tool's.
perfgraft's images never take that rule (never named /tmp/jitted-*),
and need none: their PT_LOAD starts below the first page, so bias ==
base.  Seen here (node 20, perf 6.1, elfutils 0.188): per-function, the
few chains that break do so where two functions lie less than their
image's code offset (0x140) apart: that image's PT_LOAD starts at file
offset 0, so libdwfl's module spans [start - 0x140, ...).

perf always runs with --buildid-dir in the temporary directory (-N when
recording); everything lives in a tempfile directory removed afterwards
(PERFGRAFT_KEEP_TMP=1 keeps it).  Skipped without a working perf record
(or node, for 2).  The node run's files in /tmp (the dump, node's
v8 log, perf inject's images) are removed by pid afterwards.
"""

import glob
import os
import re
import shutil
import struct
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import perf_fixture as pf  # noqa: E402
import perfdata_gen as pdg  # noqa: E402

TOOL = os.path.join(os.path.dirname(os.path.abspath(pf.PERFGRAFT)), "tests",
                    "libdw_unwind")
KEEP_TMP = os.environ.get("PERFGRAFT_KEEP_TMP") == "1"
KERNEL = 0xffff800000000000

DEEP_C = r"""
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void leaf(unsigned long n)
{ for (unsigned long i = 0; i < n; i++) sink += i * i; }
#define F(a, b) __attribute__((noinline)) void a(unsigned long n) { b(n); sink++; }
F(f1, leaf) F(f2, f1) F(f3, f2) F(f4, f3) F(f5, f4) F(f6, f5) F(f7, f6)
F(f8, f7) F(f9, f8) F(f10, f9)
int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 1000;
	for (unsigned long k = 0; k < n; k++) {
		if (k % 3 == 0) f10(100000);
		else if (k % 3 == 1) f5(100000);
		else leaf(100000);
	}
	return 0;
}
"""


def info(msg):
    sys.stderr.write("info: %s\n" % msg)
    sys.stderr.flush()


def mkdtemp(tag):
    d = tempfile.mkdtemp(prefix="perfgraft-libdw-%s." % tag)
    if KEEP_TMP:
        info("keeping %s" % d)
    return d


def rmtree(d):
    if d and not KEEP_TMP:
        shutil.rmtree(d, ignore_errors=True)


_SCRIPT_HEAD = re.compile(r"^\s*(\d+)/(\d+)\s+(\d+\.\d+):\s*$")
_TOOL_LINE = re.compile(r"^(\d+)/(\d+) (\d+\.\d+):(.*?) \| (.*)$")


def parse_perf_script(text):
    """perf script --ns --no-inline -F pid,tid,time,ip,dso ->
    {(tid, time): [(ip, dso)]}, user frames only, innermost first."""
    out = {}
    cur = None
    for ln in text.splitlines():
        if not ln.strip():
            cur = None
            continue
        m = _SCRIPT_HEAD.match(ln)
        if m:
            cur = out.setdefault((int(m.group(2)), m.group(3)), [])
            continue
        if cur is None:
            continue
        w = ln.split(None, 1)
        ip = int(w[0], 16)
        dso = w[1].strip()[1:-1] if len(w) > 1 else ""
        if ip < KERNEL:
            cur.append((ip, dso))
    return out


def parse_tool(text):
    """libdw_unwind --perf-ip output -> {(tid, time): ([ip], status)}."""
    out = {}
    for ln in text.splitlines():
        m = _TOOL_LINE.match(ln)
        if not m:
            raise AssertionError("not a libdw_unwind line: %r" % ln)
        ips = [int(w.split("@", 1)[0], 16) for w in m.group(4).split()]
        out[(int(m.group(2)), m.group(3))] = (ips, m.group(5))
    return out


def run(cmd, cwd):
    return pf.run(cmd, cwd=cwd)


class _Recording(unittest.TestCase):
    tmp = None

    @classmethod
    def perf(cls, *args):
        return run(pf.perf_cmd(os.path.join(cls.tmp, "debug"), *args), cls.tmp)

    @classmethod
    def script(cls, data):
        _, out, _, _ = cls.perf("script", "-i", data, "--ns", "--no-inline",
                                "-F", "pid,tid,time,ip,dso")
        return parse_perf_script(out)

    @classmethod
    def tool(cls, data):
        _, out, _, _ = run([TOOL, "--perf-ip", data], cls.tmp)
        return parse_tool(out)

    @classmethod
    def tearDownClass(cls):
        rmtree(cls.tmp)


class Native(_Recording):
    """1: the tool agrees with perf 6.1's libunwind on native code."""

    @classmethod
    def setUpClass(cls):
        if not os.access(TOOL, os.X_OK):
            raise AssertionError("%s is not built" % TOOL)
        if shutil.which(pf.PERF) is None or shutil.which("gcc") is None:
            raise unittest.SkipTest("perf or gcc not found")
        cls.tmp = mkdtemp("native")
        try:
            with open(os.path.join(cls.tmp, "deep.c"), "w") as f:
                f.write(DEEP_C)
            cls.results = {}
            for tag, flag in (("fp", "-fno-omit-frame-pointer"),
                              ("nofp", "-fomit-frame-pointer")):
                run(["gcc", "-O1", "-g", flag, "-o", "deep-" + tag, "deep.c"], cls.tmp)
                rc, _, err, _ = pf.run(pf.perf_cmd(
                    os.path.join(cls.tmp, "debug"), "record", "-N", "-q",
                    "--call-graph", "dwarf", "-e", "cpu-clock", "-o", tag + ".data",
                    "--", "./deep-" + tag, "3000"), cwd=cls.tmp, check=False)
                if rc != 0:
                    raise unittest.SkipTest("perf record cannot run here: " + err[-300:])
                cls.results[tag] = (cls.script(tag + ".data"), cls.tool(tag + ".data"))
        except BaseException:
            rmtree(cls.tmp)
            raise

    def check(self, tag):
        perf, tool = self.results[tag]
        self.assertEqual(set(perf), set(tool), "the same samples")
        self.assertGreater(len(tool), 100)
        diffs = [(k, [ip for ip, _ in perf[k]], tool[k]) for k in sorted(tool)
                 if [ip for ip, _ in perf[k]] != tool[k][0]]
        deep = sum(1 for ips, st in tool.values() if len(ips) >= 13 and st == "ok")
        info("native %s: %d samples, %d chains equal to perf 6.1's, %d through "
             "f10..leaf+main+libc+_start" % (tag, len(tool), len(tool) - len(diffs), deep))
        self.assertFalse(diffs, "chains that differ (key, perf, tool):\n" +
                         "\n".join(map(str, diffs[:10])))
        self.assertGreater(deep, len(tool) // 5)

    def test_frame_pointer(self):
        self.check("fp")

    def test_empty_stack_copy_gives_no_chain(self):
        """A sample whose user stack copy is empty (dyn_size 0, as the
        kernel writes when it cannot read the stack, e.g. inside an exec)
        has no user chain under perf whatever its registers; the tool
        must print none either (a CI run saw such a sample at exec)."""
        src = os.path.join(self.tmp, "fp.data")
        dst = os.path.join(self.tmp, "fp-empty-stack.data")
        with open(src, "rb") as f:
            buf = bytearray(f.read())
        patched = zero_dyn_size(buf, 5)
        self.assertEqual(len(patched), 5)
        with open(dst, "wb") as f:
            f.write(buf)
        perf, tool = self.script("fp-empty-stack.data"), self.tool("fp-empty-stack.data")
        for k in patched:
            self.assertEqual(perf[k], [], "perf gives no user frames")
            self.assertEqual(tool[k], ([], "error: no user stack"))
        base_perf, base_tool = self.results["fp"]
        self.assertTrue(all(base_perf[k] and base_tool[k][0] for k in patched),
                        "the samples had user chains before the patch")

    def test_omit_frame_pointer(self):
        self.check("nofp")


def zero_dyn_size(buf, n):
    """Sets dyn_size to 0 in the first n samples with a non-empty user
    stack copy of a perf.data file (one attr, no PERF_SAMPLE_REGS_INTR);
    returns their (tid, "sec.nsec") keys.  dyn_size is the stack copy's
    last word, followed only by the fixed-size fields after STACK_USER
    (perf record --call-graph dwarf adds DATA_SRC)."""
    P = pdg.parse(bytes(buf))
    assert len(P.attrs) == 1, "one attr"
    st = P.attrs[0]["sample_type"]
    assert st & (1 << 13) and not st & (1 << 18), "sample_type %#x" % st
    assert st & 7 == 7, "IP, TID and TIME lead (sample_type %#x)" % st
    assert st >> 25 == 0, "sample_type %#x" % st
    tail = 8 * sum(1 for bit in (14, 15, 17, 19, 20, 21, 22, 24) if st >> bit & 1)
    lead = 8 if st & (1 << 16) else 0  # IDENTIFIER
    keys = []
    for r in P.records:
        if len(keys) == n:
            break
        dyn = r["offset"] + r["size"] - tail - 8
        if r["type"] != pdg.PERF_RECORD_SAMPLE or not any(buf[dyn:dyn + 8]):
            continue
        tid = struct.unpack_from(P.bo + "I", r["data"], 8 + lead + 12)[0]
        t = struct.unpack_from(P.bo + "Q", r["data"], 8 + lead + 16)[0]
        buf[dyn:dyn + 8] = bytes(8)
        keys.append((tid, "%d.%09d" % (t // 10**9, t % 10**9)))
    return keys


def jit_image(dso):
    return "/jitted-" in dso


def module_failure_path(status):
    m = re.match(r"^(?:error: )?module: [0-9a-f]+ (\S+)", status)
    return m.group(1) if m else None


class Node(_Recording):
    """2: per-function images unwind as with libunwind; packed ones break."""

    MS = 1500

    @classmethod
    def setUpClass(cls):
        if not os.access(TOOL, os.X_OK):
            raise AssertionError("%s is not built" % TOOL)
        why = pf.environment_problem()
        if why:
            raise unittest.SkipTest("no usable perf/node here: " + why)
        cls.tmp = mkdtemp("node")
        cls.pid = None
        try:
            cls.rec = cls.record_in_tmp()
            run([pf.PERFGRAFT, "inject", "-q", "--per-function", "-i", "perf.data",
                 "-o", "pf.data"], cls.tmp)
            run([pf.PERFGRAFT, "inject", "-q", "--layout", "packed", "-i", "perf.data",
                 "-o", "packed.data"], cls.tmp)
            run([pf.PERFGRAFT, "inject", "-q", "--layout", "memory", "-i", "perf.data",
                 "-o", "memory.data"], cls.tmp)
            pf.perf_inject_reference(cls.rec, "ref.data")
            cls.raw = {name: cls.tool_raw(name + ".data") for name in ("memory", "ref")}
            cls.stats = {}
            for name in ("pf", "packed", "memory", "ref"):
                cls.stats[name] = cls.compare(name + ".data")
                s = cls.stats[name]
                info("node %-6s %d samples, %d through JIT code: chains equal to perf "
                     "6.1's %.1f%% (%.1f%% of those not stopped by node's remapped "
                     "text or [vdso]), broken on a JIT image %.1f%%, stopped by "
                     "node/vdso %.1f%%"
                     % (name, s["samples"], s["jit"], s["equal_pct"], s["equal_clean_pct"],
                        s["broken_jit_pct"], s["other_pct"]))
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def record_in_tmp(cls):
        """perf record of node work.js with node's cwd /tmp: its dump is
        /tmp/jit-PID.dump, and perf inject --jit's images
        /tmp/jitted-PID-N.so."""
        debug = os.path.join(cls.tmp, "debug")
        os.makedirs(debug)
        shutil.copy(pf.WORK_JS, os.path.join(cls.tmp, "work.js"))
        before = set(glob.glob("/tmp/jit-*.dump"))
        rc, _, err, _ = pf.run(pf.perf_cmd(
            debug, "record", "-N", "-q", "-k", "mono", "--call-graph", "dwarf",
            "-e", "cpu-clock", "-o", os.path.join(cls.tmp, "perf.data"), "--",
            pf.NODE, *pf.NODE_FLAGS, os.path.join(cls.tmp, "work.js"), str(cls.MS)),
            cwd="/tmp", check=False)
        # node's pid: the dump its recorded mmap names (not a wrapper's
        # pid: an exec under perf record changes the maps perf keeps)
        _, out, _, _ = pf.run(pf.perf_cmd(debug, "script", "-i", os.path.join(cls.tmp, "perf.data"),
                                          "--show-mmap-events", "-F", "pid"),
                              cwd=cls.tmp, check=False)
        pids = set(int(p) for p in re.findall(r"/tmp/jit-(\d+)\.dump", out))
        if len(pids) == 1 and "/tmp/jit-%d.dump" % min(pids) not in before:
            cls.pid = pids.pop()
        if rc != 0:
            raise AssertionError("perf record failed: " + err[-500:])
        if cls.pid is None:
            raise AssertionError("no one /tmp/jit-PID.dump of this run in the recording: %s" % pids)
        rec = pf.Recording(cls.tmp, debug, "dwarf")
        rec.pid = cls.pid
        rec.dump = "/tmp/jit-%d.dump" % cls.pid
        if not os.path.isfile(rec.dump):
            raise AssertionError("node wrote no %s" % rec.dump)
        return rec

    @classmethod
    def tearDownClass(cls):
        if cls.pid and not KEEP_TMP:
            for f in (glob.glob("/tmp/jitted-%d-*.so" % cls.pid) +
                      glob.glob("/tmp/isolate-*-%d-v8.log" % cls.pid) +
                      ["/tmp/jit-%d.dump" % cls.pid]):
                try:
                    os.unlink(f)
                except FileNotFoundError:
                    pass
        super().tearDownClass()

    @classmethod
    def tool_raw(cls, data):
        """The tool's chains with the ips as they are (not map-relative,
        which differs between layouts): {(tid, time): ([ip], status)}."""
        _, out, _, _ = run([TOOL, data], cls.tmp)
        return parse_tool(out)

    @classmethod
    def compare(cls, data):
        perf = cls.script(data)
        tool = cls.tool(data)
        jit = [k for k, chain in perf.items() if any(jit_image(d) for _, d in chain)]
        equal = broken = other = clean = clean_equal = 0
        not_prefix = 0
        examples = {"broken": [], "differ": [], "not_prefix": []}
        for k in jit:
            ips, status = tool.get(k, ([], "missing"))
            want = [ip for ip, _ in perf[k]]
            path = module_failure_path(status)
            eq = ips == want
            if want[:len(ips)] != ips:
                not_prefix += 1
                examples["not_prefix"].append((k, want, ips, status))
            equal += eq
            if path and "/jitted-" in path:
                broken += 1
                examples["broken"].append((k, status))
            elif path or "missing" in status:
                other += 1
            else:
                clean += 1
                clean_equal += eq
                if not eq:
                    examples["differ"].append((k, want, ips, status))
        n = max(len(jit), 1)
        return dict(samples=len(tool), jit=len(jit), equal=equal, broken_jit=broken,
                    other=other, clean=clean, not_prefix=not_prefix, clean_equal=clean_equal,
                    equal_pct=100.0 * equal / n, broken_jit_pct=100.0 * broken / n,
                    other_pct=100.0 * other / n,
                    equal_clean_pct=100.0 * clean_equal / max(clean, 1),
                    examples=examples)

    def test_per_function_agrees(self):
        s = self.stats["pf"]
        self.assertGreater(s["jit"], 100, s)
        self.assertGreater(s["clean"], s["jit"] // 2,
                           "most JIT chains unaffected by node's remapped text")
        self.assertGreaterEqual(s["equal_clean_pct"], 90.0,
                                "differing chains: %s" % s["examples"]["differ"][:5])
        self.assertLessEqual(s["broken_jit_pct"], 5.0,
                             "broken on JIT images: %s" % s["examples"]["broken"][:5])

    def test_packed_breaks(self):
        s = self.stats["packed"]
        self.assertGreater(s["jit"], 100, s)
        self.assertGreaterEqual(s["broken_jit_pct"], 50.0, s)
        self.assertGreater(s["broken_jit_pct"], 5 * self.stats["pf"]["broken_jit_pct"])
        # the failure is the one predicted: a frame's image is reported with
        # another bias than the module libdwfl already has there
        st = [st for _, st in s["examples"]["broken"]]
        self.assertTrue(any("overlaps an existing module" in x or "dwfl_addrmodule gives"
                            in x for x in st), st[:5])

    def test_memory_layout_agrees(self):
        # the memory layout: one start - pgoff per image, so libdw's modules
        # never overlap on JIT code; chains as libunwind's, sample by sample
        s = self.stats["memory"]
        self.assertGreater(s["jit"], 100, s)
        self.assertEqual(s["jit"], self.stats["pf"]["jit"])
        self.assertGreater(s["clean"], s["jit"] // 2)
        self.assertLessEqual(s["broken_jit"], s["jit"] // 1000,
                             "broken on JIT images: %s" % s["examples"]["broken"][:5])
        self.assertGreaterEqual(s["clean_equal"], s["clean"] - max(2, s["clean"] // 500),
                                "differing chains: %s" % s["examples"]["differ"][:5])
        # and no worse than perf's own layout, one file per function
        self.assertLessEqual(s["broken_jit"], self.stats["pf"]["broken_jit"])

    def test_perf_inject_images_unwind(self):
        # perf's own images, under the /tmp/jitted- rule: the reference
        s = self.stats["ref"]
        self.assertGreater(s["jit"], 100, s)
        self.assertGreater(s["clean"], s["jit"] // 2)
        self.assertLessEqual(s["broken_jit"], s["jit"] // 1000,
                             "broken on JIT images: %s" % s["examples"]["broken"][:5])

    def test_memory_layout_same_chains_as_perf_inject_libdw(self):
        # the libdw unwinder on perfgraft's images and on perf inject --jit's:
        # the same chain, ip for ip, for every sample; the same outcome
        # (libdw's wording when a walk ends may differ: the chain does not)
        mem, ref = self.raw["memory"], self.raw["ref"]
        self.assertEqual(set(mem), set(ref))
        self.assertGreater(len(ref), 100)

        def outcome(status):
            kind = status.split(":", 1)[0]
            if kind in ("module", "error"):
                return re.sub(r"\S*/jitted-\S*", "JIT", status)
            return kind
        jit = set(k for k, chain in self.script("ref.data").items()
                  if any(jit_image(d) for _, d in chain))
        def anon_stop(k):
            # perf inject --jit drops every //anon map of the JIT's
            # process, perfgraft only the executable ones (its man page):
            # a garbage pc in a data map ends the walk here with perf's
            # "not a regular file", where on perf's output it is in no map
            # and taken as one more frame before libdw gives up
            (mi, ms), (ri, rs) = mem[k], ref[k]
            m = re.match(r"module: ([0-9a-f]+) (//anon|\[anon:|/memfd:)", ms)
            return (m is not None and ri[:len(mi)] == mi and len(ri) == len(mi) + 1 and
                    ri[-1] == int(m.group(1), 16) and rs.startswith("end: "))
        # node's own text (ET_EXEC: libdwfl places it at its link address,
        # whatever base perf gives) holds node's embedded builtins, which
        # the dump maps as JIT code too; a walk that meets both stops on
        # the overlap at a frame that depends on which module came first,
        # for perf's images as for perfgraft's: counted apart, as in
        # compare()
        _, out, _, _ = self.perf("script", "-i", "perf.data", "--show-mmap-events", "-F", "pid")
        node_bin = os.path.realpath(shutil.which(pf.NODE) or pf.NODE)
        text = [(int(a, 16), int(a, 16) + int(n, 16)) for a, n, f in re.findall(
            r"\[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ [^\]]*\]: r.xp (\S+)", out)
            if os.path.realpath(f) == node_bin]
        self.assertTrue(text, "no executable map of %s in the recording" % node_bin)

        def node_stop(status):
            m = re.match(r"^(?:error: )?module: ([0-9a-f]+) ", status)
            return m is not None and any(lo <= int(m.group(1), 16) < hi for lo, hi in text)
        anon = [k for k in ref if (mem[k][0] != ref[k][0] or
                                   outcome(mem[k][1]) != outcome(ref[k][1])) and anon_stop(k)]
        nodes = set(k for k in ref if (mem[k][0] != ref[k][0] or
                                       outcome(mem[k][1]) != outcome(ref[k][1])) and
                    (node_stop(mem[k][1]) or node_stop(ref[k][1])))
        differ = [k for k in ref if mem[k][0] != ref[k][0] and k not in anon and k not in nodes]
        outcomes = [k for k in ref if outcome(mem[k][1]) != outcome(ref[k][1])
                    and k not in anon and k not in nodes]
        ok = sum(1 for k in jit if ref[k][1] == "ok")
        info("node memory vs perf inject --jit under libdw: %d samples (%d through JIT "
             "code, %d of those unwound to the end), %d chains differ, %d outcomes differ "
             "(and %d that stop in node's text at different frames; %d stopped at a "
             "data map perf inject drops, one garbage frame short)"
             % (len(ref), len(jit), ok, len(differ), len(outcomes), len(nodes), len(anon)))
        self.assertLessEqual(len(nodes), len(ref) // 500, [(k, mem[k], ref[k]) for k in
                                                          sorted(nodes)[:3]])
        self.assertGreater(len(jit), 100)
        self.assertGreater(ok, len(jit) // 2)
        self.assertLessEqual(len(anon), len(ref) // 500, [(k, mem[k], ref[k]) for k in anon[:3]])
        self.assertEqual(differ, [], [(k, mem[k], ref[k]) for k in differ[:3]])
        self.assertEqual(outcomes, [], [(k, mem[k][1], ref[k][1]) for k in outcomes[:3]])

    def test_memory_layout_libunwind_same_as_perf_inject(self):
        # perf 6.1 (libunwind) on the memory layout: every sample's chain
        # names the same functions at the same offsets as on perf inject
        # --jit's output
        def chains(data):
            _, out, _, _ = self.perf("script", "-i", data, "--ns", "--no-inline",
                                     "-F", "pid,tid,time,ip,sym,symoff")
            got, key = {}, None
            for line in out.splitlines():
                m = re.match(r"^\s*(\d+)/(\d+)\s+(\d+\.\d+):\s*$", line)
                if m:
                    key = (int(m.group(1)), m.group(3))
                    got[key] = []
                elif line.strip() and key is not None:
                    got[key].append(line.split(None, 1)[1].strip() if " " in line.strip()
                                    else "")
                else:
                    key = None
            return got
        mem, ref = chains("memory.data"), chains("ref.data")
        self.assertGreater(len(ref), 100)
        self.assertEqual(set(mem), set(ref))
        differ = [k for k in ref if mem[k] != ref[k]]
        jit = sum(1 for k in ref if any("JS:" in f or "Builtin:" in f for f in ref[k]))
        info("node memory: perf 6.1 script: %d samples (%d through JIT code), %d chains "
             "differ from perf inject --jit's" % (len(ref), jit, len(differ)))
        self.assertGreater(jit, 100)
        self.assertEqual(differ, [], [(k, mem[k][:6], ref[k][:6]) for k in differ[:3]])

    def test_tool_chains_are_prefixes(self):
        # whatever stops the libdw walk, the frames it took are libunwind's
        for name in ("pf", "packed", "memory"):
            s = self.stats[name]
            self.assertLessEqual(s["not_prefix"], s["jit"] // 20,
                                 "%s: %s" % (name, s["examples"]["not_prefix"][:5]))


if __name__ == "__main__":
    unittest.main()
