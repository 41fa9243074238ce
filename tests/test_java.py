#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Acceptance tests of perfgraft's JVMTI agent (libperfgraft-jvmti.so) on a
real Java program, tests/java/org/perfgraft/work/Workload.java, compiled
with javac into a temporary directory.

The oracle is the JVM's own map: -XX:+DumpPerfMapAtExit makes HotSpot write
/tmp/perf-PID.map at exit, lines of

    0x00007fe390ed4f20 0x0000000000000598 int org.perfgraft.work.Workload.hashLoop(int[], int)
    0x00007fe390940b80 0x0000000000017de0 Interpreter

(start, size, then the return type and the method, or a stub's name), which
perf reads for the process's anonymous executable maps (the code cache).
The map is moved out of /tmp right after the recording: it is put back only
while perf reads the recording without perfgraft, so that perfgraft's
output is never helped by it, and removed at the end.

Definitions (per sample, the leaf frame):
  JIT code     the sample's ip is in the code cache: without inject, perf
               names its dso /tmp/perf-PID.map.
  stub         JIT code that the JVM's map names with no method (Interpreter,
               StubRoutines, adapters, vtable chunks ...): counted apart,
               neither in the numerator nor in the denominator of the
               resolved share.
  resolved     a JIT-code, non-stub sample whose frame in the injected
               recording is in a perfgraft image and is named like a Java
               method: `pkg.Class.method(args)`.
The samples of the two reports are paired one to one (same tid, time and
chain length: inject passes samples through).

  Recorded: one `perf record -k mono -g -e cpu-clock` of the workload with
    the agent (4 s), then `perfgraft inject`:
      - >= 95% of the JIT-code samples resolve;
      - per-method shares agree with the JVM map's within 1 point for every
        method above 1% (names normalised: no return type, hidden classes'
        /0x... suffix dropped, no spaces in the argument list);
      - perf annotate of the hottest Workload method shows Workload.java
        lines of that method;
      - addr2line -f -i at every address of the image where mix() is
        inlined into hashLoop(): mix at a line of mix's body, then hashLoop
        at the line that calls mix (found by the LINE: markers of the
        source, never by fixed numbers);
      - Java frames per sample (frame-pointer call chains from perf script)
        are at least as many with perfgraft as with the JVM's map.
  Running JVM (README, Java: the steps for a running JVM, run as written
    with the placeholders filled in): a JVM started with and one without
    -XX:+PreserveFramePointer, the agent attached with jcmd, then perf
    record -k mono -g -p PID and perfgraft inject: >= 95% of the JIT-code
    samples named in both; a named Java caller in > 60% of them with the
    flag, < 10% without; jcmd VM.set_flag cannot turn the flag on; a
    recording without -k mono is refused by inject (exit 1, the hint).
    The oracle there is the map `jcmd PID Compiler.perfmap` writes after
    the recordings (the JVM is then stopped, not left to exit).
  Attach: a JVM started without the agent under perf record, the agent
    loaded after ~2 s with `jcmd PID JVMTI.agent_load`; after inject the
    hottest method (compiled before the attach) resolves after the attach,
    and >= 95% of the JIT-code samples after the attach resolve; the share
    before the attach is printed.  Before the attach (README, Java): no
    sample is in a perfgraft image, and with the JVM's own map written just
    before the attach (`jcmd PID Compiler.perfmap`) in place, every one of
    them is named in the injected recording as perf names it in the
    original one with that map (more than 50 named), at least a quarter of
    those the JVM's map at exit names too alike (a sanity floor: the JVM
    replaces code between the two maps, more on a loaded machine), while
    >= 95% after the attach stay in perfgraft's images.

