/* SPDX-License-Identifier: MIT */
#ifndef PG_CLI_H
#define PG_CLI_H

#include <stdio.h>
#include <perfgraft/common.h>

#define EXIT_BADINPUT 1
#define EXIT_USAGE 2

struct cli_warn_kind;

/* Warnings on stderr: -v (verbose) prints them all; -q (quiet) none, only
 * errors; by default the first few of each kind (the same message but for
 * its numbers and quoted names) and at most MAX_SHOWN in all, and
 * cli_warnings_flush() says how many of each kind were left out. */
struct cli_warnings {
	unsigned verbose;
	bool quiet;
	unsigned long shown, hidden;
	struct cli_warn_kind *kinds;
	size_t nkinds, kinds_cap;
	/* JSON mode: warnings are collected instead of printed */
	bool collect;
	char **list;
	size_t n, cap;
	unsigned long dropped;
};

void cli_diag_init(struct pg_diag *d, struct cli_warnings *w);
void cli_warnings_flush(struct cli_warnings *w);
void cli_warnings_free(struct cli_warnings *w);
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Standard input spooled or read through path (/dev/stdin): messages and
 * JSON name it as perf.data's reader does, "<stdin>" (and a "file" field
 * "-"), whatever reader made them. */
void cli_stdin_read_as(const char *path);
/* s with the path standard input is read as replaced by "<stdin>" (buf
 * holds the result when it differs) */
const char *cli_shown(const char *s, char *buf, size_t n);
/* an input's path as printed: for the path standard input is read as,
 * "-" where a file name stands alone (dump's "file" field and first
 * line: as_file), else "<stdin>" (in a sentence) */
const char *cli_shown_path(const char *path, bool as_file);
/* fflush(stdout) and its error flag: 0, or -1 after one "write error on
 * standard output" message (said once per run, however often called) */
int cli_stdout_flush(void);

/* Output helpers */
void out_escaped(FILE *f, const char *s);	/* C-style escapes for text output */
bool utf8_valid(const char *s);
void json_str(FILE *f, const char *s);		/* quoted JSON string (U+FFFD for bad bytes) */
void json_hex(FILE *f, const char *s);		/* quoted hex of the raw bytes */
void json_warnings_error(FILE *f, const struct cli_warnings *w, const char *err);
/* json_str of an error message, standard input named "<stdin>" (cli_shown) */
void json_shown_err(FILE *f, const char *err);
double now_seconds(void);

/* safety.c */
/* SIGINT/TERM/HUP remove the run's temporaries; SIGBUS on a shrinking
 * input reads zeros (the run then fails); SIGXFSZ is ignored (EFBIG) */
void cli_signals_init(void);
/* ret, or EXIT_BADINPUT with the message when an input changed */
int cli_inputs_unchanged(int ret);
void cli_pipe_output(void);	/* EPIPE instead of SIGPIPE: for perf.data writers */
bool cli_same_file(const char *output, const char *input);
int cli_refuse_same(const char *output, const char *input);	/* -1 with a message */
/* --layout memory|packed|per-function into eo; -1 (reported) otherwise */
struct pg_elfset_opts;
int cli_layout(const char *arg, struct pg_elfset_opts *eo);
int cli_cfi_layout(const char *arg, bool *perf_5_19);	/* -1 with a message */
int cli_compress_debug(const char *arg, bool *plain);	/* zlib|none; -1 with a message */
bool progress_due(double *next);

/* input.c: the inputs and printed outputs every command shares */
enum cli_fmt {
	CLI_FMT_UNKNOWN, CLI_FMT_EMPTY, CLI_FMT_JITDUMP, CLI_FMT_PERF_FILE, CLI_FMT_PERF_PIPE,
	CLI_FMT_XRAY_BASIC, CLI_FMT_XRAY_FDR, CLI_FMT_GPERF, CLI_FMT_PPROF, CLI_FMT_GZIP,
	CLI_FMT_ELF,
};
#define CLI_ACCEPT(f) (1u << (f))
#define CLI_ACCEPT_PERF (CLI_ACCEPT(CLI_FMT_PERF_FILE) | CLI_ACCEPT(CLI_FMT_PERF_PIPE))
#define CLI_ACCEPT_XRAY (CLI_ACCEPT(CLI_FMT_XRAY_BASIC) | CLI_ACCEPT(CLI_FMT_XRAY_FDR))
/* The format of a file's first bytes (any of perfgraft's, or what else
 * it can name); gzip: *inner is what it holds, when it can tell. */
enum cli_fmt cli_sniff(const void *buf, size_t n, enum cli_fmt *inner);
const char *cli_fmt_name(enum cli_fmt f);	/* "a jitdump", ... */
struct cli_input {
	const char *arg;	/* as given ("-" for standard input) */
	const char *name;	/* for messages */
	const char *path;	/* for the readers: arg, "-" or /dev/stdin */
	enum cli_fmt fmt, inner;
	char err[PG_ERRMSG_MAX];	/* why cli_input() failed */
};
/* cli_input flags: the perf.data reader takes "-" itself (a pipe-mode
 * recording stays a stream) */
#define CLI_IN_PERF_STREAM 1u
/* One input of command cmd: a directory, or a format in none of the
 * accept bits, is refused naming what it is (and the command that reads
 * it); want names what cmd reads ("a jitdump").  "-" is standard input,
 * read once: a stream is spooled to a temporary file (in->path is then
 * /dev/stdin) unless it is perf.data for CLI_IN_PERF_STREAM.  A file that
 * cannot be opened is left to the reader's message.  0, -1 or -2 (a
 * usage error), with the message in in->err. */
int cli_input(const char *cmd, const char *arg, unsigned accept, const char *want,
	      unsigned flags, struct cli_input *in);
/* cli_input() and, on failure, its message: 0 or an exit status */
int cli_input_or_say(const char *cmd, const char *arg, unsigned accept, const char *want,
		     unsigned flags, struct cli_input *in);
/* -o FILE for a command that prints: stdout goes to FILE's temporary
 * (mode 0600), renamed into place by cli_output_finish(true) once all is
 * written; "-" or NULL is stdout.  0 or -1 (said). */
int cli_output_to(const char *path);
int cli_output_finish(bool keep);
/* --format text|json into *json; -1 (said) otherwise */
int cli_format(const char *arg, bool *json);
/* the man page of a command, as perf help shows it (main.c) */

int cmd_dump(int argc, char **argv);
int dump_perfdata(const char *path, bool json, struct cli_warnings *w);
int dump_xray(const char *path, bool json, bool time_order, struct cli_warnings *w);
int cmd_elf(int argc, char **argv);
int cmd_inject(int argc, char **argv);
int cmd_xray(int argc, char **argv);
int cmd_gperf(int argc, char **argv);
int dump_gperf(const char *path, bool json, struct cli_warnings *w);
int cmd_symbolize(int argc, char **argv);
int cmd_perf_map(int argc, char **argv);

#endif
