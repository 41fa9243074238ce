/* SPDX-License-Identifier: MIT */
/* Unit tests of the library: encoders, the reader on crafted buffers in
 * both byte orders, and images read back through libdw and libelf. */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <byteswap.h>
#include <dirent.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include <perfgraft/code.h>
#include <perfgraft/elfimage.h>
#include <perfgraft/jitdump.h>
#include <perfgraft/gperf.h>
#include <perfgraft/inject.h>
#include <perfgraft/jitwriter.h>
#include <perfgraft/perfdata.h>
#include <perfgraft/xray.h>
#include "perfdata/synth.h"
#include "util/util.h"

static int failures, checks;

#define CHECK(cond, ...) do { \
	checks++; \
	if (!(cond)) { \
		failures++; \
		fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
	} \
} while (0)

/* --- a tiny jitdump writer in either byte order --- */
struct w { struct pg_buf b; };

static void w_hdr(struct w *w, uint32_t version, uint32_t mach, uint32_t pad1)
{
	pg_buf_u32(&w->b, PG_JITDUMP_MAGIC);
	pg_buf_u32(&w->b, version);
	pg_buf_u32(&w->b, 40);
	pg_buf_u32(&w->b, mach);
	pg_buf_u32(&w->b, pad1);
	pg_buf_u32(&w->b, 4242);
	pg_buf_u64(&w->b, 123456789);
	pg_buf_u64(&w->b, 0);
}

static size_t w_rec(struct w *w, uint32_t id, uint64_t ts)
{
	size_t at = w->b.len;

	pg_buf_u32(&w->b, id);
	pg_buf_u32(&w->b, 0);	/* patched by w_end */
	pg_buf_u64(&w->b, ts);
	return at;
}

static void w_end(struct w *w, size_t at)
{
	pg_buf_put32(&w->b, at + 4, (uint32_t)(w->b.len - at));
}

static const uint8_t code1[] = { 0x55, 0x48, 0x89, 0xe5, 0x90, 0x90, 0x90, 0x90,
				 0x90, 0x90, 0x90, 0x90, 0x5d, 0xc3 };

static void w_load(struct w *w, const char *name, uint64_t addr, uint64_t idx)
{
	size_t at = w_rec(w, PG_JD_LOAD, 1000 + idx);

	pg_buf_u32(&w->b, 4242);
	pg_buf_u32(&w->b, 4243);
	pg_buf_u64(&w->b, addr);
	pg_buf_u64(&w->b, addr);
	pg_buf_u64(&w->b, sizeof(code1));
	pg_buf_u64(&w->b, idx);
	pg_buf_str(&w->b, name);
	pg_buf_add(&w->b, code1, sizeof(code1));
	w_end(w, at);
}

static void w_debug(struct w *w, uint64_t addr, uint32_t bias)
{
	size_t at = w_rec(w, PG_JD_DEBUG_INFO, 999);

	pg_buf_u64(&w->b, addr);
	pg_buf_u64(&w->b, 3);
	pg_buf_u64(&w->b, addr + bias + 0);
	pg_buf_u32(&w->b, 10);
	pg_buf_u32(&w->b, 1);
	pg_buf_str(&w->b, "a.js");
	pg_buf_u64(&w->b, addr + bias + 4);
	pg_buf_u32(&w->b, 11);
	pg_buf_u32(&w->b, 2);
	pg_buf_str(&w->b, "\xff");
	pg_buf_u64(&w->b, addr + bias + 12);
	pg_buf_u32(&w->b, 30);
	pg_buf_u32(&w->b, 3);
	pg_buf_str(&w->b, "lib/b.js");
	w_end(w, at);
}

static void test_encoders(void)
{
	struct pg_buf b = { 0 };
	static const uint8_t want[] = { 0xe5, 0x8e, 0x26, 0x7f, 0x80, 0x7f, 0x00 };
	struct pg_strmap m = { 0 };
	char keys[1000][8];
	bool added;

	pg_buf_uleb(&b, 624485);	/* DWARF spec example: e5 8e 26 */
	pg_buf_sleb(&b, -1);
	pg_buf_sleb(&b, -128);
	pg_buf_uleb(&b, 0);
	CHECK(b.len == sizeof(want) && !memcmp(b.p, want, sizeof(want)), "leb128 bytes");
	pg_buf_free(&b);
	b.big_endian = true;
	pg_buf_u32(&b, 0x01020304);
	CHECK(b.p[0] == 1 && b.p[3] == 4, "big-endian u32");
	pg_buf_free(&b);

	for (int i = 0; i < 1000; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		CHECK(pg_strmap_intern(&m, keys[i], &added) == i && added, "new key %d", i);
	}
	CHECK(pg_strmap_intern(&m, "k517", &added) == 517 && !added, "existing key");
	pg_strmap_free(&m);
}

/* pg_u64map against a plain array on random puts, gets and deletes over
 * a small key space (many collisions, reused tombstones, rehashes), plus
 * keys 0 and UINT64_MAX and a value size that is not a multiple of 8. */
/* The queue's piece digests (pg_ahash_digest_into) are each piece's own
 * XXH3-128 (pg_digest_once), taken among digest updates, with and without
 * a worker thread; and a digest fed through the queue is the digest fed at
 * once. */
static void test_ahash(void)
{
	enum { NP = 5000 };
	static uint8_t data[1 << 16], got[NP][PG_PIECE_DIGEST];
	static size_t off[NP], len[NP];
	/* XXH3-128 of nothing, canonical (big-endian) form */
	static const uint8_t empty[PG_PIECE_DIGEST] = {
		0x99, 0xaa, 0x06, 0xd3, 0x01, 0x47, 0x98, 0xd8,
		0x60, 0x01, 0xc3, 0x24, 0x46, 0x8d, 0x49, 0x7f,
	};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint8_t e[PG_PIECE_DIGEST];

	pg_digest_once(data, 0, e);
	CHECK(!memcmp(e, empty, sizeof(e)), "XXH3-128 of no bytes");
	for (size_t i = 0; i < sizeof(data); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		data[i] = (uint8_t)x;
	}
	for (int threaded = 0; threaded < 2; threaded++) {
		struct pg_ahash *h = threaded ? pg_ahash_new() : NULL;
		struct pg_digest *q = pg_digest_new(), *d = pg_digest_new();
		uint8_t a[PG_DIGEST_SIZE], b[PG_DIGEST_SIZE], want[PG_PIECE_DIGEST];
		size_t bad = 0, same = 0;

		CHECK(q && d && (h || !threaded), "allocated");
		if (!q || !d)
			return;
		for (int i = 0; i < NP; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			off[i] = (size_t)(x % (sizeof(data) - 4096));
			len[i] = (size_t)((x >> 32) % 4096);
			pg_ahash_digest_into(h, data + off[i], len[i], got[i]);
			pg_ahash_update(h, q, data + off[i], len[i]);
			pg_digest_update(d, data + off[i], len[i]);
		}
		pg_ahash_wait(h);
		for (int i = 0; i < NP; i++) {
			pg_digest_once(data + off[i], len[i], want);
			bad += memcmp(want, got[i], sizeof(want)) != 0;
			same += i && len[i] != len[i - 1] &&
				!memcmp(got[i], got[i - 1], sizeof(want));
		}
		CHECK(bad == 0, "%zu of %d piece digests wrong (worker: %d)", bad, NP, threaded);
		CHECK(same == 0, "%zu pieces of other lengths share a digest", same);
		pg_digest_final(q, a);
		pg_digest_final(d, b);
		CHECK(!memcmp(a, b, sizeof(a)), "a queued digest is the direct one (worker: %d)",
		      threaded);
		pg_ahash_free(h);
		pg_digest_free(q);
		pg_digest_free(d);
	}
}

