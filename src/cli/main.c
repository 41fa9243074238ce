/* SPDX-License-Identifier: MIT */
/* perfgraft: git/perf-style dispatch to one file per subcommand. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <getopt.h>
#include <sys/wait.h>

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
	fprintf(f, "usage: perfgraft [-V|--version] [-h|--help] COMMAND [ARGS]\n"
		   "       perfgraft help COMMAND\n\n"
		   "Grafts what Linux perf cannot see onto perf's own toolchain.\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
	fprintf(f, "\n'perfgraft COMMAND --help' prints a command's options, 'perfgraft help COMMAND'\n"
		   "opens its manual page perfgraft-COMMAND(1).  Every command takes its input\n"
		   "as an argument or -i FILE, - for standard input (see perfgraft(1)).\n");
}

/* What every command wrote to stdout is flushed and closed here, so that
 * a write error (a full disk, /dev/full) is one message and exit 1 for
 * every command, not a silent exit 0 with part of the output.  EBADF from
 * fclose: stdout was closed from the start and nothing was written to it. */
static int close_stdout(int status)
{
	/* -o FILE of a command that prints: replaced when all of it is
	 * written; a run that printed nothing (a failure before the first
	 * line) leaves it as it was */
	bool wrote = lseek(STDOUT_FILENO, 0, SEEK_CUR) > 0;

	if (cli_stdout_flush() < 0) {
		cli_output_finish(false);
		return status ? status : EXIT_BADINPUT;
	}
	wrote = wrote || lseek(STDOUT_FILENO, 0, SEEK_CUR) > 0;
	if (cli_output_finish(status == 0 || (status == EXIT_BADINPUT && wrote)) < 0)
		return status ? status : EXIT_BADINPUT;
	if (fclose(stdout) != 0 && errno != EBADF) {
		cli_error("write error on standard output: %s", strerror(errno));
		return status ? status : EXIT_BADINPUT;
	}
	return status;
}

static const struct cmd *find_cmd(const char *name)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(name, cmds[i].name))
			return &cmds[i];
	return NULL;
}

/* The directory of the running binary's man pages when it runs from its
 * build tree (man/meson.build copies them into BUILD/man): NULL otherwise. */
static char *build_man_dir(void)
{
	char exe[PATH_MAX], *slash, *dir;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct stat st;

	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	if (asprintf(&dir, "%s/man", exe) < 0)
		return NULL;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		free(dir);
		return NULL;
	}
	return dir;
}

/* 0 when man finds the page (man -w), without printing it */
static int man_finds(const char *page)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0) {
			dup2(null, STDOUT_FILENO);
			dup2(null, STDERR_FILENO);
		}
		execlp("man", "man", "-w", page, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* perfgraft help CMD: the manual page perfgraft-CMD(1) as perf help shows
 * perf-CMD(1): from the build tree when the binary runs there, else by
 * man with the installed pages ahead of $MANPATH; where man or the page
 * is missing, the command's usage. */
static int help(const char *name)
{
	const struct cmd *c = find_cmd(name);
	char page[64], *bdir = build_man_dir(), *local = NULL, *mp = NULL;
	const char *old = getenv("MANPATH");
	char *args[] = { (char *)"perfgraft", (char *)"--help", NULL };

	if (!c && strcmp(name, "perfgraft")) {
		cli_error("'%s' is not a perfgraft command (see 'perfgraft --help')", name);
		free(bdir);
		return EXIT_USAGE;
	}
	snprintf(page, sizeof(page), c ? "perfgraft-%s" : "perfgraft", name);
	fflush(stdout);
	if (bdir && asprintf(&local, "%s/%s.1", bdir, page) >= 0 && access(local, R_OK) == 0)
		execlp("man", "man", "-l", local, (char *)NULL);
	free(local);
	free(bdir);
	/* an empty entry (the trailing ':') keeps man's own search path */
	if (asprintf(&mp, "%s:%s", PG_MANDIR, old ? old : "") >= 0)
		setenv("MANPATH", mp, 1);
	free(mp);
	if (man_finds(page) == 0)
		execlp("man", "man", page, (char *)NULL);
	cli_error("no manual page %s(1) found (man is missing, or perfgraft is not installed): its usage follows",
		  page);
	if (!c) {
		usage(stdout);
		return 0;
	}
	optind = 0;
	return c->fn(2, args);
}

int main(int argc, char **argv)
{
	cli_signals_init();
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "help") && argc > 2)
		return close_stdout(help(argv[2]));
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return close_stdout(0);
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
		printf("perfgraft %s\n", pg_version());
		return close_stdout(0);
	}
	if (find_cmd(argv[1]))
		return close_stdout(cli_inputs_unchanged(find_cmd(argv[1])->fn(argc - 1, argv + 1)));
	cli_error("'%s' is not a perfgraft command (see 'perfgraft --help')", argv[1]);
	return EXIT_USAGE;
}
