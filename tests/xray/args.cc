// SPDX-License-Identifier: MIT
// XRay FDR test program for argument logging.  In clang 14,
// [[clang::xray_log_args(1)]] only produces a log-args sled (kind 3) together
// with xray_always_instrument; FDR v5 then writes EnterArg (action 3)
// followed by one CallArgument record.  The runtime logs only the first
// argument, so log2(a, b) records a only.
// Calls, in order: log1(100), log1(7), log1(0xdeadbeef), log2(0, 5),
// log1(0xffffffffffffffff), with a plain (no argument) call in between.
// Scenario: fdr-args ("func_duration_threshold_us=0").
#include "xray_test.h"

extern "C" {
[[clang::xray_always_instrument, clang::xray_log_args(1)]]
NOINLINE void log1(unsigned long v) { sink += v; }
[[clang::xray_always_instrument, clang::xray_log_args(1)]]
NOINLINE void log2(unsigned long a, unsigned long b) { sink += a * b; }
NOINLINE void plain(unsigned long v) { sink ^= v; }
NOINLINE void run()
{
	log1(100);
	plain(1);
	log1(7);
	log1(0xdeadbeef);
	log2(0, 5);
	log1(~0UL);
}
}

NOXRAY int main(int argc, char **argv)
{
	fdr_start(argc, argv);
	run();
	fdr_stop(argv[0]);
	return 0;
}
