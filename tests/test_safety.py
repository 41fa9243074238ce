"""Nothing lost: a failed, killed or disk-full run leaves the user's earlier
outputs exactly as they were, and leaves nothing of its own behind.

Every test here runs the real binary on the bundled node recording
(tests/fixtures/perf: demo.data and the jit-19989.dump it mapped) or on
generated inputs, and compares the files before and after byte for byte
and inode for inode.  The disk-full tests mount a small tmpfs (root only:
CI runs as root; elsewhere they are skipped)."""
import fcntl
import json
import os
import platform
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jitdump_gen  # noqa: E402

FIX = os.path.join(HERE, "fixtures", "perf")
PERFGRAFT = os.environ.get("PERFGRAFT", os.path.join(HERE, "..", "build", "perfgraft"))
TMP_RE = re.compile(r"\.pgtmp-(\d+)-([0-9a-f]{8})-[0-9a-f]{6}$")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", **kw)


def errors(stderr):
    """stderr less the warnings (node's damaged names are warned about) and
    the line naming each dump found."""
    return [ln for ln in stderr.splitlines()
            if ln and "warning:" not in ln and not ln.startswith("perfgraft: inject: jitdump ")]


def tree(top):
    """{relative path: (inode, bytes)} of every file under top, hidden too."""
    out = {}
    for d, _, files in os.walk(top):
        for f in files:
            p = os.path.join(d, f)
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):	# the test's FIFO
                continue
            with open(p, "rb") as fh:
                out[os.path.relpath(p, top)] = (st.st_ino, fh.read())
    return out


def temps(top):
    return [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs if TMP_RE.search(f)]


def corrupt_last_record(src, dst):
    """A copy of a file-mode perf.data whose last record claims 4 bytes."""
    data = bytearray(open(src, "rb").read())
    off, size = struct.unpack_from("<QQ", data, 40)
    p, last = off, None
    while p < off + size:
        last = p
        p += struct.unpack_from("<H", data, p + 6)[0]
    struct.pack_into("<H", data, last + 6, 4)
    open(dst, "wb").write(data)


def default_signals():
    """In the child: the signals a run handles at their defaults, also when
    the suite itself runs with them ignored (nohup, a background job of a
    non-interactive shell: perfgraft then keeps them ignored, as it should)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


class Tmp(unittest.TestCase):
    def setUp(self):
        self.tmpd = tempfile.TemporaryDirectory(prefix="pg-safety-")
        self.addCleanup(self.tmpd.cleanup)
        self.t = self.tmpd.name

    def assertUnchanged(self, before, top, *extra):
        """top's files are before's, byte for byte and inode for inode,
        less the files the test itself added (extra)."""
        after = tree(top)
        for k in extra:
            after.pop(k, None)
        self.assertEqual(before, after)

    def inject(self, *args, cwd=None, **kw):
        # the packed layout: one image per function with CFI, many files
        return run([PERFGRAFT, "inject", "-q", "--layout", "packed", "--jitdump-dir", FIX] +
                   list(args),
                   cwd=cwd or self.t, **kw)

    def first_run(self, out="out.data"):
        shutil.copy(os.path.join(FIX, "demo.data"), os.path.join(self.t, "perf.data"))
        r = self.inject("-i", "perf.data", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        before = tree(self.t)
        self.assertGreater(len([k for k in before if k.startswith(out + ".d/")]), 10)
        return before


class FailedRerun(Tmp):
    def test_failed_inject_rerun_keeps_earlier_images(self):
        """A re-run whose input fails at its last record exits 1 and keeps
        out.data and every image of out.data.d (today: all 24 unlinked)."""
        before = self.first_run()
        corrupt_last_record(os.path.join(self.t, "perf.data"), os.path.join(self.t, "bad.data"))
        r = self.inject("-i", "bad.data", "-o", "out.data")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stderr, r"bad\.data: offset \d+: record size 4")
        self.assertUnchanged(before, self.t, "bad.data")

    def test_same_input_rerun_reuses_images(self):
        """A re-run on the same input neither rewrites nor replaces an
        identical image (same inode): perf's build-id cache links stay."""
        before = self.first_run()
        r = self.inject("-i", "perf.data", "-o", "out.data")
        self.assertEqual(r.returncode, 0, r.stderr)
        after = tree(self.t)
        imgs = [k for k in before if k.startswith("out.data.d/")]
        for k in imgs:
            self.assertEqual(before[k], after[k], k)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("mount"), "tmpfs needs root")
