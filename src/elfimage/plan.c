/* SPDX-License-Identifier: MIT */
/* The memory layout (elfimage.h): what pg_elfset_add keeps of each
 * LOAD and MOVE, the frames noted on stacks, and at finish the regions,
 * generations, carried code and their images, within the dump's and the
 * run's bounds (or the packed layout instead).  Apart from set.c because
 * it is the one layout decided at the end, over every place at once. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elfimage/builder.h"

/* A set of a region's places by address rank (their order in byaddr):
 * bit levels, each bit of a level saying a word below it is not empty,
 * so that the nearest member either side of a rank is a few word reads
 * away whatever the set's size (glibc's tsearch tree did this in the
 * generations loop for a tenth of a large inject's time). */
#define RS_LEVELS 6	/* 64^6 ranks: more than a uint32_t index */
struct rankset {
	uint64_t *lv[RS_LEVELS];
	size_t nbits[RS_LEVELS];
	int top;
};

static int rs_init(struct rankset *s, size_t n)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0;; i++) {
		size_t words = (n + 63) / 64;

		s->nbits[i] = n;
		s->lv[i] = calloc(words ? words : 1, sizeof(uint64_t));
		if (!s->lv[i])
			return -ENOMEM;
		s->top = i;
		if (words <= 1 || i + 1 == RS_LEVELS)
			return 0;
		n = words;
	}
}

static void rs_free(struct rankset *s)
{
	for (int i = 0; i < RS_LEVELS; i++)
		free(s->lv[i]);
}

static void rs_add(struct rankset *s, size_t k)
{
	for (int i = 0; i <= s->top; i++, k /= 64) {
		uint64_t *w = &s->lv[i][k / 64], was = *w;

		*w |= 1ull << (k % 64);
		if (was)
			return;	/* the levels above have it already */
	}
}

static void rs_del(struct rankset *s, size_t k)
{
	for (int i = 0; i <= s->top; i++, k /= 64) {
		uint64_t *w = &s->lv[i][k / 64];

		*w &= ~(1ull << (k % 64));
		if (*w)
			return;
	}
}

/* The smallest member >= k, or SIZE_MAX. */
static size_t rs_next(const struct rankset *s, size_t k)
{
	int i = 0;

	for (;;) {
		uint64_t m;

		if (k >= s->nbits[i])
			return SIZE_MAX;
		m = s->lv[i][k / 64] & (~0ull << (k % 64));
		if (m) {
			k = k / 64 * 64 + (size_t)__builtin_ctzll(m);
			break;
		}
		if (i == s->top)
			return SIZE_MAX;
		k = k / 64 + 1;
		i++;
	}
	while (i-- > 0)
		k = k * 64 + (size_t)__builtin_ctzll(s->lv[i][k]);
	return k;
}

/* The largest member <= k, or SIZE_MAX. */
static size_t rs_prev(const struct rankset *s, size_t k)
{
	int i = 0;

	for (;;) {
		uint64_t m = s->lv[i][k / 64];

		if (k % 64 != 63)
			m &= (2ull << (k % 64)) - 1;
		if (m) {
			k = k / 64 * 64 + 63 - (size_t)__builtin_clzll(m);
			break;
		}
		if (i == s->top || k < 64)
			return SIZE_MAX;
		k = k / 64 - 1;
		i++;
	}
	while (i-- > 0)
		k = k * 64 + 63 - (size_t)__builtin_clzll(s->lv[i][k]);
	return k;
}

/* Whether two places share an address. */
static bool overlap(const struct mplace *x, const struct mplace *y)
{
	return !(x->addr + x->len <= y->addr) && !(y->addr + y->len <= x->addr);
}

static int cmp_addr(const void *a, const void *b, void *arg)
{
	const struct mplace *pl = arg;
	const struct mplace *x = &pl[*(const uint32_t *)a], *y = &pl[*(const uint32_t *)b];

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* Sorts places v by address (cmp_addr).  A JIT's places often come in
 * address order already (a bump allocator): one pass finds that, where
 * the sort was a tenth of a MOVE-heavy finish. */
static void sort_addr(uint32_t *v, size_t n, const struct mplace *pl)
{
	size_t i = 1;

	while (i < n && cmp_addr(&v[i - 1], &v[i], (void *)pl) < 0)
		i++;
	if (i < n)
		qsort_r(v, n, sizeof(*v), cmp_addr, (void *)pl);
}

struct region {
	uint64_t lo, hi;	/* [lo, hi): every place of it */
	uint64_t base;		/* with carry_live: every image's base, less its shift */
	uint64_t next_lo;	/* the next region's lo, or UINT64_MAX */
	uint64_t slot;		/* where the next image's tables go */
	uint32_t *order;	/* its places in event order */
	size_t n;
	size_t at;		/* its first place in byaddr */
};

/* With carry_live, the images of a generation: one per family, the
 * region (home) of the places' LOADs and the base that puts each at its
 * LOAD's offset in that region's images (a MOVE's copy: its address less
 * that offset). */
struct famkey {
	uint32_t home;		/* the region of its LOAD */
	uint64_t base;		/* its image's base */
	uint32_t at;		/* the place */
	bool own;		/* of the generation, else carried */
};

/* The region's own image first (its LOADs' home and base), then by home
 * and base; within one, its own places, then the carried ones, each in
 * event order. */
static int cmp_fam(const void *a, const void *b, void *arg)
{
	const struct famkey *x = a, *y = b, *m = arg;
	bool xm = x->home == m->home && x->base == m->base;
	bool ym = y->home == m->home && y->base == m->base;

	if (xm != ym)
		return xm ? -1 : 1;
	if (x->home != y->home)
		return x->home < y->home ? -1 : 1;
	if (x->base != y->base)
		return x->base < y->base ? -1 : 1;
	if (x->own != y->own)
		return x->own ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* One image of the memory layout: the places of one generation of a
 * region, plus the live code carried into it.  With carry_live, a
 * function has one file offset, its LOAD's less its home region's base,
 * in every image it is in, and those images one file name (the home
 * region's), each in a directory of its own (the generation's; a MOVE's
 * copy, at another base, numbered after it): perf's dso short name and symbol start (what
 * perf report --sort sym and dso,sym key rows on) are the same for all
 * its copies, and perf shows one row for it as for perf inject's one
 * file per function.  first: the generation's first place (nown may be
 * 0 in an image of a shift only carried code has). */
