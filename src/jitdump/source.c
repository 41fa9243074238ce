/* SPDX-License-Identifier: MIT */
/* pg_code_source: picks the reader by the first bytes and keeps what the
 * readers share (row sorting, strings they make, counts). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jitdump/source.h"

extern const struct pg_src_reader pg_src_reader_jitdump;	/* code.c */

/* First match wins; bytes no reader knows go to the first, whose error
 * says what is wrong with them. */
static const struct pg_src_reader *const readers[] = {
	&pg_src_reader_jitdump,
};

bool pg_code_probe(const void *buf, size_t len)
{
	for (size_t i = 0; i < sizeof(readers) / sizeof(readers[0]); i++)
		if (readers[i]->probe(buf, len))
			return true;
	return false;
}

static int open_common(const void *buf, size_t len, const uint8_t *map, const char *name,
		       struct pg_diag *diag, pg_code_source **out)
{
	pg_code_source *src = calloc(1, sizeof(*src));
	int ret;

	*out = NULL;
	if (!src || !(src->path = strdup(name))) {
		free(src);
		pg_unmap_file(map, len);
		return pg_err(diag, -ENOMEM, "%s: out of memory", name);
	}
	src->diag = diag;
	src->map = map;
	src->size = len;
	src->st.sz = sizeof(src->st);
	src->rd = readers[0];
	for (size_t i = 0; i < sizeof(readers) / sizeof(readers[0]); i++)
		if (readers[i]->probe(buf, len)) {
			src->rd = readers[i];
			break;
		}
	ret = src->rd->open(src, buf, len);
	if (ret < 0) {
		src->rd = NULL;
		pg_code_close(src);
		return ret;
	}
	*out = src;
	return 0;
}

int pg_code_open(const char *path, struct pg_diag *diag, pg_code_source **out)
{
	const uint8_t *map;
	size_t size;
	int ret = pg_map_file(path, true, diag, &map, &size);

	*out = NULL;
	return ret < 0 ? ret : open_common(map, size, map, path, diag, out);
}

int pg_code_open_mem(const void *buf, size_t len, const char *name,
		     struct pg_diag *diag, pg_code_source **out)
{
	return open_common(buf, len, NULL, name, diag, out);
}

void pg_code_close(pg_code_source *src)
{
	if (!src)
		return;
	if (src->rd)
		src->rd->close(src);
	pg_unmap_file(src->map, src->size);
	for (size_t i = 0; i < src->names.n; i++)
		free((char *)src->names.keys[i]);
	pg_strmap_free(&src->names);
	pg_paint_free(&src->held);
	free(src->lines);
	free(src->tmp);
	free(src->path);
	free(src);
}

const struct pg_code_process *pg_code_process(const pg_code_source *src)
{
	return &src->proc;
}

const char *pg_code_path(const pg_code_source *src)
{
	return src->path;
}

uint64_t pg_code_since(const pg_code_source *src)
{
	return src->since;
}

uint64_t pg_code_size(const pg_code_source *src)
{
	return src->size;
}

/* ---- since (pg_code_since): when a LOAD's range last held other code ----
 * Every LOAD and MOVE paints its range with its code index (held), every
 * UNLOAD the part its code index still holds with VACANT. */
#define VACANT 0

static uint32_t held_val(uint64_t id)
{
	return (uint32_t)(id % 0xffffffffu) + 1;	/* never VACANT */
}

static uint64_t range_end(uint64_t addr, uint64_t size)
{
	return addr + size < addr ? UINT64_MAX : addr + size;
}

struct covered {
	bool held;
	uint64_t vacated;	/* the latest time a covered part was vacated */
};

static int cover(void *ctx, uint64_t start, uint64_t end, uint64_t from, uint32_t val)
{
	struct covered *c = ctx;

	(void)start;
	(void)end;
	if (val != VACANT)
		c->held = true;
	else if (from > c->vacated)
		c->vacated = from;
	return 0;
}

/* the parts an UNLOAD covers, to paint back those of other code */
struct parts {
	struct pg_paint_node *v;
	size_t n, cap;
};

static int collect(void *ctx, uint64_t start, uint64_t end, uint64_t from, uint32_t val)
{
	struct parts *p = ctx;

	if (!pg_grow((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)))
		return -ENOMEM;
	p->v[p->n++] = (struct pg_paint_node){ .start = start, .end = end, .from = from,
					       .val = val };
	return 0;
}

