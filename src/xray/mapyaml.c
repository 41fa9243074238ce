/* SPDX-License-Identifier: MIT */
/* A strict reader of the YAML subset `llvm-xray extract` writes for an
 * instrumentation map:
 *
 *     ---
 *     - { id: 1, address: 0x420, function: 0x420, kind: function-enter,
 *         always-instrument: true, function-name: 'foo()', version: 2 }
 *     ...
 *
 * (each flow mapping on one line), and the same entries as block mappings
 * ("- id: 1" then "  address: ..." lines at the key's column), which
 * hand-written maps use.  Comments, one "---", one "..." and "--- []" are
 * accepted; anchors, tags, multi-line scalars and nested collections are
 * not (llvm-xray never writes them), and are errors with their line. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "xray/mapyaml.h"

enum {
	F_ID = 1, F_ADDRESS = 2, F_FUNCTION = 4, F_KIND = 8, F_ALWAYS = 16, F_NAME = 32,
	F_VERSION = 64,
	F_REQUIRED = F_ID | F_ADDRESS | F_FUNCTION | F_KIND | F_ALWAYS,
};

struct parser {
	const char *name;
	struct pg_diag *diag;
	unsigned line;
	struct pg_yaml_sled *v;
	size_t n, cap;
	unsigned have;		/* F_* of the entry being read */
	char *scalar;		/* the last scalar read, unquoted */
	size_t slen, scap;
};

static int perr(struct parser *p, const char *fmt, ...) PG_PRINTF(2, 3);
static int perr(struct parser *p, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return pg_err(p->diag, -EINVAL, "%s: line %u: %s", p->name, p->line, msg);
}

bool pg_yaml_map_probe(const char *buf, size_t len)
{
	size_t i = 0;

	while (i < len) {
		size_t s = i;

		while (i < len && (buf[i] == ' ' || buf[i] == '\t'))
			i++;
		if (i < len && buf[i] != '\n' && buf[i] != '\r' && buf[i] != '#') {
			if (len - i >= 3 && !memcmp(buf + i, "---", 3))
				return true;
			return i == s && len - i >= 2 && buf[i] == '-' && buf[i + 1] == ' ';
		}
		while (i < len && buf[i] != '\n')
			i++;
		i++;
	}
	return false;
}

static int put_char(struct parser *p, char c)
{
	if (!pg_grow((void **)&p->scalar, &p->scap, p->slen + 2, 1))
		return pg_err(p->diag, -ENOMEM, "%s: out of memory", p->name);
	p->scalar[p->slen++] = c;
	p->scalar[p->slen] = 0;
	return 0;
}

static int put_utf8(struct parser *p, unsigned long cp)
{
	char b[4];
	int n, ret = 0;

	if (cp < 0x80) {
		b[0] = (char)cp; n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | cp >> 6); b[1] = (char)(0x80 | (cp & 0x3f)); n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | cp >> 12); b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f)); n = 3;
	} else {
		b[0] = (char)(0xf0 | cp >> 18); b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); b[3] = (char)(0x80 | (cp & 0x3f)); n = 4;
	}
	for (int i = 0; i < n && !ret; i++)
		ret = put_char(p, b[i]);
	return ret;
}

/* One scalar from s[*i..e): quoted ('' and "\" escapes) or plain up to one
 * of stop (and never past " #").  Leaves it in p->scalar; *quoted says
 * which (a quoted "true" is a string, not a boolean). */
