// SPDX-License-Identifier: MIT
// AArch64 XRay test shared library (PIC), with the XRay runtime linked
// into it: clang 14 (LLVM < 20) has no XRay support for shared objects
// (-fxray-shared came later): the runtime patches only the sleds of the
// object it is linked into, found through that object's
// __start_xray_instr_map, and the driver links it into executables only.
// So tests/gen-xray-aarch64.sh links the runtime into this library, with
// .preinit_array (not allowed in a DSO) removed from xray_init.o, and
// xso_init() below calls __xray_init() in its place, before the runtime's
// own static initialisers (priority 101 < default).  The runtime's symbols
// are hidden, so the library exports xso_fdr_start/xso_fdr_stop for
// tests/xray-aarch64/soprog.c.
//
// Calls made by soprog: xso_entry(4), xso_entry(3), xso_rec(5):
// xso_entry 2, xso::leaf(int) 7, xso_rec 5 (nested).
#include <xray/xray_interface.h>
#include <xray/xray_log_interface.h>

#define NOINLINE __attribute__((noinline))
#define NOXRAY [[clang::xray_never_instrument]]

extern "C" void __xray_init();

static volatile unsigned long so_sink;

NOXRAY __attribute__((constructor(101))) static void xso_init() { __xray_init(); }

namespace xso {
NOINLINE int leaf(int i)
{
	so_sink += i;
	return (int)(so_sink & 1);
}
} // namespace xso

extern "C" {
NOINLINE int xso_entry(int n)
{
	int r = 0;
	for (int i = 0; i < n; i++)
		r += xso::leaf(i);
	return r;
}
NOINLINE int xso_rec(int n) { return n <= 1 ? (int)(so_sink & 1) : xso_rec(n - 1) + 1; }

NOXRAY int xso_fdr_start()
{
	return __xray_log_init_mode("xray-fdr", "func_duration_threshold_us=0") ==
		       XRAY_LOG_INITIALIZED && __xray_patch() == SUCCESS ? 0 : -1;
}
NOXRAY int xso_fdr_stop()
{
	return __xray_log_finalize() == XRAY_LOG_FINALIZED &&
		       __xray_log_flushLog() == XRAY_LOG_FLUSHED ? 0 : -1;
}
}