Skipped (with the reason) without java/javac/jcmd, perf record, or the
agent: $PERFGRAFT_JVMTI, else BUILDDIR/src/jvmti/libperfgraft-jvmti.so
(BUILDDIR = the directory of $PERFGRAFT).  perf always runs as `perf
--buildid-dir TMP/debug`; everything happens in temporary directories that
are removed (PERFGRAFT_KEEP_TMP=1 keeps them; PERFGRAFT_JVMTI_OPTS adds
agent options, e.g. inline=off), and every /tmp/perf-PID.map
the JVMs wrote is removed.  Figures go to stderr ("java: ...").
"""

import collections
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PERF = os.environ.get("PERF", "perf")
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
BUILDDIR = os.path.dirname(os.path.abspath(PERFGRAFT))
AGENT = os.environ.get("PERFGRAFT_JVMTI") or os.path.join(
    BUILDDIR, "src", "jvmti", "libperfgraft-jvmti.so")
JAVA = os.environ.get("JAVA", "java")
JAVAC = os.environ.get("JAVAC", "javac")
JCMD = os.environ.get("JCMD", "jcmd")
SOURCE = os.path.join(HERE, "java", "org", "perfgraft", "work", "Workload.java")
SOURCE_REL = "org/perfgraft/work/Workload.java"
MAIN = "org.perfgraft.work.Workload"
HASHLOOP = MAIN + ".hashLoop(int[],int)"
MIX = MAIN + ".mix(int)"
KEEP_TMP = os.environ.get("PERFGRAFT_KEEP_TMP") == "1"
# options appended to the agent's dir=TMP (e.g. inline=off, to see a test fail)
EXTRA_OPTS = os.environ.get("PERFGRAFT_JVMTI_OPTS", "")
JVM_FLAGS = ["-XX:+PreserveFramePointer", "-XX:+UnlockDiagnosticVMOptions",
             "-XX:+DumpPerfMapAtExit"]
RESOLVED_MIN = 95.0     # % of JIT-code samples
SHARE_MIN = 1.0         # compare methods at or above this % of the samples
SHARE_TOL = 1.0         # percentage points
DEPTH_TOL = 0.02        # perfgraft's average Java depth >= (1 - this) x the map's

CLASSES = None          # the compiled workload (setUpModule)
_module_tmp = None


def log(msg):
    sys.stderr.write("java: %s\n" % msg)
    sys.stderr.flush()


def run(cmd, cwd=None, check=True, timeout=300, env=None):
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    out = p.stdout.decode("utf-8", "surrogateescape")
    err = p.stderr.decode("utf-8", "surrogateescape")
    if check and p.returncode != 0:
        raise AssertionError("exit %d: %s\n(cwd %s)\n%s" % (
            p.returncode, " ".join(cmd), cwd, err[-3000:]))
    return p.returncode, out, err


def mkdtemp(tag):
    d = tempfile.mkdtemp(prefix="perfgraft-java-%s." % tag)
    if KEEP_TMP:
        log("keeping %s" % d)
    return d


def rmtree(d):
    if d and not KEEP_TMP:
        shutil.rmtree(d, ignore_errors=True)


def perf_cmd(tmp, *args):
    return [PERF, "--buildid-dir", os.path.join(tmp, "debug")] + list(args)


def perf_problem():
    if shutil.which(PERF) is None:
        return "perf (%s) not found" % PERF
    d = tempfile.mkdtemp(prefix="perfgraft-java-perfcheck.")
    try:
        cmd = perf_cmd(d, "record", "-N", "-q", "-k", "mono", "-e", "cpu-clock",
                       "-o", os.path.join(d, "p.data"), "--", "true")
        try:
            rc, _, err = run(cmd, cwd=d, check=False, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            rc, err = -1, str(e)
        if rc != 0 or not os.path.isfile(os.path.join(d, "p.data")):
            return "`%s` does not work here (exit %d): %s" % (
                " ".join(cmd), rc, err.strip()[-300:])
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return None


def setUpModule():
    global CLASSES, _module_tmp
    if not os.access(PERFGRAFT, os.X_OK):
        raise AssertionError("%s is not built (meson setup BUILD && ninja -C BUILD; "
                             "PERFGRAFT=BUILD/perfgraft)" % PERFGRAFT)
    for tool in (JAVA, JAVAC, JCMD):
        if shutil.which(tool) is None:
            raise unittest.SkipTest("%s not found (Debian: openjdk-17-jdk-headless)" % tool)
    if not os.path.isfile(AGENT):
        raise unittest.SkipTest(
            "the JVMTI agent is not built: no %s (%s)" % (
                AGENT, "$PERFGRAFT_JVMTI" if os.environ.get("PERFGRAFT_JVMTI")
                else "BUILDDIR/src/jvmti; or set PERFGRAFT_JVMTI"))
    why = perf_problem()
    if why:
        raise unittest.SkipTest("perf record -e cpu-clock cannot run here: " + why)
    _module_tmp = mkdtemp("classes")
    CLASSES = os.path.join(_module_tmp, "classes")
    run([JAVAC, "-g", "-d", CLASSES, SOURCE], cwd=_module_tmp)


def tearDownModule():
    rmtree(_module_tmp)


# ---------------------------------------------------------------------------
# The source's LINE: markers

def source_lines():
    with open(SOURCE, encoding="utf-8") as f:
        return f.read().splitlines()


def marker(name):
    """The 1-based line of `// LINE:name` in Workload.java."""
    hits = [i + 1 for i, ln in enumerate(source_lines())
            if re.search(r"//\s*LINE:%s\s*$" % re.escape(name), ln)]
    if len(hits) != 1:
        raise AssertionError("marker LINE:%s found %d times in %s" % (name, len(hits), SOURCE))
    return hits[0]


def line_of(regex):
    hits = [i + 1 for i, ln in enumerate(source_lines()) if re.search(regex, ln)]
    if len(hits) != 1:
        raise AssertionError("%r found %d times in %s" % (regex, len(hits), SOURCE))
    return hits[0]


def method_lines(decl_regex):
    """Lines of a method: its declaration to its closing brace (indent 4)."""
    lines = source_lines()
    first = line_of(decl_regex)
    for i in range(first, len(lines)):
        if lines[i] == "    }":
            return first, i + 1
    raise AssertionError("no end of the method at %d" % first)


# ---------------------------------------------------------------------------
# Names and perf script

_HIDDEN = re.compile(r"[/.+]0x[0-9a-fA-F]+(?=[.(])")
_JAVA = re.compile(r"^(?:\S+ )?([\w$.<>\[\]/+]+\.[\w$<>]+)\((.*)\)$")


def java_name(sym):
    """`pkg.Class.method(args)` without return type, hidden-class address or
    spaces in the arguments; None when sym is not a Java method's name."""
    if not sym:
        return None
    m = _JAVA.match(sym.strip())
    if not m or "." not in m.group(1):
        return None
    return "%s(%s)" % (_HIDDEN.sub("", m.group(1)), re.sub(r"\s+", "", m.group(2)))


