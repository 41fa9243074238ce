// SPDX-License-Identifier: MIT
// XRay FDR test program: direct recursion (rec(20) -> ... -> rec(1), so 20
// rec frames under run()) and mutual recursion (is_even(10) -> is_odd(9) ->
// ... -> is_even(0), 11 frames), one thread.
//
// Scenarios: fdr-recursion ("func_duration_threshold_us=0"), and
// fdr-ring1 ("func_duration_threshold_us=0,buffer_size=128,buffer_max=2")
// where a single thread wraps the ring many times, so the surviving buffers
// begin with exits whose entries were overwritten.  Which of the two ring
// buffers is written last depends on the parity of the number of buffer
// fills: with REPEAT = 2 (clang 14) the later buffer comes first in the file
// (REPEAT = 3 would leave them in time order).
// The recursive calls are not in tail position (the result is used), so
// -O1 keeps them as real calls; extern "C" keeps the names plain.
#include "xray_test.h"

enum { DEPTH = 20, MUTUAL = 10, REPEAT = 2 };

extern "C" {
NOINLINE int rec(int n)
{
	if (n <= 1)
		return (int)(sink & 1);
	return rec(n - 1) + 1;
}
NOINLINE int is_odd(int n);
// The volatile increments keep clang from folding is_even(10) to a constant.
NOINLINE int is_even(int n) { sink++; return n == 0 ? 1 : 1 - is_odd(n - 1); }
NOINLINE int is_odd(int n) { sink++; return n == 0 ? 0 : 1 - is_even(n - 1); }
NOINLINE void run()
{
	for (int r = 0; r < REPEAT; r++) {
		sink += rec(DEPTH);
		sink += is_even(MUTUAL);
	}
}
}

NOXRAY int main(int argc, char **argv)
{
	fdr_start(argc, argv);
	run();
	fdr_stop(argv[0]);
	return 0;
}
