/* SPDX-License-Identifier: MIT */
/* perfgraft symbolize: JIT addresses to function+offset and file:line,
 * from arguments, from stdin in bulk, or inside `perf script` output. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <perfgraft/symbolize.h>
#include "cli/cli.h"
#include "symbolize/script.h"
#include "util/util.h"

static void do_help(FILE *f)
{
	fprintf(f, "usage: perfgraft symbolize [--format=text|json] [--pid PID] [-q] [-v]\n"
		   "                           JITDUMP... [ADDR[@TIME]...|-]\n"
		   "       perf script ... | perfgraft symbolize --perf-script [--no-srcline]\n"
		   "                           [--full-source-path]\n"
		   "                           [--symoff|--no-symoff] JITDUMP...\n\n"
		   "Names JIT addresses from the jitdumps: function, offset in it, and source\n"
		   "file:line:column.  Arguments that read as addresses are addresses, the\n"
		   "others jitdumps (write ./NAME for a dump whose name reads as hex).\n"
		   "Without ADDR, or with -, addresses are read from stdin, one per line.\n"
		   "ADDR is hex; ADDR@TIME names the code that lived there at TIME (JITs\n"
		   "reuse addresses): nanoseconds, or seconds as perf script prints them\n"
		   "(12345.678901).  Without a time, the code live at the end of the dump.\n\n"
		   "  --format=text|json  text: ADDR<tab>NAME+0xOFF<tab>FILE:LINE[:COL] per\n"
		   "                      address, ?? where unknown; json: one document\n"
		   "  --pid PID           only the dumps of process PID\n"
		   "  --perf-script       filter perf script output: [unknown] frames inside\n"
		   "                      the dumps' code get the function name and the\n"
		   "                      dump, and a source line below them as perf's\n"
		   "                      -F +srcline prints it\n"
		   "  --no-srcline        (--perf-script) no source lines\n"
		   "  --full-source-path  (--perf-script) the whole file path in source\n"
		   "                      lines, not its base name (as perf script's option)\n"
		   "  --symoff, --no-symoff  (--perf-script) add +0xOFF to names or not\n"
		   "                      (default: as the input's resolved frames do)\n"
		   "  -q, --quiet         no summary on stderr\n"
		   "  -v                  print every warning (default: the first 20)\n"
		   "  -h, --help          this text\n");
}

struct ctx {
	pg_symbolizer *sym;
	struct pg_diag diag;
	uint32_t pid;		/* --pid, or PG_SYM_ANY_PID */
	bool json;
	FILE *out;
	uint64_t n, unknown, bad, reused, lines_missing, fn_bytes;
	bool first;
};

/* Names and paths come from the dump: printed as-is when they are plain
 * printable ASCII (the common case, and the fast one), escaped otherwise. */
static void put_text(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p >= 0x20 && *p < 0x7f && *p != '\\')
		p++;
	if (!*p)
		fputs_unlocked(s, f);
	else
		out_escaped(f, s);
}

static void put_hex(FILE *f, uint64_t v)
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

static void put_dec(FILE *f, uint64_t v)
{
	char buf[24], *e = buf + sizeof(buf), *p = e;

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	fwrite_unlocked(p, 1, (size_t)(e - p), f);
}

static void text_result(struct ctx *c, uint64_t addr, uint64_t time, int found,
			const struct pg_sym *s)
{
	FILE *f = c->out;

	put_hex(f, addr);
	if (time != PG_SYM_TIME_END) {
		putc_unlocked('@', f);
		put_dec(f, time);
	}
	putc_unlocked('\t', f);
	if (found <= 0) {
		fputs_unlocked("??\t??:0\n", f);
		return;
	}
	put_text(f, s->name);
	fputs_unlocked("+", f);
	put_hex(f, s->offset);
	putc_unlocked('\t', f);
	if (s->file) {
		put_text(f, s->file);
		putc_unlocked(':', f);
		put_dec(f, s->line);
		if (s->column) {
			putc_unlocked(':', f);
			put_dec(f, s->column);
		}
	} else {
		fputs_unlocked("??:0", f);
	}
	putc_unlocked('\n', f);
}

