/* SPDX-License-Identifier: MIT */
/* Repair of the file names node damages in DEBUG_INFO, shared by the
 * image builder and the symbolizer so both name the same files. */
#ifndef PG_JITDUMP_RECOVER_H
#define PG_JITDUMP_RECOVER_H

#include <perfgraft/jitdump.h>

/* node overwrites the first bytes of a script's file name (length kept);
 * V8 function names end with "<script>:<line>:<column>".  When a damaged
 * name has the length of the function's own script and its intact tail
 * matches, it is that script.  Returns the LOAD's lines with those names
 * replaced (in *scratch, grown as needed) and the recovered script name in
 * *script (malloc'ed, the caller owns it), or the LOAD's own lines and
 * *script NULL when nothing was recovered or memory ran out. */
const struct pg_jd_line *pg_jd_recover_names(const struct pg_jd_header *hdr,
					     const struct pg_jd_load *ld,
					     struct pg_jd_line **scratch,
					     size_t *scratch_cap, char **script);

#endif
