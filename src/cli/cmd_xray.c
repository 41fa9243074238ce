/* SPDX-License-Identifier: MIT */
/* perfgraft xray: LLVM XRay traces into perf.data. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <perfgraft/xray.h>
#include "cli/cli.h"
#include "util/util.h"
#include "xray/account.h"

static void do_help(FILE *f)
{
	fprintf(f, "usage: perfgraft xray [-i] TRACE... [-b BIN] [-o perf.data] [-F HZ] [--no-events]\n"
		   "                      [--no-samples] [--max-gap SEC] [--thin-after N] [-z N]\n"
		   "                      [--pipe] [-q] [-v]\n"
		   "       perfgraft xray --functions [--json|--format=text|json] -b BIN\n"
		   "       perfgraft xray --account [-i] TRACE [-b BIN] [-k] [-d] [--recursive-calls-only]\n"
		   "                      [-s FIELD] [-r asc|dsc] [-p N] [-f text|csv] [-o FILE]\n\n"
		   "Converts LLVM XRay traces (FDR 1-5, basic mode 1-3) of one binary into a\n"
		   "perf.data: a time-weighted sample stream with call chains (perf report's\n"
		   "self and children are exclusive and inclusive time) and the exact events\n"
		   "as xray:* tracepoints (perf script prints their fields).\n\n"
		   "  -b, --binary BIN      the instrumented binary: function names, source\n"
		   "                        lines and addresses (without it: IDs only); also a\n"
		   "                        relocatable object, or a YAML map from llvm-xray\n"
		   "                        extract\n"
		   "  -m, --instr-map MAP   the same as -b (llvm-xray's spelling)\n"
		   "  -i, --input TRACE     a trace (repeatable; or as arguments; - for\n"
		   "                        standard input)\n"
		   "  -o, --output FILE     perf.data to write, - for a pipe (default: perf.data)\n"
		   "  -F, --frequency HZ    samples per second of trace time (default: %d)\n"
		   "  -z, --compression-level N\n"
		   "                        zstd level of the file's data, as perf record -z\n"
		   "                        writes it (default: 1; 0: uncompressed; pipes are\n"
		   "                        never compressed)\n"
		   "  --max-gap SEC         report any stretch longer than SEC in which no\n"
		   "                        thread records anything and no call is open\n"
		   "                        (default: 60); time inside a call is always sampled\n"
		   "  --thin-after N        after N samples of an unchanged call stack, space\n"
		   "                        its samples wider (doubling every N samples), each\n"
		   "                        carrying the time since the one before as its\n"
		   "                        period: perf report's times stay exact, the sample\n"
		   "                        count stays small (default: %d; 0: never)\n"
		   "  --no-events           samples only, no xray:* events\n"
		   "  --no-samples          events only\n"
		   "  --pipe                write pipe-mode perf.data into the file\n"
		   "  --functions           print the binary's instrumentation map and exit\n"
		   "  --account             print llvm-xray account's latency table of one\n"
		   "                        trace (to stdout, or -o FILE), no perf.data; its\n"
		   "                        options, as account spells them:\n"
		   "  -k, --keep-going      skip the exits account rejects (else stop there)\n"
		   "  -d, --deduce-sibling-calls\n"
		   "                        an exit of an outer call closes the calls above it\n"
		   "  --recursive-calls-only\n"
		   "                        count only calls of functions in recursion\n"
		   "  -s, --sort FIELD      funcid (default), count, min, med, 90p, 99p, max,\n"
		   "                        sum, or func (by name; account lacks it)\n"
		   "  -r, --sortorder asc|dsc\n"
		   "  -p, --top N           only the first N rows\n"
		   "  -f, --format text|csv|json\n"
		   "                        --account: text (default) or csv; --functions:\n"
		   "                        text (default) or json (an array of objects)\n"
		   "  --json                --format=json\n"
		   "  -q, --quiet           errors only: no warnings, no summary\n"
		   "  -v                    every warning (default: the first 3 of each\n"
		   "                        kind, at most 20)\n"
		   "  -h, --help            this text\n", PG_XRAY_DEFAULT_FREQUENCY,
		   PG_XRAY_DEFAULT_THIN_AFTER);
}

static int list_functions(const char *bin, bool json, struct cli_warnings *w)
{
	struct pg_diag diag;
	pg_xray_map *m;
	bool first = true;
	int ret;

	cli_diag_init(&diag, w);
	ret = pg_xray_map_open(bin, &diag, &m);
	cli_warnings_flush(w);
	if (ret < 0) {
		cli_error("%s", diag.err);
		return EXIT_BADINPUT;
	}
	if (json)
		printf("[");
	else
		printf("%8s  %-18s %6s  %-6s %s\n", "id", "address", "size", "sleds", "function (source)");
	for (size_t i = 1; i <= pg_xray_map_count(m); i++) {
		const struct pg_xray_func *f = pg_xray_map_func(m, (uint32_t)i);
		static const char kinds[] = "EXTACY";	/* enter exit tail args custom typed */
		char sk[7] = "------";

		if (!f)		/* a gap in a YAML map's IDs */
			continue;

		for (int k = 0; k < 6; k++)
			if (f->sled_kinds & (1u << k))
				sk[k] = kinds[k];
		if (json) {
			printf("%s\n{\"id\":%u,\"address\":%llu,\"size\":%llu,\"sleds\":\"%s\",\"function\":",
			       first ? "" : ",", f->id, (unsigned long long)f->addr,
			       (unsigned long long)f->size, sk);
			json_str(stdout, f->name);
			printf(",\"file\":");
			if (f->file)
				json_str(stdout, f->file);
			else
				printf("null");
			printf(",\"line\":%u,\"column\":%u,\"always\":%s}", f->file ? f->line : 0,
			       f->file ? f->column : 0, f->always_instrument ? "true" : "false");
			first = false;
			continue;
		}
		printf("%8u  0x%016llx %6llu  %s %s", f->id, (unsigned long long)f->addr,
		       (unsigned long long)f->size, sk, f->name);
		if (f->file)
			printf(" (%s:%u:%u)", f->file, f->line, f->column);
		printf("%s\n", f->always_instrument ? " [always]" : "");
	}
	if (json)
		printf("\n]\n");
	pg_xray_map_close(m);
	return 0;
}

