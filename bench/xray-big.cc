// SPDX-License-Identifier: MIT
// bench/xray-big.cc: writes a large LLVM XRay FDR trace for bench-xray.sh.
//
// build: clang++ -O1 -fxray-instrument -fxray-instruction-threshold=1 \
//            bench/xray-big.cc -o xray-big -lpthread
// run:   XRAY_OPTIONS="xray_mode=xray-fdr xray_logfile_base=PFX-" \
//            ./xray-big [ITERATIONS [FDR_OPTIONS]]
//
// Two worker threads run ITERATIONS (default 100000) iterations each, at
// the same time, so their buffers interleave in the file:
//  - "server": server_iteration -> 3 x handle_request(id) (its argument is
//    logged: EnterArg + CallArgument) -> parse_header, route (which
//    tail-calls lookup: a TailExit), every fourth request escape_path, and
//    render; hot leaves hash_mix, compare_keys, classify_char, checksum.
//  - "solver": solve_step -> fib(3..9) (recursion), every third iteration
//    walk_tree (a depth-5 binary recursion), normalize and hash_mix leaves.
// Nothing is inlined (every function is noinline), so every call is one
// Enter and one Exit (or TailExit) record; with func_duration_threshold_us=0
// the runtime erases none.  An iteration is about 114.75 calls (58.75 on
// the server, 56 on the solver, 3 with an argument), 1,886 bytes of trace:
// 100,000 iterations give about 189 MB and take a second or two.
//
// FDR never flushes at exit: main initialises the mode, patches, runs the
// workers, then finalizes and flushes itself.  Without FDR_OPTIONS it uses
// buffer_size=65536, func_duration_threshold_us=0 and a buffer_max large
// enough for the whole run (the runtime reuses buffers in a ring once
// buffer_max of them were handed out, which would lose the oldest ones).
//
// Printed on stdout, for the script: one "xray-big: key=value ..." line with
// the options, the calls each thread made, and the function records
// (Enter/EnterArg + Exit/TailExit) and CallArgument records the trace should
// hold.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <xray/xray_interface.h>
#include <xray/xray_log_interface.h>

#define NOINLINE __attribute__((noinline))
#define NEVER [[clang::xray_never_instrument]]

// Calls made by the current thread (each instrumented function counts
// itself), and how many of them logged an argument.
static thread_local uint64_t t_calls;
static thread_local uint64_t t_arg_calls;
#define COUNT() (++t_calls)

// ---- hot leaves ---------------------------------------------------------
NOINLINE uint64_t hash_mix(uint64_t h, uint64_t v)
{
	COUNT();
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdULL;
}

NOINLINE int compare_keys(uint64_t a, uint64_t b)
{
	COUNT();
	return (a >> 7) == (b >> 7) ? 0 : (a < b ? -1 : 1);
}

NOINLINE int classify_char(unsigned char c)
{
	COUNT();
	if (c >= 'a' && c <= 'z')
		return 1;
	if (c >= '0' && c <= '9')
		return 2;
	return c == '/' ? 3 : 0;
}

NOINLINE uint32_t checksum(uint64_t v, uint32_t seed)
{
	COUNT();
	uint32_t s = seed;
	for (int i = 0; i < 8; i++)
		s = (s << 5) + s + (uint32_t)((v >> (8 * i)) & 0xff);
	return s;
}

NOINLINE double normalize(double x)
{
	COUNT();
	return x / (1.0 + (x < 0 ? -x : x));
}

// ---- "server" thread ----------------------------------------------------
static uint64_t table[256];

NOINLINE uint64_t parse_header(uint64_t id)
{
	COUNT();
	uint64_t h = id;
	for (uint64_t k = 0; k < 6; k++)
		h = hash_mix(h, k ^ id);
	return h;
}

NOINLINE uint64_t lookup(uint64_t key)
{
	COUNT();
	uint64_t slot = hash_mix(key, 17) & 255;
	uint64_t probe = hash_mix(table[slot], key);
	if (compare_keys(probe, key) == 0)
		return probe;
	table[slot] = probe;
	return slot;
}

// A tail call (clang -O1 makes none on its own): route's TailExit, then
// lookup's Enter and Exit.
NOINLINE uint64_t route(uint64_t h)
{
	COUNT();
	h ^= h >> 29;
	[[clang::musttail]] return lookup(h);
}

NOINLINE int escape_path(uint64_t id)
{
	COUNT();
	static const char path[] = "/api/v2/items/0123/details/xyz";
	int n = 0;
	size_t off = id % 8;
	for (size_t i = 0; i < 8; i++)
		n += classify_char((unsigned char)path[off + i]);
	return n;
}

NOINLINE uint32_t render(uint64_t h, uint64_t r)
{
	COUNT();
	uint32_t s = checksum(h, 5381);
	s = checksum(r, s);
	return checksum(h ^ r, s);
}

[[clang::xray_always_instrument, clang::xray_log_args(1)]] NOINLINE uint64_t
handle_request(uint64_t id)
{
	COUNT();
	t_arg_calls++;
	uint64_t h = parse_header(id);
	uint64_t r = route(h);
	if (id % 4 == 0)
		r += (uint64_t)escape_path(id);
	return render(h, r);
}

NOINLINE uint64_t server_iteration(uint64_t i)
{
	COUNT();
	uint64_t acc = 0;
	for (uint64_t k = 0; k < 3; k++)
		acc += handle_request(i * 3 + k);
	return acc;
}