static void test_u64map(void)
{
	enum { NK = 3000 };
	static uint64_t model[NK];	/* value + 1, 0 = absent */
	struct pg_u64map m;
	uint64_t x = 88172645463325252ull;
	size_t n = 0, bad = 0;

	pg_u64map_init(&m, sizeof(uint64_t));
	for (int step = 0; step < 200000; step++) {
		uint64_t k, *v;
		bool added;
		unsigned op;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;	/* xorshift64 */
		k = x % NK;
		op = (unsigned)(x >> 40) % 8;
		/* keys spread over the whole word: the slot comes from a hash */
		if (op < 4) {
			v = pg_u64map_put(&m, k * 0x10000000001ull, &added);
			if (!v || added != !model[k] || (added && *v))
				bad++;
			else {
				n += added;
				*v = x;
				model[k] = x + 1;
			}
		} else if (op < 6) {
			v = pg_u64map_get(&m, k * 0x10000000001ull);
			bad += model[k] ? !v || *v + 1 != model[k] : v != NULL;
		} else {
			bool was = pg_u64map_del(&m, k * 0x10000000001ull);

			bad += was != (model[k] != 0);
			n -= was;
			model[k] = 0;
		}
		bad += pg_u64map_count(&m) != n;
	}
	CHECK(!bad, "%zu mismatches with the model", bad);
	CHECK(m.nslots <= 4 * 4096, "%zu slots for at most %d keys", m.nslots, NK);
	pg_u64map_free(&m);

	{
		struct pg_u64map s = PG_U64MAP_INIT(3);
		uint8_t *a = pg_u64map_put(&s, 0, NULL), *b;

		CHECK(a && !pg_u64map_get(&s, UINT64_MAX), "key 0 alone");
		memcpy(a, "abc", 3);
		b = pg_u64map_put(&s, UINT64_MAX, NULL);
		CHECK(b && (uintptr_t)b % 8 == 0, "values 8-aligned");
		CHECK(!memcmp(pg_u64map_get(&s, 0), "abc", 3), "key 0 kept");
		CHECK(pg_u64map_del(&s, 0) && !pg_u64map_get(&s, 0) && pg_u64map_get(&s, UINT64_MAX),
		      "delete one of two");
		CHECK(!pg_u64map_del(&s, 0), "delete twice");
		pg_u64map_free(&s);
		CHECK(!pg_u64map_get(&s, UINT64_MAX) && !pg_u64map_count(&s), "freed map empty");
	}
}

/* pg_paint against a model that paints address by address: each paint's
 * parts (given to its callback) and the spans at the end, in address
 * order.  Spans aligned to 16 bytes in half the steps take the paths of
 * code reusing freed space (the same span again, one span inside the new
 * one, the tail of the one before), in the first 4096 bytes; in the last
 * third most spans follow the one before (runs) anywhere in the space, and
 * the spans are compared every 5000 steps. */
enum { PAINT_SPACE = 1 << 16, PAINT_DENSE = 4096 };
struct paint_log {
	uint64_t part[PAINT_SPACE][3];	/* start, end, from */
	size_t n;
};

static int paint_part(void *ctx, uint64_t start, uint64_t end, uint64_t from, uint32_t val)
{
	struct paint_log *lg = ctx;

	if (lg->n == PAINT_SPACE || val != (uint32_t)from * 7)
		return 1;
	lg->part[lg->n][0] = start;
	lg->part[lg->n][1] = end;
	lg->part[lg->n][2] = from;
	lg->n++;
	return 0;
}

/* the model's runs of one paint in [lo, hi) into want (those painted) */
static size_t paint_runs(const uint64_t *owner, uint64_t lo, uint64_t hi, uint64_t want[][3])
{
	size_t n = 0;

	for (uint64_t a = lo; a < hi;) {
		uint64_t b = a + 1;

		while (b < hi && owner[b] == owner[a])
			b++;
		if (owner[a]) {
			want[n][0] = a;
			want[n][1] = b;
			want[n][2] = owner[a] - 1;
			n++;
		}
		a = b;
	}
	return n;
}

static void test_paint(void)
{
	static uint64_t owner[PAINT_SPACE];	/* from + 1, 0 = never painted */
	static uint64_t want[PAINT_SPACE][3];
	static struct paint_log lg;
	struct pg_paint p = { 0 };
	uint64_t x = 2463534242ull, prev_end = 0;
	size_t bad = 0, n;

	for (uint64_t step = 0; step < 60000; step++) {
		uint64_t start, len;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (step >= 40000 && (x >> 40) % 8 && prev_end + 40 < PAINT_SPACE) {
			/* one after another, as a JIT fills its code space (the
			 * run), broken by the others now and then */
			start = prev_end + (x >> 24) % 3;
			len = 1 + (x >> 30) % 32;
		} else if (step >= 40000 && (x >> 50) % 2) {
			start = (x >> 8) % (PAINT_SPACE - 64);	/* a run starts */
			len = 1 + (x >> 20) % 32;
		} else if (x & 1) {
			start = (x >> 8) % (PAINT_DENSE / 16 - 4) * 16;
			len = 16 * (1 + (x >> 20) % 3);
		} else {
			start = (x >> 8) % (PAINT_DENSE - 64);
			len = 1 + (x >> 20) % ((x & 2) ? 64 : 8);
		}
		n = paint_runs(owner, start, start + len, want);
		lg.n = 0;
		if (pg_paint(&p, start, start + len, step, (uint32_t)step * 7, paint_part, &lg)) {
			bad++;
			break;
		}
		bad += lg.n != n || memcmp(lg.part, want, n * sizeof(want[0]));
		for (uint64_t a = start; a < start + len; a++)
			owner[a] = step + 1;
		prev_end = start + len;
		if (step % 5000 == 4999) {	/* the spans so far, the run's too */
			n = paint_runs(owner, 0, PAINT_SPACE, want);
			lg.n = 0;
			bad += pg_paint_each(&p, paint_part, &lg) || lg.n != n ||
			       memcmp(lg.part, want, n * sizeof(want[0]));
		}
	}
	n = paint_runs(owner, 0, PAINT_SPACE, want);
	lg.n = 0;
	CHECK(!pg_paint_each(&p, paint_part, &lg) && lg.n == n &&
	      !memcmp(lg.part, want, n * sizeof(want[0])), "spans at the end: %zu, model %zu", lg.n, n);
	CHECK(!bad, "%zu paints whose covered parts differ from the model's", bad);
	pg_paint_free(&p);
}

/* A callback failing in the middle of paints one after another (over
 * spans, so that it is called): pg_paint returns its value, and what is
 * left frees cleanly (the sanitized build checks the leaks). */
static int fail_at(void *ctx, uint64_t start, uint64_t end, uint64_t from, uint32_t val)
{
	int *left = ctx;

	(void)start, (void)end, (void)from, (void)val;
	return --*left ? 0 : 77;
}

