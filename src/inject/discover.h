/* SPDX-License-Identifier: MIT */
/* Finding jitdumps in a recording: is a recorded mmap the marker of a
 * jitdump, and which file is it?
 *
 * JITs announce their dump by mapping it PROT_EXEC, so that perf record
 * writes an MMAP/MMAP2 naming it.  perf's rule (a file named exactly
 * jit-<pid>.dump, <pid> the mapping process) misses real producers:
 * JavaScriptCore (Bun, WebKit) names it jit-<tid>-<pid>.dump, or, without a
 * dump directory, a mkostemp file jit-<tid>-<pid>-XXXXXX.  So a mapping is
 * also a marker when the file it names IS a jitdump of that process: its
 * header has the jitdump magic (either byte order), a plausible version and
 * header size, and the mapping's pid.  The rule in full is in discover.c.
 *
 * Internal to the library (not installed, not exported). */
#ifndef PG_INJECT_DISCOVER_H
#define PG_INJECT_DISCOVER_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* How a marker was recognised (bits of pg_jd_found.how). */
#define PG_JD_BY_NAME 1u	/* jit-<pid>.dump of the mapping pid: perf's rule */
#define PG_JD_BY_MAGIC 2u	/* the file's header: jitdump magic, pid of the mapping */

struct pg_jd_found {
	/* The file to read: the recorded path (" (deleted)" removed), or
	 * dir_fallback/<base name> when in_dir.  For a marker whose file is
	 * missing (err ENOENT): the recorded path. */
	char path[PATH_MAX];
	unsigned how;		/* PG_JD_BY_* bits; 0 when not a marker */
	uint32_t pid;		/* the header's pid when the header was read,
				 * else the pid in the name */
	uint32_t name_pid;	/* <pid> of a dump-like name (jit-<pid>.dump,
				 * jit-<tid>-<pid>.dump, jit-<tid>-<pid>-XXXXXX),
				 * 0 for other names */
	bool in_dir;		/* found in dir_fallback, not at the recorded path */
	bool header_read;	/* path starts with a plausible jitdump header */
	/* A marker that cannot be read: a positive errno (ENOENT: neither at
	 * the recorded path nor in dir_fallback) and what went wrong, for
	 * the caller's warning.  0 and NULL otherwise. */
	int err;
	const char *problem;
	/* Not a marker (return 0), but the file IS a jitdump, written by
	 * another process (pid): the caller may say so (--jitdump FILE
	 * injects it by hand). */
	bool other_pid;
};

/* Remembers what was read of each recorded file name, so that a file is
 * stat'ed and its header read once per run however many mmaps name it.
 * Use one cache with one dir_fallback. */
struct pg_jd_cache;

struct pg_jd_cache *pg_jd_cache_new(void);	/* NULL on OOM */
void pg_jd_cache_free(struct pg_jd_cache *c);	/* NULL: no-op */

/* Is this recorded mmap (file name as recorded, mapping pid, PROT_EXEC)
 * a jitdump marker?  Returns 1 and fills *found (path to open, header pid,
 * how it was recognised; or err/problem for a marker whose file cannot be
 * read: the caller warns and drops the marker), 0 when it is not a marker
 * (found->how 0; other_pid may be set), -ENOMEM when the cache cannot grow,
 * -EINVAL for NULL arguments.  dir_fallback: the --jitdump-dir, or NULL.
 * cache: NULL to read the file on every call.  Never blocks on a FIFO or
 * device and never opens anything but a regular file of at least 40 bytes. */
int pg_jd_discover(const char *mmap_filename, uint32_t mmap_pid, bool exec,
		   const char *dir_fallback, struct pg_jd_cache *cache,
		   struct pg_jd_found *found);

/* "its name (jit-PID.dump)", "its header (jitdump magic and pid)", "its
 * name and header": how found->how was recognised, for messages. */
const char *pg_jd_how_str(unsigned how);

#endif
