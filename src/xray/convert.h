/* SPDX-License-Identifier: MIT */
/* The state of an XRay conversion (pg_xray_convert), shared by its two
 * files: convert.c (the traces merged in time order, threads, call
 * stacks, the xray-time sampling grid, the side-band records and the
 * header) and events.c (the xray:* events, their formats and records).
 * Internal. */
#ifndef PG_XRAY_CONVERT_H
#define PG_XRAY_CONVERT_H

#include <errno.h>
#include <sys/stat.h>

#include <perfgraft/perfdata.h>
#include <perfgraft/xray.h>
#include "perfdata/synth.h"
#include "perfdata/writer.h"
#include "util/util.h"

/* Records are composed in cv->rec by the synthesizer (perfdata/synth.h)
 * or the events' own stores (events.c), back to back in a batch that goes
 * to the writer (perfdata/writer.h) BATCH bytes at a time, with a
 * FINISHED_ROUND after every ROUND_EVENTS records: one call and one copy
 * per batch, not per record (tens of millions of them).  Every record is
 * under 64 KiB (MAX_CHAIN, MAX_PAYLOAD, MAX_NAME) and cv->rec always has
 * RECBUF, twice that, free. */
#define MAX_CHAIN 1024
#define MAX_PAYLOAD 65000	/* a perf record is at most 64 KiB */
#define MAX_NAME 4000		/* longer names are cut: a record must fit 64 KiB */
#define RECBUF (1u << 17)
#define BATCH (1u << 14)
#define ROUND_EVENTS 65536

/* The attrs of the output, in order; attr i's id is i + 1. */
enum { ATTR_TIME, ATTR_ENTRY, ATTR_EXIT, ATTR_TAIL, ATTR_ARGS, ATTR_CUSTOM, ATTR_TYPED,
       ATTR_FUNC, NATTRS };

/* xray-time samples; the events: no PERIOD, a tracepoint's period is the
 * attr's sample_period, 1.  Every attr's sample_id trailer: ST_ID. */
#define ST_TIME (PG_SAMPLE_IDENTIFIER | PG_SAMPLE_IP | PG_SAMPLE_TID | PG_SAMPLE_TIME | \
		 PG_SAMPLE_CPU | PG_SAMPLE_PERIOD | PG_SAMPLE_CALLCHAIN)
#define ST_TP (PG_SAMPLE_IDENTIFIER | PG_SAMPLE_IP | PG_SAMPLE_TID | PG_SAMPLE_TIME | \
	       PG_SAMPLE_CPU | PG_SAMPLE_RAW)
#define ST_ID (PG_SAMPLE_TID | PG_SAMPLE_TIME | PG_SAMPLE_CPU | PG_SAMPLE_IDENTIFIER)

/* IDs whose xray:function event was written: a bitmap for the small ones
 * (every real binary), a hash set beyond, so a hostile 32-bit ID costs a
 * slot, not a 512 MB bitmap. */
#define SEEN_BITS (1u << 20)
struct seen {
	uint64_t *bits;
	struct pg_u64map big;	/* the IDs beyond, no value */
};

struct frame {
	uint32_t id;
	uint64_t tsc;
};

struct thread {
	uint32_t trace, pid, tid;
	uint16_t cpu;
	struct frame *stack;
	size_t depth, cap;
	/* The run (the stack unchanged since the record at run_off): grid
	 * points from `cover` on are not in a sample yet; the next sample is
	 * due at next_sample (UINT64_MAX while the stack is empty) and takes
	 * every point from cover to it; run_n samples were written. */
	uint64_t next_sample;
	uint64_t cover;
	uint64_t run_n;
	uint64_t run_off;
	size_t hpos;		/* position in the sample heap */
};

struct trace_in {
	pg_xray *t;
	const char *path;
	uint64_t freq;
	const struct pg_xr_record *la;	/* its next record (pg_xr_next_ref) */
	uint64_t la_ns;
	bool have;
};

/* One conversion: its options and counts, the inputs, the threads and
 * their sample heap, and the output. */
