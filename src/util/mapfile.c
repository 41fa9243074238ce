/* SPDX-License-Identifier: MIT */
/* Read-only mappings of input files (jitdumps, XRay traces, gperftools
 * profiles, perf.data): the readers work on the bytes in place, never on
 * a second copy.
 *
 * A file that another process truncates while it is mapped turns every
 * read of the lost pages into SIGBUS.  Each mapping is therefore listed in
 * a process-wide registry that a SIGBUS handler can walk
 * (pg_install_sigbus_handler): a fault inside a listed mapping maps zero
 * pages over the rest of it, marks it changed and returns, so the reader
 * goes on over zeros and the run fails before anything is committed
 * (pg_inputs_check, called by pg_outfile_commit).  A shrink that no read
 * faulted on (the last page's tail, pages not read since) is found by
 * comparing the file's size when the mapping is released or checked.
 *
 * The handler sees only complete entries: an entry is filled while its
 * state says "claimed" and published with one atomic store, like the
 * cleanup registry's.  An entry that changed keeps its name for the rest
 * of the process: every later commit fails naming it (the bytes read from
 * it may be in any output). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "util/util.h"

#define MCHUNK 256
#define MAX_MCHUNKS 256		/* 65,536 mappings: vm.max_map_count is 65,530 */

enum { M_FREE, M_CLAIMED, M_LIVE, M_KEPT /* unmapped after it changed */ };

struct mslot {
	atomic_int state;
	atomic_bool changed;
	uintptr_t base;
	size_t len;		/* the mapping: size rounded up to whole pages */
	uint64_t size;		/* the file's size when mapped */
	int fd;			/* a descriptor that stays open, or -1: by name */
	dev_t dev;
	ino_t ino;
	char *name;
};

static struct mslot *_Atomic mchunks[MAX_MCHUNKS];
static atomic_size_t nmchunks;
static atomic_long first_changed;	/* index + 1 of the first entry that changed */
static atomic_long pagesize;
static pthread_mutex_t mmu = PTHREAD_MUTEX_INITIALIZER;
static size_t *mfree;			/* FREE entries below mhigh */
static size_t nmfree, mfree_cap, mhigh;

static struct mslot *mslot_at(size_t i)
{
	return &atomic_load(&mchunks[i / MCHUNK])[i % MCHUNK];
}

static long page_size(void)
{
	long ps = atomic_load(&pagesize);

	if (!ps) {
		ps = sysconf(_SC_PAGESIZE);
		if (ps <= 0)
			ps = 4096;
		atomic_store(&pagesize, ps);
	}
	return ps;
}

static void mark_changed(struct mslot *s, size_t i)
{
	long expect = 0;

	atomic_store(&s->changed, true);
	atomic_compare_exchange_strong(&first_changed, &expect, (long)i + 1);
}

/* With mmu held: whether the file of a live entry is now shorter than
 * what was mapped (the same file, by device and inode: a file renamed
 * over the name is another file, and the mapping still has the old). */
static bool shrunk(const struct mslot *s)
{
	struct stat st;

	if (s->fd >= 0 ? fstat(s->fd, &st) < 0 : stat(s->name, &st) < 0)
		return false;
	return st.st_dev == s->dev && st.st_ino == s->ino && (uint64_t)st.st_size < s->size;
}

long pg_map_register(const void *base, uint64_t size, const char *name, int fd, bool fd_stays)
{
	struct stat st;
	struct mslot *s;
	char *copy;
	size_t i;

	if (!base || !size || fstat(fd, &st) < 0 || !(copy = strdup(name)))
		return -1;
	page_size();
	atomic_store(&pg_err_hook, pg_inputs_blame);
	pthread_mutex_lock(&mmu);
	if (nmfree) {
		i = mfree[--nmfree];
	} else {
		if (mhigh / MCHUNK == atomic_load(&nmchunks)) {
			struct mslot *c;

			if (mhigh / MCHUNK == MAX_MCHUNKS || !(c = calloc(MCHUNK, sizeof(*c)))) {
				pthread_mutex_unlock(&mmu);
				free(copy);
				return -1;
			}
			atomic_store(&mchunks[mhigh / MCHUNK], c);
			atomic_store(&nmchunks, mhigh / MCHUNK + 1);
		}
		i = mhigh++;
	}
	s = mslot_at(i);
	atomic_store(&s->state, M_CLAIMED);
	atomic_store(&s->changed, false);
	s->base = (uintptr_t)base;
	s->len = (size_t)pg_align(size, (uint64_t)page_size());
	s->size = size;
	s->fd = fd_stays ? fd : -1;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->name = copy;
	atomic_store(&s->state, M_LIVE);	/* published: the handler may use it */
	pthread_mutex_unlock(&mmu);
	return (long)i;
}

void pg_map_unregister(long h)
{
	struct mslot *s;

	if (h < 0)
		return;
	pthread_mutex_lock(&mmu);
	s = mslot_at((size_t)h);
	if (!atomic_load(&s->changed) && shrunk(s))
		mark_changed(s, (size_t)h);
	if (atomic_load(&s->changed)) {
		atomic_store(&s->state, M_KEPT);	/* its name stays for the report */
	} else {
		atomic_store(&s->state, M_FREE);
		free(s->name);
		s->name = NULL;
		if (pg_grow((void **)&mfree, &mfree_cap, nmfree + 1, sizeof(*mfree)))
			mfree[nmfree++] = (size_t)h;
	}
	pthread_mutex_unlock(&mmu);
}

bool pg_inputs_changed(void)
{
	return atomic_load(&first_changed) != 0;
}

bool pg_map_changed(long h)
{
	return h >= 0 && atomic_load(&mslot_at((size_t)h)->changed);
}

