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
/* what damaged (dropped) file names are shown as */
#define UNKNOWN_FILE "??"

void pg_dwarf_init(struct pg_dwarf *dw, bool big_endian, unsigned addr_size)
{
	memset(dw, 0, sizeof(*dw));
	dw->addr_size = addr_size;
	dw->dies.big_endian = dw->prog.big_endian = big_endian;
	dw->abbrev.big_endian = dw->info.big_endian = dw->line.big_endian = big_endian;
	dw->aranges.big_endian = big_endian;
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

int pg_dwarf_add_func(struct pg_dwarf *dw, const char *name, uint64_t vaddr,
		      uint64_t size, const struct pg_code_line *lines, size_t nlines,
		      const struct pg_code_inline *inl, size_t ninl)
{
	struct pg_buf *p = &dw->prog;
	const char *last_file = NULL;	/* interned once per run of one name */
	long last_idx = -1;
	uint64_t cur_addr = vaddr;
	int64_t cur_line = 1;
	uint32_t cur_col = 0;
	long cur_file = 1;

	(void)inl;
	(void)ninl;
	/* subprogram DIE */
	pg_buf_uleb(&dw->dies, ABBREV_SUB);
	pg_buf_str(&dw->dies, name);
	pg_buf_uaddr(&dw->dies, vaddr, dw->addr_size);
	pg_buf_u32(&dw->dies, (uint32_t)size);

	if (!nlines)
		return dw->dies.oom ? -ENOMEM : 0;
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
	pg_buf_uleb(a, ABBREV_SUB);
	pg_buf_uleb(a, DW_TAG_subprogram);
	pg_buf_u8(a, DW_CHILDREN_no);
	abbrev_attr(a, DW_AT_name, DW_FORM_string);
	abbrev_attr(a, DW_AT_low_pc, DW_FORM_addr);
	abbrev_attr(a, DW_AT_high_pc, DW_FORM_data4);
	abbrev_attr(a, 0, 0);
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
	pg_buf_add(in, dw->dies.p, dw->dies.len);
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
		dw->aranges.oom) ? -ENOMEM : 0;
}
