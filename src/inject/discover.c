/* SPDX-License-Identifier: MIT */
/* Finding jitdumps in a recording (discover.h).
 *
 * The rule, and why.
 *
 * 1. perf's rule is kept as it is: a recorded mmap of .../jit-<P>.dump
 *    (" (deleted)" allowed), <P> the mapping pid or the mapping pid 0
 *    (system-wide synthesized events), is a marker whatever its protection
 *    and whatever the file holds: perf inject --jit takes it, and so did
 *    perfgraft; a file that turns out missing or damaged is then the
 *    loader's warning, not a silent skip.  When the dump's header names
 *    another pid, the header's pid is used (the caller warns), as before.
 *
 * 2. Any other name: the marker convention every producer follows is an
 *    executable mapping of the dump itself (perf record does not even
 *    record non-exec file maps without -d), so only exec mappings of
 *    absolute paths are candidates; //anon, [vdso], [anon:...], /memfd:
 *    and other pseudo names are not files.  The candidate is a jitdump when
 *    the file is a regular file of at least 40 bytes whose header has the
 *    jitdump magic in either byte order, a version that is a small number
 *    and a header size between 40 bytes and the file's size (what the
 *    reader checks), and the header's pid is the mapping's (or the
 *    mapping pid is 0).  The magic alone names the format; the pid check
 *    keeps perf's guarantee that a process's dump, and not one of another
 *    process that it happened to map, describes its code.  A dump of
 *    another pid is not taken but reported (other_pid), so the caller can
 *    point at --jitdump FILE.
 *    Reading 40 bytes costs one stat, open, read and close per distinct
 *    file name (the cache remembers); stat comes first so that a FIFO or a
 *    device is never opened, and the open is O_NONBLOCK|O_NOCTTY in case
 *    one took the file's place in between (fstat checks again).
 *
 * 3. A file that is gone from the recorded path (moved off the profiled
 *    machine or container) cannot show its magic, so dir_fallback/<base
 *    name> is tried only for names that look like dumps: jit-<P>.dump,
 *    JavaScriptCore's jit-<T>-<P>.dump, and its mkostemp form
 *    jit-<T>-<P>-XXXXXX (WebKit's FileSystem::createDumpFile() falls back
 *    to openTemporaryFile(), which on Linux makes "<prefix>-XXXXXX" and
 *    drops the ".dump" suffix).  The file found there goes through the same
 *    checks.  A JavaScriptCore-named file of the mapping pid that is
 *    missing everywhere is a marker with err ENOENT, so that the user hears
 *    about it as about a missing jit-<P>.dump. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <perfgraft/jitdump.h>
#include "inject/discover.h"
#include "util/util.h"

#define HDR_SIZE 40
#define MAX_VERSION 255		/* perf reads 1, Mono wrote 2: a small number */
#define DELETED " (deleted)"
#define DELETED_LEN (sizeof(DELETED) - 1)

enum kind { NAME_OTHER, NAME_PERF, NAME_JSC };

enum state {
	S_MISSING,	/* stat failed (err) */
	S_NOTREG,	/* not a regular file */
	S_UNREADABLE,	/* open or read failed (err) */
	S_OTHER,	/* a regular file, not a jitdump */
	S_DUMP,		/* a plausible jitdump header */
};

struct outcome {
	enum state state;
	int err;
	bool in_dir;
	uint32_t pid;		/* the header's */
};

struct pg_jd_cache {
	struct pg_strmap names;	/* recorded file name (copied) -> index */
	struct outcome *out;
	size_t cap;
};

/* ---- names ---- */

/* Decimal digits at *p (up to end) with a value in 1..UINT32_MAX: the
 * value, *p moved past them; 0 when there are none or it does not fit. */
static uint32_t number(const char **p, const char *end)
{
	uint64_t v = 0;
	const char *q = *p;

	for (; q < end && *q >= '0' && *q <= '9'; q++)
		if ((v = v * 10 + (uint64_t)(*q - '0')) > UINT32_MAX)
			return 0;
	if (q == *p)
		return 0;
	*p = q;
	return (uint32_t)v;
}

static bool rest_is(const char *p, const char *end, const char *s)
{
	size_t n = strlen(s);

	return (size_t)(end - p) == n && !memcmp(p, s, n);
}

