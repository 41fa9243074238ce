// SPDX-License-Identifier: MIT
// Launcher for libxso.so (see xso.cc): not instrumented, no XRay runtime of
// its own.  argv[1] == "fdr": FDR mode through the library's wrappers;
// otherwise basic mode (patch_premain=true, applied by the library's
// __xray_init when it is loaded).
#include <stdio.h>
#include <string.h>

int xso_entry(int n);
int xso_rec(int n);
int xso_fdr_start(void);
int xso_fdr_stop(void);

int main(int argc, char **argv)
{
	int fdr = argc > 1 && !strcmp(argv[1], "fdr");
	if (fdr && xso_fdr_start()) {
		fprintf(stderr, "%s: FDR start failed\n", argv[0]);
		return 1;
	}
	volatile int r = xso_entry(4) + xso_entry(3) + xso_rec(5);
	(void)r;
	if (fdr && xso_fdr_stop()) {
		fprintf(stderr, "%s: FDR flush failed\n", argv[0]);
		return 1;
	}
	return 0;
}
