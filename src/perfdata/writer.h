/* SPDX-License-Identifier: MIT */
/* The perf.data writer's side for the library's converters: attrs, header
 * features and records that perfdata/synth.h encodes, handed to a pg_pdw
 * in the byte order it was opened with.  The writer uses the encoder,
 * never the reverse (synth.h knows no writer).  Internal: the public
 * writer is in <perfgraft/perfdata.h>. */
#ifndef PG_PERFDATA_WRITER_H
#define PG_PERFDATA_WRITER_H

#include <perfgraft/perfdata.h>
#include "perfdata/synth.h"

/* Adds the n attrs with their ids (pg_pdw_add_attr). */
int pg_pdw_add_attrs(pg_pdw *w, const struct pg_synth_attr *a, size_t n);
/* The EVENT_DESC feature naming the n attrs. */
int pg_pdw_add_event_desc(pg_pdw *w, const struct pg_synth_attr *a, size_t n);
/* A string feature (HOSTNAME, OSRELEASE, VERSION, ARCH, ...): perf's
 * u32 length + NUL-padded string of 64-byte multiples. */
int pg_pdw_add_str_feature(pg_pdw *w, unsigned bit, const char *str);

/* Records written in rounds: a FINISHED_ROUND after every `every` of
 * them.  The caller fills w and every (0: rounds only when asked). */
struct pg_pdw_rounds {
	pg_pdw *w;
	uint64_t every;
	uint64_t since;		/* records since the last FINISHED_ROUND */
};

/* A FINISHED_ROUND now (the count restarts). */
int pg_pdw_round(struct pg_pdw_rounds *rs);
/* Writes the record r holds (after pg_rec_end), and a FINISHED_ROUND
 * after every `every`-th record written this way.  Inline: it is a
 * converter's hot path. */
static inline int pg_pdw_write_rec(struct pg_pdw_rounds *rs, const struct pg_rec *r)
{
	int ret = pg_pdw_write(rs->w, r->p, r->len, NULL, 0);

	if (!ret && rs->every && ++rs->since >= rs->every)
		ret = pg_pdw_round(rs);
	return ret;
}

#endif
