/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <dwarf.h>

#include "elfimage/dwarf.h"

#define LINE_BASE (-5)
#define LINE_RANGE 14
#define OPCODE_BASE 13
#define ABBREV_CU 1
#define ABBREV_SUB 2
/* only in images with inline chains: */
#define ABBREV_SUB_KIDS 3	/* a subprogram with inlined subroutines */
#define ABBREV_ABSTRACT 4	/* an inlined function's abstract instance */
#define ABBREV_INL_KIDS 5	/* an inlined subroutine with inlined ones */
#define ABBREV_INL 6		/* one without */
/* bytes of DIEs one function's chains may add (DWARF32 offsets and ref4
 * stay far from overflowing); the chains after that are left out */
#define INL_BYTES_LIMIT (256u << 20)
/* an inlined function's name, as the builder's limit for placed ones:
 * a chain adds at most 64 of them, twice each, so one function stays far
 * below the 32-bit offsets whatever the input */
#define INL_NAME_LIMIT (1u << 20)
/* what damaged (dropped) file names are shown as */
#define UNKNOWN_FILE "??"

void pg_dwarf_init(struct pg_dwarf *dw, bool big_endian, unsigned addr_size)
{
	memset(dw, 0, sizeof(*dw));
	dw->addr_size = addr_size;
	dw->dies.big_endian = dw->prog.big_endian = big_endian;
	dw->abbrev.big_endian = dw->info.big_endian = dw->line.big_endian = big_endian;
	dw->aranges.big_endian = dw->abstr.big_endian = big_endian;
}

void pg_dwarf_free(struct pg_dwarf *dw)
{
	pg_buf_free(&dw->dies);
	pg_buf_free(&dw->prog);
	pg_buf_free(&dw->abbrev);
	pg_buf_free(&dw->info);
	pg_buf_free(&dw->line);
	pg_buf_free(&dw->aranges);
	pg_strmap_free(&dw->files);
	pg_buf_free(&dw->abstr);
	pg_strmap_free(&dw->inl_funcs);
	free(dw->abs_off);
	dw->abs_off = NULL;
	free(dw->refs);
	dw->refs = NULL;
	for (size_t i = 0; i < dw->nowned; i++)
		free(dw->owned[i]);
	free(dw->owned);
	dw->owned = NULL;
}

int pg_dwarf_own(struct pg_dwarf *dw, char *s)
{
	if (!pg_grow((void **)&dw->owned, &dw->owned_cap, dw->nowned + 1, sizeof(*dw->owned)))
		return -ENOMEM;
	dw->owned[dw->nowned++] = s;
	return 0;
}

static size_t uleb_len(uint64_t v)
{
	size_t n = 1;

	while (v >>= 7)
		n++;
	return n;
}

static void ext_op(struct pg_buf *b, uint8_t op, size_t len)
{
	pg_buf_u8(b, 0);
	pg_buf_uleb(b, len + 1);
	pg_buf_u8(b, op);
}

