/* SPDX-License-Identifier: MIT */
/* Text output shared by the library's text writers (perf script rewriting,
 * perf maps) and the CLI: names from dumps printed safely, and fast hex
 * and decimal numbers. */
#include <string.h>

#include "util/util.h"

int pg_hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

size_t pg_utf8_seq(const unsigned char *p)
{
	unsigned c = p[0];
	size_t n;
	unsigned cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

void pg_put_cut_note(FILE *f, const char *s, const char *at)
{
	fprintf(f, "...(%zu bytes)", (size_t)(at - s) + strlen(at));
}

void pg_put_escaped(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		if ((const char *)p - s >= PG_MAX_PRINTED) {
			pg_put_cut_note(f, s, (const char *)p);
			break;
		}
		size_t n = pg_utf8_seq(p);

		if (*p == '\\')
			fputs("\\\\", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (!n || *p < 0x20 || *p == 0x7f)
			fprintf(f, "\\x%02x", *p);	/* control or not UTF-8 */
		else {
			fwrite(p, 1, n, f);
			p += n;
			continue;
		}
		p++;
	}
}

void pg_put_text(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p >= 0x20 && *p < 0x7f && *p != '\\')
		p++;
	if (!*p)
		fputs_unlocked(s, f);
	else
		pg_put_escaped(f, s);
}

void pg_put_hex(FILE *f, uint64_t v)
{
	char buf[20], *e = buf + sizeof(buf), *p = e;

	do {
		*--p = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	*--p = 'x';
	*--p = '0';
	fwrite_unlocked(p, 1, (size_t)(e - p), f);
}

void pg_put_dec(FILE *f, uint64_t v)
{
	char buf[24], *e = buf + sizeof(buf), *p = e;

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	fwrite_unlocked(p, 1, (size_t)(e - p), f);
}
