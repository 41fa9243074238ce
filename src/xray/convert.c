/* SPDX-License-Identifier: MIT */
/* XRay traces -> perf.data.
 *
 * The traces are read in time order (threads merged), per-thread call
 * stacks are rebuilt with LLVM's recovery rules, and two things come out:
 *  - a sample stream, "xray-time": every thread whose stack is not empty
 *    is sampled on a fixed grid of trace time, each sample carrying the
 *    stack as a user call chain of addresses inside the binary and the
 *    period in ns, so perf report's self and children columns are
 *    exclusive and inclusive time.  A stack that stays the same for long
 *    is thinned: after thin_after samples its spacing doubles every
 *    thin_after samples and each sample's period is the grid time since
 *    the one before, so the period sums (what perf report shows) are those
 *    of the full grid while a run of L grid points costs about
 *    thin_after * log2(L / thin_after) samples, not L;
 *  - the events themselves as tracepoint samples (system "xray"), with
 *    their formats in the file's tracing data so perf script and
 *    libtraceevent print named fields (events.c: their formats and
 *    records; the state both files share is in xray/convert.h).
 * Output is written in time order with periodic FINISHED_ROUNDs; memory is
 * O(threads x depth + functions + trace buffers). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <perfgraft/perfdata.h>
#include <perfgraft/xray.h>
#include "perfdata/synth.h"
#include "perfdata/writer.h"
#include "util/util.h"
#include "xray/convert.h"
#include "xray/events.h"
#include "xray/trace.h"

#define PIE_BASE 0x555555554000ull

/* the attrs' names, for EVENT_DESC */
static const char *const attr_names[NATTRS] = {
	"xray-time", "xray:function_entry", "xray:function_exit", "xray:tail_exit",
	"xray:call_args", "xray:custom_event", "xray:typed_event", "xray:function",
};

/* Ticks to ns, rounded to the nearest (llvm-xray account divides in
 * doubles: truncating would lose up to 1 ns on every latency), saturating
 * at UINT64_MAX (ticks at 1 Hz past 584 years).  A cycle frequency of 0
 * (unknown) counts ticks as seconds, as llvm-xray account does: it prints
 * the raw tick counts as its seconds when the header's frequency is 0. */
