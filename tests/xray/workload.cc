// SPDX-License-Identifier: MIT
// XRay FDR "workload" test program for comparing time attribution: two
// threads (the main thread and one worker) each run ITERS iterations of a
// fixed call pattern in which every function busy-waits a known time of its
// own (its EXCLUSIVE time), so the expected split is known in advance:
//
//   function      exclusive/call  calls/iter   per iteration
//   thread A (main): wl_loop_a -> wl_outer -> {wl_mid -> {wl_a, wl_b}, wl_c}
//     wl_loop_a    5 us (loop)     1            5
//     wl_outer     5 us            1            5
//     wl_mid      10 us            1           10
//     wl_a         5 us            1            5
//     wl_b        10 us            1           10
//     wl_c        20 us            1           20      -> 55 us/iteration
//   thread B (worker): wl_worker -> {wl_c, wl_mid -> {wl_a, wl_b}, wl_a}
//     wl_worker    5 us (loop)     1            5
//     wl_c        20 us            1           20
//     wl_mid      10 us            1           10
//     wl_a         5 us            2           10
//     wl_b        10 us            1           10      -> 55 us/iteration
//
// Every call lasts at most 50 us, so the calls are short compared to the run
// (ITERS=3000: about 0.165 s per thread, 0.33 s of trace time in total, 33000
// function calls).  Instrumentation adds well under 1 us per call.
// The busy wait is spin_us() (xray_test.h), inlined and never instrumented,
// so its time is the caller's own time.  Nothing is erased even with the
// default threshold, but the scenario uses threshold 0 anyway.
// Scenario: fdr-workload ("func_duration_threshold_us=0").
#include <pthread.h>
#include "xray_test.h"

enum { ITERS = 3000 };

extern "C" {
NOINLINE void wl_a() { spin_us(5); }
NOINLINE void wl_b() { spin_us(10); }
NOINLINE void wl_c() { spin_us(20); }
NOINLINE void wl_mid() { spin_us(10); wl_a(); wl_b(); }
NOINLINE void wl_outer() { spin_us(5); wl_mid(); wl_c(); }
NOINLINE void wl_loop_a()
{
	for (int i = 0; i < ITERS; i++) {
		spin_us(5);
		wl_outer();
	}
}
NOINLINE void *wl_worker(void *)
{
	for (int i = 0; i < ITERS; i++) {
		spin_us(5);
		wl_c();
		wl_mid();
		wl_a();
	}
	return nullptr;
}
}

NOXRAY int main(int argc, char **argv)
{
	fdr_start(argc, argv);
	pthread_t t;
	if (pthread_create(&t, nullptr, wl_worker, nullptr))
		return 1;
	wl_loop_a();
	pthread_join(t, nullptr);
	fdr_stop(argv[0]);
	return 0;
}
