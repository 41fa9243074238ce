/* SPDX-License-Identifier: MIT */
/* ELF image builder: turns the LOADs of the code model (code.h) into ELF
 * images that perf, addr2line, gdb and the unwinders read.
 *
 * Layouts (docs/ARCHITECTURE.md, "Image layout"):
 *  - memory (opts.memory_layout): every image is laid out like the
 *    process's memory: a function sits at file offset (== vaddr) = its
 *    address - the image's base, so every map of one image has the same
 *    start - pgoff, which both of perf's DWARF unwinders need (libunwind
 *    takes one load bias per file, libdw reports one module per file and
 *    base; the one exception: without carry_live, a MOVE maps the bytes
 *    its code already has, as perf inject --jit does, which only DWARF
 *    unwinding would mind).  One image per code region (addresses closer
 *    than PG_ELF_REGION_GAP) and generation (a new image only where later
 *    code reuses an address range: a new LOAD over earlier code, a MOVE
 *    with carry_live);
 *    holes between functions are holes of a sparse file.  Functions with
 *    CFI share their image: its .eh_frame holds copies of their CIEs and
 *    FDEs (pc_begin rebased) and one .eh_frame_hdr indexes them all; both
 *    sit right after the region's code, where a map of their own
 *    (PG_ELF_MAP_TABLES) lets libunwind read them.  Placement is decided
 *    at pg_elfset_finish(); pg_elfset_maps() then lists every map;
 *  - packed (the default without memory_layout): functions without real
 *    CFI (no UNWINDING_INFO, or mapped_size 0) are packed, 16-byte
 *    aligned, into shared images <prefix>-packN.so; each packed image
 *    carries an empty .eh_frame_hdr so that perf's libunwind falls back
 *    to frame pointers for them; a function with real CFI gets a small
 *    image of its own, <prefix>-<code_index>.so, laid out as in the
 *    process: code, then .eh_frame at align8(code_size), then
 *    .eh_frame_hdr, so the pc-relative tables stay valid and one image
 *    has one load bias;
 *  - per_function writes every function that way (perf inject's layout).
 * In every image code has vaddr == file offset, so a map of the image
 * with pgoff == placement offset resolves ip - start + pgoff to the
 * symbol.
 *
 * In the directory /tmp a prefix "jitted-..." becomes "pg-jitted-...":
 * perf's libdw unwinder treats "/tmp/jitted-*" files as perf inject's own
 * (base = the map's start), which these images are not.
 *
 * Files are written as hidden temporary files in the directory
 * (".NAME.pgtmp-PID-RRRRRR", mode 0644 less the umask) and get their final
 * names only at pg_elfset_commit(), so that a run that fails half-way
 * leaves the directory as it found it; never through a symlink and never
 * rewritten in place; names come from the prefix and code_index only,
 * never from the JIT's function names.  Build-ids are SHA-1 digests of the
 * dump's identity and the image's contents: deterministic for the same
 * input, distinct between images.  An existing regular file that already
 * has an image's name and build-id is that image: it is used as it is
 * (reused), not written again, and never removed by this set.
 * Temporary files whose process is gone (a run killed by SIGKILL) are
 * removed from the directory by pg_elfset_new().  Files this process has
 * not yet committed and kept are listed for removal by a SIGINT/SIGTERM/
 * SIGHUP handler that calls the library's cleanup (the perfgraft command
 * installs one).
 *
 * Errors: 0 on success, a negative errno with the message in the pg_diag
 * given to pg_elfset_new().  Threads: a set (and its pg_diag) is used by
 * one thread at a time; separate sets are independent, but sets writing
 * into one directory need distinct prefixes (or build_id_names), or their
 * images replace each other.  pg_elfset_new() calls libelf's process-wide
 * elf_version(). */
#ifndef PERFGRAFT_ELFIMAGE_H
#define PERFGRAFT_ELFIMAGE_H

#include <perfgraft/code.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pg_elfset_budget;

