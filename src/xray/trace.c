/* SPDX-License-Identifier: MIT */
/* XRay trace reader: FDR versions 1-5 and basic mode versions 1-3, either
 * byte order.
 *
 * The file is mapped, then indexed once: every FDR buffer (v1: fixed
 * strides, v2+: BufferExtents chains) or basic chunk (a run of one
 * thread's records) becomes a segment with its thread and first absolute
 * TSC, read from the buffer's preamble; this file decodes one segment at
 * a time.  order.c walks them: in file order as they lie, or in time
 * order, a cursor per thread over its segments merged with a heap, so
 * memory stays O(segments + threads) whatever the trace's length. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <byteswap.h>
#include <sys/mman.h>

#include <perfgraft/xray.h>
#include "util/util.h"
#include "xray/trace.h"

#define HDR_SIZE 32
#define MD_SIZE 16
#define FN_SIZE 8
#define BASIC_REC 32

enum {
	MD_NEW_BUFFER = 0,
	MD_END_OF_BUFFER = 1,
	MD_NEW_CPU = 2,
	MD_TSC_WRAP = 3,
	MD_WALLCLOCK = 4,
	MD_CUSTOM = 5,
	MD_CALL_ARG = 6,
	MD_EXTENTS = 7,
	MD_TYPED = 8,
	MD_PID = 9,
};

static uint16_t rd16(const pg_xray *t, uint64_t off)
{
	uint16_t v;

	memcpy(&v, t->base + off, 2);
	return t->be ? bswap_16(v) : v;
}

static uint32_t rd32(const pg_xray *t, uint64_t off)
{
	uint32_t v;

	memcpy(&v, t->base + off, 4);
	return t->be ? bswap_32(v) : v;
}

static uint64_t rd64(const pg_xray *t, uint64_t off)
{
	uint64_t v;

	memcpy(&v, t->base + off, 8);
	return t->be ? bswap_64(v) : v;
}

/* Metadata or function record?  Bit 0 of the first byte, in both byte
 * orders: big-endian traces are read as llvm-xray reads them, with the
 * little-endian bit-fields and every multi-byte field swapped.  (The
 * format document's big-endian bit order has no producer and no reader.) */
static bool is_metadata(uint8_t b)
{
	return b & 1;
}

static unsigned md_kind(uint8_t b)
{
	return b >> 1;
}

const char *pg_xray_kind_name(enum pg_xr_kind k)
{
	switch (k) {
	case PG_XR_ENTER: return "enter";
	case PG_XR_EXIT: return "exit";
	case PG_XR_TAIL_EXIT: return "tail_exit";
	case PG_XR_ENTER_ARG: return "enter_arg";
	case PG_XR_CUSTOM: return "custom_event";
	case PG_XR_TYPED: return "typed_event";
	case PG_XR_THREAD_END: return "thread_end";
	case PG_XR_NEW_BUFFER: return "new_buffer";
	case PG_XR_END_OF_BUFFER: return "end_of_buffer";
	case PG_XR_NEW_CPU: return "new_cpu";
	case PG_XR_TSC_WRAP: return "tsc_wrap";
	case PG_XR_WALLCLOCK: return "wallclock";
	case PG_XR_BUFFER_EXTENTS: return "buffer_extents";
	case PG_XR_PID: return "pid";
	case PG_XR_CALL_ARG: return "call_arg";
	case PG_XR_SKIPPED: return "skipped";
	}
	return "unknown";
}

static bool version_ok(uint16_t type, uint16_t version)
{
	return type == PG_XRAY_FDR ? version >= 1 && version <= 5
				   : type == PG_XRAY_BASIC && version >= 1 && version <= 3;
}

/* 0: a little-endian header, 1: big-endian, -1: neither */
static int header_order(const uint8_t *p, size_t len)
{
	if (len < 4)
		return -1;
	if (version_ok((uint16_t)(p[2] | p[3] << 8), (uint16_t)(p[0] | p[1] << 8)))
		return 0;
	if (version_ok((uint16_t)(p[3] | p[2] << 8), (uint16_t)(p[1] | p[0] << 8)))
		return 1;
	return -1;
}

bool pg_xray_probe(const void *buf, size_t len)
{
	return header_order(buf, len) >= 0;
}

