/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for inject itself (pg_inject): a perf.data, file or
 * pipe form, with up to four jitdumps, through the whole path: discovery
 * of the dumps by their markers, the images, the samples' words noted for
 * the memory layout's carrying (file mode, user stacks), the merge, and
 * the output in file or pipe form.
 *
 * Input:  FLAGS PERFDATA [SEP DUMP]...   (SEP is the 8 bytes "JITDUMP:")
 *
 * Each DUMP is written to the scratch directory as jit-<pid>.dump, <pid>
 * its header's (either byte order; 4242 when it has no header), or, when
 * that name is taken, jit-<k>-<pid>.dump (JavaScriptCore's form, also
 * dump-like).  A marker naming jit-<pid>.dump anywhere (the seeds say
 * /nonexistent-perfgraft-fuzz/jit-4242.dump) finds it through jitdump_dir.
 * FLAGS, bit by bit:
 *   0-1  the output: 0 a file (renamed into place at the end, images in
 *        DIR/img), 1 /dev/null (written in place; a stream to inject: its
 *        images are committed as each dump is read), 2 "-" (standard
 *        output, sent to /dev/null for the call: the pipe form), 3 a file
 *        with the default image directory (OUTPUT.d)
 *   2    the input is read from standard input, a pipe holding the
 *        perf.data (the reader's streaming path), when it fits one
 *   3    every dump is also given by hand (opts.jitdumps)
 *   4    no jitdump_dir: markers find dumps only at their recorded path
 *   5    the packed layout (else the default, memory)
 *   6    per_function
 *   7    --cfi-layout perf-5.19 and plain (uncompressed) DWARF sections
 * A DUMP may hold the 8 bytes "JITCUT::": in pipe mode (bit 2) only what
 * comes before the first is written at first, and each time inject looks
 * at the live dump again (src/inject/livehook.h) the next piece is
 * appended, all that is left on its last look, so that the run reads the
 * dump in several parts as when its JIT writes on (up to MAX_CUTS); in
 * file mode the pieces are written together, without the separators.
 * Everything the run writes is removed after it (the scratch directory is
 * emptied, image directories too); the stats' image_dir is freed.  With
 * FUZZ_INJECT_VERBOSE in the environment each run prints what it did
 * (dumps, LOADs, carried maps, or the error), to check what seeds reach.
 *
 * Build: see fuzz/README.md; seeds in fuzz/corpus-inject
 * (fuzz/make-inject-seeds.py). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <perfgraft/inject.h>
#include "inject/livehook.h"
#include "fuzz_tmpdir.h"
#include "fuzz_touch.h"

#define SEP "JITDUMP:"
#define SEP_LEN 8
#define MAX_DUMPS 4
#define CUT "JITCUT::"
#define CUT_LEN 8
#define MAX_CUTS 16
#define PATH_LEN (sizeof(fuzz_tmpdir) + 64)

static int write_flags(const char *path, const uint8_t *d, size_t n, int how)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | how, 0600);
	ssize_t w = 0;

	if (fd < 0)
		return -1;
	if (n)
		w = write(fd, d, n);
	close(fd);
	return w == (ssize_t)n ? 0 : -1;
}

static int write_file(const char *path, const uint8_t *d, size_t n)
{
	return write_flags(path, d, n, O_TRUNC);
}

/* A dump's pieces not yet written (JITCUT::), for the live hook. */
static struct grow {
	dev_t dev;
	ino_t ino;
	const uint8_t *piece[MAX_CUTS];
	size_t len[MAX_CUTS];
	unsigned n, next;
} grows[MAX_DUMPS];
static size_t ngrows;

/* Splits a dump at its JITCUT:: separators into g (pieces, at most
 * MAX_CUTS: the last takes the rest, separators and all). */
static void split_dump(struct grow *g, const uint8_t *d, size_t n)
{
	const uint8_t *end = d + n;

	memset(g, 0, sizeof(*g));
	while (g->n < MAX_CUTS) {
		const uint8_t *c = g->n + 1 < MAX_CUTS ?
			memmem(d, (size_t)(end - d), CUT, CUT_LEN) : NULL;

		g->piece[g->n] = d;
		g->len[g->n++] = (size_t)((c ? c : end) - d);
		if (!c)
			break;
		d = c + CUT_LEN;
	}
}

/* pg_inject_live_hook: the dump at path grows by its next piece, by all
 * of them at its last look. */
