// SPDX-License-Identifier: MIT
// XRay FDR test program producing unbalanced call records on purpose:
//  * patching happens inside nested calls: outer() -> do_patch() calls
//    __xray_patch(), so the trace begins with Exit(do_patch) and
//    Exit(outer) whose entries were never logged (exits without entries);
//  * finalizing happens inside nested calls: fin_a() -> fin_b() -> fin_c()
//    calls __xray_log_finalize(), so their entries are never exited.
// Between the two, balanced() calls leaf() twice.
// main() is instrumented too (it is entered before patching and returns
// after finalizing, so it never appears).
// Scenario: fdr-unbal ("func_duration_threshold_us=0").
#include "xray_test.h"

extern "C" {
NOINLINE void do_patch()
{
	if (__xray_patch() != SUCCESS)
		exit(1);
}
NOINLINE void outer() { do_patch(); sink++; }
NOINLINE void leaf() { sink++; }
NOINLINE void balanced() { leaf(); leaf(); }
NOINLINE void fin_c()
{
	if (__xray_log_finalize() != XRAY_LOG_FINALIZED)
		exit(1);
}
NOINLINE void fin_b() { fin_c(); sink++; }
NOINLINE void fin_a() { fin_b(); sink++; }
}

int main(int argc, char **argv)
{
	const char *opts = argc > 1 ? argv[1] : "";
	if (__xray_log_init_mode("xray-fdr", opts) != XRAY_LOG_INITIALIZED)
		return 1;
	outer();
	balanced();
	fin_a();
	if (__xray_log_flushLog() != XRAY_LOG_FLUSHED)
		return 1;
	return 0;
}
