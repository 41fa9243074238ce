/* SPDX-License-Identifier: MIT */
/* JIT code into perf.data: what perf inject --jit does, with the images
 * of elfimage.h and the injected MMAP2 records merged in time order.
 *
 * Threads: pg_inject() keeps no state between calls; concurrent calls
 * with their own pg_diag, outputs and image directories are independent
 * (at most one of them may use "-" for standard input or output). */
#ifndef PERFGRAFT_INJECT_H
#define PERFGRAFT_INJECT_H

#include <perfgraft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

enum pg_cfi_layout {
	/* PT_LOAD at 0: perf before 5.19, perf with the 2023 libunwind
	 * base-address fix (6.8+, and stable builds that carry it, such as
	 * Debian 12's 6.1.187), and libdw-based unwinding */
	PG_CFI_LAYOUT_STANDARD,
	/* perf 5.19 .. 6.7 with libunwind and without that fix */
	PG_CFI_LAYOUT_PERF_5_19,
};

/* Options of pg_inject(); the strings are read during the call only. */
struct pg_inject_opts {
	size_t sz;		/* sizeof(struct pg_inject_opts): fields are only
				 * ever added at the end; unset fields (zero) are
				 * the defaults */
	const char *input;	/* path or "-" */
	const char *output;	/* path or "-" (pipe mode) */
	const char *image_dir;	/* NULL: OUTPUT.d (perf.jit.data.d for "-") */
	const char *const *jitdumps;	/* dumps given by hand, injected for their pid */
	size_t njitdumps;
	const char *jitdump_dir;	/* where to look for dumps that moved */
	bool per_function;
	enum pg_cfi_layout cfi_layout;
	/* called with the fraction of the input done, at most 4 times/s */
	void (*progress)(void *ctx, double done);
	void *progress_ctx;
	/* called for each dump found through a recorded mmap, before it is
	 * read: its path, pid and how it was recognised */
	void (*found)(void *ctx, const char *path, uint32_t pid, const char *how);
	void *found_ctx;
	/* the image layout (elfimage.h) unless per_function; with the memory
	 * layout and samples with user stacks (DWARF call graphs), live code
	 * is carried into new generations (pg_elfset_opts.carry_live) */
	enum pg_inject_layout {
		PG_INJECT_LAYOUT_DEFAULT = 0,	/* memory */
		PG_INJECT_LAYOUT_PACKED,
		PG_INJECT_LAYOUT_MEMORY,
	} layout;
	/* DWARF sections of the images uncompressed (pg_elfset_opts.plain_debug) */
	bool plain_debug;
	/* Pipe-mode input: a dump found through a marker is followed as its
	 * JIT writes it.  A sample is held back until its process's dump
	 * has been read past the sample's time, or the dump has ended (the
	 * process exited, the input ended, or the file was not written for
	 * live_wait_ms: 0 is the default, 10 s); the records held back (a
	 * sample and every record after it, in order) use at most
	 * live_hold bytes (0: the default, 64 MiB), past which the oldest
	 * are written as they are, with a warning. */
	uint64_t live_wait_ms;
	uint64_t live_hold;
	/* perf's build-id cache: after a successful run every image also gets
	 * an entry there, laid out as perf's own (DIR/PATH/BUILD-ID/elf, a
	 * hard link to the image, a copy across file systems; and
	 * DIR/.build-id/XX/YYYY linking to it), so that perf finds the images
	 * by build-id once the output moved or was packed by perf archive, as
	 * it finds perf inject --jit's.  NULL: perf's default
	 * ($PERF_BUILDID_DIR, else buildid.dir of perf's config, else
	 * $HOME/.debug).  A cache that cannot be written is a warning. */
	const char *buildid_dir;
	bool no_buildid_cache;	/* no entries: the images are found by path only */
	/* called from the calling thread, often (the caller throttles),
	 * file and pipe mode: the bytes of input read so far (the perf.data's
	 * and every dump's, a live dump's as it grows) and the bytes to read
	 * in all as far as known: the perf.data's and the dumps' opened so
	 * far (grows as dumps are found), 0 for pipe-mode input (unknown).
	 * Shares progress_ctx. */
	void (*progress_bytes)(void *ctx, uint64_t done, uint64_t total);
};