/* A segment read to its end: give its pages back, so that resident memory
 * stays at the buffers being read, not the file's size. */
void pg_xr_release(pg_xray *t, uint64_t off, uint64_t end)
{
	if (t->mapped)
		pg_release_mapped(t->base, off, end);
}

/* The same, widened to whole XR_SPANs.  A fault maps the whole page-cache
 * folio it hits (Linux 6.18 maps large folios entire, up to 2 MiB), and a
 * released page of a folio comes back with any later touch of it: giving
 * back only a segment's own pages left the folios it shares with other
 * threads' buffers mapped until the next sweep, so the peak followed how
 * the threads' buffers interleave and how the file came into the page
 * cache (17 to 46 MB at 192 MB).  A folio that another thread is still
 * reading is faulted back in by it: that costs one fault, never data. */
void pg_xr_release_span(pg_xray *t, uint64_t off, uint64_t end)
{
	uint64_t lo = off & ~(uint64_t)(XR_SPAN - 1), hi = pg_align(end, XR_SPAN);

	pg_xr_release(t, lo, hi < t->size ? hi : pg_align(t->size, 4096));
}

/* The index pass reads a little of every buffer; it hands the folios
 * behind it back as it goes so that the peak stays small too. */
static void release_behind(pg_xray *t, uint64_t *done, uint64_t p)
{
	if (p - *done >= 2 * XR_SPAN) {
		uint64_t upto = p & ~(uint64_t)(XR_SPAN - 1);

		pg_xr_release(t, *done, upto);
		*done = upto;
	}
}

/* ---------------------------------------------------------------- index */

static int add_seg(pg_xray *t, const struct seg *s)
{
	if (!pg_grow((void **)&t->segs, &t->segs_cap, t->nsegs + 1, sizeof(*s)))
		return pg_err(t->diag, -ENOMEM, "%s: out of memory", t->name);
	t->segs[t->nsegs] = *s;
	t->segs[t->nsegs].order = (uint32_t)t->nsegs;
	t->nsegs++;
	return 0;
}

/* Reads an FDR buffer's preamble (NewBuffer, WallClock, PID, NewCPUId, in
 * whatever order and number) for its thread and first TSC. */
static void fdr_preamble(pg_xray *t, struct seg *s)
{
	uint64_t p = s->off;
	bool have_pid = false;

	s->first_tsc = 0;
	s->tid = s->pid = 0;
	for (int n = 0; n < 8 && p + MD_SIZE <= s->end; n++) {
		uint8_t b = t->base[p];

		if (!is_metadata(b))
			break;
		switch (md_kind(b)) {
		case MD_EXTENTS:
		case MD_WALLCLOCK:
			break;
		case MD_NEW_BUFFER:
			s->tid = rd32(t, p + 1);
			break;
		case MD_PID:
			s->pid = rd32(t, p + 1);
			have_pid = true;
			break;
		case MD_NEW_CPU:
			s->first_tsc = rd64(t, p + 3);
			goto out;
		case MD_TSC_WRAP:
			s->first_tsc = rd64(t, p + 1);
			goto out;
		default:
			goto out;
		}
		p += MD_SIZE;
	}
out:
	/* LLVM keys pre-v3 buffers by thread alone and calls the pid the tid */
	if (!have_pid)
		s->pid = s->tid;
}

