/* SPDX-License-Identifier: MIT */
/* jitdump reader: a streaming iterator over a memory-mapped jit-PID.dump.
 *
 * Records come out one at a time, byte-swapped to host order.  DEBUG_INFO,
 * UNWINDING_INFO and INLINE_INFO are not returned on their own by default:
 * they are pending state that the next LOAD carries (as every producer
 * intends).  Pointers in a record (names, code bytes, unwind blobs) point
 * into the mapping and stay valid until pg_jitdump_close(); the decoded
 * line, range and frame arrays of a LOAD stay valid only until the next
 * pg_jitdump_next() call.
 *
 * Errors: 0 (or 1 for a record) on success, a negative errno on failure
 * with the message, naming the file and byte offset, in the pg_diag given
 * to the open function.  A damaged DEBUG_INFO or UNWINDING_INFO body, an
 * unknown record id, an INLINE_INFO or UNLOAD shorter than its fixed
 * part (perfgraft's extensions, which perf skips too) or a truncated tail
 * (a JIT killed mid-write) is a warning: the record is dropped or skipped
 * and the walk goes on.
 *
 * Threads: a handle (and its pg_diag) is used by one thread at a time;
 * separate handles are independent, also over the same file. */
#ifndef PERFGRAFT_JITDUMP_H
#define PERFGRAFT_JITDUMP_H

#include <perfgraft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PG_JITDUMP_MAGIC 0x4A695444u
#define PG_JITDUMP_FLAG_ARCH_TIMESTAMP (1ull << 0)

enum pg_jd_type {
	PG_JD_LOAD = 0,
	PG_JD_MOVE = 1,
	PG_JD_DEBUG_INFO = 2,
	PG_JD_CLOSE = 3,
	PG_JD_UNWINDING_INFO = 4,
	/* perfgraft's extension records (docs/jitdump-extensions.md): ids far
	 * above perf's, which perf skips as unknown */
	PG_JD_INLINE_INFO = 0x70670001,	/* inline chains of the next LOAD */
	PG_JD_UNLOAD = 0x70670002,	/* the code of a LOAD is gone */
};

struct pg_jd_header {
	uint32_t version;
	uint32_t total_size;
	uint32_t elf_mach;
	uint32_t pad1;
	uint32_t pid;
	uint64_t timestamp;
	uint64_t flags;
	bool big_endian;	/* byte order of the file */
	bool is_64bit;		/* ELF class guessed from elf_mach */
	bool v8;		/* written by V8 (pad1 == 0xdeadbeef) */
	uint32_t line_bias;	/* what the producer added to line addresses
				 * (V8: 0x40, 0x34 on 32-bit; LLVM's
				 * PerfJITEventListener: 0x40); 0 otherwise */
	const char *line_bias_why;	/* line_bias != 0: the evidence, said
					 * to a user (perfgraft dump) */
};

struct pg_jd_line {
	uint64_t addr;		/* as recorded (line_bias not removed) */
	uint32_t line;
	uint32_t discrim;	/* V8: the 1-based column */
	const char *file;	/* NUL-terminated; NULL when the producer
				 * wrote a damaged name (dropped) */
	const char *damaged;	/* file NULL: the damaged bytes, not */
	uint32_t damaged_len;	/* NUL-terminated (node keeps the length) */
};

struct pg_jd_debug {
	uint64_t offset;	/* file offset of the DEBUG_INFO record */
	uint64_t timestamp;
	uint64_t code_addr;
	uint64_t nr_entry;	/* as recorded */
	bool dropped;		/* entries did not parse: no lines kept */
	size_t nr_lines;
	const struct pg_jd_line *lines;
};

struct pg_jd_unwind {
	uint64_t offset;	/* file offset of the UNWINDING_INFO record */
	uint64_t timestamp;
	uint64_t unwinding_size;
	uint64_t eh_frame_hdr_size;
	uint64_t mapped_size;
	bool dropped;		/* sizes inconsistent: blob not usable */
	const uint8_t *eh_frame;	/* unwinding_size - hdr_size bytes */
	uint64_t eh_frame_size;
	const uint8_t *eh_frame_hdr;	/* eh_frame_hdr_size bytes, after it */
};

/* A function of an inline chain (INLINE_INFO): name and the line it is
 * at (the innermost's executing line, an outer one's call line). */
struct pg_jd_frame {
	const char *func;	/* NUL-terminated, in the mapping */
	const char *file;	/* NULL: not given */
	uint32_t line;
};

/* Code [code_addr + off, + len) runs frames[0] inlined into frames[1] ...
 * into frames[nframes - 1], the LOAD's own function. */
struct pg_jd_inline_range {
	uint32_t off, len;
	uint32_t nframes;	/* 2 .. PG_JD_MAX_FRAMES */
	const struct pg_jd_frame *frames;	/* innermost first */
};

#define PG_JD_MAX_FRAMES 1024

struct pg_jd_inline {
	uint64_t offset;	/* file offset of the INLINE_INFO record */
	uint64_t timestamp;
	uint64_t code_addr;	/* of the LOAD it describes */
	uint32_t nr_strings, nr_ranges;	/* as recorded */
	bool dropped;		/* did not parse: no ranges kept */
	size_t nranges;
	const struct pg_jd_inline_range *ranges;
};

struct pg_jd_load {
	uint32_t pid, tid;
	uint64_t vma, code_addr, code_size, code_index;
	const char *name;		/* NUL-terminated, raw bytes */
	const uint8_t *code;		/* code_size bytes */
	const struct pg_jd_debug *debug;	/* pending DEBUG_INFO or NULL */
	const struct pg_jd_unwind *unwind;	/* pending UNWINDING_INFO or NULL */
	const struct pg_jd_inline *inl;	/* pending INLINE_INFO or NULL */
};