Sample = collections.namedtuple("Sample", "pid tid time frames")   # frames: [(ip, sym, dso)]
_HEAD = re.compile(r"^\s*(\d+)/(\d+)\s+(\d+\.\d+):")
_FRAME = re.compile(r"^\s+([0-9a-f]+) (.*) \((.*)\)$")


def parse_script(text, pid):
    """perf script -F pid,tid,time,ip,sym,dso (call chains on) -> the
    samples of pid, in order."""
    out = []
    cur = None
    for ln in text.splitlines():
        m = _HEAD.match(ln)
        if m and not ln.startswith("\t"):
            cur = Sample(int(m.group(1)), int(m.group(2)), m.group(3), [])
            if cur.pid == pid:
                out.append(cur)
            continue
        m = _FRAME.match(ln)
        if m and cur is not None:
            cur.frames.append((int(m.group(1), 16), m.group(2), m.group(3)))
    return out


def script(tmp, data, pid):
    _, out, _ = run(perf_cmd(tmp, "script", "-i", data, "-F", "pid,tid,time,ip,sym,dso"),
                    cwd=tmp)
    return parse_script(out, pid)


class JvmMap:
    """/tmp/perf-PID.map written by the JVM at exit, moved into tmp."""

    def __init__(self, pid, tmp):
        self.pid = pid
        self.system = "/tmp/perf-%d.map" % pid
        self.saved = os.path.join(tmp, "jvm-perf-%d.map" % pid)
        if not os.path.exists(self.system):
            raise AssertionError("the JVM wrote no %s (-XX:+DumpPerfMapAtExit)" % self.system)
        shutil.move(self.system, self.saved)
        self.dso = self.system

    def __enter__(self):
        shutil.copyfile(self.saved, self.system)
        return self

    def __exit__(self, *exc):
        remove_map(self.pid)


def remove_map(pid):
    try:
        os.unlink("/tmp/perf-%d.map" % pid)
    except FileNotFoundError:
        pass


def remove_attach_socket(pid):
    """The socket jcmd's first call makes the JVM open: HotSpot removes it
    at a normal exit only, and a JVM killed leaves it in /tmp."""
    path = "/tmp/.java_pid%d" % pid
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass


def is_image(dso, imgdir):
    return os.path.abspath(dso).startswith(imgdir + os.sep)


def classify(oracle, inj, jmap, imgdir):
    """Pairs the samples of the two runs; returns a list of
    (kind, oracle_name, inj_name, oracle_sample, inj_sample), kind one of
    'other' (not JIT code), 'stub', 'jit'."""
    if len(oracle) != len(inj):
        raise AssertionError("%d samples without inject, %d with" % (len(oracle), len(inj)))
    rows = []
    for o, i in zip(oracle, inj):
        # (perf script prints file-backed frames' ips relative to the file)
        if (o.tid, o.time, len(o.frames)) != (i.tid, i.time, len(i.frames)):
            raise AssertionError("samples differ: %s %s" % (o[:3], i[:3]))
        if not o.frames:
            continue
        _, osym, odso = o.frames[0]
        if odso != jmap.dso:
            rows.append(("other", None, None, o, i))
            continue
        oname = java_name(osym)
        if oname is None and osym != "[unknown]":
            rows.append(("stub", osym, None, o, i))
            continue
        _, isym, idso = i.frames[0]
        iname = java_name(isym) if is_image(idso, imgdir) else None
        rows.append(("jit", oname, iname, o, i))
    return rows


def shares(rows, total):
    """Per-method % of all samples, by the oracle and by perfgraft."""
    oc, ic = collections.Counter(), collections.Counter()
    for kind, oname, iname, _, _ in rows:
        if kind == "jit":
            if oname:
                oc[oname] += 1
            if iname:
                ic[iname] += 1
    pct = lambda c: {k: 100.0 * v / total for k, v in c.items()}
    return pct(oc), pct(ic)


def java_depth(sample, jvm_dso, imgdir, injected):
    n = 0
    for _, sym, dso in sample.frames:
        ok = is_image(dso, imgdir) if injected else dso == jvm_dso
        if ok and java_name(sym):
            n += 1
    return n


def record(tmp, ms, agent_opts=None, background=False):
    """perf record of the workload; returns (pid, stdout) or the Popen."""
    cmd = perf_cmd(tmp, "record", "-q", "-k", "mono", "-g", "-e", "cpu-clock",
                   "-o", os.path.join(tmp, "perf.data"), "--", JAVA) + JVM_FLAGS
    if agent_opts is not None:
        cmd.append("-agentpath:%s=%s" % (AGENT, ",".join(
            o for o in (agent_opts, EXTRA_OPTS) if o)))
    cmd += ["-cp", CLASSES, MAIN, str(ms)]
    if background:
        return subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    rc, out, err = run(cmd, cwd=tmp, check=False)
    m = re.search(r"^pid (\d+)", out, re.M)
    if m:
        remove_map_later(int(m.group(1)))
    if rc != 0 or not m:
        raise AssertionError("perf record of the workload failed (exit %d):\n%s\n%s"
                             % (rc, out[-1000:], err[-2000:]))
    return int(m.group(1)), out


