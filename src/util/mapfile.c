/* SPDX-License-Identifier: MIT */
/* Read-only mappings of input files (jitdumps, XRay traces): the readers
 * work on the bytes in place, never on a second copy. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "util/util.h"

void pg_release_mapped(const uint8_t *base, uint64_t off, uint64_t end)
{
	uint64_t lo = pg_align(off, 4096), hi = end & ~4095ull;

	if (base && hi > lo)
		madvise((void *)(base + lo), hi - lo, MADV_DONTNEED);
}

int pg_map_file(const char *path, bool sequential, struct pg_diag *diag,
		const uint8_t **base, size_t *size)
{
	struct stat sb;
	void *map = NULL;
	int fd, e;

	*base = NULL;
	*size = 0;
	/* O_NONBLOCK: a FIFO must not hang the open; it is refused below */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		e = errno;
		return pg_err(diag, -e, "%s: %s", path, strerror(e));
	}
	if (fstat(fd, &sb) < 0) {
		e = errno;
		close(fd);
		return pg_err(diag, -e, "%s: %s", path, strerror(e));
	}
	if (!S_ISREG(sb.st_mode)) {
		close(fd);
		return pg_err(diag, -EINVAL, "%s: not a regular file", path);
	}
	if (sb.st_size > 0) {
		map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			e = errno;
			close(fd);
			return pg_err(diag, -e, "%s: cannot map: %s", path, strerror(e));
		}
		if (sequential)
			madvise(map, (size_t)sb.st_size, MADV_SEQUENTIAL);
	}
	close(fd);
	*base = map;
	*size = (size_t)sb.st_size;
	return 0;
}

void pg_unmap_file(const uint8_t *base, size_t size)
{
	if (base)
		munmap((void *)base, size);
}
