/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "util/util.h"

int pg_outfile_open(struct pg_outfile *f, int dirfd, const char *name,
		    struct pg_diag *d)
{
	return pg_outfile_open_mode(f, dirfd, name, 0644, false, d);
}

int pg_tmpfile_open(int dirfd, const char *name, unsigned mode, bool *direct,
		    unsigned *rnd, long *reg, struct pg_diag *d)
{
	size_t n = strlen(name), tsize = n + 40;
	char tmp[NAME_MAX + 41];
	struct stat st;
	int fd = -1;

	*direct = false;
	*reg = -1;
	if (!n || strchr(name, '/'))
		return pg_err(d, -EINVAL, "invalid output file name '%s'", name);
	/* A device, FIFO or socket (/dev/null, a named pipe) is written in
	 * place: renaming a file onto it would replace the node itself. */
	if (fstatat(dirfd, name, &st, 0) == 0 && !S_ISREG(st.st_mode)) {
		if (S_ISDIR(st.st_mode))
			return pg_err(d, -EISDIR, "'%s' is a directory", name);
		fd = openat(dirfd, name, O_WRONLY | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			return pg_err(d, -errno, "cannot open '%s': %s", name, strerror(errno));
		*direct = true;
		return fd;
	}
	if (tsize > sizeof(tmp))
		tsize = sizeof(tmp);
	/* O_EXCL on a random hidden name: never follows a planted symlink.
	 * The pid in the name lets a later run remove it if this one is
	 * killed (pg_sweep_dead_temps). */
	for (int tries = 0; tries < 100; tries++) {
		unsigned r = ((unsigned)rand() ^ ((unsigned)getpid() << 8) ^ (unsigned)tries) &
			     PG_TMP_RND_MASK;

		if (pg_tmpname(tmp, tsize, name, r) < 0) {
			errno = ENAMETOOLONG;
			break;
		}
		/* listed before it exists: a signal cannot find it unlisted (the
		 * name is this process's own, so removing it early is harmless) */
		*reg = pg_cleanup_add(dirfd, tmp, false);
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    (mode_t)mode);
		if (fd >= 0) {
			*rnd = r;
			return fd;
		}
		int e = errno;

		pg_cleanup_del(*reg);
		*reg = -1;
		errno = e;
		if (e != EEXIST)
			break;
	}
	int e = errno;

	return pg_err(d, -e, "cannot create a file beside '%s': %s", name, strerror(e));
}

int pg_outfile_open_mode(struct pg_outfile *f, int dirfd, const char *name,
			 unsigned mode, bool backup, struct pg_diag *d)
{
	size_t tsize = strlen(name) + 40;
	unsigned rnd = 0;

	memset(f, 0, sizeof(*f));
	f->dirfd = dirfd;
	f->reg = -1;
	/* before the file: a temporary is never left without its name */
	f->name = strdup(name);
	f->tmpname = malloc(tsize);
	if (!f->name || !f->tmpname) {
		f->fd = -1;
		pg_outfile_abort(f);
		return pg_err(d, -ENOMEM, "out of memory");
	}
	f->fd = pg_tmpfile_open(dirfd, name, mode, &f->direct, &rnd, &f->reg, d);
	if (f->fd < 0 || f->direct) {
		int ret = f->fd < 0 ? f->fd : 0;

		free(f->name);
		free(f->tmpname);
		f->name = f->tmpname = NULL;
		return ret;
	}
	f->backup = backup;
	f->tmp_exists = true;
	(void)pg_tmpname(f->tmpname, tsize, name, rnd);	/* the name it was opened with */
	return 0;
}

int pg_outfile_finish(struct pg_outfile *f, struct pg_diag *d)
{
	int ret = 0;

	if (f->fd < 0)
		return 0;
	if (close(f->fd) < 0)
		ret = pg_err(d, -errno, "cannot write '%s': %s",
			     f->direct ? "the output" : f->name, strerror(errno));
	f->fd = -1;
	if (ret && !f->direct)
		pg_outfile_abort(f);
	return ret;
}

int pg_outfile_commit(struct pg_outfile *f, struct pg_diag *d)
{
	return pg_outfile_commit_at(f, f->dirfd, f->name, d);
}

/* The temporary has its final name: nothing of it to remove any more. */
static void renamed(struct pg_outfile *f)
{
	pg_cleanup_del(f->reg);
	f->reg = -1;
	free(f->tmpname);
	free(f->name);
	f->tmpname = f->name = NULL;
}

/* The rename into place, the replaced file kept as TONAME.old (perf's
 * check_backup: any output name, only a non-empty file).  The old file
 * gets a second, hidden name first and TONAME is replaced in one rename:
 * the name never goes missing, and a failure before that rename leaves
 * TONAME and TONAME.old as they were. */
static int commit_backup(struct pg_outfile *f, int todirfd, const char *toname,
			 struct pg_diag *d)
{
	size_t n = strlen(toname) + 40;
	char *old = malloc(n), *keep = malloc(n);
	long reg = -1;
	bool kept = false;
	struct stat st;
	int ret = 0;

