/* SPDX-License-Identifier: MIT */
/* LLVM XRay traces: FDR mode (versions 1-5) and basic mode (versions
 * 1-3), either byte order, the instrumentation map of the traced binary,
 * and their conversion into perf.data.
 *
 * The trace reader has two walks:
 *  - file order (pg_xray_open(... PG_XRAY_FILE_ORDER ...)): every record as
 *    it sits in the file, metadata included, for `perfgraft dump`;
 *  - time order (the default): function and event records only, each
 *    thread's buffers (FDR) or chunks (basic) ordered by their first
 *    timestamp, the threads merged by time, and a PG_XR_THREAD_END record
 *    at each thread's last timestamp.  Memory is O(buffers + threads).
 * Damage stops the buffer it is in, with a warning naming the byte offset;
 * the rest of the file is still read.  A truncated tail keeps everything
 * before it.
 *
 * Errors: 0 (or 1 for a record) on success, a negative errno with the
 * message in the pg_diag given to the open function.  Threads: a trace,
 * map or conversion (and its pg_diag) is used by one thread at a time;
 * separate handles are independent.  After pg_xray_map_open*() returns, a
 * map is only read: its accessors may be called from several threads at
 * once.  The map functions call libelf's process-wide elf_version(). */
#ifndef PERFGRAFT_XRAY_H
#define PERFGRAFT_XRAY_H

#include <perfgraft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { PG_XRAY_BASIC = 0, PG_XRAY_FDR = 1 };

struct pg_xr_header {
	uint16_t version;
	uint16_t type;			/* PG_XRAY_BASIC or PG_XRAY_FDR */
	uint32_t flags;			/* bit0 constant_tsc, bit1 nonstop_tsc */
	uint64_t cycle_frequency;	/* ticks per second; 0: unknown */
	uint64_t buffer_size;		/* FDR: the runtime's per-thread buffer */
	bool big_endian;
};

enum pg_xr_kind {
	/* function and event records (both walks) */
	PG_XR_ENTER = 0,
	PG_XR_EXIT = 1,
	PG_XR_TAIL_EXIT = 2,
	PG_XR_ENTER_ARG = 3,
	PG_XR_CUSTOM = 4,
	PG_XR_TYPED = 5,
	/* time order only: the thread's records are over (tsc = its last) */
	PG_XR_THREAD_END = 6,
	/* file order only: FDR metadata */
	PG_XR_NEW_BUFFER = 16,
	PG_XR_END_OF_BUFFER,
	PG_XR_NEW_CPU,
	PG_XR_TSC_WRAP,
	PG_XR_WALLCLOCK,
	PG_XR_BUFFER_EXTENTS,
	PG_XR_PID,
	PG_XR_CALL_ARG,
	/* file order only: a buffer's (FDR v1) or a basic chunk's first record */
	PG_XR_SKIPPED,			/* bytes skipped (v1 buffer filler) */
};

#define PG_XR_MAX_ARGS 8

struct pg_xr_record {
	enum pg_xr_kind kind;
	uint64_t offset;		/* of the record in the file */
	uint32_t size;			/* bytes, payload included */
	uint32_t func_id;		/* function records */
	uint64_t tsc;			/* absolute (reconstructed) */
	uint32_t pid, tid;		/* v1/v2 FDR, basic v1/v2: pid = tid */
	uint16_t cpu;
	/* ENTER_ARG: the arguments (FDR CallArgument, basic ARG_PAYLOAD) */
	uint32_t nargs;
	uint64_t args[PG_XR_MAX_ARGS];
	/* CUSTOM/TYPED: payload bytes in the trace (valid until the next call) */
	const uint8_t *payload;
	uint32_t payload_size;
	uint16_t event_type;		/* TYPED */
	/* file order: decoded metadata */
	int64_t delta;			/* function records and v5 events */
	uint64_t value;			/* EXTENTS: bytes; WALLCLOCK: seconds;
					 * CALL_ARG: the argument; SKIPPED: bytes */
	uint32_t usec;			/* WALLCLOCK */
};

