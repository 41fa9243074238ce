/* SPDX-License-Identifier: MIT */
/* The grammar every command shares for its inputs and printed output:
 * one sniffing function that names each of perfgraft's formats (so that a
 * command given another command's input says which command reads it),
 * "-" as standard input (a pipe is sniffed like a file: its first bytes
 * are read, then handed on), a directory refused with one message, and
 * -o FILE / --format for the commands that print data. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libgen.h>
#include <sys/stat.h>
#include <zlib.h>

#include <perfgraft/gperf.h>
#include <perfgraft/jitdump.h>
#include <perfgraft/perfdata.h>
#include <perfgraft/xray.h>
#include "cli/cli.h"
#include "util/util.h"

#define HEAD 64		/* bytes sniffed from a stream: every probe needs fewer */
#define FILE_HEAD 4096	/* from a file: enough of a gzip stream to inflate a little */

static const char *const fmt_names[] = {
	[CLI_FMT_UNKNOWN] = "data of no format perfgraft reads",
	[CLI_FMT_EMPTY] = "an empty file",
	[CLI_FMT_JITDUMP] = "a jitdump",
	[CLI_FMT_PERF_FILE] = "a perf.data file",
	[CLI_FMT_PERF_PIPE] = "a pipe-mode perf.data",
	[CLI_FMT_XRAY_BASIC] = "an XRay basic-mode trace",
	[CLI_FMT_XRAY_FDR] = "an XRay FDR-mode trace",
	[CLI_FMT_GPERF] = "a gperftools CPU profile",
	[CLI_FMT_PPROF] = "a pprof protobuf profile (gzip)",
	[CLI_FMT_GZIP] = "gzip-compressed data",
	[CLI_FMT_ELF] = "an ELF file",
};

const char *cli_fmt_name(enum cli_fmt f)
{
	return f < sizeof(fmt_names) / sizeof(fmt_names[0]) ? fmt_names[f] : fmt_names[0];
}

/* The command that reads a format, as a hint after "PATH: FORMAT". */
static const char *reader_hint(enum cli_fmt f)
{
	switch (f) {
	case CLI_FMT_JITDUMP:
		return "perfgraft elf, symbolize and perf-map read it, perfgraft inject -i perf.data --jitdump FILE injects it";
	case CLI_FMT_PERF_FILE:
	case CLI_FMT_PERF_PIPE:
		return "perfgraft inject reads it (-i FILE)";
	case CLI_FMT_XRAY_BASIC:
	case CLI_FMT_XRAY_FDR:
		return "perfgraft xray converts it";
	case CLI_FMT_GPERF:
		return "perfgraft gperf converts it";
	case CLI_FMT_PPROF:
		return "perfgraft gperf reads the gperftools profile itself (the CPUPROFILE= file pprof was given), not pprof's protobuf";
	case CLI_FMT_GZIP:
		return "decompress it first";
	case CLI_FMT_ELF:
		return "perfgraft xray takes an instrumented binary as -b BINARY";
	default:
		return NULL;
	}
}

static enum cli_fmt sniff_plain(const uint8_t *p, size_t n)
{
	if (n == 0)
		return CLI_FMT_EMPTY;
	if (pg_jitdump_probe(p, n))
		return CLI_FMT_JITDUMP;
	if (n >= 8 && (!memcmp(p, "PERFILE2", 8) || !memcmp(p, "2ELIFREP", 8) ||
		       !memcmp(p, "PERFFILE", 8))) {
		/* the header's size: 16 is pipe mode (perf's PIPE_HDR) */
		if (n >= 16 && ((p[8] == 16 && !p[9] && !memcmp(p + 9, "\0\0\0\0\0\0", 6)) ||
				(p[15] == 16 && !memcmp(p + 8, "\0\0\0\0\0\0\0", 7))))
			return CLI_FMT_PERF_PIPE;
		return CLI_FMT_PERF_FILE;
	}
	if (n >= 4 && !memcmp(p, "\177ELF", 4))
		return CLI_FMT_ELF;
	/* before XRay: a gperftools header's zeros read as XRay version 0 */
	if (pg_gperf_probe(p, n))
		return CLI_FMT_GPERF;
	if (pg_xray_probe(p, n)) {
		/* the type, in the header's byte order (the probe found one) */
		unsigned t = p[2] | p[3] << 8, v = p[0] | p[1] << 8;

		if (!((t == PG_XRAY_FDR || t == PG_XRAY_BASIC) && v >= 1 && v <= 5))
			t = p[3] | p[2] << 8;
		return t == PG_XRAY_FDR ? CLI_FMT_XRAY_FDR : CLI_FMT_XRAY_BASIC;
	}
	return CLI_FMT_UNKNOWN;
}

