/* SPDX-License-Identifier: MIT */
/* perf script output with the JIT frames named: the rewriter behind
 * `perfgraft symbolize --perf-script`. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <perfgraft/symbolize.h>
#include "symbolize/script.h"
#include "util/util.h"

struct pg_script_rewriter {
	pg_symbolizer *sym;
	struct pg_script_opts o;
	bool symoff_seen;	/* auto: decided from a resolved frame */
	/* the last sample header's */
	uint32_t pid;
	bool has_pid;
	uint64_t time;
	uint64_t frames, named, left;
};

int pg_script_rewriter_new(pg_symbolizer *s, const struct pg_script_opts *opts,
			   pg_script_rewriter **out)
{
	struct pg_script_rewriter *r;

	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return pg_err(pg_sym_diag(s), -ENOMEM, "out of memory");
	if (pg_sized_opts(&r->o, sizeof(r->o), opts, false, "perf script rewriter",
			  pg_sym_diag(s)) < 0) {
		free(r);
		return -EINVAL;
	}
	if (r->o.symoff > PG_SCRIPT_SYMOFF_OFF) {
		int symoff = (int)r->o.symoff;

		free(r);
		return pg_err(pg_sym_diag(s), -EINVAL, "perf script rewriter: symoff %d is not a "
			      "PG_SCRIPT_SYMOFF_* value", symoff);
	}
	r->o.sz = sizeof(r->o);
	r->sym = s;
	*out = r;
	return 0;
}

void pg_script_rewriter_free(pg_script_rewriter *r)
{
	free(r);
}

void pg_script_rewriter_stats(const pg_script_rewriter *r, struct pg_script_stats *st)
{
	struct pg_script_stats v = { .frames = r->frames, .named = r->named, .left = r->left };

	pg_sized_out(st, &v, sizeof(v));
}

/* A resolved frame tells whether perf printed symbol offsets:
 * "<hex> sym+0x1f (dso)" or "<hex> sym (dso)", on a call-chain line or
 * at the end of a sample line (-G, or a recording without -g). */
static void learn_symoff(struct pg_script_rewriter *r, const char *l, size_t n)
{
	size_t end = n, open, sym_end;
	const char *p;

	if (r->o.symoff != PG_SCRIPT_SYMOFF_AUTO || r->symoff_seen)
		return;
	while (end && (l[end - 1] == '\n' || l[end - 1] == '\r' || l[end - 1] == ' '))
		end--;
	if (!pg_script_dso(l, end, &open) || open < 2)
		return;
	sym_end = open - 1;
	if (sym_end >= 9 && !memcmp(l + sym_end - 9, "[unknown]", 9))
		return;
	r->symoff_seen = true;
	for (p = l + sym_end - 1; p > l && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')); p--)
		;
	r->o.symoff = (p - l >= 2 && p[0] == 'x' && p[-1] == '0' && p[-2] == '+') ?
		PG_SCRIPT_SYMOFF_ON : PG_SCRIPT_SYMOFF_OFF;
}

int pg_script_rewrite_line(pg_script_rewriter *r, const char *l, size_t n, FILE *f)
{
	struct pg_script_line pl;
	struct pg_sym sym;
	uint32_t pid;
	int found;

	learn_symoff(r, l, n);
	if (!pg_script_parse_line(l, n, &pl) || (pl.header && !pl.frame)) {
		if (pl.header) {
			r->time = pl.time;
			r->has_pid = pl.has_pid;
			r->pid = pl.pid;
		}
		fwrite_unlocked(l, 1, n, f);
		return 0;
	}
	if (pl.header) {
		r->time = pl.time;
		r->has_pid = pl.has_pid;
		r->pid = pl.pid;
	}
	r->frames++;
	/* a pid without a dump (or a tid, from -F tid): any dump may know it */
	pid = r->has_pid && pg_symbolizer_has_pid(r->sym, r->pid) ? r->pid : PG_SYM_ANY_PID;
	if (r->o.use_pid)
		pid = r->o.pid;
	found = pg_symbolize(r->sym, pid, pl.addr, r->time ? r->time : PG_SYM_TIME_END, &sym);
	if (found < 0)
		return found;
	if (!found) {
		r->left++;
		fwrite_unlocked(l, 1, n, f);
		return 0;
	}
	r->named++;
	fwrite_unlocked(l, 1, pl.sym_at, f);
	pg_put_text(f, sym.name);
	if (r->o.symoff != PG_SCRIPT_SYMOFF_OFF) {
		putc_unlocked('+', f);
		pg_put_hex(f, sym.offset);
	}
	if (pl.has_dso) {
		size_t tail = pl.dso_at + pl.dso_len;

		fputs_unlocked(" (", f);
		pg_put_text(f, sym.dump);
		fwrite_unlocked(l + tail, 1, n - tail, f);
	} else {
		size_t tail = pl.sym_at + pl.sym_len;

		fwrite_unlocked(l + tail, 1, n - tail, f);
	}
	if (n && l[n - 1] != '\n')
		putc_unlocked('\n', f);
	if (!r->o.no_srcline && sym.file) {
		/* perf script -F +srcline: the line below the frame, the file's
		 * base name unless full_source_path */
		const char *base = strrchr(sym.file, '/');

		fputs_unlocked("  ", f);
		pg_put_text(f, r->o.full_source_path || !base ? sym.file : base + 1);
		putc_unlocked(':', f);
		pg_put_dec(f, sym.line);
		putc_unlocked('\n', f);
	}
	return 1;
}
