/* SPDX-License-Identifier: MIT */
/* The code live at one time as the text perf-PID.map that perf (and every
 * tool that only reads perf maps) looks JIT addresses up in. */
#include <inttypes.h>
#include <string.h>

#include <perfgraft/symbolize.h>
#include "util/util.h"

struct writer {
	FILE *f;
	pg_symbolizer *sym;
	uint32_t pid;
	uint64_t time;
	uint64_t lines, pieces_cut, short_names;
};

/* A newline in a name would start a bogus line; perf splits the line at
 * the second blank and takes the rest, blanks included, as the name. */
static void put_name(FILE *f, const char *s)
{
	for (; *s; s++)
		putc_unlocked(*s == '\n' || *s == '\r' ? ' ' : *s, f);
}

static int write_line(void *ctx, const struct pg_sym *sym)
{
	struct writer *w = ctx;
	struct pg_sym whole;

	/* a piece is cut when it is not the whole function */
	if (sym->offset || (pg_symbolize(w->sym, w->pid, sym->start, w->time, &whole) == 1 &&
			    whole.size != sym->size))
		w->pieces_cut++;
	if (strlen(sym->name) < 3)
		w->short_names++;
	fprintf(w->f, "%" PRIx64 " %" PRIx64 " ", sym->start, sym->size);
	put_name(w->f, sym->name);
	putc_unlocked('\n', w->f);
	w->lines++;
	return 0;
}

int pg_perfmap_write(pg_symbolizer *s, uint32_t pid, uint64_t time, FILE *out,
		     struct pg_perfmap_stats *st)
{
	struct writer w = { .f = out, .sym = s, .pid = pid, .time = time };
	int ret;

	/* the live walk's "any" is the first pid added; the whole-function
	 * lookups of write_line must ask the same address space */
	if (pid == PG_SYM_ANY_PID && pg_symbolizer_pids(s, &w.pid, 1) == 0)
		w.pid = PG_SYM_ANY_PID;
	ret = pg_symbolizer_live(s, w.pid, time, write_line, &w);
	if (st) {
		struct pg_perfmap_stats v = { .lines = w.lines, .pieces_cut = w.pieces_cut,
					      .short_names = w.short_names };

		pg_sized_out(st, &v, sizeof(v));
	}
	return ret;
}
