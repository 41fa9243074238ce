/* SPDX-License-Identifier: MIT */
/* gperftools CPU profile reader.
 *
 * Layout: slots of the writer's pointer size in its byte order: a header
 * (0, N >= 3, version, period in us, ...), records (count, depth, depth
 * PCs), a trailer (0, 1, 0), then /proc/PID/maps-style text to the end.
 * Word size and byte order are detected as perl pprof detects them.
 * Records with identical PC lists are summed (the profiler's hash table
 * evicts the same stack many times).  Everything up to damage is kept. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <byteswap.h>

#include <perfgraft/gperf.h>
#include "util/util.h"

/* gperftools writes at most 254 PCs (64 before 2.9); four times that is
 * damage, not a stack (perl pprof would read up to 65536 and swallow the
 * records that follow) */
#define MAX_DEPTH 1016

struct pg_gperf {
	const uint8_t *base;
	size_t size;
	bool mapped;
	char *name;
	struct pg_gperf_header h;
	unsigned ws;			/* word size in bytes */
	struct pg_gperf_stats st;

	struct pg_gperf_stack *stacks;
	size_t nstacks, scap;
	size_t *at;			/* stack i's PCs: pcs + at[i] (pcs moves) */
	size_t acap;
	uint64_t *pcs;			/* every distinct stack's PCs, back to back */
	size_t npcs, pcap;
	uint32_t *slots;		/* hash of stacks: index + 1 */
	size_t nslots;

	struct pg_gperf_mapping *maps;
	size_t nmaps, mcap;
	char *text;			/* a writable copy of the maps text */
};

static uint64_t word(const pg_gperf *g, size_t off)
{
	if (g->ws == 8) {
		uint64_t v;

		memcpy(&v, g->base + off, 8);
		return g->h.big_endian == (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__) ? v : bswap_64(v);
	}
	uint32_t v;

	memcpy(&v, g->base + off, 4);
	return g->h.big_endian == (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__) ? v : bswap_32(v);
}

/* 0: detected (*ws, *be set); -1: no rule fits */
static int detect(const uint8_t *p, size_t len, unsigned *ws, bool *be)
{
	static const uint8_t zero[8];

	if (len < 8)
		return -1;
	if (!memcmp(p, zero, 8)) {	/* 64-bit: slot 0 is 0, slot 1 is 3 */
		if (len < 16)
			return -1;
		*ws = 8;
		if (!memcmp(p + 12, zero, 4) && memcmp(p + 8, zero, 4))
			*be = false;
		else if (!memcmp(p + 8, zero, 4) && memcmp(p + 12, zero, 4))
			*be = true;
		else
			return -1;
		return 0;
	}
	if (memcmp(p, zero, 4))	/* 32-bit: word 0 is 0, word 1 is 3 */
		return -1;
	*ws = 4;
	if (!p[6] && !p[7])
		*be = false;
	else if (!p[4] && !p[5])
		*be = true;
	else
		return -1;
	return 0;
}

bool pg_gperf_probe(const void *buf, size_t len)
{
	unsigned ws;
	bool be;
	const uint8_t *p = buf;

	if (detect(p, len, &ws, &be) < 0 || len < 5u * ws)
		return false;
	/* slot 1 (header words after it) is small and at least 3 */
	pg_gperf tmp = { .base = p, .size = len, .ws = ws, .h.big_endian = be };
	uint64_t n = word(&tmp, ws);

	return n >= 3 && n < 1024;
}

/* Counts are summed saturating: a damaged count must not wrap the total
 * into something small (the converter's sample cap relies on it). */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static size_t stack_hash(const uint64_t *pcs, uint32_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;

	for (uint32_t i = 0; i < n; i++)
		h = (h ^ pcs[i]) * 0x100000001b3ull;
	return (size_t)(h ^ h >> 29);
}

static int rehash(pg_gperf *g)
{
	size_t n = g->nslots ? 2 * g->nslots : 1024;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < g->nstacks; i++) {
		size_t j = stack_hash(g->pcs + g->at[i], g->stacks[i].depth) & (n - 1);

		while (s[j])
			j = (j + 1) & (n - 1);
		s[j] = (uint32_t)i + 1;
	}
	free(g->slots);
	g->slots = s;
	g->nslots = n;
	return 0;
}

