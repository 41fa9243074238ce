/* SPDX-License-Identifier: MIT */
/* llvm-xray account, native: per function, the count and min, median,
 * 90th and 99th percentile, max and sum of its call latencies, printed as
 * llvm-xray 14's account prints them for the YAML of the same trace
 * (`llvm-xray convert -f yaml` then `account` on it: the records sorted by
 * time, which the raw route does not do for threads).
 *
 * What account does, and so this file (llvm/tools/llvm-xray/xray-account.cpp):
 *  - a stack of (function, tsc) per thread ID; an entry (with or without
 *    arguments) pushes; an exit or tail exit of the function on top pops
 *    it and records |exit tsc - entry tsc| for that function;
 *  - an exit on an empty stack, or of another function than the top one,
 *    is an error: account stops there, or with -k skips the record; with
 *    -d an exit of a function deeper in the stack closes every frame
 *    above it too, each with the latency up to this exit;
 *  - frames never exited count nothing; custom and typed events nothing;
 *  - per function: sum accumulated in a double in the order the calls
 *    ended, min and max, and the elements at n/2, floor(n * 0.9) and
 *    floor(n * 0.99) of the sorted latencies; each divided (as a double)
 *    by the header's cycle frequency unless it is 0;
 *  - rows in the order of account's DenseMap, then std::sort by the key
 *    (ties come out as libstdc++'s introsort leaves them, reproduced here,
 *    so even tied rows print in account's order).
 *
 * Memory: the latencies of every call (account needs them all for the
 * percentiles), 4 bytes each (8 for a function with a latency of 2^32
 * ticks or more), grown by half: at most 6 (12) bytes per call, against
 * the 16 bytes of trace an FDR call takes at least (an entry and an
 * exit), 64 for basic mode; plus the open frames (16 bytes each) and a
 * table per function and thread.  Linear in the calls, independent of how
 * threads interleave. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "xray/account.h"

#define SMALL_IDS (1u << 20)	/* IDs below: a direct table; beyond: a hash */
#define WARN_MAX 1000		/* -k's warnings; the rest are counted */

struct fn {
	int32_t id;
	uint32_t seq;		/* order of its first latency */
	uint64_t n, cap;
	void *v;		/* uint32_t[] or, once wide, uint64_t[] */
	bool wide;
	double sum;
};

struct frame {
	int32_t id;
	uint64_t tsc;
};

struct thr {
	uint32_t tid;
	struct frame *st;
	size_t n, cap;
	bool indexed;		/* its open frames are counted in acct.open */
};

/* -d looks for an exit's function down the stack.  account scans it, and
 * a hostile trace (a deep stack, then exits of a function not in it) makes
 * that quadratic.  A thread deeper than this has its open frames counted
 * by function, until its stack empties again: a function not in the stack
 * is then known at once, and a scan that finds one pops what it passed. */
#define INDEX_DEPTH 256

struct acct {
	const struct pg_xray_account_opts *o;
	struct pg_diag *diag;
	struct pg_xray_account_stats *st;
	const char *name;

	struct fn *fns;
	size_t nfns, fcap;
	uint32_t *small;	/* ID -> index + 1, IDs below SMALL_IDS */
	struct pg_u64map big;	/* other IDs -> index */

	struct thr *thr;
	size_t nthr, tcap;
	struct pg_u64map tids;	/* tid -> index */
	size_t last;		/* index of the thread of the previous record + 1 */
	uint64_t warned;	/* records skipped by -k */
	struct pg_u64map rdepth; /* (thread << 32 | id) -> account's RecursionStatus */
	struct pg_u64map open;	/* (thread << 32 | id) -> open frames, indexed threads */
	uint64_t bytes;
};

/* --------------------------------------------------------- latencies */

static struct fn *fn_of(struct acct *a, int32_t id)
{
	uint32_t u = (uint32_t)id, *slot = NULL;
	size_t *bslot = NULL;
	bool added;

