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
#include "util/util.h"

static void do_help(FILE *f)
{
	fprintf(f, "usage: perfgraft symbolize [--json|--format=text|json] [--pid PID] [-o OUT]\n"
		   "                           [-q] [-v] [-i JITDUMP]... JITDUMP... [ADDR[@TIME]...|-]\n"
		   "       perf script ... | perfgraft symbolize --perf-script [--no-srcline]\n"
		   "                           [--full-source-path]\n"
		   "                           [--symoff|--no-symoff] JITDUMP...\n\n"
		   "Names JIT addresses from the jitdumps: function, offset in it, and source\n"
		   "file:line:column.  Arguments that read as addresses are addresses, the\n"
		   "others jitdumps (write ./NAME for a dump whose name reads as hex, or\n"
		   "-i NAME); the first argument is a dump unless -i names one.  Without\n"
		   "ADDR, or with - after the dumps, addresses are read from stdin, one per\n"
		   "line; - as the first dump reads the dump from stdin.\n"
		   "ADDR is hex; ADDR@TIME names the code that lived there at TIME (JITs\n"
		   "reuse addresses): nanoseconds, or seconds as perf script prints them\n"
		   "(12345.678901).  Without a time, the code live at the end of the dump.\n\n"
		   "  -i, --input JITDUMP a dump (repeatable)\n"
		   "  -o, --output OUT    write to OUT (replaced once all is written), - for\n"
		   "                      stdout (the default)\n"
		   "  --format=text|json  text: ADDR<tab>NAME+0xOFF<tab>FILE:LINE[:COL] per\n"
		   "                      address, ?? where unknown; json: one document\n"
		   "  --json              --format=json\n"
		   "  --pid PID           only the dumps of process PID (a filter, as in perf)\n"
		   "  --perf-script       filter perf script output: [unknown] frames inside\n"
		   "                      the dumps' code get the function name and the\n"
		   "                      dump, and a source line below them as perf's\n"
		   "                      -F +srcline prints it\n"
		   "  --no-srcline        (--perf-script) no source lines\n"
		   "  --full-source-path  (--perf-script) the whole file path in source\n"
		   "                      lines, not its base name (as perf script's option)\n"
		   "  --symoff, --no-symoff  (--perf-script) add +0xOFF to names or not\n"
		   "                      (default: as the input's resolved frames do)\n"
		   "  -q, --quiet         errors only: no warnings, no summary\n"
		   "  -v                  every warning (default: the first 3 of each\n"
		   "                      kind, at most 20)\n"
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

static void text_result(struct ctx *c, uint64_t addr, uint64_t time, int found,
			const struct pg_sym *s)
{
	FILE *f = c->out;

	pg_put_hex(f, addr);
	if (time != PG_SYM_TIME_END) {
		putc_unlocked('@', f);
		pg_put_dec(f, time);
	}
	putc_unlocked('\t', f);
	if (found <= 0) {
		fputs_unlocked("??\t??:0\n", f);
		return;
	}
	pg_put_text(f, s->name);
	fputs_unlocked("+", f);
	pg_put_hex(f, s->offset);
	putc_unlocked('\t', f);
	if (s->file) {
		pg_put_text(f, s->file);
		putc_unlocked(':', f);
		pg_put_dec(f, s->line);
		if (s->column) {
			putc_unlocked(':', f);
			pg_put_dec(f, s->column);
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

/* --perf-script: the rewriting is the library's (pg_script_rewrite_line);
 * reading stdin and the summary are the command's. */
static int perf_script(pg_script_rewriter *rw, FILE *out)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ret = 0;

	while ((n = getline(&line, &cap, stdin)) > 0)
		if ((ret = pg_script_rewrite_line(rw, line, (size_t)n, out)) < 0)
			break;
	free(line);
	return ret < 0 ? ret : 0;
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
	enum { OPT_FORMAT = 256, OPT_PID, OPT_SCRIPT, OPT_NO_SRCLINE, OPT_SYMOFF, OPT_NO_SYMOFF, OPT_FULL_PATH,
	       OPT_JSON };
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "json", no_argument, NULL, OPT_JSON },
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
	struct pg_script_opts so = { .sz = sizeof(so) };
	struct pg_script_stats ss = { .sz = sizeof(ss) };
	pg_script_rewriter *rw = NULL;
	bool quiet = false, script = false, use_stdin = false, json_open = false, dump_on_stdin = false;
	char **addrs;
	const char **inputs = NULL, *output = NULL;
	size_t naddrs = 0, ndumps = 0, ninputs = 0;
	int ch, ret = 0, status = 0;
	char *end;
	static char obuf[1 << 16];

	inputs = calloc((size_t)argc, sizeof(*inputs));
	if (!inputs) {
		cli_error("out of memory");
		return EXIT_BADINPUT;
	}
	while ((ch = getopt_long(argc, argv, "i:o:qvh", opts, NULL)) != -1) {
		switch (ch) {
		case 'i': inputs[ninputs++] = optarg; break;
		case 'o': output = optarg; break;
		case OPT_FORMAT:
			if (cli_format(optarg, &c.json) < 0) {
				free(inputs);
				return EXIT_USAGE;
			}
			break;
		case OPT_JSON: c.json = true; break;
		case OPT_PID: {
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || v >= PG_SYM_ANY_PID) {
				cli_error("--pid takes a process id, not '%s'", optarg);
				free(inputs);
				return EXIT_USAGE;
			}
			c.pid = (uint32_t)v;
			break;
		}
		case OPT_SCRIPT: script = true; break;
		case OPT_NO_SRCLINE: so.no_srcline = true; break;
		case OPT_FULL_PATH: so.full_source_path = true; break;
		case OPT_SYMOFF: so.symoff = PG_SCRIPT_SYMOFF_ON; break;
		case OPT_NO_SYMOFF: so.symoff = PG_SCRIPT_SYMOFF_OFF; break;
		case 'q': quiet = w.quiet = true; break;
		case 'v': w.verbose++; break;
		case 'h': do_help(stdout); free(inputs); return 0;
		default: do_help(stderr); free(inputs); return EXIT_USAGE;
		}
	}
	if (script && c.json) {
		cli_error("--perf-script writes perf script's text: --format=json does not apply");
		free(inputs);
		return EXIT_USAGE;
	}
	if (optind >= argc && !ninputs) {
		do_help(stderr);
		free(inputs);
		return EXIT_USAGE;
	}
	addrs = calloc((size_t)argc, sizeof(*addrs));
	if (!addrs) {
		cli_error("out of memory");
		free(inputs);
		return EXIT_BADINPUT;
	}
	for (size_t i = 0; i < ninputs; i++)
		if (output && cli_refuse_same(output, inputs[i]) < 0) {
			free(inputs);
			free(addrs);
			return EXIT_USAGE;
		}
	for (int i = optind; i < argc; i++)
		if (output && cli_refuse_same(output, argv[i]) < 0) {
			free(inputs);
			free(addrs);
			return EXIT_USAGE;
		}
	if (output && cli_output_to(output) < 0) {
		free(inputs);
		free(addrs);
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
	/* -i's dumps, then the arguments: the first is a dump unless -i named
	 * one ("-" there: the dump comes on stdin) */
	for (int i = optind - (int)ninputs; i < argc; i++) {
		bool named = i < optind;
		const char *a = named ? inputs[i - (optind - (int)ninputs)] : argv[i];
		bool first = !named && i == optind && !ninputs;
		struct cli_input in;

		if (!named && !first && !strcmp(a, "-")) {
			use_stdin = true;
		} else if (!named && !first && is_addr(a)) {
			addrs[naddrs++] = (char *)a;
		} else if (!named && !first && (!strncmp(a, "0x", 2) || !strncmp(a, "0X", 2)) && !strchr(a, '/')) {
			cli_error("'%s' is not an address (hex, or hex@TIME)", a);
			status = EXIT_USAGE;
			goto out;
		} else {
			if ((status = cli_input_or_say("symbolize", a, CLI_ACCEPT(CLI_FMT_JITDUMP),
						       "a jitdump", 0, &in)))
				goto out;
			if (pg_symbolizer_add(c.sym, in.path) < 0) {
				cli_error("%s", c.diag.err);
				status = EXIT_BADINPUT;
				goto out;
			}
			dump_on_stdin |= strcmp(in.path, in.arg) != 0;
			ndumps++;
		}
	}
	if (dump_on_stdin && (use_stdin || (!naddrs && !script))) {
		cli_error("the dump is read from standard input: give the addresses as arguments");
		status = EXIT_USAGE;
		goto out;
	}
	if (dump_on_stdin && script) {
		cli_error("--perf-script reads perf script output on standard input: the dump cannot come that way");
		status = EXIT_USAGE;
		goto out;
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
		so.use_pid = c.pid != PG_SYM_ANY_PID;
		so.pid = c.pid;
		if ((ret = pg_script_rewriter_new(c.sym, &so, &rw)) == 0)
			ret = perf_script(rw, c.out);
		if (rw)
			pg_script_rewriter_stats(rw, &ss);
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
	if (cli_stdout_flush() < 0) {		/* its message said */
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
			ss.frames, ss.named, ndumps, ndumps == 1 ? "" : "s", ss.left);
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
	pg_script_rewriter_free(rw);
	pg_symbolizer_free(c.sym);
	free(addrs);
	free(inputs);
	return status;
}
