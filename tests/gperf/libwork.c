/* SPDX-License-Identifier: MIT */
/* libwork.so for the ownlib scenario: work_outer -> work_inner, work_nop.  The
 * library keeps its own static sink, so it has no undefined data symbol. */
#include "spin.h"

__attribute__((noinline)) void work_inner(unsigned long unit)
{
	SPIN_BODY(60 * unit);
}

/* Called through the program's PLT in a tight loop, so that samples land
 * in the PLT stub (perf: work_nop@plt) and in this empty function. */
__attribute__((noinline)) void work_nop(void)
{
	__asm__ volatile("");
}

__attribute__((noinline)) void work_outer(unsigned long unit)
{
	SPIN_BODY(15 * unit);
	work_inner(unit);
}
