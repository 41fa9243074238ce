/* SPDX-License-Identifier: MIT */
/* JIT code into perf.data: what perf inject --jit does, with the images
 * of elfimage.h and the injected MMAP2 records merged in time order. */
#ifndef PERFGRAFT_INJECT_H
#define PERFGRAFT_INJECT_H

#include <perfgraft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

enum pg_cfi_layout {
	/* PT_LOAD at 0: perf before 5.19, perf with the 2023 libunwind
	 * base-address fix (6.8+, and stable builds that carry it, such as
	 * Debian 12's 6.1.187), and libdw-based unwinding */
	PG_CFI_LAYOUT_STANDARD,
	/* perf 5.19 .. 6.7 with libunwind and without that fix */
	PG_CFI_LAYOUT_PERF_5_19,
};

struct pg_inject_opts {
	const char *input;	/* path or "-" */
	const char *output;	/* path or "-" (pipe mode) */
	const char *image_dir;	/* NULL: OUTPUT.d (perf.jit.data.d for "-") */
	const char *const *jitdumps;	/* dumps given by hand, injected for their pid */
	size_t njitdumps;
	const char *jitdump_dir;	/* where to look for dumps that moved */
	bool per_function;
	enum pg_cfi_layout cfi_layout;
	/* called with the fraction of the input done, at most 4 times/s */
	void (*progress)(void *ctx, double done);
	void *progress_ctx;
};

struct pg_inject_stats {
	uint64_t records_in, records_out;
	uint64_t dumps, dumps_failed;
	uint64_t loads, moves, mmaps_injected;
	uint64_t markers_dropped, anon_dropped;
	uint64_t images, image_bytes;
	uint64_t output_bytes;
	bool cfi_compat;
	char image_dir[4096];
};

int pg_inject(const struct pg_inject_opts *opts, struct pg_diag *diag,
	      struct pg_inject_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