struct conv {
	/* records until the next FINISHED_ROUND; apart from blen, so that
	 * the compiler does not pair their updates into one vector whose
	 * load then waits for two separate stores */
	uint64_t round_left;
	const struct pg_xray_opts *o;
	struct pg_diag *diag;
	struct pg_xray_convert_stats *st;
	struct pg_xray_stats *trace;	/* summed over the traces */
	pg_pdw *w;
	pg_xray_map *map;
	const struct pg_xray_binary *bin;
	uint64_t base;		/* load address added to link-time addresses */
	uint64_t period;	/* ns */
	uint64_t max_gap;	/* ns */
	uint64_t thin_after;	/* samples of a run on the full grid; UINT64_MAX: all */
	uint64_t last_in;	/* time of the previous record, ns */
	bool have_last_in;
	bool events, samples;
	char comm[16];
	struct stat bin_st;

	struct trace_in *in;
	size_t nin;

	struct thread *threads;
	size_t nthreads, tcap;
	size_t last_th;		/* the thread get_thread() found last */
	uint32_t *slots;	/* hash of threads: index + 1 */
	size_t nslots;
	uint32_t *heap;		/* threads by next_sample */
	size_t nheap, hcap;

	uint32_t *pids;		/* processes given an MMAP2 */
	size_t npids, pcap;

	uint8_t *batch;		/* BATCH + RECBUF bytes: records not written yet */
	size_t blen;
	struct pg_rec rec;	/* the record being composed: batch + blen */
	/* by function ID below nfc: its address (func_addr) and map entry */
	struct fslot { uint64_t addr; const struct pg_xray_func *f; } *fc;
	size_t nfc;
	size_t raw_at;		/* RAW of the tracepoint sample in rec */
	uint64_t last_out;	/* output time never goes back */
	struct seen seen;
	bool warned_depth, warned_freq, warned_thin;
};

/* Hands the batch to the writer; cv->rec starts at its beginning again. */
int pg_xray_flush_batch(struct conv *cv);

/* Takes the record composed in cv->rec (its header's size set) into the
 * batch, and a FINISHED_ROUND after every ROUND_EVENTS of them. */
static inline int rec_commit(struct conv *cv, size_t len)
{
	size_t blen = cv->blen + len;

	if (!--cv->round_left) {
		struct pg_rec r = { .p = cv->batch + blen, .cap = 8,
				    .big_endian = cv->rec.big_endian };

		pg_synth_round(&r);
		pg_rec_end(&r);
		blen += 8;
		cv->round_left = ROUND_EVENTS;
	}
	cv->blen = blen;
	if (blen >= BATCH)
		return pg_xray_flush_batch(cv);
	cv->rec.p = cv->batch + blen;	/* every composer starts at len 0 */
	return 0;
}

/* Ends the record in cv->rec and takes it. */
static inline int rec_end(struct conv *cv)
{
	if (pg_rec_end(&cv->rec) < 0)
		return pg_err(cv->diag, -EINVAL, "internal: record of %zu bytes", cv->rec.len);
	return rec_commit(cv, cv->rec.len);
}

static inline struct pg_synth_sample sample_of(const struct thread *th, uint64_t time, uint64_t id)
{
	return (struct pg_synth_sample){ .id = id, .pid = th->pid, .tid = th->tid,
					 .time = time, .cpu = th->cpu };
}

/* The map's entry for id, NULL when unknown (or no map). */
static inline const struct pg_xray_func *func_of(const struct conv *cv, uint32_t id)
{
	if (id < cv->nfc)
		return cv->fc[id].f;
	return cv->map ? pg_xray_map_func(cv->map, id) : NULL;
}

static inline uint64_t func_addr(const struct conv *cv, uint32_t id)
{
	const struct pg_xray_func *f;

	if (id < cv->nfc)	/* every event's lookup: one load */
		return cv->fc[id].addr;
	if ((f = cv->map ? pg_xray_map_func(cv->map, id) : NULL))
		return cv->base + f->addr;
	/* no binary, or an ID it does not know: a stable made-up address */
	return 0x10000000ull + (uint64_t)id * 16;
}

#endif