static void test_paint_fail(void)
{
	size_t bad = 0;

	for (int k = 1; k <= 40; k++) {
		struct pg_paint p = { 0 };
		int left = k, ret = 0;

		for (uint64_t a = 0; a < 4000; a += 16)	/* spans to paint over */
			if (pg_paint(&p, a, a + 16, a, 1, NULL, NULL))
				bad++;
		/* then over them one after another, 24 bytes at a time */
		for (uint64_t a = 4; a < 4000 && !ret; a += 24)
			ret = pg_paint(&p, a, a + 24, a, 2, fail_at, &left);
		bad += ret != 77;
		pg_paint_free(&p);
	}
	CHECK(!bad, "%zu paints over spans whose callback failed did not return its value", bad);
}

static void on_warn(void *ctx, const char *msg)
{
	(void)ctx;
	if (getenv("UNIT_VERBOSE"))
		fprintf(stderr, "warning: %s\n", msg);
}

static void test_reader(bool be)
{
	struct w w = { .b = { .big_endian = be } };
	struct pg_diag d = { .warn = on_warn };
	struct pg_jd_record r;
	pg_jitdump *jd;
	size_t full, bounds[3], nb = 0;
	int ret;

	w_hdr(&w, 1, 62, 0);
	bounds[nb++] = w.b.len;
	w_debug(&w, 0x1000, 0);
	bounds[nb++] = w.b.len;
	w_load(&w, "f/../one", 0x1000, 0);
	bounds[nb++] = w.b.len;
	w_load(&w, "two", 0x2000, 1);
	full = w.b.len;
	ret = pg_jitdump_open_mem(w.b.p, w.b.len, "t.dump", 0, &d, &jd);
	CHECK(ret == 0, "open: %s", d.err);
	if (ret)
		return;
	CHECK(pg_jitdump_header(jd)->pid == 4242 && pg_jitdump_header(jd)->big_endian == be,
	      "header pid/byte order");
	CHECK(pg_jitdump_next(jd, &r) == 1 && r.type == PG_JD_LOAD, "first LOAD");
	CHECK(!strcmp(r.u.load.name, "f/../one") && r.u.load.code_size == sizeof(code1) &&
	      !memcmp(r.u.load.code, code1, sizeof(code1)), "LOAD fields");
	CHECK(r.u.load.debug && r.u.load.debug->nr_lines == 3, "pending DEBUG_INFO attached");
	if (r.u.load.debug && r.u.load.debug->nr_lines == 3) {
		const struct pg_jd_line *l = r.u.load.debug->lines;

		CHECK(l[1].file == l[0].file && !strcmp(l[0].file, "a.js"), "\\xff = previous file");
		CHECK(!strcmp(l[2].file, "lib/b.js") && l[2].line == 30 && l[2].addr == 0x100c,
		      "third entry");
	}
	CHECK(pg_jitdump_next(jd, &r) == 1 && !r.u.load.debug, "pending state consumed");
	CHECK(pg_jitdump_next(jd, &r) == 0 && d.nwarn == 0, "clean end");
	pg_jitdump_close(jd);

	/* every truncation point: a warning (or a header error), never a crash */
	for (size_t cut = 0; cut < full; cut++) {
		unsigned long before = d.nwarn;
		int n = 0;

		ret = pg_jitdump_open_mem(w.b.p, cut, "t.dump", 0, &d, &jd);
		if (cut < 40) {
			CHECK(ret == -EINVAL && strstr(d.err, "offset 0"), "cut %zu: %s", cut, d.err);
			continue;
		}
		while ((ret = pg_jitdump_next(jd, &r)) > 0)
			n++;
		bool boundary = false;

		for (size_t i = 0; i < nb; i++)
			boundary |= cut == bounds[i];
		CHECK(ret == 0, "cut %zu returns end", cut);
		CHECK(d.nwarn == before + !boundary, "cut %zu: a warning unless at a record boundary", cut);
		CHECK(n == (cut >= bounds[2]) + 0, "cut %zu: complete LOADs kept (%d)", cut, n);
		pg_jitdump_close(jd);
	}

	/* a record smaller than its header is an error naming its offset */
	pg_buf_put32(&w.b, 40 + 4, 8);
	ret = pg_jitdump_open_mem(w.b.p, w.b.len, "t.dump", 0, &d, &jd);
	CHECK(ret == 0, "open");
	if (!ret) {
		CHECK(pg_jitdump_next(jd, &r) == -EINVAL && strstr(d.err, "t.dump: offset 40:"),
		      "error names offset: %s", d.err);
		pg_jitdump_close(jd);
	}
	pg_buf_free(&w.b);
}

static void rm_dir(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	char p[4096];

	while (dp && (de = readdir(dp))) {
		if (de->d_name[0] == '.' && (!de->d_name[1] || de->d_name[1] == '.'))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (unlink(p) < 0 && (errno == EISDIR || errno == EPERM))
			rm_dir(p);	/* an image's own directory (carry_live) */
	}
	if (dp)
		closedir(dp);
	rmdir(dir);
}

/* Lines through libdw: the image's own address space, V8 bias removed. */
static void test_image_lines(bool be)
{
	struct w w = { .b = { .big_endian = be } };
	struct pg_diag d = { .warn = on_warn };
	struct pg_elfset_opts o = { .sz = sizeof(o) };
	struct pg_elf_place pl[2];
	struct pg_code_event r;
	char dir[] = "/tmp/pg-unit-XXXXXX";
	pg_code_source *src;
	pg_elfset *set;
	int n = 0, fd;

	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	w_hdr(&w, 1, be ? 21 : 62, 0xdeadbeef);	/* V8: lines are 0x40 late */
	w_load(&w, "zero", 0x5000, 7);
	w_debug(&w, 0x6000, 0x40);
	w_load(&w, "JS:*one", 0x6000, 8);
	o.dir = dir;
	CHECK(pg_code_open_mem(w.b.p, w.b.len, "v8.dump", &d, &src) == 0, "open");
	CHECK(pg_elfset_new(pg_code_process(src), "v8.dump", &o, &d, &set) == 0, "elfset");
	while (pg_code_next(src, &r) > 0 && n < 2)
		CHECK(pg_elfset_add(set, &r, &pl[n++]) == 0, "add: %s", d.err);
	CHECK(pg_elfset_finish(set) == 0, "finish: %s", d.err);
	CHECK(pg_elfset_commit(set) == 0, "commit: %s", d.err);
	CHECK(pg_elfset_count(set) == 1 && pl[0].image == pl[1].image, "one packed image");
	CHECK(pl[0].pgoff % 16 == 0 && pl[1].pgoff >= pl[0].pgoff + sizeof(code1), "placements");

	fd = open(pg_elfset_image(set, 0)->path, O_RDONLY);
	{
		Dwarf *dw = fd >= 0 ? dwarf_begin(fd, DWARF_C_READ) : NULL;
		Dwarf_Die cu;
		static const struct { uint64_t off; int line; const char *file; } want[] = {
			{ 0, 10, "a.js" }, { 5, 11, "a.js" }, { 12, 30, "lib/b.js" }, { 13, 30, "lib/b.js" },
		};

		CHECK(dw != NULL, "dwarf_begin: %s", dwarf_errmsg(-1));
		for (size_t i = 0; dw && i < sizeof(want) / sizeof(want[0]); i++) {
			Dwarf_Addr a = pl[1].pgoff + want[i].off;
			Dwarf_Line *ln;
			int line = -1;
			const char *file = NULL;

			if (dwarf_addrdie(dw, a, &cu) && (ln = dwarf_getsrc_die(&cu, a))) {
				dwarf_lineno(ln, &line);
				file = dwarf_linesrc(ln, NULL, NULL);
			}
			CHECK(line == want[i].line && file && !strcmp(file, want[i].file),
			      "%s: line at +%llu: %s:%d", be ? "BE" : "LE",
			      (unsigned long long)want[i].off, file ? file : "?", line);
		}
		if (dw) {
			Dwarf_Die sub;
			Dwarf_Addr low = 0, high = 0;
			const char *name = NULL;
			bool found = false;

			if (dwarf_addrdie(dw, pl[1].pgoff, &cu) && dwarf_child(&cu, &sub) == 0) {
				do {
					if (dwarf_lowpc(&sub, &low) == 0 && low == pl[1].pgoff) {
						dwarf_highpc(&sub, &high);
						name = dwarf_diename(&sub);
						found = true;
					}
				} while (!found && dwarf_siblingof(&sub, &sub) == 0);
			}
			CHECK(found && name && !strcmp(name, "JS:*one") &&
			      high == pl[1].pgoff + sizeof(code1), "subprogram DIE");
			dwarf_end(dw);
		}
	}
	if (fd >= 0)
		close(fd);
	pg_elfset_free(set);
	pg_code_close(src);
	pg_buf_free(&w.b);
	rm_dir(dir);
}

