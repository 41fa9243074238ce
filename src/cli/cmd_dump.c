/* SPDX-License-Identifier: MIT */
/* perfgraft dump: any supported input, auto-detected, human-readable. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <perfgraft/jitdump.h>
#include <perfgraft/perfdata.h>
#include <perfgraft/gperf.h>
#include <perfgraft/xray.h>
#include "cli/cli.h"

#define USAGE "usage: perfgraft dump [-v] [--json|--format=text|json] [--time-order] [-o OUT] [-i] FILE"

static void do_help(FILE *f)
{
	fprintf(f, USAGE "\n\n"
		   "Prints FILE readably; the format is detected from its contents.\n"
		   "Supported: jitdump (jit-PID.dump), perf.data (file or pipe mode), LLVM\n"
		   "XRay traces (FDR 1-5, basic mode 1-3), gperftools CPU profiles.\n\n"
		   "  -i, --input FILE  the file to print (or as the argument); - is standard\n"
		   "                input, any of the formats\n"
		   "  -o, --output OUT  write to OUT (replaced once all is written), - for\n"
		   "                stdout (the default)\n"
		   "  --json, --format=json\n"
		   "                one JSON object instead of text (on failure too: its\n"
		   "                \"error\" holds the message); --format=text: text\n"
		   "  --time-order  XRay: function and event records only, each thread's\n"
		   "                buffers in time order, threads merged by time\n"
		   "  -v            every warning (default: the first 3 of each\n"
		   "                kind, at most 20)\n"
		   "  -h, --help    this text\n");
}

static void text_record(const struct pg_jd_record *r, const struct pg_jd_header *h)
{
	printf("%10llu  %-14s time %llu", (unsigned long long)r->offset, pg_jitdump_record_name(r->id),
	       (unsigned long long)r->timestamp);
	switch (r->id) {
	case PG_JD_LOAD: {
		const struct pg_jd_load *l = &r->u.load;

		printf("  pid %u tid %u code 0x%llx size %llu index %llu \"", l->pid, l->tid,
		       (unsigned long long)l->code_addr, (unsigned long long)l->code_size,
		       (unsigned long long)l->code_index);
		out_escaped(stdout, l->name);
		printf("\"");
		if (l->vma != l->code_addr)
			printf(" vma 0x%llx", (unsigned long long)l->vma);
		break;
	}
	case PG_JD_MOVE: {
		const struct pg_jd_move *m = &r->u.move;

		printf("  pid %u tid %u index %llu 0x%llx -> 0x%llx size %llu", m->pid, m->tid,
		       (unsigned long long)m->code_index, (unsigned long long)m->old_code_addr,
		       (unsigned long long)m->new_code_addr, (unsigned long long)m->code_size);
		break;
	}
	case PG_JD_DEBUG_INFO: {
		const struct pg_jd_debug *d = &r->u.debug;

		printf("  code 0x%llx entries %llu%s\n", (unsigned long long)d->code_addr,
		       (unsigned long long)d->nr_entry, d->dropped ? " (dropped: damaged)" : "");
		for (size_t i = 0; i < d->nr_lines; i++) {
			const struct pg_jd_line *ln = &d->lines[i];

			printf("            0x%llx", (unsigned long long)ln->addr);
			if (h->line_bias && ln->addr >= h->line_bias)
				printf(" (pc 0x%llx)", (unsigned long long)(ln->addr - h->line_bias));
			printf("  ");
			if (ln->file)
				out_escaped(stdout, ln->file);
			else
				printf("<damaged name>");
			printf(":%u %s %u\n", ln->line, h->v8 ? "column" : "discriminator", ln->discrim);
		}
		return;
	}
	case PG_JD_UNWINDING_INFO: {
		const struct pg_jd_unwind *u = &r->u.unwind;

		printf("  unwinding %llu eh_frame_hdr %llu mapped %llu%s",
		       (unsigned long long)u->unwinding_size, (unsigned long long)u->eh_frame_hdr_size,
		       (unsigned long long)u->mapped_size, u->dropped ? " (dropped: inconsistent)" : "");
		break;
	}
	case PG_JD_INLINE_INFO: {
		const struct pg_jd_inline *in = &r->u.inl;

		printf("  code 0x%llx strings %u ranges %u%s\n", (unsigned long long)in->code_addr,
		       in->nr_strings, in->nr_ranges, in->dropped ? " (dropped: damaged)" : "");
		for (size_t i = 0; i < in->nranges; i++) {
			const struct pg_jd_inline_range *rg = &in->ranges[i];

			printf("            +0x%x..+0x%llx ", rg->off,
			       (unsigned long long)rg->off + rg->len);
			for (uint32_t k = 0; k < rg->nframes; k++) {
				const struct pg_jd_frame *f = &rg->frames[k];

				printf(" %s", k ? "<- " : "");
				out_escaped(stdout, f->func);
				printf(" (");
				out_escaped(stdout, f->file ? f->file : "??");
				printf(":%u)", f->line);
			}
			printf("\n");
		}
		return;
	}
	case PG_JD_UNLOAD: {
		const struct pg_jd_unload *u = &r->u.unload;

		printf("  pid %u tid %u code 0x%llx size %llu index %llu", u->pid, u->tid,
		       (unsigned long long)u->code_addr, (unsigned long long)u->code_size,
		       (unsigned long long)u->code_index);
		break;
	}
	case PG_JD_CLOSE:
		break;
	default:
		printf("  id %u size %u (skipped)", r->id, r->size);
		break;
	}
	printf("\n");
}

static void json_record(const struct pg_jd_record *r, bool first)
{
	printf("%s\n  {\"offset\":%llu,\"type\":\"%s\",\"id\":%u,\"size\":%u,\"timestamp\":%llu",
	       first ? "" : ",", (unsigned long long)r->offset, pg_jitdump_record_name(r->id), r->id, r->size,
	       (unsigned long long)r->timestamp);
	switch (r->id) {
	case PG_JD_LOAD: {
		const struct pg_jd_load *l = &r->u.load;

		printf(",\"pid\":%u,\"tid\":%u,\"vma\":%llu,\"code_addr\":%llu,\"code_size\":%llu,\"code_index\":%llu,\"name\":",
		       l->pid, l->tid, (unsigned long long)l->vma, (unsigned long long)l->code_addr,
		       (unsigned long long)l->code_size, (unsigned long long)l->code_index);
		json_str(stdout, l->name);
		if (!utf8_valid(l->name)) {
			printf(",\"name_hex\":");
			json_hex(stdout, l->name);
		}
		break;
	}
	case PG_JD_MOVE: {
		const struct pg_jd_move *m = &r->u.move;

		printf(",\"pid\":%u,\"tid\":%u,\"vma\":%llu,\"old_code_addr\":%llu,\"new_code_addr\":%llu,\"code_size\":%llu,\"code_index\":%llu",
		       m->pid, m->tid, (unsigned long long)m->vma, (unsigned long long)m->old_code_addr,
		       (unsigned long long)m->new_code_addr, (unsigned long long)m->code_size,
		       (unsigned long long)m->code_index);
		break;
	}
	case PG_JD_DEBUG_INFO: {
		const struct pg_jd_debug *d = &r->u.debug;

		printf(",\"code_addr\":%llu,\"nr_entry\":%llu,\"dropped\":%s,\"lines\":[",
		       (unsigned long long)d->code_addr, (unsigned long long)d->nr_entry,
		       d->dropped ? "true" : "false");
		for (size_t i = 0; i < d->nr_lines; i++) {
			const struct pg_jd_line *ln = &d->lines[i];

			printf("%s{\"addr\":%llu,\"line\":%u,\"discrim\":%u,\"file\":", i ? "," : "",
			       (unsigned long long)ln->addr, ln->line, ln->discrim);
			if (ln->file)
				json_str(stdout, ln->file);
			else
				printf("null");
			printf("}");
		}
		printf("]");
		break;
	}
	case PG_JD_UNWINDING_INFO: {
		const struct pg_jd_unwind *u = &r->u.unwind;

		printf(",\"unwinding_size\":%llu,\"eh_frame_hdr_size\":%llu,\"mapped_size\":%llu,\"dropped\":%s",
		       (unsigned long long)u->unwinding_size, (unsigned long long)u->eh_frame_hdr_size,
		       (unsigned long long)u->mapped_size, u->dropped ? "true" : "false");
		break;
	}
	case PG_JD_INLINE_INFO: {
		const struct pg_jd_inline *in = &r->u.inl;

		printf(",\"code_addr\":%llu,\"nr_strings\":%u,\"nr_ranges\":%u,\"dropped\":%s,\"ranges\":[",
		       (unsigned long long)in->code_addr, in->nr_strings, in->nr_ranges,
		       in->dropped ? "true" : "false");
		for (size_t i = 0; i < in->nranges; i++) {
			const struct pg_jd_inline_range *rg = &in->ranges[i];

			printf("%s{\"off\":%u,\"len\":%u,\"frames\":[", i ? "," : "", rg->off, rg->len);
			for (uint32_t k = 0; k < rg->nframes; k++) {
				printf("%s{\"func\":", k ? "," : "");
				json_str(stdout, rg->frames[k].func);
				printf(",\"file\":");
				if (rg->frames[k].file)
					json_str(stdout, rg->frames[k].file);
				else
					printf("null");
				printf(",\"line\":%u}", rg->frames[k].line);
			}
			printf("]}");
		}
		printf("]");
		break;
	}
	case PG_JD_UNLOAD: {
		const struct pg_jd_unload *u = &r->u.unload;

		printf(",\"pid\":%u,\"tid\":%u,\"code_addr\":%llu,\"code_size\":%llu,\"code_index\":%llu",
		       u->pid, u->tid, (unsigned long long)u->code_addr,
		       (unsigned long long)u->code_size, (unsigned long long)u->code_index);
		break;
	}
	default:
		break;
	}
	printf("}");
}

static int dump_jitdump(const char *path, bool json, struct cli_warnings *w)
{
	struct pg_diag diag;
	struct pg_jitdump_stats st = { .sz = sizeof(st) };
	struct pg_jd_record rec;
	const struct pg_jd_header *h;
	pg_jitdump *jd;
	bool first = true;
	int ret;

	cli_diag_init(&diag, w);
	ret = pg_jitdump_open(path, PG_JITDUMP_ALL_RECORDS, &diag, &jd);
	if (ret < 0) {
		if (json) {
			printf("{\"format\":\"jitdump\",\"file\":");
			json_str(stdout, cli_shown_path(path, true));
			printf(",\"header\":null,\"records\":[],\"warnings\":[],\"error\":");
			json_shown_err(stdout, diag.err);
			printf("}\n");
		}
		cli_error("%s", diag.err);
		return EXIT_BADINPUT;
	}
	h = pg_jitdump_header(jd);
	if (json) {
		printf("{\"format\":\"jitdump\",\"file\":");
		json_str(stdout, cli_shown_path(path, true));
		printf(",\"header\":{\"version\":%u,\"total_size\":%u,\"elf_mach\":%u,\"pad1\":%u,\"pid\":%u,\"timestamp\":%llu,\"flags\":%llu,\"byte_order\":\"%s\",\"class\":%d,\"line_bias\":%u,\"line_bias_why\":",
		       h->version, h->total_size, h->elf_mach, h->pad1, h->pid,
		       (unsigned long long)h->timestamp, (unsigned long long)h->flags,
		       h->big_endian ? "big" : "little", h->is_64bit ? 64 : 32, h->line_bias);
		if (h->line_bias_why)
			json_str(stdout, h->line_bias_why);
		else
			printf("null");
		printf("},\n\"records\":[");
	} else {
		printf("%s: jitdump version %u, %s-endian, %d-bit, e_machine %u, pid %u\n",
		       cli_shown_path(path, true),
		       h->version, h->big_endian ? "big" : "little", h->is_64bit ? 64 : 32,
		       h->elf_mach, h->pid);
		printf("header: total_size %u, pad1 0x%x, timestamp %llu, flags 0x%llx%s",
		       h->total_size, h->pad1, (unsigned long long)h->timestamp,
		       (unsigned long long)h->flags,
		       h->flags & PG_JITDUMP_FLAG_ARCH_TIMESTAMP ? " (ARCH_TIMESTAMP)" : "");
		/* the reader's finding: what the producer added to line addresses */
		if (h->line_bias)
			printf("; line addresses are 0x%x past their instruction: %s",
			       h->line_bias, h->line_bias_why);
		printf("\n");
		printf("    offset  record\n");
	}
	while ((ret = pg_jitdump_next(jd, &rec)) > 0) {
		if (json)
			json_record(&rec, first);
		else
			text_record(&rec, h);
		first = false;
	}
	pg_jitdump_stats(jd, &st);
	if (json) {
		printf("\n],");
		json_warnings_error(stdout, w, ret < 0 ? diag.err : NULL);
		printf(",\"summary\":{\"records\":%llu,\"loads\":%llu,\"moves\":%llu,\"debug_infos\":%llu,\"unwinding_infos\":%llu,\"closes\":%llu,\"unknown\":%llu,\"lines\":%llu,\"damaged_names\":%llu,\"truncated_bytes\":%llu,\"inline_infos\":%llu,\"unloads\":%llu}}\n",
		       (unsigned long long)st.records, (unsigned long long)st.loads,
		       (unsigned long long)st.moves, (unsigned long long)st.debug_infos,
		       (unsigned long long)st.unwinding_infos, (unsigned long long)st.closes,
		       (unsigned long long)st.unknown, (unsigned long long)st.lines,
		       (unsigned long long)st.damaged_names, (unsigned long long)st.truncated_bytes,
		       (unsigned long long)st.inline_infos, (unsigned long long)st.unloads);
	} else {
		printf("summary: %llu records: %llu LOAD, %llu MOVE, %llu DEBUG_INFO (%llu lines), %llu UNWINDING_INFO, %llu CLOSE, %llu unknown",
		       (unsigned long long)st.records, (unsigned long long)st.loads,
		       (unsigned long long)st.moves, (unsigned long long)st.debug_infos,
		       (unsigned long long)st.lines, (unsigned long long)st.unwinding_infos,
		       (unsigned long long)st.closes, (unsigned long long)st.unknown);
		/* perfgraft's own records, only where a dump has them */
		if (st.inline_infos || st.unloads)
			printf(", %llu INLINE_INFO, %llu UNLOAD", (unsigned long long)st.inline_infos,
			       (unsigned long long)st.unloads);
		printf("\n");
	}
	pg_jitdump_close(jd);
	if (ret < 0) {
		cli_error("%s", diag.err);
		return EXIT_BADINPUT;
	}
	return 0;
}