enum cli_fmt cli_sniff(const void *buf, size_t n, enum cli_fmt *inner)
{
	const uint8_t *p = buf;
	uint8_t out[64];
	z_stream z = { 0 };
	enum cli_fmt f;

	*inner = CLI_FMT_UNKNOWN;
	if (n < 3 || p[0] != 0x1f || p[1] != 0x8b || p[2] != 8)
		return sniff_plain(p, n);
	/* gzip: what it holds, from its first bytes (pprof writes its
	 * protobuf gzipped; its first field is 1, sample_type, a message) */
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return CLI_FMT_GZIP;
	z.next_in = (Bytef *)p;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = sizeof(out);
	(void)inflate(&z, Z_SYNC_FLUSH);
	n = sizeof(out) - z.avail_out;
	inflateEnd(&z);
	if (n >= 3 && out[0] == 0x0a && out[1] >= 2 && out[1] < 0x80 && out[2] == 0x08)
		return CLI_FMT_PPROF;
	f = n ? sniff_plain(out, n) : CLI_FMT_UNKNOWN;
	if (f != CLI_FMT_UNKNOWN && f != CLI_FMT_EMPTY)
		*inner = f;
	return CLI_FMT_GZIP;
}

static int say(struct cli_input *in, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int say(struct cli_input *in, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(in->err, sizeof(in->err), fmt, ap);
	va_end(ap);
	return ret;
}

/* ---- standard input ---- */

static bool stdin_taken;

/* A file for what comes on standard input: unnamed (O_TMPFILE, else a
 * name removed at once), in $TMPDIR or /tmp.  -1 with errno. */
static int spool_file(void)
{
	const char *dir = getenv("TMPDIR");
	char *name;
	int fd;

	if (!dir || !*dir)
		dir = "/tmp";
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
	if (asprintf(&name, "%s/perfgraft-stdin-XXXXXX", dir) < 0)
		return -1;
	fd = mkostemp(name, O_CLOEXEC);
	if (fd >= 0)
		unlink(name);
	free(name);
	return fd;
}

/* Writes head and the rest of standard input into a file that then is
 * standard input: the readers map it as they map any file. */
static int spool_stdin(struct cli_input *in, const uint8_t *head, size_t n, const char *cmd)
{
	static uint8_t buf[1 << 16];
	int fd = spool_file();
	ssize_t r;

	if (fd < 0 || pg_pwrite_all(fd, head, n, 0) < 0)
		goto fail;
	for (uint64_t off = n;; off += (uint64_t)r) {
		r = read(STDIN_FILENO, buf, sizeof(buf));
		if (r < 0 && errno == EINTR) {
			r = 0;
			continue;
		}
		if (r < 0) {
			say(in, -1, "standard input: %s", strerror(errno));
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		if (pg_pwrite_all(fd, buf, (size_t)r, off) < 0)
			goto fail;
	}
	if (dup2(fd, STDIN_FILENO) < 0)
		goto fail;
	close(fd);
	return 0;
fail:
	say(in, -1, "standard input: perfgraft %s reads it into a temporary file in $TMPDIR or /tmp (it needs a file it can map), which failed: %s",
	    cmd, strerror(errno ? errno : EIO));
	if (fd >= 0)
		close(fd);
	return -1;
}

struct relay {
	int from, to;
	uint8_t head[HEAD];
	size_t n;
};

/* all n bytes to a pipe: false when the reader went away (EPIPE) */
static bool write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static void *relay_run(void *arg)
{
	struct relay *r = arg;
	static uint8_t buf[1 << 16];
	ssize_t n;

	if (!write_all(r->to, r->head, r->n))
		goto out;
	/* pipe to pipe without a copy through user space, where it can */
	for (;;) {
		n = splice(r->from, NULL, r->to, NULL, 1 << 20, SPLICE_F_MOVE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
	}
	if (n < 0 && (errno == EINVAL || errno == ENOSYS))
		for (;;) {
			n = read(r->from, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0 || !write_all(r->to, buf, (size_t)n))
				break;
		}
out:
	close(r->to);
	close(r->from);
	free(r);
	return NULL;
}

/* A stream the reader reads as a stream (pipe-mode perf.data): a thread
 * hands on the bytes sniffed, then the rest, through a new pipe that is
 * standard input; a live recording stays live. */
static int relay_stdin(struct cli_input *in, const uint8_t *head, size_t n)
{
	struct relay *r = calloc(1, sizeof(*r));
	sigset_t all, old;
	pthread_t t;
	int p[2], err;

	if (!r || pipe2(p, O_CLOEXEC) < 0) {
		free(r);
		return say(in, -1, "standard input: %s", strerror(errno));
	}
	r->from = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
	memcpy(r->head, head, n);
	r->n = n;
	r->to = p[1];
	if (r->from < 0 || dup2(p[0], STDIN_FILENO) < 0) {
		say(in, -1, "standard input: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		if (r->from >= 0)
			close(r->from);
		free(r);
		return -1;
	}
	close(p[0]);
	/* fewer switches between the threads (the default is 64 KiB) */
	(void)fcntl(r->to, F_SETPIPE_SZ, 1 << 20);
	/* signals are the main thread's (cleanup); a write to a reader that
	 * stopped is EPIPE here, not SIGPIPE */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&t, NULL, relay_run, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		say(in, -1, "standard input: %s", strerror(err));
		close(r->to);
		close(r->from);
		free(r);
		return -1;
	}
	pthread_detach(t);
	return 0;
}

/* Up to HEAD bytes from fd without losing them for the reader: pread on a
 * file; from a stream, read (the caller hands them on). */
static ssize_t read_head(int fd, bool stream, uint8_t *head)
{
	size_t n = 0;

	if (!stream) {
		ssize_t r;

		do
			r = pread(fd, head, FILE_HEAD, 0);
		while (r < 0 && errno == EINTR);
		return r;
	}
	while (n < HEAD) {
		ssize_t r = read(fd, head + n, HEAD - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	return (ssize_t)n;
}

/* Whether a format told by a short probe is sure enough to refuse the
 * input for: a gperftools header's version slot (its third) is 0, which a
 * perf.data header whose magic was zeroed (size 104, then attr_size) is
 * not; such a file goes on to its reader's "bad magic". */
static bool confident(enum cli_fmt f, const uint8_t *p, size_t n)
{
	static const uint8_t zero[8];
	unsigned ws;

	if (f != CLI_FMT_GPERF)
		return true;
	ws = memcmp(p, zero, 8) ? 4 : 8;	/* as the probe tells them */
	return n >= 3 * ws && !memcmp(p + 2 * ws, zero, ws);
}

static int mismatch(struct cli_input *in, const char *cmd, const char *want)
{
	const char *hint = reader_hint(in->fmt);

	if (in->fmt == CLI_FMT_GZIP && in->inner != CLI_FMT_UNKNOWN)
		return say(in, -1, "%s: offset 0: gzip-compressed data holding %s, not %s: decompress it (gunzip) first; %s",
			   in->name, cli_fmt_name(in->inner), want, reader_hint(in->inner));
	/* "offset 0:" as every message on a file's bytes: what is there */
	return say(in, -1, "%s: offset 0: %s, not %s (what perfgraft %s reads)%s%s", in->name,
		   cli_fmt_name(in->fmt), want, cmd, hint ? "; " : "", hint ? hint : "");
}

int cli_input(const char *cmd, const char *arg, unsigned accept, const char *want,
	      unsigned flags, struct cli_input *in)
{
	uint8_t head[FILE_HEAD];
	struct stat st;
	bool is_stdin = !strcmp(arg, "-");
	bool stream;
	ssize_t n;
	int fd;

	memset(in, 0, sizeof(*in));
	in->arg = arg;
	in->name = is_stdin ? "standard input" : arg;
	in->path = arg;
	if (is_stdin) {
		if (stdin_taken)
			return say(in, -2, "standard input (-) can be read only once");
		stdin_taken = true;
		fd = STDIN_FILENO;
		if (fstat(fd, &st) < 0)
			return say(in, -1, "standard input: %s", strerror(errno));
	} else {
		/* a missing file, a FIFO, a device: the reader says what it is */
		if (stat(arg, &st) < 0)
			return 0;
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
			return 0;
		fd = -1;
	}
	if (S_ISDIR(st.st_mode))
		return say(in, -1, "%s: is a directory (perfgraft %s reads %s)", in->name, cmd, want);
	stream = !S_ISREG(st.st_mode);
	if (!is_stdin) {
		fd = open(arg, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return 0;	/* the reader's message */
	}
	n = read_head(fd, stream, head);
	if (!is_stdin)
		close(fd);
	if (n < 0)
		return say(in, -1, "%s: %s", in->name, strerror(errno));
	in->fmt = cli_sniff(head, (size_t)n, &in->inner);
	if (in->fmt != CLI_FMT_UNKNOWN && in->fmt != CLI_FMT_EMPTY && !(accept & (1u << in->fmt)) &&
	    confident(in->fmt, head, (size_t)n))
		return mismatch(in, cmd, want);
	if (!is_stdin)
		return 0;
	/* standard input: the name the readers open */
	if ((flags & CLI_IN_PERF_STREAM) &&
	    (in->fmt == CLI_FMT_PERF_PIPE || in->fmt == CLI_FMT_PERF_FILE ||
	     in->fmt == CLI_FMT_UNKNOWN || in->fmt == CLI_FMT_EMPTY)) {
		/* the perf.data reader takes "-" itself: it maps a file and
		 * reads a stream; a file-mode perf.data in a pipe is spooled */
		if (stream && in->fmt == CLI_FMT_PERF_FILE)
			return spool_stdin(in, head, (size_t)n, cmd);
		return stream ? relay_stdin(in, head, (size_t)n) : 0;
	}
	in->path = "/dev/stdin";
	cli_stdin_read_as(in->path);
	if (stream)
		return spool_stdin(in, head, (size_t)n, cmd);
	return 0;
}

/* ---- printed output ---- */

static struct pg_outfile out_file = { .fd = -1 };
static const char *out_name;

int cli_output_to(const char *path)
{
	struct pg_diag d = { 0 };
	char *dc, *bc;
	int dirfd, ret = -1;

	if (!path || !strcmp(path, "-"))
		return 0;
	dc = strdup(path);
	bc = strdup(path);
	if (!dc || !bc) {
		cli_error("out of memory");
		goto out;
	}
	dirfd = open(dirname(dc), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		cli_error("%s: %s", path, strerror(errno));
		goto out;
	}
	/* 0600 as perf writes perf.data: what is printed holds addresses */
	if (pg_outfile_open_mode(&out_file, dirfd, basename(bc), 0600, false, &d) < 0) {
		cli_error("%s", d.err);
		close(dirfd);
		goto out;
	}
	fflush(stdout);
	if (dup2(out_file.fd, STDOUT_FILENO) < 0) {
		cli_error("%s: %s", path, strerror(errno));
		pg_outfile_abort(&out_file);
		close(dirfd);
		goto out;
	}
	out_name = path;
	ret = 0;
out:
	free(dc);
	free(bc);
	return ret;
}

int cli_output_finish(bool keep)
{
	struct pg_diag d = { 0 };
	int dirfd = out_file.dirfd;

	if (!out_name)
		return 0;
	out_name = NULL;
	if (keep && !out_file.direct && fsync(out_file.fd) < 0 && errno != EINVAL) {
		cli_error("writing failed: %s", strerror(errno));
		keep = false;
	}
	if (!keep) {
		pg_outfile_abort(&out_file);
		close(dirfd);
		return -1;
	}
	if (pg_outfile_commit(&out_file, &d) < 0) {
		cli_error("%s", d.err);
		close(dirfd);
		return -1;
	}
	close(dirfd);
	return 0;
}

int cli_format(const char *arg, bool *json)
{
	if (!strcmp(arg, "json"))
		*json = true;
	else if (!strcmp(arg, "text"))
		*json = false;
	else {
		cli_error("--format takes text or json, not '%s'", arg);
		return -1;
	}
	return 0;
}

int cli_input_or_say(const char *cmd, const char *arg, unsigned accept, const char *want,
		     unsigned flags, struct cli_input *in)
{
	int ret = cli_input(cmd, arg, accept, want, flags, in);

	if (ret < 0)
		cli_error("%s", in->err);
	return ret == -2 ? EXIT_USAGE : ret < 0 ? EXIT_BADINPUT : 0;
}