class DiskFull(Tmp):
    def setUp(self):
        super().setUp()
        self.fs = os.path.join(self.t, "fs")
        os.mkdir(self.fs)
        r = run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", self.fs])
        if r.returncode:
            self.skipTest("cannot mount a tmpfs: " + r.stderr.strip())
        self.addCleanup(lambda: run(["umount", "-l", self.fs]))

    def fill(self, leave_kb):
        st = os.statvfs(self.fs)
        free = st.f_bavail * st.f_frsize
        with open(os.path.join(self.fs, "filler"), "wb") as f:
            f.write(b"\0" * max(0, free - leave_kb * 1024))

    def test_inject_image_write_error_fails_and_keeps_output(self):
        """ENOSPC while writing images: exit 1, the message names the image
        file, the earlier out.data and its images intact (today: a warning,
        exit 0, and out.data replaced by one without JIT maps)."""
        shutil.copy(os.path.join(FIX, "demo.data"), os.path.join(self.fs, "perf.data"))
        r = self.inject("-i", "perf.data", "-o", "out.data", cwd=self.fs)
        self.assertEqual(r.returncode, 0, r.stderr)
        before = tree(self.fs)
        self.fill(300)
        # --per-function: other images than the packed ones, so they do not
        # exist yet and must be written
        r = self.inject("--per-function", "-i", "perf.data", "-o", "out.data", cwd=self.fs)
        self.assertEqual(r.returncode, 1, r.stderr)
        errs = errors(r.stderr)
        self.assertEqual(len(errs), 1, r.stderr)
        self.assertRegex(errs[0], r"out\.data\.d/jitted-19989-\d+-[0-9a-f]{12}\.so: .*No space left on device")
        self.assertUnchanged(before, self.fs, "filler")

    def test_output_write_error_keeps_output(self):
        """ENOSPC on the perf.data itself: exit 1, the file named, nothing
        of the run left."""
        shutil.copy(os.path.join(FIX, "demo.data"), os.path.join(self.fs, "perf.data"))
        r = self.inject("-i", "perf.data", "-o", "out.data", cwd=self.fs)
        self.assertEqual(r.returncode, 0, r.stderr)
        before = tree(self.fs)
        self.fill(200)
        # the images exist (reused, nothing to write): the perf.data fails
        r = self.inject("-i", "perf.data", "-o", "out2.data", "--image-dir", "out.data.d",
                        cwd=self.fs)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stderr, r"out2\.data: .*No space left on device")
        self.assertUnchanged(before, self.fs, "filler")
        self.assertFalse(os.path.exists(os.path.join(self.fs, "out2.data.d")))

    def test_elf_failed_rerun_keeps_images(self):
        """perfgraft elf into a directory holding an earlier run's images:
        a re-run that hits a full disk exits 1 and the earlier images are
        byte for byte what they were (today: unlinked)."""
        d = os.path.join(self.fs, "imgs")
        dump = os.path.join(FIX, "jit-19989.dump")
        r = run([PERFGRAFT, "elf", "-q", "--layout", "packed", dump, "-o", d])
        self.assertEqual(r.returncode, 0, r.stderr)
        before = tree(self.fs)
        self.fill(150)
        # another dump of the same pid: the same image names, other bytes
        other = os.path.join(self.t, "other.dump")
        data = bytearray(open(dump, "rb").read())
        struct.pack_into("<Q", data, 24, struct.unpack_from("<Q", data, 24)[0] + 1)  # timestamp
        open(other, "wb").write(data)
        r = run([PERFGRAFT, "elf", "-q", "--layout", "packed", "--prefix", "jitted-19989", other, "-o", d])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stderr, r"imgs/jitted-19989-(pack)?\d+\.so: .*No space left on device")
        self.assertUnchanged(before, self.fs, "filler")


