/* SPDX-License-Identifier: MIT */
/* The two walks over an indexed XRay trace (trace.c indexes it and
 * decodes one segment at a time): file order, segment after segment as
 * they lie; and time order, one cursor per thread over its segments
 * sorted by first TSC, merged with a heap, handing back pages of
 * segments read so that memory stays O(segments + threads).  Apart from
 * trace.c because the order records come in is its own concern: the
 * decoders know nothing of threads or heaps. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <perfgraft/xray.h>
#include "util/util.h"
#include "xray/trace.h"

/* A long segment (a basic-mode chunk can be the whole file) gives back
 * the folios behind its cursor as it goes, not only at its end. */
static inline void release_behind(pg_xray *t, struct cursor *c)
{
	if (c->pos - c->kept >= 2 * XR_SPAN) {
		uint64_t upto = c->pos & ~(uint64_t)(XR_SPAN - 1);

		pg_xr_release(t, c->kept & ~(uint64_t)(XR_SPAN - 1), upto);
		c->kept = upto;
	}
}

/* ---- file order */

static int file_order_next(pg_xray *t, struct pg_xr_record *r)
{
	for (;;) {
		if (!t->fo_in_seg) {
			if (t->fo_seg >= t->nsegs)
				return 0;
			pg_xr_cursor_start(t, &t->fo, &t->segs[t->fo_seg++]);
			t->fo_in_seg = true;
		}
		if (pg_xr_seg_next(t, &t->fo, r, true)) {
			release_behind(t, &t->fo);
			if (r->kind <= PG_XR_TYPED) {
				struct thread_cur *th = &t->threads[t->segs[t->fo_seg - 1].thread];

				if (!th->any)
					t->st.threads++;
				th->any = true;
			}
			return 1;
		}
		t->fo_in_seg = false;
		pg_xr_release_span(t, t->fo.start, t->fo.end);
		if (t->fo.eob && t->fo.pos < t->fo.end) {
			memset(r, 0, sizeof(*r));
			r->kind = PG_XR_SKIPPED;
			r->offset = t->fo.pos;
			r->value = t->fo.end - t->fo.pos;
			return 1;
		}
	}
}

/* ---- time order */

static bool thread_advance(pg_xray *t, struct thread_cur *th)
{
	for (;;) {
		if (!th->in_seg) {
			if (th->seg == th->seg_hi) {
				if (th->ended || !th->any)
					return false;
				struct pg_xr_record *la = &th->la[th->cur];

				memset(la, 0, sizeof(*la));
				la->kind = PG_XR_THREAD_END;
				la->tsc = th->last_tsc;
				la->pid = th->pid;
				la->tid = th->tid;
				la->offset = t->segs[t->seg_sorted[th->seg_hi - 1]].end;
				th->key = la->tsc;
				th->ended = true;
				return true;
			}
			pg_xr_cursor_start(t, &th->c, &t->segs[t->seg_sorted[th->seg++]]);
			th->in_seg = true;
		}
		if (pg_xr_seg_next(t, &th->c, &th->la[th->cur], false)) {
			release_behind(t, &th->c);
			if (!th->any)
				t->st.threads++;
			th->any = true;
			/* the chain's time, or an old-style event's own if later */
			if (th->c.tsc > th->last_tsc)
				th->last_tsc = th->c.tsc;
			th->key = th->la[th->cur].tsc;
			if (th->key > th->last_tsc)
				th->last_tsc = th->key;
			return true;
		}
		th->in_seg = false;
		pg_xr_release_span(t, th->c.start, th->c.end);
	}
}

static bool heap_less(const pg_xray *t, uint32_t a, uint32_t b)
{
	uint64_t ta = t->threads[a].key, tb = t->threads[b].key;

	return ta != tb ? ta < tb : a < b;
}

static void heap_down(pg_xray *t, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		uint32_t tmp;

		if (l < t->nheap && heap_less(t, t->heap[l], t->heap[m]))
			m = l;
		if (l + 1 < t->nheap && heap_less(t, t->heap[l + 1], t->heap[m]))
			m = l + 1;
		if (m == i)
			return;
		tmp = t->heap[i];
		t->heap[i] = t->heap[m];
		t->heap[m] = tmp;
		i = m;
	}
}

static int seg_cmp(const void *a, const void *b, void *ctx)
{
	const pg_xray *t = ctx;
	const struct seg *x = &t->segs[*(const size_t *)a];
	const struct seg *y = &t->segs[*(const size_t *)b];

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->first_tsc != y->first_tsc)
		return x->first_tsc < y->first_tsc ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Threads by (pid, tid), in order of first appearance. */
