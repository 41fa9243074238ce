/* SPDX-License-Identifier: MIT */
/* perfgraft: git/perf-style dispatch to one file per subcommand. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} cmds[] = {
	{ "dump", cmd_dump, "print a jitdump, perf.data, XRay trace or CPU profile readably (text or --json)" },
	{ "elf", cmd_elf, "write ELF images (symbols, DWARF lines, unwind tables) for a jitdump" },
	{ "inject", cmd_inject, "map the JIT code of jitdumps into a perf.data from ELF images" },
	{ "gperf", cmd_gperf, "convert a gperftools CPU profile into perf.data" },
	{ "symbolize", cmd_symbolize, "name JIT addresses (function, offset, source line) from jitdumps" },
	{ "perf-map", cmd_perf_map, "write a jitdump's code as a perf-PID.map" },
	{ "xray", cmd_xray, "convert LLVM XRay traces into perf.data (samples and xray:* events)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: perfgraft [--version] [--help] COMMAND [ARGS]\n\n"
		   "Grafts what Linux perf cannot see onto perf's own toolchain.\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
	fprintf(f, "\n'perfgraft COMMAND --help' or 'man perfgraft-COMMAND' describes a command.\n");
}

/* What every command wrote to stdout is flushed and closed here, so that
 * a write error (a full disk, /dev/full) is one message and exit 1 for
 * every command, not a silent exit 0 with part of the output.  EBADF from
 * fclose: stdout was closed from the start and nothing was written to it. */
static int close_stdout(int status)
{
	if (cli_stdout_flush() < 0)
		return status ? status : EXIT_BADINPUT;
	if (fclose(stdout) != 0 && errno != EBADF) {
		cli_error("write error on standard output: %s", strerror(errno));
		return status ? status : EXIT_BADINPUT;
	}
	return status;
}

int main(int argc, char **argv)
{
	cli_signals_init();
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return close_stdout(0);
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("perfgraft %s\n", pg_version());
		return close_stdout(0);
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return close_stdout(cli_inputs_unchanged(cmds[i].fn(argc - 1, argv + 1)));
	cli_error("'%s' is not a perfgraft command (see 'perfgraft --help')", argv[1]);
	return EXIT_USAGE;
}
