/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for pg_script_parse_line(), the reader of `perf script`
 * output behind `perfgraft symbolize --perf-script`.  Every line of the
 * input (split at '\n') is parsed from a heap buffer of its exact length,
 * so that ASan sees a read past it, and again with its '\n'.  Checked:
 *
 * - the return value is header || frame, and both parses agree field by
 *   field (a trailing newline changes nothing);
 * - a frame's offsets and lengths lie inside the line: the address is 1..16
 *   hex digits that pg_sym_parse_addr() reads back as addr, one blank
 *   before "[unknown]" (the sym text), and the DSO, when there is one,
 *   sits in the parentheses right after it with only blanks behind;
 * - without a frame, no frame field is set; a tid comes with a pid;
 * - as the CLI does, each frame's address is looked up at the time of the
 *   last header line in a small hand-made jitdump (fuzz_symcheck.h) and
 *   the answer compared with a model of the time rule of symbolize.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYM_DEMO
#include "fuzz_symcheck.h"

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool same(const struct pg_script_line *a, const struct pg_script_line *b)
{
	return a->header == b->header && a->has_pid == b->has_pid && a->has_tid == b->has_tid &&
	       a->pid == b->pid && a->tid == b->tid && a->time == b->time &&
	       a->frame == b->frame && a->addr == b->addr && a->addr_at == b->addr_at &&
	       a->addr_len == b->addr_len && a->sym_at == b->sym_at && a->sym_len == b->sym_len &&
	       a->has_dso == b->has_dso && a->dso_at == b->dso_at && a->dso_len == b->dso_len;
}

static void check(const char *l, size_t len, const struct pg_script_line *o, int ret)
{
	if (ret != (o->header || o->frame))
		SYM_FAIL("returned %d, header %d frame %d", ret, o->header, o->frame);
	if (o->has_tid && !o->has_pid)
		SYM_FAIL("a tid without a pid");
	if ((o->has_pid || o->has_tid) && !o->header)
		SYM_FAIL("a pid without a header");
	if (!o->header && o->time)
		SYM_FAIL("a time without a header");
	if (!o->frame) {
		if (o->addr || o->addr_at || o->addr_len || o->sym_at || o->sym_len ||
		    o->has_dso || o->dso_at || o->dso_len)
			SYM_FAIL("frame fields set without a frame");
		return;
	}
	if (o->addr_len < 1 || o->addr_len > 16 || o->addr_at > len ||
	    o->addr_len > len - o->addr_at)
		SYM_FAIL("address [%zu, +%zu) in a line of %zu", o->addr_at, o->addr_len, len);
	if (o->sym_at > len || o->sym_len > len - o->sym_at)
		SYM_FAIL("sym [%zu, +%zu) in a line of %zu", o->sym_at, o->sym_len, len);
	if (o->sym_len != 9 || memcmp(l + o->sym_at, "[unknown]", 9))
		SYM_FAIL("sym text is not [unknown]");
	if (o->sym_at != o->addr_at + o->addr_len + 1 || l[o->sym_at - 1] != ' ')
		SYM_FAIL("no single blank between address and sym");
	if (o->addr_at && !is_blank(l[o->addr_at - 1]))
		SYM_FAIL("address glued to what precedes it");
	{
		uint64_t a, t;
		size_t err_at;

		if (pg_sym_parse_addr(l + o->addr_at, o->addr_len, &a, &t, &err_at) != 0 ||
		    a != o->addr || t != PG_SYM_TIME_END)
			SYM_FAIL("address text does not read back as %#" PRIx64, o->addr);
		for (size_t k = 0; k < o->addr_len; k++)
			if (!strchr("0123456789abcdefABCDEF", l[o->addr_at + k]) || !l[o->addr_at + k])
				SYM_FAIL("address text holds a non-hex byte");
	}
	if (o->has_dso) {
		if (o->dso_at > len || o->dso_len > len - o->dso_at)
			SYM_FAIL("dso [%zu, +%zu) in a line of %zu", o->dso_at, o->dso_len, len);
		if (o->dso_at != o->sym_at + o->sym_len + 2 || l[o->dso_at - 1] != '(' ||
		    l[o->dso_at - 2] != ' ' || o->dso_at + o->dso_len >= len ||
		    l[o->dso_at + o->dso_len] != ')')
			SYM_FAIL("dso not in parentheses right after [unknown]");
		for (size_t k = o->dso_at + o->dso_len + 1; k < len; k++)
			if (!is_blank(l[k]))
				SYM_FAIL("text after the dso");
	} else {
		if (o->dso_at || o->dso_len)
			SYM_FAIL("dso fields set without a dso");
		for (size_t k = o->sym_at + o->sym_len; k < len; k++)
			if (!is_blank(l[k]))
				SYM_FAIL("text after [unknown]");
	}
}

/* One line (without its '\n'); *time: the last header's, carried on. */
static void one(const uint8_t *data, size_t len, uint64_t *time)
{
	struct pg_script_line a, b;
	char *l = malloc(len ? len : 1), *nl = malloc(len + 1);
	int ra, rb;

	if (!l || !nl) {
		free(l);
		free(nl);
		return;
	}
	memcpy(l, data, len);
	memcpy(nl, data, len);
	nl[len] = '\n';
	ra = pg_script_parse_line(l, len, &a);
	check(l, len, &a, ra);
	rb = pg_script_parse_line(nl, len + 1, &b);
	check(nl, len + 1, &b, rb);
	free(l);
	free(nl);
	if (ra != rb || !same(&a, &b))
		SYM_FAIL("a trailing newline changed the parse");
	if (a.header)
		*time = a.time;
	if (a.frame) {
		sym_demo_lookup(a.addr, *time);
		if (*time != PG_SYM_TIME_END)
			sym_demo_lookup(a.addr, PG_SYM_TIME_END);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t time = PG_SYM_TIME_END;
	size_t a = 0;

	for (size_t i = 0; i <= size; i++) {
		if (i == size || data[i] == '\n') {
			if (i > a || i < size)
				one(data + a, i - a, &time);
			a = i + 1;
		}
	}
	return 0;
}
