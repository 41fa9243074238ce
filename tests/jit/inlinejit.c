/* SPDX-License-Identifier: MIT */
/* inlinejit: a real x86-64 JIT function with inlined callees, announced
 * through the jitdump writer with its inline chains (INLINE_INFO), so that
 * a perf recording of it shows the chains once injected
 * (tests/test_inline_jit.py).
 *
 *   inlinejit DIR [MS]
 *	Generates one function, "jit_outer", into RX memory: three spin
 *	loops of equal trip counts, each in a 64-byte region of its own:
 *	  region 0: jit_outer's own code       (outer.src:10)
 *	  region 1: helper inlined at outer.src:11  (helper.src:20)
 *	  region 2: leaf inlined into helper at helper.src:21, helper
 *	            inlined at outer.src:12     (leaf.src:30)
 *	announces it with pg_jitwriter_load_ext() into DIR/jit-PID.dump, runs
 *	it until MS ms (default 300) have passed, then announces an UNLOAD
 *	and closes.  Prints "pid N", "dump PATH" and "func ADDR SIZE".
 * Exit status 0, 1 on failure, 2 on usage errors, 77 when not on x86-64. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <perfgraft/jitwriter.h>

#define REGION 64
#define TRIPS 200000u

#if defined(__x86_64__)
/* region r: mov ecx, TRIPS; 1: dec ecx; jnz 1b; then nops to the next
 * region; the function starts with push rbp; mov rbp, rsp (frame
 * pointers, for perf's call graphs) and ends with pop rbp; ret */
static size_t emit(uint8_t *p)
{
	size_t n = 0;

	memset(p, 0x90, 3 * REGION + 2);
	p[n++] = 0x55;				/* push rbp */
	p[n++] = 0x48; p[n++] = 0x89; p[n++] = 0xe5;	/* mov rbp, rsp */
	for (int r = 0; r < 3; r++) {
		size_t at = r ? (size_t)r * REGION : n;

		p[at++] = 0xb9;			/* mov ecx, imm32 */
		memcpy(p + at, &(uint32_t){ TRIPS }, 4);
		at += 4;
		p[at++] = 0xff; p[at++] = 0xc9;	/* dec ecx */
		p[at++] = 0x75; p[at++] = 0xfc;	/* jnz -4 */
	}
	n = 3 * REGION;
	p[n++] = 0x5d;				/* pop rbp */
	p[n++] = 0xc3;				/* ret */
	return n;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	struct pg_jitwriter_opts o = { .sz = sizeof(o) };
	struct pg_diag d = { 0 };
	pg_jitwriter *w;
	uint64_t idx, end;
	uint8_t *code;
	size_t size;
	void (*fn)(void);

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: inlinejit DIR [MS]\n");
		return 2;
	}
	o.dir = argv[1];
	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		return 1;
	size = emit(code);
	if (mprotect(code, 4096, PROT_READ | PROT_EXEC) < 0)
		return 1;
	if (pg_jitwriter_open(&o, &d, &w) < 0) {
		fprintf(stderr, "inlinejit: %s\n", d.err);
		return 1;
	}
	{
		uint64_t a = (uintptr_t)code;
		const struct pg_jit_line rows[] = {
			{ a, 10, 0, "outer.src" },
			{ a + REGION, 20, 0, "helper.src" },
			{ a + 2 * REGION, 30, 0, "leaf.src" },
			{ a + 3 * REGION, 13, 0, "outer.src" },
		};
		const struct pg_jit_frame f1[] = {
			{ "helper", "helper.src", 20 }, { "jit_outer", "outer.src", 11 },
		};
		const struct pg_jit_frame f2[] = {
			{ "leaf", "leaf.src", 30 }, { "helper", "helper.src", 21 },
			{ "jit_outer", "outer.src", 12 },
		};
		const struct pg_jit_inline chains[] = {
			{ a + REGION, REGION, 2, f1 }, { a + 2 * REGION, REGION, 3, f2 },
		};
		const struct pg_jit_func f = { .name = "jit_outer", .addr = a, .code = code,
					       .code_size = size, .lines = rows, .nlines = 4 };
		const struct pg_jit_func_ext x = { .sz = sizeof(x), .inlines = chains,
						   .ninlines = 2 };

		if (pg_jitwriter_load_ext(w, &f, &x, &idx, &d) < 0) {
			fprintf(stderr, "inlinejit: %s\n", d.err);
			return 1;
		}
		printf("pid %d\ndump %s\nfunc 0x%llx %zu\n", (int)getpid(), pg_jitwriter_path(w),
		       (unsigned long long)a, size);
		fflush(stdout);
	}
	fn = (void (*)(void))(uintptr_t)code;
	end = now_ms() + (argc > 2 ? strtoull(argv[2], NULL, 0) : 300);
	while (now_ms() < end)
		fn();
	if (pg_jitwriter_unload(w, idx, (uintptr_t)code, size, &d) < 0 ||
	    pg_jitwriter_close(w, &d) < 0) {
		fprintf(stderr, "inlinejit: %s\n", d.err);
		return 1;
	}
	return 0;
}
#else
int main(void)
{
	return 77;
}
#endif