struct pg_elfset_opts {
	size_t sz;		/* sizeof(struct pg_elfset_opts): fields are only
				 * ever added at the end; fields past sz read as
				 * zero (the defaults) */
	const char *dir;	/* existing directory for the images */
	const char *prefix;	/* file name prefix; NULL: "jitted-<pid>" */
	bool per_function;	/* one image per LOAD, named <prefix>-<index>.so */
	uint64_t pack_limit;	/* max code bytes per packed image; 0: 256 MiB */
	/* perf 5.19 to 6.7 built with libunwind, without the 2023 fix that
	 * subtracts pgoff, finds .eh_frame_hdr at min(map start) - (first
	 * PT_LOAD vaddr & ~page) + hdr vaddr: right for a one-map JIT image
	 * only when its PT_LOAD starts at the page-aligned code.  Older perf,
	 * perf with the fix (6.8+, Debian 12's 6.1.187) and libdw need the
	 * PT_LOAD at 0, the default. */
	bool cfi_layout_perf_5_19;
	/* name files <prefix>-<kind>-<12 hex digits of the build-id>.so, so an
	 * image is never replaced by a different one of the same name (perf
	 * data written earlier keeps resolving); the name is known once the
	 * image is written */
	bool build_id_names;
	/* refuse a dir that is a symbolic link (the default OUTPUT.d) */
	bool dir_nofollow;
	/* the memory layout (above); per_function wins over it, and with
	 * cfi_layout_perf_5_19 functions with CFI keep images of their own */
	bool memory_layout;
	/* memory layout: when a region starts a new generation, map the code
	 * of earlier generations that is still live into it again, so that a
	 * stack never holds frames of two images of one region (libdw would
	 * see two overlapping modules).  Costs a copy of that code per
	 * generation, at most as many bytes as all the code placed; only
	 * DWARF call graphs (user stacks in the samples) need it.  With
	 * pg_elfset_note_frames(), only the code noted on a stack during a
	 * generation is carried into it.  It also makes a MOVE a copy at its
	 * new address; without it a MOVE maps the bytes its code already has
	 * (PG_ELF_MAP_MOVE with the LOAD's image and pgoff). */
	bool carry_live;
	/* write the DWARF sections uncompressed; by default each is zlib
	 * compressed (SHF_COMPRESSED, as gcc -gz writes them) where that
	 * makes it smaller: perf, addr2line, objdump, libdw, readelf and
	 * llvm-dwarfdump read both */
	bool plain_debug;
	/* memory layout: the run's bound on the images' sparse size, shared
	 * by every set of one run (pg_elfset_budget_new()); NULL: each dump
	 * is bounded on its own only (see pg_elfset_finish()) */
	struct pg_elfset_budget *budget;
	/* pg_elfset_finish() returns while its images are still being
	 * written (compressed, laid out and written on the set's worker
	 * thread) so that the caller's next work overlaps it; see
	 * pg_elfset_wait() */
	bool background_writes;
};

/* A run's bound on what the memory layout's sparse images span: the sets
 * of one run (one thread) that share it (pg_elfset_opts.budget) together
 * span at most 64 x (the code bytes of their dumps + PG_ELF_RUN_SLACK)
 * of address range (the images' apparent size, less their tables and
 * DWARF); each dump is also bounded on its own, at 64 x (its code + 1 MiB).
 * A dump whose layout would pass the run's bound is written in the packed
 * layout instead, without a warning of its own:
 * pg_elfset_budget_report() gives one for the run.  The budget must
 * outlive the sets that use it. */
#define PG_ELF_RUN_SLACK (16ull << 20)

/* A new budget, or NULL when out of memory. */
struct pg_elfset_budget *pg_elfset_budget_new(void);
/* One warning naming the dumps written in the packed layout for the
 * run's bound (the first few, then how many more), if any; returns how
 * many there were. */
size_t pg_elfset_budget_report(const struct pg_elfset_budget *b, struct pg_diag *diag);
/* NULL is a no-op. */
void pg_elfset_budget_free(struct pg_elfset_budget *b);

/* Code regions of the memory layout are split where no code lies within
 * this many bytes; the region's unwind tables go into that gap. */
#define PG_ELF_REGION_GAP (1ull << 20)

/* Where a LOAD's code landed. */
struct pg_elf_place {
	uint32_t image;		/* index for pg_elfset_image(); PG_ELF_LATER
				 * in the memory layout (see pg_elfset_maps) */
	uint64_t pgoff;		/* file offset == vaddr of the code */
	uint64_t map_len;	/* length the process had mapped: code_size, or
				 * align8(code_size) + mapped_size with CFI */
};

