/* SPDX-License-Identifier: MIT */
/* perfgraft perf-map: a jitdump's code as the text perf-PID.map that perf
 * (and every tool that only reads perf maps) looks up JIT addresses in. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <perfgraft/symbolize.h>
#include "cli/cli.h"
#include "util/util.h"

static void do_help(FILE *f)
{
	fprintf(f, "usage: perfgraft perf-map [-o FILE] [--time TIME] [-q] [-v] JITDUMP\n\n"
		   "Writes the code of JITDUMP as perf-PID.map text: START SIZE NAME a line,\n"
		   "hex without 0x, in address order.  A map has no time, so where the JIT\n"
		   "reused an address only the code live at the end of the dump (or at\n"
		   "--time) is written, and no two lines overlap (perf's lookup is\n"
		   "undefined for overlapping lines).\n\n"
		   "  -o, --output FILE   output (default: perf-PID.map in the current\n"
		   "                      directory; - for stdout); perf reads\n"
		   "                      /tmp/perf-PID.map\n"
		   "  --time TIME         the code live at TIME (ns, or seconds as perf\n"
		   "                      script prints them) instead of at the end\n"
		   "  -q, --quiet         no summary on stderr\n"
		   "  -v                  print every warning (default: the first 20)\n"
		   "  -h, --help          this text\n");
}

struct writer {
	FILE *f;
	pg_symbolizer *sym;
	uint32_t pid;
	uint64_t time;
	uint64_t lines, pieces_cut, short_names;
};

/* A newline in a name would start a bogus line; perf splits the line at
 * the second blank and takes the rest, blanks included, as the name. */
static void put_name(FILE *f, const char *s)
{
	for (; *s; s++)
		putc_unlocked(*s == '\n' || *s == '\r' ? ' ' : *s, f);
}

static int write_line(void *ctx, const struct pg_sym *sym)
{
	struct writer *w = ctx;
	struct pg_sym whole;

	/* a piece is cut when it is not the whole function */
	if (sym->offset || (pg_symbolize(w->sym, w->pid, sym->start, w->time, &whole) == 1 &&
			    whole.size != sym->size))
		w->pieces_cut++;
	if (strlen(sym->name) < 3)
		w->short_names++;
	fprintf(w->f, "%" PRIx64 " %" PRIx64 " ", sym->start, sym->size);
	put_name(w->f, sym->name);
	putc_unlocked('\n', w->f);
	w->lines++;
	return 0;
}

int cmd_perf_map(int argc, char **argv)
{
	enum { OPT_TIME = 256 };
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "time", required_argument, NULL, OPT_TIME },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct cli_warnings cw = { 0 };
	struct pg_symbolizer_stats st;
	struct writer w = { 0 };
	struct pg_outfile of = { .fd = -1 };
	struct pg_diag diag;
	pg_symbolizer *sym = NULL;
	const char *output = NULL;
	char defname[64];
	uint64_t time = PG_SYM_TIME_END;
	bool quiet = false, to_stdout;
	uint32_t pid = 0;
	int c, ret, status = 0, dirfd = -1;

	while ((c = getopt_long(argc, argv, "o:qvh", opts, NULL)) != -1) {
		switch (c) {
		case 'o': output = optarg; break;
		case OPT_TIME: {
			/* the address parser reads "0@TIME" */
			char buf[64];
			uint64_t a;
			size_t at;

			snprintf(buf, sizeof(buf), "0@%s", optarg);
			if (strlen(optarg) > 40 ||
			    pg_sym_parse_addr(buf, strlen(buf), &a, &time, &at) < 0 ||
			    time == PG_SYM_TIME_END) {
				cli_error("--time takes nanoseconds or seconds.fraction, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		}
		case 'q': quiet = true; break;
		case 'v': cw.verbose++; break;
		case 'h': do_help(stdout); return 0;
		default: do_help(stderr); return EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		do_help(stderr);
		return EXIT_USAGE;
	}
	cli_diag_init(&diag, &cw);
	if (pg_symbolizer_new(&diag, &sym) < 0 || pg_symbolizer_add(sym, argv[optind]) < 0 ||
	    pg_symbolizer_freeze(sym) < 0) {
		cli_error("%s", diag.err);
		pg_symbolizer_free(sym);
		return EXIT_BADINPUT;
	}
	pg_symbolizer_pids(sym, &pid, 1);	/* the dump's: the one added */
	snprintf(defname, sizeof(defname), "perf-%u.map", pid);
	if (!output)
		output = defname;
	to_stdout = !strcmp(output, "-");
	if (to_stdout) {
		w.f = stdout;
	} else {
		char *d = strdup(output), *b = strdup(output);

		dirfd = d ? open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		if (dirfd < 0)
			cli_error("%s: %s", output, strerror(d ? errno : ENOMEM));
		else if (!b || pg_outfile_open(&of, dirfd, basename(b), &diag) < 0)
			cli_error("%s", b ? diag.err : "out of memory");
		else if (!(w.f = fdopen(of.fd, "w")))
			cli_error("%s: %s", output, strerror(errno));
		free(d);
		free(b);
		if (!w.f) {
			pg_outfile_abort(&of);
			if (dirfd >= 0)
				close(dirfd);
			pg_symbolizer_free(sym);
			return EXIT_BADINPUT;
		}
		of.fd = -1;	/* the FILE owns it now */
	}
	w.sym = sym;
	w.pid = pid;
	w.time = time;
	ret = pg_symbolizer_live(sym, pid, time, write_line, &w);
	if (ret < 0) {
		cli_error("%s", diag.err);
		status = EXIT_BADINPUT;
	}
	if (fflush(w.f) || ferror(w.f)) {
		cli_error("writing %s failed: %s", output, strerror(errno));
		status = EXIT_BADINPUT;
	}
	if (!to_stdout) {
		if (!status && fsync(fileno(w.f)) < 0 && errno != EINVAL) {
			cli_error("writing %s failed: %s", output, strerror(errno));
			status = EXIT_BADINPUT;
		}
		of.fd = dup(fileno(w.f));
		fclose(w.f);
		if (status || of.fd < 0)
			pg_outfile_abort(&of);
		else if (pg_outfile_commit(&of, &diag) < 0) {
			cli_error("%s", diag.err);
			status = EXIT_BADINPUT;
		}
	}
	if (dirfd >= 0)
		close(dirfd);
	if (w.short_names)
		pg_warn(&diag, "%" PRIu64 " function name%s shorter than 3 bytes: perf 6.1 skips such map lines",
			w.short_names, w.short_names == 1 ? " is" : "s are");
	cli_warnings_flush(&cw);
	pg_symbolizer_stats(sym, &st);
	if (!quiet && !status)
		fprintf(stderr, "perfgraft perf-map: %s: %" PRIu64 " lines from %" PRIu64
				" placements (%" PRIu64 " LOAD, %" PRIu64 " MOVE), %" PRIu64
				" of them pieces of functions that later code partly replaced\n",
			to_stdout ? "stdout" : output, w.lines, st.loads + st.moves, st.loads,
			st.moves, w.pieces_cut);
	pg_symbolizer_free(sym);
	return status;
}
