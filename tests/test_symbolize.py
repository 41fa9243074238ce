#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tests of `perfgraft symbolize` and `perfgraft perf-map` against real tools.

  1  SymbolizeVsAddr2line: on the committed node dumps, a few hundred
     addresses (fixed seed: inside functions, inside JS functions with line
     tables, and outside all code) symbolized by `perfgraft symbolize DUMP -`
     (text and --format=json) give the name, offset and FILE:LINE that
     `addr2line -f -e IMAGE 0xOFF` gives on the image `perfgraft elf --list`
     put that function in; json columns and lines match the dump's
     DEBUG_INFO entries (tests/jitdump_oracle.py); the stderr summary counts
     the unknown addresses.
  2  TimeModel: a node run of bench/gen-big-node.js that reuses code
     addresses; ADDR@TIME names the code that lived there then (before,
     between and after the loads; ns and perf-script seconds forms, where a
     short fraction stands for the end of its interval) and agrees with an
     independent Python model of the rule on thousands of random
     (address, time) pairs; a synthetic dump checks equal times (file order
     wins), out-of-order times and MOVE.
  3  PerfScriptFilter: `perf script` of a raw perf.data piped through
     `perfgraft symbolize --perf-script` names every [unknown] JIT frame as
     perf itself names it on `perfgraft inject`'s output (same line, exact
     symbol text incl. +0xOFF), for several -F field sets (--ns, pid/tid,
     tid only, leaf-only -G), --symoff/--no-symoff, non-frame lines pass
     through byte for byte, the summary counts; on a recording with address
     reuse frames are looked up at their sample's time; with srcline the
     line below a JS frame is the one `perf script -F ...,srcline
     --full-source-path` prints (modulo perf 6.1 splitting "node:path:136"
     at its first ':' into "node:0").
  4  PerfMapFormat / PerfMapVsPerf: perf-map's text (sorted, no overlaps,
     default name perf-PID.map, -o -, --time), and perf 6.1 reading it
     from /tmp/perf-PID.map attributes the JIT samples of a raw perf.data
     exactly as perf does on the injected one; a naive map with every LOAD
     (overlapping lines) on a recording with address reuse misattributes
     frames that the reuse-aware map gets right.
  5  ErrorPaths: missing dump, bad stdin lines, bad arguments, option
     conflicts, truncated and damaged dumps.