static int scalar(struct parser *p, const char *s, size_t *i, size_t e, const char *stop,
		  bool *quoted)
{
	size_t k = *i;
	int ret = 0;

	p->slen = 0;
	if (put_char(p, 0) < 0)
		return -ENOMEM;
	p->slen = 0;
	*quoted = k < e && (s[k] == '\'' || s[k] == '"');
	if (*quoted) {
		char q = s[k++];

		for (;;) {
			if (k >= e)
				return perr(p, "unterminated %s-quoted string (multi-line scalars are not read)",
					    q == '\'' ? "single" : "double");
			char c = s[k++];

			if (c == q) {
				if (q == '\'' && k < e && s[k] == '\'') {
					k++;
					ret = put_char(p, '\'');
				} else {
					break;
				}
			} else if (c == '\\' && q == '"') {
				static const char from[] = "\\\"/0abtnvfre ", to[] = "\\\"/\0\a\b\t\n\v\f\r\033 ";
				const char *f;

				if (k >= e)
					return perr(p, "unterminated escape");
				c = s[k++];
				if (c && (f = strchr(from, c))) {
					ret = put_char(p, to[f - from]);
				} else if (c == 'x' || c == 'u' || c == 'U') {
					int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
					unsigned long cp = 0;

					for (int d = 0; d < nd; d++, k++) {
						int h = k < e ? pg_hexval(s[k]) : -1;

						if (h < 0)
							return perr(p, "bad \\%c escape", c);
						cp = cp << 4 | (unsigned)h;
					}
					if (cp > 0x10ffff)
						return perr(p, "bad \\%c escape", c);
					ret = put_utf8(p, cp);
				} else {
					return perr(p, "unknown escape \\%c", c);
				}
			} else {
				ret = put_char(p, c);
			}
			if (ret < 0)
				return ret;
		}
	} else {
		size_t end = k;

		if (k < e && strchr("[{&*!|>%@`", s[k]))
			return perr(p, "'%c' starts a YAML construct llvm-xray's maps do not use", s[k]);
		while (end < e && !strchr(stop, s[end]) &&
		       !(s[end] == '#' && end > k && (s[end - 1] == ' ' || s[end - 1] == '\t')))
			end++;
		*i = end;
		while (end > k && (s[end - 1] == ' ' || s[end - 1] == '\t'))
			end--;
		for (; k < end; k++)
			if ((ret = put_char(p, s[k])) < 0)
				return ret;
		return 0;
	}
	*i = k;
	return 0;
}

static int number(struct parser *p, const char *key, uint64_t max, uint64_t *out)
{
	const char *s = p->scalar;
	unsigned base = 10;
	uint64_t v = 0;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!*s)
		return perr(p, "%s: '%s' is not a number", key, p->scalar);
	for (; *s; s++) {
		int d = base == 16 ? pg_hexval(*s) : (*s >= '0' && *s <= '9' ? *s - '0' : -1);

		if (d < 0)
			return perr(p, "%s: '%s' is not a number", key, p->scalar);
		if (v > (max - (unsigned)d) / base)
			return perr(p, "%s: %s is out of range (at most %llu)", key, p->scalar,
				    (unsigned long long)max);
		v = v * base + (unsigned)d;
	}
	*out = v;
	return 0;
}

