/* SPDX-License-Identifier: MIT */
/* One image's contents and bytes: its functions as they are added
 * (symbols, DWARF through dwarf.c, the build-id's digest), where every
 * part goes (pg_emit_layout: every section offset is chosen here,
 * ELF_F_LAYOUT, so that vaddr == offset in the single PT_LOAD), the ELF
 * written through libelf, and the memory layout's code written into the
 * holes libelf leaves.  Apart from files.c: this part knows ELF, not the
 * directory its files go into. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <gelf.h>
#include <libelf.h>
#include <zlib.h>

#include "elfimage/builder.h"

static const char *const sec_names[SEC_COUNT] = {
	[SEC_NOTE] = ".note.gnu.build-id", [SEC_TEXT] = ".text",
	[SEC_EH_FRAME] = ".eh_frame", [SEC_EH_FRAME_HDR] = ".eh_frame_hdr",
	[SEC_ABBREV] = ".debug_abbrev", [SEC_INFO] = ".debug_info",
	[SEC_LINE] = ".debug_line", [SEC_ARANGES] = ".debug_aranges", [SEC_SYMTAB] = ".symtab",
	[SEC_STRTAB] = ".strtab", [SEC_SHSTRTAB] = ".shstrtab",
};

uint64_t pg_emit_headers_end(const struct pg_elfset *set)
{
	GElf_Half ehsz = set->hdr.is_64bit ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	GElf_Half phsz = set->hdr.is_64bit ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);

	/* Ehdr, 3 Phdrs, then the 36-byte build-id note */
	return pg_align(ehsz + 3u * phsz, 4) + 12 + 4 + BUILD_ID_SIZE;
}

/* One warning per LOAD for the inline chains its DWARF leaves out or cuts. */
static void inline_warning(pg_elfset *set, const struct pg_code_event *ld,
			   const struct pg_dwarf_inl_stats *inl)
{
	char cut[96] = "";

	if (inl->capped)
		snprintf(cut, sizeof(cut), "%s%zu cut to their innermost %d inlined frames",
			 inl->skipped ? "; " : "", inl->capped, PG_DWARF_MAX_INLINE_DEPTH);
	if (inl->skipped)
		pg_warn(set->diag, "%s: function at 0x%llx (code index %llu): %zu of %zu inline "
			"chains left out (the first: %s)%s", set->dump_name,
			(unsigned long long)ld->addr, (unsigned long long)ld->id, inl->skipped,
			ld->ninlines, inl->why, cut);
	else
		pg_warn(set->diag, "%s: function at 0x%llx (code index %llu): of %zu inline "
			"chains, %s", set->dump_name, (unsigned long long)ld->addr,
			(unsigned long long)ld->id, ld->ninlines, cut);
}

/* The bytes of a memory-layout function's own CFI, copied after its code
 * (at off, 8-aligned): its .eh_frame then its .eh_frame_hdr, each cut to
 * what its place maps.  Returns how many pieces (the .eh_frame_hdr's
 * only when some of it is mapped). */
struct cfi_piece {
	const void *p;
	uint64_t n, at;
};

static int cfi_pieces(const struct pg_code_cfi *u, uint64_t off, uint64_t size,
		      struct cfi_piece pc[2])
{
	uint64_t n = u->eh_frame_size, k = 0;

	if (n > u->mapped_size)
		n = u->mapped_size;
	pc[k++] = (struct cfi_piece){ u->eh_frame, n, off + pg_align(size, 8) };
	n = u->mapped_size - n;
	if (n > u->eh_frame_hdr_size)
		n = u->eh_frame_hdr_size;
	if (n)
		pc[k++] = (struct cfi_piece){ u->eh_frame_hdr, n, pc[0].at + pc[0].n };
	return (int)k;
}

/* Adds a function at offset off (UINT64_MAX: after the last one, 16-byte
 * aligned); quiet: no warning about its inline chains (a copy of a
 * function already placed). */
