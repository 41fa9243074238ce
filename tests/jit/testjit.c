/* SPDX-License-Identifier: MIT */
/* testjit: a small real x86-64 JIT that announces its code through the
 * library's jitdump writer (include/perfgraft/jitwriter.h).  Driven by
 * tests/test_jitwriter.py.
 *
 *   testjit run [-d DIR | -c] [-p PREFIX] [-J | -N NAME] [-m MS]
 *	Two threads each generate two functions into memory of their own
 *	(RW, then mprotect RX) and announce them with DEBUG_INFO rows for
 *	"testjit.src"; one of them (jit_spin_cfi) is frameless and comes with
 *	its .eh_frame + .eh_frame_hdr (UNWINDING_INFO, really mapped after
 *	the code).  Both threads then run each of the four functions for MS
 *	ms (default 150).  The main thread then copies jit_spin_a to a new
 *	address, announces a MOVE and runs the copy for MS ms, and closes the
 *	writer.  -u announces jit_spin_cfi without its tables (a negative
 *	control for the unwinding test).  Prints "pid N", "dump PATH", one "func NAME ADDR SIZE INDEX
 *	LINES" per function ("line:addr,..."), "move INDEX OLD NEW SIZE" and
 *	"marker LINE-OF-/proc/self/maps".
 *   testjit emit [-d DIR | -c] [-p PREFIX] [-J | -N NAME]
 *	Announces one function and closes; prints the same lines, no running.
 *   testjit flood [-d DIR | -c] [-n N] [-s BYTES]
 *	Two threads announce functions in a loop ("flood-tT-SEQ", BYTES of
 *	code each (default 4096, 64..1 MiB), three line rows, every 8th with unwind tables, every 16th
 *	followed by a MOVE of it), N per thread (0: until killed).  Prints
 *	"pid N" and "dump PATH" first.  With N, each thread waits at its
 *	N/2-th function until the other has written one, so the records of
 *	the two interleave however the threads are scheduled.
 *   testjit twice [-d DIR | -c] [-J | -N NAME] [-n N]
 *	Two writers on one dump in one process, as when a JIT's library or
 *	the JVMTI agent is loaded twice: the first announces N/2 functions
 *	("twice-1-SEQ", 64 bytes each, N default 1000), a second writer opens
 *	the same file and must be refused (prints "second refused ERRNO
 *	MESSAGE"; a writer that lets it open prints "second opened" and
 *	announces N/2 functions "twice-2-SEQ" through it, alternating with
 *	the first, as a second agent would), then the first announces the
 *	rest and both close.  Prints "pid N" and "dump PATH" first.
 *   testjit selftest DIR
 *	Unit checks of the writer's API (argument errors, symlink refusal,
 *	the lock against a second writer, the marker mapping, a failed write
 *	cut off again, fork, and a read back through the library's jitdump
 *	reader).
 *
 * Directory: -d DIR explicit, -c the current directory, else the writer's
 * $JITDUMPDIR/$HOME convention; TESTJIT_DIR in the environment stands for
 * -d when neither is given.
 * File name (pg_jitwriter_open_as()): jit-<pid>.dump by default (perf's
 * rule); -J JavaScriptCore's jit-<tid>-<pid>.dump, the writer opened by a
 * thread of its own so that <tid> is not <pid> (JSC opens it in whichever
 * thread first logs code, often a compiler thread: WebKit's
 * Source/JavaScriptCore/assembler/PerfLog.cpp, PerfLog::PerfLog(), which
 * in 2025 made FileSystem::createDumpFile("jit-" + getCurrentThreadID() +
 * "-" + getCurrentProcessID(), ".dump", Options::jitDumpDirectory()), read
 * in the WebKit fork kern0x1b/WebKit at 48ee4be5; Bun passes it on as
 * BUN_JSC_useJITDump=1); -N NAME any name (e.g. code.bin), to show that
 * a dump is known by its header, not its name.
 * Exit status 0, 1 on failure, 2 on usage errors, 77 when not on x86-64. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <perfgraft/jitdump.h>
#include <perfgraft/jitwriter.h>

#define SRC_FILE "testjit.src"
#define MAX_ROWS 8

typedef uint64_t (*spin_fn)(uint64_t);

static void die(const char *what, const struct pg_diag *d, int err)
{
	fprintf(stderr, "testjit: %s: %s (%s)\n", what, d && d->err[0] ? d->err : "",
		strerror(err < 0 ? -err : err));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *file_name;	/* -N */
static bool jsc_name;		/* -J */

#if defined(__x86_64__)

/* ---------------------------------------------------------------------- */
/* Code generation */

struct gen {
	uint8_t *p;		/* where the bytes are written */
	uint64_t base;		/* address they will run at */
	size_t n;
};

static void emit(struct gen *g, const void *bytes, size_t n)
{
	memcpy(g->p + g->n, bytes, n);
	g->n += n;
}

#define EMIT(g, ...) do { static const uint8_t b_[] = { __VA_ARGS__ }; emit(g, b_, sizeof(b_)); } while (0)

struct func {
	char name[48];
	uint64_t addr, size;
	struct pg_jit_line rows[MAX_ROWS];
	size_t nrows;
	uint8_t unwind[128];
	struct pg_jit_unwind uw;
	bool has_unwind;
	uint64_t index;
	spin_fn fn;
};

static void row(struct func *f, struct gen *g, uint32_t line, const char *file)
{
	f->rows[f->nrows].addr = g->base + g->n;
	f->rows[f->nrows].line = line;
	f->rows[f->nrows].discrim = 0;
	f->rows[f->nrows].file = file;
	f->nrows++;
}

/* A function with a frame pointer: uint64_t f(uint64_t n) spins n times.
 * Rows: base (prologue), base+1 (set-up), base+2 (loop body), base+3
 * (loop control), base+4 (epilogue).  k makes the loop body distinct. */
