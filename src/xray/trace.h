/* SPDX-License-Identifier: MIT */
/* Internal to the XRay trace reader: the index (segments), the segment
 * decoder's cursor and the time-order walk's per-thread state, shared by
 * trace.c (open, index, decode) and order.c (file and time order). */
#ifndef PG_XRAY_TRACE_H
#define PG_XRAY_TRACE_H

#include <stddef.h>
#include <string.h>

#include <perfgraft/xray.h>

struct seg {
	uint64_t off, end;	/* bytes [off, end) of the file */
	uint64_t first_tsc;
	uint32_t pid, tid;
	uint32_t thread;	/* index into threads */
	uint32_t order;		/* file order */
	bool truncated;		/* the file ends inside it */
};

/* Decoding state inside one segment. */
struct cursor {
	uint64_t start, pos, end;
	uint64_t kept;		/* pages from here on are not given back yet */
	uint64_t tsc;
	bool body;		/* a function or event record was decoded */
	bool eob;		/* v1 EndOfBuffer or filler reached */
	bool after_entry;	/* the previous record was an entry or argument */
	uint16_t cpu;
	uint32_t pid, tid;
	bool truncated;
	bool done;		/* segment over */
};

struct thread_cur {
	uint32_t pid, tid;
	size_t seg_lo, seg_hi;	/* its segments in seg_sorted */
	size_t seg;		/* next segment */
	struct cursor c;
	bool in_seg;
	struct pg_xr_record la[2];	/* lookahead: la[cur]; the other, the
					 * record pg_xr_next_ref returned last */
	unsigned cur;
	uint64_t key;		/* la[cur].tsc, for the heap: one load */
	bool have_la, ended;
	uint64_t last_tsc;
	bool any;
};

struct pg_xray {
	const uint8_t *base;
	size_t size;
	bool mapped;
	bool be;
	unsigned flags;
	char *name;
	struct pg_diag *diag;
	struct pg_xr_header hdr;
	struct pg_xray_stats st;

	struct seg *segs;
	size_t nsegs, segs_cap;

	/* file order */
	size_t fo_seg;
	struct cursor fo;
	bool fo_in_seg;

	/* time order */
	struct thread_cur *threads;
	size_t nthreads;
	size_t *seg_sorted;
	uint32_t *heap;
	size_t nheap;
	bool started;
	uint64_t since_release;	/* bytes of segments begun since the last sweep */
	struct { uint64_t lo, hi; } *active;	/* scratch for the sweep */
};

/* *dst = *src, without the unused part of args[] */
static inline void rec_copy(struct pg_xr_record *dst, const struct pg_xr_record *src)
{
	size_t a = offsetof(struct pg_xr_record, args), b = offsetof(struct pg_xr_record, payload);

	memcpy(dst, src, a);
	memcpy(dst->args, src->args, (src->nargs <= PG_XR_MAX_ARGS ? src->nargs : 0) * 8);
	memcpy((char *)dst + b, (const char *)src + b, sizeof(*dst) - b);
}

/* Gives the pages of [off, end) back (a mapped file only). */
void pg_xr_release(pg_xray *t, uint64_t off, uint64_t end);
/* The largest page-cache folio a read fault maps at once (PMD size). */
#define XR_SPAN (2u << 20)
/* Gives back the XR_SPAN-aligned range around [off, end). */
void pg_xr_release_span(pg_xray *t, uint64_t off, uint64_t end);
/* Starts decoding segment s. */
void pg_xr_cursor_start(pg_xray *t, struct cursor *c, const struct seg *s);
/* The segment's next record into r: 1, or 0 at its end; all: also the
 * records only the file-order dump shows. */
int pg_xr_seg_next(pg_xray *t, struct cursor *c, struct pg_xr_record *r, bool all);
/* pg_xray_next() in time order without the copy: the next record, valid
 * until the next call, or NULL at the end. */
const struct pg_xr_record *pg_xr_next_ref(pg_xray *t);
/* Threads by (pid, tid) in order of first appearance, each segment's
 * thread, and the time-order walk's arrays. */
int pg_xr_assign_threads(pg_xray *t);

#endif
