#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""perfgraft test suite runner.

    python3 tests/run.py [--build DIR] [-k PATTERN] [-q]

1. If the meson build dir has tests, runs `meson test -C DIR
   --print-errorlogs` and counts its results (from meson-logs/testlog.json,
   or from its summary when that file was not written).
2. Discovers tests/test_*.py and runs them with unittest, with
   PERFGRAFT=DIR/perfgraft in the environment.
3. Checks that the run left nothing behind: `git status --porcelain` is the
   same as before the run, and $HOME/.debug gained no entries.

The whole run has a HOME of its own: an empty temporary directory, removed
at the end.  The user's ~/.debug (or ~/.perfconfig, ...) is never read or
written, and the .debug check is exact: perf run elsewhere on the machine
cannot make it fail, and a test whose perf lacks --buildid-dir (perf record
without -N copies every binary it saw into $HOME/.debug) still makes it
fail.  Other files the run leaves in that HOME are listed as a note.
git runs with the caller's environment (its configuration is in ~).

The last line printed is `N passed, N failed` (`, N skipped` appended when
some were skipped); the exit status is 1 when anything failed.
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The caller's environment, before HOME is replaced (for git).
CALLER_ENV = dict(os.environ)
# Variables that would lead programs to the caller's home instead of HOME.
HOME_VARS = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
             "PERF_BUILDID_DIR")


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self.failures = []      # (where, what)

    def fail(self, where, what):
        self.failed += 1
        self.failures.append((where, what))


def git_status():
    try:
        p = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                            "--untracked-files=all"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=120, env=CALLER_ENV)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    return set(p.stdout.decode("utf-8", "surrogateescape").splitlines())


def debug_dir_entries():
    """Every path under $HOME/.debug (the run's own HOME once set)."""
    top = os.path.join(os.environ["HOME"], ".debug")
    if not os.path.lexists(top):
        return set()
    out = {top}
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            out.add(os.path.join(dirpath, n))
    return out


def own_home():
    """Gives the run an empty HOME of its own; returns it."""
    home = tempfile.mkdtemp(prefix="perfgraft-tests-home.")
    os.environ["HOME"] = home
    for v in HOME_VARS:
        os.environ.pop(v, None)
    # perfgraft inject adds its images to perf's build-id cache; a test
    # that gives no --buildid-dir gets this one (perf itself ignores the
    # variable, so the $HOME/.debug check below stays exact for perf)
    os.environ["PERF_BUILDID_DIR"] = os.path.join(home, "perfgraft-buildid-cache")
    return home


def meson_has_tests(build):
    if not os.path.isfile(os.path.join(build, "meson-private",
                                       "coredata.dat")):
        return False
    try:
        p = subprocess.run(["meson", "introspect", "--tests", build],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return False
    if p.returncode != 0:
        return False
    try:
        return len(json.loads(p.stdout.decode() or "[]")) > 0
    except ValueError:
        return False


MESON_PASS = {"OK", "EXPECTEDFAIL"}
MESON_SKIP = {"SKIP"}


def run_meson(build, tally):
    log = os.path.join(build, "meson-logs", "testlog.json")
    start = time.time()
    cmd = ["meson", "test", "-C", build, "--print-errorlogs"]
    print("== %s" % " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = p.stdout.decode("utf-8", "replace")
    sys.stdout.write(text)
    sys.stdout.flush()
    passed = failed = skipped = 0
    names = []
    if os.path.isfile(log) and os.stat(log).st_mtime >= start - 1:
        with open(log, encoding="utf-8", errors="replace") as f:
            for ln in f:
                ln = ln.strip()
                if not ln:
                    continue
                try:
                    r = json.loads(ln)
                except ValueError:
                    continue
                res = str(r.get("result", "")).upper()
                if res in MESON_PASS:
                    passed += 1
                elif res in MESON_SKIP:
                    skipped += 1
                else:
                    failed += 1
                    names.append("%s (%s)" % (r.get("name"), res))
    else:
        def count(label):
            m = re.search(r"^%s:\s+(\d+)" % label, text, re.M)
            return int(m.group(1)) if m else 0
        passed = count("Ok") + count("Expected Fail")
        failed = count("Fail") + count("Unexpected Pass") + count("Timeout")
        skipped = count("Skipped")
    tally.passed += passed
    tally.skipped += skipped
    for n in names:
        tally.fail("meson test", n)
    if failed > len(names):
        for _ in range(failed - len(names)):
            tally.fail("meson test", "failure counted from its summary")
    if p.returncode != 0 and failed == 0:
        tally.fail("meson test", "exited %d with no failure counted"
                   % p.returncode)
    if passed + failed + skipped == 0 and p.returncode == 0:
        tally.fail("meson test", "ran no test although tests are defined")


def run_unittests(build, pattern, verbosity, tally):
    os.environ["PERFGRAFT"] = os.path.join(os.path.abspath(build),
                                           "perfgraft")
    if not os.path.isfile(os.environ["PERFGRAFT"]):
        print("note: %s does not exist (build first: meson setup build && "
              "ninja -C build)" % os.environ["PERFGRAFT"], flush=True)
    print("== unittest discover %s (PERFGRAFT=%s)" % (
        HERE, os.environ["PERFGRAFT"]), flush=True)
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    loader = unittest.TestLoader()
    if pattern:
        loader.testNamePatterns = ["*%s*" % pattern]
    suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    times = []
    suite = unittest.TestSuite(_Timed(m, times) for m in suite)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=verbosity)
    res = runner.run(suite)
    _print_times(times)
    ran_bad = set()
    for t, _ in res.failures + res.errors:
        tally.fail("unittest", str(t))
        if not _is_holder(t):
            ran_bad.add(_test_key(t))
    for t in res.unexpectedSuccesses:
        tally.fail("unittest", "unexpected success: %s" % t)
        ran_bad.add(_test_key(t))
    skipped = {_test_key(t) for t, _ in res.skipped if not _is_holder(t)}
    tally.skipped += len(res.skipped)
    tally.passed += max(0, res.testsRun - len(ran_bad) - len(skipped))
    if res.testsRun == 0 and not (res.failures or res.errors):
        tally.fail("unittest", "no test found in %s" % HERE)


class _Timed(unittest.TestSuite):
    """One module's tests, timed: wall and the CPU of the processes they ran
    (to see where the suite's time goes and how much of it is waiting)."""

    def __init__(self, inner, times):
        super().__init__([inner])
        self.times = times
        first = next(iter(_leaves(inner)), None)
        self.name = type(first).__module__ if first is not None else "?"

    def run(self, result, debug=False):
        t0 = time.monotonic()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        s0 = resource.getrusage(resource.RUSAGE_SELF)
        try:
            return super().run(result, debug)
        finally:
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            s1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime
                      for a, b in ((r0, r1), (s0, s1)))
            self.times.append((time.monotonic() - t0, cpu, self.name))