int pg_emit_add_func(pg_elfset *set, struct img *im, const struct pg_code_event *ld,
		     uint64_t off, bool quiet, const uint8_t *cdig)
{
	struct pg_dwarf_inl_stats inl;
	struct func *f;
	uint64_t meta[3] = { ld->addr, ld->size, ld->id };
	size_t nlen = strlen(ld->name);
	int ret;

	if (!pg_grow((void **)&im->funcs, &im->cap, im->nfuncs + 1, sizeof(*im->funcs)))
		return pg_err(set->diag, -ENOMEM, "out of memory");
	if (off == UINT64_MAX)
		off = pg_align(im->text_end, FUNC_ALIGN);
	f = &im->funcs[im->nfuncs++];
	f->name = ld->name;
	f->code = ld->code;
	f->size = ld->size;
	f->cfi = im->memory ? ld->cfi : NULL;
	f->off = off;
	f->strx = (uint32_t)im->strtab.len;
	pg_buf_add(&im->strtab, ld->name, nlen + 1);
	if (off + ld->size > im->text_end)
		im->text_end = off + ld->size;
	if (im->memory) {
		/* the build-id at once, without waiting for the worker to
		 * read the code: it wrote the code's digest during the walk
		 * and now only writes the code */
		pg_digest_update(im->dig, meta, sizeof(meta));
		pg_digest_update(im->dig, ld->name, nlen + 1);
		pg_digest_update(im->dig, cdig, PG_PIECE_DIGEST);
		pg_ahash_update_write(im->ah, NULL, ld->code, ld->size, im->sink, off);
	} else {
		pg_ahash_update_copy(im->ah, im->dig, meta, sizeof(meta), ld->name, nlen + 1);
		/* counts what it reads */
		pg_ahash_update_write(im->ah, im->dig, ld->code, ld->size, im->sink, off);
	}
	if (im->sink && f->cfi) {	/* the memory layout's copy of its CFI after it */
		struct cfi_piece pc[2];
		int k = cfi_pieces(f->cfi, off, ld->size, pc);

		for (int i = 0; i < k; i++)
			pg_ahash_update_write(im->ah, NULL, pc[i].p, pc[i].n, im->sink, pc[i].at);
	}
	/* this thread's walk maps the dump as far (a name read maps the
	 * pages around it): it counts the code it passed too */
	pg_inputs_touched(ld->size);
	ret = pg_dwarf_add_func(&im->dw, ld->name, off, ld->size, ld->lines, ld->nlines,
				ld->inlines, ld->ninlines, &inl);
	if (ret || im->strtab.oom)
		return pg_err(set->diag, -ENOMEM, "out of memory");
	if (inl.dies && !im->has_inl) {
		/* an image with inlined subroutines is not what a writer
		 * without them made of the same input (kept out of the digest
		 * of images without, whose build-ids stay as they were) */
		if (im->memory)
			pg_digest_update(im->dig, "inline-dies-1", 13);
		else
			pg_ahash_update(im->ah, im->dig, "inline-dies-1", 13);
		im->has_inl = true;
	}
	if ((inl.skipped || inl.capped) && !quiet)
		inline_warning(set, ld, &inl);
	return 0;
}

static Elf_Scn *add_scn(Elf *elf, int idx, GElf_Word type, GElf_Xword flags,
			uint64_t off, uint64_t addr, uint64_t size, uint64_t align,
			const uint32_t *shname)
{
	Elf_Scn *scn = elf_newscn(elf);
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh))
		return NULL;
	sh.sh_name = shname[idx];
	sh.sh_type = type;
	sh.sh_flags = flags;
	sh.sh_offset = off;
	sh.sh_addr = addr;
	sh.sh_size = size;
	sh.sh_addralign = align;
	if (!gelf_update_shdr(scn, &sh))
		return NULL;
	return scn;
}

static bool add_data(Elf_Scn *scn, const void *buf, size_t size, uint64_t off,
		     Elf_Type type)
{
	Elf_Data *d = elf_newdata(scn);

	if (!d)
		return false;
	d->d_buf = (void *)buf;
	d->d_size = size;
	d->d_off = (off_t)off;
	d->d_type = type;
	d->d_align = 1;
	d->d_version = EV_CURRENT;
	return true;
}

#define NOTE_SIZE (12 + 4 + BUILD_ID_SIZE)

void pg_emit_layout_free(struct layout *lo)
{
	free(lo->symbuf);
	pg_buf_free(&lo->eh);
	pg_buf_free(&lo->ehh);
	pg_buf_free(&lo->shstr);
	for (int i = 0; i < 4; i++)
		pg_buf_free(&lo->z[i]);
}

/* A compressed section as the gABI has it (SHF_COMPRESSED, ELFCOMPRESS_ZLIB):
 * a Chdr in the image's class and byte order, then the zlib stream.
 * Returns 1 with out filled when that is smaller than in, 0 when not (out
 * is then unused), -ENOMEM.  zlib's default level, not libelf's
 * elf_compress(), which deflates at the best level: on node's DWARF that
 * took 20 times as long for 3% fewer bytes. */