/* An image of the set, owned by it. */
struct pg_elf_image {
	char *path;		/* dir/name */
	const char *name;	/* path inside dir: a basename, or SUB/NAME under carry_live */
	uint8_t build_id[20];
	uint64_t size;		/* bytes of the written file */
	uint64_t nfuncs;
	bool has_cfi;		/* real .eh_frame with FDEs */
	bool written;
	bool reused;		/* an identical file was already there */
	uint64_t dev, ino;	/* st_dev and st_ino of the file (kept by rename) */
};

#define PG_ELF_LATER UINT32_MAX

/* A map of an image, as an MMAP2 record gives it to perf. */
enum pg_elf_map_kind {
	PG_ELF_MAP_LOAD,	/* a LOAD's code */
	PG_ELF_MAP_MOVE,	/* code a MOVE put at a new address */
	PG_ELF_MAP_CARRY,	/* live code mapped again into a new generation */
	PG_ELF_MAP_TABLES,	/* the .eh_frame and .eh_frame_hdr of an image */
};

struct pg_elf_map {
	enum pg_elf_map_kind kind;
	/* when the map starts, on the producer's clock: the event's time,
	 * or a LOAD's since (pg_elfset_add_since; in the memory layout not
	 * before its generation's first LOAD), pg_elfset_map_loaded() */
	uint64_t time;
	uint32_t pid, tid;
	uint64_t id;		/* the code index; 0 for TABLES */
	uint64_t start, len, pgoff;
	uint32_t image;		/* index for pg_elfset_image() */
	uint64_t size;		/* bytes of code (len covers its tables too) */
	const char *name;	/* the function's (the LOAD's string); NULL for TABLES */
};

typedef struct pg_elfset pg_elfset;

/* Starts a set of images for one source.  proc (class, byte order,
 * machine, and the identity the build-ids digest) and the base name of
 * dump_name (the DWARF compile unit's name) are copied; opts must not be NULL.  diag is kept for the
 * set's warnings and errors and must outlive it.  Returns 0 with *out
 * set, or a negative errno (*out NULL): -EINVAL for opts whose sz is
 * below sizeof(size_t) or that set bytes past this library's struct, for a prefix that is not
 * a plain file name of at most 100 bytes (or a libelf too old), the errno
 * of opening opts->dir (-ENOENT, -ENOTDIR, -EACCES), -ENOMEM. */
int pg_elfset_new(const struct pg_code_process *proc, const char *dump_name,
		  const struct pg_elfset_opts *opts, struct pg_diag *diag,
		  pg_elfset **out);
/* Places a LOAD and fills *out (in the memory layout only at
 * pg_elfset_finish(): out->image is PG_ELF_LATER); records a MOVE (its
 * code mapped at the new address) and an UNLOAD (the code is gone), which
 * return 0, or 1 with a warning for a code index no LOAD had.  Images of their own are written at once;
 * packed images when full or at pg_elfset_finish().  The load's code, name
 * and file and function names must stay valid until then (its arrays are
 * consumed at once; the unwind tables are used only by an image of its
 * own, written in this call).  Line rows become .debug_line, inline chains
 * DW_TAG_inlined_subroutine entries.  Returns 0, 1 when nothing was placed
 * (not a LOAD, a LOAD without code, or a name over 1 MiB: a warning), or a negative
 * errno: -ENOMEM, -EIO when libelf cannot write the image, or the errno of
 * creating or writing the file (-EACCES, -ENOSPC, ...; the message names
 * the file).  A failure leaves the images written before it pending. */
int pg_elfset_add(pg_elfset *set, const struct pg_code_event *load,
		  struct pg_elf_place *out);
/* The same, with a LOAD's map starting at since when that is before its
 * time (pg_code_since(): code that runs before its LOAD is named). */
int pg_elfset_add_since(pg_elfset *set, const struct pg_code_event *load, uint64_t since,
			struct pg_elf_place *out);