def _leaves(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _leaves(t)
        else:
            yield t


def _print_times(times):
    if not times:
        return
    total = sum(w for w, _, _ in times)
    print("== slowest modules (wall s, CPU s; %.0f s in all)" % total)
    for w, c, n in sorted(times, reverse=True)[:10]:
        if w < 0.5:
            break
        print("   %7.1f %7.1f  %s" % (w, c, n))
    sys.stdout.flush()


def _is_holder(t):
    # setUpClass/module failures are reported on an _ErrorHolder, which is
    # not counted in testsRun.
    return type(t).__name__ == "_ErrorHolder"


def _test_key(t):
    # A failed subTest is reported on a _SubTest; count its test once.
    case = getattr(t, "test_case", t)
    return case.id() if hasattr(case, "id") else str(case)


def run_all(build, args, git_before):
    """Everything but the HOME set-up; the Tally."""
    tally = Tally()

    if meson_has_tests(build):
        run_meson(build, tally)
    else:
        print("== no meson tests in %s" % build, flush=True)

    run_unittests(build, args.pattern, 1 if args.q else 2, tally)

    # Nothing left behind.
    git_after = git_status()
    if git_before is None or git_after is None:
        print("note: not a git work tree (or git failed): leftover-file "
              "check skipped", flush=True)
    else:
        # A line that appears is a file the run created or changed; a line
        # that disappears can only be a commit or revert made meanwhile.
        new = sorted(git_after - git_before)
        if new:
            tally.fail("leftovers", "git status --porcelain gained lines "
                       "during the run: %s" % new[:20])
        else:
            tally.passed += 1
    new = sorted(debug_dir_entries())	# the run's HOME started empty
    if new:
        tally.fail("leftovers", "new entries in the run's $HOME/.debug (a perf "
                   "without --buildid-dir?): %s" % new[:20])
    else:
        tally.passed += 1
    other = sorted(set(os.listdir(os.environ["HOME"])) - {".debug"})
    if other:
        print("note: the run left in its HOME (%s, removed now): %s"
              % (os.environ["HOME"], other), flush=True)
    return tally


def tmp_entries():
    """The temporary directory's entries named as perfgraft's, perf's or a
    JIT's scratch files are."""
    pat = re.compile(r"^(perfgraft|jit-|jitted-|perf-vdso|isolate-|perf-\d+\.map)")
    try:
        return {e for e in os.listdir(tempfile.gettempdir()) if pat.match(e)}
    except OSError:
        return set()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="meson build directory (default: ROOT/build)")
    ap.add_argument("-k", dest="pattern", default=None,
                    help="only run unittest tests whose name matches")
    ap.add_argument("-q", action="store_true", help="less unittest output")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    # Leave no __pycache__ behind (the leftover check below would see it).
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"

    git_before = git_status()
    tmp_before = tmp_entries()
    home = own_home()
    try:
        tally = run_all(build, args, git_before)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    # A note, not a failure: another run on the machine (CI's two suites
    # run side by side) makes such names too, and removes them.
    stray = sorted(tmp_entries() - tmp_before)
    if stray:
        print("note: new entries in %s that look like a tool's or a test's "
              "(left behind?): %s" % (tempfile.gettempdir(), stray[:20]), flush=True)

    if tally.failures:
        print("\nFailures:")
        for where, what in tally.failures:
            print("  [%s] %s" % (where, what))
    line = "%d passed, %d failed" % (tally.passed, tally.failed)
    if tally.skipped:
        line += ", %d skipped" % tally.skipped
    sys.stdout.flush()
    print(line, flush=True)
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