static int zlib_section(const struct pg_code_process *h, const struct pg_buf *in,
			struct pg_buf *out)
{
	size_t hsz = h->is_64bit ? sizeof(Elf64_Chdr) : sizeof(Elf32_Chdr);
	uLongf zlen;
	uint8_t *p;

	if (in->len < 2 * hsz)
		return 0;	/* the header alone would eat the gain */
	out->big_endian = h->big_endian;
	pg_buf_u32(out, ELFCOMPRESS_ZLIB);
	if (h->is_64bit) {
		pg_buf_u32(out, 0);		/* ch_reserved */
		pg_buf_u64(out, in->len);
		pg_buf_u64(out, 1);		/* ch_addralign: DWARF is bytes */
	} else {
		pg_buf_u32(out, (uint32_t)in->len);	/* < TABLE_LIMIT */
		pg_buf_u32(out, 1);
	}
	zlen = compressBound(in->len);
	p = pg_buf_reserve(out, zlen);
	if (!p)
		return -ENOMEM;
	if (compress2(p, &zlen, in->p, in->len, Z_DEFAULT_COMPRESSION) != Z_OK)
		return -ENOMEM;	/* Z_MEM_ERROR: the bound makes Z_BUF_ERROR impossible */
	if (hsz + zlen >= in->len) {
		pg_buf_free(out);
		return 0;
	}
	out->len += zlen;
	return 1;
}

/* Lays the loaded part of the image out (what the build-id digests and
 * the maps point into); pg_emit_dwarf_finish(), pg_emit_zsection() and
 * pg_emit_layout_rest() the rest.  lo is to be freed
 * with pg_emit_layout_free() either way. */
int pg_emit_layout(pg_elfset *set, struct img *im, struct layout *lo)
{
	const struct pg_code_process *h = &set->hdr;

	memset(lo, 0, sizeof(*lo));
	lo->eh.big_endian = lo->ehh.big_endian = h->big_endian;
	lo->symsz = h->is_64bit ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
	/* the PT_LOAD starts at 0, or at the code for perf 5.19..6.7, or
	 * (memory layout) at the lowest function's 64-byte line */
	lo->load_off = im->memory ? im->load_off : im->unw && set->cfi_compat ? im->text_off : 0;
	lo->note_off = pg_emit_headers_end(set) - NOTE_SIZE;
	if (im->memory) {
		/* the merged tables, after the region's code */
		lo->eh_off = im->meh_off;
		lo->eh_size = im->meh.len;
		lo->hdr_off = lo->eh_off + pg_align(lo->eh_size, 4);
		lo->hdr_size = im->mhdr.len;
		lo->ehp = im->meh.p;
		lo->hdrp = im->mhdr.p;
		if (im->meh.oom || im->mhdr.oom)
			return pg_err(set->diag, -ENOMEM, "out of memory");
	} else if (im->unw) {
		/* unwind tables right after the code, as the process had them */
		lo->eh_off = im->text_off + pg_align(im->funcs[0].size, 8);
		lo->eh_size = im->unw->eh_frame_size;
		lo->hdr_off = lo->eh_off + lo->eh_size;
		lo->hdr_size = im->unw->eh_frame_hdr_size;
		lo->ehp = im->unw->eh_frame;
		lo->hdrp = im->unw->eh_frame_hdr;
	} else {
		lo->eh_off = pg_align(im->text_end, 8);
		lo->eh_size = 4;
		lo->hdr_off = lo->eh_off + lo->eh_size;
		lo->hdr_size = 12;
		pg_cfi_empty(&lo->eh, &lo->ehh, lo->eh_off, lo->hdr_off);
		lo->ehp = lo->eh.p;
		lo->hdrp = lo->ehh.p;
	}
	lo->load_end = lo->hdr_off + lo->hdr_size;
	if (lo->eh.oom || lo->ehh.oom)
		return pg_err(set->diag, -ENOMEM, "out of memory");
	return 0;
}

/* Finishes the DWARF tables, whose sizes place everything after them:
 * nothing of the set, so that it runs on the worker thread with the
 * write (files.c).  Each section is then compressed by
 * pg_emit_zsection(), one at a time on either thread, before
 * pg_emit_layout_rest(). */