static void gen_fp(struct gen *g, struct func *f, unsigned k, uint32_t base)
{
	size_t loop;

	row(f, g, base, SRC_FILE);
	EMIT(g, 0x55);				/* push rbp */
	EMIT(g, 0x48, 0x89, 0xe5);		/* mov rbp, rsp */
	row(f, g, base + 1, NULL);		/* NULL: same file */
	EMIT(g, 0x48, 0x89, 0xf8);		/* mov rax, rdi */
	{
		uint8_t mov[7] = { 0x48, 0xc7, 0xc1, (uint8_t)(k + 3), 0, 0, 0 };

		emit(g, mov, sizeof(mov));	/* mov rcx, k+3 */
	}
	EMIT(g, 0x31, 0xd2);			/* xor edx, edx */
	loop = g->n;
	row(f, g, base + 2, SRC_FILE);
	for (unsigned i = 0; i <= k; i++) {
		EMIT(g, 0x48, 0x01, 0xca);	/* add rdx, rcx */
		EMIT(g, 0x48, 0x31, 0xc2);	/* xor rdx, rax */
	}
	row(f, g, base + 3, SRC_FILE);
	EMIT(g, 0x48, 0xff, 0xc8);		/* dec rax */
	{
		uint8_t jnz[2] = { 0x75, (uint8_t)(int8_t)((long)loop - (long)(g->n + 2)) };

		emit(g, jnz, 2);		/* jnz loop */
	}
	row(f, g, base + 4, SRC_FILE);
	EMIT(g, 0x48, 0x89, 0xd0);		/* mov rax, rdx */
	EMIT(g, 0x5d);				/* pop rbp */
	EMIT(g, 0xc3);				/* ret */
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

/* A frameless function (rsp moves, rbp untouched): without its CFI an
 * unwinder cannot find its caller.  Returns the offsets of the two
 * instructions that change the CFA, for the FDE. */
static void gen_frameless(struct gen *g, struct func *f, uint32_t base, size_t *after_sub,
			  size_t *after_add)
{
	size_t loop;

	row(f, g, base, SRC_FILE);
	EMIT(g, 0x48, 0x83, 0xec, 0x18);	/* sub rsp, 24 */
	*after_sub = g->n;
	row(f, g, base + 1, SRC_FILE);
	EMIT(g, 0x48, 0x89, 0x7c, 0x24, 0x08);	/* mov [rsp+8], rdi */
	EMIT(g, 0x48, 0x89, 0xf8);		/* mov rax, rdi */
	EMIT(g, 0x31, 0xd2);			/* xor edx, edx */
	loop = g->n;
	row(f, g, base + 2, SRC_FILE);
	EMIT(g, 0x48, 0x83, 0xc2, 0x07);	/* add rdx, 7 */
	EMIT(g, 0x48, 0x31, 0xc2);		/* xor rdx, rax */
	EMIT(g, 0x48, 0x83, 0xc2, 0x05);	/* add rdx, 5 */
	row(f, g, base + 3, SRC_FILE);
	EMIT(g, 0x48, 0xff, 0xc8);		/* dec rax */
	{
		uint8_t jnz[2] = { 0x75, (uint8_t)(int8_t)((long)loop - (long)(g->n + 2)) };

		emit(g, jnz, 2);
	}
	row(f, g, base + 4, SRC_FILE);
	EMIT(g, 0x48, 0x89, 0xd0);		/* mov rax, rdx */
	EMIT(g, 0x48, 0x83, 0xc4, 0x18);	/* add rsp, 24 */
	*after_add = g->n;
	EMIT(g, 0xc3);				/* ret */
}

/* .eh_frame (CIE + FDE + terminator) and .eh_frame_hdr for the frameless
 * function at f->addr, laid out for .eh_frame at f->addr + align8(size)
 * and the hdr right after it (where perf's image puts them; they are
 * also written there in memory).  Returns the blob size; *hdr_size. */
static size_t gen_cfi(uint8_t *out, uint64_t addr, uint64_t size, size_t after_sub,
		      size_t after_add, size_t *hdr_size)
{
	uint64_t eh = addr + ((size + 7) & ~(uint64_t)7), fde, hdr;
	size_t n = 0, start, cie_len, fde_len;

	/* CIE */
	start = n;
	n += 4;					/* length, below */
	put32(out + n, 0), n += 4;		/* CIE id */
	out[n++] = 1;				/* version */
	memcpy(out + n, "zR", 3), n += 3;	/* augmentation */
	out[n++] = 1;				/* code alignment */
	out[n++] = 0x78;			/* data alignment -8 */
	out[n++] = 16;				/* return address: rip */
	out[n++] = 1;				/* augmentation data length */
	out[n++] = 0x1b;			/* FDE pointers: pcrel sdata4 */
	out[n++] = 0x0c, out[n++] = 7, out[n++] = 8;	/* def_cfa rsp+8 */
	out[n++] = 0x90, out[n++] = 1;		/* offset rip, cfa-8 */
	while ((n - start) % 8)
		out[n++] = 0;			/* DW_CFA_nop */
	cie_len = n - start - 4;
	put32(out + start, (uint32_t)cie_len);

	/* FDE */
	start = n;
	fde = eh + start;
	n += 4;
	put32(out + n, (uint32_t)(n - 0)), n += 4;	/* CIE pointer: back to 0 */
	put32(out + n, (uint32_t)(int32_t)(int64_t)(addr - (eh + n))), n += 4;	/* pc_begin */
	put32(out + n, (uint32_t)size), n += 4;	/* pc_range */
	out[n++] = 0;				/* augmentation data length */
	out[n++] = (uint8_t)(0x40 | after_sub);	/* advance_loc */
	out[n++] = 0x0e, out[n++] = 32;		/* def_cfa_offset 32 */
	if (after_add - after_sub < 64) {
		out[n++] = (uint8_t)(0x40 | (after_add - after_sub));
	} else {
		out[n++] = 0x02;		/* advance_loc1 */
		out[n++] = (uint8_t)(after_add - after_sub);
	}
	out[n++] = 0x0e, out[n++] = 8;		/* def_cfa_offset 8 */
	while ((n - start) % 8)
		out[n++] = 0;
	fde_len = n - start - 4;
	put32(out + start, (uint32_t)fde_len);
	put32(out + n, 0), n += 4;		/* terminator */

	/* .eh_frame_hdr */
	hdr = eh + n;
	start = n;
	out[n++] = 1;				/* version */
	out[n++] = 0x1b;			/* eh_frame_ptr: pcrel sdata4 */
	out[n++] = 0x03;			/* fde_count: udata4 */
	out[n++] = 0x3b;			/* table: datarel sdata4 */
	put32(out + n, (uint32_t)(int32_t)(int64_t)(eh - (eh + n))), n += 4;
	put32(out + n, 1), n += 4;
	put32(out + n, (uint32_t)(int32_t)(int64_t)(addr - hdr)), n += 4;
	put32(out + n, (uint32_t)(int32_t)(int64_t)(fde - hdr)), n += 4;
	*hdr_size = n - start;
	return n;
}

/* ---------------------------------------------------------------------- */

static uint8_t *map_rw(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("testjit: mmap");
		exit(1);
	}
	return p;
}

