/* SPDX-License-Identifier: MIT */
/* Internal helpers shared by the modules: diagnostics, growable buffers,
 * string interning and atomic output files. */
#ifndef PG_UTIL_H
#define PG_UTIL_H

#include <perfgraft/common.h>
#include <stdarg.h>
#include <string.h>
#include <sys/uio.h>

#if defined(__GNUC__)
#define PG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PG_PRINTF(a, b)
#endif

/* Sets diag->err and returns err (a negative errno). */
int pg_err(struct pg_diag *d, int err, const char *fmt, ...) PG_PRINTF(3, 4);
/* Called by pg_err after the message is set: pg_inputs_blame, once an
 * input is mapped. */
#include <stdatomic.h>
typedef void (*pg_err_hook_fn)(struct pg_diag *d, int err);
extern _Atomic(pg_err_hook_fn) pg_err_hook;
void pg_warn(struct pg_diag *d, const char *fmt, ...) PG_PRINTF(2, 3);

/* A symbol's name as perf shows it (util/demangle.c): C++ demangled with
 * its parameters, Rust legacy names without their hash; other names as
 * they are.  malloc()ed; NULL when out of memory. */
char *pg_demangle(const char *name);

/* Growable byte buffer that encodes integers in a chosen byte order. */
struct pg_buf {
	uint8_t *p;
	size_t len, cap;
	bool big_endian;
	bool oom;		/* sticky: an allocation failed */
};
void pg_buf_free(struct pg_buf *b);
void *pg_buf_reserve(struct pg_buf *b, size_t n);	/* NULL on OOM */
void pg_buf_add_slow(struct pg_buf *b, const void *p, size_t n);
void pg_buf_uleb_slow(struct pg_buf *b, uint64_t v);

/* The appends below are inline for the room they find: the DWARF line
 * program and DIEs are written a byte or a few at a time, and a call
 * into buf.c per byte was a tenth of the image's building. */
static inline void pg_buf_add(struct pg_buf *b, const void *p, size_t n)
{
	if (!b->oom && n <= b->cap - b->len) {
		if (n)
			memcpy(b->p + b->len, p, n);
		b->len += n;
		return;
	}
	pg_buf_add_slow(b, p, n);
}

static inline void pg_buf_u8(struct pg_buf *b, uint8_t v)
{
	if (!b->oom && b->len < b->cap) {
		b->p[b->len++] = v;
		return;
	}
	pg_buf_add_slow(b, &v, 1);
}

/* the one-byte values inline (most of a line program's operands) */
static inline void pg_buf_uleb(struct pg_buf *b, uint64_t v)
{
	if (v < 0x80)
		pg_buf_u8(b, (uint8_t)v);
	else
		pg_buf_uleb_slow(b, v);
}
void pg_buf_u16(struct pg_buf *b, uint16_t v);
void pg_buf_u32(struct pg_buf *b, uint32_t v);
void pg_buf_u64(struct pg_buf *b, uint64_t v);
void pg_buf_uaddr(struct pg_buf *b, uint64_t v, unsigned size);
void pg_buf_sleb(struct pg_buf *b, int64_t v);
void pg_buf_str(struct pg_buf *b, const char *s);	/* with its NUL */
void pg_buf_put32(struct pg_buf *b, size_t at, uint32_t v);
void pg_buf_put64(struct pg_buf *b, size_t at, uint64_t v);

/* Makes room for n elements of size elem in *v (capacity *cap, doubling
 * from 16); returns false, leaving *v as it was, on overflow or OOM. */
bool pg_grow(void **v, size_t *cap, size_t n, size_t elem);

/* String -> dense index (first seen = 0).  Keys are not copied. */
struct pg_strmap {
	const char **keys;	/* by index */
	uint32_t *slots;	/* index + 1, 0 = empty */
	size_t n, nslots, cap;
};
/* Returns the index, or -1 on OOM; *added tells whether it is new. */
long pg_strmap_intern(struct pg_strmap *m, const char *key, bool *added);
void pg_strmap_free(struct pg_strmap *m);