/* The function's rows as one line sequence. */
static int add_lines(struct pg_dwarf *dw, uint64_t vaddr, uint64_t size,
		     const struct pg_code_line *lines, size_t nlines)
{
	struct pg_buf *p = &dw->prog;
	const char *last_file = NULL;	/* interned once per run of one name */
	long last_idx = -1;
	uint64_t cur_addr = vaddr;
	int64_t cur_line = 1;
	uint32_t cur_col = 0;
	long cur_file = 1;

	if (!nlines)
		return 0;
	ext_op(p, DW_LNE_set_address, dw->addr_size);
	pg_buf_uaddr(p, vaddr, dw->addr_size);
	for (size_t i = 0; i < nlines; i++) {
		const struct pg_code_line *ln = &lines[i];
		/* an empty name would end DWARF 4's file table */
		const char *file = ln->file && ln->file[0] ? ln->file : UNKNOWN_FILE;
		uint64_t addr = vaddr + ln->off, adv;
		int64_t dline;
		long idx;
		bool added;

		if (file == last_file) {
			idx = last_idx;
		} else {
			idx = pg_strmap_intern(&dw->files, file, &added);
			if (idx < 0)
				return -ENOMEM;
			last_file = file;
			last_idx = idx;
		}
		if (idx + 1 != cur_file) {
			pg_buf_u8(p, DW_LNS_set_file);
			pg_buf_uleb(p, (uint64_t)idx + 1);
			cur_file = idx + 1;
		}
		if (ln->column != cur_col) {
			pg_buf_u8(p, DW_LNS_set_column);
			pg_buf_uleb(p, ln->column);
			cur_col = ln->column;
		}
		if (ln->discrim) {
			ext_op(p, DW_LNE_set_discriminator, uleb_len(ln->discrim));
			pg_buf_uleb(p, ln->discrim);
		}
		adv = addr - cur_addr;
		dline = (int64_t)ln->line - cur_line;
		if (dline >= LINE_BASE && dline < LINE_BASE + LINE_RANGE &&
		    adv <= (uint64_t)(255 - OPCODE_BASE - (dline - LINE_BASE)) / LINE_RANGE) {
			pg_buf_u8(p, (uint8_t)((dline - LINE_BASE) + LINE_RANGE * adv + OPCODE_BASE));
		} else {
			if (adv) {
				pg_buf_u8(p, DW_LNS_advance_pc);
				pg_buf_uleb(p, adv);
			}
			if (dline) {
				pg_buf_u8(p, DW_LNS_advance_line);
				pg_buf_sleb(p, dline);
			}
			pg_buf_u8(p, DW_LNS_copy);
		}
		cur_addr = addr;
		cur_line = ln->line;
	}
	/* the last row covers the function to its end (perf's stops at the
	 * last entry, leaving the tail without a line) */
	if (vaddr + size > cur_addr) {
		pg_buf_u8(p, DW_LNS_advance_pc);
		pg_buf_uleb(p, vaddr + size - cur_addr);
	}
	ext_op(p, DW_LNE_end_sequence, 0);
	return p->oom ? -ENOMEM : 0;
}

/* Why chain c cannot be described (NULL: it can), given the code's size
 * and where the previous chain kept ends; top is the number of inlined
 * frames used (PG_DWARF_MAX_INLINE_DEPTH at most). */
static const char *chain_invalid(const struct pg_code_inline *c, uint64_t size,
				 uint64_t prev_end, uint32_t *top)
{
	if (c->nframes < 2 || !c->frames)
		return "fewer than 2 frames";
	if (!c->len)
		return "an empty range";
	if (c->off >= size || c->len > size - c->off)
		return "a range outside the code";
	if (c->off < prev_end)
		return "a range overlapping or before an earlier one";
	*top = c->nframes - 1;
	if (*top > PG_DWARF_MAX_INLINE_DEPTH)
		*top = PG_DWARF_MAX_INLINE_DEPTH;
	for (uint32_t k = 0; k < *top; k++) {
		if (!c->frames[k].func)
			return "a frame without a function";
		if (strnlen(c->frames[k].func, INL_NAME_LIMIT + 1) > INL_NAME_LIMIT)
			return "a function name over 1 MiB";
	}
	return NULL;
}

static long file_index(struct pg_dwarf *dw, const char *file)
{
	bool added;

	/* an empty name would end DWARF 4's file table */
	return pg_strmap_intern(&dw->files, file && file[0] ? file : UNKNOWN_FILE, &added);
}

/* The index of func's abstract subprogram, written at its first use. */
static long abstract_of(struct pg_dwarf *dw, const char *func)
{
	bool added;
	long idx = pg_strmap_intern(&dw->inl_funcs, func, &added);

	if (idx < 0 || !added)
		return idx;
	if (!pg_grow((void **)&dw->abs_off, &dw->abs_cap, (size_t)idx + 1, sizeof(*dw->abs_off)))
		return -1;
	dw->abs_off[idx] = (uint32_t)dw->abstr.len;
	pg_buf_uleb(&dw->abstr, ABBREV_ABSTRACT);
	pg_buf_str(&dw->abstr, func);
	pg_buf_str(&dw->abstr, func);
	pg_buf_u8(&dw->abstr, DW_INL_inlined);
	return idx;
}

/* An inlined subroutine being built: one level of the open nest. */
struct inl_die {
	uint32_t abs;		/* abstract subprogram index */
	uint32_t file;		/* call file index (0-based) */
	uint32_t line;		/* call line */
	uint64_t lo, hi;	/* offsets in the function */
	size_t hp_at;		/* where its high_pc is, once written */
	bool written;		/* written (with children) before its end */
};

