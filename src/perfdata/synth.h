/* SPDX-License-Identifier: MIT */
/* perf.data synthesis: the one place that knows the byte layout of the
 * records and header pieces the converters make (as perf's own
 * synthetic-events does): attrs and their EVENT_DESC, string features,
 * COMM, SAMPLE (with call chain and tracepoint RAW data), sample_id
 * trailers, MMAP2 and FINISHED_ROUND.  Build-id entries and
 * HEADER_ATTR/HEADER_FEATURE records stay with the writer, which owns the
 * header they belong to.
 *
 * It encodes only, into a caller's buffer, and knows no writer: the
 * writer (perfdata/writer.h) uses it to hand the bytes to a file, never
 * the reverse.
 *
 * Records are composed into a caller's fixed buffer (struct pg_rec), with
 * no allocation, in the byte order it names: the per-record encoders are
 * inline so that a converter's hot path, with a constant sample_type,
 * compiles to the stores it needs.  A write past the buffer's capacity is
 * dropped and remembered (overflow); pg_rec_end() then fails.  Header
 * pieces go into a caller's struct pg_buf, in its byte order. */
#ifndef PG_PERFDATA_SYNTH_H
#define PG_PERFDATA_SYNTH_H

#include <endian.h>
#include <errno.h>
#include <string.h>

#include <perfgraft/perfdata.h>
#include "util/util.h"

/* ------------------------------------------------------ record buffers */

struct pg_rec {
	uint8_t *p;		/* caller's buffer, cap bytes */
	size_t len, cap;
	bool big_endian;	/* byte order of the output */
	bool overflow;		/* a write did not fit: the record is void */
};

/* The largest record perf takes (its header's size is a u16). */
#define PG_REC_MAX 65535u

static inline bool pg_rec_room(struct pg_rec *r, size_t n)
{
	if (r->cap - r->len >= n)
		return true;
	r->overflow = true;
	return false;
}

/* n bytes at the end of the record for the caller to fill (with the
 * pg_rec_st* stores), or NULL when they do not fit (overflow).  A hot
 * path claims a run of fields at once and stores them through a local
 * pointer: no bounds check or reload of r per field. */
static inline uint8_t *pg_rec_claim(struct pg_rec *r, size_t n)
{
	uint8_t *p;

	if (!pg_rec_room(r, n))
		return NULL;
	p = r->p + r->len;
	r->len += n;
	return p;
}

/* Stores v at p in the byte order be; returns p + its size. */
static inline uint8_t *pg_rec_st16(uint8_t *p, uint16_t v, bool be)
{
	v = be ? htobe16(v) : htole16(v);
	memcpy(p, &v, 2);
	return p + 2;
}

static inline uint8_t *pg_rec_st32(uint8_t *p, uint32_t v, bool be)
{
	v = be ? htobe32(v) : htole32(v);
	memcpy(p, &v, 4);
	return p + 4;
}

static inline uint8_t *pg_rec_st64(uint8_t *p, uint64_t v, bool be)
{
	v = be ? htobe64(v) : htole64(v);
	memcpy(p, &v, 8);
	return p + 8;
}

static inline void pg_rec_u8(struct pg_rec *r, uint8_t v)
{
	uint8_t *p = pg_rec_claim(r, 1);

	if (p)
		*p = v;
}


static inline void pg_rec_u32(struct pg_rec *r, uint32_t v)
{
	uint8_t *p = pg_rec_claim(r, 4);

	if (p)
		pg_rec_st32(p, v, r->big_endian);
}

static inline void pg_rec_u64(struct pg_rec *r, uint64_t v)
{
	uint8_t *p = pg_rec_claim(r, 8);

	if (p)
		pg_rec_st64(p, v, r->big_endian);
}

static inline void pg_rec_add(struct pg_rec *r, const void *src, size_t n)
{
	uint8_t *p = pg_rec_claim(r, n);

	if (p)
		memcpy(p, src, n);
}

/* Overwrites a field written before (at + size <= len). */
static inline void pg_rec_put16(struct pg_rec *r, size_t at, uint16_t v)
{
	v = r->big_endian ? htobe16(v) : htole16(v);
	if (at + 2 <= r->len)
		memcpy(r->p + at, &v, 2);
}

