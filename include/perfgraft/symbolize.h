/* SPDX-License-Identifier: MIT */
/* Symbolization of JIT addresses from the code model (code.h: jitdump
 * files today): function, offset in it and source file:line:column,
 * without writing any file.
 *
 * Time model.  A JIT reuses addresses: the code at an address depends on
 * when it is asked.  Every LOAD (and MOVE) puts its code at its address
 * from its record time on; a later LOAD or MOVE covering part of it
 * replaces that part, and only that part, from its own time on.  This is
 * the rule perf applies to the MMAP2 records of `perf inject --jit`
 * (a newer map replaces the overlapped part of older ones), so a lookup
 * at the time of a sample names what perf report names for that sample.
 * A MOVE leaves the old range in place, as perf inject does.  CLOSE
 * changes nothing (perf ignores it).  Records are applied in time order;
 * equal times keep file order.
 *
 * Dumps of several processes can be loaded into one symbolizer; each
 * process (the header pid) has an address space of its own, and dumps
 * with the same pid share one.
 *
 * Ownership: names, file names and dump paths in results point into the
 * symbolizer (into the mapped dumps for names) and stay valid until
 * pg_symbolizer_free().
 *
 * Errors: functions returning int give 0 (or a count) on success and a
 * negative errno on failure, with the message in the pg_diag passed to
 * pg_symbolizer_new().  A damaged dump is refused whole, naming the byte
 * offset; a truncated tail is a warning and the complete records before
 * it are used.
 *
 * Threads: pg_symbolizer_add*() must not run concurrently with anything
 * else on the same symbolizer.  After the last add, pg_symbolize() and
 * pg_symbolizer_live() only read: any number of threads may call them at
 * once.  The first lookup after an add builds the index; call
 * pg_symbolizer_freeze() before sharing the handle between threads. */
#ifndef PERFGRAFT_SYMBOLIZE_H
#define PERFGRAFT_SYMBOLIZE_H

#include <perfgraft/code.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The time argument's "at the end of the dumps": the code that was live
 * there last. */
#define PG_SYM_TIME_END UINT64_MAX
/* The pid argument's "any process": dumps are tried in the order they
 * were added and the first that knows the address answers. */
#define PG_SYM_ANY_PID UINT32_MAX

typedef struct pg_symbolizer pg_symbolizer;

struct pg_sym {
	const char *name;	/* function name as the JIT wrote it */
	uint64_t start;		/* where the code lived (LOAD code_addr or MOVE new_code_addr) */
	uint64_t size;		/* its code_size */
	uint64_t offset;	/* the address minus start */
	uint64_t code_index;
	uint64_t time;		/* record time of the LOAD or MOVE that put it there
				 * (UINT64_MAX, PG_SYM_TIME_END, counts as one less) */
	uint64_t until;		/* time it was replaced there; PG_SYM_TIME_END: never */
	uint32_t pid;		/* the dump's header pid */
	const char *dump;	/* path of the dump, as given */
	const char *file;	/* source file, NULL when no line row covers the address */
	uint32_t line;		/* 0 with a file: the row says "no source line" */
	uint32_t column;	/* 1-based column where the JIT gives one (V8), else 0 */
	/* how many other pieces of code occupied the address at some time in
	 * the dumps; nonzero means a lookup without a time may mislead */
	uint32_t reused;
};

int pg_symbolizer_new(struct pg_diag *diag, pg_symbolizer **out);
/* Reads a whole dump (pg_code_open: mapped, not copied, so the file must
 * not be truncated while the symbolizer lives).  Returns 0 or a negative
 * errno. */
int pg_symbolizer_add(pg_symbolizer *s, const char *path);
/* Reads the rest of an open source, which is the symbolizer's from this
 * call on, whatever it returns (closed by pg_symbolizer_free() at the
 * latest); its path names it in results.  The source's pg_diag should be
 * the symbolizer's. */
int pg_symbolizer_add_source(pg_symbolizer *s, pg_code_source *src);
/* The same over a caller-owned buffer that must outlive the symbolizer;
 * name is used in messages and as the dump path in results. */
int pg_symbolizer_add_mem(pg_symbolizer *s, const void *buf, size_t len,
			  const char *name);
/* Builds the lookup index now (otherwise the first lookup does). */
int pg_symbolizer_freeze(pg_symbolizer *s);
void pg_symbolizer_free(pg_symbolizer *s);