/* Adds count to the stack with these PCs (pcs points into g->pcs at npcs:
 * appended tentatively, kept only when the stack is new). */
static int add_stack(pg_gperf *g, uint64_t count, uint32_t depth, uint64_t off)
{
	const uint64_t *pcs = g->pcs + g->npcs;
	size_t j;

	if (2 * (g->nstacks + 1) > g->nslots && rehash(g) < 0)
		return -ENOMEM;
	for (j = stack_hash(pcs, depth) & (g->nslots - 1); g->slots[j];
	     j = (j + 1) & (g->nslots - 1)) {
		size_t k = g->slots[j] - 1;
		struct pg_gperf_stack *s = &g->stacks[k];

		if (s->depth == depth && !memcmp(g->pcs + g->at[k], pcs, depth * sizeof(*pcs))) {
			s->count = sat_add(s->count, count);
			return 0;
		}
	}
	if (g->nstacks >= UINT32_MAX - 1 ||
	    !pg_grow((void **)&g->stacks, &g->scap, g->nstacks + 1, sizeof(*g->stacks)) ||
	    !pg_grow((void **)&g->at, &g->acap, g->nstacks + 1, sizeof(*g->at)))
		return -ENOMEM;
	/* .pcs is set after the walk, when g->pcs no longer moves */
	g->stacks[g->nstacks] = (struct pg_gperf_stack){
		.count = count, .depth = depth, .offset = off };
	g->at[g->nstacks] = g->npcs;
	g->slots[j] = (uint32_t)++g->nstacks;
	g->npcs += depth;
	return 0;
}

static int read_records(pg_gperf *g, struct pg_diag *d, size_t *text_at)
{
	size_t ws = g->ws, off = (2 + (size_t)g->h.header_slots) * ws, done = 0;

	*text_at = g->size;
	while (off < g->size) {
		uint64_t count, depth;

		if (g->mapped && off - done >= (8u << 20)) {	/* records read: pages back */
			pg_release_mapped(g->base, done, off);
			done = off & ~(size_t)4095;
		}

		if (g->size - off < 2 * ws) {
			pg_warn(d, "%s: offset %zu: truncated record header (%zu bytes left); the profile is cut short: everything before it is used, no mapped objects",
				g->name, off, g->size - off);
			g->st.truncated_at = off;
			return 0;
		}
		count = word(g, off);
		depth = word(g, off + ws);
		if (depth > MAX_DEPTH) {
			pg_warn(d, "%s: offset %zu: record of %llu PCs (at most %u expected): the data is damaged from here; everything before it is used, no mapped objects",
				g->name, off, (unsigned long long)depth, MAX_DEPTH);
			g->st.truncated_at = off;
			return 0;
		}
		if (depth > (g->size - off) / ws - 2) {
			pg_warn(d, "%s: offset %zu: record of %llu PCs runs past the end of the file (%zu bytes left): the profile is cut short; everything before it is used, no mapped objects",
				g->name, off, (unsigned long long)depth, g->size - off);
			g->st.truncated_at = off;
			return 0;
		}
		size_t rec = off, n = (size_t)depth;

		off += 2 * ws;
		if (count == 0 && n == 1 && word(g, off) == 0) {	/* the trailer */
			g->st.trailer = true;
			g->st.binary_bytes = off + ws;
			*text_at = off + ws;
			return 0;
		}
		if (count == 0 || n == 0) {
			pg_warn(d, "%s: offset %zu: record with count %llu and %zu PCs: skipped",
				g->name, rec, (unsigned long long)count, n);
			g->st.empty_records++;
			off += n * ws;
			continue;
		}
		if (word(g, off) == 0) {
			/* pprof (perl) takes it for the trailer: the data ends
			 * and the mapped objects are read from after it; so do
			 * we, for the same totals (Go pprof would count it as
			 * <unknown> and read on) */
			pg_warn(d, "%s: offset %zu: record whose first PC is 0 (count %llu, %zu PCs): the profile's data ends here, as pprof reads it; %zu bytes after it are read as mapped objects only",
				g->name, rec, (unsigned long long)count, n, g->size - (off + n * ws));
			g->st.zero_pc_records++;
			g->st.zero_pc_samples = count;
			g->st.binary_bytes = off + n * ws;
			*text_at = off + n * ws;
			return 0;
		}
		if (!pg_grow((void **)&g->pcs, &g->pcap, g->npcs + n, sizeof(*g->pcs)))
			return pg_err(d, -ENOMEM, "out of memory");
		for (size_t i = 0; i < n; i++)
			g->pcs[g->npcs + i] = word(g, off + i * ws);
		off += n * ws;
		if (add_stack(g, count, (uint32_t)n, rec) < 0)
			return pg_err(d, -ENOMEM, "out of memory");
		g->st.records++;
		g->st.samples = sat_add(g->st.samples, count);
		if (count > g->st.max_count) {	/* where a damaged count is likeliest */
			g->st.max_count = count;
			g->st.max_count_at = rec;
		}
	}
	pg_warn(d, "%s: offset %zu: no trailer: the profile ends inside its binary part (was the process killed before ProfilerStop?); everything before it is used, no mapped objects",
		g->name, g->size);
	g->st.truncated_at = g->size;
	return 0;
}