class Signals(Tmp):
    def fifo_run(self, extra=(), out="out.data"):
        """inject reading a FIFO that stalls after the jitdump marker:
        returns the process once its images are being written."""
        pipe = os.path.join(self.t, "demo.pipe")
        r = subprocess.run(["perf", "--buildid-dir", os.path.join(self.t, "dbg"), "inject",
                            "-i", os.path.join(FIX, "demo.data"), "-o", "-"],
                           stdout=open(pipe, "wb"), stderr=subprocess.PIPE)
        if r.returncode:
            self.skipTest("perf inject -o - failed: %s" % r.stderr[-300:])
        data = open(pipe, "rb").read()
        fifo = os.path.join(self.t, "in.fifo")
        os.mkfifo(fifo)
        p = subprocess.Popen([PERFGRAFT, "inject", "-q", "--layout", "packed",
                              "--jitdump-dir", FIX, "-i", fifo,
                              "-o", out] + list(extra), cwd=self.t,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=default_signals)
        w = open(fifo, "wb")
        self.addCleanup(w.close)
        w.write(data[:len(data) // 2])	# the marker is at 41012
        w.flush()
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            if temps(self.t) and os.path.isdir(os.path.join(self.t, out + ".d")) and \
               temps(os.path.join(self.t, out + ".d")):
                break
            time.sleep(0.05)
        self.assertIsNone(p.poll(), p.stderr.read() if p.poll() is not None else "")
        time.sleep(0.2)
        return p, w

    def check_signal(self, sig):
        earlier = self.first_run(out="keep.data")
        p, w = self.fifo_run()
        p.send_signal(sig)
        p.wait(timeout=30)
        w.close()
        self.assertEqual(p.returncode, -sig, p.stderr.read())
        self.assertEqual(temps(self.t), [])
        self.assertFalse(os.path.exists(os.path.join(self.t, "out.data")))
        self.assertFalse(os.path.exists(os.path.join(self.t, "out.data.d")),
                         os.listdir(os.path.join(self.t, "out.data.d"))
                         if os.path.exists(os.path.join(self.t, "out.data.d")) else "")
        self.assertUnchanged(earlier, self.t, "demo.pipe")

    def test_sigint_removes_temporaries(self):
        self.check_signal(signal.SIGINT)

    def test_sigterm_removes_temporaries(self):
        self.check_signal(signal.SIGTERM)

    def test_sighup_removes_temporaries(self):
        self.check_signal(signal.SIGHUP)

    def test_sigbus_elsewhere_removes_temporaries(self):
        """A SIGBUS that is not a shrinking input (sent, or a mapping
        perfgraft does not list: libelf's, libdw's) still ends the run by
        SIGBUS, after removing its files (today: all left)."""
        core = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (0, core[1]))	# no core file in the directory
        self.addCleanup(resource.setrlimit, resource.RLIMIT_CORE, core)
        # a SIGBUS not of its inputs goes to the handler installed before
        # perfgraft's: in a sanitizer build, ASan's report and exit 1
        asan = os.environ.get("ASAN_OPTIONS")
        os.environ["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "handle_sigbus=0"
        self.addCleanup(lambda: os.environ.pop("ASAN_OPTIONS") if asan is None
                        else os.environ.update(ASAN_OPTIONS=asan))
        self.check_signal(signal.SIGBUS)

    def test_sigkilled_run_is_swept_by_the_next(self):
        """SIGKILL cannot be caught: the temporaries stay, named with the
        dead pid, and the next run into the directory removes them."""
        p, w = self.fifo_run(extra=("--per-function",))
        p.kill()
        p.wait(timeout=30)
        w.close()
        d = os.path.join(self.t, "out.data.d")
        left = temps(d)
        self.assertTrue(left, "a SIGKILLed run leaves its temporaries")
        self.assertTrue(all(".pgtmp-%d-" % p.pid in f for f in left), left)
        space = TMP_RE.search(left[0]).group(2)	# this boot and pid namespace
        name = os.path.join(d, ".jitted-7-pack0-0123456789ab.so.pgtmp-%d-%s-abcdef")
        # a pid long gone, as after a crash: removed
        open(name % (dead_pid(), space), "wb").write(b"x" * 100)
        # a live process's: kept
        live = name % (os.getpid(), space)
        open(live, "wb").write(b"x")
        # a dead pid of another pid namespace or host (it may be alive
        # there): kept, unless nothing touched it for a day
        other = "%08x" % (int(space, 16) ^ 0x10)
        foreign = name % (dead_pid(), other)
        open(foreign, "wb").write(b"x")
        old = name % (1, other)
        open(old, "wb").write(b"x")
        os.utime(old, (time.time() - 2 * 86400,) * 2)
        shutil.copy(os.path.join(FIX, "demo.data"), os.path.join(self.t, "perf.data"))
        r = self.inject("-i", "perf.data", "-o", "out.data")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(temps(d)), sorted([live, foreign]),
                         "the dead runs' temporaries are removed, a live one stays")
        self.assertEqual(sorted(temps(self.t)), sorted([live, foreign]))


class AdoptedImages(Tmp):
    """inject -o - commits its images as it reads each dump; another run
    into the same --image-dir reuses them (same name and build-id) and
    completes.  When the pipe run then fails or is killed, the images stay:
    the other run's output maps them (issue 20.9: they were removed)."""

    def check(self, end):
        imgs = os.path.join(self.t, "imgs")
        r = subprocess.run(["perf", "--buildid-dir", os.path.join(self.t, "dbg"), "inject",
                            "-i", os.path.join(FIX, "demo.data"), "-o", "-"],
                           capture_output=True)
        if r.returncode:
            self.skipTest("perf inject -o - failed: %s" % r.stderr[-300:])
        data = r.stdout
        fifo = os.path.join(self.t, "in.fifo")
        os.mkfifo(fifo)
        with open(os.path.join(self.t, "pipe.out"), "wb") as so:
            p = subprocess.Popen([PERFGRAFT, "inject", "-q", "--jitdump-dir", FIX,
                                  "--image-dir", imgs, "-i", fifo, "-o", "-"],
                                 cwd=self.t, stdout=so, stderr=subprocess.PIPE,
                                 preexec_fn=default_signals)
        w = open(fifo, "wb")
        self.addCleanup(w.close)
        cut = 16		# pipe header, then whole records past the marker (at 41012)
        while cut < len(data) // 2:
            cut += struct.unpack_from("<H", data, cut + 6)[0]
        w.write(data[:cut])
        w.flush()
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            done = [f for f in os.listdir(imgs) if f.endswith(".so")] \
                if os.path.isdir(imgs) else []
            if done and not temps(imgs):
                break
            time.sleep(0.05)
        self.assertIsNone(p.poll(), p.stderr.read() if p.poll() is not None else "")
        self.assertTrue(done, "the pipe run committed no image")
        # a file-mode run into the same directory adopts them
        shutil.copy(os.path.join(FIX, "demo.data"), os.path.join(self.t, "perf.data"))
        r = run([PERFGRAFT, "inject", "-q", "--jitdump-dir", FIX, "--image-dir", imgs,
                 "-i", "perf.data", "-o", "file.data"], cwd=self.t)
        self.assertEqual(r.returncode, 0, r.stderr)
        dj = run([PERFGRAFT, "dump", "--json", os.path.join(self.t, "file.data")])
        named = {x["filename"] for x in json.loads(dj.stdout)["records"]
                 if x["name"] == "MMAP2" and x["filename"].startswith(imgs + "/")}
        self.assertTrue(named)
        self.assertTrue(named <= {os.path.join(imgs, f) for f in done},
                        "the second run wrote images of its own: %s" % sorted(named))
        if end == "signal":
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
            self.assertEqual(p.returncode, -signal.SIGTERM, p.stderr.read())
        else:		# the next record is damage: the run fails
            w.write(struct.pack("<IHH", 1, 0, 4) + bytes(8))
            w.close()
            p.wait(timeout=30)
            self.assertEqual(p.returncode, 1, p.stderr.read())
        w.close()
        p.stderr.close()
        missing = sorted(f for f in named if not os.path.exists(f))
        self.assertEqual(missing, [], "file.data maps images the failed pipe run removed")
        self.assertEqual(temps(self.t), [])

    def test_killed_pipe_run_keeps_adopted_images(self):
        self.check("signal")

    def test_failed_pipe_run_keeps_adopted_images(self):
        self.check("failure")


# write(2)'s number, for /proc/PID/syscall
WRITE_NR = {"x86_64": 1, "aarch64": 64, "riscv64": 64, "ppc64le": 4, "s390x": 4}.get(
    platform.machine())


def full_pipe():
    """(read fd, write fd) of a one-page pipe that is already full: the
    first write of a process given the write end blocks until the test
    reads, at a point the test chooses by what it gives the pipe to."""
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
    os.set_blocking(w, False)
    for chunk in (4096, 1):
        try:
            while True:
                os.write(w, b"#" * chunk)
        except BlockingIOError:
            pass
    os.set_blocking(w, True)	# the child shares the open file
    return r, w


class Shrinking(Tmp):
    """An input truncated by another process while perfgraft has it
    mapped: an error naming it, exit 1, nothing of the run left (today:
    SIGBUS, exit 135, the temporaries left).  The run is stopped with the
    input mapped by a full stdout or stderr pipe, the input truncated, and
    the pipe then read: no timing involved."""

    def setUp(self):
        super().setUp()
        if WRITE_NR is None or not os.path.exists("/proc/self/syscall"):
            self.skipTest("needs /proc/PID/syscall on a known architecture")

    def run_blocked(self, cmd, fd, victim, size):
        """Runs cmd with fd (1 or 2) a full pipe; once it waits in write()
        with victim mapped, truncates victim to size and reads the pipe.
        Returns (exit status, stderr less the test's filler)."""
        r, w = full_pipe()
        other = subprocess.PIPE
        p = subprocess.Popen(cmd, cwd=self.t, stdin=subprocess.DEVNULL,
                             stdout=w if fd == 1 else other,
                             stderr=w if fd == 2 else other)
        os.close(w)
        rf = os.fdopen(r, "rb")
        self.addCleanup(rf.close)
        out, drained = {}, []

        def drain(f, key):
            out[key] = f.read()
        real = os.path.realpath(victim)
        deadline = time.time() + 120
        while True:
            self.assertIsNone(p.poll(), "exited before it blocked")
            self.assertLess(time.time(), deadline, "never blocked writing with the input mapped")
            try:
                with open("/proc/%d/syscall" % p.pid) as f:
                    sc = f.read().split()
                with open("/proc/%d/maps" % p.pid) as f:
                    maps = f.read()
            except PermissionError:
                p.kill()
                p.wait()
                self.skipTest("/proc/PID/syscall of a child is not readable here")
            except OSError:
                sc, maps = [], ""
            if len(sc) > 1 and sc[0] == str(WRITE_NR) and int(sc[1], 16) == fd and \
               any(ln.endswith(" " + real) for ln in maps.splitlines()):
                break
            time.sleep(0.01)
        os.truncate(victim, size)
        for f, key in ((rf, "pipe"), (p.stdout if fd == 2 else p.stderr, "other")):
            t = threading.Thread(target=drain, args=(f, key))
            t.start()
            drained.append(t)
        p.wait(timeout=300)
        for t in drained:
            t.join()
        (p.stdout or p.stderr).close()
        err = out["pipe"] if fd == 2 else out["other"]
        return p.returncode, err.lstrip(b"#").decode(errors="replace")

    def gen_dump(self, path):
        """200 LOADs of 4 KiB of code for pid 19989 (demo.data's node),
        then the start of a record cut off: its warning ("truncated tail")
        is written when every record has been read and no image yet."""
        b = jitdump_gen.JitdumpBuilder(pid=19989, timestamp=3709214986026)
        for i in range(200):
            b.load(b"JS:*f%d" % i, jitdump_gen.x86_64_code(4096, i), jitdump_gen.BASE64 + 0x1000 * i,
                   i, timestamp=3709214986026 + i)
        b.raw(struct.pack("<IIQ", 0, 100000, 3709214986026 + 500))
        b.write(path)

    def check_dump_under_inject(self, layout):
        before = self.first_run()
        os.mkdir(os.path.join(self.t, "in"))
        dump = os.path.join(self.t, "in", "gen.dump")
        self.gen_dump(dump)
        # -v: the dump's warnings are what block on the full stderr pipe
        # (-q prints errors only)
        rc, err = self.run_blocked([PERFGRAFT, "inject", "-v", "--layout", layout, "-i", "perf.data",
                                    "--jitdump", "in/gen.dump", "-o", "out.data"], 2, dump, 4096)
        self.assertEqual(rc, 1, err)
        self.assertEqual(errors(err), ["perfgraft: in/gen.dump: changed while being read"], err)
        self.assertEqual(temps(self.t), [])
        self.assertUnchanged(before, self.t, "in/gen.dump")

    def test_jitdump_shrinks_before_its_images_memory_layout(self):
        """The image builder reads the code it hashes and writes from the
        mapping: SIGBUS there reads zeros, and no image is kept."""
        self.check_dump_under_inject("memory")

    def test_jitdump_shrinks_before_its_images_packed_layout(self):
        """Packed images hash the code as it is read and write it later
        through libelf's pwrite from the mapping: the kernel's EFAULT (no
        signal) is the same error."""
        self.check_dump_under_inject("packed")

    def test_perfdata_shrinks_under_inject(self):
        """inject -i FILE -o -: the perf.data stays mapped while the output
        waits for its reader."""
        shutil.copy(os.path.join(FIX, "demo.data"), os.path.join(self.t, "in.data"))
        os.mkdir(os.path.join(self.t, "none"))
        before = tree(self.t)
        del before["in.data"]
        rc, err = self.run_blocked([PERFGRAFT, "inject", "-q", "--jitdump-dir", "none",
                                    "-i", "in.data", "-o", "-"], 1,
                                   os.path.join(self.t, "in.data"), 65536)
        self.assertEqual(rc, 1, err)
        self.assertEqual(errors(err), ["perfgraft: in.data: changed while being read"], err)
        self.assertUnchanged(before, self.t, "in.data")

    def test_trace_shrinks_under_xray(self):
        """xray -o -: the trace stays mapped while the output waits; the
        conversion stops at the zeros instead of converting them."""
        import xray_gen
        t = xray_gen.BasicTrace(3, "<", seed=5)
        th = t.thread(301, 300)
        for i in range(100000):
            th.enter(1 + i % 7, 1000 + 10 * i).exit(1 + i % 7, 1005 + 10 * i)
        t.flush(th)
        trace = os.path.join(self.t, "t.xray")
        with open(trace, "wb") as f:
            f.write(t.build("big").data)
        rc, err = self.run_blocked([PERFGRAFT, "xray", "-q", "t.xray", "-o", "-"], 1, trace, 65536)
        self.assertEqual(rc, 1, err)
        self.assertEqual(errors(err), ["perfgraft: t.xray: changed while being read"], err)

    def test_jitdump_shrinks_under_dump(self):
        dump = os.path.join(self.t, "j.dump")
        shutil.copy(os.path.join(FIX, "jit-19989.dump"), dump)
        rc, err = self.run_blocked([PERFGRAFT, "dump", "j.dump"], 1, dump, 8192)
        self.assertEqual(rc, 1, err)
        self.assertEqual(errors(err), ["perfgraft: j.dump: changed while being read"], err)


class FileSizeLimit(Tmp):
    """ulimit -f: a write past RLIMIT_FSIZE is a write error (EFBIG) with
    one message, exit 1 and nothing of the run left (today: killed by
    SIGXFSZ, the hidden temporary and an empty OUTPUT.d left)."""

    def limited(self, cmd, limit):
        def lim():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        return run(cmd, cwd=self.t, preexec_fn=lim)

    def check(self, r, before, what):
        self.assertEqual(r.returncode, 1, r.stderr)	# not -SIGXFSZ
        errs = errors(r.stderr)
        self.assertEqual(len(errs), 1, r.stderr)
        self.assertRegex(errs[0], what + r": .*File too large$")
        self.assertUnchanged(before, self.t)

    def test_inject_images(self):
        """The memory layout's images are larger than the limit; the
        earlier out.data and its packed images stay as they were."""
        before = self.first_run()
        r = self.limited([PERFGRAFT, "inject", "-q", "--jitdump-dir", FIX, "-i", "perf.data",
                          "-o", "out.data"], 256 << 10)
        self.check(r, before, r"out\.data\.d/jitted-19989-\S+\.so: cannot write ELF image")

    def test_inject_output(self):
        """The images exist (reused): the perf.data is what fails."""
        before = self.first_run()
        r = self.limited([PERFGRAFT, "inject", "-q", "--layout", "packed", "--jitdump-dir", FIX,
                          "-i", "perf.data", "-o", "out.data"], 256 << 10)
        self.check(r, before, r"out\.data")

    def test_xray(self):
        """Compressed on the writer's worker threads: the write that fails
        is theirs."""
        import xray_gen
        with open(os.path.join(self.t, "t.xray"), "wb") as f:
            f.write(xray_gen.long_calls_fdr(threads=1, gap_ns=10**9).data)
        r = run([PERFGRAFT, "xray", "-q", "--thin-after", "0", "t.xray", "-o", "x.data"], cwd=self.t)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(os.path.getsize(os.path.join(self.t, "x.data")), 256 << 10)
        before = tree(self.t)
        r = self.limited([PERFGRAFT, "xray", "-q", "--thin-after", "0", "t.xray", "-o", "x.data"],
                         64 << 10)
        self.check(r, before, r"x\.data: cannot compress or write")

    def test_gperf(self):
        import gperf_gen
        c = gperf_gen.build("limit", records=gperf_gen.base_stacks(), maps=gperf_gen.base_maps())
        with open(os.path.join(self.t, "p.prof"), "wb") as f:
            f.write(c.data)
        r = run([PERFGRAFT, "gperf", "-q", "p.prof", "-o", "g.data"], cwd=self.t)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(os.path.getsize(os.path.join(self.t, "g.data")), 2048)
        before = tree(self.t)
        r = self.limited([PERFGRAFT, "gperf", "-q", "p.prof", "-o", "g.data"], 2048)
        self.check(r, before, r"g\.data")


class OutputDir(Tmp):
    def test_output_d_symlink_is_not_followed(self):
        shutil.copy(os.path.join(FIX, "demo.data"), os.path.join(self.t, "perf.data"))
        target = os.path.join(self.t, "elsewhere")
        os.mkdir(target)
        os.symlink(target, os.path.join(self.t, "out.data.d"))
        r = self.inject("-i", "perf.data", "-o", "out.data")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stderr, r"out\.data\.d: is a symbolic link")
        self.assertEqual(os.listdir(target), [])
        self.assertFalse(os.path.exists(os.path.join(self.t, "out.data")))

    def test_fifo_at_an_images_first_name_is_not_opened(self):
        """A pack's code is written while it is built, into a temporary
        named after the pack's first name (before its build-id names it):
        a FIFO of that name in the image directory is neither opened (it
        would wait for a reader) nor written, and the images are those of
        a run without it."""
        shutil.copy(os.path.join(FIX, "demo.data"), os.path.join(self.t, "perf.data"))
        args = ("-i", "perf.data")
        r = self.inject(*args, "-o", "plain.data")
        self.assertEqual(r.returncode, 0, r.stderr)
        want = {f: open(os.path.join(self.t, "plain.data.d", f), "rb").read()
                for f in os.listdir(os.path.join(self.t, "plain.data.d"))}
        self.assertIn("jitted-19989-pack0-", " ".join(want))
        d = os.path.join(self.t, "out.data.d")
        os.mkdir(d)
        fifo = os.path.join(d, "jitted-19989-pack0.so")
        os.mkfifo(fifo)
        r = self.inject(*args, "-o", "out.data", timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        got = {f: open(os.path.join(d, f), "rb").read()
               for f in os.listdir(d) if f != "jitted-19989-pack0.so"}
        self.assertEqual(sorted(got), sorted(want))
        for f in want:
            self.assertEqual(got[f], want[f], f)
        self.assertEqual(temps(d), [])

    def test_elf_creates_its_directory(self):
        d = os.path.join(self.t, "new")
        r = run([PERFGRAFT, "elf", "-q", "--layout", "packed", os.path.join(FIX, "jit-19989.dump"), "-o", d])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(any(f.endswith(".so") for f in os.listdir(d)))
        self.assertEqual(temps(d), [])

    def test_elf_failure_removes_the_directory_it_made(self):
        d = os.path.join(self.t, "new")
        r = run([PERFGRAFT, "elf", os.path.join(self.t, "missing.dump"), "-o", d])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertFalse(os.path.exists(d))

    def test_other_layout_is_not_reused(self):
        """An image of the other CFI layout has the same code but is not
        the same image: a re-run with --cfi-layout perf-5.19 must write its
        own layout, not reuse the standard one found under the same name."""
        d = os.path.join(self.t, "imgs")
        dump = os.path.join(HERE, "fixtures", "node", "node-unwind.dump")

        def loads():
            out = {}
            for f in sorted(os.listdir(d)):
                r = run(["readelf", "-lW", os.path.join(d, f)])
                m = re.search(r"^\s*LOAD\s+(0x[0-9a-f]+)", r.stdout, re.M)
                out[f] = int(m.group(1), 16)
            return out
        self.assertEqual(run([PERFGRAFT, "elf", "-q", "--layout", "packed", dump, "-o", d]).returncode, 0)
        std = loads()
        self.assertEqual(set(std.values()), {0})
        r = run([PERFGRAFT, "elf", "-q", "--layout", "packed", "--cfi-layout", "perf-5.19", dump, "-o", d])
        self.assertEqual(r.returncode, 0, r.stderr)
        compat = loads()
        self.assertEqual(set(std), set(compat))
        self.assertIn(0x1000, compat.values(), "the CFI images must start their PT_LOAD at the code")

    def test_elf_takes_injects_cfi_layout_spelling(self):
        dump = os.path.join(FIX, "jit-19989.dump")
        for args in (["--cfi-layout", "perf-5.19"], ["--cfi-layout", "standard"]):
            r = run([PERFGRAFT, "elf", "-q", "--layout", "packed", dump, "-o", os.path.join(self.t, args[1])] + args)
            self.assertEqual(r.returncode, 0, r.stderr)
        r = run([PERFGRAFT, "elf", dump, "--cfi-layout", "bogus"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("--cfi-layout takes standard or perf-5.19", r.stderr)
        self.assertIn("--cfi-layout", run([PERFGRAFT, "elf", "--help"]).stdout)
        self.assertNotIn("perf-unwind", run([PERFGRAFT, "elf", "--help"]).stdout)

    def test_compress_debug_sections_option(self):
        """zlib (the default) and none on elf and inject; anything else is
        a usage error; the DWARF of the dump's images is compressed by
        default and plain with none."""
        dump = os.path.join(FIX, "jit-19989.dump")
        flags = {}
        for how in (None, "zlib", "none"):
            d = os.path.join(self.t, "z-%s" % how)
            args = [] if how is None else ["--compress-debug-sections", how]
            r = run([PERFGRAFT, "elf", "-q", dump, "-o", d] + args)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = ""
            for n in sorted(os.listdir(d)):
                out += run(["readelf", "-SW", os.path.join(d, n)]).stdout
            flags[how] = re.findall(r"\.debug_(?:info|line)\s+PROGBITS\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S*)",
                                    out)
        # compressed where that makes them smaller (a near-empty one is not)
        self.assertGreaterEqual(sum("C" in f for f in flags[None]), 2, flags)
        self.assertEqual(flags[None], flags["zlib"])
        self.assertTrue(flags["none"] and not any("C" in f for f in flags["none"]), flags)
        for cmd in (["elf", dump], ["inject"]):
            r = run([PERFGRAFT] + cmd + ["--compress-debug-sections", "zstd"])
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--compress-debug-sections takes zlib or none, not 'zstd'", r.stderr)
            self.assertIn("--compress-debug-sections", run([PERFGRAFT, cmd[0], "--help"]).stdout)


class ClosedPipe(Tmp):
    def closed_pipe_run(self, cmd):
        """cmd writing -o - into a pipe whose reader is already gone."""
        rfd, wfd = os.pipe()
        os.close(rfd)
        try:
            p = subprocess.run(cmd, stdout=wfd, stderr=subprocess.PIPE, cwd=self.t,
                               text=True, errors="replace", timeout=120)
        finally:
            os.close(wfd)
        return p

    def check(self, p):
        self.assertEqual(p.returncode, 1, p.stderr)	# not -SIGPIPE (141 in a shell)
        errs = errors(p.stderr)
        self.assertEqual(len(errs), 1, p.stderr)
        self.assertRegex(errs[0], r"standard output: .*Broken pipe")

    def test_inject_into_head(self):
        shutil.copy(os.path.join(FIX, "demo.data"), os.path.join(self.t, "perf.data"))
        p1 = subprocess.Popen([PERFGRAFT, "inject", "--jitdump-dir", FIX, "-i", "perf.data",
                               "-o", "-"], cwd=self.t, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        p2 = subprocess.run(["head", "-c", "100"], stdin=p1.stdout, capture_output=True)
        p1.stdout.close()
        err = p1.stderr.read().decode(errors="replace")
        p1.wait(timeout=120)
        self.assertEqual(len(p2.stdout), 100)
        self.assertEqual(p1.returncode, 1, err)
        errs = errors(err)
        self.assertEqual(len(errs), 1, err)
        self.assertRegex(errs[0], r"standard output: .*Broken pipe")
        # The images get their names once the output took the bytes before
        # their first MMAP2, and keep them: another run into the directory
        # may have adopted them (AdoptedImages).  Whether the pipe took any
        # before head left is a race; either way nothing is half-written.
        self.assertEqual(temps(self.t), [])
        left = sorted(os.listdir(self.t))
        # -o -: the images go into a directory of the run's own
        dirs = [n for n in left if re.fullmatch(r"perfgraft-jit-\d{8}-\d{6}-\d+\.d", n)]
        self.assertEqual(sorted(["perf.data"] + dirs), left)
        self.assertLessEqual(len(dirs), 1, left)
        if dirs:
            imgs = os.listdir(os.path.join(self.t, dirs[0]))
            self.assertTrue(imgs, "an empty directory left")
            for f in imgs:
                r = run(["readelf", "-n", os.path.join(self.t, dirs[0], f)])
                self.assertIn("Build ID", r.stdout, f)

    def test_inject_closed_pipe(self):
        shutil.copy(os.path.join(FIX, "demo.data"), os.path.join(self.t, "perf.data"))
        self.check(self.closed_pipe_run([PERFGRAFT, "inject", "--jitdump-dir", FIX,
                                         "-i", "perf.data", "-o", "-"]))
        self.assertEqual(sorted(os.listdir(self.t)), ["perf.data"])

    def test_xray_closed_pipe(self):
        import xray_gen
        open(os.path.join(self.t, "t.xray"), "wb").write(xray_gen.small_fdr_v5().data)
        self.check(self.closed_pipe_run([PERFGRAFT, "xray", "t.xray", "-o", "-"]))

    def test_gperf_closed_pipe(self):
        import gperf_gen
        c = gperf_gen.build("pipe", records=gperf_gen.base_stacks(), maps=gperf_gen.base_maps())
        open(os.path.join(self.t, "p.prof"), "wb").write(c.data)
        self.check(self.closed_pipe_run([PERFGRAFT, "gperf", "p.prof", "-o", "-"]))


class OutputIsInput(Tmp):
    def check_refused(self, cmd, victim):
        before = open(victim, "rb").read()
        r = run(cmd, cwd=self.t)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("is the input", r.stderr)
        self.assertEqual(open(victim, "rb").read(), before)
        self.assertEqual(temps(self.t), [])

    def test_xray_output_is_a_trace(self):
        import xray_gen
        t = os.path.join(self.t, "t.xray")
        open(t, "wb").write(xray_gen.small_fdr_v5().data)
        self.check_refused([PERFGRAFT, "xray", "t.xray", "-o", "t.xray"], t)
        os.link(t, os.path.join(self.t, "hard.xray"))	# the same file by another name
        self.check_refused([PERFGRAFT, "xray", "t.xray", "-o", "hard.xray"], t)
        shutil.copy("/bin/true", os.path.join(self.t, "bin"))
        self.check_refused([PERFGRAFT, "xray", "t.xray", "-b", "bin", "-o", "bin"],
                           os.path.join(self.t, "bin"))

    def test_gperf_output_is_the_profile(self):
        import gperf_gen
        c = gperf_gen.build("same", records=gperf_gen.base_stacks(), maps=gperf_gen.base_maps())
        p = os.path.join(self.t, "p.prof")
        open(p, "wb").write(c.data)
        self.check_refused([PERFGRAFT, "gperf", "p.prof", "-o", "p.prof"], p)

    def test_inject_output_is_the_input(self):
        p = os.path.join(self.t, "perf.data")
        shutil.copy(os.path.join(FIX, "demo.data"), p)
        self.check_refused([PERFGRAFT, "inject", "--jitdump-dir", FIX, "-i", "perf.data",
                            "-o", "./perf.data"], p)
        shutil.copy(os.path.join(FIX, "jit-19989.dump"), os.path.join(self.t, "j.dump"))
        self.check_refused([PERFGRAFT, "inject", "-i", "perf.data", "--jitdump", "j.dump",
                            "-o", "j.dump"], os.path.join(self.t, "j.dump"))


class MoveHeavy(Tmp):
    """inject's MOVE lookup is O(1): CPU time grows linearly with the
    number of LOAD+MOVE pairs (today a search over every earlier LOAD made
    it quadratic: 0.63 s for 40k pairs, 10 s for 160k).  A complexity check,
    with a wide margin: 16x the pairs must cost well under 256x the time."""

    def dump(self, n):
        b = jitdump_gen.JitdumpBuilder(pid=19989, timestamp=3709214986026)
        code = jitdump_gen.x86_64_code(0x20, 1)
        base = jitdump_gen.BASE64
        for i in range(n):
            b.load(b"JS:*f%d" % i, code, base + 0x40 * i, i, timestamp=3709214986026 + 2 * i)
        for i in range(n):
            b.move(i, base + 0x40 * i, base + 0x40 * (n + i), len(code),
                   timestamp=3709214986026 + 2 * n + i)
        path = os.path.join(self.t, "jit-%d.dump" % n)
        open(path, "wb").write(b.to_bytes())
        return path

    def cpu(self, dump):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = run([PERFGRAFT, "inject", "-q", "-i", os.path.join(FIX, "demo.data"),
                 "--jitdump", dump, "-o", os.path.join(self.t, "o.data")])
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.assertEqual(r.returncode, 0, r.stderr)
        return after.ru_utime - before.ru_utime

    def test_moves_cost_linear_time(self):
        small, big = self.dump(5000), self.dump(80000)
        self.cpu(small)				# warm the page cache
        ts = min(self.cpu(small) for _ in range(2))
        tb = self.cpu(big)
        # the fixed cost (the recording itself) counts in both
        self.assertLess(tb, 40 * max(ts, 0.02), "5k pairs %.2f s, 80k pairs %.2f s" % (ts, tb))


if __name__ == "__main__":
    unittest.main()
