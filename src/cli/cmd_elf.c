/* SPDX-License-Identifier: MIT */
/* perfgraft elf: ELF images for the code of a jitdump. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <perfgraft/elfimage.h>
#include "cli/cli.h"
#include "util/util.h"

static void do_help(FILE *f)
{
	fprintf(f, "usage: perfgraft elf [-o DIR] [--layout memory|packed|per-function]\n"
		   "                     [--cfi-layout standard|perf-5.19] [--prefix NAME]\n"
		   "                     [--compress-debug-sections zlib|none] [--user-stacks]\n"
		   "                     [--pack-limit BYTES] [--list|--maps] [--json|--format=F]\n"
		   "                     [-q] [-v] [-i] JITDUMP\n\n"
		   "Writes ELF images with the code, symbols, DWARF line tables and unwind\n"
		   "tables of every function in JITDUMP.\n\n"
		   "  -i, --input JITDUMP the dump (or as the argument; - for standard input)\n"
		   "  -o, --output DIR    directory for the images, created when missing (default: .)\n"
		   "  --layout L          memory (default): one image per code region and\n"
		   "                      generation, laid out like the process's memory; packed:\n"
		   "                      shared images, one image per function with CFI; per-function:\n"
		   "                      one image per function, as perf inject --jit writes\n"
		   "  --per-function      --layout per-function\n"
		   "  --prefix NAME       image file name prefix (default: jitted-PID)\n"
		   "  --pack-limit BYTES  code bytes per packed image (default: 256 MiB)\n"
		   "  --cfi-layout L      lay out images with CFI for the perf that reads them:\n"
		   "                      standard (default), or perf-5.19 for perf 5.19..6.7\n"
		   "                      built with libunwind and without the 2023 fix\n"
		   "  --compress-debug-sections C\n"
		   "                      zlib (default): DWARF sections compressed where that\n"
		   "                      makes them smaller (SHF_COMPRESSED, as gcc -gz); none\n"
		   "  --user-stacks       memory layout for samples with user stacks (DWARF call\n"
		   "                      graphs), as inject lays it out for them: a MOVE copies\n"
		   "                      its code to the new address and live code is carried\n"
		   "                      into newer generations (CARRY maps), so every map of an\n"
		   "                      image has one start - pgoff\n"
		   "  -l, --list          print where each function landed (tab-separated:\n"
		   "                      index, code_addr, size, image, pgoff, map_len, name)\n"
		   "  --maps              print every map of the images as --list does, the kind\n"
		   "                      first: LOAD, MOVE, TABLES (the merged unwind tables)\n"
		   "  --format=text|json  --list and --maps as text (default) or one JSON array\n"
		   "  --json              --format=json\n"
		   "  -q, --quiet         errors only: no warnings, no summary\n"
		   "  -v                  every warning (default: the first 3 of each\n"
		   "                      kind, at most 20)\n"
		   "  -h, --help          this text\n");
}

/* --list: one line per map, from the set's maps once they are known */
static void list_maps(const pg_elfset *set, bool kinds, bool json)
{
	static const char *const kind[] = { "LOAD", "MOVE", "CARRY", "TABLES" };
	size_t n;
	const struct pg_elf_map *m = pg_elfset_maps(set, &n);
	bool first = true;

	if (json)
		printf("[");
	for (size_t i = 0; i < n; i++) {
		if (!kinds && m[i].kind != PG_ELF_MAP_LOAD)
			continue;
		if (json) {
			printf("%s\n{\"kind\":\"%s\",\"index\":%llu,\"code_addr\":%llu,\"size\":%llu,\"image\":",
			       first ? "" : ",", kind[m[i].kind], (unsigned long long)m[i].id,
			       (unsigned long long)m[i].start, (unsigned long long)m[i].size);
			json_str(stdout, pg_elfset_image(set, m[i].image)->name);
			printf(",\"pgoff\":%llu,\"map_len\":%llu,\"name\":",
			       (unsigned long long)m[i].pgoff, (unsigned long long)m[i].len);
			json_str(stdout, m[i].name ? m[i].name : "");
			printf("}");
			first = false;
			continue;
		}
		if (kinds)
			printf("%s\t", kind[m[i].kind]);
		printf("%llu\t0x%llx\t%llu\t%s\t0x%llx\t%llu\t", (unsigned long long)m[i].id,
		       (unsigned long long)m[i].start, (unsigned long long)m[i].size,
		       pg_elfset_image(set, m[i].image)->name, (unsigned long long)m[i].pgoff,
		       (unsigned long long)m[i].len);
		out_escaped(stdout, m[i].name ? m[i].name : "");
		putchar('\n');
	}
	if (json)
		printf("\n]\n");
}