static bool word_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       c == '_';
}

/* path with every "$build" followed by a non-word character (or the end)
 * replaced by build; a new string */
static char *substitute(const char *path, const char *build)
{
	struct pg_buf b = { 0 };
	const char *p = path, *q;

	while (build && (q = strstr(p, "$build"))) {
		pg_buf_add(&b, p, (size_t)(q - p));
		if (word_char(q[6])) {
			pg_buf_add(&b, q, 6);
		} else {
			pg_buf_add(&b, build, strlen(build));
		}
		p = q + 6;
	}
	pg_buf_str(&b, p);
	if (b.oom) {
		pg_buf_free(&b);
		return NULL;
	}
	return (char *)b.p;
}

static bool hexnum(const char **s, uint64_t *v)
{
	const char *p = *s;
	uint64_t x = 0;
	int n = 0;

	for (;; p++, n++) {
		unsigned c = (unsigned char)*p, dgt;

		if (c >= '0' && c <= '9')
			dgt = c - '0';
		else if (c >= 'a' && c <= 'f')
			dgt = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			dgt = c - 'A' + 10;
		else
			break;
		if (n >= 16)
			return false;
		x = x << 4 | dgt;
	}
	if (!n)
		return false;
	*s = p;
	*v = x;
	return true;
}

static bool decnum(const char **s, uint64_t *v)
{
	const char *p = *s;
	uint64_t x = 0;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (x > (UINT64_MAX - 9) / 10)
			return false;
		x = x * 10 + (uint64_t)(*p - '0');
	}
	*s = p;
	*v = x;
	return true;
}

static void spaces(const char **s)
{
	while (**s == ' ' || **s == '\t')
		(*s)++;
}

/* "start-end perms offset MM:mm inode [path]": true when the line has
 * this form (m filled, path pointing into the line). */
static bool maps_line(const char *s, struct pg_gperf_mapping *m, const char **path)
{
	uint64_t maj, min;

	memset(m, 0, sizeof(*m));
	if (!hexnum(&s, &m->start) || *s++ != '-' || !hexnum(&s, &m->end) || m->end < m->start)
		return false;
	spaces(&s);
	for (int i = 0; i < 4; i++) {
		if (!s[i] || s[i] == ' ')
			return false;
		m->perms[i] = s[i];
	}
	s += 4;
	if (*s != ' ' && *s != '\t')
		return false;
	m->prot = (m->perms[0] == 'r' ? 1 : 0) | (m->perms[1] == 'w' ? 2 : 0) |
		  (m->perms[2] == 'x' ? 4 : 0);
	m->flags = m->perms[3] == 's' ? 1 : 2;
	spaces(&s);
	if (!hexnum(&s, &m->offset))
		return false;
	spaces(&s);
	if (!hexnum(&s, &maj) || *s++ != ':' || !hexnum(&s, &min) || maj > UINT32_MAX ||
	    min > UINT32_MAX)
		return false;
	m->maj = (uint32_t)maj;
	m->min = (uint32_t)min;
	spaces(&s);
	if (!decnum(&s, &m->inode))
		return false;
	if (*s && *s != ' ' && *s != '\t')
		return false;
	spaces(&s);
	*path = s;
	return true;
}

