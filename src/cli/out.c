/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/util.h"

#define MAX_SHOWN 20	/* warnings printed before -v is needed */
#define KIND_SHOWN 3	/* of one kind */
#define MAX_KINDS 256	/* kinds told apart; later kinds count in hidden */
#define KIND_QUOTE 100	/* bytes of a kind's first message its summary quotes */
#define MAX_COLLECTED 1000	/* warnings kept for JSON output */

struct cli_warn_kind {
	char *key;		/* the message, its numbers and quoted names blanked */
	char *first;		/* its first message */
	unsigned long seen, hidden;
};

/* A warning's kind: the message with every run of digits (offsets,
 * counts, pids, hex addresses) and every quoted name made '#', so that
 * "offset 1919520: DEBUG_INFO has 8 entries" and "offset 1926907:
 * DEBUG_INFO has 9 entries" are one kind. */
static char *kind_key(const char *msg)
{
	size_t n = strlen(msg);
	char *k = malloc(n + 1), *o = k;

	if (!k)
		return NULL;
	for (const char *p = msg; *p;) {
		if (*p >= '0' && *p <= '9') {
			while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
			       (*p >= 'A' && *p <= 'F') || *p == 'x')
				p++;
			*o++ = '#';
		} else if (*p == '\'' && strchr(p + 1, '\'')) {
			p = strchr(p + 1, '\'') + 1;
			*o++ = '#';
		} else {
			*o++ = *p++;
		}
	}
	*o = '\0';
	return k;
}

/* msg's kind, added when new; NULL when there is no room */
static struct cli_warn_kind *kind_of(struct cli_warnings *w, const char *msg)
{
	struct cli_warn_kind *kd;
	char *key = kind_key(msg);

	if (!key)
		return NULL;
	for (size_t i = 0; i < w->nkinds; i++)
		if (!strcmp(w->kinds[i].key, key)) {
			free(key);
			return &w->kinds[i];
		}
	if (w->nkinds == MAX_KINDS ||
	    !pg_grow((void **)&w->kinds, &w->kinds_cap, w->nkinds + 1, sizeof(*w->kinds))) {
		free(key);
		return NULL;
	}
	kd = &w->kinds[w->nkinds];
	*kd = (struct cli_warn_kind){ .key = key, .first = strdup(msg) };
	if (!kd->first) {
		free(key);
		return NULL;
	}
	w->nkinds++;
	return kd;
}

/* A progress line is on the terminal (progress_due said so): a message
 * clears it first, instead of running on after it; it comes back at the
 * next report. */
static bool progress_shown;

static void clear_progress(void)
{
	if (progress_shown)
		fputs("\r\033[K", stderr);
	progress_shown = false;
}

static const char *stdin_as;	/* the path standard input is read through */

void cli_stdin_read_as(const char *path)
{
	stdin_as = path;
}

const char *cli_shown(const char *s, char *buf, size_t n)
{
	size_t k = stdin_as ? strlen(stdin_as) : 0, o = 0;
	const char *p = s, *q;

	if (!k || !s || !n || !strstr(s, stdin_as))
		return s;
	while ((q = strstr(p, stdin_as)) && o < n) {
		o += (size_t)snprintf(buf + o, n - o, "%.*s<stdin>", (int)(q - p), p);
		p = q + k;
	}
	if (o < n)
		snprintf(buf + o, n - o, "%s", p);
	return buf;
}

const char *cli_shown_path(const char *path, bool as_file)
{
	if (stdin_as && path && !strcmp(path, stdin_as))
		return as_file ? "-" : "<stdin>";
	return path;
}

static void on_warn(void *ctx, const char *msg)
{
	struct cli_warnings *w = ctx;
	struct cli_warn_kind *kd;
	char shown[PG_ERRMSG_MAX + 64];

	msg = cli_shown(msg, shown, sizeof(shown));

	if (w->collect) {
		char *copy;

		if (w->n == MAX_COLLECTED) {
			w->dropped++;
			goto print;
		}
		copy = strdup(msg);
		if (!copy || !pg_grow((void **)&w->list, &w->cap, w->n + 1, sizeof(*w->list))) {
			free(copy);
			w->dropped++;
			goto print;
		}
		w->list[w->n++] = copy;
		/* and on stderr too, like every other command */
	}
print:
	if (w->quiet)
		return;
	if (w->verbose) {
		clear_progress();
		fprintf(stderr, "perfgraft: warning: %s\n", msg);
		return;
	}
	kd = kind_of(w, msg);
	if (kd)
		kd->seen++;
	if (w->shown >= MAX_SHOWN || (kd && kd->seen > KIND_SHOWN) || !kd) {
		if (kd)
			kd->hidden++;
		else
			w->hidden++;
		return;
	}
	w->shown++;
	clear_progress();
	fprintf(stderr, "perfgraft: warning: %s\n", msg);
}

void cli_diag_init(struct pg_diag *d, struct cli_warnings *w)
{
	memset(d, 0, sizeof(*d));
	d->warn = on_warn;
	d->ctx = w;
}

