/* SPDX-License-Identifier: MIT */
/* perfgraft inject: JIT code into perf.data. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <perfgraft/elfimage.h>
#include <perfgraft/inject.h>
#include "cli/cli.h"

static void do_help(FILE *f)
{
	fprintf(f, "usage: perfgraft inject [[-i] perf.data] [-o perf.jit.data] [--jitdump FILE]...\n"
		   "                        [--jitdump-dir DIR] [--image-dir DIR] [--per-function]\n"
		   "                        [--layout memory|packed|per-function]\n"
		   "                        [--cfi-layout standard|perf-5.19]\n"
		   "                        [--compress-debug-sections zlib|none]\n"
		   "                        [--live-wait SECONDS] [--live-hold MIB]\n"
		   "                        [--buildid-dir DIR] [-N] [-q] [-v]\n\n"
		   "Writes a copy of the perf.data in which the JIT code of every jitdump the\n"
		   "recorded processes mapped (jit-PID.dump) is mapped from ELF images, so that\n"
		   "perf report, annotate and script resolve it.  Record with 'perf record -k mono'.\n\n"
		   "  -i, --input FILE      perf.data to read (or as the argument), - for a pipe\n"
		   "                        (default: perf.data)\n"
		   "  -o, --output FILE     perf.data to write, - for a pipe (default: perf.jit.data)\n"
		   "  --jitdump FILE        inject this dump (for its pid) even if no mmap of it was\n"
		   "                        recorded; may be repeated (a pid the recording has\n"
		   "                        no sample, COMM or MMAP of is warned about)\n"
		   "  --jitdump-dir DIR     look here for dumps that are no longer where they were\n"
		   "  --image-dir DIR       where the images go (default: OUTPUT.d; with -o -,\n"
		   "                        a new perfgraft-jit-TIME-PID.d in the current directory)\n"
		   "  --layout L            memory (default): one image per code region and\n"
		   "                        generation, laid out like the process's memory; packed:\n"
		   "                        shared images, one image per function with CFI; per-function:\n"
		   "                        one image per function, as perf inject --jit writes\n"
		   "  --per-function        --layout per-function\n"
		   "  --cfi-layout L        lay out images with CFI for the perf that reads them:\n"
		   "                        standard (default), or perf-5.19 for perf 5.19..6.7\n"
		   "                        built with libunwind and without the 2023 fix\n"
		   "  --compress-debug-sections C\n"
		   "                        zlib (default): DWARF sections compressed where that\n"
		   "                        makes them smaller (SHF_COMPRESSED, as gcc -gz); none\n"
		   "  --live-wait SECONDS   pipe input: a dump not written for this long no longer\n"
		   "                        holds its process's samples back (default: 10)\n"
		   "  --live-hold MIB       pipe input: at most this many MiB of records are held\n"
		   "                        back waiting for dumps to be written (default: 64)\n"
		   "  --buildid-dir DIR     perf's build-id cache, where every image also gets an\n"
		   "                        entry (a hard link), as perf's own images do, so the\n"
		   "                        output resolves after a move or perf archive (default:\n"
		   "                        $PERF_BUILDID_DIR, perf's buildid.dir, ~/.debug)\n"
		   "  -N, --no-buildid-cache\n"
		   "                        no build-id cache entries: the images are found by\n"
		   "                        path only, while OUTPUT.d stays where it is\n"
		   "  -q, --quiet           errors only: no warnings, no summary\n"
		   "  -v                    every warning (default: the first 3 of each\n"
		   "                        kind, at most 20)\n"
		   "  -h, --help            this text\n");
}

/* A terminal's progress line: bytes of the perf.data and the dumps read */
struct progress {
	double next;		/* progress_due() */
	uint64_t done, total;	/* the last report */
};

static void show_progress(const struct progress *p)
{
	if (p->total)	/* the dumps found later add to it: it may step back */
		fprintf(stderr, "\rperfgraft: inject: %3d%% (%.1f of %.1f MB read)",
			p->done >= p->total ? 100 : (int)(100.0 * (double)p->done / (double)p->total),
			p->done / 1e6, p->total / 1e6);
	else		/* a pipe: its size is not known */
		fprintf(stderr, "\rperfgraft: inject: %.1f MB read", p->done / 1e6);
}

static void progress(void *ctx, uint64_t done, uint64_t total)
{
	struct progress *p = ctx;

	p->done = done;
	p->total = total;
	if (progress_due(&p->next))
		show_progress(p);
}

