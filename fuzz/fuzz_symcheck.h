/* SPDX-License-Identifier: MIT */
/* Checks shared by the symbolizer harnesses (fuzz_symbolize, fuzz_symaddr,
 * fuzz_perfscript): what every answer of pg_symbolize() must satisfy, and
 * a brute-force model of the time rule of symbolize.h to compare answers
 * with.
 *
 * The model: every LOAD with code, and every MOVE of code_index i (the code
 * of the dump's latest earlier LOAD of i; none: ignored), is a placement
 * [start, end) from its record time on (a LOAD from its since, code.h,
 * computed here by brute force), end clamped at UINT64_MAX.  In
 * (time, file order) order a later placement replaces what it covers, so
 * at time T the code at addr is the last placement in that order with
 * time <= T (T = PG_SYM_TIME_END: of all) that covers addr; it stays there
 * until the time of the next placement in that order that covers addr.
 * A dump that pg_symbolizer_add_mem() refuses contributes nothing. */
#ifndef PG_FUZZ_SYMCHECK_H
#define PG_FUZZ_SYMCHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <perfgraft/jitdump.h>
#include <perfgraft/symbolize.h>
#include "fuzz_touch.h"

#define SYM_FAIL(...) do { \
	fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); \
	fputc('\n', stderr); \
	abort(); \
} while (0)

/* The symbolizer names a LOAD as the code model does: the jitdump's name
 * (the model's, the same bytes) with each control byte a '?'. */
static bool sym_same_name(const char *got, const char *raw)
{
	if (got == raw)
		return true;
	for (; *raw; got++, raw++) {
		unsigned char c = (unsigned char)*raw;

		if (*got != ((c < 0x20 || c == 0x7f) ? '?' : *raw))
			return false;
	}
	return !*got;
}

/* What every hit must satisfy, with or without a model. */
static void sym_check_hit(const struct pg_sym *sym, uint64_t addr, uint64_t time)
{
	if (!sym->name || !sym->dump)
		SYM_FAIL("hit at %#" PRIx64 " without a name or dump", addr);
	if (!sym->size || sym->offset >= sym->size)
		SYM_FAIL("hit at %#" PRIx64 ": offset %#" PRIx64 " not below size %#" PRIx64,
			 addr, sym->offset, sym->size);
	if (sym->start + sym->offset != addr)
		SYM_FAIL("hit at %#" PRIx64 ": start %#" PRIx64 " + offset %#" PRIx64,
			 addr, sym->start, sym->offset);
	if (sym->start + sym->size < sym->start && sym->start + sym->size != 0)
		SYM_FAIL("hit at %#" PRIx64 ": range wraps", addr);
	if (time != PG_SYM_TIME_END &&
	    (sym->time > time || (sym->until != PG_SYM_TIME_END && sym->until <= time)))
		SYM_FAIL("hit at %#" PRIx64 "@%" PRIu64 " live [%" PRIu64 ", %" PRIu64 ")",
			 addr, time, sym->time, sym->until);
	if (time == PG_SYM_TIME_END && sym->until != PG_SYM_TIME_END)
		SYM_FAIL("hit at %#" PRIx64 " at the end, replaced at %" PRIu64, addr, sym->until);
	if (!sym->file && (sym->line || sym->column))
		SYM_FAIL("hit at %#" PRIx64 ": a line without a file", addr);
	sink += touch_str(sym->name) + touch_str(sym->dump) + touch_str(sym->file) +
		sym->code_index + sym->pid + sym->reused;
}

struct sym_pl {
	uint64_t start, end, time, seq, code_index;
	const char *name;
	uint32_t pid;
};

/* the symbolizer counts a record time of UINT64_MAX (PG_SYM_TIME_END) as
 * one less, so that it is never "never replaced" */
static inline uint64_t model_time(uint64_t t)
{
	return t == UINT64_MAX ? t - 1 : t;
}

