/* SPDX-License-Identifier: MIT */
/* jitdump writer (include/perfgraft/jitwriter.h).
 *
 * Every call encodes its records into one buffer outside the lock, then,
 * under the lock, stamps the time (and the code_index) into it and hands
 * it to the kernel with one pwritev at the end of the last complete
 * record.  The file offset is ours (w->end), not the descriptor's, so a
 * failed write can be cut off again with ftruncate and the next record
 * goes where the failed one started. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <perfgraft/jitdump.h>
#include <perfgraft/jitwriter.h>
#include "util/util.h"

#define HEADER_SIZE 40
#define PREFIX_SIZE 16
#define LOAD_FIXED 40
#define MOVE_FIXED 48
#define DEBUG_FIXED 16
#define DEBUG_ENTRY_FIXED 16
#define UNWIND_FIXED 24
#define PREFIX_MAX 64

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BE true
#else
#define HOST_BE false
#endif

/* e_machine of the code this library runs (and so the JIT generates). */
#if defined(__x86_64__)
#define PG_ELF_MACH EM_X86_64
#elif defined(__i386__)
#define PG_ELF_MACH EM_386
#elif defined(__aarch64__)
#define PG_ELF_MACH EM_AARCH64
#elif defined(__arm__)
#define PG_ELF_MACH EM_ARM
#elif defined(__riscv)
#define PG_ELF_MACH EM_RISCV
#elif defined(__powerpc64__)
#define PG_ELF_MACH EM_PPC64
#elif defined(__powerpc__)
#define PG_ELF_MACH EM_PPC
#elif defined(__s390__)
#define PG_ELF_MACH EM_S390
#elif defined(__mips__)
#define PG_ELF_MACH EM_MIPS
#elif defined(__loongarch__)
#define PG_ELF_MACH 258		/* EM_LOONGARCH */
#elif defined(__sparc__) && defined(__arch64__)
#define PG_ELF_MACH EM_SPARCV9
#elif defined(__sparc__)
#define PG_ELF_MACH EM_SPARC
#else
#error "jitwriter: unknown target architecture (add its EM_ value)"
#endif

struct pg_jitwriter {
	pthread_mutex_t lock;
	int fd;
	void *marker;		/* the PROT_EXEC page perf record notices */
	size_t marker_len;
	uint32_t pid;
	uint64_t end;		/* file size: end of the last complete record */
	uint64_t next_index;	/* code_index of the next LOAD */
	int failed;		/* sticky: a partial write could not be undone */
	char *path;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t thread_id(void)
{
	return (uint32_t)syscall(SYS_gettid);
}

/* Writes the iovecs at w->end in one pwritev (continued after a short
 * write).  On failure cuts the file back to w->end.  Caller holds the
 * lock (or is the only user). */
static int write_at_end(struct pg_jitwriter *w, const struct iovec *src, int n,
			const char *what, struct pg_diag *diag)
{
	struct iovec iov[4];
	uint64_t start = w->end, total = 0, done = 0;
	int i = 0, err;

	if (n > 4)
		return pg_err(diag, -EINVAL, "%s: internal error: %d iovecs", w->path, n);
	for (int k = 0; k < n; k++) {
		iov[k] = src[k];
		total += src[k].iov_len;
	}
	while (i < n && !iov[i].iov_len)
		i++;
	while (done < total) {
		ssize_t r = pwritev(w->fd, iov + i, n - i, (off_t)(start + done));

		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto fail;
		}
		if (r == 0) {
			err = -EIO;
			goto fail;
		}
		done += (uint64_t)r;
		while (r > 0 && i < n) {
			if ((size_t)r >= iov[i].iov_len) {
				r -= (ssize_t)iov[i].iov_len;
				iov[i].iov_len = 0;
				i++;
			} else {
				iov[i].iov_base = (char *)iov[i].iov_base + r;
				iov[i].iov_len -= (size_t)r;
				r = 0;
			}
		}
		while (i < n && !iov[i].iov_len)
			i++;
	}
	w->end = start + total;
	return 0;

fail:
	if (done > 0 && ftruncate(w->fd, (off_t)start) < 0) {
		int terr = errno;

		w->failed = err;
		return pg_err(diag, err,
			      "%s: writing %s at offset %llu: %s (%llu of %llu bytes written); cutting the partial record off failed too (%s): no more records will be written",
			      w->path, what, (unsigned long long)start, strerror(-err),
			      (unsigned long long)done, (unsigned long long)total, strerror(terr));
	}
	return pg_err(diag, err, "%s: writing %s at offset %llu: %s%s", w->path, what,
		      (unsigned long long)start, strerror(-err),
		      done ? " (the partial record was cut off again)" : "");
}