static int mem_image(pg_elfset *set, struct region *rg, uint32_t ri, uint32_t gen,
		     uint32_t mi, const struct region *home, uint32_t hi, uint64_t hbase,
		     const struct mplace *first,
		     const uint32_t *own, size_t nown, const uint32_t *carry, size_t ncarry)
{
	struct mplace *pl = set->places;
	size_t nm = nown + ncarry;
	uint32_t *mem = malloc(nm * sizeof(*mem));
	uint64_t base, off0, lowest, tab_addr;
	struct cfi_tables t = { 0 };
	struct img *im = NULL;
	struct pg_elf_map *m;
	size_t pub;
	bool warned = false;
	char name[160];
	int ret;

	if (!mem)
		return pg_err(set->diag, -ENOMEM, "out of memory");
	memcpy(mem, own, nown * sizeof(*mem));
	memcpy(mem + nown, carry, ncarry * sizeof(*mem));
	sort_addr(mem, nm, pl);
	if (!set->carry_live)
		snprintf(name, sizeof(name), "%s-r%u-g%u.so", set->prefix, ri, gen);
	else if (!mi)
		snprintf(name, sizeof(name), "%s-r%u-g%u/%s-r%u.so", set->prefix, ri, gen,
			 set->prefix, hi);
	else
		snprintf(name, sizeof(name), "%s-r%u-g%u-m%u/%s-r%u.so", set->prefix, ri, gen,
			 mi, set->prefix, hi);
	ret = pg_files_new_image(set, name, &im);
	if (ret)
		goto out;
	im->memory = true;
	/* the lowest function right after the headers, on its own 64-byte
	 * phase; the PT_LOAD (and libdw's module) starts at that line.  With
	 * carry_live the region's lowest, for every image of it (below this
	 * image's own lowest function: a hole) */
	lowest = set->carry_live ? home->lo : pl[mem[0]].addr;
	off0 = pg_align(pg_emit_headers_end(set), 64) + (lowest & 63);
	base = set->carry_live ? hbase : lowest - off0;
	im->load_off = off0 & ~(uint64_t)63;
	/* .text from the image's own lowest function */
	im->text_off = im->text_end = pl[mem[0]].addr - base;
	pg_files_stream(set, im);
	/* its functions at once, not copied at each doubling */
	if (!pg_grow((void **)&im->funcs, &im->cap, nm, sizeof(*im->funcs))) {
		ret = pg_err(set->diag, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nm; i++) {
		const struct mplace *p = &pl[mem[i]];
		const struct mrec *r = &set->recs[p->rec];
		struct pg_code_event ev = {
			.kind = PG_CODE_LOAD, .id = r->id, .addr = p->addr, .size = r->size,
			.name = r->name, .code = r->code, .lines = pg_plan_rows(set, r),
			.nlines = r->nlines, .inlines = r->inl, .ninlines = r->ninl,
			.cfi = r->has_cfi ? &r->cfi : NULL,
		};

		if (r->nlines && !ev.lines) {
			ret = pg_err(set->diag, -ENOMEM, "out of memory");
			goto out;
		}
		/* a MOVE's copy or carried code: its warnings were given */
		ret = pg_emit_add_func(set, im, &ev, p->addr - base, p->move || p->gen != gen,
				       pg_plan_cdig(set, p->rec));
		if (ret)
			goto out;
	}
	/* the tables: after the region's code and the tables of its
	 * earlier generations */
	tab_addr = rg->slot;
	im->meh.big_endian = im->mhdr.big_endian = set->hdr.big_endian;
	t.eh = &im->meh;
	t.eh_addr = tab_addr;
	t.be = set->hdr.big_endian;
	t.ptrsize = set->hdr.is_64bit ? 8 : 4;
	for (size_t i = 0; i < nm; i++) {
		const struct mplace *p = &pl[mem[i]];
		const struct mrec *r = &set->recs[p->rec];
		const char *why;

		if (!r->has_cfi)
			continue;
		if (!pg_cfi_merge(&t, r->cfi.eh_frame, r->cfi.eh_frame_size,
				  p->addr + pg_align(r->size, 8), p->addr, p->addr + r->size,
				  &why) &&
		    !warned && p->gen == gen && !p->move) {
			pg_warn(set->diag, "%s: function at 0x%llx (code index %llu): its unwind tables have %s; unwound by frame pointers",
				set->dump_name, (unsigned long long)p->addr,
				(unsigned long long)r->id, why);
			warned = true;
		}
	}
	pg_buf_u32(&im->meh, 0);	/* the terminator */
	{
		uint64_t hdr_addr = tab_addr + pg_align(im->meh.len, 4);
		uint64_t room = UINT64_MAX - tab_addr;
		bool fits = im->meh.len + 16 + 8 * (uint64_t)t.n < room;

		/* the .eh_frame_hdr's entries are 32-bit offsets from it */
		for (size_t i = 0; i < t.n && fits; i++)
			fits = t.ents[i].pc - hdr_addr + 0x80000000ull <= 0xffffffffull &&
			       t.ents[i].fde - hdr_addr + 0x80000000ull <= 0xffffffffull;
		if (!fits) {
			pg_warn(set->diag, "%s: image %s: its unwind tables do not fit after the code; unwound by frame pointers",
				set->dump_name, name);
			t.n = 0;
			im->meh.len = 0;
			pg_buf_u32(&im->meh, 0);
			hdr_addr = tab_addr + 4;
		}

		if (t.n)	/* ents is NULL without FDEs */
			qsort(t.ents, t.n, sizeof(*t.ents), pg_cfi_cmp_fde);
		pg_buf_u8(&im->mhdr, 1);
		pg_buf_u8(&im->mhdr, 0x1b);	/* eh_frame_ptr: pcrel sdata4 */
		pg_buf_u8(&im->mhdr, 0x03);	/* fde_count: udata4 */
		pg_buf_u8(&im->mhdr, 0x3b);	/* table: datarel sdata4 */
		pg_buf_u32(&im->mhdr, (uint32_t)(int32_t)(tab_addr - (hdr_addr + 4)));
		pg_buf_u32(&im->mhdr, (uint32_t)t.n);
		for (size_t i = 0; i < t.n; i++) {
			pg_buf_u32(&im->mhdr, (uint32_t)(int32_t)(t.ents[i].pc - hdr_addr));
			pg_buf_u32(&im->mhdr, (uint32_t)(int32_t)(t.ents[i].fde - hdr_addr));
		}
		im->nfde = t.n;
		im->meh_off = tab_addr - base;
		rg->slot = pg_align(hdr_addr + im->mhdr.len, 16);
		if (rg->slot > rg->next_lo && t.n)
			pg_warn(set->diag, "%s: the unwind tables of image %s reach the next code region",
				set->dump_name, name);
	}
	pub = im->pub;
	ret = pg_files_write_image(set, im);	/* takes im */
	im = NULL;
	if (ret)
		goto out;
	for (size_t i = 0; i < nown; i++) {
		pl[own[i]].img = (uint32_t)pub;
		pl[own[i]].pgoff = pl[own[i]].addr - base;
	}
	/* its maps: the carried code and the tables when the generation
	 * starts, then each place of its own */
	{
		for (size_t i = 0; i < ncarry; i++) {
			const struct mplace *p = &pl[carry[i]];

			if (!(m = pg_set_new_map(set))) {
				ret = -ENOMEM;
				goto out;
			}
			*m = (struct pg_elf_map){ .kind = PG_ELF_MAP_CARRY, .time = first->time,
						  .pid = p->pid, .tid = p->tid,
						  .id = set->recs[p->rec].id, .start = p->addr,
						  .len = p->len, .pgoff = p->addr - base,
						  .image = (uint32_t)pub,
						  .size = set->recs[p->rec].size,
						  .name = set->recs[p->rec].name };
		}
		if (t.n) {
			if (!(m = pg_set_new_map(set))) {
				ret = -ENOMEM;
				goto out;
			}
			*m = (struct pg_elf_map){ .kind = PG_ELF_MAP_TABLES, .time = first->time,
						  .pid = first->pid, .tid = first->tid,
						  .start = tab_addr, .len = rg->slot - tab_addr,
						  .pgoff = tab_addr - base, .image = (uint32_t)pub };
		}
		for (size_t i = 0; i < nown; i++) {
			const struct mplace *p = &pl[own[i]];

			if (!(m = pg_set_new_map(set))) {
				ret = -ENOMEM;
				goto out;
			}
			*m = (struct pg_elf_map){ .kind = p->move ? PG_ELF_MAP_MOVE : PG_ELF_MAP_LOAD,
						  .time = p->time, .pid = p->pid, .tid = p->tid,
						  .id = set->recs[p->rec].id, .start = p->addr,
						  .len = p->len, .pgoff = p->addr - base,
						  .image = (uint32_t)pub,
						  .size = set->recs[p->rec].size,
						  .name = set->recs[p->rec].name };
			/* with user stacks not before the generation's carried
			 * code: a stack must not hold frames of two of the
			 * region's images */
			if (!p->move)
				pg_set_map_since(set, m, !set->carry_live || p->since > first->time
							 ? p->since : first->time);
		}
	}
out:
	free(t.ents);
	pg_files_free_image(im);
	free(mem);
	return ret;
}

/* The images of generation gen of region ri: one image, or with
 * carry_live one per family (struct famkey), the region's own first. */
static int gen_images(pg_elfset *set, struct region *rg, uint32_t ri, uint32_t gen,
		      const uint32_t *home, uint64_t *room, const uint32_t *own, size_t nown,
		      const uint32_t *carry, size_t ncarry)
{
	const struct mplace *pl = set->places, *first = &pl[own[0]];
	struct famkey *k, main = { .home = ri, .base = rg[ri].base };
	uint32_t *ids;
	size_t n = nown + ncarry;
	uint32_t mi = 0;
	int ret = 0;

	if (!set->carry_live)
		return mem_image(set, &rg[ri], ri, gen, 0, NULL, ri, 0, first, own, nown,
				 carry, ncarry);
	k = malloc(n * sizeof(*k));
	ids = malloc(n * sizeof(*ids));
	if (!k || !ids) {
		free(k);
		free(ids);
		return pg_err(set->diag, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t at = i < nown ? own[i] : carry[i - nown];
		const struct mplace *p = &pl[at];
		const struct mrec *r = &set->recs[p->rec];
		uint32_t h = home[p->rec];

		/* p->addr less the offset its LOAD has in its home's images */
		k[i] = (struct famkey){ .home = h, .base = p->addr - (r->addr - rg[h].base),
					.at = at, .own = i < nown };
	}
	qsort_r(k, n, sizeof(*k), cmp_fam, &main);
	/* an image at another base spans the region again (holes): within
	 * what the layout's bound leaves (room), else its copies stay in the
	 * region's own image, at their own offsets (rows apart in perf) */
	{
		bool folded = false;
		uint64_t span = rg[ri].slot - rg[ri].lo + (1 << 12);

		for (size_t s = 0, e; s < n; s = e) {
			bool mine = k[s].home == main.home && k[s].base == main.base;

			for (e = s; e < n && k[e].home == k[s].home && k[e].base == k[s].base; e++)
				;
			if (mine)
				continue;
			if (span <= *room) {
				*room -= span;
				continue;
			}
			for (size_t i = s; i < e; i++) {
				k[i].home = main.home;
				k[i].base = main.base;
			}
			folded = true;
		}
		if (folded) {
			if (!set->fold_warned)
				pg_warn(set->diag, "%s: MOVEs past the layout's bound: their copies are at their own offsets, and perf report shows them as rows apart",
					set->dump_name);
			set->fold_warned = true;
			qsort_r(k, n, sizeof(*k), cmp_fam, &main);
		}
	}
	for (size_t s = 0, e; s < n && !ret; s = e, mi++) {
		size_t no = 0, nc = 0;

		for (e = s; e < n && k[e].home == k[s].home && k[e].base == k[s].base; e++)
			;
		for (size_t i = s; i < e; i++)
			if (k[i].own)
				ids[no++] = k[i].at;
		for (size_t i = s; i < e; i++)
			if (!k[i].own)
				ids[no + nc++] = k[i].at;
		ret = mem_image(set, &rg[ri], ri, gen, mi, &rg[k[s].home], k[s].home, k[s].base,
				first, ids, no, ids + no, nc);
	}
	free(k);
	free(ids);
	return ret;
}

/* Limits past which the memory layout is given up for a dump and the
 * packed layout used instead (pg_plan_fallback): a hostile or degenerate dump
 * must not make the output explode.  A MOVE's copy (with carry_live)
 * writes its code, name, symbol and DWARF again (rec_meta): both are
 * bounded by twice what the LOADs write.  A region wider than SPAN_LIMIT would
 * also overflow the 32-bit offsets of .eh_frame_hdr and DW_AT_high_pc. */
#define SPAN_LIMIT (1ull << 30)
#define CARRY_GENERATIONS 64	/* carrying costs generations x live code */
/* regions may span this many times their code (+ 1 MiB per dump, + the
 * run's slack): the rest of the images' apparent size is holes */
#define SPREAD_FACTOR 64
#define BUDGET_NAMES 8		/* dumps the run's warning names */

struct pg_elfset_budget {
	uint64_t code;		/* the code of the dumps planned so far */
	uint64_t spread;	/* the address range their images span */
	uint64_t bound;		/* SPREAD_FACTOR x (code + PG_ELF_RUN_SLACK) */
	size_t nfell;		/* dumps written packed for the bound */
	char *fell[BUDGET_NAMES];	/* the first ones (NULL: out of memory) */
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

struct pg_elfset_budget *pg_elfset_budget_new(void)
{
	return calloc(1, sizeof(struct pg_elfset_budget));
}

void pg_elfset_budget_free(struct pg_elfset_budget *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->nfell && i < BUDGET_NAMES; i++)
		free(b->fell[i]);
	free(b);
}

size_t pg_elfset_budget_report(const struct pg_elfset_budget *b, struct pg_diag *diag)
{
	struct pg_buf names = { 0 };
	char more[48] = "";

	if (!b || !b->nfell)
		return 0;
	for (size_t i = 0; i < b->nfell && i < BUDGET_NAMES; i++) {
		const char *n = b->fell[i] ? b->fell[i] : "?";

		if (i)
			pg_buf_add(&names, ", ", 2);
		pg_buf_add(&names, n, strlen(n));
	}
	pg_buf_u8(&names, 0);
	if (b->nfell > BUDGET_NAMES)
		snprintf(more, sizeof(more), " and %zu more", b->nfell - BUDGET_NAMES);
	pg_warn(diag, "%zu dump%s written in the packed layout instead of the memory layout: the run's images would span more than %d x (its %llu bytes of code + %llu MiB) of address space: %s%s",
		b->nfell, b->nfell == 1 ? "" : "s", SPREAD_FACTOR, (unsigned long long)b->code,
		(unsigned long long)(PG_ELF_RUN_SLACK >> 20),
		names.oom ? "(out of memory)" : (const char *)names.p, more);
	pg_buf_free(&names);
	return b->nfell;
}

/* A dump's code, planned in the memory layout: the run's bound grows. */
static void budget_code(pg_elfset *set, uint64_t code)
{
	struct pg_elfset_budget *b = set->budget;
	uint64_t c;

	if (!b)
		return;
	b->code = sat_add(b->code, code);
	c = sat_add(b->code, PG_ELF_RUN_SLACK);
	b->bound = c > UINT64_MAX / SPREAD_FACTOR ? UINT64_MAX : SPREAD_FACTOR * c;
}

/* Whether the run's budget has room for a dump's spread (taking it if
 * so); a dump without it is named in the run's warning. */
static bool budget_take(pg_elfset *set, uint64_t spread)
{
	struct pg_elfset_budget *b = set->budget;

	if (!b)
		return true;
	/* b->spread <= b->bound: it only grows within it, the bound never shrinks */
	if (spread <= b->bound - b->spread) {
		b->spread += spread;
		return true;
	}
	if (b->nfell < BUDGET_NAMES)
		b->fell[b->nfell] = strdup(set->dump_path);
	b->nfell++;
	return false;
}

/* Regions, generations, what each generation carries, and the images.
 * Returns 0, 1 when the memory layout is given up for this dump (nothing
 * written yet), or a negative errno. */
int pg_plan_memory(pg_elfset *set)
{
	struct mplace *pl = set->places;
	size_t n = set->nplaces, nreg = 0, ngens = 0, nb = 0;
	uint32_t *byaddr = NULL, *order = NULL, *carry = NULL, *live = NULL, *nlive = NULL;
	uint32_t *home = NULL, *rank = NULL;
	struct region *rg = NULL;
	uint64_t code = 0, moved = 0, meta = 0, meta_moved = 0, spread = 0, carried = 0;
	uint64_t carried_meta = 0, room;
	bool budget_warned = false, carry_live = set->carry_live;
	const char *why = NULL;
	int ret = 0;

	if (!n)
		return 0;
	/* the code's digests the walk queued (pg_plan_keep) */
	pg_ahash_wait(set->ah);
	byaddr = malloc(n * sizeof(*byaddr));
	order = malloc(n * sizeof(*order));
	rg = calloc(n, sizeof(*rg));
	carry = malloc(n * sizeof(*carry));
	live = malloc(n * sizeof(*live));
	nlive = malloc(n * sizeof(*nlive));
	home = malloc((set->nrecs ? set->nrecs : 1) * sizeof(*home));
	rank = malloc(n * sizeof(*rank));
	if (!byaddr || !order || !rg || !carry || !live || !nlive || !home || !rank) {
		ret = pg_err(set->diag, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const struct mrec *r = &set->recs[pl[i].rec];

		if (pl[i].remap)
			continue;	/* no bytes of its own */
		byaddr[nb++] = (uint32_t)i;
		/* a MOVE's copy writes its name, symbol and DWARF again */
		if (pl[i].move) {
			moved += r->size;
			meta_moved = sat_add(meta_moved, r->meta);
		} else {
			code += r->size;
			meta = sat_add(meta, r->meta);
		}
	}
	budget_code(set, code);
	sort_addr(byaddr, nb, pl);
	/* regions: split where no code lies within PG_ELF_REGION_GAP */
	for (size_t i = 0; i < nb; i++) {
		struct mplace *p = &pl[byaddr[i]];
		uint64_t end = p->addr + p->len;

		if (!nreg || (p->addr >= rg[nreg - 1].hi &&
			      p->addr - rg[nreg - 1].hi >= PG_ELF_REGION_GAP)) {
			if (nreg)
				rg[nreg - 1].next_lo = p->addr;
			rg[nreg++] = (struct region){ .lo = p->addr, .hi = end,
						      .next_lo = UINT64_MAX, .at = i };
		}
		rank[byaddr[i]] = (uint32_t)(i - rg[nreg - 1].at);
		if (end > rg[nreg - 1].hi)
			rg[nreg - 1].hi = end;
		p->region = (uint32_t)(nreg - 1);
		rg[nreg - 1].n++;
		if (!p->move)
			home[p->rec] = p->region;	/* a LOAD's place: its rec's home */
	}
	/* each region's places in event order */
	{
		size_t at = 0;

		for (size_t r = 0; r < nreg; r++) {
			rg[r].order = order + at;
			at += rg[r].n;
			rg[r].n = 0;
			rg[r].slot = pg_align(rg[r].hi, 16);
			rg[r].base = rg[r].lo - (pg_align(pg_emit_headers_end(set), 64) +
						 (rg[r].lo & 63));
		}
		for (size_t i = 0; i < n; i++) {
			struct region *g = &rg[pl[i].region];

			if (!pl[i].remap)
				g->order[g->n++] = (uint32_t)i;
		}
	}
	/* generations: a place over one of its generation starts the next;
	 * and which later place first covers each place.  Both sets hold
	 * places that do not overlap, so by address their ends rise too: of
	 * those below p's rank only the nearest can reach p, and those above
	 * it that start before p's end are a run */
	for (size_t r = 0; r < nreg && !ret; r++) {
		struct region *g = &rg[r];
		const uint32_t *ba = byaddr + g->at;	/* by rank */
		struct rankset gs, ls;
		size_t gen_from = 0;
		uint32_t gen = 0;

		if (rs_init(&gs, g->n) || rs_init(&ls, g->n)) {
			rs_free(&gs);
			rs_free(&ls);
			ret = pg_err(set->diag, -ENOMEM, "out of memory");
			break;
		}
		for (size_t i = 0; i < g->n; i++) {
			struct mplace *p = &pl[g->order[i]];
			size_t k = rank[g->order[i]], q;

			q = k ? rs_prev(&gs, k - 1) : SIZE_MAX;
			if (q != SIZE_MAX && !overlap(&pl[ba[q]], p))
				q = SIZE_MAX;
			if (q == SIZE_MAX) {
				q = rs_next(&gs, k + 1);
				if (q != SIZE_MAX && !overlap(&pl[ba[q]], p))
					q = SIZE_MAX;
			}
			if (q != SIZE_MAX) {
				for (size_t j = gen_from; j < i; j++)
					rs_del(&gs, rank[g->order[j]]);
				gen_from = i;
				gen++;
			}
			p->gen = gen;
			q = k ? rs_prev(&ls, k - 1) : SIZE_MAX;
			if (q != SIZE_MAX && overlap(&pl[ba[q]], p)) {
				pl[ba[q]].killed = g->order[i];
				rs_del(&ls, q);
			}
			while ((q = rs_next(&ls, k + 1)) != SIZE_MAX && overlap(&pl[ba[q]], p)) {
				pl[ba[q]].killed = g->order[i];
				rs_del(&ls, q);
			}
			rs_add(&gs, k);
			rs_add(&ls, k);
		}
		rs_free(&gs);
		rs_free(&ls);
		ngens += gen + 1;
		spread += (uint64_t)(gen + 1) * (g->hi - g->lo);
		if (g->hi - g->lo > SPAN_LIMIT)
			why = "a code region wider than 1 GiB";
	}
	if (ret)
		goto out;
	/* what the layout would write, against the code it holds */
	if (!why && ngens > 256 + set->nrecs / 64)
		why = "too many generations of reused code";
	if (!why && moved > 2 * code + PG_ELF_REGION_GAP)
		why = "code moved too often";
	if (!why && meta_moved > 2 * meta + PG_ELF_REGION_GAP)
		why = "names and line rows moved too often";
	if (!why && spread / SPREAD_FACTOR > code + (1ull << 20))
		why = "code spread too thinly";
	if (!why && sat_add(meta, meta_moved) > TABLE_LIMIT)
		why = "too many names and line rows";
	if (why) {
		pg_warn(set->diag, "%s: %s: written in the packed layout instead of the memory layout (%zu generations, %llu bytes of code)",
			set->dump_name, why, ngens, (unsigned long long)code);
		ret = 1;
		goto out;
	}
	/* the run's bound: pg_elfset_budget_report() names the dump */
	if (!budget_take(set, spread)) {
		ret = 1;
		goto out;
	}
	/* what the images at other bases (MOVE copies, carry_live) may
	 * span: the rest of the spread's bound */
	room = sat_add(code, 1ull << 20);
	room = room > UINT64_MAX / SPREAD_FACTOR ? UINT64_MAX : SPREAD_FACTOR * room;
	room = room > spread ? room - spread : 0;
	/* the maps at once, not copied at each doubling: one a place and
	 * one for each image's tables; carried code adds more */
	if (!pg_grow((void **)&set->maps, &set->maps_cap, set->nmaps + n + ngens,
		     sizeof(*set->maps)) ||
	    !pg_grow((void **)&set->loaded, &set->loaded_cap, set->nmaps + n + ngens,
		     sizeof(*set->loaded))) {
		ret = pg_err(set->diag, -ENOMEM, "out of memory");
		goto out;
	}
	if (carry_live && ngens > CARRY_GENERATIONS) {
		pg_warn(set->diag, "%s: %zu generations of reused code: live code is not carried into newer images; perf's libdw unwinder may stop at frames of older ones",
			set->dump_name, ngens);
		carry_live = false;
	}
	/* the images, one per generation; live: the places of earlier
	 * generations still mapped and not gone, which a generation carries
	 * unless its own code covers them */
	for (size_t r = 0; r < nreg && !ret; r++) {
		struct region *g = &rg[r];
		size_t nl = 0;

		for (size_t s = 0; s < g->n && !ret;) {
			size_t e = s, nc = 0, nn = 0;
			uint32_t k = pl[g->order[s]].gen;
			uint64_t t0 = pl[g->order[s]].time, t1;

			while (e < g->n && pl[g->order[e]].gen == k)
				e++;
			t1 = e < g->n ? pl[g->order[e]].time : UINT64_MAX;
			for (size_t i = 0; i < nl && carry_live; i++) {
				struct mplace *q = &pl[live[i]];
				uint64_t sz = set->recs[q->rec].size, mt = set->recs[q->rec].meta;
				bool covered = q->killed != NONE && pl[q->killed].gen == k;
				/* noted frames: only code some stack held then */
				bool wanted = !set->noting || (q->ref_lo <= q->ref_hi &&
							       q->ref_hi >= t0 && q->ref_lo < t1);

				if (q->dead <= t0)
					continue;	/* gone for good */
				if (!covered && !wanted) {
					nlive[nn++] = live[i];
					continue;
				}
				/* code, names and rows each within what the LOADs have */
				if (!covered && carried + sz <= code && carried_meta + mt <= meta) {
					carry[nc++] = live[i];
					carried += sz;
					carried_meta += mt;
				} else if (!covered && !budget_warned) {
					pg_warn(set->diag, "%s: live code not carried into later generations beyond %llu bytes of code and %llu of names and line rows (what its LOADs have); perf's libdw unwinder may stop at frames of older images",
						set->dump_name, (unsigned long long)code,
						(unsigned long long)meta);
					budget_warned = true;
				}
				if (!covered)
					nlive[nn++] = live[i];
			}
			ret = gen_images(set, rg, (uint32_t)r, k, home, &room, g->order + s,
					 e - s, carry, nc);
			for (size_t i = s; i < e && carry_live; i++) {
				struct mplace *q = &pl[g->order[i]];

				if (q->killed == NONE || pl[q->killed].gen != k)
					nlive[nn++] = g->order[i];
			}
			{
				uint32_t *tmp = live;

				live = nlive;
				nlive = tmp;
				nl = nn;
			}
			s = e;
		}
	}
	/* the MOVEs that map their source's bytes where they are */
	for (size_t i = 0; i < n && !ret; i++) {
		const struct mplace *p = &pl[i], *q = &pl[p->src];
		const struct mrec *r = &set->recs[p->rec];
		struct pg_elf_map *m;

		if (!p->remap)
			continue;
		if (!(m = pg_set_new_map(set))) {
			ret = -ENOMEM;
			break;
		}
		*m = (struct pg_elf_map){ .kind = PG_ELF_MAP_MOVE, .time = p->time, .pid = p->pid,
					  .tid = p->tid, .id = r->id, .start = p->addr, .len = p->len,
					  .pgoff = q->pgoff, .image = q->img, .size = r->size,
					  .name = r->name };
	}
out:
	free(home);
	free(rank);
	free(byaddr);
	free(order);
	free(rg);
	free(carry);
	free(live);
	free(nlive);
	return ret;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(const char *const *)a, y = (uintptr_t)*(const char *const *)b;

	return x < y ? -1 : x > y;
}

/* The bytes of the distinct strings of v (sorted here) written k times
 * each: NULL and "" are written as "??". */
static uint64_t distinct_bytes(const char **v, size_t n, unsigned k)
{
	uint64_t sum = 0;

	qsort(v, n, sizeof(*v), cmp_ptr);
	for (size_t i = 0; i < n; i++)
		if (!i || v[i] != v[i - 1])
			sum += k * ((v[i] && v[i][0] ? (uint64_t)strlen(v[i]) : 2) + 1);
	return sum;
}

/* What each copy of r (its LOAD, a MOVE's copy, a carried copy) writes
 * besides its code, at most: its name in .strtab and DW_AT_name, its
 * symbol and DIEs, its line rows and inline entries, and the file and
 * inlined function names (DW_AT_name and DW_AT_linkage_name) they use,
 * each once: an image writes a name once however often it is used. */
static int rec_meta(pg_elfset *set, struct mrec *r, const struct pg_code_line *lines)
{
	uint64_t m = 2 * ((uint64_t)strlen(r->name) + 1) + 64 + 16 * (uint64_t)r->nlines;
	size_t nfr = 0, nfile = 0, nfunc = 0;
	const char **v;

	for (size_t k = 0; k < r->ninl; k++) {
		nfr += r->inl[k].nframes;
		m += 16 + 32ull * r->inl[k].nframes;
	}
	if (r->nlines || nfr) {
		if (!pg_grow((void **)&set->scratch, &set->scratch_cap, r->nlines + 2 * nfr,
			     sizeof(*set->scratch)))
			return -ENOMEM;
		v = set->scratch;
		for (size_t i = 0; i < r->nlines; i++)
			v[nfile++] = lines[i].file;
		for (size_t k = 0; k < r->ninl; k++)
			for (uint32_t f = 0; f < r->inl[k].nframes; f++)
				v[nfile++] = r->inl[k].frames[f].file;
		for (size_t k = 0; k < r->ninl; k++)
			for (uint32_t f = 0; f < r->inl[k].nframes; f++)
				v[nfile + nfunc++] = r->inl[k].frames[f].func;
		m += distinct_bytes(v, nfile, 1) + distinct_bytes(v + nfile, nfunc, 2);
	}
	r->meta = m;
	return 0;
}

/* ---- strings kept ---- */

struct strchunk {
	struct strchunk *next;
	size_t used, cap;
	char b[];
};

#define STR_CHUNK (64u << 10)

/* s (len bytes and its NUL) copied into the set's chunks; NULL on OOM. */
static const char *keep_copy(pg_elfset *set, const char *s, size_t len)
{
	struct strchunk *c = set->strs;
	char *d;

	if (!c || c->cap - c->used < len + 1) {
		size_t cap = len + 1 > STR_CHUNK ? len + 1 : STR_CHUNK;

		if (!(c = malloc(sizeof(*c) + cap)))
			return NULL;
		c->used = 0;
		c->cap = cap;
		if (set->strs && cap > STR_CHUNK) {	/* the open chunk stays open */
			c->next = set->strs->next;
			set->strs->next = c;
		} else {
			c->next = set->strs;
			set->strs = c;
		}
	}
	d = c->b + c->used;
	memcpy(d, s, len + 1);
	c->used += len + 1;
	return d;
}

/* A row's file name kept once per content (a dump often repeats it in
 * every function's rows); NULL stays NULL.  false on OOM. */
static bool keep_file(pg_elfset *set, const char *f, const char **out)
{
	bool added;
	long idx;

	if (!f || f == set->kf_src) {
		*out = f ? set->kf_kept : NULL;
		return true;
	}
	idx = pg_strmap_intern(&set->kfiles, f, &added);
	if (idx < 0)
		return false;
	if (added) {
		const char *c = keep_copy(set, f, strlen(f));

		if (!c)
			return false;	/* the key is f itself, valid meanwhile */
		set->kfiles.keys[idx] = c;
	}
	set->kf_src = f;
	set->kf_kept = set->kfiles.keys[idx];
	*out = set->kf_kept;
	return true;
}

void pg_plan_free_strings(pg_elfset *set)
{
	while (set->strs) {
		struct strchunk *c = set->strs;

		set->strs = c->next;
		free(c);
	}
	pg_strmap_free(&set->kfiles);
	memset(&set->kfiles, 0, sizeof(set->kfiles));
	set->kf_src = set->kf_kept = NULL;
}

/* ---- line rows, packed ----
 * A row is a few LEB128 numbers: the offset's change, the line's change
 * (zigzag, so any order and any values round-trip) with a bit for a new
 * file name, the pointer to that name when new (the source's string),
 * the column and the discriminator. */

static uint64_t zigzag(uint64_t d)
{
	return (d << 1) ^ (uint64_t)-(int64_t)(d >> 63);
}

static uint64_t unzigzag(uint64_t z)
{
	return (z >> 1) ^ (uint64_t)-(int64_t)(z & 1);
}

static uint8_t *put_uleb(uint8_t *p, uint64_t v)
{
	do {
		*p++ = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return p;
}

/* A row takes at most this: four numbers of 64 bits (10 bytes each;
 * the line's, shifted, 33 bits) and a pointer. */
#define ROW_MAX (4 * 10 + sizeof(const char *))

/* l's rows into set->rows, their file names kept (keep_file) */
static void pack_rows(pg_elfset *set, const struct pg_code_line *l, size_t n)
{
	struct pg_buf *b = &set->rows;
	uint64_t off = 0, line = 0;
	const char *file = NULL, *kept;

	for (size_t i = 0; i < n; i++) {
		uint8_t *p = pg_buf_reserve(b, ROW_MAX), *q;
		bool nf;

		if (!p)
			return;		/* b->oom says so */
		if (!keep_file(set, l[i].file, &kept)) {
			b->oom = true;
			return;
		}
		nf = !i || kept != file;
		q = put_uleb(p, zigzag(l[i].off - off));
		q = put_uleb(q, zigzag((uint64_t)l[i].line - line) << 1 | nf);
		if (nf) {
			memcpy(q, &kept, sizeof(kept));
			q += sizeof(kept);
		}
		q = put_uleb(q, l[i].column);
		q = put_uleb(q, l[i].discrim);
		b->len += (size_t)(q - p);
		off = l[i].off;
		line = l[i].line;
		file = kept;
	}
}

static uint64_t get_uleb(const uint8_t **p)
{
	uint64_t v = 0;
	unsigned sh = 0;
	uint8_t c;

	do {	/* written by pack_rows: well formed */
		c = *(*p)++;
		if (sh < 64)
			v |= (uint64_t)(c & 0x7f) << sh;
		sh += 7;
	} while (c & 0x80);
	return v;
}

/* r's rows, unpacked into the set's one buffer (valid until the next
 * call); NULL when out of memory. */
const struct pg_code_line *pg_plan_rows(pg_elfset *set, const struct mrec *r)
{
	const uint8_t *p;
	uint64_t off = 0, line = 0;
	const char *file = NULL;

	if (!r->nlines)
		return NULL;	/* rows.p may be NULL: no rows at all */
	p = set->rows.p + r->rows_at;
	if (!pg_grow((void **)&set->unpacked, &set->unpacked_cap, r->nlines,
		     sizeof(*set->unpacked)))
		return NULL;
	for (uint32_t i = 0; i < r->nlines; i++) {
		struct pg_code_line *l = &set->unpacked[i];
		uint64_t z;

		off += unzigzag(get_uleb(&p));
		z = get_uleb(&p);
		line += unzigzag(z >> 1);
		if (z & 1) {
			memcpy(&file, p, sizeof(file));
			p += sizeof(file);
		}
		l->off = off;
		l->line = (uint32_t)line;
		l->file = file;
		l->column = (uint32_t)get_uleb(&p);
		l->discrim = (uint32_t)get_uleb(&p);
	}
	return set->unpacked;
}

/* ---- the memory layout: what add keeps ---- */

/* Room in set->cdig for rec k's digest: its address, which the worker
 * may write while more blocks are added; NULL when out of memory. */
#define CDIG_BLOCK 4096u
static uint8_t *cdig_slot(pg_elfset *set, size_t k)
{
	size_t b = k / CDIG_BLOCK;

	if (b == set->ncdig) {
		uint8_t *blk;

		if (!pg_grow((void **)&set->cdig, &set->cdig_cap, b + 1, sizeof(*set->cdig)))
			return NULL;
		if (!(blk = malloc(CDIG_BLOCK * PG_PIECE_DIGEST)))
			return NULL;
		set->cdig[set->ncdig++] = blk;
	}
	return set->cdig[b] + (k % CDIG_BLOCK) * PG_PIECE_DIGEST;
}

const uint8_t *pg_plan_cdig(const pg_elfset *set, size_t k)
{
	return set->cdig[k / CDIG_BLOCK] + (k % CDIG_BLOCK) * PG_PIECE_DIGEST;
}

/* Keeps a LOAD for pg_elfset_finish(): its rows are packed and its
 * chains copied (the source reuses them), its name and its rows' file
 * names copied (keep_*), its code bytes stay the source's (the worker
 * reads them now for their digest, and again at finish to write them). */
int pg_plan_keep(pg_elfset *set, const struct pg_code_event *ld, uint64_t since)
{
	struct mrec *r;
	struct mplace *p;
	size_t nfr = 0;

	if (set->nrecs >= NONE - 1 || set->nplaces >= NONE - 1 || ld->nlines > UINT32_MAX ||
	    ld->ninlines > UINT32_MAX)
		return pg_err(set->diag, -ENOMEM, "%s: more than 4 billion functions", set->dump_name);
	/* the region's tables go after its code: room is left for them */
	if (ld->addr + ld->size + (ld->cfi ? 8 + ld->cfi->mapped_size : 0) < ld->addr ||
	    ld->addr + ld->size + (ld->cfi ? 8 + ld->cfi->mapped_size : 0) >
	    UINT64_MAX - PG_ELF_REGION_GAP + 1) {
		pg_warn(set->diag, "%s: function at 0x%llx runs into the last MiB of the address space; not placed",
			set->dump_name, (unsigned long long)ld->addr);
		return 1;
	}
	if (!pg_grow((void **)&set->recs, &set->recs_cap, set->nrecs + 1, sizeof(*set->recs)) ||
	    !pg_grow((void **)&set->places, &set->places_cap, set->nplaces + 1, sizeof(*set->places)))
		return pg_err(set->diag, -ENOMEM, "out of memory");
	r = &set->recs[set->nrecs];
	memset(r, 0, sizeof(*r));
	r->name = ld->name ? keep_copy(set, ld->name, strlen(ld->name)) : NULL;
	if (ld->name && !r->name)
		return pg_err(set->diag, -ENOMEM, "out of memory");
	r->code = ld->code;
	r->size = ld->size;
	r->id = ld->id;
	r->addr = ld->addr;
	if (ld->cfi) {
		r->cfi = *ld->cfi;
		r->has_cfi = true;
	}
	/* its code's digest, for the image's build-id, taken by the worker
	 * meanwhile: the walk leaves it idle in this layout, and then naming
	 * an image at finish need not wait for its code to be read */
	{
		uint8_t *slot = cdig_slot(set, set->nrecs);

		if (!slot)
			return pg_err(set->diag, -ENOMEM, "out of memory");
		pg_ahash_digest_into(set->ah, ld->code, ld->size, slot);
	}
	r->rows_at = set->rows.len;
	r->nlines = (uint32_t)ld->nlines;
	pack_rows(set, ld->lines, ld->nlines);
	if (set->rows.oom)
		return pg_err(set->diag, -ENOMEM, "out of memory");
	for (size_t i = 0; i < ld->ninlines; i++)
		nfr += ld->inlines[i].nframes;
	if (ld->ninlines) {
		/* the chains, then all their frames, in one block */
		struct pg_code_frame *fr;

		r->inl = malloc(ld->ninlines * sizeof(*r->inl) + nfr * sizeof(*fr));
		if (!r->inl)
			return pg_err(set->diag, -ENOMEM, "out of memory");
		fr = (struct pg_code_frame *)(r->inl + ld->ninlines);
		for (size_t i = 0; i < ld->ninlines; i++) {
			r->inl[i] = ld->inlines[i];
			memcpy(fr, ld->inlines[i].frames, ld->inlines[i].nframes * sizeof(*fr));
			r->inl[i].frames = fr;
			fr += ld->inlines[i].nframes;
		}
		r->ninl = (uint32_t)ld->ninlines;
	}
	if (rec_meta(set, r, ld->lines) < 0) {
		free(r->inl);
		return pg_err(set->diag, -ENOMEM, "out of memory");
	}
	p = &set->places[set->nplaces];
	*p = (struct mplace){ .time = ld->time, .since = since, .addr = ld->addr,
			      .len = ld->cfi ? pg_align(ld->size, 8) + ld->cfi->mapped_size : ld->size,
			      .pid = ld->pid, .tid = ld->tid, .rec = (uint32_t)set->nrecs,
			      .dead = UINT64_MAX, .killed = NONE, .ref_lo = UINT64_MAX };
	if (!pg_set_id_put(set, ld->id, (uint32_t)set->nplaces, true)) {
		free(r->inl);
		return pg_err(set->diag, -ENOMEM, "out of memory");
	}
	set->nrecs++;
	set->nplaces++;
	return 0;
}

/* A MOVE or UNLOAD: the code of the latest LOAD of that index leaves its
 * place; a MOVE puts it at ev->addr. */
int pg_plan_move(pg_elfset *set, const struct pg_code_event *ev)
{
	const struct idslot *sl = pg_set_id_get(set, ev->id);
	struct pg_elf_map *m;

	if (!sl) {
		pg_warn(set->diag, "%s: offset %llu: %s of code_index %llu, which no earlier LOAD has; ignored",
			set->dump_name, (unsigned long long)ev->src_offset,
			ev->kind == PG_CODE_MOVE ? "MOVE" : "UNLOAD", (unsigned long long)ev->id);
		return 1;
	}
	if (sl->place) {
		struct mplace *p = &set->places[sl->at], *q;

		if (p->dead > ev->time)
			p->dead = ev->time;
		if (ev->kind != PG_CODE_MOVE)
			return 0;
		if (set->nplaces >= NONE - 1)
			return pg_err(set->diag, -ENOMEM, "%s: more than 4 billion places", set->dump_name);
		if (!pg_grow((void **)&set->places, &set->places_cap, set->nplaces + 1,
			     sizeof(*set->places)))
			return pg_err(set->diag, -ENOMEM, "out of memory");
		p = &set->places[sl->at];
		if (ev->addr + p->len < ev->addr ||
		    ev->addr + p->len > UINT64_MAX - PG_ELF_REGION_GAP + 1) {
			pg_warn(set->diag, "%s: offset %llu: MOVE to 0x%llx runs into the last MiB of the address space; ignored",
				set->dump_name, (unsigned long long)ev->src_offset,
				(unsigned long long)ev->addr);
			return 1;
		}
		q = &set->places[set->nplaces];
		*q = (struct mplace){ .time = ev->time, .addr = ev->addr, .len = p->len,
				      .pid = ev->pid, .tid = ev->tid, .rec = p->rec,
				      .dead = UINT64_MAX, .killed = NONE,
				      .move = true, .remap = !set->carry_live,
				      .src = p->remap ? p->src : sl->at,
				      .ref_lo = UINT64_MAX };
		if (!pg_set_id_put(set, ev->id, (uint32_t)set->nplaces, true))
			return pg_err(set->diag, -ENOMEM, "out of memory");
		set->nplaces++;
		return 0;
	}
	if (ev->kind != PG_CODE_MOVE)
		return 0;	/* perf has no unmap: the old map stays */
	/* an image of its own: the same bytes, mapped at the new address */
	{
		struct pg_elf_map old = set->maps[sl->at];

		if (ev->addr + old.len <= ev->addr) {
			pg_warn(set->diag, "%s: offset %llu: MOVE to 0x%llx runs past the end of the address space; ignored",
				set->dump_name, (unsigned long long)ev->src_offset,
				(unsigned long long)ev->addr);
			return 1;
		}
		m = pg_set_new_map(set);
		if (!m)
			return -ENOMEM;
		*m = (struct pg_elf_map){ .kind = PG_ELF_MAP_MOVE, .time = ev->time, .pid = ev->pid,
					  .tid = ev->tid, .id = ev->id, .start = ev->addr,
					  .len = old.len, .pgoff = old.pgoff, .image = old.image,
					  .size = old.size, .name = old.name };
	}
	return 0;
}

/* The memory layout given up for this dump (see pg_plan_memory): every place
 * kept goes through the packed layout instead, in event order. */
int pg_plan_fallback(pg_elfset *set)
{
	int ret = 0;

	set->memory = false;
	pg_set_ids_reset(set);
	for (size_t i = 0; i < set->nplaces && !ret; i++) {
		const struct mplace *p = &set->places[i];
		const struct mrec *r = &set->recs[p->rec];
		struct pg_code_event ev = {
			.kind = p->move ? PG_CODE_MOVE : PG_CODE_LOAD, .time = p->time,
			.pid = p->pid, .tid = p->tid, .id = r->id, .addr = p->addr,
			.size = r->size, .name = r->name, .code = r->code,
			.nlines = r->nlines, .inlines = r->inl, .ninlines = r->ninl,
			.cfi = r->has_cfi ? &r->cfi : NULL,
		};
		struct pg_elf_place out;

		if (!p->move && r->nlines && !(ev.lines = pg_plan_rows(set, r))) {
			ret = pg_err(set->diag, -ENOMEM, "out of memory");
			break;
		}
		if (p->move) {
			ev.name = NULL;
			ev.code = NULL;
			ret = pg_plan_move(set, &ev);
			ret = ret < 0 ? ret : 0;
		} else {
			ret = pg_set_add_placed(set, &ev, p->since, &out);
		}
	}
	return ret ? ret : pg_files_close_pack(set);
}

#define NOTE_WALK 64

/* The places by address with a running maximum of their ends, so that
 * every place holding an address is found by one binary search and a
 * walk back while the maximum still reaches it. */
static int index_places(pg_elfset *set)
{
	size_t n = set->nplaces;
	uint64_t hi = 0;

	free(set->byaddr);
	free(set->addrs);
	free(set->maxend);
	free(set->spans);
	set->byaddr = malloc((n ? n : 1) * sizeof(*set->byaddr));
	set->addrs = malloc((n ? n : 1) * sizeof(*set->addrs));
	set->maxend = malloc((n ? n : 1) * sizeof(*set->maxend));
	set->spans = malloc((n ? n : 1) * 2 * sizeof(*set->spans));
	set->nbyaddr = set->nspans = 0;
	if (!set->byaddr || !set->addrs || !set->maxend || !set->spans)
		return pg_err(set->diag, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		set->byaddr[i] = (uint32_t)i;
	qsort_r(set->byaddr, n, sizeof(*set->byaddr), cmp_addr, set->places);
	for (size_t i = 0; i < n; i++) {
		const struct mplace *p = &set->places[set->byaddr[i]];

		/* spans: most stack words are data, far from any code */
		if (!set->nspans || p->addr - hi >= PG_ELF_REGION_GAP) {
			set->spans[2 * set->nspans] = p->addr;
			set->nspans++;
		}
		if (p->addr + p->len > hi)
			hi = p->addr + p->len;
		set->spans[2 * set->nspans - 1] = hi;
		set->addrs[i] = p->addr;
		set->maxend[i] = hi;
	}
	set->nbyaddr = n;
	return 0;
}

int pg_elfset_note_frames(pg_elfset *set, uint64_t time, const uint64_t *addrs, size_t n)
{
	struct mplace *pl = set->places;
	size_t m;

	if (set->planned)
		return pg_err(set->diag, -EINVAL, "%s: frames noted after the images were written",
			      set->dump_name);
	set->noting = true;
	if (!n || !set->memory)
		return 0;
	if (set->nbyaddr != set->nplaces) {
		int ret = index_places(set);

		if (ret)
			return ret;
	}
	m = set->nbyaddr;
	if (!m)
		return 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t a = addrs[i];
		size_t lo = 0, hi = set->nspans;

		/* the last span starting at or below a: does it hold a? */
		if (a < set->spans[0])
			continue;
		while (hi - lo > 1) {
			size_t mid = lo + (hi - lo) / 2;

			if (set->spans[2 * mid] <= a)
				lo = mid;
			else
				hi = mid;
		}
		if (a >= set->spans[2 * lo + 1])
			continue;
		/* the last place starting at or below a */
		lo = 0;
		hi = m;
		while (hi - lo > 1) {
			size_t mid = lo + (hi - lo) / 2;

			if (set->addrs[mid] <= a)
				lo = mid;
			else
				hi = mid;
		}
		/* places below that still reach a: earlier generations of
		 * the same addresses; a bounded walk (a hostile dump can nest
		 * any number of places in one) */
		for (size_t k = lo + 1, steps = 0; k-- > 0 && set->maxend[k] > a &&
		     steps < NOTE_WALK; steps++) {
			struct mplace *p = &pl[set->byaddr[k]];

			/* code there at that time (a MOVE's copy too) */
			if (a < p->addr + p->len && p->time <= time && time < p->dead) {
				if (time < p->ref_lo)
					p->ref_lo = time;
				if (time > p->ref_hi)
					p->ref_hi = time;
			}
		}
	}
	return 0;
}