static int index_fdr(pg_xray *t)
{
	uint64_t p = HDR_SIZE, size = t->size, done = 0;
	struct seg s;
	int ret;

	if (t->hdr.version == 1) {
		uint64_t bs = t->hdr.buffer_size;

		if (bs < MD_SIZE * 3 || bs > size - HDR_SIZE) {
			/* an early v1 writer put a timespec here; read the rest
			 * as one buffer */
			if (size > HDR_SIZE)
				pg_warn(t->diag, "%s: offset 16: implausible buffer size %llu; reading the data as one buffer",
					t->name, (unsigned long long)bs);
			bs = size - HDR_SIZE;
		}
		for (; p < size; p += bs) {
			release_behind(t, &done, p);
			memset(&s, 0, sizeof(s));
			s.off = p;
			s.end = p + bs;
			if (s.end > size) {
				pg_warn(t->diag, "%s: offset %llu: buffer of %llu bytes cut by the end of the file after %llu (truncated tail)",
					t->name, (unsigned long long)p, (unsigned long long)bs,
					(unsigned long long)(size - p));
				t->st.truncated_bytes += s.end - size;
				s.end = size;
				s.truncated = true;
			}
			fdr_preamble(t, &s);
			if ((ret = add_seg(t, &s)) < 0)
				return ret;
		}
		return 0;
	}
	while (p < size) {
		uint64_t n;

		release_behind(t, &done, p);
		if (size - p < MD_SIZE) {
			pg_warn(t->diag, "%s: offset %llu: %llu bytes are too short for a BufferExtents record (truncated tail)",
				t->name, (unsigned long long)p, (unsigned long long)(size - p));
			t->st.truncated_bytes += size - p;
			break;
		}
		if (!is_metadata(t->base[p]) || md_kind(t->base[p]) != MD_EXTENTS) {
			/* lost sync: look for the next extents record that is
			 * followed by a NewBuffer, never inside this data */
			uint64_t q;

			for (q = p + 1; q + 2 * MD_SIZE <= size; q++)
				if (is_metadata(t->base[q]) &&
				    md_kind(t->base[q]) == MD_EXTENTS &&
				    is_metadata(t->base[q + MD_SIZE]) &&
				    md_kind(t->base[q + MD_SIZE]) == MD_NEW_BUFFER)
					break;
			if (q + 2 * MD_SIZE > size)
				q = size;
			pg_warn(t->diag, "%s: offset %llu: expected a BufferExtents record (byte 0x%02x); skipped %llu bytes%s",
				t->name, (unsigned long long)p, t->base[p],
				(unsigned long long)(q - p), q < size ? " to the next buffer" : " to the end");
			t->st.damaged_buffers++;
			p = q;
			continue;
		}
		n = rd64(t, p + 1);
		memset(&s, 0, sizeof(s));
		s.off = p;
		if (n > size - p - MD_SIZE) {
			pg_warn(t->diag, "%s: offset %llu: buffer extents of %llu bytes run past the end of the file (%llu bytes left; truncated tail)",
				t->name, (unsigned long long)p, (unsigned long long)n,
				(unsigned long long)(size - p - MD_SIZE));
			t->st.truncated_bytes += n - (size - p - MD_SIZE);
			s.end = size;
			s.truncated = true;
		} else {
			s.end = p + MD_SIZE + n;
		}
		fdr_preamble(t, &s);
		if ((ret = add_seg(t, &s)) < 0)
			return ret;
		p = s.end;
	}
	return 0;
}

static int index_basic(pg_xray *t)
{
	uint64_t p = HDR_SIZE, size = t->size, done = 0;
	uint64_t whole = HDR_SIZE + (size - HDR_SIZE) / BASIC_REC * BASIC_REC;
	struct seg s = { 0 };
	bool open = false;
	int ret;

	if (whole < size) {
		pg_warn(t->diag, "%s: offset %llu: %llu bytes are too short for a record (truncated tail)",
			t->name, (unsigned long long)whole, (unsigned long long)(size - whole));
		t->st.truncated_bytes += size - whole;
	}
	for (; p < whole; p += BASIC_REC) {
		uint16_t type = rd16(t, p);
		uint32_t tid, pid;

		release_behind(t, &done, p);
		if (type != 0)	/* payloads and damage stay with their chunk */
			continue;
		tid = rd32(t, p + 16);
		pid = t->hdr.version >= 3 ? rd32(t, p + 20) : tid;
		if (open && tid == s.tid && pid == s.pid)
			continue;
		if (open) {
			s.end = p;
			if ((ret = add_seg(t, &s)) < 0)
				return ret;
		}
		memset(&s, 0, sizeof(s));
		s.off = open ? p : HDR_SIZE;	/* leading payloads join the first */
		s.tid = tid;
		s.pid = pid;
		s.first_tsc = rd64(t, p + 8);
		open = true;
	}
	if (open) {
		s.end = whole;
		return add_seg(t, &s);
	}
	if (whole > HDR_SIZE) {	/* only payload records: keep them visible */
		s.off = HDR_SIZE;
		s.end = whole;
		return add_seg(t, &s);
	}
	return 0;
}

/* --------------------------------------------------------------- decode */