static uint64_t to_ns(uint64_t tsc, uint64_t freq)
{
	unsigned __int128 v;

	if (freq == 1000000000ull)
		return tsc;
	if (freq == 0)
		freq = 1;
	v = ((unsigned __int128)tsc * 1000000000u + freq / 2) / freq;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

static uint64_t out_time(struct conv *cv, uint64_t ns)
{
	if (ns < cv->last_out)
		ns = cv->last_out;
	cv->last_out = ns;
	return ns;
}

/* ----------------------------------------------------- xray-time samples */

/* A sample standing for `points` grid points of th's current stack. */
static int emit_sample(struct conv *cv, struct thread *th, uint64_t time, uint64_t points)
{
	size_t n = th->depth < MAX_CHAIN - 1 ? th->depth : MAX_CHAIN - 1;
	struct pg_synth_sample smp;
	uint8_t *p;

	if (th->depth >= MAX_CHAIN && !cv->warned_depth) {
		pg_warn(cv->diag, "call stacks deeper than %d frames are cut to their innermost %d in samples",
			MAX_CHAIN - 1, MAX_CHAIN - 1);
		cv->warned_depth = true;
	}
	smp = sample_of(th, time, ATTR_TIME + 1);
	smp.ip = func_addr(cv, th->stack[th->depth - 1].id);
	/* one point (the full grid, the common case) needs no division */
	smp.period = points == 1 ? cv->period
		     : points <= UINT64_MAX / cv->period ? points * cv->period : UINT64_MAX;
	pg_synth_sample_start(&cv->rec, ST_TIME, PG_PERF_RECORD_MISC_USER, &smp);
	if ((p = pg_synth_chain(&cv->rec, n + 1))) {
		bool be = cv->rec.big_endian;

		p = pg_rec_st64(p, PG_PERF_CONTEXT_USER, be);
		for (size_t i = 0; i < n; i++) {
			/* callers: one byte in, so that a return-address
			 * adjustment (ip - 1) still lands in the function */
			uint64_t a = func_addr(cv, th->stack[th->depth - 1 - i].id);

			p = pg_rec_st64(p, i ? a + 1 : a, be);
		}
	}
	cv->st->samples++;
	cv->st->grid_samples += points;
	return rec_end(cv);
}

/* ---------------------------------------------------------- sample heap */

static bool h_less(const struct conv *cv, uint32_t a, uint32_t b)
{
	uint64_t x = cv->threads[a].next_sample, y = cv->threads[b].next_sample;

	return x != y ? x < y : a < b;
}

static void h_swap(struct conv *cv, size_t i, size_t j)
{
	uint32_t t = cv->heap[i];

	cv->heap[i] = cv->heap[j];
	cv->heap[j] = t;
	cv->threads[cv->heap[i]].hpos = i;
	cv->threads[cv->heap[j]].hpos = j;
}

static void h_fix(struct conv *cv, size_t i)
{
	while (i > 0 && h_less(cv, cv->heap[i], cv->heap[(i - 1) / 2])) {
		h_swap(cv, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < cv->nheap && h_less(cv, cv->heap[l], cv->heap[m]))
			m = l;
		if (l + 1 < cv->nheap && h_less(cv, cv->heap[l + 1], cv->heap[m]))
			m = l + 1;
		if (m == i)
			return;
		h_swap(cv, i, m);
		i = m;
	}
}

/* Where th's next sample falls: on the full grid for the first
 * thin_after samples of the run, then 2, 4, 8... points apart, doubling
 * every thin_after samples.  The grid ends where time does (a corrupt
 * timestamp near 2^64): UINT64_MAX. */
static uint64_t next_point(const struct conv *cv, const struct thread *th)
{
	uint64_t shift = th->run_n < cv->thin_after ? 0 : th->run_n / cv->thin_after;
	uint64_t skip;

	if (th->cover == UINT64_MAX || shift >= 63)
		return UINT64_MAX;
	if (!shift)		/* the full grid: no division on the hot path */
		return th->cover;
	skip = (1ull << shift) - 1;
	if (skip > (UINT64_MAX - 1 - th->cover) / cv->period)
		return UINT64_MAX;
	return th->cover + skip * cv->period;
}

static void run_thinned(struct conv *cv, const struct thread *th)
{
	cv->st->thinned_runs++;
	if (cv->warned_thin)
		return;
	cv->warned_thin = true;
	pg_warn(cv->diag, "%s: offset %llu: tid %u: the call stack as this record set it lasted over %llu samples (%.6f s): its later samples are spaced wider, each carrying the time since the one before as its period, so perf report's times stay exact (--thin-after N sets when thinning starts, 0 turns it off)",
		cv->in[th->trace].path, (unsigned long long)th->run_off, th->tid,
		(unsigned long long)cv->thin_after, (double)cv->thin_after * cv->period / 1e9);
}

/* Writes th's sample at grid point t, taking the points from th->cover on. */
static int take_sample(struct conv *cv, struct thread *th, uint64_t t)
{
	uint64_t points = t == th->cover ? 1 : (t - th->cover) / cv->period + 1;
	int ret = emit_sample(cv, th, out_time(cv, t), points);

	if (ret < 0)
		return ret;
	th->cover = t < UINT64_MAX - cv->period ? t + cv->period : UINT64_MAX;
	if (++th->run_n == cv->thin_after)
		run_thinned(cv, th);
	th->next_sample = next_point(cv, th);
	return 0;
}

/* Samples of every thread due before time `now` (ns). */
static int samples_until(struct conv *cv, uint64_t now)
{
	int ret;

	while (cv->nheap) {
		struct thread *th = &cv->threads[cv->heap[0]];
		uint64_t t = th->next_sample;

		if (t >= now || t == UINT64_MAX)
			return 0;
		if ((ret = take_sample(cv, th, t)) < 0)
			return ret;
		h_fix(cv, 0);
	}
	return 0;
}

/* The grid points of th's run before `until` that no sample took yet (a
 * thinned run ends, or a gap begins, between two of its samples): one more
 * sample at the last of them takes them all.  Nothing on the full grid. */
static int flush_run(struct conv *cv, struct thread *th, uint64_t until)
{
	uint64_t n;

	/* cover is UINT64_MAX past the end of time (a corrupt timestamp) */
	if (!cv->samples || !th->depth || th->cover >= until)
		return 0;
	n = (until - 1 - th->cover) / cv->period;	/* points after the first */
	return take_sample(cv, th, th->cover + n * cv->period);
}

/* The first grid point at or after now; UINT64_MAX past the last one. */
static uint64_t grid_at(const struct conv *cv, uint64_t now)
{
	uint64_t g = now / cv->period * cv->period;

	if (g == now)
		return now;
	return g < UINT64_MAX - cv->period ? g + cv->period : UINT64_MAX;
}

/* th's stack was changed by the record at `off` (time now): a new run,
 * sampled from the first grid point at or after now. */
static void new_run(struct conv *cv, struct thread *th, uint64_t now, uint64_t off)
{
	uint64_t was = th->next_sample;

	if (!cv->samples)
		return;
	th->run_n = 0;
	th->run_off = off;
	if (!th->depth)
		th->cover = UINT64_MAX;
	else if (th->cover == UINT64_MAX || th->cover < now || th->cover - now >= cv->period)
		th->cover = grid_at(cv, now);
	/* else the old run's samples up to now left cover there already:
	 * no division for every call of a busy thread */
	th->next_sample = th->cover;
	if (th->next_sample != was)
		h_fix(cv, th->hpos);
}

/* Whether any thread is inside a call: its time is the call's, however
 * long nobody records anything (a leaf computing for minutes writes no
 * record until it returns), so it is sampled, never a gap.  A corrupt
 * timestamp far ahead costs at most thin_after samples per doubling of the
 * time it skips. */
static bool any_call_open(const struct conv *cv)
{
	for (size_t i = 0; i < cv->nthreads; i++)
		if (cv->threads[i].depth)
			return true;
	return false;
}

/* Nothing happened for longer than max_gap and no call was open: the
 * program was idle or stopped (or a timestamp is corrupt).  No stack is
 * open, so there is nothing to sample: the stretch is only reported. */
static void idle_gap(struct conv *cv, uint32_t ti, const struct pg_xr_record *r, uint64_t now)
{
	cv->st->gaps++;
	pg_warn(cv->diag, "%s: offset %llu: no thread recorded anything and no call was open for %.3f s before this record (tid %u) (--max-gap)",
		cv->in[ti].path, (unsigned long long)r->offset, (now - cv->last_in) / 1e9, r->tid);
}

/* -------------------------------------------------------------- threads */

int pg_xray_flush_batch(struct conv *cv)
{
	int ret = cv->blen ? pg_pdw_write(cv->w, cv->batch, cv->blen, NULL, 0) : 0;

	cv->blen = 0;
	cv->rec.p = cv->batch;
	cv->rec.len = 0;
	return ret;
}

static int mmap_binary(struct conv *cv, struct thread *th, uint64_t time)
{
	const struct pg_xray_binary *b = cv->bin;
	uint64_t start = b->text_vaddr & ~0xfffull, end = b->text_vaddr + b->text_size;
	struct pg_pd_attr a = { .sample_type = ST_ID, .sample_id_all = true };
	struct pg_pdw_mmap2 m = {
		.pid = th->pid, .tid = th->pid,
		.start = cv->base + start,
		.len = pg_align(end, 4096) - start,
		.pgoff = b->text_offset & ~0xfffull,
		.maj = major(cv->bin_st.st_dev), .min = minor(cv->bin_st.st_dev),
		.ino = cv->bin_st.st_ino,
		.prot = 5,	/* PROT_READ | PROT_EXEC */
		.flags = 2,	/* MAP_PRIVATE */
		.filename = b->path,
		.time = time, .id = ATTR_TIME + 1, .cpu = th->cpu,
	};

	int ret = pg_xray_flush_batch(cv);	/* the records before it go first */

	return ret < 0 ? ret : pg_pdw_mmap2(cv->w, &a, &m);
}

static int new_process(struct conv *cv, struct thread *th, uint64_t time)
{
	for (size_t i = 0; i < cv->npids; i++)
		if (cv->pids[i] == th->pid)
			return 0;
	if (!pg_grow((void **)&cv->pids, &cv->pcap, cv->npids + 1, sizeof(*cv->pids)))
		return pg_err(cv->diag, -ENOMEM, "out of memory");
	cv->pids[cv->npids++] = th->pid;
	cv->st->processes++;
	return cv->bin ? mmap_binary(cv, th, time) : 0;
}

static int emit_comm(struct conv *cv, struct thread *th, uint64_t time)
{
	struct pg_synth_sample sid = sample_of(th, time, ATTR_TIME + 1);

	pg_synth_comm(&cv->rec, th->pid, th->tid, cv->comm, 0, ST_ID, &sid);
	return rec_end(cv);
}

static size_t thread_slot(uint32_t trace, uint32_t pid, uint32_t tid, size_t nslots)
{
	uint64_t k = ((uint64_t)trace * 0x100000001b3ull) ^ ((uint64_t)pid << 32 | tid);

	return (size_t)(k * 0x9E3779B97F4A7C15ull >> 17) & (nslots - 1);
}

static int get_thread(struct conv *cv, uint32_t trace, const struct pg_xr_record *r,
		      struct thread **out, uint64_t time)
{
	size_t h;
	struct thread *th;
	int ret;

	/* the thread of the record before, most of the time: no hashing */
	if (cv->last_th < cv->nthreads) {
		th = &cv->threads[cv->last_th];
		if (th->tid == r->tid && th->pid == r->pid && th->trace == trace) {
			*out = th;
			return 0;
		}
	}
	if (cv->nthreads * 2 >= cv->nslots) {	/* grow and rehash */
		size_t ns = cv->nslots ? cv->nslots * 2 : 64;
		uint32_t *s = calloc(ns, sizeof(*s));

		if (!s)
			return pg_err(cv->diag, -ENOMEM, "out of memory");
		for (size_t i = 0; i < cv->nthreads; i++) {
			const struct thread *t = &cv->threads[i];

			h = thread_slot(t->trace, t->pid, t->tid, ns);
			while (s[h])
				h = (h + 1) & (ns - 1);
			s[h] = (uint32_t)i + 1;
		}
		free(cv->slots);
		cv->slots = s;
		cv->nslots = ns;
	}
	h = thread_slot(trace, r->pid, r->tid, cv->nslots);
	while (cv->slots[h]) {
		th = &cv->threads[cv->slots[h] - 1];
		if (th->trace == trace && th->pid == r->pid && th->tid == r->tid) {
			cv->last_th = cv->slots[h] - 1;
			*out = th;
			return 0;
		}
		h = (h + 1) & (cv->nslots - 1);
	}
	if (!pg_grow((void **)&cv->threads, &cv->tcap, cv->nthreads + 1, sizeof(*cv->threads)) ||
	    !pg_grow((void **)&cv->heap, &cv->hcap, cv->nthreads + 1, sizeof(*cv->heap)))
		return pg_err(cv->diag, -ENOMEM, "out of memory");
	th = &cv->threads[cv->nthreads];
	memset(th, 0, sizeof(*th));
	th->trace = trace;
	th->pid = r->pid;
	th->tid = r->tid;
	th->cpu = r->cpu;
	th->next_sample = UINT64_MAX;
	th->cover = UINT64_MAX;
	cv->slots[h] = (uint32_t)++cv->nthreads;
	th->hpos = cv->nheap;
	cv->heap[cv->nheap++] = (uint32_t)(cv->nthreads - 1);
	cv->st->threads++;
	cv->last_th = cv->nthreads - 1;
	*out = th;
	if ((ret = new_process(cv, th, time)) < 0 || (ret = emit_comm(cv, th, time)) < 0)
		return ret;
	return 0;
}

/* ---------------------------------------------------------------- stacks */

static struct xr_dur dur(uint64_t a, uint64_t b, uint64_t freq)
{
	uint64_t ticks = a > b ? a - b : b - a;

	return (struct xr_dur){ .ns = to_ns(ticks, freq), .ticks = ticks, .freq = freq };
}

static int push(struct conv *cv, struct thread *th, const struct pg_xr_record *r)
{
	if (!pg_grow((void **)&th->stack, &th->cap, th->depth + 1, sizeof(*th->stack)))
		return pg_err(cv->diag, -ENOMEM, "out of memory (call stack of %zu frames)", th->depth);
	th->stack[th->depth].id = r->func_id;
	th->stack[th->depth].tsc = r->tsc;
	th->depth++;
	if (th->depth > cv->st->max_depth)
		cv->st->max_depth = th->depth;
	return 0;
}

/* Closes the frames above `keep` at tsc, as exits of their own whose
 * records were lost (flags says why). */
static int close_frames(struct conv *cv, struct thread *th, size_t keep, uint64_t tsc,
			uint64_t freq, uint32_t flags, uint64_t time)
{
	int ret = 0;

	while (th->depth > keep) {
		const struct frame *f = &th->stack[th->depth - 1];

		if (cv->events)
			ret = pg_xray_ev_exit(cv, th, ATTR_EXIT, f->id, dur(tsc, f->tsc, freq),
					      th->depth - 1, flags, time);
		th->depth--;
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Does r change th's stack (and so end its sampling run)? */
/* How deep the frame an exit of func_id closes is (its index + 1), 0 when
 * no open frame is func_id's (the trace began inside that call). */
static size_t exit_depth(const struct thread *th, uint32_t func_id)
{
	size_t k = th->depth;

	while (k > 0 && th->stack[k - 1].id != func_id)
		k--;
	return k;
}

/* Whether r changes th's stack; k: exit_depth() of an exit record. */
static bool changes_stack(const struct thread *th, const struct pg_xr_record *r, size_t k)
{
	switch (r->kind) {
	case PG_XR_ENTER:
	case PG_XR_ENTER_ARG:
		return true;
	case PG_XR_EXIT:
	case PG_XR_TAIL_EXIT:
		return k > 0;	/* an exit without entry changes nothing */
	case PG_XR_THREAD_END:
		return th->depth > 0;
	default:
		return false;
	}
}

static int handle(struct conv *cv, uint32_t ti, const struct pg_xr_record *r, uint64_t ns)
{
	uint64_t freq = cv->in[ti].freq, time;
	struct thread *th = NULL;
	bool changes;
	size_t k = 0;
	int ret;

	/* any_call_open() only past max_gap: no scan on the hot path */
	if (cv->have_last_in && ns > cv->last_in && ns - cv->last_in > cv->max_gap &&
	    !any_call_open(cv))
		idle_gap(cv, ti, r, ns);
	cv->last_in = ns;
	cv->have_last_in = true;
	if ((ret = samples_until(cv, ns)) < 0)
		return ret;
	time = ns < cv->last_out ? cv->last_out : ns;
	if ((ret = get_thread(cv, ti, r, &th, time)) < 0)
		return ret;
	/* the old stack's last sample, if thinning left points owed, before
	 * this record's events */
	if (r->kind == PG_XR_EXIT || r->kind == PG_XR_TAIL_EXIT)
		k = exit_depth(th, r->func_id);
	changes = changes_stack(th, r, k);
	if (changes && (ret = flush_run(cv, th, ns)) < 0)
		return ret;
	time = out_time(cv, ns);
	if (r->kind != PG_XR_THREAD_END)
		th->cpu = r->cpu;
	if (cv->map && r->kind <= PG_XR_ENTER_ARG && !func_of(cv, r->func_id))
		cv->st->unknown_ids++;
	switch (r->kind) {
	case PG_XR_ENTER:
	case PG_XR_ENTER_ARG:
		if (cv->events && (ret = pg_xray_ev_entry(cv, th, r, time)) < 0)
			return ret;
		for (uint32_t i = 0; cv->events && i < r->nargs; i++)
			if ((ret = pg_xray_ev_arg(cv, th, r->func_id, i, r->args[i], time)) < 0)
				return ret;
		if ((ret = push(cv, th, r)) < 0)
			return ret;
		break;
	case PG_XR_EXIT:
	case PG_XR_TAIL_EXIT: {
		int attr = r->kind == PG_XR_TAIL_EXIT ? ATTR_TAIL : ATTR_EXIT;

		if (k == 0) {
			/* the trace began inside this call */
			cv->st->exits_without_entry++;
			if (cv->events)
				ret = pg_xray_ev_exit(cv, th, attr, r->func_id,
						      (struct xr_dur){ .freq = freq }, th->depth,
						      PG_XRAY_EXIT_NO_ENTRY, time);
			if (ret < 0)
				return ret;
			break;
		}
		cv->st->inferred_exits += th->depth - k;
		if ((ret = close_frames(cv, th, k, r->tsc, freq, PG_XRAY_EXIT_INFERRED, time)) < 0)
			return ret;
		if (cv->events)
			ret = pg_xray_ev_exit(cv, th, attr, r->func_id,
					      dur(r->tsc, th->stack[k - 1].tsc, freq), k - 1, 0, time);
		th->depth = k - 1;
		if (ret < 0)
			return ret;
		break;
	}
	case PG_XR_CUSTOM:
	case PG_XR_TYPED:
		if (cv->events && (ret = pg_xray_ev_payload(cv, th, r, time)) < 0)
			return ret;
		break;
	case PG_XR_THREAD_END:
		/* entries never exited: still running when the trace stopped */
		cv->st->unfinished += th->depth;
		if ((ret = close_frames(cv, th, 0, r->tsc, freq, PG_XRAY_EXIT_UNFINISHED, time)) < 0)
			return ret;
		break;
	default:
		break;
	}
	if (changes)
		new_run(cv, th, ns, r->offset);
	return 0;
}

/* ------------------------------------------------------------ the header */

static const char *arch_name(uint16_t m)
{
	switch (m) {
	case 3: return "x86";
	case 62: return "x86_64";
	case 40: return "arm";
	case 183: return "arm64";
	case 8: return "mips";
	case 21: return "powerpc";
	case 243: return "riscv";
	default: return "unknown";
	}
}

static int write_header(struct conv *cv)
{
	static const uint64_t ids[NATTRS] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct pg_synth_attr attrs[NATTRS];
	struct pg_buf b = { 0 };
	size_t n = cv->events ? NATTRS : 1;
	int ret = 0;
	const char *arch = arch_name(cv->bin ? cv->bin->e_machine : 62);
	/* the strings perf data convert and perf report --header expect */
	const struct { unsigned bit; const char *s; } strs[] = {
		{ PG_FEAT_HOSTNAME, "unknown (converted by perfgraft xray)" },
		{ PG_FEAT_OSRELEASE, "unknown" }, { PG_FEAT_VERSION, "perfgraft " PG_VERSION },
		{ PG_FEAT_ARCH, arch }, { PG_FEAT_CPUDESC, "unknown" }, { PG_FEAT_CPUID, "unknown" },
	};

	for (size_t i = 0; i < n; i++) {
		uint64_t flags = PG_ATTR_EXCLUDE_KERNEL | PG_ATTR_EXCLUDE_HV | PG_ATTR_SAMPLE_ID_ALL;

		if (i == ATTR_TIME)	/* not a tracepoint: the side-band records */
			flags |= PG_ATTR_MMAP | PG_ATTR_COMM | PG_ATTR_MMAP2;
		attrs[i] = (struct pg_synth_attr){
			.type = i == ATTR_TIME ? PG_PERF_TYPE_SOFTWARE : PG_PERF_TYPE_TRACEPOINT,
			.config = i == ATTR_TIME ? PG_PERF_COUNT_SW_CPU_CLOCK : pg_xray_tp_ids[i],
			.period = i == ATTR_TIME ? cv->period : 1,
			.sample_type = i == ATTR_TIME ? ST_TIME : ST_TP,
			.flags = flags, .name = attr_names[i], .ids = &ids[i], .nr_ids = 1,
		};
	}
	if ((ret = pg_pdw_add_attrs(cv->w, attrs, n)) < 0)
		return ret;
	for (size_t i = 0; !ret && i < sizeof(strs) / sizeof(strs[0]); i++)
		ret = pg_pdw_add_str_feature(cv->w, strs[i].bit, strs[i].s);
	if (!ret)	/* the names */
		ret = pg_pdw_add_event_desc(cv->w, attrs, n);
	if (!ret && cv->events) {	/* last: pipe mode sends it after the features */
		pg_xray_tracing_data(&b);
		ret = b.oom ? pg_err(cv->diag, -ENOMEM, "out of memory")
			    : pg_pdw_add_feature(cv->w, PG_FEAT_TRACING_DATA, b.p, b.len);
	}
	pg_buf_free(&b);
	if (!ret && cv->bin && cv->bin->build_id_size)
		ret = pg_pdw_build_id(cv->w, -1, PG_PERF_RECORD_MISC_USER, cv->bin->build_id,
				      cv->bin->build_id_size, cv->bin->path);
	return ret;
}

/* ------------------------------------------------------------------ main */

static int next_in(struct conv *cv, size_t i)
{
	struct trace_in *in = &cv->in[i];

	/* a trace that shrank reads as zeros from there: stop, do not
	 * convert the rest into an output the commit will refuse */
	if (pg_inputs_changed())
		return pg_inputs_check(cv->diag);
	in->la = pg_xr_next_ref(in->t);
	in->have = in->la != NULL;
	if (in->have)
		in->la_ns = to_ns(in->la->tsc, in->freq);
	return 0;
}

static int run(struct conv *cv)
{
	const struct pg_xray_opts *o = cv->o;
	uint64_t nrec = 0;
	int ret;

	for (size_t i = 0; i < o->ntraces; i++) {
		struct trace_in *in = &cv->in[i];

		in->path = o->traces[i];
		if ((ret = pg_xray_open(in->path, 0, cv->diag, &in->t)) < 0)
			return ret;
		cv->nin++;
		in->freq = pg_xray_header(in->t)->cycle_frequency;
		if (!in->freq && !cv->warned_freq) {
			pg_warn(cv->diag, "%s: cycle frequency 0 in the header: the tick rate is unknown; ticks are taken as seconds, as llvm-xray account does",
				in->path);
			cv->warned_freq = true;
		}
		if ((ret = next_in(cv, i)) < 0)
			return ret;
	}
	if ((ret = write_header(cv)) < 0)
		return ret;
	for (;;) {
		size_t best = SIZE_MAX;

		for (size_t i = 0; i < cv->nin; i++)
			if (cv->in[i].have && (best == SIZE_MAX || cv->in[i].la_ns < cv->in[best].la_ns))
				best = i;
		if (best == SIZE_MAX)
			break;
		/* the first record's time, even when it is 0 (handle() sets
		 * have_last_in) */
		if (!cv->have_last_in)
			cv->st->first_ns = cv->in[best].la_ns;
		cv->st->last_ns = cv->in[best].la_ns;
		if ((ret = handle(cv, (uint32_t)best, cv->in[best].la, cv->in[best].la_ns)) < 0 ||
		    (ret = next_in(cv, best)) < 0)
			return ret;
		if (o->progress && !(++nrec & 0xffff)) {
			uint64_t begun = 0, all = 0;

			for (size_t i = 0; i < cv->nin; i++) {
				struct pg_xray_stats s = { .sz = sizeof(s) };

				pg_xray_stats(cv->in[i].t, &s);
				begun += s.buffers;
				all += pg_xray_buffer_count(cv->in[i].t);
			}
			o->progress(o->progress_ctx, all ? (double)begun / all : 0);
		}
	}
	/* every stack was closed by its THREAD_END: nothing left to sample */
	for (size_t i = 0; i < cv->nin; i++) {
		struct pg_xray_stats s = { .sz = sizeof(s) };

		pg_xray_stats(cv->in[i].t, &s);
		cv->trace->buffers += s.buffers;
		cv->trace->records += s.records;
		cv->trace->enters += s.enters;
		cv->trace->exits += s.exits;
		cv->trace->tail_exits += s.tail_exits;
		cv->trace->args += s.args;
		cv->trace->custom += s.custom;
		cv->trace->typed += s.typed;
		cv->trace->threads += s.threads;
		cv->trace->damaged_buffers += s.damaged_buffers;
		cv->trace->truncated_bytes += s.truncated_bytes;
		cv->trace->orphan_args += s.orphan_args;
	}
	cv->round_left = 1;	/* the last FINISHED_ROUND */
	if ((ret = rec_commit(cv, 0)) < 0)
		return ret;
	return pg_xray_flush_batch(cv);
}

/* Every ID of a map (up to SEEN_BITS) gets its address and entry in
 * cv->fc: one load per event instead of a lookup (a binary search in a
 * YAML map) for each of the three or four times an event names it. */
static int func_cache(struct conv *cv)
{
	size_t n = cv->map ? pg_xray_map_count(cv->map) : 0;

	if (!n || n >= SEEN_BITS)
		return 0;
	if (!(cv->fc = calloc(n + 1, sizeof(*cv->fc))))
		return pg_err(cv->diag, -ENOMEM, "out of memory");
	for (size_t id = 0; id <= n; id++) {
		const struct pg_xray_func *f = pg_xray_map_func(cv->map, (uint32_t)id);

		cv->fc[id].f = f;
		cv->fc[id].addr = f ? cv->base + f->addr : 0x10000000ull + (uint64_t)id * 16;
	}
	cv->nfc = n + 1;
	return 0;
}

/* pg_xray_convert() on the library's own copies of the options and the
 * counts */
static int convert(const struct pg_xray_opts *o, struct pg_diag *diag,
		   struct pg_xray_convert_stats *st, struct pg_xray_stats *trace)
{
	struct conv cv = { .round_left = ROUND_EVENTS, .o = o, .diag = diag, .st = st, .trace = trace,
			   .seen.big = PG_U64MAP_INIT(0) };
	struct pg_pdw_opts wo = { .sz = sizeof(wo), .pipe = o->pipe,
				  .compress_level = o->compress_level };
	uint64_t freq = o->frequency ? o->frequency : PG_XRAY_DEFAULT_FREQUENCY;
	int ret;

	if (!o->ntraces)
		return pg_err(diag, -EINVAL, "no trace to convert");
	if (freq > 1000000000ull)
		return pg_err(diag, -EINVAL, "sampling frequency %llu Hz is above 1 GHz: the period would be under 1 ns",
			      (unsigned long long)freq);
	if (o->no_events && o->no_samples)
		return pg_err(diag, -EINVAL, "nothing to write: both samples and events are off");
	cv.period = 1000000000ull / freq;
	cv.max_gap = o->max_gap_ns ? o->max_gap_ns : PG_XRAY_DEFAULT_MAX_GAP_NS;
	cv.thin_after = o->thin_after ? o->thin_after : PG_XRAY_DEFAULT_THIN_AFTER;
	cv.events = !o->no_events;
	cv.samples = !o->no_samples;
	cv.in = calloc(o->ntraces, sizeof(*cv.in));
	cv.batch = malloc(BATCH + RECBUF);
	cv.rec = (struct pg_rec){ .p = cv.batch, .cap = RECBUF, .big_endian = wo.big_endian };
	if (!cv.in || !cv.batch) {
		free(cv.in);
		free(cv.batch);
		return pg_err(diag, -ENOMEM, "out of memory");
	}
	snprintf(cv.comm, sizeof(cv.comm), "xray");
	if (o->binary) {
		const char *slash;

		if ((ret = pg_xray_map_open(o->binary, diag, &cv.map)) < 0)
			goto out;
		/* NULL for llvm-xray's YAML maps: names, no binary to map */
		cv.bin = pg_xray_map_binary(cv.map);
		if (cv.bin) {
			cv.base = cv.bin->pie ? PIE_BASE : 0;
			if (stat(cv.bin->path, &cv.bin_st) < 0)
				memset(&cv.bin_st, 0, sizeof(cv.bin_st));
			slash = strrchr(cv.bin->path, '/');
			snprintf(cv.comm, sizeof(cv.comm), "%s", slash ? slash + 1 : cv.bin->path);
		}
	}
	if ((ret = func_cache(&cv)) < 0 || (ret = pg_pdw_open(o->output, &wo, diag, &cv.w)) < 0)
		goto out;
	ret = run(&cv);
	if (ret < 0) {
		pg_pdw_abort(cv.w);
	} else {
		/* the size once the compression workers and the trailing
		 * sections are written: before, it lags behind the file */
		if (!(ret = pg_pdw_finish(cv.w)))
			st->out_bytes = pg_pdw_bytes(cv.w);
		ret = pg_pdw_close(cv.w);
	}
out:
	for (size_t i = 0; i < cv.nin; i++)
		pg_xray_close(cv.in[i].t);
	free(cv.in);
	for (size_t i = 0; i < cv.nthreads; i++)
		free(cv.threads[i].stack);
	free(cv.threads);
	free(cv.slots);
	free(cv.heap);
	free(cv.pids);
	free(cv.batch);
	free(cv.fc);
	free(cv.seen.bits);
	pg_u64map_free(&cv.seen.big);
	pg_xray_map_close(cv.map);
	return ret;
}

int pg_xray_convert(const struct pg_xray_opts *opts, struct pg_diag *diag,
		    struct pg_xray_convert_stats *st)
{
	struct pg_xray_opts o;
	struct pg_xray_convert_stats v = { .sz = sizeof(v) };
	struct pg_xray_stats trace = { .sz = sizeof(trace) };
	int ret;

	ret = pg_sized_opts(&o, sizeof(o), opts, true, "xray conversion", diag);
	if (ret == 0)
		ret = convert(&o, diag, &v, &trace);
	if (st) {
		struct pg_xray_stats *t = st->sz >= offsetof(struct pg_xray_convert_stats, trace) +
						    sizeof(st->trace) ? st->trace : NULL;

		if (t)
			pg_sized_out(t, &trace, sizeof(trace));
		v.trace = t;
		pg_sized_out(st, &v, sizeof(v));
	}
	return ret;
}