struct sym_model {
	struct sym_pl *pl;
	size_t n, cap;
	uint64_t seq;
	bool off;		/* too big to model: answers are not compared */
	uint32_t pids[4];	/* header pids, in the order first added */
	size_t npids;
};

#define SYM_MODEL_MAX 4096

static bool sym_model_push(struct sym_model *m, const struct sym_pl *p)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 64;
		struct sym_pl *n = realloc(m->pl, cap * sizeof(*n));

		if (!n)
			return false;
		m->pl = n;
		m->cap = cap;
	}
	m->pl[m->n++] = *p;
	return true;
}

static uint64_t sym_end(uint64_t start, uint64_t size)
{
	return start + size < start ? UINT64_MAX : start + size;
}

/* Which ranges held code, for a LOAD's since (code.h), by brute force:
 * disjoint segments, held by a code index or vacant since a time. */
struct sym_seg {
	uint64_t lo, hi, time;
	uint32_t val;		/* 0: vacant, else as source.c's held_val */
};
struct sym_segs {
	struct sym_seg *v;
	size_t n;
	bool oom;
};

static uint32_t sym_held_val(uint64_t id)
{
	return (uint32_t)(id % 0xffffffffu) + 1;
}

/* [lo, hi) now holds val from time on; parts it covered go into out */
static void sym_paint(struct sym_segs *s, uint64_t lo, uint64_t hi, uint64_t time, uint32_t val,
		      struct sym_segs *out)
{
	struct sym_seg *n = malloc((2 * s->n + 1) * sizeof(*n));
	size_t k = 0;

	if (!n) {
		s->oom = true;
		return;
	}
	for (size_t i = 0; i < s->n; i++) {
		struct sym_seg g = s->v[i];

		if (g.hi <= lo || g.lo >= hi) {
			n[k++] = g;
			continue;
		}
		if (out) {
			struct sym_seg c = { g.lo > lo ? g.lo : lo, g.hi < hi ? g.hi : hi,
					     g.time, g.val };
			void *o = realloc(out->v, (out->n + 1) * sizeof(*out->v));

			if (!o) {
				s->oom = true;
			} else {
				out->v = o;
				out->v[out->n++] = c;
			}
		}
		if (g.lo < lo)
			n[k++] = (struct sym_seg){ g.lo, lo, g.time, g.val };
		if (g.hi > hi)
			n[k++] = (struct sym_seg){ hi, g.hi, g.time, g.val };
	}
	n[k++] = (struct sym_seg){ lo, hi, time, val };
	free(s->v);
	s->v = n;
	s->n = k;
}

/* Adds the placements of one dump as the symbolizer would; refused is
 * whether pg_symbolizer_add_mem() refused it (then nothing is added but
 * the sequence numbers it used).  Moves are placed after the dump's
 * LOADs, as the symbolizer does, which only matters for equal times. */
