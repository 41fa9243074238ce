/* SPDX-License-Identifier: MIT */
/* Pieces of the perf script line parser that the CLI's filter shares. */
#ifndef PG_SYMBOLIZE_SCRIPT_H
#define PG_SYMBOLIZE_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>

/* Whether s[0, end) ends with " (DSO)", the DSO's parentheses matched
 * from the end (names hold "(deleted)"); *open gets the index of its '('. */
bool pg_script_dso(const char *s, size_t end, size_t *open);

#endif
