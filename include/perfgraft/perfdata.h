/* SPDX-License-Identifier: MIT */
/* perf.data reader and writer, shared by every converter.
 *
 * The reader takes file mode (mapped) and pipe mode (streamed, stdin too),
 * either byte order, any attr size, and PERF_RECORD_COMPRESSED data
 * (decompressed with libzstd).  Records come out as raw bytes in the
 * file's byte order, with the fields a converter needs decoded: time,
 * pid/tid and owning attr (from the sample or its sample_id trailer).
 *
 * The writer writes the same byte order it is told to, so records from a
 * reader pass through untouched; it synthesizes only what it is asked to
 * (attrs, MMAP2 records, build-id entries, features).
 *
 * Errors: 0 (or 1 for a record) on success, a negative errno with the
 * message in the pg_diag given to the open function, which the handle
 * keeps and which must outlive it.  Damage inside the data that leaves
 * what precedes it usable (a truncated last record, a data section
 * running past the end, an unreadable feature section) is a warning.
 *
 * Threads: a reader or writer (and its pg_diag) is used by one thread at
 * a time; separate handles are independent.  A writer with compression
 * runs worker threads of its own (joined by pg_pdw_close/abort; they never
 * call the warn callback, and lower their own scheduling priority). */
#ifndef PERFGRAFT_PERFDATA_H
#define PERFGRAFT_PERFDATA_H

#include <perfgraft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* record types used by the library (values of linux/perf_event.h and perf) */
enum {
	PG_PERF_RECORD_MMAP = 1,
	PG_PERF_RECORD_COMM = 3,
	PG_PERF_RECORD_EXIT = 4,
	PG_PERF_RECORD_FORK = 7,
	PG_PERF_RECORD_READ = 8,
	PG_PERF_RECORD_SAMPLE = 9,
	PG_PERF_RECORD_MMAP2 = 10,
	PG_PERF_RECORD_ITRACE_START = 12,
	PG_PERF_RECORD_NAMESPACES = 16,
	PG_PERF_RECORD_USER_TYPE_START = 64,
	PG_PERF_RECORD_HEADER_ATTR = 64,
	PG_PERF_RECORD_HEADER_TRACING_DATA = 66,
	PG_PERF_RECORD_HEADER_BUILD_ID = 67,
	PG_PERF_RECORD_FINISHED_ROUND = 68,
	PG_PERF_RECORD_AUXTRACE = 71,
	PG_PERF_RECORD_TIME_CONV = 79,
	PG_PERF_RECORD_HEADER_FEATURE = 80,
	PG_PERF_RECORD_COMPRESSED = 81,
	PG_PERF_RECORD_COMPRESSED2 = 83,
};

/* header feature bits */
enum {
	PG_FEAT_TRACING_DATA = 1,
	PG_FEAT_BUILD_ID = 2,
	PG_FEAT_HOSTNAME = 3,
	PG_FEAT_OSRELEASE = 4,
	PG_FEAT_VERSION = 5,
	PG_FEAT_ARCH = 6,
	PG_FEAT_CPUDESC = 8,
	PG_FEAT_CPUID = 9,
	PG_FEAT_EVENT_DESC = 12,
	PG_FEAT_COMPRESSED = 27,
	PG_FEAT_MAX = 256,
};

/* perf_event_attr.type and the software counter perfgraft samples with */
#define PG_PERF_TYPE_SOFTWARE 1u
#define PG_PERF_TYPE_TRACEPOINT 2u
#define PG_PERF_COUNT_SW_CPU_CLOCK 0u

/* call-chain marker: the addresses after it are user space */
#define PG_PERF_CONTEXT_USER ((uint64_t)-512)

#define PG_SAMPLE_IP (1u << 0)
#define PG_SAMPLE_TID (1u << 1)
#define PG_SAMPLE_TIME (1u << 2)
#define PG_SAMPLE_ADDR (1u << 3)
#define PG_SAMPLE_CALLCHAIN (1u << 5)
#define PG_SAMPLE_ID (1u << 6)
#define PG_SAMPLE_CPU (1u << 7)
#define PG_SAMPLE_PERIOD (1u << 8)
#define PG_SAMPLE_STREAM_ID (1u << 9)
#define PG_SAMPLE_RAW (1u << 10)
#define PG_SAMPLE_IDENTIFIER (1u << 16)

