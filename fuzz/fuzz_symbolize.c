/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the symbolizer's index (src/symbolize/symbolize.c)
 * on hostile jitdumps.  The input is a jitdump; it is added with
 * pg_symbolizer_add_mem() (when the last byte is odd, added a second time
 * after a lookup has built the index once, so that the index is rebuilt:
 * as another dump of the same process or, with bit 1 of that byte set, as
 * a copy with another header pid), then frozen.  A brute-force model
 * of the time rule (fuzz_symcheck.h) walks the same records; then:
 *
 * - lookups at addresses and times derived from the placements (each
 *   start - 1, start, middle, end - 1 and end; each time - 1, time,
 *   time + 1; 0 and the end) must give the model's answer: the same
 *   function, start, size, time, until and reuse count, offset < size and
 *   start + offset == addr; the any-pid lookup must give the answer of
 *   the first process (in add order) that has one, a pid without dumps
 *   none;
 * - pg_symbolizer_live() at those times must report pieces in address
 *   order, never overlapping, each live then and each inside its function
 *   (a lookup at its first and last byte names the same function with
 *   start = piece start - offset and offset + piece size <= size), and
 *   every address a lookup found at that time lies in a reported piece;
 *   a nonzero callback return stops the walk and is returned;
 * - pg_symbolize_batch() over those addresses (one time for all, and
 *   times mixed; frozen, and once right after an add, not frozen) must
 *   answer field for field as pg_symbolize() one at a time;
 * - loads + moves in the stats match the model.
 *
 * Without a model (more than SYM_MODEL_MAX placements) only the
 * model-free checks run. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_symcheck.h"

#define MAX_ADDR_PLS 24	/* placements whose addresses are asked */
#define MAX_TIME_PLS 6	/* placements whose times are asked */
#define MAX_PIECES 4096	/* pieces of a live walk checked */

struct live {
	struct pg_sym *p;
	size_t n, cap;
	bool truncated;
	uint64_t time;
};

static int live_cb(void *ctx, const struct pg_sym *sym)
{
	struct live *lv = ctx;

	if (lv->n == lv->cap) {
		size_t cap = lv->cap ? 2 * lv->cap : 64;
		struct pg_sym *n;

		if (cap > MAX_PIECES) {
			lv->truncated = true;
			return 0;
		}
		n = realloc(lv->p, cap * sizeof(*n));
		if (!n) {
			lv->truncated = true;
			return 0;
		}
		lv->p = n;
		lv->cap = cap;
	}
	if (!sym->name || !sym->dump || !sym->size)
		SYM_FAIL("live piece without a name, dump or size");
	if (sym->start + sym->size < sym->start && sym->start + sym->size)
		SYM_FAIL("live piece [%#" PRIx64 ", +%#" PRIx64 ") wraps", sym->start, sym->size);
	if (sym->file || sym->line || sym->column)
		SYM_FAIL("live piece with a line");
	if (lv->time == PG_SYM_TIME_END ? sym->until != PG_SYM_TIME_END :
	    (sym->time > lv->time || (sym->until != PG_SYM_TIME_END && sym->until <= lv->time)))
		SYM_FAIL("live piece at %#" PRIx64 " live [%" PRIu64 ", %" PRIu64 "), asked at %" PRIu64,
			 sym->start, sym->time, sym->until, lv->time);
	if (lv->n) {
		const struct pg_sym *q = &lv->p[lv->n - 1];

		if (q->start >= sym->start || q->start + q->size > sym->start ||
		    q->start + q->size < q->start)
			SYM_FAIL("live pieces [%#" PRIx64 ", +%#" PRIx64 ") and [%#" PRIx64 ", +%#" PRIx64
				 ") out of order or overlapping at %" PRIu64,
				 q->start, q->size, sym->start, sym->size, lv->time);
	}
	sink += touch_str(sym->name) + touch_str(sym->dump);
	lv->p[lv->n++] = *sym;
	return 0;
}

static int stop_cb(void *ctx, const struct pg_sym *sym)
{
	(void)sym;
	++*(int *)ctx;
	return 7;
}