	if (u < SMALL_IDS) {
		if (!a->small && !(a->small = calloc(SMALL_IDS, sizeof(*a->small))))
			return NULL;
		slot = &a->small[u];
		if (*slot)
			return &a->fns[*slot - 1];
	} else {
		if (!(bslot = pg_u64map_put(&a->big, u, &added)))
			return NULL;
		if (!added)
			return &a->fns[*bslot];
	}
	if (a->nfns == a->fcap) {
		size_t nc = a->fcap ? a->fcap * 2 : 64;
		struct fn *nf = realloc(a->fns, nc * sizeof(*nf));

		if (!nf)
			return NULL;
		a->fns = nf;
		a->fcap = nc;
	}
	if (slot)
		*slot = (uint32_t)a->nfns + 1;
	else
		*bslot = a->nfns;
	a->fns[a->nfns] = (struct fn){ .id = id, .seq = (uint32_t)a->nfns };
	return &a->fns[a->nfns++];
}

static int record_latency(struct acct *a, int32_t id, uint64_t v)
{
	struct fn *f = fn_of(a, id);

	if (!f)
		return -ENOMEM;
	if (f->n == f->cap || (!f->wide && v > UINT32_MAX)) {
		bool wide = f->wide || v > UINT32_MAX;
		uint64_t nc = f->n == f->cap ? (f->cap ? f->cap + f->cap / 2 : 4) : f->cap;
		size_t es = wide ? 8 : 4;
		void *nv;

		if (nc > SIZE_MAX / es)
			return -ENOMEM;
		if (wide && !f->wide) {
			/* widen: every latency so far into 64 bits */
			uint64_t *w = malloc(nc * es);

			if (!w)
				return -ENOMEM;
			for (uint64_t i = 0; i < f->n; i++)
				w[i] = ((uint32_t *)f->v)[i];
			free(f->v);
			nv = w;
			a->bytes -= f->cap * 4;
		} else {
			if (!(nv = realloc(f->v, nc * es)))
				return -ENOMEM;
			a->bytes -= f->cap * es;
		}
		a->bytes += nc * es;
		if (a->bytes > a->st->latency_bytes)
			a->st->latency_bytes = a->bytes;
		f->v = nv;
		f->cap = nc;
		f->wide = wide;
	}
	if (f->wide)
		((uint64_t *)f->v)[f->n++] = v;
	else
		((uint32_t *)f->v)[f->n++] = (uint32_t)v;
	/* std::accumulate(..., 0.0): a double, in the order of the calls */
	f->sum += (double)v;
	a->st->calls++;
	return 0;
}

/* ------------------------------------------------------------ threads */

static struct thr *thread_of(struct acct *a, uint32_t tid)
{
	bool added;
	size_t *ix;

	/* records come in runs of one thread: skip the hash for them */
	if (a->last && a->thr[a->last - 1].tid == tid)
		return &a->thr[a->last - 1];
	if (!(ix = pg_u64map_put(&a->tids, tid, &added)))
		return NULL;
	if (added) {
		if (a->nthr == a->tcap) {
			size_t nc = a->tcap ? a->tcap * 2 : 16;
			struct thr *nt = realloc(a->thr, nc * sizeof(*nt));

			if (!nt) {
				pg_u64map_del(&a->tids, tid);
				return NULL;
			}
			a->thr = nt;
			a->tcap = nc;
		}
		*ix = a->nthr;
		a->thr[a->nthr++] = (struct thr){ .tid = tid };
		a->st->threads++;
	}
	a->last = *ix + 1;
	return &a->thr[*ix];
}

/* account's RecursionStatus: a depth in the low 31 bits, "recursive" in
 * the top one, set when the depth reaches 2 and cleared back at 0 */
#define REC_BIT 0x80000000u

static uint32_t *rstatus(struct acct *a, const struct thr *t, int32_t id)
{
	uint64_t key = (uint64_t)(t - a->thr) << 32 | (uint32_t)id;

	return pg_u64map_put(&a->rdepth, key, NULL);
}

