/* SPDX-License-Identifier: MIT */
/* ELF images for JIT code.  The layout is described in elfimage.h; every
 * section offset is chosen here (ELF_F_LAYOUT) so that vaddr == offset for
 * everything in the single PT_LOAD, which starts at offset 0. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <gelf.h>
#include <libelf.h>
#include <nettle/sha1.h>

#include <perfgraft/elfimage.h>
#include "elfimage/dwarf.h"
#include "util/util.h"

#define DEFAULT_PACK_LIMIT (256ull << 20)
#define FUNC_ALIGN 16
#define TEXT_ALIGN 64
#define BUILD_ID_SIZE 20
/* DWARF32 and ELF32 string offsets: an image's tables stay below this */
#define TABLE_LIMIT (1ull << 30)
#define NAME_LIMIT (1u << 20)
/* bump when the bytes written for the same input change */
#define IMAGE_FORMAT 2

enum { SEC_NOTE = 1, SEC_TEXT, SEC_EH_FRAME, SEC_EH_FRAME_HDR, SEC_ABBREV,
       SEC_INFO, SEC_LINE, SEC_ARANGES, SEC_SYMTAB, SEC_STRTAB, SEC_SHSTRTAB, SEC_COUNT };

static const char *const sec_names[SEC_COUNT] = {
	[SEC_NOTE] = ".note.gnu.build-id", [SEC_TEXT] = ".text",
	[SEC_EH_FRAME] = ".eh_frame", [SEC_EH_FRAME_HDR] = ".eh_frame_hdr",
	[SEC_ABBREV] = ".debug_abbrev", [SEC_INFO] = ".debug_info",
	[SEC_LINE] = ".debug_line", [SEC_ARANGES] = ".debug_aranges", [SEC_SYMTAB] = ".symtab",
	[SEC_STRTAB] = ".strtab", [SEC_SHSTRTAB] = ".shstrtab",
};

struct func {
	const char *name;
	const uint8_t *code;
	uint64_t size;
	uint64_t off;		/* == vaddr */
	uint32_t strx;		/* name offset in .strtab */
};

/* An image being assembled. */
struct img {
	size_t pub;		/* index in set->images */
	uint64_t text_off, text_end;
	struct func *funcs;
	size_t nfuncs, cap;
	struct sha1_ctx sha;
	bool has_inl;		/* the digest says it has inlined subroutines */
	struct pg_dwarf dw;
	struct pg_buf strtab;
	const struct pg_code_cfi *unw;	/* real CFI, single-function images */
};

struct pg_elfset {
	struct pg_code_process hdr;
	char *dump_name;	/* basename, for the compile unit's name */
	char *dir;
	char *prefix;
	int dirfd;
	bool per_function;
	uint64_t pack_limit;
	struct pg_diag *diag;
	struct pg_elf_image *images;
	size_t nimages, cap;
	struct pg_strmap names;	/* file names used, against duplicates */
	struct img *pack;	/* open packed image */
	unsigned npacks;
	uint64_t text_off;	/* where .text starts in every image */
	bool cfi_compat;	/* opts.cfi_layout_perf_5_19 */
	bool build_id_names;
	struct pend *pend;	/* by image index, as images */
	size_t pend_cap;
};

/* What happened to an image's file, beside its public struct. */
struct pend {
	struct pg_outfile of;	/* the finished temporary, until commit */
	bool pending;		/* of holds a temporary */
	bool created;		/* committed: the final name is this set's file */
	long reg;		/* created and registered for removal on a signal */
};

static uint64_t headers_end(const struct pg_elfset *set)
{
	GElf_Half ehsz = set->hdr.is_64bit ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	GElf_Half phsz = set->hdr.is_64bit ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);

	/* Ehdr, 3 Phdrs, then the 36-byte build-id note */
	return pg_align(ehsz + 3u * phsz, 4) + 12 + 4 + BUILD_ID_SIZE;
}