/* --account: the table to stdout or, through cli_output_to (written
 * beside it, renamed into place when the run ends well), to a file */
static int run_account(const struct pg_xray_account_opts *ao, const char *output, bool quiet,
		       struct cli_warnings *w)
{
	struct pg_xray_account_stats st;
	struct pg_diag diag;
	double t0 = now_seconds();
	int status = 0;

	if (cli_refuse_same(output, ao->trace) < 0 ||
	    (ao->binary && cli_refuse_same(output, ao->binary) < 0))
		return EXIT_USAGE;
	if (cli_output_to(output) < 0)
		return EXIT_BADINPUT;
	cli_diag_init(&diag, w);
	if (pg_xray_account(ao, stdout, &diag, &st) < 0) {
		cli_warnings_flush(w);
		cli_error("%s", diag.err);
		status = EXIT_BADINPUT;
	} else if (cli_stdout_flush() < 0) {	/* its message said */
		status = EXIT_BADINPUT;
	}
	cli_warnings_flush(w);
	if (!quiet && !status) {
		fprintf(stderr, "perfgraft: xray --account: %s: %llu function records on %llu thread%s, %llu calls of %llu function%s in %.2f s (latencies: %.1f MB)\n",
			cli_shown_path(ao->trace, false), (unsigned long long)st.records,
			(unsigned long long)st.threads,
			st.threads == 1 ? "" : "s", (unsigned long long)st.calls,
			(unsigned long long)st.functions, st.functions == 1 ? "" : "s",
			now_seconds() - t0, st.latency_bytes / 1e6);
		if (st.exits_empty || st.exits_unmatched || st.deduced || st.unfinished)
			fprintf(stderr, "perfgraft: xray --account: as account does: %llu exits with no call open and %llu exits matching no open call skipped, %llu calls closed by an outer exit (-d), %llu calls never exited not counted\n",
				(unsigned long long)st.exits_empty,
				(unsigned long long)st.exits_unmatched,
				(unsigned long long)st.deduced, (unsigned long long)st.unfinished);
	}
	return status;
}

static void progress(void *ctx, double done)
{
	double *next = ctx;

	if (progress_due(next))
		fprintf(stderr, "\rperfgraft: xray: %3d%%", (int)(100 * done));
}

/* With --account, llvm-xray's single-dash spellings of account's long
 * options (-format=csv, -sort count, -keep-going, ...), so that an account
 * command line can be pasted: each becomes its --form.  Only spellings
 * that would otherwise fail are taken (-format is no valid -f, -keep-going
 * no run of flags); -output only as -output=FILE, since -output alone is
 * -o utput. */