/* perf_event_attr flag bits (the u64 after read_format) */
#define PG_ATTR_EXCLUDE_KERNEL (1ull << 5)
#define PG_ATTR_EXCLUDE_HV (1ull << 6)
#define PG_ATTR_MMAP (1ull << 8)
#define PG_ATTR_COMM (1ull << 9)
#define PG_ATTR_SAMPLE_ID_ALL (1ull << 18)
#define PG_ATTR_MMAP2 (1ull << 23)
#define PG_ATTR_USE_CLOCKID (1ull << 25)

/* perf_event_header.misc: where a sample or map comes from */
#define PG_PERF_RECORD_MISC_KERNEL 1u
#define PG_PERF_RECORD_MISC_USER 2u

/* An attr of the input, owned by the reader. */
struct pg_pd_attr {
	uint8_t *raw;		/* attr.size bytes, file byte order */
	uint32_t raw_size;
	uint32_t type;
	uint64_t config, sample_type;
	uint64_t flags;		/* the bit-field word at offset 40 */
	bool sample_id_all, use_clockid;
	int32_t clockid;
	uint64_t *ids;		/* host order */
	size_t nr_ids;
};

struct pg_pd_feature {
	unsigned bit;
	const uint8_t *data;	/* body, file byte order */
	uint64_t size;
};

struct pg_pd_rec {
	uint32_t type;
	uint16_t misc, size;
	const uint8_t *data;	/* the whole record, header included */
	const uint8_t *extra;	/* bytes after it (types 66 and 71) */
	uint64_t extra_size;
	uint64_t offset;	/* in the input, for messages */
	bool compressed;	/* came out of a COMPRESSED record */
	int attr;		/* owning attr, -1 unknown (user records) */
	bool has_time, has_tid;
	uint64_t time;
	/* a SAMPLE's TID word, else the sample_id trailer's: for a record
	 * with pid/tid fields of its own they may differ from those (perf's
	 * synthesized kernel MMAP says pid -1 and has 0 in its trailer);
	 * pg_perfdata_own_tid() gives the record's own */
	uint32_t pid, tid;
};

/* An MMAP or MMAP2 record, decoded. */
struct pg_pd_mmap {
	uint32_t pid, tid;
	uint64_t start, len, pgoff;
	uint32_t prot;		/* MMAP2 only; MMAP: from the DATA misc bit */
	bool exec;
	const char *filename;	/* inside the record, NUL-terminated */
};

/* TIME_CONV, for converting arch timestamps (TSC) to perf time. */
struct pg_pd_time_conv {
	uint64_t time_shift, time_mult, time_zero;
	uint64_t time_cycles, time_mask;
	bool cap_user_time_zero, cap_user_time_short;
};

typedef struct pg_perfdata pg_perfdata;

/* Opens a perf.data, file or pipe mode (told by its header).  A regular
 * file is mapped (it must not be truncated while the handle lives); any
 * other file is streamed, which works for pipe mode only.  path "-" reads
 * standard input (pipe mode, or file mode from a pipe is refused: perf
 * writes pipe mode to pipes; a regular file as standard input is mapped
 * and may be either), which is not closed.  The file header (attrs,
 * feature sections) is read now; pipe mode reads only the 16-byte header.
 * Returns 0 with *out set, or a negative errno (*out untouched): the
 * errno of open/fstat/mmap, -EINVAL for a bad magic, a version 1
 * ("PERFFILE") header whose attr_size names no perf_event_attr ABI in
 * either byte order, a header or attr section outside the file, no
 * attrs, file mode from a stream; -ENOMEM.
 *
 * Version 1 files (magic "PERFFILE", perf before 2012) are read like
 * version 2 ones: the header and attr layout are the same, only the byte
 * order is not in the magic but told by attr_size (64, 72, 80, 96 or 104
 * bytes of perf_event_attr + 16, read in one byte order or the other),
 * as perf does; pipe mode by the header size 16.  pg_perfdata_version()
 * says which it was. */