static void sym_model_add(struct sym_model *m, const void *buf, size_t len, bool refused)
{
	struct pg_diag diag = { 0 };
	struct pg_jd_record rec;
	pg_jitdump *jd;
	size_t first = m->n, nloads, nmv = 0;
	struct { uint64_t seq, time, code_index, start, size; } *mv = NULL;
	uint32_t pid;
	struct sym_segs held = { 0 };
	bool have_first = false;
	uint64_t first_load = 0;
	int ret;

	if (m->off || pg_jitdump_open_mem(buf, len, "model", 0, &diag, &jd) < 0)
		return;
	pid = pg_jitdump_header(jd)->pid;
	{
		size_t k = 0;

		while (k < m->npids && m->pids[k] != pid)
			k++;
		if (k == m->npids && k < sizeof(m->pids) / sizeof(m->pids[0]))
			m->pids[m->npids++] = pid;
	}
	while ((ret = pg_jitdump_next(jd, &rec)) > 0 && !m->off) {
		if (m->n + nmv >= SYM_MODEL_MAX) {
			m->off = true;
			break;
		}
		if (rec.type == PG_JD_LOAD) {
			const struct pg_jd_load *ld = &rec.u.load;
			uint64_t end = sym_end(ld->code_addr, ld->code_size), since = rec.timestamp;
			struct sym_pl p = {
				.start = ld->code_addr, .end = end,
				.seq = m->seq++,
				.code_index = ld->code_index, .name = ld->name, .pid = pid,
			};

			if (ld->code_size) {
				struct sym_segs cov = { 0 };
				bool any_held = false;
				uint64_t vac = 0;

				if (!have_first) {
					first_load = rec.timestamp;
					have_first = true;
				}
				sym_paint(&held, ld->code_addr, end, rec.timestamp,
					  sym_held_val(ld->code_index), &cov);
				for (size_t i = 0; i < cov.n; i++) {
					any_held |= cov.v[i].val != 0;
					if (!cov.v[i].val && cov.v[i].time > vac)
						vac = cov.v[i].time;
				}
				free(cov.v);
				if (!any_held) {
					uint64_t t = vac > first_load ? vac : first_load;

					if (t < since)
						since = t;
				}
			}
			p.time = model_time(since);
			if (ld->code_size && !sym_model_push(m, &p))
				m->off = true;
		} else if (rec.type == PG_JD_UNLOAD && rec.u.unload.code_size) {
			const struct pg_jd_unload *u = &rec.u.unload;
			struct sym_segs cov = { 0 };
			uint32_t mine = sym_held_val(u->code_index);

			sym_paint(&held, u->code_addr, sym_end(u->code_addr, u->code_size),
				  rec.timestamp, 0, &cov);
			for (size_t i = 0; i < cov.n; i++)
				if (cov.v[i].val != mine)
					sym_paint(&held, cov.v[i].lo, cov.v[i].hi, cov.v[i].time,
						  cov.v[i].val, NULL);
			free(cov.v);
		} else if (rec.type == PG_JD_MOVE && rec.u.move.code_size) {
			sym_paint(&held, rec.u.move.new_code_addr,
				  sym_end(rec.u.move.new_code_addr, rec.u.move.code_size),
				  rec.timestamp, sym_held_val(rec.u.move.code_index), NULL);
			void *n = realloc(mv, (nmv + 1) * sizeof(*mv));

			if (!n) {
				m->off = true;
				break;
			}
			mv = n;
			mv[nmv].seq = m->seq++;
			mv[nmv].time = model_time(rec.timestamp);
			mv[nmv].code_index = rec.u.move.code_index;
			mv[nmv].start = rec.u.move.new_code_addr;
			mv[nmv].size = rec.u.move.code_size;
			nmv++;
		}
	}
	if ((ret < 0) != refused && !m->off)
		SYM_FAIL("add_mem %s the dump, the reader %s it",
			 refused ? "refused" : "took", ret < 0 ? "refuses" : "takes");
	nloads = m->n;
	for (size_t k = 0; k < nmv && !m->off; k++) {
		const struct sym_pl *src = NULL;
		struct sym_pl p;

		for (size_t i = first; i < nloads; i++)
			if (m->pl[i].code_index == mv[k].code_index && m->pl[i].seq < mv[k].seq)
				src = &m->pl[i];	/* loads are in seq order: the last wins */
		if (!src)
			continue;
		p = *src;
		p.start = mv[k].start;
		p.end = sym_end(mv[k].start, mv[k].size);
		p.time = mv[k].time;
		p.seq = mv[k].seq;
		if (!sym_model_push(m, &p))
			m->off = true;
	}
	free(mv);
	if (held.oom)
		m->off = true;
	free(held.v);
	if (refused)
		m->n = first;
	/* the names point into buf (open_mem maps, does not copy): they
	 * outlive the handle */
	pg_jitdump_close(jd);
}

static bool sym_pl_before(const struct sym_pl *a, const struct sym_pl *b)
{
	return a->time != b->time ? a->time < b->time : a->seq < b->seq;
}

