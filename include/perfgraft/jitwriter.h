/* SPDX-License-Identifier: MIT */
/* jitdump writer: for JIT authors who want perf (and perfgraft) to name,
 * line-map and unwind their generated code.
 *
 *	struct pg_jitwriter_opts o = { .sz = sizeof(o) };	// $JITDUMPDIR / $HOME convention
 *	struct pg_diag d = { 0 };
 *	pg_jitwriter *w;
 *	if (pg_jitwriter_open(&o, &d, &w) < 0) { fputs(d.err, stderr); ... }
 *	...generate code, make it executable, then BEFORE it first runs:
 *	struct pg_jit_func f = { .name = "fib", .addr = (uintptr_t)code,
 *				 .code_size = n, .lines = rows, .nlines = k };
 *	uint64_t idx;
 *	if (pg_jitwriter_load(w, &f, &idx, &d) < 0) ...
 *	...
 *	pg_jitwriter_close(w, &d);
 *
 *	perf record -k mono ... ./myjit ; perfgraft inject -i perf.data
 *	(or perf inject --jit)
 *
 * Where the dump goes (pg_jitwriter_opts.dir).  The file is named
 * jit-<pid>.dump, <pid> being getpid() of the opening process: perf (6.1)
 * finds only that name, and ignores a dump whose digits are not the tgid
 * of the process that mapped it.  (pg_jitwriter_open_as() takes another
 * name; perfgraft inject finds such a dump by its header.)
 *   - dir set: <dir>/jit-<pid>.dump.  The directory must exist.  "." is the
 *     current directory (what V8/node --perf-prof and wasmtime do); any
 *     relative dir is taken from the current directory at open time.
 *   - dir NULL: the convention of perf's own JVMTI agent
 *     (tools/perf/jvmti/jvmti_agent.c):
 *	  <base>/.debug/jit/<prefix>-<YYYYMMDD>.XXXXXXXX/jit-<pid>.dump
 *     where <base> is $JITDUMPDIR if set and not empty, else $HOME if set and
 *     not empty, else "." (the agent's fallback too; the agent, unlike this
 *     writer, takes an empty variable as the root directory); <base>/.debug and
 *     <base>/.debug/jit are created with mode 0755 when missing; the last
 *     directory is made by mkdtemp(3) (mode 0700, eight random characters);
 *     YYYYMMDD is today's local date; <prefix> is opts.prefix ("jit" when
 *     NULL; the JVMTI agent's is "java-jit").  The variables are read with
 *     secure_getenv(3): a set-uid/set-gid program ignores them.
 * Either way, pg_jitwriter_path() gives the absolute path of the dump.
 * The file is created with O_NOFOLLOW (a symlink in its place is refused);
 * its mode is opts.mode (0: 0644) minus the umask.  On a failed open
 * nothing is left behind: neither the file nor the mkdtemp directory.
 *
 * One writer per dump.  The writer holds an exclusive flock(2) on the
 * dump until pg_jitwriter_close().  A second open of the same file, by
 * this process (the JIT's library or the JVMTI agent loaded twice: flock
 * locks belong to the open file, so they conflict within one process
 * too) or by another, fails with -EBUSY and one message, and leaves the
 * file alone: the first writer goes on writing a whole dump.  The file is
 * truncated only once the lock is held, so a dump that no writer holds
 * (left by an earlier, perhaps crashed, process with the same pid) is
 * replaced as before.  On a file system without flock locks the dump is
 * written unlocked; on NFS, where Linux emulates flock with POSIX locks,
 * only writers of other processes are kept out: a second writer in the
 * same process gets the lock, truncates the first one's dump and writes
 * over it, and closing either drops the lock for both.  A child of
 * fork() shares the parent's lock (the same open file) until it closes
 * its copy or execs (the descriptor is close-on-exec).  A file removed or
 * replaced under the name between the open and the lock (a writer that
 * failed removes its file before it unlocks) is let go and the name
 * opened again.
 *
 * What perf needs to find it.  perf never scans directories: pg_jitwriter_open()
 * maps the first page of the dump PROT_READ|PROT_EXEC, MAP_PRIVATE (as V8
 * and the JVMTI agent do), so that `perf record` records an MMAP event
 * naming the file; `perf inject --jit` and `perfgraft inject` find it
 * there.  The mapping is kept until pg_jitwriter_close().  A file system
 * mounted noexec refuses that mapping: open then fails (-EPERM/-EACCES)
 * and says so.  Do not unlink the dump before the injection: perf does not
 * read "(deleted)" files.
 *
 * What is written.  A 40-byte header (magic 0x4A695444 in host byte
 * order, version 1, e_machine of the target this library was built for,
 * pad 0, pid, CLOCK_MONOTONIC time of the open in ns, flags 0), then, per
 * call, complete records in the format of perf's jitdump specification:
 *   pg_jitwriter_load():  [DEBUG_INFO] [UNWINDING_INFO] LOAD
 *   pg_jitwriter_load_ext(): [DEBUG_INFO] [UNWINDING_INFO] [INLINE_INFO] LOAD
 *   pg_jitwriter_move():  MOVE
 *   pg_jitwriter_unload(): UNLOAD (INLINE_INFO and UNLOAD are perfgraft's
 *                         extension records, docs/jitdump-extensions.md)
 *   pg_jitwriter_close(): CLOSE
 * Every record time is clock_gettime(CLOCK_MONOTONIC) in ns, taken under
 * the writer's lock, so times never decrease in file order.  Record them
 * with `perf record -k mono` (-k 1): perf compares these times with the
 * sample times and refuses other clocks.  The DEBUG_INFO and
 * UNWINDING_INFO records of a function precede its LOAD, as perf requires
 * (they are pending state for the next LOAD).  DEBUG_INFO is padded to a
 * multiple of 8 bytes, UNWINDING_INFO likewise (both allowed: readers walk
 * entries by count); file names are written in full in every entry (the
 * "\xff" shorthand is never produced; some readers do not know it).
 *
 * Crash safety.  Each call builds its records completely in memory and
 * hands them to the kernel with one pwritev(2) (retried from where it
 * stopped after a short write), so the file only ever grows by whole
 * records, and a group (DEBUG_INFO+UNWINDING_INFO+LOAD) is never split by
 * another thread's records.  Nothing is buffered in user space across
 * calls: what a call wrote is in the file (page cache) when it returns and
 * survives the process being killed (nothing is fsync'ed: a crash of the
 * whole machine may still lose the last records).  A process killed DURING a write can
 * leave one partial record or group at the end of the file; perf stops
 * there silently, perfgraft reports it as a truncated tail (a warning) and
 * uses everything before it.  If a write fails (ENOSPC, EFBIG, EIO...),
 * whatever part of it reached the file is cut off again (ftruncate) and the
 * call fails; the writer stays usable.  Should that cut fail too, the
 * writer refuses every later record (the error of the original failure is
 * returned again) rather than append after a partial one.
 *
 * code_index.  Each LOAD gets the next value of a per-writer counter,
 * starting at 1 (as the JVMTI agent, .NET and CPython do); it is returned
 * so that a later MOVE can name the code.  Values are unique within one
 * dump file only.
 *
 * Threads.  pg_jitwriter_load(), pg_jitwriter_move(), pg_jitwriter_path()
 * and pg_jitwriter_pid() may be called from any number of threads at once
 * on the same writer (a mutex serializes the writes; the work of encoding
 * a record is done outside it).  pg_jitwriter_open() and
 * pg_jitwriter_close() must not run concurrently with any other call on the
 * same writer: close only after every other thread is done with it.
 *
 * fork().  The writer belongs to the process that opened it (the pid is in
 * the file name and every record).  In a child after fork(), load and move
 * fail with -ECHILD and close only releases the child's copies of the
 * memory, descriptor and mapping, writing nothing; a child that JITs must
 * open a writer of its own.  The descriptor is close-on-exec.
 *
 * Errors.  Functions returning int give 0 on success and a negative errno
 * on failure; the message (naming the dump and, for I/O errors, the byte
 * offset) goes to the struct pg_diag passed to that call, which may be
 * NULL.  A diag is written only by the call it is passed to: give each
 * thread its own.  Invalid arguments are -EINVAL and write nothing.
 * There is no global state. */
