/* SPDX-License-Identifier: MIT */
/* perfgraft gperf: gperftools CPU profiles into perf.data. */
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <perfgraft/gperf.h>
#include "cli/cli.h"

static void do_help(FILE *f)
{
	fprintf(f, "usage: perfgraft gperf [-i] PROFILE [-o perf.data] [--set-pid N] [--comm NAME]\n"
		   "                      [--root DIR] [--map OLD=NEW]... [--max-samples N]\n"
		   "                      [--pprof-frames] [--pipe] [-q] [-v]\n\n"
		   "Converts a gperftools CPU profile (CPUPROFILE=, libprofiler) into a\n"
		   "perf.data: the profile's executable mappings and one cpu-clock sample per\n"
		   "tick (above --max-samples, per distinct stack with the ticks in its\n"
		   "period) with its call chain, so perf report counts what pprof counts.\n\n"
		   "  -i, --input PROFILE   the profile (or as the argument; - for standard input)\n"
		   "  -o, --output FILE     perf.data to write, - for a pipe (default: perf.data)\n"
		   "  --set-pid N           process ID of the samples (default: the number after\n"
		   "                        the last '_' of the profile's name, else 1); the old\n"
		   "                        spelling --pid still works, with a warning (--pid\n"
		   "                        filters in the other commands, as in perf)\n"
		   "  --comm NAME           command name (default: the main program's name)\n"
		   "  --root DIR            the profiled machine's files are under DIR: paths\n"
		   "                        become DIR/PATH (those no --map rule changed)\n"
		   "  --map OLD=NEW         a path starting with OLD starts with NEW instead\n"
		   "                        (repeatable; the first matching rule applies)\n"
		   "  --max-samples N       one sample per tick up to N ticks in all (default\n"
		   "                        %llu); a profile counting more is written as one\n"
		   "                        sample per distinct stack whose period is its ticks\n"
		   "                        x the sampling period (0: always so)\n"
		   "  --pprof-frames        leave out the frames google-pprof leaves out by\n"
		   "                        default (while all stacks share their second frame,\n"
		   "                        taken for the signal handler, it is removed), so that\n"
		   "                        perf report --children gives google-pprof --text's\n"
		   "                        cum (default: every frame kept, the cum of\n"
		   "                        google-pprof --no-auto-signal-frm)\n"
		   "  --pipe                write pipe-mode perf.data into the file\n"
		   "  -q, --quiet           errors only: no warnings, no summary\n"
		   "  -v                    every warning (default: the first 3 of each\n"
		   "                        kind, at most 20)\n"
		   "  -h, --help            this text\n", PG_GPERF_DEFAULT_MAX_SAMPLES);
}