static void json_result(struct ctx *c, uint64_t addr, uint64_t time, int found,
			const struct pg_sym *s, const char *bad)
{
	FILE *f = c->out;

	fprintf(f, "%s\n{\"addr\":", c->first ? "" : ",");
	c->first = false;
	if (bad) {
		json_str(f, bad);
		fprintf(f, ",\"error\":\"not an address\",\"found\":false}");
		return;
	}
	fprintf(f, "\"0x%" PRIx64 "\",\"time\":", addr);
	if (time == PG_SYM_TIME_END)
		fprintf(f, "null");
	else
		fprintf(f, "%" PRIu64, time);
	fprintf(f, ",\"found\":%s", found > 0 ? "true" : "false");
	if (found <= 0) {
		fprintf(f, "}");
		return;
	}
	fprintf(f, ",\"name\":");
	json_str(f, s->name);
	fprintf(f, ",\"offset\":%" PRIu64 ",\"start\":\"0x%" PRIx64 "\",\"size\":%" PRIu64
		   ",\"code_index\":%" PRIu64 ",\"pid\":%u,\"loaded\":%" PRIu64 ",\"replaced\":",
		s->offset, s->start, s->size, s->code_index, s->pid, s->time);
	if (s->until == PG_SYM_TIME_END)
		fprintf(f, "null");
	else
		fprintf(f, "%" PRIu64, s->until);
	fprintf(f, ",\"reused\":%u,\"dump\":", s->reused);
	json_str(f, s->dump);
	fprintf(f, ",\"file\":");
	if (s->file)
		json_str(f, s->file);
	else
		fprintf(f, "null");
	fprintf(f, ",\"line\":%u,\"column\":%u}", s->line, s->column);
}

/* Counts and prints one answer. */
static void result(struct ctx *c, uint64_t addr, uint64_t time, int found,
		   const struct pg_sym *sym)
{
	if (!found)
		c->unknown++;
	else {
		if (time == PG_SYM_TIME_END && sym->reused)
			c->reused++;
		if (!sym->file)
			c->lines_missing++;
	}
	if (c->json)
		json_result(c, addr, time, found, sym, NULL);
	else
		text_result(c, addr, time, found, sym);
}

#define CHUNK 256

/* Addresses waiting to be looked up together (the library overlaps the
 * lookups' memory accesses); answered in input order. */
struct pending {
	uint64_t addrs[CHUNK], times[CHUNK];
	struct pg_sym syms[CHUNK];
	int found[CHUNK];
	size_t n;
};

static int flush_pending(struct ctx *c, struct pending *p)
{
	int ret;

	if (!p->n)
		return 0;
	ret = pg_symbolize_batch(c->sym, c->pid, p->n, p->addrs, p->times, p->syms, p->found);
	if (ret < 0)
		return ret;
	for (size_t j = 0; j < p->n; j++)
		result(c, p->addrs[j], p->times[j], p->found[j], &p->syms[j]);
	p->n = 0;
	return 0;
}

/* One address (an argument, lineno 0, or a stdin line) for the batch.  A
 * malformed one is reported and answered ?? in its place, after what came
 * before it, so output lines stay aligned with input lines. */
static int take(struct ctx *c, struct pending *p, const char *s, size_t len, uint64_t lineno)
{
	size_t at;
	char *copy;
	int ret;

	c->n++;
	if (pg_sym_parse_addr(s, len, &p->addrs[p->n], &p->times[p->n], &at) == 0)
		return ++p->n == CHUNK ? flush_pending(c, p) : 0;
	if ((ret = flush_pending(c, p)) < 0)
		return ret;
	copy = strndup(s, len > 200 ? 200 : len);
	if (copy)
		copy[strcspn(copy, "\r\n")] = 0;
	c->bad++;
	if (lineno)
		pg_warn(&c->diag, "stdin:%" PRIu64 ": byte %zu: '%s' is not an address (hex, or hex@TIME)",
			lineno, at, copy ? copy : "");
	else
		pg_warn(&c->diag, "argument: byte %zu: '%s' is not an address (hex, or hex@TIME)",
			at, copy ? copy : "");
	if (c->json)
		json_result(c, 0, 0, 0, NULL, copy ? copy : "");
	else
		fputs_unlocked("??\t??\t??:0\n", c->out);
	free(copy);
	return 0;
}

