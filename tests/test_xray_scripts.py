"""perf-scripts/xray-account.py and the plugin_xray.so traceevent plugin on
real LLVM 14 XRay traces converted by `perfgraft xray`.

(a) `perf script -s xray-account.py` prints, for every function, the same
    count, min, med, 90p, 99p, max and sum as `llvm-xray account -k -d` on
    the same trace (through the YAML route: convert -f yaml, version set to
    1, account on the YAML, because account on a raw multi-threaded trace is
    unreliable), in text mode (6 decimals) and CSV mode (%e), to the
    character; names included.
(b) With TRACEEVENT_PLUGIN_DIR=<build dir>/src/xray, perf script prints every
    xray:function_entry/function_exit/tail_exit event as an indented
    call-graph line; without it, the events' print fmt (id=... depth=...).
(c) CSV mode and the sort/order/top options behave like account's.

The traces come from tests/gen-xray-traces.sh (all its scenarios); when
that script is missing or fails, from a small program built here.
Everything happens in a temporary directory; perf gets --buildid-dir."""
import csv
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
BUILD = os.environ.get("PERFGRAFT_BUILD",
                       os.path.dirname(os.path.abspath(PERFGRAFT)))
SCRIPT = os.path.join(ROOT, "perf-scripts", "xray-account.py")
GEN = os.path.join(HERE, "gen-xray-traces.sh")

SORT_KEYS = ("funcid", "count", "min", "med", "90p", "99p", "max", "sum")
# CSV column of each sort key (account's CSV header)
CSV_COL = {"funcid": "funcid", "count": "count", "min": "min",
           "med": "median", "90p": "90%ile", "99p": "99%ile", "max": "max",
           "sum": "sum"}
CSV_HEADER = "funcid,count,min,median,90%ile,99%ile,max,sum,debug,function"
TEXT_HEADER = ("   funcid      count [      min,       med,       90p,       "
               "99p,       max]       sum  function    ")
TEXT_ROW = re.compile(
    r"^\s*(\d+)\s+(\d+) \[\s*([\d.]+),\s+([\d.]+),\s+([\d.]+),\s+([\d.]+),"
    r"\s+([\d.]+)\]\s+([\d.]+)  (.*?): (.*)$")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", **kw)


def find_llvm_xray():
    cands = [os.environ.get("LLVM_XRAY"), "llvm-xray-14",
             "/usr/lib/llvm-14/bin/llvm-xray", "llvm-xray"]
    for c in cands:
        if c and shutil.which(c):
            return shutil.which(c)
    return None


def find_clangxx():
    for c in (os.environ.get("CLANGXX"), "clang++-14",
              "/usr/lib/llvm-14/bin/clang++", "clang++"):
        if c and shutil.which(c):
            return shutil.which(c)
    return None


LLVM_XRAY = find_llvm_xray()
CLANGXX = find_clangxx()

# A program of our own, always built: threads, recursion, a log-args
# function and exceptions (the unwinder skips the exit sleds of the frames it
# removes, so their exits are lost: the frames are closed later by their
# caller's exit, "inferred" in perfgraft and what account -d deduces); FDR
# mode with every call recorded.  It is the only trace when
# gen-xray-traces.sh is missing or fails.
OWN_CC = r"""
#include <pthread.h>
#include <stdio.h>
#include <xray/xray_interface.h>
#include <xray/xray_log_interface.h>
#define NOINLINE __attribute__((noinline))
static volatile unsigned long sink;
NOINLINE void leaf(int i) { sink += i; }
NOINLINE int rec(int n) { if (n > 0) { leaf(n); return rec(n - 1) + 1; } return 0; }
[[clang::xray_always_instrument, clang::xray_log_args(1)]] NOINLINE void logged(long v) { sink += v; }
NOINLINE void thrower(int i) { if (i % 4 == 0) throw i; sink += i; }
NOINLINE void mid_throw(int i) { thrower(i); sink++; }
NOINLINE int catcher(int n) {
    int c = 0;
    for (int i = 0; i < n; i++) {
        try { mid_throw(i); } catch (int) { c++; }
    }
    return c;
}
NOINLINE void *worker(void *p) {
    for (int i = 0; i < 20; i++) rec(5 + i % 3);
    logged((long)p);
    sink += catcher(10);
    return nullptr;
}
[[clang::xray_never_instrument]] int main() {
    if (__xray_log_init_mode("xray-fdr", "func_duration_threshold_us=0") != XRAY_LOG_INITIALIZED)
        return 1;
    __xray_patch();
    pthread_t t[3];
    for (long i = 0; i < 3; i++) pthread_create(&t[i], nullptr, worker, (void *)(i + 1));
    worker(nullptr);
    for (auto &th : t) pthread_join(th, nullptr);
    __xray_log_finalize();
    __xray_log_flushLog();
    return 0;
}
"""


