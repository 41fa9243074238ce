"""What `meson install` lays out, and perf 6.1 finding it.

(a) Everything installs under the prefix (a non-root `meson install` with
    --prefix fails on the first file outside it), and the default layout
    mirrors perf's: the plugin in PREFIX/lib/traceevent/plugins (so that
    --prefix=$HOME/.local lands in the one fixed directory Debian's perf
    6.1 searches), the perf scripts in PREFIX/lib/perf-core/scripts/python
    (so that --prefix=/usr lands in what `perf --exec-path` prints).
(b) The plugin is built into a directory of its own: TRACEEVENT_PLUGIN_DIR
    naming it makes perf print the call graph with no complaint about
    other .so files there; the installed plugin is found through
    TRACEEVENT_PLUGIN_DIR and through ~/.local/lib/traceevent/plugins.
(c) The installed xray-account.py is found by name (`perf script -s
    xray-account.py`, `perf script report xray-account`) when its
    directory is perf's exec path, and prints what the script from the
    source tree prints.
(d) The library: libperfgraft.a installed; perfgraft.pc requires only
    what the library links (not libtraceevent); libperfgraft.so does not
    link libstdc++ (the demangler is dlopen()ed).
(e) The bash completion lands in bash-completion's completionsdir under
    the prefix (PREFIX/share/bash-completion/completions), where
    bash-completion's on-demand loader finds it through XDG_DATA_DIRS
    (/usr/local/share is in its default), and completes commands.

The installs go into a temporary DESTDIR (meson install --destdir
--no-rebuild); perf gets --buildid-dir and a HOME of its own."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
BUILD = os.path.dirname(os.path.abspath(PERFGRAFT))
CLANG = shutil.which("clang-14") or shutil.which("clang")

XRAY_PROG = r"""
#include <stdio.h>
__attribute__((xray_always_instrument, noinline)) int leaf(int x) { return x * 3; }
__attribute__((xray_always_instrument, noinline)) int top(int x) { return leaf(x) + 1; }
int main(void) { int s = 0; for (int i = 0; i < 5; i++) s += top(i); printf("%d\n", s); return 0; }
"""


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, **kw)


@unittest.skipIf(shutil.which("meson") is None, "meson is not installed")
@unittest.skipIf(not os.path.isfile(os.path.join(BUILD, "build.ninja")),
                 "%s is not a meson build directory" % BUILD)
class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="pg-install-")
        cls.addClassCleanup(cls.tmp.cleanup)
        t = cls.tmp.name
        cls.dest = os.path.join(t, "dest")
        r = run(["meson", "install", "-C", BUILD, "--destdir", cls.dest,
                 "--no-rebuild", "--quiet"])
        if r.returncode != 0:
            raise AssertionError("meson install --destdir failed: %s%s" % (r.stdout, r.stderr))
        opts = json.loads(run(["meson", "introspect", BUILD, "--buildoptions"]).stdout)
        cls.opt = {o["name"]: o["value"] for o in opts}
        cls.prefix = cls.opt["prefix"]
        # build path -> install path
        cls.installed = json.loads(run(["meson", "introspect", BUILD, "--installed"]).stdout)
        cls.home = os.path.join(t, "home")
        os.mkdir(cls.home)

    def installed_as(self, name):
        """the install path of the file whose name is NAME"""
        hits = [d for s, d in self.installed.items() if os.path.basename(d) == name]
        self.assertEqual(len(hits), 1, "%s installed %d times: %s" % (name, len(hits), hits))
        return hits[0]

    def test_everything_under_prefix(self):
        outside = sorted(d for d in self.installed.values()
                         if os.path.commonpath([self.prefix, d]) != self.prefix)
        self.assertEqual(outside, [], "installed outside the prefix %s" % self.prefix)
        # and the DESTDIR holds nothing else
        for top, dirs, files in os.walk(self.dest):
            for f in files:
                p = os.path.join(top, f)[len(self.dest):]
                self.assertEqual(os.path.commonpath([self.prefix, p]), self.prefix, p)

    def test_bash_completion(self):
        hits = [d for d in self.installed.values()
                if d.endswith("/bash-completion/completions/perfgraft")]
        self.assertEqual(len(hits), 1, hits)
        if self.opt.get("bash_completion_dir", "") == "":
            self.assertEqual(os.path.relpath(hits[0], self.prefix),
                             "share/bash-completion/completions/perfgraft")
        loader = "/usr/share/bash-completion/bash_completion"
        if not os.path.exists(loader):
            self.skipTest("bash-completion is not installed")
        share = self.dest + os.path.join(self.prefix, "share")
        script = (r'source %s; __load_completion perfgraft || exit 3; complete -p perfgraft; '
                  r'COMP_WORDS=(perfgraft in); COMP_CWORD=1; COMP_LINE="perfgraft in"; '
                  r'COMP_POINT=${#COMP_LINE}; _perfgraft perfgraft in perfgraft; '
                  r'echo "${COMPREPLY[@]}"' % loader)
        r = run(["bash", "--norc", "-c", script],
                env=dict(os.environ, XDG_DATA_DIRS=share, HOME=self.home))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["complete -F _perfgraft perfgraft", "inject"])

    def test_default_layout_is_perfs(self):
        plugin = self.installed_as("plugin_xray.so")
        script = self.installed_as("xray-account.py")
        if self.opt.get("traceevent_plugin_dir", "") == "":
            self.assertEqual(os.path.relpath(os.path.dirname(plugin), self.prefix),
                             "lib/traceevent/plugins")
        if self.opt.get("perf_exec_path", "") == "" and shutil.which("perf"):
            # Debian's perf: /usr/lib/perf-core; with --prefix=/usr the
            # scripts land in it
            exec_path = run(["perf", "--exec-path"]).stdout.strip()
            self.assertEqual(os.path.relpath(os.path.dirname(script), self.prefix),
                             os.path.join(os.path.relpath(exec_path, "/usr"),
                                          "scripts", "python"))

    def test_library_packaging(self):
        self.assertTrue(any(os.path.basename(d) == "libperfgraft.a"
                            for d in self.installed.values()), "no libperfgraft.a")
        pc = self.installed_as("perfgraft.pc")
        with open(self.dest + pc) as f:
            text = f.read()
        req = [ln for ln in text.splitlines() if ln.startswith("Requires")]
        self.assertTrue(req, text)
        for ln in req:
            self.assertNotIn("libtraceevent", ln)
        so = [s for s in self.installed if os.path.basename(s).startswith("libperfgraft.so")]
        self.assertTrue(so)
        r = run(["readelf", "-d", so[0]])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("libelf.so", r.stdout)
        self.assertNotIn("libstdc++", r.stdout)

    # perf

    def xray_data(self):
        """A perf.data of xray:* events from a small XRay program."""
        if getattr(self, "_data", None):
            return self._data
        if shutil.which("perf") is None:
            self.skipTest("perf is not installed")
        if CLANG is None:
            self.skipTest("clang is not installed")
        d = os.path.join(self.tmp.name, "xray")
        os.makedirs(d, exist_ok=True)
        src = os.path.join(d, "prog.c")
        with open(src, "w") as f:
            f.write(XRAY_PROG)
        prog = os.path.join(d, "prog")
        r = run([CLANG, "-O1", "-fxray-instrument", src, "-o", prog])
        if r.returncode != 0:
            self.skipTest("clang -fxray-instrument: %s" % r.stderr[-300:])
        env = dict(os.environ, XRAY_OPTIONS="patch_premain=true xray_mode=xray-basic "
                   "verbosity=0 xray_logfile_base=%s/xray-log." % d,
                   XRAY_BASIC_OPTIONS="func_duration_threshold_us=0")
        r = run([prog], cwd=d, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        traces = [f for f in os.listdir(d) if f.startswith("xray-log.")]
        self.assertEqual(len(traces), 1, traces)
        data = os.path.join(d, "xray.data")
        r = run([PERFGRAFT, "xray", os.path.join(d, traces[0]), "--binary", prog, "-o", data])
        self.assertEqual(r.returncode, 0, r.stderr)
        type(self)._data = data
        return data

    def perf(self, args, **env):
        e = dict(os.environ, HOME=self.home, PYTHONDONTWRITEBYTECODE="1")
        e.pop("TRACEEVENT_PLUGIN_DIR", None)
        e.pop("PERF_EXEC_PATH", None)
        e.update(env)
        return run(["perf", "--buildid-dir", os.path.join(self.tmp.name, "buildid")] + args,
                   cwd=self.tmp.name, env=e)

    def assert_call_graph(self, r):
        self.assertEqual(r.returncode, 0, r.stderr)
        # with the plugin: "top(int) {" ... "} /* leaf ... */"; without it,
        # the events' print format: "id=N depth=N"
        entries = [ln for ln in r.stdout.splitlines() if " xray:function_entry: " in ln]
        self.assertTrue(entries, r.stdout[:2000])
        for ln in entries:
            self.assertNotIn("id=", ln)
            self.assertTrue(ln.endswith("{"), ln)
        self.assertTrue(any(ln.endswith(" top {") or "top" in ln for ln in entries), entries)
        # no "plugin" complaint (a .so without tep_plugin_loader, ...)
        self.assertNotIn("plugin", r.stderr)

    def test_plugin_in_build_dir_alone(self):
        data = self.xray_data()
        plugin = [s for s, d in self.installed.items() if os.path.basename(s) == "plugin_xray.so"]
        self.assertEqual(len(plugin), 1, plugin)
        pdir = os.path.dirname(plugin[0])
        others = [f for f in os.listdir(pdir) if f.endswith(".so") and f != "plugin_xray.so"]
        self.assertEqual(others, [], "%s holds other .so files perf would try" % pdir)
        self.assert_call_graph(self.perf(["script", "-i", data], TRACEEVENT_PLUGIN_DIR=pdir))
        # and without it, perf prints the print format (the test above sees
        # the plugin's work, not perf's default)
        r = self.perf(["script", "-i", data])
        self.assertIn(" xray:function_entry: id=", r.stdout)

    def test_installed_plugin_found(self):
        data = self.xray_data()
        plugin = self.dest + self.installed_as("plugin_xray.so")
        self.assert_call_graph(self.perf(["script", "-i", data],
                                         TRACEEVENT_PLUGIN_DIR=os.path.dirname(plugin)))
        # the one fixed directory perf 6.1 searches: what --prefix=$HOME/.local
        # installs into with the default traceevent_plugin_dir
        local = os.path.join(self.home, ".local", "lib", "traceevent", "plugins")
        os.makedirs(local, exist_ok=True)
        try:
            shutil.copy(plugin, local)
            self.assert_call_graph(self.perf(["script", "-i", data]))
        finally:
            shutil.rmtree(os.path.join(self.home, ".local"))

    def test_script_found_by_name(self):
        data = self.xray_data()
        script = self.dest + self.installed_as("xray-account.py")
        exec_path = os.path.dirname(os.path.dirname(os.path.dirname(script)))
        self.assertEqual(os.path.relpath(script, exec_path), "scripts/python/xray-account.py")
        ref = self.perf(["script", "-i", data, "-s",
                         os.path.join(ROOT, "perf-scripts", "xray-account.py")])
        self.assertEqual(ref.returncode, 0, ref.stderr)
        self.assertIn("Functions with latencies: 3", ref.stdout)
        r = self.perf(["script", "-i", data, "-s", "xray-account.py"], PERF_EXEC_PATH=exec_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, ref.stdout)
        # perf script report NAME runs scripts/python/bin/NAME-report
        ref = self.perf(["script", "-i", data, "-s",
                         os.path.join(ROOT, "perf-scripts", "xray-account.py"),
                         "--", "-f", "csv", "-s", "count"])
        r = self.perf(["script", "report", "xray-account", "-i", data, "--", "-f", "csv",
                       "-s", "count"], PERF_EXEC_PATH=exec_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, ref.stdout)
        self.assertTrue(r.stdout.startswith("funcid,count,"), r.stdout)
        r = self.perf(["script", "-l"], PERF_EXEC_PATH=exec_path)
        self.assertRegex(r.stdout, r"(?m)^\s+xray-account .*llvm-xray account")


if __name__ == "__main__":
    unittest.main()