perf parts are skipped only when `perf record -e cpu-clock` or node cannot
run here.  Every perf command gets --buildid-dir TMP/debug; all files live in
tempfile directories (PERFGRAFT_KEEP_TMP=1 keeps them; their paths are
printed).  Binary under test: $PERFGRAFT (default build/perfgraft).
"""

import bisect
import collections
import json
import os
import random
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
import jitdump_gen  # noqa: E402
import jitdump_oracle  # noqa: E402
import perf_fixture as pf  # noqa: E402

PERFGRAFT = pf.PERFGRAFT
NODE = pf.NODE
FIX_NODE = os.path.join(HERE, "fixtures", "node", "node-unwind.dump")
FIX_PERF = os.path.join(HERE, "fixtures", "perf", "jit-19989.dump")
GEN_BIG = os.path.join(ROOT, "bench", "gen-big-node.js")
# 5000 bodies: ~0.4 s, ~22k LOADs of which ~19k start in older code (2000
# bodies do not fill a code page set and reuse nothing on node 20).
GEN_BIG_ARGS = ["5000", "1", "3"]
# --stress-compaction: V8 moves code at every full GC, ~20x the reused start
# addresses; without it a loaded machine's run had no sample on code that was
# replaced later, and the reuse checks had nothing to check
NODE_BIG_FLAGS = pf.NODE_FLAGS + ["--always-sparkplug", "--stress-compaction"]
KEEP_TMP = os.environ.get("PERFGRAFT_KEEP_TMP") == "1"
MAX_LIST = 15
# perf must never ask a debuginfod server (slow, and not what is tested)
PERF_ENV = dict(os.environ, DEBUGINFOD_URLS="")


def info(msg):
    sys.stderr.write("info: %s\n" % msg)
    sys.stderr.flush()


def run(cmd, input=None, cwd=None, env=None, timeout=300):
    """(rc, stdout, stderr) as text; input is text or bytes."""
    if isinstance(input, str):
        input = input.encode("utf-8", "surrogateescape")
    p = subprocess.run(cmd, input=input, cwd=cwd, env=env, timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return (p.returncode, p.stdout.decode("utf-8", "surrogateescape"),
            p.stderr.decode("utf-8", "surrogateescape"))


def run_ok(tc, cmd, **kw):
    rc, out, err = run(cmd, **kw)
    if rc != 0:
        tc.fail("command failed (exit %d): %s\n(cwd %s)\nstderr:\n%s"
                % (rc, pf.shell(cmd), kw.get("cwd"), pf.tail(err)))
    return out, err


def listing(items, limit=MAX_LIST):
    items = list(items)
    text = "\n".join("  %s" % (x,) for x in items[:limit])
    if len(items) > limit:
        text += "\n  ... %d more" % (len(items) - limit)
    return text


def warnings_without_node_damage(err):
    """stderr lines minus node's known damaged-file-name warnings, and the
    line that counts those left out (it quotes the first, cut short)."""
    return [l for l in err.splitlines() if "node damaged" not in l and
            not (l.startswith("perfgraft: warning: ... and ") and "DEBUG_INFO has" in l)]


def make_tmp(label):
    d = tempfile.mkdtemp(prefix="perfgraft-tsym-%s." % label)
    if KEEP_TMP:
        info("keeping %s" % d)
    return d


def remove_tmp(d):
    if d and not KEEP_TMP:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------
# An independent reader of the placements of a jitdump (LOAD and MOVE) and a
# model of the time rule, written from symbolize.h's description:
#   every LOAD (and MOVE) puts its code at its address from its record time
#   on (a LOAD from its since: jitdump_oracle.since_times); a later one
#   covering part of it replaces that part from its own time on; records
#   apply in time order, equal times in file order; a MOVE places
#   the code of the latest earlier LOAD of its code_index; CLOSE changes
#   nothing; LOADs without code place nothing.

UNLOAD_ID = 0x70670002
Placement = collections.namedtuple(
    "Placement", "time seq start end code_index name move debug")

MAGIC = 0x4A695444


def read_placements(src):
    """(pid, [Placement]) in file order; stops at a truncated tail."""
    if isinstance(src, (bytes, bytearray)):
        buf = bytes(src)
    else:
        with open(src, "rb") as f:
            buf = f.read()
    if struct.unpack_from("<I", buf, 0)[0] == MAGIC:
        bo = "<"
    elif struct.unpack_from(">I", buf, 0)[0] == MAGIC:
        bo = ">"
    else:
        raise ValueError("not a jitdump")
    total, = struct.unpack_from(bo + "I", buf, 8)
    pid, = struct.unpack_from(bo + "I", buf, 20)
    off, seq, out, loads, debug = total, 0, [], {}, False
    events, which = [], []     # for since_times; the placement of each
    while off + 16 <= len(buf):
        rid, size, ts = struct.unpack_from(bo + "IIQ", buf, off)
        if size < 16 or off + size > len(buf):
            break
        if rid == 0:
            _, _, _, ca, cs, ci = struct.unpack_from(bo + "IIQQQQ", buf,
                                                     off + 16)
            nul = buf.index(b"\0", off + 56, off + size - cs)
            name = buf[off + 56:nul].decode("utf-8", "surrogateescape")
            events.append(("load", ts, ca, cs, ci))
            if cs:
                which.append(len(out))
                out.append(Placement(ts, seq, ca, ca + cs, ci, name, False,
                                     debug))
                loads[ci] = name
            else:
                which.append(None)
            debug = False
        elif rid == 1:
            _, _, _, old, new, cs, ci = struct.unpack_from(bo + "IIQQQQQ",
                                                           buf, off + 16)
            events.append(("move", ts, new, cs, ci))
            which.append(None)
            if cs and ci in loads:
                out.append(Placement(ts, seq, new, new + cs, ci, loads[ci],
                                     True, False))
        elif rid == 2:
            debug = True
        elif rid == UNLOAD_ID and size >= 48:
            _, _, ca, cs, ci = struct.unpack_from(bo + "IIQQQ", buf, off + 16)
            events.append(("unload", ts, ca, cs, ci))
            which.append(None)
        seq += 1
        off += size
    # a LOAD is painted from its since: code runs before it is announced
    for w, t in zip(which, jitdump_oracle.since_times(events)):
        if w is not None:
            out[w] = out[w]._replace(time=t)
    return pid, out


class Model:
    def __init__(self, placements):
        self.pls = sorted(placements, key=lambda p: (p.start, p.time, p.seq))
        self.starts = [p.start for p in self.pls]
        self.maxsize = max((p.end - p.start for p in self.pls), default=0)

    def covering(self, addr):
        """Placements covering addr, in application order."""
        lo = bisect.bisect_left(self.starts, addr - self.maxsize + 1)
        hi = bisect.bisect_right(self.starts, addr)
        c = [p for p in self.pls[lo:hi] if p.start <= addr < p.end]
        c.sort(key=lambda p: (p.time, p.seq))
        return c

    def at(self, addr, time=None):
        """What lives at addr at time (None: at the end), or None."""
        best = None
        for p in self.covering(addr):
            if time is None or p.time <= time:
                best = p
        return best

    def until(self, addr, pl):
        """Time pl was replaced at addr, or None."""
        c = self.covering(addr)
        i = c.index(pl)
        return c[i + 1].time if i + 1 < len(c) else None


def union_bytes(ranges):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(ranges):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def secs_to_ns_end(text):
    """perf script seconds "S.fff" -> ns at the end of the interval."""
    s, _, frac = text.partition(".")
    scale = 10 ** (9 - len(frac))
    return int(s) * 10 ** 9 + int(frac) * scale + scale - 1


def secs_text(ns, digits=6):
    return "%d.%0*d" % (ns // 10 ** 9, digits,
                        (ns % 10 ** 9) // 10 ** (9 - digits))


def symbolize_json(tc, dumps, lines, extra=()):
    out, err = run_ok(tc, [PERFGRAFT, "symbolize", "--format=json"]
                      + list(extra) + list(dumps) + ["-"],
                      input="\n".join(lines) + "\n")
    try:
        doc = json.loads(out)
    except ValueError as e:
        tc.fail("symbolize --format=json printed invalid JSON (%s):\n%s"
                % (e, out[:2000]))
    tc.assertEqual(len(doc["results"]), len(lines),
                   "one json result per input line")
    return doc, err


def check_against_model(tc, model, queries, results, what):
    """queries: [(addr, time or None)]; results: json results."""
    bad = []
    for (addr, t), r in zip(queries, results):
        exp = model.at(addr, t)
        if exp is None:
            if r["found"]:
                bad.append((hex(addr), t, "model: nothing", r.get("name"),
                            r.get("code_index")))
            continue
        got = (r["found"], r.get("name"), r.get("code_index"),
               r.get("offset"), r.get("start"), r.get("loaded"),
               r.get("replaced"), r.get("reused"))
        want = (True, exp.name, exp.code_index, addr - exp.start,
                "0x%x" % exp.start, exp.time, model.until(addr, exp),
                len(model.covering(addr)) - 1)
        if got != want:
            bad.append((hex(addr), t, "model (found, name, code_index, "
                        "offset, start, loaded, replaced, reused)", want,
                        "ours", got))
    if bad:
        tc.fail("%s: %d of %d lookups disagree with the model:\n%s"
                % (what, len(bad), len(queries), listing(bad)))


# ---------------------------------------------------------------------------
# Shared node run with address reuse (node only, no perf)

_SHARED = {}


def big_dump():
    """Path of a jitdump of gen-big-node.js with address reuse (cached)."""
    if "big" not in _SHARED:
        if shutil.which(NODE) is None:
            raise unittest.SkipTest("node (%s) not found" % NODE)
        d = make_tmp("node")
        _SHARED["big_tmp"] = d
        shutil.copy(GEN_BIG, d)
        rc, out, err = run([NODE] + NODE_BIG_FLAGS + ["gen-big-node.js"]
                           + GEN_BIG_ARGS, cwd=d)
        dumps = [n for n in os.listdir(d) if re.fullmatch(r"jit-\d+\.dump", n)]
        if rc != 0 or len(dumps) != 1:
            raise AssertionError("node gen-big-node.js failed (exit %d, "
                                 "dumps %s): %s" % (rc, dumps, err[-500:]))
        _SHARED["big"] = os.path.join(d, dumps[0])
    return _SHARED["big"]


def tearDownModule():
    for k in ("big_tmp", "rec_tmp"):
        remove_tmp(_SHARED.pop(k, None))
    _SHARED.clear()


# ---------------------------------------------------------------------------
# 1. symbolize vs addr2line

class SymbolizeVsAddr2line(unittest.TestCase):
    DUMPS = (FIX_NODE, FIX_PERF)
    SEED = 20240611

    @classmethod
    def setUpClass(cls):
        if shutil.which("addr2line") is None:
            raise unittest.SkipTest("addr2line (binutils) not found")
        cls.tmp = make_tmp("a2l")
        cls.cases = {}
        try:
            for i, dump in enumerate(cls.DUMPS):
                cls.cases[dump] = cls.prepare(dump, os.path.join(
                    cls.tmp, "img%d" % i), random.Random(cls.SEED + i))
        except BaseException:
            remove_tmp(cls.tmp)
            raise

    @classmethod
    def tearDownClass(cls):
        remove_tmp(cls.tmp)

    @classmethod
    def prepare(cls, dump, imgdir, rnd):
        os.makedirs(imgdir)
        rc, out, err = run([PERFGRAFT, "elf", dump, "-o", imgdir, "--list"])
        if rc != 0:
            raise AssertionError("perfgraft elf --list failed: %s" % err)
        rows = [l.split("\t") for l in out.splitlines()]
        pid, pls = read_placements(dump)
        loads = [p for p in pls if not p.move]
        if len(rows) != len(loads):
            raise AssertionError("elf --list has %d rows, the dump %d LOADs "
                                 "with code" % (len(rows), len(loads)))
        byseq = {}
        for r, p in zip(rows, loads):
            if (int(r[0]), int(r[1], 16), int(r[2])) != \
                    (p.code_index, p.start, p.end - p.start):
                raise AssertionError("elf --list row %r does not match LOAD "
                                     "%r" % (r, p))
            byseq[p.seq] = dict(image=r[3], pgoff=int(r[4], 16),
                                map_len=int(r[5]), name=r[6])
        model = Model(pls)
        # addresses: any function, functions with line tables, outside
        addrs = []
        for p in rnd.sample(loads, 120):
            addrs.append((rnd.randrange(p.start, p.end), "fn"))
        dbg = [p for p in loads if p.debug]
        for _ in range(120):
            p = rnd.choice(dbg)
            addrs.append((rnd.randrange(p.start, p.end), "line"))
        srt = sorted(loads, key=lambda p: p.start)
        gaps = [(a.end, b.start) for a, b in zip(srt, srt[1:])
                if b.start > a.end]
        for s, e in rnd.sample(gaps, min(30, len(gaps))):
            addrs.append((rnd.randrange(s, e), "out"))
        hi = max(p.end for p in loads)
        for a in (0, 1, srt[0].start - 1, hi, hi + 0x1000, 2 ** 64 - 1):
            addrs.append((a, "out"))
        for a, kind in addrs:
            if kind == "out" and model.at(a) is not None:
                raise AssertionError("outside address 0x%x is covered" % a)
        # what addr2line says on the image of the code live at the end
        exp, by_image = {}, collections.defaultdict(list)
        for a, kind in addrs:
            p = model.at(a)
            if p is None:
                continue
            row = byseq[p.seq]
            by_image[row["image"]].append((a, row["pgoff"] + a - p.start))
            exp[a] = dict(pl=p, row=row)
        for image, lst in by_image.items():
            cmd = ["addr2line", "-f", "-e", os.path.join(imgdir, image)] + \
                ["0x%x" % off for _, off in lst]
            rc, out, err = run(cmd)
            lines = out.splitlines()
            if rc != 0 or len(lines) != 2 * len(lst):
                raise AssertionError("%s failed or printed %d lines for %d "
                                     "addresses: %s" % (pf.shell(cmd[:4]),
                                                        len(lines), len(lst),
                                                        err))
            for i, (a, off) in enumerate(lst):
                fl = lines[2 * i + 1].split(" (discriminator")[0].strip()
                exp[a].update(a2l_name=lines[2 * i], image_off=off,
                              a2l_fl=None if fl in ("??:0", "??:?") else fl)
        # the same addresses in several spellings, with blank lines
        spell = []
        for i, (a, _) in enumerate(addrs):
            form = ("0x%x", "%x", "0X%X", "  0x%x\t")[i % 4]
            spell.append(form % a)
            if i % 50 == 7:
                spell.append("   ")
        text = "\n".join(spell) + "\n"
        rc_t, out_t, err_t = run([PERFGRAFT, "symbolize", dump, "-"],
                                 input=text)
        rc_j, out_j, err_j = run([PERFGRAFT, "symbolize", "--format=json",
                                  dump, "-"], input=text)
        return dict(addrs=addrs, exp=exp, rows=rows, text=(rc_t, out_t, err_t),
                    json=(rc_j, out_j, err_j), model=model)

    def test_text_matches_addr2line(self):
        for dump, c in self.cases.items():
            with self.subTest(dump=os.path.basename(dump)):
                rc, out, err = c["text"]
                self.assertEqual(rc, 0, err)
                lines = out.splitlines()
                self.assertEqual(len(lines), len(c["addrs"]),
                                 "one output line per address (blank input "
                                 "lines skipped)")
                bad, with_line, js_line = [], 0, 0
                for (a, kind), ln in zip(c["addrs"], lines):
                    f = ln.split("\t")
                    if len(f) != 3 or f[0] != "0x%x" % a:
                        bad.append(("0x%x" % a, "malformed line", ln))
                        continue
                    e = c["exp"].get(a)
                    if e is None:
                        if f[1:] != ["??", "??:0"]:
                            bad.append(("0x%x" % a, kind, "want ??", ln))
                        continue
                    name, _, off = f[1].rpartition("+0x")
                    want_off = a - e["pl"].start
                    if name != e["a2l_name"] or name != e["pl"].name or \
                            not off or int(off, 16) != want_off:
                        bad.append(("0x%x" % a, "name+off", f[1],
                                    "addr2line", e["a2l_name"],
                                    "+0x%x" % want_off))
                    a2l = e["a2l_fl"]
                    if a2l is None:
                        ok = f[2] == "??:0"
                    else:
                        ok = f[2] == a2l or (f[2].startswith(a2l + ":") and
                                             f[2][len(a2l) + 1:].isdigit())
                        with_line += 1
                        js_line += name.startswith("JS:")
                    if not ok:
                        bad.append(("0x%x" % a, "file:line", f[2],
                                    "addr2line", a2l or "??",
                                    "image", e["row"]["image"],
                                    "0x%x" % e["image_off"]))
                if bad:
                    self.fail("%s: %d of %d addresses differ from addr2line "
                              "on perfgraft elf's images:\n%s" % (
                                  dump, len(bad), len(lines), listing(bad)))
                info("symbolize vs addr2line %s: %d addresses, %d with "
                     "FILE:LINE (%d in JS: functions), %d outside" % (
                         os.path.basename(dump), len(lines), with_line,
                         js_line, sum(1 for _, k in c["addrs"]
                                      if k == "out")))
                self.assertGreaterEqual(js_line, 40, "too few JS addresses "
                                        "with a line: the test is weak")

    def test_json_matches_addr2line_and_dump(self):
        for dump, c in self.cases.items():
            with self.subTest(dump=os.path.basename(dump)):
                rc, out, err = c["json"]
                self.assertEqual(rc, 0, err)
                doc = json.loads(out)
                res = doc["results"]
                self.assertEqual(len(res), len(c["addrs"]))
                oracle = jitdump_oracle.parse(dump)
                bias = oracle.line_bias
                olds = {(l.code_index, l.code_addr): l for l in oracle.loads}
                bad, cols = [], 0
                for (a, kind), r in zip(c["addrs"], res):
                    e = c["exp"].get(a)
                    if r["addr"] != "0x%x" % a or r["time"] is not None:
                        bad.append(("0x%x" % a, "addr/time", r))
                    if e is None:
                        if r["found"] is not False:
                            bad.append(("0x%x" % a, "want found false", r))
                        continue
                    p = e["pl"]
                    want = dict(found=True, name=e["a2l_name"],
                                offset=a - p.start, start="0x%x" % p.start,
                                size=p.end - p.start, code_index=p.code_index,
                                loaded=p.time, replaced=None, reused=0)
                    got = {k: r.get(k) for k in want}
                    if got != want:
                        bad.append(("0x%x" % a, "want", want, "got", got))
                    a2l = e["a2l_fl"]
                    got_fl = None if r["file"] is None else \
                        "%s:%d" % (r["file"], r["line"])
                    if got_fl != a2l:
                        bad.append(("0x%x" % a, "file:line", got_fl,
                                    "addr2line", a2l))
                    # line and column against the dump's own entries
                    ld = olds[(p.code_index, p.start)]
                    rows = []
                    for ent in (ld.debug.entries if ld.debug else ()):
                        off = ent.addr - bias - p.start
                        if ent.addr >= p.start + bias and \
                                off < p.end - p.start and ent.line:
                            rows.append((off, ent.line, ent.discrim))
                    rows.sort(key=lambda x: x[0])     # stable: file order
                    le = [x for x in rows if x[0] <= a - p.start]
                    want_lc = (le[-1][1], le[-1][2]) if le else None
                    got_lc = (r["line"], r["column"]) if r["file"] else None
                    if want_lc != got_lc:
                        bad.append(("0x%x" % a, "line,column", got_lc,
                                    "dump entries", want_lc))
                    cols += bool(got_lc and got_lc[1])
                    if r["file"] is not None:
                        txt = [l for l in c["text"][1].splitlines()
                               if l.startswith("0x%x\t" % a)][0]
                        want_txt = "%s:%d%s" % (
                            r["file"], r["line"],
                            ":%d" % r["column"] if r["column"] else "")
                        if txt.split("\t")[2] != want_txt:
                            bad.append(("0x%x" % a, "text", txt, "json",
                                        want_txt))
                if bad:
                    self.fail("%s: %d json results wrong:\n%s"
                              % (dump, len(bad), listing(bad)))
                s = doc["summary"]
                n_out = sum(1 for _, k in c["addrs"] if k == "out")
                n_noline = sum(1 for r in res if r["found"] and
                               r["file"] is None)
                self.assertEqual((s["addresses"], s["unknown"], s["bad"],
                                  s["without_line"], s["dumps"]),
                                 (len(c["addrs"]), n_out, 0, n_noline, 1),
                                 "summary %r" % s)
                self.assertGreater(cols, 20, "too few results with a column")

    def test_stderr_summary_counts_unknown(self):
        for dump, c in self.cases.items():
            with self.subTest(dump=os.path.basename(dump)):
                err = c["text"][2]
                n_out = sum(1 for _, k in c["addrs"] if k == "out")
                n_noline = sum(1 for a, _ in c["addrs"]
                               if a in c["exp"] and
                               c["exp"][a]["a2l_fl"] is None)
                want = ("perfgraft symbolize: %d addresses, %d unknown (??), "
                        "%d without a source line"
                        % (len(c["addrs"]), n_out, n_noline))
                self.assertIn(want, err.splitlines(), err[-800:])
                # -q: no summary
                rc, _, qerr = run([PERFGRAFT, "symbolize", "-q", dump,
                                   "0x%x" % c["addrs"][0][0]])
                self.assertEqual(rc, 0)
                self.assertNotIn("perfgraft symbolize:", qerr)


# ---------------------------------------------------------------------------
# 2. ADDR@TIME on a dump with real address reuse

class TimeModel(unittest.TestCase):
    SEED = 77

    @classmethod
    def setUpClass(cls):
        cls.dump = big_dump()
        cls.pid, cls.pls = read_placements(cls.dump)
        cls.model = Model(cls.pls)
        # addresses covered by 2+ placements at different times
        reused, maxend = [], 0
        for p in cls.model.pls:
            if p.start < maxend:
                reused.append(p.start)
            maxend = max(maxend, p.end)
        cls.reused = [a for a in reused
                      if len({q.time for q in cls.model.covering(a)}) > 1]

    def test_dump_has_reuse(self):
        info("gen-big-node dump: %d placements, %d start inside older code"
             % (len(self.pls), len(self.reused)))
        self.assertGreater(len(self.reused), 200,
                           "the node run reused too few addresses")

    def test_before_between_after(self):
        rnd = random.Random(self.SEED)
        qs = []
        for a in rnd.sample(self.reused, 60):
            cov = self.model.covering(a)
            qs.append((a, cov[0].time - 1))
            for p, q in zip(cov, cov[1:]):
                if q.time > p.time:
                    qs += [(a, p.time), (a, (p.time + q.time) // 2),
                           (a, q.time - 1)]
            qs += [(a, cov[-1].time), (a, cov[-1].time + 10 ** 9), (a, None)]
        lines = ["0x%x" % a if t is None else "0x%x@%d" % (a, t)
                 for a, t in qs]
        doc, _ = symbolize_json(self, [self.dump], lines)
        res = doc["results"]
        # the three cases, spelled out, before the model check
        firsts = [(q, r) for q, r in zip(qs, res)
                  if q[1] is not None and
                  q[1] < self.model.covering(q[0])[0].time]
        self.assertTrue(firsts)
        for (a, t), r in firsts:
            self.assertFalse(r["found"], "0x%x@%d is before any code there "
                             "but got %r" % (a, t, r))
        older = 0
        for (a, t), r in zip(qs, res):
            cov = self.model.covering(a)
            if t is not None and cov[0].time <= t < cov[-1].time:
                older += r.get("code_index") != cov[-1].code_index
        self.assertGreater(older, 50, "lookups between two loads named the "
                           "latest code too often")
        check_against_model(self, self.model, qs, res, "ADDR@TIME")
        for (a, t), r in zip(qs, res):
            self.assertEqual(r["time"], t)

    def test_seconds_form(self):
        """perf script seconds: the end of the printed interval is used."""
        rnd = random.Random(self.SEED + 1)
        qs, lines, want_ns = [], [], []
        for a in rnd.sample(self.reused, 60):
            cov = self.model.covering(a)
            for q in cov[1:]:
                T = q.time
                for spelled in (secs_text(T), secs_text(T - 1000),
                                secs_text(T, 9), secs_text(T - 1, 9),
                                secs_text(T, 3), secs_text(T - 10 ** 6, 3),
                                secs_text(T) + ":"):
                    ns = secs_to_ns_end(spelled.rstrip(":"))
                    qs.append((a, ns))
                    lines.append("0x%x@%s" % (a, spelled))
                    want_ns.append(ns)
                qs.append((a, T))
                lines.append("0x%x@%d" % (a, T))
                want_ns.append(T)
        doc, _ = symbolize_json(self, [self.dump], lines)
        res = doc["results"]
        wrong_t = [(l, r["time"], n) for l, r, n in zip(lines, res, want_ns)
                   if r["time"] != n]
        if wrong_t:
            self.fail("%d times read wrongly (input, ours, end of interval):"
                      "\n%s" % (len(wrong_t), listing(wrong_t)))
        # the microsecond that holds a load time names the new code
        held = [(l, r.get("code_index"), self.model.at(a, t).code_index)
                for l, (a, t), r in zip(lines, qs, res)
                if re.search(r"@\d+\.\d{6}$", l)
                and t // 1000 == self.model.at(a, t).time // 1000]
        self.assertGreater(len(held), 30)
        check_against_model(self, self.model, qs, res, "seconds form")
        # text output prints the time used, in ns
        rc, out, err = run([PERFGRAFT, "symbolize", self.dump] + lines[:7])
        self.assertEqual(rc, 0, err)
        got = [l.split("\t")[0] for l in out.splitlines()]
        self.assertEqual(got, ["0x%x@%d" % (a, t) for a, t in qs[:7]])

    def test_random_pairs_vs_model(self):
        rnd = random.Random(self.SEED + 2)
        pls = self.model.pls
        tmin = min(p.time for p in pls)
        tmax = max(p.time for p in pls)
        lo, hi = pls[0].start, max(p.end for p in pls)
        qs = []
        for i in range(4000):
            k = i % 4
            if k == 0:
                a = rnd.choice(self.reused) + rnd.randrange(0, 64)
            elif k == 1:
                a = rnd.randrange(lo - 0x1000, hi + 0x1000)
            else:
                p = rnd.choice(pls)
                a = rnd.randrange(p.start, p.end)
            if i % 5 == 0:
                p = rnd.choice(pls)
                t = p.time + rnd.choice((-1, 0, 1))
            elif i % 5 == 1:
                t = None
            else:
                t = rnd.randrange(tmin - 10 ** 6, tmax + 10 ** 6)
            qs.append((a, t))
        lines = ["0x%x" % a if t is None else "0x%x@%d" % (a, t)
                 for a, t in qs]
        doc, _ = symbolize_json(self, [self.dump], lines)
        check_against_model(self, self.model, qs, doc["results"],
                            "random (addr, time)")
        found = sum(1 for r in doc["results"] if r["found"])
        self.assertEqual(doc["summary"]["unknown"], len(qs) - found)
        self.assertEqual(doc["summary"]["reused"],
                         sum(1 for (a, t), r in zip(qs, doc["results"])
                             if t is None and r["found"] and r["reused"]))
        info("random pairs: %d lookups, %d found" % (len(qs), found))

    def test_synthetic_equal_times_and_move(self):
        """Equal times keep file order; file order != time order; MOVE."""
        b = jitdump_gen.JitdumpBuilder(pid=31337)
        code = lambda n, tag: jitdump_gen.x86_64_code(n, tag)  # noqa: E731
        base = 0x40000000
        b.load(b"A", code(0x100, 1), base, 1, timestamp=1000)
        b.load(b"B", code(0x40, 2), base + 0x40, 2, timestamp=2000)
        b.load(b"C", code(0x40, 3), base + 0x60, 3, timestamp=2000)
        b.load(b"D", code(0x20, 4), base + 0x10, 4, timestamp=1500)
        b.load(b"E", code(0x20, 5), base + 0xe0, 5, timestamp=500)
        b.move(1, base, base + 0x1000, 0x100, timestamp=3000)
        b.load(b"F", code(0x30, 6), base + 0x1010, 6, timestamp=3000)
        b.close(timestamp=4000)
        b.load(b"G", code(0x10, 7), base + 0x1080, 7, timestamp=2500)
        d = make_tmp("synth")
        try:
            path = b.write(os.path.join(d, "jit-31337.dump"))
            pid, pls = read_placements(path)
            model = Model(pls)
            qs = []
            for a in range(base - 0x10, base + 0x1110, 8):
                for t in (None, 499, 500, 999, 1000, 1499, 1500, 1999, 2000,
                          2001, 2500, 2999, 3000, 3001, 5000):
                    qs.append((a, t))
            lines = ["0x%x" % a if t is None else "0x%x@%d" % (a, t)
                     for a, t in qs]
            doc, _ = symbolize_json(self, [path], lines)
            check_against_model(self, model, qs, doc["results"],
                                "synthetic dump")
            r = {(q[0], q[1]): x for q, x in zip(qs, doc["results"])}
            # spelled out: C (later in the file, same time as B) wins
            self.assertEqual(r[(base + 0x60, 2000)]["name"], "C")
            self.assertEqual(r[(base + 0x48, 2000)]["name"], "B")
            self.assertEqual(r[(base + 0x18, 1499)]["name"], "A")
            self.assertEqual(r[(base + 0x18, 1500)]["name"], "D")
            self.assertEqual(r[(base + 0xe8, 999)]["name"], "E")
            self.assertEqual(r[(base + 0xe8, 1000)]["name"], "A")
            # the MOVE places A again; F at the same time, later in file
            self.assertFalse(r[(base + 0x1008, 2999)]["found"])
            self.assertEqual(r[(base + 0x1008, 3000)]["name"], "A")
            self.assertEqual(r[(base + 0x1010, 3000)]["name"], "F")
            self.assertEqual(r[(base + 0x1080, 2999)]["name"], "G")
            self.assertEqual(r[(base + 0x1080, 3000)]["name"], "A")
        finally:
            remove_tmp(d)


# ---------------------------------------------------------------------------
# 4a. perf-map text format (no perf needed)

MAP_LINE = re.compile(r"^([0-9a-f]+) ([0-9a-f]+) (.+)$")


def parse_map(tc, text):
    out = []
    for i, ln in enumerate(text.splitlines()):
        m = MAP_LINE.match(ln)
        tc.assertTrue(m, "perf map line %d is not 'START SIZE NAME': %r"
                      % (i + 1, ln))
        out.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3)))
    return out


class PerfMapFormat(unittest.TestCase):

    def setUp(self):
        self.tmp = make_tmp("map")

    def tearDown(self):
        remove_tmp(self.tmp)

    def check_sorted_disjoint(self, lines):
        for (s1, z1, n1), (s2, z2, n2) in zip(lines, lines[1:]):
            self.assertLess(s1, s2, "map not sorted by start")
            self.assertLessEqual(s1 + z1, s2, "map lines overlap: %x+%x %s "
                                 "and %x %s" % (s1, z1, n1, s2, n2))
        for s, z, n in lines:
            self.assertGreater(z, 0)

    def test_default_name_stdout_and_file(self):
        pid, pls = read_placements(FIX_NODE)
        out, err = run_ok(self, [PERFGRAFT, "perf-map", FIX_NODE],
                          cwd=self.tmp)
        self.assertEqual(out, "")
        self.assertEqual(os.listdir(self.tmp), ["perf-%d.map" % pid],
                         "default output is perf-PID.map in the cwd, and "
                         "nothing else is left")
        with open(os.path.join(self.tmp, "perf-%d.map" % pid)) as f:
            text = f.read()
        out_stdout, _ = run_ok(self, [PERFGRAFT, "perf-map", "-q", "-o", "-",
                                      FIX_NODE], cwd=self.tmp)
        self.assertEqual(out_stdout, text, "-o - prints the same map")
        self.assertEqual(os.listdir(self.tmp), ["perf-%d.map" % pid])
        lines = parse_map(self, text)
        self.check_sorted_disjoint(lines)
        # no reuse in this dump: exactly one line per LOAD with code
        want = sorted((p.start, p.end - p.start, p.name) for p in pls)
        self.assertEqual(lines, want)
        self.assertIn("perfgraft perf-map: perf-%d.map: %d lines from %d "
                      "placements (%d LOAD, 0 MOVE), 0 of them pieces"
                      % (pid, len(want), len(want), len(want)), err)
        # -o FILE in another directory
        other = os.path.join(self.tmp, "sub")
        os.mkdir(other)
        run_ok(self, [PERFGRAFT, "perf-map", "-q", "-o",
                      os.path.join(other, "x.map"), FIX_NODE])
        self.assertEqual(os.listdir(other), ["x.map"])
        with open(os.path.join(other, "x.map")) as f:
            self.assertEqual(f.read(), text)

    def check_live(self, model, pls, lines, t):
        """Every line names what lives there at t (whole or a piece), and
        the lines cover exactly what the placements up to t cover."""
        bad = []
        for s, z, n in lines:
            for a in {s, s + z // 2, s + z - 1}:
                p = model.at(a, t)
                if p is None or p.name != n or not (p.start <= s and
                                                   s + z <= p.end):
                    bad.append(("%x %x %s" % (s, z, n), hex(a),
                                p and (p.name, hex(p.start), hex(p.end))))
        self.assertFalse(bad, "map lines that do not name the live code "
                         "(line, address, model):\n%s" % listing(bad))
        want = union_bytes((p.start, p.end) for p in pls
                           if t is None or p.time <= t)
        self.assertEqual(sum(z for _, z, _ in lines), want,
                         "the map does not cover exactly the live code")

    def test_reuse_end_and_time(self):
        dump = big_dump()
        pid, pls = read_placements(dump)
        model = Model(pls)
        out, err = run_ok(self, [PERFGRAFT, "perf-map", "-o", "-", dump])
        lines = parse_map(self, out)
        self.check_sorted_disjoint(lines)
        self.check_live(model, pls, lines, None)
        # a piece: a line that is not its whole function
        pieces = sum(1 for s, z, n in lines
                     if (model.at(s).start, model.at(s).end) != (s, s + z))
        self.assertGreater(pieces, 0, "no partly replaced function: the "
                           "dump has no reuse?")
        m = re.search(r": (\d+) lines from (\d+) placements \((\d+) LOAD, "
                      r"0 MOVE\), (\d+) of them pieces", err)
        self.assertTrue(m, err)
        self.assertEqual(tuple(int(x) for x in m.groups()),
                         (len(lines), len(pls), len(pls), pieces))
        times = sorted(p.time for p in pls)
        T = times[len(times) // 2]
        for spelled, t in (("%d" % T, T), (secs_text(T, 9), T),
                           (secs_text(T), secs_to_ns_end(secs_text(T)))):
            out, err = run_ok(self, [PERFGRAFT, "perf-map", "-q", "--time",
                                     spelled, "-o", "-", dump])
            lines_t = parse_map(self, out)
            self.check_sorted_disjoint(lines_t)
            self.check_live(model, pls, lines_t, t)
        # code replaced after T is still there at T (and code loaded
        # after T already, from its since: not a count to compare)
        self.assertNotEqual(lines_t, lines)
        rc, _, err = run([PERFGRAFT, "perf-map", "--time", "12x", dump])
        self.assertEqual(rc, 2, err)


# ---------------------------------------------------------------------------
# Recordings under perf (3 and 4)

class Rec:
    pass


def perf_problem():
    if "perf_problem" not in _SHARED:
        _SHARED["perf_problem"] = pf.environment_problem()
    return _SHARED["perf_problem"]


def perf_run(tc, rec, sub, *args, input=None, check=True):
    cmd = pf.perf_cmd(rec.buildid, sub, *args)
    rc, out, err = run(cmd, input=input, cwd=rec.dir, env=PERF_ENV)
    if check and rc != 0:
        tc.fail("perf failed (exit %d): (cd %s && %s)\n%s"
                % (rc, rec.dir, pf.shell(cmd), pf.tail(err)))
    return out


def recording(kind):
    """'work': work.js 400 ms under perf record -g; 'big': gen-big-node.js
    (address reuse) under perf record -g -c 100000.  Each with perfgraft's
    inj.data.  Cached for the module."""
    key = "rec_" + kind
    if key in _SHARED:
        if isinstance(_SHARED[key], BaseException):
            raise _SHARED[key]
        return _SHARED[key]
    why = perf_problem()
    if why:
        raise unittest.SkipTest("no usable perf/node here: " + why)
    if "rec_tmp" not in _SHARED:
        _SHARED["rec_tmp"] = make_tmp("perf")
    top = _SHARED["rec_tmp"]
    try:
        rec = Rec()
        rec.dir = os.path.join(top, kind)
        rec.buildid = os.path.join(top, "debug")
        os.makedirs(rec.dir)
        os.makedirs(rec.buildid, exist_ok=True)
        if kind == "work":
            shutil.copy(pf.WORK_JS, rec.dir)
            cmd = pf.perf_cmd(rec.buildid, "record", "-N", "-q", "-k", "mono",
                              "-g", "-e", "cpu-clock", "-o", "perf.data",
                              "--", NODE, *pf.NODE_FLAGS, "work.js", "400")
        else:
            shutil.copy(GEN_BIG, rec.dir)
            cmd = pf.perf_cmd(rec.buildid, "record", "-N", "-q", "-k", "mono",
                              "-g", "-e", "cpu-clock", "-c", "100000",
                              "-o", "perf.data", "--", NODE, *NODE_BIG_FLAGS,
                              "gen-big-node.js", *GEN_BIG_ARGS)
        rc, out, err = run(cmd, cwd=rec.dir, env=PERF_ENV)
        if rc != 0:
            raise AssertionError("perf record failed: %s\n%s"
                                 % (pf.shell(cmd), err[-1000:]))
        pf.find_dump(rec)
        rec.data = os.path.join(rec.dir, "perf.data")
        rec.inj = os.path.join(rec.dir, "inj.data")
        rec.map = "/tmp/perf-%d.map" % rec.pid
        if os.path.lexists(rec.map):
            raise AssertionError("%s exists already (not ours): perf would "
                                 "read it for the raw perf.data" % rec.map)
        rc, out, err = run([PERFGRAFT, "inject", "-q", "-i", "perf.data",
                            "-o", "inj.data"], cwd=rec.dir)
        if rc != 0:
            raise AssertionError("perfgraft inject failed: %s" % err[-1000:])
        _SHARED[key] = rec
        return rec
    except BaseException as e:
        if not isinstance(e, unittest.SkipTest):
            _SHARED[key] = e
        raise


# A frame perf could not name: "<hex> [unknown]" with an optional " (DSO)"
# at the end of the line (call-chain lines and leaf ip/sym/dso fields).
UNKNOWN_FRAME = re.compile(
    r"(?:^|(?<=\s))([0-9a-f]{1,16}) \[unknown\](?: \((.*)\))?\s*$")
DSO_TAIL = re.compile(r" \(([^()]*)\)\s*$")
SUMMARY = re.compile(r"^perfgraft symbolize: (\d+) unresolved frames, (\d+) "
                     r"named from (\d+) dumps?, (\d+) left unknown \(\?\?\)$",
                     re.M)


def sym_at(line, pos):
    """The symbol text of a frame line starting at pos, without the DSO."""
    return DSO_TAIL.sub("", line[pos:].rstrip("\n"))


class PerfScriptFilter(unittest.TestCase):
    """perf script | perfgraft symbolize --perf-script vs perf script of
    perfgraft inject's output."""

    @classmethod
    def setUpClass(cls):
        cls.rec = recording("work")
        cls.dump_arg = os.path.basename(cls.rec.dump)

    def setUp(self):
        self.assertFalse(os.path.lexists(self.rec.map),
                         "%s exists: the raw perf script would use it"
                         % self.rec.map)

    def script(self, data, args, rec=None):
        return perf_run(self, rec or self.rec, "script", "-i", data, *args)

    def filter(self, text, *opts, rec=None):
        rec = rec or self.rec
        rc, out, err = run([PERFGRAFT, "symbolize", "--perf-script"]
                           + list(opts) + [os.path.basename(rec.dump)],
                           input=text, cwd=rec.dir)
        self.assertEqual(rc, 0, err[-1000:])
        return out, err

    def compare(self, args, opts=("--no-srcline",), b_args=None,
                expect=lambda s: s, label="", rec=None, model=None):
        """Runs perf script ARGS on perf.data through the filter and perf
        script B_ARGS (default ARGS) on inj.data; compares line by line.
        Returns stats.  With a model, also counts the frames whose code was
        replaced later (named right only when the sample time is used)."""
        rec = rec or self.rec
        dump_arg = os.path.basename(rec.dump)
        a = self.script("perf.data", args, rec)
        b = self.script("inj.data", args if b_args is None else b_args, rec)
        f, err = self.filter(a, *opts, rec=rec)
        head = re.compile(r"^\S.*? (\d+)\.(\d+):")
        t = None
        al, bl, fl = (x.split("\n") for x in (a, b, f))
        self.assertEqual(len(al), len(bl), "perf script of perf.data and "
                         "inj.data differ in line count")
        self.assertEqual(len(fl), len(al), "the filter added or removed "
                         "lines (--no-srcline)")
        st = collections.Counter()
        bad = []
        for i, (x, y, z) in enumerate(zip(al, bl, fl)):
            h = head.match(x) if model else None
            if h:
                t = secs_to_ns_end("%s.%s" % h.groups())
            m = UNKNOWN_FRAME.search(x)
            if not m:
                if z != x:
                    bad.append((i + 1, "non-frame line changed", x, z))
                continue
            st["frames"] += 1
            addr = int(m.group(1), 16)
            pos = m.start(1) + len(m.group(1)) + 1
            if z == x:
                st["left"] += 1
            else:
                st["named"] += 1
                if z[:pos] != x[:pos]:
                    bad.append((i + 1, "prefix changed", x, z))
                if m.group(2) is not None:
                    dm = DSO_TAIL.search(z)
                    if not dm or dm.group(1) != dump_arg:
                        bad.append((i + 1, "DSO is not the dump", z))
            if addr == 0 or m.group(2) is None:
                continue
            st["compared"] += 1
            ours, perfs = sym_at(z, pos), expect(sym_at(y, pos))
            st["ours_unknown"] += ours == "[unknown]"
            st["perf_unknown"] += perfs == "[unknown]"
            st["js"] += ours.startswith("JS:")
            if model and t is not None and \
                    model.at(addr, t) is not model.at(addr):
                st["needs_time"] += 1
                st["needs_time_named_older"] += \
                    model.at(addr, t) is not None and \
                    ours.startswith(model.at(addr, t).name)
            if ours != perfs:
                bad.append((i + 1, "ours", ours, "perf on inj.data", perfs))
        if bad:
            self.fail("%s: %d lines wrong (line, ...):\n%s\ncommand: perf "
                      "script -i perf.data %s | perfgraft symbolize "
                      "--perf-script %s %s" % (
                          label, len(bad), listing(bad), " ".join(args),
                          " ".join(opts), dump_arg))
        sm = SUMMARY.search(err)
        self.assertTrue(sm, "no summary on stderr:\n" + err[-500:])
        self.assertEqual(tuple(int(x) for x in sm.groups()),
                         (st["frames"], st["named"], 1, st["left"]),
                         "summary counts (frames, named, dumps, left)")
        self.assertEqual(st["ours_unknown"], st["perf_unknown"])
        self.assertGreater(st["named"], 300, "%s: too few frames named: %r"
                           % (label, st))
        self.assertGreater(st["js"], 50, "%s: too few JS: frames: %r"
                           % (label, st))
        info("perf-script filter %s: %s" % (label, dict(st)))
        return st

    def test_default_fields(self):
        self.compare([], label="default")

    def test_ns_comm_pid_tid(self):
        self.compare(["--ns", "-F", "comm,pid,tid,time,ip,sym,symoff,dso"],
                     label="--ns pid/tid")

    def test_tid_only_without_symoff(self):
        # a single number is the tid; no symoff in the input: none added
        self.compare(["-F", "tid,time,ip,sym,dso"], label="-F tid")

    def test_leaf_only_without_symoff(self):
        # -G: the leaf on the sample line, no call-chain line to learn from
        self.compare(["-G", "-F", "tid,time,ip,sym,dso"], label="-G no symoff")

    def test_leaf_only_with_symoff(self):
        self.compare(["-G", "--ns", "-F", "pid,tid,time,ip,sym,symoff,dso"],
                     label="-G symoff")

    def test_no_symoff_option(self):
        self.compare([], opts=("--no-srcline", "--no-symoff"),
                     expect=lambda s: re.sub(r"\+0x[0-9a-f]+$", "", s),
                     label="--no-symoff")

    def test_symoff_option(self):
        self.compare(["-F", "tid,time,ip,sym,dso"],
                     opts=("--no-srcline", "--symoff"),
                     b_args=["-F", "tid,time,ip,sym,symoff,dso"],
                     label="--symoff")

    @staticmethod
    def perf_view(srcline, full=True):
        """What perf 6.1 prints for an addr2line answer FILE:LINE: it splits
        at the FIRST ':' (util/srcline.c) and reads the line number with
        strtoul, so node's "node:path:136" becomes "node:0"; without
        --full-source-path it then prints the base name of that file."""
        head, _, tail = srcline.partition(":")
        digits = re.match(r"\d*", tail).group()
        return "%s:%d" % (head if full else os.path.basename(head),
                          int(digits or 0))

    def test_srcline(self):
        """The srcline below a named leaf equals perf's -F +srcline on
        inj.data: the file's base name by default, the whole path with
        --full-source-path on both sides."""
        for full in (False, True):
            with self.subTest(full_source_path=full):
                self.check_srcline(full)

    def check_srcline(self, full):
        fields = "tid,time,ip,sym,symoff,dso"
        a = self.script("perf.data", ["-G", "--ns", "-F", fields])
        f, err = self.filter(a, *(["--full-source-path"] if full else []))
        # the whole paths, to model what perf prints (perf_view)
        f_full = f if full else self.filter(a, "--full-source-path")[0]
        head = re.compile(r"^\s*(\d+)\s+(\d+\.\d+):\s+([0-9a-f]+) (.*)$")

        def samples(text):
            out, cur = {}, None
            for ln in text.splitlines():
                m = head.match(ln)
                if m:
                    cur = (int(m.group(1)), m.group(2))
                    out[cur] = [DSO_TAIL.sub("", m.group(4)), None]
                elif ln.startswith("  ") and cur and out[cur][1] is None:
                    out[cur][1] = ln[2:]
                else:
                    cur = None
            return out
        ours = {k: v for k, v in samples(f).items()
                if v[0].startswith(pf.JIT_PREFIXES)}
        names = sorted({v[0].rpartition("+0x")[0] for v in ours.values()})
        names = [n for n in names if "," not in n]
        self.assertTrue(names)
        b = self.script("inj.data", ["-G", "--ns", "-F", fields + ",srcline"]
                        + (["--full-source-path"] if full else [])
                        + ["-S", ",".join(names)])
        perf = samples(b)
        whole = samples(f_full)
        bad, n_line, n_colon = [], 0, 0
        for k, (sym, src) in ours.items():
            full_src = whole.get(k, (None, None))[1]
            if not full and src is not None:
                # ours prints the base name of the file the JIT wrote
                f_, _, line_ = (full_src or "").rpartition(":")
                if src != "%s:%s" % (os.path.basename(f_), line_):
                    bad.append((k, "ours", src, "not the base name of", full_src))
            if sym.rpartition("+0x")[0] not in names:
                continue
            if k not in perf:
                bad.append((k, "perf has no such sample named", sym))
                continue
            psym, psrc = perf[k]
            want = None if src is None else self.perf_view(full_src, full)
            if psym != sym or psrc != want:
                bad.append((k, "ours", sym, src, "perf", psym, psrc))
            if src is not None:
                n_line += 1
                n_colon += want != src
        if bad:
            self.fail("srcline: %d of %d named leaves differ from perf "
                      "script on inj.data:\n%s" % (len(bad), len(ours),
                                                  listing(bad)))
        self.assertGreater(n_line, 30, "too few JS leaves with a srcline")
        info("srcline: %d named JIT leaves compared, %d with a source line "
             "(%d of them in files named like node:path, which perf prints "
             "as node:0)" % (len(ours), n_line, n_colon))

    def test_reuse_needs_sample_time(self):
        """On the recording with address reuse the filter looks frames up
        at their sample's time, as perf does with the injected maps."""
        rec = recording("big")
        self.assertFalse(os.path.lexists(rec.map))
        _, pls = read_placements(rec.dump)
        st = self.compare([], rec=rec, model=Model(pls), label="reuse")
        info("reuse: %d of %d compared frames on code replaced later"
             % (st["needs_time"], st["compared"]))
        self.assertGreater(st["needs_time"], 0, "no frame on code that was "
                           "replaced later: the check is vacuous (%r)" % st)

    def test_passthrough_without_frames(self):
        """Text with nothing to name goes through byte for byte, also a last
        line without a newline and bytes that are not UTF-8."""
        text = ("node 123 1.000001: 1 cpu-clock:\n"
                "\t    ffffffff81000000 [unknown] ([kernel.kallsyms])\n"
                "\t1234 sym+0x1 (/usr/bin/x)\n\n  \xff\xfe odd\n"
                "\t    7f0000000000 [unknown] (/tmp/perf-1.map)")
        data = text.encode("latin-1")
        p = subprocess.run([PERFGRAFT, "symbolize", "--perf-script",
                            self.rec.dump], input=data,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, data)
        self.assertRegex(p.stderr.decode(), r"2 unresolved frames, 0 named "
                         r"from 1 dump, 2 left unknown")