static int rec_enter(struct acct *a, const struct thr *t, int32_t id)
{
	uint32_t *s = rstatus(a, t, id), d;

	if (!s)
		return -ENOMEM;
	d = (*s & ~REC_BIT) + 1;
	*s = (*s & REC_BIT) | (d & ~REC_BIT);
	if (!(*s & REC_BIT) && d == 2)
		*s |= REC_BIT;
	return 0;
}

static int rec_leave(struct acct *a, const struct thr *t, int32_t id)
{
	uint32_t *s = rstatus(a, t, id), d;

	if (!s)
		return -ENOMEM;
	d = (*s & ~REC_BIT) - 1;
	*s = (*s & REC_BIT) | (d & ~REC_BIT);
	if ((*s & REC_BIT) && d == 0)
		*s = 0;
	return 0;
}

/* Counts a frame's latency unless -recursive-calls-only excludes it;
 * -1 on OOM. */
static int frame_latency(struct acct *a, const struct thr *t, const struct frame *f,
			 uint64_t tsc)
{
	if (a->o->recursive_calls_only) {
		uint32_t *s = rstatus(a, t, f->id);

		if (!s)
			return -ENOMEM;
		if (!(*s & REC_BIT))
			return 0;
	}
	/* account's diff(): the distance, whichever way the clock went */
	return record_latency(a, f->id, tsc > f->tsc ? tsc - f->tsc : f->tsc - tsc);
}

static uint64_t tkey(const struct acct *a, const struct thr *t, int32_t id)
{
	return (uint64_t)(t - a->thr) << 32 | (uint32_t)id;
}

static int open_add(struct acct *a, const struct thr *t, int32_t id)
{
	uint64_t *c = pg_u64map_put(&a->open, tkey(a, t, id), NULL);

	if (!c)
		return -ENOMEM;
	++*c;
	return 0;
}

static void open_drop(struct acct *a, const struct thr *t, int32_t id)
{
	uint64_t *c = pg_u64map_get(&a->open, tkey(a, t, id));

	if (c && !--*c)
		pg_u64map_del(&a->open, tkey(a, t, id));
}

static int reject(struct acct *a, const struct pg_xr_record *r, const struct thr *t,
		  const char *why)
{
	if (!a->o->keep_going)
		return pg_err(a->diag, -EINVAL,
			      "%s: offset %" PRIu64 ": %s of function %" PRId32 " on thread %" PRIu32 " %s (llvm-xray account stops here too; -k skips such records)",
			      a->name, r->offset, r->kind == PG_XR_TAIL_EXIT ? "tail exit" : "exit",
			      (int32_t)r->func_id, t->tid, why);
	/* a warning each, up to WARN_MAX: past them a hostile trace would
	 * spend its time formatting messages; the summary counts them all */
	if (++a->warned <= WARN_MAX)
		pg_warn(a->diag, "%s: offset %" PRIu64 ": %s of function %" PRId32 " on thread %" PRIu32 " %s; skipped (-k)",
			a->name, r->offset, r->kind == PG_XR_TAIL_EXIT ? "tail exit" : "exit",
			(int32_t)r->func_id, t->tid, why);
	return 0;
}

