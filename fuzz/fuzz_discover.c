/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the jitdump discovery rule (src/inject/discover.c):
 * is a recorded mmap the marker of a jitdump?
 *
 * Input: byte 0 picks the mapping's protection, the mapping pid, the file
 * name, " (deleted)" and whether the file "moved" (recorded in a missing
 * directory, found through dir_fallback); bytes 1..4 are a pid; with name
 * choice 5 a length byte and that many name bytes follow; the rest is the
 * file's content, written to a private scratch directory (emptied after
 * every input).  The probe then runs three times: without a cache, and
 * twice through one cache, which must all agree.
 *
 * Checked, from the content as written (the harness decodes the header
 * itself):
 *   - the return value is 0 or 1, and how is 0 exactly when it is 0;
 *   - found by its header only when the content starts with the jitdump
 *     magic (either byte order) with a plausible version and size, the
 *     header's pid is the one reported, and (unless perf's name rule also
 *     holds) the mapping is exec and its pid is the header's or 0;
 *   - found by its name only for jit-<P>.dump with P the mapping pid (or
 *     pid 0), or for JavaScriptCore's names when the file is missing;
 *   - other_pid only for a dump whose pid is not the mapping's;
 *   - in_dir only with a dir_fallback, and then the path is in it.
 *
 * Build: see fuzz/README.md; seeds in fuzz/corpus-discover. */
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

#include <perfgraft/jitdump.h>
#include "inject/discover.h"
#include "fuzz_tmpdir.h"
#include "fuzz_touch.h"

#define HDR 40

