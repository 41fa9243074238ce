// SPDX-License-Identifier: MIT
// AArch64 XRay test program (tests/gen-xray-aarch64.sh builds it with
// clang 14 --target=aarch64-linux-gnu as a PIE and runs it under qemu).
//
// Calls, per run (every function is recorded: the threshold is 0):
//   main thread: run() -> 5 x mid(i) -> 2 x arm::leaf(int), rec(10)
//                (10 nested rec frames), is_even(6) -> is_odd(5) -> ...
//                -> is_even(0) (4 is_even + 3 is_odd frames)
//   one worker:  worker() -> 3 x mid(i) -> 2 x arm::leaf(int)
// so: run 1, worker 1, mid 8, arm::leaf(int) 16, rec 10, is_even 4,
// is_odd 3.
// argv[1] == "fdr": FDR mode, bracketed by __xray_log_init_mode/__xray_patch
// and __xray_log_finalize/__xray_log_flushLog (FDR never flushes at exit);
// otherwise basic mode (patch_premain=true in XRAY_OPTIONS).
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <xray/xray_interface.h>
#include <xray/xray_log_interface.h>

#define NOINLINE __attribute__((noinline))
#define NOXRAY [[clang::xray_never_instrument]]

static volatile unsigned long sink;

namespace arm {
NOINLINE int leaf(int i)
{
	sink += i;
	return (int)(sink & 1);
}
} // namespace arm

extern "C" {
NOINLINE int mid(int i) { return arm::leaf(i) + arm::leaf(i + 1); }
// Not tail calls: the results are used.
NOINLINE int rec(int n) { return n <= 1 ? (int)(sink & 1) : rec(n - 1) + 1; }
NOINLINE int is_odd(int n);
NOINLINE int is_even(int n) { sink++; return n == 0 ? 1 : 1 - is_odd(n - 1); }
NOINLINE int is_odd(int n) { sink++; return n == 0 ? 0 : 1 - is_even(n - 1); }
NOINLINE void *worker(void *)
{
	for (int i = 0; i < 3; i++)
		sink += mid(i);
	return nullptr;
}
NOINLINE void run()
{
	for (int i = 0; i < 5; i++)
		sink += mid(i);
	sink += rec(10);
	sink += is_even(6);
}
}

NOXRAY int main(int argc, char **argv)
{
	int fdr = argc > 1 && !strcmp(argv[1], "fdr");
	if (fdr) {
		if (__xray_log_init_mode("xray-fdr", "func_duration_threshold_us=0") !=
		    XRAY_LOG_INITIALIZED || __xray_patch() != SUCCESS) {
			fprintf(stderr, "%s: FDR start failed\n", argv[0]);
			return 1;
		}
	}
	pthread_t t;
	if (pthread_create(&t, nullptr, worker, nullptr))
		return 1;
	pthread_join(t, nullptr);
	run();
	if (fdr && (__xray_log_finalize() != XRAY_LOG_FINALIZED ||
		    __xray_log_flushLog() != XRAY_LOG_FLUSHED)) {
		fprintf(stderr, "%s: FDR flush failed\n", argv[0]);
		return 1;
	}
	return 0;
}