/* Looks addr up in pid's address space (PG_SYM_ANY_PID: any) at time
 * (PG_SYM_TIME_END: the end of the dumps).  Times are the dump's record
 * times (CLOCK_MONOTONIC ns for every common producer, the times perf
 * records with -k mono).  Returns 1 and fills *out, 0 when no code was
 * there then (*out untouched), or a negative errno. */
int pg_symbolize(pg_symbolizer *s, uint32_t pid, uint64_t addr, uint64_t time,
		 struct pg_sym *out);

/* n lookups at once, each as pg_symbolize(s, pid, addrs[i], times[i],
 * &out[i]) with found[i] its 1 or 0 (times NULL: PG_SYM_TIME_END for all),
 * faster in bulk: the memory the lookups touch is fetched
 * for many of them at a time.  Returns 0 or a negative errno. */
int pg_symbolize_batch(pg_symbolizer *s, uint32_t pid, size_t n, const uint64_t *addrs,
		       const uint64_t *times, struct pg_sym *out, int *found);

/* Whether a dump of process pid was added. */
bool pg_symbolizer_has_pid(const pg_symbolizer *s, uint32_t pid);
/* The pids of the processes whose dumps were added, in add order: up to
 * max of them into pids; returns how many there are. */
size_t pg_symbolizer_pids(const pg_symbolizer *s, uint32_t *pids, size_t max);

/* Calls cb for every piece of code live at time in pid's address space
 * (PG_SYM_ANY_PID: the first pid added), in address order, ranges never
 * overlapping.  A function partly replaced by later code is reported as
 * the pieces of it still live: sym->start and sym->size then describe the
 * piece, sym->offset its distance from the function's start; file and
 * line are not filled.  A nonzero return from cb stops the walk and is
 * returned. */
typedef int (*pg_sym_live_fn)(void *ctx, const struct pg_sym *sym);
int pg_symbolizer_live(pg_symbolizer *s, uint32_t pid, uint64_t time,
		       pg_sym_live_fn cb, void *ctx);

/* Counts over the dumps added (a refused dump adds nothing but its
 * process's address space). */
struct pg_symbolizer_stats {
	size_t sz;			/* set by the caller: sizeof(struct
					 * pg_symbolizer_stats); fields beyond
					 * it are not written */
	uint64_t dumps, pids;
	uint64_t loads, moves;		/* placements made */
	uint64_t pieces;		/* address x time pieces in the index */
	uint64_t lines;			/* line rows kept */
	uint64_t dropped_lines;		/* rows outside their function */
	uint64_t empty_loads;		/* LOADs without code: nothing placed */
};
void pg_symbolizer_stats(const pg_symbolizer *s, struct pg_symbolizer_stats *st);

/* Address arguments: "ADDR" or "ADDR@TIME".  ADDR is hex, with or without
 * 0x.  TIME is either integer nanoseconds or seconds with a fraction
 * ("12345.678901", perf script's form): a fraction of fewer than 9 digits
 * stands for the whole interval it rounds, and its end is used (code must
 * be loaded before it runs); a ':' after it, as perf script prints it, is
 * accepted.  Without @TIME, *time is PG_SYM_TIME_END.  Leading and
 * trailing blanks (and a line's newline) are skipped.  Returns 0, or -EINVAL with *err_at the byte offset in s of the first
 * character that does not fit. */
int pg_sym_parse_addr(const char *s, size_t len, uint64_t *addr, uint64_t *time,
		      size_t *err_at);

/* One line of `perf script` output, split where the symbolizer needs it.
 * Recognized are a sample header (the "pid[/tid] [cpu] secs.frac:" part
 * of "comm pid/tid [cpu] secs.frac: ...") and an unresolved frame: an
 * address followed by "[unknown]" and an optional " (DSO)" at the end of
 * the line, the form of call-chain lines and of the ip,sym,dso fields on a
 * header line.  Offsets are from the line's start. */
struct pg_script_line {
	bool header;		/* a sample header: time is set */
	bool has_pid, has_tid;	/* "pid/tid" gives both; a lone number is
				 * the pid or the tid (-F tid): has_pid only */
	uint32_t pid, tid;
	uint64_t time;		/* ns; the end of the printed interval */
	bool frame;		/* an unresolved frame was found */
	uint64_t addr;
	size_t addr_at, addr_len;
	size_t sym_at, sym_len;	/* the "[unknown]" */
	bool has_dso;
	size_t dso_at, dso_len;	/* the DSO name, inside the parentheses */
};
/* Returns 1 when the line holds a header or a frame, 0 otherwise.  Only
 * reads len bytes (no NUL needed); never fails. */
int pg_script_parse_line(const char *line, size_t len, struct pg_script_line *out);