static void found(void *ctx, const char *path, uint32_t pid, const char *how)
{
	const struct progress *p = ctx;

	if (p->next > 0)	/* over the progress line, which comes back */
		fprintf(stderr, "\r\033[K");
	fprintf(stderr, "perfgraft: inject: jitdump %s of pid %u, found by %s\n", path, pid, how);
}

int cmd_inject(int argc, char **argv)
{
	enum { OPT_JITDUMP = 256, OPT_JITDUMP_DIR, OPT_IMAGE_DIR, OPT_PER_FUNCTION, OPT_CFI,
	       OPT_LAYOUT, OPT_COMPRESS, OPT_LIVE_WAIT, OPT_LIVE_HOLD, OPT_BUILDID_DIR };
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "jitdump", required_argument, NULL, OPT_JITDUMP },
		{ "jitdump-dir", required_argument, NULL, OPT_JITDUMP_DIR },
		{ "image-dir", required_argument, NULL, OPT_IMAGE_DIR },
		{ "per-function", no_argument, NULL, OPT_PER_FUNCTION },
		{ "layout", required_argument, NULL, OPT_LAYOUT },
		{ "cfi-layout", required_argument, NULL, OPT_CFI },
		{ "compress-debug-sections", required_argument, NULL, OPT_COMPRESS },
		{ "live-wait", required_argument, NULL, OPT_LIVE_WAIT },
		{ "live-hold", required_argument, NULL, OPT_LIVE_HOLD },
		{ "buildid-dir", required_argument, NULL, OPT_BUILDID_DIR },
		{ "no-buildid-cache", no_argument, NULL, 'N' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct pg_inject_opts io = { .sz = sizeof(io), .input = "perf.data",
				     .output = "perf.jit.data" };
	struct cli_warnings w = { 0 };
	struct pg_inject_stats st = { .sz = sizeof(st) };
	struct pg_diag diag;
	const char **dumps = NULL;
	struct progress prog = { 0 };
	struct cli_input in;
	double t0 = now_seconds();
	bool quiet = false, input_given = false;
	int c, ret;

	dumps = calloc((size_t)argc, sizeof(*dumps));
	if (!dumps)
		return EXIT_BADINPUT;
	while ((c = getopt_long(argc, argv, "i:o:Nqvh", opts, NULL)) != -1) {
		switch (c) {
		case 'i': io.input = optarg; input_given = true; break;
		case 'o': io.output = optarg; break;
		case OPT_JITDUMP: dumps[io.njitdumps++] = optarg; break;
		case OPT_JITDUMP_DIR: io.jitdump_dir = optarg; break;
		case OPT_IMAGE_DIR: io.image_dir = optarg; break;
		case OPT_PER_FUNCTION: io.per_function = true; break;
		case OPT_LAYOUT: {
			struct pg_elfset_opts eo = { 0 };

			if (cli_layout(optarg, &eo) < 0) {
				free(dumps);
				return EXIT_USAGE;
			}
			io.per_function = eo.per_function;
			io.layout = eo.memory_layout ? PG_INJECT_LAYOUT_MEMORY : PG_INJECT_LAYOUT_PACKED;
			break;
		}
		case OPT_CFI: {
			bool compat;

			if (cli_cfi_layout(optarg, &compat) < 0) {
				free(dumps);
				return EXIT_USAGE;
			}
			io.cfi_layout = compat ? PG_CFI_LAYOUT_PERF_5_19 : PG_CFI_LAYOUT_STANDARD;
			break;
		}
		case OPT_COMPRESS:
			if (cli_compress_debug(optarg, &io.plain_debug) < 0) {
				free(dumps);
				return EXIT_USAGE;
			}
			break;
		case OPT_LIVE_WAIT:
		case OPT_LIVE_HOLD: {
			char *end;
			double v = strtod(optarg, &end);

			/* a bound, in s or MiB: positive and at most a day / 1 TiB */
			if (end == optarg || *end || !(v > 0) || v > (c == OPT_LIVE_WAIT ? 86400 : 1048576)) {
				cli_error("--%s: '%s' is not a positive number%s", c == OPT_LIVE_WAIT ?
					  "live-wait" : "live-hold", optarg, c == OPT_LIVE_WAIT ?
					  " of seconds (at most 86400)" : " of MiB (at most 1048576)");
				free(dumps);
				return EXIT_USAGE;
			}
			if (c == OPT_LIVE_WAIT)
				io.live_wait_ms = (uint64_t)(v * 1000) ? (uint64_t)(v * 1000) : 1;
			else
				io.live_hold = (uint64_t)(v * 1048576) ? (uint64_t)(v * 1048576) : 1;
			break;
		}
		case OPT_BUILDID_DIR: io.buildid_dir = optarg; break;
		case 'N': io.no_buildid_cache = true; break;
		case 'q': quiet = w.quiet = true; break;
		case 'v': w.verbose++; break;
		case 'h': do_help(stdout); free(dumps); return 0;
		default: do_help(stderr); free(dumps); return EXIT_USAGE;
		}
	}
	if (!input_given && optind < argc)
		io.input = argv[optind++];
	if (optind != argc) {
		do_help(stderr);
		free(dumps);
		return EXIT_USAGE;
	}
	io.jitdumps = dumps;
	/* -o naming the input or a dump would replace it */
	ret = cli_refuse_same(io.output, io.input);
	for (size_t i = 0; !ret && i < io.njitdumps; i++)
		ret = cli_refuse_same(io.output, dumps[i]);
	if (ret) {
		free(dumps);
		return EXIT_USAGE;
	}
	/* the recording, then the dumps: each must be what inject reads */
	ret = cli_input_or_say("inject", io.input, CLI_ACCEPT_PERF, "a perf.data",
			       CLI_IN_PERF_STREAM, &in);
	io.input = in.path;
	for (size_t i = 0; !ret && i < io.njitdumps; i++) {
		ret = cli_input_or_say("inject --jitdump", dumps[i], CLI_ACCEPT(CLI_FMT_JITDUMP),
				       "a jitdump", 0, &in);
		dumps[i] = in.path;
	}
	if (ret) {
		free(dumps);
		return ret;
	}
	cli_pipe_output();
	/* a terminal only (progress_due), never under -q */
	if (!quiet) {
		io.progress_bytes = progress;
		io.progress_ctx = &prog;
		io.found = found;
		io.found_ctx = &prog;
	}
	cli_diag_init(&diag, &w);
	ret = pg_inject(&io, &diag, &st);
	if (prog.next > 0) {
		if (ret == 0)	/* the last figure, not the last one due */
			show_progress(&prog);
		fprintf(stderr, "\r\033[K");
	}
	cli_warnings_flush(&w);
	free(dumps);
	if (ret < 0) {
		cli_error("%s", diag.err);
		free(st.image_dir);
		return EXIT_BADINPUT;
	}
	if (!quiet) {
		double dt = now_seconds() - t0;
		char carried[64] = "", cached[96] = "";

		if (st.carried)
			snprintf(carried, sizeof(carried), " (%llu carry live code into newer images)",
				 (unsigned long long)st.carried);
		if (st.cache_added || st.cache_present)
			snprintf(cached, sizeof(cached), "; build-id cache: %llu added, %llu there",
				 (unsigned long long)st.cache_added,
				 (unsigned long long)st.cache_present);
		fprintf(stderr, "perfgraft: inject: %llu jitdump%s (%llu LOAD, %llu MOVE) -> %llu images in %s (%.3f MB%s); %llu MMAP2 injected%s, %llu markers and %llu anonymous maps dropped; %s written (%.3f MB) in %.2f s%s%s\n",
			(unsigned long long)st.dumps, st.dumps == 1 ? "" : "s",
			(unsigned long long)st.loads, (unsigned long long)st.moves,
			(unsigned long long)st.images, st.image_dir, st.image_bytes / 1e6,
			st.cfi_compat ? ", CFI laid out for perf 5.19..6.7" : "",
			(unsigned long long)st.mmaps_injected, carried,
			(unsigned long long)st.markers_dropped,
			(unsigned long long)st.anon_dropped, io.output, st.output_bytes / 1e6, dt, cached,
			st.dumps_failed ? "; some dumps were not injected (see the warnings)" : "");
		if (st.live_reads)
			fprintf(stderr, "perfgraft: inject: live dumps read %llu times; at most %.1f MiB of records held back, %llu samples written before their dump was read past them\n",
				(unsigned long long)st.live_reads, st.held_max_bytes / 1048576.0,
				(unsigned long long)st.held_forced);
	}
	free(st.image_dir);
	return 0;
}
