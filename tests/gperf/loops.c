/* SPDX-License-Identifier: MIT */
/* pie / nopie: main -> top -> {mid_a -> leaf_a, mid_b -> leaf_b}, every
 * function except main also spins itself, so each has flat samples.
 * Built twice: default gcc (PIE) and -no-pie.  Shares (of ~1.2 s):
 * leaf_a 40%, leaf_b 25%, mid_a 10%, mid_b 10%, top 15%. */
#include <stdlib.h>

#include "spin.h"

static unsigned long unit = 1000000;  /* iterations per share point */

__attribute__((noinline)) void leaf_a(void) { SPIN_BODY(40 * unit); }
__attribute__((noinline)) void leaf_b(void) { SPIN_BODY(25 * unit); }
__attribute__((noinline)) void mid_a(void) { SPIN_BODY(10 * unit); leaf_a(); }
__attribute__((noinline)) void mid_b(void) { SPIN_BODY(10 * unit); leaf_b(); }
__attribute__((noinline)) void top(void)
{
	SPIN_BODY(15 * unit);
	mid_a();
	mid_b();
}

int main(int argc, char **argv)
{
	int i, rounds = argc > 1 ? atoi(argv[1]) : 12;

	for (i = 0; i < rounds; i++)
		top();
	return 0;
}
