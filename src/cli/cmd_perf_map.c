/* SPDX-License-Identifier: MIT */
/* perfgraft perf-map: a jitdump's code as the text perf-PID.map that perf
 * (and every tool that only reads perf maps) looks up JIT addresses in.
 * The map is the library's (pg_perfmap_write); here are the options, the
 * output file and the summary. */
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
	fprintf(f, "usage: perfgraft perf-map [-o FILE] [--time TIME] [-q] [-v] [-i] JITDUMP\n\n"
		   "Writes the code of JITDUMP as perf-PID.map text: START SIZE NAME a line,\n"
		   "hex without 0x, in address order.  A map has no time, so where the JIT\n"
		   "reused an address only the code live at the end of the dump (or at\n"
		   "--time) is written, and no two lines overlap (perf's lookup is\n"
		   "undefined for overlapping lines).\n\n"
		   "  -i, --input JITDUMP the dump (or as the argument; - for standard input)\n"
		   "  -o, --output FILE   output (default: perf-PID.map in the current\n"
		   "                      directory; - for stdout); perf reads\n"
		   "                      /tmp/perf-PID.map\n"
		   "  --time TIME         the code live at TIME (ns, or seconds as perf\n"
		   "                      script prints them) instead of at the end\n"
		   "  -q, --quiet         errors only: no warnings, no summary\n"
		   "  -v                  every warning (default: the first 3 of each\n"
		   "                      kind, at most 20)\n"
		   "  -h, --help          this text\n");
}

int cmd_perf_map(int argc, char **argv)
{
	enum { OPT_TIME = 256 };
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "time", required_argument, NULL, OPT_TIME },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct cli_warnings cw = { 0 };
	struct pg_symbolizer_stats st = { .sz = sizeof(st) };
	struct pg_perfmap_stats ms = { .sz = sizeof(ms) };
	FILE *f = NULL;
	struct pg_outfile of = { .fd = -1 };
	struct pg_diag diag;
	pg_symbolizer *sym = NULL;
	const char *output = NULL, *input = NULL;
	struct cli_input in;
	char defname[64];
	uint64_t time = PG_SYM_TIME_END;
	bool quiet = false, to_stdout;
	uint32_t pid = 0;
	int c, ret, status = 0, dirfd = -1;

	while ((c = getopt_long(argc, argv, "i:o:qvh", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (input) {
				cli_error("perf-map: one JITDUMP at a time");
				return EXIT_USAGE;
			}
			input = optarg;
			break;
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
		case 'q': quiet = cw.quiet = true; break;
		case 'v': cw.verbose++; break;
		case 'h': do_help(stdout); return 0;
		default: do_help(stderr); return EXIT_USAGE;
		}
	}
	if (!input && optind < argc)
		input = argv[optind++];
	if (!input || optind != argc) {
		do_help(stderr);
		return EXIT_USAGE;
	}
	if ((c = cli_input_or_say("perf-map", input, CLI_ACCEPT(CLI_FMT_JITDUMP), "a jitdump", 0, &in)))
		return c;
	cli_diag_init(&diag, &cw);
	if (pg_symbolizer_new(&diag, &sym) < 0 || pg_symbolizer_add(sym, in.path) < 0 ||
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
		f = stdout;
	} else {
		char *d = strdup(output), *b = strdup(output);

		dirfd = d ? open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		if (dirfd < 0)
			cli_error("%s: %s", output, strerror(d ? errno : ENOMEM));
		else if (!b || pg_outfile_open(&of, dirfd, basename(b), &diag) < 0)
			cli_error("%s", b ? diag.err : "out of memory");
		else if (!(f = fdopen(of.fd, "w")))
			cli_error("%s: %s", output, strerror(errno));
		free(d);
		free(b);
		if (!f) {
			pg_outfile_abort(&of);
			if (dirfd >= 0)
				close(dirfd);
			pg_symbolizer_free(sym);
			return EXIT_BADINPUT;
		}
		of.fd = -1;	/* the FILE owns it now */
	}
	ret = pg_perfmap_write(sym, pid, time, f, &ms);
	if (ret < 0) {
		cli_error("%s", diag.err);
		status = EXIT_BADINPUT;
	}
	if (to_stdout) {
		if (cli_stdout_flush() < 0)	/* its message said */
			status = EXIT_BADINPUT;
	} else if (fflush(f) || ferror(f)) {
		cli_error("writing %s failed: %s", output, strerror(errno));
		status = EXIT_BADINPUT;
	}
	if (!to_stdout) {
		if (!status && fsync(fileno(f)) < 0 && errno != EINVAL) {
			cli_error("writing %s failed: %s", output, strerror(errno));
			status = EXIT_BADINPUT;
		}
		of.fd = dup(fileno(f));
		fclose(f);
		if (status || of.fd < 0)
			pg_outfile_abort(&of);
		else if (pg_outfile_commit(&of, &diag) < 0) {
			cli_error("%s", diag.err);
			status = EXIT_BADINPUT;
		}
	}
	if (dirfd >= 0)
		close(dirfd);
	if (ms.short_names)
		pg_warn(&diag, "%" PRIu64 " function name%s shorter than 3 bytes: perf 6.1 skips such map lines",
			ms.short_names, ms.short_names == 1 ? " is" : "s are");
	cli_warnings_flush(&cw);
	pg_symbolizer_stats(sym, &st);
	if (!quiet && !status)
		fprintf(stderr, "perfgraft perf-map: %s: %" PRIu64 " lines from %" PRIu64
				" placements (%" PRIu64 " LOAD, %" PRIu64 " MOVE), %" PRIu64
				" of them pieces of functions that later code partly replaced\n",
			to_stdout ? "stdout" : output, ms.lines, st.loads + st.moves, st.loads,
			st.moves, ms.pieces_cut);
	pg_symbolizer_free(sym);
	return status;
}