/* u64 key -> a value of vsize bytes (8-aligned), with deletion.  Lookups
 * only: there is no walk, so no output depends on slot order. */
struct pg_u64map {
	uint8_t *state;		/* per slot: empty, used or deleted */
	uint8_t *slots;		/* per slot: key, then value (stride bytes) */
	size_t vsize, stride, nslots, n, ndead;
};
#define PG_U64MAP_INIT(vsz) { .vsize = (vsz), .stride = 8 + (((vsz) + 7) & ~(size_t)7) }
void pg_u64map_init(struct pg_u64map *m, size_t vsize);
/* The value of key, or NULL. */
void *pg_u64map_get(const struct pg_u64map *m, uint64_t key);
/* The value of key, zeroed when key is new (*added, if given, says so);
 * NULL on OOM.  A pointer is valid until the next put. */
void *pg_u64map_put(struct pg_u64map *m, uint64_t key, bool *added);
/* Removes key; false when it was not there. */
bool pg_u64map_del(struct pg_u64map *m, uint64_t key);
static inline size_t pg_u64map_count(const struct pg_u64map *m) { return m->n; }
void pg_u64map_free(struct pg_u64map *m);

/* Disjoint spans [start, end) painted over each other, each with the
 * time it was painted (from) and a value.  A zeroed struct is an empty
 * one. */
struct pg_paint_node {
	uint64_t start, end, from;
	uint32_t val, prio, l, r;
};
struct pg_paint {
	struct pg_paint_node *n;
	size_t len, cap;
	uint32_t free_head, root, rnd;
	bool init;
	uint32_t *stack;	/* walks */
	size_t stack_cap;
	/* Paints one after another (a JIT filling its code space, fresh or
	 * freed) skip the treap: in that mode (cur) root holds the spans
	 * below run[]'s, which were painted since or passed over, the treap
	 * rroot those from cursor on, spine its left spine (its first span
	 * on top). */
	uint32_t *run, *spine;
	size_t run_n, run_cap, spine_n, spine_cap;
	uint32_t rroot;
	uint64_t cursor, last_end;
	bool cur;
};
/* A part [start, end) of a span, with its from and val; nonzero stops. */
typedef int (*pg_paint_fn)(void *ctx, uint64_t start, uint64_t end, uint64_t from, uint32_t val);
/* Paints [start, end) with (from, val): fn (if not NULL) is called for
 * each part of the earlier spans it covers, clipped to it, by address;
 * those parts are gone after.  Returns 0, -ENOMEM or fn's nonzero value;
 * on an error the spans are lost (free it). */
int pg_paint(struct pg_paint *p, uint64_t start, uint64_t end, uint64_t from, uint32_t val,
	     pg_paint_fn fn, void *ctx);
/* fn for every span, by address. */
int pg_paint_each(struct pg_paint *p, pg_paint_fn fn, void *ctx);
void pg_paint_free(struct pg_paint *p);

/* Output files written beside their final name and renamed into place:
 * never through a symlink, never in place.  An existing device, FIFO or
 * socket is the exception: it is opened and written directly.  The hidden
 * temporary file is registered with pg_cleanup_add() until it is renamed
 * or removed, and its name carries the pid (pg_tmpname). */
struct pg_outfile {
	int dirfd;
	int fd;
	bool direct;		/* not a regular file: written in place */
	bool tmp_exists;
	long reg;		/* pg_cleanup_add() handle, or -1 */
	char *tmpname;
	char *name;
	bool backup;		/* commit keeps the file it replaces as NAME.old */
};
/* Mode 0644 (less the umask), no backup. */
int pg_outfile_open(struct pg_outfile *f, int dirfd, const char *name,
		    struct pg_diag *d);
/* The same with the new file's mode bits (less the umask) and, when
 * backup is set, perf's habit for perf.data: at commit, and only then, a
 * non-empty regular file (or symlink to one) of the final name becomes
 * NAME.old (replacing any earlier NAME.old), so that a failed run renames
 * nothing.  An output written in place (a device, FIFO) has no backup. */
int pg_outfile_open_mode(struct pg_outfile *f, int dirfd, const char *name,
			 unsigned mode, bool backup, struct pg_diag *d);
