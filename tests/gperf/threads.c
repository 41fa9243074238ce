/* SPDX-License-Identifier: MIT */
/* threads: 4 pthreads, each worker -> thread_leaf spinning; main only
 * waits in pthread_join.  SIGPROF goes to whichever thread is running, so
 * the profile merges all threads.  ~1.2 s of CPU in total. */
#include <pthread.h>
#include <stdio.h>

#include "spin.h"

__attribute__((noinline)) static void thread_leaf(unsigned long n)
{
	SPIN_BODY(n);
}

static void *worker(void *arg)
{
	unsigned long n = (unsigned long)arg;

	SPIN_BODY(n / 4);
	thread_leaf(n);
	return NULL;
}

int main(void)
{
	pthread_t t[4];
	int i;

	for (i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)240000000UL)) {
			perror("pthread_create");
			return 1;
		}
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}