#ifndef PERFGRAFT_JITWRITER_H
#define PERFGRAFT_JITWRITER_H

#include <perfgraft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pg_jitwriter pg_jitwriter;

struct pg_jitwriter_opts {
	/* sizeof(struct pg_jitwriter_opts): fields are only ever added at
	 * the end; a zeroed struct with sz set gives the defaults. */
	size_t sz;
	/* Directory of the dump; "." is the current directory.  NULL: the
	 * $JITDUMPDIR / $HOME / "." convention described above. */
	const char *dir;
	/* dir NULL only: first part of the mkdtemp directory's name
	 * ("<prefix>-YYYYMMDD.XXXXXXXX"); NULL: "jit".  At most 64 bytes, no
	 * '/', not "." or "..". */
	const char *prefix;
	/* Mode bits of the new file (masked by the umask); 0: 0644. */
	unsigned mode;
};

/* One row of a function's line table (a DEBUG_INFO entry). */
struct pg_jit_line {
	uint64_t addr;		/* address of the first instruction of the row,
				 * in [func.addr, func.addr + code_size) */
	uint32_t line;		/* 1-based source line */
	uint32_t discrim;	/* DWARF discriminator (V8 puts the 1-based
				 * column here); perf ignores it; 0 if unsure */
	const char *file;	/* source file name, any bytes but NUL; NULL:
				 * the same as the previous row (not allowed
				 * in the first row) */
};

