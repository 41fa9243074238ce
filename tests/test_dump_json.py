#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`perfgraft dump --json` when it fails: stdout holds exactly one JSON
document (json.loads of the whole of it) whose "error" is the message, the
same text stderr prints after "perfgraft: "; the exit status is 1 for bad
input and 2 for a usage error, as without --json.

  Missing       a nonexistent file, a directory
  Empty         an empty file, empty standard input
  Unrecognised  text, an ELF header, random bytes, a perf.data magic with
                a wrong version; the same on standard input (read as
                perf.data: a pipe carries nothing else)
  Formats       for jitdump, perf.data, XRay and gperftools: the first 1-3
                bytes of a valid file (too short to recognise), a header
                cut short (gperftools: unrecognised), and damage that ends
                the walk (mid-way for
                jitdump and perf.data, whose readers stop there; a bad
                header version for XRay and gperftools, whose damage inside
                the data is a warning): the format's own error object,
                with the records read before it
  Usage         no FILE, two FILEs, an unknown option (before or after
                --json), an unknown short option in a cluster with -j

Binary under test: $PERFGRAFT (default build/perfgraft).
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import jitdump_gen as J  # noqa: E402
import perfdata_gen as G  # noqa: E402
import xray_gen as X  # noqa: E402

PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(ROOT, "build", "perfgraft"))
KEEP_TMP = os.environ.get("PERFGRAFT_KEEP_TMP") == "1"
TIMEOUT = 60
UNRECOGNISED = ("offset 0: unrecognized format (perfgraft dump reads jitdump, perf.data, "
                "XRay and gperftools CPU profile files)")
USAGE = "(usage: perfgraft dump [-v] [--json|--format=text|json] [--time-order] [-o OUT] [-i] FILE)"


def setUpModule():
    if not os.path.isfile(PERFGRAFT):
        raise unittest.SkipTest("%s not built (ninja -C build)" % PERFGRAFT)


def gperf_profile(version=0):
    """A 64-bit little-endian CPU profile: header (0, 3, version, period
    10000 us, 0), one record (count 2, depth 1, one PC), the trailer."""
    return struct.pack("<5Q", 0, 3, version, 10000, 0) + struct.pack("<3Q", 2, 1, 0x401000) \
        + struct.pack("<3Q", 0, 1, 0)