int pg_xr_assign_threads(pg_xray *t)
{
	size_t n = t->nsegs ? t->nsegs : 1;
	struct pg_u64map ids = PG_U64MAP_INIT(sizeof(uint32_t));	/* pid:tid -> thread */
	int ret = 0;

	t->threads = calloc(n, sizeof(*t->threads));
	t->seg_sorted = malloc(n * sizeof(*t->seg_sorted));
	t->heap = malloc(n * sizeof(*t->heap));
	if (!t->threads || !t->seg_sorted || !t->heap)
		return pg_err(t->diag, -ENOMEM, "%s: out of memory", t->name);
	for (size_t i = 0; i < t->nsegs; i++) {
		struct seg *s = &t->segs[i];
		bool added;
		uint32_t *th = pg_u64map_put(&ids, (uint64_t)s->pid << 32 | s->tid, &added);

		if (!th) {
			ret = pg_err(t->diag, -ENOMEM, "%s: out of memory", t->name);
			break;
		}
		if (added) {
			*th = (uint32_t)t->nthreads++;
			t->threads[*th].pid = s->pid;
			t->threads[*th].tid = s->tid;
		}
		s->thread = *th;
		t->seg_sorted[i] = i;
	}
	pg_u64map_free(&ids);
	return ret;
}

static int range_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

/* Every 32 MB of buffers begun, hands back the whole mapping but the
 * threads' current buffers: the kernel maps pages around each fault, and
 * pages of buffers already read would otherwise stay resident. */
static void sweep(pg_xray *t)
{
	size_t n = 0;
	uint64_t at = 0;

	if (!t->mapped || t->since_release < (32u << 20))
		return;
	t->since_release = 0;
	if (!t->active && !(t->active = malloc((t->nthreads ? t->nthreads : 1) * sizeof(*t->active))))
		return;
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].in_seg) {
			t->active[n].lo = t->threads[i].c.start;
			t->active[n].hi = t->threads[i].c.end;
			n++;
		}
	qsort(t->active, n, sizeof(*t->active), range_cmp);
	for (size_t i = 0; i < n; i++) {
		pg_xr_release(t, at, t->active[i].lo & ~4095ull);
		if (pg_align(t->active[i].hi, 4096) > at)
			at = pg_align(t->active[i].hi, 4096);
	}
	if (at < t->size)
		pg_xr_release(t, at, t->size);
}

static void time_order_init(pg_xray *t)
{
	size_t i;

	qsort_r(t->seg_sorted, t->nsegs, sizeof(*t->seg_sorted), seg_cmp, t);
	for (i = 0; i < t->nsegs; i++) {
		struct thread_cur *th = &t->threads[t->segs[t->seg_sorted[i]].thread];

		if (i == 0 || t->segs[t->seg_sorted[i - 1]].thread != t->segs[t->seg_sorted[i]].thread)
			th->seg_lo = th->seg = i;
		th->seg_hi = i + 1;
	}
	for (i = 0; i < t->nthreads; i++)
		if (thread_advance(t, &t->threads[i]))
			t->heap[t->nheap++] = (uint32_t)i;
	for (i = t->nheap; i-- > 0;)
		heap_down(t, i);
	t->started = true;
}

/* The record is the thread's lookahead: the thread reads its next one
 * into its other lookahead slot, so the record stays as it is until the
 * next call, and nothing is copied. */
const struct pg_xr_record *pg_xr_next_ref(pg_xray *t)
{
	struct thread_cur *th;
	const struct pg_xr_record *r;

	if (!t->started)
		time_order_init(t);
	sweep(t);
	if (!t->nheap)
		return NULL;
	th = &t->threads[t->heap[0]];
	r = &th->la[th->cur];
	th->cur ^= 1;
	if (!thread_advance(t, th))
		t->heap[0] = t->heap[--t->nheap];
	heap_down(t, 0);
	return r;
}

static int time_order_next(pg_xray *t, struct pg_xr_record *r)
{
	const struct pg_xr_record *n = pg_xr_next_ref(t);

	if (!n)
		return 0;
	rec_copy(r, n);
	return 1;
}

int pg_xray_next(pg_xray *t, struct pg_xr_record *rec)
{
	return t->flags & PG_XRAY_FILE_ORDER ? file_order_next(t, rec) : time_order_next(t, rec);
}