/* Closes the file (its data is all written); the temporary stays until
 * pg_outfile_commit() or pg_outfile_abort().  On error it is removed. */
int pg_outfile_finish(struct pg_outfile *f, struct pg_diag *d);
/* Finishes (if needed) and renames the temporary into place. */
int pg_outfile_commit(struct pg_outfile *f, struct pg_diag *d);
/* The same, renamed to toname in the directory todirfd (on the same file
 * system) instead of its own name. */
int pg_outfile_commit_at(struct pg_outfile *f, int todirfd, const char *toname,
			 struct pg_diag *d);
void pg_outfile_abort(struct pg_outfile *f);
/* pg_outfile_open_mode's file without its allocations, for a caller that
 * keeps many (an image of each function): a temporary beside name,
 * registered for removal (*reg), whose name the caller makes again as
 * pg_tmpname(name, *rnd); or, when name is not a regular file (a device,
 * a FIFO), name itself opened to be written in place (*direct, no *rnd,
 * *reg -1).  The descriptor, or a negative errno. */
#define PG_TMP_RND_MASK 0xffffffu
int pg_tmpfile_open(int dirfd, const char *name, unsigned mode, bool *direct,
		    unsigned *rnd, long *reg, struct pg_diag *d);
/* pwrite() of all n bytes at off, through EINTR and short writes: 0, or
 * -1 with errno set (ENOSPC for a write that wrote nothing). */
int pg_pwrite_all(int fd, const void *p, size_t n, uint64_t off);

/* An image's build-id digest (ahash.c: XXH3-128, 20 bytes out). */
#define PG_DIGEST_SIZE 20
struct pg_digest;
struct pg_digest *pg_digest_new(void);	/* NULL: out of memory */
void pg_digest_update(struct pg_digest *d, const void *p, size_t len);
void pg_digest_final(struct pg_digest *d, uint8_t out[PG_DIGEST_SIZE]);
void pg_digest_free(struct pg_digest *d);
/* A piece's own digest (XXH3-128), which a digest can take in place of
 * the piece's bytes. */
#define PG_PIECE_DIGEST 16
void pg_digest_once(const void *p, size_t len, uint8_t out[PG_PIECE_DIGEST]);

/* Digest updates applied on a worker thread, in the order they were
 * queued (ahash.c); the caller reads a digest only after
 * pg_ahash_wait().  NULL (pg_ahash_new out of memory) or a machine of one
 * core: every update is applied at once, in the caller's thread. */
struct pg_ahash;
struct pg_ahash *pg_ahash_new(void);
/* p is borrowed: it must stay valid (and unchanged) until pg_ahash_wait */
void pg_ahash_update(struct pg_ahash *h, struct pg_digest *ctx, const void *p, size_t len);
/* a then b, copied (a stack array, a name the caller may free) */
void pg_ahash_update_copy(struct pg_ahash *h, struct pg_digest *ctx, const void *a, size_t alen,
			  const void *b, size_t blen);
/* Runs fn(arg) on the worker after what is queued (at once without one);
 * it must touch nothing the caller uses until pg_ahash_wait. */
void pg_ahash_run(struct pg_ahash *h, void (*fn)(void *), void *arg);
/* p's own digest (pg_digest_once) written into out, on the worker: out
 * and p are borrowed until pg_ahash_wait. */
void pg_ahash_digest_into(struct pg_ahash *h, const void *p, size_t len,
			  uint8_t out[PG_PIECE_DIGEST]);
/* Every update and job queued so far is done. */
void pg_ahash_wait(struct pg_ahash *h);
/* Waits until *flag is not 0 or the worker has nothing left to run (all
 * of it done), after handing over what is staged; a job run by
 * pg_ahash_run sets the flag and then calls pg_ahash_notify.  Returns at
 * once without a worker thread. */
void pg_ahash_wait_flag(struct pg_ahash *h, atomic_int *flag);
void pg_ahash_notify(struct pg_ahash *h);
void pg_ahash_free(struct pg_ahash *h);

