/* SPDX-License-Identifier: MIT */
/* ELF image builder: turns jitdump LOADs into ELF images that perf,
 * addr2line, gdb and the unwinders read.
 *
 * Layout (see DESIGN.md, "Image layout"):
 *  - functions without real CFI (no UNWINDING_INFO, or mapped_size 0) are
 *    packed, 16-byte aligned, into shared images <prefix>-packN.so; each
 *    packed image carries an empty .eh_frame_hdr so that perf's libunwind
 *    falls back to frame pointers for them;
 *  - a function with real CFI gets a small image of its own,
 *    <prefix>-<code_index>.so, laid out as in the process: code, then
 *    .eh_frame at align8(code_size), then .eh_frame_hdr, so the
 *    pc-relative tables stay valid and one image has one load bias;
 *  - per_function writes every function that way (perf inject's layout).
 * In every image code has vaddr == file offset, so a map of the image
 * with pgoff == placement offset resolves ip - start + pgoff to the
 * symbol. */
#ifndef PERFGRAFT_ELFIMAGE_H
#define PERFGRAFT_ELFIMAGE_H

#include <perfgraft/jitdump.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pg_elfset_opts {
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
};

/* Where a LOAD's code landed. */
struct pg_elf_place {
	uint32_t image;		/* index for pg_elfset_image() */
	uint64_t pgoff;		/* file offset == vaddr of the code */
	uint64_t map_len;	/* length the process had mapped: code_size, or
				 * align8(code_size) + mapped_size with CFI */
};

struct pg_elf_image {
	char *path;		/* dir/name */
	const char *name;	/* basename inside path */
	uint8_t build_id[20];
	uint64_t size;		/* bytes of the written file */
	uint64_t nfuncs;
	bool has_cfi;		/* real .eh_frame with FDEs */
	bool written;
};

typedef struct pg_elfset pg_elfset;

int pg_elfset_new(const struct pg_jd_header *hdr, const char *dump_name,
		  const struct pg_elfset_opts *opts, struct pg_diag *diag,
		  pg_elfset **out);
/* Places a LOAD.  Images of their own are written at once; packed
 * images when full or at pg_elfset_finish().  The load's code and name
 * must stay mapped until then.  Returns 0, 1 when the LOAD has no code
 * (nothing placed), or a negative errno. */
int pg_elfset_add(pg_elfset *set, const struct pg_jd_load *ld,
		  struct pg_elf_place *out);
int pg_elfset_finish(pg_elfset *set);
size_t pg_elfset_count(const pg_elfset *set);
const struct pg_elf_image *pg_elfset_image(const pg_elfset *set, size_t i);
void pg_elfset_free(pg_elfset *set);

#ifdef __cplusplus
}
#endif
#endif
