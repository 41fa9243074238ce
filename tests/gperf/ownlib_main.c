/* SPDX-License-Identifier: MIT */
/* ownlib: the program calls work_outer() in its own libwork.so (found
 * through rpath $ORIGIN) and spins in local_spin() itself.  Shares:
 * libwork.so work_inner ~60%, work_outer ~15%, local_spin ~25%; then
 * 1e8 calls of the empty work_nop() through the PLT.  Arguments: the
 * rounds of the first phase (10) and the calls of the second in units of
 * 1e8 (1): a longer run gives the second phase's few-tick stacks (the PLT
 * stub, work_nop, main's loop) more chances to appear. */
#include <stdlib.h>

#include "spin.h"

void work_outer(unsigned long unit);
void work_nop(void);

__attribute__((noinline)) static void local_spin(unsigned long unit)
{
	SPIN_BODY(25 * unit);
}

int main(int argc, char **argv)
{
	int i, rounds = argc > 1 ? atoi(argv[1]) : 10;
	long j, nops = (argc > 2 ? atol(argv[2]) : 1) * 100000000L;

	for (i = 0; i < rounds; i++) {
		work_outer(1000000);
		local_spin(1000000);
	}
	for (j = 0; j < nops; j++)
		work_nop();
	return 0;
}
