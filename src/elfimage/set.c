/* SPDX-License-Identifier: MIT */
/* The set of images of one dump: its options and directory
 * (pg_elfset_new), the events it takes (pg_elfset_add), finishing, the
 * maps it gives inject, and the packed and per-function layouts, which
 * place a LOAD at once (pg_set_add_placed).  The memory layout is planned
 * in plan.c, images are written by emit.c and files.c (builder.h says how
 * a LOAD travels). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <libelf.h>

#include "elfimage/builder.h"

#define DEFAULT_PACK_LIMIT (256ull << 20)
#define NAME_LIMIT (1u << 20)

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
	pg_u64map_init(&set->ids, sizeof(struct idslot));
	set->ah = pg_ahash_new();	/* NULL: digests in this thread */
	set->hdr = *hdr;
	set->diag = diag;
	set->per_function = opts->per_function;
	set->cfi_compat = opts->cfi_layout_perf_5_19;
	set->build_id_names = opts->build_id_names;
	set->memory = opts->memory_layout && !opts->per_function;
	set->carry_live = opts->carry_live;
	set->zdebug = !opts->plain_debug;
	set->pack_limit = opts->pack_limit ? opts->pack_limit : DEFAULT_PACK_LIMIT;
	if (set->pack_limit > (1ull << 31))
		set->pack_limit = 1ull << 31;	/* offsets stay 32-bit clean */
	snprintf(pfx, sizeof(pfx), "jitted-%u", hdr->pid);
	set->dump_name = strdup(base ? base + 1 : dump_name);
	set->dump_path = strdup(dump_name);
	set->budget = opts->budget;
	set->background = opts->background_writes;
	set->dir = strdup(opts->dir ? opts->dir : ".");
	set->prefix = strdup(opts->prefix ? opts->prefix : pfx);
	set->dirfd = -1;
	if (!set->dump_name || !set->dump_path || !set->dir || !set->prefix) {
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
	/* perf's libdw unwinder (6.13+) takes the base of a file whose path
	 * starts with "/tmp/jitted-" to be its map's start (right for perf
	 * inject's own images only): these never get such a path */
	{
		char *abs = realpath(set->dir, NULL);

		if (abs && !strcmp(abs, "/tmp") && !strncmp(set->prefix, "jitted-", 7)) {
			char *np = malloc(strlen(set->prefix) + 4);

			if (!np) {
				free(abs);
				pg_elfset_free(set);
				return pg_err(diag, -ENOMEM, "out of memory");
			}
			sprintf(np, "pg-%s", set->prefix);
			free(set->prefix);
			set->prefix = np;
		}
		free(abs);
	}
	/* the temporaries of runs killed before they could remove them */
	pg_sweep_dead_temps(set->dirfd);
	set->text_off = pg_align(pg_emit_headers_end(set), TEXT_ALIGN);
	*out = set;
	return 0;
}

/* A new map at the end of the set's list; NULL (reported) when out of
 * memory. */
struct pg_elf_map *pg_set_new_map(pg_elfset *set)
{
	if (!pg_grow((void **)&set->maps, &set->maps_cap, set->nmaps + 1, sizeof(*set->maps)) ||
	    !pg_grow((void **)&set->loaded, &set->loaded_cap, set->nmaps + 1, sizeof(*set->loaded))) {
		pg_err(set->diag, -ENOMEM, "out of memory");
		return NULL;
	}
	set->loaded[set->nmaps] = UINT64_MAX;
	return &set->maps[set->nmaps++];
}

/* A LOAD's map m starts at since, when that is earlier than its time. */
void pg_set_map_since(pg_elfset *set, struct pg_elf_map *m, uint64_t since)
{
	if (since < m->time && m->time != UINT64_MAX) {
		set->loaded[m - set->maps] = m->time;
		m->time = since;
	}
}

#define DENSE_SLACK 4096

/* Sets id -> (at, place), the latest wins; false on OOM.  An id the dense
 * array covers goes there (and, once covered, always: an older entry in
 * ids is then hidden by it). */
bool pg_set_id_put(pg_elfset *set, uint64_t id, uint32_t at, bool place)
{
	struct idslot *sl;

	if (id >= set->dense_cap && id < 4 * (uint64_t)set->ndense + DENSE_SLACK) {
		size_t cap = set->dense_cap ? 2 * set->dense_cap : DENSE_SLACK;
		struct idslot *d;

		if (cap <= id)
			cap = (size_t)id + 1;
		d = realloc(set->dense, cap * sizeof(*d));
		if (!d)
			return false;
		memset(d + set->dense_cap, 0, (cap - set->dense_cap) * sizeof(*d));
		set->dense = d;
		set->dense_cap = cap;
	}
	if (id < set->dense_cap) {
		sl = &set->dense[id];
		set->ndense += !sl->used;
	} else if (!(sl = pg_u64map_put(&set->ids, id, NULL))) {
		return false;
	}
	*sl = (struct idslot){ .at = at, .place = place, .used = true };
	return true;
}