/* mkostemp's XXXXXX: six characters of [A-Za-z0-9] (glibc's set). */
static bool temp_suffix(const char *p, const char *end)
{
	if (end - p != 7 || *p != '-')
		return false;
	for (p++; p < end; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

/* jit-<P>.dump: NAME_PERF; jit-<T>-<P>.dump and jit-<T>-<P>-XXXXXX:
 * NAME_JSC; *pid = <P>. */
static enum kind classify(const char *base, size_t n, uint32_t *pid)
{
	const char *p = base + 4, *end = base + n;
	uint32_t a, b;

	*pid = 0;
	if (n < 4 || memcmp(base, "jit-", 4) || !(a = number(&p, end)))
		return NAME_OTHER;
	if (rest_is(p, end, ".dump")) {
		*pid = a;
		return NAME_PERF;
	}
	if (p == end || *p != '-')
		return NAME_OTHER;
	p++;
	if (!(b = number(&p, end)))
		return NAME_OTHER;
	if (rest_is(p, end, ".dump") || temp_suffix(p, end)) {
		*pid = b;
		return NAME_JSC;
	}
	return NAME_OTHER;
}

/* Names that are not files: perf's //anon, [vdso], [heap], [anon:...],
 * memfd's "/memfd:NAME", relative names. */
static bool pseudo_name(const char *name)
{
	return name[0] != '/' || !strncmp(name, "//anon", 6) || !strncmp(name, "/memfd:", 7);
}

/* ---- files ---- */

static uint32_t rd32(const unsigned char *p, bool be)
{
	return be ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
		  : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* The first 40 bytes of a jitdump of size bytes: magic either way round
 * (the writer's native order: "DTiJ" little-endian, "JiTD" big-endian),
 * version, header size; the pid. */
static bool plausible(const unsigned char *h, uint64_t size, struct outcome *o)
{
	uint32_t version, total;
	bool be;

	if (!pg_jitdump_probe(h, HDR_SIZE))	/* the reader's magic test */
		return false;
	be = rd32(h, true) == PG_JITDUMP_MAGIC;
	version = rd32(h + 4, be);
	total = rd32(h + 8, be);
	if (version > MAX_VERSION || total < HDR_SIZE || total > size)
		return false;
	o->pid = rd32(h + 20, be);
	return true;
}

static void probe_file(const char *path, struct outcome *o)
{
	unsigned char h[HDR_SIZE];
	struct stat st;
	size_t got = 0;
	int fd;

	memset(o, 0, sizeof(*o));
	if (stat(path, &st) < 0) {
		o->state = S_MISSING;
		o->err = errno;
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		o->state = S_NOTREG;
		return;
	}
	if (st.st_size < HDR_SIZE) {	/* /proc and /sys files say 0 */
		o->state = S_OTHER;
		return;
	}
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		o->state = S_UNREADABLE;
		o->err = errno;
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		o->state = S_NOTREG;
		return;
	}
	while (got < sizeof(h)) {
		ssize_t r = pread(fd, h + got, sizeof(h) - got, (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			o->err = errno;
			close(fd);
			o->state = S_UNREADABLE;
			return;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	o->state = got == sizeof(h) && plausible(h, (uint64_t)st.st_size, o) ? S_DUMP : S_OTHER;
}

/* The recorded path, then dir/base for dump-like names that are not
 * there.  dirpath receives dir/base (empty when it was not tried). */
static void probe(const char *path, const char *base, bool dump_like, const char *dir,
		  char *dirpath, struct outcome *o)
{
	struct outcome d;
	int n;

	dirpath[0] = '\0';
	probe_file(path, o);
	if (o->state != S_MISSING || !dir || !dump_like)
		return;
	n = snprintf(dirpath, PATH_MAX, "%s/%s", dir, base);
	if (n < 0 || n >= PATH_MAX) {
		dirpath[0] = '\0';
		return;
	}
	probe_file(dirpath, &d);
	if (d.state != S_MISSING) {
		*o = d;
		o->in_dir = true;
	}
}

/* ---- cache ---- */

struct pg_jd_cache *pg_jd_cache_new(void)
{
	return calloc(1, sizeof(struct pg_jd_cache));
}

void pg_jd_cache_free(struct pg_jd_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->names.n; i++)
		free((char *)c->names.keys[i]);
	pg_strmap_free(&c->names);
	free(c->out);
	free(c);
}

/* ---- the rule ---- */

const char *pg_jd_how_str(unsigned how)
{
	switch (how & (PG_JD_BY_NAME | PG_JD_BY_MAGIC)) {
	case PG_JD_BY_NAME:
		return "its name (jit-PID.dump)";
	case PG_JD_BY_MAGIC:
		return "its header (jitdump magic and the mapping's pid)";
	case PG_JD_BY_NAME | PG_JD_BY_MAGIC:
		return "its name (jit-PID.dump) and header";
	default:
		return "nothing";
	}
}

int pg_jd_discover(const char *mmap_filename, uint32_t mmap_pid, bool exec,
		   const char *dir_fallback, struct pg_jd_cache *cache,
		   struct pg_jd_found *f)
{
	char path[PATH_MAX], dirpath[PATH_MAX];
	const char *base;
	struct outcome o;
	enum kind kind;
	bool perf_named, pid_ok;
	size_t n;

	if (!mmap_filename || !f)
		return -EINVAL;
	memset(f, 0, sizeof(*f));
	n = strlen(mmap_filename);
	if (n > DELETED_LEN && !strcmp(mmap_filename + n - DELETED_LEN, DELETED))
		n -= DELETED_LEN;
	if (!n || n >= sizeof(path))
		return 0;
	memcpy(path, mmap_filename, n);
	path[n] = '\0';
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	kind = classify(base, strlen(base), &f->name_pid);
	pid_ok = kind != NAME_OTHER && (!mmap_pid || f->name_pid == mmap_pid);
	perf_named = kind == NAME_PERF && pid_ok;
	if (!perf_named && (!exec || pseudo_name(path)))
		return 0;

	if (cache) {
		char *key;
		bool added;
		long idx;

		/* room for one more outcome first: a key once in the map
		 * cannot be taken out again */
		if (!pg_grow((void **)&cache->out, &cache->cap, cache->names.n + 1,
			     sizeof(*cache->out)) || !(key = strdup(mmap_filename)))
			return -ENOMEM;
		idx = pg_strmap_intern(&cache->names, key, &added);
		if (idx < 0 || !added)
			free(key);
		if (idx < 0)
			return -ENOMEM;
		if (added) {
			probe(path, base, kind != NAME_OTHER, dir_fallback, dirpath, &o);
			cache->out[idx] = o;
		} else {
			o = cache->out[idx];
			dirpath[0] = '\0';
			if (o.in_dir && dir_fallback)	/* as probe() made it: it fitted */
				snprintf(dirpath, sizeof(dirpath), "%s/%s", dir_fallback, base);
		}
	} else {
		probe(path, base, kind != NAME_OTHER, dir_fallback, dirpath, &o);
	}

	snprintf(f->path, sizeof(f->path), "%s", o.in_dir ? dirpath : path);
	f->in_dir = o.in_dir;
	f->header_read = o.state == S_DUMP;

	if (perf_named) {
		f->how = PG_JD_BY_NAME;
		f->pid = f->name_pid;
		switch (o.state) {
		case S_DUMP:
			f->how |= PG_JD_BY_MAGIC;
			f->pid = o.pid;
			break;
		case S_OTHER:	/* the loader says what is wrong with it */
			break;
		case S_NOTREG:
			f->err = EINVAL;
			f->problem = "not a regular file";
			break;
		case S_MISSING:
		case S_UNREADABLE:
			f->err = o.err ? o.err : EIO;
			f->problem = strerror(f->err);
			break;
		}
		return 1;
	}
	if (o.state == S_DUMP) {
		f->pid = o.pid;
		if (!mmap_pid || o.pid == mmap_pid) {
			f->how = PG_JD_BY_MAGIC;
			return 1;
		}
		f->other_pid = true;
		return 0;
	}
	if (kind == NAME_JSC && pid_ok && (o.state == S_MISSING || o.state == S_UNREADABLE)) {
		f->how = PG_JD_BY_NAME;
		f->pid = f->name_pid;
		f->err = o.err ? o.err : EIO;
		f->problem = strerror(f->err);
		return 1;
	}
	return 0;
}