struct sym_answer {
	const struct sym_pl *pl;	/* NULL: nothing there */
	uint64_t until;
	uint32_t covering;		/* placements ever covering addr */
};

static struct sym_answer sym_model_query(const struct sym_model *m, uint32_t pid,
					 uint64_t addr, uint64_t time)
{
	struct sym_answer a = { NULL, PG_SYM_TIME_END, 0 };
	const struct sym_pl *next = NULL;

	for (size_t i = 0; i < m->n; i++) {
		const struct sym_pl *p = &m->pl[i];

		if (p->pid != pid || addr < p->start || addr >= p->end)
			continue;
		a.covering++;
		if ((time == PG_SYM_TIME_END || p->time <= time) &&
		    (!a.pl || sym_pl_before(a.pl, p)))
			a.pl = p;
	}
	if (!a.pl)
		return a;
	for (size_t i = 0; i < m->n; i++) {
		const struct sym_pl *p = &m->pl[i];

		if (p->pid != pid || addr < p->start || addr >= p->end)
			continue;
		if (sym_pl_before(a.pl, p) && (!next || sym_pl_before(p, next)))
			next = p;
	}
	if (next)
		a.until = next->time;
	return a;
}

/* pg_symbolize(pid, addr, time) against the model (when it is on); returns
 * the symbolizer's answer (1 hit, 0 none) with *sym filled on a hit. */
static int sym_lookup_check(pg_symbolizer *s, const struct sym_model *m, uint32_t pid,
			    uint64_t addr, uint64_t time, struct pg_sym *sym)
{
	int ret = pg_symbolize(s, pid, addr, time, sym);
	struct sym_answer a;

	if (ret < 0)
		SYM_FAIL("pg_symbolize(%#" PRIx64 ", %" PRIu64 ") = %d", addr, time, ret);
	if (ret > 1)
		SYM_FAIL("pg_symbolize returned %d", ret);
	if (ret)
		sym_check_hit(sym, addr, time);
	if (ret && pid != PG_SYM_ANY_PID && sym->pid != pid)
		SYM_FAIL("asked pid %u, answered pid %u", pid, sym->pid);
	if (!m || m->off || pid == PG_SYM_ANY_PID)
		return ret;
	a = sym_model_query(m, pid, addr, time);
	if (!a.pl != !ret)
		SYM_FAIL("%#" PRIx64 "@%" PRIu64 ": symbolizer %s, model %s (%s %#" PRIx64 "+%#" PRIx64 " t=%" PRIu64 ")",
			 addr, time, ret ? "hit" : "miss", a.pl ? "hit" : "miss",
			 ret ? sym->name : a.pl->name, ret ? sym->start : a.pl->start,
			 ret ? sym->size : a.pl->end - a.pl->start, ret ? sym->time : a.pl->time);
	if (!ret)
		return 0;
	if (sym->start != a.pl->start || sym->size != a.pl->end - a.pl->start ||
	    sym->time != a.pl->time || sym->code_index != a.pl->code_index ||
	    !sym_same_name(sym->name, a.pl->name) || sym->until != a.until)
		SYM_FAIL("%#" PRIx64 "@%" PRIu64 ": symbolizer %s [%#" PRIx64 ", +%#" PRIx64 ") idx %" PRIu64
			 " [%" PRIu64 ", %" PRIu64 "), model %s [%#" PRIx64 ", +%#" PRIx64 ") idx %" PRIu64
			 " [%" PRIu64 ", %" PRIu64 ")",
			 addr, time, sym->name, sym->start, sym->size, sym->code_index, sym->time,
			 sym->until, a.pl->name, a.pl->start, a.pl->end - a.pl->start,
			 a.pl->code_index, a.pl->time, a.until);
	if (sym->reused != a.covering - 1)
		SYM_FAIL("%#" PRIx64 ": reused %u, model: %u placements cover it",
			 addr, sym->reused, a.covering);
	return 1;
}