/* The latest (at, place) of id, or NULL. */
const struct idslot *pg_set_id_get(const pg_elfset *set, uint64_t id)
{
	if (id < set->dense_cap && set->dense[id].used)
		return &set->dense[id];
	return pg_u64map_get(&set->ids, id);
}

void pg_set_ids_reset(pg_elfset *set)
{
	pg_u64map_free(&set->ids);
	free(set->dense);
	set->dense = NULL;
	set->dense_cap = set->ndense = 0;
}

/* A LOAD into a packed image or an image of its own, at once. */
int pg_set_add_placed(pg_elfset *set, const struct pg_code_event *ld, uint64_t since,
		      struct pg_elf_place *out)
{
	const struct pg_code_cfi *u = ld->cfi;
	struct pg_elf_map *m;
	struct img *im;
	char name[128];
	int ret;

	if (u || set->per_function) {
		snprintf(name, sizeof(name), "%s-%llu.so", set->prefix,
			 (unsigned long long)ld->id);
		ret = pg_files_new_image(set, name, &im);
		if (ret)
			return ret;
		if (u) {
			im->unw = u;
			if (set->cfi_compat)	/* page-aligned code, see elfimage.h */
				im->text_off = im->text_end = pg_align(set->text_off, 0x1000);
		}
		ret = pg_emit_add_func(set, im, ld, UINT64_MAX, false, NULL);
		if (ret) {
			pg_files_free_image(im);
			return ret;
		}
		if (u)
			pg_ahash_update(im->ah, im->dig, u->eh_frame_hdr, u->eh_frame_hdr_size);
		out->image = (uint32_t)im->pub;
		out->pgoff = im->funcs[0].off;
		out->map_len = u ? pg_align(ld->size, 8) + u->mapped_size : ld->size;
		ret = pg_files_write_image(set, im);	/* takes im */
		if (ret)
			return ret;
	} else {
		if (set->pack && set->pack->nfuncs &&
		    (set->pack->text_end + ld->size + FUNC_ALIGN > set->text_off + set->pack_limit ||
		     set->pack->strtab.len > TABLE_LIMIT || set->pack->dw.dies.len > TABLE_LIMIT ||
		     set->pack->dw.prog.len > TABLE_LIMIT || set->pack->dw.abstr.len > TABLE_LIMIT)) {
			ret = pg_files_close_pack(set);
			if (ret)
				return ret;
		}
		if (!set->pack) {
			snprintf(name, sizeof(name), "%s-pack%u.so", set->prefix, set->npacks++);
			ret = pg_files_new_image(set, name, &set->pack);
			if (ret)
				return ret;
			pg_files_stream(set, set->pack);
		}
		ret = pg_emit_add_func(set, set->pack, ld, UINT64_MAX, false, NULL);
		if (ret)
			return ret;
		out->image = (uint32_t)set->pack->pub;
		out->pgoff = set->pack->funcs[set->pack->nfuncs - 1].off;
		out->map_len = ld->size;
	}
	m = pg_set_new_map(set);
	if (!m || !pg_set_id_put(set, ld->id, (uint32_t)(set->nmaps - 1), false))
		return pg_err(set->diag, -ENOMEM, "out of memory");
	*m = (struct pg_elf_map){ .kind = PG_ELF_MAP_LOAD, .time = ld->time, .pid = ld->pid,
				  .tid = ld->tid, .id = ld->id, .start = ld->addr,
				  .len = out->map_len, .pgoff = out->pgoff, .image = out->image,
				  .size = ld->size, .name = ld->name };
	pg_set_map_since(set, m, since);
	return 0;
}

int pg_elfset_add_since(pg_elfset *set, const struct pg_code_event *ld, uint64_t since,
			struct pg_elf_place *out)
{
	int ret;