/* Counters of one walk.  sz is set by the caller to
 * sizeof(struct pg_xray_stats); fields are only ever added at the end, and
 * the library writes only the first sz bytes (an older, shorter struct
 * gets the counters it knows of). */
struct pg_xray_stats {
	size_t sz;			/* set by the caller */
	uint64_t buffers;		/* FDR buffers or basic chunks */
	uint64_t records;		/* function and event records */
	uint64_t enters, exits, tail_exits, args, custom, typed;
	uint64_t threads;
	uint64_t damaged_buffers;	/* stopped early at damage */
	uint64_t truncated_bytes;	/* cut tail */
	uint64_t orphan_args;		/* arguments with no entry before them */
};

#define PG_XRAY_FILE_ORDER 1u

typedef struct pg_xray pg_xray;

/* Maps path (read-only) and indexes it: the header is checked and every
 * FDR buffer or basic chunk located now (the pages read are handed back
 * at once, so resident memory stays small).  flags: PG_XRAY_FILE_ORDER
 * or 0 (time order).  diag is kept for the warnings of the walk and must
 * outlive the handle; the file must not be truncated while it lives.
 * Returns 0 with *out set, or a negative errno (*out NULL): the errno of
 * open/fstat/mmap, -EINVAL for a file that is not regular, shorter than
 * the 32-byte header, of an unknown type or an unsupported version,
 * -ENOMEM. */
int pg_xray_open(const char *path, unsigned flags, struct pg_diag *diag, pg_xray **out);
/* The same over a caller-owned buffer that must outlive the handle; name
 * is copied and used in messages. */
int pg_xray_open_mem(const void *buf, size_t len, const char *name, unsigned flags,
		     struct pg_diag *diag, pg_xray **out);
/* The decoded file header, owned by the handle (valid until close). */
const struct pg_xr_header *pg_xray_header(const pg_xray *t);
/* Fills the caller's *rec with the next record of the walk chosen at open.
 * 1: *rec filled; 0: end; negative errno: the walk cannot go on (the
 * header is unusable; the header is checked at open, so this does not
 * happen today, but callers should handle it).  Damage inside the data is
 * a warning.  rec->payload points into the trace: copy it before the next
 * call. */
int pg_xray_next(pg_xray *t, struct pg_xr_record *rec);
/* Counters of the walk so far, copied into *st (st->sz set by the
 * caller: fields beyond it are not written). */
void pg_xray_stats(const pg_xray *t, struct pg_xray_stats *st);
/* FDR buffers or basic chunks in the file (stats.buffers: those begun) */
size_t pg_xray_buffer_count(const pg_xray *t);
/* Unmaps and frees; records' payload pointers become invalid.  NULL is a
 * no-op. */
void pg_xray_close(pg_xray *t);
/* Does the buffer start like an XRay trace header?  Reads at most 4 bytes
 * (false when len < 4); no state. */
bool pg_xray_probe(const void *buf, size_t len);
/* A static name for k ("enter", "tail_exit", ...; "unknown" for other
 * values). */
const char *pg_xray_kind_name(enum pg_xr_kind k);

/* ---- instrumentation map (xray_instr_map of the traced binary) ---- */

struct pg_xray_func {
	uint32_t id;			/* 1-based, as LLVM numbers them */
	uint64_t addr;			/* link-time address */
	uint64_t size;			/* from .symtab, 0 unknown */
	const char *name;		/* demangled; "SYM+0xOFF" inside a symbol,
					 * "@(ADDR)" (llvm-xray's spelling) when no
					 * symbol covers it */
	const char *linkage_name;	/* symbol as in .symtab, or NULL */
	const char *file;		/* DWARF declaration, or NULL */
	unsigned line, column;
	uint8_t sled_kinds;		/* bit per sled kind seen (0-5) */
	bool always_instrument;
};

