#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""llvm-xray 14 as the reference for the XRay tests.  Standard library only.

Every helper runs llvm-xray and parses what it prints; nothing here decodes
the trace formats itself.  Failures raise XrayRefError (command, exit status,
stderr), except where noted.

    llvm_xray()          path of llvm-xray: $LLVM_XRAY, else llvm-xray-14,
                         /usr/lib/llvm-14/bin/llvm-xray, llvm-xray; None if
                         none exists (Debian's llvm-14 package only installs
                         the versioned name in /usr/bin).
    yaml_document(trace, binary=None) -> (header, records)
    yaml_records(trace, binary=None)  -> records
                         `llvm-xray convert -f yaml [-y -m BIN] TRACE`.  header
                         is a dict (version, type, constant-tsc, nonstop-tsc,
                         cycle-frequency); each record is a dict with the keys
                         llvm-xray prints: type, func-id, function, args (only
                         on function-enter-arg records), cpu, thread, process,
                         kind, tsc, data.  Integers are ints, function and
                         data are str (data_bytes() turns data back into
                         bytes).  Without a binary, function is the id as a
                         string ('5').  Records are in llvm-xray's order: a
                         stable sort by TSC over all threads.
    account(trace, binary, keep_going=True, deduce_siblings=True)
                         `llvm-xray account` through the YAML route (below).
                         Returns {func_id: {"count", "min", "med", "p90",
                         "p99", "max", "sum", "function", "debug"}}: times in
                         seconds (floats, from the CSV's %e values), function
                         and debug ("file:line:col" or "<invalid>:0:0") as
                         printed.  binary=None runs without -m: names are
                         "#id" and debug "(unknown)".
    account_direct(trace, binary, keep_going=True, deduce_siblings=True)
                         the same, with account reading the raw trace.  Only
                         trustworthy for single-threaded traces: on
                         multi-threaded ones it fails or (with -k) drops
                         records depending on hash order, run to run.
    convert_yaml_text(trace, binary=None), parse_yaml(text),
    yaml_v1_text(trace), parse_account_csv(text): the building blocks.
    extract(binary)      `llvm-xray extract -s BIN` as a list of dicts (id,
                         address, function, kind, always-instrument,
                         function-name, version); None if llvm-xray cannot
                         read the map of a binary that has typed-event sleds.
    fdr_dump(trace, verify=False)  text of `llvm-xray fdr-dump [--verify]`.
    load_scenarios(outdir)  OUTDIR/scenarios.json written by
                         tests/gen-xray-traces.sh, with absolute trace_path and
                         binary_path added to each entry.
    generate(outdir)     runs tests/gen-xray-traces.sh OUTDIR, then
                         load_scenarios(outdir).

llvm-xray 14 quirks these helpers work around or expose (verified on
clang/llvm 14.0.6 traces, see the XRay format notes, sections 4-6):

  * account on a raw multi-threaded trace is unreliable.  The loader hands
    whole per-thread groups over in hash-map order without sorting, and
    account rejects every record older than the first record it happened to
    see (it never updates that reference).  So it fails, or with -k skips
    most records, unless the first thread it sees is also the earliest;
    the result differs from run to run.  convert, however, sorts all records
    by TSC.  The workaround: `convert -f yaml`, rewrite the header's
    `version: N` to `version: 1` (the YAML loader accepts only version 1,
    so YAML made from a v2+ FDR or v3 basic trace cannot be read back
    as is), then run account on the YAML file.  That is account().
  * account stops at the first exit without a matching entry (a trace that
    starts mid-call, ring reuse, late patching) unless -k/--keep-going; an
    exit that is not the top of the stack is an error unless
    -d/--deduce-sibling-calls, which then closes every frame above it.
    Entries never exited are dropped silently.  TailExit counts as Exit.
    Events are ignored.  Stacks are keyed by thread id only.
  * account -f csv prints times with %e (more digits than the text form's
    6 decimals).  Its header is exactly CSV_HEADER; it is checked.
  * extract, -m and -y fail with "Exec format error" on any binary with a
    typed-event sled (kind 5), which __xray_typedevent creates; symbolised
    convert and account with -m are then impossible, hence extract() returns
    None and account(binary=None) exists.
  * convert -f yaml has a stale-field leak: an event record shows the func-id
    of the previous function record, and function records after a typed
    event keep "type: <event type>".  Only kind tells records apart.
  * Without -k, account also fails on single-threaded traces that lost
    their beginning (ring reuse, late patching), even via YAML.
  * data is written by LLVM's YAML writer: plain, '...' or "..." with escapes.
    A payload that is not valid UTF-8 is printed up to the bad byte followed
    by U+FFFD and nothing more, so data is only exact for UTF-8 payloads.
  * A header-only basic trace (nothing recorded) makes every llvm-xray
    command fail with "Unsupported version ... 768" (LLVM retries the file
    as big-endian, #57657); the helpers raise XrayRefError.
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

CSV_HEADER = ["funcid", "count", "min", "median", "90%ile", "99%ile",
              "max", "sum", "debug", "function"]
# CSV column -> key in the dicts returned by account().
_CSV_KEYS = {"count": "count", "min": "min", "median": "med",
             "90%ile": "p90", "99%ile": "p99", "max": "max", "sum": "sum",
             "debug": "debug", "function": "function"}

_INT_FIELDS = ("type", "func-id", "cpu", "thread", "process", "tsc")


class XrayRefError(RuntimeError):
    """An llvm-xray command failed (or its output could not be parsed)."""

    def __init__(self, msg, cmd=None, returncode=None, stderr=""):
        super().__init__(msg)
        self.cmd = cmd
        self.returncode = returncode
        self.stderr = stderr


_llvm_xray_cache = []


def llvm_xray():
    """Path of llvm-xray 14, or None if it is not installed."""
    if not _llvm_xray_cache:
        found = None
        env = os.environ.get("LLVM_XRAY")
        for cand in ([env] if env else []) + [
                "llvm-xray-14", "/usr/lib/llvm-14/bin/llvm-xray", "llvm-xray"]:
            path = shutil.which(cand)
            if path:
                found = path
                break
        _llvm_xray_cache.append(found)
    return _llvm_xray_cache[0]


def _run(args):
    """Runs llvm-xray ARGS; returns the CompletedProcess (text mode)."""
    exe = llvm_xray()
    if exe is None:
        raise XrayRefError("llvm-xray (14) not found")
    cmd = [exe] + [str(a) for a in args]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       errors="surrogateescape")
    if p.returncode != 0:
        raise XrayRefError("%s failed with status %d: %s"
                           % (" ".join(cmd), p.returncode, p.stderr.strip()),
                           cmd, p.returncode, p.stderr)
    return p


# ---------------------------------------------------------------- YAML ----
# A parser for exactly the YAML llvm-xray writes: a header block of
# "key: scalar" lines and a block sequence of flow mappings (records), or a
# block sequence of flow mappings alone (extract).  Flow values are plain,
# single-quoted or double-quoted scalars and flow sequences of scalars.

_DQ_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t",
               "n": "\n", "v": "\v", "f": "\f", "r": "\r", "e": "\x1b",
               " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
               "_": "\xa0", "L": "\u2028", "P": "\u2029"}
