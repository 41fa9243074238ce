/* SPDX-License-Identifier: MIT */
/* What keeps a user's earlier results safe from a run: signal cleanup,
 * output-is-an-input refusal, and the option spellings shared by commands. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>

#include <perfgraft/elfimage.h>
#include "cli/cli.h"
#include "util/util.h"

static void on_fatal_signal(int sig)
{
	/* async-signal-safe: unlinkat over the registry, then die of sig so
	 * the shell sees it (130 for ^C) */
	pg_cleanup_run();
	signal(sig, SIG_DFL);
	raise(sig);
}

void cli_signals_init(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old;

		/* a run started with the signal ignored (nohup) keeps it so */
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(sigs[i], &sa, NULL);
	}
	/* an input truncated by another process while it is mapped: zeros
	 * are read and the run fails naming it, instead of SIGBUS leaving the
	 * temporaries (any other SIGBUS still removes them, then kills) */
	pg_install_sigbus_handler();
	/* past ulimit -f a write fails with EFBIG: one message and the
	 * failure path's cleanup, not a death that leaves the temporary */
	signal(SIGXFSZ, SIG_IGN);
}

int cli_inputs_unchanged(int ret)
{
	struct pg_diag d = { 0 };

	/* a command that wrote to stdout has nothing to commit: its output
	 * is already out, but the run must not look successful */
	if (ret == 0 && pg_inputs_check(&d) < 0) {
		cli_error("%s", d.err);
		return EXIT_BADINPUT;
	}
	return ret;
}

void cli_pipe_output(void)
{
	/* a reader that goes away (| head -c 100) is a write error with a
	 * message and the failure path's cleanup, not a silent death by
	 * SIGPIPE that leaves the run's images behind */
	signal(SIGPIPE, SIG_IGN);
}

bool cli_same_file(const char *output, const char *input)
{
	struct stat a, b;

	if (!strcmp(output, "-") || !strcmp(input, "-"))
		return false;
	if (stat(output, &a) < 0 || stat(input, &b) < 0)
		return false;
	/* /dev/null as both is harmless; a FIFO read and written is the user's */
	return S_ISREG(a.st_mode) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int cli_refuse_same(const char *output, const char *input)
{
	if (!cli_same_file(output, input))
		return 0;
	cli_error("the output '%s' is the input '%s': writing it would destroy the input; choose another -o",
		  output, input);
	return -1;
}

int cli_layout(const char *arg, struct pg_elfset_opts *eo)
{
	eo->memory_layout = !strcmp(arg, "memory");
	eo->per_function = !strcmp(arg, "per-function");
	if (eo->memory_layout || eo->per_function || !strcmp(arg, "packed"))
		return 0;
	cli_error("--layout: '%s' is not memory, packed or per-function", arg);
	return -1;
}

/* An option that takes one of two words: *second says which. */
static int two_words(const char *opt, const char *arg, const char *first, const char *other,
		     bool *second)
{
	if (strcmp(arg, first) && strcmp(arg, other)) {
		cli_error("--%s takes %s or %s, not '%s'", opt, first, other, arg);
		return -1;
	}
	*second = !strcmp(arg, other);
	return 0;
}

int cli_compress_debug(const char *arg, bool *plain)
{
	return two_words("compress-debug-sections", arg, "zlib", "none", plain);
}

int cli_cfi_layout(const char *arg, bool *perf_5_19)
{
	return two_words("cfi-layout", arg, "standard", "perf-5.19", perf_5_19);
}
