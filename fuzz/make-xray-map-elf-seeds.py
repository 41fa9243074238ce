#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Adds to fuzz/corpus-xray_map/ small instrumentation maps of every XRay
target (x86-64, AArch64, ARM, PPC64, MIPS, MIPS64, SystemZ), relocatable
and shared, SHT_REL and SHT_RELA, in each byte order the target has, built
by yaml2obj-14 from tests/xray_map_gen.py's inputs (absolute, PC-relative
and RELATIVE relocations between them), and two YAML maps as llvm-xray
extract writes them (flow style) and as hand-written ones are (block).
Each is < 8 KB.  The clang-built seeds (make-xray-map-seeds.sh) are kept;
files named gen-* are this script's and are rewritten.

usage: fuzz/make-xray-map-elf-seeds.py [OUTDIR]
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import xray_map_gen as G  # noqa: E402

YAML_FLOW = """---
- { id: 1, address: 0x401000, function: 0x401000, kind: function-enter, always-instrument: true, function-name: 'foo()' }
- { id: 1, address: 0x401010, function: 0x401000, kind: function-exit, always-instrument: true, function-name: 'foo()', version: 2 }
- { id: 2, address: 0x401040, function: 0x401040, kind: log-args-enter, always-instrument: false, function-name: _Z3barv }
- { id: 3, address: 0x401080, function: 0x401080, kind: custom-event, always-instrument: true, function-name: '' }
...
"""
YAML_BLOCK = """# hand-written, IDs with a gap
---
- id: 1
  address: 0x10
  function: 0x10
  kind: function-enter
  always-instrument: true
- id: 9
  address: 0x20
  function: 0x20
  kind: tail-exit
  always-instrument: false
  function-name: "ns::f(int, char)"
"""


def kind_for(c):
    """One relocation kind per (target, order, type, section): the .o's
    PC-relative when the target has one, the .so's RELATIVE (RELA) or
    absolute (REL)."""
    if c.etype == "ET_REL":
        return "pc" if c.sec == "SHT_REL" and c.r_pc else "abs"
    return "relative" if c.sec == "SHT_RELA" else "abs"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus-xray_map")
    y2o = shutil.which("yaml2obj-14") or shutil.which("yaml2obj")
    if not y2o:
        sys.exit("needs yaml2obj-14")
    os.makedirs(out, exist_ok=True)
    for n in os.listdir(out):
        if n.startswith("gen-"):
            os.unlink(os.path.join(out, n))
    names = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in G.cases():
            if c.kind != kind_for(c):
                continue
            y = os.path.join(tmp, c.name + ".yaml")
            with open(y, "w") as f:
                f.write(c.yaml())
            name = "gen-" + c.name
            subprocess.run([y2o, y, "-o", os.path.join(out, name)], check=True)
            names.append(name)
    for name, text in (("gen-map-flow.yaml", YAML_FLOW), ("gen-map-block.yaml", YAML_BLOCK)):
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
        names.append(name)
    for n in names:
        size = os.path.getsize(os.path.join(out, n))
        assert size < 8192, n
        print("%6d %s" % (size, n))


if __name__ == "__main__":
    main()