void pg_xr_cursor_start(pg_xray *t, struct cursor *c, const struct seg *s)
{
	memset(c, 0, sizeof(*c));
	c->start = c->pos = c->kept = s->off;
	c->end = s->end;
	c->pid = s->pid;
	c->tid = s->tid;
	c->truncated = s->truncated;
	t->st.buffers++;
	t->since_release += s->end - s->off;
}

static void stop_damaged(pg_xray *t, struct cursor *c)
{
	c->done = true;
	t->st.damaged_buffers++;
}

/* A record of `need` bytes at c->pos does not fit before c->end. */
static void cut_record(pg_xray *t, struct cursor *c, uint64_t need)
{
	if (!c->truncated) {
		pg_warn(t->diag, "%s: offset %llu: a %llu-byte record crosses the end of its buffer at offset %llu; dropped",
			t->name, (unsigned long long)c->pos, (unsigned long long)need,
			(unsigned long long)c->end);
		t->st.damaged_buffers++;
	}
	c->done = true;
}

static bool is_call_arg(const pg_xray *t, const struct cursor *c, uint64_t p)
{
	return p + MD_SIZE <= c->end && is_metadata(t->base[p]) &&
	       md_kind(t->base[p]) == MD_CALL_ARG;
}

/* Attaches the CallArgument records after a function record at p; returns
 * the offset after them. */
static uint64_t fdr_args(pg_xray *t, const struct cursor *c, uint64_t p, struct pg_xr_record *r)
{
	while (is_call_arg(t, c, p)) {
		if (r->nargs < PG_XR_MAX_ARGS)
			r->args[r->nargs] = rd64(t, p + 1);
		else if (r->nargs == PG_XR_MAX_ARGS)
			pg_warn(t->diag, "%s: offset %llu: more than %d arguments; the rest are dropped",
				t->name, (unsigned long long)p, PG_XR_MAX_ARGS);
		r->nargs++;
		p += MD_SIZE;
	}
	if (r->nargs > PG_XR_MAX_ARGS)
		r->nargs = PG_XR_MAX_ARGS;
	return p;
}

/* Clears a record but for args[] (only nargs of them are meaningful):
 * this runs once per record, and the array is most of the struct. */
static inline void rec_clear(struct pg_xr_record *r, uint64_t offset)
{
	r->kind = PG_XR_ENTER;
	r->offset = offset;
	r->size = 0;
	r->func_id = 0;
	r->tsc = 0;
	r->pid = r->tid = 0;
	r->cpu = 0;
	r->nargs = 0;
	r->payload = NULL;
	r->payload_size = 0;
	r->event_type = 0;
	r->delta = 0;
	r->value = 0;
	r->usec = 0;
}

static void fill_common(const struct cursor *c, struct pg_xr_record *r)
{
	r->tsc = c->tsc;
	r->cpu = c->cpu;
	r->pid = c->pid;
	r->tid = c->tid;
}

static void count(pg_xray *t, struct cursor *c, const struct pg_xr_record *r)
{
	c->body = true;
	switch (r->kind) {
	case PG_XR_ENTER: t->st.enters++; break;
	case PG_XR_ENTER_ARG: t->st.enters++; t->st.args += r->nargs; break;
	case PG_XR_EXIT: t->st.exits++; break;
	case PG_XR_TAIL_EXIT: t->st.tail_exits++; break;
	case PG_XR_CUSTOM: t->st.custom++; break;
	case PG_XR_TYPED: t->st.typed++; break;
	default: return;
	}
	t->st.records++;
}

/* Next record of an FDR segment.  all: metadata too (file order).
 * Returns 1 with *r filled, 0 at the end of the segment. */
