/* SPDX-License-Identifier: MIT */
/* The XRay instrumentation map of a binary: function IDs as the runtime
 * and llvm-xray number them, their link-time addresses, names (.symtab,
 * demangled) and source positions (libdw line tables).
 *
 * xray_instr_map holds one entry per sled: 32 bytes on 64-bit targets,
 * 16 on 32-bit ones.  Sled version 2 and later store PC-relative words;
 * older versions store absolute ones, which are 0 in PIEs and DSOs until
 * a RELATIVE dynamic relocation fills them in, so its addend is the value.
 * IDs start at 1 and grow whenever an entry's function differs from the
 * previous entry's. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <byteswap.h>
#include <limits.h>
#include <gelf.h>
#include <elfutils/libdw.h>

#include <perfgraft/xray.h>
#include "util/util.h"
#include "xray/mapyaml.h"


struct sym {
	uint64_t addr, size;
	const char *name;	/* in the ELF's string table */
};

struct pg_xray_map {
	struct pg_xray_func *funcs;	/* by id; funcs[i].id == i + 1 when dense */
	size_t nfuncs, cap;
	uint32_t max_id;
	bool dense;			/* IDs 1..nfuncs, as a binary's always are */
	bool yaml;			/* from llvm-xray's YAML: no binary */
	struct pg_xray_binary bin;
	int fd;
	Elf *elf;
	char *name;
};

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* sized symbols first: they describe the function */
	return (x->size == 0) - (y->size == 0);
}

/* FUNC symbols of .symtab, or .dynsym when the binary is stripped. */
static int load_syms(pg_xray_map *m, struct sym **out, size_t *nout, struct pg_diag *diag)
{
	Elf_Scn *scn = NULL;
	struct sym *v = NULL;
	size_t n = 0, cap = 0;
	int pass;

	for (pass = 0; pass < 2 && n == 0; pass++) {
		Elf64_Word want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;

		scn = NULL;
		while ((scn = elf_nextscn(m->elf, scn))) {
			GElf_Shdr sh;
			Elf_Data *d;
			size_t cnt;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != want || !sh.sh_entsize)
				continue;
			d = elf_getdata(scn, NULL);
			if (!d)
				continue;
			cnt = d->d_size / sh.sh_entsize;
			for (size_t i = 0; i < cnt; i++) {
				GElf_Sym s;
				const char *nm;

				if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
				    s.st_shndx == SHN_UNDEF)
					continue;
				nm = elf_strptr(m->elf, sh.sh_link, s.st_name);
				if (!nm || !*nm)
					continue;
				if (!pg_grow((void **)&v, &cap, n + 1, sizeof(*v))) {
					free(v);
					return pg_err(diag, -ENOMEM, "%s: out of memory", m->name);
				}
				v[n].addr = s.st_value;
				v[n].size = s.st_size;
				v[n].name = nm;
				n++;
			}
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), sym_cmp);
	*out = v;
	*nout = n;
	return 0;
}

static const struct sym *find_sym(const struct sym *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {	/* first symbol above addr */
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	lo--;
	while (lo > 0 && v[lo - 1].addr == v[lo].addr)	/* sized ones sort first */
		lo--;
	const struct sym *s = &v[lo];

	if (s->addr == addr || (s->size && addr < s->addr + s->size))
		return s;
	return NULL;
}

static int read_binary_info(pg_xray_map *m, struct pg_diag *diag)
{
	GElf_Ehdr eh;
	size_t nph;

	if (!gelf_getehdr(m->elf, &eh))
		return pg_err(diag, -EINVAL, "%s: offset 0: not an ELF file (%s)", m->name,
			      elf_errmsg(-1));
	/* A file cut short (a copy that stopped, a test binary kept in part)
	 * loses its section headers first: they are at its end.  libelf then
	 * finds no sections, which is not "no xray_instr_map". */
	size_t flen = 0;

	if (elf_rawfile(m->elf, &flen) && eh.e_shoff) {
		uint64_t need = (uint64_t)(eh.e_shnum ? eh.e_shnum : 1) * eh.e_shentsize;

		if (eh.e_shoff > flen || need > flen - eh.e_shoff)
			return pg_err(diag, -EINVAL, "%s: offset %llu: truncated: the section headers (%llu bytes) would lie past the end of the file (%zu bytes)",
				      m->name, (unsigned long long)eh.e_shoff,
				      (unsigned long long)need, flen);
	}
	m->bin.pie = eh.e_type == ET_DYN;
	m->bin.e_machine = eh.e_machine;
	if (elf_getphdrnum(m->elf, &nph) == 0) {
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(m->elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
			    !(ph.p_flags & PF_X))
				continue;
			m->bin.text_vaddr = ph.p_vaddr;
			m->bin.text_offset = ph.p_offset;
			m->bin.text_size = ph.p_memsz;
			break;
		}
	}
	m->bin.build_id_size = pg_elf_build_id(m->elf, m->bin.build_id);
	return 0;
}