int pg_perfdata_open(const char *path, struct pg_diag *diag, pg_perfdata **out);
/* Whether the first bytes of a file say perf.data ("PERF" or "2ELI": the
 * magic in either byte order; pg_perfdata_open() checks the rest).  Needs
 * 4 bytes; fewer is false. */
bool pg_perfdata_probe(const void *buf, size_t len);
/* perf's name of a record type ("MMAP2", "FINISHED_ROUND", ...) and of a
 * header feature bit ("BUILD_ID", ...): static strings, "UNKNOWN" for
 * types and bits this perfgraft does not know. */
const char *pg_perfdata_record_name(uint32_t type);
const char *pg_perfdata_feature_name(unsigned bit);
/* The same over a caller-owned buffer (either mode) that must outlive the
 * handle; name is copied and used in messages. */
int pg_perfdata_open_mem(const void *buf, size_t len, const char *name,
			 struct pg_diag *diag, pg_perfdata **out);
/* Unmaps and frees; every pointer obtained from the handle becomes
 * invalid.  NULL is a no-op. */
void pg_perfdata_close(pg_perfdata *pd);

bool pg_perfdata_pipe(const pg_perfdata *pd);
/* 1 for a "PERFFILE" input, 2 for "PERFILE2" */
int pg_perfdata_version(const pg_perfdata *pd);
/* The file's byte order (records and attr raw bytes are in it). */
bool pg_perfdata_big_endian(const pg_perfdata *pd);
/* The path given ("<stdin>" for "-"), owned by the handle. */
const char *pg_perfdata_name(const pg_perfdata *pd);
/* attrs known so far (pipe mode: grows as HEADER_ATTR records pass) */
size_t pg_perfdata_nattrs(const pg_perfdata *pd);
/* Attr i, or NULL when i >= nattrs.  Owned by the handle; valid until the
 * next pg_perfdata_next() or pg_perfdata_rewind() (a HEADER_ATTR record
 * may move the array, a rewind drops the in-band attrs), and for the
 * attrs of a file-mode header until close. */
const struct pg_pd_attr *pg_perfdata_attr(const pg_perfdata *pd, size_t i);
/* file mode: the header's feature sections, ascending by bit (pipe mode:
 * none, they come as HEADER_FEATURE records).  Bodies point into the
 * mapping, valid until close; NULL when i is out of range. */
size_t pg_perfdata_nfeatures(const pg_perfdata *pd);
const struct pg_pd_feature *pg_perfdata_feature(const pg_perfdata *pd, size_t i);
/* the last TIME_CONV seen, or NULL; owned by the handle and updated in
 * place when the walk passes another one */
const struct pg_pd_time_conv *pg_perfdata_time_conv(const pg_perfdata *pd);
/* file mode: bytes of the data section; pipe mode: the bytes after the
 * 16-byte header (UINT64_MAX - 16 when streamed: unknown) */
uint64_t pg_perfdata_data_size(const pg_perfdata *pd);

/* 1: *rec filled (valid until the next call); 0: end; negative errno:
 * damaged at the offset named in diag->err.  COMPRESSED records are
 * replaced by the records they hold, decompressed a window at a time
 * (memory does not grow with their contents); one that decompresses to
 * more than the COMPRESSED feature's mmap_len (8 MiB when the input gives
 * none) is damage, as are more than 16 MiB of HEADER_ATTR records.  A
 * truncated last record, or compressed bytes left over at the end, is a
 * warning and the end.  The
 * record's bytes and extra point into the mapping or into buffers of the
 * handle: copy what must outlive the next call.  After 0 or an error the
 * walk is over (later calls return 0) until pg_perfdata_rewind(). */
