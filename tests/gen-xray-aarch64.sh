#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the cross-architecture XRay fixtures (tests/xray-aarch64/*) with
# clang 14 for ARCH (aarch64, the default, or ppc64le), runs them under
# qemu-user in basic and FDR mode, and writes into OUTDIR:
#
#   prog.xz        the PIE test program (prog.cc), xz-compressed, stripped
#                  to the symbols of prog.cc (the XRay runtime's are
#                  dropped); xray_instr_map and the build-id stay
#   prog.o         prog.cc as compiled for prog (relocatable, no debug
#                  info): its map is per-function xray_instr_map sections
#                  whose entries are PC-relative relocations
#   libxso.so.xz   the PIC shared library (xso.cc) with the runtime linked
#                  in, stripped and compressed the same way
#   xso.o          xso.cc as compiled (-fPIC) for libxso.so
#   prog-basic.xray prog-fdr.xray so-basic.xray so-fdr.xray   the traces
#   scenarios.json {arch, binaries: [{binary, object}], scenarios: [{name,
#                  trace, binary, object, mode, version, threads,
#                  max_depth, counts}]} (ppc64le: no so-* traces, see below)
#
# Usage: tests/gen-xray-aarch64.sh OUTDIR [ARCH]
# The committed copies are tests/fixtures/xray-aarch64 and
# tests/fixtures/xray-ppc64le; tests/test_xray_aarch64.py reads them and
# needs neither qemu nor the cross packages.  Regenerating needs (Debian 12,
# as root; ARCH=ppc64le: s/arm64/ppc64el/, s/aarch64/powerpc64le/):
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install --no-install-recommends clang-14 qemu-user-static \
#     libclang-rt-14-dev:arm64 gcc-aarch64-linux-gnu \
#     libc6-dev-arm64-cross libstdc++-12-dev-arm64-cross
# Takes about 5 s.  Intermediate files live in a temporary directory inside
# OUTDIR that is removed on exit.  Any failed step exits non-zero.
#
# Why the shared library carries the runtime: XRay in LLVM 14 handles one
# instrumented object per process (see tests/xray-aarch64/xso.cc), so a
# trace holds the IDs of either the executable's map or the library's,
# never both; soprog (uninstrumented, not kept) loads the library.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	sed -n '3,32s/^# \{0,1\}//p' "$0" >&2
	exit 2
fi
arch=${2:-aarch64}
so_runs=1
case $arch in
aarch64)
	triple=aarch64-linux-gnu rt=aarch64 qemu=qemu-aarch64-static ;;
ppc64le)
	# libxso.so is built (its map and xso.o are tested) but not run:
	# under qemu-ppc64le-static 7.2 soprog spins forever as soon as the
	# library's sleds are patched (basic and FDR mode alike; it runs when
	# nothing is patched), while prog traces fine.
	triple=powerpc64le-linux-gnu rt=powerpc64le qemu=qemu-ppc64le-static
	so_runs=0 ;;
*)
	echo "gen-xray-aarch64: unknown ARCH $arch (aarch64, ppc64le)" >&2
	exit 2 ;;
