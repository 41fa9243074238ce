/* SPDX-License-Identifier: MIT */
/* perfgraft: shared conventions of the public API.
 *
 * Errors.  Functions return 0 (or a count, or 1 for "a record was
 * filled") on success and a negative errno on failure; the failure's
 * readable message, naming the file and byte offset for damaged input, is
 * left in the caller's struct pg_diag.  The errno values that matter:
 * -EINVAL for input that is damaged, unsupported or not of the expected
 * format (and for refused arguments), -ENOMEM, and the errno of the
 * system call that failed (-ENOENT, -EACCES, -EISDIR, -ENOSPC, -ESPIPE, ...)
 * for files.  Functions that cannot fail return void or a value.  Handle
 * arguments must be valid handles; of the release functions, all but
 * pg_pdw_close() accept NULL.  When an *_open / *_new fails nothing is
 * left allocated; *out is set to NULL (pg_perfdata_open*() leave it
 * untouched).
 *
 * Warnings.  Non-fatal findings (a truncated tail, an unknown record, a
 * dropped debug record) go to the diag's warn callback and the work goes
 * on with everything usable.
 *
 * Ownership.  Handles (opaque typedefs) are created by *_open / *_new and
 * released by the matching *_close / *_free, which also invalidates every
 * pointer obtained from the handle.  Unless a function says otherwise,
 * pointers it returns (or leaves in a struct) point into the handle or
 * into the mapped input and are valid until the handle is closed; input
 * strings and structs are copied, caller-owned buffers given to *_open_mem
 * must outlive the handle.
 *
 * Threads.  The library keeps no global state of its own: separate
 * handles, each with its own pg_diag, may be used by different threads at
 * once.  A handle (and the pg_diag it was given) is used by one thread at
 * a time unless its header says more.  Process-wide effects to know of:
 * pg_elfset_new(), pg_xray_map_open*() and pg_gperf_convert() (and
 * pg_inject() and pg_xray_convert() through them) call libelf's
 * elf_version(EV_CURRENT), which sets libelf's process-global version
 * (idempotent; it matters only to a program that uses libelf itself with
 * another version); the writers
 * pick temporary file names with rand(), which advances the process's
 * rand() sequence; "-" paths read standard input or write standard
 * output; a compressing perf.data writer runs worker threads of its own
 * (see perfdata.h); the XRay map (pg_xray_map_open*) demangles C++ and
 * Rust names with libstdc++'s __cxa_demangle, dlopen()ing libstdc++.so.6
 * the first time a name needs it (never closed).  No function but pg_install_sigbus_handler() installs
 * signal handlers, and none changes the locale or the working directory;
 * only the jitdump writer reads the environment ($JITDUMPDIR, $HOME, the
 * local date: see jitwriter.h).
 *
 * Inputs are mapped, not copied, and the mappings are listed process-wide:
 * a file that another process truncates while it is read is SIGBUS,
 * unless the program installed pg_install_sigbus_handler(); once an input
 * is found changed (it faulted, or it is shorter than when it was mapped),
 * every later commit of an output in the process fails with "FILE: changed
 * while being read" (-EIO).  Writes past RLIMIT_FSIZE fail with -EFBIG (a
 * write error like any other) when the program ignores SIGXFSZ. */
#ifndef PERFGRAFT_COMMON_H
#define PERFGRAFT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PG_ERRMSG_MAX 1024

/* Receives one warning: msg is NUL-terminated, without a trailing
 * newline, and valid only during the call (copy it to keep it).  It is
 * called synchronously, in the thread that called the library function,
 * with ctx as set in the pg_diag; it must not call back into the handle
 * that is reporting. */
typedef void (*pg_warn_fn)(void *ctx, const char *msg);

/* Diagnostics of one handle (or one call of a function without a handle).
 * Owned by the caller, zero-initialize it and set warn/ctx.  A handle
 * opened with a pg_diag keeps a pointer to it, so it must outlive the
 * handle (functions that take a pg_diag per call, as the jitdump writer's
 * do, use it during that call only); it must not be shared by handles or
 * calls running concurrently (nwarn and err are written without locks).
 * err is meaningful only after a negative return (it is not cleared on
 * success).  Messages longer than PG_ERRMSG_MAX - 1 bytes are
 * truncated. */
struct pg_diag {
	pg_warn_fn warn;	/* NULL: warnings are counted, not reported */
	void *ctx;
	unsigned long nwarn;	/* warnings issued so far */
	char err[PG_ERRMSG_MAX]; /* message of the last failure */
};

/* The library's version ("MAJOR.MINOR.PATCH", the project version and the
 * pkg-config --modversion), a static string.  Safe from any thread. */
const char *pg_version(void);

/* Installs a process-wide SIGBUS handler for the library's mapped inputs
 * (perfgraft(1) does).  A read past the end of an input that shrank while
 * mapped then reads zeros instead of killing the process, and the work
 * fails with "FILE: changed while being read" (-EIO) before it commits
 * an output: every later output commit of the process (pg_pdw_close,
 * pg_elfset_commit, ...) fails so, since the bytes read from it may be in
 * any of them, and a failure reported after it names it.  Any other SIGBUS goes to the handler installed before
 * this one, or, when there was none, removes the temporary files of
 * unfinished outputs and ends the process with SIGBUS as before.  Call it
 * once, before reading; later calls do nothing.  0 or a negative errno. */
int pg_install_sigbus_handler(void);

#ifdef __cplusplus
}
#endif
#endif
