/* SPDX-License-Identifier: MIT */
/* deep: rec(300) recurses 300 frames deep (built with
 * -fno-optimize-sibling-calls, -O1) and spins at the bottom in
 * bottom_spin, so almost every record hits the 254-PC cap of
 * gperftools >= 2.9: the outer frames (main, _start) are lost.  A second
 * shallow call path (shallow_spin from main) keeps main in the profile. */
#include <stdlib.h>

#include "spin.h"

__attribute__((noinline)) void bottom_spin(void) { SPIN_BODY(850000000UL); }
__attribute__((noinline)) void shallow_spin(void) { SPIN_BODY(250000000UL); }

__attribute__((noinline)) int rec(int depth)
{
	if (depth == 0) {
		bottom_spin();
		return 0;
	}
	return rec(depth - 1) + 1;  /* not a tail call */
}

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 300;

	shallow_spin();
	return rec(depth) == depth ? 0 : 1;
}
