#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Inputs and reference answers for bench/bench-symbolize.sh.

usage: symbolize-ref.py count DUMP
       symbolize-ref.py gen DUMP ADDRS [--count N] [--outside PERMILLE] [--seed S]
       symbolize-ref.py translate DUMP LIST ADDRS DIR
       symbolize-ref.py compare ADDRS DIR PG_OUT [--format text|json] [--show N]

The timeline is the one `perfgraft symbolize` uses without @TIME: every
LOAD (and MOVE) puts its code at its address from its record time on; a
later placement covering part of an older one replaces that part only;
records are applied in time order, equal times in file order.  The code
live at the end of the dump at an address is that of the latest placement
covering it.

`count` prints `loads=L code_loads=C moves=M debug_infos=D lines=E
max_time_disorder=...` for DUMP.

`gen` writes N (1,000,000) addresses to ADDRS, one `0x...` a line, from
random.Random(S) (S: 1): PERMILLE (10) per mille of them outside all code
(half in the gaps between pieces of code, half anywhere in the user
address space), the rest inside code live at the end of the dump: a
function chosen uniformly among the placements that still own at least
one byte there, then a byte chosen uniformly among the bytes it still
owns.  It prints one line of `key=value` counts for the script.

`translate` turns each address into the address perf would ask the ELF
images of `perfgraft elf DUMP --list` about: the live placement's row of
LIST (rows are the LOADs with code, in file order; a MOVE uses its LOAD's
row) gives the image and pgoff, and the image address is pgoff + (addr -
code_addr).  It writes DIR/images (image names, one a line; image K is
line K+1), DIR/img.K.addrs (hex, for `addr2line -e IMAGE`), DIR/map (per
address: K, or -1 when no code is live there) and DIR/expect (per address:
the LOAD index of the live placement, or -1).

