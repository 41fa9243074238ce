/* SPDX-License-Identifier: MIT */
/* jitdump as code-model events.  The quirks of jitdump producers are
 * undone here and nowhere else:
 *  - V8 adds 0x40 (0x34 on 32-bit) to every line address: removed;
 *  - V8 writes the 1-based column where the discriminator goes: moved;
 *  - node damages the first bytes of script names: recovered (recover.c);
 *  - rows past their code are dropped; of the rows before it, the one
 *    nearest the start applies from the start (BeamAsm); rows sorted;
 *  - inline ranges (perfgraft's INLINE_INFO) that are empty, outside the
 *    code or out of order are dropped. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <perfgraft/jitdump.h>
#include "jitdump/recover.h"
#include "jitdump/source.h"

/* A row at most this far before its code may be the start's (BeamAsm);
 * as an offset computed modulo 2^64, "before" is [2^64 - this, 2^64). */
#define ROW_BEFORE_MAX 4096u
#define ROW_BEFORE_MAX_NEG (UINT64_MAX - ROW_BEFORE_MAX + 1)

struct jd_state {
	pg_jitdump *jd;
	struct pg_code_cfi cfi;
	struct pg_jd_line *scratch;	/* lines with recovered names */
	size_t scratch_cap;
	struct pg_code_inline *inl;	/* the current LOAD's chains */
	struct pg_code_frame *frames;
	size_t inl_cap, frames_cap;
};

static bool jd_probe(const void *buf, size_t len)
{
	return pg_jitdump_probe(buf, len);
}

static int jd_open(pg_code_source *src, const void *buf, size_t len)
{
	struct jd_state *s = calloc(1, sizeof(*s));
	const struct pg_jd_header *h;
	int ret;

	if (!s)
		return pg_err(src->diag, -ENOMEM, "%s: out of memory", src->path);
	ret = pg_jitdump_open_mem(buf, len, src->path, 0, src->diag, &s->jd);
	if (ret < 0) {
		free(s);
		return ret;
	}
	h = pg_jitdump_header(s->jd);
	src->proc = (struct pg_code_process){
		.pid = h->pid, .elf_mach = h->elf_mach, .big_endian = h->big_endian,
		.is_64bit = h->is_64bit, .timestamp = h->timestamp,
		.arch_time = (h->flags & PG_JITDUMP_FLAG_ARCH_TIMESTAMP) != 0,
	};
	src->state = s;
	return 0;
}

static void jd_close(pg_code_source *src)
{
	struct jd_state *s = src->state;

	if (!s)
		return;
	pg_jitdump_close(s->jd);
	free(s->scratch);
	free(s->inl);
	free(s->frames);
	free(s);
}

/* A file name perf can split: perf reads addr2line's "FILE:LINE" up to
 * the first ':', so a name with one shows as "file:0" (Deno names its
 * scripts file:///path/app.js, node its own modules node:internal/...).
 * A local file:// URL becomes its path (percent escapes decoded, but
 * never into a NUL, a control byte or a ':'); any other ':' is written
 * %3A, and a control byte '?'.  The name itself when it needs none of that; NULL on
 * OOM. */
static bool is_control(int c)
{
	return (unsigned char)c < 0x20 || c == 0x7f;
}

static bool needs_fix(const char *s, bool colon)
{
	for (; *s; s++)
		if ((colon && *s == ':') || is_control(*s))
			return true;
	return false;
}