static int write_inl(struct pg_dwarf *dw, struct inl_die *e, uint64_t vaddr, bool kids)
{
	struct pg_buf *d = &dw->dies;

	if (!pg_grow((void **)&dw->refs, &dw->refs_cap, dw->nrefs + 1, sizeof(*dw->refs)))
		return -ENOMEM;
	pg_buf_uleb(d, kids ? ABBREV_INL_KIDS : ABBREV_INL);
	dw->refs[dw->nrefs].at = d->len;
	dw->refs[dw->nrefs++].off = dw->abs_off[e->abs];
	pg_buf_u32(d, 0);		/* abstract_origin, by pg_dwarf_finish() */
	pg_buf_uaddr(d, vaddr + e->lo, dw->addr_size);
	e->hp_at = d->len;
	pg_buf_u32(d, (uint32_t)(e->hi - e->lo));
	pg_buf_uleb(d, (uint64_t)e->file + 1);
	pg_buf_uleb(d, e->line);
	e->written = kids;
	return d->oom ? -ENOMEM : 0;
}

/* Ends an open level: a leaf is written whole now, a DIE written with
 * children gets its final range and the end of its children. */
static int close_inl(struct pg_dwarf *dw, struct inl_die *e, uint64_t vaddr)
{
	if (!e->written)
		return write_inl(dw, e, vaddr, false);
	pg_buf_put32(&dw->dies, e->hp_at, (uint32_t)(e->hi - e->lo));
	pg_buf_u8(&dw->dies, 0);
	return dw->dies.oom ? -ENOMEM : 0;
}

/* The chains as nested inlined subroutines: a chain's levels that are
 * the same (function and call site) as those of the chain right before it
 * (adjacent) extend that chain's DIEs, the others open new ones. */
static int add_inlines(struct pg_dwarf *dw, uint64_t vaddr, uint64_t size,
		       const struct pg_code_inline *inl, size_t ninl,
		       struct pg_dwarf_inl_stats *st)
{
	struct inl_die open[PG_DWARF_MAX_INLINE_DEPTH];
	uint32_t depth = 0;
	uint64_t prev_end = 0;
	size_t dies0 = dw->dies.len, abstr0 = dw->abstr.len;
	int ret;

	for (size_t i = 0; i < ninl; i++) {
		const struct pg_code_inline *c = &inl[i];
		const char *why;
		uint32_t top = 0, m = 0;

		if (dw->dies.len - dies0 + dw->abstr.len - abstr0 > INL_BYTES_LIMIT)
			why = "too many inline entries for one function";
		else
			why = chain_invalid(c, size, prev_end, &top);
		if (why) {
			if (!st->skipped++)
				st->why = why;
			continue;
		}
		if (top < c->nframes - 1)
			st->capped++;
		/* level L (0: outermost) is frames[top - 1 - L], called at
		 * frames[top - L] */
		for (; m < depth && m < top && c->off == prev_end; m++) {
			const struct pg_code_frame *f = &c->frames[top - 1 - m];
			const struct pg_code_frame *at = &c->frames[top - m];
			long a = abstract_of(dw, f->func), fi = file_index(dw, at->file);

			if (a < 0 || fi < 0)
				return -ENOMEM;
			if (open[m].abs != (uint32_t)a || open[m].file != (uint32_t)fi ||
			    open[m].line != at->line)
				break;
		}
		while (depth > m)
			if ((ret = close_inl(dw, &open[--depth], vaddr)))
				return ret;
		for (uint32_t k = 0; k < m; k++)
			open[k].hi = c->off + c->len;
		for (; depth < top; depth++) {
			const struct pg_code_frame *f = &c->frames[top - 1 - depth];
			const struct pg_code_frame *at = &c->frames[top - depth];
			long a = abstract_of(dw, f->func), fi = file_index(dw, at->file);

			if (a < 0 || fi < 0)
				return -ENOMEM;
			/* the parent now has a child: written before it */
			if (depth && !open[depth - 1].written &&
			    (ret = write_inl(dw, &open[depth - 1], vaddr, true)))
				return ret;
			open[depth] = (struct inl_die){ .abs = (uint32_t)a, .file = (uint32_t)fi,
				.line = at->line, .lo = c->off, .hi = c->off + c->len };
		}
		prev_end = c->off + c->len;
	}
	while (depth)
		if ((ret = close_inl(dw, &open[--depth], vaddr)))
			return ret;
	return dw->abstr.oom ? -ENOMEM : 0;
}

