"""Function names demangled as perf and llvm-xray show them.

An XRay program whose functions carry mangled names (asm labels): Rust
legacy names (_ZN...17h<hash>E, with $..$ escapes) must read as perf 6.1
names them (`perf probe -x BIN -F`: the hash dropped, the escapes
decoded), C++ names with parameters as llvm-xray names them (`llvm-xray
extract --symbolize`, which keeps the parameter list perf 6.1 drops
without -v).  The names come from `perfgraft xray --binary`'s xray:function
events, printed by `perf script`."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
CLANG = shutil.which("clang-14") or shutil.which("clang")
LLVM_XRAY = shutil.which("llvm-xray-14") or shutil.which("llvm-xray")

RUST = ["_ZN4core3fmt5write17h0123456789abcdefE",
        "_ZN66_$LT$alloc..vec..Vec$LT$T$GT$$u20$as$u20$core..ops..drop..Drop$GT$"
        "4drop17h9d4d1b2b3c4e5f60E",
        "_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17h2f3a4b5c6d7e8f90E",
        "_ZN2ns5thing17h0000000000000000E"]     # too few distinct digits: not a hash
CXX = ["_ZN3foo3barEi", "_ZN3foo3bazERKSt6vectorIiSaIiEE"]


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, **kw)


@unittest.skipIf(shutil.which("perf") is None, "perf is not installed")
@unittest.skipIf(CLANG is None, "clang is not installed")
@unittest.skipIf(LLVM_XRAY is None, "llvm-xray is not installed")
class Demangle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="pg-demangle-")
        cls.addClassCleanup(cls.tmp.cleanup)
        d = cls.tmp.name
        src = ["#include <stdio.h>"]
        calls = []
        for i, name in enumerate(RUST + CXX):
            src.append('__attribute__((xray_always_instrument, noinline)) int f%d(int x) '
                       '__asm__("%s");' % (i, name))
            src.append("int f%d(int x) { return x + %d; }" % (i, i))
            calls.append("f%d(argc)" % i)
        src.append("int main(int argc, char **argv) { (void)argv; printf(\"%%d\\n\", %s); "
                   "return 0; }" % " + ".join(calls))
        with open(os.path.join(d, "prog.c"), "w") as f:
            f.write("\n".join(src) + "\n")
        cls.prog = os.path.join(d, "prog")
        r = run([CLANG, "-fxray-instrument", os.path.join(d, "prog.c"), "-o", cls.prog])
        if r.returncode != 0:
            raise unittest.SkipTest("clang -fxray-instrument: %s" % r.stderr[-300:])
        env = dict(os.environ, XRAY_OPTIONS="patch_premain=true xray_mode=xray-basic "
                   "verbosity=0 xray_logfile_base=%s/xray-log." % d,
                   XRAY_BASIC_OPTIONS="func_duration_threshold_us=0")
        r = run([cls.prog], cwd=d, env=env)
        assert r.returncode == 0, r.stderr
        trace = [f for f in os.listdir(d) if f.startswith("xray-log.")][0]
        data = os.path.join(d, "xray.data")
        r = run([PERFGRAFT, "xray", os.path.join(d, trace), "--binary", cls.prog, "-o", data])
        assert r.returncode == 0, r.stderr
        r = run(["perf", "--buildid-dir", os.path.join(d, "buildid"), "script", "-i", data],
                env=dict(os.environ, HOME=d))
        assert r.returncode == 0, r.stderr
        # xray:function: id=N addr=0x... name=NAME file=...
        cls.names = {}
        for m in re.finditer(r" xray:function: id=(\d+) addr=0x[0-9a-f]+ name=(.*) file=",
                             r.stdout):
            cls.names[int(m.group(1))] = m.group(2)
        # the ids of the mangled names, from llvm-xray's map
        r = run([LLVM_XRAY, "extract", cls.prog])
        cls.ids = {m.group(2): int(m.group(1)) for m in re.finditer(
            r"id: (\d+), address: 0x[0-9A-F]+, function: 0x([0-9A-F]+), kind: function-enter",
            r.stdout)}
        r = run([LLVM_XRAY, "extract", "--symbolize", cls.prog])
        cls.xray_names = {int(m.group(1)): m.group(2).strip("'") for m in re.finditer(
            r"id: (\d+), address: 0x[0-9A-F]+, function: 0x[0-9A-F]+, kind: function-enter,"
            r" always-instrument: true, function-name: ('[^']*'|[^,]*),", r.stdout)}
        # perf's names of the same symbols, in the order of their addresses
        r = run(["readelf", "-sW", cls.prog])
        cls.sym_id = {}
        addr_id = {int(a, 16): i for a, i in cls.ids.items()}
        for ln in r.stdout.splitlines():
            f = ln.split()
            if len(f) == 8 and f[3] == "FUNC" and f[7] in RUST + CXX:
                cls.sym_id[f[7]] = addr_id.get(int(f[1], 16))
        r = run(["perf", "probe", "-x", cls.prog, "-F", "--filter", "*"],
                env=dict(os.environ, HOME=d))
        cls.perf_names = set(r.stdout.split("\n"))

    def test_rust_legacy_as_perf(self):
        for sym in RUST:
            i = self.sym_id.get(sym)
            self.assertIsNotNone(i, sym)
            name = self.names.get(i)
            self.assertIn(name, self.perf_names, "%s: perfgraft says %r" % (sym, name))
            self.assertNotEqual(name, sym)

    def test_cxx_as_llvm_xray(self):
        for sym in CXX:
            i = self.sym_id.get(sym)
            self.assertIsNotNone(i, sym)
            self.assertEqual(self.names.get(i), self.xray_names.get(i), sym)


if __name__ == "__main__":
    unittest.main()
