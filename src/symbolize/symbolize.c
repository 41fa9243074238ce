/* SPDX-License-Identifier: MIT */
/* Symbolizer: the code model's LOADs and MOVEs laid out on an address x
 * time plane.
 *
 * Placements are painted in time order, as perf lays out the MMAP2s of an
 * injected perf.data: a new placement replaces the overlapped parts of the
 * live ones.  Painting leaves "pieces", rectangles [start, end) x
 * [from, until) that never overlap, each naming one placement: O(1) new
 * pieces per placement, so memory stays O(placements + line rows).  The
 * live set while painting is util/paint.c's; lookups stab an
 * interval tree laid over the pieces sorted by start. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <perfgraft/symbolize.h>
#include "symbolize/script.h"
#include "util/util.h"

#define NO_FILE UINT32_MAX
#define NIL UINT32_MAX

struct row {
	uint32_t off;		/* from the function's start */
	uint32_t line, col;
	uint32_t file;		/* index in s->files, NO_FILE: "??" */
};

struct placement {
	/* what a lookup reads, first */
	const char *name;
	uint64_t start, end, code_index;
	uint64_t row0;		/* rows [row0, row0 + nrows) of s->rows */
	uint32_t nrows;
	uint32_t dump;
	/* painting order */
	uint64_t time, seq;
};

struct piece {
	uint64_t start, end, from, until;
	uint32_t pl;		/* placement index in its space */
};

struct space {
	uint32_t pid;
	struct placement *pls;
	size_t npls, plcap;
	struct piece *pieces;	/* sorted by start once frozen */
	uint64_t *maxend;	/* implicit interval tree over pieces */
	size_t npieces, pcap;
	/* elementary segments between all piece boundaries: how many pieces
	 * ever covered each, and the piece live there at the end (NIL: none);
	 * a lookup without a time is one binary search here */
	uint64_t *seg_start;
	uint32_t *seg_count, *seg_live;
	size_t nsegs;
	bool frozen;
};

struct dump {
	pg_code_source *src;	/* kept open: names point into it */
	char *path;
};

struct pg_symbolizer {
	struct pg_diag *diag;
	struct dump *dumps;
	size_t ndumps, dcap;
	struct space *spaces;
	size_t nspaces, scap;
	struct row *rows;
	size_t nrows, rcap;
	struct pg_strmap files;
	uint64_t seq;
	struct pg_symbolizer_stats st;
};

int pg_symbolizer_new(struct pg_diag *diag, pg_symbolizer **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return pg_err(diag, -ENOMEM, "out of memory");
	(*out)->diag = diag;
	return 0;
}

struct pg_diag *pg_sym_diag(pg_symbolizer *s)
{
	return s->diag;
}

void pg_symbolizer_free(pg_symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->ndumps; i++) {
		pg_code_close(s->dumps[i].src);
		free(s->dumps[i].path);
	}
	for (size_t i = 0; i < s->nspaces; i++) {
		free(s->spaces[i].pls);
		free(s->spaces[i].pieces);
		free(s->spaces[i].maxend);
		free(s->spaces[i].seg_start);
		free(s->spaces[i].seg_count);
		free(s->spaces[i].seg_live);
	}
	free(s->dumps);
	free(s->spaces);
	free(s->rows);
	pg_strmap_free(&s->files);
	free(s);
}

static struct space *space_of(pg_symbolizer *s, uint32_t pid)
{
	struct space *sp;

	for (size_t i = 0; i < s->nspaces; i++)
		if (s->spaces[i].pid == pid)
			return &s->spaces[i];
	if (!pg_grow((void **)&s->spaces, &s->scap, s->nspaces + 1, sizeof(*s->spaces)))
		return NULL;
	sp = &s->spaces[s->nspaces++];
	memset(sp, 0, sizeof(*sp));
	sp->pid = pid;
	s->st.pids++;
	return sp;
}

/* The LOAD's line rows, as the image builder writes them into
 * .debug_line (the model's rows: same offsets, same names), so a lookup
 * here answers what addr2line answers on the image. */