static int account_record(struct acct *a, const struct pg_xr_record *r)
{
	int32_t id = (int32_t)r->func_id;
	struct thr *t;
	size_t i;
	int ret;

	if (r->kind > PG_XR_TAIL_EXIT && r->kind != PG_XR_ENTER_ARG)
		return 0;	/* events, thread ends: account counts nothing */
	a->st->records++;
	if (!(t = thread_of(a, r->tid)))
		return -ENOMEM;
	if (r->kind == PG_XR_ENTER || r->kind == PG_XR_ENTER_ARG) {
		if (t->n == t->cap) {
			size_t nc = t->cap ? t->cap * 2 : 32;
			struct frame *ns = realloc(t->st, nc * sizeof(*ns));

			if (!ns)
				return -ENOMEM;
			t->st = ns;
			t->cap = nc;
		}
		t->st[t->n++] = (struct frame){ .id = id, .tsc = r->tsc };
		if (t->indexed) {
			if ((ret = open_add(a, t, id)) < 0)
				return ret;
		} else if (a->o->deduce_sibling_calls && t->n > INDEX_DEPTH) {
			t->indexed = true;
			for (size_t k = 0; k < t->n; k++)
				if ((ret = open_add(a, t, t->st[k].id)) < 0)
					return ret;
		}
		return a->o->recursive_calls_only ? rec_enter(a, t, id) : 0;
	}
	if (!t->n) {
		a->st->exits_empty++;
		return reject(a, r, t, "with no call open on the thread");
	}
	if (t->st[t->n - 1].id == id) {
		i = t->n - 1;
	} else {
		if (!a->o->deduce_sibling_calls) {
			a->st->exits_unmatched++;
			return reject(a, r, t, "while another function is the innermost call (-d closes the calls above it)");
		}
		if (t->indexed && !pg_u64map_get(&a->open, tkey(a, t, id)))
			i = 0;
		else
			for (i = t->n - 1; i > 0 && t->st[i - 1].id != id; i--)
				;
		if (!i) {
			a->st->exits_unmatched++;
			return reject(a, r, t, "that is not among the open calls");
		}
		i--;
		a->st->deduced += t->n - 1 - i;
	}
	/* every frame from the matched one up, then popped innermost first */
	for (size_t k = i; k < t->n; k++)
		if ((ret = frame_latency(a, t, &t->st[k], r->tsc)) < 0)
			return ret;
	if (a->o->recursive_calls_only)
		for (size_t k = t->n; k-- > i;)
			if ((ret = rec_leave(a, t, t->st[k].id)) < 0)
				return ret;
	if (t->indexed) {
		for (size_t k = i; k < t->n; k++)
			open_drop(a, t, t->st[k].id);
		t->indexed = i > 0;	/* empty: its counts are all gone */
	}
	t->n = i;
	return 0;
}

/* -------------------------------------------------------------- stats */

/* quickselect: the k-th smallest of a[lo, hi) at a[k], smaller ones
 * before, larger after, as std::nth_element leaves them (only the value
 * at k matters).  Three-way partitions: many equal latencies are the
 * common case.  Past a depth bound, the range is sorted instead. */
#define DEF_SELECT(NAME, T)							\
static int NAME##_cmp(const void *x, const void *y)				\
{										\
	T p = *(const T *)x, q = *(const T *)y;					\
	return p < q ? -1 : p > q;						\
}										\
static void NAME(T *a, uint64_t lo, uint64_t hi, uint64_t k)			\
{										\
	unsigned budget = 64;							\
										\
	while (hi - lo > 16) {							\
		T x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi - 1], p, tmp;	\
		uint64_t lt = lo, i = lo, gt = hi;				\
										\
		if (!budget--) {						\
			qsort(a + lo, hi - lo, sizeof(T), NAME##_cmp);		\
			return;							\
		}								\
		p = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y)); \
		while (i < gt) {						\
			if (a[i] < p) {						\
				tmp = a[lt]; a[lt++] = a[i]; a[i++] = tmp;	\
			} else if (a[i] > p) {					\
				tmp = a[--gt]; a[gt] = a[i]; a[i] = tmp;	\
			} else {						\
				i++;						\
			}							\
		}								\
		if (k < lt)							\
			hi = lt;						\
		else if (k >= gt)						\
			lo = gt;						\
		else								\
			return;							\
	}									\
	for (uint64_t i = lo + 1; i < hi; i++) {				\
		T v = a[i];							\
		uint64_t j = i;							\
										\
		for (; j > lo && a[j - 1] > v; j--)				\
			a[j] = a[j - 1];					\
		a[j] = v;							\
	}									\
}
DEF_SELECT(select32, uint32_t)
DEF_SELECT(select64, uint64_t)