static int read_maps(pg_gperf *g, size_t at, struct pg_diag *d)
{
	const char *build = NULL;
	char *line;
	size_t n = g->size - at;

	if (!(g->text = malloc(n + 1)))
		return pg_err(d, -ENOMEM, "out of memory");
	memcpy(g->text, g->base + at, n);
	g->text[n] = 0;
	if (n && g->text[n - 1] != '\n') {
		/* gperftools ends every line with a newline: a last line
		 * without one was cut (a path cut to its directory would map
		 * the program to that directory), so it is not used */
		char *last = memrchr(g->text, '\n', n);
		size_t full = last ? (size_t)(last - g->text) + 1 : 0;

		pg_warn(d, "%s: offset %zu: the mapped-objects text is truncated: its last line (%zu bytes) has no newline; the profile is cut short: that line is not used, the complete lines before it are",
			g->name, at + full, n - full);
		g->st.truncated_at = at + full;
		g->st.ignored_lines++;
		n = full;
	}
	line = g->text;
	while (line < g->text + n) {
		char *nl = memchr(line, '\n', (size_t)(g->text + n - line)), *end;
		size_t line_off = at + (size_t)(line - g->text);
		struct pg_gperf_mapping m;
		const char *path, *b;

		end = nl ? nl : g->text + n;
		*end = 0;
		if (end > line && end[-1] == '\r')
			*--end = 0;
		b = line;
		while (*b == ' ' || *b == '\t')
			b++;
		if (!strncmp(b, "build=", 6)) {
			build = b + 6;
			g->st.map_lines++;
		} else if (strlen(line) != (size_t)(end - line)) {
			g->st.ignored_lines++;	/* a NUL inside: not text */
		} else if (maps_line(line, &m, &path)) {
			static const char deleted[] = " (deleted)";
			size_t pl = strlen(path);
			char *p;

			if (pl >= sizeof(deleted) - 1 &&
			    !strcmp(path + pl - (sizeof(deleted) - 1), deleted)) {
				m.deleted = true;
				pl -= sizeof(deleted) - 1;
			}
			if (!(p = malloc(pl + 1)))
				return pg_err(d, -ENOMEM, "out of memory");
			memcpy(p, path, pl);
			p[pl] = 0;
			if (build && strstr(p, "$build")) {
				char *s = substitute(p, build);

				free(p);
				if (!(p = s))
					return pg_err(d, -ENOMEM, "out of memory");
			}
			if (m.deleted)
				pg_warn(d, "%s: offset %zu: %s was deleted after it was mapped; the file now at that path may be another build",
					g->name, line_off, p);
			m.path = p;
			m.line_offset = line_off;
			if (!pg_grow((void **)&g->maps, &g->mcap, g->nmaps + 1, sizeof(*g->maps))) {
				free(p);
				return pg_err(d, -ENOMEM, "out of memory");
			}
			g->maps[g->nmaps++] = m;
			g->st.map_lines++;
		} else if (*b) {
			g->st.ignored_lines++;	/* unrecognised lines are ignored */
		}
		line = (nl ? nl : end) + 1;
	}
	return 0;
}