static int add_rows(pg_symbolizer *s, const struct pg_code_event *ld, struct placement *pl)
{
	size_t n0 = s->nrows;
	const char *last = NULL;
	uint32_t last_idx = NO_FILE;

	pl->row0 = n0;
	pl->nrows = 0;
	s->st.dropped_lines += ld->dropped_lines;
	if (!ld->nlines)
		return 0;
	if (!pg_grow((void **)&s->rows, &s->rcap, n0 + ld->nlines, sizeof(*s->rows)))
		return pg_err(s->diag, -ENOMEM, "out of memory");
	for (size_t i = 0; i < ld->nlines; i++) {
		const struct pg_code_line *l = &ld->lines[i];
		struct row *r;

		if (l->off > UINT32_MAX) {	/* beyond what a row holds */
			s->st.dropped_lines++;
			continue;
		}
		r = &s->rows[s->nrows++];
		r->off = (uint32_t)l->off;
		r->line = l->line;
		r->col = l->column;
		if (!l->file || !l->file[0]) {
			r->file = NO_FILE;
		} else if (l->file == last) {
			r->file = last_idx;
		} else {
			bool added;
			long idx = pg_strmap_intern(&s->files, l->file, &added);

			if (idx < 0)
				return pg_err(s->diag, -ENOMEM, "out of memory");
			last = l->file;
			last_idx = r->file = (uint32_t)idx;
		}
	}
	pl->nrows = (uint32_t)(s->nrows - n0);
	s->st.lines += pl->nrows;
	return 0;
}

static int add_placement(pg_symbolizer *s, struct space *sp, struct placement *pl)
{
	if (!pg_grow((void **)&sp->pls, &sp->plcap, sp->npls + 1, sizeof(*sp->pls)))
		return pg_err(s->diag, -ENOMEM, "out of memory");
	sp->pls[sp->npls++] = *pl;
	sp->frozen = false;
	return 0;
}

struct pending_move {
	uint64_t seq, time, code_index, start, size;
};

static int cmp_index(const void *a, const void *b, void *ctx)
{
	const struct placement *pls = ctx;
	const uint32_t *x = a, *y = b;
	const struct placement *p = &pls[*x], *q = &pls[*y];

	if (p->code_index != q->code_index)
		return p->code_index < q->code_index ? -1 : 1;
	return p->seq < q->seq ? -1 : (p->seq > q->seq);
}

/* A MOVE places the code of the latest earlier LOAD of its code_index. */
static int add_moves(pg_symbolizer *s, struct space *sp, size_t first_pl,
		     const struct pending_move *mv, size_t nmv, const char *name)
{
	size_t nl = sp->npls - first_pl;
	uint32_t *idx;
	int ret = 0;

	if (!nmv)
		return 0;
	idx = malloc((nl ? nl : 1) * sizeof(*idx));
	if (!idx)
		return pg_err(s->diag, -ENOMEM, "out of memory");
	for (size_t i = 0; i < nl; i++)
		idx[i] = (uint32_t)(first_pl + i);
	qsort_r(idx, nl, sizeof(*idx), cmp_index, sp->pls);
	for (size_t m = 0; m < nmv && !ret; m++) {
		size_t lo = 0, hi = nl;
		struct placement pl;

		/* last LOAD with this code_index and an earlier seq */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			const struct placement *p = &sp->pls[idx[mid]];

			if (p->code_index < mv[m].code_index ||
			    (p->code_index == mv[m].code_index && p->seq < mv[m].seq))
				lo = mid + 1;
			else
				hi = mid;
		}
		if (!lo || sp->pls[idx[lo - 1]].code_index != mv[m].code_index) {
			pg_warn(s->diag, "%s: MOVE of code_index %llu, which no earlier LOAD has; ignored",
				name, (unsigned long long)mv[m].code_index);
			continue;
		}
		pl = sp->pls[idx[lo - 1]];
		pl.start = mv[m].start;
		pl.end = mv[m].start + mv[m].size < mv[m].start ? UINT64_MAX : mv[m].start + mv[m].size;
		pl.time = mv[m].time;
		pl.seq = mv[m].seq;
		ret = add_placement(s, sp, &pl);
		s->st.moves++;
	}
	free(idx);
	return ret;
}

/* PG_SYM_TIME_END means "never replaced": a record time can not be it */
static uint64_t cap_time(uint64_t t)
{
	return t == PG_SYM_TIME_END ? t - 1 : t;
}