static inline void pg_rec_put32(struct pg_rec *r, size_t at, uint32_t v)
{
	v = r->big_endian ? htobe32(v) : htole32(v);
	if (at + 4 <= r->len)
		memcpy(r->p + at, &v, 4);
}

static inline void pg_rec_put64(struct pg_rec *r, size_t at, uint64_t v)
{
	v = r->big_endian ? htobe64(v) : htole64(v);
	if (at + 8 <= r->len)
		memcpy(r->p + at, &v, 8);
}

/* Starts a record: perf_event_header with its size left for pg_rec_end. */
static inline uint8_t *pg_rec__hdr(struct pg_rec *r, size_t n, uint32_t type, uint16_t misc)
{
	uint8_t *p;

	r->len = 0;
	r->overflow = false;
	if (!(p = pg_rec_claim(r, n)))
		return NULL;
	p = pg_rec_st32(p, type, r->big_endian);
	p = pg_rec_st16(p, misc, r->big_endian);
	return pg_rec_st16(p, 0, r->big_endian);
}

static inline void pg_rec_start(struct pg_rec *r, uint32_t type, uint16_t misc)
{
	pg_rec__hdr(r, 8, type, misc);
}

/* Sets the header's size.  0, or -E2BIG when the record overflowed the
 * buffer or is larger than PG_REC_MAX (the caller says what it was). */
static inline int pg_rec_end(struct pg_rec *r)
{
	if (r->overflow || r->len > PG_REC_MAX)
		return -E2BIG;
	pg_rec_put16(r, 6, (uint16_t)r->len);
	return 0;
}

/* ------------------------------------------------------------- samples */

/* The fields of a SAMPLE (and of a sample_id trailer) that sample_type
 * selects; the others are ignored. */
struct pg_synth_sample {
	uint64_t id;		/* IDENTIFIER and ID */
	uint64_t ip, time, addr, period;
	uint32_t pid, tid, cpu;
};

/* Byte offset of a fixed SAMPLE field (one PG_SAMPLE_* bit up to PERIOD)
 * in a record of sample_type, header included: for patching a field of an
 * encoded record (pg_rec_put64). */
static inline size_t pg_synth_sample_offset(uint64_t sample_type, uint64_t field)
{
	static const uint64_t order[] = {
		PG_SAMPLE_IDENTIFIER, PG_SAMPLE_IP, PG_SAMPLE_TID, PG_SAMPLE_TIME,
		PG_SAMPLE_ADDR, PG_SAMPLE_ID, PG_SAMPLE_STREAM_ID, PG_SAMPLE_CPU,
		PG_SAMPLE_PERIOD,
	};
	size_t at = 8;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]) && order[i] != field; i++)
		if (sample_type & order[i])
			at += 8;
	return at;
}

/* Starts a SAMPLE: the header and the fields before the call chain, in
 * perf's order (IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU,
 * PERIOD).  Then, as sample_type says, a call chain (pg_synth_chain_*),
 * RAW data (pg_synth_raw_* or pg_synth_tp_*), and pg_rec_end(). */
/* The fields, stored at p with a constant be (the caller branches once
 * on the byte order, so that each copy compiles to plain stores). */
static inline __attribute__((always_inline)) void
pg_synth__sample(uint8_t *p, uint64_t st, const struct pg_synth_sample *s, bool be)
{
	if (st & PG_SAMPLE_IDENTIFIER)
		p = pg_rec_st64(p, s->id, be);
	if (st & PG_SAMPLE_IP)
		p = pg_rec_st64(p, s->ip, be);
	if (st & PG_SAMPLE_TID) {
		p = pg_rec_st32(p, s->pid, be);
		p = pg_rec_st32(p, s->tid, be);
	}
	if (st & PG_SAMPLE_TIME)
		p = pg_rec_st64(p, s->time, be);
	if (st & PG_SAMPLE_ADDR)
		p = pg_rec_st64(p, s->addr, be);
	if (st & PG_SAMPLE_ID)
		p = pg_rec_st64(p, s->id, be);
	if (st & PG_SAMPLE_STREAM_ID)
		p = pg_rec_st64(p, 0, be);
	if (st & PG_SAMPLE_CPU) {
		p = pg_rec_st32(p, s->cpu, be);
		p = pg_rec_st32(p, 0, be);	/* res */
	}
	if (st & PG_SAMPLE_PERIOD)
		pg_rec_st64(p, s->period, be);
}

