#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The memory-layout images (`perfgraft inject`'s default layout) through
perf's build-id cache and `perf archive`, on a real node recording
(tests/perf_fixture.py, fp call graph, ~1 s).

Covered:
  1. the images are sparse files where their layout has holes: every
     filesystem block that lies wholly between the bytes the image
     defines (ELF header, each function's code at its file offset, the
     other sections) is a hole (SEEK_DATA skips it), and at least one
     image of the recording has such a block, so st_blocks * 512 <
     st_size for it;
  2. `perf buildid-cache -a IMAGE` (the cache on another filesystem when
     /dev/shm is one): the cached copy has the image's bytes, and with
     OUTPUT.d renamed away `perf report --sort sym` of the injected data
     shows the same rows (percentages, samples, symbols) as with the
     images in place; with an empty cache instead the JIT symbols are
     gone, so the cache is what perf used;
  3. `perf archive` of the injected data (PERF_BUILDID_DIR and
     --buildid-dir the cache of 2): the tarball holds the images' cache
     entries; extracted into a fresh directory C it is a build-id
     directory as it is (`perf --buildid-dir C`), and the report with
     OUTPUT.d renamed away shows the same rows;
  4. the /tmp rule: `perfgraft elf -o /tmp --prefix jitted-N` names its
     images /tmp/pg-jitted-N-rR-gG.so, never /tmp/jitted-N-*; elsewhere
     the prefix is kept as it is.

Every perf command runs with --buildid-dir in a temporary directory;
~/.debug is checked to be untouched (pf.home_debug_snapshot).  Set
PERFGRAFT_KEEP_TMP=1 to keep the recording directory.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jitdump_gen as gen  # noqa: E402
import jitdump_oracle  # noqa: E402
import perf_fixture as pf  # noqa: E402
from test_memory_layout import Elf  # noqa: E402  (the class only, no tests)

KEEP_TMP = os.environ.get("PERFGRAFT_KEEP_TMP") == "1"
MS = 1000
SHM = "/dev/shm"
REGION_GAP = 1 << 20        # PG_ELF_REGION_GAP


def info(msg):
    sys.stderr.write("info: %s\n" % msg)
    sys.stderr.flush()


REPORT_ARGS = ("--stdio", "--no-children", "--sort", "sym", "-g", "none",
               "-F", "overhead,sample,sym")
_ROW = re.compile(r"^\s*(\d+\.\d+)%\s+(\d+)\s+\[(.)\]\s(.*?)\s*$")


def report_rows(text):
    """perf report -F overhead,sample,sym -> [(percent str, samples, sym)]
    in perf's order (the tip line and the headers dropped)."""
    out = []
    for ln in text.splitlines():
        if ln.startswith("#"):
            continue
        m = _ROW.match(ln)
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(4)))
    return out


def jit_rows(rows):
    return [r for r in rows if pf.is_jit_name(r[2])]


def rows_diff(want, got, limit=15):
    w, g = set(want), set(got)
    lines = ["  only before: %r" % (r,) for r in sorted(w - g)[:limit]]
    lines += ["  only after:  %r" % (r,) for r in sorted(g - w)[:limit]]
    return "\n".join(lines) or "  (same rows, different order)"


def table_ranges(elf, loads):
    """[start, end) file ranges of the unwind tables perfgraft writes after
    a function's code where the process had them (UNWINDING_INFO with a
    mapped_size: at align8(code_size), mapped_size bytes).  The image's
    base is found from its functions whose (name, size) is unique in the
    dump; most of them must agree on it."""
    by_key = {}
    for l in loads:
        by_key.setdefault((l.name, l.code_size), []).append(l)
    funcs = elf.funcs()
    votes = {}
    for name, val, size in funcs:
        ls = by_key.get((name, size), [])
        if len(ls) == 1:
            b = ls[0].code_addr - val
            votes[b] = votes.get(b, 0) + 1
    if not votes:
        raise AssertionError("no function of the image matches the dump")
    base, n = max(votes.items(), key=lambda kv: kv[1])
    if n * 2 < sum(votes.values()):
        raise AssertionError("no common base for the image: %s" % votes)
    have = {(val, size) for _, val, size in funcs}
    out = []
    for l in loads:
        u = l.unwind
        off = l.code_addr - base
        if u and u.mapped_size and (off, l.code_size) in have:
            at = off + ((l.code_size + 7) & ~7)
            out.append((at, at + u.mapped_size))
    return out