_maps = set()


def remove_map_later(pid):
    _maps.add(pid)


def cleanup_maps():
    for pid in _maps:
        remove_map(pid)
        remove_attach_socket(pid)


# ---------------------------------------------------------------------------

class JavaRun(unittest.TestCase):
    """A temporary directory (TAG) for one JVM run made by _setup(); the
    directory and the JVM's /tmp/perf-PID.map files go at the end, also
    when the setup fails."""
    TAG = "run"

    @classmethod
    def setUpClass(cls):
        cls.tmp = mkdtemp(cls.TAG)
        try:
            cls._setup()
        except BaseException:
            cleanup_maps()
            rmtree(cls.tmp)
            raise

    @classmethod
    def tearDownClass(cls):
        cleanup_maps()
        rmtree(cls.tmp)


class Recorded(JavaRun):
    TAG = "rec"

    @classmethod
    def _setup(cls):
        tmp = cls.tmp
        cls.pid, _ = record(tmp, 4000, "dir=" + tmp)
        cls.jmap = JvmMap(cls.pid, tmp)
        cls.dump = os.path.join(tmp, "jit-%d.dump" % cls.pid)
        if not os.path.isfile(cls.dump):
            raise AssertionError("the agent wrote no %s: %s" % (cls.dump, os.listdir(tmp)))
        run([PERFGRAFT, "inject", "-i", "perf.data", "-o", "inj.data"], cwd=tmp)
        cls.imgdir = os.path.join(tmp, "inj.data.d")
        cls.inj = script(tmp, "inj.data", cls.pid)
        with cls.jmap:
            cls.oracle = script(tmp, "perf.data", cls.pid)
        cls.rows = classify(cls.oracle, cls.inj, cls.jmap, cls.imgdir)
        cls.total = len(cls.oracle)


    def test_resolved_share(self):
        kinds = collections.Counter(r[0] for r in self.rows)
        jit = [r for r in self.rows if r[0] == "jit"]
        resolved = [r for r in jit if r[2]]
        agree = [r for r in jit if r[1] and r[1] == r[2]]
        named_by_map = [r for r in jit if r[1]]
        stub_named = [r for r in self.rows if r[0] == "stub" and is_image(
            r[4].frames[0][2], self.imgdir)]
        share = 100.0 * len(resolved) / max(1, len(jit))
        log("%d samples of the JVM: %d in compiled Java code, %d in stubs/interpreter "
            "(%d of them in a perfgraft image), %d elsewhere" % (
                self.total, kinds["jit"], kinds["stub"], len(stub_named), kinds["other"]))
        log("resolved to Java method names: %d of %d = %.2f%%; same name as the JVM map "
            "for %d of the %d it names (%.2f%%); %d the map does not name" % (
                len(resolved), len(jit), share, len(agree), len(named_by_map),
                100.0 * len(agree) / max(1, len(named_by_map)), len(jit) - len(named_by_map)))
        self.assertGreater(len(jit), self.total // 10, "too few samples in JIT code")
        unresolved = collections.Counter((r[1], r[4].frames[0][1], r[4].frames[0][2])
                                         for r in jit if not r[2])
        self.assertGreaterEqual(share, RESOLVED_MIN, "unresolved (map name, perfgraft sym, dso): %s"
                                % unresolved.most_common(15))

    def test_method_shares_match_the_jvm_map(self):
        o, i = shares(self.rows, self.total)
        names = sorted({n for n in list(o) + list(i)
                        if max(o.get(n, 0), i.get(n, 0)) >= SHARE_MIN},
                       key=lambda n: -max(o.get(n, 0), i.get(n, 0)))
        table = ["%7s %7s %6s  %s" % ("map%", "pg%", "diff", "method")]
        worst = (0.0, None)
        for n in names:
            d = i.get(n, 0) - o.get(n, 0)
            table.append("%7.2f %7.2f %+6.2f  %s" % (o.get(n, 0), i.get(n, 0), d, n))
            if abs(d) >= abs(worst[0]):
                worst = (d, n)
        text = "\n".join(table)
        log("per-method shares (%% of %d samples), worst %+.2f (%s):\n%s" % (
            self.total, worst[0], worst[1], text))
        self.assertGreaterEqual(len(names), 3, text)
        self.assertIn(HASHLOOP, names, text)
        self.assertLessEqual(abs(worst[0]), SHARE_TOL, "\n" + text)

    def hottest_workload_method(self):
        c = collections.Counter(r[2] for r in self.rows if r[0] == "jit" and r[2]
                                and r[2].startswith(MAIN + "."))
        self.assertTrue(c, "no Workload method resolved")
        name = c.most_common(1)[0][0]
        raw = {r[4].frames[0][1] for r in self.rows if r[2] == name}
        return name, sorted(raw)[0]

    def test_annotate_hottest_with_java_lines(self):
        name, sym = self.hottest_workload_method()
        rc, out, err = run(perf_cmd(self.tmp, "annotate", "-i", "inj.data", "--stdio", "-l",
                                    sym), cwd=self.tmp, check=False)
        self.assertEqual(rc, 0, err[-2000:])
        lines = [int(n) for n in re.findall(r"Workload\.java:(\d+)", out)]
        self.assertTrue(lines, "no Workload.java:N in perf annotate of %s:\n%s" % (sym, out[:3000]))
        meth = re.match(r".*\.(\w+)\(", name).group(1)
        first, last = method_lines(r"^\s+static \S+ %s\(" % re.escape(meth))
        inside = [n for n in lines if first <= n <= last]
        # the lines of the method and of the Workload methods it calls (inlined)
        allowed = set(range(first, last + 1))
        text = "\n".join(source_lines()[first - 1:last])
        for callee in set(re.findall(r"\b(\w+)\(", text)) - {meth}:
            try:
                a, b = method_lines(r"^\s+static \S+ %s\(" % re.escape(callee))
            except AssertionError:
                continue
            allowed |= set(range(a, b + 1))
        m = re.search(r"Sorted summary.*?\n\s*[\d.]+\s+\S*Workload\.java:(\d+)", out, re.S)
        top = int(m.group(1)) if m else None
        log("perf annotate %s: %d Workload.java lines, %d of them in %s (%d-%d); hottest "
            "line %s" % (sym, len(lines), len(inside), meth, first, last, top))
        self.assertTrue(inside, "no line of %s (%d-%d): %s" % (meth, first, last, lines[:40]))
        n = len(source_lines())
        self.assertTrue(all(1 <= x <= n for x in lines), lines)
        self.assertIn(top, allowed, "the hottest line is not in %s or a Workload method it "
                      "calls:\n%s" % (meth, out[:3000]))
        self.assertTrue(re.search(r"\n\s+[\d.]+ :\s+[0-9a-f]+:\s+\w+", out),
                        "no disassembly:\n" + out[:3000])

    def images_with(self, pattern):
        out = []
        for f in sorted(os.listdir(self.imgdir)):
            if not f.endswith(".so"):
                continue
            path = os.path.join(self.imgdir, f)
            _, nm, _ = run(["nm", "-S", "--defined-only", path], cwd=self.tmp)
            for ln in nm.splitlines():
                w = ln.split(" ", 3)
                if len(w) == 4 and java_name(w[3]) and re.search(pattern, java_name(w[3])):
                    out.append((path, int(w[0], 16), int(w[1], 16), w[3]))
        return out

    def test_addr2line_inlined_mix(self):
        call = marker("hashLoop-call-mix")
        mfirst, mlast = method_lines(r"^\s+static int mix\(")
        body = {marker("mix-%d" % k) for k in range(1, 6)}
        funcs = self.images_with(r"\.hashLoop\(")
        self.assertTrue(funcs, "no hashLoop in the images")
        chains = collections.Counter()
        for path, start, size, sym in funcs:
            addrs = "\n".join(hex(a) for a in range(start, start + size)) + "\n"
            p = subprocess.run(["addr2line", "-a", "-f", "-i", "-e", path],
                               input=addrs.encode(), stdout=subprocess.PIPE, check=True)
            groups = re.split(r"^0x[0-9a-f]+\n", p.stdout.decode(), flags=re.M)[1:]
            for g in groups:
                ln = g.splitlines()
                frames = [(ln[k], ln[k + 1]) for k in range(0, len(ln) - 1, 2)]
                if len(frames) >= 2 and java_name(frames[0][0]) == MIX:
                    chains[tuple(frames[:2])] += 1
        log("addr2line -i over hashLoop's code: %d addresses with mix inlined: %s" % (
            sum(chains.values()), dict(chains)))
        self.assertTrue(chains, "no address of hashLoop (%s) has mix inlined" % funcs)
        in_body = unknown = 0
        for (mf, mloc), (hf, hloc) in chains:
            n = chains[((mf, mloc), (hf, hloc))]
            self.assertEqual(java_name(hf), HASHLOOP)
            mm = re.match(r"^(.*):(\d+)", mloc)
            hm = re.match(r"^(.*):(\d+)", hloc)
            self.assertTrue(mm and hm, (mloc, hloc))
            self.assertTrue(hm.group(1).endswith(SOURCE_REL), hloc)
            self.assertEqual(int(hm.group(2)), call, "hashLoop's call line: %s, want %d"
                             % (hloc, call))
            if int(mm.group(2)) == 0:       # a row the agent had no line for
                unknown += n
                continue
            self.assertTrue(mm.group(1).endswith(SOURCE_REL), mloc)
            self.assertTrue(mfirst <= int(mm.group(2)) <= mlast,
                            "mix at %s, not in %d-%d" % (mloc, mfirst, mlast))
            in_body += n if int(mm.group(2)) in body else 0
        total = sum(chains.values())
        self.assertTrue(in_body, "no address at a line of mix's body %s" % sorted(body))
        self.assertLessEqual(unknown, total // 10, "too many addresses of mix at line 0")

    def test_call_graph_depth(self):
        od = [java_depth(o, self.jmap.dso, self.imgdir, False) for o in self.oracle]
        idp = [java_depth(i, self.jmap.dso, self.imgdir, True) for i in self.inj]
        with_java = [k for k, d in enumerate(od) if d] or [0]
        oa = sum(od[k] for k in with_java) / len(with_java)
        ia = sum(idp[k] for k in with_java) / len(with_java)
        log("Java frames per sample (%d samples with one by the map): map avg %.2f max %d, "
            "perfgraft avg %.2f max %d" % (len(with_java), oa, max(od), ia, max(idp)))
        self.assertGreater(oa, 1.5, "the map's call chains are not deep: frame pointers?")
        self.assertGreaterEqual(ia, oa * (1 - DEPTH_TOL))
        self.assertGreaterEqual(max(idp), max(od))


class Attach(JavaRun):
    ATTACH_AFTER = 2.0
    RUN_MS = 6000

    TAG = "attach"

    @classmethod
    def _setup(cls):
        tmp = cls.tmp
        p = record(tmp, cls.RUN_MS, None, background=True)
        try:
            first = p.stdout.readline().decode()
            m = re.match(r"^pid (\d+)", first)
            if not m:
                p.kill()
                out, err = p.communicate()
                raise AssertionError("no pid from the workload: %r %s" % (first, err[-2000:]))
            cls.pid = int(m.group(1))
            remove_map_later(cls.pid)
            time.sleep(cls.ATTACH_AFTER)
            # the JVM's own map of the code it holds now (the README's way
            # to name the samples before the attach), kept apart from the
            # map it writes at exit (the oracle)
            cls.attach_map = os.path.join(tmp, "attach-perf-%d.map" % cls.pid)
            # jcmd takes seconds under load, and the JIT compiles on
            # meanwhile: only code run before it started is surely in its map
            cls.tm = time.clock_gettime(time.CLOCK_MONOTONIC)
            run([JCMD, str(cls.pid), "Compiler.perfmap"], cwd=tmp, timeout=60)
            shutil.move("/tmp/perf-%d.map" % cls.pid, cls.attach_map)
            cls.t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
            opts = ",".join(o for o in ("dir=" + tmp, EXTRA_OPTS) if o)
            # jcmd parses a bare KEY=VALUE as its own option: the agent would
            # get "dir" alone; quoted, the whole string is the agent's
            rc, jout, jerr = run([JCMD, str(cls.pid), "JVMTI.agent_load", AGENT,
                                  '"%s"' % opts],
                                 cwd=tmp, check=False, timeout=60)
            cls.t1 = time.clock_gettime(time.CLOCK_MONOTONIC)
            out, err = p.communicate(timeout=120)
        except BaseException:
            if p.poll() is None:
                p.kill()
                p.communicate()
            raise
        if p.returncode != 0:
            raise AssertionError("perf record exit %d: %s" % (p.returncode, err[-2000:]))
        if rc != 0 or "return code: 0" not in jout:
            raise AssertionError("jcmd JVMTI.agent_load failed (exit %d): %s %s\n"
                                 "the JVM's stderr: %s" % (rc, jout, jerr,
                                                         err.decode("utf-8", "replace")[-2000:]))
        log("attached %.2f-%.2f s after the pid line (jcmd took %.2f s)" % (
            cls.ATTACH_AFTER, cls.ATTACH_AFTER + cls.t1 - cls.t0, cls.t1 - cls.t0))
        cls.jmap = JvmMap(cls.pid, tmp)
        run([PERFGRAFT, "inject", "-i", "perf.data", "-o", "inj.data"], cwd=tmp)
        cls.imgdir = os.path.join(tmp, "inj.data.d")
        cls.inj = script(tmp, "inj.data", cls.pid)
        with cls.jmap:
            cls.oracle = script(tmp, "perf.data", cls.pid)
        cls.rows = classify(cls.oracle, cls.inj, cls.jmap, cls.imgdir)
        # the injected recording read with the attach-time map in place
        # (and the original one with it: what perf alone makes of that map)
        shutil.copyfile(cls.attach_map, cls.jmap.system)
        try:
            cls.inj_map = script(tmp, "inj.data", cls.pid)
            cls.orig_map = script(tmp, "perf.data", cls.pid)
        finally:
            remove_map(cls.pid)

    def test_before_attach(self):
        """What the README says of the samples before the attach: no
        perfgraft image names them (the dump cannot say what held the code
        cache then), and the JVM's own map written at the attach (jcmd
        Compiler.perfmap) names them in the injected recording as perf names
        them with that map in the original one, while the code after the
        attach stays perfgraft's."""
        before = [k for k, r in enumerate(self.rows)
                  if r[0] == "jit" and float(r[3].time) < self.t0]
        after = [k for k, r in enumerate(self.rows)
                 if r[0] == "jit" and float(r[3].time) > self.t1]
        jit = sum(1 for r in self.rows if r[0] == "jit")
        in_image = [k for k in before if is_image(self.rows[k][4].frames[0][2], self.imgdir)]
        log("attach: %d of %d JIT samples (%.2f%%) ran before the attach; %d of them in a "
            "perfgraft image" % (len(before), jit, 100.0 * len(before) / max(1, jit),
                                 len(in_image)))
        self.assertGreater(len(before), 50, "too few JIT samples before the attach")
        self.assertEqual(in_image, [], "samples before the attach named by an image")
        for runs in (self.inj_map, self.orig_map):
            if len(runs) != len(self.inj):
                self.fail("%d samples, %d with the attach map" % (len(self.inj), len(runs)))
        mapped = [k for k in before if float(self.rows[k][3].time) < self.tm]
        self.assertGreater(len(mapped), 50, "too few JIT samples before jcmd Compiler.perfmap")

        def name(sample):
            _, sym, dso = sample.frames[0]
            return java_name(sym) if dso == self.jmap.system else None
        # The map holds the code the JVM held when it wrote it: code freed
        # between a sample and jcmd (a C1 version a C2 compilation replaced,
        # swept) is not in it, however the recording is read; a loaded
        # machine makes jcmd slow and frees more.  What inject owes is perf's
        # own reading of that map, sample for sample.
        differ = [(k, self.orig_map[k].frames[0][1:], self.inj_map[k].frames[0][1:])
                  for k in mapped if self.orig_map[k].frames[0][1:] !=
                  self.inj_map[k].frames[0][1:]]
        named = sum(1 for k in mapped if name(self.inj_map[k]))
        both = [k for k in mapped if name(self.inj_map[k]) and self.rows[k][1]]
        agree = sum(1 for k in both if name(self.inj_map[k]) == self.rows[k][1])
        log("attach: with jcmd Compiler.perfmap's map at the attach, %d of the %d samples "
            "before it are named (%.2f%%), as perf names them in the original recording "
            "but for %d; %d of the %d the JVM's map at exit names too are named alike" % (
                named, len(mapped), 100.0 * named / len(mapped), len(differ), agree,
                len(both)))
        self.assertEqual(differ[:5], [], "%d samples before the attach read otherwise "
                         "than in the original recording with the same map" % len(differ))
        self.assertGreater(named, 50, "the map at the attach named too few samples")
        # The map at exit names what was at each address when the JVM
        # ended: code replaced since the sample (more of it the slower the
        # machine) names it otherwise.  All alike on an idle machine, 793 of
        # 1356 with a fuzzer beside the CI's two suites; a map of another
        # process or run would name almost none alike.
        self.assertGreaterEqual(agree, 0.25 * len(both),
                                "the map at the attach is not this JVM's")
        kept = sum(1 for k in after if is_image(self.inj_map[k].frames[0][2], self.imgdir)
                   and java_name(self.inj_map[k].frames[0][1]))
        self.assertGreaterEqual(kept, RESOLVED_MIN / 100 * len(after),
                                "the map took samples after the attach from the images")

    def test_attach_resolves_code_compiled_before(self):
        def part(rows):
            jit = [r for r in rows if r[0] == "jit"]
            ok = [r for r in jit if r[2]]
            return len(ok), len(jit), 100.0 * len(ok) / max(1, len(jit))
        before = [r for r in self.rows if float(r[3].time) < self.t0]
        after = [r for r in self.rows if float(r[3].time) > self.t1]
        b, a = part(before), part(after)
        log("attach: resolved before %d/%d = %.2f%%, after %d/%d = %.2f%%" % (b + a))
        hot = [r for r in after if r[0] == "jit" and r[1] == HASHLOOP]
        hot_ok = [r for r in hot if r[2] == HASHLOOP]
        log("attach: hashLoop after the attach: %d of %d samples named so" % (
            len(hot_ok), len(hot)))
        self.assertGreater(a[1], 200, "too few JIT samples after the attach")
        self.assertTrue(hot, "no hashLoop samples after the attach")
        self.assertGreaterEqual(len(hot_ok), 0.95 * len(hot))
        self.assertGreaterEqual(a[2], RESOLVED_MIN)


def readme_attach_steps():
    """The README's steps for a running JVM: [command]."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    first = "    $ java -XX:+PreserveFramePointer -cp classes Main &"
    if first not in lines:
        raise AssertionError("README: no running-JVM recipe starting %r" % first.strip())
    steps = []
    for ln in lines[lines.index(first):]:
        if not ln.startswith("    $ "):
            break
        steps.append(ln[6:])
    return steps


class AttachRunning(JavaRun):
    """The README's running-JVM steps as written (placeholders filled in;
    perf and inject also keep out of ~/.debug), and the limits it states:
    a JVM started with -XX:+PreserveFramePointer, another without (which
    jcmd cannot turn it on in), both recorded by perf record -p PID after
    the attach; the second also once without -k mono."""
    TAG = "running"
    RUN_MS = 120000
    ATTACH_AFTER = 1.5

    @classmethod
    def _setup(cls):
        cls.steps = readme_attach_steps()
        if len(cls.steps) != 4 or not cls.steps[1].startswith("jcmd PID JVMTI.agent_load ") \
                or not cls.steps[2].startswith("perf record -k mono -g ") \
                or not cls.steps[3].startswith("perfgraft inject "):
            raise AssertionError("README's running-JVM steps changed: %s" % cls.steps)
        cls.runs = {pfp: cls._run(pfp) for pfp in (True, False)}

    @classmethod
    def _run(cls, pfp):
        tmp = os.path.join(cls.tmp, "pfp" if pfp else "nofp")
        os.mkdir(tmp)
        debug = os.path.join(tmp, "debug")
        env = dict(os.environ)
        env["PATH"] = BUILDDIR + os.pathsep + env["PATH"]
        # runs long enough for slow jcmd calls on a loaded machine, and is
        # stopped once the steps are done
        java = cls.steps[0].rstrip(" &").replace(
            "-cp classes Main", "-cp %s %s %d" % (CLASSES, MAIN, cls.RUN_MS))
        if JAVA != "java":
            java = java.replace("java ", JAVA + " ", 1)
        if not pfp:
            java = java.replace("-XX:+PreserveFramePointer ", "")
        jvm = subprocess.Popen(["/bin/sh", "-c", "exec " + java], cwd=tmp, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        r = {"tmp": tmp}
        try:
            m = re.match(r"^pid (\d+)", jvm.stdout.readline().decode())
            if not m:
                raise AssertionError("no pid from %s" % java)
            pid = r["pid"] = int(m.group(1))
            remove_map_later(pid)
            time.sleep(cls.ATTACH_AFTER)
            sub = lambda c: (c.replace("PID", str(pid))
                             .replace("/path/to/libperfgraft-jvmti.so", AGENT)
                             .replace("DIR", tmp).replace("sleep 10", "sleep 2")
                             .replace("perf record ", "%s --buildid-dir %s record -N "
                                      % (PERF, debug))
                             .replace("perfgraft inject ", "perfgraft inject -N "))
            # on a terminal's stdout, not a pipe: perf record writes
            # pipe-mode data to a pipe given no -o
            for k, c in enumerate(cls.steps[1:]):
                with open(os.path.join(tmp, "step%d.out" % k), "w+") as out:
                    p = subprocess.run(["/bin/sh", "-c", sub(c)], cwd=tmp, env=env,
                                       stdout=out, stderr=subprocess.PIPE, timeout=120)
                    if p.returncode:
                        raise AssertionError("%s: exit %d: %s" % (
                            sub(c), p.returncode, p.stderr.decode(errors="replace")[-2000:]))
            if not pfp:     # once more without -k mono: inject refuses the dump
                run(perf_cmd(tmp, "record", "-N", "-q", "-g", "-e", "cpu-clock", "-p", str(pid),
                             "-o", "nomono.data", "--", "sleep", "1"), cwd=tmp)
                r["nomono"] = run([PERFGRAFT, "inject", "-N", "-i", "nomono.data",
                                   "-o", "nomono.jit.data"], cwd=tmp, check=False)
                _, r["set_flag"], _ = run([JCMD, str(pid), "VM.set_flag",
                                           "PreserveFramePointer", "true"], check=False)
            if jvm.poll() is not None:
                raise AssertionError("the JVM ended before the steps did (RUN_MS)")
            # the oracle: the JVM's own map of the code it holds now
            run([JCMD, str(pid), "Compiler.perfmap"], cwd=tmp, timeout=120)
        finally:
            if jvm.poll() is None:
                jvm.kill()
            jvm.communicate()
        jmap = JvmMap(pid, tmp)
        imgdir = os.path.join(tmp, "perf.jit.data.d")
        inj = script(tmp, "perf.jit.data", pid)
        with jmap:
            oracle = script(tmp, "perf.data", pid)
        r["rows"] = classify(oracle, inj, jmap, imgdir)
        r["imgdir"] = imgdir
        return r

    def resolved(self, r):
        jit = [x for x in r["rows"] if x[0] == "jit"]
        return jit, [x for x in jit if x[2]]

    def test_code_compiled_before_the_attach_is_named(self):
        for pfp, r in self.runs.items():
            jit, ok = self.resolved(r)
            log("running JVM (%s): %d of %d JIT samples after the attach named (%.2f%%)" % (
                "-XX:+PreserveFramePointer" if pfp else "no frame pointers", len(ok), len(jit),
                100.0 * len(ok) / max(1, len(jit))))
            self.assertGreater(len(jit), 200)
            self.assertGreaterEqual(len(ok), RESOLVED_MIN / 100 * len(jit))

    def test_frame_pointer_needed_for_java_callers(self):
        self.assertIn("only 'writeable' flags can be set", self.runs[False]["set_flag"])
        share = {}
        for pfp, r in self.runs.items():
            _, ok = self.resolved(r)
            callers = [x for x in ok if any(
                is_image(dso, r["imgdir"]) and java_name(sym) for _, sym, dso in x[4].frames[1:])]
            share[pfp] = 100.0 * len(callers) / max(1, len(ok))
        log("running JVM: samples in compiled Java code with a named Java caller: %.1f%% with "
            "-XX:+PreserveFramePointer, %.1f%% without" % (share[True], share[False]))
        # the README's figures: over 60% with the flag, under 10% without
        self.assertGreater(share[True], 60.0)
        self.assertLess(share[False], 10.0)

    def test_k_mono_required(self):
        rc, _, err = self.runs[False]["nomono"]
        self.assertEqual(rc, 1, err)
        self.assertIn("re-record with 'perf record -k mono'", err)


if __name__ == "__main__":
    unittest.main()