/* Unwind tables of a function (an UNWINDING_INFO record): one blob holding
 * .eh_frame followed by .eh_frame_hdr (the order every producer and perf
 * use; the specification's sentence saying otherwise is wrong).  Their
 * pc-relative and data-relative encodings must be right for .eh_frame
 * placed at func.addr + align8(code_size) and .eh_frame_hdr right after
 * it, which is where perf's image puts them.  mapped_size: the number of
 * bytes of the blob that really are in memory at that address (the blob's
 * size when the JIT put them there), or 0 when they are not; perf then
 * maps the function as align8(code_size) + mapped_size bytes. */
struct pg_jit_unwind {
	const void *data;
	uint64_t size;			/* eh_frame + eh_frame_hdr, > 0 */
	uint64_t eh_frame_hdr_size;	/* <= size */
	uint64_t mapped_size;
};

/* A piece of generated code to announce. */
struct pg_jit_func {
	const char *name;	/* symbol name (NUL-terminated, any bytes) */
	uint64_t addr;		/* where the code is (and runs) in this process */
	const void *code;	/* its bytes to copy into the dump; NULL: read
				 * code_size bytes at addr (the code must then
				 * be readable there) */
	uint64_t code_size;	/* > 0 */
	const struct pg_jit_line *lines;	/* sorted by addr (ascending,
						 * equal allowed); may be NULL
						 * when nlines is 0 */
	size_t nlines;		/* 0: no DEBUG_INFO record */
	const struct pg_jit_unwind *unwind;	/* NULL: no UNWINDING_INFO */
};

/* One function of an inline chain: its name and the line it is at (the
 * innermost frame's executing line, an outer frame's line of the call). */
struct pg_jit_frame {
	const char *func;	/* NUL-terminated, not NULL */
	const char *file;	/* source file; NULL: not given */
	uint32_t line;		/* 1-based; 0: not known */
};

/* Code [addr, addr + size) runs frames[0], inlined into frames[1], ...
 * inlined into frames[nframes - 1], the announced function itself. */
struct pg_jit_inline {
	uint64_t addr;
	uint64_t size;		/* > 0 */
	uint32_t nframes;	/* 2 .. 1024 */
	const struct pg_jit_frame *frames;	/* innermost first */
};

/* What pg_jitwriter_load_ext() adds to a function: perfgraft's extension
 * records (docs/jitdump-extensions.md), which perf skips. */
struct pg_jit_func_ext {
	size_t sz;		/* sizeof(struct pg_jit_func_ext): fields are
				 * only ever added at the end */
	const struct pg_jit_inline *inlines;	/* sorted by addr, not
						 * overlapping, inside the code */
	size_t ninlines;	/* 0: no INLINE_INFO record */
};

/* Creates the dump (see "Where the dump goes"), writes its header and maps
 * its first page executable.  opts is read during the call only; NULL
 * gives all the defaults.  opts->sz is the caller's
 * sizeof(struct pg_jitwriter_opts): fields past it read as zero, and
 * bytes past this library's struct must be zero (else -EINVAL, as for sz
 * below sizeof(size_t)).  On success
 * *out is a writer to release with pg_jitwriter_close().  On failure
 * returns a negative errno (-EINVAL bad opts, -ENOENT/-ENOTDIR dir missing,
 * -ELOOP a symlink in the dump's place, -EBUSY another writer holds the
 * dump (see "One writer per dump"; its file is left as it was),
 * -EPERM/-EACCES not creatable or a noexec mount, -ENOMEM, or the I/O
 * error), diag->err names the path, and nothing is left on disk. */