static int add_dump(pg_symbolizer *s, pg_code_source *src, const char *path)
{
	const struct pg_code_process *proc = pg_code_process(src);
	struct pending_move *mv = NULL;
	size_t nmv = 0, mvcap = 0, first_pl;
	struct pg_code_event ev;
	struct pg_symbolizer_stats st0;
	struct space *sp;
	struct dump *d;
	uint32_t di = (uint32_t)s->ndumps;
	int ret;

	if (!pg_grow((void **)&s->dumps, &s->dcap, s->ndumps + 1, sizeof(*s->dumps)) ||
	    !(sp = space_of(s, proc->pid))) {
		pg_code_close(src);
		return pg_err(s->diag, -ENOMEM, "out of memory");
	}
	d = &s->dumps[s->ndumps++];
	d->src = src;
	d->path = strdup(path);
	if (!d->path)
		return pg_err(s->diag, -ENOMEM, "out of memory");
	s->st.dumps++;
	first_pl = sp->npls;
	st0 = s->st;
	while ((ret = pg_code_next(src, &ev)) > 0) {
		if (ev.kind == PG_CODE_LOAD) {
			struct placement pl = {
				.name = ev.name, .start = ev.addr,
				.code_index = ev.id, .time = cap_time(pg_code_since(src)),
				.seq = s->seq++, .dump = di,
			};

			if (!ev.size) {
				s->st.empty_loads++;
				continue;
			}
			pl.end = ev.addr + ev.size < ev.addr ? UINT64_MAX : ev.addr + ev.size;
			if ((ret = add_rows(s, &ev, &pl)) < 0 ||
			    (ret = add_placement(s, sp, &pl)) < 0)
				break;
			s->st.loads++;
		} else if (ev.kind == PG_CODE_MOVE) {
			if (!ev.size)
				continue;
			if (!pg_grow((void **)&mv, &mvcap, nmv + 1, sizeof(*mv))) {
				ret = pg_err(s->diag, -ENOMEM, "out of memory");
				break;
			}
			mv[nmv++] = (struct pending_move){ .seq = s->seq++, .time = cap_time(ev.time),
				.code_index = ev.id, .start = ev.addr, .size = ev.size };
		}
	}
	if (ret == 0)
		ret = add_moves(s, sp, first_pl, mv, nmv, path);
	free(mv);
	if (ret < 0) {
		/* a damaged dump is refused whole: forget its placements */
		sp->npls = first_pl;
		st0.dumps--;	/* counted above; it is not one of them */
		s->st = st0;
		return ret;
	}
	return 0;
}

int pg_symbolizer_add_source(pg_symbolizer *s, pg_code_source *src)
{
	return add_dump(s, src, pg_code_path(src));
}

int pg_symbolizer_add(pg_symbolizer *s, const char *path)
{
	pg_code_source *src;
	int ret = pg_code_open(path, s->diag, &src);

	return ret < 0 ? ret : add_dump(s, src, path);
}

int pg_symbolizer_add_mem(pg_symbolizer *s, const void *buf, size_t len, const char *name)
{
	pg_code_source *src;
	int ret = pg_code_open_mem(buf, len, name, s->diag, &src);

	return ret < 0 ? ret : add_dump(s, src, name);
}

/* ---- painting ---- */

static int emit(pg_symbolizer *s, struct space *sp, uint64_t start, uint64_t end,
		uint64_t from, uint64_t until, uint32_t pl)
{
	if (start >= end)
		return 0;
	if (!pg_grow((void **)&sp->pieces, &sp->pcap, sp->npieces + 1, sizeof(*sp->pieces)))
		return pg_err(s->diag, -ENOMEM, "out of memory");
	sp->pieces[sp->npieces++] = (struct piece){ start, end, from, until, pl };
	return 0;
}

static int cmp_order(const void *a, const void *b, void *ctx)
{
	const struct placement *pls = ctx;
	const struct placement *p = &pls[*(const uint32_t *)a], *q = &pls[*(const uint32_t *)b];

	if (p->time != q->time)
		return p->time < q->time ? -1 : 1;
	return p->seq < q->seq ? -1 : (p->seq > q->seq);
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->from < y->from ? -1 : (x->from > y->from);
}

static uint64_t build_maxend(struct space *sp, size_t lo, size_t hi)
{
	size_t mid;
	uint64_t m, r;

	if (lo >= hi)
		return 0;
	mid = lo + (hi - lo) / 2;
	m = sp->pieces[mid].end;
	r = build_maxend(sp, lo, mid);
	if (r > m)
		m = r;
	r = build_maxend(sp, mid + 1, hi);
	if (r > m)
		m = r;
	return sp->maxend[mid] = m;
}