static uint64_t rdw(const uint8_t *p, unsigned size, bool swap)
{
	if (size == 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		return swap ? bswap_64(v) : v;
	}
	uint32_t v;

	memcpy(&v, p, 4);
	return swap ? bswap_32(v) : v;
}

/* How a relocation at a map word gives the word's value, by machine and
 * type.  These are the types XRay's maps carry on the targets the runtime
 * supports (LLVM's llvm-xray resolves the same, through its relocation
 * resolver, plus the target's RELATIVE type):
 *   x86-64   R_X86_64_64, R_X86_64_PC64, R_X86_64_RELATIVE
 *   AArch64  R_AARCH64_ABS64, R_AARCH64_PREL64, R_AARCH64_RELATIVE
 *   ARM      R_ARM_ABS32, R_ARM_REL32, R_ARM_RELATIVE
 *   PPC64    R_PPC64_ADDR64, R_PPC64_REL64, R_PPC64_RELATIVE
 *   MIPS     R_MIPS_32, R_MIPS_64, R_MIPS_PC32, and R_MIPS_REL32 without a
 *            symbol (MIPS's relative relocation; MIPS64's REL32/64 pair)
 *   SystemZ  R_390_64, R_390_PC64, R_390_RELATIVE
 * ABS is S + A, PC is S + A - P, RELATIVE is A (the link-time base is 0),
 * where A is the RELA addend or, for SHT_REL, the word in the section. */
enum rkind { RK_NONE, RK_ABS, RK_PC, RK_RELATIVE };

#ifndef R_MIPS_PC32
#define R_MIPS_PC32 248
#endif

static enum rkind reloc_kind(unsigned machine, uint32_t type, uint32_t sym)
{
	switch (machine) {
	case EM_X86_64:
		return type == R_X86_64_64 ? RK_ABS : type == R_X86_64_PC64 ? RK_PC :
		       type == R_X86_64_RELATIVE ? RK_RELATIVE : RK_NONE;
	case EM_AARCH64:
		return type == R_AARCH64_ABS64 ? RK_ABS : type == R_AARCH64_PREL64 ? RK_PC :
		       type == R_AARCH64_RELATIVE ? RK_RELATIVE : RK_NONE;
	case EM_ARM:
		return type == R_ARM_ABS32 ? RK_ABS : type == R_ARM_REL32 ? RK_PC :
		       type == R_ARM_RELATIVE ? RK_RELATIVE : RK_NONE;
	case EM_PPC64:
		return type == R_PPC64_ADDR64 ? RK_ABS : type == R_PPC64_REL64 ? RK_PC :
		       type == R_PPC64_RELATIVE ? RK_RELATIVE : RK_NONE;
	case EM_MIPS:
		if (type == R_MIPS_REL32)	/* dynamic: base + A, symbol 0 */
			return sym == 0 ? RK_RELATIVE : RK_NONE;
		return type == R_MIPS_32 || type == R_MIPS_64 ? RK_ABS :
		       type == R_MIPS_PC32 ? RK_PC : RK_NONE;
	case EM_S390:
		return type == R_390_64 ? RK_ABS : type == R_390_PC64 ? RK_PC :
		       type == R_390_RELATIVE ? RK_RELATIVE : RK_NONE;
	}
	return RK_NONE;
}

