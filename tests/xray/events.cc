// SPDX-License-Identifier: MIT
// XRay FDR test program for custom and typed events (FDR v5 CustomEventMarker
// with payload "hello-custom", TypedEventMarker type 42 with payload "typed!").
//
// Written around two clang 14 / compiler-rt 14 problems:
//  * The event sleds call the handler with a misaligned stack and the FDR
//    handler then crashes on movaps (fixed upstream by PR #89360).  The custom
//    sled pushes two registers, so it is safe only in a function that keeps
//    rsp 16-byte aligned, i.e. a NON-leaf function (custom_emit calls
//    after_custom); the typed sled pushes three, so it is safe only in a
//    FRAMELESS LEAF function (typed_emit).
//  * A payload in a stack array can be logged as garbage at -O1 because the
//    stores are optimised away, so payloads are static const buffers.
// After the events, TRAILING (5) short leaf() calls follow, then run()
// returns.  FDR v5 in LLVM 14 counts only the payload of a typed event in
// the buffer extents, not its 16-byte marker, so each typed event cuts 16
// bytes (two 8-byte function records) off the end of its buffer: with N
// typed events the last 2N records are missing, i.e. run's Exit and the
// last 2N-1 leaf records (N=1: 5 leaf Enters, 4 Exits; N=3: 3 and 2).
// argv[1]: FDR options; argv[2]: number of typed events (default 1).
// Scenarios: fdr-events (1 typed event), fdr-typed3 (3 typed events).
#include "xray_test.h"

enum { TRAILING = 5 };

static const char custom_msg[] = "hello-custom";
static const char typed_msg[] = "typed!";

extern "C" {
NOINLINE void after_custom() { sink++; }
NOINLINE void custom_emit()
{
	__xray_customevent(custom_msg, sizeof custom_msg - 1);
	after_custom();
}
NOINLINE void typed_emit() { __xray_typedevent(42, typed_msg, sizeof typed_msg - 1); }
NOINLINE void leaf() { sink++; }
NOINLINE void run(int ntyped)
{
	custom_emit();
	for (int i = 0; i < ntyped; i++)
		typed_emit();
	for (int i = 0; i < TRAILING; i++)
		leaf();
}
}

NOXRAY int main(int argc, char **argv)
{
	int ntyped = argc > 2 ? atoi(argv[2]) : 1;
	fdr_start(argc, argv);
	run(ntyped);
	fdr_stop(argv[0]);
	return 0;
}