_HEX_LEN = {"x": 2, "u": 4, "U": 8}


_WS = re.compile(r"[ \t\r\n]*")
_PLAIN_KEY = re.compile(r"[^,\[\]{}\n:]*")
_PLAIN_VALUE = re.compile(r"[^,\[\]{}\n]*")
_INT = re.compile(r"[-+]?[0-9]+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")


class _Flow:
    def __init__(self, text, pos=0):
        self.s = text
        self.i = pos

    def error(self, what):
        line = self.s.count("\n", 0, self.i) + 1
        raise XrayRefError("llvm-xray YAML: %s at line %d" % (what, line))

    def ws(self):
        self.i = _WS.match(self.s, self.i).end()

    def peek(self):
        self.ws()
        return self.s[self.i] if self.i < len(self.s) else ""

    def expect(self, c):
        if self.peek() != c:
            self.error("expected %r" % c)
        self.i += 1

    def value(self):
        c = self.peek()
        if c == "{":
            return self.mapping()
        if c == "[":
            return self.sequence()
        return self.scalar()

    def mapping(self):
        self.expect("{")
        m = {}
        if self.peek() == "}":
            self.i += 1
            return m
        while True:
            key = self.scalar(key=True)
            self.expect(":")
            m[key] = self.value()
            c = self.peek()
            self.i += 1
            if c == "}":
                return m
            if c != ",":
                self.error("expected ',' or '}'")

    def sequence(self):
        self.expect("[")
        seq = []
        if self.peek() == "]":
            self.i += 1
            return seq
        while True:
            seq.append(self.value())
            c = self.peek()
            self.i += 1
            if c == "]":
                return seq
            if c != ",":
                self.error("expected ',' or ']'")

    def scalar(self, key=False):
        """Returns a str for quoted scalars, _Plain for plain ones."""
        c = self.peek()
        s = self.s
        if c == "'":
            out = []
            i = self.i + 1
            while True:
                j = s.find("'", i)
                if j < 0:
                    self.error("unterminated '")
                out.append(s[i:j])
                if s.startswith("''", j):
                    out.append("'")
                    i = j + 2
                else:
                    self.i = j + 1
                    return "".join(out)
        if c == '"':
            out = []
            i = self.i + 1
            while i < len(s):
                ch = s[i]
                if ch == '"':
                    self.i = i + 1
                    return "".join(out)
                if ch == "\\":
                    e = s[i + 1:i + 2]
                    if e in _HEX_LEN:
                        n = _HEX_LEN[e]
                        out.append(chr(int(s[i + 2:i + 2 + n], 16)))
                        i += 2 + n
                        continue
                    if e in _DQ_ESCAPES:
                        out.append(_DQ_ESCAPES[e])
                        i += 2
                        continue
                    if e == "\n":  # escaped line break
                        i += 2
                        continue
                    self.error("unknown escape \\%s" % e)
                out.append(ch)
                i += 1
            self.error('unterminated "')
        # Plain scalar: ends at a flow indicator or a line end; a key also
        # at ':' (llvm-xray quotes any value that would be ambiguous).
        m = (_PLAIN_KEY if key else _PLAIN_VALUE).match(s, self.i)
        self.i = m.end()
        return _Plain(m.group().strip())