static const char *perf_name(pg_code_source *src, const char *name)
{
	const char *p = name;
	bool url = false;
	char *out, *o;

	if (!name || !needs_fix(name, true))
		return name;
	if (!strncmp(name, "file:///", 8)) {
		p = name + 7;
		url = true;
	}
	out = malloc(3 * strlen(p) + 1);
	if (!out)
		return NULL;
	for (o = out; *p; p++) {
		int hi = url && p[0] == '%' ? pg_hexval(p[1]) : -1;
		int lo = hi >= 0 ? pg_hexval(p[2]) : -1, c = hi * 16 + lo;

		/* a ':' stays %3A, as anywhere else in a name */
		if (lo >= 0 && !is_control(c) && c != ':') {
			*o++ = (char)c;
			p += 2;
		} else if (*p == ':') {
			memcpy(o, "%3A", 3);
			o += 3;
		} else if (is_control(*p)) {
			*o++ = '?';	/* never a control byte in a name */
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	return pg_src_keep_string(src, out);
}

/* A symbol name without control bytes (each becomes '?'): perf prints
 * names as they are, and a terminal would act on them.  The name itself
 * when it has none; NULL on OOM. */
static const char *symbol_name(pg_code_source *src, const char *name)
{
	char *out;

	if (!needs_fix(name, false))
		return name;
	if (!(out = strdup(name)))
		return NULL;
	for (char *p = out; *p; p++)
		if (is_control(*p))
			*p = '?';
	return pg_src_keep_string(src, out);
}

static struct pg_code_line row(const struct pg_jd_header *h, const struct pg_jd_line *l,
			      uint64_t off, const char *file)
{
	return (struct pg_code_line){
		.off = off, .line = l->line, .file = file,
		.column = h->v8 ? l->discrim : 0,
		.discrim = h->v8 ? 0 : l->discrim,
	};
}

/* A row's file as the model has it: recovered (node), then as perf can
 * read it; the last name's answer is kept (rows repeat their file).
 * *file is NULL for a name damaged beyond repair (code.h's "unknown");
 * false on OOM. */
static bool row_file(pg_code_source *src, const struct pg_jd_line *l, const char *script,
		     const char *canon, const char **last_in, const char **last_out,
		     const char **file)
{
	const char *f = script && l->file == script ? canon : l->file;

	*file = NULL;
	if (!f)
		return true;
	if (f != *last_in) {
		*last_in = f;
		*last_out = perf_name(src, f);
	}
	*file = *last_out;
	return *file != NULL;
}

/* The LOAD's rows as offsets into its code, with what V8 and node did to
 * them undone.  Line 0 ("no source line", DWARF's meaning) is kept: its
 * bytes must not take the line before. */
static int jd_rows(pg_code_source *src, struct jd_state *s, const struct pg_jd_load *ld,
		   struct pg_code_event *ev)
{
	const struct pg_jd_header *h = pg_jitdump_header(s->jd);
	const struct pg_jd_line *lines;
	const char *canon = NULL;
	struct pg_code_line *out;
	uint64_t dropped = 0;
	char *script;
	size_t n = 0, before = SIZE_MAX;
	bool at_start = false;
	const char *file, *last_in = NULL, *last_out = NULL;
	size_t unnamed = 0;

	if (!ld->debug || !ld->debug->nr_lines)
		return 0;
	lines = pg_jd_recover_names(h, ld, &s->scratch, &s->scratch_cap, &script);
	if (script) {
		char *copy = strdup(script);

		canon = copy ? pg_src_keep_string(src, copy) : NULL;
		if (!canon) {
			free(script);
			return pg_err(src->diag, -ENOMEM, "%s: out of memory", src->path);
		}
		src->st.recovered_names++;
	}
	out = pg_src_rows(src, ld->debug->nr_lines);
	if (!out) {
		free(script);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ld->debug->nr_lines; i++) {
		const struct pg_jd_line *l = &lines[i];
		uint64_t off = l->addr - h->line_bias - ld->code_addr;

		if (off >= ROW_BEFORE_MAX_NEG) {
			/* BeamAsm puts a function's first row on the label
			 * ahead of its prologue (some 50 bytes): the row
			 * nearest the start (the later of equals) is the
			 * start's.  Farther rows describe other code. */
			if (before == SIZE_MAX || off >= lines[before].addr - h->line_bias - ld->code_addr)
				before = i;
			dropped++;
			continue;
		}
		if (off >= ld->code_size) {
			dropped++;
			continue;
		}
		at_start |= off == 0;
		unnamed += !l->file && l->damaged;
		if (!row_file(src, l, script, canon, &last_in, &last_out, &file))
			goto oom;
		out[n++] = row(h, l, off, file);
	}
	/* (code of size 0 has no start to give it) */
	if (before != SIZE_MAX && !at_start && ld->code_size) {
		const struct pg_jd_line *l = &lines[before];

		unnamed += !l->file && l->damaged;
		if (!row_file(src, l, script, canon, &last_in, &last_out, &file))
			goto oom;
		out[n++] = row(h, l, 0, file);
		dropped--;
	}
	free(script);
	/* the reader said the names were damaged; here is whether they came back */
	if (unnamed)
		pg_warn(src->diag, "%s: offset %llu: %zu line row%s of \"%s\" keep%s no file name: node damaged %s and the function's name does not give its script",
			src->path, (unsigned long long)ev->src_offset, unnamed, unnamed == 1 ? "" : "s",
			ev->name, unnamed == 1 ? "s" : "", unnamed == 1 ? "it" : "them");
	return pg_src_rows_done(src, ev, n, dropped);
oom:
	free(script);
	return pg_err(src->diag, -ENOMEM, "%s: out of memory", src->path);
}

/* The LOAD's inline chains (INLINE_INFO), as the model has them: ranges
 * inside the code, not empty, in order without overlap. */
static int jd_inlines(pg_code_source *src, struct jd_state *s, const struct pg_jd_load *ld,
		      struct pg_code_event *ev)
{
	const struct pg_jd_inline *in = ld->inl;
	size_t n = 0, nf = 0, total = 0, bad = 0;
	uint64_t end = 0;

	if (!in || !in->nranges)
		return 0;
	if (in->code_addr != ld->code_addr) {
		pg_warn(src->diag, "%s: offset %llu: INLINE_INFO is for code at 0x%llx, the LOAD after it is at 0x%llx; chains dropped",
			src->path, (unsigned long long)in->offset, (unsigned long long)in->code_addr,
			(unsigned long long)ld->code_addr);
		src->st.dropped_inlines += in->nranges;
		return 0;
	}
	for (size_t i = 0; i < in->nranges; i++)
		total += in->ranges[i].nframes;
	if (!pg_grow((void **)&s->inl, &s->inl_cap, in->nranges, sizeof(*s->inl)) ||
	    !pg_grow((void **)&s->frames, &s->frames_cap, total, sizeof(*s->frames)))
		return pg_err(src->diag, -ENOMEM, "%s: out of memory", src->path);
	for (size_t i = 0; i < in->nranges; i++) {
		const struct pg_jd_inline_range *r = &in->ranges[i];
		struct pg_code_inline *o;

		if (!r->len || r->off < end || (uint64_t)r->off + r->len > ld->code_size) {
			bad++;
			continue;
		}
		end = (uint64_t)r->off + r->len;
		o = &s->inl[n++];
		o->off = r->off;
		o->len = r->len;
		o->nframes = r->nframes;
		o->frames = &s->frames[nf];
		for (uint32_t k = 0; k < r->nframes; k++) {
			const struct pg_jd_frame *f = &r->frames[k];
			/* the same names as the rows' and the LOADs' */
			const char *func = symbol_name(src, f->func);
			const char *file = perf_name(src, f->file);

			if (!func || (f->file && !file))
				return pg_err(src->diag, -ENOMEM, "%s: out of memory", src->path);
			s->frames[nf++] = (struct pg_code_frame){ .func = func, .file = file,
								  .line = f->line };
		}
	}
	if (bad) {
		pg_warn(src->diag, "%s: offset %llu: INLINE_INFO has %zu range%s that %s empty, outside the code or out of order; dropped",
			src->path, (unsigned long long)in->offset, bad, bad == 1 ? "" : "s",
			bad == 1 ? "is" : "are");
		src->st.dropped_inlines += bad;
	}
	ev->inlines = n ? s->inl : NULL;
	ev->ninlines = n;
	src->st.inlines += n;
	return 0;
}

/* What the format itself counts (line tables and rows as read, before
 * any row is dropped; the tail cut off), asked for when stats are. */
static void jd_stats(const pg_code_source *src, struct pg_code_stats *st)
{
	const struct jd_state *s = src->state;
	struct pg_jitdump_stats js = { .sz = sizeof(js) };

	pg_jitdump_stats(s->jd, &js);
	st->line_tables = js.debug_infos - js.dropped_debug;
	st->lines = js.lines;
	st->truncated_bytes = js.truncated_bytes;
}

static int jd_next(pg_code_source *src, struct pg_code_event *ev)
{
	struct jd_state *s = src->state;
	struct pg_jd_record rec;
	int ret;

	while ((ret = pg_jitdump_next(s->jd, &rec)) > 0) {
		ev->time = rec.timestamp;
		ev->src_offset = rec.offset;
		if (rec.type == PG_JD_LOAD) {
			const struct pg_jd_load *ld = &rec.u.load;
			const struct pg_jd_unwind *u = ld->unwind;

			ev->kind = PG_CODE_LOAD;
			ev->pid = ld->pid;
			ev->tid = ld->tid;
			ev->id = ld->code_index;
			ev->addr = ld->code_addr;
			ev->size = ld->code_size;
			ev->name = symbol_name(src, ld->name);
			if (!ev->name)
				return pg_err(src->diag, -ENOMEM, "%s: out of memory", src->path);
			ev->code = ld->code;
			/* tables that map nothing describe no code of this LOAD */
			if (u && u->mapped_size && u->eh_frame_hdr_size) {
				s->cfi = (struct pg_code_cfi){
					.eh_frame = u->eh_frame, .eh_frame_size = u->eh_frame_size,
					.eh_frame_hdr = u->eh_frame_hdr,
					.eh_frame_hdr_size = u->eh_frame_hdr_size,
					.mapped_size = u->mapped_size,
				};
				ev->cfi = &s->cfi;
			}
			ret = jd_rows(src, s, ld, ev);
			if (ret >= 0)
				ret = jd_inlines(src, s, ld, ev);
			return ret < 0 ? ret : 1;
		}
		if (rec.type == PG_JD_MOVE) {
			const struct pg_jd_move *m = &rec.u.move;

			ev->kind = PG_CODE_MOVE;
			ev->pid = m->pid;
			ev->tid = m->tid;
			ev->id = m->code_index;
			ev->addr = m->new_code_addr;
			ev->old_addr = m->old_code_addr;
			ev->size = m->code_size;
			return 1;
		}
		if (rec.type == PG_JD_UNLOAD) {
			const struct pg_jd_unload *u = &rec.u.unload;

			ev->kind = PG_CODE_UNLOAD;
			ev->pid = u->pid;
			ev->tid = u->tid;
			ev->id = u->code_index;
			ev->addr = u->code_addr;
			ev->size = u->code_size;
			return 1;
		}
	}
	return ret;
}

const struct pg_src_reader pg_src_reader_jitdump = {
	.name = "jitdump",
	.probe = jd_probe,
	.open = jd_open,
	.next = jd_next,
	.stats = jd_stats,
	.close = jd_close,
};