class DumpJson(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="perfgraft-dumpjson.")
        if KEEP_TMP:
            sys.stderr.write("info: keeping %s\n" % cls.tmp)
        # one valid file per format
        cls.perfdata = G.make_case(os.path.join(cls.tmp, "pd"), "p", jitdump="none")
        b = J.JitdumpBuilder()
        b.load(b"f0", J.x86_64_code(0x20, 0), J.BASE64, 0)
        cls.jd_second = b.load(b"f1", J.x86_64_code(0x20, 1), J.BASE64 + 0x40, 1)
        cls.jitdump = cls.write("jit-4242.dump", bytes(b.buf))
        cls.xray = cls.write("xray-log.x.v5", X.small_fdr_v5().data)
        cls.gperf = cls.write("cpu.prof", gperf_profile())

    @classmethod
    def tearDownClass(cls):
        if not KEEP_TMP:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def write(cls, name, data):
        p = os.path.join(cls.tmp, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def dump(self, args, want_rc, stdin=None):
        """Runs dump with args; asserts the exit status and one JSON
        document on stdout with an error; returns it."""
        p = subprocess.run([PERFGRAFT, "dump"] + args, input=stdin,
                           stdin=None if stdin is not None else subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
        err = p.stderr.decode("utf-8", "replace")
        what = "perfgraft dump %s" % " ".join(args)
        self.assertEqual(p.returncode, want_rc, "%s: exit %d, want %d\n%s"
                         % (what, p.returncode, want_rc, err))
        self.assertTrue(p.stdout.strip(), "%s: empty stdout (stderr: %s)" % (what, err))
        try:
            doc = json.loads(p.stdout.decode("utf-8"))
        except ValueError as e:
            self.fail("%s: stdout is not one JSON document (%s):\n%r" % (what, e, p.stdout[:500]))
        self.assertIsInstance(doc, dict)
        self.assertIsInstance(doc.get("error"), str, "%s: no error: %s" % (what, doc))
        self.assertTrue(doc["error"])
        if want_rc == 1:
            self.assertIn("perfgraft: %s\n" % doc["error"], err,
                          "%s: the JSON error is not what stderr says" % what)
        doc["_stderr"] = err
        return doc

    # -- missing -----------------------------------------------------------
    def test_nonexistent(self):
        p = os.path.join(self.tmp, "no-such-file")
        doc = self.dump(["--json", p], 1)
        self.assertEqual(doc["error"], "%s: No such file or directory" % p)
        self.assertEqual(doc["file"], p)
        self.assertIsNone(doc["format"])

    def test_directory(self):
        # the message every command gives a directory (test_cli_grammar)
        doc = self.dump(["--json", self.tmp], 1)
        self.assertEqual(doc["error"], "%s: is a directory (perfgraft dump reads a jitdump, "
                         "perf.data, XRay trace or gperftools CPU profile)" % self.tmp)

    # -- empty -------------------------------------------------------------
    def test_empty(self):
        p = self.write("empty", b"")
        doc = self.dump(["--json", p], 1)
        self.assertEqual(doc["error"], "%s: offset 0: empty file" % p)
        self.assertIsNone(doc["format"])
        # standard input is sniffed like a file
        doc = self.dump(["--json", "-"], 1, stdin=b"")
        self.assertEqual(doc["error"], "standard input: offset 0: empty file")
        self.assertIsNone(doc["format"])

    # -- unrecognised --------------------------------------------------------
    def test_unrecognised(self):
        elf = b"\x7fELF\x02\x01\x01" + bytes(57)
        for name, data in (("text", b"hello, this is not a profile\n"), ("elf", elf),
                           ("random", bytes((i * 37 + 11) & 0xFF for i in range(300))),
                           ("perffile-v1", b"PERFFILE" + bytes(96))):
            with self.subTest(input=name):
                p = self.write(name, data)
                doc = self.dump(["--json", p], 1)
                if name == "perffile-v1":
                    # version 1 is read; an attr_size of 0 tells no byte order
                    self.assertEqual(doc["format"], "perf.data")
                    self.assertRegex(doc["error"], r"^%s: offset 16: perf.data version 1 "
                                     % re.escape(p))
                elif name == "elf":
                    # a format perfgraft knows is named (test_cli_grammar)
                    self.assertRegex(doc["error"], r"^%s: offset 0: an ELF file, not " % re.escape(p))
                    self.assertIsNone(doc["format"])
                else:
                    self.assertEqual(doc["error"], "%s: %s" % (p, UNRECOGNISED))
                    self.assertIsNone(doc["format"])
                # the same bytes on a pipe: sniffed as a file is (a file-mode
                # perf.data is read from a temporary copy)
                doc = self.dump(["--json", "-"], 1, stdin=data)
                if name == "perffile-v1":
                    self.assertRegex(doc["error"], r"^<stdin>: offset 16: perf.data version 1 ")
                elif name == "elf":
                    self.assertRegex(doc["error"], r"^standard input: offset 0: an ELF file, not ")
                else:
                    self.assertEqual(doc["error"], "standard input: %s" % UNRECOGNISED)

    # -- each format: too short, cut header, damage --------------------------
    def check_prefixes(self, path):
        data = self.read(path)
        for n in (1, 2, 3):
            p = self.write("prefix%d-%s" % (n, os.path.basename(path)), data[:n])
            doc = self.dump(["--json", p], 1)
            self.assertRegex(doc["error"], r"^%s: offset 0: " % re.escape(p))

    def test_perfdata(self):
        c = self.perfdata
        data = self.read(c.path)
        self.check_prefixes(c.path)
        for n in (12, 60):
            p = self.write("cut%d.data" % n, data[:n])
            doc = self.dump(["--json", p], 1)
            self.assertEqual(doc["format"], "perf.data")
            self.assertRegex(doc["error"], r"^%s: offset 0: " % re.escape(p))
        # a record size below 8 in the middle: the records before it listed
        recs = c.builder.records
        r = recs[4]
        bad = bytearray(data)
        struct.pack_into("<H", bad, r.offset + 6, 4)
        p = self.write("mid.data", bytes(bad))
        doc = self.dump(["--json", p], 1)
        self.assertEqual(doc["format"], "perf.data")
        self.assertEqual(doc["error"], "%s: offset %d: record size 4 is smaller than its "
                         "8-byte header" % (p, r.offset))
        self.assertEqual([x["offset"] for x in doc["records"]], [x.offset for x in recs[:4]])

    def test_jitdump(self):
        data = self.read(self.jitdump)
        self.check_prefixes(self.jitdump)
        p = self.write("cut.dump", data[:20])
        doc = self.dump(["--json", p], 1)
        self.assertEqual(doc["format"], "jitdump")
        self.assertRegex(doc["error"], r"^%s: offset \d+: " % re.escape(p))
        r = self.jd_second
        bad = bytearray(data)
        struct.pack_into("<I", bad, r.offset + 4, 8)
        p = self.write("mid.dump", bytes(bad))
        doc = self.dump(["--json", p], 1)
        self.assertEqual(doc["format"], "jitdump")
        self.assertEqual(doc["error"], "%s: offset %d: record total_size 8 is smaller than "
                         "the 16-byte record header" % (p, r.offset))
        self.assertEqual(len(doc["records"]), 1)

    def test_xray(self):
        data = self.read(self.xray)
        self.check_prefixes(self.xray)
        p = self.write("cut.xray", data[:31])
        doc = self.dump(["--json", p], 1)
        self.assertRegex(doc["error"], r"^%s: offset \d+: " % re.escape(p))
        bad = bytearray(data)
        struct.pack_into("<H", bad, 0, 6)       # version 6
        p = self.write("v6.xray", bytes(bad))
        doc = self.dump(["--json", p], 1)
        self.assertRegex(doc["error"], r"^%s: offset 0: " % re.escape(p))

    def test_gperf(self):
        self.check_prefixes(self.gperf)
        # a header cut short is not told from other bytes (the probe needs
        # the five header words): an unrecognised file
        p = self.write("cut.prof", self.read(self.gperf)[:20])
        doc = self.dump(["--json", p], 1)
        self.assertEqual(doc["error"], "%s: %s" % (p, UNRECOGNISED))
        p = self.write("java.prof", gperf_profile(version=1))
        doc = self.dump(["--json", p], 1)
        self.assertEqual(doc["format"], "gperftools-cpu")
        self.assertRegex(doc["error"], r"^%s: offset \d+: " % re.escape(p))

    # -- usage -------------------------------------------------------------
    def test_usage(self):
        f = self.jitdump
        for args, msg in ((["--json"], "no FILE given"),
                          (["--json", f, f], "more than one FILE given"),
                          (["--bogus", "--json", f], "unrecognized option '--bogus'"),
                          (["--json", f, "--bogus"], "unrecognized option '--bogus'"),
                          (["-jx", f], "invalid option -- 'x'")):
            with self.subTest(args=args):
                doc = self.dump(args, 2)
                self.assertEqual(doc["error"], "%s %s" % (msg, USAGE))
                self.assertIsNone(doc["file"])
                self.assertIn("usage: perfgraft dump", doc["_stderr"])
        # without --json, usage errors stay as they were: nothing on stdout
        p = subprocess.run([PERFGRAFT, "dump", "--bogus", f], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=TIMEOUT)
        self.assertEqual((p.returncode, p.stdout), (2, b""))


if __name__ == "__main__":
    unittest.main()