	memset(out, 0, sizeof(*out));
	if (set->planned)
		return pg_err(set->diag, -EINVAL, "%s: code added after the images were written",
			      set->dump_name);
	if (ld->kind == PG_CODE_MOVE || ld->kind == PG_CODE_UNLOAD)
		return pg_plan_move(set, ld);
	if (ld->kind != PG_CODE_LOAD || !ld->size)
		return 1;
	if (strlen(ld->name) > NAME_LIMIT) {
		pg_warn(set->diag, "%s: function at 0x%llx has a name of %zu bytes; not placed",
			set->dump_name, (unsigned long long)ld->addr, strlen(ld->name));
		return 1;
	}
	/* a map must end inside the address space (perf keeps its end) */
	if (ld->addr + ld->size + (ld->cfi ? 8 + ld->cfi->mapped_size : 0) <= ld->addr) {
		pg_warn(set->diag, "%s: function at 0x%llx runs past the end of the address space; not placed",
			set->dump_name, (unsigned long long)ld->addr);
		return 1;
	}
	if (set->memory && !(ld->cfi && set->cfi_compat)) {
		ret = pg_plan_keep(set, ld, since);
		if (ret == 0)
			out->image = PG_ELF_LATER;
		return ret;
	}
	return pg_set_add_placed(set, ld, since, out);
}

int pg_elfset_add(pg_elfset *set, const struct pg_code_event *ld, struct pg_elf_place *out)
{
	return pg_elfset_add_since(set, ld, ld->time, out);
}

/* What the memory layout kept for its plan: the images are written, so
 * only the maps and the images' names stay (the rows were most of a
 * dump's memory). */
static void free_plan(pg_elfset *set)
{
	for (size_t i = 0; i < set->nrecs; i++)
		free(set->recs[i].inl);
	free(set->recs);
	for (size_t i = 0; i < set->ncdig; i++)
		free(set->cdig[i]);
	free(set->cdig);
	set->cdig = NULL;
	set->ncdig = set->cdig_cap = 0;
	pg_buf_free(&set->rows);
	free(set->unpacked);
	free(set->scratch);
	set->unpacked = NULL;
	set->scratch = NULL;
	set->unpacked_cap = set->scratch_cap = 0;
	free(set->places);
	free(set->byaddr);
	free(set->addrs);
	free(set->maxend);
	free(set->spans);
	set->recs = NULL;
	set->places = NULL;
	set->byaddr = NULL;
	set->addrs = set->maxend = set->spans = NULL;
	set->nrecs = set->recs_cap = set->nplaces = set->places_cap = 0;
	set->nbyaddr = set->nspans = 0;
	pg_set_ids_reset(set);
}

int pg_elfset_finish(pg_elfset *set)
{
	bool planned = false;
	int ret, r;

	set->finishing = true;
	ret = pg_files_close_pack(set);
	if (!ret && set->memory && !set->planned) {
		set->planned = true;
		ret = pg_plan_memory(set);
		if (ret == 1)
			ret = pg_plan_fallback(set);
		planned = true;
	}
	set->finishing = false;
	if (!ret && set->background) {
		/* pg_elfset_wait(): the caller goes on meanwhile */
		set->plan_held |= planned;
		return 0;
	}
	/* every image written (or its failure known) when finished */
	r = pg_files_join(set, !ret);
	/* after the join: the writes read the records' CFI */
	if (planned)
		free_plan(set);
	return ret ? ret : r;
}

int pg_elfset_wait(pg_elfset *set)
{
	int r = pg_files_join(set, true);

	/* after the join: the writes read the records' CFI */
	if (set->plan_held)
		free_plan(set);
	set->plan_held = false;
	return r;
}

const struct pg_elf_map *pg_elfset_maps(const pg_elfset *set, size_t *n)
{
	*n = set->nmaps;
	return set->maps;
}

uint64_t pg_elfset_map_loaded(const pg_elfset *set, size_t i)
{
	if (i >= set->nmaps)
		return 0;
	return set->loaded[i] != UINT64_MAX ? set->loaded[i] : set->maps[i].time;
}

size_t pg_elfset_count(const pg_elfset *set)
{
	return set->nimages;
}

const struct pg_elf_image *pg_elfset_image(const pg_elfset *set, size_t i)
{
	return i < set->nimages ? &set->images[i] : NULL;
}

void pg_elfset_free(pg_elfset *set)
{
	if (!set)
		return;
	(void)pg_files_join(set, false);
	pg_files_abort_pending(set);
	pg_elfset_keep(set);
	free(set->pend);
	pg_files_free_image(set->pack);
	pg_ahash_free(set->ah);
	free(set->jobs);
	free_plan(set);
	pg_plan_free_strings(set);	/* the maps' names are these */
	free(set->maps);
	free(set->loaded);
	for (size_t i = 0; i < set->nimages; i++)
		free(set->images[i].path);
	free(set->images);
	for (size_t i = 0; i < set->names.n; i++)
		free((char *)set->names.keys[i]);
	pg_strmap_free(&set->names);
	if (set->dirfd >= 0)
		close(set->dirfd);
	free(set->dump_name);
	free(set->dump_path);
	free(set->dir);
	free(set->prefix);
	free(set);
}
