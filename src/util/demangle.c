/* SPDX-License-Identifier: MIT */
/* Symbol names demangled as perf shows them: C++ (Itanium ABI) with their
 * parameter lists, and Rust's legacy names without their hash.
 *
 * The C++ demangler is libstdc++'s __cxa_demangle, looked up with dlopen()
 * the first time a name needs it, so that libperfgraft does not link the
 * C++ runtime into every program that uses it for this one function.
 * Without libstdc++.so.6 names stay mangled.
 *
 * Rust's legacy mangling is Itanium's _ZN...E with a last element
 * "h" + 16 hex digits (a hash) and $..$ escapes for the characters C++
 * identifiers lack; __cxa_demangle yields "a::b::h0123456789abcdef" with
 * the escapes left in.  perf 6.1 drops the hash and decodes the escapes
 * (libiberty's rust_demangle, or its own demangle-rust.c), and so does
 * this file.  Rust's v0 names (_R...) are not decoded: no demangler this
 * project can depend on through pkg-config reads them. */
#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len,
				 int *status);

static cxa_demangle_fn cxa_demangle;
static pthread_once_t cxa_once = PTHREAD_ONCE_INIT;

static void cxa_load(void)
{
	/* never closed: the pointer must stay valid for the process (a
	 * libstdc++ already in the process is only referenced again) */
	void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);

	if (h)
		*(void **)&cxa_demangle = dlsym(h, "__cxa_demangle");
}

/* "::h" + 16 hex digits at the end of s, as rustc writes its hash; rustc's
 * hashes use most of the 16 digits, a C++ name ending in such an element
 * rarely does (libiberty asks for at least 5 distinct digits as well) */
static bool rust_hash_at(const char *s, size_t len)
{
	unsigned seen = 0, distinct = 0;

	if (len < 19 || memcmp(s + len - 19, "::h", 3))
		return false;
	for (size_t i = len - 16; i < len; i++) {
		int c = (unsigned char)s[i], v;

		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else
			return false;
		if (!(seen & 1u << v))
			distinct++;
		seen |= 1u << v;
	}
	return distinct >= 5;
}

/* the UTF-8 encoding of code point cp into out (at least 4 bytes) */
static size_t utf8(unsigned long cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Decodes the $..$ escapes and ".." of a legacy Rust path of len bytes
 * into out (len + 1 bytes: decoding never lengthens it).  false on an
 * escape rustc does not write: then the name is not Rust's. */
static bool rust_unescape(const char *s, size_t len, char *out)
{
	static const struct { const char *esc; char c; } named[] = {
		{ "$SP$", '@' }, { "$BP$", '*' }, { "$RF$", '&' }, { "$LT$", '<' },
		{ "$GT$", '>' }, { "$LP$", '(' }, { "$RP$", ')' }, { "$C$", ',' },
	};
	size_t o = 0, i = 0;

	while (i < len) {
		/* an element starting with "_$" is "$": the "_" only makes
		 * it an identifier */
		if (s[i] == '_' && i + 1 < len && s[i + 1] == '$' &&
		    (i == 0 || s[i - 1] == ':')) {
			i++;
			continue;
		}
		if (s[i] == '.') {
			if (i + 1 < len && s[i + 1] == '.') {
				out[o++] = ':';
				out[o++] = ':';
				i += 2;
			} else {
				out[o++] = '.';
				i++;
			}
			continue;
		}
		if (s[i] != '$') {
			out[o++] = s[i++];
			continue;
		}
		const char *end = memchr(s + i + 1, '$', len - i - 1);
		size_t n;
		bool done = false;

		if (!end)
			return false;
		n = (size_t)(end - (s + i)) + 1;
		for (size_t k = 0; k < sizeof(named) / sizeof(named[0]); k++)
			if (strlen(named[k].esc) == n && !memcmp(s + i, named[k].esc, n)) {
				out[o++] = named[k].c;
				done = true;
				break;
			}
		if (!done) {	/* $uXX$: a code point in hex */
			unsigned long cp = 0;

			/* n >= 4 ("$uX$"), and UTF-8 takes at most 4 bytes */
			if (n < 4 || n > 10 || s[i + 1] != 'u')
				return false;
			for (size_t k = i + 2; k < i + n - 1; k++) {
				if (!isxdigit((unsigned char)s[k]) || isupper((unsigned char)s[k]))
					return false;
				cp = cp * 16 + (unsigned long)(isdigit((unsigned char)s[k]) ?
					s[k] - '0' : s[k] - 'a' + 10);
			}
			if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
				return false;
			o += utf8(cp, out + o);
		}
		i += n;
	}
	out[o] = '\0';
	return true;
}

char *pg_demangle(const char *name)
{
	char *d = NULL, *out;
	int status = -1;
	size_t len;

	if (name[0] != '_' || name[1] != 'Z')
		return strdup(name);
	pthread_once(&cxa_once, cxa_load);
	if (cxa_demangle)
		d = cxa_demangle(name, NULL, NULL, &status);
	if (!d || status != 0) {
		free(d);
		return strdup(name);
	}
	len = strlen(d);
	/* Rust legacy: "_ZN" path "E" with no parameters, its hash last */
	if (name[2] != 'N' || name[strlen(name) - 1] != 'E' || !rust_hash_at(d, len))
		return d;
	out = malloc(len + 1);
	if (!out) {
		free(d);
		return NULL;
	}
	if (!rust_unescape(d, len - 19, out)) {
		free(out);
		return d;
	}
	free(d);
	return out;
}
