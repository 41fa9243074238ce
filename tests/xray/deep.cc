// SPDX-License-Identifier: MIT
// XRay basic-mode test program: ROUNDS recursions DEPTH (100) frames deep.
// Run with XRAY_BASIC_OPTIONS="func_duration_threshold_us=0
// max_stack_depth=10 thread_buffer_size=16": enters and exits deeper than
// 10 are not recorded at all, so each round logs deep_run + 9 dive frames
// (10 enters, 10 exits), and with 16 records per thread buffer the records
// are written in several chunks.  The recursive call is not in tail
// position so that -O1 keeps it a real call.
// Scenario: basic-deep.
#include "xray_test.h"

enum { DEPTH = 100, ROUNDS = 4 };

extern "C" {
NOINLINE int dive(int n)
{
	if (n <= 1)
		return (int)(sink & 1);
	return dive(n - 1) + 1;
}
NOINLINE void deep_run() { sink += dive(DEPTH); }
}

NOXRAY int main()
{
	for (int i = 0; i < ROUNDS; i++)
		deep_run();
	return 0;
}
