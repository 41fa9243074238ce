/* SPDX-License-Identifier: MIT */
/* vdso: a loop on clock_gettime(CLOCK_MONOTONIC), which glibc serves
 * from the [vdso] mapping (no file on disk: perf falls back to its own
 * vdso, perl pprof prints raw addresses), plus some own spinning. */
#include <stdlib.h>
#include <time.h>

#include "spin.h"

__attribute__((noinline)) static unsigned long read_clock(long n)
{
	struct timespec ts;
	unsigned long acc = 0;
	long i;

	for (i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		acc += (unsigned long)ts.tv_nsec;
	}
	return acc;
}

__attribute__((noinline)) static void own_spin(void) { SPIN_BODY(250000000UL); }

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 30000000L;

	own_spin();
	gperf_sink = read_clock(n);
	return 0;
}
