#!/bin/sh
# SPDX-License-Identifier: MIT
# Seeds for fuzz_xray_map: small relocatable objects that clang 14 compiled
# with -fxray-instrument (an xray_instr_map section, symbols, with and
# without DWARF).  Linked binaries are 300 KB with the runtime; objects
# keep the same sections small.  Usage: sh fuzz/make-xray-map-seeds.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$here/corpus-xray_map
cxx=$(command -v clang++-14 || command -v clang++)
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/m.cc" <<'SRC'
namespace ns { int leaf(int x) { return x * 3 + 1; } }
[[clang::xray_always_instrument, clang::xray_log_args(1)]] int logged(long v) { return ns::leaf((int)v); }
int rec(int d) { return d ? rec(d - 1) + ns::leaf(d) : 0; }
int main(int argc, char **) { return rec(argc) + logged(argc); }
SRC
"$cxx" -O1 -fxray-instrument -fxray-instruction-threshold=1 -c "$tmp/m.cc" -o "$out/m.o"
"$cxx" -O1 -g -fxray-instrument -fxray-instruction-threshold=1 -c "$tmp/m.cc" -o "$out/m-g.o"
"$cxx" -m32 -O1 -fxray-instrument -fxray-instruction-threshold=1 -c "$tmp/m.cc" -o "$out/m32.o" 2>/dev/null || true
ls -l "$out"