/* key: the scalar just read as a key; then the value at s[*i..e). */
static int field(struct parser *p, const char *s, size_t *i, size_t e, const char *stop)
{
	static const char *const keys[] = { "id", "address", "function", "kind",
					    "always-instrument", "function-name", "version" };
	static const char *const kinds[] = { "function-enter", "function-exit", "tail-exit",
					     "log-args-enter", "custom-event", "typed-event" };
	struct pg_yaml_sled *sl = &p->v[p->n - 1];
	unsigned bit = 0;
	bool quoted;
	uint64_t v;
	int ret;

	for (unsigned k = 0; k < sizeof(keys) / sizeof(*keys); k++)
		if (!strcmp(p->scalar, keys[k]))
			bit = 1u << k;
	if (!bit)
		return perr(p, "unknown key '%s'", p->scalar);
	if (p->have & bit)
		return perr(p, "key '%s' given twice", p->scalar);
	p->have |= bit;
	while (*i < e && s[*i] == ' ')
		(*i)++;
	if ((ret = scalar(p, s, i, e, stop, &quoted)) < 0)
		return ret;
	switch (bit) {
	case F_ID:
		/* the runtime's IDs: 1 up to what an FDR record's 28 bits hold */
		if ((ret = number(p, "id", 0x0fffffff, &v)) < 0)
			return ret;
		if (!v)
			return perr(p, "id: 0 is not a function ID (they start at 1)");
		sl->id = (uint32_t)v;
		return 0;
	case F_ADDRESS:
		return number(p, "address", UINT64_MAX, &sl->address);
	case F_FUNCTION:
		return number(p, "function", UINT64_MAX, &sl->function);
	case F_VERSION:
		if ((ret = number(p, "version", 255, &v)) < 0)
			return ret;
		sl->version = (uint8_t)v;
		return 0;
	case F_KIND:
		for (unsigned k = 0; k < sizeof(kinds) / sizeof(*kinds); k++)
			if (!strcmp(p->scalar, kinds[k])) {
				sl->kind = (uint8_t)k;
				return 0;
			}
		return perr(p, "kind: unknown sled kind '%s'", p->scalar);
	case F_ALWAYS:
		if (!quoted && (!strcmp(p->scalar, "true") || !strcmp(p->scalar, "True") ||
				!strcmp(p->scalar, "TRUE")))
			sl->always_instrument = true;
		else if (quoted || (strcmp(p->scalar, "false") && strcmp(p->scalar, "False") &&
				    strcmp(p->scalar, "FALSE")))
			return perr(p, "always-instrument: '%s' is not true or false", p->scalar);
		return 0;
	default:	/* F_NAME */
		if (p->slen && !(sl->function_name = strdup(p->scalar)))
			return pg_err(p->diag, -ENOMEM, "%s: out of memory", p->name);
		return 0;
	}
}

/* "key: value" at s[*i..e) up to one of stop. */
static int pair(struct parser *p, const char *s, size_t *i, size_t e, const char *stop)
{
	size_t k = *i;
	int ret;

	/* keys are plain words: stop at the ':' */
	while (k < e && s[k] != ':' && !strchr(stop, s[k]) && s[k] != ' ')
		k++;
	if (k == *i)
		return perr(p, "expected a key");
	if (k >= e || s[k] != ':' || (k + 1 < e && s[k + 1] != ' '))
		return perr(p, "expected ': ' after the key '%.*s'", (int)(k - *i), s + *i);
	p->slen = 0;
	for (size_t j = *i; j < k; j++)
		if ((ret = put_char(p, s[j])) < 0)
			return ret;
	*i = k + 1;
	return field(p, s, i, e, stop);
}

static int entry_done(struct parser *p)
{
	static const char *const req[] = { "id", "address", "function", "kind", "always-instrument" };

	if (!p->n || (p->have & F_REQUIRED) == F_REQUIRED)
		return 0;
	for (unsigned k = 0; k < 5; k++)
		if (!(p->have & (1u << k))) {
			p->line = p->v[p->n - 1].line;
			return perr(p, "the entry has no '%s'", req[k]);
		}
	return 0;
}

static int new_entry(struct parser *p)
{
	int ret = entry_done(p);

	if (ret < 0)
		return ret;
	if (!pg_grow((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)))
		return pg_err(p->diag, -ENOMEM, "%s: out of memory", p->name);
	memset(&p->v[p->n], 0, sizeof(*p->v));
	p->v[p->n++].line = p->line;
	p->have = 0;
	return 0;
}

/* The rest of a line after its scalars: only blanks or a comment. */
static int line_end(struct parser *p, const char *s, size_t i, size_t e)
{
	while (i < e && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i < e && s[i] != '#')
		return perr(p, "unexpected '%c'", s[i]);
	return 0;
}

static int flow_entry(struct parser *p, const char *s, size_t i, size_t e)
{
	int ret;

	i++;	/* '{' */
	for (;;) {
		while (i < e && s[i] == ' ')
			i++;
		if (i < e && s[i] == '}')
			break;
		if ((ret = pair(p, s, &i, e, ",}")) < 0)
			return ret;
		while (i < e && s[i] == ' ')
			i++;
		if (i < e && s[i] == ',') {
			i++;
			continue;
		}
		if (i < e && s[i] == '}')
			break;
		return perr(p, i < e ? "expected ',' or '}'"
				     : "the entry's '{' is not closed on its line (llvm-xray writes one entry a line)");
	}
	return line_end(p, s, i + 1, e);
}