/* Many pieces at increasing offsets in few pwritev() calls (one pwrite a
 * piece made the kernel's per-call work the bulk of writing an image).
 * A piece starting where the batch ends, or after a gap shorter than a
 * file system block inside [fill_lo, fill_hi) (written as zeros: the
 * bytes the hole reads as, in blocks the pieces around it allocate
 * anyway, so the file stays as sparse), joins the batch; any other piece
 * flushes it first, so pieces land in the order they were added. */
#define PG_GATHER_IOV 256
struct pg_gather {
	int fd;
	unsigned gap;		/* the longest gap filled: below a block */
	uint64_t fill_lo, fill_hi;
	uint64_t start, end;	/* the batch: [start, end) */
	int n;
	struct iovec iov[PG_GATHER_IOV];
};
void pg_gather_init(struct pg_gather *g, int fd, uint64_t fill_lo, uint64_t fill_hi);
/* 0, or -1 with errno set, as pg_pwrite_all; p must stay valid until the
 * next flush. */
int pg_gather_add(struct pg_gather *g, const void *p, size_t n, uint64_t off);
int pg_gather_flush(struct pg_gather *g);

/* Bytes written into a file as they are digested (an image's code while
 * it is built, read once rather than again at the write): a pg_gather
 * batch on the worker, and the first write's errno. */
struct pg_ahash_sink {
	struct pg_gather g;
	int err;
};
/* As pg_ahash_update (ctx NULL: not digested), then p written at off into
 * the sink's file.  The sink is borrowed until pg_ahash_wait; p until the
 * sink's batch is written (pg_ahash_sink_flush, or a full batch), which
 * may be after several waits: the bytes of the input the image is made
 * of, not a copy. */
void pg_ahash_update_write(struct pg_ahash *h, struct pg_digest *ctx, const void *p, size_t len,
			   struct pg_ahash_sink *sink, uint64_t off);
/* After pg_ahash_wait: the last batch written; 0 or the first -errno. */
int pg_ahash_sink_flush(struct pg_ahash_sink *s);

/* Files to remove if the process is killed by a signal (see cleanup.c):
 * pg_cleanup_add() copies the name and keeps its own descriptor of the
 * directory; it returns a handle for pg_cleanup_del(), or -1 when it
 * cannot register (the file is then simply not removed on a signal).
 * pg_cleanup_run() is async-signal-safe: it removes every registered file,
 * then every registered directory (rmdir: only when empty). */
long pg_cleanup_add(int dirfd, const char *name, bool is_dir);
void pg_cleanup_del(long handle);
void pg_cleanup_run(void);
/* Blocks (or restores) SIGINT/SIGTERM/SIGHUP in the calling thread: for
 * the moment an output changes hands, and for worker threads. */
#include <signal.h>
void pg_block_fatal_signals(bool block, sigset_t *old);
/* ".NAME.pgtmp-PID-SPACE-RRRRRR" into buf (SPACE: 8 hex digits naming
 * this boot and pid namespace); -ENAMETOOLONG when it does not fit. */
int pg_tmpname(char *buf, size_t size, const char *name, unsigned rnd);
/* Removes the perfgraft temporary files in a directory whose process is
 * gone (a run killed with SIGKILL, in this boot and pid namespace), or
 * that nothing touched for a day; once per directory and process.
 * Returns how many. */
long pg_sweep_dead_temps(int dirfd);

/* The GNU build-id of an ELF (libelf handle, or a file that may not exist
 * or not be an ELF): its size (at most 20, into id), 0 when there is none. */
typedef struct Elf Elf;
unsigned pg_elf_build_id(Elf *elf, uint8_t id[20]);
unsigned pg_file_build_id(const char *path, uint8_t id[20]);

/* Sized structs (a leading size_t sz, the libbpf OPTS idiom); the size
 * is read from the caller's struct.  In: the caller's src (its sz bytes)
 * into ours (dst_size), zero-filled; -EINVAL when its sz cannot hold the
 * size field or it sets fields we do not know (non-zero bytes past
 * dst_size).  NULL src: all zero.  Out: ours (src_size) into the
 * caller's dst, as much as both have, the caller's sz kept as it is. */
