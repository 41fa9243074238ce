/* SPDX-License-Identifier: MIT */
/* api: linked with -lprofiler, profiling controlled by the program:
 * ProfilerStart(argv[1]), phase1 -> p1_leaf, ProfilerFlush() (writes all
 * buffered stacks early, so identical stacks recur in later records),
 * phase2 -> p2_leaf, ProfilerStop().  unprofiled() runs before Start and
 * after Stop and must not appear in the profile. */
#include <gperftools/profiler.h>
#include <stdio.h>

#include "spin.h"

__attribute__((noinline)) void unprofiled(void) { SPIN_BODY(50000000UL); }
__attribute__((noinline)) void p1_leaf(void) { SPIN_BODY(450000000UL); }
__attribute__((noinline)) void p2_leaf(void) { SPIN_BODY(350000000UL); }
__attribute__((noinline)) void phase1(void) { SPIN_BODY(100000000UL); p1_leaf(); }
__attribute__((noinline)) void phase2(void) { SPIN_BODY(100000000UL); p2_leaf(); }

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: api PROFILE\n");
		return 2;
	}
	unprofiled();
	if (!ProfilerStart(argv[1])) {
		fprintf(stderr, "api: ProfilerStart(%s) failed\n", argv[1]);
		return 1;
	}
	phase1();
	ProfilerFlush();
	phase2();
	ProfilerStop();
	unprofiled();
	return 0;
}