/* Starts a record: id, a size to patch, a time to stamp.  Returns the
 * offset of the record in b; *ts_at gets the time's offset. */
static size_t rec_begin(struct pg_buf *b, uint32_t id, size_t *ts_at)
{
	size_t at = b->len;

	pg_buf_u32(b, id);
	pg_buf_u32(b, 0);
	*ts_at = b->len;
	pg_buf_u64(b, 0);
	return at;
}

static void pad8(struct pg_buf *b, size_t start)
{
	while ((b->len - start) % 8)
		pg_buf_u8(b, 0);
}

/* Patches the record's total_size; false if it does not fit 32 bits. */
static bool rec_end(struct pg_buf *b, size_t start, uint64_t extra)
{
	uint64_t size = (uint64_t)(b->len - start) + extra;

	if (size > UINT32_MAX)
		return false;
	if (!b->oom)
		pg_buf_put32(b, start + 4, (uint32_t)size);
	return true;
}

static int check_usable(struct pg_jitwriter *w, struct pg_diag *diag)
{
	if ((uint32_t)getpid() != w->pid)
		return pg_err(diag, -ECHILD,
			      "%s: this jitdump writer belongs to pid %u, not to this process (%d, a child after fork?)",
			      w->path, w->pid, (int)getpid());
	if (w->failed)
		return pg_err(diag, w->failed,
			      "%s: an earlier write failed (%s) and could not be undone; no more records are written",
			      w->path, strerror(-w->failed));
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Opening */

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *p = malloc(la + 1 + lb + 1);

	if (!p)
		return NULL;
	memcpy(p, a, la);
	p[la] = '/';
	memcpy(p + la + 1, b, lb + 1);
	return p;
}

/* dir made absolute (relative to the current directory), without
 * trailing slashes; "." is the current directory itself. */
static char *absolute_dir(const char *dir)
{
	char *p, *cwd;
	size_t n;

	if (dir[0] == '/') {
		p = strdup(dir);
	} else {
		cwd = getcwd(NULL, 0);
		if (!cwd)
			return NULL;
		if (!strcmp(dir, "."))
			p = cwd;
		else {
			p = join(strcmp(cwd, "/") ? cwd : "", dir);
			free(cwd);
		}
	}
	if (!p)
		return NULL;
	n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	return p;
}

static int make_dir(const char *path, struct pg_diag *diag)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return pg_err(diag, -errno, "cannot create the jitdump directory %s: %s", path,
			      strerror(errno));
	return 0;
}

/* <base>/.debug/jit/<prefix>-YYYYMMDD.XXXXXXXX, created (the caller
 * removes it again if the dump cannot be made). */
static int convention_dir(const char *prefix, struct pg_diag *diag, char **out)
{
	const char *base = secure_getenv("JITDUMPDIR");
	char date[16], *b, *dbg = NULL, *jit = NULL, *leaf = NULL, *tmpl = NULL;
	struct tm tm;
	time_t t = time(NULL);
	int ret;

	if (!base || !*base)
		base = secure_getenv("HOME");
	if (!base || !*base)
		base = ".";
	b = absolute_dir(base);
	if (!b)
		return pg_err(diag, -errno ? -errno : -ENOMEM,
			      "cannot make the jitdump directory %s absolute: %s", base,
			      strerror(errno ? errno : ENOMEM));
	if (!strcmp(b, "/"))
		b[0] = '\0';
	if (!localtime_r(&t, &tm) || !strftime(date, sizeof(date), "%Y%m%d", &tm))
		snprintf(date, sizeof(date), "00000000");
	ret = -ENOMEM;
	dbg = join(b, ".debug");
	jit = dbg ? join(dbg, "jit") : NULL;
	if (jit && asprintf(&leaf, "%s-%s.XXXXXXXX", prefix, date) < 0)
		leaf = NULL;
	tmpl = leaf ? join(jit, leaf) : NULL;
	if (!tmpl) {
		pg_err(diag, ret, "jitdump directory: out of memory");
		goto out;
	}
	if ((ret = make_dir(dbg, diag)) < 0 || (ret = make_dir(jit, diag)) < 0)
		goto out;
	if (!mkdtemp(tmpl)) {
		ret = pg_err(diag, -errno, "cannot create the jitdump directory %s: %s", tmpl,
			     strerror(errno));
		goto out;
	}
	*out = tmpl;
	tmpl = NULL;
	ret = 0;
out:
	free(b);
	free(dbg);
	free(jit);
	free(leaf);
	free(tmpl);
	return ret;
}