int pg_perfdata_next(pg_perfdata *pd, struct pg_pd_rec *rec);
/* Restart the walk at the first record (file mode, or any mapped input).
 * Returns 0, or -ESPIPE for a streamed input. */
int pg_perfdata_rewind(pg_perfdata *pd);

/* Decodes an MMAP or MMAP2 record from pd into *mm (filename points into
 * the record: valid as long as it is).  Returns 0, or -EINVAL for another
 * type or a file name not NUL-terminated inside the record; no message
 * is set. */
int pg_perfdata_mmap(const pg_perfdata *pd, const struct pg_pd_rec *rec,
		     struct pg_pd_mmap *mm);
/* The pid/tid a record holds in fields of its own, which is what perf
 * prints for it: MMAP, MMAP2, COMM, READ, ITRACE_START and NAMESPACES
 * (pid, tid at offset 8), FORK and EXIT (pid at 8, tid at 16; the parent's
 * are not returned), and a SAMPLE's TID word (rec->pid/tid).  Returns
 * true with *pid and *tid set (as perf's signed values: a kernel map's
 * pid is -1), false for other types or a record too short to hold them
 * (both then untouched). */
bool pg_perfdata_own_tid(const pg_perfdata *pd, const struct pg_pd_rec *rec,
			 int32_t *pid, int32_t *tid);
/* Read a field of the file's byte order at p (unaligned is fine) in host
 * order. */
uint16_t pg_pd_u16(const pg_perfdata *pd, const void *p);
uint32_t pg_pd_u32(const pg_perfdata *pd, const void *p);
uint64_t pg_pd_u64(const pg_perfdata *pd, const void *p);

/* ---- writer ---- */

struct pg_pdw_opts {
	size_t sz;		/* sizeof(struct pg_pdw_opts): fields are only ever
				 * added at the end; a zeroed struct with sz set
				 * gives the defaults (file mode, little-endian,
				 * no compression) */
	bool pipe;		/* pipe-mode output (always for "-") */
	bool big_endian;	/* byte order of everything written */
	/* file mode: zstd level for the data section, written as
	 * PERF_RECORD_COMPRESSED records with the COMPRESSED feature, as
	 * perf record -z does (perf 6.1 cannot read them from a pipe); 0: off */
	int compress_level;
};

typedef struct pg_pdw pg_pdw;

/* path "-" writes standard output (always pipe mode; it is not closed).
 * A file is written beside its final name and renamed by pg_pdw_close(),
 * with mode 0600 less the umask as perf record and inject write
 * perf.data (a profile holds addresses and command lines); there, as
 * perf does, a non-empty file the rename replaces is kept as PATH.old
 * (the commit alone renames it: a failed run leaves both names alone);
 * an existing device or FIFO is written in place, which file mode refuses
 * when it cannot seek (-ESPIPE: the header is written last).  opts is
 * copied; NULL gives the defaults.  opts->sz is the caller's
 * sizeof(struct pg_pdw_opts): fields past it read as zero, and bytes past
 * this library's struct must be zero (else -EINVAL, as for sz below
 * sizeof(size_t)).  compress_level is ignored in pipe mode.  diag is kept
 * and must outlive the writer.  Returns 0 with *out set, or a negative
 * errno (*out NULL): -EINVAL (opts), the errno of opening the directory
 * or creating the file (-ENOENT, -EACCES, -EISDIR, ...), -ESPIPE,
 * -ENOMEM. */
int pg_pdw_open(const char *path, const struct pg_pdw_opts *opts,
		struct pg_diag *diag, pg_pdw **out);
/* Attrs must all be added before the first record (pipe mode writes them
 * as HEADER_ATTR at once). raw is attr.size bytes in the output order;
 * raw and ids are copied.  -EINVAL after the first pg_pdw_write() or
 * pg_pdw_mmap2(), or for a pipe-mode attr that does not fit a record;
 * file mode: attrs of different sizes fail at pg_pdw_close(). */
int pg_pdw_add_attr(pg_pdw *w, const uint8_t *raw, uint32_t raw_size,
		    const uint64_t *ids, size_t nr_ids);