int pg_sized_in(void *dst, size_t dst_size, const void *src);
void pg_sized_out(void *dst, const void *src, size_t src_size);
/* pg_sized_in() for options, with the message: "WHAT: no options" when
 * src is NULL and required, "WHAT: options this library does not know (sz
 * N)" when refused.  0 or -EINVAL. */
int pg_sized_opts(void *dst, size_t dst_size, const void *src, bool required,
		  const char *what, struct pg_diag *diag);

/* Maps a regular file read-only (*base NULL when it is empty). */
int pg_map_file(const char *path, bool sequential, struct pg_diag *diag,
		const uint8_t **base, size_t *size);
void pg_unmap_file(const uint8_t *base, size_t size);
/* Hands back the whole pages of [off, end) of a mapping made by
 * pg_map_file, once read: resident memory stays at what is being read,
 * not the file's size (the pages come back from the file if touched). */
void pg_release_mapped(const uint8_t *base, uint64_t off, uint64_t end);
/* Bytes of listed input mappings just read, at random places (a jitdump's
 * code is read when its record is, again when its image is hashed and
 * written): every PG_INPUTS_TRIM_BYTES of them, every listed mapping's
 * pages leave the process's page tables (MADV_DONTNEED; they stay in the
 * page cache and come back on the next touch), so that the resident part
 * of the inputs stays near that many bytes whatever their size. */
#define PG_INPUTS_TRIM_BYTES (8ull << 20)
void pg_inputs_touched(uint64_t bytes);

/* Inputs that change while mapped (mapfile.c).  pg_map_file lists its
 * mapping in a process-wide registry; a reader that maps a file itself
 * lists it with pg_map_register (size: the file's bytes mapped at base;
 * fd: the mapped file, kept for later checks when fd_stays, otherwise the
 * file is found again by name, device and inode) and calls
 * pg_map_unregister before munmap.  -1 when it cannot be listed (the
 * mapping is then unguarded: a shrink is SIGBUS).  pg_map_changed: the
 * SIGBUS handler found a read past the file's new end (zeros were read);
 * a cheap per-record test.  pg_inputs_check: 0, or -EIO with "NAME:
 * changed while being read" when any input of the process changed
 * (faulted, or now shorter than mapped); every commit calls it.
 * pg_inputs_blame (pg_err calls it through pg_err_hook): when an input changed, the message
 * names that instead (an error after it is most likely its effect); an
 * EFAULT first re-checks the sizes (a write from a lost page fails so,
 * without SIGBUS). */
long pg_map_register(const void *base, uint64_t size, const char *name, int fd, bool fd_stays);
void pg_map_unregister(long handle);
bool pg_map_changed(long handle);
bool pg_inputs_changed(void);	/* any pg_map_changed so far: one atomic load */
int pg_inputs_check(struct pg_diag *d);
void pg_inputs_blame(struct pg_diag *d, int err);

/* Text output (text.c).  Longer strings are cut when printed escaped: a
 * hostile dump that repeats a huge name would otherwise make the output
 * quadratic in its size. */
#include <stdio.h>
#define PG_MAX_PRINTED 4096
/* The value of hex digit c (either case), or -1. */
int pg_hexval(char c);
/* Length of the valid UTF-8 sequence at p, 0 if invalid. */
size_t pg_utf8_seq(const unsigned char *p);
/* "...(N bytes)": where a string s is cut at at. */
void pg_put_cut_note(FILE *f, const char *s, const char *at);
/* C-style escapes (\\, \t, \n, \xHH for control bytes and bad UTF-8). */
void pg_put_escaped(FILE *f, const char *s);
/* s as-is when it is plain printable ASCII (the fast common case),
 * escaped as pg_put_escaped otherwise. */
void pg_put_text(FILE *f, const char *s);
/* 0x-prefixed lower-case hex, and decimal, without stdio formatting. */
void pg_put_hex(FILE *f, uint64_t v);
void pg_put_dec(FILE *f, uint64_t v);

static inline uint64_t pg_align(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

#endif