static void make_rx(void *p, size_t len)
{
	if (mprotect(p, len, PROT_READ | PROT_EXEC) < 0) {
		perror("testjit: mprotect");
		exit(1);
	}
}

static void print_func(const struct func *f)
{
	printf("func %s 0x%" PRIx64 " %" PRIu64 " %" PRIu64 " ", f->name, f->addr, f->size,
	       f->index);
	for (size_t i = 0; i < f->nrows; i++)
		printf("%s%u:0x%" PRIx64, i ? "," : "", f->rows[i].line, f->rows[i].addr);
	printf("%s\n", f->has_unwind ? " cfi" : "");
}

static void print_marker(const char *path)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char line[4096];

	if (!m)
		return;
	while (fgets(line, sizeof(line), m)) {
		size_t n = strlen(line);

		if (n && line[n - 1] == '\n')
			line[--n] = '\0';
		if (n >= strlen(path) && !strcmp(line + n - strlen(path), path))
			printf("marker %s\n", line);
	}
	fclose(m);
}

struct opener {
	const char *dir, *prefix;
	pg_jitwriter *w;
};

static void *open_thread(void *arg)
{
	struct opener *op = arg;
	struct pg_jitwriter_opts o = { .sz = sizeof(o), .dir = op->dir, .prefix = op->prefix };
	struct pg_diag d = { 0 };
	char jsc[64];
	int ret;

	if (jsc_name)
		snprintf(jsc, sizeof(jsc), "jit-%ld-%d.dump", (long)syscall(SYS_gettid),
			 (int)getpid());
	ret = pg_jitwriter_open_as(&o, jsc_name ? jsc : file_name, &d, &op->w);
	if (ret < 0)
		die("open", &d, ret);
	return NULL;
}

static pg_jitwriter *open_writer(const char *dir, const char *prefix)
{
	struct opener op = { dir, prefix, NULL };

	if (jsc_name) {
		/* JSC's file is named by the thread that opens it */
		pthread_t th;
		int ret = pthread_create(&th, NULL, open_thread, &op);

		if (ret != 0)
			die("pthread_create", NULL, ret);
		pthread_join(th, NULL);
	} else {
		open_thread(&op);
	}
	printf("pid %d\ndump %s\n", (int)getpid(), pg_jitwriter_path(op.w));
	fflush(stdout);
	return op.w;
}

static void announce(pg_jitwriter *w, struct func *f)
{
	struct pg_jit_func jf = {
		.name = f->name, .addr = f->addr, .code = NULL, .code_size = f->size,
		.lines = f->rows, .nlines = f->nrows,
		.unwind = f->has_unwind ? &f->uw : NULL,
	};
	struct pg_diag d = { 0 };
	int ret = pg_jitwriter_load(w, &jf, &f->index, &d);

	if (ret < 0)
		die("load", &d, ret);
}

/* ---------------------------------------------------------------------- */
/* run / emit */

#define NFUNC 4
static struct func funcs[NFUNC];
static pg_jitwriter *the_writer;
static unsigned run_ms = 150;
static bool no_cfi;		/* -u: jit_spin_cfi announced without its tables */
static pthread_barrier_t compiled;

static __attribute__((noinline)) uint64_t spin_for(spin_fn fn, unsigned ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000u, acc = 0;

	do
		acc += fn(100000);
	while (now_ns() < end);
	return acc;
}

/* Thread t compiles functions 2t and 2t+1 into a page of its own. */
static void compile_pair(unsigned t)
{
	size_t len = 4096;
	uint8_t *mem = map_rw(len);
	struct gen g = { .p = mem, .base = (uint64_t)(uintptr_t)mem };

	for (unsigned i = 2 * t; i < 2 * t + 2; i++) {
		struct func *f = &funcs[i];

		g.n = (g.n + 63) & ~(size_t)63;
		f->addr = g.base + g.n;
		{
			size_t start = g.n;

			if (i == 3) {
				size_t after_sub, after_add, hdr_size, blob;

				snprintf(f->name, sizeof(f->name), "jit_spin_cfi");
				gen_frameless(&g, f, 10 * (i + 1), &after_sub, &after_add);
				f->size = g.n - start;
				after_sub -= start, after_add -= start;
				blob = gen_cfi(f->unwind, f->addr, f->size, after_sub, after_add,
					       &hdr_size);
				/* really put the tables after the code */
				g.n = start + ((f->size + 7) & ~(size_t)7);
				emit(&g, f->unwind, blob);
				f->uw.data = f->unwind;
				f->uw.size = blob;
				f->uw.eh_frame_hdr_size = hdr_size;
				f->uw.mapped_size = blob;
				f->has_unwind = !no_cfi;
			} else {
				snprintf(f->name, sizeof(f->name), "jit_spin_%c", 'a' + i);
				gen_fp(&g, f, i, 10 * (i + 1));
				f->size = g.n - start;
			}
		}
		f->fn = (spin_fn)(uintptr_t)f->addr;
	}
	make_rx(mem, len);
	for (unsigned i = 2 * t; i < 2 * t + 2; i++)
		announce(the_writer, &funcs[i]);
}

