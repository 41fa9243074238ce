/* SPDX-License-Identifier: MIT */
/* The readers behind pg_code_source (include/perfgraft/code.h): each turns
 * its format into code-model events and normalises its producers' quirks
 * itself, so that nothing after it knows which format the code came from.
 * A new format is a reader file and its two lines in source.c. */
#ifndef PG_JITDUMP_SOURCE_H
#define PG_JITDUMP_SOURCE_H

#include <perfgraft/code.h>
#include "util/util.h"

struct pg_src_reader {
	const char *name;
	bool (*probe)(const void *buf, size_t len);
	/* opens over the source's bytes; sets src->proc and src->state */
	int (*open)(pg_code_source *src, const void *buf, size_t len);
	/* as pg_code_next() */
	int (*next)(pg_code_source *src, struct pg_code_event *ev);
	/* the counts only the format knows, into st (NULL: none) */
	void (*stats)(const pg_code_source *src, struct pg_code_stats *st);
	void (*close)(pg_code_source *src);
};

struct pg_code_source {
	const struct pg_src_reader *rd;
	void *state;		/* the reader's */
	struct pg_diag *diag;
	char *path;
	const uint8_t *map;	/* mapped by pg_code_open, else NULL */
	size_t size;
	struct pg_code_process proc;
	struct pg_code_stats st;
	/* the current LOAD's rows, and a scratch half for sorting them */
	struct pg_code_line *lines, *tmp;
	size_t lines_cap, tmp_cap;
	struct pg_strmap names;	/* strings readers made (recovered file names) */
	/* which ranges hold code, for each LOAD's since (source.c) */
	struct pg_paint held;
	uint64_t first_load, since;
	bool have_first;
};

/* Room for n rows of the current LOAD (NULL: out of memory, reported). */
struct pg_code_line *pg_src_rows(pg_code_source *src, size_t n);
/* The n rows filled in src->lines become ev's: sorted by offset (stable),
 * counted with the dropped ones.  Returns 0 or -ENOMEM (reported). */
int pg_src_rows_done(pg_code_source *src, struct pg_code_event *ev, size_t n,
		      uint64_t dropped);
/* s (malloc'ed, taken over) as a string that lives as long as the source;
 * equal strings are kept once.  NULL: out of memory (s freed). */
const char *pg_src_keep_string(pg_code_source *src, char *s);

#endif