static void grow_dump(const char *path, bool final)
{
	struct stat sb;

	if (stat(path, &sb) != 0)
		return;
	for (size_t i = 0; i < ngrows; i++) {
		struct grow *g = &grows[i];

		if (g->dev != sb.st_dev || g->ino != sb.st_ino)
			continue;
		while (g->next < g->n) {
			(void)write_flags(path, g->piece[g->next], g->len[g->next], O_APPEND);
			g->next++;
			if (!final)
				break;
		}
		return;
	}
}

/* The pid a jitdump header names (magic, version, size, elf_mach, pad1,
 * pid), 4242 when there is none. */
static uint32_t dump_pid(const uint8_t *d, size_t n)
{
	if (n >= 24 && !memcmp(d, "DTiJ", 4))
		return (uint32_t)d[20] | (uint32_t)d[21] << 8 | (uint32_t)d[22] << 16 |
		       (uint32_t)d[23] << 24;
	if (n >= 24 && !memcmp(d, "JiTD", 4))
		return (uint32_t)d[23] | (uint32_t)d[22] << 8 | (uint32_t)d[21] << 16 |
		       (uint32_t)d[20] << 24;
	return 4242;
}

/* Removes a directory the run made and the files in it (images, and the
 * hidden temporaries of a failed run, which the library removes itself). */
static void remove_dir(const char *path)
{
	fuzz_sweep_dir(path);
	(void)rmdir(path);
}

/* Standard input from a pipe holding n bytes, or -1 (the pipe cannot
 * hold them all: the caller reads the file).  Returns the saved stdin. */
static int stdin_from(const uint8_t *d, size_t n)
{
	int p[2], saved;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	if (n > 65536)
		(void)fcntl(p[1], F_SETPIPE_SZ, (int)(n < (1u << 20) ? n : (1u << 20)));
	(void)fcntl(p[1], F_SETFL, O_NONBLOCK);
	if (n && write(p[1], d, n) != (ssize_t)n) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	close(p[1]);
	saved = dup(STDIN_FILENO);
	if (saved < 0 || dup2(p[0], STDIN_FILENO) < 0) {
		if (saved >= 0)
			close(saved);
		close(p[0]);
		return -1;
	}
	close(p[0]);
	return saved;
}

static int redirect(int fd, const char *to)
{
	int saved = dup(fd), t = open(to, O_WRONLY | O_CLOEXEC);

	if (saved < 0 || t < 0 || dup2(t, fd) < 0) {
		if (saved >= 0)
			close(saved);
		saved = -1;
	}
	if (t >= 0)
		close(t);
	return saved;
}

static void restore(int fd, int saved)
{
	if (saved >= 0) {
		dup2(saved, fd);
		close(saved);
	}
}

/* A dump's image set keeps the pg_diag it was made with until the end of
 * the run: a pointer into a returned stack frame there is read only when
 * a late warning comes (this harness found one: seed 14), so ASan is told
 * to look for that. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_stack_use_after_return=1";
}

static int verbose;	/* FUZZ_INJECT_VERBOSE set: one line a run */

static void found(void *ctx, const char *path, uint32_t pid, const char *how)
{
	(void)ctx;
	sink += touch_str(path) + pid + touch_str(how);
}