static void account_spellings(int argc, char **argv)
{
	static const char *const names[] = { "format", "sort", "sortorder", "top", "instr_map",
					     "keep-going", "deduce-sibling-calls",
					     "recursive-calls-only", "output" };
	bool account = false;

	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		account |= !strcmp(argv[i], "--account");
	if (!account)
		return;
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		const char *a = argv[i];

		if (a[0] != '-' || a[1] == '-' || !a[1])
			continue;
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			size_t n = strlen(names[k]);

			if (strncmp(a + 1, names[k], n) || (a[1 + n] && a[1 + n] != '=') ||
			    (!strcmp(names[k], "output") && !a[1 + n]))
				continue;
			/* argv's strings are the process's: this one lives to exit */
			char *b = malloc(strlen(a) + 2);

			if (b) {
				b[0] = '-';
				strcpy(b + 1, a);
				argv[i] = b;
			}
			break;
		}
	}
}

/* cmd_xray with room for the traces -i names */
static int xray_main(int argc, char **argv, const char **traces)
{
	enum { OPT_NO_EVENTS = 256, OPT_NO_SAMPLES, OPT_PIPE, OPT_FUNCTIONS, OPT_MAX_GAP,
	       OPT_THIN_AFTER, OPT_ACCOUNT, OPT_RECURSIVE, OPT_JSON };
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "binary", required_argument, NULL, 'b' },
		{ "instr-map", required_argument, NULL, 'm' },
		{ "output", required_argument, NULL, 'o' },
		{ "frequency", required_argument, NULL, 'F' },
		{ "compression-level", required_argument, NULL, 'z' },
		{ "no-events", no_argument, NULL, OPT_NO_EVENTS },
		{ "no-samples", no_argument, NULL, OPT_NO_SAMPLES },
		{ "pipe", no_argument, NULL, OPT_PIPE },
		{ "max-gap", required_argument, NULL, OPT_MAX_GAP },
		{ "thin-after", required_argument, NULL, OPT_THIN_AFTER },
		{ "functions", no_argument, NULL, OPT_FUNCTIONS },
		{ "account", no_argument, NULL, OPT_ACCOUNT },
		{ "instr_map", required_argument, NULL, 'm' },	/* account's spelling */
		{ "keep-going", no_argument, NULL, 'k' },
		{ "deduce-sibling-calls", no_argument, NULL, 'd' },
		{ "recursive-calls-only", no_argument, NULL, OPT_RECURSIVE },
		{ "sort", required_argument, NULL, 's' },
		{ "sortorder", required_argument, NULL, 'r' },
		{ "top", required_argument, NULL, 'p' },
		{ "format", required_argument, NULL, 'f' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct pg_xray_opts xo = { .sz = sizeof(xo), .output = "perf.data", .compress_level = 1 };
	struct pg_xray_stats ts = { .sz = sizeof(ts) };
	struct pg_xray_convert_stats st = { .sz = sizeof(st), .trace = &ts };
	struct cli_warnings w = { 0 };
	struct pg_diag diag;
	double t0 = now_seconds(), next_progress = 0;
	bool quiet = false, functions = false, account = false, output_set = false, json = false;
	const char *format = NULL;	/* --format or --json: what it means depends on the mode */
	size_t ntraces = 0;
	const char *conv_opt = NULL, *acct_opt = NULL;	/* one of each mode's, for a usage error */
	struct pg_xray_account_opts ao = { 0 };
	char *end;
	int c, ret;

	account_spellings(argc, argv);
	while ((c = getopt_long(argc, argv, "i:b:m:o:F:z:kds:r:p:f:qvh", opts, NULL)) != -1) {
		switch (c) {
		case 'F': conv_opt = "--frequency"; break;
		case 'z': conv_opt = "--compression-level"; break;
		case OPT_NO_EVENTS: conv_opt = "--no-events"; break;
		case OPT_NO_SAMPLES: conv_opt = "--no-samples"; break;
		case OPT_PIPE: conv_opt = "--pipe"; break;
		case OPT_MAX_GAP: conv_opt = "--max-gap"; break;
		case OPT_THIN_AFTER: conv_opt = "--thin-after"; break;
		case OPT_FUNCTIONS: conv_opt = "--functions"; break;
		case 'k': acct_opt = "--keep-going"; break;
		case 'd': acct_opt = "--deduce-sibling-calls"; break;
		case OPT_RECURSIVE: acct_opt = "--recursive-calls-only"; break;
		case 's': acct_opt = "--sort"; break;
		case 'r': acct_opt = "--sortorder"; break;
		case 'p': acct_opt = "--top"; break;
		}
		switch (c) {
		case 'b':
		case 'm': xo.binary = optarg; break;
		case 'o': xo.output = optarg; output_set = true; break;
		case OPT_ACCOUNT: account = true; break;
		case 'k': ao.keep_going = true; break;
		case 'd': ao.deduce_sibling_calls = true; break;
		case OPT_RECURSIVE: ao.recursive_calls_only = true; break;
		case 's': {
			static const char *const keys[] = { "funcid", "count", "min", "med", "90p",
							    "99p", "max", "sum", "func" };
			size_t k = 0;

			while (k < sizeof(keys) / sizeof(keys[0]) && strcmp(optarg, keys[k]))
				k++;
			if (k == sizeof(keys) / sizeof(keys[0])) {
				cli_error("--sort takes funcid, count, min, med, 90p, 99p, max, sum or func, not '%s'",
					  optarg);
				return EXIT_USAGE;
			}
			ao.sort = (enum pg_xa_sort)k;
			break;
		}
		case 'r':
			if (strcmp(optarg, "asc") && strcmp(optarg, "dsc")) {
				cli_error("--sortorder takes asc or dsc, not '%s'", optarg);
				return EXIT_USAGE;
			}
			ao.descending = !strcmp(optarg, "dsc");
			break;
		case 'p':
			errno = 0;
			ao.top = strtol(optarg, &end, 10);
			if (*end || !*optarg || errno) {
				cli_error("--top takes a number of rows, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'f': format = optarg; break;
		case OPT_JSON: format = "json"; break;
		case 'i': traces[ntraces++] = optarg; break;
		case 'F':
			xo.frequency = strtoull(optarg, &end, 10);
			if (*end || !*optarg || xo.frequency == 0) {
				cli_error("--frequency takes a positive number of Hz, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'z': {
			long lv = strtol(optarg, &end, 10);

			if (*end || !*optarg || lv < -7 || lv > 22) {
				cli_error("--compression-level takes -7 (fastest) to 22, 0 for off, not '%s'", optarg);
				return EXIT_USAGE;
			}
			xo.compress_level = (int)lv;
			break;
		}
		case OPT_NO_EVENTS: xo.no_events = true; break;
		case OPT_NO_SAMPLES: xo.no_samples = true; break;
		case OPT_PIPE: xo.pipe = true; break;
		case OPT_MAX_GAP: {
			double sec = strtod(optarg, &end);

			if (*end || !*optarg || !(sec > 0) || sec > 1e9) {
				cli_error("--max-gap takes a positive number of seconds, not '%s'", optarg);
				return EXIT_USAGE;
			}
			xo.max_gap_ns = (uint64_t)(sec * 1e9);
			if (!xo.max_gap_ns)
				xo.max_gap_ns = 1;
			break;
		}
		case OPT_THIN_AFTER:
			/* digits only: strtoull would take "-1" as 2^64 - 1 */
			errno = 0;
			xo.thin_after = strtoull(optarg, &end, 10);
			if (*end || !*optarg || *optarg < '0' || *optarg > '9' || errno) {
				cli_error("--thin-after takes a number of samples (0: never thin), not '%s'",
					  optarg);
				return EXIT_USAGE;
			}
			if (!xo.thin_after)
				xo.thin_after = UINT64_MAX;
			break;
		case OPT_FUNCTIONS: functions = true; break;
		case 'q': quiet = w.quiet = true; break;
		case 'v': w.verbose++; break;
		case 'h': do_help(stdout); return 0;
		default: do_help(stderr); return EXIT_USAGE;
		}
	}
	for (int i = optind; i < argc; i++)
		traces[ntraces++] = argv[i];
	if (account) {
		struct cli_input in;

		if (conv_opt) {
			cli_error("%s is not an option of --account", conv_opt);
			return EXIT_USAGE;
		}
		if (format && strcmp(format, "text") && strcmp(format, "csv")) {
			cli_error("--format takes text or csv with --account, not '%s'", format);
			return EXIT_USAGE;
		}
		ao.csv = format && !strcmp(format, "csv");
		if (ntraces != 1) {
			cli_error("--account takes one trace");
			return EXIT_USAGE;
		}
		if ((ret = cli_input_or_say("xray --account", traces[0], CLI_ACCEPT_XRAY,
					    "an XRay trace", 0, &in)))
			return ret;
		ao.trace = in.path;
		ao.binary = xo.binary;
		return run_account(&ao, output_set ? xo.output : "-", quiet, &w);
	}
	if (acct_opt) {
		cli_error("%s is an option of --account", acct_opt);
		return EXIT_USAGE;
	}
	if (functions) {
		if (!xo.binary || ntraces) {
			cli_error("--functions takes only --binary BIN");
			return EXIT_USAGE;
		}
		if (format && (cli_format(format, &json) < 0))
			return EXIT_USAGE;
		return list_functions(xo.binary, json, &w);
	}
	if (format) {
		cli_error("--format/--json apply to what --account and --functions print");
		return EXIT_USAGE;
	}
	if (!ntraces) {
		do_help(stderr);
		return EXIT_USAGE;
	}
	/* -o naming a trace (or the binary) would replace it with perf.data */
	for (size_t i = 0; i < ntraces; i++)
		if (cli_refuse_same(xo.output, traces[i]) < 0)
			return EXIT_USAGE;
	for (size_t i = 0; i < ntraces; i++) {
		struct cli_input in;

		if ((ret = cli_input_or_say("xray", traces[i], CLI_ACCEPT_XRAY, "an XRay trace", 0, &in)))
			return ret;
		traces[i] = in.path;
	}
	xo.traces = traces;
	xo.ntraces = ntraces;
	if (xo.binary && cli_refuse_same(xo.output, xo.binary) < 0)
		return EXIT_USAGE;
	cli_pipe_output();
	cli_diag_init(&diag, &w);
	if (!quiet) {	/* -q: errors only (progress_due: a terminal only) */
		xo.progress = progress;
		xo.progress_ctx = &next_progress;
	}
	ret = pg_xray_convert(&xo, &diag, &st);
	if (next_progress > 0)
		fprintf(stderr, "\r\033[K");
	cli_warnings_flush(&w);
	if (ret < 0) {
		cli_error("%s", diag.err);
		return EXIT_BADINPUT;
	}
	if (!quiet) {
		fprintf(stderr, "perfgraft: xray: %zu trace%s, %llu threads, %llu records (%llu entries, %llu exits, %llu tail exits, %llu arguments, %llu custom, %llu typed events) over %.6f s -> %llu samples every %.3f us, %llu events (%llu function%s named); %s written (%.3f MB) in %.2f s\n",
			xo.ntraces, xo.ntraces == 1 ? "" : "s", (unsigned long long)st.threads,
			(unsigned long long)ts.records, (unsigned long long)ts.enters,
			(unsigned long long)ts.exits, (unsigned long long)ts.tail_exits,
			(unsigned long long)ts.args, (unsigned long long)ts.custom,
			(unsigned long long)ts.typed, (st.last_ns - st.first_ns) / 1e9,
			(unsigned long long)st.samples,
			1e6 / (double)(xo.frequency ? xo.frequency : PG_XRAY_DEFAULT_FREQUENCY),
			(unsigned long long)st.events, (unsigned long long)st.functions,
			st.functions == 1 ? "" : "s", xo.output, st.out_bytes / 1e6,
			now_seconds() - t0);
		if (st.thinned_runs)
			fprintf(stderr, "perfgraft: xray: thinned: %llu run%s of an unchanged call stack outlasted %llu samples (--thin-after); their later samples are spaced wider, so the %llu samples carry the time of %llu grid samples (perf report's times are exact, its sample counts are not)\n",
				(unsigned long long)st.thinned_runs, st.thinned_runs == 1 ? "" : "s",
				(unsigned long long)(xo.thin_after ? xo.thin_after : PG_XRAY_DEFAULT_THIN_AFTER),
				(unsigned long long)st.samples, (unsigned long long)st.grid_samples);
		if (st.exits_without_entry || st.unfinished || st.inferred_exits || st.unknown_ids ||
		    ts.damaged_buffers || ts.truncated_bytes || st.gaps)
			fprintf(stderr, "perfgraft: xray: recovered: %llu exits without entry (trace began mid-call), %llu entries never exited (closed at the thread's last time), %llu frames closed by an outer exit, %llu records with IDs not in the binary, %llu damaged buffers, %llu bytes cut off, %llu idle gaps (--max-gap)\n",
				(unsigned long long)st.exits_without_entry,
				(unsigned long long)st.unfinished,
				(unsigned long long)st.inferred_exits,
				(unsigned long long)st.unknown_ids,
				(unsigned long long)ts.damaged_buffers,
				(unsigned long long)ts.truncated_bytes,
				(unsigned long long)st.gaps);
	}
	return 0;
}

int cmd_xray(int argc, char **argv)
{
	const char **traces = calloc((size_t)argc + 1, sizeof(*traces));
	int ret;

	if (!traces) {
		cli_error("out of memory");
		return EXIT_BADINPUT;
	}
	ret = xray_main(argc, argv, traces);
	free(traces);
	return ret;
}
