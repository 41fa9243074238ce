# SPDX-License-Identifier: MIT
"""Function latency table of an XRay trace, as `llvm-xray account` prints it.

    perfgraft xray TRACE --binary BIN -o xray.data
    perf script -i xray.data -s xray-account.py [-- OPTIONS]

Reads the xray:function_exit and xray:tail_exit events that `perfgraft
xray` writes (their `duration` field is the call's latency in ns), names
the functions from the xray:function events (one per function, written
before its first call: ID, name, file, line and column), and prints,
per function id, count, min, med, 90p, 99p, max and sum in seconds, the way
llvm-xray 14's account command does with -k -d (--keep-going
--deduce-sibling-calls):

  - exits flagged "inferred" count: the frame's own exit was lost and the
    exit of a function deeper in the stack closed it, as account -d does;
  - exits flagged "unfinished" (never exited) and "no_entry" (exit without
    an entry in the trace) do not count: account drops the former and, with
    -k, skips the latter.

Statistics as in account: med, 90p and 99p are the elements at n/2,
floor(0.9 n) and floor(0.99 n) of the sorted latencies (no interpolation).
Options (give them after `--`, so that perf does not take them):

  -s, --sort funcid|count|min|med|90p|99p|max|sum|func   (default funcid)
  -r, --sortorder asc|dsc                                  (default asc)
  -p, --top N              only the first N rows (0: all)
  -f, --format text|csv    text table or account's CSV
  -o, --output FILE        write the table to FILE instead of stdout

The debug-info column is the line-table row of the function's address, as
account's symbolizer finds it ("<invalid>:0:0" without debug info, "(unknown)"
without a binary).
Latencies are computed as account does, from each exit's ticks and the
trace's cycle frequency (ticks / frequency in doubles, the sum of the ticks
divided once; a frequency of 0 counts ticks as seconds, as account does),
so both tables match account's digits.  perf.data files from perfgraft
versions whose exits lack those fields fall back to the whole-nanosecond
duration field.  Difference from llvm-xray account: "-s func" sorts by
function name (account does not implement it).
"""

import argparse
import math
import os
import sys

SORT_KEYS = ("funcid", "count", "min", "med", "90p", "99p", "max", "sum", "func")
FLAG_INFERRED = 1
FLAG_UNFINISHED = 2
FLAG_NO_ENTRY = 4
UNKNOWN = "<invalid>:0:0"    # what account prints without debug info


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="perf script -s xray-account.py --",
        description="llvm-xray account's function latency table from the "
                    "xray:* events of a perf.data written by perfgraft xray")
    ap.add_argument("-s", "--sort", choices=SORT_KEYS, default="funcid",
                    help="sort the rows by this field (default: funcid)")
    ap.add_argument("-r", "--sortorder", choices=("asc", "dsc"), default="asc",
                    help="sort order (default: asc)")
    ap.add_argument("-p", "--top", type=int, default=-1, metavar="N",
                    help="only show the top N rows")
    ap.add_argument("-f", "--format", choices=("text", "csv"), default="text",
                    help="output format (default: text)")
    ap.add_argument("-o", "--output", default="-", metavar="FILE",
                    help="output file; - for stdout (the default)")
    # account's -k and -d are implied; accept them for convenience
    ap.add_argument("-k", "--keep-going", action="store_true",
                    help=argparse.SUPPRESS)
    ap.add_argument("-d", "--deduce-sibling-calls", action="store_true",
                    help=argparse.SUPPRESS)
    return ap.parse_args(argv)


args = parse_args(sys.argv[1:])

latencies = {}          # func_id -> [(ticks, cycle frequency), ...]
names = {}              # func_id -> name, from xray:function
debug = {}              # func_id -> "file:line:column", from xray:function
skipped = {"unfinished": 0, "no_entry": 0}


