/* SPDX-License-Identifier: MIT */
/* The code model: JIT code as a timeline of placements, the same for
 * every producer.
 *
 * A source (today a jitdump; the reader is chosen by the file's first
 * bytes) yields events in the order the producer wrote them, which is
 * time order for every known producer: a LOAD puts code at an address, a
 * MOVE puts the code of an earlier LOAD (named by its id) at another
 * address, an UNLOAD says the code at an address is gone.  A LOAD carries
 * its code bytes, its line rows, its inline chains and its unwind tables.
 *
 * Everything a producer does its own way is undone here, once, by the
 * reader: line addresses are offsets into the code (V8's and LLVM's bias
 * removed), columns are columns (V8 writes them as discriminators), damaged
 * file names are recovered (node), rows past the code are dropped (and
 * counted), the row nearest before the code applies from its start
 * (BeamAsm), rows are sorted by offset; names hold no control byte ('?'
 * instead) and file names no ':' (perf splits FILE:LINE at the first: a
 * local file:// URL is its path, any other ':' %3A).  The image builder,
 * the symbolizer, inject and the perf-map writer take only this model.
 *
 * Ownership: strings, code bytes and unwind tables in an event stay valid
 * until pg_code_close(); the lines, inlines and frames arrays of an event
 * only until the next pg_code_next().
 *
 * Errors: 0 (1 for an event) on success, a negative errno with the
 * message (naming the file and byte offset) in the pg_diag given to the
 * open function.  Threads: one thread at a time per source. */
#ifndef PERFGRAFT_CODE_H
#define PERFGRAFT_CODE_H

#include <perfgraft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

enum pg_code_kind {
	PG_CODE_LOAD = 0,	/* code placed at addr from time on */
	PG_CODE_MOVE = 1,	/* the code of the latest earlier LOAD of id, also at addr */
	PG_CODE_UNLOAD = 2,	/* the code of id at addr is gone from time on */
};

/* The process the code ran in and the machine it was made for. */
struct pg_code_process {
	uint32_t pid;
	uint32_t elf_mach;	/* EM_* of the code */
	bool big_endian;
	bool is_64bit;
	bool arch_time;		/* times are the CPU's timestamp counter,
				 * not CLOCK_MONOTONIC nanoseconds */
	uint64_t timestamp;	/* when the source was started: with pid and
				 * elf_mach, its identity (image build-ids) */
};

/* A line row: code from off up to the next row's off comes from
 * file:line (the innermost function's line where code was inlined). */
struct pg_code_line {
	uint64_t off;		/* from the code's start, below its size */
	const char *file;	/* NULL: unknown (damaged beyond repair) */
	uint32_t line;		/* 0: no source line (DWARF's meaning) */
	uint32_t column;	/* 1-based; 0: not known */
	uint32_t discrim;	/* DWARF discriminator; 0: none */
};

/* A function of an inline chain and the line it is at: for the innermost
 * frame the line executing, for each outer frame the line of its call to
 * the frame before it. */
struct pg_code_frame {
	const char *func;
	const char *file;	/* NULL: unknown */
	uint32_t line;		/* 0: unknown */
};

/* Code offsets [off, off + len) run frames[0], inlined into frames[1],
 * ... inlined into frames[nframes - 1], the placed function itself. */
struct pg_code_inline {
	uint64_t off, len;
	uint32_t nframes;	/* at least 2 */
	const struct pg_code_frame *frames;	/* innermost first */
};

/* The unwind tables the process mapped right after the code, at
 * align8(code size): .eh_frame, then .eh_frame_hdr, whose pc-relative
 * references are valid only in that layout. */
struct pg_code_cfi {
	const uint8_t *eh_frame;
	uint64_t eh_frame_size;
	const uint8_t *eh_frame_hdr;
	uint64_t eh_frame_hdr_size;	/* never 0 */
	uint64_t mapped_size;		/* bytes mapped for both; never 0 */
};

