/* SPDX-License-Identifier: MIT */
/* Minimal DWARF 4 producer for JIT images: one compile unit per image,
 * a DW_TAG_subprogram per function, and a line program with one sequence
 * per function, in the image's own (vaddr == file offset) address space. */
#ifndef PG_ELFIMAGE_DWARF_H
#define PG_ELFIMAGE_DWARF_H

#include <perfgraft/code.h>
#include "util/util.h"

struct pg_dwarf {
	unsigned addr_size;
	struct pg_buf dies;	/* subprogram DIEs */
	struct pg_buf prog;	/* line program opcodes */
	struct pg_strmap files;
	/* sections, valid after pg_dwarf_finish() */
	struct pg_buf abbrev, info, line, aranges;
	char **owned;		/* strings freed with the tables */
	size_t nowned, owned_cap;
};

/* Takes ownership of s (freed by pg_dwarf_free); -ENOMEM leaves it to the caller. */
int pg_dwarf_own(struct pg_dwarf *dw, char *s);

void pg_dwarf_init(struct pg_dwarf *dw, bool big_endian, unsigned addr_size);
/* A function at vaddr: its subprogram, its rows (the model's: sorted,
 * inside the code; file names must live until the tables are freed) as a
 * line sequence, and its inline chains as inlined subroutines. */
int pg_dwarf_add_func(struct pg_dwarf *dw, const char *name, uint64_t vaddr,
		      uint64_t size, const struct pg_code_line *lines, size_t nlines,
		      const struct pg_code_inline *inl, size_t ninl);
int pg_dwarf_finish(struct pg_dwarf *dw, const char *cu_name,
		    uint64_t low_pc, uint64_t high_pc);
void pg_dwarf_free(struct pg_dwarf *dw);

#endif