/* ---- perf script output rewritten ----
 * A rewriter names the unresolved frames of `perf script` output, line by
 * line: "ADDR [unknown] (DSO)" where ADDR is in the dumps' code becomes
 * "ADDR NAME[+0xOFF] (DUMP)" (the rest of the line kept byte for byte),
 * followed by a source line "  FILE:LINE" as `perf script -F +srcline`
 * prints it.  The address is looked up at the time of the sample header
 * above it, in the sample's process when the symbolizer has a dump of it
 * (else in any).  Every other line is copied unchanged. */
enum pg_script_symoff {
	PG_SCRIPT_SYMOFF_AUTO = 0,	/* +0xOFF as the input's first resolved
					 * frame has it (none seen yet: added) */
	PG_SCRIPT_SYMOFF_ON,		/* always +0xOFF */
	PG_SCRIPT_SYMOFF_OFF,		/* never */
};

struct pg_script_opts {
	size_t sz;		/* sizeof(struct pg_script_opts): fields are only
				 * ever added at the end; a zeroed struct with sz
				 * set gives the defaults */
	bool use_pid;		/* look up in pid's dumps only, whatever the sample's */
	uint32_t pid;
	bool no_srcline;	/* no source lines below named frames */
	bool full_source_path;	/* source lines with the whole path, not its base name */
	enum pg_script_symoff symoff;
};

struct pg_script_stats {
	size_t sz;		/* set by the caller: sizeof(struct pg_script_stats) */
	uint64_t frames;	/* unresolved frames seen */
	uint64_t named;		/* of them, named from the dumps */
	uint64_t left;		/* of them, in no dump's code: copied unchanged */
};

typedef struct pg_script_rewriter pg_script_rewriter;

/* A rewriter over s, which it uses but does not own: s must outlive it and
 * have all its dumps added.  opts is copied; NULL gives the defaults.
 * opts->sz is the caller's sizeof(struct pg_script_opts): fields past it
 * read as zero, and bytes past this library's struct must be zero.
 * Returns 0, or -EINVAL (opts it cannot honour) or -ENOMEM with the
 * message in the symbolizer's pg_diag, *out NULL.  Threads: a rewriter is
 * used by one thread at a time; rewriters on one frozen symbolizer may
 * run in parallel. */
int pg_script_rewriter_new(pg_symbolizer *s, const struct pg_script_opts *opts,
			   pg_script_rewriter **out);
/* Rewrites one line of perf script output (len bytes, with its newline if
 * it has one; no NUL needed) to out.  A rewritten line always ends with a
 * newline.  Lines must come in input order: a frame takes its time and
 * pid from the last sample header.  Returns 1 when a frame was named, 0
 * when the line was copied unchanged, or a negative errno from the lookup
 * (message in the symbolizer's pg_diag).  Write errors are left in out's
 * error indicator (check ferror()/fflush() as for any stdio output). */
int pg_script_rewrite_line(pg_script_rewriter *r, const char *line, size_t len, FILE *out);
/* Counts so far; st->sz must be set (fields beyond it are not written). */
void pg_script_rewriter_stats(const pg_script_rewriter *r, struct pg_script_stats *st);
void pg_script_rewriter_free(pg_script_rewriter *r);

/* ---- perf maps ----
 * pg_perfmap_write() writes the code live at time (PG_SYM_TIME_END: at
 * the end of the dumps) in pid's address space (PG_SYM_ANY_PID: the first
 * pid added) as the text of /tmp/perf-PID.map: "START SIZE NAME" a line,
 * hex without 0x, in address order.  A map has no time, so where the JIT
 * reused an address only the code live then is written, and no two lines
 * overlap (perf's lookup is undefined for overlapping lines): a function
 * partly replaced by later code gives a line per piece still live.  A
 * newline in a name is written as a blank.  st (NULL: not wanted, else
 * st->sz set) gets the counts.  Returns 0 or a negative errno (message in
 * the symbolizer's pg_diag); write errors are left in out's error
 * indicator.  Only reads s: the same threads rule as pg_symbolizer_live. */
struct pg_perfmap_stats {
	size_t sz;		/* set by the caller: sizeof(struct pg_perfmap_stats) */
	uint64_t lines;
	uint64_t pieces_cut;	/* lines that are a piece of a function, not all of it */
	uint64_t short_names;	/* names shorter than 3 bytes: perf 6.1 skips
				 * such lines */
};
int pg_perfmap_write(pg_symbolizer *s, uint32_t pid, uint64_t time, FILE *out,
		     struct pg_perfmap_stats *st);

#ifdef __cplusplus
}
#endif
#endif