struct pg_code_event {
	enum pg_code_kind kind;
	uint64_t time;		/* the producer's clock, see pg_code_process */
	uint64_t src_offset;	/* byte offset of its record, for messages */
	uint32_t pid, tid;
	uint64_t id;		/* the producer's code index */
	uint64_t addr;		/* LOAD: the code's address; MOVE: its new
				 * address; UNLOAD: the address it leaves */
	uint64_t old_addr;	/* MOVE: the address it had */
	uint64_t size;		/* bytes of code (0: a LOAD with none) */
	/* LOAD only (NULL and 0 otherwise): */
	const char *name;	/* the function's name, NUL-terminated */
	const uint8_t *code;	/* size bytes */
	const struct pg_code_line *lines;	/* by off; equal offs in the
						 * producer's order */
	size_t nlines;
	uint64_t dropped_lines;	/* rows outside the code */
	const struct pg_code_inline *inlines;	/* by off, not overlapping */
	size_t ninlines;
	const struct pg_code_cfi *cfi;	/* usable unwind tables, or NULL */
};

typedef struct pg_code_source pg_code_source;

/* Opens path (mapped, not copied: it must not be truncated while the
 * source lives) with the reader its first bytes select.  diag must
 * outlive the source.  Returns 0 with *out set, or a negative errno (*out
 * NULL): the open's errno, -EINVAL for a file no reader knows or whose
 * header is damaged, -ENOMEM. */
int pg_code_open(const char *path, struct pg_diag *diag, pg_code_source **out);
/* The same over a caller-owned buffer that outlives the source; name is
 * copied and used in messages. */
int pg_code_open_mem(const void *buf, size_t len, const char *name,
		     struct pg_diag *diag, pg_code_source **out);
void pg_code_close(pg_code_source *src);

const struct pg_code_process *pg_code_process(const pg_code_source *src);
/* For the LOAD pg_code_next() returned last: the earliest time its code
 * may be taken to run, <= its time.  Producers announce code after it is
 * installed (HotSpot posts CompiledMethodLoad when the method may already
 * run), so where the range held no other code before the LOAD, it is the
 * latest time a part of the range was vacated (an UNLOAD), or the
 * source's first LOAD where nothing was ever there; the LOAD's own time
 * where the range covers code an earlier LOAD or MOVE put there and no
 * UNLOAD took away (a MOVE leaves its old range held: V8 may run the old
 * copy a while).  After any other event: that event's time. */
uint64_t pg_code_since(const pg_code_source *src);

/* The path or name given at open. */
const char *pg_code_path(const pg_code_source *src);
/* Bytes of input (progress: against pg_code_event.src_offset). */
uint64_t pg_code_size(const pg_code_source *src);
/* Whether buf starts like a source some reader knows. */
bool pg_code_probe(const void *buf, size_t len);

/* The next event into *ev (overwritten whole): 1, 0 at the end (a
 * truncated tail was a warning), or a negative errno for a damaged record
 * (the walk is then over). */
int pg_code_next(pg_code_source *src, struct pg_code_event *ev);

struct pg_code_stats {
	size_t sz;		/* set by the caller: sizeof(struct pg_code_stats) */
	uint64_t loads, moves, unloads;
	uint64_t line_tables;	/* line tables read (damaged ones not counted) */
	uint64_t lines;		/* rows in them */
	uint64_t dropped_lines;	/* rows of LOADs dropped: outside their code */
	uint64_t recovered_names;	/* LOADs whose damaged file names were recovered */
	uint64_t truncated_bytes;	/* tail bytes ignored */
	uint64_t inlines;		/* inline ranges kept */
	uint64_t dropped_inlines;	/* inline ranges dropped: empty, outside
					 * their code, out of order */
};
/* Counts so far; st->sz must be set (fields beyond it are not written). */
void pg_code_stats(const pg_code_source *src, struct pg_code_stats *st);

#ifdef __cplusplus
}
#endif
#endif
