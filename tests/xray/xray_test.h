// SPDX-License-Identifier: MIT
// Helpers shared by the XRay test programs (tests/gen-xray-traces.sh builds
// them with clang 14: -fxray-instrument -fxray-instruction-threshold=1).
//
// FDR mode never writes a file at exit, so every FDR program brackets its
// work with fdr_start()/fdr_stop():
//   __xray_log_init_mode("xray-fdr", argv[1]); __xray_patch();
//   ... work ...
//   __xray_log_finalize(); __xray_log_flushLog();
// argv[1] is the FDR option string ("func_duration_threshold_us=0", "" for
// the defaults, ...).  The helpers, main() and spin_us() are never
// instrumented so that a trace holds only the functions a program is about.
#ifndef PERFGRAFT_TESTS_XRAY_TEST_H
#define PERFGRAFT_TESTS_XRAY_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <xray/xray_interface.h>
#include <xray/xray_log_interface.h>

#define NOINLINE __attribute__((noinline))
#define NOXRAY [[clang::xray_never_instrument]]

// Keeps the optimiser from deleting the work of the test functions.
static volatile unsigned long sink;

NOXRAY static inline void fdr_start(int argc, char **argv)
{
	const char *opts = argc > 1 ? argv[1] : "";
	if (__xray_log_init_mode("xray-fdr", opts) != XRAY_LOG_INITIALIZED) {
		fprintf(stderr, "%s: __xray_log_init_mode(xray-fdr, \"%s\") failed\n",
			argv[0], opts);
		exit(1);
	}
	if (__xray_patch() != SUCCESS) {
		fprintf(stderr, "%s: __xray_patch failed\n", argv[0]);
		exit(1);
	}
}

NOXRAY static inline void fdr_stop(const char *prog)
{
	if (__xray_log_finalize() != XRAY_LOG_FINALIZED) {
		fprintf(stderr, "%s: __xray_log_finalize failed\n", prog);
		exit(1);
	}
	if (__xray_log_flushLog() != XRAY_LOG_FLUSHED) {
		fprintf(stderr, "%s: __xray_log_flushLog failed\n", prog);
		exit(1);
	}
}

// Busy-waits for us microseconds of CLOCK_MONOTONIC time (the runtime's
// emulated TSC is CLOCK_REALTIME nanoseconds, which runs at the same rate).
// Inlined into its caller, so the time is the caller's exclusive time.
NOXRAY __attribute__((always_inline)) static inline void spin_us(long us)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long end = t0.tv_sec * 1000000000L + t0.tv_nsec + us * 1000L;
	do {
		clock_gettime(CLOCK_MONOTONIC, &t);
		sink++;
	} while (t.tv_sec * 1000000000L + t.tv_nsec < end);
}

#endif