/* A failure before any format's dumper runs: the message on stderr and,
 * with --json, a JSON object holding it, so that stdout is never empty.
 * Returns status. */
static int fail(bool json, const char *path, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(bool json, const char *path, int status, const char *fmt, ...)
{
	struct cli_warnings none = { 0 };
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (json) {
		printf("{\"format\":null,\"file\":");
		if (path)
			json_str(stdout, cli_shown_path(path, true));
		else
			printf("null");
		printf(",");
		json_warnings_error(stdout, &none, msg);
		printf("}\n");
		fflush(stdout);
	}
	if (status == EXIT_USAGE)
		do_help(stderr);
	else
		cli_error("%s", msg);
	return status;
}

int cmd_dump(int argc, char **argv)
{
	enum { OPT_FORMAT = 256 };
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "time-order", no_argument, NULL, 't' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static const unsigned accept = CLI_ACCEPT(CLI_FMT_JITDUMP) | CLI_ACCEPT_PERF |
				       CLI_ACCEPT_XRAY | CLI_ACCEPT(CLI_FMT_GPERF);
	struct cli_warnings w = { 0 };
	struct cli_input in;
	bool json = false, time_order = false, help = false;
	const char *input = NULL, *output = NULL;
	char bad[256] = "";
	int c, ret;

	/* every option is read before a usage error is reported, so that a
	 * --json after the bad one still gets its JSON */
	while ((c = getopt_long(argc, argv, "i:o:jvh", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (input && !bad[0])
				snprintf(bad, sizeof(bad), "more than one FILE given");
			input = optarg;
			break;
		case 'o': output = optarg; break;
		case 'j': json = true; break;
		case OPT_FORMAT:
			if (!strcmp(optarg, "json") || !strcmp(optarg, "text"))
				json = !strcmp(optarg, "json");
			else if (!bad[0])
				snprintf(bad, sizeof(bad), "--format takes text or json, not '%.100s'", optarg);
			break;
		case 't': time_order = true; break;
		case 'v': w.verbose++; break;
		case 'h': help = true; break;
		default: {
			/* what getopt said on stderr, for the JSON error */
			const char *arg = argv[optind - 1];

			if (bad[0])
				break;
			if (optopt && !strncmp(arg, "--", 2) && strchr(arg, '='))
				snprintf(bad, sizeof(bad), "option '%s' doesn't allow an argument", arg);
			else if (optopt)
				snprintf(bad, sizeof(bad), "invalid option -- '%c'", optopt);
			else
				snprintf(bad, sizeof(bad), "unrecognized option '%s'", arg);
			break;
		}
		}
	}
	if (help && !bad[0]) {
		do_help(stdout);
		return 0;
	}
	if (bad[0])
		return fail(json, NULL, EXIT_USAGE, "%s (" USAGE ")", bad);
	if (!input && optind < argc)
		input = argv[optind++];
	if (!input || optind != argc)
		return fail(json, NULL, EXIT_USAGE, "%s (" USAGE ")",
			    !input ? "no FILE given" : "more than one FILE given");
	if (output && (cli_refuse_same(output, input) < 0 || cli_output_to(output) < 0))
		return EXIT_USAGE;
	w.collect = json;
	ret = cli_input("dump", input, accept,
			"a jitdump, perf.data, XRay trace or gperftools CPU profile",
			CLI_IN_PERF_STREAM, &in);
	if (ret < 0)
		return fail(json, in.arg, ret == -2 ? EXIT_USAGE : EXIT_BADINPUT, "%s", in.err);
	switch (in.fmt) {
	case CLI_FMT_GPERF: ret = dump_gperf(in.path, json, &w); break;
	case CLI_FMT_JITDUMP: ret = dump_jitdump(in.path, json, &w); break;
	case CLI_FMT_PERF_FILE:
	case CLI_FMT_PERF_PIPE: ret = dump_perfdata(in.path, json, &w); break;
	case CLI_FMT_XRAY_BASIC:
	case CLI_FMT_XRAY_FDR: ret = dump_xray(in.path, json, time_order, &w); break;
	default:
		ret = -1;
		break;
	}
	if (ret >= 0) {
		cli_warnings_flush(&w);
		cli_warnings_free(&w);
		return ret;
	}
	/* a file the sniffing could not read (missing, unreadable): the
	 * perf.data reader's message, as for any input */
	if (in.fmt == CLI_FMT_UNKNOWN && strcmp(in.arg, "-")) {
		struct stat st;

		if (stat(in.arg, &st) < 0 || !S_ISREG(st.st_mode)) {
			int fd = open(in.arg, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

			if (fd < 0)
				return fail(json, in.arg, EXIT_BADINPUT, "%s: %s", in.arg, strerror(errno));
			close(fd);
			return fail(json, in.arg, EXIT_BADINPUT, "%s: not a regular file", in.arg);
		}
		if (access(in.arg, R_OK) < 0)
			return fail(json, in.arg, EXIT_BADINPUT, "%s: %s", in.arg, strerror(errno));
	}
	if (in.fmt == CLI_FMT_EMPTY)
		return fail(json, in.arg, EXIT_BADINPUT, "%s: offset 0: empty file", in.name);
	return fail(json, in.arg, EXIT_BADINPUT,
		    "%s: offset 0: unrecognized format (perfgraft dump reads jitdump, perf.data, XRay and gperftools CPU profile files)",
		    in.name);
}