static int track(pg_code_source *src, struct pg_code_event *ev)
{
	uint64_t end = range_end(ev->addr, ev->size);
	int ret = 0;

	src->since = ev->time;
	if (!ev->size)
		return 0;
	if (ev->kind == PG_CODE_LOAD) {
		struct covered c = { 0 };

		if (!src->have_first) {
			src->first_load = ev->time;
			src->have_first = true;
		}
		ret = pg_paint(&src->held, ev->addr, end, ev->time, held_val(ev->id), cover, &c);
		if (!ret && !c.held) {
			uint64_t t = c.vacated > src->first_load ? c.vacated : src->first_load;

			if (t < ev->time)
				src->since = t;
		}
	} else if (ev->kind == PG_CODE_MOVE) {
		ret = pg_paint(&src->held, ev->addr, end, ev->time, held_val(ev->id), NULL, NULL);
	} else {
		struct parts p = { 0 };
		uint32_t mine = held_val(ev->id);

		ret = pg_paint(&src->held, ev->addr, end, ev->time, VACANT, collect, &p);
		for (size_t i = 0; !ret && i < p.n; i++)
			if (p.v[i].val != mine)	/* other code now there, or vacated */
				ret = pg_paint(&src->held, p.v[i].start, p.v[i].end, p.v[i].from,
					       p.v[i].val, NULL, NULL);
		free(p.v);
	}
	if (ret)
		return pg_err(src->diag, -ENOMEM, "%s: out of memory", src->path);
	return 0;
}

int pg_code_next(pg_code_source *src, struct pg_code_event *ev)
{
	int ret;

	memset(ev, 0, sizeof(*ev));
	ret = src->rd->next(src, ev);
	if (ret > 0) {
		src->st.loads += ev->kind == PG_CODE_LOAD;
		src->st.moves += ev->kind == PG_CODE_MOVE;
		src->st.unloads += ev->kind == PG_CODE_UNLOAD;
		if (track(src, ev) < 0)
			return -ENOMEM;
	} else {
		/* the walk is over: what held code mattered only for events
		 * to come (a MOVE-heavy dump holds a span per place), and the
		 * images are written after this */
		pg_paint_free(&src->held);
	}
	return ret;
}

void pg_code_stats(const pg_code_source *src, struct pg_code_stats *st)
{
	struct pg_code_stats v = src->st;

	if (src->rd->stats)
		src->rd->stats(src, &v);
	pg_sized_out(st, &v, sizeof(v));
}

struct pg_code_line *pg_src_rows(pg_code_source *src, size_t n)
{
	if (!pg_grow((void **)&src->lines, &src->lines_cap, n ? n : 1, sizeof(*src->lines))) {
		pg_err(src->diag, -ENOMEM, "%s: out of memory", src->path);
		return NULL;
	}
	return src->lines;
}

/* A stable merge sort by offset: rows at one offset keep the producer's
 * order (the last one is what a lookup there finds). */
static void sort_rows(struct pg_code_line *a, struct pg_code_line *t, size_t n)
{
	size_t i = 1;

	while (i < n && a[i - 1].off <= a[i].off)
		i++;
	if (i >= n)
		return;		/* the common case: already in order */
	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t x = lo, y = mid, k = lo;

			while (x < mid && y < hi)
				t[k++] = a[y].off < a[x].off ? a[y++] : a[x++];
			while (x < mid)
				t[k++] = a[x++];
			while (y < hi)
				t[k++] = a[y++];
		}
		memcpy(a, t, n * sizeof(*a));
	}
}

int pg_src_rows_done(pg_code_source *src, struct pg_code_event *ev, size_t n,
		      uint64_t dropped)
{
	if (n > 1) {
		if (!pg_grow((void **)&src->tmp, &src->tmp_cap, n, sizeof(*src->tmp)))
			return pg_err(src->diag, -ENOMEM, "%s: out of memory", src->path);
		sort_rows(src->lines, src->tmp, n);
	}
	ev->lines = n ? src->lines : NULL;
	ev->nlines = n;
	ev->dropped_lines = dropped;
	src->st.dropped_lines += dropped;
	return 0;
}

const char *pg_src_keep_string(pg_code_source *src, char *s)
{
	bool added;
	long idx = pg_strmap_intern(&src->names, s, &added);

	if (idx < 0) {
		free(s);
		return NULL;
	}
	if (!added)
		free(s);
	return src->names.keys[idx];
}
