// SPDX-License-Identifier: MIT
// XRay basic-mode test program whose log holds only the 32-byte file header:
// main is never instrumented, and the only instrumented call, tiny(), is
// far shorter than the duration threshold (1 s: basic mode's default 5 us
// was sometimes exceeded when the machine preempted the call), so its entry
// is erased on exit and nothing is ever written after the header
// (llvm-xray then fails with a confusing "version 768" error, #57657).
// Scenario: basic-empty (XRAY_OPTIONS="patch_premain=true
// xray_mode=xray-basic xray_logfile_base=PFX",
// XRAY_BASIC_OPTIONS="func_duration_threshold_us=1000000").
#include "xray_test.h"

extern "C" NOINLINE void tiny() { sink++; }

NOXRAY int main()
{
	tiny();
	return 0;
}