struct bound {
	uint64_t at;
	int32_t delta;		/* +1 a piece starts, -1 one ends */
	uint32_t piece;
};

static int cmp_bound(const void *a, const void *b)
{
	const struct bound *x = a, *y = b;

	if (x->at != y->at)
		return x->at < y->at ? -1 : 1;
	return (x->delta > y->delta) - (x->delta < y->delta);
}

/* Sweeps the piece boundaries into segments of constant coverage. */
static int build_segments(pg_symbolizer *s, struct space *sp)
{
	size_t nb = sp->npieces * 2, n = 0;
	struct bound *b = malloc((nb ? nb : 1) * sizeof(*b));
	uint32_t live = NIL, count = 0;

	free(sp->seg_start);
	free(sp->seg_count);
	free(sp->seg_live);
	sp->seg_start = malloc((nb ? nb : 1) * sizeof(*sp->seg_start));
	sp->seg_count = malloc((nb ? nb : 1) * sizeof(*sp->seg_count));
	sp->seg_live = malloc((nb ? nb : 1) * sizeof(*sp->seg_live));
	if (!b || !sp->seg_start || !sp->seg_count || !sp->seg_live) {
		free(b);
		return pg_err(s->diag, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < sp->npieces; i++) {
		b[2 * i] = (struct bound){ sp->pieces[i].start, +1, (uint32_t)i };
		b[2 * i + 1] = (struct bound){ sp->pieces[i].end, -1, (uint32_t)i };
	}
	qsort(b, nb, sizeof(*b), cmp_bound);
	for (size_t i = 0; i < nb;) {
		uint64_t at = b[i].at;

		for (; i < nb && b[i].at == at; i++) {
			const struct piece *p = &sp->pieces[b[i].piece];

			count += (uint32_t)b[i].delta;
			if (p->until == PG_SYM_TIME_END)
				live = b[i].delta > 0 ? b[i].piece : (live == b[i].piece ? NIL : live);
		}
		if (n && sp->seg_count[n - 1] == count && sp->seg_live[n - 1] == live)
			continue;	/* nothing changed here */
		sp->seg_start[n] = at;
		sp->seg_count[n] = count;
		sp->seg_live[n] = live;
		n++;
	}
	sp->nsegs = n;
	free(b);
	return 0;
}

/* A piece painted over (or live at the end: until PG_SYM_TIME_END). */
struct closing {
	pg_symbolizer *s;
	struct space *sp;
	uint64_t until;
};

static int close_piece(void *ctx, uint64_t start, uint64_t end, uint64_t from, uint32_t pl)
{
	struct closing *c = ctx;

	return emit(c->s, c->sp, start, end, from, c->until, pl);
}

static int freeze_space(pg_symbolizer *s, struct space *sp)
{
	struct pg_paint t = { 0 };
	struct closing c = { .s = s, .sp = sp };
	uint32_t *order;
	int ret = 0;

	sp->npieces = 0;
	free(sp->maxend);
	sp->maxend = NULL;
	order = malloc((sp->npls ? sp->npls : 1) * sizeof(*order));
	if (!order)
		return pg_err(s->diag, -ENOMEM, "out of memory");
	for (size_t i = 0; i < sp->npls; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, sp->npls, sizeof(*order), cmp_order, sp->pls);
	for (size_t k = 0; k < sp->npls && !ret; k++) {
		const struct placement *pl = &sp->pls[order[k]];

		c.until = pl->time;
		ret = pg_paint(&t, pl->start, pl->end, pl->time, order[k], close_piece, &c);
	}
	/* what is live at the end stays live for ever */
	c.until = PG_SYM_TIME_END;
	if (!ret)
		ret = pg_paint_each(&t, close_piece, &c);
	if (ret == -ENOMEM)
		pg_err(s->diag, -ENOMEM, "out of memory");
	free(order);
	pg_paint_free(&t);
	if (ret)
		return ret;
	if (sp->npieces)
		qsort(sp->pieces, sp->npieces, sizeof(*sp->pieces), cmp_piece);
	sp->maxend = malloc((sp->npieces ? sp->npieces : 1) * sizeof(*sp->maxend));
	if (!sp->maxend)
		return pg_err(s->diag, -ENOMEM, "out of memory");
	build_maxend(sp, 0, sp->npieces);
	if ((ret = build_segments(s, sp)) < 0)
		return ret;
	sp->frozen = true;
	return 0;
}

int pg_symbolizer_freeze(pg_symbolizer *s)
{
	s->st.pieces = 0;
	for (size_t i = 0; i < s->nspaces; i++) {
		int ret;

		if (!s->spaces[i].frozen && (ret = freeze_space(s, &s->spaces[i])) < 0)
			return ret;
		s->st.pieces += s->spaces[i].npieces;
	}
	return 0;
}

/* ---- lookups ---- */

/* PG_SYM_TIME_END asks for what stayed live */
static bool live_at(const struct piece *p, uint64_t t)
{
	return p->from <= t && (t < p->until || p->until == PG_SYM_TIME_END);
}

struct stab {
	uint64_t addr, time;
	const struct piece *hit;
};

static void stab(const struct space *sp, size_t lo, size_t hi, struct stab *q)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct piece *p = &sp->pieces[mid];

		if (sp->maxend[mid] <= q->addr)
			return;
		stab(sp, lo, mid, q);
		if (q->hit || p->start > q->addr)
			return;
		if (p->end > q->addr && live_at(p, q->time)) {
			q->hit = p;	/* pieces never overlap: the only one */
			return;
		}
		lo = mid + 1;
	}
}