static int parse(pg_gperf *g, struct pg_diag *d)
{
	size_t text_at;
	int ret;

	if (detect(g->base, g->size, &g->ws, &g->h.big_endian) < 0)
		return pg_err(d, -EINVAL, "%s: offset 0: not a gperftools CPU profile (the header fits neither 32- nor 64-bit slots in either byte order)",
			      g->name);
	g->h.word_bits = g->ws * 8;
	if (g->size < 5 * g->ws)
		return pg_err(d, -EINVAL, "%s: offset 0: %zu bytes: shorter than a CPU profile header",
			      g->name, g->size);
	if (word(g, 0) != 0)
		return pg_err(d, -EINVAL, "%s: offset 0: header count %llu, expected 0", g->name,
			      (unsigned long long)word(g, 0));
	g->h.header_slots = word(g, g->ws);
	if (g->h.header_slots < 3 || g->h.header_slots > (g->size / g->ws) - 2)
		return pg_err(d, -EINVAL, "%s: offset %u: %llu header words: expected at least 3, within the file",
			      g->name, g->ws, (unsigned long long)g->h.header_slots);
	g->h.version = word(g, 2 * g->ws);
	if (g->h.version != 0)
		return pg_err(d, -EINVAL, "%s: offset %u: format version %llu: only C/C++ CPU profiles (version 0) are read%s",
			      g->name, 2 * g->ws, (unsigned long long)g->h.version,
			      g->h.version == 1 ? " (version 1 is a Java profile)" : "");
	g->h.period_us = word(g, 3 * g->ws);
	if (g->h.period_us == 0)
		pg_warn(d, "%s: offset %u: sampling period 0: taken as %u us (gperftools' default)",
			g->name, 3 * g->ws, PG_GPERF_DEFAULT_PERIOD_US);
	if ((ret = read_records(g, d, &text_at)) < 0)
		return ret;
	for (size_t i = 0; i < g->nstacks; i++)	/* g->pcs is final */
		g->stacks[i].pcs = g->pcs + g->at[i];
	if ((g->st.trailer || g->st.zero_pc_records) && (ret = read_maps(g, text_at, d)) < 0)
		return ret;
	if (g->st.trailer && !g->nmaps)
		pg_warn(d, "%s: offset %zu: no mapped objects after the trailer: addresses cannot be symbolized",
			g->name, text_at);
	return 0;
}

static int open_common(pg_gperf *g, struct pg_diag *d, pg_gperf **out)
{
	int ret = parse(g, d);

	if (ret < 0) {
		pg_gperf_close(g);
		return ret;
	}
	*out = g;
	return 0;
}

int pg_gperf_open_mem(const void *buf, size_t len, const char *name,
		      struct pg_diag *diag, pg_gperf **out)
{
	pg_gperf *g = calloc(1, sizeof(*g));

	*out = NULL;
	if (!g || !(g->name = strdup(name ? name : "profile"))) {
		free(g);
		return pg_err(diag, -ENOMEM, "out of memory");
	}
	g->base = buf;
	g->size = len;
	return open_common(g, diag, out);
}

int pg_gperf_open(const char *path, struct pg_diag *diag, pg_gperf **out)
{
	pg_gperf *g = calloc(1, sizeof(*g));
	int ret;

	*out = NULL;
	if (!g || !(g->name = strdup(path))) {
		free(g);
		return pg_err(diag, -ENOMEM, "out of memory");
	}
	if ((ret = pg_map_file(path, true, diag, &g->base, &g->size)) < 0) {
		pg_gperf_close(g);
		return ret;
	}
	g->mapped = true;
	return open_common(g, diag, out);
}

const struct pg_gperf_header *pg_gperf_header(const pg_gperf *g)
{
	return &g->h;
}

void pg_gperf_stats(const pg_gperf *g, struct pg_gperf_stats *st)
{
	pg_sized_out(st, &g->st, sizeof(g->st));
}

size_t pg_gperf_stack_count(const pg_gperf *g)
{
	return g->nstacks;
}

const struct pg_gperf_stack *pg_gperf_stack(const pg_gperf *g, size_t i)
{
	return i < g->nstacks ? &g->stacks[i] : NULL;
}

size_t pg_gperf_mapping_count(const pg_gperf *g)
{
	return g->nmaps;
}

const struct pg_gperf_mapping *pg_gperf_mapping(const pg_gperf *g, size_t i)
{
	return i < g->nmaps ? &g->maps[i] : NULL;
}

void pg_gperf_close(pg_gperf *g)
{
	if (!g)
		return;
	if (g->mapped)
		pg_unmap_file(g->base, g->size);
	for (size_t i = 0; i < g->nmaps; i++)
		free((char *)g->maps[i].path);
	free(g->maps);
	free(g->text);
	free(g->stacks);
	free(g->at);
	free(g->pcs);
	free(g->slots);
	free(g->name);
	free(g);
}