int cmd_elf(int argc, char **argv)
{
	enum { OPT_PER_FUNCTION = 256, OPT_PREFIX, OPT_PACK_LIMIT, OPT_CFI, OPT_UNWIND_519,
	       OPT_LAYOUT, OPT_MAPS, OPT_COMPRESS, OPT_USER_STACKS, OPT_FORMAT, OPT_JSON };
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "per-function", no_argument, NULL, OPT_PER_FUNCTION },
		{ "layout", required_argument, NULL, OPT_LAYOUT },
		{ "maps", no_argument, NULL, OPT_MAPS },
		{ "prefix", required_argument, NULL, OPT_PREFIX },
		{ "pack-limit", required_argument, NULL, OPT_PACK_LIMIT },
		{ "cfi-layout", required_argument, NULL, OPT_CFI },
		{ "compress-debug-sections", required_argument, NULL, OPT_COMPRESS },
		{ "user-stacks", no_argument, NULL, OPT_USER_STACKS },
		/* the old spelling, before inject's --cfi-layout was shared */
		{ "perf-unwind-5.19", no_argument, NULL, OPT_UNWIND_519 },
		{ "list", no_argument, NULL, 'l' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct pg_elfset_opts eo = { .sz = sizeof(eo), .dir = ".", .memory_layout = true };
	struct cli_warnings w = { 0 };
	struct pg_code_stats st = { .sz = sizeof(st) };
	struct pg_diag diag;
	struct pg_code_event ev;
	pg_code_source *src = NULL;
	pg_elfset *set = NULL;
	bool list = false, maps = false, quiet = false, made_dir = false, json = false;
	const char *input = NULL;
	struct cli_input in;
	uint64_t placed = 0, with_cfi = 0, skipped = 0, bytes = 0;
	double t0 = now_seconds(), next_progress = 0;
	int c, ret, status = 0;
	char *end;

	while ((c = getopt_long(argc, argv, "i:o:lqvh", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (input) {
				cli_error("elf: one JITDUMP at a time");
				return EXIT_USAGE;
			}
			input = optarg;
			break;
		case 'o': eo.dir = optarg; break;
		case OPT_FORMAT:
			if (cli_format(optarg, &json) < 0)
				return EXIT_USAGE;
			break;
		case OPT_JSON: json = true; break;
		case OPT_PER_FUNCTION:
			eo.per_function = true;
			eo.memory_layout = false;
			break;
		case OPT_LAYOUT:
			if (cli_layout(optarg, &eo) < 0)
				return EXIT_USAGE;
			break;
		case OPT_PREFIX: eo.prefix = optarg; break;
		case OPT_UNWIND_519: eo.cfi_layout_perf_5_19 = true; break;
		case OPT_CFI:
			if (cli_cfi_layout(optarg, &eo.cfi_layout_perf_5_19) < 0)
				return EXIT_USAGE;
			break;
		case OPT_COMPRESS:
			if (cli_compress_debug(optarg, &eo.plain_debug) < 0)
				return EXIT_USAGE;
			break;
		case OPT_USER_STACKS: eo.carry_live = true; break;
		case OPT_PACK_LIMIT:
			errno = 0;
			eo.pack_limit = strtoull(optarg, &end, 0);
			if (errno || *end || !eo.pack_limit) {
				cli_error("--pack-limit takes a positive number of bytes, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'l': list = true; break;
		case OPT_MAPS: maps = true; break;
		case 'q': quiet = w.quiet = true; break;
		case 'v': w.verbose++; break;
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
	if (!strcmp(eo.dir, "-")) {
		cli_error("elf writes a directory of images: -o - (standard output) does not apply; --list prints where the functions landed");
		return EXIT_USAGE;
	}
	if (json && !list && !maps) {
		cli_error("--format/--json apply to what --list or --maps print");
		return EXIT_USAGE;
	}
	if ((ret = cli_input_or_say("elf", input, CLI_ACCEPT(CLI_FMT_JITDUMP), "a jitdump", 0, &in)))
		return ret;
	input = in.path;
	/* argv[optind] is the input in the progress and the summary below,
	 * whether -i or the argument named it */
	argv[0] = (char *)input;
	optind = 0;
	cli_diag_init(&diag, &w);
	/* DIR is created as inject creates OUTPUT.d (its parent must exist),
	 * and removed again if the run fails */
	if (mkdir(eo.dir, 0755) == 0)
		made_dir = true;
	else if (errno != EEXIST) {
		cli_error("%s: %s", eo.dir, strerror(errno));
		return EXIT_BADINPUT;
	}
	ret = pg_code_open(input, &diag, &src);
	if (ret < 0) {
		cli_error("%s", diag.err);
		if (made_dir)
			rmdir(eo.dir);
		return EXIT_BADINPUT;
	}
	ret = pg_elfset_new(pg_code_process(src), input, &eo, &diag, &set);
	if (ret < 0) {
		cli_error("%s", diag.err);
		pg_code_close(src);
		if (made_dir)
			rmdir(eo.dir);
		return EXIT_BADINPUT;
	}
	while ((ret = pg_code_next(src, &ev)) > 0) {
		struct pg_elf_place pl;
		bool load = ev.kind == PG_CODE_LOAD;

		/* a MOVE's code is mapped again only in the memory layout */
		if (!load && !eo.memory_layout)
			continue;
		ret = pg_elfset_add_since(set, &ev, pg_code_since(src), &pl);
		if (ret < 0)
			break;
		if (ret == 1) {
			skipped += load;
			ret = 0;
			continue;
		}
		placed += load;
		with_cfi += load && ev.cfi;
		/* a terminal only (progress_due), never under -q */
		if (!quiet && progress_due(&next_progress))
			fprintf(stderr, "\rperfgraft: elf: %3d%% of %s",
				(int)(100.0 * ev.src_offset / (double)pg_code_size(src)),
				cli_shown_path(argv[optind], false));
	}
	/* read to the end: the last figure is 100%, not the last one due */
	if (ret == 0 && next_progress > 0)
		fprintf(stderr, "\rperfgraft: elf: %3d%% of %s", 100,
			cli_shown_path(argv[optind], false));
	if (ret == 0)
		ret = pg_elfset_finish(set);
	if (ret == 0 && (list || maps))
		list_maps(set, maps, json);
	/* the images take their names only when every one is written: a
	 * failed run leaves DIR as it was.  A commit may replace earlier
	 * images of the same names: no signal may stop it half-way (the
	 * replaced files are gone, the new ones would be removed), and what
	 * it committed stays even if a rename fails. */
	if (ret == 0) {
		sigset_t old;

		pg_block_fatal_signals(true, &old);
		ret = pg_elfset_commit(set);
		pg_elfset_keep(set);
		pg_block_fatal_signals(false, &old);
	}
	if (next_progress > 0)
		fprintf(stderr, "\r\033[K");
	if (ret < 0) {
		cli_error("%s", diag.err);
		pg_elfset_discard(set);	/* the temporaries; kept files stay */
		if (made_dir)
			rmdir(eo.dir);	/* only if empty */
		status = EXIT_BADINPUT;
	} else if (!quiet) {
		size_t n = pg_elfset_count(set), npack = 0;
		double dt = now_seconds() - t0;

		for (size_t i = 0; i < n; i++) {
			const struct pg_elf_image *im = pg_elfset_image(set, i);

			bytes += im->size;
			npack += im->nfuncs > 1;
		}
		pg_code_stats(src, &st);
		cli_warnings_flush(&w);
		/* counted in words a perf user reads: functions the dump gave
		 * unwind tables (perf --call-graph dwarf unwinds through those),
		 * and images holding more than one function */
		fprintf(stderr, "perfgraft: %s: %llu functions (%llu with unwind tables from an UNWINDING_INFO record, %llu without) in %zu image%s in %s (%zu holding several functions)%s; %llu line tables with %llu lines; %.3f MB written in %.2f s (%.0f MB/s of input)%s\n",
			cli_shown_path(argv[optind], false), (unsigned long long)placed,
			(unsigned long long)with_cfi,
			(unsigned long long)(placed - with_cfi), n, n == 1 ? "" : "s", eo.dir, npack,
			skipped ? " (functions without code skipped)" : "",
			(unsigned long long)st.line_tables,
			(unsigned long long)st.lines, bytes / 1e6, dt,
			dt > 0 ? pg_code_size(src) / 1e6 / dt : 0.0,
			st.truncated_bytes ? "; the dump's truncated tail was ignored" : "");
	}
	cli_warnings_flush(&w);
	pg_elfset_free(set);
	pg_code_close(src);
	return status;
}