def written_ranges(elf, loads=()):
    """[start, end) file ranges an image defines: the ELF and program
    headers, every function's code (vaddr == file offset) and the unwind
    tables after it (table_ranges), every section but .text (which spans
    the holes too) and the section headers."""
    d = elf.data
    ehsize = 64 if elf.is64 else 52
    rs = [(0, ehsize)]
    if elf.phdrs:
        phentsize = 56 if elf.is64 else 32
        rs.append((elf.phoff, elf.phoff + phentsize * len(elf.phdrs)))
    for _, val, size in elf.funcs():
        if size:
            rs.append((val, val + size))
    for s in elf.shdrs:
        if s["name"] != ".text" and s["type"] != 8 and s["size"]:   # NOBITS
            rs.append((s["offset"], s["offset"] + s["size"]))
    shentsize = 64 if elf.is64 else 40
    rs.append((elf.shoff, elf.shoff + shentsize * len(elf.shdrs)))
    if loads:
        rs += table_ranges(elf, loads)
    rs = [(a, min(b, len(d))) for a, b in sorted(rs)]
    merged = []
    for a, b in rs:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def hole_blocks(ranges, size, blk):
    """Offsets of the blk-aligned blocks that lie wholly outside ranges."""
    out = []
    prev = 0
    for a, b in ranges + [(size, size)]:
        first = -(-prev // blk) * blk
        while first + blk <= a:
            out.append(first)
            first += blk
        prev = max(prev, b)
    return out


def is_hole(fd, off, blk):
    """True when SEEK_DATA from off lands at or past off + blk."""
    try:
        return os.lseek(fd, off, os.SEEK_DATA) >= off + blk
    except OSError:             # ENXIO: no data after off
        return True


class MemoryImagesThroughCache(unittest.TestCase):
    """One node recording, injected with the default (memory) layout."""

    @classmethod
    def setUpClass(cls):
        why = pf.environment_problem()
        if why:
            raise unittest.SkipTest("no usable perf/node here: " + why)
        if not os.access(pf.PERFGRAFT, os.X_OK):
            raise unittest.SkipTest("%s not built" % pf.PERFGRAFT)
        cls.home_before = pf.home_debug_snapshot()
        cls.archive_tmp_before = set(glob.glob("/tmp/perf-archive-*"))
        cls.tmp = tempfile.mkdtemp(prefix="perfgraft-memcache.")
        cls.cache = None
        try:
            cls._setup()
        except BaseException:
            cls._cleanup()
            raise

    @classmethod
    def _setup(cls):
        tmp = cls.tmp
        cls.rec = pf.record(os.path.join(tmp, "rec"),
                            os.path.join(tmp, "debug"), "fp", MS)
        cls.data = cls.rec.path("pg.data")
        cls.outdir = cls.rec.path("pg.data.d")
        cls.moved = cls.rec.path("pg.data.d.away")
        cmd = [pf.PERFGRAFT, "inject", "-q", "-i", "perf.data", "-o", "pg.data"]
        _, _, _, dt = pf.run(cmd, cwd=cls.rec.dir)
        cls.rec.commands.append((pf.shell(cmd), dt))
        cls.images = sorted(os.path.join(cls.outdir, n)
                            for n in os.listdir(cls.outdir))
        # perf report with the images in place and an empty build-id dir:
        # what every later report must show
        cls.empty = os.path.join(tmp, "empty-debug")
        os.mkdir(cls.empty)
        cls.baseline = cls.report(cls.empty)
        # the build-id cache: on another filesystem than the images when
        # /dev/shm is one (tmpfs here), else next to them (same fs, where
        # perf hardlinks instead of copying)
        dev = os.stat(tmp).st_dev
        if (os.path.isdir(SHM) and os.access(SHM, os.W_OK | os.X_OK)
                and os.stat(SHM).st_dev != dev):
            cls.cache = tempfile.mkdtemp(prefix="perfgraft-memcache.", dir=SHM)
            cls.cross_fs = True
        else:
            cls.cache = os.path.join(tmp, "cache")      # same fs: fallback
            os.mkdir(cls.cache)
            cls.cross_fs = False
        for img in cls.images:
            cls.rec.commands.append(("buildid-cache -a", pf.run(
                pf.perf_cmd(cls.cache, "buildid-cache", "-a", img),
                cwd=cls.rec.dir)[3]))
        _, out, _, _ = pf.run(pf.perf_cmd(cls.cache, "buildid-list", "-i",
                                          cls.data), cwd=cls.rec.dir)
        cls.build_ids = {}      # image path -> build-id
        for ln in out.splitlines():
            f = ln.split(None, 1)
            if len(f) == 2 and f[1] in cls.images:
                cls.build_ids[f[1]] = f[0]

    @classmethod
    def report(cls, buildid_dir):
        _, out, _, _ = pf.run(pf.perf_cmd(buildid_dir, "report", "-i",
                                          cls.data, *REPORT_ARGS),
                              cwd=cls.rec.dir)
        return report_rows(out)

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "rec"):
            info("memcache recording (%s): %s" % (cls.rec.dir, "; ".join(
                "%s %.1f s" % (c.split(" ")[3] if c.startswith(pf.PERF + " ")
                               else c.split(" ")[0].rsplit("/", 1)[-1], dt)
                for c, dt in cls.rec.commands)))
        cls._cleanup()

    @classmethod
    def _cleanup(cls):
        if cls.cache and cls.cache.startswith(SHM + "/"):
            shutil.rmtree(cls.cache, ignore_errors=True)
        if KEEP_TMP:
            info("keeping %s" % cls.tmp)
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.assertTrue(self.images, "perfgraft inject wrote no image")
        self.assertTrue(jit_rows(self.baseline),
                        "no JIT symbol in the report of pg.data with the "
                        "images in place; nothing to compare")

    def move_images_away(self):
        os.rename(self.outdir, self.moved)
        self.addCleanup(os.rename, self.moved, self.outdir)

    def cached_elf(self, buildid_dir, img):
        """The cache entry of img (.build-id/xx/rest -> ../../PATH/ID, whose
        elf is the copy)."""
        bid = self.build_ids[img]
        link = os.path.join(buildid_dir, ".build-id", bid[:2], bid[2:])
        self.assertTrue(os.path.islink(link), "no %s" % link)
        return os.path.join(os.path.realpath(link), "elf")

    # -- 1. sparse images ----------------------------------------------------
    def test_1_images_sparse_where_holes(self):
        figures = []
        any_hole = False
        loads = jitdump_oracle.parse(self.rec.dump).loads
        for img in self.images:
            st = os.stat(img)
            blk = st.st_blksize
            elf = Elf(img)
            holes = hole_blocks(written_ranges(elf, loads), st.st_size, blk)
            fd = os.open(img, os.O_RDONLY)
            try:
                not_holes = [o for o in holes if not is_hole(fd, o, blk)]
            finally:
                os.close(fd)
            figures.append("%s: %d bytes, %d allocated, %d whole-block "
                           "holes in the layout (%d functions)"
                           % (os.path.basename(img), st.st_size,
                              st.st_blocks * 512, len(holes),
                              len(elf.funcs())))
            self.assertFalse(not_holes, "%s: blocks between functions hold "
                             "data (written, not left as holes): %s"
                             % (img, [hex(o) for o in not_holes[:10]]))
            if holes:
                any_hole = True
                self.assertLess(st.st_blocks * 512, st.st_size,
                                "%s has %d hole blocks but is not sparse"
                                % (img, len(holes)))
        info("images: " + "; ".join(figures))
        # V8 packs the code of one code space densely (regions are split
        # at 1 MiB gaps), so most images have no whole free block; the
        # recordings seen here always had one (a 16 KiB hole in r1-g0 of
        # 2 images); without one this test would prove nothing
        self.assertTrue(any_hole, "no image of the recording has a whole "
                        "free block between its functions:\n  "
                        + "\n  ".join(figures))

    # -- 2. the build-id cache -----------------------------------------------
    def test_2_buildid_cache(self):
        self.assertEqual(sorted(self.build_ids), self.images,
                         "perf buildid-list -i pg.data does not name every "
                         "image with its build-id")
        figures = []
        for img in self.images:
            copy = self.cached_elf(self.cache, img)
            p = subprocess.run(["cmp", img, copy], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            self.assertEqual(p.returncode, 0, "cached copy differs: %s"
                             % p.stdout.decode(errors="replace"))
            si, sc = os.stat(img), os.stat(copy)
            if self.cross_fs:
                # perf copies across filesystems (copyfile: mmap + write of
                # every byte): the copy on tmpfs is fully allocated, holes
                # and all (seen: r1-g0 547824 bytes, 520 KiB on ext4,
                # 536 KiB in the cache)
                self.assertFalse(os.path.samefile(img, copy))
            else:
                # same filesystem: perf hardlinks, the copy is the image
                self.assertTrue(os.path.samefile(img, copy),
                                "same fs but %s is not a hardlink" % copy)
            figures.append("%s: %d allocated, cached %d"
                           % (os.path.basename(img), si.st_blocks * 512,
                              sc.st_blocks * 512))
        info("cache %s (%s filesystem): %s" % (
            self.cache, "other" if self.cross_fs else "same",
            "; ".join(figures)))
        self.assertEqual(self.report(self.cache), self.baseline,
                         "report through the cache, images in place")
        self.move_images_away()
        after = self.report(self.cache)
        self.assertEqual(after, self.baseline,
                         "report through the cache with %s renamed away "
                         "differs:\n%s" % (self.outdir,
                                           rows_diff(self.baseline, after)))
        # control: without the cache the JIT symbols are gone
        bare = self.report(self.empty)
        self.assertFalse(set(jit_rows(self.baseline)) & set(jit_rows(bare)),
                         "JIT rows resolved without the images or a cache")
        info("report: %d rows, %d JIT rows (%d samples); without images "
             "and cache %d JIT rows" % (
                 len(after), len(jit_rows(after)),
                 sum(r[1] for r in jit_rows(after)), len(jit_rows(bare))))

    # -- 3. perf archive -----------------------------------------------------
    def test_3_perf_archive(self):
        env = dict(os.environ, PERF_BUILDID_DIR=self.cache)
        tarball = self.data + ".tar.bz2"
        _, out, err, _ = pf.run(pf.perf_cmd(self.cache, "archive", self.data),
                                cwd=self.rec.dir, env=env)
        # the perf.data also names node, libc, the kernel..., which are not
        # in the cache (perf record -N): tar says "Cannot stat" for their
        # .build-id links and perf archive still exits 0 with the rest
        self.assertTrue(os.path.isfile(tarball), "no %s:\n%s%s"
                        % (tarball, out, err))
        with tarfile.open(tarball) as t:
            names = set(t.getnames())
        for img in self.images:
            bid = self.build_ids[img]
            rel = os.path.relpath(self.cached_elf(self.cache, img),
                                  os.path.realpath(self.cache))
            self.assertIn(".build-id/%s/%s" % (bid[:2], bid[2:]), names)
            self.assertIn(rel, names)
        # the archive is meant for `tar xf -C ~/.debug`: its root is a
        # build-id directory, so C itself is what --buildid-dir takes
        c = os.path.join(self.tmp, "C")
        os.mkdir(c)
        pf.run(["tar", "xjf", tarball, "-C", c])
        for img in self.images:
            p = subprocess.run(["cmp", img, self.cached_elf(c, img)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))
        self.move_images_away()
        got = self.report(c)
        self.assertEqual(got, self.baseline,
                         "report through the extracted archive with %s "
                         "renamed away differs:\n%s"
                         % (self.outdir, rows_diff(self.baseline, got)))
        info("archive: %d bytes, %d members; report through %s: %d rows, "
             "%d JIT rows" % (os.path.getsize(tarball), len(names), c,
                              len(got), len(jit_rows(got))))
        left = set(glob.glob("/tmp/perf-archive-*")) - self.archive_tmp_before
        self.assertFalse(left, "perf archive left temporary files")

    def test_zz_home_debug_untouched(self):
        diff = pf.snapshot_diff(self.home_before, pf.home_debug_snapshot())
        self.assertIsNone(diff, diff)


class TmpPrefixRule(unittest.TestCase):
    """4. images written into /tmp never get perf inject's jitted-* names."""

    def setUp(self):
        if not os.access(pf.PERFGRAFT, os.X_OK):
            self.skipTest("%s not built" % pf.PERFGRAFT)
        if not os.access("/tmp", os.W_OK | os.X_OK):
            self.skipTest("/tmp not writable")

    def test_4_tmp_prefix(self):
        while True:
            n = int.from_bytes(os.urandom(7), "little") + 10 ** 17
            if not glob.glob("/tmp/*jitted-%d*" % n) + glob.glob(
                    "/tmp/.*jitted-%d*" % n):
                break

        def remove():
            for p in glob.glob("/tmp/*jitted-%d*" % n) + glob.glob(
                    "/tmp/.*jitted-%d*" % n):
                os.unlink(p)
        self.addCleanup(remove)
        d = tempfile.mkdtemp(prefix="perfgraft-memcache-tmp.")
        self.addCleanup(shutil.rmtree, d, True)

        b = gen.JitdumpBuilder()
        a = 0x7F3A1C001000
        b.load(b"JS:*old", gen.x86_64_code(0x40, 1), a, 0)
        b.load(b"JS:*new", gen.x86_64_code(0x30, 2), a + 0x10, 1)   # r0-g1
        b.load(b"JS:*far", gen.x86_64_code(0x40, 3), a + 4 * REGION_GAP, 2)
        dump = os.path.join(d, "jit-4242.dump")
        b.write(dump)

        prefix = "jitted-%d" % n
        _, out, _, _ = pf.run([pf.PERFGRAFT, "elf", "-q", "-o", "/tmp",
                               "--prefix", prefix, "--maps", dump])
        want = ["pg-%s-r0-g0.so" % prefix, "pg-%s-r0-g1.so" % prefix,
                "pg-%s-r1-g0.so" % prefix]
        got = sorted(os.path.basename(p)
                     for p in glob.glob("/tmp/*jitted-%d*" % n)
                     + glob.glob("/tmp/.*jitted-%d*" % n))
        self.assertEqual(got, want)
        self.assertEqual(sorted({ln.split("\t")[4]
                                 for ln in out.splitlines()}), want,
                         "--maps names other images:\n" + out)
        for w in want:
            self.assertEqual(Elf(os.path.join("/tmp", w)).data[:4],
                             b"\x7fELF")
        # elsewhere the prefix is kept as it is
        sub = os.path.join(d, "out")
        pf.run([pf.PERFGRAFT, "elf", "-q", "-o", sub, "--prefix", prefix,
                dump])
        self.assertEqual(sorted(os.listdir(sub)),
                         [w[len("pg-"):] for w in want])


if __name__ == "__main__":
    unittest.main()