static void *run_thread(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	uint64_t acc = 0;

	compile_pair(t);
	pthread_barrier_wait(&compiled);
	for (unsigned k = 0; k < NFUNC; k++)
		acc += spin_for(funcs[(k + t) % NFUNC].fn, run_ms);
	return (void *)(uintptr_t)(acc & 1);
}

static int do_run(const char *dir, const char *prefix, bool spin)
{
	pthread_t th[2];
	struct pg_diag d = { 0 };
	int ret;

	the_writer = open_writer(dir, prefix);
	print_marker(pg_jitwriter_path(the_writer));
	if (!spin) {
		compile_pair(0);
		print_func(&funcs[0]);
		print_func(&funcs[1]);
		fflush(stdout);
		ret = pg_jitwriter_close(the_writer, &d);
		if (ret < 0)
			die("close", &d, ret);
		return 0;
	}
	pthread_barrier_init(&compiled, NULL, 2);
	for (uintptr_t t = 0; t < 2; t++)
		if ((ret = pthread_create(&th[t], NULL, run_thread, (void *)t)) != 0)
			die("pthread_create", NULL, ret);
	for (int t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	for (int i = 0; i < NFUNC; i++)
		print_func(&funcs[i]);

	/* move jit_spin_a: copy it elsewhere, announce, run it there */
	{
		struct func *a = &funcs[0];
		size_t len = 4096;
		uint8_t *mem = map_rw(len);
		uint64_t old = a->addr, neu = (uint64_t)(uintptr_t)mem + 128;

		memcpy(mem + 128, (const void *)(uintptr_t)old, a->size);
		make_rx(mem, len);
		ret = pg_jitwriter_move(the_writer, a->index, old, neu, a->size, &d);
		if (ret < 0)
			die("move", &d, ret);
		printf("move %" PRIu64 " 0x%" PRIx64 " 0x%" PRIx64 " %" PRIu64 "\n", a->index, old,
		       neu, a->size);
		fflush(stdout);
		spin_for((spin_fn)(uintptr_t)neu, run_ms);
	}
	ret = pg_jitwriter_close(the_writer, &d);
	if (ret < 0)
		die("close", &d, ret);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* flood */

static unsigned long flood_n;
static uint8_t *flood_code;
static size_t flood_size = 4096;
static size_t flood_cfi_size, flood_after_sub, flood_after_add;
static atomic_ulong flood_done[2];	/* LOADs each thread has written */

static void *flood_thread(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	struct pg_diag d = { 0 };

	for (unsigned long seq = 0; !flood_n || seq < flood_n; seq++) {
		struct func f = { 0 };
		struct pg_jit_func jf;
		uint64_t addr = 0x100000000000ull + ((uint64_t)t << 36) + seq * 0x2000;
		int ret;

		/* neither thread may finish before the other has started:
		 * on a busy machine one could otherwise run its whole loop
		 * before the other is scheduled once */
		if (flood_n && seq == flood_n / 2)
			while (atomic_load(&flood_done[!t]) == 0)
				sched_yield();
		snprintf(f.name, sizeof(f.name), "flood-t%u-%lu", t, seq);
		for (int i = 0; i < 3; i++) {
			f.rows[i].addr = addr + 16 * i;
			f.rows[i].line = 100 * (t + 1) + i;
			f.rows[i].file = i == 1 ? NULL : "flood.src";
		}
		memset(&jf, 0, sizeof(jf));
		jf.name = f.name;
		jf.addr = addr;
		jf.code = flood_code;
		jf.code_size = flood_size;
		jf.lines = f.rows;
		jf.nlines = 3;
		if (seq % 8 == 7) {
			/* tables of the frameless function, for this address:
			 * its code is the start of flood_code */
			uint8_t *blob = f.unwind;
			size_t hdr;

			f.uw.size = gen_cfi(blob, addr, flood_cfi_size, flood_after_sub,
					    flood_after_add, &hdr);
			f.uw.data = blob;
			f.uw.eh_frame_hdr_size = hdr;
			f.uw.mapped_size = 0;
			jf.unwind = &f.uw;
			jf.code_size = flood_cfi_size;
		}
		ret = pg_jitwriter_load(the_writer, &jf, &f.index, &d);
		if (ret < 0)
			die("load", &d, ret);
		atomic_fetch_add(&flood_done[t], 1);
		if (seq % 16 == 15) {
			ret = pg_jitwriter_move(the_writer, f.index, addr, addr + 0x1000,
						jf.code_size, &d);
			if (ret < 0)
				die("move", &d, ret);
		}
	}
	return NULL;
}

static int do_flood(const char *dir)
{
	pthread_t th[2];
	struct pg_diag d = { 0 };
	int ret;

	/* flood_code starts with a real frameless function (its CFI is then
	 * right for loads that claim only those bytes); the rest is int3 */
	{
		struct gen g = { 0 };
		struct func f = { 0 };

		flood_code = malloc(flood_size);
		if (!flood_code)
			die("malloc", NULL, ENOMEM);
		memset(flood_code, 0xcc, flood_size);
		g.p = flood_code;
		gen_frameless(&g, &f, 1, &flood_after_sub, &flood_after_add);
		flood_cfi_size = g.n;
	}
	the_writer = open_writer(dir, NULL);
	for (uintptr_t t = 0; t < 2; t++)
		if ((ret = pthread_create(&th[t], NULL, flood_thread, (void *)t)) != 0)
			die("pthread_create", NULL, ret);
	for (int t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	ret = pg_jitwriter_close(the_writer, &d);
	if (ret < 0)
		die("close", &d, ret);
	free(flood_code);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* twice */

static void twice_load(pg_jitwriter *w, unsigned who, unsigned long seq)
{
	static uint8_t code[64];
	struct pg_diag d = { 0 };
	struct pg_jit_func jf = { 0 };
	char name[48];
	int ret;

	memset(code, 0xcc, sizeof(code));
	snprintf(name, sizeof(name), "twice-%u-%lu", who, seq);
	jf.name = name;
	jf.addr = 0x200000000000ull + ((uint64_t)who << 36) + seq * 0x100;
	jf.code = code;
	jf.code_size = sizeof(code);
	ret = pg_jitwriter_load(w, &jf, NULL, &d);
	if (ret < 0)
		die("load", &d, ret);
}

static int do_twice(const char *dir)
{
	unsigned long n = flood_n ? flood_n : 1000;
	pg_jitwriter *w1 = open_writer(dir, "testjit"), *w2 = NULL;
	struct pg_jitwriter_opts o = { .sz = sizeof(o) };
	struct pg_diag d = { 0 };
	char *path = strdup(pg_jitwriter_path(w1)), *slash;
	int ret;

	if (!path)
		die("strdup", NULL, ENOMEM);
	for (unsigned long seq = 0; seq < n / 2; seq++)
		twice_load(w1, 1, seq);
	/* the same file again: its directory and name (a second agent
	 * computes the same jit-<pid>.dump) */
	slash = strrchr(path, '/');
	*slash = '\0';
	o.dir = path[0] ? path : "/";
	ret = pg_jitwriter_open_as(&o, slash + 1, &d, &w2);
	if (ret < 0)
		printf("second refused %d %s\n", -ret, d.err);
	else
		printf("second opened\n");
	fflush(stdout);
	free(path);
	for (unsigned long seq = n / 2; seq < n; seq++) {
		if (w2)
			twice_load(w2, 2, seq - n / 2);
		twice_load(w1, 1, seq);
	}
	if (w2 && (ret = pg_jitwriter_close(w2, &d)) < 0)
		die("close (second)", &d, ret);
	if ((ret = pg_jitwriter_close(w1, &d)) < 0)
		die("close", &d, ret);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* selftest */

static int nchecks, nfailed;

#define CHECK(cond, ...) do { \
		nchecks++; \
		if (!(cond)) { \
			nfailed++; \
			fprintf(stderr, "testjit selftest: line %d: %s: ", __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) < 0 ? -1 : st.st_size;
}

static bool maps_has(const char *path, char perms[5], unsigned long *len)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char line[4096];
	bool found = false;

	if (!m)
		return false;
	while (fgets(line, sizeof(line), m)) {
		unsigned long a, b;
		char p[5];
		size_t n = strlen(line);

		if (n && line[n - 1] == '\n')
			line[--n] = '\0';
		if (n < strlen(path) || strcmp(line + n - strlen(path), path))
			continue;
		if (sscanf(line, "%lx-%lx %4s", &a, &b, p) == 3) {
			found = true;
			if (perms)
				memcpy(perms, p, 5);
			if (len)
				*len = b - a;
		}
	}
	fclose(m);
	return found;
}

static int do_selftest(const char *dir)
{
	struct pg_diag d;
	pg_jitwriter *w = NULL;
	struct pg_jitwriter_opts o;
	char path[4096], sub[2048], link[4096], perms[5] = "";
	unsigned long maplen = 0;
	int ret;
	uint64_t t0, t1, idx1 = 0, idx2 = 0, idx3 = 0;
	static uint8_t code[64], big[1000];
	uint8_t cfi[128];
	struct gen g = { .p = code, .base = 0x7000 };
	struct func fr = { 0 };
	size_t after_sub, after_add, hdr_size, blob;

	gen_frameless(&g, &fr, 50, &after_sub, &after_add);
	blob = gen_cfi(cfi, 0x7000, g.n, after_sub, after_add, &hdr_size);
	memset(big, 0x90, sizeof(big));

	/* argument errors */
	memset(&d, 0, sizeof(d));
	o = (struct pg_jitwriter_opts){ .sz = sizeof(o), .dir = dir, .prefix = "a/b" };
	ret = pg_jitwriter_open(&o, &d, &w);
	CHECK(ret == -EINVAL && !w && strstr(d.err, "a/b"), "%d %s", ret, d.err);
	o = (struct pg_jitwriter_opts){ .sz = sizeof(o), .dir = dir, .prefix = ".." };
	CHECK(pg_jitwriter_open(&o, &d, &w) == -EINVAL, "%s", d.err);
	o = (struct pg_jitwriter_opts){ .sz = sizeof(o), .dir = dir, .mode = 010000 };
	CHECK(pg_jitwriter_open(&o, &d, &w) == -EINVAL, "%s", d.err);
	o = (struct pg_jitwriter_opts){ .sz = sizeof(o), .dir = "" };
	CHECK(pg_jitwriter_open(&o, &d, &w) == -EINVAL, "%s", d.err);
	snprintf(sub, sizeof(sub), "%s/missing", dir);
	o = (struct pg_jitwriter_opts){ .sz = sizeof(o), .dir = sub };
	ret = pg_jitwriter_open(&o, &d, &w);
	CHECK(ret == -ENOENT && strstr(d.err, sub), "%d %s", ret, d.err);
	CHECK(pg_jitwriter_open(NULL, &d, NULL) == -EINVAL, "%s", d.err);
	CHECK(pg_jitwriter_close(NULL, &d) == 0, "close(NULL)");
	o = (struct pg_jitwriter_opts){ .sz = sizeof(o), .dir = dir };
	ret = pg_jitwriter_open_as(&o, "a/b.dump", &d, &w);
	CHECK(ret == -EINVAL && !w && strstr(d.err, "a/b.dump"), "%d %s", ret, d.err);
	CHECK(pg_jitwriter_open_as(&o, "", &d, &w) == -EINVAL, "%s", d.err);
	CHECK(pg_jitwriter_open_as(&o, "..", &d, &w) == -EINVAL, "%s", d.err);
	{
		char longname[NAME_MAX + 2];

		memset(longname, 'x', sizeof(longname) - 1);
		longname[sizeof(longname) - 1] = '\0';
		CHECK(pg_jitwriter_open_as(&o, longname, &d, &w) == -EINVAL, "%s", d.err);
	}

	/* a name of the caller's: same header and marker, another path */
	ret = pg_jitwriter_open_as(&o, "code.bin", &d, &w);
	CHECK(ret == 0, "open_as: %s", d.err);
	if (ret == 0) {
		snprintf(path, sizeof(path), "%s/code.bin", dir);
		CHECK(!strcmp(pg_jitwriter_path(w), path), "path %s, expected %s",
		      pg_jitwriter_path(w), path);
		CHECK(file_size(path) == 40, "size after open_as %lld",
		      (long long)file_size(path));
		CHECK(maps_has(path, perms, &maplen) && !strcmp(perms, "r-xp"),
		      "marker mapping of code.bin: perms %s", perms);
		CHECK(pg_jitwriter_close(w, &d) == 0, "close: %s", d.err);
		w = NULL;
		unlink(path);
	}

	/* one writer per dump: a second open of the same file, in this same
	 * process, is refused with -EBUSY and the first's file is untouched;
	 * once the first has closed, the dump it left is replaced */
	{
		pg_jitwriter *w1 = NULL, *w2 = NULL;
		struct pg_jit_func f1 = { "first", 0x7000, big, 100, NULL, 0, NULL };
		off_t before;

		snprintf(path, sizeof(path), "%s/locked.dump", dir);
		ret = pg_jitwriter_open_as(&o, "locked.dump", &d, &w1);
		CHECK(ret == 0, "open: %s", d.err);
		if (ret == 0) {
			CHECK(pg_jitwriter_load(w1, &f1, NULL, &d) == 0, "load: %s", d.err);
			before = file_size(path);
			ret = pg_jitwriter_open_as(&o, "locked.dump", &d, &w2);
			CHECK(ret == -EBUSY && !w2 && strstr(d.err, path) && strstr(d.err, "locked"),
			      "second open: %d %s", ret, d.err);
			CHECK(file_size(path) == before, "the second open changed the dump: %lld vs %lld",
			      (long long)file_size(path), (long long)before);
			CHECK(pg_jitwriter_load(w1, &f1, NULL, &d) == 0 && file_size(path) > before,
			      "the first writer after the refusal: %s", d.err);
			CHECK(pg_jitwriter_close(w1, &d) == 0, "close: %s", d.err);
			CHECK(file_size(path) > before, "dump gone");
			ret = pg_jitwriter_open_as(&o, "locked.dump", &d, &w2);
			CHECK(ret == 0 && file_size(path) == 40, "reopen after close: %d %s size %lld",
			      ret, d.err, (long long)file_size(path));
			if (ret == 0)
				CHECK(pg_jitwriter_close(w2, &d) == 0, "close: %s", d.err);
		}
		unlink(path);
	}

	/* a symlink in the dump's place is refused, its target untouched */
	snprintf(sub, sizeof(sub), "%s/sym", dir);
	mkdir(sub, 0755);
	snprintf(link, sizeof(link), "%s/jit-%d.dump", sub, (int)getpid());
	snprintf(path, sizeof(path), "%s/target", sub);
	CHECK(symlink(path, link) == 0, "symlink: %s", strerror(errno));
	o = (struct pg_jitwriter_opts){ .sz = sizeof(o), .dir = sub };
	ret = pg_jitwriter_open(&o, &d, &w);
	CHECK(ret == -ELOOP && strstr(d.err, "symbolic link"), "%d %s", ret, d.err);
	CHECK(access(path, F_OK) < 0, "the symlink's target was created");
	unlink(link);
	rmdir(sub);

	/* the real one */
	t0 = now_ns();
	o = (struct pg_jitwriter_opts){ .sz = sizeof(o), .dir = dir };
	ret = pg_jitwriter_open(&o, &d, &w);
	CHECK(ret == 0, "open: %s", d.err);
	if (ret < 0)
		return 1;
	snprintf(path, sizeof(path), "%s/jit-%d.dump", dir, (int)getpid());
	CHECK(!strcmp(pg_jitwriter_path(w), path), "path %s, expected %s",
	      pg_jitwriter_path(w), path);
	CHECK(pg_jitwriter_pid(w) == (uint32_t)getpid(), "pid");
	CHECK(file_size(path) == 40, "size after open %lld", (long long)file_size(path));
	CHECK(maps_has(path, perms, &maplen) && !strcmp(perms, "r-xp") &&
	      maplen == (unsigned long)sysconf(_SC_PAGESIZE),
	      "marker mapping: perms %s len %lu", perms, maplen);

	/* invalid loads and moves write nothing */
	{
		struct pg_jit_line rows[3] = {
			{ 0x7000, 50, 0, SRC_FILE }, { 0x7004, 51, 2, NULL }, { 0x7010, 52, 0, "other.src" },
		};
		struct pg_jit_unwind uw = { cfi, blob, hdr_size, 0 };
		struct pg_jit_func f = { "selftest_fn", 0x7000, code, g.n, rows, 3, &uw };
		struct pg_jit_func bad;

		bad = f, bad.name = NULL;
		CHECK(pg_jitwriter_load(w, &bad, NULL, &d) == -EINVAL, "NULL name");
		bad = f, bad.code_size = 0;
		CHECK(pg_jitwriter_load(w, &bad, NULL, &d) == -EINVAL, "size 0");
		bad = f, bad.addr = UINT64_MAX - 4;
		CHECK(pg_jitwriter_load(w, &bad, NULL, &d) == -EINVAL, "overflow");
		{
			struct pg_jit_line r2[2] = { rows[0], rows[1] };

			r2[1].addr = 0x7000 + g.n;
			bad = f, bad.lines = r2, bad.nlines = 2;
			CHECK(pg_jitwriter_load(w, &bad, NULL, &d) == -EINVAL &&
			      strstr(d.err, "outside"), "row outside: %s", d.err);
			r2[0].addr = 0x7008, r2[1].addr = 0x7004;
			CHECK(pg_jitwriter_load(w, &bad, NULL, &d) == -EINVAL &&
			      strstr(d.err, "sorted"), "unsorted rows: %s", d.err);
			r2[0] = rows[1], r2[1] = rows[2];
			CHECK(pg_jitwriter_load(w, &bad, NULL, &d) == -EINVAL &&
			      strstr(d.err, "first line row"), "no first file: %s", d.err);
		}
		{
			struct pg_jit_unwind u2 = uw;

			u2.eh_frame_hdr_size = u2.size + 1;
			bad = f, bad.unwind = &u2;
			CHECK(pg_jitwriter_load(w, &bad, NULL, &d) == -EINVAL, "hdr > size");
		}
		CHECK(pg_jitwriter_move(w, 1, 0x7000, 0x8000, 16, &d) == -EINVAL &&
		      strstr(d.err, "did not hand out"), "move of unknown index: %s", d.err);
		CHECK(file_size(path) == 40, "invalid calls wrote: size %lld",
		      (long long)file_size(path));

		/* valid ones */
		ret = pg_jitwriter_load(w, &f, &idx1, &d);
		CHECK(ret == 0 && idx1 == 1, "load 1: %d %s idx %" PRIu64, ret, d.err, idx1);
		bad = f, bad.name = "plain", bad.lines = NULL, bad.nlines = 0, bad.unwind = NULL;
		bad.addr = 0x9000;
		ret = pg_jitwriter_load(w, &bad, &idx2, &d);
		CHECK(ret == 0 && idx2 == 2, "load 2: %d %s", ret, d.err);
		ret = pg_jitwriter_move(w, idx1, 0x7000, 0xa000, g.n, &d);
		CHECK(ret == 0, "move: %s", d.err);

		/* a write the file size limit cuts short: cut off again,
		 * -EFBIG, the writer stays usable */
		{
			struct rlimit old, lim;
			off_t before = file_size(path);
			struct pg_jit_func bigf = { "big", 0xb000, big, sizeof(big), NULL, 0, NULL };

			signal(SIGXFSZ, SIG_IGN);
			getrlimit(RLIMIT_FSIZE, &old);
			lim = old;
			lim.rlim_cur = (rlim_t)before + 100;
			CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit: %s", strerror(errno));
			ret = pg_jitwriter_load(w, &bigf, NULL, &d);
			CHECK(ret == -EFBIG && strstr(d.err, "offset") && strstr(d.err, "cut off"),
			      "short write: %d %s", ret, d.err);
			setrlimit(RLIMIT_FSIZE, &old);
			CHECK(file_size(path) == before, "partial write left: %lld vs %lld",
			      (long long)file_size(path), (long long)before);
			ret = pg_jitwriter_load(w, &bigf, &idx3, &d);
			CHECK(ret == 0 && idx3 == 3, "load after failure: %d %s idx %" PRIu64, ret,
			      d.err, idx3);
		}

		/* a child after fork cannot write into the parent's dump */
		{
			off_t before = file_size(path);
			pid_t pid = fork();
			int st = 0;

			if (pid == 0) {
				struct pg_diag cd = { 0 };
				int r1 = pg_jitwriter_load(w, &f, NULL, &cd);
				int r2 = pg_jitwriter_move(w, 1, 0x7000, 0xa000, 8, &cd);
				int r3 = pg_jitwriter_close(w, &cd);

				_exit(r1 == -ECHILD && r2 == -ECHILD && r3 == 0 ? 0 : 1);
			}
			waitpid(pid, &st, 0);
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
			CHECK(file_size(path) == before, "child wrote");
		}
	}
	ret = pg_jitwriter_close(w, &d);
	t1 = now_ns();
	CHECK(ret == 0, "close: %s", d.err);
	CHECK(!maps_has(path, NULL, NULL), "marker still mapped after close");

	/* read it back */
	{
		struct pg_diag rd = { 0 };
		pg_jitdump *jd;
		struct pg_jd_record r;
		struct pg_jitdump_stats st = { .sz = sizeof(st) };
		const struct pg_jd_header *h;
		int types[16], n = 0;
		uint64_t last = 0;

		ret = pg_jitdump_open(path, PG_JITDUMP_ALL_RECORDS, &rd, &jd);
		CHECK(ret == 0, "reader: %s", rd.err);
		if (ret < 0)
			return 1;
		h = pg_jitdump_header(jd);
		CHECK(h->version == 1 && h->total_size == 40 && h->pid == (uint32_t)getpid() &&
		      h->flags == 0 && h->pad1 == 0 && h->elf_mach == 62 &&
		      h->timestamp >= t0 && h->timestamp <= t1,
		      "header: v%u size %u pid %u flags %llu mach %u", h->version, h->total_size,
		      h->pid, (unsigned long long)h->flags, h->elf_mach);
		while ((ret = pg_jitdump_next(jd, &r)) > 0 && n < 16) {
			types[n++] = (int)r.id;
			CHECK(r.timestamp >= last && r.timestamp >= h->timestamp && r.timestamp <= t1,
			      "record %d time %llu", n, (unsigned long long)r.timestamp);
			last = r.timestamp;
			if (r.id == PG_JD_DEBUG_INFO) {
				const struct pg_jd_debug *db = &r.u.debug;

				CHECK(db->code_addr == 0x7000 && db->nr_lines == 3 &&
				      db->lines[0].addr == 0x7000 && db->lines[0].line == 50 &&
				      !strcmp(db->lines[0].file, SRC_FILE) &&
				      db->lines[1].addr == 0x7004 && db->lines[1].line == 51 &&
				      db->lines[1].discrim == 2 && !strcmp(db->lines[1].file, SRC_FILE) &&
				      !strcmp(db->lines[2].file, "other.src") && r.size % 8 == 0,
				      "debug info");
			} else if (r.id == PG_JD_UNWINDING_INFO) {
				const struct pg_jd_unwind *u = &r.u.unwind;

				CHECK(!u->dropped && u->unwinding_size == blob &&
				      u->eh_frame_hdr_size == hdr_size && u->mapped_size == 0 &&
				      !memcmp(u->eh_frame, cfi, blob) && r.size % 8 == 0, "unwind");
			} else if (r.id == PG_JD_LOAD) {
				const struct pg_jd_load *l = &r.u.load;

				if (l->code_index == 1)
					CHECK(!strcmp(l->name, "selftest_fn") && l->code_addr == 0x7000 &&
					      l->vma == 0x7000 && l->code_size == g.n &&
					      !memcmp(l->code, code, g.n) && l->debug && l->unwind &&
					      l->pid == (uint32_t)getpid() &&
					      l->tid == (uint32_t)syscall(SYS_gettid), "load 1");
				else if (l->code_index == 2)
					CHECK(!strcmp(l->name, "plain") && !l->debug && !l->unwind,
					      "load 2");
				else
					CHECK(l->code_index == 3 && l->code_size == sizeof(big) &&
					      !memcmp(l->code, big, sizeof(big)), "load 3");
			} else if (r.id == PG_JD_MOVE) {
				const struct pg_jd_move *m = &r.u.move;

				CHECK(m->code_index == 1 && m->old_code_addr == 0x7000 &&
				      m->new_code_addr == 0xa000 && m->vma == 0xa000 &&
				      m->code_size == g.n, "move");
			}
		}
		CHECK(ret == 0, "reader: %s", rd.err);
		pg_jitdump_stats(jd, &st);
		CHECK(n == 7 && types[0] == PG_JD_DEBUG_INFO && types[1] == PG_JD_UNWINDING_INFO &&
		      types[2] == PG_JD_LOAD && types[3] == PG_JD_LOAD && types[4] == PG_JD_MOVE &&
		      types[5] == PG_JD_LOAD && types[6] == PG_JD_CLOSE,
		      "record sequence (%d records)", n);
		CHECK(rd.nwarn == 0 && st.truncated_bytes == 0, "%lu warnings: %s", rd.nwarn, rd.err);
		pg_jitdump_close(jd);
	}
	unlink(path);
	printf("selftest: %d checks, %d failed\n", nchecks, nfailed);
	return nfailed ? 1 : 0;
}

#endif /* __x86_64__ */

static void usage(void)
{
	fprintf(stderr,
		"usage: testjit run [-d DIR | -c] [-p PREFIX] [-J | -N NAME] [-m MS] [-u]\n"
		"       testjit emit [-d DIR | -c] [-p PREFIX] [-J | -N NAME]\n"
		"       testjit flood [-d DIR | -c] [-n N] [-s BYTES]\n"
		"       testjit twice [-d DIR | -c] [-J | -N NAME] [-n N]\n"
		"       testjit selftest DIR\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *dir = getenv("TESTJIT_DIR"), *prefix = "testjit", *mode;
	unsigned long ms = 150, n = 0, sz = 4096;
	bool nocfi = false;
	int c;

	if (argc < 2)
		usage();
	mode = argv[1];
	if (dir && !*dir)
		dir = NULL;
	optind = 2;
	while ((c = getopt(argc, argv, "d:cp:m:n:s:uJN:")) != -1) {
		char *end;

		switch (c) {
		case 'd': dir = optarg; break;
		case 'c': dir = "."; break;
		case 'p': prefix = optarg; break;
		case 'u': nocfi = true; break;
		case 'J': jsc_name = true; break;
		case 'N': file_name = optarg; break;
		case 'm':
		case 'n':
		case 's':
			errno = 0;
			*(c == 'm' ? &ms : c == 'n' ? &n : &sz) = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg)
				usage();
			break;
		default: usage();
		}
	}
	if (ms > 100000 || sz < 64 || sz > (1ul << 20) || (jsc_name && file_name))
		usage();
#if !defined(__x86_64__)
	(void)dir, (void)prefix, (void)mode, (void)ms, (void)n, (void)sz, (void)nocfi;
	fprintf(stderr, "testjit: generates x86-64 code only\n");
	return 77;
#else
	run_ms = (unsigned)ms;
	no_cfi = nocfi;
	flood_n = n;
	flood_size = sz;
	if (!strcmp(mode, "run") && optind == argc)
		return do_run(dir, prefix, true);
	if (!strcmp(mode, "emit") && optind == argc)
		return do_run(dir, prefix, false);
	if (!strcmp(mode, "flood") && optind == argc)
		return do_flood(dir);
	if (!strcmp(mode, "twice") && optind == argc)
		return do_twice(dir);
	if (!strcmp(mode, "selftest") && optind == argc - 1)
		return do_selftest(argv[optind]);
	usage();
	return 2;
#endif
}