/* A name of one path component: 1..max bytes, no '/', not . or .. */
static bool name_ok(const char *p, size_t max)
{
	size_t n = strlen(p);

	return n && n <= max && !strchr(p, '/') && strcmp(p, ".") && strcmp(p, "..");
}

int pg_jitwriter_open(const struct pg_jitwriter_opts *opts, struct pg_diag *diag,
		      pg_jitwriter **out)
{
	return pg_jitwriter_open_as(opts, NULL, diag, out);
}

int pg_jitwriter_open_as(const struct pg_jitwriter_opts *user_opts, const char *file_name,
			 struct pg_diag *diag, pg_jitwriter **out)
{
	struct pg_jitwriter_opts o;
	const struct pg_jitwriter_opts *opts = &o;
	struct pg_jitwriter *w;
	char *dir = NULL, name[32];
	bool made_dir = false, made_file = false;
	unsigned mode;
	long pgsz;
	struct stat st;
	struct pg_buf b = { .big_endian = HOST_BE };
	struct iovec iov;
	int ret;

	if (!out)
		return pg_err(diag, -EINVAL, "pg_jitwriter_open: no place for the writer");
	*out = NULL;
	if (pg_sized_opts(&o, sizeof(o), user_opts, false, "jitdump writer", diag) < 0)
		return -EINVAL;
	o.sz = sizeof(o);
	if (opts->prefix && !name_ok(opts->prefix, PREFIX_MAX))
		return pg_err(diag, -EINVAL,
			      "jitdump directory prefix \"%s\" is not a usable name (1..%d bytes, no '/', not . or ..)",
			      opts->prefix, PREFIX_MAX);
	if (opts->mode & ~07777u)
		return pg_err(diag, -EINVAL, "jitdump file mode 0%o has bits beyond 07777",
			      opts->mode);
	mode = opts->mode ? opts->mode : 0644;
	if (opts->dir && !*opts->dir)
		return pg_err(diag, -EINVAL, "jitdump directory is an empty string");
	if (file_name && !name_ok(file_name, NAME_MAX))
		return pg_err(diag, -EINVAL,
			      "jitdump file name \"%s\" is not usable (1..%d bytes, no '/', not . or ..)",
			      file_name, NAME_MAX);

	w = calloc(1, sizeof(*w));
	if (!w)
		return pg_err(diag, -ENOMEM, "jitdump writer: out of memory");
	w->fd = -1;
	w->pid = (uint32_t)getpid();
	w->next_index = 1;
	if ((ret = pthread_mutex_init(&w->lock, NULL)) != 0) {
		free(w);
		return pg_err(diag, -ret, "jitdump writer: cannot create its lock: %s",
			      strerror(ret));
	}

	if (opts->dir) {
		dir = absolute_dir(opts->dir);
		if (!dir) {
			ret = pg_err(diag, -errno ? -errno : -ENOMEM,
				     "cannot make the jitdump directory %s absolute: %s", opts->dir,
				     strerror(errno ? errno : ENOMEM));
			goto fail;
		}
	} else {
		ret = convention_dir(opts->prefix ? opts->prefix : "jit", diag, &dir);
		if (ret < 0)
			goto fail;
		made_dir = true;
	}
	snprintf(name, sizeof(name), "jit-%u.dump", w->pid);
	w->path = join(strcmp(dir, "/") ? dir : "", file_name ? file_name : name);
	if (!w->path) {
		ret = pg_err(diag, -ENOMEM, "jitdump writer: out of memory");
		goto fail;
	}