struct reloc {
	uint64_t at;		/* the word's address (section offset in a .o) */
	uint64_t s, a;		/* symbol value, addend (RELA) */
	enum rkind kind;
	bool rela;
};

static int reloc_cmp(const void *a, const void *b)
{
	const struct reloc *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

/* The relocations that land in the map [sh_addr, sh_addr + sh_size):
 * in a relocatable object only those of the section whose sh_info is the
 * map (r_offset counts from the map's start; other sections' offsets
 * count from theirs), in a linked binary the dynamic ones (sh_info 0)
 * and any the linker kept for the map (--emit-relocs).  Entries are read
 * from the raw bytes in the file's byte order: libelf does not undo
 * MIPS64's r_info layout (r_sym, r_ssym, r_type3, r_type2, r_type). */
static int load_relocs(pg_xray_map *m, size_t mapndx, const GElf_Shdr *map, bool swap,
		       struct reloc **out, size_t *nout, struct pg_diag *diag)
{
	GElf_Ehdr eh;
	Elf_Scn *scn = NULL;
	struct reloc *v = NULL;
	size_t n = 0, cap = 0, symcnt = 0;
	bool is64, mips64;
	bool warned = false;

	gelf_getehdr(m->elf, &eh);
	is64 = eh.e_ident[EI_CLASS] == ELFCLASS64;
	mips64 = is64 && eh.e_machine == EM_MIPS;
	while ((scn = elf_nextscn(m->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d, *symd = NULL;
		unsigned esz;
		bool rela;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_RELA && sh.sh_type != SHT_REL))
			continue;
		if (eh.e_type == ET_REL ? sh.sh_info != mapndx : sh.sh_info != 0 && sh.sh_info != mapndx)
			continue;
		rela = sh.sh_type == SHT_RELA;
		esz = (is64 ? 8 : 4) * (rela ? 3 : 2);
		d = elf_rawdata(scn, NULL);
		if (!d || d->d_size < sh.sh_size || sh.sh_size % esz) {
			free(v);
			return pg_err(diag, -EINVAL, "%s: offset %llu: relocation section %zu (%llu bytes) %s",
				      m->name, (unsigned long long)sh.sh_offset, elf_ndxscn(scn),
				      (unsigned long long)sh.sh_size,
				      sh.sh_size % esz ? "is not a whole number of entries"
						       : "runs past the end of the file");
		}
		if (sh.sh_link) {
			Elf_Scn *ss = elf_getscn(m->elf, sh.sh_link);
			GElf_Shdr ssh;

			if (ss && gelf_getshdr(ss, &ssh) && ssh.sh_entsize &&
			    (ssh.sh_type == SHT_SYMTAB || ssh.sh_type == SHT_DYNSYM) &&
			    (symd = elf_getdata(ss, NULL)))
				symcnt = symd->d_size / ssh.sh_entsize;
		}
		for (size_t off = 0; off + esz <= sh.sh_size; off += esz) {
			const uint8_t *e = (const uint8_t *)d->d_buf + off;
			uint64_t r_off = rdw(e, is64 ? 8 : 4, swap), addend = 0;
			uint32_t type, sym;
			enum rkind k;

			if (is64) {
				uint64_t info = rdw(e + 8, 8, swap);

				if (mips64) {
					sym = (uint32_t)rdw(e + 8, 4, swap);
					type = e[15];
					/* REL32 may pair with R_MIPS_64 (a 64-bit word);
					 * other compositions are not a map word's */
					if (e[13] || (e[14] && !(type == R_MIPS_REL32 && e[14] == R_MIPS_64)))
						type = R_MIPS_NONE;
				} else {
					sym = (uint32_t)(info >> 32);
					type = (uint32_t)info;
				}
				if (rela)
					addend = rdw(e + 16, 8, swap);
			} else {
				uint32_t info = (uint32_t)rdw(e + 4, 4, swap);

				sym = info >> 8;
				type = info & 0xff;
				if (rela)
					addend = (uint64_t)(int64_t)(int32_t)rdw(e + 8, 4, swap);
			}
			if (eh.e_type == ET_REL)
				r_off += map->sh_addr;
			if (r_off < map->sh_addr || r_off - map->sh_addr >= map->sh_size)
				continue;
			k = reloc_kind(eh.e_machine, type, sym);
			if (k == RK_NONE) {
				if (!warned && type != 0)
					pg_warn(diag, "%s: offset %llu: relocation type %u (machine %u) of the XRay map is not one perfgraft resolves",
						m->name, (unsigned long long)(sh.sh_offset + off), type,
						eh.e_machine);
				warned = true;
				continue;
			}
			if (!pg_grow((void **)&v, &cap, n + 1, sizeof(*v))) {
				free(v);
				return pg_err(diag, -ENOMEM, "%s: out of memory", m->name);
			}
			v[n] = (struct reloc){ .at = r_off, .a = addend, .kind = k, .rela = rela };
			if (sym && k != RK_RELATIVE) {
				GElf_Sym s;

				if (sym >= symcnt || !gelf_getsym(symd, (int)sym, &s)) {
					free(v);
					return pg_err(diag, -EINVAL, "%s: offset %llu: relocation names symbol %u; its symbol table has %zu",
						      m->name, (unsigned long long)(sh.sh_offset + off), sym,
						      symcnt);
				}
				/* in a .o, the value within its section, as llvm-xray takes it */
				v[n].s = s.st_shndx == SHN_UNDEF ? 0 : s.st_value;
			}
			n++;
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), reloc_cmp);
	*out = v;
	*nout = n;
	return 0;
}

/* The value of the map word at address at whose bytes hold w: relocated
 * when a relocation lands there (a word that holds its final value has
 * either none or one that gives that value again), else w itself. */
static uint64_t relocate(const struct reloc *v, size_t n, uint64_t at, uint64_t w, unsigned word,
			 bool *found)
{
	struct reloc key = { .at = at };
	const struct reloc *r = n ? bsearch(&key, v, n, sizeof(*v), reloc_cmp) : NULL;
	uint64_t a, val;

	*found = r != NULL;
	if (!r)
		return w;
	a = r->rela ? r->a : w;
	val = r->kind == RK_ABS ? r->s + a : r->kind == RK_PC ? r->s + a - at : a;
	return word == 4 ? val & 0xffffffffu : val;
}

/* What read_map_section() carries from one map section to the next. */
struct map_walk {
	unsigned word, entsize;
	bool swap;
	uint64_t prev_func;
	bool relocs_needed_warned;
};

/* The sleds of one xray_instr_map section.  A relocatable object has one
 * per function (clang 14), each with its own relocation section; the
 * linker concatenates them in section order, so their functions are
 * numbered on in that order, a new section starting a new function. */
static int read_map_section(pg_xray_map *m, Elf_Scn *scn, struct map_walk *w,
			    struct pg_diag *diag)
{
	unsigned word = w->word, entsize = w->entsize;
	bool swap = w->swap, first = true;
	struct reloc *relocs = NULL;
	size_t nrelocs = 0;
	GElf_Shdr sh;
	Elf_Data *d;
	int ret;

	gelf_getshdr(scn, &sh);
	if (sh.sh_type == SHT_NOBITS)
		return pg_err(diag, -EINVAL, "%s: xray_instr_map has no contents", m->name);
	d = elf_rawdata(scn, NULL);
	if (!d || d->d_size < sh.sh_size)
		return pg_err(diag, -EINVAL, "%s: offset %llu: xray_instr_map (%llu bytes) runs past the end of the file",
			      m->name, (unsigned long long)sh.sh_offset, (unsigned long long)sh.sh_size);
	/* llvm-xray refuses such a map too: entries of another size (another
	 * sled layout, a damaged section) would give functions of garbage */
	if (sh.sh_size % entsize)
		return pg_err(diag, -EINVAL, "%s: offset %llu: section xray_instr_map: size %llu is not a multiple of the %u-byte sled entry",
			      m->name, (unsigned long long)sh.sh_offset, (unsigned long long)sh.sh_size,
			      entsize);
	ret = load_relocs(m, elf_ndxscn(scn), &sh, swap, &relocs, &nrelocs, diag);
	if (ret < 0)
		return ret;
	ret = 0;
	for (uint64_t i = 0; i + entsize <= sh.sh_size; i += entsize) {
		const uint8_t *e = (const uint8_t *)d->d_buf + i;
		uint64_t at = sh.sh_addr + i;
		uint64_t raw = rdw(e + word, word, swap);
		bool relocated;
		uint64_t func = relocate(relocs, nrelocs, at + word, raw, word, &relocated);
		uint8_t kind = e[2 * word], always = e[2 * word + 1], ver = e[2 * word + 2];
		struct pg_xray_func *f;

		if (ver >= 2) {
			int64_t rel = word == 8 ? (int64_t)func : (int64_t)(int32_t)func;

			func = at + word + (uint64_t)rel;
			if (word == 4)
				func &= 0xffffffffu;
		} else if (raw == 0 && !relocated && !w->relocs_needed_warned) {
			pg_warn(diag, "%s: offset %llu: absolute sled entry with no address or relocation",
				m->name, (unsigned long long)(sh.sh_offset + i));
			w->relocs_needed_warned = true;
		}
		if (kind > 5)
			pg_warn(diag, "%s: offset %llu: unknown sled kind %u", m->name,
				(unsigned long long)(sh.sh_offset + i), kind);
		if (m->nfuncs == 0 || func != w->prev_func || first) {
			if (m->nfuncs >= 0x0fffffff) {
				ret = pg_err(diag, -E2BIG, "%s: more XRay functions than IDs", m->name);
				break;
			}
			if (!pg_grow((void **)&m->funcs, &m->cap, m->nfuncs + 1, sizeof(*m->funcs))) {
				ret = pg_err(diag, -ENOMEM, "%s: out of memory", m->name);
				break;
			}
			f = &m->funcs[m->nfuncs++];
			memset(f, 0, sizeof(*f));
			f->id = (uint32_t)m->nfuncs;
			f->addr = func;
			w->prev_func = func;
			first = false;
		}
		f = &m->funcs[m->nfuncs - 1];
		if (kind < 8)
			f->sled_kinds |= (uint8_t)(1u << kind);
		f->always_instrument |= always != 0;
	}
	free(relocs);
	return ret;
}

static int read_map(pg_xray_map *m, struct pg_diag *diag)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Ehdr eh;
	struct map_walk w = { 0 };
	bool found = false;
	int ret = 0;

	gelf_getehdr(m->elf, &eh);
	w.word = eh.e_ident[EI_CLASS] == ELFCLASS64 ? 8 : 4;
	w.entsize = w.word == 8 ? 32 : 16;
	w.swap = (eh.e_ident[EI_DATA] == ELFDATA2MSB) != (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
	if (elf_getshdrstrndx(m->elf, &shstrndx) < 0)
		return pg_err(diag, -EINVAL, "%s: no section name table (%s)", m->name, elf_errmsg(-1));
	while (!ret && (scn = elf_nextscn(m->elf, scn))) {
		GElf_Shdr sh;
		const char *nm;

		if (!gelf_getshdr(scn, &sh))
			continue;
		nm = elf_strptr(m->elf, shstrndx, sh.sh_name);
		if (nm && !strcmp(nm, "xray_instr_map")) {
			found = true;
			ret = read_map_section(m, scn, &w, diag);
		}
	}
	if (!found)
		return pg_err(diag, -ENOENT, "%s: no xray_instr_map section: not built with -fxray-instrument",
			      m->name);
	return ret;
}

/* Code ranges of the compile units.  clang emits no .debug_aranges, and
 * libdw's dwarf_addrdie relies on them (elfutils 0.188), so the CUs are
 * found from their own low/high_pc and ranges. */
struct cu_range {
	Dwarf_Addr lo, hi;
	Dwarf_Off off;
};

static int cmp_cu_range(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static struct cu_range *cu_ranges(Dwarf *dw, size_t *n)
{
	struct cu_range *r = NULL;
	size_t cap = 0;
	Dwarf_Off off = 0, next;
	size_t hsize;

	*n = 0;
	while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		Dwarf_Addr base, lo, hi;
		ptrdiff_t it = 0;

		if (dwarf_offdie(dw, off + hsize, &cu))
			while ((it = dwarf_ranges(&cu, it, &base, &lo, &hi)) > 0) {
				if (hi <= lo)
					continue;
				if (!pg_grow((void **)&r, &cap, *n + 1, sizeof(*r))) {
					free(r);
					*n = 0;
					return NULL;
				}
				r[(*n)++] = (struct cu_range){ lo, hi, off + hsize };
			}
		off = next;
	}
	if (*n)
		qsort(r, *n, sizeof(*r), cmp_cu_range);
	return r;
}

/* The line-table row for addr as LLVM's symbolizer picks it: the last row
 * at or below addr in its sequence (with several rows at one address, the
 * last), none past an end_sequence. */
static Dwarf_Line *row_at(Dwarf_Die *cu, Dwarf_Addr addr)
{
	Dwarf_Lines *lines;
	size_t n, lo = 0, hi;
	Dwarf_Line *best = NULL;
	Dwarf_Addr a;
	bool end;

	if (dwarf_getsrclines(cu, &lines, &n) != 0 || !n)
		return NULL;
	hi = n;
	while (lo < hi) {		/* first row above addr */
		size_t mid = lo + (hi - lo) / 2;
		Dwarf_Line *l = dwarf_onesrcline(lines, mid);

		if (l && dwarf_lineaddr(l, &a) == 0 && a <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0)
		best = dwarf_onesrcline(lines, lo - 1);
	if (!best || dwarf_lineendsequence(best, &end) != 0 || end)
		return NULL;
	return best;
}

static bool cu_of(Dwarf *dw, const struct cu_range *r, size_t n, Dwarf_Addr addr,
		  Dwarf_Die *cu)
{
	size_t lo = 0, hi = n;

	if (dwarf_addrdie(dw, addr, cu))
		return true;
	while (lo < hi) {		/* first range starting above addr */
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* ranges of different CUs do not nest; a few may share a start */
	for (size_t i = lo; i-- > 0 && lo - i <= 8;)
		if (addr < r[i].hi)
			return dwarf_offdie(dw, r[i].off, cu) != NULL;
	return false;
}

static int name_funcs(pg_xray_map *m, struct pg_diag *diag)
{
	struct sym *syms = NULL;
	size_t nsyms = 0;
	Dwarf *dw;
	int ret;

	if ((ret = load_syms(m, &syms, &nsyms, diag)) < 0)
		return ret;
	dw = dwarf_begin_elf(m->elf, DWARF_C_READ, NULL);
	struct cu_range *cur = NULL;
	size_t ncur = 0;

	if (dw)
		cur = cu_ranges(dw, &ncur);
	for (size_t i = 0; i < m->nfuncs; i++) {
		struct pg_xray_func *f = &m->funcs[i];
		const struct sym *s = find_sym(syms, nsyms, f->addr);
		char *name;

		if (s) {
			f->linkage_name = strdup(s->name);
			f->size = s->size;
			name = pg_demangle(s->name);	/* as perf names it */
			if (s->addr != f->addr && name) {	/* inside another symbol */
				char *tmp;

				if (asprintf(&tmp, "%s+0x%llx", name,
					     (unsigned long long)(f->addr - s->addr)) < 0)
					tmp = NULL;
				free(name);
				name = tmp;
			}
		} else if (asprintf(&name, "@(%llx)", (unsigned long long)f->addr) < 0) {
			name = NULL;	/* llvm-xray's spelling for an unnamed address */
		}
		f->name = name;
		if ((s && !f->linkage_name) || !name) {
			free(syms);
			free(cur);
			if (dw)
				dwarf_end(dw);
			return pg_err(diag, -ENOMEM, "%s: out of memory", m->name);
		}
		if (dw) {
			Dwarf_Die cu;
			Dwarf_Line *ln;

			if (cu_of(dw, cur, ncur, f->addr, &cu) && (ln = row_at(&cu, f->addr))) {
				const char *file = dwarf_linesrc(ln, NULL, NULL);
				int line = 0, col = 0;

				dwarf_lineno(ln, &line);
				dwarf_linecol(ln, &col);
				if (file) {
					f->file = strdup(file);
					f->line = (unsigned)line;
					f->column = (unsigned)col;
				}
			}
		}
	}
	free(syms);
	free(cur);
	if (dw)
		dwarf_end(dw);
	return 0;
}

static int cmp_yaml_id(const void *a, const void *b)
{
	const struct pg_yaml_sled *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* An `llvm-xray extract` map: IDs, addresses and names as written there
 * (llvm-xray takes its IDs as given too); no binary behind it. */
static int read_yaml(pg_xray_map *m, const char *buf, size_t len, struct pg_diag *diag)
{
	struct pg_yaml_sled *v;
	size_t n;
	int ret = pg_yaml_map_parse(buf, len, m->name, diag, &v, &n);

	if (ret < 0)
		return ret;
	m->yaml = true;
	if (n)
		qsort(v, n, sizeof(*v), cmp_yaml_id);
	for (size_t i = 0; i < n && ret == 0; i++) {
		struct pg_xray_func *f = m->nfuncs ? &m->funcs[m->nfuncs - 1] : NULL;

		if (!f || f->id != v[i].id) {
			if (!pg_grow((void **)&m->funcs, &m->cap, m->nfuncs + 1, sizeof(*m->funcs))) {
				ret = pg_err(diag, -ENOMEM, "%s: out of memory", m->name);
				break;
			}
			f = &m->funcs[m->nfuncs++];
			memset(f, 0, sizeof(*f));
			f->id = v[i].id;
			f->addr = v[i].function;
			f->line = v[i].line;	/* the first entry's, until named */
		} else if (f->addr != v[i].function) {
			ret = pg_err(diag, -EINVAL, "%s: line %u: id %u is function 0x%llx here and 0x%llx at line %u",
				     m->name, v[i].line, f->id, (unsigned long long)v[i].function,
				     (unsigned long long)f->addr, f->line);
			break;
		}
		f->sled_kinds |= (uint8_t)(1u << v[i].kind);
		f->always_instrument |= v[i].always_instrument;
		if (!f->linkage_name && v[i].function_name &&
		    !(f->linkage_name = strdup(v[i].function_name)))
			ret = pg_err(diag, -ENOMEM, "%s: out of memory", m->name);
	}
	pg_yaml_sleds_free(v, n);
	for (size_t i = 0; i < m->nfuncs && ret == 0; i++) {
		struct pg_xray_func *f = &m->funcs[i];
		char *name = NULL;

		f->line = 0;
		if (f->linkage_name) {
			name = pg_demangle(f->linkage_name);
			if (name && !strcmp(name, f->linkage_name) &&
			    strncmp(f->linkage_name, "_Z", 2)) {	/* not a symbol's name */
				free((char *)f->linkage_name);
				f->linkage_name = NULL;
			}
		} else if (asprintf(&name, "@(%llx)", (unsigned long long)f->addr) < 0) {
			name = NULL;
		}
		if (!(f->name = name))
			ret = pg_err(diag, -ENOMEM, "%s: out of memory", m->name);
	}
	if (ret < 0)
		return ret;
	m->dense = true;
	for (size_t i = 0; i < m->nfuncs; i++)
		m->dense &= m->funcs[i].id == i + 1;
	m->max_id = m->nfuncs ? m->funcs[m->nfuncs - 1].id : 0;
	return 0;
}

/* Reads the map of an opened ELF, or the YAML one it turns out to be;
 * closes m on failure. */
static int map_common(pg_xray_map *m, struct pg_diag *diag, pg_xray_map **out)
{
	int ret;

	if (elf_kind(m->elf) != ELF_K_ELF) {
		size_t len = 0;
		const char *raw = elf_rawfile(m->elf, &len);

		if (raw && pg_yaml_map_probe(raw, len))
			ret = read_yaml(m, raw, len, diag);
		else
			ret = pg_err(diag, -EINVAL, "%s: offset 0: not an ELF file nor an llvm-xray YAML instrumentation map",
				     m->name);
	} else if ((ret = read_binary_info(m, diag)) >= 0 && (ret = read_map(m, diag)) >= 0) {
		ret = name_funcs(m, diag);
		m->dense = true;
		m->max_id = (uint32_t)m->nfuncs;
	}
	if (ret < 0) {
		pg_xray_map_close(m);
		return ret;
	}
	*out = m;
	return 0;
}

int pg_xray_map_open_mem(const void *buf, size_t len, const char *name,
			 struct pg_diag *diag, pg_xray_map **out)
{
	pg_xray_map *m = calloc(1, sizeof(*m));
	int ret;

	*out = NULL;
	if (!m)
		return pg_err(diag, -ENOMEM, "%s: out of memory", name);
	m->fd = -1;
	elf_version(EV_CURRENT);
	m->name = strdup(name);
	m->bin.path = strdup(name);
	/* read-only use: libelf copies whatever it converts */
	m->elf = elf_memory((char *)buf, len);
	if (!m->name || !m->bin.path || !m->elf) {
		ret = m->elf ? pg_err(diag, -ENOMEM, "%s: out of memory", name)
			     : pg_err(diag, -EINVAL, "%s: %s", name, elf_errmsg(-1));
		pg_xray_map_close(m);
		return ret;
	}
	return map_common(m, diag, out);
}

int pg_xray_map_open(const char *binary, struct pg_diag *diag, pg_xray_map **out)
{
	pg_xray_map *m = calloc(1, sizeof(*m));
	int ret, e;

	*out = NULL;
	if (!m)
		return pg_err(diag, -ENOMEM, "%s: out of memory", binary);
	elf_version(EV_CURRENT);
	m->fd = open(binary, O_RDONLY | O_CLOEXEC);
	if (m->fd < 0) {
		e = errno;
		free(m);
		return pg_err(diag, -e, "%s: %s", binary, strerror(e));
	}
	m->name = strdup(binary);
	m->bin.path = realpath(binary, NULL);
	if (!m->name || !m->bin.path) {
		ret = pg_err(diag, -ENOMEM, "%s: out of memory", binary);
		pg_xray_map_close(m);
		return ret;
	}
	m->elf = elf_begin(m->fd, ELF_C_READ_MMAP, NULL);
	if (!m->elf) {
		ret = pg_err(diag, -EINVAL, "%s: %s", binary, elf_errmsg(-1));
		pg_xray_map_close(m);
		return ret;
	}
	return map_common(m, diag, out);
}

size_t pg_xray_map_count(const pg_xray_map *m)
{
	return m->max_id;
}

const struct pg_xray_func *pg_xray_map_func(const pg_xray_map *m, uint32_t id)
{
	size_t lo = 0, hi = m->nfuncs;

	if (m->dense)
		return id >= 1 && id <= m->nfuncs ? &m->funcs[id - 1] : NULL;
	while (lo < hi) {	/* a YAML map's IDs may have gaps */
		size_t mid = lo + (hi - lo) / 2;

		if (m->funcs[mid].id == id)
			return &m->funcs[mid];
		if (m->funcs[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct pg_xray_binary *pg_xray_map_binary(const pg_xray_map *m)
{
	return m->yaml ? NULL : &m->bin;
}

void pg_xray_map_close(pg_xray_map *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nfuncs; i++) {
		free((char *)m->funcs[i].name);
		free((char *)m->funcs[i].linkage_name);
		free((char *)m->funcs[i].file);
	}
	free(m->funcs);
	if (m->elf)
		elf_end(m->elf);
	if (m->fd >= 0)
		close(m->fd);
	free(m->bin.path);
	free(m->name);
	free(m);
}
