/* SPDX-License-Identifier: MIT */
/* Files to remove if the process dies now: the temporary files of a run,
 * and the images it created for an output that is not written yet.
 *
 * A signal handler walks the registry (pg_cleanup_run), so every entry a
 * handler can see is complete: an entry is filled while its state says
 * "claimed" and published with one atomic store; names live in an arena
 * of chunks never freed while the process runs (a slot reused keeps its
 * name's room when the new name fits: an entry of each image of a
 * per-function dump, not NAME_MAX bytes each) and directories are kept
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
#include <time.h>
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
	uint16_t room;		/* bytes at name */
	char *name;
};

#define ARENA_CHUNK 65536	/* > NAME_MAX + 1 + the link */
static char *arena;		/* the current chunk; its first word links the one before */
static size_t arena_used = ARENA_CHUNK;

static struct entry *_Atomic chunks[MAX_CHUNKS];
static atomic_size_t nchunks;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static size_t *free_list;	/* indexes of FREE entries below the high mark */
static size_t nfree, free_cap, high;

/* The directories this process wrote in (under mu): the registry's own
 * descriptor of each, and whether its dead temporaries were swept. */
static struct dir { dev_t dev; ino_t ino; int fd; bool swept; } dirs[MAX_DIRS];
static size_t ndirs;

/* dirfd's entry, added when new; NULL when it cannot be had. */
static struct dir *dir_of(int dirfd)
{
	struct stat st;

	if (fstat(dirfd, &st) < 0)
		return NULL;
	for (size_t i = 0; i < ndirs; i++)
		if (dirs[i].dev == st.st_dev && dirs[i].ino == st.st_ino)
			return &dirs[i];
	if (ndirs == MAX_DIRS)
		return NULL;
	dirs[ndirs] = (struct dir){ .dev = st.st_dev, .ino = st.st_ino, .fd = -1 };
	return &dirs[ndirs++];
}

/* The registry's own descriptor for the directory of dirfd. */
static int own_dirfd(int dirfd)
{
	struct dir *d = dir_of(dirfd);

	if (d && d->fd < 0)
		d->fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	return d ? d->fd : -1;
}

static struct entry *at(size_t i)
{
	return &atomic_load(&chunks[i / CHUNK])[i % CHUNK];
}

/* Under mu: n bytes that stay valid while the process runs, or NULL. */
static char *arena_take(size_t n)
{
	if (ARENA_CHUNK - arena_used < n) {
		char *c = malloc(ARENA_CHUNK);

		if (!c)
			return NULL;
		memcpy(c, &arena, sizeof(arena));
		arena = c;
		arena_used = sizeof(arena);
	}
	arena_used += n;
	return arena + arena_used - n;
}

long pg_cleanup_add(int dirfd, const char *name, bool is_dir)
{
	struct entry *e;
	size_t i;
	bool fresh = false;
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
		fresh = true;
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
	if (e->room < strlen(name) + 1) {
		char *room = arena_take(strlen(name) + 1);

		if (!room) {	/* the slot stays free for another try */
			if (fresh)
				high--;
			else
				free_list[nfree++] = i;	/* where it was taken from */
			goto fail;
		}
		e->name = room;
		e->room = (uint16_t)(strlen(name) + 1);
	}
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
	int expect = LIVE;

	if (handle < 0)
		return;
	pthread_mutex_lock(&mu);
	/* a handler that claimed it first (another thread) is using its
	 * name: the slot is never reused, the process is dying anyway */
	if (atomic_compare_exchange_strong(&at((size_t)handle)->state, &expect, FREE) &&
	    pg_grow((void **)&free_list, &free_cap, nfree + 1, sizeof(*free_list)))
		free_list[nfree++] = (size_t)handle;
	pthread_mutex_unlock(&mu);
}

void pg_block_fatal_signals(bool block, sigset_t *old)
{
	sigset_t s;

	if (!block) {
		pthread_sigmask(SIG_SETMASK, old, NULL);
		return;
	}
	sigemptyset(&s);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &s, old);
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
#define STALE_SECONDS (24 * 3600)

/* Which pids a temporary's pid means: this boot of this machine, this
 * pid namespace.  A pid is only known dead (kill: ESRCH) within them; a
 * file from a container or another host sharing the directory has
 * another tag and is left alone. */
static unsigned pid_space(void)
{
	static atomic_uint tag;
	unsigned t = atomic_load(&tag);
	char buf[128] = "", ns[64] = "";
	uint32_t h = 2166136261u;
	ssize_t n;
	int fd;

	if (t)
		return t;
	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = 0;
		close(fd);
	}
	n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
	ns[n > 0 ? n : 0] = 0;
	for (const char *p = buf; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	for (const char *p = ns; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	t = h | 1;		/* never 0: 0 is "not computed" */
	atomic_store(&tag, t);
	return t;
}

int pg_tmpname(char *buf, size_t size, const char *name, unsigned rnd)
{
	int n = snprintf(buf, size, ".%s" TMP_TAG "%ld-%08x-%06x", name, (long)getpid(),
			 pid_space(), rnd & PG_TMP_RND_MASK);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static bool hexes(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return true;
}

/* The pid and pid-space tag of a perfgraft temporary file name; false
 * for any other name. */
static bool tmp_parse(const char *name, long *pid, unsigned *space)
{
	const char *t, *p;
	long v = 0;

	if (name[0] != '.')
		return false;
	t = strstr(name, TMP_TAG);
	if (!t)
		return false;
	while (strstr(t + 1, TMP_TAG))
		t = strstr(t + 1, TMP_TAG);
	for (p = t + strlen(TMP_TAG); *p >= '0' && *p <= '9'; p++)
		if ((v = v * 10 + (*p - '0')) > INT_MAX)
			return false;
	if (p == t + strlen(TMP_TAG) || !v || *p != '-' || strlen(p) != 1 + 8 + 1 + 6 ||
	    !hexes(p + 1, 8) || p[9] != '-' || !hexes(p + 10, 6))
		return false;
	*pid = v;
	*space = (unsigned)strtoul(p + 1, NULL, 16);
	return true;
}

long pg_sweep_dead_temps(int dirfd)
{
	struct dir *dir;
	int fd;
	DIR *d;
	struct dirent *de;
	long removed = 0;
	time_t now = time(NULL);
	char **names = NULL;
	size_t n = 0, cap = 0;

	/* once per directory and process: a run reading many dumps into one
	 * directory does not read it again for each */
	pthread_mutex_lock(&mu);
	dir = dir_of(dirfd);
	if (dir && dir->swept) {
		pthread_mutex_unlock(&mu);
		return 0;
	}
	if (dir)
		dir->swept = true;
	pthread_mutex_unlock(&mu);
	fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	while ((de = readdir(d))) {
		long pid;
		unsigned space;
		struct stat st;
		bool dead;

		if (!tmp_parse(de->d_name, &pid, &space) ||
		    (pid == (long)getpid() && space == pid_space()))
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		/* a run killed by SIGKILL: its pid is gone from our pid space
		 * (one that exists, even another user's, may still be writing
		 * it); from elsewhere or an earlier boot: untouched for a day */
		dead = space == pid_space() && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
		if (!dead && now - st.st_mtime < STALE_SECONDS)
			continue;
		/* removed after the walk: unlinking during readdir can make it
		 * skip entries (seen on ext4 with thousands of them) */
		if (!pg_grow((void **)&names, &cap, n + 1, sizeof(*names)) ||
		    !(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	for (size_t k = 0; k < n; k++) {
		if (unlinkat(dirfd, names[k], 0) == 0)
			removed++;
		free(names[k]);
	}
	free(names);
	return removed;
}
