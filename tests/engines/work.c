/* SPDX-License-Identifier: MIT */
/* The LLVM workload of tests/test_engines.py: compiled to bitcode with
 * clang-14 -g -O1, run by lli-14 -jit-kind=mcjit (whose
 * PerfJITEventListener writes the jitdump), and compiled natively by
 * llc-14 for the oracle's line table. */
#include <stdio.h>
static volatile unsigned long sink;
__attribute__((noinline)) unsigned long mix(unsigned long x)
{
	for (int i = 0; i < 1000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}
__attribute__((noinline)) unsigned long work(int n)
{
	unsigned long acc = 0;
	for (int i = 0; i < n; i++)
		acc ^= mix(acc + (unsigned long)i);
	return acc;
}
int main(void)
{
	sink = work(200000);
	printf("%lu\n", sink);
	return 0;
}