int pg_emit_dwarf_finish(const char *dump_name, struct img *im, struct layout *lo,
			 struct pg_diag *diag)
{
	if (pg_dwarf_finish(&im->dw, dump_name, im->text_off,
			    im->memory ? lo->eh_off : im->text_end) < 0)
		return pg_err(diag, -ENOMEM, "out of memory");
	return 0;
}

/* The DWARF sections, SEC_ABBREV + i for each i. */
static void dwarf_sections(const struct img *im, const struct pg_buf *dw[4])
{
	dw[0] = &im->dw.abbrev;
	dw[1] = &im->dw.info;
	dw[2] = &im->dw.line;
	dw[3] = &im->dw.aranges;
}

/* Section i (SEC_ABBREV + i) compressed into lo->z[i] when that is
 * smaller (lo->zr[i] 1, else 0; -ENOMEM).  Touches nothing the other
 * sections' calls do. */
void pg_emit_zsection(const struct pg_code_process *h, struct img *im, struct layout *lo,
		      int i)
{
	const struct pg_buf *dw[4];

	dwarf_sections(im, dw);
	lo->zr[i] = zlib_section(h, dw[i], &lo->z[i]);
}

/* Lays out the rest, not loaded: DWARF (compressed where
 * pg_emit_zsection ran and found it smaller), symbols, names, section
 * headers. */
int pg_emit_layout_rest(const struct pg_code_process *h, struct img *im, struct layout *lo,
			struct pg_diag *diag)
{
	pg_buf_u8(&lo->shstr, 0);
	for (int i = 1; i < SEC_COUNT; i++) {
		lo->shname[i] = (uint32_t)lo->shstr.len;
		pg_buf_str(&lo->shstr, sec_names[i]);
	}
	{
		const struct pg_buf *dw[4];
		uint64_t at = lo->load_end;

		dwarf_sections(im, dw);
		for (int i = 0; i < 4; i++) {
			int z = lo->zr[i];	/* 0 unless compressed (pg_emit_layout) */

			if (z < 0)
				return pg_err(diag, -ENOMEM, "out of memory");
			lo->dbg[i] = z ? &lo->z[i] : dw[i];
			if (z)	/* the Chdr is aligned as its class's words */
				at = pg_align(at, h->is_64bit ? 8 : 4);
			lo->dbg_off[i] = at;
			at += lo->dbg[i]->len;
		}
		lo->sym_off = pg_align(at, 8);
	}
	lo->str_off = lo->sym_off + (im->nfuncs + 1) * lo->symsz;
	lo->shstr_off = lo->str_off + im->strtab.len;
	lo->sh_off = pg_align(lo->shstr_off + lo->shstr.len, 8);

	lo->symbuf = calloc(im->nfuncs + 1, lo->symsz);
	if (!lo->symbuf || lo->shstr.oom)
		return pg_err(diag, -ENOMEM, "out of memory");
	return 0;
}

/* The libelf emission below returns false on a libelf failure, which
 * pg_emit_elf() reports. */

static bool emit_ehdr(const struct pg_code_process *h, const struct layout *lo, Elf *elf)
{
	GElf_Ehdr eh;

	if (!gelf_newehdr(elf, h->is_64bit ? ELFCLASS64 : ELFCLASS32) || !gelf_getehdr(elf, &eh))
		return false;
	eh.e_ident[EI_DATA] = h->big_endian ? ELFDATA2MSB : ELFDATA2LSB;
	eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
	eh.e_type = ET_DYN;
	eh.e_machine = (GElf_Half)h->elf_mach;
	eh.e_version = EV_CURRENT;
	eh.e_entry = 0;
	eh.e_phoff = eh.e_ehsize = h->is_64bit ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	eh.e_shoff = lo->sh_off;
	eh.e_shstrndx = SEC_SHSTRTAB;
	if (!gelf_update_ehdr(elf, &eh) || !gelf_newphdr(elf, 3))
		return false;
	/* every offset is ours: vaddr == offset in the PT_LOAD */
	elf_flagelf(elf, ELF_C_SET, ELF_F_LAYOUT);
	return true;
}

/* Fills lo->symbuf through libelf (which converts to the image's class and
 * byte order): one local STT_FUNC per function after the null symbol. */
