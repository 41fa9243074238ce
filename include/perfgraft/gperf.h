/* SPDX-License-Identifier: MIT */
/* gperftools CPU profiles (CPUPROFILE= / libprofiler): reader and conversion
 * into perf.data.
 *
 * Errors: functions returning int give 0 (or a count) on success and a
 * negative errno on failure, with the message in the pg_diag; damage that
 * leaves the rest usable (a truncated tail, a record with a zero PC, odd map
 * lines) is a warning through the pg_diag's callback.
 *
 * Threads: the reader parses the whole profile at open and is only read
 * afterwards (it keeps no pg_diag): once open, its accessors may be
 * called from any number of threads at once.  Separate handles and
 * conversions are independent.  pg_gperf_convert() calls libelf's
 * process-wide elf_version() (it reads the build-ids of the mapped
 * files). */
#ifndef PERFGRAFT_GPERF_H
#define PERFGRAFT_GPERF_H

#include <perfgraft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pg_gperf_header {
	unsigned word_bits;		/* 32 or 64: the writer's pointer size */
	bool big_endian;
	uint64_t header_slots;		/* slot 1: header words after it (3) */
	uint64_t version;		/* 0 (1 would be a Java profile) */
	uint64_t period_us;		/* sampling period as written (0 kept here) */
};

/* One distinct call stack: the counts of every record with this exact PC
 * list, summed.  pcs[0] is the interrupted PC, the others are return
 * addresses as written (not adjusted). */
struct pg_gperf_stack {
	uint64_t count;
	uint32_t depth;
	const uint64_t *pcs;
	uint64_t offset;		/* byte offset of its first record */
};

/* A line of the mapped-objects text in /proc/PID/maps form, with $build
 * substituted and " (deleted)" stripped. */
struct pg_gperf_mapping {
	uint64_t start, end, offset;
	char perms[5];			/* "r-xp" */
	uint32_t prot;			/* PROT_READ 1 | PROT_WRITE 2 | PROT_EXEC 4 */
	uint32_t flags;			/* MAP_PRIVATE 2 or MAP_SHARED 1 */
	uint32_t maj, min;
	uint64_t inode;
	const char *path;		/* "" for an anonymous mapping */
	bool deleted;			/* had " (deleted)" */
	uint64_t line_offset;		/* byte offset of its line in the file */
};

/* What open read.  sz is set by the caller to
 * sizeof(struct pg_gperf_stats); fields are only ever added at the end,
 * and the library writes only the first sz bytes (an older, shorter struct
 * gets the counters it knows of). */
struct pg_gperf_stats {
	size_t sz;			/* set by the caller */
	uint64_t records;		/* binary records read (trailer excluded) */
	uint64_t samples;		/* their counts, summed */
	uint64_t zero_pc_records;	/* 1: a record with first PC 0 ended the data */
	uint64_t zero_pc_samples;	/* its count (not used) */
	uint64_t empty_records;		/* skipped: count 0 or no PCs */
	uint64_t max_count;		/* the largest count of one record read */
	uint64_t max_count_at;		/* that record's byte offset */
	uint64_t map_lines, ignored_lines;
	bool trailer;			/* the binary part ended properly */
	uint64_t truncated_at;		/* offset where reading stopped early (a cut
					 * record, or a last maps line without a
					 * newline: not used), or 0 */
	uint64_t binary_bytes;		/* header to trailer */
};

typedef struct pg_gperf pg_gperf;

/* Does the buffer start like a CPU profile header (either size, order)?
 * No state; safe from any thread. */
bool pg_gperf_probe(const void *buf, size_t len);
/* Maps path and reads the whole profile: the stacks (identical PC lists
 * summed) and the mapped-objects text.  Everything before damage is kept
 * (a warning, see pg_gperf_stats()).  Returns 0 with *out set, or a
 * negative errno (*out NULL): the errno of open/fstat/mmap, -EINVAL for a
 * file that is not regular or not a version 0 CPU profile (bad header),
 * -ENOMEM. */
int pg_gperf_open(const char *path, struct pg_diag *diag, pg_gperf **out);
/* buf must outlive the handle; name (NULL: "profile") is copied and used
 * in messages. */
int pg_gperf_open_mem(const void *buf, size_t len, const char *name,
		      struct pg_diag *diag, pg_gperf **out);
/* The decoded header, owned by the handle (valid until close). */
const struct pg_gperf_header *pg_gperf_header(const pg_gperf *g);
/* What open read, copied into *st (st->sz set by the caller: fields
 * beyond it are not written). */
void pg_gperf_stats(const pg_gperf *g, struct pg_gperf_stats *st);
size_t pg_gperf_stack_count(const pg_gperf *g);	/* first-seen order */
/* Stack i, or NULL when i is out of range; it and its pcs are owned by
 * the handle (valid until close). */
const struct pg_gperf_stack *pg_gperf_stack(const pg_gperf *g, size_t i);
size_t pg_gperf_mapping_count(const pg_gperf *g);
/* Mapping i in file order, or NULL when i is out of range; owned by the
 * handle, path included (valid until close). */