#ifdef SYM_DEMO
/* ---- a small hand-made dump for the text harnesses (#define SYM_DEMO) ----
 * pid SYM_DEMO_PID, times in ns.  Its addresses (hex) and times are what
 * the seeds of fuzz_symaddr and fuzz_perfscript use:
 *   7f0000001000 +100 f_a    t=1000 (line rows at +0 and +40: demo.js:10, :12)
 *   7f0000001080 +100 f_b    t=2000 (replaces f_a's tail)
 *             10 +20  f_low  t=1500
 *   7f0000002000 +100 f_a    t=3000 (MOVE of code_index 1)
 *   7f0000001000 +40  f_c    t=2500 (written after later records)
 *   7f0000000f00 +400 f_d    t=4000 (replaces all of the above at 7f00000010xx)
 * ffffffffffffff00 +200 f_top t=3500 (end clamped)
 *   7f0000003000 +10  f_same, f_same2 t=2000 (equal times: file order)
 *           1000 +10  f_zero t=0
 *   7f0000004000 +0   f_empty t=100 (no code: nothing placed) */
#define SYM_DEMO_PID 4242u

struct sym_demo {
	uint8_t buf[8192];
	size_t len;
};

static void sym_demo_u32(struct sym_demo *d, uint32_t v)
{
	memcpy(d->buf + d->len, &v, 4);	/* the dump is little-endian; so is */
	d->len += 4;			/* every host this is fuzzed on */
}

static void sym_demo_u64(struct sym_demo *d, uint64_t v)
{
	memcpy(d->buf + d->len, &v, 8);
	d->len += 8;
}

static size_t sym_demo_rec(struct sym_demo *d, uint32_t id, uint64_t time)
{
	size_t at = d->len;

	sym_demo_u32(d, id);
	sym_demo_u32(d, 0);	/* size, patched by sym_demo_end */
	sym_demo_u64(d, time);
	return at;
}

static void sym_demo_end(struct sym_demo *d, size_t at)
{
	uint32_t size = (uint32_t)(d->len - at);

	memcpy(d->buf + at + 4, &size, 4);
}

static void sym_demo_load(struct sym_demo *d, uint64_t time, const char *name,
			  uint64_t addr, uint64_t size, uint64_t index)
{
	size_t at = sym_demo_rec(d, PG_JD_LOAD, time);

	sym_demo_u32(d, SYM_DEMO_PID);
	sym_demo_u32(d, SYM_DEMO_PID);
	sym_demo_u64(d, addr);	/* vma */
	sym_demo_u64(d, addr);
	sym_demo_u64(d, size);
	sym_demo_u64(d, index);
	memcpy(d->buf + d->len, name, strlen(name) + 1);
	d->len += strlen(name) + 1;
	memset(d->buf + d->len, 0xcc, size);
	d->len += size;
	sym_demo_end(d, at);
}

