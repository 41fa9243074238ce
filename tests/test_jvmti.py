"""libperfgraft-jvmti.so, the JVMTI agent, in a real JVM.

A small Java program (written and compiled with javac -g into a temporary
directory) runs a hot loop whose method `work(int, String)` calls
`square(int)`, which C2 inlines.  With the agent:
  - `perfgraft dump --json` of jit-PID.dump shows LOADs in Java form
    (exact names with parameters, arrays, nested classes), the JVM's stubs
    (none with stubs=off), DEBUG_INFO rows in `pg/demo/Hot.java` inside the
    code, INLINE_INFO chains that start with the inlined callee and end with
    the compiled method (valid ranges), and a CLOSE at the end;
  - `perfgraft elf` + `addr2line -f -i` at an inlined address prints square
    at its line, then work at the line of the call;
  - names=jvm gives the JVM's raw names, inline=off no INLINE_INFO;
  - a bad option stops `java` with one "perfgraft-jvmti:" line;
  - `jcmd PID JVMTI.agent_load` into a running JVM replays what was compiled
    and generated before the attach;
  - methods of an unloaded class get UNLOAD records matching their LOADs;
  - a copy of the agent loaded a second time (jcmd JVMTI.agent_load of a
    copy at another path, or two -agentpath) finds the dump locked by the
    first: one line, it writes nothing, the JVM runs on, and the dump holds
    exactly what the first agent reports having written, ending in CLOSE;
  - a full file system (a 64 KiB tmpfs; root only) stops the agent with one
    message and the JVM exits 0.
No perf recording here (the Java acceptance tests do that).  Everything
happens in a temporary directory; skipped when java or javac are missing.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
BUILD = os.path.dirname(os.path.abspath(PERFGRAFT))
AGENT = os.path.join(BUILD, "src", "jvmti", "libperfgraft-jvmti.so")
INLINE_INFO, UNLOAD = 0x70670001, 0x70670002

HOT = r"""package pg.demo;

public class Hot {
    static final class Inner {
        static int twice(int x) {
            return x + x;                                   // @TWICE
        }
    }

    static int square(int x) {
        return x * x + 1;                                   // @SQUARE
    }

    static long work(int n, String tag) {
        long s = 0;
        for (int i = 0; i < n; i++) {
            s += square(i) ^ tag.length();                  // @CALL
        }
        return s;
    }

    static long mix(long[][] m, String[] t, double d) {
        return m[0][0] + t.length + (long) d;
    }

    public static void main(String[] args) throws Exception {
        long ms = Long.parseLong(args[0]);
        System.out.println("pid " + ProcessHandle.current().pid());
        System.out.flush();
        long[][] m = {{1}};
        String[] t = {"a"};
        long end = System.nanoTime() + ms * 1000000L, s = 0;
        java.io.File stop = args.length > 1 ? new java.io.File(args[1]) : null;
        while (System.nanoTime() < end && (stop == null || !stop.exists())) {
            s += work(10000, "x") + mix(m, t, 2.0) + Inner.twice((int) s);
        }
        System.out.println("sum " + s);
    }
}
"""

# loads pg.demo.Hot three times in a class loader of its own, runs its work
# until compiled, drops the loader and collects: the class and its compiled
# methods are unloaded
UNL = r"""package pg.unl;

import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;

