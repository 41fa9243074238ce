// SPDX-License-Identifier: MIT
// XRay basic-mode test program whose log holds only the 32-byte file header:
// main is never instrumented, and the only instrumented call, tiny(), is
// far shorter than basic mode's default func_duration_threshold_us=5, so
// its entry is erased on exit and nothing is ever written after the header
// (llvm-xray then fails with a confusing "version 768" error, #57657).
// Scenario: basic-empty (XRAY_OPTIONS="patch_premain=true
// xray_mode=xray-basic xray_logfile_base=PFX", no XRAY_BASIC_OPTIONS).
#include "xray_test.h"

extern "C" NOINLINE void tiny() { sink++; }

NOXRAY int main()
{
	tiny();
	return 0;
}
