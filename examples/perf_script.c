/* SPDX-License-Identifier: MIT */
/* example_perf_script: name the JIT frames of perf script output with
 * libperfgraft.
 *
 *     perf script | example_perf_script JITDUMP...
 *
 * Every "ADDR [unknown] (DSO)" frame inside the dumps' code becomes
 * "ADDR NAME+0xOFF (DUMP)" with a "  FILE:LINE" line below it, looked up
 * at the sample's time (a JIT reuses addresses); every other line passes
 * unchanged.  This is `perfgraft symbolize --perf-script` with its
 * defaults.  Only the public headers are used. */
#define _POSIX_C_SOURCE 200809L	/* getline */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <perfgraft/common.h>
#include <perfgraft/symbolize.h>

static void print_warning(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "example_perf_script: warning: %s\n", msg);
}

int main(int argc, char **argv)
{
	struct pg_diag diag = { .warn = print_warning };
	struct pg_script_opts opts = { .sz = sizeof(opts) };	/* the defaults */
	struct pg_script_stats st = { .sz = sizeof(st) };
	pg_symbolizer *sym = NULL;
	pg_script_rewriter *rw = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ret = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: perf script | %s JITDUMP...\n", argv[0]);
		return 2;
	}
	ret = pg_symbolizer_new(&diag, &sym);
	for (int i = 1; i < argc && ret == 0; i++)
		ret = pg_symbolizer_add(sym, argv[i]);
	/* the rewriter only reads the symbolizer once every dump is in */
	if (ret == 0)
		ret = pg_script_rewriter_new(sym, &opts, &rw);
	while (ret >= 0 && (n = getline(&line, &cap, stdin)) > 0)
		ret = pg_script_rewrite_line(rw, line, (size_t)n, stdout);
	if (ret < 0)
		fprintf(stderr, "example_perf_script: %s\n", diag.err);
	else if (fflush(stdout) || ferror(stdout))
		ret = -1, fprintf(stderr, "example_perf_script: writing the output failed\n");
	else {
		pg_script_rewriter_stats(rw, &st);
		fprintf(stderr, "example_perf_script: %" PRIu64 " of %" PRIu64
			" unresolved frames named\n", st.named, st.frames);
	}
	free(line);
	pg_script_rewriter_free(rw);
	pg_symbolizer_free(sym);
	return ret < 0;
}