static void count_warn(void *ctx, const char *msg)
{
	if (strstr(msg, "code moved too often"))
		++*(int *)ctx;
	on_warn(NULL, msg);
}

/* MOVEs in the memory layout.  Without carrying (no user stacks), a MOVE
 * maps the bytes its code already has in an image, as perf inject --jit
 * maps its moved function's file: one symbol for perf, and a function
 * bounced 200 times between two addresses costs nothing.  With carrying
 * (DWARF call graphs) every map of an image keeps one start - pgoff, so a
 * MOVE is a copy at its new address, and the bounce falls back to the
 * packed layout with a warning. */
static void test_memory_moves(bool carry)
{
	static uint8_t code[1 << 20];
	struct pg_code_process h = { .pid = 4242, .elf_mach = 62, .is_64bit = true,
				     .timestamp = 1 };
	int moved_warnings = 0;
	struct pg_diag d = { .warn = count_warn, .ctx = &moved_warnings };
	struct pg_elfset_opts o = { .sz = sizeof(o), .memory_layout = true, .carry_live = carry };
	const uint64_t x = 0x7f0000000000ull, y = x + (256ull << 20), near = x + 0x10000;
	struct pg_elf_place pl;
	char dir[] = "/tmp/pg-unit-XXXXXX";
	const struct pg_elf_map *m;
	pg_elfset *set;
	size_t n;
	uint64_t t = 1;

	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	for (size_t i = 0; i < sizeof(code); i++)
		code[i] = (uint8_t)(i * 7 + 1);
	o.dir = dir;
	CHECK(pg_elfset_new(&h, "moves.dump", &o, &d, &set) == 0, "elfset: %s", d.err);
	{
		struct pg_code_event ld = { .kind = PG_CODE_LOAD, .time = t++, .pid = 4242,
					    .tid = 4242, .id = 1, .addr = x, .size = 256,
					    .name = "JS:*small", .code = code };
		struct pg_code_event big = ld;

		CHECK(pg_elfset_add(set, &ld, &pl) == 0, "load: %s", d.err);
		big.time = t++;
		big.id = 2;
		big.addr = x + 0x100000;
		big.size = sizeof(code);
		big.name = "JS:*big";
		CHECK(pg_elfset_add(set, &big, &pl) == 0, "load big: %s", d.err);
	}
	/* small moves nearby once; big bounces between two far addresses */
	{
		struct pg_code_event mv = { .kind = PG_CODE_MOVE, .time = t++, .pid = 4242,
					    .tid = 4242, .id = 1, .addr = near, .old_addr = x,
					    .size = 256 };

		CHECK(pg_elfset_add(set, &mv, &pl) == 0, "move: %s", d.err);
	}
	for (int i = 0; i < 200; i++) {
		uint64_t from = i % 2 ? y : x + 0x100000, to = i % 2 ? x + 0x100000 : y;
		struct pg_code_event mv = { .kind = PG_CODE_MOVE, .time = t++, .pid = 4242,
					    .tid = 4242, .id = 2, .addr = to, .old_addr = from,
					    .size = sizeof(code) };

		CHECK(pg_elfset_add(set, &mv, &pl) == 0, "bounce: %s", d.err);
	}
	CHECK(pg_elfset_finish(set) == 0, "finish: %s", d.err);
	m = pg_elfset_maps(set, &n);
	CHECK(n == 203, "%zu maps", n);
	if (!carry) {
		const struct pg_elf_map *l1 = NULL, *l2 = NULL;
		size_t moves = 0;

		CHECK(moved_warnings == 0, "no fallback");
		CHECK(pg_elfset_count(set) == 1, "one image, %zu", pg_elfset_count(set));
		for (size_t i = 0; i < n; i++)
			if (m[i].kind == PG_ELF_MAP_LOAD)
				*(m[i].id == 1 ? &l1 : &l2) = &m[i];
		CHECK(l1 && l2 && l2->pgoff - l1->pgoff == 0x100000, "loads laid out like memory");
		for (size_t i = 0; l1 && l2 && i < n; i++) {
			const struct pg_elf_map *l = m[i].id == 1 ? l1 : l2;

			if (m[i].kind != PG_ELF_MAP_MOVE)
				continue;
			moves++;
			CHECK(m[i].image == l->image && m[i].pgoff == l->pgoff &&
			      m[i].len == l->len && !strcmp(m[i].name, l->name),
			      "MOVE to 0x%llx maps its LOAD's bytes", (unsigned long long)m[i].start);
		}
		CHECK(moves == 201, "%zu MOVE maps", moves);
		CHECK(pg_elfset_image(set, 0)->size < sizeof(code) + (1 << 21),
		      "the image holds the code once: %llu bytes",
		      (unsigned long long)pg_elfset_image(set, 0)->size);
	} else {
		CHECK(moved_warnings == 1, "the bounce falls back to the packed layout");
	}
	pg_elfset_commit(set);
	pg_elfset_free(set);

	/* with carrying and one move, the copy is at its LOAD's offset in an
	 * image of the same file name (perf: one row) with a base of its own
	 * (each image keeps one bias) */
	if (carry) {
		struct pg_code_event ld = { .kind = PG_CODE_LOAD, .time = 1, .pid = 4242,
					    .tid = 4242, .id = 1, .addr = x, .size = 256,
					    .name = "JS:*small", .code = code };
		struct pg_code_event mv = { .kind = PG_CODE_MOVE, .time = 2, .pid = 4242,
					    .tid = 4242, .id = 1, .addr = near, .old_addr = x,
					    .size = 256 };

		CHECK(pg_elfset_new(&h, "moves2.dump", &o, &d, &set) == 0, "elfset: %s", d.err);
		CHECK(pg_elfset_add(set, &ld, &pl) == 0 && pg_elfset_add(set, &mv, &pl) == 0,
		      "add: %s", d.err);
		CHECK(pg_elfset_finish(set) == 0, "finish: %s", d.err);
		m = pg_elfset_maps(set, &n);
		CHECK(n == 2 && m[0].image != m[1].image && m[1].start == near &&
		      m[1].pgoff == m[0].pgoff, "a copy at the new address");
		{
			const char *a = strrchr(pg_elfset_image(set, m[0].image)->path, '/');
			const char *b = strrchr(pg_elfset_image(set, m[1].image)->path, '/');

			CHECK(a && b && !strcmp(a, b) &&
			      strcmp(pg_elfset_image(set, m[0].image)->path,
				     pg_elfset_image(set, m[1].image)->path),
			      "one file name in two directories: %s, %s",
			      pg_elfset_image(set, m[0].image)->path,
			      pg_elfset_image(set, m[1].image)->path);
		}
		pg_elfset_commit(set);
		pg_elfset_free(set);
	}
	rm_dir(dir);
}