static bool emit_symtab(const struct img *im, const struct layout *lo, Elf *elf)
{
	Elf_Scn *scn = add_scn(elf, SEC_SYMTAB, SHT_SYMTAB, 0, lo->sym_off, 0,
			       (im->nfuncs + 1) * lo->symsz, 8, lo->shname);
	Elf_Data *d;
	GElf_Shdr sh;

	if (!scn)
		return false;
	d = elf_newdata(scn);
	if (!d)
		return false;
	d->d_buf = lo->symbuf;
	d->d_size = (im->nfuncs + 1) * lo->symsz;
	d->d_type = ELF_T_SYM;
	d->d_align = 8;
	d->d_version = EV_CURRENT;
	for (size_t i = 0; i < im->nfuncs; i++) {
		GElf_Sym s = {
			.st_name = im->funcs[i].strx,
			.st_info = GELF_ST_INFO(STB_LOCAL, STT_FUNC),
			.st_shndx = SEC_TEXT,
			.st_value = im->funcs[i].off,
			.st_size = im->funcs[i].size,
		};

		if (!gelf_update_sym(d, (int)i + 1, &s))
			return false;
	}
	if (!gelf_getshdr(scn, &sh))
		return false;
	sh.sh_link = SEC_STRTAB;
	sh.sh_info = (GElf_Word)(im->nfuncs + 1);	/* all symbols are local */
	sh.sh_entsize = lo->symsz;
	return gelf_update_shdr(scn, &sh) != 0;
}

/* One section of a single buffer. */
static bool emit_plain(Elf *elf, int idx, GElf_Word type, GElf_Xword flags, uint64_t off,
		       uint64_t addr, const void *buf, uint64_t size, uint64_t align,
		       const struct layout *lo)
{
	Elf_Scn *scn = add_scn(elf, idx, type, flags, off, addr, size, align, lo->shname);

	return scn && add_data(scn, buf, size, 0, ELF_T_BYTE);
}

/* The DWARF sections, plain or compressed. */
static bool emit_dwarf(Elf *elf, const struct layout *lo)
{
	unsigned za = lo->symsz == sizeof(Elf64_Sym) ? 8 : 4;	/* the Chdr's */

	for (int i = 0; i < 4; i++) {
		bool z = lo->dbg[i] == &lo->z[i];

		if (!emit_plain(elf, SEC_ABBREV + i, SHT_PROGBITS, z ? SHF_COMPRESSED : 0,
				lo->dbg_off[i], 0, lo->dbg[i]->p, lo->dbg[i]->len, z ? za : 1, lo))
			return false;
	}
	return true;
}

/* The sections in index order (SEC_*); note is the build-id note. */
static bool emit_sections(const struct img *im, const struct layout *lo,
			  const uint8_t *note, Elf *elf)
{
	uint64_t noff = lo->note_off;
	Elf_Scn *scn;

	/* the note is in the PT_LOAD unless that starts at the code */
	scn = add_scn(elf, SEC_NOTE, SHT_NOTE, lo->load_off ? 0 : SHF_ALLOC, noff,
		      lo->load_off ? 0 : noff, NOTE_SIZE, 4, lo->shname);
	if (!scn || !add_data(scn, note, 12, 0, ELF_T_NHDR) ||
	    !add_data(scn, note + 12, NOTE_SIZE - 12, 12, ELF_T_BYTE))
		return false;
	/* .text has no data here (memory layout: it runs up to the tables):
	 * pg_emit_code() writes the code from the dump, a window at a time,
	 * and leaves the holes between functions sparse (zeros, as libelf
	 * would write them) */
	scn = add_scn(elf, SEC_TEXT, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, im->text_off,
		      im->text_off, (im->memory ? lo->eh_off : im->text_end) - im->text_off,
		      im->memory ? (im->text_off % FUNC_ALIGN ? 1 : FUNC_ALIGN) : TEXT_ALIGN,
		      lo->shname);
	if (!scn)
		return false;
	return emit_plain(elf, SEC_EH_FRAME, SHT_PROGBITS, SHF_ALLOC, lo->eh_off, lo->eh_off,
			  lo->ehp, lo->eh_size, lo->eh_off % 8 ? 1 : 8, lo) &&
	       emit_plain(elf, SEC_EH_FRAME_HDR, SHT_PROGBITS, SHF_ALLOC, lo->hdr_off, lo->hdr_off,
			  lo->hdrp, lo->hdr_size, lo->hdr_off % 4 ? 1 : 4, lo) &&
	       emit_dwarf(elf, lo) &&
	       emit_symtab(im, lo, elf) &&
	       emit_plain(elf, SEC_STRTAB, SHT_STRTAB, 0, lo->str_off, 0,
			  im->strtab.p, im->strtab.len, 1, lo) &&
	       emit_plain(elf, SEC_SHSTRTAB, SHT_STRTAB, 0, lo->shstr_off, 0,
			  lo->shstr.p, lo->shstr.len, 1, lo);
}