// ---- "solver" thread ----------------------------------------------------
NOINLINE uint64_t fib(unsigned n)
{
	COUNT();
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

NOINLINE uint64_t walk_tree(unsigned depth, uint64_t key)
{
	COUNT();
	if (depth == 0)
		return key & 0xff;
	return walk_tree(depth - 1, key * 2) ^ walk_tree(depth - 1, key * 2 + 1);
}

NOINLINE double solve_step(uint64_t i)
{
	COUNT();
	double x = (double)fib(3 + (unsigned)(i % 7));
	if (i % 3 == 0)
		x += (double)walk_tree(4, i);
	for (int k = 0; k < 4; k++)
		x = normalize(x + (double)k) * 10.0;
	return x + (double)(hash_mix(hash_mix(i, 3), (uint64_t)x) & 7);
}

// ---- threads ------------------------------------------------------------
struct worker {
	const char *name;
	uint64_t iterations;
	pthread_t thread;
	long tid;
	uint64_t calls, arg_calls;
	double seconds, result;
};

NEVER static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

NOINLINE void *server_main(void *p)
{
	COUNT();
	auto *w = (struct worker *)p;
	uint64_t acc = 0;
	for (uint64_t i = 0; i < w->iterations; i++)
		acc += server_iteration(i);
	w->result = (double)acc;
	w->calls = t_calls;
	w->arg_calls = t_arg_calls;
	return nullptr;
}

NOINLINE void *solver_main(void *p)
{
	COUNT();
	auto *w = (struct worker *)p;
	double acc = 0;
	for (uint64_t i = 0; i < w->iterations; i++)
		acc += solve_step(i);
	w->result = acc;
	w->calls = t_calls;
	w->arg_calls = t_arg_calls;
	return nullptr;
}

struct start {
	struct worker *w;
	void *(*fn)(void *);
};

// The thread start routine: not instrumented, so that every logged call is
// one the worker counted.
NEVER static void *thread_start(void *p)
{
	auto *s = (struct start *)p;
	s->w->tid = (long)syscall(SYS_gettid);
	double t0 = now_s();
	s->fn(s->w);
	s->w->seconds = now_s() - t0;
	return nullptr;
}

NEVER int main(int argc, char **argv)
{
	uint64_t iterations = 100000;
	if (argc > 1) {
		char *end;
		iterations = strtoull(argv[1], &end, 10);
		if (*argv[1] == '\0' || *end != '\0' || iterations == 0) {
			fprintf(stderr, "usage: %s [ITERATIONS [FDR_OPTIONS]]\n", argv[0]);
			return 2;
		}
	}
	// Room for everything: about 1,890 bytes an iteration, with a margin,
	// plus one partly filled buffer per thread.
	const uint64_t buffer_size = 65536;
	uint64_t buffer_max = (iterations * 1890 * 5 / 4) / buffer_size + 16;
	char opts[256];
	if (argc > 2)
		snprintf(opts, sizeof opts, "%s", argv[2]);
	else
		snprintf(opts, sizeof opts,
			 "buffer_size=%llu,buffer_max=%llu,func_duration_threshold_us=0",
			 (unsigned long long)buffer_size, (unsigned long long)buffer_max);

	XRayLogInitStatus st = __xray_log_init_mode("xray-fdr", opts);
	if (st != XRAY_LOG_INITIALIZED) {
		fprintf(stderr, "xray-big: __xray_log_init_mode(xray-fdr, %s) failed: %d "
			"(run with XRAY_OPTIONS=\"xray_mode=xray-fdr xray_logfile_base=PFX\")\n",
			opts, (int)st);
		return 1;
	}
	if (__xray_patch() != SUCCESS) {
		fprintf(stderr, "xray-big: __xray_patch failed\n");
		return 1;
	}

	struct worker w[2] = {};
	struct start s[2] = {{&w[0], server_main}, {&w[1], solver_main}};
	w[0].name = "server";
	w[1].name = "solver";
	double t0 = now_s();
	for (int i = 0; i < 2; i++) {
		w[i].iterations = iterations;
		if (pthread_create(&w[i].thread, nullptr, thread_start, &s[i]) != 0) {
			fprintf(stderr, "xray-big: pthread_create failed\n");
			return 1;
		}
	}
	for (int i = 0; i < 2; i++)
		pthread_join(w[i].thread, nullptr);
	double t1 = now_s();

	__xray_unpatch();
	if (__xray_log_finalize() != XRAY_LOG_FINALIZED) {
		fprintf(stderr, "xray-big: __xray_log_finalize failed\n");
		return 1;
	}
	if (__xray_log_flushLog() != XRAY_LOG_FLUSHED) {
		fprintf(stderr, "xray-big: __xray_log_flushLog failed\n");
		return 1;
	}
	double t2 = now_s();

	uint64_t calls = w[0].calls + w[1].calls;
	uint64_t args = w[0].arg_calls + w[1].arg_calls;
	printf("xray-big: iterations=%llu options=%s threads=2 calls=%llu arg_calls=%llu "
	       "function_records=%llu arg_records=%llu run_s=%.2f flush_s=%.2f\n",
	       (unsigned long long)iterations, opts, (unsigned long long)calls,
	       (unsigned long long)args, (unsigned long long)(2 * calls),
	       (unsigned long long)args, t1 - t0, t2 - t1);
	for (int i = 0; i < 2; i++)
		printf("xray-big: thread=%s tid=%ld calls=%llu arg_calls=%llu s=%.2f (%g)\n",
		       w[i].name, w[i].tid, (unsigned long long)w[i].calls,
		       (unsigned long long)w[i].arg_calls, w[i].seconds, w[i].result);
	return 0;
}