/* What pg_inject() did, written when it returns, failed or not: the
 * counts as far as the run went.  sz is set by the caller to
 * sizeof(struct pg_inject_stats); fields are only ever added at the end,
 * and the library writes only the first sz bytes (an older, shorter struct
 * gets the counts it knows of). */
struct pg_inject_stats {
	size_t sz;		/* set by the caller */
	uint64_t records_in, records_out;
	uint64_t dumps, dumps_failed;
	uint64_t loads, moves, mmaps_injected;
	uint64_t markers_dropped, anon_dropped;
	uint64_t images, image_bytes;
	uint64_t output_bytes;
	bool cfi_compat;
	/* The image directory as used (opts.image_dir, or the default),
	 * NULL when the run failed before it was made or checked.  Allocated
	 * by pg_inject() (only when sz covers this field) and the caller's
	 * from then on: free() it after every call, success or failure. */
	char *image_dir;
	/* memory layout: maps of live code into a later generation */
	uint64_t carried;
	/* maps of LOADs that start before the LOAD's time, from where the
	 * range last held other code (pg_code_since) */
	uint64_t early;
	/* pipe-mode input (live dumps): the most bytes of records held back
	 * at once, samples written before their dump was read past them
	 * (the bound or live_wait_ms reached: perhaps not named), and the
	 * times a dump was read again as it grew */
	uint64_t held_max_bytes, held_forced, live_reads;
	/* perf's build-id cache (opts.buildid_dir): images given an entry,
	 * images whose build-id had one already, and what the run wrote
	 * outside the image directory: names (hard links, copies, symlinks),
	 * directories, and bytes (copies only: a hard link writes none) */
	uint64_t cache_added, cache_present, cache_files, cache_dirs, cache_bytes;
};

/* Copies opts->input (a perf.data recorded with -k mono, file or pipe
 * mode; "-" reads standard input) to opts->output (pipe mode when the
 * input is pipe mode or output is "-", which writes standard output),
 * written atomically beside its final name.  Every jitdump the input
 * records a marker mmap of (a file named jit-PID.dump mapped by PID, or
 * any file mapped executable whose header is a jitdump's with the mapping
 * process's pid; looked for at the recorded path, then, for dump-like
 * names, in jitdump_dir), and every dump in jitdumps, is read once:
 * its images go into the image directory (created when missing, its
 * parent must exist) and one MMAP2 per LOAD/MOVE, naming the image by its
 * absolute path, is merged into the records in time order; the markers
 * and the exec anonymous maps the JIT code hid behind are dropped.  A dump
 * that cannot be used (missing, damaged, a clock that does not match the
 * input's) is a warning and counted in dumps_failed; the rest is injected.
 * When no dump at all is injected and some were to be (dumps_failed is
 * not zero), the run fails with -ENODATA, "nothing injected: " and the
 * first dump's reason, before the output is committed (perf inject --jit
 * fails there too); a recording with no marker and no jitdumps is copied.
 * A dump of jitdumps that cannot be opened, or is no jitdump, fails the
 * run (its errno: -ENOENT, -EINVAL, ...), as a missing input does.
 * found, when set, is called (from the calling thread) with each dump
 * found through a marker before it is read.
 * progress is called from the calling thread, for file-mode input only.
 * Returns 0, or a negative errno with the message in diag->err: -EINVAL
 * for opts (below), the input's errors (see pg_perfdata_open(),
 * pg_perfdata_next()), the output's (pg_pdw_open(), pg_pdw_close()), the
 * errno of creating the image directory or of writing an image (-ENOSPC,
 * ...: the message names the file), -ELOOP when the default image directory is a
 * symbolic link, -ENOMEM.  The images take their final names only when
 * the output's bytes are all written (file output), or before the records
 * that name them (a stream: "-" or a FIFO); an image already there with
 * the same name and build-id is reused.  A failed run removes only what
 * it created (its output, its images, the image directory it made): the
 * earlier output and images stay as they were.  diag, and opts' input
 * and output, must not be NULL.  opts is required (NULL is -EINVAL: it
 * names the input and the output); opts->sz is the caller's
 * sizeof(struct pg_inject_opts): fields past it read as zero (their
 * defaults), and bytes past this library's struct must be zero (else
 * -EINVAL, as for sz below sizeof(size_t)).  stats may be NULL (no counts
 * wanted); else stats->sz must be set. */
int pg_inject(const struct pg_inject_opts *opts, struct pg_diag *diag,
	      struct pg_inject_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
