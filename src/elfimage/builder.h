/* SPDX-License-Identifier: MIT */
/* The image builder's private interfaces (the public one is
 * include/perfgraft/elfimage.h): the set and its images, the memory
 * layout's records and places, an image's layout, and the functions one
 * of its files calls in another, each named pg_<file>_...  The files, in
 * the order a LOAD goes through them:
 *   set.c    takes it (pg_elfset_add): the packed and per-function
 *            layouts place it in an image at once, the memory layout
 *            keeps it for plan.c;
 *   plan.c   the memory layout: LOADs, MOVEs and noted frames kept, then
 *            at pg_elfset_finish regions, generations, carrying and one
 *            image per generation (or the packed layout instead);
 *   emit.c   an image's functions, symbols and DWARF, its layout, and its
 *            bytes through libelf;
 *   cfi.c    the memory layout's merged .eh_frame and the order of its
 *            .eh_frame_hdr;
 *   files.c  the image's unique name, build-id, temporary, reuse of an
 *            identical file, commit and discard;
 * then set.c's maps (pg_elfset_maps) tell inject where each LOAD went. */
#ifndef PG_ELFIMAGE_BUILDER_H
#define PG_ELFIMAGE_BUILDER_H

#include <stdbool.h>
#include <stdint.h>

#include <perfgraft/elfimage.h>
#include "elfimage/dwarf.h"
#include "util/util.h"

#define FUNC_ALIGN 16
#define TEXT_ALIGN 64
#define BUILD_ID_SIZE 20
/* DWARF32 and ELF32 string offsets: an image's tables stay below this */
#define TABLE_LIMIT (1ull << 30)

enum { SEC_NOTE = 1, SEC_TEXT, SEC_EH_FRAME, SEC_EH_FRAME_HDR, SEC_ABBREV,
       SEC_INFO, SEC_LINE, SEC_ARANGES, SEC_SYMTAB, SEC_STRTAB, SEC_SHSTRTAB, SEC_COUNT };

struct func {
	const char *name;
	const uint8_t *code;
	uint64_t size;
	const struct pg_code_cfi *cfi;	/* memory layout: tables after the code */
	uint64_t off;		/* == vaddr */
	uint32_t strx;		/* name offset in .strtab */
};

/* code index -> a slot number (an index into maps or places): the
 * latest LOAD of that index, for MOVE and UNLOAD in O(1) (a pg_u64map) */
struct idslot {
	uint32_t at;
	bool place;		/* at is in places (memory layout), else in maps */
	bool used;		/* in set->dense: set */
};

/* A LOAD kept until pg_elfset_finish() (memory layout); its arrays are
 * copies, its strings and bytes the source's.  Its line rows are packed
 * into the set's rows (plan.c's pack_rows: a few bytes a row, not 32;
 * they were most of a dump's memory), nlines of them from byte rows_at. */
struct mrec {
	const char *name;
	const uint8_t *code;
	uint64_t size, id, addr;
	uint64_t rows_at;
	uint32_t nlines;
	uint32_t ninl;
	struct pg_code_inline *inl;
	struct pg_code_cfi cfi;
	bool has_cfi;
	uint64_t meta;		/* what each copy writes besides its code (rec_meta) */
};

/* Code the process had at [addr, addr + len) from time on (a LOAD or a
 * MOVE's new place), in event order. */
struct mplace {
	uint64_t time, addr, len;
	uint64_t since;		/* a LOAD's map may start here (pg_code_since) */
	uint32_t pid, tid;
	uint32_t rec;		/* its mrec */
	uint64_t dead;		/* moved away or unloaded at this time */
	uint32_t killed;	/* the first later place over it, or NONE */
	uint32_t region, gen;
	bool move;
	/* a MOVE without carrying (no DWARF call graphs): no copy, its map
	 * points at the bytes of place src, as perf inject maps its moved
	 * function's file, so perf sees the one symbol it had */
	bool remap;
	uint32_t src;
	uint32_t img;		/* placed: its image (pub index), at pgoff */
	uint64_t pgoff;
	/* noted on a stack (pg_elfset_note_frames) from ref_lo to ref_hi;
	 * ref_lo > ref_hi: never */
	uint64_t ref_lo, ref_hi;
};

#define NONE UINT32_MAX

/* An image being assembled. */
struct img {
	size_t pub;		/* index in set->images */
	/* memory layout (every layout's code: pg_emit_code()); its digest
	 * is updated on the set's thread, each function's code by the
	 * digest the worker took of it during the walk (pg_plan_keep) */
	bool memory;
	uint64_t load_off;	/* memory layout: the PT_LOAD's start */
	struct pg_buf meh, mhdr;	/* memory layout: the merged tables */
	uint64_t meh_off;	/* their file offset */
	size_t nfde;
	uint64_t text_off, text_end;
	struct func *funcs;
	size_t nfuncs, cap;
	/* the build-id's, updated through ah, on its worker thread; a
	 * memory-layout image's on the set's thread */
	struct pg_digest *dig;
	struct pg_ahash *ah;	/* the set's; NULL once the worker has it */
	bool has_inl;		/* the digest says it has inlined subroutines */
	struct pg_dwarf dw;
	struct pg_buf strtab;
	const struct pg_code_cfi *unw;	/* real CFI, single-function images */
	/* the code written into the image's temporary as it is added, on
	 * the set's worker (files.c pg_files_stream: its struct stream), or
	 * NULL */
	struct pg_ahash_sink *sink;
};