static inline void pg_synth_sample_start(struct pg_rec *r, uint64_t sample_type, uint16_t misc,
					 const struct pg_synth_sample *s)
{
	uint64_t st = sample_type;
	size_t n = 8 + 8 * (!!(st & PG_SAMPLE_IDENTIFIER) + !!(st & PG_SAMPLE_IP) +
			    !!(st & PG_SAMPLE_TID) + !!(st & PG_SAMPLE_TIME) +
			    !!(st & PG_SAMPLE_ADDR) + !!(st & PG_SAMPLE_ID) +
			    !!(st & PG_SAMPLE_STREAM_ID) + !!(st & PG_SAMPLE_CPU) +
			    !!(st & PG_SAMPLE_PERIOD));
	uint8_t *p = pg_rec__hdr(r, n, PG_PERF_RECORD_SAMPLE, misc);

	if (!p)
		return;
	if (r->big_endian)
		pg_synth__sample(p, st, s, true);
	else
		pg_synth__sample(p, st, s, false);
}

/* A call chain: nr, then the addresses the caller appends with
 * pg_rec_u64 (context markers such as PG_PERF_CONTEXT_USER included);
 * pg_synth_chain_end sets nr.  Returns where nr is. */
static inline size_t pg_synth_chain_start(struct pg_rec *r)
{
	size_t at = r->len;

	pg_rec_u64(r, 0);
	return at;
}

static inline void pg_synth_chain_end(struct pg_rec *r, size_t at)
{
	pg_rec_put64(r, at, (r->len - at - 8) / 8);
}

/* A call chain of nr addresses known in advance: writes nr and returns
 * the room for the addresses (pg_rec_st64 each), or NULL (overflow). */
static inline uint8_t *pg_synth_chain(struct pg_rec *r, size_t nr)
{
	uint8_t *p = pg_rec_claim(r, 8 * (nr + 1));

	return p ? pg_rec_st64(p, nr, r->big_endian) : NULL;
}

/* RAW: a u32 size, then the data; pg_synth_raw_end pads the size field
 * and data to 8 bytes, as perf requires, and sets the size (at: where the
 * size field is, as pg_synth_tp_start returns it). */
static inline void pg_synth_raw_end(struct pg_rec *r, size_t at)
{
	size_t pad = -(r->len - at) & 7;

	if (r->cap - r->len >= 8) {	/* a fixed-size clear: no memset call */
		memset(r->p + r->len, 0, 8);
		r->len += pad;
	} else if (pg_rec_room(r, pad)) {
		memset(r->p + r->len, 0, pad);
		r->len += pad;
	}
	pg_rec_put32(r, at, (uint32_t)(r->len - at - 4));
}

/* Tracepoint RAW data: the size field and the common fields of an
 * ftrace event (common_type, flags, preempt_count, common_pid); the
 * caller appends its fields, then pg_synth_raw_end.  Returns the RAW
 * position for pg_synth_tp_dyn and pg_synth_raw_end. */
static inline size_t pg_synth_tp_start(struct pg_rec *r, uint16_t common_type,
				       uint32_t common_pid)
{
	size_t at = r->len;
	uint8_t *p = pg_rec_claim(r, 4 + 8);

	if (!p)
		return at;
	memset(p, 0, 4 + 8);	/* RAW size (pg_synth_raw_end), flags, preempt_count */
	if (r->big_endian) {
		pg_rec_st16(p + 4, common_type, true);
		pg_rec_st32(p + 8, common_pid, true);
	} else {
		pg_rec_st16(p + 4, common_type, false);
		pg_rec_st32(p + 8, common_pid, false);
	}
	return at;
}

/* A dynamic (__data_loc) field: appends n bytes at p (and a NUL when nul)
 * after the RAW data so far and points the u32 at loc_at (offset in the
 * RAW data, written before as a placeholder) at them: size << 16 | offset. */
static inline void pg_synth_tp_dyn(struct pg_rec *r, size_t raw_at, size_t loc_at,
				   const void *p, size_t n, bool nul)
{
	size_t data = raw_at + 4;

	pg_rec_put32(r, data + loc_at, (uint32_t)((n + nul) << 16 | (r->len - data)));
	pg_rec_add(r, p, n);
	if (nul)
		pg_rec_u8(r, 0);
}

