// SPDX-License-Identifier: MIT
// XRay basic-mode (v3, 32-byte records) test program: main plus 2 worker
// threads call a small tree of functions, and each thread calls an
// argument-logging function once with a known value (NORMAL record with
// action 3 followed by an ARG_PAYLOAD record): main logs 100, the workers
// 1000 + their index (1001, 1002).
// Basic mode needs no code in the program: patch_premain=true patches before
// main, and each thread's records are written when its buffer fills or the
// thread exits (the main thread's chunk usually comes last in the file).
// Run with XRAY_OPTIONS="patch_premain=true xray_mode=xray-basic
// xray_logfile_base=PFX" XRAY_BASIC_OPTIONS="func_duration_threshold_us=0".
// Scenario: basic-threads.
#include <pthread.h>
#include "xray_test.h"

enum { NWORKERS = 2, ITERS = 10 };

extern "C" {
[[clang::xray_always_instrument, clang::xray_log_args(1)]]
NOINLINE void logged(unsigned long v) { sink += v; }
NOINLINE void b_leaf(int i) { sink += i; }
NOINLINE void b_mid(int i) { b_leaf(i); b_leaf(i + 1); }
NOINLINE void b_work(unsigned long arg)
{
	logged(arg);
	for (int i = 0; i < ITERS; i++)
		b_mid(i);
}
NOINLINE void *b_worker(void *p)
{
	b_work(1000 + (unsigned long)p);
	return nullptr;
}
}

NOXRAY int main()
{
	pthread_t t[NWORKERS];
	for (unsigned long i = 0; i < NWORKERS; i++)
		if (pthread_create(&t[i], nullptr, b_worker, (void *)(i + 1)))
			return 1;
	for (auto &th : t)
		pthread_join(th, nullptr);
	b_work(100);
	return 0;
}