struct row {
	int32_t id;
	uint64_t count;
	double min, med, p90, p99, max, sum;
	const char *debug, *func;
	char *own_debug, *own_func;
	uint32_t seq;
};

static void row_stats(const struct fn *f, struct row *r, double freq)
{
	uint64_t n = f->n, mn = UINT64_MAX, mx = 0, med, p90, p99;
	uint64_t km = n / 2, k90 = (uint64_t)((double)n * 0.9),
		 k99 = (uint64_t)((double)n * 0.99);	/* positive: the cast is floor (no libm) */

	if (k90 >= n)
		k90 = n - 1;
	if (k99 >= n)
		k99 = n - 1;
	if (f->wide) {
		uint64_t *v = f->v;

		for (uint64_t i = 0; i < n; i++) {
			mn = v[i] < mn ? v[i] : mn;
			mx = v[i] > mx ? v[i] : mx;
		}
		select64(v, 0, n, km);
		med = v[km];
		/* what lies at and past km is >= med: the next picks need only that */
		select64(v, km, n, k90 < km ? km : k90);
		p90 = v[k90];
		select64(v, k90, n, k99 < k90 ? k90 : k99);
		p99 = v[k99];
	} else {
		uint32_t *v = f->v;

		for (uint64_t i = 0; i < n; i++) {
			mn = v[i] < mn ? v[i] : mn;
			mx = v[i] > mx ? v[i] : mx;
		}
		select32(v, 0, n, km);
		med = v[km];
		select32(v, km, n, k90 < km ? km : k90);
		p90 = v[k90];
		select32(v, k90, n, k99 < k90 ? k90 : k99);
		p99 = v[k99];
	}
	r->id = f->id;
	r->seq = f->seq;
	r->count = n;
	r->min = (double)mn;
	r->med = (double)med;
	r->p90 = (double)p90;
	r->p99 = (double)p99;
	r->max = (double)mx;
	r->sum = f->sum;
	if (freq) {
		r->min /= freq;
		r->med /= freq;
		r->p90 /= freq;
		r->p99 /= freq;
		r->max /= freq;
		r->sum /= freq;
	}
}

/* --------------------------------------------- account's row order */

/* The iteration order of account's DenseMap<int32_t, ...> of latencies,
 * from the order its keys were inserted: LLVM's DenseMap (hash id * 37,
 * quadratic probing, 64 buckets at first, doubled when 3/4 full, entries
 * moved over in bucket order).  Returns the rows, by seq, in that order;
 * NULL on OOM. */
static int32_t *densemap_order(const struct row *rows, size_t n, size_t *nb_out)
{
	const int32_t EMPTY = INT32_MAX;
	int32_t *b = NULL;
	size_t nb = 0, used = 0;

	/* rows[] is in insertion order (seq) */
	for (size_t i = 0; i < n; i++) {
		if ((used + 1) * 4 >= nb * 3) {
			size_t nn = nb ? nb * 2 : 64;
			int32_t *o = b, *nbk = malloc(nn * sizeof(*nbk));

			if (!nbk) {
				free(b);
				return NULL;
			}
			for (size_t k = 0; k < nn; k++)
				nbk[k] = EMPTY;
			for (size_t k = 0; k < nb; k++) {
				if (o[k] == EMPTY)
					continue;
				size_t h = (uint32_t)((uint32_t)rows[o[k]].id * 37u) & (nn - 1), p = 1;

				while (nbk[h] != EMPTY)
					h = (h + p++) & (nn - 1);
				nbk[h] = o[k];
			}
			free(o);
			b = nbk;
			nb = nn;
		}
		size_t h = (uint32_t)((uint32_t)rows[i].id * 37u) & (nb - 1), p = 1;

		while (b[h] != EMPTY)
			h = (h + p++) & (nb - 1);
		b[h] = (int32_t)i;
		used++;
	}
	*nb_out = nb;
	return b;
}