/* PT_LOAD, PT_GNU_EH_FRAME, PT_NOTE. */
static bool emit_phdrs(const struct layout *lo, Elf *elf)
{
	GElf_Phdr ph;

	memset(&ph, 0, sizeof(ph));
	ph.p_type = PT_LOAD;
	ph.p_flags = PF_R | PF_X;
	ph.p_offset = ph.p_vaddr = ph.p_paddr = lo->load_off;
	ph.p_filesz = ph.p_memsz = lo->load_end - lo->load_off;
	ph.p_align = 0x1000;
	if (!gelf_update_phdr(elf, 0, &ph))
		return false;
	ph.p_type = PT_GNU_EH_FRAME;
	ph.p_flags = PF_R;
	ph.p_offset = ph.p_vaddr = ph.p_paddr = lo->hdr_off;
	ph.p_filesz = ph.p_memsz = lo->hdr_size;
	ph.p_align = lo->hdr_off % 4 ? 1 : 4;
	if (!gelf_update_phdr(elf, 1, &ph))
		return false;
	/* p_flags and p_align stay those of PT_GNU_EH_FRAME */
	ph.p_type = PT_NOTE;
	ph.p_offset = ph.p_vaddr = ph.p_paddr = lo->note_off;
	ph.p_filesz = ph.p_memsz = NOTE_SIZE;
	return gelf_update_phdr(elf, 2, &ph) != 0;
}

/* Writes the whole image to fd through libelf. */
int pg_emit_elf(const struct emit_out *o, struct img *im, const struct layout *lo, int fd)
{
	static const uint32_t nhdr[3] = { 4, BUILD_ID_SIZE, NT_GNU_BUILD_ID };
	uint8_t note[NOTE_SIZE];	/* libelf reads it in elf_update */
	Elf *elf;
	int ret = 0;

	memcpy(note, nhdr, sizeof(nhdr));
	memcpy(note + 12, "GNU", 4);
	memcpy(note + 16, o->build_id, BUILD_ID_SIZE);
	errno = 0;	/* the report below gives the errno of a libelf call only */
	elf = elf_begin(fd, ELF_C_WRITE, NULL);
	if (!elf || !emit_ehdr(o->hdr, lo, elf) || !emit_sections(im, lo, note, elf) ||
	    !emit_phdrs(lo, elf) || elf_update(elf, ELF_C_WRITE) < 0) {
		/* a full disk is libelf's "I/O error": say what the system said */
		if (errno)
			ret = pg_err(o->diag, -errno, "%s: cannot write ELF image: %s", o->path,
				     strerror(errno));
		else
			ret = pg_err(o->diag, -EIO, "%s: cannot write ELF image: %s", o->path,
				     elf_errmsg(-1));
	}
	if (elf)
		elf_end(elf);
	return ret;
}

/* The code, and (memory layout) each function's tables where the process
 * had them after it, at their offsets; what lies between stays a hole. */
int pg_emit_code(const struct emit_out *o, const struct img *im, int fd)
{
	struct pg_gather g;

	/* the gaps between functions are .text's holes: only there may the
	 * batches write zeros (the tables after it are libelf's bytes) */
	pg_gather_init(&g, fd, im->text_off, im->memory ? im->meh_off : im->text_end);
	for (size_t i = 0; i < im->nfuncs; i++) {
		const struct func *f = &im->funcs[i];
		const struct pg_code_cfi *u = f->cfi;

		struct cfi_piece pc[2];
		int k = u ? cfi_pieces(u, f->off, f->size, pc) : 0;

		if (pg_gather_add(&g, f->code, f->size, f->off) < 0)
			goto fail;
		pg_inputs_touched(f->size + (u ? u->mapped_size : 0));
		for (int i = 0; i < k; i++)
			if (pg_gather_add(&g, pc[i].p, pc[i].n, pc[i].at) < 0)
				goto fail;
	}
	if (pg_gather_flush(&g) < 0)
		goto fail;
	return 0;
fail:
	return pg_err(o->diag, -errno, "%s: cannot write ELF image: %s", o->path,
		      strerror(errno));
}