/* Where the binary's code is, for an MMAP2 of it. */
struct pg_xray_binary {
	char *path;			/* absolute */
	bool pie;			/* ET_DYN */
	uint64_t text_vaddr, text_offset, text_size;	/* executable PT_LOAD */
	uint8_t build_id[20];
	unsigned build_id_size;
	uint16_t e_machine;
};

typedef struct pg_xray_map pg_xray_map;

/* Reads the instrumentation map of binary, names its functions from
 * .symtab (.dynsym when stripped) and finds their source lines with libdw,
 * all now.  The binary stays open (and mapped by libelf) until close.
 * binary may be an ELF executable, shared object or relocatable object of
 * any XRay target in either byte order (REL and RELA relocations of the
 * map resolved), or a YAML map as `llvm-xray extract` writes it (IDs,
 * addresses and function-name as given there; no source lines; no
 * binary: pg_xray_map_binary() is NULL).
 * Odd sled entries are warnings; diag is not used after the call.
 * Returns 0 with *out set, or a negative errno (*out NULL): the errno of
 * open (-ENOENT, -EACCES), -EINVAL for a file that is neither ELF nor a
 * YAML map, a truncated ELF, a map whose size is not a multiple of the
 * sled entry, a damaged map or YAML (the message gives the offset or the
 * line), -ENOENT when it has no xray_instr_map section (not built with
 * -fxray-instrument), -E2BIG for more functions than IDs, -ENOMEM. */
int pg_xray_map_open(const char *binary, struct pg_diag *diag, pg_xray_map **out);
/* The same over a caller-owned ELF image that must outlive the map; name
 * is copied, used in messages and as the binary's path. */
int pg_xray_map_open_mem(const void *buf, size_t len, const char *name,
			 struct pg_diag *diag, pg_xray_map **out);
size_t pg_xray_map_count(const pg_xray_map *m);	/* highest ID */
/* Function id (1 .. count), owned by the map (valid until close); a YAML
 * map's IDs may have gaps, which are NULL. */
const struct pg_xray_func *pg_xray_map_func(const pg_xray_map *m, uint32_t id); /* NULL if unknown */
/* Where the binary's code is; owned by the map, path absolute (the name
 * given, for _mem); NULL for a YAML map. */
const struct pg_xray_binary *pg_xray_map_binary(const pg_xray_map *m);
/* Frees the map and closes the binary.  NULL is a no-op. */
void pg_xray_map_close(pg_xray_map *m);

/* ---- conversion into perf.data ---- */

/* Options of pg_xray_convert(); read during the call only. */
struct pg_xray_opts {
	size_t sz;			/* sizeof(struct pg_xray_opts): fields are
					 * only ever added at the end; unset
					 * fields (zero) are the defaults */
	const char *const *traces;
	size_t ntraces;
	const char *binary;		/* NULL: functions named by ID */
	const char *output;		/* "-": pipe mode on stdout */
	bool pipe;			/* pipe mode into a file */
	uint64_t frequency;		/* samples per second of trace time; 0: default */
	bool no_events;			/* samples only, no xray:* events */
	bool no_samples;		/* events only */
	/* a stretch longer than this in which no thread records anything
	 * and no call is open is reported (a warning, stats gaps); time
	 * inside an open call is always sampled; 0: PG_XRAY_DEFAULT_MAX_GAP_NS */
	uint64_t max_gap_ns;
	/* samples of an unchanged stack (a run) taken on the full grid; after
	 * them the spacing doubles every thin_after samples, each sample's
	 * period being the grid time since the one before, so period sums are
	 * the full grid's and a run of L grid points costs about
	 * thin_after * log2(L / thin_after) samples.  0:
	 * PG_XRAY_DEFAULT_THIN_AFTER; UINT64_MAX: never thinned */
	uint64_t thin_after;
	/* file output: zstd level of the data (perf record -z's format); 0: off */
	int compress_level;
	/* called now and then with the fraction of the traces read */
	void (*progress)(void *ctx, double done);
	void *progress_ctx;
};