`compare` reads DIR/img.K.out (addr2line -f: two lines an address), and
PG_OUT (perfgraft symbolize's output, one line an address), and checks for
every address that the function names agree, and the file:line where
addr2line gives one.  It prints one `key=value` line, then up to SHOW (5)
mismatches of each kind.
"""
import bisect
import json
import os
import random
import re
import struct
import sys

JIT_LOAD, JIT_MOVE, JIT_DEBUG_INFO = 0, 1, 2


def die(msg):
    sys.exit(f"symbolize-ref: {msg}")


class Dump:
    """The LOADs and MOVEs of a jitdump (file order), and counts."""

    def __init__(self, path):
        with open(path, "rb") as f:
            buf = f.read()
        if len(buf) < 40:
            die(f"{path}: too short for a jitdump header")
        magic = struct.unpack_from("<I", buf, 0)[0]
        if magic == 0x4A695444:
            e = "<"
        elif magic == 0x4454694A:
            e = ">"
        else:
            die(f"{path}: not a jitdump (magic 0x{magic:08x})")
        hsize = struct.unpack_from(e + "I", buf, 8)[0]
        self.loads = []   # (time, file_order, code_addr, size, code_index, name)
        self.moves = []   # (time, file_order, new_addr, size, code_index)
        self.nloads = self.ndebug = self.nlines = 0
        self.disorder = 0
        off, order, last_t = hsize, 0, 0
        hdr = struct.Struct(e + "IIQ")
        load = struct.Struct(e + "IIQQQQ")
        move = struct.Struct(e + "IIQQQQQ")
        while off + 16 <= len(buf):
            rid, size, t = hdr.unpack_from(buf, off)
            if size < 16 or off + size > len(buf):
                break    # truncated tail: what came before counts
            if t < last_t:
                self.disorder = max(self.disorder, last_t - t)
            last_t = max(last_t, t)
            if rid == JIT_LOAD:
                self.nloads += 1
                _, _, _, addr, csize, idx = load.unpack_from(buf, off + 16)
                nul = buf.index(b"\0", off + 56, off + size)
                if csize:
                    name = buf[off + 56:nul].decode("utf-8", "replace")
                    self.loads.append((t, order, addr, csize, idx, name))
            elif rid == JIT_MOVE:
                _, _, _, _, new, csize, idx = move.unpack_from(buf, off + 16)
                if csize:
                    self.moves.append((t, order, new, csize, idx))
            elif rid == JIT_DEBUG_INFO:
                self.ndebug += 1
                self.nlines += struct.unpack_from(e + "Q", buf, off + 24)[0]
            off += size
            order += 1


class Timeline:
    """Placements (LOADs, then MOVEs) ranked in time order (equal times in
    file order), and the elementary segments between all their boundaries,
    each with the ranks of the placements that cover it, in order.
    Placement p < len(loads) is LOAD p (its index in Dump.loads); a MOVE
    names the LOAD it moved (self.load_of)."""

    def __init__(self, d):
        by_index = {}
        for i, l in enumerate(d.loads):
            by_index[l[4]] = i      # a code_index reused: the latest LOAD
        pl = [(l[0], l[1], l[2], l[3], i) for i, l in enumerate(d.loads)]
        self.unknown_moves = 0
        for m in d.moves:
            if m[4] in by_index:
                pl.append((m[0], m[1], m[2], m[3], by_index[m[4]]))
            else:
                self.unknown_moves += 1
        self.time = [p[0] for p in pl]
        self.start = [p[2] for p in pl]
        self.size = [p[3] for p in pl]
        self.load_of = [p[4] for p in pl]
        order = sorted(range(len(pl)), key=lambda k: (pl[k][0], pl[k][1]))
        self.rank = [0] * len(pl)
        for r, k in enumerate(order):
            self.rank[k] = r
        self.by_rank = order
        b = sorted({x for p in pl for x in (p[2], p[2] + p[3])})
        self.bounds = b
        where = {x: i for i, x in enumerate(b)}
        cover = [[] for _ in range(max(len(b) - 1, 0))]
        for r, k in enumerate(order):
            for i in range(where[pl[k][2]], where[pl[k][2] + pl[k][3]]):
                cover[i].append(r)
        self.cover = cover
        # Pieces each placement still owns at the end.
        self.pieces = [[] for _ in pl]
        for i, c in enumerate(cover):
            if c:
                self.pieces[order[c[-1]]].append((b[i], b[i + 1] - b[i]))
        self.partly = sum(1 for k in range(len(pl))
                          if sum(s for _, s in self.pieces[k]) < pl[k][3])
        self.gone = sum(1 for p in self.pieces if not p)

    def segment(self, addr):
        i = bisect.bisect_right(self.bounds, addr) - 1
        return i if 0 <= i < len(self.cover) else -1

    def live_at(self, addr, t=None):
        """The placement live at addr at time t (None: the end), or -1."""
        i = self.segment(addr)
        if i < 0 or not self.cover[i]:
            return -1
        c = self.cover[i]
        if t is None:
            return self.by_rank[c[-1]]
        for r in reversed(c):
            if self.time[self.by_rank[r]] <= t:
                return self.by_rank[r]
        return -1

    def until(self, k, addr):
        """When placement k stops being the code at addr (None: never)."""
        c = self.cover[self.segment(addr)]
        j = bisect.bisect_right(c, self.rank[k])
        return self.time[self.by_rank[c[j]]] if j < len(c) else None


def cmd_count(args):
    d = Dump(args[0])
    print(f"loads={d.nloads} code_loads={len(d.loads)} moves={len(d.moves)} "
          f"debug_infos={d.ndebug} lines={d.nlines} "
          f"max_time_disorder={d.disorder}")


def opt(args, name, default, conv=int):
    if name in args:
        i = args.index(name)
        v = conv(args[i + 1])
        del args[i:i + 2]
        return v
    return default


def cmd_gen(args):
    n = opt(args, "--count", 1000000)
    permille = opt(args, "--outside", 10)
    seed = opt(args, "--seed", 1)
    at_time = "--at-time" in args
    if at_time:
        args.remove("--at-time")
    dump, out = args
    d = Dump(dump)
    tl = Timeline(d)
    rng = random.Random(seed)
    live = [k for k, p in enumerate(tl.pieces) if p]
    if not live:
        die(f"{dump}: no code is live at the end of the dump")
    everyone = list(range(len(tl.start)))
    tmin, tmax = min(tl.time), max(tl.time)
    gaps = [(tl.bounds[i], tl.bounds[i + 1] - tl.bounds[i])
            for i, c in enumerate(tl.cover) if not c]
    n_out = n * permille // 1000
    outside_at = set(rng.sample(range(n), n_out))
    lo_user, hi_user = 0x10000, 1 << 47
    hit = set()
    replaced = 0
    with open(out, "w") as f:
        w = f.write
        for j in range(n):
            if j in outside_at:
                while True:
                    if gaps and rng.random() < 0.5:
                        s, sz = gaps[rng.randrange(len(gaps))]
                        a = s + rng.randrange(sz)
                    else:
                        a = rng.randrange(lo_user, hi_user)
                    if tl.live_at(a) < 0:
                        break
                if at_time:
                    w(f"0x{a:x}@{rng.randint(tmin, tmax)}\n")
                else:
                    w(f"0x{a:x}\n")
                continue
            if at_time:
                # Any placement, any byte of it, at a time it is the code
                # there: from its record time to the next placement over it.
                while True:
                    k = everyone[rng.randrange(len(everyone))]
                    a = tl.start[k] + rng.randrange(tl.size[k])
                    t0, u = tl.time[k], tl.until(k, a)
                    if u is None:
                        t = rng.randint(t0, max(t0, tmax))
                    elif u > t0:
                        t = t0 + rng.randrange(u - t0)
                        replaced += 1
                    else:
                        continue    # replaced at its own record time
                    break
                hit.add(k)
                w(f"0x{a:x}@{t}\n")
                continue
            k = live[rng.randrange(len(live))]
            ps = tl.pieces[k]
            if len(ps) == 1:
                a = ps[0][0] + rng.randrange(ps[0][1])
            else:
                r = rng.randrange(sum(s for _, s in ps))
                for s, sz in ps:
                    if r < sz:
                        a = s + r
                        break
                    r -= sz
            hit.add(k)
            w(f"0x{a:x}\n")
    print(f"addresses={n} inside={n - n_out} outside={n_out} "
          f"gap_segments={len(gaps)} placements={len(tl.start)} "
          f"live_placements={len(live)} partly_replaced={tl.partly} "
          f"wholly_replaced={tl.gone} unknown_moves={tl.unknown_moves} "
          f"functions_hit={len(hit)} at_replaced_code={replaced} seed={seed}")


def parse_addr(line):
    a, _, t = line.strip().partition("@")
    return int(a, 16), (int(t) if t else None)


def cmd_translate(args):
    dump, listing, addrs, outdir = args
    d = Dump(dump)
    tl = Timeline(d)
    rows = []
    with open(listing, encoding="utf-8", errors="replace") as f:
        for line in f:
            c = line.rstrip("\n").split("\t")
            if len(c) < 7:
                die(f"{listing}: not a --list row: {line!r}")
            rows.append((int(c[1], 16), int(c[2]), c[3], int(c[4], 16)))
    if len(rows) != len(d.loads):
        die(f"{listing}: {len(rows)} rows for {len(d.loads)} LOADs with code")
    for i, (l, r) in enumerate(zip(d.loads, rows)):
        if (l[2], l[3]) != (r[0], r[1]):
            die(f"{listing}: row {i + 1} is 0x{r[0]:x}+{r[1]}, "
                f"LOAD {i} is 0x{l[2]:x}+{l[3]}")
    images, img_no = [], {}
    files = []
    with open(addrs) as f, open(os.path.join(outdir, "map"), "w") as mp, \
            open(os.path.join(outdir, "expect"), "w") as ex:
        for line in f:
            a, t = parse_addr(line)
            k = tl.live_at(a, t)
            if k < 0:
                mp.write("-1\n")
                ex.write("-1 0\n")
                continue
            li = tl.load_of[k]
            _, _, img, pgoff = rows[li]
            if img not in img_no:
                img_no[img] = len(images)
                images.append(img)
                files.append(open(os.path.join(outdir, f"img.{img_no[img]}.addrs"), "w"))
            ki = img_no[img]
            files[ki].write(f"{pgoff + (a - tl.start[k]):x}\n")
            mp.write(f"{ki}\n")
            ex.write(f"{li} {a - tl.start[k]}\n")
    for fo in files:
        fo.close()
    with open(os.path.join(outdir, "images"), "w") as f:
        for img in images:
            f.write(img + "\n")


# perfgraft symbolize's text line: ADDR<tab>NAME+0xOFF<tab>FILE:LINE[:COL].
# Without tabs, blanks separate the fields; names may hold blanks (V8's
# do), so the name is then everything between the first blank and the
# `+0x...` that ends the field before the last blank.
TEXT = re.compile(r"^(\S+)\s+(.*?)(?:\+(0x[0-9a-fA-F]+))?\s+(\S+)\s*$")


def pg_text(line):
    """(name, offset or None, file or None, line) of one text line."""
    c = line.split("\t")
    if len(c) == 3:     # ADDR<tab>NAME+0xOFF<tab>FILE:LINE[:COL]
        m = re.match(r"^(.*?)(?:\+(0x[0-9a-fA-F]+))?$", c[1])
        name, off, loc = m.group(1), m.group(2), c[2]
    else:
        m = TEXT.match(line)
        if not m:
            return None
        name, off, loc = m.group(2), m.group(3), m.group(4)
    f, ln = split_loc(loc.strip())
    return name, (int(off, 16) if off else None), f, ln


def split_loc(loc):
    """FILE:LINE[:COL] -> (FILE, LINE); unknown -> (None, 0)."""
    m = re.match(r"^(.*?):(\d+|\?)(?::(\d+))?$", loc)
    if not m:
        return loc, 0
    f, ln = m.group(1), m.group(2)
    ln = int(ln) if ln != "?" else 0
    if f in ("??", "") or ln == 0:
        return None, 0
    return f, ln


def pg_json(o):
    name = o.get("name") or o.get("function") or o.get("symbol") or "??"
    off = o.get("offset")
    if isinstance(off, str):
        off = int(off, 16 if off.startswith("0x") else 10)
    f, ln = o.get("file"), o.get("line") or 0
    if not f or not ln:
        f, ln = None, 0
    return name, off, f, ln


def read_pg(path, fmt):
    """Per address: (name, offset, file, line) from perfgraft's output."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        if fmt == "json":
            s = f.read().strip()
            try:
                o = json.loads(s)
                if isinstance(o, dict):
                    o = (o.get("results") or o.get("addresses")
                         or o.get("symbols") or [o])
                items = o
            except ValueError:     # JSON lines
                items = [json.loads(l) for l in s.splitlines() if l.strip()]
            out = [pg_json(o) for o in items]
        else:
            for line in f:
                r = pg_text(line.rstrip("\n"))
                out.append(r if r else
                           ("<unparsed: " + line.strip() + ">", None, None, 0))
    return out


def cmd_compare(args):
    fmt = opt(args, "--format", "text", str)
    show = opt(args, "--show", 5)
    addrs, outdir, pg_out = args
    with open(addrs) as f:
        alist = [l.strip() for l in f]
    with open(os.path.join(outdir, "map")) as f:
        imap = [int(l) for l in f]
    with open(os.path.join(outdir, "expect")) as f:
        expect = [int(l.split()[1]) for l in f]
    with open(os.path.join(outdir, "images")) as f:
        images = [l.rstrip("\n") for l in f]
    ref = []
    for k in range(len(images)):
        with open(os.path.join(outdir, f"img.{k}.out"), encoding="utf-8",
                  errors="replace") as f:
            lines = f.read().split("\n")
        ref.append([(lines[2 * i], lines[2 * i + 1])
                    for i in range(len(lines) // 2)])
    pos = [0] * len(images)
    pg = read_pg(pg_out, fmt)
    kinds = {"name": [], "offset": [], "line": [], "outside": [], "missing": []}
    agree = names_ok = offs_ok = lines_cmp = lines_ok = 0
    ref_lines = pg_lines = outside = outside_ok = 0
    for i, a in enumerate(alist):
        k = imap[i]
        if k < 0:
            rname, rloc = "??", "??:0"
        else:
            if pos[k] >= len(ref[k]):
                kinds["missing"].append((a, "addr2line gave no answer"))
                continue
            rname, rloc = ref[k][pos[k]]
            pos[k] += 1
        if i >= len(pg):
            kinds["missing"].append((a, "perfgraft gave no answer"))
            continue
        pname, poff, pfile, pline = pg[i]
        rloc = re.sub(r"\s*\(discriminator \d+\)$", "", rloc)
        rfile, rline = split_loc(rloc)
        ok = True
        if k < 0:
            outside += 1
            if pname in ("??", None) and pfile is None:
                outside_ok += 1
            else:
                ok = False
                kinds["outside"].append(
                    (a, f"outside all code, perfgraft says {pname!r} {pfile}:{pline}"))
            agree += ok
            continue
        if pname == rname:
            names_ok += 1
        else:
            ok = False
            kinds["name"].append((a, f"perfgraft {pname!r}, addr2line {rname!r}"))
        if poff == expect[i]:
            offs_ok += 1
        else:
            ok = False
            kinds["offset"].append(
                (a, f"perfgraft +{'?' if poff is None else hex(poff)}, "
                    f"expected +{hex(expect[i])} ({pname!r})"))
        ref_lines += rfile is not None
        pg_lines += pfile is not None
        if rfile is not None or pfile is not None:
            lines_cmp += 1
            if (rfile, rline) == (pfile, pline):
                lines_ok += 1
            else:
                ok = False
                kinds["line"].append(
                    (a, f"perfgraft {pfile or '??'}:{pline}, addr2line {rloc} ({pname!r})"))
        agree += ok
    n = len(alist)
    print(f"compared={n} results={len(pg)} agree={agree} inside={n - outside} "
          f"names_ok={names_ok} offsets_ok={offs_ok} "
          f"lines_compared={lines_cmp} lines_ok={lines_ok} "
          f"ref_with_line={ref_lines} pg_with_line={pg_lines} "
          f"outside={outside} outside_ok={outside_ok} "
          + " ".join(f"{k}_mismatches={len(v)}" for k, v in kinds.items()))
    for kind, v in kinds.items():
        for a, msg in v[:show]:
            print(f"{kind} mismatch at {a}: {msg}")


def main():
    if len(sys.argv) < 2:
        die("usage: symbolize-ref.py count|gen|translate|compare ...")
    cmd, args = sys.argv[1], sys.argv[2:]
    fn = {"count": cmd_count, "gen": cmd_gen, "translate": cmd_translate,
          "compare": cmd_compare}.get(cmd)
    if not fn:
        die(f"unknown command {cmd}")
    fn(args)


if __name__ == "__main__":
    main()
