/* SPDX-License-Identifier: MIT */
/* Parsers for what users feed the symbolizer: address arguments and lines
 * of `perf script` output.  Both take untrusted text with a length and
 * never read past it. */
#include <errno.h>
#include <string.h>

#include <perfgraft/symbolize.h>
#include "util/util.h"
#include "symbolize/script.h"

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Hex digits at s[*i]: false when there are none or the value overflows. */
static bool parse_hex(const char *s, size_t len, size_t *i, uint64_t *v)
{
	size_t start = *i;
	uint64_t x = 0;
	int d;

	while (*i < len && (d = pg_hexval(s[*i])) >= 0) {
		if (x >> 60)
			return false;
		x = x << 4 | (uint64_t)d;
		(*i)++;
	}
	*v = x;
	return *i > start;
}

static bool parse_dec(const char *s, size_t len, size_t *i, uint64_t *v, size_t *ndig)
{
	size_t start = *i;
	uint64_t x = 0;

	while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
		unsigned d = (unsigned)(s[*i] - '0');

		if (x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
		(*i)++;
	}
	*v = x;
	*ndig = *i - start;
	return *i > start;
}

/* "secs.frac" (frac 1..9 digits) or integer ns at s[*i], into ns; a short
 * fraction gives the end of the interval it stands for. */
static bool parse_time(const char *s, size_t len, size_t *i, uint64_t *ns)
{
	uint64_t secs, frac, scale = 1;
	size_t nd;

	if (!parse_dec(s, len, i, &secs, &nd))
		return false;
	if (*i >= len || s[*i] != '.') {
		*ns = secs;
		return true;
	}
	(*i)++;
	if (!parse_dec(s, len, i, &frac, &nd) || nd > 9)
		return false;
	for (size_t k = nd; k < 9; k++)
		scale *= 10;
	if (secs > (UINT64_MAX - 999999999) / 1000000000ull)
		return false;
	*ns = secs * 1000000000ull + frac * scale + (scale - 1);
	return true;
}

int pg_sym_parse_addr(const char *s, size_t len, uint64_t *addr, uint64_t *time,
		      size_t *err_at)
{
	size_t i = 0;

	*time = PG_SYM_TIME_END;
	while (i < len && blank(s[i]))
		i++;
	if (i + 1 < len && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X'))
		i += 2;
	if (!parse_hex(s, len, &i, addr))
		goto bad;
	if (i < len && s[i] == '@') {
		i++;
		if (!parse_time(s, len, &i, time))
			goto bad;
		if (i < len && s[i] == ':')
			i++;
	}
	while (i < len && blank(s[i]))
		i++;
	if (i == len)
		return 0;
bad:
	/* the parsers stop at the first character that does not fit */
	*err_at = i < len ? i : len;
	return -EINVAL;
}

static bool all_digits(const char *s, size_t a, size_t b)
{
	if (a >= b)
		return false;
	for (size_t k = a; k < b; k++)
		if (s[k] < '0' || s[k] > '9')
			return false;
	return true;
}

static bool dec32(const char *s, size_t a, size_t b, uint32_t *v)
{
	uint64_t x;
	size_t i = a, nd;

	if (!all_digits(s, a, b) || !parse_dec(s, b, &i, &x, &nd) || x > UINT32_MAX)
		return false;
	*v = (uint32_t)x;
	return true;
}

/* The header's "secs.frac:" token and, before it, "[cpu]" and "pid[/tid]". */
static bool parse_header(const char *s, size_t len, struct pg_script_line *out)
{
	for (size_t i = 0; i < len; i++) {
		size_t j = i, tok_end, k;
		uint64_t ns;

		if ((i && !blank(s[i - 1])) || s[i] < '0' || s[i] > '9')
			continue;
		if (!parse_time(s, len, &j, &ns) || j >= len || s[j] != ':' ||
		    (j + 1 < len && !blank(s[j + 1])))
			continue;
		if (!memchr(s + i, '.', j - i))
			continue;	/* a time has a fraction */
		out->header = true;
		out->time = ns;
		/* walk back over blanks, an optional [cpu], then pid[/tid] */
		k = i;
		while (k && blank(s[k - 1]))
			k--;
		if (k && s[k - 1] == ']') {
			size_t e = k - 1;

			while (k && s[k - 1] != '[')
				k--;
			if (!k || !all_digits(s, k, e))
				return true;
			k--;
			while (k && blank(s[k - 1]))
				k--;
		}
		tok_end = k;
		while (k && !blank(s[k - 1]))
			k--;
		{
			const char *slash = memchr(s + k, '/', tok_end - k);

			if (slash) {
				size_t sl = (size_t)(slash - s);

				if (dec32(s, k, sl, &out->pid) && dec32(s, sl + 1, tok_end, &out->tid))
					out->has_pid = out->has_tid = true;
			} else if (dec32(s, k, tok_end, &out->pid)) {
				out->has_pid = true;
			}
		}
		return true;
	}
	return false;
}

bool pg_script_dso(const char *s, size_t end, size_t *open)
{
	int depth = 0;

	if (!end || s[end - 1] != ')')
		return false;
	for (size_t k = end; k-- > 0;) {
		if (s[k] == ')')
			depth++;
		else if (s[k] == '(' && --depth == 0) {
			*open = k;
			return k >= 1 && s[k - 1] == ' ';
		}
	}
	return false;
}

/* "<hex> [unknown]" with an optional " (DSO)" ending the line. */
static bool parse_frame(const char *s, size_t len, struct pg_script_line *out)
{
	static const char unk[] = "[unknown]";
	const size_t ul = sizeof(unk) - 1;
	size_t end = len, u, a;

	while (end && blank(s[end - 1]))
		end--;
	if (end && s[end - 1] == ')') {
		size_t k;

		if (!pg_script_dso(s, end, &k))
			return false;
		out->has_dso = true;
		out->dso_at = k + 1;
		out->dso_len = end - 1 - (k + 1);
		end = k - 1;
	}
	if (end < ul + 2 || memcmp(s + end - ul, unk, ul) || s[end - ul - 1] != ' ')
		goto no;
	u = end - ul;
	a = u - 1;
	while (a && pg_hexval(s[a - 1]) >= 0)
		a--;
	if (a == u - 1 || (a && !blank(s[a - 1])) || u - 1 - a > 16)
		goto no;
	{
		size_t i = a;

		if (!parse_hex(s, u - 1, &i, &out->addr))
			goto no;
	}
	out->frame = true;
	out->addr_at = a;
	out->addr_len = u - 1 - a;
	out->sym_at = u;
	out->sym_len = ul;
	return true;
no:
	out->has_dso = false;
	out->dso_at = out->dso_len = 0;
	return false;
}

int pg_script_parse_line(const char *line, size_t len, struct pg_script_line *out)
{
	bool h, f;

	memset(out, 0, sizeof(*out));
	/* call-chain lines start with a tab; headers with the comm, which
	 * some field lists pad with spaces */
	h = len && line[0] != '\t' && parse_header(line, len, out);
	f = parse_frame(line, len, out);
	return h || f;
}