static int from_stdin(struct ctx *c, struct pending *p)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	uint64_t lineno = 0;
	int ret = 0;

	while (ret >= 0 && (n = getline(&line, &cap, stdin)) > 0) {
		size_t i = 0;

		lineno++;
		while (i < (size_t)n && (line[i] == ' ' || line[i] == '\t' ||
					 line[i] == '\n' || line[i] == '\r'))
			i++;
		if (i < (size_t)n)	/* blank lines are skipped */
			ret = take(c, p, line, (size_t)n, lineno);
	}
	free(line);
	return ret;
}

/* ---- --perf-script ---- */

enum symoff { SYMOFF_AUTO, SYMOFF_ON, SYMOFF_OFF };

struct script {
	struct ctx *c;
	bool srcline, full_path;
	enum symoff symoff;
	bool symoff_seen;	/* auto: decided from a resolved frame */
	uint32_t pid;
	bool has_pid;
	uint64_t time;
	uint64_t frames, named, left;
};

/* A resolved frame tells whether perf printed symbol offsets:
 * "<hex> sym+0x1f (dso)" or "<hex> sym (dso)", on a call-chain line or
 * at the end of a sample line (-G, or a recording without -g). */
static void learn_symoff(struct script *sc, const char *l, size_t n)
{
	size_t end = n, open, sym_end;
	const char *p;

	if (sc->symoff != SYMOFF_AUTO || sc->symoff_seen)
		return;
	while (end && (l[end - 1] == '\n' || l[end - 1] == '\r' || l[end - 1] == ' '))
		end--;
	if (!pg_script_dso(l, end, &open) || open < 2)
		return;
	sym_end = open - 1;
	if (sym_end >= 9 && !memcmp(l + sym_end - 9, "[unknown]", 9))
		return;
	sc->symoff_seen = true;
	for (p = l + sym_end - 1; p > l && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')); p--)
		;
	sc->symoff = (p - l >= 2 && p[0] == 'x' && p[-1] == '0' && p[-2] == '+') ? SYMOFF_ON : SYMOFF_OFF;
}

static int script_line(struct script *sc, const char *l, size_t n)
{
	struct pg_script_line pl;
	struct pg_sym sym;
	uint32_t pid;
	int found;
	FILE *f = sc->c->out;

	learn_symoff(sc, l, n);
	if (!pg_script_parse_line(l, n, &pl) || (pl.header && !pl.frame)) {
		if (pl.header) {
			sc->time = pl.time;
			sc->has_pid = pl.has_pid;
			sc->pid = pl.pid;
		}
		fwrite_unlocked(l, 1, n, f);
		return 0;
	}
	if (pl.header) {
		sc->time = pl.time;
		sc->has_pid = pl.has_pid;
		sc->pid = pl.pid;
	}
	sc->frames++;
	/* a pid without a dump (or a tid, from -F tid): any dump may know it */
	pid = sc->has_pid && pg_symbolizer_has_pid(sc->c->sym, sc->pid) ? sc->pid : PG_SYM_ANY_PID;
	if (sc->c->pid != PG_SYM_ANY_PID)
		pid = sc->c->pid;
	found = pg_symbolize(sc->c->sym, pid, pl.addr, sc->time ? sc->time : PG_SYM_TIME_END, &sym);
	if (found < 0)
		return found;
	if (!found) {
		sc->left++;
		fwrite_unlocked(l, 1, n, f);
		return 0;
	}
	sc->named++;
	fwrite_unlocked(l, 1, pl.sym_at, f);
	put_text(f, sym.name);
	if (sc->symoff != SYMOFF_OFF) {
		putc_unlocked('+', f);
		put_hex(f, sym.offset);
	}
	if (pl.has_dso) {
		size_t tail = pl.dso_at + pl.dso_len;

		fputs_unlocked(" (", f);
		put_text(f, sym.dump);
		fwrite_unlocked(l + tail, 1, n - tail, f);
	} else {
		size_t tail = pl.sym_at + pl.sym_len;

		fwrite_unlocked(l + tail, 1, n - tail, f);
	}
	if (n && l[n - 1] != '\n')
		putc_unlocked('\n', f);
	if (sc->srcline && sym.file) {
		/* perf script -F +srcline: the line below the frame, the file's
		 * base name unless --full-source-path */
		const char *base = strrchr(sym.file, '/');

		fputs_unlocked("  ", f);
		put_text(f, sc->full_path || !base ? sym.file : base + 1);
		putc_unlocked(':', f);
		put_dec(f, sym.line);
		putc_unlocked('\n', f);
	}
	return 0;
}

static int perf_script(struct script *sc)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ret = 0;

	while ((n = getline(&line, &cap, stdin)) > 0)
		if ((ret = script_line(sc, line, (size_t)n)) < 0)
			break;
	free(line);
	return ret;
}