/* The live piece holding addr, or NULL. */
static const struct pg_sym *live_find(const struct live *lv, uint64_t addr)
{
	size_t lo = 0, hi = lv->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (lv->p[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	if (addr - lv->p[lo - 1].start < lv->p[lo - 1].size)
		return &lv->p[lo - 1];
	return NULL;
}

static bool same_sym(const struct pg_sym *a, const struct pg_sym *b)
{
	return a->name == b->name && a->start == b->start && a->size == b->size &&
	       a->offset == b->offset && a->code_index == b->code_index && a->time == b->time &&
	       a->until == b->until && a->pid == b->pid && a->dump == b->dump &&
	       a->file == b->file && a->line == b->line && a->column == b->column &&
	       a->reused == b->reused;
}

/* pg_symbolize_batch() must answer as pg_symbolize() one at a time. */
static void batch_check(pg_symbolizer *s, uint32_t pid, size_t n, const uint64_t *addrs,
			const uint64_t *times)
{
	struct pg_sym *out = calloc(n ? n : 1, sizeof(*out)), one;
	int *found = calloc(n ? n : 1, sizeof(*found)), ret;

	if (!out || !found)
		goto out;
	ret = pg_symbolize_batch(s, pid, n, addrs, times, out, found);
	if (ret != 0)
		SYM_FAIL("pg_symbolize_batch = %d", ret);
	for (size_t i = 0; i < n; i++) {
		uint64_t t = times ? times[i] : PG_SYM_TIME_END;

		ret = pg_symbolize(s, pid, addrs[i], t, &one);
		if (ret != found[i] || (ret && !same_sym(&one, &out[i])))
			SYM_FAIL("%#" PRIx64 "@%" PRIu64 " (pid %u): batch %d %s+%#" PRIx64 " [%" PRIu64 ", %" PRIu64
				 ") reused %u, single %d %s+%#" PRIx64 " [%" PRIu64 ", %" PRIu64 ") reused %u",
				 addrs[i], t, pid, found[i], found[i] ? out[i].name : "-",
				 found[i] ? out[i].offset : 0, found[i] ? out[i].time : 0,
				 found[i] ? out[i].until : 0, found[i] ? out[i].reused : 0,
				 ret, ret ? one.name : "-", ret ? one.offset : 0, ret ? one.time : 0,
				 ret ? one.until : 0, ret ? one.reused : 0);
	}
out:
	free(out);
	free(found);
}

static void check_piece(pg_symbolizer *s, const struct sym_model *m, uint32_t pid,
			uint64_t time, const struct pg_sym *pc, uint64_t addr)
{
	struct pg_sym sym;

	if (!sym_lookup_check(s, m, pid, addr, time, &sym))
		SYM_FAIL("live piece [%#" PRIx64 ", +%#" PRIx64 ") at %" PRIu64 ": no lookup hit at %#" PRIx64,
			 pc->start, pc->size, time, addr);
	if (sym.start != pc->start - pc->offset || sym.time != pc->time ||
	    sym.until != pc->until || sym.name != pc->name || sym.code_index != pc->code_index ||
	    pc->offset > sym.size || pc->size > sym.size - pc->offset)
		SYM_FAIL("live piece [%#" PRIx64 ", +%#" PRIx64 ") offset %#" PRIx64 " [%" PRIu64 ", %" PRIu64
			 ") is not inside %s [%#" PRIx64 ", +%#" PRIx64 ") [%" PRIu64 ", %" PRIu64 ")",
			 pc->start, pc->size, pc->offset, pc->time, pc->until,
			 sym.name, sym.start, sym.size, sym.time, sym.until);
}

static void walk(pg_symbolizer *s, const struct sym_model *m, uint32_t pid, uint64_t time,
		 const uint64_t *addrs, size_t naddrs)
{
	struct live lv = { .time = time };
	int ret = pg_symbolizer_live(s, pid, time, live_cb, &lv), calls = 0;

	if (ret != 0)
		SYM_FAIL("pg_symbolizer_live = %d", ret);
	for (size_t i = 0; i < lv.n && i < 256; i++) {
		const struct pg_sym *pc = &lv.p[i];

		check_piece(s, m, pid, time, pc, pc->start);
		check_piece(s, m, pid, time, pc, pc->start + pc->size - 1);
	}
	if (!lv.truncated) {
		for (size_t i = 0; i < naddrs; i++) {
			struct pg_sym sym;

			if (pg_symbolize(s, pid, addrs[i], time, &sym) == 1 && !live_find(&lv, addrs[i]))
				SYM_FAIL("%#" PRIx64 "@%" PRIu64 " found (%s) but in no live piece",
					 addrs[i], time, sym.name);
		}
	}
	ret = pg_symbolizer_live(s, pid, time, stop_cb, &calls);
	if (ret != (lv.n ? 7 : 0) || calls != (lv.n ? 1 : 0))
		SYM_FAIL("live walk with a stopping callback: %d after %d calls", ret, calls);
	free(lv.p);
}

/* A pid no dump has. */
static uint32_t absent_pid(const struct sym_model *m)
{
	for (uint32_t pid = 0;; pid++) {
		size_t k = 0;

		while (k < m->npids && m->pids[k] != pid)
			k++;
		if (k == m->npids)
			return pid;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pg_diag diag = { 0 };
	struct sym_model m = { 0 };
	struct pg_symbolizer_stats st = { .sz = sizeof(st) };
	pg_symbolizer *s;
	uint64_t *addrs = NULL, *tv, times[3 * MAX_TIME_PLS + 3];
	size_t naddrs = 0, ntimes = 0, step;
	uint8_t mode = size ? data[size - 1] : 0, *other = NULL;
	const uint8_t *second = data;
	bool refused;
	uint32_t none;
	int r1, r2 = 0;
	struct pg_sym sym;

	if (pg_symbolizer_new(&diag, &s) < 0)
		return 0;
	r1 = pg_symbolizer_add_mem(s, data, size, "fuzz-a.dump");
	sym_model_add(&m, data, size, r1 < 0);
	if (r1 < 0 && !diag.err[0])
		SYM_FAIL("refused without a message");
	if (mode & 1) {
		/* build the index, then invalidate it with a second dump: the
		 * same one, or (mode & 2) a copy with another header pid */
		for (size_t i = 0; i < m.n && i < 4; i++)
			sym_lookup_check(s, &m, m.pl[i].pid, m.pl[i].start, PG_SYM_TIME_END, &sym);
		if ((mode & 2) && size >= 24 && (other = malloc(size))) {
			memcpy(other, data, size);
			other[20] ^= 1;	/* the pid, in either byte order */
			second = other;
		}
		r2 = pg_symbolizer_add_mem(s, second, size, "fuzz-b.dump");
		sym_model_add(&m, second, size, r2 < 0);
		if (m.n) {
			/* not frozen now: the batch falls back to single lookups */
			uint64_t a[4];
			size_t k = 0;

			for (size_t i = 0; i < m.n && k < 4; i++)
				a[k++] = m.pl[i].start;
			batch_check(s, m.pl[0].pid, k, a, NULL);
			batch_check(s, PG_SYM_ANY_PID, k, a, NULL);
		}
	}
	refused = r1 < 0 || ((mode & 1) && r2 < 0);
	if (pg_symbolizer_freeze(s) < 0)
		SYM_FAIL("pg_symbolizer_freeze: %s", diag.err);
	pg_symbolizer_stats(s, &st);
	if (!m.off && !refused && st.loads + st.moves != m.n)
		SYM_FAIL("stats: %" PRIu64 " loads + %" PRIu64 " moves, model: %zu placements",
			 st.loads, st.moves, m.n);
	for (size_t k = 0; k < m.npids; k++)
		if (!pg_symbolizer_has_pid(s, m.pids[k]))
			SYM_FAIL("pid %u not known", m.pids[k]);
	none = absent_pid(&m);
	if (pg_symbolizer_has_pid(s, none))
		SYM_FAIL("pid %u known, no dump has it", none);
	if (!m.n)
		goto out;

	/* addresses and times to ask */
	step = (m.n + MAX_ADDR_PLS - 1) / MAX_ADDR_PLS;
	addrs = malloc((5 * MAX_ADDR_PLS + 2) * sizeof(*addrs));
	if (!addrs)
		goto out;
	for (size_t i = 0; i < m.n; i += step) {
		const struct sym_pl *p = &m.pl[i];

		addrs[naddrs++] = p->start - 1;
		addrs[naddrs++] = p->start;
		addrs[naddrs++] = p->start + (p->end - p->start) / 2;
		addrs[naddrs++] = p->end - 1;
		addrs[naddrs++] = p->end;
	}
	addrs[naddrs++] = 0;
	addrs[naddrs++] = UINT64_MAX;
	step = (m.n + MAX_TIME_PLS - 1) / MAX_TIME_PLS;
	for (size_t i = 0; i < m.n; i += step) {
		times[ntimes++] = m.pl[i].time - 1;
		times[ntimes++] = m.pl[i].time;
		times[ntimes++] = m.pl[i].time + 1;
	}
	times[ntimes++] = 0;
	times[ntimes++] = PG_SYM_TIME_END;

	for (size_t t = 0; t < ntimes; t++) {
		for (size_t i = 0; i < naddrs; i++) {
			struct pg_sym any, first;
			int b = sym_lookup_check(s, &m, PG_SYM_ANY_PID, addrs[i], times[t], &any);
			int a = 0;

			/* any pid: the first process, in add order, that knows it */
			for (size_t k = 0; k < m.npids && !a; k++)
				a = sym_lookup_check(s, &m, m.pids[k], addrs[i], times[t], &first);
			if (a != b || (a && !same_sym(&any, &first)))
				SYM_FAIL("%#" PRIx64 "@%" PRIu64 ": any-pid lookup differs from the first pid's",
					 addrs[i], times[t]);
			if (pg_symbolize(s, none, addrs[i], times[t], &sym) != 0)
				SYM_FAIL("a lookup in a pid without dumps found something");
		}
		for (size_t k = 0; k < m.npids; k++)
			walk(s, &m, m.pids[k], times[t], addrs, naddrs);
	}
	/* the same lookups in bulk: one time for all, then times mixed */
	tv = malloc(naddrs * sizeof(*tv));
	if (tv) {
		for (size_t i = 0; i < naddrs; i++)
			tv[i] = times[(i * 7) % ntimes];
		for (size_t k = 0; k <= m.npids + 1; k++) {
			uint32_t pid = k < m.npids ? m.pids[k] : k == m.npids ? PG_SYM_ANY_PID : none;

			batch_check(s, pid, naddrs, addrs, NULL);
			batch_check(s, pid, naddrs, addrs, tv);
		}
		free(tv);
	}
out:
	free(addrs);
	free(m.pl);
	pg_symbolizer_free(s);
	free(other);
	return 0;
}