/* A header feature (file mode: a section; pipe mode: HEADER_FEATURE,
 * TRACING_DATA or BUILD_ID records as perf expects them).  body is copied
 * (file mode) or written now (pipe mode).  Pipe mode leaves out, without
 * an error, features perf does not accept in a pipe.  -EINVAL for
 * bit >= PG_FEAT_MAX; file mode: a bit given twice fails at close. */
int pg_pdw_add_feature(pg_pdw *w, unsigned bit, const void *body, uint64_t size);
/* A record (header included) and the bytes that follow it for types
 * 66/71, copied into the output.  Write errors are sticky: after one,
 * every later call returns it. */
int pg_pdw_write(pg_pdw *w, const void *rec, size_t size, const void *extra,
		 uint64_t extra_size);
/* A build-id entry: file mode adds it to the BUILD_ID feature, pipe mode
 * writes a HEADER_BUILD_ID record now.  id_size is at most 20; -EINVAL
 * when larger or when filename does not fit a record. */
int pg_pdw_build_id(pg_pdw *w, int32_t pid, uint16_t misc, const uint8_t *id,
		    unsigned id_size, const char *filename);
/* File mode: build-id entries made when the file is finished (after
 * those pg_pdw_build_id() added), rather than each kept until then (an
 * output with an image of each function has many): fn(ctx, i, e) fills
 * *e with entry i and returns 1, returns 0 past the last one, or a
 * negative errno.  It is called for i = 0, 1, ... twice (the sizes, then
 * the bytes) and must give the same entries both times; e's pointers
 * need to stay valid only until its next call.  Returns false in pipe
 * mode, where an entry is a record written when it is known
 * (pg_pdw_build_id). */
struct pg_pdw_build_id_ent {
	int32_t pid;
	uint16_t misc;
	const uint8_t *id;
	unsigned id_size;
	const char *filename;
};
typedef int (*pg_pdw_build_id_fn)(void *ctx, size_t i, struct pg_pdw_build_id_ent *e);
bool pg_pdw_build_ids_later(pg_pdw *w, pg_pdw_build_id_fn fn, void *ctx);
/* Encode an MMAP2 (inode form) with a sample_id trailer for attr a (from
 * pg_perfdata_attr(); NULL: no trailer) and write it as a record. */
struct pg_pdw_mmap2 {
	uint32_t pid, tid;
	uint64_t start, len, pgoff;
	uint32_t maj, min;
	uint64_t ino, ino_generation;
	uint32_t prot, flags;
	const char *filename;
	uint64_t time, id;
	uint32_t cpu;
};
int pg_pdw_mmap2(pg_pdw *w, const struct pg_pd_attr *a, const struct pg_pdw_mmap2 *m);
/* Writes out the bytes buffered so far (with compression, those staged
 * for it stay staged), so that a caller knows the output took them before
 * it does something it cannot undo.  Returns 0 or the write error. */
int pg_pdw_flush(pg_pdw *w);
/* Finishes (file mode: feature sections, attrs, then the header), flushes
 * and renames into place; frees w in every case (w must not be NULL).
 * Returns 0, or a negative errno (a file output is then removed). */
/* Writes everything out (header, features, the last records) and closes
 * the file, without giving it its name yet: a caller with files of its
 * own to put in place first (images) does that between this and
 * pg_pdw_close().  Returns 0 or the write error; no more records after
 * it. */
int pg_pdw_finish(pg_pdw *w);
int pg_pdw_close(pg_pdw *w);	/* finishes (if needed) and renames; frees w */
/* Removes the partial output (standard output keeps what was written);
 * frees w.  NULL is a no-op. */
void pg_pdw_abort(pg_pdw *w);	/* removes the partial output; frees w */
/* Bytes written so far, header included (with compression: as
 * compressed).  The file's final size only after pg_pdw_finish(): until
 * then the compression workers and the trailing sections are pending. */
uint64_t pg_pdw_bytes(const pg_pdw *w);

#ifdef __cplusplus
}
#endif
#endif