class _Plain(str):
    """An unquoted YAML scalar (may be an int, a bool or ~)."""


def _plain_value(v):
    if isinstance(v, list):
        return [_plain_value(x) for x in v]
    if not isinstance(v, _Plain):
        return str(v) if isinstance(v, str) else v
    t = str(v)
    if _INT.fullmatch(t):
        return int(t)
    if _HEX.fullmatch(t):
        return int(t, 16)
    if t in ("true", "false"):
        return t == "true"
    if t in ("~", "null"):
        return None
    return t


# One record on one line in llvm-xray's field order: the fast path.
_SCALAR = r"('(?:[^'\n]|'')*'|[^,'\"{}\[\]\n]*)"
_FAST_RECORD = re.compile(
    r"- \{ type: ([0-9]+), func-id: ([0-9]+), function: " + _SCALAR +
    r", (?:args: \[ ([0-9, ]*) \], )?cpu: ([0-9]+), thread: ([0-9]+), "
    r"process: ([0-9]+), kind: ([a-z-]+), tsc: ([0-9]+), data: " + _SCALAR +
    r" \}[ \t]*(?=\n|$)")


def _fast_scalar(t):
    if t.startswith("'"):
        return t[1:-1].replace("''", "'")
    return t.strip()


def _fast_record(m):
    rec = {"type": int(m.group(1)), "func-id": int(m.group(2)),
           "function": _fast_scalar(m.group(3))}
    if m.group(4) is not None:
        rec["args"] = [int(a) for a in m.group(4).replace(",", " ").split()]
    rec.update({"cpu": int(m.group(5)), "thread": int(m.group(6)),
                "process": int(m.group(7)), "kind": m.group(8),
                "tsc": int(m.group(9)), "data": _fast_scalar(m.group(10))})
    return rec


def _block_sequence(text, pos, fast=False):
    """Parses '- {flow}' items from text[pos:] up to the document end.
    With fast=True, record lines of the usual shape are returned already
    converted (see parse_yaml); the others go through _Flow."""
    items = []
    f = _Flow(text, pos)
    while True:
        c = f.peek()
        if c == "" or text.startswith("...", f.i):
            return items
        if c != "-":
            f.error("expected '- '")
        if fast:
            m = _FAST_RECORD.match(text, f.i)
            if m:
                items.append(m)
                f.i = m.end()
                continue
        f.i += 1
        items.append(f.value())


def parse_yaml(text):
    """(header, records) from the text of `llvm-xray convert -f yaml`."""
    m = re.search(r"^records:[ \t]*(\[\])?[ \t]*$", text, re.M)
    if not m:
        raise XrayRefError("llvm-xray YAML: no 'records:' line")
    header = {}
    in_header = False
    for line in text[:m.start()].splitlines():
        if line.startswith("header:"):
            in_header = True
        elif in_header and line.startswith(" ") and ":" in line:
            k, v = line.split(":", 1)
            header[k.strip()] = _plain_value(_Plain(v.strip()))
    if m.group(1):
        return header, []
    records = []
    for item in _block_sequence(text, m.end(), fast=True):
        if isinstance(item, re.Match):
            records.append(_fast_record(item))
            continue
        rec = {}
        for k, v in item.items():
            if k in ("function", "data", "kind"):
                v = str(v)
            else:
                v = _plain_value(v)
                if k in _INT_FIELDS and isinstance(v, str):
                    v = int(v, 0)
            rec[k] = v
        records.append(rec)
    return header, records