/* Carrying live code into a newer generation (carry_live): all of it,
 * or with noted frames only the code a stack held during that generation.
 * F lives throughout; G's LOAD over H at t=10 starts generation 1.
 * note: -1 no noting; 0 noting, nothing noted; else the time F is noted.
 * Returns the CARRY maps made, or -1. */
static int carried_maps(int64_t note)
{
	static const uint8_t code[256] = { 0x90 };
	struct pg_code_process h = { .pid = 4242, .elf_mach = 62, .is_64bit = true,
				     .timestamp = 1 };
	struct pg_diag d = { .warn = on_warn };
	struct pg_elfset_opts o = { .sz = sizeof(o), .memory_layout = true, .carry_live = true };
	const uint64_t x = 0x7f0000000000ull;
	const struct { uint64_t id, addr, time; const char *name; } ld[] = {
		{ 1, x, 1, "JS:*F" }, { 2, x + 0x1000, 2, "JS:*H" }, { 3, x + 0x1000, 10, "JS:*G" },
	};
	char dir[] = "/tmp/pg-unit-XXXXXX";
	struct pg_elf_place pl;
	const struct pg_elf_map *m;
	pg_elfset *set;
	size_t n;
	int carried = 0;

	if (!mkdtemp(dir))
		return -1;
	o.dir = dir;
	if (pg_elfset_new(&h, "carry.dump", &o, &d, &set)) {
		rm_dir(dir);
		return -1;
	}
	for (size_t i = 0; i < 3; i++) {
		struct pg_code_event ev = { .kind = PG_CODE_LOAD, .time = ld[i].time, .pid = 4242,
					    .tid = 4242, .id = ld[i].id, .addr = ld[i].addr,
					    .size = sizeof(code), .name = ld[i].name, .code = code };

		CHECK(pg_elfset_add(set, &ev, &pl) == 0, "add: %s", d.err);
	}
	if (note >= 0) {
		uint64_t words[3] = { 0x1234, x + 8, x + 0x1000 + 8 };	/* data, F, G */

		CHECK(pg_elfset_note_frames(set, 0, NULL, 0) == 0, "noting");
		if (note > 0)
			CHECK(pg_elfset_note_frames(set, (uint64_t)note, words, 3) == 0, "note");
	}
	CHECK(pg_elfset_finish(set) == 0, "finish: %s", d.err);
	CHECK(pg_elfset_note_frames(set, 12, NULL, 0) == -EINVAL, "no notes after finish");
	m = pg_elfset_maps(set, &n);
	for (size_t i = 0; i < n; i++)
		if (m[i].kind == PG_ELF_MAP_CARRY) {
			carried++;
			CHECK(m[i].id == 1 && m[i].start == x && m[i].time == 10, "F carried at t=10");
		}
	CHECK(pg_elfset_count(set) == 2, "two generations: %zu images", pg_elfset_count(set));
	pg_elfset_commit(set);
	pg_elfset_free(set);
	rm_dir(dir);
	return carried;
}

static void test_noted_carry(void)
{
	CHECK(carried_maps(-1) == 1, "without noting, all live code is carried");
	CHECK(carried_maps(0) == 0, "noting, no stack held F: not carried");
	CHECK(carried_maps(12) == 1, "F on a stack in generation 1: carried");
	CHECK(carried_maps(5) == 0, "F on a stack only before generation 1: not carried");
}

/* The synthesizer in either byte order: a tracepoint SAMPLE and a call
 * chain SAMPLE byte for byte, field offsets, and overflow of a small buffer. */
static void test_synth(bool be)
{
	uint8_t buf[256], tiny[16];
	struct pg_rec r = { .p = buf, .cap = sizeof(buf), .big_endian = be };
	struct pg_synth_sample s = { .id = 7, .ip = 0x1122, .pid = 3, .tid = 4, .time = 99,
				     .cpu = 1, .period = 10 };
	uint64_t st = PG_SAMPLE_IDENTIFIER | PG_SAMPLE_IP | PG_SAMPLE_TID | PG_SAMPLE_TIME |
		      PG_SAMPLE_CPU | PG_SAMPLE_RAW;
	size_t raw;
	uint8_t *p;
#define U16(v) (uint16_t)(be ? bswap_16(v) : (v))
#define U32(v) (uint32_t)(be ? bswap_32(v) : (v))
#define U64(v) (uint64_t)(be ? bswap_64(v) : (v))
	struct __attribute__((packed)) {
		uint32_t type; uint16_t misc, size;
		uint64_t id, ip; uint32_t pid, tid; uint64_t time; uint32_t cpu, res;
		uint32_t raw_size; uint16_t common_type; uint8_t flags, preempt;
		uint32_t common_pid; uint32_t field, loc; char name[3]; uint8_t pad[1];
	} tp = {
		U32(PG_PERF_RECORD_SAMPLE), U16(PG_PERF_RECORD_MISC_USER), U16(sizeof(tp)),
		U64(7), U64(0x1122), U32(3), U32(4), U64(99), U32(1), 0,
		U32(20), U16(42), 0, 0, U32(4), U32(5), U32(3u << 16 | 16), "ab", { 0 },
	};

	pg_synth_sample_start(&r, st, PG_PERF_RECORD_MISC_USER, &s);
	raw = pg_synth_tp_start(&r, 42, 4);
	pg_rec_u32(&r, 5);
	pg_rec_u32(&r, 0);
	pg_synth_tp_dyn(&r, raw, 12, "ab", 2, true);
	pg_synth_raw_end(&r, raw);
	CHECK(pg_rec_end(&r) == 0 && r.len == sizeof(tp) && !memcmp(buf, &tp, sizeof(tp)),
	      "tracepoint sample (%s)", be ? "be" : "le");
	CHECK(raw == 48 && pg_synth_sample_offset(st, PG_SAMPLE_TIME) == 32,
	      "field offsets");

	st = PG_SAMPLE_IP | PG_SAMPLE_TID | PG_SAMPLE_PERIOD | PG_SAMPLE_CALLCHAIN;
	pg_synth_sample_start(&r, st, 0, &s);
	p = pg_synth_chain(&r, 2);
	p = pg_rec_st64(p, PG_PERF_CONTEXT_USER, be);
	pg_rec_st64(p, 0x1122, be);
	CHECK(pg_rec_end(&r) == 0 && r.len == 8 + 24 + 24, "chain sample size");
	pg_rec_put64(&r, pg_synth_sample_offset(st, PG_SAMPLE_PERIOD), 11);
	CHECK(!memcmp(buf + 24, &(uint64_t){ U64(11) }, 8) &&
	      !memcmp(buf + 32, &(uint64_t){ U64(2) }, 8), "period patched, nr");

	r = (struct pg_rec){ .p = tiny, .cap = sizeof(tiny), .big_endian = be };
	pg_synth_comm(&r, 1, 1, "abcdefghijklmnopq", 0, 0, NULL);
	CHECK(pg_rec_end(&r) == -E2BIG && r.overflow, "overflow is an error");
#undef U16
#undef U32
#undef U64
}

