/* SPDX-License-Identifier: MIT */
/* Reading what a parser hands back, byte by byte, so that ASan sees any
 * pointer or length that escapes the input; the sum goes to a volatile
 * sink so that the compiler keeps the reads. */
#ifndef PG_FUZZ_TOUCH_H
#define PG_FUZZ_TOUCH_H

#include <stdint.h>

static volatile uint64_t sink;

static uint64_t touch_str(const char *s)
{
	uint64_t sum = 0;

	if (!s)
		return 0;
	for (; *s; s++)
		sum += (unsigned char)*s;
	return sum + 1;
}

#endif
