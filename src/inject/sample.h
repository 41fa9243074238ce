/* SPDX-License-Identifier: MIT */
/* The words of a SAMPLE that may be user frames (src/inject/sample.c). */
#ifndef PG_INJECT_SAMPLE_H
#define PG_INJECT_SAMPLE_H

#include <perfgraft/perfdata.h>

/* sample_type bits perfdata.h does not name */
#define PERF_SAMPLE_READ_BIT (1u << 4)
#define PERF_SAMPLE_BRANCH_STACK_BIT (1u << 11)
#define PERF_SAMPLE_REGS_USER_BIT (1u << 12)
#define PERF_SAMPLE_STACK_USER_BIT (1u << 13)

/* The sample's ip and call chain, its user registers and every word of
 * its user stack copy (8 or 4 bytes as the process's), into *words
 * (grown as needed, capacity *cap).  A sample shorter than its attr says
 * gives what it has up to the first field that is not all there.
 * Returns the count, or -ENOMEM. */
long pg_inj_sample_words(const pg_perfdata *pd, const struct pg_pd_rec *r, bool is64,
			 uint64_t **words, size_t *cap);

#endif