/* One DEBUG_INFO row, file given with its length (control bytes allowed). */
static void w_row(struct w *w, uint64_t addr, uint32_t line, uint32_t disc, const char *file,
		  size_t flen)
{
	pg_buf_u64(&w->b, addr);
	pg_buf_u32(&w->b, line);
	pg_buf_u32(&w->b, disc);
	pg_buf_add(&w->b, file, flen);
	pg_buf_u8(&w->b, 0);
}

/* The code model undoes the producers' quirks in the reader: V8's bias and
 * column, node's damaged names; rows past the code dropped and counted; of
 * the rows before it, the nearest applies from the start (the others
 * dropped); line-0 rows kept as line 0; rows sorted by offset, equal
 * offsets in file order.  A dump not written by V8 keeps its
 * discriminators.  The short name "b.js" is followed by a row before the
 * code: that row is a real one, not a sign that "b.js" is damaged. */
static void test_code_model(bool be, bool v8)
{
	static const char script[] = "/srv/app/lib/handlers/report.js";
	static const char name[] = "JS:*report /srv/app/lib/handlers/report.js:12:7";
	struct w w = { .b = { .big_endian = be } };
	struct pg_diag d = { .warn = on_warn };
	struct pg_code_stats st = { .sz = sizeof(st) };
	struct pg_code_event ev;
	pg_code_source *src;
	uint32_t bias = v8 ? 0x40 : 0;
	char damaged[sizeof(script)];
	size_t at;

	memcpy(damaged, script, sizeof(script));
	memcpy(damaged, "\x01\x02\x03\x04\x05\x06", 6);	/* node's overwritten head */
	w_hdr(&w, 1, be ? 21 : 62, v8 ? 0xdeadbeef : 0);
	at = w_rec(&w, PG_JD_DEBUG_INFO, 999);
	pg_buf_u64(&w.b, 0x7000);
	pg_buf_u64(&w.b, 7);
	w_row(&w, 0x7000 + bias + 8, 21, 4, "a.js", 4);
	w_row(&w, 0x7000 + bias + 2, 20, 3, damaged, strlen(script));
	w_row(&w, 0x7000 + bias + 8, 22, 5, "b.js", 4);
	w_row(&w, 0x7000 + bias - 1, 23, 1, "a.js", 4);	/* nearest before the code */
	w_row(&w, 0x7000 + bias + 100, 24, 1, "a.js", 4);	/* after it */
	w_row(&w, 0x7000 + bias + 5, 0, 1, "a.js", 4);		/* no source line */
	w_row(&w, 0x7000 + bias - 9, 25, 2, "a.js", 4);	/* farther before */
	w_end(&w, at);
	w_load(&w, name, 0x7000, 3);
	CHECK(pg_code_open_mem(w.b.p, w.b.len, "m.dump", &d, &src) == 0, "open: %s", d.err);
	if (!src)
		goto out;
	CHECK(pg_code_process(src)->pid == 4242 && pg_code_process(src)->big_endian == be &&
	      pg_code_process(src)->is_64bit && !pg_code_process(src)->arch_time, "process");
	CHECK(pg_code_next(src, &ev) == 1 && ev.kind == PG_CODE_LOAD, "LOAD: %s", d.err);
	CHECK(ev.addr == 0x7000 && ev.size == sizeof(code1) && ev.id == 3 && !strcmp(ev.name, name) &&
	      ev.time == 1003 && !ev.cfi && !ev.ninlines, "LOAD fields");
	CHECK(ev.nlines == 5 && ev.dropped_lines == 2, "%s: %zu rows, %llu dropped", v8 ? "V8" : "plain",
	      ev.nlines, (unsigned long long)ev.dropped_lines);
	if (ev.nlines == 5) {
		static const struct { uint64_t off; uint32_t line, disc; const char *file; } want[] = {
			{ 0, 23, 1, "a.js" }, { 2, 20, 3, script }, { 5, 0, 1, "a.js" },
			{ 8, 21, 4, "a.js" }, { 8, 22, 5, "b.js" },
		};

		for (int i = 0; i < 5; i++) {
			const struct pg_code_line *l = &ev.lines[i];
			/* only V8's damaged names are recovered: its names carry
			 * the script; the others stay unknown (NULL) */
			const char *file = !v8 && i == 1 ? NULL : want[i].file;

			CHECK(l->off == want[i].off && l->line == want[i].line &&
			      l->column == (v8 ? want[i].disc : 0) &&
			      l->discrim == (v8 ? 0 : want[i].disc) &&
			      (file ? l->file && !strcmp(l->file, file) : !l->file),
			      "%s row %d: +%llu %s:%u col %u disc %u", v8 ? "V8" : "plain", i,
			      (unsigned long long)l->off, l->file ? l->file : "(null)", l->line,
			      l->column, l->discrim);
		}
	}
	CHECK(pg_code_next(src, &ev) == 0, "end");
	{
		/* a caller built against an older, shorter pg_code_stats asks
		 * twice: its size stays its own, nothing past it is written */
		struct { struct pg_code_stats old; uint64_t canary; } c;
		size_t old_sz = offsetof(struct pg_code_stats, recovered_names);

		memset(&c, 0xab, sizeof(c));
		c.old.sz = old_sz;
		pg_code_stats(src, &c.old);
		pg_code_stats(src, &c.old);
		CHECK(c.old.sz == old_sz && c.old.loads == 1 &&
		      ((unsigned char *)&c.old)[old_sz] == 0xab && c.canary == 0xababababababababull,
		      "older stats struct: sz %zu", c.old.sz);
	}
	pg_code_stats(src, &st);
	CHECK(st.loads == 1 && st.line_tables == 1 && st.lines == 7 && st.dropped_lines == 2 &&
	      st.recovered_names == (v8 ? 1u : 0u), "stats");
	pg_code_close(src);
out:
	pg_buf_free(&w.b);
}

/* Code of size 0 has no start for a row before it: that row is dropped
 * like the others (the model's rows lie below the code's size). */