static void progress(void *ctx, double done)
{
	(void)ctx;
	sink += done >= 0 && done <= 1.5;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	verbose = getenv("FUZZ_INJECT_VERBOSE") != NULL;
	pg_inject_live_hook = grow_dump;
	fuzz_tmpdir_make("fuzz_inject", "nothing to fuzz");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char in[PATH_LEN], out[PATH_LEN], img[PATH_LEN], outd[PATH_LEN + 4];
	char dumps[MAX_DUMPS][PATH_LEN];
	const char *dump_list[MAX_DUMPS];
	const uint8_t *part, *end;
	struct pg_inject_stats st = { .sz = sizeof(st) };
	struct pg_diag diag = { 0 };
	/* no build-id cache: a fuzzer must not fill the user's ~/.debug */
	struct pg_inject_opts o = { .sz = sizeof(o), .no_buildid_cache = true };
	size_t ndumps = 0, pd_len;
	int saved_in = -1, saved_out = -1;
	uint8_t flags;
	unsigned mode;
	int ret;

	ngrows = 0;
	if (!fuzz_have_tmpdir || size < 1)
		return 0;
	flags = data[0];
	mode = flags & 3;
	part = data + 1;
	end = data + size;

	/* the perf.data, up to the first separator; then the dumps */
	{
		const uint8_t *s = memmem(part, (size_t)(end - part), SEP, SEP_LEN);

		pd_len = (size_t)((s ? s : end) - part);
		snprintf(in, sizeof(in), "%s/in.data", fuzz_tmpdir);
		if (write_file(in, part, pd_len))
			goto out;
		part = s ? s + SEP_LEN : NULL;
	}
	while (part && ndumps < MAX_DUMPS) {
		const uint8_t *s = memmem(part, (size_t)(end - part), SEP, SEP_LEN);
		size_t n = (size_t)((s && ndumps + 1 < MAX_DUMPS ? s : end) - part);
		uint32_t pid = dump_pid(part, n);
		char *p = dumps[ndumps];
		struct stat sb;
		struct grow *g = &grows[ndumps];
		int bad = 0;

		snprintf(p, PATH_LEN, "%s/jit-%u.dump", fuzz_tmpdir, pid);
		if (stat(p, &sb) == 0)
			snprintf(p, PATH_LEN, "%s/jit-%zu-%u.dump", fuzz_tmpdir, ndumps, pid);
		split_dump(g, part, n);
		/* pipe mode: the first piece now, the rest as inject looks again */
		g->next = flags & 4 ? 1 : g->n;
		bad |= write_file(p, g->piece[0], g->len[0]);
		for (unsigned k = 1; k < g->next; k++)
			bad |= write_flags(p, g->piece[k], g->len[k], O_APPEND);
		if (bad || stat(p, &sb) != 0)
			goto out;
		g->dev = sb.st_dev;
		g->ino = sb.st_ino;
		dump_list[ndumps++] = p;
		ngrows = ndumps;
		part = s && ndumps < MAX_DUMPS ? s + SEP_LEN : NULL;
	}

	snprintf(out, sizeof(out), "%s/out.data", fuzz_tmpdir);
	snprintf(img, sizeof(img), "%s/img", fuzz_tmpdir);
	snprintf(outd, sizeof(outd), "%s.d", out);
	o.input = in;
	o.output = mode == 1 ? "/dev/null" : mode == 2 ? "-" : out;
	o.image_dir = mode == 3 ? NULL : img;
	if (flags & 8) {
		o.jitdumps = dump_list;
		o.njitdumps = ndumps;
	}
	o.jitdump_dir = flags & 16 ? NULL : fuzz_tmpdir;
	o.layout = flags & 32 ? PG_INJECT_LAYOUT_PACKED : PG_INJECT_LAYOUT_DEFAULT;
	o.per_function = flags & 64;
	o.cfi_layout = flags & 128 ? PG_CFI_LAYOUT_PERF_5_19 : PG_CFI_LAYOUT_STANDARD;
	o.plain_debug = flags & 128;
	o.found = found;
	o.progress = progress;

	if (flags & 4) {
		saved_in = stdin_from(data + 1, pd_len);
		if (saved_in >= 0)
			o.input = "-";
	}
	if (mode == 2) {
		fflush(stdout);
		saved_out = redirect(STDOUT_FILENO, "/dev/null");
		if (saved_out < 0)
			o.output = "/dev/null";	/* never the fuzzer's own stdout */
	}
	ret = pg_inject(&o, &diag, &st);
	if (ret < 0)
		sink += touch_str(diag.err);
	else
		sink += st.records_out + st.images + st.carried;
	restore(STDOUT_FILENO, saved_out);
	restore(STDIN_FILENO, saved_in);
	if (verbose)	/* what a seed reaches */
		fprintf(stderr, "fuzz_inject: flags 0x%02x, %zu dumps: %s; %llu dumps (%llu failed), %llu LOAD, %llu MOVE, %llu images, %llu carried, %llu records out, %llu live reads\n",
			flags, ndumps, ret < 0 ? diag.err : "ok",
			(unsigned long long)st.dumps, (unsigned long long)st.dumps_failed,
			(unsigned long long)st.loads, (unsigned long long)st.moves,
			(unsigned long long)st.images, (unsigned long long)st.carried,
			(unsigned long long)st.records_out, (unsigned long long)st.live_reads);
	free(st.image_dir);
out:
	remove_dir(img);
	remove_dir(outd);
	fuzz_tmpdir_sweep();
	return 0;
}