def _exit_event(fields):
    flags = fields.get("flags", 0)
    if flags & FLAG_NO_ENTRY:
        skipped["no_entry"] += 1
        return
    if flags & FLAG_UNFINISHED:
        skipped["unfinished"] += 1
        return
    if "ticks" in fields and "freq" in fields:
        lat = (fields["ticks"], fields["freq"])
    else:                       # older perfgraft: whole ns only
        lat = (fields["duration"], 1000000000)
    latencies.setdefault(fields["func_id"], []).append(lat)


def _text(v):
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).split(b"\0", 1)[0].decode("utf-8", "replace")
    return v or ""


def _function_event(fields):
    fid = fields["func_id"]
    names[fid] = _text(fields.get("name")) or "#%d" % fid
    f = _text(fields.get("file"))
    if not f and names[fid] == "#%d" % fid:
        debug[fid] = "(unknown)"        # no binary: account without -m
    elif f:
        # account prints the file's base name
        debug[fid] = "%s:%d:%d" % (os.path.basename(f), fields.get("line", 0),
                                   fields.get("column", 0))


EXIT_EVENTS = ("xray__function_exit", "xray__tail_exit")


def trace_unhandled(event_name, context, event_fields_dict, *rest):
    # perf passes the event's fields by name; only exits carry latencies.
    if event_name in EXIT_EVENTS:
        _exit_event(event_fields_dict)
    elif event_name == "xray__function":
        _function_event(event_fields_dict)


def seconds(ticks, freq):
    # account: a double divided by the header's frequency, unless it is 0
    return float(ticks) / float(freq) if freq else float(ticks)


def stats(timings):
    freqs = set(f for _, f in timings)
    if len(freqs) == 1:
        # one trace's calls (account's case): sort the ticks, divide the
        # picked ones, and the sum of the ticks (accumulated in a double)
        # once, as account does
        freq = freqs.pop()
        s = sorted(t for t, _ in timings)
        total = 0.0
        for t in s:
            total += t
        conv = lambda v: seconds(v, freq)
    else:
        # calls from traces of different frequencies: their seconds
        s = sorted(seconds(t, f) for t, f in timings)
        total = math.fsum(s)
        conv = float
    n = len(s)
    return {
        "count": n,
        "min": conv(s[0]),
        "med": conv(s[n // 2]),
        "90p": conv(s[int(math.floor(n * 0.9))]),
        "99p": conv(s[int(math.floor(n * 0.99))]),
        "max": conv(s[-1]),
        "sum": conv(total),
    }


def rows():
    out = []
    for fid in sorted(latencies):
        r = stats(latencies[fid])
        r["funcid"] = fid
        r["func"] = names.get(fid, "#%d" % fid)
        r["debug"] = debug.get(fid, UNKNOWN)
        out.append(r)
    # sorted() is stable: rows with equal keys stay in function id order
    out.sort(key=lambda r: r[args.sort], reverse=args.sortorder == "dsc")
    if args.top > 0:
        out = out[:args.top]
    return out


def text_table(out):
    lines = ["Functions with latencies: %d" % len(latencies)]
    lines.append("%9s %10s [%9s, %9s, %9s, %9s, %9s] %9s  %-12s" % (
        "funcid", "count", "min", "med", "90p", "99p", "max", "sum",
        "function"))
    for r in out:
        lines.append(
            "%9d %10d [%9.6f, %9.6f, %9.6f, %9.6f, %9.6f] %9.6f  %s: %s" % (
                r["funcid"], r["count"], r["min"], r["med"], r["90p"],
                r["99p"], r["max"], r["sum"], r["debug"], r["func"]))
    return "\n".join(lines) + "\n"


def csv_table(out):
    lines = ["funcid,count,min,median,90%ile,99%ile,max,sum,debug,function"]
    for r in out:
        lines.append('%d,%d,%e,%e,%e,%e,%e,%e,"%s","%s"' % (
            r["funcid"], r["count"], r["min"], r["med"], r["90p"], r["99p"],
            r["max"], r["sum"], r["debug"], r["func"]))
    return "\n".join(lines) + "\n"


def trace_end():
    out = rows()
    text = csv_table(out) if args.format == "csv" else text_table(out)
    if args.output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        with open(args.output, "w") as f:
            f.write(text)
