"""Issue 25, points 9 and 10: one grammar every command follows, and
errors that point the right way.

9. inputs: every command takes its input as an argument and as -i FILE,
   and - as standard input, a pipe sniffed like a file (cat jit.dump |
   perfgraft dump - prints the dump); outputs: -o FILE and -o - on the
   commands that print, --json and --format=json|text alike; --pid filters
   (perf's meaning): gperf's pid setter is --set-pid, --pid still sets it
   with a deprecation warning; -V/--version/version; perfgraft help CMD
   opens perfgraft-CMD(1) (the build tree's page before an install, the
   usage where man is missing); bash completion of commands, options,
   option values and files.
10. a directory is "is a directory" for every command; any of perfgraft's
   formats given to the wrong command is named, with the command that
   reads it (xray on a gperftools profile); inject --jitdump of a pid the
   recording has nothing of warns, naming the pids it has.

Inputs: the committed fixtures (a V8 jitdump and node's, perf record's
demo.data, real aarch64 XRay traces) and generated ones (a gperftools
profile, a gzip'd pprof-like protobuf, a pipe-mode perf.data written by
perfgraft inject -o -).  Everything runs in a temporary directory; inject
gets -N (no build-id cache)."""
import gzip
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

import gperf_gen  # noqa: E402

ROOT = os.path.dirname(HERE)
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
FIX = os.path.join(HERE, "fixtures")
V8_DUMP = os.path.join(FIX, "perf", "jit-19989.dump")
NODE_DUMP = os.path.join(FIX, "node", "node-interp.dump")
DEMO = os.path.join(FIX, "perf", "demo.data")
XRAY_FDR = os.path.join(FIX, "xray-aarch64", "prog-fdr.xray")
XRAY_BASIC = os.path.join(FIX, "xray-aarch64", "prog-basic.xray")
XRAY_OBJ = os.path.join(FIX, "xray-aarch64", "prog.o")
COMPLETION = os.path.join(ROOT, "completion", "perfgraft.bash")
TIMEOUT = 300


def run(args, stdin=None, cwd=None, env=None, inp=None):
    return subprocess.run([PERFGRAFT] + args, input=inp,
                          stdin=stdin if inp is None else None,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=cwd, env=env, timeout=TIMEOUT)


