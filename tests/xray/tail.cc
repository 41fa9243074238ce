// SPDX-License-Identifier: MIT
// XRay FDR test program for tail calls; built with -O2 so that clang turns
// the calls in tail position into jumps, which get a tail-exit sled (kind 2).
//   caller(x) tail-calls callee(): TailExit(caller) then Enter(callee); the
//     callee's Exit returns to run(), i.e. callee is caller's sibling.
//   sleeper(us) tail-calls usleep(us): Enter + TailExit of sleeper, then the
//     gap.  With argv[2] = 2500000 (2.5 s) the next record needs a TSCWrap
//     (v5 writes one when the delta exceeds INT32_MAX ticks = 2.15 s at the
//     emulated 1 GHz clock) followed by a delta of 0.
// argv[1]: FDR options; argv[2]: sleep in microseconds (default 0).
// Scenarios: fdr-tail ("func_duration_threshold_us=0", 2.5 s sleep) and
// fdr-tail-default ("" with a 0.3 s sleep: the sleeper pair is erased).
#include <unistd.h>
#include "xray_test.h"

extern "C" {
NOINLINE int callee(int x) { sink += x; return x + 1; }
NOINLINE int caller(int x) { sink += 1; return callee(x * 2); }
NOINLINE void sleeper(unsigned us) { usleep(us); }
NOINLINE void run(unsigned us)
{
	for (int i = 0; i < 3; i++)
		sink += caller(i);
	sleeper(us);
	sink += caller(10);
}
}

NOXRAY int main(int argc, char **argv)
{
	unsigned us = argc > 2 ? (unsigned)strtoul(argv[2], nullptr, 0) : 0;
	fdr_start(argc, argv);
	run(us);
	fdr_stop(argv[0]);
	return 0;
}