struct sorter {
	enum pg_xa_sort key;
	bool asc;
};

static double key_of(const struct row *r, enum pg_xa_sort k)
{
	switch (k) {
	case PG_XA_FUNCID: return r->id;
	case PG_XA_COUNT: return (double)r->count;
	case PG_XA_MIN: return r->min;
	case PG_XA_MED: return r->med;
	case PG_XA_90P: return r->p90;
	case PG_XA_99P: return r->p99;
	case PG_XA_MAX: return r->max;
	case PG_XA_SUM: return r->sum;
	default: return 0;
	}
}

/* account's comparator: ASC ? Fn(L) < Fn(R) : Fn(L) > Fn(R); count is
 * compared as an integer (a double could tie two counts above 2^53) */
static bool less(const struct sorter *s, const struct row *l, const struct row *r)
{
	if (s->key == PG_XA_COUNT)
		return s->asc ? l->count < r->count : l->count > r->count;
	if (s->key == PG_XA_FUNC) {
		int c = strcmp(l->func, r->func);

		return s->asc ? c < 0 : c > 0;
	}
	{
		double a = key_of(l, s->key), b = key_of(r, s->key);

		return s->asc ? a < b : a > b;
	}
}

/* libstdc++'s std::sort, step for step (introsort, median of three moved
 * to the front, unguarded partition, heap sort past 2 log2 n levels, and
 * the final insertion sort over 16-element runs), so that rows with equal
 * keys end in the order account prints them. */
typedef struct row *rowp;
#define LESS(x, y) less(s, (x), (y))

static void swp(rowp *a, rowp *b) { rowp t = *a; *a = *b; *b = t; }

static void push_heap(const struct sorter *s, rowp *f, long hole, long top, rowp v)
{
	long parent = (hole - 1) / 2;

	while (hole > top && LESS(f[parent], v)) {
		f[hole] = f[parent];
		hole = parent;
		parent = (hole - 1) / 2;
	}
	f[hole] = v;
}

static void adjust_heap(const struct sorter *s, rowp *f, long hole, long len, rowp v)
{
	long top = hole, child = hole;

	while (child < (len - 1) / 2) {
		child = 2 * (child + 1);
		if (LESS(f[child], f[child - 1]))
			child--;
		f[hole] = f[child];
		hole = child;
	}
	if ((len & 1) == 0 && child == (len - 2) / 2) {
		child = 2 * (child + 1);
		f[hole] = f[child - 1];
		hole = child - 1;
	}
	push_heap(s, f, hole, top, v);
}

static void heap_sort(const struct sorter *s, rowp *f, rowp *l)
{
	long len = l - f;

	if (len >= 2)
		for (long parent = (len - 2) / 2;; parent--) {
			adjust_heap(s, f, parent, len, f[parent]);
			if (!parent)
				break;
		}
	while (l - f > 1) {
		rowp v;

		--l;
		v = *l;
		*l = *f;
		adjust_heap(s, f, 0, l - f, v);
	}
}

static void move_median_to_first(const struct sorter *s, rowp *res, rowp *a, rowp *b, rowp *c)
{
	if (LESS(*a, *b)) {
		if (LESS(*b, *c))
			swp(res, b);
		else if (LESS(*a, *c))
			swp(res, c);
		else
			swp(res, a);
	} else if (LESS(*a, *c)) {
		swp(res, a);
	} else if (LESS(*b, *c)) {
		swp(res, c);
	} else {
		swp(res, b);
	}
}

static rowp *unguarded_partition(const struct sorter *s, rowp *f, rowp *l, rowp *pivot)
{
	for (;;) {
		while (LESS(*f, *pivot))
			f++;
		--l;
		while (LESS(*pivot, *l))
			--l;
		if (!(f < l))
			return f;
		swp(f, l);
		f++;
	}
}