def parse_text(out):
    """account's text table -> (count line, header, {funcid: (row fields)})"""
    lines = out.splitlines()
    rows = {}
    for ln in lines[2:]:
        m = TEXT_ROW.match(ln)
        if not m:
            raise AssertionError("unparsable row %r" % ln)
        g = m.groups()
        rows[int(g[0])] = (g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[9])
    return lines[0], lines[1] if len(lines) > 1 else "", rows


def parse_csv(out):
    """account's CSV -> (header, [row dicts] in printed order)"""
    rd = csv.reader(io.StringIO(out))
    hdr = next(rd)
    return ",".join(hdr), [dict(zip(hdr, r)) for r in rd]


def csv_key(row):
    """A CSV row without its debug column (which the script cannot know)."""
    return tuple(row[k] for k in CSV_HEADER.split(",") if k != "debug")


@unittest.skipIf(shutil.which("perf") is None, "perf is not installed")
@unittest.skipIf(LLVM_XRAY is None, "llvm-xray is not installed")
@unittest.skipIf(CLANGXX is None, "clang++ is not installed")
class XrayScripts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="pg-xray-scripts-")
        cls.addClassCleanup(cls.tmp.cleanup)
        t = cls.tmp.name
        cls.perf = ["perf", "--buildid-dir", os.path.join(t, "debug")]
        cls.env = dict(os.environ)
        cls.env.pop("TRACEEVENT_PLUGIN_DIR", None)
        cls.env["PYTHONDONTWRITEBYTECODE"] = "1"
        cls.gen_error = None
        cls.scenarios = cls.generated(os.path.join(t, "gen"))
        if cls.scenarios:
            cls.source = "tests/gen-xray-traces.sh + own program"
        else:
            cls.scenarios = []
            cls.source = "own program only (gen-xray-traces.sh: %s)" % (
                cls.gen_error or "missing")
        cls.scenarios += cls.own_program(os.path.join(t, "own"))
        # convert every usable scenario
        cls.cases = []
        for sc in cls.scenarios:
            data = os.path.join(t, sc["name"] + ".data")
            cmd = [PERFGRAFT, "xray", sc["trace_path"], "-o", data]
            if sc["llvm_binary"]:
                cmd += ["--binary", sc["binary_path"]]
            r = run(cmd, cwd=t)
            if r.returncode != 0:
                raise AssertionError("%s: perfgraft xray failed: %s" % (
                    sc["name"], r.stderr))
            sc["data"] = data
            sc["summary"] = r.stderr
            cls.cases.append(sc)

    # ---- traces -----------------------------------------------------------
    @classmethod
    def generated(cls, outdir):
        if not os.path.isfile(GEN):
            return None
        env = dict(os.environ)
        env.pop("TMPDIR", None)
        r = run(["bash", GEN, outdir], env=env, timeout=600)
        js = os.path.join(outdir, "scenarios.json")
        if r.returncode != 0 or not os.path.isfile(js):
            cls.gen_error = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
            return None
        with open(js) as f:
            scen = json.load(f)
        out = []
        for sc in scen:
            exp = sc.get("expect", {})
            if exp.get("llvm_xray_fails") or exp.get("header_only"):
                continue            # llvm-xray cannot read it: nothing to compare
            out.append({
                "name": sc["name"],
                "trace_path": os.path.join(outdir, sc["trace"]),
                "binary_path": os.path.join(outdir, sc["binary"]),
                # with a kind-5 (typed event) sled, llvm-xray cannot read the
                # map: compare unnamed functions ("#ID") on both sides
                "llvm_binary": not exp.get("instr_map_unreadable_by_llvm_xray"),
                "expect": exp,
            })
        return out

    @classmethod
    def own_program(cls, d):
        os.makedirs(d)
        src = os.path.join(d, "prog.cc")
        exe = os.path.join(d, "prog")
        with open(src, "w") as f:
            f.write(OWN_CC)
        r = run([CLANGXX, "-O1", "-fxray-instrument",
                 "-fxray-instruction-threshold=1", src, "-o", exe, "-lpthread"])
        if r.returncode != 0:
            raise AssertionError("building the test program failed: %s" % r.stderr)
        logs = os.path.join(d, "logs")
        os.makedirs(logs)
        env = dict(os.environ, XRAY_OPTIONS="xray_mode=xray-fdr xray_logfile_base=%s/x-" % logs)
        r = run([exe], env=env, cwd=d, timeout=120)
        files = os.listdir(logs)
        if r.returncode != 0 or len(files) != 1:
            raise AssertionError("running the test program failed (%d, %s): %s"
                                 % (r.returncode, files, r.stderr))
        return [{"name": "own-program", "trace_path": os.path.join(logs, files[0]),
                 "binary_path": exe, "llvm_binary": True, "expect": {}}]

    # ---- tools ------------------------------------------------------------
    def account_script(self, sc, *args):
        r = run(self.perf + ["script", "-i", sc["data"], "-s", SCRIPT, "--"] + list(args),
                cwd=self.tmp.name, env=self.env)
        self.assertEqual(r.returncode, 0, "%s: %s" % (sc["name"], r.stderr))
        return r.stdout

    def yaml_of(self, sc):
        y = os.path.join(self.tmp.name, sc["name"] + ".yaml")
        if not os.path.isfile(y):
            r = run([LLVM_XRAY, "convert", "-f", "yaml", sc["trace_path"]])
            self.assertEqual(r.returncode, 0, "%s: llvm-xray convert: %s" % (sc["name"], r.stderr))
            text, n = re.subn(r"^(  version:\s+)\d+$", r"\g<1>1", r.stdout, count=1, flags=re.M)
            self.assertEqual(n, 1, "%s: no version in the YAML header" % sc["name"])
            with open(y, "w") as f:
                f.write(text)
        return y

    _account_cache = {}

    def account_llvm(self, sc, *args):
        cmd = [LLVM_XRAY, "account", "-k", "-d"] + list(args)
        if sc["llvm_binary"]:
            cmd += ["-m", sc["binary_path"]]
        cmd.append(self.yaml_of(sc))
        key = tuple(cmd)
        if key not in self._account_cache:
            r = run(cmd)
            self.assertEqual(r.returncode, 0, "%s: llvm-xray account: %s" % (
                sc["name"], r.stderr))
            self._account_cache[key] = r.stdout
        return self._account_cache[key]

    # ---- (a) the table matches llvm-xray account ------------------------------
    def test_a_text_table_matches_account(self):
        compared = 0
        for sc in self.cases:
            with self.subTest(scenario=sc["name"]):
                mine = self.account_script(sc)
                ref = self.account_llvm(sc)
                m_count, m_hdr, m_rows = parse_text(mine)
                r_count, r_hdr, r_rows = parse_text(ref)
                self.assertEqual(m_hdr, TEXT_HEADER)
                self.assertEqual(r_hdr, TEXT_HEADER)
                self.assertEqual(m_count, r_count)
                self.assertEqual(sorted(m_rows), sorted(r_rows))
                for fid in r_rows:
                    self.assertEqual(m_rows[fid], r_rows[fid],
                                     "%s: function %d" % (sc["name"], fid))
                # default order: by function id
                order = [int(ln.split()[0]) for ln in mine.splitlines()[2:]]
                self.assertEqual(order, sorted(order))
                compared += len(r_rows)
        self.assertGreater(compared, 0)
        print("\n  xray-account text: %d functions in %d scenarios (%s) match "
              "llvm-xray account" % (compared, len(self.cases), self.source))

    def test_a_csv_matches_account(self):
        compared = 0
        for sc in self.cases:
            with self.subTest(scenario=sc["name"]):
                m_hdr, mine = parse_csv(self.account_script(sc, "-f", "csv"))
                r_hdr, ref = parse_csv(self.account_llvm(sc, "-f", "csv"))
                self.assertEqual(m_hdr, CSV_HEADER)
                self.assertEqual(r_hdr, CSV_HEADER)
                self.assertEqual([csv_key(r) for r in mine], [csv_key(r) for r in ref])
                # the debug column: the xray:function events' file:line:column
                self.assertEqual([r["debug"] for r in mine], [r["debug"] for r in ref])
                compared += len(ref)
        self.assertGreater(compared, 0)
        print("\n  xray-account csv: %d functions (all %%e values) match llvm-xray "
              "account" % compared)

    def test_a_unnamed_functions(self):
        # without --binary every name is "#ID", as account prints without -m
        sc = dict(self.cases[0])
        sc["data"] = os.path.join(self.tmp.name, "unnamed.data")
        sc["llvm_binary"] = False
        r = run([PERFGRAFT, "xray", sc["trace_path"], "-o", sc["data"]], cwd=self.tmp.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        _, mine = parse_csv(self.account_script(sc, "-f", "csv"))
        _, ref = parse_csv(self.account_llvm(sc, "-f", "csv"))
        self.assertTrue(mine)
        self.assertTrue(all(re.fullmatch(r"#\d+", r["function"]) for r in mine))
        self.assertEqual([csv_key(r) for r in mine], [csv_key(r) for r in ref])

    # ---- (b) the plugin ---------------------------------------------------------
    ENTRY_DEF = re.compile(r" xray:function_entry: id=(\d+) depth=(\d+)$")
    EXIT_DEF = re.compile(r" xray:(function_exit|tail_exit): id=(\d+) "
                          r"depth=(\d+) duration=(\d+) flags=(\S*)$")
    FUNC_DEF = re.compile(r" xray:function: id=(\d+) addr=0x[0-9a-f]+ name=(.*) "
                          r"file=(.*) line=(\d+) column=(\d+)$")
    ENTRY_PLUG = re.compile(r" xray:function_entry: ( *)(\S.*) \{$")
    EXIT_PLUG = re.compile(r" xray:(function_exit|tail_exit): ( *)\} /\* (.*) \*/$")
    FUNC_PLUG = re.compile(r" xray:function: #(\d+) = (.*?)(?: at (.*):(\d+):(\d+))?$")
    EVENT = re.compile(r" xray:(function_entry|function_exit|tail_exit|function): ")

    def perf_script(self, data, plugin_dir=None):
        env = dict(self.env)
        if plugin_dir:
            env["TRACEEVENT_PLUGIN_DIR"] = plugin_dir
        r = run(self.perf + ["script", "-i", data], cwd=self.tmp.name, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        # no "could not load plugin" and the like
        self.assertNotIn("plugin", r.stderr)
        return [ln for ln in r.stdout.splitlines() if self.EVENT.search(ln)]

    def plugin_dir(self):
        """A directory holding only the plugin of the build dir (its own
        build directory, src/xray/, holds it alone too; test_install.py
        checks that perf takes that one as it is)."""
        plugin = os.path.join(BUILD, "src", "xray", "plugin_xray.so")
        if not os.path.isfile(plugin):
            if os.path.isfile(os.path.join(BUILD, "build.ninja")):
                self.fail("%s was not built" % plugin)
            self.skipTest("no plugin_xray.so next to %s" % PERFGRAFT)
        d = os.path.join(self.tmp.name, "plugins")
        if not os.path.isdir(d):
            os.mkdir(d)
            os.symlink(plugin, os.path.join(d, "plugin_xray.so"))
        return d

    @staticmethod
    def expected_exit_text(name, duration, flags, tail):
        fl = set(flags.split("|")) if flags else set()
        text = name
        if "no_entry" not in fl:
            text += " %d.%03d us" % (duration // 1000, duration % 1000)
        if tail:
            text += ", tail call"
        for f, label in (("inferred", "inferred"), ("unfinished", "unfinished"),
                         ("no_entry", "no entry")):
            if f in fl:
                text += " [%s]" % label
        return text

    def test_b_plugin_prints_call_graph(self):
        plugins = self.plugin_dir()
        seen = {"function": 0, "entry": 0, "exit": 0, "tail": 0, "inferred": 0,
                "unfinished": 0, "no entry": 0}
        for sc in self.cases:
            with self.subTest(scenario=sc["name"]):
                plain = self.perf_script(sc["data"])
                graph = self.perf_script(sc["data"], plugins)
                # the number of events perfgraft reported writing
                m = re.search(r"\((\d+) entries, (\d+) exits, (\d+) tail exits", sc["summary"])
                self.assertTrue(m, sc["summary"])
                n_ent, n_exit, n_tail = map(int, m.groups())
                self.assertEqual(len(plain), len(graph))
                kinds = [self.EVENT.search(ln).group(1) for ln in plain]
                self.assertEqual(kinds.count("function_entry"), n_ent)
                # exits: the trace's own, plus the ones perfgraft adds to close
                # frames whose exit was lost (inferred) or never came
                # (unfinished)
                own = 0
                for ln in plain:
                    md = self.EXIT_DEF.search(ln)
                    if md and not {"inferred", "unfinished"} & set(md.group(5).split("|")):
                        own += 1
                self.assertEqual(own, n_exit + n_tail)
                self.assertLessEqual(kinds.count("tail_exit"), n_tail)
                names = {}
                for p, g in zip(plain, graph):
                    # the prefix (comm, pid, cpu, time, event) is unchanged
                    self.assertEqual(p[:self.EVENT.search(p).end()],
                                     g[:self.EVENT.search(g).end()])
                    md = self.FUNC_DEF.search(p)
                    if md:
                        # named once, before the first event with the ID
                        fid, name, file, line, col = md.groups()
                        self.assertNotIn(int(fid), names)
                        names[int(fid)] = name
                        mg = self.FUNC_PLUG.search(g)
                        self.assertTrue(mg, g)
                        self.assertEqual((mg.group(1), mg.group(2)), (fid, name))
                        if file:
                            self.assertEqual(mg.group(3, 4, 5), (file, line, col))
                        else:
                            self.assertIsNone(mg.group(3))
                        seen["function"] += 1
                        continue
                    md = self.ENTRY_DEF.search(p)
                    if md:
                        fid, depth = int(md.group(1)), int(md.group(2))
                        self.assertIn(fid, names, p)
                        name = names[fid]
                        mg = self.ENTRY_PLUG.search(g)
                        self.assertTrue(mg, g)
                        self.assertEqual(len(mg.group(1)), 2 * min(depth, 200), g)
                        want = name if "(" in name else name + "()"
                        self.assertEqual(mg.group(2), want)
                        self.assertTrue(name == "#%d" % fid or not name.startswith("#"))
                        seen["entry"] += 1
                        continue
                    md = self.EXIT_DEF.search(p)
                    self.assertTrue(md, p)
                    kind, fid, depth, dur, flags = md.groups()
                    self.assertIn(int(fid), names, p)
                    name = names[int(fid)]
                    mg = self.EXIT_PLUG.search(g)
                    self.assertTrue(mg, g)
                    self.assertEqual(mg.group(1), kind)
                    self.assertEqual(len(mg.group(2)), 2 * min(int(depth), 200), g)
                    self.assertEqual(mg.group(3), self.expected_exit_text(
                        name, int(dur), flags, kind == "tail_exit"))
                    seen["tail" if kind == "tail_exit" else "exit"] += 1
                    for f in ("inferred", "unfinished", "no entry"):
                        if "[%s]" % f in mg.group(3):
                            seen[f] += 1
        print("\n  plugin_xray: %s" % ", ".join("%d %s" % (v, k) for k, v in seen.items()))
        self.assertGreater(seen["function"], 0)
        self.assertGreater(seen["entry"], 0)
        self.assertGreater(seen["exit"], 0)
        # the exceptions of our own program lose exits
        self.assertGreater(seen["inferred"], 0)
        if self.source.startswith("tests/gen-xray-traces.sh"):
            # fdr-tail has tail exits, fdr-unbal exits without entries and
            # frames never exited
            self.assertGreater(seen["tail"], 0)
            self.assertGreater(seen["no entry"], 0)
            self.assertGreater(seen["unfinished"], 0)

    def test_b_default_print_without_plugin(self):
        lines = self.perf_script(self.cases[0]["data"])
        self.assertTrue(lines)
        for ln in lines:
            self.assertTrue(self.ENTRY_DEF.search(ln) or self.EXIT_DEF.search(ln) or
                            self.FUNC_DEF.search(ln), ln)

    # ---- (c) CSV, sort, order, top ----------------------------------------------
    def test_c_sort_options(self):
        # a small trace with several functions (account on a big YAML file
        # takes seconds, and this runs it 32 times)
        nfunc = {s["name"]: len(parse_csv(self.account_llvm(s, "-f", "csv"))[1])
                 for s in self.cases}
        most = max(nfunc.values())
        sc = min(self.cases, key=lambda s: (nfunc[s["name"]] < min(5, most),
                                            os.path.getsize(s["trace_path"])))
        _, everything = parse_csv(self.account_llvm(sc, "-f", "csv"))
        all_rows = {csv_key(r) for r in everything}
        n = len(everything)
        self.assertGreaterEqual(n, 3, sc["name"])
        for key in SORT_KEYS:
            for order in ("asc", "dsc"):
                for top in (None, 2):
                    opts = ["-f", "csv", "-s", key, "-r", order]
                    if top:
                        opts += ["-p", str(top)]
                    with self.subTest(scenario=sc["name"], opts=" ".join(opts)):
                        _, mine = parse_csv(self.account_script(sc, *opts))
                        _, ref = parse_csv(self.account_llvm(sc, *opts))
                        self.assertEqual(len(mine), top or n)
                        self.assertEqual(len(mine), len(ref))
                        col = CSV_COL[key]
                        # ties may come in any order in account (std::sort)
                        self.assertEqual([r[col] for r in mine], [r[col] for r in ref])
                        vals = [float(r[col]) for r in mine]
                        self.assertEqual(vals, sorted(vals, reverse=order == "dsc"))
                        for r in mine:
                            self.assertIn(csv_key(r), all_rows)
        # text mode honours the options too; the count line is not cut by -p
        text = self.account_script(sc, "-s", "count", "-r", "dsc", "-p", "1")
        count, hdr, rows = parse_text(text)
        self.assertEqual(count, "Functions with latencies: %d" % n)
        self.assertEqual(len(rows), 1)
        top_count = max(int(r["count"]) for r in everything)
        self.assertEqual(int(list(rows.values())[0][0]), top_count)
        # -s func (not implemented by account) sorts by name
        _, by_name = parse_csv(self.account_script(sc, "-f", "csv", "-s", "func"))
        self.assertEqual([r["function"] for r in by_name],
                         sorted(r["function"] for r in by_name))

    def test_c_bad_option(self):
        sc = self.cases[0]
        r = run(self.perf + ["script", "-i", sc["data"], "-s", SCRIPT, "--", "-s", "bogus"],
                cwd=self.tmp.name, env=self.env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("invalid choice", r.stderr)

    def test_c_output_file(self):
        sc = self.cases[0]
        out = os.path.join(self.tmp.name, "table.csv")
        printed = self.account_script(sc, "-f", "csv", "-o", out)
        self.assertEqual(printed, "")
        with open(out) as f:
            self.assertEqual(f.read(), self.account_script(sc, "-f", "csv"))


if __name__ == "__main__":
    unittest.main()