	if (!old || !keep) {
		ret = pg_err(d, -ENOMEM, "out of memory");
		goto out;
	}
	/* not snprintf: gcc -fsanitize=address took toname for NULL there
	 * (-Wformat-truncation) */
	memcpy(old, toname, n - 40);
	memcpy(old + n - 40, ".old", 5);
	if (fstatat(todirfd, toname, &st, 0) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		for (int tries = 0; tries < 100 && !kept; tries++) {
			if (pg_tmpname(keep, n, old, (unsigned)rand() ^ (unsigned)tries) < 0)
				break;
			reg = pg_cleanup_add(todirfd, keep, false);
			if (linkat(todirfd, toname, todirfd, keep, 0) == 0) {
				kept = true;
				break;
			}
			pg_cleanup_del(reg);
			reg = -1;
			if (errno != EEXIST)
				break;
		}
		if (!kept) {
			ret = pg_err(d, -errno, "cannot keep '%s' as '%s': %s", toname, old,
				     strerror(errno));
			goto out;
		}
	}
	if (renameat(f->dirfd, f->tmpname, todirfd, toname) < 0) {
		ret = pg_err(d, -errno, "cannot rename to '%s': %s", toname, strerror(errno));
		goto out;
	}
	f->tmp_exists = false;
	if (kept) {
		/* the new output is in place: a failure here loses only the backup */
		if (renameat(todirfd, keep, todirfd, old) < 0)
			pg_warn(d, "cannot keep the earlier '%s' as '%s': %s", toname, old,
				strerror(errno));
		else
			kept = false;
	}
out:
	if (kept)
		unlinkat(todirfd, keep, 0);
	pg_cleanup_del(reg);
	free(old);
	free(keep);
	if (ret) {
		pg_outfile_abort(f);
		return ret;
	}
	renamed(f);
	return 0;
}

int pg_outfile_commit_at(struct pg_outfile *f, int todirfd, const char *toname,
			 struct pg_diag *d)
{
	int ret = pg_outfile_finish(f, d);

	/* an input that changed while it was read may be in these bytes */
	if (!ret)
		ret = pg_inputs_check(d);
	if (ret) {
		pg_outfile_abort(f);
		return ret;
	}
	if (f->direct || !f->tmpname)
		return 0;
	if (f->backup)
		return commit_backup(f, todirfd, toname, d);
	/* rename gives the name a new inode: a hard link that perf's build-id
	 * cache holds to an earlier image keeps the earlier bytes. */
	if (renameat(f->dirfd, f->tmpname, todirfd, toname) < 0) {
		ret = pg_err(d, -errno, "cannot rename to '%s': %s", toname, strerror(errno));
		pg_outfile_abort(f);
		return ret;
	}
	f->tmp_exists = false;
	renamed(f);
	return 0;
}

void pg_outfile_abort(struct pg_outfile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	if (f->tmp_exists)
		unlinkat(f->dirfd, f->tmpname, 0);
	f->tmp_exists = false;
	pg_cleanup_del(f->reg);
	f->reg = -1;
	f->fd = -1;
	free(f->tmpname);
	free(f->name);
	f->tmpname = f->name = NULL;
}

/* All of iov[0..n) at off, whatever short writes the kernel makes; the
 * iovecs are consumed.  0, or -1 with errno (ENOSPC for a write of 0). */
static int pwritev_all(int fd, struct iovec *iov, int n, uint64_t off)
{
	while (n) {
		ssize_t w = pwritev(fd, iov, n, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (w == 0) {
			errno = ENOSPC;
			return -1;
		}
		off += (uint64_t)w;
		/* a short write: on from where it stopped */
		while (n && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (uint8_t *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int pg_pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
	struct iovec iov = { .iov_base = (void *)p, .iov_len = n };

	return n ? pwritev_all(fd, &iov, 1, off) : 0;
}

/* zeros for the gaps pg_gather fills (at most a block long) */
static const uint8_t gather_zeros[4096];

void pg_gather_init(struct pg_gather *g, int fd, uint64_t fill_lo, uint64_t fill_hi)
{
	struct stat st;

	g->fd = fd;
	g->fill_lo = fill_lo;
	g->fill_hi = fill_hi;
	g->n = 0;
	g->start = g->end = 0;
	/* a gap of a whole block would allocate it: only shorter ones */
	g->gap = 0;
	if (fstat(fd, &st) == 0 && st.st_blksize >= 512)
		g->gap = st.st_blksize < (blksize_t)sizeof(gather_zeros)
			 ? (unsigned)st.st_blksize - 1 : (unsigned)sizeof(gather_zeros) - 1;
}

int pg_gather_flush(struct pg_gather *g)
{
	int n = g->n;

	g->n = 0;
	return pwritev_all(g->fd, g->iov, n, g->start);
}

int pg_gather_add(struct pg_gather *g, const void *p, size_t n, uint64_t off)
{
	if (!n)
		return 0;
	if (g->n) {
		uint64_t gap = off - g->end;
		bool joins = off == g->end ||
			     (off > g->end && gap <= g->gap && g->end >= g->fill_lo &&
			      off <= g->fill_hi);

		if (!joins || g->n + 2 > PG_GATHER_IOV) {
			if (pg_gather_flush(g) < 0)
				return -1;
		} else if (off > g->end) {
			g->iov[g->n++] = (struct iovec){ (void *)gather_zeros, (size_t)gap };
			g->end = off;
		}
	}
	if (!g->n)
		g->start = g->end = off;
	g->iov[g->n++] = (struct iovec){ (void *)p, n };
	g->end += n;
	return 0;
}