int pg_dwarf_add_func(struct pg_dwarf *dw, const char *name, uint64_t vaddr,
		      uint64_t size, const struct pg_code_line *lines, size_t nlines,
		      const struct pg_code_inline *inl, size_t ninl,
		      struct pg_dwarf_inl_stats *st)
{
	size_t refs0 = dw->nrefs, at = dw->dies.len;
	int ret;

	memset(st, 0, sizeof(*st));
	/* a subprogram without children; made one with them below if any
	 * chain gives an inlined subroutine (both codes are one byte) */
	pg_buf_uleb(&dw->dies, ABBREV_SUB);
	pg_buf_str(&dw->dies, name);
	pg_buf_uaddr(&dw->dies, vaddr, dw->addr_size);
	pg_buf_u32(&dw->dies, (uint32_t)size);
	ret = add_lines(dw, vaddr, size, lines, nlines);
	if (!ret && ninl)
		ret = add_inlines(dw, vaddr, size, inl, ninl, st);
	st->dies = dw->nrefs - refs0;
	if (st->dies && !dw->dies.oom) {
		dw->dies.p[at] = ABBREV_SUB_KIDS;
		pg_buf_u8(&dw->dies, 0);	/* end of its children */
	}
	if (ret)
		return ret;
	return dw->dies.oom ? -ENOMEM : 0;
}

static void abbrev_attr(struct pg_buf *b, unsigned at, unsigned form)
{
	pg_buf_uleb(b, at);
	pg_buf_uleb(b, form);
}

