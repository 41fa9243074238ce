/* SPDX-License-Identifier: MIT */
/* Internals the symbolize module's files share: the perf script line
 * parser's DSO matcher (for the rewriter) and the symbolizer's diag. */
#ifndef PG_SYMBOLIZE_SCRIPT_H
#define PG_SYMBOLIZE_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <perfgraft/symbolize.h>

/* Whether s[0, end) ends with " (DSO)", the DSO's parentheses matched
 * from the end (names hold "(deleted)"); *open gets the index of its '('. */
bool pg_script_dso(const char *s, size_t end, size_t *open);

/* The pg_diag the symbolizer was made with: errors of the rewriter and
 * the perf-map writer go there too. */
struct pg_diag *pg_sym_diag(pg_symbolizer *s);

#endif