/* The code a LOAD put at code_addr is gone (a JIT freed it). */
struct pg_jd_unload {
	uint32_t pid, tid;
	uint64_t code_addr, code_size, code_index;
};

struct pg_jd_move {
	uint32_t pid, tid;
	uint64_t vma, old_code_addr, new_code_addr, code_size, code_index;
};

struct pg_jd_record {
	enum pg_jd_type type;	/* or an unknown id with PG_JITDUMP_ALL_RECORDS */
	uint32_t id;
	uint32_t size;		/* total_size of the record */
	uint64_t offset;	/* file offset of the record */
	uint64_t timestamp;
	union {
		struct pg_jd_load load;
		struct pg_jd_move move;
		struct pg_jd_debug debug;
		struct pg_jd_unwind unwind;
		struct pg_jd_inline inl;
		struct pg_jd_unload unload;
		uint64_t reserved[16];	/* room for records to come */
	} u;
};

/* Open flags. */
#define PG_JITDUMP_ALL_RECORDS (1u << 0) /* also return DEBUG_INFO, UNWINDING_INFO,
					  * INLINE_INFO, CLOSE and unknown
					  * ids as records */

typedef struct pg_jitdump pg_jitdump;

/* Maps path (read-only, private) and checks the header; flags are
 * PG_JITDUMP_* open flags.  The file's size at open is what is read: a
 * JIT still appending to it is not followed, and the file must not be
 * truncated while the handle lives (the mapping would fault).  diag is
 * kept for the warnings and errors of the walk and must outlive the handle.
 * Returns 0 with *out set, or a negative errno (*out NULL) with diag->err
 * naming the file and byte offset: the errno of open/fstat/mmap (-ENOENT,
 * -EACCES, ...), -EINVAL for a path that is not a regular file, a bad
 * magic, a file too short for the header, a version other than 1 (2 is
 * read as 1 with a warning: Mono writes it) or an inconsistent header
 * size, -ENOMEM.  Unknown header flags are a warning. */
int pg_jitdump_open(const char *path, unsigned flags, struct pg_diag *diag,
		    pg_jitdump **out);
/* The same over a caller-owned buffer (fuzzing, embedded use).  The buffer
 * must outlive the handle and not change while it lives.  name is copied;
 * it is used in messages and returned by pg_jitdump_path(). */
int pg_jitdump_open_mem(const void *buf, size_t len, const char *name,
			unsigned flags, struct pg_diag *diag, pg_jitdump **out);
/* Unmaps the file and frees the handle; every pointer obtained from it
 * (records, header, path) becomes invalid.  NULL is a no-op. */
void pg_jitdump_close(pg_jitdump *jd);

/* The decoded file header, owned by the handle (valid until close). */
const struct pg_jd_header *pg_jitdump_header(const pg_jitdump *jd);
/* Whether the first 4 bytes are the jitdump magic, in either byte order. */
bool pg_jitdump_probe(const void *buf, size_t len);
/* The name of a record id ("LOAD", "MOVE", "DEBUG_INFO", "CLOSE",
 * "UNWINDING_INFO"), "UNKNOWN" for others: a static string. */
const char *pg_jitdump_record_name(uint32_t id);
/* The path (or name) given at open, a copy owned by the handle. */
const char *pg_jitdump_path(const pg_jitdump *jd);
/* Bytes of the file (or buffer) as mapped at open. */
uint64_t pg_jitdump_size(const pg_jitdump *jd);

/* Reads the next record into the caller's *rec (overwritten whole).
 * 1: *rec filled; 0: end of records (a truncated tail was a warning);
 * negative errno (-EINVAL): the file is damaged at the offset named in
 * diag->err (a record size smaller than its header, a LOAD, MOVE,
 * DEBUG_INFO or UNWINDING_INFO smaller than its fixed part, a LOAD whose
 * code or name does not fit).  After 0 or an error the walk is
 * over: later calls return 0.  A LOAD's debug, unwind and inl pointers
 * refer to state inside the handle that the next call replaces: use them,
 * or copy what is needed, before calling again.  With
 * PG_JITDUMP_ALL_RECORDS a DEBUG_INFO, UNWINDING_INFO or INLINE_INFO is
 * returned as a record and still carried by the next LOAD; without it
 * CLOSE and unknown ids are skipped.  UNLOAD is always returned.  An
 * unknown id is a warning either way; a damaged INLINE_INFO is dropped
 * with a warning, as a damaged DEBUG_INFO. */
int pg_jitdump_next(pg_jitdump *jd, struct pg_jd_record *rec);

/* Counters after (or during) a walk, copied into *st; records and
 * dropped debug/unwind records are counted as the walk passes them. */
struct pg_jitdump_stats {
	size_t sz;		/* set by the caller: sizeof(struct pg_jitdump_stats);
				 * fields beyond it are not written */
	uint64_t records, loads, moves, debug_infos, unwinding_infos, closes, unknown;
	uint64_t lines, damaged_names, dropped_debug, dropped_unwind;
	uint64_t truncated_bytes;	/* tail bytes ignored */
	uint64_t inline_infos, unloads, dropped_inline;
};
void pg_jitdump_stats(const pg_jitdump *jd, struct pg_jitdump_stats *st);

#ifdef __cplusplus
}
#endif
#endif