static uint32_t rd32(const uint8_t *p, int be)
{
	return be ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
		  : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* The oracle: is content a plausible jitdump header, and its pid. */
static int is_dump(const uint8_t *c, size_t n, uint32_t *pid)
{
	int be;

	if (n < HDR)
		return 0;
	if (!memcmp(c, "DTiJ", 4))
		be = 0;
	else if (!memcmp(c, "JiTD", 4))
		be = 1;
	else
		return 0;
	if (rd32(c + 4, be) > 255 || rd32(c + 8, be) < HDR || rd32(c + 8, be) > n)
		return 0;
	*pid = rd32(c + 20, be);
	return 1;
}

/* jit-<digits>.dump with the digits' value (no overflow), else 0. */
static uint32_t perf_name_pid(const char *base)
{
	uint64_t v = 0;
	const char *p;

	if (strncmp(base, "jit-", 4))
		return 0;
	for (p = base + 4; *p >= '0' && *p <= '9'; p++)
		if ((v = v * 10 + (uint64_t)(*p - '0')) > UINT32_MAX)
			return 0;
	if (p == base + 4 || strcmp(p, ".dump"))
		return 0;
	return (uint32_t)v;
}

static void same(const struct pg_jd_found *a, int ra, const struct pg_jd_found *b, int rb)
{
	if (ra != rb || a->how != b->how || a->pid != b->pid || a->name_pid != b->name_pid ||
	    a->in_dir != b->in_dir || a->err != b->err || a->other_pid != b->other_pid ||
	    a->header_read != b->header_read || strcmp(a->path, b->path)) {
		fprintf(stderr, "fuzz_discover: cached and uncached answers differ: %d/%d how %u/%u pid %u/%u path %s / %s\n",
			ra, rb, a->how, b->how, a->pid, b->pid, a->path, b->path);
		abort();
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_tmpdir_make("fuzz_discover", "nothing to fuzz");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[300], file[sizeof(fuzz_tmpdir) + 300], mmap_name[sizeof(fuzz_tmpdir) + 340];
	const uint8_t *content;
	size_t clen, off = 5;
	struct pg_jd_found f, g;
	struct pg_jd_cache *cache;
	uint32_t fpid = 0, hpid = 0, mpid, p;
	int dump, r, r2, exec, deleted, moved, fd, written = 0;
	const char *dir;
	unsigned choice;

	if (!fuzz_have_tmpdir || size < 5)
		return 0;
	exec = data[0] & 1;
	deleted = (data[0] >> 6) & 1;
	moved = (data[0] >> 7) & 1;
	choice = (data[0] >> 3) & 7;
	p = rd32(data + 1, 0);
	if (choice == 5) {	/* a name from the input */
		size_t n = size > off ? data[off++] : 0;

		if (n > size - off)
			n = size - off;
		if (n > sizeof(name) - 1)
			n = sizeof(name) - 1;
		memcpy(name, data + off, n);
		name[n] = '\0';
		off += n;
	}
	content = data + off;
	clen = size - off;
	dump = is_dump(content, clen, &hpid);

	switch ((data[0] >> 1) & 3) {
	case 0: mpid = dump ? hpid : p; break;
	case 1: mpid = (dump ? hpid : p) + 1; break;
	case 2: mpid = 0; break;
	default: mpid = p; break;
	}
	switch (choice) {
	case 0: snprintf(name, sizeof(name), "jit-%u.dump", mpid); break;
	case 1: snprintf(name, sizeof(name), "jit-%u-%u.dump", p & 0xffff, mpid); break;
	case 2: snprintf(name, sizeof(name), "code.bin"); break;
	case 3: snprintf(name, sizeof(name), "jit-%u-%u-Ab3xYz", p & 0xffff, mpid); break;
	case 4: snprintf(name, sizeof(name), "jit-%u.dump", mpid + 1); break;
	case 5: break;
	case 6: snprintf(name, sizeof(name), "jit-%u.dump", p); break;
	default: snprintf(name, sizeof(name), "%s", ""); break;	/* /memfd: below */
	}

	/* the file, when its name can be one */
	if (name[0] && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..")) {
		snprintf(file, sizeof(file), "%s/%s", fuzz_tmpdir, name);
		fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			written = write(fd, content, clen) == (ssize_t)clen;
			close(fd);
		}
	}
	if (choice == 7)
		snprintf(mmap_name, sizeof(mmap_name), "/memfd:jit-%u.dump", mpid);
	else if (moved)
		snprintf(mmap_name, sizeof(mmap_name), "%s/gone/%s", fuzz_tmpdir, name);
	else
		snprintf(mmap_name, sizeof(mmap_name), "%s/%s", fuzz_tmpdir, name);
	if (deleted)
		strncat(mmap_name, " (deleted)", sizeof(mmap_name) - strlen(mmap_name) - 1);
	dir = moved && (p & 0x80000000u) == 0 ? fuzz_tmpdir : NULL;

	r = pg_jd_discover(mmap_name, mpid, exec, dir, NULL, &f);
	sink += touch_str(f.path) + touch_str(f.problem) + f.pid + f.how;

	/* the oracle */
	if (r != 0 && r != 1)
		abort();
	if ((r == 0) != (f.how == 0) || memchr(f.path, '\0', sizeof(f.path)) == NULL)
		abort();
	if (f.how & PG_JD_BY_MAGIC) {
		if (!written || !dump || f.pid != hpid || f.err)
			abort();
		if (!(f.how & PG_JD_BY_NAME) && (!exec || (mpid && hpid != mpid)))
			abort();
	}
	if (f.header_read && (!written || !dump))
		abort();
	if (f.how & PG_JD_BY_NAME) {
		const char *base = strrchr(f.path, '/');

		base = base ? base + 1 : f.path;
		fpid = perf_name_pid(base);
		if (!(fpid && (!mpid || fpid == mpid)) && !f.err)
			abort();	/* only perf's name is taken without a header */
	}
	if (f.other_pid && (r || !dump || !exec || !mpid || hpid == mpid))
		abort();
	if (f.in_dir && (!dir || strncmp(f.path, dir, strlen(dir))))
		abort();
	if (r && !(f.how & PG_JD_BY_NAME) && !dump)
		abort();	/* a marker is known by its header or by its name */

	/* a cache answers the same, the first time and the next */
	cache = pg_jd_cache_new();
	if (cache) {
		r2 = pg_jd_discover(mmap_name, mpid, exec, dir, cache, &g);
		if (r2 != -ENOMEM)
			same(&f, r, &g, r2);
		r2 = pg_jd_discover(mmap_name, mpid, exec, dir, cache, &g);
		if (r2 != -ENOMEM)
			same(&f, r, &g, r2);
		pg_jd_cache_free(cache);
	}
	fuzz_tmpdir_sweep();
	return 0;
}