#define PG_XRAY_DEFAULT_MAX_GAP_NS 60000000000ull

#define PG_XRAY_DEFAULT_FREQUENCY 100000

#define PG_XRAY_DEFAULT_THIN_AFTER 1000

/* The xray:* events of the output: tracepoint IDs (their formats travel in
 * the file's tracing data) and the flags of function_exit/tail_exit. */
enum {
	PG_XRAY_EV_ENTRY = 40001,	/* xray:function_entry */
	PG_XRAY_EV_EXIT,		/* xray:function_exit */
	PG_XRAY_EV_TAIL_EXIT,		/* xray:tail_exit */
	PG_XRAY_EV_CALL_ARGS,		/* xray:call_args */
	PG_XRAY_EV_CUSTOM,		/* xray:custom_event */
	PG_XRAY_EV_TYPED,		/* xray:typed_event */
	PG_XRAY_EV_FUNCTION,		/* xray:function: ID -> address, name, source */
};
#define PG_XRAY_EXIT_INFERRED 1u	/* its exit was lost; closed by a caller's exit */
#define PG_XRAY_EXIT_UNFINISHED 2u	/* never exited; closed at the thread's last time */
#define PG_XRAY_EXIT_NO_ENTRY 4u	/* an exit whose entry is not in the trace */

/* What pg_xray_convert() did.  sz is set by the caller to
 * sizeof(struct pg_xray_convert_stats); fields are only ever added at the
 * end, and the library writes only the first sz bytes.  The trace counters
 * are not embedded (an embedded struct could never grow without moving
 * every field after it): trace points to the caller's own
 * struct pg_xray_stats, with its own sz set, or is NULL when they are not
 * wanted.  The library only reads trace (and leaves it as it was). */
struct pg_xray_convert_stats {
	size_t sz;			/* set by the caller */
	struct pg_xray_stats *trace;	/* set by the caller (NULL: not wanted);
					 * gets the counters summed over the traces */
	uint64_t samples, events;	/* events: every xray:* event written */
	uint64_t grid_samples;		/* grid points the samples stand for (their
					 * period sum / the grid's period) */
	uint64_t thinned_runs;		/* runs past thin_after samples */
	uint64_t functions;		/* xray:function events among them */
	uint64_t threads, processes;
	uint64_t exits_without_entry;	/* trace began mid-call */
	uint64_t unfinished;		/* entries never exited */
	uint64_t inferred_exits;	/* frames closed by an outer exit */
	uint64_t unknown_ids;		/* records whose ID is not in the map */
	uint64_t max_depth;
	uint64_t gaps;			/* idle stretches: past max_gap_ns, no call open */
	uint64_t out_bytes;
	uint64_t first_ns, last_ns;
};

/* Converts the traces, merged by time, into a perf.data at opts->output:
 * samples with call chains every 1/frequency s of trace time (long runs of
 * one stack thinned, see thin_after) and the
 * xray:* events, functions named through the binary's map (by ID without
 * one).
 * The output is written atomically (see pg_pdw_open()) and removed on
 * failure.  progress is called from the calling thread.  opts is required
 * (it names the traces and the output); opts->sz is the caller's
 * sizeof(struct pg_xray_opts): fields past it read as zero (their
 * defaults), and bytes past this library's struct must be zero.  st may
 * be NULL (no counts wanted); else st->sz (and st->trace->sz when trace
 * is set) must be set, and st gets the counts as far as the work went
 * when the call returns, failed or not.  Returns 0, or a negative errno
 * with the message in diag->err: -EINVAL for opts NULL, sz below
 * sizeof(size_t) or non-zero fields this library does not know, no
 * trace, a frequency above 1 GHz or both samples and events off; any
 * trace's or the map's open error
 * (pg_xray_open(), pg_xray_map_open()); the output's errors; -ENOMEM. */
int pg_xray_convert(const struct pg_xray_opts *opts, struct pg_diag *diag,
		    struct pg_xray_convert_stats *st);

#ifdef __cplusplus
}
#endif
#endif