static void introsort_loop(const struct sorter *s, rowp *f, rowp *l, long depth)
{
	while (l - f > 16) {
		rowp *cut, *mid;

		if (!depth) {
			heap_sort(s, f, l);
			return;
		}
		depth--;
		mid = f + (l - f) / 2;
		move_median_to_first(s, f, f + 1, mid, l - 1);
		cut = unguarded_partition(s, f + 1, l, f);
		introsort_loop(s, cut, l, depth);
		l = cut;
	}
}

static void unguarded_linear_insert(const struct sorter *s, rowp *l)
{
	rowp v = *l, *next = l - 1;

	while (LESS(v, *next)) {
		*l = *next;
		l = next;
		--next;
	}
	*l = v;
}

static void insertion_sort(const struct sorter *s, rowp *f, rowp *l)
{
	if (f == l)
		return;
	for (rowp *i = f + 1; i != l; i++) {
		if (LESS(*i, *f)) {
			rowp v = *i;

			memmove(f + 1, f, (size_t)(i - f) * sizeof(*f));
			*f = v;
		} else {
			unguarded_linear_insert(s, i);
		}
	}
}

static void std_sort(const struct sorter *s, rowp *f, rowp *l)
{
	long n = l - f, lg = 0;

	if (f == l)
		return;
	while ((1l << (lg + 1)) <= n)
		lg++;
	introsort_loop(s, f, l, 2 * lg);
	if (n > 16) {
		insertion_sort(s, f, f + 16);
		for (rowp *i = f + 16; i != l; i++)
			unguarded_linear_insert(s, i);
	} else {
		insertion_sort(s, f, l);
	}
}

/* ------------------------------------------------------------ names */

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* account's FuncIdConversionHelper: the symbolizer's function name and
 * file:line:column of the function's address; "#ID" and "(unknown)" for
 * an ID without one; for a YAML map, where the symbolizer finds nothing,
 * its "@(hex)" and "<invalid>:0:0" */
static int name_row(struct row *r, const pg_xray_map *m)
{
	const struct pg_xray_func *f = m ? pg_xray_map_func(m, (uint32_t)r->id) : NULL;

	if (!f) {
		if (asprintf(&r->own_func, "#%" PRId32, r->id) < 0)
			return -ENOMEM;
		r->func = r->own_func;
		r->debug = "(unknown)";
		return 0;
	}
	if (!pg_xray_map_binary(m)) {
		if (asprintf(&r->own_func, "@(%" PRIx64 ")", f->addr) < 0)
			return -ENOMEM;
		r->func = r->own_func;
		r->debug = "<invalid>:0:0";
		return 0;
	}
	r->func = f->name;
	if (!f->file) {
		r->debug = "<invalid>:0:0";
		return 0;
	}
	if (asprintf(&r->own_debug, "%s:%u:%u", base_name(f->file), f->line, f->column) < 0)
		return -ENOMEM;
	r->debug = r->own_debug;
	return 0;
}

/* ----------------------------------------------------------- output */

static void print_rows(FILE *out, const struct pg_xray_account_opts *o, rowp *v, size_t n,
		       size_t total)
{
	if (o->csv) {
		fputs("funcid,count,min,median,90%ile,99%ile,max,sum,debug,function\n", out);
		for (size_t i = 0; i < n; i++) {
			const struct row *r = v[i];

			/* raw_ostream << double: "%.6e" */
			fprintf(out, "%" PRId32 ",%" PRIu64 ",%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,\"%s\",\"%s\"\n",
				r->id, r->count, r->min, r->med, r->p90, r->p99, r->max, r->sum,
				r->debug, r->func);
		}
		return;
	}
	fprintf(out, "Functions with latencies: %zu\n", total);
	fprintf(out, "%9s %10s [%9s, %9s, %9s, %9s, %9s] %9s  %-12s\n", "funcid", "count", "min",
		"med", "90p", "99p", "max", "sum", "function");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = v[i];

		/* formatv's {N,+9:f6}: "%.6f" right-aligned in 9 */
		fprintf(out, "%9" PRId32 " %10" PRIu64 " [%9.6f, %9.6f, %9.6f, %9.6f, %9.6f] %9.6f  %s: %s\n",
			r->id, r->count, r->min, r->med, r->p90, r->p99, r->max, r->sum, r->debug,
			r->func);
	}
}

