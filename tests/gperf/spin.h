/* SPDX-License-Identifier: MIT */
/* The busy loop of the gperf test programs: a sink the compiler must keep
 * and a multiply/add chain that burns a known amount of CPU. */
#ifndef GPERF_TEST_SPIN_H
#define GPERF_TEST_SPIN_H

static volatile unsigned long gperf_sink;

/* n iterations of a multiply/add chain; 1e8 take ~0.1 s here */
#define SPIN_BODY(n)                                                   \
	do {                                                           \
		unsigned long x_ = gperf_sink, i_;                     \
		for (i_ = 0; i_ < (unsigned long)(n); i_++)            \
			x_ = x_ * 6364136223846793005UL + 1442695040888963407UL; \
		gperf_sink = x_;                                       \
	} while (0)

#endif
