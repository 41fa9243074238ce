#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""perfgraft xray on real traces, judged by llvm-xray 14, perf 6.1 and
libtraceevent.

The traces come from clang 14 programs (tests/xray/*.cc) that
tests/gen-xray-traces.sh builds and runs into a temporary directory: FDR
with threads, recursion, tail calls, logged arguments, custom and typed
events, the default 5 us threshold and threshold 0, a ring small enough to
be overwritten, unbalanced patching, and basic mode (threads with argument
payloads, a depth cap, a header-only file).

For every trace:
  * per-function call counts and time sums from the xray:function_exit /
    tail_exit events (as perf script prints them) equal llvm-xray account's
    (YAML route, -k -d: see xray_ref.py);
  * exclusive-time shares in perf report --no-children --sort sym are within
    1 percentage point of the exclusive times computed from the events;
  * perf script prints every event with named fields, and the system
    libtraceevent parses the formats in the file and decodes the same events
    (tests/xray_tep.c);
  * arguments, payloads and recovered stacks are those the program made.
"""

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import xray_ref  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(HERE, "..", "build", "perfgraft"))
BUILD = os.path.dirname(os.path.abspath(PERFGRAFT))
XRAY_TEP = os.path.join(BUILD, "tests", "xray_tep")

# Short traces (microseconds) need a finer grid than the default to give
# enough samples for a 1-point comparison; the long workload trace uses the
# default frequency.
MIN_SAMPLES = 100000


def have_tools():
    return (shutil.which("perf") and xray_ref.llvm_xray() and
            (shutil.which("clang++-14") or shutil.which("clang++")))


def strip_params(name):
    """perf prints C++ symbols without their parameter lists."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                return name[:i]
    return name


EVENT_RE = re.compile(r"^\s*(\d+)\s+(\d+)\.(\d+):\s+xray:(\w+):\s+(.*)$")


FUNCTION_RE = re.compile(r"^id=(\d+) addr=(0x[0-9a-f]+) name=(.*) file=(.*) line=(\d+) column=(\d+)$")


def script_events(data, buildid_dir):
    """xray:* events as perf script prints them: (tid, ns, kind, fields).
    The function events carry only the ID: fields["name"] is the name the
    last xray:function event before them gave that ID (None if none did)."""
    p = subprocess.run(["perf", "--buildid-dir", buildid_dir, "script", "--ns", "-i", data,
                        "-F", "tid,time,event,trace"],
                       capture_output=True, text=True, errors="replace", timeout=300)
    if p.returncode:
        raise AssertionError("perf script failed: " + p.stderr[-2000:])
    out = []
    names = {}
    for line in p.stdout.splitlines():
        m = EVENT_RE.match(line)
        if not m:
            continue
        tid, s, ns, kind, rest = m.groups()
        if kind == "function":
            fm = FUNCTION_RE.match(rest.strip())
            if not fm:
                raise AssertionError("unparsable xray:function: " + rest)
            fields = dict(zip(("id", "addr", "name", "file", "line", "column"), fm.groups()))
            names[int(fields["id"])] = fields["name"]
        else:
            fields = dict(re.findall(r"(\w+)=(\S*)", rest))
            if "id" in fields:
                fields["name"] = names.get(int(fields["id"]))
        out.append((int(tid), int(s) * 10**9 + int(ns), kind, fields, rest))
    return out


def account_from_events(events):
    """{id: (count, sum_ns)} as llvm-xray account -k -d counts: inferred
    exits count, unfinished frames and exits without entries do not."""
    acc = collections.defaultdict(lambda: [0, 0])
    for _tid, _t, kind, f, _rest in events:
        if kind not in ("function_exit", "tail_exit"):
            continue
        if "unfinished" in f.get("flags", "") or "no_entry" in f.get("flags", ""):
            continue
        acc[int(f["id"])][0] += 1
        acc[int(f["id"])][1] += int(f["duration"])
    return acc


def intervals(events):
    """(tid, ns, stack) for every stretch between two function events of a
    thread during which its stack (names, outermost first) was not empty."""
    stacks = collections.defaultdict(list)
    last = {}
    for tid, t, kind, f, _rest in events:
        if kind not in ("function_entry", "function_exit", "tail_exit"):
            continue
        if "no_entry" in f.get("flags", ""):
            continue
        stk = stacks[tid]
        if stk:
            yield tid, t - last[tid], stk
        last[tid] = t
        del stk[int(f["depth"]):]
        if kind == "function_entry":
            stk.append(f["name"])


def exclusive_shares(events):
    """Exclusive time per function (by perf's name), in percent."""
    excl = collections.Counter()
    for _tid, dt, stk in intervals(events):
        excl[strip_params(stk[-1])] += dt
    total = sum(excl.values())
    return {k: 100.0 * v / total for k, v in excl.items()} if total else {}


def busy_ns(events):
    """Time summed over threads during which a thread's stack was not empty."""
    return sum(dt for _tid, dt, _stk in intervals(events))


def report_shares(data, buildid_dir):
    p = subprocess.run(["perf", "--buildid-dir", buildid_dir, "report", "-i", data,
                        "--no-children", "--sort", "sym", "--stdio", "-g", "none",
                        "--percent-limit", "0"],
                       capture_output=True, text=True, errors="replace", timeout=300)
    if p.returncode:
        raise AssertionError("perf report failed: " + p.stderr[-2000:])
    shares = {}
    for line in p.stdout.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+\[\.\]\s+(.*?)\s*$", line)
        if m:
            shares[m.group(2)] = float(m.group(1))
    return shares


@unittest.skipUnless(have_tools(), "needs perf, clang++ 14 and llvm-xray 14")
class XrayRealTraces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pg-xray-")
        cls.buildid = os.path.join(cls.tmp, "buildid")
        os.mkdir(cls.buildid)
        cls.scen = {s["name"]: s for s in xray_ref.generate(os.path.join(cls.tmp, "traces"))}
        cls.out = {}
        cls.summary = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def convert(self, name, *extra, binary=True, tag=""):
        s = self.scen[name]
        out = os.path.join(self.tmp, name + tag + ".data")
        args = [PERFGRAFT, "xray", s["trace_path"], "-o", out] + list(extra)
        if binary:
            args += ["-b", s["binary_path"]]
        p = subprocess.run(args, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        return out, p.stderr

    def data(self, name):
        if name not in self.out:
            self.out[name], self.summary[name] = self.convert(name)
        return self.out[name]

    def events(self, name):
        return script_events(self.data(name), self.buildid)

    def test_counts_and_sums_equal_llvm_xray_account(self):
        compared = 0
        for name, s in self.scen.items():
            if s["expect"].get("header_only"):
                continue
            with self.subTest(scenario=name):
                # llvm-xray 14 cannot read maps with typed-event sleds: it
                # is then run without -m and the functions compared by ID
                unreadable = s["expect"].get("instr_map_unreadable_by_llvm_xray")
                ref = xray_ref.account(s["trace_path"], None if unreadable else s["binary_path"])
                got = account_from_events(self.events(name))
                self.assertEqual(sorted(ref), sorted(k for k, v in got.items() if v[0]),
                                 "functions with latencies")
                for fid, r in ref.items():
                    count, ns = got[fid]
                    self.assertEqual(count, r["count"], "count of #%d %s" % (fid, r["function"]))
                    # account prints %e: 7 significant digits
                    self.assertAlmostEqual(ns / 1e9, r["sum"], delta=max(r["sum"] * 1e-6, 1e-12),
                                           msg="sum of #%d %s" % (fid, r["function"]))
                    compared += 1
        self.assertGreater(compared, 30)

    def test_names_match_llvm_xray(self):
        for name, s in self.scen.items():
            if s["expect"].get("header_only") or s["expect"].get("instr_map_unreadable_by_llvm_xray"):
                continue
            with self.subTest(scenario=name):
                ref = xray_ref.account(s["trace_path"], s["binary_path"])
                names = {}
                for _tid, _t, kind, f, _r in self.events(name):
                    if kind in ("function_exit", "tail_exit"):
                        names[int(f["id"])] = f["name"]
                for fid, r in ref.items():
                    self.assertEqual(names.get(fid), r["function"], "#%d" % fid)

    def test_exclusive_shares_within_one_point(self):
        for name, s in self.scen.items():
            if s["expect"].get("header_only"):
                continue
            with self.subTest(scenario=name):
                evs = self.events(name)
                want = exclusive_shares(evs)
                if not want:
                    continue
                extra = ["--no-events"]
                if name != "fdr-workload":
                    # a grid fine enough for MIN_SAMPLES samples over the
                    # time the threads spent in instrumented code
                    freq = min(10**9, max(1, int(MIN_SAMPLES * 1e9 / max(busy_ns(evs), 1))))
                    extra += ["-F", str(freq)]
                data, _ = self.convert(name, *extra, tag=".samples")
                got = report_shares(data, self.buildid)
                for fn in set(want) | set(got):
                    self.assertLessEqual(abs(want.get(fn, 0) - got.get(fn, 0)), 1.0,
                                         "%s: events %.2f%%, perf report %.2f%%"
                                         % (fn, want.get(fn, 0), got.get(fn, 0)))

    def test_workload_default_frequency_children(self):
        """perf report --children: the outer functions' inclusive share."""
        data = self.data("fdr-workload")
        p = subprocess.run(["perf", "--buildid-dir", self.buildid, "report", "-i", data,
                            "--children", "--sort", "sym", "--stdio", "-g", "none",
                            "--percent-limit", "0"],
                           capture_output=True, text=True, errors="replace", timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        rows = {}
        section = p.stdout.split("of event 'xray-time'")[1].split("# Samples:")[0]
        for line in section.splitlines():
            m = re.match(r"\s+([\d.]+)%\s+([\d.]+)%\s+\[\.\]\s+(.*?)\s*$", line)
            if m:
                rows[m.group(3)] = (float(m.group(1)), float(m.group(2)))
        # inclusive and total time from the events: every interval between
        # two events of a thread counts for each function on its stack
        incl = collections.Counter()
        total = 0
        for _tid, dt, stk in intervals(self.events("fdr-workload")):
            total += dt
            for fn in set(stk):
                incl[strip_params(fn)] += dt
        self.assertEqual(set(incl), set(rows))
        for fn, ns in incl.items():
            self.assertLessEqual(abs(100.0 * ns / total - rows[fn][0]), 1.0,
                                 "%s: events %.2f%%, perf report %.2f%%"
                                 % (fn, 100.0 * ns / total, rows[fn][0]))

    def test_every_event_printed_and_decoded_by_libtraceevent(self):
        self.assertTrue(os.access(XRAY_TEP, os.X_OK), XRAY_TEP)
        for name, s in self.scen.items():
            if s["expect"].get("header_only"):
                continue
            with self.subTest(scenario=name):
                data = self.data(name)
                nevents = int(re.search(r"(\d+) events \(", self.summary[name]).group(1))
                evs = self.events(name)
                self.assertEqual(len(evs), nevents)
                for _tid, _t, kind, f, rest in evs:
                    want = {"function_entry": ("id", "depth"),
                            "function_exit": ("id", "depth", "duration", "flags"),
                            "tail_exit": ("id", "depth", "duration", "flags"),
                            "call_args": ("id", "index", "value"),
                            "custom_event": ("size", "data"),
                            "typed_event": ("type", "size", "data"),
                            "function": ("id", "addr", "name", "file", "line", "column")}[kind]
                    for field in want:
                        self.assertIn(field + "=", rest, kind)
                    # every function is named before its first event
                    if "id" in f and kind != "function":
                        self.assertIsNotNone(f["name"], "%s id=%s before its xray:function"
                                             % (kind, f["id"]))
                ids = [int(f["id"]) for _t, _s, k, f, _r in evs if k == "function"]
                self.assertEqual(len(ids), len(set(ids)), "an ID named twice")
                self.assertEqual(len(ids), int(re.search(r"(\d+) functions? named",
                                                         self.summary[name]).group(1)))
                p = subprocess.run([XRAY_TEP, data], capture_output=True, text=True,
                                   errors="replace", timeout=300)
                self.assertEqual(p.returncode, 0, p.stderr)
                lines = p.stdout.splitlines()
                self.assertEqual(len(lines), nevents)
                # libtraceevent's rendering of the print fmt is what perf
                # script printed, event for event
                mine = [ln.split(" | ", 1)[1].strip() for ln in lines]
                theirs = [rest.strip() for _tid, _t, _k, _f, rest in evs]
                self.assertEqual(mine, theirs)

    def test_arguments(self):
        s = self.scen["fdr-args"]
        evs = self.events("fdr-args")
        args = [(f["name"], int(f["value"], 16)) for _tid, _t, k, f, _r in evs if k == "call_args"]
        self.assertEqual([v for _n, v in args], s["expect"]["args"])
        self.assertEqual([n for n, _v in args], s["expect"]["arg_functions"])
        # the same values llvm-xray decodes
        ref = [r["args"][0] for r in xray_ref.yaml_records(s["trace_path"])
               if r["kind"] == "function-enter-arg"]
        self.assertEqual([v for _n, v in args], ref)
        basic = self.events("basic-threads")
        vals = sorted(int(f["value"], 16) for _tid, _t, k, f, _r in basic if k == "call_args")
        self.assertEqual(vals, self.scen["basic-threads"]["expect"]["args_sorted"])

    def test_custom_and_typed_events(self):
        for name in ("fdr-events", "fdr-typed3"):
            s = self.scen[name]
            evs = self.events(name)
            custom = [r for _tid, _t, k, _f, r in evs if k == "custom_event"]
            p = subprocess.run([XRAY_TEP, self.data(name)], capture_output=True, text=True)
            decoded = [dict(re.findall(r"(\w+)=(\S*)", ln.split(" | ")[0]))
                       for ln in p.stdout.splitlines()]
            cust = [bytes.fromhex(d["data"]).decode() for d in decoded if "event_type" not in d
                    and "size" in d and "data" in d]
            typed = [[int(d["event_type"]), bytes.fromhex(d["data"]).decode()]
                     for d in decoded if "event_type" in d]
            self.assertEqual(cust, s["expect"]["custom"], name)
            self.assertEqual(typed, s["expect"]["typed"], name)
            self.assertEqual(len(custom), len(s["expect"]["custom"]))
            # names from the binary although llvm-xray cannot read its map
            names = {f["name"] for _tid, _t, k, f, _r in evs if k == "function_entry"}
            self.assertEqual(names, set(s["expect"]["function_ids"]))

    def test_stack_recovery(self):
        evs = self.events("fdr-unbal")
        exp = self.scen["fdr-unbal"]["expect"]
        no_entry = [f["name"] for _t, _s, k, f, _r in evs
                    if k.endswith("exit") and "no_entry" in f.get("flags", "")]
        unfinished = [f["name"] for _t, _s, k, f, _r in evs
                      if k.endswith("exit") and "unfinished" in f.get("flags", "")]
        self.assertEqual(sorted(no_entry), sorted(exp["exits_without_entries"]))
        self.assertEqual(sorted(unfinished), sorted(exp["entries_without_exits"]))
        self.assertIn("2 exits without entry", self.summary["fdr-unbal"])
        # tail calls: TailExit of the caller, the callee entered at the same depth
        tail = [(f["name"], int(f["depth"])) for _t, _s, k, f, _r in self.events("fdr-tail")
                if k == "tail_exit"]
        self.assertEqual(sorted({n for n, _d in tail}),
                         sorted(self.scen["fdr-tail"]["expect"]["tail_exit_functions"]))
        # the ring kept exits whose entries were overwritten
        ring = self.events("fdr-ring")
        self.assertTrue(any("no_entry" in f.get("flags", "") for _t, _s, k, f, _r in ring
                            if k.endswith("exit")))

    def test_recursion_depths(self):
        evs = self.events("fdr-recursion")
        depth = max(int(f["depth"]) for _t, _s, k, f, _r in evs if k == "function_entry")
        self.assertGreaterEqual(depth, 15)
        # call chains as deep as the recursion reach perf
        data, _ = self.convert("fdr-recursion", "--no-events", "-F", "1000000000", tag=".deep")
        p = subprocess.run(["perf", "--buildid-dir", self.buildid, "script", "-i", data,
                            "-F", "ip,sym"], capture_output=True, text=True, timeout=300)
        chains = [re.findall(r"^\s*[0-9a-f]+ \S", c, re.M) for c in p.stdout.split("\n\n")]
        self.assertEqual(max(len(c) for c in chains), depth + 1)

    def test_threads_and_comm(self):
        data = self.data("fdr-threads")
        p = subprocess.run(["perf", "--buildid-dir", self.buildid, "script", "-i", data,
                            "-F", "comm,pid,tid,event"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [ln.split() for ln in p.stdout.splitlines() if "xray-time" in ln]
        self.assertTrue(rows)
        self.assertEqual({r[0] for r in rows}, {"threads"})
        self.assertEqual(len({r[1].split("/")[0] for r in rows}), 1)
        tids = {tid for tid, _t, _k, _f, _r in self.events("fdr-threads")}
        self.assertEqual(len(tids), self.scen["fdr-threads"]["expect"]["threads"])
        self.assertEqual({r[1].split("/")[1] for r in rows}, {str(t) for t in tids})

    def test_header_only_basic_file(self):
        out, err = self.convert("basic-empty", binary=True)
        self.assertIn("0 records", err)
        p = subprocess.run(["perf", "--buildid-dir", self.buildid, "report", "-i", out,
                            "--stdio"], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_without_binary_ids(self):
        out, _ = self.convert("fdr-recursion", binary=False, tag=".nobin")
        evs = script_events(out, self.buildid)
        ids = {f["name"] for _t, _s, k, f, _r in evs if k == "function_entry"}
        self.assertTrue(ids and all(re.fullmatch(r"#\d+", n) for n in ids), ids)
        ref = xray_ref.account(self.scen["fdr-recursion"]["trace_path"], None)
        self.assertEqual(sorted(int(n[1:]) for n in ids), sorted(ref))

    def test_pipe_mode_same_answers(self):
        s = self.scen["fdr-threads"]
        pipe_out = os.path.join(self.tmp, "pipe.data")
        with open(pipe_out, "wb") as f:
            p = subprocess.run([PERFGRAFT, "xray", "-q", s["trace_path"], "-b", s["binary_path"],
                                "-o", "-"], stdout=f, stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(pipe_out, "rb") as f:
            self.assertEqual(f.read(8), b"PERFILE2")
        with open(pipe_out, "rb") as f:
            q = subprocess.run(["perf", "--buildid-dir", self.buildid, "script", "-i", "-",
                                "--ns", "-F", "tid,time,event,trace"], stdin=f,
                               capture_output=True, text=True, errors="replace", timeout=300)
        self.assertEqual(q.returncode, 0, q.stderr[-2000:])
        piped = [ln for ln in q.stdout.splitlines() if "xray:" in ln]
        self.assertEqual(len(piped), len(self.events("fdr-threads")))

    def test_compressed_by_default_same_answers(self):
        """File output is zstd-compressed as perf record -z writes it; -z 0
        gives the same events uncompressed."""
        data = self.data("fdr-threads")
        plain, _ = self.convert("fdr-threads", "-z", "0", tag=".plain")
        dumps = {}
        for name, path in (("z", data), ("plain", plain)):
            p = subprocess.run([PERFGRAFT, "dump", "--json", path], capture_output=True,
                               text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            dumps[name] = json.loads(p.stdout)
        feats = lambda d: [f["name"] for f in d["features"]]
        self.assertIn("COMPRESSED", feats(dumps["z"]))
        self.assertNotIn("COMPRESSED", feats(dumps["plain"]))
        self.assertTrue(all(r.get("compressed") for r in dumps["z"]["records"]))
        self.assertLess(os.path.getsize(data), os.path.getsize(plain) / 3)
        self.assertEqual(script_events(data, self.buildid), script_events(plain, self.buildid))

    def test_functions_match_llvm_xray_extract(self):
        """IDs and addresses of the instrumentation map, PIE and non-PIE."""
        cxx = shutil.which("clang++-14") or shutil.which("clang++")
        src = os.path.join(HERE, "xray", "recursion.cc")
        bins = [self.scen["fdr-threads"]["binary_path"]]
        nopie = os.path.join(self.tmp, "recursion-nopie")
        subprocess.run([cxx, "-O1", "-fxray-instrument", "-fxray-instruction-threshold=1",
                        "-no-pie", "-I", os.path.join(HERE, "xray"), src, "-o", nopie,
                        "-lpthread"], check=True, timeout=300)
        bins.append(nopie)
        for b in bins:
            with self.subTest(binary=os.path.basename(b)):
                ref = xray_ref.extract(b)
                self.assertTrue(ref)
                p = subprocess.run([PERFGRAFT, "xray", "--functions", "-b", b],
                                   capture_output=True, text=True, check=True)
                mine = {}
                for line in p.stdout.splitlines()[1:]:
                    fid, addr = line.split()[:2]
                    mine[int(fid)] = int(addr, 16)
                want = {}
                for e in ref:
                    want.setdefault(int(e["id"]), int(str(e["function"]), 0))
                self.assertEqual(mine, want)


if __name__ == "__main__":
    unittest.main()