# ---------------------------------------------------------------------------
# 4b. perf report with the perf map vs perf report of the injected data

REPORT_ROW = re.compile(r"^\s*(\d+\.\d+)%\s+(\d+)\s+(.*?)\s+\[(.)\] (.*?)\s*$")
MMAP2 = re.compile(r"PERF_RECORD_MMAP2 \d+/\d+: \[0x([0-9a-f]+)\(0x([0-9a-f]+)"
                   r"\) @ \S+ .*\]: ..x. (/[^/].*)$")


class PerfMapVsPerf(unittest.TestCase):

    def write_map(self, rec, text=None):
        """Writes rec.map (ours, or text); the caller removes it."""
        if text is None:
            run_ok(self, [PERFGRAFT, "perf-map", "-q", "-o", rec.map,
                          rec.dump])
        else:
            with open(rec.map, "x") as f:
                f.write(text)

    def report(self, rec, data):
        out = perf_run(self, rec, "report", "-i", data, "--stdio",
                       "--no-children", "--sort", "dso,sym", "-g", "none",
                       "-F", "overhead,sample,dso,sym")
        rows = collections.defaultdict(collections.Counter)
        for ln in out.splitlines():
            m = REPORT_ROW.match(ln)
            if m and not ln.startswith("#"):
                rows[m.group(3)][m.group(5)] += int(m.group(2))
        return rows

    def test_report_counts_equal_inject(self):
        rec = recording("work")
        self.assertFalse(os.path.lexists(rec.map))
        try:
            self.write_map(rec)
            with_map = self.report(rec, "perf.data")
        finally:
            if os.path.lexists(rec.map):
                os.unlink(rec.map)
        inj = self.report(rec, "inj.data")
        jit_dso = "[JIT] tid %d" % rec.pid
        self.assertIn(jit_dso, with_map, "perf did not use the map: %s"
                      % sorted(with_map))
        M = with_map[jit_dso]
        I = collections.Counter()
        for dso, c in inj.items():
            if dso.startswith("jitted-%d-" % rec.pid):
                I.update(c)
        # Legitimate difference: V8 also reports the builtins and bytecode
        # handlers embedded in node's own text.  In the raw data perf finds
        # those addresses in /usr/bin/node's map and names them from node
        # (Builtins_X) without ever reading the perf map; in inj.data the
        # injected maps overlay node's from the LOAD time on.  So for those
        # names inj.data can count more, never less.
        mm = perf_run(self, rec, "script", "-i", "perf.data",
                      "--show-mmap-events", "-F", "comm")
        files = [(int(m.group(1), 16), int(m.group(1), 16) +
                  int(m.group(2), 16)) for m in map(MMAP2.search,
                                                    mm.splitlines())
                 if m and not m.group(3).endswith(".dump")]
        self.assertTrue(files, "no file-backed executable map in perf.data")
        _, pls = read_placements(rec.dump)
        in_file = collections.defaultdict(bool)
        for p in pls:
            if any(s <= p.start < e for s, e in files):
                in_file[p.name] = True
        # A map has no time: where this run reused an address (rare in
        # 400 ms of work.js), samples of the older code go to the newer
        # name; the names involved are left out (and listed).
        model = Model(pls)
        reused, maxend, prev = set(), 0, None
        for p in model.pls:
            if p.start < maxend:
                reused.update({p.name, prev.name})
            if p.end > maxend:
                maxend, prev = p.end, p
        bad, legit = [], []
        for n in sorted(set(M) | set(I)):
            if M[n] == I[n]:
                continue
            if in_file[n] and M[n] < I[n] and not n.startswith("JS:"):
                legit.append((n, M[n], I[n]))
            elif n in reused:
                legit.append((n + " (address reused)", M[n], I[n]))
            else:
                bad.append((n, "map", M[n], "inj", I[n]))
        self.assertFalse(bad, "per-symbol sample counts differ between perf "
                         "report with %s and on inj.data:\n%s"
                         % (rec.map, listing(bad)))
        js = sorted(((c, n) for n, c in M.items() if n.startswith("JS:")),
                    reverse=True)
        self.assertGreaterEqual(len(js), 5)
        self.assertGreater(sum(c for c, _ in js), 200)
        info("perf-map report: %d JIT symbols, %d samples, equal to inj.data "
             "(top: %s); %d names differ legitimately (code inside node's "
             "text: %s)" % (len(M), sum(M.values()), ", ".join(
                 "%s %d" % (n[:30], c) for c, n in js[:3]), len(legit),
                 ", ".join("%s %d/%d" % x for x in legit[:6])))

    def test_naive_map_negative_control(self):
        """On a recording with address reuse: per JIT frame, perf's name via
        our map equals inj.data's except where the code at the frame's
        address at its time was replaced later (a map has no time); a naive
        map with every LOAD (overlapping lines) gets frames wrong that need
        no time at all."""
        rec = recording("big")
        self.assertFalse(os.path.lexists(rec.map))
        _, pls = read_placements(rec.dump)
        model = Model(pls)
        naive = "".join("%x %x %s\n" % (p.start, p.end - p.start, p.name)
                        for p in pls)
        args = ("--ns", "-F", "comm,tid,time,ip,sym,dso")
        raw = perf_run(self, rec, "script", "-i", "perf.data", *args)
        inj = perf_run(self, rec, "script", "-i", "inj.data", *args)
        out = {}
        for label, text in (("ours", None), ("naive", naive)):
            try:
                self.write_map(rec, text)
                out[label] = perf_run(self, rec, "script", "-i", "perf.data",
                                      *args)
            finally:
                if os.path.lexists(rec.map):
                    os.unlink(rec.map)
        lines = [x.split("\n") for x in (raw, inj, out["ours"],
                                         out["naive"])]
        self.assertEqual(len({len(x) for x in lines}), 1)
        head = re.compile(r"^\S.*? (\d+)\.(\d{9}):")
        st = collections.Counter()
        ours_bad, t = [], None
        for x, y, z, w in zip(*lines):
            h = head.match(x)
            if h:
                t = int(h.group(1)) * 10 ** 9 + int(h.group(2))
                continue
            m = UNKNOWN_FRAME.search(x)
            if not m or not (m.group(2) or "").startswith("/tmp/perf-"):
                continue
            pos = m.start(1) + len(m.group(1)) + 1
            addr = int(m.group(1), 16)
            truth = sym_at(y, pos)
            st["frames"] += 1
            cov = model.covering(addr)
            st["reused"] += len(cov) > 1
            ambiguous = model.at(addr, t) is not model.at(addr)
            st["needs_time"] += ambiguous
            if sym_at(z, pos) != truth:
                st["ours_wrong"] += 1
                if not ambiguous:
                    ours_bad.append((x.strip(), "ours", sym_at(z, pos),
                                     "inj", truth))
            if sym_at(w, pos) != truth:
                st["naive_wrong"] += 1
                st["naive_wrong_no_time_needed"] += not ambiguous
        info("negative control (%s): %s" % (os.path.basename(rec.dump),
                                            dict(st)))
        self.assertGreater(st["reused"], 50, "too few frames on reused "
                           "addresses for a negative control: %r" % st)
        self.assertFalse(ours_bad, "frames our map names differently from "
                         "inj.data although the code there was never "
                         "replaced after the sample:\n%s" % listing(ours_bad))
        self.assertLessEqual(st["ours_wrong"], st["needs_time"])
        self.assertGreater(st["naive_wrong_no_time_needed"], 0,
                           "the naive map was never wrong: the negative "
                           "control shows nothing (%r)" % st)