static int fdr_next(pg_xray *t, struct cursor *c, struct pg_xr_record *r, bool all)
{
	unsigned v = t->hdr.version;

	while (!c->done && c->pos < c->end) {
		uint64_t p = c->pos, left = c->end - p;
		uint8_t b = t->base[p];

		rec_clear(r, p);
		if (!is_metadata(b)) {
			uint32_t w, action;

			if (left < FN_SIZE) {
				cut_record(t, c, FN_SIZE);
				break;
			}
			w = rd32(t, p);
			if (v == 1 && w == 0 && rd32(t, p + 4) == 0) {
				/* a v1 buffer never closed: zero filler, not Enter #0 */
				c->eob = true;
				break;
			}
			action = (w >> 1) & 7;
			r->func_id = w >> 4;
			if (action > 3) {
				pg_warn(t->diag, "%s: offset %llu: invalid function record action %u; rest of the buffer skipped",
					t->name, (unsigned long long)p, action);
				stop_damaged(t, c);
				break;
			}
			r->delta = rd32(t, p + 4);
			c->tsc += (uint32_t)r->delta;
			r->kind = (enum pg_xr_kind)action;
			r->size = FN_SIZE;
			fill_common(c, r);
			c->pos = p + FN_SIZE;
			if (action == PG_XR_ENTER || action == PG_XR_ENTER_ARG) {
				uint64_t q = fdr_args(t, c, c->pos, r);

				if (r->nargs)
					r->kind = PG_XR_ENTER_ARG;
				if (!all)
					c->pos = q;
			}
			count(t, c, r);
			return 1;
		}
		if (left < MD_SIZE) {
			cut_record(t, c, MD_SIZE);
			break;
		}
		r->size = MD_SIZE;
		c->pos = p + MD_SIZE;
		switch (md_kind(b)) {
		case MD_NEW_BUFFER:
			if (c->body) {
				/* a second thread inside one buffer: not a layout any
				 * writer produces */
				pg_warn(t->diag, "%s: offset %llu: NewBuffer inside a buffer; rest of the buffer skipped",
					t->name, (unsigned long long)p);
				stop_damaged(t, c);
				return 0;
			}
			c->tid = rd32(t, p + 1);
			if (v < 3)
				c->pid = c->tid;
			r->kind = PG_XR_NEW_BUFFER;
			r->tid = c->tid;
			break;
		case MD_END_OF_BUFFER:
			if (v >= 2)
				pg_warn(t->diag, "%s: offset %llu: EndOfBuffer in a version %u trace (only version 1 has it); buffer ends here",
					t->name, (unsigned long long)p, v);
			c->done = c->eob = true;
			if (all) {
				r->kind = PG_XR_END_OF_BUFFER;
				return 1;
			}
			return 0;
		case MD_NEW_CPU:
			c->cpu = rd16(t, p + 1);
			c->tsc = rd64(t, p + 3);
			r->kind = PG_XR_NEW_CPU;
			r->cpu = c->cpu;
			r->tsc = c->tsc;
			break;
		case MD_TSC_WRAP:
			c->tsc = rd64(t, p + 1);
			r->kind = PG_XR_TSC_WRAP;
			r->tsc = c->tsc;
			break;
		case MD_WALLCLOCK:
			r->kind = PG_XR_WALLCLOCK;
			r->value = rd64(t, p + 1);
			r->usec = rd32(t, p + 9);
			break;
		case MD_CALL_ARG:
			r->kind = PG_XR_CALL_ARG;
			r->value = rd64(t, p + 1);
			if (!all || !c->after_entry) {
				t->st.orphan_args++;
				pg_warn(t->diag, "%s: offset %llu: CallArgument with no function entry before it; ignored",
					t->name, (unsigned long long)p);
			}
			break;
		case MD_EXTENTS:
			if (v >= 2 && p == c->start) {	/* heads the segment */
				if (!all)
					continue;
				r->kind = PG_XR_BUFFER_EXTENTS;
				r->value = rd64(t, p + 1);
				break;
			}
			pg_warn(t->diag, "%s: offset %llu: BufferExtents inside a buffer; rest of the buffer skipped",
				t->name, (unsigned long long)p);
			stop_damaged(t, c);
			return 0;
		case MD_PID:
			c->pid = rd32(t, p + 1);
			r->kind = PG_XR_PID;
			r->pid = c->pid;
			break;
		case MD_CUSTOM:
		case MD_TYPED: {
			bool typed = md_kind(b) == MD_TYPED;
			int32_t sz = (int32_t)rd32(t, p + 1);

			if (typed && v < 3) {
				pg_warn(t->diag, "%s: offset %llu: typed event in a version %u trace (they exist from version 3); rest of the buffer skipped",
					t->name, (unsigned long long)p, v);
				stop_damaged(t, c);
				return 0;
			}
			if (sz <= 0) {
				pg_warn(t->diag, "%s: offset %llu: %s event of size %d; rest of the buffer skipped",
					t->name, (unsigned long long)p, typed ? "typed" : "custom", sz);
				stop_damaged(t, c);
				return 0;
			}
			if ((uint64_t)sz > left - MD_SIZE) {
				c->pos = p;
				cut_record(t, c, MD_SIZE + (uint64_t)sz);
				return 0;
			}
			r->kind = typed ? PG_XR_TYPED : PG_XR_CUSTOM;
			if (v >= 5) {
				r->delta = (int32_t)rd32(t, p + 5);
				c->tsc += (uint64_t)r->delta;
				fill_common(c, r);
			} else {
				/* old writers: an absolute TSC that leaves the chain alone */
				fill_common(c, r);
				r->tsc = rd64(t, p + 5);
				if (!typed && v == 4)
					r->cpu = rd16(t, p + 13);
			}
			if (typed)
				r->event_type = rd16(t, p + (v >= 5 ? 9 : 13));
			r->payload = t->base + p + MD_SIZE;
			r->payload_size = (uint32_t)sz;
			r->size = MD_SIZE + (uint32_t)sz;
			c->pos = p + MD_SIZE + (uint64_t)sz;
			count(t, c, r);
			return 1;
		}
		default:
			pg_warn(t->diag, "%s: offset %llu: invalid metadata record kind %u; rest of the buffer skipped",
				t->name, (unsigned long long)p, md_kind(b));
			stop_damaged(t, c);
			return 0;
		}
		if (all)
			return 1;
	}
	c->done = true;
	return 0;
}