static void fill(const pg_symbolizer *s, const struct space *sp, const struct piece *p,
		 uint64_t addr, struct pg_sym *out)
{
	const struct placement *pl = &sp->pls[p->pl];

	memset(out, 0, sizeof(*out));
	out->name = pl->name;
	out->start = pl->start;
	out->size = pl->end - pl->start;
	out->offset = addr - pl->start;
	out->code_index = pl->code_index;
	out->time = p->from;
	out->until = p->until;
	out->pid = sp->pid;
	out->dump = s->dumps[pl->dump].path;
}

static void fill_line(const pg_symbolizer *s, const struct placement *pl, struct pg_sym *out)
{
	const struct row *r;
	size_t lo = 0, hi = pl->nrows;

	if (!pl->nrows)
		return;
	r = s->rows + pl->row0;

	/* last row at or below the offset; an equal offset's last row wins,
	 * the earlier ones cover nothing */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].off <= out->offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return;
	r += lo - 1;
	out->file = r->file == NO_FILE ? "??" : s->files.keys[r->file];
	out->line = r->line;
	out->column = r->col;
}

/* The piece holding addr at time in a frozen space, or NULL; *count gets
 * how many pieces ever covered addr.  The segment search has no branches
 * on the data, so that the searches of a batch overlap in the CPU. */
static const struct piece *find(const struct space *sp, uint64_t addr, uint64_t time,
				uint32_t *count)
{
	size_t lo = 0, len = sp->nsegs;
	struct stab q = { .addr = addr, .time = time };

	*count = 0;
	while (len > 1) {
		size_t half = len / 2;

		lo = sp->seg_start[lo + half] <= addr ? lo + half : lo;
		len -= half;
	}
	if (!sp->nsegs || sp->seg_start[lo] > addr || !sp->seg_count[lo])
		return NULL;
	*count = sp->seg_count[lo];
	if (time == PG_SYM_TIME_END)
		return sp->seg_live[lo] == NIL ? NULL : &sp->pieces[sp->seg_live[lo]];
	stab(sp, 0, sp->npieces, &q);
	return q.hit;
}

static void answer(const pg_symbolizer *s, const struct space *sp, const struct piece *p,
		   uint64_t addr, uint32_t count, struct pg_sym *out)
{
	fill(s, sp, p, addr, out);
	fill_line(s, &sp->pls[p->pl], out);
	out->reused = count - 1;
}

static int lookup(pg_symbolizer *s, struct space *sp, uint64_t addr, uint64_t time,
		  struct pg_sym *out)
{
	const struct piece *p;
	uint32_t count;
	int ret;

	if (!sp->frozen && (ret = pg_symbolizer_freeze(s)) < 0)
		return ret;
	p = find(sp, addr, time, &count);
	if (!p)
		return 0;
	answer(s, sp, p, addr, count, out);
	return 1;
}

