/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for pg_sym_parse_addr(), the parser of the address
 * arguments of `perfgraft symbolize` ("ADDR[@TIME]").  The input is parsed
 * whole, then line by line (split at '\n'), each piece in a heap buffer of
 * its exact length so that ASan sees a read past it.  Checked:
 *
 * - a failure is -EINVAL with err_at <= len;
 * - a success re-formats: the address as hex (bare, "0X" upper case with
 *   blanks around, zero-padded to 20 digits) and the time as "@NS" (none
 *   for PG_SYM_TIME_END), as "@SECS.NNNNNNNNN:" and as the shortest
 *   fraction that stands for the same interval end ("@S.12" for
 *   S.129999999); each must parse back to the same (addr, time).  One hex
 *   digit more parses iff the address has room for it;
 * - the parsed address is looked up in a small hand-made jitdump
 *   (fuzz_symcheck.h, built once) and the answer compared with a model of
 *   the time rule of symbolize.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYM_DEMO
#include "fuzz_symcheck.h"

/* s must parse to (addr, time). */
static void expect(const char *s, uint64_t addr, uint64_t time)
{
	size_t len = strlen(s), err_at = 0;
	char *copy = malloc(len ? len : 1);	/* no NUL: the parser has a length */
	uint64_t a = 0, t = 0;
	int ret;

	if (!copy)
		return;
	memcpy(copy, s, len);
	ret = pg_sym_parse_addr(copy, len, &a, &t, &err_at);
	free(copy);
	if (ret != 0 || a != addr || t != time)
		SYM_FAIL("\"%s\" gave %d %#" PRIx64 "@%" PRIu64 " (err_at %zu), not %#" PRIx64 "@%" PRIu64,
			 s, ret, a, t, err_at, addr, time);
}

static void reformat(uint64_t addr, uint64_t time)
{
	/* the largest seconds the parser takes with a fraction */
	const uint64_t max_secs = (UINT64_MAX - 999999999) / 1000000000ull;
	char at[64] = "", buf[128];
	size_t err_at;
	uint64_t a, t;

	if (time != PG_SYM_TIME_END)
		snprintf(at, sizeof(at), "@%" PRIu64, time);
	snprintf(buf, sizeof(buf), "%" PRIx64 "%s", addr, at);
	expect(buf, addr, time);
	snprintf(buf, sizeof(buf), " \t0X%" PRIX64 "%s \r\n", addr, at);
	expect(buf, addr, time);
	snprintf(buf, sizeof(buf), "0x%020" PRIx64 "%s", addr, at);
	expect(buf, addr, time);
	/* one more digit: fits iff the top nibble is free */
	snprintf(buf, sizeof(buf), "%" PRIx64 "0", addr);
	if ((pg_sym_parse_addr(buf, strlen(buf), &a, &t, &err_at) == 0) != !(addr >> 60) ||
	    (!(addr >> 60) && (a != addr << 4 || t != PG_SYM_TIME_END)))
		SYM_FAIL("\"%s\": one digit more than %#" PRIx64 " mis-parsed", buf, addr);
	if (time != PG_SYM_TIME_END && time / 1000000000ull <= max_secs) {
		uint64_t secs = time / 1000000000ull, frac = time % 1000000000ull;
		char f[16];
		size_t n;

		snprintf(buf, sizeof(buf), "%" PRIx64 "@%" PRIu64 ".%09" PRIu64 ":", addr, secs, frac);
		expect(buf, addr, time);
		/* trailing 9s are what a shorter fraction's interval end adds */
		snprintf(f, sizeof(f), "%09" PRIu64, frac);
		for (n = 9; n > 1 && f[n - 1] == '9'; n--)
			;
		f[n] = 0;
		snprintf(buf, sizeof(buf), "%" PRIx64 "@%" PRIu64 ".%s", addr, secs, f);
		expect(buf, addr, time);
	}
}

static void one(const uint8_t *data, size_t len)
{
	char *s = malloc(len ? len : 1);
	size_t err_at = SIZE_MAX;
	uint64_t addr = 0, time = 0;
	int ret;

	if (!s)
		return;
	memcpy(s, data, len);
	ret = pg_sym_parse_addr(s, len, &addr, &time, &err_at);
	free(s);
	if (ret < 0) {
		if (ret != -EINVAL)
			SYM_FAIL("parse failed with %d, not -EINVAL", ret);
		if (err_at > len)
			SYM_FAIL("err_at %zu past the length %zu", err_at, len);
		return;
	}
	if (ret != 0)
		SYM_FAIL("parse returned %d", ret);
	reformat(addr, time);
	sym_demo_lookup(addr, time);
	if (time != PG_SYM_TIME_END)
		sym_demo_lookup(addr, PG_SYM_TIME_END);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t a = 0;

	one(data, size);
	for (size_t i = 0; i <= size; i++) {
		if (i == size || data[i] == '\n') {
			if (a < size && (a || i < size))	/* not the whole input again */
				one(data + a, i - a);
			a = i + 1;
		}
	}
	return 0;
}
