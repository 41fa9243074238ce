#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""perl pprof (google-pprof, gperftools 2.10) and perf report as the
references for the gperftools tests.  Standard library only.

Every helper runs a tool and parses what it prints; only profile_maps()
reads a profile itself (the maps text at its end, to know where [vdso] and
the mapped files were).  Failures raise RefError (command, exit status,
stderr).  Background: /work/shared/notes/gperftools-profile.md, sections 2-3.

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
    perf_report(data, buildid_dir, children=False, tmpdir=None, sort="sym")
                         -> PerfTable.  `perf --buildid-dir D report -i DATA
                         --stdio -n --sort sym -g none --no-children` (flat:
                         Samples column) or `--children` (cum: the Children
                         percentage turned back into a sample count; the
                         Samples column is the *self* count there).
    parse_perf_report(text, children, dso=False) -> PerfTable.
    perf_report_dso(data, buildid_dir, children=False, tmpdir=None)
                         -> PerfTable  the same with `--sort dso,sym`; rows
                         are keyed by (dso, name), dso as perf prints it (the
                         file's base name, "[vdso]", "[unknown]").
    perf_flat_cum(data, buildid_dir, tmpdir=None) -> (total, {name: (flat, cum)})
                         both reports combined, keyed like
                         pprof's table so a caller can compare per function.
    perf_flat_cum_dso(data, buildid_dir, tmpdir=None)
                         -> (total, {(dso, name): (flat, cum)}) likewise
                         from the two `--sort dso,sym` reports.
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
    is_hex_name(name)    true for pprof's and perf's unresolved-address rows
                         ("0x00007f..."), which both tools print per address.

Names: perl pprof names a PC with addr2line (DWARF, following debug links to
e.g. libc6-dbg) and falls back to nm; perf report uses the ELF symbol tables
(including versioned names such as __libc_start_main@@GLIBC_2.34) and
synthesises foo@plt for PLT stubs.  The helpers return names exactly as
printed; mapping between the two is the caller's job (see
tests/test_gperf.py).

Count conversion for --children: perf prints percentages with two
decimals.  count = percent * total / 100 is exact as long as one sample is
worth more than 0.01% (total < 10000); perf_report() checks that the
printed percent is within rounding of the integer it returns and raises
RefError otherwise.
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

PerfTable = collections.namedtuple("PerfTable", "total rows stdout stderr")
PerfTable.__doc__ = """total: N of "# Samples: N of event"; rows: {name: count}
(flat: Samples column; children: cum count); stdout/stderr: raw text."""

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
# --no-children -n:  "    39.84%            98  [.] leaf_a"
_PERF_FLAT = re.compile(r"^\s+([\d.]+)%\s+(\d+)\s+\[(.)\]\s(.*)$")
# --children -n:     "   100.00%    14.63%            36  [.] top"
_PERF_CHILD = re.compile(r"^\s+([\d.]+)%\s+([\d.]+)%\s+(\d+)\s+\[(.)\]\s(.*)$")
# --sort dso,sym: the same with a Shared Object column before the symbol
# ("    39.84%            98  libc.so.6  [.] leaf_a").
_PERF_FLAT_DSO = re.compile(r"^\s+([\d.]+)%\s+(\d+)\s+(\S+)\s+\[(.)\]\s(.*)$")
_PERF_CHILD_DSO = re.compile(r"^\s+([\d.]+)%\s+([\d.]+)%\s+(\d+)\s+(\S+)\s+\[(.)\]\s(.*)$")


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


def parse_perf_report(text, children, dso=False):
    total = None
    rows = {}
    for line in text.splitlines():
        m = _PERF_SAMPLES.match(line)
        if m:
            if total is not None:
                raise RefError("more than one event in perf report output")
            total = int(m.group(1))
            continue
        if not line.strip() or line.startswith("#"):
            continue
        if children:
            m = (_PERF_CHILD_DSO if dso else _PERF_CHILD).match(line)
            if not m:
                raise RefError("unparsable perf report --children line: %r" % line)
            g = m.groups()[3:] if dso else (None,) + m.groups()[3:]
            pct, obj, level, name = float(m.group(1)), g[0], g[1], g[2].rstrip()
        else:
            m = (_PERF_FLAT_DSO if dso else _PERF_FLAT).match(line)
            if not m:
                raise RefError("unparsable perf report line: %r" % line)
            g = m.groups()[2:] if dso else (None,) + m.groups()[2:]
            count, obj, level, name = int(m.group(2)), g[0], g[1], g[2].rstrip()
        if dso:
            name = (obj, name)
        if level != ".":
            raise RefError("perf report shows a non-user symbol: %r" % line)
        if total is None:
            raise RefError("perf report row before the '# Samples:' line")
        if children:
            if total >= 10000:
                raise RefError("cannot turn 2-decimal percentages into counts "
                               "for %d samples" % total)
            count = int(round(pct * total / 100.0))
            if abs(count * 100.0 / total - pct) > 0.0051:
                raise RefError("children %.2f%% of %d is not a whole number of "
                               "samples (%r)" % (pct, total, line))
        if name in rows:
            raise RefError("perf report printed %r twice" % name)
        rows[name] = count
    if total is None:
        raise RefError("no '# Samples:' line in perf report output:\n" + text[:2000])
    return PerfTable(total, rows, text, "")


def perf_report(data, buildid_dir, children=False, tmpdir=None, sort="sym"):
    cmd = ["perf", "--buildid-dir", buildid_dir, "report", "-i", data, "--stdio",
           "-n", "--sort", sort, "-g", "none", "--percent-limit", "0",
           "--children" if children else "--no-children"]
    p = _run(cmd, env=_perf_env(tmpdir))
    t = parse_perf_report(p.stdout, children, dso=(sort == "dso,sym"))
    return t._replace(stderr=p.stderr)


def perf_report_dso(data, buildid_dir, children=False, tmpdir=None):
    return perf_report(data, buildid_dir, children, tmpdir, sort="dso,sym")


def perf_flat_cum(data, buildid_dir, tmpdir=None):
    """(total, {name: (flat, cum)}) from the two reports."""
    flat = perf_report(data, buildid_dir, children=False, tmpdir=tmpdir)
    cum = perf_report(data, buildid_dir, children=True, tmpdir=tmpdir)
    if flat.total != cum.total:
        raise RefError("perf report totals differ: %d vs %d" % (flat.total, cum.total))
    rows = {}
    for name in set(flat.rows) | set(cum.rows):
        rows[name] = (flat.rows.get(name, 0), cum.rows.get(name, 0))
    return flat.total, rows


def perf_flat_cum_dso(data, buildid_dir, tmpdir=None):
    """(total, {(dso, name): (flat, cum)}) from the two dso,sym reports."""
    flat = perf_report_dso(data, buildid_dir, children=False, tmpdir=tmpdir)
    cum = perf_report_dso(data, buildid_dir, children=True, tmpdir=tmpdir)
    if flat.total != cum.total:
        raise RefError("perf report totals differ: %d vs %d" % (flat.total, cum.total))
    rows = {}
    for key in set(flat.rows) | set(cum.rows):
        rows[key] = (flat.rows.get(key, 0), cum.rows.get(key, 0))
    return flat.total, rows


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


_HEX_NAME = re.compile(r"^0x[0-9a-fA-F]+$")


def is_hex_name(name):
    return bool(_HEX_NAME.match(name))


def hex_value(name):
    return int(name, 16)
