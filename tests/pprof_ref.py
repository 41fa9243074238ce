#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""perl pprof (google-pprof, gperftools 2.10) and perf report as the
references for the gperftools tests.  Standard library only.

Every helper runs a tool and parses what it prints; only profile_maps()
reads a profile itself (the maps text at its end, to know where [vdso] and
the mapped files were).  Failures raise RefError (command, exit status,
stderr).  Background: gperftools' docs/cpuprofile-fileformat.html and perl
pprof's ReadCPUProfile / FixCallerAddresses.

    google_pprof()       path of perl pprof: $GOOGLE_PPROF, else google-pprof
                         (Debian's name), else pprof if it is the perl script;
                         None if neither exists.
    pprof_text(binary, profile, no_auto_signal_frm=False, extra=())
                         -> PprofTable.  `google-pprof --text
                         [--no-auto-signal-frm] BINARY PROFILE` with stderr
                         kept apart ("Using local file", "Removing ... from
                         all stack traces" and the like go there).
    pprof_addresses(binary, profile, no_auto_signal_frm=False)
                         -> [AddrRow]  the same with --addresses: one row per
                         (adjusted address, name), address as int, where =
                         "file:line" ("??:0" if unknown).  Addresses are those
                         pprof looked up: the leaf PC, callers' return
                         address - 1, i.e. what a perf callchain written by
                         perfgraft shows for an unresolved frame.
    parse_pprof_text(text) -> PprofTable.  The table is
                         `flat flat% sum% cum cum% name`; name is everything
                         after the fifth column (it may contain spaces, e.g.
                         "hot_inl (inline)").  Raises RefError if the
                         "Total: N samples" line is missing or a line does
                         not parse.
    perf_report(data, buildid_dir, children=False, tmpdir=None, sort="sym",
                tick_ns=1)
                         -> PerfTable.  `perf --buildid-dir D report -i DATA
                         --stdio -n --show-total-period --sort sym -g none
                         --no-children` (flat: the Period column in ticks of
                         tick_ns) or `--children` (cum: the Children
                         percentage of the total period turned back into
                         ticks).  The Samples column (sample records, the
                         *self* count in both) is kept apart: perfgraft
                         writes one record per tick, or one per distinct
                         stack whose period carries its ticks, and the
                         periods are the same either way.
    parse_perf_report(text, children, dso=False, tick_ns=1) -> PerfTable.
    perf_report_dso(data, buildid_dir, children=False, tmpdir=None, tick_ns=1)
                         -> PerfTable  the same with `--sort dso,sym`; rows
                         are keyed by (dso, name), dso as perf prints it (the
                         file's base name, "[vdso]", "[unknown]").
    perf_script_flat_cum(data, buildid_dir, tmpdir=None, tick_ns=1, dso=False)
                         -> (total, {name: (flat, cum)}) in ticks, summed
                         from every sample's period and call chain that
                         `perf script -F period,ip,sym,dso` prints.
    perf_flat_cum(data, buildid_dir, tmpdir=None, tick_ns=1)
                         -> (total, {name: (flat, cum)}) in ticks: flat from
                         the Period column; cum from the Children column
                         while the total is under 10000 ticks, else from
                         perf_script_flat_cum() after checking that perf
                         report's Children percentages are those sums,
                         rounded (and its flat periods the script's); keyed
                         like pprof's table so a caller can compare per
                         function.
    perf_flat_cum_dso(data, buildid_dir, tmpdir=None, tick_ns=1)
                         -> (total, {(dso, name): (flat, cum)}) likewise
                         with `--sort dso,sym`.
    perf_annotate(data, buildid_dir, symbol, tmpdir=None, keep=())
                         -> Annotation  `perf annotate --stdio -s SYMBOL`:
                         the sample count in its header and every (percent,
                         address, text) instruction line.  perf annotate
                         leaks a /tmp/perf-vdso.so-XXXXXX copy for data with
                         a [vdso] mapping; with tmpdir it runs with tmpdir
                         as its private /tmp (private_tmp_cmd()).
    profile_maps(profile) -> [Mapping]  the maps text of a 32/64-bit,
                         either-endian gperftools CPU profile (lines after the
                         trailer record), parsed like /proc/self/maps.
    mapping_at(maps, addr) -> Mapping or None: the maps line holding addr.
    elf_vaddr(path, file_offset) -> the ELF virtual address of a file offset
                         (PT_LOAD headers from readelf -lW), as perf annotate
                         prints instruction addresses.
    is_hex_name(name)    true for pprof's and perf's unresolved-address rows
                         ("0x00007f..."), which both tools print per address.

Names: perl pprof names a PC with addr2line (DWARF, following debug links to
e.g. libc6-dbg) and falls back to nm; perf report uses the ELF symbol tables
(including versioned names such as __libc_start_main@@GLIBC_2.34) and
synthesises foo@plt for PLT stubs.  The helpers return names exactly as
printed; mapping between the two is the caller's job (see
tests/test_gperf.py).

Count conversion for --children: perf prints percentages with two
decimals.  count = percent * total / 100 is exact as long as one tick is
worth more than 0.01% (total < 10000); perf_report() checks that the
printed percent is within rounding of the integer it returns and raises
RefError otherwise.  Periods that are not whole ticks raise RefError too.
"""

import collections
import glob
import os
import re
import shutil
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


class RefError(RuntimeError):
    """A reference tool failed, or its output could not be parsed."""

    def __init__(self, msg, cmd=None, returncode=None, stderr=""):
        super().__init__(msg)
        self.cmd = cmd
        self.returncode = returncode
        self.stderr = stderr


PprofTable = collections.namedtuple("PprofTable", "total rows order stdout stderr")
PprofTable.__doc__ = """total: N of "Total: N samples"; rows: {name: (flat, cum)};
order: names in printed order; stdout/stderr: raw text."""

PerfTable = collections.namedtuple("PerfTable",
                                   "total rows stdout stderr samples nsamples")
PerfTable.__doc__ = """total: ticks in all ("# Event count" / tick_ns); rows:
{name: ticks} (flat: the Period column / tick_ns; children: the cum ticks
the Children percentage stands for); stdout/stderr: raw text; samples:
{name: the Samples column (self sample records)}; nsamples: N of
"# Samples: N of event" (sample records)."""

Annotation = collections.namedtuple("Annotation", "symbol samples lines stdout")
Annotation.__doc__ = """samples: the count in the header "(N samples"; lines:
[(percent float, address int, instruction text)] for every disassembly line."""

AddrRow = collections.namedtuple("AddrRow", "addr name flat cum where")

Mapping = collections.namedtuple("Mapping", "start end perms offset dev inode path")


_pprof_cache = []


def google_pprof():
    """Path of perl pprof, or None."""
    if not _pprof_cache:
        found = None
        env = os.environ.get("GOOGLE_PPROF")
        for cand in ([env] if env else []) + ["google-pprof", "pprof"]:
            path = shutil.which(cand)
            if not path:
                continue
            try:
                with open(path, "rb") as f:
                    head = f.read(200)
            except OSError:
                continue
            if cand != "pprof" or b"perl" in head:
                found = path
                break
        _pprof_cache.append(found)
    return _pprof_cache[0]


def _run(cmd, env=None, timeout=300):
    p = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, errors="surrogateescape",
                       env=env, timeout=timeout)
    if p.returncode != 0:
        raise RefError("%s failed with status %d: %s"
                       % (" ".join(str(c) for c in cmd), p.returncode,
                          p.stderr.strip()[-2000:]),
                       cmd, p.returncode, p.stderr)
    return p


# ---------------------------------------------------------------------------
# pprof

_PPROF_TOTAL = re.compile(r"^Total: (\d+) samples\s*$")
_PPROF_ROW = re.compile(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s(.*)$")


def parse_pprof_text(text):
    total = None
    rows = {}
    order = []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _PPROF_TOTAL.match(line)
        if m:
            if total is not None:
                raise RefError("two Total lines in pprof output")
            total = int(m.group(1))
            continue
        m = _PPROF_ROW.match(line)
        if not m:
            raise RefError("unparsable pprof --text line: %r" % line)
        name = m.group(3).strip()
        flat, cum = int(m.group(1)), int(m.group(2))
        if name in rows:
            # perl prints one row per name; a repeat would mean our parse
            # split something wrongly.
            raise RefError("pprof printed %r twice" % name)
        rows[name] = (flat, cum)
        order.append(name)
    if total is None:
        raise RefError("no 'Total: N samples' line in pprof output:\n" + text[:2000])
    return PprofTable(total, rows, order, text, "")


def pprof_text(binary, profile, no_auto_signal_frm=False, extra=()):
    exe = google_pprof()
    if exe is None:
        raise RefError("google-pprof (perl pprof) not found")
    cmd = [exe, "--text"]
    if no_auto_signal_frm:
        cmd.append("--no-auto-signal-frm")
    cmd += list(extra) + [binary, profile]
    p = _run(cmd)
    t = parse_pprof_text(p.stdout)
    return t._replace(stderr=p.stderr)


_PPROF_ADDR_NAME = re.compile(r"^([0-9a-fA-F]{8,16}) (.*) (\S+:\d+)$")


def pprof_addresses(binary, profile, no_auto_signal_frm=False):
    exe = google_pprof()
    if exe is None:
        raise RefError("google-pprof (perl pprof) not found")
    cmd = [exe, "--text", "--addresses"]
    if no_auto_signal_frm:
        cmd.append("--no-auto-signal-frm")
    p = _run(cmd + [binary, profile])
    rows = []
    for line in p.stdout.splitlines():
        if not line.strip() or _PPROF_TOTAL.match(line):
            continue
        m = _PPROF_ROW.match(line)
        n = _PPROF_ADDR_NAME.match(m.group(3).strip()) if m else None
        if not n:
            raise RefError("unparsable pprof --addresses line: %r" % line)
        rows.append(AddrRow(int(n.group(1), 16), n.group(2), int(m.group(1)),
                            int(m.group(2)), n.group(3)))
    return rows


# ---------------------------------------------------------------------------
# perf

_PERF_SAMPLES = re.compile(r"^# Samples: (\d+)\s+of event")
_PERF_EVENTS = re.compile(r"^# Event count \(approx\.\): (\d+)\s*$")
# -n --show-total-period, --no-children:
#   "    39.84%            98      98000000  [.] leaf_a"
_PERF_FLAT = re.compile(r"^\s+([\d.]+)%\s+(\d+)\s+(\d+)\s+\[(.)\]\s(.*)$")
# --children:  "   100.00%    14.63%            36      36000000  [.] top"
_PERF_CHILD = re.compile(r"^\s+([\d.]+)%\s+([\d.]+)%\s+(\d+)\s+(\d+)\s+\[(.)\]\s(.*)$")
# --sort dso,sym: the same with a Shared Object column before the symbol
# ("    39.84%            98      98000000  libc.so.6  [.] leaf_a").
_PERF_FLAT_DSO = re.compile(r"^\s+([\d.]+)%\s+(\d+)\s+(\d+)\s+(\S+)\s+\[(.)\]\s(.*)$")
_PERF_CHILD_DSO = re.compile(
    r"^\s+([\d.]+)%\s+([\d.]+)%\s+(\d+)\s+(\d+)\s+(\S+)\s+\[(.)\]\s(.*)$")


def _perf_env(tmpdir):
    env = dict(os.environ)
    if tmpdir:
        env["TMPDIR"] = tmpdir
    env.pop("PERF_BUILDID_DIR", None)
    return env


# perf 6.1 copies its own vdso to the hard-coded /tmp/perf-vdso.so-XXXXXX
# whenever a perf.data has a [vdso] mapping, and `perf annotate` never
# deletes that copy (report and script do).  private_tmp_cmd() runs a
# command in a private mount namespace whose /tmp is the caller's scratch
# directory, so the copy is removed with it.  The directory holding the
# caller's files (keep: data, binaries, build-id dir), if it lies under
# /tmp, stays visible at its own path through a bind mount inside scratch.
# Needs unshare(1) with mount namespaces (root, or unprivileged user
# namespaces); private_tmp_cmd() returns None when that is not possible.
_unshare_cache = []
_VDSO_COPIES = "/tmp/perf-vdso.so-??????"


def _unshare_prefix():
    if not _unshare_cache:
        found = None
        exe = shutil.which("unshare")
        if exe:
            for args in (["-m"], ["-r", "-m"]):
                try:
                    p = subprocess.run([exe] + args + ["sh", "-c", "mount --make-rprivate / && "
                                                       "mount --bind /tmp /tmp"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       timeout=30)
                except OSError:
                    break
                if p.returncode == 0:
                    found = [exe] + args
                    break
        _unshare_cache.append(found)
    return _unshare_cache[0]


def private_tmp_cmd(cmd, scratch, keep=()):
    """cmd wrapped so that it sees scratch as /tmp, with every directory in
    keep still visible at its own path; None if mount namespaces are
    unavailable."""
    pre = _unshare_prefix()
    if pre is None:
        return None
    scratch = os.path.realpath(scratch)
    script = "set -e; mount --make-rprivate /; "
    args = [scratch]
    for k in ([keep] if isinstance(keep, str) else list(keep)):
        k = os.path.realpath(k)
        rel = os.path.relpath(k, "/tmp")
        if rel.startswith(".."):
            continue  # not hidden by the new /tmp
        inner = os.path.join(scratch, rel)
        os.makedirs(inner, exist_ok=True)
        script += 'mount --bind "${%d}" "${%d}"; ' % (len(args), len(args) + 1)
        args += [k, inner]
    script += 'mount --rbind "$0" /tmp; shift %d; exec "$@"' % (len(args) - 1)
    return pre + ["sh", "-c", script] + args + [str(c) for c in cmd]


def _ticks(period, tick_ns, what):
    if period % tick_ns:
        raise RefError("%s: a period of %d ns is not a whole number of %d ns ticks"
                       % (what, period, tick_ns))
    return period // tick_ns


def parse_perf_report(text, children, dso=False, tick_ns=1):
    """PerfTable of a `perf report --stdio -n --show-total-period` text."""
    nsamples = events = None
    rows, samples = {}, {}
    for line in text.splitlines():
        m = _PERF_SAMPLES.match(line)
        if m:
            if nsamples is not None:
                raise RefError("more than one event in perf report output")
            nsamples = int(m.group(1))
            continue
        m = _PERF_EVENTS.match(line)
        if m:
            events = int(m.group(1))
            continue
        if not line.strip() or line.startswith("#"):
            continue
        if children:
            m = (_PERF_CHILD_DSO if dso else _PERF_CHILD).match(line)
            if not m:
                raise RefError("unparsable perf report --children line: %r" % line)
        else:
            m = (_PERF_FLAT_DSO if dso else _PERF_FLAT).match(line)
            if not m:
                raise RefError("unparsable perf report line: %r" % line)
        g = m.groups()
        k = 2 if children else 1          # index of the Samples column
        nsamp, period = int(g[k]), int(g[k + 1])
        obj = g[k + 2] if dso else None
        level, name = g[-2], g[-1].rstrip()
        if dso:
            name = (obj, name)
        if level != ".":
            raise RefError("perf report shows a non-user symbol: %r" % line)
        if nsamples is None or events is None:
            raise RefError("perf report row before the '# Samples:' and '# Event count' lines")
        total = _ticks(events, tick_ns, "event count")
        if children:
            # the Children column is the only cumulative figure perf report
            # prints: a percentage of the total period with two decimals
            pct = float(g[0])
            if total >= 10000:
                raise RefError("cannot turn 2-decimal percentages into counts "
                               "for %d ticks" % total)
            count = int(round(pct * total / 100.0))
            if abs(count * 100.0 / total - pct) > 0.0051:
                raise RefError("children %.2f%% of %d is not a whole number of "
                               "ticks (%r)" % (pct, total, line))
        else:
            count = _ticks(period, tick_ns, repr(line))
        if name in rows:
            raise RefError("perf report printed %r twice" % (name,))
        rows[name] = count
        samples[name] = nsamp
    if nsamples is None or events is None:
        raise RefError("no '# Samples:' / '# Event count' lines in perf report output:\n"
                       + text[:2000])
    return PerfTable(_ticks(events, tick_ns, "event count"), rows, text, "", samples,
                     nsamples)


def perf_report(data, buildid_dir, children=False, tmpdir=None, sort="sym", tick_ns=1):
    cmd = ["perf", "--buildid-dir", buildid_dir, "report", "-i", data, "--stdio",
           "-n", "--show-total-period", "--sort", sort, "-g", "none",
           "--percent-limit", "0", "--children" if children else "--no-children"]
    p = _run(cmd, env=_perf_env(tmpdir))
    t = parse_perf_report(p.stdout, children, dso=(sort == "dso,sym"), tick_ns=tick_ns)
    return t._replace(stderr=p.stderr)


def perf_report_dso(data, buildid_dir, children=False, tmpdir=None, tick_ns=1):
    return perf_report(data, buildid_dir, children, tmpdir, sort="dso,sym", tick_ns=tick_ns)


_SCRIPT_HEAD = re.compile(r"^\s*(\d+)\s*$")
_SCRIPT_FRAME = re.compile(r"^\s+([0-9a-f]+) (.*) \((.*)\)$")


def perf_script_flat_cum(data, buildid_dir, tmpdir=None, tick_ns=1, dso=False):
    """(total, {name: (flat, cum)}) in ticks from `perf script -F
    period,ip,sym,dso`: flat = the periods of the samples whose first
    frame is the symbol, cum = the periods of the samples whose chain holds
    it (once per sample, as perf report --children counts).  Unresolved
    frames are named like perf report names them ("0x%016x" of the
    printed address); dso=True keys by (DSO base name, name)."""
    cmd = ["perf", "--buildid-dir", buildid_dir, "script", "-i", data,
           "-F", "period,ip,sym,dso"]
    p = _run(cmd, env=_perf_env(tmpdir))
    flat = collections.Counter()
    cum = collections.Counter()
    total = 0
    period, chain = None, []

    def end():
        if period is None:
            return
        if not chain:
            raise RefError("perf script: a sample without frames")
        flat[chain[0]] += period
        for k in set(chain):
            cum[k] += period

    for line in p.stdout.splitlines() + [""]:
        m = _SCRIPT_HEAD.match(line)
        if m:
            end()
            period, chain = int(m.group(1)), []
            total += period
            continue
        m = _SCRIPT_FRAME.match(line)
        if m and period is not None:
            name = m.group(2)
            if name == "[unknown]":
                name = "0x%016x" % int(m.group(1), 16)
            chain.append((os.path.basename(m.group(3)), name) if dso else name)
            continue
        if line.strip():
            raise RefError("unparsable perf script line: %r" % line)
    end()
    rows = {k: (_ticks(flat[k], tick_ns, str(k)), _ticks(cum[k], tick_ns, str(k)))
            for k in cum}
    return _ticks(total, tick_ns, "perf script total"), rows


def _flat_cum(data, buildid_dir, tmpdir, tick_ns, sort):
    flat = perf_report(data, buildid_dir, False, tmpdir, sort, tick_ns)
    rows = {}
    if flat.total < 10000:
        cum = perf_report(data, buildid_dir, True, tmpdir, sort, tick_ns)
        if flat.total != cum.total:
            raise RefError("perf report totals differ: %d vs %d" % (flat.total, cum.total))
        for name in set(flat.rows) | set(cum.rows):
            rows[name] = (flat.rows.get(name, 0), cum.rows.get(name, 0))
        return flat.total, rows
    # Too many ticks for the Children percentages to give counts: the
    # exact cumulative periods come from perf script's samples, and perf
    # report's percentages must be those, rounded.
    total, srows = perf_script_flat_cum(data, buildid_dir, tmpdir, tick_ns, sort == "dso,sym")
    if total != flat.total:
        raise RefError("perf script counts %d ticks, perf report %d" % (total, flat.total))
    p = _run(["perf", "--buildid-dir", buildid_dir, "report", "-i", data, "--stdio",
              "--sort", sort, "-g", "none", "--percent-limit", "0", "--children",
              "-F", "children,sym" if sort == "sym" else "children,dso,sym"],
             env=_perf_env(tmpdir))
    for line in p.stdout.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = re.match(r"^\s+([\d.]+)%\s+(?:(\S+)\s+)?\[(.)\]\s(.*)$", line)
        if not m:
            raise RefError("unparsable perf report --children line: %r" % line)
        name = m.group(4).rstrip()
        key = (m.group(2), name) if sort == "dso,sym" else name
        want = 100.0 * srows.get(key, (0, 0))[1] / total
        if abs(float(m.group(1)) - want) > 0.0051:
            raise RefError("perf report --children says %s%% for %r, perf script's "
                           "periods %.4f%%" % (m.group(1), key, want))
    for name in set(flat.rows) | set(srows):
        f = flat.rows.get(name, 0)
        if f != srows.get(name, (0, 0))[0]:
            raise RefError("%r: perf report's flat %d ticks, perf script's %d"
                           % (name, f, srows.get(name, (0, 0))[0]))
        rows[name] = (f, srows.get(name, (0, 0))[1])
    return flat.total, rows


def perf_flat_cum(data, buildid_dir, tmpdir=None, tick_ns=1):
    """(total, {name: (flat, cum)}) in ticks of tick_ns from perf's periods."""
    return _flat_cum(data, buildid_dir, tmpdir, tick_ns, "sym")


def perf_flat_cum_dso(data, buildid_dir, tmpdir=None, tick_ns=1):
    """(total, {(dso, name): (flat, cum)}) likewise with --sort dso,sym."""
    return _flat_cum(data, buildid_dir, tmpdir, tick_ns, "dso,sym")


_ANN_HEADER = re.compile(r"Source code & Disassembly of .* for .* \((\d+) samples")
_ANN_LINE = re.compile(r"^\s*([\d.]+)\s+:\s+([0-9a-f]+):\s+(.*)$")


def perf_annotate(data, buildid_dir, symbol, tmpdir=None, keep=()):
    """tmpdir: scratch directory that becomes perf's /tmp when mount
    namespaces are available (see private_tmp_cmd; keep: the directories
    with data, binaries, profiles and build-id dir).  Without them, the
    /tmp/perf-vdso.so-XXXXXX files that appeared while perf annotate ran
    are deleted afterwards."""
    cmd = ["perf", "--buildid-dir", buildid_dir, "annotate", "-i", data, "--stdio",
           "-s", symbol]
    wrapped = private_tmp_cmd(cmd, tmpdir, keep) if tmpdir else None
    if wrapped:
        p = _run(wrapped, env=_perf_env(tmpdir))
    else:
        # Fallback: remove the copies that appeared while perf ran.  A perf
        # of someone else started in the same second could lose its copy.
        before = set(glob.glob(_VDSO_COPIES))
        try:
            p = _run(cmd, env=_perf_env(tmpdir))
        finally:
            for f in set(glob.glob(_VDSO_COPIES)) - before:
                try:
                    os.unlink(f)
                except OSError:
                    pass
    samples = None
    lines = []
    for line in p.stdout.splitlines():
        m = _ANN_HEADER.search(line)
        if m and samples is None:
            samples = int(m.group(1))
            continue
        m = _ANN_LINE.match(line)
        if m:
            lines.append((float(m.group(1)), int(m.group(2), 16), m.group(3)))
    return Annotation(symbol, samples, lines, p.stdout)


# ---------------------------------------------------------------------------
# the profile's maps text

_MAPS_LINE = re.compile(r"^([0-9a-fA-F]+)-([0-9a-fA-F]+)\s+(\S{4})\s+([0-9a-fA-F]+)\s+"
                        r"(\S+)\s+(\d+)\s*(.*)$")


def _words(blob, fmt, size):
    n = len(blob) // size
    return struct.unpack("%s%d%s" % (fmt[0], n, fmt[1]), blob[:n * size])


def profile_maps(profile):
    """Mappings listed after the trailer of a gperftools CPU profile.
    Raises RefError when no header/trailer is found."""
    with open(profile, "rb") as f:
        blob = f.read()
    for bo, t, size in (("<", "Q", 8), (">", "Q", 8), ("<", "I", 4), (">", "I", 4)):
        w = _words(blob, bo + t, size)
        if len(w) < 5 or w[0] != 0 or not 3 <= w[1] < 1024:
            continue
        if size == 8 and blob[:8] != bytes(8):
            continue
        i = 2 + w[1]
        end = None
        while i + 1 < len(w):
            n, d = w[i], w[i + 1]
            if d < 1 or i + 2 + d > len(w):
                break
            if n == 0 and d == 1 and w[i + 2] == 0:
                end = i + 3
                break
            i += 2 + d
        if end is None:
            continue
        text = blob[end * size:].decode("utf-8", "surrogateescape")
        maps = []
        for line in text.splitlines():
            m = _MAPS_LINE.match(line.strip())
            if m:
                maps.append(Mapping(int(m.group(1), 16), int(m.group(2), 16), m.group(3),
                                    int(m.group(4), 16), m.group(5), int(m.group(6)),
                                    m.group(7).strip()))
        return maps
    raise RefError("%s: no gperftools CPU profile header/trailer found" % profile)


def mapping_at(maps, addr):
    """The Mapping of maps (profile_maps()) that holds addr, or None."""
    for m in maps:
        if m.start <= addr < m.end:
            return m
    return None


_LOAD = re.compile(r"^\s*LOAD\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s")
_load_cache = {}


def elf_vaddr(path, file_offset):
    """The virtual address (as perf annotate prints it) of a file offset
    of the ELF file path, through its PT_LOAD headers (`readelf -lW`)."""
    if path not in _load_cache:
        p = _run(["readelf", "-lW", path])
        _load_cache[path] = [tuple(int(x, 16) for x in m.groups())
                             for m in map(_LOAD.match, p.stdout.splitlines()) if m]
    for off, vaddr, filesz in _load_cache[path]:
        if off <= file_offset < off + filesz:
            return file_offset - off + vaddr
    raise RefError("%s: file offset 0x%x is in no PT_LOAD" % (path, file_offset))


_HEX_NAME = re.compile(r"^0x[0-9a-fA-F]+$")


def is_hex_name(name):
    return bool(_HEX_NAME.match(name))


def hex_value(name):
    return int(name, 16)