static bool is_symlink(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

int pg_elfset_new(const struct pg_code_process *hdr, const char *dump_name,
		  const struct pg_elfset_opts *caller_opts, struct pg_diag *diag,
		  pg_elfset **out)
{
	struct pg_elfset_opts o, *opts = &o;
	pg_elfset *set;
	const char *base = strrchr(dump_name, '/');
	char pfx[64];

	*out = NULL;
	if (pg_sized_opts(&o, sizeof(o), caller_opts, false, "ELF images", diag) < 0)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return pg_err(diag, -EINVAL, "libelf is out of date: %s", elf_errmsg(-1));
	set = calloc(1, sizeof(*set));
	if (!set)
		return pg_err(diag, -ENOMEM, "out of memory");
	set->hdr = *hdr;
	set->diag = diag;
	set->per_function = opts->per_function;
	set->cfi_compat = opts->cfi_layout_perf_5_19;
	set->build_id_names = opts->build_id_names;
	set->pack_limit = opts->pack_limit ? opts->pack_limit : DEFAULT_PACK_LIMIT;
	if (set->pack_limit > (1ull << 31))
		set->pack_limit = 1ull << 31;	/* offsets stay 32-bit clean */
	snprintf(pfx, sizeof(pfx), "jitted-%u", hdr->pid);
	set->dump_name = strdup(base ? base + 1 : dump_name);
	set->dir = strdup(opts->dir ? opts->dir : ".");
	set->prefix = strdup(opts->prefix ? opts->prefix : pfx);
	set->dirfd = -1;
	if (!set->dump_name || !set->dir || !set->prefix) {
		pg_elfset_free(set);
		return pg_err(diag, -ENOMEM, "out of memory");
	}
	if (strchr(set->prefix, '/') || !set->prefix[0] || strlen(set->prefix) > 100) {
		pg_elfset_free(set);
		return pg_err(diag, -EINVAL, "image prefix '%s' must be a plain file name of at most 100 bytes", opts->prefix);
	}
	set->dirfd = open(set->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
			  (opts->dir_nofollow ? O_NOFOLLOW : 0));
	if (set->dirfd < 0) {
		int e = errno;

		if (opts->dir_nofollow && (e == ELOOP || e == ENOTDIR) && is_symlink(set->dir))
			pg_err(diag, -e, "%s: is a symbolic link; not following it", set->dir);
		else
			pg_err(diag, -e, "%s: %s", set->dir, strerror(e));
		pg_elfset_free(set);
		return -e;
	}
	/* the temporaries of runs killed before they could remove them */
	pg_sweep_dead_temps(set->dirfd);
	set->text_off = pg_align(headers_end(set), TEXT_ALIGN);
	*out = set;
	return 0;
}

static void img_free(struct img *im)
{
	if (!im)
		return;
	free(im->funcs);
	pg_dwarf_free(&im->dw);
	pg_buf_free(&im->strtab);
	free(im);
}

/* Registers a new public image under a unique file name. */
static int new_image(pg_elfset *set, const char *want, struct img **out)
{
	struct pg_elf_image *pi;
	struct img *im;
	char name[256];
	bool added;

	snprintf(name, sizeof(name), "%s", want);
	for (unsigned k = 1;; k++) {
		long idx;

		/* the strmap keeps a pointer: intern a heap copy */
		char *key = strdup(name);

		if (!key)
			return pg_err(set->diag, -ENOMEM, "out of memory");
		idx = pg_strmap_intern(&set->names, key, &added);
		if (idx < 0) {
			free(key);
			return pg_err(set->diag, -ENOMEM, "out of memory");
		}
		if (added)
			break;
		free(key);
		/* a code_index used twice in one dump */
		snprintf(name, sizeof(name), "%.*s-dup%u.so", (int)(strlen(want) - 3), want, k);
	}
	if (!pg_grow((void **)&set->images, &set->cap, set->nimages + 1, sizeof(*set->images)) ||
	    !pg_grow((void **)&set->pend, &set->pend_cap, set->nimages + 1, sizeof(*set->pend)))
		return pg_err(set->diag, -ENOMEM, "out of memory");
	memset(&set->pend[set->nimages], 0, sizeof(*set->pend));
	set->pend[set->nimages].reg = -1;
	set->pend[set->nimages].of.fd = -1;
	set->pend[set->nimages].of.reg = -1;
	im = calloc(1, sizeof(*im));
	if (!im)
		return pg_err(set->diag, -ENOMEM, "out of memory");
	pi = &set->images[set->nimages];
	memset(pi, 0, sizeof(*pi));
	if (asprintf(&pi->path, "%s/%s", set->dir, name) < 0) {
		free(im);
		return pg_err(set->diag, -ENOMEM, "out of memory");
	}
	pi->name = pi->path + strlen(set->dir) + 1;
	im->pub = set->nimages++;
	im->text_off = im->text_end = set->text_off;
	pg_dwarf_init(&im->dw, set->hdr.big_endian, set->hdr.is_64bit ? 8 : 4);
	pg_buf_u8(&im->strtab, 0);
	sha1_init(&im->sha);
	{
		/* identity of the input: same dump, same build-ids */
		uint64_t id[3] = { set->hdr.pid, set->hdr.timestamp, set->hdr.elf_mach };
		/* the layout and the writer's format are part of what an image
		 * is: an image of another layout (or of an older writer) must not
		 * pass for this one when an existing file is reused */
		uint8_t layout[2] = { IMAGE_FORMAT, set->cfi_compat };

		sha1_update(&im->sha, 14, (const uint8_t *)"perfgraft-jit");
		sha1_update(&im->sha, sizeof(layout), layout);
		sha1_update(&im->sha, sizeof(id), (const uint8_t *)id);
		sha1_update(&im->sha, strlen(name) + 1, (const uint8_t *)name);
	}
	*out = im;
	return 0;
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

static int img_add(pg_elfset *set, struct img *im, const struct pg_code_event *ld)
{
	struct pg_dwarf_inl_stats inl;
	struct func *f;
	uint64_t off = pg_align(im->text_end, FUNC_ALIGN);
	uint64_t meta[3] = { ld->addr, ld->size, ld->id };
	size_t nlen = strlen(ld->name);
	int ret;

	if (!pg_grow((void **)&im->funcs, &im->cap, im->nfuncs + 1, sizeof(*im->funcs)))
		return pg_err(set->diag, -ENOMEM, "out of memory");
	f = &im->funcs[im->nfuncs++];
	f->name = ld->name;
	f->code = ld->code;
	f->size = ld->size;
	f->off = off;
	f->strx = (uint32_t)im->strtab.len;
	pg_buf_add(&im->strtab, ld->name, nlen + 1);
	im->text_end = off + ld->size;
	sha1_update(&im->sha, sizeof(meta), (const uint8_t *)meta);
	sha1_update(&im->sha, nlen + 1, (const uint8_t *)ld->name);
	sha1_update(&im->sha, ld->size, ld->code);
	ret = pg_dwarf_add_func(&im->dw, ld->name, off, ld->size, ld->lines, ld->nlines,
				ld->inlines, ld->ninlines, &inl);
	if (ret || im->strtab.oom)
		return pg_err(set->diag, -ENOMEM, "out of memory");
	if (inl.dies && !im->has_inl) {
		/* an image with inlined subroutines is not what a writer
		 * without them made of the same input (kept out of the digest
		 * of images without, whose build-ids stay as they were) */
		sha1_update(&im->sha, 13, (const uint8_t *)"inline-dies-1");
		im->has_inl = true;
	}
	if (inl.skipped || inl.capped)
		inline_warning(set, ld, &inl);
	return 0;
}

/* An empty .eh_frame (its terminator) and an .eh_frame_hdr with no FDEs:
 * perf's libunwind then falls back to frame pointers for this code. */
static void empty_eh(struct pg_buf *eh, struct pg_buf *hdr, uint64_t eh_off,
		     uint64_t hdr_off)
{
	pg_buf_u32(eh, 0);
	pg_buf_u8(hdr, 1);		/* version */
	pg_buf_u8(hdr, 0x1b);		/* eh_frame_ptr: pcrel sdata4 */
	pg_buf_u8(hdr, 0x03);		/* fde_count: udata4 */
	pg_buf_u8(hdr, 0x3b);		/* table: datarel sdata4 */
	pg_buf_u32(hdr, (uint32_t)(int32_t)(eh_off - (hdr_off + 4)));
	pg_buf_u32(hdr, 0);
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

/* An existing regular file of the image's name with its build-id is the
 * same image (the build-id digests the dump's identity and the image's
 * bytes): it is kept as it is, neither rewritten nor, later, removed. */
static bool reuse(pg_elfset *set, struct pg_elf_image *pi)
{
	uint8_t id[20];
	struct stat st;

	if (fstatat(set->dirfd, pi->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return false;
	if (pg_file_build_id(pi->path, id) != BUILD_ID_SIZE ||
	    memcmp(id, pi->build_id, BUILD_ID_SIZE))
		return false;
	pi->dev = st.st_dev;
	pi->ino = st.st_ino;
	pi->size = (uint64_t)st.st_size;
	pi->written = true;
	pi->reused = true;
	return true;
}

/* Where every part of an image goes (file offsets, == vaddrs inside the
 * PT_LOAD), and the parts the writer makes itself rather than borrows. */
struct layout {
	uint64_t load_off, load_end;	/* the PT_LOAD */
	uint64_t note_off;
	uint64_t eh_off, eh_size, hdr_off, hdr_size;
	const uint8_t *ehp, *hdrp;	/* the process's unwind tables, or eh/ehh */
	uint64_t abbrev_off, info_off, line_off, ar_off;
	uint64_t sym_off, str_off, shstr_off, sh_off;
	size_t symsz;
	uint32_t shname[SEC_COUNT];	/* offsets in shstr */
	struct pg_buf eh, ehh;		/* empty unwind tables, when no CFI */
	struct pg_buf shstr;
	void *symbuf;			/* .symtab, filled in by emit_symtab */
};

#define NOTE_SIZE (12 + 4 + BUILD_ID_SIZE)

static void layout_free(struct layout *lo)
{
	free(lo->symbuf);
	pg_buf_free(&lo->eh);
	pg_buf_free(&lo->ehh);
	pg_buf_free(&lo->shstr);
}

/* Finishes the DWARF tables (their sizes place everything after them) and
 * lays the image out; lo is to be freed with layout_free() either way. */
static int plan_layout(pg_elfset *set, struct img *im, struct layout *lo)
{
	const struct pg_code_process *h = &set->hdr;

	memset(lo, 0, sizeof(*lo));
	lo->eh.big_endian = lo->ehh.big_endian = h->big_endian;
	lo->symsz = h->is_64bit ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
	/* the PT_LOAD starts at 0, or at the code for perf 5.19..6.7 */
	lo->load_off = im->unw && set->cfi_compat ? im->text_off : 0;
	lo->note_off = headers_end(set) - NOTE_SIZE;
	/* unwind tables right after the code, as the process had them */
	if (im->unw) {
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
		empty_eh(&lo->eh, &lo->ehh, lo->eh_off, lo->hdr_off);
		lo->ehp = lo->eh.p;
		lo->hdrp = lo->ehh.p;
	}
	lo->load_end = lo->hdr_off + lo->hdr_size;

	if (pg_dwarf_finish(&im->dw, set->dump_name, im->text_off, im->text_end) < 0)
		return pg_err(set->diag, -ENOMEM, "out of memory");
	pg_buf_u8(&lo->shstr, 0);
	for (int i = 1; i < SEC_COUNT; i++) {
		lo->shname[i] = (uint32_t)lo->shstr.len;
		pg_buf_str(&lo->shstr, sec_names[i]);
	}
	/* the rest is not loaded: DWARF, symbols, names, section headers */
	lo->abbrev_off = lo->load_end;
	lo->info_off = lo->abbrev_off + im->dw.abbrev.len;
	lo->line_off = lo->info_off + im->dw.info.len;
	lo->ar_off = lo->line_off + im->dw.line.len;
	lo->sym_off = pg_align(lo->ar_off + im->dw.aranges.len, 8);
	lo->str_off = lo->sym_off + (im->nfuncs + 1) * lo->symsz;
	lo->shstr_off = lo->str_off + im->strtab.len;
	lo->sh_off = pg_align(lo->shstr_off + lo->shstr.len, 8);

	lo->symbuf = calloc(im->nfuncs + 1, lo->symsz);
	if (!lo->symbuf || lo->eh.oom || lo->ehh.oom || lo->shstr.oom)
		return pg_err(set->diag, -ENOMEM, "out of memory");
	return 0;
}

/* Completes the build-id (the .eh_frame is the last part it digests) and,
 * with build_id_names, puts it into the file name. */
static int name_image(pg_elfset *set, struct img *im, const struct layout *lo)
{
	struct pg_elf_image *pi = &set->images[im->pub];
	uint8_t bid[SHA1_DIGEST_SIZE];

	sha1_update(&im->sha, lo->eh_size, lo->ehp);
	sha1_digest(&im->sha, sizeof(bid), bid);
	memcpy(pi->build_id, bid, BUILD_ID_SIZE);
	if (set->build_id_names) {
		size_t dl = strlen(set->dir), nl = strlen(pi->name);
		char *np = malloc(dl + nl + 16);

		if (!np)
			return pg_err(set->diag, -ENOMEM, "out of memory");
		/* "<dir>/<name less .so>-<12 hex>.so" */
		snprintf(np, dl + nl + 16, "%s/%.*s-%02x%02x%02x%02x%02x%02x.so", set->dir,
			 (int)(nl - 3), pi->name, pi->build_id[0], pi->build_id[1],
			 pi->build_id[2], pi->build_id[3], pi->build_id[4], pi->build_id[5]);
		free(pi->path);
		pi->path = np;
		pi->name = np + dl + 1;
	}
	return 0;
}

/* The libelf emission below returns false on a libelf failure, which
 * emit_elf() reports. */

static bool emit_ehdr(const pg_elfset *set, const struct layout *lo, Elf *elf)
{
	const struct pg_code_process *h = &set->hdr;
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

/* The sections in index order (SEC_*); note is the build-id note. */
static bool emit_sections(const struct img *im, const struct layout *lo,
			  const uint8_t *note, Elf *elf)
{
	const struct pg_dwarf *dw = &im->dw;
	uint64_t noff = lo->note_off;
	Elf_Scn *scn;

	/* the note is in the PT_LOAD unless that starts at the code */
	scn = add_scn(elf, SEC_NOTE, SHT_NOTE, lo->load_off ? 0 : SHF_ALLOC, noff,
		      lo->load_off ? 0 : noff, NOTE_SIZE, 4, lo->shname);
	if (!scn || !add_data(scn, note, 12, 0, ELF_T_NHDR) ||
	    !add_data(scn, note + 12, NOTE_SIZE - 12, 12, ELF_T_BYTE))
		return false;
	scn = add_scn(elf, SEC_TEXT, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, im->text_off,
		      im->text_off, im->text_end - im->text_off, TEXT_ALIGN, lo->shname);
	if (!scn)
		return false;
	for (size_t i = 0; i < im->nfuncs; i++)
		if (!add_data(scn, im->funcs[i].code, im->funcs[i].size,
			      im->funcs[i].off - im->text_off, ELF_T_BYTE))
			return false;
	return emit_plain(elf, SEC_EH_FRAME, SHT_PROGBITS, SHF_ALLOC, lo->eh_off, lo->eh_off,
			  lo->ehp, lo->eh_size, lo->eh_off % 8 ? 1 : 8, lo) &&
	       emit_plain(elf, SEC_EH_FRAME_HDR, SHT_PROGBITS, SHF_ALLOC, lo->hdr_off, lo->hdr_off,
			  lo->hdrp, lo->hdr_size, lo->hdr_off % 4 ? 1 : 4, lo) &&
	       emit_plain(elf, SEC_ABBREV, SHT_PROGBITS, 0, lo->abbrev_off, 0,
			  dw->abbrev.p, dw->abbrev.len, 1, lo) &&
	       emit_plain(elf, SEC_INFO, SHT_PROGBITS, 0, lo->info_off, 0,
			  dw->info.p, dw->info.len, 1, lo) &&
	       emit_plain(elf, SEC_LINE, SHT_PROGBITS, 0, lo->line_off, 0,
			  dw->line.p, dw->line.len, 1, lo) &&
	       emit_plain(elf, SEC_ARANGES, SHT_PROGBITS, 0, lo->ar_off, 0,
			  dw->aranges.p, dw->aranges.len, 1, lo) &&
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
static int emit_elf(pg_elfset *set, struct img *im, const struct layout *lo, int fd)
{
	const struct pg_elf_image *pi = &set->images[im->pub];
	static const uint32_t nhdr[3] = { 4, BUILD_ID_SIZE, NT_GNU_BUILD_ID };
	uint8_t note[NOTE_SIZE];	/* libelf reads it in elf_update */
	Elf *elf;
	int ret = 0;

	memcpy(note, nhdr, sizeof(nhdr));
	memcpy(note + 12, "GNU", 4);
	memcpy(note + 16, pi->build_id, BUILD_ID_SIZE);
	errno = 0;	/* the report below gives the errno of a libelf call only */
	elf = elf_begin(fd, ELF_C_WRITE, NULL);
	if (!elf || !emit_ehdr(set, lo, elf) || !emit_sections(im, lo, note, elf) ||
	    !emit_phdrs(lo, elf) || elf_update(elf, ELF_C_WRITE) < 0) {
		/* a full disk is libelf's "I/O error": say what the system said */
		if (errno)
			ret = pg_err(set->diag, -errno, "%s: cannot write ELF image: %s", pi->path,
				     strerror(errno));
		else
			ret = pg_err(set->diag, -EIO, "%s: cannot write ELF image: %s", pi->path,
				     elf_errmsg(-1));
	}
	if (elf)
		elf_end(elf);
	return ret;
}

/* Writes the image into a finished temporary of its name, which
 * pg_elfset_commit() renames into place; removed again on any error. */
static int write_file(pg_elfset *set, struct img *im, const struct layout *lo)
{
	struct pg_elf_image *pi = &set->images[im->pub];
	struct pg_outfile of;
	struct stat st;
	int ret = pg_outfile_open(&of, set->dirfd, pi->name, set->diag);

	if (ret)
		return ret;
	ret = emit_elf(set, im, lo, of.fd);
	if (ret) {
		pg_outfile_abort(&of);
		return ret;
	}
	if (fstat(of.fd, &st) == 0) {
		pi->dev = st.st_dev;
		pi->ino = st.st_ino;
	}
	ret = pg_outfile_finish(&of, set->diag);
	if (ret) {
		pg_err(set->diag, ret, "%s: %s", pi->path, strerror(-ret));
		return ret;
	}
	set->pend[im->pub].of = of;
	set->pend[im->pub].pending = true;
	pi->size = lo->sh_off + SEC_COUNT * (set->hdr.is_64bit ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr));
	pi->written = true;
	return 0;
}

/* Lays out, names and writes an image, or keeps the identical file that
 * already has its name. */
static int write_image(pg_elfset *set, struct img *im)
{
	struct pg_elf_image *pi = &set->images[im->pub];
	struct layout lo;
	int ret = plan_layout(set, im, &lo);

	if (!ret)
		ret = name_image(set, im, &lo);
	if (!ret && !reuse(set, pi))
		ret = write_file(set, im, &lo);
	if (!ret) {
		pi->nfuncs = im->nfuncs;
		pi->has_cfi = im->unw != NULL;
	}
	layout_free(&lo);
	return ret;
}

static int close_pack(pg_elfset *set)
{
	int ret = 0;

	if (set->pack) {
		ret = write_image(set, set->pack);
		img_free(set->pack);
		set->pack = NULL;
	}
	return ret;
}

int pg_elfset_add(pg_elfset *set, const struct pg_code_event *ld,
		  struct pg_elf_place *out)
{
	const struct pg_code_cfi *u = ld->cfi;
	struct img *im;
	char name[128];
	int ret;

	memset(out, 0, sizeof(*out));
	if (ld->kind != PG_CODE_LOAD || !ld->size)
		return 1;
	if (strlen(ld->name) > NAME_LIMIT) {
		pg_warn(set->diag, "%s: function at 0x%llx has a name of %zu bytes; not placed",
			set->dump_name, (unsigned long long)ld->addr, strlen(ld->name));
		return 1;
	}
	if (u || set->per_function) {
		snprintf(name, sizeof(name), "%s-%llu.so", set->prefix,
			 (unsigned long long)ld->id);
		ret = new_image(set, name, &im);
		if (ret)
			return ret;
		if (u) {
			im->unw = u;
			if (set->cfi_compat)	/* page-aligned code, see elfimage.h */
				im->text_off = im->text_end = pg_align(set->text_off, 0x1000);
		}
		ret = img_add(set, im, ld);
		if (ret) {
			img_free(im);
			return ret;
		}
		if (u)
			sha1_update(&im->sha, u->eh_frame_hdr_size, u->eh_frame_hdr);
		ret = write_image(set, im);
		out->image = (uint32_t)im->pub;
		out->pgoff = im->funcs[0].off;
		out->map_len = u ? pg_align(ld->size, 8) + u->mapped_size : ld->size;
		img_free(im);
		return ret;
	}
	if (set->pack && set->pack->nfuncs &&
	    (set->pack->text_end + ld->size + FUNC_ALIGN > set->text_off + set->pack_limit ||
	     set->pack->strtab.len > TABLE_LIMIT || set->pack->dw.dies.len > TABLE_LIMIT ||
	     set->pack->dw.prog.len > TABLE_LIMIT || set->pack->dw.abstr.len > TABLE_LIMIT)) {
		ret = close_pack(set);
		if (ret)
			return ret;
	}
	if (!set->pack) {
		snprintf(name, sizeof(name), "%s-pack%u.so", set->prefix, set->npacks++);
		ret = new_image(set, name, &set->pack);
		if (ret)
			return ret;
	}
	ret = img_add(set, set->pack, ld);
	if (ret)
		return ret;
	out->image = (uint32_t)set->pack->pub;
	out->pgoff = set->pack->funcs[set->pack->nfuncs - 1].off;
	out->map_len = ld->size;
	return 0;
}

int pg_elfset_finish(pg_elfset *set)
{
	return close_pack(set);
}

size_t pg_elfset_count(const pg_elfset *set)
{
	return set->nimages;
}

const struct pg_elf_image *pg_elfset_image(const pg_elfset *set, size_t i)
{
	return i < set->nimages ? &set->images[i] : NULL;
}

int pg_elfset_commit(pg_elfset *set)
{
	for (size_t i = 0; i < set->nimages; i++) {
		struct pend *p = &set->pend[i];
		int ret;

		if (!p->pending)
			continue;
		/* the final name is listed before it exists (no moment where a
		 * signal finds it unlisted); only names no file had are committed
		 * here for inject, and elf commits with the signals blocked */
		p->reg = pg_cleanup_add(set->dirfd, set->images[i].name, false);
		ret = pg_outfile_commit(&p->of, set->diag);
		p->pending = false;
		if (ret) {
			pg_cleanup_del(p->reg);
			p->reg = -1;
			set->images[i].written = false;
			return ret;
		}
		p->created = true;
	}
	return 0;
}

void pg_elfset_keep(pg_elfset *set)
{
	for (size_t i = 0; set && i < set->nimages; i++) {
		pg_cleanup_del(set->pend[i].reg);
		set->pend[i].reg = -1;
		set->pend[i].created = false;	/* discard leaves it too */
	}
}

void pg_elfset_discard(pg_elfset *set)
{
	for (size_t i = 0; set && i < set->nimages; i++) {
		struct pend *p = &set->pend[i];

		if (p->pending)
			pg_outfile_abort(&p->of);
		if (p->created)
			unlinkat(set->dirfd, set->images[i].name, 0);
		pg_cleanup_del(p->reg);
		p->reg = -1;
		p->pending = p->created = false;
		set->images[i].written = false;
	}
}

void pg_elfset_free(pg_elfset *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->nimages; i++)
		if (set->pend[i].pending)
			pg_outfile_abort(&set->pend[i].of);
	pg_elfset_keep(set);
	free(set->pend);
	img_free(set->pack);
	for (size_t i = 0; i < set->nimages; i++)
		free(set->images[i].path);
	free(set->images);
	for (size_t i = 0; i < set->names.n; i++)
		free((char *)set->names.keys[i]);
	pg_strmap_free(&set->names);
	if (set->dirfd >= 0)
		close(set->dirfd);
	free(set->dump_name);
	free(set->dir);
	free(set->prefix);
	free(set);
}