static void sym_demo_build(struct sym_demo *d)
{
	const uint64_t A = 0x7f0000001000ull;
	size_t at;

	d->len = 0;
	sym_demo_u32(d, PG_JITDUMP_MAGIC);
	sym_demo_u32(d, 1);		/* version */
	sym_demo_u32(d, 40);		/* header size */
	sym_demo_u32(d, 62);		/* EM_X86_64 */
	sym_demo_u32(d, 0);
	sym_demo_u32(d, SYM_DEMO_PID);
	sym_demo_u64(d, 1);
	sym_demo_u64(d, 0);		/* flags */
	at = sym_demo_rec(d, PG_JD_DEBUG_INFO, 900);
	sym_demo_u64(d, A);
	sym_demo_u64(d, 2);
	sym_demo_u64(d, A);
	sym_demo_u32(d, 10);
	sym_demo_u32(d, 0);
	memcpy(d->buf + d->len, "demo.js", 8);
	d->len += 8;
	sym_demo_u64(d, A + 0x40);
	sym_demo_u32(d, 12);
	sym_demo_u32(d, 0);
	memcpy(d->buf + d->len, "demo.js", 8);
	d->len += 8;
	sym_demo_end(d, at);
	sym_demo_load(d, 1000, "f_a", A, 0x100, 1);
	sym_demo_load(d, 2000, "f_b", A + 0x80, 0x100, 2);
	sym_demo_load(d, 1500, "f_low", 0x10, 0x20, 3);
	at = sym_demo_rec(d, PG_JD_MOVE, 3000);
	sym_demo_u32(d, SYM_DEMO_PID);
	sym_demo_u32(d, SYM_DEMO_PID);
	sym_demo_u64(d, A + 0x1000);	/* vma */
	sym_demo_u64(d, A);		/* old */
	sym_demo_u64(d, A + 0x1000);	/* new */
	sym_demo_u64(d, 0x100);
	sym_demo_u64(d, 1);
	sym_demo_end(d, at);
	sym_demo_load(d, 2500, "f_c", A, 0x40, 4);
	sym_demo_load(d, 4000, "f_d", A - 0x100, 0x400, 5);
	sym_demo_load(d, 3500, "f_top", 0xffffffffffffff00ull, 0x200, 6);
	sym_demo_load(d, 2000, "f_same", A + 0x2000, 0x10, 7);
	sym_demo_load(d, 2000, "f_same2", A + 0x2000, 0x10, 8);
	sym_demo_load(d, 0, "f_zero", 0x1000, 0x10, 9);
	sym_demo_load(d, 100, "f_empty", A + 0x3000, 0, 10);
	at = sym_demo_rec(d, PG_JD_CLOSE, 5000);
	sym_demo_end(d, at);
}

/* The demo dump loaded and frozen, with its model: shared, read-only
 * after set-up (lookups after freeze only read). */
static struct sym_demo sym_demo;
static pg_symbolizer *sym_demo_s;
static struct sym_model sym_demo_m;
static struct pg_diag sym_demo_diag;

static void sym_demo_setup(void)
{
	int ret;

	sym_demo_build(&sym_demo);
	if (pg_symbolizer_new(&sym_demo_diag, &sym_demo_s) < 0)
		SYM_FAIL("pg_symbolizer_new: %s", sym_demo_diag.err);
	ret = pg_symbolizer_add_mem(sym_demo_s, sym_demo.buf, sym_demo.len, "demo.dump");
	if (ret < 0)
		SYM_FAIL("demo dump refused: %s", sym_demo_diag.err);
	if (pg_symbolizer_freeze(sym_demo_s) < 0)
		SYM_FAIL("freeze: %s", sym_demo_diag.err);
	sym_model_add(&sym_demo_m, sym_demo.buf, sym_demo.len, false);
	if (sym_demo_m.n != 10)
		SYM_FAIL("demo model: %zu placements, not 10", sym_demo_m.n);
}

/* The text harnesses build the demo symbolizer once. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	sym_demo_setup();
	return 0;
}

/* A parsed address looked up in the demo dump, for this pid and any. */
static void sym_demo_lookup(uint64_t addr, uint64_t time)
{
	struct pg_sym a, b;
	int ra = sym_lookup_check(sym_demo_s, &sym_demo_m, SYM_DEMO_PID, addr, time, &a);
	int rb = sym_lookup_check(sym_demo_s, &sym_demo_m, PG_SYM_ANY_PID, addr, time, &b);

	if (ra != rb || (ra && (a.start != b.start || a.time != b.time)))
		SYM_FAIL("%#" PRIx64 "@%" PRIu64 ": pid and any-pid lookups differ", addr, time);
	if (pg_symbolize(sym_demo_s, SYM_DEMO_PID + 1, addr, time, &a) != 0)
		SYM_FAIL("a lookup in a pid without dumps found something");
}
#endif

#endif
