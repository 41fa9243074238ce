"""perfgraft inject and clocks: a jitdump with arch timestamps (TSC) is
converted through the recording's TIME_CONV record; without one, or with
CLOCK_MONOTONIC dump times and events recorded on another clock, the dump is
skipped with a warning that says what to re-record, and the run goes on."""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jitdump_gen  # noqa: E402
import perfdata_gen as pg  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(HERE, "..", "build", "perfgraft"))
PID = 4242
CODE = 0x7f0000001000
SHIFT, MULT, ZERO = 10, 700, 5_000_000_000


def tsc_to_ns(cyc):
    """perf's conversion (tsc_to_perf_time), written out independently."""
    quot, rem = cyc >> SHIFT, cyc & ((1 << SHIFT) - 1)
    return ZERO + quot * MULT + ((rem * MULT) >> SHIFT)


class Clocks(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="pg-clock-")
        self.addCleanup(self.tmp.cleanup)
        self.d = self.tmp.name

    def make(self, arch, time_conv, mono_attrs, cycles=(1 << 40) + 12345, rc=0):
        jd = jitdump_gen.JitdumpBuilder(pid=PID, flags=1 if arch else 0)
        stamp = cycles if arch else 6_000_000_000
        jd.load(b"JS:*hot", jitdump_gen.x86_64_code(0x40, 1), CODE, 0, timestamp=stamp)
        dump = os.path.join(self.d, "jit-%d.dump" % PID)
        jd.write(dump)
        flags = [f for f in pg.DEFAULT_FLAGS if mono_attrs or f != pg.F_USE_CLOCKID]
        b = pg.PerfDataBuilder(attrs=[pg.Attr(ids=[7], flags=flags)])
        if time_conv:
            b.raw_record(79, 0, struct.pack("<QQQQQBB6x", SHIFT, MULT, ZERO, 0, 0, 1, 0))
        b.comm(PID, PID, "node", 1)
        b.mmap2(PID, PID, 0x10000, 4096, 0, dump, 2, prot=5, role="marker")
        t = tsc_to_ns(cycles) if arch else stamp
        b.sample(CODE + 8, PID, PID, t + 1000)
        b.finished_round()
        path = os.path.join(self.d, "perf.data")
        b.write(path)
        out = os.path.join(self.d, "out.data")
        r = subprocess.run([PERFGRAFT, "inject", "-i", path, "-o", out],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, rc, r.stderr)
        if rc:	# the only dump left out: nothing injected, no output
            self.assertIn("perfgraft: nothing injected: ", r.stderr)
            self.assertFalse(os.path.exists(out))
            return r.stderr, []
        d = json.loads(subprocess.run([PERFGRAFT, "dump", "--json", out],
                                      capture_output=True, text=True).stdout)
        mm = [x for x in d["records"] if x["name"] == "MMAP2" and x["filename"].endswith(".so")]
        return r.stderr, mm

    def test_arch_timestamps_converted_with_time_conv(self):
        cyc = (1 << 40) + 12345
        err, mm = self.make(arch=True, time_conv=True, mono_attrs=False, cycles=cyc)
        self.assertEqual(len(mm), 1, err)
        self.assertEqual(mm[0]["time"], tsc_to_ns(cyc))
        self.assertEqual(mm[0]["start"], CODE)

    def test_arch_timestamps_without_time_conv_warn(self):
        err, mm = self.make(arch=True, time_conv=False, mono_attrs=True, rc=1)
        self.assertIn("TIME_CONV", err)
        self.assertIn("jit-%d.dump" % PID, err)

    def test_monotonic_dump_needs_k_mono(self):
        err, mm = self.make(arch=False, time_conv=False, mono_attrs=False, rc=1)
        self.assertIn("perf record -k mono", err)

    def test_monotonic_dump_times_used_as_they_are(self):
        err, mm = self.make(arch=False, time_conv=False, mono_attrs=True)
        self.assertEqual(len(mm), 1, err)
        self.assertEqual(mm[0]["time"], 6_000_000_000)


if __name__ == "__main__":
    unittest.main()