int cmd_gperf(int argc, char **argv)
{
	enum { OPT_PID = 256, OPT_COMM, OPT_ROOT, OPT_MAP, OPT_PIPE, OPT_MAX_SAMPLES,
	       OPT_PPROF_FRAMES, OPT_OLD_PID };
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "set-pid", required_argument, NULL, OPT_PID },
		/* before --set-pid: kept for the scripts that use it */
		{ "pid", required_argument, NULL, OPT_OLD_PID },
		{ "comm", required_argument, NULL, OPT_COMM },
		{ "root", required_argument, NULL, OPT_ROOT },
		{ "map", required_argument, NULL, OPT_MAP },
		{ "pipe", no_argument, NULL, OPT_PIPE },
		{ "max-samples", required_argument, NULL, OPT_MAX_SAMPLES },
		{ "pprof-frames", no_argument, NULL, OPT_PPROF_FRAMES },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct pg_gperf_opts go = { .sz = sizeof(go), .output = "perf.data", .pid = -1 };
	struct pg_gperf_path_map *maps = NULL;
	struct pg_gperf_stats ps = { .sz = sizeof(ps) };
	struct pg_gperf_convert_stats st = { .sz = sizeof(st), .profile = &ps };
	struct cli_warnings w = { 0 };
	struct pg_diag diag;
	double t0 = now_seconds();
	bool quiet = false, old_pid = false;
	const char *input = NULL;
	struct cli_input in;
	char *end, *eq;
	int c, ret;

	while ((c = getopt_long(argc, argv, "i:o:qvh", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (input) {
				cli_error("gperf: one PROFILE at a time");
				free(maps);
				return EXIT_USAGE;
			}
			input = optarg;
			break;
		case 'o': go.output = optarg; break;
		case OPT_OLD_PID:
		case OPT_PID: {
			unsigned long long v = strtoull(optarg, &end, 10);

			old_pid |= c == OPT_OLD_PID;
			if (*end || !*optarg || v > 0x7fffffff) {
				cli_error("--%s takes a process ID, not '%s'", c == OPT_PID ? "set-pid" : "pid",
					  optarg);
				free(maps);
				return EXIT_USAGE;
			}
			go.pid = (int64_t)v;
			break;
		}
		case OPT_COMM: go.comm = optarg; break;
		case OPT_ROOT: go.root = optarg; break;
		case OPT_MAP: {
			struct pg_gperf_path_map *m;

			if (!(eq = strchr(optarg, '=')) || eq == optarg) {
				cli_error("--map takes OLD=NEW, not '%s'", optarg);
				free(maps);
				return EXIT_USAGE;
			}
			if (!(m = realloc(maps, (go.nmaps + 1) * sizeof(*maps)))) {
				cli_error("out of memory");
				free(maps);
				return EXIT_BADINPUT;
			}
			maps = m;
			*eq = 0;
			maps[go.nmaps++] = (struct pg_gperf_path_map){ optarg, eq + 1 };
			break;
		}
		case OPT_MAX_SAMPLES: {
			unsigned long long v = strtoull(optarg, &end, 10);

			if (*end || *optarg < '0' || *optarg > '9' || v == ULLONG_MAX) {
				cli_error("--max-samples takes a number of samples, not '%s'", optarg);
				free(maps);
				return EXIT_USAGE;
			}
			go.max_samples = v;
			go.weighted = v == 0;
			break;
		}
		case OPT_PPROF_FRAMES: go.pprof_frames = true; break;
		case OPT_PIPE: go.pipe = true; break;
		case 'q': quiet = w.quiet = true; break;
		case 'v': w.verbose++; break;
		case 'h': do_help(stdout); free(maps); return 0;
		default: do_help(stderr); free(maps); return EXIT_USAGE;
		}
	}
	if (!input && optind < argc)
		input = argv[optind++];
	if (!input || optind != argc) {
		do_help(stderr);
		free(maps);
		return EXIT_USAGE;
	}
	if (old_pid && !quiet)
		fprintf(stderr, "perfgraft: warning: gperf --pid N is now spelled --set-pid N (--pid filters in the other commands, as in perf); --pid will go\n");
	if ((c = cli_input_or_say("gperf", input, CLI_ACCEPT(CLI_FMT_GPERF),
				  "a gperftools CPU profile", 0, &in))) {
		free(maps);
		return c;
	}
	go.profile = in.path;
	go.maps = maps;
	if (cli_refuse_same(go.output, input) < 0) {
		free(maps);
		return EXIT_USAGE;
	}
	cli_pipe_output();
	cli_diag_init(&diag, &w);
	ret = pg_gperf_convert(&go, &diag, &st);
	free(maps);
	cli_warnings_flush(&w);
	if (ret < 0) {
		cli_error("%s", diag.err);
		cli_warnings_free(&w);
		return EXIT_BADINPUT;
	}
	if (!quiet) {
		char pprof_note[160] = "";

		if (go.pprof_frames)
			snprintf(pprof_note, sizeof(pprof_note),
				 ", %llu second frames removed from every stack as pprof removes them (%llu frames in all)",
				 (unsigned long long)st.pprof_passes,
				 (unsigned long long)st.pprof_removed);
		fprintf(stderr, "perfgraft: gperf: %s: %llu records, %llu samples in %llu distinct stacks, period %llu us, %llu executable mappings (%llu build-ids) -> %llu samples of %s (pid %u)%s, %llu frames dropped (0 or above user space), %llu samples without a frame%s; %s written (%.3f MB) in %.2f s\n",
			cli_shown_path(go.profile, false), (unsigned long long)ps.records,
			(unsigned long long)ps.samples, (unsigned long long)st.stacks,
			(unsigned long long)(st.period_ns / 1000), (unsigned long long)st.mmaps,
			(unsigned long long)st.build_ids, (unsigned long long)st.samples, st.comm,
			st.pid, st.weighted ? ", one per distinct stack weighted by its ticks" : "",
			(unsigned long long)st.dropped_frames,
			(unsigned long long)st.dropped_samples, pprof_note, go.output, st.out_bytes / 1e6,
			now_seconds() - t0);
	}
	cli_warnings_free(&w);
	return 0;
}