const struct pg_gperf_mapping *pg_gperf_mapping(const pg_gperf *g, size_t i);
/* Unmaps and frees.  NULL is a no-op. */
void pg_gperf_close(pg_gperf *g);

/* ---- conversion into perf.data ---- */

struct pg_gperf_path_map {
	const char *from, *to;		/* a leading path prefix and its replacement */
};

/* Options of pg_gperf_convert(); read during the call only. */
struct pg_gperf_opts {
	size_t sz;			/* sizeof(struct pg_gperf_opts): fields are
					 * only ever added at the end; unset
					 * fields (zero) are the defaults */
	const char *profile;
	const char *output;		/* "-": pipe mode on stdout */
	bool pipe;
	int64_t pid;			/* < 0: from the file name (NAME_PID), else 1 */
	const char *comm;		/* NULL: the main program's base name */
	const char *root;		/* prepended to paths no map rule changed */
	const struct pg_gperf_path_map *maps;
	size_t nmaps;
	int compress_level;		/* file output: zstd level, 0 off */
	/* one SAMPLE per tick while the profile counts at most this many
	 * ticks in all, else one per distinct stack carrying its count in
	 * its period (a warning says so); 0: PG_GPERF_DEFAULT_MAX_SAMPLES */
	uint64_t max_samples;
	bool weighted;			/* always one SAMPLE per distinct stack */
	/* drop the frames perl pprof (google-pprof --text) drops by default:
	 * while every stack has the same second frame (taken for the
	 * signal handler), it is removed from all of them, with a following
	 * frame equal to the first; false keeps every frame, as
	 * google-pprof --no-auto-signal-frm counts */
	bool pprof_frames;
};

/* ~2.8 h of CPU time at gperftools' default 100 Hz: a few hundred MB of
 * per-tick samples */
#define PG_GPERF_DEFAULT_MAX_SAMPLES 1000000ull

/* What pg_gperf_convert() did.  sz is set by the caller to
 * sizeof(struct pg_gperf_convert_stats); fields are only ever added at the
 * end, and the library writes only the first sz bytes.  The reader's
 * counts are not embedded (an embedded struct could never grow without
 * moving every field after it): profile points to the caller's own
 * struct pg_gperf_stats, with its own sz set, or is NULL when they are not
 * wanted.  The library only reads profile (and leaves it as it was). */
struct pg_gperf_convert_stats {
	size_t sz;			/* set by the caller */
	struct pg_gperf_stats *profile;	/* set by the caller (NULL: not wanted);
					 * gets pg_gperf_stats() of the profile */
	uint64_t stacks, samples;	/* distinct stacks, SAMPLE records written */
	bool weighted;			/* one SAMPLE per stack, period = count x period */
	uint64_t mmaps, build_ids;
	uint64_t dropped_frames;	/* ticks x frames: zero or above-user-space addresses */
	uint64_t dropped_samples;	/* ticks in stacks with no frame left */
	uint64_t period_ns;		/* the sampling period (one tick) */
	uint32_t pid;
	char comm[16];
	uint64_t out_bytes;
	/* pprof_frames: the second frames removed from every stack (one per
	 * pass of the rule, as pprof prints "Removing ADDR from all stack
	 * traces."), and ticks x frames removed in all */
	uint64_t pprof_passes, pprof_removed;
};

#define PG_GPERF_DEFAULT_PERIOD_US 10000	/* gperftools' default 100 Hz */

/* Converts o->profile into a perf.data at o->output ("-": standard
 * output, pipe mode): a COMM, an MMAP2 per executable mapping (with the
 * build-id of the file, read where the mapped path exists after the path
 * maps and root are applied), and cpu-clock SAMPLEs with their call chains:
 * one per counted tick (period = the sampling period), or, when the ticks
 * number more than max_samples or o->weighted is set, one per distinct
 * stack whose period is its count x the sampling period.  Either way
 * perf's period sums (report overhead and period, annotate percentages)
 * are pprof's counts x the period; the output is bounded by max_samples
 * records or by the distinct stacks.  The output is written atomically
 * (see pg_pdw_open()) and removed on failure.  o is required (it names
 * the profile and the output); o->sz is the caller's
 * sizeof(struct pg_gperf_opts): fields past it read as zero (their
 * defaults), and bytes past this library's struct must be zero.  st may
 * be NULL (no counts wanted); else st->sz (and st->profile->sz when
 * profile is set) must be set, and st gets the counts as far as the work
 * went when the call returns, failed or not.  Returns 0, or a negative
 * errno with the message in diag->err: -EINVAL for o NULL, sz below
 * sizeof(size_t) or non-zero fields this library does not know,
 * pg_gperf_open()'s errors, -EINVAL for a sampling
 * period beyond 64-bit nanoseconds, -EFBIG when the ticks x period sum
 * beyond 64 bits (a damaged count: perf could not add them up), -EINVAL
 * for a stack that does not fit a perf record, the output's errors,
 * -ENOMEM. */
int pg_gperf_convert(const struct pg_gperf_opts *o, struct pg_diag *diag,
		     struct pg_gperf_convert_stats *st);

#ifdef __cplusplus
}
#endif
#endif