/* The live entry holding base (pg_unmap_file gets only the address). */
static long find_base(const void *base)
{
	long h = -1;

	pthread_mutex_lock(&mmu);
	for (size_t i = mhigh; i-- > 0;) {
		struct mslot *s = mslot_at(i);

		if (atomic_load(&s->state) == M_LIVE && s->base == (uintptr_t)base) {
			h = (long)i;
			break;
		}
	}
	pthread_mutex_unlock(&mmu);
	return h;
}

/* Async-signal-safe: atomics and mmap.  Zero pages from the faulting page
 * to the end of its mapping: what follows a lost page is lost too, and the
 * next read of an earlier lost page faults (and is handled) again. */
static bool map_fault(const void *addr)
{
	uintptr_t a = (uintptr_t)addr, ps = (uintptr_t)atomic_load(&pagesize);
	size_t n = atomic_load(&nmchunks);

	if (!ps)
		return false;
	for (size_t c = 0; c < n; c++) {
		struct mslot *ch = atomic_load(&mchunks[c]);

		for (size_t k = 0; ch && k < MCHUNK; k++) {
			struct mslot *s = &ch[k];
			uintptr_t from;

			if (atomic_load(&s->state) != M_LIVE || a < s->base || a - s->base >= s->len)
				continue;
			from = a & ~(ps - 1);
			if (mmap((void *)from, s->base + s->len - from, PROT_READ,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
				return false;
			mark_changed(s, c * MCHUNK + k);
			return true;
		}
	}
	return false;
}

static struct sigaction prev_bus;
static atomic_bool bus_installed;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	/* si_code > 0: the kernel's, for a fault at si_addr (not a kill) */
	if (si && si->si_code > 0 && map_fault(si->si_addr)) {
		errno = saved;
		return;
	}
	/* a program's own handler (it installed one before us) decides */
	if ((prev_bus.sa_flags & SA_SIGINFO) && prev_bus.sa_sigaction) {
		prev_bus.sa_sigaction(sig, si, uc);
		return;
	}
	if (!(prev_bus.sa_flags & SA_SIGINFO) && prev_bus.sa_handler != SIG_DFL &&
	    prev_bus.sa_handler != SIG_IGN) {
		prev_bus.sa_handler(sig);
		return;
	}
	/* not an input: remove the run's temporaries and die of it as before */
	pg_cleanup_run();
	signal(sig, SIG_DFL);
	raise(sig);
}

int pg_install_sigbus_handler(void)
{
	struct sigaction sa;
	bool expect = false;

	if (!atomic_compare_exchange_strong(&bus_installed, &expect, true))
		return 0;
	page_size();
	if (sigaction(SIGBUS, NULL, &prev_bus) < 0) {
		atomic_store(&bus_installed, false);
		return -errno;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, NULL) < 0) {
		atomic_store(&bus_installed, false);
		return -errno;
	}
	return 0;
}

/* The name of the first input that changed, or NULL.  An entry that
 * changed is never freed, so the name stays valid. */
static const char *changed_name(void)
{
	long f = atomic_load(&first_changed);

	return f ? mslot_at((size_t)(f - 1))->name : NULL;
}

int pg_inputs_check(struct pg_diag *d)
{
	const char *name;

	pthread_mutex_lock(&mmu);
	for (size_t i = 0; i < mhigh; i++) {
		struct mslot *s = mslot_at(i);

		if (atomic_load(&s->state) == M_LIVE && !atomic_load(&s->changed) && shrunk(s))
			mark_changed(s, i);
	}
	pthread_mutex_unlock(&mmu);
	name = changed_name();
	return name ? pg_err(d, -EIO, "%s: changed while being read", name) : 0;
}

void pg_inputs_blame(struct pg_diag *d, int err)
{
	const char *name;

	/* a system call that read a mapping which lost its pages (pwrite of
	 * mapped code into an image): the kernel says EFAULT, no SIGBUS */
	if (err == -EFAULT) {
		struct pg_diag none = { 0 };

		(void)pg_inputs_check(&none);
	}
	name = changed_name();
	if (name && d)
		snprintf(d->err, sizeof(d->err), "%s: changed while being read", name);
}

void pg_release_mapped(const uint8_t *base, uint64_t off, uint64_t end)
{
	uint64_t lo = pg_align(off, 4096), hi = end & ~4095ull;

	if (base && hi > lo)
		madvise((void *)(base + lo), hi - lo, MADV_DONTNEED);
}

static _Thread_local uint64_t touched;	/* a thread's own: no atomic per record */

/* Every listed mapping is read-only and private: dropping its pages
 * loses nothing (the SIGBUS handler's zero pages come back as zeros).
 * Under mmu: an entry leaves M_LIVE before it is unmapped, so no range
 * given back here is anything else by then. */
static void trim_inputs(void)
{
	pthread_mutex_lock(&mmu);
	for (size_t i = 0; i < mhigh; i++) {
		struct mslot *s = mslot_at(i);

		if (atomic_load(&s->state) == M_LIVE)
			madvise((void *)s->base, s->len, MADV_DONTNEED);
	}
	pthread_mutex_unlock(&mmu);
}

void pg_inputs_touched(uint64_t bytes)
{
	touched += bytes;
	if (touched >= PG_INPUTS_TRIM_BYTES) {
		touched = 0;
		trim_inputs();
	}
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
		/* unlisted (no memory for it): a shrink is then SIGBUS as before */
		(void)pg_map_register(map, (uint64_t)sb.st_size, path, fd, false);
	}
	close(fd);
	*base = map;
	*size = (size_t)sb.st_size;
	return 0;
}

void pg_unmap_file(const uint8_t *base, size_t size)
{
	if (!base)
		return;
	pg_map_unregister(find_base(base));
	munmap((void *)base, size);
}