	/* One writer per dump.  Two (a JIT's library or the JVMTI agent
	 * loaded twice) would truncate each other's file and write at their
	 * own offsets over each other's records.  flock() locks belong to
	 * the open file description, so a second open in the same process
	 * conflicts too (POSIX fcntl locks would not).  A dump left by a
	 * crashed process with our pid holds no lock: it is replaced.  A file
	 * system without flock() locks: written unlocked, as before. */
	for (int tries = 0;; tries++) {
		struct stat now;
		int lk;

		/* never through a symlink, and not truncated before the lock:
		 * the file may be another writer's live dump */
		w->fd = open(w->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (w->fd < 0 && errno == EEXIST)
			w->fd = open(w->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (w->fd < 0) {
			ret = pg_err(diag, -errno, "cannot create the jitdump %s: %s%s", w->path,
				     strerror(errno),
				     errno == ELOOP ? " (a symbolic link is in its place; refused)" : "");
			goto fail;
		}
		do
			lk = flock(w->fd, LOCK_EX | LOCK_NB);
		while (lk < 0 && errno == EINTR);
		if (lk < 0 && errno == EWOULDBLOCK) {
			ret = pg_err(diag, -EBUSY,
				     "%s: another jitdump writer has this dump open and locked (a second writer in this process, such as an agent loaded twice, or another process writing this name); not opened, that writer's dump is left as it is",
				     w->path);
			goto fail;
		}
		/* locked (or no locks here) */
		if (fstat(w->fd, &st) < 0) {
			ret = pg_err(diag, -errno, "%s: fstat: %s", w->path, strerror(errno));
			goto fail;
		}
		if (!S_ISREG(st.st_mode)) {
			ret = pg_err(diag, -EINVAL, "%s exists and is not a regular file", w->path);
			goto fail;
		}
		/* still the file the name gives?  A writer that failed unlinks
		 * its file before it lets the lock go; one that raced us to the
		 * name may have replaced it */
		if (st.st_nlink > 0 && lstat(w->path, &now) == 0 &&
		    now.st_dev == st.st_dev && now.st_ino == st.st_ino)
			break;
		close(w->fd);
		w->fd = -1;
		if (tries == 8) {
			ret = pg_err(diag, -EBUSY, "%s: the file keeps changing under its name while it is opened; not opened",
				     w->path);
			goto fail;
		}
	}
	made_file = true;	/* ours now: created, or locked and cut here */
	if (ftruncate(w->fd, 0) < 0) {
		ret = pg_err(diag, -errno, "%s: cannot truncate the stale dump there: %s", w->path,
			     strerror(errno));
		goto fail;
	}

	/* header */
	pg_buf_u32(&b, PG_JITDUMP_MAGIC);
	pg_buf_u32(&b, 1);
	pg_buf_u32(&b, HEADER_SIZE);
	pg_buf_u32(&b, PG_ELF_MACH);
	pg_buf_u32(&b, 0);
	pg_buf_u32(&b, w->pid);
	pg_buf_u64(&b, mono_ns());
	pg_buf_u64(&b, 0);
	if (b.oom) {
		ret = pg_err(diag, -ENOMEM, "jitdump writer: out of memory");
		goto fail;
	}
	iov.iov_base = b.p;
	iov.iov_len = b.len;
	ret = write_at_end(w, &iov, 1, "the header", diag);
	if (ret < 0)
		goto fail;

	/* the marker: an executable private mapping of the first page */
	pgsz = sysconf(_SC_PAGESIZE);
	w->marker_len = pgsz > 0 ? (size_t)pgsz : 4096;
	w->marker = mmap(NULL, w->marker_len, PROT_READ | PROT_EXEC, MAP_PRIVATE, w->fd, 0);
	if (w->marker == MAP_FAILED) {
		int e = errno;

		w->marker = NULL;
		ret = pg_err(diag, -e,
			     "%s: cannot map it executable (PROT_READ|PROT_EXEC), which perf record needs to notice the dump: %s%s",
			     w->path, strerror(e),
			     e == EPERM || e == EACCES ? " (is the file system mounted noexec? choose another directory)" : "");
		goto fail;
	}
	pg_buf_free(&b);
	free(dir);
	*out = w;
	return 0;

fail:
	pg_buf_free(&b);
	/* unlinked while the lock is held: a writer that comes next creates
	 * a file of its own instead of locking the one about to go */
	if (made_file)
		unlink(w->path);
	if (w->fd >= 0)
		close(w->fd);
	if (made_dir)
		rmdir(dir);
	free(dir);
	free(w->path);
	pthread_mutex_destroy(&w->lock);
	free(w);
	return ret;
}

const char *pg_jitwriter_path(const pg_jitwriter *w)
{
	return w ? w->path : NULL;
}

uint32_t pg_jitwriter_pid(const pg_jitwriter *w)
{
	return w ? w->pid : 0;
}

/* ---------------------------------------------------------------------- */
/* Records */

static int check_func(const pg_jitwriter *w, const struct pg_jit_func *f,
		      struct pg_diag *diag)
{
	const char *nm;

	if (!f || !f->name)
		return pg_err(diag, -EINVAL, "%s: LOAD without a function name", w->path);
	nm = f->name;
	if (!f->code_size)
		return pg_err(diag, -EINVAL, "%s: function \"%s\" has no code (code_size 0)",
			      w->path, nm);
	if (f->addr > UINT64_MAX - f->code_size)
		return pg_err(diag, -EINVAL,
			      "%s: function \"%s\": 0x%llx + %llu bytes overflows the address space",
			      w->path, nm, (unsigned long long)f->addr,
			      (unsigned long long)f->code_size);
	if (!f->code && (f->addr > UINTPTR_MAX || f->code_size > SIZE_MAX))
		return pg_err(diag, -EINVAL,
			      "%s: function \"%s\": code not given and 0x%llx is not an address of this process",
			      w->path, nm, (unsigned long long)f->addr);
	if (f->nlines && !f->lines)
		return pg_err(diag, -EINVAL, "%s: function \"%s\": %zu line rows but no array",
			      w->path, nm, f->nlines);
	for (size_t i = 0; i < f->nlines; i++) {
		const struct pg_jit_line *l = &f->lines[i];

		if (l->addr < f->addr || l->addr - f->addr >= f->code_size)
			return pg_err(diag, -EINVAL,
				      "%s: function \"%s\" (0x%llx, %llu bytes): line row %zu address 0x%llx is outside the code",
				      w->path, nm, (unsigned long long)f->addr,
				      (unsigned long long)f->code_size, i,
				      (unsigned long long)l->addr);
		if (i && l->addr < f->lines[i - 1].addr)
			return pg_err(diag, -EINVAL,
				      "%s: function \"%s\": line row %zu (0x%llx) is before row %zu (0x%llx); rows must be sorted by address",
				      w->path, nm, i, (unsigned long long)l->addr, i - 1,
				      (unsigned long long)f->lines[i - 1].addr);
		if (!i && !l->file)
			return pg_err(diag, -EINVAL,
				      "%s: function \"%s\": the first line row has no file name",
				      w->path, nm);
	}
	if (f->unwind) {
		const struct pg_jit_unwind *u = f->unwind;

		if (!u->size || !u->data || u->eh_frame_hdr_size > u->size)
			return pg_err(diag, -EINVAL,
				      "%s: function \"%s\": unwind blob of %llu bytes with a %llu-byte eh_frame_hdr%s is not usable",
				      w->path, nm, (unsigned long long)u->size,
				      (unsigned long long)u->eh_frame_hdr_size,
				      u->data ? "" : " and no data");
		if (u->size > SIZE_MAX)
			return pg_err(diag, -EINVAL, "%s: function \"%s\": unwind blob too large",
				      w->path, nm);
	}
	return 0;
}


#define MAX_FRAMES 1024
#define NO_STRING 0xffffffffu

static int check_inlines(const pg_jitwriter *w, const struct pg_jit_func *f,
			 const struct pg_jit_func_ext *x, struct pg_diag *diag)
{
	uint64_t end = f->addr;

	if (x->ninlines && !x->inlines)
		return pg_err(diag, -EINVAL, "%s: function \"%s\": %zu inline chains but no array",
			      w->path, f->name, x->ninlines);
	for (size_t i = 0; i < x->ninlines; i++) {
		const struct pg_jit_inline *in = &x->inlines[i];

		if (!in->size || in->addr < end || in->addr - f->addr > f->code_size ||
		    in->size > f->code_size - (in->addr - f->addr))
			return pg_err(diag, -EINVAL,
				      "%s: function \"%s\" (0x%llx, %llu bytes): inline chain %zu (0x%llx, %llu bytes) is empty, outside the code, or before the end of the one before it",
				      w->path, f->name, (unsigned long long)f->addr,
				      (unsigned long long)f->code_size, i, (unsigned long long)in->addr,
				      (unsigned long long)in->size);
		if (in->nframes < 2 || in->nframes > MAX_FRAMES || !in->frames)
			return pg_err(diag, -EINVAL,
				      "%s: function \"%s\": inline chain %zu has %u frames (2 to %d, with an array)",
				      w->path, f->name, i, in->nframes, MAX_FRAMES);
		for (uint32_t k = 0; k < in->nframes; k++)
			if (!in->frames[k].func)
				return pg_err(diag, -EINVAL,
					      "%s: function \"%s\": inline chain %zu frame %u has no function name",
					      w->path, f->name, i, k);
		end = in->addr + in->size;
	}
	return 0;
}

/* The string's index in the record's table, adding it when new. */
static uint32_t string_index(struct pg_strmap *m, const char *str)
{
	bool added;
	long i = pg_strmap_intern(m, str, &added);

	return i < 0 ? NO_STRING : (uint32_t)i;
}

/* INLINE_INFO: the strings (each name once), then the ranges.  False
 * when it does not fit a record, or (b->oom set) memory ran out. */
static bool encode_inlines(struct pg_buf *b, const struct pg_jit_func *f,
			   const struct pg_jit_func_ext *x, size_t *ts_at)
{
	struct pg_strmap m = { 0 };
	size_t at;
	bool ok = true;

	for (size_t i = 0; i < x->ninlines && ok; i++)
		for (uint32_t k = 0; k < x->inlines[i].nframes && ok; k++) {
			const struct pg_jit_frame *fr = &x->inlines[i].frames[k];

			ok = string_index(&m, fr->func) != NO_STRING &&
			     (!fr->file || string_index(&m, fr->file) != NO_STRING);
		}
	if (!ok) {		/* the table could not grow */
		pg_strmap_free(&m);
		b->oom = true;
		return false;
	}
	at = rec_begin(b, PG_JD_INLINE_INFO, ts_at);
	pg_buf_u64(b, f->addr);
	pg_buf_u32(b, (uint32_t)m.n);
	pg_buf_u32(b, (uint32_t)x->ninlines);
	for (size_t i = 0; i < m.n && ok; i++) {
		pg_buf_str(b, m.keys[i]);
		ok = b->len - at <= UINT32_MAX;
	}
	for (size_t i = 0; i < x->ninlines && ok; i++) {
		const struct pg_jit_inline *in = &x->inlines[i];

		pg_buf_u32(b, (uint32_t)(in->addr - f->addr));
		pg_buf_u32(b, (uint32_t)in->size);
		pg_buf_u32(b, in->nframes);
		for (uint32_t k = 0; k < in->nframes; k++) {
			const struct pg_jit_frame *fr = &in->frames[k];

			pg_buf_u32(b, string_index(&m, fr->func));
			pg_buf_u32(b, fr->file ? string_index(&m, fr->file) : NO_STRING);
			pg_buf_u32(b, fr->line);
		}
		ok = b->len - at <= UINT32_MAX && in->size <= UINT32_MAX &&
		     in->addr - f->addr <= UINT32_MAX;
	}
	pg_strmap_free(&m);
	pad8(b, at);
	return ok && rec_end(b, at, 0);
}

int pg_jitwriter_load(pg_jitwriter *w, const struct pg_jit_func *f, uint64_t *code_index,
		      struct pg_diag *diag)
{
	return pg_jitwriter_load_ext(w, f, NULL, code_index, diag);
}

int pg_jitwriter_load_ext(pg_jitwriter *w, const struct pg_jit_func *f,
			  const struct pg_jit_func_ext *user_ext, uint64_t *code_index,
			  struct pg_diag *diag)
{
	struct pg_buf b = { .big_endian = HOST_BE };
	struct pg_jit_func_ext ext;
	size_t ts_at[4], nts = 0, at, idx_at;
	const char *prev = NULL;
	struct iovec iov[2];
	uint64_t ts, idx = 0;
	int ret;

	if (!w)
		return pg_err(diag, -EINVAL, "pg_jitwriter_load: no writer");
	if ((ret = check_func(w, f, diag)) < 0)
		return ret;
	if (pg_sized_in(&ext, sizeof(ext), user_ext) < 0)
		return pg_err(diag, -EINVAL, "%s: function \"%s\": extensions this library does not know (sz %zu)",
			      w->path, f->name, user_ext->sz);
	if ((ret = check_inlines(w, f, &ext, diag)) < 0)
		return ret;
	if ((uint32_t)getpid() != w->pid)
		return check_usable(w, diag);

	if (f->nlines) {
		at = rec_begin(&b, PG_JD_DEBUG_INFO, &ts_at[nts++]);
		pg_buf_u64(&b, f->addr);
		pg_buf_u64(&b, f->nlines);
		for (size_t i = 0; i < f->nlines; i++) {
			const struct pg_jit_line *l = &f->lines[i];

			if (l->file)
				prev = l->file;
			pg_buf_u64(&b, l->addr);
			pg_buf_u32(&b, l->line);
			pg_buf_u32(&b, l->discrim);
			pg_buf_str(&b, prev);
			if (b.oom || b.len - at > UINT32_MAX)
				break;
		}
		pad8(&b, at);
		if (!rec_end(&b, at, 0)) {
			pg_buf_free(&b);
			return pg_err(diag, -EINVAL,
				      "%s: function \"%s\": %zu line rows do not fit a DEBUG_INFO record (4 GiB)",
				      w->path, f->name, f->nlines);
		}
	}
	if (f->unwind) {
		const struct pg_jit_unwind *u = f->unwind;

		at = rec_begin(&b, PG_JD_UNWINDING_INFO, &ts_at[nts++]);
		pg_buf_u64(&b, u->size);
		pg_buf_u64(&b, u->eh_frame_hdr_size);
		pg_buf_u64(&b, u->mapped_size);
		if (u->size <= UINT32_MAX)
			pg_buf_add(&b, u->data, (size_t)u->size);
		pad8(&b, at);
		if (u->size > UINT32_MAX || !rec_end(&b, at, 0)) {
			pg_buf_free(&b);
			return pg_err(diag, -EINVAL,
				      "%s: function \"%s\": a %llu-byte unwind blob does not fit an UNWINDING_INFO record (4 GiB)",
				      w->path, f->name, (unsigned long long)u->size);
		}
	}
	if (ext.ninlines && !encode_inlines(&b, f, &ext, &ts_at[nts++])) {
		bool oom = b.oom;

		pg_buf_free(&b);
		return pg_err(diag, oom ? -ENOMEM : -EINVAL,
			      "%s: function \"%s\": %zu inline chains do not fit an INLINE_INFO record (4 GiB)",
			      w->path, f->name, ext.ninlines);
	}
	at = rec_begin(&b, PG_JD_LOAD, &ts_at[nts++]);
	pg_buf_u32(&b, w->pid);
	pg_buf_u32(&b, thread_id());
	pg_buf_u64(&b, f->addr);	/* vma */
	pg_buf_u64(&b, f->addr);	/* code_addr */
	pg_buf_u64(&b, f->code_size);
	idx_at = b.len;
	pg_buf_u64(&b, 0);
	pg_buf_str(&b, f->name);
	if (f->code_size > UINT32_MAX || !rec_end(&b, at, f->code_size)) {
		pg_buf_free(&b);
		return pg_err(diag, -EINVAL,
			      "%s: function \"%s\": %llu bytes of code and the name do not fit a LOAD record (4 GiB)",
			      w->path, f->name, (unsigned long long)f->code_size);
	}
	if (b.oom) {
		pg_buf_free(&b);
		return pg_err(diag, -ENOMEM, "%s: function \"%s\": out of memory", w->path,
			      f->name);
	}
	iov[0].iov_base = b.p;
	iov[0].iov_len = b.len;
	iov[1].iov_base = (void *)(f->code ? f->code : (const void *)(uintptr_t)f->addr);
	iov[1].iov_len = (size_t)f->code_size;

	pthread_mutex_lock(&w->lock);
	ret = check_usable(w, diag);
	if (ret == 0) {
		ts = mono_ns();
		idx = w->next_index;
		for (size_t i = 0; i < nts; i++)
			pg_buf_put64(&b, ts_at[i], ts);
		pg_buf_put64(&b, idx_at, idx);
		ret = write_at_end(w, iov, 2, nts > 1 ? "a function's records" : "a LOAD record",
				   diag);
		if (ret == 0)
			w->next_index++;
	}
	pthread_mutex_unlock(&w->lock);
	pg_buf_free(&b);
	if (ret == 0 && code_index)
		*code_index = idx;
	return ret;
}

/* Writes a one-record buffer that names code_index (MOVE, UNLOAD): checks
 * the index under the lock, stamps the time, appends.  Frees b. */
static int write_indexed(pg_jitwriter *w, struct pg_buf *b, size_t ts_at, uint64_t code_index,
			 const char *rec, const char *what, struct pg_diag *diag)
{
	struct iovec iov = { .iov_base = b->p, .iov_len = b->len };
	int ret;

	if (b->oom) {
		pg_buf_free(b);
		return pg_err(diag, -ENOMEM, "%s: %s: out of memory", w->path, rec);
	}
	pthread_mutex_lock(&w->lock);
	ret = check_usable(w, diag);
	if (ret == 0 && (code_index < 1 || code_index >= w->next_index))
		ret = pg_err(diag, -EINVAL,
			     "%s: %s of code_index %llu, which this writer did not hand out (1..%llu so far)",
			     w->path, rec, (unsigned long long)code_index,
			     (unsigned long long)(w->next_index - 1));
	if (ret == 0) {
		pg_buf_put64(b, ts_at, mono_ns());
		ret = write_at_end(w, &iov, 1, what, diag);
	}
	pthread_mutex_unlock(&w->lock);
	pg_buf_free(b);
	return ret;
}

int pg_jitwriter_move(pg_jitwriter *w, uint64_t code_index, uint64_t old_addr,
		      uint64_t new_addr, uint64_t code_size, struct pg_diag *diag)
{
	struct pg_buf b = { .big_endian = HOST_BE };
	size_t ts_at;

	if (!w)
		return pg_err(diag, -EINVAL, "pg_jitwriter_move: no writer");
	if (!code_size || old_addr > UINT64_MAX - code_size || new_addr > UINT64_MAX - code_size)
		return pg_err(diag, -EINVAL,
			      "%s: MOVE of code_index %llu: %llu bytes from 0x%llx to 0x%llx is not a usable range",
			      w->path, (unsigned long long)code_index,
			      (unsigned long long)code_size, (unsigned long long)old_addr,
			      (unsigned long long)new_addr);
	if ((uint32_t)getpid() != w->pid)
		return check_usable(w, diag);

	rec_begin(&b, PG_JD_MOVE, &ts_at);
	pg_buf_u32(&b, w->pid);
	pg_buf_u32(&b, thread_id());
	pg_buf_u64(&b, new_addr);	/* vma: where it is now */
	pg_buf_u64(&b, old_addr);
	pg_buf_u64(&b, new_addr);
	pg_buf_u64(&b, code_size);
	pg_buf_u64(&b, code_index);
	rec_end(&b, 0, 0);
	return write_indexed(w, &b, ts_at, code_index, "MOVE", "a MOVE record", diag);
}

int pg_jitwriter_unload(pg_jitwriter *w, uint64_t code_index, uint64_t addr,
			uint64_t code_size, struct pg_diag *diag)
{
	struct pg_buf b = { .big_endian = HOST_BE };
	size_t ts_at;

	if (!w)
		return pg_err(diag, -EINVAL, "pg_jitwriter_unload: no writer");
	if ((uint32_t)getpid() != w->pid)
		return check_usable(w, diag);
	rec_begin(&b, PG_JD_UNLOAD, &ts_at);
	pg_buf_u32(&b, w->pid);
	pg_buf_u32(&b, thread_id());
	pg_buf_u64(&b, addr);
	pg_buf_u64(&b, code_size);
	pg_buf_u64(&b, code_index);
	rec_end(&b, 0, 0);
	return write_indexed(w, &b, ts_at, code_index, "UNLOAD", "an UNLOAD record", diag);
}

int pg_jitwriter_close(pg_jitwriter *w, struct pg_diag *diag)
{
	int ret = 0;

	if (!w)
		return 0;
	if ((uint32_t)getpid() == w->pid) {
		if (w->failed) {
			ret = check_usable(w, diag);
		} else {
			struct pg_buf b = { .big_endian = HOST_BE };
			size_t ts_at;
			struct iovec iov;

			rec_begin(&b, PG_JD_CLOSE, &ts_at);
			rec_end(&b, 0, 0);
			pg_buf_put64(&b, ts_at, mono_ns());
			if (b.oom) {
				ret = pg_err(diag, -ENOMEM, "%s: CLOSE: out of memory", w->path);
			} else {
				iov.iov_base = b.p;
				iov.iov_len = b.len;
				ret = write_at_end(w, &iov, 1, "the CLOSE record", diag);
			}
			pg_buf_free(&b);
		}
	}
	if (w->marker)
		munmap(w->marker, w->marker_len);
	if (w->fd >= 0 && close(w->fd) < 0 && errno != EINTR && ret == 0)
		ret = pg_err(diag, -errno, "%s: close: %s", w->path, strerror(errno));
	pthread_mutex_destroy(&w->lock);
	free(w->path);
	free(w);
	return ret;
}