class Grammar(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="pg-grammar-")
        cls.d = cls._tmp.name
        cls.prof = cls.write("prog.prof", gperf_gen.build(
            "p", records=gperf_gen.base_stacks(), maps=gperf_gen.base_maps()).data)
        # pprof's output: a gzip'd protobuf whose first field is
        # sample_type (1), a ValueType message (type = 1, unit = 2)
        cls.pprof = cls.write("cpu.pb.gz", gzip.compress(
            b"\x0a\x04\x08\x01\x10\x02" + b"\x12\x04\x08\x01\x10\x02" + bytes(32)))
        cls.zipped_dump = cls.write("jit.dump.gz", gzip.compress(cls.read(V8_DUMP)))
        cls.empty_dir = os.path.join(cls.d, "adir")
        os.mkdir(cls.empty_dir)
        # a pipe-mode recording: demo.data through inject -o -
        r = run(["inject", "-q", "-N", "-i", DEMO, "-o", "-", "--jitdump", V8_DUMP,
                 "--image-dir", os.path.join(cls.d, "pipe-images")], cwd=cls.d)
        if r.returncode != 0:
            raise AssertionError("inject -o -: %s" % r.stderr.decode())
        cls.pipe_data = cls.write("pipe.data", r.stdout)
        addr = json.loads(run(["dump", "--json", NODE_DUMP]).stdout)
        cls.addr = "0x%x" % next(rec["code_addr"] for rec in addr["records"]
                                 if rec["type"] == "LOAD")

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    @classmethod
    def write(cls, name, data):
        p = os.path.join(cls.d, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    @staticmethod
    def read(path):
        with open(path, "rb") as f:
            return f.read()

    def ok(self, r, what=""):
        self.assertEqual(r.returncode, 0, "%s: %s" % (what, r.stderr.decode()))
        return r

    def fresh(self, name):
        d = os.path.join(self.d, name)
        shutil.rmtree(d, ignore_errors=True)
        os.mkdir(d)
        return d

    # ---- 9: inputs -------------------------------------------------------
    def test_9_input_option_and_argument(self):
        """-i FILE and the argument give the same result in every command
        (gperf, xray and dump refused -i)"""
        for args in (["dump", "%s"], ["symbolize", "%s", self.addr], ["perf-map", "-o", "-", "%s"]):
            pos = [NODE_DUMP if a == "%s" else a for a in args]
            opt = [a for a in args if a != "%s"] + ["-i", NODE_DUMP]
            with self.subTest(cmd=args[0]):
                a = self.ok(run(pos), " ".join(pos)).stdout
                b = self.ok(run(opt), " ".join(opt)).stdout
                self.assertEqual(a, b)
        for cmd, inp, extra in (("gperf", self.prof, []), ("xray", XRAY_FDR, []),
                                ("inject", DEMO, ["-N", "--jitdump", V8_DUMP])):
            with self.subTest(cmd=cmd):
                d = self.fresh("in-" + cmd)
                self.ok(run([cmd, inp, "-o", "a.data"] + extra, cwd=d), cmd)
                self.ok(run([cmd, "-i", inp, "-o", "b.data"] + extra, cwd=d), cmd + " -i")
                # the records, without the header's file offsets and times
                da = self.ok(run(["dump", os.path.join(d, "a.data")])).stdout
                db = self.ok(run(["dump", os.path.join(d, "b.data")])).stdout
                strip = lambda s: re.sub(rb"\S+\.data\.d/", b"", s.split(b"    offset", 1)[-1])
                self.assertEqual(strip(da), strip(db))
        d = self.fresh("in-elf")
        a = self.ok(run(["elf", "-o", "a", "--list", V8_DUMP], cwd=d)).stdout
        b = self.ok(run(["elf", "-o", "b", "--list", "-i", V8_DUMP], cwd=d)).stdout
        self.assertEqual(a, b)
        # and every command's --help says so
        for cmd in ("dump", "elf", "gperf", "inject", "perf-map", "symbolize", "xray"):
            with self.subTest(help=cmd):
                self.assertIn(b"-i, --input", self.ok(run([cmd, "--help"])).stdout)

    def test_9_stdin_everywhere(self):
        """- is standard input in every command, a pipe sniffed like a file
        (gperf, xray and elf said "No such file"; cat jit.dump | dump -
        said "not a perf.data file")"""
        def piped(args, path):
            with open(path, "rb") as f:
                return run(args, inp=f.read(), cwd=d)

        d = self.fresh("stdin")
        # dump: each format through a pipe prints what the file prints
        for path in (V8_DUMP, DEMO, self.pipe_data, XRAY_FDR, self.prof):
            with self.subTest(dump=os.path.basename(path)):
                want = self.ok(run(["dump", "--json", path])).stdout
                got = self.ok(piped(["dump", "--json", "-"], path), "dump -").stdout
                # the name in warnings: the path, or <stdin> whatever the
                # format (the readers open /dev/stdin: never shown)
                self.assertNotIn(b"/dev/stdin", got)
                want = want.replace(path.encode(), b"IN")
                got = got.replace(b"<stdin>", b"IN")
                a, b = json.loads(want), json.loads(got)
                a.pop("file")
                self.assertEqual(b.pop("file"), "-")
                self.assertEqual(a, b)
        # a warning and the summary of a converter name it so too
        cut = open(V8_DUMP, "rb").read()
        cut = cut[:len(cut) - 100]
        r = run(["elf", "-o", "cut-imgs", "-"], inp=cut, cwd=d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"perfgraft: warning: <stdin>: offset ", r.stderr)
        self.assertIn(b"perfgraft: <stdin>: ", r.stderr)
        self.assertNotIn(b"/dev/stdin", r.stderr)
        # the converters
        self.ok(piped(["gperf", "-", "-o", "g.data"], self.prof), "gperf -")
        self.ok(piped(["xray", "-", "-o", "x.data"], XRAY_FDR), "xray -")
        self.ok(piped(["elf", "-o", "imgs", "-"], V8_DUMP), "elf -")
        self.assertTrue(any(n.endswith(".so") for n in os.listdir(os.path.join(d, "imgs"))))
        want = self.ok(run(["perf-map", "-o", "-", NODE_DUMP])).stdout
        self.assertEqual(self.ok(piped(["perf-map", "-o", "-", "-"], NODE_DUMP)).stdout, want)
        want = self.ok(run(["symbolize", NODE_DUMP, self.addr])).stdout
        self.assertEqual(self.ok(piped(["symbolize", "-", self.addr], NODE_DUMP)).stdout, want)
        # inject: a pipe-mode recording stays a stream; a file-mode one in
        # a pipe is read from a temporary copy
        for name, path in (("pipe", self.pipe_data), ("file", DEMO)):
            with self.subTest(inject=name):
                r = self.ok(piped(["inject", "-N", "-", "-o", name + ".jit.data",
                                   "--jitdump", V8_DUMP], path), "inject -")
                self.assertIn(b"1 jitdump", r.stderr)
        # standard input once only
        r = piped(["xray", "-", "-", "-o", "y.data"], XRAY_FDR)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"standard input (-) can be read only once", r.stderr)

    # ---- 9: outputs and formats --------------------------------------------
    def test_9_json_and_format(self):
        """--json and --format=json|text on every command that prints data
        (dump --format=json and symbolize --json were unknown)"""
        for args in (["dump", V8_DUMP], ["symbolize", NODE_DUMP, self.addr],
                     ["xray", "--functions", "-b", XRAY_OBJ]):
            with self.subTest(cmd=args[0]):
                a = self.ok(run(args + ["--json"])).stdout
                b = self.ok(run(args + ["--format=json"])).stdout
                c = self.ok(run(args + ["--format", "text"])).stdout
                self.assertEqual(a, b)
                json.loads(a)
                self.assertEqual(c, self.ok(run(args)).stdout)
        d = self.fresh("fmt-elf")
        lst = json.loads(self.ok(run(["elf", "-o", "i", "--list", "--json", V8_DUMP], cwd=d)).stdout)
        text = self.ok(run(["elf", "-o", "j", "--list", V8_DUMP], cwd=d)).stdout.decode()
        self.assertEqual(len(lst), len(text.splitlines()))
        self.assertEqual(lst[0]["code_addr"], int(text.split("\t")[1], 16))
        funcs = json.loads(self.ok(run(["xray", "--functions", "-b", XRAY_OBJ, "--json"])).stdout)
        text = self.ok(run(["xray", "--functions", "-b", XRAY_OBJ])).stdout.decode().splitlines()
        self.assertEqual([f["id"] for f in funcs], [int(ln.split()[0]) for ln in text[1:]])
        r = run(["dump", "--format=yaml", V8_DUMP])
        self.assertEqual(r.returncode, 2)

    def test_9_output_file(self):
        """-o FILE and -o - where the output is a stream (dump and symbolize
        printed only to stdout)"""
        d = self.fresh("out")
        for args in (["dump", V8_DUMP], ["dump", "--json", DEMO],
                     ["symbolize", NODE_DUMP, self.addr]):
            with self.subTest(args=args[:2]):
                want = self.ok(run(args)).stdout
                out = os.path.join(d, "out.txt")
                r = self.ok(run(args + ["-o", out]))
                self.assertEqual(r.stdout, b"")
                self.assertEqual(self.read(out), want)
                self.assertEqual(os.stat(out).st_mode & 0o777, 0o600)
                self.assertEqual(self.ok(run(args + ["-o", "-"])).stdout, want)
        # a run that prints nothing leaves the file as it was
        out = os.path.join(d, "kept.txt")
        with open(out, "w") as f:
            f.write("earlier\n")
        r = run(["dump", "-o", out, os.path.join(d, "missing")])
        self.assertEqual(r.returncode, 1)
        self.assertEqual(self.read(out), b"earlier\n")
        # the output may not be the input
        r = run(["dump", "-o", V8_DUMP, V8_DUMP])
        self.assertEqual(r.returncode, 2)
        r = run(["elf", "-o", "-", V8_DUMP], cwd=d)
        self.assertEqual(r.returncode, 2)
        self.assertIn(b"directory of images", r.stderr)

    # ---- 9: pids ---------------------------------------------------------
    def test_9_pid(self):
        """--pid filters (symbolize, as perf); gperf sets the samples' pid
        with --set-pid, --pid still sets it with a deprecation warning"""
        d = self.fresh("pid")

        def pids(path):
            doc = json.loads(self.ok(run(["dump", "--json", path])).stdout)
            return {r["pid"] for r in doc["records"] if r["name"] in ("SAMPLE", "COMM", "MMAP2")}

        self.ok(run(["gperf", self.prof, "--set-pid", "4242", "-o", "a.data"], cwd=d))
        self.assertEqual(pids(os.path.join(d, "a.data")), {4242})
        r = self.ok(run(["gperf", self.prof, "--pid", "4343", "-o", "b.data"], cwd=d))
        self.assertEqual(pids(os.path.join(d, "b.data")), {4343})
        self.assertRegex(r.stderr.decode(), r"warning: gperf --pid N is now spelled --set-pid N")
        r = self.ok(run(["gperf", "-q", self.prof, "--pid", "4343", "-o", "c.data"], cwd=d))
        self.assertEqual(r.stderr, b"")
        # symbolize: only the dumps of that pid
        for pid in (4928, 19989):
            got = json.loads(self.ok(run(["symbolize", "--json", "--pid", str(pid), NODE_DUMP,
                                          V8_DUMP, self.addr])).stdout)
            self.assertEqual({r.get("pid") for r in got["results"]}, {pid})

    # ---- 9: version, help, man ---------------------------------------------
    def test_9_version(self):
        want = self.ok(run(["--version"])).stdout
        self.assertRegex(want.decode(), r"^perfgraft \d+\.\d+")
        for args in (["-V"], ["version"]):
            self.assertEqual(self.ok(run(args)).stdout, want)

    def test_9_help_opens_the_man_page(self):
        """perfgraft help CMD shows perfgraft-CMD(1), from the build tree
        before an install (it printed the top-level usage); without man,
        the command's usage"""
        if shutil.which("man") is None:
            self.skipTest("man is not installed")
        env = dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="80")
        for cmd in ("inject", "xray", "perf-map"):
            with self.subTest(cmd=cmd):
                r = self.ok(run(["help", cmd], env=env))
                out = r.stdout.decode("utf-8", "replace")
                self.assertRegex(out, r"(?i)perfgraft-%s" % re.escape(cmd))
                self.assertIn("SYNOPSIS", out)
                self.assertNotIn("usage: perfgraft [", out)
        nomand = self.fresh("noman")
        env = dict(os.environ, PATH=nomand)
        r = self.ok(run(["help", "inject"], env=env))
        self.assertIn(b"usage: perfgraft inject", r.stdout)
        self.assertIn(b"no manual page perfgraft-inject(1)", r.stderr)
        r = run(["help", "nosuch"])
        self.assertEqual(r.returncode, 2)
        self.assertIn(b"usage: perfgraft inject", self.ok(run(["inject", "--help"])).stdout)

    # ---- 9: bash completion ------------------------------------------------
    def complete(self, line, cwd=None):
        """COMPREPLY of the completion for line (the cursor at its end),
        without bash-completion's helpers"""
        script = r'''
source "$1"
line=$2
read -ra COMP_WORDS <<<"$line"
[[ $line == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_WORDS[0]=$3
_perfgraft
printf '%s\n' "${COMPREPLY[@]}"
'''
        r = subprocess.run(["bash", "--norc", "-c", script, "bash", COMPLETION, line, PERFGRAFT],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                           timeout=TIMEOUT, universal_newlines=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return set(r.stdout.split())

    def test_9_bash_completion(self):
        self.assertTrue({"dump", "elf", "inject", "gperf", "symbolize", "perf-map", "xray",
                         "help"} <= self.complete("perfgraft "))
        self.assertEqual(self.complete("perfgraft in"), {"inject"})
        self.assertTrue({"--jitdump", "--jitdump-dir"} <= self.complete("perfgraft inject --jit"))
        self.assertIn("--set-pid", self.complete("perfgraft gperf --"))
        self.assertEqual(self.complete("perfgraft elf --layout "), {"memory", "packed", "per-function"})
        self.assertEqual(self.complete("perfgraft dump --format "), {"text", "json"})
        self.assertEqual(self.complete("perfgraft help perf"), {"perf-map"})
        d = self.fresh("compl")
        open(os.path.join(d, "jit-1.dump"), "w").close()
        os.mkdir(os.path.join(d, "jdir"))
        self.assertEqual(self.complete("perfgraft elf ji", cwd=d), {"jit-1.dump"})
        self.assertEqual(self.complete("perfgraft elf -o j", cwd=d), {"jdir"})

    # ---- 10: errors that point the right way --------------------------------
    def test_10_directory(self):
        """a directory is one message for every command (inject said "too
        short for a perf.data header", others "not a regular file")"""
        d = self.empty_dir
        for args in (["inject", "-N", "-i", d, "-o", os.path.join(self.d, "o.data")],
                     ["dump", d], ["elf", "-o", self.fresh("dir-elf"), d], ["gperf", d, "-o", "o.data"],
                     ["xray", d, "-o", "o.data"], ["symbolize", d, "0x10"], ["perf-map", d],
                     ["inject", "-N", DEMO, "-o", "o.data", "--jitdump", d]):
            with self.subTest(cmd=args[0]):
                r = run(args, cwd=self.d)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertRegex(r.stderr.decode(), r"^perfgraft: %s: is a directory \(perfgraft "
                                 % re.escape(d))

    def test_10_format_named(self):
        """a command given another of perfgraft's formats names it and the
        command that reads it (xray on a gperftools profile said
        "unsupported XRay basic version 0")"""
        cases = {
            "xray": (["xray", "%s", "-o", "o.data"], {self.prof: ("a gperftools CPU profile", "perfgraft gperf"),
                                                      V8_DUMP: ("a jitdump", "perfgraft elf"),
                                                      DEMO: ("a perf.data file", "perfgraft inject"),
                                                      XRAY_OBJ: ("an ELF file", "-b BINARY")}),
            "gperf": (["gperf", "%s", "-o", "o.data"], {XRAY_BASIC: ("an XRay basic-mode trace", "perfgraft xray"),
                                                        XRAY_FDR: ("an XRay FDR-mode trace", "perfgraft xray"),
                                                        self.pprof: ("a pprof protobuf profile", "not pprof's protobuf")}),
            "inject": (["inject", "-N", "-i", "%s", "-o", "o.data"], {V8_DUMP: ("a jitdump", "--jitdump FILE"),
                                                                      self.prof: ("a gperftools CPU profile", "perfgraft gperf")}),
            "elf": (["elf", "-o", "imgs", "%s"], {DEMO: ("a perf.data file", "perfgraft inject"),
                                                  self.pipe_data: ("a pipe-mode perf.data", "perfgraft inject"),
                                                  self.zipped_dump: ("gzip-compressed data holding a jitdump", "gunzip")}),
            "symbolize": (["symbolize", "%s", "0x10"], {XRAY_FDR: ("an XRay FDR-mode trace", "perfgraft xray")}),
            "perf-map": (["perf-map", "%s"], {self.prof: ("a gperftools CPU profile", "perfgraft gperf")}),
            "dump": (["dump", "%s"], {XRAY_OBJ: ("an ELF file", "-b BINARY")}),
            "inject --jitdump": (["inject", "-N", DEMO, "-o", "o.data", "--jitdump", "%s"],
                                 {XRAY_FDR: ("an XRay FDR-mode trace", "perfgraft xray")}),
        }
        d = self.fresh("formats")
        for cmd, (args, files) in cases.items():
            for path, (name, reader) in files.items():
                with self.subTest(cmd=cmd, input=os.path.basename(path)):
                    r = run([path if a == "%s" else a for a in args], cwd=d)
                    self.assertEqual(r.returncode, 1, r.stderr)
                    err = r.stderr.decode()
                    self.assertIn("%s: offset 0: %s" % (path, name), err)
                    self.assertIn(reader, err)
                    self.assertNotRegex(err, r"unsupported|bad magic|offset [1-9]")
        # and from standard input
        with open(self.prof, "rb") as f:
            r = run(["xray", "-", "-o", "o.data"], inp=f.read(), cwd=d)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"standard input: offset 0: a gperftools CPU profile, not an XRay trace",
                      r.stderr)
        self.assertEqual(os.listdir(d), [])

    def test_10_jitdump_of_a_pid_not_recorded(self):
        """inject --jitdump of a pid the recording has nothing of is
        injected with a warning naming the pids it has (it was silent)"""
        d = self.fresh("unrecorded")
        r = self.ok(run(["inject", "-N", DEMO, "-o", "a.data", "--jitdump", NODE_DUMP], cwd=d))
        self.assertRegex(r.stderr.decode(), r"warning: --jitdump %s: pid 4928 has no sample, COMM or "
                         r"MMAP in the recording \(its pids: 19989\)" % re.escape(NODE_DUMP))
        r = self.ok(run(["inject", "-N", DEMO, "-o", "b.data", "--jitdump", V8_DUMP], cwd=d))
        self.assertNotIn(b"has no sample", r.stderr)
        # a pipe-mode recording too
        with open(self.pipe_data, "rb") as f:
            r = self.ok(run(["inject", "-N", "-", "-o", "c.data", "--jitdump", NODE_DUMP],
                            inp=f.read(), cwd=d))
        self.assertIn(b"pid 4928 has no sample", r.stderr)


if __name__ == "__main__":
    unittest.main()