int pg_yaml_map_parse(const char *buf, size_t len, const char *name, struct pg_diag *diag,
		      struct pg_yaml_sled **out, size_t *nout)
{
	struct parser p = { .name = name, .diag = diag };
	enum { BEFORE, LIST, ENDED } state = BEFORE;
	size_t pos = 0;
	long list_col = -1, key_col = -1;	/* the list's '-'; a block entry's keys */
	bool empty_list = false;
	int ret = 0;

	*out = NULL;
	*nout = 0;
	while (pos < len && ret == 0) {
		const char *s = buf + pos, *nl = memchr(s, '\n', len - pos);
		size_t e = nl ? (size_t)(nl - s) : len - pos, i = 0;

		pos += e + 1;
		p.line++;
		if (e && s[e - 1] == '\r')
			e--;
		if (memchr(s, 0, e)) {
			ret = perr(&p, "a NUL byte: not a text file");
			break;
		}
		while (i < e && s[i] == ' ')
			i++;
		if (i < e && s[i] == '\t') {
			ret = perr(&p, "a tab in the indentation");
			break;
		}
		if (i == e || s[i] == '#')
			continue;
		if (state == ENDED) {
			ret = perr(&p, "text after the document's end ('...')");
			break;
		}
		if (i == 0 && e >= 3 && !memcmp(s, "...", 3) && (e == 3 || s[3] == ' ')) {
			if ((ret = line_end(&p, s, 3, e)) == 0)
				state = ENDED;
			continue;
		}
		if (i == 0 && e >= 3 && !memcmp(s, "---", 3) && (e == 3 || s[3] == ' ')) {
			if (state != BEFORE || p.n) {
				ret = perr(&p, "a second document: one map a file");
				break;
			}
			state = LIST;
			i = 3;
			while (i < e && s[i] == ' ')
				i++;
			if (i + 1 < e && s[i] == '[' && s[i + 1] == ']') {
				empty_list = true;
				ret = line_end(&p, s, i + 2, e);
			} else {
				ret = line_end(&p, s, i, e);
			}
			continue;
		}
		state = LIST;
		if (empty_list) {
			ret = perr(&p, "entries after an empty list ('[]')");
			break;
		}
		if (s[i] == '-' && (i + 1 == e || s[i + 1] == ' ')) {
			if (list_col < 0)
				list_col = (long)i;
			if ((long)i != list_col) {
				ret = perr(&p, "list entry at column %zu, the list's are at %ld (nested lists are not read)",
					   i + 1, list_col + 1);
				break;
			}
			if ((ret = new_entry(&p)) < 0)
				break;
			i++;
			while (i < e && s[i] == ' ')
				i++;
			key_col = -1;
			if (i == e)
				continue;	/* a block mapping follows */
			if (s[i] == '{') {
				ret = flow_entry(&p, s, i, e);
				continue;
			}
			key_col = (long)i;
			if ((ret = pair(&p, s, &i, e, "")) == 0)
				ret = line_end(&p, s, i, e);
			continue;
		}
		if (!p.n || (long)i <= list_col) {
			ret = perr(&p, "expected a list entry ('- ')");
			break;
		}
		if (key_col < 0)
			key_col = (long)i;
		if ((long)i != key_col) {
			ret = perr(&p, "key at column %zu, the entry's keys are at %ld", i + 1, key_col + 1);
			break;
		}
		if ((ret = pair(&p, s, &i, e, "")) == 0)
			ret = line_end(&p, s, i, e);
	}
	if (ret == 0)
		ret = entry_done(&p);
	free(p.scalar);
	if (ret < 0) {
		pg_yaml_sleds_free(p.v, p.n);
		return ret;
	}
	*out = p.v;
	*nout = p.n;
	return 0;
}

void pg_yaml_sleds_free(struct pg_yaml_sled *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].function_name);
	free(v);
}
