/* SPDX-License-Identifier: MIT */
/* Files to remove if the process dies now: the temporary files of a run,
 * and the images it created for an output that is not written yet.
 *
 * A signal handler walks the registry (pg_cleanup_run), so every entry a
 * handler can see is complete: an entry is filled while its state says
 * "claimed" and published with one atomic store; names live inside the
 * entries (never freed while the process runs) and directories are kept
 * open by the registry itself, since a caller's descriptor may be closed
 * and its number reused before the handler runs.  Like git's tempfile
 * list, this is process-wide state: one process has one set of files to
 * remove on SIGINT. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "util/util.h"

#define CHUNK 1024
#define MAX_CHUNKS 4096		/* 4 M entries */
#define MAX_DIRS 64

enum { FREE, CLAIMED, LIVE };

struct entry {
	atomic_int state;
	int dirfd;
	bool is_dir;
	char name[NAME_MAX + 1];
};

static struct entry *_Atomic chunks[MAX_CHUNKS];
static atomic_size_t nchunks;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static size_t *free_list;	/* indexes of FREE entries below the high mark */
static size_t nfree, free_cap, high;

static struct { dev_t dev; ino_t ino; int fd; } dirs[MAX_DIRS];
static size_t ndirs;

/* The registry's own descriptor for the directory of dirfd. */
static int own_dirfd(int dirfd)
{
	struct stat st;
	int fd;

	if (fstat(dirfd, &st) < 0)
		return -1;
	for (size_t i = 0; i < ndirs; i++)
		if (dirs[i].dev == st.st_dev && dirs[i].ino == st.st_ino)
			return dirs[i].fd;
	if (ndirs == MAX_DIRS)
		return -1;
	fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -1;
	dirs[ndirs].dev = st.st_dev;
	dirs[ndirs].ino = st.st_ino;
	dirs[ndirs].fd = fd;
	ndirs++;
	return fd;
}

static struct entry *at(size_t i)
{
	return &atomic_load(&chunks[i / CHUNK])[i % CHUNK];
}

long pg_cleanup_add(int dirfd, const char *name, bool is_dir)
{
	struct entry *e;
	size_t i;
	int fd;

	if (strlen(name) > NAME_MAX)
		return -1;
	pthread_mutex_lock(&mu);
	fd = own_dirfd(dirfd);
	if (fd < 0)
		goto fail;
	if (nfree) {
		i = free_list[--nfree];
	} else {
		if (high / CHUNK == atomic_load(&nchunks)) {
			struct entry *c;

			if (high / CHUNK == MAX_CHUNKS || !(c = calloc(CHUNK, sizeof(*c))))
				goto fail;
			atomic_store(&chunks[high / CHUNK], c);
			atomic_store(&nchunks, high / CHUNK + 1);
		}
		i = high++;
	}
	e = at(i);
	atomic_store(&e->state, CLAIMED);
	e->dirfd = fd;
	e->is_dir = is_dir;
	memcpy(e->name, name, strlen(name) + 1);
	atomic_store(&e->state, LIVE);	/* published: the handler may use it */
	pthread_mutex_unlock(&mu);
	return (long)i;
fail:
	pthread_mutex_unlock(&mu);
	return -1;
}

void pg_cleanup_del(long handle)
{
	if (handle < 0)
		return;
	pthread_mutex_lock(&mu);
	atomic_store(&at((size_t)handle)->state, FREE);
	if (pg_grow((void **)&free_list, &free_cap, nfree + 1, sizeof(*free_list)))
		free_list[nfree++] = (size_t)handle;
	pthread_mutex_unlock(&mu);
}

/* Async-signal-safe: atomics, unlinkat and nothing else.  Files first,
 * then the directories they were in. */
void pg_cleanup_run(void)
{
	size_t n = atomic_load(&nchunks);

	for (int pass = 0; pass < 2; pass++)
		for (size_t c = 0; c < n; c++) {
			struct entry *ch = atomic_load(&chunks[c]);

			for (size_t k = 0; ch && k < CHUNK; k++) {
				struct entry *e = &ch[k];
				int expect = LIVE;

				if (e->is_dir != (pass == 1))
					continue;
				/* claim it, so a second signal does not redo it */
				if (atomic_compare_exchange_strong(&e->state, &expect, CLAIMED))
					unlinkat(e->dirfd, e->name, pass ? AT_REMOVEDIR : 0);
			}
		}
}

/* ---- temporary names ---- */

#define TMP_TAG ".pgtmp-"

int pg_tmpname(char *buf, size_t size, const char *name, unsigned rnd)
{
	int n = snprintf(buf, size, ".%s" TMP_TAG "%ld-%06x", name, (long)getpid(),
			 rnd & 0xffffff);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* The pid of a perfgraft temporary file name, or 0. */
static long tmp_pid(const char *name)
{
	const char *t, *p;
	long pid = 0;

	if (name[0] != '.')
		return 0;
	t = strstr(name, TMP_TAG);
	if (!t)
		return 0;
	while (strstr(t + 1, TMP_TAG))
		t = strstr(t + 1, TMP_TAG);
	for (p = t + strlen(TMP_TAG); *p >= '0' && *p <= '9'; p++)
		if ((pid = pid * 10 + (*p - '0')) > INT_MAX)
			return 0;
	if (p == t + strlen(TMP_TAG) || *p != '-' || strlen(p + 1) != 6)
		return 0;
	for (p++; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return pid;
}

long pg_sweep_dead_temps(int dirfd)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	DIR *d;
	struct dirent *de;
	long removed = 0;

	if (fd < 0)
		return 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	while ((de = readdir(d))) {
		long pid = tmp_pid(de->d_name);
		struct stat st;

		if (!pid || pid == (long)getpid())
			continue;
		/* a run killed by SIGKILL, or on a machine that crashed; a pid
		 * that exists (even another user's) may still be writing it */
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (unlinkat(dirfd, de->d_name, 0) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}