# ---------------------------------------------------------------------------
# 5. Error paths

class ErrorPaths(unittest.TestCase):

    def setUp(self):
        self.tmp = make_tmp("err")

    def tearDown(self):
        remove_tmp(self.tmp)

    def test_missing_dump(self):
        missing = os.path.join(self.tmp, "jit-1.dump")
        for cmd in ([PERFGRAFT, "symbolize", missing, "0x1"],
                    [PERFGRAFT, "perf-map", "-o", "-", missing]):
            rc, out, err = run(cmd)
            self.assertEqual(rc, 1, pf.shell(cmd))
            self.assertIn(missing, err)
            self.assertRegex(err, "No such file")
            self.assertEqual(out, "")

    def test_bad_stdin_lines(self):
        addr = "0x18c4000"
        text = "%s\nzzz\n\n12g4\n%s@5\n" % (addr, addr)
        rc, out, err = run([PERFGRAFT, "symbolize", FIX_PERF, "-"], input=text)
        self.assertEqual(rc, 1, "a line that is not an address: exit 1")
        self.assertEqual(out.splitlines(), [
            "0x18c4000\tBuiltin:DeoptimizationEntry_Eager+0x0\t??:0",
            "??\t??\t??:0", "??\t??\t??:0", "0x18c4000@5\t??\t??:0"])
        self.assertRegex(err, r"stdin:2: byte 0: 'zzz")
        self.assertRegex(err, r"stdin:4: byte 2: '12g4")
        self.assertIn("perfgraft symbolize: 4 addresses, 1 unknown (??), 1 "
                      "without a source line, 2 not addresses", err)
        doc_rc, dout, derr = run([PERFGRAFT, "symbolize", "--format=json",
                                  FIX_PERF, "-"], input=text)
        self.assertEqual(doc_rc, 1)
        doc = json.loads(dout)
        self.assertEqual([r["found"] for r in doc["results"]],
                         [True, False, False, False])
        self.assertEqual(doc["results"][1]["error"], "not an address")
        self.assertEqual((doc["summary"]["bad"], doc["summary"]["unknown"]),
                         (2, 1))

    def test_bad_line_warning_is_one_line(self):
        """The warning quotes the bad line without its newline."""
        rc, out, err = run([PERFGRAFT, "symbolize", FIX_PERF, "-"],
                           input="zzz\n")
        self.assertEqual(rc, 1)
        lines = [l for l in warnings_without_node_damage(err)
                 if not l.startswith("perfgraft symbolize:")]
        self.assertEqual(lines, [
            "perfgraft: warning: stdin:1: byte 0: 'zzz' is not an address "
            "(hex, or hex@TIME)"])

    def test_bad_time_byte_offset(self):
        """symbolize.h: err_at is the offset of the first character that
        does not fit; in "0x10@abc" that is the 'a' after '@' (byte 5)."""
        rc, out, err = run([PERFGRAFT, "symbolize", FIX_PERF, "0x1", "-"],
                           input="0x10@abc\n")
        self.assertEqual(rc, 1)
        self.assertRegex(err, r"stdin:1: byte (\d+):")
        self.assertEqual(re.search(r"stdin:1: byte (\d+):", err).group(1),
                         "5", err)

    def test_usage_errors(self):
        for cmd, why in (
                ([PERFGRAFT, "symbolize", FIX_PERF, "0xzz"], "0xzz"),
                ([PERFGRAFT, "symbolize", "--format=json", "--perf-script",
                  FIX_PERF], "--format=json"),
                ([PERFGRAFT, "symbolize", "--format=xml", FIX_PERF, "0x1"],
                 "xml"),
                ([PERFGRAFT, "symbolize", "--perf-script", FIX_PERF, "0x1"],
                 "no addresses"),
                ([PERFGRAFT, "symbolize"], "usage"),
                ([PERFGRAFT, "perf-map"], "usage")):
            rc, out, err = run(cmd, input="")
            self.assertEqual(rc, 2, "%s: exit %d\n%s" % (pf.shell(cmd), rc,
                                                        err))
            self.assertIn(why, err)
            self.assertEqual(out, "")

    def test_truncated_dump(self):
        with open(FIX_PERF, "rb") as f:
            data = f.read()
        _, full = read_placements(data)
        cut = full[-3].seq      # cut inside one of the last LOADs
        off, seq = 40, 0
        while seq < cut:
            off += struct.unpack_from("<I", data, off + 4)[0]
            seq += 1
        size = struct.unpack_from("<I", data, off + 4)[0]
        path = os.path.join(self.tmp, "jit-19989.dump")
        with open(path, "wb") as f:
            f.write(data[:off + size // 2])
        _, kept = read_placements(path)
        self.assertEqual(len(kept), len(full) - 3)
        qs = [p.start + (p.end - p.start) // 2 for p in full]
        lines = ["0x%x" % a for a in qs]
        doc_full, _ = symbolize_json(self, [FIX_PERF], lines)
        doc_cut, err = symbolize_json(self, [path], lines)
        warn = r"%s: offset %d: .*truncated" % (re.escape(path), off)
        self.assertRegex(err, "warning: " + warn)
        self.assertTrue(any(re.match(warn, w) for w in doc_cut["warnings"]),
                        doc_cut["warnings"])
        for i, (r, s) in enumerate(zip(doc_full["results"],
                                       doc_cut["results"])):
            if i < len(kept):
                r = dict(r, dump=None)
                s = dict(s, dump=None)
                self.assertEqual(r, s)
            else:
                self.assertFalse(s["found"], s)
        self.assertEqual(doc_cut["summary"]["unknown"], 3)

    def test_damaged_dump(self):
        with open(FIX_PERF, "rb") as f:
            data = bytearray(f.read())
        off = 40
        for _ in range(500):
            off += struct.unpack_from("<I", data, off + 4)[0]
        struct.pack_into("<I", data, off + 4, 8)    # total_size < 16
        d = os.path.join(self.tmp, "out")
        os.mkdir(d)
        path = os.path.join(self.tmp, "jit-19989.dump")
        with open(path, "wb") as f:
            f.write(data)
        for cmd in ([PERFGRAFT, "perf-map", "-o", os.path.join(d, "x.map"),
                     path], [PERFGRAFT, "perf-map", path]):
            rc, out, err = run(cmd, cwd=d)
            self.assertEqual(rc, 1, err)
            self.assertIn("%s: offset %d:" % (path, off), err)
            self.assertEqual(os.listdir(d), [], "perf-map on a damaged dump "
                             "left files behind")
        rc, out, err = run([PERFGRAFT, "symbolize", path, "0x18c4000"])
        self.assertEqual(rc, 1)
        self.assertEqual(out, "")
        self.assertIn("offset %d" % off, err)


if __name__ == "__main__":
    unittest.main()