/* Next record of a basic-mode chunk. */
static int basic_next(pg_xray *t, struct cursor *c, struct pg_xr_record *r, bool all)
{
	unsigned v = t->hdr.version;

	while (c->pos + BASIC_REC <= c->end) {
		uint64_t p = c->pos, q;
		uint16_t type = rd16(t, p);
		uint8_t action;

		rec_clear(r, p);
		r->size = BASIC_REC;
		c->pos = p + BASIC_REC;
		if (type == 1) {
			if (!all || !c->after_entry) {
				/* the depth limit can drop an entry but keep its payload */
				t->st.orphan_args++;
				pg_warn(t->diag, "%s: offset %llu: argument record with no matching entry before it; ignored",
					t->name, (unsigned long long)p);
			}
			if (!all)
				continue;
			r->kind = PG_XR_CALL_ARG;
			r->func_id = rd32(t, p + 4);
			r->tid = rd32(t, p + 8);
			r->pid = v >= 3 ? rd32(t, p + 12) : r->tid;
			r->value = rd64(t, p + 16);
			return 1;
		}
		if (type != 0) {
			pg_warn(t->diag, "%s: offset %llu: unknown record type %u; record skipped",
				t->name, (unsigned long long)p, type);
			t->st.damaged_buffers++;
			continue;
		}
		action = t->base[p + 3];
		if (action > 3) {
			pg_warn(t->diag, "%s: offset %llu: invalid function record action %u; record skipped",
				t->name, (unsigned long long)p, action);
			t->st.damaged_buffers++;
			continue;
		}
		r->kind = (enum pg_xr_kind)action;
		r->cpu = t->base[p + 2];
		r->func_id = rd32(t, p + 4);
		r->tsc = rd64(t, p + 8);
		r->tid = rd32(t, p + 16);
		r->pid = v >= 3 ? rd32(t, p + 20) : r->tid;
		if (action == PG_XR_ENTER || action == PG_XR_ENTER_ARG) {
			for (q = c->pos; q + BASIC_REC <= c->end && rd16(t, q) == 1 &&
			     rd32(t, q + 4) == r->func_id && rd32(t, q + 8) == r->tid &&
			     (v < 3 || rd32(t, q + 12) == r->pid); q += BASIC_REC) {
				if (r->nargs < PG_XR_MAX_ARGS)
					r->args[r->nargs++] = rd64(t, q + 16);
			}
			if (r->nargs)
				r->kind = PG_XR_ENTER_ARG;
			if (!all)
				c->pos = q;
		}
		c->tsc = r->tsc;
		count(t, c, r);
		return 1;
	}
	c->done = true;
	return 0;
}