/* The sample_id trailer of a non-SAMPLE record (attr.sample_id_all): the
 * fields of s that sample_type selects, in perf's order. */
static inline void pg_synth_sample_id(struct pg_rec *r, uint64_t sample_type,
				      const struct pg_synth_sample *s)
{
	if (sample_type & PG_SAMPLE_TID) {
		pg_rec_u32(r, s->pid);
		pg_rec_u32(r, s->tid);
	}
	if (sample_type & PG_SAMPLE_TIME)
		pg_rec_u64(r, s->time);
	if (sample_type & PG_SAMPLE_ID)
		pg_rec_u64(r, s->id);
	if (sample_type & PG_SAMPLE_STREAM_ID)
		pg_rec_u64(r, 0);
	if (sample_type & PG_SAMPLE_CPU) {
		pg_rec_u32(r, s->cpu);
		pg_rec_u32(r, 0);
	}
	if (sample_type & PG_SAMPLE_IDENTIFIER)
		pg_rec_u64(r, s->id);
}

/* The bytes pg_synth_sample_id() writes for sample_type (each field 8). */
static inline size_t pg_synth_sample_id_size(uint64_t sample_type)
{
	static const uint64_t fields[] = { PG_SAMPLE_TID, PG_SAMPLE_TIME, PG_SAMPLE_ID,
					   PG_SAMPLE_STREAM_ID, PG_SAMPLE_CPU,
					   PG_SAMPLE_IDENTIFIER };
	size_t n = 0;

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		n += (sample_type & fields[i]) ? 8 : 0;
	return n;
}

/* A COMM record for pid/tid with s's sample_id trailer (sample_type 0:
 * none).  The name is cut to 15 bytes and NUL-padded to name_size bytes,
 * 0 meaning perf's own size (strlen + 1 rounded up to 8); name_size is a
 * multiple of 8, at most 16.  Then pg_rec_end(). */
void pg_synth_comm(struct pg_rec *r, uint32_t pid, uint32_t tid, const char *comm,
		   size_t name_size, uint64_t sample_type, const struct pg_synth_sample *s);

/* An MMAP2 record (MISC_USER, inode form) of m's fields with s's
 * sample_id trailer (sample_type 0: none; m's time, id and cpu are not
 * read: they are the trailer's); the file name NUL-padded to 8 bytes.
 * m is perfdata.h's description of the record, not the writer.  Then
 * pg_rec_end(). */
void pg_synth_mmap2(struct pg_rec *r, const struct pg_pdw_mmap2 *m, uint64_t sample_type,
		    const struct pg_synth_sample *s);

/* A FINISHED_ROUND (a header only).  Then pg_rec_end(). */
static inline void pg_synth_round(struct pg_rec *r)
{
	pg_rec_start(r, PG_PERF_RECORD_FINISHED_ROUND, 0);
}

/* --------------------------------------------------------- the header */

/* An event of the output: its perf_event_attr (the fields perfgraft sets;
 * the rest is 0) and, for EVENT_DESC, its name and ids. */
struct pg_synth_attr {
	uint32_t type;		/* PG_PERF_TYPE_* */
	uint64_t config, period, sample_type, read_format;
	uint64_t flags;		/* PG_ATTR_* bits, the word at offset 40 */
	int32_t clockid;	/* with PG_ATTR_USE_CLOCKID */
	const char *name;
	const uint64_t *ids;
	size_t nr_ids;
};

/* The attr size perfgraft writes (PERF_ATTR_SIZE_VER7). */
#define PG_SYNTH_ATTR_SIZE 128u

/* Encodes a's perf_event_attr into raw, in the byte order given. */
void pg_synth_attr_raw(uint8_t raw[PG_SYNTH_ATTR_SIZE], bool big_endian,
		       const struct pg_synth_attr *a);

/* The EVENT_DESC feature's body naming the n attrs, appended to b (the
 * attrs in b's byte order). */
void pg_synth_event_desc(struct pg_buf *b, const struct pg_synth_attr *a, size_t n);
/* perf's header string, appended to b: a u32 length, then the string
 * NUL-padded to a multiple of 64 bytes.  The body of a string feature
 * (HOSTNAME, OSRELEASE, VERSION, ARCH, ...). */
void pg_synth_str(struct pg_buf *b, const char *str);

#endif
