/* SPDX-License-Identifier: MIT */
/* inline: -O2, hot_inl() is static inline and always inlined into
 * outer(); pprof expands the inline frame from DWARF (`hot_inl (inline)`
 * gets most of outer's samples), perf report does not. */
#include <stdlib.h>

volatile unsigned long gperf_sink;

static inline __attribute__((always_inline)) unsigned long hot_inl(unsigned long x, long n)
{
	long i;

	for (i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

__attribute__((noinline)) void outer(long n)
{
	unsigned long x = gperf_sink;
	long i;

	x = hot_inl(x, n);
	/* outer's own work: a dependent chain of divisions */
	for (i = 1; i < n / 8; i++)
		x ^= x / (unsigned long)(i | 1);
	gperf_sink = x;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 900000000L;

	outer(n);
	return 0;
}