/* Writes the packed image still open, if any, or in the memory layout
 * every image.  A dump whose memory layout would make the output explode
 * is written in the packed layout instead, with a warning: past 256 +
 * LOADs/64 generations, MOVEs copying more than twice the code (or twice
 * the names, symbols, line rows and inline entries that its LOADs write,
 * each + 1 MiB), a region wider than 1 GiB, regions spanning more than
 * 64 x (the code + 1 MiB), more than 1 GiB of names and rows; or past the
 * run's budget (opts.budget), whose warning is pg_elfset_budget_report()'s.
 * Returns 0 or a negative errno as pg_elfset_add().  A later
 * pg_elfset_add() starts a new packed image; in the memory layout it is
 * -EINVAL. */
int pg_elfset_finish(pg_elfset *set);
/* With opts.background_writes: waits for the images pg_elfset_finish()
 * left being written.  Until then their names, build-ids, dev and ino
 * and the maps are final, but an image's size is not (0), and the code,
 * names and tables the LOADs lent must stay valid.  Returns 0 or a
 * negative errno as pg_elfset_finish() would have (the message in the
 * set's pg_diag).  pg_elfset_commit(), pg_elfset_discard() and
 * pg_elfset_free() wait too; without background writes, or called again,
 * it returns 0 at once. */
int pg_elfset_wait(pg_elfset *set);
/* Memory layout with carry_live: notes that a stack at time (the
 * producer's clock) may hold frames at addrs (return addresses, the
 * sample's ip and registers, or any stack word: what is no code is
 * ignored).  The first call, even with n == 0, makes pg_elfset_finish()
 * carry into a newer generation only the live code noted during that
 * generation, instead of all of it: the code a stack of that time can
 * reach.  Call between the last pg_elfset_add() and pg_elfset_finish().
 * Returns 0, -ENOMEM, or -EINVAL after pg_elfset_finish(). */
int pg_elfset_note_frames(pg_elfset *set, uint64_t time, const uint64_t *addrs, size_t n);
/* Every map of the images written so far, in the order of the events
 * that made them (a generation's CARRY and TABLES maps come before the
 * LOAD that starts it, with its time): what an injector turns into MMAP2
 * records.  Valid until the next call on the set other than
 * pg_elfset_image(), pg_elfset_count(), pg_elfset_maps() or
 * pg_elfset_wait(). */
const struct pg_elf_map *pg_elfset_maps(const pg_elfset *set, size_t *n);
/* The time of the event that made map i: its LOAD's time where the map
 * starts earlier, else the map's own time (0 when i is out of range). */
uint64_t pg_elfset_map_loaded(const pg_elfset *set, size_t i);
/* Renames every image written so far (and not reused) to its final name,
 * replacing a different file of that name.  Committed files stay listed
 * for removal on a signal until pg_elfset_keep() or pg_elfset_free().
 * Returns 0, or the errno of a rename (the images before it are
 * committed: pg_elfset_discard() removes them). */
int pg_elfset_commit(pg_elfset *set);
/* The committed files are the caller's for good: no longer removed on a
 * signal, nor by pg_elfset_discard(). */
void pg_elfset_keep(pg_elfset *set);
/* Removes every file this set wrote: temporaries, and committed images it
 * created; reused files stay.  Use it when the output the images were for
 * failed. */
void pg_elfset_discard(pg_elfset *set);
/* Images registered so far, written or not (an open packed image counts). */
size_t pg_elfset_count(const pg_elfset *set);
/* Image i (the index of pg_elf_place.image), or NULL when i is out of
 * range.  The struct and its strings belong to the set and are valid only
 * until the next pg_elfset_add(), pg_elfset_finish() or pg_elfset_free():
 * the array may move, and with build_id_names path is replaced when the
 * image is written.  written tells whether the image is complete (as a
 * temporary until pg_elfset_commit(), or reused); size, build_id, nfuncs,
 * has_cfi, dev and ino are meaningful only then.  path names the final
 * file, which exists once committed (or when reused). */
const struct pg_elf_image *pg_elfset_image(const pg_elfset *set, size_t i);
/* Frees the set.  A packed image still open is dropped, not written;
 * temporaries not committed are removed, committed files stay (kept).
 * NULL is a no-op. */
void pg_elfset_free(pg_elfset *set);

#ifdef __cplusplus
}
#endif
#endif