static void test_code_model_empty(bool be)
{
	struct w w = { .b = { .big_endian = be } };
	struct pg_diag d = { .warn = on_warn };
	struct pg_code_event ev;
	pg_code_source *src;
	size_t at;

	w_hdr(&w, 1, be ? 21 : 62, 0);
	at = w_rec(&w, PG_JD_DEBUG_INFO, 999);
	pg_buf_u64(&w.b, 0x7000);
	pg_buf_u64(&w.b, 1);
	w_row(&w, 0x7000 - 8, 7, 0, "z.erl", 5);
	w_end(&w, at);
	at = w_rec(&w, PG_JD_LOAD, 1000);
	pg_buf_u32(&w.b, 4242);
	pg_buf_u32(&w.b, 4243);
	pg_buf_u64(&w.b, 0x7000);
	pg_buf_u64(&w.b, 0x7000);
	pg_buf_u64(&w.b, 0);	/* code_size */
	pg_buf_u64(&w.b, 1);
	pg_buf_str(&w.b, "empty");
	w_end(&w, at);
	CHECK(pg_code_open_mem(w.b.p, w.b.len, "e.dump", &d, &src) == 0, "open: %s", d.err);
	if (src) {
		CHECK(pg_code_next(src, &ev) == 1 && ev.kind == PG_CODE_LOAD && !ev.size,
		      "empty LOAD: %s", d.err);
		CHECK(!ev.nlines && ev.dropped_lines == 1, "empty code (%s): %zu rows, %llu dropped",
		      be ? "be" : "le", ev.nlines, (unsigned long long)ev.dropped_lines);
		pg_code_close(src);
	}
	pg_buf_free(&w.b);
}

/* --- sized opts/stats: a caller built against an older (shorter) or a
 * newer (longer) header --- */

static bool sized_found_called;

static void sized_found(void *ctx, const char *path, uint32_t pid, const char *how)
{
	(void)ctx; (void)path; (void)pid; (void)how;
	sized_found_called = true;
}

/* bytes [from, to) of p all equal to c */
static bool all_bytes(const void *p, size_t from, size_t to, int c)
{
	for (size_t i = from; i < to; i++)
		if (((const unsigned char *)p)[i] != (unsigned char)c)
			return false;
	return true;
}

/* A basic-mode v3 XRay trace (little-endian, 1 GHz): function 1 entered
 * at 1000 and left 1 ms later. */
static bool write_xray_trace(const char *path)
{
	uint8_t b[32 + 2 * 32] = { 0 };
	FILE *f;
	bool ok;

	b[0] = 3;					/* version */
	b[4] = 3;					/* constant, nonstop tsc */
	memcpy(b + 8, &(uint64_t){ 1000000000 }, 8);	/* cycle frequency */
	for (int i = 0; i < 2; i++) {
		uint8_t *r = b + 32 + 32 * i;

		r[3] = (uint8_t)i;			/* entry, exit */
		memcpy(r + 4, &(uint32_t){ 1 }, 4);	/* function id */
		memcpy(r + 8, &(uint64_t){ i ? 1001000 : 1000 }, 8);
		memcpy(r + 16, &(uint32_t){ 77 }, 4);	/* tid */
		memcpy(r + 20, &(uint32_t){ 77 }, 4);	/* pid */
	}
	f = fopen(path, "wb");
	if (!f)
		return false;
	ok = fwrite(b, 1, sizeof(b), f) == sizeof(b);
	return fclose(f) == 0 && ok;
}

static void test_sized_xray(const char *dir)
{
	char trace[4200], out[4200];
	const char *traces[1] = { trace };
	struct pg_diag d = { .warn = on_warn };
	struct { struct pg_xray_opts o; uint64_t newer; } big;
	union { struct pg_xray_opts o; unsigned char b[sizeof(struct pg_xray_opts)]; } old;
	struct pg_xray_convert_stats st;
	struct pg_xray_stats ts;
	size_t st_sz = offsetof(struct pg_xray_convert_stats, events);
	size_t ts_sz = offsetof(struct pg_xray_stats, enters);

	snprintf(trace, sizeof(trace), "%s/xray-log.t", dir);
	snprintf(out, sizeof(out), "%s/xray.data", dir);
	if (!write_xray_trace(trace)) {
		CHECK(0, "writing %s", trace);
		return;
	}

	/* older caller: its struct ends before frequency; the bytes after it
	 * (another variable, here all 0xff: a frequency above 1 GHz, both
	 * outputs off) must not be read.  Its stats end before events; the
	 * trace counts it wants end before enters. */
	memset(&old, 0xff, sizeof(old));
	old.o.sz = offsetof(struct pg_xray_opts, frequency);
	old.o.traces = traces;
	old.o.ntraces = 1;
	old.o.binary = NULL;
	old.o.output = out;
	old.o.pipe = false;
	memset(&st, 0xab, sizeof(st));
	memset(&ts, 0xab, sizeof(ts));
	st.sz = st_sz;
	st.trace = &ts;
	ts.sz = ts_sz;
	CHECK(pg_xray_convert(&old.o, &d, &st) == 0, "older xray opts: %s", d.err);
	CHECK(st.sz == st_sz && st.trace == &ts && st.samples > 0,
	      "older xray stats: sz %zu, samples %llu", st.sz, (unsigned long long)st.samples);
	CHECK(all_bytes(&st, st_sz, sizeof(st), 0xab), "nothing written past the older stats' sz");
	CHECK(ts.sz == ts_sz && ts.buffers == 1 && ts.records == 2,
	      "older trace stats: buffers %llu records %llu", (unsigned long long)ts.buffers,
	      (unsigned long long)ts.records);
	CHECK(all_bytes(&ts, ts_sz, sizeof(ts), 0xab), "nothing written past the trace stats' sz");

	/* the same, current: the defaults give events too */
	memset(&st, 0, sizeof(st));
	st.sz = sizeof(st);
	memset(&big, 0, sizeof(big));
	big.o.sz = sizeof(big.o);
	big.o.traces = traces;
	big.o.ntraces = 1;
	big.o.output = out;
	CHECK(pg_xray_convert(&big.o, &d, &st) == 0 && st.samples > 0 && st.events > 0,
	      "current xray opts: %s", d.err);

	/* newer caller: zero bytes past this library's struct are fine, a
	 * field this library does not know is refused */
	big.o.sz = sizeof(big);
	CHECK(pg_xray_convert(&big.o, &d, &st) == 0, "newer xray opts, zero tail: %s", d.err);
	big.newer = 1;
	d.err[0] = 0;
	CHECK(pg_xray_convert(&big.o, &d, &st) == -EINVAL && strstr(d.err, "does not know"),
	      "newer xray opts with a field set: %s", d.err);
	big.o.sz = 4;
	CHECK(pg_xray_convert(&big.o, &d, NULL) == -EINVAL, "xray opts sz 4");
	CHECK(pg_xray_convert(NULL, &d, NULL) == -EINVAL, "xray opts NULL");
	unlink(trace);
	unlink(out);
}

