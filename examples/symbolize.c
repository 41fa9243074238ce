/* SPDX-License-Identifier: MIT */
/* example_symbolize: symbolize JIT addresses with libperfgraft.
 *
 *     example_symbolize JITDUMP ADDR[@TIME]...
 *
 * Prints one line per address, its fields separated by tabs (JIT function
 * names hold blanks), as `perfgraft symbolize` prints them:
 *
 *     ADDR[@TIME]	NAME+0xOFF	FILE:LINE[:COLUMN]
 *
 * with "??" for an address no code covered and "??:0" for code without a
 * line table row there.  ADDR is hex; TIME (integer nanoseconds or perf
 * script's "seconds.fraction", printed back in nanoseconds) asks for the
 * code that was there at that moment: a JIT reuses addresses.  Without it
 * the answer is the code that was there last.
 *
 * Build it against the installed library:
 *
 *     cc symbolize.c $(pkg-config --cflags --libs perfgraft)
 *
 * Only the public headers are used, as in any program outside perfgraft. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <perfgraft/common.h>
#include <perfgraft/symbolize.h>

/* Non-fatal findings (a truncated tail left by a JIT killed mid-write, a
 * damaged debug record) arrive here while the library goes on: report
 * them and carry on, as perf does. */
static void print_warning(void *ctx, const char *msg)
{
	fprintf(stderr, "%s: warning: %s\n", (const char *)ctx, msg);
}

int main(int argc, char **argv)
{
	static char prog[] = "example_symbolize";
	/* One pg_diag per handle: it receives the message of the last failure
	 * and routes the warnings.  It must outlive the symbolizer. */
	struct pg_diag diag = { .warn = print_warning, .ctx = prog };
	pg_symbolizer *sym = NULL;
	int status = 0, ret;

	if (argc < 3 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(stderr, "usage: %s JITDUMP ADDR[@TIME]...\n", prog);
		return 2;
	}

	/* Every function returns 0 (or a count) on success and a negative
	 * errno on failure; diag.err then says what went wrong in words,
	 * naming the file and byte offset for damaged input. */
	ret = pg_symbolizer_new(&diag, &sym);
	if (ret < 0) {
		fprintf(stderr, "%s: %s\n", prog, diag.err);
		return 1;
	}
	/* The dump is mapped, not copied: names in the results point into it
	 * and stay valid until pg_symbolizer_free().  More dumps (other
	 * processes, or the same process's earlier runs) could be added here. */
	ret = pg_symbolizer_add(sym, argv[1]);
	if (ret < 0) {
		fprintf(stderr, "%s: %s\n", prog, diag.err);
		pg_symbolizer_free(sym);
		return 1;
	}
	/* Optional: builds the lookup index now rather than on the first
	 * lookup.  After this the handle may be shared by lookup threads. */
	ret = pg_symbolizer_freeze(sym);
	if (ret < 0) {
		fprintf(stderr, "%s: %s\n", prog, diag.err);
		pg_symbolizer_free(sym);
		return 1;
	}

	for (int i = 2; i < argc; i++) {
		const char *arg = argv[i];
		uint64_t addr = 0, time = PG_SYM_TIME_END;
		size_t err_at = 0;
		struct pg_sym s;

		/* The library parses the address forms perf script prints, so
		 * every tool built on it accepts the same ones. */
		if (pg_sym_parse_addr(arg, strlen(arg), &addr, &time, &err_at) < 0) {
			fprintf(stderr, "%s: '%s': not ADDR or ADDR@TIME (at character %zu)\n",
				prog, arg, err_at + 1);
			status = 2;
			continue;
		}
		/* PG_SYM_ANY_PID: this dump is the only process; with dumps of
		 * several processes, pass the sample's pid. */
		ret = pg_symbolize(sym, PG_SYM_ANY_PID, addr, time, &s);
		if (ret < 0) {
			fprintf(stderr, "%s: 0x%" PRIx64 ": %s\n", prog, addr, diag.err);
			status = 1;
			continue;
		}
		printf("0x%" PRIx64, addr);
		if (time != PG_SYM_TIME_END)
			printf("@%" PRIu64, time);
		if (ret == 0) {		/* no JIT code there (then) */
			printf("\t??\t??:0\n");
			continue;
		}
		printf("\t%s+0x%" PRIx64, s.name, s.offset);
		if (s.file && s.column)
			printf("\t%s:%" PRIu32 ":%" PRIu32 "\n", s.file, s.line, s.column);
		else if (s.file)
			printf("\t%s:%" PRIu32 "\n", s.file, s.line);
		else
			printf("\t??:0\n");
		/* The address held other code at other times: without a time
		 * the answer is only the last of them. */
		if (s.reused && time == PG_SYM_TIME_END)
			fprintf(stderr, "%s: note: 0x%" PRIx64 " held %" PRIu32
				" other functions over time; give ADDR@TIME\n",
				prog, addr, s.reused);
	}

	pg_symbolizer_free(sym);
	/* A failed write (a full disk, a closed pipe) is a failure too. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "%s: cannot write the output: %s\n", prog, strerror(errno));
		return 1;
	}
	return status;
}