public class Unl {
    public static void main(String[] args) throws Exception {
        URL u = new java.io.File(args[0]).toURI().toURL();
        for (int r = 0; r < 3; r++) {
            ClassLoader l = new URLClassLoader(new URL[] { u }, null);
            Method m = l.loadClass("pg.demo.Hot").getDeclaredMethod("work", int.class, String.class);
            m.setAccessible(true);
            long s = 0;
            for (int i = 0; i < 3000; i++)
                s += (Long) m.invoke(null, 10000, "x");
            System.out.println(s);
            l = null;
            m = null;
            System.gc();
            Thread.sleep(200);
        }
    }
}
"""

JAVA_OPTS = ["-XX:+UseSerialGC", "-XX:-BackgroundCompilation"]


def line_of(mark):
    for n, text in enumerate(HOT.splitlines(), 1):
        if "// @" + mark in text:
            return n
    raise AssertionError(mark)


def run(cmd, cwd, check=True, timeout=120):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    if check and p.returncode != 0:
        raise AssertionError("exit %d: %s\n%s" % (p.returncode, " ".join(cmd), err[-2000:]))
    return p.returncode, out, err


def agent_lines(err):
    return [ln for ln in err.splitlines() if "perfgraft-jvmti" in ln]


class Jvmti(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in ("java", "javac"):
            if shutil.which(tool) is None:
                raise unittest.SkipTest("%s not found" % tool)
        if not os.path.isfile(AGENT):
            raise unittest.SkipTest("the agent is not built (no JDK include/jvmti.h): %s" % AGENT)
        cls.tmp = tempfile.mkdtemp(prefix="perfgraft-jvmti.")
        try:
            src = os.path.join(cls.tmp, "src")
            for rel, text in (("pg/demo/Hot.java", HOT), ("pg/unl/Unl.java", UNL)):
                os.makedirs(os.path.join(src, os.path.dirname(rel)), exist_ok=True)
                with open(os.path.join(src, rel), "w") as f:
                    f.write(text)
            cls.classes = os.path.join(cls.tmp, "classes")
            run(["javac", "-g", "-d", cls.classes, os.path.join(src, "pg/demo/Hot.java"),
                 os.path.join(src, "pg/unl/Unl.java")], cls.tmp)
            cls.main = cls.java_run("main", "", 1000)
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def java_run(cls, name, options, ms, cls_name="pg.demo.Hot", args=None):
        """Runs the program with the agent into DIR=tmp/NAME; returns
        (pid, stderr, dump path, parsed dump)."""
        d = os.path.join(cls.tmp, name)
        os.mkdir(d)
        opts = "dir=" + d + ("," + options if options else "")
        _, out, err = run(["java"] + JAVA_OPTS + ["-agentpath:%s=%s" % (AGENT, opts),
                                                  "-cp", cls.classes, cls_name]
                          + (args if args is not None else [str(ms)]), cls.tmp)
        dumps = [f for f in os.listdir(d) if re.fullmatch(r"jit-\d+\.dump", f)]
        assert len(dumps) == 1, (dumps, err)
        path = os.path.join(d, dumps[0])
        return err, path, cls.dump(path)

    @staticmethod
    def dump(path):
        _, out, _ = run([PERFGRAFT, "dump", "--json", path], os.path.dirname(path))
        doc = json.loads(out)
        assert not doc["error"], doc["error"]
        return doc

    @staticmethod
    def groups(doc):
        """(LOAD, {type: record before it}) per LOAD."""
        pending, out = {}, []
        for r in doc["records"]:
            if r["type"] == "LOAD":
                out.append((r, pending))
                pending = {}
            elif r["type"] in ("DEBUG_INFO", "INLINE_INFO"):
                pending[r["type"]] = r
        return out

    def names(self, doc):
        return [r["name"] for r in doc["records"] if r["type"] == "LOAD"]

    # ------------------------------------------------------------------

    def test_java_names(self):
        _, _, doc = self.main
        names = set(self.names(doc))
        for want in ("pg.demo.Hot.work(int, java.lang.String)",
                     "pg.demo.Hot.square(int)",
                     "pg.demo.Hot.mix(long[][], java.lang.String[], double)",
                     "pg.demo.Hot$Inner.twice(int)"):
            self.assertIn(want, names)
        # no return types, no descriptors
        self.assertFalse([n for n in names if n.startswith("pg.demo") and ")" != n[-1]])
        self.assertFalse([n for n in names if n.startswith("Lpg/")])

    def test_stubs(self):
        _, _, doc = self.main
        names = set(self.names(doc))
        self.assertIn("Interpreter", names)
        self.assertIn("call_stub", names)
        _, _, off = self.java_run("nostubs", "stubs=off", 300)
        loads = self.names(off)
        self.assertIn("pg.demo.Hot.work(int, java.lang.String)", loads)
        self.assertNotIn("Interpreter", loads)
        self.assertNotIn("call_stub", loads)
        # every LOAD is then a Java method
        self.assertEqual([n for n in loads if not n.endswith(")")], [])

    def test_debug_info(self):
        _, _, doc = self.main
        seen = 0
        for ld, pre in self.groups(doc):
            di = pre.get("DEBUG_INFO")
            if not di:
                continue
            lo, hi = ld["code_addr"], ld["code_addr"] + ld["code_size"]
            addrs = [ln["addr"] for ln in di["lines"]]
            self.assertEqual(addrs, sorted(addrs), ld["name"])
            self.assertTrue(all(lo <= a < hi for a in addrs), ld["name"])
            if ld["name"] == "pg.demo.Hot.work(int, java.lang.String)":
                seen += 1
                files = {ln["file"] for ln in di["lines"]}
                self.assertIn("pg/demo/Hot.java", files)
                lines = {ln["line"] for ln in di["lines"] if ln["file"] == "pg/demo/Hot.java"}
                # the lines of work and square, nothing else of Hot.java
                self.assertTrue(lines <= set(range(line_of("SQUARE") - 1, line_of("CALL") + 4)),
                                lines)
                self.assertIn(line_of("CALL"), lines)
        self.assertGreater(seen, 0)
        # the JDK's own classes: package path + source file
        files = {ln["file"] for ld, pre in self.groups(doc) if "DEBUG_INFO" in pre
                 for ln in pre["DEBUG_INFO"]["lines"]}
        self.assertIn("java/lang/String.java", files)

    def test_inline_chains(self):
        _, _, doc = self.main
        found = []
        for ld, pre in self.groups(doc):
            inl = pre.get("INLINE_INFO")
            if not inl:
                continue
            self.assertFalse(inl["dropped"])
            end = 0
            for rg in inl["ranges"]:
                self.assertGreaterEqual(rg["off"], end, ld["name"])
                self.assertGreater(rg["len"], 0)
                end = rg["off"] + rg["len"]
                self.assertLessEqual(end, ld["code_size"])
                self.assertGreaterEqual(len(rg["frames"]), 2)
                self.assertEqual(rg["frames"][-1]["func"], ld["name"])
                chain = [(f["func"], f["file"], f["line"]) for f in rg["frames"]]
                if ld["name"] == "pg.demo.Hot.work(int, java.lang.String)" and \
                   chain[0][0] == "pg.demo.Hot.square(int)":
                    found.append(chain)
        self.assertIn([("pg.demo.Hot.square(int)", "pg/demo/Hot.java", line_of("SQUARE")),
                       ("pg.demo.Hot.work(int, java.lang.String)", "pg/demo/Hot.java",
                        line_of("CALL"))], found)
        self.assertEqual(doc["warnings"], [])

    def test_close_at_the_end(self):
        _, _, doc = self.main
        self.assertEqual(doc["records"][-1]["type"], "CLOSE")
        self.assertEqual(doc["summary"]["closes"], 1)

    def test_addr2line_inlined(self):
        if shutil.which("addr2line") is None:
            self.skipTest("addr2line not found")
        _, path, doc = self.main
        images = os.path.join(self.tmp, "main-elf")
        _, out, _ = run([PERFGRAFT, "elf", "-l", "-q", "-o", images, path], self.tmp)
        where = {int(f[0]): (f[3], int(f[4], 16))
                 for f in (ln.split("\t") for ln in out.splitlines())}
        checked = 0
        for ld, pre in self.groups(doc):
            if ld["name"] != "pg.demo.Hot.work(int, java.lang.String)" or "INLINE_INFO" not in pre:
                continue
            for rg in pre["INLINE_INFO"]["ranges"]:
                if rg["frames"][0]["func"] != "pg.demo.Hot.square(int)" or len(rg["frames"]) != 2:
                    continue
                img, pgoff = where[ld["code_index"]]
                for off in (rg["off"], rg["off"] + rg["len"] // 2, rg["off"] + rg["len"] - 1):
                    _, a2l, _ = run(["addr2line", "-f", "-i", "-e", os.path.join(images, img),
                                     hex(pgoff + off)], self.tmp)
                    self.assertEqual(a2l.split("\n")[:4],
                                     ["pg.demo.Hot.square(int)",
                                      "pg/demo/Hot.java:%d" % line_of("SQUARE"),
                                      "pg.demo.Hot.work(int, java.lang.String)",
                                      "pg/demo/Hot.java:%d" % line_of("CALL")], hex(off))
                    checked += 1
        self.assertGreater(checked, 0)

    def test_names_jvm_inline_off(self):
        _, _, doc = self.java_run("jvm", "names=jvm,inline=off", 300)
        names = set(self.names(doc))
        self.assertIn("Lpg/demo/Hot;work(ILjava/lang/String;)J", names)
        self.assertIn("Lpg/demo/Hot;mix([[J[Ljava/lang/String;D)J", names)
        self.assertEqual(doc["summary"]["inline_infos"], 0)
        self.assertGreater(doc["summary"]["debug_infos"], 0)

    def test_bad_options(self):
        for opt in ("names=x", "bogus", "stubs=maybe", "inline=", "color=red", "dir="):
            rc, _, err = run(["java", "-agentpath:%s=%s" % (AGENT, opt), "-version"], self.tmp,
                             check=False)
            self.assertNotEqual(rc, 0, opt)
            lines = agent_lines(err)
            self.assertEqual(len(lines), 1, err)
            self.assertTrue(lines[0].startswith("perfgraft-jvmti: "), lines)
            self.assertIn(opt.split("=")[0], lines[0])
        # a directory that does not exist: refused too, nothing written
        rc, _, err = run(["java", "-agentpath:%s=dir=%s" % (AGENT, os.path.join(self.tmp, "nope")),
                          "-version"], self.tmp, check=False)
        self.assertNotEqual(rc, 0)
        self.assertEqual(len(agent_lines(err)), 1, err)

    def attached_run(self, java_opts, agent, agent_opts):
        """pg.demo.Hot running until the agent is loaded into it with jcmd
        (then a stop file ends it: no race with a fixed run time on a busy
        machine): (pid, jcmd's rc, out, err, java's out, err, the
        monotonic time jcmd returned).  java must have exited with 0."""
        stop = os.path.join(self.tmp, "stop-%d" % time.monotonic_ns())
        pid = None
        p = subprocess.Popen(["java"] + JAVA_OPTS + java_opts +
                             ["-cp", self.classes, "pg.demo.Hot", "120000", stop],
                             cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            pid = int(re.match(r"pid (\d+)", p.stdout.readline().decode()).group(1))
            time.sleep(1.0)	# compiled and generated code to replay
            # jcmd takes KEY=VALUE arguments itself: the options are quoted
            rc, out, err = run(["jcmd", str(pid), "JVMTI.agent_load", agent, agent_opts],
                               self.tmp, check=False)
            t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            open(stop, "w").close()
            jout, jerr = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
            if os.path.exists(stop):
                os.unlink(stop)
            # HotSpot removes its attach socket at a normal exit only
            if pid is not None and p.returncode != 0 and \
                    os.path.exists("/tmp/.java_pid%d" % pid):
                os.unlink("/tmp/.java_pid%d" % pid)
        self.assertEqual(p.returncode, 0, jerr)
        self.assertIn("sum ", jout.decode())
        return pid, rc, out, err, jout.decode(), jerr.decode(), t

    def test_attach(self):
        if shutil.which("jcmd") is None:
            self.skipTest("jcmd not found")
        d = os.path.join(self.tmp, "attach")
        os.mkdir(d)
        pid, rc, out, err, jout, jerr, _ = self.attached_run(
            [], AGENT, '"dir=%s,verbose=on"' % d)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("return code: 0", out)
        path = os.path.join(d, "jit-%d.dump" % pid)
        doc = self.dump(path)
        names = self.names(doc)
        # compiled and generated within the first second: replayed
        self.assertIn("pg.demo.Hot.work(int, java.lang.String)", names)
        self.assertIn("Interpreter", names)
        self.assertGreater(doc["summary"]["debug_infos"], 0)
        self.assertEqual(doc["records"][-1]["type"], "CLOSE")
        self.assertIn("perfgraft-jvmti: writing " + path, jerr)

    LOCKED = ("perfgraft-jvmti: %s: another jitdump writer has this dump open and locked "
              "(a second writer in this process, such as an agent loaded twice, or another "
              "process writing this name); not opened, that writer's dump is left as it is; "
              "this copy of the agent writes nothing, the JVM runs on")
    COUNTS = re.compile(r"^perfgraft-jvmti: (\d+) compiled methods, (\d+) stubs, (\d+) unloads"
                        r"(?: \(some written without their chains or lines\))? in (.*)$")

    def agent_copy(self):
        copy = os.path.join(self.tmp, "copy", os.path.basename(AGENT))
        if not os.path.exists(copy):
            os.makedirs(os.path.dirname(copy))
            shutil.copy(AGENT, copy)
        return copy

    def check_loaded_twice(self, jerr, path, t_second):
        """One refusal line from the second copy; the dump is whole and holds
        what the first copy (verbose=on) counted, its CLOSE written after
        the second copy came."""
        lines = agent_lines(jerr)
        counts = [self.COUNTS.match(ln) for ln in lines]
        counts = [m for m in counts if m]
        self.assertEqual(len(counts), 1, jerr)
        self.assertEqual(counts[0].group(4), path)
        methods, stubs, unloads = (int(counts[0].group(i)) for i in (1, 2, 3))
        doc = self.dump(path)
        self.assertEqual(doc["warnings"], [])
        self.assertEqual((doc["summary"]["loads"], doc["summary"]["unloads"]),
                         (methods + stubs, unloads))
        self.assertGreater(methods, 0)
        self.assertEqual(doc["summary"]["closes"], 1)
        last = doc["records"][-1]
        self.assertEqual(last["type"], "CLOSE")
        self.assertEqual(last["offset"] + last["size"], os.path.getsize(path))
        self.assertGreater(last["timestamp"], t_second)
        idx = [r["code_index"] for r in doc["records"] if r["type"] == "LOAD"]
        self.assertEqual(idx, list(range(1, len(idx) + 1)))
        refused = [ln for ln in lines if "locked" in ln]
        self.assertEqual(refused, [self.LOCKED % path], jerr)
        self.assertEqual(sorted(set(lines) - set(refused) - {counts[0].group(0)}),
                         ["perfgraft-jvmti: writing " + path], jerr)

    def test_loaded_twice_attach(self):
        """-agentpath, then jcmd JVMTI.agent_load of a copy at another path
        (its own globals, so not "already loaded"): the copy is refused
        (jcmd: return code -1) and the first agent's dump stays whole."""
        if shutil.which("jcmd") is None:
            self.skipTest("jcmd not found")
        d = os.path.join(self.tmp, "twice-attach")
        os.mkdir(d)
        copy = self.agent_copy()
        pid, rc, out, err, jout, jerr, t_second = self.attached_run(
            ["-agentpath:%s=dir=%s,verbose=on" % (AGENT, d)], copy, '"dir=%s"' % d)
        self.assertEqual(rc, 0, out + err)
        self.check_loaded_twice(jerr, os.path.join(d, "jit-%d.dump" % pid), t_second)
        self.assertIn("return code: -1", out)

    def test_loaded_twice_at_startup(self):
        """Two -agentpath (the agent and a copy): java starts and runs, the
        second writes nothing."""
        d = os.path.join(self.tmp, "twice-start")
        os.mkdir(d)
        t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        _, out, err = run(["java"] + JAVA_OPTS + ["-agentpath:%s=dir=%s,verbose=on" % (AGENT, d),
                                                  "-agentpath:%s=dir=%s" % (self.agent_copy(), d),
                                                  "-cp", self.classes, "pg.demo.Hot", "300"],
                          self.tmp)
        pid = int(re.match(r"pid (\d+)", out).group(1))
        self.check_loaded_twice(err, os.path.join(d, "jit-%d.dump" % pid), t0)
        # the same library twice: "already loaded", java starts all the same
        d = os.path.join(self.tmp, "twice-same")
        os.mkdir(d)
        _, out, err = run(["java"] + JAVA_OPTS + ["-agentpath:%s=dir=%s" % (AGENT, d),
                                                  "-agentpath:%s=dir=%s" % (AGENT, self.tmp),
                                                  "-cp", self.classes, "pg.demo.Hot", "300"],
                          self.tmp)
        pid = int(re.match(r"pid (\d+)", out).group(1))
        self.assertEqual(agent_lines(err), ['perfgraft-jvmti: already loaded in this JVM; '
                                            'options "dir=%s" ignored, the JVM runs on' % self.tmp])
        doc = self.dump(os.path.join(d, "jit-%d.dump" % pid))
        self.assertEqual(doc["warnings"], [])
        self.assertEqual(doc["records"][-1]["type"], "CLOSE")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "jit-%d.dump" % pid)))

    def test_unload(self):
        _, _, doc = self.java_run("unload", "", 0, cls_name="pg.unl.Unl", args=[self.classes])
        loads = {r["code_index"]: r for r in doc["records"] if r["type"] == "LOAD"}
        unloads = [r for r in doc["records"] if r["type"] == "UNLOAD"]
        for u in unloads:
            ld = loads[u["code_index"]]
            self.assertEqual((u["code_addr"], u["code_size"]), (ld["code_addr"], ld["code_size"]))
        # the three copies of pg.demo.Hot went away with their loaders
        gone = [loads[u["code_index"]]["name"] for u in unloads]
        self.assertIn("pg.demo.Hot.work(int, java.lang.String)", gone)

    def test_disk_full(self):
        if os.geteuid() != 0:
            self.skipTest("mounting a tmpfs needs root")
        d = os.path.join(self.tmp, "small")
        os.mkdir(d)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d],
                          stderr=subprocess.DEVNULL).returncode != 0:
            self.skipTest("cannot mount a tmpfs here")
        try:
            rc, out, err = run(["java"] + JAVA_OPTS + ["-agentpath:%s=dir=%s" % (AGENT, d),
                                                       "-cp", self.classes, "pg.demo.Hot", "800"],
                               self.tmp, check=False)
            self.assertEqual(rc, 0, err)
            self.assertIn("sum ", out)
            lines = agent_lines(err)
            self.assertEqual(len(lines), 1, err)
            self.assertIn("No space left on device", lines[0])
        finally:
            subprocess.run(["umount", d])


if __name__ == "__main__":
    unittest.main()