static int report(struct acct *a, const pg_xray_map *m, double freq, FILE *out)
{
	size_t n = a->nfns, nb = 0, k = 0;
	struct row *rows = calloc(n ? n : 1, sizeof(*rows));
	rowp *v = calloc(n ? n : 1, sizeof(*v));
	int32_t *order = NULL;
	int ret = 0;

	if (!rows || !v)
		goto oom;
	for (size_t i = 0; i < n; i++) {
		row_stats(&a->fns[i], &rows[i], freq);
		free(a->fns[i].v);	/* the latencies are done with */
		a->fns[i].v = NULL;
		if (name_row(&rows[i], m) < 0)
			goto oom;
	}
	if (!(order = densemap_order(rows, n, &nb)) && n)
		goto oom;
	for (size_t b = 0; b < nb; b++)
		if (order[b] != INT32_MAX)
			v[k++] = &rows[order[b]];
	{
		struct sorter s = { .key = a->o->sort, .asc = !a->o->descending };

		std_sort(&s, v, v + n);
	}
	print_rows(out, a->o, v, a->o->top > 0 && (size_t)a->o->top < n ? (size_t)a->o->top : n, n);
	goto done;
oom:
	ret = pg_err(a->diag, -ENOMEM, "out of memory");
done:
	for (size_t i = 0; rows && i < n; i++) {
		free(rows[i].own_func);
		free(rows[i].own_debug);
	}
	free(order);
	free(rows);
	free(v);
	return ret;
}

int pg_xray_account(const struct pg_xray_account_opts *o, FILE *out, struct pg_diag *diag,
		    struct pg_xray_account_stats *st)
{
	struct acct a = { .o = o, .diag = diag, .st = st, .name = o->trace,
			  .big = PG_U64MAP_INIT(sizeof(size_t)),
			  .tids = PG_U64MAP_INIT(sizeof(size_t)),
			  .rdepth = PG_U64MAP_INIT(sizeof(uint32_t)),
			  .open = PG_U64MAP_INIT(sizeof(uint64_t)) };
	pg_xray_map *m = NULL;
	pg_xray *t = NULL;
	struct pg_xr_record r;
	int ret;

	memset(st, 0, sizeof(*st));
	if (o->binary && (ret = pg_xray_map_open(o->binary, diag, &m)) < 0)
		return ret;
	if ((ret = pg_xray_open(o->trace, 0, diag, &t)) < 0)
		goto out;
	while ((ret = pg_xray_next(t, &r)) > 0)
		if ((ret = account_record(&a, &r)) < 0)
			break;
	if (ret == -ENOMEM)
		pg_err(diag, ret, "out of memory");
	if (ret < 0)
		goto out;
	if (a.warned > WARN_MAX)
		pg_warn(diag, "%s: %" PRIu64 " more exits skipped (-k) without a warning each",
			o->trace, a.warned - WARN_MAX);
	for (size_t i = 0; i < a.nthr; i++)
		st->unfinished += a.thr[i].n;
	st->functions = a.nfns;
	ret = report(&a, m, (double)pg_xray_header(t)->cycle_frequency, out);
out:
	for (size_t i = 0; i < a.nfns; i++)
		free(a.fns[i].v);
	free(a.fns);
	free(a.small);
	for (size_t i = 0; i < a.nthr; i++)
		free(a.thr[i].st);
	free(a.thr);
	pg_u64map_free(&a.big);
	pg_u64map_free(&a.tids);
	pg_u64map_free(&a.rdepth);
	pg_u64map_free(&a.open);
	pg_xray_close(t);
	pg_xray_map_close(m);
	return ret;
}
