# SPDX-License-Identifier: MIT
"""perfgraft gperf --pprof-frames against perl pprof's default frame
removal, on profiles whose addresses nothing symbolizes.

perl pprof (google-pprof 2.10, RemoveUninterestingFrames) by default
deletes, while every stack has the same second frame (taken for the
profiler's signal handler), that frame from all stacks, and with it a
following frame equal to the first when 3 frames are left; it prints
"Removing ADDR from all stack traces." for each.  perfgraft keeps every
frame unless asked (--pprof-frames).  Here, per address:

  - with --pprof-frames, flat ticks from `perf report --no-children` and
    cumulative ticks from `perf report --children` equal
    `google-pprof --text --cum`'s flat and cum columns, and perfgraft's
    summary counts as many removed second frames as pprof prints
    "Removing" lines;
  - without it, they equal `google-pprof --text --cum --no-auto-signal-frm`
    (the documented divergence), and differ from pprof's default where
    pprof removed something.

Inputs: the legacy CPU profiles google/pprof commits as test data
(../shared/ext/pprof, or $PERFGRAFT_EXT/pprof: cppbench.cpu, whose mapped files are not here, and
the Go runtime's gobench.cpu and go.crc32.cpu, which have no mapped
objects; skipped when that directory is absent; java.cpu is a version 1
profile perfgraft refuses), and synthetic profiles made for the rule's
branches (several passes, the duplicate-frame step with 2 and 3 frames
left, a caller of 0, a stack of one frame, 32-bit slots).

pprof is given an empty file as the program, so that no address gets a
name and both tools print addresses: pprof the PC it looked up (the
interrupted PC, return addresses minus 1), perf "0x%016x".  perf report
prints an unresolved *sample IP* inside a mapping at its mapping-relative
address (IP - start + file offset) and in its --children table gives it a
row of its own besides the absolute row of the same frame in the call
chains; so pprof's flat addresses are turned into what perf prints for
them, and the --children rows that are only such relative copies are left
out (their own value is the flat count, already compared).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gperf_gen  # noqa: E402
import pprof_ref  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
# $PERFGRAFT_EXT: the ext directory when the checkout is not beside it
EXT = os.path.join(os.environ.get("PERFGRAFT_EXT") or
                   os.path.join(ROOT, "..", "shared", "ext"), "pprof")
EXT_PROFILES = ["profile/cppbench.cpu", "driver/cppbench.cpu", "profile/gobench.cpu",
                "profile/go.crc32.cpu"]
REMOVING = re.compile(r"^Removing \S+ from all stack traces\.$", re.M)

H1, H2 = 0x7F0000001000, 0x7F0000002000     # "signal handler" frames


def synthetic():
    """{name: (records, bits)}: the rule's branches."""
    a, b, c, m = 0x401100, 0x401200, 0x401300, 0x401500
    return {
        # two passes (H1, then H2), then the stacks differ; after the
        # second pass a frame equal to the first goes too when 3 frames
        # are left (a), stays with 2 left (b)
        "two-passes-dup": ([(5, [a, H1, H2, a, m, 0x401900]),
                            (3, [b, H1, H2, b]),
                            (2, [c, H1, H2, 0x401400, m]),
                            (4, [a, H1, H2, c + 5, m])], 64),
        # the duplicate right after the first removal (3 frames left)
        "dup-first-pass": ([(7, [a, H1, a, m]), (2, [b, H1, c + 5, m])], 64),
        # every stack's second frame is 0 (an unwinder that gave up): pprof
        # compares it minus 1 and removes it; a 0 caller never equals the
        # first PC
        "zero-second": ([(3, [a, 0, m]), (4, [b, 0, 0, m]), (1, [c, 0])], 64),
        # a one-frame stack: nothing is removed
        "single-frame": ([(6, [a, H1, m]), (1, [b])], 64),
        # stacks that differ at once: nothing is removed
        "no-common": ([(6, [a, m, 0x401900]), (2, [b, c + 5, m])], 64),
        # 32-bit slots, one pass
        "le32": ([(4, [0x08049123, 0xF7F00100, 0x08049200, 0x08049310]),
                  (2, [0x08049140, 0xF7F00100, 0x08049140, 0x08049310]),
                  (3, [0x08049150, 0xF7F00100, 0x08049310])], 32),
    }


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          errors="replace", timeout=300, **kw)