int pg_symbolize(pg_symbolizer *s, uint32_t pid, uint64_t addr, uint64_t time,
		 struct pg_sym *out)
{
	for (size_t i = 0; i < s->nspaces; i++) {
		int ret;

		if (pid != PG_SYM_ANY_PID && s->spaces[i].pid != pid)
			continue;
		ret = lookup(s, &s->spaces[i], addr, time, out);
		if (ret)
			return ret;
	}
	return 0;
}

/* Lookups in batches: each step of every lookup's chain of dependent
 * loads (segment, piece, placement, rows and name) is prefetched for the
 * whole batch before the next step needs it, so the cache misses of
 * different addresses overlap instead of queueing. */
#define BATCH 32

int pg_symbolize_batch(pg_symbolizer *s, uint32_t pid, size_t n, const uint64_t *addrs,
		       const uint64_t *times, struct pg_sym *out, int *found)
{
	struct space *sp = NULL;
	int ret;

	for (size_t i = 0; i < s->nspaces; i++) {
		if (pid != PG_SYM_ANY_PID && s->spaces[i].pid != pid)
			continue;
		if (sp) {	/* several processes: first match in add order */
			sp = NULL;
			break;
		}
		sp = &s->spaces[i];
	}
	if (!sp || !sp->frozen) {
		for (size_t i = 0; i < n; i++) {
			found[i] = ret = pg_symbolize(s, pid, addrs[i], times ? times[i] : PG_SYM_TIME_END, &out[i]);
			if (ret < 0)
				return ret;
		}
		return 0;
	}
	for (size_t b = 0; b < n; b += BATCH) {
		size_t m = n - b < BATCH ? n - b : BATCH;
		const struct piece *hit[BATCH];
		uint32_t count[BATCH];

		for (size_t i = 0; i < m; i++) {
			hit[i] = find(sp, addrs[b + i], times ? times[b + i] : PG_SYM_TIME_END,
				      &count[i]);
			if (hit[i])
				__builtin_prefetch(hit[i]);
		}
		for (size_t i = 0; i < m; i++)
			if (hit[i])
				__builtin_prefetch(&sp->pls[hit[i]->pl]);
		for (size_t i = 0; i < m; i++) {
			if (hit[i]) {
				const struct placement *pl = &sp->pls[hit[i]->pl];

				__builtin_prefetch(pl->name);
				if (pl->nrows)
					__builtin_prefetch(&s->rows[pl->row0 + pl->nrows / 2]);
			}
		}
		for (size_t i = 0; i < m; i++) {
			found[b + i] = hit[i] != NULL;
			if (!hit[i])
				continue;
			answer(s, sp, hit[i], addrs[b + i], count[i], &out[b + i]);
		}
	}
	return 0;
}

bool pg_symbolizer_has_pid(const pg_symbolizer *s, uint32_t pid)
{
	for (size_t i = 0; i < s->nspaces; i++)
		if (s->spaces[i].pid == pid)
			return true;
	return false;
}

size_t pg_symbolizer_pids(const pg_symbolizer *s, uint32_t *pids, size_t max)
{
	for (size_t i = 0; i < s->nspaces && i < max; i++)
		pids[i] = s->spaces[i].pid;
	return s->nspaces;
}

int pg_symbolizer_live(pg_symbolizer *s, uint32_t pid, uint64_t time,
		       pg_sym_live_fn cb, void *ctx)
{
	struct space *sp = NULL;
	int ret;

	for (size_t i = 0; i < s->nspaces && !sp; i++)
		if (pid == PG_SYM_ANY_PID || s->spaces[i].pid == pid)
			sp = &s->spaces[i];
	if (!sp)
		return 0;
	if (!sp->frozen && (ret = pg_symbolizer_freeze(s)) < 0)
		return ret;
	for (size_t i = 0; i < sp->npieces; i++) {
		const struct piece *p = &sp->pieces[i];
		struct pg_sym sym;

		if (!live_at(p, time))
			continue;
		fill(s, sp, p, p->start, &sym);
		sym.start = p->start;
		sym.size = p->end - p->start;
		if ((ret = cb(ctx, &sym)) != 0)
			return ret;
	}
	return 0;
}

void pg_symbolizer_stats(const pg_symbolizer *s, struct pg_symbolizer_stats *st)
{
	pg_sized_out(st, &s->st, sizeof(s->st));
}
