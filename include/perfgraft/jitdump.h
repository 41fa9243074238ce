/* SPDX-License-Identifier: MIT */
/* jitdump reader: a streaming iterator over a memory-mapped jit-PID.dump.
 *
 * Records come out one at a time, byte-swapped to host order.  DEBUG_INFO
 * and UNWINDING_INFO are not returned on their own by default: they are
 * pending state that the next LOAD carries (as every producer intends).
 * Pointers in a record (names, code bytes, unwind blobs) point into the
 * mapping and stay valid until pg_jitdump_close(); the decoded line array
 * of a LOAD stays valid only until the next pg_jitdump_next() call. */
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
				 * (V8: 0x40, 0x34 on 32-bit); 0 otherwise */
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

struct pg_jd_load {
	uint32_t pid, tid;
	uint64_t vma, code_addr, code_size, code_index;
	const char *name;		/* NUL-terminated, raw bytes */
	const uint8_t *code;		/* code_size bytes */
	const struct pg_jd_debug *debug;	/* pending DEBUG_INFO or NULL */
	const struct pg_jd_unwind *unwind;	/* pending UNWINDING_INFO or NULL */
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
	} u;
};

/* Open flags. */
#define PG_JITDUMP_ALL_RECORDS (1u << 0) /* also return DEBUG_INFO, UNWINDING_INFO,
					  * CLOSE and unknown ids as records */

typedef struct pg_jitdump pg_jitdump;

/* Maps and checks the header.  On failure returns a negative errno and
 * diag->err names the file and byte offset. */
int pg_jitdump_open(const char *path, unsigned flags, struct pg_diag *diag,
		    pg_jitdump **out);
/* The same over a caller-owned buffer (fuzzing, embedded use).  The buffer
 * must outlive the handle.  name is used in messages. */
int pg_jitdump_open_mem(const void *buf, size_t len, const char *name,
			unsigned flags, struct pg_diag *diag, pg_jitdump **out);
void pg_jitdump_close(pg_jitdump *jd);

const struct pg_jd_header *pg_jitdump_header(const pg_jitdump *jd);
const char *pg_jitdump_path(const pg_jitdump *jd);
uint64_t pg_jitdump_size(const pg_jitdump *jd);

/* 1: *rec filled; 0: end of records (a truncated tail was a warning);
 * negative errno: the file is damaged at the offset named in diag->err. */
int pg_jitdump_next(pg_jitdump *jd, struct pg_jd_record *rec);

/* Counters after (or during) a walk. */
struct pg_jitdump_stats {
	uint64_t records, loads, moves, debug_infos, unwinding_infos, closes, unknown;
	uint64_t lines, damaged_names, dropped_debug, dropped_unwind;
	uint64_t truncated_bytes;	/* tail bytes ignored */
};
void pg_jitdump_stats(const pg_jitdump *jd, struct pg_jitdump_stats *st);

#ifdef __cplusplus
}
#endif
#endif
