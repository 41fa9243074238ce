/* SPDX-License-Identifier: MIT */
/* inject's images in perf's build-id cache, laid out as perf 6.1 lays out
 * its own (perf inject --jit's jitted-*.so included):
 *
 *   DIR/<absolute image path>/<build-id>/elf     the image (a hard link)
 *   DIR/.build-id/<2 hex>/<38 hex> -> ../../<absolute image path>/<build-id>
 *
 * perf report finds a dso whose path is gone through the second name
 * (DSO_BINARY_TYPE__BUILD_ID_CACHE), and perf archive packs both. */
#ifndef PG_INJECT_BIDCACHE_H
#define PG_INJECT_BIDCACHE_H

#include <stdint.h>
#include <perfgraft/common.h>

/* The build-id directory perf uses when not told (--buildid-dir):
 * $PERF_BUILDID_DIR (what perf sets for the commands it runs), else
 * buildid.dir of perf's config ($HOME/.perfconfig over /etc/perfconfig,
 * each skipped when PERF_CONFIG_NOGLOBAL / PERF_CONFIG_NOSYSTEM is set),
 * else $HOME/.debug.  A malloc'd string, or NULL (no memory, no HOME). */
char *pg_bidcache_default_dir(void);

struct pg_bidcache_count {
	uint64_t added;		/* images given a new entry */
	uint64_t present;	/* images whose build-id had a valid entry */
	uint64_t files;		/* names created (hard links, copies, symlinks) */
	uint64_t dirs;		/* directories created */
	uint64_t copies;	/* images copied: hard links not possible there */
	uint64_t copy_bytes;	/* the data those copies wrote */
};

/* Adds the image at path (absolute, a regular file) with build-id bid
 * to the cache in dir (created when missing).  Returns 0, or a negative
 * errno with the message in d->err; what was made before a failure stays
 * (it is a valid, or unreferenced, part of the cache). */
int pg_bidcache_add(const char *dir, const char *path, const uint8_t bid[20],
		    struct pg_bidcache_count *c, struct pg_diag *d);

#endif