void cli_warnings_flush(struct cli_warnings *w)
{
	for (size_t i = 0; i < w->nkinds; i++) {
		struct cli_warn_kind *kd = &w->kinds[i];

		if (kd->hidden && !w->quiet) {
			size_t n = strlen(kd->first);

			if (n > KIND_QUOTE) {	/* cut where a UTF-8 sequence starts */
				n = KIND_QUOTE;
				while (n && ((unsigned char)kd->first[n] & 0xc0) == 0x80)
					n--;
			}

			fprintf(stderr, "perfgraft: warning: ... and %lu more like \"%.*s%s\" (-v shows them all)\n",
				kd->hidden, (int)n, kd->first, kd->first[n] ? "..." : "");
		}
		free(kd->key);
		free(kd->first);
	}
	free(w->kinds);
	w->kinds = NULL;
	w->nkinds = w->kinds_cap = 0;
	w->shown = 0;
	if (w->hidden && !w->quiet)
		fprintf(stderr, "perfgraft: warning: %lu more warnings not shown (-v shows them all)\n",
			w->hidden);
	w->hidden = 0;
}

void cli_warnings_free(struct cli_warnings *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->list[i]);
	free(w->list);
	w->list = NULL;
	w->n = w->cap = 0;
	/* kinds a run that stopped early (a usage error) did not flush */
	for (size_t i = 0; i < w->nkinds; i++) {
		free(w->kinds[i].key);
		free(w->kinds[i].first);
	}
	free(w->kinds);
	w->kinds = NULL;
	w->nkinds = w->kinds_cap = 0;
}

void cli_error(const char *fmt, ...)
{
	char *msg = NULL, *shown;
	va_list ap;
	int n;

	clear_progress();
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0) {	/* out of memory: the format itself, unnamed */
		fprintf(stderr, "perfgraft: %s\n", fmt);
		return;
	}
	/* "<stdin>" is shorter than the path it replaces */
	shown = malloc((size_t)n + 1);
	fprintf(stderr, "perfgraft: %s\n", shown ? cli_shown(msg, shown, (size_t)n + 1) : msg);
	free(shown);
	free(msg);
}

static bool stdout_reported;

int cli_stdout_flush(void)
{
	int err = 0;

	if (fflush(stdout) != 0)
		err = errno ? errno : EIO;
	else if (!ferror(stdout))
		return 0;
	/* the error of a write that failed before this flush is gone with
	 * the bytes stdio dropped: say only that output was lost */
	if (!stdout_reported)
		cli_error("write error on standard output: %s",
			  err ? strerror(err) : "some of the output was lost");
	stdout_reported = true;
	return -1;
}

void out_escaped(FILE *f, const char *s)
{
	pg_put_escaped(f, s);
}

bool utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		size_t n = pg_utf8_seq(p);

		if (!n)
			return false;
		p += n;
	}
	return true;
}

void json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	while (*p) {
		size_t n = pg_utf8_seq(p);

		if ((const char *)p - s >= PG_MAX_PRINTED) {
			pg_put_cut_note(f, s, (const char *)p);
			break;
		}
		if (!n) {
			fputs("\\ufffd", f);
			p++;
			continue;
		}
		if (n == 1) {
			if (*p == '"' || *p == '\\')
				fprintf(f, "\\%c", *p);
			else if (*p < 0x20 || *p == 0x7f)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		} else {
			fwrite(p, 1, n, f);
		}
		p += n;
	}
	fputc('"', f);
}

void json_hex(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((const char *)p - s >= PG_MAX_PRINTED) {
			pg_put_cut_note(f, s, (const char *)p);
			break;
		}
		fprintf(f, "%02x", *p);
	}
	fputc('"', f);
}

double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* True at most four times a second, and only when stderr is a terminal. */
bool progress_due(double *next)
{
	double t;

	if (*next < 0)
		return false;
	if (*next == 0 && !isatty(STDERR_FILENO)) {
		*next = -1;
		return false;
	}
	t = now_seconds();
	if (t < *next)
		return false;
	*next = t + 0.25;
	progress_shown = true;
	return true;
}

void json_shown_err(FILE *f, const char *err)
{
	char shown[PG_ERRMSG_MAX + 64];

	json_str(f, cli_shown(err, shown, sizeof(shown)));
}

/* The tail every dump --json object shares: the warnings collected, how
 * many were left out, and the error that stopped the walk (or null). */
void json_warnings_error(FILE *f, const struct cli_warnings *w, const char *err)
{
	fprintf(f, "\"warnings\":[");
	for (size_t i = 0; i < w->n; i++) {
		if (i)
			fprintf(f, ",");
		json_str(f, w->list[i]);
	}
	fprintf(f, "],\"warnings_omitted\":%lu,\"error\":", w->dropped);
	if (err)
		json_shown_err(f, err);
	else
		fprintf(f, "null");
}
