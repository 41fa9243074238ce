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

/* libstdc++'s demangler (C linkage); perf and llvm-xray show C++ names
 * demangled with their parameter lists, and so do we. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

struct sym {
	uint64_t addr, size;
	const char *name;	/* in the ELF's string table */
};

struct pg_xray_map {
	struct pg_xray_func *funcs;	/* by id - 1 */
	size_t nfuncs, cap;
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

struct reloc {
	uint64_t at, val;
};

static int reloc_cmp(const void *a, const void *b)
{
	const struct reloc *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

/* RELA relocations that land in [lo, hi): version 0/1 entries of
 * position-independent binaries get their addresses from the addends. */
static int load_relocs(pg_xray_map *m, uint64_t lo, uint64_t hi, struct reloc **out,
		       size_t *nout, struct pg_diag *diag)
{
	Elf_Scn *scn = NULL;
	struct reloc *v = NULL;
	size_t n = 0, cap = 0;

	while ((scn = elf_nextscn(m->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < d->d_size / sh.sh_entsize; i++) {
			GElf_Rela r;

			if (!gelf_getrela(d, (int)i, &r) || r.r_offset < lo || r.r_offset >= hi)
				continue;
			if (!pg_grow((void **)&v, &cap, n + 1, sizeof(*v))) {
				free(v);
				return pg_err(diag, -ENOMEM, "%s: out of memory", m->name);
			}
			v[n].at = r.r_offset;
			v[n].val = (uint64_t)r.r_addend;
			n++;
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), reloc_cmp);
	*out = v;
	*nout = n;
	return 0;
}

static bool find_reloc(const struct reloc *v, size_t n, uint64_t at, uint64_t *val)
{
	struct reloc key = { at, 0 };
	const struct reloc *r = n ? bsearch(&key, v, n, sizeof(*v), reloc_cmp) : NULL;

	if (r)
		*val = r->val;
	return r != NULL;
}

static int read_map(pg_xray_map *m, struct pg_diag *diag)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Ehdr eh;
	unsigned word, entsize;
	bool swap;
	uint64_t prev_func = 0;
	bool relocs_needed_warned = false, relocs_loaded = false;
	struct reloc *relocs = NULL;
	size_t nrelocs = 0;
	int ret = 0;

	gelf_getehdr(m->elf, &eh);
	word = eh.e_ident[EI_CLASS] == ELFCLASS64 ? 8 : 4;
	entsize = word == 8 ? 32 : 16;
	swap = (eh.e_ident[EI_DATA] == ELFDATA2MSB) != (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
	if (elf_getshdrstrndx(m->elf, &shstrndx) < 0)
		return pg_err(diag, -EINVAL, "%s: no section name table (%s)", m->name, elf_errmsg(-1));
	while ((scn = elf_nextscn(m->elf, scn))) {
		GElf_Shdr sh;
		const char *nm;

		if (!gelf_getshdr(scn, &sh))
			continue;
		nm = elf_strptr(m->elf, shstrndx, sh.sh_name);
		if (nm && !strcmp(nm, "xray_instr_map"))
			break;
	}
	if (!scn)
		return pg_err(diag, -ENOENT, "%s: no xray_instr_map section: not built with -fxray-instrument",
			      m->name);

	GElf_Shdr sh;
	Elf_Data *d;

	gelf_getshdr(scn, &sh);
	if (sh.sh_type == SHT_NOBITS)
		return pg_err(diag, -EINVAL, "%s: xray_instr_map has no contents", m->name);
	d = elf_rawdata(scn, NULL);
	if (!d || d->d_size < sh.sh_size)
		return pg_err(diag, -EINVAL, "%s: offset %llu: xray_instr_map (%llu bytes) runs past the end of the file",
			      m->name, (unsigned long long)sh.sh_offset, (unsigned long long)sh.sh_size);
	if (sh.sh_size % entsize)
		pg_warn(diag, "%s: offset %llu: xray_instr_map size %llu is not a multiple of %u; the tail is ignored",
			m->name, (unsigned long long)sh.sh_offset, (unsigned long long)sh.sh_size, entsize);
	for (uint64_t i = 0; i + entsize <= sh.sh_size; i += entsize) {
		const uint8_t *e = (const uint8_t *)d->d_buf + i;
		uint64_t at = sh.sh_addr + i;
		uint64_t func = rdw(e + word, word, swap);
		uint8_t kind = e[2 * word], always = e[2 * word + 1], ver = e[2 * word + 2];
		struct pg_xray_func *f;

		if (ver >= 2) {
			int64_t rel = word == 8 ? (int64_t)func : (int64_t)(int32_t)func;

			func = at + word + (uint64_t)rel;
			if (word == 4)
				func &= 0xffffffffu;
		} else if (func == 0) {
			if (!relocs_loaded) {
				ret = load_relocs(m, sh.sh_addr, sh.sh_addr + sh.sh_size, &relocs,
						  &nrelocs, diag);
				if (ret < 0)
					return ret;
				relocs_loaded = true;
			}
			if (!find_reloc(relocs, nrelocs, at + word, &func) && !relocs_needed_warned) {
				pg_warn(diag, "%s: offset %llu: absolute sled entry with no address or relocation",
					m->name, (unsigned long long)(sh.sh_offset + i));
				relocs_needed_warned = true;
			}
		}
		if (kind > 5)
			pg_warn(diag, "%s: offset %llu: unknown sled kind %u", m->name,
				(unsigned long long)(sh.sh_offset + i), kind);
		if (m->nfuncs == 0 || func != prev_func) {
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
			prev_func = func;
		}
		f = &m->funcs[m->nfuncs - 1];
		if (kind < 8)
			f->sled_kinds |= (uint8_t)(1u << kind);
		f->always_instrument |= always != 0;
	}
	free(relocs);
	return ret;
}

static char *demangle(const char *s)
{
	int status = -1;
	char *d = NULL;

	if (s[0] == '_' && s[1] == 'Z')
		d = __cxa_demangle(s, NULL, NULL, &status);
	if (d && status == 0)
		return d;
	free(d);
	return strdup(s);
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
			name = demangle(s->name);
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

/* Reads the map of an opened ELF; closes m on failure. */
static int map_common(pg_xray_map *m, struct pg_diag *diag, pg_xray_map **out)
{
	int ret;

	if (elf_kind(m->elf) != ELF_K_ELF)
		ret = pg_err(diag, -EINVAL, "%s: offset 0: not an ELF file", m->name);
	else if ((ret = read_binary_info(m, diag)) >= 0 && (ret = read_map(m, diag)) >= 0)
		ret = name_funcs(m, diag);
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
	return m->nfuncs;
}

const struct pg_xray_func *pg_xray_map_func(const pg_xray_map *m, uint32_t id)
{
	return id >= 1 && id <= m->nfuncs ? &m->funcs[id - 1] : NULL;
}

const struct pg_xray_binary *pg_xray_map_binary(const pg_xray_map *m)
{
	return &m->bin;
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
