/* SPDX-License-Identifier: MIT */
/* Disjoint address spans painted over each other, each with the time it
 * was painted and a value: the symbolizer's address x time plane and the
 * code model's record of which ranges held code (since).  A treap keyed
 * by start with split and merge, so a paint costs O(log n + the spans it
 * covers); freed nodes are reused, so memory follows the live spans. */
#include <errno.h>
#include <stdlib.h>

#include "util/util.h"

#define NIL UINT32_MAX

/* xorshift: deterministic priorities, balanced in expectation */
static uint32_t next_prio(uint32_t x)
{
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

static uint32_t node_new(struct pg_paint *p, uint64_t start, uint64_t end, uint64_t from,
			 uint32_t val)
{
	uint32_t i;

	if (p->free_head != NIL) {
		i = p->free_head;
		p->free_head = p->n[i].l;
	} else {
		if (p->len >= NIL - 1 || !pg_grow((void **)&p->n, &p->cap, p->len + 1, sizeof(*p->n)))
			return NIL;
		i = (uint32_t)p->len++;
	}
	p->rnd = next_prio(p->rnd);
	p->n[i] = (struct pg_paint_node){ .start = start, .end = end, .from = from, .val = val,
					  .prio = p->rnd, .l = NIL, .r = NIL };
	return i;
}

static void node_free(struct pg_paint *p, uint32_t i)
{
	p->n[i].l = p->free_head;
	p->free_head = i;
}

/* Splits by start into (< key) and (>= key). */
static void split(struct pg_paint *p, uint32_t root, uint64_t key, uint32_t *a, uint32_t *b)
{
	uint32_t *la = a, *lb = b;

	while (root != NIL) {
		if (p->n[root].start < key) {
			*la = root;
			la = &p->n[root].r;
			root = p->n[root].r;
		} else {
			*lb = root;
			lb = &p->n[root].l;
			root = p->n[root].l;
		}
	}
	*la = *lb = NIL;
}

/* Joins a and b, every key of a below every key of b. */
static uint32_t merge(struct pg_paint *p, uint32_t a, uint32_t b)
{
	uint32_t root = NIL, *link = &root;

	while (a != NIL && b != NIL) {
		if (p->n[a].prio > p->n[b].prio) {
			*link = a;
			link = &p->n[a].r;
			a = p->n[a].r;
		} else {
			*link = b;
			link = &p->n[b].l;
			b = p->n[b].l;
		}
	}
	*link = a != NIL ? a : b;
	return root;
}

/* In-order walk of subtree m; with e != 0 every node is also freed and a
 * node reaching past e leaves that part as *rest. */
static int walk(struct pg_paint *p, uint32_t m, uint64_t e, bool take, uint32_t *rest,
		pg_paint_fn fn, void *ctx)
{
	size_t top = 0;
	int ret;

	while (m != NIL || top) {
		struct pg_paint_node nd;

		while (m != NIL) {
			if (!pg_grow((void **)&p->stack, &p->stack_cap, top + 1, sizeof(*p->stack)))
				return -ENOMEM;
			p->stack[top++] = m;
			m = p->n[m].l;
		}
		m = p->stack[--top];
		nd = p->n[m];
		if (fn && (ret = fn(ctx, nd.start, take && nd.end > e ? e : nd.end, nd.from, nd.val)))
			return ret;
		if (take) {
			if (nd.end > e && (*rest = node_new(p, e, nd.end, nd.from, nd.val)) == NIL)
				return -ENOMEM;
			node_free(p, m);
		}
		m = nd.r;
	}
	return 0;
}

/* ---- paints one after another ----
 * A paint at or after the end of the one before, close to it, starts the
 * mode: the treap is split there once, and then each paint that follows
 * takes the spans before it off the front of rroot (run[] gets those it
 * passes over and its own node; those it covers are reported and freed)
 * in O(1) amortized, instead of descending the treap.  Any other paint,
 * or pg_paint_each, ends it: run[] becomes a subtree in one pass and the
 * three parts are merged back, O(run + log n). */
#define SEQ_GAP 4096	/* "close": a gap between functions, not a jump */
#define SEQ_SKIP 8	/* spans a paint may pass over before the mode ends */

/* v onto a growable array; false on ENOMEM */
static bool push_u32(uint32_t **a, size_t *n, size_t *cap, uint32_t v)
{
	if (*n == *cap && !pg_grow((void **)a, cap, *n + 1, sizeof(**a)))
		return false;
	(*a)[(*n)++] = v;
	return true;
}

static bool spine_push(struct pg_paint *p, uint32_t i)
{
	for (; i != NIL; i = p->n[i].l)
		if (!push_u32(&p->spine, &p->spine_n, &p->spine_cap, i))
			return false;
	return true;
}

/* rroot's first span off it; false on ENOMEM */
static bool front_pop(struct pg_paint *p)
{
	uint32_t m = p->spine[--p->spine_n], child = p->n[m].r;

	if (p->spine_n)
		p->n[p->spine[p->spine_n - 1]].l = child;
	else
		p->rroot = child;
	return spine_push(p, child);
}

static bool run_add(struct pg_paint *p, uint32_t i)
{
	return push_u32(&p->run, &p->run_n, &p->run_cap, i);
}

/* Leaves the mode: run[] (in key order) as a Cartesian tree by priority
 * (the stack its right spine), merged between root and rroot. */
static int seq_end(struct pg_paint *p)
{
	size_t top = 0;
	uint32_t sub = NIL;

	if (!p->cur)
		return 0;
	p->cur = false;
	p->spine_n = 0;
	if (p->run_n) {
		if (!pg_grow((void **)&p->stack, &p->stack_cap, p->run_n, sizeof(*p->stack)))
			return -ENOMEM;
		for (size_t i = 0; i < p->run_n; i++) {
			uint32_t x = p->run[i], last = NIL;

			while (top && p->n[p->stack[top - 1]].prio < p->n[x].prio)
				last = p->stack[--top];
			p->n[x].l = last;
			p->n[x].r = NIL;
			if (top)
				p->n[p->stack[top - 1]].r = x;
			p->stack[top++] = x;
		}
		sub = p->stack[0];
		p->run_n = 0;
	}
	p->root = merge(p, p->root, merge(p, sub, p->rroot));
	p->rroot = NIL;
	return 0;
}

/* In the mode, start >= cursor: *done when painted; when the paint
 * passes over too many spans the mode is left (nothing was reported
 * then).  Returns 0, fn's nonzero value or -ENOMEM. */
static int seq_paint(struct pg_paint *p, uint64_t start, uint64_t end, uint64_t from,
		     uint32_t val, pg_paint_fn fn, void *ctx, bool *done)
{
	struct pg_paint_node *f;
	uint32_t node;
	int ret, skipped = 0;

	/* the spans between the cursor and start: below it now */
	while (p->spine_n && p->n[p->spine[p->spine_n - 1]].end <= start) {
		uint32_t m = p->spine[p->spine_n - 1];

		if (++skipped > SEQ_SKIP)
			return seq_end(p);
		if (!front_pop(p) || !run_add(p, m))
			return -ENOMEM;
	}
	if (p->spine_n) {
		uint32_t m = p->spine[p->spine_n - 1];

		f = &p->n[m];
		if (f->start < start && f->end > end) {
			/* inside one span (code over bigger code freed before):
			 * its head goes below, its tail stays first */
			uint64_t fstart = f->start;

			if (fn && (ret = fn(ctx, start, end, f->from, f->val)))
				return ret;
			if ((node = node_new(p, fstart, start, f->from, f->val)) == NIL ||
			    !run_add(p, node))
				return -ENOMEM;
			p->n[m].start = end;	/* (node_new may have moved the nodes) */
		} else if (f->start < start) {
			if (fn && (ret = fn(ctx, start, f->end, f->from, f->val)))
				return ret;
			f->end = start;
			if (!front_pop(p) || !run_add(p, m))
				return -ENOMEM;
		}
	}
	while (p->spine_n && (f = &p->n[p->spine[p->spine_n - 1]])->start < end) {
		uint32_t m = p->spine[p->spine_n - 1];

		if (fn && (ret = fn(ctx, f->start, f->end < end ? f->end : end, f->from, f->val)))
			return ret;
		if (f->end > end) {
			f->start = end;	/* its tail, still first */
			break;
		}
		if (!front_pop(p))
			return -ENOMEM;
		node_free(p, m);
	}
	if ((node = node_new(p, start, end, from, val)) == NIL || !run_add(p, node))
		return -ENOMEM;
	p->cursor = end;
	*done = true;
	return 0;
}

static int seq_start(struct pg_paint *p)
{
	uint32_t a, b;

	split(p, p->root, p->last_end, &a, &b);
	p->root = a;
	p->rroot = b;
	p->spine_n = p->run_n = 0;
	p->cur = true;
	p->cursor = p->last_end;
	return spine_push(p, b) ? 0 : -ENOMEM;
}

int pg_paint(struct pg_paint *p, uint64_t start, uint64_t end, uint64_t from, uint32_t val,
	     pg_paint_fn fn, void *ctx)
{
	uint32_t a, b, m, c, rest = NIL, node;
	bool done = false;
	int ret = 0;

	if (start >= end)
		return 0;
	if (!p->init) {
		p->free_head = p->root = p->rroot = NIL;
		p->last_end = UINT64_MAX;	/* no paint before: no start is at or after it */
		p->rnd = 2463534242u;
		p->init = true;
	}
	/* (every span below last_end ends by it: the paint before ended
	 * there.  This holds because every change below last_end goes
	 * through the treap's paths below, which set last_end first; a new
	 * way to change spans must keep it so, or end the mode and forget
	 * last_end) */
	if (!p->cur && start >= p->last_end && start - p->last_end <= SEQ_GAP)
		ret = seq_start(p);
	if (!ret && p->cur)
		ret = start >= p->cursor ? seq_paint(p, start, end, from, val, fn, ctx, &done)
					 : seq_end(p);
	if (ret) {
		p->root = NIL;	/* left unusable: the caller frees it */
		p->cur = false;
		return ret;
	}
	if (done)
		return 0;
	p->last_end = end;
	/* nothing painted in [start, end) (fresh code, a MOVE's new place):
	 * one insertion, not two splits and three merges.  One descent by
	 * start finds both neighbours (the span before start and the first
	 * at or after it) and where the new node's priority puts it, as
	 * merge() would: the treap's nodes are cache misses, so the path is
	 * walked once */
	{
		uint32_t r = p->root, pred = NIL, succ = NIL, succ2 = NIL, at = NIL;
		/* prio: the one node_new() will give it */
		uint32_t at_parent = NIL, prio = next_prio(p->rnd), parent = NIL;
		bool at_right = false, right = false, placed = false;

		while (r != NIL) {
			if (!placed && p->n[r].prio <= prio) {
				placed = true;
				at = r;
				at_parent = parent;
				at_right = right;
			}
			parent = r;
			right = p->n[r].start < start;
			if (right) {
				pred = r;
			} else {
				succ2 = succ;	/* succ's successor unless it has a right subtree */
				succ = r;
			}
			r = right ? p->n[r].r : p->n[r].l;
		}
		if (!placed) {
			at_parent = parent;
			at_right = right;
		}
		/* code over exactly one span that lies within it (a JIT reusing
		 * freed code space, often for code of the same size): that span
		 * becomes the new one, its key still between its neighbours' */
		if ((pred == NIL || p->n[pred].end <= start) && succ != NIL &&
		    p->n[succ].start < end && p->n[succ].end <= end) {
			uint32_t next = p->n[succ].r;

			if (next != NIL)
				while (p->n[next].l != NIL)
					next = p->n[next].l;
			else
				next = succ2;
			if (next == NIL || p->n[next].start >= end) {
				struct pg_paint_node *nd = &p->n[succ];

				if (fn && (ret = fn(ctx, nd->start, nd->end, nd->from, nd->val))) {
					p->root = NIL;	/* as below: the caller frees it */
					return ret;
				}
				nd->start = start;
				nd->end = end;
				nd->from = from;
				nd->val = val;
				return 0;
			}
		}
		/* over the tail of the span before it only: that span ends here */
		if (pred != NIL && p->n[pred].end > start && p->n[pred].end <= end &&
		    (succ == NIL || p->n[succ].start >= end)) {
			struct pg_paint_node *nd = &p->n[pred];

			if (fn && (ret = fn(ctx, start, nd->end, nd->from, nd->val))) {
				p->root = NIL;
				return ret;
			}
			nd->end = start;	/* no longer in the way */
		}
		if ((pred == NIL || p->n[pred].end <= start) &&
		    (succ == NIL || p->n[succ].start >= end)) {
			uint32_t *link;

			if ((node = node_new(p, start, end, from, val)) == NIL) {
				p->root = NIL;	/* left unusable: the caller frees it */
				return -ENOMEM;
			}
			/* (node_new may have moved the nodes: the link now) */
			link = at_parent == NIL ? &p->root
			       : at_right ? &p->n[at_parent].r : &p->n[at_parent].l;
			split(p, at, start, &p->n[node].l, &p->n[node].r);
			*link = node;
			return 0;
		}
	}
	split(p, p->root, start, &a, &b);
	split(p, b, end, &m, &c);
	/* the span starting before start may reach into [start, end) */
	if (a != NIL) {
		uint32_t last = a;

		while (p->n[last].r != NIL)
			last = p->n[last].r;
		if (p->n[last].end > start) {
			struct pg_paint_node nd = p->n[last];

			if (fn)
				ret = fn(ctx, start, nd.end < end ? nd.end : end, nd.from, nd.val);
			if (!ret && nd.end > end &&
			    (rest = node_new(p, end, nd.end, nd.from, nd.val)) == NIL)
				ret = -ENOMEM;
			p->n[last].end = start;
		}
	}
	if (!ret)
		ret = walk(p, m, end, true, &rest, fn, ctx);
	if (!ret && (node = node_new(p, start, end, from, val)) == NIL)
		ret = -ENOMEM;
	if (ret) {
		p->root = NIL;	/* left unusable: the caller frees it */
		return ret;
	}
	if (rest != NIL)
		c = merge(p, rest, c);
	p->root = merge(p, a, merge(p, node, c));
	return 0;
}

int pg_paint_each(struct pg_paint *p, pg_paint_fn fn, void *ctx)
{
	if (!p->init)
		return 0;
	if (seq_end(p)) {
		p->root = NIL;
		return -ENOMEM;
	}
	return walk(p, p->root, 0, false, NULL, fn, ctx);
}

void pg_paint_free(struct pg_paint *p)
{
	free(p->n);
	free(p->stack);
	free(p->run);
	free(p->spine);
	*p = (struct pg_paint){ 0 };
}