/* Ends the JSON document, with the failure's message when there is one. */
static void json_close(struct ctx *c, struct cli_warnings *w, size_t ndumps, const char *err)
{
	fprintf(c->out, "\n],\"summary\":{\"addresses\":%" PRIu64 ",\"unknown\":%" PRIu64
			",\"bad\":%" PRIu64 ",\"reused\":%" PRIu64 ",\"without_line\":%" PRIu64
			",\"dumps\":%zu},", c->n, c->unknown, c->bad, c->reused, c->lines_missing, ndumps);
	json_warnings_error(c->out, w, err);
	fprintf(c->out, "}\n");
}

/* An argument is an address when it reads as one and does not name a path
 * (a dump whose name reads as hex is given as ./NAME). */
static bool is_addr(const char *a)
{
	uint64_t addr, time;
	size_t at;

	return !strchr(a, '/') && pg_sym_parse_addr(a, strlen(a), &addr, &time, &at) == 0;
}

int cmd_symbolize(int argc, char **argv)
{
	enum { OPT_FORMAT = 256, OPT_PID, OPT_SCRIPT, OPT_NO_SRCLINE, OPT_SYMOFF, OPT_NO_SYMOFF, OPT_FULL_PATH };
	static const struct option opts[] = {
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "pid", required_argument, NULL, OPT_PID },
		{ "perf-script", no_argument, NULL, OPT_SCRIPT },
		{ "no-srcline", no_argument, NULL, OPT_NO_SRCLINE },
		{ "full-source-path", no_argument, NULL, OPT_FULL_PATH },
		{ "symoff", no_argument, NULL, OPT_SYMOFF },
		{ "no-symoff", no_argument, NULL, OPT_NO_SYMOFF },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct cli_warnings w = { 0 };
	struct ctx c = { .pid = PG_SYM_ANY_PID, .out = stdout, .first = true };
	struct script sc = { .c = &c, .srcline = true };
	bool quiet = false, script = false, use_stdin = false, json_open = false;
	char **addrs;
	size_t naddrs = 0, ndumps = 0;
	int ch, ret = 0, status = 0;
	char *end;
	static char obuf[1 << 16];

	while ((ch = getopt_long(argc, argv, "qvh", opts, NULL)) != -1) {
		switch (ch) {
		case OPT_FORMAT:
			if (!strcmp(optarg, "json"))
				c.json = true;
			else if (strcmp(optarg, "text")) {
				cli_error("--format takes text or json, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case OPT_PID: {
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || v >= PG_SYM_ANY_PID) {
				cli_error("--pid takes a process id, not '%s'", optarg);
				return EXIT_USAGE;
			}
			c.pid = (uint32_t)v;
			break;
		}
		case OPT_SCRIPT: script = true; break;
		case OPT_NO_SRCLINE: sc.srcline = false; break;
		case OPT_FULL_PATH: sc.full_path = true; break;
		case OPT_SYMOFF: sc.symoff = SYMOFF_ON; break;
		case OPT_NO_SYMOFF: sc.symoff = SYMOFF_OFF; break;
		case 'q': quiet = true; break;
		case 'v': w.verbose++; break;
		case 'h': do_help(stdout); return 0;
		default: do_help(stderr); return EXIT_USAGE;
		}
	}
	if (script && c.json) {
		cli_error("--perf-script writes perf script's text: --format=json does not apply");
		return EXIT_USAGE;
	}
	if (optind >= argc) {
		do_help(stderr);
		return EXIT_USAGE;
	}
	addrs = calloc((size_t)argc, sizeof(*addrs));
	if (!addrs) {
		cli_error("out of memory");
		return EXIT_BADINPUT;
	}
	w.collect = c.json;
	cli_diag_init(&c.diag, &w);
	if (pg_symbolizer_new(&c.diag, &c.sym) < 0) {
		cli_error("%s", c.diag.err);
		free(addrs);
		return EXIT_BADINPUT;
	}
	setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));	/* before any output */
	if (c.json) {
		fprintf(c.out, "{\"results\":[");
		json_open = true;
	}
	/* the first argument is always a dump */
	for (int i = optind; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-") && i > optind) {
			use_stdin = true;
		} else if (i > optind && is_addr(a)) {
			addrs[naddrs++] = argv[i];
		} else if (i > optind && (!strncmp(a, "0x", 2) || !strncmp(a, "0X", 2)) && !strchr(a, '/')) {
			cli_error("'%s' is not an address (hex, or hex@TIME)", a);
			status = EXIT_USAGE;
			goto out;
		} else {
			if (pg_symbolizer_add(c.sym, a) < 0) {
				cli_error("%s", c.diag.err);
				status = EXIT_BADINPUT;
				goto out;
			}
			ndumps++;
		}
	}
	if (script && (naddrs || use_stdin)) {
		cli_error("--perf-script reads perf script output on stdin: no addresses");
		status = EXIT_USAGE;
		goto out;
	}
	if (!naddrs)
		use_stdin = true;
	if ((ret = pg_symbolizer_freeze(c.sym)) < 0) {
		cli_error("%s", c.diag.err);
		status = EXIT_BADINPUT;
		goto out;
	}
	if (script) {
		ret = perf_script(&sc);
	} else {
		static struct pending pend;

		for (size_t i = 0; i < naddrs && ret >= 0; i++)
			ret = take(&c, &pend, addrs[i], strlen(addrs[i]), 0);
		if (ret >= 0 && use_stdin)
			ret = from_stdin(&c, &pend);
		if (ret >= 0)
			ret = flush_pending(&c, &pend);
	}
	if (ret < 0) {
		cli_error("%s", c.diag.err);
		status = EXIT_BADINPUT;
		goto out;
	}
	if (c.json) {
		json_close(&c, &w, ndumps, NULL);
		json_open = false;
	}
	if (fflush(stdout) || ferror(stdout)) {
		cli_error("writing the output failed");
		status = EXIT_BADINPUT;
		goto out;
	}
	if (c.bad)
		status = EXIT_BADINPUT;
	cli_warnings_flush(&w);
	if (quiet)
		goto out;
	if (script) {
		fprintf(stderr, "perfgraft symbolize: %" PRIu64 " unresolved frames, %" PRIu64
				" named from %zu dump%s, %" PRIu64 " left unknown (?" "?)\n",
			sc.frames, sc.named, ndumps, ndumps == 1 ? "" : "s", sc.left);
	} else {
		fprintf(stderr, "perfgraft symbolize: %" PRIu64 " address%s, %" PRIu64
				" unknown (?" "?), %" PRIu64 " without a source line",
			c.n, c.n == 1 ? "" : "es", c.unknown, c.lines_missing);
		if (c.bad)
			fprintf(stderr, ", %" PRIu64 " not addresses", c.bad);
		fprintf(stderr, "\n");
		if (c.reused)
			fprintf(stderr, "perfgraft symbolize: %" PRIu64 " addresses held different code "
					"over the dump's life; without @TIME the code live at the end "
					"was named\n", c.reused);
	}
out:
	if (json_open) {	/* a failure still ends the document */
		json_close(&c, &w, ndumps, c.diag.err[0] ? c.diag.err : "failed");
		fflush(stdout);
	}
	cli_warnings_free(&w);
	pg_symbolizer_free(c.sym);
	free(addrs);
	return status;
}