struct pg_elfset {
	struct pg_code_process hdr;
	char *dump_name;	/* basename, for the compile unit's name */
	char *dump_path;	/* as given, for the run's budget warning */
	struct pg_elfset_budget *budget;	/* opts.budget */
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
	bool memory;		/* opts.memory_layout (and not per_function) */
	bool carry_live;
	bool zdebug;		/* DWARF sections zlib-compressed (not opts.plain_debug) */
	bool planned;		/* memory layout: finished, no more adds */
	struct mrec *recs;	/* memory layout: the LOADs placed at finish */
	size_t nrecs, recs_cap;
	/* their code's own digests (pg_digest_once), by rec, taken by the
	 * worker during the walk: blocks that never move while it writes */
	uint8_t **cdig;
	size_t ncdig, cdig_cap;
	/* their names and their rows' file names, copied (plan.c keep_*):
	 * read again at finish, from the dump they would map its pages
	 * again, which the walk gave back; the maps' names, so kept until
	 * the set is freed */
	struct strchunk *strs;
	struct pg_strmap kfiles;	/* the file names kept, by content */
	const char *kf_src, *kf_kept;	/* the last one asked for */
	struct pg_buf rows;	/* their line rows, packed (plan.c) */
	struct pg_code_line *unpacked;	/* one rec's rows, unpacked */
	size_t unpacked_cap;
	const char **scratch;	/* rec_meta's */
	size_t scratch_cap;
	struct mplace *places;	/* memory layout: code at an address from a time on */
	size_t nplaces, places_cap;
	struct pg_u64map ids;	/* code index -> latest map (own images) or place: idslot */
	/* the same for the small indexes most JITs count up from 0 or 1, by
	 * index: a hash map's random probes were a twentieth of a large
	 * inject's main thread; at most 4 x those in it + DENSE_SLACK
	 * entries, an index past that in ids (pg_set_id_*) */
	struct idslot *dense;
	size_t dense_cap, ndense;
	bool noting;		/* carry only code noted on a stack */
	bool fold_warned;	/* plan.c: MOVE copies kept at their own offsets */
	uint32_t *byaddr;	/* noting: places by address, their addresses, */
	uint64_t *addrs;	/* and the highest end among each one and */
	uint64_t *maxend;	/* those before it */
	size_t nbyaddr;		/* places indexed (stale when < nplaces) */
	uint64_t *spans;	/* [lo, hi) pairs: where any code is */
	size_t nspans;
	struct pg_elf_map *maps;
	size_t nmaps, maps_cap;
	/* the images' build-id digests, on a worker thread; the bytes they
	 * borrow (code, unwind tables) are those the image writes, which
	 * stay valid until it is written; and the images' writes (files.c),
	 * each a job until pg_files_join */
	struct pg_ahash *ah;
	struct wjob **jobs;
	size_t njobs, jobs_cap;
	/* in pg_elfset_finish: an image's write may still run when the next
	 * is built (joined at its end); one written by pg_elfset_add is done
	 * (or has failed) when add returns, as the caller expects */
	bool finishing;
	/* opts.background_writes: finish leaves its writes to
	 * pg_elfset_wait(), and the plan they read (plan_held) */
	bool background, plan_held;
	/* by map: the time of the LOAD whose map starts earlier (at its
	 * since), else UINT64_MAX */
	uint64_t *loaded;
	size_t loaded_cap;
};

/* What happened to an image's file, beside its public struct: a few
 * bytes, as a per-function dump has an image of each function.  The
 * temporary's name is not kept but made again (files.c tmp_name). */
struct pend {
	/* pending: the temporary's registration for removal on a signal;
	 * created: the final name's; else -1 (pg_cleanup_add handles are
	 * below 4 M) */
	int32_t reg;
	int32_t dreg;		/* made_dir: SUB's registration, or -1 */
	uint32_t rnd;		/* the temporary's pg_tmpname() */
	bool pending : 1;	/* a temporary finished (or being written) */
	bool direct : 1;	/* not a regular file: written in place, no temporary */
	bool created : 1;	/* committed: the final name is this set's file */
	bool made_dir : 1;	/* "SUB/NAME": SUB created by this set's commit */
};

/* Where every part of an image goes (file offsets, == vaddrs inside the
 * PT_LOAD), and the parts the writer makes itself rather than borrows. */
