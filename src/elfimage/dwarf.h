/* SPDX-License-Identifier: MIT */
/* Minimal DWARF 4 producer for JIT images: one compile unit per image,
 * a DW_TAG_subprogram per function, and a line program with one sequence
 * per function, in the image's own (vaddr == file offset) address space.
 *
 * Inline chains (pg_code_inline) become nested DW_TAG_inlined_subroutine
 * children of the function's subprogram, each referring (CU-relative
 * ref4) to one abstract DW_TAG_subprogram (DW_AT_inline) per distinct
 * inlined function of the image; the abstract ones come first in the
 * unit, right after the compile unit's attributes.  They carry the name
 * as DW_AT_linkage_name too: binutils (addr2line, perf) names the
 * innermost frame by the ELF symbol around the address (the placed
 * function) unless the DIE has a linkage name.  An image without
 * inline chains gets exactly the tables it had before they existed (no
 * abbreviations for them either). */
#ifndef PG_ELFIMAGE_DWARF_H
#define PG_ELFIMAGE_DWARF_H

#include <perfgraft/code.h>
#include "util/util.h"

struct pg_dwarf {
	unsigned addr_size;
	struct pg_buf dies;	/* subprogram DIEs */
	struct pg_buf prog;	/* line program opcodes */
	struct pg_strmap files;
	/* inline chains (all empty for an image without them) */
	struct pg_buf abstr;	/* abstract subprograms, by first use */
	struct pg_strmap inl_funcs;	/* inlined function name -> index */
	uint32_t *abs_off;	/* by index: offset in abstr */
	size_t abs_cap;
	struct pg_dwarf_ref { size_t at; uint32_t off; } *refs;	/* abstract
				 * origins in dies, patched by pg_dwarf_finish() */
	size_t nrefs, refs_cap;
	/* sections, valid after pg_dwarf_finish() */
	struct pg_buf abbrev, info, line, aranges;
	char **owned;		/* strings freed with the tables */
	size_t nowned, owned_cap;
};

/* Takes ownership of s (freed by pg_dwarf_free); -ENOMEM leaves it to the caller. */
int pg_dwarf_own(struct pg_dwarf *dw, char *s);

/* Inlined frames kept per chain: deeper chains keep their innermost. */
#define PG_DWARF_MAX_INLINE_DEPTH 64

/* What pg_dwarf_add_func() made of a function's inline chains. */
struct pg_dwarf_inl_stats {
	size_t dies;		/* DW_TAG_inlined_subroutine entries written */
	size_t skipped;		/* chains left out as invalid ... */
	const char *why;	/* ... the first one's reason */
	size_t capped;		/* chains cut to PG_DWARF_MAX_INLINE_DEPTH
				 * inlined frames (their innermost) */
};

void pg_dwarf_init(struct pg_dwarf *dw, bool big_endian, unsigned addr_size);
/* A function at vaddr: its subprogram, its rows (the model's: sorted,
 * inside the code; file names must live until the tables are freed) as a
 * line sequence, and its inline chains as inlined subroutines (function
 * and file names must live as long).  Chains are checked here: one with
 * fewer than 2 frames, a frame without a function, an empty range, a
 * range not inside the code or not after the previous chain kept is left
 * out; *st (zeroed first) says what was left out or cut. */
int pg_dwarf_add_func(struct pg_dwarf *dw, const char *name, uint64_t vaddr,
		      uint64_t size, const struct pg_code_line *lines, size_t nlines,
		      const struct pg_code_inline *inl, size_t ninl,
		      struct pg_dwarf_inl_stats *st);
int pg_dwarf_finish(struct pg_dwarf *dw, const char *cu_name,
		    uint64_t low_pc, uint64_t high_pc);
void pg_dwarf_free(struct pg_dwarf *dw);

#endif
