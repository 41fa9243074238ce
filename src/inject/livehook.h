/* SPDX-License-Identifier: MIT */
#ifndef PG_INJECT_LIVEHOOK_H
#define PG_INJECT_LIVEHOOK_H

#include <stdbool.h>

/* A seam for fuzz/fuzz_inject.c, which cannot grow a dump between two
 * reads of a pipe-mode run any other way: when set, it is called each
 * time a live dump is looked at again, before its size is read (final:
 * the last look), and the looks are not spaced in time, so the reads a
 * run makes depend on its input alone.  Internal: libperfgraft.so does
 * not export it. */
extern void (*pg_inject_live_hook)(const char *path, bool final);

#endif