esac
src=$(cd "$(dirname "$0")/xray-aarch64" && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
tmp=$(mktemp -d "$out/.gen-xray.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
unset XRAY_OPTIONS XRAY_FDR_OPTIONS XRAY_BASIC_OPTIONS

die() {
	echo "gen-xray-aarch64: $*" >&2
	exit 1
}

cc=${CLANG:-clang-14}
cxx=${CLANGXX:-clang++-14}
sysroot=/usr/$triple
rtdir=$("$cc" -print-resource-dir)/lib/linux
for t in "$cc" "$cxx" "$qemu" "$triple-objcopy" "$triple-strip" "$triple-nm" xz; do
	command -v "$t" >/dev/null || die "$t not found (see the packages above)"
done
for l in xray xray-basic xray-fdr; do
	[ -f "$rtdir/libclang_rt.$l-$rt.a" ] || die "$rtdir/libclang_rt.$l-$rt.a missing"
done

# ---- build -----------------------------------------------------------------
flags=(--target="$triple" -O1 -g -fxray-instrument -fxray-instruction-threshold=1)
b=$tmp/build
mkdir -p "$b"
"$cxx" "${flags[@]}" -fPIE -c "$src/prog.cc" -o "$b/prog.o"
"$cxx" "${flags[@]}" -pie "$b/prog.o" -o "$b/prog" -lpthread

# The runtime archive without .preinit_array (xso.cc explains).
cp "$rtdir/libclang_rt.xray-$rt.a" "$b/libxray-nopreinit.a"
"$triple-objcopy" --remove-section=.preinit_array "$b/libxray-nopreinit.a"
"$cxx" "${flags[@]}" -fPIC -c "$src/xso.cc" -o "$b/xso.o"
"$cxx" "${flags[@]}" -shared "$b/xso.o" -o "$b/libxso.so" \
	-Wl,--whole-archive "$b/libxray-nopreinit.a" \
	"$rtdir/libclang_rt.xray-basic-$rt.a" "$rtdir/libclang_rt.xray-fdr-$rt.a" \
	-Wl,--no-whole-archive -lpthread -lrt -lm -ldl
"$cc" --target="$triple" -O1 "$src/soprog.c" -o "$b/soprog" \
	-L"$b" -lxso -Wl,-rpath,'$ORIGIN'

# ---- run -------------------------------------------------------------------
# LD_LIBRARY_PATH: the cross loader in $sysroot must load the cross libc
# beside it.  Without it, it searches /etc/ld.so.cache and /lib/$triple
# first, where libc6:ARCH (a dependency of libclang-rt-14-dev:ARCH) is a
# different build (2.36-9+deb12u14 against the loader's 2.36-8cross1), and
# pthread_create then hangs forever.
# Each run writes into its own directory (xray_logfile_base ends in '/');
# the one file there is the trace.
run() { # NAME MODE PROGRAM [ARG]
	local name=$1 mode=$2 d=$tmp/run/$1 rc=0 files
	shift 2
	mkdir -p "$d"
	if [ "$mode" = fdr ]; then
		XRAY_OPTIONS="xray_mode=xray-fdr xray_logfile_base=$d/" \
			"$qemu" -L "$sysroot" -E LD_LIBRARY_PATH="$sysroot/lib" "$@" >"$tmp/$name.log" 2>&1 || rc=$?
	else
		XRAY_OPTIONS="patch_premain=true xray_mode=xray-basic xray_logfile_base=$d/" \
			XRAY_BASIC_OPTIONS="func_duration_threshold_us=0" \
			"$qemu" -L "$sysroot" -E LD_LIBRARY_PATH="$sysroot/lib" "$@" >"$tmp/$name.log" 2>&1 || rc=$?
	fi
	if [ $rc -ne 0 ]; then
		cat "$tmp/$name.log" >&2
		die "$name: $* exited with status $rc"
	fi
	files=("$d"/*)
	[ ${#files[@]} -eq 1 ] && [ -f "${files[0]}" ] ||
		die "$name: expected one trace in $d, found: ${files[*]##*/}"
	[ "$(wc -c <"${files[0]}")" -gt 32 ] || die "$name: empty trace"
	mv -f "${files[0]}" "$b/$name.xray"
}
run prog-basic basic "$b/prog"
run prog-fdr fdr "$b/prog" fdr
if [ $so_runs = 1 ]; then
	run so-basic basic "$b/soprog"
	run so-fdr fdr "$b/soprog" fdr
fi

# ---- keep small ------------------------------------------------------------
# Keep the symbols the test sources define (names of the instrumented
# functions); drop the runtime's and the debug information.
keep() { # OBJECT -> -K args
	"$triple-nm" --defined-only "$1" | awk '$2 ~ /^[TtWw]$/ { print "-K" $3 }'
}
mapfile -t kp < <(keep "$b/prog.o")
mapfile -t ks < <(keep "$b/xso.o")
"$triple-strip" --strip-all "${kp[@]}" "$b/prog" -o "$tmp/prog"
"$triple-strip" --strip-all "${ks[@]}" "$b/libxso.so" -o "$tmp/libxso.so"
"$triple-strip" --strip-debug "$b/prog.o" -o "$tmp/prog.o"
"$triple-strip" --strip-debug "$b/xso.o" -o "$tmp/xso.o"
# Stripping must not move what the map points at.
for f in prog libxso.so; do
	"$triple-objcopy" -O binary -j xray_instr_map -j .text "$b/$f" "$tmp/map-a"
	"$triple-objcopy" -O binary -j xray_instr_map -j .text "$tmp/$f" "$tmp/map-b"
	cmp -s "$tmp/map-a" "$tmp/map-b" || die "strip changed the map or text of $f"
done
xz -9e -c "$tmp/prog" >"$tmp/prog.xz"
xz -9e -c "$tmp/libxso.so" >"$tmp/libxso.so.xz"
for f in prog.o xso.o prog.xz libxso.so.xz; do mv -f "$tmp/$f" "$out/$f"; done
traces="prog-basic prog-fdr"
[ $so_runs = 0 ] || traces="$traces so-basic so-fdr"
for f in $traces; do
	chmod 644 "$b/$f.xray" # the runtime creates it 0600
	mv -f "$b/$f.xray" "$out/$f.xray"
done

# ---- scenarios.json --------------------------------------------------------
# counts: completed calls per function over the whole trace, from the
# comments at the top of prog.cc and xso.cc (names as llvm-xray prints them).
pc='{"run": 1, "worker": 1, "mid": 8, "arm::leaf(int)": 16, "rec": 10,
              "is_even": 4, "is_odd": 3}'
sc='{"xso_entry": 2, "xso::leaf(int)": 7, "xso_rec": 5}'
so_scenarios=
[ $so_runs = 0 ] || so_scenarios=',
  {"name": "so-basic", "arch": "'$arch'", "trace": "so-basic.xray",
   "binary": "libxso.so", "object": "xso.o", "mode": "basic", "version": 3,
   "threads": 1, "max_depth": {"xso_rec": 5}, "counts": '$sc'},
  {"name": "so-fdr", "arch": "'$arch'", "trace": "so-fdr.xray",
   "binary": "libxso.so", "object": "xso.o", "mode": "fdr", "version": 5,
   "threads": 1, "max_depth": {"xso_rec": 5}, "counts": '$sc'}'
# "binaries": every linked binary and relocatable object of the map tests.
cat >"$tmp/scenarios.json" <<EOF
{"arch": "$arch",
 "binaries": [{"binary": "prog", "object": "prog.o"},
              {"binary": "libxso.so", "object": "xso.o"}],
 "scenarios": [
  {"name": "prog-basic", "arch": "$arch", "trace": "prog-basic.xray",
   "binary": "prog", "object": "prog.o", "mode": "basic", "version": 3,
   "threads": 2, "max_depth": {"rec": 10}, "counts": $pc},
  {"name": "prog-fdr", "arch": "$arch", "trace": "prog-fdr.xray",
   "binary": "prog", "object": "prog.o", "mode": "fdr", "version": 5,
   "threads": 2, "max_depth": {"rec": 10}, "counts": $pc}$so_scenarios
]}
EOF
mv -f "$tmp/scenarios.json" "$out/scenarios.json"