int pg_xr_seg_next(pg_xray *t, struct cursor *c, struct pg_xr_record *r, bool all)
{
	int ret = t->hdr.type == PG_XRAY_FDR ? fdr_next(t, c, r, all) : basic_next(t, c, r, all);

	if (ret > 0)
		c->after_entry = r->kind == PG_XR_ENTER || r->kind == PG_XR_ENTER_ARG ||
				 (r->kind == PG_XR_CALL_ARG && c->after_entry);
	return ret;
}

/* ----------------------------------------------------------------- open */

static int open_common(pg_xray *t, const char *name, unsigned flags, struct pg_diag *diag,
		       pg_xray **out)
{
	struct pg_xr_header *h = &t->hdr;
	int ret, order;

	t->flags = flags;
	t->diag = diag;
	t->name = strdup(name);
	if (!t->name) {
		ret = pg_err(diag, -ENOMEM, "%s: out of memory", name);
		goto fail;
	}
	if (t->size < HDR_SIZE) {
		ret = pg_err(diag, -EINVAL, "%s: offset 0: %zu bytes are too short for an XRay header (32 bytes)",
			     name, t->size);
		goto fail;
	}
	order = header_order(t->base, t->size);
	if (order < 0) {
		uint16_t v, ty;

		memcpy(&v, t->base, 2);
		memcpy(&ty, t->base + 2, 2);
		if (ty == PG_XRAY_FDR || ty == PG_XRAY_BASIC)
			ret = pg_err(diag, -EINVAL, "%s: offset 0: unsupported XRay %s version %u (FDR: 1-5, basic: 1-3)",
				     name, ty ? "FDR" : "basic", v);
		else
			ret = pg_err(diag, -EINVAL, "%s: offset 2: unknown XRay trace type %u (0 basic, 1 FDR)",
				     name, ty);
		goto fail;
	}
	t->be = order == 1;
	h->version = rd16(t, 0);
	h->type = rd16(t, 2);
	h->big_endian = t->be;
	/* only two bits mean anything; LLVM 14 basic mode leaves 0xff here */
	h->flags = rd32(t, 4) & 3;
	h->cycle_frequency = rd64(t, 8);
	h->buffer_size = h->type == PG_XRAY_FDR ? rd64(t, 16) : 0;
	ret = h->type == PG_XRAY_FDR ? index_fdr(t) : index_basic(t);
	if (ret >= 0)
		ret = pg_xr_assign_threads(t);
	/* the index touched every buffer's first page (and its neighbours) */
	pg_xr_release(t, 0, t->size);
	if (ret < 0)
		goto fail;
	*out = t;
	return 0;
fail:
	pg_xray_close(t);
	return ret;
}

int pg_xray_open_mem(const void *buf, size_t len, const char *name, unsigned flags,
		     struct pg_diag *diag, pg_xray **out)
{
	pg_xray *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return pg_err(diag, -ENOMEM, "%s: out of memory", name);
	t->base = buf;
	t->size = len;
	return open_common(t, name, flags, diag, out);
}

int pg_xray_open(const char *path, unsigned flags, struct pg_diag *diag, pg_xray **out)
{
	const uint8_t *map;
	size_t size;
	pg_xray *t;
	int ret;

	*out = NULL;
	if ((ret = pg_map_file(path, false, diag, &map, &size)) < 0)
		return ret;
	t = calloc(1, sizeof(*t));
	if (!t) {
		pg_unmap_file(map, size);
		return pg_err(diag, -ENOMEM, "%s: out of memory", path);
	}
	t->base = map;
	t->size = size;
	t->mapped = map != NULL;
	return open_common(t, path, flags, diag, out);
}

const struct pg_xr_header *pg_xray_header(const pg_xray *t)
{
	return &t->hdr;
}

void pg_xray_stats(const pg_xray *t, struct pg_xray_stats *st)
{
	pg_sized_out(st, &t->st, sizeof(t->st));
}

size_t pg_xray_buffer_count(const pg_xray *t)
{
	return t->nsegs;
}

void pg_xray_close(pg_xray *t)
{
	if (!t)
		return;
	if (t->mapped)
		pg_unmap_file(t->base, t->size);
	free(t->segs);
	free(t->threads);
	free(t->seg_sorted);
	free(t->heap);
	free(t->active);
	free(t->name);
	free(t);
}