int pg_dwarf_finish(struct pg_dwarf *dw, const char *cu_name,
		    uint64_t low_pc, uint64_t high_pc)
{
	struct pg_buf *a = &dw->abbrev, *in = &dw->info, *l = &dw->line;
	size_t hl_at, hl_start;

	pg_buf_uleb(a, ABBREV_CU);
	pg_buf_uleb(a, DW_TAG_compile_unit);
	pg_buf_u8(a, DW_CHILDREN_yes);
	abbrev_attr(a, DW_AT_producer, DW_FORM_string);
	abbrev_attr(a, DW_AT_name, DW_FORM_string);
	abbrev_attr(a, DW_AT_stmt_list, DW_FORM_sec_offset);
	abbrev_attr(a, DW_AT_low_pc, DW_FORM_addr);
	abbrev_attr(a, DW_AT_high_pc, DW_FORM_data4);
	abbrev_attr(a, 0, 0);
	/* a placed function, and (with inline chains) one with children */
	for (int kids = 0; kids <= (dw->nrefs ? 1 : 0); kids++) {
		pg_buf_uleb(a, kids ? ABBREV_SUB_KIDS : ABBREV_SUB);
		pg_buf_uleb(a, DW_TAG_subprogram);
		pg_buf_u8(a, kids ? DW_CHILDREN_yes : DW_CHILDREN_no);
		abbrev_attr(a, DW_AT_name, DW_FORM_string);
		abbrev_attr(a, DW_AT_low_pc, DW_FORM_addr);
		abbrev_attr(a, DW_AT_high_pc, DW_FORM_data4);
		abbrev_attr(a, 0, 0);
	}
	if (dw->nrefs) {
		pg_buf_uleb(a, ABBREV_ABSTRACT);
		pg_buf_uleb(a, DW_TAG_subprogram);
		pg_buf_u8(a, DW_CHILDREN_no);
		abbrev_attr(a, DW_AT_name, DW_FORM_string);
		abbrev_attr(a, DW_AT_linkage_name, DW_FORM_string);
		abbrev_attr(a, DW_AT_inline, DW_FORM_data1);
		abbrev_attr(a, 0, 0);
		for (int kids = 1; kids >= 0; kids--) {
			pg_buf_uleb(a, kids ? ABBREV_INL_KIDS : ABBREV_INL);
			pg_buf_uleb(a, DW_TAG_inlined_subroutine);
			pg_buf_u8(a, kids ? DW_CHILDREN_yes : DW_CHILDREN_no);
			abbrev_attr(a, DW_AT_abstract_origin, DW_FORM_ref4);
			abbrev_attr(a, DW_AT_low_pc, DW_FORM_addr);
			abbrev_attr(a, DW_AT_high_pc, DW_FORM_data4);
			abbrev_attr(a, DW_AT_call_file, DW_FORM_udata);
			abbrev_attr(a, DW_AT_call_line, DW_FORM_udata);
			abbrev_attr(a, 0, 0);
		}
	}
	pg_buf_u8(a, 0);

	pg_buf_u32(in, 0);		/* unit_length, patched below */
	pg_buf_u16(in, 4);
	pg_buf_u32(in, 0);		/* debug_abbrev_offset */
	pg_buf_u8(in, (uint8_t)dw->addr_size);
	pg_buf_uleb(in, ABBREV_CU);
	pg_buf_str(in, "perfgraft " PG_VERSION);
	pg_buf_str(in, cu_name);
	pg_buf_u32(in, 0);		/* stmt_list: the only line table */
	pg_buf_uaddr(in, low_pc, dw->addr_size);
	pg_buf_u32(in, (uint32_t)(high_pc - low_pc));
	if (dw->nrefs) {
		/* the abstract subprograms, then the concrete ones referring to
		 * them by offset from the unit's start (this one's: 0) */
		size_t abs_at = in->len, dies_at;

		pg_buf_add(in, dw->abstr.p, dw->abstr.len);
		dies_at = in->len;
		pg_buf_add(in, dw->dies.p, dw->dies.len);
		for (size_t i = 0; i < dw->nrefs; i++)
			pg_buf_put32(in, dies_at + dw->refs[i].at,
				     (uint32_t)(abs_at + dw->refs[i].off));
	} else {
		pg_buf_add(in, dw->dies.p, dw->dies.len);
	}
	pg_buf_u8(in, 0);		/* end of children */
	pg_buf_put32(in, 0, (uint32_t)(in->len - 4));

	pg_buf_u32(l, 0);		/* unit_length */
	pg_buf_u16(l, 4);
	hl_at = l->len;
	pg_buf_u32(l, 0);		/* header_length */
	hl_start = l->len;
	pg_buf_u8(l, 1);		/* minimum_instruction_length */
	pg_buf_u8(l, 1);		/* maximum_operations_per_instruction */
	pg_buf_u8(l, 1);		/* default_is_stmt */
	pg_buf_u8(l, (uint8_t)LINE_BASE);
	pg_buf_u8(l, LINE_RANGE);
	pg_buf_u8(l, OPCODE_BASE);
	{
		static const uint8_t std_len[OPCODE_BASE - 1] = { 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1 };

		pg_buf_add(l, std_len, sizeof(std_len));
	}
	pg_buf_u8(l, 0);		/* no include directories */
	for (size_t i = 0; i < dw->files.n; i++) {
		pg_buf_str(l, dw->files.keys[i]);
		pg_buf_uleb(l, 0);	/* directory: the compilation's */
		pg_buf_uleb(l, 0);	/* mtime */
		pg_buf_uleb(l, 0);	/* length */
	}
	pg_buf_u8(l, 0);
	pg_buf_put32(l, hl_at, (uint32_t)(l->len - hl_start));
	pg_buf_add(l, dw->prog.p, dw->prog.len);
	pg_buf_put32(l, 0, (uint32_t)(l->len - 4));

	/* .debug_aranges: libdw before 0.192 finds a CU by address only here */
	{
		struct pg_buf *ar = &dw->aranges;
		unsigned tuple = 2 * dw->addr_size;

		pg_buf_u32(ar, 0);
		pg_buf_u16(ar, 2);
		pg_buf_u32(ar, 0);	/* the CU at .debug_info offset 0 */
		pg_buf_u8(ar, (uint8_t)dw->addr_size);
		pg_buf_u8(ar, 0);	/* segment selector size */
		while (ar->len % tuple)
			pg_buf_u8(ar, 0);
		pg_buf_uaddr(ar, low_pc, dw->addr_size);
		pg_buf_uaddr(ar, high_pc - low_pc, dw->addr_size);
		pg_buf_uaddr(ar, 0, dw->addr_size);
		pg_buf_uaddr(ar, 0, dw->addr_size);
		pg_buf_put32(ar, 0, (uint32_t)(ar->len - 4));
	}
	return (a->oom || in->oom || l->oom || dw->dies.oom || dw->prog.oom ||
		dw->aranges.oom || dw->abstr.oom) ? -ENOMEM : 0;
}
