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
 * (attrs, MMAP2 records, build-id entries, features). */
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
	PG_PERF_RECORD_SAMPLE = 9,
	PG_PERF_RECORD_MMAP2 = 10,
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
	PG_FEAT_EVENT_DESC = 12,
	PG_FEAT_COMPRESSED = 27,
	PG_FEAT_MAX = 256,
};

#define PG_SAMPLE_IP (1u << 0)
#define PG_SAMPLE_TID (1u << 1)
#define PG_SAMPLE_TIME (1u << 2)
#define PG_SAMPLE_ADDR (1u << 3)
#define PG_SAMPLE_ID (1u << 6)
#define PG_SAMPLE_CPU (1u << 7)
#define PG_SAMPLE_STREAM_ID (1u << 9)
#define PG_SAMPLE_IDENTIFIER (1u << 16)

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

/* path "-" reads standard input (pipe mode, or file mode from a pipe is
 * refused: perf writes pipe mode to pipes). */
int pg_perfdata_open(const char *path, struct pg_diag *diag, pg_perfdata **out);
int pg_perfdata_open_mem(const void *buf, size_t len, const char *name,
			 struct pg_diag *diag, pg_perfdata **out);
void pg_perfdata_close(pg_perfdata *pd);

bool pg_perfdata_pipe(const pg_perfdata *pd);
bool pg_perfdata_big_endian(const pg_perfdata *pd);
const char *pg_perfdata_name(const pg_perfdata *pd);
/* attrs known so far (pipe mode: grows as HEADER_ATTR records pass) */
size_t pg_perfdata_nattrs(const pg_perfdata *pd);
const struct pg_pd_attr *pg_perfdata_attr(const pg_perfdata *pd, size_t i);
/* file mode: the header's feature sections, ascending by bit */
size_t pg_perfdata_nfeatures(const pg_perfdata *pd);
const struct pg_pd_feature *pg_perfdata_feature(const pg_perfdata *pd, size_t i);
/* the last TIME_CONV seen, or NULL */
const struct pg_pd_time_conv *pg_perfdata_time_conv(const pg_perfdata *pd);
uint64_t pg_perfdata_data_size(const pg_perfdata *pd);

/* 1: *rec filled (valid until the next call); 0: end; negative errno:
 * damaged at the offset named in diag->err.  COMPRESSED records are
 * replaced by the records they hold. */
int pg_perfdata_next(pg_perfdata *pd, struct pg_pd_rec *rec);
/* Restart the walk at the first record (file mode only). */
int pg_perfdata_rewind(pg_perfdata *pd);

int pg_perfdata_mmap(const pg_perfdata *pd, const struct pg_pd_rec *rec,
		     struct pg_pd_mmap *mm);
uint16_t pg_pd_u16(const pg_perfdata *pd, const void *p);
uint32_t pg_pd_u32(const pg_perfdata *pd, const void *p);
uint64_t pg_pd_u64(const pg_perfdata *pd, const void *p);

/* ---- writer ---- */

struct pg_pdw_opts {
	bool pipe;		/* pipe-mode output (always for "-") */
	bool big_endian;	/* byte order of everything written */
	/* file mode: zstd level for the data section, written as
	 * PERF_RECORD_COMPRESSED records with the COMPRESSED feature, as
	 * perf record -z does (perf 6.1 cannot read them from a pipe); 0: off */
	int compress_level;
};

typedef struct pg_pdw pg_pdw;

/* path "-" writes standard output.  A file is written beside its final
 * name and renamed by pg_pdw_close(). */
int pg_pdw_open(const char *path, const struct pg_pdw_opts *opts,
		struct pg_diag *diag, pg_pdw **out);
/* Attrs must all be added before the first record (pipe mode writes them
 * as HEADER_ATTR at once). raw is attr.size bytes in the output order. */
int pg_pdw_add_attr(pg_pdw *w, const uint8_t *raw, uint32_t raw_size,
		    const uint64_t *ids, size_t nr_ids);
/* A header feature (file mode: a section; pipe mode: HEADER_FEATURE,
 * TRACING_DATA or BUILD_ID records as perf expects them). */
int pg_pdw_add_feature(pg_pdw *w, unsigned bit, const void *body, uint64_t size);
/* A record (header included) and the bytes that follow it for types 66/71. */
int pg_pdw_write(pg_pdw *w, const void *rec, size_t size, const void *extra,
		 uint64_t extra_size);
/* A build-id entry: file mode adds it to the BUILD_ID feature, pipe mode
 * writes a HEADER_BUILD_ID record now. */
int pg_pdw_build_id(pg_pdw *w, int32_t pid, uint16_t misc, const uint8_t *id,
		    unsigned id_size, const char *filename);
/* Encode an MMAP2 (inode form) with a sample_id trailer for attr a. */
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
int pg_pdw_close(pg_pdw *w);	/* finishes and renames; frees w */
void pg_pdw_abort(pg_pdw *w);	/* removes the partial output; frees w */
uint64_t pg_pdw_bytes(const pg_pdw *w);

#ifdef __cplusplus
}
#endif
#endif