int pg_jitwriter_open(const struct pg_jitwriter_opts *opts, struct pg_diag *diag,
		      pg_jitwriter **out);

/* pg_jitwriter_open() with file_name instead of jit-<pid>.dump (NULL: that
 * default), in the same directory, with the same header, marker and
 * rules.  For producers with a naming of their own and for testing
 * discovery: JavaScriptCore (Bun, WebKit) names its dump
 * jit-<tid>-<pid>.dump.  perf inject --jit (6.1) finds only
 * jit-<pid>.dump; perfgraft inject finds any name the process mapped, by
 * the header's magic and pid.  file_name: 1..NAME_MAX bytes, no '/', not
 * "." or ".." (else -EINVAL). */
int pg_jitwriter_open_as(const struct pg_jitwriter_opts *opts, const char *file_name,
			 struct pg_diag *diag, pg_jitwriter **out);

/* Absolute path of the dump; owned by the writer, valid until
 * pg_jitwriter_close(). */
const char *pg_jitwriter_path(const pg_jitwriter *w);

/* The pid in the dump's name and header (the opening process). */
uint32_t pg_jitwriter_pid(const pg_jitwriter *w);

/* Announces func: writes its DEBUG_INFO (when nlines > 0), UNWINDING_INFO
 * (when unwind is set) and LOAD records as one contiguous group, with the
 * calling thread's tid, and stores its new code_index in *code_index
 * (which may be NULL).  Call it after the code is in place and before it
 * first runs: samples taken before the LOAD's time are not attributed to
 * it.  The caller's memory (name, code, lines, unwind data) is only read
 * during the call.  Returns 0, -EINVAL for invalid arguments (a NULL or
 * empty function, rows outside the code or out of order, a first row
 * without a file, inconsistent unwind sizes, a group too large for the
 * format's 32-bit record sizes), -ENOMEM, -ECHILD (after fork), or the
 * errno of a failed write; nothing is left in the file on failure. */
int pg_jitwriter_load(pg_jitwriter *w, const struct pg_jit_func *func,
		      uint64_t *code_index, struct pg_diag *diag);

/* pg_jitwriter_load() with the function's inline chains (ext NULL: the
 * same as pg_jitwriter_load()): an INLINE_INFO record goes into the
 * group, before the LOAD.  ext->sz follows the rule of the opts structs
 * (fields past it read as zero; bytes past this library's struct must be
 * zero).  -EINVAL as pg_jitwriter_load(), and for a chain outside the
 * code, empty, out of order or overlapping the one before, with fewer than
 * 2 or more than 1024 frames, or a frame without a function name. */
int pg_jitwriter_load_ext(pg_jitwriter *w, const struct pg_jit_func *func,
			  const struct pg_jit_func_ext *ext, uint64_t *code_index,
			  struct pg_diag *diag);

/* Announces that the code of LOAD code_index, code_size bytes at addr
 * (0: size not known), is gone: an UNLOAD record (perfgraft's extension;
 * perf skips it).  Addresses reused later are named by the LOAD that
 * reuses them, whether or not this is written.  Returns 0, -EINVAL for a
 * code_index this writer did not hand out, -ENOMEM, -ECHILD (after fork),
 * or the errno of a failed write. */
int pg_jitwriter_unload(pg_jitwriter *w, uint64_t code_index, uint64_t addr,
			uint64_t code_size, struct pg_diag *diag);

/* Announces that the code of LOAD code_index (code_size bytes) was copied
 * from old_addr to new_addr and now runs there (a MOVE record; the
 * symbol, lines and unwind tables go with it).  perf keeps the old range
 * mapped to the function too; a JIT that reuses old_addr for other code
 * must load that code again.  Returns 0, -EINVAL for a code_index this
 * writer did not hand out, a zero code_size or overflowing ranges,
 * -ECHILD (after fork), or the errno of a failed write. */
int pg_jitwriter_move(pg_jitwriter *w, uint64_t code_index, uint64_t old_addr,
		      uint64_t new_addr, uint64_t code_size, struct pg_diag *diag);

/* Writes the CLOSE record, unmaps the marker page, closes the file and
 * frees the writer, whatever fails on the way (w is gone after the call;
 * NULL is accepted and does nothing).  Returns 0, or the negative errno of
 * the failed CLOSE write or close(2) (the file then still holds every
 * record written before). */
int pg_jitwriter_close(pg_jitwriter *w, struct pg_diag *diag);

#ifdef __cplusplus
}
#endif
#endif
