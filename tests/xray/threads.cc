// SPDX-License-Identifier: MIT
// XRay FDR test program: 4 worker threads plus the main thread, each calling
// the same small tree of functions (top -> mid -> leaf, top -> leaf) ITERS
// times, plus one slow() call (a 50 us busy wait) per thread.
//
// Scenarios (tests/gen-xray-traces.sh):
//   fdr-threads  "func_duration_threshold_us=0": every call is recorded;
//                5 threads, one 16 KiB buffer each.
//   fdr-default  "": the default 5 us threshold erases the short
//                top/mid/leaf subtrees, slow() (50 us) survives in every thread.
//   fdr-ring     "func_duration_threshold_us=0,buffer_size=256,buffer_max=2":
//                the 2-buffer ring is reused, so early history and whole
//                threads disappear (buffers in the file are not in time order).
// The functions live in a namespace so that names need demangling
// ("tree::leaf(int)").  noinline keeps the call structure at -O1.
#include <pthread.h>
#include "xray_test.h"

enum { NTHREADS = 4, ITERS = 40 };

namespace tree {
NOINLINE void leaf(int i) { sink += i; }
NOINLINE void mid(int i) { leaf(i); leaf(i + 1); }
NOINLINE void top(int i) { mid(i); leaf(i); }
NOINLINE void slow() { spin_us(50); }
NOINLINE void work()
{
	for (int i = 0; i < ITERS; i++)
		top(i);
	slow();
}
NOINLINE void *worker(void *) { work(); return nullptr; }
} // namespace tree

NOXRAY int main(int argc, char **argv)
{
	fdr_start(argc, argv);
	pthread_t t[NTHREADS];
	for (auto &th : t)
		if (pthread_create(&th, nullptr, tree::worker, nullptr))
			return 1;
	tree::work();
	for (auto &th : t)
		pthread_join(th, nullptr);
	fdr_stop(argv[0]);
	return 0;
}