@unittest.skipIf(shutil.which("perf") is None, "perf is not installed")
@unittest.skipIf(pprof_ref.google_pprof() is None, "google-pprof (perl pprof) is not installed")
class GperfPprofFrames(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="pg-gperf-pprof-frames-")
        cls.tmp = cls._tmp.name
        cls.buildid = os.path.join(cls.tmp, "buildid")
        os.mkdir(cls.buildid)
        cls.perftmp = os.path.join(cls.tmp, "perftmp")
        os.mkdir(cls.perftmp)
        # an empty file as pprof's program: no address gets a name
        cls.nobin = os.path.join(cls.tmp, "noprogram")
        open(cls.nobin, "wb").close()

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def convert(self, prof, *opts):
        out = os.path.join(self.tmp, "out.data")
        r = run([PERFGRAFT, "gperf", prof, "-o", out] + list(opts))
        self.assertEqual(r.returncode, 0, r.stderr)
        return out, r.stderr

    def pprof(self, prof, no_auto):
        return pprof_ref.pprof_text(self.nobin, prof, no_auto_signal_frm=no_auto,
                                    extra=("--cum",))

    def expected(self, prof, pp):
        """pprof's table keyed as perf report names the addresses:
        (flat {name: ticks}, cum {name: ticks}, the relative names of flat
        addresses that perf prints apart from their absolute row)."""
        maps = [m for m in pprof_ref.profile_maps(prof) if "x" in m.perms]
        flat, cum, rel_only = {}, {}, set()
        for name, (f, c) in pp.rows.items():
            self.assertTrue(re.fullmatch(r"(0x)?[0-9a-f]+", name), "pprof named %r" % name)
            addr = int(name, 16)
            cum["0x%016x" % addr] = c
            if f:
                m = pprof_ref.mapping_at(maps, addr)
                rel = "0x%016x" % (addr if m is None else addr - m.start + m.offset)
                flat[rel] = f
                if m is not None and rel != "0x%016x" % addr:
                    rel_only.add(rel)
        return flat, cum, rel_only

    def perf(self, data, tick_ns, rel_only):
        fl = pprof_ref.perf_report(data, self.buildid, False, self.perftmp, tick_ns=tick_ns)
        ch = pprof_ref.perf_report(data, self.buildid, True, self.perftmp, tick_ns=tick_ns)
        self.assertEqual(fl.total, ch.total)
        cum = {}
        for k, v in ch.rows.items():
            if k in rel_only and fl.rows.get(k) == v:
                continue    # the relative copy of a sample IP (see above)
            cum[k] = v
        return fl.total, {k: v for k, v in fl.rows.items() if v}, cum

    def check(self, prof, tick_ns, expect_removal=None, diverges=None):
        """Compares both conversions with pprof; returns pprof's number of
        "Removing" lines.  diverges: whether perfgraft's default cum must
        differ from pprof's default (None: when pprof removed a frame)."""
        for opt in (True, False):
            with self.subTest(pprof_frames=opt):
                pp = self.pprof(prof, no_auto=not opt)
                passes = len(REMOVING.findall(pp.stderr))
                if not opt:
                    self.assertEqual(passes, 0, pp.stderr)
                    removed = len(REMOVING.findall(self.pprof(prof, False).stderr))
                data, err = self.convert(prof, *(("--pprof-frames",) if opt else ()))
                if opt:
                    removed = passes
                    self.assertIn(", %d second frames removed from every stack" % passes, err)
                else:
                    self.assertNotIn("second frames removed", err)
                flat, cum, rel_only = self.expected(prof, pp)
                total, pflat, pcum = self.perf(data, tick_ns, rel_only)
                self.assertEqual(total, pp.total)
                self.assertEqual(pflat, flat, "flat, pprof:\n" + pp.stdout)
                self.assertEqual(pcum, cum, "cum, pprof%s:\n%s"
                                 % ("" if opt else " --no-auto-signal-frm", pp.stdout))
                if not opt and (removed if diverges is None else diverges):
                    # the documented divergence: pprof's default cum differs
                    dflat, dcum, _r = self.expected(prof, self.pprof(prof, no_auto=False))
                    self.assertNotEqual(pcum, dcum)
        if expect_removal is not None:
            self.assertEqual(removed > 0, expect_removal, prof)
        return removed

    def test_ext_legacy_profiles(self):
        if not os.path.isdir(EXT):
            self.skipTest("%s is absent" % EXT)
        removed = {}
        for rel in EXT_PROFILES:
            prof = os.path.join(EXT, rel)
            if not os.path.exists(prof):
                continue
            with self.subTest(profile=rel):
                # all of them: 64-bit, period 10000 us
                removed[rel] = self.check(prof, 10000 * 1000)
        if not removed:
            self.skipTest("none of %s in %s" % (EXT_PROFILES, EXT))
        # pprof's own tests: cppbench.cpu loses one frame (its String()
        # shows no handler frame), go.crc32.cpu several (the Go runtime's
        # profiling frames), gobench.cpu none
        want = {"profile/cppbench.cpu": 1, "driver/cppbench.cpu": 1, "profile/gobench.cpu": 0}
        for rel, n in want.items():
            if rel in removed:
                self.assertEqual(removed[rel], n, rel)
        if "profile/go.crc32.cpu" in removed:
            self.assertGreater(removed["profile/go.crc32.cpu"], 1)

    def test_synthetic_branches(self):
        expect = {"two-passes-dup": True, "dup-first-pass": True, "zero-second": True,
                  "single-frame": False, "no-common": False, "le32": True}
        # the removed 0 frames are dropped anyway: no divergence there
        diverges = dict(expect, **{"zero-second": False})
        for name, (records, bits) in synthetic().items():
            with self.subTest(case=name):
                case = gperf_gen.build(name, bits=bits, records=records)
                prof = os.path.join(self.tmp, name + ".prof")
                case.write(prof)
                self.check(prof, 10000 * 1000, expect_removal=expect[name],
                           diverges=diverges[name])

    def test_option_in_help(self):
        r = run([PERFGRAFT, "gperf", "--help"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--pprof-frames", r.stdout)


if __name__ == "__main__":
    unittest.main()