def data_bytes(record):
    """A record's data field as bytes (exact for UTF-8 payloads)."""
    return record.get("data", "").encode("utf-8", "surrogateescape")


def convert_yaml_text(trace, binary=None):
    args = ["convert", "-f", "yaml"]
    if binary is not None:
        args += ["-y", "-m", binary]
    return _run(args + [trace]).stdout


def yaml_document(trace, binary=None):
    return parse_yaml(convert_yaml_text(trace, binary))


def yaml_records(trace, binary=None):
    return yaml_document(trace, binary)[1]


# ------------------------------------------------------------- account ----

def _account_args(binary, keep_going, deduce_siblings):
    args = ["account"]
    if binary is not None:
        args += ["-m", binary]
    if keep_going:
        args.append("-k")
    if deduce_siblings:
        args.append("-d")
    return args + ["-f", "csv"]


def parse_account_csv(text):
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or rows[0] != CSV_HEADER:
        raise XrayRefError("llvm-xray account: unexpected CSV header %r"
                           % (rows[0] if rows else None))
    out = {}
    for row in rows[1:]:
        if not row:
            continue
        if len(row) != len(CSV_HEADER):
            raise XrayRefError("llvm-xray account: bad CSV row %r" % row)
        d = dict(zip(CSV_HEADER, row))
        st = {}
        for col, key in _CSV_KEYS.items():
            v = d[col]
            if key == "count":
                v = int(v)
            elif key not in ("function", "debug"):
                v = float(v)
            st[key] = v
        out[int(d["funcid"])] = st
    return out


def account_direct(trace, binary, keep_going=True, deduce_siblings=True):
    """`llvm-xray account [-m BIN] [-k] [-d] -f csv TRACE` on the raw trace."""
    p = _run(_account_args(binary, keep_going, deduce_siblings) + [trace])
    return parse_account_csv(p.stdout)


def yaml_v1_text(trace):
    """convert -f yaml output with the header version set to 1."""
    text = convert_yaml_text(trace)
    text, n = re.subn(r"^(  version:[ \t]*)[0-9]+[ \t]*$", r"\g<1>1", text,
                      count=1, flags=re.M)
    if n != 1:
        raise XrayRefError("llvm-xray YAML: no header version line")
    return text


def account(trace, binary, keep_going=True, deduce_siblings=True):
    """account on the time-sorted YAML (convert -f yaml, version := 1)."""
    with tempfile.TemporaryDirectory(prefix="xray-ref-") as d:
        y = os.path.join(d, "trace.yaml")
        with open(y, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(yaml_v1_text(trace))
        p = _run(_account_args(binary, keep_going, deduce_siblings) + [y])
    return parse_account_csv(p.stdout)


# ------------------------------------------------------------- extract ----

def extract(binary):
    """Instrumentation map entries, or None when llvm-xray cannot read it
    (typed-event sleds, kind 5: "Exec format error")."""
    try:
        p = _run(["extract", "-s", binary])
    except XrayRefError as e:
        if "Exec format error" in (e.stderr or ""):
            return None
        raise
    items = _block_sequence(p.stdout, p.stdout.find("---") + 3
                            if p.stdout.lstrip().startswith("---") else 0)
    return [{k: str(v) if k in ("function-name", "kind") else _plain_value(v)
             for k, v in item.items()} for item in items]


# ---------------------------------------------------------------- misc ----

def fdr_dump(trace, verify=False):
    args = ["fdr-dump"] + (["--verify"] if verify else []) + [trace]
    return _run(args).stdout


def load_scenarios(outdir):
    outdir = os.path.abspath(outdir)
    with open(os.path.join(outdir, "scenarios.json"), encoding="utf-8") as f:
        scenarios = json.load(f)
    for s in scenarios:
        s["trace_path"] = os.path.join(outdir, s["trace"])
        s["binary_path"] = os.path.join(outdir, s["binary"])
    return scenarios


def generate(outdir):
    subprocess.run([os.path.join(HERE, "gen-xray-traces.sh"), outdir],
                   check=True)
    return load_scenarios(outdir)