struct layout {
	uint64_t load_off, load_end;	/* the PT_LOAD */
	uint64_t note_off;
	uint64_t eh_off, eh_size, hdr_off, hdr_size;
	const uint8_t *ehp, *hdrp;	/* the process's unwind tables, or eh/ehh */
	/* the DWARF sections (SEC_ABBREV + i) as written: dw's buffers, or
	 * their compressed form in z[i] (SHF_COMPRESSED) where that is
	 * smaller, at dbg_off[i] */
	const struct pg_buf *dbg[4];
	struct pg_buf z[4];
	int zr[4];			/* pg_emit_zsection()'s results (0: not run) */
	uint64_t dbg_off[4];
	uint64_t sym_off, str_off, shstr_off, sh_off;
	size_t symsz;
	uint32_t shname[SEC_COUNT];	/* offsets in shstr */
	struct pg_buf eh, ehh;		/* empty unwind tables, when no CFI */
	struct pg_buf shstr;
	void *symbuf;			/* .symtab, filled in by emit_symtab */
};

/* an FDE for the .eh_frame_hdr: its code's address and its own */
struct fde_ent {
	uint64_t pc, fde;	/* addresses */
};

/* A merged .eh_frame being built (pg_cfi_merge) and its FDEs. */
struct cfi_tables {
	struct pg_buf *eh;
	uint64_t eh_addr;	/* where eh->p[0] will be */
	struct fde_ent *ents;
	size_t n, cap;
	bool be;
	unsigned ptrsize;
};

/* set.c */
struct pg_elf_map *pg_set_new_map(pg_elfset *set);
void pg_set_map_since(pg_elfset *set, struct pg_elf_map *m, uint64_t since);
bool pg_set_id_put(pg_elfset *set, uint64_t id, uint32_t at, bool place);
const struct idslot *pg_set_id_get(const pg_elfset *set, uint64_t id);
void pg_set_ids_reset(pg_elfset *set);
int pg_set_add_placed(pg_elfset *set, const struct pg_code_event *ld, uint64_t since,
		      struct pg_elf_place *out);

/* plan.c */
int pg_plan_keep(pg_elfset *set, const struct pg_code_event *ld, uint64_t since);
int pg_plan_move(pg_elfset *set, const struct pg_code_event *ev);
const struct pg_code_line *pg_plan_rows(pg_elfset *set, const struct mrec *r);
const uint8_t *pg_plan_cdig(const pg_elfset *set, size_t k);
void pg_plan_free_strings(pg_elfset *set);
int pg_plan_memory(pg_elfset *set);
int pg_plan_fallback(pg_elfset *set);

/* emit.c */
uint64_t pg_emit_headers_end(const struct pg_elfset *set);
int pg_emit_add_func(pg_elfset *set, struct img *im, const struct pg_code_event *ld,
		     uint64_t off, bool quiet, const uint8_t *cdig);
int pg_emit_layout(pg_elfset *set, struct img *im, struct layout *lo);
int pg_emit_dwarf_finish(const char *dump_name, struct img *im, struct layout *lo,
			 struct pg_diag *diag);
void pg_emit_zsection(const struct pg_code_process *h, struct img *im, struct layout *lo,
		      int i);
int pg_emit_layout_rest(const struct pg_code_process *h, struct img *im, struct layout *lo,
			struct pg_diag *diag);
void pg_emit_layout_free(struct layout *lo);
/* what writing an image needs besides it: nothing of the set, so that
 * the worker thread can write one while the set goes on (files.c) */
struct emit_out {
	const struct pg_code_process *hdr;
	const uint8_t *build_id;
	const char *path;	/* for messages */
	struct pg_diag *diag;
};
int pg_emit_elf(const struct emit_out *o, struct img *im, const struct layout *lo, int fd);
int pg_emit_code(const struct emit_out *o, const struct img *im, int fd);

/* cfi.c */
void pg_cfi_empty(struct pg_buf *eh, struct pg_buf *hdr, uint64_t eh_off, uint64_t hdr_off);
bool pg_cfi_merge(struct cfi_tables *t, const uint8_t *b, size_t n, uint64_t blob_addr,
		  uint64_t lo, uint64_t hi, const char **why);
int pg_cfi_cmp_fde(const void *a, const void *b);

/* files.c */
int pg_files_new_image(pg_elfset *set, const char *want, struct img **out);
void pg_files_free_image(struct img *im);
/* Lays out, names and writes im, which it takes (freed here or by the
 * worker thread that writes it): the caller keeps nothing of it. */
int pg_files_write_image(pg_elfset *set, struct img *im);
/* The image's code written as it is added, into a temporary opened now
 * (the packed layout's packs, the memory layout's images); quietly not
 * when that temporary cannot be made (the write reports it later). */
void pg_files_stream(pg_elfset *set, struct img *im);
int pg_files_close_pack(pg_elfset *set);
/* Waits for the images being written; the first failure is returned,
 * and reported when report is set. */
int pg_files_join(pg_elfset *set, bool report);
/* Removes the temporaries not committed (pg_elfset_free). */
void pg_files_abort_pending(pg_elfset *set);

#endif