static void test_sized_inject(const char *dir)
{
	char in[4200], out[4200], imgdir[4300], other[4200];
	const char *dumps[1] = { other };
	struct pg_diag d = { .warn = on_warn };
	struct pg_pdw_opts wo = { .sz = sizeof(wo), .pipe = true };	/* no attr needed */
	struct { struct pg_inject_opts o; uint64_t newer; } big;
	union { struct pg_inject_opts o; unsigned char b[sizeof(struct pg_inject_opts)]; } old;
	struct pg_inject_stats st;
	size_t st_sz = offsetof(struct pg_inject_stats, image_dir);
	pg_pdw *w;

	snprintf(in, sizeof(in), "%s/in.data", dir);
	snprintf(out, sizeof(out), "%s/out.data", dir);
	snprintf(imgdir, sizeof(imgdir), "%s.d", out);
	snprintf(other, sizeof(other), "%s/not-used", dir);
	if (pg_pdw_open(in, &wo, &d, &w) < 0 || pg_pdw_close(w) < 0) {
		CHECK(0, "writing %s: %s", in, d.err);
		return;
	}

	/* older caller: its struct ends before image_dir; what follows it
	 * (here an image directory, a dump, the perf 5.19 layout and a found
	 * callback) must read as the defaults */
	memset(&old, 0, sizeof(old));
	old.o.sz = offsetof(struct pg_inject_opts, image_dir);
	old.o.input = in;
	old.o.output = out;
	old.o.image_dir = other;
	old.o.jitdumps = dumps;
	old.o.njitdumps = 1;
	old.o.cfi_layout = PG_CFI_LAYOUT_PERF_5_19;
	old.o.found = sized_found;
	memset(&st, 0xab, sizeof(st));
	st.sz = sizeof(st);
	CHECK(pg_inject(&old.o, &d, &st) == 0, "older inject opts: %s", d.err);
	CHECK(st.sz == sizeof(st) && st.image_dir && !strcmp(st.image_dir, imgdir) &&
	      !st.cfi_compat && st.dumps == 0 && st.dumps_failed == 0 && !sized_found_called,
	      "older inject opts give the defaults: image dir %s, cfi_compat %d, dumps %llu+%llu",
	      st.image_dir ? st.image_dir : "(null)", st.cfi_compat,
	      (unsigned long long)st.dumps, (unsigned long long)st.dumps_failed);
	free(st.image_dir);

	/* older stats: no room for image_dir, which is then neither written
	 * nor leaked */
	memset(&st, 0xab, sizeof(st));
	st.sz = st_sz;
	memset(&big, 0, sizeof(big));
	big.o.sz = sizeof(big.o);
	big.o.input = in;
	big.o.output = out;
	CHECK(pg_inject(&big.o, &d, &st) == 0, "current inject opts: %s", d.err);
	CHECK(st.sz == st_sz && st.records_out == st.records_in && st.output_bytes > 0 &&
	      !st.cfi_compat, "older inject stats: %llu bytes",
	      (unsigned long long)st.output_bytes);
	CHECK(all_bytes(&st, st_sz, sizeof(st), 0xab), "nothing written past the older stats' sz");

	/* newer caller */
	memset(&st, 0, sizeof(st));
	st.sz = sizeof(st);
	big.o.sz = sizeof(big);
	CHECK(pg_inject(&big.o, &d, &st) == 0, "newer inject opts, zero tail: %s", d.err);
	free(st.image_dir);
	big.newer = 1;
	d.err[0] = 0;
	st.image_dir = NULL;
	CHECK(pg_inject(&big.o, &d, &st) == -EINVAL && strstr(d.err, "does not know") &&
	      !st.image_dir, "newer inject opts with a field set: %s", d.err);
	big.o.sz = 4;
	CHECK(pg_inject(&big.o, &d, NULL) == -EINVAL, "inject opts sz 4");
	CHECK(pg_inject(NULL, &d, NULL) == -EINVAL, "inject opts NULL");
	unlink(in);
	unlink(out);
	rmdir(imgdir);
}

/* The other sized opts: a field this library does not know is refused
 * before anything is done. */
static void test_sized_other(const char *dir)
{
	struct pg_diag d = { .warn = on_warn };
	char out[4200];
	struct { struct pg_pdw_opts o; uint64_t newer; } pw = { { .sz = sizeof(pw) }, 1 };
	struct { struct pg_gperf_opts o; uint64_t newer; } go = {
		{ .sz = sizeof(go), .profile = "/nonexistent", .output = out }, 1 };
	struct { struct pg_jitwriter_opts o; uint64_t newer; } jo = {
		{ .sz = sizeof(jo), .dir = dir }, 1 };
	pg_pdw *w = NULL;
	pg_jitwriter *jw = NULL;

	snprintf(out, sizeof(out), "%s/never.data", dir);
	CHECK(pg_pdw_open(out, &pw.o, &d, &w) == -EINVAL && !w, "newer pdw opts: %s", d.err);
	CHECK(pg_gperf_convert(&go.o, &d, NULL) == -EINVAL, "newer gperf opts: %s", d.err);
	CHECK(pg_jitwriter_open(&jo.o, &d, &jw) == -EINVAL && !jw, "newer jitwriter opts: %s",
	      d.err);
	CHECK(access(out, F_OK) != 0, "nothing written");
}

/* pg_pdw_flush() between records of a compressed file: the workers write
 * stages into the same buffer, so the flush must wait its turn; every
 * record comes back once, in order (issue 20 review: without the lock
 * Helgrind saw the flush race the workers' writes). */
static void test_flush_compressed(const char *dir)
{
	struct pg_diag d = { .warn = on_warn };
	struct pg_pdw_opts wo = { .sz = sizeof(wo), .compress_level = 1 };
	char out[4200];
	pg_perfdata *pd;
	struct pg_pd_rec r;
	uint32_t n = 0, bad = 0;
	bool flushed = true;
	pg_pdw *w;

	uint8_t attr[128] = { 0 };
	uint32_t type_sw = 1, attr_size = sizeof(attr);

	memcpy(attr, &type_sw, 4);
	memcpy(attr + 4, &attr_size, 4);
	snprintf(out, sizeof(out), "%s/flush.data", dir);
	if (pg_pdw_open(out, &wo, &d, &w) < 0 || pg_pdw_add_attr(w, attr, sizeof(attr), NULL, 0) < 0) {
		CHECK(0, "open %s: %s", out, d.err);
		return;
	}
	for (uint32_t i = 0; i < 200000; i++) {
		uint8_t rec[32] = { 0 };
		uint32_t type = PG_PERF_RECORD_COMM;
		uint16_t size = sizeof(rec);

		memcpy(rec, &type, 4);
		memcpy(rec + 6, &size, 2);
		memcpy(rec + 8, &i, 4);		/* pid: the sequence */
		memcpy(rec + 16, "seq", 4);
		if (pg_pdw_write(w, rec, sizeof(rec), NULL, 0) < 0 ||
		    (i % 64 == 0 && pg_pdw_flush(w) < 0))
			flushed = false;
	}
	CHECK(flushed && pg_pdw_close(w) == 0, "writing with flushes: %s", d.err);
	if (pg_perfdata_open(out, &d, &pd) < 0) {
		CHECK(0, "reading %s: %s", out, d.err);
		return;
	}
	while (pg_perfdata_next(pd, &r) > 0)
		if (r.type == PG_PERF_RECORD_COMM && r.size == 32)
			bad += pg_pd_u32(pd, r.data + 8) != n++;
	pg_perfdata_close(pd);
	CHECK(n == 200000 && bad == 0, "%u records back, %u out of order", n, bad);
	unlink(out);
}

static void test_sized(void)
{
	char dir[] = "/tmp/pg-unit-XXXXXX";

	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	test_sized_xray(dir);
	test_sized_inject(dir);
	test_sized_other(dir);
	test_flush_compressed(dir);
	rm_dir(dir);
}

int main(void)
{
	test_encoders();
	test_u64map();
	test_ahash();
	test_paint();
	test_paint_fail();
	test_synth(false);
	test_synth(true);
	test_reader(false);
	test_reader(true);
	test_image_lines(false);
	test_image_lines(true);
	test_memory_moves(false);
	test_memory_moves(true);
	test_noted_carry();
	for (int i = 0; i < 4; i++)
		test_code_model(i & 1, i & 2);
	test_code_model_empty(false);
	test_code_model_empty(true);
	test_sized();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
